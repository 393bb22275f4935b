// engine_lanes.h: what the engine tile kernels share (internal to kernels/engine/): the vector
// lanes (VL float32 or int32 lanes, the same count of double lanes) of scaled_mm_cpu_engine_amd.c
// and scaled_mm_cpu_engine_block.c, and, for those two and scaled_mm_cpu_engine.c, the model's
// operand exponents (sig_exp of engine_model.c) from float32 bits, the exponent panels built
// beside the packed operands, and the tile's frame (eng_tile_frame: the panels' offsets, the
// tile's edges, the segments with C as the first addend, promotion and the epilogue), so that
// each kernel keeps only its arithmetic.
// Constraints: static inline only; no global state; exact lane operations (no contraction:
// the build's -ffp-contract=off).
#ifndef FPLAB_ENGINE_LANES_H
#define FPLAB_ENGINE_LANES_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX__) || defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kernels/engine.h"
#include "kernels/scaled_mm_internal.h"

#ifdef __AVX512F__
#define ENG_VL 16
#else
#define ENG_VL 8
#endif
typedef float eng_vf __attribute__((vector_size(ENG_VL * 4)));
typedef int32_t eng_vi __attribute__((vector_size(ENG_VL * 4)));
typedef uint32_t eng_vu __attribute__((vector_size(ENG_VL * 4)));
typedef double eng_vd __attribute__((vector_size(ENG_VL * 8)));
typedef int64_t eng_vl __attribute__((vector_size(ENG_VL * 8)));
// Panel loads (one vector load each).
typedef float eng_vf_u __attribute__((vector_size(ENG_VL * 4), aligned(4), may_alias));
typedef int32_t eng_vi_u __attribute__((vector_size(ENG_VL * 4), aligned(4), may_alias));

// The tile of every engine kernel: MR rows of op(A) x NR columns of op(B), one output per lane
// (columns along the vector, NV vectors a row).
enum { ENG_MR = 4, ENG_NV = 2, ENG_NR = ENG_VL * ENG_NV };
// NR lanes of int16 exponents (a row of the tile in one vector) and their panel loads.
typedef int16_t eng_vh __attribute__((vector_size(ENG_NR * 2)));
typedef int16_t eng_vh_u __attribute__((vector_size(ENG_NR * 2), aligned(2), may_alias));

// The lanes' operations by the instruction where the CPU has one (gcc builds a broadcast from
// the generic lane loop with an insert per lane, and keeps max and min as a compare and a blend):
// ENG_X(f) is the intrinsic _mm256_f (AVX2, 8 lanes) or _mm512_f (AVX-512, 16 lanes), eng_xi its
// integer register; elsewhere the generic forms.
#if defined(__AVX512F__) && ENG_VL == 16
#define ENG_X(f) _mm512_##f
typedef __m512i eng_xi;
#elif defined(__AVX2__) && ENG_VL == 8
#define ENG_X(f) _mm256_##f
typedef __m256i eng_xi;
#endif

// Broadcasts (not 0 + x, which would make a -0 operand +0 and costs an addition).
static inline eng_vi eng_ibcast(int32_t x) {
#ifdef ENG_X
    return (eng_vi)ENG_X(set1_epi32)(x);
#else
    eng_vi v;
    for (int l = 0; l < ENG_VL; l++) v[l] = x;
    return v;
#endif
}
static inline eng_vf eng_fbcast(float x) {
#ifdef ENG_X
    return (eng_vf)ENG_X(set1_ps)(x);
#else
    eng_vf v;
    for (int l = 0; l < ENG_VL; l++) v[l] = x;
    return v;
#endif
}
// Signed max and min per lane.
static inline eng_vi eng_max(eng_vi a, eng_vi b) {
#ifdef ENG_X
    return (eng_vi)ENG_X(max_epi32)((eng_xi)a, (eng_xi)b);
#else
    const eng_vi m = a > b;
    return (a & m) | (b & ~m);
#endif
}
static inline eng_vi eng_min(eng_vi a, eng_vi b) {
#ifdef ENG_X
    return (eng_vi)ENG_X(min_epi32)((eng_xi)a, (eng_xi)b);
#else
    const eng_vi m = a < b;
    return (a & m) | (b & ~m);
#endif
}
// The same on NR int16 lanes (AVX-512: with its BW part).
static inline eng_vh eng_hmax(eng_vh a, eng_vh b) {
#if defined(ENG_X) && (ENG_VL == 8 || defined(__AVX512BW__))
    return (eng_vh)ENG_X(max_epi16)((eng_xi)a, (eng_xi)b);
#else
    const eng_vh m = a > b;
    return (a & m) | (b & ~m);
#endif
}

// Whether any lane of m is not zero.
static inline bool eng_any(eng_vi m) {
#if defined(__AVX512F__) && ENG_VL == 16
    return _mm512_test_epi32_mask((__m512i)m, (__m512i)m) != 0;
#else
    const eng_vi z = {0};
    return memcmp(&m, &z, sizeof m) != 0;
#endif
}

