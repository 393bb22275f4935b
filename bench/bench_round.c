// bench_round.c: throughput of fmt_round_f32 (float32 -> every table format, every mode) on 1
// and 2 threads, beside memory-bound baselines and the CPU's own converters in the same run:
// - memcpy: a copy of the array into a second buffer, split over the threads;
// - rmw: an in-place read-modify-write (x[i] *= one, one read through a volatile);
// - hw-raw: vcvtneps2bf16 (bf16) and vcvtps2ph (fp16) and back, in place, without fplab's
//   fix-ups (so not fplab's results for NaN, subnormal inputs or saturation), where the CPU has
//   them: the floor of a rounding through the converters.
// Rounding is in place: each rep re-copies the input from a pristine array, untimed, and only
// the fmt_round_f32 call is timed; the best of --reps reps is kept. Each row names the path the
// call took (--paths all: every path this build and CPU have, one row each).
// A benchmark, not a test: it prints a table and never fails on a timing. It does exit non-zero
// when results differ between 1 and 2 threads, or between paths (the library promises neither).
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "formats/isa_targets.h"
// Target attributes (isa_targets.h) only where -march lacks the instructions.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512BF16__)
#define TARGET_V4_BF16
#define TARGET_V4_BF16_IN_ARCH true
#else
#define TARGET_V4_BF16 FMT_TARGET(FMT_ISA_V4 ",avx512bf16")
#define TARGET_V4_BF16_IN_ARCH false
#endif
#if defined(__AVX2__) && defined(__F16C__)
#define TARGET_V3
#define TARGET_V3_IN_ARCH true
#else
#define TARGET_V3 FMT_TARGET(FMT_ISA_V3)
#define TARGET_V3_IN_ARCH false
#endif
#endif

#include "bench/bench_util.h"
#include "formats/round.h"

static void usage(FILE *to) {
    fprintf(to,
            "usage: bench_round [--n LOG2] [--reps R] [--format NAME] [--mode MODE] [--paths P]\n"
            "                   [--csv]\n"
            "  --n LOG2     2^LOG2 float32 elements (default 24)\n"
            "  --reps R     best of R timed reps (default 5)\n"
            "  --format F   only format F (any name fmt_from_name accepts); default: the table\n"
            "  --mode M     only mode M (rne rna rtz rup rdn rto sr; rne+st is rne with statistics);\n"
            "               default: all\n"
            "  --paths P    auto (default: the path fmt_round_f32 picks), all (every path this build\n"
            "               and CPU have, a row each) or one of generic avx2 avx512 hw lean\n"
            "  --csv        machine-readable output\n");
}

// --- what a timed call does

typedef struct {
    const fmt_t *f;
    fmt_round_opts o;
    bool stats;
    float *x;
    const float *src;
    size_t n;
    void (*raw)(float *, size_t);  // a hw-raw row: this instead of fmt_round_f32
} job;

static void restore(void *ctx) {
    job *j = ctx;
    bu_copy_par(j->x, j->src, j->n * sizeof *j->x);
}

static void run_round(void *ctx) {
    job *j = ctx;
    fmt_stats st = {0};
    if (j->raw) j->raw(j->x, j->n);
    else fmt_round_f32(j->f, j->x, j->n, &j->o, j->stats ? &st : NULL);
}

typedef struct {
    float *x, *y;
    size_t n;
} arrays;

static void run_copy(void *ctx) {
    arrays *a = ctx;
    bu_copy_par(a->y, a->x, a->n * sizeof *a->x);
}

static void run_rmw(void *ctx) {
    arrays *a = ctx;
    bu_rmw_par(a->x, a->n);
}

// --- the converters without fix-ups (hw-raw rows)

#if defined(__x86_64__) && defined(__GNUC__)
TARGET_V4_BF16 static void raw_bf16(float *x, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n / 16; i++) {
        const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + 16 * i));
        _mm512_storeu_si512(x + 16 * i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
}

TARGET_V3 static void raw_fp16(float *x, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n / 8; i++) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + 8 * i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(x + 8 * i, _mm256_cvtph_ps(h));
    }
}

