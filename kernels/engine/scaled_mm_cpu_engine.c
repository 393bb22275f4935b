// scaled_mm_cpu_engine.c: the fast CPU kernel of the NVIDIA fused matrix-engine kinds
// (MM_EOP_FUSED without block scaling, f32 or f16 C/D: e.g. hopper:wgmma and ada:mma on fp8,
// ampere:mma and hopper:wgmma on bf16 and fp16, and their :f16 forms), in vector lanes, bit for
// bit the scalar model of engine_model.c (nv_fused, nv_out_f32, nv_out_f16), which
// mm__engine_run runs one dot product at a time.
//
// It is a third tile kernel of the emulated path (scaled_mm_internal.h): the same packed
// panels, tile loop and floating-point environment (mm__emu_pack_each, mm__emu_tile_loop), the same
// segments, promotion and epilogue. A tile is MR rows of op(A) x NR columns of op(B), one output
// per lane (columns along the vector). Per fused step (k / split products) and per lane:
// - the exponents: every operand's exponent is kept in a panel beside its own as an int16
//   (max(ilogb, the type's emin), a zero -126: the model's sig_exp), so the largest term
//   exponent E is an add and a max per product on NR lanes at once (A's exponent stored twice
//   in 32 bits: one broadcast load; fp8 and fp16 operands on int8 lanes, two rows at once,
//   eng_max8 of engine_lanes.h), started from C's exponent (max(biased - 127, -126) from its
//   float32 bits);
// - the terms: a product a*b is exact in float32 (fp8, fp16, bf16 within 2^+-50), and so is
//   a*b*2^(frac - E) (a power of two: an addition to the product's exponent field on B's
//   prescaled panel, eng_prescale_bits of engine_lanes.h, or a multiply where that cannot
//   be); its truncation toward zero is the conversion to int32 (cvtt), and the products' sum
//   is exact in int32 because frac + 2 + log2(k / split) <= 31 (mm__engine_fast_covers). C's
//   term is trunc(c * 2^(frac - E)) the same way (below 2^(frac + 1)); the sum S with it is
//   checked for int32 overflow;
// - D: S truncated toward zero to a float32 (converted to nearest, then one ulp back where that
//   went past S), its fraction masked to out_frac bits, times 2^(E - frac): exact where the
//   result is a normal float32. Where it is not (below 2^-126: the model truncates on float32's
//   subnormal grid; 2^128 and up: inf, after which C is special), the lane is marked and the
//   output is left to the scalar model, which runs the marked outputs after the tiles
//   (mm__engine_run_plan). All lanes are int32 or float32.
// - an f16 D (o->acc.engine_f16): S rounded to odd at 24 bits (toward zero, its last bit set
//   where bits were dropped), times 2^(E - frac) (exact, as above), then rounded to nearest-even
//   fp16 in float32 lanes (round_f16: one rounding of the exact S, since 24 >= 11 + 2). fp16's
//   inf (from 65520 up: sums of fp8 products overflow an f16 D often) stays in the lane: the
//   model's later steps keep it (C = inf plus finite products), and so does the kernel (a lane
//   whose C is inf keeps it, whatever its step computed). C's exponent is at least
//   fp16's emin (-14), as the model places an fp16 subnormal C; C in the chain is first rounded
//   to fp16, as the model's first C.
// Operands outside the covered range (NaN, inf, bf16 beyond 2^+-50) mark their whole row or
// column for the scalar model: special values stay the model's alone.
//
// Constraints: no MPFR, no global state; results do not depend on the number of threads; runs
// in the default floating-point environment (no flush-to-zero, no denormals-are-zero), which
// mm__emu_tile_loop sets.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/engine/engine_lanes.h"  // the exponent panels (eng_prep_panel), the tile's frame
#include "kernels/scaled_mm_internal.h"

// The lanes of engine_lanes.h under this kernel's short names.
#define VL ENG_VL
typedef eng_vf vf;
typedef eng_vi vi;
typedef eng_vu vu;
typedef eng_vf_u vf_u;

enum { MR = ENG_MR, NV = ENG_NV, NR = ENG_NR };

// --- operands

static int log2_ceil(int n) {
    int lg = 0;
    while ((1 << lg) < n) lg++;
    return lg;
}

// The bits a step's sum of products needs: each of its k / split terms is below 2^(frac + 2).
static int step_sum_bits(const mm_engine_kind *q) { return q->frac + 2 + log2_ceil(q->k / q->split); }

bool mm__engine_fast_covers(const mm__engine_plan *p, const mm_opts *o) {
    (void)o;  // f32 and f16 D alike
    const mm_engine_kind *q = p->q;
    if (q->op != MM_EOP_FUSED || q->block || q->group || p->scaled_kind) return false;
    const unsigned ok = MM_ET_E4M3 | MM_ET_E5M2 | MM_ET_F16 | MM_ET_BF16;
    if (!(p->ta & ok) || !(p->tb & ok)) return false;
    return step_sum_bits(q) <= 31 && q->out_frac <= 23;  // the products' sum in int32
}

