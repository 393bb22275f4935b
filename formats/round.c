// round.c: option names and validation, per-call parameters, and the parallel dispatch of the
// rounding kernels (round_f32.c, round_f64.c).
// Constraints: chunks are split by element index and every draw is keyed by that index, so
// results and statistics do not depend on the number of threads.
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "round_internal.h"

static const char *const mode_names[FMT_NMODES] = {"rne", "rna", "rtz", "rup", "rdn", "rto", "sr"};

const char *fmt_mode_name(fmt_round_mode m) { return (unsigned)m < FMT_NMODES ? mode_names[m] : "?"; }

int fmt_mode_from_name(fmt_round_mode *out, const char *name) {
    for (int i = 0; i < FMT_NMODES; i++)
        if (name && !strcasecmp(name, mode_names[i])) return *out = (fmt_round_mode)i, FMT_OK;
    return FMT_EUNKNOWN;
}

const char *fmt_overflow_name(fmt_overflow o) { return o == FMT_SATURATE ? "saturate" : "ieee"; }

int fmt_overflow_from_name(fmt_overflow *out, const char *name) {
    if (name && !strcasecmp(name, "saturate")) return *out = FMT_SATURATE, FMT_OK;
    if (name && !strcasecmp(name, "ieee")) return *out = FMT_OVERFLOW_IEEE, FMT_OK;
    return FMT_EUNKNOWN;
}

int fmt_validate_round_opts(const fmt_t *f, const fmt_round_opts *o, char *msg, size_t len) {
    if (msg && len) msg[0] = 0;
    if ((unsigned)o->mode >= FMT_NMODES) {
        if (msg) snprintf(msg, len, "rounding mode %d is not one of rne rna rtz rup rdn rto sr", o->mode);
        return FMT_EINVAL;
    }
    if (o->overflow != FMT_OVERFLOW_IEEE && o->overflow != FMT_SATURATE) {
        if (msg) snprintf(msg, len, "overflow policy %d is not ieee or saturate", o->overflow);
        return FMT_EINVAL;
    }
    if (o->sr_bits < 0 || o->sr_bits > 32) {
        if (msg) snprintf(msg, len, "sr_bits is %d; expected 1..32 (0 for the default 32)", o->sr_bits);
        return FMT_EINVAL;
    }
    if (!msg) return FMT_OK;
    const int p = f->mbits + 1;
    if (o->mode == FMT_SR && o->sr_bits && o->sr_bits < p + 1)
        snprintf(msg, len, "warning: %d random bits for %s: a value less than 2^-%d of an ulp above "
                 "its lower neighbour never rounds up", o->sr_bits, f->name, o->sr_bits);
    else if (p > 11 && p < 24 && (o->mode == FMT_RNE || o->mode == FMT_RNA))
        // Rounding the float32 result of +,-,*,/,sqrt to precision p is the correctly rounded
        // result only when 24 >= 2p + 2 (Figueroa): double rounding possible above 11 bits.
        snprintf(msg, len, "warning: %s has %d bits of precision: rounding a float32 result to it "
                 "can differ from rounding the exact result (double rounding)", f->name, p);
    return FMT_OK;
}

// --- per-call parameters

void fmt__kparams_make(fmt__kparams *k, const fmt_t *f, const fmt_round_opts *o) {
    memset(k, 0, sizeof *k);
    k->m = f->mbits, k->emin = f->emin, k->bias = f->bias;
    k->max = f->max, k->min_normal = f->min_normal;
    k->has_nan = f->has_nan, k->has_zero = f->has_zero, k->negzero = f->has_negzero;
    k->is_signed = f->is_signed;
    k->clamp_min = !f->has_zero;
    k->flush = o->flush_subnormals && f->has_subnormals;
    k->sr_bits = o->sr_bits ? o->sr_bits : 32;
    k->key = fmt_rng_make_key(o->seed, o->stream);
    k->offset = o->offset;
    // IEEE 754 overflow: nearest (and stochastic) modes go to infinity, toward-zero and
    // to-odd to max, directed modes by the sign. A format without inf gives NaN instead,
    // and one with neither saturates (counted as overflow either way).
    const double inf_like = f->has_inf ? INFINITY : f->has_nan ? NAN : f->max;
    const bool sat = o->overflow == FMT_SATURATE;
    for (int sign = 0; sign < 2; sign++) {
        bool to_inf;
        switch (o->mode) {
        case FMT_RTZ: case FMT_RTO: to_inf = false; break;
        case FMT_RUP: to_inf = sign == 0; break;
        case FMT_RDN: to_inf = sign == 1; break;
        default: to_inf = true; break;
        }
        k->ovf[sign] = !sat && to_inf ? inf_like : f->max;
    }
    // An infinite input is exact where the format has inf (IEEE policy); otherwise it is an
    // overflow: max when saturating, NaN (or max without NaN) under the IEEE policy.
    k->inf_exact = f->has_inf && !sat;
    k->inf_result = k->inf_exact ? INFINITY : sat ? f->max : inf_like;
}

