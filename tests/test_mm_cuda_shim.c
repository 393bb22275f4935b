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


// One random product through the shim's kernel, checked against mm_ref_exact.
static void shim_case(tu_rng *r, const char *what, const char *kernel, const fmt_t *fa, const fmt_t *fb,
                      size_t M, size_t N, size_t K, const tu_recipe *rc) {
    static const char *const outs[] = {"fp32", "bf16", "fp16"};
    const fmt_t out = tu_fmt(outs[tu_rng_int(r, 0, 2)]);
    char label[96];
    snprintf(label, sizeof label, "%s [%s]", what, kernel);
    tu_mm_case c;
    tu_mm_case_make(&c, r, label, fa, fb, M, N, K, rc, &out, FMT_RNE);
    const char *why = "";
    const int st = shim_mm_own(c.C, c.ldc, &c.A.op, &c.B.op, M, N, K, &c.o, kernel, &why);
    cr_assert_eq(st, MM_OK, "%s: status %d (%s)", c.what, st, why);
    tu_check_bound(c.what, c.C, c.Cin, c.ldc, c.exact, c.absdot, M, N, K, &c.o, !strcmp(kernel, "tc") ? 0x1p-23 : 0x1p-24);
    tu_mm_case_free(&c);
}

static const tu_recipe R_BLOCK8 = {"block8", SC_POW2, 8, false};  // not a multiple of 16: simt only

// Every element format with one recipe; a third of the cases cross a block tile (M or N > 128
// for tc, > 64 for simt).
static void every_format(const char *test, const char *kernel, const tu_recipe *rc, int ncases) {
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

Test(mm_cuda_shim, tc_tensor) { every_format("tc_tensor", "tc", &TU_R_TENSOR, 3); }
Test(mm_cuda_shim, tc_mx) { every_format("tc_mx", "tc", &TU_R_MX, 3); }
Test(mm_cuda_shim, tc_nvfp4) { every_format("tc_nvfp4", "tc", &TU_R_NVFP4, 3); }
Test(mm_cuda_shim, tc_row) { every_format("tc_row", "tc", &TU_R_ROW, 2); }
Test(mm_cuda_shim, simt_mx) { every_format("simt_mx", "simt", &TU_R_MX, 2); }
Test(mm_cuda_shim, simt_nvfp4) { every_format("simt_nvfp4", "simt", &TU_R_NVFP4, 2); }
Test(mm_cuda_shim, simt_block8) { every_format("simt_block8", "simt", &R_BLOCK8, 1); }

Test(mm_cuda_shim, tc_mixed_formats) {
    tu_rng r = {fmt_rng_make_key(test_seed("tc_mixed_formats"), 62), 0};
    static const char *const pairs[][2] = {{"fp16", "e4m3"}, {"e5m2", "fp16"}, {"bf16", "e2m1"},
                                           {"e2m3", "bf16"}, {"e4m3", "e5m2"}, {"e3m2", "e2m1"}};
    for (int c = 0; c < 12; c++) {
        const fmt_t fa = tu_fmt(pairs[c % 6][0]), fb = tu_fmt(pairs[c % 6][1]);
        shim_case(&r, "tc_mixed_formats", "tc", &fa, &fb, (size_t)tu_rng_int(&r, 1, 40),
                  (size_t)tu_rng_int(&r, 1, 40), (size_t)tu_rng_int(&r, 1, 100), c % 2 ? &TU_R_MX : &TU_R_NVFP4);
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
