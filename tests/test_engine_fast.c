// test_engine_fast.c: the fast CPU kernels of the AMD, the block-scaled and the f8f6f4 matrix-engine kinds
// (kernels/engine/scaled_mm_cpu_engine_amd.c, scaled_mm_cpu_engine_block.c) equal the scalar
// model (one dot product at a time through engine_model.c) bit for bit, for every kind they
// cover: random operands of several distributions and shapes (K not a multiple of k, edges of
// the tiles), promote=N, block scales (segments, or the instruction's own scales), alpha/beta
// and C in the chain, subnormal, zero, largest, NaN and inf operands and C values (the kernels
// hand what they cannot do exactly to the scalar model). The raw y of each kernel (before the
// output rounding) is compared with the model's NaN payloads included; then mm_cpu with mm_ref.
// The seed is printed; FPLAB_SEED replays.
#include <criterion/criterion.h>
#include <float.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/round.h"
#include "kernels/scaled_mm.h"
#include "kernels/scaled_mm_internal.h"
#include "test_engine_util.h"
#include "test_util.h"

typedef enum { SC_NONE, SC_POW2, SC_UE4M3, SC_WIDE, SC_LOW } scales;

typedef struct {
    const char *acc;       // engine spec
    const char *fa, *fb;   // operand formats
    size_t M, N, K;
    dist d;
    bool trans_a, trans_b;
    int block_k;           // > 0: block scales on both operands, of the kind sc
    scales sc;
    float alpha, beta;     // beta = 1, alpha = 1, no scales: C is the chain's first C
    bool c_special;        // C holds NaN, inf, subnormal values
} ecase;

typedef enum { K_AMD, K_BLOCK } kernel;

static float scale_draw(uint64_t *s, scales sc) {
    switch (sc) {
    case SC_POW2: return ldexpf(1.0f, tu_sm_int(s, -4, 4));
    case SC_WIDE: return ldexpf(1.0f, tu_sm_int(s, -127, 127));
    case SC_LOW: return ldexpf(1.0f, tu_sm_int(s, -127, -118));  // ue8m0's smallest
    case SC_UE4M3: {  // an e4m3 value >= 0: subnormals, zero and the largest too
        const int w = tu_sm_int(s, 0, 19);
        if (w == 0) return 0.0f;
        if (w == 1) return 448.0f;
        if (w == 2) return ldexpf((float)tu_sm_int(s, 1, 7), -9);
        return ldexpf(1.0f + (float)tu_sm_int(s, 0, 7) / 8.0f, tu_sm_int(s, -6, 5));
    }
    default: return 1.0f;
    }
}

// The kernel's y against the scalar model's, bit for bit, and mm_cpu against mm_ref; also that
// the kernel takes the case.
static void check(kernel kn, const ecase *c, uint64_t *s) {
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
    // D_CANCEL: A's signs alternate along K, B's do not: the products cancel.
    for (size_t i = 0; i < K * N; i++) b[i] = draw(s, &B.fmt, c->d, c->d == D_CANCEL ? 0 : i / N);
    float *sa = NULL, *sb = NULL;
    if (c->block_k) {
        const size_t nb = (K + (size_t)c->block_k - 1) / (size_t)c->block_k;
        sa = malloc(M * nb * sizeof *sa), sb = malloc(nb * N * sizeof *sb);
        for (size_t i = 0; i < M * nb; i++) sa[i] = scale_draw(s, c->sc);
        for (size_t i = 0; i < nb * N; i++) sb[i] = scale_draw(s, c->sc);
        if (c->d == D_SPECIAL) sa[M * nb / 2] = NAN;  // a NaN scale: the model's canonical NaN
        A.scales = sa, B.scales = sb, A.block_k = B.block_k = c->block_k;
    }
    for (size_t i = 0; i < M * N; i++) {
        C0[i] = (float)(tu_sm_unif(s) * 8 - 4);
        if (c->c_special) {
            const int w = tu_sm_int(s, 0, 9);
            // ... and a C some 20 to 30 binades below the products (CDNA3 fp8 drops one more
            // than 25 below; a negative one floored to 24 bits is -1 unit), either sign
            const float small = ldexpf((float)(1.0 + tu_sm_unif(s)), -tu_sm_int(s, 20, 30)) * (w % 2 ? -1.0f : 1.0f);
            C0[i] = w == 0 ? NAN : w == 1 ? INFINITY : w == 2 ? 0x1p-140f : w == 3 ? -0.0f : w == 4 ? 0x1.8p120f
                  : w == 5 ? 0x1p-126f : w <= 7 ? small : C0[i];
        }
        if (c->d == D_FLUSH && i % 2)  // C in [2^-127, 2^-126), either sign: CDNA2 flushes it
            C0[i] = ldexpf((float)(1.0 + tu_sm_unif(s)), -127) * (i % 4 == 1 ? -1.0f : 1.0f);
    }
    mm__engine_plan p;
    cr_assert_eq(mm__engine_plan_make(&p, &A, &B, M, N, K, &o, msg, sizeof msg), MM_OK, "%s", msg);
    const bool covers = kn == K_AMD ? mm__engine_amd_covers(&p, &o) : mm__engine_block_covers(&p, &o);
    cr_assert(covers, "%s %s x %s: not taken by the fast kernel", c->acc, c->fa, c->fb);
    char what[200];
    snprintf(what, sizeof what, "%s %s x %s dist %d", c->acc, c->fa, c->fb, (int)c->d);
    tu_engine_fast_vs_model(kn == K_AMD ? mm__engine_amd_run : mm__engine_block_run, &A, &B, M, N, K, &o, C0, what);
    free(a), free(b), free(C0), free(sa), free(sb);
}

