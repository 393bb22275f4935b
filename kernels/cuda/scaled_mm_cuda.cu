// scaled_mm_cuda.cu: the CUDA backend of scaled_mm.h (mm_cuda, mm_cuda_available,
// mm_cuda_choose). Three paths (mm_cuda_choose picks one; docs/kernels-cuda.md):
// - cuBLASLt (what the GPU runs natively): bf16 x bf16 and fp16 x fp16, and e4m3/e5m2 pairs on
//   sm_89+, each with per-tensor scales only, fp32 accumulation and fp32 output, TN layout.
// - own tensor-core kernel (mm_tc_kernel): element formats whose values are all exact in bf16
//   (fp8, fp6, fp4, bf16) or all in fp16 (fp16 with fp8/fp6/fp4), any block scaling with
//   K-blocks that are multiples of 16 (MX 32, NVFP4 16, per-tensor, per-row).
// - own SIMT kernel (mm_own_kernel): every element format, every block scaling.
// The own kernels read codes: operands are encoded on the host to codes of their formats
// (fmt_encode_f32; exact, the inputs are values of their formats), packed for sub-byte formats
// (fmt_pack), laid out K-major (op(A) as M x K, op(B)^T as N x K), and decoded on the device:
// a 256-entry table in shared memory for formats of <= 8 bits, bit shifts for bf16/fp16,
// float32 values for anything wider. Each K-block's partial sum is multiplied by its scales as
// the header says, in float32 with the header's order of operations.
// Tensor cores accumulate with truncation (and fp8 ones in about 14 bits between promotions),
// so those paths are held to looser bounds than the SIMT kernel (mm_cuda_choose's u).
// - Emulated accumulators: MM_EUNSUPPORTED (mm_cpu and mm_ref implement them).
// The output rounding to o->out_fmt is done on the host with fmt_round_f32 after the copy back.
// Buffers: C (M x N, ldc) is overwritten (read first when beta != 0); A, B are read only.
// Constraints: every CUDA/cuBLASLt call is checked and reported as file:line, call and error
// string on stderr; errors return a status, never exit; no global state (a cuBLASLt handle per
// call).
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cuda/cublaslt_lazy.cuh"

extern "C" {
#include "formats/codec.h"
#include "kernels/scaled_mm.h"
}

// --- error checks: print file:line, the call and the error string; map to an MM_ status

static int check_cuda(cudaError_t e, const char *call, const char *file, int line) {
    if (e == cudaSuccess) return MM_OK;
    fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, call, cudaGetErrorString(e),
            cudaGetErrorName(e));
    return e == cudaErrorMemoryAllocation ? MM_ENOMEM : MM_ENODEV;
}

static int check_lt(cublasStatus_t s, const char *call, const char *file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return MM_OK;
    fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, call, LT(cublasLtGetStatusString)(s),
            LT(cublasLtGetStatusName)(s));
    if (s == CUBLAS_STATUS_ALLOC_FAILED) return MM_ENOMEM;
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH) return MM_EUNSUPPORTED;
    return MM_EINVAL;
}

#define CK_CUDA(call)                                                    \
    do {                                                                 \
        const int st_ = check_cuda((call), #call, __FILE__, __LINE__);   \
        if (st_ != MM_OK) return st_;                                    \
    } while (0)
#define CK_LT(call)                                                      \
    do {                                                                 \
        const int st_ = check_lt((call), #call, __FILE__, __LINE__);     \
        if (st_ != MM_OK) return st_;                                    \
    } while (0)
// After a kernel launch: the launch error, then the execution error.
#define CK_LAUNCH()                                                      \
    do {                                                                 \
        CK_CUDA(cudaGetLastError());                                     \
        CK_CUDA(cudaDeviceSynchronize());                                \
    } while (0)

// Device memory owned by one mm_cuda call; freed (and the free checked) when it goes out of scope.
namespace {
struct DevBuf {
    void *p = nullptr;
    DevBuf() = default;
    DevBuf(const DevBuf &) = delete;
    DevBuf &operator=(const DevBuf &) = delete;
    ~DevBuf() {
        if (p) check_cuda(cudaFree(p), "cudaFree", __FILE__, __LINE__);
    }
    int alloc(size_t bytes) {
        CK_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
        return MM_OK;
    }
    // Allocates and copies bytes from the host.
    int upload(const void *src, size_t bytes) {
        const int st = alloc(bytes);
        if (st != MM_OK) return st;
        if (bytes) CK_CUDA(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice));
        return MM_OK;
    }
};
}  // namespace

// Two CUDA events, destroyed (and checked) at scope exit.
namespace {
struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    Events() = default;
    Events(const Events &) = delete;
    Events &operator=(const Events &) = delete;
    ~Events() {
        if (start) check_cuda(cudaEventDestroy(start), "cudaEventDestroy", __FILE__, __LINE__);
        if (stop) check_cuda(cudaEventDestroy(stop), "cudaEventDestroy", __FILE__, __LINE__);
    }
};
}  // namespace

