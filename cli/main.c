// main.c: the `fplab` command's entry point: top-level help and dispatch to a subcommand.
// Each subcommand lives in its own cmd_*.c and parses its own options.
// Process level: this is where the command may re-execute itself (once, with the OpenBLAS and
// OpenMP settings the library recommends; kernels/blas_tune.h); the library never does.
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "formats/round.h"
#include "kernels/blas_tune.h"
#include "kernels/scaled_mm.h"

#ifndef FPLAB_VERSION
#error "FPLAB_VERSION is defined once, by the Makefile's VERSION (-DFPLAB_VERSION=\"x.y.z\")"
#endif
#ifndef FPLAB_COMMIT  // git describe --always --dirty of the tree it was built from (Makefile)
#define FPLAB_COMMIT "unknown"
#endif

// --version: the version, the commit, what the build has (CUDA, MPI, OpenMP, BLAS, the -march
// it was compiled for) and which rounding paths this CPU runs; a bug report starts here.
static void version(void) {
    printf("fplab %s (commit %s)\n", FPLAB_VERSION, FPLAB_COMMIT);
    char msg[256] = "";
#ifdef FPLAB_HAVE_CUDA
    const bool gpu = mm_cuda_available(msg, sizeof msg);
    printf("cuda: yes (%s)\n", gpu ? "a GPU is present" : msg);
#else
    (void)msg;
    printf("cuda: no (built without nvcc)\n");
#endif
#ifdef FPLAB_HAVE_MPI
    printf("mpi: yes\n");
#else
    printf("mpi: no\n");
#endif
#ifdef _OPENMP
    printf("openmp: yes (%d)\n", _OPENMP);
#else
    printf("openmp: no\n");
#endif
#ifdef FPLAB_HAVE_BLAS
    printf("blas: openblas\n");
#else
    printf("blas: no (the cpu backend's own loops)\n");
#endif
    printf("compiled for: %s\n",
#if defined(__AVX512F__)
           "AVX-512"
#elif defined(__AVX2__)
           "AVX2"
#elif defined(__x86_64__)
           "x86-64 (AVX2/AVX-512 copies chosen at run time)"
#else
           "this architecture's baseline"
#endif
    );
    // The float32 rounding paths this CPU runs, checked on fp16 (hw covers it) and e4m3 (lean).
    fmt_t f16, e4m3;
    fmt_from_name(&f16, "fp16");
    fmt_from_name(&e4m3, "e4m3");
    const fmt_round_opts o = {0};
    printf("rounding paths on this CPU:");
    for (int p = FMT_PATH_GENERIC; p < FMT_NPATHS; p++)
        if (fmt_path_available(p, &f16, &o, false) || fmt_path_available(p, &e4m3, &o, false))
            printf(" %s", fmt_path_name(p));
    printf(" (auto picks for e4m3: %s, fp16: %s)\n", fmt_path_name(fmt_path_chosen(&e4m3, &o, false)),
           fmt_path_name(fmt_path_chosen(&f16, &o, false)));
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"finfo", cmd_finfo, "properties of formats (max, min, eps, ...) as table, csv, json or md"},
    {"values", cmd_values, "every code of a format of 8 bits or fewer with its value and class"},
    {"cast", cmd_cast, "round numbers to a format: code, value and error"},
    {"quantize", cmd_quantize, "quantize a float32/float64 .npy with a scaling recipe"},
    {"engines", cmd_engines, "the tensor-core and matrix-core models (hopper:wgmma, cdna3:mfma, ...)"},
    {"matmul-check", cmd_matmul_check, "scaled matmul on a backend vs the MPFR reference: ulps, bound, time"},
    {"train", cmd_train, "train a Llama on a text file or llm.c token shards (checkpoints, resume)"},
    {"sample", cmd_sample, "generate text from a trained checkpoint (greedy, temperature, top-p)"},
    {"eval", cmd_eval, "validation loss of a checkpoint under inference policies (PTQ), per-site telemetry"},
    {"export", cmd_export, "write a checkpoint as a llama2.c model (and tokenizer.bin) for run.c"},
    {"policy", cmd_policy, "list, show or check precision policies (presets: fp32, bf16-amp, mxfp4, ...)"},
    {"ablate", cmd_ablate, "run a grid of precision policies x seeds (child trainings), then the report"},
    {"report", cmd_report, "report.md and gnuplot plots of an ablation directory"},
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE *fp) {
    fprintf(fp, "usage: fplab SUBCOMMAND [--option value ...]\n"
                "       fplab SUBCOMMAND --help\n"
                "       fplab --version\n\n"
                "fplab emulates floating-point formats (fp64 down to fp4, OCP MX, IEEE P3109 binaryKpP,\n"
                "custom eXmY; 'fplab finfo --aliases' lists every name).\n\n"
                "subcommands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(fp, "  %-13s %s\n", commands[i].name, commands[i].summary);
    fprintf(fp, "\nexit status: 0 success, 2 bad input (unknown option, format, mode, malformed file),\n"
                "1 internal failure.\n");
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        version();
        return 0;
    }
    // Before any BLAS call: may restart the process once with OPENBLAS_CORETYPE/GOMP_SPINCOUNT.
    mm_blas_tune_or_reexec(argv);
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "fplab: unknown subcommand '%s'; expected one of", argv[1]);
    for (int i = 0; i < NCOMMANDS; i++) fprintf(stderr, " %s", commands[i].name);
    fprintf(stderr, " (see 'fplab --help')\n");
    return CLI_EXIT_USAGE;
}