#if defined(__clang__)  // clang 14's __builtin_cpu_supports lacks f16c: what -march says
static bool have_raw_bf16(void) { return TARGET_V4_BF16_IN_ARCH; }
static bool have_raw_fp16(void) { return TARGET_V3_IN_ARCH; }
#else
static bool have_raw_bf16(void) {
    return __builtin_cpu_supports("x86-64-v4") && __builtin_cpu_supports("avx512bf16");
}
static bool have_raw_fp16(void) { return __builtin_cpu_supports("x86-64-v3"); }
#endif
#else
static void raw_bf16(float *x, size_t n) { (void)x, (void)n; }
static void raw_fp16(float *x, size_t n) { (void)x, (void)n; }
static bool have_raw_bf16(void) { return false; }
static bool have_raw_fp16(void) { return false; }
#endif

// --- one row: 1 and 2 threads, the checksums of both

typedef struct {
    double ns[2];
    uint64_t sum[2];
} row;

static row time_row(job *j, int reps) {
    row r;
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        r.ns[t] = bu_best_ns(run_round, restore, j, j->n, reps);
        r.sum[t] = bu_checksum(j->x, j->n * sizeof *j->x);
    }
    return r;
}

static void print_row(bool csv, const char *fmt, const char *mode, const char *path, const row *r,
                      const double copy_ns[2], double sr_ratio) {
    if (csv) {
        printf("%s,%s,%s,%.4f,%.4f,%.4f,%.4f,%.4f\n", fmt, mode, path, r->ns[0], r->ns[1],
               r->ns[0] / copy_ns[0], r->ns[1] / copy_ns[1], sr_ratio);
    } else {
        printf("%-10s %-7s %-8s %9.3f %9.3f %9.2f %9.2f", fmt, mode, path, r->ns[0], r->ns[1],
               r->ns[0] / copy_ns[0], r->ns[1] / copy_ns[1]);
        if (sr_ratio > 0) printf(" %8.2f", sr_ratio);
        printf("\n");
    }
    fflush(stdout);
}

