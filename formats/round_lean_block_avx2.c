// round_lean_block_avx2.c: round_lean_block.c's one pass of block scaling and its tiles' amax on
// eight AVX2 lanes, for CPUs with AVX2 and without AVX-512 (where scale.c otherwise makes four
// passes over a unit: amax, quotient or multiply, rounding, multiply back). The same methods as the
// AVX-512 kernels (round_lean_block.c's comments have the arguments): the exact quotient from the
// float64 reciprocal with its remainder's sign (div_rto8), skipped where the product by the float32
// reciprocal is sure to round as the quotient (near_exact8), then lean8 (the AVX2 element rounding)
// and the multiplication back. tests/test_scale.c holds the pass, through scale.c, to the reference
// quantizer, and tests/test_block_lean.c calls this kernel directly on every CPU with AVX2 (the
// AVX-512 ones too), bit for bit, values and counts. Partial vectors (the end of a row, a short
// last tile) load and store with AVX's masked moves. The library takes it for exact quotients only
// (fmt__block_lean_covers): there it replaces the portable division pass, while for multipliers the
// separate passes measured faster on eight lanes (docs/benchmarks.md).
#include "round_lean_avx2_internal.h"

#ifdef LEAN_X86

// Whether any lane of lanes is not sure to round y = x * fl(1/d) as the quotient x / d would be
// (round_lean_block.c's near_exact: y's bits below the format's midpoints within 8 of a
// boundary, y zero for a nonzero x, subnormal, inf or NaN).
V3 bool near_exact8(__m256 yf, __m256 x, uint32_t near_mask, v8 lanes) {
    const v8 y = _mm256_castps_si256(yf), mask = set1(near_mask), zero = _mm256_setzero_si256();
    const v8 low = and_(add(and_(y, mask), set1(8)), mask);
    const v8 ex = and_(y, set1(0x7f800000));
    const v8 x_nonzero = _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NEQ_UQ));
    const v8 bad = or_(or_(gt(set1(16), low), and_(eq(ex, zero), x_nonzero)), eq(ex, set1(0x7f800000)));
    return !_mm256_testz_si256(bad, lanes);
}

// round_lean_block.c's sr_sure16 on eight lanes: stochastic rounding of a narrow format decides
// for y as for every input within 8 float32 last places (where near_exact8 holds).
V3 bool sr_sure8(const lk *k, __m256 y, v8 rnd, v8 lanes) {
    const v8 ax = and_(_mm256_castps_si256(y), set1(0x7fffffff));
    const v8 e = _mm256_max_epi32(and_(ax, set1(0x7f800000)), set1(k->emin_bits));
    const v8 s = sub(_mm256_srli_epi32(add(e, set1(k->cshift)), 23), _mm256_srli_epi32(ax, 23));
    const v8 sig = or_(and_(ax, set1(0x7fffff)), set1(0x800000));
    const v8 lo = sr_up8(k, dropped8(sub(sig, set1(8)), s), rnd), hi = sr_up8(k, dropped8(add(sig, set1(8)), s), rnd);
    const v8 any = andnot(eq(ax, _mm256_setzero_si256()), gt(set1(k->clamp_bits), ax));
    return _mm256_testz_si256(_mm256_xor_si256(lo, hi), and_(any, lanes));
}

// The divisors of div_rto8: d of the low and high four lanes and their reciprocals in float64,
// and fl(1/d) in float32 for near_exact8 (set only where the block has a near_mask).
typedef struct {
    __m256d dl, dh, rdl, rdh;
    __m256 r;
} div8;

// Four float64 lane masks as four float32 ones (the low half of each 64-bit mask).
V3 __m128 narrow_mask(__m256d m) {
    const __m256 f = _mm256_castpd_ps(m);
    return _mm_shuffle_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1), 0x88);
}

