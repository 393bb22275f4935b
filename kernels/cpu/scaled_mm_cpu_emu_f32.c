// scaled_mm_cpu_emu_f32.c: the fast tile kernel of the emulated accumulators, in float32 lanes
// (sixteen per AVX-512 register, eight otherwise), for the accumulators and operands most
// products use; scaled_mm_cpu_emu_f64.c runs everything else. Bit for bit the definition in
// scaled_mm.h, as the double kernel is (test_mm_cpu checks both against mm_ref).
//
// What it covers (mm__emu_f32_covers):
// - accumulators with float32's binades (emin -126, emax 127, IEEE inf and -0, no flushing):
//   bf16, e8m13, mNN. Then a value's last place at any magnitude, subnormals included, is
//   2^(23-m) units of its float32 bit pattern (as in formats/round_lean.c, "wide" formats), so
//   rounding a float32 to the accumulator is an integer add and mask on its bits, and a carry
//   into the exponent field - up to inf - is the right result (truncation never passes the
//   accumulator's max, as IEEE overflow toward zero wants). No lane ever leaves the vector
//   step, and there is no scalar fix-up at all;
// - operands whose every product is exact in float32 (finite, at most 24 bits of precision
//   together, |a b| within [2^-126, FLT_MAX] or 0), checked on the data. The AVX-512 step below
//   would not need it (a fused multiply-add sees the exact product); one rule for both builds
//   keeps them on the same kernel for the same inputs.
//
// One step s = round_acc(s + a b) in two roundings. First x, a 24-bit value that the second
// rounding treats as it would treat the exact sum: the sum rounded to odd (RO: truncate, set
// the last bit if inexact), whose last bit keeps the sticky information for any precision
// p <= 22 (24 >= p + 2, Boldo & Melquiond, IEEE TC 2008); or, for the directed modes, the sum
// rounded in that same direction (two roundings toward zero, up or down on nested grids are
// one). Then the integer rounding of x's bits to the accumulator's m fraction bits (round_p).
// - AVX-512: x from fused multiply-adds with embedded rounding (not MXCSR's): RO(s + ab) is
//   whichever of RD(s + ab) and RU(s + ab) has an odd last bit (they are equal when exact);
//   directed modes take one FMA in their own direction. A fp32 accumulator (24 bits: no room
//   for RO) is the FMA in its mode itself (rne, rtz, rup, rdn; rna and rto go to the double
//   kernel).
// - elsewhere: p = ab (exact), TwoSum gives s + p = hi + lo, and hi is rounded to odd with lo;
//   a fp32 accumulator is s + p in round-to-nearest only.
// The instruction count of each mode's step, as compiled, is in docs/benchmarks.md.
//
// Constraints: no global state (MXCSR is set to its default in each thread for the kernel's
// duration and put back); results do not depend on the number of threads.
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "kernels/scaled_mm_internal.h"

// A build whose -march lacks AVX-512 (a portable one) compiles this file a second time for
// x86-64-v4 (scaled_mm_cpu_emu_f32_v4.c, under MM_EMU_F32_V4_COPY), and its entry points below
// hand a call to that copy where the CPU has AVX-512: the fast step runs without the user
// building for the machine. Both copies give the definition's bits, so the choice is speed only.
#ifdef MM_EMU_F32_V4_COPY
// Every function of the copy that is not inlined is named *_avx512, so that the portable
// build's check (tests/check_install.sh) sees wide registers only in dispatched variants.
#define mm__emu_f32_covers mm__emu_f32_covers_avx512
#define mm__emu_run_f32 mm__emu_run_f32_avx512
#define kind_of kind_of_avx512
#define range_of range_of_avx512
#define f32_tile f32_tile_avx512
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX512F__)
#define MM_EMU_F32_DISPATCH 1
bool mm__emu_f32_covers_avx512(const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                               const fmt__kparams *acc, fmt_round_mode mode);
int mm__emu_run_f32_avx512(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, float *C, size_t ldc);
static bool cpu_v4(void) { return __builtin_cpu_supports("x86-64-v4"); }
#endif

#ifdef __AVX512F__
#include <immintrin.h>
#define VLF 16
#else
#define VLF 8
#endif
typedef float vf __attribute__((vector_size(VLF * 4)));
typedef float vf_u __attribute__((vector_size(VLF * 4), aligned(4), may_alias));  // panel loads
typedef int32_t vi __attribute__((vector_size(VLF * 4)));

// A tile: MR rows of op(A) x NR columns (NV vectors). Its accumulators, the B vectors, the
// step's temporaries and constants fit the 32 AVX-512 registers (16 elsewhere).
#ifdef __AVX512F__
enum { MR = 8, NV = 2 };
#else
enum { MR = 4, NV = 2 };
#endif
enum { NR = VLF * NV };
_Static_assert((int)NR <= (int)MM__EMU_NR_MAX, "tile wider than mm__emu_promote's scale buffer");

