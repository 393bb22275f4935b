// scale.c: the quantize-dequantize passes of the scaling recipes (none, tensor, row, col, 1-D
// blocks, 2-D tiles, NVFP4 two-level): the tile grid, the work units, the tiles' amax, the one
// choice of how a call scales and rounds (choose_pass), fmt_quantize_f32 and its codes. The
// recipes' names are scale_recipe.c's, the scale of a tile from its amax scale_rules.c's.
// Constraints: no MPFR; the element rounding is the internal float32 kernel (round_internal.h)
// on contiguous runs of the flat array, each run drawing counters o->offset + (its flat index),
// so results and statistics do not depend on how the work is cut or on the number of threads
// (bit for bit what one fmt_round_f32 call over the scaled tensor gives: tests/test_scale.c).
//
// The pass, for an n = rows x cols tensor, cut into work units of about 16 KiB (plan_make):
//   - small tiles (MX, NVFP4, row, 2-D tiles up to 64K elements a unit): one parallel region;
//     each unit is read from memory once and, while it is in L1 (L2 for 2-D tiles), gets its
//     tiles' amax, their scales (W tiles at a time), the multiplication by 1/s, the rounding
//     and the multiplication back by s. NVFP4 first reads the tensor once for its amax;
//   - tiles too large for that (tensor, column, big 2-D tiles): a pass for every tile's amax
//     (slab maxima merge with an atomic integer max on the bits of |x|, which orders
//     non-negative floats and makes any NaN the largest), their scales, then the units.
// A by_error rule (4over6) runs the pass three times (run_four_over_six): both candidates, then
// the winners.
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec.h"
#include "scale_internal.h"
#include "vec_internal.h"

// ---------------------------------------------------------------------------------------------
// geometry

typedef struct {
    size_t rows, cols;
    size_t tr, tc;    // tile shape with 0 resolved to the whole dimension
    size_t ntr, ntc;  // tiles down and across
} geom;

static geom geom_make(const fmt_scaling *sc, size_t rows, size_t cols) {
    geom g = {rows, cols, 0, 0, 0, 0};
    g.tr = sc->tile_rows > 0 ? (size_t)sc->tile_rows : rows;
    g.tc = sc->tile_cols > 0 ? (size_t)sc->tile_cols : cols;
    if (g.tr > rows) g.tr = rows;  // a tile larger than the tensor is the whole dimension
    if (g.tc > cols) g.tc = cols;
    if (rows && cols) g.ntr = (rows + g.tr - 1) / g.tr, g.ntc = (cols + g.tc - 1) / g.tc;
    return g;
}

size_t fmt_scale_count(const fmt_scaling *sc, size_t rows, size_t cols) {
    if (sc->none) return 0;
    geom g = geom_make(sc, rows, cols);
    return g.ntr * g.ntc;
}

void fmt_scale_grid(const fmt_scaling *sc, size_t rows, size_t cols, size_t grid[2]) {
    grid[0] = grid[1] = 0;
    if (sc->none) return;
    const geom g = geom_make(sc, rows, cols);
    grid[0] = g.ntr, grid[1] = g.ntc;
}

#define f2u fmt__f2u
#define u2f fmt__u2f

static inline size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

enum {
    UNIT_ELEMS = 1 << 12,  // a work unit's target size: 16 KiB, held in L1 between its steps
    SEG_MIN = 512,         // shortest row segment of a unit of 2-D tiles (one rounding call each)
    FUSE_MAX = 1 << 16,    // largest unit (256 KiB, in L2) that measures its own tiles
    SLAB_COLS = 4096,      // columns of one work item of the separate amax pass; it touches
    SLAB_ELEMS = 1 << 13,  // <= SLAB_COLS / tc + 2 tiles
    // Below this size a parallel region costs more than it saves (and on a loaded machine a
    // barrier waits for a descheduled thread): everything runs on the calling thread. A
    // trainer's weights, 16 K elements and up, are cast right after its activations, with the
    // second thread awake: they gain (docs/benchmarks.md, "Weights cast on both threads").
    PAR_MIN_ELEMS = 1 << 14,
    SCALE_BATCH = 1 << 10,  // tiles per task of the separate scale pass
};

// ---------------------------------------------------------------------------------------------
// tile amax

static void atomic_max_u32(uint32_t *p, uint32_t v) {
    uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

// Max of the bits of |x[0..n)| (a NaN gives a NaN pattern, above inf) and, in *finite, the
// same with NaNs left out. Integer maxima: they vectorise, and order non-negative floats
// (the NaN filter is a mask, not a select, which GCC 12 does not vectorise next to a max).
static inline uint32_t seg_max_bits(const float *restrict x, size_t n, uint32_t *finite) {
    uint32_t m = 0, mf = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = f2u(x[i]) & 0x7fffffffu, uf = u & -(uint32_t)(u <= 0x7f800000u);
        m = u > m ? u : m;
        mf = uf > mf ? uf : mf;
    }
    if (mf > *finite) *finite = mf;
    return m;
}

// The per-row loops over tiles are written once, always inlined with the tile width as an
// argument, and instantiated for the widths of the presets (16: NVFP4, 32: MX) as constants:
// then a tile is a fixed number of whole vectors, with no loop control or division per tile.
#define ROW_INLINE static inline __attribute__((always_inline))
#define BY_TILE_WIDTH(tc, call_with)                                                            \
    switch (tc) {                                                                               \
    case 16: call_with(16); break;                                                              \
    case 32: call_with(32); break;                                                              \
    default: call_with(tc); break;                                                              \
    }

// The columns from c0 to the next tile boundary (0 when c0 is on one), at most c1 - c0.
ROW_INLINE size_t head_cols(size_t c0, size_t c1, const size_t tc) {
    const size_t h = (tc - c0 % tc) % tc;
    return h < c1 - c0 ? h : c1 - c0;
}

// Row x[c0..c1) (tile width tc > 1): raises loc[k] to the max |x| bits of the k-th tile the
// row segment touches; *finite to the NaN-free max.
ROW_INLINE void row_amax(uint32_t *loc, const float *x, size_t c0, size_t c1, const size_t tc, uint32_t *finite) {
    size_t c = c0, k = 0;
    const size_t h = head_cols(c0, c1, tc);
    if (h) {  // a tile that began before c0
        const uint32_t m = seg_max_bits(x + c, h, finite);
        loc[0] = m > loc[0] ? m : loc[0];
        c += h, k++;
    }
    for (; c + tc <= c1; c += tc, k++) {
        const uint32_t m = seg_max_bits(x + c, tc, finite);
        loc[k] = m > loc[k] ? m : loc[k];
    }
    if (c < c1) {
        const uint32_t m = seg_max_bits(x + c, c1 - c, finite);
        loc[k] = m > loc[k] ? m : loc[k];
    }
}