// x / d rounded to odd into float32, eight lanes (round_lean_block.c's div_rto16): y =
// float32(x * rd) is the quotient's floor or ceiling, the remainder e = y d - x is exact, and y
// steps back toward zero where e's sign says it is past the quotient, its last bit set where
// inexact. NaN and inf inputs give e NaN (exact); a quotient past float32 gives FLT_MAX.
V3 v8 div_rto8(__m256 x, const div8 *dv) {
    const __m256d xl = _mm256_cvtps_pd(_mm256_castps256_ps128(x)), xh = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    const __m128 yl = _mm256_cvtpd_ps(_mm256_mul_pd(xl, dv->rdl)), yh = _mm256_cvtpd_ps(_mm256_mul_pd(xh, dv->rdh));
    const __m256d el = _mm256_fmsub_pd(_mm256_cvtps_pd(yl), dv->dl, xl);
    const __m256d eh = _mm256_fmsub_pd(_mm256_cvtps_pd(yh), dv->dh, xh);
    const __m256d z = _mm256_setzero_pd();
    const v8 inexact = _mm256_castps_si256(_mm256_set_m128(narrow_mask(_mm256_cmp_pd(eh, z, _CMP_NEQ_OQ)),
                                                           narrow_mask(_mm256_cmp_pd(el, z, _CMP_NEQ_OQ))));
    const v8 eneg = _mm256_castps_si256(_mm256_set_m128(narrow_mask(_mm256_cmp_pd(eh, z, _CMP_LT_OQ)),
                                                        narrow_mask(_mm256_cmp_pd(el, z, _CMP_LT_OQ))));
    const v8 y = _mm256_castps_si256(_mm256_set_m128(yh, yl));
    const v8 past = andnot(_mm256_xor_si256(eneg, _mm256_srai_epi32(y, 31)), inexact);  // e's sign is y's
    return or_(add(y, past), and_(inexact, set1(1)));  // past is -1: one step toward zero
}

// One vector of a tile: x = in[i..i+8) (the lanes of live; whole: all eight), rounded after the
// multiplication by m (or, in the lanes of exact, after the exact quotient by dv), stored after
// the multiplication by d.
V3 void block8(const lk *k, uint64_t first, lean_class cls, fmt_round_mode mode, const blk *b, float *elems,
               __m256 m, __m256 d, v8 exact, bool any_exact, const div8 *dv, float *out, const float *in, size_t i,
               counts8 *cnt, v8 live, bool whole) {
    const __m256 x = whole ? _mm256_loadu_ps(in + i) : _mm256_maskload_ps(in + i, live);
    const v8 rnd = mode == FMT_SR ? draws8(k->key, first + i) : _mm256_setzero_si256();
    __m256 xs = _mm256_mul_ps(x, m);
    if (any_exact) {
        const __m256 y = b->near_mask ? _mm256_mul_ps(x, dv->r) : x;
        const bool sure = b->near_mask && !near_exact8(y, x, b->near_mask, and_(exact, live)) &&
                          (mode != FMT_SR || sr_sure8(k, y, rnd, and_(exact, live)));  // as block16
        xs = _mm256_blendv_ps(xs, sure ? y : _mm256_castsi256_ps(div_rto8(x, dv)), _mm256_castsi256_ps(exact));
    }
    const v8 r = lean8(k, cls, mode, _mm256_castps_si256(xs), rnd, cnt, live);
    const __m256 y = _mm256_mul_ps(_mm256_castsi256_ps(r), d);
    if (whole) {
        if (elems) _mm256_storeu_si256((v8 *)(elems + i), r);
        _mm256_storeu_ps(out + i, y);
    } else {
        if (elems) _mm256_maskstore_ps(elems + i, live, _mm256_castsi256_ps(r));
        _mm256_maskstore_ps(out + i, live, y);
    }
}

// The nonzero elements of in[0..n) (x != 0: NaN counts).
V3 uint64_t nonzeros8(const float *in, size_t n) {
    uint64_t z = 0;
    for (size_t i = 0; i < n; i += 8) {
        const v8 live = n - i >= 8 ? set1(~0u) : first_lanes(n - i);
        const __m256 nz = _mm256_cmp_ps(_mm256_maskload_ps(in + i, live), _mm256_setzero_ps(), _CMP_NEQ_UQ);
        z += (uint64_t)__builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_and_ps(nz, _mm256_castsi256_ps(live))));
    }
    return z;
}

