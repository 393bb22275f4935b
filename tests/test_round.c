// test_round.c: the fast rounding paths (fmt_round_f32, fmt_round_f64, fmt_round1) against the
// MPFR reference fmt_ref_round, bit for bit, for every table format but fp64 and a set of
// custom formats (IEEE P3109 ones among them), in every deterministic mode and every overflow
// policy (ieee and P3109's satfinite, satpropagate, satnone; flushing on a subset).
// Inputs are built in bit space: every value of the format (a seeded sample plus the codes near
// zero, the smallest normal and max for formats over 16 bits), every midpoint and the next
// grid point above, one fp32 (and fp64) ulp either side of each, overflow and underflow
// thresholds, walking-one significands, specials, fp32 subnormals, both signs, plus seeded
// random fp32 bit patterns. Seed: env FPLAB_SEED (printed). Also: statistics on hand-built
// arrays for e4m3 and e8m0. Every path of fmt_round_f32 (generic kernel, its AVX2/AVX-512
// copies, hardware converters, explicit AVX-512 or AVX2 kernels) that this build and CPU have is
// held to MPFR and, bit for bit, to the generic kernel; also with MXCSR's DAZ and FTZ set.
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <criterion/parameterized.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "formats/round_internal.h"  // the AVX2 kernels themselves (lean_avx2_kernel)
#include "formats/round_ref.h"
#include "test_util.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// --- helpers

// This suite's seed: FPLAB_SEED, else its default; printed with the test's name.
static uint64_t test_seed(const char *test) { return tu_seed("test_round", test, 0x5eed2024ULL); }

static bool is_f32(double x) { return isnan(x) || (double)(float)x == x; }

typedef struct {
    double *v;
    size_t n, cap;
} dvec;

static void push(dvec *d, double x) {
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 4096;
        d->v = realloc(d->v, d->cap * sizeof *d->v);
        cr_assert(d->v != NULL, "out of memory");
    }
    d->v[d->n++] = x;
}

// A point, the fp32 values one ulp either side (when it is a float32 value in range) and the
// fp64 values one ulp either side.
static void push_around(dvec *d, double p) {
    push(d, p);
    push(d, nextafter(p, INFINITY));
    push(d, nextafter(p, -INFINITY));
    if (is_f32(p) && fabs(p) <= FLT_MAX) {
        push(d, nextafterf((float)p, INFINITY));
        push(d, nextafterf((float)p, -INFINITY));
    }
}

// The grid spacing of f at positive v (the unbounded-exponent grid above max, the subnormal
// spacing below the smallest normal, also for formats without subnormals).
static double grid_ulp(const fmt_t *f, double v) {
    int e = v > 0 ? ilogb(v) : f->emin;
    if (e < f->emin) e = f->emin;
    return ldexp(1.0, e - f->mbits);
}

static uint64_t positive_code_count(const fmt_t *f) {
    return (uint64_t)1 << (f->is_signed ? f->bits - 1 : f->bits);
}

static int cmp_double_bits(const void *a, const void *b) {
    uint64_t x = tu_d2u(*(const double *)a), y = tu_d2u(*(const double *)b);
    return x < y ? -1 : x > y;
}

// The inputs for format f: both signs of everything, duplicates removed (NaNs kept).
static void build_inputs(const fmt_t *f, dvec *d, uint64_t seed) {
    dvec pos = {0};
    const uint64_t npos = positive_code_count(f);
    const bool enumerate = f->bits <= 16;
    const uint64_t window = 1024;
    uint64_t rs = seed ^ 0xC0DE;
    // Positive codes: all of them, or a sample plus the codes near zero, the smallest normal
    // and the top (max and the specials above it).
    uint64_t nsample = enumerate ? npos : 4096 + 3 * (2 * window);
    for (uint64_t i = 0; i < nsample; i++) {
        uint64_t c;
        if (enumerate) c = i;
        else if (i < 4096) c = tu_splitmix64(&rs) % npos;
        else {
            uint64_t j = i - 4096, which = j / (2 * window), k = j % (2 * window);
            uint64_t centre = which == 0 ? window : which == 1 ? (uint64_t)1 << f->mbits : npos - window;
            c = centre - window + k;
            if (c >= npos) continue;
        }
        const double v = fmt_ref_decode(f, c);
        if (isnan(v)) continue;
        if (isinf(v)) { push(&pos, v); continue; }
        const double u = grid_ulp(f, v);
        push_around(&pos, v);
        push_around(&pos, v + u / 2);  // midpoint to the next grid point (overflow threshold at max)
        if (v >= f->max) push_around(&pos, v + u);  // the first grid point above max
    }
    // Underflow thresholds: quarter, half and three quarters of the smallest subnormal.
    push_around(&pos, f->min_subnormal / 4);
    push_around(&pos, f->min_subnormal / 2);
    push_around(&pos, f->min_subnormal * 0.75);
    push_around(&pos, f->min_normal);
    push_around(&pos, f->min_normal - f->min_subnormal / 2);
    // Overflow: max, half an ulp above, the next binade and a little beyond.
    const double umax = grid_ulp(f, f->max);
    push_around(&pos, f->max);
    push_around(&pos, f->max + umax / 2);
    push_around(&pos, f->max + umax);
    push_around(&pos, ldexp(1.0, f->emax + 1));
    push_around(&pos, ldexp(1.5, f->emax + 1));
    push_around(&pos, ldexp(1.0, f->emax + 2));
    // Walking-one significands in every binade of the format and two beyond each end.
    for (int e = f->emin - f->mbits - 3; e <= f->emax + 2; e++)
        for (int k = 1; k <= 30; k++) {
            push(&pos, ldexp(1.0 + ldexp(1.0, -k), e));
            push(&pos, ldexp(2.0 - ldexp(1.0, -k), e));
        }
    // Specials and float32 edge values.
    const double extra[] = {0.0, INFINITY, NAN, FLT_TRUE_MIN, 2 * FLT_TRUE_MIN, FLT_MIN,
                            FLT_MIN - FLT_TRUE_MIN, FLT_MIN / 2, FLT_MAX, 1.0, 0.1, 1.0 / 3,
                            DBL_MAX, DBL_MIN, DBL_TRUE_MIN, 1e300, 1e-300};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) push(&pos, extra[i]);
    push(&pos, (double)tu_u2f(0x7fa00000u));  // a signalling NaN pattern (converted: quiet)
    // Random float32 subnormals and random float32 bit patterns over the whole range.
    for (int i = 0; i < 256; i++) push(&pos, (double)tu_u2f((uint32_t)tu_splitmix64(&rs) & 0x7fffffu));
    for (int i = 0; i < 20000; i++) push(&pos, (double)tu_u2f((uint32_t)tu_splitmix64(&rs) & 0x7fffffffu));

    for (size_t i = 0; i < pos.n; i++) {
        push(d, fabs(pos.v[i]));
        push(d, -fabs(pos.v[i]));
    }
    free(pos.v);
    qsort(d->v, d->n, sizeof *d->v, cmp_double_bits);
    size_t w = 0;
    for (size_t i = 0; i < d->n; i++)
        if (w == 0 || tu_d2u(d->v[i]) != tu_d2u(d->v[w - 1])) d->v[w++] = d->v[i];
    d->n = w;
}

