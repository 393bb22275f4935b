// mm_verify.c: the verifier of mm_verify.h: exact errors and the classical bound of a result
// C against mm_ref_exact, and the accumulators (exact-rounded, the engines, the caller's) whose
// mm_ref reproduces C bit for bit.
#include "kernels/mm_verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/engine.h"

void mm_verify_opts_default(mm_verify_opts *vo) { *vo = (mm_verify_opts){0}; }

const char *mm_verify_rule_name(mm_verify_rule r) {
    switch (r) {
    case MM_RULE_BOUND: return "bound";
    case MM_RULE_BITEXACT: return "bit-exact";
    default: return "none";
    }
}

double mm_verify_ulp(const fmt_t *f, double e) {
    int ex = f->emin;
    if (e != 0.0 && isfinite(e)) {
        int k;
        frexp(fabs(e), &k);  // |e| = m 2^k, m in [0.5, 1): floor(log2|e|) = k - 1
        if (k - 1 > ex) ex = k - 1;
    }
    return ldexp(1.0, ex - f->mbits);
}

double mm_verify_gamma(size_t K, double u) {
    const double nu = (double)(K + 2) * u;
    return nu < 1.0 ? nu / (1.0 - nu) : INFINITY;
}

double mm_verify_bound(const fmt_t *out, fmt_round_mode mode, double gamma, double absdot, double exact, double c) {
    const double r = mode == FMT_RNE || mode == FMT_RNA ? 0.5 : 1.0;
    return gamma * absdot + r * mm_verify_ulp(out, fmax(fabs(exact), fabs(c)));
}

