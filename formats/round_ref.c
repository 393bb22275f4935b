// round_ref.c: MPFR reference rounding and decoding (see round_ref.h).
// Constraints: MPFR only here and in other *_ref.c files; nothing shared with the fast kernels
// but the descriptor. The rounding is MPFR's own: precision mbits+1, emin lowered to the
// exponent of the smallest subnormal plus mpfr_subnormalize for the subnormal grid, and the
// largest emax MPFR allows, so that overflow is judged on the unbounded-exponent result as
// IEEE 754 defines it. Modes MPFR lacks (nearest-away, to-odd) and ties where the parity is a
// code's rather than a significand's (mbits == 0) are decided from both neighbours with exact
// MPFR arithmetic.
#include "round_ref.h"

#include <float.h>
#include <math.h>
#include <mpfr.h>

// --- exponent range: the format's grid while rounding, the widest range for exact arithmetic

typedef struct {
    mpfr_exp_t emin, emax;
} range_save;

static range_save range_push_format(const fmt_t *f) {
    range_save s = {mpfr_get_emin(), mpfr_get_emax()};
    // MPFR writes x = 0.1b... * 2^e, one more than the IEEE exponent: the smallest subnormal
    // 2^(emin - m) has MPFR exponent emin - m + 1.
    mpfr_set_emin(f->emin - f->mbits + 1);
    mpfr_set_emax(mpfr_get_emax_max());
    return s;
}

static void range_wide(void) {
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
}

static void range_pop(range_save s) {
    mpfr_set_emin(s.emin);
    mpfr_set_emax(s.emax);
}

// y (precision mbits+1) = x rounded onto the format's grid with an MPFR mode. Needs the format
// range (range_push_format).
static void grid_round(mpfr_t y, double x, mpfr_rnd_t rnd) {
    int inex = mpfr_set_d(y, x, rnd);
    mpfr_subnormalize(y, inex, rnd);
}

// Whether grid value v is "odd": the last bit of its code. For mbits >= 1 that is the last
// bit of its integer significand on the grid (v / 2^(max(e, emin) - m)); with no fraction
// bits it is the last bit of the biased exponent. Zero is even. Needs the wide range.
static bool grid_odd(const fmt_t *f, const mpfr_t v) {
    if (mpfr_zero_p(v)) return false;
    const long e = (long)mpfr_get_exp(v) - 1;  // IEEE exponent of v
    const long ee = e > f->emin ? e : f->emin;
    if (f->mbits == 0) return ((ee + f->bias) & 1) != 0;
    mpfr_t t;
    mpfr_init2(t, mpfr_get_prec(v));
    // v / 2^(ue + 1) is an integer exactly when the integer significand is even.
    mpfr_mul_2si(t, v, -(ee - f->mbits + 1), MPFR_RNDN);  // exact: a power-of-two scaling
    const bool odd = !mpfr_integer_p(t);
    mpfr_clear(t);
    return odd;
}

// r = x rounded to f's grid, unbounded exponent range, in a deterministic mode.
static void ref_round_grid(mpfr_t r, const fmt_t *f, double x, fmt_round_mode mode) {
    const mpfr_prec_t p = f->mbits + 1;
    range_save s = range_push_format(f);
    mpfr_rnd_t direct = MPFR_RNDN;
    bool need_pair = false;
    switch (mode) {
    case FMT_RNE: direct = MPFR_RNDN, need_pair = f->mbits == 0; break;  // MPFR's precision-1
    case FMT_RTZ: direct = MPFR_RNDZ; break;                             // ties are not ours
    case FMT_RUP: direct = MPFR_RNDU; break;
    case FMT_RDN: direct = MPFR_RNDD; break;
    default: need_pair = true; break;
    }
    if (!need_pair) {
        grid_round(r, x, direct);
        range_pop(s);
        return;
    }
    mpfr_t lo, hi, mid;
    mpfr_inits2(p, lo, hi, (mpfr_ptr)0);
    grid_round(lo, x, MPFR_RNDD);
    grid_round(hi, x, MPFR_RNDU);
    range_wide();
    if (mpfr_equal_p(lo, hi)) {
        mpfr_set(r, lo, MPFR_RNDN);
    } else if (mode == FMT_RTO) {
        mpfr_set(r, grid_odd(f, lo) ? lo : hi, MPFR_RNDN);
    } else {
        // Nearest: compare x with the exact midpoint (lo + hi) / 2. lo and hi are neighbours
        // on a grid of at most 53 significant bits, so 128 bits hold their sum exactly.
        mpfr_init2(mid, 128);
        mpfr_add(mid, lo, hi, MPFR_RNDN);
        mpfr_div_2ui(mid, mid, 1, MPFR_RNDN);
        const int c = mpfr_cmp_d(mid, x);  // > 0: x below the midpoint
        mpfr_srcptr pick;
        if (c > 0) pick = lo;
        else if (c < 0) pick = hi;
        else if (mode == FMT_RNA) pick = x > 0 ? hi : lo;   // away from zero
        else pick = grid_odd(f, lo) ? hi : lo;              // RNE: the even neighbour
        mpfr_set(r, pick, MPFR_RNDN);
        mpfr_clear(mid);
    }
    mpfr_clears(lo, hi, (mpfr_ptr)0);
    range_pop(s);
}

