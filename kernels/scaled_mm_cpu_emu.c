// scaled_mm_cpu_emu.c: the emulated-accumulator path of mm_cpu. It follows the step-by-step
// definition in scaled_mm.h bit for bit (checked against mm_ref by test_mm_cpu), and is fast:
// MR x NR accumulators advance together over k, four or eight per vector register.
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
// Constraints: no global state; results do not depend on the number of threads (each
// accumulator is one lane, whatever the tile it falls in).
#include <stdint.h>
#include <stdlib.h>
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

enum { NV = 2, NR = VL * NV, MR = 4 };  // a tile: MR rows of op(A) x NR columns (NV vectors)

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
    const double hi = s + p, bb = hi - s, lo = (s - (hi - bb)) + (p - bb);
    uint64_t u = fmt__d2u(hi);
    const uint64_t lu = fmt__d2u(lo);
    // An exact zero sum is +0 except when rounding down (IEEE 754 6.3): -0 if either term is
    // negative. Our double sum ran in round-to-nearest, so set that sign here.
    if (mode == FMT_RDN && hi == 0.0) u |= (fmt__d2u(s) | fmt__d2u(p)) & 0x8000000000000000ULL;
    // hi == 0 implies lo == 0; a non-finite hi (inf, NaN input) is left alone.
    const uint64_t fix = (lo != 0.0) & ((u & 1) == 0) & ((u & 0x7ff0000000000000ULL) != 0x7ff0000000000000ULL);
    const uint64_t odd = u + ((((u ^ lu) >> 63) == 0) ? 1 : (uint64_t)-1);
    fmt__flags fl;
    return fmt__round_one_f64(k, mode, fmt__u2d(fix ? odd : u), 0, &fl);
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
    const double *ap;  // op(A) in panels of MR rows: (Mp/MR, K, MR), zero-padded
    const double *bp;  // op(B) in panels of NR columns: (N/NR, K, NR), zero-padded
    const size_t *seg; // segment starts, nseg + 1 entries (last = K)
    const size_t *sga, *sgb;  // the segment's K-block in A's and in B's scales
    size_t nseg, M, N, K;
    const float *sa, *sb;  // block scales or NULL
    size_t nba;            // blocks per row of sa
    float ab;              // fl32(alpha * ta * tb)
    float beta;
    fmt__kparams k;
    emu_grid g;
} emu_job;

typedef struct {
    vd v[MR][NV];
} tile_acc;  // the accumulators of a tile, passed by value so that they stay in registers

// One k step of a tile, t = the vector steps from s, where some lane was flagged: the flagged
// lanes are found again and redone by the scalar step. Out of line: rare.
static __attribute__((noinline)) tile_acc redo(const emu_job *J, const fmt_round_mode mode,
                                               const tile_acc s, const double *a, const vd *b,
                                               tile_acc t) {
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) {
            const vd p = a[r] * b[v];
            vi bad = {0};
            acc_step_v(&J->g, FMT_RTZ, s.v[r][v], p, &bad);  // the flags do not depend on the mode
            for (int l = 0; l < VL; l++)
                if (bad[l]) t.v[r][v][l] = acc_step(&J->k, mode, s.v[r][v][l], p[l]);
        }
    return t;
}

// One MR x NR tile of C at (i0, j0 = jp * NR).
static inline __attribute__((always_inline)) void
emu_tile(const emu_job *J, const fmt_round_mode mode, float *C, size_t ldc, size_t i0, size_t jp) {
    const size_t K = J->K, j0 = jp * NR;
    const double *apan = J->ap + (i0 / MR) * K * MR, *bpan = J->bp + jp * K * NR;
    float tot[MR][NR] = {{0}};
    for (size_t sg = 0; sg < J->nseg; sg++) {
        tile_acc s;
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++) s.v[r][v] = (vd){0};
        for (size_t kk = J->seg[sg]; kk < J->seg[sg + 1]; kk++) {
            vd b[NV];
            memcpy(b, bpan + kk * NR, sizeof b);
            const double *a = apan + kk * MR;
            tile_acc t;
            vi bad = {0};
            for (int r = 0; r < MR; r++)
                for (int v = 0; v < NV; v++) t.v[r][v] = acc_step_v(&J->g, mode, s.v[r][v], a[r] * b[v], &bad);
            s = __builtin_expect(any_lane(bad), 0) ? redo(J, mode, s, a, b, t) : t;
        }
        // total = fl32(total + fl32(s * fl32(sa * sb))): s is an accumulator value, exact in float.
        double sd[MR][NR];
        memcpy(sd, s.v, sizeof sd);
        const size_t ga = J->sga[sg], gb = J->sgb[sg];
        for (int r = 0; r < MR; r++) {
            const size_t i = i0 + r < J->M ? i0 + r : J->M - 1;
            const float sa = J->sa ? J->sa[i * J->nba + ga] : 1.0f;
            for (int l = 0; l < NR; l++) {
                const size_t j = j0 + l < J->N ? j0 + l : J->N - 1;
                const float sb = J->sb ? J->sb[gb * J->N + j] : 1.0f;
                const float sc = sa * sb;
                const float part = (float)sd[r][l] * sc;
                tot[r][l] = tot[r][l] + part;
            }
        }
    }
    for (int r = 0; r < MR && i0 + r < J->M; r++)
        for (int l = 0; l < NR && j0 + l < J->N; l++) {
            float *c = C + (i0 + r) * ldc + j0 + l;
            float y = J->ab * tot[r][l];
            if (J->beta != 0.0f) {
                const float bc = J->beta * *c;
                y = y + bc;
            }
            *c = y;
        }
}

