// test_sr.c: stochastic rounding (FMT_SR) of fmt_round_f32 and fmt_round_f64, for every table
// format (fp64 only through the float64 API, where it is a copy).
// What is checked: every result is one of the two neighbours (the FMT_RDN and FMT_RUP results
// of the same input, overflow included); the round-up frequency of a replicated input lies in a
// binomial bound around the exact probability, truncated to sr_bits; the mean is unbiased;
// results are a pure function of (seed, stream, offset + index): reproducible, different for
// another seed or stream, the same for 1 or 2 threads and for an array rounded in two calls, and
// the same through every path of fmt_round_f32 (generic kernel, its copies, AVX-512 kernels).
// Random inputs come from the library's counter-based generator; the seed is printed and read
// from FPLAB_SEED to replay a failure.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "formats/rng.h"
#include "formats/round.h"
#include "formats/round_internal.h"  // the AVX2 kernels, called directly on any CPU with AVX2
#include "formats/round_scalar.h"
#include "test_util.h"

enum { NREP = 100000 };  // draws per replicated input

static uint64_t test_seed(const char *test) { return tu_seed("test_sr", test, 0x5eedf00dULL); }

// The statistical tests make thousands of calls on 1e5 elements: on a busy machine the OpenMP
// barrier of each call costs more than the rounding. Results do not depend on the thread
// count (independent_of_thread_count checks it), so those tests run on one thread.
static void one_thread(void) {
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
}

// Which formats a float32 or float64 API test covers: fp64 values do not fit in float32.
static bool covered(const fmt_t *f, bool f64) { return f64 || f->bits <= 32; }

// Precision of the input type minus the format's: random bits available below the format's
// last place (0: every input is a value of the format, so stochastic rounding has nothing to do).
static int spare_bits(const fmt_t *f, bool f64) {
    int j = (f64 ? 53 : 24) - (f->mbits + 1);
    return j < 0 ? 0 : j;
}

static bool exact_in(double x, bool f64) { return f64 || (double)(float)x == x; }

// Rounds x[0..n) (held as doubles) through the float32 or float64 API.
static void round_arr(const fmt_t *f, bool f64, double *x, size_t n, const fmt_round_opts *o,
                      fmt_stats *st) {
    if (f64) {
        cr_assert_eq(fmt_round_f64(f, x, n, o, st), FMT_OK, "%s", f->name);
        return;
    }
    float *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = (float)x[i];
    cr_assert_eq(fmt_round_f32(f, y, n, o, st), FMT_OK, "%s", f->name);
    for (size_t i = 0; i < n; i++) x[i] = y[i];
    free(y);
}

// A random input near the format's range: random sign, an exponent from 3 binades below the
// smallest subnormal to 3 above max, random significand; one in 16 is a raw random bit pattern
// (NaN, inf, anything).
static double random_input(const fmt_t *f, bool f64, fmt_rng_key key, uint64_t i) {
    const uint32_t a = fmt_rng_u32(key, 3 * i), b = fmt_rng_u32(key, 3 * i + 1), c = fmt_rng_u32(key, 3 * i + 2);
    if ((c & 15) == 0) {
        if (f64) return tu_u2d((uint64_t)a << 32 | b);
        return tu_u2f(a);
    }
    const int lo = (int)round(log2(f->min_subnormal)) - 3, hi = f->emax + 3;
    const int e = lo + (int)((c >> 4) % (uint32_t)(hi - lo + 1));
    const double sig = 1.0 + ldexp((double)((uint64_t)a << 21 | b >> 11), -53);
    double x = ldexp(sig, e);
    if (!f64) x = (float)x;  // may round, overflow or underflow: any float32 is a fine input
    return (c >> 31) ? -x : x;
}

// ---------------------------------------------------------------- one of the two neighbours

