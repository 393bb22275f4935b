// engine_table.c: the matrix engines as data (engine.h): one row per instruction kind of each
// architecture, with the widths, groupings and special cases MMA-Sim (arXiv 2511.10909)
// derived, and its reference implementation encodes, for each. Rows of one engine are in the
// order mm_engine_find tries them: the largest k of a kind first.
// Constraints: constant data built by the compiler; no global state.
#include "kernels/engine.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum {
    VOLTA_MMA, TURING_MMA, AMPERE_MMA, ADA_MMA, HOPPER_MMA, HOPPER_WGMMA, BLACKWELL_MMA,
    BLACKWELL_TCGEN05, RTX_BLACKWELL_MMA, CDNA1_MFMA, CDNA2_MFMA, CDNA3_MFMA, N_ENGINES
};

static const char *const engine_names[N_ENGINES] = {
    "volta:mma",  "turing:mma",        "ampere:mma",        "ada:mma",    "hopper:mma", "hopper:wgmma",
    "blackwell:mma", "blackwell:tcgen05", "rtx-blackwell:mma", "cdna1:mfma", "cdna2:mfma", "cdna3:mfma",
};

#define F8 (MM_ET_E4M3 | MM_ET_E5M2)
#define F8F6F4 (MM_ET_E4M3 | MM_ET_E5M2 | MM_ET_E3M2 | MM_ET_E2M3 | MM_ET_E2M1)
#define FNUZ8 (MM_ET_E4M3FNUZ | MM_ET_E5M2FNUZ)

// Row constructors, one per family, so that each row states only what varies.
// NVIDIA fused: engine, kind, shape, types, same, k, frac, out_frac, f16_out, split.
#define NV(e, kd, sh, ty, same, kk, fr, of, f16, sp, nt) \
    {.engine = e, .kind = kd, .shape = sh, .types = ty, .same_types = same, .k = kk, .op = MM_EOP_FUSED, \
     .frac = fr, .out_frac = of, .f16_out = f16, .split = sp, .note = nt}
// NVIDIA block-scaled: engine, kind, shape, k, block, ue4m3, frac, group.
#define NVB(e, kd, sh, ty, kk, blk, ue4, fr, grp, nt) \
    {.engine = e, .kind = kd, .shape = sh, .types = ty, .k = kk, .op = MM_EOP_FUSED, .frac = fr, .out_frac = 23, \
     .split = 1, .group = grp, .block = blk, .ue4m3_scales = ue4, .note = nt}
#define FMA(e, kd, sh, ty, kk, nt) \
    {.engine = e, .kind = kd, .shape = sh, .types = ty, .same_types = true, .k = kk, .op = MM_EOP_FMA, .split = 1, \
     .note = nt}
#define PAIR(e, kd, sh, ty, kk, grp, fl, nt) \
    {.engine = e, .kind = kd, .shape = sh, .types = ty, .same_types = true, .k = kk, .op = MM_EOP_PAIRWISE, \
     .split = 1, .group = grp, .flush = fl, .note = nt}
// Three pairwise rows of one group size, for the three k its instructions come in.
#define PAIR3(e, kd, s1, s2, s3, ty, k1, k2, k3, grp, fl, nt) \
    PAIR(e, kd, s1, ty, k1, grp, fl, nt), PAIR(e, kd, s2, ty, k2, grp, fl, nt), PAIR(e, kd, s3, ty, k3, grp, fl, nt)
#define AMDF(e, kd, sh, ty, same, kk, grp, two, nt) \
    {.engine = e, .kind = kd, .shape = sh, .types = ty, .same_types = same, .k = kk, .op = MM_EOP_AMD_FUSED, \
     .frac = 24, .split = 1, .group = grp, .two_stage = two, .note = nt}

