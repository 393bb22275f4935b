// scale_rules.c: the scale rules (fmt_scale_round), one row of a table each, and the scales of
// a call's tiles from their amax: vectorised for the one-level power-of-two rules (the hot
// recipes: MX), a rounding per tile for the one-level quotient rules, one float32 kernel call
// for two-level quotients (NVFP4).
// Constraints: no MPFR; a need is rounded into the scale format by the float64 rounding of one
// element (round_scalar.h) or the float32 kernel, so a scale is what fmt_round gives the need.
#include <float.h>
#include <math.h>

#include "round_scalar.h"
#include "scale_internal.h"
#include "vec_internal.h"

static inline uint64_t d2u(double d) { uint64_t u; memcpy(&u, &d, sizeof u); return u; }
static inline double u2d(uint64_t u) { double d; memcpy(&d, &u, sizeof d); return d; }
#define f2u fmt__f2u
#define u2f fmt__u2f

// ---------------------------------------------------------------------------------------------
// the rules

// The power-of-two rules read the exponent of amax rounded three ways: down (OCP), up (CEIL), or
// to the element's precision with ties away (EVEN). Each is an add to the significand of a
// normalised amax (frac_bits fraction bits) that carries into the exponent exactly when that
// rounding goes up a binade: nothing for OCP, all ones for CEIL, half an element ulp for EVEN
// (torchao's 1 << (23 - mbits - 1) on the float32 bits).
static uint64_t carry_none(int elem_mbits, int frac_bits) { return (void)elem_mbits, (void)frac_bits, 0; }
static uint64_t carry_all_ones(int elem_mbits, int frac_bits) {
    (void)elem_mbits;
    return ((uint64_t)1 << frac_bits) - 1;
}
static uint64_t carry_half_elem_ulp(int elem_mbits, int frac_bits) {
    return elem_mbits < frac_bits ? (uint64_t)1 << (frac_bits - 1 - elem_mbits) : 0;
}

// The quotient rules' need: in double for UP, RNE and 4over6 (exact enough that only its final
// rounding matters), in float32 for RCEIL (one level only: two levels compute their float32
// quotient themselves).
static double quotient_f64(double a, float elem_max) { return a / elem_max; }
static double quotient_f32(double a, float elem_max) { return (float)a / elem_max; }

// Indexed by fmt_scale_round (scale.h says what each rule does). Powers of two are exact in the
// scale format (RNE leaves them); quotients round up (nothing clips) or to nearest.
const fmt__scale_rule fmt__scale_rules[FMT_SCALE_NRULES] = {
    [FMT_SCALE_OCP] = {"ocp", FMT_RNE, carry_none, NULL, false},
    [FMT_SCALE_UP] = {"up", FMT_RUP, NULL, quotient_f64, false},
    [FMT_SCALE_RNE] = {"rne", FMT_RNE, NULL, quotient_f64, false},
    [FMT_SCALE_CEIL] = {"ceil", FMT_RNE, carry_all_ones, NULL, false},
    [FMT_SCALE_EVEN] = {"even", FMT_RNE, carry_half_elem_ulp, NULL, false},
    [FMT_SCALE_RCEIL] = {"rceil", FMT_RUP, NULL, quotient_f32, false},
    [FMT_SCALE_4OVER6] = {"4over6", FMT_RNE, NULL, quotient_f64, true},
};

// ---------------------------------------------------------------------------------------------
// a call's constants

// What the tensor scale maps the tensor amax to, over max_elem: the scale format's max, or for
// a by_error rule (4over6) the largest power of two S with S * max_elem / 2^emax_elem <= that
// max, so that a block holding the tensor amax can take the 4-candidate's scale without
// saturating (e4m3 with e2m1: 448 * 4 / 6 = 298.7, S = 256, the paper's choice; the
// 4-candidate's largest block scale is 384).
static double enc_scale_max(const fmt_t *elem, const fmt_scaling *sc) {
    const double m = sc->scale_fmt.max;
    const fmt__scale_rule *rule = fmt__scale_rule_of(sc->scale_round);
    return rule && rule->by_error ? ldexp(1.0, ilogb(m * ldexp(1.0, elem->emax) / elem->max)) : m;
}

