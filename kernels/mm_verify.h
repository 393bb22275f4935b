// mm_verify.h: verify a scaled matmul result that any kernel produced (fplab's backends,
// cuBLASLt, torch._scaled_mm, a user's own kernel) against the exact product, and find which
// accumulation arithmetic produced it.
//
// Given the operands (mm_operand A, B with their scales), the options (alpha, beta, C_in, the
// output format and its rounding) and a result C, mm_verify reports per output
//   exact   the exact value of the formula of scaled_mm.h (mm_ref_exact, MPFR)
//   err     C - exact
//   err_ulp |err| / ulp_out(exact),  ulp_out(e) = 2^(max(floor(log2|e|), emin) - mbits) of the
//           output format
//   bound   the classical bound in the same unit: (gamma_{K+2}(u) * absdot + r ulp_out(m)) /
//           ulp_out(exact), m = max(|exact|, |C|), r = 1/2 when the output rounds to nearest
//           (o->out_round.mode rne or rna), else 1, gamma_n = n u / (1 - n u) (Higham), absdot =
//           |alpha ta tb| sum_k |a b sa sb| + |beta C_in|; u must lie in (0, 1/(2(K+2))), where
//           gamma < 1 (beyond it the bound holds for C = 0 and says nothing);
//           or, when the result claims an engine (opts.engine), that engine's own bound in place
//           of gamma * absdot: a running bound along the chain of its instructions as scaled_mm.h
//           defines the product for that spec (its k, split halves, segments and promotion),
//           from each step's terms: the fused families lose less than one unit at `frac` bits
//           below the step's largest exponent per term (products and C) and one unit (toward
//           zero; half of one to nearest) at the D's precision; FMA half an ulp of D per product;
//           AMD's pairwise trees half an ulp per level, its fused groups their 24/31-bit
//           alignments; tf32 inputs their truncation, CDNA2 its flushed inputs and sums; the
//           float32 promotions and epilogue half an ulp each. PASS then means the engine's
//           arithmetic could give the result; an output whose bound is not finite (the chain
//           may overflow) is excluded
// and over all outputs which candidate accumulators reproduce C bit for bit (NaN matches any
// NaN), with the count each reproduces: "exact-rounded" (mm_ref with fp32 accumulation: the
// exact value rounded once), every engine of engine.h that mm_validate accepts for the operands
// (and its :f16 variant where one exists), and the caller's extra accumulator specs.
//
// Judged outputs: those whose exact value is finite and below the output format's overflow
// threshold (max + ulp/2); the others (overflow, exact inf/NaN) are counted as excluded, and
// no rule holds for them. The verdict:
//   - with opts.expect (an accumulator spec the result must equal): pass when that candidate
//     reproduces every output bit for bit (rule "bit-exact");
//   - with opts.engine: pass when every judged output is within that engine's bound (rule
//     "bound"), and only then;
//   - otherwise: pass when every judged output is within the bound (rule "bound"), or else when
//     one candidate reproduces every output (rule "bit-exact", naming it);
//   - never with zero judged outputs (rule "none": everything excluded).
// Constraints: verification code, uses MPFR through mm_ref/mm_ref_exact; no global state; the
// candidates each run mm_ref over the whole product (engines: their exact model).
#ifndef FPLAB_MM_VERIFY_H
#define FPLAB_MM_VERIFY_H

#include "kernels/scaled_mm.h"

enum { MM_VERIFY_MAX_CAND = 64, MM_VERIFY_SPEC_MAX = 64 };

typedef struct {
    double u;                       // unit roundoff of the bound; 0 means 2^-24; < 1/(2(K+2))
    const char *engine;             // NULL, or the engine spec (ARCH:INSTR[:kN][:f16][:promote=N])
                                    // the result claims: its own bound replaces the classical one
    const char *const *extra;       // extra candidate accumulator specs (mm_acc_from_name)
    size_t n_extra;
    const char *expect;             // NULL, or the spec C must equal bit for bit (pass rule)
    bool no_candidates;             // skip the candidates (expect and extra still run)
} mm_verify_opts;

