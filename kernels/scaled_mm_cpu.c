// scaled_mm_cpu.c: the CPU backend of scaled_mm.h (mm_cpu).
// - fp32 accumulation: the scales are folded into the operands (O(n^2), OpenMP) and one
//   cblas_sgemm does the O(n^3) work; C is then rounded to the output format.
// - emulated accumulators: a blocked C kernel that follows the header's step-by-step definition
//   bit for bit (checked against mm_ref), MR x NR accumulators advancing together over k.
// Buffers: C (M x N, ldc) is overwritten (read first when beta != 0); A, B are read only.
// Constraints: no MPFR, no global state; results do not depend on the number of threads.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef FPLAB_HAVE_BLAS
#include <cblas.h>
#endif

#include "formats/round_scalar.h"
#include "kernels/scaled_mm.h"

// --- shared helpers

static size_t nblocks_of(const mm_operand *X, size_t K, size_t *bk) {
    *bk = X->block_k > 0 ? (size_t)X->block_k : (K ? K : 1);
    return K ? (K + *bk - 1) / *bk : 0;
}

static float tscale(const mm_operand *X) { return X->tensor_scale == 0.0f ? 1.0f : X->tensor_scale; }

// fl32(a * b * c), rounded once: a*b is exact in double, the product with c is rounded to odd
// at 53 bits (hi plus the exact error from an fma), so the final cast to float is the correctly
// rounded result (53 >= 24 + 2).
static float fl32_prod3(float a, float b, float c) {
    const double ab = (double)a * b, hi = ab * c, lo = fma(ab, c, -hi);
    uint64_t u = fmt__d2u(hi);
    if (lo != 0.0 && isfinite(hi) && !(u & 1)) u += (signbit(lo) == signbit(hi)) ? 1 : -1;
    return (float)fmt__u2d(u);
}

// C rows = round_out(C rows); element (i, j) draws stochastic counter offset + i*N + j.
static int round_output(float *C, size_t ldc, size_t M, size_t N, const mm_opts *o) {
    if (fmt_contains_f32(&o->out_fmt)) return MM_OK;  // every float32 is a value: a copy
    if (ldc == N) return fmt_round_f32(&o->out_fmt, C, M * N, &o->out_round, NULL) ? MM_EINVAL : MM_OK;
    int st = MM_OK;
#pragma omp parallel for schedule(static) if (M * N > (1u << 16))
    for (size_t i = 0; i < M; i++) {
        fmt_round_opts ro = o->out_round;
        ro.offset += i * N;
        if (fmt_round_f32(&o->out_fmt, C + i * ldc, N, &ro, NULL)) st = MM_EINVAL;
    }
    return st;
}

// Element (i, k) of op(A) and (k, j) of op(B), whatever the storage.
static inline float a_at(const mm_operand *A, size_t i, size_t k) {
    return A->trans ? A->x[k * A->ld + i] : A->x[i * A->ld + k];
}
static inline float b_at(const mm_operand *B, size_t k, size_t j) {
    return B->trans ? B->x[j * B->ld + k] : B->x[k * B->ld + j];
}

// --- fp32 accumulation: fold scales, one sgemm

// The folded operand a[i,k] * sa[i, k/bk] is exact in float32 when the scale is a power of two
// (e8m0, and ue8m0-style tensor recipes) or an e4m3 scale times an element of <= 4 bits of
// precision (NVFP4), barring float32 overflow/underflow. For other scale formats the product
// is rounded once, which costs up to one more u per operand on top of the header's gamma_{K+2}
// bound (gamma_{K+4} would cover it).
//
// The fold keeps the stored shape (a transposed operand stays transposed and sgemm is told so):
// the copy then streams through memory in order. It runs on one thread on purpose: it is
// memory-bound (0.4 ms per 1024^2 operand here), while the OpenMP workers of a parallel fold
// keep spinning after it and steal the cores from OpenBLAS's own threads: measured on 2 cores,
// a parallel fold made the following sgemm 25% slower (OMP_WAIT_POLICY=passive: still 15%).
static float *fold_a(const mm_operand *A, size_t M, size_t K, size_t *ld_out) {
    size_t bk, nb = nblocks_of(A, K, &bk);
    float *t = malloc(M * K * sizeof *t);
    if (!t) return NULL;
    const float *x = A->x, *s = A->scales;
    const size_t ld = A->ld;
    if (!A->trans) {
        for (size_t i = 0; i < M; i++)
            for (size_t g = 0, k0 = 0; g < nb; g++, k0 += bk) {
                const float sg = s[i * nb + g];
                const size_t k1 = k0 + bk < K ? k0 + bk : K;
                for (size_t k = k0; k < k1; k++) t[i * K + k] = x[i * ld + k] * sg;
            }
        *ld_out = K;
    } else {  // stored K x M
        for (size_t k = 0; k < K; k++) {
            const size_t g = k / bk;
            for (size_t i = 0; i < M; i++) t[k * M + i] = x[k * ld + i] * s[i * nb + g];
        }
        *ld_out = M;
    }
    return t;
}

