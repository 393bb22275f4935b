// cmd_engines.c: `fplab engines [ENGINE...] [--format table|csv|json|md]`: the matrix-engine
// models (kernels/engine.h), one row per instruction kind: shape, operand types, alignment
// width, rounding of the normalization, subnormals and special values, and where the model
// comes from. Every entry comes from the engine table; nothing is typed here.
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "formats/names.h"
#include "kernels/engine.h"

static void help(FILE *fp) {
    fprintf(fp,
            "usage: fplab engines [ENGINE...] [--format table|csv|json|md]\n\n"
            "The arithmetic of real matrix units that fplab models bit for bit (after MMA-Sim,\n"
            "arXiv 2511.10909): every instruction kind of each ENGINE (default: all). An engine\n"
            "name is an accumulator spec wherever one is accepted (matmul-check --acc, policy\n"
            "'accumulator' lines, Python acc=), with optional :kN (another k), :f16 (an f16 C/D)\n"
            "and :promote=N (add into float32 every N products, a multiple of k).\n\n"
            "The table (default) gives each engine's kinds in a few short columns: kind shape k\n"
            "  types (A and B; 'mixed' when they may differ) sum (fused | fma | pairwise |\n"
            "  amd-fused, with the fractional bits kept below the largest exponent) d (rounding of\n"
            "  D: rz toward zero, rz13 to 13 fraction bits, rne to nearest-even) extra (split-k,\n"
            "  group sizes, block scales, flushing).\n"
            "--format csv, json and md give every detail: engine kind shape k types arithmetic\n"
            "  frac d_rounding group split block scales subnormals specials note\n\n"
            "options (default in brackets):\n"
            "  --format F   table, csv, json or md [table]\n"
            "  -h, --help   this text\n\n"
            "examples:\n"
            "  fplab engines\n"
            "  fplab engines hopper:wgmma cdna3:mfma --format md\n");
}

static const cli_col cols[] = {
    {"engine", CLI_STR}, {"kind", CLI_STR},  {"shape", CLI_STR},      {"k", CLI_INT},
    {"types", CLI_STR},  {"arithmetic", CLI_STR}, {"frac", CLI_INT},   {"d_rounding", CLI_STR},
    {"group", CLI_INT},  {"split", CLI_INT}, {"block", CLI_INT},     {"scales", CLI_STR},
    {"subnormals", CLI_STR}, {"specials", CLI_STR}, {"note", CLI_STR},
};
enum { NCOLS = sizeof cols / sizeof cols[0] };

static void type_list(char *out, size_t len, const mm_engine_kind *q) {
    static const char *const names[MM_ET_COUNT] = {"fp64", "fp32", "tf32", "fp16", "bf16", "e4m3",
                                                   "e5m2", "e3m2", "e2m3", "e2m1", "e4m3fnuz", "e5m2fnuz"};
    size_t n = 0;
    out[0] = 0;
    for (int t = 0; t < MM_ET_COUNT && n < len; t++)
        if (q->types & (1u << t)) n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "," : "", names[t]);
    if (!q->same_types && n < len) snprintf(out + n, len - n, " (mixed)");
}

static void add_row(cli_table *t, const mm_engine_kind *q) {
    static const char *const ops[] = {"fused", "fma", "pairwise", "amd-fused"};
    char types[120], dr[80];
    type_list(types, sizeof types, q);
    switch (q->op) {
    case MM_EOP_FUSED:
        snprintf(dr, sizeof dr, "f32: toward zero, %d fraction bits%s", q->out_frac, q->f16_out ? "; f16: nearest-even" : "");
        break;
    case MM_EOP_FMA: snprintf(dr, sizeof dr, "each fma to nearest-even"); break;
    case MM_EOP_PAIRWISE: snprintf(dr, sizeof dr, "each addition to nearest-even (float32)"); break;
    case MM_EOP_AMD_FUSED:
        snprintf(dr, sizeof dr, "group sum and C down (31/24 bits), D to nearest-even%s", q->two_stage ? "; two stages" : "");
        break;
    }
    cli_cell_str(t, mm_engine_name((size_t)q->engine));
    cli_cell_str(t, q->kind);
    cli_cell_str(t, q->shape);
    cli_cell_int(t, q->k);
    cli_cell_str(t, types);
    cli_cell_str(t, ops[q->op]);
    cli_cell_int(t, q->op == MM_EOP_FUSED || q->op == MM_EOP_AMD_FUSED ? q->frac : 0);
    cli_cell_str(t, dr);
    cli_cell_int(t, q->group);
    cli_cell_int(t, q->split);
    cli_cell_int(t, q->block);
    cli_cell_str(t, !q->block ? "-" : q->ue4m3_scales ? "ue4m3" : "ue8m0");
    cli_cell_str(t, q->flush ? "inputs flushed to +0, sums to signed 0"
                    : q->op == MM_EOP_FUSED ? "kept, unnormalized (the type's smallest exponent)"
                                            : "kept");
    cli_cell_str(t, q->op == MM_EOP_FUSED ? "NaN anywhere or inf-inf: canonical NaN; inf kept"
                                          : "as IEEE arithmetic gives them");
    cli_cell_str(t, q->note);
}

// --- the narrow table (at most 100 columns): one block per engine