static void check_neighbours(bool f64) {
    const uint64_t seed = test_seed(f64 ? "neighbours_f64" : "neighbours_f32");
    one_thread();
    enum { N = 20000 };
    static const int srb[] = {0, 1, 3, 8};
    for (size_t fi = 0; fi < fmt_table_count(); fi++) {
        const fmt_t *f = fmt_table_get(fi);
        if (!covered(f, f64)) continue;
        double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
        const fmt_rng_key key = fmt_rng_make_key(seed, 100 + fi);
        const double fixed[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, f->max, -f->max,
                                f->min_subnormal, -f->min_subnormal, f->min_normal, 1.0, -1.0,
                                f->min_subnormal / 2, f->max * (1 + ldexp(1, -f->mbits - 1))};
        const size_t nfixed = sizeof fixed / sizeof fixed[0];
        for (size_t i = 0; i < N; i++)
            x[i] = i < nfixed ? (f64 ? fixed[i] : (float)fixed[i]) : random_input(f, f64, key, i);
        for (int ov = 0; ov < 2; ov++)
            for (size_t r = 0; r < sizeof srb / sizeof srb[0]; r++) {
                const fmt_round_opts o = {.mode = FMT_SR, .overflow = (fmt_overflow)ov,
                                          .sr_bits = srb[r], .seed = seed, .stream = fi};
                memcpy(y, x, N * sizeof *y);
                round_arr(f, f64, y, N, &o, NULL);
                fmt_round_opts dn = o, up = o;
                dn.mode = FMT_RDN, up.mode = FMT_RUP;
                for (size_t i = 0; i < N; i++) {
                    const double a = fmt_round1(f, x[i], &dn), b = fmt_round1(f, x[i], &up);
                    cr_assert(tu_same(y[i], a) || tu_same(y[i], b),
                              "%s %s sr_bits=%d %s: sr(%a) = %a is neither rdn %a nor rup %a",
                              f->name, f64 ? "f64" : "f32", srb[r], fmt_overflow_name(o.overflow),
                              x[i], y[i], a, b);
                }
            }
        free(x), free(y);
    }
}

Test(sr, one_of_two_neighbours_f32) { check_neighbours(false); }
Test(sr, one_of_two_neighbours_f64) { check_neighbours(true); }

// ---------------------------------------------------------------- round-up frequency

// |k/N - p| <= 5 sigma + 1/N: a false alarm about once in 2 million checks.
static double binom_bound(double p) { return 5 * sqrt(p * (1 - p) / NREP) + 1.0 / NREP; }

// x replicated NREP times; lo is its neighbour toward zero, lo + ulp (by magnitude) the one
// away from zero. With r random bits the kernel rounds up iff the top r bits of the dropped
// part exceed an r-bit draw, so P(up) = floor(p * 2^r) / 2^r with p = (|x| - lo) / ulp.
static int check_frequency(const fmt_t *f, bool f64, double x, double ulp, fmt_overflow ov,
                           int r, uint64_t seed, uint64_t stream) {
    fmt_round_opts o = {.mode = FMT_SR, .overflow = ov, .sr_bits = r, .seed = seed, .stream = stream};
    fmt_round_opts tz = o, away = o;
    tz.mode = FMT_RTZ, away.mode = x > 0 ? FMT_RUP : FMT_RDN;
    const double dn = fmt_round1(f, x, &tz), upv = fmt_round1(f, x, &away);
    double *y = malloc(NREP * sizeof *y);
    for (size_t i = 0; i < NREP; i++) y[i] = x;
    round_arr(f, f64, y, NREP, &o, NULL);
    if (tu_same(dn, upv)) {  // the upper neighbour overflows to max (saturate, or no inf nor NaN)
        size_t bad = NREP;
        for (size_t i = 0; i < NREP && bad == NREP; i++)
            if (!tu_same(y[i], dn)) bad = i;
        cr_assert_eq(bad, NREP, "%s %s: sr(%a) = %a, want %a", f->name, fmt_overflow_name(ov), x,
                     y[bad < NREP ? bad : 0], dn);
        free(y);
        return 0;
    }
    const double p = (fabs(x) - fabs(dn)) / ulp;  // exact: ulp is a power of two
    cr_assert(p > 0 && p < 1, "%s: %a is not strictly between %a and %a + %a", f->name, x, dn, dn, ulp);
    const int rb = r ? r : 32;
    const double pr = floor(ldexp(p, rb)) * ldexp(1, -rb);
    size_t k = 0, bad = NREP;  // per-element asserts would cost more than the rounding
    for (size_t i = 0; i < NREP; i++) {
        const bool is_up = tu_same(y[i], upv);
        if (!is_up && !tu_same(y[i], dn) && bad == NREP) bad = i;
        k += is_up;
    }
    cr_assert_eq(bad, NREP, "%s %s sr_bits=%d: sr(%a)[%zu] = %a, not %a or %a", f->name,
                 f64 ? "f64" : "f32", r, x, bad, y[bad < NREP ? bad : 0], dn, upv);
    free(y);
    const double freq = (double)k / NREP;
    cr_assert(fabs(freq - pr) <= binom_bound(pr),
              "%s %s %s sr_bits=%d x=%a: up %zu of %d (%.6f), expected p=%.6f (exact %.9f), "
              "bound %.6f", f->name, f64 ? "f64" : "f32", fmt_overflow_name(ov), r, x, k, NREP,
              freq, pr, p, binom_bound(pr));
    return 1;
}

