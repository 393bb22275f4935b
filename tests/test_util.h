// test_util.h: helpers shared by the Criterion suites in tests/ (header-only, static inline).
// - tu_seed: the seed of a random test, from env FPLAB_SEED or the suite's default, printed so
//   that a failure can be replayed.
// - tu_splitmix64 / tu_sm_int / tu_sm_unif: a seeded splitmix64 stream and draws from it.
// - tu_rng and tu_rng_*: draws from the library's counter-based generator (formats/rng.h).
// - bit casts (tu_f2u, tu_u2f, tu_d2u, tu_u2d) and bit-exact equality where any NaN equals
//   any NaN (tu_same for double, tu_samef for float).
// - tu_fmt / tu_scaling: a format or scaling recipe by name, failing the test if it is unknown.
// - tu_word_corpus: a text file of words from a small list, which a small model learns quickly.
// - tu_fixture: a file under tests/fixtures/ opened for reading (FPLAB_ROOT: the repository).
// - tu_tmpdir / tu_rmtree: a suite's own temporary directory, made and removed.
#ifndef FPLAB_TEST_UTIL_H
#define FPLAB_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/rng.h"
#include "formats/scale.h"

// --- fixtures

// tests/fixtures/<name> under $FPLAB_ROOT (default: the working directory), opened for reading;
// fails the test with the path and how to make it (how: the make target) if it cannot be.
static inline FILE *tu_fixture(const char *name, const char *how) {
    const char *root = getenv("FPLAB_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", root && *root ? root : ".", name);
    FILE *fh = fopen(path, "r");
    cr_assert(fh, "cannot open %s: run from the repository root, set FPLAB_ROOT, or regenerate it with `%s`",
              path, how);
    return fh;
}

// --- seed

// FPLAB_SEED (any strtoull base: 123 or 0x7b) if set and not empty, else dflt; prints
// "<suite> <test>: seed N (FPLAB_SEED=N replays)" on stderr.
static inline uint64_t tu_seed(const char *suite, const char *test, uint64_t dflt) {
    const char *e = getenv("FPLAB_SEED");
    const uint64_t seed = e && *e ? strtoull(e, NULL, 0) : dflt;
    fprintf(stderr, "%s %s: seed %llu (FPLAB_SEED=%llu replays)\n", suite, test,
            (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

// --- splitmix64 stream (state *s advances by one step a draw)

static inline uint64_t tu_splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// An int in [lo, hi] (modulo reduction: bias negligible for the small ranges of the tests).
static inline int tu_sm_int(uint64_t *s, int lo, int hi) {
    return lo + (int)(tu_splitmix64(s) % (uint64_t)(hi - lo + 1));
}

// Uniform in [0, 1) on the 2^-53 grid.
static inline double tu_sm_unif(uint64_t *s) { return (double)(tu_splitmix64(s) >> 11) * 0x1p-53; }

// --- counter-based generator: draw n of key

typedef struct {
    fmt_rng_key key;
    uint64_t n;
} tu_rng;

static inline uint32_t tu_rng_u32(tu_rng *r) { return fmt_rng_u32(r->key, r->n++); }
// Uniform in (0, 1): never 0, so log() of it is finite.
static inline double tu_rng_unif(tu_rng *r) { return ((double)tu_rng_u32(r) + 0.5) * 0x1p-32; }
static inline int tu_rng_int(tu_rng *r, int lo, int hi) {
    return lo + (int)(tu_rng_u32(r) % (uint32_t)(hi - lo + 1));
}
// Standard normal (Box-Muller, one of the pair).
static inline double tu_rng_normal(tu_rng *r) {
    const double u1 = tu_rng_unif(r), u2 = tu_rng_unif(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// --- bits

static inline uint32_t tu_f2u(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float tu_u2f(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static inline uint64_t tu_d2u(double d) { uint64_t u; memcpy(&u, &d, sizeof u); return u; }
static inline double tu_u2d(uint64_t u) { double d; memcpy(&d, &u, sizeof d); return d; }

// Bit-exact equality; any NaN equals any NaN (NaN signs and payloads are not specified).
static inline bool tu_same(double a, double b) { return (isnan(a) && isnan(b)) || tu_d2u(a) == tu_d2u(b); }
static inline bool tu_samef(float a, float b) { return (isnan(a) && isnan(b)) || tu_f2u(a) == tu_f2u(b); }

// --- formats by name

static inline fmt_t tu_fmt(const char *name) {
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, name), FMT_OK, "format %s", name);
    return f;
}

static inline fmt_scaling tu_scaling(const char *spec) {
    fmt_scaling sc;
    char msg[256];
    cr_assert_eq(fmt_scaling_from_name(&sc, spec, msg, sizeof msg), FMT_OK, "%s: %s", spec, msg);
    return sc;
}

// Writes `count` words drawn from a list of eight (splitmix64 from seed) to path.
static inline void tu_word_corpus(const char *path, uint64_t seed, int count) {
    static const char *words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat.\n", "and ", "dog "};
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    for (int i = 0; i < count; i++) fputs(words[tu_splitmix64(&seed) % 8], f);
    fclose(f);
}

// --- temporary directories

// A fresh directory "/tmp/fplab_NAME_XXXXXX" into dir (cap >= 64), failing the test if it
// cannot be made; for a suite's .init.
static inline void tu_tmpdir(char *dir, size_t cap, const char *name) {
    snprintf(dir, cap, "/tmp/fplab_%s_XXXXXX", name);
    cr_assert_not_null(mkdtemp(dir), "mkdtemp %s failed", dir);
}
// Removes dir and everything in it; a failure is said on stderr (a suite's .fini).
static inline void tu_rmtree(const char *dir) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

#endif