static const cli_col short_cols[] = {
    {"kind", CLI_STR}, {"shape", CLI_STR}, {"k", CLI_INT}, {"types", CLI_STR},
    {"sum", CLI_STR},  {"d", CLI_STR},     {"extra", CLI_STR},
};
enum { NSHORT = sizeof short_cols / sizeof short_cols[0] };

// Operand types in AMD's and OCP's short names where the full list would be long.
static void short_types(char *out, size_t len, const mm_engine_kind *q) {
    static const char *const names[MM_ET_COUNT] = {"fp64", "fp32", "tf32", "fp16", "bf16", "e4m3",
                                                   "e5m2", "e3m2", "e2m3", "e2m1", "fp8", "bf8"};
    const unsigned f8f6f4 = MM_ET_E4M3 | MM_ET_E5M2 | MM_ET_E3M2 | MM_ET_E2M3 | MM_ET_E2M1;
    size_t n = 0;
    out[0] = 0;
    if ((q->types & f8f6f4) == f8f6f4) {
        n = (size_t)snprintf(out, len, "fp8,fp6,fp4");
    } else {
        for (int t = 0; t < MM_ET_COUNT && n < len; t++)
            if (q->types & (1u << t)) n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "," : "", names[t]);
    }
    if (!q->same_types && n < len) snprintf(out + n, len - n, " mixed");
}

static void add_short_row(cli_table *t, const mm_engine_kind *q) {
    static const char *const ops[] = {"fused", "fma", "pairwise", "amd-fused"};
    char types[64], sum[32], d[32], extra[64] = "";
    short_types(types, sizeof types, q);
    if (q->op == MM_EOP_FUSED || q->op == MM_EOP_AMD_FUSED) snprintf(sum, sizeof sum, "%s %d", ops[q->op], q->frac);
    else snprintf(sum, sizeof sum, "%s", ops[q->op]);
    if (q->op == MM_EOP_FUSED)
        snprintf(d, sizeof d, "%s%s", q->out_frac == 23 ? "rz" : "rz13", q->f16_out ? ", f16 rne" : "");
    else
        snprintf(d, sizeof d, "rne");
    size_t n = 0;
#define EXTRA(...) n += (size_t)snprintf(extra + n, sizeof extra - n, __VA_ARGS__)
    if (q->split > 1) EXTRA("split-k %d", q->split);
    if (q->group) EXTRA("%sgroups of %d", n ? ", " : "", q->group);
    if (q->block) EXTRA("%s%s/%d", n ? ", " : "", q->ue4m3_scales ? "ue4m3" : "ue8m0", q->block);
    if (q->flush) EXTRA("%sflush", n ? ", " : "");
    if (q->two_stage) EXTRA("%s2-stage", n ? ", " : "");
#undef EXTRA
    cli_cell_str(t, q->kind);
    cli_cell_str(t, q->shape);
    cli_cell_int(t, q->k);
    cli_cell_str(t, types);
    cli_cell_str(t, sum);
    cli_cell_str(t, d);
    cli_cell_str(t, n ? extra : "-");
}

int cmd_engines(int argc, char **argv) {
    static const struct option lo[] = {{"format", required_argument, 0, 'f'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    char *pos[argc + 1];
    int npos = cli_split_args(&argc, argv, lo, pos);
    cli_out out = CLI_OUT_TABLE;
    argv[0] = "fplab engines";
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        if (c == 'f') out = cli_parse_out(optarg, 0xF);
        else if (c == 'h') return help(stdout), 0;
        else cli_usage_error("engines");
    }
    for (int i = 0; i < npos; i++) {
        if (mm_engine_index(pos[i]) >= 0) continue;
        char all[300] = "", near[160] = "";
        fmt_suggest sg;
        fmt_suggest_init(&sg, pos[i]);
        for (size_t e = 0, n = 0; e < mm_engine_count(); e++) {
            n += (size_t)snprintf(all + n, n < sizeof all ? sizeof all - n : 0, " %s", mm_engine_name(e));
            fmt_suggest_try(&sg, mm_engine_name(e));
        }
        fmt_suggest_text(&sg, near, sizeof near);
        CLI_CHECK(false, "ENGINE '%s': not an engine; %sexpected one of%s", pos[i], near, all);
    }
    if (out == CLI_OUT_TABLE) {
        for (size_t e = 0, shown = 0; e < mm_engine_count(); e++) {
            bool want = npos == 0;
            for (int i = 0; i < npos; i++) want |= mm_engine_index(pos[i]) == (int)e;
            if (!want) continue;
            printf("%s%s\n", shown++ ? "\n" : "", mm_engine_name(e));
            cli_table t;
            cli_table_init(&t, short_cols, NSHORT);
            for (size_t r = 0; r < mm_engine_kind_count(); r++)
                if (mm_engine_kind_get(r)->engine == (int)e) add_short_row(&t, mm_engine_kind_get(r));
            cli_table_print(&t, out, stdout);
        }
        printf("\nfull detail (rounding, subnormals, specials, sources): --format csv, json or md\n");
        return 0;
    }
    cli_table t;
    cli_table_init(&t, cols, NCOLS);
    for (size_t r = 0; r < mm_engine_kind_count(); r++) {
        const mm_engine_kind *q = mm_engine_kind_get(r);
        bool want = npos == 0;
        for (int i = 0; i < npos; i++) want |= mm_engine_index(pos[i]) == q->engine;
        if (want) add_row(&t, q);
    }
    cli_table_print(&t, out, stdout);
    return 0;
}
