// bench_mm.c: throughput of mm_cpu for each element format with its natural scaling recipe
// (fp16/bf16: none; e4m3/e5m2: tensor; e3m2/e2m3/e2m1: mx; e2m1 also nvfp4), against plain
// OpenBLAS cblas_sgemm on float32 at the same sizes in the same run; then of the emulated
// accumulators (rounded step by step, bit-exact with mm_ref): e4m3 operands with the 13-bit
// H100-like fp8 accumulator (e8m13, promote=128), bf16 operands with a float32 accumulator
// promoted every 128 products (fp32:promote=128) and with a bf16 accumulator. Operands are
// quantized once, outside the timing; each time is the best of at least 3 calls and of as many
// as fit in 0.25 s (up to 50: a millisecond call is noise after three), sgemm's before and after
// the configurations of a size. Square n x n x n, fp32 output, GFLOP/s = 2 n^3 /
// time. Then the matrix-engine models (bit-exact with the scalar model; the fast kernel of
// scaled_mm_cpu_engine.c): Hopper wgmma and Ada mma on e4m3, Hopper wgmma and Ampere mma on bf16;
// the AMD kinds (scaled_mm_cpu_engine_amd.c): CDNA3 on bf16 and e4m3fnuz, CDNA2 and CDNA1 on fp16
// and bf16; the Blackwell block-scaled kinds (scaled_mm_cpu_engine_block.c): MXFP8, MXFP4, NVFP4,
// and f8f6f4 without scales (e4m3 with a tensor scale; f32 and f16 D) on the same kernel.
// Not a test: prints a table, never fails on a timing.
// Usage: bench_mm [--sizes 512,1024,2048] [--emu-sizes 512,2048] [--engine-sizes 512] [--quick];
// an empty list (--sizes '') skips that table.
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FPLAB_HAVE_BLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/blas_tune.h"
#include "kernels/mm_operand.h"
#include "kernels/scaled_mm.h"
#include "util/fileio.h"

enum { MAX_SIZES = 16, MAX_CONFIGS = 24, REPS = 3, MAX_REPS = 50 };

// Whether another timed call is due: at least REPS, then while the calls so far took under
// 0.25 s.
static bool more_reps(int r, double spent) { return r < REPS || (r < MAX_REPS && spent < 0.25); }

static int parse_sizes(const char *arg, size_t *out) {
    int n = 0;  // an empty list is allowed: no sizes
    for (const char *p = arg; *p && n < MAX_SIZES;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 16384) {
            fprintf(stderr, "bench_mm: bad size list '%s'; expected e.g. 512,1024,2048\n", arg);
            exit(2);
        }
        out[n++] = (size_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
            fprintf(stderr, "bench_mm: bad size list '%s'; expected e.g. 512,1024,2048\n", arg);
            exit(2);
        }
    }
    return n;
}

typedef struct {
    const char *elem, *recipe, *acc;
} config;

// Best of REPS calls of mm_cpu on operands quantized from (a, b); -1 when mm_cpu refuses.
static double time_mm(const config *c, const float *a, const float *b, float *C, size_t n) {
    fmt_t f;
    fmt_scaling sc;
    mm_opts o;
    mm_opts_default(&o);
    if (fmt_from_name(&f, c->elem) || fmt_scaling_from_name(&sc, c->recipe, NULL, 0) ||
        mm_acc_from_name(&o.acc, c->acc, NULL, 0))
        return -1;
    const fmt_round_opts qo = {.overflow = FMT_SATURATE};
    mm_qmat qa, qb;
    if (mm_qmat_from_f32(&qa, MM_SIDE_A, a, n, n, &f, &sc, &qo)) return -1;
    if (mm_qmat_from_f32(&qb, MM_SIDE_B, b, n, n, &f, &sc, &qo)) return mm_qmat_free(&qa), -1;
    double best = -1, spent = 0;
    for (int r = 0; more_reps(r, spent); r++) {
        const double t0 = fio_now();
        const int st = mm_cpu(C, n, &qa.op, &qb.op, n, n, n, &o);
        const double t = fio_now() - t0;
        spent += t;
        if (st != MM_OK) {
            best = -1;
            break;
        }
        if (best < 0 || t < best) best = t;
    }
    mm_qmat_free(&qa), mm_qmat_free(&qb);
    return best;
}

static double time_sgemm(const float *a, const float *b, float *C, size_t n) {
#ifdef FPLAB_HAVE_BLAS
    double best = -1, spent = 0;
    for (int r = 0; more_reps(r, spent); r++) {
        const double t0 = fio_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b,
                    (int)n, 0.0f, C, (int)n);
        const double t = fio_now() - t0;
        spent += t;
        if (best < 0 || t < best) best = t;
    }
    return best;
#else
    (void)a, (void)b, (void)C, (void)n;
    return -1;
#endif
}

static void row(const char *label, const char *recipe, const char *acc, size_t n, double t, double t_sgemm) {
    const double flops = 2.0 * (double)n * (double)n * (double)n;
    printf("%-8s %-7s %-18s %6zu ", label, recipe, acc, n);
    if (t < 0) {
        printf("%10s %9s %8s\n", "refused", "-", "-");
        return;
    }
    printf("%10.2f %9.4f ", flops / t * 1e-9, t);
    if (t_sgemm > 0) printf("%8.3f\n", t_sgemm / t);
    else printf("%8s\n", "-");
}

// The rows of one size: sgemm, then every configuration of cs on the same operands. sgemm is
// timed before and after the configurations and the faster run kept, so that a burst of load
// from elsewhere during one of them does not make every ratio look good.
// --only: the configurations whose accumulator name contains it (NULL: all)
static const char *only;

