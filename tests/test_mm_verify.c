// test_mm_verify.c: the verifier of kernels/mm_verify.h: a correct result passes under the
// bound; a result of a kernel with a wrong scale (rows of A's scales reversed) fails with the
// violations counted and no candidate reproducing it; a result of mm_cpu with a matrix-engine
// accumulator is reproduced 100% by that engine and not by the exact-rounded candidate; an
// all-overflow result fails (zero judged outputs is never a pass); an expected accumulator
// decides the verdict by bits.
#include <criterion/criterion.h>

#include "kernels/mm_operand.h"
#include "kernels/mm_verify.h"
#include "test_util.h"

typedef struct {
    mm_qmat qa, qb;
    size_t M, N, K;
    mm_opts o;
    float *C;
} vcase;

// Random normal A (M x K) and B (K x N) quantized to fmt with recipe; C from mm_cpu with acc.
static void vcase_make(vcase *v, const char *fmt, const char *recipe, size_t M, size_t N, size_t K,
                       const char *acc, const char *out, uint64_t seed) {
    v->M = M, v->N = N, v->K = K;
    const fmt_t f = tu_fmt(fmt);
    const fmt_scaling sc = tu_scaling(recipe);
    float *xa = malloc(M * K * sizeof *xa), *xb = malloc(K * N * sizeof *xb);
    cr_assert(xa && xb);
    mm_random_f32(xa, M * K, MM_DIST_NORMAL, seed, 1);
    mm_random_f32(xb, K * N, MM_DIST_NORMAL, seed, 2);
    const fmt_round_opts qo = {.mode = FMT_RNE, .overflow = FMT_SATURATE};
    cr_assert_eq(mm_qmat_from_f32(&v->qa, MM_SIDE_A, xa, M, K, &f, &sc, &qo), MM_OK);
    cr_assert_eq(mm_qmat_from_f32(&v->qb, MM_SIDE_B, xb, K, N, &f, &sc, &qo), MM_OK);
    free(xa), free(xb);
    mm_opts_default(&v->o);
    char msg[256];
    cr_assert_eq(mm_acc_from_name(&v->o.acc, acc, msg, sizeof msg), MM_OK, "%s: %s", acc, msg);
    v->o.out_fmt = tu_fmt(out);
    v->C = malloc(M * N * sizeof *v->C);
    cr_assert(v->C);
    cr_assert_eq(mm_cpu(v->C, N, &v->qa.op, &v->qb.op, M, N, K, &v->o), MM_OK);
}

static void vcase_free(vcase *v) { mm_qmat_free(&v->qa), mm_qmat_free(&v->qb), free(v->C); }

static const mm_verify_cand *find_cand(const mm_verify_report *r, const char *spec) {
    for (size_t i = 0; i < r->ncand; i++)
        if (!strcmp(r->cand[i].spec, spec)) return &r->cand[i];
    return NULL;
}

static void verify(mm_verify_report *r, const vcase *v, const mm_verify_opts *vo) {
    char msg[256];
    cr_assert_eq(mm_verify(r, NULL, v->C, NULL, v->N, &v->qa.op, &v->qb.op, v->M, v->N, v->K, &v->o, vo, msg,
                           sizeof msg), MM_OK, "mm_verify: %s", msg);
}

Test(mm_verify, correct_result_passes_under_the_bound) {
    vcase v;
    vcase_make(&v, "e4m3", "mx", 16, 12, 256, "fp32", "fp32", 1);
    mm_verify_report r;
    double *ulp = malloc(16 * 12 * sizeof *ulp), *bnd = malloc(16 * 12 * sizeof *bnd);
    unsigned char *inb = malloc(16 * 12);
    const mm_verify_outputs out = {.err_ulp = ulp, .bound_ulp = bnd, .in_bound = inb};
    char msg[256];
    cr_assert_eq(mm_verify(&r, &out, v.C, NULL, v.N, &v.qa.op, &v.qb.op, v.M, v.N, v.K, &v.o, NULL, msg,
                           sizeof msg), MM_OK, "%s", msg);
    cr_assert(r.pass);
    cr_assert_eq(r.rule, MM_RULE_BOUND);
    cr_assert_eq(r.judged, 16 * 12);
    cr_assert_eq(r.excluded, 0);
    cr_assert_eq(r.outside, 0);
    for (size_t t = 0; t < 16 * 12; t++) cr_assert(inb[t] && ulp[t] <= bnd[t], "output %zu", t);
    cr_assert(r.max_bound_ulp >= r.max_ulp);
    cr_assert_not_null(find_cand(&r, "exact-rounded"));
    cr_assert_not_null(find_cand(&r, "hopper:wgmma"), "e4m3 operands: Hopper's wgmma takes them");
    free(ulp), free(bnd), free(inb);
    vcase_free(&v);
}