typedef enum {
    EMU_NARROW,  // m <= 21: x, then round_p
    EMU_F32,     // the fp32 accumulator: the step is one IEEE operation
} emu_kind;

// The accumulator's last place on a float32 bit pattern: sh = 23 - m >= 2 bits below it.
typedef struct {
    int32_t low;   // (1 << sh) - 1: the bits below the last place
    int32_t half;  // 1 << (sh - 1)
    int32_t ulp;   // 1 << sh: the last place
} grid32;

// x in every lane (x - +0 is x, signed zeros included, and folds away).
static inline vf bcast(const float x) { return x - (vf){0}; }

// y - 1 in the lanes where x & bit is 0 (AVX-512: one test into a mask and one masked subtract,
// where GCC makes four instructions of the generic form).
static inline __attribute__((always_inline)) vi dec_where_clear(const vi y, const vi x, const int32_t bit) {
#ifdef __AVX512F__
    const __mmask16 clear = _mm512_testn_epi32_mask((__m512i)x, _mm512_set1_epi32(bit));
    return (vi)_mm512_mask_sub_epi32((__m512i)y, clear, (__m512i)y, _mm512_set1_epi32(1));
#else
    return y + ((x & bit) == 0);  // a true comparison is -1
#endif
}

// x (bits of a float32 that is RO of the exact sum, or its rounding in the direction of mode)
// rounded to the accumulator in mode. The sign bit is bit 31, so x >> 31 is -1 for negatives.
static inline __attribute__((always_inline)) vi round_p(const grid32 g, const fmt_round_mode mode, const vi x) {
    switch (mode) {
    case FMT_RNE: return dec_where_clear(x + g.half, x, g.ulp) & ~g.low;  // a tie stays down if even
    case FMT_RNA: return (x + g.half) & ~g.low;
    case FMT_RTZ: return x & ~g.low;
    case FMT_RUP: return (x + (~(x >> 31) & g.low)) & ~g.low;  // magnitude up if positive
    case FMT_RDN: return (x + ((x >> 31) & g.low)) & ~g.low;   // magnitude up if negative
    case FMT_RTO: return (x & ~g.low) | (((x & g.low) != 0) & g.ulp);
    default: return x;  // not reached: stochastic rounding is refused earlier
    }
}

#ifdef __AVX512F__
enum { RD = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC, RU = _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC,
       RZ = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC };

// s + a b rounded once to float32 in mode: rtz, rup, rdn, or rne (MXCSR's, set by
// mm__emu_tiles). Exact zero sums get IEEE 754's signs, as the definition's step has them.
static inline __attribute__((always_inline)) vf fma_in(const fmt_round_mode mode, const vf s, const vf a, const vf b) {
    const __m512 S = (__m512)s, A = (__m512)a, B = (__m512)b;
    switch (mode) {
    case FMT_RTZ: return (vf)_mm512_fmadd_round_ps(A, B, S, RZ);
    case FMT_RUP: return (vf)_mm512_fmadd_round_ps(A, B, S, RU);
    case FMT_RDN: return (vf)_mm512_fmadd_round_ps(A, B, S, RD);
    default: return (vf)_mm512_fmadd_ps(A, B, S);
    }
}

// x for s + a b (see the top). In the nearest modes RO is RD where RD is odd, else RU (also when
// exact, so that x + (-x) is +0 as in round-to-nearest).
static inline __attribute__((always_inline)) vi sum24(const fmt_round_mode mode, const vf s, const vf a, const vf b) {
    if (mode == FMT_RTZ || mode == FMT_RUP || mode == FMT_RDN) return (vi)fma_in(mode, s, a, b);
    const vf ru = fma_in(FMT_RUP, s, a, b), rd = fma_in(FMT_RDN, s, a, b);
    return (vi)_mm512_mask_blend_ps(_mm512_test_epi32_mask((__m512i)rd, _mm512_set1_epi32(1)), (__m512)ru, (__m512)rd);
}
#else
// x for s + a b: RO(s + p) from TwoSum (p = a b, exact by the operand check).
static inline __attribute__((always_inline)) vi sum24(const fmt_round_mode mode, const vf s, const vf a, const vf b) {
    const vf p = a * b, hi = s + p, bb = hi - s, lo = (s - (hi - bb)) + (p - bb);
    const vi expo = (vi){0} + 0x7f800000;  // inf's bits: the exponent field
    vi u = (vi)hi;
    // Round to odd: +-1 unit toward lo where lo != 0 and the last bit is even (not for an inf hi).
    const vi differ = (u ^ (vi)lo) < 0;
    u += ((lo != 0) & ((u & 1) == 0) & ((u & expo) != expo)) & (differ + differ + 1);
    // Round-down's exact zero is -0 if either term is negative (IEEE 754 6.3; hi is RN's).
    if (mode == FMT_RDN) u |= (hi == 0) & (((vi)s | (vi)p) & INT32_MIN);
    // hi overflowed from a finite s (p is finite): the sum lies past every rounding threshold
    // of the accumulator, as +-FLT_MAX (inf's bits - 1, odd) does, which stands for it.
    u += ((u & INT32_MAX) == expo) & (((vi)s & INT32_MAX) != expo);
    return u;
}

