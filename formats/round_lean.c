// round_lean.c: explicit AVX-512 kernels (FMT_PATH_LEAN) for the calls most programs make:
// every mode (rne, rna, rtz, rup, rdn, rto, sr) into a signed format with fraction bits and a
// zero (every table format but e8m0), and into e8m0, either overflow policy, with or without
// flushing, with or without statistics. About 20 instructions per 16 elements for the
// deterministic modes, where the generic kernel (round_f32.c) needs about 45 per 8.
// Constraints: bit for bit the generic kernel's results, which tests/test_round.c and
// tools/verify_exhaustive.c check on every float32 input. Three methods, by format (e8m0, the
// third, is described at e8m0_16):
// - wide formats (bf16, tf32, fp32 and others with float32's binades, emin = -126): the last
//   place is 2^(23-m) units of x's bit pattern for every finite x, float32 subnormals included,
//   so rounding is an integer add and mask on the bits (a carry into the exponent is exact);
// - narrow formats (fp16, fp8, fp6, fp4): the magic-constant addition. With e the exponent of x
//   and c = 2^(max(e, emin) + 23 - m), c's last place is the format's last place at x and
//   |x| < c/2, so the float32 adder rounds x + c (the mode given as embedded rounding, not read
//   from MXCSR) to c + round_F(x), and (x + c) - c is exact. |x| is clamped to 2^(emax+1),
//   past which every mode overflows, so c stays finite. rna truncates x + u/2 (u the last place;
//   two truncations to nested grids are one); rto truncates and sets the last bit of x + c (whose
//   last place is u) when inexact; sr truncates and adds one unit to x + c's bits where the
//   generic kernel's rule (the top r dropped bits against an r-bit draw, the draws those of
//   rng.h) says up. This float32 arithmetic sees subnormals, so the narrow kernels decline (and
//   the generic kernel runs) in a thread whose MXCSR has DAZ or FTZ set.
// Then the generic kernel's rules: overflow by sign and policy, inf and NaN inputs, flushing to
// zero, the sign of zero. Compiled with a target attribute where -march lacks AVX-512, and
// taken only on CPUs that have it (round.c, codec.c).
// Codes (codec.c): the formulas of codec_f32.c on sixteen lanes, fused with the rounding for
// fmt_encode_f32 (one pass: float32 in, codes out; narrow formats take the code straight from
// the magic-constant sum, e8m0 from the exponent field), or alone (values already rounded,
// decoding). Block scaling (scale.c): the tiles' amax and one pass of multiply, round, multiply
// back per row segment.
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

static bool cpu_v4(void) {
#if defined(BUILD_V4)
    return true;
#elif defined(__clang__)
    return false;
#else
    return __builtin_cpu_supports("x86-64-v4");
#endif
}

typedef enum { LEAN_NONE, LEAN_WIDE, LEAN_NARROW, LEAN_E8M0 } lean_class;

