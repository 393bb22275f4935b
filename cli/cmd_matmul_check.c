// cmd_matmul_check.c: `fplab matmul-check`: verify a scaled matmul result against MPFR with
// the one verifier of kernels/mm_verify.h. Two modes:
// - generated (default): random operands quantized with a recipe, one product on a backend (cpu
//   or cuda) and on mm_ref; both results verified (exact error in ulps of the output format,
//   the classical bound |err| <= gamma_{K+2}(u) * sum|a b s| + ulp_out/2 with u = 2^-24 or the
//   cuda path's u, and for an emulated accumulator bit-exactness to mm_ref with it);
// - external (--result): the user's A and B (element values, .npy, with the scales and recipe
//   that made them) and C (.npy) from any kernel, verified likewise; the candidate accumulators
//   (exact-rounded, every engine that takes the operands, --also SPECs) that reproduce C bit for
//   bit are listed with their share.
// Each row names the rule it passed (bound or bit-exact) and the bound's size in ulps.
// Exit status: 0 pass, 1 fail, 2 bad input, 3 no GPU for --backend cuda.
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "util/fileio.h"
#include "formats/codec.h"
#include "formats/scale.h"
#include "npy.h"
#include "kernels/mm_operand.h"
#include "kernels/mm_verify.h"
#include "kernels/scaled_mm.h"

enum { EXIT_NO_GPU = 3 };

