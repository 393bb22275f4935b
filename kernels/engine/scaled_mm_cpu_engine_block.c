// scaled_mm_cpu_engine_block.c: the fast CPU kernel of the block-scaled matrix-engine kinds
// ("engine-block"): mxf8f6f4 (MXFP8/MXFP6 and mixed fp4, ue8m0 scales per 32) and mxf4nvf4
// (MXFP4 with ue8m0 scales per 32 or 16, NVFP4 with ue4m3 scales per 16) of blackwell:tcgen05
// and rtx-blackwell:mma, in vector lanes, bit for bit the scalar model of engine_model.c
// (nv_fused with scales, nv_fp4, nv_out_f32), which mm__engine_run runs one dot product at a time.
// Also their f8f6f4 kind without scales (unscaled_covered: the mxf8f6f4 arithmetic with every
// scale 1, the plan's own segments with operand scales at promotion, f32 or f16 D: nv_fused
// without scales, nv_out_f16), which the NVIDIA fused kernel cannot sum in one int32.
//
// A tile kernel of the emulated path (scaled_mm_internal.h), as scaled_mm_cpu_engine.c: the same
// packed panels, tile loop, segments (promote=N's alone: the instruction takes the scales),
// promotion and epilogue; a tile is MR rows of op(A) x NR columns of op(B), one output per lane;
// a segment's last instruction, when K does not fill it, runs on a zero-padded copy, and its
// blocks past the segment take scale 1 (exponent 0, which joins the alignment) as the model's do.
// The scales' exponents and significands (the model's sig_exp: ue8m0 from 2^-127, ue4m3 from
// 2^-6, a zero -126) are tabled once per product beside the panels.
// - mxf8f6f4 (k = 32, one block, frac 25), per lane: the products' largest exponent P (exponent
//   panels, as scaled_mm_cpu_engine.c, on int8 lanes where eng_max8 covers them) and the block's
//   scale exponent esab give the alignment E = max(ec, P + esab); each product a*b*2^(25 + esab -
//   E) is exact in float32 (the power of two an addition to the exponent field, eng_prescale_bits
//   of engine_lanes.h), truncated to int32 and summed in two halves of 16 (each below 2^31); C's
//   term and the total in double (exact: below 2^34).
// - mxf4nvf4 (k = 64, groups of 16, frac 35), per lane: each group's sum of fp4 products is exact
//   in float32 (multiples of 1/4 below 2^10), times the scales' significands (exact: at most 20
//   bits); the groups and C are aligned to the largest of the scales' exponents and C's and
//   truncated in double (terms below 2^49, their sum below 2^51).
// - f8f6f4's f16 D: C's exponent from fp16's emin (-14), the exact sum (double lanes) rounded to
//   nearest-even fp16 by one double addition and subtraction; inf past 65504 stays in the lane
//   (later instructions add finite products to it), and a first C that rounds to inf is the
//   scalar model's.
// - an f32 D: the sum toward zero to float32 (the low 29 bits of the double cleared), exact where D is
//   zero or a normal float32. Otherwise (below 2^-126: the model truncates on float32's
//   subnormal grid; 2^128 and up: inf) the lane is marked for the scalar model, as are outputs
//   whose row or column has a NaN or inf operand or a NaN scale, or whose C is NaN or inf.
//
// Constraints: no MPFR, no global state; results do not depend on the number of threads; runs
// in the default floating-point environment, which mm__emu_tile_loop sets.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/engine/engine_lanes.h"
#include "kernels/scaled_mm_internal.h"

enum { MR = ENG_MR, NV = ENG_NV, NR = ENG_NR, KMAX = 64 };


static bool is_fp4(const mm_engine_kind *q) { return q->group > 0; }

