// engine_lanes.h: what the engine tile kernels share (internal to kernels/engine/): the vector
// lanes (VL float32 or int32 lanes, the same count of double lanes) of scaled_mm_cpu_engine_amd.c
// and scaled_mm_cpu_engine_block.c, and, for those two and scaled_mm_cpu_engine.c, the model's
// operand exponents (sig_exp of engine_model.c) from float32 bits and the exponent panels built
// beside the packed operands.
// Constraints: static inline only; no global state; exact lane operations (no contraction:
// the build's -ffp-contract=off).
#ifndef FPLAB_ENGINE_LANES_H
#define FPLAB_ENGINE_LANES_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX__) || defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kernels/engine.h"

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

// Broadcasts (not 0 + x, which would make a -0 operand +0 and costs a scalar addition).
static inline eng_vi eng_ibcast(int32_t x) {
    eng_vi v;
    for (int l = 0; l < ENG_VL; l++) v[l] = x;
    return v;
}
static inline eng_vf eng_fbcast(float x) {
    eng_vf v;
    for (int l = 0; l < ENG_VL; l++) v[l] = x;
    return v;
}
static inline eng_vi eng_max(eng_vi a, eng_vi b) {
    const eng_vi m = a > b;
    return (a & m) | (b & ~m);
}
static inline eng_vi eng_min(eng_vi a, eng_vi b) {
    const eng_vi m = a < b;
    return (a & m) | (b & ~m);
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

// 2^e per double lane (e within double's normal exponents: built from bits).
static inline eng_vd eng_p2d(eng_vi e) { return (eng_vd)((__builtin_convertvector(e, eng_vl) + 1023) << 52); }

// The model's exponent of a value with float32 bits u (sig_exp): a zero -126, a subnormal of its
// type the type's emin (>= -126).
static inline int16_t eng_op_exp(uint32_t u, int emin) {
    const int e = (int)((u >> 23) & 0xff) - 127;
    return (int16_t)(!(u & 0x7fffffff) ? -126 : e < emin ? emin : e);
}

// Whether an operand is in a kernel's exact range: finite and, with bf16_range, zero or within
// [2^-50, 2^50] (products then normal float32s).
static inline bool eng_op_ok(uint32_t u, bool bf16_range) {
    const uint32_t m = u & 0x7fffffff;
    return m < 0x7f800000 && (!bf16_range || m == 0 || (m >= 0x26800000 && m <= 0x58800000));
}

// Over the panels x of n lines of type `type` ((ceil(n/w), K, w), padding lines zeros): each
// element's model exponent into e2 (A: twice, in both int16 halves: one 32-bit broadcast per
// row) or e (B), either may be NULL (flags only); bad[line] = some operand outside eng_op_ok.
// Branch-free per element, with w a constant at each call, so that the line loop vectorises.
static inline __attribute__((always_inline)) void eng_exps(int32_t *e2, int16_t *e, unsigned char *bad,
                                                            const float *x, size_t n, size_t K, const size_t w,
                                                            unsigned type, bool bf16_range) {
    const size_t np = (n + w - 1) / w;
    const int emin = mm_engine_type_format(type)->emin;  // type: one the kind takes
#pragma omp parallel for schedule(static)
    for (size_t pp = 0; pp < np; pp++) {
        unsigned char b[64] = {0};  // w <= 64
        for (size_t k = 0; k < K; k++) {
            const size_t at = (pp * K + k) * w;
            for (size_t t = 0; t < w; t++) {
                uint32_t u;
                memcpy(&u, &x[at + t], 4);
                b[t] |= !eng_op_ok(u, bf16_range);
                const int16_t ex = eng_op_exp(u, emin);
                if (e2) e2[at + t] = (int32_t)((uint32_t)(uint16_t)ex * 0x10001u);
                else if (e) e[at + t] = ex;
            }
        }
        memcpy(bad + pp * w, b, w);
    }
}

#endif
