// round_lean_block.c: block scaling's explicit AVX-512 kernels (FMT_PATH_LEAN's, for scale.c's
// work units and fmt_round_f32_scaled): one pass of multiply (or exact quotient), round and
// multiply back per row segment (fmt__scale_round_f32_lean, its request fmt__block_req in
// round_internal.h), and the tiles' amax 16 tiles at a time (fmt__tile_amax_lean).
// Constraints: the rounding is round_lean.c's (lean16, round_lean_internal.h), so the values and
// counts are the generic kernel's; tests/test_scale.c holds the pass to the portable passes.
#include "round_lean_internal.h"

#ifdef LEAN_X86

// Most exact quotients need no division: y = x * fl(1/d) is within 2^-23 (1 + 2^-24) |z| of
// z = x / d (two roundings of 2^-24 relative each): less than 4 float32 ulps of y, even where
// z lies in the binade above. Where y lies 8 ulps or more from every value and midpoint of the
// element format (their float32 bits below the midpoint position are all 0) and is a normal
// float32, z lies strictly between the same two of them, so rounding y in any deterministic mode
// is rounding z. The lanes where that is not sure (those low bits within 8 of a boundary; y zero
// for a nonzero x, subnormal, inf or NaN: about 16 in 2^(22 - m) of random inputs) send the
// vector through div_rto16. Stochastic rounding uses every bit of the quotient, so there y must
// also be sure of the draw's decision (sr_sure16, narrow formats only; wide ones always divide).
V4 bool near_exact(__m512 y, __m512 x, uint32_t near_mask, __mmask16 lanes) {
    const __m512i u = _mm512_castps_si512(y), mask = _mm512_set1_epi32((int)near_mask);
    const __m512i low = _mm512_and_si512(_mm512_add_epi32(_mm512_and_si512(u, mask), _mm512_set1_epi32(8)), mask);
    const __m512i ex = _mm512_and_si512(u, _mm512_set1_epi32(0x7f800000));
    const __mmask16 x_nonzero = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    const __mmask16 bad = _mm512_cmplt_epu32_mask(low, _mm512_set1_epi32(16)) |
                          (_mm512_cmpeq_epi32_mask(ex, _mm512_setzero_si512()) & x_nonzero) |
                          _mm512_cmpeq_epi32_mask(ex, _mm512_set1_epi32(0x7f800000));
    return (bad & lanes) != 0;
}

// Whether stochastic rounding of a narrow format decides for y as for every input within 8
// float32 last places of it, in every lane of lanes where near_exact holds (y normal, the same
// binade and the same block of the format's grid, so the same dropped-bit count s and the same
// truncation as the quotient's, which lies within 5 last places): the draw falls on the same
// side of the dropped bits at sig - 8 and at sig + 8 (narrow_sum's decision is monotone in them).
// Zeros (the quotient of a zero) and lanes at or past clamp_bits (all round as the clamp) are sure.
V4 bool sr_sure16(const lk *k, __m512 y, __m512i rnd, __mmask16 lanes) {
    const __m512i ax = _mm512_and_si512(_mm512_castps_si512(y), _mm512_set1_epi32(0x7fffffff));
    const __m512i e = _mm512_max_epu32(_mm512_and_si512(ax, _mm512_set1_epi32(0x7f800000)),
                                       _mm512_set1_epi32((int)k->emin_bits));
    const __m512i s = _mm512_sub_epi32(_mm512_srli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32((int)k->cshift)), 23),
                                       _mm512_srli_epi32(ax, 23));
    const __m512i sig = _mm512_or_si512(_mm512_and_si512(ax, _mm512_set1_epi32(0x7fffff)), _mm512_set1_epi32(0x800000));
    const __mmask16 lo = sr_up16(k, dropped32(_mm512_sub_epi32(sig, _mm512_set1_epi32(8)), s), rnd);
    const __mmask16 hi = sr_up16(k, dropped32(_mm512_add_epi32(sig, _mm512_set1_epi32(8)), s), rnd);
    const __mmask16 any =
        _mm512_test_epi32_mask(ax, ax) & _mm512_cmplt_epu32_mask(ax, _mm512_set1_epi32((int)k->clamp_bits));
    return ((lo ^ hi) & any & lanes) == 0;
}

