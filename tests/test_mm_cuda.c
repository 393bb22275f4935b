// test_mm_cuda.c: the CUDA backend of scaled_mm.h (mm_cuda) against the MPFR reference
// (mm_ref_exact) and the CPU backend (mm_cpu).
// Without a GPU (or without nvcc) every test skips with mm_cuda_available's reason, so the
// suite passes under `make test`; FPLAB_REQUIRE_GPU=1 (set by `make test-gpu`) turns the skip
// into a failure.
// What is checked, per path (FPLAB_CUDA_KERNEL forces one; each result is held to
// gamma_{K+2}(u) * absdot plus the output rounding, u from mm_cuda_choose for the path taken):
// - simt (own fp32 FMA kernel, u = 2^-24) and tc (own tensor-core kernel, u = 2^-23: tensor
//   cores truncate each fp32 addition): every table format of 16 bits or fewer (e8m0 excepted:
//   a scale format with no zero and no sign), with tensor, MX-like (block 32, power-of-two
//   scales), NVFP4-like (block 16, e4m3 scales and a tensor scale) and per-row/column scales,
//   M, N <= 140 (across the 64 and 128 tiles), K <= 300 (ragged against the block), every
//   trans variant, padded leading dimensions (left untouched), alpha, beta, fp32/bf16/fp16
//   outputs; mixed pairs (simt); shapes at the tile edges; inf/NaN propagation; beta = 0 not
//   reading C; K = 0.
// - cuBLASLt: bf16 x bf16, fp16 x fp16 and the e4m3/e5m2 pairs with tensor scales: u = 2^-23
//   for bf16/fp16, 2^-13 for fp8 (Hopper's fp8 tensor cores keep about 14 bits between
//   cuBLASLt's promotions to fp32; DeepSeek-V3 report, sec. 3.3.2).
// - 256^3 against mm_cpu: |cuda - cpu| <= (gamma_cuda + gamma_cpu) * absdot.
// - Emulated accumulators answer MM_EUNSUPPORTED; a bad FPLAB_CUDA_KERNEL answers MM_EINVAL;
//   forcing cuBLASLt or tc where it does not apply answers MM_EUNSUPPORTED.
// The kernels' logic also runs without a GPU in test_mm_cuda_shim.
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
#include "kernels/scaled_mm_internal.h"
#include "test_mm_util.h"
#include "test_util.h"

// --- GPU or skip

static void need_gpu(void) {
    char msg[256];
    if (mm_cuda_available(msg, sizeof msg)) return;
    const char *req = getenv("FPLAB_REQUIRE_GPU");
    if (req && *req && strcmp(req, "0")) cr_assert_fail("FPLAB_REQUIRE_GPU is set, but: %s", msg);
    cr_skip_test("%s", msg);
}

// Criterion's synthesis leaves skipped tests out ("Tested: 1 | Passing: 1" without a GPU), so
// the skip is said in a line make test's summary repeats ("[SKIP] WHAT: why", Makefile run-tests).
ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
    char msg[256];
    if (stats->tests_skipped && !mm_cuda_available(msg, sizeof msg))
        printf("[SKIP] CUDA: skipped, no GPU: %zu of %zu tests of test_mm_cuda (%s); make test-gpu on a machine "
               "with one\n", stats->tests_skipped, stats->nb_tests, msg);
    fflush(stdout);
}

static void use_kernel(const char *k) {
    if (k) setenv("FPLAB_CUDA_KERNEL", k, 1);
    else unsetenv("FPLAB_CUDA_KERNEL");
}

static uint64_t test_seed(const char *test) { return tu_seed("test_mm_cuda", test, 0x6d6d63756461ULL); }

// --- random inputs

// Scaling recipes of the tests: scales, block_k and tensor scales of both operands.

// --- the bound (tu_check_bound)

