// bench_round.c: throughput of fmt_round_f32 (float32 -> every table format, every mode) on 1
// and 2 threads, beside two memory-bound baselines measured in the same run: a plain copy
// (memcpy into a second buffer, split over the threads) and an in-place read-modify-write
// (x[i] *= one, with one read through a volatile so it cannot be folded away).
// Rounding is in place: each rep re-copies the input from a pristine array, untimed, and only
// the fmt_round_f32 call is timed; the best of --reps reps is kept.
// A benchmark, not a test: it prints a table and never fails on a timing. It does exit non-zero
// when results differ between 1 and 2 threads (the library promises they do not).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/rng.h"
#include "formats/round.h"

static void usage(FILE *to) {
    fprintf(to,
            "usage: bench_round [--n LOG2] [--reps R] [--format NAME] [--mode MODE] [--csv]\n"
            "  --n LOG2     2^LOG2 float32 elements (default 24)\n"
            "  --reps R     best of R timed reps (default 5)\n"
            "  --format F   only format F (any name fmt_from_name accepts); default: the table\n"
            "  --mode M     only mode M (rne rna rtz rup rdn rto sr); default: all\n"
            "  --csv        machine-readable output\n");
}

// --- input: mixed magnitudes from the counter-based generator (seed fixed: runs compare)

static float u2f(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }

// Random sign and mantissa, exponent uniform over 2^-16 .. 2^16 (overflow for fp8/fp16, the
// subnormal ranges of fp8/fp6/fp4/fp16), and about 1/64 special values: zeros, infinities,
// NaNs, float32 subnormals and tiny normals (bf16/fp32 subnormal paths) and huge values.
static void make_input(float *x, size_t n) {
    const fmt_rng_key key = fmt_rng_make_key(20240601u, 0);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        uint32_t r = fmt_rng_u32(key, 2 * (uint64_t)i), r2 = fmt_rng_u32(key, 2 * (uint64_t)i + 1);
        uint32_t sign = r2 >> 31, man = r & 0x7fffffu, e;
        if ((r2 & 63) == 0) {
            switch ((r2 >> 6) & 7) {
            case 0: e = 0, man = 0; break;                   // +-0
            case 1: e = 255, man = 0; break;                 // +-inf
            case 2: e = 255, man |= 0x400000u; break;        // quiet NaN
            case 3: e = 0; break;                            // float32 subnormal
            case 4: e = 1 + ((r2 >> 9) % 24); break;         // tiny normal, 2^-126 .. 2^-103
            case 5: e = 230 + ((r2 >> 9) % 25); break;       // huge, 2^103 .. 2^127
            default: e = 127 - 40 + ((r2 >> 9) % 81); break; // wider spread, 2^-40 .. 2^40
            }
        } else {
            e = 127 - 16 + ((r2 >> 6) % 33);
        }
        x[i] = u2f(sign << 31 | e << 23 | man);
    }
}

// --- baselines, parallelised as fmt_round_f32 is (one slice per thread)

static void copy_par(float *restrict dst, const float *restrict src, size_t n) {
#pragma omp parallel
    {
        size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        size_t lo = n * t / nt, hi = n * (t + 1) / nt;
        memcpy(dst + lo, src + lo, (hi - lo) * sizeof *dst);
    }
}

static volatile float vol_one = 1.0f;

static void rmw_par(float *x, size_t n) {
    const float one = vol_one;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = x[i] * one;
}

// --- timing

typedef struct {
    const fmt_t *f;
    fmt_round_opts o;
    bool stats;
} job;

// Best of reps; each rep restores x from src first (untimed). kind: 0 round, 1 copy, 2 rmw.
static double time_best(int kind, const job *j, float *x, float *y, const float *src, size_t n,
                        int reps) {
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        copy_par(x, src, n);
        fmt_stats st = {0};
        double t0 = omp_get_wtime();
        if (kind == 0) fmt_round_f32(j->f, x, n, &j->o, j->stats ? &st : NULL);
        else if (kind == 1) copy_par(y, x, n);
        else rmw_par(x, n);
        double t = omp_get_wtime() - t0;
        if (t < best) best = t;
    }
    return best * 1e9 / (double)n;
}

static uint64_t checksum(const float *x, size_t n) {
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) h = (h ^ f2u(x[i])) * 0x100000001b3ull;
    return h;
}

