// expf_vec.h: a float32 exp that the compiler vectorises (op_expf, static inline, no branches,
// no libm call), for the elementwise paths of the model ops: SwiGLU's sigmoid, the attention
// softmax and cross-entropy's backward. glibc's expf is a scalar call that no loop around it can
// vectorise, and SwiGLU alone calls it for every hidden activation.
// Method: n = round(x / ln 2) (the 1.5 * 2^23 trick), r = x - n ln2_hi - n ln2_lo (Cody-Waite:
// ln2_hi has 15 significant bits, so n ln2_hi is exact for |n| <= 150 and x - n ln2_hi is exact
// by Sterbenz), |r| <= ln2/2; exp(r) = 1 + (r + r^2 q(r)) with q of degree 4 (coefficients
// fitted by weighted least squares on Chebyshev nodes, relative error of the polynomial 3.8e-9,
// about 0.03 ulp); the result is scaled by 2^n in two exact-or-once-rounded steps (2^(n/2)
// twice), so subnormal results are rounded once and overflow gives +inf.
// Accuracy (tests/test_expf_vec.c, every float32 input, against libm's double exp): at most
// OP_EXPF_MAX_ULP ulps of the float32 result, subnormal results included; +inf for
// x > 88.7228 (where expf overflows), +0 below -103.97, NaN for NaN, exp(-inf) = 0.
// Constraints: plain multiplies and adds (no fma: the project builds with -ffp-contract=off),
// so the bits are the same on every x86 level and compiler that keeps IEEE float32 semantics.
#ifndef FPLAB_EXPF_VEC_H
#define FPLAB_EXPF_VEC_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// The largest error of op_expf in ulps of the float32 result, over all float32 inputs (the
// exhaustive test measures it and asserts the bound).
#define OP_EXPF_MAX_ULP 1.0

static inline float op__f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t op__bits_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float op_expf(float x) {
    // Clamp (a NaN passes both tests and stays NaN): beyond these exp is 0 or inf anyway, and
    // inside them n stays in [-150, 129], where the two half scalings below are normal floats.
    x = x < -104.0f ? -104.0f : x;
    x = x > 89.0f ? 89.0f : x;
    const float shift = 0x1.8p23f;  // adding it rounds to an integer (nearest-even) in the low bits
    const float kf = x * 0x1.715476p0f + shift;  // x log2(e) + 1.5 2^23
    const int32_t n = (int32_t)(op__bits_from_f32(kf) - op__bits_from_f32(shift));
    const float nf = kf - shift;
    const float r = (x - nf * 0x1.62e4p-1f) - nf * 0x1.7f7d1cp-20f;  // ln2_hi + ln2_lo = ln 2
    const float r2 = r * r;
    const float q = 0x1.fffff8p-2f +
                    r * (0x1.55548ep-3f + r * (0x1.555b58p-5f + r * (0x1.123b9ep-7f + r * 0x1.687bf6p-10f)));
    const float p = 1.0f + (r + r2 * q);
    const int32_t n1 = n >> 1, n2 = n - n1;  // arithmetic shift: floor(n / 2)
    const float s1 = op__f32_from_bits((uint32_t)(n1 + 127) << 23);
    const float s2 = op__f32_from_bits((uint32_t)(n2 + 127) << 23);
    return (p * s1) * s2;
}

// out[i] = op_expf(x[i]) (may alias); the loop the exhaustive test checks.
void op_expf_f32(float *out,       // (n)
                 const float *x,   // (n)
                 size_t n);

#endif