// Rows [r0, r1) (inside one tile band) x columns [c0, c1): raises loc[t - c0/tc] to the max
// |x| bits of each tile column t; returns the NaN-free max |x| bits.
static uint32_t slab_amax(uint32_t *loc, const float *in, const geom *g, size_t r0, size_t r1, size_t c0,
                          size_t c1) {
    uint32_t finite_max = 0;
    if (g->tc > 1 && c0 / g->tc == (c1 - 1) / g->tc) {
        // One tile column (a tensor's or a row band's scale): one running maximum, over the
        // whole slab where its rows are contiguous, rather than a reduction per row.
        const bool whole = c0 == 0 && c1 == g->cols;
        for (size_t r = r0; r < r1; r = whole ? r1 : r + 1) {
            const uint32_t m = seg_max_bits(in + r * g->cols + c0, whole ? (r1 - r0) * g->cols : c1 - c0, &finite_max);
            loc[0] = m > loc[0] ? m : loc[0];
        }
        return finite_max;
    }
    for (size_t r = r0; r < r1; r++) {
        const float *restrict x = in + r * g->cols;
        if (g->tc == 1) {  // per column: one tile per element
            uint32_t mf = 0;
            for (size_t c = c0; c < c1; c++) {
                const uint32_t u = f2u(x[c]) & 0x7fffffffu, uf = u & -(uint32_t)(u <= 0x7f800000u);
                loc[c - c0] = u > loc[c - c0] ? u : loc[c - c0];
                mf = uf > mf ? uf : mf;
            }
            if (mf > finite_max) finite_max = mf;
            continue;
        }
        if (g->tc % 16 == 0 && c0 % g->tc == 0 && fmt__tile_amax_lean(x + c0, c1 - c0, g->tc, loc, &finite_max))
            continue;
#define ROW_AMAX(w) row_amax(loc, x, c0, c1, w, &finite_max)
        BY_TILE_WIDTH(g->tc, ROW_AMAX)
#undef ROW_AMAX
    }
    return finite_max;
}

// Tiles too large for a work unit: bits[ntr*ntc] = max |x| bits per tile, in a pass of its
// own over row x column slabs whose maxima merge with an atomic integer max (it orders
// non-negative floats and makes any NaN the largest). Returns the NaN-free amax bits. The slabs
// are small and split statically: a trainer's 768 x 128 activation is 12 of them, half to each
// of two threads, where larger ones under a dynamic schedule gave one thread the whole tensor;
// and each thread measures the rows that the units' static split then gives it to round.
static uint32_t amax_tiles(uint32_t *bits, const float *in, const geom *g) {
    const size_t cw = min_sz(g->cols, SLAB_COLS);
    const size_t ncs = (g->cols + cw - 1) / cw;
    const size_t rh = min_sz(g->tr, SLAB_ELEMS / cw ? SLAB_ELEMS / cw : 1);
    const size_t nrs = (g->tr + rh - 1) / rh;  // row slabs per band: none straddles two bands
    const size_t items = g->ntr * nrs * ncs;
    uint32_t finite_max = 0;
#pragma omp parallel for schedule(static) reduction(max : finite_max) \
    if (g->rows * g->cols >= PAR_MIN_ELEMS)
    for (size_t it = 0; it < items; it++) {
        const size_t cs = it % ncs, rs = (it / ncs) % nrs, b = it / (ncs * nrs);
        const size_t r0 = b * g->tr + rs * rh;
        const size_t r1 = min_sz(min_sz(r0 + rh, (b + 1) * g->tr), g->rows);
        if (r0 >= r1) continue;
        const size_t c0 = cs * cw, c1 = min_sz(c0 + cw, g->cols);
        const size_t t0 = c0 / g->tc, nt = (c1 - 1) / g->tc - t0 + 1;
        uint32_t loc[SLAB_COLS + 2];
        memset(loc, 0, nt * sizeof *loc);  // the tiles the slab touches, not the whole array
        const uint32_t m = slab_amax(loc, in, g, r0, r1, c0, c1);
        uint32_t *dst = bits + b * g->ntc + t0;
        for (size_t t = 0; t < nt; t++)
            if (loc[t]) atomic_max_u32(&dst[t], loc[t]);
        finite_max = m > finite_max ? m : finite_max;
    }
    return finite_max;
}

// ---------------------------------------------------------------------------------------------
// work units: scale, round, scale back

// How the tensor is cut into work units: rows [i * rows_per, ...) x columns [j * width, ...).
// fused: a unit holds whole tiles (rows_per a multiple of tr, width of tc) and measures them
// itself, so that its data is read from memory once; otherwise the tiles are measured and
// scaled first, in passes of their own (tensor, column and other tiles too large for L2).
typedef struct {
    bool fused;
    size_t rows_per, width, ncu, nu;
    size_t max_tiles;  // fused: the most tiles one unit holds, rounded up to whole vectors
} plan;

// Unit u: rows [r0, r1) x columns [c0, c1); ahead: how far (in elements) unit u + 1 starts
// after it (0 for the last), for the prefetch of mul_row.
typedef struct {
    size_t r0, r1, c0, c1;
    ptrdiff_t ahead;
} span;

static span unit_span(const plan *p, const geom *g, size_t u) {
    span s;
    s.r0 = u / p->ncu * p->rows_per, s.r1 = min_sz(g->rows, s.r0 + p->rows_per);
    s.c0 = u % p->ncu * p->width, s.c1 = min_sz(g->cols, s.c0 + p->width);
    const size_t r0n = (u + 1) / p->ncu * p->rows_per, c0n = (u + 1) % p->ncu * p->width;
    s.ahead = u + 1 < p->nu ? (ptrdiff_t)((r0n - s.r0) * g->cols + c0n) - (ptrdiff_t)s.c0 : 0;
    return s;
}

