// scaled_mm_cpu_fixed.c: float32 accumulation in one fixed order (mm_opts.fixed_order, and
// the fp32 path of a build without a BLAS): the same bits on every x86-64 CPU, build (-march)
// and thread count, where an sgemm's order of summation is its kernel's choice (OpenBLAS picks
// one per CPU family and blocks K by sizes that differ between them).
//
// The order: every output is its own sequential sum over k = 0 .. K-1 from +0, each product
// rounded to float32 and then added, s = fl32(s + fl32(a b)); then y = fl32(alpha s), and C =
// fl32(y + fl32(beta C)) when beta != 0, else fl32(y + 0). Multiply and add apart, as SSE2
// (every x86-64's baseline) computes them: a fused multiply-add would give other bits on CPUs
// and builds without FMA (x86-64-v2, or a software fmaf), or need them emulated. Vectorised
// across outputs (a lane is one column of C), never across k, so the vector width (4, 8 or 16
// lanes), the tile shape and the split of rows over threads change no bit.
// The packed panels, the thread loop and the MXCSR (round to nearest, no FTZ/DAZ, whatever the
// caller set) are the emulated kernels' (mm__emu_tiles).
// Constraints: no global state; the operands arrive with their scales already folded.
#include <string.h>

#include "kernels/scaled_mm_internal.h"

#ifdef __AVX512F__
#define VLF 16
enum { MR = 8, NV = 2 };
#else
#define VLF 8
enum { MR = 4, NV = 2 };
#endif
enum { NR = VLF * NV };
typedef float vf __attribute__((vector_size(VLF * 4)));
typedef float vf_u __attribute__((vector_size(VLF * 4), aligned(4), may_alias));  // panel loads

// x in every lane (x - +0 is x, signed zeros included).
static inline vf bcast(const float x) { return x - (vf){0}; }

// The MR x NR tile of C at (ib * MR, jp * NR) from the panels ap (ceil(M/MR), K, MR) and bp
// (ceil(N/NR), K, NR); J carries M, N, K, alpha (ab) and beta.
static void fixed_tile(const mm__emu_job *J, const void *ctx, const float *ap, const float *bp, float *C,
                       size_t ldc, size_t ib, size_t jp) {
    (void)ctx;
    const size_t K = J->K, i0 = ib * MR, j0 = jp * NR;
    const float *apan = ap + ib * K * MR, *bpan = bp + jp * K * NR;
    vf s[MR][NV];
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) s[r][v] = (vf){0};
    for (size_t k = 0; k < K; k++) {
        vf b[NV];
        for (int v = 0; v < NV; v++) b[v] = ((const vf_u *)(bpan + k * NR))[v];
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            const vf a = bcast(apan[k * MR + r]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) s[r][v] = s[r][v] + a * b[v];  // two roundings (no contraction)
        }
    }
    float t[MR * NR];
    memcpy(t, s, sizeof t);
    const size_t rows = J->M - i0 < (size_t)MR ? J->M - i0 : (size_t)MR;
    const size_t cols = J->N - j0 < (size_t)NR ? J->N - j0 : (size_t)NR;
    for (size_t r = 0; r < rows; r++) {
        float *c = C + (i0 + r) * ldc + j0;
        const float *tr = t + r * (size_t)NR;
        for (size_t l = 0; l < cols; l++) {
            const float y = J->ab * tr[l];
            c[l] = y + (J->beta != 0.0f ? J->beta * c[l] : 0.0f);
        }
    }
}

int mm__cpu_fp32_fixed(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                       size_t K, float alpha, float beta) {
    const mm__emu_job J = {.M = M, .N = N, .K = K, .ab = alpha, .beta = beta};
    return mm__emu_tiles(&J, A, B, C, ldc, MR, NR, fixed_tile, NULL);
}
