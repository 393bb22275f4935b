// scaled_mm_internal.h: what the backends of scaled_mm.h share: the CPU backend's two halves
// (scaled_mm_cpu.c: fp32 accumulation through BLAS; scaled_mm_cpu_emu*.c: emulated
// accumulators) and the CUDA backend's host side (scaled_mm_cuda_kernels.cuh, which includes
// it inside extern "C": everything here compiles as C++ too). Internal to kernels/: not
// installed.
#ifndef FPLAB_SCALED_MM_INTERNAL_H
#define FPLAB_SCALED_MM_INTERNAL_H

#include <math.h>

#include "formats/round_scalar.h"
#include "kernels/engine.h"
#include "kernels/scaled_mm.h"

// Number of K-blocks of X's scales; *bk = their length (K when X has one block per row/column).
static inline size_t mm__nblocks(const mm_operand *X, size_t K, size_t *bk) {
    *bk = X->block_k > 0 ? (size_t)X->block_k : (K ? K : 1);
    return K ? (K + *bk - 1) / *bk : 0;
}

// The segments of K (scaled_mm.h): K-blocks of bk products, each cut every pe products from
// its start (pe 0: not cut; the last segment of a block may be shorter). The one statement of
// the rule: every path walks them as
//     for (size_t s0 = 0, s1; s0 < K; s0 = s1) { s1 = mm__seg_end(s0, K, bk, pe); ... }
FMT_HD static inline size_t mm__seg_end(size_t s0, size_t K, size_t bk, size_t pe) {
    size_t end = (s0 / bk + 1) * bk;  // the end of s0's K-block
    if (end > K) end = K;
    return pe && s0 + pe < end ? s0 + pe : end;
}

// bk of mm__seg_end: the block_k of the operands with scales (equal when both have one:
// mm_validate), or K when neither has K-blocks.
static inline size_t mm__seg_block(const mm_operand *A, const mm_operand *B, size_t K) {
    return A->scales && A->block_k > 0 ? (size_t)A->block_k : B->scales && B->block_k > 0 ? (size_t)B->block_k : K;
}

// pe of mm__seg_end: acc.promote_every (0: promote only at K-block ends).
static inline size_t mm__seg_promote(const mm_opts *o) {
    return o->acc.promote_every > 0 ? (size_t)o->acc.promote_every : 0;
}

static inline float mm__tscale(const mm_operand *X) {
    return X->tensor_scale == 0.0f ? 1.0f : X->tensor_scale;
}

// fl32(a * b * c), rounded once: a*b is exact in double, the product with c is rounded to odd
// at 53 bits (hi plus the exact error from an fma), so the final cast to float is the correctly
// rounded result (53 >= 24 + 2).
FMT_HD static inline float mm__fl32_prod3(float a, float b, float c) {
    const double ab = (double)a * b, hi = ab * c, lo = fma(ab, (double)c, -hi);  // (double): the device's fma
    uint64_t u = fmt__d2u(hi);
    if (lo != 0.0 && isfinite(hi) && !(u & 1)) u += (signbit(lo) == signbit(hi)) ? 1 : -1;
    return (float)fmt__u2d(u);
}

// One step of an emulated accumulator, s = round_acc(s + p) (s an accumulator value, p an exact
// product, both doubles; any format, any mode but stochastic): TwoSum gives s + p = hi + lo
// exactly, hi is rounded to odd with lo (53 >= p + 2 bits: Boldo & Melquiond, IEEE TC 2008), and
// that value rounded to the accumulator is the correctly rounded sum. The scalar reference of the
// CPU's vector steps (scaled_mm_cpu_emu_f64.c) and the step of the CUDA kernel
// (kernels/cuda/scaled_mm_dev_kernels.cuh): FMT_HD, compiled for both. Needs every double
// operation rounded on its own (-ffp-contract=off, nvcc -fmad=false).
FMT_HD static inline __attribute__((always_inline)) double
mm__acc_step(const fmt__kparams *k, const fmt_round_mode mode, const double s, const double p) {
    const double hi = s + p, bb = hi - s, lo = (s - (hi - bb)) + (p - bb);
    uint64_t u = fmt__d2u(hi);
    const uint64_t lu = fmt__d2u(lo);
    // An exact zero sum is +0 except when rounding down (IEEE 754 6.3): -0 if either term is
    // negative. The double sum ran in round-to-nearest, so set that sign here.
    if (mode == FMT_RDN && hi == 0.0) u |= (fmt__d2u(s) | fmt__d2u(p)) & 0x8000000000000000ULL;
    // hi == 0 implies lo == 0; a non-finite hi (inf, NaN input) is left alone.
    const uint64_t fix = (lo != 0.0) & ((u & 1) == 0) & ((u & 0x7ff0000000000000ULL) != 0x7ff0000000000000ULL);
    const uint64_t odd = u + ((((u ^ lu) >> 63) == 0) ? 1 : (uint64_t)-1);
    fmt__flags fl;
    return fmt__round_one_f64(k, mode, fmt__u2d(fix ? odd : u), 0, &fl);
}