static const char N_FUSED[] = "fused multi-term addition, truncated alignment, D toward zero (f16 D: nearest-even)";
static const char N_SPLIT[] = "fused multi-term addition in two halves of k/2 (split-k), D toward zero";
static const char N_FP8_13[] = "fused addition with 13 fractional bits; f32 D keeps 13 fraction bits (toward zero)";
static const char N_MX[] = "block-scaled: scale exponents join the products' in the alignment";
static const char N_NVF4[] = "block-scaled fp4: exact sums of 16 products, aligned by the scales' exponents, 35 bits";
static const char N_FMA[] = "one fused multiply-add per product, in order";
static const char N_PAIR[] = "float32 products summed as a binary tree per group, then added to the accumulator";
static const char N_PAIR_FLUSH[] = "as CDNA1, with subnormal inputs flushed to +0 and subnormal sums to a signed 0";
static const char N_AMD[] = "fused group sum (24 bits, toward zero), rounded down with C, D to nearest-even";
static const char N_AMD8[] = "even and odd products fused apart and rounded down, then with C; D to nearest-even";
static const char N_E3M2[] = "f8f6f4 fused addition; e3m2/e2m3 follow the PTX kind (MMA-Sim validates e4m3, e5m2, e2m1)";

// Ampere's and Turing's kinds, as each later NVIDIA architecture runs them (frac bits, split).
#define AMPERE_ROWS(e, fr, sp)                                                                        \
    FMA(e, "f64", "m8n8k4", MM_ET_F64, 4, N_FMA),                                                      \
    NV(e, "tf32", "m16n8k8", MM_ET_TF32, true, 8, fr, 23, false, sp, sp == 2 ? N_SPLIT : N_FUSED),     \
    NV(e, "tf32", "m16n8k4", MM_ET_TF32, true, 4, fr, 23, false, 1, N_FUSED),                         \
    NV(e, "f16", "m16n8k16", MM_ET_F16, true, 16, fr, 23, true, sp, sp == 2 ? N_SPLIT : N_FUSED),      \
    NV(e, "bf16", "m16n8k16", MM_ET_BF16, true, 16, fr, 23, false, sp, sp == 2 ? N_SPLIT : N_FUSED),   \
    NV(e, "bf16", "m16n8k8", MM_ET_BF16, true, 8, fr, 23, false, 1, N_FUSED)
// AMD's f32 instructions: k 4, 2 and 1 (each its own row: the k of a chain decides where a K
// that is not a multiple of it is padded with zero products, which can turn -0 into +0).
#define AMD_F32_ROWS(e, k1shape)                                                                      \
    FMA(e, "f32", "16x16x4", MM_ET_F32, 4, N_FMA), FMA(e, "f32", "32x32x2", MM_ET_F32, 2, N_FMA),     \
    FMA(e, "f32", k1shape, MM_ET_F32, 1, N_FMA)
#define TURING_ROWS(e, fr) NV(e, "f16", "m16n8k8", MM_ET_F16, true, 8, fr, 23, true, 1, N_FUSED)

