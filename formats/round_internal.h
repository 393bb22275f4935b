// round_internal.h: what the float32 and float64 rounding kernels share: the per-call
// parameters derived from (format, options), and the one decision every mode makes.
// Internal to formats/: not installed, not included above this layer.
#ifndef FPLAB_ROUND_INTERNAL_H
#define FPLAB_ROUND_INTERNAL_H

#include "rng.h"
#include "round.h"

typedef struct {
    int m;               // fraction bits of the format
    int emin;            // exponent of its smallest normal
    int bias;            // for the parity of an exponent-only (m == 0) code
    double max;          // largest finite value
    double min_normal;
    double ovf[2];       // what an overflowing magnitude becomes, by sign (max, inf or NaN)
    double inf_result;   // what an infinite input's magnitude becomes
    bool inf_exact;      // an infinite input stays infinite (not an overflow)
    // unsigned formats: what a negative finite input (inval_result) and -inf (ninf_result)
    // become; inval_after_round: one whose magnitude rounds to zero is +0, not invalid
    double inval_result, ninf_result;
    bool inval_after_round;
    bool has_nan, has_zero, negzero, is_signed;
    bool clamp_min;      // no zero: magnitudes below min_normal become min_normal (e8m0)
    bool flush;          // flush subnormal results to zero
    int sr_bits;         // 1..32
    fmt_sr_variant sr_variant;
    fmt_rng_key key;
    uint64_t offset;
    // for the paths that only cover some formats (round_hw.c, round_lean.c): descriptor fields
    int bits, ebits, emax;
    fmt_special special;
    fmt_overflow overflow;
} fmt__kparams;

void fmt__kparams_make(fmt__kparams *k, const fmt_t *f, const fmt_round_opts *o);

// The float32 method's parameters (round_lane_internal.h's fmt__lane_round), from fmt__kparams:
// made once per call on the host; magnitudes as float32 bit patterns.
typedef struct {
    int32_t sbase, emin_b, bias, r;
    fmt_sr_variant sr_variant;
    bool m0, signed_fmt, flush, clamp_min, has_nan, has_zero;
    uint32_t negzero_mask, inf_exact_mask, after_round_mask;  // all-ones when true
    // The sign a NaN input gets where the format has no NaN (-0 if signed): nan_sign, in the
    // lanes nan_sign_mask (all-ones for such formats) selects.
    uint32_t nan_sign_mask, nan_sign;
    // float32 bit patterns (magnitudes compare as their bits); min_sub is 2^(emin-m), the last
    // place of the lowest binade
    uint32_t max_bits, min_sub_bits, min_normal_bits, ovf0, ovf1, inf_res, nan_res, inval_res, ninf_res;
} fmt__k32;
void fmt__k32_make(fmt__k32 *k, const fmt__kparams *p);
// Whether fmt__lane_round may take its short form (simple = true): a signed format with fraction
// bits and a zero that flushes nothing, every table format but e8m0.
FMT_HD static inline bool fmt__k32_simple(const fmt__k32 *k) {
    return k->signed_fmt && !k->m0 && !k->flush && !k->clamp_min;
}

// Whether to add one unit in the last place to the truncated magnitude. lsb, guard, sticky,
// sign and sr_up are 0 or 1; guard is the first dropped bit, sticky the OR of the rest.
// Round-to-odd adds one when the truncation was inexact and left an even last bit, which is
// "set the last bit" for m >= 1 and also right for exponent-only codes.
FMT_HD static inline unsigned fmt__round_inc(fmt_round_mode mode, unsigned sign, unsigned lsb,
                                      unsigned guard, unsigned sticky, unsigned sr_up) {
    unsigned inexact = guard | sticky;
    switch (mode) {
    case FMT_RNE: return guard & (sticky | lsb);
    case FMT_RNA: return guard;
    case FMT_RTZ: return 0;
    case FMT_RUP: return inexact & (sign ^ 1);
    case FMT_RDN: return inexact & sign;
    case FMT_RTO: return inexact & (lsb ^ 1);
    case FMT_SR: return sr_up;
    default: return 0;
    }
}

// Per-element outcome flags, summed into fmt_stats by the kernels.
typedef struct {
    uint64_t overflow, underflow, subnormal, nan_in, invalid;
    double amax;
} fmt__counts;

