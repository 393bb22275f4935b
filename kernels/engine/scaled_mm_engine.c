// scaled_mm_engine.c: scaled matmul through a matrix engine's arithmetic (acc.engine; the
// definition is in scaled_mm.h, the instruction models in engine.h): which instruction kind the
// operands pick, the segments of K, and the products, one dot product at a time through
// mm_engine_dot. mm_ref and mm_cpu both run it: the model is exact by construction, so it is
// its own reference.
// Constraints: no MPFR, no global state; results do not depend on the number of threads.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/scaled_mm_internal.h"

// --- the plan

static bool is_pow2_or_nan(float x) {
    if (isnan(x)) return true;
    int e;
    return x > 0 && frexpf(x, &e) == 0.5f && e - 1 >= -127 && e - 1 <= 127;
}

// A value of e4m3 (unsigned use: >= 0): a multiple of 2^-9 below 2^-6, else three fraction bits.
static bool is_ue4m3(float x) {
    if (isnan(x)) return true;
    if (!(x >= 0 && x <= 448.0f)) return false;
    if (x == 0) return true;
    const int e = ilogbf(x) < -6 ? -6 : ilogbf(x);
    const float m = ldexpf(x, 3 - e);
    return m == truncf(m);
}

static bool scales_all(const mm_operand *X, size_t rows, size_t nb, bool (*ok)(float)) {
    for (size_t t = 0; t < rows * nb; t++)
        if (!ok(X->scales[t])) return false;
    return true;
}

int mm_acc_check_operands(const mm_acc *acc, const fmt_t *fa, const fmt_t *fb, int block, char *msg,
                          size_t msg_len) {
    if (!acc->engine) return MM_OK;
    const int e = acc->engine - 1;
    const char *en = mm_engine_name((size_t)e);
    const unsigned ta = mm_engine_type_of(fa), tb = mm_engine_type_of(fb);
    char why[300] = "", name[96];
    mm_acc_name(acc, name, sizeof name);
    if (!ta || !tb) {
        mm_engine_find(e, MM_ET_F64, MM_ET_F64, 0, false, 0, false, why, sizeof why);
        snprintf(msg, msg_len, "accumulator %s: operand %c's format %s is not an operand type of any matrix "
                 "engine (%s)", name, !ta ? 'A' : 'B', !ta ? fa->name : fb->name, why);
        return MM_EINVAL;
    }
    // Every kind these operands may run: the scales' values pick a block-scaled one at run time
    // (mm__engine_plan_make), else the kind without scales.
    const mm_engine_kind *cand[3] = {
        mm_engine_find(e, ta, tb, acc->engine_k, acc->engine_f16, 0, false, why, sizeof why), NULL, NULL};
    if (block == 16 || block == 32) {
        cand[1] = mm_engine_find(e, ta, tb, acc->engine_k, acc->engine_f16, block, false, NULL, 0);
        cand[2] = mm_engine_find(e, ta, tb, acc->engine_k, acc->engine_f16, block, true, NULL, 0);
    }
    if (!cand[0] && !cand[1] && !cand[2]) {
        snprintf(msg, msg_len, "accumulator %s with operands %s x %s: %s", name, fa->name, fb->name, why);
        return MM_EINVAL;
    }
    for (int i = 0; i < 3; i++)
        if (cand[i] && acc->promote_every % cand[i]->k) {
            snprintf(msg, msg_len, "accumulator %s: promote=%d is not a multiple of k = %d, the k of %s's %s "
                     "instruction (%s) that operands %s x %s run; expected a multiple of %d",
                     name, acc->promote_every, cand[i]->k, en, cand[i]->kind, cand[i]->shape, fa->name, fb->name,
                     cand[i]->k);
            return MM_EINVAL;
        }
    return MM_OK;
}