static lean_class class_of(const fmt__kparams *k) {
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

static uint32_t f2u(float f) {
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

// Whether to round up: the top r of the s dropped bits of sig (rem) exceed an r-bit draw, as the
// generic kernel decides (shift counts of 32 and more give 0).
V4 __mmask16 sr_up16(const lk *k, __m512i sig, __m512i s, __m512i rnd) {
    const __m512i ones = _mm512_set1_epi32(-1);
    const __m512i rem = _mm512_andnot_si512(_mm512_sllv_epi32(ones, s), sig);
    const __m512i t = _mm512_sub_epi32(s, _mm512_set1_epi32(k->r));
    const __m512i minus_t = _mm512_sub_epi32(_mm512_setzero_si512(), t);
    const __m512i top = _mm512_mask_blend_epi32(_mm512_movepi32_mask(t), _mm512_srlv_epi32(rem, t),
                                                _mm512_sllv_epi32(rem, minus_t));
    const __m512i draw = _mm512_srl_epi32(rnd, _mm_cvtsi32_si128(32 - k->r));
    return _mm512_cmplt_epu32_mask(draw, top);
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
        s1 = _mm512_castsi512_ps(_mm512_mask_add_epi32(_mm512_castps_si512(s1), sr_up16(k, sig, s, rnd),
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
        const __mmask16 up = sr_up16(k, ax, _mm512_set1_epi32(k->s), rnd);
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
        const __m512i s = _mm512_mask_blend_epi32(normal, _mm512_set1_epi32(22), _mm512_set1_epi32(23));
        r = _mm512_mask_add_epi32(tr, sr_up16(k, ax, s, rnd), tr, ulp);
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

// round(b), counting into cnt (NULL where the loop counts nothing) the lanes of live.
V4 __m512i lean16(const lk *k, lean_class cls, fmt_round_mode mode, __m512i b, __m512i rnd,
                  lean_counts *cnt, __mmask16 live) {
    if (cls == LEAN_E8M0) return e8m0_16(k, mode, b, rnd, cnt, live);
    const __m512i signbit = _mm512_set1_epi32((int)0x80000000u);
    const __m512i ax = _mm512_andnot_si512(signbit, b), sgn = _mm512_and_si512(b, signbit);
    const __mmask16 neg = _mm512_movepi32_mask(b);
    __m512i r = cls == LEAN_WIDE ? wide_mag(k, mode, neg, ax, rnd) : narrow_mag(k, mode, b, ax, rnd);
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
    if (cnt) {
        // overflow: a finite input beyond max, or an inf input where inf is not exact
        const __mmask16 ordinary = live & (__mmask16)~special;
        const __mmask16 inf_in = live & special & (__mmask16)~nan;
        cnt->ovf = count(cnt->ovf, (ordinary & over) | (k->inf_exact ? 0 : inf_in));
        cnt->unf = count(cnt->unf, ordinary & (__mmask16)~nonzero & _mm512_test_epi32_mask(ax, ax));
        cnt->sub = count(cnt->sub, ordinary & nonzero &
                                       _mm512_cmplt_epu32_mask(r, _mm512_set1_epi32((int)k->min_normal_bits)));
        cnt->nan = count(cnt->nan, live & nan);
        cnt->amax = _mm512_mask_max_epu32(cnt->amax, live & (__mmask16)~nan, cnt->amax, ax);
    }
    // The sign: kept on zeros only where the format has -0.
    r = k->negzero ? _mm512_or_si512(r, sgn) : _mm512_mask_or_epi32(r, nonzero, r, sgn);
    // NaN: the quiet NaN with x's sign, or -0 where the format has no NaN.
    const __m512i nanv = k->has_nan ? _mm512_or_si512(sgn, _mm512_set1_epi32(0x7fc00000)) : signbit;
    return _mm512_mask_mov_epi32(r, nan, nanv);
}

// --- codes (the formulas of codec_f32.c, on sixteen lanes with mask registers)

// The codes of r, values of the format in float32 bits (NaN as the quiet NaN).
V4 __m512i codes16(const fmt__codek *c, __m512i r) {
    const __m512i ab = _mm512_and_si512(r, _mm512_set1_epi32(0x7fffffff));
    const __m512i normal = _mm512_sub_epi32(_mm512_srl_epi32(ab, _mm_cvtsi32_si128(23 - c->m)),
                                            _mm512_set1_epi32((int)c->mag_sub));
    __m512i code = normal;  // wide formats: their subnormals too (bias 127, float32's binades)
    if (!c->wide) {
        const __m512i Ep = _mm512_max_epu32(_mm512_srli_epi32(ab, 23), _mm512_set1_epi32(1));
        const __m512i sig = _mm512_mask_or_epi32(_mm512_and_si512(ab, _mm512_set1_epi32(0x7fffff)),
                                                 _mm512_cmpge_epu32_mask(ab, _mm512_set1_epi32(0x800000)),
                                                 _mm512_and_si512(ab, _mm512_set1_epi32(0x7fffff)),
                                                 _mm512_set1_epi32(0x800000));
        // Shift counts of 32 and more give 0, as below the smallest subnormal they should.
        const __m512i sub = _mm512_srlv_epi32(sig, _mm512_sub_epi32(_mm512_set1_epi32((int)c->sub_base), Ep));
        const __mmask16 below = _mm512_cmplt_epu32_mask(ab, _mm512_set1_epi32((int)c->min_normal_bits));
        code = _mm512_mask_mov_epi32(normal, below, sub);
    }
    const __mmask16 neg = _mm512_movepi32_mask(r);
    const __mmask16 signed_lane = c->negzero_mask ? neg : neg & _mm512_test_epi32_mask(ab, ab);
    const __m512i sbit = _mm512_set1_epi32((int)c->sbit);
    code = _mm512_mask_or_epi32(code, signed_lane, code, sbit);
    code = _mm512_mask_mov_epi32(code, _mm512_cmpeq_epi32_mask(ab, _mm512_set1_epi32(0x7f800000)),
                                 _mm512_mask_or_epi32(_mm512_set1_epi32((int)c->inf_code), neg,
                                                      _mm512_set1_epi32((int)c->inf_code), sbit));
    const __m512i nanc = _mm512_set1_epi32((int)c->nan_code);
    return _mm512_mask_mov_epi32(code, _mm512_cmpgt_epu32_mask(ab, _mm512_set1_epi32(0x7f800000)),
                                 c->nan_sign_mask ? _mm512_mask_or_epi32(nanc, neg, nanc, sbit) : nanc);
}

// Narrow formats' codes straight from the sum (encoding): s1 = c + r with c
// = 2^(E + 23 - m), E = max(e, emin), so bits(s1) - bits(c) is r over the last place 2^(E - m)
// (a carry into the next binade included), and the code of r is that plus (E + bias - 1) << m,
// which is bits(c) >> (23 - m) less a constant; for E = emin it is the subnormal code. Then
// the rules on codes: past the largest finite code, an infinite and a NaN input take the codes
// that rounding and codes16 give those lanes (their sign decides: ncode's table), flushing,
// the sign where the code is nonzero or the format has -0; lean16's statistics from the code.
// About half the instructions of narrow_mag, lean16's rules and codes16.
typedef struct {
    uint32_t k, max, min_normal, sbit, negzero;  // code = (bits(c) >> s) + bits(s1) - bits(c) - k
    uint32_t ovf[2], inf[2], nan[2];             // by sign
    bool flush;
} ncode;

V4 __m512i narrow_code16(const lk *k, const ncode *nc, fmt_round_mode mode, __m512i b, __m512i rnd,
                         lean_counts *cnt, __mmask16 live) {
    const __m512i signbit = _mm512_set1_epi32((int)0x80000000u);
    const __m512i ax = _mm512_andnot_si512(signbit, b);
    const __mmask16 neg = _mm512_movepi32_mask(b);
    __m512 cs;
    const __m512i s1 = _mm512_castps_si512(narrow_sum(k, mode, b, ax, rnd, &cs));
    const __m512i cb = _mm512_castps_si512(cs);
    __m512i mag = _mm512_add_epi32(_mm512_srl_epi32(_mm512_andnot_si512(signbit, cb), _mm_cvtsi32_si128(k->s)),
                                   _mm512_sub_epi32(s1, _mm512_add_epi32(cb, _mm512_set1_epi32((int)nc->k))));
    if (nc->flush)
        mag = _mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(mag, _mm512_set1_epi32((int)nc->min_normal)), mag);
    const __mmask16 nonzero = _mm512_test_epi32_mask(mag, mag);
    const __mmask16 signed_lane = nc->negzero ? neg : neg & nonzero;
    __m512i code = _mm512_mask_or_epi32(mag, signed_lane, mag, _mm512_set1_epi32((int)nc->sbit));
    const __mmask16 over = _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32((int)nc->max));
    const __mmask16 inf = _mm512_cmpeq_epi32_mask(ax, _mm512_set1_epi32(0x7f800000));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(ax, _mm512_set1_epi32(0x7f800000));
    if (cnt) {  // lean16's counts, read off the code: ordinary lanes past max, rounded to 0, subnormal
        const __mmask16 ordinary = live & (__mmask16)~(inf | nan), under = ordinary & (__mmask16)~over;
        cnt->ovf = count(cnt->ovf, (ordinary & over) | (k->inf_exact ? 0 : live & inf));
        cnt->unf = count(cnt->unf, under & (__mmask16)~nonzero & _mm512_test_epi32_mask(ax, ax));
        cnt->sub = count(cnt->sub, under & nonzero &
                                       _mm512_cmplt_epu32_mask(mag, _mm512_set1_epi32((int)nc->min_normal)));
        cnt->nan = count(cnt->nan, live & nan);
        cnt->amax = _mm512_mask_max_epu32(cnt->amax, live & (__mmask16)~nan, cnt->amax, ax);
    }
#define BY_SIGN(t) _mm512_mask_blend_epi32(neg, _mm512_set1_epi32((int)(t)[0]), _mm512_set1_epi32((int)(t)[1]))
    code = _mm512_mask_mov_epi32(code, over, BY_SIGN(nc->ovf));
    code = _mm512_mask_mov_epi32(code, inf, BY_SIGN(nc->inf));
    return _mm512_mask_mov_epi32(code, nan, BY_SIGN(nc->nan));
#undef BY_SIGN
}

// The constants of narrow_code16 for (k, c, mode): the code table from lean16 and codes16 on
// +-2^(emax+1) (past max in every mode, exactly), +-inf and +-NaN.
V4 ncode ncode_make(const lk *k, const fmt__codek *c, fmt_round_mode mode) {
    const int clamp = (int)k->clamp_bits, sign = (int)0x80000000u;
    const __m512i probe = _mm512_setr_epi32(clamp, clamp | sign, 0x7f800000, (int)0xff800000u, 0x7fc00000,
                                            (int)0xffc00000u, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    uint32_t t[16];
    _mm512_storeu_si512(t, codes16(c, lean16(k, LEAN_NARROW, mode, probe, _mm512_setzero_si512(), NULL, 0xffff)));
    const uint32_t m = 23u - (uint32_t)k->s;
    const ncode nc = {
        .k = c->mag_sub + ((24u - m) << m), .max = (k->max_bits >> k->s) - c->mag_sub, .min_normal = 1u << m,
        .sbit = c->sbit, .negzero = k->negzero, .ovf = {t[0], t[1]}, .inf = {t[2], t[3]}, .nan = {t[4], t[5]},
        .flush = k->flush,
    };
    return nc;
}

// The codes of lean16's results: e8m0's is the exponent field (e8m0_16 gives powers of two from
// 2^-127, whose field is 0, to 2^127, or the NaN 0x7fc00000, whose field is e8m0's NaN code
// 0xff: never inf); codes16's formulas for the others and for values rounded elsewhere.
V4 __m512i rounded_codes16(const fmt__codek *c, lean_class cls, __m512i r) {
    return cls == LEAN_E8M0 ? _mm512_srli_epi32(r, 23) : codes16(c, r);
}

// The float32 bits of codes (bits above the code ignored; NaN is 0x7fc00000).
V4 __m512i values16(const fmt__codek *c, __m512i code) {
    code = _mm512_and_si512(code, _mm512_set1_epi32((int)c->code_mask));
    const __mmask16 neg = _mm512_test_epi32_mask(code, _mm512_set1_epi32((int)c->sbit));
    const __m512i mag = _mm512_andnot_si512(_mm512_set1_epi32((int)c->sbit), code);
    const __m128i s23m = _mm_cvtsi32_si128(23 - c->m);
    __m512i v;
    if (c->e8m0) {
        v = _mm512_add_epi32(_mm512_slli_epi32(code, 23), _mm512_set1_epi32((int)c->dec_add));
        v = _mm512_mask_mov_epi32(v, _mm512_testn_epi32_mask(v, v), _mm512_set1_epi32(0x00400000));  // 2^-127
    } else if (c->wide) {
        v = _mm512_sll_epi32(mag, s23m);
    } else {
        const __m512i M = _mm512_and_si512(mag, _mm512_set1_epi32((int)((1u << c->m) - 1)));
        const __m512i normal = _mm512_add_epi32(_mm512_sll_epi32(mag, s23m),
                                                _mm512_set1_epi32((int)c->dec_add));
        // a subnormal code M: the float32 M (exact) times 2^(emin - m), on the exponent field
        const __m512i sub = _mm512_add_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(M)),
                                             _mm512_set1_epi32((int)c->dec_sub_add));
        const __mmask16 below = _mm512_cmplt_epu32_mask(mag, _mm512_set1_epi32((int)(1u << c->m)));
        v = _mm512_mask_mov_epi32(normal, below, sub);
        v = _mm512_maskz_mov_epi32(_mm512_test_epi32_mask(mag, mag), v);  // zero
    }
    v = _mm512_mask_or_epi32(v, neg, v, _mm512_set1_epi32((int)0x80000000u));
    if (c->inf_mask) {
        const __m512i field = _mm512_and_si512(code, _mm512_set1_epi32((int)c->inf_mask));
        const __mmask16 inf = _mm512_cmpeq_epi32_mask(field, _mm512_set1_epi32((int)c->inf_match));
        v = _mm512_mask_mov_epi32(v, inf, _mm512_mask_or_epi32(_mm512_set1_epi32(0x7f800000), neg,
                                                                _mm512_set1_epi32(0x7f800000),
                                                                _mm512_set1_epi32((int)0x80000000u)));
    }
    if (c->nan_mask) {
        __mmask16 nan = _mm512_cmpeq_epi32_mask(_mm512_and_si512(code, _mm512_set1_epi32((int)c->nan_mask)),
                                                _mm512_set1_epi32((int)c->nan_match));
        if (c->nan_frac) nan &= _mm512_test_epi32_mask(code, _mm512_set1_epi32((int)((1u << c->m) - 1)));
        v = _mm512_mask_mov_epi32(v, nan, _mm512_set1_epi32(0x7fc00000));
    }
    return v;
}

// Sixteen codes of b bytes (b a constant where inlined), the lanes of live only. The narrowing
// stays in a register (the empty asm): GCC would fold it into the store, and vpmovdb/vpmovdw
// with a memory operand are microcoded on AMD Zen 4 and 5 (docs/benchmarks.md has the cost).
V4 void store_codes16(void *dst, __m512i code, int b, __mmask16 live) {
    if (b == 1) {
        __m128i v = _mm512_cvtepi32_epi8(code);
        __asm__("" : "+v"(v));
        if (live == 0xffff) _mm_storeu_si128(dst, v);
        else _mm_mask_storeu_epi8(dst, live, v);
    } else if (b == 2) {
        __m256i v = _mm512_cvtepi32_epi16(code);
        __asm__("" : "+v"(v));
        if (live == 0xffff) _mm256_storeu_si256(dst, v);
        else _mm256_mask_storeu_epi16(dst, live, v);
    } else if (live == 0xffff) {
        _mm512_storeu_si512(dst, code);
    } else {
        _mm512_mask_storeu_epi32(dst, live, code);
    }
}

V4 __m512i load_codes16(const void *src, int b, __mmask16 live) {
    if (live == 0xffff) {
        if (b == 1) return _mm512_cvtepu8_epi32(_mm_loadu_si128(src));
        if (b == 2) return _mm512_cvtepu16_epi32(_mm256_loadu_si256(src));
        return _mm512_loadu_si512(src);
    }
    if (b == 1) return _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(live, src));
    if (b == 2) return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(live, src));
    return _mm512_maskz_loadu_epi32(live, src);
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

// out = round(in) (b == 0: values, in place allowed), or its codes of b bytes (codes of in as
// it is when cls is LEAN_NONE).
V4 void lean_loop(const lk *kp, lean_class cls, fmt_round_mode mode, const fmt__codek *cp, int b,
                  void *out, const float *in, size_t n, fmt__counts *counts) {
    // Local copies: the stores through out may alias *kp and *cp, which would otherwise be read
    // again (and broadcast) in every iteration.
    const lk kl = *kp;
    const fmt__codek cl = cp ? *cp : (fmt__codek){0};
    const lk *k = &kl;
    const fmt__codek *c = &cl;
    uint8_t *o = out;
    const size_t ob = b ? (size_t)b : sizeof(float);
    lean_counts lc = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                      _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    lean_counts *cnt = counts ? &lc : NULL;
    // Masked loads and stores only for the tail: masked stores are slow on AMD Zen 4 and 5.
    size_t i = 0;
    if (cls == LEAN_NARROW && b && k->code_direct) {  // the codes straight from the sum
        const ncode nc = ncode_make(k, c, mode);
        for (; i + 16 <= n; i += 16) {
            const __m512i rnd = mode == FMT_SR ? draws16(k->key, k->first + i) : _mm512_setzero_si512();
            store_codes16(o + i * ob, narrow_code16(k, &nc, mode, _mm512_loadu_si512(in + i), rnd, cnt, 0xffff), b,
                          0xffff);
        }
        if (i < n) {
            const __mmask16 live = (__mmask16)((1u << (n - i)) - 1);
            const __m512i rnd = mode == FMT_SR ? draws16(k->key, k->first + i) : _mm512_setzero_si512();
            store_codes16(o + i * ob,
                          narrow_code16(k, &nc, mode, _mm512_maskz_loadu_epi32(live, in + i), rnd, cnt, live), b,
                          live);
        }
        if (cnt) add_counts(counts, &lc);
        return;
    }
    for (; i + 16 <= n; i += 16) {
        __m512i v = _mm512_loadu_si512(in + i);
        const __m512i rnd = mode == FMT_SR ? draws16(k->key, k->first + i) : _mm512_setzero_si512();
        if (cls != LEAN_NONE) v = lean16(k, cls, mode, v, rnd, cnt, 0xffff);
        if (b) store_codes16(o + i * ob, rounded_codes16(c, cls, v), b, 0xffff);
        else _mm512_storeu_si512(o + i * ob, v);
    }
    if (i < n) {
        const __mmask16 live = (__mmask16)((1u << (n - i)) - 1);
        __m512i v = _mm512_maskz_loadu_epi32(live, in + i);
        const __m512i rnd = mode == FMT_SR ? draws16(k->key, k->first + i) : _mm512_setzero_si512();
        if (cls != LEAN_NONE) v = lean16(k, cls, mode, v, rnd, cnt, live);
        if (b) store_codes16(o + i * ob, rounded_codes16(c, cls, v), b, live);
        else _mm512_mask_storeu_epi32(o + i * ob, live, v);
    }
    if (cnt) add_counts(counts, &lc);
}

// --- block scaling (formats/scale.c's work units): out = round(in * mul[t]) * deq[t] for the
// tiles t of tc elements (a multiple of 16, so that every vector lies in one tile; or 1: a scale
// per column, each lane its own), in one pass;
// before, the two multiplications and the rounding were three passes over the unit. Where a
// multiplier is 1, x * 1 is x (the kernel declines under DAZ and FTZ). zeroed counts the
// nonzero inputs of tiles whose multiplier is 0 (x != 0: NaN counts), as scale.c does.

typedef struct {
    size_t tc;
    const float *mul, *deq;
    bool exact;         // the exact quotient in / deq (where deq != 0), not in * mul
    float *elems;       // optional: the rounded values before the multiplication back
    ptrdiff_t ahead;    // prefetch distance in elements (0: none)
    uint64_t *zeroed;   // optional
    uint32_t near_mask;  // exact, not stochastic: the float32 bits below the element format's
                         // midpoints (near_exact); 0: every exact quotient by div_rto16
    size_t rows, ld;     // rows of n elements, ld apart, with the same multipliers and divisors
} blk;

// Most exact quotients need no division: y = x * fl(1/d) is within 2^-23 (1 + 2^-24) |z| of
// z = x / d (two roundings of 2^-24 relative each): less than 4 float32 ulps of y, even where
// z lies in the binade above. Where y lies 8 ulps or more from every value and midpoint of the
// element format (their float32 bits below the midpoint position are all 0) and is a normal
// float32, z lies strictly between the same two of them, so rounding y in any deterministic mode
// is rounding z. The lanes where that is not sure (those low bits within 8 of a boundary; y zero
// for a nonzero x, subnormal, inf or NaN: about 16 in 2^(22 - m) of random inputs) send the
// vector through div_rto16. Stochastic rounding uses every bit of the quotient: always div_rto16.
V4 bool near_exact(__m512 y, __m512 x, uint32_t near_mask, __mmask16 lanes) {
    const __m512i u = _mm512_castps_si512(y), mask = _mm512_set1_epi32((int)near_mask);
    const __m512i low = _mm512_and_si512(_mm512_add_epi32(_mm512_and_si512(u, mask), _mm512_set1_epi32(8)), mask);
    const __m512i ex = _mm512_and_si512(u, _mm512_set1_epi32(0x7f800000));
    const __mmask16 x_nonzero = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    const __mmask16 bad = _mm512_cmplt_epu32_mask(low, _mm512_set1_epi32(16)) |
                          (_mm512_cmpeq_epi32_mask(ex, _mm512_setzero_si512()) & x_nonzero) |
                          _mm512_cmpeq_epi32_mask(ex, _mm512_set1_epi32(0x7f800000));
    return (bad & lanes) != 0;
}

// x / d rounded to odd into float32 (scale.c's div_rto, sixteen lanes; d > 0, rd = 1/d): p = x·rd
// is within 2^-52 relative of z = x / d, which is a float32 value or at least 2^-48 relative
// from every one, so y = float32(p) is z's float32 floor or ceiling; the remainder e = y·d - x is
// exact (one fused multiply-subtract of a 48-bit product within 2^-22 of x), and its sign says
// on which side of z y lies: y steps back toward zero where it is past z, and its last bit is set
// where inexact. NaN and inf inputs give e NaN: exact. A quotient past float32 gives FLT_MAX.
// The low and high eight lanes have their own divisors (dl, dh; rdl, rdh their reciprocals): the
// same for a tile, each lane's own for per-column scales.
V4 __m512 div_rto16(__m512 x, __m512d rdl, __m512d rdh, __m512d dl, __m512d dh) {
    const __m512d xl = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
    const __m512d xh = _mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1));
    const __m256 yl = _mm512_cvtpd_ps(_mm512_mul_pd(xl, rdl)), yh = _mm512_cvtpd_ps(_mm512_mul_pd(xh, rdh));
    const __m512d el = _mm512_fmsub_pd(_mm512_cvtps_pd(yl), dl, xl), eh = _mm512_fmsub_pd(_mm512_cvtps_pd(yh), dh, xh);
    const __m512i y = _mm512_castps_si512(_mm512_insertf32x8(_mm512_castps256_ps512(yl), yh, 1));
    const __mmask16 inexact = (__mmask16)(_mm512_cmp_pd_mask(el, _mm512_setzero_pd(), _CMP_NEQ_OQ) |
                                          (unsigned)_mm512_cmp_pd_mask(eh, _mm512_setzero_pd(), _CMP_NEQ_OQ) << 8);
    const __mmask16 eneg = (__mmask16)(_mm512_movepi64_mask(_mm512_castpd_si512(el)) |
                                       (unsigned)_mm512_movepi64_mask(_mm512_castpd_si512(eh)) << 8);
    const __mmask16 past = inexact & (__mmask16)~(eneg ^ _mm512_movepi32_mask(y));
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i u = _mm512_mask_sub_epi32(y, past, y, one);
    return _mm512_castsi512_ps(_mm512_mask_or_epi32(u, inexact, u, one));
}

