// scaled_mm_internal.h: what the backends of scaled_mm.h share: the CPU backend's two halves
// (scaled_mm_cpu.c: fp32 accumulation through BLAS; scaled_mm_cpu_emu.c: emulated
// accumulators) and the CUDA backend's host side (scaled_mm_cuda_kernels.cuh, which includes
// it inside extern "C"). Internal to kernels/: not installed.
#ifndef FPLAB_SCALED_MM_INTERNAL_H
#define FPLAB_SCALED_MM_INTERNAL_H

#include <math.h>

#include "formats/round_scalar.h"
#include "kernels/scaled_mm.h"

// Number of K-blocks of X's scales; *bk = their length (K when X has one block per row/column).
static inline size_t mm__nblocks(const mm_operand *X, size_t K, size_t *bk) {
    *bk = X->block_k > 0 ? (size_t)X->block_k : (K ? K : 1);
    return K ? (K + *bk - 1) / *bk : 0;
}

static inline float mm__tscale(const mm_operand *X) {
    return X->tensor_scale == 0.0f ? 1.0f : X->tensor_scale;
}

// fl32(a * b * c), rounded once: a*b is exact in double, the product with c is rounded to odd
// at 53 bits (hi plus the exact error from an fma), so the final cast to float is the correctly
// rounded result (53 >= 24 + 2).
static inline float mm__fl32_prod3(float a, float b, float c) {
    const double ab = (double)a * b, hi = ab * c, lo = fma(ab, c, -hi);
    uint64_t u = fmt__d2u(hi);
    if (lo != 0.0 && isfinite(hi) && !(u & 1)) u += (signbit(lo) == signbit(hi)) ? 1 : -1;
    return (float)fmt__u2d(u);
}

// Element (i, k) of op(A) and (k, j) of op(B), whatever the storage.
static inline float mm__a_at(const mm_operand *A, size_t i, size_t k) {
    return A->trans ? A->x[k * A->ld + i] : A->x[i * A->ld + k];
}
static inline float mm__b_at(const mm_operand *B, size_t k, size_t j) {
    return B->trans ? B->x[j * B->ld + k] : B->x[k * B->ld + j];
}

// C rows = round_out(C rows); element (i, j) draws stochastic counter offset + i*N + j
// (defined in scaled_mm_cpu.c; the CUDA backend rounds its copied-back C with it too).
int mm__round_output(float *C, size_t ldc, size_t M, size_t N, const mm_opts *o);

// The emulated-accumulator path of mm_cpu (arguments validated, M, N, K > 0).
int mm__cpu_emulated(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                     size_t N, size_t K, const mm_opts *o);

#endif
