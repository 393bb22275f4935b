// verify_exhaustive.c: every one of the 2^32 float32 bit patterns through fmt_round_f32, for
// every table format of 16 bits or fewer (and any other format named with --format: IEEE P3109's,
// custom ones), every deterministic rounding mode (rne rna rtz rup rdn rto) and every overflow
// policy (ieee, and P3109's saturate, satpropagate, satnone), compared bit-exactly with an
// independent reference.
// The reference shares nothing with the fast path but the descriptor's fields (bits, ebits,
// mbits, bias, signedness, special): each positive code is decoded with MPFR from its fields
// into a sorted table of magnitudes (plus the grid point just above max, which IEEE 754
// overflow needs) and the exact midpoints between neighbours. An input is then classified by a
// monotone sweep (inputs of a chunk share a sign and increase in magnitude) as exact, below,
// at or above the midpoint of its interval, and the mode's rule picks the neighbour.
// Special rules (NaN, inf, overflow, signed zero, e8m0) are those documented in round.h,
// format.h and fmt__kparams_make (round.c).
// Every other path of fmt_round_f32 that the build and CPU have for a call (the kernel's
// AVX2/AVX-512 copies, the hardware converters, the explicit AVX-512 kernels) is then held to the
// generic kernel's bits on the same inputs, NaN payloads included (--paths).
// Exit status: 0 all agree, 1 mismatches, 2 bad usage.
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "formats/codec.h"
#include "formats/round.h"
#include "util/fileio.h"

enum { CHUNK_LOG2 = 20, CHUNK = 1 << CHUNK_LOG2, NCHUNKS = 1 << (32 - CHUNK_LOG2), NSHOW = 10 };

static const fmt_round_mode det_modes[] = {FMT_RNE, FMT_RNA, FMT_RTZ, FMT_RUP, FMT_RDN, FMT_RTO};
enum { NDET = sizeof det_modes / sizeof det_modes[0] };
// Stochastic rounding (seed 0, element i of the whole sweep drawing counter i) has no MPFR
// reference here (tests/test_sr.c tests it statistically), but it is deterministic: its row
// holds the other paths to the generic kernel's bits. Mode indices 0..NDET-1 are det_modes.
enum { SR_ROW = NDET, NROWS = NDET + 1, NPOL = FMT_NOVERFLOW };

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
// --- the reference grid of one format (magnitudes only; the sign is applied by the rules)

typedef struct {
    const fmt_t *f;
    int n;           // grid points v[0..n): the finite magnitudes in order, then one above max
    double *v;       // v[0] = 0, or the smallest value where the format has no zero (e8m0)
    double *mid;     // mid[i] = (v[i] + v[i+1]) / 2, exact
    uint8_t *odd;    // parity of the code of v[i] (what ties-to-even and to-odd look at)
    double max;      // v[n-2]
    bool has_inf, has_nan, has_zero, negzero, is_signed;
} grid_t;

// Value of the positive code c from its fields, exactly, in MPFR. The code one past the
// largest finite code is decoded by the same field rule (with the exponent field possibly one
// past all-ones): that is the next point of the unbounded-exponent grid, max + ulp(max).
static void decode_code(mpfr_t out, const fmt_t *f, uint64_t c) {
    const uint64_t E = c >> f->mbits, M = c & ((1ULL << f->mbits) - 1);
    if (f->special == FMT_E8M0) {  // exponent only, no zero, no subnormals
        mpfr_set_ui(out, 1, MPFR_RNDN);
        mpfr_mul_2si(out, out, (long)c - f->bias, MPFR_RNDN);
    } else if (E == 0) {  // subnormal binade: M * 2^(1 - bias - m)
        mpfr_set_ui(out, M, MPFR_RNDN);
        mpfr_mul_2si(out, out, 1L - f->bias - f->mbits, MPFR_RNDN);
    } else {  // (2^m + M) * 2^(E - bias - m)
        mpfr_set_ui(out, (1UL << f->mbits) + M, MPFR_RNDN);
        mpfr_mul_2si(out, out, (long)E - f->bias - f->mbits, MPFR_RNDN);
    }
}

// Whether positive code c is inf or NaN rather than finite.
static bool code_special(const fmt_t *f, uint64_t c) {
    const uint64_t etop = (1ULL << f->ebits) - 1, E = c >> f->mbits;
    const uint64_t M = c & ((1ULL << f->mbits) - 1), mtop = (1ULL << f->mbits) - 1;
    switch (f->special) {
    case FMT_IEEE: return E == etop;
    case FMT_FN: return E == etop && M == mtop;
    case FMT_E8M0: return c == etop;
    case FMT_EXTENDED:  // inf on the all-ones magnitude (signed) or one below NaN's all ones
        return f->is_signed ? c == (etop << f->mbits | mtop) : c + 1 >= (etop << f->mbits | mtop);
    case FMT_FNUZ:   // its only NaN is the negative-zero code
    case FMT_FINITE: return false;
    }
    return false;
}

