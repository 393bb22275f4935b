// test_mm_check.c: the front end of a matmul check (kernels/mm_check.h): B's recipe is A's with
// the tile transposed; operands made from the element values and tile scales that quantization
// gives are the quantized operands (mm_ref's result and mm_verify_run's report bit for bit, for
// every recipe kind); each refusal names the input (a value off the format, a scale off the
// scale format, a wrong scale count, scales without a recipe or a recipe without scales, a
// tensor scale of 0, an empty product) and leaves nothing allocated; the generated operands are
// the draws quantized with nearest-even and satfinite; mm_verify_run is mm_verify by name.
#include <criterion/criterion.h>

#include "kernels/mm_check.h"
#include "kernels/mm_verify.h"
#include "test_util.h"

static mm_check_problem problem(const char *fa, const char *fb, const char *recipe, size_t M, size_t N, size_t K) {
    mm_check_problem p = {.M = M, .N = N, .K = K, .fa = tu_fmt(fa), .fb = tu_fmt(fb), .sc = tu_scaling(recipe)};
    mm_opts_default(&p.o);
    return p;
}

Test(mm_check, side_scaling_transposes_b_only) {
    const fmt_scaling sc = tu_scaling("tile:4x16:fp32");
    const fmt_scaling a = mm_side_scaling(&sc, MM_SIDE_A), b = mm_side_scaling(&sc, MM_SIDE_B);
    cr_assert_eq(a.tile_rows, 4);
    cr_assert_eq(a.tile_cols, 16);
    cr_assert_eq(b.tile_rows, 16);
    cr_assert_eq(b.tile_cols, 4);
    cr_assert_str_eq(a.scale_fmt.name, b.scale_fmt.name);
}

Test(mm_check, strerror_names_each_status) {
    cr_assert_str_eq(mm_strerror(MM_OK), "ok");
    cr_assert_str_eq(mm_strerror(MM_EINVAL), "invalid argument");
    cr_assert_str_eq(mm_strerror(MM_ENOMEM), "out of memory");
    cr_assert_str_eq(mm_strerror(MM_ENODEV), "no device");
    cr_assert_str_eq(mm_strerror(MM_EUNSUPPORTED), "unsupported");
    cr_assert_str_eq(mm_strerror(12345), "unknown status");
}

// One side quantized as a caller of fmt_quantize_f32 holds it: element values, tile scales and
// the tensor scale (B stored K x N with the tile transposed).
typedef struct {
    float *elems, *tiles;
    size_t ntiles;
    float ts;
} held;

static held hold(const mm_check_problem *p, mm_side side, const float *x) {
    const bool is_a = side == MM_SIDE_A;
    const size_t rows = is_a ? p->M : p->K, cols = is_a ? p->K : p->N;
    const fmt_scaling s = mm_side_scaling(&p->sc, side);
    held h = {.ntiles = fmt_scale_count(&s, rows, cols)};
    h.elems = malloc(rows * cols * sizeof *h.elems);
    h.tiles = h.ntiles ? malloc(h.ntiles * sizeof *h.tiles) : NULL;
    float *deq = malloc(rows * cols * sizeof *deq);
    cr_assert(h.elems && deq && (h.tiles || !h.ntiles));
    fmt_quant_info info = {.elems = h.elems, .scales = h.tiles};
    const fmt_round_opts qo = {.mode = FMT_RNE, .overflow = FMT_SATURATE};
    cr_assert_eq(fmt_quantize_f32(is_a ? &p->fa : &p->fb, &s, deq, x, rows, cols, &qo, NULL, &info), FMT_OK);
    h.ts = info.tensor_scale;
    free(deq);
    return h;
}

static void held_free(held *h) { free(h->elems), free(h->tiles); }

static mm_values values_of(const held *h, const char *what, const char *swhat) {
    return (mm_values){.x = h->elems, .tiles = h->tiles, .ntiles = h->ntiles, .ts = h->ts, .what = what,
                       .scales_what = swhat};
}

