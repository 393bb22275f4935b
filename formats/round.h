// round.h: the emulation primitive. Round a float32 or float64 array, in place, to the values of
// a format F, with a rounding mode, an overflow policy and optional statistics.
// Constraints: fast path only (no MPFR, no libm per element); results do not depend on the
// number of threads, stochastic rounding included.
#ifndef FPLAB_ROUND_H
#define FPLAB_ROUND_H

#include "format.h"

typedef enum {
    FMT_RNE,  // nearest, ties to even (the default)
    FMT_RNA,  // nearest, ties away from zero
    FMT_RTZ,  // toward zero
    FMT_RUP,  // toward +inf
    FMT_RDN,  // toward -inf
    FMT_RTO,  // to odd: truncate, then set the last bit if inexact
    FMT_SR,   // stochastic: up with probability (distance to the lower neighbour) / ulp
    FMT_NMODES
} fmt_round_mode;

// What happens at the ends of a format's range: rounding comes first (on an unbounded exponent
// range), then the policy maps what lies beyond the largest finite value (Mhi = max; Mlo = -max,
// or 0 for an unsigned format with a zero). The three P3109 policies are the draft's saturation
// modes (interim report 4.7.5) for every format: "extended" below means the format has inf.
typedef enum {
    FMT_OVERFLOW_IEEE,  // IEEE 754: +-inf in nearest modes, +-max toward zero; no inf -> NaN;
                        // negatives into an unsigned format are NaN before any rounding
    FMT_SATURATE,       // P3109 SatFinite: every value, infinities included, clamps to [Mlo, Mhi]
                        // (CUDA satfinite, Transformer Engine, torch._scaled_mm)
    FMT_SAT_PROPAGATE,  // P3109 SatPropagate: finite values clamp; +-inf stay where the format has
                        // them (else clamp)
    FMT_SAT_NONE,       // P3109 SatNone: beyond Mhi is +inf where the format has it, except toward
                        // zero or negative (and to odd in an unsigned extended format): Mhi;
                        // likewise below Mlo (signed) by the mirror rules; a format without inf
                        // clamps; +-inf stay or clamp; negatives into unsigned formats are NaN
                        // (toward zero or positive: 0), and -inf NaN
    // Under the P3109 policies a negative input into an unsigned format with a zero is rounded
    // first: one that rounds to zero is +0 (an underflow), the others are counted as invalid.
    // Formats without a zero (e8m0) keep NaN for zero and negative inputs under every policy.
    FMT_NOVERFLOW
} fmt_overflow;

// Which implementation of fmt_round_f32 (and of fmt_encode_f32) runs a call. Every path gives
// the same bits, statistics included; FMT_PATH_AUTO, the default, takes the fastest one that this
// build and this CPU have for the call. The others let tests, tools and benchmarks hold the
// implementations against each other. fmt_round_f64 and fmt_round1 have one path and ignore it.
typedef enum {
    FMT_PATH_AUTO,     // the fastest available path (what callers should use)
    FMT_PATH_GENERIC,  // the portable vector kernel as compiled for the build's -march: the reference
    FMT_PATH_AVX2,     // the same kernel compiled for x86-64-v3, picked at run time by a portable build
    FMT_PATH_AVX512,   // the same kernel compiled for x86-64-v4, picked at run time by a portable build
    FMT_PATH_HW,       // the CPU's converters (F16C vcvtps2ph: fp16 rne/rtz/rup/rdn; AVX512-BF16
                       // vcvtneps2bf16: bf16 rne) with fix-ups; no statistics
    FMT_PATH_LEAN,     // explicit kernels (AVX-512, else AVX2) for the common calls: every mode
                       // into signed formats with fraction bits and a zero, and into e8m0
    FMT_NPATHS
} fmt_round_path;

// Stochastic rounding as IEEE P3109 defines its three variants (interim report 4.7.4), with N =
// sr_bits random bits R (0 <= R < 2^N) and nu the fraction of an ulp above the lower neighbour:
// round away from zero iff
//   A: floor(nu 2^N) + R >= 2^N             (nu truncated to N bits)
//   B: floor(nu 2^(N+1)) + 2R + 1 >= 2^(N+1) (nu to N bits, half a step up: unbiased for
//                                            fractions of N + 1 bits)
//   C: RNE(nu 2^N) + R >= 2^N                (nu rounded to nearest-even N bits)
// fplab draws D = the top N bits of a 32-bit counter-based draw and uses R = 2^N - 1 - D (equal in
// distribution; A is the rule fplab always had, so seeds keep their results).
typedef enum {
    FMT_SR_A,  // the default
    FMT_SR_B,
    FMT_SR_C,
    FMT_NSR_VARIANTS
} fmt_sr_variant;

