// test_mm_ref.c: the MPFR reference of scaled_mm.h (mm_ref, mm_ref_exact) and the
// backend-independent functions (mm_opts_default, mm_acc_from_name, mm_validate).
// Hand-worked cases: cancellation a float32 accumulator loses, one rounding of the exact value
// (values just off a tie, in every mode), layouts (transposes, leading dimensions, 1 x N, M x 1),
// K-block and tensor scales with K not a multiple of block_k, alpha/beta, e4m3 output with both
// overflow policies, inf/NaN, emulated accumulators (bf16, e8m13, fp16 overflow, promotion).
// Cross-checks: the emulated accumulator's rounding against fmt_ref_round on sums exact in
// double (random bf16-grid inputs, every deterministic mode, several accumulator formats), and
// random small-integer problems whose exact value a double computes. Seed: env FPLAB_SEED.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/round_ref.h"
#include "kernels/scaled_mm.h"
#include "test_mm_util.h"
#include "test_util.h"

// --- helpers

// This suite's seed: FPLAB_SEED, else its default; printed with the test's name.
static uint64_t test_seed(const char *test) { return tu_seed("test_mm_ref", test, 0x5eed2024ULL); }

static mm_operand operand(const float *x, size_t ld, bool trans, const char *fmt) {
    mm_operand o;
    memset(&o, 0, sizeof o);
    o.x = x, o.ld = ld, o.trans = trans, o.fmt = tu_fmt(fmt);
    return o;
}

// C = A (1 x K) . B (K x 1) with opts o; returns C.
static float dot1(const float *a, const float *b, size_t K, const char *fmt, const mm_opts *o) {
    mm_operand A = operand(a, K, false, fmt), B = operand(b, 1, false, fmt);
    float c = NAN;
    cr_assert_eq(mm_ref(&c, 1, &A, &B, 1, 1, K, o), MM_OK);
    return c;
}

// --- backend-independent functions

Test(mm_api, defaults) {
    mm_opts o;
    mm_opts_default(&o);
    cr_assert_eq(o.alpha, 1.0f);
    cr_assert_eq(o.beta, 0.0f);
    cr_assert_str_eq(o.acc.fmt.name, "fp32");
    cr_assert_str_eq(o.out_fmt.name, "fp32");
    cr_assert_eq(o.acc.mode, FMT_RNE);
    cr_assert_eq(o.out_round.mode, FMT_RNE);
    cr_assert_eq(o.out_round.overflow, FMT_OVERFLOW_IEEE);
    cr_assert(!mm_acc_is_emulated(&o.acc));
}

