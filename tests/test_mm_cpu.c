// test_mm_cpu.c: the CPU backend of scaled_mm.h (mm_cpu) against the MPFR reference (mm_ref,
// mm_ref_exact).
// What is checked: emulated accumulators (bf16, fp16, m13, m13 promoted every 128, an rtz
// accumulator) are bit-exact with mm_ref on random shapes (1..12 x 1..40, K up to 300, K not a
// multiple of the block), with block and tensor scales, every trans variant, padded leading
// dimensions, alpha and beta; the fp32 accumulator stays within gamma_{K+2} * absdot plus the
// output rounding for every table format of 16 bits or fewer; zeros, inf/NaN propagation and
// saturating outputs.
// Random inputs come from the library's counter-based generator; the seed is printed and read
// from FPLAB_SEED to replay a failure.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/rng.h"
#include "formats/round.h"
#include "kernels/scaled_mm.h"
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
        mm_opts o;
        mm_opts_default(&o);
        char msg[256];
        cr_assert_eq(mm_acc_from_name(&o.acc, acc_spec, msg, sizeof msg), MM_OK, "%s: %s", acc_spec, msg);
        o.alpha = tu_rng_int(&r, 0, 2) ? 1.0f : (float)tu_rng_normal(&r);
        o.beta = tu_rng_int(&r, 0, 2) ? 0.0f : (float)tu_rng_normal(&r);
        o.out_fmt = tu_fmt(outs[tu_rng_int(&r, 0, 2)]);
        o.out_round.mode = tu_rng_int(&r, 0, 1) ? FMT_RNE : FMT_RTZ;
        const size_t ldc = N + (size_t)tu_rng_int(&r, 0, 2);
        float *C0 = malloc(M * ldc * sizeof *C0), *C1 = malloc(M * ldc * sizeof *C1);
        for (size_t i = 0; i < M * ldc; i++) C0[i] = C1[i] = (float)tu_rng_normal(&r);
        const int s1 = mm_ref(C0, ldc, &A.op, &B.op, M, N, K, &o);
        const int s2 = mm_cpu(C1, ldc, &A.op, &B.op, M, N, K, &o);
        cr_assert_eq(s1, MM_OK, "%s case %d: mm_ref status %d", acc_spec, c, s1);
        cr_assert_eq(s2, MM_OK, "%s case %d: mm_cpu status %d", acc_spec, c, s2);
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < ldc; j++) {
                const float x = C0[i * ldc + j], y = C1[i * ldc + j];
                cr_assert(tu_samef(x, y),
                          "%s case %d (M %zu N %zu K %zu %s x %s, trans %d%d, block_k %d, scales "
                          "%d%d, out %s): C[%zu,%zu] ref %a (0x%08x) cpu %a (0x%08x)",
                          acc_spec, c, M, N, K, fa.name, fb.name, A.op.trans, B.op.trans, block_k,
                          A.scales != NULL, B.scales != NULL, o.out_fmt.name, i, j, x, tu_f2u(x),
                          y, tu_f2u(y));
            }
        free(C0), free(C1);
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
        mm_opts o;
        mm_opts_default(&o);
        char msg[256];
        cr_assert_eq(mm_acc_from_name(&o.acc, "bf16", msg, sizeof msg), MM_OK);
        float C0[12], C1[12];
        cr_assert_eq(mm_ref(C0, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        cr_assert_eq(mm_cpu(C1, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        for (size_t i = 0; i < M * N; i++)
            cr_assert(tu_samef(C0[i], C1[i]), "case %d C[%zu]: ref %a cpu %a", c, i, C0[i], C1[i]);
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
        mm_opts o;
        mm_opts_default(&o);
        char msg[256];
        const char *spec = specs[c % 6];
        cr_assert_eq(mm_acc_from_name(&o.acc, spec, msg, sizeof msg), MM_OK, "%s: %s", spec, msg);
        float C0[45], C1[45];
        cr_assert_eq(mm_ref(C0, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        cr_assert_eq(mm_cpu(C1, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        for (size_t i = 0; i < M * N; i++)
            cr_assert(tu_samef(C0[i], C1[i]), "%s case %d C[%zu]: ref %a (0x%08x) cpu %a (0x%08x)",
                      spec, c, i, C0[i], tu_f2u(C0[i]), C1[i], tu_f2u(C1[i]));
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
        mm_opts o;
        mm_opts_default(&o);
        char msg[256];
        cr_assert_eq(mm_acc_from_name(&o.acc, spec, msg, sizeof msg), MM_OK, "%s: %s", spec, msg);
        o.acc.promote_every = c % 5 == 0 ? 3 : 0;
        float C0[9 * 17], C1[9 * 17];
        cr_assert_eq(mm_ref(C0, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        cr_assert_eq(mm_cpu(C1, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        for (size_t i = 0; i < M * N; i++)
            cr_assert(tu_samef(C0[i], C1[i]), "%s promote %d case %d C[%zu]: ref %a (0x%08x) cpu %a (0x%08x)",
                      spec, o.acc.promote_every, c, i, C0[i], tu_f2u(C0[i]), C1[i], tu_f2u(C1[i]));
        tu_operand_free(&A), tu_operand_free(&B);
    }
}
