// cublaslt_lazy.cuh: cuBLASLt opened on its first use (dlopen), not linked. Linked, it slows every
// start of every program that links fplab, GPU or not: the dynamic loader applies its
// relocations and faults in its pages (docs/benchmarks.md); fplab needs it only for mm_cuda's
// cuBLASLt path. Included by scaled_mm_cuda.cu only.
// Constraints: the library of the headers' major version (libcublasLt.so.N, found as the linker
// would: the caller's RUNPATH, LD_LIBRARY_PATH, the system's cache); opened once per process
// (std::call_once), never closed; every function this backend calls is listed in LT_FUNCS and
// resolved before any is used.
#pragma once

#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdio>
#include <mutex>

#define LT_FUNCS(X)                                                                                 \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetStatusName) X(cublasLtGetStatusString)        \
    X(cublasLtMatmul) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulDescCreate)                  \
    X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatmulPreferenceCreate) \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                       \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)

#define LT_STR_(x) #x
#define LT_STR(x) LT_STR_(x)
#define LT_SONAME "libcublasLt.so." LT_STR(CUBLAS_VER_MAJOR)

struct LtApi {
#define LT_MEMBER(f) decltype(&::f) f;
    LT_FUNCS(LT_MEMBER)
#undef LT_MEMBER
};

// The functions, or nullptr with why (if not null) saying what failed: dlopen's or dlsym's
// message, kept for the process.
static const LtApi *lt_api(const char **why) {
    static LtApi api;
    static bool ok;
    static char err[512];
    static std::once_flag once;
    std::call_once(once, [] {
        void *h = dlopen(LT_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(err, sizeof err, "cannot open cuBLASLt: %s", dlerror());
            return;
        }
#define LT_RESOLVE(f)                                                                        \
    if (!(api.f = reinterpret_cast<decltype(&::f)>(dlsym(h, #f)))) {                         \
        snprintf(err, sizeof err, "%s has no %s: %s", LT_SONAME, #f, dlerror());             \
        return;                                                                              \
    }
        LT_FUNCS(LT_RESOLVE)
#undef LT_RESOLVE
        ok = true;
    });
    if (!ok && why) *why = err;
    return ok ? &api : nullptr;
}

// cuBLASLt's function f, once lt_api has succeeded (the caller's check).
#define LT(f) (lt_api(nullptr)->f)