// h's NR int16 lanes widened to int32 in NV vectors (lanes 0 .. VL - 1 first), by the
// instruction where there is one (gcc's generic conversion goes through memory).
static inline void eng_widen(eng_vi out[ENG_NV], eng_vh h) {
#if defined(__AVX512BW__) && ENG_VL == 16
    out[0] = (eng_vi)_mm512_cvtepi16_epi32(_mm512_castsi512_si256((__m512i)h));
    out[1] = (eng_vi)_mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64((__m512i)h, 1));
#elif defined(__AVX2__) && ENG_VL == 8
    out[0] = (eng_vi)_mm256_cvtepi16_epi32(_mm256_castsi256_si128((__m256i)h));
    out[1] = (eng_vi)_mm256_cvtepi16_epi32(_mm256_extracti128_si256((__m256i)h, 1));
#else
    for (int v = 0; v < ENG_NV; v++)
        for (int l = 0; l < ENG_VL; l++) out[v][l] = h[v * ENG_VL + l];
#endif
}

// floor (mode _MM_FROUND_TO_NEG_INF) or trunc (_MM_FROUND_TO_ZERO) per double lane.
#if defined(__AVX512F__) && ENG_VL == 16
#define ENG_ROUND_D(x, mode)                                                                     \
    do {                                                                                         \
        __m512d h_[2];                                                                           \
        memcpy(h_, &(x), sizeof h_);                                                             \
        for (int i_ = 0; i_ < 2; i_++) h_[i_] = _mm512_roundscale_pd(h_[i_], (mode) | _MM_FROUND_NO_EXC); \
        memcpy(&(x), h_, sizeof h_);                                                             \
    } while (0)
#elif defined(__AVX__)
#define ENG_ROUND_D(x, mode)                                                                     \
    do {                                                                                         \
        __m256d h_[ENG_VL / 4];                                                                  \
        memcpy(h_, &(x), sizeof h_);                                                             \
        for (int i_ = 0; i_ < ENG_VL / 4; i_++) h_[i_] = _mm256_round_pd(h_[i_], (mode) | _MM_FROUND_NO_EXC); \
        memcpy(&(x), h_, sizeof h_);                                                             \
    } while (0)
#else
#define _MM_FROUND_TO_NEG_INF 1
#define _MM_FROUND_TO_ZERO 3
#define ENG_ROUND_D(x, mode)                                                                     \
    for (int i_ = 0; i_ < ENG_VL; i_++) (x)[i_] = (mode) == _MM_FROUND_TO_ZERO ? trunc((x)[i_]) : floor((x)[i_])
#endif
static inline eng_vd eng_floor(eng_vd x) {
    ENG_ROUND_D(x, _MM_FROUND_TO_NEG_INF);
    return x;
}
static inline eng_vd eng_trunc(eng_vd x) {
    ENG_ROUND_D(x, _MM_FROUND_TO_ZERO);
    return x;
}

// VL int32 or float32 lanes to VL double lanes (exact) and back to float32 (to nearest), by the
// instructions where there are some (gcc's generic conversions of the double vector, twice the
// width of a register, go through memory).
#if defined(__AVX2__) && ENG_VL == 8
static inline eng_vd eng_pair_d(__m256d lo, __m256d hi) {
    eng_vd r;
    memcpy(&r, &lo, 32), memcpy((char *)&r + 32, &hi, 32);
    return r;
}
static inline eng_vd eng_i2d(eng_vi x) {
    const __m256i v = (__m256i)x;
    return eng_pair_d(_mm256_cvtepi32_pd(_mm256_castsi256_si128(v)), _mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1)));
}
static inline eng_vd eng_f2d(eng_vf x) {
    const __m256 v = (__m256)x;
    return eng_pair_d(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}
static inline eng_vf eng_d2f(eng_vd x) {
    __m256d h[2];
    memcpy(h, &x, sizeof h);
    return (eng_vf)_mm256_set_m128(_mm256_cvtpd_ps(h[1]), _mm256_cvtpd_ps(h[0]));
}
// 2^e per double lane (e within double's normal exponents: built from bits).
static inline eng_vd eng_p2d(eng_vi e) {
    const __m256i v = (__m256i)e, b = _mm256_set1_epi64x(1023);
    const __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v)), hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1));
    return eng_pair_d((__m256d)_mm256_slli_epi64(_mm256_add_epi64(lo, b), 52), (__m256d)_mm256_slli_epi64(_mm256_add_epi64(hi, b), 52));
}
#else
static inline eng_vd eng_i2d(eng_vi x) { return __builtin_convertvector(x, eng_vd); }
static inline eng_vd eng_f2d(eng_vf x) { return __builtin_convertvector(x, eng_vd); }
static inline eng_vf eng_d2f(eng_vd x) { return __builtin_convertvector(x, eng_vf); }
// 2^e per double lane (e within double's normal exponents: built from bits).
static inline eng_vd eng_p2d(eng_vi e) { return (eng_vd)((__builtin_convertvector(e, eng_vl) + 1023) << 52); }
#endif

