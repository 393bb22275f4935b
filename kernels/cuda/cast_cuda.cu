// cast_cuda.cu: kernels/cast_cuda.h on the CUDA runtime: launches of cast_cuda_kernels.cuh on the
// caller's stream, scratch from the stream-ordered allocator.
// Constraints: no copy to or from the host and no synchronisation (the caller's stream orders
// everything); every runtime call and launch is checked (cuda_launch.cuh); nothing exits; no
// global state.
#include "kernels/cuda/cast_cuda_kernels.cuh"
#include "kernels/cuda/cuda_launch.cuh"

extern "C" int mm_cuda_round_f32(const fmt_t *f, float *out, const float *in, size_t n, const fmt_round_opts *o,
                                 uint64_t *counts, void *stream) {
    CudaLaunch l{(cudaStream_t)stream};
    return cc_round_run(l, f, out, in, n, 1.0f, 1.0f, o, counts);
}

extern "C" int mm_cuda_round_f32_scaled(const fmt_t *f, float *out, const float *in, size_t n, float pre,
                                        float post, const fmt_round_opts *o, uint64_t *counts, void *stream) {
    CudaLaunch l{(cudaStream_t)stream};
    return cc_round_run(l, f, out, in, n, pre, post, o, counts);
}

extern "C" int mm_cuda_quantize_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, float *elems,
                                    float *scales, const float *in, size_t rows, size_t cols,
                                    const fmt_round_opts *o, uint64_t *counts, void *stream) {
    CudaLaunch l{(cudaStream_t)stream};
    return cc_quantize_run(l, elem, sc, out, elems, scales, in, rows, cols, o, counts);
}