// The definition's epilogue (scaled_mm.h) for one output from its float32 total:
// y = fl32(ab * total), then fl32(y + fl32(beta * C)) when beta != 0 (C is not read otherwise).
// ab = fl32(alpha * ta * tb). Every emulated and engine path ends in it.
FMT_HD static inline float mm__epilogue(float ab, float beta, float total, const float *c) {
    float y = ab * total;
    if (beta != 0.0f) {
        const float bc = beta * *c;
        y = y + bc;
    }
    return y;
}

// Records in o->path (when asked, scaled_mm.h's mm_path) that `kernel` ran the product and left
// model_outputs of its outputs to the scalar engine model. Every kernel's run calls it once, from
// the calling thread (outside its parallel regions), after mm_cpu has set outputs.
static inline void mm__path_note(const mm_opts *o, const char *kernel, size_t model_outputs) {
    if (o->path) o->path->kernel = kernel, o->path->model_outputs = model_outputs;
}

// C rows = round_out(C rows); element (i, j) draws stochastic counter offset + i*N + j
// (defined in scaled_mm_cpu.c; the CUDA backend rounds its copied-back C with it too).
int mm__round_output(float *C, size_t ldc, size_t M, size_t N, const mm_opts *o);

// n floats for an operand's copy, in huge pages when large (scaled_mm_cpu.c); free with free.
float *mm__alloc_f32(size_t n);
// The calling thread's scratch buffer of slot (MM__SCRATCH_A or _B; _FOLD_A and _FOLD_B hold
// the fixed-order kernel's folded operands, which it packs into _A and _B), at least n floats:
// kept for the next call (scaled_mm_cpu.c; do not free it). One product uses each slot once.
enum { MM__SCRATCH_A, MM__SCRATCH_B, MM__SCRATCH_FOLD_A, MM__SCRATCH_FOLD_B, MM__SCRATCH_SLOTS };
float *mm__scratch_f32(int slot, size_t n);

// Whether this build's CUDA backend can open cuBLASLt (kernels/cuda/cublaslt_lazy.cuh: opened
// on first use, not linked) and resolve every function it calls; why not in msg. No GPU is
// needed. A build without nvcc answers false.
bool mm__cuda_blaslt_loads(char *msg, size_t msg_len);

// C (M x N, ldc) = alpha op(A) op(B) + beta C in float32, every output summed in one fixed order
// (scaled_mm_cpu_fixed.c): the fp32 path of mm_cpu with o->fixed_order, or without a BLAS. A
// and B without scales (folded in before). MM_OK or MM_ENOMEM.
int mm__cpu_fp32_fixed(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                       size_t K, float alpha, float beta);

// The emulated-accumulator path of mm_cpu (arguments validated, M, N, K > 0).
int mm__cpu_emulated(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                     size_t N, size_t K, const mm_opts *o);

// --- matrix engines (scaled_mm_engine.c): the acc.engine path of mm_ref and mm_cpu

// Faults for the tests that show the fixtures catch a wrong model: one fractional bit fewer in
// the fused alignment, or round-to-nearest instead of toward zero at the f32 normalization (AMD
// fused: toward zero instead of to nearest). The FMA family takes either as a separately
// rounded product and sum; the pairwise family as a sequential sum instead of the tree.
enum { MM__EFAULT_NONE = 0, MM__EFAULT_FRAC = 1, MM__EFAULT_RNE = 2 };
// mm_engine_dot with fault (MM__EFAULT_*) injected (engine_model.c); mm_engine_dot is
// MM__EFAULT_NONE.
double mm__engine_dot_fault(const mm_engine_kind *q, bool f16_out, unsigned ta, unsigned tb, const double *a,
                            const double *b, const double *sa, const double *sb, double c, size_t K, int fault);

typedef struct {
    const mm_engine_kind *q;  // the instruction kind the operands pick
    unsigned ta, tb;          // the operands' types (one MM_ET_* bit each)
    bool scaled_kind;         // the instruction applies the block scales (mxf8f6f4, mxf4nvf4)
    size_t bk;                // K-block of the operands' scales (K without)
    bool c_in_chain;          // C is the first C of the chain (scaled_mm.h)
} mm__engine_plan;

