// round_f32.c: the fast float32 rounding kernel, for every format whose values embed in float32
// (every named format up to fp32, e8m0 included).
// Constraints: branch-free 32-bit integer arithmetic on eight lanes at once, written with
// GCC/Clang vector extensions so that it is vectorised by construction (AVX2 here, NEON or
// SSE elsewhere), not by the auto-vectoriser's goodwill; no libm, no MPFR.
//
// The method: write |x| = sig * 2^(E'-150) with sig < 2^24. The format's last place at x is
// 2^ue, ue = max(exponent(x), emin) - m, so s = ue - (E'-150) low bits of sig are dropped;
// the mode decides from (lsb, guard, sticky) whether to add one; the result is q * 2^ue, exact
// in float32. Overflow is judged on that unbounded-exponent result, as IEEE 754 defines it.
// round_f64.c is the same method on scalar 64-bit lanes, and the tests hold the two together.
#include <math.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "round_internal.h"

typedef uint32_t vu __attribute__((vector_size(32)));
typedef int32_t vi __attribute__((vector_size(32)));
typedef float vf __attribute__((vector_size(32)));
enum { W = 8 };

// Lane select: m is a mask of all-ones or all-zeros lanes (what vector comparisons return).
// One blend instruction on AVX2; the portable form costs three logic operations.
static inline vu sel(vu m, vu a, vu b) {
#if defined(__AVX2__)
    return (vu)__builtin_ia32_pblendvb256((__v32qi)b, (__v32qi)a, (__v32qi)m);
#else
    return b ^ ((a ^ b) & m);
#endif
}
static inline vu bits(vf x) { return (vu)x; }
static inline vf as_f(vu x) { return (vf)x; }

typedef struct {
    int32_t sbase, emin_b, bias, r;
    bool m0, signed_fmt, flush, clamp_min, has_nan, has_zero;
    uint32_t negzero_mask, inf_exact_mask;  // all-ones when true
    float max, min_normal;
    // float32 bit patterns; min_sub is 2^(emin-m), the last place of the lowest binade
    uint32_t max_bits, min_sub_bits, min_normal_bits, ovf0, ovf1, inf_res, nan_res, inval_res;
} k32;

typedef struct {
    vu ovf, unf, sub, nan, inv;  // per-lane counts (subtracting -1 masks)
    vf amax;
} vcounts;

