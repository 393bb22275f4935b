// test_block_lean.c: block scaling's explicit kernels called directly (formats/round_internal.h's
// fmt__block_req): the dispatched one (fmt__scale_round_f32_lean: AVX-512, else AVX2) and the
// AVX2 one on every CPU with AVX2 (the library takes it only where there is no AVX-512, so the
// AVX-512 machines test it here), against a reference made of the generic element kernel and a
// float64 division: out = round(q) * deq with q = in * mul, or for exact tiles the quotient
// in / deq rounded to odd into float32; elems = round(q); zeroed counts the nonzero inputs of
// tiles whose multiplier is 0. Values, element values, counts and zeroed, bit for bit, over
// element formats of the three methods, every mode, both overflow policies, tile widths 16, 32,
// 48 and per column, one row and rows ld apart, ragged ends, inputs on and near the quotients'
// rounding boundaries, subnormals, zeros, infinities and NaN. And the tiles' amax kernels.
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/round_internal.h"
#include "test_util.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static uint64_t test_seed(const char *test) { return tu_seed("test_block_lean", test, 0xb10c4eaULL); }

// x / d rounded to odd into float32 (d nonzero): the float64 quotient is on the same side of
// every float32 value as the exact one (a quotient of floats is a float32 value or 2^-48
// relative from each), so its truncation, with the last bit set where inexact, is the answer.
static float div_rto_ref(float x, float d) {
    const double z = (double)x / (double)d;
    if (isnan(z) || isinf(z)) return (float)z;
    float y = (float)z;
    if (fabs((double)y) > fabs(z)) y = nextafterf(y, 0.0f);
    if ((double)y != z) y = tu_u2f(tu_f2u(y) | 1u);
    return y;
}

// A value of the element format's grid, a midpoint, or one of those nudged by a few float32
// ulps, times d: the quotients land on and beside the rounding boundaries (near_exact's cases).
static float nudged_boundary(uint64_t *s, float d, double top, int nudge) {
    double v = ldexp(1.0 + (double)(tu_splitmix64(s) % 8) / 8.0, tu_sm_int(s, -12, 3)) * top / 8.0;
    float x = (float)(v * d);
    for (int k = nudge; k; k += k > 0 ? -1 : 1) x = nextafterf(x, k > 0 ? INFINITY : 0.0f);
    return (tu_splitmix64(s) & 1) ? -x : x;
}

static float near_boundary(uint64_t *s, float d, double top) {
    return nudged_boundary(s, d, top, tu_sm_int(s, -3, 3));
}

// Finite inputs that mostly take near_exact's shortcut (9 to 40 ulps from a boundary), with one
// lane in eight 1 to 3 ulps from one, where only the division rounds right: a vector then takes
// the shortcut or not by that lane alone.
static float shortcut_input(uint64_t *s, float d, double top) {
    const int k = tu_splitmix64(s) % 8 ? tu_sm_int(s, 9, 40) : tu_sm_int(s, 1, 3);
    return nudged_boundary(s, d, top, (tu_splitmix64(s) & 1) ? k : -k);
}

static float random_input(uint64_t *s, float d, double top) {
    switch (tu_splitmix64(s) % 16) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return (tu_splitmix64(s) & 1) ? INFINITY : -INFINITY;
    case 3: return NAN;
    case 4: return tu_u2f((uint32_t)(tu_splitmix64(s) & 0x807fffffu));  // float32 subnormals
    case 5: case 6: case 7: case 8: return near_boundary(s, d, top);
    default: {
        const float v = (float)ldexp(1.0 + tu_sm_unif(s), tu_sm_int(s, -30, 20));
        return (tu_splitmix64(s) & 1) ? -v : v;
    }
    }
}

// A tile's multiplier and divisor: zero (the multiplier only), one, powers of two, full-precision
// floats, float32 subnormals (whose reciprocal overflows float32).
static float random_scale(uint64_t *s) {
    switch (tu_splitmix64(s) % 8) {
    case 0: return 0.0f;
    case 1: return 1.0f;
    case 2: return (float)ldexp(1.0, tu_sm_int(s, -20, 20));
    case 3: return tu_u2f((uint32_t)(tu_splitmix64(s) % 0x7fffffu) + 1u);
    default: return (float)ldexp(1.0 + tu_sm_unif(s), tu_sm_int(s, -12, 12));
    }
}

