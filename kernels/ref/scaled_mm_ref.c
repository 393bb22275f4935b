// scaled_mm_ref.c: the MPFR ground truth of scaled_mm.h (mm_ref, mm_ref_exact).
// Constraints: MPFR only in *_ref.c files; slow (MPFR per product) and meant for tests and the
// verifier; no global state (MPFR's exponent range is widened per thread and restored).
// Overwrites C (=); reads C only when beta != 0.
//
// float32 accumulation: every C[i,j] is computed exactly and rounded once.
// - Exactness by span: a value is exact in MPFR when the precision covers the bits between its
//   highest and lowest set bit. Every float is m 2^e with m < 2^24, lowest bit >= 2^-149, so a
//   product a*b has bits in [2^-298, 2^256): a block sum of K products needs 555 + log2 K bits
//   (MM_PREC_BLOCK = 640: exact for K < 2^84). A block term sa*sb*P_g adds 48 bits and the
//   scales' range, alpha*ta*tb 72 bits: the whole formula lies in [2^-1043, K G 2^896), so
//   MM_PREC_TOTAL = 2304 is exact for K < 2^180. Every MPFR ternary value is checked anyway.
// - One rounding: the exact value E is rounded to a double with round-to-odd (truncate, set the
//   last bit if inexact), then fmt_ref_round rounds that double to the output format. Rounding
//   to odd at 53 bits and then to a format of p <= 24 <= 51 bits equals rounding E directly, in
//   every deterministic mode (Boldo & Melquiond), and the output formats' subnormal grids
//   (quantum >= 2^-149) are far coarser than a double's. Stochastic output rounding uses the
//   fast path fmt_round1 on that double, drawing index out_round.offset + i*N + j.
// - NaN and inf follow IEEE arithmetic in MPFR: NaN anywhere gives NaN, inf * 0 gives NaN,
//   inf - inf gives NaN, otherwise an inf sum is inf.
//
// Emulated accumulators follow scaled_mm.h step by step:
// - round_acc(s + a*b): the sum is formed exactly in MPFR (640 bits) and rounded onto the
//   accumulator's grid (precision mbits+1, subnormals kept, unbounded exponent) in its mode:
//   scale by 2^-q (q: the grid's quantum at that magnitude), round to an integer, scale back.
//   Overflow is judged on the rounded value against the format's max with the IEEE policy and
//   the mode (nearest: inf; toward zero and to-odd: max; up/down by the sign); a format without
//   inf gives NaN. Saturation is not what an accumulator does, so it is not offered. This is
//   fmt_ref_round(acc.fmt, s + a*b, mode, FMT_OVERFLOW_IEEE, false) on the exact sum.
// - Segments: for each K-block [g*bk, min((g+1)*bk, K)) (bk: the block_k of the operands with
//   scales; one block when none), chunks of promote_every products counted from the block's
//   start (the last chunk of a block may be shorter): mm__seg_end, which every backend walks.
// - fl32 steps are float arithmetic (FLT_EVAL_METHOD 0, no contraction); fl32(alpha ta tb)
//   is the exact triple product rounded once to float32 (round-to-odd double, then float).
#include "kernels/scaled_mm.h"

#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <string.h>

#include "formats/round_ref.h"
#include "kernels/scaled_mm_internal.h"

enum { MM_PREC_BLOCK = 640, MM_PREC_TOTAL = 2304 };

// --- what a call reads: element, scale and block lookups

typedef struct {
    const mm_operand *A, *B;
    size_t M, N, K;
    size_t bk;          // K-block length; K when no operand has blocks
    size_t nbA, nbB;    // blocks in each operand's scale array (1 without blocks)
    float ta, tb;       // tensor scales, 0 read as 1
} mm__call;

static void mm__call_make(mm__call *c, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                          size_t K) {
    c->A = A, c->B = B, c->M = M, c->N = N, c->K = K;
    const size_t bka = A->scales && A->block_k > 0 ? (size_t)A->block_k : 0;
    const size_t bkb = B->scales && B->block_k > 0 ? (size_t)B->block_k : 0;
    const size_t bk = bka > bkb ? bka : bkb;  // equal when both are set (mm_validate)
    c->bk = bk ? bk : K;
    c->nbA = bka ? (K + bka - 1) / bka : 1;
    c->nbB = bkb ? (K + bkb - 1) / bkb : 1;
    c->ta = A->tensor_scale == 0 ? 1.0f : A->tensor_scale;
    c->tb = B->tensor_scale == 0 ? 1.0f : B->tensor_scale;
}

