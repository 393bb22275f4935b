// wide.h: exact values of codes, for every format, and the formats whose values doubles cannot
// hold: IEEE P3109's binaryKpP with more exponent bits than float64 (wide descriptors, see
// format.h). A code's value is kept as an integer significand and a power of two, printed as
// the C99 hexadecimal float the P3109 working group's value tables use.
// Constraints: no MPFR, no doubles in the exact path (doubles only for approximate text).
#ifndef FPLAB_WIDE_H
#define FPLAB_WIDE_H

#include "formats/format.h"
#include "formats/round.h"

typedef enum { FMT_X_ZERO, FMT_X_FINITE, FMT_X_INF, FMT_X_NAN } fmt_xclass;

// (-1)^neg * sig * 2^exp, sig odd (0 for zero, inf and NaN); subnormal marks a code in the
// subnormal binade (exponent field 0 and a nonzero mantissa).
typedef struct {
    fmt_xclass cls;
    bool neg, subnormal;
    uint64_t sig;
    int exp;
} fmt_exact;

// The value of code (its low f->bits bits) in any descriptor, wide or not.
void fmt_code_exact(const fmt_t *f, uint64_t code, fmt_exact *v);

// "0x1.8p+16382", "-0x1p-16383", "0x0p+0", "inf", "-inf", "nan": exact (as the P3109 tables
// write them, normalised: a leading 1, no trailing zero digits). Returns the length written
// (as snprintf).
int fmt_exact_hex(const fmt_exact *v, char *buf, size_t cap);
// The value as the double it is, when a double holds it exactly (true), else false.
bool fmt_exact_double(const fmt_exact *v, double *out);
// A decimal approximation to 6 significant digits for reading ("1.18973e+4932"); exact
// (the shortest text that reads back) when a double holds the value.
int fmt_exact_decimal(const fmt_exact *v, char *buf, size_t cap);

// Rounds x to a wide format and returns the code, with every mode, policy and stochastic
// variant of fmt_round1. A wide format's normal range holds every double (2^-1074 .. 2^1024
// lie far inside it), so a finite x only loses precision: the result is x's significand
// rounded to mbits + 1 bits, never subnormal, never saturated, never 0 unless x is (the
// policies act on inf and on negatives into unsigned formats only). Built on fmt_round1 of a
// narrow format with the same P and layout: rounding to P bits does not depend on the binade.
uint64_t fmt_round_wide(const fmt_t *f, double x, const fmt_round_opts *o);

#endif
