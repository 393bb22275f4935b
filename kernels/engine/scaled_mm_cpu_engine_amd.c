// scaled_mm_cpu_engine_amd.c: the fast CPU kernel of the AMD matrix-engine kinds ("engine-amd"):
// CDNA3's fused kinds (MM_EOP_AMD_FUSED: f16, bf16, and fp8/bf8 fnuz in two stages) and CDNA1/2's
// pairwise kinds (MM_EOP_PAIRWISE: f16, bf16), in vector lanes, bit for bit the scalar model of
// engine_model.c (amd_fused, pairwise), which mm__engine_run runs one dot product at a time.
//
// A tile kernel of the emulated path (scaled_mm_internal.h), as scaled_mm_cpu_engine.c: the same
// packed panels, tile loop, segments, promotion and epilogue; a tile is MR rows of op(A) x NR
// columns of op(B), one output per lane. A segment's last instruction, when K does not fill it,
// runs on a zero-padded copy of its products, as the model pads them.
// - Pairwise: the model's arithmetic is float32 already (leaves fmaf(a, b, 0), nodes and the
//   accumulator rounded additions, CDNA2's flushes), so each lane does the same operations in
//   the same order. Only a NaN output goes to the scalar model (its payload is the model's).
// - CDNA3 fused, per group of products and per lane: the group's largest product exponent E
//   (exponent panels beside the packed ones, the model's sig_exp: a zero -126, a subnormal its
//   type's emin; on int8 lanes where eng_max8 covers them); each product a*b*2^(24 - E) (exact in
//   float32; the power of two an addition to the exponent field, eng_prescale_bits of
//   engine_lanes.h) truncated to int32 and summed (below 2^29: 8 terms below 2^26; fp8: the even
//   and the odd products apart, each to its own E, then floored to the larger one by an arithmetic
//   shift); then the model's rounding with C: the group sum floored to 31 fractional bits and C to
//   24 at their common exponent, added and rounded once to nearest float32 (AVX-512: float32 lanes
//   and a two-sum; else int32 shifts and double lanes; amd_round says why each step is exact).
//   Operands outside the exact range (NaN, bf16 beyond 2^+-50: products then could leave
//   float32's normal range) mark their row or column for the scalar model; a D that is inf or
//   NaN marks its lane (the model's special cases follow).
//
// Constraints: no MPFR, no global state; results do not depend on the number of threads; runs
// in the default floating-point environment (round to nearest, no flush-to-zero, no
// denormals-are-zero), which mm__emu_tile_loop sets.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/engine/engine_lanes.h"
#include "kernels/scaled_mm_internal.h"

enum { MR = ENG_MR, NV = ENG_NV, NR = ENG_NR, KMAX = 32 };

// fmaf(x, y, +0) per lane: one rounding (a product that rounds to -0 stays -0; an exact zero
// product gives +0).
static inline eng_vf vfma0(eng_vf x, eng_vf y) {
#if defined(__AVX512F__) && ENG_VL == 16
    return (eng_vf)_mm512_fmadd_ps((__m512)x, (__m512)y, _mm512_setzero_ps());
#elif defined(__FMA__) && ENG_VL == 8
    return (eng_vf)_mm256_fmadd_ps((__m256)x, (__m256)y, _mm256_setzero_ps());
#else
    eng_vf r;
    for (int l = 0; l < ENG_VL; l++) r[l] = fmaf(x[l], y[l], 0.0f);
    return r;
#endif
}

bool mm__engine_amd_covers(const mm__engine_plan *p, const mm_opts *o) {
    const mm_engine_kind *q = p->q;
    if (q->op != MM_EOP_PAIRWISE && q->op != MM_EOP_AMD_FUSED) return false;
    if (o->acc.engine_f16 || p->scaled_kind || q->split != 1 || q->k > KMAX || q->k % q->group) return false;
    if (q->op == MM_EOP_PAIRWISE) return q->group == 2 || q->group == 4;
    if (q->op != MM_EOP_AMD_FUSED || q->frac != 24) return false;
    const unsigned ok = MM_ET_F16 | MM_ET_BF16 | MM_ET_E4M3FNUZ | MM_ET_E5M2FNUZ;  // not xf32
    if (!(p->ta & ok) || !(p->tb & ok)) return false;
    // The int32 sums: each product term is below 2^26, a sum of 8 below 2^29.
    return q->two_stage ? q->group == 16 : q->group <= 8;
}