// Picks the kind and checks what the engine needs (types, scales, promote_every a multiple of
// k); MM_OK, or MM_EINVAL with a message naming what was expected.
int mm__engine_plan_make(mm__engine_plan *p, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                         size_t K, const mm_opts *o, char *msg, size_t msg_len);
// The engine's epilogue for one output: D itself (d, its sign of zero included) when C is in
// the chain, else mm__epilogue of the promoted total.
static inline float mm__engine_epilogue(const mm__engine_plan *p, float ab, float beta, float total, float d,
                                        const float *c) {
    return p->c_in_chain ? d : mm__epilogue(ab, beta, total, c);
}
// C (M x N, ldc) = y of the definition in scaled_mm.h before the output rounding, one dot
// product at a time through the model (engine_model.c). Validated arguments; MM_OK or MM_ENOMEM.
int mm__engine_run(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                   size_t K, const mm_opts *o);
// The same for plan p, only at the outputs where only[i * N + j] is nonzero (NULL: all).
int mm__engine_run_plan(const mm__engine_plan *p, float *C, size_t ldc, const mm_operand *A, const mm_operand *B,
                        size_t M, size_t N, size_t K, const mm_opts *o, const unsigned char *only);
// The end of a fast engine kernel's run: the outputs it marked in redo (M x N) run through the
// scalar model (none: the model is not entered), and o->path notes `kernel` with their count.
int mm__engine_finish(const mm__engine_plan *p, float *C, size_t ldc, const mm_operand *A, const mm_operand *B,
                      size_t M, size_t N, size_t K, const mm_opts *o, const unsigned char *redo, const char *kernel);
// One output of mm__engine_run: y(i, j) before the output rounding, from cij (C's value there).
// L: four buffers of at least (K + q->k) / q->k * q->k doubles each.
float mm__engine_out1(const mm__engine_plan *p, const mm_operand *A, const mm_operand *B, size_t N, size_t K,
                      const mm_opts *o, size_t i, size_t j, float cij, double *const L[4]);
// The fast kernel of the engines (scaled_mm_cpu_engine.c), a tile kernel of the emulated path
// (mm__emu_tile_loop, below): whether it runs this product (plan p), and the run itself (same
// contract as mm__engine_run; outputs it cannot do exactly in vectors go to the scalar model
// afterwards, mm__engine_run_plan).
bool mm__engine_fast_covers(const mm__engine_plan *p, const mm_opts *o);
int mm__engine_fast_run(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                        size_t K, const mm_opts *o);
// The fast kernels of the other engine kinds, same contract, MM_EUNSUPPORTED (C untouched) for a
// product they do not cover: AMD's CDNA3 fused and CDNA1/2 pairwise kinds
// (scaled_mm_cpu_engine_amd.c, "engine-amd"); the block-scaled mxf8f6f4 and mxf4nvf4 kinds of
// the Blackwells (scaled_mm_cpu_engine_block.c, "engine-block").
bool mm__engine_amd_covers(const mm__engine_plan *p, const mm_opts *o);
int mm__engine_amd_run(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                       size_t K, const mm_opts *o);
bool mm__engine_block_covers(const mm__engine_plan *p, const mm_opts *o);
int mm__engine_block_run(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                         size_t K, const mm_opts *o);

// --- the emulated path's pieces (scaled_mm_cpu_emu*.c)
//
// scaled_mm_cpu_emu.c sets up one product (segments, scales, the accumulator) as an mm__emu_job
// and hands it to a tile kernel; every tile kernel shares the packing, the tile loop and the
// per-tile float32 steps below (promotion, epilogue):
// - scaled_mm_cpu_emu_f32.c: float32 lanes, for accumulators with float32's exponent range
//   (bf16, e8m13, mNN up to 21 fraction bits, and fp32 itself) on operands whose products are
//   exact in float32 (mm__emu_f32_covers);
// - scaled_mm_cpu_emu_f64.c: double lanes, any accumulator (fp16, fp8, ...), any operands;
// - scaled_mm_cpu_engine.c: the NVIDIA fused engine kinds (mm__engine_fast_covers), whose
//   accumulator is the engine's D; scaled_mm_cpu_engine_amd.c and _block.c the AMD and the
//   block-scaled kinds (mm__engine_amd_covers, mm__engine_block_covers);
// - scaled_mm_cpu_fixed.c (not emulated: fp32 in one fixed order) runs in the same frame.

typedef struct {
    size_t M, N, K;
    size_t bk, pe;            // the segments (mm__seg_end)
    size_t bka, bkb;          // the K-block of A's and of B's scales (K without)
    const float *sa, *sb;     // block scales or NULL (all 1): A (M, nba), B (nblocks, N)
    size_t nba;
    float ab;                 // fl32(alpha * ta * tb)
    float beta;
    fmt__kparams k;           // the accumulator's format, with IEEE overflow
    fmt_round_mode mode;      // its rounding mode (never stochastic)
} mm__emu_job;

