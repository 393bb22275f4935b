// test_mm_path.c: mm_cpu reports the kernel it ran (mm_opts.path, scaled_mm.h's mm_path): the
// fast engine kernel for the NVIDIA fused kinds (hopper:wgmma on e4m3, ampere:mma on bf16, and
// their f16-D forms), with the count of outputs it left to the scalar model; the scalar model
// alone where no fast kernel covers the kind; the emulated, BLAS and fixed-order kernels
// otherwise. The outputs are checked against mm_ref too, so a path that reports itself but
// computes something else fails here as well. The seed is printed; FPLAB_SEED replays.
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/round.h"
#include "kernels/scaled_mm.h"
#include "test_util.h"

typedef struct {
    const char *acc, *fmt;
    size_t M, N, K;
    bool fixed_order;
    int nan_rows;  // rows of A that hold a NaN (their outputs: the scalar model's)
    int block;     // K-block of the operands' scales (all 1: a ue8m0 and a ue4m3 value); 0: none
} pcase;

// Runs mm_cpu on case c with normal operands; returns the path it reported, after holding the
// result to mm_ref bit for bit where the accumulator defines the bits.
static mm_path run(const pcase *c, uint64_t *s) {
    mm_opts o;
    mm_opts_default(&o);
    char msg[300];
    cr_assert_eq(mm_acc_from_name(&o.acc, c->acc, msg, sizeof msg), MM_OK, "%s: %s", c->acc, msg);
    o.fixed_order = c->fixed_order;
    const size_t M = c->M, N = c->N, K = c->K;
    float *a = malloc((M * K + 1) * sizeof *a), *b = malloc((K * N + 1) * sizeof *b);
    float *C = calloc(M * N + 1, sizeof *C), *R = calloc(M * N + 1, sizeof *R);
    mm_operand A = {.x = a, .ld = K ? K : 1}, B = {.x = b, .ld = N};
    cr_assert_eq(fmt_from_name(&A.fmt, c->fmt), FMT_OK);
    B.fmt = A.fmt;
    const fmt_round_opts ro = {.mode = FMT_RNE, .overflow = FMT_SATURATE};
    for (size_t i = 0; i < M * K; i++) a[i] = (float)fmt_round1(&A.fmt, tu_sm_unif(s) * 4 - 2, &ro);
    for (size_t i = 0; i < K * N; i++) b[i] = (float)fmt_round1(&B.fmt, tu_sm_unif(s) * 4 - 2, &ro);
    for (int r = 0; r < c->nan_rows; r++) a[(size_t)r * 3 % M * K] = NAN;
    const size_t nb = c->block ? (K + (size_t)c->block - 1) / (size_t)c->block : 0;
    float *sa = malloc((M * nb + 1) * sizeof *sa), *sb = malloc((N * nb + 1) * sizeof *sb);
    for (size_t i = 0; i < M * nb; i++) sa[i] = 1.0f;
    for (size_t i = 0; i < N * nb; i++) sb[i] = 1.0f;
    if (c->block) A.scales = sa, B.scales = sb, A.block_k = B.block_k = c->block;
    mm_path path = {.kernel = "untouched", .outputs = 12345, .model_outputs = 12345};
    o.path = &path;
    cr_assert_eq(mm_cpu(C, N, &A, &B, M, N, K, &o), MM_OK, "%s %s", c->acc, c->fmt);
    o.path = NULL;
    if (mm_acc_is_emulated(&o.acc)) {
        cr_assert_eq(mm_ref(R, N, &A, &B, M, N, K, &o), MM_OK);
        for (size_t i = 0; i < M * N; i++)
            cr_assert(!memcmp(&C[i], &R[i], 4) || (isnan(C[i]) && isnan(R[i])), "%s %s: output %zu: mm_cpu %a, mm_ref %a",
                      c->acc, c->fmt, i, C[i], R[i]);
    }
    free(a), free(b), free(C), free(R), free(sa), free(sb);
    cr_assert_eq(path.outputs, M * N, "%s %s: outputs %zu, expected %zu", c->acc, c->fmt, path.outputs, M * N);
    return path;
}

static void expect(const pcase *c, const char *kernel, size_t model_outputs) {
    uint64_t s = tu_seed("mm_path", c->acc, 3701);
    const mm_path p = run(c, &s);
    cr_assert_str_eq(p.kernel, kernel, "%s on %s: kernel %s, expected %s", c->acc, c->fmt, p.kernel, kernel);
    cr_assert_eq(p.model_outputs, model_outputs, "%s on %s: %zu outputs left to the model, expected %zu", c->acc,
                 c->fmt, p.model_outputs, model_outputs);
}