static bool same_bits(float a, float b) {
    if (isnan(a) && isnan(b)) return true;
    uint32_t ua, ub;
    memcpy(&ua, &a, 4), memcpy(&ub, &b, 4);
    return ua == ub;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Median of v[0..n) (sorted in place); NaN when n is 0.
static double median(double *v, size_t n) {
    if (!n) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The accumulator of a candidate into *acc; false when spec does not parse or mm_validate
// refuses it for these operands (msg says why).
static bool cand_acc(mm_acc *acc, const char *spec, const mm_operand *A, const mm_operand *B, size_t M,
                     size_t N, size_t K, const mm_opts *o, char *msg, size_t msg_len) {
    if (mm_acc_from_name(acc, spec, msg, msg_len) != MM_OK) return false;
    mm_opts oc = *o;
    oc.acc = *acc;
    return mm_validate(A, B, M, N, K, &oc, msg, msg_len) == MM_OK;
}

// Adds the candidate spec (with acc) unless present; returns its index, or -1 when full.
static int cand_add(mm_verify_report *rep, mm_acc *accs, const char *spec, const mm_acc *acc, bool extra) {
    for (size_t i = 0; i < rep->ncand; i++)
        if (!strcmp(rep->cand[i].spec, spec)) {
            rep->cand[i].extra |= extra;
            return (int)i;
        }
    if (rep->ncand == MM_VERIFY_MAX_CAND) return -1;
    mm_verify_cand *c = &rep->cand[rep->ncand];
    snprintf(c->spec, sizeof c->spec, "%s", spec);
    c->reproduced = 0, c->extra = extra;
    accs[rep->ncand] = *acc;
    return (int)rep->ncand++;
}

int mm_verify(mm_verify_report *rep, const mm_verify_outputs *out, const float *C, const float *C_in,
              size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
              const mm_opts *o, const mm_verify_opts *vo, char *msg, size_t msg_len) {
    mm_verify_opts dv;
    if (!vo) mm_verify_opts_default(&dv), vo = &dv;
    if (msg && msg_len) msg[0] = '\0';
    memset(rep, 0, sizeof *rep);
    rep->rule_cand = rep->expect_cand = -1;
    mm_opts oe = *o;
    if (mm_acc_from_name(&oe.acc, "fp32", NULL, 0) != MM_OK) return MM_EINVAL;
    if (!C || ldc < N || (o->beta != 0 && !C_in)) {
        if (msg) snprintf(msg, msg_len, "mm_verify: %s", !C ? "no result C" : ldc < N ? "ldc < N"
                                                          : "beta != 0 needs C_in");
        return MM_EINVAL;
    }
    if (mm_validate(A, B, M, N, K, &oe, msg, msg_len) != MM_OK) return MM_EINVAL;
    const size_t n = M * N;
    rep->n = n;
    rep->u = vo->u > 0 ? vo->u : 0x1p-24;
    rep->gamma = mm_verify_gamma(K, rep->u);

    // The candidates: exact-rounded, the engines (and :f16), the caller's.
    mm_acc accs[MM_VERIFY_MAX_CAND];
    char m2[256];
    mm_acc acc;
    cand_add(rep, accs, "exact-rounded", &oe.acc, false);
    if (!vo->no_candidates) {
        for (size_t e = 0; e < mm_engine_count(); e++) {
            char spec[MM_VERIFY_SPEC_MAX];
            snprintf(spec, sizeof spec, "%s", mm_engine_name(e));
            if (cand_acc(&acc, spec, A, B, M, N, K, o, m2, sizeof m2)) cand_add(rep, accs, spec, &acc, false);
            snprintf(spec, sizeof spec, "%s:f16", mm_engine_name(e));
            if (cand_acc(&acc, spec, A, B, M, N, K, o, m2, sizeof m2)) cand_add(rep, accs, spec, &acc, false);
        }
    }
    int expect_i = -1;
    for (size_t i = 0; i <= vo->n_extra; i++) {
        const char *spec = i < vo->n_extra ? vo->extra[i] : vo->expect;
        if (!spec) continue;
        if (!cand_acc(&acc, spec, A, B, M, N, K, o, m2, sizeof m2)) {
            if (msg) snprintf(msg, msg_len, "accumulator '%s': %s", spec, m2[0] ? m2 : "not valid here");
            return MM_EINVAL;
        }
        // Spelled as the caller spelled it, unless it names exact-rounded's accumulator.
        const bool plain = !mm_acc_is_emulated(&acc) && !acc.engine;
        const int k = cand_add(rep, accs, plain ? "exact-rounded" : spec, &acc, true);
        if (k < 0) {
            if (msg) snprintf(msg, msg_len, "more than %d candidate accumulators", MM_VERIFY_MAX_CAND);
            return MM_EINVAL;
        }
        if (i == vo->n_extra) expect_i = rep->expect_cand = k;
    }

    double *exact = malloc(n * sizeof *exact), *absdot = malloc(n * sizeof *absdot);
    double *ulps = malloc(n * sizeof *ulps), *rel = malloc(n * sizeof *rel), *bnd = malloc(n * sizeof *bnd);
    float *Cc = malloc(n * sizeof *Cc);
    int st = exact && absdot && ulps && rel && bnd && Cc ? MM_OK : MM_ENOMEM;
    if (st == MM_OK) {
        st = mm_ref_exact(exact, absdot, C_in, ldc, A, B, M, N, K, &oe);
        if (st != MM_OK && msg) snprintf(msg, msg_len, "mm_ref_exact failed (status %d)", st);
    }
    // Errors and the bound.
    if (st == MM_OK) {
        const fmt_t *f = &o->out_fmt;
        const double top = f->max + 0.5 * mm_verify_ulp(f, f->max);  // round-to-nearest overflow
        size_t nu_ = 0, nr = 0;
        rep->max_ulp = rep->max_rel = rep->max_bound_ulp = 0;
        for (size_t t = 0; t < n; t++) {
            const size_t i = t / N, j = t % N;
            const double e = exact[t], c = C[i * ldc + j];
            const bool judged = fabs(e) < top;
            const double err = c - e, ae = isnan(c) ? INFINITY : fabs(err);
            const double ulp = mm_verify_ulp(f, e);
            const double bound = mm_verify_bound(f, o->out_round.mode, rep->gamma, absdot[t], e, c);
            const bool inb = judged && ae <= bound;
            if (out) {
                if (out->exact) out->exact[t] = e;
                if (out->absdot) out->absdot[t] = absdot[t];
                if (out->err) out->err[t] = err;
                if (out->err_ulp) out->err_ulp[t] = judged ? ae / ulp : NAN;
                if (out->bound_ulp) out->bound_ulp[t] = judged ? bound / ulp : NAN;
                if (out->judged) out->judged[t] = judged;
                if (out->in_bound) out->in_bound[t] = inb;
            }
            if (!judged) {
                rep->excluded++;
                continue;
            }
            rep->judged++;
            rep->outside += !inb;
            ulps[nu_] = ae / ulp, bnd[nu_] = bound / ulp;
            if (!(ulps[nu_] <= rep->max_ulp)) rep->max_ulp = ulps[nu_];
            if (bnd[nu_] > rep->max_bound_ulp) rep->max_bound_ulp = bnd[nu_];
            nu_++;
            if (e != 0.0) {
                rel[nr] = ae / fabs(e);
                if (!(rel[nr] <= rep->max_rel)) rep->max_rel = rel[nr];
                nr++;
            } else if (ae != 0.0) {
                rep->max_rel = INFINITY;
            }
        }
        rep->med_ulp = median(ulps, nu_);
        rep->med_bound_ulp = median(bnd, nu_);
        rep->med_rel = median(rel, nr);
        if (!nu_) rep->max_ulp = rep->max_bound_ulp = NAN;
        if (!nr && rep->max_rel == 0) rep->max_rel = NAN;
    }
    // The candidates, each mm_ref over the whole product.
    for (size_t c = 0; st == MM_OK && c < rep->ncand; c++) {
        mm_opts oc = *o;
        oc.acc = accs[c];
        if (o->beta != 0)
            for (size_t i = 0; i < M; i++) memcpy(&Cc[i * N], &C_in[i * ldc], N * sizeof *Cc);
        const int sc = mm_ref(Cc, N, A, B, M, N, K, &oc);
        if (sc == MM_ENOMEM) st = sc;
        if (sc != MM_OK) continue;  // reproduces nothing
        size_t r = 0;
        for (size_t t = 0; t < n; t++) r += same_bits(C[(t / N) * ldc + t % N], Cc[t]);
        rep->cand[c].reproduced = r;
    }
    if (st == MM_OK && rep->judged > 0) {
        if (expect_i >= 0) {
            if (rep->cand[expect_i].reproduced == n) rep->rule = MM_RULE_BITEXACT, rep->rule_cand = expect_i;
        } else if (rep->outside == 0) {
            rep->rule = MM_RULE_BOUND;
        } else {
            for (size_t c = 0; c < rep->ncand; c++)
                if (rep->cand[c].reproduced == n) {
                    rep->rule = MM_RULE_BITEXACT, rep->rule_cand = (int)c;
                    break;
                }
        }
        rep->pass = rep->rule != MM_RULE_NONE;
    }
    free(exact), free(absdot), free(ulps), free(rel), free(bnd), free(Cc);
    return st;
}