static inline float mm__a(const mm__call *c, size_t i, size_t k) {
    const mm_operand *A = c->A;
    return A->trans ? A->x[k * A->ld + i] : A->x[i * A->ld + k];
}
static inline float mm__b(const mm__call *c, size_t k, size_t j) {
    const mm_operand *B = c->B;
    return B->trans ? B->x[j * B->ld + k] : B->x[k * B->ld + j];
}
// Scales of the block holding k: A's are (M, nbA) row-major, B's (nbB, N).
static inline float mm__sa(const mm__call *c, size_t i, size_t k) {
    if (!c->A->scales) return 1.0f;
    const size_t g = c->nbA > 1 ? k / (size_t)c->A->block_k : 0;
    return c->A->scales[i * c->nbA + g];
}
static inline float mm__sb(const mm__call *c, size_t k, size_t j) {
    if (!c->B->scales) return 1.0f;
    const size_t g = c->nbB > 1 ? k / (size_t)c->B->block_k : 0;
    return c->B->scales[g * c->N + j];
}

// --- MPFR helpers

// x rounded to a double with round-to-odd: truncate, and set the last bit if inexact.
static double mm__get_d_odd(const mpfr_t x) {
    if (mpfr_nan_p(x)) return NAN;
    double d = mpfr_get_d(x, MPFR_RNDZ);
    if (mpfr_inf_p(x) || mpfr_cmp_d(x, d) == 0) return d;
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    u |= 1;
    memcpy(&d, &u, sizeof d);
    return d;
}

// The final rounding to the output format; idx = i*N + j for stochastic rounding.
static float mm__round_out(const mm_opts *o, double x, size_t idx) {
    if (o->out_round.mode == FMT_SR) {
        fmt_round_opts r = o->out_round;
        r.offset += idx;
        return (float)fmt_round1(&o->out_fmt, x, &r);
    }
    return (float)fmt_ref_round(&o->out_fmt, x, o->out_round.mode, o->out_round.overflow,
                                o->out_round.flush_subnormals);
}

// The exact value x (clobbered) rounded onto f's grid in mode, IEEE overflow, subnormals kept:
// see the file comment. f is signed with zero, NaN and mbits >= 1 (mm_validate).
static float mm__acc_round(mpfr_t x, const fmt_t *f, fmt_round_mode mode) {
    if (mpfr_nan_p(x)) return NAN;
    const bool neg = mpfr_signbit(x) != 0;
    if (mpfr_inf_p(x)) return f->has_inf ? (neg ? -INFINITY : INFINITY) : NAN;
    const float zero = neg && f->has_negzero ? -0.0f : 0.0f;
    if (mpfr_zero_p(x)) return zero;
    const long e = (long)mpfr_get_exp(x) - 1;             // x = 1.f * 2^e
    const long q = (e > f->emin ? e : f->emin) - f->mbits;  // the grid's quantum is 2^q
    mpfr_mul_2si(x, x, -q, MPFR_RNDN);                     // exact: scaling by a power of two
    int inex = 0;
    switch (mode) {
    case FMT_RNE: mpfr_roundeven(x, x); break;
    case FMT_RNA: mpfr_round(x, x); break;
    case FMT_RUP: mpfr_ceil(x, x); break;
    case FMT_RDN: mpfr_floor(x, x); break;
    default: inex = mpfr_trunc(x, x); break;  // FMT_RTZ, FMT_RTO
    }
    long n = mpfr_get_si(x, MPFR_RNDN);  // |n| <= 2^(mbits+1) <= 2^24: exact
    if (mode == FMT_RTO && inex != 0 && (n & 1) == 0) n += neg ? -1 : 1;
    if (n == 0) return zero;
    const double v = ldexp((double)n, (int)q);  // q <= 257 + log2: within double's range
    if (fabs(v) > f->max) {
        bool to_inf = true;
        if (mode == FMT_RTZ || mode == FMT_RTO) to_inf = false;
        if (mode == FMT_RUP) to_inf = !neg;
        if (mode == FMT_RDN) to_inf = neg;
        const float mag = !to_inf ? (float)f->max : f->has_inf ? INFINITY : NAN;
        return neg ? -mag : mag;
    }
    return (float)v;  // a value of f, which embeds in float32
}

// --- per-thread workspace

typedef struct {
    mpfr_t a, b, sa, sb;  // 24-bit inputs
    mpfr_t p, s2, bc;     // 48-bit products: a*b, sa*sb, beta*C
    mpfr_t abt, abt_abs;  // alpha*ta*tb and its magnitude, 72 bits
    mpfr_t blk, blk_abs;  // block sums (MM_PREC_BLOCK)
    mpfr_t tot, tot_abs;  // the whole formula (MM_PREC_TOTAL)
    mpfr_t x;             // emulated: s + a*b (MM_PREC_BLOCK)
    mpfr_t s;             // emulated: the accumulator (24 bits)
    int inexact;          // OR of the ternary values of operations that must be exact
    mpfr_exp_t emin, emax;
} mm__ws;