static void frequency_all(bool f64) {
    const uint64_t seed = test_seed(f64 ? "frequency_f64" : "frequency_f32");
    one_thread();
    static const int srb[] = {1, 3, 8, 32};
    int checked = 0;
    for (size_t fi = 0; fi < fmt_table_count(); fi++) {
        const fmt_t *f = fmt_table_get(fi);
        const int j = spare_bits(f, f64) < 40 ? spare_bits(f, f64) : 40;
        if (!covered(f, f64) || j == 0) continue;
        const fmt_rng_key key = fmt_rng_make_key(seed, 200 + fi);
        // Fractions of an ulp with j bits: a random one, just above one half, the smallest.
        const uint64_t rnd = ((uint64_t)fmt_rng_u32(key, 0) << 32 | fmt_rng_u32(key, 1)) >> (64 - j);
        const double fr[3] = {ldexp((double)(rnd | 1), -j), 0.5 + ldexp(1, -j), ldexp(1, -j)};
        // (lower neighbour, ulp): 1, the bottom normal binade, the subnormals, zero to the
        // smallest subnormal, and max to the overflow threshold (upper neighbour overflows).
        const double lo_ulp[][2] = {
            {1.0, ldexp(1, -f->mbits)},
            {f->min_normal, f->min_normal * ldexp(1, -f->mbits)},
            {f->min_subnormal, f->has_subnormals ? f->min_subnormal : 0},
            {0, f->has_subnormals ? f->min_subnormal : 0},
            {f->max, ldexp(1, f->emax - f->mbits)},
        };
        for (size_t c = 0; c < sizeof lo_ulp / sizeof lo_ulp[0]; c++) {
            if (lo_ulp[c][1] == 0) continue;  // no subnormals
            for (int q = 0; q < 3; q++) {
                const double x = lo_ulp[c][0] + fr[q] * lo_ulp[c][1];
                if (!exact_in(x, f64) || isinf(x)) continue;
                for (int sgn = 0; sgn < (f->is_signed ? 2 : 1); sgn++)
                    for (size_t r = 0; r < sizeof srb / sizeof srb[0]; r++)
                        for (int ov = 0; ov < (c == 4 ? 2 : 1); ov++)
                            checked += check_frequency(f, f64, sgn ? -x : x, lo_ulp[c][1],
                                                       (fmt_overflow)ov, srb[r], seed,
                                                       1000 * fi + 10 * c + q);
            }
        }
    }
    fprintf(stderr, "test_sr frequency_%s: %d binomial checks\n", f64 ? "f64" : "f32", checked);
    cr_assert_gt(checked, 100);
}

Test(sr, round_up_frequency_f32) { frequency_all(false); }
Test(sr, round_up_frequency_f64) { frequency_all(true); }

// sr_bits = 0 means 32: the same bits.
Test(sr, sr_bits_zero_is_32) {
    const uint64_t seed = test_seed("sr_bits_zero_is_32");
    const fmt_t *f = fmt_table_get(4);  // bf16
    enum { N = 4096 };
    float a[N], b[N];
    const fmt_rng_key key = fmt_rng_make_key(seed, 7);
    for (int i = 0; i < N; i++) a[i] = b[i] = (float)random_input(f, false, key, i);
    fmt_round_opts o = {.mode = FMT_SR, .seed = seed};
    fmt_round_f32(f, a, N, &o, NULL);
    o.sr_bits = 32;
    fmt_round_f32(f, b, N, &o, NULL);
    cr_assert(memcmp(a, b, sizeof a) == 0, "sr_bits 0 and 32 differ");
}

// ---------------------------------------------------------------- unbiased in mean

