// test_codec.c: codes of every format. Decode (fmt_decode1, fmt_decode_f32) against the MPFR
// decoder fmt_ref_decode, bit for bit, for every code of every format up to 16 bits and a
// seeded sample of wider ones; encode(decode(c)) == c for every non-NaN code; the contract
// decode(encode(x)) == round(x) in every mode, stochastic rounding included; packing of
// sub-byte codes (fp4 low nibble first, fp6 four codes in three bytes) and fmt_packed_bytes.
// The array functions (vector kernels, threads) are held bit for bit to the scalar ones: every
// code decoded, every code encoded through every rounding path, long packed arrays.
// Seed: env FPLAB_SEED (printed).
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

#include "formats/codec.h"
#include "formats/codec_internal.h"  // the vector kernels themselves (kernel_copies)
#include "formats/round_ref.h"
#include "test_util.h"

// --- helpers

// This suite's seed: FPLAB_SEED, else its default; printed with the test's name.
static uint64_t test_seed(const char *test) { return tu_seed("test_codec", test, 0x5eed2024ULL); }

static uint64_t code_mask(const fmt_t *f) {
    return f->bits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << f->bits) - 1;
}

static void code_put(void *codes, size_t bytes, size_t i, uint64_t c) {
    uint8_t *p = (uint8_t *)codes + i * bytes;
    for (size_t b = 0; b < bytes; b++) p[b] = (uint8_t)(c >> (8 * b));
}

// The codes to visit: all of them up to 16 bits, else the codes near each end of both signs'
// ranges, near the smallest normal, and a seeded sample.
static uint64_t *codes_to_test(const fmt_t *f, uint64_t seed, size_t cap, size_t *n) {
    if (f->bits <= 16) {
        const size_t cnt = (size_t)1 << f->bits;
        uint64_t *c = malloc(cnt * sizeof *c);
        cr_assert(c != NULL);
        for (size_t i = 0; i < cnt; i++) c[i] = i;
        return *n = cnt, c;
    }
    const uint64_t mask = code_mask(f), sbit = f->is_signed ? (uint64_t)1 << (f->bits - 1) : 0;
    const uint64_t minn = (uint64_t)1 << f->mbits;  // the smallest normal's code
    uint64_t *c = malloc(cap * sizeof *c);
    cr_assert(c != NULL);
    size_t k = 0;
    const uint64_t edges[] = {0, minn, sbit ? sbit - 1 : mask, sbit, sbit | minn, mask};
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
        for (int d = -512; d <= 512; d++) c[k++] = (edges[e] + (uint64_t)(int64_t)d) & mask;
    uint64_t s = seed ^ 0xDEC0DE;
    while (k < cap) c[k++] = tu_splitmix64(&s) & mask;
    return *n = k, c;
}

typedef struct {
    char name[40];
} fmt_param;

// Every table format and a set of custom ones (odd widths, fnuz, unsigned, no fraction bits).
static size_t all_formats(fmt_param *p, size_t cap, bool with_fp64) {
    static const char *const custom[] = {"e5m7", "e3m4:fnuz", "e6m9", "ue4m3", "e4m3:finite:bias=5",
                                         "e2m1:fn", "e4m0:fn", "e4m0:e8m0:bias=4", "e8m10",
                                         "ue3m2:finite"};
    size_t n = 0;
    for (size_t i = 0; i < fmt_table_count() && n < cap; i++) {
        const fmt_t *f = fmt_table_get(i);
        if (!with_fp64 && f->bits > 32) continue;
        snprintf(p[n++].name, sizeof p[0].name, "%s", f->name);
    }
    for (size_t i = 0; i < sizeof custom / sizeof custom[0] && n < cap; i++)
        snprintf(p[n++].name, sizeof p[0].name, "%s", custom[i]);
    return n;
}

// Criterion runs tests as parallel processes (--jobs): one OpenMP thread each, or spinning
// threads of one process starve the other's and small calls take milliseconds.
static void one_thread(void) {
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
}
TestSuite(codec, .init = one_thread);

// --- decode against MPFR, and encode(decode(c)) == c

ParameterizedTestParameters(codec, decode_encode) {
    static fmt_param p[64];
    return cr_make_param_array(fmt_param, p, all_formats(p, 64, true));
}

