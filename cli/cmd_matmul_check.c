// cmd_matmul_check.c: `fplab matmul-check`: random operands quantized with a recipe, one scaled
// matmul on a backend (cpu or cuda) and on mm_ref, and the backend's error against the exact
// value (mm_ref_exact): max and median in ulps of the output format, relative error, and
// - fp32 accumulation: the count of results outside |err| <= gamma_{K+2} * absdot + half an ulp
//   of the output format at the value (gamma_n = n u / (1 - n u); u = 2^-24, or for the cuda
//   backend the u of the path it takes, from mm_cuda_choose);
// - emulated accumulators: the count of results that differ from mm_ref in any bit.
// Exit status: 0 all within the bound (or all equal to ref), 1 otherwise, 2 bad input, 3 no GPU
// for --backend cuda.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "trainer/fileio.h"
#include "formats/scale.h"
#include "kernels/mm_operand.h"
#include "kernels/scaled_mm.h"

enum { EXIT_NO_GPU = 3 };

static void help(FILE *fp) {
    fprintf(fp,
            "usage: fplab matmul-check --a FORMAT --b FORMAT [--out FORMAT] [--m M] [--n N] [--k K]\n"
            "                          [--scale RECIPE] [--acc SPEC] [--backend cpu|cuda] [--seed S]\n"
            "                          [--dist D] [--format table|json]\n\n"
            "Draws A (M x K) and B (K x N) from distribution D, quantizes them to their formats\n"
            "with the scaling RECIPE (tiles along K: A gets the recipe's tile, B its transpose;\n"
            "elements round to nearest-even and saturate at the format's max),\n"
            "computes C = A B rounded to the output format with the backend and with mm_ref\n"
            "(MPFR), and compares both with the exact product (mm_ref_exact):\n"
            "  err_ulp = |C - exact| / ulp_out(exact),  ulp_out(e) = 2^(max(floor(log2|e|), emin) - mbits)\n"
            "  fp32 accumulation: bound |C - exact| <= gamma_{K+2} * sum_k|a b s| + ulp_out/2,\n"
            "                     gamma_n = n u / (1 - n u), u = 2^-24 (Higham); on cuda, the u of\n"
            "                     the path taken (tensor cores 2^-23, fp8 cuBLASLt 2^-13)\n"
            "  emulated accumulator: the backend must equal mm_ref bit for bit.\n\n"
            "options (default in brackets):\n"
            "  --m, --n, --k N   sizes, each [64]\n"
            "  --a, --b FORMAT   element formats of A and B: e4m3, e5m2, e2m1, bf16, ..., or a scheme\n"
            "                    (mxfp8, mxfp4, nvfp4, ...: its element format, and its recipe unless\n"
            "                    --scale is given) (required)\n"
            "  --out FORMAT      output format of C [fp32]\n"
            "  --scale RECIPE    none, tensor, row, mx, nvfp4, block:K:SCALEFMT, tile:RxC:SCALEFMT\n"
            "                    (see 'fplab quantize --help') [none]\n"
            "  --acc SPEC        fp32, bf16, fp16, mNN (NN fraction bits, fp32 range), with an\n"
            "                    optional :promote=N (e.g. m13:promote=128) and :rtz/...; or a\n"
            "                    matrix engine ARCH:INSTR (hopper:wgmma, cdna3:mfma, ...: fplab\n"
            "                    engines) [fp32]\n"
            "  --backend B       cpu or cuda (FPLAB_CUDA_KERNEL=auto|cublaslt|tc|simt picks its\n"
            "                    path; the table names the one taken) [cpu]\n"
            "  --seed S          random operands; A draws stream 1, B stream 2 [0]\n"
            "  --dist D          normal, uniform (U[-1,1)), lognormal (random sign times\n"
            "                    exp(N(0,1))), outliers (normal; 1 element in 128 times 1000) [normal]\n"
            "  --format F        table or json (numbers: the shortest text that reads back) [table]\n"
            "  -h, --help        this text\n\n"
            "exit status: 0 every result within the bound (fp32 accumulation) or equal to mm_ref\n"
            "(emulated), 1 otherwise, 2 bad input, 3 --backend cuda without a usable GPU.\n\n"
            "examples:\n"
            "  build/fplab matmul-check --m 64 --n 64 --k 512 --a e4m3 --b e4m3 --out bf16 --scale mx\n"
            "  build/fplab matmul-check --m 64 --n 64 --k 512 --a e2m1 --b e2m1 --out fp32 --scale nvfp4\n"
            "  # a 13-bit accumulator as in fp8 tensor cores, promoted to fp32 every 128 products (bit-exact vs MPFR)\n"
            "  build/fplab matmul-check --m 16 --n 16 --k 4096 --a e4m3 --b e4m3 --scale tensor --acc m13:promote=128\n"
            "  build/fplab matmul-check --a e4m3 --b e5m2 --scale row --dist outliers --format json\n");
}