// --- one format, every mode and policy

typedef struct {
    size_t checked, failed;
} tally;

static void report(tally *t, const fmt_t *f, const char *path, fmt_round_mode mode, fmt_overflow ov,
                   bool flush, double x, double got, double want) {
    t->checked++;
    if (tu_same(got, want)) return;
    if (++t->failed <= 8)
        cr_expect_fail("%s %s %s %s%s: x=%a (0x%016" PRIx64 ") got %a (0x%016" PRIx64
                       ") want %a (0x%016" PRIx64 ")",
                       path, f->name, fmt_mode_name(mode), fmt_overflow_name(ov),
                       flush ? " flush" : "", x, tu_d2u(x), got, tu_d2u(got), want, tu_d2u(want));
}

// Every path of fmt_round_f32 this build and CPU have for (f, o), without statistics and (where
// the path counts) with them: against MPFR, and bit for bit (NaN payloads included) against the
// generic kernel, whose statistics the others must match.
static void check_paths(const fmt_t *f, const dvec *in, fmt_round_opts o, const double *want,
                        const size_t *idx32, size_t n32, tally *t) {
    float *ref = malloc((n32 ? n32 : 1) * sizeof *ref), *y = malloc((n32 ? n32 : 1) * sizeof *y);
    cr_assert(ref && y, "out of memory");
    for (int st = 0; st < 2; st++) {
        fmt_stats sref = {0};
        for (size_t j = 0; j < n32; j++) ref[j] = (float)in->v[idx32[j]];
        o.path = FMT_PATH_GENERIC;
        cr_assert_eq(fmt_round_f32(f, ref, n32, &o, st ? &sref : NULL), FMT_OK);
        for (int p = FMT_PATH_GENERIC + 1; p < FMT_NPATHS; p++) {
            o.path = (fmt_round_path)p;
            if (!fmt_path_available(o.path, f, &o, st)) continue;
            fmt_stats sp = {0};
            for (size_t j = 0; j < n32; j++) y[j] = (float)in->v[idx32[j]];
            cr_assert_eq(fmt_round_f32(f, y, n32, &o, st ? &sp : NULL), FMT_OK);
            if (st && memcmp(&sp, &sref, sizeof sp) && ++t->failed <= 8)
                cr_expect_fail("path %s %s %s %s: statistics differ from the generic kernel's",
                               fmt_path_name(o.path), f->name, fmt_mode_name(o.mode),
                               fmt_overflow_name(o.overflow));
            for (size_t j = 0; j < n32; j++) {
                const size_t i = idx32[j];
                report(t, f, fmt_path_name(o.path), o.mode, o.overflow, o.flush_subnormals, in->v[i],
                       (double)y[j], want[i]);
                if (tu_f2u(y[j]) != tu_f2u(ref[j]) && ++t->failed <= 8)
                    cr_expect_fail("path %s %s %s %s%s: x=%a gives 0x%08" PRIx32
                                   ", the generic kernel 0x%08" PRIx32,
                                   fmt_path_name(o.path), f->name, fmt_mode_name(o.mode),
                                   fmt_overflow_name(o.overflow), o.flush_subnormals ? " flush" : "",
                                   in->v[i], tu_f2u(y[j]), tu_f2u(ref[j]));
            }
        }
    }
    free(ref), free(y);
}