// Unit roundoff of the accumulation of the path mm_cuda takes (the FPLAB_CUDA_KERNEL set now).
static double path_u(const mm_operand *A, const mm_operand *B, size_t K) {
    mm_cuda_plan plan;
    char msg[256];
    cr_assert_eq(mm_cuda_choose(&plan, A, B, K, msg, sizeof msg), MM_OK, "mm_cuda_choose: %s", msg);
    return plan.u;
}

// One random product of op shape M x N x K through mm_cuda with the given kernel (NULL: auto),
// checked against mm_ref_exact within the bound of the path mm_cuda takes.
static void cuda_case(tu_rng *r, const char *what, const char *kernel, const fmt_t *fa,
                      const fmt_t *fb, size_t M, size_t N, size_t K, const tu_recipe *rc,
                      const fmt_t *out, fmt_round_mode mode) {
    char label[96];
    snprintf(label, sizeof label, "%s [%s]", what, kernel ? kernel : "auto");
    tu_mm_case c;
    tu_mm_case_make(&c, r, label, fa, fb, M, N, K, rc, out, mode);
    use_kernel(kernel);
    const int st = mm_cuda(c.C, c.ldc, &c.A.op, &c.B.op, M, N, K, &c.o);
    cr_assert_eq(st, MM_OK, "%s: mm_cuda status %d", c.what, st);
    tu_check_bound(c.what, c.C, c.Cin, c.ldc, c.exact, c.absdot, M, N, K, &c.o, path_u(&c.A.op, &c.B.op, K));
    tu_mm_case_free(&c);
}

// --- own kernel

static void every_format(const char *test, const char *kernel, const tu_recipe *rc, int ncases) {
    need_gpu();
    tu_rng r = {fmt_rng_make_key(test_seed(test), 31), 0};
    const fmt_t outs[] = {tu_fmt("fp32"), tu_fmt("bf16"), tu_fmt("fp16")};
    const fmt_round_mode modes[] = {FMT_RNE, FMT_RTZ, FMT_RUP};
    for (size_t t = 0; t < fmt_table_count(); t++) {
        const fmt_t *f = fmt_table_get(t);
        if (!tu_elem_format(f)) continue;
        for (int c = 0; c < ncases; c++) {
            // K: small, just around a block, or up to 300 (ragged against the block).
            const size_t K = (size_t)(c % 3 == 0 ? tu_rng_int(&r, 1, 40) : tu_rng_int(&r, 1, 300));
            cuda_case(&r, test, kernel, f, f, (size_t)tu_rng_int(&r, 1, 140), (size_t)tu_rng_int(&r, 1, 140),
                      K, rc, &outs[c % 3], modes[(c / 3) % 3]);
        }
    }
}

// cuBLASLt is opened on first use, not linked: every function the backend calls must resolve in
// the library of the headers' version. No GPU needed; skips where the build has no nvcc or the
// library is not installed, fails where a listed function is missing.
Test(mm_cuda, cublaslt_opens_and_resolves) {
    char msg[600];
    const bool ok = mm__cuda_blaslt_loads(msg, sizeof msg);
#ifndef FPLAB_HAVE_CUDA
    cr_assert(!ok);
    cr_skip_test("%s", msg);
#else
    if (!ok && strstr(msg, "cannot open")) cr_skip_test("%s", msg);
    cr_assert(ok, "%s", msg);
    cr_log_info("%s", msg);
#endif
}

Test(mm_cuda, simt_tensor_scales) { every_format("simt_tensor_scales", "simt", &TU_R_TENSOR, 8); }
Test(mm_cuda, simt_mx_scales) { every_format("simt_mx_scales", "simt", &TU_R_MX, 8); }
Test(mm_cuda, simt_nvfp4_scales) { every_format("simt_nvfp4_scales", "simt", &TU_R_NVFP4, 8); }
Test(mm_cuda, simt_row_scales) { every_format("simt_row_scales", "simt", &TU_R_ROW, 6); }
Test(mm_cuda, tc_tensor_scales) { every_format("tc_tensor_scales", "tc", &TU_R_TENSOR, 8); }
Test(mm_cuda, tc_mx_scales) { every_format("tc_mx_scales", "tc", &TU_R_MX, 8); }
Test(mm_cuda, tc_nvfp4_scales) { every_format("tc_nvfp4_scales", "tc", &TU_R_NVFP4, 8); }
Test(mm_cuda, tc_row_scales) { every_format("tc_row_scales", "tc", &TU_R_ROW, 6); }

