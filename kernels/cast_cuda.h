// cast_cuda.h: the casts of formats/ on a CUDA device: element rounding of float32 (fmt_round_f32)
// and block quantization (fmt_quantize_f32), on device pointers and a caller's stream, with the
// telemetry counted on the device. Bit for bit the CPU library's results and counts (NaN
// payloads aside where the CPU computes on a NaN before rounding it: see mm_cuda_quantize_f32).
// Constraints: nothing is copied to the host; calls are asynchronous on the stream (scratch is
// stream-ordered: cudaMallocAsync/cudaFreeAsync); launch errors return a status, errors while the
// kernels run surface at the caller's next synchronisation. A build without nvcc
// (kernels/cast_nocuda.c) has the same functions, returning MM_ENODEV. The stream is a
// cudaStream_t passed as void * (NULL: the default stream) so that C code without CUDA headers
// calls them; torch.cuda.current_stream().cuda_stream is one.
#ifndef FPLAB_CAST_CUDA_H
#define FPLAB_CAST_CUDA_H

#include <stdint.h>

#include "formats/scale.h"
#include "kernels/scaled_mm.h"  // MM_OK, MM_EINVAL, MM_ENOMEM, MM_ENODEV

// Telemetry on the device: an array of MM_CUDA_NCOUNTS uint64_t in device memory that the calls
// add to (+=; the caller zeroes it), the counts of fmt_stats and fmt_quant_info. AMAX holds the
// float32 bits of the largest |x| (NaN ignored), raised by each call; TSCALE the float32 bits of
// fmt_quant_info.tensor_scale, written (not added) by each quantize call.
enum {
    MM_CUDA_N,         // elements seen
    MM_CUDA_OVERFLOW,
    MM_CUDA_UNDERFLOW,
    MM_CUDA_SUBNORMAL,
    MM_CUDA_NAN_IN,
    MM_CUDA_INVALID,
    MM_CUDA_AMAX,      // float32 bits, max
    MM_CUDA_CLIPPED,   // fmt_quant_info.scales_clipped
    MM_CUDA_SCALES_NAN,
    MM_CUDA_TSCALE,    // float32 bits, written
    MM_CUDA_NCOUNTS
};

// Adds a host copy of the counters to st and (optional) info, as the CPU calls add theirs.
void mm_cuda_counts_read(const uint64_t *counts, fmt_stats *st, fmt_quant_info *info);

// out[0..n) = round_F(in[0..n)) as fmt_round_f32 rounds a copy of in (out == in: in place; no
// other overlap), element i drawing stochastic-rounding counter o->offset + i. o->path is not
// read (the device has one path). counts (device, MM_CUDA_NCOUNTS, may be NULL): fmt_stats'.
// MM_OK, MM_EINVAL (options fmt_round_f32 refuses, a wide format), MM_ENODEV, MM_ENOMEM.
int mm_cuda_round_f32(const fmt_t *f, float *out, const float *in, size_t n, const fmt_round_opts *o,
                      uint64_t *counts, void *stream);

// fmt_round_f32_scaled on the device: out[i] = round_F(in[i] * pre) * post in float32 arithmetic
// (no multiply where pre or post is 1), the counts of the values rounded (before post), as the
// CPU counts them; mm_cuda_round_f32 is pre = post = 1. Delayed scaling's casts (autocast).
int mm_cuda_round_f32_scaled(const fmt_t *f, float *out, const float *in, size_t n, float pre, float post,
                             const fmt_round_opts *o, uint64_t *counts, void *stream);

// fmt_quantize_f32 on the device: out (rows x cols, row-major) = dequantize(quantize(in)); elems
// (optional, rows x cols) the element values q; scales (optional, fmt_scale_count floats) the
// decoded tile scales (fmt_quant_info.scales); o NULL: fmt_scaling_default_opts(sc). Every
// recipe and scale rule, 4over6 included (scratch of 2 rows x cols floats then). counts:
// fmt_stats' and fmt_quant_info's. Arguments are checked as fmt_quantize_f32 checks them;
// MM_EINVAL for what it refuses, else MM_OK, MM_ENODEV, MM_ENOMEM. A NaN that the CPU
// multiplies or divides before rounding comes out with x86's NaN rule (the NaN operand's sign),
// which the CPU's compiler does not promise either: compare NaN outputs as NaNs.
int mm_cuda_quantize_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, float *elems, float *scales,
                         const float *in, size_t rows, size_t cols, const fmt_round_opts *o, uint64_t *counts,
                         void *stream);

// The same two calls with formats, recipes and options by name, for bindings that hold no
// descriptors (python/fplab/torch_cuda.py through ctypes): fmt as fmt_from_name, mode as
// fmt_mode_spec_from_name ("rne", "sr", "sr:b", ...), overflow as fmt_overflow_from_name (NULL
// or "": IEEE for the cast, the recipe's default for quantize), recipe as fmt_scaling_from_name
// or a scheme name. sr_bits 0 means 32. MM_EINVAL for an unknown name.
int mm_cuda_round_f32_named(float *out, const float *in, size_t n, const char *fmt, const char *mode,
                            const char *overflow, int flush_subnormals, int sr_bits, uint64_t seed,
                            uint64_t stream_id, uint64_t offset, uint64_t *counts, void *stream);
int mm_cuda_quantize_f32_named(float *out, float *elems, float *scales, const float *in, size_t rows,
                               size_t cols, const char *elem, const char *recipe, const char *mode,
                               const char *overflow, int flush_subnormals, int sr_bits, uint64_t seed,
                               uint64_t stream_id, uint64_t offset, uint64_t *counts, void *stream);

#endif