// --- CDNA3 fused: one group


// Over the products k0, k0 + st, ... (n of them) of the tile: the largest product exponent E
// per lane (-252 when every product is zero) and the sum P of the products' terms
// trunc(a*b*2^(24 - E)), B's panel holding b * 2^-pre (eng_prescale_bits); ea8, eb8: the int8
// exponent panels at the instruction's first product (eng_max8), or NULL.
static inline __attribute__((always_inline)) void group_sum(const float *ap, const int32_t *ea, const float *bp,
                                                             const int16_t *eb, const int16_t *ea8,
                                                             const int8_t *eb8, int k0, int n, int st, int pre,
                                                             eng_vi E[MR][NV], eng_vi P[MR][NV]) {
    eng_vh Eh[MR];
    if (!ea8 || !eng_max8(ea8, eb8, (size_t)k0, (size_t)n, (size_t)st, Eh)) {  // int8 lanes where they cover it
        for (int r = 0; r < MR; r++) Eh[r] = (eng_vh){0} - 252;
        for (int t = 0, k = k0; t < n; t++, k += st) {
            const eng_vh e = *(const eng_vh_u *)(eb + k * NR);
            for (int r = 0; r < MR; r++) Eh[r] = eng_hmax(Eh[r], e + (int16_t)ea[k * MR + r]);
        }
    }
    eng_vi sh[MR][NV], neg = {0};  // 2^(24 + pre - E) as an exponent-field addition
    eng_vu S[MR][NV];  // unsigned: wrapping is defined (lanes of marked operands only)
    for (int r = 0; r < MR; r++) {
        eng_widen(E[r], Eh[r]);
        for (int v = 0; v < NV; v++) {
            sh[r][v] = eng_shift_bits(24 + pre - E[r][v], &neg);
            S[r][v] = (eng_vu){0};
        }
    }
    eng_terms(ap, bp, (size_t)k0, (size_t)n, (size_t)st, sh, neg, S);  // a lane's E past 24 + pre: multiplied
    memcpy(P, S, sizeof S);
}

