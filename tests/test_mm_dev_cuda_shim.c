// test_mm_dev_cuda_shim.c: the device-pointer GEMM of kernels/scaled_mm_cuda_dev.h (emulated
// accumulators and matrix engines, kernels/cuda/scaled_mm_dev_kernels.cuh) against mm_cpu, bit for
// bit. Built twice: as this suite, the kernels run on the CPU through tests/cuda_shim.cpp (the
// same source nvcc compiles; every machine, make test); as test_mm_dev_cuda (tests/
// test_mm_dev_cuda.c defines MM_DEV_ON_DEVICE), on device memory through mm_cuda_dev (make
// test-gpu; skipped without a GPU unless FPLAB_REQUIRE_GPU=1).
// What is checked:
// - emulated accumulators (bf16, fp16, m13:rtz, e8m23 rounding toward zero, m10:rup, promotion
//   every 32 and 128 products) on fp8, fp6, fp4, bf16 and fp16 elements with tensor, MX (block
//   32, power-of-two scales), NVFP4 (block 16, e4m3 scales and tensor scales), per-row and no
//   scales; K ragged against blocks and promotion intervals; trans variants, padded leading
//   dimensions, alpha, beta, outputs rounded to bf16 / e4m3 (rne, and stochastic rounding whose
//   counter is the output's index);
// - engines: NVIDIA fused (volta to blackwell, f16 D, fp8's 13-bit D, promote=N, tcgen05's
//   block-scaled kinds picked from the scales' values: ue8m0 or ue4m3), AMD (CDNA2's pairwise tree
//   with flushing, CDNA3's fused groups, fp8 fnuz), C as the chain's first C (alpha 1, beta 1);
// - that the comparison has teeth: dropping the promotion, or the scales, changes the bits of
//   the cases used (so a kernel that ignored them would fail);
// - refusals: plain fp32 accumulation and a stochastic accumulator (MM_EUNSUPPORTED), bad
//   shapes and operands an engine does not take (MM_EINVAL), each with a message.
// Results: equal bits, or both NaN. Random inputs come from the library's generator; the seed is
// printed and read from FPLAB_SEED to replay a failure.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/rng.h"
#include "formats/round.h"
#include "kernels/scaled_mm.h"
#include "kernels/scaled_mm_cuda_dev.h"
#include "test_mm_util.h"
#include "test_util.h"

// --- the backend: the shim on host memory, or the device

