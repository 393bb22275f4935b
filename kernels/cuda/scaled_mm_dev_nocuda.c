// scaled_mm_dev_nocuda.c: kernels/scaled_mm_cuda_dev.h's mm_cuda_dev and mm_cuda_dev_tscales for a
// build without nvcc (the Makefile takes this file instead of kernels/cuda/scaled_mm_dev.cu when
// nvcc is not found or NO_CUDA=1): MM_ENODEV with the reason, as kernels/cuda/cast_nocuda.c's
// calls answer.
// Constraints: pure C, no CUDA headers; the prototype is the header's.
#include <stdio.h>

#include "kernels/scaled_mm_cuda_dev.h"

int mm_cuda_dev(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                const mm_opts *o, void *stream, char *msg, size_t msg_len) {
    (void)C, (void)ldc, (void)A, (void)B, (void)M, (void)N, (void)K, (void)o, (void)stream;
    if (msg && msg_len)
        snprintf(msg, msg_len, "mm_cuda_dev: fplab was built without nvcc (NO_CUDA=1, or no nvcc found): no "
                 "CUDA kernels in this build");
    return MM_ENODEV;
}

int mm_cuda_dev_tscales(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                        size_t K, const mm_opts *o, const float *ta_dev, const float *tb_dev, void *stream, char *msg,
                        size_t msg_len) {
    (void)ta_dev, (void)tb_dev;
    return mm_cuda_dev(C, ldc, A, B, M, N, K, o, stream, msg, msg_len);
}