typedef bool kernel_fn(const fmt__block_req *r);

// The reference of one call r (its own output arrays: out, elems, counts, zeroed).
static void reference(const fmt__block_req *r, float *out, float *elems, fmt__counts *counts, uint64_t *zeroed) {
    float *q = malloc(r->n * sizeof *q);
    cr_assert(q);
    for (size_t row = 0; row < r->rows; row++) {
        const float *in = r->in + row * r->ld;
        for (size_t i = 0; i < r->n; i++) {
            const size_t t = r->tc == 1 ? i : i / r->tc;
            const float m = r->mul[t], d = r->deq[t];
            if (m == 0.0f) *zeroed += in[i] != 0.0f;  // NaN counts
            q[i] = r->exact && d != 0.0f ? div_rto_ref(in[i], d) : in[i] * m;
        }
        fmt__round_f32_kernel(r->k, FMT_PATH_GENERIC, r->mode, q, r->n, r->base + row * r->ld, counts);
        for (size_t i = 0; i < r->n; i++) {
            elems[row * r->ld + i] = q[i];
            out[row * r->ld + i] = q[i] * r->deq[r->tc == 1 ? i : i / r->tc];
        }
    }
    free(q);
}

// got (the kernel's) against want (the reference's); with exact quotients the kernel leaves amax
// as it was (0 here: fmt__block_req).
static bool same_counts(const fmt__counts *got, const fmt__counts *want, bool exact) {
    return got->overflow == want->overflow && got->underflow == want->underflow &&
           got->subnormal == want->subnormal && got->nan_in == want->nan_in && got->invalid == want->invalid &&
           tu_f2u(got->amax) == (exact ? 0u : tu_f2u(want->amax));
}