int mm__engine_plan_make(mm__engine_plan *p, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                         size_t K, const mm_opts *o, char *msg, size_t msg_len) {
    memset(p, 0, sizeof *p);
    const int e = o->acc.engine - 1;
    size_t bka, bkb;
    const size_t nba = mm__nblocks(A, K, &bka), nbb = mm__nblocks(B, K, &bkb);
    const bool blocked = A->scales && B->scales && A->block_k > 0 && (A->block_k == 16 || A->block_k == 32);
    const int st = mm_acc_check_operands(&o->acc, &A->fmt, &B->fmt, blocked ? A->block_k : 0, msg, msg_len);
    if (st != MM_OK) return st;
    const unsigned sa = mm_engine_type_of(&A->fmt), sb = mm_engine_type_of(&B->fmt);
    const mm_engine_kind *q = NULL;
    if (blocked) {
        const bool e8 = scales_all(A, M, nba, is_pow2_or_nan) && scales_all(B, nbb, N, is_pow2_or_nan);
        const bool u4 = scales_all(A, M, nba, is_ue4m3) && scales_all(B, nbb, N, is_ue4m3);
        if (e8) q = mm_engine_find(e, sa, sb, o->acc.engine_k, o->acc.engine_f16, A->block_k, false, NULL, 0);
        if (!q && u4) q = mm_engine_find(e, sa, sb, o->acc.engine_k, o->acc.engine_f16, A->block_k, true, NULL, 0);
        p->scaled_kind = q != NULL;
    }
    if (!q) q = mm_engine_find(e, sa, sb, o->acc.engine_k, o->acc.engine_f16, 0, false, NULL, 0);
    if (!q) {  // only a block-scaled kind takes these operands, and these scales are not its
        snprintf(msg, msg_len, "accumulator %s with operands %s x %s: their scales are neither ue8m0 nor ue4m3 "
                 "values, and %s has no instruction without scales for them", mm_engine_name((size_t)e),
                 A->fmt.name, B->fmt.name, mm_engine_name((size_t)e));
        return MM_EINVAL;
    }
    p->q = q;
    p->ta = sa & q->types & -(sa & q->types);  // the lowest bit the kind takes
    p->tb = sb & q->types & -(sb & q->types);
    p->bk = A->scales && A->block_k > 0 ? bka : B->scales && B->block_k > 0 ? bkb : K;
    const bool unscaled = !p->scaled_kind ? (!A->scales && !B->scales) : true;
    const float ab = mm__fl32_prod3(o->alpha, mm__tscale(A), mm__tscale(B));
    const size_t seg = p->scaled_kind ? K : p->bk;
    p->c_in_chain = unscaled && ab == 1.0f && o->beta == 1.0f && seg >= K &&
                    (o->acc.promote_every == 0 || (size_t)o->acc.promote_every >= K);
    return MM_OK;
}

// --- the products