static void help(FILE *fp) {
    fprintf(fp,
            "usage: fplab matmul-check --a FORMAT --b FORMAT [--out FORMAT] [--m M] [--n N] [--k K]\n"
            "                          [--scale RECIPE] [--acc SPEC] [--backend cpu|cuda] [--seed S]\n"
            "                          [--dist D] [--also SPEC]... [--format table|json]\n"
            "       fplab matmul-check --a FORMAT --b FORMAT --a-values A.npy --b-values B.npy\n"
            "                          --result C.npy [--scale RECIPE --a-scales SA.npy --b-scales SB.npy]\n"
            "                          [--a-tensor-scale T] [--b-tensor-scale T] [--c-in C0.npy --beta B]\n"
            "                          [--alpha A] [--out FORMAT] [--u U | --engine SPEC] [--expect SPEC]\n"
            "                          [--also SPEC]..."
            "                          [--errors E.npy] [--format table|json]\n\n"
            "Generated mode: draws A (M x K) and B (K x N) from distribution D, quantizes them to\n"
            "their formats with the scaling RECIPE (tiles along K: A gets the recipe's tile, B its\n"
            "transpose; elements round to nearest-even and saturate at the format's max), computes\n"
            "C = A B rounded to the output format with the backend and with mm_ref (MPFR), and\n"
            "verifies both. External mode (--result): verifies the C that any kernel computed from\n"
            "the given A and B. The verification (kernels/mm_verify.h), per output:\n"
            "  exact    the exact product (MPFR), err = C - exact\n"
            "  err_ulp  |err| / ulp_out(exact),  ulp_out(e) = 2^(max(floor(log2|e|), emin) - mbits)\n"
            "  bound    |err| <= gamma_{K+2}(u) * sum_k|a b s| + ulp_out/2,  gamma_n = n u / (1 - n u)\n"
            "           (Higham), u = 2^-24 (--u; on cuda, the u of the path taken: tensor cores\n"
            "           2^-23, fp8 cuBLASLt 2^-13); bound_ulp is its size in ulps\n"
            "and which candidate accumulators reproduce C bit for bit (exact-rounded: the exact\n"
            "value rounded once; every engine of 'fplab engines' that takes the operand formats,\n"
            "with and without :f16; each --also SPEC), with the share of outputs each reproduces.\n"
            "Outputs whose exact value overflows the output format are excluded, and a check with\n"
            "no judged output fails. A row passes by the rule 'bit-exact' when an --acc/--expect\n"
            "accumulator is named (emulated --acc: C must equal mm_ref with it), else by 'bound'\n"
            "(every judged output within it), else 'bit-exact' when one candidate reproduces all.\n\n"
            "options (default in brackets):\n"
            "  --a, --b FORMAT   element formats of A and B: e4m3, e5m2, e2m1, bf16, ..., or a scheme\n"
            "                    (mxfp8, mxfp4, nvfp4, ...: its element format, and its recipe unless\n"
            "                    --scale is given) (required)\n"
            "  --out FORMAT      output format of C [fp32]\n"
            "  --scale RECIPE    none, tensor, row, mx, nvfp4, block:K:SCALEFMT, tile:RxC:SCALEFMT\n"
            "                    (see 'fplab quantize --help') [none]\n"
            "  --also SPEC       one more candidate accumulator, e.g. m13:rtz:promote=128 (repeatable)\n"
            "  --format F        table or json (numbers: the shortest text that reads back) [table]\n"
            "generated mode:\n"
            "  --m, --n, --k N   sizes, each [64]; all buffers of the check (operands, results, the\n"
            "                    verifier's arrays, each thread's reference buffers) within 4 GiB\n"
            "  --acc SPEC        fp32, bf16, fp16, mNN (NN fraction bits, fp32 range), with an\n"
            "                    optional :promote=N (e.g. m13:promote=128) and :rtz/...; or an\n"
            "                    engine ARCH:INSTR[:kN][:f16][:promote=N] (fplab engines) [fp32]\n"
            "  --backend B       cpu or cuda (FPLAB_CUDA_KERNEL=auto|cublaslt|tc|simt picks its\n"
            "                    path; the table names the one taken) [cpu]\n"
            "  --seed S          random operands; A draws stream 1, B stream 2 [0]\n"
            "  --dist D          normal, uniform (U[-1,1)), lognormal (random sign times\n"
            "                    exp(N(0,1))), outliers (normal; 1 element in 128 times 1000) [normal]\n"
            "external mode (.npy files, float32 or float64, C order):\n"
            "  --a-values FILE   A (M x K): element values of --a, before scaling (each must be a\n"
            "                    value of the format), or its codes (uint8 for 8 bits or fewer,\n"
            "                    as 'fplab quantize --codes' and fplab.quantize(...).codes give them)\n"
            "  --b-values FILE   B (K x N): element values or codes of --b\n"
            "  --result FILE     C (M x N) as the kernel wrote it (values of --out)\n"
            "  --a-scales FILE   A's tile scales as 'fplab quantize --scale RECIPE' makes them on A:\n"
            "                    (M, ceil(K / tile)) for mx/nvfp4/block, (M, 1) for row, (1, 1) for\n"
            "                    tensor; values of the recipe's scale format, or its codes as\n"
            "                    'fplab quantize --scales' writes them (required unless none)\n"
            "  --b-scales FILE   B's, with the tile transposed: (ceil(K / tile), N), (1, N), (1, 1)\n"
            "  --a-tensor-scale T, --b-tensor-scale T  second-level scales (nvfp4) [1]\n"
            "  --alpha A, --beta B  C = alpha A B + beta C0 [1, 0]; --c-in FILE: C0 (M x N)\n"
            "  --u U             unit roundoff of the bound, 0 < U < 1/(2(K+2)) [2^-24]\n"
            "  --engine SPEC     the result claims this engine's arithmetic (ARCH:INSTR[:kN][:f16]\n"
            "                    [:promote=N], 'fplab engines'): hold it to that engine's own error\n"
            "                    bound (from its k, alignment bits and chaining) instead of the u one\n"
            "  --expect SPEC     pass only if this accumulator reproduces C bit for bit\n"
            "  --errors FILE     write per-output float64 columns (M*N rows): exact, err, err_ulp,\n"
            "                    bound_ulp, judged, in_bound (not onto an input)\n"
            "  -h, --help        this text\n\n"
            "exit status: 0 pass, 1 fail, 2 bad input, 3 --backend cuda without a usable GPU.\n\n"
            "examples:\n"
            "  build/fplab matmul-check --m 64 --n 64 --k 512 --a e4m3 --b e4m3 --out bf16 --scale mx\n"
            "  build/fplab matmul-check --m 64 --n 64 --k 512 --a e2m1 --b e2m1 --out fp32 --scale nvfp4\n"
            "  # a 13-bit accumulator as in fp8 tensor cores, promoted to fp32 every 128 products (bit-exact vs MPFR)\n"
            "  build/fplab matmul-check --m 16 --n 16 --k 4096 --a e4m3 --b e4m3 --scale tensor --acc m13:promote=128\n"
            "  build/fplab matmul-check --m 16 --n 16 --k 512 --a e4m3 --b e4m3 --acc hopper:wgmma\n"
            "  build/fplab matmul-check --a e4m3 --b e5m2 --scale row --dist outliers --format json\n"
            "  # a kernel's output C from A and B (docs/engines.md, 'Verifying a kernel's output'):\n"
            "  #   fplab matmul-check --a e4m3 --b e4m3 --a-values A.npy --b-values B.npy --result C.npy\n");
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

// A number as the shortest text that reads back (cli_fmt_double); inf and nan as strings.
static void json_num(const char *key, double v, bool comma) {
    char b[CLI_DOUBLE_MAX];
    cli_fmt_double(b, sizeof b, v);
    printf(isfinite(v) ? "\"%s\": %s%s" : "\"%s\": \"%s\"%s", key, b, comma ? ", " : "");
}

// --- the command, in steps: options, operands, the backends or the files, the printout

enum { MAX_ALSO = 16 };

typedef struct {
    size_t M, N, K;
    const char *a_name, *b_name, *out_name, *scale, *acc_spec, *backend, *dist_name;
    const char *a_values, *b_values, *result, *a_scales, *b_scales, *c_in, *expect, *errors, *engine;
    const char *also[MAX_ALSO];
    size_t nalso;
    float a_ts, b_ts;
    double u;
    uint64_t seed;
    cli_out outfmt;
    bool use_cuda, emulated, external, sizes_given;
    fmt_t fa, fb;
    mm_opts o;
    fmt_scaling sc;
    mm_dist dist;
    char sname[96], acc_desc[128];
} check_cfg;

static void check_memory(const check_cfg *k);

// Parses and validates the options (dies on bad input); returns false after --help.
static bool parse_options(check_cfg *k, int argc, char **argv) {
    static const struct option lo[] = {
        {"m", required_argument, 0, 'M'},       {"n", required_argument, 0, 'N'},
        {"k", required_argument, 0, 'K'},       {"a", required_argument, 0, 'a'},
        {"b", required_argument, 0, 'b'},       {"out", required_argument, 0, 'o'},
        {"scale", required_argument, 0, 'S'},   {"acc", required_argument, 0, 'c'},
        {"backend", required_argument, 0, 'B'}, {"seed", required_argument, 0, 's'},
        {"dist", required_argument, 0, 'd'},    {"format", required_argument, 0, 'f'},
        {"a-values", required_argument, 0, 1},  {"b-values", required_argument, 0, 2},
        {"result", required_argument, 0, 3},    {"a-scales", required_argument, 0, 4},
        {"b-scales", required_argument, 0, 5},  {"c-in", required_argument, 0, 6},
        {"alpha", required_argument, 0, 7},     {"beta", required_argument, 0, 8},
        {"u", required_argument, 0, 9},         {"expect", required_argument, 0, 10},
        {"also", required_argument, 0, 11},     {"errors", required_argument, 0, 12},
        {"a-tensor-scale", required_argument, 0, 13}, {"b-tensor-scale", required_argument, 0, 14},
        {"engine", required_argument, 0, 15},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    char *pos[argc + 1];
    int npos = cli_split_args(&argc, argv, lo, pos);
    argv[0] = "fplab matmul-check";
    *k = (check_cfg){.M = 64, .N = 64, .K = 64, .out_name = "fp32", .scale = "none", .acc_spec = NULL,
                     .backend = NULL, .dist_name = NULL, .outfmt = CLI_OUT_TABLE};
    mm_opts_default(&k->o);
    bool gen_only = false, beta_given = false, scale_given = false;
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        switch (c) {
        case 'M': k->M = (size_t)cli_parse_long(optarg, "--m", 1, 1L << 20), gen_only = true; break;
        case 'N': k->N = (size_t)cli_parse_long(optarg, "--n", 1, 1L << 20), gen_only = true; break;
        case 'K': k->K = (size_t)cli_parse_long(optarg, "--k", 1, 1L << 24), gen_only = true; break;
        case 'a': k->a_name = optarg; break;
        case 'b': k->b_name = optarg; break;
        case 'o': k->out_name = optarg; break;
        case 'S': k->scale = optarg, scale_given = true; break;
        case 'c': k->acc_spec = optarg, gen_only = true; break;
        case 'B': k->backend = optarg, gen_only = true; break;
        case 's': k->seed = cli_parse_u64(optarg, "--seed"), gen_only = true; break;
        case 'd': k->dist_name = optarg, gen_only = true; break;
        case 'f': k->outfmt = cli_parse_out(optarg, 1u << CLI_OUT_TABLE | 1u << CLI_OUT_JSON); break;
        case 1: k->a_values = optarg; break;
        case 2: k->b_values = optarg; break;
        case 3: k->result = optarg; break;
        case 4: k->a_scales = optarg; break;
        case 5: k->b_scales = optarg; break;
        case 6: k->c_in = optarg; break;
        case 7: k->o.alpha = (float)cli_parse_double(optarg, "--alpha"); break;
        case 8: k->o.beta = (float)cli_parse_double(optarg, "--beta"), beta_given = true; break;
        case 9:
            k->u = cli_parse_double(optarg, "--u");
            CLI_CHECK(k->u > 0 && k->u < 1, "--u %s: expected a unit roundoff in (0, 1), e.g. 5.96e-8", optarg);
            break;
        case 10: k->expect = optarg; break;
        case 11:
            CLI_CHECK(k->nalso < MAX_ALSO, "--also: at most %d extra accumulators", MAX_ALSO);
            k->also[k->nalso++] = optarg;
            break;
        case 12: k->errors = optarg; break;
        case 13:
        case 14: {
            const char *opt = c == 13 ? "--a-tensor-scale" : "--b-tensor-scale";
            const double t = cli_parse_double(optarg, opt);
            // 0 would be read as 1 (mm_operand's convention), so it is refused with the nonsense.
            CLI_CHECK(t > 0 && (float)t <= FLT_MAX, "%s %s: expected a finite scale > 0", opt, optarg);
            *(c == 13 ? &k->a_ts : &k->b_ts) = (float)t;
            break;
        }
        case 15: k->engine = optarg; break;
        case 'h': help(stdout); return false;
        default: cli_usage_error("matmul-check");
        }
    }
    CLI_CHECK(npos == 0, "matmul-check: unexpected argument '%s'; every input is an option (see "
              "'fplab matmul-check --help')", pos[0]);
    CLI_CHECK(k->a_name && k->b_name, "matmul-check: --a FORMAT and --b FORMAT are required (e.g. --a e4m3 --b e4m3)");
    k->external = k->result || k->a_values || k->b_values;
    if (k->external) {
        CLI_CHECK(k->result && k->a_values && k->b_values, "matmul-check: external mode needs --a-values A.npy, "
                  "--b-values B.npy and --result C.npy together");
        CLI_CHECK(!gen_only, "matmul-check: --m/--n/--k/--acc/--backend/--seed/--dist belong to the generated mode; "
                  "with --result the sizes come from the files (use --expect SPEC to require an accumulator)");
        CLI_CHECK(!(k->u > 0 && k->engine), "matmul-check: --u and --engine name two bounds; expected one (the "
                  "engine's own bound replaces the u one)");
        const fio_input ins[] = {{"a-values", k->a_values, false}, {"b-values", k->b_values, false},
                                 {"result", k->result, false},     {"a-scales", k->a_scales, false},
                                 {"b-scales", k->b_scales, false}, {"c-in", k->c_in, false}};
        char fmsg[FIO_PATH_MAX + 256];
        CLI_CHECK(!k->errors || fio_refuse_inputs("errors", k->errors, ins, 6, fmsg, sizeof fmsg) == FIO_OK,
                  "matmul-check: %s (write the errors to another path)", fmsg);
        CLI_CHECK(!k->c_in == !(k->o.beta != 0.0f), "matmul-check: --c-in FILE and a nonzero --beta go together%s",
                  beta_given ? "" : " (--beta defaults to 0)");
    } else {
        CLI_CHECK(!k->a_scales && !k->b_scales && !k->c_in && !beta_given && k->o.alpha == 1.0f && !k->expect &&
                  !k->errors && k->a_ts == 0 && k->b_ts == 0 && k->u == 0 && !k->engine,
                  "matmul-check: --a-scales/--b-scales/--c-in/--alpha/--beta/--u/--engine/--expect/--errors/"
                  "--*-tensor-scale belong to the external mode (with --result C.npy)");
        CLI_CHECK(k->M * k->N <= (1u << 24) && k->M * k->K <= (1u << 28) && k->K * k->N <= (1u << 28),
                  "matmul-check: %zu x %zu x %zu is too large for a check against MPFR; expected M*N <= 2^24 "
                  "and M*K, K*N <= 2^28", k->M, k->N, k->K);
    }
    if (!k->acc_spec) k->acc_spec = "fp32";
    if (!k->backend) k->backend = "cpu";
    if (!k->dist_name) k->dist_name = "normal";
    k->use_cuda = !strcmp(k->backend, "cuda");
    CLI_CHECK(k->use_cuda || !strcmp(k->backend, "cpu"), "--backend '%s': expected cpu or cuda", k->backend);
    CLI_CHECK(mm_dist_from_name(&k->dist, k->dist_name) == MM_OK,
              "--dist '%s': expected normal, uniform, lognormal or outliers", k->dist_name);
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
    mm_acc_name(&k->o.acc, k->acc_desc, sizeof k->acc_desc);
    if (!k->external) check_memory(k);
    return true;
}

// --- memory: every buffer a check holds at its peak, summed and held to a stated limit before the
// first allocation of the work (the operands, in external mode, are the files' own size)

enum { MC_MEM_LIMIT_GIB = 4 };

static int max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// Bytes of one operand of R x C floats (A: M x K, B: K x N) with its scales: 12 a value, as
// mm_qmat holds it (values, elements, dequantized) or as the external mode reads it (values,
// and the float64 file while converting).
static double operand_bytes(const check_cfg *k, bool is_a, double R, double C) {
    const double Kd = is_a ? C : R, other = is_a ? R : C;
    const int t = is_a ? k->sc.tile_cols : k->sc.tile_rows;
    const double nblk = k->sc.none ? 0 : t > 0 ? ceil(Kd / t) : 1;
    return 12.0 * R * C + 2 * 4.0 * other * nblk;
}

// Dies when M x N x K would need more than the limit: the operands, the results, mm_cpu's copies
// of the operands, the verifier's per-output arrays (and --errors'), and each thread's buffers
// of the reference and the engines (4 K doubles each; MPFR's own are a few KiB).
static void check_memory(const check_cfg *k) {
    const double M = (double)k->M, N = (double)k->N, K = (double)k->K, n = M * N;
    double b = operand_bytes(k, true, M, K) + operand_bytes(k, false, K, N);
    b += k->external ? 8 * n : 8 * n + 8 * (M * K + K * N);  // C and C0 | C, Cref and mm_cpu's copies
    b += 44 * n + (k->errors ? 82 * n : 0);                     // mm_verify; --errors' columns and rows
    b += max_threads() * (32 * (K + 64) + 65536.0);
    const double lim = (double)MC_MEM_LIMIT_GIB * (1 << 30);
    CLI_CHECK(b <= lim, "matmul-check: M=%zu N=%zu K=%zu needs about %.1f GiB (operands, results, the verifier's "
              "per-output arrays, %d threads' reference buffers of K doubles); the limit is %d GiB: expected a "
              "smaller product", k->M, k->N, k->K, b / (1 << 30), max_threads(), MC_MEM_LIMIT_GIB);
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

// --- external mode: the files

// A .npy file as float32 (float64 input must hold float32 values exactly); *rows, *cols its
// 2-D shape (a 1-D file is one row). what names the option for errors.
// The float32 values of a .npy file: float32 or float64 values (each a float32), or with `codes`
// (the format of the codes; NULL: values only) unsigned codes of it, decoded (the width
// fmt_code_bytes gives it, as `fplab quantize --codes/--scales` and fplab.quantize write them).
static float *read_f32_or_codes(const char *path, const char *what, const fmt_t *codes, size_t *rows, size_t *cols) {
    npy_array a;
    char msg[512];
    CLI_CHECK(npy_read(path, &a, msg, sizeof msg) == NPY_OK, "matmul-check: %s: %s", what, msg);
    *rows = a.ndim == 1 ? 1 : a.shape[0], *cols = a.ndim == 1 ? a.shape[0] : a.shape[1];
    if (a.dtype == NPY_F4) return a.f4;
    // Every check before the buffer: an exit with it allocated would be a leak to the sanitizers.
    if (a.dtype != NPY_F8) {
        CLI_CHECK(codes, "matmul-check: %s '%s' holds uint%zu codes; expected float32 or float64 values", what, path,
                  8 * npy_itemsize(a.dtype));
        const size_t want = fmt_code_bytes(codes);
        CLI_CHECK(npy_itemsize(a.dtype) == want, "matmul-check: %s '%s' holds uint%zu codes; %s codes are uint%zu "
                  "(as 'fplab quantize --codes/--scales' writes them)", what, path, 8 * npy_itemsize(a.dtype),
                  codes->name, 8 * want);
        size_t bad = 0;
        CLI_CHECK(fmt_codes_check(codes, a.data, a.n, &bad) == FMT_OK, "matmul-check: %s '%s': element [%zu, %zu] "
                  "is not a %d-bit code of %s", what, path, bad / *cols, bad % *cols, codes->bits, codes->name);
    } else {
        for (size_t i = 0; i < a.n; i++)
            CLI_CHECK((float)a.f8[i] == a.f8[i] || isnan(a.f8[i]), "matmul-check: %s '%s': element %zu (%.17g) is "
                      "not a float32 value; expected values of the format", what, path, i, a.f8[i]);
    }
    float *y = malloc(a.n ? a.n * sizeof *y : 1);
    CLI_CHECK_LIB(y ? FMT_OK : FMT_ENOMEM, "the array does not fit in memory");
    if (a.dtype != NPY_F8) {
        CLI_CHECK_LIB(fmt_decode_f32(codes, y, a.data, a.n), "decoding the codes");
        npy_free(&a);
        return y;
    }
    for (size_t i = 0; i < a.n; i++) y[i] = (float)a.f8[i];
    npy_free(&a);
    return y;
}
static float *read_f32(const char *path, const char *what, size_t *rows, size_t *cols) {
    return read_f32_or_codes(path, what, NULL, rows, cols);
}

// Dies unless every x[i] is a value of f.
static void check_values(const float *x, size_t n, const fmt_t *f, const char *what, const char *path, size_t cols) {
    const fmt_round_opts ro = {0};
    for (size_t i = 0; i < n; i++) {
        const double r = fmt_round1(f, x[i], &ro);
        CLI_CHECK(r == x[i] || (isnan(r) && isnan(x[i])), "matmul-check: %s '%s': element [%zu, %zu] = %.9g is not "
                  "a value of %s (nearest %.9g); expected the element values before scaling (codes decoded)", what,
                  path, i / cols, i % cols, x[i], f->name, r);
    }
}

typedef struct {
    float *x, *xb, *tiles, *scales, *scales_b, *C, *Cin;  // owned (the operands point into them)
    mm_operand A, B;
} ext_data;

// One operand of the external mode: values (rows x cols) of elem, with the recipe's tile
// scales from spath (expanded by mm_operand_from_tiles).
static void ext_operand(mm_operand *op, float **x_out, float **tiles_out, float **sc_out, bool is_a,
                        const char *vpath, const char *spath, const fmt_t *elem, const check_cfg *k, size_t *rows,
                        size_t *cols, float ts) {
    const char *vopt = is_a ? "--a-values" : "--b-values", *sopt = is_a ? "--a-scales" : "--b-scales";
    float *x = read_f32_or_codes(vpath, vopt, elem, rows, cols);
    CLI_CHECK(*rows >= 1 && *cols >= 1, "matmul-check: %s '%s' is %zu x %zu; expected at least one row and one "
              "column (an empty product has no output to verify)", vopt, vpath, *rows, *cols);
    check_values(x, *rows * *cols, elem, vopt, vpath, *cols);
    // The tile as fmt_quantize_f32 took it: A's as is, B's transposed (mm_operand.h).
    fmt_scaling s = k->sc;
    if (!is_a) s.tile_rows = k->sc.tile_cols, s.tile_cols = k->sc.tile_rows;
    const bool none = k->sc.none;
    float *tiles = NULL, *scales = NULL;
    if (none) {
        CLI_CHECK(!spath, "matmul-check: %s given but --scale is none; expected --scale RECIPE naming the recipe "
                  "that made the scales", sopt);
    } else {
        CLI_CHECK(spath, "matmul-check: --scale %s needs %s FILE (the tile scales)", k->sname, sopt);
        const size_t want = fmt_scale_count(&s, *rows, *cols);
        size_t sr, scn;
        tiles = read_f32_or_codes(spath, sopt, &s.scale_fmt, &sr, &scn);
        CLI_CHECK(sr * scn == want, "matmul-check: %s '%s' has %zu x %zu scales; --scale %s on a %zu x %zu %s "
                  "makes %zu", sopt, spath, sr, scn, k->sname, *rows, *cols, is_a ? "A" : "B", want);
        check_values(tiles, want, &s.scale_fmt, sopt, spath, scn);
        char what[FIO_PATH_MAX + 32], smsg[FIO_PATH_MAX + 256];
        snprintf(what, sizeof what, "%s '%s'", sopt, spath);
        CLI_CHECK(mm_operand_scales_check(&s, tiles, want, ts > 0 ? ts : 1.0f, what, smsg, sizeof smsg) == MM_OK,
                  "matmul-check: %s", smsg);
        const size_t other = is_a ? *rows : *cols, K = is_a ? *cols : *rows;
        const size_t kt = s.tile_cols > 0 && is_a ? (size_t)s.tile_cols
                          : s.tile_rows > 0 && !is_a ? (size_t)s.tile_rows : K;
        scales = malloc(other * ((K + kt - 1) / kt + 1) * sizeof *scales);
        CLI_CHECK_LIB(scales ? FMT_OK : FMT_ENOMEM, "the scales do not fit in memory");
    }
    mm_operand_from_tiles(op, scales, is_a ? MM_SIDE_A : MM_SIDE_B, !is_a, x, *rows, *cols, elem, &s, tiles,
                          ts > 0 ? ts : 1.0f);
    *x_out = x, *tiles_out = tiles, *sc_out = scales;
}

// --- the rows: one verified result each

typedef struct {
    const char *name;
    double time_s;       // NaN: not timed (an external result)
    bool gflops;         // a kernel's speed is meaningful (not MPFR's, not a file's)
    mm_verify_report rep;
} row;

// The backend under test into C (its unit roundoff into *u, its name into r->name); returns
// false when --backend cuda finds no GPU.
static bool run_backend(float *C, row *r, double *u, char *path_name, size_t path_cap, const check_cfg *k,
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
            r->name = path_name;
        }
        t0 = fio_now();
        st = mm_cuda(C, k->N, &qa->op, &qb->op, k->M, k->N, k->K, &k->o);
    } else {
        st = mm_cpu(C, k->N, &qa->op, &qb->op, k->M, k->N, k->K, &k->o);
    }
    r->time_s = fio_now() - t0;
    CLI_CHECK(st != MM_EUNSUPPORTED, "matmul-check: backend %s does not support this configuration", k->backend);
    MM_CHECK(st, "the backend failed on a configuration mm_validate accepted");
    return true;
}

