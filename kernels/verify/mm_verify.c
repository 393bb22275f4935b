// mm_verify.c: the verifier of mm_verify.h: exact errors and the classical bound of a result
// C against mm_ref_exact, and the accumulators (exact-rounded, the engines, the caller's) whose
// mm_ref reproduces C bit for bit.
#include "kernels/mm_verify.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/engine.h"
#include "kernels/scaled_mm_internal.h"

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


// --- an engine's own error bound (mm_verify.h): a running bound along the chain of its
// instructions, per output, from each step's terms. Magnitudes are taken from the exact partial
// sums in double (a hair above, so that floor(log2) never lands a binade low) plus the error so
// far; every term below is an upper bound of what the model's step can lose.

// floor(log2 x) of x > 0, at least lo; a huge exponent for inf or NaN (its ldexp is inf).
static int ex_of(double x, int lo) {
    if (!(x <= DBL_MAX)) return 4096;
    if (!(x > 0)) return lo;
    int e;
    frexp(x, &e);
    return e - 1 > lo ? e - 1 : lo;
}
static double up(double x) { return fabs(x) * (1 + 0x1p-40); }

// The rounding of a step's result of magnitude at most m into D: toward zero to out_frac
// fraction bits (NVIDIA f32 D), nearest-even to f16 (half an ulp), nearest to f32/f64 (FMA and
// AMD: half an ulp). A magnitude that may reach the format's overflow threshold has no bound.
static double round_err(double m, int frac_bits, int emin, bool nearest) {
    const int emax = emin == -14 ? 15 : emin == -126 ? 127 : 1023;
    if (!(m < ldexp(2.0 - ldexp(1.0, -frac_bits - 1), emax))) return INFINITY;
    return ldexp(1.0, ex_of(m, emin) - frac_bits - (nearest ? 1 : 0));
}

typedef struct {
    const mm__engine_plan *p;
    const mm_operand *A, *B;
    size_t N, nba, bka, bkb;
    int amin, bmin;  // the operands' smallest normal exponents
    bool f16;        // the instruction's C/D is f16
    mm_opts eo;      // the options with the engine as the accumulator
} eb_ctx;

// One product's magnitude bound (model exponents: a subnormal operand counts at its format's
// smallest exponent, the significand product may reach 4) and the error of its inputs (tf32
// truncation, CDNA2's flush of subnormal inputs).
static double prod_terms(const eb_ctx *c, size_t i, size_t j, size_t k, bool with_scales, int *ex_model,
                         double *inerr) {
    const mm_operand *A = c->A, *B = c->B;
    const double a = A->trans ? A->x[k * A->ld + i] : A->x[i * A->ld + k];
    const double b = B->trans ? B->x[j * B->ld + k] : B->x[k * B->ld + j];
    double pr = a * b;
    int ex = ex_of(fabs(a), c->amin) + ex_of(fabs(b), c->bmin) + 1;
    if (with_scales) {
        const double sa = A->scales[i * c->nba + k / c->bka], sb = B->scales[(k / c->bkb) * c->N + j];
        pr *= sa * sb;
        ex += ex_of(sa, -1000) + ex_of(sb, -1000) + 2;
    }
    *ex_model = a == 0 || b == 0 ? INT_MIN / 2 : ex;
    const mm_engine_kind *q = c->p->q;
    // tf32 keeps 10 fraction bits of a float32 operand (truncated: less than its ulp there).
    const double ea = c->p->ta == MM_ET_TF32 && A->fmt.mbits > 10 ? ldexp(1.0, ex_of(fabs(a), -126) - 10) : 0;
    const double eb = c->p->tb == MM_ET_TF32 && B->fmt.mbits > 10 ? ldexp(1.0, ex_of(fabs(b), -126) - 10) : 0;
    *inerr = ea * fabs(b) + eb * fabs(a) + ea * eb;  // tf32 kinds take no scales
    if (q->flush && (fabs(a) < ldexp(1.0, c->amin) || fabs(b) < ldexp(1.0, c->bmin))) *inerr += fabs(pr);
    return pr;
}