// x / d rounded to odd into float32 (scale.c's div_rto, sixteen lanes; d > 0, rd = 1/d): p = x·rd
// is within 2^-52 relative of z = x / d, which is a float32 value or at least 2^-48 relative
// from every one, so y = float32(p) is z's float32 floor or ceiling; the remainder e = y·d - x is
// exact (one fused multiply-subtract of a 48-bit product within 2^-22 of x), and its sign says
// on which side of z y lies: y steps back toward zero where it is past z, and its last bit is set
// where inexact. NaN and inf inputs give e NaN: exact. A quotient past float32 gives FLT_MAX.
// The low and high eight lanes have their own divisors (dl, dh; rdl, rdh their reciprocals): the
// same for a tile, each lane's own for per-column scales.
V4 __m512 div_rto16(__m512 x, __m512d rdl, __m512d rdh, __m512d dl, __m512d dh) {
    const __m512d xl = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
    const __m512d xh = _mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1));
    const __m256 yl = _mm512_cvtpd_ps(_mm512_mul_pd(xl, rdl)), yh = _mm512_cvtpd_ps(_mm512_mul_pd(xh, rdh));
    const __m512d el = _mm512_fmsub_pd(_mm512_cvtps_pd(yl), dl, xl), eh = _mm512_fmsub_pd(_mm512_cvtps_pd(yh), dh, xh);
    const __m512i y = _mm512_castps_si512(_mm512_insertf32x8(_mm512_castps256_ps512(yl), yh, 1));
    const __mmask16 inexact = (__mmask16)(_mm512_cmp_pd_mask(el, _mm512_setzero_pd(), _CMP_NEQ_OQ) |
                                          (unsigned)_mm512_cmp_pd_mask(eh, _mm512_setzero_pd(), _CMP_NEQ_OQ) << 8);
    const __mmask16 eneg = (__mmask16)(_mm512_movepi64_mask(_mm512_castpd_si512(el)) |
                                       (unsigned)_mm512_movepi64_mask(_mm512_castpd_si512(eh)) << 8);
    const __mmask16 past = inexact & (__mmask16)~(eneg ^ _mm512_movepi32_mask(y));
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i u = _mm512_mask_sub_epi32(y, past, y, one);
    return _mm512_castsi512_ps(_mm512_mask_or_epi32(u, inexact, u, one));
}

// The divisors of div_rto16: the low and high halves of d and their reciprocals in float64.
typedef struct {
    __m512d dl, dh, rdl, rdh;
    __m512 r;  // fl(1/d) in float32, for near_exact (set only where the block has a near_mask)
} div16;

// One vector of a tile: x = in[i..i+16) (the lanes of live), rounded after the multiplication
// by m (or, in the lanes of exact, after div_rto16 by dv), stored after the multiplication by d.
V4 void block16(const lk *k, lean_class cls, fmt_round_mode mode, const blk *b, __m512 m, __m512 d, __mmask16 exact,
                const div16 *dv, float *out, const float *in, size_t i, lean_counts *cnt, __mmask16 live) {
    const __m512 x = live == 0xffff ? _mm512_loadu_ps(in + i) : _mm512_maskz_loadu_ps(live, in + i);
    const __m512i rnd = mode == FMT_SR ? draws16(k->key, k->first + i) : _mm512_setzero_si512();
    __m512 xs;
    if (exact) {
        const __m512 y = b->near_mask ? _mm512_mul_ps(x, dv->r) : x;
        // With statistics too: their counts are the rounding's, the same for y as for the quotient
        // (the amax, which would differ, is not kept with exact quotients: fmt__block_req).
        const bool sure = b->near_mask && !near_exact(y, x, b->near_mask, exact & live) &&
                          (mode != FMT_SR || sr_sure16(k, y, rnd, exact & live));
        const __m512 z = sure ? y : div_rto16(x, dv->rdl, dv->rdh, dv->dl, dv->dh);
        xs = exact == 0xffff ? z : _mm512_mask_blend_ps(exact, _mm512_mul_ps(x, m), z);
    } else {
        xs = _mm512_mul_ps(x, m);
    }
    const __m512i r = lean16_with(k, cls, mode, _mm512_castps_si512(xs), rnd, cnt, live, b->quick, !b->exact);
    const __m512 y = _mm512_mul_ps(_mm512_castsi512_ps(r), d);
    if (live == 0xffff) {
        if (b->elems) _mm512_storeu_si512(b->elems + i, r);
        _mm512_storeu_ps(out + i, y);
    } else {
        if (b->elems) _mm512_mask_storeu_epi32(b->elems + i, live, r);
        _mm512_mask_storeu_ps(out + i, live, y);
    }
}

