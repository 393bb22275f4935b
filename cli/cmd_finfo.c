// cmd_finfo.c: `fplab finfo [FORMAT...] [--format table|wide|csv|json|md]`: NumPy-finfo-style
// properties of every format of the table, or of the formats named (names, aliases, eXmY).
// Every number comes from fmt_get_info; nothing is typed here.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "formats/scale.h"
#include "formats/wide.h"

static void help(FILE *fp) {
    fprintf(fp,
            "usage: fplab finfo [FORMAT...] [--format table|wide|csv|json|md]\n"
            "       fplab finfo --aliases\n\n"
            "Properties of every format of the table, or of the FORMATs named: a table name\n"
            "(e4m3, bf16, ...), an alias (float8_e4m3fn, torch.bfloat16, fp4, ...), a name only a\n"
            "peer has (float8_e4m3, float8_e3m4, float8_e4m3b11fnuz: ml_dtypes), an IEEE P3109 name\n"
            "binaryKpP{s|u}{e|f} (binary8p3se, binary8p4sf, ...: K = 3..16 bits, precision P; signed\n"
            "or unsigned; extended (inf) or finite), a scheme (mxfp4, nvfp4, ...: its element format)\n"
            "or a custom eXmY[:ieee|fn|fnuz|finite|e8m0][:unsigned][:bias=N]. Names are case-insensitive and may\n"
            "carry a module prefix (torch., jnp., jax.numpy., ml_dtypes., numpy., np.). fp8 and fp6\n"
            "name two formats each and are refused with the choices.\n\n"
            "columns: name bits exponent_bits mantissa_bits bias max min smallest_normal\n"
            "  smallest_subnormal eps resolution finite_values has_inf nan_codes (a count) kind\n"
            "  epsneg maxexp minexp precision (NumPy's: 1 - the value below 1, emax + 1, emin,\n"
            "  floor(-log10(eps))) dynamic_range (log2(max / smallest_subnormal): the binades the\n"
            "  positive finite values span); json adds nan_code_list (hex strings) when there are at\n"
            "  most 8 NaN codes. The default table keeps what fits 100 columns: name bits e m bias\n"
            "  max tiny (smallest_normal) min_sub (smallest_subnormal) eps range (dynamic_range,\n"
            "  2 decimals) inf kind; max in decimal (a wide format's as its exact hexadecimal float\n"
            "  or 2^k), the columns that are powers of two always as 2^k.\n"
            "  min is the smallest finite value: -max, or 0 in an unsigned format (e8m0, which has\n"
            "  no zero: its smallest positive value).\n"
            "  kind: table (a row of the table), peer (a format only peers name) or custom (a\n"
            "  format built from an eXmY spec that no name gives; also said on stderr).\n\n"
            "options (default in brackets):\n"
            "  --format F   table (aligned, the columns above that fit 100 characters), wide (aligned,\n"
            "               every column), csv, json or md (a GitHub markdown table); every number is\n"
            "               exact: the shortest text that reads back (or 2^k in the table) [table]\n"
            "  --aliases    list every name: table formats with their aliases, peers' formats, schemes\n"
            "  -h, --help   this text\n\n"
            "examples:\n"
            "  build/fplab finfo\n"
            "  build/fplab finfo e4m3 float8_e5m2 e5m7 --format json\n"
            "  build/fplab finfo bf16 fp16 e4m3:fnuz --format csv\n");
}

// Every column, as csv, json, md and --format wide print them; the new ones after `kind`, so
// that existing readers of the csv find the old columns where they were.
static const cli_col cols[] = {
    {"name", CLI_STR},          {"bits", CLI_INT},         {"exponent_bits", CLI_INT},
    {"mantissa_bits", CLI_INT}, {"bias", CLI_INT},         {"max", CLI_NUM},
    {"min", CLI_NUM},           {"smallest_normal", CLI_NUM}, {"smallest_subnormal", CLI_NUM},
    {"eps", CLI_NUM},           {"resolution", CLI_NUM},   {"finite_values", CLI_INT},
    {"has_inf", CLI_BOOL},       {"nan_codes", CLI_INT},    {"kind", CLI_STR},
    {"epsneg", CLI_NUM},        {"maxexp", CLI_INT},       {"minexp", CLI_INT},
    {"precision", CLI_INT},     {"dynamic_range", CLI_NUM}, {"nan_code_list", CLI_JSON},
};
enum { NCOLS = sizeof cols / sizeof cols[0] };
// The default table: what fits 100 columns (tiny is smallest_normal, as NumPy names it).
static const cli_col short_cols[] = {
    {"name", CLI_STR}, {"bits", CLI_INT}, {"e", CLI_INT},       {"m", CLI_INT},      {"bias", CLI_INT},
    {"max", CLI_STR},  {"tiny", CLI_STR}, {"min_sub", CLI_STR}, {"eps", CLI_STR},  {"range", CLI_STR},
    {"inf", CLI_BOOL}, {"kind", CLI_STR},
};
enum { NSHORT = sizeof short_cols / sizeof short_cols[0] };

