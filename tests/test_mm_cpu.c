// test_mm_cpu.c: the CPU backend of scaled_mm.h (mm_cpu) against the MPFR reference (mm_ref,
// mm_ref_exact).
// What is checked: emulated accumulators (bf16, fp16, m13, m13 promoted every 128, an rtz
// accumulator) are bit-exact with mm_ref on random shapes (1..12 x 1..40, K up to 300, K not a
// multiple of the block), with block and tensor scales, every trans variant, padded leading
// dimensions, alpha and beta; the fp32 accumulator stays within gamma_{K+2} * absdot plus the
// output rounding for every table format of 16 bits or fewer; zeros, inf/NaN propagation and
// saturating outputs.
// The float32 tile kernel of the emulated path (kernels/cpu/scaled_mm_cpu_emu_f32.c) on its own:
// each test asserts that its cases run it (mm__emu_f32_covers), then compares with mm_ref for
// every accumulator kind it takes (mNN up to 21 fraction bits, e8m13, bf16, fp32) in every mode:
// shapes spanning several tiles with ragged edges, partial sums in the accumulator's subnormal
// range and past its max, promotion and block boundaries, a caller with MXCSR's FTZ and DAZ
// set; and that operands it cannot take (products outside float32, inf) go to the double kernel.
// Random inputs come from the library's counter-based generator; the seed is printed and read
// from FPLAB_SEED to replay a failure.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "formats/rng.h"
#include "formats/round.h"
#include "kernels/scaled_mm.h"
#include "kernels/scaled_mm_internal.h"  // mm__emu_f32_covers: which kernel a case runs
#include "test_mm_util.h"
#include "test_util.h"

static uint64_t test_seed(const char *test) { return tu_seed("test_mm_cpu", test, 0x6d6d637075ULL); }

// --- random inputs

// x[0..n) = values of f: random normals times vscale, rounded (rne) to f.
static void fill_values(tu_rng *r, const fmt_t *f, float *x, size_t n, double vscale) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(tu_rng_normal(r) * vscale);
    const fmt_round_opts ro = {0};
    cr_assert_eq(fmt_round_f32(f, x, n, &ro, NULL), FMT_OK);
}

// One random operand (see tu_operand): values of f, random normals times vscale rounded
// through float32; scales of kind sk.
static void make_operand(tu_operand *o, tu_rng *r, bool is_a, const fmt_t *f, size_t rows, size_t cols,
                         size_t K, bool trans, int block_k, tu_scale_kind sk, float tensor_scale,
                         double vscale) {
    const size_t ld = tu_operand_storage(o, r, rows, cols, trans);
    const size_t srows = trans ? cols : rows, scols = trans ? rows : cols;
    float *v = malloc(srows * scols * sizeof *v + 1);
    fill_values(r, f, v, srows * scols, vscale);
    for (size_t i = 0; i < srows; i++)
        for (size_t j = 0; j < scols; j++) o->x[i * ld + j] = v[i * scols + j];
    free(v);
    o->op = (mm_operand){.x = o->x, .ld = ld, .trans = trans, .fmt = *f, .block_k = block_k,
                         .tensor_scale = tensor_scale};
    tu_operand_scales(o, r, is_a, rows, cols, K, block_k, sk);
}

// --- emulated accumulators: bit-exact with mm_ref

// mm_ref and mm_cpu, each on a copy of Cin (M x ldc; NULL: C all NaN, which beta 0 must not
// read), agree bit for bit on every element of C, its padding included (left alone by both).
static void expect_matches_ref(const char *what, const mm_operand *A, const mm_operand *B, size_t M,
                               size_t N, size_t K, const mm_opts *o, size_t ldc, const float *Cin) {
    float *C0 = malloc(M * ldc * sizeof *C0), *C1 = malloc(M * ldc * sizeof *C1);
    cr_assert(C0 && C1);
    for (size_t i = 0; i < M * ldc; i++) C0[i] = C1[i] = Cin ? Cin[i] : NAN;
    const int s1 = mm_ref(C0, ldc, A, B, M, N, K, o), s2 = mm_cpu(C1, ldc, A, B, M, N, K, o);
    cr_assert_eq(s1, MM_OK, "%s: mm_ref status %d", what, s1);
    cr_assert_eq(s2, MM_OK, "%s: mm_cpu status %d", what, s2);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < ldc; j++) {
            const float x = C0[i * ldc + j], y = C1[i * ldc + j];
            cr_assert(tu_samef(x, y), "%s: C[%zu,%zu] ref %a (0x%08x) cpu %a (0x%08x)", what, i, j, x,
                      tu_f2u(x), y, tu_f2u(y));
        }
    free(C0), free(C1);
}

static void emulated_random(const char *test, const char *acc_spec, int ncases) {
    tu_rng r = {fmt_rng_make_key(test_seed(test), 11), 0};
    static const char *const elems[] = {"e4m3", "e5m2", "e2m1", "bf16", "fp16", "e3m2"};
    static const char *const outs[] = {"fp32", "bf16", "e4m3"};
    for (int c = 0; c < ncases; c++) {
        // N up to 40 in a third of the cases: several column panels of the tile kernel (8 or 16 wide).
        const size_t M = (size_t)tu_rng_int(&r, 1, 12), N = (size_t)tu_rng_int(&r, 1, c % 3 == 2 ? 40 : 12);
        const size_t K = (size_t)(c % 4 == 0 ? tu_rng_int(&r, 1, 40) : tu_rng_int(&r, 1, 300));
        const fmt_t fa = tu_fmt(elems[tu_rng_int(&r, 0, 5)]), fb = tu_fmt(elems[tu_rng_int(&r, 0, 5)]);
        const int bks[] = {0, 16, 32, 128};
        const int block_k = bks[tu_rng_int(&r, 0, 3)];
        const tu_scale_kind sk = (tu_scale_kind)tu_rng_int(&r, 0, 2);
        const float ta = tu_rng_int(&r, 0, 1) ? 0.0f : ldexpf(1.0f, tu_rng_int(&r, -3, 3)) * 1.5f;
        const float tb = tu_rng_int(&r, 0, 1) ? 0.0f : 0.75f;
        tu_operand A, B;
        make_operand(&A, &r, true, &fa, M, K, K, tu_rng_int(&r, 0, 1), block_k, sk, ta, 1.0);
        make_operand(&B, &r, false, &fb, K, N, K, tu_rng_int(&r, 0, 1), block_k,
                     (tu_scale_kind)tu_rng_int(&r, 0, 1), tb, 1.0);
        mm_opts o = tu_acc_opts(acc_spec);
        o.alpha = tu_rng_int(&r, 0, 2) ? 1.0f : (float)tu_rng_normal(&r);
        o.beta = tu_rng_int(&r, 0, 2) ? 0.0f : (float)tu_rng_normal(&r);
        o.out_fmt = tu_fmt(outs[tu_rng_int(&r, 0, 2)]);
        o.out_round.mode = tu_rng_int(&r, 0, 1) ? FMT_RNE : FMT_RTZ;
        const size_t ldc = N + (size_t)tu_rng_int(&r, 0, 2);
        float *Cin = malloc(M * ldc * sizeof *Cin);
        for (size_t i = 0; i < M * ldc; i++) Cin[i] = (float)tu_rng_normal(&r);
        char what[256];
        snprintf(what, sizeof what, "%s case %d (M %zu N %zu K %zu %s x %s, trans %d%d, block_k %d, "
                 "scales %d%d, out %s)", acc_spec, c, M, N, K, fa.name, fb.name, A.op.trans,
                 B.op.trans, block_k, A.scales != NULL, B.scales != NULL, o.out_fmt.name);
        expect_matches_ref(what, &A.op, &B.op, M, N, K, &o, ldc, Cin);
        free(Cin);
        tu_operand_free(&A), tu_operand_free(&B);
    }
}

