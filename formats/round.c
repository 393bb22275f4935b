// round.c: option names and validation, per-call parameters, the choice of a float32 path (the
// generic kernel of round_f32.c or its AVX2/AVX-512 copies, the converters of round_hw.c, the
// AVX-512 kernels of round_lean.c: the CPU's features are read at each call), and the parallel
// dispatch of the rounding kernels (round_f32.c, round_f64.c).
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

static const char *const overflow_names[FMT_NOVERFLOW] = {"ieee", "saturate", "satpropagate", "satnone"};

const char *fmt_overflow_name(fmt_overflow o) { return (unsigned)o < FMT_NOVERFLOW ? overflow_names[o] : "?"; }

int fmt_overflow_from_name(fmt_overflow *out, const char *name) {
    if (name && !strcasecmp(name, "satfinite")) return *out = FMT_SATURATE, FMT_OK;  // P3109's name
    for (int i = 0; i < FMT_NOVERFLOW; i++)
        if (name && !strcasecmp(name, overflow_names[i])) return *out = (fmt_overflow)i, FMT_OK;
    return FMT_EUNKNOWN;
}

static const char *const sr_variant_names[FMT_NSR_VARIANTS] = {"a", "b", "c"};

const char *fmt_sr_variant_name(fmt_sr_variant v) {
    return (unsigned)v < FMT_NSR_VARIANTS ? sr_variant_names[v] : "?";
}

int fmt_sr_variant_from_name(fmt_sr_variant *out, const char *name) {
    for (int i = 0; i < FMT_NSR_VARIANTS; i++)
        if (name && !strcasecmp(name, sr_variant_names[i])) return *out = (fmt_sr_variant)i, FMT_OK;
    return FMT_EUNKNOWN;
}

int fmt_mode_spec_from_name(fmt_round_opts *o, const char *name) {
    if (name && !strncasecmp(name, "sr:", 3)) {
        fmt_sr_variant v;
        if (fmt_sr_variant_from_name(&v, name + 3) != FMT_OK) return FMT_EUNKNOWN;
        return o->mode = FMT_SR, o->sr_variant = v, FMT_OK;
    }
    fmt_round_mode m;
    if (fmt_mode_from_name(&m, name) != FMT_OK) return FMT_EUNKNOWN;
    return o->mode = m, o->sr_variant = FMT_SR_A, FMT_OK;
}

static const char *const path_names[FMT_NPATHS] = {"auto", "generic", "avx2", "avx512", "hw", "lean"};

const char *fmt_path_name(fmt_round_path p) { return (unsigned)p < FMT_NPATHS ? path_names[p] : "?"; }

int fmt_path_from_name(fmt_round_path *out, const char *name) {
    for (int i = 0; i < FMT_NPATHS; i++)
        if (name && !strcasecmp(name, path_names[i])) return *out = (fmt_round_path)i, FMT_OK;
    return FMT_EUNKNOWN;
}

