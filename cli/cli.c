// cli.c: the helpers every subcommand shares (declared in cli.h): dying with a clear message,
// parsing option values, separating positionals from options, showing codes, and one table
// writer for table/csv/json/md output.
// Constraints: process level; every user error ends in exit status 2.
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>

#include "formats/format.h"
#include "formats/names.h"
#include "formats/scale.h"
#include "util/json.h"

void cli_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fplab: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(CLI_EXIT_USAGE);
}

void cli_usage_error(const char *cmd) {
    fprintf(stderr, "fplab: see 'fplab %s --help'\n", cmd);
    exit(CLI_EXIT_USAGE);
}

// --- option values

void cli_parse_format(fmt_t *out, const char *arg, const char *opt) {
    int st = fmt_from_name(out, arg);
    if (st == FMT_OK) return;
    const char *elem, *recipe;
    for (size_t i = 0; fmt_scheme_get(i, &elem, &recipe); i++)
        CLI_CHECK(strcasecmp(arg, fmt_scheme_get(i, NULL, NULL)), "%s '%s': a scheme (%s elements under the "
                  "recipe %s), where a format is expected; expected its element format %s (and --scale %s "
                  "where the command has one)", opt, arg, elem, recipe, elem, recipe);
    char msg[1024];
    fmt_name_message(arg, st, msg, sizeof msg);
    cli_die("%s '%s': %s", opt, arg, msg);
}

const char *cli_parse_elem(fmt_t *out, const char *arg, const char *opt) {
    fmt_scaling sc;
    for (size_t i = 0; fmt_scheme_get(i, NULL, NULL); i++) {
        const char *name = fmt_scheme_get(i, NULL, NULL), *recipe;
        if (strcasecmp(arg, name)) continue;
        fmt_scheme_get(i, NULL, &recipe);
        fmt_scheme_from_name(out, &sc, name);
        return recipe;
    }
    cli_parse_format(out, arg, opt);
    return NULL;
}

// Why name is not one of list (comma-separated): the nearest names (formats/names.h's rule).
static const char *suggestion(char *buf, size_t cap, const char *name, const char *list) {
    fmt_suggest sg;
    fmt_suggest_init(&sg, name);
    fmt_suggest_try_list(&sg, list);
    fmt_suggest_text(&sg, buf, cap);
    return buf;
}

static const char mode_names[] = "rne,rna,rtz,rup,rdn,rto,sr,sr:a,sr:b,sr:c";

void cli_parse_round(fmt_round_opts *o, const char *arg) {
    char near[160];
    fmt_round_mode m;
    if (fmt_mode_from_name(&m, arg) == FMT_OK) {  // a plain name keeps --sr-variant's choice
        o->mode = m;
        return;
    }
    CLI_CHECK(fmt_mode_spec_from_name(o, arg) == FMT_OK,
              "--round '%s': unknown rounding mode; %sexpected one of rne rna rtz rup rdn rto sr, or sr:a sr:b sr:c "
              "(stochastic with IEEE P3109's variant)", arg, suggestion(near, sizeof near, arg, mode_names));
}

fmt_overflow cli_parse_overflow(const char *arg) {
    fmt_overflow o;
    char near[160];
    CLI_CHECK(fmt_overflow_from_name(&o, arg) == FMT_OK,
              "--overflow '%s': unknown overflow policy; %sexpected one of ieee saturate (satfinite) "
              "satpropagate satnone", arg, suggestion(near, sizeof near, arg, "ieee,saturate,satfinite,satpropagate,satnone"));
    return o;
}

fmt_sr_variant cli_parse_sr_variant(const char *arg) {
    fmt_sr_variant v;
    CLI_CHECK(fmt_sr_variant_from_name(&v, arg) == FMT_OK,
              "--sr-variant '%s': unknown stochastic rounding variant; expected a, b or c (IEEE P3109)", arg);
    return v;
}

int cli_int_base(const char *s) {
    if (*s == '+' || *s == '-') s++;
    return s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10;
}

uint64_t cli_parse_u64(const char *arg, const char *opt) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, cli_int_base(arg));
    CLI_CHECK(*arg && *arg != '-' && !*end && errno == 0,
              "%s '%s': expected a non-negative integer below 2^64", opt, arg);
    return (uint64_t)v;
}

long cli_parse_long(const char *arg, const char *opt, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(arg, &end, cli_int_base(arg));
    CLI_CHECK(*arg && !*end && errno == 0 && v >= lo && v <= hi,
              "%s '%s': expected an integer in %ld..%ld", opt, arg, lo, hi);
    return v;
}

double cli_parse_double(const char *arg, const char *what) {
    char *end;
    double v = strtod(arg, &end);
    CLI_CHECK(end != arg && !*end,
              "%s '%s': expected a real number (e.g. 0.1, -3e-5, 0x1.8p-3, inf, nan)", what, arg);
    return v;
}

// --- positionals vs options

static bool is_number(const char *s) {
    char *end;
    strtod(s, &end);
    return end != s && !*end;
}

