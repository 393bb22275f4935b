// scaled_mm_cuda.cu: the CUDA backend of scaled_mm.h (mm_cuda, mm_cuda_available).
// - own kernel (every element format, every block scaling, fp32 accumulation): operands are
//   encoded on the host to codes of their formats (fmt_encode_f32; exact, the inputs are values
//   of their formats), packed for sub-byte formats (fmt_pack), laid out K-major (op(A) as M x K,
//   op(B)^T as N x K), and decoded on the device by one templated SIMT kernel: a 256-entry
//   table in shared memory for formats of <= 8 bits, bit shifts for bf16/fp16, float32 values
//   for anything wider. 64x64 tiles, 16 K per step, a 4x4 micro-tile per thread, float32 FMA
//   accumulation; each K-block's partial sum is multiplied by its scales as the header says.
//   No tensor cores: plain fp32 SIMT, so the fp32 bound of the header holds.
// - cuBLASLt (what the GPU runs natively): bf16 x bf16 and fp16 x fp16, and e4m3/e5m2 pairs on
//   sm_89+, each with per-tensor scales only, fp32 accumulation and fp32 output, TN layout.
//   Tensor cores accumulate with truncation (and fp8 ones in about 14 bits between promotions),
//   so this path is held to a looser bound than the own kernel (see docs/kernels-cuda.md).
// - Emulated accumulators: MM_EUNSUPPORTED (mm_cpu and mm_ref implement them).
// The output rounding to o->out_fmt is done on the host with fmt_round_f32 after the copy back.
// Environment: FPLAB_CUDA_KERNEL=own|cublaslt forces a path (default: cuBLASLt when applicable).
// Buffers: C (M x N, ldc) is overwritten (read first when beta != 0); A, B are read only.
// Constraints: every CUDA/cuBLASLt call is checked and reported as file:line, call and error
// string on stderr; errors return a status, never exit; no global state (a cuBLASLt handle per
// call).
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

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
    fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, call, cublasLtGetStatusString(s),
            cublasLtGetStatusName(s));
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

// --- host helpers

static float tscale(const mm_operand *X) { return X->tensor_scale == 0.0f ? 1.0f : X->tensor_scale; }

static size_t nblocks_of(const mm_operand *X, size_t K, size_t *bk) {
    *bk = X->block_k > 0 ? (size_t)X->block_k : (K ? K : 1);
    return K ? (K + *bk - 1) / *bk : 0;
}

// fl32(a * b * c) rounded once (as mm_cpu computes alpha * ta * tb): a*b is exact in double,
// the product with c is rounded to odd at 53 bits, so the cast to float rounds correctly.
static float fl32_prod3(float a, float b, float c) {
    const double ab = (double)a * b, hi = ab * c, lo = std::fma(ab, c, -hi);
    uint64_t u;
    memcpy(&u, &hi, sizeof u);
    if (lo != 0.0 && std::isfinite(hi) && !(u & 1)) u += (std::signbit(lo) == std::signbit(hi)) ? 1 : (uint64_t)-1;
    double r;
    memcpy(&r, &u, sizeof r);
    return (float)r;
}

static bool same_fmt(const fmt_t *f, int bits, int e, int m, int bias, fmt_special sp) {
    return f->bits == bits && f->ebits == e && f->mbits == m && f->bias == bias && f->is_signed &&
           f->special == sp;
}
static bool is_bf16(const fmt_t *f) { return same_fmt(f, 16, 8, 7, 127, FMT_IEEE); }
static bool is_fp16(const fmt_t *f) { return same_fmt(f, 16, 5, 10, 15, FMT_IEEE); }
static bool is_e4m3(const fmt_t *f) { return same_fmt(f, 8, 4, 3, 7, FMT_FN); }
static bool is_e5m2(const fmt_t *f) { return same_fmt(f, 8, 5, 2, 15, FMT_IEEE); }

// How the device reads an operand's elements.
enum CodeKind {
    CK_PACKED = 0,  // < 8 bits, little-endian bit stream (fmt_pack), decode table
    CK_U8 = 1,      // 8-bit codes, decode table
    CK_BF16 = 2,    // bf16 codes: the top half of a float32
    CK_FP16 = 3,    // IEEE binary16 codes
    CK_F32 = 4,     // float32 values (fp32 and every other format wider than 8 bits)
    CK_NKINDS
};

static int code_kind(const fmt_t *f) {
    if (f->bits < 8) return CK_PACKED;
    if (f->bits == 8) return CK_U8;
    if (is_bf16(f)) return CK_BF16;
    if (is_fp16(f)) return CK_FP16;
    return CK_F32;
}

