// mm_check.h: the front end of a matmul check, written once for `fplab matmul-check` (cli/),
// fplab.check_matmul and fplab.scaled_matmul (python/): everything those need before
// mm_verify_run (mm_verify.h) and around the backends.
//   - a side's recipe (mm_side_scaling, mm_operand.h): B (K x N) takes the recipe's tile
//     transposed, so that a tile of either side spans one K-block;
//   - operands from values: A and B as a kernel's caller holds them (element values before
//     scaling, the recipe's tile scales, a tensor scale), each value checked to be a value of its
//     format, then expanded and validated;
//   - a generated check's operands: float32 matrices (given, or drawn from a distribution)
//     quantized with the recipe and validated;
//   - a status's message.
// Messages name the input with the caller's words (`what`: "a", "--a-values 'A.npy'") and say
// what was expected. Constraints: library layer: status codes and msg, never an exit; no MPFR.
#ifndef FPLAB_MM_CHECK_H
#define FPLAB_MM_CHECK_H

#include "formats/scale.h"
#include "kernels/mm_operand.h"
#include "kernels/scaled_mm.h"

// "ok", "invalid argument", "out of memory", "no device", "unsupported", "unknown status".
const char *mm_strerror(int st);

// The product a check is about, by formats: the operands are made from it.
typedef struct {
    size_t M, N, K;   // A is M x K, B is K x N, C is M x N; each >= 1
    fmt_t fa, fb;     // element formats of A and B (values fit in float32)
    fmt_scaling sc;   // the recipe, tiles along K (mm_side_scaling)
    mm_opts o;        // acc, alpha, beta, out_fmt, out_round
} mm_check_problem;

// One operand as a kernel's caller holds it.
typedef struct {
    const float *x;            // element values before scaling (A: M x K, B: K x N, row-major)
    const float *tiles;        // the recipe's tile scales of this side (row-major over its grid,
                               // fmt_scale_grid of mm_side_scaling): what fmt_quantize_f32 gives
                               // on A, and on B stored K x N; NULL for the recipe "none"
    size_t ntiles;             // how many tiles holds (checked against the grid)
    float ts;                  // the tensor scale (nvfp4's second level): finite, > 0; 1 for none
    const char *what;          // x's name in messages ("a", "--a-values 'A.npy'")
    const char *scales_what;   // the scales' name ("a_scales / a_tensor_scale", "--a-scales")
} mm_values;

// An operand made from values: op points into the caller's x and into scales, which it owns.
typedef struct {
    mm_operand op;
    float *scales;  // the expanded scales (mm_operand_from_tiles); NULL when the recipe has none
} mm_vmat;

// A and B of p from their values: checks that x holds values of p->fa/fb, that tiles is given
// exactly when the recipe has scales, holds as many as the side's grid and values of the scale
// format (the first that is not: "WHAT: element [i, j] = v is not a value of F (nearest r)"), and
// the scales (mm_operand_scales_check); expands them; then mm_validate with p->o. Returns MM_OK (a and b then hold buffers: mm_vmat_free each), MM_EINVAL (msg says which
// input and what was expected) or MM_ENOMEM; on error a and b hold nothing.
int mm_check_from_values(mm_vmat *a, mm_vmat *b, const mm_check_problem *p, const mm_values *va,
                         const mm_values *vb, char *msg, size_t msg_len);
void mm_vmat_free(mm_vmat *m);

// A and B of p quantized from float32 matrices x_a (M x K) and x_b (K x N) with p's recipe and
// the element rounding qo (mm_qmat_from_f32), then mm_validate with p->o. Returns MM_OK (free
// both with mm_qmat_free), MM_EINVAL (msg: the side the recipe cannot quantize, or mm_validate's
// reason) or MM_ENOMEM; on error qa and qb hold nothing.
int mm_check_quantize(mm_qmat *qa, mm_qmat *qb, const mm_check_problem *p, const float *x_a, const float *x_b,
                      const fmt_round_opts *qo, char *msg, size_t msg_len);

// The generated check's operands: A draws stream 1 and B stream 2 of seed from dist
// (mm_random_f32), quantized as mm_check_quantize does with nearest-even and satfinite, as
// MX/NVFP4/fp8 casts do (an OCP scale can put the top of a block above the element's max).
int mm_check_random(mm_qmat *qa, mm_qmat *qb, const mm_check_problem *p, mm_dist dist, uint64_t seed, char *msg,
                    size_t msg_len);

#endif
