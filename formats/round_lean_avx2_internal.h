// round_lean_avx2_internal.h: what the explicit AVX2 kernels share (round_lean_avx2.c: element
// rounding; round_lean_block_avx2.c: block scaling's one pass and the tiles' amax): round_lean.c's
// element rounding on eight lanes (lean8, with its statistics), stochastic rounding's draws, and
// the lane-mask helpers. round_lean_avx2.c's opening comment has the methods. Every function here
// is always inlined into a TARGET_V3 caller (add_counts_avx2 excepted); internal to formats/.
#ifndef FPLAB_ROUND_LEAN_AVX2_INTERNAL_H
#define FPLAB_ROUND_LEAN_AVX2_INTERNAL_H

#include "round_lean_internal.h"

#ifdef LEAN_X86

#if defined(__AVX2__) && defined(__FMA__)
#define TARGET_V3  // -march has it (never narrow a function's target: round_hw.c)
#else
#define TARGET_V3 FMT_TARGET(FMT_ISA_V3)
#endif
#define V3 TARGET_V3 __attribute__((always_inline)) static inline

typedef __m256i v8;

V3 v8 set1(uint32_t u) { return _mm256_set1_epi32((int)u); }
// Lane masks (all-ones or zero); a lane-wise select by a mask.
V3 v8 gt(v8 a, v8 b) { return _mm256_cmpgt_epi32(a, b); }  // signed
V3 v8 eq(v8 a, v8 b) { return _mm256_cmpeq_epi32(a, b); }
V3 v8 first_lanes(size_t n) { return gt(set1((uint32_t)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }  // n < 8
V3 v8 ltu(v8 a, v8 b) {  // unsigned a < b
    const v8 s = set1(0x80000000u);
    return gt(_mm256_xor_si256(b, s), _mm256_xor_si256(a, s));
}
V3 v8 sel(v8 m, v8 a, v8 b) {  // m ? a : b
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(b), _mm256_castsi256_ps(a),
                                                _mm256_castsi256_ps(m)));
}
V3 v8 and_(v8 a, v8 b) { return _mm256_and_si256(a, b); }
V3 v8 andnot(v8 a, v8 b) { return _mm256_andnot_si256(a, b); }  // ~a & b
V3 v8 or_(v8 a, v8 b) { return _mm256_or_si256(a, b); }
V3 v8 add(v8 a, v8 b) { return _mm256_add_epi32(a, b); }
V3 v8 sub(v8 a, v8 b) { return _mm256_sub_epi32(a, b); }

// rng.h's generator on eight lanes (fmt_rng_u32x8 in intrinsics: a vector-extension function
// without the target cannot be inlined here by Clang in a build whose -march lacks AVX).
V3 v8 mix8(v8 x) {
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, set1(0x7feb352du));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, set1(0x846ca68bu));
    return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