static void check_combo(const fmt_t *f, const dvec *in, fmt_round_mode mode, fmt_overflow ov,
                        bool flush, tally *t) {
    const size_t n = in->n;
    double *want = malloc(n * sizeof *want), *y64 = malloc(n * sizeof *y64);
    float *y32 = malloc(n * sizeof *y32);
    size_t *idx32 = malloc(n * sizeof *idx32);
    cr_assert(want && y64 && y32 && idx32, "out of memory");
    size_t n32 = 0;
    for (size_t i = 0; i < n; i++) {
        want[i] = fmt_ref_round(f, in->v[i], mode, ov, flush);
        y64[i] = in->v[i];
        if (is_f32(in->v[i])) y32[n32] = (float)in->v[i], idx32[n32++] = i;
    }
    const fmt_round_opts o = {.mode = mode, .overflow = ov, .flush_subnormals = flush};
    cr_assert_eq(fmt_round_f64(f, y64, n, &o, NULL), FMT_OK);
    // The float32 inputs once more through the float64 path: both must count the same.
    double *z64 = malloc((n32 ? n32 : 1) * sizeof *z64);
    cr_assert(z64 != NULL, "out of memory");
    for (size_t j = 0; j < n32; j++) z64[j] = y32[j];
    fmt_stats s32 = {0}, s64 = {0};
    cr_assert_eq(fmt_round_f32(f, y32, n32, &o, &s32), FMT_OK);
    cr_assert_eq(fmt_round_f64(f, z64, n32, &o, &s64), FMT_OK);
    free(z64);
    if (s32.n != s64.n || s32.overflow != s64.overflow || s32.underflow != s64.underflow ||
        s32.subnormal != s64.subnormal || s32.nan_in != s64.nan_in || s32.invalid != s64.invalid ||
        s32.amax != s64.amax) {
        if (++t->failed <= 8)
            cr_expect_fail("stats %s %s %s%s: f32 n=%" PRIu64 " ovf=%" PRIu64 " unf=%" PRIu64
                       " sub=%" PRIu64 " nan=%" PRIu64 " inv=%" PRIu64 " amax=%a; f64 n=%" PRIu64
                       " ovf=%" PRIu64 " unf=%" PRIu64 " sub=%" PRIu64 " nan=%" PRIu64
                       " inv=%" PRIu64 " amax=%a",
                       f->name, fmt_mode_name(mode), fmt_overflow_name(ov), flush ? " flush" : "",
                       s32.n, s32.overflow, s32.underflow, s32.subnormal, s32.nan_in, s32.invalid,
                       s32.amax, s64.n, s64.overflow, s64.underflow, s64.subnormal, s64.nan_in,
                       s64.invalid, s64.amax);
    }
    for (size_t i = 0; i < n; i++) {
        report(t, f, "round_f64", mode, ov, flush, in->v[i], y64[i], want[i]);
        report(t, f, "round1", mode, ov, flush, in->v[i], fmt_round1(f, in->v[i], &o), want[i]);
    }
    for (size_t j = 0; j < n32; j++) {
        const size_t i = idx32[j];
        report(t, f, "round_f32", mode, ov, flush, in->v[i], (double)y32[j], want[i]);
    }
    check_paths(f, in, o, want, idx32, n32, t);
    free(want), free(y64), free(y32), free(idx32);
}

static void check_format(const fmt_t *f) {
    const uint64_t seed = test_seed(f->name);
    dvec in = {0}, small = {0};
    build_inputs(f, &in, seed);
    // Flushing only changes results below the smallest normal: run it on those inputs and on
    // every 16th of the others.
    for (size_t i = 0; i < in.n; i++)
        if (fabs(in.v[i]) < 4 * f->min_normal || i % 16 == 0) push(&small, in.v[i]);
    tally t = {0};
    for (int mode = 0; mode < FMT_NMODES; mode++) {
        if (mode == FMT_SR) continue;
        for (int ov = 0; ov < FMT_NOVERFLOW; ov++) {
            check_combo(f, &in, (fmt_round_mode)mode, (fmt_overflow)ov, false, &t);
            check_combo(f, &small, (fmt_round_mode)mode, (fmt_overflow)ov, true, &t);
        }
    }
    cr_log_info("%s: %zu inputs, %zu comparisons, seed 0x%" PRIx64 " (FPLAB_SEED)", f->name, in.n,
                t.checked, seed);
    free(in.v), free(small.v);
    cr_assert_eq(t.failed, 0, "%s: %zu failures (values differing from MPFR, or f32/f64 statistics "
                 "differing) in %zu comparisons (seed 0x%" PRIx64 ")",
                 f->name, t.failed, t.checked, seed);
}

// --- the tests: one worker per format, so --jobs spreads them over cores

// One OpenMP thread per Criterion worker: spinning threads of parallel workers starve each
// other. The thread_count test below checks that the thread count does not matter.
static void one_thread(void) {
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
}
TestSuite(round, .init = one_thread);

typedef struct {
    char name[40];
} fmt_param;

ParameterizedTestParameters(round, table_format) {
    static fmt_param params[64];
    size_t n = 0;
    for (size_t i = 0; i < fmt_table_count() && n < 64; i++) {
        const fmt_t *f = fmt_table_get(i);
        if (!strcmp(f->name, "fp64")) continue;  // rounding to fp64 is the identity on doubles
        snprintf(params[n++].name, sizeof params[0].name, "%s", f->name);
    }
    return cr_make_param_array(fmt_param, params, n);
}

ParameterizedTest(fmt_param *p, round, table_format) {
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, p->name), FMT_OK, "table format %s", p->name);
    check_format(&f);
}

ParameterizedTestParameters(round, custom_format) {
    // Custom specs: wider and narrower IEEE, fnuz, unsigned, finite with a chosen bias, and
    // formats with no fraction bits (the parity of a code is its exponent's), one with an
    // even bias.
    static fmt_param params[] = {{"e5m7"}, {"e3m4:fnuz"}, {"e6m9"}, {"ue4m3"},
                                 {"e4m3:finite:bias=5"}, {"ue3m2:finite"}, {"e4m0:fn"},
                                 {"e3m0:finite"}, {"e4m0:e8m0:bias=4"}, {"e5m0:e8m0"},
                                 {"e3m2:e8m0"}, {"e2m1:fn"}, {"e8m10"},
                                 // IEEE P3109: extended signed and unsigned (inf below the NaN),
                                 // exponent-only ones, finite unsigned
                                 {"binary8p3se"}, {"binary8p4ue"}, {"binary4p2se"}, {"binary3p1ue"},
                                 {"binary8p1se"}, {"binary6p3uf"}, {"binary10p5ue"}};
    return cr_make_param_array(fmt_param, params, sizeof params / sizeof params[0]);
}

ParameterizedTest(fmt_param *p, round, custom_format) {
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, p->name), FMT_OK, "custom format %s", p->name);
    check_format(&f);
}

// --- the reference itself, on values known without MPFR

