// cmd_cast.c: `fplab cast VALUE... --to FORMAT [...]`: round each value to a format and show
// the code, the decoded value and the error (absolute, relative, in ulps of the format).
// Rounding is fmt_round1 with the options given; codes are fmt_encode1 of the rounded value.
// An IEEE P3109 format wider than float64 rounds with fmt_round_wide to a code, whose exact
// value is a double unless it lies beyond float64 (then its hexadecimal float; the errors are
// doubles all the same).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "formats/codec.h"
#include "formats/wide.h"

static void help(FILE *fp) {
    fprintf(fp,
            "usage: fplab cast VALUE... --to FORMAT [--round MODE] [--overflow P]\n"
            "                 [--flush] [--seed N] [--sr-bits B] [--sr-variant V] [--format table|csv|json]\n\n"
            "Rounds each VALUE (as strtod reads it: 0.1, -3e-5, 0x1.8p-3, inf, nan) to FORMAT.\n"
            "columns: input, code (hex), bits (sign|exponent|mantissa), value (the decoded\n"
            "  result), abs_err = |value - input|, rel_err = abs_err / |input|, err_ulp =\n"
            "  (value - input) / ulp, signed, with ulp = 2^(max(floor(log2|value|), emin) - mbits)\n"
            "  taken in the binade of the result. Every number is the shortest text that reads\n"
            "  back to the same double (0.1, not 0.10000000000000001).\n\n"
            "options (default in brackets):\n"
            "  --to FORMAT     target format: a name of 'fplab finfo', an IEEE P3109 binaryKpP{s|u}{e|f}\n"
            "                  or a custom eXmY (required)\n"
            "  --round MODE    rne, rna, rtz, rup, rdn, rto, sr (stochastic; sr:a, sr:b, sr:c with\n"
            "                  IEEE P3109's variant, as --sr-variant) [rne]\n"
            "  --overflow P    ieee (inf, or NaN when the format has no inf; rtz/rup/rdn toward\n"
            "                  +-max as IEEE 754 says), or IEEE P3109's saturate (satfinite: always\n"
            "                  +-max), satpropagate (+-max, but inf stays inf) or satnone [ieee]\n"
            "  --flush         flush subnormal results to zero\n"
            "  --seed N        stochastic rounding key; VALUE number i (from 0) draws counter i [0]\n"
            "  --sr-bits B     random bits per stochastic rounding, 1..32 [32]\n"
            "  --sr-variant V  IEEE P3109's stochastic rounding variant a, b or c [a]\n"
            "  --format F      table, csv or json [table]\n"
            "  -h, --help      this text\n\n"
            "examples:\n"
            "  build/fplab cast 0.1 464 500 --to e4m3                       # IEEE overflow: 500 -> NaN (ml_dtypes)\n"
            "  build/fplab cast 0.1 464 500 --to e4m3 --overflow saturate   # 500 -> 448 (CUDA satfinite)\n"
            "  build/fplab cast 1.5 3 --to e8m0 --round rna                 # ties away, as ml_dtypes and PyTorch\n"
            "  build/fplab cast 0.3 0.3 0.3 --to bf16 --round sr --seed 7   # stochastic rounding\n"
            "  build/fplab cast 1e6 -1 --to binary8p3se --overflow satnone   # IEEE P3109: 1e6 -> inf\n"
            "  build/fplab cast 3 inf --to binary16p1sf --overflow saturate  # beyond float64: max 0x1p+16383\n");
}

// The error value - x and the error in ulps of a wide format's finite value that no double
// holds (|value| >= 2^1024: a finite x rounded up past float64, or inf saturated to max), which
// is itself a double whenever x is finite (|value - x| < 2^1024). Both are computed 2^s lower,
// where the value and x are doubles (value = sig 2^exp, sig odd, < 2^53 for every P3109 format).
static void wide_error(const fmt_t *f, const fmt_exact *v, double x, double *err, double *err_ulp) {
    if (v->cls != FMT_X_FINITE) {
        *err = *err_ulp = NAN;
        return;
    }
    const int top = v->exp + (63 - __builtin_clzll(v->sig)), s = top - 1000;  // |value| in [2^top, 2^(top+1))
    const double vs = ldexp(v->neg ? -(double)v->sig : (double)v->sig, v->exp - s);
    if (!isfinite(x)) {  // inf saturated to the max: infinitely far, as in every other format
        *err = *err_ulp = -x;
        return;
    }
    const double es = vs - ldexp(x, -s);  // x >= 2^1023 here: ldexp exact
    *err = ldexp(es, s);
    *err_ulp = ldexp(es, s - (top - f->mbits));  // the ulp in value's binade, 2^(top - mbits)
}

static const cli_col cols[] = {
    {"input", CLI_NUM},   {"code", CLI_STR},    {"bits", CLI_STR},    {"value", CLI_NUM},
    {"abs_err", CLI_NUM}, {"rel_err", CLI_NUM}, {"err_ulp", CLI_NUM},
};

