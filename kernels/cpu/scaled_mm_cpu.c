// scaled_mm_cpu.c: the CPU backend of scaled_mm.h (mm_cpu).
// - fp32 accumulation: the scales are folded into the operands (O(n^2), OpenMP) and one
//   cblas_sgemm does the O(n^3) work; C is then rounded to the output format. With
//   o->fixed_order, or without a BLAS, scaled_mm_cpu_fixed.c does it in one fixed order.
// - emulated accumulators: scaled_mm_cpu_emu.c.
// Buffers: C (M x N, ldc) is overwritten (read first when beta != 0); A, B are read only.
// Constraints: no MPFR, no global state (the scratch buffers are the calling thread's own);
// results do not depend on the number of threads.
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifdef FPLAB_HAVE_BLAS
#include <cblas.h>
#endif

#include "kernels/scaled_mm_internal.h"

// C rows = round_out(C rows); element (i, j) draws stochastic counter offset + i*N + j.
int mm__round_output(float *C, size_t ldc, size_t M, size_t N, const mm_opts *o) {
    if (fmt_contains_f32(&o->out_fmt)) return MM_OK;  // every float32 is a value: a copy
    if (ldc == N) return fmt_round_f32(&o->out_fmt, C, M * N, &o->out_round, NULL) ? MM_EINVAL : MM_OK;
    int st = MM_OK;
#pragma omp parallel for schedule(static) if (M * N > (1u << 16))
    for (size_t i = 0; i < M; i++) {
        fmt_round_opts ro = o->out_round;
        ro.offset += i * N;
        if (fmt_round_f32(&o->out_fmt, C + i * ldc, N, &ro, NULL)) st = MM_EINVAL;
    }
    return st;
}

// --- fp32 accumulation: fold scales, one sgemm

// A buffer of n floats (folded or packed operands; free with free). From 256 KiB on it is asked
// for in transparent huge pages (rounded up to 2 MiB): fresh small pages cost a fault each, and
// glibc hands such buffers back to the system on free, so every call faulted them in again (the
// cost: docs/benchmarks.md).
float *mm__alloc_f32(size_t n) {
    const size_t bytes = n * sizeof(float), huge = (size_t)2 << 20;
    if (bytes < ((size_t)256 << 10)) return malloc(bytes ? bytes : 1);
    const size_t whole = (bytes + huge - 1) / huge * huge;  // aligned_alloc wants a multiple
    float *t = aligned_alloc(huge, whole);
#ifdef MADV_HUGEPAGE
    if (t) madvise(t, whole, MADV_HUGEPAGE);  // advice only: may fail
#endif
    return t;
}

// The calling thread's scratch buffers, one per slot (MM__SCRATCH_A, MM__SCRATCH_B): a
// product's folded or packed operands live here between calls, grown when a product needs more
// and never shrunk, so a trainer's thousands of products per step fault and clear their pages
// once, not on every call.
// Freed when the thread ends (a key destructor) or by mm_scratch_release.
typedef struct {
    float *p;
    size_t cap;
} scratch_buf;
static _Thread_local scratch_buf scratch[MM__SCRATCH_SLOTS];
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

void mm_scratch_release(void) {
    for (int i = 0; i < MM__SCRATCH_SLOTS; i++) free(scratch[i].p), scratch[i] = (scratch_buf){0};
}
static void scratch_at_exit(void *unused) {
    (void)unused;
    mm_scratch_release();
}
static void scratch_key_make(void) { pthread_key_create(&scratch_key, scratch_at_exit); }

float *mm__scratch_f32(int slot, size_t n) {
    scratch_buf *b = &scratch[slot];
    if (n <= b->cap) return b->p;
    pthread_once(&scratch_once, scratch_key_make);
    pthread_setspecific(scratch_key, scratch);  // non-NULL: the destructor runs at thread exit
    float *t = mm__alloc_f32(n);
    if (!t) return NULL;
    free(b->p);
    b->p = t, b->cap = n;
    return t;
}

