// cast_plan.c: the executors of autocast.h's cast plans: the host library and the CUDA kernels
// of kernels/cast_cuda.h, one sequence of calls for both (ac__cast_plan_run_with). The plans
// themselves (the rule) are made and finished in autocast.c.
// Constraints: library level (statuses, no exit); no CUDA headers (kernels/cast_cuda.h takes
// the stream as void *); nothing here decides a format, a scale or a key: the plan did.
#include <string.h>

#include "autocast/cast_plan_internal.h"
#include "kernels/cast_cuda.h"

// --- the host executor: the library's casts, their counts written as the device's counters

static void counts_add(uint64_t *c, const fmt_stats *st) {
    c[MM_CUDA_N] += st->n, c[MM_CUDA_OVERFLOW] += st->overflow, c[MM_CUDA_UNDERFLOW] += st->underflow;
    c[MM_CUDA_SUBNORMAL] += st->subnormal, c[MM_CUDA_NAN_IN] += st->nan_in, c[MM_CUDA_INVALID] += st->invalid;
    const float a = (float)st->amax;  // the largest |x| of float32 values: exact
    uint32_t u;
    memcpy(&u, &a, sizeof u);
    if (u > c[MM_CUDA_AMAX]) c[MM_CUDA_AMAX] = u;
}

static int host_round(const fmt_t *f, float *out, const float *in, size_t n, float pre, float post,
                      const fmt_round_opts *o, uint64_t *counts, void *stream) {
    (void)stream;
    fmt_stats st = {0};
    if (fmt_round_f32_scaled(f, out, in, n, pre, post, o, counts ? &st : NULL) != FMT_OK) return MM_EINVAL;
    if (counts) counts_add(counts, &st);
    return MM_OK;
}

static int host_quantize(const fmt_t *elem, const fmt_scaling *sc, float *out, float *elems, float *scales,
                         const float *in, size_t rows, size_t cols, const fmt_round_opts *o, uint64_t *counts,
                         void *stream) {
    (void)stream;
    fmt_stats st = {0};
    fmt_quant_info info = {.scales = scales, .elems = elems};
    if (fmt_quantize_f32(elem, sc, out, in, rows, cols, o, counts ? &st : NULL, &info) != FMT_OK) return MM_EINVAL;
    if (counts) {
        counts_add(counts, &st);
        counts[MM_CUDA_CLIPPED] += info.scales_clipped, counts[MM_CUDA_SCALES_NAN] += info.scales_nan;
        if (!sc->none) {  // the device writes the tensor scale's bits on every quantize call
            uint32_t u;
            memcpy(&u, &info.tensor_scale, sizeof u);
            counts[MM_CUDA_TSCALE] = u;
        }
    }
    return MM_OK;
}

static const ac__cast_calls host_calls = {host_round, host_quantize};
static const ac__cast_calls cuda_calls = {mm_cuda_round_f32_scaled, mm_cuda_quantize_f32};

int ac__cast_plan_run_with(const ac_cast_plan *p, const ac__cast_calls *k, float *out, float *one_scale,
                           const float *in, uint64_t *counts, void *stream) {
    if (!p || !k) return MM_EINVAL;
    switch (p->kind) {
    case AC_PLAN_ROUND:
        return k->round(&p->fmt, out, in, p->rows * p->cols, p->pre, p->post, &p->round, counts, stream);
    case AC_PLAN_QUANTIZE:
        if (p->one_scale && counts && !one_scale) return MM_EINVAL;  // finish would want it
        return k->quantize(&p->fmt, &p->scaling, out, NULL, p->one_scale ? one_scale : NULL, in, p->rows, p->cols,
                           &p->round, counts, stream);
    case AC_PLAN_COPY:
        break;
    }
    return MM_EINVAL;
}

int ac_cast_plan_run(const ac_cast_plan *p, ac_exec e, float *out, float *one_scale, const float *in,
                     uint64_t *counts, void *stream) {
    if (e != AC_EXEC_HOST && e != AC_EXEC_CUDA) return MM_EINVAL;
    return ac__cast_plan_run_with(p, e == AC_EXEC_HOST ? &host_calls : &cuda_calls, out, one_scale, in, counts,
                                  stream);
}
