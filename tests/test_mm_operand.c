// test_mm_operand.c: scaled-matmul operands built from float32 matrices (kernels/mm_operand.h)
// and the random test matrices. Checked: every q is a value of the element format (rounding it
// again changes no bit); scale arrays have the (M, nblocks) / (nblocks, N) shape and hold, for
// each (row, K-block) / (K-block, column), the scale of the tile that contains it, 2-D tiles
// included; B built from A^T is A's operand transposed; q * s * ts reproduces fmt_quantize_f32's
// dequantized output bit for bit for one-level recipes and power-of-two scales, and within one
// float32 rounding for NVFP4's two levels, whose tensor scale is fmt_quantize_f32's; the
// generator is a pure function of (seed, stream, index) with the documented distributions.
// Every rounding mode is looped where the property holds for it. Seed: env FPLAB_SEED (printed).
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/mm_operand.h"
#include "test_util.h"

// --- helpers

// This suite's seed: FPLAB_SEED, else its default; printed with the test's name.
static uint64_t test_seed(const char *test) { return tu_seed("test_mm_operand", test, 0x6d6d6f70ULL); }

// Rows with different magnitudes (so tiles get different scales) and some zeros.
static float *test_matrix(size_t rows, size_t cols, uint64_t seed, uint64_t stream) {
    float *x = malloc(rows * cols * sizeof *x);
    mm_random_f32(x, rows * cols, MM_DIST_LOGNORMAL, seed, stream);
    for (size_t i = 0; i < rows * cols; i++) {
        x[i] = ldexpf(x[i], (int)((i / cols) % 7) - 3);
        if (i % 37 == 5) x[i] = 0.0f;
    }
    return x;
}

static void assert_elems_are_values(const mm_qmat *m, const char *what) {
    const size_t n = m->rows * m->cols;
    float *y = malloc(n * sizeof *y);
    memcpy(y, m->q, n * sizeof *y);
    fmt_round_opts o = {0};
    cr_assert_eq(fmt_round_f32(&m->op.fmt, y, n, &o, NULL), FMT_OK);
    for (size_t i = 0; i < n; i++)
        cr_assert(tu_samef(y[i], m->q[i]), "%s: q[%zu] = %a is not a value of %s (rounds to %a)", what, i,
                  (double)m->q[i], m->op.fmt.name, (double)y[i]);
    free(y);
}

// The scale that multiplies element (r, c) of the stored matrix (A: r = row, c = k; B: r = k,
// c = column), read from the operand's arrays as a kernel would.
static float op_scale(const mm_qmat *m, mm_side side, size_t r, size_t c) {
    if (!m->op.scales) return 1.0f;
    const size_t bk = m->op.block_k ? (size_t)m->op.block_k : (side == MM_SIDE_A ? m->cols : m->rows);
    return side == MM_SIDE_A ? m->op.scales[r * m->nblocks + c / bk] : m->op.scales[(r / bk) * m->cols + c];
}

static float op_tscale(const mm_qmat *m) { return m->op.tensor_scale == 0.0f ? 1.0f : m->op.tensor_scale; }

// --- tests

static const char *const one_level[] = {"none", "tensor", "row", "mx", "block:16:e8m0", "block:7:e8m0",
                                        "tile:4x8:e8m0", "tile:3x5:fp32", "tile:0x0:e8m0", "tile:1x0:e8m0",
                                        "col", "block:64:bf16"};
enum { NONE_LEVEL = sizeof one_level / sizeof one_level[0] };

