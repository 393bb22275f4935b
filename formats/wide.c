// wide.c: exact values of codes (any format) and rounding into formats wider than float64
// (see wide.h).
#include "formats/wide.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void fmt_code_exact(const fmt_t *f, uint64_t code, fmt_exact *v) {
    memset(v, 0, sizeof *v);
    const int m = f->mbits;
    const uint64_t sign = f->is_signed ? (uint64_t)1 << (f->bits - 1) : 0;
    if (f->bits < 64) code &= ((uint64_t)1 << f->bits) - 1;
    const uint64_t mag = code & ~sign;
    const uint64_t ones = ((uint64_t)1 << f->ebits) - 1;          // the all-ones exponent field
    const uint64_t all = (ones << m) | (((uint64_t)1 << m) - 1);  // the largest magnitude code
    const uint64_t E = mag >> m, M = mag & (((uint64_t)1 << m) - 1);
    v->neg = (code & sign) != 0;
    bool nan = false, inf = false;
    switch (f->special) {
    case FMT_IEEE: inf = E == ones && M == 0, nan = E == ones && M != 0; break;
    case FMT_FN:
    case FMT_E8M0: nan = mag == all; break;
    case FMT_FNUZ: nan = code == sign; break;
    case FMT_EXTENDED:
        nan = f->is_signed ? code == sign : mag == all;
        inf = !nan && mag == fmt_max_code(f) + 1;
        break;
    case FMT_FINITE: break;
    }
    if (nan || inf) {
        v->cls = nan ? FMT_X_NAN : FMT_X_INF;
        if (nan) v->neg = false;
        return;
    }
    if (mag == 0 && f->has_zero) {
        v->cls = FMT_X_ZERO;
        return;
    }
    v->cls = FMT_X_FINITE;
    if (E == 0 && f->special != FMT_E8M0) {  // the subnormal binade: M 2^(emin - m)
        v->subnormal = true;
        v->sig = M, v->exp = f->emin - m;
    } else {
        v->sig = ((uint64_t)1 << m) | M, v->exp = (int)E - f->bias - m;
    }
    while (!(v->sig & 1)) v->sig >>= 1, v->exp++;
}

static int bit_length(uint64_t x) { return x ? 64 - __builtin_clzll(x) : 0; }

int fmt_exact_hex(const fmt_exact *v, char *buf, size_t cap) {
    const char *s = v->neg ? "-" : "";
    switch (v->cls) {
    case FMT_X_NAN: return snprintf(buf, cap, "nan");
    case FMT_X_INF: return snprintf(buf, cap, "%sinf", s);
    case FMT_X_ZERO: return snprintf(buf, cap, "%s0x0p+0", s);
    case FMT_X_FINITE: break;
    }
    // sig 2^exp = 1.frac 2^(exp + nb - 1), frac the nb - 1 bits below the leading one, padded
    // on the right to whole hexadecimal digits.
    const int nb = bit_length(v->sig), fb = nb - 1, digits = (fb + 3) / 4;
    const int e2 = v->exp + fb;
    if (!digits) return snprintf(buf, cap, "%s0x1p%+d", s, e2);
    const uint64_t frac = (v->sig & ((((uint64_t)1 << (fb - 1)) << 1) - 1)) << (4 * digits - fb);
    return snprintf(buf, cap, "%s0x1.%0*llxp%+d", s, digits, (unsigned long long)frac, e2);
}

bool fmt_exact_double(const fmt_exact *v, double *out) {
    switch (v->cls) {
    case FMT_X_NAN: *out = NAN; return true;
    case FMT_X_INF: *out = v->neg ? -INFINITY : INFINITY; return true;
    case FMT_X_ZERO: *out = v->neg ? -0.0 : 0.0; return true;
    case FMT_X_FINITE: break;
    }
    // sig is odd: exact in a double when it has at most 53 bits, its lowest bit is at or above
    // 2^-1074 and its top below 2^1024.
    const int nb = bit_length(v->sig);
    if (nb > 53 || v->exp < -1074 || v->exp + nb - 1 > 1023) return false;
    *out = ldexp(v->neg ? -(double)v->sig : (double)v->sig, v->exp);
    return true;
}

int fmt_exact_decimal(const fmt_exact *v, char *buf, size_t cap) {
    double d;
    if (fmt_exact_double(v, &d)) {
        if (isnan(d)) return snprintf(buf, cap, "nan");
        if (isinf(d)) return snprintf(buf, cap, "%sinf", d < 0 ? "-" : "");
        return snprintf(buf, cap, "%.17g", d);  // the caller's exact printers shorten it
    }
    // log10 of the value in long double; its error (|exp| < 2^16 times the rounding of
    // log10(2)) stays far below the 6 digits printed.
    const long double l = log10l((long double)v->sig) + (long double)v->exp * log10l(2.0L);
    long de = (long)floorl(l);
    char mant[16];
    snprintf(mant, sizeof mant, "%.5Lf", powl(10.0L, l - (long double)de));
    if (mant[0] == '1' && mant[1] == '0') snprintf(mant, sizeof mant, "1.00000"), de++;  // 9.999995 -> 10
    return snprintf(buf, cap, "%s%se%+ld", v->neg ? "-" : "", mant, de);
}

uint64_t fmt_round_wide(const fmt_t *f, double x, const fmt_round_opts *o) {
    // The narrow twin: the same precision and layout with 4 (signed) or 5 (unsigned) exponent
    // bits, whose range holds [1, 4] with room to spare; x's significand is rounded there.
    const int P = f->mbits + 1, K = P + 4, w = K - P + (f->is_signed ? 0 : 1);
    fmt_t n;
    fmt_make(&n, "narrow twin", K, w, f->mbits, 1 << (w - 1), f->is_signed, f->special);
    // x goes to the twin's binade [2^d, 2^(d+1)), d in {0, 1}, whose exponent field has the
    // parity of x's field in f: where P = 1 a code's parity is its exponent field's, and ties
    // (to even) and round to odd look at it; where P > 1 it is the mantissa's and d changes
    // nothing.
    int ex = 0, d = 0;
    double y = x;
    if (isfinite(x) && x != 0) {
        ex = ilogb(x);
        d = (ex + f->bias - n.bias) & 1;
        y = ldexp(x, d - ex);  // exact: |y| in [2^d, 2^(d+1))
    }
    const double r = fmt_round1(&n, y, o);
    const uint64_t sign = f->is_signed && signbit(r) ? (uint64_t)1 << (f->bits - 1) : 0;
    uint64_t nan_code;
    fmt_nan_codes(f, &nan_code, 1);
    if (isnan(r)) return nan_code;
    if (r == 0) return 0;  // P3109 has no -0
    if (isinf(r)) return sign | (fmt_max_code(f) + 1);
    if (isinf(x)) return sign | fmt_max_code(f);  // saturated: the twin's max stands for ours
    // r = 1.M 2^er with er in {d, d + 1}: the field of the exponent ex - d + er, the mantissa M.
    const int er = ilogb(r);
    const uint64_t M = (uint64_t)ldexp(fabs(r) / ldexp(1.0, er) - 1, f->mbits);
    return sign | ((uint64_t)(ex - d + er + f->bias) << f->mbits) | M;
}
