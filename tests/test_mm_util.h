// test_mm_util.h: matmul helpers shared by the scaled_mm suites (test_mm_ref.c, test_mm_cpu.c,
// test_mm_cuda.c, test_mm_cuda_shim.c), header-only: random operands (NaN-padded storage,
// random block scales, scaling recipes) drawn from a tu_rng, and the check of a float32-accumulated
// product against mm_ref_exact's exact value within the verifier's bound (kernels/mm_verify.h:
// gamma_{K+2}(u) * absdot plus the output rounding), asserted per element.
#ifndef FPLAB_TEST_MM_UTIL_H
#define FPLAB_TEST_MM_UTIL_H

#include "formats/round.h"
#include "kernels/mm_verify.h"
#include "kernels/scaled_mm.h"
#include "test_util.h"

// mm_opts with the accumulator spec (mm_acc_from_name); a bad spec fails the test.
static inline mm_opts tu_acc_opts(const char *spec) {
    mm_opts o;
    mm_opts_default(&o);
    char msg[256];
    cr_assert_eq(mm_acc_from_name(&o.acc, spec, msg, sizeof msg), MM_OK, "%s: %s", spec, msg);
    return o;
}

// --- random operands

typedef enum { SC_NONE, SC_POW2, SC_E4M3 } tu_scale_kind;

// One operand with its storage. rows x cols is the op shape (A: M x K, B: K x N), stored
// transposed if trans.
typedef struct {
    float *x, *scales;
    mm_operand op;
} tu_operand;

// Table formats that make sense as elements: <= 16 bits, signed, with a zero (e8m0 excepted:
// a scale format with no zero and no sign).
static inline bool tu_elem_format(const fmt_t *f) { return f->bits <= 16 && f->has_zero && f->is_signed; }

// Element magnitudes that keep a format's products and sums finite in float32.
static inline double tu_vscale(const fmt_t *f) { return f->max < 8 ? f->max / 4 : 1.0; }

// Zeroes *o and allocates its storage with a random leading dimension (the stored row length
// plus 0..3, one draw of r), every element NaN: the caller writes the values, and the padding
// keeps its NaN so that reading it shows. Returns the leading dimension.
static inline size_t tu_operand_storage(tu_operand *o, tu_rng *r, size_t rows, size_t cols, bool trans) {
    memset(o, 0, sizeof *o);
    const size_t srows = trans ? cols : rows, scols = trans ? rows : cols;
    const size_t ld = scols + (size_t)tu_rng_int(r, 0, 3);
    o->x = malloc(srows * ld * sizeof *o->x + 1);
    cr_assert(o->x);
    for (size_t i = 0; i < srows * ld; i++) o->x[i] = NAN;
    return ld;
}

// Random scales of kind sk (none: nothing drawn), one per (row, K-block) of A or (K-block,
// column) of B, K-blocks of block_k (0: all of K): 2^[-4, 4] for SC_POW2, e4m3 values of
// 2 |normal| + 0.05 for SC_E4M3. Sets o->scales and o->op.scales.
static inline void tu_operand_scales(tu_operand *o, tu_rng *r, bool is_a, size_t rows, size_t cols,
                                     size_t K, int block_k, tu_scale_kind sk) {
    if (sk == SC_NONE) return;
    const size_t bk = block_k > 0 ? (size_t)block_k : K;
    const size_t nb = (K + bk - 1) / bk, ns = nb * (is_a ? rows : cols);
    o->scales = malloc(ns * sizeof *o->scales);
    cr_assert(o->scales);
    const fmt_t e4m3 = tu_fmt("e4m3");
    const fmt_round_opts ro = {0};
    for (size_t i = 0; i < ns; i++)
        o->scales[i] = sk == SC_POW2 ? ldexpf(1.0f, tu_rng_int(r, -4, 4))
                                     : (float)fmt_round1(&e4m3, fabs(tu_rng_normal(r)) * 2 + 0.05, &ro);
    o->op.scales = o->scales;
}

static inline void tu_operand_free(tu_operand *o) { free(o->x), free(o->scales); }

// Scaling recipes of the CUDA suites: scales, block_k and tensor scales of both operands.
typedef struct {
    const char *name;
    tu_scale_kind sk;
    int block_k;
    bool tensor;  // random tensor scales
} tu_recipe;

static const tu_recipe TU_R_TENSOR = {"tensor", SC_NONE, 0, true};
static const tu_recipe TU_R_MX = {"mx", SC_POW2, 32, false};
static const tu_recipe TU_R_NVFP4 = {"nvfp4", SC_E4M3, 16, true};
static const tu_recipe TU_R_ROW = {"row", SC_POW2, 0, false};

// One random operand (see tu_operand): values of f, random normals times tu_vscale(f) rounded
// to f; scales, block_k and tensor scale from the recipe.
static inline void tu_recipe_operand(tu_operand *o, tu_rng *r, bool is_a, const fmt_t *f, size_t rows,
                                     size_t cols, size_t K, bool trans, const tu_recipe *rc) {
    const size_t ld = tu_operand_storage(o, r, rows, cols, trans);
    const size_t srows = trans ? cols : rows, scols = trans ? rows : cols;
    const double vs = tu_vscale(f);
    const fmt_round_opts ro = {0};
    for (size_t i = 0; i < srows; i++)
        for (size_t j = 0; j < scols; j++) o->x[i * ld + j] = (float)fmt_round1(f, tu_rng_normal(r) * vs, &ro);
    const float ts = rc->tensor ? (float)(0.5 + tu_rng_unif(r)) : 0.0f;  // any float32
    o->op = (mm_operand){.x = o->x, .ld = ld, .trans = trans, .fmt = *f, .block_k = rc->block_k,
                         .tensor_scale = ts};
    tu_operand_scales(o, r, is_a, rows, cols, K, rc->block_k, rc->sk);
}