static plan plan_make(const geom *g) {
    plan p = {0};
    const size_t band = g->tr * g->cols;
    if (band <= UNIT_ELEMS) {  // whole bands: as many as fill a unit, one contiguous range
        p.fused = true, p.width = g->cols, p.rows_per = (UNIT_ELEMS / band) * g->tr;
    } else {
        // A band is wider: a unit is a band times whole tile columns, its rows at least SEG_MIN
        // long (one rounding call per row), fused while it stays in L2.
        const size_t seg = (min_sz(SEG_MIN, g->cols) + g->tc - 1) / g->tc, fill = UNIT_ELEMS / (g->tr * g->tc);
        size_t kt = seg > fill ? seg : fill;
        kt = kt < 1 ? 1 : kt > g->ntc ? g->ntc : kt;
        if (g->tr * kt * g->tc <= FUSE_MAX) p.fused = true, p.width = kt * g->tc, p.rows_per = g->tr;
        else if (g->cols <= UNIT_ELEMS) p.width = g->cols, p.rows_per = UNIT_ELEMS / g->cols;
        else p.width = UNIT_ELEMS, p.rows_per = 1;
    }
    p.ncu = (g->cols + p.width - 1) / p.width;
    p.nu = (g->rows + p.rows_per - 1) / p.rows_per * p.ncu;
    p.max_tiles = p.fused ? p.rows_per / g->tr * ((p.width + g->tc - 1) / g->tc) : 0;
    p.max_tiles = (p.max_tiles + W - 1) / W * W;  // tile_scales works on whole vectors
    return p;
}

// How a call's units turn x into round(x / s) * s and round(x / s), chosen once per call by
// choose_pass.
typedef enum {
    PASS_MUL,        // x * mul, the rounding by the internal kernel, * deq: three passes over a
                     // unit while it is in cache
    PASS_EXACT,      // the exact quotient x / deq rounded to odd into float32, the rounding by the
                     // internal kernel, * deq
    PASS_EXACT_F64,  // fl(x / deq) rounded by the float64 kernel, * deq (element formats beyond
                     // exact_fits_f32)
    PASS_LEAN,       // one pass of the block kernel (fmt__scale_round_f32_lean), with the multiply
                     // or the exact quotient as qrun.req.exact says; the rows it declines (this
                     // thread's MXCSR) take qrun.fallback
} pass_kind;

// Everything a unit needs, the same for all units of a call.
typedef struct {
    const geom *g;
    const plan *p;
    fmt__scale_ctx c;
    fmt__kparams k;  // the element format and the caller's options
    fmt_round_path path;
    fmt_round_mode mode;
    float *out, *elems, *scales;  // elems, scales: optional outputs (fmt_quant_info)
    const float *in;
    bool counts, count_zeroed;
    pass_kind pass;      // how the units scale and round (choose_pass)
    pass_kind fallback;  // PASS_LEAN: what takes the rows the block kernel declines
    fmt__block_req req;  // PASS_LEAN: the block kernel's request, its per-call fields set
    const uint8_t *pick;  // 4over6: per tile (row-major over the grid, whole vectors), the choice
                          // of alt_max (tile_scales); NULL otherwise
    float deq_big;  // FLT_MAX / max_elem: a tile whose deq is above it may dequantize to inf
} qrun;

// What a thread adds up over its units.
typedef struct {
    fmt__counts counts;  // the element rounding's
    uint64_t zeroed;     // nonzero elements that a zero multiplier sends to zero
    uint32_t finite_max; // NaN-free max |x| bits of the input
    fmt__tile_counts tiles;
} qacc;

// A unit's multipliers: tile (band b, tile column t) has m[(b - b0) * stride + t - t0].
typedef struct {
    const float *m;
    size_t b0, t0, stride;
} tile_view;

// dst[0..len) = src[0..len) * f, one tile's piece of a row; dst may be src. Where f is 1 the
// element is kept as it is (x * 1 is x, but for a float32 subnormal in a thread whose MXCSR has
// DAZ set). zeroed (optional) counts the nonzero elements that a zero f sends to zero:
// underflows the rounding cannot see. ahead (elements; 0: none): a prefetch distance.
ROW_INLINE void tile_mul(float *dst, const float *src, float f, const size_t len, ptrdiff_t ahead,
                         uint64_t *zeroed) {
    if (ahead)
        for (size_t i = 0; i < len; i += 64 / sizeof *src) __builtin_prefetch(src + i + ahead);
    if (zeroed && f == 0.0f)
        for (size_t i = 0; i < len; i++) *zeroed += src[i] != 0.0f;
    const bool one = f == 1.0f;  // a select, not a branch per tile
    for (size_t i = 0; i < len; i++) dst[i] = one ? src[i] : src[i] * f;
}

// dst[c0..c1) = src[c0..c1) * m[k] for the k-th tile the row segment touches (tile width
// tc > 1), by tile_mul; dst may be src.
ROW_INLINE void row_mul(float *dst, const float *src, const float *m, size_t c0, size_t c1, const size_t tc,
                        ptrdiff_t ahead, uint64_t *zeroed) {
    size_t c = c0, k = 0;
    const size_t h = head_cols(c0, c1, tc);
    if (h) tile_mul(dst + c, src + c, m[k++], h, ahead, zeroed), c += h;  // a tile that began before c0
    for (; c + tc <= c1; c += tc, k++) tile_mul(dst + c, src + c, m[k], tc, ahead, zeroed);
    if (c < c1) tile_mul(dst + c, src + c, m[k], c1 - c, ahead, zeroed);
}

// The multiplier of row r's tile that holds column c0, and those after it along the row.
static const float *tile_row(const tile_view *v, const geom *g, size_t r, size_t c0) {
    return v->m + (r / g->tr - v->b0) * v->stride + (c0 / g->tc - v->t0);
}

// Row r, columns [c0, c1): dst = src * the multiplier of each element's tile (see row_mul).
// ahead (elements; 0: none) asks for the input that far ahead, the next unit's: its read from
// memory then overlaps this unit's rounding (the hardware prefetchers see no stream across the
// separate passes of a unit). A hint: it changes no result.
static void mul_row(float *dst, const float *src, const geom *g, const tile_view *v, size_t r, size_t c0,
                    size_t c1, ptrdiff_t ahead, uint64_t *zeroed) {
    const float *m = tile_row(v, g, r, c0);
    if (g->tc == 1) {  // per column: every element its own multiplier, always applied
        uint64_t z = 0;
        if (zeroed)
            for (size_t c = c0; c < c1; c++) z += (m[c - c0] == 0.0f) & (src[c] != 0.0f);
        for (size_t c = c0; c < c1; c++) dst[c] = src[c] * m[c - c0];
        if (ahead)
            for (size_t c = c0; c < c1; c += 64 / sizeof *src) __builtin_prefetch(src + c + ahead);
        if (zeroed) *zeroed += z;
        return;
    }
#define ROW_MUL(w) row_mul(dst, src, m, c0, c1, w, ahead, zeroed)
    BY_TILE_WIDTH(g->tc, ROW_MUL)
#undef ROW_MUL
}