// Lane l: fmt_rng_u32(key, index + l), the generic kernel's draws.
V3 v8 draws8(fmt_rng_key key, uint64_t index) {
    const uint32_t lo0 = (uint32_t)index, hi0 = (uint32_t)(index >> 32);
    const v8 lo = add(set1(lo0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    // The high half of the index, one more in the lanes where the low half wrapped.
    const v8 kh = sel(ltu(lo, set1(lo0)), set1(key.k1 ^ (hi0 + 1) * 0x9e3779b9u), set1(key.k1 ^ hi0 * 0x9e3779b9u));
    v8 x = mix8(_mm256_xor_si256(lo, set1(key.k0)));
    x = mix8(add(x, kh));
    return mix8(_mm256_xor_si256(x, set1(key.k2)));
}

// Whether to round up: round_lean_internal.h's sr_up16 and dropped32 on eight lanes (top32: the
// dropped bits with the first at bit 31).
V3 v8 sr_up8(const lk *k, v8 top32, v8 rnd) {
    if (k->r == 32) return ltu(rnd, top32);
    const __m128i q = _mm_cvtsi32_si128(32 - k->r);
    return ltu(_mm256_srl_epi32(rnd, q), _mm256_srl_epi32(top32, q));
}
V3 v8 dropped8(v8 sig, v8 s) {
    return or_(_mm256_sllv_epi32(sig, sub(set1(32), s)), _mm256_srlv_epi32(sig, sub(s, set1(32))));
}

// The rounded magnitude of a narrow format (ax: |x|'s bits; neg: x's sign as a mask).
V3 v8 narrow_mag8(const lk *k, fmt_round_mode mode, v8 neg, v8 ax, v8 rnd) {
    const v8 axc = _mm256_min_epi32(ax, set1(k->clamp_bits));
    const v8 e = _mm256_max_epi32(and_(axc, set1(0x7f800000)), set1(k->emin_bits));
    const v8 cb = add(e, set1(k->cshift));
    const __m256 xf = _mm256_castsi256_ps(axc), cf = _mm256_castsi256_ps(cb);
    const v8 s = _mm256_castps_si256(_mm256_add_ps(xf, cf));  // to nearest
    const __m256 yf = _mm256_sub_ps(_mm256_castsi256_ps(s), cf);
    const v8 y = _mm256_castps_si256(yf);
    const v8 went_up = gt(y, axc), went_down = gt(axc, y);
    const v8 trunc = add(s, went_up), away = sub(s, went_down);  // masks are -1
    v8 s1;
    switch (mode) {
    case FMT_RNE: s1 = s; break;
    case FMT_RUP: s1 = sel(neg, trunc, away); break;
    case FMT_RDN: s1 = sel(neg, away, trunc); break;
    case FMT_RNA: {  // ties go up: where s went down from a tie (|x| - y = u/2, u = c 2^-23)
        const __m256 half = _mm256_mul_ps(cf, _mm256_set1_ps(0x1p-24f));
        const v8 tie = _mm256_castps_si256(_mm256_cmp_ps(_mm256_sub_ps(xf, yf), half, _CMP_EQ_OQ));
        s1 = sub(s, and_(went_down, tie));
        break;
    }
    case FMT_RTO: s1 = or_(trunc, and_(or_(went_up, went_down), set1(1))); break;
    case FMT_SR: {  // the s dropped bits of |x|'s significand: exponent field of c less |x|'s (>= 1)
        const v8 Ex = _mm256_srli_epi32(axc, 23);
        const v8 sig = or_(and_(axc, set1(0x7fffff)), andnot(eq(Ex, _mm256_setzero_si256()), set1(0x800000)));
        const v8 sd = sub(_mm256_srli_epi32(cb, 23), _mm256_max_epi32(Ex, set1(1)));
        s1 = sub(trunc, sr_up8(k, dropped8(sig, sd), rnd));
        break;
    }
    default: s1 = trunc; break;  // FMT_RTZ
    }
    return _mm256_castps_si256(_mm256_sub_ps(_mm256_castsi256_ps(s1), cf));  // exact
}

V3 v8 wide_mag8(const lk *k, fmt_round_mode mode, v8 neg, v8 ax, v8 rnd) {
    const v8 mask = set1(k->mask), unit = set1(k->mask + 1);
    const uint32_t half = (k->mask + 1) >> 1;
    const v8 tr = andnot(mask, ax);
    switch (mode) {
    case FMT_RNE: {  // ax + (half - 1) + lsb; with nothing dropped (fp32) neither term
        const v8 lsb = and_(_mm256_srl_epi32(ax, _mm_cvtsi32_si128(k->s)), set1(k->mask ? 1 : 0));
        return andnot(mask, add(add(ax, set1(half ? half - 1 : 0)), lsb));
    }
    case FMT_RNA: return andnot(mask, add(ax, set1(half)));
    case FMT_RUP: return andnot(mask, add(ax, andnot(neg, mask)));
    case FMT_RDN: return andnot(mask, add(ax, and_(neg, mask)));
    case FMT_RTO: return or_(tr, andnot(eq(and_(ax, mask), _mm256_setzero_si256()), unit));
    case FMT_SR: return add(tr, and_(sr_up8(k, _mm256_sllv_epi32(ax, set1((uint32_t)(32 - k->s))), rnd), unit));
    default: return tr;  // FMT_RTZ
    }
}

// Per-lane statistics, as round_lean.c's lean_counts (counters subtract -1 masks).
typedef struct {
    v8 ovf, unf, sub, nan, inv, amax;
} counts8;

// e8m0: round_lean.c's e8m0_16 on eight lanes.
V3 v8 e8m0_8(const lk *k, fmt_round_mode mode, v8 b, v8 rnd, counts8 *cnt, v8 live) {
    const v8 zero = _mm256_setzero_si256(), one = set1(1);
    const v8 ax = and_(b, set1(0x7fffffff));
    const v8 normal = gt(ax, set1(0x7fffff));
    const v8 m = sel(normal, set1(0x7fffff), set1(0x3fffff));
    const v8 lsb = and_(_mm256_srli_epi32(ax, 23), one);
    const v8 tr = andnot(m, ax), ulp = add(m, one);
    v8 r;
    switch (mode) {
    case FMT_RNE: r = andnot(m, add(add(ax, _mm256_srli_epi32(m, 1)), lsb)); break;
    case FMT_RNA: r = andnot(m, add(ax, _mm256_srli_epi32(ulp, 1))); break;
    case FMT_RUP: r = andnot(m, add(ax, m)); break;
    case FMT_RTO:  // up by one place where inexact with an even last bit
        r = add(tr, andnot(or_(eq(and_(ax, m), zero), eq(lsb, one)), ulp));
        break;
    case FMT_SR: r = add(tr, and_(sr_up8(k, _mm256_sllv_epi32(ax, sel(normal, set1(9), set1(10))), rnd), ulp)); break;
    default: r = tr; break;  // rtz, rdn: down for every valid (positive) input
    }
    const v8 finite = gt(set1(0x7f800000), ax);
    const v8 over = and_(finite, gt(r, set1(k->max_bits)));
    r = sel(over, set1(k->ovf0), r);
    r = sel(finite, r, set1(k->inf_res));
    const v8 min_normal = set1(k->min_normal_bits);
    const v8 notnan = gt(set1(0x7f800001), ax);
    const v8 valid = and_(notnan, gt(b, zero));  // > +0
    if (cnt) {
        const v8 tiny = and_(finite, gt(min_normal, r));
        cnt->ovf = sub(cnt->ovf, and_(and_(live, valid), or_(over, andnot(finite, set1(~0u)))));
        cnt->unf = sub(cnt->unf, and_(and_(live, valid), tiny));
        cnt->nan = sub(cnt->nan, andnot(notnan, live));
        cnt->inv = sub(cnt->inv, and_(and_(live, notnan), andnot(gt(b, zero), set1(~0u))));
        cnt->amax = _mm256_max_epi32(cnt->amax, and_(and_(live, notnan), ax));
    }
    r = sel(finite, _mm256_max_epi32(r, min_normal), r);
    return sel(valid, r, set1(0x7fc00000));
}

// round(b), counting into cnt (NULL: nothing) the lanes of live: lean16's rules.
V3 v8 lean8(const lk *k, lean_class cls, fmt_round_mode mode, v8 b, v8 rnd, counts8 *cnt, v8 live) {
    if (cls == LEAN_E8M0) return e8m0_8(k, mode, b, rnd, cnt, live);
    const v8 signbit = set1(0x80000000u), zero = _mm256_setzero_si256();
    const v8 ax = andnot(signbit, b), sgn = and_(b, signbit);
    const v8 neg = _mm256_srai_epi32(b, 31);
    v8 r = cls == LEAN_WIDE ? wide_mag8(k, mode, neg, ax, rnd) : narrow_mag8(k, mode, neg, ax, rnd);
    const v8 over = gt(r, set1(k->max_bits));
    const v8 ovf = k->ovf0 == k->ovf1 ? set1(k->ovf0) : sel(neg, set1(k->ovf1), set1(k->ovf0));
    r = sel(over, ovf, r);
    const v8 special = gt(ax, set1(0x7f7fffff));
    r = sel(special, set1(k->inf_res), r);
    if (k->flush) r = andnot(gt(set1(k->min_normal_bits), r), r);
    const v8 iszero = eq(r, zero);
    const v8 nan = gt(ax, set1(0x7f800000));
    if (cnt) {
        // overflow: a finite input beyond max, or an inf input where inf is not exact
        const v8 ordinary = andnot(special, live);
        const v8 inf_in = andnot(nan, and_(live, special));
        cnt->ovf = sub(cnt->ovf, or_(and_(ordinary, over), k->inf_exact ? zero : inf_in));
        cnt->unf = sub(cnt->unf, and_(and_(ordinary, iszero), andnot(eq(ax, zero), set1(~0u))));
        cnt->sub = sub(cnt->sub, andnot(iszero, and_(ordinary, gt(set1(k->min_normal_bits), r))));
        cnt->nan = sub(cnt->nan, and_(live, nan));
        cnt->amax = _mm256_max_epi32(cnt->amax, andnot(nan, and_(live, ax)));
    }
    // The sign: kept on zeros only where the format has -0.
    r = k->negzero ? or_(r, sgn) : or_(r, andnot(iszero, sgn));
    // NaN: the quiet NaN with x's sign, or -0 where the format has no NaN.
    const v8 nanv = k->has_nan ? or_(sgn, set1(0x7fc00000)) : signbit;
    return sel(nan, nanv, r);
}

V3 uint64_t hsum8(v8 v) {
    uint32_t t[8];
    memcpy(t, &v, sizeof t);
    uint64_t s = 0;
    for (int l = 0; l < 8; l++) s += t[l];
    return s;
}

TARGET_V3 static void add_counts_avx2(fmt__counts *counts, const counts8 *c) {
    counts->overflow += hsum8(c->ovf);
    counts->underflow += hsum8(c->unf);
    counts->subnormal += hsum8(c->sub);
    counts->nan_in += hsum8(c->nan);
    counts->invalid += hsum8(c->inv);
    uint32_t t[8];
    memcpy(t, &c->amax, sizeof t);
    for (int l = 0; l < 8; l++) {
        float a;
        memcpy(&a, &t[l], sizeof a);
        if (a > counts->amax) counts->amax = a;
    }
}

#endif  // LEAN_X86

#endif