Test(round, ref_known_values) {
    const struct {
        const char *fmt;
        fmt_round_mode mode;
        fmt_overflow ov;
        double x, want;
    } cases[] = {
        {"e4m3", FMT_RNE, FMT_OVERFLOW_IEEE, 464, 448},    // tie: 448 (1.110b) is even
        {"e4m3", FMT_RNE, FMT_OVERFLOW_IEEE, 470, NAN},    // rounds to 480 > max, no inf
        {"e4m3", FMT_RNE, FMT_SATURATE, 470, 448},
        {"e4m3", FMT_RTZ, FMT_OVERFLOW_IEEE, 1e6, 448},
        {"e4m3", FMT_RNE, FMT_OVERFLOW_IEEE, -INFINITY, NAN},
        {"e4m3", FMT_RNE, FMT_OVERFLOW_IEEE, 0x1p-10, 0.0},  // half the smallest subnormal
        {"e4m3", FMT_RNA, FMT_OVERFLOW_IEEE, -0x1p-10, -0x1p-9},
        {"e4m3", FMT_RNE, FMT_OVERFLOW_IEEE, -0x1p-11, -0.0},
        {"e5m2", FMT_RNE, FMT_OVERFLOW_IEEE, 61440, INFINITY},  // tie above max: 65536 is even
        {"e5m2", FMT_RNE, FMT_OVERFLOW_IEEE, 61439, 57344},
        {"e5m2", FMT_RUP, FMT_OVERFLOW_IEEE, -1e9, -57344},
        {"e5m2", FMT_RDN, FMT_OVERFLOW_IEEE, -1e9, -INFINITY},
        {"fp16", FMT_RNE, FMT_OVERFLOW_IEEE, 65520, INFINITY},
        {"fp16", FMT_RNE, FMT_OVERFLOW_IEEE, 65519.99, 65504},
        {"fp16", FMT_RTO, FMT_OVERFLOW_IEEE, 1e6, 65504},
        {"bf16", FMT_RNE, FMT_OVERFLOW_IEEE, 1.0 + 0x1p-8, 1.0},
        {"bf16", FMT_RNA, FMT_OVERFLOW_IEEE, 1.0 + 0x1p-8, 1.0 + 0x1p-7},
        {"bf16", FMT_RTO, FMT_OVERFLOW_IEEE, 1.0 + 0x1p-20, 1.0 + 0x1p-7},
        {"e2m1", FMT_RNE, FMT_OVERFLOW_IEEE, 2.5, 2},
        {"e2m1", FMT_RNE, FMT_OVERFLOW_IEEE, 3.5, 4},
        {"e2m1", FMT_RNE, FMT_OVERFLOW_IEEE, 5, 4},
        {"e2m1", FMT_RNE, FMT_OVERFLOW_IEEE, 7, 6},
        {"e2m1", FMT_RNE, FMT_OVERFLOW_IEEE, 100, 6},     // no inf, no NaN: max
        {"e2m1", FMT_RNE, FMT_OVERFLOW_IEEE, -0.3, -0.5},
        {"e2m1", FMT_RNE, FMT_OVERFLOW_IEEE, 0.25, 0.0},
        {"e2m1", FMT_RNA, FMT_OVERFLOW_IEEE, 0.25, 0.5},
        {"e2m1", FMT_RTO, FMT_OVERFLOW_IEEE, 0.1, 0.5},
        {"e2m1", FMT_RNE, FMT_OVERFLOW_IEEE, NAN, -0.0},  // ml_dtypes' choice
        {"e4m3fnuz", FMT_RNE, FMT_OVERFLOW_IEEE, -0x1p-20, 0.0},  // no -0
        {"e4m3fnuz", FMT_RNE, FMT_OVERFLOW_IEEE, 240, 240},
        {"e4m3fnuz", FMT_RNE, FMT_OVERFLOW_IEEE, 250, NAN},
        {"e8m0", FMT_RNE, FMT_OVERFLOW_IEEE, 3, 2},       // tie: code 128 is even
        {"e8m0", FMT_RNE, FMT_OVERFLOW_IEEE, 6, 8},       // tie: code 130 is even
        {"e8m0", FMT_RNA, FMT_OVERFLOW_IEEE, 3, 4},
        {"e8m0", FMT_RTO, FMT_OVERFLOW_IEEE, 5, 4},       // code 129 is odd
        {"e8m0", FMT_RTO, FMT_OVERFLOW_IEEE, 9, 16},      // code 131 is odd
        {"e8m0", FMT_RNE, FMT_OVERFLOW_IEEE, 0x1p-140, 0x1p-127},  // clamped up
        {"e8m0", FMT_RNE, FMT_OVERFLOW_IEEE, 0.0, NAN},
        {"e8m0", FMT_RNE, FMT_OVERFLOW_IEEE, -2, NAN},
        {"e8m0", FMT_RNE, FMT_SATURATE, INFINITY, 0x1p127},
        {"ue3m2:finite", FMT_RNE, FMT_OVERFLOW_IEEE, -1, 0.0},
        {"ue3m2:finite", FMT_RNE, FMT_OVERFLOW_IEEE, NAN, 0.0},
        // IEEE P3109's saturation modes (interim report 4.7.5): max 49152 (binary8p3se) and
        // 53248 (binary8p4ue, unsigned extended: inf 0xfe below NaN 0xff)
        {"binary8p3se", FMT_RNE, FMT_SATURATE, INFINITY, 49152},
        {"binary8p3se", FMT_RNE, FMT_SAT_PROPAGATE, 1e6, 49152},
        {"binary8p3se", FMT_RNE, FMT_SAT_PROPAGATE, -INFINITY, -INFINITY},
        {"binary8p3se", FMT_RNE, FMT_SAT_NONE, 1e6, INFINITY},
        {"binary8p3se", FMT_RTZ, FMT_SAT_NONE, -1e6, -49152},
        {"binary8p3se", FMT_RUP, FMT_SAT_NONE, -1e6, -49152},
        {"binary8p3se", FMT_RDN, FMT_SAT_NONE, -1e6, -INFINITY},
        {"binary8p3se", FMT_RTO, FMT_SAT_NONE, 1e6, INFINITY},   // signed: to odd overflows
        {"binary8p3se", FMT_RTO, FMT_OVERFLOW_IEEE, 1e6, 49152}, // IEEE's reading: max
        {"binary8p3sf", FMT_RNE, FMT_SAT_NONE, 1e6, 57344},      // finite: clamps
        {"binary8p3sf", FMT_RNE, FMT_OVERFLOW_IEEE, 1e6, NAN},
        {"binary8p3sf", FMT_RNE, FMT_SAT_NONE, -INFINITY, -57344},
        {"binary8p4ue", FMT_RTO, FMT_SAT_NONE, 1e6, 53248},      // unsigned extended: max
        {"binary8p4ue", FMT_RNE, FMT_SAT_NONE, 1e6, INFINITY},
        {"binary8p4ue", FMT_RNE, FMT_SAT_NONE, -1, NAN},
        {"binary8p4ue", FMT_RTZ, FMT_SAT_NONE, -1, 0.0},         // toward zero: Mlo
        {"binary8p4ue", FMT_RUP, FMT_SAT_NONE, -1, 0.0},
        {"binary8p4ue", FMT_RNE, FMT_SAT_NONE, -0x1p-30, 0.0},   // rounds to zero first
        {"binary8p4ue", FMT_RDN, FMT_SAT_NONE, -0x1p-30, NAN},   // rounds away from zero
        {"binary8p4ue", FMT_RTZ, FMT_SAT_NONE, -INFINITY, NAN},
        {"binary8p4ue", FMT_RNE, FMT_SATURATE, -1, 0.0},
        {"binary8p4ue", FMT_RNE, FMT_SAT_PROPAGATE, -INFINITY, 0.0},
        {"binary8p4ue", FMT_RNE, FMT_SAT_PROPAGATE, INFINITY, INFINITY},
        {"binary8p4ue", FMT_RNE, FMT_OVERFLOW_IEEE, -0x1p-30, NAN},  // fplab's IEEE policy
        {"e8m0", FMT_RNE, FMT_SATURATE, -2, NAN},                // no zero: NaN under every policy
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fmt_t f;
        cr_assert_eq(fmt_from_name(&f, cases[i].fmt), FMT_OK);
        const double got = fmt_ref_round(&f, cases[i].x, cases[i].mode, cases[i].ov, false);
        cr_expect(tu_same(got, cases[i].want), "ref %s %s %s: x=%a got %a want %a", cases[i].fmt,
                  fmt_mode_name(cases[i].mode), fmt_overflow_name(cases[i].ov), cases[i].x, got,
                  cases[i].want);
    }
    // Flushing: a subnormal result becomes a zero of the input's sign.
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, "fp16"), FMT_OK);
    cr_expect(tu_same(fmt_ref_round(&f, -0x1p-20, FMT_RNE, FMT_OVERFLOW_IEEE, true), -0.0));
    cr_expect(tu_same(fmt_ref_round(&f, 0x1p-14, FMT_RNE, FMT_OVERFLOW_IEEE, true), 0x1p-14));
    // Judged after rounding: above the largest subnormal, up is the smallest normal (kept),
    // down the largest subnormal (flushed).
    cr_expect(tu_same(fmt_ref_round(&f, 0x1.ffcp-15, FMT_RUP, FMT_OVERFLOW_IEEE, true), 0x1p-14));
    cr_expect(tu_same(fmt_ref_round(&f, 0x1.ffcp-15, FMT_RDN, FMT_OVERFLOW_IEEE, true), 0.0));
}