typedef struct {
    char spec[MM_VERIFY_SPEC_MAX];  // "exact-rounded", "hopper:wgmma", "hopper:wgmma:f16", ...
    size_t reproduced;              // outputs equal to C bit for bit (of n)
    bool extra;                     // given by the caller (or expect)
} mm_verify_cand;

typedef enum { MM_RULE_NONE, MM_RULE_BOUND, MM_RULE_BITEXACT } mm_verify_rule;

typedef struct {
    size_t n;                       // outputs, M * N
    size_t judged, excluded;        // judged + excluded = n
    size_t outside;                 // judged outputs outside the bound
    double u, gamma;                // the bound's unit roundoff and gamma_{K+2}(u); NaN under an engine's
    char bound_spec[MM_VERIFY_SPEC_MAX];  // the engine whose bound was used; "" for the classical one
    double max_ulp, med_ulp;        // of err_ulp over the judged outputs (NaN when none)
    double max_rel, med_rel;        // of |err| / |exact| over judged nonzero exact values
    double max_bound_ulp, med_bound_ulp;  // the bound's size in ulps, over the judged outputs
    size_t ncand;
    mm_verify_cand cand[MM_VERIFY_MAX_CAND];
    bool pass;
    mm_verify_rule rule;            // the rule that passed (NONE when failed)
    int rule_cand;                  // bit-exact: index into cand of the reproducing one; else -1
    int expect_cand;                // index into cand of opts.expect; -1 without one
} mm_verify_report;

// Per-output arrays (M x N, row-major, dense), each optional (NULL).
typedef struct {
    double *exact, *absdot, *err, *err_ulp, *bound_ulp;
    unsigned char *judged, *in_bound;  // 0/1
} mm_verify_outputs;

void mm_verify_opts_default(mm_verify_opts *vo);

// The problem a result is checked against, named: the operands and options of one product of
// scaled_mm.h, and the result C with the C_in that beta multiplies.
typedef struct {
    const mm_operand *A, *B;  // op(A) (M x K), op(B) (K x N)
    size_t M, N, K;
    mm_opts o;                // alpha, beta, out_fmt, out_round; o.acc is ignored: the exact value
                              // is the reference
    const float *C;           // the result (M x N, leading dimension ldc)
    const float *C_in;        // the C that beta multiplies (same ldc); needed when beta != 0
    size_t ldc;               // >= N
} mm_verify_problem;

// Verifies p->C as the product of p->A and p->B under p->o. vo may be NULL (defaults), out too
// (no per-output arrays). Returns MM_OK, MM_EINVAL (shapes or options mm_validate refuses, a bad
// extra/expect/engine spec, a u outside [0, 1/(2(K+2))), a tensor scale that is negative, NaN or
// inf: msg says which), MM_ENOMEM.
int mm_verify_run(mm_verify_report *rep, const mm_verify_outputs *out, const mm_verify_problem *p,
                  const mm_verify_opts *vo, char *msg, size_t msg_len);

// mm_verify_run by position, for the callers written before the problem had a name.
int mm_verify(mm_verify_report *rep, const mm_verify_outputs *out, const float *C, const float *C_in,
              size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
              const mm_opts *o, const mm_verify_opts *vo, char *msg, size_t msg_len);

// gamma_{K+2}(u) = (K + 2) u / (1 - (K + 2) u); inf when (K + 2) u >= 1.
double mm_verify_gamma(size_t K, double u);
// The bound on |C - exact| for one output: gamma * absdot + the output rounding (r ulp_out at
// max(|exact|, |c|), r as above for the rounding mode of out_round).
double mm_verify_bound(const fmt_t *out, fmt_round_mode mode, double gamma, double absdot, double exact, double c);
// "bound", "bit-exact" or "none".
const char *mm_verify_rule_name(mm_verify_rule r);
// ulp of format f at |e| as above (e = 0, inf, NaN: the smallest, 2^(emin - mbits)).
double mm_verify_ulp(const fmt_t *f, double e);

#endif