// The model's exponent of a value with float32 bits u (sig_exp): a zero -126, a subnormal of its
// type the type's emin (>= -126).
static inline int16_t eng_op_exp(uint32_t u, int emin) {
    const int e = (int)((u >> 23) & 0xff) - 127;
    return (int16_t)(!(u & 0x7fffffff) ? -126 : e < emin ? emin : e);
}

// Whether an operand is in a kernel's exact range: finite and, with bf16_range, zero or within
// [2^-50, 2^50] (ENG_BF16_LO, ENG_BF16_HI: float32 magnitude bits; products then normal float32s).
enum { ENG_BF16_LO = 0x26800000, ENG_BF16_HI = 0x58800000 };
static inline bool eng_op_ok(uint32_t u, bool bf16_range) {
    const uint32_t m = u & 0x7fffffff;
    return m < 0x7f800000 && (!bf16_range || m == 0 || (m >= ENG_BF16_LO && m <= ENG_BF16_HI));
}

// Over one panel x of K x w elements (w lines: MR of A or NR of B, (K, w), padding lines zeros):
// each element's model exponent (eng_op_exp with the type's emin) into e2 (A: twice, in both
// int16 halves: one 32-bit broadcast per row) or e (B), either may be NULL (flags only); bad[l]
// = some operand of line l outside eng_op_ok. In lanes: the panel's elements go through NR lanes
// at a time (lane l holds line l % w: w divides NR), the flags ORed per lane and folded per line
// at the end; the panel's last K * w % NR elements one at a time, through the two themselves.
typedef int16_t eng_vh16 __attribute__((vector_size(ENG_VL * 2)));
_Static_assert(ENG_NR % ENG_MR == 0, "a chunk of NR elements holds whole rows of an A panel");
static inline __attribute__((always_inline)) void eng_exps_panel(int32_t *e2, int16_t *e, unsigned char *bad,
                                                                  const float *x, size_t K, const size_t w, int emin,
                                                                  bool bf16_range) {
    const size_t len = K * w, full = len / ENG_NR * ENG_NR;
    const eng_vi rng = eng_ibcast(-(int32_t)bf16_range);  // all ones: the bf16 range applies
    const eng_vi lo = eng_ibcast(emin + 127);
    eng_vi acc[ENG_NV] = {{0}};
    for (size_t c = 0; c < full; c += ENG_NR)
        for (int v = 0; v < ENG_NV; v++) {  // signed lanes: magnitudes are below 2^31
            const size_t o = c + (size_t)v * ENG_VL;
            const eng_vi u = *(const eng_vi_u *)(x + o), m = u & 0x7fffffff, z = m == 0;
            acc[v] |= (m >= 0x7f800000) | (rng & ~z & ((m < ENG_BF16_LO) | (m > ENG_BF16_HI)));
            // max(biased, emin + 127) - 127, a zero's -126
            const eng_vi ex = (~z & (eng_max((u >> 23) & 0xff, lo) - 127)) | (z & -126);
            if (e2) *(eng_vi_u *)(e2 + o) = (eng_vi)(((eng_vu)ex & 0xffff) | ((eng_vu)ex << 16));
            else if (e) {
                const eng_vh16 h = __builtin_convertvector(ex, eng_vh16);
                memcpy(e + o, &h, sizeof h);
            }
        }
    uint64_t lanes = 0;  // bit l: lane l's flag (l < NR <= 64)
    for (int l = 0; l < ENG_NR; l++) lanes |= (uint64_t)(acc[l / ENG_VL][l % ENG_VL] != 0) << l;
    unsigned char b[ENG_NR] = {0};  // per line (w <= NR)
    for (size_t l = 0; l < w; l++)
        for (size_t q = l; q < ENG_NR; q += w) b[l] |= (lanes >> q) & 1;
    for (size_t c = full; c < len; c++) {
        uint32_t u;
        memcpy(&u, &x[c], 4);
        b[c % w] |= !eng_op_ok(u, bf16_range);
        const int16_t ex = eng_op_exp(u, emin);
        if (e2) e2[c] = (int32_t)((uint32_t)(uint16_t)ex * 0x10001u);
        else if (e) e[c] = ex;
    }
    memcpy(bad, b, w);
}