// What an overflowing (or infinite, when the format cannot keep it) magnitude becomes under the
// IEEE policy, as a signed double, following IEEE 754: nearest modes to inf, toward zero and to
// odd to max, up and down by the sign; inf means NaN in a format without inf, and max in one
// without NaN.
static double overflow_value(const fmt_t *f, bool neg, fmt_round_mode mode) {
    bool to_inf = true;
    if (mode == FMT_RTZ || mode == FMT_RTO) to_inf = false;
    if (mode == FMT_RUP) to_inf = !neg;
    if (mode == FMT_RDN) to_inf = neg;
    double mag = f->max;
    if (to_inf) mag = f->has_inf ? INFINITY : f->has_nan ? NAN : f->max;
    return neg ? -mag : mag;
}

// IEEE P3109's omega-Saturate (interim report 4.7.5), line by line, for a rounded value X (or
// an infinity): Mhi = max, Mlo = -max (signed) or 0 (unsigned); "extended" is a format with
// inf. A NaN result in a format without NaN is 0. X = -0 is in range: +0 without -0.
static double p3109_saturate(const fmt_t *f, fmt_overflow ov, fmt_round_mode mode, double X) {
    const double hi = f->max, lo = f->is_signed ? -f->max : 0.0, nan = f->has_nan ? NAN : 0.0;
    const bool ext = f->has_inf, sgn = f->is_signed;
    if (lo <= X && X <= hi) return X == 0 && !f->has_negzero ? 0.0 : X;
    switch (ov) {
    case FMT_SATURATE:  // SatFinite
        return X > hi ? hi : lo;
    case FMT_SAT_PROPAGATE:
        if (X == INFINITY) return ext ? X : hi;
        if (X == -INFINITY) return sgn && ext ? X : lo;
        return X > hi ? hi : lo;
    default:  // SatNone
        if (X == INFINITY) return ext ? X : hi;
        if (X == -INFINITY) return sgn && ext ? X : !sgn ? nan : lo;
        if (X > hi) {
            if (mode == FMT_RTO && !sgn && ext) return hi;
            if (mode == FMT_RTZ || mode == FMT_RDN) return hi;
            return ext ? INFINITY : hi;
        }
        if (mode == FMT_RTZ || mode == FMT_RUP) return lo;
        if (sgn && ext) return -INFINITY;
        return !sgn ? nan : lo;
    }
}