#if defined(__AVX512F__) && ENG_VL == 16
// C's new value in float32 lanes (amd_fused after the sums): the double lanes' value below in
// fewer operations, and no lane widened to 64 bits. C floored to units 2^(maxe - 24): scaled (rounded toward
// -inf, so that a scaled value below float32's normals keeps its floor), floored, scaled back. The
// group sum (|S| < 2^30: fp8's two halves below 2^29 each) floored to units q = 2^max(E - 24,
// maxe - 31) by a shift, and split into its low 6 bits and the rest, each exact in float32 times
// q. Where maxe >= -95 every term is a multiple of q >= 2^-126 (the other lanes go to the scalar
// model unless their sum and C are zero), so a + b = s + e exactly (Knuth's two-sum; |s| < 2^33 q,
// so |e| <= 2^8 q), e + l is exact (below 2^9 q) and s + (e + l) is the whole sum rounded once to
// nearest. A C or D that is inf or NaN gives inf or NaN here, which marks its lane (the model's
// special cases follow).
static inline eng_vf amd_round(eng_vi S, eng_vi E, eng_vf c, bool two, eng_vi *bad) {
    const eng_vi cb = (eng_vi)c;
    const eng_vi ec = eng_max(((cb >> 23) & 0xff) - 127, eng_ibcast(-126));
    const eng_vi maxe = eng_max(E, ec);
    const __m512 t = _mm512_scalef_round_ps((__m512)c, _mm512_cvtepi32_ps((__m512i)(24 - maxe)),
                                            _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const eng_vi one = eng_ibcast(1);  // the powers' exponent fields: see the zero lanes below
    eng_vf b = (eng_vf)_mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC) *
               (eng_vf)((eng_vu)eng_max(maxe + 103, one) << 23);
    if (two) b = (eng_vf)((eng_vi)b & ~(ec < maxe - 25));  // fp8: C dropped
    const eng_vi X = S >> eng_min(eng_max(maxe - 7 - E, eng_ibcast(0)), eng_ibcast(31));
    const eng_vf q = (eng_vf)((eng_vu)eng_max(eng_max(E + 103, maxe + 96), one) << 23);
    const eng_vf a = __builtin_convertvector(X & ~63, eng_vf) * q, l = __builtin_convertvector(X & 63, eng_vf) * q;
    const eng_vf s = a + b, a1 = s - b, b1 = s - a1, e = (a - a1) + (b - b1);
    const eng_vf r = s + (e + l);
    // Below maxe = -95 only a lane whose sum and C are both zero stays: a group of zero products
    // (E = -126 plus the other operand's exponent) with C = +-0, as fp8 gradients and padding
    // give. The powers' exponent fields are kept at 1 or more (wrapped, one could be -inf and
    // its product with a zero NaN), so its terms are zeros times positive powers, and a sum of
    // zeros of any signs through the two-sum is +0, the model's exact zero sum.
    *bad |= ((maxe < -95) & ((S | (cb << 1)) != 0)) | (((eng_vi)r & 0x7fffffff) >= 0x7f800000);
    return r;
}
#else
// C's new value from the group sum S (units of 2^(E - 24)) and C (amd_fused after the sums):
// the sum floored to 31 fractional bits and C to 24 at their common exponent maxe (fp8: C
// dropped when more than 25 binades below), added exactly, and rounded to nearest float32. The
// floors are arithmetic shifts of int32 lanes; the sum, below 2^37 units of 2^(maxe - 31), and
// its scaling are exact in double lanes.
static inline eng_vf amd_round(eng_vi S, eng_vi E, eng_vf c, bool two, eng_vi *bad) {
    const eng_vi cb = (eng_vi)c, be = (cb >> 23) & 0xff;
    const eng_vi ec = eng_max(be - 127, eng_ibcast(-126));
    const eng_vi maxe = eng_max(E, ec);
    // C = m * 2^(ec - 23) (m signed, below 2^24), floored to units of 2^(maxe - 24).
    const eng_vi neg = cb >> 31, m = (((cb & 0x7fffff) | ((be != 0) & 0x800000)) ^ neg) - neg;
    eng_vi f2 = (eng_vi)((eng_vu)m << 1) >> eng_min(maxe - ec, eng_ibcast(31));  // 2m: below 2^25
    if (two) f2 &= ~(ec < maxe - 25);
    // The sum in units of 2^(maxe - 31): floored by a shift where E is 8 or more below maxe, else
    // times 2^(E - maxe + 7) <= 2^7.
    const eng_vi sh = E - maxe + 7;
    const eng_vi X = S >> eng_min(eng_max(-sh, eng_ibcast(0)), eng_ibcast(31));
    const eng_vf up = (eng_vf)((eng_max(sh, eng_ibcast(0)) + 127) << 23);
    const eng_vd v = (eng_i2d(X) * eng_f2d(up) + eng_i2d(f2) * 128.0) * eng_p2d(maxe - 31);
    const eng_vf d = eng_d2f(v);
    *bad |= ((eng_vi)d & 0x7fffffff) >= 0x7f800000;  // inf: the model's special cases from here
    return d;
}
#endif

