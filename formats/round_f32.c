// round_f32.c: the generic float32 rounding kernel, for every format whose values embed in float32
// (every named format up to fp32, e8m0 included), and its copies for wider instruction sets.
// Constraints: branch-free 32-bit integer arithmetic on eight lanes at once, written with
// GCC/Clang vector extensions so that it is vectorised by construction (AVX-512, AVX2, SSE or
// NEON), not by the auto-vectoriser's goodwill; no intrinsics (round_hw.c has those), no libm
// per element, no MPFR. This kernel is the reference every other float32 path is held to.
//
// The method: write |x| = sig * 2^(E'-150) with sig < 2^24. The format's last place at x is
// 2^ue, ue = max(exponent(x), emin) - m, so s = ue - (E'-150) low bits of sig are dropped;
// the mode decides from (lsb, guard, sticky) whether to add one; the result is q * 2^ue, exact
// in float32. Overflow is judged on that unbounded-exponent result, as IEEE 754 defines it.
// round_f64.c is the same method on scalar 64-bit lanes, and the tests hold the two together.
//
// Copies per instruction set (see round_internal.h): the kernel is one always-inline body,
// compiled once for the build's -march and, in a portable build, again for x86-64-v3 and
// x86-64-v4; round.c picks the widest the CPU runs. Without them, the per-lane variable shifts of
// SSE code are scalarised (docs/benchmarks.md, "Comments' measurements", has the cost).
#include <math.h>
#include <string.h>

#include "isa_targets.h"
#include "round_internal.h"
#include "vec_internal.h"

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
} k32;

typedef struct {
    vu ovf, unf, sub, nan, inv;  // per-lane counts (subtracting -1 masks)
    vu amax;                     // bits of the largest magnitude
} vcounts;

