// test_engine_util.h: what the engine kernels' suites share (test_mm_engine.c,
// test_engine_fast.c), header-only: the operands' distributions, and the comparison of a fast
// CPU kernel's raw y (before the output rounding) against the scalar model's (mm__engine_run, one
// dot product at a time) bit for bit, NaN payloads included (the engines' canonical NaN); then
// mm_cpu against mm_ref, NaN as NaN (mm_ref's output rounding writes its own NaN). Asserted per
// case, the first difference printed.
#ifndef FPLAB_TEST_ENGINE_UTIL_H
#define FPLAB_TEST_ENGINE_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/round.h"
#include "kernels/scaled_mm.h"
#include "kernels/scaled_mm_internal.h"
#include "test_util.h"

// The distributions of the operands (draw): D_NORMAL .. D_CANCEL random ones, then the edges.
typedef enum {
    D_NORMAL, D_POSITIVE, D_WIDE, D_CANCEL, D_SPECIAL, D_TINY, D_F16_TINY, D_F16_BIG, D_FLUSH, D_RANGE, D_TOP
} dist;

// A value of format f drawn from d (rounded to f, saturating).
static inline float draw(uint64_t *s, const fmt_t *f, dist d, size_t k) {
    const fmt_round_opts ro = {.mode = FMT_RNE, .overflow = FMT_SATURATE};
    double u = tu_sm_unif(s), v;
    const double g = sqrt(-2.0 * log(tu_sm_unif(s) + 0x1p-60)) * cos(6.283185307179586 * u);
    switch (d) {
    case D_POSITIVE: v = fabs(g) + 0.01; break;
    case D_WIDE: v = g * ldexp(1.0, tu_sm_int(s, -12, 8)); break;
    case D_CANCEL: v = (k % 2 ? -1.0 : 1.0) * (1.0 + 0.01 * g); break;
    case D_TINY: v = g * ldexp(f->min_normal, tu_sm_int(s, -3, 3)); break;  // flushes, subnormal sums
    // An f16 D's edges: sums on fp16's subnormal grid (below 2^-14, products of the formats'
    // smallest values), and sums past 65504 (fp16's largest) and 65520 (rounds to inf).
    case D_F16_TINY: v = g * ldexp(1.0, tu_sm_int(s, -12, -6)); break;
    case D_F16_BIG: v = g * ldexp(1.0, tu_sm_int(s, 3, 7)); break;
    // Products of two such bf16 values, and their sums, straddle float32's smallest normal 2^-126
    // (CDNA2 flushes what falls below it).
    case D_FLUSH: v = g * ldexp(1.0, tu_sm_int(s, -64, -62)); break;
    // Finite values past the kernels' exact range (bf16 beyond 2^+-50, whose products can leave
    // float32's normal range), one in eight, with no NaN or inf beside them to flag their line.
    case D_RANGE: {
        const int w = tu_sm_int(s, 0, 15);
        v = w == 0 ? g * ldexp(1.0, tu_sm_int(s, 51, 120)) : w == 1 ? g * ldexp(1.0, -tu_sm_int(s, 51, 120)) : g;
        break;
    }
    // Every value 1.9921875 (bf16's and fp16's, exponent 0): each product's term at the top of
    // its range, so that a step's sum with a C of exponent 0 passes int32.
    case D_TOP: v = 0x1.fcp0; break;
    case D_SPECIAL: {
        const int w = tu_sm_int(s, 0, 39);
        if (w == 0 && f->has_nan) return NAN;
        if (w == 1 && f->has_inf) return tu_sm_int(s, 0, 1) ? INFINITY : -INFINITY;
        if (w <= 5) return tu_sm_int(s, 0, 1) ? 0.0f : -0.0f;
        if (w <= 9) v = g * f->min_subnormal * 4;  // subnormals of the format
        else if (w <= 11) v = g * f->max;     // near the largest
        else v = g;
        break;
    }
    default: v = g;
    }
    return (float)fmt_round1(f, v, &ro);
}

// A fast kernel's run (mm__engine_fast_run, mm__engine_amd_run, mm__engine_block_run).
typedef int tu_engine_fast_fn(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                              size_t K, const mm_opts *o);