// op(X) of one operand, on the host, as the device will read it: rows x ldk elements, K-major
// (element (r, k) at index r * ldk + k; op(A) for A, op(B)^T for B), zero beyond (rows, K).
struct HostOperand {
    int kind = CK_F32, bits = 32;
    std::vector<uint8_t> bytes;  // packed codes (plus 2 bytes of padding for the bit stream) or floats
    std::vector<float> table;    // 256 decode entries for kinds CK_PACKED and CK_U8
};

static int host_prepare(HostOperand *h, const mm_operand *X, bool is_a, size_t rows, size_t K,
                        size_t rows_pad, size_t ldk) {
    const size_t n = rows_pad * ldk;
    std::vector<float> v(n, 0.0f);
    // Stored with K contiguous: A not transposed (M x K) or B transposed (N x K).
    const bool k_major = is_a ? !X->trans : X->trans;
    for (size_t r = 0; r < rows; r++)
        for (size_t k = 0; k < K; k++) v[r * ldk + k] = k_major ? X->x[r * X->ld + k] : X->x[k * X->ld + r];
    h->kind = code_kind(&X->fmt);
    h->bits = X->fmt.bits;
    if (h->kind == CK_F32) {
        h->bytes.resize(n * sizeof(float));
        memcpy(h->bytes.data(), v.data(), n * sizeof(float));
        return MM_OK;
    }
    const fmt_round_opts ro = {};  // rne; exact for values of the format
    std::vector<uint8_t> codes(n * fmt_code_bytes(&X->fmt));
    if (fmt_encode_f32(&X->fmt, codes.data(), v.data(), n, &ro, NULL) != FMT_OK) return MM_EINVAL;
    h->bytes.assign(fmt_packed_bytes(&X->fmt, n) + 2, 0);
    if (fmt_pack(&X->fmt, h->bytes.data(), codes.data(), n) != FMT_OK) return MM_EINVAL;
    if (X->fmt.bits <= 8) {
        h->table.assign(256, 0.0f);
        for (uint64_t c = 0; c < (1u << X->fmt.bits); c++) h->table[c] = (float)fmt_decode1(&X->fmt, c);
    }
    return MM_OK;
}

// C rows = round_out(C rows); element (i, j) draws stochastic counter offset + i*N + j (as mm_cpu).
static int round_output(float *C, size_t ldc, size_t M, size_t N, const mm_opts *o) {
    if (fmt_contains_f32(&o->out_fmt)) return MM_OK;
    for (size_t i = 0; i < M; i++) {
        fmt_round_opts ro = o->out_round;
        ro.offset += i * N;
        if (fmt_round_f32(&o->out_fmt, C + i * ldc, N, &ro, NULL) != FMT_OK) return MM_EINVAL;
    }
    return MM_OK;
}

// --- own kernel