Test(mm_check, operands_from_values_are_the_quantized_operands) {
    const char *recipes[] = {"none", "tensor", "row", "mx", "nvfp4", "block:32:e8m0", "tile:4x16:fp32"};
    const size_t M = 8, N = 12, K = 64;
    for (size_t r = 0; r < sizeof recipes / sizeof *recipes; r++) {
        const bool fp4 = !strcmp(recipes[r], "nvfp4");
        mm_check_problem p = problem(fp4 ? "e2m1" : "e4m3", fp4 ? "e2m1" : "e5m2", recipes[r], M, N, K);
        p.o.out_fmt = tu_fmt("bf16");
        mm_qmat qa, qb;
        char msg[512];
        cr_assert_eq(mm_check_random(&qa, &qb, &p, MM_DIST_LOGNORMAL, 7, msg, sizeof msg), MM_OK, "%s: %s",
                     recipes[r], msg);
        float *xa = malloc(M * K * sizeof *xa), *xb = malloc(K * N * sizeof *xb);
        cr_assert(xa && xb);
        mm_random_f32(xa, M * K, MM_DIST_LOGNORMAL, 7, 1);
        mm_random_f32(xb, K * N, MM_DIST_LOGNORMAL, 7, 2);
        held ha = hold(&p, MM_SIDE_A, xa), hb = hold(&p, MM_SIDE_B, xb);
        const mm_values va = values_of(&ha, "a", "a_scales"), vb = values_of(&hb, "b", "b_scales");
        mm_vmat A, B;
        cr_assert_eq(mm_check_from_values(&A, &B, &p, &va, &vb, msg, sizeof msg), MM_OK, "%s: %s", recipes[r], msg);
        float *c1 = malloc(M * N * sizeof *c1), *c2 = malloc(M * N * sizeof *c2);
        cr_assert(c1 && c2);
        cr_assert_eq(mm_ref(c1, N, &qa.op, &qb.op, M, N, K, &p.o), MM_OK);
        cr_assert_eq(mm_ref(c2, N, &A.op, &B.op, M, N, K, &p.o), MM_OK);
        cr_assert_eq(memcmp(c1, c2, M * N * sizeof *c1), 0, "%s: mm_ref differs on the operands from values",
                     recipes[r]);
        // The report through either operand set, by name and by position, is the same.
        mm_verify_report r1, r2;
        const mm_verify_problem vp = {.A = &A.op, .B = &B.op, .M = M, .N = N, .K = K, .o = p.o, .C = c2, .ldc = N};
        cr_assert_eq(mm_verify_run(&r1, NULL, &vp, NULL, msg, sizeof msg), MM_OK, "%s", msg);
        cr_assert_eq(mm_verify(&r2, NULL, c1, NULL, N, &qa.op, &qb.op, M, N, K, &p.o, NULL, msg, sizeof msg), MM_OK);
        cr_assert(r1.pass && r2.pass, "%s", recipes[r]);
        cr_assert_eq(r1.ncand, r2.ncand);
        cr_assert_eq(r1.max_ulp, r2.max_ulp);
        cr_assert_eq(r1.max_bound_ulp, r2.max_bound_ulp);
        for (size_t c = 0; c < r1.ncand; c++) cr_assert_eq(r1.cand[c].reproduced, r2.cand[c].reproduced);
        mm_vmat_free(&A), mm_vmat_free(&B);
        cr_assert_null(A.scales);
        held_free(&ha), held_free(&hb);
        mm_qmat_free(&qa), mm_qmat_free(&qb);
        free(xa), free(xb), free(c1), free(c2);
    }
}

// mm_check_from_values refuses, with msg containing want, and holds nothing.
static void refuse(const mm_check_problem *p, const mm_values *va, const mm_values *vb, const char *want) {
    mm_vmat A = {.scales = (float *)1}, B = {.scales = (float *)1};
    char msg[512] = "";
    cr_assert_eq(mm_check_from_values(&A, &B, p, va, vb, msg, sizeof msg), MM_EINVAL, "expected a refusal: %s", want);
    cr_assert(strstr(msg, want), "message '%s' lacks '%s'", msg, want);
    cr_assert_null(A.scales);
    cr_assert_null(B.scales);
}

