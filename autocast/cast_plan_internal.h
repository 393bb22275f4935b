// cast_plan_internal.h: the executor of autocast.h's cast plans over a table of cast calls, so
// that tests run a plan through tests/cuda_shim.cpp (the CUDA kernels' source on the CPU) as
// ac_cast_plan_run runs it through kernels/cast_cuda.h. Internal: libfplab.a only.
#ifndef FPLAB_CAST_PLAN_INTERNAL_H
#define FPLAB_CAST_PLAN_INTERNAL_H

#include "autocast/autocast.h"

// The two calls a plan needs, with kernels/cast_cuda.h's prototypes and statuses.
typedef struct {
    int (*round)(const fmt_t *f, float *out, const float *in, size_t n, float pre, float post,
                 const fmt_round_opts *o, uint64_t *counts, void *stream);
    int (*quantize)(const fmt_t *elem, const fmt_scaling *sc, float *out, float *elems, float *scales,
                    const float *in, size_t rows, size_t cols, const fmt_round_opts *o, uint64_t *counts,
                    void *stream);
} ac__cast_calls;

// ac_cast_plan_run on the calls k.
int ac__cast_plan_run_with(const ac_cast_plan *p, const ac__cast_calls *k, float *out, float *one_scale,
                           const float *in, uint64_t *counts, void *stream);

#endif
