// verify_engines.c: the fast CPU kernels of the matrix engines (mm_cpu: kernels/engine/
// scaled_mm_cpu_engine.c, _amd.c for the AMD kinds, _block.c for the block-scaled ones) against the scalar model (mm_ref, one dot product at a time through
// kernels/engine/engine_model.c), bit for bit, on at least --dots dot products per model (default
// 1,000,000): 512 x 512 outputs per batch, K = 64 (or --k), the batches cycling through four
// operand distributions (normal, wide exponents, cancellation, specials: NaN, inf, zeros,
// subnormals). `make verify-engines` runs it; not part of `make test` (minutes). NaN outputs
// count as equal whatever their payload (mm_ref's output rounding writes its own NaN;
// tests/test_mm_engine.c compares the kernels' raw NaN bits).
// Usage: verify_engines [--dots N] [--k K] [--seed S]. Exit status 1 on any mismatch.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/round.h"
#include "kernels/scaled_mm.h"
#include "util/fileio.h"

static uint64_t sm64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double unif(uint64_t *s) { return (double)(sm64(s) >> 11) * 0x1p-53; }
static int irange(uint64_t *s, int lo, int hi) { return lo + (int)(sm64(s) % (uint64_t)(hi - lo + 1)); }

// A value of f from distribution d (0 normal, 1 wide, 2 cancellation, 3 specials), k its index.
static float draw(uint64_t *s, const fmt_t *f, int d, size_t k) {
    const fmt_round_opts ro = {.mode = FMT_RNE, .overflow = FMT_SATURATE};
    const double g = sqrt(-2.0 * log(unif(s) + 0x1p-60)) * cos(6.283185307179586 * unif(s));
    double v = g;
    if (d == 1) v = g * ldexp(1.0, irange(s, -12, 8));
    if (d == 2) v = (k % 2 ? -1.0 : 1.0) * (1.0 + 0.01 * g);
    if (d == 3) {
        const int w = irange(s, 0, 199);
        if (w == 0 && f->has_nan) return NAN;
        if (w == 1 && f->has_inf) return irange(s, 0, 1) ? INFINITY : -INFINITY;
        if (w < 20) return irange(s, 0, 1) ? 0.0f : -0.0f;
        if (w < 40) v = g * f->min_subnormal * 4;
        else if (w < 50) v = g * f->max;
    }
    return (float)fmt_round1(f, v, &ro);
}