// Runs kernel on every case; returns how many calls it took (did not decline).
// every: the kernel takes multipliers too on every CPU (the AVX2 one called directly).
static size_t sweep(kernel_fn *kernel, const char *kname, bool every, uint64_t seed) {
    static const char *const names[] = {"e2m1", "e4m3", "e5m2", "e3m2", "e2m3", "fp16", "bf16", "binary8p3se"};
    static const size_t tcs[] = {16, 32, 48, 1};
    size_t ran = 0;
    uint64_t s = seed;
    for (size_t fi = 0; fi < sizeof names / sizeof names[0]; fi++) {
        const fmt_t f = tu_fmt(names[fi]);
        for (size_t ti = 0; ti < sizeof tcs / sizeof tcs[0]; ti++)
            for (int mode = 0; mode < FMT_NMODES; mode++)
                for (int variant = 0; variant < 8; variant++) {
                    // bit 0: exact quotients; bit 1: three rows; bit 2: statistics. Each variant
                    // its own end of the last tile (partial vector, whole and partial, one whole
                    // vector, a whole tile and a vector), and per column, 37 or 300 columns.
                    static const size_t extra[] = {7, 15, 8, 24};
                    const bool exact = variant & 1, stats = variant & 4, shortcut = (variant & 5) == 5;
                    const size_t tc = tcs[ti], rows = variant & 2 ? 3 : 1;
                    const size_t n = tc == 1 ? (variant & 2 ? 300 : 37) : 5 * tc + extra[variant % 4];
                    const size_t ld = n + 5, nt = tc == 1 ? n : (n + tc - 1) / tc, len = (rows - 1) * ld + n;
                    const fmt_round_opts o = {.mode = (fmt_round_mode)mode,
                                              .overflow = variant % 3 ? FMT_SATURATE : FMT_OVERFLOW_IEEE,
                                              .seed = 11, .offset = 3};
                    if (fmt_validate_round_opts(&f, &o, NULL, 0) != FMT_OK) continue;
                    fmt__kparams k;
                    fmt__kparams_make(&k, &f, &o);
                    float *mul = malloc(nt * sizeof *mul), *deq = malloc(nt * sizeof *deq);
                    float *in = malloc(len * sizeof *in), *out = malloc(len * sizeof *out);
                    float *elems = malloc(len * sizeof *elems), *wout = malloc(len * sizeof *wout);
                    float *welems = malloc(len * sizeof *welems);
                    cr_assert(mul && deq && in && out && elems && wout && welems);
                    for (size_t t = 0; t < nt; t++) {
                        deq[t] = random_scale(&s);
                        mul[t] = tu_splitmix64(&s) % 8 == 0 ? 0.0f : deq[t] != 0.0f ? 1.0f / deq[t] : random_scale(&s);
                    }
                    for (size_t i = 0; i < len; i++) {
                        const size_t c = i % ld, t = tc == 1 ? c : c / tc;
                        const float d = c < n && deq[t] != 0.0f ? deq[t] : 1.0f;
                        in[i] = shortcut ? shortcut_input(&s, d, f.max) : random_input(&s, d, f.max);
                        out[i] = elems[i] = wout[i] = welems[i] = -7.0f;  // the gaps between rows stay
                    }
                    fmt__counts got = {0}, want = {0};
                    uint64_t gz = 0, wz = 0;
                    // Without elems (variant 3) or zeroed (variant 5); variant 6's counters cross
                    // 2^32 (draws8's carry into the high half).
                    const fmt__block_req r = {.k = &k, .mode = o.mode, .tc = tc, .exact = exact, .mul = mul,
                                              .deq = deq, .out = out, .elems = variant == 3 ? NULL : elems,
                                              .in = in, .n = n, .rows = rows, .ld = ld,
                                              .base = variant == 6 ? (1ull << 32) - 100 : 5,
                                              .counts = stats ? &got : NULL, .zeroed = variant == 5 ? NULL : &gz};
                    if (kernel(&r)) {
                        ran++;
                        reference(&r, wout, welems, &want, &wz);
                        for (size_t i = 0; i < len; i++) {
                            cr_assert(tu_samef(out[i], wout[i]) && (!r.elems || tu_samef(elems[i], welems[i])),
                                      "%s: %s %s tc %zu %s rows %zu: element %zu, in %a / %a: got %a (%a), want %a",
                                      kname, f.name, fmt_mode_name(o.mode), tc, r.exact ? "exact" : "multiply", rows,
                                      i, in[i], deq[tc == 1 ? i % ld : i % ld / tc], out[i], elems[i], wout[i]);
                        }
                        cr_assert(!stats || same_counts(&got, &want, r.exact),
                                  "%s: %s %s tc %zu: counts differ (variant %d)", kname, f.name,
                                  fmt_mode_name(o.mode), tc, variant);
                        cr_assert_eq(gz, r.zeroed ? wz : 0, "%s: %s %s tc %zu: zeroed %llu, want %llu", kname, f.name,
                                     fmt_mode_name(o.mode), tc, (unsigned long long)gz, (unsigned long long)wz);
                    } else {
                        cr_assert(!fmt__block_lean_covers(&k, o.mode, tc, every || r.exact),
                                  "%s: %s %s tc %zu: declined what it covers", kname, f.name, fmt_mode_name(o.mode),
                                  tc);
                        for (size_t i = 0; i < len; i++) cr_assert_eq(tu_f2u(out[i]), tu_f2u(-7.0f));
                    }
                    free(mul), free(deq), free(in), free(out), free(elems), free(wout), free(welems);
                }
    }
    return ran;
}

Test(block_lean, dispatched_kernel_matches_reference) {
    const fmt_t e4 = tu_fmt("e4m3");
    fmt__kparams k;
    fmt__kparams_make(&k, &e4, &(fmt_round_opts){.mode = FMT_RNE});
    if (!fmt__block_lean_covers(&k, FMT_RNE, 16, true)) cr_skip_test("no explicit block kernel on this CPU");
    cr_assert_gt(sweep(fmt__scale_round_f32_lean, "dispatched", false, test_seed("dispatched")), 150);
}