// True when token (an option of the form --name, without '=') takes the next token as value.
static bool takes_value(const char *tok, const struct option *lo) {
    if (strncmp(tok, "--", 2) || strchr(tok, '=')) return false;
    size_t len = strlen(tok + 2), hits = 0;
    int has = no_argument;
    for (; lo->name; lo++) {
        if (!strncmp(lo->name, tok + 2, len)) {  // getopt_long accepts unique prefixes too
            if (strlen(lo->name) == len) return lo->has_arg == required_argument;
            hits++, has = lo->has_arg;
        }
    }
    return hits == 1 && has == required_argument;
}

int cli_split_args(int *argc, char **argv, const struct option *longopts, char **pos) {
    int n = 1, npos = 0;
    bool opts_done = false;
    for (int i = 1; i < *argc; i++) {
        const char *t = argv[i];
        if (opts_done || t[0] != '-' || !t[1] || is_number(t)) {
            pos[npos++] = argv[i];
        } else if (!strcmp(t, "--")) {
            opts_done = true;
        } else {
            argv[n++] = argv[i];
            if (takes_value(t, longopts) && i + 1 < *argc) argv[n++] = argv[++i];
        }
    }
    argv[n] = NULL;
    *argc = n;
    return npos;
}

// --- codes

void cli_code_hex(char *buf, size_t len, const fmt_t *f, uint64_t c) {
    snprintf(buf, len, "0x%0*llx", (f->bits + 3) / 4, (unsigned long long)c);
}

void cli_code_bits(char *buf, size_t len, const fmt_t *f, uint64_t c) {
    size_t k = 0;
    for (int b = f->bits - 1; b >= 0 && k + 2 < len; b--) {
        buf[k++] = (char)('0' + ((c >> b) & 1));
        bool sign_end = f->is_signed && b == f->bits - 1;
        bool exp_end = f->mbits > 0 && b == f->mbits;
        if ((sign_end || exp_end) && b > 0) buf[k++] = '|';
    }
    buf[k] = 0;
}

// --- numbers

char *cli_fmt_double(char *buf, size_t len, double v) {
    if (isnan(v)) return snprintf(buf, len, "nan"), buf;
    if (isinf(v)) return snprintf(buf, len, "%sinf", v < 0 ? "-" : ""), buf;
    char t[CLI_DOUBLE_MAX + 8];
    int p = 1;
    for (;; p++) {  // 17 significant digits always read back a binary64
        snprintf(t, sizeof t, "%.*e", p - 1, v);
        if (p == 17 || strtod(t, NULL) == v) break;
    }
    const int x = atoi(strchr(t, 'e') + 1);  // decimal exponent after rounding to p digits
    // %.17g's notation: fixed point when -4 <= x < 17. With decimals (p - 1 - x > 0), %.*f
    // rounds at the same digit as %.*e and writes the same decimal. An integer (p <= x + 1) is
    // the p digits and x + 1 - p zeros ("240", not %g's "2.4e+02"): not %.0f, which above 2^53
    // writes every digit of the double (34096749598247768 for 3.409674959824777e+16).
    if (x >= -4 && x < 17) {
        char f[CLI_DOUBLE_MAX + 8];
        if (p - 1 - x > 0) {
            snprintf(f, sizeof f, "%.*f", p - 1 - x, v);
        } else {
            size_t k = 0;
            for (const char *c = t; *c != 'e'; c++)
                if (*c != '.') f[k++] = *c;
            for (int z = 0; z < x + 1 - p; z++) f[k++] = '0';
            f[k] = 0;
        }
        if (strtod(f, NULL) == v) return snprintf(buf, len, "%s", f), buf;  // a guard: always true
    }
    snprintf(buf, len, "%s", t);
    return buf;
}

// --- output tables

static const char *const out_names[] = {"table", "csv", "json", "md"};

cli_out cli_parse_out(const char *arg, unsigned allowed) {
    char list[64] = "";
    for (int i = 0; i < 4; i++) {
        if (!(allowed & (1u << i))) continue;
        if (!strcmp(arg, out_names[i])) return (cli_out)i;
        strcat(list, list[0] ? "|" : "");
        strcat(list, out_names[i]);
    }
    cli_die("--format '%s': unknown output format; expected %s", arg, list);
}

struct cli_cell {
    char *s;   // text (CLI_STR, CLI_JSON, CLI_INT)
    double v;  // CLI_NUM
    bool b;    // CLI_BOOL
};

static struct cli_cell *next_cell(cli_table *t) {
    if (t->ncells == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->cells = realloc(t->cells, t->cap * sizeof *t->cells);
        CLI_CHECK_LIB(t->cells ? 0 : 3, "out of memory building the output table");
    }
    struct cli_cell *c = &t->cells[t->ncells++];
    memset(c, 0, sizeof *c);
    return c;
}

