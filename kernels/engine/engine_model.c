// engine_model.c: the instruction arithmetic of the matrix engines (engine.h), one dot product
// at a time, exactly: the reference that tests/test_engine.c holds to MMA-Sim's fixtures and
// that the fast kernels (scaled_mm_cpu_engine.c) are held to.
// Exactness: every value is a double. A product of two operands (at most 24 significant bits
// each) is exact; an aligned term is an integer multiple of 2^(maxe - frac) below 2^(frac + 12),
// so terms and their sums are exact integers in an int64 (and in a double's 53 bits).
// Constraints: no MPFR, no global state; runs under the default rounding mode (the C casts
// double -> float below round to nearest-even, as the engines' final conversions do).
// Compiled twice from this one source: for the library, and for the CUDA device by
// kernels/cuda/scaled_mm_dev_kernels.cuh (one dot product per thread), which #includes this file
// with MM_ENGINE_MODEL_COPY defined: every function is FMT_HD (empty in C), the entry points are
// MM_ENGINE_API (the copy makes them static and renames them) and the copy supplies type_emin.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/engine.h"
#include "kernels/scaled_mm_internal.h"  // mm__engine_dot_fault

#ifndef MM_ENGINE_API
#define MM_ENGINE_API
#endif

// --- operands

// The exponent of the smallest normal value of type t (a subnormal's exponent), from the
// format table (mm_engine_type_format).
#ifndef MM_ENGINE_MODEL_COPY
static int type_emin(unsigned t) {
    const fmt_t *f = mm_engine_type_format(t);
    return f ? f->emin : -126;
}
#endif

// x = *sig * 2^e with e = max(floor(log2 |x|), emin) (so |sig| < 1 for a subnormal); a zero has
// e = -126 whatever its type, as the hardware's models place it.
FMT_HD static int sig_exp(double x, int emin, double *sig) {
    if (x == 0.0) {
        *sig = 0.0;
        return -126;
    }
    int e = ilogb(x);
    if (e < emin) e = emin;
    *sig = ldexp(x, -e);
    return e;
}

// float32 with its 13 low fraction bits cleared (tf32 inputs: truncated, not rounded).
FMT_HD static double tf32_trunc(double x) {
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    u &= ~0x1fffu;
    memcpy(&f, &u, 4);
    return f;
}

FMT_HD static bool is_tf32_kind(const mm_engine_kind *q) { return (q->types & MM_ET_TF32) && !(q->types & MM_ET_F32); }