namespace {

constexpr int TM = 64, TN = 64, TK = 16, THREADS = 256;  // 16 x 16 threads, 4 x 4 each

struct DevOperand {
    const uint8_t *codes;  // (rows, ldk) K-major, as HostOperand
    size_t ldk;
    int bits;
    const float *table;   // 256 entries (kinds CK_PACKED, CK_U8) or NULL
    const float *scales;  // NULL, or A: (M, nb), B: (nb, N), as the header
    int bk, nb;           // K-block length (K for one block) and blocks along K
};

struct OwnParams {
    DevOperand a, b;
    float *y;  // (M, N) row-major: beta * C in (read when beta != 0), the result out
    int M, N, K;
    float ab, beta;  // fl32(alpha * ta * tb), beta
};

template <int KIND>
__device__ __forceinline__ float decode_at(const DevOperand &op, const float *tab, size_t e) {
    if constexpr (KIND == CK_PACKED) {
        const size_t bit = e * (size_t)op.bits;
        const uint8_t *p = op.codes + (bit >> 3);
        const unsigned w = (unsigned)p[0] | ((unsigned)p[1] << 8);  // a code spans <= 2 bytes
        return tab[(w >> (bit & 7)) & ((1u << op.bits) - 1)];
    } else if constexpr (KIND == CK_U8) {
        return tab[op.codes[e]];
    } else if constexpr (KIND == CK_BF16) {
        return __uint_as_float((unsigned)reinterpret_cast<const uint16_t *>(op.codes)[e] << 16);
    } else if constexpr (KIND == CK_FP16) {
        return __half2float(__ushort_as_half(reinterpret_cast<const unsigned short *>(op.codes)[e]));
    } else {
        return reinterpret_cast<const float *>(op.codes)[e];
    }
}

template <int KA, int KB>
__global__ void __launch_bounds__(THREADS) mm_own_kernel(const OwnParams P) {
    __shared__ float tabA[256], tabB[256];
    __shared__ float As[TK][TM + 4], Bs[TK][TN + 4];  // decoded op(A)^T and op(B) tiles
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int i0 = blockIdx.y * TM, j0 = blockIdx.x * TN;
    if (KA <= CK_U8)
        for (int c = tid; c < 256; c += THREADS) tabA[c] = P.a.table[c];
    if (KB <= CK_U8)
        for (int c = tid; c < 256; c += THREADS) tabB[c] = P.b.table[c];

    // Thread (ty, tx) owns rows i0 + ty + 16 r and columns j0 + tx + 16 c (r, c < 4).
    float part[4][4], tot[4][4];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) part[r][c] = tot[r][c] = 0.0f;
    // K-segments end at every block boundary of a scaled operand; ga, gb: the current blocks.
    int ga = 0, gb = 0;
    int nextA = P.a.scales ? P.a.bk : INT_MAX, nextB = P.b.scales ? P.b.bk : INT_MAX;
    // tot = fl32(tot + fl32(part * fl32(sa * sb))), no contraction (the header's order).
    auto flush = [&]() {
        float sa[4], sb[4];
        for (int r = 0; r < 4; r++) {
            const int i = min(i0 + ty + 16 * r, P.M - 1);
            sa[r] = P.a.scales ? P.a.scales[(size_t)i * P.a.nb + ga] : 1.0f;
        }
        for (int c = 0; c < 4; c++) {
            const int j = min(j0 + tx + 16 * c, P.N - 1);
            sb[c] = P.b.scales ? P.b.scales[(size_t)gb * P.N + j] : 1.0f;
        }
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++) {
                tot[r][c] = __fadd_rn(tot[r][c], __fmul_rn(part[r][c], __fmul_rn(sa[r], sb[c])));
                part[r][c] = 0.0f;
            }
    };

    for (int k0 = 0; k0 < P.K; k0 += TK) {
        __syncthreads();  // the previous tile is consumed (and, the first time, the tables are in)
        for (int q = tid; q < TM * TK; q += THREADS) {
            const int r = q / TK, kk = q % TK, k = k0 + kk, i = i0 + r, j = j0 + r;
            As[kk][r] = (i < P.M && k < P.K) ? decode_at<KA>(P.a, tabA, (size_t)i * P.a.ldk + k) : 0.0f;
            Bs[kk][r] = (j < P.N && k < P.K) ? decode_at<KB>(P.b, tabB, (size_t)j * P.b.ldk + k) : 0.0f;
        }
        __syncthreads();
        const int kend = min(TK, P.K - k0);
        for (int kk = 0; kk < kend; kk++) {
            const int k = k0 + kk;
            if (k == nextA || k == nextB) {  // uniform over the block
                flush();
                if (k == nextA) ga++, nextA += P.a.bk;
                if (k == nextB) gb++, nextB += P.b.bk;
            }
            float a[4], b[4];
            for (int r = 0; r < 4; r++) a[r] = As[kk][ty + 16 * r];
            for (int c = 0; c < 4; c++) b[c] = Bs[kk][tx + 16 * c];
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) part[r][c] = fmaf(a[r], b[c], part[r][c]);
        }
    }
    flush();
    for (int r = 0; r < 4; r++) {
        const int i = i0 + ty + 16 * r;
        if (i >= P.M) continue;
        for (int c = 0; c < 4; c++) {
            const int j = j0 + tx + 16 * c;
            if (j >= P.N) continue;
            float *y = P.y + (size_t)i * P.N + j;
            float v = __fmul_rn(P.ab, tot[r][c]);
            if (P.beta != 0.0f) v = __fadd_rn(v, __fmul_rn(P.beta, *y));
            *y = v;
        }
    }
}

template <int KA>
void launch_own_b(int kb, dim3 grid, const OwnParams &P) {
    switch (kb) {
    case CK_PACKED: mm_own_kernel<KA, CK_PACKED><<<grid, THREADS>>>(P); break;
    case CK_U8: mm_own_kernel<KA, CK_U8><<<grid, THREADS>>>(P); break;
    case CK_BF16: mm_own_kernel<KA, CK_BF16><<<grid, THREADS>>>(P); break;
    case CK_FP16: mm_own_kernel<KA, CK_FP16><<<grid, THREADS>>>(P); break;
    default: mm_own_kernel<KA, CK_F32><<<grid, THREADS>>>(P); break;
    }
}