// --- dispatch

enum { CHUNK = 1 << 14 };  // elements per parallel task: fits in L1/L2, amortises scheduling

static void counts_merge(fmt__counts *into, const fmt__counts *c) {
    into->overflow += c->overflow, into->underflow += c->underflow;
    into->subnormal += c->subnormal, into->nan_in += c->nan_in, into->invalid += c->invalid;
    if (c->amax > into->amax) into->amax = c->amax;
}

// A kernel over elements [lo, lo+len) of an array, with per-thread counts (NULL: none wanted).
typedef void chunk_fn(const fmt__kparams *k, fmt_round_mode mode, void *x, size_t lo, size_t len,
                      fmt__counts *c);

static void chunk_f32(const fmt__kparams *k, fmt_round_mode mode, void *x, size_t lo, size_t len,
                      fmt__counts *c) {
    fmt__round_f32_kernel(k, mode, (float *)x + lo, len, lo, c);
}

// Float32 data through the float64 kernel, 1024 elements at a time on the stack.
static void chunk_f32_via_f64(const fmt__kparams *k, fmt_round_mode mode, void *xv, size_t lo,
                              size_t len, fmt__counts *c) {
    float *x = (float *)xv + lo;
    double buf[1024];
    for (size_t i = 0; i < len; i += 1024) {
        size_t m = len - i < 1024 ? len - i : 1024;
        for (size_t j = 0; j < m; j++) buf[j] = x[i + j];
        fmt__round_f64_kernel(k, mode, buf, m, lo + i, c);
        for (size_t j = 0; j < m; j++) x[i + j] = (float)buf[j];
    }
}

static void chunk_f64(const fmt__kparams *k, fmt_round_mode mode, void *x, size_t lo, size_t len,
                      fmt__counts *c) {
    fmt__round_f64_kernel(k, mode, (double *)x + lo, len, lo, c);
}

// Splits [0, n) into CHUNK-sized tasks over the threads and merges their counts.
static void round_parallel(const fmt__kparams *k, fmt_round_mode mode, void *x, size_t n,
                           chunk_fn *fn, fmt_stats *st) {
    fmt__counts total = {0};
    const size_t nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel if (nchunks > 1)
    {
        fmt__counts local = {0};
#pragma omp for schedule(static)
        for (size_t ci = 0; ci < nchunks; ci++) {
            size_t lo = ci * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;
            fn(k, mode, x, lo, len, st ? &local : NULL);
        }
#pragma omp critical
        counts_merge(&total, &local);
    }
    if (st) fmt__counts_add(st, &total, n);
}

int fmt_round_f32(const fmt_t *f, float *x, size_t n, const fmt_round_opts *o, fmt_stats *st) {
    if (fmt_validate_round_opts(f, o, NULL, 0) != FMT_OK) return FMT_EINVAL;
    fmt__kparams k;
    fmt__kparams_make(&k, f, o);
    if (fmt_embeds_in_f32(f)) {
        round_parallel(&k, o->mode, x, n, chunk_f32, st);
    } else if (fmt_contains_f32(f)) {
        // fp64 and wider: every float32 is a value, nothing rounds, no float32 value is
        // subnormal there, and an overflow to its max would not fit in float32 anyway.
        if (!st) return FMT_OK;
        fmt__counts total = {0};
        for (size_t i = 0; i < n; i++) {
            const float a = fabsf(x[i]);
            total.nan_in += a != a;
            if (a > total.amax) total.amax = a;
        }
        fmt__counts_add(st, &total, n);
    } else {
        round_parallel(&k, o->mode, x, n, chunk_f32_via_f64, st);
    }
    return FMT_OK;
}

int fmt_round_f64(const fmt_t *f, double *x, size_t n, const fmt_round_opts *o, fmt_stats *st) {
    if (fmt_validate_round_opts(f, o, NULL, 0) != FMT_OK) return FMT_EINVAL;
    fmt__kparams k;
    fmt__kparams_make(&k, f, o);
    round_parallel(&k, o->mode, x, n, chunk_f64, st);
    return FMT_OK;
}

double fmt_round1(const fmt_t *f, double x, const fmt_round_opts *o) {
    if (fmt_validate_round_opts(f, o, NULL, 0) != FMT_OK) return NAN;
    fmt__kparams k;
    fmt__kparams_make(&k, f, o);  // no parallel region: this is called per element
    fmt__round_f64_kernel(&k, o->mode, &x, 1, 0, NULL);
    return x;
}
