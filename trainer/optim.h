// optim.h: AdamW, SGD with momentum, the learning-rate schedule (linear warmup, cosine decay
// to a floor) and global-norm gradient clipping, over the flat parameter buffer of the model.
// Constraints: flat loops over the buffers carved by llama's size table; deterministic (the
// norm is summed in double in a fixed order).
#ifndef FPLAB_OPTIM_H
#define FPLAB_OPTIM_H
#include <stddef.h>

#include "autocast/autocast.h"
#include "trainer/llama.h"

typedef struct {
    float lr;            // learning rate of this step (from lr_schedule)
    float beta1, beta2;  // 0.9, 0.95 (nanoGPT's CPU Shakespeare recipe uses 0.99)
    float eps;           // 1e-8
    float weight_decay;  // decoupled, applied to matrices only (llama_param_is_matrix)
} adamw_opts;

// One AdamW step t (1-based: bias corrections 1 - beta^t), PyTorch's order:
//   p -= lr * wd * p (matrices);  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// params, m, v are overwritten; grads are read.
void adamw_step(float *params, float *m, float *v, const float *grads, const llama_config *cfg,
                const adamw_opts *o, long t);
// adamw_step with the policy ac's weight side in the same pass (ac_step_fused): the update
// rounded for the master site (comp: Kahan's compensation, n_params floats, or NULL) and the
// moments cast for adam.m and adam.v, the same bits and counts as adamw_step followed by
// ac_round_update (from the weights before the step) and the moments' ac_cast_inplace, without
// a copy of the weights. ac NULL: adamw_step.
void adamw_step_policy(float *params, float *m, float *v, const float *grads, const llama_config *cfg,
                       const adamw_opts *o, long t, ac_ctx *ac, float *comp);
// adamw_step's arithmetic on one tensor of n weights of any model (weight decay on every element,
// as torch.optim.AdamW within a parameter group), with ac's weight side as adamw_step_policy:
// the update's draws from weight `first` of the model's flat vector (comp: this tensor's part of
// Kahan's compensation, or NULL), the moments' from their element 0. ac NULL: the step alone.
void adamw_tensor_step(float *p, float *m, float *v, const float *g, size_t n, const adamw_opts *o, long t,
                       ac_ctx *ac, size_t first, float *comp);

typedef struct {
    float lr;            // learning rate of this step (from lr_schedule)
    float momentum;      // mu in [0, 1); 0: plain SGD
    float weight_decay;  // L2, added to the gradient (coupled, as torch.optim.SGD), matrices only
} sgd_opts;

// One step of SGD with momentum, the optimizer of Micikevicius et al. 2018 in PyTorch's form
// (torch.optim.SGD, dampening 0, no Nesterov), each in float32 in this order:
//   d = g + wd * p (matrices; d = g for the norm gains);  buf = mu * buf + d;  p -= lr * buf
// params and buf are overwritten; grads are read. buf starts at zero, which makes the first
// step buf = d, as PyTorch's first step sets it.
void sgd_step(float *params, float *buf, const float *grads, const llama_config *cfg, const sgd_opts *o);
// sgd_step with ac's weight side in the same pass, as adamw_step_policy (the buffer cast for
// adam.m). ac NULL: sgd_step.
void sgd_step_policy(float *params, float *buf, const float *grads, const llama_config *cfg, const sgd_opts *o,
                     ac_ctx *ac, float *comp);

typedef struct {
    float lr_max, lr_min;  // peak and floor
    long warmup;           // optimizer steps of linear warmup
    long total;            // optimizer steps in the run
} lr_schedule;

// Learning rate of optimizer step `step` (0-based): lr_max (step+1)/warmup while step < warmup,
// then lr_min + (lr_max - lr_min) (1 + cos(pi r)) / 2 with r = (step - warmup)/(total - warmup),
// and lr_min from `total` on.
float lr_at(const lr_schedule *s, long step);

// Global L2 norm of grads (n floats), in double. With max_norm > 0 and a larger norm, the
// gradients are scaled by max_norm / norm. Returns the norm before clipping (inf or NaN if a
// gradient is; then nothing is scaled).
double clip_grad_norm(float *grads, size_t n, double max_norm);

#endif