// For mm_cuda_time: reps > 0 times that many more runs of a path's device work.
namespace {
struct Timing {
    int reps = 0;
    double ms = -1;  // mean milliseconds per run
};
}  // namespace

// Runs launch() (the device work of a path; returns an MM_ status) once and checks it; with t,
// then times t->reps more runs with CUDA events.
template <class F>
static int run_launch(const F &launch, Timing *t) {
    int st = launch();
    if (st != MM_OK) return st;
    CK_LAUNCH();
    if (!t || t->reps <= 0) return MM_OK;
    Events ev;
    CK_CUDA(cudaEventCreate(&ev.start));
    CK_CUDA(cudaEventCreate(&ev.stop));
    CK_CUDA(cudaEventRecord(ev.start));
    for (int r = 0; r < t->reps; r++)
        if ((st = launch()) != MM_OK) return st;
    CK_CUDA(cudaEventRecord(ev.stop));
    CK_CUDA(cudaEventSynchronize(ev.stop));
    CK_CUDA(cudaGetLastError());
    float ms = 0;
    CK_CUDA(cudaEventElapsedTime(&ms, ev.start, ev.stop));
    t->ms = ms / t->reps;
    return MM_OK;
}

#include "kernels/cuda/scaled_mm_cuda_kernels.cuh"

namespace {

// Launches the instance dispatch_own / dispatch_tc pick (kernels/cuda/scaled_mm_cuda_kernels.cuh).
struct Launch {
    dim3 grid;
    const OwnParams &P;
    template <int KA, int KB>
    void simt() const { mm_own_kernel<KA, KB><<<grid, THREADS>>>(P); }
    template <int KA, int KB, bool BF16>
    void tc() const { mm_tc_kernel<KA, KB, BF16><<<grid, TC_THREADS>>>(P); }
};

}  // namespace

// Uploads one prepared operand and its scales; fills d.
static int upload_operand(DevOperand *d, DevBuf *codes, DevBuf *table, DevBuf *scales,
                          const HostOperand &h, const mm_operand *X, size_t rows, size_t K,
                          size_t ldk) {
    int st = codes->upload(h.bytes.data(), h.bytes.size());
    if (st == MM_OK && !h.table.empty()) st = table->upload(h.table.data(), h.table.size() * sizeof(float));
    size_t bk;
    const size_t nb = mm__nblocks(X, K, &bk);
    if (st == MM_OK && X->scales) st = scales->upload(X->scales, rows * nb * sizeof(float));
    if (st != MM_OK) return st;
    *d = DevOperand{(const uint8_t *)codes->p, ldk, h.bits, (const float *)table->p,
                    (const float *)scales->p, (int)bk, (int)nb};
    return MM_OK;
}

// The own kernels: tc = 0 runs the SIMT kernel, 1 the tensor-core kernel on bf16, 2 on fp16.
// t: NULL, or the timing mm_cuda_time asks for.
static int run_own(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                   size_t N, size_t K, const mm_opts *o, int tc, Timing *t) {
    if ((M + TM - 1) / TM > 65535) {
        fprintf(stderr, "%s:%d: mm_cuda: M = %zu is too large for the own kernel's grid\n", __FILE__,
                __LINE__, M);
        return MM_EUNSUPPORTED;
    }
    const size_t ldk = K;
    HostOperand ha, hb;
    int st = host_prepare(&ha, A, true, M, K, M, ldk);
    if (st == MM_OK) st = host_prepare(&hb, B, false, N, K, N, ldk);
    if (st != MM_OK) return st;

    DevBuf ca, ta, sa, cb, tb, sb, y;
    OwnParams P;
    st = upload_operand(&P.a, &ca, &ta, &sa, ha, A, M, K, ldk);
    if (st == MM_OK) st = upload_operand(&P.b, &cb, &tb, &sb, hb, B, N, K, ldk);
    if (st != MM_OK) return st;
    std::vector<float> hy(M * N, 0.0f);
    if (o->beta != 0.0f)
        for (size_t i = 0; i < M; i++) memcpy(&hy[i * N], C + i * ldc, N * sizeof(float));
    if ((st = y.upload(hy.data(), hy.size() * sizeof(float))) != MM_OK) return st;
    P.y = (float *)y.p;
    P.M = (int)M, P.N = (int)N, P.K = (int)K;
    P.ab = mm__fl32_prod3(o->alpha, mm__tscale(A), mm__tscale(B));
    P.beta = o->beta;

    const auto launch = [&] {
        if (tc) {
            const Launch l{dim3((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM)), P};
            if (tc == 1) dispatch_tc<Launch, true>(ha.kind, hb.kind, l);
            else dispatch_tc<Launch, false>(ha.kind, hb.kind, l);
        } else {
            dispatch_own(ha.kind, hb.kind, Launch{dim3((unsigned)((N + TN - 1) / TN), (unsigned)((M + TM - 1) / TM)), P});
        }
        return check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__);
    };
    if ((st = run_launch(launch, t)) != MM_OK) return st;
    CK_CUDA(cudaMemcpy(hy.data(), y.p, hy.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < M; i++) memcpy(C + i * ldc, &hy[i * N], N * sizeof(float));
    return MM_OK;
}