// q * s * ts == fmt_quantize_f32's output, for both sides, every one-level recipe and every
// rounding mode: one of s, ts is 1 (or both powers of two), so the products are those the
// quantizer made.
Test(mm_operand, reconstruct_one_level_every_mode) {
    const char *elems[] = {"e4m3", "e2m1", "e5m2", "e3m2", "bf16"};
    const size_t R = 13, C = 70;
    const uint64_t seed = test_seed("reconstruct_one_level_every_mode");
    float *x = test_matrix(R, C, seed, 11);
    for (size_t e = 0; e < sizeof elems / sizeof *elems; e++)
        for (int r = 0; r < NONE_LEVEL; r++)
            for (int side = 0; side < 2; side++)
                for (int mode = 0; mode < FMT_NMODES; mode++) {
                    fmt_t f = tu_fmt(elems[e]);
                    fmt_scaling sc = tu_scaling(one_level[r]);
                    fmt_round_opts o = {0};
                    o.mode = (fmt_round_mode)mode, o.overflow = FMT_SATURATE, o.seed = 5;
                    mm_qmat m;
                    cr_assert_eq(mm_qmat_from_f32(&m, (mm_side)side, x, R, C, &f, &sc, &o), MM_OK);
                    char what[96];
                    snprintf(what, sizeof what, "%s %s side %c mode %s", elems[e], one_level[r], "AB"[side],
                             fmt_mode_name((fmt_round_mode)mode));
                    assert_elems_are_values(&m, what);
                    cr_assert_eq(m.op.x, m.q);
                    cr_assert_eq(m.op.ld, C);
                    cr_assert(!m.op.trans);
                    const float ts = op_tscale(&m);
                    for (size_t i = 0; i < R; i++)
                        for (size_t j = 0; j < C; j++) {
                            const float s = op_scale(&m, (mm_side)side, i, j);
                            cr_assert(s == 1.0f || ts == 1.0f, "%s: two scales in a one-level recipe", what);
                            const float y = (m.q[i * C + j] * s) * ts;
                            cr_assert(tu_samef(y, m.deq[i * C + j]), "%s: (%zu,%zu) q=%a s=%a ts=%a: %a != %a", what,
                                      i, j, (double)m.q[i * C + j], (double)s, (double)ts, (double)y,
                                      (double)m.deq[i * C + j]);
                        }
                    mm_qmat_free(&m);
                }
    free(x);
}