// Tile t's multiplier and divisor, broadcast, and its divisors for div_rto8; returns whether the
// tile divides (an exact block, deq not 0).
V3 bool tile_consts8(const blk *b, size_t t, __m256 *m, __m256 *d, div8 *dv) {
    const bool exact = b->exact && b->deq[t] != 0.0f;
    const __m256d dd = _mm256_set1_pd(b->deq[t]), rd = _mm256_set1_pd(exact ? 1.0 / b->deq[t] : 0.0);
    *m = _mm256_set1_ps(b->mul[t]), *d = _mm256_set1_ps(b->deq[t]);
    *dv = (div8){dd, dd, rd, rd, _mm256_set1_ps(exact && b->near_mask ? 1.0f / b->deq[t] : 0.0f)};
    return exact;
}

// Per column (tc 1): each lane its own multiplier and divisor, loaded; the rows of the call share
// them, so a chunk of column vectors prepares its divisors once for all the rows.
V3 void block_cols8(const lk *kl, lean_class cls, fmt_round_mode mode, const blk *bl, float *out, const float *in,
                    size_t n, counts8 *cnt, uint64_t *zeroed) {
    enum { CV = 32 };
    const __m256d one = _mm256_set1_pd(1.0);
    for (size_t c0 = 0; c0 < n; c0 += CV * 8) {
        const size_t nv = (n - c0 + 7) / 8 < CV ? (n - c0 + 7) / 8 : CV;
        __m256 mv[CV], dvec[CV];
        v8 livev[CV], exactv[CV];
        div8 dv[CV];
        for (size_t v = 0; v < nv; v++) {
            const size_t c = c0 + v * 8;
            const v8 live = n - c >= 8 ? set1(~0u) : first_lanes(n - c);
            const __m256 m = _mm256_maskload_ps(bl->mul + c, live), d = _mm256_maskload_ps(bl->deq + c, live);
            const v8 nonzero_d = _mm256_castps_si256(_mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_NEQ_UQ));
            const v8 exact = bl->exact ? and_(nonzero_d, live) : _mm256_setzero_si256();
            dv[v] = (div8){one, one, one, one, _mm256_set1_ps(1.0f)};
            if (!_mm256_testz_si256(exact, exact)) {  // d = 0 lanes (multiplied by m) divide by 1 here
                const __m256 d1 = _mm256_blendv_ps(_mm256_set1_ps(1.0f), d, _mm256_castsi256_ps(exact));
                dv[v].dl = _mm256_cvtps_pd(_mm256_castps256_ps128(d1));
                dv[v].dh = _mm256_cvtps_pd(_mm256_extractf128_ps(d1, 1));
                dv[v].rdl = _mm256_div_pd(one, dv[v].dl), dv[v].rdh = _mm256_div_pd(one, dv[v].dh);
                if (bl->near_mask) dv[v].r = _mm256_div_ps(_mm256_set1_ps(1.0f), d1);
            }
            mv[v] = m, dvec[v] = d, livev[v] = live, exactv[v] = exact;
        }
        for (size_t r = 0; r < bl->rows; r++) {
            const uint64_t first = kl->first + r * bl->ld;
            float *elems = bl->elems ? bl->elems + r * bl->ld : NULL;
            const float *inr = in + r * bl->ld;
            for (size_t v = 0; v < nv; v++) {
                const size_t c = c0 + v * 8;
                const bool whole = n - c >= 8;
                if (zeroed) {
                    const __m256 mz = _mm256_and_ps(_mm256_cmp_ps(mv[v], _mm256_setzero_ps(), _CMP_EQ_OQ),
                                                    _mm256_castsi256_ps(livev[v]));
                    const __m256 nz = _mm256_cmp_ps(_mm256_maskload_ps(inr + c, livev[v]), _mm256_setzero_ps(),
                                                    _CMP_NEQ_UQ);
                    *zeroed += (uint64_t)__builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_and_ps(mz, nz)));
                }
                block8(kl, first, cls, mode, bl, elems, mv[v], dvec[v], exactv[v],
                       !_mm256_testz_si256(exactv[v], exactv[v]), &dv[v], out + r * bl->ld, inr, c, cnt, livev[v],
                       whole);
            }
        }
    }
}