static const mm_engine_kind kinds[] = {
    NV(VOLTA_MMA, "f16", "m8n8k4", MM_ET_F16, true, 4, 23, 23, true, 1, N_FUSED),

    TURING_ROWS(TURING_MMA, 24),
    NV(TURING_MMA, "f16", "m8n8k4", MM_ET_F16, true, 4, 24, 23, true, 1, N_FUSED),

    AMPERE_ROWS(AMPERE_MMA, 24, 2),
    TURING_ROWS(AMPERE_MMA, 24),

    NV(ADA_MMA, "f8", "m16n8k32", F8, false, 32, 13, 13, true, 2, N_FP8_13),
    NV(ADA_MMA, "f8", "m16n8k16", F8, false, 16, 13, 13, true, 1, N_FP8_13),
    AMPERE_ROWS(ADA_MMA, 24, 2),
    TURING_ROWS(ADA_MMA, 24),

    FMA(HOPPER_MMA, "f64", "m16n8k16", MM_ET_F64, 16, N_FMA),
    FMA(HOPPER_MMA, "f64", "m16n8k8", MM_ET_F64, 8, N_FMA),
    AMPERE_ROWS(HOPPER_MMA, 25, 1),
    TURING_ROWS(HOPPER_MMA, 25),

    NV(HOPPER_WGMMA, "f8", "m64nNk32", F8, false, 32, 13, 13, true, 1, N_FP8_13),
    NV(HOPPER_WGMMA, "f16", "m64nNk16", MM_ET_F16, true, 16, 25, 23, true, 1, N_FUSED),
    NV(HOPPER_WGMMA, "bf16", "m64nNk16", MM_ET_BF16, true, 16, 25, 23, false, 1, N_FUSED),
    NV(HOPPER_WGMMA, "tf32", "m64nNk8", MM_ET_TF32, true, 8, 25, 23, false, 1, N_FUSED),

    AMPERE_ROWS(BLACKWELL_MMA, 25, 1),
    TURING_ROWS(BLACKWELL_MMA, 25),

    NVB(BLACKWELL_TCGEN05, "mxf4nvf4", "m128nNk64", MM_ET_E2M1, 64, 16, true, 35, 16, N_NVF4),
    NVB(BLACKWELL_TCGEN05, "mxf4nvf4", "m128nNk64", MM_ET_E2M1, 64, 16, false, 35, 16, N_NVF4),
    NVB(BLACKWELL_TCGEN05, "mxf4nvf4", "m128nNk64", MM_ET_E2M1, 64, 32, false, 35, 16, N_NVF4),
    NVB(BLACKWELL_TCGEN05, "mxf8f6f4", "m128nNk32", F8F6F4, 32, 32, false, 25, 0, N_MX),
    NV(BLACKWELL_TCGEN05, "f8f6f4", "m64nNk32", F8F6F4, false, 32, 25, 23, true, 1, N_E3M2),
    NV(BLACKWELL_TCGEN05, "f16", "m64nNk16", MM_ET_F16, true, 16, 25, 23, true, 1, N_FUSED),
    NV(BLACKWELL_TCGEN05, "f16", "m64nNk16", MM_ET_F16 | MM_ET_BF16, false, 16, 25, 23, false, 1, N_FUSED),
    NV(BLACKWELL_TCGEN05, "tf32", "m64nNk8", MM_ET_TF32, true, 8, 25, 23, false, 1, N_FUSED),

    NVB(RTX_BLACKWELL_MMA, "mxf4nvf4", "m16n8k64", MM_ET_E2M1, 64, 16, true, 35, 16, N_NVF4),
    NVB(RTX_BLACKWELL_MMA, "mxf4nvf4", "m16n8k64", MM_ET_E2M1, 64, 16, false, 35, 16, N_NVF4),
    NVB(RTX_BLACKWELL_MMA, "mxf4nvf4", "m16n8k64", MM_ET_E2M1, 64, 32, false, 35, 16, N_NVF4),
    NVB(RTX_BLACKWELL_MMA, "mxf4nvf4", "m16n8k64", MM_ET_E2M1, 64, 32, true, 35, 16, N_NVF4),
    NVB(RTX_BLACKWELL_MMA, "mxf8f6f4", "m16n8k32", F8F6F4, 32, 32, false, 25, 0, N_MX),
    NV(RTX_BLACKWELL_MMA, "f8f6f4", "m16n8k32", F8F6F4, false, 32, 25, 23, true, 1, N_E3M2),
    NV(RTX_BLACKWELL_MMA, "f8", "m16n8k16", F8, false, 16, 25, 23, true, 1, N_FUSED),
    AMPERE_ROWS(RTX_BLACKWELL_MMA, 25, 1),
    TURING_ROWS(RTX_BLACKWELL_MMA, 25),

    AMD_F32_ROWS(CDNA1_MFMA, "32x32x1"),
    PAIR3(CDNA1_MFMA, "f16", "16x16x16", "32x32x8", "16x16x4", MM_ET_F16, 16, 8, 4, 4, false, N_PAIR),
    PAIR3(CDNA1_MFMA, "bf16", "16x16x8", "32x32x4", "16x16x2", MM_ET_BF16, 8, 4, 2, 2, false, N_PAIR),

    FMA(CDNA2_MFMA, "f64", "16x16x4", MM_ET_F64, 4, N_FMA),
    AMD_F32_ROWS(CDNA2_MFMA, "32x32x1"),
    PAIR3(CDNA2_MFMA, "f16", "16x16x16", "32x32x8", "16x16x4", MM_ET_F16, 16, 8, 4, 4, true, N_PAIR_FLUSH),
    PAIR3(CDNA2_MFMA, "bf16", "16x16x16_1k", "32x32x8_1k", "16x16x4_1k", MM_ET_BF16, 16, 8, 4, 4, true,
          N_PAIR_FLUSH),
    PAIR(CDNA2_MFMA, "bf16", "16x16x2", MM_ET_BF16, 2, 2, true, N_PAIR_FLUSH),

    FMA(CDNA3_MFMA, "f64", "16x16x4", MM_ET_F64, 4, N_FMA),
    AMD_F32_ROWS(CDNA3_MFMA, "32x32x1_2b"),
    AMDF(CDNA3_MFMA, "xf32", "16x16x8", MM_ET_TF32, true, 8, 4, false, N_AMD),
    AMDF(CDNA3_MFMA, "xf32", "32x32x4", MM_ET_TF32, true, 4, 4, false, N_AMD),
    AMDF(CDNA3_MFMA, "f16", "16x16x16", MM_ET_F16, true, 16, 8, false, N_AMD),
    AMDF(CDNA3_MFMA, "f16", "32x32x8", MM_ET_F16, true, 8, 8, false, N_AMD),
    AMDF(CDNA3_MFMA, "f16", "16x16x4_4b", MM_ET_F16, true, 4, 4, false, N_AMD),
    AMDF(CDNA3_MFMA, "bf16", "16x16x16", MM_ET_BF16, true, 16, 8, false, N_AMD),
    AMDF(CDNA3_MFMA, "bf16", "32x32x8", MM_ET_BF16, true, 8, 8, false, N_AMD),
    AMDF(CDNA3_MFMA, "bf16", "16x16x4_4b", MM_ET_BF16, true, 4, 4, false, N_AMD),
    AMDF(CDNA3_MFMA, "fp8", "16x16x32", FNUZ8, false, 32, 16, true, N_AMD8),
    AMDF(CDNA3_MFMA, "fp8", "32x32x16", FNUZ8, false, 16, 16, true, N_AMD8),
};