Test(mm_api, acc_from_name) {
    char msg[256];
    mm_acc a;
    cr_assert_eq(mm_acc_from_name(&a, "fp32", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(!mm_acc_is_emulated(&a));
    cr_assert_eq(mm_acc_from_name(&a, "bf16", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(mm_acc_is_emulated(&a));
    cr_assert_eq(a.fmt.mbits, 7);
    cr_assert_eq(a.mode, FMT_RNE);
    cr_assert_eq(a.promote_every, 0);
    cr_assert_eq(mm_acc_from_name(&a, "m13", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(a.fmt.ebits == 8 && a.fmt.mbits == 13 && a.fmt.bias == 127 && a.fmt.has_inf);
    cr_assert_eq(mm_acc_from_name(&a, "fp16:promote=128:rtz", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(a.fmt.ebits == 5 && a.fmt.mbits == 10 && a.mode == FMT_RTZ && a.promote_every == 128);
    cr_assert_eq(mm_acc_from_name(&a, "e8m13:rup:promote=4", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(a.fmt.mbits == 13 && a.mode == FMT_RUP && a.promote_every == 4);
    cr_assert_eq(mm_acc_from_name(&a, "e5m10:fn:rto", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(a.fmt.special == FMT_FN && a.mode == FMT_RTO);
    // float32 truncating accumulation is an emulated accumulator too.
    cr_assert_eq(mm_acc_from_name(&a, "fp32:rtz", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(mm_acc_is_emulated(&a));

    const char *bad[] = {"", "m", "m0", "m24", "m13x", "zz", "bf16:promote=", "bf16:promote=-1",
                         "bf16:promote=3x", "bf16:rtz:rne", "bf16:sr", "fp64", "e8m0", "e2m1",
                         "bf16:foo", "ue5m2", "bf16:promote=1:promote=2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        msg[0] = 0;
        a.promote_every = 77;
        cr_assert_eq(mm_acc_from_name(&a, bad[i], msg, sizeof msg), MM_EINVAL, "'%s' accepted", bad[i]);
        cr_assert(msg[0] != 0, "'%s': no message", bad[i]);
        cr_assert_eq(a.promote_every, 77, "'%s': output written on failure", bad[i]);
    }
    cr_assert_eq(mm_acc_from_name(&a, "zz", msg, sizeof msg), MM_EINVAL);
    cr_assert(strstr(msg, "zz") != NULL, "message names the input: %s", msg);
    cr_assert_eq(mm_acc_from_name(&a, "bf16:sr", msg, sizeof msg), MM_EINVAL);
    cr_assert(strstr(msg, "stochastic") != NULL, "%s", msg);
}

Test(mm_api, validate) {
    static const float x[64];
    const float sc[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    char msg[256];
    mm_opts o;
    mm_opts_default(&o);
    mm_operand A = operand(x, 5, false, "fp32"), B = operand(x, 3, false, "fp32");  // 2x5 . 5x3
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert_eq(msg[0], 0);
    cr_assert_eq(mm_validate(&A, &B, 0, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 0, &o, msg, sizeof msg), MM_EINVAL);
    A.ld = 4;
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    cr_assert(strstr(msg, "ld") != NULL, "%s", msg);
    A.trans = true, A.ld = 2;  // stored 5 x 2
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_OK, "%s", msg);
    A.ld = 1;
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    A.trans = false, A.ld = 5;
    B.ld = 2;
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    B.trans = true, B.ld = 5;  // stored 3 x 5
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_OK, "%s", msg);
    B.ld = 4;
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    B.trans = false, B.ld = 3;
    // Blocks: negative, unequal lengths on two scaled operands; no scales -> warning only.
    A.block_k = -1;
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    A.block_k = 2, A.scales = sc, B.block_k = 3, B.scales = sc;
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    cr_assert(strstr(msg, "block_k") != NULL, "%s", msg);
    B.block_k = 2;
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_OK, "%s", msg);
    B.block_k = 0;  // per-column scales with K-blocked A: fine
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_OK, "%s", msg);
    B.scales = NULL, B.block_k = 3;
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(strstr(msg, "warning") != NULL, "%s", msg);
    A.scales = NULL, A.block_k = 0, B.block_k = 0;
    // Emulated accumulators: elements of at most 12 bits of precision.
    o = tu_acc_opts("bf16");
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    cr_assert(strstr(msg, "precision") != NULL, "%s", msg);
    A.fmt = tu_fmt("fp16"), B.fmt = tu_fmt("e4m3");
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_OK, "%s", msg);
    A.fmt = tu_fmt("e4m12");  // 13 bits
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    A.fmt = tu_fmt("fp16");
    o.acc.promote_every = -1;
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    o.acc.promote_every = 0;
    o.acc.fmt = tu_fmt("e8m24");  // 25 bits: beyond float32
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    o.acc.fmt = tu_fmt("bf16");
    o.out_fmt = tu_fmt("fp64");
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    cr_assert(strstr(msg, "output") != NULL, "%s", msg);
    o.out_fmt = tu_fmt("e4m3");
    o.out_round.mode = (fmt_round_mode)42;
    cr_assert_eq(mm_validate(&A, &B, 2, 3, 5, &o, msg, sizeof msg), MM_EINVAL);
    // mm_ref refuses what mm_validate refuses, and a short ldc.
    float c[16];
    cr_assert_eq(mm_ref(c, 3, &A, &B, 2, 3, 5, &o), MM_EINVAL);
    mm_opts_default(&o);
    cr_assert_eq(mm_ref(c, 2, &A, &B, 2, 3, 5, &o), MM_EINVAL);
    cr_assert_eq(mm_ref(c, 3, &A, &B, 2, 3, 5, &o), MM_OK);
}

// --- float32 accumulation: the exact value, rounded once

Test(mm_ref, cancellation_exact) {
    mm_opts o;
    mm_opts_default(&o);
    const float a[3] = {1.0f, 0x1p24f, -0x1p24f}, b[3] = {1, 1, 1};
    // float32 left to right: 1 + 2^24 is a tie that goes to 2^24, then 0.
    float acc = 0;
    for (int k = 0; k < 3; k++) acc += a[k] * b[k];
    cr_assert_eq(acc, 0.0f);
    cr_assert_eq(dot1(a, b, 3, "fp32", &o), 1.0f);
    // A residual 2^-140 (a float32 subnormal) under terms of 2^120.
    const float a2[3] = {0x1p100f, 0x1p-100f, -0x1p100f}, b2[3] = {0x1p20f, 0x1p-40f, 0x1p20f};
    cr_assert_eq(dot1(a2, b2, 3, "fp32", &o), 0x1p-140f);
    double ex, ad;
    mm_operand A = operand(a, 3, false, "fp32"), B = operand(b, 1, false, "fp32");
    cr_assert_eq(mm_ref_exact(&ex, &ad, NULL, 0, &A, &B, 1, 1, 3, &o), MM_OK);
    cr_assert_eq(ex, 1.0);
    cr_assert_eq(ad, 1.0 + 0x1p25);
    // beta C enters both; NULL outputs are allowed.
    const float cin = -3.0f;
    o.alpha = 2.0f, o.beta = 0.5f;
    cr_assert_eq(mm_ref_exact(&ex, &ad, &cin, 1, &A, &B, 1, 1, 3, &o), MM_OK);
    cr_assert_eq(ex, 2.0 - 1.5);
    cr_assert_eq(ad, 2.0 * (1.0 + 0x1p25) + 1.5);
    cr_assert_eq(mm_ref_exact(NULL, &ad, &cin, 1, &A, &B, 1, 1, 3, &o), MM_OK);
    cr_assert_eq(mm_ref_exact(&ex, NULL, &cin, 1, &A, &B, 1, 1, 3, &o), MM_OK);
}

// 1 + 2^-24 + 2^-80: just above the tie between 1 and 1 + 2^-23. A double sum loses 2^-80 and
// leaves the tie; the single rounding of the exact value must not.
Test(mm_ref, one_rounding_every_mode) {
    const float a[3] = {1.0f, 0x1p-24f, 0x1p-80f}, b[3] = {1, 1, 1};
    const float up = 1.0f + 0x1p-23f;
    const struct { fmt_round_mode m; float pos, tie; } cases[] = {
        {FMT_RNE, up, 1.0f}, {FMT_RNA, up, up}, {FMT_RTZ, 1.0f, 1.0f},
        {FMT_RUP, up, up}, {FMT_RDN, 1.0f, 1.0f}, {FMT_RTO, up, up},
    };
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        mm_opts o;
        mm_opts_default(&o);
        o.out_round.mode = cases[t].m;
        const char *mn = fmt_mode_name(cases[t].m);
        cr_assert(tu_samef(dot1(a, b, 3, "fp32", &o), cases[t].pos), "%s", mn);
        cr_assert(tu_samef(dot1(a, b, 2, "fp32", &o), cases[t].tie), "%s: tie", mn);  // 1 + 2^-24
        // Negated through alpha: the directed modes swap.
        o.alpha = -1.0f;
        float neg = -cases[t].pos;
        if (cases[t].m == FMT_RUP) neg = -1.0f;
        if (cases[t].m == FMT_RDN) neg = -up;
        cr_assert(tu_samef(dot1(a, b, 3, "fp32", &o), neg), "%s: negative", mn);
    }
}

// A is 2 x 3, B is 3 x 2; every transpose combination with padded leading dimensions (the
// padding holds NaN, which must never be read).
Test(mm_ref, layouts) {
    const float a[2][3] = {{1, 2, 3}, {4, 5, 6}}, b[3][2] = {{7, 8}, {9, 10}, {11, 12}};
    const float want[2][2] = {{58, 64}, {139, 154}};
    mm_opts o;
    mm_opts_default(&o);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            float as[16], bs[16], c[2][5];
            for (int i = 0; i < 16; i++) as[i] = bs[i] = NAN;
            const size_t lda = 5, ldb = 4;  // stored A: 2x3 or 3x2; B: 3x2 or 2x3
            for (int i = 0; i < 2; i++)
                for (int k = 0; k < 3; k++) {
                    if (ta) as[k * lda + i] = a[i][k]; else as[i * lda + k] = a[i][k];
                    if (tb) bs[i * ldb + k] = b[k][i]; else bs[k * ldb + i] = b[k][i];
                }
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 5; j++) c[i][j] = -1;
            mm_operand A = operand(as, lda, ta, "fp32"), B = operand(bs, ldb, tb, "fp32");
            cr_assert_eq(mm_ref(&c[0][0], 5, &A, &B, 2, 2, 3, &o), MM_OK);
            for (int i = 0; i < 2; i++) {
                for (int j = 0; j < 2; j++)
                    cr_assert_eq(c[i][j], want[i][j], "ta=%d tb=%d C[%d,%d] = %g", ta, tb, i, j, c[i][j]);
                for (int j = 2; j < 5; j++) cr_assert_eq(c[i][j], -1.0f, "padding of C written");
            }
        }
}

Test(mm_ref, row_and_column_vectors) {
    mm_opts o;
    mm_opts_default(&o);
    const float a[4] = {1, -2, 3, 0.5f};
    const float b[4][3] = {{1, 0, 2}, {1, 1, 0}, {1, 0, 1}, {2, 4, 8}};
    float c[3];
    mm_operand A = operand(a, 4, false, "fp32"), B = operand(&b[0][0], 3, false, "fp32");
    cr_assert_eq(mm_ref(c, 3, &A, &B, 1, 3, 4, &o), MM_OK);  // 1 x 3
    cr_assert(c[0] == 3 && c[1] == 0 && c[2] == 9, "%g %g %g", c[0], c[1], c[2]);
    // M x 1: A 3 x 4 (b transposed), B the column a.
    mm_operand At = operand(&b[0][0], 3, true, "fp32"), Bc = operand(a, 1, false, "fp32");
    cr_assert_eq(mm_ref(c, 1, &At, &Bc, 3, 1, 4, &o), MM_OK);
    cr_assert(c[0] == 3 && c[1] == 0 && c[2] == 9, "%g %g %g", c[0], c[1], c[2]);
}

// K = 5, block_k = 2 (blocks {0,1} {2,3} {4}), power-of-two block scales, tensor scales,
// alpha and beta. C[0,0] by hand: P = 3, 7, 5; sa*sb = 8, 2, 2 -> 24 + 14 + 10 = 48;
// * ta tb (0.5 * 3) * alpha 2 = 144; + beta (-0.5) * C (10) = 139.
Test(mm_ref, block_and_tensor_scales) {
    const float a[2][5] = {{1, 2, 3, 4, 5}, {-1, 0.5f, 2, 0, 8}};
    const float b[5][2] = {{1, 2}, {1, -1}, {1, 0.25f}, {1, 4}, {1, 1}};
    const float sa[2][3] = {{1, 2, 4}, {0.5f, 8, 0.125f}};
    const float sb[3][2] = {{8, 2}, {1, 0.5f}, {0.5f, 16}};
    float c[2][2] = {{10, -4}, {0.25f, NAN}};
    mm_operand A = operand(&a[0][0], 5, false, "fp32"), B = operand(&b[0][0], 2, false, "fp32");
    A.scales = &sa[0][0], A.block_k = 2, A.tensor_scale = 0.5f;
    B.scales = &sb[0][0], B.block_k = 2, B.tensor_scale = 3.0f;
    mm_opts o;
    mm_opts_default(&o);
    o.alpha = 2.0f, o.beta = -0.5f;
    double want[2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double s = 0;
            for (int k = 0; k < 5; k++) s += (double)a[i][k] * b[k][j] * sa[i][k / 2] * sb[k / 2][j];
            want[i][j] = 2.0 * 0.5 * 3.0 * s - 0.5 * c[i][j];
        }
    cr_assert_eq(want[0][0], 139.0);
    cr_assert_eq(mm_ref(&c[0][0], 2, &A, &B, 2, 2, 5, &o), MM_OK);
    cr_assert_eq(c[0][0], 139.0f);
    cr_assert_eq(c[0][1], (float)want[0][1]);
    cr_assert_eq(c[1][0], (float)want[1][0]);
    cr_assert(isnan(c[1][1]), "beta * NaN C must be NaN");
    // Per-row scales of A (block_k 0, one scale per row) with K-blocked B; tensor scale 0 is 1.
    const float srow[2] = {4, 0.25f};
    A.scales = srow, A.block_k = 0, A.tensor_scale = 0, B.tensor_scale = 0;
    o.alpha = 1, o.beta = 0;
    float c2[2][2] = {{NAN, NAN}, {NAN, NAN}};  // beta 0: C is not read
    cr_assert_eq(mm_ref(&c2[0][0], 2, &A, &B, 2, 2, 5, &o), MM_OK);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double s = 0;
            for (int k = 0; k < 5; k++) s += (double)a[i][k] * b[k][j] * srow[i] * sb[k / 2][j];
            cr_assert_eq(c2[i][j], (float)s, "C[%d,%d] = %g, want %g", i, j, c2[i][j], s);
        }
}

// Output rounding to e4m3 (max 448, no inf): both overflow policies, and a value 2^-30 off the
// tie 0.296875 between 0.28125 and 0.3125 (lost in a float32 sum, kept by the exact value).
Test(mm_ref, e4m3_output) {
    const float a[3] = {1000.0f, 0.25f, 0.046875f}, b[3] = {1, 1, 1};
    const float tiny[2] = {0x1p-30f, -0x1p-30f};
    mm_opts o;
    mm_opts_default(&o);
    o.out_fmt = tu_fmt("e4m3");
    o.out_round.overflow = FMT_SATURATE;
    cr_assert_eq(dot1(a, b, 1, "fp32", &o), 448.0f);
    o.alpha = -1;
    cr_assert_eq(dot1(a, b, 1, "fp32", &o), -448.0f);
    o.alpha = 1;
    o.out_round.overflow = FMT_OVERFLOW_IEEE;
    cr_assert(isnan(dot1(a, b, 1, "fp32", &o)), "ieee overflow in e4m3 is NaN");
    o.out_round.mode = FMT_RTZ;  // toward zero never overflows to inf/NaN
    cr_assert_eq(dot1(a, b, 1, "fp32", &o), 448.0f);
    o.out_round.mode = FMT_RNE;
    const float a460[1] = {460.0f};  // below the overflow threshold 464
    cr_assert_eq(dot1(a460, b, 1, "fp32", &o), 448.0f);
    // The tie and either side of it.
    cr_assert_eq(dot1(a + 1, b, 2, "fp32", &o), 0.3125f);  // tie: even significand 1.010
    float a3[3] = {0.25f, 0.046875f, tiny[0]};
    cr_assert_eq(dot1(a3, b, 3, "fp32", &o), 0.3125f);
    a3[2] = tiny[1];
    cr_assert_eq(dot1(a3, b, 3, "fp32", &o), 0.28125f);
    o.out_round.mode = FMT_RNA;
    cr_assert_eq(dot1(a3, b, 3, "fp32", &o), 0.28125f);
}

// Stochastic output rounding: each C[0,j] draws its own index; always a neighbour, both seen.
Test(mm_ref, stochastic_output) {
    enum { N = 64 };
    const float a[2] = {0.25f, 0.046875f};
    float b[2 * N], c[N];
    for (int i = 0; i < 2 * N; i++) b[i] = 1;
    mm_operand A = operand(a, 2, false, "fp32"), B = operand(b, N, false, "fp32");
    mm_opts o;
    mm_opts_default(&o);
    o.out_fmt = tu_fmt("e4m3");
    o.out_round.mode = FMT_SR;
    o.out_round.seed = test_seed("stochastic_output");
    cr_assert_eq(mm_ref(c, N, &A, &B, 1, N, 2, &o), MM_OK);
    int up = 0;
    for (int j = 0; j < N; j++) {
        cr_assert(c[j] == 0.28125f || c[j] == 0.3125f, "C[%d] = %g", j, c[j]);
        up += c[j] == 0.3125f;
    }
    cr_assert(up > 0 && up < N, "%d of %d rounded up", up, N);
}

Test(mm_ref, inf_and_nan) {
    mm_opts o;
    mm_opts_default(&o);
    const float one[2] = {1, 1};
    const float ai[2] = {INFINITY, 1}, z[2] = {0, 1};
    cr_assert(isnan(dot1(ai, z, 2, "fp32", &o)), "inf * 0");
    cr_assert_eq(dot1(ai, one, 2, "fp32", &o), INFINITY);
    const float aii[2] = {INFINITY, -INFINITY};
    cr_assert(isnan(dot1(aii, one, 2, "fp32", &o)), "inf - inf");
    const float an[2] = {NAN, 0};
    cr_assert(isnan(dot1(an, one, 2, "fp32", &o)), "NaN");
    // Overflow of the exact sum in the output: 2^127 * 4 -> inf; saturate -> max.
    const float big[2] = {0x1p127f, 0x1p127f}, four[2] = {2, 2};
    cr_assert_eq(dot1(big, four, 2, "fp32", &o), INFINITY);
    o.out_round.overflow = FMT_SATURATE;
    cr_assert_eq(dot1(big, four, 2, "fp32", &o), FLT_MAX);
    // A product beyond float32 cancelled exactly: 2^127 * 2 - 2^127 * 2 + 1 = 1.
    const float c3[3] = {0x1p127f, -0x1p127f, 1}, d3[3] = {2, 2, 1};
    cr_assert_eq(dot1(c3, d3, 3, "fp32", &o), 1.0f);
    // alpha 0 times an inf sum is NaN (IEEE).
    mm_opts_default(&o);
    o.alpha = 0;
    cr_assert(isnan(dot1(ai, one, 2, "fp32", &o)), "0 * inf");
    cr_assert_eq(dot1(one, one, 2, "fp32", &o), 0.0f);
}

// --- emulated accumulators

// 1 + 256 copies of 2^-8 in a bf16 accumulator (8 bits): 1 + 2^-8 is the tie between 1 and
// 1 + 2^-7. rne: every addition ties to 1 -> 1. rtz, rdn: 1. rup: each addition adds an ulp,
// 128 of 2^-7 reach 2, then 128 of 2^-6 reach 4. rna: up to 2 like rup, then 2 + 2^-8 is below
// the midpoint -> 2. rto: 1 -> 1 + 2^-7 (odd), which then stays. The exact sum is 2.
Test(mm_emulated, bf16_swamping_every_mode) {
    enum { K = 257 };
    float a[K], b[K];
    a[0] = 1;
    for (int k = 1; k < K; k++) a[k] = 0x1p-8f;
    for (int k = 0; k < K; k++) b[k] = 1;
    const struct { const char *spec; float want; } cases[] = {
        {"bf16", 1.0f}, {"bf16:rne", 1.0f}, {"bf16:rtz", 1.0f}, {"bf16:rdn", 1.0f},
        {"bf16:rup", 4.0f}, {"bf16:rna", 2.0f}, {"bf16:rto", 1.0f + 0x1p-7f},
        {"fp32", 2.0f},
        // Promotion every 16: [1, 15 x 2^-8] -> 1, then 15 chunks of 16 x 2^-8 = 2^-4 exact,
        // then one 2^-8: 1 + 15/16 + 1/256 = 497/256.
        {"bf16:promote=16", 497.0f / 256},
        // Every 100: 1 + 99 x 2^-8 -> 1; 100 x 2^-8 and 57 x 2^-8 exact: 1 + 157/256.
        {"bf16:promote=100", 413.0f / 256},
        {"bf16:promote=1", 2.0f},  // every product alone: no accumulator rounding left
        {"bf16:promote=300", 1.0f},
        // fp32 precision, step by step, truncating: nothing lost here (exact sums).
        {"fp32:rtz", 2.0f},
    };
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        mm_opts o = tu_acc_opts(cases[t].spec);
        const float c = dot1(a, b, K, "bf16", &o);
        cr_assert(tu_samef(c, cases[t].want), "%s: %a, want %a", cases[t].spec, c, cases[t].want);
    }
    // K-blocks end segments like promotion: block_k 16 with unit scales is promote=16.
    float sa[17], sb[17];
    for (int g = 0; g < 17; g++) sa[g] = sb[g] = 1;
    mm_operand A = operand(a, K, false, "bf16"), B = operand(b, 1, false, "bf16");
    A.scales = sa, A.block_k = 16, B.scales = sb, B.block_k = 16;
    mm_opts o = tu_acc_opts("bf16");
    float c;
    cr_assert_eq(mm_ref(&c, 1, &A, &B, 1, 1, K, &o), MM_OK);
    cr_assert_eq(c, 497.0f / 256);
    // Block scales multiply each block's rounded partial sum: scale the first block by 2.
    sa[0] = 2;
    cr_assert_eq(mm_ref(&c, 1, &A, &B, 1, 1, K, &o), MM_OK);
    cr_assert_eq(c, 2.0f + 15.0f / 16 + 1.0f / 256);
    // Promotion counts from each block's start: blocks of 16, promote 10 -> chunks of 10 and 6.
    // Chunk [0, 10) = 1 + 9 x 2^-8 -> 1 (9 lost); every later chunk is exact: 1 + 247/256.
    // (Counting 10s from k = 0 instead would lose only a[1..9] too, but give other chunks;
    // with promote 20: [0, 16) loses 15 -> 1 + 241/256, versus [0, 20) losing 19.)
    sa[0] = 1;
    o.acc.promote_every = 10;
    cr_assert_eq(mm_ref(&c, 1, &A, &B, 1, 1, K, &o), MM_OK);
    cr_assert_eq(c, 1.0f + 247.0f / 256, "%a", c);
    o.acc.promote_every = 20;
    cr_assert_eq(mm_ref(&c, 1, &A, &B, 1, 1, K, &o), MM_OK);
    cr_assert_eq(c, 1.0f + 241.0f / 256, "%a", c);
    // The 1 at the start of block 1 instead (K = 32, blocks of 16, promote 10): chunks [16, 26)
    // -> 1 (9 lost) and [26, 32) -> 6 x 2^-8; block 0 exact: 1 + 22/256. (Chunks counted
    // from k = 0 would be [16, 20) (3 lost), [20, 30), [30, 32): 1 + 28/256.)
    a[0] = 0x1p-8f, a[16] = 1;
    o.acc.promote_every = 10;
    cr_assert_eq(mm_ref(&c, 1, &A, &B, 1, 1, 32, &o), MM_OK);
    cr_assert_eq(c, 1.0f + 22.0f / 256, "%a", c);
}

// e8m13 (14 bits, H100 fp8-style accumulator): 1 + 2^-14 is a tie. 1 + 256 x 2^-14: rne 1,
// rup 1 + 256 x 2^-13 = 1 + 2^-5; exact 1 + 2^-6.
Test(mm_emulated, e8m13) {
    enum { K = 257 };
    float a[K], b[K];
    a[0] = 1;
    for (int k = 1; k < K; k++) a[k] = 0x1p-14f;
    for (int k = 0; k < K; k++) b[k] = 1;
    mm_opts o = tu_acc_opts("m13");
    cr_assert_eq(dot1(a, b, K, "bf16", &o), 1.0f);
    o = tu_acc_opts("e8m13:rup");
    cr_assert_eq(dot1(a, b, K, "bf16", &o), 1.0f + 0x1p-5f);
    o = tu_acc_opts("fp32");
    cr_assert_eq(dot1(a, b, K, "bf16", &o), 1.0f + 0x1p-6f);
    // Promotion every 128 products: [1, 127 x 2^-14] -> 1, then 128 x 2^-14 and 2^-14 exact.
    o = tu_acc_opts("m13:promote=128");
    cr_assert_eq(dot1(a, b, K, "bf16", &o), 1.0f + 129 * 0x1p-14f);
}

// The accumulator overflows like IEEE arithmetic: fp16 60000 + 60000 -> inf (rne), 65504
// (rtz); a format without inf (e4m3 as accumulator) gives NaN.
Test(mm_emulated, accumulator_overflow) {
    const float a[3] = {60000, 60000, -60000}, b[3] = {1, 1, 1};
    mm_opts o = tu_acc_opts("fp16");
    cr_assert_eq(dot1(a, b, 2, "fp16", &o), INFINITY);
    cr_assert_eq(dot1(a, b, 3, "fp16", &o), INFINITY);  // inf stays inf
    o = tu_acc_opts("fp16:rtz");
    cr_assert_eq(dot1(a, b, 3, "fp16", &o), 65504.0f - 60000.0f);
    o = tu_acc_opts("fp16:rdn");  // positive overflow toward -inf: max
    cr_assert_eq(dot1(a, b, 2, "fp16", &o), 65504.0f);
    o = tu_acc_opts("fp16:promote=1");  // promoted every product: float32 holds 120000
    cr_assert_eq(dot1(a, b, 2, "fp16", &o), 120000.0f);
    o = tu_acc_opts("e4m3");
    const float c[2] = {256, 256};
    cr_assert(isnan(dot1(c, b, 2, "e4m3", &o)), "e4m3 accumulator overflow is NaN");
    // inf * 0 in an emulated accumulator is NaN; an output format without NaN is not needed.
    const float d[2] = {INFINITY, 1}, z[2] = {0, 1};
    o = tu_acc_opts("bf16");
    cr_assert(isnan(dot1(d, z, 2, "bf16", &o)), "inf * 0");
}

// The fl32 steps: y = fl32(fl32(alpha ta tb) * total) + fl32(beta C), then round_out.
Test(mm_emulated, alpha_beta_output) {
    const float a[2] = {1, 0x1p-8f}, b[2] = {1, 1};
    mm_opts o = tu_acc_opts("bf16");  // total = 1 (the 2^-8 tie is lost)
    o.alpha = 3, o.beta = 0.5f;
    mm_operand A = operand(a, 2, false, "bf16"), B = operand(b, 1, false, "bf16");
    A.tensor_scale = 0.25f;
    float c = 10;
    cr_assert_eq(mm_ref(&c, 1, &A, &B, 1, 1, 2, &o), MM_OK);
    cr_assert_eq(c, 0.75f + 5.0f);
    // fl32(alpha ta tb) is one rounding of the exact product: (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24
    // is a float32 tie broken by nothing else -> 1 + 2^-11; times total 1.
    A.tensor_scale = 1 + 0x1p-12f;
    o.alpha = 1 + 0x1p-12f, o.beta = 0;
    cr_assert_eq(mm_ref(&c, 1, &A, &B, 1, 1, 2, &o), MM_OK);
    cr_assert_eq(c, 1 + 0x1p-11f, "%a", c);
    // Three factors: (1 + 2^-12)^2 (1 + 2^-23): the exact product is above the tie -> rounds
    // up; two float32 multiplications would give 1 + 2^-11 (tie to even) then 1 + 2^-11 + 2^-23.
    A.tensor_scale = 1 + 0x1p-12f;
    B.tensor_scale = 1 + 0x1p-23f;
    cr_assert_eq(mm_ref(&c, 1, &A, &B, 1, 1, 2, &o), MM_OK);
    cr_assert_eq(c, 1 + 0x1p-11f + 0x1p-22f, "%a", c);
    // (1 - 2^-22)(1 - 2^-23)(1.5 + 2^-22): rounded to a double first, the product lands on a
    // float32 tie and goes down to 0x1.7ffff8p+0; rounded once it is 0x1.7ffffap+0.
    o.alpha = 0x1.fffff8p-1f, A.tensor_scale = 0x1.fffffcp-1f, B.tensor_scale = 0x1.800002p+0f;
    cr_assert_eq(mm_ref(&c, 1, &A, &B, 1, 1, 2, &o), MM_OK);
    cr_assert_eq(c, 0x1.7ffffap+0f, "%a", c);
    // Output rounding of y to e4m3 with saturation.
    B.tensor_scale = 0;
    o.alpha = 1000, A.tensor_scale = 0;
    o.out_fmt = tu_fmt("e4m3");
    o.out_round.overflow = FMT_SATURATE;
    cr_assert_eq(mm_ref(&c, 1, &A, &B, 1, 1, 2, &o), MM_OK);
    cr_assert_eq(c, 448.0f);
}

// round_acc(s + a*b) against fmt_ref_round on the same value, for sums exact in double: K = 1
// (s = 0) and K = 2 (s = round_acc(a0 b0)), random bf16-grid elements spread over the
// accumulator's range (subnormals, overflow), every deterministic mode.
Test(mm_emulated, rounding_matches_fmt_ref_round) {
    uint64_t seed = test_seed("rounding_matches_fmt_ref_round");
    const char *accs[] = {"bf16", "fp16", "e8m13", "e5m2", "e4m3", "e8m3", "e4m3fnuz", "fp32"};
    const fmt_t elem = tu_fmt("bf16");
    const fmt_round_mode modes[] = {FMT_RNE, FMT_RNA, FMT_RTZ, FMT_RUP, FMT_RDN, FMT_RTO};
    for (size_t f = 0; f < sizeof accs / sizeof *accs; f++) {
        const fmt_t acc = tu_fmt(accs[f]);
        const int elo = (acc.emin - acc.mbits - 3) / 2, ehi = (acc.emax + 3) / 2;
        for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
            mm_opts o;
            mm_opts_default(&o);
            o.acc.fmt = acc, o.acc.mode = modes[m];
            if (!mm_acc_is_emulated(&o.acc)) continue;  // fp32:rne is the exact reference
            for (int n = 0; n < 300; n++) {
                float a[2], b[2];
                for (int t = 0; t < 2; t++) {
                    const int ea = tu_sm_int(&seed, elo, ehi), eb = tu_sm_int(&seed, elo, ehi);
                    a[t] = (float)fmt_ref_round(&elem, ldexp(1 + tu_sm_int(&seed, 0, 127) / 128.0, ea) *
                                                           (tu_sm_int(&seed, 0, 1) ? -1 : 1), FMT_RNE,
                                                FMT_OVERFLOW_IEEE, false);
                    b[t] = (float)ldexp(1 + tu_sm_int(&seed, 0, 127) / 128.0, eb);
                    if (n % 7 == 0 && t == 1) a[1] = -a[0], b[1] = b[0];  // exact cancellation
                }
                const double p0 = (double)a[0] * b[0], p1 = (double)a[1] * b[1];
                const fmt_round_mode md = modes[m];
                const double s1 = fmt_ref_round(&acc, p0, md, FMT_OVERFLOW_IEEE, false);
                float c = dot1(a, b, 1, "bf16", &o);
                // total starts at +0, so the sign of a zero accumulator does not reach C.
                const float w1 = s1 == 0 ? 0.0f : (float)s1;
                cr_assert(tu_samef(c, w1), "%s %s K=1: a*b = %a -> %a, want %a", accs[f],
                          fmt_mode_name(md), p0, c, w1);
                const double x = s1 + p1, bv = x - s1;  // TwoSum: the error of s1 + p1
                const double err = (s1 - (x - bv)) + (p1 - bv);
                if (isfinite(x) && err != 0) continue;  // not exact in double
                const double s2 = fmt_ref_round(&acc, x, md, FMT_OVERFLOW_IEEE, false);
                c = dot1(a, b, 2, "bf16", &o);
                const float w2 = s2 == 0 ? 0.0f : (float)s2;
                cr_assert(tu_samef(c, w2), "%s %s K=2: %a + %a -> %a, want %a", accs[f],
                          fmt_mode_name(md), s1, p1, c, w2);
            }
        }
    }
}

// --- random problems with small-integer entries, whose values a double computes exactly

typedef struct {
    size_t M, N, K, lda, ldb, ldc;
    bool ta, tb;
    int bka, bkb;  // block_k of the scales (-1: no scales)
    float *a, *b, *sa, *sb, *c;
} rproblem;

static float pow2f(uint64_t *s, int lo, int hi) { return ldexpf(1.0f, tu_sm_int(s, lo, hi)); }

// Small integers times powers of two; scales powers of two, or with pow2_scales false,
// 24-bit significands (then sums are no longer exact in double).
static void rproblem_make(rproblem *p, uint64_t *s, bool small_elems, bool pow2_scales) {
    p->M = (size_t)tu_sm_int(s, 1, 5), p->N = (size_t)tu_sm_int(s, 1, 5), p->K = (size_t)tu_sm_int(s, 1, 40);
    p->ta = tu_sm_int(s, 0, 1), p->tb = tu_sm_int(s, 0, 1);
    const size_t ar = p->ta ? p->K : p->M, ac = p->ta ? p->M : p->K;
    const size_t br = p->tb ? p->N : p->K, bc = p->tb ? p->K : p->N;
    p->lda = ac + (size_t)tu_sm_int(s, 0, 2), p->ldb = bc + (size_t)tu_sm_int(s, 0, 2);
    p->ldc = p->N + (size_t)tu_sm_int(s, 0, 2);
    const int bk = tu_sm_int(s, 1, (int)p->K + 1);  // a shared block length, maybe not dividing K
    p->bka = tu_sm_int(s, -1, 1), p->bkb = tu_sm_int(s, -1, 1);
    p->bka = p->bka < 0 ? -1 : p->bka ? bk : 0;
    p->bkb = p->bkb < 0 ? -1 : p->bkb ? bk : 0;
    p->a = malloc(ar * p->lda * sizeof(float));
    p->b = malloc(br * p->ldb * sizeof(float));
    p->c = malloc(p->M * p->ldc * sizeof(float));
    const size_t nb = (p->K + (size_t)bk - 1) / (size_t)bk;
    p->sa = malloc(p->M * nb * sizeof(float));
    p->sb = malloc(nb * p->N * sizeof(float));
    cr_assert(p->a && p->b && p->c && p->sa && p->sb);
    // Elements: integers times a power of two, on the bf16 grid (at most 8 significant bits).
    const int lim = small_elems ? 7 : 255;
    for (size_t i = 0; i < ar * p->lda; i++) p->a[i] = (float)tu_sm_int(s, -lim, lim) * pow2f(s, -2, 2);
    for (size_t i = 0; i < br * p->ldb; i++) p->b[i] = (float)tu_sm_int(s, -lim, lim) * pow2f(s, -2, 2);
    for (size_t i = 0; i < p->M * p->ldc; i++) p->c[i] = (float)tu_sm_int(s, -50, 50);
    for (size_t i = 0; i < p->M * nb; i++) p->sa[i] = pow2f(s, -3, 3);
    for (size_t i = 0; i < nb * p->N; i++) p->sb[i] = pow2f(s, -3, 3);
    if (!pow2_scales) {
        for (size_t i = 0; i < p->M * nb; i++) p->sa[i] *= 1 + (float)tu_sm_int(s, 0, (1 << 23) - 1) * 0x1p-23f;
        for (size_t i = 0; i < nb * p->N; i++) p->sb[i] *= 1 + (float)tu_sm_int(s, 0, (1 << 23) - 1) * 0x1p-23f;
    }
}

static void rproblem_free(rproblem *p) { free(p->a), free(p->b), free(p->c), free(p->sa), free(p->sb); }

static void rproblem_operands(const rproblem *p, mm_operand *A, mm_operand *B, const char *fmt) {
    *A = operand(p->a, p->lda, p->ta, fmt), *B = operand(p->b, p->ldb, p->tb, fmt);
    if (p->bka >= 0) A->scales = p->sa, A->block_k = p->bka;
    if (p->bkb >= 0) B->scales = p->sb, B->block_k = p->bkb;
}

static double ra(const rproblem *p, size_t i, size_t k) { return p->ta ? p->a[k * p->lda + i] : p->a[i * p->lda + k]; }
static double rb(const rproblem *p, size_t k, size_t j) { return p->tb ? p->b[j * p->ldb + k] : p->b[k * p->ldb + j]; }
static size_t nblocks(const rproblem *p, int bk) { return bk > 0 ? (p->K + (size_t)bk - 1) / (size_t)bk : 1; }
static double rsa(const rproblem *p, size_t i, size_t k) {
    return p->bka < 0 ? 1 : p->sa[i * nblocks(p, p->bka) + (p->bka ? k / (size_t)p->bka : 0)];
}
static double rsb(const rproblem *p, size_t k, size_t j) {
    return p->bkb < 0 ? 1 : p->sb[(p->bkb ? k / (size_t)p->bkb : 0) * p->N + j];
}

// float32 accumulation: C and mm_ref_exact against a double computation (exact here).
Test(mm_ref, random_small_integers) {
    uint64_t seed = test_seed("random_small_integers") ^ 0x1234;
    for (int rep = 0; rep < 60; rep++) {
        rproblem p;
        rproblem_make(&p, &seed, false, true);
        mm_operand A, B;
        rproblem_operands(&p, &A, &B, "fp32");
        mm_opts o;
        mm_opts_default(&o);
        o.alpha = pow2f(&seed, -2, 2) * (rep % 3 ? 1 : -3);
        o.beta = rep % 2 ? 0 : pow2f(&seed, -1, 1);
        A.tensor_scale = rep % 4 ? 0 : 0.5f;
        const double ts = A.tensor_scale ? 0.5 : 1;
        double *ex = malloc(p.M * p.N * sizeof *ex), *ad = malloc(p.M * p.N * sizeof *ad);
        cr_assert_eq(mm_ref_exact(ex, ad, p.c, p.ldc, &A, &B, p.M, p.N, p.K, &o), MM_OK);
        float *c0 = malloc(p.M * p.ldc * sizeof *c0);
        memcpy(c0, p.c, p.M * p.ldc * sizeof *c0);
        cr_assert_eq(mm_ref(p.c, p.ldc, &A, &B, p.M, p.N, p.K, &o), MM_OK);
        for (size_t i = 0; i < p.M; i++)
            for (size_t j = 0; j < p.N; j++) {
                double s = 0, sabs = 0;
                for (size_t k = 0; k < p.K; k++) {
                    const double t = ra(&p, i, k) * rb(&p, k, j) * rsa(&p, i, k) * rsb(&p, k, j);
                    s += t, sabs += fabs(t);
                }
                const double cij = c0[i * p.ldc + j];
                const double w = o.alpha * ts * s + (o.beta ? o.beta * cij : 0);
                const double wabs = fabs(o.alpha * ts) * sabs + fabs(o.beta * cij);
                cr_assert_eq(ex[i * p.N + j], w, "rep %d C[%zu,%zu]", rep, i, j);
                cr_assert_eq(ad[i * p.N + j], wabs, "rep %d absdot[%zu,%zu]", rep, i, j);
                cr_assert_eq(p.c[i * p.ldc + j], (float)w, "rep %d C[%zu,%zu] = %a, want %a", rep, i,
                             j, p.c[i * p.ldc + j], w);
            }
        for (size_t i = 0; i < p.M; i++)
            for (size_t j = p.N; j < p.ldc; j++) cr_assert_eq(tu_f2u(p.c[i * p.ldc + j]), tu_f2u(c0[i * p.ldc + j]));
        free(ex), free(ad), free(c0);
        rproblem_free(&p);
    }
}

// Emulated bf16 accumulation against a direct transcription of scaled_mm.h's steps, with
// fmt_ref_round on double sums (exact: small integers), random promotion and scales (float32
// significands half of the time, so that every fl32 step rounds).
Test(mm_emulated, random_steps) {
    uint64_t seed = test_seed("random_steps") ^ 0x5678;
    const fmt_t acc = tu_fmt("bf16");
    for (int rep = 0; rep < 60; rep++) {
        rproblem p;
        rproblem_make(&p, &seed, true, rep % 2 == 0);
        mm_operand A, B;
        rproblem_operands(&p, &A, &B, "bf16");
        mm_opts o;
        mm_opts_default(&o);
        o.acc.fmt = acc;
        o.acc.mode = (fmt_round_mode)tu_sm_int(&seed, 0, FMT_RTO);
        o.acc.promote_every = tu_sm_int(&seed, 0, 1) ? 0 : tu_sm_int(&seed, 1, 12);
        o.alpha = pow2f(&seed, -2, 2) * 3;
        o.beta = rep % 2 ? 0 : 0.75f;
        B.tensor_scale = 1.5f;
        float *c0 = malloc(p.M * p.ldc * sizeof *c0);
        memcpy(c0, p.c, p.M * p.ldc * sizeof *c0);
        cr_assert_eq(mm_ref(p.c, p.ldc, &A, &B, p.M, p.N, p.K, &o), MM_OK);
        // Blocks: the shared block length of the operands with scales.
        size_t bk = 0;
        if (p.bka > 0) bk = (size_t)p.bka;
        if (p.bkb > 0) bk = (size_t)p.bkb;
        if (!bk) bk = p.K;
        const size_t seg = o.acc.promote_every ? (size_t)o.acc.promote_every : bk;
        for (size_t i = 0; i < p.M; i++)
            for (size_t j = 0; j < p.N; j++) {
                float total = 0;
                for (size_t k0 = 0; k0 < p.K; k0 += bk) {
                    const size_t k1 = k0 + bk < p.K ? k0 + bk : p.K;
                    const float sab = (float)rsa(&p, i, k0) * (float)rsb(&p, k0, j);
                    for (size_t s0 = k0; s0 < k1; s0 += seg) {
                        double s = 0;
                        for (size_t k = s0; k < s0 + seg && k < k1; k++)
                            s = fmt_ref_round(&acc, s + ra(&p, i, k) * rb(&p, k, j), o.acc.mode,
                                              FMT_OVERFLOW_IEEE, false);
                        const float t = (float)s * sab;
                        total = total + t;
                    }
                }
                float y = (o.alpha * 1.5f) * total;  // alpha * 1.5 is exact here
                if (o.beta != 0) {
                    const float bc = o.beta * c0[i * p.ldc + j];
                    y = y + bc;
                }
                cr_assert(tu_samef(p.c[i * p.ldc + j], y), "rep %d (%s promote %d) C[%zu,%zu] = %a, want %a",
                          rep, fmt_mode_name(o.acc.mode), o.acc.promote_every, i, j, p.c[i * p.ldc + j], y);
            }
        free(c0);
        rproblem_free(&p);
    }
}