int main(int argc, char **argv) {
    size_t dots = 1000000, K = 64;
    uint64_t seed = 21;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dots") && i + 1 < argc) dots = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--k") && i + 1 < argc) K = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else {
            fprintf(stderr, "usage: verify_engines [--dots N] [--k K] [--seed S]\n");
            return 2;
        }
    }
    // Engine, A and B formats, and for the block-scaled kinds the block and the scales' type
    // (powers of two: ue8m0; else ue4m3 values).
    static const struct {
        const char *eng, *fa, *fb;
        int block;
        bool ue4m3;
    } models[] = {
        {"hopper:wgmma", "e4m3", "e4m3", 0, false}, {"hopper:wgmma", "e5m2", "e4m3", 0, false},
        {"ada:mma", "e4m3", "e4m3", 0, false}, {"ada:mma", "e5m2", "e5m2", 0, false},
        {"hopper:wgmma", "bf16", "bf16", 0, false}, {"ampere:mma", "bf16", "bf16", 0, false},
        {"hopper:wgmma", "fp16", "fp16", 0, false}, {"ampere:mma", "fp16", "fp16", 0, false},
        {"blackwell:mma", "bf16", "bf16", 0, false}, {"cdna3:mfma", "bf16", "bf16", 0, false},
        {"cdna3:mfma", "fp16", "fp16", 0, false}, {"cdna3:mfma", "e4m3fnuz", "e4m3fnuz", 0, false},
        {"cdna3:mfma", "e5m2fnuz", "e4m3fnuz", 0, false}, {"cdna2:mfma", "fp16", "fp16", 0, false},
        {"cdna2:mfma", "bf16", "bf16", 0, false}, {"cdna1:mfma", "fp16", "fp16", 0, false},
        {"cdna1:mfma", "bf16", "bf16", 0, false}, {"blackwell:tcgen05", "e4m3", "e4m3", 32, false},
        {"blackwell:tcgen05", "e5m2", "e2m1", 32, false}, {"blackwell:tcgen05", "e2m1", "e2m1", 32, false},
        {"blackwell:tcgen05", "e2m1", "e2m1", 16, true}, {"rtx-blackwell:mma", "e2m1", "e2m1", 16, false},
        // f16 C/D (issue 37)
        {"hopper:wgmma:f16", "e4m3", "e4m3", 0, false}, {"ada:mma:f16", "e5m2", "e4m3", 0, false},
        {"hopper:wgmma:f16", "fp16", "fp16", 0, false}, {"ampere:mma:f16", "fp16", "fp16", 0, false},
        // f8f6f4 without scales (issue 37: the block kernel on unit scales)
        {"blackwell:tcgen05", "e4m3", "e4m3", 0, false}, {"blackwell:tcgen05", "e3m2", "e2m1", 0, false},
        {"rtx-blackwell:mma", "e5m2", "e4m3", 0, false}, {"blackwell:tcgen05:f16", "e4m3", "e4m3", 0, false},
        {"rtx-blackwell:mma:f16", "e2m3", "e2m1", 0, false},
    };
    const size_t n = 512;
    float *a = malloc(n * K * sizeof *a), *b = malloc(K * n * sizeof *b);
    float *C1 = malloc(n * n * sizeof *C1), *C2 = malloc(n * n * sizeof *C2);
    const size_t nbl = (K + 15) / 16;  // blocks of 16 or 32
    float *sa = malloc(n * nbl * sizeof *sa), *sb = malloc(nbl * n * sizeof *sb);
    if (!a || !b || !C1 || !C2 || !sa || !sb) return fprintf(stderr, "verify_engines: out of memory\n"), 1;
    printf("verify_engines: mm_cpu (fast kernel) vs mm_ref (scalar model), K = %zu, seed %llu\n", K,
           (unsigned long long)seed);
    int fail = 0;
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        mm_opts o;
        mm_opts_default(&o);
        char msg[300];
        const char *eng = models[m].eng, *fa = models[m].fa, *fb = models[m].fb;
        mm_operand A = {.x = a, .ld = K}, B = {.x = b, .ld = n};
        if (models[m].block)
            A.scales = sa, B.scales = sb, A.block_k = B.block_k = models[m].block;
        if (mm_acc_from_name(&o.acc, eng, msg, sizeof msg) || fmt_from_name(&A.fmt, fa) || fmt_from_name(&B.fmt, fb)) {
            fprintf(stderr, "verify_engines: %s %s x %s: %s\n", eng, fa, fb, msg);
            return 1;
        }
        size_t done = 0, bad = 0, model_outputs = 0;
        mm_path path = {.kernel = "none"};
        double t_ref = 0, t_cpu = 0;
        for (int batch = 0; done < dots; batch++) {
            const int d = batch % 4;
            for (size_t i = 0; i < n * K; i++) a[i] = draw(&seed, &A.fmt, d, i % K);
            for (size_t i = 0; i < K * n; i++) b[i] = draw(&seed, &B.fmt, d, i / n);
            for (size_t i = 0; i < n * nbl; i++) {  // ue4m3: e4m3 values from 2^-6 up; ue8m0: 2^-4 .. 2^4
                sa[i] = models[m].ue4m3 ? ldexpf(1.0f + (float)irange(&seed, 0, 7) / 8, irange(&seed, -6, 4))
                                        : ldexpf(1.0f, irange(&seed, -4, 4));
                sb[i] = models[m].ue4m3 ? ldexpf(1.0f + (float)irange(&seed, 0, 7) / 8, irange(&seed, -6, 4))
                                        : ldexpf(1.0f, irange(&seed, -4, 4));
            }
            double t0 = fio_now();
            const int r1 = mm_ref(C1, n, &A, &B, n, n, K, &o);
            t_ref += fio_now() - t0, t0 = fio_now();
            o.path = &path;  // which kernel mm_cpu ran, and what it left to the scalar model
            const int r2 = mm_cpu(C2, n, &A, &B, n, n, K, &o);
            o.path = NULL;
            t_cpu += fio_now() - t0;
            model_outputs += path.model_outputs;
            if (r1 || r2) {
                fprintf(stderr, "verify_engines: %s: mm_ref %d, mm_cpu %d\n", eng, r1, r2);
                return 1;
            }
            for (size_t i = 0; i < n * n; i++) {
                uint32_t u1, u2;
                memcpy(&u1, &C1[i], 4), memcpy(&u2, &C2[i], 4);
                if (u1 != u2 && !(isnan(C1[i]) && isnan(C2[i])) && bad++ < 3)
                    printf("  mismatch %s %s x %s dist %d (%zu, %zu): model %a fast %a\n", eng, fa, fb, d, i / n,
                           i % n, C1[i], C2[i]);
            }
            done += n * n;
        }
        printf("%-17s %-8s x %-8s %9zu dot products, %zu mismatches (scalar model %.2f s, mm_cpu %.2f s)\n", eng,
               fa, fb, done, bad, t_ref, t_cpu);
        printf("%-17s   kernel %s, %zu outputs left to the scalar model\n", "", path.kernel, model_outputs);
        fflush(stdout);
        fail |= bad != 0;
    }
    free(a), free(b), free(C1), free(C2), free(sa), free(sb);
    printf("verify_engines: %s\n", fail ? "MISMATCHES" : "all bit for bit");
    return fail;
}
