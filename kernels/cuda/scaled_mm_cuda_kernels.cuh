// scaled_mm_cuda_kernels.cuh: the own kernels of the CUDA backend (SIMT and tensor cores)
// and the host-side preparation of their operands. No CUDA runtime call is made here, so that
// tests/cuda_shim.cpp can run the same kernel bodies on the CPU (FPLAB_CUDA_SHIM: one
// std::thread per CUDA thread, the mma instruction emulated per warp). Included by
// scaled_mm_cuda.cu and by the shim only.
#ifndef FPLAB_SCALED_MM_CUDA_KERNELS_CUH
#define FPLAB_SCALED_MM_CUDA_KERNELS_CUH

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#ifndef FPLAB_CUDA_SHIM  // the shim defines what these give, before including this file
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

extern "C" {
#include "formats/codec.h"
#include "kernels/scaled_mm.h"
#include "kernels/scaled_mm_internal.h"
}

// --- host helpers

static bool same_fmt(const fmt_t *f, int bits, int e, int m, int bias, fmt_special sp) {
    return f->bits == bits && f->ebits == e && f->mbits == m && f->bias == bias && f->is_signed &&
           f->special == sp;
}
static bool is_bf16(const fmt_t *f) { return same_fmt(f, 16, 8, 7, 127, FMT_IEEE); }
static bool is_fp16(const fmt_t *f) { return same_fmt(f, 16, 5, 10, 15, FMT_IEEE); }

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
namespace {
struct HostOperand {
    int kind = CK_F32, bits = 32;
    std::vector<uint8_t> bytes;  // packed codes (plus 2 bytes of padding for the bit stream) or floats
    std::vector<float> table;    // 256 decode entries for kinds CK_PACKED and CK_U8
};
}  // namespace

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

// --- which own kernel


// Whether every value of f is exact in bf16 (bf16 true) or in fp16, for a format the
// tensor-core kernel can read (<= 8 bits through a table, or the 16-bit type itself).
static bool values_fit16(const fmt_t *f, bool bf16) {
    if (is_bf16(f)) return bf16;
    if (is_fp16(f)) return !bf16;
    if (f->bits > 8) return false;
    fmt_t target;
    fmt_from_name(&target, bf16 ? "bf16" : "fp16");  // table rows: cannot fail
    const fmt_round_opts ro = {};
    for (uint64_t c = 0; c < (1u << f->bits); c++) {
        const double v = fmt_decode1(f, c);
        if (std::isfinite(v) && fmt_round1(&target, v, &ro) != v) return false;
    }
    return true;
}

// The 16-bit type of the tensor-core kernel for A and B: 1 bf16, 2 fp16, 0 none (why says).
static int tc_type(const mm_operand *A, const mm_operand *B, size_t K, const char **why) {
    for (const mm_operand *X : {A, B})
        if (X->scales && X->block_k > 0 && (size_t)X->block_k < K && X->block_k % 16)
            return *why = "a K-block length that is not a multiple of 16", 0;
    if (values_fit16(&A->fmt, true) && values_fit16(&B->fmt, true)) return 1;
    if (values_fit16(&A->fmt, false) && values_fit16(&B->fmt, false)) return 2;
    return *why = "element formats whose values are not all exact in one of bf16 and fp16", 0;
}