int main(int argc, char **argv) {
    int log2n = 24, reps = 5;
    bool csv = false;
    const char *only_fmt = NULL, *only_mode = NULL, *paths = "auto";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool more = i + 1 < argc;
        if (!strcmp(a, "--n") && more) log2n = atoi(argv[++i]);
        else if (!strcmp(a, "--reps") && more) reps = atoi(argv[++i]);
        else if (!strcmp(a, "--format") && more) only_fmt = argv[++i];
        else if (!strcmp(a, "--mode") && more) only_mode = argv[++i];
        else if (!strcmp(a, "--paths") && more) paths = argv[++i];
        else if (!strcmp(a, "--csv")) csv = true;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        else {
            fprintf(stderr, "bench_round: unknown or incomplete option '%s'\n", a);
            return usage(stderr), 2;
        }
    }
    if (log2n < 10 || log2n > 30) {
        fprintf(stderr, "bench_round: --n %d: expected a log2 size in 10..30\n", log2n);
        return 2;
    }
    if (reps < 1) {
        fprintf(stderr, "bench_round: --reps %d: expected at least 1\n", reps);
        return 2;
    }
    fmt_t one_fmt;
    if (only_fmt && fmt_from_name(&one_fmt, only_fmt) != FMT_OK) {
        fprintf(stderr, "bench_round: --format '%s' is not a known format (see fplab finfo)\n", only_fmt);
        return 2;
    }
    const bool mode_st = only_mode && !strcmp(only_mode, "rne+st");
    fmt_round_mode one_mode = FMT_RNE;
    if (only_mode && !mode_st && fmt_mode_from_name(&one_mode, only_mode) != FMT_OK) {
        fprintf(stderr, "bench_round: --mode '%s': expected one of rne rna rtz rup rdn rto sr rne+st\n",
                only_mode);
        return 2;
    }
    const bool all_paths = !strcmp(paths, "all");
    fmt_round_path one_path = FMT_PATH_AUTO;
    if (!all_paths && fmt_path_from_name(&one_path, paths) != FMT_OK) {
        fprintf(stderr, "bench_round: --paths '%s': expected auto, all or one of generic avx2 avx512 "
                "hw lean\n", paths);
        return 2;
    }

    const size_t n = (size_t)1 << log2n;
    float *src = malloc(n * sizeof *src), *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!src || !x || !y) {
        fprintf(stderr, "bench_round: cannot allocate 3 x %zu MiB\n", n * sizeof *x >> 20);
        return 1;
    }
    bu_make_input(src, n);
    memcpy(x, src, n * sizeof *x);
    memset(y, 0, n * sizeof *y);  // fault the pages in before timing the copy

    double copy_ns[2], rmw_ns[2];
    arrays arr = {x, y, n};
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        copy_ns[t] = bu_best_ns(run_copy, NULL, &arr, n, reps);
        rmw_ns[t] = bu_best_ns(run_rmw, NULL, &arr, n, reps);
    }
    if (csv) {
        printf("format,mode,path,ns_1t,ns_2t,ratio_copy_1t,ratio_copy_2t,sr_over_rne_2t\n");
    } else {
        printf("bench_round: n = 2^%d float32 (%zu MiB), best of %d reps, in place; x copy = time over "
               "memcpy's on as many threads\n", log2n, n * sizeof *x >> 20, reps);
        printf("%-10s %-7s %-8s %9s %9s %9s %9s %8s\n", "format", "mode", "path", "ns/el 1T", "ns/el 2T",
               "x copy 1T", "x copy 2T", "sr/rne");
    }
    const row rcopy = {{copy_ns[0], copy_ns[1]}, {0, 0}}, rrmw = {{rmw_ns[0], rmw_ns[1]}, {0, 0}};
    print_row(csv, "memcpy", "-", "-", &rcopy, copy_ns, 0);
    print_row(csv, "rmw", "-", "-", &rrmw, copy_ns, 0);

    int bad = 0;
    const size_t nf = only_fmt ? 1 : fmt_table_count();
    for (size_t fi = 0; fi < nf; fi++) {
        const fmt_t *f = only_fmt ? &one_fmt : fmt_table_get(fi);
        double rne_ns = 0;
        // rne, then rne with statistics, then the other modes.
        for (int mi = -1; mi < FMT_NMODES; mi++) {
            const fmt_round_mode mode = mi < 0 ? FMT_RNE : (fmt_round_mode)mi;
            const bool stats = mi < 0;
            if (only_mode && (mode_st != stats || (!mode_st && mode != one_mode))) continue;
            const char *mname = stats ? "rne+st" : fmt_mode_name(mode);
            uint64_t ref_sum = 0;
            bool have_ref = false;
            for (int p = 0; p < FMT_NPATHS; p++) {
                if (all_paths ? p == FMT_PATH_AUTO : p != (int)one_path) continue;
                job j = {.f = f, .o = {.mode = mode, .seed = 1, .stream = 2, .path = (fmt_round_path)p},
                         .stats = stats, .x = x, .src = src, .n = n};
                if (!fmt_path_available(j.o.path, f, &j.o, stats)) continue;
                // fp64 and wider: every float32 is a value, so only statistics do any work.
                if (!fmt_embeds_in_f32(f) && fmt_contains_f32(f) && !stats) continue;
                const fmt_round_path took = fmt_path_chosen(f, &j.o, stats);
                const row r = time_row(&j, reps);
                if (r.sum[0] != r.sum[1]) {
                    fprintf(stderr, "bench_round: %s %s path %s: results differ between 1 and 2 threads\n",
                            f->name, mname, fmt_path_name(took));
                    bad = 1;
                }
                if (have_ref && r.sum[0] != ref_sum) {
                    fprintf(stderr, "bench_round: %s %s: path %s differs from the first path\n", f->name,
                            mname, fmt_path_name(took));
                    bad = 1;
                }
                ref_sum = r.sum[0], have_ref = true;
                if (mode == FMT_RNE && !stats && (p == FMT_PATH_AUTO || !rne_ns)) rne_ns = r.ns[1];
                const double ratio = mode == FMT_SR && rne_ns > 0 ? r.ns[1] / rne_ns : 0;
                print_row(csv, f->name, mname, fmt_path_name(took), &r, copy_ns, ratio);
            }
        }
        // The converters without fix-ups, beside fplab's rne rows of their formats.
        const bool want_rne = !only_mode || (!mode_st && one_mode == FMT_RNE);
        const bool is_bf16 = f->bits == 16 && f->ebits == 8, is_fp16 = f->bits == 16 && f->ebits == 5;
        if (want_rne && ((is_bf16 && have_raw_bf16()) || (is_fp16 && have_raw_fp16()))) {
            job j = {.f = f, .x = x, .src = src, .n = n, .raw = is_bf16 ? raw_bf16 : raw_fp16};
            const row r = time_row(&j, reps);
            print_row(csv, f->name, "rne", "hw-raw", &r, copy_ns, 0);
        }
    }
    free(src), free(x), free(y);
    return bad;
}
