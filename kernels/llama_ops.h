// llama_ops.h: the operations of a Llama decoder, forward and backward, on the CPU: token
// embedding, RMSNorm, RoPE, causal grouped-query attention, SwiGLU, softmax cross-entropy and
// the projection matmul (through mm_cpu, so the precision layers above can swap its operands).
// Threads: the projections split their rows over the OpenMP threads and call a single-threaded
// BLAS in each, so that one thread pool serves the whole step: call llama_ops_threads first.
// Constraints: float32 storage; deterministic for a given thread count (static OpenMP loops,
// no atomics); outputs first, then inputs, then sizes; shapes in a comment on every pointer.
//
// Written (=) and accumulated (+=) buffers, which gradient accumulation and recompute rely on:
//   forward ops overwrite their outputs;
//   backward ops ACCUMULATE parameter gradients (dweight, dwte) and the residual-stream input
//   gradient of op_rmsnorm_backward (dinp +=, since the residual branch adds into the same
//   buffer); every other input gradient is OVERWRITTEN (op_matmul_backward: dinp = unless
//   accumulate is set).
// N = B*T rows; C model width; hs head size; NH query heads, NKV key/value heads; H SwiGLU width.
#ifndef FPLAB_LLAMA_OPS_H
#define FPLAB_LLAMA_OPS_H
#include <stdbool.h>
#include <stddef.h>

#include "formats/round.h"

// out[n,:] = wte[tokens[n],:]
void op_encoder_forward(float *out,           // (N, C)
                     const int *tokens,    // (N)
                     const float *wte,     // (V, C)
                     size_t N, size_t C);
// dwte[tokens[n],:] += dout[n,:] (rows in order: deterministic)
void op_encoder_backward(float *dwte,         // (V, C) +=
                      const float *dout,   // (N, C)
                      const int *tokens, size_t N, size_t C);

// out = inp * rstd * weight, rstd = 1/sqrt(mean(inp^2) + eps) per row (sums in double).
void op_rmsnorm_forward(float *out,           // (N, C)
                     float *rstd,          // (N)
                     const float *inp,     // (N, C)
                     const float *weight,  // (C)
                     size_t N, size_t C, float eps);
void op_rmsnorm_backward(float *dinp,         // (N, C) +=
                      float *dweight,      // (C) +=
                      const float *dout,   // (N, C)
                      const float *inp,    // (N, C)
                      const float *weight, // (C)
                      const float *rstd,   // (N)
                      size_t N, size_t C);

// Rotates the adjacent pairs (2i, 2i+1) of every head of x in place by the angle pos * theta_i
// (cos/sin tables (T, hs/2)); x holds nheads heads of size hs per row; pos = row % T.
void op_rope_forward(float *x,                // (B, T, nheads*hs) in place
                  const float *cos_t, const float *sin_t,  // (>=T, hs/2)
                  size_t B, size_t T, size_t nheads, size_t hs);
// The inverse rotation of the gradient (the transpose of the rotation), in place.
void op_rope_backward(float *dx,              // (B, T, nheads*hs) in place
                   const float *cos_t, const float *sin_t, size_t B, size_t T, size_t nheads,
                   size_t hs);
// Tables for rope_*: cos/sin(t * theta^(-2i/hs)), computed in double.
void op_rope_tables(float *cos_t, float *sin_t,  // (T, hs/2)
                 size_t T, size_t hs, double theta);

// Optional rounding of the attention scores (before softmax) or probabilities (before the
// product with v) to a format, row by row (element (b,h,t,t2) draws stochastic-rounding counter
// opts.offset + ((b*NH + h)*T + t)*T + t2); what happened is added to *stats.
typedef struct {
    const fmt_t *fmt;
    fmt_round_opts opts;
    fmt_stats *stats;
} attn_cast;

