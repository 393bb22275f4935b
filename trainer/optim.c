// optim.c: AdamW, SGD with momentum, the warmup + cosine schedule and global-norm clipping
// (see optim.h).
#include "trainer/optim.h"

#include <math.h>

#include "trainer/sum_squares_internal.h"

// One optimizer's arithmetic over the flat buffers or one tensor: the arrays, the step's
// constants and, per tensor of the flat buffer, where it starts and its weight decay.
typedef struct optim_run optim_run;
struct optim_run {
    float *p, *m, *v;
    const float *g;
    float b1, b2, lr, eps, c1, c2, mu;  // AdamW's (c1, c2 its bias corrections); SGD's mu and lr
    size_t off[LP_COUNT + 1];           // tensor id's elements: off[id] .. off[id + 1] - 1
    float decay[LP_COUNT];              // AdamW: lr * wd; SGD: wd (0 where the tensor has none)
    int n_tensors;
    // the update of elements i0 .. i1 - 1 of one tensor, its decay d (adamw_range, sgd_range)
    void (*range)(const optim_run *a, float d, size_t i0, size_t i1);
};

// AdamW's update of elements i0 .. i1 - 1 (one tensor's, its decay d), in float32 in PyTorch's
// order (optim.h).
static void adamw_range(const optim_run *a, float d, size_t i0, size_t i1) {
    float *p = a->p, *mm = a->m, *vv = a->v;
    const float *g = a->g;
    const float b1 = a->b1, b2 = a->b2, lr = a->lr, eps = a->eps, c1 = a->c1, c2 = a->c2;
    for (size_t i = i0; i < i1; i++) {
        const float gi = g[i];
        mm[i] = b1 * mm[i] + (1.0f - b1) * gi;
        vv[i] = b2 * vv[i] + (1.0f - b2) * gi * gi;
        const float mhat = mm[i] / c1, vhat = vv[i] / c2;
        p[i] -= d * p[i];
        p[i] -= lr * mhat / (sqrtf(vhat) + eps);
    }
}

// SGD's update of elements i0 .. i1 - 1 (one tensor's, its weight decay wd); the buffer is m.
static void sgd_range(const optim_run *a, float wd, size_t i0, size_t i1) {
    float *p = a->p, *b = a->m;
    const float *g = a->g;
    const float mu = a->mu, lr = a->lr;
    for (size_t i = i0; i < i1; i++) {
        const float d = g[i] + wd * p[i];
        b[i] = mu * b[i] + d;
        p[i] -= lr * b[i];
    }
}

// ac_step_fused's step: elements i0 .. i0 + m - 1, tensor by tensor.
static void optim_chunk(void *user, size_t i0, size_t m) {
    const optim_run *a = user;
    for (int id = 0; id < a->n_tensors; id++) {
        const size_t lo = i0 > a->off[id] ? i0 : a->off[id], hi = i0 + m < a->off[id + 1] ? i0 + m : a->off[id + 1];
        if (lo < hi) a->range(a, a->decay[id], lo, hi);
    }
}

// The llama buffers' tensors (decay: wd for the matrices, scaled by lr for AdamW).
static size_t flat_tensors(optim_run *a, const llama_config *cfg, float wd, float scale) {
    size_t sizes[LP_COUNT];
    llama_param_sizes(cfg, sizes);
    a->n_tensors = LP_COUNT, a->off[0] = 0;
    for (int id = 0; id < LP_COUNT; id++) {
        a->off[id + 1] = a->off[id] + sizes[id];
        a->decay[id] = llama_param_is_matrix(id) ? scale * wd : 0.0f;
    }
    return a->off[LP_COUNT];
}

// AdamW's run over n elements with the policy's weight side (the moments cast for adam.m and
// adam.v): a's arrays and tensors set, its constants from o and t.
static void adamw_fused(optim_run *a, const adamw_opts *o, long t, size_t n, ac_ctx *ac, size_t first,
                        float *comp) {
    a->b1 = o->beta1, a->b2 = o->beta2, a->lr = o->lr, a->eps = o->eps, a->range = adamw_range;
    a->c1 = (float)(1.0 - pow(o->beta1, (double)t)), a->c2 = (float)(1.0 - pow(o->beta2, (double)t));
    ac_step_fused(ac, a->p, comp, n, first, (float *const[]){a->m, a->v}, (const ac_site[]){AC_ADAM_M, AC_ADAM_V},
                  2, optim_chunk, a);
}

void adamw_step_policy(float *params, float *m, float *v, const float *grads, const llama_config *cfg,
                       const adamw_opts *o, long t, ac_ctx *ac, float *comp) {
    optim_run a = {.p = params, .m = m, .v = v, .g = grads};
    const size_t n = flat_tensors(&a, cfg, o->weight_decay, o->lr);
    adamw_fused(&a, o, t, n, ac, 0, comp);
}

void adamw_step(float *params, float *m, float *v, const float *grads, const llama_config *cfg,
                const adamw_opts *o, long t) {
    adamw_step_policy(params, m, v, grads, cfg, o, t, NULL, NULL);
}

void adamw_tensor_step(float *p, float *m, float *v, const float *g, size_t n, const adamw_opts *o, long t,
                       ac_ctx *ac, size_t first, float *comp) {
    optim_run a = {.p = p, .m = m, .v = v, .g = g, .n_tensors = 1, .off = {0, n}, .decay = {o->lr * o->weight_decay}};
    adamw_fused(&a, o, t, n, ac, first, comp);
}

void sgd_step_policy(float *params, float *buf, const float *grads, const llama_config *cfg, const sgd_opts *o,
                     ac_ctx *ac, float *comp) {
    optim_run a = {.p = params, .m = buf, .g = grads, .mu = o->momentum, .lr = o->lr, .range = sgd_range};
    const size_t n = flat_tensors(&a, cfg, o->weight_decay, 1.0f);
    ac_step_fused(ac, params, comp, n, 0, (float *const[]){buf}, (const ac_site[]){AC_ADAM_M}, 1, optim_chunk, &a);
}

void sgd_step(float *params, float *buf, const float *grads, const llama_config *cfg, const sgd_opts *o) {
    sgd_step_policy(params, buf, grads, cfg, o, NULL, NULL);
}

float lr_at(const lr_schedule *s, long step) {
    if (step < s->warmup) return s->lr_max * (float)(step + 1) / (float)s->warmup;
    if (step >= s->total || s->total <= s->warmup) return s->lr_min;
    const double r = (double)(step - s->warmup) / (double)(s->total - s->warmup);
    return (float)(s->lr_min + (s->lr_max - s->lr_min) * 0.5 * (1.0 + cos(M_PI * r)));
}

double clip_grad_norm(float *grads, size_t n, double max_norm) {
    // The sum in index order, each addition rounded: its bits are the logged norm's and the clip
    // factor's (clip__sum_squares keeps them, without the plain loop's chain of additions).
    const double norm = sqrt(clip__sum_squares(grads, n));
    if (max_norm > 0 && isfinite(norm) && norm > max_norm) {
        const float k = (float)(max_norm / norm);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) grads[i] *= k;
    }
    return norm;
}