static void mm__ws_init(mm__ws *w) {
    w->emin = mpfr_get_emin(), w->emax = mpfr_get_emax();
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    mpfr_inits2(24, w->a, w->b, w->sa, w->sb, w->s, (mpfr_ptr)0);
    mpfr_inits2(48, w->p, w->s2, w->bc, (mpfr_ptr)0);
    mpfr_inits2(72, w->abt, w->abt_abs, (mpfr_ptr)0);
    mpfr_inits2(MM_PREC_BLOCK, w->blk, w->blk_abs, w->x, (mpfr_ptr)0);
    mpfr_inits2(MM_PREC_TOTAL, w->tot, w->tot_abs, (mpfr_ptr)0);
    w->inexact = 0;
}

static void mm__ws_clear(mm__ws *w) {
    mpfr_clears(w->a, w->b, w->sa, w->sb, w->s, w->p, w->s2, w->bc, w->abt, w->abt_abs, w->blk, w->blk_abs,
                w->x, w->tot, w->tot_abs, (mpfr_ptr)0);
    mpfr_set_emin(w->emin);
    mpfr_set_emax(w->emax);
}

// w->abt = alpha * ta * tb, exactly.
static void mm__abt(mm__ws *w, const mm__call *c, float alpha) {
    mpfr_set_flt(w->a, alpha, MPFR_RNDN);
    mpfr_set_flt(w->b, c->ta, MPFR_RNDN);
    w->inexact |= mpfr_mul(w->abt, w->a, w->b, MPFR_RNDN);
    mpfr_set_flt(w->b, c->tb, MPFR_RNDN);
    w->inexact |= mpfr_mul(w->abt, w->abt, w->b, MPFR_RNDN);
}

// w->tot = the exact formula for C[i,j] (w->abt set); with want_abs, w->tot_abs = its absdot.
// cij: C[i,j], read only when beta != 0.
static void mm__exact1(mm__ws *w, const mm__call *c, const mm_opts *o, size_t i, size_t j,
                       const float *cij, bool want_abs) {
    mpfr_set_zero(w->tot, 1);
    if (want_abs) mpfr_set_zero(w->tot_abs, 1);
    for (size_t k0 = 0; k0 < c->K; k0 += c->bk) {
        const size_t k1 = k0 + c->bk < c->K ? k0 + c->bk : c->K;
        mpfr_set_zero(w->blk, 1);
        if (want_abs) mpfr_set_zero(w->blk_abs, 1);
        for (size_t k = k0; k < k1; k++) {
            mpfr_set_flt(w->a, mm__a(c, i, k), MPFR_RNDN);
            mpfr_set_flt(w->b, mm__b(c, k, j), MPFR_RNDN);
            w->inexact |= mpfr_mul(w->p, w->a, w->b, MPFR_RNDN);
            w->inexact |= mpfr_add(w->blk, w->blk, w->p, MPFR_RNDN);
            if (want_abs) {
                mpfr_abs(w->p, w->p, MPFR_RNDN);
                w->inexact |= mpfr_add(w->blk_abs, w->blk_abs, w->p, MPFR_RNDN);
            }
        }
        mpfr_set_flt(w->sa, mm__sa(c, i, k0), MPFR_RNDN);
        mpfr_set_flt(w->sb, mm__sb(c, k0, j), MPFR_RNDN);
        w->inexact |= mpfr_mul(w->s2, w->sa, w->sb, MPFR_RNDN);
        w->inexact |= mpfr_fma(w->tot, w->blk, w->s2, w->tot, MPFR_RNDN);
        if (want_abs) {
            mpfr_abs(w->s2, w->s2, MPFR_RNDN);
            w->inexact |= mpfr_fma(w->tot_abs, w->blk_abs, w->s2, w->tot_abs, MPFR_RNDN);
        }
    }
    w->inexact |= mpfr_mul(w->tot, w->tot, w->abt, MPFR_RNDN);
    if (want_abs) {
        mpfr_abs(w->abt_abs, w->abt, MPFR_RNDN);
        w->inexact |= mpfr_mul(w->tot_abs, w->tot_abs, w->abt_abs, MPFR_RNDN);
    }
    if (o->beta != 0) {
        mpfr_set_flt(w->a, o->beta, MPFR_RNDN);
        mpfr_set_flt(w->b, *cij, MPFR_RNDN);
        w->inexact |= mpfr_mul(w->bc, w->a, w->b, MPFR_RNDN);
        w->inexact |= mpfr_add(w->tot, w->tot, w->bc, MPFR_RNDN);
        if (want_abs) {
            mpfr_abs(w->bc, w->bc, MPFR_RNDN);
            w->inexact |= mpfr_add(w->tot_abs, w->tot_abs, w->bc, MPFR_RNDN);
        }
    }
}