// --- one random product: operands, options, C before the call, and the exact result

typedef struct {
    tu_operand A, B;
    mm_opts o;
    size_t M, N, K, ldc;
    float *C, *Cin;          // M x ldc: C for the backend to overwrite, Cin its value before
    double *exact, *absdot;  // M x N, from mm_ref_exact
    char what[320];          // the case, for failure messages
} tu_mm_case;

// Draws A (formats fa, M x K) and B (fb, K x N) with recipe rc and random trans, alpha, beta
// (each kept at 1 / 0 half the time), a padded ldc and random C; output format out with mode
// and saturation; then computes the exact result. label names the test and the path.
static inline void tu_mm_case_make(tu_mm_case *c, tu_rng *r, const char *label, const fmt_t *fa,
                                   const fmt_t *fb, size_t M, size_t N, size_t K, const tu_recipe *rc,
                                   const fmt_t *out, fmt_round_mode mode) {
    memset(c, 0, sizeof *c);
    c->M = M, c->N = N, c->K = K;
    tu_recipe_operand(&c->A, r, true, fa, M, K, K, tu_rng_int(r, 0, 1), rc);
    tu_recipe_operand(&c->B, r, false, fb, K, N, K, tu_rng_int(r, 0, 1), rc);
    mm_opts_default(&c->o);
    c->o.alpha = tu_rng_int(r, 0, 1) ? 1.0f : (float)tu_rng_normal(r);
    c->o.beta = tu_rng_int(r, 0, 1) ? 0.0f : (float)tu_rng_normal(r);
    c->o.out_fmt = *out;
    c->o.out_round.mode = mode;
    c->o.out_round.overflow = FMT_SATURATE;
    c->ldc = N + (size_t)tu_rng_int(r, 0, 2);
    c->C = malloc(M * c->ldc * sizeof *c->C), c->Cin = malloc(M * c->ldc * sizeof *c->Cin);
    c->exact = malloc(M * N * sizeof *c->exact), c->absdot = malloc(M * N * sizeof *c->absdot);
    cr_assert(c->C && c->Cin && c->exact && c->absdot);
    for (size_t i = 0; i < M * c->ldc; i++) c->C[i] = c->Cin[i] = (float)tu_rng_normal(r);
    snprintf(c->what, sizeof c->what, "%s (%s x %s, %s, M %zu N %zu K %zu, trans %d%d, alpha %g beta %g, out %s %s)",
             label, fa->name, fb->name, rc->name, M, N, K, c->A.op.trans, c->B.op.trans, c->o.alpha,
             c->o.beta, out->name, fmt_mode_name(mode));
    cr_assert_eq(mm_ref_exact(c->exact, c->absdot, c->Cin, c->ldc, &c->A.op, &c->B.op, M, N, K, &c->o), MM_OK,
                 "%s: mm_ref_exact", c->what);
}

static inline void tu_mm_case_free(tu_mm_case *c) {
    free(c->C), free(c->Cin), free(c->exact), free(c->absdot);
    tu_operand_free(&c->A), tu_operand_free(&c->B);
}

// --- the bound (mm_verify_gamma, mm_verify_bound: the verifier's own formula)

// gamma_n = n u / (1 - n u) for unit roundoff u.
static inline double tu_gamma(double n, double u) { return n * u / (1 - n * u); }

// Distance from |x| to the next value of f above it (its ulp at x; subnormal spacing below the
// smallest normal): mm_verify_ulp.
static inline double tu_ulp_at(const fmt_t *f, double x) { return mm_verify_ulp(f, x); }

// Asserts, for every element of the M x N result C (leading dimension ldc), that it is exact's
// NaN or inf, or within gamma_{K+2}(u) * absdot plus the output rounding of exact. With Cin (C
// before the call) also asserts that the padding of C was not written; NULL skips that check.
static inline void tu_check_bound(const char *what, const float *C, const float *Cin, size_t ldc,
                                  const double *exact, const double *absdot, size_t M, size_t N,
                                  size_t K, const mm_opts *o, double u) {
    const double gamma = mm_verify_gamma(K, u);
    for (size_t i = 0; i < M; i++) {
        for (size_t j = 0; j < N; j++) {
            const double c = C[i * ldc + j], ex = exact[i * N + j], ad = absdot[i * N + j];
            if (isnan(ex)) {
                cr_assert(isnan(c), "%s C[%zu,%zu]: exact NaN, got %a", what, i, j, c);
                continue;
            }
            if (isinf(ex)) {
                cr_assert(c == ex, "%s C[%zu,%zu]: exact %g, got %a", what, i, j, ex, c);
                continue;
            }
            const double tol = mm_verify_bound(&o->out_fmt, o->out_round.mode, gamma, ad, ex, c);
            cr_assert(fabs(c - ex) <= tol, "%s C[%zu,%zu]: got %a exact %a |err| %g > %g (absdot %g)",
                      what, i, j, c, ex, fabs(c - ex), tol, ad);
        }
        if (!Cin) continue;
        for (size_t j = N; j < ldc; j++)  // the padding of C is not written
            cr_assert(memcmp(&C[i * ldc + j], &Cin[i * ldc + j], sizeof(float)) == 0,
                      "%s: padding C[%zu,%zu] was overwritten", what, i, j);
    }
}

#endif