// A and B in different formats (different decode paths in one kernel instance).
Test(mm_cuda, simt_mixed_formats) {
    need_gpu();
    tu_rng r = {fmt_rng_make_key(test_seed("simt_mixed_formats"), 32), 0};
    const char *const names[] = {"e2m1", "e3m2", "e2m3", "e4m3", "e5m2", "e4m3fnuz", "bf16", "fp16", "fp32"};
    const tu_recipe *rcs[] = {&TU_R_TENSOR, &TU_R_MX, &TU_R_NVFP4, &TU_R_ROW};
    const fmt_t out = tu_fmt("fp32");
    const int n = (int)(sizeof names / sizeof *names);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            const fmt_t fa = tu_fmt(names[a]), fb = tu_fmt(names[b]);
            cuda_case(&r, "simt_mixed_formats", "simt", &fa, &fb, (size_t)tu_rng_int(&r, 1, 64),
                      (size_t)tu_rng_int(&r, 1, 64), (size_t)tu_rng_int(&r, 1, 300), rcs[(a + b) % 4],
                      &out, FMT_RNE);
        }
}

// Shapes at and around the tile edges (simt: 64 x 64, 16 along K; tc: 128 x 128, 32 along K).
static void tile_edges(const char *test, const char *kernel) {
    need_gpu();
    tu_rng r = {fmt_rng_make_key(test_seed(test), 33), 0};
    const fmt_t f = tu_fmt("e4m3"), out = tu_fmt("fp32");
    const size_t sizes[] = {1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 130, 257};
    for (int c = 0; c < 30; c++) {
        const size_t M = sizes[tu_rng_int(&r, 0, 14)], N = sizes[tu_rng_int(&r, 0, 14)],
                     K = sizes[tu_rng_int(&r, 0, 14)];
        cuda_case(&r, test, kernel, &f, &f, M, N, K, c % 2 ? &TU_R_MX : &TU_R_TENSOR, &out, FMT_RNE);
    }
}

Test(mm_cuda, simt_tile_edges) { tile_edges("simt_tile_edges", "simt"); }
Test(mm_cuda, tc_tile_edges) { tile_edges("tc_tile_edges", "tc"); }

