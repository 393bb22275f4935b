// round_lean_internal.h: what the explicit AVX-512 kernels share (round_lean.c: rounding and
// codes; round_lean_block.c: block scaling's one pass and the tiles' amax): the per-call
// constants, stochastic rounding's draws on sixteen lanes, the rounded magnitude by method and
// mode, the generic kernel's rules with their statistics (lean16), and the dispatch macros that
// make one loop per (method, mode, statistics). round_lean.c's opening comment has the methods.
// Every function here is always inlined into a TARGET_V4 caller; internal to formats/.
#ifndef FPLAB_ROUND_LEAN_INTERNAL_H
#define FPLAB_ROUND_LEAN_INTERNAL_H

#include <string.h>

#include "codec_internal.h"
#include "isa_targets.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LEAN_X86 1
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#define BUILD_V4 1
#define TARGET_V4  // -march has it: never narrow a function's target (see round_hw.c)
#else
#define TARGET_V4 FMT_TARGET(FMT_ISA_V4)
#endif
#endif

#ifdef LEAN_X86

static inline bool cpu_v4(void) {
#if defined(BUILD_V4)
    return true;
#elif defined(__clang__)
    return false;
#else
    return __builtin_cpu_supports("x86-64-v4");
#endif
}

typedef enum { LEAN_NONE, LEAN_WIDE, LEAN_NARROW, LEAN_E8M0 } lean_class;

static inline lean_class class_of(const fmt__kparams *k) {
    if (k->special == FMT_E8M0 && k->m == 0 && k->emin == -127 && k->emax == 127 && k->bias == 127 &&
        !k->is_signed && k->clamp_min && k->has_nan)
        return LEAN_E8M0;
    if (!k->is_signed || k->clamp_min || k->m < 1 || k->m > 23 || k->special == FMT_E8M0) return LEAN_NONE;
    if (k->emin == -126) return LEAN_WIDE;
    // c = 2^(emax + 24 - m) at the clamp must be finite; half the lowest last place,
    // 2^(emin - m - 1), a float32 (rna).
    if (k->emin > -126 && k->m <= 22 && k->emax + 24 - k->m <= 127 && k->emin - k->m >= -148)
        return LEAN_NARROW;
    return LEAN_NONE;
}

// Per-call constants, as float32 bit patterns.
typedef struct {
    uint32_t clamp_bits;  // narrow: 2^(emax+1)
    uint32_t emin_bits;   // narrow: exponent field of 2^emin
    uint32_t cshift;      // narrow: (23 - m) << 23, from x's exponent field to c's
    uint32_t mask;        // wide: the dropped bits, 2^(23-m) - 1 ...
    int s;                // ... and their count
    uint32_t max_bits, min_normal_bits, ovf0, ovf1, inf_res;
    bool flush, negzero, has_nan, inf_exact;
    int r;                // stochastic rounding: random bits per draw (1..32) ...
    fmt_rng_key key;      // ... the generator's key ...
    uint64_t first;       // ... and the counter of element 0 of the call
    bool code_direct;     // narrow: the code's exponent field is E + bias with emin = 1 - bias
                          // (narrow_code16's encoding)
} lk;

static inline uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

#define V4 TARGET_V4 __attribute__((always_inline)) static inline

// --- stochastic rounding's draws: the generator of rng.h (fmt_rng_u32) on sixteen lanes
// (tests/test_sr.c and verify_exhaustive hold the results to the generic kernel's, which draws
// through fmt_rng_u32x8)

V4 __m512i mix16(__m512i x) {
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x7feb352d));
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32((int)0x846ca68bu));
    return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
}