void fmt__scale_ctx_make(fmt__scale_ctx *c, const fmt_t *elem, const fmt_scaling *sc) {
    const fmt__scale_rule *rule = &fmt__scale_rules[sc->scale_round];
    fmt_round_opts so = {0};
    so.overflow = FMT_SATURATE;
    so.mode = rule->mode;
    fmt__kparams_make(&c->k, &sc->scale_fmt, &so);
    c->rule = rule;
    c->mode = so.mode;
    c->path = fmt__f32_path(&c->k, FMT_PATH_AUTO, c->mode, false);
    c->nan_block = sc->nan_block, c->two_level = sc->tensor_scale;
    c->lo = fmax(sc->scale_fmt.min_subnormal, 0x1p-127);
    c->hi = sc->scale_fmt.max;
    c->carry32 = rule->carry ? (uint32_t)rule->carry(elem->mbits, 23) : 0;
    c->carry64 = rule->carry ? rule->carry(elem->mbits, 52) : 0;
    c->elem_max = (float)elem->max;
    c->enc_max = enc_scale_max(elem, sc);
    c->alt_max = ldexpf(1.0f, elem->emax);
    c->elem_emax = elem->emax;
    c->s_enc = 1.0f;
    // fmt_same_layout compares the six defining fields only: the rest of these may stay zero.
    const fmt_t f32 = {.bits = 32, .ebits = 8, .mbits = 23, .bias = 127, .is_signed = true, .special = FMT_IEEE};
    const fmt_t e8m0 = {.bits = 8, .ebits = 8, .mbits = 0, .bias = 127, .is_signed = false, .special = FMT_E8M0};
    c->need = fmt_same_layout(&sc->scale_fmt, &f32)    ? FMT_NEED_FP32
              : fmt_same_layout(&sc->scale_fmt, &e8m0) ? FMT_NEED_E8M0
                                                       : FMT_NEED_GENERIC;
}

// NVFP4's encoding scale from the tensor amax A: s_enc = (max_scale * max_elem) / A in float32,
// clamped to FLT_MAX as Transformer Engine does; 1 when A is 0, inf or NaN.
static float tensor_enc(double scale_max, float elem_max, float A) {
    float s_enc = (float)(scale_max * elem_max) / A;
    if (s_enc > FLT_MAX) s_enc = FLT_MAX;
    if (A == 0.0f || !(A <= FLT_MAX) || s_enc == 0.0f) s_enc = 1.0f;
    return s_enc;
}

float fmt_scaling_tensor_enc(const fmt_t *elem, const fmt_scaling *sc, float amax) {
    return tensor_enc(enc_scale_max(elem, sc), (float)elem->max, amax);
}

float fmt__scale_encoding(const fmt__scale_ctx *c, uint32_t abits) {
    return tensor_enc(c->enc_max, c->elem_max, u2f(abits));
}

// The needed scale of a tile whose (scaled) amax is a, a finite and > 0: a power-of-two rule's
// 2^(E - emax_elem), E the exponent of a after the rule's carry (a is a normal double: a float,
// or a float times s_enc, exact), or the rule's quotient.
static double needed_scale(const fmt__scale_ctx *c, double a) {
    if (!c->rule->carry) return c->rule->quotient(a, c->elem_max);
    const int e = (int)(((d2u(a) + c->carry64) >> 52) & 0x7ff) - 1023 - c->elem_emax;
    return e >= -1022 && e <= 1023 ? u2d((uint64_t)(e + 1023) << 52) : ldexp(1.0, e);
}

// One need rounded into the scale format (what fmt__round_f64_kernel does to one element).
// Where need lies in [lo, hi] (round_scale's needs; two levels' may be 0 or past hi), on the
// integer bits: float32 (a normal need) RNE or UP of the 52-bit significand to 23 bits (a carry
// of the last place into the exponent is the next binade's value, at most hi); e8m0 (UP only)
// the next power of two unless need is one. Both independent of MXCSR, as the general kernel
// is; tests/test_scale.c holds them to it on every binade.
static double round_need(const fmt__scale_ctx *c, double need) {
    const uint64_t b = d2u(need);
    const bool inside = need >= c->lo && need <= c->hi;
    if (c->need == FMT_NEED_E8M0 && c->mode == FMT_RUP && inside)
        return b & 0xfffffffffffffull ? u2d((b | 0xfffffffffffffull) + 1) : need;
    if (c->need == FMT_NEED_FP32 && inside && need >= 0x1p-126) {
        const uint64_t drop = (1ull << 29) - 1;  // the 29 bits below float32's last place
        const uint64_t add = c->mode == FMT_RUP ? drop : (drop >> 1) + ((b >> 29) & 1);
        return u2d((b + add) & ~drop);
    }
    fmt__flags fl;
    return c->mode == FMT_RUP ? fmt__round_one_f64(&c->k, FMT_RUP, need, 0, &fl)
                              : fmt__round_one_f64(&c->k, FMT_RNE, need, 0, &fl);
}