// --- the products' scaling as an addition to their exponent fields
//
// Each kernel truncates a product a*b times a power of two 2^(f - E) (f: the kind's fraction
// bits plus any scale exponents, E: the lane's alignment exponent) toward zero to an integer.
// The power of two is an integer addition of s = f + pre - E to the product's exponent field,
// which runs beside the multiplies (one multiply a product and lane vector instead of two), on
// B's panel prescaled by 2^-pre (eng_prescale: exact, every nonzero product stays a normal
// float32). Where s >= 0 (a step where some lane's s is negative multiplies instead), the
// addition cannot carry out of the exponent field: a nonzero product's exponent plus s is at
// least lo + f - E >= lo - pre > -126 (lo: the smallest exponent of a nonzero product in the
// kernel's range: the types' smallest subnormals, bf16 from 2^-50). A zero product becomes
// 2^(s - 127), below 1, truncated to 0, where s <= 126: s is clamped there, which changes only
// lanes whose products are all zero, since a nonzero product puts E at lo + f - frac or above
// and so s at frac + pre - lo <= 126 (frac: the kind's fraction bits).
static inline int eng_prescale_bits(const mm__engine_plan *p) {
    int lo = 0;
    const unsigned t2[2] = {p->ta, p->tb};
    for (int i = 0; i < 2; i++) {
        const fmt_t *f = mm_engine_type_format(t2[i]);
        const int e = f->has_subnormals ? f->emin - f->mbits : f->emin;
        lo += t2[i] == MM_ET_BF16 && e < -50 ? -50 : e;
    }
    const int pre = 126 + lo - p->q->frac;
    return pre > 64 ? 64 : pre < 0 ? 0 : pre;
}

// x[i] * 2^-pre in place, over a kernel's panel (exact for its operands; NaN and inf stay).
static inline void eng_prescale(float *x, size_t n, int pre) {
    const float f = ldexpf(1.0f, -pre);
    for (size_t i = 0; i < n; i++) x[i] *= f;
}

// Per lane the shift s << 23 from s = f + pre - E, clamped at 126 as above and at -127 (s << 23
// then fits in 32 bits: ue8m0 scales of 2^-127 on both operands under a C near 2^127 put s at
// -293); *neg: some lane's s is negative (the step multiplies: eng_scale_mul).
static inline eng_vi eng_shift_bits(eng_vi s, eng_vi *neg) {
    *neg |= s;
    return eng_max(eng_min(s, eng_ibcast(126)), eng_ibcast(-127)) << 23;
}

// A product's term per lane: trunc(x * y * 2^s) as an int32 (wrapping: marked lanes only), the
// power of two an addition to the exponent field (sh = s << 23, eng_shift_bits) or, with mul, a
// multiply (sc = eng_scale_mul(sh)).
static inline eng_vu eng_term(eng_vf x, eng_vf y, eng_vi sh, eng_vf sc, const bool mul) {
    return (eng_vu)__builtin_convertvector(mul ? x * y * sc : (eng_vf)((eng_vi)(x * y) + sh), eng_vi);
}

// The multiplying form of a shift: 2^s as a float32, at least 2^-126 (below it, as there, every
// product's term is below 1: C, or a block's scales, far above the products).
static inline eng_vf eng_scale_mul(eng_vi sh) { return (eng_vf)eng_max(sh + (127 << 23), eng_ibcast(1 << 23)); }

// The tile's terms of the products k0, k0 + st, ... (n of them) added to S (MR x NV lanes; A's
// panel (K, MR), B's (K, NR)): eng_term with the shifts sh, as exponent-field additions or, with
// mul, multiplied.
static inline __attribute__((always_inline)) void eng_terms_as(const float *ap, const float *bp, size_t k0, size_t n,
                                                                size_t st, const eng_vi sh[ENG_MR][ENG_NV],
                                                                const bool mul, eng_vu S[ENG_MR][ENG_NV]) {
    enum { MR = ENG_MR, NV = ENG_NV, NR = ENG_NR };
    eng_vf sc[MR][NV];
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) sc[r][v] = mul ? eng_scale_mul(sh[r][v]) : (eng_vf){0};
    for (size_t t = 0, k = k0; t < n; t++, k += st) {
        eng_vf y[NV];
        for (int v = 0; v < NV; v++) y[v] = *(const eng_vf_u *)(bp + k * NR + (size_t)v * ENG_VL);
        for (int r = 0; r < MR; r++) {
            const eng_vf x = eng_fbcast(ap[k * MR + (size_t)r]);
            for (int v = 0; v < NV; v++) S[r][v] += eng_term(x, y[v], sh[r][v], sc[r][v], mul);
        }
    }
}

// The same, the form chosen by the step: where some lane's shift is negative (neg, from
// eng_shift_bits) every lane multiplies.
static inline __attribute__((always_inline)) void eng_terms(const float *ap, const float *bp, size_t k0, size_t n,
                                                             size_t st, const eng_vi sh[ENG_MR][ENG_NV], eng_vi neg,
                                                             eng_vu S[ENG_MR][ENG_NV]) {
    if (!eng_any(neg < 0)) eng_terms_as(ap, bp, k0, n, st, sh, false, S);
    else eng_terms_as(ap, bp, k0, n, st, sh, true, S);
}

