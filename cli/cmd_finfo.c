// cmd_finfo.c: `fplab finfo [FORMAT...] [--format table|csv|json|md]`: NumPy-finfo-style
// properties of every format of the table, or of the formats named (names, aliases, eXmY).
// Every number comes from fmt_get_info; nothing is typed here.
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void help(FILE *fp) {
    fprintf(fp,
            "usage: fplab finfo [FORMAT...] [--format table|csv|json|md]\n\n"
            "Properties of every format of the table, or of the FORMATs named: a table name\n"
            "(e4m3, bf16, ...), an alias (float8_e4m3fn, bfloat16, fp4, ...) or a custom\n"
            "eXmY[:ieee|fn|fnuz|finite|e8m0][:unsigned][:bias=N].\n\n"
            "columns: name bits exponent_bits mantissa_bits bias max min smallest_normal\n"
            "  smallest_subnormal eps resolution finite_values has_inf nan_codes (a count);\n"
            "  json adds nan_code_list (hex strings) when there are at most 8 NaN codes.\n"
            "  min is the most negative finite value (the smallest value of an unsigned format).\n\n"
            "options (default in brackets):\n"
            "  --format F   table (aligned, %%g numbers: 6 digits), csv or json (each number the\n"
            "               shortest text that reads back exactly), md (a GitHub markdown table) [table]\n"
            "  -h, --help   this text\n\n"
            "examples:\n"
            "  build/fplab finfo\n"
            "  build/fplab finfo e4m3 float8_e5m2 e5m7 --format json\n"
            "  build/fplab finfo bf16 fp16 e4m3:fnuz --format csv\n");
}

static const cli_col cols[] = {
    {"name", CLI_STR},          {"bits", CLI_INT},         {"exponent_bits", CLI_INT},
    {"mantissa_bits", CLI_INT}, {"bias", CLI_INT},         {"max", CLI_NUM},
    {"min", CLI_NUM},           {"smallest_normal", CLI_NUM}, {"smallest_subnormal", CLI_NUM},
    {"eps", CLI_NUM},           {"resolution", CLI_NUM},   {"finite_values", CLI_INT},
    {"has_inf", CLI_BOOL},       {"nan_codes", CLI_INT},    {"nan_code_list", CLI_JSON},
};
enum { NCOLS = sizeof cols / sizeof cols[0] };

static void add_row(cli_table *t, const fmt_t *f) {
    fmt_info in;
    fmt_get_info(f, &in);
    cli_cell_str(t, f->name);
    cli_cell_int(t, f->bits);
    cli_cell_int(t, f->ebits);
    cli_cell_int(t, f->mbits);
    cli_cell_int(t, f->bias);
    cli_cell_num(t, in.max);
    cli_cell_num(t, in.min);
    cli_cell_num(t, in.smallest_normal);
    cli_cell_num(t, in.smallest_subnormal);
    cli_cell_num(t, in.eps);
    cli_cell_num(t, in.resolution);
    cli_cell_u64(t, in.finite_values);
    cli_cell_bool(t, f->has_inf);
    cli_cell_u64(t, in.nan_codes);
    char list[8 * 24 + 4] = "null";
    if (in.nan_codes <= 8) {
        uint64_t codes[8];
        size_t n = fmt_nan_codes(f, codes, 8), k = 0;
        k += (size_t)snprintf(list, sizeof list, "[");
        for (size_t i = 0; i < n; i++) {
            char hex[24];
            cli_code_hex(hex, sizeof hex, f, codes[i]);
            k += (size_t)snprintf(list + k, sizeof list - k, "%s\"%s\"", i ? ", " : "", hex);
        }
        snprintf(list + k, sizeof list - k, "]");
    }
    cli_cell_str(t, list);
}

int cmd_finfo(int argc, char **argv) {
    static const struct option lo[] = {{"format", required_argument, 0, 'f'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    char *pos[argc + 1];
    int npos = cli_split_args(&argc, argv, lo, pos);
    cli_out out = CLI_OUT_TABLE;
    argv[0] = "fplab finfo";
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        if (c == 'f') out = cli_parse_out(optarg, 0xF);
        else if (c == 'h') return help(stdout), 0;
        else cli_usage_error("finfo");
    }
    cli_table t;
    cli_table_init(&t, cols, NCOLS);
    if (npos == 0) {
        for (size_t i = 0; i < fmt_table_count(); i++) add_row(&t, fmt_table_get(i));
    }
    for (int i = 0; i < npos; i++) {
        fmt_t f;
        cli_parse_format(&f, pos[i], "FORMAT");
        add_row(&t, &f);
    }
    cli_table_print(&t, out, stdout);
    return 0;
}
