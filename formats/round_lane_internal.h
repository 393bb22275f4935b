// round_lane_internal.h: the float32 rounding method on lanes (round_f32.c's header comment has the
// method): fmt__lane_round rounds the lanes of a vf with the parameters of fmt__k32. Written once
// for two lane types: round_f32.c includes it with vec_internal.h's eight-lane vectors, and
// kernels/cuda/cast_cuda_kernels.cuh with one float32 per lane (a device thread's element).
// Internal to formats/ and to the device casts.
// The includer defines first: the types vu, vi, vf (uint32, int32, float lanes); sel, bits,
// as_f, lt, lt_i and ltu_full with vec_internal.h's meaning; FMT_LANE_FN, the qualifiers of an
// always-inlined function for its target.
// Constraints: only operations whose lane-wise meaning is the scalar one (no shift by 32 or more,
// no vector literal: constants are built from zero_v), so that both instantiations give the same
// bits; tests/test_cast_cuda_shim.c holds the device one to the CPU kernels.
#ifndef FPLAB_ROUND_LANE_INTERNAL_H
#define FPLAB_ROUND_LANE_INTERNAL_H

#include "round_internal.h"

typedef struct {
    vu ovf, unf, sub, nan, inv;  // per-lane counts (subtracting -1 masks)
    vu amax;                     // bits of the largest magnitude
} fmt__lane_counts;

// The increment for one mode, lane-wise; every argument is 0 or 1 per lane.
FMT_LANE_FN vu
fmt__lane_inc(fmt_round_mode mode, vu sign, vu lsb, vu guard, vu sticky, vu sr_up) {
    const vu inexact = guard | sticky;
    switch (mode) {
    case FMT_RNE: return guard & (sticky | lsb);
    case FMT_RNA: return guard;
    case FMT_RUP: return inexact & (sign ^ 1);
    case FMT_RDN: return inexact & sign;
    case FMT_RTO: return inexact & (lsb ^ 1);
    case FMT_SR: return sr_up;
    default: return guard & 0;  // FMT_RTZ
    }
}

