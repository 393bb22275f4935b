// cuda_launch.cuh: the launcher of the device-pointer kernels (cast_cuda_kernels.cuh,
// scaled_mm_dev_kernels.cuh) on the CUDA runtime: grid-stride launches on the caller's stream,
// stream-ordered scratch. The shim (tests/cuda_shim.cpp) has its own with the same members.
// Constraints: every runtime call and launch is checked and reported as file:line, call and
// error string on stderr, and mapped to a status; nothing exits; no global state.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

extern "C" {
#include "kernels/scaled_mm.h"  // MM_OK, MM_ENOMEM, MM_ENODEV
}

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