// s + a b rounded once to float32: rne only here (kind_of), a b being exact.
static inline __attribute__((always_inline)) vf fma_in(const fmt_round_mode mode, const vf s, const vf a, const vf b) {
    (void)mode;
    return s + a * b;
}
#endif

// One step of the definition: s = round_acc(s + a b).
static inline __attribute__((always_inline)) vf step(const emu_kind kind, const grid32 g, const fmt_round_mode mode,
                                                     const vf s, const vf a, const vf b) {
    return kind == EMU_F32 ? fma_in(mode, s, a, b) : (vf)round_p(g, mode, sum24(mode, s, a, b));
}

// The MR x NR tile of C at (ib * MR, jp * NR), from the panels ap, bp.
static inline __attribute__((always_inline)) void
emu_tile(const mm__emu_job *J, const emu_kind kind, const grid32 g, const fmt_round_mode mode,
         const float *ap, const float *bp, float *C, size_t ldc, size_t ib, size_t jp) {
    const size_t K = J->K, i0 = ib * MR, j0 = jp * NR;
    const float *apan = ap + ib * K * MR, *bpan = bp + jp * K * NR;
    float tot[MR * NR] = {0};
    for (size_t s0 = 0, s1; s0 < K; s0 = s1) {
        s1 = mm__seg_end(s0, K, J->bk, J->pe);
        vf s[MR][NV];
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++) s[r][v] = (vf){0};
        for (size_t kk = s0; kk < s1; kk++) {
            vf b[NV];
            for (int v = 0; v < NV; v++) b[v] = ((const vf_u *)(bpan + kk * NR))[v];
#pragma GCC unroll 16
            for (int r = 0; r < MR; r++) {
                const vf a = bcast(apan[kk * MR + r]);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) s[r][v] = step(kind, g, mode, s[r][v], a, b[v]);
            }
        }
        float sf[MR * NR];
        memcpy(sf, s, sizeof sf);
        mm__emu_promote(J, s0, i0, j0, MR, NR, sf, tot);
    }
    mm__emu_store(J, i0, j0, MR, NR, tot, C, ldc);
}

// --- coverage

// The kind of step for accumulator k in mode on this build, or -1: float32's binades with
// IEEE inf, -0 and no flushing (the accumulator's values, overflow and subnormals are then
// float32's at m bits).
static int kind_of(const fmt__kparams *k, const fmt_round_mode mode) {
    if (k->emin != -126 || k->emax != 127 || k->special != FMT_IEEE || !k->is_signed || !k->has_zero ||
        !k->negzero || k->flush || k->clamp_min || mode == FMT_SR)
        return -1;
    if (k->m >= 1 && k->m <= 21) return EMU_NARROW;
#ifdef __AVX512F__
    if (k->m == 23 && (mode == FMT_RNE || mode == FMT_RTZ || mode == FMT_RUP || mode == FMT_RDN)) return EMU_F32;
#else
    if (k->m == 23 && mode == FMT_RNE) return EMU_F32;
#endif
    return -1;
}

// What the elements of op(X) (rows x cols) are: largest and smallest nonzero magnitude, and the
// most bits of precision any of them has (24 - the fewest trailing zeros of a significand,
// an upper bound for subnormals). False when one is inf or NaN. On the magnitudes' bit
// patterns, whose integer order is their order (inf and NaN above every finite one), so that
// the scan vectorises.
typedef struct {
    float amax, amin;
    int prec;
} elem_range;