// --- the exponent pass in int8 lanes
//
// Where both operand types have at most 8-bit exponents (fp8, fp6, fp4, fp16: model exponents from
// -15 to 16), a step's largest product exponent per lane is taken on int8 lanes, 64 a vector: two
// rows of the tile by its 32 columns, each column's exponent twice in B's int8 panel and a row
// pair's as one 16-bit broadcast, added with saturation; half the instructions of the int16 pass. A
// zero operand is ENG_E8_ZERO there, so that a product with one is at most -64 + 16 and two zeros
// saturate at -128, below every product of nonzero operands (at least -30). A lane whose largest is
// such a product (all its products have a zero operand) needs the model's exponent of it (-126 plus
// the other operand's): where any lane's is at or below ENG_E8_CUT, the int16 pass runs instead.
enum { ENG_E8_ZERO = -64, ENG_E8_CUT = -40 };

static inline bool eng_exps8_cover(const mm__engine_plan *p) {
#if defined(__AVX512BW__) && ENG_VL == 16
    const unsigned ok = MM_ET_E4M3 | MM_ET_E5M2 | MM_ET_E3M2 | MM_ET_E2M3 | MM_ET_E2M1 | MM_ET_F16 | MM_ET_E4M3FNUZ |
                        MM_ET_E5M2FNUZ;
    return (p->ta & ok) && (p->tb & ok);
#else
    (void)p;
    return false;
#endif
}

// An int16 panel exponent as int8 (a zero's -126 as ENG_E8_ZERO; NaN and inf, 128, clamped:
// their lines are the scalar model's).
static inline int8_t eng_exp8(int16_t e) { return (int8_t)(e == -126 ? ENG_E8_ZERO : e > 63 ? 63 : e); }

// An int8 exponent panel (eng_base_alloc's) from eng_exps_panel's int16 one, of K products: A's
// ea8 (K, MR / 2) of row pairs (low byte the pair's first row) from ea (K, MR); B's eb8 (K, 2 NR),
// each column's exponent twice, from eb (K, NR).
static inline void eng_exps8_panel_a(int16_t *ea8, const int32_t *ea, size_t K) {
    enum { MR = ENG_MR };
    for (size_t i = 0; i < K; i++)
        for (size_t pr = 0; pr < MR / 2; pr++) {
            const uint8_t lo = (uint8_t)eng_exp8((int16_t)ea[i * MR + 2 * pr]);
            const uint8_t hi = (uint8_t)eng_exp8((int16_t)ea[i * MR + 2 * pr + 1]);
            ea8[i * (MR / 2) + pr] = (int16_t)(lo | (uint16_t)(hi << 8));
        }
}
static inline void eng_exps8_panel_b(int8_t *eb8, const int16_t *eb, size_t K) {
    for (size_t i = 0; i < K * ENG_NR; i++) eb8[2 * i] = eb8[2 * i + 1] = eng_exp8(eb[i]);
}

// The largest product exponent per lane of the products k0, k0 + st, ... (n of them) on the
// tile's int8 panels, into Eh (row r, column j in int16 lane j); false (Eh untouched) where a
// lane's largest is a product with a zero operand (the int16 pass must run).
static inline __attribute__((always_inline)) bool eng_max8(const int16_t *ea8, const int8_t *eb8, size_t k0, size_t n,
                                                            size_t st, eng_vh Eh[ENG_MR]) {
#if defined(__AVX512BW__) && ENG_VL == 16
    enum { MR = ENG_MR, NR = ENG_NR };
    __m512i H8[MR / 2];  // rows 2p and 2p + 1 in the even and odd bytes of H8[p]
    for (int pr = 0; pr < MR / 2; pr++) H8[pr] = _mm512_set1_epi8(-128);
    for (size_t t = 0, k = k0; t < n; t++, k += st) {
        const __m512i e = _mm512_loadu_si512(eb8 + k * 2 * NR);
        for (int pr = 0; pr < MR / 2; pr++)
            H8[pr] = _mm512_max_epi8(H8[pr], _mm512_adds_epi8(e, _mm512_set1_epi16(ea8[k * (MR / 2) + (size_t)pr])));
    }
    __mmask64 z = 0;
    for (int pr = 0; pr < MR / 2; pr++) z |= _mm512_cmple_epi8_mask(H8[pr], _mm512_set1_epi8(ENG_E8_CUT));
    if (z) return false;
    __m512i H[MR];
    for (int pr = 0; pr < MR / 2; pr++) {  // the bytes sign-extended to int16, column j in word j
        H[2 * pr] = _mm512_srai_epi16(_mm512_slli_epi16(H8[pr], 8), 8);
        H[2 * pr + 1] = _mm512_srai_epi16(H8[pr], 8);
    }
    memcpy(Eh, H, sizeof H);
    return true;
#else
    (void)ea8, (void)eb8, (void)k0, (void)n, (void)st, (void)Eh;
    return false;
#endif
}