static double mpfr_to_double_exact(mpfr_t x, const char *what, const char *name) {
    double d = mpfr_get_d(x, MPFR_RNDN);
    if (mpfr_cmp_d(x, d) != 0) {
        fprintf(stderr, "verify_exhaustive: %s of %s is not a double; expected every format "
                "of 16 bits or fewer to embed in float32\n", what, name);
        exit(2);
    }
    return d;
}

static void grid_build(grid_t *g, const fmt_t *f) {
    memset(g, 0, sizeof *g);
    g->f = f;
    g->has_inf = f->special == FMT_IEEE || f->special == FMT_EXTENDED;
    g->has_nan = f->special != FMT_FINITE;
    g->has_zero = f->special != FMT_E8M0;
    g->is_signed = f->is_signed;
    g->negzero = f->is_signed && f->special != FMT_FNUZ && f->special != FMT_EXTENDED;
    const uint64_t ncodes = 1ULL << (f->bits - (f->is_signed ? 1 : 0));  // positive half
    g->v = malloc((ncodes + 1) * sizeof *g->v);
    g->mid = malloc((ncodes + 1) * sizeof *g->mid);
    g->odd = malloc(ncodes + 1);
    mpfr_t a, b;
    mpfr_inits2(128, a, b, (mpfr_ptr)0);
    uint64_t last = 0;
    for (uint64_t c = 0; c < ncodes; c++) {
        if (code_special(f, c)) continue;
        decode_code(a, f, c);
        g->v[g->n] = mpfr_to_double_exact(a, "a value", f->name);
        g->odd[g->n] = c & 1;
        g->n++, last = c;
    }
    decode_code(a, f, last + 1);
    g->v[g->n] = mpfr_to_double_exact(a, "the grid point above max", f->name);
    g->odd[g->n] = (last + 1) & 1;
    g->n++;
    g->max = g->v[g->n - 2];
    for (int i = 0; i + 1 < g->n; i++) {
        if (!(g->v[i] < g->v[i + 1])) {
            fprintf(stderr, "verify_exhaustive: %s: values not increasing at %d\n", f->name, i);
            exit(2);
        }
        mpfr_set_d(a, g->v[i], MPFR_RNDN);
        mpfr_set_d(b, g->v[i + 1], MPFR_RNDN);
        mpfr_add(a, a, b, MPFR_RNDN);
        mpfr_div_2ui(a, a, 1, MPFR_RNDN);
        g->mid[i] = mpfr_to_double_exact(a, "a midpoint", f->name);
    }
    // The runs of classify_chunk end at these boundaries, found as float32 bit patterns.
    for (int i = 0; i < g->n; i++) {
        bool ok = g->v[i] > 0x1.fffffep127 || (double)(float)g->v[i] == g->v[i];
        if (i + 1 < g->n) ok &= g->mid[i] > 0x1.fffffep127 || (double)(float)g->mid[i] == g->mid[i];
        if (!ok) {
            fprintf(stderr, "verify_exhaustive: %s: grid point or midpoint %d is not a float32\n",
                    f->name, i);
            exit(2);
        }
    }
    mpfr_clears(a, b, (mpfr_ptr)0);
}

static void grid_free(grid_t *g) { free(g->v), free(g->mid), free(g->odd); }

// --- classification of an input against the grid (once per chunk, for every mode)

enum {
    C_EXACT,    // |x| == v[idx]
    C_BELOW,    // v[idx] < |x| < mid[idx]
    C_TIE,      // |x| == mid[idx]
    C_ABOVE,    // mid[idx] < |x| < v[idx+1]
    C_BEYOND,   // |x| > the grid point above max: every mode overflows
    C_NAN,
    C_INF,
    C_CLAMP,    // 0 < |x| < smallest value of a format without zero (e8m0)
    C_INVALID,  // a value an unsigned format cannot hold by sign: negative, or zero in e8m0
};

// A run of consecutive inputs [start, end) (bit patterns) with the same class and interval.
typedef struct {
    uint32_t start, end;
    uint16_t idx;
    uint8_t cls;
} seg_t;

// Largest i with v[i] <= a, or -1.
static int grid_floor(const grid_t *g, double a) {
    int lo = -1, hi = g->n;  // v[lo] <= a < v[hi], with v[-1] = -inf and v[n] = +inf
    while (hi - lo > 1) {
        int m = (lo + hi) / 2;
        if (g->v[m] <= a) lo = m;
        else hi = m;
    }
    return lo;
}