// E[sr(x)] = x exactly when p has at most 32 bits. The sum of NREP results is exact in double
// (two neighbours of at most 24 bits, NREP < 2^17), so the test sees the bias, not round-off.
static void check_mean(bool f64) {
    const uint64_t seed = test_seed(f64 ? "unbiased_mean_f64" : "unbiased_mean_f32");
    one_thread();
    for (size_t fi = 0; fi < fmt_table_count(); fi++) {
        const fmt_t *f = fmt_table_get(fi);
        int j = spare_bits(f, f64);
        if (!covered(f, f64) || j == 0 || f->mbits > 23) continue;
        j = j < 32 ? j : 32;
        const fmt_rng_key key = fmt_rng_make_key(seed, 300 + fi);
        double *y = malloc(NREP * sizeof *y);
        for (int t = 0; t < 8; t++) {
            // A random binade from the bottom normal one to max's, a random j-bit fraction.
            const int e = f->emin + (int)(fmt_rng_u32(key, 3 * t) % (uint32_t)(f->emax - f->emin + 1));
            const double ulp = ldexp(1, e - f->mbits);
            const double frac = ldexp((double)(fmt_rng_u32(key, 3 * t + 1) >> (32 - j) | 1), -j);
            const uint32_t M = f->mbits ? fmt_rng_u32(key, 3 * t + 2) >> (32 - f->mbits) : 0;
            const double lo = ldexp(1, e) + ulp * M;
            const double x = lo + frac * ulp;
            if (!exact_in(x, f64) || lo + ulp > f->max) continue;
            const fmt_round_opts o = {.mode = FMT_SR, .seed = seed, .stream = 1000 + t};
            for (size_t i = 0; i < NREP; i++) y[i] = x;
            round_arr(f, f64, y, NREP, &o, NULL);
            double sum = 0;
            for (size_t i = 0; i < NREP; i++) sum += y[i];
            const double mean = sum / NREP;
            cr_assert(fabs(mean - x) <= ulp * binom_bound(frac),
                      "%s %s: mean of sr(%a) over %d draws is %a, off by %.3g ulp (bound %.3g)",
                      f->name, f64 ? "f64" : "f32", x, NREP, mean, (mean - x) / ulp,
                      binom_bound(frac));
        }
        free(y);
    }
}

Test(sr, unbiased_mean_f32) { check_mean(false); }
Test(sr, unbiased_mean_f64) { check_mean(true); }

// ---------------------------------------------------------------- a pure function of the key

// Inputs whose rounding is a coin flip of probability ~1/2, so that another key must differ.
static void fill_halfway(const fmt_t *f, bool f64, double *x, size_t n, uint64_t seed) {
    const fmt_rng_key key = fmt_rng_make_key(seed, 400);
    // frac has bits down to 2^-(j+1): x needs mbits + j + 2 <= precision bits.
    const int j = spare_bits(f, f64) - 1 < 16 ? spare_bits(f, f64) - 1 : 16;
    for (size_t i = 0; i < n; i++) {
        const double frac = 0.25 + 0.5 * ldexp((double)(fmt_rng_u32(key, i) >> (32 - j)), -j);
        const double v = (1.0 + ldexp(frac, -f->mbits)) * ((i & 1) && f->is_signed ? -1 : 1);
        x[i] = f64 ? v : (float)v;
    }
}

static size_t count_diff(const double *a, const double *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += !tu_same(a[i], b[i]);
    return d;
}

Test(sr, reproducible_and_keyed) {
    const uint64_t seed = test_seed("reproducible_and_keyed");
    one_thread();
    enum { N = 100000 };
    double *x = malloc(N * sizeof *x), *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    for (size_t fi = 0; fi < fmt_table_count(); fi++)
        for (int f64 = 0; f64 < 2; f64++) {
            const fmt_t *f = fmt_table_get(fi);
            if (!covered(f, f64) || spare_bits(f, f64) < 2) continue;
            fill_halfway(f, f64, x, N, seed);
            const fmt_round_opts o = {.mode = FMT_SR, .seed = seed, .stream = 5, .offset = 77};
            memcpy(a, x, N * sizeof *a);
            round_arr(f, f64, a, N, &o, NULL);
            memcpy(b, x, N * sizeof *b);
            round_arr(f, f64, b, N, &o, NULL);
            cr_assert_eq(count_diff(a, b, N), 0, "%s %s: same key, different bits", f->name,
                         f64 ? "f64" : "f32");
            // Each element is a coin flip with p in [1/4, 3/4]: two keys disagree on at least
            // 3/8 of them on average; a quarter is far below that (many sigma).
            fmt_round_opts o2 = o;
            o2.seed = seed + 1;
            memcpy(b, x, N * sizeof *b);
            round_arr(f, f64, b, N, &o2, NULL);
            cr_assert_gt(count_diff(a, b, N), N / 4, "%s: another seed gives the same bits", f->name);
            o2 = o, o2.stream = o.stream + 1;
            memcpy(b, x, N * sizeof *b);
            round_arr(f, f64, b, N, &o2, NULL);
            cr_assert_gt(count_diff(a, b, N), N / 4, "%s: another stream gives the same bits", f->name);
            o2 = o, o2.offset = o.offset + 1;
            memcpy(b, x, N * sizeof *b);
            round_arr(f, f64, b, N, &o2, NULL);
            cr_assert_gt(count_diff(a, b, N), N / 4, "%s: another offset gives the same bits", f->name);
        }
    free(x), free(a), free(b);
}