// --- exact quotients: q = round(x / d), d the tile's decoded scale (deq)
//
// x and d are float32, so z = x / d is a ratio of two 24-bit integers times a power of two, and
// its distance from any number of at most 25 significant bits (a value or a midpoint of a
// format of up to 24 bits) is either 0 or at least 2^-49 relative: the float64 quotient fl(z)
// (relative error <= 2^-53) is such a number exactly when z is, and otherwise lies strictly
// between the same two of them. So rounding fl(z) to the element format, in any mode, is
// rounding z. The float32 kernels then get y = fl(z) rounded to odd at 24 bits (truncated, the
// last bit set where inexact), which keeps that property for formats of up to 22 bits of
// precision whose smallest subnormal is at least 2^-147 (two bits to spare below their last
// place): exact_fits_f32. Wider element formats (fp32, e8m22, ...) round fl(z) itself through
// the float64 kernel. Stochastic rounding draws against the bits of y (float32 path) or of
// fl(z) (float64 path), as it draws against x * fl(1/d) under :recip.

static bool exact_fits_f32(const fmt_t *elem) { return elem->mbits <= 21 && elem->min_subnormal >= 0x1p-147; }

// fl(x / d) rounded to odd into float32 (d != 0; a NaN stays NaN, an infinite x infinite; a
// finite quotient beyond float32's range becomes FLT_MAX, which still overflows the element).
static inline float div_rto(float x, float d) {
    const double z = (double)x / d;
    const float y = (float)z;
    uint32_t u = f2u(y);
    const uint32_t inexact = (double)y != z && z == z;
    u -= inexact & (fabs((double)y) > fabs(z));  // rounded away from zero: step back toward it
    return u2f(u | inexact);
}

// div_rto(x, d) from rd = fl64(1 / d) (d > 0), without a division: p = x rd is within 2^-52
// relative of z = x / d (two roundings), and z is a float32 value or at least 2^-49 relative
// from every one (the argument above), so y = float32(p) is z's float32 floor or ceiling (z
// itself where z is a float32 value). The remainder e = y d - x is exact (the product has 48
// bits; the difference, of numbers within 2^-22 of each other or below 2^-126 d, has at most 47),
// and its sign says on which side of z y lies: y steps back toward zero where it is past z, and
// its last bit is set where inexact, as div_rto does. inf and NaN inputs give e NaN: exact, as
// in div_rto (the NaN keeps its payload); a quotient past float32 gives inf, then FLT_MAX. The
// same method as round_lean_block.c's div_rto16, in plain C that GCC vectorises.
static inline float div_rto_rcp(float x, double d, double rd) {
    const double xd = x;
    const float y = (float)(xd * rd);
    const double e = (double)y * d - xd;
    const uint32_t u = f2u(y), inexact = (e < 0.0) | (e > 0.0), below = e < 0.0;
    return u2f((u - (inexact & ((u >> 31) == below))) | inexact);
}

// dst[0..len) = div_rto(src[i], d): kept out of line, so that GCC vectorises this one loop
// instead of unrolling it into scalar code in the copies specialised for 16- and 32-wide tiles
// (scalar code there made NVFP4's exact path several times the reciprocal multiply). One
// division for the run (div_rto_rcp).
__attribute__((noinline)) static void div_rto_run(float *restrict dst, const float *restrict src, float d,
                                                  size_t len) {
    const double dd = d, rd = 1.0 / dd;
    for (size_t i = 0; i < len; i++) dst[i] = div_rto_rcp(src[i], dd, rd);
}

// dst[0..len) = src / d, rounded to odd (d == 0: the multiply path's src * m, as :recip gives:
// a block that two levels send to zero, or whose s_enc / sf was clamped); zeroed as tile_mul.
ROW_INLINE void tile_div(float *dst, const float *src, float m, float d, const size_t len, uint64_t *zeroed) {
    if (zeroed && m == 0.0f)
        for (size_t i = 0; i < len; i++) *zeroed += src[i] != 0.0f;
    if (d == 0.0f) {
        for (size_t i = 0; i < len; i++) dst[i] = src[i] * m;
        return;
    }
    if (d == 1.0f) {  // empty and non-finite tiles: x itself (x / 1 is x, DAZ or not)
        if (dst != src) memcpy(dst, src, len * sizeof *dst);
        return;
    }
    if (dst == src) {  // in place: through a block on the stack (div_rto_run's pointers are restrict)
        float t[64];
        for (size_t i = 0; i < len; i += 64) {
            const size_t k = len - i < 64 ? len - i : 64;
            div_rto_run(t, src + i, d, k);
            memcpy(dst + i, t, k * sizeof *t);
        }
        return;
    }
    div_rto_run(dst, src, d, len);
}

// Per column (tile width 1: every element its own divisor): dst[i] = div_rto(src[i], d[i]), or
// src[i] * m[i] where d[i] == 0, src[i] where d[i] == 1 (as tile_div). One loop GCC vectorises
// (the divisors are loaded, not broadcast): the transposed operands of a trainer's dgrad and
// wgrad take it, and a tile_div call per element made them a large part of an NVFP4 step.
// rd[i] = 1 / d[i] (1 where d[i] is 0), made once for the rows of a tile band (cols_rcp).
__attribute__((noinline)) static void div_rto_cols(float *restrict dst, const float *restrict src,
                                                   const float *restrict m, const float *restrict d,
                                                   const double *restrict rd, size_t len) {
    for (size_t i = 0; i < len; i++) {
        const float di = d[i], q = div_rto_rcp(src[i], di == 0.0f ? 1.0 : (double)di, rd[i]);
        dst[i] = di == 0.0f ? src[i] * m[i] : di == 1.0f ? src[i] : q;  // 1: x itself, DAZ or not
    }
}

static void cols_rcp(double *rd, const float *d, size_t len) {
    for (size_t i = 0; i < len; i++) rd[i] = 1.0 / (d[i] == 0.0f ? 1.0 : (double)d[i]);
}

static void row_div_cols(float *dst, const float *src, const float *m, const float *d, const double *rd,
                         size_t len, uint64_t *zeroed) {
    if (zeroed) {
        uint64_t z = 0;
        for (size_t i = 0; i < len; i++) z += (m[i] == 0.0f) & (src[i] != 0.0f);
        *zeroed += z;
    }
    if (dst != src) return div_rto_cols(dst, src, m, d, rd, len);
    float t[64];  // in place: through a block on the stack (the pointers are restrict)
    for (size_t i = 0; i < len; i += 64) {
        const size_t k = len - i < 64 ? len - i : 64;
        div_rto_cols(t, src + i, m + i, d + i, rd + i, k);
        memcpy(dst + i, t, k * sizeof *t);
    }
}