// One level, a need in double (RNE and UP: a / max_elem), rounded into the scale format.
// Clipped: the need lies outside [lo, hi] (the stored scale is then the nearer end), or
// rounding it up saturated below it.
static float round_scale(const fmt__scale_ctx *c, double need, bool *clipped) {
    if (need > c->hi) return *clipped = true, (float)c->hi;
    if (need < c->lo) return *clipped = true, (float)c->lo;
    const double s = round_need(c, need);
    if (c->mode == FMT_RUP && s < need) *clipped = true;
    return (float)s;
}

// The scale of a tile whose amax is inf or NaN. OCP MX v1.0 (6.3) takes the scale from the
// largest magnitude, which is not finite here, and clamps only normal numbers: the spec leaves
// this tile open. fplab's default keeps scale 1, so the non-finite values meet the element
// format's own rules (and are counted there) instead of poisoning their neighbours; nan_block
// gives the scale NaN, as microxcaling and torchao do (every element of the tile becomes NaN).
static float nonfinite_tile_scale(bool nan_block) { return nan_block ? NAN : 1.0f; }

// The hot recipes' scales are computed W tiles at a time (vec_internal.h's lanes): a scalar
// chain of dependent steps per tile costs about what rounding the tile's elements does. Lane
// masks are all-ones or zero; float magnitudes (never negative here) compare as their bits.
FMT__VEC vu load_u(const void *p) { vu v; memcpy(&v, p, sizeof v); return v; }
FMT__VEC void store_u(void *p, vu v) { memcpy(p, &v, sizeof v); }
FMT__VEC uint64_t lane_sum(vu v) {
    uint64_t k = 0;
    for (int i = 0; i < W; i++) k += v[i];
    return k;
}

// One level, power-of-two rules: s = 2^(E - emax_elem) with E the exponent of the tile amax
// after the rule's carry, read from the float32 bits normalised (a subnormal's
// significand converted to float, whose exponent is 149 higher); a power of two, so a value of
// the scale format where it lies in [lo, hi], else the nearer end (clipped). The carry cannot
// wrap: the largest finite amax plus the largest carry is 0x7fffffff (E = 128).
static void scales_pow2(const fmt__scale_ctx *c, const uint32_t *amax, size_t ntp, float *s, float *mul, float *deq,
                        fmt__tile_counts *tc) {
    const uint32_t nonfinite = f2u(nonfinite_tile_scale(c->nan_block));
    const int e_hi = ilogb(c->hi), e_lo = ilogb(c->lo);  // lo is a power of two
    vu clipped = {0};  // per lane: counts (masks are -1)
    for (size_t t = 0; t < ntp; t += W) {
        const vu b = load_u(amax + t), zero = b * 0, one = zero + 1;
        const vu sub = lt(b, zero + 0x800000u);
        const vu nb = sel(sub, bits(__builtin_convertvector((vi)b, vf)), b);
        const vu eb = (nb + c->carry32) >> 23;
        const vi E = (vi)(eb - sel(sub, zero + (127 + 149), zero + 127)) - c->elem_emax;
        const vu over = lt_i((vi)zero + e_hi, E), under = lt_i(E, (vi)zero + e_lo);
        vu st = sel(lt_i(E, (vi)zero - 126), zero + 0x400000u, (vu)(E + 127) << 23);  // E >= -127 here
        st = sel(over, zero + f2u((float)c->hi), sel(under, zero + f2u((float)c->lo), st));
        const vu empty = lt(b, one), special = ~lt(b, zero + 0x7f800000u);
        st = sel(empty, zero + f2u(1.0f), sel(special, zero + nonfinite, st));
        clipped -= (over | under) & ~empty & ~special;
        store_u(s + t, st), store_u(deq + t, st);
        store_u(mul + t, bits(1.0f / as_f(st)));
    }
    tc->clipped += lane_sum(clipped);
}