// Whether a step's sum with C's term can pass int32: C's term is below 2^(frac + 1), so it fits
// beside the products' where their sum needs at most 30 bits.
static bool sum_may_wrap(const mm_engine_kind *q) { return step_sum_bits(q) > 30; }

// --- the exponent panels

// What the kernel reads beside the float panels of mm__emu_pack_each (same layout, (ceil(n/w), K,
// w)): each element's model exponent, and per line whether an operand is outside eng_op_ok (engine_lanes.h).
typedef struct {
    eng_base b;  // flags: an operand outside eng_op_ok
    bool f16;    // the instruction's C/D is f16 (o->acc.engine_f16)
    int pre;     // B's panel holds b * 2^-pre (eng_prescale_bits)
    bool wide;   // sum_may_wrap
    bool lean;   // an f16 D from fp16 or fp8 operands (step's lean)
} eng_ctx;

// --- the tile

// Per lane the step's largest exponent E: C's (from its float32 bits: max(biased - 127, cmin),
// a zero -126; cmin = -126 for an f32 D, -14 for an f16 D, whose subnormals the model places at
// fp16's emin) and each product's (the operands' model exponents added), in int16 lanes, NR at a
// time.
static inline __attribute__((always_inline)) void step_exps(const int32_t *ea, const int16_t *eb,
                                                             const int16_t *ea8, const int8_t *eb8, size_t k0,
                                                             size_t n, vf c[MR][NV], vi E[MR][NV], const int cmin) {
    eng_vh Eh[MR];
#if defined(__AVX512BW__) && VL == 16
    if (!ea8 || !eng_max8(ea8, eb8, k0, n, 1, Eh)) {  // int8 lanes where they cover the step
        __m512i H[MR];
        for (int r = 0; r < MR; r++) H[r] = _mm512_set1_epi16(-252);  // below any exponent (two zeros)
        for (size_t k = k0; k < k0 + n; k++) {
            const __m512i e = _mm512_loadu_si512(eb + k * NR);
            for (int r = 0; r < MR; r++)
                H[r] = _mm512_max_epi16(H[r], _mm512_add_epi16(e, _mm512_set1_epi32(ea[k * MR + r])));
        }
        memcpy(Eh, H, sizeof Eh);
    }
#else
    (void)ea8, (void)eb8;
    for (int r = 0; r < MR; r++) Eh[r] = (eng_vh){0} - 252;  // below any exponent (two zeros: -252)
    for (size_t k = k0; k < k0 + n; k++) {
        const eng_vh e = *(const eng_vh_u *)(eb + k * NR);
        for (int r = 0; r < MR; r++) Eh[r] = eng_hmax(Eh[r], e + (int16_t)ea[k * MR + r]);
    }
#endif
    for (int r = 0; r < MR; r++) {
        vi wv[NV];
        eng_widen(wv, Eh[r]);
        for (int v = 0; v < NV; v++) {
            const vi cb = (vi)c[r][v];
            const vi cz = (cb & 0x7fffffff) == 0;  // -1 where C is a zero
            const vi lo = (cz & eng_ibcast(-126)) | (~cz & eng_ibcast(cmin));
            E[r][v] = eng_max(eng_max(((cb >> 23) & 0xff) - 127, lo), wv[v]);
        }
    }
}

// v to nearest-even fp16 (10 fraction bits, exponents from -14, the model's nv_out_f16), as a
// float32: +0 for a zero, inf from 65520 up (what rounds past 65504). v: float32 lanes, each a
// zero, or a float32 that is the exact value rounded to odd at 24 bits (so that this second
// rounding, to at most 11 bits, is the exact value's: 24 >= 11 + 2), or any finite float32 (one
// rounding). Rounding is the float32 addition of 2^(e + 13), whose ulp is fp16's at v's exponent
// e (at least -14), under round-to-nearest-even (mm__emu_tile_loop's environment), and its
// subtraction (exact).
static inline vf round_f16(vf v) {
    const vi u = (vi)v, mag = u & 0x7fffffff;
    vi e = mag >> 23;                                  // biased; at least fp16's emin, at most its emax
    e = eng_max(e, eng_ibcast(127 - 14));
    e = -eng_max(-e, eng_ibcast(-(127 + 15)));
    const vf big = (vf)((e + 13) << 23);
    vi r = (vi)(((vf)mag + big) - big);
    const vi ovf = mag >= 0x477ff000;                  // 65520 and up (NaN too: the caller marks it)
    r = (r & ~ovf) | (ovf & 0x7f800000);
    return (vf)(r | (u & (int32_t)0x80000000 & (r != 0)));
}