// The same as row_mul, dividing by d[k] (the multipliers m[k] serve d[k] == 0 and zeroed).
ROW_INLINE void row_div(float *dst, const float *src, const float *m, const float *d, size_t c0, size_t c1,
                        const size_t tc, uint64_t *zeroed) {
    size_t c = c0, k = 0;
    const size_t h = head_cols(c0, c1, tc);
    if (h) tile_div(dst + c, src + c, m[k], d[k], h, zeroed), c += h, k++;
    for (; c + tc <= c1; c += tc, k++) tile_div(dst + c, src + c, m[k], d[k], tc, zeroed);
    if (c < c1) tile_div(dst + c, src + c, m[k], d[k], c1 - c, zeroed);
}

// The unit's last two passes: with `round`, out is rounded by the internal kernel (one call
// where the unit is whole rows, one contiguous range, else one per row; element i draws counter
// offset + i either way); then elems = out and out = out * deq.
static void round_then_dequantize(const qrun *q, const tile_view *deq, size_t r0, size_t r1, size_t c0, size_t c1,
                                  bool round, fmt__counts *cnt) {
    const size_t cols = q->g->cols, w = c1 - c0;
    if (round && w == cols) {
        fmt__round_f32_kernel(&q->k, q->path, q->mode, q->out + r0 * cols, (r1 - r0) * cols, r0 * cols, cnt);
    } else if (round) {
        for (size_t r = r0; r < r1; r++)
            fmt__round_f32_kernel(&q->k, q->path, q->mode, q->out + r * cols + c0, w, r * cols + c0, cnt);
    }
    for (size_t r = r0; r < r1; r++) {
        float *o = q->out + r * cols;
        if (q->elems) memcpy(q->elems + r * cols + c0, o + c0, w * sizeof *o);
        mul_row(o, o, q->g, deq, r, c0, c1, 0, NULL);
    }
}

// Rows [r0, r1) x columns [c0, c1) with exact quotients: out = round(in / deq) * deq, elems =
// round(in / deq); the rounding by the float32 kernel on the round-to-odd quotients, or (element
// formats wider than exact_fits_f32) by the float64 kernel on fl(in / deq), in chunks.
static void scale_round_exact(const qrun *q, const tile_view *mul, const tile_view *deq, size_t r0, size_t r1,
                              size_t c0, size_t c1, qacc *acc) {
    const geom *g = q->g;
    const bool f64 = q->pass == PASS_EXACT_F64;
    const size_t cols = g->cols;
    fmt__counts *cnt = q->counts ? &acc->counts : NULL;
    uint64_t *zeroed = q->count_zeroed ? &acc->zeroed : NULL;
    for (size_t r = r0; r < r1; r++) {
        float *o = q->out + r * cols;
        const float *x = q->in + r * cols, *m = tile_row(mul, g, r, c0), *d = tile_row(deq, g, r, c0);
        if (f64) {
            enum { CHUNK = 256 };
            double z[CHUNK];
            for (size_t c = c0; c < c1; c += CHUNK) {
                const size_t len = min_sz(CHUNK, c1 - c);
                for (size_t i = 0; i < len; i++) {
                    const size_t t = (c + i) / g->tc - c0 / g->tc;
                    if (zeroed && m[t] == 0.0f) *zeroed += x[c + i] != 0.0f;
                    z[i] = d[t] == 0.0f ? (double)(x[c + i] * m[t]) : (double)x[c + i] / d[t];
                }
                fmt__round_f64_kernel(&q->k, q->mode, z, len, r * cols + c, cnt);
                for (size_t i = 0; i < len; i++) o[c + i] = (float)z[i];
            }
        } else if (g->tc == 1) {
            continue;  // below, by column chunks, each with its reciprocals once per tile band
        } else {
#define ROW_DIV(wd) row_div(o, x, m, d, c0, c1, wd, zeroed)
            BY_TILE_WIDTH(g->tc, ROW_DIV)
#undef ROW_DIV
        }
    }
    if (!f64 && g->tc == 1) {
        enum { CHUNK = 512 };
        double rd[CHUNK];
        for (size_t c = c0; c < c1; c += CHUNK) {
            const size_t len = min_sz(CHUNK, c1 - c);
            size_t band = SIZE_MAX;
            for (size_t r = r0; r < r1; r++) {
                const float *m = tile_row(mul, g, r, c0) + (c - c0), *d = tile_row(deq, g, r, c0) + (c - c0);
                if (r / g->tr != band) band = r / g->tr, cols_rcp(rd, d, len);
                row_div_cols(q->out + r * cols + c, q->in + r * cols + c, m, d, rd, len, zeroed);
            }
        }
    }
    round_then_dequantize(q, deq, r0, r1, c0, c1, !f64, cnt);
}

// The rows of [r0, r1) x [c0, c1) that the block kernel takes, from r0 on: a call per tile row
// (its rows take the same scales; per-column ones prepare each divisor once for all of them),
// or one for the whole unit where it is whole rows of one-row tiles (rows and scales both
// contiguous), since a call's setup costs about as much as a short row. It declines (writing
// nothing) for every row or for none, by the thread's MXCSR; a unit of the separate plan may
// start inside a tile, which it does not take. Returns the first row not done (r1: all).
static size_t lean_rows(const qrun *q, const tile_view *mul, const tile_view *deq, size_t r0, size_t r1, size_t c0,
                        size_t c1, ptrdiff_t ahead, qacc *acc) {
    const geom *g = q->g;
    if (c0 % g->tc) return r0;
    const size_t cols = g->cols, w = c1 - c0;
    const bool flat = g->tr == 1 && w == cols && cols % g->tc == 0 && mul->stride * g->tc == cols &&
                      deq->stride * g->tc == cols;
    fmt__block_req r = q->req;
    r.counts = q->counts ? &acc->counts : NULL;
    r.zeroed = q->count_zeroed ? &acc->zeroed : NULL;
    r.ahead = ahead;
    while (r0 < r1) {
        const size_t o = r0 * cols + c0, rows = flat ? r1 - r0 : min_sz(r1, (r0 / g->tr + 1) * g->tr) - r0;
        r.mul = tile_row(mul, g, r0, c0), r.deq = tile_row(deq, g, r0, c0);
        r.out = q->out + o, r.elems = q->elems ? q->elems + o : NULL, r.in = q->in + o;
        r.n = flat ? rows * w : w, r.rows = flat ? 1 : rows, r.base = o;
        if (!fmt__scale_round_f32_lean(&r)) break;
        r0 += rows;
    }
    return r0;
}