// The folded operand a[i,k] * sa[i, k/bk] is exact in float32 when the scale is a power of two
// (e8m0, and ue8m0-style tensor recipes) or an e4m3 scale times an element of <= 4 bits of
// precision (NVFP4), barring float32 overflow/underflow. For other scale formats the product
// is rounded once, which costs up to one more u per operand on top of the header's gamma_{K+2}
// bound (gamma_{K+4} would cover it).
//
// The fold keeps the stored shape (a transposed operand stays transposed and sgemm is told so):
// the copy then streams through memory in order. It is memory-bound and runs on the OpenMP
// threads. libgomp's idle workers once spun on the cores OpenBLAS needed after a parallel fold;
// fplab caps that spinning (GOMP_SPINCOUNT, kernels/blas_tune.h), so the parallel fold does not
// cost the sgemm (docs/benchmarks.md).
// slot: the scratch buffer it goes to (the fixed-order kernel packs the result into _A and _B).
static float *fold_a(const mm_operand *A, size_t M, size_t K, size_t *ld_out, int slot) {
    size_t bk, nb = mm__nblocks(A, K, &bk);
    float *t = mm__scratch_f32(slot, M * K);
    if (!t) return NULL;
    const float *x = A->x, *s = A->scales;
    const size_t ld = A->ld;
    if (!A->trans) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < M; i++)
            for (size_t g = 0, k0 = 0; g < nb; g++, k0 += bk) {
                const float sg = s[i * nb + g];
                const size_t k1 = k0 + bk < K ? k0 + bk : K;
                for (size_t k = k0; k < k1; k++) t[i * K + k] = x[i * ld + k] * sg;
            }
        *ld_out = K;
    } else {  // stored K x M
#pragma omp parallel for schedule(static)
        for (size_t k = 0; k < K; k++) {
            const size_t g = k / bk;
            for (size_t i = 0; i < M; i++) t[k * M + i] = x[k * ld + i] * s[i * nb + g];
        }
        *ld_out = M;
    }
    return t;
}

static float *fold_b(const mm_operand *B, size_t N, size_t K, size_t *ld_out, int slot) {
    size_t bk, nb = mm__nblocks(B, K, &bk);
    float *t = mm__scratch_f32(slot, N * K);
    if (!t) return NULL;
    const float *x = B->x, *s = B->scales;
    const size_t ld = B->ld;
    if (!B->trans) {  // stored K x N
#pragma omp parallel for schedule(static)
        for (size_t k = 0; k < K; k++) {
            const float *sk = s + (k / bk) * N;
            for (size_t j = 0; j < N; j++) t[k * N + j] = x[k * ld + j] * sk[j];
        }
        *ld_out = N;
    } else {  // stored N x K
#pragma omp parallel for schedule(static)
        for (size_t j = 0; j < N; j++)
            for (size_t g = 0, k0 = 0; g < nb; g++, k0 += bk) {
                const float sg = s[g * N + j];
                const size_t k1 = k0 + bk < K ? k0 + bk : K;
                for (size_t k = k0; k < k1; k++) t[j * K + k] = x[j * ld + k] * sg;
            }
        *ld_out = K;
    }
    return t;
}

static int mm_cpu_fp32(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                       size_t N, size_t K, const mm_opts *o) {
    const float alpha = mm__fl32_prod3(o->alpha, mm__tscale(A), mm__tscale(B)), beta = o->beta;
#ifdef FPLAB_HAVE_BLAS
    const bool fixed = o->fixed_order;
#else
    const bool fixed = true;  // without a BLAS: the fixed-order kernel, the same bits as with one
#endif
    size_t lda = A->ld, ldb = B->ld;
    float *fa = A->scales ? fold_a(A, M, K, &lda, fixed ? MM__SCRATCH_FOLD_A : MM__SCRATCH_A) : NULL;
    float *fb = B->scales ? fold_b(B, N, K, &ldb, fixed ? MM__SCRATCH_FOLD_B : MM__SCRATCH_B) : NULL;
    if ((A->scales && !fa) || (B->scales && !fb)) return MM_ENOMEM;
    const float *a = fa ? fa : A->x, *b = fb ? fb : B->x;
    mm__path_note(o, fixed ? "fixed" : "blas", 0);
    if (fixed) {
        const mm_operand fa_op = {.x = a, .ld = lda, .trans = A->trans}, fb_op = {.x = b, .ld = ldb, .trans = B->trans};
        const int st = mm__cpu_fp32_fixed(C, ldc, &fa_op, &fb_op, M, N, K, alpha, beta);
        return st == MM_OK ? mm__round_output(C, ldc, M, N, o) : st;
    }
#ifdef FPLAB_HAVE_BLAS
    cblas_sgemm(CblasRowMajor, A->trans ? CblasTrans : CblasNoTrans,
                B->trans ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, a, (int)lda, b,
                (int)ldb, beta, C, (int)ldc);
#endif
    return mm__round_output(C, ldc, M, N, o);
}

// --- entry point

int mm_cpu(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
           size_t K, const mm_opts *o) {
    char msg[256];
    const int st = mm_validate(A, B, M, N, K, o, msg, sizeof msg);
    if (st != MM_OK) return st;
    if (o->path) *o->path = (mm_path){.kernel = "none", .outputs = M * N};
    if (M == 0 || N == 0) return MM_OK;
    if (K == 0) {  // C = round_out(fl32(beta * C)), or 0 (C is not read when beta == 0)
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++) {
                float *c = C + i * ldc + j;
                *c = o->beta != 0.0f ? o->beta * *c : 0.0f;
            }
        return mm__round_output(C, ldc, M, N, o);
    }
    return mm_acc_is_emulated(&o->acc) ? mm__cpu_emulated(C, ldc, A, B, M, N, K, o)
                                       : mm_cpu_fp32(C, ldc, A, B, M, N, K, o);
}