// --- statistics on hand-built arrays

Test(round, stats_e4m3) {
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, "e4m3"), FMT_OK);
    // e4m3: max 448, smallest normal 2^-6, smallest subnormal 2^-9.
    const float x[] = {1.0f, -500.0f, 448.0f, 464.0f, 470.0f, 0x1p-11f, -0x1p-11f, 0x1p-8f,
                       0x1p-6f, NAN, INFINITY, 0.0f, -3.0f};
    const size_t n = sizeof x / sizeof x[0];
    for (int ov = 0; ov < 2; ov++) {
        float y[sizeof x / sizeof x[0]];
        memcpy(y, x, sizeof x);
        fmt_stats st = {0};
        const fmt_round_opts o = {.overflow = (fmt_overflow)ov};
        cr_assert_eq(fmt_round_f32(&f, y, n, &o, &st), FMT_OK);
        cr_assert_eq(st.n, n);
        // -500 and 470 round beyond max (to 512 and 480); inf, which e4m3 cannot hold, is an
        // overflow too. 464 is the tie between 448 (even) and 480: it stays finite.
        cr_assert_eq(st.overflow, 3, "overflow %" PRIu64 " (%s)", st.overflow, fmt_overflow_name(ov));
        cr_assert_eq(st.underflow, 2, "underflow %" PRIu64, st.underflow);  // +-2^-11 -> 0
        cr_assert_eq(st.subnormal, 1, "subnormal %" PRIu64, st.subnormal); // 2^-8
        cr_assert_eq(st.nan_in, 1);
        cr_assert_eq(st.invalid, 0);
        cr_assert(isinf(st.amax), "amax %g", st.amax);
        // The f64 path counts the same.
        double yd[sizeof x / sizeof x[0]];
        for (size_t i = 0; i < n; i++) yd[i] = x[i];
        fmt_stats sd = {0};
        cr_assert_eq(fmt_round_f64(&f, yd, n, &o, &sd), FMT_OK);
        cr_assert(sd.n == st.n && sd.overflow == st.overflow && sd.underflow == st.underflow &&
                  sd.subnormal == st.subnormal && sd.nan_in == st.nan_in &&
                  sd.invalid == st.invalid && sd.amax == st.amax, "f64 stats differ from f32");
        for (size_t i = 0; i < n; i++)
            cr_assert(tu_same(y[i], yd[i]), "x=%a: f32 %a f64 %a", x[i], y[i], yd[i]);
    }
    // Finite amax; counts add up over calls; flushing counts a flushed subnormal as underflow.
    float z[] = {-2.0f, 0.5f, 0x1p-8f};
    fmt_stats st = {0};
    const fmt_round_opts flush = {.flush_subnormals = true};
    cr_assert_eq(fmt_round_f32(&f, z, 3, &flush, &st), FMT_OK);
    cr_assert_eq(fmt_round_f32(&f, z, 3, &flush, &st), FMT_OK);
    cr_assert_eq(st.n, 6);
    cr_assert_eq(st.amax, 2.0);
    cr_assert_eq(st.underflow, 1, "underflow %" PRIu64, st.underflow);  // 2^-8 flushed, then 0
    cr_assert_eq(st.subnormal, 0);
}