Test(mm_path, nvidia_fused_kinds_take_the_fast_kernel) {
    expect(&(pcase){"hopper:wgmma", "e4m3", 37, 70, 96, false, 0, 0}, "engine-fast", 0);
    expect(&(pcase){"hopper:wgmma:promote=64", "e4m3", 9, 33, 200, false, 0, 0}, "engine-fast", 0);
    expect(&(pcase){"ampere:mma", "bf16", 37, 70, 96, false, 0, 0}, "engine-fast", 0);
    expect(&(pcase){"ada:mma", "e5m2", 8, 8, 40, false, 0, 0}, "engine-fast", 0);
    expect(&(pcase){"hopper:wgmma:f16", "e4m3", 37, 70, 96, false, 0, 0}, "engine-fast", 0);
    expect(&(pcase){"ampere:mma:f16", "fp16", 37, 70, 96, false, 0, 0}, "engine-fast", 0);
}

Test(mm_path, amd_and_block_scaled_kinds_take_their_fast_kernels) {
    expect(&(pcase){"cdna3:mfma", "e4m3fnuz", 37, 70, 96, false, 0, 0}, "engine-amd", 0);
    expect(&(pcase){"cdna3:mfma", "bf16", 37, 70, 96, false, 0, 0}, "engine-amd", 0);
    expect(&(pcase){"cdna2:mfma", "fp16", 20, 30, 64, false, 0, 0}, "engine-amd", 0);
    expect(&(pcase){"cdna1:mfma", "bf16", 20, 30, 64, false, 0, 0}, "engine-amd", 0);
    expect(&(pcase){"blackwell:tcgen05", "e4m3", 37, 70, 96, false, 0, 32}, "engine-block", 0);
    expect(&(pcase){"blackwell:tcgen05", "e2m1", 37, 70, 96, false, 0, 32}, "engine-block", 0);
    expect(&(pcase){"blackwell:tcgen05", "e2m1", 20, 30, 64, false, 0, 16}, "engine-block", 0);
    expect(&(pcase){"cdna3:mfma", "bf16", 20, 30, 64, false, 1, 0}, "engine-amd", 30);
}

Test(mm_path, special_operands_counted_as_model_outputs) {
    // A NaN in a row of A: that row's N outputs are the scalar model's.
    expect(&(pcase){"hopper:wgmma", "e4m3", 20, 30, 64, false, 1, 0}, "engine-fast", 30);
    expect(&(pcase){"ampere:mma", "bf16", 20, 30, 64, false, 2, 0}, "engine-fast", 60);
}

Test(mm_path, uncovered_engine_kind_runs_the_model) {
    // tf32 operands (fp32 on hopper:wgmma): no fast kernel takes them.
    expect(&(pcase){"hopper:wgmma", "fp32", 5, 6, 16, false, 0, 0}, "engine-model", 30);
}

Test(mm_path, other_kernels) {
    expect(&(pcase){"m13:rtz", "e4m3", 17, 20, 64, false, 0, 0}, "emu-f32", 0);
    expect(&(pcase){"fp16", "e4m3", 17, 20, 64, false, 0, 0}, "emu-f64", 0);
    expect(&(pcase){"fp32", "bf16", 17, 20, 64, true, 0, 0}, "fixed", 0);
#ifdef FPLAB_HAVE_BLAS
    expect(&(pcase){"fp32", "bf16", 17, 20, 64, false, 0, 0}, "blas", 0);
#else
    expect(&(pcase){"fp32", "bf16", 17, 20, 64, false, 0, 0}, "fixed", 0);
#endif
}

// Without a path (NULL, the default) nothing is written and the product is the same.
Test(mm_path, no_path_asked) {
    mm_opts o;
    mm_opts_default(&o);
    cr_assert_null(o.path);
    cr_assert_eq(mm_acc_from_name(&o.acc, "hopper:wgmma", NULL, 0), MM_OK);
    float a[32], b[32], C[1];
    for (int i = 0; i < 32; i++) a[i] = 0.5f, b[i] = 2.0f;
    mm_operand A = {.x = a, .ld = 32}, B = {.x = b, .ld = 1};
    fmt_from_name(&A.fmt, "e4m3");
    B.fmt = A.fmt;
    cr_assert_eq(mm_cpu(C, 1, &A, &B, 1, 1, 32, &o), MM_OK);
    cr_assert_eq(C[0], 32.0f);
}