int main(int argc, char **argv) {
    int log2n = 24, reps = 5;
    bool csv = false;
    const char *only_fmt = NULL, *only_mode = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool more = i + 1 < argc;
        if (!strcmp(a, "--n") && more) log2n = atoi(argv[++i]);
        else if (!strcmp(a, "--reps") && more) reps = atoi(argv[++i]);
        else if (!strcmp(a, "--format") && more) only_fmt = argv[++i];
        else if (!strcmp(a, "--mode") && more) only_mode = argv[++i];
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
    fmt_round_mode one_mode = FMT_RNE;
    if (only_mode && fmt_mode_from_name(&one_mode, only_mode) != FMT_OK) {
        fprintf(stderr, "bench_round: --mode '%s': expected one of rne rna rtz rup rdn rto sr\n", only_mode);
        return 2;
    }

    const size_t n = (size_t)1 << log2n;
    float *src = malloc(n * sizeof *src), *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!src || !x || !y) {
        fprintf(stderr, "bench_round: cannot allocate 3 x %zu MiB\n", n * sizeof *x >> 20);
        return 1;
    }
    make_input(src, n);
    memset(y, 0, n * sizeof *y);  // fault the pages in before timing the copy

    const int threads[2] = {1, 2};
    double copy_ns[2], rmw_ns[2];
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(threads[t]);
        copy_ns[t] = time_best(1, NULL, x, y, src, n, reps);
        rmw_ns[t] = time_best(2, NULL, x, y, src, n, reps);
    }
    if (csv) {
        printf("format,mode,stats,ns_1t,ns_2t,ratio_copy_2t,ratio_rmw_2t\n");
        printf("memcpy,-,0,%.4f,%.4f,1,%.4f\n", copy_ns[0], copy_ns[1], copy_ns[1] / rmw_ns[1]);
        printf("rmw,-,0,%.4f,%.4f,%.4f,1\n", rmw_ns[0], rmw_ns[1], rmw_ns[1] / copy_ns[1]);
    } else {
        printf("bench_round: n = 2^%d float32 (%zu MiB), best of %d reps, in place; max threads %d\n",
               log2n, n * sizeof *x >> 20, reps, omp_get_max_threads());
        printf("%-10s %-7s %9s %9s %10s %9s\n", "format", "mode", "ns/el 1T", "ns/el 2T", "x copy 2T",
               "x rmw 2T");
        printf("%-10s %-7s %9.3f %9.3f %10.2f %9.2f\n", "memcpy", "-", copy_ns[0], copy_ns[1], 1.0,
               copy_ns[1] / rmw_ns[1]);
        printf("%-10s %-7s %9.3f %9.3f %10.2f %9.2f\n", "rmw", "-", rmw_ns[0], rmw_ns[1],
               rmw_ns[1] / copy_ns[1], 1.0);
    }
    fflush(stdout);

    int bad = 0;
    const size_t nf = only_fmt ? 1 : fmt_table_count();
    for (size_t fi = 0; fi < nf; fi++) {
        const fmt_t *f = only_fmt ? &one_fmt : fmt_table_get(fi);
        // rne, then rne with statistics, then the other modes.
        for (int mi = -1; mi < FMT_NMODES; mi++) {
            const fmt_round_mode mode = mi < 0 ? FMT_RNE : (fmt_round_mode)mi;
            if (only_mode && mode != one_mode) continue;
            job j = {.f = f, .o = {.mode = mode, .seed = 1, .stream = 2}, .stats = mi < 0};
            double ns[2];
            uint64_t sum[2];
            for (int t = 0; t < 2; t++) {
                omp_set_num_threads(threads[t]);
                ns[t] = time_best(0, &j, x, y, src, n, reps);
                sum[t] = checksum(x, n);
            }
            if (sum[0] != sum[1]) {
                fprintf(stderr, "bench_round: %s %s: results differ between 1 and 2 threads\n",
                        f->name, fmt_mode_name(mode));
                bad = 1;
            }
            const char *mname = fmt_mode_name(mode);
            if (csv)
                printf("%s,%s,%d,%.4f,%.4f,%.4f,%.4f\n", f->name, mname, j.stats, ns[0], ns[1],
                       ns[1] / copy_ns[1], ns[1] / rmw_ns[1]);
            else
                printf("%-10s %-7s %9.3f %9.3f %10.2f %9.2f\n", f->name,
                       j.stats ? "rne+st" : mname, ns[0], ns[1], ns[1] / copy_ns[1], ns[1] / rmw_ns[1]);
            fflush(stdout);
        }
    }
    free(src), free(x), free(y);
    return bad;
}