static float *fold_b(const mm_operand *B, size_t N, size_t K, size_t *ld_out) {
    size_t bk, nb = nblocks_of(B, K, &bk);
    float *t = malloc(N * K * sizeof *t);
    if (!t) return NULL;
    const float *x = B->x, *s = B->scales;
    const size_t ld = B->ld;
    if (!B->trans) {  // stored K x N
        for (size_t k = 0; k < K; k++) {
            const float *sk = s + (k / bk) * N;
            for (size_t j = 0; j < N; j++) t[k * N + j] = x[k * ld + j] * sk[j];
        }
        *ld_out = N;
    } else {  // stored N x K
        for (size_t j = 0; j < N; j++)
            for (size_t g = 0, k0 = 0; g < nb; g++, k0 += bk) {
                const float sg = s[g * N + j];
                const size_t k1 = k0 + bk < K ? k0 + bk : K;
                for (size_t k = k0; k < k1; k++) t[j * K + k] = x[j * ld + k] * sg;
            }
        *ld_out = K;
    }
    return t;
}

static int mm_cpu_fp32(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                       size_t N, size_t K, const mm_opts *o) {
    const float alpha = fl32_prod3(o->alpha, tscale(A), tscale(B)), beta = o->beta;
    size_t lda = A->ld, ldb = B->ld;
    float *fa = A->scales ? fold_a(A, M, K, &lda) : NULL;
    float *fb = B->scales ? fold_b(B, N, K, &ldb) : NULL;
    if ((A->scales && !fa) || (B->scales && !fb)) {
        free(fa), free(fb);
        return MM_ENOMEM;
    }
    const float *a = fa ? fa : A->x, *b = fb ? fb : B->x;
#ifdef FPLAB_HAVE_BLAS
    cblas_sgemm(CblasRowMajor, A->trans ? CblasTrans : CblasNoTrans,
                B->trans ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, a, (int)lda, b,
                (int)ldb, beta, C, (int)ldc);
#else
    // Without a BLAS: a plain loop in the same float32 arithmetic (slow, same bound).
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        float acc[N ? N : 1];
        for (size_t j = 0; j < N; j++) acc[j] = 0.0f;
        for (size_t k = 0; k < K; k++) {
            const float aik = A->trans ? a[k * lda + i] : a[i * lda + k];
            for (size_t j = 0; j < N; j++) acc[j] += aik * (B->trans ? b[j * ldb + k] : b[k * ldb + j]);
        }
        for (size_t j = 0; j < N; j++) c[j] = alpha * acc[j] + (beta != 0.0f ? beta * c[j] : 0.0f);
    }
#endif
    free(fa), free(fb);
    return round_output(C, ldc, M, N, o);
}

// --- emulated accumulators

enum { MR = 4, NR = 8 };  // accumulators of one tile: MR rows of op(A) x NR columns of op(B)

// One step s = round_acc(s + p) for a float64 s holding an accumulator value and an exact
// product p. s + p may need more than 53 bits: TwoSum gives hi + lo exactly, hi is rounded to
// odd with lo (if inexact and even, step one ulp toward lo), and rounding that to the
// accumulator's p <= 24 bits gives the correctly rounded sum in any mode (Boldo & Melquiond,
// "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd").
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

typedef struct {
    const double *ad;  // op(A) as double, (Mp x K) row-major, Mp = M rounded up to MR, zero-padded
    const double *bp;  // op(B) as double in panels of NR columns: (N/NR, K, NR), zero-padded
    const size_t *seg; // segment starts, nseg + 1 entries (last = K)
    const size_t *sga, *sgb;  // the segment's K-block in A's and in B's scales
    size_t nseg, M, N, K;
    const float *sa, *sb;  // block scales or NULL
    size_t nba, nbb;       // blocks per row of sa, per column of sb
    float ab;              // fl32(alpha * ta * tb)
    float beta;
    fmt__kparams k;
} emu_job;

