// vec_internal.h: the lane types and helpers of the generic vector kernels (round_f32.c,
// codec_f32.c): eight 32-bit lanes in GCC/Clang vector extensions. Internal to formats/.
// Every helper is always inlined, so that a copy of a kernel compiled with a wider target
// attribute (round_internal.h) inlines them too (GCC does not inline across targets otherwise).
#ifndef FPLAB_VEC_INTERNAL_H
#define FPLAB_VEC_INTERNAL_H

#include <stdint.h>

// Eight lanes (32-byte vectors) on every target: 64-byte vectors were slower on the Zen 5 of the
// benchmarks even with AVX-512 (docs/benchmarks.md), and GCC 12 lowers vectors wider than the
// target's through memory. round_lean.c has explicit AVX-512 code.
enum { W = 8 };
#define FMT__VEC static inline __attribute__((always_inline))
typedef uint32_t vu __attribute__((vector_size(4 * W)));
typedef int32_t vi __attribute__((vector_size(4 * W)));
typedef float vf __attribute__((vector_size(4 * W)));

// Lane select: m is a mask of all-ones or all-zeros lanes.
// One ternary-logic instruction on AVX-512; three logic operations elsewhere.
FMT__VEC vu sel(vu m, vu a, vu b) { return b ^ ((a ^ b) & m); }
FMT__VEC vu bits(vf x) { return (vu)x; }
FMT__VEC vf as_f(vu x) { return (vf)x; }

// Comparisons as the sign of a difference: all-ones lanes where a < b. Exact whenever a - b
// fits in an int32, which holds at every use in the kernels (magnitudes below 2^31, exponents,
// shift counts). Integer comparisons of float32 magnitudes order them as values and do not
// depend on MXCSR's DAZ; and every target has the subtraction and the arithmetic shift (SSE2 has
// no unsigned comparison).
FMT__VEC vu lt(vu a, vu b) { return (vu)((vi)(a - b) >> 31); }
FMT__VEC vu lt_i(vi a, vi b) { return (vu)((a - b) >> 31); }
// 1 where a < b, 0 elsewhere, for any two uint32 (Hacker's Delight 2-12).
FMT__VEC vu ltu_full(vu a, vu b) {
    return ((~a & b) | (~(a ^ b) & (a - b))) >> 31;
}


#endif