// The nonzero elements of in[0..n) (x != 0: NaN counts).
V4 uint64_t nonzeros(const float *in, size_t n) {
    uint64_t z = 0;
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 live = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        z += (uint64_t)__builtin_popcount(
            _mm512_mask_cmp_ps_mask(live, _mm512_maskz_loadu_ps(live, in + i), _mm512_setzero_ps(), _CMP_NEQ_UQ));
    }
    return z;
}

// Row r of a call that covers rows (ld elements apart): its counters and its optional elems.
V4 void row_view(const lk *k, const blk *b, size_t r, lk *kr, blk *br) {
    *kr = *k, kr->first += r * b->ld;
    *br = *b, br->elems = b->elems ? b->elems + r * b->ld : NULL;
}

// Tile t's multiplier and divisor, broadcast, and its divisors for div_rto16; returns whether the
// tile divides (an exact block, deq not 0).
V4 bool tile_consts(const blk *b, size_t t, __m512 *m, __m512 *d, div16 *dv) {
    const bool exact = b->exact && b->deq[t] != 0.0f;
    const __m512d dd = _mm512_set1_pd(b->deq[t]), rd = _mm512_set1_pd(exact ? 1.0 / b->deq[t] : 0.0);
    *m = _mm512_set1_ps(b->mul[t]), *d = _mm512_set1_ps(b->deq[t]);
    *dv = (div16){dd, dd, rd, rd, _mm512_set1_ps(exact && b->near_mask ? 1.0f / b->deq[t] : 0.0f)};
    return exact;
}

// The call's counts into counts; with exact quotients without their amax (fmt__block_req).
V4 void add_block_counts(fmt__counts *counts, lean_counts *lc, bool exact) {
    if (exact) lc->amax = _mm512_setzero_si512();
    add_counts(counts, lc);
}