ParameterizedTest(fmt_param *p, codec, decode_encode) {
    fmt_t f = tu_fmt(p->name);
    const uint64_t seed = test_seed("decode_encode");
    size_t n;
    uint64_t *codes = codes_to_test(&f, seed, 200000, &n);
    const size_t bytes = fmt_code_bytes(&f);
    const bool to_f32 = f.bits <= 32;  // fp64 codes do not decode to float32
    uint8_t *packed = calloc(n, bytes);
    float *y = malloc(n * sizeof *y);
    cr_assert(packed && y);
    for (size_t i = 0; i < n; i++) code_put(packed, bytes, i, codes[i]);
    if (to_f32) cr_assert_eq(fmt_decode_f32(&f, y, packed, n), FMT_OK);

    size_t fails = 0, nonnan = 0;
    const uint64_t above = f.bits < 64 ? (uint64_t)1 << f.bits : 0;
    for (size_t i = 0; i < n; i++) {
        const uint64_t c = codes[i];
        const double want = fmt_ref_decode(&f, c), got = fmt_decode1(&f, c);
        const double got_hi = fmt_decode1(&f, c | above);  // bits above f->bits are ignored
        // fmt_decode_f32 (vector kernels or table) is bit for bit (float)fmt_decode1, NaN included
        const bool ok32 = !to_f32 || (tu_same((double)y[i], want) && tu_f2u(y[i]) == tu_f2u((float)got));
        if (!tu_same(got, want) || !tu_same(got_hi, want) || !ok32) {
            if (++fails <= 8)
                cr_expect_fail("decode %s code 0x%" PRIx64 ": decode1 %a, with high bit %a, "
                               "decode_f32 %a, want %a", f.name, c, got, got_hi,
                               to_f32 ? (double)y[i] : NAN, want);
            continue;
        }
        // encode(decode(c)) == c for every non-NaN code; a NaN encodes to some NaN code.
        const uint64_t e = fmt_encode1(&f, want);
        if (isnan(want)) {
            if (!isnan(fmt_ref_decode(&f, e)) && ++fails <= 8)
                cr_expect_fail("encode %s NaN (from code 0x%" PRIx64 ") gave code 0x%" PRIx64
                               ", not a NaN code", f.name, c, e);
            continue;
        }
        nonnan++;
        if (e != c && ++fails <= 8)
            cr_expect_fail("encode %s %a (code 0x%" PRIx64 ") gave code 0x%" PRIx64, f.name, want, c, e);
    }
    cr_log_info("%s: %zu codes (%zu non-NaN), seed 0x%" PRIx64, f.name, n, nonnan, seed);
    free(codes), free(packed), free(y);
    cr_assert_eq(fails, 0, "%s: %zu failures", f.name, fails);
}

// --- decode(encode(x)) == round(x), every mode

// Inputs: every value of the format (or a sample) with its midpoints and fp32 neighbours,
// specials, and random float32 bit patterns; more than one encode block (4096) long.
static float *codec_inputs(const fmt_t *f, uint64_t seed, size_t *n_out) {
    size_t ncodes;
    uint64_t *codes = codes_to_test(f, seed, 20000, &ncodes);
    const size_t nrand = 20000, cap = ncodes * 4 + nrand + 16;
    float *x = malloc(cap * sizeof *x);
    cr_assert(x != NULL);
    size_t n = 0;
    for (size_t i = 0; i < ncodes; i++) {
        const double v = fmt_ref_decode(f, codes[i]);
        if (isnan(v) || fabs(v) > FLT_MAX) continue;
        int e = v != 0 ? ilogb(v) : f->emin;
        if (e < f->emin) e = f->emin;
        const double mid = v + copysign(ldexp(1.0, e - f->mbits - 1), v);  // half an ulp out
        x[n++] = (float)v;
        x[n++] = nextafterf((float)v, INFINITY);
        x[n++] = nextafterf((float)v, -INFINITY);
        if ((double)(float)mid == mid) x[n++] = (float)mid;
    }
    free(codes);
    const float extra[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX,
                           FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MIN, 1.0f, -1.0f, 0.1f};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) x[n++] = extra[i];
    uint64_t s = seed ^ 0xC0DEC;
    for (size_t i = 0; i < nrand; i++) x[n++] = tu_u2f((uint32_t)tu_splitmix64(&s));
    return *n_out = n, x;
}