// Element i draws counter offset + i: rounding x[s..n) with offset s gives the tail of one call.
Test(sr, chunking_by_offset) {
    const uint64_t seed = test_seed("chunking_by_offset");
    enum { N = 200000 };  // several parallel chunks of round.c (16384 elements) either side
    static const size_t splits[] = {1, 12345, 16384, 100001, N - 1};
    double *x = malloc(N * sizeof *x), *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    for (size_t fi = 0; fi < fmt_table_count(); fi++)
        for (int f64 = 0; f64 < 2; f64++) {
            const fmt_t *f = fmt_table_get(fi);
            if (!covered(f, f64) || spare_bits(f, f64) < 2) continue;
            fill_halfway(f, f64, x, N, seed + fi);
            fmt_round_opts o = {.mode = FMT_SR, .seed = seed, .stream = fi, .offset = 0};
            memcpy(a, x, N * sizeof *a);
            round_arr(f, f64, a, N, &o, NULL);
            for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
                memcpy(b, x, N * sizeof *b);
                o.offset = 0;
                round_arr(f, f64, b, splits[s], &o, NULL);
                o.offset = splits[s];
                round_arr(f, f64, b + splits[s], N - splits[s], &o, NULL);
                cr_assert_eq(count_diff(a, b, N), 0, "%s %s: split at %zu changes the bits",
                             f->name, f64 ? "f64" : "f32", splits[s]);
            }
        }
    free(x), free(a), free(b);
}

Test(sr, independent_of_thread_count) {
#ifndef _OPENMP
    cr_skip_test("built without OpenMP");
#else
    const uint64_t seed = test_seed("independent_of_thread_count");
    enum { N = 1000000 };
    double *x = malloc(N * sizeof *x), *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    for (size_t fi = 0; fi < fmt_table_count(); fi++)
        for (int f64 = 0; f64 < 2; f64++) {
            const fmt_t *f = fmt_table_get(fi);
            if (!covered(f, f64) || spare_bits(f, f64) < 2) continue;
            fill_halfway(f, f64, x, N, seed + fi);
            const fmt_round_opts o = {.mode = FMT_SR, .seed = seed, .stream = fi, .offset = 3};
            fmt_stats s1 = {0}, s2 = {0};
            omp_set_num_threads(1);
            memcpy(a, x, N * sizeof *a);
            round_arr(f, f64, a, N, &o, &s1);
            omp_set_num_threads(2);
            memcpy(b, x, N * sizeof *b);
            round_arr(f, f64, b, N, &o, &s2);
            cr_assert_eq(count_diff(a, b, N), 0, "%s %s: 1 and 2 threads give different bits",
                         f->name, f64 ? "f64" : "f32");
            cr_assert(s1.n == s2.n && s1.overflow == s2.overflow && s1.underflow == s2.underflow &&
                      s1.subnormal == s2.subnormal && s1.amax == s2.amax,
                      "%s: statistics depend on the thread count", f->name);
        }
    free(x), free(a), free(b);
#endif
}

// Exact inputs never move; NaN and infinities follow the deterministic rules.
Test(sr, exact_values_and_specials) {
    const uint64_t seed = test_seed("exact_values_and_specials");
    one_thread();
    for (size_t fi = 0; fi < fmt_table_count(); fi++) {
        const fmt_t *f = fmt_table_get(fi);
        for (int f64 = 0; f64 < 2; f64++) {
            if (!covered(f, f64)) continue;
            const double v[] = {0.0, -0.0, 1.0, -1.0, f->max, -f->max, f->min_normal,
                                f->min_subnormal, -f->min_subnormal, INFINITY, -INFINITY, NAN};
            enum { NV = sizeof v / sizeof v[0], REP = 64 };
            double y[NV * REP];
            for (int ov = 0; ov < 2; ov++) {
                const fmt_round_opts o = {.mode = FMT_SR, .overflow = (fmt_overflow)ov, .seed = seed};
                fmt_round_opts ne = o;
                ne.mode = FMT_RNE;
                for (int i = 0; i < NV * REP; i++) y[i] = v[i / REP];
                round_arr(f, f64, y, NV * REP, &o, NULL);
                for (int i = 0; i < NV * REP; i++) {
                    const double want = fmt_round1(f, v[i / REP], &ne);
                    cr_assert(tu_same(y[i], want), "%s %s %s: sr(%a) = %a, rne gives %a", f->name,
                              f64 ? "f64" : "f32", fmt_overflow_name(o.overflow), v[i / REP], y[i], want);
                }
            }
        }
    }
}