static inline void fmt__counts_add(fmt_stats *st, const fmt__counts *c, size_t n) {
    st->n += n;
    st->overflow += c->overflow;
    st->underflow += c->underflow;
    st->subnormal += c->subnormal;
    st->nan_in += c->nan_in;
    st->invalid += c->invalid;
    if (c->amax > st->amax) st->amax = c->amax;
}

static inline void fmt__counts_merge(fmt__counts *into, const fmt__counts *c) {
    into->overflow += c->overflow, into->underflow += c->underflow;
    into->subnormal += c->subnormal, into->nan_in += c->nan_in, into->invalid += c->invalid;
    if (c->amax > into->amax) into->amax = c->amax;
}

// Kernels: round x[0..n) in place; element i draws counter k->offset + base + i.
// The float32 kernel runs the given path (never FMT_PATH_AUTO; round.c resolves it and checks
// that it is available first).
void fmt__round_f32_kernel(const fmt__kparams *k, fmt_round_path path, fmt_round_mode mode,
                           float *x, size_t n, uint64_t base, fmt__counts *counts);
void fmt__round_f64_kernel(const fmt__kparams *k, fmt_round_mode mode, double *x, size_t n,
                           uint64_t base, fmt__counts *counts);

// --- the paths of the float32 kernel (round_f32.c, round_hw.c, round_lean.c)

// Resolves the path of a float32 call: p itself, or for FMT_PATH_AUTO the fastest this build and
// CPU have for (k, mode, with_stats); FMT_NPATHS when p is not available (round.c).
fmt_round_path fmt__f32_path(const fmt__kparams *k, fmt_round_path p, fmt_round_mode mode,
                             bool with_stats);

// Copies of the generic vector kernels (round_f32.c, codec_f32.c) for wider instruction sets: a
// portable x86-64 build (make install's -march=x86-64-v2) compiles them again with target
// attributes for x86-64-v3 (AVX2) and x86-64-v4 (AVX-512); FMT__AVX2_COPY and FMT__AVX512_COPY
// say which copies this build makes (none for an instruction set -march already has; GCC only:
// clang's __builtin_cpu_supports lacks the x86-64-vN names).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#if !defined(__AVX2__)
#define FMT__AVX2_COPY 1
#endif
#if !(defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__))
#define FMT__AVX512_COPY 1
#endif
#endif

// Whether copy (FMT_PATH_GENERIC, FMT_PATH_AVX2 or FMT_PATH_AVX512) is in this build and runs on
// this CPU, and the widest copy that is and does (round.c).
bool fmt__copy_runs(fmt_round_path copy);
fmt_round_path fmt__best_copy(void);