// --- cuBLASLt

// The cuBLASLt objects of one call, destroyed (and checked) at scope exit.
namespace {
struct LtObjects {
    cublasLtHandle_t handle = nullptr;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~LtObjects() {
        if (pref) check_lt(LT(cublasLtMatmulPreferenceDestroy)(pref), "cublasLtMatmulPreferenceDestroy", __FILE__, __LINE__);
        if (lc) check_lt(LT(cublasLtMatrixLayoutDestroy)(lc), "cublasLtMatrixLayoutDestroy", __FILE__, __LINE__);
        if (lb) check_lt(LT(cublasLtMatrixLayoutDestroy)(lb), "cublasLtMatrixLayoutDestroy", __FILE__, __LINE__);
        if (la) check_lt(LT(cublasLtMatrixLayoutDestroy)(la), "cublasLtMatrixLayoutDestroy", __FILE__, __LINE__);
        if (desc) check_lt(LT(cublasLtMatmulDescDestroy)(desc), "cublasLtMatmulDescDestroy", __FILE__, __LINE__);
        if (handle) check_lt(LT(cublasLtDestroy)(handle), "cublasLtDestroy", __FILE__, __LINE__);
    }
};
}  // namespace

static bool is_e4m3(const fmt_t *f) { return same_fmt(f, 8, 4, 3, 7, FMT_FN); }
static bool is_e5m2(const fmt_t *f) { return same_fmt(f, 8, 5, 2, 15, FMT_IEEE); }

static bool lt_type(const fmt_t *f, cudaDataType_t *t) {
    if (is_bf16(f)) return *t = CUDA_R_16BF, true;
    if (is_fp16(f)) return *t = CUDA_R_16F, true;
    if (is_e4m3(f)) return *t = CUDA_R_8F_E4M3, true;
    if (is_e5m2(f)) return *t = CUDA_R_8F_E5M2, true;
    return false;
}

// Whether cuBLASLt can run this product natively; why not in why.
static bool lt_applicable(const mm_operand *A, const mm_operand *B, const char **why) {
    cudaDataType_t ta, tb;
    if (!lt_api(why)) return false;  // cuBLASLt could not be opened
    if (A->scales || B->scales) return *why = "block or per-row/column scales", false;
    if (!lt_type(&A->fmt, &ta) || !lt_type(&B->fmt, &tb)) return *why = "element formats other than bf16, fp16, e4m3, e5m2", false;
    const bool fp8a = ta == CUDA_R_8F_E4M3 || ta == CUDA_R_8F_E5M2;
    const bool fp8b = tb == CUDA_R_8F_E4M3 || tb == CUDA_R_8F_E5M2;
    if (fp8a != fp8b || (!fp8a && ta != tb)) return *why = "mixed element formats", false;
    if (fp8a && ta == CUDA_R_8F_E5M2 && tb == CUDA_R_8F_E5M2) return *why = "e5m2 x e5m2 (cuBLASLt has no such kernel)", false;
    if (fp8a) {
        int dev = 0, major = 0, minor = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
            return *why = "cannot query the compute capability", false;
        if (major * 10 + minor < 89) return *why = "fp8 needs sm_89 or newer", false;
    }
    return true;
}