// The divisors of div_rto16: the low and high halves of d and their reciprocals in float64.
typedef struct {
    __m512d dl, dh, rdl, rdh;
    __m512 r;  // fl(1/d) in float32, for near_exact (set only where the block has a near_mask)
} div16;

// One vector of a tile: x = in[i..i+16) (the lanes of live), rounded after the multiplication
// by m (or, in the lanes of exact, after div_rto16 by dv), stored after the multiplication by d.
V4 void block16(const lk *k, lean_class cls, fmt_round_mode mode, const blk *b, __m512 m, __m512 d, __mmask16 exact,
                const div16 *dv, float *out, const float *in, size_t i, lean_counts *cnt, __mmask16 live) {
    const __m512 x = live == 0xffff ? _mm512_loadu_ps(in + i) : _mm512_maskz_loadu_ps(live, in + i);
    const __m512i rnd = mode == FMT_SR ? draws16(k->key, k->first + i) : _mm512_setzero_si512();
    __m512 xs = _mm512_mul_ps(x, m);
    if (exact) {
        const __m512 y = b->near_mask ? _mm512_mul_ps(x, dv->r) : x;
        const bool sure = b->near_mask && !near_exact(y, x, b->near_mask, exact & live);
        xs = _mm512_mask_blend_ps(exact, xs, sure ? y : div_rto16(x, dv->rdl, dv->rdh, dv->dl, dv->dh));
    }
    const __m512i r = lean16(k, cls, mode, _mm512_castps_si512(xs), rnd, cnt, live);
    const __m512 y = _mm512_mul_ps(_mm512_castsi512_ps(r), d);
    if (live == 0xffff) {
        if (b->elems) _mm512_storeu_si512(b->elems + i, r);
        _mm512_storeu_ps(out + i, y);
    } else {
        if (b->elems) _mm512_mask_storeu_epi32(b->elems + i, live, r);
        _mm512_mask_storeu_ps(out + i, live, y);
    }
}