// Rows [r0, r1) x columns [c0, c1): out = round(in * mul) * deq, elems = round(in * mul) (exact
// quotients: in / deq), by the call's pass. Element i draws counter offset + i whichever it is.
static void scale_round_body(const qrun *q, const tile_view *mul, const tile_view *deq, size_t r0, size_t r1,
                             size_t c0, size_t c1, ptrdiff_t ahead, qacc *acc) {
    pass_kind pass = q->pass;
    if (pass == PASS_LEAN) {
        r0 = lean_rows(q, mul, deq, r0, r1, c0, c1, ahead, acc);
        if (r0 == r1) return;
        pass = q->fallback;
    }
    if (pass != PASS_MUL) {
        scale_round_exact(q, mul, deq, r0, r1, c0, c1, acc);
        return;
    }
    const size_t cols = q->g->cols;
    for (size_t r = r0; r < r1; r++)
        mul_row(q->out + r * cols, q->in + r * cols, q->g, mul, r, c0, c1, ahead, q->count_zeroed ? &acc->zeroed : NULL);
    round_then_dequantize(q, deq, r0, r1, c0, c1, true, q->counts ? &acc->counts : NULL);
}

// The overflows of the dequantization: an element q that is finite but q * deq passes FLT_MAX.
// Only the rules that round amax up (ceil, even, up, rceil) near FLT_MAX take a scale above
// FLT_MAX / max_elem (torchao and Transformer Engine take the same one: e4m3, amax 3.4e38,
// 2^120), and there out is inf as in their float32 dequantization; counted as overflows, which
// they are. A tile with such a scale has a finite amax, so every inf it holds is one of these.
static void count_dequant_overflow(const qrun *q, const tile_view *deq, size_t r0, size_t r1, size_t c0,
                                   size_t c1, qacc *acc) {
    const geom *g = q->g;
    const size_t nt = (c1 - 1) / g->tc - c0 / g->tc + 1;
    size_t band = SIZE_MAX;  // the tile band whose scales `big` describes: its rows share them
    bool big = false;
    for (size_t r = r0; r < r1; r++) {
        const float *d = tile_row(deq, g, r, c0), *o = q->out + r * g->cols;
        if (r / g->tr != band) {  // once per band, not per row (per-column scales: 16 rows)
            band = r / g->tr, big = false;
            for (size_t k = 0; k < nt; k++) big |= d[k] > q->deq_big;
        }
        if (!big) continue;
        for (size_t c = c0; c < c1; c++)
            acc->counts.overflow += d[c / g->tc - c0 / g->tc] > q->deq_big && isinf(o[c]);
    }
}

// scale_round, then the dequantization's overflows (count_dequant_overflow) where counted.
static void scale_round(const qrun *q, const tile_view *mul, const tile_view *deq, size_t r0, size_t r1,
                        size_t c0, size_t c1, ptrdiff_t ahead, qacc *acc) {
    scale_round_body(q, mul, deq, r0, r1, c0, c1, ahead, acc);
    if (q->counts) count_dequant_overflow(q, deq, r0, r1, c0, c1, acc);
}

// Per-thread scratch of a fused unit: amax bits, 4over6 choices (with q->pick) and scales of its
// tiles.
typedef struct {
    uint32_t *bits;
    uint8_t *pick;
    float *s, *mul, *deq;
} scratch;

// A unit that measures its own tiles: their amax, their scales, then scale_round.
static void fused_unit(const qrun *q, size_t u, const scratch *w, qacc *acc) {
    const geom *g = q->g;
    const plan *p = q->p;
    const span sp = unit_span(p, g, u);
    const size_t r0 = sp.r0, r1 = sp.r1, c0 = sp.c0, c1 = sp.c1;
    const size_t b0 = r0 / g->tr, b1 = (r1 - 1) / g->tr + 1, t0 = c0 / g->tc, ntu = (c1 - 1) / g->tc - t0 + 1;
    const size_t nt = (b1 - b0) * ntu;
    memset(w->bits, 0, (nt + W - 1) / W * W * sizeof *w->bits);
    for (size_t b = b0; b < b1; b++) {
        const uint32_t m = slab_amax(w->bits + (b - b0) * ntu, q->in, g, b * g->tr, min_sz(r1, (b + 1) * g->tr), c0, c1);
        if (m > acc->finite_max) acc->finite_max = m;
    }
    if (q->pick) {  // the unit's choices, laid out as its bits
        memset(w->pick, 0, (nt + W - 1) / W * W);
        for (size_t b = b0; b < b1; b++) memcpy(w->pick + (b - b0) * ntu, q->pick + b * g->ntc + t0, ntu);
    }
    fmt__tile_scales(&q->c, w->bits, q->pick ? w->pick : NULL, nt, w->s, w->mul, w->deq, &acc->tiles);
    if (q->scales)
        for (size_t b = b0; b < b1; b++)
            memcpy(q->scales + b * g->ntc + t0, w->s + (b - b0) * ntu, ntu * sizeof *w->s);
    const tile_view mul = {w->mul, b0, t0, ntu}, deq = {w->deq, b0, t0, ntu};
    scale_round(q, &mul, &deq, r0, r1, c0, c1, sp.ahead, acc);
}

static void acc_merge(qacc *into, const qacc *a) {
    fmt__counts_merge(&into->counts, &a->counts);
    into->zeroed += a->zeroed;
    if (a->finite_max > into->finite_max) into->finite_max = a->finite_max;
    into->tiles.clipped += a->tiles.clipped, into->tiles.nan += a->tiles.nan;
}