static const char *mm_status_name(int st) {
    switch (st) {
    case MM_OK: return "ok";
    case MM_EINVAL: return "invalid argument";
    case MM_ENOMEM: return "out of memory";
    case MM_ENODEV: return "no device";
    case MM_EUNSUPPORTED: return "unsupported";
    default: return "unknown status";
    }
}

// A kernels/ call that failed after validation: not the user's doing; exit 1.
#define MM_CHECK(call, hint)                                                                       \
    do {                                                                                           \
        int mm_st_ = (call);                                                                       \
        if (mm_st_ != MM_OK) {                                                                     \
            fprintf(stderr, "fplab: %s:%d: %s returned %d (%s); %s\n", __FILE__, __LINE__, #call, \
                    mm_st_, mm_status_name(mm_st_), hint);                                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Median of v[0..n) (sorted in place); NaN when n is 0.
static double median(double *v, size_t n) {
    if (!n) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static bool same_bits(float a, float b) {
    if (isnan(a) && isnan(b)) return true;
    uint32_t ua, ub;
    memcpy(&ua, &a, 4), memcpy(&ub, &b, 4);
    return ua == ub;
}

typedef struct {
    const char *name;
    double time_s;
    double max_ulp, med_ulp, max_rel, med_rel;
    size_t outside;     // fp32 accumulation: outside the bound
    size_t mismatches;  // emulated: bits differ from mm_ref
    size_t overflow;    // exact value beyond the output format's overflow threshold: no error
                        // bound holds there (ref too is +-max or inf/NaN); left out of the rest
} result;

// Errors of C against exact; outside counts the bound violations (gamma_n from the unit
// roundoff u of the accumulation).
static void evaluate(result *r, const float *C, const float *Cref, const double *exact, const double *absdot,
                     size_t n, size_t K, double u, const fmt_t *out, bool emulated, double *scratch) {
    const double nu = (double)(K + 2) * u;
    const double gamma = nu < 1.0 ? nu / (1.0 - nu) : INFINITY;
    double *rel = scratch + n;
    size_t nrel = 0;
    // Round-to-nearest overflows at max + half an ulp of max.
    const double top = out->max + 0.5 * fmt_ulp(out, out->max);
    size_t m = 0;
    r->max_ulp = 0, r->max_rel = 0, r->outside = 0, r->mismatches = 0, r->overflow = 0;
    for (size_t i = 0; i < n; i++) {
        if (emulated) r->mismatches += !same_bits(C[i], Cref[i]);
        const double e = exact[i], c = C[i];
        if (!(fabs(e) < top)) {
            r->overflow++;
            continue;
        }
        const double err = isnan(c) ? INFINITY : fabs(c - e);
        scratch[m] = err / fmt_ulp(out, e);
        if (scratch[m] > r->max_ulp || isnan(scratch[m])) r->max_ulp = scratch[m];
        m++;
        if (e != 0.0) {
            rel[nrel] = err / fabs(e);
            if (rel[nrel] > r->max_rel) r->max_rel = rel[nrel];
            nrel++;
        } else if (err != 0.0) {
            r->max_rel = INFINITY;
        }
        if (!emulated) {
            const double half_ulp = 0.5 * fmt_ulp(out, fmax(fabs(e), fabs(c)));
            if (!(err <= gamma * absdot[i] + half_ulp)) r->outside++;
        }
    }
    r->med_ulp = median(scratch, m);
    r->med_rel = median(rel, nrel);
}

// A number as the shortest text that reads back (cli_fmt_double); inf and nan as strings.
static void json_num(const char *key, double v, bool comma) {
    char b[CLI_DOUBLE_MAX];
    cli_fmt_double(b, sizeof b, v);
    printf(isfinite(v) ? "\"%s\": %s%s" : "\"%s\": \"%s\"%s", key, b, comma ? ", " : "");
}

// --- the command, in steps: options, operands, the backends, the printout

typedef struct {
    size_t M, N, K;
    const char *a_name, *b_name, *out_name, *scale, *acc_spec, *backend, *dist_name;
    uint64_t seed;
    cli_out outfmt;
    bool use_cuda, emulated;
    fmt_t fa, fb;
    mm_opts o;
    fmt_scaling sc;
    mm_dist dist;
    char sname[96], acc_desc[128];
} check_cfg;

// Parses and validates the options (dies on bad input); returns false after --help.
static bool parse_options(check_cfg *k, int argc, char **argv) {
    static const struct option lo[] = {
        {"m", required_argument, 0, 'M'},       {"n", required_argument, 0, 'N'},
        {"k", required_argument, 0, 'K'},       {"a", required_argument, 0, 'a'},
        {"b", required_argument, 0, 'b'},       {"out", required_argument, 0, 'o'},
        {"scale", required_argument, 0, 'S'},   {"acc", required_argument, 0, 'c'},
        {"backend", required_argument, 0, 'B'}, {"seed", required_argument, 0, 's'},
        {"dist", required_argument, 0, 'd'},    {"format", required_argument, 0, 'f'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    char *pos[argc + 1];
    int npos = cli_split_args(&argc, argv, lo, pos);
    argv[0] = "fplab matmul-check";
    *k = (check_cfg){.M = 64, .N = 64, .K = 64, .out_name = "fp32", .scale = "none", .acc_spec = "fp32",
                     .backend = "cpu", .dist_name = "normal", .outfmt = CLI_OUT_TABLE};
    bool scale_given = false;
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        switch (c) {
        case 'M': k->M = (size_t)cli_parse_long(optarg, "--m", 1, 1L << 20); break;
        case 'N': k->N = (size_t)cli_parse_long(optarg, "--n", 1, 1L << 20); break;
        case 'K': k->K = (size_t)cli_parse_long(optarg, "--k", 1, 1L << 24); break;
        case 'a': k->a_name = optarg; break;
        case 'b': k->b_name = optarg; break;
        case 'o': k->out_name = optarg; break;
        case 'S': k->scale = optarg, scale_given = true; break;
        case 'c': k->acc_spec = optarg; break;
        case 'B': k->backend = optarg; break;
        case 's': k->seed = cli_parse_u64(optarg, "--seed"); break;
        case 'd': k->dist_name = optarg; break;
        case 'f': k->outfmt = cli_parse_out(optarg, 1u << CLI_OUT_TABLE | 1u << CLI_OUT_JSON); break;
        case 'h': help(stdout); return false;
        default: cli_usage_error("matmul-check");
        }
    }
    CLI_CHECK(npos == 0, "matmul-check: unexpected argument '%s'; every input is an option (see "
              "'fplab matmul-check --help')", pos[0]);
    CLI_CHECK(k->a_name && k->b_name, "matmul-check: --a FORMAT and --b FORMAT are required (e.g. --a e4m3 --b e4m3)");
    CLI_CHECK(k->M * k->N <= (1u << 24) && k->M * k->K <= (1u << 28) && k->K * k->N <= (1u << 28),
              "matmul-check: %zu x %zu x %zu is too large for a check against MPFR; expected M*N <= 2^24 "
              "and M*K, K*N <= 2^28", k->M, k->N, k->K);
    k->use_cuda = !strcmp(k->backend, "cuda");
    CLI_CHECK(k->use_cuda || !strcmp(k->backend, "cpu"), "--backend '%s': expected cpu or cuda", k->backend);
    CLI_CHECK(mm_dist_from_name(&k->dist, k->dist_name) == MM_OK,
              "--dist '%s': expected normal, uniform, lognormal or outliers", k->dist_name);
    mm_opts_default(&k->o);
    // A scheme (--a mxfp4) gives the element format and, unless --scale says otherwise, its
    // recipe; two schemes must agree on it.
    const char *ra = cli_parse_elem(&k->fa, k->a_name, "--a"), *rb = cli_parse_elem(&k->fb, k->b_name, "--b");
    CLI_CHECK(scale_given || !ra || !rb || !strcmp(ra, rb), "matmul-check: --a %s and --b %s use the recipes %s "
              "and %s; expected one --scale for both", k->a_name, k->b_name, ra, rb);
    if (!scale_given && (ra || rb)) k->scale = ra ? ra : rb;
    cli_parse_format(&k->o.out_fmt, k->out_name, "--out");
    const struct { const fmt_t *f; const char *opt, *name, *what; } held[] = {
        {&k->fa, "--a", k->a_name, "operands are held in float32"},
        {&k->fb, "--b", k->b_name, "operands are held in float32"},
        {&k->o.out_fmt, "--out", k->out_name, "C is float32"}};
    for (int i = 0; i < 3; i++)
        CLI_CHECK(fmt_values_fit_f32(held[i].f),
                  "%s '%s': %s; expected a format of float32 or narrower", held[i].opt, held[i].name, held[i].what);
    char msg[512];
    CLI_CHECK(fmt_scaling_from_name(&k->sc, k->scale, msg, sizeof msg) == FMT_OK, "--scale: %s",
              msg[0] ? msg : "unknown recipe");
    CLI_CHECK(mm_acc_from_name(&k->o.acc, k->acc_spec, msg, sizeof msg) == MM_OK, "--acc: %s",
              msg[0] ? msg : "unknown accumulator; expected fp32, bf16, fp16 or mNN[:promote=N]");
    k->emulated = mm_acc_is_emulated(&k->o.acc);
    fmt_scaling_name(&k->sc, k->sname, sizeof k->sname);
    const mm_acc *acc = &k->o.acc;
    char an[80];
    if (acc->engine)
        snprintf(k->acc_desc, sizeof k->acc_desc, "%s (engine)", mm_acc_name(acc, an, sizeof an));
    else if (k->emulated && acc->promote_every > 0)
        snprintf(k->acc_desc, sizeof k->acc_desc, "%s promote=%d round=%s", acc->fmt.name, acc->promote_every,
                 fmt_mode_name(acc->mode));
    else if (k->emulated)
        snprintf(k->acc_desc, sizeof k->acc_desc, "%s round=%s", acc->fmt.name, fmt_mode_name(acc->mode));
    else
        snprintf(k->acc_desc, sizeof k->acc_desc, "%s (float32)", acc->fmt.name);
    return true;
}

// Random A and B quantized to their formats. Elements round to nearest-even and saturate
// (satfinite), as MX/NVFP4/fp8 casts do: an OCP scale can put the top of a block above the
// element format's max.
static void make_operands(mm_qmat *qa, mm_qmat *qb, const check_cfg *k) {
    const size_t M = k->M, N = k->N, K = k->K;
    float *xa = malloc(M * K * sizeof *xa), *xb = malloc(K * N * sizeof *xb);
    CLI_CHECK_LIB(xa && xb ? 0 : FMT_ENOMEM, "the operands do not fit in memory");
    mm_random_f32(xa, M * K, k->dist, k->seed, 1);
    mm_random_f32(xb, K * N, k->dist, k->seed, 2);
    const fmt_round_opts qo = {.mode = FMT_RNE, .overflow = FMT_SATURATE};
    CLI_CHECK(mm_qmat_from_f32(qa, MM_SIDE_A, xa, M, K, &k->fa, &k->sc, &qo) == MM_OK,
              "matmul-check: --scale '%s' cannot quantize A (%zu x %zu) to %s", k->sname, M, K, k->fa.name);
    CLI_CHECK(mm_qmat_from_f32(qb, MM_SIDE_B, xb, K, N, &k->fb, &k->sc, &qo) == MM_OK,
              "matmul-check: --scale '%s' cannot quantize B (%zu x %zu) to %s", k->sname, K, N, k->fb.name);
    free(xa), free(xb);
    char msg[512];
    CLI_CHECK(mm_validate(&qa->op, &qb->op, M, N, K, &k->o, msg, sizeof msg) == MM_OK, "matmul-check: %s",
              msg[0] ? msg : "the configuration is not valid");
}

// The backend under test into C (its unit roundoff into *u, its name into res->name); returns
// false when --backend cuda finds no GPU.
static bool run_backend(float *C, result *res, double *u, char *path_name, size_t path_cap, const check_cfg *k,
                        const mm_qmat *qa, const mm_qmat *qb) {
    char msg[512];
    int st;
    *u = 0x1p-24;
    double t0 = fio_now();
    if (k->use_cuda) {
        mm_cuda_plan plan;
        st = mm_cuda_available(msg, sizeof msg) ? mm_cuda_choose(&plan, &qa->op, &qb->op, k->K, msg, sizeof msg)
                                                : MM_ENODEV;
        if (st == MM_ENODEV) {
            mm_cuda_available(msg, sizeof msg);
            fprintf(stderr, "fplab matmul-check: no GPU: %s\n", msg[0] ? msg : "mm_cuda returned MM_ENODEV");
            return false;
        }
        CLI_CHECK(st == MM_OK || k->emulated, "matmul-check: --backend cuda: %s", msg);
        if (st == MM_OK && !k->emulated) {
            *u = plan.u;
            snprintf(path_name, path_cap, "cuda:%s", plan.path);
            res->name = path_name;
        }
        t0 = fio_now();
        st = mm_cuda(C, k->N, &qa->op, &qb->op, k->M, k->N, k->K, &k->o);
    } else {
        st = mm_cpu(C, k->N, &qa->op, &qb->op, k->M, k->N, k->K, &k->o);
    }
    res->time_s = fio_now() - t0;
    CLI_CHECK(st != MM_EUNSUPPORTED, "matmul-check: backend %s does not support this configuration", k->backend);
    MM_CHECK(st, "the backend failed on a configuration mm_validate accepted");
    return true;
}

static void print_json(const check_cfg *k, const result res[2], double u, bool pass) {
    const double flops = 2.0 * (double)k->M * (double)k->N * (double)k->K;
    printf("{\n  \"config\": {\"m\": %zu, \"n\": %zu, \"k\": %zu, \"a\": \"%s\", \"b\": \"%s\", \"out\": \"%s\", "
           "\"scale\": \"%s\", \"acc\": \"%s\", \"promote_every\": %d, \"emulated\": %s, \"backend\": \"%s\", "
           "\"seed\": %llu, \"dist\": \"%s\"},\n  \"results\": [\n",
           k->M, k->N, k->K, k->fa.name, k->fb.name, k->o.out_fmt.name, k->sname, k->acc_spec,
           k->o.acc.promote_every, k->emulated ? "true" : "false", k->backend, (unsigned long long)k->seed,
           mm_dist_name(k->dist));
    for (int i = 0; i < 2; i++) {
        printf("    {\"backend\": \"%s\", ", res[i].name);
        json_num("time_s", res[i].time_s, true);
        json_num("gflops", flops / res[i].time_s * 1e-9, true);
        json_num("max_err_ulp", res[i].max_ulp, true);
        json_num("median_err_ulp", res[i].med_ulp, true);
        json_num("max_rel_err", res[i].max_rel, true);
        json_num("median_rel_err", res[i].med_rel, true);
        json_num("unit_roundoff", i ? u : 0x1p-24, true);
        printf("\"outside_bound\": %zu, \"mismatches_vs_ref\": %zu, \"out_overflow\": %zu}%s\n", res[i].outside,
               res[i].mismatches, res[i].overflow, i ? "" : ",");
    }
    printf("  ],\n  \"pass\": %s\n}\n", pass ? "true" : "false");
}

static void print_table(const check_cfg *k, const result res[2], double u, bool pass) {
    const double flops = 2.0 * (double)k->M * (double)k->N * (double)k->K;
    const cli_col cols[] = {
        {"backend", CLI_STR},      {"time_s", CLI_NUM},        {"gflops", CLI_NUM},
        {"max_err_ulp", CLI_NUM},  {"median_err_ulp", CLI_NUM}, {"max_rel_err", CLI_NUM},
        {"median_rel_err", CLI_NUM}, {k->emulated ? "mismatches_vs_ref" : "outside_bound", CLI_INT}};
    cli_table t;
    cli_table_init(&t, cols, 8);
    for (int i = 0; i < 2; i++) {
        cli_cell_str(&t, res[i].name);
        cli_cell_num(&t, res[i].time_s);
        cli_cell_num(&t, flops / res[i].time_s * 1e-9);
        cli_cell_num(&t, res[i].max_ulp);
        cli_cell_num(&t, res[i].med_ulp);
        cli_cell_num(&t, res[i].max_rel);
        cli_cell_num(&t, res[i].med_rel);
        cli_cell_u64(&t, k->emulated ? res[i].mismatches : res[i].outside);
    }
    cli_table_print(&t, CLI_OUT_TABLE, stdout);
    const size_t n = k->M * k->N;
    if (k->emulated)
        printf("%s: %zu of %zu results differ from mm_ref (emulated accumulator: bit-exact required)\n",
               pass ? "PASS" : "FAIL", res[1].mismatches, n);
    else
        printf("%s: %zu of %zu results outside |err| <= gamma_%zu(u = 2^%d) * sum|a b s| + ulp_out/2 (%s), "
               "%zu (ref)\n", pass ? "PASS" : "FAIL", res[1].outside, n, k->K + 2, ilogb(u), res[1].name,
               res[0].outside);
    if (res[0].overflow)
        printf("note: %zu exact results overflow %s (beyond max + ulp/2); left out of the errors and the "
               "bound\n", res[0].overflow, k->o.out_fmt.name);
}

int cmd_matmul_check(int argc, char **argv) {
    check_cfg k;
    if (!parse_options(&k, argc, argv)) return 0;
    const size_t M = k.M, N = k.N, K = k.K;
    if (k.outfmt == CLI_OUT_TABLE) {
        printf("matmul-check: M=%zu N=%zu K=%zu a=%s b=%s out=%s scale=%s acc=%s backend=%s seed=%llu dist=%s\n",
               M, N, K, k.fa.name, k.fb.name, k.o.out_fmt.name, k.sname, k.acc_desc, k.backend,
               (unsigned long long)k.seed, mm_dist_name(k.dist));
        fflush(stdout);
    }
    mm_qmat qa, qb;
    make_operands(&qa, &qb, &k);
    float *Cref = calloc(M * N, sizeof *Cref), *C = calloc(M * N, sizeof *C);
    double *exact = malloc(M * N * sizeof *exact), *absdot = malloc(M * N * sizeof *absdot);
    double *scratch = malloc(2 * M * N * sizeof *scratch);
    CLI_CHECK_LIB(Cref && C && exact && absdot && scratch ? 0 : FMT_ENOMEM, "the results do not fit in memory");
    result res[2] = {{.name = "ref"}, {.name = k.backend}};
    double u;
    char path_name[32];
    int rc = EXIT_NO_GPU;
    if (run_backend(C, &res[1], &u, path_name, sizeof path_name, &k, &qa, &qb)) {
        const double t0 = fio_now();
        MM_CHECK(mm_ref(Cref, N, &qa.op, &qb.op, M, N, K, &k.o), "mm_ref failed on a validated configuration");
        res[0].time_s = fio_now() - t0;
        // The exact product (infinitely precise sums), whatever accumulator was asked for.
        mm_opts oe = k.o;
        MM_CHECK(mm_acc_from_name(&oe.acc, "fp32", NULL, 0), "fp32 accumulator spec refused");
        MM_CHECK(mm_ref_exact(exact, absdot, NULL, N, &qa.op, &qb.op, M, N, K, &oe), "mm_ref_exact failed");
        evaluate(&res[0], Cref, Cref, exact, absdot, M * N, K, 0x1p-24, &k.o.out_fmt, false, scratch);
        evaluate(&res[1], C, Cref, exact, absdot, M * N, K, u, &k.o.out_fmt, k.emulated, scratch);
        if (k.emulated) res[0].outside = 0;  // the fp32 bound does not apply to an emulated accumulator
        const bool pass = k.emulated ? res[1].mismatches == 0 : res[0].outside == 0 && res[1].outside == 0;
        if (k.outfmt == CLI_OUT_JSON) print_json(&k, res, u, pass);
        else print_table(&k, res, u, pass);
        rc = pass ? 0 : 1;
    }
    mm_qmat_free(&qa), mm_qmat_free(&qb);
    free(Cref), free(C), free(exact), free(absdot), free(scratch);
    return rc;
}