// cuBLASLt is column-major and fplab row-major: the row-major C (M x N) is the column-major
// C^T (N x M), so cuBLASLt computes C^T = op(B)^T op(A)^T. Both operands are laid out K-major on
// the host (op(B)^T as N x K, op(A) as M x K, rows padded to 16 and K to 16 with zeros, which add
// exact zeros), i.e. as column-major K x N and K x M: cuBLASLt's A = op(B)^T is read transposed
// and its B = op(A)^T as is: the TN layout fp8 requires, used for all types. D = C^T is
// column-major Np x Mp with leading dimension Np, that is row-major M x N with ld Np.
static int run_cublaslt(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                        size_t N, size_t K, const mm_opts *o, Timing *t) {
    const char *why = nullptr;
    if (!lt_api(&why)) {
        fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, why);
        return MM_ENODEV;
    }
    cudaDataType_t type_a, type_b;
    lt_type(&A->fmt, &type_a), lt_type(&B->fmt, &type_b);
    const bool fp8 = type_a == CUDA_R_8F_E4M3 || type_a == CUDA_R_8F_E5M2;
    const size_t Mp = (M + 15) / 16 * 16, Np = (N + 15) / 16 * 16, Kp = (K + 15) / 16 * 16;
    if (Mp > INT32_MAX || Np > INT32_MAX || Kp > INT32_MAX) return MM_EUNSUPPORTED;
    HostOperand ha, hb;
    int st = host_prepare(&ha, A, true, M, K, Mp, Kp);
    if (st == MM_OK) st = host_prepare(&hb, B, false, N, K, Np, Kp);
    if (st != MM_OK) return st;

    DevBuf da, db, dd, dscale_a, dscale_b, ws;
    const size_t ws_bytes = (size_t)32 << 20;
    std::vector<float> hd(Mp * Np, 0.0f);
    if (o->beta != 0.0f)
        for (size_t i = 0; i < M; i++) memcpy(&hd[i * Np], C + i * ldc, N * sizeof(float));
    if ((st = da.upload(ha.bytes.data(), ha.bytes.size())) != MM_OK) return st;
    if ((st = db.upload(hb.bytes.data(), hb.bytes.size())) != MM_OK) return st;
    if ((st = dd.upload(hd.data(), hd.size() * sizeof(float))) != MM_OK) return st;
    if ((st = ws.alloc(ws_bytes)) != MM_OK) return st;

    // fp8: the tensor scales go through the scale pointers (cuBLASLt's A is fplab's B);
    // bf16/fp16: folded into alpha.
    float alpha = fp8 ? o->alpha : mm__fl32_prod3(o->alpha, mm__tscale(A), mm__tscale(B));
    const float beta = o->beta;
    // Each scale in its own allocation: cuBLASLt refuses (NOT_SUPPORTED, at the matmul, after
    // the heuristic found an algorithm) a scale pointer 4 bytes into one (seen on an H200, CUDA 13.0).
    const float hscale_a = mm__tscale(B), hscale_b = mm__tscale(A);
    if (fp8 && ((st = dscale_a.upload(&hscale_a, sizeof hscale_a)) != MM_OK ||
                (st = dscale_b.upload(&hscale_b, sizeof hscale_b)) != MM_OK))
        return st;

    LtObjects lt;
    const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    CK_LT(LT(cublasLtCreate)(&lt.handle));
    CK_LT(LT(cublasLtMatmulDescCreate)(&lt.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CK_LT(LT(cublasLtMatmulDescSetAttribute)(lt.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
    CK_LT(LT(cublasLtMatmulDescSetAttribute)(lt.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
    if (fp8) {
        const void *sa_ptr = dscale_a.p, *sb_ptr = dscale_b.p;
        const int8_t fast = 0;  // keep cuBLASLt's periodic promotion to fp32
        CK_LT(LT(cublasLtMatmulDescSetAttribute)(lt.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa_ptr, sizeof sa_ptr));
        CK_LT(LT(cublasLtMatmulDescSetAttribute)(lt.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb_ptr, sizeof sb_ptr));
        CK_LT(LT(cublasLtMatmulDescSetAttribute)(lt.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    }
    CK_LT(LT(cublasLtMatrixLayoutCreate)(&lt.la, type_b, Kp, Np, (int64_t)Kp));  // op(B)^T stored K x N
    CK_LT(LT(cublasLtMatrixLayoutCreate)(&lt.lb, type_a, Kp, Mp, (int64_t)Kp));  // op(A)^T stored K x M
    CK_LT(LT(cublasLtMatrixLayoutCreate)(&lt.lc, CUDA_R_32F, Np, Mp, (int64_t)Np));  // C^T and D^T
    CK_LT(LT(cublasLtMatmulPreferenceCreate)(&lt.pref));
    CK_LT(LT(cublasLtMatmulPreferenceSetAttribute)(lt.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    memset(&heur, 0, sizeof heur);
    int nres = 0;
    const cublasStatus_t hs = LT(cublasLtMatmulAlgoGetHeuristic)(lt.handle, lt.desc, lt.la, lt.lb, lt.lc,
                                                             lt.lc, lt.pref, 1, &heur, &nres);
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && nres == 0)) return MM_EUNSUPPORTED;
    CK_LT(hs);
    const auto launch = [&] {
        return check_lt(LT(cublasLtMatmul)(lt.handle, lt.desc, &alpha, db.p, lt.la, da.p, lt.lb, &beta, dd.p,
                                       lt.lc, dd.p, lt.lc, &heur.algo, ws.p, ws_bytes, 0),
                        "cublasLtMatmul", __FILE__, __LINE__);
    };
    if ((st = run_launch(launch, t)) != MM_OK) return st;
    CK_CUDA(cudaMemcpy(hd.data(), dd.p, hd.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < M; i++) memcpy(C + i * ldc, &hd[i * Np], N * sizeof(float));
    return MM_OK;
}

// --- which path

static int plan_set(mm_cuda_plan *plan, const char *path, double u) {
    snprintf(plan->path, sizeof plan->path, "%s", path);
    plan->u = u;
    return MM_OK;
}

extern "C" int mm_cuda_choose(mm_cuda_plan *plan, const mm_operand *A, const mm_operand *B,
                              size_t K, char *msg, size_t msg_len) {
    if (msg && msg_len) msg[0] = 0;
    const char *force = getenv("FPLAB_CUDA_KERNEL");
    if (!force || !*force) force = "auto";
    const bool f_auto = !strcmp(force, "auto"), f_lt = !strcmp(force, "cublaslt"),
               f_tc = !strcmp(force, "tc"), f_simt = !strcmp(force, "simt");
    if (!f_auto && !f_lt && !f_tc && !f_simt) {
        if (msg && msg_len) snprintf(msg, msg_len, "FPLAB_CUDA_KERNEL=%s: expected auto, cublaslt, tc or simt", force);
        return MM_EINVAL;
    }
    const char *why_lt = "", *why_tc = "";
    if ((f_auto || f_lt) && lt_applicable(A, B, &why_lt)) {
        cudaDataType_t ta;
        lt_type(&A->fmt, &ta);
        return plan_set(plan, "cublaslt", (ta == CUDA_R_8F_E4M3 || ta == CUDA_R_8F_E5M2) ? 0x1p-13 : 0x1p-23);
    }
    if (f_lt) {
        if (msg && msg_len) snprintf(msg, msg_len, "FPLAB_CUDA_KERNEL=cublaslt, but cuBLASLt does not apply: %s", why_lt);
        return MM_EUNSUPPORTED;
    }
    if ((f_auto || f_tc) && tc_type(A, B, K, &why_tc)) return plan_set(plan, "tc", 0x1p-23);
    if (f_tc) {
        if (msg && msg_len) snprintf(msg, msg_len, "FPLAB_CUDA_KERNEL=tc, but the tensor-core kernel does not apply: %s", why_tc);
        return MM_EUNSUPPORTED;
    }
    return plan_set(plan, "simt", 0x1p-24);
}

// --- entry points

extern "C" bool mm__cuda_blaslt_loads(char *msg, size_t msg_len) {
    const char *why = nullptr;
    const bool ok = lt_api(&why) != nullptr;
    if (msg && msg_len) snprintf(msg, msg_len, "%s", ok ? "cuBLASLt opened (" LT_SONAME ")" : why);
    return ok;
}

extern "C" bool mm_cuda_available(char *msg, size_t msg_len) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        // Without a driver the runtime says "driver version is insufficient", which reads as an
        // upgrade to make; a driver version of 0 means none is installed: no GPU here.
        int driver = 0;
        if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
        if (msg && msg_len) {
            if (driver == 0)
                snprintf(msg, msg_len, "no GPU: no NVIDIA driver is installed on this machine");
            else
                snprintf(msg, msg_len, "no usable CUDA device: %s (driver %d.%d)", cudaGetErrorString(e),
                         driver / 1000, driver % 1000 / 10);
        }
        cudaGetLastError();  // clear the sticky error state of the runtime API
        return false;
    }
    if (n == 0) {
        if (msg && msg_len) snprintf(msg, msg_len, "no CUDA device found");
        return false;
    }
    if (msg && msg_len) msg[0] = 0;
    return true;
}

// What mm_cuda and mm_cuda_time check before any device work: MM_OK to go on; *done when
// nothing is left to compute (M or N is 0).
static int prologue(const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                    const mm_opts *o, bool *done) {
    char msg[256];
    int st = mm_validate(A, B, M, N, K, o, msg, sizeof msg);
    if (st != MM_OK) {
        fprintf(stderr, "mm_cuda: %s\n", msg);
        return st;
    }
    *done = M == 0 || N == 0;
    if (*done) return MM_OK;
    if (M > (size_t)INT_MAX || N > (size_t)INT_MAX || K > ((size_t)1 << 30)) {
        fprintf(stderr, "mm_cuda: shape %zu x %zu x %zu is too large\n", M, N, K);
        return MM_EUNSUPPORTED;
    }
    if (mm_acc_is_emulated(&o->acc)) return MM_EUNSUPPORTED;  // mm_cpu and mm_ref implement them
    if (!mm_cuda_available(msg, sizeof msg)) return MM_ENODEV;
    return MM_OK;
}

// Runs the path of plan (t: NULL, or timed). A cuBLASLt heuristic without an algorithm falls
// back to the own kernels unless fallback is false.
static int run_path(const mm_cuda_plan &plan, float *C, size_t ldc, const mm_operand *A,
                    const mm_operand *B, size_t M, size_t N, size_t K, const mm_opts *o, Timing *t,
                    bool fallback) {
    const char *why = "";
    const int tc = tc_type(A, B, K, &why);
    if (strcmp(plan.path, "cublaslt")) return run_own(C, ldc, A, B, M, N, K, o, !strcmp(plan.path, "tc") ? tc : 0, t);
    const int st = run_cublaslt(C, ldc, A, B, M, N, K, o, t);
    // The own kernels' bound is the same or tighter (u 2^-23 or 2^-24 against 2^-23 or 2^-13).
    if (st != MM_EUNSUPPORTED || !fallback) return st;
    return run_own(C, ldc, A, B, M, N, K, o, tc, t);
}

extern "C" int mm_cuda(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                       size_t N, size_t K, const mm_opts *o) {
    bool done = false;
    int st = prologue(A, B, M, N, K, o, &done);
    if (st != MM_OK || done) return st;
    if (K == 0) {  // C = round_out(fl32(beta * C)), or 0 (C is not read when beta == 0)
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++) {
                float *c = C + i * ldc + j;
                *c = o->beta != 0.0f ? o->beta * *c : 0.0f;
            }
        return mm__round_output(C, ldc, M, N, o);
    }
    char msg[256];
    mm_cuda_plan plan;
    if ((st = mm_cuda_choose(&plan, A, B, K, msg, sizeof msg)) != MM_OK) {
        fprintf(stderr, "mm_cuda: %s\n", msg);
        return st;
    }
    const char *force = getenv("FPLAB_CUDA_KERNEL");
    const bool forced_lt = force && !strcmp(force, "cublaslt");
    st = run_path(plan, C, ldc, A, B, M, N, K, o, nullptr, !forced_lt);
    if (st == MM_EUNSUPPORTED && forced_lt) fprintf(stderr, "mm_cuda: cuBLASLt has no algorithm for this problem\n");
    return st == MM_OK ? mm__round_output(C, ldc, M, N, o) : st;
}

extern "C" int mm_cuda_time(double *ms, mm_cuda_plan *plan, const mm_operand *A, const mm_operand *B,
                            size_t M, size_t N, size_t K, const mm_opts *o, int reps) {
    bool done = false;
    int st = prologue(A, B, M, N, K, o, &done);
    if (st != MM_OK) return st;
    if (done || K == 0 || reps < 1) return MM_EINVAL;
    char msg[256];
    if ((st = mm_cuda_choose(plan, A, B, K, msg, sizeof msg)) != MM_OK) {
        fprintf(stderr, "mm_cuda: %s\n", msg);
        return st;
    }
    std::vector<float> C(M * N, 0.0f);
    Timing t;
    t.reps = reps;
    if ((st = run_path(*plan, C.data(), N, A, B, M, N, K, o, &t, false)) != MM_OK) return st;
    *ms = t.ms;
    return MM_OK;
}