// Causal attention; query head h reads key/value head h / (NH/NKV). Computed as matrix
// products per (batch, head) through mm_cpu (see llama_ops.c for the summation order).
//   att[b,h,t,t2] = softmax_t2<=t( q[b,t,h]·k[b,t2,kvh] / sqrt(hs) ),  y[b,t,h] = sum att * v
// scores, probs: NULL, or the rounding of the scaled scores and of the probabilities (which are
// then what att keeps and backward differentiates through, as a straight-through cast).
void op_attention_forward(float *y,           // (B, T, NH*hs)
                       float *att,         // (B, NH, T, T) probabilities (t2 > t left 0)
                       const float *q,     // (B, T, NH*hs)
                       const float *k,     // (B, T, NKV*hs)
                       const float *v,     // (B, T, NKV*hs)
                       size_t B, size_t T, size_t NH, size_t NKV, size_t hs,
                       const attn_cast *scores, const attn_cast *probs);
// datt: scratch for dP and dS (overwritten; the (b, h) block of att's shape is its own).
void op_attention_backward(float *dq,         // (B, T, NH*hs) =
                        float *dk,         // (B, T, NKV*hs) =
                        float *dv,         // (B, T, NKV*hs) =
                        float *datt,       // (B, NH, T, T) = scratch
                        const float *dy,   // (B, T, NH*hs)
                        const float *att,  // (B, NH, T, T)
                        const float *q, const float *k, const float *v, size_t B, size_t T,
                        size_t NH, size_t NKV, size_t hs);

// out = silu(gate) * up, silu(g) = g sig(g), sig(g) = 1 / (1 + exp(-g)) (kept for backward)
void op_swiglu_forward(float *out,            // (N, H)
                    float *sig,            // (N, H)
                    const float *gate,     // (N, H)
                    const float *up,       // (N, H)
                    size_t n);
void op_swiglu_backward(float *dgate,         // (N, H) =
                     float *dup,           // (N, H) =
                     const float *dout,    // (N, H)
                     const float *gate, const float *up, const float *sig, size_t n);

// Mean cross-entropy over the rows whose target is >= 0; lse[n] = log sum exp logits[n,:]
// (kept for backward). Returns the mean loss (0 when no target counts), sums in double.
double op_crossentropy_forward(float *lse,         // (N)
                            const float *logits, // (N, V)
                            const int *targets,  // (N)
                            size_t N, size_t V);
// dlogits = scale * (softmax(logits) - onehot(target)) / count for counted rows, 0 for the
// others; may alias logits (in place).
void op_crossentropy_backward(float *dlogits,        // (N, V) =
                           const float *logits,   // (N, V)
                           const float *lse,      // (N)
                           const int *targets,    // (N)
                           size_t N, size_t V, float scale);

// Sets OpenBLAS to one thread and OpenMP to n threads (n <= 0: one per processor); returns the
// number of threads the ops will use (1 in a build without OpenMP).
int llama_ops_threads(int n);

// out = inp W^T (a linear layer without bias; W stored (OC, IC) as nn.Linear keeps it).
// Returns the mm_cpu status (MM_OK).
int op_matmul_forward(float *out,             // (N, OC)
                   const float *inp,       // (N, IC)
                   const float *weight,    // (OC, IC)
                   size_t N, size_t IC, size_t OC);
// dinp (= or, with accumulate, +=) dout W;  dweight += dout^T inp.
int op_matmul_backward(float *dinp,           // (N, IC)
                    float *dweight,        // (OC, IC) +=
                    const float *dout,     // (N, OC)
                    const float *inp,      // (N, IC)
                    const float *weight,   // (OC, IC)
                    size_t N, size_t IC, size_t OC, bool accumulate);

// The two halves of op_matmul_backward, for callers that cast the operands of each product
// differently (block scales run along K, which is OC for dgrad and N for wgrad).
int op_matmul_dgrad(float *dinp,              // (N, IC) = or +=
                 const float *dout,        // (N, OC)
                 const float *weight,      // (OC, IC)
                 size_t N, size_t IC, size_t OC, bool accumulate);
int op_matmul_wgrad(float *dweight,           // (OC, IC) +=
                 const float *dout,        // (N, OC)
                 const float *inp,         // (N, IC)
                 size_t N, size_t IC, size_t OC);

#endif
