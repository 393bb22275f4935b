// scaled_mm_nocuda.c: the CUDA backend's entry points for a build without nvcc (the Makefile
// uses this file instead of kernels/cuda/scaled_mm_cuda.cu when nvcc is not found or NO_CUDA=1).
// mm_cuda, mm_cuda_choose and mm_cuda_time always answer MM_ENODEV and mm_cuda_available says why.
// Constraints: pure C, no CUDA headers; the prototypes are the ones of scaled_mm.h.
#include <stdio.h>

#include "kernels/scaled_mm_internal.h"

int mm_cuda(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
            size_t K, const mm_opts *o) {
    (void)C, (void)ldc, (void)A, (void)B, (void)M, (void)N, (void)K, (void)o;
    return MM_ENODEV;
}

bool mm_cuda_available(char *msg, size_t msg_len) {
    if (msg && msg_len) snprintf(msg, msg_len, "fplab was built without nvcc");
    return false;
}

int mm_cuda_choose(mm_cuda_plan *plan, const mm_operand *A, const mm_operand *B, size_t K,
                   char *msg, size_t msg_len) {
    (void)plan, (void)A, (void)B, (void)K;
    if (msg && msg_len) snprintf(msg, msg_len, "fplab was built without nvcc");
    return MM_ENODEV;
}

int mm_cuda_time(double *ms, mm_cuda_plan *plan, const mm_operand *A, const mm_operand *B,
                 size_t M, size_t N, size_t K, const mm_opts *o, int reps) {
    (void)ms, (void)plan, (void)A, (void)B, (void)M, (void)N, (void)K, (void)o, (void)reps;
    return MM_ENODEV;
}

bool mm__cuda_blaslt_loads(char *msg, size_t msg_len) {
    if (msg && msg_len) snprintf(msg, msg_len, "fplab was built without nvcc");
    return false;
}