size_t mm_engine_count(void) { return N_ENGINES; }

const char *mm_engine_name(size_t e) { return e < N_ENGINES ? engine_names[e] : NULL; }

int mm_engine_index(const char *name) {
    for (int e = 0; e < N_ENGINES; e++)
        if (name && !strcmp(name, engine_names[e])) return e;
    return -1;
}

size_t mm_engine_kind_count(void) { return sizeof kinds / sizeof kinds[0]; }

const mm_engine_kind *mm_engine_kind_get(size_t i) {
    return i < mm_engine_kind_count() ? &kinds[i] : NULL;
}

// --- operand types

// One row per MM_ET_* bit, in bit order: the fplab format whose layout the type is. Every fact
// about a type (its emin, its name in messages) is read from the format table through it.
static const char *const type_formats[MM_ET_COUNT] = {"fp64", "fp32", "tf32", "fp16", "bf16", "e4m3",
                                                      "e5m2", "e3m2", "e2m3", "e2m1", "e4m3fnuz", "e5m2fnuz"};
static fmt_t type_fmt[MM_ET_COUNT];
static pthread_once_t type_once = PTHREAD_ONCE_INIT;

static void type_init(void) {
    for (int t = 0; t < MM_ET_COUNT; t++) fmt_from_name(&type_fmt[t], type_formats[t]);  // table rows
}

const fmt_t *mm_engine_type_format(unsigned t) {
    if (!t || t >= 1u << MM_ET_COUNT) return NULL;
    pthread_once(&type_once, type_init);
    return &type_fmt[__builtin_ctz(t)];
}

