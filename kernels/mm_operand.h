// mm_operand.h: build the operands of scaled_mm.h from float32 matrices and a scaling recipe,
// and draw random test matrices.
//
// A (M x K) is quantized with fmt_quantize_f32 with the recipe's tile as is, so its tiles run
// along K (block:k -> 1 x k, tile:RxC -> R x C, row -> (1,0), mx -> 1x32, nvfp4 -> 1x16 plus an
// fp32 tensor scale). B (K x N) is quantized with the transposed tile (block:k -> k x 1,
// tile:RxC -> C x R, row -> (0,1): one scale per column), so that in both cases a tile spans
// one K-block. The tile scales are then expanded to the arrays mm_operand wants: A (M, nblocks)
// and B (nblocks, N) row-major, nblocks = ceil(K / block_k), with block_k the recipe's tile
// length along K, also when that covers K (mx with K = 32: block_k 32, one block, as the
// block-scaled instructions take it), and 0 for a recipe whose tiles span K (row). The recipe
// "tensor" (a single tile, 0 x 0) becomes the operand's tensor_scale with no scale array;
// "none" has neither.
// Then x = q * s * ts (q the element values, s the expanded scale, ts the tensor scale) equals
// fmt_quantize_f32's dequantized output whenever s and ts are powers of two (exact products);
// otherwise it can differ in the last bit of float32 (see scale.h).
// Constraints: no MPFR; buffers are owned by the mm_qmat and freed by mm_qmat_free.
#ifndef FPLAB_MM_OPERAND_H
#define FPLAB_MM_OPERAND_H

#include "formats/scale.h"
#include "kernels/scaled_mm.h"

typedef enum { MM_SIDE_A, MM_SIDE_B } mm_side;

// sc as the quantization of one side takes it: A's as is, B's with tile_rows and tile_cols
// swapped (a 1 x 32 MX tile of A is a 32 x 1 tile of B).
fmt_scaling mm_side_scaling(const fmt_scaling *sc, mm_side side);

typedef struct {
    mm_operand op;           // ready for mm_ref/mm_cpu/mm_cuda; points into the buffers below
    float *q;                // (rows x cols) element values, row-major, ld = cols, not transposed
    float *scales;           // A: (M, nblocks), B: (nblocks, N); NULL when the recipe has none
    float *deq;              // (rows x cols) fmt_quantize_f32's dequantized output
    size_t rows, cols;       // as stored: A is M x K, B is K x N
    size_t nblocks;          // K-blocks of the scales (0 without a scale array)
    fmt_stats stats;         // of the element rounding (fmt_quantize_f32's count)
    uint64_t scales_clipped;
} mm_qmat;

// Quantizes x (rows x cols, row-major; A: M x K, B: K x N) to elem under sc for the given side
// and fills m. o may be NULL (rne, IEEE overflow). The element format must fit in float32.
// Returns MM_OK, MM_EINVAL (bad recipe or format, empty matrix) or MM_ENOMEM; on error m holds
// no buffers. The tile along K must not be larger than needed: a tile length >= K is one block.
int mm_qmat_from_f32(mm_qmat *m, mm_side side, const float *x, size_t rows, size_t cols,
                     const fmt_t *elem, const fmt_scaling *sc, const fmt_round_opts *o);
void mm_qmat_free(mm_qmat *m);

// The operand for a matrix already quantized by fmt_quantize_f32, for callers that keep their own
// buffers (the trainer's cast sites): x was stored (rows x cols) and summed along its columns
// (k_rows false) or its rows (k_rows true), and quantized with the tile sc as passed to
// fmt_quantize_f32 (the tile's extent along K is sc->tile_cols or, with k_rows, tile_rows);
// q holds its element values (info.elems), tile_s its tile scales (info.scales) and ts its
// info.tensor_scale. Fills *op as side A (op(A) = M x K) or B (K x N), transposed where the
// storage is (A with k_rows, B without), with the tile scales expanded into scales: capacity
// other x ceil(K / tile along K) floats, other = the dimension that is not K; unused (NULL may
// be passed) for "none" and for one-level single-tile recipes ("tensor"), which become
// tensor_scale. Returns the number of K-blocks of the expanded scales (0: none; also for an empty
// matrix, which gets no scales).
size_t mm_operand_from_tiles(mm_operand *op, float *scales, mm_side side, bool k_rows, const float *q,
                             size_t rows, size_t cols, const fmt_t *elem, const fmt_scaling *sc,
                             const float *tile_s, float ts);

// Checks the scales an operand is built from, before mm_operand_from_tiles: the tensor scale (ts,
// or the one tile scale of the one-level single-tile recipe "tensor") must be finite and > 0,
// since mm_operand reads a tensor scale of 0 as 1 and a negative or NaN one means nothing; no tile
// scale (tile_s[0..ntiles)) may be negative (0 zeroes its tile; NaN is a NaN block, as e8m0's
// NaN code). what names the input in msg ("--a-scales 'sa.npy'"). MM_OK or MM_EINVAL.
int mm_operand_scales_check(const fmt_scaling *sc, const float *tile_s, size_t ntiles, float ts,
                            const char *what, char *msg, size_t msg_len);

// Distributions of random test matrices.
typedef enum {
    MM_DIST_NORMAL,    // N(0, 1)
    MM_DIST_UNIFORM,   // U[-1, 1)
    MM_DIST_LOGNORMAL, // random sign times exp(N(0, 1)): magnitudes over several binades
    MM_DIST_OUTLIERS,  // N(0, 1), with one element in 128 (chosen at random) multiplied by 1000
    MM_DIST_COUNT
} mm_dist;

const char *mm_dist_name(mm_dist d);
// MM_OK, or MM_EINVAL when name is none of normal, uniform, lognormal, outliers.
int mm_dist_from_name(mm_dist *out, const char *name);

// x[0..n) = draws of d: element i is a pure function of (seed, stream, i) (formats/rng.h), so
// the matrix does not depend on the thread count.
void mm_random_f32(float *x, size_t n, mm_dist d, uint64_t seed, uint64_t stream);

#endif