// A kernel that reads A's scales with the rows reversed (a transposed or flipped scale).
Test(mm_verify, flipped_scale_fails_with_violations_counted) {
    vcase v;
    vcase_make(&v, "e4m3", "mx", 16, 8, 256, "fp32", "fp32", 2);
    const size_t nb = v.qa.nblocks;
    cr_assert_eq(nb, 8);
    float *bad = malloc(v.M * nb * sizeof *bad);
    for (size_t i = 0; i < v.M; i++) memcpy(&bad[i * nb], &v.qa.scales[(v.M - 1 - i) * nb], nb * sizeof *bad);
    mm_operand A = v.qa.op;
    A.scales = bad;
    cr_assert_eq(mm_cpu(v.C, v.N, &A, &v.qb.op, v.M, v.N, v.K, &v.o), MM_OK);
    mm_verify_report r;
    verify(&r, &v, NULL);
    cr_assert_not(r.pass);
    cr_assert_eq(r.rule, MM_RULE_NONE);
    cr_assert_gt(r.outside, v.M * v.N / 2, "outside %zu of %zu", r.outside, v.M * v.N);
    cr_assert_gt(r.max_ulp, r.max_bound_ulp);
    for (size_t c = 0; c < r.ncand; c++) cr_assert_lt(r.cand[c].reproduced, v.M * v.N, "%s", r.cand[c].spec);
    free(bad);
    vcase_free(&v);
}

Test(mm_verify, identifies_the_engine_that_produced_c) {
    vcase v;
    vcase_make(&v, "e4m3", "none", 8, 8, 512, "hopper:wgmma", "fp32", 3);
    mm_verify_report r;
    verify(&r, &v, NULL);
    const mm_verify_cand *h = find_cand(&r, "hopper:wgmma"), *x = find_cand(&r, "exact-rounded");
    cr_assert_not_null(h);
    cr_assert_not_null(x);
    cr_assert_eq(h->reproduced, 64);
    cr_assert_lt(x->reproduced, 64, "exact-rounded reproduces %zu of 64", x->reproduced);
    cr_assert(r.pass);
    cr_assert_null(find_cand(&r, "volta:mma"), "Volta has no fp8 kind");
    // Told what it must equal, the verdict is by bits.
    const mm_verify_opts vo = {.expect = "hopper:wgmma"};
    verify(&r, &v, &vo);
    cr_assert(r.pass);
    cr_assert_eq(r.rule, MM_RULE_BITEXACT);
    cr_assert_str_eq(r.cand[r.rule_cand].spec, "hopper:wgmma");
    const mm_verify_opts vx = {.expect = "fp32"};
    verify(&r, &v, &vx);
    cr_assert_not(r.pass, "not the exact-rounded product");
    vcase_free(&v);
}

Test(mm_verify, extra_specs_are_candidates) {
    vcase v;
    vcase_make(&v, "e4m3", "tensor", 4, 4, 256, "m13:rtz:promote=128", "fp32", 4);
    const char *extra[] = {"m13:rtz:promote=128", "m14:rtz"};
    const mm_verify_opts vo = {.extra = extra, .n_extra = 2};
    mm_verify_report r;
    verify(&r, &v, &vo);
    const mm_verify_cand *c = find_cand(&r, "m13:rtz:promote=128");
    cr_assert_not_null(c);
    cr_assert(c->extra);
    cr_assert_eq(c->reproduced, 16);
    const char *bad[] = {"m99:nonsense"};
    const mm_verify_opts vb = {.extra = bad, .n_extra = 1};
    char msg[256];
    cr_assert_eq(mm_verify(&r, NULL, v.C, NULL, v.N, &v.qa.op, &v.qb.op, v.M, v.N, v.K, &v.o, &vb, msg,
                           sizeof msg), MM_EINVAL);
    cr_assert(strstr(msg, "m99:nonsense"), "%s", msg);
    vcase_free(&v);
}