void launch_own(int ka, int kb, dim3 grid, const OwnParams &P) {
    switch (ka) {
    case CK_PACKED: launch_own_b<CK_PACKED>(kb, grid, P); break;
    case CK_U8: launch_own_b<CK_U8>(kb, grid, P); break;
    case CK_BF16: launch_own_b<CK_BF16>(kb, grid, P); break;
    case CK_FP16: launch_own_b<CK_FP16>(kb, grid, P); break;
    default: launch_own_b<CK_F32>(kb, grid, P); break;
    }
}

}  // namespace

// Uploads one prepared operand and its scales; fills d.
static int upload_operand(DevOperand *d, DevBuf *codes, DevBuf *table, DevBuf *scales,
                          const HostOperand &h, const mm_operand *X, size_t rows, size_t K,
                          size_t ldk) {
    int st = codes->upload(h.bytes.data(), h.bytes.size());
    if (st == MM_OK && !h.table.empty()) st = table->upload(h.table.data(), h.table.size() * sizeof(float));
    size_t bk;
    const size_t nb = nblocks_of(X, K, &bk);
    if (st == MM_OK && X->scales) st = scales->upload(X->scales, rows * nb * sizeof(float));
    if (st != MM_OK) return st;
    *d = DevOperand{(const uint8_t *)codes->p, ldk, h.bits, (const float *)table->p,
                    (const float *)scales->p, (int)bk, (int)nb};
    return MM_OK;
}