// Small tiles: one parallel region for the tensor. Two levels first need the tensor amax (a
// read of the whole tensor: the encoding scale depends on it); then each unit is read from
// memory once, measured, scaled, rounded and scaled back while in L1 (L2 for 2-D tiles).
static int run_fused(qrun *q, qacc *total) {
    const size_t n = q->g->rows * q->g->cols, mt = q->p->max_tiles;
    uint32_t abits = 0;
    int status = FMT_OK;
#pragma omp parallel if (n >= PAR_MIN_ELEMS)
    {
        if (q->c.two_level) {
#pragma omp for schedule(static) reduction(max : abits)
            for (size_t lo = 0; lo < n; lo += UNIT_ELEMS) {
                uint32_t ignored = 0, m = seg_max_bits(q->in + lo, min_sz(n - lo, UNIT_ELEMS), &ignored);
                abits = m > abits ? m : abits;
            }
#pragma omp single
            q->c.s_enc = fmt__scale_encoding(&q->c, abits);  // (single's barrier: all threads see it)
        }
        qacc acc = {0};
        uint32_t *bits = malloc(mt * sizeof *bits);
        uint8_t *pick = q->pick ? malloc(mt) : NULL;
        float *f = malloc(3 * mt * sizeof *f);
        const scratch w = {bits, pick, f, f + mt, f + 2 * mt};
        const bool ok = bits && f && (pick || !q->pick);
#pragma omp for schedule(static)
        for (size_t u = 0; u < q->p->nu; u++)
            if (ok) fused_unit(q, u, &w, &acc);
        free(bits), free(pick), free(f);
#pragma omp critical(fplab_scale_merge)
        {
            acc_merge(total, &acc);
            if (!ok) status = FMT_ENOMEM;
        }
    }
    return status;
}

// Large tiles: their amax in a pass of its own, then their scales, then the units (any shape:
// the multipliers are looked up in the tensor's tables).
static int run_separate(qrun *q, qacc *total) {
    const geom *g = q->g;
    const size_t nt = g->ntr * g->ntc, ntp = (nt + W - 1) / W * W;
    uint32_t *bits = calloc(ntp, sizeof *bits);  // zero beyond nt, as tile_scales wants
    float *sbuf = malloc(3 * ntp * sizeof *sbuf);
    if (!bits || !sbuf) {
        free(bits), free(sbuf);
        return FMT_ENOMEM;
    }
    float *s = sbuf, *mul = sbuf + ntp, *deq = sbuf + 2 * ntp;
    total->finite_max = amax_tiles(bits, q->in, g);
    if (q->c.two_level) {
        uint32_t abits = 0;
        for (size_t t = 0; t < nt; t++) abits = bits[t] > abits ? bits[t] : abits;
        q->c.s_enc = fmt__scale_encoding(&q->c, abits);
    }
    const size_t nbatch = (nt + SCALE_BATCH - 1) / SCALE_BATCH;
    const tile_view vm = {mul, 0, 0, g->ntc}, vd = {deq, 0, 0, g->ntc};
#pragma omp parallel if (g->rows * g->cols >= PAR_MIN_ELEMS)
    {
        qacc acc = {0};
#pragma omp for schedule(static)
        for (size_t i = 0; i < nbatch; i++) {
            const size_t t = i * SCALE_BATCH, len = min_sz(nt - t, SCALE_BATCH);
            fmt__tile_scales(&q->c, bits + t, q->pick ? q->pick + t : NULL, len, s + t, mul + t, deq + t, &acc.tiles);
        }
#pragma omp for schedule(static)
        for (size_t u = 0; u < q->p->nu; u++) {
            const span sp = unit_span(q->p, g, u);
            scale_round(q, &vm, &vd, sp.r0, sp.r1, sp.c0, sp.c1, sp.ahead, &acc);
        }
#pragma omp critical(fplab_scale_merge)
        acc_merge(total, &acc);
    }
    if (q->scales) memcpy(q->scales, s, nt * sizeof *s);
    free(bits), free(sbuf);
    return FMT_OK;
}

static int run_plan(qrun *q, qacc *total) { return q->p->fused ? run_fused(q, total) : run_separate(q, total); }

// err[t] = the sum over tile t of (y - x)^2 in double, element by element in row-major order
// (NaN where a term is, inf where one is). Memory-bound: it reads two tensors once.
static void tile_sq_errors(double *err, const float *x, const float *y, const geom *g) {
#pragma omp parallel for schedule(static) if (g->rows * g->cols >= PAR_MIN_ELEMS)
    for (size_t b = 0; b < g->ntr; b++) {
        double *e = err + b * g->ntc;
        for (size_t t = 0; t < g->ntc; t++) e[t] = 0;
        for (size_t r = b * g->tr; r < min_sz(g->rows, (b + 1) * g->tr); r++) {
            const float *xr = x + r * g->cols, *yr = y + r * g->cols;
            for (size_t t = 0, c = 0; t < g->ntc; t++)
                for (const size_t c1 = min_sz(g->cols, c + g->tc); c < c1; c++) {
                    const double d = (double)yr[c] - xr[c];
                    e[t] += d * d;
                }
        }
    }
}

// 4over6: the tensor quantized with every block's amax mapped to max_elem, then with every one
// mapped to alt_max (the same s_enc, element rounding and counters as the final pass, so the
// values compared are the values kept), each block's sum of squared errors of the dequantized
// values, then the final pass with each block's winner: the smaller sum, max_elem on a tie (the
// paper's strict "error_4 < error_6"). Three passes and two tensors of scratch: a block's
// choice needs its rounded values, which a one-pass unit has only after choosing its scales.
static int run_four_over_six(qrun *q, qacc *total) {
    const geom *g = q->g;
    const size_t n = g->rows * g->cols, nt = g->ntr * g->ntc;
    uint8_t *pick = malloc(nt + W);  // whole vectors, as tile_scales reads them
    float *cand = malloc(2 * n * sizeof *cand);
    double *err = malloc(2 * nt * sizeof *err);
    int st = pick && cand && err ? FMT_OK : FMT_ENOMEM;
    for (int k = 0; k < 2 && st == FMT_OK; k++) {
        qrun c = *q;
        c.out = cand + k * n, c.elems = c.scales = NULL, c.counts = c.count_zeroed = false;
        memset(pick, k, nt + W);
        c.pick = pick;
        qacc ignored = {0};
        st = run_plan(&c, &ignored);
        if (st == FMT_OK) tile_sq_errors(err + k * nt, q->in, c.out, g);
    }
    if (st == FMT_OK) {
        for (size_t t = 0; t < nt; t++) pick[t] = err[nt + t] < err[t];
        q->pick = pick;
        st = run_plan(q, total);
        q->pick = NULL;
    }
    free(pick), free(cand), free(err);
    return st;
}

// ---------------------------------------------------------------------------------------------
// the pass