static bool stats_equal(const fmt_stats *a, const fmt_stats *b) {
    return a->n == b->n && a->overflow == b->overflow && a->underflow == b->underflow &&
           a->subnormal == b->subnormal && a->nan_in == b->nan_in && a->invalid == b->invalid &&
           a->amax == b->amax;
}

static uint64_t code_get(const void *codes, size_t bytes, size_t i) {
    const uint8_t *p = (const uint8_t *)codes + i * bytes;
    uint64_t c = 0;
    for (size_t b = 0; b < bytes; b++) c |= (uint64_t)p[b] << (8 * b);
    return c;
}

// fmt_encode_f32 through every other rounding path available for (f, o), with and without
// statistics: the same codes and counts as the call that made want (with statistics, auto).
static void check_encode_paths(const fmt_t *f, fmt_round_opts o, const float *x, size_t n,
                               const void *want, const fmt_stats *swant, size_t *fails) {
    const size_t bytes = fmt_code_bytes(f);
    void *codes = malloc(n * bytes);
    cr_assert(codes != NULL);
    for (int st = 0; st < 2; st++)
        for (int p = FMT_PATH_GENERIC; p < FMT_NPATHS; p++) {
            o.path = (fmt_round_path)p;
            if (!fmt_path_available(o.path, f, &o, st)) continue;
            fmt_stats sp = {0};
            cr_assert_eq(fmt_encode_f32(f, codes, x, n, &o, st ? &sp : NULL), FMT_OK);
            if ((memcmp(codes, want, n * bytes) || (st && !stats_equal(&sp, swant))) && ++*fails <= 8)
                cr_expect_fail("%s %s %s path %s%s: codes or counts differ from path auto's", f->name,
                               fmt_mode_name(o.mode), fmt_overflow_name(o.overflow),
                               fmt_path_name(o.path), st ? " with statistics" : "");
        }
    free(codes);
}

ParameterizedTestParameters(codec, encode_decode_is_round) {
    static fmt_param p[64];
    return cr_make_param_array(fmt_param, p, all_formats(p, 64, false));
}

ParameterizedTest(fmt_param *p, codec, encode_decode_is_round) {
    fmt_t f = tu_fmt(p->name);
    const uint64_t seed = test_seed("encode_decode_is_round");
    size_t n;
    float *x = codec_inputs(&f, seed, &n);
    const size_t bytes = fmt_code_bytes(&f);
    void *codes = malloc(n * bytes);
    float *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    cr_assert(codes && y && z);
    size_t fails = 0, checked = 0;
    for (int mode = 0; mode < FMT_NMODES; mode++)
        for (int ov = 0; ov < 2; ov++)
            for (int variant = 0; variant < 3; variant++) {
                if (variant == 1 && mode != FMT_SR) continue;  // its draws only
                fmt_round_opts o = {.mode = (fmt_round_mode)mode, .overflow = (fmt_overflow)ov,
                                    .seed = seed + (uint64_t)variant, .stream = 7};
                if (variant == 1) o.sr_bits = 8, o.offset = 12345;
                if (variant == 2) o.flush_subnormals = true, o.sr_bits = 3;
                fmt_stats se = {0}, sr = {0};
                cr_assert_eq(fmt_encode_f32(&f, codes, x, n, &o, &se), FMT_OK);
                cr_assert_eq(fmt_decode_f32(&f, y, codes, n), FMT_OK);
                memcpy(z, x, n * sizeof *z);
                cr_assert_eq(fmt_round_f32(&f, z, n, &o, &sr), FMT_OK);
                if (!stats_equal(&se, &sr) && ++fails <= 8)
                    cr_expect_fail("%s %s %s: encode and round count differently", f.name,
                                   fmt_mode_name(o.mode), fmt_overflow_name(o.overflow));
                // The codes themselves: each that of its rounded value, as the scalar encoder
                // (fmt_encode1 leaves values of the format, inf and NaN as they are) gives it.
                for (size_t i = 0; i < n; i++) {
                    const uint64_t want = fmt_encode1(&f, z[i]), got = code_get(codes, bytes, i);
                    if (got != want && ++fails <= 8)
                        cr_expect_fail("%s %s %s: x=%a rounds to %a: code 0x%" PRIx64 ", the scalar "
                                       "encoder 0x%" PRIx64, f.name, fmt_mode_name(o.mode),
                                       fmt_overflow_name(o.overflow), x[i], z[i], got, want);
                }
                check_encode_paths(&f, o, x, n, codes, &se, &fails);
                for (size_t i = 0; i < n; i++, checked++)
                    if (!tu_same(y[i], z[i]) && ++fails <= 8)
                        cr_expect_fail("%s %s %s sr_bits=%d offset=%" PRIu64 ": x=%a (0x%08" PRIx32
                                       ", element %zu): decode(encode) %a, round %a",
                                       f.name, fmt_mode_name(o.mode), fmt_overflow_name(o.overflow),
                                       o.sr_bits, o.offset, x[i], tu_f2u(x[i]), i, y[i], z[i]);
            }
    cr_log_info("%s: %zu inputs, %zu comparisons, seed 0x%" PRIx64, f.name, n, checked, seed);
    free(x), free(codes), free(y), free(z);
    cr_assert_eq(fails, 0, "%s: %zu failures (seed 0x%" PRIx64 ")", f.name, fails, seed);
}