Test(round, stats_e8m0) {
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, "e8m0"), FMT_OK);
    // e8m0: powers of two 2^-127 .. 2^127, no zero, no sign, 0xff is NaN.
    const float x[] = {1.0f, 3.0f, 0.0f, -1.0f, -0.0f, NAN, INFINITY, 0x1p-140f, FLT_TRUE_MIN,
                       0x1p127f, FLT_MAX, 6.0f};
    const size_t n = sizeof x / sizeof x[0];
    float y[sizeof x / sizeof x[0]];
    memcpy(y, x, sizeof x);
    fmt_stats st = {0};
    const fmt_round_opts o = {0};
    cr_assert_eq(fmt_round_f32(&f, y, n, &o, &st), FMT_OK);
    cr_assert_eq(st.n, n);
    cr_assert_eq(st.invalid, 3, "invalid %" PRIu64, st.invalid);      // 0, -1, -0
    cr_assert_eq(st.nan_in, 1);
    cr_assert_eq(st.underflow, 2, "underflow %" PRIu64, st.underflow);  // clamped up to 2^-127
    cr_assert_eq(st.subnormal, 0);
    // inf (NaN under the IEEE policy) and FLT_MAX (rounds to 2^128) overflow.
    cr_assert_eq(st.overflow, 2, "overflow %" PRIu64, st.overflow);
    cr_assert(isinf(st.amax), "amax %g", st.amax);
    // Ties go to the even code: 3 -> 2 (code 128), 6 -> 8 (code 130).
    const double want[] = {1.0, 2.0, NAN, NAN, NAN, NAN, NAN, 0x1p-127, 0x1p-127, 0x1p127, NAN, 8.0};
    for (size_t i = 0; i < n; i++) cr_assert(tu_same(y[i], want[i]), "x=%a: got %a want %a", x[i], y[i], want[i]);
}

// Results and statistics do not depend on the number of threads, stochastic rounding included
// (every draw is keyed by the element index): 1 thread against 3, on several chunks' worth.
Test(round, thread_count) {
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, "e4m3"), FMT_OK);
    const size_t n = 100003;
    float *x = malloc(n * sizeof *x), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    cr_assert(x && a && b);
    uint64_t s = test_seed("thread_count");
    for (size_t i = 0; i < n; i++) {  // both signs, binades 2^-12 .. 2^11 around e4m3's range
        const uint64_t r = tu_splitmix64(&s);
        x[i] = tu_u2f((uint32_t)(r >> 63) << 31 | (uint32_t)(115 + (r >> 32) % 24) << 23 |
                   ((uint32_t)r & 0x7fffffu));
    }
    for (int mode = 0; mode < FMT_NMODES; mode++) {
        const fmt_round_opts o = {.mode = (fmt_round_mode)mode, .seed = s, .offset = 77};
        fmt_stats sa = {0}, sb = {0};
        memcpy(a, x, n * sizeof *x), memcpy(b, x, n * sizeof *x);
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
        cr_assert_eq(fmt_round_f32(&f, a, n, &o, &sa), FMT_OK);
#ifdef _OPENMP
        omp_set_num_threads(3);
#endif
        cr_assert_eq(fmt_round_f32(&f, b, n, &o, &sb), FMT_OK);
        cr_assert(!memcmp(a, b, n * sizeof *a), "%s: results depend on the thread count", fmt_mode_name(o.mode));
        cr_assert(sa.n == sb.n && sa.overflow == sb.overflow && sa.underflow == sb.underflow &&
                  sa.subnormal == sb.subnormal && sa.nan_in == sb.nan_in && sa.invalid == sb.invalid &&
                  sa.amax == sb.amax, "%s: statistics depend on the thread count", fmt_mode_name(o.mode));
    }
    free(x), free(a), free(b);
}

