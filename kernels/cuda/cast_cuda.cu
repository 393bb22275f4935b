// cast_cuda.cu: kernels/cast_cuda.h on the CUDA runtime: launches of cast_cuda_kernels.cuh on the
// caller's stream, scratch from the stream-ordered allocator.
// Constraints: no copy to or from the host and no synchronisation (the caller's stream orders
// everything); every runtime call and launch is checked and reported as file:line, call and
// error string on stderr, and mapped to a status; nothing exits; no global state.
#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/cuda/cast_cuda_kernels.cuh"

namespace {

int cc_check(cudaError_t e, const char *call, const char *file, int line) {
    if (e == cudaSuccess) return MM_OK;
    fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, call, cudaGetErrorString(e), cudaGetErrorName(e));
    return e == cudaErrorMemoryAllocation ? MM_ENOMEM : MM_ENODEV;
}
#define CC_CK(call) cc_check((call), #call, __FILE__, __LINE__)

// Grid-stride launches: 256 threads a block, at most 8192 blocks (enough to fill any current GPU).
struct CudaLaunch {
    cudaStream_t stream;
    template <class A>
    int launch(void (*kernel)(A), A a, uint64_t work) {
        const uint64_t b = (work + 255) / 256;
        a.threads = 256, a.blocks = (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
        kernel<<<a.blocks, a.threads, 0, stream>>>(a);
        return CC_CK(cudaGetLastError());
    }
    int alloc(void **p, size_t bytes) {
        int st = CC_CK(cudaMallocAsync(p, bytes ? bytes : 1, stream));
        if (st == MM_OK) st = CC_CK(cudaMemsetAsync(*p, 0, bytes, stream));
        return st;
    }
    int copy(void *dst, const void *src, size_t bytes) {
        return CC_CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    }
    void release(void *p) { CC_CK(cudaFreeAsync(p, stream)); }
};

}  // namespace

extern "C" int mm_cuda_round_f32(const fmt_t *f, float *out, const float *in, size_t n, const fmt_round_opts *o,
                                 uint64_t *counts, void *stream) {
    CudaLaunch l{(cudaStream_t)stream};
    return cc_round_run(l, f, out, in, n, o, counts);
}

extern "C" int mm_cuda_quantize_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, float *elems,
                                    float *scales, const float *in, size_t rows, size_t cols,
                                    const fmt_round_opts *o, uint64_t *counts, void *stream) {
    CudaLaunch l{(cudaStream_t)stream};
    return cc_quantize_run(l, elem, sc, out, elems, scales, in, rows, cols, o, counts);
}
