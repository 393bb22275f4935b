// bench_block.c: block quantization (fmt_quantize_f32: MX k=32 with e8m0 scales, NVFP4 k=16 with
// e4m3 scales under an fp32 tensor scale; NVFP4 and per-row e4m3 with exact quotients, the
// default, and with ":recip", the reciprocal multiply) against plain element rounding (fmt_round_f32, rne,
// saturating) of the same array in the same run, without and with statistics, on 1 and 2
// threads. A rows x cols float32 tensor (default 4096 x 4096) of mixed magnitudes, in place;
// each rep restores the input first (untimed); best of --reps. --cpu times the process's CPU
// time (all threads) instead of the wall clock: on a machine shared with other work the wall
// clock counts the time the threads waited for a core, the CPU time does not (it still counts
// their cache misses); the ratios then compare the work of the two calls.
// A benchmark, not a test: it prints a table and never fails on a timing.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"
#include "formats/scale.h"

typedef struct {
    const fmt_t *f;
    const fmt_scaling *sc;  // NULL: plain rounding
    bool stats;
    fmt_round_mode mode;
    float *x;
    const float *src;
    size_t rows, cols;
} job;

static void restore(void *ctx) {
    job *j = ctx;
    bu_copy_par(j->x, j->src, j->rows * j->cols * sizeof *j->x);
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void run(void *ctx);

// bu_best_ns on the process's CPU time.
static double best_cpu_ns(void *ctx, size_t n, int reps) {
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        restore(ctx);
        const double t0 = cpu_seconds();
        run(ctx);
        const double t = cpu_seconds() - t0;
        if (t < best) best = t;
    }
    return best * 1e9 / (double)n;
}

static void run(void *ctx) {
    job *j = ctx;
    fmt_stats st = {0};
    const fmt_round_opts o = {.overflow = FMT_SATURATE, .mode = j->mode};
    if (j->sc) fmt_quantize_f32(j->f, j->sc, j->x, j->x, j->rows, j->cols, &o, j->stats ? &st : NULL, NULL);
    else fmt_round_f32(j->f, j->x, j->rows * j->cols, &o, j->stats ? &st : NULL);
}

int main(int argc, char **argv) {
    size_t rows = 4096, cols = 4096;
    int reps = 5;
    bool cpu = false, plain_input = false;
    fmt_round_mode mode = FMT_RNE;
    for (int i = 1; i < argc; i++) {
        const bool more = i + 1 < argc;
        if (!strcmp(argv[i], "--cpu")) cpu = true;
        else if (!strcmp(argv[i], "--rows") && more) rows = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && more) cols = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && more) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--input") && more &&
                 (!strcmp(argv[i + 1], "mixed") || !strcmp(argv[i + 1], "plain")))
            plain_input = !strcmp(argv[++i], "plain");
        else if (!strcmp(argv[i], "--mode") && more && (!strcmp(argv[i + 1], "rne") || !strcmp(argv[i + 1], "sr")))
            mode = !strcmp(argv[++i], "sr") ? FMT_SR : FMT_RNE;
        else {
            fprintf(stderr, "usage: bench_block [--rows R] [--cols C] [--reps N] [--cpu] [--input mixed|plain] "
                            "[--mode rne|sr]   (default 4096 4096 5, wall clock, mixed, rne)\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (rows < 1 || cols < 1 || rows * cols > ((size_t)1 << 30) || reps < 1) {
        fprintf(stderr, "bench_block: expected 1 <= rows*cols <= 2^30 and reps >= 1\n");
        return 2;
    }
    const size_t n = rows * cols;
    float *src = malloc(n * sizeof *src), *x = malloc(n * sizeof *x);
    if (!src || !x) {
        fprintf(stderr, "bench_block: out of memory for %zu x %zu\n", rows, cols);
        return 1;
    }
    bu_make_input(src, n);
    if (plain_input) bu_plain_input(src, n);
    memcpy(x, src, n * sizeof *x);
    const struct {
        const char *elem, *recipe;
    } cases[] = {{"e4m3", "mx"},         {"e3m2", "mx"},       {"e2m1", "mx"},
                 {"e2m1", "nvfp4"},      {"e2m1", "nvfp4:recip"},  // exact quotient vs reciprocal multiply
                 {"e4m3", "row"},        {"e4m3", "row:recip"}};
    printf("bench_block: %zu x %zu float32 (%s input), rounding %s, best of %d reps, in place, %s; x plain = "
           "time over plain rounding's (same statistics, same threads)\n", rows, cols, plain_input ? "plain" : "mixed",
           mode == FMT_SR ? "sr" : "rne", reps, cpu ? "process CPU time (all threads)" : "wall clock");
    printf("%-6s %-11s %-6s %9s %9s %9s %9s\n", "elem", "recipe", "stats", "ns/el 1T", "ns/el 2T", "x plain1T",
           "x plain2T");
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        fmt_t f;
        fmt_scaling sc;
        char msg[160];
        if (fmt_from_name(&f, cases[ci].elem) != FMT_OK ||
            fmt_scaling_from_name(&sc, cases[ci].recipe, msg, sizeof msg) != FMT_OK) {
            fprintf(stderr, "bench_block: %s %s: %s\n", cases[ci].elem, cases[ci].recipe, msg);
            return 1;
        }
        for (int st = 0; st < 2; st++) {
            double plain[2], quant[2];
            for (int t = 0; t < 2; t++) {
                omp_set_num_threads(t + 1);
                job jp = {&f, NULL, st, mode, x, src, rows, cols}, jq = {&f, &sc, st, mode, x, src, rows, cols};
                plain[t] = cpu ? best_cpu_ns(&jp, n, reps) : bu_best_ns(run, restore, &jp, n, reps);
                quant[t] = cpu ? best_cpu_ns(&jq, n, reps) : bu_best_ns(run, restore, &jq, n, reps);
            }
            const char *yn = st ? "yes" : "no";
            printf("%-6s %-11s %-6s %9.3f %9.3f %9s %9s\n", f.name, "none", yn, plain[0], plain[1], "1.00", "1.00");
            printf("%-6s %-11s %-6s %9.3f %9.3f %9.2f %9.2f\n", f.name, cases[ci].recipe, yn, quant[0], quant[1],
                   quant[0] / plain[0], quant[1] / plain[1]);
            fflush(stdout);
        }
    }
    free(src), free(x);
    return 0;
}
