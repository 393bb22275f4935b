// blas_tune.h: make OpenBLAS use the kernels this CPU can run. Debian's OpenBLAS 0.3.21 does not
// recognise some newer CPUs (AVX-512 Xeons) and falls back to its SSE3 kernels, about 5x slower;
// OPENBLAS_CORETYPE fixes it, but OpenBLAS reads it when the library loads, before main runs.
// Constraints: process level only (it may replace the process), called first thing in main.
#ifndef FPLAB_BLAS_TUNE_H
#define FPLAB_BLAS_TUNE_H

#include <stdbool.h>
#include <stddef.h>

// The core type OpenBLAS should use on this CPU if the one it picked is an older, slower family
// ("SkylakeX" on AVX-512, "Haswell" on AVX2+FMA), written to want; false when its choice is
// fine, when OPENBLAS_CORETYPE is already set, or without OpenBLAS.
bool mm_blas_better_coretype(char *want, size_t len);

// If mm_blas_better_coretype says so, sets OPENBLAS_CORETYPE; unless the user set
// OMP_WAIT_POLICY or GOMP_SPINCOUNT, sets GOMP_SPINCOUNT=1000 (short spinning: a shared or busy
// machine no longer slows OpenMP loops tenfold); then re-executes the program (/proc/self/exe
// with the same argv) once, since both libraries read their variables when they load.
// Returns normally when nothing needs setting or if exec fails.
void mm_blas_tune_or_reexec(char **argv);

// Threads of OpenBLAS's own pool (n > 0; n <= 0 leaves its default).
void mm_blas_set_threads(int n);

#endif