// The f8f6f4 kind without scales (both Blackwells, k = 32, frac 25): the mxf8f6f4 arithmetic with
// unit scales (exponent 0 in the alignment, as the model's nv_fused without scales), where the
// NVIDIA fused kernel cannot take it (its int32 sum of 32 terms below 2^27 overflows); an f32 or
// an f16 D.
static bool unscaled_covered(const mm__engine_plan *p, const mm_opts *o) {
    const mm_engine_kind *q = p->q;
    return q->op == MM_EOP_FUSED && !q->block && !q->group && !p->scaled_kind && q->k == 32 && q->split == 1 &&
           q->out_frac == 23 && q->frac + 2 + 4 <= 31 && (!o->acc.engine_f16 || q->f16_out) &&
           !mm__engine_fast_covers(p, o);
}

bool mm__engine_block_covers(const mm__engine_plan *p, const mm_opts *o) {
    const mm_engine_kind *q = p->q;
    if (unscaled_covered(p, o)) return true;
    if (q->op != MM_EOP_FUSED || !q->block || !p->scaled_kind || o->acc.engine_f16 || q->split != 1 ||
        q->out_frac != 23)
        return false;
    if (is_fp4(q))  // group sums exact in float32, terms below 2^(frac + 14) in double
        return q->group == 16 && q->k == 64 && q->k % q->block == 0 && q->block % q->group == 0 && q->frac <= 36;
    // Two int32 halves of 16 terms below 2^(frac + 2).
    return q->k == 32 && q->block == 32 && q->frac + 2 + 4 <= 31;
}

// --- the tables

typedef struct {
    eng_base b;             // exponent panels for mxf8f6f4 only; flags: a NaN/inf operand or a NaN scale
    int32_t *sae, *sbe;     // the scales' exponents: A (nblk, mp), B (nblk, np); padding lines 0
    float *sas, *sbs;       // their significands (ue8m0: 1); padding lines 1
    size_t mp, np, nblk;
    bool unit;              // the f8f6f4 kind without scales: every scale 1, no tables
    bool f16;               // its f16 D (o->acc.engine_f16)
    int pre;                // mxf8f6f4, f8f6f4: B's panel holds b * 2^-pre (eng_prescale_bits)
} blk_ctx;

// The scales of `lines` lines (line t's block g at sc[t * ld_line + g * ld_blk]) as exponents
// and significands (sig_exp with the scale type's emin semin) into e, s ((nblk, pad)); a NaN
// scale sets bad[t].
static void scale_tab(int32_t *e, float *s, unsigned char *bad, const float *sc, size_t lines, size_t pad,
                      size_t nblk, size_t ld_line, size_t ld_blk, int semin) {
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < pad; t++)
        for (size_t g = 0; g < nblk; g++) {
            double x = t < lines ? fabs((double)sc[t * ld_line + g * ld_blk]) : 1.0;
            int ex = 0;
            double sg = 1.0;
            if (isnan(x)) {
                bad[t] = 1;
            } else if (x == 0.0) {
                ex = -126, sg = 0.0;
            } else {
                ex = ilogb(x) < semin ? semin : ilogb(x);
                sg = ldexp(x, -ex);
            }
            e[g * pad + t] = ex, s[g * pad + t] = (float)sg;
        }
}

// --- D

// D from the exact sum S * 2^e (S an integer in double): toward zero to float32's 23 fraction
// bits; out marks a lane whose D is not zero or a normal float32. The check is on the float32
// D: the truncated double converts exactly where it is a normal float32, to inf from 2^128 up,
// and to a subnormal or zero below 2^-126, which S (an integer: a float32 zero only when zero)
// tells apart from a zero D.
static inline eng_vf out_f32(eng_vd S, eng_vi e, eng_vi *out) {
    const eng_vd v = S * eng_p2d(e);  // exact: S below 2^53, 2^e within double's range
    const eng_vf d = eng_d2f((eng_vd)((eng_vl)v & ~0x1fffffffll));  // exact where normal
    const eng_vi mag = (eng_vi)d & 0x7fffffff;
    *out |= ~((mag >= 0x00800000) & (mag < 0x7f800000)) & ~(eng_d2f(S) == 0);
    return d;
}