// One fused step on the tile, int32 path: products k0 .. k0 + n - 1 (n may be 0: C alone), c in
// and out (D values: float32, or fp16 values when f16), bad: lanes that the scalar model must do.
// wide: the sum with C's term can pass int32 (sum_may_wrap), so it is checked.
// lean (an f16 D from fp16 or fp8 operands, every such kind of the table): no check but wide's
// can fire, so none is made. C in the chain is an fp16 value (the first C rounded to fp16, where
// an inf or NaN is marked; then D values) or an inf that cinf keeps, and the operands' model
// exponents lie in [-14, 15]: where S is not 0, E is in [-28, 31], so that the scale 2^(frac - E),
// C's term and D = f 2^(E - frac) (below 2^39, at least 2^-53) stay normal float32 values; where
// every product and C are zero, S is 0 and so is D (its exponent field clamped to at least 1).
static inline __attribute__((always_inline)) void step(const mm_engine_kind *q, const float *ap, const int32_t *ea,
                                                        const float *bp, const int16_t *eb, const int16_t *ea8,
                                                        const int8_t *eb8, size_t k0, size_t n,
                                                        vf c[MR][NV], vi bad[MR][NV], const bool f16,
                                                        const bool wide, const bool lean, const int pre) {
    const int frac = q->frac, out_frac = q->out_frac;
    vi E[MR][NV];
    step_exps(ea, eb, ea8, eb8, k0, n, c, E, f16 ? -14 : -126);
    vf sc[MR][NV];  // 2^(frac - E): C's term
    vi sh[MR][NV];  // the products' (B prescaled): (frac + pre - E) << 23, eng_prescale_bits
    vu P[MR][NV];   // int32 sums kept in unsigned lanes: wrapping is defined (lanes of NaN/inf
                    // operands convert to INT_MIN and are redone by the scalar model anyway)
    vi neg = {0};
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) {
            vi be = 127 + frac - E[r][v];
            be = -eng_max(-be, eng_ibcast(-254));  // min(be, 254): only where every product is zero
            be = eng_max(be, eng_ibcast(0));        // E past 127 + frac: NaN/inf operands, the scalar model's
            sc[r][v] = (vf)(be << 23);
            sh[r][v] = eng_shift_bits(frac + pre - E[r][v], &neg);
            P[r][v] = (vu){0};
        }
    eng_terms(ap, bp, k0, n, 1, sh, neg, P);  // a lane's E past frac + pre: the scale multiplies
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) {
            const vi cb = (vi)c[r][v];
            // C's term: trunc(c * 2^(frac - E)), below 2^(frac + 1); where the scale was clamped
            // (E below frac - 127) and c is not zero, the scalar model.
            const vi cz = (cb & 0x7fffffff) == 0;
            vi out = lean ? (vi){0} : ~cz & ((127 + frac - E[r][v]) > 254);
            const vi ct = __builtin_convertvector(c[r][v] * sc[r][v], vi);
            const vi Pv = (vi)P[r][v], S = (vi)(P[r][v] + (vu)ct);
            if (wide) out |= ((Pv ^ S) & (ct ^ S)) < 0;  // int32 overflow (bf16 at its extreme)
            // S toward zero to float32: AVX-512's conversion takes the rounding direction; else
            // the nearest, one ulp back toward zero where it went past.
#ifdef __AVX512F__
            vf f = (vf)_mm512_cvt_roundepi32_ps((__m512i)S, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
#else
            vf f = __builtin_convertvector(S, vf);
            const vi back = __builtin_convertvector(f, vi);
            const vi away = ((S > 0) & ((f >= 0x1p31f) | (back > S))) | ((S < 0) & (back < S));
            f = (vf)((vi)f + away);
#endif
            // f32 D: f (S toward zero) with out_frac fraction bits. f16 D: S rounded to odd at 24
            // bits (f, its last bit set where the truncation dropped bits), rounded to fp16 below.
            if (f16) f = (vf)((vi)f | ((__builtin_convertvector(f, vi) != S) & 1));
            else f = (vf)((vi)f & ~(int32_t)((1u << (23 - out_frac)) - 1));
            // D = f * 2^(E - frac), exact where a normal float32 (and inf past 2^128, as the
            // model; the next step would need the scalar model, so that lane goes there too).
            const vi de = 127 + E[r][v] - frac;
            vf d;
            if (lean) d = f * (vf)(eng_max(de, eng_ibcast(1)) << 23);
            else {
                const vi dc = -eng_max(-eng_max(de, eng_ibcast(1)), eng_ibcast(-254)), sz = S == 0;
                out |= ~sz & (de != dc);  // de outside [1, 254]
                d = f * (vf)(dc << 23);
                const vi mag = (vi)d & 0x7fffffff;
                out |= ~sz & ((mag < 0x00800000) | (mag >= 0x7f800000));
            }
            if (!f16) {  // an f32 D that is inf was marked where it arose (here, or as the first C)
                bad[r][v] |= out;
                c[r][v] = d;
                continue;
            }
            // f16 D: to fp16. Its inf (from 65520 up: an f16 D's common overflow) stays in the lane:
            // the model's later steps add finite products to it, so D stays that inf (cinf).
            d = round_f16(d);
            const vi cinf = (cb & 0x7fffffff) == 0x7f800000;
            bad[r][v] |= out & ~cinf;
            c[r][v] = (vf)((cinf & cb) | (~cinf & (vi)d));
        }
}