// Runs the job with one kernel: C (M x N, ldc) = the definition's y before the output rounding.
// MM_OK or MM_ENOMEM.
int mm__emu_run_f32(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, float *C, size_t ldc);
int mm__emu_run_f64(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, float *C, size_t ldc);
// Whether the float32 kernel runs this product (also for tests: which kernel a case exercises).
bool mm__emu_f32_covers(const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                        const fmt__kparams *acc, fmt_round_mode mode);

// One mr x nr tile of C at (ib * mr, jp * nr), all of the job's segments, from the panels ap
// (ceil(M/mr), K, mr) and bp (ceil(N/nr), K, nr); ctx is the kernel's own.
typedef void mm__emu_tile_fn(const mm__emu_job *J, const void *ctx, const float *ap, const float *bp,
                             float *C, size_t ldc, size_t ib, size_t jp);
// The two halves of mm__emu_tiles, for a kernel that derives more from the panels before its
// tiles run (the engines' exponents): pack op(A) in panels of mr rows and op(B) in panels of
// nr columns, zero-padded, into the calling thread's scratch (MM_OK or MM_ENOMEM); then run
// tile on every tile, on the OpenMP threads, each under round-to-nearest without flush-to-zero
// or denormals-are-zero (float32 subnormals are accumulator values) and with the caller's
// MXCSR put back after.
int mm__emu_pack(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, size_t mr, size_t nr,
                 const float **ap, const float **bp);
// mm__emu_pack with each panel handed to each(ctx, a, p, panel) right after it is packed, on the
// thread that packed it: panel p of op(A) (a true; K x mr floats) or of op(B) (K x nr), which each
// may change. NULL: none.
typedef void mm__emu_panel_fn(void *ctx, bool a, size_t p, float *panel);
int mm__emu_pack_each(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, size_t mr, size_t nr,
                      const float **ap, const float **bp, mm__emu_panel_fn *each, void *ctx);
void mm__emu_tile_loop(const mm__emu_job *J, const float *ap, const float *bp, float *C, size_t ldc, size_t mr,
                       size_t nr, mm__emu_tile_fn *tile, const void *ctx);
// Both: what every tile kernel's run does (scaled_mm_cpu_emu.c). MM_OK or MM_ENOMEM.
int mm__emu_tiles(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, float *C, size_t ldc,
                  size_t mr, size_t nr, mm__emu_tile_fn *tile, const void *ctx);

enum { MM__EMU_NR_MAX = 64 };  // the widest tile of either kernel

// The end of the segment that starts at s0, for the mr x nr tile at (i0, j0): tot = fl32(tot +
// fl32(s * fl32(sa * sb))) for each element (s: accumulator values, exact in float32; both
// mr x nr, row-major). Rows and columns past C's edge (zero padding) read the last row's and
// column's scales. Inline with constant mr, nr so that the loops vectorise.
static inline void mm__emu_promote(const mm__emu_job *J, size_t s0, size_t i0, size_t j0, int mr,
                                   int nr, const float *s, float *tot) {
    const size_t ga = s0 / J->bka, gb = s0 / J->bkb;  // the segment's K-block in A's, B's scales
    float sbv[MM__EMU_NR_MAX];
    for (int l = 0; l < nr; l++) {
        const size_t j = j0 + (size_t)l < J->N ? j0 + (size_t)l : J->N - 1;
        sbv[l] = J->sb ? J->sb[gb * J->N + j] : 1.0f;
    }
    for (int r = 0; r < mr; r++) {
        const size_t i = i0 + (size_t)r < J->M ? i0 + (size_t)r : J->M - 1;
        const float sa = J->sa ? J->sa[i * J->nba + ga] : 1.0f;
        for (int l = 0; l < nr; l++) {
            const float sc = sa * sbv[l], part = s[r * nr + l] * sc;
            tot[r * nr + l] = tot[r * nr + l] + part;
        }
    }
}

// C[i0.., j0..] = fl32(fl32(ab * tot) + fl32(beta * C)) (beta 0: fl32(ab * tot), C not read),
// for the tile's elements inside C.
static inline void mm__emu_store(const mm__emu_job *J, size_t i0, size_t j0, int mr, int nr,
                                 const float *tot, float *C, size_t ldc) {
    const size_t rows = J->M - i0 < (size_t)mr ? J->M - i0 : (size_t)mr;
    const size_t cols = J->N - j0 < (size_t)nr ? J->N - j0 : (size_t)nr;
    for (size_t r = 0; r < rows; r++) {
        float *c = C + (i0 + r) * ldc + j0;
        const float *t = tot + r * (size_t)nr;
        if (J->beta == 0.0f)  // apart, so that each loop vectorises
            for (size_t l = 0; l < cols; l++) c[l] = mm__epilogue(J->ab, 0.0f, t[l], NULL);
        else
            for (size_t l = 0; l < cols; l++) c[l] = mm__epilogue(J->ab, J->beta, t[l], &c[l]);
    }
}

#endif
