// cmd_values.c: `fplab values FORMAT [--format table|csv|json]`: every code of a format of 8
// bits or fewer, with its hex, its bits (sign|exponent|mantissa), its value and its class.
// Values come from fmt_decode1, classes from the value and the descriptor.
#include <math.h>
#include <stdio.h>

#include "cli.h"
#include "formats/codec.h"

static void help(FILE *fp) {
    fprintf(fp, "usage: fplab values FORMAT [--format table|csv|json]\n\n"
                "Every code of FORMAT (8 bits or fewer) in increasing order: code (hex), bits\n"
                "(sign|exponent|mantissa; no sign field in unsigned formats), value (the shortest\n"
                "text that reads back exactly) and class (zero, subnormal, normal, inf, nan).\n\n"
                "options (default in brackets):\n"
                "  --format F   table, csv or json [table]\n"
                "  -h, --help   this text\n\n"
                "examples:\n"
                "  build/fplab values e2m1\n"
                "  build/fplab values e4m3 --format csv\n"
                "  build/fplab values e3m2:unsigned --format json\n");
}

static const char *value_class(const fmt_t *f, double v) {
    if (isnan(v)) return "nan";
    if (isinf(v)) return "inf";
    if (v == 0) return "zero";
    return fabs(v) < f->min_normal ? "subnormal" : "normal";
}

static const cli_col cols[] = {
    {"code", CLI_STR}, {"bits", CLI_STR}, {"value", CLI_NUM}, {"class", CLI_STR},
};

int cmd_values(int argc, char **argv) {
    static const struct option lo[] = {{"format", required_argument, 0, 'f'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    char *pos[argc + 1];
    int npos = cli_split_args(&argc, argv, lo, pos);
    cli_out out = CLI_OUT_TABLE;
    argv[0] = "fplab values";
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        if (c == 'f') out = cli_parse_out(optarg, 0x7);
        else if (c == 'h') return help(stdout), 0;
        else cli_usage_error("values");
    }
    CLI_CHECK(npos == 1, "values: expected exactly one FORMAT, got %d arguments (see 'fplab values --help')", npos);
    fmt_t f;
    cli_parse_format(&f, pos[0], "FORMAT");
    CLI_CHECK(f.bits <= 8, "values: format '%s' has %d bits; expected 8 bits or fewer (2^%d codes are too many to list)",
              pos[0], f.bits, f.bits);
    cli_table t;
    cli_table_init(&t, cols, sizeof cols / sizeof cols[0]);
    t.exact = true;
    char buf[48];
    for (uint64_t c = 0; c < (uint64_t)1 << f.bits; c++) {
        double v = fmt_decode1(&f, c);
        cli_code_hex(buf, sizeof buf, &f, c);
        cli_cell_str(&t, buf);
        cli_code_bits(buf, sizeof buf, &f, c);
        cli_cell_str(&t, buf);
        cli_cell_num(&t, v);
        cli_cell_str(&t, value_class(&f, v));
    }
    cli_table_print(&t, out, stdout);
    return 0;
}