MM_ENGINE_API FMT_HD double mm_engine_operand(float x, unsigned t) {
    if (t != MM_ET_TF32) return x;
    // The register's top 19 bits, before any conversion: a float -> double conversion would
    // quiet a signalling NaN and keep its payload, which truncation then could not tell apart.
    uint32_t u;
    memcpy(&u, &x, 4);
    u &= ~0x1fffu;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// --- the fused sum: terms aligned to the largest exponent, truncated, summed

typedef struct {
    double sig[72];  // significands (products of significands, group sums times scales)
    int exp[72];
    int n;
} terms;

FMT_HD static void add_term(terms *t, double sig, int e) {
    t->sig[t->n] = sig, t->exp[t->n] = e, t->n++;
}

// Sum of the terms, each truncated toward zero to frac fractional bits below 2^maxe, where maxe
// is their largest exponent: *maxe_out = maxe, the result is S * 2^(maxe - frac) for the
// integer S returned (exact in double).
FMT_HD static double fused_sum(const terms *t, int frac, int *maxe_out) {
    int maxe = t->exp[0];
    for (int i = 1; i < t->n; i++)
        if (t->exp[i] > maxe) maxe = t->exp[i];
    int64_t s = 0;
    for (int i = 0; i < t->n; i++) s += (int64_t)trunc(ldexp(t->sig[i], frac + t->exp[i] - maxe));
    *maxe_out = maxe;
    return (double)s;
}

// --- NVIDIA outputs

static const double F32_BIG = 0x1p128, F16_BIG = 65504.0;

// Every zero D of the fused family is +0: an exactly zero sum, and a nonzero sum (negative
// too) that rounds to zero in D. What the hardware gives for a negative sum too small for D is
// not documented (PTX ISA, MMA-Sim's paper); this is MMA-Sim's model, whose rounding steps
// yield integers without a sign of zero (docs/engines.md, "Signs of zero").
FMT_HD static double nv_zero_plus(double r) { return r == 0.0 ? 0.0 : r; }

// v toward zero to float32's exponent range with out_frac fraction bits (or to nearest-even
// under the RNE fault); overflow (|v| >= 2^128) gives inf.
FMT_HD static double nv_out_f32(double v, int out_frac, int fault) {
    if (v == 0.0) return 0.0;
    int e = ilogb(v);
    if (e < -126) e = -126;
    const double q = ldexp(v, out_frac - e);
    const double r = ldexp(fault == MM__EFAULT_RNE ? nearbyint(q) : trunc(q), e - out_frac);
    return fabs(r) >= F32_BIG ? copysign(INFINITY, r) : nv_zero_plus(r);
}

// v to nearest-even fp16 (10 fraction bits, exponents from -14), inf above the largest.
FMT_HD static double nv_out_f16(double v) {
    if (v == 0.0) return 0.0;
    int e = ilogb(v);
    if (e < -14) e = -14;
    const double r = ldexp(nearbyint(ldexp(v, 10 - e)), e - 10);
    return fabs(r) > F16_BIG ? copysign(INFINITY, r) : nv_zero_plus(r);
}

// The canonical NaN of an NVIDIA D: float32 0x7fffffff or fp16 0x7fff, as a double whose
// conversion keeps those bits (the payload's top bits all ones).
FMT_HD static double nv_nan(void) {
    const uint64_t u = 0x7fffffffe0000000ull;
    double d;
    memcpy(&d, &u, 8);
    return d;
}

// One NVIDIA fused instruction over n products (sa, sb: the scales of mxf8f6f4, or NULL).
FMT_HD static double nv_fused(const mm_engine_kind *q, bool f16_out, unsigned ta, unsigned tb, const double *a,
                       const double *b, const double *sa, const double *sb, double c, size_t n, int fault) {
    const double s_a = sa ? sa[0] : 1.0, s_b = sb ? sb[0] : 1.0;
    // Special values: the exact sum in double (no finite product overflows it) says NaN or inf.
    double t = c;
    for (size_t i = 0; i < n; i++) t += a[i] * b[i] * s_a * s_b;
    if (isnan(t)) return nv_nan();
    if (isinf(t)) return t;

    terms T = {.n = 0};
    double sg;
    int e = sig_exp(c, f16_out ? -14 : -126, &sg);
    add_term(&T, sg, e);
    double ssa = 1.0, ssb = 1.0;
    const int esa = sa ? sig_exp(s_a, -127, &ssa) : 0, esb = sb ? sig_exp(s_b, -127, &ssb) : 0;
    const int mina = type_emin(ta), minb = type_emin(tb);
    for (size_t i = 0; i < n; i++) {
        double x, y;
        const int ea = sig_exp(a[i], mina, &x), eb = sig_exp(b[i], minb, &y);
        add_term(&T, x * y, ea + eb + esa + esb);
    }
    int maxe;
    const int frac = q->frac - (fault == MM__EFAULT_FRAC);
    const double S = fused_sum(&T, frac, &maxe), v = ldexp(S, maxe - frac);
    return f16_out ? nv_out_f16(v) : nv_out_f32(v, q->out_frac, fault);
}

// One mxf4nvf4 instruction: exact sums of groups of q->group products, each times its two
// scales, aligned by the scales' exponents (ue4m3 scales by their absolute values).
FMT_HD static double nv_fp4(const mm_engine_kind *q, const double *a, const double *b, const double *sa,
                     const double *sb, double c, size_t n, int fault) {
    const size_t nsc = n / (size_t)q->block;
    for (size_t g = 0; g < nsc; g++)
        if (isnan(sa[g]) || isnan(sb[g])) return nv_nan();
    if (isnan(c)) return nv_nan();
    if (isinf(c)) return c;  // the products are finite; MMA-Sim itself stops on this input
    terms T = {.n = 0};
    double sg;
    int e = sig_exp(c, -126, &sg);
    add_term(&T, sg, e);
    const int semin = q->ue4m3_scales ? -6 : -127;
    for (size_t k0 = 0; k0 < n; k0 += (size_t)q->group) {
        double s = 0.0;  // exact: fp4 products are multiples of 1/4 below 37
        for (size_t k = k0; k < k0 + (size_t)q->group; k++) s += a[k] * b[k];
        const size_t g = k0 / (size_t)q->block;
        double s0, s1;
        const int e0 = sig_exp(fabs(sa[g]), semin, &s0), e1 = sig_exp(fabs(sb[g]), semin, &s1);
        add_term(&T, s * s0 * s1, e0 + e1);
    }
    int maxe;
    const int frac = q->frac - (fault == MM__EFAULT_FRAC);
    const double S = fused_sum(&T, frac, &maxe);
    return nv_out_f32(ldexp(S, maxe - frac), 23, fault);
}

// --- AMD

// Balanced binary tree of float32 products (leaves fmaf(a, b, 0), nodes rounded additions),
// each node flushed to a signed zero below 2^-126 when flush.
FMT_HD static float pairwise(const double *a, const double *b, size_t n, bool flush) {
    float s;
    if (n == 1) {
        s = fmaf((float)a[0], (float)b[0], 0.0f);
    } else {
        const size_t m = n / 2;
        s = fmaf(pairwise(a, b, m, flush), 1.0f, pairwise(a + m, b + m, n - m, flush));
    }
    if (flush && fabsf(s) < 0x1p-126f) s *= 0.0f;
    return s;
}

// s * 2^-drop rounded down to bits fractional bits: s at an exponent drop binades higher.
FMT_HD static double floor_at(double s, int bits, int drop) { return ldexp(floor(ldexp(s, bits - drop)), -bits); }

// One CDNA3-style fused group with accumulator c (float32): see engine.h.
FMT_HD static double amd_fused(const mm_engine_kind *q, unsigned ta, unsigned tb, const double *a, const double *b,
                        double c, size_t n, int fault) {
    double t = c;
    for (size_t i = 0; i < n; i++) t += a[i] * b[i];
    if (isnan(t) || isinf(t)) return (float)t;
    bool pinf = false, ninf = false;
    for (size_t i = 0; i < n; i++) {
        const double p = a[i] * b[i];
        pinf |= p >= 0x1p128, ninf |= p <= -0x1p128;
    }
    if (pinf || ninf) return pinf && ninf ? NAN : pinf ? INFINITY : -INFINITY;

    const int frac = q->frac - (fault == MM__EFAULT_FRAC);
    terms T[2] = {{.n = 0}, {.n = 0}};
    const int mina = type_emin(ta), minb = type_emin(tb);
    for (size_t i = 0; i < n; i++) {
        double x, y;
        const int ea = sig_exp(a[i], mina, &x), eb = sig_exp(b[i], minb, &y);
        add_term(&T[q->two_stage ? i % 2 : 0], x * y, ea + eb);
    }
    double sc;
    const int ec = sig_exp(c, -126, &sc);
    double s;
    int e;
    if (q->two_stage) {
        int e0, e1;
        double s0 = ldexp(fused_sum(&T[0], frac, &e0), -frac), s1 = ldexp(fused_sum(&T[1], frac, &e1), -frac);
        e = e0 > e1 ? e0 : e1;
        s = floor_at(s0, frac, e - e0) + floor_at(s1, frac, e - e1);
    } else {
        s = ldexp(fused_sum(&T[0], frac, &e), -frac);
    }
    const int maxe = e > ec ? e : ec;
    s = floor_at(s, 31, maxe - e);
    if (q->two_stage && ec < maxe - 25) sc = 0.0;
    else sc = floor_at(sc, 24, maxe - ec);
    const double v = ldexp(s + sc, maxe);
    // The fault for AMD: D toward zero instead of to nearest.
    return fault == MM__EFAULT_RNE ? nv_out_f32(v, 23, MM__EFAULT_NONE) : (double)(float)v;
}

// --- one instruction and the chain

// x flushed to +0 below the smallest normal min (2^emin of its type).
FMT_HD static double flush_in(double x, double min) { return fabs(x) < min ? 0.0 : x; }

MM_ENGINE_API FMT_HD double mm__engine_dot_fault(const mm_engine_kind *q, bool f16_out, unsigned ta,
                                                 unsigned tb, const double *a, const double *b, const double *sa,
                                                 const double *sb, double c, size_t K, int fault) {
    double ab[2][64];
    const size_t unit = (size_t)(q->k / q->split);  // products per fused step
    for (size_t k0 = 0; k0 < K; k0 += unit) {
        const size_t n = K - k0 < unit ? K - k0 : unit;
        const double *x = a + k0, *y = b + k0;
        if (is_tf32_kind(q) || q->flush) {
            const double mina = ldexp(1.0, type_emin(ta)), minb = ldexp(1.0, type_emin(tb));
            for (size_t i = 0; i < n; i++) {
                ab[0][i] = is_tf32_kind(q) ? tf32_trunc(x[i]) : flush_in(x[i], mina);
                ab[1][i] = is_tf32_kind(q) ? tf32_trunc(y[i]) : flush_in(y[i], minb);
            }
            x = ab[0], y = ab[1];
        }
        switch (q->op) {
        case MM_EOP_FUSED:
            if (q->block && q->group)
                c = nv_fp4(q, x, y, sa + k0 / (size_t)q->block, sb + k0 / (size_t)q->block, c, n, fault);
            else
                c = nv_fused(q, f16_out, ta, tb, x, y, q->block ? sa + k0 / (size_t)q->block : NULL,
                             q->block ? sb + k0 / (size_t)q->block : NULL, c, n, fault);
            break;
        case MM_EOP_FMA:
            // The fault: a rounded product, then a rounded addition.
            for (size_t i = 0; i < n; i++)
                if (ta == MM_ET_F64) c = fault ? x[i] * y[i] + c : fma(x[i], y[i], c);
                else c = fault ? (double)((float)((float)x[i] * (float)y[i]) + (float)c)
                               : (double)fmaf((float)x[i], (float)y[i], (float)c);
            break;
        case MM_EOP_PAIRWISE: {
            // The instruction's C is flushed to +0 (a signed zero too); the groups' sums join it
            // in order.
            // The fault: groups of one (a sequential sum, no tree).
            float acc = q->flush && fabs(c) < 0x1p-126 ? 0.0f : (float)c;
            const size_t grp = fault ? 1 : (size_t)q->group;
            for (size_t g = 0; g < n; g += grp) {
                const size_t m = n - g < grp ? n - g : grp;
                acc = acc + pairwise(x + g, y + g, m, q->flush);
                if (q->flush && fabsf(acc) < 0x1p-126f) acc *= 0.0f;
            }
            c = acc;
            break;
        }
        case MM_EOP_AMD_FUSED:
            for (size_t g = 0; g < n; g += (size_t)q->group) {
                const size_t m = n - g < (size_t)q->group ? n - g : (size_t)q->group;
                c = amd_fused(q, ta, tb, x + g, y + g, c, m, fault);
            }
            break;
        }
    }
    return c;
}

MM_ENGINE_API FMT_HD double mm_engine_dot(const mm_engine_kind *q, bool f16_out, unsigned ta, unsigned tb,
                                         const double *a, const double *b, const double *sa, const double *sb,
                                         double c, size_t K) {
    return mm__engine_dot_fault(q, f16_out, ta, tb, a, b, sa, sb, c, K, MM__EFAULT_NONE);
}