// --- packing

Test(codec, packed_bytes) {
    fmt_t fp4, fp6, e4m3, fp16, tf32, fp64, e8m0, u7;
    fp4 = tu_fmt("e2m1"), fp6 = tu_fmt("e3m2"), e4m3 = tu_fmt("e4m3");
    fp16 = tu_fmt("fp16"), tf32 = tu_fmt("tf32"), fp64 = tu_fmt("fp64");
    e8m0 = tu_fmt("e8m0"), u7 = tu_fmt("ue4m3");
    cr_assert_eq(fmt_code_bytes(&fp4), 1);
    cr_assert_eq(fmt_code_bytes(&tf32), 4);
    cr_assert_eq(fmt_code_bytes(&fp64), 8);
    const struct { const fmt_t *f; size_t n, want; } cases[] = {
        {&fp4, 0, 0}, {&fp4, 1, 1}, {&fp4, 2, 1}, {&fp4, 3, 2}, {&fp4, 32, 16},
        {&fp6, 0, 0}, {&fp6, 1, 1}, {&fp6, 2, 2}, {&fp6, 3, 3}, {&fp6, 4, 3}, {&fp6, 5, 4},
        {&fp6, 32, 24}, {&u7, 8, 7}, {&u7, 9, 8}, {&e4m3, 5, 5}, {&e8m0, 5, 5}, {&fp16, 5, 10},
        {&tf32, 5, 20}, {&fp64, 5, 40},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(fmt_packed_bytes(cases[i].f, cases[i].n), cases[i].want, "%s n=%zu: %zu, want %zu",
                     cases[i].f->name, cases[i].n, fmt_packed_bytes(cases[i].f, cases[i].n),
                     cases[i].want);
}

Test(codec, pack_fp4_layout) {
    fmt_t f = tu_fmt("e2m1");
    // Element 0 in the low nibble (PyTorch float4_e2m1fn_x2, OCP MX).
    const uint8_t codes[] = {1, 2, 0xf, 0x0, 0x7};
    uint8_t packed[3] = {0xaa, 0xaa, 0xaa};
    cr_assert_eq(fmt_pack(&f, packed, codes, 5), FMT_OK);
    cr_assert_eq(packed[0], 0x21, "byte 0 = 0x%02x", packed[0]);
    cr_assert_eq(packed[1], 0x0f, "byte 1 = 0x%02x", packed[1]);
    cr_assert_eq(packed[2], 0x07, "byte 2 = 0x%02x (unused high nibble must be 0)", packed[2]);
    uint8_t back[5];
    cr_assert_eq(fmt_unpack(&f, back, packed, 5), FMT_OK);
    cr_assert_arr_eq(back, codes, 5);
    // The encoded value of 1.0 (code 2) and -6 (code 0xf) packed: 0xf2.
    const float x[] = {1.0f, -6.0f};
    uint8_t c2[2], p2;
    const fmt_round_opts o = {0};
    cr_assert_eq(fmt_encode_f32(&f, c2, x, 2, &o, NULL), FMT_OK);
    cr_assert_eq(fmt_pack(&f, &p2, c2, 2), FMT_OK);
    cr_assert_eq(p2, 0xf2, "packed 0x%02x", p2);
}

Test(codec, pack_fp6_layout) {
    fmt_t f = tu_fmt("e3m2");
    // Little-endian bit stream: 1 | 2 << 6 | 3 << 12 | 4 << 18 = 0x103081.
    const uint8_t a[] = {1, 2, 3, 4};
    uint8_t pa[3];
    cr_assert_eq(fmt_pack(&f, pa, a, 4), FMT_OK);
    cr_assert(pa[0] == 0x81 && pa[1] == 0x30 && pa[2] == 0x10, "packed %02x %02x %02x", pa[0], pa[1], pa[2]);
    // 0x3f | 0 << 6 | 0x3f << 12 | 0x15 << 18 = 0x57f03f.
    const uint8_t b[] = {0x3f, 0, 0x3f, 0x15};
    uint8_t pb[3];
    cr_assert_eq(fmt_pack(&f, pb, b, 4), FMT_OK);
    cr_assert(pb[0] == 0x3f && pb[1] == 0xf0 && pb[2] == 0x57, "packed %02x %02x %02x", pb[0], pb[1], pb[2]);
    // Odd n: five codes in 30 bits, four bytes, the top two bits zero.
    const uint8_t c[] = {0x3f, 0x3f, 0x3f, 0x3f, 0x3f};
    uint8_t pc[4] = {0};
    cr_assert_eq(fmt_pack(&f, pc, c, 5), FMT_OK);
    cr_assert(pc[0] == 0xff && pc[1] == 0xff && pc[2] == 0xff && pc[3] == 0x3f,
              "packed %02x %02x %02x %02x", pc[0], pc[1], pc[2], pc[3]);
    uint8_t back[5];
    cr_assert_eq(fmt_unpack(&f, back, pc, 5), FMT_OK);
    cr_assert_arr_eq(back, c, 5);
}

// pack/unpack round trip of random codes for every format and many lengths; the unused bits
// of the last byte are zero; bits above a code's width are ignored by pack.
ParameterizedTestParameters(codec, pack_roundtrip) {
    static fmt_param p[64];
    return cr_make_param_array(fmt_param, p, all_formats(p, 64, true));
}

ParameterizedTest(fmt_param *p, codec, pack_roundtrip) {
    fmt_t f = tu_fmt(p->name);
    uint64_t s = test_seed("pack_roundtrip") ^ 0xBACC;
    const size_t bytes = fmt_code_bytes(&f), nmax = 67;
    uint8_t codes[67 * 8], dirty[67 * 8], back[67 * 8], packed[67 * 8 + 1];
    for (size_t n = 0; n <= nmax; n++) {
        for (size_t i = 0; i < n; i++) {
            const uint64_t r = tu_splitmix64(&s);
            code_put(codes, bytes, i, r & code_mask(&f));
            // The same codes with junk above the width (only where a byte has room for it).
            code_put(dirty, bytes, i, f.bits < 8 ? r : r & code_mask(&f));
        }
        const size_t pb = fmt_packed_bytes(&f, n);
        memset(packed, 0xcc, sizeof packed);
        cr_assert_eq(fmt_pack(&f, packed, dirty, n), FMT_OK);
        cr_assert_eq(packed[pb], 0xcc, "%s n=%zu: pack wrote past %zu bytes", f.name, n, pb);
        if (f.bits < 8 && (n * (size_t)f.bits) % 8)
            cr_assert_eq(packed[pb - 1] >> ((n * (size_t)f.bits) % 8), 0,
                         "%s n=%zu: unused bits of the last byte not zero (0x%02x)", f.name, n,
                         packed[pb - 1]);
        memset(back, 0xcc, sizeof back);
        cr_assert_eq(fmt_unpack(&f, back, packed, n), FMT_OK);
        cr_assert(!memcmp(back, codes, n * bytes), "%s n=%zu: unpack(pack(codes)) differs", f.name, n);
    }
}

// Long arrays through the vector packing: every length around the 32-code groups of the kernels
// and past a parallel chunk (16384 codes), against the bit stream built here one bit at a time.
static void ref_pack(unsigned w, uint8_t *packed, const uint8_t *codes, size_t n) {
    memset(packed, 0, (n * w + 7) / 8);
    for (size_t i = 0; i < n; i++)
        for (unsigned b = 0; b < w; b++)
            if (codes[i] >> b & 1) packed[(i * w + b) / 8] |= (uint8_t)(1u << ((i * w + b) % 8));
}

Test(codec, pack_long_arrays) {
    uint64_t s = test_seed("pack_long_arrays");
    const size_t lens[] = {31, 32, 33, 63, 64, 65, 95, 96, 97, 127, 128, 129, 1000, 1001, 1002, 1003,
                           16383, 16384, 16385, 40001, 40002, 40003, 40004};
    const char *names[] = {"e2m1", "e3m2", "e2m3", "ue4m3", "e2m1:fn"};
    const size_t nmax = 40004;
    uint8_t *codes = malloc(nmax), *dirty = malloc(nmax), *back = malloc(nmax);
    uint8_t *packed = malloc(nmax + 8), *want = malloc(nmax + 8);
    cr_assert(codes && dirty && back && packed && want);
    for (int threads = 1; threads <= 2; threads++) {
#ifdef _OPENMP
        omp_set_num_threads(threads);
#endif
        for (size_t fi = 0; fi < sizeof names / sizeof names[0]; fi++) {
            fmt_t f = tu_fmt(names[fi]);
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                const size_t n = lens[li], pb = fmt_packed_bytes(&f, n);
                for (size_t i = 0; i < n; i++) {
                    dirty[i] = (uint8_t)tu_splitmix64(&s);  // junk above the width is ignored
                    codes[i] = dirty[i] & (uint8_t)code_mask(&f);
                }
                ref_pack((unsigned)f.bits, want, codes, n);
                memset(packed, 0xcc, nmax + 8);
                cr_assert_eq(fmt_pack(&f, packed, dirty, n), FMT_OK);
                cr_assert(!memcmp(packed, want, pb), "%s n=%zu (%d threads): packed bytes differ", f.name, n,
                          threads);
                cr_assert_eq(packed[pb], 0xcc, "%s n=%zu: pack wrote past %zu bytes", f.name, n, pb);
                memset(back, 0xcc, nmax);
                cr_assert_eq(fmt_unpack(&f, back, packed, n), FMT_OK);
                cr_assert(!memcmp(back, codes, n), "%s n=%zu (%d threads): unpack(pack(codes)) differs",
                          f.name, n, threads);
                if (n < nmax) cr_assert_eq(back[n], 0xcc, "%s n=%zu: unpack wrote past n", f.name, n);
            }
        }
    }
    free(codes), free(dirty), free(back), free(packed), free(want);
}

