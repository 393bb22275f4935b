// scaled_mm_cpu_emu_f64.c: the general tile kernel of the emulated accumulators (any
// accumulator format mm_validate accepts, any operands, inf and NaN included), in double lanes:
// MR x NR accumulators advance together over k, four or eight per vector register.
// scaled_mm_cpu_emu_f32.c is the fast kernel for the common cases; this one
// runs the rest: accumulators narrower in range than float32 (fp16, fp8), 22 fraction bits,
// fp32 rounding to nearest-away or to odd, and operands whose products leave float32.
//
// One accumulation step s = round_acc(s + p) (s an accumulator value, p an exact product, both
// doubles): TwoSum gives s + p = hi + lo exactly; hi is rounded to odd with lo (if lo != 0 and
// hi's last bit is even, step hi one ulp toward lo); rounding that 53-bit value to the
// accumulator's p <= 24 bits is then correctly rounded in every mode (Boldo & Melquiond,
// "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd",
// IEEE TC 2008; needs 53 >= p + 2). While the result is a normal number of the accumulator
// format, that last rounding is integer arithmetic on the double's bit pattern (add a rounding
// increment at bit 52 - m, clear the bits below), which vectorises. A lane that leaves that
// range (zero excepted: it is exact) - a subnormal or overflowing result, an inf or NaN - is
// redone by the general scalar rounding of the format library, so every case stays exact.
//
// Constraints: no global state; results do not depend on the number of threads.
#include <stdint.h>
#include <string.h>

#ifdef __AVX__
#include <immintrin.h>
#endif

#include "kernels/scaled_mm_internal.h"

// Lanes per vector: eight doubles where the build has AVX-512, four otherwise (AVX2, or SSE2
// pairs, as GCC lowers them).
#ifdef __AVX512F__
#define VL 8
#else
#define VL 4
#endif
typedef double vd __attribute__((vector_size(VL * 8)));
typedef int64_t vi __attribute__((vector_size(VL * 8)));
typedef uint64_t vu __attribute__((vector_size(VL * 8)));
typedef float vfl __attribute__((vector_size(VL * 4)));  // VL floats of a packed panel

enum { NV = 2, NR = VL * NV, MR = 4 };  // a tile: MR rows of op(A) x NR columns (NV vectors)
_Static_assert((int)NR <= (int)MM__EMU_NR_MAX, "tile wider than mm__emu_promote's scale buffer");

// The accumulator's grid for the vector step, as integers on a double's bit pattern.
typedef struct {
    int sh;           // 52 - m: the double's fraction bits below the accumulator's last place
    int64_t low;      // (1 << sh) - 1
    int64_t half;     // 1 << (sh - 1)
    int64_t maxbits;  // bits of the largest finite value
    int64_t minbits;  // bits of the smallest normal
} emu_grid;

static inline bool any_lane(const vi m) {
#if VL == 8
    return _mm512_test_epi64_mask((__m512i)m, (__m512i)m) != 0;
#elif defined(__AVX__)
    return !_mm256_testz_si256((__m256i)m, (__m256i)m);
#else
    return (m[0] | m[1] | m[2] | m[3]) != 0;
#endif
}

// The scalar step (any format, any lane): the reference for the vector step below.
static inline __attribute__((always_inline)) double
acc_step(const fmt__kparams *k, const fmt_round_mode mode, const double s, const double p) {
    return mm__acc_step(k, mode, s, p);
}

// VL steps at once; lanes whose result is not a normal number or zero are flagged in *bad
// (their returned value is meaningless) for the caller to redo with acc_step.
static inline __attribute__((always_inline)) vd
acc_step_v(const emu_grid *g, const fmt_round_mode mode, const vd s, const vd p, vi *bad) {
    const vd hi = s + p, bb = hi - s, lo = (s - (hi - bb)) + (p - bb);
    vi u = (vi)hi;
    // Round to odd at 53 bits: +-1 ulp toward lo where lo != 0 and the last bit is even.
    const vi differ = (u ^ (vi)lo) < 0;
    u += ((lo != 0.0) & ((u & 1) == 0)) & (differ + differ + 1);
    // The sign of an exact zero in round-down (see acc_step): it cannot reach C (the float32
    // total starts at +0), but keeps every lane equal to the definition's accumulator.
    if (mode == FMT_RDN) u |= (hi == 0.0) & (((vi)s | (vi)p) & INT64_MIN);
    const vi keep = u & ~g->low, inexact = (u & g->low) != 0;
    const vi ulp = inexact & (g->low + 1);  // one unit in the last place where inexact
    vi r;
    switch (mode) {
    case FMT_RNE: r = (u + (g->half - 1) + (vi)(((vu)u >> g->sh) & 1)) & ~g->low; break;
    case FMT_RNA: r = (u + g->half) & ~g->low; break;
    case FMT_RTZ: r = keep; break;
    case FMT_RUP: r = keep + ((u >= 0) & ulp); break;
    case FMT_RDN: r = keep + ((u < 0) & ulp); break;
    case FMT_RTO: r = keep | ulp; break;
    default: r = u; break;  // not reached: stochastic rounding is refused earlier
    }
    // Rounding is monotone and the accumulator's min_normal and max are on its grid, so an input
    // in [min_normal, max] rounds to a normal number; zero is exact. Everything else (subnormal,
    // beyond max, inf, NaN) is redone.
    const vi xa = u & INT64_MAX;
    *bad |= ((xa < g->minbits) & (xa != 0)) | (xa > g->maxbits);
    return (vd)r;
}