V4 void block_loop(const lk *kp, lean_class cls, fmt_round_mode mode, const blk *bp, size_t tc, float *out,
                   const float *in, size_t n, fmt__counts *counts) {
    const lk kl = *kp;  // not read again after every store (see lean_loop); per row, copies of it
    const blk bl = *bp;
    lean_counts lc = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                      _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    lean_counts *cnt = counts ? &lc : NULL;
    uint64_t zeroed = 0;
    if (tc == 1) {  // per column: each lane its own multiplier and divisor, loaded, not broadcast
        // bl.rows rows share them (a tile row of per-column scales): a chunk of column vectors
        // prepares its divisors (two float64 divisions per vector) once for all the rows.
        enum { CV = 16 };
        const __m512d one = _mm512_set1_pd(1.0);
        for (size_t c0 = 0; c0 < n; c0 += CV * 16) {
            const size_t nv = (n - c0 + 15) / 16 < CV ? (n - c0 + 15) / 16 : CV;
            __m512 mv[CV], dvec[CV];
            __mmask16 livev[CV], exactv[CV];
            div16 dv[CV];
            for (size_t v = 0; v < nv; v++) {
                const size_t c = c0 + v * 16;
                const __mmask16 live = n - c >= 16 ? 0xffff : (__mmask16)((1u << (n - c)) - 1);
                const __m512 m = _mm512_maskz_loadu_ps(live, bl.mul + c), d = _mm512_maskz_loadu_ps(live, bl.deq + c);
                const __mmask16 nonzero_d = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ);
                dv[v] = (div16){_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(),
                                _mm512_setzero_ps()};
                const __mmask16 exact = bl.exact ? nonzero_d & live : 0;
                if (exact) {  // d = 0 lanes (multiplied by m instead) divide by 1 here, harmlessly
                    const __m512 d1 = _mm512_mask_blend_ps(exact, _mm512_set1_ps(1.0f), d);
                    dv[v].dl = _mm512_cvtps_pd(_mm512_castps512_ps256(d1));
                    dv[v].dh = _mm512_cvtps_pd(_mm512_extractf32x8_ps(d1, 1));
                    dv[v].rdl = _mm512_div_pd(one, dv[v].dl), dv[v].rdh = _mm512_div_pd(one, dv[v].dh);
                    if (bl.near_mask) dv[v].r = _mm512_div_ps(_mm512_set1_ps(1.0f), d1);  // near_exact's only
                }
                mv[v] = m, dvec[v] = d, livev[v] = live, exactv[v] = exact;
            }
            for (size_t r = 0; r < bl.rows; r++) {  // row r: its elements, counters and optional elems
                lk kr;
                blk br;
                row_view(&kl, &bl, r, &kr, &br);
                const float *inr = in + r * bl.ld;
                for (size_t v = 0; v < nv; v++) {
                    const size_t c = c0 + v * 16;
                    if (bl.zeroed) {
                        const __mmask16 mz = _mm512_mask_cmp_ps_mask(livev[v], mv[v], _mm512_setzero_ps(), _CMP_EQ_OQ);
                        zeroed += (uint64_t)__builtin_popcount(_mm512_mask_cmp_ps_mask(
                            mz, _mm512_maskz_loadu_ps(livev[v], inr + c), _mm512_setzero_ps(), _CMP_NEQ_UQ));
                    }
                    block16(&kr, cls, mode, &br, mv[v], dvec[v], exactv[v], &dv[v], out + r * bl.ld, inr, c, cnt,
                            livev[v]);
                }
            }
        }
        if (bl.zeroed) *bl.zeroed += zeroed;
        if (cnt) add_block_counts(counts, &lc, bl.exact);
        return;
    }
    for (size_t r = 0; r < bl.rows; r++) {  // row r of a tile row (its elements, counters, elems)
        lk kr;
        blk br;
        row_view(&kl, &bl, r, &kr, &br);
        const float *inr = in + r * bl.ld;
        float *outr = out + r * bl.ld;
        __m512 m, d;
        div16 dv;
        size_t i = 0, t = 0;
        for (; i + tc <= n; t++) {  // whole tiles: whole vectors
            const bool exact = tile_consts(&bl, t, &m, &d, &dv);
            if (bl.zeroed && bl.mul[t] == 0.0f) zeroed += nonzeros(inr + i, tc);
            for (size_t j = 0; j < tc; j += 16, i += 16) {
                __builtin_prefetch(inr + i + bl.ahead);  // a hint (ahead 0: this line, a no-op)
                block16(&kr, cls, mode, &br, m, d, exact ? 0xffff : 0, &dv, outr, inr, i, cnt, 0xffff);
            }
        }
        if (i < n) {  // a last tile cut short by the end of the row
            const bool exact = tile_consts(&bl, t, &m, &d, &dv);
            if (bl.zeroed && bl.mul[t] == 0.0f) zeroed += nonzeros(inr + i, n - i);
            for (; i < n; i += 16)
                block16(&kr, cls, mode, &br, m, d, exact ? 0xffff : 0, &dv, outr, inr, i, cnt,
                        n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1));
        }
    }
    if (bl.zeroed) *bl.zeroed += zeroed;
    if (cnt) add_block_counts(counts, &lc, bl.exact);
}

// Tile maxima (scale.c's amax of a unit's tiles): the max |x| bits of 16 tiles at a time, each
// tile a whole number of vectors, reduced across lanes together by a butterfly (16 tiles cost
// 30 shuffles and 15 maxima, where one reduction per tile costs 8 and leaves the max in a
// general register). Lane 4k + i of the butterfly's result holds tile 4i + k.
V4 __m512i max_pairs(__m512i a, __m512i b, int level) {
    switch (level) {
    case 0: return _mm512_max_epu32(_mm512_shuffle_i32x4(a, b, 0x44), _mm512_shuffle_i32x4(a, b, 0xee));
    case 1: return _mm512_max_epu32(_mm512_shuffle_i32x4(a, b, 0x88), _mm512_shuffle_i32x4(a, b, 0xdd));
    case 2: return _mm512_max_epu32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    default: {
        const __m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
        return _mm512_max_epu32(_mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0x88)),
                                _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0xdd)));
    }
    }
}