Test(block_lean, avx2_kernel_matches_reference) {
    if (!fmt__lean_avx2_runs()) cr_skip_test("the CPU has no AVX2");
    cr_assert_gt(sweep(fmt__scale_round_f32_lean_avx2, "avx2", true, test_seed("avx2")), 300);
#if defined(__x86_64__)
    // MXCSR rounding down: the AVX2 pass declines, writing nothing.
    const fmt_t e2 = tu_fmt("e2m1");
    fmt__kparams k;
    fmt__kparams_make(&k, &e2, &(fmt_round_opts){.mode = FMT_RNE});
    float in[32], out[32], one[2] = {1.0f, 1.0f};
    for (int i = 0; i < 32; i++) in[i] = (float)i / 3.0f, out[i] = -7.0f;
    const fmt__block_req r = {.k = &k, .mode = FMT_RNE, .tc = 16, .mul = one, .deq = one, .out = out, .in = in,
                              .n = 32, .rows = 1, .ld = 32};
    const unsigned csr = _mm_getcsr();
    _mm_setcsr((csr & ~0x6000u) | 0x2000u);
    const bool ran = fmt__scale_round_f32_lean_avx2(&r);
    _mm_setcsr(csr);
    cr_assert(!ran, "ran under MXCSR's round-down");
    for (int i = 0; i < 32; i++) cr_assert_eq(out[i], -7.0f);
    cr_assert(fmt__scale_round_f32_lean_avx2(&r));
    cr_assert_eq(out[3], 1.0f);
#endif
}

// Stochastic rounding of exact quotients, where the kernels round x * fl(1/d) in place of the
// quotient when the draw cannot tell them apart (sr_sure16, sr_sure8): 2^17 random inputs a
// format over full-precision divisors, with 32 and with 12 random bits. In e5m14 (9 dropped bits;
// a third of the vectors take the product) a draw falls between the product's dropped bits and
// the quotient's for about one input in 3000: deciding for the product without that check fails
// here.
static void sr_quotients(kernel_fn *kernel, const char *kname, uint64_t seed) {
    static const char *const names[] = {"e5m14", "fp16", "e4m3", "e2m1", "e3m2"};
    const size_t tc = 16, n = 1u << 17, nt = n / tc;
    uint64_t s = seed;
    float *mul = malloc(nt * sizeof *mul), *deq = malloc(nt * sizeof *deq), *in = malloc(n * sizeof *in);
    float *out = malloc(n * sizeof *out), *elems = malloc(n * sizeof *elems), *wout = malloc(n * sizeof *wout);
    float *welems = malloc(n * sizeof *welems);
    cr_assert(mul && deq && in && out && elems && wout && welems);
    for (size_t fi = 0; fi < 2 * sizeof names / sizeof names[0]; fi++) {
        const fmt_t f = tu_fmt(names[fi / 2]);
        const fmt_round_opts o = {.mode = FMT_SR, .overflow = FMT_SATURATE, .seed = 5 + fi, .offset = 1,
                                  .sr_bits = fi % 2 ? 12 : 0};
        fmt__kparams k;
        fmt__kparams_make(&k, &f, &o);
        for (size_t t = 0; t < nt; t++) {
            deq[t] = (float)ldexp(1.0 + tu_sm_unif(&s), tu_sm_int(&s, -8, 8));
            mul[t] = 1.0f / deq[t];
        }
        for (size_t i = 0; i < n; i++) {  // quotients over the format's normals and a few subnormals
            const double q = ldexp(1.0 + tu_sm_unif(&s), tu_sm_int(&s, f.emin - 2, f.emax));
            in[i] = (float)(q * deq[i / tc]) * ((tu_splitmix64(&s) & 1) ? -1.0f : 1.0f);
        }
        fmt__counts got = {0}, want = {0};
        uint64_t gz = 0, wz = 0;
        const fmt__block_req r = {.k = &k, .mode = FMT_SR, .tc = tc, .exact = true, .mul = mul, .deq = deq,
                                  .out = out, .elems = elems, .in = in, .n = n, .rows = 1, .ld = n, .base = 9,
                                  .counts = &got, .zeroed = &gz};
        cr_assert(kernel(&r), "%s declined %s", kname, names[fi / 2]);
        reference(&r, wout, welems, &want, &wz);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (!tu_samef(out[i], wout[i]) || !tu_samef(elems[i], welems[i])) first = bad++ ? first : i;
        cr_assert_eq(bad, 0, "%s: %s sr bits %d: %zu of %zu elements differ, first %zu: in %a / %a: got %a, want %a",
                     kname, names[fi / 2], o.sr_bits, bad, n, first, in[first], deq[first / tc], elems[first],
                     welems[first]);
        cr_assert(same_counts(&got, &want, true), "%s: %s sr: counts differ", kname, names[fi / 2]);
    }
    free(mul), free(deq), free(in), free(out), free(elems), free(wout), free(welems);
}