// The one decision of how a call scales and rounds; *fallback: what takes the rows the block
// kernel declines. Exact quotients wherever a scale need not be a power of two: two levels
// (sf / s_enc), and one level with a scale format that has fraction bits and a quotient rule.
// The block kernel where its rounding is the path the call takes (the explicit kernels, or auto
// chose the converters, whose results are theirs), it covers the element format, the mode, the
// tile width and the kind (on AVX2-only CPUs exact quotients only: for multipliers the separate
// passes are faster there), exact quotients at every tile width (per column, 16 and 32, rows and
// whole tensors: since its lanes divide only near a boundary, statistics or not, one pass beats
// a division pass and a rounding pass on AVX-512 and AVX2 alike). Per-column multipliers take it
// too, since it does a tile row's rows in one call.
// docs/benchmarks.md ("Block scaling's one pass on AVX2", "Exact quotients in one pass at every
// tile width") has the measurements behind each choice.
static pass_kind choose_pass(const fmt_t *elem, const fmt_scaling *sc, const geom *g, const fmt__kparams *k,
                             fmt_round_mode mode, fmt_round_path asked, fmt_round_path path, pass_kind *fallback) {
    const bool exact = !sc->recip && (sc->tensor_scale || (sc->scale_fmt.mbits > 0 &&
                                                           !fmt__scale_rules[sc->scale_round].carry));
    const bool f64 = exact && !exact_fits_f32(elem);
    *fallback = !exact ? PASS_MUL : f64 ? PASS_EXACT_F64 : PASS_EXACT;
    const bool lean = !f64 && fmt__block_lean_covers(k, mode, g->tc, exact) &&
                      (path == FMT_PATH_LEAN || (asked == FMT_PATH_AUTO && path == FMT_PATH_HW));
    return lean ? PASS_LEAN : *fallback;
}

// ---------------------------------------------------------------------------------------------
// quantize

int fmt_quantize_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, const float *in,
                     size_t rows, size_t cols, const fmt_round_opts *o, fmt_stats *stats,
                     fmt_quant_info *info) {
    if (!elem || !sc) return FMT_EINVAL;
    const fmt_round_opts defaults = fmt_scaling_default_opts(sc);
    if (!o) o = &defaults;
    if (fmt_validate_round_opts(elem, o, NULL, 0) != FMT_OK) return FMT_EINVAL;
    if (!fmt_values_fit_f32(elem)) return FMT_EINVAL;
    if (sc->tile_rows < 0 || sc->tile_cols < 0 || (unsigned)sc->scale_round >= FMT_SCALE_NRULES)
        return FMT_EINVAL;
    if (!sc->none && fmt__scaling_check(sc, "", NULL, 0) != FMT_OK) return FMT_EINVAL;
    if (cols && rows > SIZE_MAX / cols) return FMT_EINVAL;
    const size_t n = rows * cols;
    if (n && (!out || !in)) return FMT_EINVAL;
    if (info) info->tensor_scale = 1.0f, info->scales_clipped = 0, info->scales_nan = 0;
    if (n == 0) return FMT_OK;

    if (sc->none) {
        const int status = fmt_round_f32_scaled(elem, out, in, n, 1.0f, 1.0f, o, stats);
        if (info && info->elems) memcpy(info->elems, out, n * sizeof *out);
        return status;
    }

    const geom g = geom_make(sc, rows, cols);
    const plan p = plan_make(&g);
    qrun q = {.g = &g, .p = &p, .mode = o->mode, .out = out, .in = in, .counts = stats != NULL,
              .count_zeroed = stats && sc->tensor_scale};
    q.elems = info ? info->elems : NULL;
    q.scales = info ? info->scales : NULL;
    q.deq_big = (float)(FLT_MAX / elem->max);
    fmt__scale_ctx_make(&q.c, elem, sc);
    fmt__kparams_make(&q.k, elem, o);
    q.path = fmt__f32_path(&q.k, o->path, o->mode, stats != NULL);
    if (q.path == FMT_NPATHS) return FMT_EINVAL;  // a path the caller named that cannot run this
    q.pass = choose_pass(elem, sc, &g, &q.k, o->mode, o->path, q.path, &q.fallback);
    q.req = (fmt__block_req){.k = &q.k, .mode = q.mode, .tc = g.tc, .exact = q.fallback != PASS_MUL, .ld = cols};

    qacc total = {0};
    const int status = sc->tensor_scale && q.c.rule->by_error ? run_four_over_six(&q, &total) : run_plan(&q, &total);
    if (status != FMT_OK) return status;
    if (stats) {
        // The rounding's counts, the zeroed blocks' elements, and the amax of the input (not of
        // the scaled values).
        total.counts.underflow += total.zeroed;
        total.counts.amax = u2f(total.finite_max);
        fmt__counts_add(stats, &total.counts, n);
    }
    if (info) {
        info->tensor_scale = sc->tensor_scale ? 1.0f / q.c.s_enc : 1.0f;
        info->scales_clipped = total.tiles.clipped;
        info->scales_nan = total.tiles.nan;
    }
    return FMT_OK;
}

// ---------------------------------------------------------------------------------------------
// quantize to codes

int fmt_quantize_codes_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, void *codes, void *scale_codes,
                           const float *in, size_t rows, size_t cols, const fmt_round_opts *o, fmt_stats *stats,
                           fmt_quant_info *info) {
    if (!elem || !sc || (cols && rows > SIZE_MAX / cols)) return FMT_EINVAL;
    const size_t n = rows * cols, ns = fmt_scale_count(sc, rows, cols);
    fmt_quant_info own = {0};
    if (!info) info = &own;
    // The buffers the caller did not give and the codes need: out, the element values, the scales.
    float *o_buf = NULL, *e_buf = NULL, *s_buf = NULL;
    if (!out && n) out = o_buf = malloc(n * sizeof *out);
    if (codes && !info->elems && !sc->none && n) info->elems = e_buf = malloc(n * sizeof *e_buf);
    if (scale_codes && !info->scales && ns) info->scales = s_buf = malloc(ns * sizeof *s_buf);
    int st = (n && !out) || (codes && !sc->none && n && !info->elems) || (scale_codes && ns && !info->scales)
                 ? FMT_ENOMEM : FMT_OK;
    if (st == FMT_OK) st = fmt_quantize_f32(elem, sc, out, in, rows, cols, o, stats, info);
    // Values of the formats: nearest-even with IEEE overflow and subnormals kept is exact.
    const fmt_round_opts enc = {0};
    if (st == FMT_OK && codes) st = fmt_encode_f32(elem, codes, sc->none || !info->elems ? out : info->elems, n, &enc, NULL);
    if (st == FMT_OK && scale_codes && ns) st = fmt_encode_f32(&sc->scale_fmt, scale_codes, info->scales, ns, &enc, NULL);
    if (e_buf) info->elems = NULL;
    if (s_buf) info->scales = NULL;
    free(o_buf), free(e_buf), free(s_buf);
    return st;
}