#ifdef __AVX512F__
// out_f32 in int32 and float32 lanes where the sum fits (the usual case: twice as fast as the
// double lanes'): S = s0 + s1 + C's term trunc(c * 2^-e) (exact: c times a power of two, below
// 2^(frac + 1); truncated to 0 where the product falls below float32's normals), toward zero to
// float32 by the conversion's rounding, times 2^e from bits. False (c, out untouched) where any
// lane's sum passes int32 or C's scale 2^-e is not a normal float32. (Then 2^e is one too, or is
// 2^-127, whose bits are 0: D is then a signed zero for a sum that is not zero, marked below.)
static inline bool out_f32_int(eng_vu s0, eng_vu s1, eng_vi e, eng_vf *c, eng_vi *out) {
    const eng_vi sb = 127 - e, db = 127 + e;  // the scales' biased exponents
    const eng_vi a = (eng_vi)(s0 + s1);
    const eng_vi ct = __builtin_convertvector(*c * (eng_vf)(eng_max(eng_min(sb, eng_ibcast(254)), eng_ibcast(1)) << 23),
                                              eng_vi);
    const eng_vi S = (eng_vi)((eng_vu)a + (eng_vu)ct);
    const eng_vi no = ((((eng_vi)s0 ^ a) & ((eng_vi)s1 ^ a)) | ((a ^ S) & (ct ^ S))) < 0;  // int32 overflow
    if (eng_any(no | (sb < 1) | (sb > 254))) return false;
    const eng_vf d = (eng_vf)_mm512_cvt_roundepi32_ps((__m512i)S, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC) *
                     (eng_vf)(db << 23);
    const eng_vi mag = (eng_vi)d & 0x7fffffff;
    *out |= ~((mag >= 0x00800000) & (mag < 0x7f800000)) & (S != 0);
    *c = d;
    return true;
}
#endif

// C's exponent as the model's sig_exp(c, -126) from its float32 bits (a zero: -126).
static inline eng_vi c_exp(eng_vf c) { return eng_max((((eng_vi)c >> 23) & 0xff) - 127, eng_ibcast(-126)); }

// The same for an f16 C (the model's sig_exp(c, -14): fp16's subnormals at its emin, a zero -126).
static inline eng_vi c_exp16(eng_vf c) {
    const eng_vi cz = ((eng_vi)c & 0x7fffffff) == 0;
    return (cz & eng_ibcast(-126)) | (~cz & eng_max((((eng_vi)c >> 23) & 0xff) - 127, eng_ibcast(-14)));
}

// v (finite, a normal double or zero) to nearest-even fp16 (10 fraction bits, exponents from
// -14: the model's nv_out_f16, and the first C's fmt_round1), as a float32: a zero +0, inf past
// 65504 (ovf set there). The rounding is the double addition of 2^(e + 42), whose ulp is fp16's
// at v's exponent e (at least -14), and its subtraction (exact), under round-to-nearest-even.
static inline eng_vf round_f16d(eng_vd v, eng_vi *ovf) {
    const eng_vd a = (eng_vd)((eng_vl)v & 0x7fffffffffffffffll);
    const eng_vi e = eng_max(__builtin_convertvector(((eng_vl)a >> 52) - 1023, eng_vi), eng_ibcast(-14));
    const eng_vd big = eng_p2d(e + 42);
    const eng_vf r = eng_d2f((a + big) - big);                  // exact: an fp16 value, or 65536 and up
    const eng_vi inf = (eng_vi)r > 0x477fe000;                  // past 65504
    *ovf |= inf;
    const eng_vi ri = ((eng_vi)r & ~inf) | (inf & 0x7f800000);
    const eng_vi neg = __builtin_convertvector((eng_vl)v < 0, eng_vi);
    return (eng_vf)(ri | (neg & (ri != 0) & (int32_t)0x80000000));
}

// --- mxf8f6f4: one instruction of 32 products, block g (unit: f8f6f4 without scales, g unused;
// f16: its f16 D, c holding fp16 values)