// Results are values of the format: each rounds to itself.
Test(sr, f32_results_are_format_values) {
    const uint64_t seed = test_seed("f32_results_are_format_values");
    const fmt_t *f = fmt_table_get(5);  // e4m3
    enum { N = 4096 };
    float y[N];
    const fmt_rng_key key = fmt_rng_make_key(seed, 9);
    for (int i = 0; i < N; i++) y[i] = (float)random_input(f, false, key, i);
    const fmt_round_opts o = {.mode = FMT_SR, .seed = seed};
    fmt_round_f32(f, y, N, &o, NULL);
    const fmt_round_opts ne = {.mode = FMT_RNE};
    for (int i = 0; i < N; i++)  // a value of the format rounds to itself
        cr_assert(tu_same(fmt_round1(f, y[i], &ne), y[i]), "e4m3: sr result 0x%08x is not an e4m3 value",
                  tu_f2u(y[i]));
}

// Every path of fmt_round_f32 but the generic kernel, with and without statistics, on x[0..n)
// under o: bit for bit a (the generic kernel's result) and, with statistics, its counts sa.
// what names the case in a failure.
static void check_paths(const fmt_t *f, const float *x, const float *a, const fmt_stats *sa, float *b, size_t n,
                        const fmt_round_opts *o, const char *what, uint64_t seed) {
    for (int p = FMT_PATH_GENERIC + 1; p < FMT_NPATHS; p++)
        for (int st = 0; st < 2; st++) {
            fmt_round_opts q = *o;
            q.path = (fmt_round_path)p;
            if (!fmt_path_available(q.path, f, &q, st)) continue;
            memcpy(b, x, n * sizeof *x);
            fmt_stats sb = {0};
            cr_assert_eq(fmt_round_f32(f, b, n, &q, st ? &sb : NULL), FMT_OK);
            for (size_t i = 0; i < n; i++)
                cr_assert_eq(tu_f2u(a[i]), tu_f2u(b[i]),
                             "%s %s path %s: x=%a (element %zu) gives %a, the generic kernel %a (FPLAB_SEED=%llu)",
                             f->name, what, fmt_path_name(q.path), x[i], i, b[i], a[i], (unsigned long long)seed);
            if (st) cr_assert(!memcmp(sa, &sb, sizeof sb), "%s %s path %s: counts differ", f->name, what,
                              fmt_path_name(q.path));
        }
}

// Every path of fmt_round_f32 this build and CPU have for stochastic rounding (the generic
// kernel, its AVX2/AVX-512 copies, the explicit AVX-512 kernels) gives the same bits and counts:
// random bit patterns over the whole float32 range and values near every format's binades, for
// several sr_bits, keys and offsets (the draws are keyed by offset + index in each), with and
// without flushing, both overflow policies.
Test(sr, paths_agree) {
    const size_t n = 20011;  // not a multiple of any vector width
    float *x = malloc(n * sizeof *x), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    cr_assert(x && a && b);
    const uint64_t seed = test_seed("paths_agree");
    uint64_t s = seed;
    const int sr_bits[] = {0, 1, 3, 8, 13, 24, 31};
    for (size_t fi = 0; fi < fmt_table_count(); fi++) {
        const fmt_t *f = fmt_table_get(fi);
        if (f->bits > 32) continue;
        for (size_t i = 0; i < n; i++) {
            const uint64_t r = tu_splitmix64(&s);
            // half random patterns, half around the format's range (subnormals and overflow)
            const int e = f->emin - f->mbits - 3 + (int)(r >> 40) % (f->emax - f->emin + f->mbits + 6);
            x[i] = i % 2 ? tu_u2f((uint32_t)r) : (float)ldexp((r & 1 ? -1.0 : 1.0) * (1.0 + (double)(r >> 12 & 0xfffff) / 0x100000), e);
        }
        for (size_t bi = 0; bi < sizeof sr_bits / sizeof sr_bits[0]; bi++)
            for (int v = 0; v < 4; v++) {
                const fmt_round_opts o = {.mode = FMT_SR, .sr_bits = sr_bits[bi], .seed = seed + bi,
                                          .stream = (uint64_t)v, .offset = v ? (uint64_t)v << 31 | 12345u : 0,
                                          .overflow = v & 1 ? FMT_SATURATE : FMT_OVERFLOW_IEEE,
                                          .flush_subnormals = v == 2, .path = FMT_PATH_GENERIC};
                memcpy(a, x, n * sizeof *x);
                fmt_stats sa = {0};
                cr_assert_eq(fmt_round_f32(f, a, n, &o, &sa), FMT_OK);
                char what[48];
                snprintf(what, sizeof what, "sr_bits=%d variant %d", o.sr_bits, v);
                check_paths(f, x, a, &sa, b, n, &o, what, seed);
            }
    }
    free(x), free(a), free(b);
}

