// cuda_suite.h: what the suites that run on a GPU, or on the CPU through tests/cuda_shim.cpp,
// share: a test without its backend skips, or fails where FPLAB_REQUIRE_GPU is set (make
// test-gpu, tools/gpu_run.sh: a GPU machine must not pass by skipping), and make test's summary
// gets one "[SKIP] WHAT: ..." line per suite that skipped (Makefile run-tests collects them).
// Included by the device build of a suite (the shim build has its backend always).
#ifndef FPLAB_TESTS_CUDA_SUITE_H
#define FPLAB_TESTS_CUDA_SUITE_H

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FPLAB_HAVE_CUDA
#include <cuda_runtime_api.h>

// Whether a device runs this suite; else why not, in msg.
static bool device_ok(char *msg, size_t len) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(msg, len, "no usable CUDA device: %s", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return false;
    }
    return true;
}
#else
static bool device_ok(char *msg, size_t len) {
    snprintf(msg, len, "fplab was built without nvcc");
    return false;
}
#endif

static void need_backend(void) {
    char msg[256];
    if (device_ok(msg, sizeof msg)) return;
    const char *req = getenv("FPLAB_REQUIRE_GPU");
    if (req && *req && strcmp(req, "0")) cr_assert_fail("FPLAB_REQUIRE_GPU is set, but: %s", msg);
    cr_skip_test("%s", msg);
}

// The summary line of a suite (what: the summary's label; suite: the binary's name).
static void cuda_suite_report(const struct criterion_global_stats *stats, const char *what, const char *suite) {
    char msg[256];
    if (stats->tests_skipped && !device_ok(msg, sizeof msg))
        printf("[SKIP] %s: %zu of %zu tests of %s (%s); make test-gpu on a machine with one\n", what,
               stats->tests_skipped, stats->nb_tests, suite, msg);
    fflush(stdout);
}

#endif