// --- the tile's frame

// A tile's panels from its first product, and where it stands in C.
typedef struct {
    const float *ap, *bp;  // (K, MR), (K, NR)
    const int32_t *ea;     // their exponent panels (NULL where the kernel keeps none)
    const int16_t *eb;
    const int16_t *ea8;    // their int8 exponent panels (NULL where there are none)
    const int8_t *eb8;
    size_t i0, j0;
} eng_tile;

// A kernel's arithmetic over one segment (products s0 .. s1 - 1) of the tile: c in (the
// segment's first C: zeros, or C in the chain) and out (its D); bad: lanes for the scalar model.
typedef void eng_seg_fn(const void *ctx, const eng_tile *t, size_t s0, size_t s1, eng_vf c[ENG_MR][ENG_NV],
                        eng_vi bad[ENG_MR][ENG_NV]);

// What the frame reads of a kernel's context (its first member): the exponent panels of eng_prep_panel
// beside mm__emu_pack's panels (NULL where the kernel keeps none) and the flags.
typedef struct {
    const mm__engine_plan *p;
    int32_t *ea;          // A: the exponent twice (both int16 halves: one 32-bit broadcast per row)
    int16_t *eb;          // B: the exponent
    int16_t *ea8;         // the same in int8 where eng_exps8_cover (eng_prep_panel), else NULL
    int8_t *eb8;
    unsigned char *abad;  // per row of op(A), per column of op(B): the scalar model's (all lines set)
    unsigned char *bbad;
    unsigned char *redo;  // (M, N): the outputs left to the scalar model
    bool mark_c;          // a NaN or inf first C (C in the chain) is the scalar model's
    bool redo_nan;        // an output whose y is NaN is the scalar model's (its payload is the model's)
    eng_seg_fn *seg;      // the kernel's arithmetic
} eng_base;

// One block for the flags and, with exps, the exponent panels of M x K and K x N operands:
// int32 A, then int16 B, then where eng_exps8_cover the int8 ones (eng_prep_panel), then `extra`
// bytes for the kernel (*extra_at; a multiple of 8), then the flags, abad and bbad zeroed. Sets
// x's pointers (p, set before, mark_c, redo_nan are the caller's). Returns the block to free, or
// NULL (MM_ENOMEM).
static inline char *eng_base_alloc(eng_base *x, size_t M, size_t N, size_t K, bool exps, size_t extra,
                                   void **extra_at) {
    const size_t na = (M + ENG_MR - 1) / ENG_MR * ENG_MR, nb = (N + ENG_NR - 1) / ENG_NR * ENG_NR;
    const bool e8 = exps && eng_exps8_cover(x->p);
    const size_t n16 = exps ? na * K * 4 + nb * K * 2 : 0, ne = n16 + (e8 ? ((na + 2 * nb) * K + 7) / 8 * 8 : 0);
    char *mem = malloc(ne + extra + na + nb + M * N);
    if (!mem) return NULL;
    x->ea = exps ? (int32_t *)mem : NULL, x->eb = exps ? (int16_t *)(mem + na * K * 4) : NULL;
    x->ea8 = e8 ? (int16_t *)(mem + n16) : NULL, x->eb8 = e8 ? (int8_t *)(mem + n16 + na * K) : NULL;
    if (extra_at) *extra_at = mem + ne;
    x->abad = (unsigned char *)mem + ne + extra, x->bbad = x->abad + na, x->redo = x->bbad + nb;
    memset(x->abad, 0, na + nb);
    return mem;
}

// What a kernel derives from each packed panel (eng_prep_panel, mm__emu_pack_each's hook, on the
// thread that packed it while the panel is in its cache): x's flags and, where x has them, its
// exponent panels, int16 and int8; B's panel then times 2^-pre (pre 0: none). flush_a, flush_b:
// CDNA2's input flush first, magnitudes below them +0 (0: none).
typedef struct {
    const eng_base *x;
    size_t K;
    int emin_a, emin_b;       // the operand types' emin (eng_op_exp)
    bool bf16_a, bf16_b;      // eng_op_ok's bf16 range
    bool flags;               // the flags and exponents (pairwise kinds: neither)
    int pre;
    uint32_t flush_a, flush_b;
} eng_prep;

static inline eng_prep eng_prep_make(const eng_base *x, size_t K, bool flags, bool bf16_range, int pre) {
    const mm__engine_plan *p = x->p;
    return (eng_prep){.x = x, .K = K, .emin_a = mm_engine_type_format(p->ta)->emin,
                      .emin_b = mm_engine_type_format(p->tb)->emin, .bf16_a = bf16_range && p->ta == MM_ET_BF16,
                      .bf16_b = bf16_range && p->tb == MM_ET_BF16, .flags = flags, .pre = pre};
}