// Ties of a draw and the dropped bits: an input whose top r dropped bits equal its draw's r bits
// stays at its lower neighbour (it goes up only where they exceed the draw), on every path.
// Random inputs meet a tie once in 2^r, too rarely to test that the comparison is strict, so here
// each input is made from its own draw (a pure function of key and offset + index). With r = 8,
// in the normal range: a tie at every element. With r = 32, below the format's last place at its
// emin (24 to 32 bits dropped, the whole significand): a tie where the draw's bits form a
// significand, about once in 2^9 (formats whose float32 inputs can lie there).
Test(sr, draw_ties_every_path) {
    const size_t n = 1 << 15;
    float *x = malloc(n * sizeof *x), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    bool *tie = malloc(n * sizeof *tie);
    cr_assert(x && a && b && tie);
    const uint64_t seed = test_seed("draw_ties");
    uint64_t s = seed;
    size_t ties32 = 0;
    for (size_t fi = 0; fi < fmt_table_count(); fi++) {
        const fmt_t *f = fmt_table_get(fi);
        const int m = f->mbits, q = f->emin - m;  // q: the exponent of the last place at emin
        if (f->bits > 32 || m > 15) continue;
        for (int r = 8; r <= 32; r += 24) {
            if (r == 32 && (q - 32 + 23 < -126 || !f->has_subnormals || !f->has_zero)) continue;
            const fmt_round_opts o = {.mode = FMT_SR, .sr_bits = r, .seed = seed, .stream = fi, .offset = 777,
                                      .path = FMT_PATH_GENERIC};
            const fmt_rng_key key = fmt_rng_make_key(o.seed, o.stream);
            for (size_t i = 0; i < n; i++) {
                const uint32_t d = fmt_rng_u32(key, o.offset + i);
                const uint64_t rr = tu_splitmix64(&s);
                const double sign = f->is_signed && (rr & 1) ? -1.0 : 1.0;
                if (r == 8) {  // |x| = (1 + frac 2^-23) 2^e: 23 - m dropped bits, the top 8 the draw's
                    const int sd = 23 - m, lo = f->emin > -126 ? f->emin : -126;
                    const int hi = f->emax - 1 < 127 ? f->emax - 1 : 127;  // below max
                    const int e = lo + (int)((rr >> 1) % (uint64_t)(hi - lo + 1));
                    const uint32_t frac = ((uint32_t)(rr >> 40) & ((1u << m) - 1)) << sd | (d >> 24) << (sd - 8) |
                                          ((uint32_t)(rr >> 8) & ((1u << (sd - 8)) - 1));
                    x[i] = (float)(sign * ldexp(1.0 + ldexp(frac, -23), e)), tie[i] = true;
                } else {  // |x| = sig 2^(q - sd): all sd bits of sig dropped, top32 = sig << (32 - sd)
                    const int sd = 24 + (int)((rr >> 1) % 9);
                    const uint32_t t = d >> (32 - sd), low = sd == 32 ? 0 : d & ((1u << (32 - sd)) - 1);
                    tie[i] = low == 0 && t >= 0x800000u && t < 0x1000000u;
                    const uint32_t sig = tie[i] ? t : ((uint32_t)(rr >> 8) & 0x7fffffu) | 0x800000u;
                    x[i] = (float)(sign * ldexp(sig, q - sd));
                    ties32 += tie[i];
                }
            }
            memcpy(a, x, n * sizeof *x);
            fmt_stats sa = {0};
            cr_assert_eq(fmt_round_f32(f, a, n, &o, &sa), FMT_OK);
            fmt_round_opts tz = o;
            tz.mode = FMT_RTZ;
            for (size_t i = 0; i < n; i++)
                if (tie[i])
                    cr_assert(tu_same(a[i], fmt_round1(f, x[i], &tz)), "%s sr_bits=%d: x=%a, whose dropped bits "
                              "equal its draw, gives %a, not its lower neighbour (FPLAB_SEED=%llu)",
                              f->name, r, x[i], a[i], (unsigned long long)seed);
            char what[48];
            snprintf(what, sizeof what, "sr_bits=%d, inputs tied to their draws", r);
            check_paths(f, x, a, &sa, b, n, &o, what, seed);
            fmt__kparams k;  // the AVX2 kernels, which are FMT_PATH_LEAN only on CPUs without AVX-512
            fmt__kparams_make(&k, f, &o);
            if (fmt__lean_avx2_runs() && fmt__round_f32_lean_avx2(&k, FMT_SR, b, x, n, 0, NULL))
                for (size_t i = 0; i < n; i++)
                    cr_assert_eq(tu_f2u(a[i]), tu_f2u(b[i]), "%s sr_bits=%d AVX2 kernel: x=%a (a tie: %d) gives %a, "
                                 "the generic kernel %a (FPLAB_SEED=%llu)", f->name, r, x[i], tie[i], b[i], a[i],
                                 (unsigned long long)seed);
        }
    }
    cr_assert_gt(ties32, 100, "only %zu ties with 32 random bits", ties32);
    free(x), free(a), free(b), free(tie);
}