// The nonzero elements of in[0..n) (x != 0: NaN counts).
V4 uint64_t nonzeros(const float *in, size_t n) {
    uint64_t z = 0;
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 live = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        z += (uint64_t)__builtin_popcount(
            _mm512_mask_cmp_ps_mask(live, _mm512_maskz_loadu_ps(live, in + i), _mm512_setzero_ps(), _CMP_NEQ_UQ));
    }
    return z;
}

// Row r of a call that covers rows (ld elements apart): its counters and its optional elems.
V4 void row_view(const lk *k, const blk *b, size_t r, lk *kr, blk *br) {
    *kr = *k, kr->first += r * b->ld;
    *br = *b, br->elems = b->elems ? b->elems + r * b->ld : NULL;
}

// Tile t's multiplier and divisor, broadcast, and its divisors for div_rto16; returns whether the
// tile divides (an exact block, deq not 0).
V4 bool tile_consts(const blk *b, size_t t, __m512 *m, __m512 *d, div16 *dv) {
    const bool exact = b->exact && b->deq[t] != 0.0f;
    const __m512d dd = _mm512_set1_pd(b->deq[t]), rd = _mm512_set1_pd(exact ? 1.0 / b->deq[t] : 0.0);
    *m = _mm512_set1_ps(b->mul[t]), *d = _mm512_set1_ps(b->deq[t]);
    *dv = (div16){dd, dd, rd, rd, _mm512_set1_ps(exact && b->near_mask ? 1.0f / b->deq[t] : 0.0f)};
    return exact;
}