Test(mm_cpu, emulated_bf16) { emulated_random("emulated_bf16", "bf16", 150); }
Test(mm_cpu, emulated_fp16) { emulated_random("emulated_fp16", "fp16", 150); }
Test(mm_cpu, emulated_m13) { emulated_random("emulated_m13", "m13", 150); }
Test(mm_cpu, emulated_m13_promote128) { emulated_random("emulated_m13_promote128", "m13:promote=128", 150); }
Test(mm_cpu, emulated_m13_promote7) { emulated_random("emulated_m13_promote7", "m13:promote=7", 100); }
Test(mm_cpu, emulated_bf16_rtz) { emulated_random("emulated_bf16_rtz", "bf16:rtz", 150); }
Test(mm_cpu, emulated_fp16_rup) { emulated_random("emulated_fp16_rup", "fp16:rup", 80); }

// The segments of K every path walks (mm__seg_end, mm__seg_block), against lists written out
// from scaled_mm.h's definition: K-blocks of the scaled operands, each cut every promote_every
// products from its own start.
Test(mm_cpu, segments_of_k) {
    static const struct {
        size_t K, bk, pe;
        size_t starts[12];  // segment starts, then K, then 0 padding
    } cases[] = {
        {10, 10, 0, {0, 10}},         {10, 4, 0, {0, 4, 8, 10}},          {10, 10, 3, {0, 3, 6, 9, 10}},
        {10, 4, 3, {0, 3, 4, 7, 8, 10}}, {10, 4, 8, {0, 4, 8, 10}},        {1, 1, 1, {0, 1}},
        {64, 32, 16, {0, 16, 32, 48, 64}}, {33, 32, 0, {0, 32, 33}},       {7, 7, 2, {0, 2, 4, 6, 7}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n = 0, s0 = 0;
        while (s0 < cases[c].K) {
            cr_assert_eq(s0, cases[c].starts[n], "K %zu bk %zu pe %zu: segment %zu starts at %zu, expected %zu",
                         cases[c].K, cases[c].bk, cases[c].pe, n, s0, cases[c].starts[n]);
            s0 = mm__seg_end(s0, cases[c].K, cases[c].bk, cases[c].pe);
            n++;
        }
        cr_assert_eq(s0, cases[c].K);
        cr_assert_eq(cases[c].starts[n], cases[c].K, "K %zu bk %zu pe %zu: %zu segments, expected more",
                     cases[c].K, cases[c].bk, cases[c].pe, n);
    }
    // The block length: the scaled operands' block_k (A's, else B's), K without scales.
    const float one = 1.0f;
    mm_operand A = {.block_k = 32}, B = {.block_k = 16};
    cr_assert_eq(mm__seg_block(&A, &B, 100), 100);  // block_k without scales is ignored
    B.scales = &one;
    cr_assert_eq(mm__seg_block(&A, &B, 100), 16);
    A.scales = &one, A.block_k = 0;  // A's scales per row: no K-blocks of their own
    cr_assert_eq(mm__seg_block(&A, &B, 100), 16);
    A.block_k = 16;
    cr_assert_eq(mm__seg_block(&A, &B, 100), 16);
}

// Inf and NaN in the operands: the emulated result (inf, NaN, or inf - inf = NaN in the float32
// total) matches mm_ref.
Test(mm_cpu, emulated_inf_nan) {
    tu_rng r = {fmt_rng_make_key(test_seed("emulated_inf_nan"), 12), 0};
    const fmt_t f = tu_fmt("bf16");
    for (int c = 0; c < 40; c++) {
        const size_t M = 3, N = 4, K = (size_t)tu_rng_int(&r, 1, 70);
        tu_operand A, B;
        make_operand(&A, &r, true, &f, M, K, K, false, 32, SC_NONE, 0, 1.0);
        make_operand(&B, &r, false, &f, K, N, K, c & 1, 32, SC_POW2, 0, 1.0);
        const float specials[] = {INFINITY, -INFINITY, NAN};
        A.x[tu_rng_int(&r, 0, (int)M - 1) * A.op.ld + tu_rng_int(&r, 0, (int)K - 1)] =
            specials[tu_rng_int(&r, 0, 2)];
        A.x[tu_rng_int(&r, 0, (int)M - 1) * A.op.ld + tu_rng_int(&r, 0, (int)K - 1)] =
            specials[tu_rng_int(&r, 0, 1)];
        const mm_opts o = tu_acc_opts("bf16");
        char what[64];
        snprintf(what, sizeof what, "emulated_inf_nan case %d", c);
        expect_matches_ref(what, &A.op, &B.op, M, N, K, &o, N, NULL);
        tu_operand_free(&A), tu_operand_free(&B);
    }
}

// --- fp32 accumulator: the dot-product bound (tu_check_bound)

static void fp32_case(tu_rng *r, const char *what, const fmt_t *fa, const fmt_t *fb, size_t M,
                      size_t N, size_t K, tu_scale_kind ska, tu_scale_kind skb, int block_k,
                      const fmt_t *out, fmt_round_mode mode, double vscale) {
    tu_operand A, B;
    make_operand(&A, r, true, fa, M, K, K, tu_rng_int(r, 0, 1), block_k, ska,
                 ska == SC_E4M3 ? 0.25f : 0.0f, vscale);
    make_operand(&B, r, false, fb, K, N, K, tu_rng_int(r, 0, 1), block_k, skb, 0.0f, vscale);
    mm_opts o;
    mm_opts_default(&o);
    o.alpha = tu_rng_int(r, 0, 1) ? 1.0f : (float)tu_rng_normal(r);
    o.beta = tu_rng_int(r, 0, 1) ? 0.0f : (float)tu_rng_normal(r);
    o.out_fmt = *out;
    o.out_round.mode = mode;
    const size_t ldc = N + (size_t)tu_rng_int(r, 0, 2);
    float *C = malloc(M * ldc * sizeof *C), *Cin = malloc(M * ldc * sizeof *Cin);
    double *exact = malloc(M * N * sizeof *exact), *absdot = malloc(M * N * sizeof *absdot);
    for (size_t i = 0; i < M * ldc; i++) C[i] = Cin[i] = (float)tu_rng_normal(r);
    cr_assert_eq(mm_ref_exact(exact, absdot, Cin, ldc, &A.op, &B.op, M, N, K, &o), MM_OK);
    cr_assert_eq(mm_cpu(C, ldc, &A.op, &B.op, M, N, K, &o), MM_OK, "%s: mm_cpu failed", what);
    char buf[256];
    snprintf(buf, sizeof buf, "%s (%s x %s, M %zu N %zu K %zu, trans %d%d, out %s %s)", what,
             fa->name, fb->name, M, N, K, A.op.trans, B.op.trans, out->name, fmt_mode_name(mode));
    tu_check_bound(buf, C, NULL, ldc, exact, absdot, M, N, K, &o, 0x1p-24);
    free(C), free(Cin), free(exact), free(absdot);
    tu_operand_free(&A), tu_operand_free(&B);
}

// Every table format of 16 bits or fewer as elements (e8m0 excepted: it is a scale format with
// no zero and no sign), with power-of-two block scales, fp32 and narrower outputs.
Test(mm_cpu, fp32_every_format) {
    tu_rng r = {fmt_rng_make_key(test_seed("fp32_every_format"), 21), 0};
    const fmt_t outs[] = {tu_fmt("fp32"), tu_fmt("bf16"), tu_fmt("fp16")};
    for (size_t t = 0; t < fmt_table_count(); t++) {
        const fmt_t *f = fmt_table_get(t);
        if (!tu_elem_format(f)) continue;
        const double vscale = tu_vscale(f);
        for (int c = 0; c < 24; c++) {
            const size_t M = (size_t)tu_rng_int(&r, 1, 12), N = (size_t)tu_rng_int(&r, 1, 12);
            const size_t K = (size_t)tu_rng_int(&r, 1, 300);
            const int bks[] = {0, 16, 32};
            const fmt_round_mode modes[] = {FMT_RNE, FMT_RTZ, FMT_RUP};
            fp32_case(&r, "fp32_every_format", f, f, M, N, K, (tu_scale_kind)(c % 2 ? SC_POW2 : SC_NONE),
                      (tu_scale_kind)(c % 3 ? SC_POW2 : SC_NONE), bks[c % 3], &outs[c % 3],
                      modes[(c / 3) % 3], vscale);
        }
    }
}

// NVFP4-style: e2m1 elements with e4m3 block scales of 16 (the fold is exact) and a tensor scale.
Test(mm_cpu, fp32_nvfp4_scales) {
    tu_rng r = {fmt_rng_make_key(test_seed("fp32_nvfp4_scales"), 22), 0};
    const fmt_t f = tu_fmt("e2m1"), out = tu_fmt("fp32");
    for (int c = 0; c < 60; c++)
        fp32_case(&r, "fp32_nvfp4_scales", &f, &f, (size_t)tu_rng_int(&r, 1, 12),
                  (size_t)tu_rng_int(&r, 1, 12), (size_t)tu_rng_int(&r, 1, 300), SC_E4M3, SC_E4M3, 16,
                  &out, FMT_RNE, 1.5);
}

// Larger shapes, where sgemm blocks and threads; the bound is the same.
Test(mm_cpu, fp32_large) {
    tu_rng r = {fmt_rng_make_key(test_seed("fp32_large"), 23), 0};
    const fmt_t f = tu_fmt("e4m3"), out = tu_fmt("fp32");
    fp32_case(&r, "fp32_large", &f, &f, 97, 130, 515, SC_POW2, SC_POW2, 32, &out, FMT_RNE, 1.0);
    fp32_case(&r, "fp32_large", &f, &f, 64, 200, 256, SC_NONE, SC_POW2, 32, &out, FMT_RNE, 1.0);
}

Test(mm_cpu, fp32_zeros) {
    const fmt_t f = tu_fmt("e4m3");
    float A[6] = {0}, B[6] = {0}, C[4] = {NAN, NAN, NAN, NAN};
    mm_operand a = {.x = A, .ld = 3, .fmt = f}, b = {.x = B, .ld = 2, .fmt = f};
    mm_opts o;
    mm_opts_default(&o);
    cr_assert_eq(mm_cpu(C, 2, &a, &b, 2, 2, 3, &o), MM_OK);
    for (int i = 0; i < 4; i++) cr_assert(C[i] == 0.0f, "C[%d] = %a, expected 0 (beta 0 ignores C)", i, C[i]);
    char msg[256];
    cr_assert_eq(mm_acc_from_name(&o.acc, "bf16", msg, sizeof msg), MM_OK);
    for (int i = 0; i < 4; i++) C[i] = NAN;
    cr_assert_eq(mm_cpu(C, 2, &a, &b, 2, 2, 3, &o), MM_OK);
    for (int i = 0; i < 4; i++) cr_assert(C[i] == 0.0f, "emulated C[%d] = %a, expected 0", i, C[i]);
}

// Inf and NaN operands: NaN where the exact result is NaN (inf * 0, inf - inf), inf of the
// right sign where it is infinite.
Test(mm_cpu, fp32_inf_nan) {
    tu_rng r = {fmt_rng_make_key(test_seed("fp32_inf_nan"), 24), 0};
    const fmt_t f = tu_fmt("fp16");
    for (int c = 0; c < 30; c++) {
        const size_t M = 4, N = 5, K = (size_t)tu_rng_int(&r, 2, 40);
        tu_operand A, B;
        make_operand(&A, &r, true, &f, M, K, K, false, 0, SC_NONE, 0, 1.0);
        make_operand(&B, &r, false, &f, K, N, K, c & 1, 0, SC_NONE, 0, 1.0);
        const float specials[] = {INFINITY, -INFINITY, NAN};
        A.x[tu_rng_int(&r, 0, (int)M - 1) * A.op.ld + tu_rng_int(&r, 0, (int)K - 1)] =
            specials[tu_rng_int(&r, 0, 2)];
        A.x[tu_rng_int(&r, 0, (int)M - 1) * A.op.ld + tu_rng_int(&r, 0, (int)K - 1)] =
            specials[tu_rng_int(&r, 0, 1)];
        mm_opts o;
        mm_opts_default(&o);
        float C[20];
        double exact[20], absdot[20];
        cr_assert_eq(mm_ref_exact(exact, absdot, NULL, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        cr_assert_eq(mm_cpu(C, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        tu_check_bound("fp32_inf_nan", C, NULL, N, exact, absdot, M, N, K, &o, 0x1p-24);
        tu_operand_free(&A), tu_operand_free(&B);
    }
}

// e4m3 output with saturation: |exact| well beyond max gives exactly +-448; the rest is within
// the bound.
Test(mm_cpu, fp32_saturating_e4m3_output) {
    tu_rng r = {fmt_rng_make_key(test_seed("fp32_saturating_e4m3_output"), 25), 0};
    const fmt_t f = tu_fmt("bf16"), out = tu_fmt("e4m3");
    for (int c = 0; c < 20; c++) {
        const size_t M = (size_t)tu_rng_int(&r, 1, 12), N = (size_t)tu_rng_int(&r, 1, 12),
                     K = (size_t)tu_rng_int(&r, 1, 100);
        tu_operand A, B;
        make_operand(&A, &r, true, &f, M, K, K, c & 1, 0, SC_NONE, 0, 8.0);
        make_operand(&B, &r, false, &f, K, N, K, c & 2, 0, SC_NONE, 0, 8.0);
        mm_opts o;
        mm_opts_default(&o);
        o.out_fmt = out;
        o.out_round.overflow = FMT_SATURATE;
        float *C = malloc(M * N * sizeof *C);
        double *exact = malloc(M * N * sizeof *exact), *absdot = malloc(M * N * sizeof *absdot);
        cr_assert_eq(mm_ref_exact(exact, absdot, NULL, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        cr_assert_eq(mm_cpu(C, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        int nsat = 0;
        for (size_t i = 0; i < M * N; i++) {
            if (fabs(exact[i]) > 480 && fabs(exact[i]) - tu_gamma((double)K + 2, 0x1p-24) * absdot[i] > 464) {
                cr_assert(C[i] == copysignf(448.0f, (float)exact[i]), "C[%zu] = %a, exact %g: expected "
                          "saturation to +-448", i, C[i], exact[i]);
                nsat++;
            } else if (fabs(exact[i]) <= 448) {
                const double tol = tu_gamma((double)K + 2, 0x1p-24) * absdot[i] + 0.5 * tu_ulp_at(&out, C[i]);
                cr_assert(fabs(C[i] - exact[i]) <= tol, "C[%zu] = %a, exact %g", i, C[i], exact[i]);
            }
            cr_assert(!isinf(C[i]) && !isnan(C[i]), "C[%zu] = %a: saturating output", i, C[i]);
        }
        free(C), free(exact), free(absdot);
        tu_operand_free(&A), tu_operand_free(&B);
    }
}

// K == 0 and beta: C = round_out(beta * C).
Test(mm_cpu, empty_k) {
    const fmt_t f = tu_fmt("e4m3");
    float A[1] = {0}, B[1] = {0}, C[4] = {1, 2, 3, 4};
    mm_operand a = {.x = A, .ld = 1, .fmt = f}, b = {.x = B, .ld = 2, .fmt = f};
    mm_opts o;
    mm_opts_default(&o);
    o.beta = 0.5f;
    const int st = mm_cpu(C, 2, &a, &b, 2, 2, 0, &o);
    if (st == MM_OK)
        for (int i = 0; i < 4; i++) cr_assert(C[i] == 0.5f * (float)(i + 1), "C[%d] = %g", i, C[i]);
    else
        cr_assert_eq(st, MM_EINVAL);
}

// Element (i, k) of op(A) in A's storage, whatever its layout.
static float *a_elem(tu_operand *A, size_t i, size_t k) {
    return A->op.trans ? &A->x[k * A->op.ld + i] : &A->x[i * A->op.ld + k];
}

// Terms of very different magnitudes, so that s + a*b spans more than 53 bits: the directed
// modes then depend on the sticky bits below a double (the round-to-odd step of mm_cpu).
Test(mm_cpu, emulated_wide_range) {
    tu_rng r = {fmt_rng_make_key(test_seed("emulated_wide_range"), 13), 0};
    const fmt_t f = tu_fmt("bf16");
    static const char *const specs[] = {"m13:rup", "m13:rdn", "bf16:rtz", "fp16:rto", "m13", "bf16:rna"};
    for (int c = 0; c < 120; c++) {
        const size_t M = (size_t)tu_rng_int(&r, 1, 5), N = (size_t)tu_rng_int(&r, 1, 9),
                     K = (size_t)tu_rng_int(&r, 2, 40);
        tu_operand A, B;
        make_operand(&A, &r, true, &f, M, K, K, c & 1, 0, SC_NONE, 0, 1.0);
        make_operand(&B, &r, false, &f, K, N, K, c & 2, 0, SC_NONE, 0, 1.0);
        for (size_t i = 0; i < M; i++)  // scale each element of A by 2^(-60..10)
            for (size_t k = 0; k < K; k++) {
                float *a = a_elem(&A, i, k);
                *a = ldexpf(*a, tu_rng_int(&r, -60, 10));
            }
        const mm_opts o = tu_acc_opts(specs[c % 6]);
        char what[64];
        snprintf(what, sizeof what, "%s case %d", specs[c % 6], c);
        expect_matches_ref(what, &A.op, &B.op, M, N, K, &o, N, NULL);
        tu_operand_free(&A), tu_operand_free(&B);
    }
}

// The accumulator's edges, where mm_cpu leaves its vector step for the general scalar rounding:
// subnormal and overflowing partial sums (fp16: normals from 2^-14, max 65504; e4m3: overflow is
// NaN), exact cancellations and zero-heavy operands, every mode; and an accumulator without -0
// (e5m2fnuz), which mm_cpu rounds entirely in scalar.
Test(mm_cpu, emulated_accumulator_edges) {
    tu_rng r = {fmt_rng_make_key(test_seed("emulated_accumulator_edges"), 14), 0};
    const fmt_t f = tu_fmt("bf16");
    static const char *const accs[] = {"fp16", "e4m3", "e5m2fnuz", "m10"};
    static const char *const modes[] = {"rne", "rna", "rtz", "rup", "rdn", "rto"};
    for (int c = 0; c < 240; c++) {
        const size_t M = (size_t)tu_rng_int(&r, 1, 9), N = (size_t)tu_rng_int(&r, 1, 17),
                     K = (size_t)tu_rng_int(&r, 1, 48);
        tu_operand A, B;
        make_operand(&A, &r, true, &f, M, K, K, c & 1, 0, SC_NONE, 0, 1.0);
        make_operand(&B, &r, false, &f, K, N, K, c & 2, 0, SC_NONE, 0, 1.0);
        const int lo_exp = c % 3 == 0 ? -40 : -20, hi_exp = c % 3 == 2 ? 14 : 4;
        for (size_t i = 0; i < M; i++)  // A: magnitudes 2^(lo_exp..hi_exp), a third of them zero
            for (size_t k = 0; k < K; k++) {
                float *a = a_elem(&A, i, k);
                *a = tu_rng_int(&r, 0, 2) == 0 ? 0.0f : ldexpf(*a, tu_rng_int(&r, lo_exp, hi_exp));
            }
        if (c % 4 == 1 && K >= 2 && !B.op.trans) {  // B's rows 0 and 1 equal, A's columns opposite:
            for (size_t j = 0; j < N; j++) B.x[B.op.ld + j] = B.x[j];  // the first two products cancel
            for (size_t i = 0; i < M; i++) {
                float *a0 = a_elem(&A, i, 0), *a1 = a_elem(&A, i, 1);
                *a1 = -*a0;
                for (size_t k = 2; i % 2 == 0 && k < K; k++)  // even rows: the sum stays an exact 0
                    *a_elem(&A, i, k) = 0.0f;
            }
        }
        char spec[32];
        snprintf(spec, sizeof spec, "%s:%s", accs[c % 4], modes[(c / 4) % 6]);
        mm_opts o = tu_acc_opts(spec);
        o.acc.promote_every = c % 5 == 0 ? 3 : 0;
        char what[96];
        snprintf(what, sizeof what, "%s promote %d case %d", spec, o.acc.promote_every, c);
        expect_matches_ref(what, &A.op, &B.op, M, N, K, &o, N, NULL);
        tu_operand_free(&A), tu_operand_free(&B);
    }
}

// --- the float32 kernel of the emulated path (kernels/cpu/scaled_mm_cpu_emu_f32.c)

// Its accumulators: float32's binades with 1 to 21 fraction bits (every mode), and fp32 itself
// (rne everywhere; rtz, rup, rdn where the build has AVX-512).
static const char *const F32_NARROW[] = {"m13", "e8m13", "bf16", "m21", "m1"};
static const char *const MODES[] = {"rne", "rna", "rtz", "rup", "rdn", "rto"};
static const char *const F32_FP32[] = {"fp32:promote=64", "fp32:rtz", "fp32:rup:promote=5", "fp32:rdn:promote=128"};
enum { N_F32_SPECS = 5 * 6 + 4 };

// The s-th accumulator spec of the float32 kernel (s < N_F32_SPECS), with the promotion it asks
// for; *must_cover says whether every build runs it there.
static void f32_spec(char *spec, size_t len, int s, bool *must_cover) {
    if (s < 30) snprintf(spec, len, "%s:%s", F32_NARROW[s / 6], MODES[s % 6]);
    else snprintf(spec, len, "%s", F32_FP32[s - 30]);
    *must_cover = s < 30 || s == 30;
}

// Whether mm_cpu runs the float32 kernel on this case.
static bool runs_f32_kernel(const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                            const mm_opts *o) {
    fmt_rounder acc;
    const fmt_round_opts ao = {.mode = o->acc.mode, .overflow = FMT_OVERFLOW_IEEE};
    cr_assert_eq(fmt_rounder_make(&acc, &o->acc.fmt, &ao), FMT_OK);
    return mm__emu_f32_covers(A, B, M, N, K, &acc.k, o->acc.mode);
}

static void expect_f32_kernel(const char *what, const tu_operand *A, const tu_operand *B, size_t M,
                              size_t N, size_t K, const mm_opts *o, bool must_cover) {
    if (must_cover)
        cr_assert(runs_f32_kernel(&A->op, &B->op, M, N, K, o), "%s: expected the float32 kernel to "
                  "take this case", what);
}

// Overwrites op(X)'s elements (rows x cols) with bf16 values +-(1 + j/128) 2^e, e uniform in
// [elo, ehi], one in eight zero: magnitudes under control, every product exact in float32.
static void set_bf16_binades(tu_operand *X, tu_rng *r, size_t rows, size_t cols, int elo, int ehi) {
    const size_t srows = X->op.trans ? cols : rows, scols = X->op.trans ? rows : cols;
    for (size_t i = 0; i < srows; i++)
        for (size_t j = 0; j < scols; j++) {
            const float m = 1.0f + (float)tu_rng_int(r, 0, 127) / 128.0f;
            const float v = tu_rng_int(r, 0, 7) == 0 ? 0.0f : ldexpf(m, tu_rng_int(r, elo, ehi));
            X->x[i * X->op.ld + j] = tu_rng_int(r, 0, 1) ? -v : v;
        }
}

// Shapes over several tiles (8 x 32 with AVX-512, 4 x 16 otherwise), ragged and exact, with
// scales, trans, alpha, beta and promotion, for every accumulator and mode of the kernel.
Test(mm_cpu, emulated_f32_shapes) {
    tu_rng r = {fmt_rng_make_key(test_seed("emulated_f32_shapes"), 31), 0};
    static const char *const elems[] = {"e4m3", "e5m2", "e2m1", "bf16", "fp16", "e3m2"};
    static const int promote[] = {0, 1, 5, 32, 128};
    for (int s = 0; s < N_F32_SPECS; s++)
        for (int c = 0; c < 5; c++) {
            char spec[48];
            bool must_cover;
            f32_spec(spec, sizeof spec, s, &must_cover);
            const size_t M = c == 0 ? 16 : (size_t)tu_rng_int(&r, 1, 20);
            const size_t N = c == 0 ? 64 : (size_t)tu_rng_int(&r, 1, c == 1 ? 12 : 70);
            const size_t K = (size_t)tu_rng_int(&r, 1, c == 2 ? 20 : 160);
            const fmt_t fa = tu_fmt(elems[tu_rng_int(&r, 0, 5)]), fb = tu_fmt(elems[tu_rng_int(&r, 0, 5)]);
            const int bks[] = {0, 16, 32, 128};
            const int block_k = bks[tu_rng_int(&r, 0, 3)];
            tu_operand A, B;
            make_operand(&A, &r, true, &fa, M, K, K, tu_rng_int(&r, 0, 1), block_k,
                         (tu_scale_kind)tu_rng_int(&r, 0, 2), 0.0f, 1.0);
            make_operand(&B, &r, false, &fb, K, N, K, tu_rng_int(&r, 0, 1), block_k,
                         (tu_scale_kind)tu_rng_int(&r, 0, 1), 0.75f, 1.0);
            mm_opts o = tu_acc_opts(spec);
            if (s < 30) o.acc.promote_every = promote[tu_rng_int(&r, 0, 4)];
            o.alpha = tu_rng_int(&r, 0, 1) ? 1.0f : (float)tu_rng_normal(&r);
            o.beta = tu_rng_int(&r, 0, 2) ? 0.0f : (float)tu_rng_normal(&r);
            const size_t ldc = N + (size_t)tu_rng_int(&r, 0, 2);
            float *Cin = malloc(M * ldc * sizeof *Cin);
            for (size_t i = 0; i < M * ldc; i++) Cin[i] = (float)tu_rng_normal(&r);
            char what[320];
            snprintf(what, sizeof what, "%s promote %d case %d (M %zu N %zu K %zu %s x %s, trans %d%d, "
                     "block_k %d)", spec, o.acc.promote_every, c, M, N, K, fa.name, fb.name, A.op.trans,
                     B.op.trans, block_k);
            expect_f32_kernel(what, &A, &B, M, N, K, &o, must_cover);
            expect_matches_ref(what, &A.op, &B.op, M, N, K, &o, ldc, Cin);
            free(Cin);
            tu_operand_free(&A), tu_operand_free(&B);
        }
}

// One case of the binade tests below: A's elements in 2^[ea0, ea1], B's in 2^[eb0, eb1]
// (set_bf16_binades), fp32 output, alpha 1, beta 0. Returns how many results satisfy pred.
static int binade_case(const char *test, tu_rng *r, const char *spec, bool must_cover, int c, int ea0,
                       int ea1, int eb0, int eb1, bool (*pred)(float)) {
    const fmt_t f = tu_fmt("bf16");
    const size_t M = (size_t)tu_rng_int(r, 1, 12), N = (size_t)tu_rng_int(r, 1, 40), K = (size_t)tu_rng_int(r, 1, 64);
    tu_operand A, B;
    make_operand(&A, r, true, &f, M, K, K, tu_rng_int(r, 0, 1), 0, SC_NONE, 0, 1.0);
    make_operand(&B, r, false, &f, K, N, K, tu_rng_int(r, 0, 1), 0, SC_NONE, 0, 1.0);
    set_bf16_binades(&A, r, M, K, ea0, ea1);
    set_bf16_binades(&B, r, K, N, eb0, eb1);
    mm_opts o = tu_acc_opts(spec);
    if (tu_rng_int(r, 0, 3) == 0) o.acc.promote_every = tu_rng_int(r, 1, 9);
    char what[128];
    snprintf(what, sizeof what, "%s %s promote %d case %d (M %zu N %zu K %zu)", test, spec,
             o.acc.promote_every, c, M, N, K);
    expect_f32_kernel(what, &A, &B, M, N, K, &o, must_cover);
    expect_matches_ref(what, &A.op, &B.op, M, N, K, &o, N, NULL);
    float *C = malloc(M * N * sizeof *C);
    cr_assert_eq(mm_cpu(C, N, &A.op, &B.op, M, N, K, &o), MM_OK);
    int hits = 0;
    for (size_t i = 0; i < M * N; i++) hits += pred(C[i]);
    free(C);
    tu_operand_free(&A), tu_operand_free(&B);
    return hits;
}

// Every accumulator of the float32 kernel over 8 binade cases (binade_case); at least one
// result satisfies pred, else the test lost the range it is about (named by range).
static void binade_test(const char *test, uint64_t stream, int ea0, int ea1, int eb0, int eb1,
                        bool (*pred)(float), const char *range) {
    tu_rng r = {fmt_rng_make_key(test_seed(test), stream), 0};
    for (int s = 0; s < N_F32_SPECS; s++) {
        char spec[48];
        bool must_cover;
        f32_spec(spec, sizeof spec, s, &must_cover);
        int hits = 0;
        for (int c = 0; c < 8; c++) hits += binade_case(test, &r, spec, must_cover, c, ea0, ea1, eb0, eb1, pred);
        cr_assert(hits > 0, "%s %s: no %s result in 8 cases: the test lost its range", test, spec, range);
    }
}

static bool is_subnormal_f32(float x) { return x != 0.0f && fabsf(x) < FLT_MIN; }
static bool is_huge_f32(float x) { return fabsf(x) >= 0x1p127f; }  // inf included

// Partial sums in the accumulator's subnormal range: products of +-[1, 2) 2^-63 and
// +-[1, 2) 2^[-63, -62] lie in [2^-126, 2^-123), and their signed sums cancel below 2^-126, onto
// the accumulator's subnormal grid (2^-(126 + m); float32's for fp32). Every result is the
// final accumulator (no scales), so the test also checks that it reached that range.
Test(mm_cpu, emulated_f32_subnormal_sums) {
    binade_test("emulated_f32_subnormal_sums", 32, -63, -63, -63, -62, is_subnormal_f32, "subnormal");
}

// Partial sums past the accumulator's max: products of +-[1, 2) 2^[62, 63] and +-[1, 2) 2^63 lie
// in [2^125, 2^128) (below FLT_MAX), and a few of one sign overflow: inf in the nearest modes,
// max toward zero and rto, by sign in the directed modes; later products meet that inf or max.
Test(mm_cpu, emulated_f32_overflow) {
    binade_test("emulated_f32_overflow", 33, 62, 63, 63, 63, is_huge_f32, "|C| >= 2^127");
}

// Segment edges: promote_every in {1, 2, 31, 32, 33, 127, 128, 129} against K around one and two
// segments, with and without scaled K-blocks of 32, where both kinds of edge meet.
Test(mm_cpu, emulated_f32_promotion_boundaries) {
    tu_rng r = {fmt_rng_make_key(test_seed("emulated_f32_promotion_boundaries"), 34), 0};
    static const int pes[] = {1, 2, 31, 32, 33, 127, 128, 129};
    static const char *const specs[] = {"m13", "bf16:rtz", "e8m13:rup", "fp32"};
    const fmt_t f = tu_fmt("e4m3");
    for (size_t p = 0; p < sizeof pes / sizeof *pes; p++)
        for (int c = 0; c < 8; c++) {
            const int pe = pes[p];
            const int ks[] = {pe - 1, pe, pe + 1, 2 * pe + 1};
            const size_t K = (size_t)(ks[c % 4] > 0 ? ks[c % 4] : 1);
            const size_t M = (size_t)tu_rng_int(&r, 1, 10), N = (size_t)tu_rng_int(&r, 1, 40);
            const bool blocks = c >= 4;
            tu_operand A, B;
            make_operand(&A, &r, true, &f, M, K, K, tu_rng_int(&r, 0, 1), blocks ? 32 : 0,
                         blocks ? SC_POW2 : SC_NONE, 0.0f, 1.0);
            make_operand(&B, &r, false, &f, K, N, K, tu_rng_int(&r, 0, 1), blocks ? 32 : 0,
                         blocks ? SC_E4M3 : SC_NONE, 0.0f, 1.0);
            const char *spec = specs[c % 4];
            mm_opts o = tu_acc_opts(spec);
            o.acc.promote_every = pe;
            char what[128];
            snprintf(what, sizeof what, "%s promote %d K %zu blocks %d (M %zu N %zu)", spec, pe, K, blocks, M, N);
            expect_f32_kernel(what, &A, &B, M, N, K, &o, true);
            expect_matches_ref(what, &A.op, &B.op, M, N, K, &o, N, NULL);
            tu_operand_free(&A), tu_operand_free(&B);
        }
}

// What the float32 kernel does not take goes to the double kernel, and stays exact: products
// below 2^-126 or past FLT_MAX, an infinite element; accumulators outside its class (fp16's
// binades, 22 fraction bits, fp32 rounding to nearest-away).
Test(mm_cpu, emulated_f32_routing) {
    tu_rng r = {fmt_rng_make_key(test_seed("emulated_f32_routing"), 35), 0};
    static const char *const specs[] = {"m13", "fp16", "m22", "fp32:rna:promote=3"};
    for (int c = 0; c < 24; c++) {
        const size_t M = (size_t)tu_rng_int(&r, 1, 12), N = (size_t)tu_rng_int(&r, 1, 40), K = (size_t)tu_rng_int(&r, 1, 64);
        const fmt_t f = tu_fmt("bf16");
        tu_operand A, B;
        make_operand(&A, &r, true, &f, M, K, K, tu_rng_int(&r, 0, 1), 0, SC_NONE, 0, 1.0);
        make_operand(&B, &r, false, &f, K, N, K, tu_rng_int(&r, 0, 1), 0, SC_NONE, 0, 1.0);
        const char *spec = specs[c % 4];
        const int why = c % 4 == 0 ? (c / 4) % 3 : 3;  // m13: the operands' reason; others: the accumulator's
        if (why == 0) set_bf16_binades(&A, &r, M, K, -70, -60), set_bf16_binades(&B, &r, K, N, -70, -60);
        if (why == 1) set_bf16_binades(&A, &r, M, K, 60, 70), set_bf16_binades(&B, &r, K, N, 60, 70);
        if (why == 2) *a_elem(&A, (size_t)tu_rng_int(&r, 0, (int)M - 1), (size_t)tu_rng_int(&r, 0, (int)K - 1)) = INFINITY;
        if (why <= 1) {  // make sure one product leaves float32's range
            *a_elem(&A, 0, 0) = why == 0 ? 0x1p-70f : 0x1p70f;
            B.x[0] = why == 0 ? 0x1p-70f : 0x1p70f;  // B's element (0, 0) in either storage
        }
        const mm_opts o = tu_acc_opts(spec);
        char what[96];
        snprintf(what, sizeof what, "routing %s reason %d case %d", spec, why, c);
        cr_assert(!runs_f32_kernel(&A.op, &B.op, M, N, K, &o), "%s: the float32 kernel must not take "
                  "this case", what);
        expect_matches_ref(what, &A.op, &B.op, M, N, K, &o, N, NULL);
        tu_operand_free(&A), tu_operand_free(&B);
    }
}

#if defined(__SSE__)
#include <xmmintrin.h>
// A caller whose MXCSR flushes subnormals (FTZ and DAZ set) gets the same bits: the kernels run
// under the default environment and put the caller's back.
Test(mm_cpu, emulated_f32_caller_ftz_daz) {
    tu_rng r = {fmt_rng_make_key(test_seed("emulated_f32_caller_ftz_daz"), 36), 0};
    const fmt_t f = tu_fmt("bf16");
    static const char *const specs[] = {"m13", "fp32:promote=64", "bf16:rdn"};
    for (int c = 0; c < 12; c++) {
        const size_t M = 9, N = 33, K = 40;
        tu_operand A, B;
        make_operand(&A, &r, true, &f, M, K, K, false, 0, SC_NONE, 0, 1.0);
        make_operand(&B, &r, false, &f, K, N, K, false, 0, SC_NONE, 0, 1.0);
        set_bf16_binades(&A, &r, M, K, -63, -63);
        set_bf16_binades(&B, &r, K, N, -63, -62);
        const mm_opts o = tu_acc_opts(specs[c % 3]);
        float C0[9 * 33], C1[9 * 33];
        cr_assert_eq(mm_ref(C0, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        const unsigned csr = _mm_getcsr();
        _mm_setcsr(csr | 0x8040u);  // FTZ | DAZ
        const int st = mm_cpu(C1, N, &A.op, &B.op, M, N, K, &o);
        const unsigned after = _mm_getcsr();
        _mm_setcsr(csr);
        cr_assert_eq(st, MM_OK);
        cr_assert_eq(after & 0xffc0u, (csr | 0x8040u) & 0xffc0u, "mm_cpu changed the caller's MXCSR "
                     "controls: 0x%x, was 0x%x", after, csr | 0x8040u);
        for (size_t i = 0; i < M * N; i++)
            cr_assert(tu_samef(C0[i], C1[i]), "%s case %d C[%zu]: ref %a cpu %a (caller FTZ, DAZ)",
                      specs[c % 3], c, i, C0[i], C1[i]);
        tu_operand_free(&A), tu_operand_free(&B);
    }
}
#endif

// --- fixed-order float32 accumulation (mm_opts.fixed_order, kernels/cpu/scaled_mm_cpu_fixed.c)
//
// The definition, scalar: the scales folded into each element (x * s, rounded once, as the fold
// of mm_cpu does), s = +0, s = fl32(s + fl32(a b)) for k = 0..K-1, y = fl32(alpha' s) with alpha'
// = fl32(alpha ta tb), C = fl32(y + fl32(beta C)) (beta 0: fl32(y + 0)), then the output rounding.
// The kernel must give exactly these bits whatever its vector width, tile shape and thread
// count, so that a training run gives the same bits on every x86-64 CPU.

static float fold_elem(const tu_operand *X, bool is_a, size_t i, size_t k, size_t N, size_t K) {
    const mm_operand *o = &X->op;
    // A: row i of op(A), element k; B: element k of column i of op(B).
    const float x = is_a ? (o->trans ? o->x[k * o->ld + i] : o->x[i * o->ld + k])
                         : (o->trans ? o->x[i * o->ld + k] : o->x[k * o->ld + i]);
    if (!o->scales) return x;
    size_t bk, nb = mm__nblocks(o, K, &bk);
    const float s = is_a ? o->scales[i * nb + k / bk] : o->scales[(k / bk) * N + i];
    return x * s;
}

static void fixed_reference(float *C, size_t ldc, const tu_operand *A, const tu_operand *B, size_t M, size_t N,
                            size_t K, const mm_opts *o) {
    const float alpha = mm__fl32_prod3(o->alpha, mm__tscale(&A->op), mm__tscale(&B->op));
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (size_t k = 0; k < K; k++) {
                const float p = fold_elem(A, true, i, k, N, K) * fold_elem(B, false, j, k, N, K);
                s = s + p;
            }
            const float y = alpha * s;
            C[i * ldc + j] = y + (o->beta != 0.0f ? o->beta * C[i * ldc + j] : 0.0f);
        }
    for (size_t i = 0; i < M; i++) {
        fmt_round_opts ro = o->out_round;
        ro.offset += i * N;
        cr_assert_eq(fmt_round_f32(&o->out_fmt, C + i * ldc, N, &ro, NULL), FMT_OK);
    }
}

// Sets the OpenMP threads to n (n > 0) and returns the number before.
static int set_threads(int n) {
#ifdef _OPENMP
    const int was = omp_get_max_threads();
    omp_set_num_threads(n);
    return was;
#else
    (void)n;
    return 1;
#endif
}

// Random shapes over several tiles (up to 8 x 32) with ragged edges, K up to 300, every trans
// variant, float32 and e4m3 elements with block and tensor scales, alpha and beta, fp32 and
// bf16 outputs: the kernel against the scalar definition bit for bit, on 1 and 2 threads, and
// with C's rows computed in two calls (the trainer splits rows over its threads).
Test(mm_cpu, fixed_order_is_the_sequential_sum) {
    tu_rng r = {fmt_rng_make_key(test_seed("fixed_order_is_the_sequential_sum"), 24), 0};
    const fmt_t fp32 = tu_fmt("fp32"), e4m3 = tu_fmt("e4m3"), bf16 = tu_fmt("bf16");
    for (int c = 0; c < 120; c++) {
        const size_t M = (size_t)tu_rng_int(&r, 1, 40), N = (size_t)tu_rng_int(&r, 1, 70);
        const size_t K = (size_t)tu_rng_int(&r, 1, 300);
        const fmt_t *f = c % 3 ? &fp32 : &e4m3;
        const tu_scale_kind sk = c % 4 == 1 ? SC_POW2 : c % 4 == 2 ? SC_E4M3 : SC_NONE;
        const int bk = c % 2 ? 32 : 0;
        tu_operand A, B;
        make_operand(&A, &r, true, f, M, K, K, tu_rng_int(&r, 0, 1), bk, sk, c % 5 == 0 ? 0.75f : 0.0f, 1.0);
        make_operand(&B, &r, false, f, K, N, K, tu_rng_int(&r, 0, 1), bk, sk, 0.0f, 1.0);
        mm_opts o;
        mm_opts_default(&o);
        o.fixed_order = true;
        o.alpha = tu_rng_int(&r, 0, 1) ? 1.0f : (float)tu_rng_normal(&r);
        o.beta = tu_rng_int(&r, 0, 2) ? 0.0f : (float)tu_rng_normal(&r);
        o.out_fmt = c % 6 == 5 ? bf16 : fp32;
        const size_t ldc = N + (size_t)tu_rng_int(&r, 0, 2);
        float *Cin = malloc(M * ldc * sizeof *Cin), *C0 = malloc(M * ldc * sizeof *C0),
              *C1 = malloc(M * ldc * sizeof *C1);
        cr_assert(Cin && C0 && C1);
        for (size_t i = 0; i < M * ldc; i++) Cin[i] = (float)tu_rng_normal(&r);
        memcpy(C0, Cin, M * ldc * sizeof *C0);
        fixed_reference(C0, ldc, &A, &B, M, N, K, &o);
        for (int run = 0; run < 3; run++) {
            memcpy(C1, Cin, M * ldc * sizeof *C1);
            const int was = set_threads(run == 1 ? 2 : 1);
            if (run < 2) {
                cr_assert_eq(mm_cpu(C1, ldc, &A.op, &B.op, M, N, K, &o), MM_OK);
            } else {  // rows [0, m0) and [m0, M) in two calls
                const size_t m0 = M / 2;
                mm_operand a1 = A.op;
                a1.x += A.op.trans ? m0 : m0 * A.op.ld;
                if (a1.scales) a1.scales += m0 * mm__nblocks(&A.op, K, &(size_t){0});
                if (m0) cr_assert_eq(mm_cpu(C1, ldc, &A.op, &B.op, m0, N, K, &o), MM_OK);
                cr_assert_eq(mm_cpu(C1 + m0 * ldc, ldc, &a1, &B.op, M - m0, N, K, &o), MM_OK);
            }
            set_threads(was);
            for (size_t i = 0; i < M; i++)
                for (size_t j = 0; j < ldc; j++) {
                    const float x = C0[i * ldc + j], y = C1[i * ldc + j];
                    cr_assert(tu_samef(x, y),
                              "case %d (%s, M %zu N %zu K %zu, trans %d%d, scales %d/%d, run %d): C[%zu,%zu] "
                              "definition %a, kernel %a", c, f->name, M, N, K, A.op.trans, B.op.trans, (int)sk, bk,
                              run, i, j, x, y);
                }
        }
        free(Cin), free(C0), free(C1);
        tu_operand_free(&A), tu_operand_free(&B);
    }
}

// mm_opts_default takes fixed_order from the process default, false until a program sets it.
Test(mm_cpu, fixed_order_default) {
    mm_opts o;
    mm_opts_default(&o);
    cr_assert(!o.fixed_order && !mm_fixed_order_default());
    mm_fixed_order_set_default(true);
    mm_opts_default(&o);
    cr_assert(o.fixed_order && mm_fixed_order_default());
    mm_fixed_order_set_default(false);
    mm_opts_default(&o);
    cr_assert(!o.fixed_order);
}