static bool range_of(elem_range *out, const mm_operand *X, size_t rows, size_t cols) {
    const size_t srows = X->trans ? cols : rows, scols = X->trans ? rows : cols;
    // umin1: the smallest nonzero magnitude minus 1 (u - 1 wraps a zero to the largest);
    // frac: the OR of every significand.
    uint32_t umax = 0, umin1 = UINT32_MAX, frac = 0;
#pragma omp parallel for schedule(static) reduction(max : umax) reduction(min : umin1) reduction(| : frac)
    for (size_t i = 0; i < srows; i++) {
        const float *x = X->x + i * X->ld;
        uint32_t rmax = 0, rmin1 = UINT32_MAX, rfrac = 0;  // the row's, in locals: GCC vectorises
        for (size_t j = 0; j < scols; j++) {
            uint32_t u;
            memcpy(&u, &x[j], sizeof u);
            u &= 0x7fffffffu;
            rmax = u > rmax ? u : rmax;
            rmin1 = u - 1 < rmin1 ? u - 1 : rmin1;
            rfrac |= u;
        }
        umax = rmax > umax ? rmax : umax;
        umin1 = rmin1 < umin1 ? rmin1 : umin1;
        frac |= rfrac;
    }
    const uint32_t amin = umin1 == UINT32_MAX ? 0x7f800000u : umin1 + 1;  // all zero: inf, no limit
    memcpy(&out->amax, &umax, sizeof umax);
    memcpy(&out->amin, &amin, sizeof amin);
    out->prec = 24 - __builtin_ctz((frac & 0x7fffffu) | 0x800000u);
    return umax < 0x7f800000u;
}

bool mm__emu_f32_covers(const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                        const fmt__kparams *acc, fmt_round_mode mode) {
#ifdef MM_EMU_F32_DISPATCH
    if (cpu_v4()) return mm__emu_f32_covers_avx512(A, B, M, N, K, acc, mode);
#endif
    elem_range ra, rb;
    if (kind_of(acc, mode) < 0 || !range_of(&ra, A, M, K) || !range_of(&rb, B, K, N)) return false;
    // Products of nonzero elements: at most 24 bits, normal and finite in float32 (in double:
    // exact, no overflow or underflow).
    return ra.prec + rb.prec <= 24 && (double)ra.amax * rb.amax <= FLT_MAX &&
           (double)ra.amin * rb.amin >= 0x1p-126;
}

// --- entry

typedef struct {
    emu_kind kind;
    grid32 g;
} f32_ctx;

// Kind and mode become constants here, so that each pair gets its own specialised tile kernel.
static void f32_tile(const mm__emu_job *J, const void *ctx, const float *ap, const float *bp, float *C,
                     size_t ldc, size_t ib, size_t jp) {
    const f32_ctx *x = ctx;
    const grid32 g = x->g;
    if (x->kind == EMU_F32) {
        switch (J->mode) {
        case FMT_RNE: emu_tile(J, EMU_F32, g, FMT_RNE, ap, bp, C, ldc, ib, jp); break;
#ifdef __AVX512F__
        case FMT_RTZ: emu_tile(J, EMU_F32, g, FMT_RTZ, ap, bp, C, ldc, ib, jp); break;
        case FMT_RUP: emu_tile(J, EMU_F32, g, FMT_RUP, ap, bp, C, ldc, ib, jp); break;
        case FMT_RDN: emu_tile(J, EMU_F32, g, FMT_RDN, ap, bp, C, ldc, ib, jp); break;
#endif
        default: break;  // not covered (kind_of)
        }
        return;
    }
    switch (J->mode) {
    case FMT_RNE: emu_tile(J, EMU_NARROW, g, FMT_RNE, ap, bp, C, ldc, ib, jp); break;
    case FMT_RNA: emu_tile(J, EMU_NARROW, g, FMT_RNA, ap, bp, C, ldc, ib, jp); break;
    case FMT_RTZ: emu_tile(J, EMU_NARROW, g, FMT_RTZ, ap, bp, C, ldc, ib, jp); break;
    case FMT_RUP: emu_tile(J, EMU_NARROW, g, FMT_RUP, ap, bp, C, ldc, ib, jp); break;
    case FMT_RDN: emu_tile(J, EMU_NARROW, g, FMT_RDN, ap, bp, C, ldc, ib, jp); break;
    case FMT_RTO: emu_tile(J, EMU_NARROW, g, FMT_RTO, ap, bp, C, ldc, ib, jp); break;
    default: break;  // stochastic rounding is refused earlier
    }
}

int mm__emu_run_f32(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, float *C, size_t ldc) {
#ifdef MM_EMU_F32_DISPATCH
    if (cpu_v4()) return mm__emu_run_f32_avx512(J, A, B, C, ldc);
#endif
    const emu_kind kind = (emu_kind)kind_of(&J->k, J->mode);
    const int sh = kind == EMU_NARROW ? 23 - J->k.m : 1;  // (the grid is unused by EMU_F32)
    const f32_ctx ctx = {kind, {.low = (1 << sh) - 1, .half = 1 << (sh - 1), .ulp = 1 << sh}};
    return mm__emu_tiles(J, A, B, C, ldc, MR, NR, f32_tile, &ctx);
}
