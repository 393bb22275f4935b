// test_mm_cuda_shim.c: the own kernels of the CUDA backend (SIMT and tensor cores), run on the
// CPU by tests/cuda_shim.cpp from the same source nvcc compiles, against the MPFR reference
// (mm_ref_exact). Runs everywhere, GPU or not.
// What is checked: every element format of 16 bits or fewer (e8m0 excepted) with tensor, MX
// (block 32, power-of-two scales), NVFP4 (block 16, e4m3 scales, tensor scales) and per-row
// scales; shapes across the tile edges (M, N up to 140: two block tiles of the tensor-core
// kernel, three of the SIMT one), K ragged against the 16/32-wide K steps and the blocks;
// trans variants, padded leading dimensions, alpha, beta, rounded outputs; mixed formats (fp16
// with fp8/fp4 runs the fp16 mma, bf16 with fp4 the bf16 one); and where the tensor-core kernel
// refuses (fp16 x bf16: no common exact type; K-blocks of 8).
// Bound: gamma_{K+2}(u) * absdot plus the output rounding, with mm_cuda_choose's u of the path
// (tensor cores 2^-23, SIMT 2^-24); the shim's mma is exact, so a failure is an indexing error.
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

int shim_mm_own(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                size_t K, const mm_opts *o, const char *kernel, const char **why);

static uint64_t test_seed(const char *test) { return tu_seed("test_mm_cuda_shim", test, 0x7368696dULL); }

typedef struct {
    const char *name;
    tu_scale_kind sk;
    int block_k;
    bool tensor;
} recipe;

static const recipe R_TENSOR = {"tensor", SC_NONE, 0, true};
static const recipe R_MX = {"mx", SC_POW2, 32, false};
static const recipe R_NVFP4 = {"nvfp4", SC_E4M3, 16, true};
static const recipe R_ROW = {"row", SC_POW2, 0, false};
static const recipe R_BLOCK8 = {"block8", SC_POW2, 8, false};

static void make_operand(tu_operand *o, tu_rng *r, bool is_a, const fmt_t *f, size_t rows, size_t cols,
                         size_t K, bool trans, const recipe *rc) {
    const size_t ld = tu_operand_storage(o, r, rows, cols, trans);
    const size_t srows = trans ? cols : rows, scols = trans ? rows : cols;
    const double vs = tu_vscale(f);
    const fmt_round_opts ro = {0};
    for (size_t i = 0; i < srows; i++)
        for (size_t j = 0; j < scols; j++) o->x[i * ld + j] = (float)fmt_round1(f, tu_rng_normal(r) * vs, &ro);
    const float ts = rc->tensor ? (float)(0.5 + tu_rng_unif(r)) : 0.0f;
    o->op = (mm_operand){.x = o->x, .ld = ld, .trans = trans, .fmt = *f, .block_k = rc->block_k,
                         .tensor_scale = ts};
    tu_operand_scales(o, r, is_a, rows, cols, K, rc->block_k, rc->sk);
}

// One random product through the shim's kernel, checked against mm_ref_exact.
static void shim_case(tu_rng *r, const char *what, const char *kernel, const fmt_t *fa, const fmt_t *fb,
                      size_t M, size_t N, size_t K, const recipe *rc) {
    tu_operand A, B;
    make_operand(&A, r, true, fa, M, K, K, tu_rng_int(r, 0, 1), rc);
    make_operand(&B, r, false, fb, K, N, K, tu_rng_int(r, 0, 1), rc);
    mm_opts o;
    mm_opts_default(&o);
    o.alpha = tu_rng_int(r, 0, 1) ? 1.0f : (float)tu_rng_normal(r);
    o.beta = tu_rng_int(r, 0, 1) ? 0.0f : (float)tu_rng_normal(r);
    static const char *const outs[] = {"fp32", "bf16", "fp16"};
    o.out_fmt = tu_fmt(outs[tu_rng_int(r, 0, 2)]);
    o.out_round.overflow = FMT_SATURATE;
    const size_t ldc = N + (size_t)tu_rng_int(r, 0, 2);
    float *C = malloc(M * ldc * sizeof *C), *Cin = malloc(M * ldc * sizeof *Cin);
    double *exact = malloc(M * N * sizeof *exact), *absdot = malloc(M * N * sizeof *absdot);
    cr_assert(C && Cin && exact && absdot);
    for (size_t i = 0; i < M * ldc; i++) C[i] = Cin[i] = (float)tu_rng_normal(r);
    char buf[320];
    snprintf(buf, sizeof buf, "%s [%s] (%s x %s, %s, M %zu N %zu K %zu, trans %d%d, alpha %g beta %g, out %s)",
             what, kernel, fa->name, fb->name, rc->name, M, N, K, A.op.trans, B.op.trans, o.alpha,
             o.beta, o.out_fmt.name);
    cr_assert_eq(mm_ref_exact(exact, absdot, Cin, ldc, &A.op, &B.op, M, N, K, &o), MM_OK, "%s: mm_ref_exact", buf);
    const char *why = "";
    const int st = shim_mm_own(C, ldc, &A.op, &B.op, M, N, K, &o, kernel, &why);
    cr_assert_eq(st, MM_OK, "%s: status %d (%s)", buf, st, why);
    tu_check_bound(buf, C, Cin, ldc, exact, absdot, M, N, K, &o, !strcmp(kernel, "tc") ? 0x1p-23 : 0x1p-24);
    for (size_t i = 0; i < M; i++)  // the padding of C is left alone
        for (size_t j = N; j < ldc; j++)
            cr_assert(tu_samef(C[i * ldc + j], Cin[i * ldc + j]), "%s: padding C[%zu,%zu] written", buf, i, j);
    free(C), free(Cin), free(exact), free(absdot);
    tu_operand_free(&A), tu_operand_free(&B);
}