// C = A B (+ C0) (M x N, ldc N) by fast and by the model, then by mm_cpu and mm_ref, each on a copy
// of C0; what names the case in a failure (spec, formats, shape, distribution).
static inline void tu_engine_fast_vs_model(tu_engine_fast_fn *fast, const mm_operand *A, const mm_operand *B,
                                           size_t M, size_t N, size_t K, const mm_opts *o, const float *C0,
                                           const char *what) {
    float *C[4];
    for (int i = 0; i < 4; i++) {
        C[i] = malloc(M * N * sizeof *C[i]);
        memcpy(C[i], C0, M * N * sizeof *C0);
    }
    cr_assert_eq(mm__engine_run(C[0], N, A, B, M, N, K, o), MM_OK);
    cr_assert_eq(fast(C[1], N, A, B, M, N, K, o), MM_OK);
    cr_assert_eq(mm_ref(C[2], N, A, B, M, N, K, o), MM_OK);
    cr_assert_eq(mm_cpu(C[3], N, A, B, M, N, K, o), MM_OK);
    size_t bad = 0, first = 0, bad2 = 0, first2 = 0;
    for (size_t i = 0; i < M * N; i++) {
        uint32_t u1, u2;
        memcpy(&u1, &C[0][i], 4), memcpy(&u2, &C[1][i], 4);
        if (u1 != u2 && !bad++) first = i;
        memcpy(&u1, &C[2][i], 4), memcpy(&u2, &C[3][i], 4);
        if (u1 != u2 && !(isnan(C[2][i]) && isnan(C[3][i])) && !bad2++) first2 = i;
    }
    cr_assert_eq(bad, 0, "%s M %zu N %zu K %zu: %zu of %zu outputs differ, first (%zu, %zu): model %a (%08x), fast %a "
                 "(%08x)", what, M, N, K, bad, M * N, first / N, first % N, C[0][first], ((uint32_t *)C[0])[first],
                 C[1][first], ((uint32_t *)C[1])[first]);
    cr_assert_eq(bad2, 0, "%s: mm_cpu and mm_ref differ at %zu outputs, first (%zu, %zu): %a, %a", what, bad2,
                 first2 / N, first2 % N, C[2][first2], C[3][first2]);
    for (int i = 0; i < 4; i++) free(C[i]);
}

// The products' scaling as an addition to their exponent fields (eng_prescale_bits,
// kernels/engine/engine_lanes.h) at its edges, one kind (acc, formats fa x fb) through a fast
// kernel against the model bit for bit: lanes whose products are all zero under a zero,
// subnormal or normal C (the shift's clamp at 126: C from 2^-113 to 2^-49 keeps D normal
// there), lanes of each type's smallest products (fp8 and fp16 subnormals, bf16 at 2^-50: the
// prescale's bound), lanes with a single nonzero product, a row of the type's largest values
// (bf16: 2^50, so that products reach 2^100) and C up to 2^128 in the chain beside zero and
// nonzero products (E past frac + pre: the multiplying loop). C zero (not in the
// chain), then in the chain without and with values past 2^77 (a tile holding one multiplies in
// every lane, so those stay apart). K = 69: two whole instructions of a 32-product kind and a
// last one of 5 products (32 zero products wrongly scaled each give INT_MIN, whose even counts
// cancel).
static inline void tu_engine_scaling_edges(tu_engine_fast_fn *fast, const char *acc, const char *fa, const char *fb,
                                           uint64_t *s) {
    static const float cv[2][8] = {{0.0f, -0.0f, 0x1p-140f, 0x1p-126f, 0x1p-80f, -0x1.8p-60f, 1.5f, -3.0f},
                                   {0.0f, 0x1p-80f, 1.5f, 0x1p60f, 0x1p78f, 0x1p100f, -0x1.8p127f, 0x1.fffffep127f}};
    enum { M = 8, N = 40, K = 69 };
    for (int chain = 0; chain < 3; chain++) {
        mm_opts o;
        mm_opts_default(&o);
        cr_assert_eq(mm_acc_from_name(&o.acc, acc, NULL, 0), MM_OK);
        o.beta = chain ? 1.0f : 0.0f;
        static float a[M * K], b[K * N], C0[M * N];
        mm_operand A = {.x = a, .ld = K}, B = {.x = b, .ld = N};
        cr_assert_eq(fmt_from_name(&A.fmt, fa), FMT_OK);
        cr_assert_eq(fmt_from_name(&B.fmt, fb), FMT_OK);
        // each type's smallest nonzero value in the kernels' range (bf16: 2^-50)
        const float ta = !strcmp(fa, "bf16") ? 0x1p-50f : ldexpf(1.0f, A.fmt.emin - A.fmt.mbits);
        const float tb = !strcmp(fb, "bf16") ? 0x1p-50f : ldexpf(1.0f, B.fmt.emin - B.fmt.mbits);
        const float big = !strcmp(fa, "bf16") ? 0x1p50f : (float)A.fmt.max;
        for (size_t i = 0; i < M; i++)
            for (size_t k = 0; k < K; k++) {
                const float r = draw(s, &A.fmt, D_NORMAL, k), sg = k % 2 ? -1.0f : 1.0f;
                a[i * K + k] = i == 0 ? 0.0f : i == 1 ? sg * ta : i == 2 ? (k == 5 ? ta : 0.0f)
                             : i == 3 ? sg * 2 * ta : i == 4 ? sg * big : k % 3 == 0 ? 0.0f : r;
            }
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < N; j++) {
                const float r = draw(s, &B.fmt, D_NORMAL, k);
                b[k * N + j] = j == 0 ? 0.0f : j == 1 ? tb : j == 2 ? (k == 7 ? -tb : 0.0f)
                             : (k + j) % 5 == 0 ? 0.0f : r;
            }
        for (size_t i = 0; i < M * N; i++) C0[i] = cv[chain == 2][(i / N + i % N) % 8];
        char what[200];
        snprintf(what, sizeof what, "%s %s x %s, C %s", acc, fa, fb,
                 chain == 2 ? "in the chain, past 2^77" : chain ? "in the chain" : "zero");
        tu_engine_fast_vs_model(fast, &A, &B, M, N, K, &o, C0, what);
    }
}

#endif