// One CDNA3 instruction (q->k products from ap, bp; c in and out).
static inline __attribute__((always_inline)) void amd_instr(const mm_engine_kind *q, const float *ap,
                                                             const int32_t *ea, const float *bp, const int16_t *eb,
                                                             const int16_t *ea8, const int8_t *eb8, int pre,
                                                             eng_vf c[MR][NV], eng_vi bad[MR][NV]) {
    const int g = q->group;
    for (int g0 = 0; g0 < q->k; g0 += g) {
        eng_vi E[MR][NV], S[MR][NV];
        if (q->two_stage) {
            eng_vi E1[MR][NV], S1[MR][NV];
            group_sum(ap, ea, bp, eb, ea8, eb8, g0, g / 2, 2, pre, E, S);
            group_sum(ap, ea, bp, eb, ea8, eb8, g0 + 1, g / 2, 2, pre, E1, S1);
            for (int r = 0; r < MR; r++)
                for (int v = 0; v < NV; v++) {
                    const eng_vi e = eng_max(E[r][v], E1[r][v]);
                    // floor_at of each half to 24 bits below e: arithmetic shifts (>= 31: 0 or -1)
                    // (unsigned: marked lanes may wrap)
                    S[r][v] = (eng_vi)((eng_vu)(S[r][v] >> eng_min(e - E[r][v], eng_ibcast(31))) +
                                       (eng_vu)(S1[r][v] >> eng_min(e - E1[r][v], eng_ibcast(31))));
                    E[r][v] = e;
                }
        } else {
            group_sum(ap, ea, bp, eb, ea8, eb8, g0, g, 1, pre, E, S);
        }
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++) c[r][v] = amd_round(S[r][v], E[r][v], c[r][v], q->two_stage, &bad[r][v]);
    }
}

// --- CDNA1/2 pairwise: one instruction

// s * 0 where |s| < 2^-126 (a signed zero; NaN kept).
static inline eng_vf flush_signed(eng_vf s) {
    const eng_vi m = ((eng_vi)s & 0x7fffffff) < 0x00800000;
    return (eng_vf)((eng_vi)s & ~(m & 0x7fffffff));
}

// k products from ap, bp in groups of g (2 or 4) summed as the model's tree, each group's sum
// added to c; fl: CDNA2's flushes (inputs are flushed in the panels already).
static inline __attribute__((always_inline)) void pair_instr(const float *ap, const float *bp, const int k,
                                                              const int g, const bool fl, eng_vf c[MR][NV]) {
    if (fl)  // the instruction's C: +0 below 2^-126
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++) {
                const eng_vi m = ((eng_vi)c[r][v] & 0x7fffffff) < 0x00800000;
                c[r][v] = (eng_vf)((eng_vi)c[r][v] & ~m);
            }
    for (int g0 = 0; g0 < k; g0 += g) {
        eng_vf y[4][NV];
        for (int t = 0; t < g; t++)
            for (int v = 0; v < NV; v++) y[t][v] = *(const eng_vf_u *)(bp + (g0 + t) * NR + v * ENG_VL);
        for (int r = 0; r < MR; r++) {
            eng_vf x[4];
            for (int t = 0; t < g; t++) x[t] = eng_fbcast(ap[(g0 + t) * MR + r]);
            for (int v = 0; v < NV; v++) {
                eng_vf l[4];
                for (int t = 0; t < g; t++) {
                    l[t] = vfma0(x[t], y[t][v]);
                    if (fl) l[t] = flush_signed(l[t]);
                }
                eng_vf s = l[0] + l[1];
                if (fl) s = flush_signed(s);
                if (g == 4) {
                    eng_vf s2 = l[2] + l[3];
                    if (fl) s2 = flush_signed(s2);
                    s = s + s2;
                    if (fl) s = flush_signed(s);
                }
                c[r][v] = c[r][v] + s;
                if (fl) c[r][v] = flush_signed(c[r][v]);
            }
        }
    }
}

static void instr(const mm_engine_kind *q, const float *ap, const int32_t *ea, const float *bp, const int16_t *eb,
                  const int16_t *ea8, const int8_t *eb8, int pre, eng_vf c[MR][NV], eng_vi bad[MR][NV]) {
    if (q->op == MM_EOP_AMD_FUSED) {
        amd_instr(q, ap, ea, bp, eb, ea8, eb8, pre, c, bad);
        return;
    }
    // Constant group and flush in each call, so that the tree unrolls.
    if (q->group == 4 && q->flush) pair_instr(ap, bp, q->k, 4, true, c);
    else if (q->group == 4) pair_instr(ap, bp, q->k, 4, false, c);
    else if (q->flush) pair_instr(ap, bp, q->k, 2, true, c);
    else pair_instr(ap, bp, q->k, 2, false, c);
}