// ---------------------------------------------------------------- P3109's variants A, B, C

// The draft's rules, bit for bit, with the random bits given: with fplab's draw D (the top N
// bits of the 32-bit draw) and R = 2^N - 1 - D, an input with fraction nu = j / 2^(N+3) of an
// ulp above its lower neighbour rounds up iff A: floor(nu 2^N) + R >= 2^N; B: floor(nu
// 2^(N+1)) + 2R + 1 >= 2^(N+1); C: RNE(nu 2^N) + R >= 2^N (round.h), for every j and R.
// Through the per-element rounder (round_scalar.h, the float64 kernel's own code).
Test(sr, p3109_variants_exact) {
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, "e4m3"), FMT_OK);
    size_t checked = 0;
    for (int v = FMT_SR_A; v < FMT_NSR_VARIANTS; v++)
        for (int N = 1; N <= 6; N++) {
            const fmt_round_opts o = {.mode = FMT_SR, .sr_bits = N, .sr_variant = (fmt_sr_variant)v};
            fmt_rounder r;
            cr_assert_eq(fmt_rounder_make(&r, &f, &o), FMT_OK);
            const int64_t S = 1LL << (N + 3), two_n = 1LL << N;
            for (int64_t j = 0; j < S; j++) {
                const double lo = 1.25, ulp = 0.125, x = lo + ulp * (double)j / (double)S;  // e4m3: ulp 1/8 at 1
                for (int64_t R = 0; R < two_n; R++) {
                    bool up;
                    if (v == FMT_SR_A) up = (j >> 3) + R >= two_n;
                    else if (v == FMT_SR_B) up = (j >> 2) + 2 * R + 1 >= 2 * two_n;
                    else {
                        const int64_t fl = j >> 3, rest = j & 7;  // nu 2^N = fl + rest/8
                        up = fl + (rest > 4 || (rest == 4 && (fl & 1))) + R >= two_n;
                    }
                    const uint32_t draw = (uint32_t)(two_n - 1 - R) << (32 - N);
                    fmt__flags fl;
                    const double got = fmt__round_one_f64(&r.k, FMT_SR, x, draw, &fl);
                    const double want = j == 0 ? lo : up ? lo + ulp : lo;
                    cr_assert_eq(got, want, "variant %c N=%d nu=%lld/%lld R=%lld: got %a want %a", 'A' + v, N,
                                 (long long)j, (long long)S, (long long)R, got, want);
                    checked++;
                }
            }
        }
    cr_log_info("sr: P3109 variants A, B, C exact on %zu (input, R) pairs\n", checked);
}

// The float32 kernel gives the float64 kernel's bits in every variant (same seed and indices).
Test(sr, p3109_variants_f32_equals_f64) {
    const char *names[] = {"e4m3", "bf16", "e2m1", "binary8p3se", "e8m0"};
    const uint64_t seed = test_seed("p3109_variants_f32_equals_f64");
    enum { N = 1 << 14 };
    static float y[N];
    static double z[N];
    for (size_t q = 0; q < sizeof names / sizeof *names; q++) {
        fmt_t f;
        cr_assert_eq(fmt_from_name(&f, names[q]), FMT_OK);
        for (int v = FMT_SR_A; v < FMT_NSR_VARIANTS; v++)
            for (int bits = 1; bits <= 32; bits += 7) {
                const fmt_rng_key key = fmt_rng_make_key(seed, (uint64_t)(v * 64 + bits));
                for (size_t i = 0; i < N; i++) {
                    const uint32_t u = fmt_rng_u32(key, i);
                    float x;
                    memcpy(&x, &u, sizeof x);
                    if (i % 4) x = ldexpf((float)(u >> 8) / 16777216.0f + 0.5f, (int)(u & 31) - 16);
                    y[i] = x, z[i] = x;
                }
                const fmt_round_opts o = {.mode = FMT_SR, .sr_bits = bits, .sr_variant = (fmt_sr_variant)v,
                                          .seed = seed};
                cr_assert_eq(fmt_round_f32(&f, y, N, &o, NULL), FMT_OK);
                cr_assert_eq(fmt_round_f64(&f, z, N, &o, NULL), FMT_OK);
                for (size_t i = 0; i < N; i++)
                    cr_assert(tu_same((double)y[i], z[i]) || (isnan(y[i]) && isnan(z[i])),
                              "%s variant %c bits %d element %zu: f32 %a f64 %a", f.name, 'A' + v, bits, i,
                              (double)y[i], z[i]);
            }
    }
}
