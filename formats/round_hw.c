// round_hw.c: the float32 rounding path through the CPU's own converters, FMT_PATH_HW:
// - fp16: F16C vcvtps2ph, whose immediate gives rne, rtz, rup or rdn, then vcvtph2ps back;
// - bf16: AVX512-BF16 vcvtneps2bf16 (rne only), then a 16-bit shift back.
// Constraints: bit for bit the results of the generic kernel (round_f32.c), which
// tests/test_round.c and tools/verify_exhaustive.c check on every float32 input. So each
// converter is followed by a fix-up, lane-wise and branch-free, of what it does otherwise:
// - NaN: the converters keep a truncated, quieted payload; fplab gives the quiet NaN 0x7fc00000
//   with the input's sign;
// - float32 subnormal inputs: vcvtneps2bf16 always reads them as zero (bf16 has their range,
//   so they round to bf16 subnormals): those lanes are rounded with the integer rule instead.
//   vcvtps2ph reads them as zero only when MXCSR.DAZ is set: fp16 calls then decline and the
//   generic kernel runs;
// - overflow under the saturate policy (inf inputs included): the converters give inf, fplab max;
// - flush_subnormals: subnormal results become zero of the same sign (both formats have -0).
// No statistics: a call with a fmt_stats takes another path. Every function that uses
// the instructions carries their target attribute, so a portable build compiles this file and
// round.c takes the path only when the CPU has them (__builtin_cpu_supports; clang builds use
// it only when -march has them).
#include <string.h>

#include "isa_targets.h"
#include "round_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HW_X86 1
// The instruction sets as target attributes (feature lists that add to -march: isa_targets.h),
// empty where -march has them already.
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__) && defined(__BMI2__)
#define BUILD_V3 1
#define TARGET_V3
#else
#define TARGET_V3 FMT_TARGET(FMT_ISA_V3)
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512BF16__)
#define BUILD_V4_BF16 1
#define TARGET_V4_BF16
#else
#define TARGET_V4_BF16 FMT_TARGET(FMT_ISA_V4 ",avx512bf16")
#endif
#endif

#ifdef HW_X86

// The CPU has x86-64-v3 (AVX2, F16C) / x86-64-v4 with AVX512-BF16.
static bool cpu_v3(void) {
#if defined(BUILD_V3)
    return true;
#elif defined(__clang__)
    return false;
#else
    return __builtin_cpu_supports("x86-64-v3");
#endif
}

static bool cpu_v4_bf16(void) {
#if defined(BUILD_V4_BF16)
    return true;
#elif defined(__clang__)
    return false;
#else
    return __builtin_cpu_supports("x86-64-v4") && __builtin_cpu_supports("avx512bf16");
#endif
}

// Which converter a format has: the descriptor is exactly IEEE binary16 or bfloat16, under the
// policies the fix-ups know (ieee, saturate).
typedef enum { HW_NONE, HW_FP16, HW_BF16 } hw_kind;

static hw_kind kind_of(const fmt__kparams *k) {
    if (k->bits != 16 || !k->is_signed || k->special != FMT_IEEE || k->clamp_min) return HW_NONE;
    if (k->overflow != FMT_OVERFLOW_IEEE && k->overflow != FMT_SATURATE) return HW_NONE;
    if (k->ebits == 5 && k->m == 10 && k->bias == 15) return HW_FP16;
    if (k->ebits == 8 && k->m == 7 && k->bias == 127) return HW_BF16;
    return HW_NONE;
}

// What the fix-ups need, as float32 bit patterns.
typedef struct {
    uint32_t max_bits, min_normal_bits;
    bool saturate, flush;
} hwk;

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

// --- fp16: eight lanes of F16C and AVX2

#define V3 TARGET_V3 __attribute__((always_inline)) static inline

// The converter's result, then the fix-ups (their order is the generic kernel's: overflow,
// flushing, then NaN, which neither of the others may touch).
V3 __m256i fp16_round8(const hwk *k, fmt_round_mode mode, __m256 v) {
    const __m256i b = _mm256_castps_si256(v), sign = _mm256_set1_epi32((int)0x80000000u);
    __m256i r = _mm256_castps_si256(_mm256_cvtph_ps(FMT__CVTPS_PH_BY_MODE(_mm256_cvtps_ph, v, mode)));
    const __m256i rs = _mm256_and_si256(r, sign), rmag = _mm256_andnot_si256(sign, r);
    if (k->saturate) r = _mm256_or_si256(rs, _mm256_min_epu32(rmag, _mm256_set1_epi32((int)k->max_bits)));
    if (k->flush) {
        const __m256i tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)k->min_normal_bits), rmag);
        r = _mm256_blendv_epi8(r, rs, tiny);
    }
    const __m256i a = _mm256_andnot_si256(sign, b);
    const __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
    const __m256i qnan = _mm256_or_si256(_mm256_and_si256(b, sign), _mm256_set1_epi32(0x7fc00000));
    return _mm256_blendv_epi8(r, qnan, nan);
}

