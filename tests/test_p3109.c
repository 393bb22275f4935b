// test_p3109.c: IEEE P3109 formats by their working group names (binaryKpP{s|u}{e|f}).
// Against gfloat 0.5.2 (PyPI), from the fixture tools/p3109_gfloat.py writes
// (tests/fixtures/p3109_gfloat.txt; regenerate with `make check-p3109`): every code of every
// finite and extended format with K = 3..8 and 64 codes each of K = 10, 12, 16 decode to gfloat's
// value (fmt_decode1), and rounding (fmt_round1) in rne, rna, rtz, rup, rdn, with saturation
// (fplab FMT_SATURATE) and without (FMT_OVERFLOW_IEEE: inf in the extended formats, NaN in the
// finite ones) equals gfloat's round_float on targeted and random inputs for K = 4 and 8.
// Against the working group's own value tables (tests/fixtures/p3109_wg.txt, from
// tools/p3109_tables.py; every table with `make check-p3109-tables`). Also: the descriptors
// against the definition (bias 2^(w-1), one NaN, no -0, inf on the largest codes), and names
// outside the draft or beyond float64 refused with the reason. Fixture paths relative to
// $FPLAB_ROOT.
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/codec.h"
#include "formats/scale.h"
#include "test_util.h"

static bool same_value(double a, double b) { return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b)); }

Test(p3109, against_gfloat_fixture) {
    FILE *fh = tu_fixture("p3109_gfloat.txt", "make check-p3109");
    char line[256], name[40] = "", last[40] = "", mode[8], xs[64], ys[64];
    fmt_t f;
    size_t nd = 0, nr = 0, neg_unsigned = 0, rna_gfloat = 0;
    while (fgets(line, sizeof line, fh)) {
        if (line[0] == '#') continue;
        unsigned long long code;
        int sat;
        if (line[0] == 'D') {
            cr_assert_eq(sscanf(line, "D %39s %llu %63s", name, &code, ys), 3, "bad line: %s", line);
        } else {
            cr_assert_eq(sscanf(line, "R %39s %7s %d %63s %63s", name, mode, &sat, xs, ys), 5, "bad line: %s", line);
        }
        if (strcmp(name, last)) {
            cr_assert_eq(fmt_from_name(&f, name), FMT_OK, "%s", name);
            strcpy(last, name);
        }
        const double want = strtod(ys, NULL);
        if (line[0] == 'D') {
            const double got = fmt_decode1(&f, code);
            // gfloat decodes the signed formats' zero code and fplab's the same: +0
            cr_assert(same_value(got, want), "%s code %llu: got %a, gfloat %a", name, code, got, want);
            nd++;
        } else {
            fmt_round_opts o = {0};
            cr_assert_eq(fmt_mode_from_name(&o.mode, mode), FMT_OK);
            o.overflow = sat ? FMT_SATURATE : FMT_OVERFLOW_IEEE;
            const double x = strtod(xs, NULL), got = fmt_round1(&f, x, &o);
            // -0 has no code in these formats: a zero result is +0 in both
            nr++;
            if (same_value(got, want) || (got == 0 && want == 0)) continue;
            // Two documented differences, each checked for what it is:
            // - a negative x into an unsigned format: gfloat 0.5.2 returns a negative number, which
            //   the format cannot hold; fplab returns its NaN (counted as invalid in fmt_stats);
            // - TiesToAway just below a midpoint (x = nextafter(mid, 0)): gfloat rounds away, as
            //   floor(|x| / ulp + 0.5) does in float64 (0.49999999999999994 + 0.5 == 1), although
            //   the other neighbour is nearer; fplab returns the nearer one.
            if (!f.is_signed && x < 0) {
                // NaN under the IEEE policy; 0 (the lowest value, P3109 SatFinite) saturating
                cr_assert(sat ? got == 0 : isnan(got), "%s %s sat=%d x=%a: got %a", name, mode, sat, x, got);
                neg_unsigned++;
            } else {
                cr_assert(o.mode == FMT_RNA && fabs(got - x) < fabs(want - x),
                          "%s %s sat=%d x=%a: got %a, gfloat %a", name, mode, sat, x, got, want);
                rna_gfloat++;
            }
        }
    }
    fclose(fh);
    cr_assert(nd > 5000 && nr > 4000, "fixture too small: %zu decodes, %zu roundings", nd, nr);
    cr_log_info("p3109: %zu decodes and %zu roundings equal gfloat's but %zu negative inputs into unsigned "
                "formats (NaN here) and %zu ties-away just below a midpoint (gfloat's float64 rounding)\n",
                nd, nr, neg_unsigned, rna_gfloat);
}