// The first non-negative float32 bit pattern whose value is >= b (b is a float32 value or
// beyond float32's range): bit patterns of non-negative floats are ordered as their values.
static uint32_t first_at_or_above(double b) {
    return b > 0x1.fffffep127 ? 0x7f800000u : f2u((float)b);
}

// Splits the CHUNK inputs from bit pattern `first` (one sign, increasing magnitude) into runs.
// The class of a run is decided by comparing its first input with the grid in double (exact);
// its end is the next grid boundary. Returns the number of runs written to seg.
static size_t classify_chunk(const grid_t *g, uint32_t first, seg_t *seg) {
    const uint32_t sign = first >> 31, a0 = first & 0x7fffffffu, a_end = a0 + CHUNK;
    size_t ns = 0;
    if (sign && !g->is_signed && !g->has_zero) {  // -inf and -NaN included: NaN either way
        seg[ns++] = (seg_t){first, first + CHUNK, 0, C_INVALID};
        return ns;
    }
    // Negatives into unsigned formats with a zero are classified by magnitude: the P3109
    // policies round them first (expect() decides).
    if ((a0 >> 23) == 255u) {  // a chunk never straddles an exponent boundary
        seg[ns++] = (seg_t){first, first + 1, 0, C_INF};
        seg[ns++] = (seg_t){first + 1, first + CHUNK, 0, C_NAN};
        if (a0 & 0x7fffffu) seg[0].cls = C_NAN;
        return ns;
    }
    int i = grid_floor(g, u2f(a0));
    for (uint32_t a = a0; a < a_end;) {
        const double x = u2f(a);
        uint32_t end;
        uint8_t c;
        if (i < 0) {  // below the smallest value: only in a format without zero
            c = x == 0 ? C_INVALID : C_CLAMP;
            end = x == 0 ? a + 1 : first_at_or_above(g->v[0]);
        } else if (x == g->v[i]) c = C_EXACT, end = a + 1;
        else if (i == g->n - 1) c = C_BEYOND, end = a_end;
        else if (x < g->mid[i]) c = C_BELOW, end = first_at_or_above(g->mid[i]);
        else if (x == g->mid[i]) c = C_TIE, end = a + 1;
        else c = C_ABOVE, end = first_at_or_above(g->v[i + 1]);
        if (end > a_end) end = a_end;
        seg[ns++] = (seg_t){a | sign << 31, end | sign << 31, (uint16_t)(i < 0 ? 0 : i), c};
        a = end;
        while (i + 1 < g->n && a < a_end && (double)u2f(a) >= g->v[i + 1]) i++;
    }
    return ns;
}

// --- the rules

static float with_sign(double mag, uint32_t sign) { return sign ? -(float)mag : (float)mag; }

// What an overflowing magnitude becomes, by policy. IEEE: infinity in nearest modes and in the
// directed mode pointing away from zero, max toward zero and in to-odd; "infinity" is NaN in
// formats without inf, and max without NaN either. P3109 (interim report 4.7.5): saturate and
// satpropagate give max; satnone gives max toward zero and toward the other side (and in to-odd
// into an unsigned extended format), else infinity where the format has it, else max.
static double overflow_mag(const grid_t *g, fmt_round_mode mode, fmt_overflow ov, uint32_t sign) {
    if (ov == FMT_SATURATE || ov == FMT_SAT_PROPAGATE) return g->max;
    if (ov == FMT_SAT_NONE) {
        const bool keep_max = mode == FMT_RTZ || (sign ? mode == FMT_RUP : mode == FMT_RDN) ||
                              (!sign && mode == FMT_RTO && !g->is_signed);
        return g->has_inf && !keep_max ? INFINITY : g->max;
    }
    bool to_inf = mode == FMT_RNE || mode == FMT_RNA || (mode == FMT_RUP && !sign) ||
                  (mode == FMT_RDN && sign);
    if (!to_inf) return g->max;
    return g->has_inf ? INFINITY : g->has_nan ? NAN : g->max;
}

// The magnitude x rounds to on the grid (before any overflow rule; > max when it overflows).
static double grid_round_mag(const grid_t *g, fmt_round_mode mode, uint32_t sign, int i, int cls) {
    if (cls == C_EXACT) return g->v[i];
    if (cls == C_BEYOND) return INFINITY;
    bool up;  // away from zero, on the magnitude grid
    switch (mode) {
    case FMT_RNE: up = cls == C_ABOVE || (cls == C_TIE && g->odd[i]); break;
    case FMT_RNA: up = cls != C_BELOW; break;
    case FMT_RTZ: up = false; break;
    case FMT_RUP: up = !sign; break;
    case FMT_RDN: up = sign; break;
    case FMT_RTO: up = !g->odd[i]; break;
    default: up = false; break;
    }
    return g->v[i + up];
}

