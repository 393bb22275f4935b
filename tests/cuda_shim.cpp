// cuda_shim.cpp: runs the own CUDA kernels of mm_cuda (kernels/cuda/scaled_mm_cuda_kernels.cuh, the
// same source nvcc compiles) on the CPU, so that their logic is tested on machines without a
// GPU: tile and fragment indexing, K tails, block-scale segments, decoding, alpha and beta.
// - A CUDA thread is a std::thread; blocks run one after another, so function-local statics
//   stand in for __shared__ memory; __syncthreads is a barrier over the block.
// - mma.sync.m16n8k16 is emulated per warp: each lane posts its fragments, the warp meets at a
//   barrier, and every lane rebuilds A (16 x 16) and B (16 x 8) from the 32 lanes' fragments
//   with the layouts of the PTX ISA (written here from the specification, independently of the
//   kernel's loads), then computes its own elements of D = A B + C exactly (in double, rounded
//   once to float: tighter than a tensor core, which the bound allows).
// What the shim cannot check: the device compile itself, real tensor-core rounding, races
// that need real parallel hardware, performance. `make test-gpu` checks those.
// Interface: shim_mm_own (C), the host side of mm_cuda's own path without device memory; the
// device-pointer kernels on host memory: shim_cast_round_f32, shim_cast_quantize_f32 (the casts)
// and shim_mm_dev (the emulated-accumulator and engine GEMM).
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

// --- what CUDA would provide

#define FPLAB_CUDA_SHIM 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static  // blocks run one at a time: a static is the block's shared memory
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
static thread_local dim3 threadIdx, blockIdx;
static std::barrier<> *shim_block;  // the running block's barrier

static inline void __syncthreads() { shim_block->arrive_and_wait(); }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
// The device's atomics on global memory, as the GCC builtins on the shared address space.
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
template <class T>
static inline T atomicMax(T *p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
using std::fmaf;
using std::min;

static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

struct __half {
    uint16_t x;
};
struct __nv_bfloat16 {
    uint16_t x;
};
static inline __half __ushort_as_half(unsigned short u) { return {u}; }
static inline unsigned short __half_as_ushort(__half h) { return h.x; }
static inline float __half2float(__half h) {
    _Float16 v;
    memcpy(&v, &h.x, sizeof v);
    return (float)v;
}
static inline __half __float2half_rn(float f) {
    const _Float16 v = (_Float16)f;  // round to nearest even, as the device conversion
    __half h;
    memcpy(&h.x, &v, sizeof h.x);
    return h;
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return {(uint16_t)((u >> 16) | 0x40)};  // NaN stays NaN
    return {(uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};                 // round to nearest even
}
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.x; }

// --- mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, per warp

struct ShimWarp {
    std::barrier<> meet{32};
    uint32_t a[32][4], b[32][2];
};
static ShimWarp *shim_warps;  // the running block's warps

static float half_bits_to_float(uint16_t h, bool bf16) {
    if (bf16) return __uint_as_float((unsigned)h << 16);
    return __half2float(__half{h});
}

static void shim_mma16816(float c[4], const uint32_t a[4], const uint32_t b[2], bool bf16) {
    const int tid = (int)threadIdx.x, lane = tid % 32;
    ShimWarp &w = shim_warps[tid / 32];
    memcpy(w.a[lane], a, sizeof w.a[lane]);
    memcpy(w.b[lane], b, sizeof w.b[lane]);
    w.meet.arrive_and_wait();
    // PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type": groupID = lane >> 2,
    // threadID_in_group = lane % 4; element i of a fragment is half (i % 2) of register i / 2.
    // A: row groupID for a0, a1, a4, a5 and groupID + 8 for a2, a3, a6, a7;
    //    column threadID_in_group * 2 + (i & 1), plus 8 for i >= 4.
    // B: row threadID_in_group * 2 + (i & 1), plus 8 for i >= 2; column groupID.
    // C/D: row groupID for c0, c1 and groupID + 8 for c2, c3; column threadID_in_group * 2 + (i & 1).
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const int grp = l >> 2, tig = l % 4;
        for (int i = 0; i < 8; i++) {
            const int row = grp + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0);
            const int col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
            A[row][col] = half_bits_to_float((uint16_t)(w.a[l][i / 2] >> (16 * (i % 2))), bf16);
        }
        for (int i = 0; i < 4; i++) {
            const int row = tig * 2 + (i & 1) + (i >= 2 ? 8 : 0);
            B[row][grp] = half_bits_to_float((uint16_t)(w.b[l][i / 2] >> (16 * (i % 2))), bf16);
        }
    }
    const int grp = lane >> 2, tig = lane % 4;
    for (int i = 0; i < 4; i++) {
        const int row = grp + (i >= 2 ? 8 : 0), col = tig * 2 + (i & 1);
        double s = c[i];
        for (int k = 0; k < 16; k++) s += (double)A[row][k] * B[k][col];
        c[i] = (float)s;
    }
    w.meet.arrive_and_wait();  // every lane has read the fragments before the next mma posts
}

