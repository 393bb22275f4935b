// cli.h: what the subcommands of `fplab` share: the die/check macros, option-value parsers
// that exit on bad input, the argument pre-pass that lets values like -0.3 be positional, and
// one table writer for the output formats (table, csv, json, md).
// Constraints: process level only. Bad user input -> a message naming the input and what was
// expected on stderr, exit status 2. Library layers below never exit; this layer does.
#ifndef FPLAB_CLI_H
#define FPLAB_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/round.h"

enum { CLI_EXIT_USAGE = 2 };

// Prints "fplab: <message>" to stderr and exits with status 2 (bad input from the user).
_Noreturn void cli_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Dies unless cond holds: CLI_CHECK(n > 0, "'%s': expected a positive count", arg).
#define CLI_CHECK(cond, ...)              \
    do {                                  \
        if (!(cond)) cli_die(__VA_ARGS__); \
    } while (0)

// A failing library call that the user cannot have caused (e.g. out of memory): names the
// call site, the status and a hint, then exits 1.
#define CLI_CHECK_LIB(status, hint)                                                        \
    do {                                                                                   \
        int cli_st_ = (status);                                                            \
        if (cli_st_ != 0) {                                                                \
            fprintf(stderr, "fplab: %s:%d: %s returned %d (%s); %s\n", __FILE__, __LINE__, \
                    #status, cli_st_, fmt_strerror(cli_st_), hint);                        \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

// --- option values: each parses `arg` given for option `opt` or dies naming both.
void cli_parse_format(fmt_t *out, const char *arg, const char *opt);  // table name, alias, eXmY
// An element format where a scheme (mxfp4, nvfp4, ...) is also accepted: returns the scheme's
// recipe name (out is its element format), or NULL for a plain format.
const char *cli_parse_elem(fmt_t *out, const char *arg, const char *opt);
// --round: a mode name (keeps o->sr_variant, which --sr-variant sets) or sr:a, sr:b, sr:c
// (stochastic rounding and its variant, as Python and policies spell it).
void cli_parse_round(fmt_round_opts *o, const char *arg);
fmt_overflow cli_parse_overflow(const char *arg);
fmt_sr_variant cli_parse_sr_variant(const char *arg);
// Integers are decimal, or hexadecimal with 0x (after an optional sign): a leading 0 is not
// octal (--codes 010:012 is 10..12). cli_int_base gives the strtol base for s.
int cli_int_base(const char *s);
uint64_t cli_parse_u64(const char *arg, const char *opt);
long cli_parse_long(const char *arg, const char *opt, long lo, long hi);
// A real number as strtod reads it (decimal, hex float, inf, nan); trailing garbage dies.
double cli_parse_double(const char *arg, const char *what);

// Moves the positional arguments of argv[1..argc) (in order) to pos[] and leaves argv with the
// options only, so that getopt_long sees no positionals and "-0.3" or "-inf" count as values.
// An option of longopts that takes a required argument in the form "--opt value" keeps its
// value. "--" ends the options. pos must hold argc entries. Returns the number of positionals.
int cli_split_args(int *argc, char **argv, const struct option *longopts, char **pos);

// Prints the standard "see --help" line and exits 2 (after getopt has reported the problem).
_Noreturn void cli_usage_error(const char *cmd);

// Code c of f as hex with as many digits as the format needs ("0x7e") into buf.
void cli_code_hex(char *buf, size_t len, const fmt_t *f, uint64_t c);
// Code c of f as bits with its fields separated: "0|1111|110" (sign|exponent|mantissa); an
// unsigned format has no sign field, a format without mantissa bits no mantissa field.
void cli_code_bits(char *buf, size_t len, const fmt_t *f, uint64_t c);

// --- numbers
enum { CLI_DOUBLE_MAX = 32 };  // room for any cli_fmt_double text and its NUL
// v as the shortest text that strtod reads back to the same double: the fewest significant
// digits p in 1..17 such that %.{p}g reads back v, in the notation %.17g would choose (fixed
// point for decimal exponents -4..16, else d.ddde+XX). 0.1 -> "0.1" (not %.17g's
// 0.10000000000000001), 240 -> "240", 1e23 -> "1e+23", 0x1p-133 -> "9.183549615799121e-41",
// -0 -> "-0", and "nan", "inf", "-inf". A float32 value is printed as the double it is
// ((double)0.1f -> "0.10000000149011612"). Writes at most len bytes, cut as snprintf cuts;
// returns buf.
char *cli_fmt_double(char *buf, size_t len, double v);

// --- output tables
typedef enum { CLI_OUT_TABLE, CLI_OUT_CSV, CLI_OUT_JSON, CLI_OUT_MD } cli_out;
// Parses --format; `allowed` is a bit mask of (1 << cli_out) values the command offers.
cli_out cli_parse_out(const char *arg, unsigned allowed);

typedef enum {
    CLI_STR,   // text: quoted in json and csv when needed
    CLI_NUM,   // a double: in json and csv the shortest text that reads back exactly
               // (cli_fmt_double); in table and md %g (6 digits: for reading, aligned, not
               // for reading back) unless the table is `exact`; inf and nan become the
               // strings "inf", "-inf", "nan" in json
    CLI_INT,   // an integer
    CLI_BOOL,  // true/false in json and csv, yes/no in table and md
    CLI_JSON,  // raw json (e.g. a list) printed only in json output
} cli_kind;

typedef struct {
    const char *name;
    cli_kind kind;
} cli_col;

typedef struct {
    const cli_col *cols;
    int ncols;
    bool exact;  // numbers as cli_fmt_double in every output format, table and md included
                 // (set after cli_table_init)
    size_t ncells, cap;
    struct cli_cell *cells;  // row-major, ncols per row
} cli_table;

void cli_table_init(cli_table *t, const cli_col *cols, int ncols);
// Appends the next cell of the current row; its kind is that of its column.
void cli_cell_str(cli_table *t, const char *s);
void cli_cell_num(cli_table *t, double v);
// A CLI_NUM cell given as text: a number no double holds (2^16383: a wide format's value);
// written as is, and as a string in json.
void cli_cell_numtext(cli_table *t, const char *text);
void cli_cell_int(cli_table *t, long long v);
void cli_cell_u64(cli_table *t, uint64_t v);  // a CLI_INT cell
void cli_cell_bool(cli_table *t, bool v);
// Writes the table in format `out` to fp and frees its cells.
void cli_table_print(cli_table *t, cli_out out, FILE *fp);

// --- subcommands: each takes the argv that starts with its own name.
int cmd_finfo(int argc, char **argv);
int cmd_engines(int argc, char **argv);
int cmd_values(int argc, char **argv);
int cmd_cast(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_matmul_check(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_ablate(int argc, char **argv);
int cmd_report(int argc, char **argv);

#endif
