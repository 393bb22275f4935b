// round_ref.h: the MPFR ground truth for rounding and decoding, against which the fast paths
// (round_f32.c, round_f64.c, codec.c) are tested bit for bit.
// Constraints: the only formats/ unit that uses MPFR (its file name ends in _ref.c); written
// independently of the fast kernels; slow (one MPFR computation per value) and meant for tests
// and verification, not for data. Saves and restores MPFR's exponent range around each call.
#ifndef FPLAB_ROUND_REF_H
#define FPLAB_ROUND_REF_H

#include <stdbool.h>
#include <stdint.h>

#include "round.h"

// The value of x rounded to format f with a deterministic mode (every mode but FMT_SR, which
// gives NaN here), the overflow policy ov and optional flushing of subnormal results, with the
// semantics documented in round.h: the correctly rounded value on the format's grid with an
// unbounded exponent range (subnormal spacing below the smallest normal, also for formats
// without subnormals, which are then clamped), overflow judged on that value against f->max;
// NaN, infinity, sign and zero rules as fmt__kparams_make and the kernels document them.
// The result is a double: every format fplab makes embeds in float64.
double fmt_ref_round(const fmt_t *f, double x, fmt_round_mode mode, fmt_overflow ov,
                     bool flush_subnormals);

// The value of code c of format f (bits above f->bits are ignored), computed with MPFR from the
// sign, exponent and mantissa fields. NaN codes give NaN (sign not specified).
double fmt_ref_decode(const fmt_t *f, uint64_t c);

#endif
