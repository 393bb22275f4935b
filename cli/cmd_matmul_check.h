// cmd_matmul_check.h: what the modes of `fplab matmul-check` share (private to the command):
// the resolved options, the rows of the report, the verification of one row and the printout.
// cmd_matmul_check.c parses and dispatches; cmd_matmul_check_gen.c runs the generated mode,
// cmd_matmul_check_ext.c the external one (--result).
#ifndef FPLAB_CLI_CMD_MATMUL_CHECK_H
#define FPLAB_CLI_CMD_MATMUL_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "kernels/mm_check.h"
#include "kernels/mm_verify.h"

enum { MC_MAX_ALSO = 16, MC_EXIT_NO_GPU = 3 };

// A kernels/ call that failed after validation: not the user's doing; exit 1.
#define MC_CHECK(call, hint)                                                                       \
    do {                                                                                           \
        int mc_st_ = (call);                                                                       \
        if (mc_st_ != MM_OK) {                                                                     \
            fprintf(stderr, "fplab: %s:%d: %s returned %d (%s); %s\n", __FILE__, __LINE__, #call, \
                    mc_st_, mm_strerror(mc_st_), hint);                                            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct {
    const char *a_name, *b_name, *out_name, *scale, *acc_spec, *backend, *dist_name;
    const char *a_values, *b_values, *result, *a_scales, *b_scales, *c_in, *expect, *errors, *engine;
    const char *also[MC_MAX_ALSO];
    size_t nalso;
    float a_ts, b_ts;               // 0: not given (1)
    double u;                       // 0: not given
    uint64_t seed;
    cli_out outfmt;
    bool use_cuda, emulated, external;
    mm_check_problem p;             // sizes, formats, recipe, options (external: sizes from the files)
    mm_dist dist;
    char sname[96], acc_desc[128];
} mc_cfg;

// One verified result.
typedef struct {
    const char *name;
    double time_s;       // NaN: not timed (an external result)
    bool gflops;         // a kernel's speed is meaningful (not MPFR's, not a file's)
    mm_path path;        // the cpu backend's kernel (mm_cpu fills it); kernel NULL elsewhere
    mm_verify_report rep;
} mc_row;

// Dies when the check's buffers at their peak would pass the stated memory limit.
void mc_check_memory(const mc_cfg *k);
// mm_verify_run on one row (C M x N dense); a refused extra/expect/engine spec is bad input
// (exit 2). candidates: the row under test (the candidates, --also and --engine apply).
void mc_verify_row(mc_row *r, const mm_verify_outputs *out, const float *C, const float *Cin, const mm_operand *A,
                   const mm_operand *B, const mc_cfg *k, double u, const char *expect, bool candidates);
// Prints the rows (table or json) and returns the exit status: 0 when every row passed, else 1.
int mc_report(const mc_cfg *k, const mc_row *rows, int nrows);

int mc_generated(mc_cfg *k);
int mc_external(mc_cfg *k);

#endif