static float expect(const grid_t *g, fmt_round_mode mode, fmt_overflow ov, uint32_t sign, int i,
                    int cls) {
    const float nanv = g->has_nan ? NAN : 0.0f;
    if (sign && !g->is_signed && cls != C_INVALID) {  // a negative into an unsigned format with a zero
        if (cls == C_NAN) return nanv;
        const double r = cls == C_INF ? INFINITY : grid_round_mag(g, mode, sign, i, cls);
        if (ov == FMT_OVERFLOW_IEEE) return cls == C_EXACT && r == 0 ? 0.0f : nanv;  // -0 is +0
        if (r == 0) return 0.0f;  // rounded to zero first: +0
        if (ov != FMT_SAT_NONE) return 0.0f;  // clamped to the lowest value, 0
        if (cls == C_INF) return nanv;
        return mode == FMT_RTZ || mode == FMT_RUP ? 0.0f : nanv;
    }
    switch (cls) {
    case C_NAN: return g->has_nan ? NAN : g->is_signed ? -0.0f : 0.0f;  // no NaN: -0 (round.h)
    case C_INVALID: return nanv;
    case C_CLAMP: return (float)g->v[0];
    case C_INF:
        if (ov == FMT_SATURATE) return with_sign(g->max, sign);
        if (g->has_inf) return with_sign(INFINITY, sign);
        if (ov == FMT_OVERFLOW_IEEE) return with_sign(g->has_nan ? NAN : g->max, sign);
        return with_sign(g->max, sign);  // P3109 without inf: clamped
    default: break;
    }
    double r = grid_round_mag(g, mode, sign, i, cls);
    if (r > g->max) r = overflow_mag(g, mode, ov, sign);
    if (r == 0) return sign && g->negzero ? -0.0f : 0.0f;
    return with_sign(r, sign);
}

// --- the check

typedef struct {
    uint32_t in, got, want;
    int stats;       // 1: the call collected fmt_stats (a separately compiled loop)
    int path;        // the fmt_round_path that gave got
    int vs_generic;  // 1: want is the generic kernel's bits (NaN payloads included)
    int codes;       // 1: got and want are codes from fmt_encode_f32 (--codes)
} mismatch_t;

typedef struct {
    uint64_t count;
    int nshow;
    mismatch_t show[NSHOW];  // the smallest inputs that disagree
} report_t;

static void report_add(report_t *r, const mismatch_t *m) {
    r->count++;
    int pos = r->nshow;
    if (pos == NSHOW) {
        if (m->in >= r->show[NSHOW - 1].in) return;
        pos--;
    } else r->nshow++;
    while (pos > 0 && r->show[pos - 1].in > m->in) r->show[pos] = r->show[pos - 1], pos--;
    r->show[pos] = *m;
}

typedef struct {
    unsigned stride;     // check every stride-th chunk (1: exhaustive)
    bool both_loops;     // round every chunk both with and without statistics
    bool codes;          // also encode every chunk through the other paths (fmt_encode_f32)
    bool tty;
    const bool *msel;    // modes to check (indices into det_modes)
    const bool *osel;    // overflow policies to check (fmt_overflow values)
    bool psel[FMT_NPATHS];  // other paths to hold to the generic kernel (FMT_PATH_AUTO: the one
                            // fmt_round_f32 picks)
} run_opts;

// Equal bits, or both NaN (any payload, any sign).
static inline uint32_t differs(uint32_t a, uint32_t b) {
    const uint32_t nan_a = (a & 0x7fffffffu) > 0x7f800000u, nan_b = (b & 0x7fffffffu) > 0x7f800000u;
    return (a != b) & !(nan_a & nan_b);
}

// Checks one chunk of inputs in one (mode, policy) through the generic kernel: returns
// mismatches, adds them to rep.
static uint64_t check_chunk(const grid_t *g, fmt_round_mode mode, fmt_overflow ov, bool stats,
                            uint32_t first, const seg_t *seg, size_t ns, uint32_t *out,
                            report_t *rep, fmt_stats *st) {
    const fmt_round_opts o = {.mode = mode, .overflow = ov, .path = FMT_PATH_GENERIC};
    for (uint32_t j = 0; j < CHUNK; j++) out[j] = first + j;
    *st = (fmt_stats){0};
    fmt_round_f32(g->f, (float *)out, CHUNK, &o, stats ? st : NULL);
    uint64_t count = 0;
    for (size_t s = 0; s < ns; s++) {
        const uint32_t w = f2u(expect(g, mode, ov, first >> 31, seg[s].idx, seg[s].cls));
        const uint32_t *r = out + (seg[s].start - first);
        const uint32_t len = seg[s].end - seg[s].start;
        uint32_t bad = 0;
        for (uint32_t j = 0; j < len; j++) bad |= differs(r[j], w);
        if (!bad) continue;
        for (uint32_t j = 0; j < len; j++) {
            if (!differs(r[j], w)) continue;
            count++;
            const mismatch_t m = {seg[s].start + j, r[j], w, stats, FMT_PATH_GENERIC, 0, 0};
#pragma omp critical(report)
            report_add(rep, &m);
        }
    }
    return count;
}