V4 void block_loop(const lk *kp, lean_class cls, fmt_round_mode mode, const blk *bp, size_t tc, float *out,
                   const float *in, size_t n, fmt__counts *counts) {
    const lk kl = *kp;  // not read again after every store (see lean_loop); per row, copies of it
    const blk bl = *bp;
    lean_counts lc = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                      _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    lean_counts *cnt = counts ? &lc : NULL;
    uint64_t zeroed = 0;
    if (tc == 1) {  // per column: each lane its own multiplier and divisor, loaded, not broadcast
        // bl.rows rows share them (a tile row of per-column scales): a chunk of column vectors
        // prepares its divisors (two float64 divisions per vector) once for all the rows.
        enum { CV = 16 };
        const __m512d one = _mm512_set1_pd(1.0);
        for (size_t c0 = 0; c0 < n; c0 += CV * 16) {
            const size_t nv = (n - c0 + 15) / 16 < CV ? (n - c0 + 15) / 16 : CV;
            __m512 mv[CV], dvec[CV];
            __mmask16 livev[CV], exactv[CV];
            div16 dv[CV];
            for (size_t v = 0; v < nv; v++) {
                const size_t c = c0 + v * 16;
                const __mmask16 live = n - c >= 16 ? 0xffff : (__mmask16)((1u << (n - c)) - 1);
                const __m512 m = _mm512_maskz_loadu_ps(live, bl.mul + c), d = _mm512_maskz_loadu_ps(live, bl.deq + c);
                const __mmask16 nonzero_d = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ);
                dv[v] = (div16){_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(),
                                _mm512_setzero_ps()};
                const __mmask16 exact = bl.exact ? nonzero_d & live : 0;
                if (exact) {  // d = 0 lanes (multiplied by m instead) divide by 1 here, harmlessly
                    const __m512 d1 = _mm512_mask_blend_ps(exact, _mm512_set1_ps(1.0f), d);
                    dv[v].dl = _mm512_cvtps_pd(_mm512_castps512_ps256(d1));
                    dv[v].dh = _mm512_cvtps_pd(_mm512_extractf32x8_ps(d1, 1));
                    dv[v].rdl = _mm512_div_pd(one, dv[v].dl), dv[v].rdh = _mm512_div_pd(one, dv[v].dh);
                    if (bl.near_mask) dv[v].r = _mm512_div_ps(_mm512_set1_ps(1.0f), d1);  // near_exact's only
                }
                mv[v] = m, dvec[v] = d, livev[v] = live, exactv[v] = exact;
            }
            for (size_t r = 0; r < bl.rows; r++) {  // row r: its elements, counters and optional elems
                lk kr;
                blk br;
                row_view(&kl, &bl, r, &kr, &br);
                const float *inr = in + r * bl.ld;
                for (size_t v = 0; v < nv; v++) {
                    const size_t c = c0 + v * 16;
                    if (bl.zeroed) {
                        const __mmask16 mz = _mm512_mask_cmp_ps_mask(livev[v], mv[v], _mm512_setzero_ps(), _CMP_EQ_OQ);
                        zeroed += (uint64_t)__builtin_popcount(_mm512_mask_cmp_ps_mask(
                            mz, _mm512_maskz_loadu_ps(livev[v], inr + c), _mm512_setzero_ps(), _CMP_NEQ_UQ));
                    }
                    block16(&kr, cls, mode, &br, mv[v], dvec[v], exactv[v], &dv[v], out + r * bl.ld, inr, c, cnt,
                            livev[v]);
                }
            }
        }
        if (bl.zeroed) *bl.zeroed += zeroed;
        if (cnt) add_counts(counts, &lc);
        return;
    }
    for (size_t r = 0; r < bl.rows; r++) {  // row r of a tile row (its elements, counters, elems)
        lk kr;
        blk br;
        row_view(&kl, &bl, r, &kr, &br);
        const float *inr = in + r * bl.ld;
        float *outr = out + r * bl.ld;
        __m512 m, d;
        div16 dv;
        size_t i = 0, t = 0;
        for (; i + tc <= n; t++) {  // whole tiles: whole vectors
            const bool exact = tile_consts(&bl, t, &m, &d, &dv);
            if (bl.zeroed && bl.mul[t] == 0.0f) zeroed += nonzeros(inr + i, tc);
            for (size_t j = 0; j < tc; j += 16, i += 16) {
                __builtin_prefetch(inr + i + bl.ahead);  // a hint (ahead 0: this line, a no-op)
                block16(&kr, cls, mode, &br, m, d, exact ? 0xffff : 0, &dv, outr, inr, i, cnt, 0xffff);
            }
        }
        if (i < n) {  // a last tile cut short by the end of the row
            const bool exact = tile_consts(&bl, t, &m, &d, &dv);
            if (bl.zeroed && bl.mul[t] == 0.0f) zeroed += nonzeros(inr + i, n - i);
            for (; i < n; i += 16)
                block16(&kr, cls, mode, &br, m, d, exact ? 0xffff : 0, &dv, outr, inr, i, cnt,
                        n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1));
        }
    }
    if (bl.zeroed) *bl.zeroed += zeroed;
    if (cnt) add_counts(counts, &lc);
}

