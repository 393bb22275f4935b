// optim.c: AdamW, SGD with momentum, the warmup + cosine schedule and global-norm clipping
// (see optim.h).
#include "trainer/optim.h"

#include <math.h>

void adamw_step(float *params, float *m, float *v, const float *grads, const llama_config *cfg,
                const adamw_opts *o, long t) {
    size_t sizes[LP_COUNT];
    llama_param_sizes(cfg, sizes);
    const float b1 = o->beta1, b2 = o->beta2, lr = o->lr, eps = o->eps;
    const float c1 = (float)(1.0 - pow(b1, (double)t)), c2 = (float)(1.0 - pow(b2, (double)t));
    // One parallel region for all the tensors (a region each cost a fork and a join apiece):
    // the loops are elementwise, so neither the split nor the missing barriers change a bit.
#pragma omp parallel
    {
        size_t off = 0;
        for (int id = 0; id < LP_COUNT; id++) {
            const float decay = llama_param_is_matrix(id) ? lr * o->weight_decay : 0.0f;
            const size_t n = sizes[id];
            float *p = params + off, *mm = m + off, *vv = v + off;
            const float *g = grads + off;
#pragma omp for schedule(static) nowait
            for (size_t i = 0; i < n; i++) {
                const float gi = g[i];
                mm[i] = b1 * mm[i] + (1.0f - b1) * gi;
                vv[i] = b2 * vv[i] + (1.0f - b2) * gi * gi;
                const float mhat = mm[i] / c1, vhat = vv[i] / c2;
                p[i] -= decay * p[i];
                p[i] -= lr * mhat / (sqrtf(vhat) + eps);
            }
            off += n;
        }
    }
}

void sgd_step(float *params, float *buf, const float *grads, const llama_config *cfg, const sgd_opts *o) {
    size_t sizes[LP_COUNT], off = 0;
    llama_param_sizes(cfg, sizes);
    const float mu = o->momentum, lr = o->lr;
    for (int id = 0; id < LP_COUNT; id++) {
        const float wd = llama_param_is_matrix(id) ? o->weight_decay : 0.0f;
        const size_t n = sizes[id];
        float *p = params + off, *b = buf + off;
        const float *g = grads + off;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) {
            const float d = g[i] + wd * p[i];
            b[i] = mu * b[i] + d;
            p[i] -= lr * b[i];
        }
        off += n;
    }
}

float lr_at(const lr_schedule *s, long step) {
    if (step < s->warmup) return s->lr_max * (float)(step + 1) / (float)s->warmup;
    if (step >= s->total || s->total <= s->warmup) return s->lr_min;
    const double r = (double)(step - s->warmup) / (double)(s->total - s->warmup);
    return (float)(s->lr_min + (s->lr_max - s->lr_min) * 0.5 * (1.0 + cos(M_PI * r)));
}

double clip_grad_norm(float *grads, size_t n, double max_norm) {
    // The sum in index order, one add after another: its bits are the logged norm's and the clip
    // factor's, so it stays sequential (a double add's latency per element: the one serial pass
    // of the update).
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) ss += (double)grads[i] * grads[i];
    const double norm = sqrt(ss);
    if (max_norm > 0 && isfinite(norm) && norm > max_norm) {
        const float k = (float)(max_norm / norm);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) grads[i] *= k;
    }
    return norm;
}