// One segment of the tile (eng_seg_fn): its fused steps (k / split products each).
static void engine_seg(const void *ctx, const eng_tile *t, size_t s0, size_t s1, vf c[MR][NV], vi bad[MR][NV]) {
    const eng_ctx *x = ctx;
    const mm_engine_kind *q = x->b.p->q;
    const size_t unit = (size_t)(q->k / q->split), kq = (size_t)q->k, split = (size_t)q->split;
    const bool f16 = x->f16, wide = x->wide, lean = x->lean;
    if (f16 && x->b.p->c_in_chain)  // the model's first C: C rounded to fp16 (nearest-even)
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++) {
                c[r][v] = round_f16(c[r][v]);
                bad[r][v] |= ((vi)c[r][v] & 0x7fffffff) == 0x7f800000;  // it rounds to inf: the model's
            }
    const size_t nsteps = (s1 - s0 + kq - 1) / kq * split;
    const int16_t *ea8 = t->ea8;  // the tile's int8 exponent panels, or NULL
    const int8_t *eb8 = t->eb8;
    for (size_t u = 0; u < nsteps; u++) {
        const size_t a0 = s0 + u * unit;
        const size_t m = a0 >= s1 ? 0 : s1 - a0 < unit ? s1 - a0 : unit;
        // Copies of the step, each with its D type and its checks as constants.
        const size_t k0 = a0 < s1 ? a0 : s1;
        if (lean && wide) step(q, t->ap, t->ea, t->bp, t->eb, ea8, eb8, k0, m, c, bad, true, true, true, x->pre);
        else if (lean) step(q, t->ap, t->ea, t->bp, t->eb, ea8, eb8, k0, m, c, bad, true, false, true, x->pre);
        else if (f16 && wide) step(q, t->ap, t->ea, t->bp, t->eb, ea8, eb8, k0, m, c, bad, true, true, false, x->pre);
        else if (f16) step(q, t->ap, t->ea, t->bp, t->eb, ea8, eb8, k0, m, c, bad, true, false, false, x->pre);
        else if (wide) step(q, t->ap, t->ea, t->bp, t->eb, ea8, eb8, k0, m, c, bad, false, true, false, x->pre);
        else step(q, t->ap, t->ea, t->bp, t->eb, ea8, eb8, k0, m, c, bad, false, false, false, x->pre);
    }
}

// --- entry

int mm__engine_fast_run(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                        size_t K, const mm_opts *o) {
    mm__engine_plan p;
    if (mm__engine_plan_make(&p, A, B, M, N, K, o, NULL, 0) != MM_OK) return MM_EINVAL;
    if (!mm__engine_fast_covers(&p, o)) {
        mm__path_note(o, "engine-model", M * N);
        return mm__engine_run_plan(&p, C, ldc, A, B, M, N, K, o, NULL);
    }
    mm__emu_job J;
    eng_job(&J, &p, A, B, M, N, K, o);  // not a block-scaled kind (mm__engine_fast_covers)
    eng_ctx x = {.b = {.p = &p, .mark_c = true, .seg = engine_seg}, .f16 = o->acc.engine_f16,
                 .pre = eng_prescale_bits(&p)};
    char *mem = eng_base_alloc(&x.b, M, N, K, true, 0, NULL);
    if (!mem) return MM_ENOMEM;
    x.wide = sum_may_wrap(p.q), x.lean = x.f16 && !((p.ta | p.tb) & MM_ET_BF16);
    // The panels (the thread's scratch), their exponents and flags, B's prescaled.
    const float *ap, *bp;
    eng_prep g = eng_prep_make(&x.b, K, true, true, x.pre);
    int st = eng_pack(&J, A, B, &g, &ap, &bp, mem);
    if (st != MM_OK) return st;
    mm__emu_tile_loop(&J, ap, bp, C, ldc, MR, NR, eng_tile_frame, &x);
    st = mm__engine_finish(&p, C, ldc, A, B, M, N, K, o, x.b.redo, "engine-fast");
    free(mem);
    return st;
}