V4 void amax_loop(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512i fin = _mm512_setzero_si512();
    const size_t nt = (n + tc - 1) / tc;
    for (size_t t0 = 0; t0 < nt; t0 += 16) {
        __m512i v[16];
        if ((t0 + 16) * tc <= n) {  // 16 whole tiles: unmasked, unrolled (v stays in registers)
#pragma GCC unroll 16
            for (size_t j = 0; j < 16; j++) {
                v[j] = _mm512_setzero_si512();
                for (size_t i = (t0 + j) * tc; i < (t0 + j + 1) * tc; i += 16) {
                    const __m512i u = _mm512_and_si512(_mm512_loadu_si512(x + i), absm);
                    v[j] = _mm512_max_epu32(v[j], u);
                    if (finite) fin = _mm512_mask_max_epu32(fin, _mm512_cmple_epu32_mask(u, inf), fin, u);
                }
            }
        } else for (size_t j = 0; j < 16; j++) {
            v[j] = _mm512_setzero_si512();
            if (t0 + j >= nt) continue;
            for (size_t i = (t0 + j) * tc, end = i + tc < n ? i + tc : n; i < end; i += 16) {
                const __mmask16 live = end - i >= 16 ? 0xffff : (__mmask16)((1u << (end - i)) - 1);
                const __m512i u = _mm512_and_si512(_mm512_maskz_loadu_epi32(live, x + i), absm);
                v[j] = _mm512_max_epu32(v[j], u);
                if (finite) fin = _mm512_mask_max_epu32(fin, _mm512_cmple_epu32_mask(u, inf), fin, u);
            }
        }
#pragma GCC unroll 4
        for (int level = 0; level < 4; level++)
#pragma GCC unroll 8
            for (int j = 0; j < 8 >> level; j++) v[j] = max_pairs(v[2 * j], v[2 * j + 1], level);
        const size_t live = nt - t0 < 16 ? nt - t0 : 16;
        const __mmask16 lm = (__mmask16)((1u << live) - 1);
        const __m512i m = _mm512_permutexvar_epi32(order, v[0]);
        _mm512_mask_storeu_epi32(bits + t0, lm, _mm512_max_epu32(m, _mm512_maskz_loadu_epi32(lm, bits + t0)));
    }
    if (finite) {
        const uint32_t f = (uint32_t)_mm512_reduce_max_epu32(fin);
        if (f > *finite) *finite = f;
    }
}

TARGET_V4 static void amax_run_avx512(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    switch (tc) {
    case 16: amax_loop(x, n, 16, bits, finite); break;
    case 32: amax_loop(x, n, 32, bits, finite); break;
    default: amax_loop(x, n, tc, bits, finite); break;
    }
}

// The tile widths of the presets (16: NVFP4, 32: MX) as constants: a tile is then a fixed
// number of whole vectors.
V4 void block_by_tc(const lk *k, lean_class cls, fmt_round_mode mode, const blk *b, float *out,
                    const float *in, size_t n, fmt__counts *counts) {
    switch (b->tc) {
    case 16: block_loop(k, cls, mode, b, 16, out, in, n, counts); break;
    case 32: block_loop(k, cls, mode, b, 32, out, in, n, counts); break;
    default: block_loop(k, cls, mode, b, b->tc, out, in, n, counts); break;
    }
}

TARGET_V4 static void block_run_avx512(const lk *k, lean_class cls, fmt_round_mode mode, const blk *b,
                                       float *out, const float *in, size_t n, fmt__counts *counts) {
#define CALL(cl, m) block_by_tc(k, cl, m, b, out, in, n, counts)
    WITH_COUNTS(cls, mode, CALL)
#undef CALL
}

bool fmt__block_lean_covers(const fmt__kparams *k, fmt_round_mode mode, size_t tc, bool exact) {
    return (tc == 1 || (tc && tc % 16 == 0)) && fmt__f32_lean_covers(k, mode) && (exact || cpu_v4());
}