#include "kernels/cuda/scaled_mm_cuda_kernels.cuh"
#include "kernels/cuda/cast_cuda_kernels.cuh"
#include "kernels/cuda/scaled_mm_dev_kernels.cuh"

// --- launching: every block in turn, one std::thread per CUDA thread

template <class Body>
static void shim_launch(dim3 grid, int threads, const Body &body) {
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            std::barrier<> block(threads);
            std::unique_ptr<ShimWarp[]> warps(new ShimWarp[threads / 32]);
            shim_block = &block, shim_warps = warps.get();
            std::vector<std::thread> ts;
            for (int t = 0; t < threads; t++)
                ts.emplace_back([&, t] {
                    threadIdx = dim3{(unsigned)t, 1, 1};
                    blockIdx = dim3{bx, by, 1};
                    body();
                });
            for (auto &t : ts) t.join();
        }
}

namespace {
struct ShimLaunch {
    dim3 grid;
    const OwnParams &P;
    template <int KA, int KB>
    void simt() const { shim_launch(grid, THREADS, [&] { mm_own_kernel<KA, KB>(P); }); }
    template <int KA, int KB, bool BF16>
    void tc() const { shim_launch(grid, TC_THREADS, [&] { mm_tc_kernel<KA, KB, BF16>(P); }); }
};
}  // namespace

// mm_cuda's own path on the CPU: kernel "tc" or "simt". MM_EUNSUPPORTED when "tc" does not
// apply (the reason in *why). Arguments as mm_cuda (validated by the caller).
extern "C" int shim_mm_own(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                           size_t N, size_t K, const mm_opts *o, const char *kernel, const char **why) {
    int tc = 0;
    if (!strcmp(kernel, "tc") && !(tc = tc_type(A, B, K, why))) return MM_EUNSUPPORTED;
    HostOperand ha, hb;
    int st = host_prepare(&ha, A, true, M, K, M, K);
    if (st == MM_OK) st = host_prepare(&hb, B, false, N, K, N, K);
    if (st != MM_OK) return st;
    size_t bka, bkb;
    const size_t nba = mm__nblocks(A, K, &bka), nbb = mm__nblocks(B, K, &bkb);
    OwnParams P;
    P.a = DevOperand{ha.bytes.data(), K, ha.bits, ha.table.empty() ? nullptr : ha.table.data(), A->scales,
                     (int)bka, (int)nba};
    P.b = DevOperand{hb.bytes.data(), K, hb.bits, hb.table.empty() ? nullptr : hb.table.data(), B->scales,
                     (int)bkb, (int)nbb};
    std::vector<float> y(M * N, 0.0f);
    if (o->beta != 0.0f)
        for (size_t i = 0; i < M; i++) memcpy(&y[i * N], C + i * ldc, N * sizeof(float));
    P.y = y.data();
    P.M = (int)M, P.N = (int)N, P.K = (int)K;
    P.ab = mm__fl32_prod3(o->alpha, mm__tscale(A), mm__tscale(B));
    P.beta = o->beta;
    if (tc) {
        const ShimLaunch l{dim3{(unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM), 1}, P};
        if (tc == 1) dispatch_tc<ShimLaunch, true>(ha.kind, hb.kind, l);
        else dispatch_tc<ShimLaunch, false>(ha.kind, hb.kind, l);
    } else {
        dispatch_own(ha.kind, hb.kind, ShimLaunch{dim3{(unsigned)((N + TN - 1) / TN), (unsigned)((M + TM - 1) / TM), 1}, P});
    }
    for (size_t i = 0; i < M; i++) memcpy(C + i * ldc, &y[i * N], N * sizeof(float));
    return mm__round_output(C, ldc, M, N, o);
}