// Encode and decode on more than one chunk: the codes, values and counts do not depend on the
// thread count (stochastic rounding included: draws are keyed by the element index).
Test(codec, thread_count) {
    const size_t n = 100003;
    float *x = malloc(n * sizeof *x), *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
    uint8_t *c1 = malloc(4 * n), *c2 = malloc(4 * n);
    cr_assert(x && y1 && y2 && c1 && c2);
    uint64_t s = test_seed("thread_count");
    for (size_t i = 0; i < n; i++) x[i] = tu_u2f((uint32_t)tu_splitmix64(&s));
    const char *names[] = {"e4m3", "e2m1", "fp16", "bf16", "e8m0", "tf32"};
    for (size_t fi = 0; fi < sizeof names / sizeof names[0]; fi++) {
        fmt_t f = tu_fmt(names[fi]);
        const size_t bytes = fmt_code_bytes(&f);
        for (int mode = 0; mode < FMT_NMODES; mode++) {
            const fmt_round_opts o = {.mode = (fmt_round_mode)mode, .seed = s, .offset = 5};
            fmt_stats s1 = {0}, s2 = {0};
#ifdef _OPENMP
            omp_set_num_threads(1);
#endif
            cr_assert_eq(fmt_encode_f32(&f, c1, x, n, &o, &s1), FMT_OK);
            cr_assert_eq(fmt_decode_f32(&f, y1, c1, n), FMT_OK);
#ifdef _OPENMP
            omp_set_num_threads(2);
#endif
            cr_assert_eq(fmt_encode_f32(&f, c2, x, n, &o, &s2), FMT_OK);
            cr_assert_eq(fmt_decode_f32(&f, y2, c2, n), FMT_OK);
            cr_assert(!memcmp(c1, c2, n * bytes), "%s %s: codes depend on the thread count", f.name,
                      fmt_mode_name(o.mode));
            cr_assert(!memcmp(y1, y2, n * sizeof *y1), "%s %s: decoded values depend on the thread count",
                      f.name, fmt_mode_name(o.mode));
            cr_assert(stats_equal(&s1, &s2), "%s %s: counts depend on the thread count", f.name,
                      fmt_mode_name(o.mode));
        }
    }
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    free(x), free(y1), free(y2), free(c1), free(c2);
}