double fmt_ref_round(const fmt_t *f, double x, fmt_round_mode mode, fmt_overflow ov,
                     bool flush_subnormals) {
    if ((unsigned)mode >= FMT_NMODES || mode == FMT_SR || (unsigned)ov >= FMT_NOVERFLOW) return NAN;
    // NaN: NaN where the format has one; otherwise -0 (signed, as ml_dtypes does) or +0.
    if (isnan(x)) return f->has_nan ? NAN : f->is_signed ? -0.0 : 0.0;
    const bool neg = signbit(x) != 0, p3109 = ov != FMT_OVERFLOW_IEEE;
    // Values the format cannot hold by sign: zero in a format without zero, and (IEEE policy, or
    // no zero) negatives (not -0) in unsigned formats. NaN where there is one, else +0. The
    // P3109 policies round negatives first and saturate them below.
    if ((!f->is_signed && neg && x != 0 && (!p3109 || !f->has_zero)) || (!f->has_zero && x == 0))
        return f->has_nan ? NAN : 0.0;
    if (isinf(x)) {
        if (p3109) return p3109_saturate(f, ov, mode, x);
        if (f->has_inf) return x;
        // IEEE policy without inf: inf is an overflow in a nearest mode.
        return overflow_value(f, neg, FMT_RNE);
    }
    const double zero = neg && f->has_negzero ? -0.0 : 0.0;
    if (x == 0) return zero;

    mpfr_t r;
    mpfr_init2(r, f->mbits + 1);
    ref_round_grid(r, f, x, mode);
    range_save s = {mpfr_get_emin(), mpfr_get_emax()};
    range_wide();
    double y;
    if (mpfr_cmpabs_ui(r, 0) > 0 && mpfr_get_exp(r) > 1024) {
        y = neg ? -DBL_MAX : DBL_MAX;  // beyond double: finite, and above every format's max
    } else {
        y = mpfr_get_d(r, MPFR_RNDN);  // exact: the grid value has mbits+1 <= 53 bits
    }
    range_pop(s);
    mpfr_clear(r);

    if (flush_subnormals && f->has_subnormals && fabs(y) < f->min_normal) y = neg ? -0.0 : 0.0;
    if (p3109) {
        y = p3109_saturate(f, ov, mode, y);
    } else if (fabs(y) > f->max) {
        y = overflow_value(f, neg, mode);
    }
    if (isnan(y) || isinf(y)) return y;
    // No zero (e8m0 style): everything below the smallest value is clamped up to it.
    if (!f->has_zero && fabs(y) < f->min_normal) y = f->min_normal;
    if (y == 0) return zero;
    return y;
}

double fmt_ref_decode(const fmt_t *f, uint64_t c) {
    const int m = f->mbits;
    if (f->bits < 64) c &= ((uint64_t)1 << f->bits) - 1;
    const uint64_t emask = ((uint64_t)1 << f->ebits) - 1, mmask = ((uint64_t)1 << m) - 1;
    const uint64_t sbit = f->is_signed ? (uint64_t)1 << (f->bits - 1) : 0;
    const bool neg = (c & sbit) != 0;
    const uint64_t E = (c >> m) & emask, M = c & mmask;
    const bool top = E == emask;
    switch (f->special) {
    case FMT_IEEE:
        if (top) return M ? NAN : neg ? -INFINITY : INFINITY;
        break;
    case FMT_FN:
    case FMT_E8M0:
        if (top && M == mmask) return NAN;
        break;
    case FMT_FNUZ:
        if (neg && E == 0 && M == 0) return NAN;
        break;
    case FMT_EXTENDED:  // signed: NaN at -0 and inf at the all-ones magnitude; unsigned: NaN at
                        // all ones and inf one below
        if (f->is_signed && neg && E == 0 && M == 0) return NAN;
        if (!f->is_signed && top && M == mmask) return NAN;
        if (f->is_signed ? top && M == mmask : (mmask ? top && M == mmask - 1 : E == emask - 1))
            return neg ? -INFINITY : INFINITY;
        break;
    case FMT_FINITE: break;
    }
    range_save s = {mpfr_get_emin(), mpfr_get_emax()};
    range_wide();
    // value = (-1)^s * significand * 2^(exponent - m), significand = M plus the hidden bit for
    // normal codes; exponent field 0 is subnormal (exponent emin) except in e8m0 style.
    mpfr_t v;
    mpfr_init2(v, 64);
    const bool subnormal = E == 0 && f->special != FMT_E8M0;
    mpfr_set_ui(v, (unsigned long)M, MPFR_RNDN);  // M < 2^52: exact in 64 bits
    if (!subnormal) {
        mpfr_t h;  // the hidden bit, 2^m
        mpfr_init2(h, 64);
        mpfr_set_ui_2exp(h, 1, m, MPFR_RNDN);
        mpfr_add(v, v, h, MPFR_RNDN);
        mpfr_clear(h);
    }
    const long e = subnormal ? f->emin : (long)E - f->bias;
    mpfr_mul_2si(v, v, e - m, MPFR_RNDN);
    if (neg) mpfr_neg(v, v, MPFR_RNDN);
    const double d = mpfr_get_d(v, MPFR_RNDN);
    mpfr_clear(v);
    range_pop(s);
    return d;
}
