// test_rng.c: the counter-based generator (rng.h): fmt_rng_u32 and fmt_rng_uniform.
// Statistical checks with thresholds from the distributions, at a false-alarm rate of about
// 1e-6 per check: chi-square uniformity, per-bit balance, no correlation between streams, seeds
// or neighbouring indices, and the high half of a 64-bit index taking part.
// Seeds are printed and read from FPLAB_SEED to replay.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/rng.h"
#include "test_util.h"

enum { N = 1000000 };

// Upper 1e-6 quantile of the chi-square distribution with 255 degrees of freedom: 377.08
// (regularized upper incomplete gamma Q(255/2, x/2) = 1e-6, solved by bisection; the
// Wilson-Hilferty approximation gives 377.2).
static const double CHI2_255_P1EM6 = 377.08;
// 4.89 sigma is the two-sided 1e-6 point of a normal; 5 sigma is used throughout.
static const double ZMAX = 5.0;

static uint64_t test_seed(const char *test) { return tu_seed("test_rng", test, 0x5eedf00dULL); }

static double chi2_256(const uint64_t *count, uint64_t n) {
    const double e = n / 256.0;
    double c = 0;
    for (int i = 0; i < 256; i++) c += (count[i] - e) * (count[i] - e) / e;
    return c;
}

// Top 8 bits of N draws starting at index `first` (which may cross 2^32) in 256 buckets.
static double chi2_top8(fmt_rng_key key, uint64_t first) {
    uint64_t count[256] = {0};
    for (uint64_t i = 0; i < N; i++) count[fmt_rng_u32(key, first + i) >> 24]++;
    return chi2_256(count, N);
}

Test(rng, chi_square_top_8_bits) {
    const uint64_t seed = test_seed("chi_square_top_8_bits");
    const uint64_t starts[] = {0, ((uint64_t)1 << 32) - N / 2, (uint64_t)1 << 40};
    for (int s = 0; s < 2; s++)
        for (size_t t = 0; t < sizeof starts / sizeof starts[0]; t++) {
            const double c = chi2_top8(fmt_rng_make_key(seed + s, 0), starts[t]);
            cr_assert_lt(c, CHI2_255_P1EM6, "seed %llu, indices from %llu: chi2 = %.1f >= %.2f",
                         (unsigned long long)(seed + s), (unsigned long long)starts[t], c,
                         CHI2_255_P1EM6);
        }
}

// The low 8 bits as well: a hash with a weak low byte would pass the test above.
Test(rng, chi_square_low_8_bits) {
    const uint64_t seed = test_seed("chi_square_low_8_bits");
    const fmt_rng_key key = fmt_rng_make_key(seed, 1);
    uint64_t count[256] = {0};
    for (uint64_t i = 0; i < N; i++) count[fmt_rng_u32(key, i) & 255]++;
    const double c = chi2_256(count, N);
    cr_assert_lt(c, CHI2_255_P1EM6, "chi2 = %.1f", c);
}

// Each of the 32 bits is one with probability 1/2: |ones - N/2| <= 5 * sqrt(N/4).
Test(rng, per_bit_balance) {
    const uint64_t seed = test_seed("per_bit_balance");
    const fmt_rng_key key = fmt_rng_make_key(seed, 2);
    uint64_t ones[32] = {0};
    for (uint64_t i = 0; i < N; i++) {
        const uint32_t x = fmt_rng_u32(key, i);
        for (int b = 0; b < 32; b++) ones[b] += x >> b & 1;
    }
    const double tol = ZMAX * sqrt(N / 4.0);
    for (int b = 0; b < 32; b++)
        cr_assert_leq(fabs((double)ones[b] - N / 2.0), tol, "bit %d: %llu ones of %d (tol %.0f)", b,
                      (unsigned long long)ones[b], N, tol);
}

// Two sequences compared index by index: equal draws (expected N * 2^-32 ~ 2.3e-4, so at most
// 2 allows a chance of ~2e-12), bits that agree (popcount of the XOR: mean 16 per draw,
// variance 8), and the Pearson correlation of the draws as uniforms (|r| <= 5 / sqrt(N)).
typedef struct {
    fmt_rng_key key;
    uint64_t first;
} seq;