// fmt_round_f32_scaled is a copy (times pre), fmt_round_f32 and a rescale (times post), bit for
// bit and count for count: in every mode, with and without the multiplies, out of place and in
// place, over several parallel chunks, for a format in float32 (e4m3, bf16) and one beyond (fp64:
// nothing rounds, counts only).
Test(round, scaled_is_copy_round_rescale) {
    const size_t n = 70001;  // five chunks of the parallel split, the last one short
    float *x = malloc(n * sizeof *x), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    cr_assert(x && a && b);
    uint64_t s = test_seed("scaled_is_copy_round_rescale");
    for (size_t i = 0; i < n; i++) {  // both signs, binades 2^-30 .. 2^17, a NaN and infinities
        const uint64_t r = tu_splitmix64(&s);
        x[i] = tu_u2f((uint32_t)(r >> 63) << 31 | (uint32_t)(97 + (r >> 32) % 48) << 23 | ((uint32_t)r & 0x7fffffu));
    }
    x[5] = NAN, x[6] = INFINITY, x[7] = -INFINITY, x[8] = 0.0f, x[9] = -0.0f;
    const char *fmts[] = {"e4m3", "bf16", "fp64"};
    const float scales[][2] = {{1.0f, 1.0f}, {448.0f / 3.7f, 3.7f / 448.0f}, {0x1p-7f, 1.0f}, {1.0f, 0x1p9f}};
    for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++) {
        fmt_t f;
        cr_assert_eq(fmt_from_name(&f, fmts[fi]), FMT_OK);
        for (int mode = 0; mode < FMT_NMODES; mode++)
            for (size_t si = 0; si < sizeof scales / sizeof *scales; si++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    const float pre = scales[si][0], post = scales[si][1];
                    const fmt_round_opts o = {.mode = (fmt_round_mode)mode, .seed = s, .offset = 123};
                    fmt_stats sa = {0}, sb = {0};
                    for (size_t i = 0; i < n; i++) a[i] = pre == 1.0f ? x[i] : x[i] * pre;
                    cr_assert_eq(fmt_round_f32(&f, a, n, &o, &sa), FMT_OK);
                    if (post != 1.0f)
                        for (size_t i = 0; i < n; i++) a[i] *= post;
                    if (inplace) memcpy(b, x, n * sizeof *x);
                    cr_assert_eq(fmt_round_f32_scaled(&f, b, inplace ? b : x, n, pre, post, &o, &sb), FMT_OK);
                    cr_assert(!memcmp(a, b, n * sizeof *a), "%s %s pre %g post %g%s: values differ", fmts[fi],
                              fmt_mode_name(o.mode), pre, post, inplace ? " in place" : "");
                    cr_assert(sa.n == sb.n && sa.overflow == sb.overflow && sa.underflow == sb.underflow &&
                                  sa.subnormal == sb.subnormal && sa.nan_in == sb.nan_in && sa.amax == sb.amax,
                              "%s %s: counts differ", fmts[fi], fmt_mode_name(o.mode));
                }
    }
    cr_assert_eq(fmt_round_f32_scaled(NULL, NULL, x, 1, 1.0f, 1.0f, &(fmt_round_opts){0}, NULL), FMT_EINVAL);
    free(x), free(a), free(b);
}

// The paths that use float32 arithmetic or converters that read MXCSR (DAZ: subnormal inputs
// as zero; FTZ: subnormal results flushed) must give the same bits when a program sets them
// (-ffast-math does, at start-up): they decline and the generic kernel, all integer, runs.
Test(round, daz_ftz_set) {
#if defined(__x86_64__)
    const char *names[] = {"fp16", "bf16", "e4m3", "e5m2", "e2m1", "e3m2", "tf32"};
    const size_t n = 4099;
    float *x = malloc(n * sizeof *x), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    cr_assert(x && a && b);
    uint64_t s = test_seed("daz_ftz_set");
    for (size_t i = 0; i < n; i++)  // float32 subnormals, and tiny normals, both signs
        x[i] = tu_u2f((uint32_t)tu_splitmix64(&s) & (i % 2 ? 0x807fffffu : 0x8fffffffu));
    const unsigned csr = _mm_getcsr();
    for (size_t fi = 0; fi < sizeof names / sizeof names[0]; fi++) {
        fmt_t f = tu_fmt(names[fi]);
        for (int mode = 0; mode < FMT_NMODES; mode++) {
            fmt_round_opts o = {.mode = (fmt_round_mode)mode, .path = FMT_PATH_GENERIC};
            memcpy(a, x, n * sizeof *x);
            cr_assert_eq(fmt_round_f32(&f, a, n, &o, NULL), FMT_OK);
            for (int p = FMT_PATH_AUTO; p < FMT_NPATHS; p++) {
                o.path = (fmt_round_path)p;
                if (!fmt_path_available(o.path, &f, &o, false)) continue;
                memcpy(b, x, n * sizeof *x);
                _mm_setcsr(csr | 0x8040u);  // FTZ | DAZ
                const int st = fmt_round_f32(&f, b, n, &o, NULL);
                _mm_setcsr(csr);
                cr_assert_eq(st, FMT_OK);
                for (size_t i = 0; i < n; i++)
                    cr_assert_eq(tu_f2u(a[i]), tu_f2u(b[i]),
                                 "%s %s path %s with DAZ|FTZ: x=%a gives %a, %a without", f.name,
                                 fmt_mode_name(o.mode), fmt_path_name(o.path), x[i], b[i], a[i]);
            }
        }
    }
    free(x), free(a), free(b);
#else
    cr_skip_test("x86-64 only (MXCSR)");
#endif
}