V3 void fp16_loop(const hwk *k, fmt_round_mode mode, float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_si256((__m256i *)(x + i), fp16_round8(k, mode, _mm256_loadu_ps(x + i)));
    if (i < n) {  // the tail, padded with zeros
        float t[8] = {0};
        memcpy(t, x + i, (n - i) * sizeof *x);
        _mm256_storeu_si256((__m256i *)t, fp16_round8(k, mode, _mm256_loadu_ps(t)));
        memcpy(x + i, t, (n - i) * sizeof *x);
    }
}

TARGET_V3 static void
fp16_run_avx2(const hwk *k, fmt_round_mode mode, float *x, size_t n) {
    switch (mode) {
    case FMT_RNE: fp16_loop(k, FMT_RNE, x, n); break;
    case FMT_RTZ: fp16_loop(k, FMT_RTZ, x, n); break;
    case FMT_RUP: fp16_loop(k, FMT_RUP, x, n); break;
    case FMT_RDN: fp16_loop(k, FMT_RDN, x, n); break;
    default: break;
    }
}

TARGET_V3 static bool mxcsr_daz(void) {
    return (_mm_getcsr() & 0x0040u) != 0;
}

// --- bf16: sixteen lanes of AVX-512 with AVX512-BF16

#define V4 TARGET_V4_BF16 __attribute__((always_inline)) static inline

V4 __m512i bf16_round16(const hwk *k, __m512 v) {
    const __m512i b = _mm512_castps_si512(v), sign = _mm512_set1_epi32((int)0x80000000u);
    const __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
    __m512i r = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    // Lanes with a zero exponent field (zeros and float32 subnormals, which the instruction
    // flushes): round to nearest even on the bits, b + 0x7fff + lsb, then drop the low half.
    const __mmask16 sub = _mm512_testn_epi32_mask(b, _mm512_set1_epi32(0x7f800000));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    const __m512i t = _mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)), lsb);
    r = _mm512_mask_and_epi32(r, sub, t, _mm512_set1_epi32((int)0xffff0000u));
    const __m512i rs = _mm512_and_si512(r, sign), rmag = _mm512_andnot_si512(sign, r);
    if (k->saturate) r = _mm512_or_si512(rs, _mm512_min_epu32(rmag, _mm512_set1_epi32((int)k->max_bits)));
    if (k->flush) {
        const __mmask16 tiny = _mm512_cmplt_epu32_mask(rmag, _mm512_set1_epi32((int)k->min_normal_bits));
        r = _mm512_mask_mov_epi32(r, tiny, rs);
    }
    const __m512i a = _mm512_andnot_si512(sign, b);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000));
    const __m512i qnan = _mm512_or_si512(_mm512_and_si512(b, sign), _mm512_set1_epi32(0x7fc00000));
    return _mm512_mask_mov_epi32(r, nan, qnan);
}

TARGET_V4_BF16 static void
bf16_run_avx512(const hwk *k, float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_si512(x + i, bf16_round16(k, _mm512_loadu_ps(x + i)));
    if (i < n) {  // the tail, through masked loads and stores
        const __mmask16 live = (__mmask16)((1u << (n - i)) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(live, x + i);
        _mm512_mask_storeu_epi32(x + i, live, bf16_round16(k, v));
    }
}

bool fmt__f32_hw_covers(const fmt__kparams *k, fmt_round_mode mode) {
    switch (kind_of(k)) {
    case HW_FP16:
        return (mode == FMT_RNE || mode == FMT_RTZ || mode == FMT_RUP || mode == FMT_RDN) && cpu_v3();
    case HW_BF16: return mode == FMT_RNE && cpu_v4_bf16();
    default: return false;
    }
}

bool fmt__round_f32_hw(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n) {
    const hwk k = {.max_bits = f2u((float)p->max), .min_normal_bits = f2u((float)p->min_normal),
                   .saturate = p->overflow == FMT_SATURATE, .flush = p->flush};
    switch (kind_of(p)) {
    case HW_FP16:
        if (mxcsr_daz()) return false;  // the MXCSR of the thread that runs this chunk
        fp16_run_avx2(&k, mode, x, n);
        return true;
    case HW_BF16: bf16_run_avx512(&k, x, n); return true;
    default: return false;
    }
}

#else  // not x86-64: no converters

bool fmt__f32_hw_covers(const fmt__kparams *k, fmt_round_mode mode) {
    (void)k, (void)mode;
    return false;
}

bool fmt__round_f32_hw(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n) {
    (void)p, (void)mode, (void)x, (void)n;
    return false;
}

#endif