// --- the casts of kernels/cast_cuda.h (cast_cuda_kernels.cuh): the same launches as the CUDA
// runtime makes (cc_round_run, cc_quantize_run), on host memory, with grids of up to three blocks
// of 32 threads so that every kernel runs its grid-stride loop and its atomics concurrently.
namespace {
struct ShimCastLaunch {
    template <class A>
    int launch(void (*kernel)(A), A a, uint64_t work) {
        const uint64_t b = (work + 31) / 32;
        a.threads = 32, a.blocks = (unsigned)(b < 1 ? 1 : b > 3 ? 3 : b);
        shim_launch(dim3{a.blocks, 1, 1}, 32, [&] { kernel(a); });
        return MM_OK;
    }
    int alloc(void **p, size_t bytes) {
        *p = calloc(1, bytes ? bytes : 1);
        return *p ? MM_OK : MM_ENOMEM;
    }
    int copy(void *dst, const void *src, size_t bytes) {
        memmove(dst, src, bytes);
        return MM_OK;
    }
    void release(void *p) { free(p); }
};
}  // namespace

// mm_cuda_round_f32 and mm_cuda_quantize_f32 with host pointers (counts: MM_CUDA_NCOUNTS).
extern "C" int shim_cast_round_f32(const fmt_t *f, float *out, const float *in, size_t n, const fmt_round_opts *o,
                                   uint64_t *counts) {
    ShimCastLaunch l;
    return cc_round_run(l, f, out, in, n, 1.0f, 1.0f, o, counts);
}

// mm_cuda_round_f32_scaled with host pointers.
extern "C" int shim_cast_round_f32_scaled(const fmt_t *f, float *out, const float *in, size_t n, float pre,
                                          float post, const fmt_round_opts *o, uint64_t *counts) {
    ShimCastLaunch l;
    return cc_round_run(l, f, out, in, n, pre, post, o, counts);
}

extern "C" int shim_cast_quantize_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, float *elems,
                                      float *scales, const float *in, size_t rows, size_t cols,
                                      const fmt_round_opts *o, uint64_t *counts) {
    ShimCastLaunch l;
    return cc_quantize_run(l, elem, sc, out, elems, scales, in, rows, cols, o, counts);
}

// mm_cuda_dev (kernels/scaled_mm_cuda_dev.h, scaled_mm_dev_kernels.cuh) with host pointers: the same
// checks, plans and launches, on the shim's grids of up to three blocks of 32 threads.
// ta_dev, tb_dev: mm_cuda_dev_tscales' (host memory here).
extern "C" int shim_mm_dev(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                           size_t K, const mm_opts *o, const float *ta_dev, const float *tb_dev, char *msg,
                           size_t msg_len) {
    ShimCastLaunch l;
    return mmd_run(l, C, ldc, A, B, M, N, K, o, ta_dev, tb_dev, msg, msg_len);
}