// One step of the chain: the model sums terms [k0, k1) of the segment with the chain's D (exact
// value *S, error bound *E) and rounds into D.
static void eb_step(const eb_ctx *c, size_t i, size_t j, size_t k0, size_t k1, double *S, double *E) {
    const mm_engine_kind *q = c->p->q;
    const bool f16 = c->f16;
    const int dfrac = f16 ? 10 : q->op == MM_EOP_FUSED ? q->out_frac : 23, demin = f16 ? -14 : -126;
    double sum = 0, asum = 0, inerr = 0, err = 0;
    int emax = INT_MIN / 2;
    size_t nz = 0;
    for (size_t k = k0; k < k1; k++) {
        int ex;
        double ie;
        const double pr = prod_terms(c, i, j, k, c->p->scaled_kind, &ex, &ie);
        sum += pr, asum += fabs(pr), inerr += ie, nz += pr != 0;
        if (ex > emax) emax = ex;
    }
    const double cb = up(*S) + *E;  // |c| at most
    const int ec = cb > 0 ? ex_of(cb, -126) : -126;
    switch (q->op) {
    case MM_EOP_FUSED: {
        // nvf4: exact sums of `group` products, aligned by the scales' exponents: their
        // exponents are bounded by the largest product's plus log2 of the group.
        int eg = emax;
        size_t nt = nz;
        if (q->group > 0) eg += ex_of((double)q->group, 0) + 1, nt = (k1 - k0 + (size_t)q->group - 1) / (size_t)q->group;
        const int ea = (eg > ec ? eg : ec) < -126 ? -126 : (eg > ec ? eg : ec);
        err = (double)(nt + 1) * ldexp(1.0, ea - q->frac);
        break;
    }
    case MM_EOP_PAIRWISE: {
        // A binary tree of float32 additions over the group (depth ceil(log2 group)), each
        // rounded to nearest, or flushed to zero below 2^-126; bf16 products may underflow.
        const double depth = ex_of((double)(2 * q->group - 1), 0);
        err = depth * 0x1p-23 * asum + (double)(k1 - k0) * (q->flush ? 0x1p-126 : 0x1p-149);
        break;
    }
    case MM_EOP_AMD_FUSED: {
        // The group's fused sum (24 bits below its largest exponent, toward zero), rounded down
        // to 31 bits; c (and fp8's even and odd halves) rounded down to 24 at the common exponent.
        const int eg = emax < -126 ? -126 : emax, em = (eg > ec ? eg : ec) + 1;
        err = (double)(nz + 1) * ldexp(1.0, eg - 24) + ldexp(1.0, em - 31) + (q->two_stage ? 3 : 1) * ldexp(1.0, em - 24);
        break;
    }
    default: break;  // FMA: the product is exact in the fused multiply-add
    }
    const bool nearest = q->op != MM_EOP_FUSED || f16;
    const int frac = q->op == MM_EOP_FMA && c->p->ta == MM_ET_F64 ? 52 : dfrac;
    const int emin = q->op == MM_EOP_FMA && c->p->ta == MM_ET_F64 ? -1022 : demin;
    const double ns = *S + sum, m = up(ns) + *E + err + inerr + 0x1p-52 * (fabs(*S) + asum);
    err += round_err(m, frac, emin, nearest) + (q->flush ? 0x1p-126 : 0) + inerr + 0x1p-52 * (fabs(*S) + asum);
    *S = ns, *E += err;
}

// The bound on |y - exact| for output (i, j) before the output rounding (the definition in
// scaled_mm.h with the plan's kind), cij: C's value there.
static double engine_err1(const eb_ctx *c, const mm_opts *o, size_t K, size_t i, size_t j, float cij) {
    const mm__engine_plan *p = c->p;
    const mm_engine_kind *q = p->q;
    const size_t pe = mm__seg_promote(o);
    // The steps of one instruction: its split halves (NVIDIA), its groups (AMD pairwise and
    // fused), each product (FMA).
    const size_t unit = (size_t)q->k;
    const size_t sub = q->op == MM_EOP_FMA ? 1 : q->op == MM_EOP_FUSED ? unit / (size_t)(q->split > 1 ? q->split : 1)
                                                                        : (size_t)q->group;
    double T = 0, Et = 0, S = 0, E = 0;
    if (p->c_in_chain) {
        S = cij;
        if (c->f16) {
            fmt_t f16;
            fmt_from_name(&f16, "fp16");
            const fmt_round_opts rne = {.mode = FMT_RNE, .overflow = FMT_OVERFLOW_IEEE};
            E = fabs(fmt_round1(&f16, cij, &rne) - (double)cij);
        }
    }
    // A scaled kind applies the scales inside the instruction: K is one block to it.
    const size_t blk = p->scaled_kind ? K : p->bk;
    for (size_t s0 = 0, s1; s0 < K; s0 = s1) {
        s1 = mm__seg_end(s0, K, blk, pe);
        if (!p->c_in_chain) S = 0, E = 0;
        for (size_t u0 = s0; u0 < s1; u0 += sub) eb_step(c, i, j, u0, u0 + sub < s1 ? u0 + sub : s1, &S, &E);
        if (p->c_in_chain) continue;
        // total = fl32(total + fl32(D * fl32(sa * sb))), each rounded to nearest.
        const float xa = c->A->scales && !p->scaled_kind ? c->A->scales[i * c->nba + s0 / c->bka] : 1.0f;
        const float xb = c->B->scales && !p->scaled_kind ? c->B->scales[(s0 / c->bkb) * c->N + j] : 1.0f;
        const float sab = xa * xb;
        const double sd = (double)xa * xb;
        const double part = S * sd;
        double e = E * fabs(sab) + up(S) * fabs(sab - sd);
        e += round_err(up(S) * fabs(sab) + e, 23, -126, true);
        T += part, Et += e;
        Et += round_err(up(T) + Et, 23, -126, true);
    }
    if (p->c_in_chain) return E;
    const float ab = mm__fl32_prod3(o->alpha, mm__tscale(c->A), mm__tscale(c->B));
    const double abx = (double)o->alpha * mm__tscale(c->A) * mm__tscale(c->B);
    double e = fabs(ab) * Et + up(T) * (fabs(ab - abx) + 0x1p-52 * fabs(abx));
    e += round_err(fabs(ab) * (up(T) + Et), 23, -126, true);
    if (o->beta != 0.0f) {
        const float bc = o->beta * cij;
        e += fabs((double)bc - (double)o->beta * cij);
        e += round_err(up(abx * T) + fabs(bc) + e, 23, -126, true);
    }
    return e;
}