// One MR x NR tile of C at (i0, j0): every accumulator follows the header's definition; lanes
// are independent, so the compiler may run them in vector registers.
static inline __attribute__((always_inline)) void
emu_tile(const emu_job *J, const fmt_round_mode mode, float *C, size_t ldc, size_t i0, size_t jp) {
    const size_t K = J->K, j0 = jp * NR;
    const double *bpan = J->bp + jp * K * NR;
    float tot[MR][NR];
    for (int r = 0; r < MR; r++)
        for (int l = 0; l < NR; l++) tot[r][l] = 0.0f;
    for (size_t sg = 0; sg < J->nseg; sg++) {
        double s[MR][NR];
        for (int r = 0; r < MR; r++)
            for (int l = 0; l < NR; l++) s[r][l] = 0.0;
        for (size_t kk = J->seg[sg]; kk < J->seg[sg + 1]; kk++) {
            const double *bk = bpan + kk * NR;
            for (int r = 0; r < MR; r++) {
                const double a = J->ad[(i0 + r) * K + kk];
                for (int l = 0; l < NR; l++) s[r][l] = acc_step(&J->k, mode, s[r][l], a * bk[l]);
            }
        }
        // total = fl32(total + fl32(s * fl32(sa * sb))): s is an accumulator value, exact in float.
        const size_t ga = J->sga[sg], gb = J->sgb[sg];
        for (int r = 0; r < MR; r++) {
            const size_t i = i0 + r < J->M ? i0 + r : J->M - 1;
            const float sa = J->sa ? J->sa[i * J->nba + ga] : 1.0f;
            for (int l = 0; l < NR; l++) {
                const size_t j = j0 + l < J->N ? j0 + l : J->N - 1;
                const float sb = J->sb ? J->sb[gb * J->N + j] : 1.0f;
                const float sc = sa * sb;
                const float part = (float)s[r][l] * sc;
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

static inline __attribute__((always_inline)) void
emu_run(const emu_job *J, const fmt_round_mode mode, float *C, size_t ldc) {
    const size_t nrb = (J->M + MR - 1) / MR, npan = (J->N + NR - 1) / NR;
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < nrb * npan; t++) emu_tile(J, mode, C, ldc, (t / npan) * MR, t % npan);
}

static int mm_cpu_emulated(float *C, size_t ldc, const mm_operand *A, const mm_operand *B,
                           size_t M, size_t N, size_t K, const mm_opts *o) {
    if (o->acc.mode == FMT_SR) return MM_EUNSUPPORTED;  // no draw order is defined for it
    emu_job J = {.M = M, .N = N, .K = K, .sa = A->scales, .sb = B->scales, .beta = o->beta};
    J.ab = fl32_prod3(o->alpha, tscale(A), tscale(B));
    // The accumulator rounds with its mode and IEEE overflow (inf, or max toward zero).
    const fmt_round_opts ao = {.mode = o->acc.mode, .overflow = FMT_OVERFLOW_IEEE};
    fmt_rounder acc;
    if (fmt_rounder_make(&acc, &o->acc.fmt, &ao) != FMT_OK) return MM_EINVAL;
    J.k = acc.k;

    // Segments: end at every K-block boundary of either operand's scales and after every
    // promote_every products counted from the segment's block start.
    size_t bka, bkb;
    J.nba = nblocks_of(A, K, &bka), J.nbb = nblocks_of(B, K, &bkb);
    const size_t pe = o->acc.promote_every > 0 ? (size_t)o->acc.promote_every : 0;
    size_t *seg = malloc((K + 1) * sizeof *seg), *sga = malloc(K * sizeof *sga), *sgb = malloc(K * sizeof *sgb);
    const size_t Mp = (M + MR - 1) / MR * MR, npan = (N + NR - 1) / NR;
    double *ad = malloc(Mp * K * sizeof *ad), *bp = malloc(npan * NR * K * sizeof *bp);
    if (!seg || !sga || !sgb || !ad || !bp) {
        free(seg), free(sga), free(sgb), free(ad), free(bp);
        return MM_ENOMEM;
    }
    // A segment starts at k = 0, at every multiple of a scaled operand's block_k, and every
    // promote_every products after the last of those.
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

#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < Mp; i++)
        for (size_t k = 0; k < K; k++) ad[i * K + k] = i < M ? (double)a_at(A, i, k) : 0.0;
#pragma omp parallel for schedule(static)
    for (size_t jp = 0; jp < npan; jp++)
        for (size_t k = 0; k < K; k++)
            for (size_t l = 0; l < NR; l++) {
                const size_t j = jp * NR + l;
                bp[(jp * K + k) * NR + l] = j < N ? (double)b_at(B, k, j) : 0.0;
            }
    J.ad = ad, J.bp = bp;

    switch (acc.mode) {
    case FMT_RNE: emu_run(&J, FMT_RNE, C, ldc); break;
    case FMT_RNA: emu_run(&J, FMT_RNA, C, ldc); break;
    case FMT_RTZ: emu_run(&J, FMT_RTZ, C, ldc); break;
    case FMT_RUP: emu_run(&J, FMT_RUP, C, ldc); break;
    case FMT_RDN: emu_run(&J, FMT_RDN, C, ldc); break;
    case FMT_RTO: emu_run(&J, FMT_RTO, C, ldc); break;
    default: break;
    }
    free(seg), free(sga), free(sgb), free(ad), free(bp);
    return round_output(C, ldc, M, N, o);
}

// --- entry point

int mm_cpu(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
           size_t K, const mm_opts *o) {
    char msg[256];
    const int st = mm_validate(A, B, M, N, K, o, msg, sizeof msg);
    if (st != MM_OK) return st;
    if (M == 0 || N == 0) return MM_OK;
    if (K == 0) {  // C = round_out(fl32(beta * C)), or 0 (C is not read when beta == 0)
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++) {
                float *c = C + i * ldc + j;
                *c = o->beta != 0.0f ? o->beta * *c : 0.0f;
            }
        return round_output(C, ldc, M, N, o);
    }
    return mm_acc_is_emulated(&o->acc) ? mm_cpu_emulated(C, ldc, A, B, M, N, K, o)
                                       : mm_cpu_fp32(C, ldc, A, B, M, N, K, o);
}
