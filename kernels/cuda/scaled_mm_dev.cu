// scaled_mm_dev.cu: kernels/scaled_mm_cuda_dev.h on the CUDA runtime: launches of
// scaled_mm_dev_kernels.cuh on the caller's stream, scratch from the stream-ordered allocator.
// Constraints: no copy to or from the host and no synchronisation; every runtime call and launch
// is checked (cuda_launch.cuh); nothing exits; no global state.
#include "kernels/cuda/cuda_launch.cuh"
#include "kernels/cuda/scaled_mm_dev_kernels.cuh"

extern "C" {
#include "kernels/scaled_mm_cuda_dev.h"
}

extern "C" int mm_cuda_dev_tscales(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                                   size_t N, size_t K, const mm_opts *o, const float *ta_dev, const float *tb_dev,
                                   void *stream, char *msg, size_t msg_len) {
    if (msg && msg_len) msg[0] = '\0';
    CudaLaunch l{(cudaStream_t)stream};
    int st = MM_OK;
    if (o && o->acc.engine) {
        // The engine kernel's thread keeps the model's term lists (a stack frame of about 5 KB,
        // ptxas -v) and recurses in the AMD pairwise tree: a stack limit below that is raised
        // for the context (the one setting this file changes, as CUDA's documentation advises
        // for deep frames); a higher one is left alone.
        size_t have = 0;
        st = CC_CK(cudaDeviceGetLimit(&have, cudaLimitStackSize));
        if (st == MM_OK && have < MMD_STACK_BYTES) st = CC_CK(cudaDeviceSetLimit(cudaLimitStackSize, MMD_STACK_BYTES));
    }
    if (st == MM_OK) st = mmd_run(l, C, ldc, A, B, M, N, K, o, ta_dev, tb_dev, msg, msg_len);
    if (st != MM_OK && msg && msg_len && !msg[0])
        snprintf(msg, msg_len, "mm_cuda_dev: a CUDA call failed (status %d; the call and error are on stderr)", st);
    return st;
}

extern "C" int mm_cuda_dev(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                           size_t K, const mm_opts *o, void *stream, char *msg, size_t msg_len) {
    return mm_cuda_dev_tscales(C, ldc, A, B, M, N, K, o, nullptr, nullptr, stream, msg, msg_len);
}