// mm_verify on one row; a refused extra/expect spec is bad input (exit 2).
static void verify_row(row *r, const mm_verify_outputs *out, const float *C, const float *Cin, const mm_operand *A,
                       const mm_operand *B, const check_cfg *k, double u, const char *expect, bool candidates) {
    const mm_verify_opts vo = {.u = u, .extra = k->also, .n_extra = candidates ? k->nalso : 0, .expect = expect,
                               .no_candidates = !candidates, .engine = candidates ? k->engine : NULL};
    char msg[512];
    const int st = mm_verify(&r->rep, out, C, Cin, k->N, A, B, k->M, k->N, k->K, &k->o, &vo, msg, sizeof msg);
    CLI_CHECK(st != MM_EINVAL, "matmul-check: %s", msg[0] ? msg : "the configuration is not valid");
    MM_CHECK(st, "mm_verify failed");
}

static const char *rule_text(const mm_verify_report *p, char *buf, size_t cap) {
    if (p->rule == MM_RULE_BITEXACT) snprintf(buf, cap, "bit-exact:%s", p->cand[p->rule_cand].spec);
    else snprintf(buf, cap, "%s", mm_verify_rule_name(p->rule));
    return buf;
}

static void print_json(const check_cfg *k, const row *rows, int nrows, bool pass) {
    const double flops = 2.0 * (double)k->M * (double)k->N * (double)k->K;
    printf("{\n  \"config\": {\"mode\": \"%s\", \"m\": %zu, \"n\": %zu, \"k\": %zu, \"a\": \"%s\", \"b\": \"%s\", "
           "\"out\": \"%s\", \"scale\": \"%s\", ", k->external ? "external" : "generated", k->M, k->N, k->K,
           k->fa.name, k->fb.name, k->o.out_fmt.name, k->sname);
    if (k->external) {
        printf("\"result\": \"%s\", ", k->result);
        json_num("alpha", k->o.alpha, true);
        json_num("beta", k->o.beta, false);
    } else {
        printf("\"acc\": \"%s\", \"promote_every\": %d, \"emulated\": %s, \"backend\": \"%s\", \"seed\": %llu, "
               "\"dist\": \"%s\"", k->acc_desc, k->o.acc.promote_every, k->emulated ? "true" : "false", k->backend,
               (unsigned long long)k->seed, mm_dist_name(k->dist));
    }
    printf("},\n  \"results\": [\n");
    for (int i = 0; i < nrows; i++) {
        const mm_verify_report *p = &rows[i].rep;
        char rb[96];
        printf("    {\"backend\": \"%s\", ", rows[i].name);
        if (!isnan(rows[i].time_s)) json_num("time_s", rows[i].time_s, true);
        if (rows[i].gflops) json_num("gflops", flops / rows[i].time_s * 1e-9, true);
        json_num("max_err_ulp", p->max_ulp, true);
        json_num("median_err_ulp", p->med_ulp, true);
        json_num("max_bound_ulp", p->max_bound_ulp, true);
        json_num("median_bound_ulp", p->med_bound_ulp, true);
        json_num("max_rel_err", p->max_rel, true);
        json_num("median_rel_err", p->med_rel, true);
        json_num("unit_roundoff", p->u, true);
        if (p->bound_spec[0]) printf("\"bound_engine\": \"%s\", ", p->bound_spec);
        json_num("gamma", p->gamma, true);
        printf("\"outputs\": %zu, \"judged\": %zu, \"excluded\": %zu, \"outside_bound\": %zu, ", p->n, p->judged,
               p->excluded, p->outside);
        if (p->expect_cand >= 0)
            printf("\"expect\": \"%s\", \"mismatches_vs_ref\": %zu, ", p->cand[p->expect_cand].spec,
                   p->n - p->cand[p->expect_cand].reproduced);
        printf("\"rule\": \"%s\", \"pass\": %s, \"candidates\": [", rule_text(p, rb, sizeof rb),
               p->pass ? "true" : "false");
        for (size_t c = 0; c < p->ncand; c++) {
            printf("%s{\"acc\": \"%s\", \"reproduced\": %zu, ", c ? ", " : "", p->cand[c].spec, p->cand[c].reproduced);
            json_num("share", p->n ? (double)p->cand[c].reproduced / (double)p->n : NAN, false);
            printf("}");
        }
        printf("]}%s\n", i + 1 < nrows ? "," : "");
    }
    printf("  ],\n  \"pass\": %s\n}\n", pass ? "true" : "false");
}