// Inf and NaN in the operands: NaN where the exact result is NaN, inf of the right sign.
Test(mm_cuda, own_inf_nan) {
    need_gpu();
    tu_rng r = {fmt_rng_make_key(test_seed("own_inf_nan"), 34), 0};
    const fmt_t fs[] = {tu_fmt("fp16"), tu_fmt("bf16"), tu_fmt("e5m2")};
    for (int c = 0; c < 60; c++) {
        use_kernel(c % 2 ? "tc" : "simt");
        const fmt_t *f = &fs[c % 3];
        const size_t M = 4, N = 5, K = (size_t)tu_rng_int(&r, 2, 40);
        tu_operand A, B;
        tu_recipe_operand(&A, &r, true, f, M, K, K, false, &TU_R_TENSOR);
        tu_recipe_operand(&B, &r, false, f, K, N, K, c & 1, &TU_R_TENSOR);
        const float specials[] = {INFINITY, -INFINITY, NAN};
        A.x[tu_rng_int(&r, 0, (int)M - 1) * A.op.ld + tu_rng_int(&r, 0, (int)K - 1)] =
            specials[tu_rng_int(&r, 0, 2)];
        A.x[tu_rng_int(&r, 0, (int)M - 1) * A.op.ld + tu_rng_int(&r, 0, (int)K - 1)] =
            specials[tu_rng_int(&r, 0, 1)];
        mm_opts o;
        mm_opts_default(&o);
        float C[20], Cin[20] = {0};
        double exact[20], absdot[20];
        cr_assert_eq(mm_ref_exact(exact, absdot, NULL, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        cr_assert_eq(mm_cuda(C, N, &A.op, &B.op, M, N, K, &o), MM_OK);
        tu_check_bound("own_inf_nan", C, Cin, N, exact, absdot, M, N, K, &o, path_u(&A.op, &B.op, K));
        tu_operand_free(&A), tu_operand_free(&B);
    }
}

// beta = 0 does not read C (NaN there stays out); K = 0 gives round_out(beta * C).
Test(mm_cuda, zeros_and_empty_k) {
    need_gpu();
    const fmt_t f = tu_fmt("e4m3");
    float A[6] = {0}, B[6] = {0}, C[4] = {NAN, NAN, NAN, NAN};
    mm_operand a = {.x = A, .ld = 3, .fmt = f}, b = {.x = B, .ld = 2, .fmt = f};
    mm_opts o;
    mm_opts_default(&o);
    const char *const kernels[] = {"simt", "tc", NULL};
    for (int k = 0; k < 3; k++) {
        use_kernel(kernels[k]);
        for (int i = 0; i < 4; i++) C[i] = NAN;
        cr_assert_eq(mm_cuda(C, 2, &a, &b, 2, 2, 3, &o), MM_OK);
        for (int i = 0; i < 4; i++) cr_assert(C[i] == 0.0f, "C[%d] = %a, expected 0 (beta 0 ignores C)", i, C[i]);
    }
    o.beta = 0.5f;
    for (int i = 0; i < 4; i++) C[i] = (float)(i + 1);
    const int st = mm_cuda(C, 2, &a, &b, 2, 2, 0, &o);
    if (st == MM_OK)
        for (int i = 0; i < 4; i++) cr_assert(C[i] == 0.5f * (float)(i + 1), "C[%d] = %g", i, C[i]);
    else
        cr_assert_eq(st, MM_EINVAL);
}

// --- cuBLASLt

static void cublaslt_pair(const char *test, const char *na, const char *nb, int ncases) {
    need_gpu();
    tu_rng r = {fmt_rng_make_key(test_seed(test), 41), 0};
    const fmt_t fa = tu_fmt(na), fb = tu_fmt(nb);
    const fmt_t outs[] = {tu_fmt("fp32"), tu_fmt("bf16")};
    const tu_recipe none = {"none", SC_NONE, 0, false};
    for (int c = 0; c < ncases; c++) {
        const size_t K = (size_t)(c % 3 == 0 ? tu_rng_int(&r, 1, 40) : tu_rng_int(&r, 1, 300));
        const size_t M = (size_t)tu_rng_int(&r, 1, 64), N = (size_t)tu_rng_int(&r, 1, 64);
        // The same case through both paths.
        const uint64_t at = r.n;
        cuda_case(&r, test, "cublaslt", &fa, &fb, M, N, K, c % 2 ? &TU_R_TENSOR : &none, &outs[c % 2], FMT_RNE);
        r.n = at;
        cuda_case(&r, test, "simt", &fa, &fb, M, N, K, c % 2 ? &TU_R_TENSOR : &none, &outs[c % 2], FMT_RNE);
    }
}

Test(mm_cuda, cublaslt_bf16) { cublaslt_pair("cublaslt_bf16", "bf16", "bf16", 30); }
Test(mm_cuda, cublaslt_fp16) { cublaslt_pair("cublaslt_fp16", "fp16", "fp16", 30); }
// fp8 through cuBLASLt needs sm_89 or newer (H100: sm_90).
Test(mm_cuda, cublaslt_e4m3) { cublaslt_pair("cublaslt_e4m3", "e4m3", "e4m3", 30); }
Test(mm_cuda, cublaslt_e4m3_e5m2) { cublaslt_pair("cublaslt_e4m3_e5m2", "e4m3", "e5m2", 20); }
Test(mm_cuda, cublaslt_e5m2_e4m3) { cublaslt_pair("cublaslt_e5m2_e4m3", "e5m2", "e4m3", 20); }

// The automatic choice: cuBLASLt-able products and the rest, each within its path's bound.
Test(mm_cuda, auto_choice) {
    need_gpu();
    tu_rng r = {fmt_rng_make_key(test_seed("auto_choice"), 42), 0};
    const fmt_t out = tu_fmt("fp32");
    const char *const names[] = {"bf16", "fp16", "e4m3", "e2m1", "e3m2", "fp32"};
    for (int c = 0; c < 24; c++) {
        const fmt_t f = tu_fmt(names[c % 6]);
        cuda_case(&r, "auto_choice", NULL, &f, &f, (size_t)tu_rng_int(&r, 1, 64), (size_t)tu_rng_int(&r, 1, 64),
                  (size_t)tu_rng_int(&r, 1, 300), (c / 6) % 2 ? &TU_R_MX : &TU_R_TENSOR, &out, FMT_RNE);
    }
}

// --- 256^3 against mm_cpu

static void large_vs_cpu(const char *test, const char *kernel, const char *name, const tu_recipe *rc) {
    need_gpu();
    tu_rng r = {fmt_rng_make_key(test_seed(test), 51), 0};
    const size_t M = 256, N = 256, K = 256;
    const fmt_t f = tu_fmt(name);
    tu_operand A, B;
    tu_recipe_operand(&A, &r, true, &f, M, K, K, false, rc);
    tu_recipe_operand(&B, &r, false, &f, K, N, K, true, rc);
    mm_opts o;
    mm_opts_default(&o);
    o.alpha = 0.75f, o.beta = 0.5f;
    float *C0 = malloc(M * N * sizeof *C0), *C1 = malloc(M * N * sizeof *C1);
    double *absdot = malloc(M * N * sizeof *absdot);
    cr_assert(C0 && C1 && absdot);
    for (size_t i = 0; i < M * N; i++) C0[i] = C1[i] = (float)tu_rng_normal(&r);
    // absdot in double (relative error below K 2^-53, covered by the factor 1 + 2^-30).
    const double ab = fabs((double)o.alpha * (A.op.tensor_scale ? A.op.tensor_scale : 1.0f) *
                           (B.op.tensor_scale ? B.op.tensor_scale : 1.0f));
    const size_t bk = rc->block_k > 0 ? (size_t)rc->block_k : K, nb = (K + bk - 1) / bk;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double s = 0;
            for (size_t k = 0; k < K; k++) {
                const double sa = A.scales ? A.scales[i * nb + k / bk] : 1.0;
                const double sb = B.scales ? B.scales[(k / bk) * N + j] : 1.0;
                s += fabs((double)A.x[i * A.op.ld + k] * B.x[j * B.op.ld + k] * sa * sb);
            }
            absdot[i * N + j] = (ab * s + fabs((double)o.beta * C0[i * N + j])) * (1 + 0x1p-30);
        }
    cr_assert_eq(mm_cpu(C0, N, &A.op, &B.op, M, N, K, &o), MM_OK);
    use_kernel(kernel);
    cr_assert_eq(mm_cuda(C1, N, &A.op, &B.op, M, N, K, &o), MM_OK);
    const double g = tu_gamma((double)K + 2, path_u(&A.op, &B.op, K)) + tu_gamma((double)K + 2, 0x1p-24);
    for (size_t t = 0; t < M * N; t++)
        cr_assert(fabs((double)C0[t] - C1[t]) <= g * absdot[t], "%s [%s] %s C[%zu,%zu]: cpu %a cuda %a "
                  "|diff| %g > %g", test, kernel, name, t / N, t % N, C0[t], C1[t],
                  fabs((double)C0[t] - C1[t]), g * absdot[t]);
    free(C0), free(C1), free(absdot);
    tu_operand_free(&A), tu_operand_free(&B);
}

Test(mm_cuda, large_simt_mx_e4m3) { large_vs_cpu("large_simt_mx_e4m3", "simt", "e4m3", &TU_R_MX); }
Test(mm_cuda, large_simt_nvfp4) { large_vs_cpu("large_simt_nvfp4", "simt", "e2m1", &TU_R_NVFP4); }
Test(mm_cuda, large_tc_mx_e4m3) { large_vs_cpu("large_tc_mx_e4m3", "tc", "e4m3", &TU_R_MX); }
Test(mm_cuda, large_tc_nvfp4) { large_vs_cpu("large_tc_nvfp4", "tc", "e2m1", &TU_R_NVFP4); }
Test(mm_cuda, large_tc_bf16) { large_vs_cpu("large_tc_bf16", "tc", "bf16", &TU_R_TENSOR); }
Test(mm_cuda, large_cublaslt_bf16) { large_vs_cpu("large_cublaslt_bf16", "cublaslt", "bf16", &TU_R_TENSOR); }
Test(mm_cuda, large_cublaslt_e4m3) { large_vs_cpu("large_cublaslt_e4m3", "cublaslt", "e4m3", &TU_R_TENSOR); }

// --- what mm_cuda refuses

Test(mm_cuda, refusals) {
    need_gpu();
    const fmt_t f = tu_fmt("e2m1"), bf = tu_fmt("bf16");
    float A[6] = {1, 2, 3, 0.5f, 1, 1}, B[6] = {1, 1, 1, 1, 1, 1}, C[4], scales[2] = {1, 2};
    mm_operand a = {.x = A, .ld = 3, .fmt = f}, b = {.x = B, .ld = 2, .fmt = f};
    mm_opts o;
    mm_opts_default(&o);
    char msg[256];
    cr_assert_eq(mm_acc_from_name(&o.acc, "bf16", msg, sizeof msg), MM_OK);
    use_kernel(NULL);
    cr_assert_eq(mm_cuda(C, 2, &a, &b, 2, 2, 3, &o), MM_EUNSUPPORTED, "emulated accumulator");
    mm_opts_default(&o);
    use_kernel("tensorcores");
    cr_assert_eq(mm_cuda(C, 2, &a, &b, 2, 2, 3, &o), MM_EINVAL, "bad FPLAB_CUDA_KERNEL");
    use_kernel("cublaslt");
    cr_assert_eq(mm_cuda(C, 2, &a, &b, 2, 2, 3, &o), MM_EUNSUPPORTED, "cuBLASLt for e2m1");
    use_kernel("tc");
    b.fmt = bf, a.fmt = tu_fmt("fp16");
    cr_assert_eq(mm_cuda(C, 2, &a, &b, 2, 2, 3, &o), MM_EUNSUPPORTED, "tc for fp16 x bf16");
    use_kernel("cublaslt");
    a.fmt = b.fmt = bf;
    a.scales = scales, a.block_k = 0;
    cr_assert_eq(mm_cuda(C, 2, &a, &b, 2, 2, 3, &o), MM_EUNSUPPORTED, "cuBLASLt with per-row scales");
    a.scales = NULL;
    cr_assert_eq(mm_cuda(C, 2, &a, &b, 2, 2, 3, &o), MM_OK, "cuBLASLt for bf16");
    cr_assert(C[0] == 6.0f && C[1] == 6.0f && C[2] == 2.5f && C[3] == 2.5f, "C = %g %g %g %g", C[0],
              C[1], C[2], C[3]);
}