// ea8, eb8: the int8 exponent panels at the instruction's first product (eng_max8), or NULL.
static inline __attribute__((always_inline)) void mx_instr(const blk_ctx *x, const float *ap, const int32_t *ea,
                                                            const float *bp, const int16_t *eb, const int16_t *ea8,
                                                            const int8_t *eb8, size_t g, size_t i0, size_t j0,
                                                            eng_vf c[MR][NV], eng_vi bad[MR][NV], const bool unit,
                                                            const bool f16) {
    const int frac = x->b.p->q->frac;
    eng_vh Ph[MR];
    if (!ea8 || !eng_max8(ea8, eb8, 0, 32, 1, Ph)) {  // int8 lanes where they cover the instruction
        for (int r = 0; r < MR; r++) Ph[r] = (eng_vh){0} - 252;  // below any product exponent
        for (int k = 0; k < 32; k++) {
            const eng_vh e = *(const eng_vh_u *)(eb + k * NR);
            for (int r = 0; r < MR; r++) Ph[r] = eng_hmax(Ph[r], e + (int16_t)ea[k * MR + r]);
        }
    }
    eng_vi esb[NV];
    for (int v = 0; v < NV; v++)
        esb[v] = unit ? eng_ibcast(0) : (eng_vi)(*(const eng_vi_u *)(x->sbe + g * x->np + j0 + (size_t)v * ENG_VL));
    eng_vi E[MR][NV];
    eng_vi sh[MR][NV], neg = {0};  // 2^(frac + esab + pre - E) as an exponent-field addition
    for (int r = 0; r < MR; r++) {
        const int32_t esa = unit ? 0 : x->sae[g * x->mp + i0 + (size_t)r];
        eng_vi P[NV];
        eng_widen(P, Ph[r]);
        for (int v = 0; v < NV; v++) {
            const eng_vi esab = esa + esb[v];
            E[r][v] = eng_max(f16 ? c_exp16(c[r][v]) : c_exp(c[r][v]), P[v] + esab);
            sh[r][v] = eng_shift_bits(frac + x->pre + esab - E[r][v], &neg);
        }
    }
    // The 32 terms in two halves of 16 (each below 2^31); a lane's E past frac + esab + pre (C far
    // above the products) multiplies. Unsigned: wrapping is defined (lanes of marked operands only).
    eng_vu S[2][MR][NV];
    memset(S, 0, sizeof S);
    for (size_t h = 0; h < 2; h++) eng_terms(ap, bp, 16 * h, 16, 1, sh, neg, S[h]);
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) {
#ifdef __AVX512F__
            if (!f16 && out_f32_int(S[0][r][v], S[1][r][v], E[r][v] - frac, &c[r][v], &bad[r][v])) continue;
#endif
            const eng_vd ct = eng_trunc(eng_f2d(c[r][v]) * eng_p2d(frac - E[r][v]));
            const eng_vd s = eng_i2d((eng_vi)S[0][r][v]) + eng_i2d((eng_vi)S[1][r][v]) + ct;  // +0 first: a zero is +0
            if (f16) {
                // fp16's inf stays in the lane: the model's later instructions add finite
                // products to it (a lane whose C is inf keeps it, whatever this one computed).
                const eng_vi cinf = ((eng_vi)c[r][v] & 0x7fffffff) == 0x7f800000;
                eng_vi ovf = eng_ibcast(0);
                const eng_vf d = round_f16d(s * eng_p2d(E[r][v] - frac), &ovf);  // exact product
                c[r][v] = (eng_vf)((cinf & (eng_vi)c[r][v]) | (~cinf & (eng_vi)d));
            } else {
                c[r][v] = out_f32(s, E[r][v] - frac, &bad[r][v]);
            }
        }
}

// --- mxf4nvf4: one instruction of 64 products from a0 (segment end s1: blocks from there take
// scale 1)