// Every exact value beyond fp16's range: nothing is judged, and that is a failure.
Test(mm_verify, all_overflow_fails) {
    const size_t M = 2, N = 2, K = 64;
    float a[2 * 64], b[64 * 2];
    for (size_t i = 0; i < M * K; i++) a[i] = 448.0f;
    for (size_t i = 0; i < K * N; i++) b[i] = 448.0f;
    mm_operand A = {.x = a, .ld = K, .fmt = tu_fmt("e4m3")}, B = {.x = b, .ld = N, .fmt = tu_fmt("e4m3")};
    mm_opts o;
    mm_opts_default(&o);
    o.out_fmt = tu_fmt("fp16");
    float C[4];
    cr_assert_eq(mm_cpu(C, N, &A, &B, M, N, K, &o), MM_OK);
    mm_verify_report r;
    char msg[256];
    cr_assert_eq(mm_verify(&r, NULL, C, NULL, N, &A, &B, M, N, K, &o, NULL, msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert_eq(r.excluded, 4);
    cr_assert_eq(r.judged, 0);
    cr_assert_not(r.pass);
    cr_assert_eq(r.rule, MM_RULE_NONE);
    cr_assert(isnan(r.max_ulp));
}

Test(mm_verify, beta_needs_c_in) {
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, C[4] = {0};
    mm_operand A = {.x = a, .ld = 2, .fmt = tu_fmt("fp32")}, B = {.x = b, .ld = 2, .fmt = tu_fmt("fp32")};
    mm_opts o;
    mm_opts_default(&o);
    o.beta = 1.0f;
    mm_verify_report r;
    cr_assert_eq(mm_verify(&r, NULL, C, NULL, 2, &A, &B, 2, 2, 2, &o, NULL, NULL, 0), MM_EINVAL);
    const float Cin[4] = {1, 1, 1, 1}, good[4] = {2, 3, 4, 5};
    cr_assert_eq(mm_verify(&r, NULL, good, Cin, 2, &A, &B, 2, 2, 2, &o, NULL, NULL, 0), MM_OK);
    cr_assert(r.pass);
    cr_assert_eq(r.cand[0].reproduced, 4);
}

// --- issue 34, 1.6: nonsense is refused; an engine's own bound holds its arithmetic and fails
// the wrong kernels

// u is a unit roundoff below 1/(2(K+2)) (there gamma_{K+2}(u) < 1); 0 is the default; tensor
// scales are finite and >= 0 (0 reads as 1).
Test(mm_verify, refuses_a_bound_that_bounds_nothing_and_bad_tensor_scales) {
    vcase v;
    vcase_make(&v, "e4m3", "tensor", 4, 4, 62, "fp32", "fp32", 5);
    mm_verify_report r;
    char msg[256];
    const double bad_u[] = {1.0 / 64, 0.5 / 64, 2, INFINITY, NAN, -1};
    for (size_t t = 0; t < sizeof bad_u / sizeof *bad_u; t++) {
        const mm_verify_opts vo = {.u = bad_u[t]};
        cr_assert_eq(mm_verify(&r, NULL, v.C, NULL, v.N, &v.qa.op, &v.qb.op, v.M, v.N, v.K, &v.o, &vo, msg,
                               sizeof msg), MM_EINVAL, "u = %g accepted", bad_u[t]);
        cr_assert(strstr(msg, "unit roundoff u"), "%s", msg);
    }
    const mm_verify_opts ok = {.u = 0.49 / 64};
    cr_assert_eq(mm_verify(&r, NULL, v.C, NULL, v.N, &v.qa.op, &v.qb.op, v.M, v.N, v.K, &v.o, &ok, msg, sizeof msg),
                 MM_OK, "%s", msg);
    // C = 12345 everywhere is outside every bound u may give.
    float big[16];
    for (int i = 0; i < 16; i++) big[i] = 12345.0f;
    cr_assert_eq(mm_verify(&r, NULL, big, NULL, v.N, &v.qa.op, &v.qb.op, v.M, v.N, v.K, &v.o, &ok, msg, sizeof msg),
                 MM_OK);
    cr_assert_not(r.pass);
    const float bad_ts[] = {-2.0f, NAN, INFINITY};
    for (size_t t = 0; t < 3; t++) {
        mm_operand A = v.qa.op;
        A.tensor_scale = bad_ts[t];
        cr_assert_eq(mm_verify(&r, NULL, v.C, NULL, v.N, &A, &v.qb.op, v.M, v.N, v.K, &v.o, NULL, msg, sizeof msg),
                     MM_EINVAL, "tensor scale %g accepted", (double)bad_ts[t]);
        cr_assert(strstr(msg, "tensor scale"), "%s", msg);
    }
    const mm_verify_opts ve = {.engine = "hopper:nonsense"};
    cr_assert_eq(mm_verify(&r, NULL, v.C, NULL, v.N, &v.qa.op, &v.qb.op, v.M, v.N, v.K, &v.o, &ve, msg, sizeof msg),
                 MM_EINVAL);
    cr_assert(strstr(msg, "hopper:nonsense"), "%s", msg);
    vcase_free(&v);
}

// The engine's own bound is sound: the result of each engine's model (mm_ref with it), on
// operands over many binades, with C in the chain or in the epilogue, promoted or not, lies
// within the bound the verifier derives for that engine, in every output.
Test(mm_verify, engine_bound_holds_for_each_engines_own_result) {
    const struct { const char *fmt, *recipe, *engine; size_t K; float alpha, beta; } cases[] = {
        {"e4m3", "none", "hopper:wgmma", 300, 1, 0},
        {"e4m3", "none", "hopper:wgmma", 256, 1, 1},  // C is the chain's first C
        {"e4m3", "tensor", "hopper:wgmma:promote=128", 1000, 1, 0},
        {"e4m3", "mx", "hopper:wgmma", 256, 0.75f, 0.5f},
        {"e5m2", "none", "ada:mma", 200, 1, 0},      // split-k halves, 13-bit D
        {"e4m3", "mx", "blackwell:tcgen05", 256, 1, 0},
        {"e4m3", "mx", "rtx-blackwell:mma", 96, 1, 1},
        {"e2m1", "nvfp4", "blackwell:tcgen05", 256, 1, 0},
        {"e2m1", "mx", "rtx-blackwell:mma", 192, 1, 0},
        {"bf16", "none", "ampere:mma", 200, 1, 0},
        {"fp16", "none", "ampere:mma:f16", 64, 1, 0},
        {"fp16", "none", "volta:mma:f16", 64, 1, 1},
        {"fp32", "none", "hopper:wgmma", 200, 1, 0},  // tf32: inputs truncated
        {"fp32", "none", "cdna1:mfma", 100, 1, 0},    // f32 FMA
        {"fp16", "none", "cdna1:mfma", 160, 1, 0},    // pairwise trees
        {"bf16", "none", "cdna2:mfma", 160, 1, 0},    // pairwise, flushed
        {"fp16", "none", "cdna3:mfma", 160, 1, 0},    // AMD fused groups
        {"e4m3fnuz", "none", "cdna3:mfma", 160, 1, 0}, // two-stage fp8
    };
    const uint64_t seed = tu_seed("test_mm_verify", "engine_bound_holds_for_each_engines_own_result", 0x656e67ULL);
    const mm_dist dists[] = {MM_DIST_LOGNORMAL, MM_DIST_OUTLIERS, MM_DIST_UNIFORM};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (size_t d = 0; d < 3; d++) {
            const size_t M = 6, N = 5, K = cases[c].K;
            const fmt_t f = tu_fmt(cases[c].fmt);
            const fmt_scaling sc = tu_scaling(cases[c].recipe);
            float *xa = malloc(M * K * sizeof *xa), *xb = malloc(K * N * sizeof *xb);
            mm_random_f32(xa, M * K, dists[d], seed + c, 1);
            mm_random_f32(xb, K * N, dists[d], seed + c, 2);
            const fmt_round_opts qo = {.mode = FMT_RNE, .overflow = FMT_SATURATE};
            mm_qmat qa, qb;
            cr_assert_eq(mm_qmat_from_f32(&qa, MM_SIDE_A, xa, M, K, &f, &sc, &qo), MM_OK);
            cr_assert_eq(mm_qmat_from_f32(&qb, MM_SIDE_B, xb, K, N, &f, &sc, &qo), MM_OK);
            mm_opts o;
            mm_opts_default(&o);
            o.alpha = cases[c].alpha, o.beta = cases[c].beta;
            char msg[256];
            cr_assert_eq(mm_acc_from_name(&o.acc, cases[c].engine, msg, sizeof msg), MM_OK, "%s", msg);
            float Cin[30], C[30];
            mm_random_f32(Cin, M * N, MM_DIST_NORMAL, seed + c, 3);
            memcpy(C, Cin, sizeof C);
            cr_assert_eq(mm_ref(C, N, &qa.op, &qb.op, M, N, K, &o), MM_OK);
            mm_opts ov = o;
            mm_acc_from_name(&ov.acc, "fp32", NULL, 0);
            const mm_verify_opts vo = {.engine = cases[c].engine, .no_candidates = true};
            mm_verify_report r;
            double bnd[30], ulp[30];
            const mm_verify_outputs out = {.bound_ulp = bnd, .err_ulp = ulp};
            cr_assert_eq(mm_verify(&r, &out, C, Cin, N, &qa.op, &qb.op, M, N, K, &ov, &vo, msg, sizeof msg), MM_OK,
                         "%s: %s", cases[c].engine, msg);
            for (size_t t = 0; t < M * N; t++)
                cr_assert(!(ulp[t] > bnd[t]), "%s %s %s K %zu dist %s seed %llu: output %zu: %g ulps, bound %g",
                          cases[c].engine, cases[c].fmt, cases[c].recipe, K, mm_dist_name(dists[d]),
                          (unsigned long long)seed, t, ulp[t], bnd[t]);
            // Judged: all but outputs whose f16 chain may overflow (their bound is not finite).
            cr_assert(r.pass && r.judged > 0 && r.rule == MM_RULE_BOUND, "%s %s: judged %zu outside %zu",
                      cases[c].engine, mm_dist_name(dists[d]), r.judged, r.outside);
            if (!strstr(cases[c].engine, ":f16")) cr_assert_eq(r.judged, M * N, "%s", cases[c].engine);
            cr_assert_str_eq(r.bound_spec, cases[c].engine);
            mm_qmat_free(&qa), mm_qmat_free(&qb), free(xa), free(xb);
        }
}

// docs/engines.md's buggy MX kernels (B's scales read transposed; the last K-block dropped), each
// result the exact product of its wrong operands rounded once: both fail the bound of the
// engines that would run them (blackwell:tcgen05's mxf8f6f4, hopper:wgmma's fp8 kind), while
// the correct kernel passes.
Test(mm_verify, engine_bound_fails_the_buggy_kernels) {
    const size_t M = 32, N = 16, K = 256, nb = K / 32;
    vcase v;
    vcase_make(&v, "e4m3", "mx", M, N, K, "fp32", "fp32", 0);
    float *sb_t = malloc(nb * N * sizeof *sb_t), *sa_d = malloc(M * nb * sizeof *sa_d);
    // The NumPy kernel's sb.T.copy().reshape(sb.shape): the (N, nb) transpose, flat, read back as
    // (nb, N); element (g, j) is flat element g N + j of the transpose.
    for (size_t g = 0; g < nb; g++)
        for (size_t j = 0; j < N; j++) {
            const size_t flat = g * N + j, jj = flat / nb, gg = flat % nb;
            sb_t[g * N + j] = v.qb.scales[gg * N + jj];
        }
    memcpy(sa_d, v.qa.scales, M * nb * sizeof *sa_d);
    for (size_t i = 0; i < M; i++) sa_d[i * nb + nb - 1] = 0.0f;
    const char *engines[] = {"blackwell:tcgen05", "hopper:wgmma"};
    for (int bug = 0; bug < 3; bug++) {
        mm_operand A = v.qa.op, B = v.qb.op;
        if (bug == 1) B.scales = sb_t;
        if (bug == 2) A.scales = sa_d;
        cr_assert_eq(mm_ref(v.C, N, &A, &B, M, N, K, &v.o), MM_OK);
        for (int e = 0; e < 2; e++) {
            const mm_verify_opts vo = {.engine = engines[e], .no_candidates = true};
            mm_verify_report r;
            verify(&r, &v, &vo);
            if (bug == 0)
                cr_assert(r.pass, "%s: the correct kernel fails (%zu outside)", engines[e], r.outside);
            else
                cr_assert(!r.pass && r.outside > M * N / 2, "%s bug %d: passes (%zu of %zu outside)", engines[e],
                          bug, r.outside, r.judged);
        }
    }
    free(sb_t), free(sa_d);
    vcase_free(&v);
}