static void table(const config *all, size_t nall, float *a, float *b, float *C, size_t n) {
    config cs[MAX_CONFIGS];
    size_t ncs = 0;
    for (size_t c = 0; c < nall && ncs < MAX_CONFIGS; c++)
        if (!only || strstr(all[c].acc, only)) cs[ncs++] = all[c];
    if (ncs == 0) return;
    mm_random_f32(a, n * n, MM_DIST_NORMAL, 0, 1);
    mm_random_f32(b, n * n, MM_DIST_NORMAL, 0, 2);
    double ts = time_sgemm(a, b, C, n), tq[MAX_CONFIGS];
    for (size_t c = 0; c < ncs; c++) tq[c] = time_mm(&cs[c], a, b, C, n);
    const double ts2 = time_sgemm(a, b, C, n);
    if (ts2 > 0 && ts2 < ts) ts = ts2;
    row("fp32", "-", "sgemm (OpenBLAS)", n, ts, ts);
    for (size_t c = 0; c < ncs; c++) row(cs[c].elem, cs[c].recipe, cs[c].acc, n, tq[c], ts);
    fflush(stdout);
}

int main(int argc, char **argv) {
    mm_blas_tune_or_reexec(argv);  // before any BLAS call
    size_t sizes[MAX_SIZES] = {512, 1024, 2048}, emu[MAX_SIZES] = {512, 2048}, eng[MAX_SIZES] = {512};
    int nsizes = 3, nemu = 2, neng = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            sizes[0] = 256, sizes[1] = 512, nsizes = 2;
            emu[0] = 128, emu[1] = 256, nemu = 2;
            eng[0] = 128, neng = 1;
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = parse_sizes(argv[++i], sizes);
        } else if (!strcmp(argv[i], "--emu-sizes") && i + 1 < argc) {
            nemu = parse_sizes(argv[++i], emu);
        } else if (!strcmp(argv[i], "--engine-sizes") && i + 1 < argc) {
            neng = parse_sizes(argv[++i], eng);
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_mm [--sizes N,N,...] [--emu-sizes N,N,...] [--engine-sizes N,N,...] "
                            "[--quick] [--only ACC]\n(--only: the rows whose accumulator contains ACC, e.g. cdna3 "
                            "or hopper:wgmma)\n");
            return !strcmp(argv[i], "--help") ? 0 : 2;
        }
    }
    size_t nmax = 0;
    for (int i = 0; i < nsizes; i++) nmax = sizes[i] > nmax ? sizes[i] : nmax;
    for (int i = 0; i < nemu; i++) nmax = emu[i] > nmax ? emu[i] : nmax;
    for (int i = 0; i < neng; i++) nmax = eng[i] > nmax ? eng[i] : nmax;
    nmax = nmax ? nmax : 1;
    float *a = malloc(nmax * nmax * sizeof *a), *b = malloc(nmax * nmax * sizeof *b);
    float *C = malloc(nmax * nmax * sizeof *C);
    if (!a || !b || !C) {
        fprintf(stderr, "bench_mm: out of memory for n = %zu\n", nmax);
        return 1;
    }
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("bench_mm: mm_cpu vs cblas_sgemm, square n, fp32 output, best of %d to %d calls, %d OpenMP threads, "
           "normal operands (seed 0)\n", REPS, MAX_REPS, threads);
    printf("%-8s %-7s %-18s %6s %10s %9s %8s\n", "elem", "recipe", "acc", "n", "GFLOP/s", "time_s", "vs_sgemm");

    static const config plain[] = {
        {"fp16", "none", "fp32"},   {"bf16", "none", "fp32"}, {"e4m3", "tensor", "fp32"},
        {"e5m2", "tensor", "fp32"}, {"e3m2", "mx", "fp32"},   {"e2m3", "mx", "fp32"},
        {"e2m1", "mx", "fp32"},     {"e2m1", "nvfp4", "fp32"},
    };
    static const config emulated[] = {
        {"e4m3", "tensor", "e8m13:promote=128"},
        {"bf16", "none", "fp32:promote=128"},
        {"bf16", "none", "bf16"},
    };
    for (int s = 0; s < nsizes; s++) table(plain, sizeof plain / sizeof *plain, a, b, C, sizes[s]);
    for (int s = 0; s < nemu; s++) table(emulated, sizeof emulated / sizeof *emulated, a, b, C, emu[s]);
    static const config engines[] = {
        {"e4m3", "tensor", "hopper:wgmma"},
        {"e4m3", "tensor", "hopper:wgmma:promote=128"},
        {"e4m3", "tensor", "ada:mma"},
        {"bf16", "none", "hopper:wgmma"},
        {"bf16", "none", "ampere:mma"},
        {"e4m3", "tensor", "hopper:wgmma:f16"},
        {"fp16", "none", "ampere:mma:f16"},
        {"bf16", "none", "cdna3:mfma"},
        {"e4m3fnuz", "tensor", "cdna3:mfma"},
        {"fp16", "none", "cdna2:mfma"},
        {"bf16", "none", "cdna2:mfma"},
        {"fp16", "none", "cdna1:mfma"},
        {"bf16", "none", "cdna1:mfma"},
        {"e4m3", "mx", "blackwell:tcgen05"},
        {"e2m1", "mx", "blackwell:tcgen05"},
        {"e2m1", "nvfp4", "blackwell:tcgen05"},
        {"e4m3", "tensor", "blackwell:tcgen05"},
        {"e4m3", "tensor", "blackwell:tcgen05:f16"},
    };
    for (int s = 0; s < neng; s++) table(engines, sizeof engines / sizeof *engines, a, b, C, eng[s]);
    printf("vs_sgemm = sgemm time / mm_cpu time (1 = as fast as plain float32 sgemm)\n");
    free(a), free(b), free(C);
    return 0;
}