// Shapes: block:k -> nblocks = ceil(K/k), block_k = k, also when k >= K (one block: a
// block-scaled instruction needs its own block length); row and tiles spanning K -> one block
// (block_k 0); tensor -> no array, a tensor scale; none -> neither.
Test(mm_operand, scale_shapes) {
    const size_t M = 10, K = 50, N = 6;
    const uint64_t seed = test_seed("scale_shapes");
    float *a = test_matrix(M, K, seed, 1), *b = test_matrix(K, N, seed, 2);
    const fmt_t f = tu_fmt("e4m3");
    const struct { const char *spec; size_t nblocks; int block_k; bool has_scales; } cases[] = {
        {"mx", 2, 32, true},           {"nvfp4", 4, 16, true},          {"block:7:e8m0", 8, 7, true},
        {"block:50:e8m0", 1, 50, true}, {"block:64:e8m0", 1, 64, true}, {"row", 1, 0, true},
        {"col", 50, 1, true},          {"tile:4x8:fp32", 7, 8, true},   {"tile:2x0:e8m0", 1, 0, true},
        {"tensor", 0, 0, false},       {"tile:0x0:e8m0", 0, 0, false},  {"none", 0, 0, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        fmt_scaling sc = tu_scaling(cases[c].spec);
        mm_qmat qa, qb;
        cr_assert_eq(mm_qmat_from_f32(&qa, MM_SIDE_A, a, M, K, &f, &sc, NULL), MM_OK, "%s", cases[c].spec);
        cr_assert_eq(mm_qmat_from_f32(&qb, MM_SIDE_B, b, K, N, &f, &sc, NULL), MM_OK, "%s", cases[c].spec);
        for (int s = 0; s < 2; s++) {
            const mm_qmat *m = s ? &qb : &qa;
            cr_assert_eq(m->nblocks, cases[c].nblocks, "%s side %c: nblocks %zu", cases[c].spec, "AB"[s], m->nblocks);
            cr_assert_eq(m->op.block_k, cases[c].block_k, "%s side %c: block_k %d", cases[c].spec, "AB"[s],
                         m->op.block_k);
            cr_assert_eq(m->op.scales != NULL, cases[c].has_scales, "%s side %c", cases[c].spec, "AB"[s]);
            if (!strcmp(cases[c].spec, "none")) cr_assert_eq(op_tscale(m), 1.0f);
            if (!strcmp(cases[c].spec, "tensor")) cr_assert_neq(op_tscale(m), 1.0f, "tensor: no tensor scale");
        }
        mm_qmat_free(&qa), mm_qmat_free(&qb);
    }
    free(a), free(b);
}

// Issue 34, 1.1: an MX product whose K is one scale block (K = 32, or less, padded) runs the
// block-scaled instruction as K = 64 does: a[0,0] = 448 2^-20, b[0,0] = 256 2^-20 (e4m3
// elements, e8m0 scales 2^-20), C = 1, D = A B + C. The product, 0.875 2^-23, is above half an
// ulp of 1: the instruction's D, truncated toward zero, is 1 (0x3f800000, MMA-Sim's tcgen05
// mxf8f6f4); scaling after an unscaled instruction and adding C in float32 rounds up to
// 0x3f800001.
Test(mm_operand, mx_one_block_runs_the_block_scaled_instruction) {
    const fmt_t f = tu_fmt("e4m3");
    const fmt_scaling sc = tu_scaling("mx");
    const fmt_round_opts qo = {.mode = FMT_RNE, .overflow = FMT_SATURATE};
    const char *engines[] = {"blackwell:tcgen05", "rtx-blackwell:mma"};
    const size_t Ks[] = {20, 32, 64};
    for (size_t e = 0; e < 2; e++)
        for (size_t t = 0; t < 3; t++) {
            const size_t K = Ks[t];
            float a[64] = {0}, b[64] = {0};
            a[0] = 448.0f * 0x1p-20f, b[0] = 256.0f * 0x1p-20f;
            mm_qmat qa, qb;
            cr_assert_eq(mm_qmat_from_f32(&qa, MM_SIDE_A, a, 1, K, &f, &sc, &qo), MM_OK);
            cr_assert_eq(mm_qmat_from_f32(&qb, MM_SIDE_B, b, K, 1, &f, &sc, &qo), MM_OK);
            cr_assert_eq(qa.op.block_k, 32, "K %zu: A's block_k %d", K, qa.op.block_k);
            cr_assert_eq(qb.op.block_k, 32, "K %zu: B's block_k %d", K, qb.op.block_k);
            cr_assert(qa.q[0] == 448.0f && qa.scales[0] == 0x1p-20f && qb.q[0] == 256.0f && qb.scales[0] == 0x1p-20f);
            mm_opts o;
            mm_opts_default(&o);
            o.beta = 1.0f;
            cr_assert_eq(mm_acc_from_name(&o.acc, engines[e], NULL, 0), MM_OK);
            float C[2] = {1.0f, 1.0f};
            cr_assert_eq(mm_ref(&C[0], 1, &qa.op, &qb.op, 1, 1, K, &o), MM_OK);
            cr_assert_eq(mm_cpu(&C[1], 1, &qa.op, &qb.op, 1, 1, K, &o), MM_OK);
            for (int i = 0; i < 2; i++)
                cr_assert(tu_samef(C[i], 1.0f), "%s K %zu (%s): D = %a, expected 1 (0x3f800000)", engines[e], K,
                          i ? "mm_cpu" : "mm_ref", (double)C[i]);
            mm_qmat_free(&qa), mm_qmat_free(&qb);
        }
}

// Issue 34, 1.6 and 1.9: scales that mean nothing are refused by name (a tensor scale of 0,
// negative, NaN or inf; the one scale of "tensor" likewise; a negative tile scale), while 0 and
// NaN tile scales (a zeroed tile, a NaN block) pass; an empty matrix gets no scales and no tile
// size to divide by.
Test(mm_operand, scales_check_and_empty_matrices) {
    char msg[256];
    const fmt_scaling tensor = tu_scaling("tensor"), mx = tu_scaling("mx"), nv = tu_scaling("nvfp4");
    const float bad[] = {0.0f, -2.0f, NAN, INFINITY};
    for (int t = 0; t < 4; t++) {
        cr_assert_eq(mm_operand_scales_check(&mx, NULL, 0, bad[t], "--a-tensor-scale", msg, sizeof msg), MM_EINVAL,
                     "tensor scale %g", (double)bad[t]);
        cr_assert(strstr(msg, "--a-tensor-scale") && strstr(msg, "tensor scale"), "%s", msg);
        cr_assert_eq(mm_operand_scales_check(&tensor, &bad[t], 1, 1.0f, "sa.npy", msg, sizeof msg), MM_EINVAL);
        cr_assert(strstr(msg, "sa.npy"), "%s", msg);
    }
    const float tiles[3] = {0.0f, NAN, 0.5f}, neg[3] = {1.0f, -0.5f, 1.0f};
    cr_assert_eq(mm_operand_scales_check(&nv, tiles, 3, 0.25f, "x", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert_eq(mm_operand_scales_check(&mx, neg, 3, 1.0f, "sb.npy", msg, sizeof msg), MM_EINVAL);
    cr_assert(strstr(msg, "sb.npy") && strstr(msg, "scale 1"), "%s", msg);
    const fmt_t f = tu_fmt("e4m3");
    const float s1 = 1.0f;
    const char *recipes[] = {"row", "mx", "tile:4x8:fp32", "tensor"};
    for (int r = 0; r < 4; r++) {
        const fmt_scaling sc = tu_scaling(recipes[r]);
        mm_operand op;
        float scales[1] = {0};
        cr_assert_eq(mm_operand_from_tiles(&op, scales, MM_SIDE_A, false, &s1, 8, 0, &f, &sc, &s1, 1.0f), 0);
        cr_assert_null(op.scales, "%s: K = 0", recipes[r]);
        cr_assert_eq(mm_operand_from_tiles(&op, scales, MM_SIDE_B, true, &s1, 0, 4, &f, &sc, &s1, 1.0f), 0);
        cr_assert_eq(mm_operand_from_tiles(&op, scales, MM_SIDE_A, false, &s1, 0, 8, &f, &sc, &s1, 1.0f), 0);
    }
}

// 2-D tiles: every (row, K-block) of A holds the scale of the tile around it, read from a direct
// fmt_quantize_f32 call's tile grid; B (built from A^T) holds the same numbers transposed.
Test(mm_operand, tiles_2d_expand_and_transpose) {
    const size_t M = 11, K = 23;
    const uint64_t seed = test_seed("tiles_2d_expand_and_transpose");
    float *a = test_matrix(M, K, seed, 3), *at = malloc(M * K * sizeof *at);
    for (size_t i = 0; i < M; i++)
        for (size_t k = 0; k < K; k++) at[k * M + i] = a[i * K + k];
    const char *specs[] = {"tile:4x8:fp32", "tile:3x5:e8m0", "tile:2x0:bf16", "tile:0x6:fp32", "mx", "nvfp4",
                           "block:5:e4m3", "row", "col"};
    for (size_t c = 0; c < sizeof specs / sizeof *specs; c++)
        for (int mode = 0; mode < FMT_NMODES; mode++) {
            if (mode == FMT_SR) continue;  // SR draws by flat index, which the transpose changes
            const fmt_t f = tu_fmt("e2m3");
            fmt_scaling sc = tu_scaling(specs[c]);
            fmt_round_opts o = {0};
            o.mode = (fmt_round_mode)mode;
            // The tile grid as fmt_quantize_f32 reports it for A.
            const size_t nt = fmt_scale_count(&sc, M, K);
            float *ts = malloc(nt * sizeof *ts), *tmp = malloc(M * K * sizeof *tmp);
            fmt_quant_info info = {.scales = ts};
            cr_assert_eq(fmt_quantize_f32(&f, &sc, tmp, a, M, K, &o, NULL, &info), FMT_OK);
            const size_t tr = sc.tile_rows && (size_t)sc.tile_rows < M ? (size_t)sc.tile_rows : M;
            const size_t tc = sc.tile_cols && (size_t)sc.tile_cols < K ? (size_t)sc.tile_cols : K;
            const size_t ntc = (K + tc - 1) / tc;

            mm_qmat qa, qb;
            cr_assert_eq(mm_qmat_from_f32(&qa, MM_SIDE_A, a, M, K, &f, &sc, &o), MM_OK);
            cr_assert_eq(mm_qmat_from_f32(&qb, MM_SIDE_B, at, K, M, &f, &sc, &o), MM_OK);
            cr_assert_eq(qa.nblocks, ntc, "%s: nblocks %zu, tiles along K %zu", specs[c], qa.nblocks, ntc);
            cr_assert_eq(qb.nblocks, qa.nblocks);
            cr_assert_eq(qb.op.block_k, qa.op.block_k);
            cr_assert(tu_samef(qb.op.tensor_scale, qa.op.tensor_scale));
            for (size_t i = 0; i < M; i++)
                for (size_t k = 0; k < K; k++) {
                    const float want = ts[(i / tr) * ntc + k / tc];
                    cr_assert(tu_samef(op_scale(&qa, MM_SIDE_A, i, k), want),
                              "%s: A scale at (%zu,%zu): %a, tile's %a", specs[c], i, k,
                              (double)op_scale(&qa, MM_SIDE_A, i, k), (double)want);
                    cr_assert(tu_samef(op_scale(&qb, MM_SIDE_B, k, i), want), "%s: B scale at (%zu,%zu)",
                              specs[c], k, i);
                    cr_assert(tu_samef(qb.q[k * M + i], qa.q[i * K + k]), "%s mode %d: q of A^T at (%zu,%zu)", specs[c],
                              mode, k, i);
                }
            mm_qmat_free(&qa), mm_qmat_free(&qb);
            free(ts), free(tmp);
        }
    free(a), free(at);
}

// NVFP4: e2m1 elements, e4m3 block scales, and fmt_quantize_f32's fp32 tensor scale; q * sf * ts
// equals the dequantized output up to two float32 roundings (the quantizer multiplies by
// fl(sf / s_enc), we by sf and ts = fl(1 / s_enc)).
Test(mm_operand, nvfp4_tensor_scale) {
    const size_t M = 9, K = 80;
    const uint64_t seed = test_seed("nvfp4_tensor_scale");
    float *x = test_matrix(M, K, seed, 4);
    for (size_t i = 0; i < M * K; i++) x[i] *= 1000.0f;  // tensor scale far from 1
    const fmt_t f = tu_fmt("e2m1"), e4m3 = tu_fmt("e4m3");
    fmt_scaling sc = tu_scaling("nvfp4");
    fmt_quant_info info = {0};
    float *tmp = malloc(M * K * sizeof *tmp);
    cr_assert_eq(fmt_quantize_f32(&f, &sc, tmp, x, M, K, NULL, NULL, &info), FMT_OK);
    for (int side = 0; side < 2; side++) {
        mm_qmat m;
        cr_assert_eq(mm_qmat_from_f32(&m, (mm_side)side, x, M, K, &f, &sc, NULL), MM_OK);
        cr_assert(tu_samef(m.op.tensor_scale, info.tensor_scale), "tensor scale %a, quantizer's %a",
                  (double)m.op.tensor_scale, (double)info.tensor_scale);
        cr_assert_neq(m.op.tensor_scale, 1.0f);
        assert_elems_are_values(&m, "nvfp4");
        const size_t ns = side ? m.nblocks * K : M * m.nblocks;
        for (size_t t = 0; t < ns; t++) {
            const double s = m.scales[t];
            cr_assert_eq(fmt_round1(&e4m3, s, &(fmt_round_opts){0}), s, "scale %a is not an e4m3 value", s);
        }
        for (size_t i = 0; i < M; i++)
            for (size_t k = 0; k < K; k++) {
                const double y = (double)m.q[i * K + k] * op_scale(&m, (mm_side)side, i, k) * m.op.tensor_scale;
                const double d = m.deq[i * K + k];
                cr_assert(fabs(y - d) <= 0x1p-22 * fabs(d), "(%zu,%zu): q s ts = %a, dequantized %a", i, k, y, d);
            }
        mm_qmat_free(&m);
    }
    free(x), free(tmp);
}

// fmt_quant_info.elems: q such that out = q * s; with "none" a copy of out.
Test(mm_operand, quant_info_elems) {
    const size_t R = 5, C = 40;
    const uint64_t seed = test_seed("quant_info_elems");
    float *x = test_matrix(R, C, seed, 5), *out = malloc(R * C * sizeof *out), *q = malloc(R * C * sizeof *q);
    const fmt_t f = tu_fmt("e4m3");
    const char *specs[] = {"none", "mx", "tensor", "nvfp4"};
    for (size_t c = 0; c < 4; c++) {
        fmt_scaling sc = tu_scaling(specs[c]);
        float s[64];
        fmt_quant_info info = {.scales = s, .elems = q};
        cr_assert_eq(fmt_quantize_f32(&f, &sc, out, x, R, C, NULL, NULL, &info), FMT_OK);
        for (size_t i = 0; i < R * C; i++) {
            float y = q[i];
            fmt_round_f32(&f, &y, 1, &(fmt_round_opts){0}, NULL);
            cr_assert(tu_samef(y, q[i]), "%s: q[%zu] = %a not an e4m3 value", specs[c], i, (double)q[i]);
            if (!strcmp(specs[c], "none")) cr_assert(tu_samef(q[i], out[i]));
            if (!strcmp(specs[c], "mx")) cr_assert(tu_samef(q[i] * s[(i / C) * 2 + (i % C) / 32], out[i]));
            if (!strcmp(specs[c], "tensor")) cr_assert(tu_samef(q[i] * s[0], out[i]));
        }
    }
    free(x), free(out), free(q);
}

Test(mm_operand, bad_arguments) {
    const fmt_t f = tu_fmt("e4m3"), big = tu_fmt("fp64");
    fmt_scaling sc = tu_scaling("mx");
    float x[4] = {1, 2, 3, 4};
    mm_qmat m;
    cr_assert_eq(mm_qmat_from_f32(&m, MM_SIDE_A, x, 0, 4, &f, &sc, NULL), MM_EINVAL);
    cr_assert_eq(mm_qmat_from_f32(&m, MM_SIDE_A, x, 2, 0, &f, &sc, NULL), MM_EINVAL);
    cr_assert_eq(mm_qmat_from_f32(&m, MM_SIDE_A, NULL, 2, 2, &f, &sc, NULL), MM_EINVAL);
    cr_assert_eq(mm_qmat_from_f32(&m, MM_SIDE_A, x, 2, 2, &big, &sc, NULL), MM_EINVAL);
    cr_assert_null(m.q);
    mm_qmat_free(&m);  // a failed build holds nothing; freeing it is harmless
}

// --- random matrices

Test(mm_operand, random_is_counter_based) {
    enum { n = 5000 };
    static float x[n], y[n], z[n];
    const uint64_t seed = test_seed("random_is_counter_based");
    for (int d = 0; d < MM_DIST_COUNT; d++) {
        mm_random_f32(x, n, (mm_dist)d, seed, 1);
        mm_random_f32(y, n, (mm_dist)d, seed, 1);
        mm_random_f32(z, n, (mm_dist)d, seed, 2);
        cr_assert_eq(memcmp(x, y, sizeof x), 0, "%s: not reproducible", mm_dist_name((mm_dist)d));
        cr_assert_neq(memcmp(x, z, sizeof x), 0, "%s: streams 1 and 2 agree", mm_dist_name((mm_dist)d));
        // Element i depends on i only: a shorter call is a prefix.
        mm_random_f32(y, 100, (mm_dist)d, seed, 1);
        cr_assert_eq(memcmp(x, y, 100 * sizeof *x), 0);
        mm_dist back;
        cr_assert_eq(mm_dist_from_name(&back, mm_dist_name((mm_dist)d)), MM_OK);
        cr_assert_eq(back, (mm_dist)d);
    }
    mm_dist back;
    cr_assert_eq(mm_dist_from_name(&back, "gaussian"), MM_EINVAL);
}

// Moments within 6 standard errors (n = 2^16 draws): a failure is a bug, not bad luck.
Test(mm_operand, random_distributions) {
    enum { n = 1 << 16 };
    static float x[n];
    const uint64_t seed = test_seed("random_distributions");
    const double se = 1.0 / sqrt((double)n);

    mm_random_f32(x, n, MM_DIST_NORMAL, seed, 7);
    double s1 = 0, s2 = 0;
    for (int i = 0; i < n; i++) s1 += x[i], s2 += (double)x[i] * x[i];
    cr_assert(fabs(s1 / n) < 6 * se, "normal mean %g", s1 / n);
    cr_assert(fabs(s2 / n - 1) < 6 * sqrt(2.0) * se, "normal variance %g", s2 / n);

    mm_random_f32(x, n, MM_DIST_UNIFORM, seed, 7);
    s1 = s2 = 0;
    for (int i = 0; i < n; i++) {
        cr_assert(x[i] >= -1.0f && x[i] < 1.0f, "uniform draw %a", (double)x[i]);
        s1 += x[i], s2 += (double)x[i] * x[i];
    }
    cr_assert(fabs(s1 / n) < 6 * se / sqrt(3.0), "uniform mean %g", s1 / n);
    cr_assert(fabs(s2 / n - 1.0 / 3) < 6 * 0.2981 * se, "uniform E[x^2] %g", s2 / n);  // sd of x^2: 2/sqrt(45)

    mm_random_f32(x, n, MM_DIST_LOGNORMAL, seed, 7);
    int neg = 0;
    s1 = 0;
    for (int i = 0; i < n; i++) {
        cr_assert(x[i] != 0.0f && isfinite(x[i]));
        neg += x[i] < 0, s1 += log(fabs(x[i]));
    }
    cr_assert(fabs(s1 / n) < 6 * se, "lognormal: mean of log|x| %g", s1 / n);
    cr_assert(fabs(neg - n / 2.0) < 6 * 0.5 * sqrt((double)n), "lognormal: %d negative of %d", neg, n);

    mm_random_f32(x, n, MM_DIST_OUTLIERS, seed, 7);
    int big = 0;
    for (int i = 0; i < n; i++) big += fabsf(x[i]) > 50.0f;
    const double p = 1.0 / 128, mean = n * p, sd = sqrt(n * p * (1 - p));
    // A scaled normal draw can stay below 50 (|z| < 0.05: 4% of them); an unscaled one above
    // 50 never happens.
    cr_assert(big > 0.96 * mean - 6 * sd && big < mean + 6 * sd, "outliers: %d, expected about %g", big, mean);
}