static void print_table(const check_cfg *k, const row *rows, int nrows, bool pass) {
    const double flops = 2.0 * (double)k->M * (double)k->N * (double)k->K;
    const cli_col cols[] = {
        {"result", CLI_STR},        {"time_s", CLI_STR},         {"gflops", CLI_STR},
        {"max_err_ulp", CLI_NUM},   {"median_err_ulp", CLI_NUM}, {"max_bound_ulp", CLI_NUM},
        {"median_bound_ulp", CLI_NUM}, {"max_rel_err", CLI_NUM},   {"judged", CLI_INT},         {"excluded", CLI_INT},
        {"outside_bound", CLI_INT}, {"rule", CLI_STR},           {"pass", CLI_BOOL}};
    cli_table t;
    cli_table_init(&t, cols, (int)(sizeof cols / sizeof cols[0]));
    for (int i = 0; i < nrows; i++) {
        const mm_verify_report *p = &rows[i].rep;
        char b[64], rb[96];
        cli_cell_str(&t, rows[i].name);
        snprintf(b, sizeof b, "%.3g", rows[i].time_s);
        cli_cell_str(&t, isnan(rows[i].time_s) ? "-" : b);
        snprintf(b, sizeof b, "%.3g", flops / rows[i].time_s * 1e-9);
        cli_cell_str(&t, rows[i].gflops ? b : "-");
        cli_cell_num(&t, p->max_ulp);
        cli_cell_num(&t, p->med_ulp);
        cli_cell_num(&t, p->max_bound_ulp);
        cli_cell_num(&t, p->med_bound_ulp);
        cli_cell_num(&t, p->max_rel);
        cli_cell_u64(&t, p->judged);
        cli_cell_u64(&t, p->excluded);
        cli_cell_u64(&t, p->outside);
        cli_cell_str(&t, rule_text(p, rb, sizeof rb));
        cli_cell_bool(&t, p->pass);
    }
    cli_table_print(&t, CLI_OUT_TABLE, stdout);
    // The candidates of the row under test (the last).
    const mm_verify_report *p = &rows[nrows - 1].rep;
    printf("\naccumulators reproducing %s bit for bit (of %zu outputs):\n", rows[nrows - 1].name, p->n);
    const cli_col ccols[] = {{"accumulator", CLI_STR}, {"reproduced", CLI_INT}, {"share", CLI_NUM}};
    cli_table_init(&t, ccols, 3);
    for (size_t c = 0; c < p->ncand; c++) {
        cli_cell_str(&t, p->cand[c].spec);
        cli_cell_u64(&t, p->cand[c].reproduced);
        cli_cell_num(&t, p->n ? (double)p->cand[c].reproduced / (double)p->n : NAN);
    }
    cli_table_print(&t, CLI_OUT_TABLE, stdout);
    char rb[96];
    const char *name = rows[nrows - 1].name;
    if (p->expect_cand >= 0)
        printf("%s: %zu of %zu results differ from mm_ref with %s (%s; rule: bit-exact required)\n",
               pass ? "PASS" : "FAIL", p->n - p->cand[p->expect_cand].reproduced, p->n, p->cand[p->expect_cand].spec,
               name);
    else if (p->bound_spec[0])
        printf("%s: %zu of %zu results outside the error bound of %s's arithmetic + ulp_out/2 (%s; rule: %s)\n",
               pass ? "PASS" : "FAIL", p->outside, p->judged, p->bound_spec, name, rule_text(p, rb, sizeof rb));
    else
        printf("%s: %zu of %zu results outside |err| <= gamma_%zu(u = 2^%d) * sum|a b s| + ulp_out/2 (%s; "
               "rule: %s)\n", pass ? "PASS" : "FAIL", p->outside, p->judged, k->K + 2, ilogb(p->u), name,
               rule_text(p, rb, sizeof rb));
    if (p->rule == MM_RULE_BITEXACT && p->expect_cand < 0)
        printf("the bound fails, but %s equals %s bit for bit in all %zu outputs\n", name,
               p->cand[p->rule_cand].spec, p->n);
    if (p->excluded)
        printf("note: %zu of %zu exact results overflow %s (beyond max + ulp/2) or are not finite; excluded from "
               "the errors and the bound%s\n", p->excluded, p->n, k->o.out_fmt.name,
               p->judged ? "" : "; with nothing judged the check fails");
}