// The definition: signed binaryKpPsf has w = K - P exponent bits, bias 2^(w-1), NaN 0x80 and
// no -0 (fplab's fnuz); unsigned binaryKpPuf w = K - P + 1, NaN all-ones (fplab's fn without a
// sign); the names are case-insensitive and read back.
Test(p3109, descriptors) {
    static const struct { const char *name; int ebits, mbits, bias; double max, sub; } d[] = {
        {"binary8p3sf", 5, 2, 16, 57344, 0x1p-17},  {"binary8p4sf", 4, 3, 8, 240, 0x1p-10},
        {"BINARY8P1SF", 7, 0, 64, 0x1p63, 0x1p-63}, {"binary8p4uf", 5, 3, 16, 57344, 0x1p-18},
        {"binary8p8uf", 1, 7, 1, 1.984375, 0x1p-7}, {"binary3p2sf", 1, 1, 1, 1.5, 0.5},
        {"binary16p11sf", 5, 10, 16, 65504, 0x1p-25},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        fmt_t f, g;
        cr_assert_eq(fmt_from_name(&f, d[i].name), FMT_OK, "%s", d[i].name);
        cr_expect(f.ebits == d[i].ebits && f.mbits == d[i].mbits && f.bias == d[i].bias, "%s: e%dm%d bias %d",
                  d[i].name, f.ebits, f.mbits, f.bias);
        cr_expect_eq(f.max, d[i].max, "%s max %a", d[i].name, f.max);
        cr_expect_eq(f.min_subnormal, d[i].sub, "%s", d[i].name);
        cr_expect(!f.has_inf && f.has_nan && !f.has_negzero && f.has_zero, "%s", d[i].name);
        uint64_t nan[2];
        cr_expect_eq(fmt_nan_codes(&f, nan, 2), 1, "%s: one NaN", d[i].name);
        cr_expect_eq(nan[0], f.is_signed ? 1ULL << (f.bits - 1) : (1ULL << f.bits) - 1, "%s NaN code", d[i].name);
        cr_assert_eq(fmt_from_name(&g, f.name), FMT_OK);
        cr_expect(!memcmp(&f, &g, sizeof f), "%s reads back", f.name);
    }
    // binary8p4sf is e4m3fnuz and binary8p3sf e5m2fnuz: finfo calls them table formats
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, "binary8p4sf"), FMT_OK);
    cr_expect_str_eq(fmt_kind(&f), "table");
    cr_assert_eq(fmt_from_name(&f, "binary6p3uf"), FMT_OK);
    cr_expect_str_eq(fmt_kind(&f), "p3109");
}

// Every code of the working group's value tables (tools/p3109_tables.py; the committed subset, or
// every code of every table with FPLAB_P3109_TABLES naming a file written with --all, as
// `make check-p3109-tables` does): fmt_decode1 gives the table's value, its subnormal mark
// agrees, fmt_encode1 of the value gives the code back, and where the values are float32 the
// vector codec (fmt_decode_f32, fmt_encode_f32) agrees with both. Formats wider than float64
// are refused with the reason.
Test(p3109, wg_value_tables) {
    const char *all = getenv("FPLAB_P3109_TABLES");
    FILE *fh = all && *all ? fopen(all, "r") : tu_fixture("p3109_wg.txt", "make check-p3109-tables");
    cr_assert(fh, "cannot open FPLAB_P3109_TABLES=%s", all);
    char line[256], name[40], last[40] = "", codes[40], vs[64];
    fmt_t f;
    int sub;
    size_t n = 0, ntables = 0, nwide = 0, nvec = 0;
    while (fgets(line, sizeof line, fh)) {
        if (line[0] == '#') continue;
        cr_assert_eq(sscanf(line, "%39s %39s %63s %d", name, codes, vs, &sub), codes[0] == '-' ? 3 : 4,
                     "bad line: %s", line);
        if (codes[0] == '-') {  // more exponent bits than float64
            char msg[512];
            const int st = fmt_from_name(&f, name);
            cr_assert_eq(st, FMT_EINVAL, "%s", name);
            fmt_name_message(name, st, msg, sizeof msg);
            cr_expect(strstr(msg, "wider than float64"), "%s: %s", name, msg);
            nwide++;
            continue;
        }
        if (strcmp(name, last)) {
            cr_assert_eq(fmt_from_name(&f, name), FMT_OK, "%s", name);
            strcpy(last, name);
            ntables++;
        }
        const uint64_t code = strtoull(codes, NULL, 10);
        const double want = strtod(vs, NULL), got = fmt_decode1(&f, code);
        cr_assert(same_value(got, want) || (got == 0 && want == 0), "%s code %llu: got %a, table %s", name,
                  (unsigned long long)code, got, vs);
        const bool is_sub = got != 0 && fabs(got) < f.min_normal;
        cr_assert_eq(is_sub, sub == 1, "%s code %llu: subnormal %d, table %d", name, (unsigned long long)code,
                     is_sub, sub);
        cr_assert_eq(fmt_encode1(&f, got), code, "%s: %a encodes to %llu, expected %llu", name, got,
                     (unsigned long long)fmt_encode1(&f, got), (unsigned long long)code);
        if (fmt_values_fit_f32(&f) || (f.has_inf && f.emax <= 127 && f.emin - f.mbits >= -149)) {
            uint8_t c[4] = {0}, back[4] = {0};
            memcpy(c, &code, fmt_code_bytes(&f));  // little-endian
            float v;
            cr_assert_eq(fmt_decode_f32(&f, &v, c, 1), FMT_OK);
            cr_assert(same_value(v, got) || (v == 0 && got == 0), "%s code %llu: vector %a, table %s", name,
                      (unsigned long long)code, (double)v, vs);
            cr_assert_eq(fmt_encode_f32(&f, back, &v, 1, &(fmt_round_opts){0}, NULL), FMT_OK);
            cr_assert(!memcmp(back, c, sizeof c), "%s: %a encodes (vector) to another code than %llu", name,
                      (double)v, (unsigned long long)code);
            nvec++;
        }
        n++;
    }
    fclose(fh);
    cr_assert(ntables >= 300 && n > 10000 && nwide > 0, "fixture too small: %zu codes of %zu tables", n, ntables);
    cr_log_info("p3109: %zu codes of %zu WG value tables decode and encode as the tables say (%zu through the "
                "vector codec); %zu wider than float64 refused\n", n, ntables, nvec, nwide);
}

