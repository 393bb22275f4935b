// cmd_values.c: `fplab values FORMAT [--codes A:B] [--format table|csv|json]`: every code of a
// format of 8 bits or fewer (or the codes A..B of any format), with its hex, its bits
// (sign|exponent|mantissa), its value and its class. Values come from fmt_decode1; a wide
// format's (IEEE P3109 beyond float64) from fmt_code_exact, as exact hexadecimal floats.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/codec.h"
#include "formats/wide.h"

enum { MAX_LISTED = 1 << 16 };  // codes one call lists

static void help(FILE *fp) {
    fprintf(fp, "usage: fplab values FORMAT [--codes A:B] [--format table|csv|json]\n\n"
                "Every code of FORMAT (8 bits or fewer; any format with --codes) in increasing order:\n"
                "code (hex), bits (sign|exponent|mantissa; no sign field in unsigned formats), value\n"
                "(the shortest text that reads back exactly; for an IEEE P3109 format wider than\n"
                "float64, such as binary16p1se, the exact hexadecimal float where no double holds it)\n"
                "and class (zero, subnormal, normal, inf, nan).\n\n"
                "options (default in brackets):\n"
                "  --codes A:B  only codes A to B, inclusive (decimal or 0x hex; at most %d codes)\n"
                "  --format F   table, csv or json [table]\n"
                "  -h, --help   this text\n\n"
                "examples:\n"
                "  build/fplab values e2m1\n"
                "  build/fplab values e4m3 --format csv\n"
                "  build/fplab values e3m2:unsigned --format json\n"
                "  build/fplab values bf16 --codes 0x7f7e:0x7f81\n"
                "  build/fplab values binary16p1se --codes 0x7ffd:0x8001\n", MAX_LISTED);
}

// "A:B" as two codes of f, A <= B, at most MAX_LISTED of them.
static void parse_codes(const char *arg, const fmt_t *f, uint64_t *lo, uint64_t *hi) {
    char *end;
    errno = 0;
    *lo = strtoull(arg, &end, cli_int_base(arg));
    bool ok = errno == 0 && end != arg && *end == ':' && arg[0] != '-';
    if (ok) {
        const char *b = end + 1;
        *hi = strtoull(b, &end, cli_int_base(b));
        ok = errno == 0 && end != b && !*end && b[0] != '-';
    }
    const uint64_t last = f->bits >= 64 ? UINT64_MAX : ((uint64_t)1 << f->bits) - 1;
    CLI_CHECK(ok, "values: --codes '%s': expected A:B, two codes (e.g. 0x7f00:0x7fff)", arg);
    CLI_CHECK(*lo <= *hi && *hi <= last, "values: --codes '%s': expected A <= B <= 0x%llx (the last code of %s)",
              arg, (unsigned long long)last, f->name);
    CLI_CHECK(*hi - *lo < MAX_LISTED, "values: --codes '%s': %llu codes; expected at most %d per call", arg,
              (unsigned long long)(*hi - *lo) + 1, MAX_LISTED);
}

static const char *exact_class(const fmt_exact *v) {
    static const char *const names[] = {"zero", "normal", "inf", "nan"};
    return v->cls == FMT_X_FINITE && v->subnormal ? "subnormal" : names[v->cls];
}

static const cli_col cols[] = {
    {"code", CLI_STR}, {"bits", CLI_STR}, {"value", CLI_NUM}, {"class", CLI_STR},
};

int cmd_values(int argc, char **argv) {
    static const struct option lo[] = {{"format", required_argument, 0, 'f'}, {"codes", required_argument, 0, 'c'},
                                       {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    char *pos[argc + 1];
    int npos = cli_split_args(&argc, argv, lo, pos);
    cli_out out = CLI_OUT_TABLE;
    const char *codes = NULL;
    argv[0] = "fplab values";
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        if (c == 'f') out = cli_parse_out(optarg, 0x7);
        else if (c == 'c') codes = optarg;
        else if (c == 'h') return help(stdout), 0;
        else cli_usage_error("values");
    }
    CLI_CHECK(npos == 1, "values: expected exactly one FORMAT, got %d arguments (see 'fplab values --help')", npos);
    fmt_t f;
    if (fmt_from_name_wide(&f, pos[0]) != FMT_OK || !fmt_is_wide(&f)) cli_parse_format(&f, pos[0], "FORMAT");
    uint64_t first = 0, last = f.bits <= 8 ? ((uint64_t)1 << f.bits) - 1 : 0;
    if (codes) parse_codes(codes, &f, &first, &last);
    else CLI_CHECK(f.bits <= 8, "values: format '%s' has %d bits; expected 8 bits or fewer, or --codes A:B "
                   "(at most %d codes)", pos[0], f.bits, MAX_LISTED);
    cli_table t;
    cli_table_init(&t, cols, sizeof cols / sizeof cols[0]);
    t.exact = true;
    char buf[72];
    for (uint64_t c = first;; c++) {
        cli_code_hex(buf, sizeof buf, &f, c);
        cli_cell_str(&t, buf);
        cli_code_bits(buf, sizeof buf, &f, c);
        cli_cell_str(&t, buf);
        fmt_exact x;
        fmt_code_exact(&f, c, &x);
        double v;
        if (!fmt_is_wide(&f)) cli_cell_num(&t, v = fmt_decode1(&f, c));
        else if (fmt_exact_double(&x, &v)) cli_cell_num(&t, v);
        else fmt_exact_hex(&x, buf, sizeof buf), cli_cell_numtext(&t, buf);
        cli_cell_str(&t, exact_class(&x));
        if (c == last) break;
    }
    cli_table_print(&t, out, stdout);
    return 0;
}
