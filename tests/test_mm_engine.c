// test_mm_engine.c: the fast CPU kernel of the matrix engines
// (kernels/engine/scaled_mm_cpu_engine.c, mm_cpu's engine path) equals the scalar model
// (mm_ref, one dot product at a time through engine_model.c) bit for bit, for every kind it
// covers: random operands of several
// distributions and shapes (K not a multiple of k, edges of the tiles), promote=N, block scales,
// alpha/beta and C in the chain, and NaN, inf, subnormal and zero operands (the kernel hands
// those outputs to the scalar model). The seed is printed; FPLAB_SEED replays.
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/round.h"
#include "kernels/scaled_mm.h"
#include "kernels/scaled_mm_internal.h"
#include "test_engine_util.h"
#include "test_util.h"

typedef struct {
    const char *acc;       // engine spec
    const char *fa, *fb;   // operand formats
    size_t M, N, K;
    dist d;
    bool trans_a, trans_b;
    int block_k;           // > 0: power-of-two block scales on both operands
    float alpha, beta;     // beta = 1, alpha = 1, no scales: C is the chain's first C
    bool c_special;        // C holds NaN, inf, subnormal values
    bool c_f16_edges;      // C holds fp16's edges: its subnormals, 65504, 65519, 65520, ties
} ecase;