// The same chunk through another path (the fast paths, the kernel's other copies): its bits must
// be the generic kernel's (in ref), NaN payloads included, and with statistics its counts those
// in sref; any difference is a mismatch (a count that differs: one, shown with got = want = 0).
static uint64_t check_path(const grid_t *g, fmt_round_mode mode, fmt_overflow ov, fmt_round_path path,
                           bool stats, uint32_t first, const uint32_t *ref, const fmt_stats *sref,
                           uint32_t *out, report_t *rep) {
    // (stochastic rounding: draw first + j for input first + j, as the generic kernel's call had)
    const fmt_round_opts o = {.mode = mode, .overflow = ov, .path = path,
                              .offset = mode == FMT_SR ? first : 0};
    if (!fmt_path_available(path, g->f, &o, stats)) return 0;
    for (uint32_t j = 0; j < CHUNK; j++) out[j] = first + j;
    fmt_stats st = {0};
    fmt_round_f32(g->f, (float *)out, CHUNK, &o, stats ? &st : NULL);
    const int took = (int)fmt_path_chosen(g->f, &o, stats);
    uint64_t count = 0;
    if (stats && sref && memcmp(&st, sref, sizeof st)) {
        count++;
        const mismatch_t m = {first, 0, 0, 1, took, 1, 0};
#pragma omp critical(report)
        report_add(rep, &m);
    }
    if (!memcmp(out, ref, CHUNK * sizeof *out)) return count;
    for (uint32_t j = 0; j < CHUNK; j++) {
        if (out[j] == ref[j]) continue;
        count++;
        const mismatch_t m = {first + j, out[j], ref[j], stats, took, 1, 0};
#pragma omp critical(report)
        report_add(rep, &m);
    }
    return count;
}

// The chunk's codes (fmt_encode_f32) through the other selected paths, held to the generic
// path's (its kernel's rounding, then the portable code formulas); with statistics too where
// stats, their counts to the generic path's. in, ref, got: CHUNK elements each.
static uint64_t check_codes(const grid_t *g, fmt_round_mode mode, fmt_overflow ov, const bool *psel, bool stats,
                            uint32_t first, uint32_t *in, uint16_t *ref, uint16_t *got, report_t *rep) {
    const size_t bytes = fmt_code_bytes(g->f);  // 1 or 2 (formats of 16 bits or fewer)
    fmt_round_opts o = {.mode = mode, .overflow = ov, .path = FMT_PATH_GENERIC,
                        .offset = mode == FMT_SR ? first : 0};
    for (uint32_t j = 0; j < CHUNK; j++) in[j] = first + j;
    fmt_stats sref = {0};
    fmt_encode_f32(g->f, ref, (const float *)in, CHUNK, &o, stats ? &sref : NULL);
    uint64_t count = 0;
    for (int q = 0; q < FMT_NPATHS; q++) {
        o.path = (fmt_round_path)q;
        if (!psel[q] || q == FMT_PATH_GENERIC || !fmt_path_available(o.path, g->f, &o, stats)) continue;
        fmt_stats st = {0};
        fmt_encode_f32(g->f, got, (const float *)in, CHUNK, &o, stats ? &st : NULL);
        const int took = (int)fmt_path_chosen(g->f, &o, stats);
        if (stats && memcmp(&st, &sref, sizeof st)) {
            count++;
            const mismatch_t m = {first, 0, 0, 1, took, 1, 1};
#pragma omp critical(report)
            report_add(rep, &m);
        }
        if (!memcmp(got, ref, CHUNK * bytes)) continue;
        for (uint32_t j = 0; j < CHUNK; j++) {
            const uint32_t a = bytes == 1 ? ((uint8_t *)got)[j] : got[j];
            const uint32_t b = bytes == 1 ? ((uint8_t *)ref)[j] : ref[j];
            if (a == b) continue;
            count++;
            const mismatch_t m = {first + j, a, b, stats, took, 1, 1};
#pragma omp critical(report)
            report_add(rep, &m);
        }
    }
    return count;
}

