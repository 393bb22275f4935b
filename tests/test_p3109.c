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
#include <float.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/codec.h"
#include "formats/scale.h"
#include "formats/wide.h"
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

// A table's value ("0x1.8p+16382", "-0x0.1p-16380", "0x0p+0", "Inf", "NaN") as an exact value,
// read without doubles (the wide formats' values are beyond them), normalised as fmt_exact is.
static void parse_table_value(const char *s, fmt_exact *v) {
    memset(v, 0, sizeof *v);
    if (!strcmp(s, "NaN")) return (void)(v->cls = FMT_X_NAN);
    v->neg = *s == '-';
    s += v->neg;
    if (!strcmp(s, "Inf")) return (void)(v->cls = FMT_X_INF);
    cr_assert(!strncmp(s, "0x", 2), "table value %s", s);
    uint64_t sig = 0;
    int exp = 0;
    bool frac = false;
    for (s += 2; *s != 'p'; s++) {
        if (*s == '.') { frac = true; continue; }
        const char d = *s;
        sig = sig * 16 + (uint64_t)(d <= '9' ? d - '0' : (d | 32) - 'a' + 10);
        if (frac) exp -= 4;
        cr_assert(sig < (1ULL << 56), "table value too long");
    }
    exp += atoi(s + 1);
    if (!sig) return (void)(v->cls = FMT_X_ZERO);
    while (!(sig & 1)) sig >>= 1, exp++;
    v->cls = FMT_X_FINITE, v->sig = sig, v->exp = exp;
}

static bool same_exact(const fmt_exact *a, const fmt_exact *b) {
    return a->cls == b->cls && (a->cls == FMT_X_NAN || a->neg == b->neg) && a->sig == b->sig && a->exp == b->exp;
}