V4 void by_bytes(const lk *k, lean_class cls, fmt_round_mode mode, const fmt__codek *c, void *out,
                 const float *in, size_t n, fmt__counts *counts) {
    switch (c ? c->bytes : 0) {
    case 0: lean_loop(k, cls, mode, c, 0, out, in, n, counts); break;
    case 1: lean_loop(k, cls, mode, c, 1, out, in, n, counts); break;
    case 2: lean_loop(k, cls, mode, c, 2, out, in, n, counts); break;
    default: lean_loop(k, cls, mode, c, 4, out, in, n, counts); break;
    }
}

// Tile maxima (scale.c's amax of a unit's tiles): the max |x| bits of 16 tiles at a time, each
// tile a whole number of vectors, reduced across lanes together by a butterfly (16 tiles cost
// 30 shuffles and 15 maxima, where one reduction per tile costs 8 and leaves the max in a
// general register). Lane 4k + i of the butterfly's result holds tile 4i + k.
V4 __m512i max_pairs(__m512i a, __m512i b, int level) {
    switch (level) {
    case 0: return _mm512_max_epu32(_mm512_shuffle_i32x4(a, b, 0x44), _mm512_shuffle_i32x4(a, b, 0xee));
    case 1: return _mm512_max_epu32(_mm512_shuffle_i32x4(a, b, 0x88), _mm512_shuffle_i32x4(a, b, 0xdd));
    case 2: return _mm512_max_epu32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    default: {
        const __m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
        return _mm512_max_epu32(_mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0x88)),
                                _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0xdd)));
    }
    }
}

V4 void amax_loop(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512i fin = _mm512_setzero_si512();
    const size_t nt = (n + tc - 1) / tc;
    for (size_t t0 = 0; t0 < nt; t0 += 16) {
        __m512i v[16];
        if ((t0 + 16) * tc <= n) {  // 16 whole tiles: unmasked, unrolled (v stays in registers)
#pragma GCC unroll 16
            for (size_t j = 0; j < 16; j++) {
                v[j] = _mm512_setzero_si512();
                for (size_t i = (t0 + j) * tc; i < (t0 + j + 1) * tc; i += 16) {
                    const __m512i u = _mm512_and_si512(_mm512_loadu_si512(x + i), absm);
                    v[j] = _mm512_max_epu32(v[j], u);
                    if (finite) fin = _mm512_mask_max_epu32(fin, _mm512_cmple_epu32_mask(u, inf), fin, u);
                }
            }
        } else for (size_t j = 0; j < 16; j++) {
            v[j] = _mm512_setzero_si512();
            if (t0 + j >= nt) continue;
            for (size_t i = (t0 + j) * tc, end = i + tc < n ? i + tc : n; i < end; i += 16) {
                const __mmask16 live = end - i >= 16 ? 0xffff : (__mmask16)((1u << (end - i)) - 1);
                const __m512i u = _mm512_and_si512(_mm512_maskz_loadu_epi32(live, x + i), absm);
                v[j] = _mm512_max_epu32(v[j], u);
                if (finite) fin = _mm512_mask_max_epu32(fin, _mm512_cmple_epu32_mask(u, inf), fin, u);
            }
        }
#pragma GCC unroll 4
        for (int level = 0; level < 4; level++)
#pragma GCC unroll 8
            for (int j = 0; j < 8 >> level; j++) v[j] = max_pairs(v[2 * j], v[2 * j + 1], level);
        const size_t live = nt - t0 < 16 ? nt - t0 : 16;
        const __mmask16 lm = (__mmask16)((1u << live) - 1);
        const __m512i m = _mm512_permutexvar_epi32(order, v[0]);
        _mm512_mask_storeu_epi32(bits + t0, lm, _mm512_max_epu32(m, _mm512_maskz_loadu_epi32(lm, bits + t0)));
    }
    if (finite) {
        const uint32_t f = (uint32_t)_mm512_reduce_max_epu32(fin);
        if (f > *finite) *finite = f;
    }
}