// Checks one format in the selected modes and both overflow policies; fills rep[mode][policy].
static uint64_t check_format(const grid_t *g, const run_opts *ro, report_t rep[NROWS][NPOL]) {
    const unsigned nchunks = (NCHUNKS + ro->stride - 1) / ro->stride;
    unsigned done = 0, shown = 0;
    uint64_t total = 0;
    char modes[64] = "";
    for (int mi = 0; mi < NROWS; mi++)
        if (ro->msel[mi])
            snprintf(modes + strlen(modes), sizeof modes - strlen(modes), "%s%s", modes[0] ? "," : "",
                     fmt_mode_name(mi == SR_ROW ? FMT_SR : det_modes[mi]));
#pragma omp parallel reduction(+ : total)
    {
        // A run ends at a grid point, a midpoint or one input past one, so a chunk has at most
        // 2 * CHUNK runs; in practice a few hundred.
        seg_t *seg = malloc(2 * (size_t)CHUNK * sizeof *seg);
        uint32_t *out = malloc(CHUNK * sizeof *out), *out2 = malloc(CHUNK * sizeof *out2);
        uint16_t *cref = ro->codes ? malloc(CHUNK * sizeof *cref) : NULL;
        uint16_t *cgot = ro->codes ? malloc(CHUNK * sizeof *cgot) : NULL;
#pragma omp for schedule(dynamic, 1)
        for (unsigned k = 0; k < nchunks; k++) {
            const uint32_t first = (uint32_t)(k * ro->stride) << CHUNK_LOG2;
            const size_t ns = classify_chunk(g, first, seg);
            if (ro->msel[SR_ROW])
                for (int p = 0; p < NPOL; p++) {
                    if (!ro->osel[p]) continue;
                    const fmt_overflow ov = (fmt_overflow)p;
                    const fmt_round_opts o = {.mode = FMT_SR, .overflow = ov, .path = FMT_PATH_GENERIC,
                                              .offset = first};
                    const bool st = k & 1;
                    fmt_stats sref = {0};
                    for (uint32_t j = 0; j < CHUNK; j++) out[j] = first + j;
                    fmt_round_f32(g->f, (float *)out, CHUNK, &o, st ? &sref : NULL);
                    for (int q = 0; q < FMT_NPATHS; q++)
                        if (ro->psel[q] && q != FMT_PATH_GENERIC)
                            total += check_path(g, FMT_SR, ov, (fmt_round_path)q, st, first, out, &sref,
                                                out2, &rep[SR_ROW][p]);
                }
            for (int mi = 0; mi < NDET; mi++) {
                if (!ro->msel[mi]) continue;
                for (int p = 0; p < NPOL; p++) {
                    if (!ro->osel[p]) continue;
                    // Statistics select a separately compiled loop of the kernel: by default
                    // every other chunk takes it, so both loops see every kind of input.
                    const fmt_overflow ov = (fmt_overflow)p;
                    for (int st = 0; st < 2; st++) {
                        if (!ro->both_loops && st != (int)(k & 1)) continue;
                        fmt_stats sref;
                        total += check_chunk(g, det_modes[mi], ov, st, first, seg, ns, out, &rep[mi][p], &sref);
                        // Every other selected path on the same chunk, against these bits and counts.
                        for (int q = 0; q < FMT_NPATHS; q++)
                            if (ro->psel[q] && q != FMT_PATH_GENERIC)
                                total += check_path(g, det_modes[mi], ov, (fmt_round_path)q, st, first, out,
                                                    &sref, out2, &rep[mi][p]);
                    }
                }
            }
            for (int mi = 0; ro->codes && mi < NROWS; mi++)
                for (int p = 0; ro->msel[mi] && p < NPOL; p++)
                    for (int st = 0; ro->osel[p] && st < 2; st++)
                        if (ro->both_loops || st == (int)(k & 1))
                            total += check_codes(g, mi == SR_ROW ? FMT_SR : det_modes[mi],
                                                 (fmt_overflow)p, ro->psel, st, first, out,
                                                 cref, cgot, &rep[mi][p]);
            unsigned d;
#pragma omp atomic capture
            d = ++done;
            const unsigned pct = (unsigned)(100.0 * d / nchunks);
#pragma omp critical(progress)
            if (pct > shown && (ro->tty || pct % 10 == 0)) {
                shown = pct;
                fprintf(stderr, ro->tty ? "\r%-9s %s %3u%% " : "%-9s %s %3u%%\n", g->f->name, modes,
                        pct);
            }
        }
        free(seg), free(out), free(out2), free(cref), free(cgot);
    }
    if (ro->tty) fprintf(stderr, "\r%60s\r", "");
    return total;
}