// --- AMD

static const char *const amd_kinds[][3] = {
    {"cdna3:mfma", "bf16", "bf16"},         {"cdna3:mfma:k8", "bf16", "bf16"},
    {"cdna3:mfma:k4", "bf16", "bf16"},      {"cdna3:mfma", "fp16", "fp16"},
    {"cdna3:mfma:k4", "fp16", "fp16"},      {"cdna3:mfma", "e4m3fnuz", "e4m3fnuz"},
    {"cdna3:mfma", "e5m2fnuz", "e4m3fnuz"}, {"cdna3:mfma:k16", "e5m2fnuz", "e5m2fnuz"},
    {"cdna2:mfma", "fp16", "fp16"},         {"cdna2:mfma", "bf16", "bf16"},
    {"cdna2:mfma:k2", "bf16", "bf16"},      {"cdna2:mfma:k4", "fp16", "fp16"},
    {"cdna1:mfma", "fp16", "fp16"},         {"cdna1:mfma", "bf16", "bf16"},
    {"cdna1:mfma:k2", "bf16", "bf16"},
};
enum { NAMD = sizeof amd_kinds / sizeof amd_kinds[0] };

Test(engine_fast, amd_random_operands) {
    uint64_t s = tu_seed("engine_fast", "amd_random_operands", 3701);
    const size_t shapes[][3] = {{5, 7, 32}, {17, 40, 100}, {33, 65, 96}, {8, 33, 7}, {36, 40, 192}};
    for (int q = 0; q < NAMD; q++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
            for (int d = D_NORMAL; d <= D_CANCEL; d++) {
                const ecase c = {amd_kinds[q][0], amd_kinds[q][1], amd_kinds[q][2], shapes[sh][0], shapes[sh][1],
                                 shapes[sh][2], (dist)d, sh % 2 == 1, sh % 3 == 1, 0, SC_NONE, 1.0f, 0.0f, false};
                check(K_AMD, &c, &s);
            }
}

Test(engine_fast, amd_special_and_tiny_operands) {
    uint64_t s = tu_seed("engine_fast", "amd_special_and_tiny_operands", 3702);
    for (int q = 0; q < NAMD; q++)
        for (int rep = 0; rep < 5; rep++) {
            const ecase c = {amd_kinds[q][0], amd_kinds[q][1], amd_kinds[q][2], 19, 37, 64 + 13 * (size_t)rep,
                             rep == 3 ? D_TINY : rep == 4 ? D_RANGE : D_SPECIAL, rep == 1, rep == 2, 0, SC_NONE,
                             1.0f, 0.0f, false};
            check(K_AMD, &c, &s);
        }
}

Test(engine_fast, amd_promote_block_scales_alpha_beta) {
    uint64_t s = tu_seed("engine_fast", "amd_promote_block_scales_alpha_beta", 3703);
    char spec[64];
    for (int q = 0; q < NAMD; q++) {
        snprintf(spec, sizeof spec, "%s:promote=64", amd_kinds[q][0]);
        const ecase c1 = {spec, amd_kinds[q][1], amd_kinds[q][2], 9, 35, 200, D_WIDE, false, true, 0, SC_NONE,
                          1.0f, 0.0f, false};
        check(K_AMD, &c1, &s);
        const ecase c2 = {amd_kinds[q][0], amd_kinds[q][1], amd_kinds[q][2], 9, 35, 150, D_NORMAL, true, false, 32,
                          SC_POW2, 0.5f, 0.0f, false};
        check(K_AMD, &c2, &s);
        const ecase c3 = {amd_kinds[q][0], amd_kinds[q][1], amd_kinds[q][2], 11, 70, 90, D_NORMAL, false, false, 0,
                          SC_NONE, 2.0f, 0.75f, false};
        check(K_AMD, &c3, &s);
    }
}

Test(engine_fast, amd_c_in_the_chain) {
    uint64_t s = tu_seed("engine_fast", "amd_c_in_the_chain", 3704);
    for (int q = 0; q < NAMD; q++)
        for (int sp = 0; sp < 4; sp++) {
            const dist d = sp == 0 ? D_WIDE : sp == 1 ? D_SPECIAL : sp == 2 ? D_TINY : D_CANCEL;
            const ecase c = {amd_kinds[q][0], amd_kinds[q][1], amd_kinds[q][2], 13, 40, 70, d, false, false, 0,
                             SC_NONE, 1.0f, 1.0f, sp >= 1};
            check(K_AMD, &c, &s);
        }
}

// A case of one AMD kind built by its test: the kind's options with beta = 1 (C is the chain's
// first C), A (M x K) and B (K x N) of its formats over arrays to fill, C0 (M x N).
typedef struct {
    const char *const *kind;  // engine, A's format, B's format
    size_t M, N, K;
    mm_opts o;
    mm_operand A, B;
    float *a, *b, *C0;
} amd_case;

static amd_case amd_case_make(const char *const kind[3], size_t M, size_t N, size_t K) {
    amd_case c = {.kind = kind, .M = M, .N = N, .K = K};
    mm_opts_default(&c.o);
    char msg[300];
    cr_assert_eq(mm_acc_from_name(&c.o.acc, kind[0], msg, sizeof msg), MM_OK, "%s", msg);
    c.o.beta = 1.0f;
    c.a = malloc(M * K * sizeof *c.a), c.b = malloc(K * N * sizeof *c.b), c.C0 = malloc(M * N * sizeof *c.C0);
    c.A = (mm_operand){.x = c.a, .ld = K}, c.B = (mm_operand){.x = c.b, .ld = N};
    cr_assert_eq(fmt_from_name(&c.A.fmt, kind[1]), FMT_OK);
    cr_assert_eq(fmt_from_name(&c.B.fmt, kind[2]), FMT_OK);
    return c;
}

// The fast kernel takes the case and equals the scalar model (tu_engine_fast_vs_model); frees it.
static void amd_case_check(amd_case *c, const char *what) {
    mm__engine_plan p;
    char msg[300], label[200];
    cr_assert_eq(mm__engine_plan_make(&p, &c->A, &c->B, c->M, c->N, c->K, &c->o, msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(mm__engine_amd_covers(&p, &c->o), "%s: not taken by the fast kernel", c->kind[0]);
    snprintf(label, sizeof label, "%s %s x %s, %s", c->kind[0], c->kind[1], c->kind[2], what);
    tu_engine_fast_vs_model(mm__engine_amd_run, &c->A, &c->B, c->M, c->N, c->K, &c->o, c->C0, label);
    free(c->a), free(c->b), free(c->C0);
}

// CDNA3 outputs outside float32's normal range, where the kernel's rounding with C hands the lane
// to the scalar model: rows of A all zero with subnormal C (D = C, on float32's subnormal grid)
// and min-normal C; rows and columns of the largest in-range operands with C = FLT_MAX (bf16: a
// group's sum of 8 products of 2^100 is FLT_MAX's half unit, so D rounds to inf); elsewhere
// ordinary values. C is the chain's first C (beta = 1).
Test(engine_fast, amd_results_outside_the_normals) {
    static const char *const kinds[][3] = {{"cdna3:mfma", "bf16", "bf16"},
                                           {"cdna3:mfma:k8", "bf16", "bf16"},
                                           {"cdna3:mfma", "fp16", "fp16"},
                                           {"cdna3:mfma", "e4m3fnuz", "e4m3fnuz"}};
    const size_t M = 12, N = 40, K = 48;
    for (size_t q = 0; q < sizeof kinds / sizeof kinds[0]; q++) {
        amd_case c = amd_case_make(kinds[q], M, N, K);
        float *a = c.a, *b = c.b, *C0 = c.C0;
        // the largest operand inside the kernel's exact range (bf16: 2^50), or the format's max
        const float big = strcmp(kinds[q][1], "bf16") ? (float)c.A.fmt.max : 0x1p50f;
        for (size_t r = 0; r < M; r++)
            for (size_t k = 0; k < K; k++)
                a[r * K + k] = r % 3 == 0   ? 0.0f
                               : r % 3 == 1 ? big
                                            : (k % 2 ? -1.0f : 1.0f) * (1.0f + (float)(k % 8) / 8);
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < N; j++) b[k * N + j] = j % 5 == 0 ? big : 1.0f + (float)(j % 8) / 8;
        for (size_t r = 0; r < M; r++)
            for (size_t j = 0; j < N; j++) {
                const float sub = ldexpf(1.0f + (float)(j % 7) / 8, -140 + (int)(j % 9)) * (j % 2 ? -1.0f : 1.0f);
                C0[r * N + j] = r % 3 == 0 ? (j % 4 == 3 ? 0x1p-126f : sub)
                              : r % 3 == 1 ? (j % 5 == 0 ? FLT_MAX : 0x1p100f) : 1.0f;
            }
        amd_case_check(&c, "results outside the normals");
    }
}

// CDNA3's rounding with C where each of its exact steps is needed (the AVX-512 lanes split the
// group sum into its low bits and the rest, two-sum it with C floored, and floor C scaled down
// toward -inf): fp16 groups of 8 same-sign products near 4, odd and even (sums past 2^28 with
// bit 4 set, 25 significant bits); groups whose two large products cancel exactly, leaving C
// floored alone, with C = -2^-149 (floored at 2^(E - 24) it is -1 unit there, not -0); C zero,
// tiny, comparable to the sums with low bits, far above them, and negative.
Test(engine_fast, amd_rounding_with_c_at_its_edges) {
    static const char *const kinds[][3] = {{"cdna3:mfma", "fp16", "fp16"},
                                           {"cdna3:mfma:k4", "fp16", "fp16"},
                                           {"cdna3:mfma", "bf16", "bf16"},
                                           {"cdna3:mfma", "e4m3fnuz", "e4m3fnuz"}};
    const size_t M = 16, N = 48, K = 64;
    const fmt_round_opts ro = {.mode = FMT_RNE, .overflow = FMT_SATURATE};
    for (size_t q = 0; q < sizeof kinds / sizeof kinds[0]; q++) {
        amd_case c = amd_case_make(kinds[q], M, N, K);
        const double big = !strcmp(kinds[q][1], "bf16") ? 0x1p50 : !strcmp(kinds[q][1], "fp16") ? 0x1p15 : 0x1p7;
        for (size_t r = 0; r < M; r++)
            for (size_t k = 0; k < K; k++) {
                const double near2 = 2.0 - 0x1p-10 * (double)(1 + (r + k) % 5);
                const double v = r % 4 == 0   ? near2
                                 : r % 4 == 1 ? (k % 8 < 2 ? big : 0x1p-6)
                                 : r % 4 == 2 ? (k % 2 ? -1.0 : 1.0) * (1.0 + (double)(k % 8) / 8)
                                              : 0.0;
                c.a[r * K + k] = (float)fmt_round1(&c.A.fmt, v, &ro);
            }
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < N; j++) {
                const double near2 = 2.0 - 0x1p-10 * (double)(1 + (j + 3 * k) % 7);
                const double v = j % 2 == 0 && k % 8 < 2 ? (k % 8 ? -big : big) : near2;
                c.b[k * N + j] = (float)fmt_round1(&c.B.fmt, v, &ro);
            }
        for (size_t r = 0; r < M; r++)
            for (size_t j = 0; j < N; j++) {
                const float odd = 1.0f + 0x1p-23f * (float)(2 * j + 1);
                static const float cs[6] = {0.0f, -0x1p-149f, 0x1p-149f, 0x1p5f, 0x1p40f, -0x1.8p-3f};
                const int w = (int)(j / 2 % 6);
                c.C0[r * N + j] = w == 3 || w == 4 ? cs[w] * odd * (r % 2 ? -1.0f : 1.0f) : cs[w];
            }
        amd_case_check(&c, "rounding with C");
    }
}

// Zeros stay in the fast kernel: rows of A that are zero for a group or for all of K (fp8
// gradients flushed by their cast, padding), with C = 0 and with C = -0, against columns of
// ordinary values and (bf16) of 2^22, give D = +0 in the lanes (the model's exact zero sum), not
// a hand-off of the output to the scalar model, which would cost a training under these kinds its
// speed. The bits are the model's as everywhere.
Test(engine_fast, amd_zero_groups_stay_in_the_lanes) {
    static const char *const kinds[][3] = {{"cdna3:mfma", "bf16", "bf16"},
                                           {"cdna3:mfma", "fp16", "fp16"},
                                           {"cdna3:mfma", "e4m3fnuz", "e4m3fnuz"},
                                           {"cdna3:mfma:k16", "e5m2fnuz", "e5m2fnuz"}};
    const size_t M = 12, N = 64, K = 96;
    for (size_t q = 0; q < sizeof kinds / sizeof kinds[0]; q++)
        for (int negz = 0; negz < 2; negz++) {
            amd_case c = amd_case_make(kinds[q], M, N, K);
            // rows: all zero; zero in the first half of K; zero in every other group of 16
            for (size_t r = 0; r < M; r++)
                for (size_t k = 0; k < K; k++)
                    c.a[r * K + k] = r % 3 == 0 || (r % 3 == 1 && k < K / 2) || (r % 3 == 2 && k / 16 % 2)
                                         ? 0.0f
                                         : (k % 2 ? -1.0f : 1.0f) * (1.0f + (float)(k % 4) / 4);
            // bf16: columns of 2^22 too, where a zero row's exponent sum is -104 (powers of
            // 2^-1 and 2^-8 relative to it: wrapped fields would make them infinite)
            for (size_t i = 0; i < K * N; i++)
                c.b[i] = q == 0 && i % N % 4 == 3 ? 0x1p22f : 1.0f + (float)(i % 8) / 8;
            for (size_t i = 0; i < M * N; i++) c.C0[i] = negz ? -0.0f : 0.0f;
            // the path first (amd_case_check frees the case)
            mm_path path = {.kernel = "none"};
            mm_opts o = c.o;
            o.path = &path;
            float *D = malloc(M * N * sizeof *D);
            memcpy(D, c.C0, M * N * sizeof *D);
            cr_assert_eq(mm_cpu(D, N, &c.A, &c.B, M, N, K, &o), MM_OK);
            cr_assert_str_eq(path.kernel, "engine-amd", "%s: kernel %s", kinds[q][0], path.kernel);
            cr_assert_eq(path.model_outputs, 0, "%s %s, C %s0: %zu of %zu outputs left to the scalar model",
                         kinds[q][0], kinds[q][1], negz ? "-" : "+", (size_t)path.model_outputs, M * N);
            free(D);
            amd_case_check(&c, negz ? "zero groups, C -0" : "zero groups, C +0");
        }
}

// CDNA2's flushes at 2^-126 (the leaves, the tree's nodes, the accumulator, the first C): bf16
// products and sums near 2^-126, C starting at zero or (in the chain) just below 2^-126, where a
// threshold one bit off (2^-127) changes the outputs. CDNA1 (no flushes) alongside.
Test(engine_fast, amd_flush_threshold) {
    uint64_t s = tu_seed("engine_fast", "amd_flush_threshold", 3705);
    static const char *const fk[] = {"cdna2:mfma", "cdna2:mfma:k2", "cdna1:mfma"};
    for (size_t q = 0; q < sizeof fk / sizeof fk[0]; q++)
        for (int sh = 0; sh < 2; sh++) {
            const ecase c = {fk[q], "bf16", "bf16", 13 + 8 * (size_t)sh, 40, 70 + 64 * (size_t)sh, D_FLUSH, sh == 1,
                             false, 0, SC_NONE, 1.0f, sh ? 1.0f : 0.0f, false};
            check(K_AMD, &c, &s);
        }
}

// --- block-scaled (the instruction takes the scales)

typedef struct {
    const char *acc, *fa, *fb;
    int block;
    scales sc;
} bkind;

static const bkind blk_kinds[] = {
    {"blackwell:tcgen05", "e4m3", "e4m3", 32, SC_POW2},  {"blackwell:tcgen05", "e5m2", "e4m3", 32, SC_POW2},
    {"blackwell:tcgen05", "e3m2", "e2m3", 32, SC_POW2},  {"blackwell:tcgen05", "e2m1", "e4m3", 32, SC_POW2},
    {"rtx-blackwell:mma", "e4m3", "e5m2", 32, SC_POW2},  {"blackwell:tcgen05", "e2m1", "e2m1", 32, SC_POW2},
    {"blackwell:tcgen05", "e2m1", "e2m1", 16, SC_POW2},  {"blackwell:tcgen05", "e2m1", "e2m1", 16, SC_UE4M3},
    {"rtx-blackwell:mma", "e2m1", "e2m1", 32, SC_UE4M3}, {"rtx-blackwell:mma", "e2m1", "e2m1", 16, SC_POW2},
};
enum { NBLK = sizeof blk_kinds / sizeof blk_kinds[0] };

Test(engine_fast, block_random_operands) {
    uint64_t s = tu_seed("engine_fast", "block_random_operands", 3711);
    const size_t shapes[][3] = {{5, 7, 32}, {17, 40, 100}, {33, 65, 96}, {8, 33, 7}, {36, 40, 192}};
    for (int q = 0; q < NBLK; q++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
            for (int d = D_NORMAL; d <= D_CANCEL; d++) {
                const bkind *b = &blk_kinds[q];
                const ecase c = {b->acc, b->fa, b->fb, shapes[sh][0], shapes[sh][1], shapes[sh][2], (dist)d,
                                 sh % 2 == 1, sh % 3 == 1, b->block, b->sc, 1.0f, 0.0f, false};
                check(K_BLOCK, &c, &s);
            }
}

Test(engine_fast, block_special_operands_and_scales) {
    uint64_t s = tu_seed("engine_fast", "block_special_operands_and_scales", 3712);
    for (int q = 0; q < NBLK; q++)
        for (int rep = 0; rep < 4; rep++) {
            const bkind *b = &blk_kinds[q];
            // rep 3: ue8m0 scales over their whole range (D outside float32's normal range)
            const ecase c = {b->acc, b->fa, b->fb, 19, 37, 64 + 13 * (size_t)rep, rep == 3 ? D_WIDE : D_SPECIAL,
                             rep == 1, rep == 2, b->block, rep == 3 && b->sc == SC_POW2 ? SC_WIDE : b->sc, 1.0f,
                             0.0f, false};
            check(K_BLOCK, &c, &s);
        }
}

Test(engine_fast, block_promote_alpha_beta_c_in_the_chain) {
    uint64_t s = tu_seed("engine_fast", "block_promote_alpha_beta_c_in_the_chain", 3713);
    char spec[64];
    for (int q = 0; q < NBLK; q++) {
        const bkind *b = &blk_kinds[q];
        snprintf(spec, sizeof spec, "%s:promote=128", b->acc);
        const ecase c1 = {spec, b->fa, b->fb, 9, 35, 300, D_WIDE, false, true, b->block, b->sc, 1.0f, 0.0f, false};
        check(K_BLOCK, &c1, &s);
        const ecase c2 = {b->acc, b->fa, b->fb, 11, 70, 90, D_NORMAL, false, false, b->block, b->sc, 2.0f, 0.75f,
                          false};
        check(K_BLOCK, &c2, &s);
        for (int sp = 0; sp < 3; sp++) {
            const dist d = sp == 0 ? D_WIDE : sp == 1 ? D_SPECIAL : D_CANCEL;
            const ecase c3 = {b->acc, b->fa, b->fb, 13, 40, 70 + 40 * (size_t)sp, d, false, false, b->block, b->sc,
                              1.0f, 1.0f, sp >= 1};
            check(K_BLOCK, &c3, &s);
        }
        // ue8m0 scales near 2^-127 on both operands under C in the chain: the products' terms
        // 2^250 below C's (the scaling's shift far below -127, eng_shift_bits)
        if (b->sc == SC_POW2) {
            const ecase c4 = {b->acc, b->fa, b->fb, 13, 40, 70, D_NORMAL, false, false, b->block, SC_LOW, 1.0f, 1.0f,
                              false};
            check(K_BLOCK, &c4, &s);
        }
    }
}

// --- f8f6f4 without scales (the block kernel with unit scales): fp8, fp6 and fp4 operands, an
// f32 or an f16 D, operand scales per block applied at promotion (not ue8m0: the kind without
// scales), promote=N, alpha/beta, C in the chain, and the edges (special, tiny, an f16 D's
// subnormals and overflow).

static const char *const f8f6f4_kinds[][3] = {
    {"blackwell:tcgen05", "e4m3", "e4m3"},     {"blackwell:tcgen05", "e5m2", "e4m3"},
    {"blackwell:tcgen05", "e3m2", "e2m3"},     {"blackwell:tcgen05", "e2m1", "e4m3"},
    {"blackwell:tcgen05", "e2m1", "e2m1"},     {"rtx-blackwell:mma", "e4m3", "e5m2"},
    {"rtx-blackwell:mma", "e2m3", "e2m1"},     {"blackwell:tcgen05:f16", "e4m3", "e4m3"},
    {"blackwell:tcgen05:f16", "e5m2", "e3m2"}, {"rtx-blackwell:mma:f16", "e2m1", "e5m2"},
};
enum { NF864 = sizeof f8f6f4_kinds / sizeof f8f6f4_kinds[0] };

Test(engine_fast, f8f6f4_random_and_edge_operands) {
    uint64_t s = tu_seed("engine_fast", "f8f6f4_random_and_edge_operands", 3721);
    const size_t shapes[][3] = {{5, 7, 32}, {17, 40, 100}, {33, 65, 96}, {8, 33, 7}, {36, 40, 192}};
    for (int q = 0; q < NF864; q++) {
        const char *const *f = f8f6f4_kinds[q];
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
            for (int d = D_NORMAL; d <= D_F16_BIG; d++) {
                const ecase c = {f[0], f[1], f[2], shapes[sh][0], shapes[sh][1], shapes[sh][2], (dist)d,
                                 sh % 2 == 1, sh % 3 == 1, 0, SC_NONE, 1.0f, 0.0f, false};
                check(K_BLOCK, &c, &s);
            }
    }
}

// f8f6f4's f32 D in int32 lanes (out_f32_int) where the sum fits, in double lanes where it does
// not: 32 products of 1.875 * 1.875 (e4m3) or 1.75 * 1.75 (e5m2) with one sign, terms of 3.5 or
// 3.06 times 2^25, sum past 2^31, beside lanes of mixed signs that fit; and (e4m3, columns 16
// to 23) 18 such terms, below 2^31, that C = 1.99 in the chain (its term 1.99 * 2^25) takes
// past it. C zero or in the chain. Dropping either of the int32 path's overflow checks fails.
Test(engine_fast, f8f6f4_sum_past_int32) {
    static const char *const fk[][3] = {{"blackwell:tcgen05", "e4m3", "e4m3"},
                                        {"rtx-blackwell:mma", "e5m2", "e5m2"}};
    enum { M = 8, N = 40, K = 96 };
    static float a[M * K], b[K * N], C0[M * N];
    for (int q = 0; q < 2; q++)
        for (int chain = 0; chain < 2; chain++) {
            mm_opts o;
            mm_opts_default(&o);
            cr_assert_eq(mm_acc_from_name(&o.acc, fk[q][0], NULL, 0), MM_OK);
            o.beta = chain ? 1.0f : 0.0f;
            mm_operand A = {.x = a, .ld = K}, B = {.x = b, .ld = N};
            cr_assert_eq(fmt_from_name(&A.fmt, fk[q][1]), FMT_OK);
            cr_assert_eq(fmt_from_name(&B.fmt, fk[q][2]), FMT_OK);
            const float top = q ? 1.75f : 1.875f;  // the largest significand at exponent 0
            for (size_t i = 0; i < M * K; i++) a[i] = i / K % 2 ? top : -top;  // rows of one sign
            for (size_t i = 0; i < K * N; i++) {
                const size_t k = i / N, j = i % N;
                b[i] = j < 16 || k % 3 ? top : -top;
                if (j >= 16 && j < 24) b[i] = k % 32 < 18 ? top : 0.0f;
            }
            for (size_t i = 0; i < M * N; i++) C0[i] = i % N >= 16 && i % N < 24 ? 1.99f : i % 7 == 0 ? 0x1p30f : 1.5f;
            tu_engine_fast_vs_model(mm__engine_block_run, &A, &B, M, N, K, &o, C0, fk[q][1]);
        }
}

// The products' scaling as an addition to their exponent fields at its edges
// (tu_engine_scaling_edges): the CDNA3 fused kinds and f8f6f4 without scales. Dropping the
// multiplying loop or the prescale's bound in scaled_mm_cpu_engine_amd.c or
// scaled_mm_cpu_engine_block.c fails here.
Test(engine_fast, products_scaled_by_exponent_addition) {
    uint64_t s = tu_seed("engine_fast", "products_scaled_by_exponent_addition", 3724);
    for (int q = 0; q < NAMD; q++)
        if (!strncmp(amd_kinds[q][0], "cdna3", 5))
            tu_engine_scaling_edges(mm__engine_amd_run, amd_kinds[q][0], amd_kinds[q][1], amd_kinds[q][2], &s);
    for (int q = 0; q < NF864; q++)
        tu_engine_scaling_edges(mm__engine_block_run, f8f6f4_kinds[q][0], f8f6f4_kinds[q][1], f8f6f4_kinds[q][2], &s);
}

Test(engine_fast, f8f6f4_promote_scales_alpha_beta_c_in_the_chain) {
    uint64_t s = tu_seed("engine_fast", "f8f6f4_promote_scales_alpha_beta_c_in_the_chain", 3722);
    char spec[64];
    for (int q = 0; q < NF864; q++) {
        const char *const *f = f8f6f4_kinds[q];
        snprintf(spec, sizeof spec, "%s:promote=64", f[0]);
        const ecase c1 = {spec, f[1], f[2], 9, 35, 200, D_WIDE, false, true, 0, SC_NONE, 1.0f, 0.0f, false};
        check(K_BLOCK, &c1, &s);
        // ue4m3 values as operand scales per 32 (segments of 32, scales at promotion); fp4 x fp4
        // would take mxf4nvf4 on rtx-blackwell:mma, so fp8 A.
        const ecase c2 = {f[0], "e4m3", f[2], 9, 35, 150, D_NORMAL, true, false, 32, SC_UE4M3, 0.5f, 0.0f, false};
        check(K_BLOCK, &c2, &s);
        const ecase c3 = {f[0], f[1], f[2], 11, 70, 90, D_NORMAL, false, false, 0, SC_NONE, 2.0f, 0.75f, false};
        check(K_BLOCK, &c3, &s);
        for (int sp = 0; sp < 5; sp++) {
            const dist d = sp == 0 ? D_WIDE : sp == 1 ? D_SPECIAL : sp == 2 ? D_CANCEL : sp == 3 ? D_F16_TINY
                                                                                             : D_F16_BIG;
            const ecase c4 = {f[0], f[1], f[2], 13, 40, 70 + 40 * (size_t)sp, d, false, false, 0, SC_NONE, 1.0f,
                              1.0f, sp == 1 || sp == 3};
            check(K_BLOCK, &c4, &s);
        }
    }
}

// An f16 D at fp16's largest value: C in the chain from 65440 to 65564 (the first C rounds to
// fp16: ties to even, inf from 65520) plus products that land on 65504, round to it from below
// 65520 or to inf from 65520; a second instruction subtracts (inf stays inf); both signs.
Test(engine_fast, f8f6f4_f16_d_at_fp16_max) {
    enum { M = 8, N = 32, K = 64 };
    static const char *const accs[] = {"blackwell:tcgen05:f16", "rtx-blackwell:mma:f16"};
    for (size_t q = 0; q < sizeof accs / sizeof accs[0]; q++) {
        mm_opts o;
        mm_opts_default(&o);
        char msg[300];
        cr_assert_eq(mm_acc_from_name(&o.acc, accs[q], msg, sizeof msg), MM_OK, "%s", msg);
        o.beta = 1.0f;
        float a[M * K] = {0}, b[K * N] = {0}, C0[M * N];
        for (int r = 0; r < M; r++) {
            const float sg = r < 4 ? 1.0f : -1.0f;
            a[r * K] = sg * 8.0f * (float)(r % 4), a[r * K + 32] = -sg * 16.0f * (float)(r % 4);
            for (int j = 0; j < N; j++) C0[r * N + j] = sg * (65440.0f + 4.0f * (float)j);
        }
        for (int j = 0; j < N; j++) b[j] = 1.0f, b[32 * N + j] = (float)(j % 2);
        mm_operand A = {.x = a, .ld = K}, B = {.x = b, .ld = N};
        cr_assert_eq(fmt_from_name(&A.fmt, "e4m3"), FMT_OK);
        cr_assert_eq(fmt_from_name(&B.fmt, "e4m3"), FMT_OK);
        mm__engine_plan p;
        cr_assert_eq(mm__engine_plan_make(&p, &A, &B, M, N, K, &o, msg, sizeof msg), MM_OK, "%s", msg);
        cr_assert(p.c_in_chain && mm__engine_block_covers(&p, &o), "%s: not taken by the block kernel", accs[q]);
        tu_engine_fast_vs_model(mm__engine_block_run, &A, &B, M, N, K, &o, C0, accs[q]);
    }
}

// Each panel is packed, and its exponents and flags taken, by the thread whose share of the
// lines holds its first (mm__emu_pack_each): on 1, 3 and 5 threads, with A's and B's panels in
// one thread's share (M and N over several panels, every orientation), CDNA3's and CDNA2's kinds
// (its input flush), a block-scaled one and f8f6f4 without scales against the model.
Test(engine_fast, any_thread_count) {
    uint64_t s = tu_seed("engine_fast", "any_thread_count", 3731);
    static const int threads[] = {1, 3, 5};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
#ifdef _OPENMP
        omp_set_num_threads(threads[t]);
#endif
        for (int o = 0; o < 4; o++) {
            const bool ta = o & 1, tb = o >> 1;
            const ecase cases[] = {
                {"cdna3:mfma", "e4m3fnuz", "e4m3fnuz", 45, 70, 96, D_NORMAL, ta, tb, 0, SC_NONE, 1.0f, 0.0f, false},
                {"cdna2:mfma", "fp16", "fp16", 45, 70, 96, D_FLUSH, ta, tb, 0, SC_NONE, 1.0f, 0.0f, false},
                {"blackwell:tcgen05", "e4m3", "e4m3", 45, 70, 96, D_SPECIAL, ta, tb, 32, SC_POW2, 1.0f, 0.0f, false},
                {"blackwell:tcgen05", "e5m2", "e4m3", 45, 70, 96, D_NORMAL, ta, tb, 0, SC_NONE, 1.0f, 0.0f, false},
            };
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
                check(c < 2 ? K_AMD : K_BLOCK, &cases[c], &s);
        }
    }
}