// mm__emu_panel_fn: ctx an eng_prep.
static inline void eng_prep_panel(void *ctx, bool a, size_t p, float *panel) {
    const eng_prep *g = ctx;
    const eng_base *x = g->x;
    const size_t K = g->K, w = a ? ENG_MR : ENG_NR;
    const uint32_t flush = a ? g->flush_a : g->flush_b;
    if (flush)
        for (size_t i = 0; i < K * w; i++) {
            uint32_t u;
            memcpy(&u, &panel[i], 4);
            if ((u & 0x7fffffff) < flush) panel[i] = 0.0f;
        }
    if (g->flags && a) {
        int32_t *ea = x->ea ? x->ea + p * K * ENG_MR : NULL;
        eng_exps_panel(ea, NULL, x->abad + p * ENG_MR, panel, K, ENG_MR, g->emin_a, g->bf16_a);
        if (x->ea8) eng_exps8_panel_a(x->ea8 + p * K * (ENG_MR / 2), ea, K);
    } else if (g->flags) {
        int16_t *eb = x->eb ? x->eb + p * K * ENG_NR : NULL;
        eng_exps_panel(NULL, eb, x->bbad + p * ENG_NR, panel, K, ENG_NR, g->emin_b, g->bf16_b);
        if (x->eb8) eng_exps8_panel_b(x->eb8 + p * K * 2 * ENG_NR, eb, K);
    }
    if (!a && g->pre) eng_prescale(panel, K * w, g->pre);
}

// The tiles' panels and what g derives from them (mm__emu_pack_each with eng_prep_panel); on
// failure (MM_ENOMEM) frees the kernel's block mem.
static inline int eng_pack(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, eng_prep *g,
                           const float **ap, const float **bp, char *mem) {
    const int st = mm__emu_pack_each(J, A, B, ENG_MR, ENG_NR, ap, bp, eng_prep_panel, g);
    if (st != MM_OK) free(mem);
    return st;
}

// The emulated path's job of a kernel whose segments are the plan's (scales per K-block applied
// at promotion by mm__emu_promote): every kind but the block-scaled ones.
static inline void eng_job(mm__emu_job *J, const mm__engine_plan *p, const mm_operand *A, const mm_operand *B,
                           size_t M, size_t N, size_t K, const mm_opts *o) {
    *J = (mm__emu_job){.M = M, .N = N, .K = K, .sa = A->scales, .sb = B->scales, .beta = o->beta};
    J->ab = mm__fl32_prod3(o->alpha, mm__tscale(A), mm__tscale(B));
    J->nba = mm__nblocks(A, K, &J->bka);
    mm__nblocks(B, K, &J->bkb);
    J->bk = p->bk, J->pe = mm__seg_promote(o);
}

// A segment's last instruction when only m < kq of its kq products are left: the panels' m
// products copied into la (kq, MR), lb (kq, NR), zeros after them, and with pea the exponent
// panels into lea, leb, a zero's exponent (-126) after them, as the model pads the instruction.
static inline void eng_pad(float *la, float *lb, int32_t *lea, int16_t *leb, size_t kq, const float *pa,
                           const float *pb, const int32_t *pea, const int16_t *peb, size_t m) {
    memset(la, 0, kq * ENG_MR * sizeof *la), memset(lb, 0, kq * ENG_NR * sizeof *lb);
    memcpy(la, pa, m * ENG_MR * sizeof *la), memcpy(lb, pb, m * ENG_NR * sizeof *lb);
    if (!pea) return;
    const int32_t z2 = (int32_t)((uint32_t)(uint16_t)-126 * 0x10001u);  // twice, as in the panels
    for (size_t u = 0; u < kq * ENG_MR; u++) lea[u] = u < m * ENG_MR ? pea[u] : z2;
    for (size_t u = 0; u < kq * ENG_NR; u++) leb[u] = u < m * ENG_NR ? peb[u] : -126;
}