static void print_report(const fmt_t *f, fmt_round_mode mode, fmt_overflow ov, const report_t *r) {
    printf("  %s %s %s: %llu mismatches\n", f->name, fmt_mode_name(mode), fmt_overflow_name(ov),
           (unsigned long long)r->count);
    for (int i = 0; i < r->nshow; i++) {
        const mismatch_t *m = &r->show[i];
        if (m->codes)
            printf("    in 0x%08x (%a)  code 0x%x  want 0x%x  [fmt_encode_f32, path %s%s]\n", m->in, u2f(m->in),
                   m->got, m->want, fmt_path_name((fmt_round_path)m->path),
                   m->got == m->want ? ", statistics differ from the generic path's" : "");
        else
            printf("    in 0x%08x (%a)  got 0x%08x (%a)  want 0x%08x (%a)  [path %s%s%s]\n", m->in,
                   u2f(m->in), m->got, u2f(m->got), m->want, u2f(m->want),
                   fmt_path_name((fmt_round_path)m->path), m->stats ? ", with stats" : "",
                   m->vs_generic ? (m->got == m->want ? ", statistics differ from the generic kernel's"
                                                      : ", want: the generic kernel's bits") : "");
    }
}

static void usage(FILE *to) {
    fprintf(to,
            "usage: verify_exhaustive [--format NAME[,NAME...]] [--mode MODE[,MODE...]] [--overflow P[,P...]]\n"
            "                         [--stride K] [--both-loops] [--paths LIST] [--codes]\n"
            "Rounds all 2^32 float32 bit patterns with fmt_round_f32's generic kernel and compares\n"
            "bit-exactly with an MPFR-built reference, for every table format of 16 bits or fewer,\n"
            "modes rne rna rtz rup rdn rto, overflow policies ieee, saturate, satpropagate and\n"
            "satnone (IEEE P3109's saturation modes). Every other chunk is\n"
            "rounded with statistics (a separately compiled loop of the kernel). Every other path of\n"
            "fmt_round_f32 this build and CPU have for a call must give the generic kernel's bits.\n"
            "  --paths LIST   the other paths held to the generic kernel: all (the default), none,\n"
            "                 auto (the one fmt_round_f32 picks) or names among avx2 avx512 hw lean\n"
            "  --format LIST  these formats instead of the table's (names, aliases, IEEE P3109\n"
            "                 names, custom eXmY specs; 16 bits or fewer; comma separated)\n"
            "  --overflow LIST  only these overflow policies (ieee saturate satpropagate satnone)\n"
            "  --mode LIST    only these modes (sr: the other paths against the generic kernel only)\n"
            "  --stride K     check every K-th chunk of 2^%d inputs (for a time estimate; the\n"
            "                 result is then not exhaustive)\n"
            "  --both-loops   round every chunk both with and without statistics (twice the time)\n"
            "  --codes        also encode every chunk (fmt_encode_f32) through the other paths and\n"
            "                 hold their codes (and counts) to the generic path's\n"
            "  --help         this text\n"
            "Exit status: 0 all agree, 1 mismatches, 2 bad usage.\n",
            CHUNK_LOG2);
}

// Parses a comma list with parse(item) -> index or -1 into sel[].
static bool parse_list(const char *list, bool *sel, int n, int (*parse)(const char *)) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int i = parse(t);
        if (i < 0 || i >= n) return fprintf(stderr, "verify_exhaustive: unknown '%s'\n", t), false;
        sel[i] = true;
    }
    return true;
}

// Formats of --format: any name fmt_from_name accepts whose values float32 holds (16 bits or
// fewer); the table's by default.
enum { MAXF = 64 };
static fmt_t fmts[MAXF];
static int nfmts;

static int parse_format(const char *name) {
    fmt_t f;
    if (fmt_from_name(&f, name) != FMT_OK || f.bits > 16 || nfmts == MAXF) return -1;
    fmts[nfmts] = f;
    return nfmts++;
}

static int parse_overflow(const char *name) {
    fmt_overflow o;
    return fmt_overflow_from_name(&o, name) == FMT_OK ? (int)o : -1;
}

static int parse_mode(const char *name) {
    fmt_round_mode m;
    if (fmt_mode_from_name(&m, name) != FMT_OK) return -1;
    for (int i = 0; i < NDET; i++)
        if (det_modes[i] == m) return i;
    return m == FMT_SR ? SR_ROW : -1;
}

static int parse_path(const char *name) {
    fmt_round_path p;
    return fmt_path_from_name(&p, name) == FMT_OK ? (int)p : -1;
}