// The increment for one mode, lane-wise; every argument is 0 or 1 per lane.
static inline vu round_inc(fmt_round_mode mode, vu sign, vu lsb, vu guard, vu sticky, vu sr_up) {
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

static inline __attribute__((always_inline)) vf
round8(const k32 *k, const fmt_round_mode mode, const vf x, const vu rnd, vcounts *c) {
    const vu one = bits(x) * 0 + 1;  // a vector of ones without a constant-vector literal
    const vu b = bits(x), sign = b >> 31, a = b & 0x7fffffffu, E = a >> 23;
    const vu Ez = (vu)(E == 0);
    const vu Ep = sel(Ez, one, E);
    const vu sig = (a & 0x7fffffu) | (~Ez & 0x800000u);
    // Inputs at or above the format's smallest normal keep their binade (d = 0). A float32
    // subnormal (E = 0) lies below 2^-126, so its last place is the format's lowest, 2^(emin-m),
    // which d = emin_b - 1 gives even when emin = -127 (e8m0), one binade below float32's.
    vi d = k->emin_b - (vi)Ep;
    d = (vi)sel(Ez | (vu)(d > 0), (vu)d, one * 0);
    const vi s = k->sbase + d;
    const vu s25 = sel((vu)(s < 25), (vu)s, one * 25);  // sig < 2^24: dropping 25 bits drops all
    const vu q = sig >> s25;
    const vu rem = sig & ((one << s25) - 1u);
    const vu half = (one << s25) >> 1;
    const vu guard = (vu)((rem & half) != 0) & 1u, sticky = (vu)((rem & (half - 1u)) != 0) & 1u;
    // With no fraction bits the last bit of a code is the exponent's (exponent-only codes):
    // the parity of ue + bias, ue = E' - 150 + s the exponent of the last place.
    const vu lsb = k->m0 ? ((vu)((vi)Ep - 150 + s + k->bias) & 1u & ((0u - q) >> 31)) : (q & 1u);
    vu sr_up = q * 0;
    if (mode == FMT_SR) {
        // Round up iff the top r dropped bits exceed an r-bit uniform draw.
        const vi t = s - k->r;
        const vu tr = sel((vu)(t < 31), (vu)t, one * 31), tl = sel((vu)(-t < 31), (vu)-t, one * 31);
        const vu top = sel((vu)(t >= 0), rem >> tr, rem << tl);
        sr_up = (vu)((rnd >> (32 - k->r)) < top) & 1u;
    }
    const vu inc = round_inc(mode, sign, lsb, guard, sticky, sr_up);
    // Rebuild the magnitude in the bit pattern: when at most 23 bits are dropped they all lie in
    // x's fraction field, so clearing them and adding one last place carries into the exponent
    // exactly as the value does. Dropping 24 or more bits only happens below the format's
    // smallest subnormal, where the result is that subnormal or zero.
    const vu rb = ((a >> s25) + inc) << s25;
    const vu mag_bits = sel((vu)(s < 24), rb, (0u - inc) & k->min_sub_bits);
    const vf mag = as_f(mag_bits);

    const vu special = (vu)(E == 255u), is_nan = special & (vu)((a & 0x7fffffu) != 0);
    const vu neg = (vu)(sign != 0);
    const vu over = ~special & (vu)(mag_bits > k->max_bits);  // both non-negative: bits order as values
    vu r = sel(over, sel(neg, one * k->ovf1, one * k->ovf0), bits(mag));
    r = sel(special, sel(is_nan, one * k->nan_res, one * k->inf_res), r);
    const vu tiny = ~special & (vu)(as_f(r) < k->min_normal);  // includes zero
    if (k->flush) r = sel(tiny, one * 0, r);
    if (k->clamp_min) r = sel(tiny, one * k->min_normal_bits, r);
    vu inval = one * 0;
    if (!k->signed_fmt) {
        inval = ~is_nan & ((neg & (vu)(a != 0)) | (k->has_zero ? one * 0 : (vu)(a == 0)));
        r = sel(inval, one * k->inval_res, r);
    }
    const vu zero = (vu)(r == 0);
    // Signed zero only where the format has -0; a NaN input without NaN codes becomes -0.
    vu osign = neg & (k->negzero_mask | ~zero);
    if (!k->has_nan) osign = sel(is_nan, one * (k->signed_fmt ? ~0u : 0u), osign);
    if (!k->signed_fmt) osign = one * 0;

    if (c) {
        c->ovf -= (over | (special & ~is_nan & ~k->inf_exact_mask)) & ~inval;
        c->unf -= ~special & ~inval & (vu)(a != 0) & (zero | (k->clamp_min ? tiny : one * 0));
        c->sub -= ~special & ~zero & (vu)(as_f(r) < k->min_normal) & (k->clamp_min ? one * 0 : ~(one * 0));
        c->nan -= is_nan;
        c->inv -= inval;
        const vf ax = as_f(sel(is_nan, one * 0, a));  // NaN ignored
        c->amax = as_f(sel((vu)(ax > c->amax), bits(ax), bits(c->amax)));
    }
    return as_f(r | (osign & 0x80000000u));
}

static uint64_t hsum(vu v) {
    uint64_t s = 0;
    for (int l = 0; l < W; l++) s += v[l];
    return s;
}

static inline __attribute__((always_inline)) void
round_loop(const k32 *k, const fmt_rng_key key, const uint64_t first, const fmt_round_mode mode,
           float *restrict x, const size_t n, fmt__counts *out) {
    vcounts vc = {0};
    vcounts *c = out ? &vc : NULL;
    const vu zero_draws = {0};
    size_t i = 0;
    for (; i + W <= n; i += W) {
        vf v;
        memcpy(&v, x + i, sizeof v);
        const vu rnd = mode == FMT_SR ? fmt_rng_u32x8(key, first + i) : zero_draws;
        v = round8(k, mode, v, rnd, c);
        memcpy(x + i, &v, sizeof v);
    }
    if (i < n) {  // the tail, padded with +0; the padding lanes are masked out of the counts
        float tail[W] = {0};
        memcpy(tail, x + i, (n - i) * sizeof *x);
        vf v;
        memcpy(&v, tail, sizeof v);
        const vu rnd = mode == FMT_SR ? fmt_rng_u32x8(key, first + i) : zero_draws;
        vcounts tc = {0};
        v = round8(k, mode, v, rnd, c ? &tc : NULL);
        memcpy(tail, &v, sizeof v);
        memcpy(x + i, tail, (n - i) * sizeof *x);
        const vu lane = {0, 1, 2, 3, 4, 5, 6, 7};
        const vu live = (vu)(lane < (uint32_t)(n - i));
        vc.ovf += tc.ovf & live, vc.unf += tc.unf & live, vc.sub += tc.sub & live;
        vc.nan += tc.nan & live, vc.inv += tc.inv & live;
        vc.amax = as_f(sel((vu)(tc.amax > vc.amax) & live, bits(tc.amax), bits(vc.amax)));
    }
    if (!out) return;
    out->overflow += hsum(vc.ovf), out->underflow += hsum(vc.unf), out->subnormal += hsum(vc.sub);
    out->nan_in += hsum(vc.nan), out->invalid += hsum(vc.inv);
    for (int l = 0; l < W; l++)
        if (vc.amax[l] > out->amax) out->amax = vc.amax[l];
}

static uint32_t f2u(double d) {
    float f = (float)d;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

void fmt__round_f32_kernel(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n,
                           uint64_t base, fmt__counts *c) {
    const k32 k = {
        .sbase = 23 - p->m, .emin_b = p->emin + 127, .bias = p->bias, .r = p->sr_bits,
        .m0 = p->m == 0, .signed_fmt = p->is_signed, .flush = p->flush, .clamp_min = p->clamp_min,
        .has_nan = p->has_nan, .has_zero = p->has_zero,
        .negzero_mask = p->negzero ? ~0u : 0u, .inf_exact_mask = p->inf_exact ? ~0u : 0u,
        .max = (float)p->max, .min_normal = (float)p->min_normal, .min_normal_bits = f2u(p->min_normal),
        .max_bits = f2u(p->max), .min_sub_bits = f2u(ldexp(1.0, p->emin - p->m)),
        .ovf0 = f2u(p->ovf[0]), .ovf1 = f2u(p->ovf[1]), .inf_res = f2u(p->inf_result),
        .nan_res = p->has_nan ? 0x7fc00000u : 0u, .inval_res = p->has_nan ? 0x7fc00000u : 0u,
    };
    const uint64_t first = p->offset + base;
    // Per-lane 32-bit counters: blocks of at most 2^31 elements cannot wrap them.
    for (size_t done = 0; done < n;) {
        const size_t len = n - done < ((size_t)1 << 31) ? n - done : (size_t)1 << 31;
        float *xs = x + done;
        const uint64_t f0 = first + done;
        // One specialised loop per mode, so the mode switch is outside the vector loop.
        switch (mode) {
        case FMT_RNE: round_loop(&k, p->key, f0, FMT_RNE, xs, len, c); break;
        case FMT_RNA: round_loop(&k, p->key, f0, FMT_RNA, xs, len, c); break;
        case FMT_RTZ: round_loop(&k, p->key, f0, FMT_RTZ, xs, len, c); break;
        case FMT_RUP: round_loop(&k, p->key, f0, FMT_RUP, xs, len, c); break;
        case FMT_RDN: round_loop(&k, p->key, f0, FMT_RDN, xs, len, c); break;
        case FMT_RTO: round_loop(&k, p->key, f0, FMT_RTO, xs, len, c); break;
        case FMT_SR: round_loop(&k, p->key, f0, FMT_SR, xs, len, c); break;
        default: return;
        }
        done += len;
    }
}
