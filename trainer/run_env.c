// run_env.c: the build and machine members of a run's "start" event (run_env_internal.h). The commit
// comes from the Makefile (-DFPLAB_COMMIT on this object alone, rebuilt when it changes).
#include "trainer/run_env_internal.h"

#include "kernels/blas_tune.h"
#include "util/json.h"

#ifndef FPLAB_COMMIT  // git describe --always --dirty of the tree it was built from (Makefile)
#define FPLAB_COMMIT "unknown"
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define BUILD_ISA "avx512"
#elif defined(__AVX2__) && defined(__FMA__)
#define BUILD_ISA "avx2"
#elif defined(__x86_64__)
#define BUILD_ISA "sse2"
#else
#define BUILD_ISA "other"
#endif

void train__log_env(FILE *f, int reproducible) {
    mm_blas_env e;
    mm_blas_env_read(&e);
    fprintf(f, ",\"reproducible\":%d,\"commit\":", reproducible);
    jx_write_str(f, FPLAB_COMMIT);
    fputs(",\"cpu\":", f), jx_write_str(f, e.cpu);
    fputs(",\"openblas_coretype\":", f), jx_write_str(f, e.coretype);
    fputs(",\"blas_core\":", f), jx_write_str(f, e.blas_core);
    fputs(",\"isa\":", f), jx_write_str(f, e.isa);
    fputs(",\"build_isa\":\"" BUILD_ISA "\"", f);
}