// The vector kernels of codec_f32.c through each instruction-set copy this build has and the CPU
// runs, and the AVX-512 kernels: fmt_decode_f32 and fmt_pack only take the widest, so the others
// are called here directly. Every code of every format up to 16 bits is decoded and encoded
// again, bit for bit against the scalar functions; random codes are packed and unpacked.
Test(codec, kernel_copies) {
    fmt_param p[64];
    const size_t nf = all_formats(p, 64, false);
    for (size_t fi = 0; fi < nf; fi++) {
        fmt_t f = tu_fmt(p[fi].name);
        fmt__codek ck;
        fmt__codek_make(&ck, &f);
        if (f.bits > 16) continue;
        const size_t n = (size_t)1 << f.bits, bytes = fmt_code_bytes(&f);
        uint8_t *codes = malloc(n * bytes), *back = malloc(n * bytes);
        float *want = malloc(n * sizeof *want), *y = malloc(n * sizeof *y);
        cr_assert(codes && back && want && y);
        for (size_t c = 0; c < n; c++) code_put(codes, bytes, c, c), want[c] = (float)fmt_decode1(&f, c);
        for (int k = 0; k < 4; k++) {  // the copies, then the AVX-512 kernels
            const fmt_round_path copy = k == 0 ? FMT_PATH_GENERIC : k == 1 ? FMT_PATH_AVX2 : FMT_PATH_AVX512;
            if (k < 3 && !fmt__copy_runs(copy)) continue;
            if (ck.dec && (k < 3 || fmt__values_lean_ok(&ck))) {
                if (k < 3) fmt__f32_from_codes(&ck, copy, y, codes, n);
                else fmt__decode_f32_lean(&ck, y, codes, n);
                for (size_t c = 0; c < n; c++)
                    cr_assert_eq(tu_f2u(y[c]), tu_f2u(want[c]), "%s code 0x%zx, kernel %d: %a, want %a", f.name, c,
                                 k, y[c], want[c]);
            }
            if (ck.enc && (k < 3 || fmt__codes_lean_ok(&ck))) {
                if (k < 3) fmt__codes_from_f32(&ck, copy, back, want, n);
                else cr_assert(fmt__encode_f32_lean(NULL, &ck, FMT_RNE, false, back, want, n, 0, NULL));
                for (size_t c = 0; c < n; c++) {
                    const uint64_t got = code_get(back, bytes, c), ref = fmt_encode1(&f, want[c]);
                    cr_assert_eq(got, ref, "%s value %a (code 0x%zx), kernel %d: code 0x%" PRIx64 ", want 0x%" PRIx64,
                                 f.name, want[c], c, k, got, ref);
                }
            }
        }
        free(codes), free(back), free(want), free(y);
    }
    // Packing, through each copy: 1000 random codes (and bits above the width).
    uint64_t s = test_seed("kernel_copies");
    uint8_t codes[1000], packed[1000], ref[1000], back[1000];
    for (int copy = FMT_PATH_GENERIC; copy <= FMT_PATH_AVX512; copy++) {
        if (!fmt__copy_runs((fmt_round_path)copy)) continue;
        for (int w = 4; w <= 6; w += 2) {
            for (size_t i = 0; i < 1000; i++) codes[i] = (uint8_t)tu_splitmix64(&s);
            if (w == 4) fmt__pack4((fmt_round_path)copy, packed, codes, 1000);
            else fmt__pack6((fmt_round_path)copy, packed, codes, 1000);
            for (size_t i = 0; i < 1000; i++) codes[i] &= (uint8_t)((1u << w) - 1);
            ref_pack((unsigned)w, ref, codes, 1000);
            cr_assert(!memcmp(packed, ref, 1000 * (size_t)w / 8), "pack%d through copy %s", w,
                      fmt_path_name((fmt_round_path)copy));
            if (w == 4) fmt__unpack4((fmt_round_path)copy, back, packed, 1000);
            else fmt__unpack6((fmt_round_path)copy, back, packed, 1000);
            cr_assert(!memcmp(back, codes, 1000), "unpack%d through copy %s", w, fmt_path_name((fmt_round_path)copy));
        }
    }
}