static inline __attribute__((always_inline)) void fp4_instr(const blk_ctx *x, const float *ap, const float *bp,
                                                             size_t a0, size_t s1, size_t i0, size_t j0,
                                                             eng_vf c[MR][NV], eng_vi bad[MR][NV]) {
    const mm_engine_kind *q = x->b.p->q;
    const int frac = q->frac;
    const size_t blk = (size_t)q->block;
    eng_vf term[4][MR][NV];
    eng_vi ee[4][MR][NV], maxe[MR][NV];
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) maxe[r][v] = c_exp(c[r][v]);
    for (int t = 0; t < 4; t++) {
        eng_vf s[MR][NV];
        memset(s, 0, sizeof s);
        for (int k = 16 * t; k < 16 * t + 16; k++) {
            eng_vf y[NV];
            for (int v = 0; v < NV; v++) y[v] = *(const eng_vf_u *)(bp + k * NR + v * ENG_VL);
            for (int r = 0; r < MR; r++) {
                const eng_vf xa = eng_fbcast(ap[k * MR + r]);
                for (int v = 0; v < NV; v++) s[r][v] = s[r][v] + xa * y[v];  // exact
            }
        }
        const size_t kb = a0 + (size_t)(16 * t) / blk * blk;  // the group's block starts here
        const bool real = kb < s1;
        const size_t g = kb / blk;
        eng_vi esb[NV];
        eng_vf sgb[NV];
        for (int v = 0; v < NV; v++) {
            esb[v] = real ? (eng_vi)(*(const eng_vi_u *)(x->sbe + g * x->np + j0 + (size_t)v * ENG_VL)) : eng_ibcast(0);
            sgb[v] = real ? (eng_vf)(*(const eng_vf_u *)(x->sbs + g * x->np + j0 + (size_t)v * ENG_VL)) : eng_fbcast(1.0f);
        }
        for (int r = 0; r < MR; r++) {
            const int32_t esa = real ? x->sae[g * x->mp + i0 + (size_t)r] : 0;
            const float sga = real ? x->sas[g * x->mp + i0 + (size_t)r] : 1.0f;
            for (int v = 0; v < NV; v++) {
                term[t][r][v] = s[r][v] * (sga * sgb[v]);  // exact: at most 20 significant bits
                ee[t][r][v] = esa + esb[v];
                maxe[r][v] = eng_max(maxe[r][v], ee[t][r][v]);
            }
        }
    }
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) {
            const eng_vi m = maxe[r][v];
            eng_vd S = eng_trunc(eng_f2d(c[r][v]) * eng_p2d(frac - m));
            S = (eng_vd){0} + S;  // a zero sum is +0
            for (int t = 0; t < 4; t++)
                S += eng_trunc(eng_f2d(term[t][r][v]) * eng_p2d(frac + ee[t][r][v] - m));
            c[r][v] = out_f32(S, m - frac, &bad[r][v]);
        }
}

// --- the tile

// One segment of the tile (eng_seg_fn): its instructions.
static void blk_seg(const void *ctx, const eng_tile *t, size_t s0, size_t s1, eng_vf c[MR][NV],
                    eng_vi bad[MR][NV]) {
    const blk_ctx *x = ctx;
    const mm_engine_kind *q = x->b.p->q;
    const bool fp4 = is_fp4(q);
    const size_t kq = (size_t)q->k;
    if (x->f16 && x->b.p->c_in_chain)  // the model's first C: C rounded to fp16 (nearest-even)
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++) {
                eng_vi ovf = eng_ibcast(0);
                c[r][v] = round_f16d(eng_f2d(c[r][v]), &ovf);
                bad[r][v] |= ovf;  // it rounds to inf: the model's
            }
    for (size_t a0 = s0; a0 < s1; a0 += kq) {
        const float *pa = t->ap + a0 * MR, *pb = t->bp + a0 * NR;
        const int32_t *pea = fp4 ? NULL : t->ea + a0 * MR;
        const int16_t *peb = fp4 ? NULL : t->eb + a0 * NR;
        const int16_t *pa8 = t->ea8 ? t->ea8 + a0 * (MR / 2) : NULL;
        const int8_t *pb8 = t->eb8 ? t->eb8 + a0 * 2 * NR : NULL;
        float la[KMAX * MR], lb[KMAX * NR];
        int32_t lea[32 * MR];
        int16_t leb[32 * NR];
        if (s1 - a0 < kq) {  // the segment's last instruction, zero-padded as the model pads it
            eng_pad(la, lb, lea, leb, kq, pa, pb, pea, peb, s1 - a0);
            pa = la, pb = lb;
            if (!fp4) pea = lea, peb = leb;
            pa8 = NULL, pb8 = NULL;  // the int16 pass on the copy
        }
        if (fp4) fp4_instr(x, pa, pb, a0, s1, t->i0, t->j0, c, bad);
        else if (!x->unit)  // block g of the instruction's scales (q->block is 0 without scales)
            mx_instr(x, pa, pea, pb, peb, pa8, pb8, a0 / (size_t)q->block, t->i0, t->j0, c, bad, false, false);
        else if (x->f16) mx_instr(x, pa, pea, pb, peb, pa8, pb8, 0, t->i0, t->j0, c, bad, true, true);
        else mx_instr(x, pa, pea, pb, peb, pa8, pb8, 0, t->i0, t->j0, c, bad, true, false);
    }
}