// Every code of the working group's value tables (tools/p3109_tables.py; the committed subset, or
// every code of every table with FPLAB_P3109_TABLES naming a file written with --all, as
// `make check-p3109-tables` does). Every code's exact value (fmt_code_exact) and subnormal mark
// are the table's. Formats within float64: fmt_decode1 gives the value, fmt_encode1 the code
// back, and where the values are float32 the vector codec agrees. Wider formats (which
// fmt_from_name refuses with the reason): fmt_round_wide of the value gives the code back where
// a double holds the value.
Test(p3109, wg_value_tables) {
    const char *all = getenv("FPLAB_P3109_TABLES");
    FILE *fh = all && *all ? fopen(all, "r") : tu_fixture("p3109_wg.txt", "make check-p3109-tables");
    cr_assert(fh, "cannot open FPLAB_P3109_TABLES=%s", all);
    char line[256], name[40], last[40] = "", codes[40], vs[64];
    fmt_t f;
    int sub;
    size_t n = 0, ntables = 0, nwide = 0, nwide_codes = 0, nvec = 0;
    while (fgets(line, sizeof line, fh)) {
        if (line[0] == '#') continue;
        cr_assert_eq(sscanf(line, "%39s %39s %63s %d", name, codes, vs, &sub), 4, "bad line: %s", line);
        if (strcmp(name, last)) {
            cr_assert_eq(fmt_from_name_wide(&f, name), FMT_OK, "%s", name);
            strcpy(last, name);
            ntables++;
            if (fmt_is_wide(&f)) {
                fmt_t g;
                char msg[512];
                const int st = fmt_from_name(&g, name);
                cr_assert_eq(st, FMT_EINVAL, "%s", name);
                fmt_name_message(name, st, msg, sizeof msg);
                cr_expect(strstr(msg, "wider than float64"), "%s: %s", name, msg);
                nwide++;
            }
        }
        const uint64_t code = strtoull(codes, NULL, 10);
        fmt_exact want, got;
        parse_table_value(vs, &want);
        fmt_code_exact(&f, code, &got);
        char hex[64];
        fmt_exact_hex(&got, hex, sizeof hex);
        cr_assert(same_exact(&got, &want), "%s code %llu: exact value %s, table %s", name, (unsigned long long)code,
                  hex, vs);
        cr_assert_eq(got.subnormal, sub == 1, "%s code %llu: subnormal %d, table %d", name,
                     (unsigned long long)code, got.subnormal, sub);
        n++;
        if (fmt_is_wide(&f)) {
            double d;
            if (!fmt_exact_double(&got, &d)) continue;
            cr_assert_eq(fmt_round_wide(&f, d, &(fmt_round_opts){0}), code, "%s: %a rounds to code %llu, expected %llu",
                         name, d, (unsigned long long)fmt_round_wide(&f, d, &(fmt_round_opts){0}),
                         (unsigned long long)code);
            nwide_codes++;
            continue;
        }
        const double value = strtod(vs, NULL), dec = fmt_decode1(&f, code);
        cr_assert(same_value(dec, value) || (dec == 0 && value == 0), "%s code %llu: got %a, table %s", name,
                  (unsigned long long)code, dec, vs);
        const bool is_sub = dec != 0 && fabs(dec) < f.min_normal;
        cr_assert_eq(is_sub, sub == 1, "%s code %llu: subnormal %d, table %d", name, (unsigned long long)code,
                     is_sub, sub);
        cr_assert_eq(fmt_encode1(&f, dec), code, "%s: %a encodes to %llu, expected %llu", name, dec,
                     (unsigned long long)fmt_encode1(&f, dec), (unsigned long long)code);
        if (fmt_values_fit_f32(&f) || (f.has_inf && f.emax <= 127 && f.emin - f.mbits >= -149)) {
            uint8_t c[4] = {0}, back[4] = {0};
            memcpy(c, &code, fmt_code_bytes(&f));  // little-endian
            float v;
            cr_assert_eq(fmt_decode_f32(&f, &v, c, 1), FMT_OK);
            cr_assert(same_value(v, dec) || (v == 0 && dec == 0), "%s code %llu: vector %a, table %s", name,
                      (unsigned long long)code, (double)v, vs);
            cr_assert_eq(fmt_encode_f32(&f, back, &v, 1, &(fmt_round_opts){0}, NULL), FMT_OK);
            cr_assert(!memcmp(back, c, sizeof c), "%s: %a encodes (vector) to another code than %llu", name,
                      (double)v, (unsigned long long)code);
            nvec++;
        }
    }
    fclose(fh);
    cr_assert(ntables >= 500 && n > 10000 && nwide == 50, "fixture too small: %zu codes of %zu tables (%zu wide)", n,
              ntables, nwide);
    cr_log_info("p3109: %zu codes of %zu WG value tables have the tables' exact values (%zu through the vector "
                "codec); %zu tables wider than float64 (%zu of their codes round back from doubles)\n", n, ntables,
                nvec, nwide, nwide_codes);
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

// Rounding a double to a format wider than float64 (fmt_round_wide). Where x is normal in an
// 8-bit format of the same precision and layout, every mode, policy and stochastic variant
// gives the 8-bit format's value (rounding to P bits does not depend on the binade); across
// the whole double range (subnormal doubles and the round-up past 2^1024 included), the
// deterministic modes give MPFR's rounding to P bits.
static double wide_value(const fmt_t *f, uint64_t code, char *hex, size_t cap) {
    fmt_exact v;
    fmt_code_exact(f, code, &v);
    fmt_exact_hex(&v, hex, cap);
    double d;
    return fmt_exact_double(&v, &d) ? d : NAN;
}

Test(p3109, wide_rounding_matches_narrow_twin) {
    static const char *pairs[][2] = {{"binary16p3se", "binary8p3se"}, {"binary16p4ue", "binary8p4ue"},
                                     {"binary16p2sf", "binary8p2sf"}, {"binary16p5uf", "binary8p5uf"}};
    uint64_t s = 12345;
    size_t n = 0;
    for (size_t p = 0; p < sizeof pairs / sizeof *pairs; p++) {
        fmt_t w, q;
        cr_assert_eq(fmt_from_name_wide(&w, pairs[p][0]), FMT_OK);
        cr_assert(fmt_is_wide(&w), "%s", pairs[p][0]);
        cr_assert_eq(fmt_from_name(&q, pairs[p][1]), FMT_OK);
        for (int i = 0; i < 3000; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            double x = ldexp(1 + (double)(s >> 12) * 0x1p-52, q.emin + (int)((s >> 4) % (uint64_t)(q.emax - q.emin))) * ((s & 1) ? -1 : 1);
            if (i == 0) x = INFINITY;
            if (i == 1) x = -INFINITY;
            if (i == 2) x = NAN;
            if (i == 3) x = -0.0;
            for (int mode = 0; mode < FMT_NMODES; mode++)
                for (int ov = 0; ov < FMT_NOVERFLOW; ov++)
                    for (int var = 0; var < (mode == FMT_SR ? 3 : 1); var++) {
                        const fmt_round_opts o = {.mode = mode, .overflow = ov, .sr_variant = var,
                                                  .sr_bits = mode == FMT_SR ? 8 : 0, .seed = 7, .offset = (uint64_t)i};
                        const double want = fmt_round1(&q, x, &o);
                        char hex[64];
                        const uint64_t code = fmt_round_wide(&w, x, &o);
                        double got = wide_value(&w, code, hex, sizeof hex);
                        if (isinf(x) && fabs(want) == q.max) {  // saturated: each format's own max
                            cr_assert_eq(code & ~(w.is_signed ? (uint64_t)1 << 15 : 0), fmt_max_code(&w), "%s %a: %s", w.name, x, hex);
                            continue;
                        }
                        cr_assert(same_value(got, want == 0 ? 0.0 : want), "%s %a mode %d ov %d var %d: %s (%a), %s gives %a",
                                  w.name, x, mode, ov, var, hex, got, q.name, want);
                        n++;
                    }
        }
    }
    cr_log_info("p3109: %zu wide roundings equal their 8-bit twins'\n", n);
}

Test(p3109, wide_rounding_matches_mpfr_over_all_doubles) {
    static const struct { int mode; mpfr_rnd_t r; } modes[] = {
        {FMT_RNE, MPFR_RNDN}, {FMT_RTZ, MPFR_RNDZ}, {FMT_RUP, MPFR_RNDU}, {FMT_RDN, MPFR_RNDD}, {FMT_RNA, MPFR_RNDNA}};
    static const char *names[] = {"binary16p1se", "binary16p4ue", "binary13p1sf", "binary12p1uf"};
    mpfr_t m;
    uint64_t s = 99;
    size_t n = 0;
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        fmt_t w;
        cr_assert_eq(fmt_from_name_wide(&w, names[k]), FMT_OK);
        mpfr_init2(m, w.mbits + 1);
        for (int i = 0; i < 4000; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            double x;
            uint64_t bits = s;
            memcpy(&x, &bits, sizeof x);  // every sign, exponent and significand of a double
            if (i == 0) x = DBL_MAX;
            if (i == 1) x = 0x1p-1074;
            if (!isfinite(x) || x == 0 || (x < 0 && !w.is_signed)) continue;
            for (size_t j = 0; j < sizeof modes / sizeof *modes; j++) {
                const fmt_round_opts o = {.mode = modes[j].mode};
                char hex[64];
                const uint64_t code = fmt_round_wide(&w, x, &o);
                fmt_exact v;
                fmt_code_exact(&w, code, &v);
                fmt_exact_hex(&v, hex, sizeof hex);
                if (modes[j].mode == FMT_RNA) mpfr_round_nearest_away(mpfr_set_d, m, x);
                else mpfr_set_d(m, x, modes[j].r);  // MPFR's exponent range: no overflow at 2^1024
                cr_assert_eq(v.cls, FMT_X_FINITE, "%s %a: %s", w.name, x, hex);
                mpfr_t e;
                mpfr_init2(e, 64);
                mpfr_set_ui(e, (unsigned long)v.sig, MPFR_RNDN);
                mpfr_mul_2si(e, e, v.exp, MPFR_RNDN);
                if (v.neg) mpfr_neg(e, e, MPFR_RNDN);
                cr_assert(mpfr_equal_p(e, m), "%s %a mode %d: %s, MPFR %a", w.name, x, modes[j].mode, hex,
                          mpfr_get_d(m, MPFR_RNDN));
                mpfr_clear(e);
                n++;
            }
        }
        mpfr_clear(m);
    }
    cr_log_info("p3109: %zu wide roundings over the double range equal MPFR's\n", n);
}