// One output y(i, j) of the definition before the output rounding (cij: C's value there, read
// when C joins), one dot product at a time through the model. L: four buffers of cap doubles,
// cap >= K padded to whole instructions.
float mm__engine_out1(const mm__engine_plan *p, const mm_operand *A, const mm_operand *B, size_t N, size_t K,
                      const mm_opts *o, size_t i, size_t j, float cij, double *const L[4]) {
    const mm_engine_kind *q = p->q;
    const size_t unit = (size_t)q->k, pe = mm__seg_promote(o);
    const float ab = mm__fl32_prod3(o->alpha, mm__tscale(A), mm__tscale(B));
    size_t bka, bkb;
    const size_t nba = mm__nblocks(A, K, &bka);
    mm__nblocks(B, K, &bkb);
    double *La = L[0], *Lb = L[1], *Lsa = L[2], *Lsb = L[3];
    float total = 0.0f;
    double d = 0.0;
    // A block-scaled kind takes the scales itself: its segments are promote=N's alone.
    const size_t bk = p->scaled_kind ? K : p->bk;
    for (size_t s0 = 0, s1; s0 < K; s0 = s1) {
        s1 = mm__seg_end(s0, K, bk, pe);
        const size_t n = s1 - s0;
        const size_t np = (n + unit - 1) / unit * unit;
        for (size_t k = 0; k < np; k++) {
            const size_t kk = s0 + k;
            const bool in = k < n;
            La[k] = in ? mm_engine_operand(A->trans ? A->x[kk * A->ld + i] : A->x[i * A->ld + kk], p->ta) : 0.0;
            Lb[k] = in ? mm_engine_operand(B->trans ? B->x[j * B->ld + kk] : B->x[kk * B->ld + j], p->tb) : 0.0;
        }
        if (p->scaled_kind)
            for (size_t g = 0; g < np / (size_t)q->block; g++) {
                const size_t kk = s0 + g * (size_t)q->block;
                const bool in = kk < s1;
                Lsa[g] = in ? A->scales[i * nba + kk / bka] : 1.0;
                Lsb[g] = in ? B->scales[(kk / bkb) * N + j] : 1.0;
            }
        double c0 = 0.0;
        if (p->c_in_chain) {
            if (o->acc.engine_f16) {
                fmt_t f16;
                fmt_from_name(&f16, "fp16");
                const fmt_round_opts rne = {.mode = FMT_RNE, .overflow = FMT_OVERFLOW_IEEE};
                c0 = fmt_round1(&f16, cij, &rne);
            } else {
                c0 = cij;
            }
        }
        d = mm_engine_dot(q, o->acc.engine_f16, p->ta, p->tb, La, Lb, p->scaled_kind ? Lsa : NULL,
                          p->scaled_kind ? Lsb : NULL, c0, np);
        float sab = 1.0f;
        if (!p->scaled_kind) {
            const float xa = A->scales ? A->scales[i * nba + s0 / bka] : 1.0f;
            const float xb = B->scales ? B->scales[(s0 / bkb) * N + j] : 1.0f;
            sab = xa * xb;
        }
        const float part = (float)d * sab;
        total = total + part;
    }
    return mm__engine_epilogue(p, ab, o->beta, total, (float)d, &cij);
}

int mm__engine_run_plan(const mm__engine_plan *p, float *C, size_t ldc, const mm_operand *A, const mm_operand *B,
                        size_t M, size_t N, size_t K, const mm_opts *o, const unsigned char *only) {
    const size_t unit = (size_t)p->q->k;
    const size_t cap = (K + unit) / unit * unit;  // a segment, padded to whole instructions
    int st = MM_OK;
#pragma omp parallel
    {
        double *L[4] = {malloc(cap * sizeof(double)), malloc(cap * sizeof(double)), malloc(cap * sizeof(double)),
                        malloc(cap * sizeof(double))};
        const bool ok = L[0] && L[1] && L[2] && L[3];
        if (!ok) {
#pragma omp atomic write
            st = MM_ENOMEM;
        }
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < M; i++) {
            if (!ok) continue;
            for (size_t j = 0; j < N; j++)
                if (!only || only[i * N + j]) C[i * ldc + j] = mm__engine_out1(p, A, B, N, K, o, i, j, C[i * ldc + j], L);
        }
        free(L[0]), free(L[1]), free(L[2]), free(L[3]);
    }
    return st;
}

int mm__engine_run(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                   size_t K, const mm_opts *o) {
    mm__engine_plan p;
    if (mm__engine_plan_make(&p, A, B, M, N, K, o, NULL, 0) != MM_OK) return MM_EINVAL;
    return mm__engine_run_plan(&p, C, ldc, A, B, M, N, K, o, NULL);
}

int mm__engine_finish(const mm__engine_plan *p, float *C, size_t ldc, const mm_operand *A, const mm_operand *B,
                      size_t M, size_t N, size_t K, const mm_opts *o, const unsigned char *redo, const char *kernel) {
    size_t nredo = 0;
    for (size_t t = 0; t < M * N; t++) nredo += redo[t];
    mm__path_note(o, kernel, nredo);
    return nredo ? mm__engine_run_plan(p, C, ldc, A, B, M, N, K, o, redo) : MM_OK;
}
