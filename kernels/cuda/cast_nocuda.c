// cast_nocuda.c: kernels/cast_cuda.h for a build without nvcc (the Makefile takes this file
// instead of kernels/cast_cuda.cu when nvcc is not found or NO_CUDA=1): the calls answer
// MM_ENODEV. Constraints: pure C, no CUDA headers; the prototypes are cast_cuda.h's.
#include "kernels/cast_cuda.h"

int mm_cuda_round_f32(const fmt_t *f, float *out, const float *in, size_t n, const fmt_round_opts *o,
                      uint64_t *counts, void *stream) {
    (void)f, (void)out, (void)in, (void)n, (void)o, (void)counts, (void)stream;
    return MM_ENODEV;
}

int mm_cuda_round_f32_scaled(const fmt_t *f, float *out, const float *in, size_t n, float pre, float post,
                             const fmt_round_opts *o, uint64_t *counts, void *stream) {
    (void)f, (void)out, (void)in, (void)n, (void)pre, (void)post, (void)o, (void)counts, (void)stream;
    return MM_ENODEV;
}

int mm_cuda_quantize_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, float *elems, float *scales,
                         const float *in, size_t rows, size_t cols, const fmt_round_opts *o, uint64_t *counts,
                         void *stream) {
    (void)elem, (void)sc, (void)out, (void)elems, (void)scales, (void)in, (void)rows, (void)cols, (void)o;
    (void)counts, (void)stream;
    return MM_ENODEV;
}
