// bench_codec.c: throughput of the codes functions on 1 and 2 threads: fmt_encode_f32 (rne,
// without and with statistics), fmt_decode_f32, and fmt_pack/fmt_unpack of the sub-byte formats,
// for every table format up to 32 bits, against a memcpy that moves as many bytes in the same
// run: an operation that reads R and writes W bytes per element is compared with a copy of
// (R + W) / 2 bytes per element (which reads and writes that much), split over the threads.
// Best of --reps; the output buffers are written once before timing (no first-touch faults).
// A benchmark, not a test: it prints a table and never fails on a timing. It does exit non-zero
// when results differ between 1 and 2 threads.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "formats/codec.h"

static void usage(FILE *to) {
    fprintf(to, "usage: bench_codec [--n LOG2] [--reps R] [--format NAME] [--csv]\n"
                "  --n LOG2     2^LOG2 elements (default 24)\n"
                "  --reps R     best of R timed reps (default 5)\n"
                "  --format F   only format F; default: the table (up to 32 bits)\n"
                "  --csv        machine-readable output\n");
}

typedef enum { OP_ENCODE, OP_ENCODE_ST, OP_DECODE, OP_PACK, OP_UNPACK, OP_COPY } op_kind;
static const char *const op_names[] = {"encode", "encode+st", "decode", "pack", "unpack", "memcpy"};

typedef struct {
    op_kind op;
    const fmt_t *f;
    const float *x;  // input values
    float *y;        // decoded values
    uint8_t *codes, *packed;
    size_t n;
    uint8_t *cp_dst;  // OP_COPY: cp_bytes from cp_src
    const uint8_t *cp_src;
    size_t cp_bytes;
} job;

static void run(void *ctx) {
    job *j = ctx;
    const fmt_round_opts o = {0};
    fmt_stats st = {0};
    switch (j->op) {
    case OP_ENCODE: fmt_encode_f32(j->f, j->codes, j->x, j->n, &o, NULL); break;
    case OP_ENCODE_ST: fmt_encode_f32(j->f, j->codes, j->x, j->n, &o, &st); break;
    case OP_DECODE: fmt_decode_f32(j->f, j->y, j->codes, j->n); break;
    case OP_PACK: fmt_pack(j->f, j->packed, j->codes, j->n); break;
    case OP_UNPACK: fmt_unpack(j->f, j->codes, j->packed, j->n); break;
    case OP_COPY: bu_copy_par(j->cp_dst, j->cp_src, j->cp_bytes); break;
    }
}

// What op reads and writes per element, in bytes.
static double op_bytes(op_kind op, const fmt_t *f) {
    const double code = (double)fmt_code_bytes(f), packed = f->bits < 8 ? f->bits / 8.0 : code;
    switch (op) {
    case OP_ENCODE: case OP_ENCODE_ST: case OP_DECODE: return 4 + code;
    case OP_PACK: case OP_UNPACK: return code + packed;
    default: return 0;
    }
}

int main(int argc, char **argv) {
    int log2n = 24, reps = 5;
    bool csv = false;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool more = i + 1 < argc;
        if (!strcmp(a, "--n") && more) log2n = atoi(argv[++i]);
        else if (!strcmp(a, "--reps") && more) reps = atoi(argv[++i]);
        else if (!strcmp(a, "--format") && more) only = argv[++i];
        else if (!strcmp(a, "--csv")) csv = true;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        else {
            fprintf(stderr, "bench_codec: unknown or incomplete option '%s'\n", a);
            return usage(stderr), 2;
        }
    }
    if (log2n < 10 || log2n > 30 || reps < 1) {
        fprintf(stderr, "bench_codec: expected --n in 10..30 and --reps >= 1\n");
        return 2;
    }
    fmt_t one;
    if (only && fmt_from_name(&one, only) != FMT_OK) {
        fprintf(stderr, "bench_codec: --format '%s' is not a known format (see fplab finfo)\n", only);
        return 2;
    }
    const size_t n = (size_t)1 << log2n;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint8_t *codes = malloc(4 * n), *packed = malloc(4 * n), *cp = malloc(8 * n);
    if (!x || !y || !codes || !packed || !cp) {
        fprintf(stderr, "bench_codec: out of memory for 2^%d elements\n", log2n);
        return 1;
    }
    bu_make_input(x, n);
    memset(y, 0, n * sizeof *y), memset(codes, 0, 4 * n), memset(packed, 0, 4 * n), memset(cp, 0, 8 * n);

    if (csv) printf("format,op,bytes_per_el,ns_1t,ns_2t,copy_ns_1t,copy_ns_2t,ratio_1t,ratio_2t\n");
    else {
        printf("bench_codec: n = 2^%d, best of %d reps; copy = memcpy of (read + written) / 2 bytes per "
               "element, ratio = time / copy's\n", log2n, reps);
        printf("%-10s %-10s %6s %9s %9s %9s %9s %8s %8s\n", "format", "op", "B/el", "ns/el 1T", "ns/el 2T",
               "copy 1T", "copy 2T", "x cp 1T", "x cp 2T");
    }
    int bad = 0;
    const size_t nf = only ? 1 : fmt_table_count();
    for (size_t fi = 0; fi < nf; fi++) {
        const fmt_t *f = only ? &one : fmt_table_get(fi);
        if (f->bits > 32) continue;
        for (int op = OP_ENCODE; op <= OP_UNPACK; op++) {
            if ((op == OP_PACK || op == OP_UNPACK) && f->bits >= 8) continue;  // a memcpy
            const double bytes = op_bytes((op_kind)op, f);
            job j = {.op = (op_kind)op, .f = f, .x = x, .y = y, .codes = codes, .packed = packed, .n = n};
            const size_t cb = (size_t)(bytes / 2 * (double)n);
            job c = {.op = OP_COPY, .cp_dst = cp + 4 * n, .cp_src = cp, .cp_bytes = cb};
            double ns[2], cns[2];
            uint64_t sum[2];
            for (int t = 0; t < 2; t++) {
                omp_set_num_threads(t + 1);
                // the inputs of decode, pack and unpack: the codes of x (and their packing)
                fmt_encode_f32(f, codes, x, n, &(fmt_round_opts){0}, NULL);
                fmt_pack(f, packed, codes, n);
                ns[t] = bu_best_ns(run, NULL, &j, n, reps);
                cns[t] = bu_best_ns(run, NULL, &c, n, reps);
                sum[t] = op == OP_DECODE ? bu_checksum(y, n * sizeof *y)
                       : op == OP_PACK   ? bu_checksum(packed, fmt_packed_bytes(f, n))
                                         : bu_checksum(codes, n * fmt_code_bytes(f));
            }
            if (sum[0] != sum[1]) {
                fprintf(stderr, "bench_codec: %s %s: results differ between 1 and 2 threads\n", f->name,
                        op_names[op]);
                bad = 1;
            }
            if (csv)
                printf("%s,%s,%.3f,%.4f,%.4f,%.4f,%.4f,%.3f,%.3f\n", f->name, op_names[op], bytes, ns[0],
                       ns[1], cns[0], cns[1], ns[0] / cns[0], ns[1] / cns[1]);
            else
                printf("%-10s %-10s %6.2f %9.3f %9.3f %9.3f %9.3f %8.2f %8.2f\n", f->name, op_names[op],
                       bytes, ns[0], ns[1], cns[0], cns[1], ns[0] / cns[0], ns[1] / cns[1]);
            fflush(stdout);
        }
    }
    free(x), free(y), free(codes), free(packed), free(cp);
    return bad;
}