// simple (fmt__k32_simple; a constant at every call of the CPU's loops): the format is signed
// with fraction bits and a zero and nothing is flushed, which holds for every table format but
// e8m0; the loop then loses the branches and the work for the other cases.
FMT_LANE_FN vf
fmt__lane_round(const fmt__k32 *k, const bool simple, const fmt_round_mode mode, const vf x, const vu rnd,
                fmt__lane_counts *c) {
    const bool m0 = !simple && k->m0, flush = !simple && k->flush, clamp_min = !simple && k->clamp_min;
    const bool signed_fmt = simple || k->signed_fmt, has_zero = simple || k->has_zero;
    const vu zero_v = bits(x) * 0;  // constant vectors without a vector literal
    const vu one = zero_v + 1, ones = ~zero_v;
    const vu b = bits(x), sign = b >> 31, a = b & 0x7fffffffu, E = a >> 23;
    const vu Ez = lt(E, one);
    const vu Ep = E - Ez;  // max(E, 1)
    const vu sig = (a & 0x7fffffu) | (~Ez & 0x800000u);
    // Inputs at or above the format's smallest normal keep their binade (d = 0). A float32
    // subnormal (E = 0) lies below 2^-126, so its last place is the format's lowest, 2^(emin-m),
    // which d = emin_b - 1 gives even when emin = -127 (e8m0), one binade below float32's.
    vi d = k->emin_b - (vi)Ep;
    d = (vi)sel(Ez | lt_i((vi)zero_v, d), (vu)d, zero_v);
    const vi s = k->sbase + d;
    // sig < 2^24: dropping 25 bits drops all
    const vu s25 = sel(lt_i(s, (vi)zero_v + 25), (vu)s, zero_v + 25);
    const vu q = sig >> s25;
    const vu rem = sig & ((one << s25) - 1u);
    const vu half = (one << s25) >> 1;
    // rem < 2^25, so x + (2^31 - 1) has its top bit set exactly when x != 0
    const vu guard = ((rem & half) + 0x7fffffffu) >> 31, sticky = ((rem & (half - 1u)) + 0x7fffffffu) >> 31;
    // With no fraction bits the last bit of a code is the exponent's (exponent-only codes):
    // the parity of ue + bias, ue = E' - 150 + s the exponent of the last place.
    const vu lsb = m0 ? ((vu)((vi)Ep - 150 + s + k->bias) & 1u & ((0u - q) >> 31)) : (q & 1u);
    vu sr_up = zero_v;
    if (mode == FMT_SR) {
        // Round up iff the top r dropped bits exceed an r-bit uniform draw.
        const vi t = s - k->r, i31 = (vi)zero_v + 31;
        const vu tr = sel(lt_i(t, i31), (vu)t, zero_v + 31), tl = sel(lt_i(-t, i31), (vu)-t, zero_v + 31);
        vu top = sel(lt_i(t, (vi)zero_v), rem << tl, rem >> tr);
        if (k->sr_variant != FMT_SR_A) {
            // B and C round the fraction to r bits first (only where more than r bits drop; top
            // + 1 fits, as rem < 2^25): g is the first bit past the r, st the rest.
            const vu more = lt_i((vi)zero_v, t);
            const vu t1 = sel(more, sel(lt_i(t, i31), (vu)(t - 1), zero_v + 30), zero_v);
            const vu g = (rem >> t1) & more & 1u;
            const vu st = (((rem & ((one << t1) - 1u)) + 0x7fffffffu) >> 31) & more;
            top += k->sr_variant == FMT_SR_B ? g : g & (st | (top & 1u));
        }
        sr_up = ltu_full(rnd >> (32 - k->r), top);
    }
    const vu inc = fmt__lane_inc(mode, sign, lsb, guard, sticky, sr_up);
    // Rebuild the magnitude in the bit pattern: when at most 23 bits are dropped they all lie in
    // x's fraction field, so clearing them and adding one last place carries into the exponent
    // exactly as the value does. Dropping 24 or more bits only happens below the format's
    // smallest subnormal, where the result is that subnormal or zero.
    const vu rb = ((a >> s25) + inc) << s25;
    const vu mag_bits = sel(lt_i(s, (vi)zero_v + 24), rb, (0u - inc) & k->min_sub_bits);

    const vu special = lt(zero_v + 0x7f7fffffu, a), is_nan = lt(zero_v + 0x7f800000u, a);
    const vu neg = (vu)((vi)b >> 31);
    // Below 2^31 for every non-special lane (at most the bits of inf); special lanes are masked.
    const vu over = ~special & lt(zero_v + k->max_bits, mag_bits);
    vu r = sel(over, sel(neg, zero_v + k->ovf1, zero_v + k->ovf0), mag_bits);
    r = sel(special, sel(is_nan, zero_v + k->nan_res, zero_v + k->inf_res), r);
    const vu tiny = ~special & lt(r, zero_v + k->min_normal_bits);  // includes zero
    if (flush) r = sel(tiny, zero_v, r);
    if (clamp_min) r = sel(tiny, zero_v + k->min_normal_bits, r);
    vu inval = zero_v;
    if (!signed_fmt) {
        inval = ~is_nan & ((neg & lt(zero_v, a)) | (has_zero ? zero_v : lt(a, one)));
        inval &= ~(k->after_round_mask & lt(r, one));  // rounded to zero: +0, not invalid
        r = sel(inval, sel(special, zero_v + k->ninf_res, zero_v + k->inval_res), r);
    }
    const vu zero = lt(r, one);
    // Signed zero only where the format has -0; a NaN input without NaN codes becomes -0.
    vu osign = neg & (k->negzero_mask | ~zero);
    osign = sel(is_nan & k->nan_sign_mask, zero_v + k->nan_sign, osign);
    if (!signed_fmt) osign = zero_v;

    if (c) {
        c->ovf -= (over | (special & ~is_nan & ~k->inf_exact_mask)) & ~inval;
        c->unf -= ~special & ~inval & lt(zero_v, a) & (zero | (clamp_min ? tiny : zero_v));
        c->sub -= ~special & ~zero & lt(r, zero_v + k->min_normal_bits) & (clamp_min ? zero_v : ones);
        c->nan -= is_nan;
        c->inv -= inval;
        const vu ax = sel(is_nan, zero_v, a);  // NaN ignored; magnitudes order as their bits
        c->amax = sel(lt(c->amax, ax), ax, c->amax);
    }
    return as_f(r | (osign & 0x80000000u));
}

#endif