unsigned mm_engine_type_of(const fmt_t *f) {
    for (int t = 0; t < MM_ET_COUNT; t++)
        if (fmt_same_layout(f, mm_engine_type_format(1u << t)))  // fp32: either kind takes it
            return 1u << t == MM_ET_F32 ? MM_ET_F32 | MM_ET_TF32 : 1u << t;
    return 0;
}

// The names of the types in set, for messages.
static void type_names(char *out, size_t len, unsigned set) {
    size_t n = 0;
    out[0] = 0;
    for (int t = 0; t < MM_ET_COUNT && n < len; t++)
        if (set & (1u << t)) n += (size_t)snprintf(out + n, len - n, "%s%s", n ? " " : "", type_formats[t]);
}

static bool row_takes(const mm_engine_kind *q, unsigned ta, unsigned tb) {
    const unsigned a = ta & q->types, b = tb & q->types;
    if (!a || !b) return false;
    return !q->same_types || (a & b);
}

// Appends k to the list (a string "4, 2, 1") unless it is there.
static void add_k(char *ks, size_t len, int k) {
    char one[16];
    snprintf(one, sizeof one, "%d", k);
    for (const char *p = ks; (p = strstr(p, one)); p++)
        if ((p == ks || p[-1] == ' ') && (p[strlen(one)] == ',' || !p[strlen(one)])) return;
    const size_t n = strlen(ks);
    snprintf(ks + n, len - n, "%s%d", n ? ", " : "", k);
}

const mm_engine_kind *mm_engine_find(int engine, unsigned ta, unsigned tb, int k, bool f16_out, int block,
                                     bool ue4m3_scales, char *msg, size_t msg_len) {
    if (msg && msg_len) msg[0] = 0;
    unsigned all = 0;
    char ks[96] = "", kf16[96] = "";  // the k of the rows that take the operands (with an f16 D)
    for (size_t i = 0; i < mm_engine_kind_count(); i++) {
        const mm_engine_kind *q = &kinds[i];
        if (q->engine != engine) continue;
        all |= q->types;
        if (!row_takes(q, ta, tb) || (block > 0) != (q->block > 0)) continue;
        if (block > 0 && (q->block != block || q->ue4m3_scales != ue4m3_scales)) continue;
        add_k(ks, sizeof ks, q->k);
        if (q->f16_out) add_k(kf16, sizeof kf16, q->k);
        if (k > 0 && q->k != k) continue;
        if (f16_out && !q->f16_out) continue;
        return q;
    }
    if (msg && msg_len) {
        char types[160];
        type_names(types, sizeof types, all);
        if (*ks && f16_out && !*kf16)
            snprintf(msg, msg_len, "%s has no instruction with an f16 C/D for these operands (drop :f16)",
                     engine_names[engine]);
        else if (*ks)
            snprintf(msg, msg_len, "%s has no instruction with k = %d%s for these operands; the k of its "
                     "instructions for them: %s (:kN picks one; none: the largest)", engine_names[engine], k,
                     f16_out ? " and an f16 C/D" : "", f16_out ? kf16 : ks);
        else
            snprintf(msg, msg_len, "%s takes operands of types %s%s", engine_names[engine], types,
                     block > 0 ? ", block-scaled only as mxf8f6f4 (e8m0 scales per 32) or mxf4nvf4 (e2m1; "
                                 "ue8m0 per 32 or 16, ue4m3 per 16) on blackwell:tcgen05 and rtx-blackwell:mma"
                               : "");
    }
    return NULL;
}

char *mm_engine_ks(int engine, char *out, size_t len) {
    if (!len) return out;
    out[0] = 0;
    for (int k = 64; k >= 1; k--)  // every k of the table lies in 1..64 (test_engine.c checks)
        for (size_t i = 0; i < mm_engine_kind_count(); i++)
            if (kinds[i].engine == engine && kinds[i].k == k) {
                add_k(out, len, k);
                break;
            }
    return out;
}