// --- the tile

typedef struct {
    eng_base b;
    int pre;  // fused kinds: B's panel holds b * 2^-pre (eng_prescale_bits)
} amd_ctx;

// One segment of the tile (eng_seg_fn): its instructions.
static void amd_seg(const void *ctx, const eng_tile *t, size_t s0, size_t s1, eng_vf c[MR][NV],
                    eng_vi bad[MR][NV]) {
    const amd_ctx *x = ctx;
    const mm_engine_kind *q = x->b.p->q;
    const bool fused = q->op == MM_EOP_AMD_FUSED;
    const size_t kq = (size_t)q->k;
    const float *ap = t->ap, *bp = t->bp;
    const int32_t *ea = t->ea;
    const int16_t *eb = t->eb;
    for (size_t a0 = s0; a0 < s1; a0 += kq) {
        if (s1 - a0 >= kq) {
            const int16_t *a8 = t->ea8 ? t->ea8 + a0 * (MR / 2) : NULL;
            const int8_t *b8 = t->eb8 ? t->eb8 + a0 * 2 * NR : NULL;
            instr(q, ap + a0 * MR, fused ? ea + a0 * MR : NULL, bp + a0 * NR, fused ? eb + a0 * NR : NULL, a8, b8,
                  x->pre, c, bad);
            continue;
        }
        // The segment's last instruction, zero-padded as the model pads it.
        float la[KMAX * MR], lb[KMAX * NR];
        int32_t lea[KMAX * MR];
        int16_t leb[KMAX * NR];
        eng_pad(la, lb, lea, leb, kq, ap + a0 * MR, bp + a0 * NR, fused ? ea + a0 * MR : NULL,
                fused ? eb + a0 * NR : NULL, s1 - a0);
        instr(q, la, lea, lb, leb, NULL, NULL, x->pre, c, bad);  // the int16 pass on the copy
    }
}

// --- entry

int mm__engine_amd_run(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                       size_t K, const mm_opts *o) {
    mm__engine_plan p;
    if (mm__engine_plan_make(&p, A, B, M, N, K, o, NULL, 0) != MM_OK) return MM_EINVAL;
    if (!mm__engine_amd_covers(&p, o)) return MM_EUNSUPPORTED;
    mm__emu_job J;
    eng_job(&J, &p, A, B, M, N, K, o);  // not a block-scaled kind (mm__engine_amd_covers)
    const bool fused = p.q->op == MM_EOP_AMD_FUSED;
    // Pairwise: C and the operands as they are (no flags), only a NaN output is the model's.
    amd_ctx x = {.b = {.p = &p, .mark_c = fused, .redo_nan = true, .seg = amd_seg},
                 .pre = fused ? eng_prescale_bits(&p) : 0};
    char *mem = eng_base_alloc(&x.b, M, N, K, fused, 0, NULL);
    if (!mem) return MM_ENOMEM;
    // The panels (the thread's scratch): CDNA2's input flush (|x| below its type's smallest
    // normal becomes +0); the fused kinds' exponents and flags, B's prescaled.
    const float *ap, *bp;
    eng_prep g = eng_prep_make(&x.b, K, fused, true, x.pre);
    if (p.q->flush) g.flush_a = (uint32_t)(127 + g.emin_a) << 23, g.flush_b = (uint32_t)(127 + g.emin_b) << 23;
    int st = eng_pack(&J, A, B, &g, &ap, &bp, mem);
    if (st != MM_OK) return st;
    mm__emu_tile_loop(&J, ap, bp, C, ldc, MR, NR, eng_tile_frame, &x);
    st = mm__engine_finish(&p, C, ldc, A, B, M, N, K, o, x.b.redo, "engine-amd");
    free(mem);
    return st;
}