TARGET_V4 static void amax_run_avx512(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    switch (tc) {
    case 16: amax_loop(x, n, 16, bits, finite); break;
    case 32: amax_loop(x, n, 32, bits, finite); break;
    default: amax_loop(x, n, tc, bits, finite); break;
    }
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

TARGET_V4 static void lean_run_avx512(const lk *k, lean_class cls, fmt_round_mode mode, const fmt__codek *c,
                                      void *out, const float *in, size_t n, fmt__counts *counts) {
    if (cls == LEAN_NONE) {  // codes of values rounded elsewhere
        by_bytes(k, LEAN_NONE, FMT_RNE, c, out, in, n, NULL);
        return;
    }
#define CALL(cl, m) by_bytes(k, cl, m, c, out, in, n, counts)
    WITH_COUNTS(cls, mode, CALL)
#undef CALL
}

// The tile widths of the presets (16: NVFP4, 32: MX) as constants: a tile is then a fixed
// number of whole vectors.
V4 void block_by_tc(const lk *k, lean_class cls, fmt_round_mode mode, const blk *b, float *out,
                    const float *in, size_t n, fmt__counts *counts) {
    switch (b->tc) {
    case 16: block_loop(k, cls, mode, b, 16, out, in, n, counts); break;
    case 32: block_loop(k, cls, mode, b, 32, out, in, n, counts); break;
    default: block_loop(k, cls, mode, b, b->tc, out, in, n, counts); break;
    }
}

TARGET_V4 static void block_run_avx512(const lk *k, lean_class cls, fmt_round_mode mode, const blk *b,
                                       float *out, const float *in, size_t n, fmt__counts *counts) {
#define CALL(cl, m) block_by_tc(k, cl, m, b, out, in, n, counts)
    WITH_COUNTS(cls, mode, CALL)
#undef CALL
}

V4 void decode_loop(const fmt__codek *cp, int b, float *x, const uint8_t *codes, size_t n) {
    const fmt__codek cl = *cp;  // not read again after every store (see lean_loop)
    const fmt__codek *c = &cl;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_si512(x + i, values16(c, load_codes16(codes + i * (size_t)b, b, 0xffff)));
    if (i < n) {
        const __mmask16 live = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_epi32(x + i, live, values16(c, load_codes16(codes + i * (size_t)b, b, live)));
    }
}

TARGET_V4 static void decode_run_avx512(const fmt__codek *c, float *x, const void *codes, size_t n) {
    switch (c->bytes) {
    case 1: decode_loop(c, 1, x, codes, n); break;
    case 2: decode_loop(c, 2, x, codes, n); break;
    default: decode_loop(c, 4, x, codes, n); break;
    }
}

TARGET_V4 static bool mxcsr_daz_ftz(void) { return (_mm_getcsr() & 0x8040u) != 0; }

// --- fp16 codes from the converter (FMT_PATH_HW's encoding): vcvtps2ph on sixteen lanes gives
// the codes themselves, with the mode as its immediate; then round_hw.c's fix-ups, on the codes:
// overflow under saturate (inf inputs included) to the largest finite code, flushed subnormals to
// the signed zero, and NaN to the format's quiet-NaN code with the input's sign.

typedef struct {
    bool saturate, flush;
    uint16_t nan_code, nan_sign;  // nan_sign: 0x8000 where the NaN code keeps the sign
} f16k;

V4 __m256i f16_codes16(const f16k *k, fmt_round_mode mode, __m512 v) {
    const __m256i sign = _mm256_set1_epi16((short)0x8000);
    __m256i c = FMT__CVTPS_PH_BY_MODE(_mm512_cvt_roundps_ph, v, mode);
    const __m256i cs = _mm256_and_si256(c, sign), cmag = _mm256_andnot_si256(sign, c);
    if (k->saturate) c = _mm256_or_si256(cs, _mm256_min_epu16(cmag, _mm256_set1_epi16(0x7bff)));
    if (k->flush) c = _mm256_mask_mov_epi16(c, _mm256_cmplt_epu16_mask(cmag, _mm256_set1_epi16(0x0400)), cs);
    const __m512i a = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000));
    const __m256i nanc = _mm256_or_si256(_mm256_set1_epi16((short)k->nan_code),
                                         _mm256_and_si256(cs, _mm256_set1_epi16((short)k->nan_sign)));
    return _mm256_mask_mov_epi16(c, nan, nanc);
}

V4 void f16_loop(const f16k *kp, fmt_round_mode mode, uint16_t *codes, const float *x, size_t n) {
    const f16k kl = *kp;  // not read again after every store (see lean_loop)
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(codes + i), f16_codes16(&kl, mode, _mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 live = (__mmask16)((1u << (n - i)) - 1);
        _mm256_mask_storeu_epi16(codes + i, live, f16_codes16(&kl, mode, _mm512_maskz_loadu_ps(live, x + i)));
    }
}

TARGET_V4 static void f16_run_avx512(const f16k *k, fmt_round_mode mode, uint16_t *codes, const float *x,
                                     size_t n) {
    switch (mode) {
    case FMT_RNE: f16_loop(k, FMT_RNE, codes, x, n); break;
    case FMT_RTZ: f16_loop(k, FMT_RTZ, codes, x, n); break;
    case FMT_RUP: f16_loop(k, FMT_RUP, codes, x, n); break;
    case FMT_RDN: f16_loop(k, FMT_RDN, codes, x, n); break;
    default: break;
    }
}

bool fmt__encode_f32_hw(const fmt__kparams *p, const fmt__codek *c, fmt_round_mode mode, void *codes,
                        const float *x, size_t n) {
    // The call is one the hw path covers (fmt__f32_hw_covers: IEEE binary16 in rne, rtz, rup or
    // rdn, or bfloat16 in rne), so five exponent bits are fp16. vcvtps2ph reads float32
    // subnormals as zero under MXCSR.DAZ (round_hw.c): decline there.
    if (p->ebits != 5 || !cpu_v4() || mxcsr_daz_ftz()) return false;
    const f16k k = {.saturate = p->overflow == FMT_SATURATE, .flush = p->flush,
                    .nan_code = (uint16_t)c->nan_code, .nan_sign = c->nan_sign_mask ? 0x8000 : 0};
    f16_run_avx512(&k, mode, codes, x, n);
    return true;
}