int mm_verify(mm_verify_report *rep, const mm_verify_outputs *out, const float *C, const float *C_in,
              size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
              const mm_opts *o, const mm_verify_opts *vo, char *msg, size_t msg_len) {
    const mm_verify_problem p = {.A = A, .B = B, .M = M, .N = N, .K = K, .o = *o, .C = C, .C_in = C_in, .ldc = ldc};
    return mm_verify_run(rep, out, &p, vo, msg, msg_len);
}

int mm_verify_run(mm_verify_report *rep, const mm_verify_outputs *out, const mm_verify_problem *p,
                  const mm_verify_opts *vo, char *msg, size_t msg_len) {
    const mm_operand *A = p->A, *B = p->B;
    const size_t M = p->M, N = p->N, K = p->K, ldc = p->ldc;
    const float *C = p->C, *C_in = p->C_in;
    const mm_opts *o = &p->o;
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
    // A tensor scale of 0 reads as 1 (scaled_mm.h); a negative, NaN or infinite one means nothing.
    for (int s = 0; s < 2; s++) {
        const float ts = (s ? B : A)->tensor_scale;
        if (!(ts >= 0.0f && ts <= FLT_MAX)) {
            if (msg) snprintf(msg, msg_len, "operand %c: tensor scale %g; expected a finite scale > 0", "AB"[s], (double)ts);
            return MM_EINVAL;
        }
    }
    const size_t n = M * N;
    rep->n = n;
    // u: 0 is the default; beyond 1/(2(K+2)), gamma_{K+2}(u) >= 1 and the bound says nothing
    // (|C - exact| <= sum|a b s| holds for C = 0).
    const double umax = 0.5 / ((double)K + 2);
    if (!(vo->u >= 0 && vo->u < umax)) {
        if (msg) snprintf(msg, msg_len, "unit roundoff u = %g: expected 0 < u < 1/(2(K+2)) = %g at K = %zu (a larger "
                          "u bounds nothing: C = 0 would pass); for an engine's arithmetic name the engine instead",
                          vo->u, umax, K);
        return MM_EINVAL;
    }
    rep->u = vo->u > 0 ? vo->u : 0x1p-24;
    rep->gamma = mm_verify_gamma(K, rep->u);
    // The engine the result claims: its own bound replaces the classical one.
    mm__engine_plan plan;
    eb_ctx ebc = {0};
    if (vo->engine) {
        mm_opts oc = *o;
        char m3[256] = "";
        if (mm_acc_from_name(&oc.acc, vo->engine, m3, sizeof m3) != MM_OK || !oc.acc.engine ||
            mm__engine_plan_make(&plan, A, B, M, N, K, &oc, m3, sizeof m3) != MM_OK) {
            if (msg) snprintf(msg, msg_len, "engine '%s': %s", vo->engine, m3[0] ? m3 : "not an engine (ARCH:INSTR, "
                              "as 'fplab engines' lists them)");
            return MM_EINVAL;
        }
        size_t bka, bkb;
        ebc = (eb_ctx){.p = &plan, .A = A, .B = B, .N = N, .nba = mm__nblocks(A, K, &bka), .amin = A->fmt.emin,
                       .bmin = B->fmt.emin, .f16 = oc.acc.engine_f16, .eo = oc};
        mm__nblocks(B, K, &bkb);
        ebc.bka = bka, ebc.bkb = bkb;
        snprintf(rep->bound_spec, sizeof rep->bound_spec, "%s", vo->engine);
        rep->u = rep->gamma = NAN;
    }

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
            const double err = c - e, ae = isnan(c) ? INFINITY : fabs(err);
            const double ulp = mm_verify_ulp(f, e);
            double bound = mm_verify_bound(f, o->out_round.mode, rep->gamma, absdot[t], e, c);
            if (vo->engine)
                bound = mm_verify_bound(f, o->out_round.mode, 0, 0, e, c) +
                        engine_err1(&ebc, &ebc.eo, K, i, j, o->beta != 0 ? C_in[i * ldc + j] : 0.0f);
            // Under an engine's bound, an output whose chain may overflow has no bound.
            const bool judged = fabs(e) < top && isfinite(bound);
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
        } else if (!vo->engine) {  // a claimed engine is held to its bound, not to another's bits
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