// vcvtps2ph (round_hw.c at 256 bits, round_lean.c at 512) as CVT(v, imm): the instruction takes
// its rounding control only as an immediate, so each mode gets its literal here (rne for the
// modes the converter does not cover); folded to one call where mode is a constant.
#define FMT__CVTPS_PH_BY_MODE(CVT, v, mode)                                                       \
    ((mode) == FMT_RTZ   ? CVT((v), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)                      \
     : (mode) == FMT_RUP ? CVT((v), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)                   \
     : (mode) == FMT_RDN ? CVT((v), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)                   \
                         : CVT((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))

// Whether the hardware converters cover k with mode (and no statistics) on this CPU.
bool fmt__f32_hw_covers(const fmt__kparams *k, fmt_round_mode mode);
// x[0..n) rounded by the hardware path, only for what fmt__f32_hw_covers accepts. Returns false,
// with x untouched, when the converter cannot be exact in this thread (fp16 with MXCSR.DAZ set).
bool fmt__round_f32_hw(const fmt__kparams *k, fmt_round_mode mode, float *x, size_t n);
// The same pair for the explicit kernels (AVX-512 where the CPU has it, else AVX2: they decline
// where MXCSR has DAZ or FTZ set, the AVX2 ones also where it rounds other than to nearest);
// element i draws counter k->offset + base + i; counts as the kernels' (NULL: none wanted).
// out[0..n) = in[0..n) rounded (out == in: in place; else the two do not overlap).
bool fmt__f32_lean_covers(const fmt__kparams *k, fmt_round_mode mode);
bool fmt__round_f32_lean(const fmt__kparams *k, fmt_round_mode mode, float *out, const float *in, size_t n,
                         uint64_t base, fmt__counts *counts);
// The AVX2 kernels themselves (round_lean_avx2.c), whatever the CPU's widest set, for the tests:
// false, with nothing written, where they decline or the CPU lacks AVX2.
bool fmt__lean_avx2_runs(void);
bool fmt__round_f32_lean_avx2(const fmt__kparams *k, fmt_round_mode mode, float *out, const float *in, size_t n,
                              uint64_t base, fmt__counts *counts);
// --- block scaling's one pass (scale.c's work units, round_lean.c's block kernel)

// One call of the block kernel: rows rows of n elements, ld apart (in, out, elems and the
// counters alike), take the same multipliers and divisors (a tile row): for i in [0, n)
//   out[i] = round(in[i] * mul[i / tc]) * deq[i / tc]
// or with exact round(in[i] / deq[i / tc]) * deq[i / tc] (the quotient rounded to odd into
// float32, as scale.c's exact pass makes it; tiles with deq 0 multiply by mul), elems[i]
// (optional) the rounded value. Element i of row r draws counter k->offset + base + r * ld + i.
typedef struct {
    const fmt__kparams *k;  // the element format and the caller's options
    fmt_round_mode mode;
    size_t tc;              // tile width: a multiple of 16, or 1 (a scale per column)
    bool exact;
    const float *mul, *deq; // per tile of the row: ceil(n / tc) entries
    float *out;             // (rows, ld): may equal in
    float *elems;           // (rows, ld), optional: the rounded values, before the scaling back
    const float *in;        // (rows, ld)
    size_t n, rows, ld;     // (rows - 1) * ld + n at most 2^30 where rows > 1
    uint64_t base;
    ptrdiff_t ahead;        // prefetch distance in elements (0: none); a hint, no result changes
    fmt__counts *counts;    // optional: the rounding's statistics, added to; with exact, amax
                            // is not raised (the quotients' amax would take a division in every
                            // lane; scale.c reports the input's amax, known from the scales)
    uint64_t *zeroed;       // optional: nonzero inputs of tiles whose multiplier is 0, added to
} fmt__block_req;

// Whether the block kernel covers (k, mode, tile width tc; exact: quotients, else multipliers)
// on this CPU: the explicit kernels cover k and mode (fmt__f32_lean_covers), tc is a multiple of
// 16 or 1, and the CPU has AVX-512, or AVX2 and the tiles divide (there the separate passes are
// faster for multipliers: docs/benchmarks.md, "Block scaling's one pass on AVX2").
bool fmt__block_lean_covers(const fmt__kparams *k, fmt_round_mode mode, size_t tc, bool exact);
// The call r in one pass of the explicit AVX-512 kernels (AVX2's where the CPU has no AVX-512),
// for what fmt__block_lean_covers accepts. Returns false, with nothing written, where it cannot
// be exact in this thread (MXCSR has DAZ or FTZ set: x * 1 must be x and the products must not
// flush, as in scale.c's passes; for AVX2's also a rounding mode other than to nearest)
// or where r is beyond the kernel (not covered, or rows > 1 spanning more than 2^30 elements).
bool fmt__scale_round_f32_lean(const fmt__block_req *r);
// Raises bits[t] to the max |x| bits (a NaN above inf) of the t-th tile of tc elements of
// x[0..n) (tc a multiple of 16; the last tile may be short) and *finite (optional) to the NaN-free
// max. Returns false, with nothing written, where neither explicit kernel (AVX-512, AVX2) runs,
// and on AVX2 for tiles wider than 64 (there the portable loop is as fast).
bool fmt__tile_amax_lean(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite);
// The AVX2 kernels of the two (round_lean_block_avx2.c), whatever the CPU's widest set, for the
// tests; false where the CPU has no AVX2 (and, for the pass, as fmt__scale_round_f32_lean, but
// multipliers too). fmt__tile_amax_avx2 takes tc a multiple of 8.
bool fmt__scale_round_f32_lean_avx2(const fmt__block_req *r);
bool fmt__tile_amax_avx2(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite);

#endif