static void check_unrelated(seq a, seq b, const char *what) {
    uint64_t equal = 0, xor_pop = 0;
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (uint64_t i = 0; i < N; i++) {
        const uint32_t x = fmt_rng_u32(a.key, a.first + i), y = fmt_rng_u32(b.key, b.first + i);
        equal += x == y;
        xor_pop += (uint64_t)__builtin_popcount(x ^ y);
        const double u = x * 0x1p-32, v = y * 0x1p-32;
        sa += u, sb += v, saa += u * u, sbb += v * v, sab += u * v;
    }
    cr_assert_leq(equal, 2, "%s: %llu equal draws of %d (expected %.2g)", what,
                  (unsigned long long)equal, N, N * 0x1p-32);
    const double tol = ZMAX * sqrt(8.0 * N);
    cr_assert_leq(fabs((double)xor_pop - 16.0 * N), tol, "%s: %llu differing bits, expected %d +- %.0f",
                  what, (unsigned long long)xor_pop, 16 * N, tol);
    const double cov = sab / N - (sa / N) * (sb / N);
    const double r = cov / sqrt((saa / N - sa * sa / N / N) * (sbb / N - sb * sb / N / N));
    cr_assert_leq(fabs(r), ZMAX / sqrt(N), "%s: correlation %.5f", what, r);
}

Test(rng, streams_and_seeds_unrelated) {
    const uint64_t seed = test_seed("streams_and_seeds_unrelated");
    const seq base = {fmt_rng_make_key(seed, 0), 0};
    check_unrelated(base, (seq){fmt_rng_make_key(seed, 1), 0}, "stream 0 vs stream 1");
    check_unrelated(base, (seq){fmt_rng_make_key(seed + 1, 0), 0}, "seed vs seed + 1");
    check_unrelated(base, (seq){fmt_rng_make_key(seed ^ 0x8000000000000000ULL, 0), 0},
                    "seed vs seed with the top bit flipped");
    check_unrelated((seq){fmt_rng_make_key(seed, seed + 1), 0},
                    (seq){fmt_rng_make_key(seed + 1, seed), 0}, "(seed, stream) swapped");
    // Neighbouring indices of one stream (lag 1).
    check_unrelated(base, (seq){base.key, 1}, "index i vs i + 1");
}

Test(rng, index_high_bits_matter) {
    const uint64_t seed = test_seed("index_high_bits_matter");
    const fmt_rng_key key = fmt_rng_make_key(seed, 3);
    check_unrelated((seq){key, 0}, (seq){key, (uint64_t)1 << 32}, "index i vs i + 2^32");
    check_unrelated((seq){key, 0}, (seq){key, (uint64_t)1 << 33}, "index i vs i + 2^33");
    check_unrelated((seq){key, 0}, (seq){key, (uint64_t)1 << 63}, "index i vs i + 2^63");
    check_unrelated((seq){key, 5}, (seq){key, 5 + 0xffffffff00000000ULL}, "index i vs i + all high ones");
}

Test(rng, pure_function_of_key_and_index) {
    const uint64_t seed = test_seed("pure_function_of_key_and_index");
    const fmt_rng_key a = fmt_rng_make_key(seed, 9), b = fmt_rng_make_key(seed, 9);
    cr_assert(a.k0 == b.k0 && a.k1 == b.k1 && a.k2 == b.k2, "fmt_rng_make_key is not deterministic");
    for (uint64_t i = 0; i < 1000; i++) cr_assert_eq(fmt_rng_u32(a, i), fmt_rng_u32(b, i));
    const fmt_rng_key c = fmt_rng_make_key(9, seed);
    cr_assert(a.k0 != c.k0 || a.k1 != c.k1 || a.k2 != c.k2, "(seed, stream) and (stream, seed) collide");
}

// fmt_rng_uniform: in [0, 1), a multiple of 2^-53, uniform (chi-square over 256 bins) and with
// mean 1/2 +- 5 sqrt(1/12 / N).
Test(rng, uniform_double) {
    const uint64_t seed = test_seed("uniform_double");
    const fmt_rng_key key = fmt_rng_make_key(seed, 4);
    uint64_t count[256] = {0};
    double sum = 0;
    for (uint64_t i = 0; i < N; i++) {
        const double u = fmt_rng_uniform(key, i);
        cr_assert(u >= 0 && u < 1, "uniform(%llu) = %a", (unsigned long long)i, u);
        const double s = u * 0x1p53;
        cr_assert_eq(s, floor(s), "uniform(%llu) = %a is not a multiple of 2^-53", (unsigned long long)i, u);
        count[(int)(u * 256)]++;
        sum += u;
    }
    const double c = chi2_256(count, N);
    cr_assert_lt(c, CHI2_255_P1EM6, "chi2 = %.1f", c);
    const double tol = ZMAX * sqrt(1.0 / 12 / N);
    cr_assert_leq(fabs(sum / N - 0.5), tol, "mean %.6f", sum / N);
    // It is built from draws 2i and 2i+1 of fmt_rng_u32, high bits first.
    for (uint64_t i = 0; i < 100; i++) {
        const uint64_t hi = fmt_rng_u32(key, 2 * i), lo = fmt_rng_u32(key, 2 * i + 1);
        cr_assert_eq(fmt_rng_uniform(key, i), (double)((hi << 32 | lo) >> 11) * 0x1p-53);
    }
}