V3 void block_loop8(const lk *kp, lean_class cls, fmt_round_mode mode, const blk *bp, size_t tc, float *out,
                    const float *in, size_t n, fmt__counts *counts) {
    const lk kl = *kp;  // not read again after every store (see round_lean.c's lean_loop)
    const blk bl = *bp;
    const v8 zero = _mm256_setzero_si256(), all = set1(~0u);
    counts8 c8 = {zero, zero, zero, zero, zero, zero};
    counts8 *cnt = counts ? &c8 : NULL;
    uint64_t zeroed = 0;
    if (tc == 1) {
        block_cols8(&kl, cls, mode, &bl, out, in, n, cnt, bl.zeroed ? &zeroed : NULL);
    } else {
        for (size_t r = 0; r < bl.rows; r++) {  // row r of a tile row (its elements, counters, elems)
            const uint64_t first = kl.first + r * bl.ld;
            float *elems = bl.elems ? bl.elems + r * bl.ld : NULL;
            const float *inr = in + r * bl.ld;
            float *outr = out + r * bl.ld;
            __m256 m, d;
            div8 dv;
            size_t i = 0, t = 0;
            for (; i + tc <= n; t++) {  // whole tiles: whole vectors
                const bool exact = tile_consts8(&bl, t, &m, &d, &dv);
                if (bl.zeroed && bl.mul[t] == 0.0f) zeroed += nonzeros8(inr + i, tc);
                for (size_t j = 0; j < tc; j += 8, i += 8) {
                    if (j % 16 == 0) __builtin_prefetch(inr + i + bl.ahead);  // a hint per 64-byte line
                    block8(&kl, first, cls, mode, &bl, elems, m, d, exact ? all : zero, exact, &dv, outr, inr, i, cnt,
                           all, true);
                }
            }
            if (i < n) {  // a last tile cut short by the end of the row
                const bool exact = tile_consts8(&bl, t, &m, &d, &dv);
                if (bl.zeroed && bl.mul[t] == 0.0f) zeroed += nonzeros8(inr + i, n - i);
                for (; i < n; i += 8)
                    block8(&kl, first, cls, mode, &bl, elems, m, d, exact ? all : zero, exact, &dv, outr, inr, i, cnt,
                           n - i >= 8 ? all : first_lanes(n - i), n - i >= 8);
            }
        }
    }
    if (bl.zeroed) *bl.zeroed += zeroed;
    if (cnt) {
        if (bl.exact) c8.amax = zero;  // not kept with exact quotients (fmt__block_req)
        add_counts_avx2(counts, &c8);
    }
}

// The tile widths of the presets (16: NVFP4, 32: MX) as constants.
V3 void block_by_tc8(const lk *k, lean_class cls, fmt_round_mode mode, const blk *b, float *out, const float *in,
                     size_t n, fmt__counts *counts) {
    switch (b->tc) {
    case 16: block_loop8(k, cls, mode, b, 16, out, in, n, counts); break;
    case 32: block_loop8(k, cls, mode, b, 32, out, in, n, counts); break;
    default: block_loop8(k, cls, mode, b, b->tc, out, in, n, counts); break;
    }
}

TARGET_V3 static void block_run_avx2(const lk *k, lean_class cls, fmt_round_mode mode, const blk *b, float *out,
                                     const float *in, size_t n, fmt__counts *counts) {
#define CALL(cl, m) block_by_tc8(k, cl, m, b, out, in, n, counts)
    WITH_COUNTS(cls, mode, CALL)
#undef CALL
}