// P = 1: no fraction bits, so a code's parity is its exponent field's and a tie goes to the
// power of two whose field is even (to odd: odd). Every wide P = 1 format against its 8-bit twin
// (same signedness and domain; biases 2^(w-1), all even, so the fields' parities agree) on every
// power of two, every tie 1.5 2^e and its two neighbouring doubles, both signs, with both
// neighbours of the tie inside the twin's finite range, in every mode, policy and variant.
Test(p3109, wide_p1_ties_match_8bit_twin) {
    size_t n = 0, nformats = 0;
    for (int sg = 0; sg < 2; sg++)
        for (int dm = 0; dm < 2; dm++) {
            char tname[40];
            snprintf(tname, sizeof tname, "binary8p1%c%c", sg ? 's' : 'u', dm ? 'e' : 'f');
            fmt_t q;
            cr_assert_eq(fmt_from_name(&q, tname), FMT_OK, "%s", tname);
            for (int K = sg ? 13 : 12; K <= 16; K++) {
                char wname[40];
                snprintf(wname, sizeof wname, "binary%dp1%c%c", K, sg ? 's' : 'u', dm ? 'e' : 'f');
                fmt_t w;
                cr_assert_eq(fmt_from_name_wide(&w, wname), FMT_OK, "%s", wname);
                cr_assert(fmt_is_wide(&w), "%s", wname);
                nformats++;
                for (int e = q.emin; e < q.emax; e++)
                    for (int k = 0; k < 8; k++) {
                        const double t = ldexp(1.5, e), cand[4] = {ldexp(1.0, e), t, nextafter(t, 0), nextafter(t, INFINITY)};
                        const double x = (k & 4 ? -1 : 1) * cand[k & 3];
                        for (int mode = 0; mode < FMT_NMODES; mode++)
                            for (int ov = 0; ov < FMT_NOVERFLOW; ov++)
                                for (int var = 0; var < (mode == FMT_SR ? 3 : 1); var++) {
                                    const fmt_round_opts o = {.mode = mode, .overflow = ov, .sr_variant = var,
                                                              .seed = 11, .offset = (uint64_t)(e * 8 + k + 4096)};
                                    const double want = fmt_round1(&q, x, &o);
                                    char hex[64];
                                    const uint64_t code = fmt_round_wide(&w, x, &o);
                                    const double got = wide_value(&w, code, hex, sizeof hex);
                                    cr_assert(same_value(got, want == 0 ? 0.0 : want),
                                              "%s %a mode %d ov %d var %d: %s (code %#llx), %s gives %a", w.name, x,
                                              mode, ov, var, hex, (unsigned long long)code, q.name, want);
                                    n++;
                                }
                    }
            }
        }
    cr_assert_eq(nformats, 18);
    // The cases, as the P3109 text rounds them: ties to the even code, to odd the odd one.
    fmt_t w;
    cr_assert_eq(fmt_from_name_wide(&w, "binary16p1se"), FMT_OK);
    static const struct { double x; int mode; double want; } cases[] = {
        {0.75, FMT_RNE, 1}, {3, FMT_RNE, 4}, {3, FMT_RTO, 2}, {12, FMT_RTO, 8}, {0.75, FMT_RTO, 0.5}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char hex[64];
        const double got = wide_value(&w, fmt_round_wide(&w, cases[i].x, &(fmt_round_opts){.mode = cases[i].mode}), hex, sizeof hex);
        cr_assert_eq(got, cases[i].want, "%a mode %d: %s, expected %a", cases[i].x, cases[i].mode, hex, cases[i].want);
    }
    cr_log_info("p3109: %zu P = 1 wide roundings of powers of two and ties equal their 8-bit twins'\n", n);
}
