// blas_tune.h: make OpenBLAS use the kernels this CPU can run, and keep idle OpenMP threads from
// spinning on a shared machine. Debian's OpenBLAS 0.3.21 does not recognise some newer CPUs
// (AVX-512 Xeons) and falls back to its much slower SSE3 kernels; OPENBLAS_CORETYPE fixes
// it, but OpenBLAS (like libgomp with GOMP_SPINCOUNT) reads it when the library loads, before
// main runs, so only a restarted process can use it.
// Constraints: the library only decides (mm_blas_env_wanted reads the CPU and the environment
// and changes nothing); replacing the process is the program's business. The one helper that
// does it, mm_blas_tune_or_reexec, is static inline: it is compiled into the programs that call
// it first thing in main (the fplab command, the benchmarks), never into libfplab, so a program
// or a Python interpreter that loads the library is never re-executed behind its back.
#ifndef FPLAB_BLAS_TUNE_H
#define FPLAB_BLAS_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

// The core type OpenBLAS should use on this CPU if the one it picked is an older, slower family
// ("SkylakeX" on AVX-512, "Haswell" on AVX2+FMA), written to want; false when its choice is
// fine, when OPENBLAS_CORETYPE is already set, or without OpenBLAS.
bool mm_blas_better_coretype(char *want, size_t len);

// One environment variable a process should start with.
typedef struct {
    char name[24];
    char value[24];
} mm_env_var;
enum { MM_BLAS_ENV_MAX = 2 };

// Fills vars[0..n) with what the process should have set before OpenBLAS and libgomp loaded, and
// returns n (0: nothing to do): OPENBLAS_CORETYPE when mm_blas_better_coretype says so, and
// GOMP_SPINCOUNT=1000 (short spinning) unless the user chose OMP_WAIT_POLICY or GOMP_SPINCOUNT.
// Reads the environment and the CPU; sets nothing.
int mm_blas_env_wanted(mm_env_var vars[MM_BLAS_ENV_MAX]);

// What decides a float32 sgemm's order of summation in this process, for a run's log: the
// CPU's model name (/proc/cpuinfo; "unknown" elsewhere), OPENBLAS_CORETYPE as the process has
// it ("" when unset), the kernel family OpenBLAS runs ("none" without a BLAS), and the widest
// vector ISA this CPU offers fplab's dispatched kernels ("avx512", "avx2" or "sse2").
typedef struct {
    char cpu[128];
    char coretype[32];
    char blas_core[32];
    char isa[8];
} mm_blas_env;
void mm_blas_env_read(mm_blas_env *e);

// Threads of OpenBLAS's own pool (n > 0; n <= 0 leaves its default).
void mm_blas_set_threads(int n);

// Process level, for a program's main before any BLAS call: sets what mm_blas_env_wanted asks
// for and re-executes the program (/proc/self/exe with the same argv) once, marked by
// FPLAB_BLAS_REEXEC=1 so that it never loops. Returns normally when nothing needs setting, on
// the second start, or if exec fails (the program then runs with the defaults). Needs POSIX
// (setenv, execv): absent from a strict -std=c11 compile without _POSIX_C_SOURCE.
#if defined(_POSIX_C_SOURCE) && _POSIX_C_SOURCE >= 200112L
static inline void mm_blas_tune_or_reexec(char **argv) {
    if (getenv("FPLAB_BLAS_REEXEC")) return;
    mm_env_var v[MM_BLAS_ENV_MAX];
    const int n = mm_blas_env_wanted(v);
    if (n == 0) return;
    for (int i = 0; i < n; i++) setenv(v[i].name, v[i].value, 1);
    setenv("FPLAB_BLAS_REEXEC", "1", 1);
    execv("/proc/self/exe", argv);
}
#endif

#endif