int fmt_validate_round_opts(const fmt_t *f, const fmt_round_opts *o, char *msg, size_t len) {
    if (msg && len) msg[0] = 0;
    if ((unsigned)o->path >= FMT_NPATHS) {
        if (msg) snprintf(msg, len, "path %d is not one of auto generic avx2 avx512 hw lean", o->path);
        return FMT_EINVAL;
    }
    if ((unsigned)o->mode >= FMT_NMODES) {
        if (msg) snprintf(msg, len, "rounding mode %d is not one of rne rna rtz rup rdn rto sr", o->mode);
        return FMT_EINVAL;
    }
    if ((unsigned)o->overflow >= FMT_NOVERFLOW) {
        if (msg) snprintf(msg, len, "overflow policy %d is not one of ieee saturate satpropagate satnone", o->overflow);
        return FMT_EINVAL;
    }
    if ((unsigned)o->sr_variant >= FMT_NSR_VARIANTS) {
        if (msg) snprintf(msg, len, "stochastic rounding variant %d is not one of a b c", o->sr_variant);
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
    k->sr_variant = o->sr_variant;
    k->key = fmt_rng_make_key(o->seed, o->stream);
    k->offset = o->offset;
    k->bits = f->bits, k->ebits = f->ebits, k->emax = f->emax, k->special = f->special;
    k->overflow = o->overflow;
    const bool rtz = o->mode == FMT_RTZ;
    const double nan_or_0 = f->has_nan ? NAN : 0.0;
    switch (o->overflow) {
    case FMT_OVERFLOW_IEEE: {
        // IEEE 754 overflow: nearest (and stochastic) modes go to infinity, toward-zero and
        // to-odd to max, directed modes by the sign. A format without inf gives NaN instead,
        // and one with neither saturates (counted as overflow either way).
        const double inf_like = f->has_inf ? INFINITY : f->has_nan ? NAN : f->max;
        for (int sign = 0; sign < 2; sign++) {
            const bool to_inf = !(rtz || o->mode == FMT_RTO) && !(o->mode == FMT_RUP && sign) &&
                                !(o->mode == FMT_RDN && !sign);
            k->ovf[sign] = to_inf ? inf_like : f->max;
        }
        // An infinite input is exact where the format has inf; otherwise an overflow: NaN (or
        // max without NaN).
        k->inf_exact = f->has_inf;
        k->inf_result = inf_like;
        k->inval_result = k->ninf_result = nan_or_0;
        break;
    }
    case FMT_SATURATE:
    case FMT_SAT_PROPAGATE:
        k->ovf[0] = k->ovf[1] = f->max;
        k->inf_exact = f->has_inf && o->overflow == FMT_SAT_PROPAGATE;
        k->inf_result = k->inf_exact ? INFINITY : f->max;
        k->inval_result = k->ninf_result = f->has_zero ? 0.0 : nan_or_0;  // Mlo
        break;
    case FMT_SAT_NONE:
    default: {
        // P3109 SatNone (4.7.5): past Mhi, toward zero or negative keep Mhi, as does to-odd in an
        // unsigned extended format; past Mlo (signed) toward zero or positive keep Mlo; the rest
        // is inf where the format has it. Without inf every side clamps.
        const bool up_max = rtz || o->mode == FMT_RDN || (o->mode == FMT_RTO && !f->is_signed);
        const bool down_max = rtz || o->mode == FMT_RUP;
        k->ovf[0] = f->has_inf && !up_max ? INFINITY : f->max;
        k->ovf[1] = f->has_inf && !down_max ? INFINITY : f->max;
        k->inf_exact = f->has_inf;
        k->inf_result = f->has_inf ? INFINITY : f->max;
        k->inval_result = f->has_zero && down_max ? 0.0 : nan_or_0;
        k->ninf_result = nan_or_0;
        break;
    }
    }
    // The P3109 policies round a negative into an unsigned format first (round.h).
    k->inval_after_round = o->overflow != FMT_OVERFLOW_IEEE && f->has_zero;
}

// --- dispatch

enum { CHUNK = 1 << 14 };  // elements per parallel task: fits in L1/L2, amortises scheduling

// --- paths of the float32 kernel

// __builtin_cpu_supports reads what libgcc found before main: cheap, and no state of ours.
bool fmt__copy_runs(fmt_round_path copy) {
    switch (copy) {
    case FMT_PATH_GENERIC: return true;
#ifdef FMT__AVX2_COPY
    case FMT_PATH_AVX2: return __builtin_cpu_supports("x86-64-v3");
#endif
#ifdef FMT__AVX512_COPY
    case FMT_PATH_AVX512: return __builtin_cpu_supports("x86-64-v4");
#endif
    default: return false;
    }
}

fmt_round_path fmt__best_copy(void) {
    return fmt__copy_runs(FMT_PATH_AVX512) ? FMT_PATH_AVX512
         : fmt__copy_runs(FMT_PATH_AVX2)   ? FMT_PATH_AVX2
                                           : FMT_PATH_GENERIC;
}

// FMT_PATH_AUTO: the hardware converters where they cover the call, else the explicit kernels
// (AVX-512, or AVX2 on CPUs without it) where they do, else the generic kernel compiled for the widest vectors the CPU runs.
fmt_round_path fmt__f32_path(const fmt__kparams *k, fmt_round_path p, fmt_round_mode mode,
                             bool with_stats) {
    const bool hw = !with_stats && fmt__f32_hw_covers(k, mode);
    const bool lean = fmt__f32_lean_covers(k, mode);
    switch (p) {
    case FMT_PATH_AUTO:
        if (hw) return FMT_PATH_HW;
        if (lean) return FMT_PATH_LEAN;
        return fmt__best_copy();
    case FMT_PATH_HW: return hw ? p : FMT_NPATHS;
    case FMT_PATH_LEAN: return lean ? p : FMT_NPATHS;
    default: return fmt__copy_runs(p) ? p : FMT_NPATHS;
    }
}

bool fmt_path_available(fmt_round_path p, const fmt_t *f, const fmt_round_opts *o, bool with_stats) {
    if ((unsigned)p >= FMT_NPATHS) return false;
    fmt_round_opts q = *o;
    q.path = p;
    const fmt_round_path c = fmt_path_chosen(f, &q, with_stats);
    return c != FMT_NPATHS && (p == FMT_PATH_AUTO || c == p);
}

fmt_round_path fmt_path_chosen(const fmt_t *f, const fmt_round_opts *o, bool with_stats) {
    if (fmt_validate_round_opts(f, o, NULL, 0) != FMT_OK) return FMT_NPATHS;
    if (!fmt_embeds_in_f32(f))
        return o->path == FMT_PATH_AUTO || o->path == FMT_PATH_GENERIC ? FMT_PATH_GENERIC : FMT_NPATHS;
    fmt__kparams k;
    fmt__kparams_make(&k, f, o);
    return fmt__f32_path(&k, o->path, o->mode, with_stats);
}

// A kernel over elements [lo, lo+len) of an array, with per-thread counts (NULL: none wanted).
typedef void chunk_fn(const fmt__kparams *k, fmt_round_path path, fmt_round_mode mode, void *x,
                      size_t lo, size_t len, fmt__counts *c);

static void chunk_f32(const fmt__kparams *k, fmt_round_path path, fmt_round_mode mode, void *x,
                      size_t lo, size_t len, fmt__counts *c) {
    fmt__round_f32_kernel(k, path, mode, (float *)x + lo, len, lo, c);
}

// Float32 data through the float64 kernel, 1024 elements at a time on the stack.
static void chunk_f32_via_f64(const fmt__kparams *k, fmt_round_path path, fmt_round_mode mode,
                              void *xv, size_t lo, size_t len, fmt__counts *c) {
    (void)path;
    float *x = (float *)xv + lo;
    double buf[1024];
    for (size_t i = 0; i < len; i += 1024) {
        size_t m = len - i < 1024 ? len - i : 1024;
        for (size_t j = 0; j < m; j++) buf[j] = x[i + j];
        fmt__round_f64_kernel(k, mode, buf, m, lo + i, c);
        for (size_t j = 0; j < m; j++) x[i + j] = (float)buf[j];
    }
}

static void chunk_f64(const fmt__kparams *k, fmt_round_path path, fmt_round_mode mode, void *x,
                      size_t lo, size_t len, fmt__counts *c) {
    (void)path;
    fmt__round_f64_kernel(k, mode, (double *)x + lo, len, lo, c);
}

// What a float32 call does around the rounding, chunk by chunk (so that the data is in cache
// for the rounding and the passes run on every thread): x = src * pre before (a copy where pre
// is 1), x *= post after (none where 1).
typedef struct {
    const float *src;
    float pre, post;
} xfer;

static void xfer_in(const xfer *t, float *x, size_t lo, size_t len) {
    if (!t) return;
    if (t->pre != 1.0f)
        for (size_t i = 0; i < len; i++) x[lo + i] = t->src[lo + i] * t->pre;
    else if (t->src != x)
        memcpy(x + lo, t->src + lo, len * sizeof *x);
}

static void xfer_out(const xfer *t, float *x, size_t lo, size_t len) {
    if (t && t->post != 1.0f)
        for (size_t i = 0; i < len; i++) x[lo + i] *= t->post;
}

// A chunk of a float32 call with something around the rounding, in one pass of the explicit
// AVX-512 kernels where they round it (the same arithmetic as xfer_in, the kernel and xfer_out:
// x = src * pre, rounded, times post; a copy is no multiply, so NaN payloads pass as memcpy
// passes them). Returns false, with nothing written, where those kernels decline.
static bool xfer_lean(const fmt__kparams *k, fmt_round_path path, fmt_round_mode mode, const xfer *t, float *x,
                      size_t lo, size_t len, fmt__counts *c) {
    if (path != FMT_PATH_LEAN) return false;
    if (t->pre == 1.0f && t->post == 1.0f) return fmt__round_f32_lean(k, mode, x + lo, t->src + lo, len, lo, c);
    // The chunk as one tile: its multiplier and divisor.
    const fmt__block_req r = {.k = k, .mode = mode, .tc = (len + 15) / 16 * 16, .mul = &t->pre, .deq = &t->post,
                              .out = x + lo, .in = t->src + lo, .n = len, .rows = 1, .ld = len, .base = lo,
                              .counts = c};
    return fmt__scale_round_f32_lean(&r);
}

// Splits [0, n) into CHUNK-sized tasks over the threads and merges their counts. t: float32
// data only (NULL: in place, nothing around).
static void round_parallel(const fmt__kparams *k, fmt_round_path path, fmt_round_mode mode,
                           void *x, size_t n, chunk_fn *fn, fmt_stats *st, const xfer *t) {
    fmt__counts total = {0};
    const size_t nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel if (nchunks > 1)
    {
        fmt__counts local = {0};
#pragma omp for schedule(static)
        for (size_t ci = 0; ci < nchunks; ci++) {
            size_t lo = ci * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;
            if (t && fn == chunk_f32 && xfer_lean(k, path, mode, t, x, lo, len, st ? &local : NULL)) continue;
            xfer_in(t, x, lo, len);
            fn(k, path, mode, x, lo, len, st ? &local : NULL);
            xfer_out(t, x, lo, len);
        }
#pragma omp critical
        fmt__counts_merge(&total, &local);
    }
    if (st) fmt__counts_add(st, &total, n);
}

static int round_f32(const fmt_t *f, float *x, size_t n, const fmt_round_opts *o, fmt_stats *st, const xfer *t) {
    if (fmt_validate_round_opts(f, o, NULL, 0) != FMT_OK) return FMT_EINVAL;
    fmt__kparams k;
    fmt__kparams_make(&k, f, o);
    if (fmt_embeds_in_f32(f)) {
        const fmt_round_path path = fmt__f32_path(&k, o->path, o->mode, st != NULL);
        if (path == FMT_NPATHS) return FMT_EINVAL;
        round_parallel(&k, path, o->mode, x, n, chunk_f32, st, t);
    } else if (o->path != FMT_PATH_AUTO && o->path != FMT_PATH_GENERIC) {
        return FMT_EINVAL;  // the float64 kernel has one path
    } else if (t) {  // the wide formats, in three passes (nothing here is on a hot path)
        xfer_in(t, x, 0, n);
        const int status = round_f32(f, x, n, o, st, NULL);
        xfer_out(t, x, 0, n);
        return status;
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
        round_parallel(&k, FMT_PATH_GENERIC, o->mode, x, n, chunk_f32_via_f64, st, NULL);
    }
    return FMT_OK;
}

int fmt_round_f32(const fmt_t *f, float *x, size_t n, const fmt_round_opts *o, fmt_stats *st) {
    return round_f32(f, x, n, o, st, NULL);
}

int fmt_round_f32_scaled(const fmt_t *f, float *out, const float *in, size_t n, float pre, float post,
                         const fmt_round_opts *o, fmt_stats *st) {
    if (n && (!out || !in)) return FMT_EINVAL;
    const xfer t = {in, pre, post};
    return round_f32(f, out, n, o, st, &t);
}

int fmt_round_f64(const fmt_t *f, double *x, size_t n, const fmt_round_opts *o, fmt_stats *st) {
    if (fmt_validate_round_opts(f, o, NULL, 0) != FMT_OK) return FMT_EINVAL;
    fmt__kparams k;
    fmt__kparams_make(&k, f, o);
    round_parallel(&k, FMT_PATH_GENERIC, o->mode, x, n, chunk_f64, st, NULL);
    return FMT_OK;
}

double fmt_round1(const fmt_t *f, double x, const fmt_round_opts *o) {
    if (fmt_validate_round_opts(f, o, NULL, 0) != FMT_OK) return NAN;
    fmt__kparams k;
    fmt__kparams_make(&k, f, o);  // no parallel region: this is called per element
    fmt__round_f64_kernel(&k, o->mode, &x, 1, 0, NULL);
    return x;
}