// Lane l: fmt_rng_u32(key, index + l).
V4 __m512i draws16(fmt_rng_key key, uint64_t index) {
    const uint32_t lo0 = (uint32_t)index, hi0 = (uint32_t)(index >> 32);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i lo = _mm512_add_epi32(_mm512_set1_epi32((int)lo0), lane);
    // The high half of the index, one more in the lanes where the low half wrapped.
    const __mmask16 carry = _mm512_cmplt_epu32_mask(lo, _mm512_set1_epi32((int)lo0));
    const __m512i kh = _mm512_mask_blend_epi32(carry, _mm512_set1_epi32((int)(key.k1 ^ hi0 * 0x9e3779b9U)),
                                               _mm512_set1_epi32((int)(key.k1 ^ (hi0 + 1) * 0x9e3779b9U)));
    __m512i x = mix16(_mm512_xor_si512(lo, _mm512_set1_epi32((int)key.k0)));
    x = mix16(_mm512_add_epi32(x, kh));
    return mix16(_mm512_xor_si512(x, _mm512_set1_epi32((int)key.k2)));
}

// Whether to round up: the top r of the dropped bits exceed an r-bit draw, as the generic kernel
// decides. top32 holds the dropped bits with the first of them at bit 31 (bits dropped more than
// 32 places down are gone), so the top r are top32 >> (32 - r): two shifts fewer than aligning
// the dropped bits to r (and the common r = 32 needs none).
V4 __mmask16 sr_up16(const lk *k, __m512i top32, __m512i rnd) {
    if (k->r == 32) return _mm512_cmplt_epu32_mask(rnd, top32);
    const __m128i q = _mm_cvtsi32_si128(32 - k->r);
    return _mm512_cmplt_epu32_mask(_mm512_srl_epi32(rnd, q), _mm512_srl_epi32(top32, q));
}

// The last s bits of sig (s >= 1, sig < 2^24) with the first at bit 31: sig << (32 - s), whose
// kept bits pass bit 31, or sig >> (s - 32) past 32 (a shift by 32 or more gives 0, so one of
// the two terms is 0; s = 32 gives sig twice).
V4 __m512i dropped32(__m512i sig, __m512i s) {
    const __m512i c32 = _mm512_set1_epi32(32);
    return _mm512_or_si512(_mm512_sllv_epi32(sig, _mm512_sub_epi32(c32, s)),
                           _mm512_srlv_epi32(sig, _mm512_sub_epi32(s, c32)));
}

// --- the rounded magnitude, by method and mode (lanes of inf and NaN give anything: the rules
// below replace them)