typedef void block_runner(const lk *k, lean_class cls, fmt_round_mode mode, const blk *b, float *out,
                          const float *in, size_t n, fmt__counts *counts);

// The call r by run, in pieces of whole tiles, once the caller has checked its coverage and MXCSR.
static bool run_pieces(const fmt__block_req *r, block_runner *run) {
    const fmt__kparams *p = r->k;
    const fmt_round_mode mode = r->mode;
    const size_t tc = r->tc, n = r->n;
    if (r->rows != 1 && (r->rows == 0 || r->ld < n || (r->rows - 1) * r->ld + n > LEAN_BLOCK)) return false;
    const lean_class cls = class_of(p);
    // near_exact's mask: the bits below the midpoint position (22 - m of them), where they exist
    // (stochastic rounding: narrow formats only, where sr_sure16/8 decides).
    const uint32_t near_mask = (mode != FMT_SR || cls == LEAN_NARROW) && p->m <= 20 ? (1u << (22 - p->m)) - 1 : 0;
    // Quick statistics for formats with at least 14 binades of normals (e4m3, e5m2, bf16, fp16):
    // a scaled tile holds subnormals there only 2^14 below its amax. In e3m2, e2m3 and e2m1 most
    // vectors of a tile hold one, and the quick check only adds a mispredicted branch.
    const bool quick = p->emax - p->emin >= 14;
    // Pieces of whole tiles. The 64-bit divisions only where n is past one piece: this is called
    // per tile row of a unit, and two divisions cost as much as the rest of a short row's setup.
    for (size_t done = 0, t = 0; done < n;) {
        const size_t len = n - done <= LEAN_BLOCK ? n - done : LEAN_BLOCK / tc * tc;
        const lk k = lk_make(p, cls, r->base + done);
        const blk b = {.tc = tc, .mul = r->mul + t, .deq = r->deq + t, .exact = r->exact,
                       .elems = r->elems ? r->elems + done : NULL, .ahead = r->ahead, .zeroed = r->zeroed,
                       .near_mask = near_mask, .quick = quick, .rows = r->rows, .ld = r->ld};
        run(&k, cls, mode, &b, r->out + done, r->in + done, len, r->counts);
        done += len;
        if (done < n) t += len / tc;
    }
    return true;
}

bool fmt__scale_round_f32_lean(const fmt__block_req *r) {
    if (!cpu_v4()) return r->exact && fmt__scale_round_f32_lean_avx2(r);
    if (!fmt__block_lean_covers(r->k, r->mode, r->tc, r->exact) || mxcsr_daz_ftz()) return false;
    return run_pieces(r, block_run_avx512);
}

bool fmt__scale_round_f32_lean_avx2(const fmt__block_req *r) {
    // The AVX2 kernel's narrow sums also need MXCSR's rounding to nearest (round_lean_avx2.c).
    if (!fmt__lean_avx2_runs() || !fmt__block_lean_covers(r->k, r->mode, r->tc, true) || !mxcsr_nearest_exact())
        return false;
    return run_pieces(r, fmt__block_run_avx2);
}

bool fmt__tile_amax_lean(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    if (tc == 0 || tc % 16) return false;
    // AVX2: tiles of up to 64 (its butterfly's gain; wider ones, rows, are as fast portable)
    if (!cpu_v4()) return tc <= 64 && fmt__tile_amax_avx2(x, n, tc, bits, finite);
    amax_run_avx512(x, n, tc, bits, finite);
    return true;
}

#else  // not x86-64: no AVX-512

bool fmt__block_lean_covers(const fmt__kparams *k, fmt_round_mode mode, size_t tc, bool exact) {
    (void)k, (void)mode, (void)tc, (void)exact;
    return false;
}

bool fmt__scale_round_f32_lean(const fmt__block_req *r) {
    (void)r;
    return false;
}

bool fmt__scale_round_f32_lean_avx2(const fmt__block_req *r) {
    (void)r;
    return false;
}

bool fmt__tile_amax_lean(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    (void)x, (void)n, (void)tc, (void)bits, (void)finite;
    return false;
}

#endif