// mm_cpu against mm_ref on one case, bit for bit; also that the fast kernel takes the case.
static void check(const ecase *c, uint64_t *s) {
    mm_opts o;
    mm_opts_default(&o);
    char msg[300];
    cr_assert_eq(mm_acc_from_name(&o.acc, c->acc, msg, sizeof msg), MM_OK, "%s: %s", c->acc, msg);
    o.alpha = c->alpha, o.beta = c->beta;
    const size_t M = c->M, N = c->N, K = c->K;
    float *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b);
    float *C0 = malloc(M * N * sizeof *C0);
    mm_operand A = {.x = a, .ld = c->trans_a ? M : K, .trans = c->trans_a};
    mm_operand B = {.x = b, .ld = c->trans_b ? K : N, .trans = c->trans_b};
    cr_assert_eq(fmt_from_name(&A.fmt, c->fa), FMT_OK);
    cr_assert_eq(fmt_from_name(&B.fmt, c->fb), FMT_OK);
    for (size_t i = 0; i < M * K; i++) a[i] = draw(s, &A.fmt, c->d, i % K);
    for (size_t i = 0; i < K * N; i++) b[i] = draw(s, &B.fmt, c->d, i / N);
    float *sa = NULL, *sb = NULL;
    if (c->block_k) {
        const size_t nb = (K + (size_t)c->block_k - 1) / (size_t)c->block_k;
        sa = malloc(M * nb * sizeof *sa), sb = malloc(nb * N * sizeof *sb);
        for (size_t i = 0; i < M * nb; i++) sa[i] = ldexpf(1.0f, tu_sm_int(s, -4, 4));
        for (size_t i = 0; i < nb * N; i++) sb[i] = ldexpf(1.0f, tu_sm_int(s, -4, 4));
        A.scales = sa, B.scales = sb, A.block_k = B.block_k = c->block_k;
    }
    for (size_t i = 0; i < M * N; i++) {
        C0[i] = (float)(tu_sm_unif(s) * 8 - 4);
        if (c->c_special) {
            const int w = tu_sm_int(s, 0, 9);
            C0[i] = w == 0 ? NAN : w == 1 ? INFINITY : w == 2 ? 0x1p-140f : w == 3 ? -0.0f : w == 4 ? 0x1.8p120f : C0[i];
        }
        if (c->d == D_TOP) C0[i] = 1.5f;  // exponent 0, as the products': its term joins their sum
        if (c->c_f16_edges) {  // fp16 subnormals (one of them a tie: 2.5 * 2^-24), and its top
            static const float e[] = {0x1p-24f, -0x3p-24f, 0x2.8p-24f, 0x1.ff8p-15f, 65504.0f, -65519.0f, 65520.0f,
                                      0x1.006p0f, -0x1.002p+3f};  // the last two: ties of fp16
            const int w = tu_sm_int(s, 0, 2 * (int)(sizeof e / sizeof e[0]) - 1);
            if (w < (int)(sizeof e / sizeof e[0])) C0[i] = e[w];
        }
    }
    mm__engine_plan p;
    cr_assert_eq(mm__engine_plan_make(&p, &A, &B, M, N, K, &o, msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(mm__engine_fast_covers(&p, &o), "%s %s x %s: not taken by the fast kernel", c->acc, c->fa, c->fb);
    char what[200];
    snprintf(what, sizeof what, "%s %s x %s dist %d", c->acc, c->fa, c->fb, (int)c->d);
    tu_engine_fast_vs_model(mm__engine_fast_run, &A, &B, M, N, K, &o, C0, what);
    free(a), free(b), free(C0), free(sa), free(sb);
}

// The kinds the kernel covers, as (engine spec, A format, B format).
static const char *const kinds[][3] = {
    {"hopper:wgmma", "e4m3", "e4m3"}, {"hopper:wgmma", "e5m2", "e4m3"}, {"ada:mma", "e4m3", "e4m3"},
    {"ada:mma", "e5m2", "e5m2"},      {"ada:mma:k16", "e4m3", "e5m2"},  {"hopper:wgmma", "bf16", "bf16"},
    {"ampere:mma", "bf16", "bf16"},   {"ampere:mma:k8", "bf16", "bf16"}, {"hopper:wgmma", "fp16", "fp16"},
    {"ampere:mma", "fp16", "fp16"},   {"blackwell:mma", "bf16", "bf16"}, {"volta:mma", "fp16", "fp16"},
    // f16 C/D (issue 37)
    {"hopper:wgmma:f16", "e4m3", "e4m3"}, {"hopper:wgmma:f16", "e5m2", "e4m3"}, {"ada:mma:f16", "e4m3", "e4m3"},
    {"hopper:wgmma:f16", "fp16", "fp16"}, {"ampere:mma:f16", "fp16", "fp16"}, {"ampere:mma:k8:f16", "fp16", "fp16"},
    {"volta:mma:f16", "fp16", "fp16"},    {"turing:mma:f16", "fp16", "fp16"}, {"blackwell:mma:f16", "fp16", "fp16"},
};
enum { NKINDS = sizeof kinds / sizeof kinds[0] };

Test(mm_engine, random_operands_every_kind) {
    uint64_t s = tu_seed("mm_engine", "random_operands_every_kind", 2101);
    const size_t shapes[][3] = {{5, 7, 32}, {17, 40, 100}, {33, 65, 96}, {8, 33, 7}, {64, 64, 256}};
    for (int q = 0; q < NKINDS; q++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
            for (int d = D_NORMAL; d <= D_CANCEL; d++) {
                const ecase c = {kinds[q][0], kinds[q][1], kinds[q][2], shapes[sh][0], shapes[sh][1], shapes[sh][2],
                                 (dist)d, sh % 2 == 1, sh % 3 == 1, 0, 1.0f, 0.0f, false, false};
                check(&c, &s);
            }
}

Test(mm_engine, special_operands) {
    uint64_t s = tu_seed("mm_engine", "special_operands", 2102);
    for (int q = 0; q < NKINDS; q++)
        for (int rep = 0; rep < 4; rep++) {
            const ecase c = {kinds[q][0], kinds[q][1], kinds[q][2], 19, 37, 64 + 13 * (size_t)rep,
                             rep == 3 ? D_RANGE : D_SPECIAL,
                             rep == 1, rep == 2, 0, 1.0f, 0.0f, false, false};
            check(&c, &s);
        }
}

// A step's sum with C's term past int32 (16 products at the top of a 25-bit alignment plus C's
// term: 2.13e9 + 5e7), which the kernel must hand to the scalar model.
Test(mm_engine, sum_past_int32) {
    uint64_t s = tu_seed("mm_engine", "sum_past_int32", 2107);
    static const char *const wide[][3] = {{"hopper:wgmma", "bf16", "bf16"}, {"hopper:wgmma", "fp16", "fp16"},
                                          {"blackwell:mma", "bf16", "bf16"}, {"hopper:wgmma:f16", "fp16", "fp16"}};
    for (int q = 0; q < 4; q++)
        for (size_t K = 16; K <= 32; K += 16) {
            const ecase c = {wide[q][0], wide[q][1], wide[q][2], 9, 70, K, D_TOP, false, false, 0, 1.0f, 1.0f, false,
                             false};
            check(&c, &s);
        }
}

// The products' scaling as an addition to their exponent fields at its edges, every kind
// (tu_engine_scaling_edges). Dropping the shift's clamp, the multiplying loop or the prescale's
// bound in scaled_mm_cpu_engine.c fails here.
Test(mm_engine, products_scaled_by_exponent_addition) {
    uint64_t s = tu_seed("mm_engine", "products_scaled_by_exponent_addition", 2108);
    for (int q = 0; q < NKINDS; q++)
        tu_engine_scaling_edges(mm__engine_fast_run, kinds[q][0], kinds[q][1], kinds[q][2], &s);
}

Test(mm_engine, promote_block_scales_alpha_beta) {
    uint64_t s = tu_seed("mm_engine", "promote_block_scales_alpha_beta", 2103);
    char spec[64];
    for (int q = 0; q < NKINDS; q++) {
        // promote=N: the kind's k times 2
        mm_acc acc;
        cr_assert_eq(mm_acc_from_name(&acc, kinds[q][0], NULL, 0), MM_OK);
        snprintf(spec, sizeof spec, "%s:promote=64", kinds[q][0]);
        const ecase c1 = {spec, kinds[q][1], kinds[q][2], 9, 35, 200, D_WIDE, false, true, 0, 1.0f, 0.0f, false, false};
        check(&c1, &s);
        const ecase c2 = {kinds[q][0], kinds[q][1], kinds[q][2], 9, 35, 150, D_NORMAL, true, false, 32, 0.5f, 0.0f,
                          false, false};
        check(&c2, &s);
        const ecase c3 = {kinds[q][0], kinds[q][1], kinds[q][2], 11, 70, 90, D_NORMAL, false, false, 0, 2.0f, 0.75f,
                          false, false};
        check(&c3, &s);
    }
}

Test(mm_engine, c_in_the_chain) {
    uint64_t s = tu_seed("mm_engine", "c_in_the_chain", 2104);
    for (int q = 0; q < NKINDS; q++)
        for (int sp = 0; sp < 2; sp++) {
            const ecase c = {kinds[q][0], kinds[q][1], kinds[q][2], 13, 40, 70, sp ? D_SPECIAL : D_WIDE, false, false,
                             0, 1.0f, 1.0f, sp == 1, false};
            check(&c, &s);
        }
}

// Issue 37: the f16-D kinds at fp16's edges, fast kernel against the model bit for bit (outputs
// on fp16's subnormal grid, C terms that are fp16 subnormals, sums that round to 65504 or
// overflow to inf, ties of the final rounding, C in the chain rounded to fp16 first), with K
// spanning several instructions so that each step's D (an fp16 value) is the next step's C.
// Breaking the f16 path by one bit (the sticky bit of the round to odd, fp16's emin for C's
// exponent, the rounding's grid or its inf threshold, the first C's rounding) fails here.
Test(mm_engine, f16_d_edges) {
    uint64_t s = tu_seed("mm_engine", "f16_d_edges", 2105);
    static const char *const f16k[][3] = {{"hopper:wgmma:f16", "e4m3", "e4m3"}, {"ada:mma:f16", "e5m2", "e4m3"},
                                          {"hopper:wgmma:f16", "fp16", "fp16"}, {"ampere:mma:f16", "fp16", "fp16"},
                                          {"volta:mma:f16", "fp16", "fp16"}};
    for (size_t q = 0; q < sizeof f16k / sizeof f16k[0]; q++)
        for (int d = D_F16_TINY; d <= D_F16_BIG; d++)
            for (int chain = 0; chain < 2; chain++) {
                const ecase c = {f16k[q][0], f16k[q][1], f16k[q][2], 21, 37, 160, (dist)d, chain == 1, false, 0, 1.0f,
                                 chain ? 1.0f : 0.0f, false, chain == 1};
                check(&c, &s);
            }
}

// One D = A B + C (M = N = 1, C in the chain) by the fast kernel, the model and mm_ref; all three
// must give want's bits.
static void f16_case(const char *acc, const char *fmt, const float *a, const float *b, size_t K, float c, float want) {
    mm_operand A = {.x = a, .ld = K}, B = {.x = b, .ld = 1};
    cr_assert_eq(fmt_from_name(&A.fmt, fmt), FMT_OK);
    B.fmt = A.fmt;
    mm_opts o;
    mm_opts_default(&o);
    cr_assert_eq(mm_acc_from_name(&o.acc, acc, NULL, 0), MM_OK);
    o.beta = 1.0f;
    float d[3] = {c, c, c};
    cr_assert_eq(mm__engine_fast_run(&d[0], 1, &A, &B, 1, 1, K, &o), MM_OK);
    cr_assert_eq(mm__engine_run(&d[1], 1, &A, &B, 1, 1, K, &o), MM_OK);
    cr_assert_eq(mm_ref(&d[2], 1, &A, &B, 1, 1, K, &o), MM_OK);
    static const char *const who[3] = {"fast kernel", "model", "mm_ref"};
    for (int i = 0; i < 3; i++)
        cr_assert(!memcmp(&d[i], &want, 4), "%s on %s: %s gives %a, expected %a", acc, fmt, who[i], d[i], want);
}

// Cases the random ones rarely reach: C's exponent in an f16 chain is at least fp16's emin
// (-14), which decides where small products are truncated (C = 2^-23, products 2^-25 and
// 2^-48: at 2^-14's grid the second is dropped and the tie 2.5 * 2^-24 goes to even, 2^-23; at
// C's own exponent it would survive and give 3 * 2^-24); a negative sum that rounds to zero in
// fp16 gives +0; C rounded to fp16 before the chain (65519 -> 65504, a tie to even).
Test(mm_engine, f16_d_cases) {
    float a[16] = {0x1p-12f, 0x1p-24f}, b[16] = {0x1p-13f, 0x1p-24f};
    f16_case("hopper:wgmma:f16", "fp16", a, b, 16, 0x1p-23f, 0x1p-23f);
    f16_case("ampere:mma:f16", "fp16", a, b, 16, 0x1p-23f, 0x1p-23f);
    float n[16] = {-0x1p-13f}, m[16] = {0x1p-13f};
    f16_case("hopper:wgmma:f16", "fp16", n, m, 16, 0.0f, 0.0f);  // -2^-26: +0
    f16_case("hopper:wgmma:f16", "fp16", n, m, 16, -0.0f, 0.0f);
    float z[32] = {0};
    f16_case("hopper:wgmma:f16", "e4m3", z, z, 32, 65519.0f, 65504.0f);
    f16_case("hopper:wgmma:f16", "e4m3", z, z, 32, 0x1.006p0f, 0x1.008p0f);  // tie: up to even
    f16_case("hopper:wgmma:f16", "e4m3", z, z, 32, 0x1.002p0f, 0x1p0f);      // tie: down to even
}

// Issue 34, through mm_cpu and mm_ref (D = A·B + C with C in the chain): an AMD f32 instruction
// of k = 1 keeps -1·0 + (-0) = -0, where the default k = 4 pads K = 1 with three zero products
// (+0, as a kernel padding K would give); a tf32 operand whose NaN payload lies only in the 13
// dropped bits (0x7f800001) is read as inf, as MMA-Sim reads it.
static float run_1x1(const char *acc, const char *fa, uint32_t abits, float b, float c) {
    float a;
    memcpy(&a, &abits, 4);
    mm_operand A = {.x = &a, .ld = 1}, B = {.x = &b, .ld = 1};
    fmt_from_name(&A.fmt, fa);
    B.fmt = A.fmt;
    mm_opts o;
    mm_opts_default(&o);
    char msg[300];
    cr_assert_eq(mm_acc_from_name(&o.acc, acc, msg, sizeof msg), MM_OK, "%s", msg);
    o.beta = 1.0f;
    float d_cpu = c, d_ref = c;
    cr_assert_eq(mm_validate(&A, &B, 1, 1, 1, &o, msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert_eq(mm_cpu(&d_cpu, 1, &A, &B, 1, 1, 1, &o), MM_OK);
    cr_assert_eq(mm_ref(&d_ref, 1, &A, &B, 1, 1, 1, &o), MM_OK);
    uint32_t u1, u2;
    memcpy(&u1, &d_cpu, 4), memcpy(&u2, &d_ref, 4);
    // AMD NaN payloads are the host fma's (test_engine.c compares NaN-ness only there too).
    cr_assert(u1 == u2 || (isnan(d_cpu) && isnan(d_ref)), "%s: mm_cpu %08x mm_ref %08x", acc, u1, u2);
    return d_cpu;
}

Test(mm_engine, k_and_tf32_bits_through_the_matmul) {
    const float m1 = -1.0f;
    uint32_t m1b;
    memcpy(&m1b, &m1, 4);
    float d = run_1x1("cdna1:mfma:k1", "fp32", m1b, 0.0f, -0.0f);
    cr_assert(d == 0.0f && signbit(d), "cdna1:mfma:k1: %a", d);
    d = run_1x1("cdna1:mfma", "fp32", m1b, 0.0f, -0.0f);
    cr_assert(d == 0.0f && !signbit(d), "cdna1:mfma (k4, padded): %a", d);
    d = run_1x1("hopper:wgmma", "fp32", 0x7f800001u, 1.0f, 0.0f);
    cr_assert(isinf(d) && d > 0, "tf32 0x7f800001: %a", d);
    d = run_1x1("cdna3:mfma", "fp32", 0x7f800001u, 1.0f, 0.0f);  // f32 FMA: used whole, a NaN
    cr_assert(isnan(d), "cdna3 f32: %a", d);
}