// A power of two as 2^k (tiny, min_sub, eps, epsneg: every row the same way); a value that is
// not one (epsneg of a format whose max is below 1) as its shortest decimal.
static const char *pow2_text(char *buf, size_t cap, double v) {
    int e;
    if (v > 0 && isfinite(v) && frexp(v, &e) == 0.5) snprintf(buf, cap, "2^%d", e - 1);
    else cli_fmt_double(buf, cap, v);
    return buf;
}

// The extremes of a format as codes: max, min (the smallest value: most negative, or zero if
// unsigned), smallest normal, smallest subnormal. A wide format's values come from these.
static void extreme_codes(const fmt_t *f, uint64_t c[4]) {
    const uint64_t normal = f->special == FMT_E8M0 ? 0 : (uint64_t)1 << f->mbits;  // e8m0: field 0 is normal
    c[0] = fmt_max_code(f);
    c[3] = f->has_subnormals ? 1 : normal;
    c[1] = f->is_signed ? c[0] | (uint64_t)1 << (f->bits - 1) : f->has_zero ? 0 : c[3];
    c[2] = normal;
}

// log2 of a positive finite exact value: sig 2^exp (sig < 2^64: log2 in double is exact to a
// few ulps, far below the 2 decimals shown).
static double exact_log2(const fmt_exact *v) { return log2((double)v->sig) + v->exp; }

// The dynamic range in binades: log2(max / smallest_subnormal), from the codes (wide formats
// included).
static double dynamic_range(const fmt_t *f) {
    uint64_t c[4];
    extreme_codes(f, c);
    fmt_exact hi, lo;
    fmt_code_exact(f, c[0], &hi);
    fmt_code_exact(f, c[3], &lo);
    return exact_log2(&hi) - exact_log2(&lo);
}

// A wide format's value of code: "2^k" for a power of two, else its hexadecimal float (exact;
// no double holds it).
static const char *wide_text(char *buf, size_t cap, const fmt_t *f, uint64_t code) {
    fmt_exact v;
    fmt_code_exact(f, code, &v);
    if (v.cls == FMT_X_FINITE && v.sig == 1) snprintf(buf, cap, "%s2^%d", v.neg ? "-" : "", v.exp);
    else fmt_exact_hex(&v, buf, cap);
    return buf;
}

static void add_short_row(cli_table *t, const fmt_t *f) {
    fmt_info in;
    fmt_get_info(f, &in);
    char b[5][CLI_DOUBLE_MAX];
    cli_cell_str(t, f->name);
    cli_cell_int(t, f->bits), cli_cell_int(t, f->ebits), cli_cell_int(t, f->mbits), cli_cell_int(t, f->bias);
    if (fmt_is_wide(f)) {
        uint64_t c[4];
        extreme_codes(f, c);
        cli_cell_str(t, wide_text(b[0], sizeof b[0], f, c[0]));
        cli_cell_str(t, wide_text(b[1], sizeof b[1], f, c[2]));
        cli_cell_str(t, wide_text(b[2], sizeof b[2], f, c[3]));
    } else {
        cli_cell_str(t, cli_fmt_double(b[0], sizeof b[0], in.max));
        cli_cell_str(t, pow2_text(b[1], sizeof b[1], in.smallest_normal));
        cli_cell_str(t, pow2_text(b[2], sizeof b[2], in.smallest_subnormal));
    }
    cli_cell_str(t, pow2_text(b[3], sizeof b[3], in.eps));
    snprintf(b[4], sizeof b[4], "%.2f", dynamic_range(f));
    cli_cell_str(t, b[4]);
    cli_cell_bool(t, f->has_inf);
    cli_cell_str(t, fmt_kind(f));
}