static int run_own(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                   size_t N, size_t K, const mm_opts *o) {
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
    P.ab = fl32_prod3(o->alpha, tscale(A), tscale(B));
    P.beta = o->beta;

    const dim3 grid((unsigned)((N + TN - 1) / TN), (unsigned)((M + TM - 1) / TM));
    launch_own(ha.kind, hb.kind, grid, P);
    CK_LAUNCH();
    CK_CUDA(cudaMemcpy(hy.data(), y.p, hy.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < M; i++) memcpy(C + i * ldc, &hy[i * N], N * sizeof(float));
    return MM_OK;
}

// --- cuBLASLt

// The cuBLASLt objects of one call, destroyed (and checked) at scope exit.
struct LtObjects {
    cublasLtHandle_t handle = nullptr;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~LtObjects() {
        if (pref) check_lt(cublasLtMatmulPreferenceDestroy(pref), "cublasLtMatmulPreferenceDestroy", __FILE__, __LINE__);
        if (lc) check_lt(cublasLtMatrixLayoutDestroy(lc), "cublasLtMatrixLayoutDestroy", __FILE__, __LINE__);
        if (lb) check_lt(cublasLtMatrixLayoutDestroy(lb), "cublasLtMatrixLayoutDestroy", __FILE__, __LINE__);
        if (la) check_lt(cublasLtMatrixLayoutDestroy(la), "cublasLtMatrixLayoutDestroy", __FILE__, __LINE__);
        if (desc) check_lt(cublasLtMatmulDescDestroy(desc), "cublasLtMatmulDescDestroy", __FILE__, __LINE__);
        if (handle) check_lt(cublasLtDestroy(handle), "cublasLtDestroy", __FILE__, __LINE__);
    }
};

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
                        size_t N, size_t K, const mm_opts *o) {
    cudaDataType_t type_a, type_b;
    lt_type(&A->fmt, &type_a), lt_type(&B->fmt, &type_b);
    const bool fp8 = type_a == CUDA_R_8F_E4M3 || type_a == CUDA_R_8F_E5M2;
    const size_t Mp = (M + 15) / 16 * 16, Np = (N + 15) / 16 * 16, Kp = (K + 15) / 16 * 16;
    if (Mp > INT32_MAX || Np > INT32_MAX || Kp > INT32_MAX) return MM_EUNSUPPORTED;
    HostOperand ha, hb;
    int st = host_prepare(&ha, A, true, M, K, Mp, Kp);
    if (st == MM_OK) st = host_prepare(&hb, B, false, N, K, Np, Kp);
    if (st != MM_OK) return st;

    DevBuf da, db, dd, dscale, ws;
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
    float alpha = fp8 ? o->alpha : fl32_prod3(o->alpha, tscale(A), tscale(B));
    const float beta = o->beta;
    const float hscale[2] = {tscale(B), tscale(A)};
    if (fp8 && (st = dscale.upload(hscale, sizeof hscale)) != MM_OK) return st;

    LtObjects lt;
    const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    CK_LT(cublasLtCreate(&lt.handle));
    CK_LT(cublasLtMatmulDescCreate(&lt.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CK_LT(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
    CK_LT(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
    if (fp8) {
        const void *sa_ptr = (const float *)dscale.p, *sb_ptr = (const float *)dscale.p + 1;
        const int8_t fast = 0;  // keep cuBLASLt's periodic promotion to fp32
        CK_LT(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa_ptr, sizeof sa_ptr));
        CK_LT(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb_ptr, sizeof sb_ptr));
        CK_LT(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    }
    CK_LT(cublasLtMatrixLayoutCreate(&lt.la, type_b, Kp, Np, (int64_t)Kp));  // op(B)^T stored K x N
    CK_LT(cublasLtMatrixLayoutCreate(&lt.lb, type_a, Kp, Mp, (int64_t)Kp));  // op(A)^T stored K x M
    CK_LT(cublasLtMatrixLayoutCreate(&lt.lc, CUDA_R_32F, Np, Mp, (int64_t)Np));  // C^T and D^T
    CK_LT(cublasLtMatmulPreferenceCreate(&lt.pref));
    CK_LT(cublasLtMatmulPreferenceSetAttribute(lt.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    memset(&heur, 0, sizeof heur);
    int nres = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt.handle, lt.desc, lt.la, lt.lb, lt.lc,
                                                             lt.lc, lt.pref, 1, &heur, &nres);
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && nres == 0)) return MM_EUNSUPPORTED;
    CK_LT(hs);
    CK_LT(cublasLtMatmul(lt.handle, lt.desc, &alpha, db.p, lt.la, da.p, lt.lb, &beta, dd.p, lt.lc,
                         dd.p, lt.lc, &heur.algo, ws.p, ws_bytes, 0));
    CK_LAUNCH();
    CK_CUDA(cudaMemcpy(hd.data(), dd.p, hd.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < M; i++) memcpy(C + i * ldc, &hd[i * Np], N * sizeof(float));
    return MM_OK;
}

// --- entry points

extern "C" bool mm_cuda_available(char *msg, size_t msg_len) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (msg && msg_len) snprintf(msg, msg_len, "no usable CUDA device: %s", cudaGetErrorString(e));
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

extern "C" int mm_cuda(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                       size_t N, size_t K, const mm_opts *o) {
    char msg[256];
    int st = mm_validate(A, B, M, N, K, o, msg, sizeof msg);
    if (st != MM_OK) {
        fprintf(stderr, "mm_cuda: %s\n", msg);
        return st;
    }
    if (M == 0 || N == 0) return MM_OK;
    if (M > (size_t)INT_MAX || N > (size_t)INT_MAX || K > ((size_t)1 << 30)) {
        fprintf(stderr, "mm_cuda: shape %zu x %zu x %zu is too large\n", M, N, K);
        return MM_EUNSUPPORTED;
    }
    if (mm_acc_is_emulated(&o->acc)) return MM_EUNSUPPORTED;  // mm_cpu and mm_ref implement them
    if (!mm_cuda_available(msg, sizeof msg)) return MM_ENODEV;
    if (K == 0) {  // C = round_out(fl32(beta * C)), or 0 (C is not read when beta == 0)
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++) {
                float *c = C + i * ldc + j;
                *c = o->beta != 0.0f ? o->beta * *c : 0.0f;
            }
        return round_output(C, ldc, M, N, o);
    }

    const char *force = getenv("FPLAB_CUDA_KERNEL"), *why = "";
    const bool want_own = force && !strcmp(force, "own"), want_lt = force && !strcmp(force, "cublaslt");
    if (force && *force && !want_own && !want_lt && strcmp(force, "auto")) {
        fprintf(stderr, "mm_cuda: FPLAB_CUDA_KERNEL=%s: expected own, cublaslt or auto\n", force);
        return MM_EINVAL;
    }
    const bool lt_ok = !want_own && lt_applicable(A, B, &why);
    if (want_lt && !lt_ok) {
        fprintf(stderr, "mm_cuda: FPLAB_CUDA_KERNEL=cublaslt, but cuBLASLt does not apply: %s\n", why);
        return MM_EUNSUPPORTED;
    }
    st = MM_EUNSUPPORTED;
    if (lt_ok) {
        st = run_cublaslt(C, ldc, A, B, M, N, K, o);
        if (st == MM_EUNSUPPORTED && want_lt)
            fprintf(stderr, "mm_cuda: cuBLASLt has no algorithm for this problem\n");
    }
    if (st == MM_EUNSUPPORTED && !want_lt) st = run_own(C, ldc, A, B, M, N, K, o);
    return st == MM_OK ? round_output(C, ldc, M, N, o) : st;
}
