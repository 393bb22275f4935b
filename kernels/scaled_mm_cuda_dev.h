// scaled_mm_cuda_dev.h: scaled matmul with an emulated accumulator or a matrix engine on a CUDA
// device, on device pointers and a caller's stream: the definition of kernels/scaled_mm.h, bit for
// bit mm_cpu's result wherever that is defined bit for bit (NaN payloads aside: a NaN is a NaN).
// The operands are float32 arrays of element values already quantized (with their block and
// tensor scales), as PyTorch holds them after fplab's quantize; nothing is encoded or copied.
// Constraints: nothing is copied to or from the host and nothing synchronises (calls are
// asynchronous on the stream; scratch is stream-ordered); launch errors return a status, errors
// while the kernels run surface at the caller's next synchronisation. A build without nvcc
// (kernels/cuda/scaled_mm_dev_nocuda.c) has the same functions, answering MM_ENODEV with a
// message, as kernels/cast_cuda.h's do. The stream is a cudaStream_t passed as void * (NULL: the
// default stream); torch.cuda.current_stream().cuda_stream is one.
// Speed is not the point yet: one thread per output sums k in order (the correctness reference
// that faster kernels will be held to).
#ifndef FPLAB_SCALED_MM_CUDA_DEV_H
#define FPLAB_SCALED_MM_CUDA_DEV_H

#include <stdint.h>

#include "kernels/scaled_mm.h"

// C (M x N, row-major, ldc; device) = the definition of scaled_mm.h for o's accumulator, which
// must be emulated (mm_acc_is_emulated: e.g. "m13:rtz:promote=128", "bf16", "fp16") or an engine
// ("hopper:wgmma", ...). A->x, B->x, A->scales, B->scales and C are device pointers (shapes as
// mm_operand documents); C is read where beta != 0 or the engine's chain starts from it, and
// overwritten. Checks are mm_validate's; an engine product's block-scaled kind is picked on the
// device from the scales' values as mm_cpu picks it (where no kind of the engine takes them, which
// mm_cpu refuses with MM_EINVAL, C is filled with NaN). msg (may be NULL) gets the reason for a
// status other than MM_OK, or mm_validate's warning. MM_OK, MM_EINVAL, MM_EUNSUPPORTED (plain
// fp32 accumulation: PyTorch's matmul or mm_cuda do it; a stochastic accumulator), MM_ENOMEM,
// MM_ENODEV (no nvcc, no device, a launch failed).
int mm_cuda_dev(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                const mm_opts *o, void *stream, char *msg, size_t msg_len);

// mm_cuda_dev with A's and B's tensor scales read on the device from ta_dev and tb_dev (one
// float each, 0 read as 1; NULL: the operand's tensor_scale), so that a scale a device quantize
// computed (mm_cuda_quantize_f32's MM_CUDA_TSCALE counter, as a float: the counter's low 4 bytes)
// is used without a copy to the host.
int mm_cuda_dev_tscales(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                        size_t K, const mm_opts *o, const float *ta_dev, const float *tb_dev, void *stream, char *msg,
                        size_t msg_len);

// The same call by name, for bindings that hold no descriptors (python/fplab/torch_cuda.py through
// ctypes). a (lda, trans_a: as mm_operand's x, ld, trans) holds values of format fmt_a; sa its
// block scales (NULL: none) over K-blocks of block_a (0: one per row); ta its tensor scale (0 or
// 1: none), or ta_dev a device pointer to it (NULL: ta); likewise b. acc: mm_acc_from_name's
// spec; out_fmt: C's format (NULL or "": fp32); out_mode: fmt_mode_spec_from_name's ("rne",
// "sr", ...; NULL: rne), with seed, stream_id and offset for a stochastic one. MM_EINVAL for an unknown name (msg says which).
int mm_cuda_dev_named(float *C, size_t ldc, const float *a, size_t lda, int trans_a, const char *fmt_a,
                      const float *sa, int block_a, float ta, const float *ta_dev, const float *b, size_t ldb,
                      int trans_b, const char *fmt_b, const float *sb, int block_b, float tb, const float *tb_dev,
                      size_t M, size_t N, size_t K,
                      const char *acc, const char *out_fmt, const char *out_mode, float alpha, float beta,
                      uint64_t seed, uint64_t stream_id, uint64_t offset, void *stream, char *msg, size_t msg_len);

#endif