// The external mode's files into d, and k's sizes from them.
static void ext_load(ext_data *d, check_cfg *k) {
    size_t ar, ac, br, bc, cr, cc;
    float *ta = NULL, *tb = NULL;
    ext_operand(&d->A, &d->x, &ta, &d->scales, true, k->a_values, k->a_scales, &k->fa, k, &ar, &ac, k->a_ts);
    ext_operand(&d->B, &d->xb, &tb, &d->scales_b, false, k->b_values, k->b_scales, &k->fb, k, &br, &bc, k->b_ts);
    CLI_CHECK(ac == br, "matmul-check: A '%s' is %zu x %zu and B '%s' is %zu x %zu; expected A (M x K) and "
              "B (K x N)", k->a_values, ar, ac, k->b_values, br, bc);
    k->M = ar, k->K = ac, k->N = bc;
    check_memory(k);
    d->C = read_f32(k->result, "--result", &cr, &cc);
    CLI_CHECK(cr == k->M && cc == k->N, "matmul-check: --result '%s' is %zu x %zu; expected M x N = %zu x %zu",
              k->result, cr, cc, k->M, k->N);
    if (k->c_in) {
        d->Cin = read_f32(k->c_in, "--c-in", &cr, &cc);
        CLI_CHECK(cr == k->M && cc == k->N, "matmul-check: --c-in '%s' is %zu x %zu; expected %zu x %zu", k->c_in,
                  cr, cc, k->M, k->N);
    }
    // The tile arrays were expanded into the scales (or read into the tensor scale): no longer read.
    free(ta), free(tb);
    char msg[512];
    CLI_CHECK(mm_validate(&d->A, &d->B, k->M, k->N, k->K, &k->o, msg, sizeof msg) == MM_OK, "matmul-check: %s",
              msg[0] ? msg : "the operands do not make a valid product");
}

