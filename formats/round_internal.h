// round_internal.h: what the float32 and float64 rounding kernels share: the per-call
// parameters derived from (format, options), and the one decision every mode makes.
// Internal to formats/: not installed, not included above this layer.
#ifndef FPLAB_ROUND_INTERNAL_H
#define FPLAB_ROUND_INTERNAL_H

#include "rng.h"
#include "round.h"

typedef struct {
    int m;               // fraction bits of the format
    int emin;            // exponent of its smallest normal
    int bias;            // for the parity of an exponent-only (m == 0) code
    double max;          // largest finite value
    double min_normal;
    double ovf[2];       // what an overflowing magnitude becomes, by sign (max, inf or NaN)
    double inf_result;   // what an infinite input's magnitude becomes
    bool inf_exact;      // an infinite input stays infinite (not an overflow)
    bool has_nan, has_zero, negzero, is_signed;
    bool clamp_min;      // no zero: magnitudes below min_normal become min_normal (e8m0)
    bool flush;          // flush subnormal results to zero
    int sr_bits;         // 1..32
    fmt_rng_key key;
    uint64_t offset;
} fmt__kparams;

void fmt__kparams_make(fmt__kparams *k, const fmt_t *f, const fmt_round_opts *o);

// Whether to add one unit in the last place to the truncated magnitude. lsb, guard, sticky,
// sign and sr_up are 0 or 1; guard is the first dropped bit, sticky the OR of the rest.
// Round-to-odd adds one when the truncation was inexact and left an even last bit, which is
// "set the last bit" for m >= 1 and also right for exponent-only codes.
static inline unsigned fmt__round_inc(fmt_round_mode mode, unsigned sign, unsigned lsb,
                                      unsigned guard, unsigned sticky, unsigned sr_up) {
    unsigned inexact = guard | sticky;
    switch (mode) {
    case FMT_RNE: return guard & (sticky | lsb);
    case FMT_RNA: return guard;
    case FMT_RTZ: return 0;
    case FMT_RUP: return inexact & (sign ^ 1);
    case FMT_RDN: return inexact & sign;
    case FMT_RTO: return inexact & (lsb ^ 1);
    case FMT_SR: return sr_up;
    default: return 0;
    }
}

// Per-element outcome flags, summed into fmt_stats by the kernels.
typedef struct {
    uint64_t overflow, underflow, subnormal, nan_in, invalid;
    double amax;
} fmt__counts;

static inline void fmt__counts_add(fmt_stats *st, const fmt__counts *c, size_t n) {
    st->n += n;
    st->overflow += c->overflow;
    st->underflow += c->underflow;
    st->subnormal += c->subnormal;
    st->nan_in += c->nan_in;
    st->invalid += c->invalid;
    if (c->amax > st->amax) st->amax = c->amax;
}

// Kernels: round x[0..n) in place; element i draws counter k->offset + base + i.
void fmt__round_f32_kernel(const fmt__kparams *k, fmt_round_mode mode, float *x, size_t n,
                           uint64_t base, fmt__counts *counts);
void fmt__round_f64_kernel(const fmt__kparams *k, fmt_round_mode mode, double *x, size_t n,
                           uint64_t base, fmt__counts *counts);

#endif