int cmd_cast(int argc, char **argv) {
    static const struct option lo[] = {
        {"to", required_argument, 0, 't'},    {"round", required_argument, 0, 'r'},
        {"overflow", required_argument, 0, 'o'}, {"flush", no_argument, 0, 'F'},
        {"seed", required_argument, 0, 's'},  {"sr-bits", required_argument, 0, 'b'},
        {"sr-variant", required_argument, 0, 'v'},
        {"format", required_argument, 0, 'f'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    char *pos[argc + 1];
    int npos = cli_split_args(&argc, argv, lo, pos);
    argv[0] = "fplab cast";
    fmt_round_opts o = {0};
    fmt_t f;
    const char *to = NULL;
    cli_out out = CLI_OUT_TABLE;
    int round_variant = -1, variant = -1;  // the variants --round sr:V and --sr-variant gave
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        switch (c) {
        case 't': to = optarg; break;
        case 'r': cli_parse_round(&o, optarg), round_variant = strchr(optarg, ':') ? (int)o.sr_variant : -1; break;
        case 'o': o.overflow = cli_parse_overflow(optarg); break;
        case 'F': o.flush_subnormals = true; break;
        case 's': o.seed = cli_parse_u64(optarg, "--seed"); break;
        case 'b': o.sr_bits = (int)cli_parse_long(optarg, "--sr-bits", 1, 32); break;
        case 'v': o.sr_variant = cli_parse_sr_variant(optarg), variant = (int)o.sr_variant; break;
        case 'f': out = cli_parse_out(optarg, 0x7); break;
        case 'h': help(stdout); return 0;
        default: cli_usage_error("cast");
        }
    }
    CLI_CHECK(round_variant < 0 || variant < 0 || round_variant == variant,
              "cast: --round sr:%s and --sr-variant %s disagree; expected one of them, or the same variant",
              fmt_sr_variant_name((fmt_sr_variant)round_variant), fmt_sr_variant_name((fmt_sr_variant)variant));
    if (round_variant >= 0) o.sr_variant = (fmt_sr_variant)round_variant;
    CLI_CHECK(to, "cast: --to FORMAT is required (e.g. --to e4m3; see 'fplab cast --help')");
    CLI_CHECK(npos > 0, "cast: expected at least one VALUE (e.g. fplab cast 0.1 --to %s)", to);
    const bool wide = fmt_from_name_wide(&f, to) == FMT_OK && fmt_is_wide(&f);
    if (!wide) cli_parse_format(&f, to, "--to");
    else fprintf(stderr, "fplab cast: %s's exponent range is wider than float64's: every double lies inside its "
                 "normal range, so a cast only drops precision (to %d significant bits); a result beyond float64 (inf "
                 "saturated to its max, or rounded up past 2^1024) is shown as its exact hexadecimal float\n",
                 f.name, f.mbits + 1);
    char msg[256];
    CLI_CHECK(fmt_validate_round_opts(&f, &o, msg, sizeof msg) == FMT_OK, "cast: %s", msg);
    if (msg[0]) fprintf(stderr, "fplab cast: %s\n", msg);

    double x[npos];  // parse every value before printing anything
    for (int i = 0; i < npos; i++) x[i] = cli_parse_double(pos[i], "VALUE");
    cli_table t;
    cli_table_init(&t, cols, sizeof cols / sizeof cols[0]);
    t.exact = true;
    char buf[96];
    for (int i = 0; i < npos; i++) {
        o.offset = (uint64_t)i;
        uint64_t code;
        double v;
        char vtext[48] = "";  // a wide format's value beyond float64, exactly
        double err, err_ulp;
        if (wide) {
            code = fmt_round_wide(&f, x[i], &o);
            fmt_exact ex;
            fmt_code_exact(&f, code, &ex);
            if (!fmt_exact_double(&ex, &v)) {
                fmt_exact_hex(&ex, vtext, sizeof vtext), v = NAN;
                wide_error(&f, &ex, x[i], &err, &err_ulp);
            } else {
                err = v == x[i] ? 0 : v - x[i];
                err_ulp = v == 0 ? 0 : isfinite(v) ? err / fmt_ulp(&f, v) : NAN;  // a wide ulp at 0 is no double
            }
        } else {
            code = fmt_encode1(&f, fmt_round1(&f, x[i], &o));
            v = fmt_decode1(&f, code);
            err = v == x[i] ? 0 : v - x[i];  // inf -> inf is exact, not inf - inf
            err_ulp = isfinite(v) ? err / fmt_ulp(&f, v) : NAN;
        }
        cli_cell_num(&t, x[i]);
        cli_code_hex(buf, sizeof buf, &f, code);
        cli_cell_str(&t, buf);
        cli_code_bits(buf, sizeof buf, &f, code);
        cli_cell_str(&t, buf);
        if (vtext[0]) cli_cell_numtext(&t, vtext);
        else cli_cell_num(&t, v);
        cli_cell_num(&t, fabs(err));
        cli_cell_num(&t, x[i] == 0 ? (err == 0 ? 0 : INFINITY) : fabs(err) / fabs(x[i]));
        cli_cell_num(&t, err_ulp);
    }
    cli_table_print(&t, out, stdout);
    return 0;
}