Test(mm_check, from_values_refuses_bad_input_by_name) {
    const size_t M = 2, N = 3, K = 64;
    mm_check_problem p = problem("e4m3", "e4m3", "mx", M, N, K);
    float a[2 * 64], b[64 * 3], sa[2 * 2], sb[2 * 3];
    for (size_t i = 0; i < M * K; i++) a[i] = 1.0f;
    for (size_t i = 0; i < K * N; i++) b[i] = -0.5f;
    for (size_t i = 0; i < 4; i++) sa[i] = 2.0f;
    for (size_t i = 0; i < 6; i++) sb[i] = 0.25f;
    mm_values va = {.x = a, .tiles = sa, .ntiles = 4, .ts = 1, .what = "a", .scales_what = "a_scales"};
    mm_values vb = {.x = b, .tiles = sb, .ntiles = 6, .ts = 1, .what = "b", .scales_what = "b_scales"};
    mm_vmat A, B;
    char msg[512];
    cr_assert_eq(mm_check_from_values(&A, &B, &p, &va, &vb, msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert_eq(B.op.scales[1 * N + 2], 0.25f);  // B's scales (nblocks, N)
    mm_vmat_free(&A), mm_vmat_free(&B);

    a[1 * K + 5] = 1.1f;  // not an e4m3 value
    refuse(&p, &va, &vb, "a: element [1, 5] = 1.10000002 is not a value of e4m3 (nearest 1.125)");
    a[1 * K + 5] = 1.0f;
    sb[4] = 3.0f;  // not an e8m0 value: B's grid is 2 x 3
    refuse(&p, &va, &vb, "b_scales: element [1, 1] = 3 is not a value of e8m0");
    sb[4] = 0.25f;
    vb.ntiles = 5;
    refuse(&p, &va, &vb, "b_scales has 5 scales; the recipe mx on a 64 x 3 B makes 6 (2 x 3)");
    vb.ntiles = 6, va.tiles = NULL;
    refuse(&p, &va, &vb, "needs a_scales");
    va.tiles = sa, va.ts = 0;
    refuse(&p, &va, &vb, "a_scales: the tensor scale is 0");
    va.ts = 1;
    mm_check_problem pn = problem("e4m3", "e4m3", "none", M, N, K);
    refuse(&pn, &va, &vb, "a_scales given but the recipe is none");
    mm_check_problem p0 = problem("e4m3", "e4m3", "mx", M, N, 0);
    refuse(&p0, &va, &vb, "expected every size >= 1");
    // A product mm_validate refuses (fp32 operands under a bf16 accumulator) is refused too.
    mm_check_problem pv = problem("fp32", "fp32", "none", 1, 1, 1);
    cr_assert_eq(mm_acc_from_name(&pv.o.acc, "bf16", NULL, 0), MM_OK);
    const float one = 1;
    const mm_values v1 = {.x = &one, .ts = 1, .what = "a", .scales_what = "a_scales"};
    cr_assert_eq(mm_check_from_values(&A, &B, &pv, &v1, &v1, msg, sizeof msg), MM_EINVAL);
    cr_assert(msg[0]);
}

Test(mm_check, random_operands_are_the_draws_quantized) {
    mm_check_problem p = problem("e2m1", "e4m3", "mx", 4, 5, 96);
    mm_qmat qa, qb, ra, rb;
    char msg[512];
    cr_assert_eq(mm_check_random(&qa, &qb, &p, MM_DIST_OUTLIERS, 3, msg, sizeof msg), MM_OK, "%s", msg);
    float xa[4 * 96], xb[96 * 5];
    mm_random_f32(xa, 4 * 96, MM_DIST_OUTLIERS, 3, 1);
    mm_random_f32(xb, 96 * 5, MM_DIST_OUTLIERS, 3, 2);
    const fmt_round_opts qo = {.mode = FMT_RNE, .overflow = FMT_SATURATE};
    cr_assert_eq(mm_check_quantize(&ra, &rb, &p, xa, xb, &qo, msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert_eq(memcmp(qa.q, ra.q, sizeof xa), 0);
    cr_assert_eq(memcmp(qb.q, rb.q, sizeof xb), 0);
    cr_assert_eq(memcmp(qa.scales, ra.scales, 4 * 3 * sizeof(float)), 0);
    cr_assert_eq(memcmp(qb.scales, rb.scales, 3 * 5 * sizeof(float)), 0);
    mm_qmat_free(&qa), mm_qmat_free(&qb), mm_qmat_free(&ra), mm_qmat_free(&rb);
    // Refused products say why and hold nothing.
    mm_check_problem pv = problem("fp32", "fp32", "none", 2, 2, 8);
    cr_assert_eq(mm_acc_from_name(&pv.o.acc, "bf16", NULL, 0), MM_OK);
    cr_assert_eq(mm_check_random(&qa, &qb, &pv, MM_DIST_NORMAL, 0, msg, sizeof msg), MM_EINVAL);
    cr_assert(msg[0]);
    cr_assert_null(qa.q);
    cr_assert_null(qb.q);
}
