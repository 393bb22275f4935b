// test_cli.c: the helpers of cli/cli.c: cli_fmt_double (the shortest text that reads back to
// the same double) and the table writer's numbers in each output format.
// Random cases are built in bit space (every exponent, random significands); FPLAB_SEED replays.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "test_util.h"

// Significant digits of a cli_fmt_double text: leading and trailing zeros of its digits do not
// count (the shortest text has no trailing zeros after the point; "240" has 2), "0" counts 1.
static int sig_digits(const char *s) {
    char d[CLI_DOUBLE_MAX];
    size_t n = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9') d[n++] = *s;
    size_t a = 0;
    while (a < n && d[a] == '0') a++;
    while (n > a && d[n - 1] == '0') n--;
    return n > a ? (int)(n - a) : 1;
}

// Checks one finite v: reads back bit for bit, no shorter %.{p}e reads back, and %g's notation
// with precision 17 (an exponent exactly when the decimal exponent is below -4 or above 16).
static void check_shortest(double v) {
    char buf[CLI_DOUBLE_MAX], alt[64];
    cli_fmt_double(buf, sizeof buf, v);
    char *end;
    const double back = strtod(buf, &end);
    cr_assert(*end == 0 && tu_d2u(back) == tu_d2u(v), "%a (%.17g) printed as '%s', reads back as %a", v, v, buf,
              back);
    const int p = sig_digits(buf);
    if (p > 1) {
        snprintf(alt, sizeof alt, "%.*e", p - 2, v);
        cr_assert(strtod(alt, NULL) != v, "%a printed as '%s' (%d digits) but '%s' reads back too", v, buf, p, alt);
    }
    snprintf(alt, sizeof alt, "%.*e", p - 1, v);  // the decimal exponent of the p-digit value
    const int x = atoi(strchr(alt, 'e') + 1);
    const bool want_exp = v != 0 && (x < -4 || x >= 17);
    cr_assert(want_exp == (strchr(buf, 'e') != NULL), "%a printed as '%s' (decimal exponent %d)", v, buf, x);
}

Test(cli, fmt_double_known) {
    static const struct { double v; const char *s; } cases[] = {
        {0.1, "0.1"},
        {0.30000000000000004, "0.30000000000000004"},
        {1e23, "1e+23"},
        {448, "448"},
        {240, "240"},
        {100, "100"},
        {-0.5, "-0.5"},
        {0.0, "0"},
        {-0.0, "-0"},
        {0.1015625, "0.1015625"},
        {0.0015624999999999944, "0.0015624999999999944"},
        {0x1p-9, "0.001953125"},
        {6.103515625e-05, "6.103515625e-05"},
        {0x1p-133, "9.183549615799121e-41"},
        {3.3895313892515355e+38, "3.3895313892515355e+38"},
        {1e16, "10000000000000000"},
        {1e17, "1e+17"},
        {34096749598247768.0, "34096749598247770"},  // 16 digits and a zero, not %.0f's 17 digits
        {DBL_MAX, "1.7976931348623157e+308"},
        {DBL_TRUE_MIN, "5e-324"},
        {(double)0.1f, "0.10000000149011612"},  // a float32 value: the double's shortest text
        {INFINITY, "inf"},
        {-INFINITY, "-inf"},
        {NAN, "nan"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[CLI_DOUBLE_MAX];
        cr_assert_str_eq(cli_fmt_double(buf, sizeof buf, cases[i].v), cases[i].s, "%a", cases[i].v);
        if (isfinite(cases[i].v)) check_shortest(cases[i].v);
    }
}

Test(cli, fmt_double_bit_space) {
    uint64_t s = tu_seed("cli", "fmt_double_bit_space", 20240611);
    // Every exponent, with random significands, one below and above each power of two
    // (the binade edges, where the rounding interval is lopsided), and integers near 2^53.
    for (uint64_t e = 0; e < 2047; e++) {
        const uint64_t p2 = e << 52;
        check_shortest(tu_u2d(p2));
        check_shortest(tu_u2d(p2 | 1));
        if (p2) check_shortest(tu_u2d(p2 - 1));
        for (int k = 0; k < 64; k++) {
            const uint64_t b = p2 | (tu_splitmix64(&s) & ((1ULL << 52) - 1));
            check_shortest(tu_u2d(b));
            check_shortest(-tu_u2d(b));
        }
    }
    for (int i = -64; i <= 64; i++) check_shortest(0x1p53 + i);
    for (int k = 0; k < 100000; k++) {  // any finite bit pattern
        const double v = tu_u2d(tu_splitmix64(&s));
        if (isfinite(v)) check_shortest(v);
    }
}

// cli_fmt_double never writes past len, and cuts to a NUL-terminated prefix as snprintf does.
Test(cli, fmt_double_short_buffer) {
    char buf[8];
    memset(buf, 'x', sizeof buf);
    cli_fmt_double(buf, 5, 0.30000000000000004);
    cr_assert_str_eq(buf, "0.30");
    cr_assert_eq(buf[5], 'x');
}

// The table writer: csv, json and exact tables use cli_fmt_double; table and md %g.
static char *print_one(double v, cli_out out, bool exact) {
    static const cli_col cols[] = {{"x", CLI_NUM}};
    cli_table t;
    cli_table_init(&t, cols, 1);
    t.exact = exact;
    cli_cell_num(&t, v);
    char *mem = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&mem, &len);
    cr_assert(fp);
    cli_table_print(&t, out, fp);
    fclose(fp);
    return mem;
}

Test(cli, table_numbers) {
    static const struct { cli_out out; bool exact; double v; const char *want; } cases[] = {
        {CLI_OUT_CSV, false, 0.1, "x\n0.1\n"},
        {CLI_OUT_CSV, false, 1.0 / 3, "x\n0.3333333333333333\n"},
        {CLI_OUT_JSON, false, 0.1, "[\n  {\"x\": 0.1}\n]\n"},
        {CLI_OUT_JSON, false, -INFINITY, "[\n  {\"x\": \"-inf\"}\n]\n"},
        {CLI_OUT_TABLE, false, 1.0 / 3, "       x\n0.333333\n"},
        {CLI_OUT_TABLE, true, 1.0 / 3, "                 x\n0.3333333333333333\n"},
        {CLI_OUT_MD, false, 0x1p-9, "| x |\n| ---: |\n| 0.00195312 |\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = print_one(cases[i].v, cases[i].out, cases[i].exact);
        cr_expect_str_eq(got, cases[i].want, "case %zu", i);
        free(got);
    }
}
