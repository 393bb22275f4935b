// round_f64.c: the float64 rounding kernel, for every format (the float32 API falls back to it
// for e8m0-style formats and for custom formats that do not embed in float32).
// Constraints: the per-element rounding lives in round_scalar.h (shared with the scalar rounder
// of upper layers); this file only loops over it and counts; no libm, no MPFR.
#include "round_scalar.h"

static inline __attribute__((always_inline)) void
round_loop(const fmt__kparams *k, const uint64_t first, const fmt_round_mode mode,
           double *restrict x, const size_t n, fmt__counts *c) {
    fmt__flags fl;
    uint64_t novf = 0, nunf = 0, nsub = 0, nnan = 0, ninv = 0;
    double amax = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double xi = x[i];
        uint32_t rnd = mode == FMT_SR ? fmt_rng_u32(k->key, first + i) : 0;
        x[i] = fmt__round_one_f64(k, mode, xi, rnd, &fl);
        novf += fl.overflow, nunf += fl.underflow, nsub += fl.subnormal;
        nnan += fl.nan_in, ninv += fl.invalid;
        const double ax = xi < 0 ? -xi : xi;
        amax = ax > amax ? ax : amax;
    }
    if (!c) return;
    c->overflow += novf, c->underflow += nunf, c->subnormal += nsub;
    c->nan_in += nnan, c->invalid += ninv;
    if (amax > c->amax) c->amax = amax;
}

void fmt__round_f64_kernel(const fmt__kparams *k, fmt_round_mode mode, double *x, size_t n,
                           uint64_t base, fmt__counts *c) {
    const uint64_t first = k->offset + base;
    switch (mode) {
    case FMT_RNE: round_loop(k, first, FMT_RNE, x, n, c); break;
    case FMT_RNA: round_loop(k, first, FMT_RNA, x, n, c); break;
    case FMT_RTZ: round_loop(k, first, FMT_RTZ, x, n, c); break;
    case FMT_RUP: round_loop(k, first, FMT_RUP, x, n, c); break;
    case FMT_RDN: round_loop(k, first, FMT_RDN, x, n, c); break;
    case FMT_RTO: round_loop(k, first, FMT_RTO, x, n, c); break;
    case FMT_SR: round_loop(k, first, FMT_SR, x, n, c); break;
    default: break;
    }
}