Test(block_lean, stochastic_rounding_of_exact_quotients) {
    const fmt_t e2 = tu_fmt("e2m1");
    fmt__kparams k;
    fmt__kparams_make(&k, &e2, &(fmt_round_opts){.mode = FMT_SR});
    const bool dispatched = fmt__block_lean_covers(&k, FMT_SR, 16, true), avx2 = fmt__lean_avx2_runs();
    if (!dispatched && !avx2) cr_skip_test("no explicit block kernel on this CPU");
    if (dispatched) sr_quotients(fmt__scale_round_f32_lean, "dispatched", test_seed("sr"));
    if (avx2) sr_quotients(fmt__scale_round_f32_lean_avx2, "avx2", test_seed("sr avx2"));
}

// The tiles' amax: bits[t] raised to tile t's max |x| bits (a NaN above inf), *finite to the
// NaN-free max; ragged ends, existing maxima kept where larger.
typedef bool amax_fn(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite);

static void amax_sweep(amax_fn *kernel, const char *kname, const size_t *tcs, size_t ntc, uint64_t s) {
    for (size_t ti = 0; ti < ntc; ti++)
        for (size_t n = 1; n < 700; n += 1 + n / 3) {
            const size_t tc = tcs[ti], nt = (n + tc - 1) / tc;
            float *x = malloc(n * sizeof *x);
            uint32_t *bits = malloc(nt * sizeof *bits), *want = malloc(nt * sizeof *want);
            cr_assert(x && bits && want);
            uint32_t wf = (uint32_t)(tu_splitmix64(&s) % 0x3f800000u);
            for (size_t i = 0; i < n; i++) x[i] = random_input(&s, 1.0f, 448.0);
            for (size_t t = 0; t < nt; t++) want[t] = bits[t] = (uint32_t)(tu_splitmix64(&s) % 0x40000000u);
            uint32_t gf = wf;
            for (size_t i = 0; i < n; i++) {
                const uint32_t u = tu_f2u(x[i]) & 0x7fffffffu;
                if (u > want[i / tc]) want[i / tc] = u;
                if (u <= 0x7f800000u && u > wf) wf = u;
            }
            cr_assert(kernel(x, n, tc, bits, (n & 1) ? &gf : NULL), "%s declined tc %zu", kname, tc);
            for (size_t t = 0; t < nt; t++)
                cr_assert_eq(bits[t], want[t], "%s: tc %zu n %zu tile %zu: %#x, want %#x", kname, tc, n, t, bits[t],
                             want[t]);
            if (n & 1) cr_assert_eq(gf, wf, "%s: tc %zu n %zu: finite max %#x, want %#x", kname, tc, n, gf, wf);
            free(x), free(bits), free(want);
        }
}

Test(block_lean, tile_amax) {
    const uint64_t s = test_seed("tile_amax");
    const size_t tcs[] = {16, 32, 48, 8, 24};
    uint32_t b = 0;
    const float one = 1.0f;
    if (fmt__tile_amax_lean(&one, 1, 16, &b, NULL)) amax_sweep(fmt__tile_amax_lean, "dispatched", tcs, 3, s);
    if (fmt__lean_avx2_runs()) amax_sweep(fmt__tile_amax_avx2, "avx2", tcs, 5, s + 1);
    else cr_skip_test("the CPU has no AVX2");
}