int main(int argc, char **argv) {
    bool fsel[MAXF] = {0}, msel[NROWS] = {0}, osel[NPOL] = {0}, many = false, oany = false;
    run_opts ro = {.stride = 1, .tty = isatty(2), .msel = msel, .osel = osel};
    for (int q = 0; q < FMT_NPATHS; q++) ro.psel[q] = q != FMT_PATH_AUTO;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) return usage(stdout), 0;
        if (!strcmp(argv[a], "--both-loops")) { ro.both_loops = true; continue; }
        if (!strcmp(argv[a], "--codes")) { ro.codes = true; continue; }
        if (a + 1 >= argc) return usage(stderr), 2;
        if (!strcmp(argv[a], "--paths")) {
            const char *v = argv[++a];
            memset(ro.psel, 0, sizeof ro.psel);
            if (!strcmp(v, "all")) {
                for (int q = 0; q < FMT_NPATHS; q++) ro.psel[q] = q != FMT_PATH_AUTO;
            } else if (strcmp(v, "none") && !parse_list(v, ro.psel, FMT_NPATHS, parse_path)) {
                return 2;
            }
        } else if (!strcmp(argv[a], "--format")) {
            if (!parse_list(argv[++a], fsel, MAXF, parse_format)) return 2;
        } else if (!strcmp(argv[a], "--mode")) {
            if (!parse_list(argv[++a], msel, NROWS, parse_mode)) return 2;
            many = true;
        } else if (!strcmp(argv[a], "--overflow")) {
            if (!parse_list(argv[++a], osel, NPOL, parse_overflow)) return 2;
            oany = true;
        } else if (!strcmp(argv[a], "--stride")) {
            char *end;
            long s = strtol(argv[++a], &end, 10);
            if (*end || s < 1 || s > NCHUNKS) {
                fprintf(stderr, "verify_exhaustive: --stride %s: expected 1..%d\n", argv[a], NCHUNKS);
                return 2;
            }
            ro.stride = (unsigned)s;
        } else return usage(stderr), 2;
    }
    if (!nfmts)
        for (size_t i = 0; i < fmt_table_count() && nfmts < MAXF; i++)
            if (fmt_table_get(i)->bits <= 16) fmts[nfmts++] = *fmt_table_get(i);
    if (!many)
        for (int i = 0; i < NROWS; i++) msel[i] = true;
    if (!oany)
        for (int i = 0; i < NPOL; i++) osel[i] = true;

    int nthreads = 1;
#ifdef _OPENMP
    nthreads = omp_get_max_threads();
#endif
    char pnames[128] = "";
    for (int q = 0; q < FMT_NPATHS; q++)
        if (ro.psel[q] && q != FMT_PATH_GENERIC)
            snprintf(pnames + strlen(pnames), sizeof pnames - strlen(pnames), " %s",
                     fmt_path_name((fmt_round_path)q));
    printf("verify_exhaustive: %s float32 inputs%s, chunks of 2^%d, %d threads; other paths held to "
           "the generic kernel where available:%s\n",
           ro.stride == 1 ? "all 2^32" : "a sample of", ro.stride == 1 ? "" : " (--stride)",
           CHUNK_LOG2, nthreads, pnames[0] ? pnames : " none");
    fflush(stdout);
    const double t0 = fio_now();
    uint64_t grand = 0;
    for (int fi = 0; fi < nfmts; fi++) {
        const fmt_t *f = &fmts[fi];
        grid_t g;
        grid_build(&g, f);
        const double tf = fio_now();
        report_t (*rep)[NPOL] = calloc(NROWS, sizeof *rep);
        const uint64_t fmis = check_format(&g, &ro, rep);
        for (int mi = 0; mi < NROWS; mi++) {
            if (!msel[mi]) continue;
            const fmt_round_mode mode = mi == SR_ROW ? FMT_SR : det_modes[mi];
            printf("%-12s %-4s", f->name, fmt_mode_name(mode));
            for (int p = 0; p < NPOL; p++)
                if (osel[p])
                    printf(" %s: %llu", fmt_overflow_name((fmt_overflow)p), (unsigned long long)rep[mi][p].count);
            printf(" mismatches%s\n", mi == SR_ROW ? " (the other paths against the generic kernel)" : "");
            for (int p = 0; p < NPOL; p++)
                if (rep[mi][p].count) print_report(f, mode, (fmt_overflow)p, &rep[mi][p]);
        }
        free(rep);
        printf("%-9s done in %.1f s (%d grid points), %llu mismatches\n", f->name, fio_now() - tf,
               g.n, (unsigned long long)fmis);
        fflush(stdout);
        grand += fmis;
        grid_free(&g);
    }
    printf("total: %.1f s, %llu mismatches%s\n", fio_now() - t0, (unsigned long long)grand,
           ro.stride == 1 ? "" : " (sampled with --stride: not exhaustive)");
    return grand ? 1 : 0;
}