// Two levels: sf from the need (tq: the need as a float32; sf: it rounded into the scale
// format, saturating), mul = s_enc / sf (at most FLT_MAX), deq = sf / s_enc; clipped where the
// need is above the format's max, where rounding it up saturated below it, or where a nonzero
// tile got sf = 0 (it becomes zero: counted in zeroed too).
static void finish_two_level(const fmt__scale_ctx *c, const uint32_t *amax, size_t ntp, const float *tq, float *s,
                             float *mul, float *deq, fmt__tile_counts *tc) {
    const uint32_t nonfinite = f2u(nonfinite_tile_scale(c->nan_block)), hi = f2u((float)c->hi);
    const vu up = (vu){0} + (c->mode == FMT_RUP ? ~0u : 0u);
    vu clipped = {0};  // per lane: counts (masks are -1)
    for (size_t t = 0; t < ntp; t += W) {
        const vu b = load_u(amax + t), q = load_u(tq + t), zero = b * 0, one = zero + 1;
        vu sf = load_u(s + t);
        const vu special = ~lt(b, zero + 0x7f800000u);  // A is non-finite too, so s_enc == 1
        const vu over = lt(zero + hi, q), zeroed = lt(zero, b) & lt(sf, one) & ~over & ~special;
        clipped -= (over | (up & lt(sf, q)) | zeroed) & ~special;
        sf = sel(special, zero + nonfinite, sel(over, zero + hi, sf));
        const vu keep = lt(sf, one) | lt(zero + 0x7f800000u, sf);  // 0: the block becomes zero; NaN: NaN
        vf m = c->s_enc / as_f(sf);
        m = as_f(sel(lt(zero + f2u(FLT_MAX), bits(m)), zero + f2u(FLT_MAX), bits(m)));
        const vf d = as_f(sf) / c->s_enc;
        store_u(s + t, sf);
        store_u(mul + t, sel(keep, sf, bits(m)));
        store_u(deq + t, sel(keep, sf, bits(d)));
    }
    tc->clipped += lane_sum(clipped);
}

// ---------------------------------------------------------------------------------------------
// the scales of a call's tiles

void fmt__tile_scales(const fmt__scale_ctx *c, const uint32_t *bits, const uint8_t *pick, size_t nt, float *s,
                      float *mul, float *deq, fmt__tile_counts *tc) {
    const size_t ntp = (nt + W - 1) / W * W;
    if (c->nan_block)
        for (size_t t = 0; t < nt; t++) tc->nan += bits[t] >= 0x7f800000u;  // inf or NaN amax
    const bool pow2 = c->rule->carry != NULL;
    if (!c->two_level && pow2) {
        scales_pow2(c, bits, ntp, s, mul, deq, tc);
    } else if (!c->two_level) {  // RNE, UP, RCEIL: the quotient (needed_scale), rounded on its own
        for (size_t t = 0; t < nt; t++) {
            const float a = u2f(bits[t]);
            bool clip = false;
            const float st = a == 0.0f         ? 1.0f
                             : !(a <= FLT_MAX) ? nonfinite_tile_scale(c->nan_block)
                                               : round_scale(c, needed_scale(c, a), &clip);
            s[t] = deq[t] = st;
            mul[t] = 1.0f / st;
            tc->clipped += clip;
        }
    } else if (!pow2) {
        // The need is the float32 quotient tq (kept in mul until finish_two_level): the float32
        // kernel rounds all of them in one call, to what the float64 rounding of each gives.
        for (size_t t = 0; t < ntp; t++)
            s[t] = mul[t] = u2f(bits[t]) / (pick && pick[t] ? c->alt_max : c->elem_max) * c->s_enc;
        fmt__round_f32_kernel(&c->k, c->path, c->mode, s, ntp, 0, NULL);
        finish_two_level(c, bits, ntp, mul, s, mul, deq, tc);
    } else {
        // The power of two of amax * s_enc (exact in double); as a float32 it compares with
        // the format's max as the double does (beyond float32's range it is inf or tiny).
        for (size_t t = 0; t < ntp; t++) {
            const float a = u2f(bits[t]);
            const double need = a > 0.0f && a <= FLT_MAX ? needed_scale(c, (double)a * c->s_enc) : 0.0;
            mul[t] = (float)need;
            s[t] = (float)round_need(c, need);
        }
        finish_two_level(c, bits, ntp, mul, s, mul, deq, tc);
    }
}