// Tile maxima, 8 tiles at a time (round_lean_block.c's amax_loop on eight lanes): each tile's
// lane-wise max, then a butterfly of three levels over the eight vectors (lane 4L + k of its
// result holds tile 2k + L; `order` puts tile t in lane t).
V3 v8 max_pairs8(v8 a, v8 b, int level) {
    switch (level) {
    case 0:
        return _mm256_max_epu32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
    case 1: return _mm256_max_epu32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
    default: {
        const __m256 fa = _mm256_castsi256_ps(a), fb = _mm256_castsi256_ps(b);
        return _mm256_max_epu32(_mm256_castps_si256(_mm256_shuffle_ps(fa, fb, 0x88)),
                                _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, 0xdd)));
    }
    }
}

V3 void amax_loop8(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    const v8 absm = set1(0x7fffffff), above_inf = set1(0x7f800001), all = set1(~0u);
    const v8 order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    v8 fin = _mm256_setzero_si256();
    const size_t nt = (n + tc - 1) / tc;
    for (size_t t0 = 0; t0 < nt; t0 += 8) {
        v8 v[8];
        if ((t0 + 8) * tc <= n) {  // 8 whole tiles: unmasked, unrolled (v stays in registers)
#pragma GCC unroll 8
            for (size_t j = 0; j < 8; j++) {
                v[j] = _mm256_setzero_si256();
                for (size_t i = (t0 + j) * tc; i < (t0 + j + 1) * tc; i += 8) {
                    const v8 u = and_(_mm256_loadu_si256((const v8 *)(x + i)), absm);
                    v[j] = _mm256_max_epu32(v[j], u);
                    if (finite) fin = _mm256_max_epu32(fin, and_(gt(above_inf, u), u));
                }
            }
        } else for (size_t j = 0; j < 8; j++) {
            v[j] = _mm256_setzero_si256();
            if (t0 + j >= nt) continue;
            for (size_t i = (t0 + j) * tc, end = i + tc < n ? i + tc : n; i < end; i += 8) {
                const v8 live = end - i >= 8 ? all : first_lanes(end - i);
                const v8 u = and_(_mm256_castps_si256(_mm256_maskload_ps(x + i, live)), absm);
                v[j] = _mm256_max_epu32(v[j], u);
                if (finite) fin = _mm256_max_epu32(fin, and_(gt(above_inf, u), u));
            }
        }
#pragma GCC unroll 3
        for (int level = 0; level < 3; level++)
#pragma GCC unroll 4
            for (int j = 0; j < 4 >> level; j++) v[j] = max_pairs8(v[2 * j], v[2 * j + 1], level);
        uint32_t m[8];
        _mm256_storeu_si256((v8 *)m, _mm256_permutevar8x32_epi32(v[0], order));
        for (size_t j = 0; j < 8 && t0 + j < nt; j++) bits[t0 + j] = m[j] > bits[t0 + j] ? m[j] : bits[t0 + j];
    }
    if (finite) {
        uint32_t f[8];
        _mm256_storeu_si256((v8 *)f, fin);
        for (int l = 0; l < 8; l++) *finite = f[l] > *finite ? f[l] : *finite;
    }
}

TARGET_V3 static void amax_run_avx2(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    switch (tc) {
    case 16: amax_loop8(x, n, 16, bits, finite); break;
    case 32: amax_loop8(x, n, 32, bits, finite); break;
    default: amax_loop8(x, n, tc, bits, finite); break;
    }
}

void fmt__block_run_avx2(const lk *k, lean_class cls, fmt_round_mode mode, const blk *b, float *out,
                         const float *in, size_t n, fmt__counts *counts) {
    block_run_avx2(k, cls, mode, b, out, in, n, counts);
}

bool fmt__tile_amax_avx2(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    if (tc == 0 || tc % 8 || !fmt__lean_avx2_runs()) return false;
    amax_run_avx2(x, n, tc, bits, finite);
    return true;
}

#else  // not x86-64

bool fmt__tile_amax_avx2(const float *x, size_t n, size_t tc, uint32_t *bits, uint32_t *finite) {
    (void)x, (void)n, (void)tc, (void)bits, (void)finite;
    return false;
}

#endif
