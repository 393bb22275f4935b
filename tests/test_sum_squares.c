// test_sum_squares.c: clip__sum_squares against the plain loop it stands for, bit for bit:
// wide random magnitudes, squares with few bits (ties, whose rounding follows the running sum's
// parity), sums that cross a binade in every block, leading and signed zeros, subnormal and
// huge operands, NaN and inf, and every length around the blocks' and lanes' edges.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/test_util.h"
#include "trainer/sum_squares_internal.h"

static double plain(const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

static void same(const float *x, size_t n, const char *what) {
    const double want = plain(x, n), got = clip__sum_squares(x, n);
    cr_assert(memcmp(&want, &got, sizeof want) == 0, "%s, n = %zu: %a, the plain loop %a", what, n, got, want);
}

// The plain loop's additions that were ties, by the parity of the sum before them (in units of
// its last place): how much of the tie rule a data set exercises.
static void count_ties(const float *x, size_t n, long ties[2]) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double q = (double)x[i] * x[i];
        if (s > 0 && isfinite(s)) {
            int e;
            frexp(s, &e);
            const double y = ldexp(q, 53 - e), S = ldexp(s, 53 - e);  // exact: powers of two
            if (y < 0x1p51 && y - floor(y) == 0.5) ties[(uint64_t)S & 1]++;
        }
        s += q;
    }
}

// Normal-ish values over 2^-30 .. 2^10, random signs.
static void fill_wide(float *x, size_t n, uint64_t *st) {
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((tu_sm_unif(st) - 0.5) * ldexp(1.0, tu_sm_int(st, -30, 10)));
}

// Few significant bits (k * 2^e, k < 16), so many squares end half a unit below the sum's last place.
static void fill_few_bits(float *x, size_t n, uint64_t *st) {
    for (size_t i = 0; i < n; i++) {
        const float k = (float)tu_sm_int(st, 1, 15);
        x[i] = ldexpf(tu_sm_int(st, 0, 1) ? -k : k, tu_sm_int(st, -30, 0));
    }
}

Test(sum_squares, random_magnitudes_every_length) {
    uint64_t st = tu_seed("sum_squares", "random_magnitudes_every_length", 11);
    enum { N = 812288 + 5 };  // the Shakespeare model's parameters, and a ragged end
    float *x = malloc(N * sizeof *x);
    cr_assert(x);
    fill_wide(x, N, &st);
    const size_t lens[] = {0, 1, 2, 7, 8, 9, 63, 64, 65, 511, 512, 513, 519, 1023, 1024, 1031, 4099, 65536, N};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) same(x, lens[i], "wide magnitudes");
    for (size_t off = 1; off < 9; off++) same(x + off, N - off, "unaligned");
    free(x);
}

Test(sum_squares, ties_follow_the_parity) {
    uint64_t st = tu_seed("sum_squares", "ties_follow_the_parity", 12);
    enum { N = 200000 };
    float *x = malloc(N * sizeof *x);
    cr_assert(x);
    fill_few_bits(x, N, &st);
    long ties[2] = {0, 0};
    count_ties(x, N, ties);
    // Both roundings of a tie occur many times (a wrong correction changes the sum).
    cr_assert(ties[0] > 1000 && ties[1] > 1000, "ties after an even sum %ld, after an odd one %ld", ties[0], ties[1]);
    same(x, N, "few significant bits");
    for (size_t i = 0; i < N; i++) x[i] = i % 3 ? x[i] : 0.0f;  // zeros between them
    same(x, N, "few significant bits and zeros");
    free(x);
}

Test(sum_squares, binade_crossings) {
    enum { N = 20000 };
    float *x = malloc(N * sizeof *x);
    cr_assert(x);
    // Growing squares: the sum doubles within most blocks, some blocks end exactly on a power of two.
    for (size_t i = 0; i < N; i++) x[i] = ldexpf(1.0f + (float)(i % 7) / 8, (int)(i / 200));
    same(x, N, "growing");
    for (size_t i = 0; i < N; i++) x[i] = i < 512 ? 1.0f : 0x1p20f;  // the sum passes 2^53 u at once
    same(x, N, "a step up");
    for (size_t i = 0; i < N; i++) x[i] = 0x1p26f;  // squares 2^52: every addition exact, sums powers of two
    same(x, N, "powers of two");
    free(x);
    // A block's rounded end lands on 2^53 units: the sum is exact only below it.
    const float edge[9] = {0x1.fffffep-1f, 0x1.6a08p-12f, 0x1.289fd6p-19f};
    same(edge, 9, "a block ending at the binade's top");
    // A square between 2^51 and 2^52 of the sum's units (past the magic number's range).
    const float big[9] = {1.0f, 0.75f};
    same(big, 9, "a square of 2^51.2 units");
}

Test(sum_squares, zeros_subnormals_huge) {
    enum { N = 3000 };
    float x[N];
    for (size_t i = 0; i < N; i++) x[i] = i % 2 ? -0.0f : 0.0f;
    same(x, N, "zeros");
    for (size_t i = 0; i < N; i++) x[i] = i < 1500 ? 0.0f : (float)i;  // zeros first: s has no binade
    same(x, N, "leading zeros");
    uint64_t st = tu_seed("sum_squares", "zeros_subnormals_huge", 13);
    for (size_t i = 0; i < N; i++) x[i] = (float)tu_sm_int(&st, 1, 1000) * 0x1p-149f;  // subnormal floats
    same(x, N, "subnormals");
    x[N / 2] = 1e-20f;
    same(x, N, "subnormals and one normal");
    for (size_t i = 0; i < N; i++) x[i] = (float)(FLT_MAX * tu_sm_unif(&st));  // squares near 2^256
    same(x, N, "huge");
    for (size_t i = 0; i < N; i++) x[i] = i % 100 ? (float)tu_sm_unif(&st) : 1e30f;  // squares 2^60 over the sum
    same(x, N, "spikes");
}

Test(sum_squares, nan_and_inf) {
    enum { N = 5000 };
    float x[N];
    uint64_t st = tu_seed("sum_squares", "nan_and_inf", 14);
    const size_t at[] = {0, 1, 600, 1024, 4999};
    for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
        for (size_t i = 0; i < N; i++) x[i] = (float)(tu_sm_unif(&st) - 0.5);
        x[at[k]] = NAN;
        same(x, N, "a NaN");
        x[at[k]] = -NAN;  // x86's own NaNs (0 / 0, inf - inf) have the sign bit set
        same(x, N, "a negative NaN");
        x[at[k]] = -INFINITY;
        same(x, N, "an inf");
        if (at[k] + 1 < N) x[at[k] + 1] = NAN;
        same(x, N, "an inf, then a NaN");
    }
}
