// cast_cuda_named.c: the parts of kernels/cast_cuda.h that are the same with or without nvcc:
// reading the device counters' host copy, and the calls by name for bindings (ctypes) that hold
// no descriptors. Constraints: no CUDA headers; names are parsed by formats/' own parsers.
#include <string.h>

#include "kernels/cast_cuda.h"

static float bits_f32(uint64_t b) {
    const uint32_t u = (uint32_t)b;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void mm_cuda_counts_read(const uint64_t *c, fmt_stats *st, fmt_quant_info *info) {
    if (st) {
        st->n += c[MM_CUDA_N], st->overflow += c[MM_CUDA_OVERFLOW], st->underflow += c[MM_CUDA_UNDERFLOW];
        st->subnormal += c[MM_CUDA_SUBNORMAL], st->nan_in += c[MM_CUDA_NAN_IN], st->invalid += c[MM_CUDA_INVALID];
        const double amax = bits_f32(c[MM_CUDA_AMAX]);
        if (amax > st->amax) st->amax = amax;
    }
    if (info) {
        info->scales_clipped += c[MM_CUDA_CLIPPED], info->scales_nan += c[MM_CUDA_SCALES_NAN];
        info->tensor_scale = c[MM_CUDA_TSCALE] ? bits_f32(c[MM_CUDA_TSCALE]) : 1.0f;
    }
}

// Options by name; overflow NULL or "" keeps o's.
static int named_opts(fmt_round_opts *o, const fmt_t *f, const char *mode, const char *overflow, int flush,
                      int sr_bits, uint64_t seed, uint64_t stream_id, uint64_t offset) {
    if (mode && fmt_mode_spec_from_name(o, mode) != FMT_OK) return MM_EINVAL;
    if (overflow && overflow[0] && fmt_overflow_from_name(&o->overflow, overflow) != FMT_OK) return MM_EINVAL;
    o->flush_subnormals = flush != 0, o->sr_bits = sr_bits;
    o->seed = seed, o->stream = stream_id, o->offset = offset;
    return fmt_validate_round_opts(f, o, NULL, 0) == FMT_OK ? MM_OK : MM_EINVAL;
}

int mm_cuda_round_f32_named(float *out, const float *in, size_t n, const char *fmt, const char *mode,
                            const char *overflow, int flush_subnormals, int sr_bits, uint64_t seed,
                            uint64_t stream_id, uint64_t offset, uint64_t *counts, void *stream) {
    fmt_t f;
    fmt_round_opts o = {0};
    if (!fmt || fmt_from_name(&f, fmt) != FMT_OK) return MM_EINVAL;
    const int st = named_opts(&o, &f, mode, overflow, flush_subnormals, sr_bits, seed, stream_id, offset);
    return st != MM_OK ? st : mm_cuda_round_f32(&f, out, in, n, &o, counts, stream);
}

int mm_cuda_quantize_f32_named(float *out, float *elems, float *scales, const float *in, size_t rows,
                               size_t cols, const char *elem, const char *recipe, const char *mode,
                               const char *overflow, int flush_subnormals, int sr_bits, uint64_t seed,
                               uint64_t stream_id, uint64_t offset, uint64_t *counts, void *stream) {
    fmt_t f;
    fmt_scaling sc;
    if (!elem || !recipe || fmt_from_name(&f, elem) != FMT_OK) return MM_EINVAL;
    if (fmt_scaling_from_name(&sc, recipe, NULL, 0) != FMT_OK) return MM_EINVAL;
    fmt_round_opts o = fmt_scaling_default_opts(&sc);
    const int st = named_opts(&o, &f, mode, overflow, flush_subnormals, sr_bits, seed, stream_id, offset);
    return st != MM_OK ? st : mm_cuda_quantize_f32(&f, &sc, out, elems, scales, in, rows, cols, &o, counts, stream);
}