void cli_table_init(cli_table *t, const cli_col *cols, int ncols) {
    memset(t, 0, sizeof *t);
    t->cols = cols, t->ncols = ncols;
}
void cli_cell_str(cli_table *t, const char *s) { next_cell(t)->s = strdup(s ? s : ""); }
void cli_cell_num(cli_table *t, double v) { next_cell(t)->v = v; }
void cli_cell_numtext(cli_table *t, const char *text) {
    struct cli_cell *c = next_cell(t);
    c->s = strdup(text), c->v = NAN;  // NaN: json quotes it
}
void cli_cell_bool(cli_table *t, bool v) { next_cell(t)->b = v; }
void cli_cell_int(cli_table *t, long long v) {
    char b[24];
    snprintf(b, sizeof b, "%lld", v);
    cli_cell_str(t, b);
}
void cli_cell_u64(cli_table *t, uint64_t v) {
    char b[24];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    cli_cell_str(t, b);
}

// The text of a cell as that output format shows it (json strings are quoted by the caller).
static void cell_text(char *buf, size_t len, const struct cli_cell *c, cli_kind k, cli_out out, bool exact) {
    switch (k) {
    case CLI_STR:
    case CLI_INT:
    case CLI_JSON: snprintf(buf, len, "%s", c->s); break;
    case CLI_BOOL:
        snprintf(buf, len, "%s", (out == CLI_OUT_JSON || out == CLI_OUT_CSV) ? (c->b ? "true" : "false")
                                                                           : (c->b ? "yes" : "no"));
        break;
    case CLI_NUM:
        if (c->s) snprintf(buf, len, "%s", c->s);
        else if (exact || out == CLI_OUT_JSON || out == CLI_OUT_CSV) cli_fmt_double(buf, len, c->v);
        else if (!isfinite(c->v)) cli_fmt_double(buf, len, c->v);  // "nan", "inf", "-inf"
        else snprintf(buf, len, "%g", c->v);
        break;
    }
}

static void print_json(const cli_table *t, FILE *fp) {
    size_t nrows = t->ncells / t->ncols;
    char buf[128];
    fputs("[\n", fp);
    for (size_t r = 0; r < nrows; r++) {
        fputs("  {", fp);
        for (int j = 0; j < t->ncols; j++) {
            const struct cli_cell *c = &t->cells[r * t->ncols + j];
            cli_kind k = t->cols[j].kind;
            fprintf(fp, "%s\"%s\": ", j ? ", " : "", t->cols[j].name);
            if (k == CLI_JSON) fputs(c->s, fp);
            else if (k == CLI_STR || (k == CLI_NUM && !isfinite(c->v))) {
                cell_text(buf, sizeof buf, c, k, CLI_OUT_JSON, t->exact);
                jx_write_str(fp, buf);
            } else {
                cell_text(buf, sizeof buf, c, k, CLI_OUT_JSON, t->exact);
                fputs(buf, fp);
            }
        }
        fprintf(fp, "}%s\n", r + 1 < nrows ? "," : "");
    }
    fputs("]\n", fp);
}

void cli_table_print(cli_table *t, cli_out out, FILE *fp) {
    size_t nrows = t->ncells / t->ncols;
    char buf[128];
    if (out == CLI_OUT_JSON) {
        print_json(t, fp);
    } else {
        int width[32] = {0};
        for (int j = 0; j < t->ncols && j < 32; j++) {
            width[j] = (int)strlen(t->cols[j].name);
            for (size_t r = 0; r < nrows; r++) {
                cell_text(buf, sizeof buf, &t->cells[r * t->ncols + j], t->cols[j].kind, out, t->exact);
                if ((int)strlen(buf) > width[j]) width[j] = (int)strlen(buf);
            }
        }
        const char *sep = out == CLI_OUT_CSV ? "," : out == CLI_OUT_MD ? " | " : "  ";
        int last = t->ncols - 1;  // no padding after the last shown column
        while (last > 0 && t->cols[last].kind == CLI_JSON) last--;
        for (size_t r = 0; r <= nrows + (out == CLI_OUT_MD); r++) {
            if (out == CLI_OUT_MD) fputs("| ", fp);
            bool first = true;
            for (int j = 0; j < t->ncols; j++) {
                cli_kind k = t->cols[j].kind;
                if (k == CLI_JSON) continue;
                size_t data_r = r - (out == CLI_OUT_MD && r > 0) - 1;  // md: header, rule, rows
                if (r == 0) snprintf(buf, sizeof buf, "%s", t->cols[j].name);
                else if (out == CLI_OUT_MD && r == 1) snprintf(buf, sizeof buf, "%s", k == CLI_STR || k == CLI_BOOL ? "---" : "---:");
                else cell_text(buf, sizeof buf, &t->cells[data_r * t->ncols + j], k, out, t->exact);
                if (!first) fputs(sep, fp);
                first = false;
                if (out == CLI_OUT_TABLE)
                    fprintf(fp, k == CLI_STR || k == CLI_BOOL ? "%-*s" : "%*s", k != CLI_NUM && k != CLI_INT && j == last ? 0 : width[j], buf);
                else if (out == CLI_OUT_CSV && strpbrk(buf, ",\"")) jx_write_str(fp, buf);
                else fputs(buf, fp);
            }
            fputs(out == CLI_OUT_MD ? " |\n" : "\n", fp);
        }
    }
    for (size_t i = 0; i < t->ncells; i++) free(t->cells[i].s);
    free(t->cells);
    t->cells = NULL, t->ncells = t->cap = 0;
}