// Every element format with one recipe; a third of the cases cross a block tile (M or N > 128
// for tc, > 64 for simt).
static void every_format(const char *test, const char *kernel, const recipe *rc, int ncases) {
    tu_rng r = {fmt_rng_make_key(test_seed(test), 61), 0};
    const int tile = !strcmp(kernel, "tc") ? 128 : 64;
    for (size_t t = 0; t < fmt_table_count(); t++) {
        const fmt_t *f = fmt_table_get(t);
        if (!tu_elem_format(f)) continue;
        for (int c = 0; c < ncases; c++) {
            const int big = c % 3 == 2 ? tile + 12 : 40;
            const size_t M = (size_t)tu_rng_int(&r, 1, big), N = (size_t)tu_rng_int(&r, 1, c % 3 == 1 ? tile + 12 : 40);
            const size_t K = (size_t)(c % 2 ? tu_rng_int(&r, 1, 40) : tu_rng_int(&r, 41, 150));
            shim_case(&r, test, kernel, f, f, M, N, K, rc);
        }
    }
}

Test(mm_cuda_shim, tc_tensor) { every_format("tc_tensor", "tc", &R_TENSOR, 3); }
Test(mm_cuda_shim, tc_mx) { every_format("tc_mx", "tc", &R_MX, 3); }
Test(mm_cuda_shim, tc_nvfp4) { every_format("tc_nvfp4", "tc", &R_NVFP4, 3); }
Test(mm_cuda_shim, tc_row) { every_format("tc_row", "tc", &R_ROW, 2); }
Test(mm_cuda_shim, simt_mx) { every_format("simt_mx", "simt", &R_MX, 2); }
Test(mm_cuda_shim, simt_nvfp4) { every_format("simt_nvfp4", "simt", &R_NVFP4, 2); }
Test(mm_cuda_shim, simt_block8) { every_format("simt_block8", "simt", &R_BLOCK8, 1); }

Test(mm_cuda_shim, tc_mixed_formats) {
    tu_rng r = {fmt_rng_make_key(test_seed("tc_mixed_formats"), 62), 0};
    static const char *const pairs[][2] = {{"fp16", "e4m3"}, {"e5m2", "fp16"}, {"bf16", "e2m1"},
                                           {"e2m3", "bf16"}, {"e4m3", "e5m2"}, {"e3m2", "e2m1"}};
    for (int c = 0; c < 12; c++) {
        const fmt_t fa = tu_fmt(pairs[c % 6][0]), fb = tu_fmt(pairs[c % 6][1]);
        shim_case(&r, "tc_mixed_formats", "tc", &fa, &fb, (size_t)tu_rng_int(&r, 1, 40),
                  (size_t)tu_rng_int(&r, 1, 40), (size_t)tu_rng_int(&r, 1, 100), c % 2 ? &R_MX : &R_NVFP4);
    }
}

// Where the tensor-core kernel does not apply, and says why.
Test(mm_cuda_shim, tc_refusals) {
    const fmt_t f16 = tu_fmt("fp16"), b16 = tu_fmt("bf16"), e4 = tu_fmt("e4m3");
    float x[64 * 64], C[4], s[2 * 8] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < 64 * 64; i++) x[i] = 1.0f;
    mm_operand a = {.x = x, .ld = 64, .fmt = f16}, b = {.x = x, .ld = 2, .fmt = b16};
    mm_opts o;
    mm_opts_default(&o);
    const char *why = "";
    cr_assert_eq(shim_mm_own(C, 2, &a, &b, 2, 2, 64, &o, "tc", &why), MM_EUNSUPPORTED, "fp16 x bf16");
    cr_assert(strstr(why, "exact"), "why: %s", why);
    a.fmt = b.fmt = e4;
    a.scales = s, a.block_k = 8;
    cr_assert_eq(shim_mm_own(C, 2, &a, &b, 2, 2, 64, &o, "tc", &why), MM_EUNSUPPORTED, "block 8");
    cr_assert(strstr(why, "16"), "why: %s", why);
    cr_assert_eq(shim_mm_own(C, 2, &a, &b, 2, 2, 64, &o, "simt", &why), MM_OK, "simt takes block 8");
    for (int i = 0; i < 4; i++) cr_assert(C[i] == 64.0f, "C[%d] = %g", i, C[i]);
}