// The increment for one mode, lane-wise; every argument is 0 or 1 per lane.
static inline __attribute__((always_inline)) vu
round_inc(fmt_round_mode mode, vu sign, vu lsb, vu guard, vu sticky, vu sr_up) {
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

// simple (a constant at every call): the format is signed with fraction bits and a zero and
// nothing is flushed, which holds for every table format but e8m0; the loop then loses the
// branches and the work for the other cases.
static inline __attribute__((always_inline)) vf
round_w(const k32 *k, const bool simple, const fmt_round_mode mode, const vf x, const vu rnd,
        vcounts *c) {
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
    const vu inc = round_inc(mode, sign, lsb, guard, sticky, sr_up);
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

// W draws: lane l holds fmt_rng_u32(key, index + l).
static inline __attribute__((always_inline)) vu rng_w(fmt_rng_key key, uint64_t index) {
    return fmt_rng_u32x8(key, index);
}

static uint64_t hsum(vu v) {
    uint64_t s = 0;
    for (int l = 0; l < W; l++) s += v[l];
    return s;
}

static inline __attribute__((always_inline)) void
round_loop(const k32 *k, const fmt_rng_key key, const uint64_t first, const bool simple,
           const fmt_round_mode mode, float *restrict x, const size_t n, fmt__counts *out) {
    vcounts vc = {0};
    vcounts *c = out ? &vc : NULL;
    const vu zero_draws = {0};
    size_t i = 0;
    for (; i + W <= n; i += W) {
        vf v;
        memcpy(&v, x + i, sizeof v);
        const vu rnd = mode == FMT_SR ? rng_w(key, first + i) : zero_draws;
        v = round_w(k, simple, mode, v, rnd, c);
        memcpy(x + i, &v, sizeof v);
    }
    if (i < n) {  // the tail, padded with +0; the padding lanes are masked out of the counts
        float tail[W] = {0};
        memcpy(tail, x + i, (n - i) * sizeof *x);
        vf v;
        memcpy(&v, tail, sizeof v);
        const vu rnd = mode == FMT_SR ? rng_w(key, first + i) : zero_draws;
        vcounts tc = {0};
        v = round_w(k, simple, mode, v, rnd, c ? &tc : NULL);
        memcpy(tail, &v, sizeof v);
        memcpy(x + i, tail, (n - i) * sizeof *x);
        const vu lane = {0, 1, 2, 3, 4, 5, 6, 7};
        const vu live = lt(lane, lane * 0 + (uint32_t)(n - i));
        vc.ovf += tc.ovf & live, vc.unf += tc.unf & live, vc.sub += tc.sub & live;
        vc.nan += tc.nan & live, vc.inv += tc.inv & live;
        vc.amax = sel(lt(vc.amax, tc.amax) & live, tc.amax, vc.amax);
    }
    if (!out) return;
    out->overflow += hsum(vc.ovf), out->underflow += hsum(vc.unf), out->subnormal += hsum(vc.sub);
    out->nan_in += hsum(vc.nan), out->invalid += hsum(vc.inv);
    for (int l = 0; l < W; l++) {
        float a;
        memcpy(&a, (const uint32_t *)&vc.amax + l, sizeof a);
        if (a > out->amax) out->amax = a;
    }
}

static uint32_t f2u(double d) {
    float f = (float)d;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static k32 k32_make(const fmt__kparams *p) {
    const k32 k = {
        .sbase = 23 - p->m, .emin_b = p->emin + 127, .bias = p->bias, .r = p->sr_bits, .sr_variant = p->sr_variant,
        .m0 = p->m == 0, .signed_fmt = p->is_signed, .flush = p->flush, .clamp_min = p->clamp_min,
        .has_nan = p->has_nan, .has_zero = p->has_zero,
        .negzero_mask = p->negzero ? ~0u : 0u, .inf_exact_mask = p->inf_exact ? ~0u : 0u,
        .nan_sign_mask = p->has_nan ? 0u : ~0u, .nan_sign = p->is_signed ? ~0u : 0u,
        .min_normal_bits = f2u(p->min_normal),
        .max_bits = f2u(p->max), .min_sub_bits = f2u(ldexp(1.0, p->emin - p->m)),
        .ovf0 = f2u(p->ovf[0]), .ovf1 = f2u(p->ovf[1]), .inf_res = f2u(p->inf_result),
        .nan_res = p->has_nan ? 0x7fc00000u : 0u, .inval_res = f2u(p->inval_result), .ninf_res = f2u(p->ninf_result),
        .after_round_mask = p->inval_after_round ? ~0u : 0u,
    };
    return k;
}

// One loop per mode (and per simple or not), so that these switches are outside the vector loop.
static inline __attribute__((always_inline)) void
mode_loop(const k32 *k, const fmt_rng_key key, const uint64_t first, const bool simple,
          const fmt_round_mode mode, float *x, const size_t n, fmt__counts *c) {
    switch (mode) {
    case FMT_RNE: round_loop(k, key, first, simple, FMT_RNE, x, n, c); break;
    case FMT_RNA: round_loop(k, key, first, simple, FMT_RNA, x, n, c); break;
    case FMT_RTZ: round_loop(k, key, first, simple, FMT_RTZ, x, n, c); break;
    case FMT_RUP: round_loop(k, key, first, simple, FMT_RUP, x, n, c); break;
    case FMT_RDN: round_loop(k, key, first, simple, FMT_RDN, x, n, c); break;
    case FMT_RTO: round_loop(k, key, first, simple, FMT_RTO, x, n, c); break;
    case FMT_SR: round_loop(k, key, first, simple, FMT_SR, x, n, c); break;
    default: break;
    }
}

static inline __attribute__((always_inline)) void
kernel_body(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n, uint64_t base,
            fmt__counts *c) {
    const k32 k = k32_make(p);
    const bool simple = k.signed_fmt && !k.m0 && !k.flush && !k.clamp_min;
    const uint64_t first = p->offset + base;
    // Per-lane 32-bit counters: blocks of at most 2^31 elements cannot wrap them.
    for (size_t done = 0; done < n;) {
        const size_t len = n - done < ((size_t)1 << 31) ? n - done : (size_t)1 << 31;
        if (simple) mode_loop(&k, p->key, first + done, true, mode, x + done, len, c);
        else mode_loop(&k, p->key, first + done, false, mode, x + done, len, c);
        done += len;
    }
}

// --- the copies per instruction set (same source, same bits)

typedef void kernel_fn(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n,
                       uint64_t base, fmt__counts *c);

static void kernel_generic(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n,
                           uint64_t base, fmt__counts *c) {
    kernel_body(p, mode, x, n, base, c);
}

#ifdef FMT__AVX2_COPY
FMT_TARGET(FMT_ISA_V3) static void
kernel_avx2(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n, uint64_t base,
            fmt__counts *c) {
    kernel_body(p, mode, x, n, base, c);
}
#endif

#ifdef FMT__AVX512_COPY
FMT_TARGET(FMT_ISA_V4) static void
kernel_avx512(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n, uint64_t base,
              fmt__counts *c) {
    kernel_body(p, mode, x, n, base, c);
}
#endif

// The copy for path, or NULL where this build has none or the CPU cannot run it.
static kernel_fn *variant(fmt_round_path path) {
    if (!fmt__copy_runs(path)) return NULL;
    switch (path) {
    case FMT_PATH_GENERIC: return kernel_generic;
#ifdef FMT__AVX2_COPY
    case FMT_PATH_AVX2: return kernel_avx2;
#endif
#ifdef FMT__AVX512_COPY
    case FMT_PATH_AVX512: return kernel_avx512;
#endif
    default: return NULL;
    }
}

void fmt__round_f32_kernel(const fmt__kparams *p, fmt_round_path path, fmt_round_mode mode,
                           float *x, size_t n, uint64_t base, fmt__counts *c) {
    kernel_fn *fn = NULL;
    if (path == FMT_PATH_HW || path == FMT_PATH_LEAN) {
        if (path == FMT_PATH_HW ? fmt__round_f32_hw(p, mode, x, n) : fmt__round_f32_lean(p, mode, x, x, n, base, c))
            return;
        fn = variant(fmt__best_copy());  // declined: the generic kernel (the same bits)
    } else {
        fn = variant(path);
    }
    if (fn) fn(p, mode, x, n, base, c);
}