// Every tile of C; the mode is dispatched per tile so that each mode gets its own specialised
// tile kernel (OpenMP outlines the parallel loop before inlining could make the mode a constant).
static void emu_run(const emu_job *J, const fmt_round_mode mode, float *C, size_t ldc) {
    const size_t nrb = (J->M + MR - 1) / MR, npan = (J->N + NR - 1) / NR;
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < nrb * npan; t++) {
        const size_t i0 = (t / npan) * MR, jp = t % npan;
        switch (mode) {
        case FMT_RNE: emu_tile(J, FMT_RNE, C, ldc, i0, jp); break;
        case FMT_RNA: emu_tile(J, FMT_RNA, C, ldc, i0, jp); break;
        case FMT_RTZ: emu_tile(J, FMT_RTZ, C, ldc, i0, jp); break;
        case FMT_RUP: emu_tile(J, FMT_RUP, C, ldc, i0, jp); break;
        case FMT_RDN: emu_tile(J, FMT_RDN, C, ldc, i0, jp); break;
        case FMT_RTO: emu_tile(J, FMT_RTO, C, ldc, i0, jp); break;
        default: break;  // stochastic rounding is refused earlier
        }
    }
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

int mm__cpu_emulated(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                     size_t N, size_t K, const mm_opts *o) {
    if (o->acc.mode == FMT_SR) return MM_EUNSUPPORTED;  // no draw order is defined for it
    emu_job J = {.M = M, .N = N, .K = K, .sa = A->scales, .sb = B->scales, .beta = o->beta};
    J.ab = mm__fl32_prod3(o->alpha, mm__tscale(A), mm__tscale(B));
    // The accumulator rounds with its mode and IEEE overflow (inf, or max toward zero).
    const fmt_round_opts ao = {.mode = o->acc.mode, .overflow = FMT_OVERFLOW_IEEE};
    fmt_rounder acc;
    if (fmt_rounder_make(&acc, &o->acc.fmt, &ao) != FMT_OK) return MM_EINVAL;
    J.k = acc.k;
    J.g = grid_of(&acc.k);

    // Segments: a segment starts at k = 0, at every multiple of a scaled operand's block_k, and
    // every promote_every products after the last of those.
    size_t bka, bkb;
    J.nba = mm__nblocks(A, K, &bka);
    mm__nblocks(B, K, &bkb);
    const size_t pe = o->acc.promote_every > 0 ? (size_t)o->acc.promote_every : 0;
    size_t *seg = malloc((K + 1) * sizeof *seg), *sga = malloc(K * sizeof *sga), *sgb = malloc(K * sizeof *sgb);
    const size_t nrb = (M + MR - 1) / MR, npan = (N + NR - 1) / NR;
    double *ap = malloc(nrb * MR * K * sizeof *ap), *bp = malloc(npan * NR * K * sizeof *bp);
    if (!seg || !sga || !sgb || !ap || !bp) {
        free(seg), free(sga), free(sgb), free(ap), free(bp);
        return MM_ENOMEM;
    }
    size_t ns = 0, start = 0;
    for (size_t k = 0; k < K; k++) {
        const bool edge = k == 0 || (A->scales && k % bka == 0) || (B->scales && k % bkb == 0);
        if (edge) start = k;
        if (edge || (pe && (k - start) % pe == 0)) {
            seg[ns] = k, sga[ns] = k / bka, sgb[ns] = k / bkb, ns++;
        }
    }
    seg[ns] = K;
    J.seg = seg, J.sga = sga, J.sgb = sgb, J.nseg = ns;

    // Pack both operands as doubles in the order the tiles read them (O(n^2)).
#pragma omp parallel for schedule(static)
    for (size_t ip = 0; ip < nrb; ip++)
        for (size_t k = 0; k < K; k++)
            for (size_t r = 0; r < MR; r++) {
                const size_t i = ip * MR + r;
                ap[(ip * K + k) * MR + r] = i < M ? (double)mm__a_at(A, i, k) : 0.0;
            }
#pragma omp parallel for schedule(static)
    for (size_t jp = 0; jp < npan; jp++)
        for (size_t k = 0; k < K; k++)
            for (size_t l = 0; l < NR; l++) {
                const size_t j = jp * NR + l;
                bp[(jp * K + k) * NR + l] = j < N ? (double)mm__b_at(B, k, j) : 0.0;
            }
    J.ap = ap, J.bp = bp;

    emu_run(&J, acc.mode, C, ldc);
    free(seg), free(sga), free(sgb), free(ap), free(bp);
    return mm__round_output(C, ldc, M, N, o);
}