static void add_row(cli_table *t, const fmt_t *f) {
    fmt_info in;
    fmt_get_info(f, &in);
    cli_cell_str(t, f->name);
    cli_cell_int(t, f->bits);
    cli_cell_int(t, f->ebits);
    cli_cell_int(t, f->mbits);
    cli_cell_int(t, f->bias);
    if (fmt_is_wide(f)) {  // the exact hexadecimal float (a string in json)
        uint64_t c[4];
        extreme_codes(f, c);
        for (int i = 0; i < 4; i++) {
            fmt_exact v;
            char hex[48];
            fmt_code_exact(f, c[i], &v);
            fmt_exact_hex(&v, hex, sizeof hex);
            cli_cell_numtext(t, hex);
        }
    } else {
        cli_cell_num(t, in.max);
        cli_cell_num(t, in.min);
        cli_cell_num(t, in.smallest_normal);
        cli_cell_num(t, in.smallest_subnormal);
    }
    cli_cell_num(t, in.eps);
    cli_cell_num(t, in.resolution);
    cli_cell_u64(t, in.finite_values);
    cli_cell_bool(t, f->has_inf);
    cli_cell_u64(t, in.nan_codes);
    cli_cell_str(t, fmt_kind(f));
    cli_cell_num(t, in.epsneg);
    cli_cell_int(t, in.maxexp);
    cli_cell_int(t, in.minexp);
    cli_cell_int(t, in.precision);
    cli_cell_num(t, dynamic_range(f));
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

// IEEE P3109's names, one line per K and signedness (wrapped at 100 columns), each name as
// fmt_from_name_wide reads it; the wide ones (beyond float64: finfo, values and cast only) marked.
static void print_p3109(void) {
    for (int K = 3; K <= 16; K++)
        for (int sg = 1; sg >= 0; sg--) {
            int col = printf("%-10s p3109  ", "");
            for (int P = 1; P <= (sg ? K - 1 : K); P++)
                for (int dm = 0; dm < 2; dm++) {
                    char name[40];
                    fmt_t f;
                    snprintf(name, sizeof name, "binary%dp%d%c%c", K, P, sg ? 's' : 'u', dm ? 'f' : 'e');
                    if (fmt_from_name_wide(&f, name) != FMT_OK) continue;
                    const int w = (int)strlen(name) + 1 + (fmt_is_wide(&f) ? 1 : 0);
                    if (col + w > 100) col = printf("\n%-10s        ", "");
                    col += printf(" %s%s", name, fmt_is_wide(&f) ? "*" : "");
                }
            printf("\n");
        }
    printf("(p3109: IEEE P3109 binaryKpP{s|u}{e|f}; * beyond float64: finfo, values and cast only)\n");
}

static void print_aliases(void) {
    for (size_t i = 0; i < fmt_table_count(); i++) {
        printf("%-10s table  ", fmt_table_get(i)->name);
        for (const char *const *a = fmt_table_aliases(i); *a; a++) printf(" %s", *a);
        printf("\n");
    }
    const char *spec, *peer, *elem, *recipe;
    for (size_t i = 0; fmt_peer_get(i, &spec, &peer); i++)
        printf("%-10s peer    = %s: %s\n", fmt_peer_get(i, NULL, NULL), spec, peer);
    for (size_t i = 0; fmt_scheme_get(i, &elem, &recipe); i++)
        printf("%-10s scheme  %s elements, recipe %s\n", fmt_scheme_get(i, NULL, NULL), elem, recipe);
    print_p3109();
    printf("(ambiguous, refused with the choices: fp8, float8 (e4m3 or e5m2), fp6, float6 (e3m2 or e2m3);\n"
           " module prefixes accepted: torch. jnp. jax.numpy. ml_dtypes. numpy. np.)\n");
}

int cmd_finfo(int argc, char **argv) {
    static const struct option lo[] = {{"format", required_argument, 0, 'f'}, {"aliases", no_argument, 0, 'a'},
                                       {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    char *pos[argc + 1];
    int npos = cli_split_args(&argc, argv, lo, pos);
    cli_out out = CLI_OUT_TABLE;
    bool list_aliases = false, wide = false;
    argv[0] = "fplab finfo";
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        if (c == 'f' && !strcmp(optarg, "wide")) out = CLI_OUT_TABLE, wide = true;
        else if (c == 'f') out = cli_parse_out(optarg, 0xF), wide = false;
        else if (c == 'a') list_aliases = true;
        else if (c == 'h') return help(stdout), 0;
        else cli_usage_error("finfo");
    }
    if (list_aliases) {
        CLI_CHECK(npos == 0, "finfo --aliases: unexpected argument '%s'; --aliases lists every name", pos[0]);
        print_aliases();
        return 0;
    }
    const bool short_table = out == CLI_OUT_TABLE && !wide;
    cli_table t;
    cli_table_init(&t, short_table ? short_cols : cols, short_table ? NSHORT : NCOLS);
    t.exact = true;  // every number as the shortest text that reads back, in every output
    void (*add)(cli_table *, const fmt_t *) = short_table ? add_short_row : add_row;
    if (npos == 0) {
        for (size_t i = 0; i < fmt_table_count(); i++) add(&t, fmt_table_get(i));
    }
    for (int i = 0; i < npos; i++) {
        fmt_t f;
        const char *recipe = NULL;
        if (fmt_from_name_wide(&f, pos[i]) == FMT_OK && fmt_is_wide(&f)) {
            fmt_exact v;
            char dec[48];
            fmt_code_exact(&f, fmt_max_code(&f), &v);
            fmt_exact_decimal(&v, dec, sizeof dec);
            fprintf(stderr, "fplab finfo: %s reaches beyond float64 (max ~ %s): its extremes are exact "
                    "hexadecimal floats or 2^k; 'fplab values %s --codes A:B' lists codes\n", f.name, dec, f.name);
        } else recipe = cli_parse_elem(&f, pos[i], "FORMAT");
        if (recipe) fprintf(stderr, "fplab finfo: %s is a scheme: %s elements under the recipe %s; the row is %s\n",
                            pos[i], f.name, recipe, f.name);
        else if (!strcmp(fmt_kind(&f), "custom"))
            fprintf(stderr, "fplab finfo: %s is not a named format: a custom %d-bit format (%s, %s)\n", pos[i],
                    f.bits, f.is_signed ? "signed" : "unsigned", f.has_inf ? "IEEE-style inf and NaN" : "no inf");
        add(&t, &f);
    }
    cli_table_print(&t, out, stdout);
    return 0;
}