// The emulated accumulator's y for C[i,j] (before round_out), step by step as scaled_mm.h
// defines it. abt32 = fl32(alpha ta tb).
static float mm__emulated1(mm__ws *w, const mm__call *c, const mm_opts *o, size_t i, size_t j,
                           const float *cij, float abt32) {
    const fmt_t *acc = &o->acc.fmt;
    const mpfr_rnd_t zero_rnd = o->acc.mode == FMT_RDN ? MPFR_RNDD : MPFR_RNDN;  // sign of 0 only
    float total = 0.0f;
    for (size_t s0 = 0, s1; s0 < c->K; s0 = s1) {
        s1 = mm__seg_end(s0, c->K, c->bk, mm__seg_promote(o));
        const float sab = mm__sa(c, i, s0) * mm__sb(c, s0, j);  // fl32(sa * sb)
        float s = 0.0f;
        for (size_t k = s0; k < s1; k++) {
            mpfr_set_flt(w->s, s, MPFR_RNDN);
            mpfr_set_flt(w->a, mm__a(c, i, k), MPFR_RNDN);
            mpfr_set_flt(w->b, mm__b(c, k, j), MPFR_RNDN);
            w->inexact |= mpfr_mul(w->p, w->a, w->b, MPFR_RNDN);
            w->inexact |= mpfr_add(w->x, w->s, w->p, zero_rnd);
            s = mm__acc_round(w->x, acc, o->acc.mode);
        }
        const float t = s * sab;  // fl32(s * fl32(sa sb))
        total = total + t;
    }
    float y = abt32 * total;
    if (o->beta != 0) {
        const float bc = o->beta * *cij;
        y = y + bc;
    }
    return y;
}

// --- public

int mm_ref(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
           size_t K, const mm_opts *o) {
    if (mm_validate(A, B, M, N, K, o, NULL, 0) != MM_OK || !C || ldc < N) return MM_EINVAL;
    if (o->acc.engine) {  // the engine's model is exact by construction: it is the reference
        const int st = mm__engine_run(C, ldc, A, B, M, N, K, o);
        for (size_t t = 0; st == MM_OK && t < M * N; t++) {
            float *cij = &C[(t / N) * ldc + t % N];
            *cij = mm__round_out(o, *cij, t);
        }
        return st;
    }
    mm__call c;
    mm__call_make(&c, A, B, M, N, K);
    const bool emulated = mm_acc_is_emulated(&o->acc);
    int inexact = 0;
    const size_t MN = M * N;
#pragma omp parallel if (mpfr_buildopt_tls_p() && MN > 1) reduction(| : inexact)
    {
        mm__ws w;
        mm__ws_init(&w);
        mm__abt(&w, &c, o->alpha);
        const float abt32 = (float)mm__get_d_odd(w.abt);  // fl32(alpha ta tb): one rounding
#pragma omp for schedule(static)
        for (size_t t = 0; t < MN; t++) {
            const size_t i = t / N, j = t % N;
            float *cij = &C[i * ldc + j];
            double y;
            if (emulated) {
                y = mm__emulated1(&w, &c, o, i, j, cij, abt32);
            } else {
                mm__exact1(&w, &c, o, i, j, cij, false);
                y = mm__get_d_odd(w.tot);
            }
            *cij = mm__round_out(o, y, t);
        }
        inexact |= w.inexact;
        mm__ws_clear(&w);
    }
    // Every operation above is exact by the span argument of the file comment; an inexact one
    // would mean the reference is wrong, so say so rather than return it.
    return inexact ? MM_EUNSUPPORTED : MM_OK;
}

int mm_ref_exact(double *exact, double *absdot, const float *C_in, size_t ldc,
                 const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                 const mm_opts *o) {
    if (mm_validate(A, B, M, N, K, o, NULL, 0) != MM_OK) return MM_EINVAL;
    if (o->beta != 0 && (!C_in || ldc < N)) return MM_EINVAL;
    mm__call c;
    mm__call_make(&c, A, B, M, N, K);
    int inexact = 0;
    const size_t MN = M * N;
#pragma omp parallel if (mpfr_buildopt_tls_p() && MN > 1) reduction(| : inexact)
    {
        mm__ws w;
        mm__ws_init(&w);
        mm__abt(&w, &c, o->alpha);
#pragma omp for schedule(static)
        for (size_t t = 0; t < MN; t++) {
            const size_t i = t / N, j = t % N;
            mm__exact1(&w, &c, o, i, j, C_in ? &C_in[i * ldc + j] : NULL, absdot != NULL);
            if (exact) exact[t] = mpfr_get_d(w.tot, MPFR_RNDN);
            // Rounded up: the verifier uses it as a bound.
            if (absdot) absdot[t] = mpfr_get_d(w.tot_abs, MPFR_RNDU);
        }
        inexact |= w.inexact;
        mm__ws_clear(&w);
    }
    return inexact ? MM_EUNSUPPORTED : MM_OK;
}
