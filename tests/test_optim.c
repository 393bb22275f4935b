// test_optim.c: AdamW (one and several steps against the update written out in double), SGD
// with momentum (two steps worked by hand in exact dyadic numbers, and several against double),
// the warmup + cosine schedule, global-norm clipping.
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "tests/test_util.h"
#include "trainer/optim.h"

static llama_config tiny(void) {
    llama_config c;
    llama_config_named(&c, "tiny");
    c.vocab_size = 5;
    return c;
}

// Three steps of AdamW on every parameter against the same recurrences in double; the float32
// result may differ by the roundings of ~10 float operations per step: 3 steps x 10 x 2^-24
// relative to |p| + lr (the size of an update), stated as 64 ulps.
Test(optim, adamw_matches_double) {
    const llama_config c = tiny();
    size_t sizes[LP_COUNT];
    const size_t n = llama_param_sizes(&c, sizes);
    float *p = malloc(n * sizeof *p), *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v), *g = malloc(n * sizeof *g);
    double *pd = malloc(n * sizeof *pd), *md = calloc(n, sizeof *md), *vd = calloc(n, sizeof *vd);
    tu_rng r = {fmt_rng_make_key(3, 0), 0};
    for (size_t i = 0; i < n; i++) pd[i] = p[i] = (float)tu_rng_normal(&r);
    const adamw_opts o = {1e-2f, 0.9f, 0.99f, 1e-8f, 0.1f};
    for (long t = 1; t <= 3; t++) {
        for (size_t i = 0; i < n; i++) g[i] = (float)(tu_rng_normal(&r) * 1e-3);
        adamw_step(p, m, v, g, &c, &o, t);
        size_t off = 0;
        for (int id = 0; id < LP_COUNT; id++) {
            const double wd = llama_param_is_matrix(id) ? o.weight_decay : 0.0;
            for (size_t j = off; j < off + sizes[id]; j++) {
                md[j] = o.beta1 * md[j] + (1 - (double)o.beta1) * g[j];
                vd[j] = o.beta2 * vd[j] + (1 - (double)o.beta2) * (double)g[j] * g[j];
                pd[j] -= (double)o.lr * wd * pd[j];
                pd[j] -= (double)o.lr * (md[j] / (1 - pow(o.beta1, t))) / (sqrt(vd[j] / (1 - pow(o.beta2, t))) + o.eps);
            }
            off += sizes[id];
        }
    }
    for (size_t i = 0; i < n; i++) {
        const double tol = 64 * 0x1p-24 * (fabs(pd[i]) + o.lr);
        cr_assert(fabs(p[i] - pd[i]) <= tol, "param %zu: %.9g, double %.9g", i, p[i], pd[i]);
    }
    free(p), free(m), free(v), free(g), free(pd), free(md), free(vd);
}

// Decoupled decay touches matrices only: with zero gradients a norm gain does not move and a
// matrix entry shrinks by exactly (1 - lr wd) per step.
Test(optim, weight_decay_on_matrices_only) {
    const llama_config c = tiny();
    size_t sizes[LP_COUNT];
    const size_t n = llama_param_sizes(&c, sizes);
    float *p = malloc(n * sizeof *p), *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v), *g = calloc(n, sizeof *g);
    for (size_t i = 0; i < n; i++) p[i] = 1.0f;
    const adamw_opts o = {0.5f, 0.9f, 0.99f, 1e-8f, 0.5f};
    adamw_step(p, m, v, g, &c, &o, 1);
    size_t off = 0;
    for (int id = 0; id < LP_COUNT; id++) {
        for (size_t j = off; j < off + sizes[id]; j++)
            cr_assert_eq(p[j], llama_param_is_matrix(id) ? 0.75f : 1.0f, "%s: %g", llama_param_name(id), p[j]);
        off += sizes[id];
    }
    free(p), free(m), free(v), free(g);
}

Test(optim, schedule) {
    const lr_schedule s = {1e-3f, 1e-4f, 100, 2000};
    cr_assert_float_eq(lr_at(&s, 0), 1e-5f, 1e-12);
    cr_assert_float_eq(lr_at(&s, 99), 1e-3f, 1e-12);
    cr_assert_float_eq(lr_at(&s, 100), 1e-3f, 1e-12);
    cr_assert_float_eq(lr_at(&s, 1050), 5.5e-4f, 1e-9);  // halfway through the decay
    cr_assert_float_eq(lr_at(&s, 2000), 1e-4f, 1e-12);
    cr_assert_float_eq(lr_at(&s, 5000), 1e-4f, 1e-12);
    for (long t = 101; t < 2000; t++) cr_assert(lr_at(&s, t) <= lr_at(&s, t - 1), "not decreasing at %ld", t);
    const lr_schedule none = {1e-3f, 1e-3f, 0, 10};
    cr_assert_float_eq(lr_at(&none, 0), 1e-3f, 1e-12);
}