// The explicit AVX2 kernels (round_lean_avx2.c) run as FMT_PATH_LEAN only on CPUs without
// AVX-512, where the tests above hold that path to the generic kernel; here they run on every
// CPU with AVX2, called directly: every format of the table they cover (and P3109 and custom
// ones), every mode (sr included, the first counter not a multiple of 8), every overflow policy,
// flushing, with and without statistics, on test_round's inputs: bit for bit the generic
// kernel's values and counts. They decline where MXCSR rounds other than to nearest for the
// narrow formats (the sums are float32 additions), and run (integer only) for the wide ones.
Test(round, lean_avx2_kernel) {
    if (!fmt__lean_avx2_runs()) cr_skip_test("the CPU has no AVX2");
    const char *names[] = {"fp32", "tf32", "bf16", "fp16", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e3m2",
                           "e2m3", "e2m1", "e8m0", "binary8p3se", "binary8p4sf", "e5m7", "e4m3:finite:bias=5"};
    size_t covered = 0;
    for (size_t fi = 0; fi < sizeof names / sizeof names[0]; fi++) {
        const fmt_t f = tu_fmt(names[fi]);
        dvec in = {0};
        build_inputs(&f, &in, test_seed("lean_avx2_kernel") + fi);
        float *x = malloc(in.n * sizeof *x), *a = malloc(in.n * sizeof *a), *b = malloc(in.n * sizeof *b);
        cr_assert(x && a && b);
        size_t n = 0;
        for (size_t i = 0; i < in.n; i++)
            if (is_f32(in.v[i])) x[n++] = (float)in.v[i];
        for (int mode = 0; mode < FMT_NMODES; mode++)
            for (int ov = 0; ov < FMT_NOVERFLOW; ov++)
                for (int fl = 0; fl < 2; fl++)
                    for (int st = 0; st < 2; st++) {
                        const fmt_round_opts o = {.mode = (fmt_round_mode)mode, .overflow = (fmt_overflow)ov,
                                                  .flush_subnormals = fl, .seed = 7, .offset = 3};
                        if (fmt_validate_round_opts(&f, &o, NULL, 0) != FMT_OK) continue;
                        fmt__kparams k;
                        fmt__kparams_make(&k, &f, &o);
                        fmt__counts ca = {0}, cb = {0};
                        memcpy(a, x, n * sizeof *x);
                        if (!fmt__round_f32_lean_avx2(&k, o.mode, b, x, n, 5, st ? &cb : NULL)) {
                            cr_assert(!fmt__f32_lean_covers(&k, o.mode), "%s %s: declined what it covers",
                                      f.name, fmt_mode_name(o.mode));
                            continue;
                        }
                        covered++;
                        fmt__round_f32_kernel(&k, FMT_PATH_GENERIC, o.mode, a, n, 5, st ? &ca : NULL);
                        for (size_t i = 0; i < n; i++)
                            cr_assert_eq(tu_f2u(a[i]), tu_f2u(b[i]), "%s %s %s%s: x=%a gives %a, generic %a", f.name,
                                         fmt_mode_name(o.mode), fmt_overflow_name(o.overflow), fl ? " flush" : "",
                                         x[i], b[i], a[i]);
                        cr_assert(ca.overflow == cb.overflow && ca.underflow == cb.underflow &&
                                      ca.subnormal == cb.subnormal && ca.nan_in == cb.nan_in &&
                                      ca.invalid == cb.invalid && tu_f2u(ca.amax) == tu_f2u(cb.amax),
                                  "%s %s %s%s: statistics differ from the generic kernel's", f.name,
                                  fmt_mode_name(o.mode), fmt_overflow_name(o.overflow), fl ? " flush" : "");
                    }
#if defined(__x86_64__)
        // MXCSR rounding down: the narrow formats decline, the wide and e8m0 round as ever.
        fmt__kparams k;
        fmt__kparams_make(&k, &f, &(fmt_round_opts){.mode = FMT_RNE});
        if (fmt__f32_lean_covers(&k, FMT_RNE)) {
            memcpy(a, x, n * sizeof *x);
            fmt__round_f32_kernel(&k, FMT_PATH_GENERIC, FMT_RNE, a, n, 0, NULL);
            const unsigned csr = _mm_getcsr();
            _mm_setcsr((csr & ~0x6000u) | 0x2000u);
            const bool ran = fmt__round_f32_lean_avx2(&k, FMT_RNE, b, x, n, 0, NULL);
            _mm_setcsr(csr);
            const bool narrow = f.emin > -126 && f.mbits > 0 && f.special != FMT_E8M0;
            cr_assert_eq(ran, !narrow, "%s under MXCSR's round-down: %s", f.name, ran ? "ran" : "declined");
            for (size_t i = 0; ran && i < n; i++)
                cr_assert_eq(tu_f2u(a[i]), tu_f2u(b[i]), "%s under MXCSR's round-down: x=%a", f.name, x[i]);
        }
#endif
        free(in.v), free(x), free(a), free(b);
    }
    cr_assert_gt(covered, 1000, "the kernels ran %zu combinations", covered);
}

// fmt_path_available and the names: the generic path always, a path that is not available
// refused by fmt_round_f32 with FMT_EINVAL, and fp64 (no float32 kernel) only generic.
Test(round, path_names_and_availability) {
    for (int p = 0; p < FMT_NPATHS; p++) {
        fmt_round_path q;
        cr_assert_eq(fmt_path_from_name(&q, fmt_path_name((fmt_round_path)p)), FMT_OK);
        cr_assert_eq((int)q, p);
    }
    fmt_round_path q;
    cr_assert_eq(fmt_path_from_name(&q, "sse9"), FMT_EUNKNOWN);
    fmt_t e8m0 = tu_fmt("e8m0"), fp64 = tu_fmt("fp64"), e4m3 = tu_fmt("e4m3");
    fmt_round_opts o = {.path = FMT_PATH_GENERIC};
    cr_assert(fmt_path_available(FMT_PATH_GENERIC, &e4m3, &o, true));
    cr_assert(fmt_path_available(FMT_PATH_AUTO, &e4m3, &o, true));
    cr_assert(!fmt_path_available(FMT_PATH_HW, &e4m3, &o, false), "no converter for e4m3");
    cr_assert_eq(fmt_path_available(FMT_PATH_LEAN, &e8m0, &o, true), fmt_path_available(FMT_PATH_LEAN, &e4m3, &o, true),
                 "the explicit kernels take e8m0 where they take e4m3 (the CPU has AVX-512 or AVX2)");
    cr_assert(!fmt_path_available(FMT_PATH_HW, &e4m3, &o, true), "no statistics in the converters");
    cr_assert(!fmt_path_available(FMT_PATH_AVX2, &fp64, &o, false));
    float x = 1.5f;
    o.path = FMT_PATH_HW;
    cr_assert_eq(fmt_round_f32(&e4m3, &x, 1, &o, NULL), FMT_EINVAL);
    o.path = (fmt_round_path)FMT_NPATHS;
    cr_assert_eq(fmt_round_f32(&e4m3, &x, 1, &o, NULL), FMT_EINVAL);
    cr_assert_eq(fmt_validate_round_opts(&e4m3, &o, NULL, 0), FMT_EINVAL);
}
