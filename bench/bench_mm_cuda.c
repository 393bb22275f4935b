// bench_mm_cuda.c: device throughput of mm_cuda's paths at n = 4096 and 8192 (square, fp32
// output): cuBLASLt bf16 (the baseline of every ratio) and e4m3 with per-tensor scales, and
// the own tensor-core kernel (tc) on bf16, e4m3 (tensor, MX), e2m3 (MX) and e2m1 (MX, NVFP4),
// plus the SIMT kernel on e4m3 MX for reference. mm_cuda_time prepares and uploads the operands
// once and times `reps` runs of the kernel alone with CUDA events (transfers and host encoding
// are not counted). TFLOP/s = 2 n^3 / time.
// Not a test: prints a table, never fails on a timing; exits 0 with a note without a GPU.
// Usage: bench_mm_cuda [--sizes 4096,8192] [--reps R]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/mm_operand.h"
#include "kernels/scaled_mm.h"

enum { MAX_SIZES = 8 };

typedef struct {
    const char *elem, *recipe, *kernel;
} config;

static const config configs[] = {
    {"bf16", "none", "cublaslt"},  // the baseline
    {"e4m3", "tensor", "cublaslt"}, {"bf16", "none", "tc"},  {"e4m3", "tensor", "tc"},
    {"e4m3", "mx", "tc"},           {"e2m3", "mx", "tc"},    {"e2m1", "mx", "tc"},
    {"e2m1", "nvfp4", "tc"},        {"e4m3", "mx", "simt"},
};

// Milliseconds per product on the forced path, -1 when it does not apply or fails.
static double time_config(const config *c, const float *a, const float *b, size_t n, int reps,
                          char *path, size_t path_len) {
    fmt_t f;
    fmt_scaling sc;
    if (fmt_from_name(&f, c->elem) || fmt_scaling_from_name(&sc, c->recipe, NULL, 0)) return -1;
    const fmt_round_opts qo = {.overflow = FMT_SATURATE};
    mm_qmat qa, qb;
    if (mm_qmat_from_f32(&qa, MM_SIDE_A, a, n, n, &f, &sc, &qo)) return -1;
    if (mm_qmat_from_f32(&qb, MM_SIDE_B, b, n, n, &f, &sc, &qo)) return mm_qmat_free(&qa), -1;
    mm_opts o;
    mm_opts_default(&o);
    setenv("FPLAB_CUDA_KERNEL", c->kernel, 1);
    mm_cuda_plan plan = {.path = "-"};
    double ms = -1;
    if (mm_cuda_time(&ms, &plan, &qa.op, &qb.op, n, n, n, &o, reps) != MM_OK) ms = -1;
    snprintf(path, path_len, "%s", plan.path);
    mm_qmat_free(&qa), mm_qmat_free(&qb);
    return ms;
}

int main(int argc, char **argv) {
    size_t sizes[MAX_SIZES] = {4096, 8192};
    int nsizes = 2, reps = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = 0;
            for (char *p = argv[++i], *end; *p && nsizes < MAX_SIZES; p = *end ? end + 1 : end) {
                const long v = strtol(p, &end, 10);
                if (end == p || v < 16 || v > 32768 || (*end && *end != ',')) {
                    fprintf(stderr, "bench_mm_cuda: bad size list '%s'; expected e.g. 4096,8192\n", argv[i]);
                    return 2;
                }
                sizes[nsizes++] = (size_t)v;
            }
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1) {
                fprintf(stderr, "bench_mm_cuda: --reps '%s': expected a positive count\n", argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_mm_cuda [--sizes N,N,...] [--reps R]\n");
            return !strcmp(argv[i], "--help") ? 0 : 2;
        }
    }
    char msg[256];
    if (!mm_cuda_available(msg, sizeof msg)) {
        printf("bench_mm_cuda: skipped: %s\n", msg);
        return 0;
    }
    printf("bench_mm_cuda: mm_cuda device time (CUDA events, mean of %d after a warm-up), square n, fp32 "
           "output, normal operands (seed 0)\n", reps);
    printf("%-6s %-7s %-9s %6s %9s %9s %8s\n", "elem", "recipe", "path", "n", "TFLOP/s", "ms", "vs_bf16");
    for (int s = 0; s < nsizes; s++) {
        const size_t n = sizes[s];
        float *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b);
        if (!a || !b) {
            fprintf(stderr, "bench_mm_cuda: out of memory for n = %zu\n", n);
            return 1;
        }
        mm_random_f32(a, n * n, MM_DIST_NORMAL, 0, 1);
        mm_random_f32(b, n * n, MM_DIST_NORMAL, 0, 2);
        double base = -1;
        for (size_t c = 0; c < sizeof configs / sizeof *configs; c++) {
            char path[16];
            const double ms = time_config(&configs[c], a, b, n, reps, path, sizeof path);
            if (c == 0) base = ms;
            printf("%-6s %-7s %-9s %6zu ", configs[c].elem, configs[c].recipe, configs[c].kernel, n);
            if (ms < 0) {
                printf("%9s %9s %8s\n", "refused", "-", "-");
                continue;
            }
            printf("%9.1f %9.3f ", 2.0 * n * n * n / (ms * 1e-3) * 1e-12, ms);
            if (base > 0) printf("%8.2f\n", base / ms);
            else printf("%8s\n", "-");
            fflush(stdout);
        }
        free(a), free(b);
    }
    printf("vs_bf16 = cuBLASLt bf16 time / time (above 1: faster than cuBLASLt bf16)\n");
    return 0;
}