Test(optim, clip) {
    float g[4] = {3, 4, 0, 0};
    cr_assert_float_eq(clip_grad_norm(g, 4, 10.0), 5.0, 1e-12);
    cr_assert(g[0] == 3 && g[1] == 4, "scaled below the threshold");
    cr_assert_float_eq(clip_grad_norm(g, 4, 1.0), 5.0, 1e-12);
    cr_assert_float_eq(g[0], 0.6f, 1e-7);
    cr_assert_float_eq(g[1], 0.8f, 1e-7);
    cr_assert_float_eq(clip_grad_norm(g, 4, 0.0), 1.0, 1e-6);  // 0: measure only
    float bad[2] = {NAN, 1};
    cr_assert(isnan(clip_grad_norm(bad, 2, 1.0)));
    cr_assert_eq(bad[1], 1.0f, "scaled although the norm is NaN");
}

// SGD with momentum by hand: lr 1/2, mu 1/2, wd 1/4, every weight 2, every gradient 1. Each
// value below is a short dyadic number, so float32 computes it exactly.
//   matrices:  d = 1 + 2/4 = 3/2, buf = 3/2, p = 2 - 3/4 = 5/4;
//              d = 1 + 5/16 = 21/16, buf = 3/4 + 21/16 = 33/16, p = 5/4 - 33/32 = 7/32
//   norm gains (no decay): buf = 1, p = 3/2; buf = 1/2 + 1 = 3/2, p = 3/2 - 3/4 = 3/4
Test(optim, sgd_momentum_by_hand) {
    const llama_config c = tiny();
    size_t sizes[LP_COUNT];
    const size_t n = llama_param_sizes(&c, sizes);
    float *p = malloc(n * sizeof *p), *b = calloc(n, sizeof *b), *g = malloc(n * sizeof *g);
    for (size_t i = 0; i < n; i++) p[i] = 2.0f, g[i] = 1.0f;
    const sgd_opts o = {0.5f, 0.5f, 0.25f};
    sgd_step(p, b, g, &c, &o);
    size_t off = 0;
    for (int id = 0; id < LP_COUNT; off += sizes[id], id++)
        for (size_t j = off; j < off + sizes[id]; j++) {
            const bool mat = llama_param_is_matrix(id);
            cr_assert(p[j] == (mat ? 1.25f : 1.5f) && b[j] == (mat ? 1.5f : 1.0f), "%s: step 1: p %a buf %a",
                      llama_param_name(id), p[j], b[j]);
        }
    sgd_step(p, b, g, &c, &o);
    off = 0;
    for (int id = 0; id < LP_COUNT; off += sizes[id], id++)
        for (size_t j = off; j < off + sizes[id]; j++) {
            const bool mat = llama_param_is_matrix(id);
            cr_assert(p[j] == (mat ? 0x7p-5f : 0.75f) && b[j] == (mat ? 0x21p-4f : 1.5f), "%s: step 2: p %a buf %a",
                      llama_param_name(id), p[j], b[j]);
        }
    free(p), free(b), free(g);
}

// Five steps on random weights and gradients against the recurrence in double. Each step is
// four float32 roundings of values of the size of |p| + lr |buf|, so 5 x 4 roundings of
// relative size 2^-24, stated as 32 ulps of that size.
Test(optim, sgd_matches_double) {
    const llama_config c = tiny();
    size_t sizes[LP_COUNT];
    const size_t n = llama_param_sizes(&c, sizes);
    float *p = malloc(n * sizeof *p), *b = calloc(n, sizeof *b), *g = malloc(n * sizeof *g);
    double *pd = malloc(n * sizeof *pd), *bd = calloc(n, sizeof *bd);
    tu_rng r = {fmt_rng_make_key(5, 0), 0};
    for (size_t i = 0; i < n; i++) pd[i] = p[i] = (float)tu_rng_normal(&r);
    const sgd_opts o = {0.1f, 0.9f, 0.01f};
    for (int t = 0; t < 5; t++) {
        for (size_t i = 0; i < n; i++) g[i] = (float)tu_rng_normal(&r);
        sgd_step(p, b, g, &c, &o);
        size_t off = 0;
        for (int id = 0; id < LP_COUNT; off += sizes[id], id++)
            for (size_t j = off; j < off + sizes[id]; j++) {
                const double d = g[j] + (llama_param_is_matrix(id) ? (double)o.weight_decay : 0.0) * pd[j];
                bd[j] = (double)o.momentum * bd[j] + d;
                pd[j] -= (double)o.lr * bd[j];
            }
    }
    for (size_t i = 0; i < n; i++) {
        const double tol = 32 * 0x1p-24 * (fabs(pd[i]) + o.lr * fabs(bd[i]) + o.lr);
        cr_assert(fabs(p[i] - pd[i]) <= tol, "param %zu: %.9g, double %.9g", i, p[i], pd[i]);
    }
    free(p), free(b), free(g), free(pd), free(bd);
}