#ifdef MM_DEV_ON_DEVICE
#define SUITE "test_mm_dev_cuda"
#include "cuda_suite.h"
#ifdef FPLAB_HAVE_CUDA
static void *to_dev(const void *h, size_t bytes) {
    void *d = NULL;
    cr_assert_eq(cudaMalloc(&d, bytes + 4), cudaSuccess);
    if (h) cr_assert_eq(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

// Floats of X's storage (srows x ld) and of its scales.
static size_t storage(const mm_operand *X, size_t rows, size_t cols) {
    return (X->trans ? cols : rows) * X->ld;
}
static size_t nscales(const mm_operand *X, bool is_a, size_t rows, size_t cols, size_t K) {
    const size_t bk = X->block_k > 0 ? (size_t)X->block_k : K;
    return (K + bk - 1) / bk * (is_a ? rows : cols);
}

// Device copies of the operands and C; the call; C copied back.
static int backend_ts(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                      const mm_opts *o, const float *ta, const float *tb, char *msg, size_t len) {
    mm_operand a = *A, b = *B;
    a.x = to_dev(A->x, storage(A, M, K) * 4), b.x = to_dev(B->x, storage(B, K, N) * 4);
    a.scales = A->scales ? to_dev(A->scales, nscales(A, true, M, N, K) * 4) : NULL;
    b.scales = B->scales ? to_dev(B->scales, nscales(B, false, M, N, K) * 4) : NULL;
    float *d_c = to_dev(C, M * ldc * 4);
    float *d_ta = ta ? to_dev(ta, 4) : NULL, *d_tb = tb ? to_dev(tb, 4) : NULL;
    const int st = mm_cuda_dev_tscales(d_c, ldc, &a, &b, M, N, K, o, d_ta, d_tb, NULL, msg, len);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
    cr_assert_eq(cudaMemcpy(C, d_c, M * ldc * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree((void *)a.x), cudaFree((void *)b.x), cudaFree((void *)a.scales), cudaFree((void *)b.scales);
    cudaFree(d_c), cudaFree(d_ta), cudaFree(d_tb);
    return st;
}
#else
static int backend_ts(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                      const mm_opts *o, const float *ta, const float *tb, char *msg, size_t len) {
    return mm_cuda_dev_tscales(C, ldc, A, B, M, N, K, o, ta, tb, NULL, msg, len);
}
#endif

ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
    cuda_suite_report(stats, "CUDA GEMM", "test_mm_dev_cuda");
}
#else
#define SUITE "test_mm_dev_cuda_shim"
int shim_mm_dev(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                const mm_opts *o, const float *ta, const float *tb, char *msg, size_t msg_len);
static int backend_ts(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                      const mm_opts *o, const float *ta, const float *tb, char *msg, size_t len) {
    return shim_mm_dev(C, ldc, A, B, M, N, K, o, ta, tb, msg, len);
}
static void need_backend(void) {}
#endif

// mm_cuda_dev: the tensor scales of the operands.
static int backend(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                   const mm_opts *o, char *msg, size_t len) {
    return backend_ts(C, ldc, A, B, M, N, K, o, NULL, NULL, msg, len);
}

static uint64_t test_seed(const char *test) { return tu_seed(SUITE, test, 0x6d6d646576ULL); }

static bool same_bits(float x, float y) {
    if (isnan(x) && isnan(y)) return true;
    return !memcmp(&x, &y, sizeof x);
}

// --- one random product, the backend against mm_cpu

typedef struct {
    tu_operand A, B;
    mm_opts o;
    size_t M, N, K, ldc;
    float *C, *Ccpu;
    char what[256];
} dev_case;

// Operands of fa (M x K) and fb (K x N) under recipe rc, random trans and padding, the
// accumulator spec, alpha / beta (1 / 0 when plain), output format out (rounding mode mode), C
// random.
static void case_make(dev_case *c, tu_rng *r, const char *acc, const fmt_t *fa, const fmt_t *fb, size_t M,
                      size_t N, size_t K, const tu_recipe *rc, bool plain, const char *out, fmt_round_mode mode) {
    memset(c, 0, sizeof *c);
    c->M = M, c->N = N, c->K = K;
    tu_recipe_operand(&c->A, r, true, fa, M, K, K, tu_rng_int(r, 0, 1), rc);
    tu_recipe_operand(&c->B, r, false, fb, K, N, K, tu_rng_int(r, 0, 1), rc);
    c->o = tu_acc_opts(acc);
    c->o.alpha = plain || tu_rng_int(r, 0, 1) ? 1.0f : (float)tu_rng_normal(r);
    c->o.beta = plain ? 1.0f : tu_rng_int(r, 0, 1) ? 0.0f : (float)tu_rng_normal(r);
    c->o.out_fmt = tu_fmt(out);
    c->o.out_round.mode = mode;
    c->o.out_round.seed = 7, c->o.out_round.offset = (uint64_t)tu_rng_int(r, 0, 1000);
    c->ldc = N + (size_t)tu_rng_int(r, 0, 2);
    c->C = malloc(M * c->ldc * sizeof *c->C), c->Ccpu = malloc(M * c->ldc * sizeof *c->Ccpu);
    cr_assert(c->C && c->Ccpu);
    for (size_t i = 0; i < M * c->ldc; i++) c->C[i] = c->Ccpu[i] = (float)tu_rng_normal(r);
    snprintf(c->what, sizeof c->what, "%s on %s x %s (%s), M %zu N %zu K %zu, trans %d%d, alpha %g beta %g, out %s %s",
             acc, fa->name, fb->name, rc->name, M, N, K, c->A.op.trans, c->B.op.trans, c->o.alpha, c->o.beta,
             out, fmt_mode_name(mode));
}

static void case_free(dev_case *c) {
    free(c->C), free(c->Ccpu);
    tu_operand_free(&c->A), tu_operand_free(&c->B);
}

// Runs mm_cpu and the backend; every element of C (padding included) must have the same bits.
// dev_ts: the backend reads the tensor scales from "device" memory (mm_cuda_dev_tscales), its
// operands' tensor_scale set to 0 (read as 1), so that only those pointers can supply them.
static void case_check_ts(dev_case *c, bool dev_ts) {
    char msg[320] = "";
    const int want = mm_cpu(c->Ccpu, c->ldc, &c->A.op, &c->B.op, c->M, c->N, c->K, &c->o);
    cr_assert_eq(want, MM_OK, "%s: mm_cpu status %d", c->what, want);
    mm_operand a = c->A.op, b = c->B.op;
    const float ta = a.tensor_scale, tb = b.tensor_scale;
    if (dev_ts) a.tensor_scale = b.tensor_scale = 0.0f;
    const int st = backend_ts(c->C, c->ldc, &a, &b, c->M, c->N, c->K, &c->o, dev_ts ? &ta : NULL, dev_ts ? &tb : NULL,
                              msg, sizeof msg);
    cr_assert_eq(st, MM_OK, "%s: status %d (%s)", c->what, st, msg);
    size_t finite = 0;  // the case must say something: not every output NaN or inf
    for (size_t i = 0; i < c->M; i++)
        for (size_t j = 0; j < c->N; j++) finite += isfinite(c->Ccpu[i * c->ldc + j]) != 0;
    cr_assert_gt(finite, 0, "%s: every output of mm_cpu is NaN or inf", c->what);
    for (size_t i = 0; i < c->M; i++)
        for (size_t j = 0; j < c->ldc; j++) {
            const float x = c->C[i * c->ldc + j], y = c->Ccpu[i * c->ldc + j];
            uint32_t ux, uy;
            memcpy(&ux, &x, 4), memcpy(&uy, &y, 4);
            cr_assert(same_bits(x, y), "%s: C[%zu][%zu] = %a (0x%08x), mm_cpu %a (0x%08x)", c->what, i, j, x, ux, y,
                      uy);
        }
}

static void case_check(dev_case *c) { case_check_ts(c, false); }

static void one(tu_rng *r, const char *acc, const char *fa, const char *fb, size_t M, size_t N, size_t K,
                const tu_recipe *rc, bool plain, const char *out, fmt_round_mode mode) {
    const fmt_t a = tu_fmt(fa), b = tu_fmt(fb);
    dev_case c;
    case_make(&c, r, acc, &a, &b, M, N, K, rc, plain, out, mode);
    case_check(&c);
    case_free(&c);
}

static const tu_recipe R_NONE = {"none", SC_NONE, 0, false};
static const tu_recipe R_MX_E4 = {"mx-e4m3", SC_E4M3, 32, false};  // block 32, ue4m3 scales

// --- emulated accumulators

Test(mm_dev_cuda, emulated) {
    need_backend();
    tu_rng r = {fmt_rng_make_key(test_seed("emulated"), 71), 0};
    static const char *const accs[] = {"bf16", "fp16", "m13:rtz", "e8m23:rtz", "m10:rup", "m13:rtz:promote=32",
                                       "bf16:promote=128", "fp16:rdn:promote=32", "m7:rto", "m13:rna"};
    static const char *const elems[] = {"e4m3", "e5m2", "e2m1", "e3m2", "bf16", "fp16"};
    const tu_recipe *const rcs[] = {&TU_R_TENSOR, &TU_R_MX, &TU_R_NVFP4, &TU_R_ROW, &R_NONE};
    static const char *const outs[] = {"fp32", "bf16", "e4m3"};
    for (size_t a = 0; a < sizeof accs / sizeof *accs; a++)
        for (int c = 0; c < 6; c++) {
            const char *e = elems[(a + (size_t)c) % 6];
            const size_t K = (size_t)(c % 2 ? tu_rng_int(&r, 1, 70) : tu_rng_int(&r, 129, 300));  // ragged
            const fmt_round_mode mode = c == 5 ? FMT_SR : c == 3 ? FMT_RTZ : FMT_RNE;
            one(&r, accs[a], e, elems[(a + (size_t)c + 1) % 6], (size_t)tu_rng_int(&r, 1, 9),
                (size_t)tu_rng_int(&r, 1, 9), K, rcs[(a + (size_t)c) % 5], false, outs[c % 3], mode);
        }
}

// The comparison has teeth: for these cases, a kernel that ignored promote=N, or the block
// scales (applying only the tensor scales), would give other bits than mm_cpu's.
static void teeth(const char *test, const char *acc, const tu_recipe *rc, bool drop_scales) {
    tu_rng r = {fmt_rng_make_key(test_seed(test), 72), 0};
    const fmt_t e4 = tu_fmt("e4m3");
    dev_case c;
    case_make(&c, &r, acc, &e4, &e4, 6, 5, 300, rc, false, "fp32", FMT_RNE);
    c.o.beta = 0.0f;  // C not read: the variant below starts from any C
    case_check(&c);
    float *alt = calloc(c.M * c.ldc, sizeof *alt);
    cr_assert(alt);
    dev_case w = c;
    if (drop_scales) w.A.op.scales = w.B.op.scales = NULL;
    else w.o.acc.promote_every = 0;
    cr_assert_eq(mm_cpu(alt, c.ldc, &w.A.op, &w.B.op, c.M, c.N, c.K, &w.o), MM_OK);
    size_t differ = 0;
    for (size_t i = 0; i < c.M; i++)
        for (size_t j = 0; j < c.N; j++) differ += !same_bits(alt[i * c.ldc + j], c.C[i * c.ldc + j]);
    cr_assert_gt(differ, c.M * c.N / 2, "%s: only %zu of %zu outputs change without %s", c.what, differ,
                 c.M * c.N, drop_scales ? "the block scales" : "promotion");
    free(alt);
    case_free(&c);
}

Test(mm_dev_cuda, promotion_matters) {
    need_backend();
    teeth("promotion_matters", "m13:rtz:promote=32", &TU_R_TENSOR, false);
}

Test(mm_dev_cuda, engine_promotion_matters) {
    need_backend();
    teeth("engine_promotion_matters", "hopper:wgmma:promote=128", &TU_R_TENSOR, false);
}

Test(mm_dev_cuda, block_scales_matter) {
    need_backend();
    teeth("block_scales_matter", "m13:rtz", &TU_R_NVFP4, true);
}

// --- engines

typedef struct {
    const char *acc, *fa, *fb;
    const tu_recipe *rc;
} engine_case;

Test(mm_dev_cuda, engines) {
    need_backend();
    tu_rng r = {fmt_rng_make_key(test_seed("engines"), 73), 0};
    static const engine_case cases[] = {
        {"hopper:wgmma", "e4m3", "e5m2", &TU_R_TENSOR},
        {"hopper:wgmma", "e4m3", "e4m3", &TU_R_MX},
        {"hopper:wgmma:promote=128", "e4m3", "e4m3", &TU_R_NVFP4},
        {"hopper:wgmma:promote=128", "e4m3", "e5m2", &TU_R_TENSOR},
        {"hopper:wgmma", "bf16", "bf16", &TU_R_ROW},
        {"hopper:wgmma:f16", "fp16", "fp16", &R_NONE},
        {"ada:mma", "e5m2", "e4m3", &TU_R_MX},
        {"ada:mma:k16", "e4m3", "e4m3", &R_NONE},
        {"ampere:mma", "bf16", "bf16", &TU_R_TENSOR},
        {"ampere:mma:f16", "fp16", "fp16", &TU_R_ROW},
        {"volta:mma", "fp16", "fp16", &R_NONE},
        {"turing:mma", "fp16", "fp16", &TU_R_MX},
        {"blackwell:tcgen05", "e2m1", "e2m1", &TU_R_NVFP4},  // mxf4nvf4, ue4m3 scales
        {"blackwell:tcgen05", "e2m1", "e2m1", &TU_R_MX},     // mxf4nvf4, ue8m0 scales, block 32
        {"blackwell:tcgen05", "e4m3", "e2m1", &TU_R_MX},     // mxf8f6f4
        {"blackwell:tcgen05", "e4m3", "e3m2", &R_MX_E4},     // not ue8m0: the kind without scales
        {"blackwell:tcgen05:promote=64", "e2m1", "e2m1", &TU_R_NVFP4},
        {"cdna3:mfma", "bf16", "bf16", &TU_R_MX},
        {"cdna3:mfma", "fp16", "fp16", &R_NONE},
        {"cdna3:mfma", "e4m3fnuz", "e5m2fnuz", &TU_R_TENSOR},
        {"cdna2:mfma", "bf16", "bf16", &TU_R_ROW},
        {"cdna2:mfma", "fp16", "fp16", &R_NONE},
    };
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++)
        for (int c = 0; c < 3; c++) {
            const engine_case *e = &cases[t];
            const size_t K = (size_t)(c == 0 ? tu_rng_int(&r, 1, 40) : tu_rng_int(&r, 129, 260));
            // c == 2 without scales: alpha 1, beta 1, C the chain's first C
            const bool plain = c == 2 && e->rc == &R_NONE;
            one(&r, e->acc, e->fa, e->fb, (size_t)tu_rng_int(&r, 1, 7), (size_t)tu_rng_int(&r, 1, 7), K, e->rc, plain,
                c == 1 ? "bf16" : "fp32", FMT_RNE);
        }
}

// The block-scaled kind is picked from the scales' values, on the device: the same operands with
// MX scales (ue8m0: tcgen05's mxf8f6f4 applies them) and with the scales bumped off powers of two
// (the kind without scales, promoted per block) give other bits, each equal to mm_cpu's.
Test(mm_dev_cuda, engine_kind_from_scales) {
    need_backend();
    tu_rng r = {fmt_rng_make_key(test_seed("engine_kind_from_scales"), 74), 0};
    const fmt_t e4 = tu_fmt("e4m3");
    dev_case c;
    case_make(&c, &r, "blackwell:tcgen05", &e4, &e4, 4, 4, 96, &TU_R_MX, false, "fp32", FMT_RNE);
    c.o.beta = 0.0f;
    case_check(&c);
    float first[64];
    for (size_t i = 0; i < c.M; i++) memcpy(first + i * 4, c.C + i * c.ldc, 4 * sizeof(float));
    c.A.scales[0] *= 1.5f;  // one scale off the ue8m0 grid (still ue4m3 and no kind of it): all change kind
    for (size_t i = 0; i < c.M * c.ldc; i++) c.C[i] = c.Ccpu[i] = 0.0f;
    case_check(&c);
    size_t differ = 0;
    for (size_t i = 1; i < c.M; i++)  // rows other than the one whose scale changed
        for (size_t j = 0; j < c.N; j++) differ += !same_bits(first[i * 4 + j], c.C[i * c.ldc + j]);
    cr_assert_gt(differ, 0, "%s: no output of the other rows changed with the kind", c.what);
    case_free(&c);
}

// Tensor scales read on the device (two-level recipes quantized there: no copy to the host),
// for emulated accumulators and engines, C in an engine's chain included (tensor scales of 1).
Test(mm_dev_cuda, tensor_scales_on_device) {
    need_backend();
    tu_rng r = {fmt_rng_make_key(test_seed("tensor_scales_on_device"), 75), 0};
    static const engine_case cases[] = {
        {"m13:rtz:promote=32", "e4m3", "e4m3", &TU_R_NVFP4}, {"bf16", "e2m1", "e2m1", &TU_R_TENSOR},
        {"hopper:wgmma", "e4m3", "e5m2", &TU_R_TENSOR},      {"blackwell:tcgen05", "e2m1", "e2m1", &TU_R_NVFP4},
        {"ampere:mma", "bf16", "bf16", &R_NONE},
    };
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++)
        for (int c = 0; c < 2; c++) {
            const fmt_t a = tu_fmt(cases[t].fa), b = tu_fmt(cases[t].fb);
            dev_case d;
            const bool plain = c == 1 && cases[t].rc == &R_NONE;
            case_make(&d, &r, cases[t].acc, &a, &b, 5, 6, (size_t)tu_rng_int(&r, 20, 150), cases[t].rc, plain, "fp32",
                      FMT_RNE);
            if (plain) d.A.op.tensor_scale = d.B.op.tensor_scale = 1.0f;  // ab = 1: C joins the chain
            case_check_ts(&d, true);
            case_free(&d);
        }
}

// --- refusals

Test(mm_dev_cuda, refusals) {
    need_backend();
    float x[64], C[4];
    for (int i = 0; i < 64; i++) x[i] = 1.0f;
    mm_operand a = {.x = x, .ld = 8, .fmt = tu_fmt("e4m3")}, b = {.x = x, .ld = 2, .fmt = tu_fmt("e4m3")};
    char msg[320];
    mm_opts o = tu_acc_opts("fp32");
    cr_assert_eq(backend(C, 2, &a, &b, 2, 2, 8, &o, msg, sizeof msg), MM_EUNSUPPORTED, "fp32");
    cr_assert(strstr(msg, "fp32"), "msg: %s", msg);
    o = tu_acc_opts("bf16");
    o.acc.mode = FMT_SR;
    cr_assert_eq(backend(C, 2, &a, &b, 2, 2, 8, &o, msg, sizeof msg), MM_EUNSUPPORTED, "sr");
    cr_assert(strstr(msg, "stochastic"), "msg: %s", msg);
    o = tu_acc_opts("bf16");
    cr_assert_eq(backend(C, 2, &a, &b, 2, 2, 9, &o, msg, sizeof msg), MM_EINVAL, "ld 8 < K 9");
    cr_assert(strstr(msg, "ld"), "msg: %s", msg);
    o = tu_acc_opts("hopper:wgmma");
    a.fmt = b.fmt = tu_fmt("e2m1");  // Hopper has no fp4 instruction
    cr_assert_eq(backend(C, 2, &a, &b, 2, 2, 8, &o, msg, sizeof msg), MM_EINVAL, "hopper fp4");
    cr_assert(strstr(msg, "hopper"), "msg: %s", msg);
    a.fmt = b.fmt = tu_fmt("e4m3");
    cr_assert_eq(backend(C, 2, &a, &b, 2, 2, 8, &o, msg, sizeof msg), MM_OK, "hopper fp8: %s", msg);
    for (int i = 0; i < 4; i++) cr_assert(C[i] == 8.0f, "C[%d] = %g", i, C[i]);
}
