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
// decoding). Block scaling's one pass and the tiles' amax are round_lean_block.c's; what the
// two files share (the constants, the draws, the magnitudes, lean16's rules) is
// round_lean_internal.h's.
#include "round_lean_internal.h"

#ifdef LEAN_X86

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

V4 void by_bytes(const lk *k, lean_class cls, fmt_round_mode mode, const fmt__codek *c, void *out,
                 const float *in, size_t n, fmt__counts *counts) {
    switch (c ? c->bytes : 0) {
    case 0: lean_loop(k, cls, mode, c, 0, out, in, n, counts); break;
    case 1: lean_loop(k, cls, mode, c, 1, out, in, n, counts); break;
    case 2: lean_loop(k, cls, mode, c, 2, out, in, n, counts); break;
    default: lean_loop(k, cls, mode, c, 4, out, in, n, counts); break;
    }
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
    return (unsigned)mode < FMT_NMODES && class_of(k) != LEAN_NONE && (cpu_v4() || fmt__lean_avx2_runs());
}

bool fmt__round_f32_lean(const fmt__kparams *p, fmt_round_mode mode, float *out, const float *in, size_t n,
                         uint64_t base, fmt__counts *counts) {
    if (!cpu_v4()) return fmt__round_f32_lean_avx2(p, mode, out, in, n, base, counts);
    const lean_class cls = class_of(p);
    if (cls == LEAN_NARROW && mxcsr_daz_ftz()) return false;  // this thread's MXCSR
    for (size_t done = 0; done < n; done += LEAN_BLOCK) {
        const size_t len = n - done < LEAN_BLOCK ? n - done : LEAN_BLOCK;
        const lk k = lk_make(p, cls, base + done);
        lean_run_avx512(&k, cls, mode, NULL, out + done, in + done, len, counts);
    }
    return true;
}

bool fmt__codes_lean_ok(const fmt__codek *c) { return c->enc && cpu_v4(); }
bool fmt__values_lean_ok(const fmt__codek *c) { return c->dec && cpu_v4(); }

bool fmt__encode_f32_lean(const fmt__kparams *p, const fmt__codek *c, fmt_round_mode mode, bool round,
                          void *codes, const float *x, size_t n, uint64_t base, fmt__counts *counts) {
    if (!cpu_v4()) return false;  // codes: AVX-512 only
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
