// bench_util.h: what the benchmarks of formats/ share (header-only, static inline): the input
// array of mixed magnitudes, the memory-bound baselines (a copy and an in-place read-modify-write
// split over the threads), a best-of timer, and a checksum.
// Benchmarks are not tests: they print tables and never fail on a timing.
#ifndef FPLAB_BENCH_UTIL_H
#define FPLAB_BENCH_UTIL_H

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "formats/rng.h"

static inline float bu_u2f(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static inline uint32_t bu_f2u(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }

// Random sign and mantissa, exponent uniform over 2^-16 .. 2^16 (overflow for fp8/fp16, the
// subnormal ranges of fp8/fp6/fp4/fp16), and about 1/64 special values: zeros, infinities,
// NaNs, float32 subnormals and tiny normals (bf16/fp32 subnormal paths) and huge values.
// The seed is fixed, so that runs compare.
static inline void bu_make_input(float *x, size_t n) {
    const fmt_rng_key key = fmt_rng_make_key(20240601u, 0);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        uint32_t r = fmt_rng_u32(key, 2 * (uint64_t)i), r2 = fmt_rng_u32(key, 2 * (uint64_t)i + 1);
        uint32_t sign = r2 >> 31, man = r & 0x7fffffu, e;
        if ((r2 & 63) == 0) {
            switch ((r2 >> 6) & 7) {
            case 0: e = 0, man = 0; break;                   // +-0
            case 1: e = 255, man = 0; break;                 // +-inf
            case 2: e = 255, man |= 0x400000u; break;        // quiet NaN
            case 3: e = 0; break;                            // float32 subnormal
            case 4: e = 1 + ((r2 >> 9) % 24); break;         // tiny normal, 2^-126 .. 2^-103
            case 5: e = 230 + ((r2 >> 9) % 25); break;       // huge, 2^103 .. 2^127
            default: e = 127 - 40 + ((r2 >> 9) % 81); break; // wider spread, 2^-40 .. 2^40
            }
        } else {
            e = 127 - 16 + ((r2 >> 6) % 33);
        }
        x[i] = bu_u2f(sign << 31 | e << 23 | man);
    }
}

// bu_make_input's array without its special values: each is replaced by its magnitude's
// ordinary neighbour, the exponent put back into 2^-16 .. 2^16 (no zeros, infinities, NaNs or
// values far from the others in a block), as a trained network's tensors mostly are.
static inline void bu_plain_input(float *x, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = bu_f2u(x[i]), e = (u >> 23) & 0xff;
        if (e < 127 - 16 || e > 127 + 16) x[i] = bu_u2f((u & 0x807fffffu) | (127u - 16 + e % 33) << 23);
    }
}

// dst[0..bytes) = src[0..bytes), one slice per thread (as the kernels split their arrays).
static inline void bu_copy_par(void *restrict dst, const void *restrict src, size_t bytes) {
#pragma omp parallel
    {
        size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        size_t lo = bytes * t / nt, hi = bytes * (t + 1) / nt;
        memcpy((char *)dst + lo, (const char *)src + lo, hi - lo);
    }
}

static volatile float bu_vol_one = 1.0f;

// x[i] *= one in place, one read through a volatile so that the loop is not folded away.
static inline void bu_rmw_par(float *x, size_t n) {
    const float one = bu_vol_one;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = x[i] * one;
}

// FNV-1a over the bytes, for comparing results between runs and thread counts.
static inline uint64_t bu_checksum(const void *p, size_t bytes) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

// The best of reps timings of fn(ctx), in nanoseconds per element of n; before each, prep(ctx)
// runs untimed (NULL: nothing), e.g. to restore an array rounded in place.
static inline double bu_best_ns(void (*fn)(void *), void (*prep)(void *), void *ctx, size_t n, int reps) {
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        if (prep) prep(ctx);
        const double t0 = omp_get_wtime();
        fn(ctx);
        const double t = omp_get_wtime() - t0;
        if (t < best) best = t;
    }
    return best * 1e9 / (double)n;
}

#endif