// All the knobs of one rounding call; zero-initialised means rne, IEEE overflow, subnormals kept.
typedef struct {
    fmt_round_mode mode;
    fmt_overflow overflow;
    bool flush_subnormals;  // results below the smallest normal become signed zero (counted)
    int sr_bits;            // random bits per stochastic rounding, 1..32; 0 means 32
    fmt_sr_variant sr_variant;  // P3109's A (default), B or C
    uint64_t seed;          // stochastic rounding: generator key (seed, stream) ...
    uint64_t stream;
    uint64_t offset;        // ... and counter of element 0: element i draws index offset + i
    fmt_round_path path;    // implementation of the float32 kernel (FMT_PATH_AUTO: the fastest)
} fmt_round_opts;

// What happened in a call. Counts add up over calls (the caller zeroes the record).
typedef struct {
    uint64_t n;          // elements seen
    uint64_t overflow;   // |x| rounded beyond max: saturated, or became inf or NaN
    uint64_t underflow;  // nonzero finite input became zero (e8m0: clamped up to its minimum)
    uint64_t subnormal;  // result is a nonzero subnormal of the format
    uint64_t nan_in;     // NaN inputs (in formats without NaN they become -0, see docs)
    uint64_t invalid;    // inputs the format cannot hold by sign: negative or zero into e8m0,
                         // negative into unsigned formats (they become NaN, or 0 without NaN)
    double amax;         // largest |x| of the input, NaN ignored
} fmt_stats;

// Mode names as the command line spells them: rne rna rtz rup rdn rto sr.
const char *fmt_mode_name(fmt_round_mode m);
int fmt_mode_from_name(fmt_round_mode *out, const char *name);
// Overflow policies: ieee saturate satpropagate satnone (satfinite: P3109's name of saturate).
const char *fmt_overflow_name(fmt_overflow o);
int fmt_overflow_from_name(fmt_overflow *out, const char *name);
// A mode as bindings spell it: a mode name, or "sr:a", "sr:b", "sr:c" (stochastic rounding with
// P3109's variant); sets o->mode and o->sr_variant. FMT_OK or FMT_EUNKNOWN.
int fmt_mode_spec_from_name(fmt_round_opts *o, const char *name);
// Stochastic rounding variants: a b c (case-insensitive).
const char *fmt_sr_variant_name(fmt_sr_variant v);
int fmt_sr_variant_from_name(fmt_sr_variant *out, const char *name);

// Path names: auto generic avx2 avx512 hw lean.
const char *fmt_path_name(fmt_round_path p);
int fmt_path_from_name(fmt_round_path *out, const char *name);
// Whether fmt_round_f32 can take path p for f with o on this machine: the path is compiled into
// this build, the CPU has its instructions, and (FMT_PATH_HW, FMT_PATH_LEAN) it covers f and o's
// mode (FMT_PATH_HW: and with_stats is false). FMT_PATH_AUTO and FMT_PATH_GENERIC always can.
// A call that names an unavailable path returns FMT_EINVAL.
bool fmt_path_available(fmt_round_path p, const fmt_t *f, const fmt_round_opts *o, bool with_stats);
// The path fmt_round_f32(f, ..., o, stats) runs: o->path, or for FMT_PATH_AUTO the one it picks;
// FMT_NPATHS where that call would return FMT_EINVAL. with_stats: stats is not NULL.
fmt_round_path fmt_path_chosen(const fmt_t *f, const fmt_round_opts *o, bool with_stats);

// Checks opts against f. Returns FMT_OK, or FMT_EINVAL with a message in msg. Warnings
// (valid, but worth saying) return FMT_OK with a message; msg[0] == 0 means none.
int fmt_validate_round_opts(const fmt_t *f, const fmt_round_opts *o, char *msg, size_t msg_len);

// x[0..n) = round_F(x[0..n)), in place. Every result is a value of F, stored exactly in
// float32 (formats that do not fit in float32 are rounded through float64 and must still have
// their values in float32's range: use fmt_round_f64 for those). stats may be NULL; when given,
// its counts are added to. Returns FMT_OK or FMT_EINVAL.
int fmt_round_f32(const fmt_t *f, float *x, size_t n, const fmt_round_opts *o, fmt_stats *stats);
int fmt_round_f64(const fmt_t *f, double *x, size_t n, const fmt_round_opts *o, fmt_stats *stats);
// out[i] = round_F(in[i] * pre) * post, in float32 arithmetic (no multiply where pre or post is
// 1; out may be in): what a copy, fmt_round_f32 and a rescale give, bit for bit, in one pass
// over cache-sized chunks on every thread. stats count the values before post.
int fmt_round_f32_scaled(const fmt_t *f, float *out, const float *in, size_t n, float pre, float post,
                         const fmt_round_opts *o, fmt_stats *stats);

// One value, same semantics (stochastic rounding draws index o->offset).
double fmt_round1(const fmt_t *f, double x, const fmt_round_opts *o);

#endif