// Extended formats (...e): +-inf on the largest codes, one NaN, the finite twin's values below.
Test(p3109, extended_descriptors) {
    static const struct { const char *name; double max; uint64_t inf, nan; } d[] = {
        {"binary8p3se", 49152, 0x7f, 0x80}, {"binary8p4se", 224, 0x7f, 0x80},
        {"binary8p3ue", 0x1.4p31, 0xfe, 0xff}, {"binary8p1ue", 0x1p125, 0xfe, 0xff},
        {"binary3p1ue", 2, 6, 7}, {"binary4p2se", 2, 7, 8},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        fmt_t f;
        cr_assert_eq(fmt_from_name(&f, d[i].name), FMT_OK, "%s", d[i].name);
        cr_expect(f.special == FMT_EXTENDED && f.has_inf && f.has_nan && !f.has_negzero, "%s", d[i].name);
        cr_expect_eq(f.max, d[i].max, "%s max %a", d[i].name, f.max);
        cr_expect_eq(fmt_decode1(&f, d[i].inf), INFINITY, "%s", d[i].name);
        cr_expect(isnan(fmt_decode1(&f, d[i].nan)), "%s", d[i].name);
        cr_expect_eq(fmt_encode1(&f, INFINITY), d[i].inf, "%s", d[i].name);
        cr_expect_eq(fmt_encode1(&f, NAN), d[i].nan, "%s", d[i].name);
        uint64_t nan[2];
        cr_expect_eq(fmt_nan_codes(&f, nan, 2), 1, "%s: one NaN", d[i].name);
        cr_expect_eq(nan[0], d[i].nan, "%s", d[i].name);
        fmt_info info;
        fmt_get_info(&f, &info);
        cr_expect_eq(info.finite_values, (1ULL << f.bits) - (f.is_signed ? 3 : 2),
                     "%s: %llu finite values", d[i].name, (unsigned long long)info.finite_values);
        cr_expect_str_eq(fmt_kind(&f), "p3109");
    }
}

Test(p3109, refused_names_say_why) {
    fmt_t f;
    char msg[512];
    static const char *bad[] = {"binary2p1sf", "binary17p8sf", "binary8p8sf", "binary8p9uf", "binary8p0sf"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const int st = fmt_from_name(&f, bad[i]);
        cr_assert_eq(st, FMT_EINVAL, "%s", bad[i]);
        fmt_name_message(bad[i], st, msg, sizeof msg);
        cr_expect(strstr(msg, "3 <= K <= 16"), "%s: %s", bad[i], msg);
    }
    static const char *wide[] = {"binary16p1sf", "binary16p2ue", "binary13p1se"};
    for (size_t i = 0; i < sizeof wide / sizeof *wide; i++) {
        const int st = fmt_from_name(&f, wide[i]);
        cr_assert_eq(st, FMT_EINVAL, "%s", wide[i]);
        fmt_name_message(wide[i], st, msg, sizeof msg);
        cr_expect(strstr(msg, "wider than float64"), "%s: %s", wide[i], msg);
    }
    cr_expect_eq(fmt_from_name(&f, "binary8p3sx"), FMT_EUNKNOWN);
}
