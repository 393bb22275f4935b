// round_scalar.h: rounding of one double at a time to a format, for hot loops above formats/
// (the emulated accumulators of kernels/): set up a rounder once per call, then apply it per
// element with no call, no validation and no statistics.
// Constraints: this header holds THE per-element float64 rounding (fmt__round_one_f64); the
// float64 kernel (round_f64.c) loops over it, so a value rounds here exactly as fmt_round_f64
// rounds it. Branch-free, no libm, no MPFR. Built on round_internal.h (fmt__kparams), so an
// installed copy needs that header beside it.
#ifndef FPLAB_ROUND_SCALAR_H
#define FPLAB_ROUND_SCALAR_H

#include <string.h>

#include "round_internal.h"

// A format and rounding options, resolved once.
typedef struct {
    fmt__kparams k;
    fmt_round_mode mode;
} fmt_rounder;

// Per-element outcome of a rounding (each 0 or 1), summed into fmt_stats by the kernels.
typedef struct {
    unsigned overflow, underflow, subnormal, nan_in, invalid;
} fmt__flags;

FMT_HD static inline uint64_t fmt__d2u(double f) { uint64_t u; memcpy(&u, &f, sizeof u); return u; }
FMT_HD static inline double fmt__u2d(uint64_t u) { double f; memcpy(&f, &u, sizeof f); return f; }

// round_F(x) for a double x, with the method of round_f32.c on 64-bit integers:
// |x| = sig * 2^(E'-1075), sig < 2^53; the last place of F at x is 2^ue; the mode decides from
// (lsb, guard, sticky) whether to add one; overflow is judged on the unbounded-exponent result.
// rnd is the 32-bit draw for stochastic rounding (ignored by the other modes). Inlined always,
// so that a caller passing a constant mode gets a loop specialised for it.
FMT_HD static inline __attribute__((always_inline)) double
fmt__round_one_f64(const fmt__kparams *k, const fmt_round_mode mode, const double x,
                   const uint32_t rnd, fmt__flags *fl) {
    const uint64_t b = fmt__d2u(x), sign = b >> 63, a = b & 0x7fffffffffffffffULL, E = a >> 52;
    const uint64_t frac_mask = (1ULL << 52) - 1;
    const int64_t Ep = E ? (int64_t)E : 1;
    const uint64_t sig = (a & frac_mask) | (E ? 1ULL << 52 : 0);
    // Inputs at or above the format's smallest normal keep their binade (d = 0). A subnormal
    // double (E = 0) lies below 2^-1022, so its last place is the format's lowest, 2^(emin-m),
    // which d gives as it is even when emin < -1022 (m = 0 formats with bias 1024).
    int64_t d = (k->emin + 1023) - Ep;
    d = d > 0 || E == 0 ? d : 0;
    const int64_t s = 52 - k->m + d;
    const uint64_t s54 = s < 54 ? (uint64_t)s : 54u;  // sig < 2^53: dropping 54 bits drops all
    uint64_t q = sig >> s54;
    const uint64_t rem = sig & ((1ULL << s54) - 1);
    const uint64_t half = (1ULL << s54) >> 1;
    const unsigned guard = (rem & half) != 0, sticky = (rem & (half - 1)) != 0;
    const int64_t ue = Ep - 1075 + s;
    const unsigned lsb = k->m == 0 ? (unsigned)((uint64_t)(ue + k->bias) & 1u & ((0u - q) >> 63))
                                   : (unsigned)(q & 1u);
    unsigned sr_up = 0;
    if (mode == FMT_SR) {
        const int64_t t = s - k->sr_bits;
        uint64_t top = t >= 0 ? rem >> (t < 63 ? t : 63) : rem << (-t < 63 ? -t : 63);
        if (k->sr_variant != FMT_SR_A && t > 0) {  // the fraction to sr_bits bits first (round.h)
            const int64_t t1 = t - 1 < 63 ? t - 1 : 63;
            const uint64_t g = (rem >> t1) & 1u, st = (rem & ((1ULL << t1) - 1)) != 0;
            top += k->sr_variant == FMT_SR_B ? g : g & (st | (top & 1u));
        }
        sr_up = (uint64_t)(rnd >> (32 - k->sr_bits)) < top;
    }
    q += fmt__round_inc(mode, (unsigned)sign, lsb, guard, sticky, sr_up);
    const double p2 = ue >= -1022 ? fmt__u2d((uint64_t)(ue + 1023) << 52)
                                  : fmt__u2d(1ULL << ((ue + 1074) & 63));
    const double mag = (double)(int64_t)q * p2;

    const unsigned special = E == 2047u, is_nan = special & ((a & frac_mask) != 0);
    const unsigned over = !special & (mag > k->max);
    double r = over ? k->ovf[sign] : mag;
    r = special ? (is_nan ? (k->has_nan ? __builtin_nan("") : 0.0) : k->inf_result) : r;
    const unsigned tiny = !special & (r < k->min_normal);
    r = (k->flush & tiny) ? 0.0 : r;
    r = (k->clamp_min & tiny) ? k->min_normal : r;
    const unsigned inval = !k->is_signed & !is_nan & ((sign & (a != 0)) | (!k->has_zero & (a == 0))) &
                           !(k->inval_after_round & (r == 0.0));  // rounded to zero: +0, not invalid
    r = inval ? (special ? k->ninf_result : k->inval_result) : r;
    const unsigned zero = r == 0.0;
    uint64_t osign = sign & (k->negzero | !zero);
    osign = ((!k->has_nan) & is_nan) ? (uint64_t)k->is_signed : osign;
    osign &= k->is_signed;

    fl->overflow = (over | (special & !is_nan & !k->inf_exact)) & !inval;
    fl->underflow = !special & !inval & (a != 0) & (zero | (k->clamp_min & tiny));
    fl->subnormal = !special & !zero & (r < k->min_normal) & !k->clamp_min;
    fl->nan_in = is_nan;
    fl->invalid = inval;
    return fmt__u2d(fmt__d2u(r) | osign << 63);
}

// Resolves (f, o) into r. Returns FMT_OK, or FMT_EINVAL for options fmt_validate_round_opts
// rejects. Any format fmt_round_f64 accepts works (results are doubles).
static inline int fmt_rounder_make(fmt_rounder *r, const fmt_t *f, const fmt_round_opts *o) {
    if (fmt_validate_round_opts(f, o, NULL, 0) != FMT_OK) return FMT_EINVAL;
    fmt__kparams_make(&r->k, f, o);
    r->mode = o->mode;
    return FMT_OK;
}

// round_F(x) as fmt_round_f64 gives it for the element at position index of its array
// (stochastic rounding draws counter o->offset + index; other modes ignore index).
static inline double fmt_rounder_apply_at(const fmt_rounder *r, double x, uint64_t index) {
    fmt__flags fl;
    const uint32_t rnd = r->mode == FMT_SR ? fmt_rng_u32(r->k.key, r->k.offset + index) : 0;
    return fmt__round_one_f64(&r->k, r->mode, x, rnd, &fl);
}

// round_F(x), as fmt_round1 gives it (stochastic rounding draws counter o->offset).
static inline double fmt_rounder_apply(const fmt_rounder *r, double x) {
    return fmt_rounder_apply_at(r, x, 0);
}

#endif