bool fmt__f32_lean_covers(const fmt__kparams *k, fmt_round_mode mode) {
    if (mode == FMT_SR && k->sr_variant != FMT_SR_A) return false;  // P3109's B and C: generic
    return (unsigned)mode < FMT_NMODES && class_of(k) != LEAN_NONE && cpu_v4();
}

static lk lk_make(const fmt__kparams *p, lean_class cls, uint64_t base) {
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

bool fmt__round_f32_lean(const fmt__kparams *p, fmt_round_mode mode, float *out, const float *in, size_t n,
                         uint64_t base, fmt__counts *counts) {
    const lean_class cls = class_of(p);
    if (cls == LEAN_NARROW && mxcsr_daz_ftz()) return false;  // this thread's MXCSR
    for (size_t done = 0; done < n; done += LEAN_BLOCK) {
        const size_t len = n - done < LEAN_BLOCK ? n - done : LEAN_BLOCK;
        const lk k = lk_make(p, cls, base + done);
        lean_run_avx512(&k, cls, mode, NULL, out + done, in + done, len, counts);
    }
    return true;
}

bool fmt__block_lean_covers(const fmt__kparams *k, fmt_round_mode mode, size_t tc) {
    return (tc == 1 || (tc && tc % 16 == 0)) && fmt__f32_lean_covers(k, mode);
}

bool fmt__scale_round_f32_lean(const fmt__block_req *r) {
    const fmt__kparams *p = r->k;
    const fmt_round_mode mode = r->mode;
    const size_t tc = r->tc, n = r->n;
    if (!fmt__block_lean_covers(p, mode, tc) || mxcsr_daz_ftz()) return false;
    if (r->rows != 1 && (r->rows == 0 || r->ld < n || (r->rows - 1) * r->ld + n > LEAN_BLOCK)) return false;
    const lean_class cls = class_of(p);
    // Pieces of whole tiles. The 64-bit divisions only where n is past one piece: this is called
    // per tile row of a unit, and two divisions cost as much as the rest of a short row's setup.
    for (size_t done = 0, t = 0; done < n;) {
        const size_t len = n - done <= LEAN_BLOCK ? n - done : LEAN_BLOCK / tc * tc;
        const lk k = lk_make(p, cls, r->base + done);
        // near_exact's mask: the bits below the midpoint position (22 - m of them), where they
        // exist.
        const uint32_t near_mask = mode != FMT_SR && p->m <= 20 ? (1u << (22 - p->m)) - 1 : 0;
        const blk b = {.tc = tc, .mul = r->mul + t, .deq = r->deq + t, .exact = r->exact,
                       .elems = r->elems ? r->elems + done : NULL, .ahead = r->ahead, .zeroed = r->zeroed,
                       .near_mask = near_mask, .rows = r->rows, .ld = r->ld};
        block_run_avx512(&k, cls, mode, &b, r->out + done, r->in + done, len, r->counts);
        done += len;
        if (done < n) t += len / tc;
    }
    return true;
}

bool fmt__tile_amax_lean(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    if (tc == 0 || tc % 16 || !cpu_v4()) return false;
    amax_run_avx512(x, n, tc, bits, finite);
    return true;
}

bool fmt__codes_lean_ok(const fmt__codek *c) { return c->enc && cpu_v4(); }
bool fmt__values_lean_ok(const fmt__codek *c) { return c->dec && cpu_v4(); }

bool fmt__encode_f32_lean(const fmt__kparams *p, const fmt__codek *c, fmt_round_mode mode, bool round,
                          void *codes, const float *x, size_t n, uint64_t base, fmt__counts *counts) {
    const lean_class cls = round ? class_of(p) : LEAN_NONE;
    if (cls == LEAN_NARROW && mxcsr_daz_ftz()) return false;
    for (size_t done = 0; done < n; done += LEAN_BLOCK) {
        const size_t len = n - done < LEAN_BLOCK ? n - done : LEAN_BLOCK;
        const lk k = round ? lk_make(p, cls, base + done) : (lk){0};
        lean_run_avx512(&k, cls, mode, c, (uint8_t *)codes + done * (size_t)c->bytes, x + done, len,
                        round ? counts : NULL);
    }
    return true;
}

void fmt__decode_f32_lean(const fmt__codek *c, float *x, const void *codes, size_t n) {
    decode_run_avx512(c, x, codes, n);
}

#else  // not x86-64: no AVX-512

bool fmt__f32_lean_covers(const fmt__kparams *k, fmt_round_mode mode) {
    (void)k, (void)mode;
    return false;
}

bool fmt__round_f32_lean(const fmt__kparams *p, fmt_round_mode mode, float *out, const float *in, size_t n,
                         uint64_t base, fmt__counts *counts) {
    (void)p, (void)mode, (void)out, (void)in, (void)n, (void)base, (void)counts;
    return false;
}

bool fmt__block_lean_covers(const fmt__kparams *k, fmt_round_mode mode, size_t tc) {
    (void)k, (void)mode, (void)tc;
    return false;
}

bool fmt__scale_round_f32_lean(const fmt__block_req *r) {
    (void)r;
    return false;
}

bool fmt__tile_amax_lean(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    (void)x, (void)n, (void)tc, (void)bits, (void)finite;
    return false;
}

bool fmt__codes_lean_ok(const fmt__codek *c) { (void)c; return false; }
bool fmt__values_lean_ok(const fmt__codek *c) { (void)c; return false; }

bool fmt__encode_f32_lean(const fmt__kparams *p, const fmt__codek *c, fmt_round_mode mode, bool round,
                          void *codes, const float *x, size_t n, uint64_t base, fmt__counts *counts) {
    (void)p, (void)c, (void)mode, (void)round, (void)codes, (void)x, (void)n, (void)base, (void)counts;
    return false;
}

void fmt__decode_f32_lean(const fmt__codek *c, float *x, const void *codes, size_t n) {
    (void)c, (void)x, (void)codes, (void)n;
}

bool fmt__encode_f32_hw(const fmt__kparams *p, const fmt__codek *c, fmt_round_mode mode, void *codes,
                        const float *x, size_t n) {
    (void)p, (void)c, (void)mode, (void)codes, (void)x, (void)n;
    return false;
}

#endif
