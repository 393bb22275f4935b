// bench_dist.c: the cost of fplab's gradient all-reduce (trainer/dist_wire.h) by message size
// and wire format: seconds per call, bytes each rank sends, and, on one rank, the time to encode
// and decode the values (what a packed format adds to the transfer), one thread per rank. Under `mpirun -np N` it
// measures N ranks; alone, one (the encode and decode only). --json prints one object per row for
// tools/project_comm.py, which fits the alpha-beta model of docs/results/dist-study.
// Benchmarks are not tests: they print tables and never fail on a timing.
//   mpirun -np 4 build/bench/bench_dist [--json] [--max-log2 N]
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/dist.h"
#include "trainer/dist_wire.h"
#include "util/fileio.h"

static const char *const formats[] = {"fp32", "bf16", "e4m3:tensor", "mxfp4", "nvfp4"};
enum { NFMT = sizeof formats / sizeof *formats, REPS = 7 };

int main(int argc, char **argv) {
    bool json = false;
    int max_log2 = 22;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--max-log2") && i + 1 < argc) max_log2 = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: [mpirun -np N] bench_dist [--json] [--max-log2 N (10..26, default 22)]\n");
            return 2;
        }
    }
    if (max_log2 < 10 || max_log2 > 26) max_log2 = 22;
    omp_set_num_threads(1);  // one thread per rank, as the study's ranks run (--threads 1)
    dist_world w;
    char msg[512];
    if (dist_init(&w, msg, sizeof msg) != DIST_OK) {
        fprintf(stderr, "bench_dist: %s\n", msg);
        return 1;
    }
    const size_t nmax = (size_t)1 << max_log2;
    float *x = malloc(nmax * sizeof *x), *y = malloc(nmax * sizeof *y);
    if (!x || !y) dist_abort(&w, "out of memory");
    for (size_t i = 0; i < nmax; i++) x[i] = (float)((i * 2654435761u) % 2001) * 1e-6f - 1e-3f;
    if (w.rank == 0 && !json)
        printf("# bench_dist: %d rank%s; best of %d; seconds per all-reduce (rank 0), bytes rank 0 sends, "
               "and the encode+decode of the values alone\n%-12s %10s %12s %12s %10s %12s\n",
               w.size, w.size > 1 ? "s" : "", REPS, "wire", "values", "bytes_sent", "seconds", "GB/s", "codec_ns/val");
    for (int f = 0; f < NFMT; f++) {
        dist_wire wire;
        if (dist_wire_parse(&wire, "--comm", formats[f], msg, sizeof msg) != DIST_OK) dist_abort(&w, msg);
        for (int lg = 10; lg <= max_log2; lg += 2) {
            const size_t n = (size_t)1 << lg, seg[2] = {0, n};
            dist_reducer d;
            const dist_reducer_opts o = {.wire = &wire, .n = n, .seg = seg, .nseg = 1};
            if (dist_reducer_init(&d, &w, &o, msg, sizeof msg) != DIST_OK)
                dist_abort(&w, msg);
            double best = 1e30, codec = 1e30, bytes = 0;
            for (int r = 0; r < REPS; r++) {
                memcpy(y, x, n * sizeof *y);
                d.tel = (dist_comm_tel){0};
                dist_barrier(&w);
                const double t0 = fio_now();
                dist_allreduce_sum(&d, &w, y, 1, (uint64_t)r);
                const double t = fio_now() - t0;
                best = t < best ? t : best, bytes = d.tel.bytes;
                const double t1 = fio_now();
                dist_wire_round(&(dist_crossing){.w = &wire, .seg = seg, .nseg = 1, .seed = 1, .stream = (uint64_t)r}, y, x,
                                0, n, NULL);
                const double c = fio_now() - t1;
                codec = c < codec ? c : codec;
            }
            if (w.rank == 0) {
                if (json)
                    printf("{\"ranks\":%d,\"wire\":\"%s\",\"values\":%zu,\"bytes_sent\":%.0f,\"seconds\":%.9f,"
                           "\"codec_seconds\":%.9f}\n", w.size, formats[f], n, bytes, best, wire.active ? codec : 0.0);
                else
                    printf("%-12s %10zu %12.0f %12.6f %10.3f %12.3f\n", formats[f], n, bytes, best,
                           bytes / best * 1e-9, wire.active ? codec / (double)n * 1e9 : 0.0);
                fflush(stdout);
            }
            dist_reducer_free(&d);
        }
    }
    free(x), free(y);
    return 0;
}