// --errors: per-output float64 rows (exact, err, err_ulp, bound_ulp, judged, in_bound).
static void write_errors(const char *path, const double *ex, const double *err, const double *ulp,
                         const double *bnd, const unsigned char *jd, const unsigned char *ib, size_t n) {
    double *t = malloc(n * 6 * sizeof *t);
    CLI_CHECK_LIB(t ? FMT_OK : FMT_ENOMEM, "the per-output errors do not fit in memory");
    for (size_t i = 0; i < n; i++) {
        double *r = &t[i * 6];
        r[0] = ex[i], r[1] = err[i], r[2] = ulp[i], r[3] = bnd[i], r[4] = jd[i], r[5] = ib[i];
    }
    const size_t shape[2] = {n, 6};
    char msg[512];
    CLI_CHECK(npy_write(path, "<f8", sizeof(double), t, 2, shape, msg, sizeof msg) == NPY_OK, "%s", msg);
    free(t);
}

int cmd_matmul_check(int argc, char **argv) {
    check_cfg k;
    if (!parse_options(&k, argc, argv)) return 0;
    ext_data d = {0};
    mm_qmat qa = {0}, qb = {0};
    if (k.external) ext_load(&d, &k);
    const size_t M = k.M, N = k.N, K = k.K, n = M * N;
    if (k.outfmt == CLI_OUT_TABLE) {
        if (k.external)
            printf("matmul-check: M=%zu N=%zu K=%zu a=%s b=%s out=%s scale=%s result=%s alpha=%g beta=%g\n", M, N, K,
                   k.fa.name, k.fb.name, k.o.out_fmt.name, k.sname, k.result, k.o.alpha, k.o.beta);
        else
            printf("matmul-check: M=%zu N=%zu K=%zu a=%s b=%s out=%s scale=%s acc=%s backend=%s seed=%llu dist=%s\n",
                   M, N, K, k.fa.name, k.fb.name, k.o.out_fmt.name, k.sname, k.acc_desc, k.backend,
                   (unsigned long long)k.seed, mm_dist_name(k.dist));
        fflush(stdout);
    }
    row rows[2];
    int nrows = 0, rc = 0;
    double *ex = NULL, *err = NULL, *ulp = NULL, *bnd = NULL;
    unsigned char *jd = NULL, *ib = NULL;
    if (k.errors) {
        ex = malloc(n * sizeof *ex), err = malloc(n * sizeof *err), ulp = malloc(n * sizeof *ulp);
        bnd = malloc(n * sizeof *bnd), jd = malloc(n), ib = malloc(n);
        CLI_CHECK_LIB(ex && err && ulp && bnd && jd && ib ? FMT_OK : FMT_ENOMEM, "the per-output errors do not fit");
    }
    const mm_verify_outputs out = {.exact = ex, .err = err, .err_ulp = ulp, .bound_ulp = bnd, .judged = jd,
                                   .in_bound = ib};
    if (k.external) {
        rows[0] = (row){.name = k.result, .time_s = NAN};
        verify_row(&rows[0], &out, d.C, d.Cin, &d.A, &d.B, &k, k.u, k.expect, true);
        nrows = 1;
    } else {
        make_operands(&qa, &qb, &k);
        float *Cref = calloc(n, sizeof *Cref), *C = calloc(n, sizeof *C);
        CLI_CHECK_LIB(Cref && C ? 0 : FMT_ENOMEM, "the results do not fit in memory");
        rows[0] = (row){.name = "ref"}, rows[1] = (row){.name = k.backend, .gflops = true};
        double u;
        char path_name[32];
        if (!run_backend(C, &rows[1], &u, path_name, sizeof path_name, &k, &qa, &qb)) {
            rc = EXIT_NO_GPU;
        } else {
            const double t0 = fio_now();
            MM_CHECK(mm_ref(Cref, N, &qa.op, &qb.op, M, N, K, &k.o), "mm_ref failed on a validated configuration");
            rows[0].time_s = fio_now() - t0;
            // An emulated accumulator (or an engine) defines the result bit for bit: C must equal
            // mm_ref with it. Otherwise the bound, with the backend's u.
            const char *expect = k.emulated ? k.acc_spec : NULL;
            verify_row(&rows[0], NULL, Cref, NULL, &qa.op, &qb.op, &k, 0x1p-24, expect, false);
            // A path's u at or beyond 1/(2(K+2)) (fp8 cuBLASLt's 2^-13 at K >= 4094) bounds
            // nothing; the row is then held to 2^-24, or to a candidate's bits.
            if (!(u < 0.5 / ((double)K + 2))) {
                if (k.outfmt == CLI_OUT_TABLE)
                    printf("note: the %s path's u = 2^%d bounds nothing at K = %zu (gamma_%zu >= 1); its result is "
                           "held to u = 2^-24 or to a candidate's bits\n", rows[1].name, ilogb(u), K, K + 2);
                u = 0x1p-24;
            }
            verify_row(&rows[1], &out, C, NULL, &qa.op, &qb.op, &k, u, expect, true);
            nrows = 2;
        }
        free(Cref), free(C);
    }
    if (nrows) {
        bool pass = true;
        for (int i = 0; i < nrows; i++) pass &= rows[i].rep.pass;
        if (k.outfmt == CLI_OUT_JSON) print_json(&k, rows, nrows, pass);
        else print_table(&k, rows, nrows, pass);
        if (k.errors) write_errors(k.errors, ex, err, ulp, bnd, jd, ib, n);
        rc = pass ? 0 : 1;
    }
    if (k.external) {
        free(d.x), free(d.xb), free(d.scales), free(d.scales_b), free(d.C), free(d.Cin);
    } else {
        mm_qmat_free(&qa), mm_qmat_free(&qb);
    }
    free(ex), free(err), free(ulp), free(bnd), free(jd), free(ib);
    return rc;
}