namespace {

// --- own SIMT kernel: 64x64 tiles, 16 K per step, a 4x4 micro-tile per thread, float32 FMA
// (no tensor cores, so the header's u = 2^-24 bound holds)


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

// --- own kernel on tensor cores
//
// Element values are decoded into shared memory as bf16 (or fp16) bit patterns, exactly: the
// host picks the 16-bit type in which every value of both formats is representable (tc_type).
// mma.sync.m16n8k16 multiplies them exactly and accumulates in fp32 on the tensor cores. Each
// K-segment (segments end at block boundaries of a scaled operand, which must fall on a
// multiple of 16) is then scaled and added in registers exactly as in the SIMT kernel:
// tot = fl32(tot + fl32(part * fl32(sa * sb))). The fragment layouts are those of the PTX ISA
// for m16n8k16 with .bf16/.f16: groupID g = lane / 4, t = lane % 4; A: a0,a1 (row g, columns
// 2t, 2t+1), a2,a3 (row g+8), a4..a7 (the same rows, columns + 8); B: b0,b1 (rows 2t, 2t+1 of
// column g), b2,b3 (rows + 8); C: c0,c1 (row g, columns 2t, 2t+1), c2,c3 (row g+8).
// 128 x 128 block tiles, 32 K per step, 8 warps as 2 (M) x 4 (N), a 64 x 32 tile per warp.

constexpr int BM = 128, BN = 128, BK = 32, TC_THREADS = 256;
constexpr int WM = 64, WN = 32, MT = WM / 16, NT = WN / 8;
constexpr int SROW = BK + 8;  // a shared row in 16-bit elements; + 8 spreads the fragment loads over the banks

template <bool BF16>
__device__ __forceinline__ uint16_t to_bits16(float v) {  // exact: v is a value of the type
    if constexpr (BF16) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
    else return __half_as_ushort(__float2half_rn(v));
}

template <bool BF16>
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {
#ifdef FPLAB_CUDA_SHIM
    shim_mma16816(c, a, b, BF16);
#else
    if constexpr (BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

__device__ __forceinline__ uint32_t ld_pair(const uint16_t *p) {  // two 16-bit elements, 4-byte aligned
    return *reinterpret_cast<const uint32_t *>(p);
}

template <int KA, int KB, bool BF16>
__global__ void __launch_bounds__(TC_THREADS) mm_tc_kernel(const OwnParams P) {
    __shared__ float tabA[256], tabB[256];
    __shared__ __align__(16) uint16_t As[BM * SROW], Bs[BN * SROW];  // op(A) rows, op(B)^T rows
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int wi = (warp / 4) * WM, wj = (warp % 4) * WN;  // the warp's tile within the block
    const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
    if (KA <= CK_U8)
        for (int c = tid; c < 256; c += TC_THREADS) tabA[c] = P.a.table[c];
    if (KB <= CK_U8)
        for (int c = tid; c < 256; c += TC_THREADS) tabB[c] = P.b.table[c];

    float part[MT][NT][4], tot[MT][NT][4];
    for (int m = 0; m < MT; m++)
        for (int n = 0; n < NT; n++)
            for (int e = 0; e < 4; e++) part[m][n][e] = tot[m][n][e] = 0.0f;
    int ga = 0, gb = 0;
    int nextA = P.a.scales ? P.a.bk : INT_MAX, nextB = P.b.scales ? P.b.bk : INT_MAX;
    // Element e of tile (m, n) is row wi + 16m + g + 8(e / 2), column wj + 8n + 2t + e % 2.
    auto flush = [&]() {
        float sa[MT][2], sb[NT][2];
        for (int m = 0; m < MT; m++)
            for (int h = 0; h < 2; h++) {
                const int i = min(i0 + wi + 16 * m + g + 8 * h, P.M - 1);
                sa[m][h] = P.a.scales ? P.a.scales[(size_t)i * P.a.nb + ga] : 1.0f;
            }
        for (int n = 0; n < NT; n++)
            for (int h = 0; h < 2; h++) {
                const int j = min(j0 + wj + 8 * n + 2 * t + h, P.N - 1);
                sb[n][h] = P.b.scales ? P.b.scales[(size_t)gb * P.N + j] : 1.0f;
            }
        for (int m = 0; m < MT; m++)
            for (int n = 0; n < NT; n++)
                for (int e = 0; e < 4; e++) {
                    const float sc = __fmul_rn(sa[m][e / 2], sb[n][e % 2]);
                    tot[m][n][e] = __fadd_rn(tot[m][n][e], __fmul_rn(part[m][n][e], sc));
                    part[m][n][e] = 0.0f;
                }
    };

    for (int k0 = 0; k0 < P.K; k0 += BK) {
        __syncthreads();  // the previous tile is consumed (and, the first time, the tables are in)
        for (int q = tid; q < BM * BK; q += TC_THREADS) {
            const int r = q / BK, kk = q % BK, k = k0 + kk, i = i0 + r, j = j0 + r;
            As[r * SROW + kk] = to_bits16<BF16>((i < P.M && k < P.K) ? decode_at<KA>(P.a, tabA, (size_t)i * P.a.ldk + k) : 0.0f);
            Bs[r * SROW + kk] = to_bits16<BF16>((j < P.N && k < P.K) ? decode_at<KB>(P.b, tabB, (size_t)j * P.b.ldk + k) : 0.0f);
        }
        __syncthreads();
        for (int ks = 0; ks < BK && k0 + ks < P.K; ks += 16) {
            const int k = k0 + ks;
            if (k == nextA || k == nextB) {  // uniform over the block
                flush();
                if (k == nextA) ga++, nextA += P.a.bk;
                if (k == nextB) gb++, nextB += P.b.bk;
            }
            uint32_t a[MT][4], b[NT][2];
            for (int m = 0; m < MT; m++) {
                const uint16_t *p = As + (wi + 16 * m + g) * SROW + ks + 2 * t;
                a[m][0] = ld_pair(p), a[m][1] = ld_pair(p + 8 * SROW);
                a[m][2] = ld_pair(p + 8), a[m][3] = ld_pair(p + 8 * SROW + 8);
            }
            for (int n = 0; n < NT; n++) {
                const uint16_t *p = Bs + (wj + 8 * n + g) * SROW + ks + 2 * t;
                b[n][0] = ld_pair(p), b[n][1] = ld_pair(p + 8);
            }
            for (int m = 0; m < MT; m++)
                for (int n = 0; n < NT; n++) mma16816<BF16>(part[m][n], a[m], b[n]);
        }
    }
    flush();
    for (int m = 0; m < MT; m++)
        for (int n = 0; n < NT; n++)
            for (int e = 0; e < 4; e++) {
                const int i = i0 + wi + 16 * m + g + 8 * (e / 2), j = j0 + wj + 8 * n + 2 * t + e % 2;
                if (i >= P.M || j >= P.N) continue;
                float *y = P.y + (size_t)i * P.N + j;
                float v = __fmul_rn(P.ab, tot[m][n][e]);
                if (P.beta != 0.0f) v = __fadd_rn(v, __fmul_rn(P.beta, *y));
                *y = v;
            }
}

// --- which instance: one list of the template instances, for the CUDA launches and the shim.
// l.template simt<KA, KB>() or l.template tc<KA, KB, BF16>() is called for the storage kinds
// (ka, kb) of A and B. The tensor-core kernel reads tables (formats of <= 8 bits whose values
// fit) and the 16-bit type of the mma itself.

template <class L, int KA>
void dispatch_own_b(int kb, const L &l) {
    switch (kb) {
    case CK_PACKED: l.template simt<KA, CK_PACKED>(); break;
    case CK_U8: l.template simt<KA, CK_U8>(); break;
    case CK_BF16: l.template simt<KA, CK_BF16>(); break;
    case CK_FP16: l.template simt<KA, CK_FP16>(); break;
    default: l.template simt<KA, CK_F32>(); break;
    }
}

template <class L>
void dispatch_own(int ka, int kb, const L &l) {
    switch (ka) {
    case CK_PACKED: dispatch_own_b<L, CK_PACKED>(kb, l); break;
    case CK_U8: dispatch_own_b<L, CK_U8>(kb, l); break;
    case CK_BF16: dispatch_own_b<L, CK_BF16>(kb, l); break;
    case CK_FP16: dispatch_own_b<L, CK_FP16>(kb, l); break;
    default: dispatch_own_b<L, CK_F32>(kb, l); break;
    }
}

template <class L, bool BF16, int KA>
void dispatch_tc_b(int kb, const L &l) {
    switch (kb) {
    case CK_PACKED: l.template tc<KA, CK_PACKED, BF16>(); break;
    case CK_U8: l.template tc<KA, CK_U8, BF16>(); break;
    default: l.template tc<KA, BF16 ? CK_BF16 : CK_FP16, BF16>(); break;
    }
}

template <class L, bool BF16>
void dispatch_tc(int ka, int kb, const L &l) {
    switch (ka) {
    case CK_PACKED: dispatch_tc_b<L, BF16, CK_PACKED>(kb, l); break;
    case CK_U8: dispatch_tc_b<L, BF16, CK_U8>(kb, l); break;
    default: dispatch_tc_b<L, BF16, BF16 ? CK_BF16 : CK_FP16>(kb, l); break;
    }
}

}  // namespace

#endif
