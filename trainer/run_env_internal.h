// run_env_internal.h: what a run's log records about where its numbers came from (the build, the CPU,
// the BLAS kernel and the summation mode), so that a published number names its machine.
#ifndef FPLAB_RUN_ENV_INTERNAL_H
#define FPLAB_RUN_ENV_INTERNAL_H
#include <stdio.h>

// Writes, as members of a JSON object already open (each preceded by a comma):
// "reproducible" (the --reproducible the run uses), "commit" (git describe of the build's tree,
// "unknown" outside a git build), "cpu" (the model name), "openblas_coretype" ("" when unset),
// "blas_core" (OpenBLAS's kernel family; "none" without a BLAS), "isa" (the widest vector ISA
// the CPU offers fplab's dispatched kernels) and "build_isa" (the one this build was compiled
// for). Internal to the trainer (the train__ prefix).
void train__log_env(FILE *f, int reproducible);

#endif
