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

#endif
