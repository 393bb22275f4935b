// rng.h: the counter-based generator behind stochastic rounding and every random choice in
// fplab. A draw is a pure function of (key, index), key = fmt_rng_key(seed, stream), so parallel
// loops give the same bits whatever the thread count and a run replays from its seed.
// Constraints: no state, no clock; cheap enough to vectorise (32-bit multiplies only).
#ifndef FPLAB_RNG_H
#define FPLAB_RNG_H

#include <stdint.h>

// FMT_HD marks the inline functions that the CUDA kernels share with the C code (kernels/
// cast_cuda_kernels.cuh): __host__ __device__ where nvcc compiles the includer, else nothing.
#ifndef FMT_HD
#ifdef __CUDACC__
#define FMT_HD __host__ __device__
#else
#define FMT_HD
#endif
#endif

typedef struct {
    uint32_t k0, k1, k2;  // derived from (seed, stream), and mixed into every draw
} fmt_rng_key;

// Mixes the 128 bits of (seed, stream) into a key (splitmix64 finaliser, run once per call).
fmt_rng_key fmt_rng_make_key(uint64_t seed, uint64_t stream);

// A 32-bit bijective integer hash with low bias (the "lowbias32" constants found by Wellons'
// hash prospector); three keyed rounds make one draw.
FMT_HD static inline uint32_t fmt_rng_mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

// Uniform 32-bit draw number `index` of the stream `key`. The high half of a 64-bit index is
// folded into the key so that streams longer than 2^32 do not repeat.
FMT_HD static inline uint32_t fmt_rng_u32(fmt_rng_key key, uint64_t index) {
    uint32_t lo = (uint32_t)index, hi = (uint32_t)(index >> 32);
    uint32_t x = fmt_rng_mix32(lo ^ key.k0);
    x = fmt_rng_mix32(x + (key.k1 ^ hi * 0x9e3779b9U));
    return fmt_rng_mix32(x ^ key.k2);
}

// The same draws, eight consecutive indices at once (GCC/Clang vector extensions, so the
// rounding kernel stays vectorised): lane l holds fmt_rng_u32(key, index + l).
typedef uint32_t fmt_u32x8 __attribute__((vector_size(32)));

static inline fmt_u32x8 fmt_rng_mix32x8(fmt_u32x8 x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

static inline fmt_u32x8 fmt_rng_u32x8(fmt_rng_key key, uint64_t index) {
    const fmt_u32x8 lane = {0, 1, 2, 3, 4, 5, 6, 7};
    const uint32_t lo0 = (uint32_t)index, hi0 = (uint32_t)(index >> 32);
    const fmt_u32x8 lo = lo0 + lane;
    const fmt_u32x8 hi = hi0 - (fmt_u32x8)(lo < lo0);  // carry into the high half (mask is -1)
    fmt_u32x8 x = fmt_rng_mix32x8(lo ^ key.k0);
    x = fmt_rng_mix32x8(x + (key.k1 ^ hi * 0x9e3779b9U));
    return fmt_rng_mix32x8(x ^ key.k2);
}

// Uniform double in [0, 1) with 53 random bits from draws 2*index and 2*index+1.
static inline double fmt_rng_uniform(fmt_rng_key key, uint64_t index) {
    uint64_t a = fmt_rng_u32(key, 2 * index), b = fmt_rng_u32(key, 2 * index + 1);
    return (double)(((a << 32) | b) >> 11) * 0x1.0p-53;
}

#endif