// The epilogue of a whole tile inside C, in lanes, as eng_tile_frame's per output below: an
// output is redone (C untouched, redo set) where its lane is bad, its row or column flagged, or
// (redo_nan) its y is NaN; else C = y, the engine epilogue of its promoted total or its D.
typedef uint8_t eng_vb __attribute__((vector_size(ENG_VL)));
static inline void eng_tile_out(const eng_base *x, const mm__emu_job *J, const float *d, const float *total,
                                eng_vi bad[ENG_MR][ENG_NV], float *C, size_t ldc, size_t i0, size_t j0) {
    enum { MR = ENG_MR, NV = ENG_NV, NR = ENG_NR };
    const bool chain = x->p->c_in_chain;
    eng_vi bb[NV];
    for (int v = 0; v < NV; v++) {
        eng_vb b;
        memcpy(&b, x->bbad + j0 + v * ENG_VL, sizeof b);
        bb[v] = __builtin_convertvector(b, eng_vi) != 0;
    }
    for (int r = 0; r < MR; r++) {
        const size_t i = i0 + r;
        const eng_vi ar = eng_ibcast(-(int32_t)(x->abad[i] != 0));
        for (int v = 0; v < NV; v++) {
            float *c = C + i * ldc + j0 + v * ENG_VL;
            eng_vf y;
            if (chain) y = *(const eng_vf_u *)(d + r * NR + v * ENG_VL);
            else {
                y = *(const eng_vf_u *)(total + r * NR + v * ENG_VL) * J->ab;  // mm__epilogue
                if (J->beta != 0.0f) y = y + *(const eng_vf_u *)c * J->beta;
            }
            eng_vi redo = (bad[r][v] != 0) | bb[v] | ar;
            if (x->redo_nan) redo |= y != y;
#if defined(__AVX512F__) && ENG_VL == 16
            // C written where the lane keeps its output, by a masked store: with beta = 0 C is
            // not read (a load of a tile row missing the cache stalled the epilogue).
            _mm512_mask_storeu_ps(c, _mm512_testn_epi32_mask((__m512i)redo, (__m512i)redo), (__m512)y);
#else
            const eng_vf old = *(const eng_vf_u *)c;
            *(eng_vf_u *)c = (eng_vf)(((eng_vi)old & redo) | ((eng_vi)y & ~redo));
#endif
            const eng_vb rb = __builtin_convertvector(redo & 1, eng_vb);
            memcpy(x->redo + i * J->N + j0 + v * ENG_VL, &rb, sizeof rb);
        }
    }
}

// The MR x NR tile of C at (ib * MR, jp * NR) (mm__emu_tile_fn; ctx's first member an eng_base):
// per segment of the job (mm__seg_end) the first C, the kernel's arithmetic (seg) and the
// promotion of its D; then each output through the epilogue, C untouched and redo set where the
// scalar model must do one.
static inline void eng_tile_frame(const mm__emu_job *J, const void *ctx, const float *ap, const float *bp, float *C,
                                  size_t ldc, size_t ib, size_t jp) {
    enum { MR = ENG_MR, NV = ENG_NV, NR = ENG_NR };
    const eng_base *x = ctx;
    const mm__engine_plan *p = x->p;
    const size_t K = J->K;
    const eng_tile t = {.ap = ap + ib * K * MR, .bp = bp + jp * K * NR, .ea = x->ea ? x->ea + ib * K * MR : NULL,
                        .eb = x->eb ? x->eb + jp * K * NR : NULL, .ea8 = x->ea8 ? x->ea8 + ib * K * (MR / 2) : NULL,
                        .eb8 = x->eb8 ? x->eb8 + jp * K * 2 * NR : NULL, .i0 = ib * MR, .j0 = jp * NR};
    const size_t i0 = t.i0, j0 = t.j0;
    const size_t mr = J->M - i0 < MR ? J->M - i0 : MR, nr = J->N - j0 < NR ? J->N - j0 : NR;
    float total[MR * NR] = {0}, d[MR][NR];
    eng_vi bad[MR][NV];
    memset(bad, 0, sizeof bad);
    for (size_t s0 = 0, s1; s0 < K; s0 = s1) {
        s1 = mm__seg_end(s0, K, J->bk, J->pe);
        eng_vf c[MR][NV];
        memset(c, 0, sizeof c);
        if (p->c_in_chain) {  // one segment: C is the first C
            float cin[MR][NR];
            memset(cin, 0, sizeof cin);
            for (size_t r = 0; r < mr; r++)
                for (size_t u = 0; u < nr; u++) cin[r][u] = C[(i0 + r) * ldc + j0 + u];
            memcpy(c, cin, sizeof c);
            if (x->mark_c)
                for (int r = 0; r < MR; r++)
                    for (int v = 0; v < NV; v++) bad[r][v] |= ((eng_vi)c[r][v] & 0x7f800000) == 0x7f800000;
        }
        x->seg(ctx, &t, s0, s1, c, bad);
        memcpy(d, c, sizeof d);
        mm__emu_promote(J, s0, i0, j0, MR, NR, &d[0][0], total);
    }
    if (mr == MR && nr == NR) {  // a tile inside C: the epilogue in lanes
        eng_tile_out(x, J, &d[0][0], total, bad, C, ldc, i0, j0);
        return;
    }
    int32_t badl[MR][NR];
    memcpy(badl, bad, sizeof badl);
    for (size_t r = 0; r < mr; r++) {
        const size_t i = i0 + r;
        for (size_t u = 0; u < nr; u++) {
            const size_t j = j0 + u;
            float *cij = &C[i * ldc + j];
            bool redo = badl[r][u] || x->abad[i] || x->bbad[j];
            float y = 0.0f;
            if (!redo) {
                y = mm__engine_epilogue(p, J->ab, J->beta, total[r * NR + u], d[r][u], cij);
                redo = x->redo_nan && isnan(y);
            }
            x->redo[i * J->N + j] = redo;
            if (!redo) *cij = y;
        }
    }
}

#endif