// x + c rounded to c's last place by the mode (with x's sign: s1 = c + round(x), exactly), and c
// (*csp); narrow_mag takes the magnitude from them, narrow_code16 the code.
V4 __m512 narrow_sum(const lk *k, fmt_round_mode mode, __m512i b, __m512i ax, __m512i rnd, __m512 *csp) {
    const __m512i signbit = _mm512_set1_epi32((int)0x80000000u);
    const __m512i axc = _mm512_min_epu32(ax, _mm512_set1_epi32((int)k->clamp_bits));
    const __m512i e = _mm512_max_epu32(_mm512_and_si512(axc, _mm512_set1_epi32(0x7f800000)),
                                       _mm512_set1_epi32((int)k->emin_bits));
    const __m512i cb = _mm512_add_epi32(e, _mm512_set1_epi32((int)k->cshift));
    // x and c with x's sign (0xf8: a | (b & c)), so that rup and rdn round by the sign.
    const __m512 xs = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(axc, b, signbit, 0xf8));
    const __m512 cs = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(cb, b, signbit, 0xf8));
    __m512 s1;
    switch (mode) {
    case FMT_RNE: s1 = _mm512_add_round_ps(xs, cs, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); break;
    case FMT_RTZ: s1 = _mm512_add_round_ps(xs, cs, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); break;
    case FMT_RUP: s1 = _mm512_add_round_ps(xs, cs, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); break;
    case FMT_RDN: s1 = _mm512_add_round_ps(xs, cs, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); break;
    case FMT_RNA: {
        const __m512 hs = _mm512_mul_round_ps(cs, _mm512_set1_ps(0x1p-24f),  // u/2, exact
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        s1 = _mm512_add_round_ps(_mm512_add_round_ps(xs, hs, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), cs,
                                 _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        break;
    }
    case FMT_SR: {
        // Truncate, then add a last place (one unit of x + c's bits) where the draw says up.
        // The s dropped bits of x's significand: s = exponent field of c - that of x (at least 1).
        s1 = _mm512_add_round_ps(xs, cs, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m512i Ex = _mm512_srli_epi32(axc, 23);
        const __m512i sig = _mm512_mask_or_epi32(_mm512_and_si512(axc, _mm512_set1_epi32(0x7fffff)),
                                                 _mm512_test_epi32_mask(Ex, Ex),
                                                 _mm512_and_si512(axc, _mm512_set1_epi32(0x7fffff)),
                                                 _mm512_set1_epi32(0x800000));
        const __m512i Ep = _mm512_max_epu32(Ex, _mm512_set1_epi32(1));
        const __m512i s = _mm512_sub_epi32(_mm512_srli_epi32(cb, 23), Ep);
        s1 = _mm512_castsi512_ps(_mm512_mask_add_epi32(_mm512_castps_si512(s1), sr_up16(k, dropped32(sig, s), rnd),
                                                       _mm512_castps_si512(s1), _mm512_set1_epi32(1)));
        break;
    }
    default: {  // FMT_RTO
        s1 = _mm512_add_round_ps(xs, cs, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m512 y0 = _mm512_sub_round_ps(s1, cs, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __mmask16 inexact = _mm512_cmp_ps_mask(y0, xs, _CMP_NEQ_UQ);
        s1 = _mm512_castsi512_ps(_mm512_mask_or_epi32(_mm512_castps_si512(s1), inexact,
                                                      _mm512_castps_si512(s1), _mm512_set1_epi32(1)));
        break;
    }
    }
    *csp = cs;
    return s1;
}

V4 __m512i narrow_mag(const lk *k, fmt_round_mode mode, __m512i b, __m512i ax, __m512i rnd) {
    __m512 cs;
    const __m512 s1 = narrow_sum(k, mode, b, ax, rnd, &cs);
    const __m512 y = _mm512_sub_round_ps(s1, cs, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);  // exact
    return _mm512_andnot_si512(_mm512_set1_epi32((int)0x80000000u), _mm512_castps_si512(y));
}

V4 __m512i wide_mag(const lk *k, fmt_round_mode mode, __mmask16 neg, __m512i ax, __m512i rnd) {
    const __m512i mask = _mm512_set1_epi32((int)k->mask);
    const uint32_t half = (k->mask + 1) >> 1;
    __m512i t;
    switch (mode) {
    case FMT_RNE: {  // ax + (half - 1) + lsb; with nothing dropped (fp32) neither term
        const __m512i lsb = _mm512_and_si512(_mm512_srl_epi32(ax, _mm_cvtsi32_si128(k->s)),
                                             _mm512_set1_epi32(k->mask ? 1 : 0));
        t = _mm512_add_epi32(_mm512_add_epi32(ax, _mm512_set1_epi32((int)(half ? half - 1 : 0))), lsb);
        break;
    }
    case FMT_RNA: t = _mm512_add_epi32(ax, _mm512_set1_epi32((int)half)); break;
    case FMT_RUP: t = _mm512_mask_add_epi32(ax, (__mmask16)~neg, ax, mask); break;
    case FMT_RDN: t = _mm512_mask_add_epi32(ax, neg, ax, mask); break;
    case FMT_RTO: {  // truncate, then set the last bit where anything was dropped
        const __mmask16 inexact = _mm512_test_epi32_mask(ax, mask);
        const __m512i tr = _mm512_andnot_si512(mask, ax);
        return _mm512_mask_or_epi32(tr, inexact, tr, _mm512_set1_epi32((int)k->mask + 1));
    }
    case FMT_SR: {  // truncate, then add a last place where the draw says up (s fixed)
        const __m512i tr = _mm512_andnot_si512(mask, ax);
        const __mmask16 up = sr_up16(k, _mm512_sllv_epi32(ax, _mm512_set1_epi32(32 - k->s)), rnd);  // s <= 23
        return _mm512_mask_add_epi32(tr, up, tr, _mm512_set1_epi32((int)k->mask + 1));
    }
    default: t = ax; break;  // FMT_RTZ
    }
    return _mm512_andnot_si512(mask, t);
}

// --- the rules (in the generic kernel's order), then the loop

// Per-lane statistics (the generic kernel's definitions, for signed formats with a zero):
// counters incremented in the lanes a mask selects, the largest non-NaN magnitude's bits.
typedef struct {
    __m512i ovf, unf, sub, nan, inv, amax;
} lean_counts;

V4 __m512i count(__m512i c, __mmask16 m) { return _mm512_mask_sub_epi32(c, m, c, _mm512_set1_epi32(-1)); }

// e8m0 (OCP MX's scale format: 2^-127..2^127, unsigned, no zero): integer steps on the bits, as
// the generic kernel takes them. The last place is x's leading bit for a float32 normal (the
// dropped bits m are its 23 fraction bits: the code is the exponent field) and 2^-127 for a
// float32 subnormal (22 bits), so rounding is an add and a mask on the bits, as for the wide
// formats; the code's last bit is the exponent field's (0 below 2^-126). Then e8m0's rules:
// what rounds below 2^-127 becomes 2^-127 (an underflow); zero and negative inputs are invalid
// and become NaN, as NaN does. Masks combine inside the compares (their mask operand), so that
// nothing leaves the mask registers.
V4 __m512i e8m0_16(const lk *k, fmt_round_mode mode, __m512i b, __m512i rnd, lean_counts *cnt,
                   __mmask16 live) {
    const __m512i ax = _mm512_and_si512(b, _mm512_set1_epi32(0x7fffffff)), one = _mm512_set1_epi32(1);
    const __mmask16 normal = _mm512_cmpge_epu32_mask(ax, _mm512_set1_epi32(0x800000));
    const __m512i m = _mm512_mask_blend_epi32(normal, _mm512_set1_epi32(0x3fffff), _mm512_set1_epi32(0x7fffff));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(ax, 23), one);
    const __m512i tr = _mm512_andnot_si512(m, ax), ulp = _mm512_add_epi32(m, one);
    __m512i r;
    switch (mode) {
    case FMT_RNE:
        r = _mm512_andnot_si512(m, _mm512_add_epi32(_mm512_add_epi32(ax, _mm512_srli_epi32(m, 1)), lsb));
        break;
    case FMT_RNA: r = _mm512_andnot_si512(m, _mm512_add_epi32(ax, _mm512_srli_epi32(ulp, 1))); break;
    case FMT_RUP: r = _mm512_andnot_si512(m, _mm512_add_epi32(ax, m)); break;
    case FMT_RTO:  // up by one place where inexact with an even last bit
        r = _mm512_mask_add_epi32(tr, _mm512_mask_testn_epi32_mask(_mm512_test_epi32_mask(ax, m), lsb, lsb), tr, ulp);
        break;
    case FMT_SR: {
        // 23 dropped bits (22 for a float32 subnormal): ax << 9 (<< 10), its exponent gone
        const __m512i left = _mm512_mask_blend_epi32(normal, _mm512_set1_epi32(10), _mm512_set1_epi32(9));
        r = _mm512_mask_add_epi32(tr, sr_up16(k, _mm512_sllv_epi32(ax, left), rnd), tr, ulp);
        break;
    }
    default: r = tr; break;  // rtz, rdn: down for every valid (positive) input
    }
    const __mmask16 finite = _mm512_cmplt_epu32_mask(ax, _mm512_set1_epi32(0x7f800000));
    const __mmask16 over = _mm512_mask_cmpgt_epu32_mask(finite, r, _mm512_set1_epi32((int)k->max_bits));
    r = _mm512_mask_mov_epi32(r, over, _mm512_set1_epi32((int)k->ovf0));
    r = _mm512_mask_blend_epi32(finite, _mm512_set1_epi32((int)k->inf_res), r);
    const __m512i min_normal = _mm512_set1_epi32((int)k->min_normal_bits);
    const __mmask16 notnan = _mm512_cmple_epu32_mask(ax, _mm512_set1_epi32(0x7f800000));
    const __mmask16 valid = _mm512_mask_cmpgt_epi32_mask(notnan, b, _mm512_setzero_si512());  // > +0
    if (cnt) {
        const __mmask16 tiny = _mm512_mask_cmplt_epu32_mask(finite, r, min_normal);
        cnt->ovf = count(cnt->ovf, live & valid & (over | (__mmask16)~finite));
        cnt->unf = count(cnt->unf, live & valid & tiny);
        cnt->nan = count(cnt->nan, live & (__mmask16)~notnan);
        cnt->inv = count(cnt->inv, live & _mm512_mask_cmple_epi32_mask(notnan, b, _mm512_setzero_si512()));
        cnt->amax = _mm512_mask_max_epu32(cnt->amax, live & notnan, cnt->amax, ax);
    }
    r = _mm512_mask_max_epu32(r, finite, r, min_normal);
    return _mm512_mask_blend_epi32(valid, _mm512_set1_epi32(0x7fc00000), r);
}

// round(b), counting into cnt (NULL where the loop counts nothing) the lanes of live; amax:
// whether cnt keeps the amax. quick: first check whether every live lane rounded to a normal
// value of at most max (no lane special, past max, zero or subnormal: one range compare, since
// the clamped inf and NaN round past max), where every counter but the amax stays as it is. It
// pays where nearly every vector passes (the block kernel's scaled tiles of a wide format) and
// costs a mispredicted branch where vectors hold subnormals or zeros.
V4 __m512i lean16_with(const lk *k, lean_class cls, fmt_round_mode mode, __m512i b, __m512i rnd,
                       lean_counts *cnt, __mmask16 live, bool quick, bool amax) {
    if (cls == LEAN_E8M0) return e8m0_16(k, mode, b, rnd, cnt, live);
    const __m512i signbit = _mm512_set1_epi32((int)0x80000000u);
    const __m512i ax = _mm512_andnot_si512(signbit, b), sgn = _mm512_and_si512(b, signbit);
    const __mmask16 neg = _mm512_movepi32_mask(b);
    __m512i r = cls == LEAN_WIDE ? wide_mag(k, mode, neg, ax, rnd) : narrow_mag(k, mode, b, ax, rnd);
    const bool ordinary_all =
        cnt && quick &&
        _mm512_mask_cmple_epu32_mask(live, _mm512_sub_epi32(r, _mm512_set1_epi32((int)k->min_normal_bits)),
                                     _mm512_set1_epi32((int)(k->max_bits - k->min_normal_bits))) == live;
    const __mmask16 over = _mm512_cmpgt_epu32_mask(r, _mm512_set1_epi32((int)k->max_bits));
    const __m512i ovf = k->ovf0 == k->ovf1 ? _mm512_set1_epi32((int)k->ovf0)
                                           : _mm512_mask_blend_epi32(neg, _mm512_set1_epi32((int)k->ovf0),
                                                                     _mm512_set1_epi32((int)k->ovf1));
    r = _mm512_mask_mov_epi32(r, over, ovf);
    const __mmask16 special = _mm512_cmpge_epu32_mask(ax, _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, special, _mm512_set1_epi32((int)k->inf_res));
    if (k->flush)
        r = _mm512_mask_mov_epi32(r, _mm512_cmplt_epu32_mask(r, _mm512_set1_epi32((int)k->min_normal_bits)),
                                  _mm512_setzero_si512());
    const __mmask16 nonzero = _mm512_test_epi32_mask(r, r);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(ax, _mm512_set1_epi32(0x7f800000));
    if (ordinary_all) {
        if (amax) cnt->amax = _mm512_mask_max_epu32(cnt->amax, live, cnt->amax, ax);
    } else if (cnt) {
        // overflow: a finite input beyond max, or an inf input where inf is not exact
        const __mmask16 ordinary = live & (__mmask16)~special;
        const __mmask16 inf_in = live & special & (__mmask16)~nan;
        cnt->ovf = count(cnt->ovf, (ordinary & over) | (k->inf_exact ? 0 : inf_in));
        cnt->unf = count(cnt->unf, ordinary & (__mmask16)~nonzero & _mm512_test_epi32_mask(ax, ax));
        cnt->sub = count(cnt->sub, ordinary & nonzero &
                                       _mm512_cmplt_epu32_mask(r, _mm512_set1_epi32((int)k->min_normal_bits)));
        cnt->nan = count(cnt->nan, live & nan);
        if (amax) cnt->amax = _mm512_mask_max_epu32(cnt->amax, live & (__mmask16)~nan, cnt->amax, ax);
    }
    // The sign: kept on zeros only where the format has -0.
    r = k->negzero ? _mm512_or_si512(r, sgn) : _mm512_mask_or_epi32(r, nonzero, r, sgn);
    // NaN: the quiet NaN with x's sign, or -0 where the format has no NaN.
    const __m512i nanv = k->has_nan ? _mm512_or_si512(sgn, _mm512_set1_epi32(0x7fc00000)) : signbit;
    return _mm512_mask_mov_epi32(r, nan, nanv);
}

V4 __m512i lean16(const lk *k, lean_class cls, fmt_round_mode mode, __m512i b, __m512i rnd,
                  lean_counts *cnt, __mmask16 live) {
    return lean16_with(k, cls, mode, b, rnd, cnt, live, false, true);
}

// --- the loops: one per (method, mode, output), so that no switch is inside a vector loop

// Per-lane counts stay below 2^27: the entry points split calls into blocks of 2^30.
V4 void add_counts(fmt__counts *counts, const lean_counts *lc) {
    counts->overflow += (uint32_t)_mm512_reduce_add_epi32(lc->ovf);
    counts->underflow += (uint32_t)_mm512_reduce_add_epi32(lc->unf);
    counts->subnormal += (uint32_t)_mm512_reduce_add_epi32(lc->sub);
    counts->nan_in += (uint32_t)_mm512_reduce_add_epi32(lc->nan);
    counts->invalid += (uint32_t)_mm512_reduce_add_epi32(lc->inv);
    const uint32_t am = (uint32_t)_mm512_reduce_max_epu32(lc->amax);
    float a;
    memcpy(&a, &am, sizeof a);
    if (a > counts->amax) counts->amax = a;
}

// Calls CALL(cl, m) with the class and the mode as constants, and with counts (a pointer
// named counts where it is expanded) or NULL as a constant too, so that each instance is its own
// loop and the loops without statistics count nothing.
#define BY_MODE(cl, mode, CALL)                                                                \
    switch (mode) {                                                                            \
    case FMT_RNE: CALL(cl, FMT_RNE); break;                                                    \
    case FMT_RNA: CALL(cl, FMT_RNA); break;                                                    \
    case FMT_RTZ: CALL(cl, FMT_RTZ); break;                                                    \
    case FMT_RUP: CALL(cl, FMT_RUP); break;                                                    \
    case FMT_RDN: CALL(cl, FMT_RDN); break;                                                    \
    case FMT_RTO: CALL(cl, FMT_RTO); break;                                                    \
    case FMT_SR: CALL(cl, FMT_SR); break;                                                      \
    default: break;                                                                            \
    }
#define BY_CLASS_MODE(cls, mode, CALL)                                                         \
    switch (cls) {                                                                             \
    case LEAN_WIDE: BY_MODE(LEAN_WIDE, mode, CALL) break;                                      \
    case LEAN_NARROW: BY_MODE(LEAN_NARROW, mode, CALL) break;                                  \
    case LEAN_E8M0: BY_MODE(LEAN_E8M0, mode, CALL) break;                                      \
    default: break;                                                                            \
    }
#define WITH_COUNTS(cls, mode, CALL)                                                           \
    if (counts) {                                                                              \
        BY_CLASS_MODE(cls, mode, CALL)                                                         \
    } else {                                                                                   \
        fmt__counts *const counts = NULL;                                                      \
        BY_CLASS_MODE(cls, mode, CALL)                                                         \
    }

// Block scaling's one pass (round_lean_block.c, round_lean_block_avx2.c; formats/scale.c's work
// units): out = round(in * mul[t]) * deq[t] for the tiles t of tc elements (a multiple of 16, so
// that every vector, of 16 or 8 lanes, lies in one tile; or 1: a scale per column, each lane its
// own), in one pass, where the two multiplications and the rounding were three passes over the
// unit. Where a multiplier is 1, x * 1 is x (the kernels decline under DAZ and FTZ). zeroed
// counts the nonzero inputs of tiles whose multiplier is 0 (x != 0: NaN counts), as scale.c does.
typedef struct {
    size_t tc;
    const float *mul, *deq;
    bool exact;         // the exact quotient in / deq (where deq != 0), not in * mul
    float *elems;       // optional: the rounded values before the multiplication back
    ptrdiff_t ahead;    // prefetch distance in elements (0: none)
    uint64_t *zeroed;   // optional
    uint32_t near_mask;  // exact: the float32 bits below the element format's midpoints
                         // (near_exact; stochastic: sr_sure16 too); 0: every quotient by div_rto16/8
    bool quick;          // lean16_with's quick statistics (AVX-512 kernel only)
    size_t rows, ld;     // rows of n elements, ld apart, with the same multipliers and divisors
} blk;

// round_lean_block_avx2.c's one pass on n elements (a piece of at most LEAN_BLOCK), for CPUs
// with AVX2: the caller checked the coverage and this thread's MXCSR.
void fmt__block_run_avx2(const lk *k, lean_class cls, fmt_round_mode mode, const blk *b, float *out,
                         const float *in, size_t n, fmt__counts *counts);

// This thread's MXCSR: DAZ (0x0040) and FTZ (0x8000), and the rounding control (0x6000).
// Whether DAZ or FTZ is set (then the AVX-512 kernels that see subnormals decline).
TARGET_V4 static inline bool mxcsr_daz_ftz(void) { return (_mm_getcsr() & 0x8040u) != 0; }
// Whether it rounds to nearest without DAZ or FTZ: the AVX2 kernels' narrow sums need it (they
// have no embedded rounding), and x * 1 must be x.
static inline bool mxcsr_nearest_exact(void) { return (_mm_getcsr() & (0x8040u | 0x6000u)) == 0; }


static inline lk lk_make(const fmt__kparams *p, lean_class cls, uint64_t base) {
    const lk k = {
        .clamp_bits = cls == LEAN_NARROW ? (uint32_t)(p->emax + 1 + 127) << 23 : 0,
        .emin_bits = cls == LEAN_NARROW ? (uint32_t)(p->emin + 127) << 23 : 0,
        .cshift = (uint32_t)(23 - p->m) << 23,
        .mask = (1u << (23 - p->m)) - 1, .s = 23 - p->m,
        .max_bits = f2u((float)p->max), .min_normal_bits = f2u((float)p->min_normal),
        .ovf0 = f2u((float)p->ovf[0]), .ovf1 = f2u((float)p->ovf[1]), .inf_res = f2u((float)p->inf_result),
        .flush = p->flush, .negzero = p->negzero, .has_nan = p->has_nan, .inf_exact = p->inf_exact,
        .r = p->sr_bits, .key = p->key, .first = p->offset + base,
        .code_direct = p->emin == 1 - p->bias,
    };
    return k;
}

// Blocks of at most 2^30 elements, so that no per-lane counter of the statistics can wrap.
enum { LEAN_BLOCK = 1 << 30 };

#endif  // LEAN_X86

#endif
