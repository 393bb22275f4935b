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
// This file: the options, the memory limit, one row's verification and the printout; the modes
// run in cmd_matmul_check_gen.c and cmd_matmul_check_ext.c, and the rules they share with the
// Python binding (operands from values, the generated operands) live in kernels/mm_check.h.
#include <float.h>
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cmd_matmul_check.h"
#include "util/fileio.h"

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
            "  --format F        table or json (numbers: the shortest text that reads back; the cpu\n"
            "                    row names the kernel mm_cpu ran, e.g. engine-fast, and the outputs\n"
            "                    it left to the engine's scalar model: kernel, model_outputs) [table]\n"
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

// A number as the shortest text that reads back (cli_fmt_double); inf and nan as strings.
static void json_num(const char *key, double v, bool comma) {
    char b[CLI_DOUBLE_MAX];
    cli_fmt_double(b, sizeof b, v);
    printf(isfinite(v) ? "\"%s\": %s%s" : "\"%s\": \"%s\"%s", key, b, comma ? ", " : "");
}

// --- the options

// Parses and validates the options (dies on bad input); returns false after --help.
static bool parse_options(mc_cfg *k, int argc, char **argv) {
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
    *k = (mc_cfg){.p = {.M = 64, .N = 64, .K = 64}, .out_name = "fp32", .scale = "none", .outfmt = CLI_OUT_TABLE};
    mm_opts_default(&k->p.o);
    bool gen_only = false, beta_given = false, scale_given = false;
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        switch (c) {
        case 'M': k->p.M = (size_t)cli_parse_long(optarg, "--m", 1, 1L << 20), gen_only = true; break;
        case 'N': k->p.N = (size_t)cli_parse_long(optarg, "--n", 1, 1L << 20), gen_only = true; break;
        case 'K': k->p.K = (size_t)cli_parse_long(optarg, "--k", 1, 1L << 24), gen_only = true; break;
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
        case 7: k->p.o.alpha = (float)cli_parse_double(optarg, "--alpha"); break;
        case 8: k->p.o.beta = (float)cli_parse_double(optarg, "--beta"), beta_given = true; break;
        case 9:
            k->u = cli_parse_double(optarg, "--u");
            CLI_CHECK(k->u > 0 && k->u < 1, "--u %s: expected a unit roundoff in (0, 1), e.g. 5.96e-8", optarg);
            break;
        case 10: k->expect = optarg; break;
        case 11:
            CLI_CHECK(k->nalso < MC_MAX_ALSO, "--also: at most %d extra accumulators", MC_MAX_ALSO);
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
        CLI_CHECK(!k->c_in == !(k->p.o.beta != 0.0f), "matmul-check: --c-in FILE and a nonzero --beta go together%s",
                  beta_given ? "" : " (--beta defaults to 0)");
    } else {
        CLI_CHECK(!k->a_scales && !k->b_scales && !k->c_in && !beta_given && k->p.o.alpha == 1.0f && !k->expect &&
                  !k->errors && k->a_ts == 0 && k->b_ts == 0 && k->u == 0 && !k->engine,
                  "matmul-check: --a-scales/--b-scales/--c-in/--alpha/--beta/--u/--engine/--expect/--errors/"
                  "--*-tensor-scale belong to the external mode (with --result C.npy)");
        CLI_CHECK(k->p.M * k->p.N <= (1u << 24) && k->p.M * k->p.K <= (1u << 28) && k->p.K * k->p.N <= (1u << 28),
                  "matmul-check: %zu x %zu x %zu is too large for a check against MPFR; expected M*N <= 2^24 "
                  "and M*K, K*N <= 2^28", k->p.M, k->p.N, k->p.K);
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
    const char *ra = cli_parse_elem(&k->p.fa, k->a_name, "--a"), *rb = cli_parse_elem(&k->p.fb, k->b_name, "--b");
    CLI_CHECK(scale_given || !ra || !rb || !strcmp(ra, rb), "matmul-check: --a %s and --b %s use the recipes %s "
              "and %s; expected one --scale for both", k->a_name, k->b_name, ra, rb);
    if (!scale_given && (ra || rb)) k->scale = ra ? ra : rb;
    cli_parse_format(&k->p.o.out_fmt, k->out_name, "--out");
    const struct { const fmt_t *f; const char *opt, *name, *what; } held[] = {
        {&k->p.fa, "--a", k->a_name, "operands are held in float32"},
        {&k->p.fb, "--b", k->b_name, "operands are held in float32"},
        {&k->p.o.out_fmt, "--out", k->out_name, "C is float32"}};
    for (int i = 0; i < 3; i++)
        CLI_CHECK(fmt_values_fit_f32(held[i].f),
                  "%s '%s': %s; expected a format of float32 or narrower", held[i].opt, held[i].name, held[i].what);
    char msg[512];
    CLI_CHECK(fmt_scaling_from_name(&k->p.sc, k->scale, msg, sizeof msg) == FMT_OK, "--scale: %s",
              msg[0] ? msg : "unknown recipe");
    CLI_CHECK(mm_acc_from_name(&k->p.o.acc, k->acc_spec, msg, sizeof msg) == MM_OK, "--acc: %s",
              msg[0] ? msg : "unknown accumulator; expected fp32, bf16, fp16 or mNN[:promote=N]");
    k->emulated = mm_acc_is_emulated(&k->p.o.acc);
    fmt_scaling_name(&k->p.sc, k->sname, sizeof k->sname);
    mm_acc_name(&k->p.o.acc, k->acc_desc, sizeof k->acc_desc);
    if (!k->external) mc_check_memory(k);
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
static double operand_bytes(const mc_cfg *k, bool is_a, double R, double C) {
    const double Kd = is_a ? C : R, other = is_a ? R : C;
    const int t = is_a ? k->p.sc.tile_cols : k->p.sc.tile_rows;
    const double nblk = k->p.sc.none ? 0 : t > 0 ? ceil(Kd / t) : 1;
    return 12.0 * R * C + 2 * 4.0 * other * nblk;
}

// Dies when M x N x K would need more than the limit: the operands, the results, mm_cpu's copies
// of the operands, the verifier's per-output arrays (and --errors'), and each thread's buffers
// of the reference and the engines (4 K doubles each; MPFR's own are a few KiB).
void mc_check_memory(const mc_cfg *k) {
    const double M = (double)k->p.M, N = (double)k->p.N, K = (double)k->p.K, n = M * N;
    double b = operand_bytes(k, true, M, K) + operand_bytes(k, false, K, N);
    b += k->external ? 8 * n : 8 * n + 8 * (M * K + K * N);  // C and C0 | C, Cref and mm_cpu's copies
    b += 44 * n + (k->errors ? 82 * n : 0);                     // mm_verify; --errors' columns and rows
    b += max_threads() * (32 * (K + 64) + 65536.0);
    const double lim = (double)MC_MEM_LIMIT_GIB * (1 << 30);
    CLI_CHECK(b <= lim, "matmul-check: M=%zu N=%zu K=%zu needs about %.1f GiB (operands, results, the verifier's "
              "per-output arrays, %d threads' reference buffers of K doubles); the limit is %d GiB: expected a "
              "smaller product", k->p.M, k->p.N, k->p.K, b / (1 << 30), max_threads(), MC_MEM_LIMIT_GIB);
}

// --- the rows and the printout

void mc_verify_row(mc_row *r, const mm_verify_outputs *out, const float *C, const float *Cin, const mm_operand *A,
                   const mm_operand *B, const mc_cfg *k, double u, const char *expect, bool candidates) {
    const mm_verify_opts vo = {.u = u, .extra = k->also, .n_extra = candidates ? k->nalso : 0, .expect = expect,
                               .no_candidates = !candidates, .engine = candidates ? k->engine : NULL};
    const mm_verify_problem vp = {.A = A, .B = B, .M = k->p.M, .N = k->p.N, .K = k->p.K, .o = k->p.o, .C = C,
                                  .C_in = Cin, .ldc = k->p.N};
    char msg[512];
    const int st = mm_verify_run(&r->rep, out, &vp, &vo, msg, sizeof msg);
    CLI_CHECK(st != MM_EINVAL, "matmul-check: %s", msg[0] ? msg : "the configuration is not valid");
    MC_CHECK(st, "mm_verify_run failed");
}

static const char *rule_text(const mm_verify_report *p, char *buf, size_t cap) {
    if (p->rule == MM_RULE_BITEXACT) snprintf(buf, cap, "bit-exact:%s", p->cand[p->rule_cand].spec);
    else snprintf(buf, cap, "%s", mm_verify_rule_name(p->rule));
    return buf;
}

static void print_json(const mc_cfg *k, const mc_row *rows, int nrows, bool pass) {
    const double flops = 2.0 * (double)k->p.M * (double)k->p.N * (double)k->p.K;
    printf("{\n  \"config\": {\"mode\": \"%s\", \"m\": %zu, \"n\": %zu, \"k\": %zu, \"a\": \"%s\", \"b\": \"%s\", "
           "\"out\": \"%s\", \"scale\": \"%s\", ", k->external ? "external" : "generated", k->p.M, k->p.N, k->p.K,
           k->p.fa.name, k->p.fb.name, k->p.o.out_fmt.name, k->sname);
    if (k->external) {
        printf("\"result\": \"%s\", ", k->result);
        json_num("alpha", k->p.o.alpha, true);
        json_num("beta", k->p.o.beta, false);
    } else {
        printf("\"acc\": \"%s\", \"promote_every\": %d, \"emulated\": %s, \"backend\": \"%s\", \"seed\": %llu, "
               "\"dist\": \"%s\"", k->acc_desc, k->p.o.acc.promote_every, k->emulated ? "true" : "false", k->backend,
               (unsigned long long)k->seed, mm_dist_name(k->dist));
    }
    printf("},\n  \"results\": [\n");
    for (int i = 0; i < nrows; i++) {
        const mm_verify_report *p = &rows[i].rep;
        char rb[96];
        printf("    {\"backend\": \"%s\", ", rows[i].name);
        if (!isnan(rows[i].time_s)) json_num("time_s", rows[i].time_s, true);
        if (rows[i].gflops) json_num("gflops", flops / rows[i].time_s * 1e-9, true);
        if (rows[i].path.kernel)
            printf("\"kernel\": \"%s\", \"model_outputs\": %zu, ", rows[i].path.kernel, rows[i].path.model_outputs);
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

static void print_table(const mc_cfg *k, const mc_row *rows, int nrows, bool pass) {
    const double flops = 2.0 * (double)k->p.M * (double)k->p.N * (double)k->p.K;
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
    // The candidates of the mc_row under test (the last).
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
               "rule: %s)\n", pass ? "PASS" : "FAIL", p->outside, p->judged, k->p.K + 2, ilogb(p->u), name,
               rule_text(p, rb, sizeof rb));
    if (p->rule == MM_RULE_BITEXACT && p->expect_cand < 0)
        printf("the bound fails, but %s equals %s bit for bit in all %zu outputs\n", name,
               p->cand[p->rule_cand].spec, p->n);
    if (p->excluded)
        printf("note: %zu of %zu exact results overflow %s (beyond max + ulp/2) or are not finite; excluded from "
               "the errors and the bound%s\n", p->excluded, p->n, k->p.o.out_fmt.name,
               p->judged ? "" : "; with nothing judged the check fails");
}

int mc_report(const mc_cfg *k, const mc_row *rows, int nrows) {
    bool pass = true;
    for (int i = 0; i < nrows; i++) pass &= rows[i].rep.pass;
    if (k->outfmt == CLI_OUT_JSON) print_json(k, rows, nrows, pass);
    else print_table(k, rows, nrows, pass);
    return pass ? 0 : 1;
}

int cmd_matmul_check(int argc, char **argv) {
    mc_cfg k;
    if (!parse_options(&k, argc, argv)) return 0;
    return k.external ? mc_external(&k) : mc_generated(&k);
}
