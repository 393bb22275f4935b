// test_json.c: the minimal JSON reader and writers of util/json.h: walking objects and
// arrays, numbers (JSON grammar only, plus the "nan"/"inf"/"-inf" strings of fplab's logs and
// Python's bare NaN/Infinity), exact 64-bit integers, string escapes (\uXXXX and surrogate
// pairs to UTF-8), skipping unknown values, errors with their column, and write/read round trips.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"

Test(json, walks_an_object) {
    jx_cur c;
    jx_init(&c, " { \"a\" : 1.5e3 , \"b\":[1, 2 ,3], \"c\":{\"d\":\"x\"}, \"e\":true, \"f\":null, \"g\":{} } ");
    char k[16];
    double sum = 0;
    int members = 0;
    cr_assert(jx_open(&c, '{'));
    do {
        jx_key(&c, k, sizeof k);
        members++;
        if (!strcmp(k, "a")) cr_assert_eq(jx_num(&c), 1500);
        else if (!strcmp(k, "b")) {
            if (jx_open(&c, '[')) do sum += jx_num(&c);
                while (jx_more(&c, ']'));
        } else jx_skip(&c);
    } while (jx_more(&c, '}'));
    cr_assert(jx_end(&c), "%s", c.err);
    cr_assert_eq(members, 6);
    cr_assert_eq(sum, 6);
    jx_init(&c, "{}");
    cr_assert(!jx_open(&c, '{') && jx_ok(&c) && jx_end(&c), "empty object");
}

Test(json, numbers) {
    static const struct {
        const char *s;
        double v;
    } ok[] = {{"0", 0}, {"-0.25", -0.25}, {"1e-3", 1e-3}, {"2E+2", 200}, {"\"inf\"", INFINITY}, {"\"-inf\"", -INFINITY},
              {"Infinity", INFINITY}, {"-Infinity", -INFINITY}, {"inf", INFINITY}, {"-inf", -INFINITY},
              {"123456789012", 123456789012.0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        jx_cur c;
        jx_init(&c, ok[i].s);
        const double v = jx_num(&c);
        cr_assert(jx_end(&c), "%s: %s", ok[i].s, c.err);
        cr_assert_eq(v, ok[i].v, "%s", ok[i].s);
    }
    static const char *const nan_s[] = {"\"nan\"", "NaN", "\"NaN\"", "nan", "-nan"};  // the last two: printf's %g
    for (int i = 0; i < 5; i++) {
        jx_cur c;
        jx_init(&c, nan_s[i]);
        cr_assert(isnan(jx_num(&c)) && jx_end(&c), "%s", nan_s[i]);
    }
    static const char *const bad[] = {"0x10", "+1", ".5", "\"1.5\"", "-", "abc", "1e5x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jx_cur c;
        jx_init(&c, bad[i]);
        jx_num(&c);
        cr_assert(!jx_ok(&c) || !jx_end(&c), "'%s' accepted", bad[i]);
        cr_assert(!strncmp(c.err, "column ", 7), "%s", c.err);
    }
    jx_cur c;
    uint64_t u;
    jx_init(&c, "18446744073709551615");
    cr_assert(jx_u64(&c, &u) && u == UINT64_MAX);
    jx_init(&c, "18446744073709551616");
    cr_assert(!jx_u64(&c, &u), "2^64 overflows");
    jx_init(&c, "1.5");
    cr_assert(!jx_u64(&c, &u));
}

Test(json, strings_and_errors) {
    jx_cur c;
    char s[32];
    jx_init(&c, "\"a\\\"b\\\\c\\/\\n\\u00e9\\ud83d\\ude00\"");
    cr_assert(jx_str(&c, s, sizeof s), "%s", c.err);
    cr_assert_str_eq(s, "a\"b\\c/\n\xc3\xa9\xf0\x9f\x98\x80");
    jx_init(&c, "\"abcdefgh\"");
    cr_assert(jx_str(&c, s, 4) && !strcmp(s, "abc"), "truncated to cap - 1");
    jx_init(&c, "\"abc");
    cr_assert(!jx_str(&c, s, sizeof s) && strstr(c.err, "unterminated"));
    jx_init(&c, "\"a\\qb\"");
    cr_assert(!jx_str(&c, s, sizeof s) && strstr(c.err, "bad escape"));
    jx_init(&c, "{\"a\" 1}");
    jx_open(&c, '{');
    jx_key(&c, s, sizeof s);
    cr_assert_str_eq(c.err, "column 6: expected ':' after the member name \"a\", found '1'");
    jx_init(&c, "{\"a\":1,}");
    jx_open(&c, '{');
    jx_key(&c, s, sizeof s), jx_num(&c), jx_more(&c, '}'), jx_key(&c, s, sizeof s);
    cr_assert(strstr(c.err, "column 8: expected a string"), "%s", c.err);
    // deep nesting is refused, not a stack overflow
    char deep[400];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    jx_init(&c, deep);
    jx_skip(&c);
    cr_assert(strstr(c.err, "nested deeper"), "%s", c.err);
}

Test(json, write_read_round_trip) {
    char buf[256];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    const double v[] = {0.1, -3e-300, 1.0 / 3, NAN, INFINITY, -INFINITY};
    fputc('[', f);
    for (int i = 0; i < 6; i++) {
        if (i) fputc(',', f);
        jx_write_num(f, v[i], 17);
    }
    fputs(",", f);
    jx_write_str(f, "q\"\\\n\t\x01z");
    fputc(']', f);
    fclose(f);
    cr_assert(strstr(buf, "\"nan\",\"inf\",\"-inf\""), "%s", buf);
    jx_cur c;
    jx_init(&c, buf);
    cr_assert(jx_open(&c, '['));
    for (int i = 0; i < 6; i++) {
        const double x = jx_num(&c);
        cr_assert(isnan(v[i]) ? isnan(x) : x == v[i], "element %d: %.17g", i, x);
        jx_more(&c, ']');
    }
    char s[32];
    cr_assert(jx_str(&c, s, sizeof s), "%s", c.err);
    cr_assert_str_eq(s, "q\"\\\n\t\x01z");
    cr_assert(!jx_more(&c, ']') && jx_end(&c), "%s", c.err);
}

// jx_write_str: the one writer of strings in fplab's JSON (issue 20). Quotes, backslashes and
// control characters are escaped, so a policy name can neither end the string nor add members;
// valid UTF-8 passes through; a byte that starts no valid UTF-8 sequence becomes \ufffd.
Test(json, write_str_escapes_everything_a_user_can_type) {
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"plain", "\"plain\""},
        {"a\"b\\c", "\"a\\\"b\\\\c\""},
        {"evil\",\"seed\":999,\"x\":\"", "\"evil\\\",\\\"seed\\\":999,\\\"x\\\":\\\"\""},
        {"t\tn\nr\rb\bf\f\x01\x1f", "\"t\\tn\\nr\\rb\\bf\\f\\u0001\\u001f\""},
        {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""},  // é € 😀
        {"x\xffy\xc3", "\"x\\ufffdy\\ufffd\""},              // a stray byte, a cut sequence
        {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""},       // a surrogate is no UTF-8
        {"\xc0\xaf", "\"\\ufffd\\ufffd\""},                  // an overlong '/'
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cr_assert(f);
        jx_write_str(f, cases[i].in);
        fclose(f);
        cr_assert_str_eq(buf, cases[i].want, "case %zu", i);
        free(buf);
    }
}