typedef struct {
    vd v[MR][NV];
} tile_acc;  // the accumulators of a tile, passed by value so that they stay in registers

// One k step of a tile, t = the vector steps from s, where some lane was flagged: the flagged
// lanes are found again and redone by the scalar step. Out of line: rare.
static __attribute__((noinline)) tile_acc redo(const mm__emu_job *J, const emu_grid *g,
                                               const fmt_round_mode mode, const tile_acc s,
                                               const double *a, const vd *b, tile_acc t) {
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) {
            const vd p = a[r] * b[v];
            vi bad = {0};
            acc_step_v(g, FMT_RTZ, s.v[r][v], p, &bad);  // the flags do not depend on the mode
            for (int l = 0; l < VL; l++)
                if (bad[l]) t.v[r][v][l] = acc_step(&J->k, mode, s.v[r][v][l], p[l]);
        }
    return t;
}

// The MR x NR tile of C at (ib * MR, jp * NR), from the panels ap, bp.
static inline __attribute__((always_inline)) void
emu_tile(const mm__emu_job *J, const emu_grid *g, const fmt_round_mode mode, const float *ap,
         const float *bp, float *C, size_t ldc, size_t ib, size_t jp) {
    const size_t K = J->K, i0 = ib * MR, j0 = jp * NR;
    const float *apan = ap + ib * K * MR, *bpan = bp + jp * K * NR;
    float tot[MR * NR] = {0};
    for (size_t s0 = 0, s1; s0 < K; s0 = s1) {
        s1 = mm__seg_end(s0, K, J->bk, J->pe);
        tile_acc s;
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++) s.v[r][v] = (vd){0};
        for (size_t kk = s0; kk < s1; kk++) {
            vd b[NV];
            for (int v = 0; v < NV; v++) {
                vfl bf;
                memcpy(&bf, bpan + kk * NR + v * VL, sizeof bf);
                b[v] = __builtin_convertvector(bf, vd);
            }
            double a[MR];
            for (int r = 0; r < MR; r++) a[r] = apan[kk * MR + r];
            tile_acc t;
            vi bad = {0};
            for (int r = 0; r < MR; r++)
                for (int v = 0; v < NV; v++) t.v[r][v] = acc_step_v(g, mode, s.v[r][v], a[r] * b[v], &bad);
            s = __builtin_expect(any_lane(bad), 0) ? redo(J, g, mode, s, a, b, t) : t;
        }
        float sf[MR * NR];  // accumulator values: exact in float32
        for (int r = 0; r < MR; r++)
            for (int l = 0; l < NR; l++) sf[r * NR + l] = (float)s.v[r][l / VL][l % VL];
        mm__emu_promote(J, s0, i0, j0, MR, NR, sf, tot);
    }
    mm__emu_store(J, i0, j0, MR, NR, tot, C, ldc);
}

// The vector step's grid for accumulator k. For formats whose zero, subnormals or smallest
// values are not IEEE-like (no -0, flushing, no zero), maxbits = -1 flags every lane, zeros
// included, for the scalar step: the fast path then never decides anything.
static emu_grid grid_of(const fmt__kparams *k) {
    const int sh = 52 - k->m;
    emu_grid g = {.sh = sh, .low = (INT64_C(1) << sh) - 1, .half = INT64_C(1) << (sh - 1),
                  .maxbits = (int64_t)fmt__d2u(k->max), .minbits = (int64_t)fmt__d2u(k->min_normal)};
    if (!k->has_zero || !k->negzero || k->flush || k->clamp_min) g.minbits = INT64_MAX, g.maxbits = -1;
    return g;
}

// The mode becomes a constant here, so that each mode gets its own specialised tile kernel.
static void f64_tile(const mm__emu_job *J, const void *ctx, const float *ap, const float *bp, float *C,
                     size_t ldc, size_t ib, size_t jp) {
    const emu_grid *g = ctx;
    switch (J->mode) {
    case FMT_RNE: emu_tile(J, g, FMT_RNE, ap, bp, C, ldc, ib, jp); break;
    case FMT_RNA: emu_tile(J, g, FMT_RNA, ap, bp, C, ldc, ib, jp); break;
    case FMT_RTZ: emu_tile(J, g, FMT_RTZ, ap, bp, C, ldc, ib, jp); break;
    case FMT_RUP: emu_tile(J, g, FMT_RUP, ap, bp, C, ldc, ib, jp); break;
    case FMT_RDN: emu_tile(J, g, FMT_RDN, ap, bp, C, ldc, ib, jp); break;
    case FMT_RTO: emu_tile(J, g, FMT_RTO, ap, bp, C, ldc, ib, jp); break;
    default: break;  // stochastic rounding is refused earlier
    }
}

int mm__emu_run_f64(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, float *C, size_t ldc) {
    const emu_grid g = grid_of(&J->k);
    return mm__emu_tiles(J, A, B, C, ldc, MR, NR, f64_tile, &g);
}