// --- entry

int mm__engine_block_run(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                         size_t K, const mm_opts *o) {
    mm__engine_plan p;
    if (mm__engine_plan_make(&p, A, B, M, N, K, o, NULL, 0) != MM_OK) return MM_EINVAL;
    if (!mm__engine_block_covers(&p, o)) return MM_EUNSUPPORTED;
    const mm_engine_kind *q = p.q;
    const bool unit = !p.scaled_kind;  // f8f6f4 without scales (unscaled_covered)
    mm__emu_job J;
    if (unit) {  // the plan's segments, operand scales applied at promotion
        eng_job(&J, &p, A, B, M, N, K, o);
    } else {  // the instruction applies the scales: the job has none, and its segments are promote=N's
        J = (mm__emu_job){.M = M, .N = N, .K = K, .beta = o->beta, .bka = K, .bkb = K, .nba = 1};
        J.ab = mm__fl32_prod3(o->alpha, mm__tscale(A), mm__tscale(B));
        J.bk = K, J.pe = mm__seg_promote(o);
    }
    size_t bka = K, bkb = K;
    const size_t nba = unit ? 0 : mm__nblocks(A, K, &bka);
    if (!unit) mm__nblocks(B, K, &bkb);
    const size_t mp = (M + MR - 1) / MR * MR, np = (N + NR - 1) / NR * NR, nblk = nba;
    const bool fp4 = is_fp4(q);
    // One block: exponent panels (mxf8f6f4, f8f6f4), the scale tables (none without scales), then
    // the flags.
    blk_ctx x = {.b = {.p = &p, .mark_c = true, .seg = blk_seg}, .mp = mp, .np = np, .nblk = nblk, .unit = unit,
                 .f16 = unit && o->acc.engine_f16};
    void *tabs;
    char *mem = eng_base_alloc(&x.b, M, N, K, !fp4, nblk * (mp + np) * 8, &tabs);
    if (!mem) return MM_ENOMEM;
    x.sae = tabs, x.sas = (float *)(x.sae + nblk * mp);
    x.sbe = (int32_t *)(x.sas + nblk * mp), x.sbs = (float *)(x.sbe + nblk * np);
    // The panels (the thread's scratch): flags (finite), and the exponents for mxf8f6f4 and
    // f8f6f4, B's prescaled.
    x.pre = fp4 ? 0 : eng_prescale_bits(&p);
    const float *ap, *bp;
    eng_prep g = eng_prep_make(&x.b, K, true, false, x.pre);
    int st = eng_pack(&J, A, B, &g, &ap, &bp, mem);
    if (st != MM_OK) return st;
    if (!unit) {
        const int semin = q->ue4m3_scales ? -6 : -127;
        scale_tab(x.sae, x.sas, x.b.abad, A->scales, M, mp, nblk, nba, 1, semin);
        scale_tab(x.sbe, x.sbs, x.b.bbad, B->scales, N, np, nblk, 1, N, semin);
    }
    mm__emu_tile_loop(&J, ap, bp, C, ldc, MR, NR, eng_tile_frame, &x);
    st = mm__engine_finish(&p, C, ldc, A, B, M, N, K, o, x.b.redo, "engine-block");
    free(mem);
    return st;
}
