// scale.c: scaling recipes (none, tensor, row, col, 1-D blocks, 2-D tiles, NVFP4 two-level):
// recipe names, scale selection from a tile's amax, and the quantize-dequantize pass.
// Constraints: no MPFR; element rounding goes through fmt_round_f32 on contiguous runs of the
// flat array, each run drawing counters o->offset + (its flat index), so results and statistics
// do not depend on the tile shape chosen for the work or on the number of threads.
//
// The pass, for an n = rows x cols tensor:
//   1. one read of `in` (copied to `out` on the way) gives every tile's amax (parallel over
//      row x column slabs; slab maxima merge into the tiles with an atomic integer max on the
//      bits of |x|, which orders non-negative floats and makes any NaN the largest);
//   2. one scale per tile from its amax (parallel over tiles);
//   3. parallel over flat chunks: multiply by the tile's 1/s, round the chunk, multiply by s.
#include "scale.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "round_internal.h"

// ---------------------------------------------------------------------------------------------
// names

static const char *const round_names[] = {"ocp", "up", "rne"};

// Presets: the names people type. "none" is handled on its own (it has no scale).
typedef struct {
    const char *name;
    int tile_rows, tile_cols;
    const char *scale_fmt;
    fmt_scale_round round;
    bool tensor_scale;
} preset;

static const preset presets[] = {
    {"tensor", 0, 0, "fp32", FMT_SCALE_RNE, false},
    {"row", 1, 0, "fp32", FMT_SCALE_RNE, false},
    {"col", 0, 1, "fp32", FMT_SCALE_RNE, false},
    {"mx", 1, 32, "e8m0", FMT_SCALE_OCP, false},
    {"nvfp4", 1, 16, "e4m3", FMT_SCALE_RNE, true},
};
enum { NPRESETS = sizeof presets / sizeof presets[0] };

#define EXPECTED_RECIPES                                                                       \
    "none, tensor, row, col, mx, nvfp4, block:K:SCALEFMT or tile:RxC:SCALEFMT, optionally "   \
    "followed by :ocp, :up or :rne and :nanblock"
static const char nanblock_word[] = "nanblock";

static bool same_format(const fmt_t *a, const fmt_t *b) {
    return a->bits == b->bits && a->ebits == b->ebits && a->mbits == b->mbits && a->bias == b->bias &&
           a->is_signed == b->is_signed && a->special == b->special;
}

// Scales are stored as float32 and scale 1 is the default of empty and non-finite tiles.
static int check_scale_format(const fmt_t *f, const char *spec, char *msg, size_t len) {
    if (!fmt_embeds_in_f32(f) || f->max > FLT_MAX) {
        if (msg) snprintf(msg, len, "scaling '%s': scale format %s does not fit in float32; expected "
                          "a format of 32 bits or fewer (e8m0, e4m3, bf16, fp32, ...)", spec, f->name);
        return FMT_EINVAL;
    }
    if (!(f->min_subnormal <= 1.0 && f->max >= 1.0)) {
        if (msg) snprintf(msg, len, "scaling '%s': scale format %s cannot hold the scale 1", spec,
                          f->name);
        return FMT_EINVAL;
    }
    return FMT_OK;
}

// A whole decimal token [s, s+n) as a non-negative int.
static bool parse_count(const char *s, size_t n, int *out) {
    if (n == 0 || n > 9) return false;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    return *out = v, true;
}

// The last step of parsing a recipe with a scale: ":nanblock" needs a NaN in the scale format.
static int finish(fmt_scaling *out, fmt_scaling *sc, bool nan_block, const char *spec, char *msg,
                  size_t msg_len) {
    if (nan_block && !sc->scale_fmt.has_nan) {
        if (msg) snprintf(msg, msg_len, "scaling '%s': :nanblock stores a NaN scale, but scale format %s has "
                          "no NaN; expected a scale format with one (e8m0, e4m3, bf16, fp32, ...)", spec,
                          sc->scale_fmt.name);
        return FMT_EINVAL;
    }
    sc->nan_block = nan_block;
    *out = *sc;
    return FMT_OK;
}

fmt_round_opts fmt_scaling_default_opts(const fmt_scaling *sc) {
    fmt_round_opts o = {0};
    o.mode = FMT_RNE;
    o.overflow = sc && !sc->none ? FMT_SATURATE : FMT_OVERFLOW_IEEE;
    return o;
}

int fmt_scaling_from_name(fmt_scaling *out, const char *spec, char *msg, size_t msg_len) {
    if (msg && msg_len) msg[0] = 0;
    if (!spec || !*spec) {
        if (msg) snprintf(msg, msg_len, "empty scaling recipe; expected " EXPECTED_RECIPES);
        return FMT_EUNKNOWN;
    }
    char buf[256];
    if (strlen(spec) >= sizeof buf) {
        if (msg) snprintf(msg, msg_len, "scaling recipe is %zu characters long; expected at most %zu",
                          strlen(spec), sizeof buf - 1);
        return FMT_EINVAL;
    }
    strcpy(buf, spec);

    // Trailing ":ocp" | ":up" | ":rne" and ":nanblock", in either order (SCALEFMT may itself hold
    // ':' flags, so strip from the end).
    int rnd = -1;
    bool nan_block = false;
    for (char *colon; (colon = strrchr(buf, ':'));) {
        int r = -1;
        for (int i = 0; i < 3; i++)
            if (!strcasecmp(colon + 1, round_names[i])) r = i;
        if (r < 0 && strcasecmp(colon + 1, nanblock_word)) break;
        if ((r >= 0 && rnd >= 0) || (r < 0 && nan_block)) {
            if (msg) snprintf(msg, msg_len, "scaling '%s': %s is given twice; expected at most one of "
                              ":ocp, :up or :rne and one :nanblock at the end", spec,
                              r >= 0 ? "the scale rounding" : ":nanblock");
            return FMT_EINVAL;
        }
        if (r >= 0) rnd = r;
        else nan_block = true;
        *colon = 0;
    }

    fmt_scaling sc;
    memset(&sc, 0, sizeof sc);
    if (!strcasecmp(buf, "none")) {
        if (rnd >= 0 || nan_block) {
            if (msg) snprintf(msg, msg_len, "scaling '%s': 'none' has no scale to %s; expected "
                              "plain 'none'", spec, nan_block ? "make NaN" : "round");
            return FMT_EINVAL;
        }
        sc.none = true;
        fmt_from_name(&sc.scale_fmt, "fp32");
        sc.scale_round = FMT_SCALE_RNE;
        return *out = sc, FMT_OK;
    }
    for (int i = 0; i < NPRESETS; i++) {
        if (strcasecmp(buf, presets[i].name)) continue;
        sc.tile_rows = presets[i].tile_rows, sc.tile_cols = presets[i].tile_cols;
        fmt_from_name(&sc.scale_fmt, presets[i].scale_fmt);
        sc.scale_round = rnd >= 0 ? (fmt_scale_round)rnd : presets[i].round;
        sc.tensor_scale = presets[i].tensor_scale;
        return finish(out, &sc, nan_block, spec, msg, msg_len);
    }

    const bool is_block = !strncasecmp(buf, "block:", 6), is_tile = !strncasecmp(buf, "tile:", 5);
    if (!is_block && !is_tile) {
        if (msg) snprintf(msg, msg_len, "unknown scaling recipe '%s'; expected " EXPECTED_RECIPES, spec);
        return FMT_EUNKNOWN;
    }
    const char *shape = buf + (is_block ? 6 : 5);
    const char *fmtname = strchr(shape, ':');
    const size_t shape_len = fmtname ? (size_t)(fmtname - shape) : strlen(shape);
    if (is_block) {
        int k;
        if (!parse_count(shape, shape_len, &k) || k < 1) {
            if (msg) snprintf(msg, msg_len, "scaling '%s': block size '%.*s' is not a positive integer; "
                              "expected block:K:SCALEFMT, e.g. block:32:e8m0", spec, (int)shape_len, shape);
            return FMT_EINVAL;
        }
        sc.tile_rows = 1, sc.tile_cols = k;
    } else {
        const char *x = memchr(shape, 'x', shape_len);
        if (!x) x = memchr(shape, 'X', shape_len);
        int r, c;
        if (!x || !parse_count(shape, (size_t)(x - shape), &r) ||
            !parse_count(x + 1, shape_len - (size_t)(x - shape) - 1, &c)) {
            if (msg) snprintf(msg, msg_len, "scaling '%s': tile shape '%.*s' is not RxC with non-negative "
                              "integers (0 = whole dimension); expected tile:RxC:SCALEFMT, e.g. "
                              "tile:128x128:fp32", spec, (int)shape_len, shape);
            return FMT_EINVAL;
        }
        sc.tile_rows = r, sc.tile_cols = c;
    }
    if (!fmtname || !fmtname[1]) {
        if (msg) snprintf(msg, msg_len, "scaling '%s': no scale format; expected %s:SCALEFMT with "
                          "SCALEFMT a format name (e8m0, e4m3, bf16, fp32, ...)", spec,
                          is_block ? "block:K" : "tile:RxC");
        return FMT_EINVAL;
    }
    int st = fmt_from_name(&sc.scale_fmt, fmtname + 1);
    if (st != FMT_OK) {
        if (msg) snprintf(msg, msg_len, "scaling '%s': '%s' is not a format; expected a scale format "
                          "name (e8m0, e4m3, bf16, fp32, ... or eXmY[:flags])", spec, fmtname + 1);
        return st;
    }
    if ((st = check_scale_format(&sc.scale_fmt, spec, msg, msg_len)) != FMT_OK) return st;
    // Exponent-only scale formats hold only powers of two: OCP's choice is the natural default.
    sc.scale_round = rnd >= 0 ? (fmt_scale_round)rnd
                              : sc.scale_fmt.mbits == 0 ? FMT_SCALE_OCP : FMT_SCALE_RNE;
    return finish(out, &sc, nan_block, spec, msg, msg_len);
}

void fmt_scaling_name(const fmt_scaling *sc, char *buf, size_t len) {
    if (!buf || !len) return;
    if (sc->none) {
        snprintf(buf, len, "none");
        return;
    }
    const char *rn = (unsigned)sc->scale_round < 3 ? round_names[sc->scale_round] : "?";
    const char *nb = sc->nan_block ? ":nanblock" : "";
    for (int i = 0; i < NPRESETS; i++) {
        const preset *p = &presets[i];
        fmt_t pf;
        fmt_from_name(&pf, p->scale_fmt);
        if (p->tile_rows != sc->tile_rows || p->tile_cols != sc->tile_cols ||
            p->tensor_scale != sc->tensor_scale || !same_format(&pf, &sc->scale_fmt))
            continue;
        if (sc->scale_round == p->round) snprintf(buf, len, "%s%s", p->name, nb);
        else snprintf(buf, len, "%s:%s%s", p->name, rn, nb);
        return;
    }
    // A two-level struct of another shape has no spelling of its own; the explicit form says the
    // rest and "+tensor" marks that it will not parse back.
    const char *ts = sc->tensor_scale ? "+tensor" : "";
    if (sc->tile_rows == 1 && sc->tile_cols > 0)
        snprintf(buf, len, "block:%d:%s:%s%s%s", sc->tile_cols, sc->scale_fmt.name, rn, nb, ts);
    else
        snprintf(buf, len, "tile:%dx%d:%s:%s%s%s", sc->tile_rows, sc->tile_cols, sc->scale_fmt.name,
                 rn, nb, ts);
}

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

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

static inline size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

// ---------------------------------------------------------------------------------------------
// pass 1: tile amax

enum {
    SLAB_COLS = 4096,  // columns of one amax work item; it touches <= SLAB_COLS / tc + 2 tiles
    SLAB_ELEMS = 1 << 15,
    CHUNK = 1 << 14,   // elements per rounding call (round.c's own chunk: one task per call)
    // Below these sizes a parallel region costs more than it saves (and on a loaded machine a
    // barrier waits for a descheduled thread): run the pass on the calling thread.
    PAR_MIN_ELEMS = 1 << 16,
    PAR_MIN_TILES = 1 << 12,
};

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

// Rows [r0, r1) (inside one tile band) x columns [c0, c1): copies in to out when they differ,
// merges max |x| bits per tile into bits[], returns the NaN-free max |x| bits of the slab.
static uint32_t amax_slab(uint32_t *bits, float *out, const float *in, const geom *g, size_t r0,
                          size_t r1, size_t c0, size_t c1) {
    uint32_t loc[SLAB_COLS + 2];
    const size_t t0 = c0 / g->tc, nt = (c1 - 1) / g->tc - t0 + 1;
    memset(loc, 0, nt * sizeof loc[0]);
    uint32_t finite_max = 0;
    for (size_t r = r0; r < r1; r++) {
        const float *restrict x = in + r * g->cols + c0;
        const size_t w = c1 - c0;
        if (out != in) memcpy(out + r * g->cols + c0, x, w * sizeof *x);
        if (g->tc == 1) {  // per column: one tile per element
            uint32_t mf = 0;
            for (size_t i = 0; i < w; i++) {
                const uint32_t u = f2u(x[i]) & 0x7fffffffu, uf = u & -(uint32_t)(u <= 0x7f800000u);
                loc[i] = u > loc[i] ? u : loc[i];
                mf = uf > mf ? uf : mf;
            }
            if (mf > finite_max) finite_max = mf;
            continue;
        }
        for (size_t c = c0; c < c1;) {
            const size_t t = c / g->tc, e = min_sz(c1, (t + 1) * g->tc);
            const uint32_t m = seg_max_bits(in + r * g->cols + c, e - c, &finite_max);
            if (m > loc[t - t0]) loc[t - t0] = m;
            c = e;
        }
    }
    uint32_t *dst = bits + (r0 / g->tr) * g->ntc + t0;
    for (size_t t = 0; t < nt; t++)
        if (loc[t]) atomic_max_u32(&dst[t], loc[t]);
    return finite_max;
}

// bits[ntr*ntc] = max |x| bits per tile (any NaN gives a NaN pattern); returns the NaN-free amax.
static float amax_tiles(uint32_t *bits, float *out, const float *in, const geom *g) {
    const size_t cw = min_sz(g->cols, SLAB_COLS);
    const size_t ncs = (g->cols + cw - 1) / cw;
    const size_t rh = min_sz(g->tr, SLAB_ELEMS / cw ? SLAB_ELEMS / cw : 1);
    const size_t nrs = (g->tr + rh - 1) / rh;  // row slabs per band: none straddles two bands
    const size_t items = g->ntr * nrs * ncs;
    uint32_t finite_max = 0;
#pragma omp parallel for schedule(dynamic, 4) reduction(max : finite_max) \
    if (g->rows * g->cols >= PAR_MIN_ELEMS)
    for (size_t it = 0; it < items; it++) {
        const size_t cs = it % ncs, rs = (it / ncs) % nrs, b = it / (ncs * nrs);
        const size_t r0 = b * g->tr + rs * rh;
        const size_t r1 = min_sz(min_sz(r0 + rh, (b + 1) * g->tr), g->rows);
        if (r0 >= r1) continue;
        const size_t c0 = cs * cw, c1 = min_sz(c0 + cw, g->cols);
        uint32_t m = amax_slab(bits, out, in, g, r0, r1, c0, c1);
        finite_max = m > finite_max ? m : finite_max;
    }
    return u2f(finite_max);
}

// ---------------------------------------------------------------------------------------------
// pass 2: scales

typedef struct {
    fmt__kparams k;   // the scale format, saturating, for the rounding of a needed scale
    fmt_round_mode mode;
    double lo, hi;    // the scale range: smallest positive value whose reciprocal is a finite
                      // float32 (>= 2^-127), and the format's max
    float elem_max;
    int elem_emax;
} scale_ctx;

static void scale_ctx_make(scale_ctx *c, const fmt_t *elem, const fmt_scaling *sc) {
    fmt_round_opts so = {0};
    so.overflow = FMT_SATURATE;
    so.mode = sc->scale_round == FMT_SCALE_UP ? FMT_RUP : FMT_RNE;  // OCP's powers of two are exact
    fmt__kparams_make(&c->k, &sc->scale_fmt, &so);
    c->mode = so.mode;
    c->lo = fmax(sc->scale_fmt.min_subnormal, 0x1p-127);
    c->hi = sc->scale_fmt.max;
    c->elem_max = (float)elem->max;
    c->elem_emax = elem->emax;
}

// The needed scale of a tile whose (scaled) amax is a, a finite and > 0: OCP's power of two, or
// the quotient a / max_elem (in double: exact enough that only its final rounding matters).
static double needed_scale(const scale_ctx *c, fmt_scale_round r, double a) {
    if (r == FMT_SCALE_OCP) {
        int e;
        frexp(a, &e);  // a = m 2^e, m in [0.5, 1): floor(log2 a) = e - 1, exactly
        return ldexp(1.0, e - 1 - c->elem_emax);
    }
    return a / c->elem_max;
}

// The needed scale rounded into the scale format. Clipped: the need lies outside [lo, hi] (the
// stored scale is then the nearer end), or rounding it up saturated below it.
static float round_scale(const scale_ctx *c, double need, bool pow2, bool *clipped) {
    if (need > c->hi) return *clipped = true, (float)c->hi;
    if (need < c->lo) return *clipped = true, (float)c->lo;
    if (pow2) return (float)need;  // a power of two in [lo, max] is a value of every format
    double s = need;
    fmt__round_f64_kernel(&c->k, c->mode, &s, 1, 0, NULL);
    if (c->mode == FMT_RUP && s < need) *clipped = true;
    return (float)s;
}

// The scale of a tile whose amax is inf or NaN. OCP MX v1.0 (6.3) takes the scale from the
// largest magnitude, which is not finite here, and clamps only normal numbers: the spec leaves
// this tile open. fplab's default keeps scale 1, so the non-finite values meet the element
// format's own rules (and are counted there) instead of poisoning their neighbours; nan_block
// gives the scale NaN, as microxcaling and torchao do (every element of the tile becomes NaN).
static float nonfinite_tile_scale(bool nan_block) { return nan_block ? NAN : 1.0f; }

// One-level scales: s[t] decoded scale, inv[t] = 1/s in float32. Returns the clipped count.
static uint64_t scales_one_level(float *s, float *inv, const uint32_t *bits, size_t nt,
                                 const scale_ctx *c, fmt_scale_round r, bool nan_block) {
    uint64_t clipped = 0;
#pragma omp parallel for schedule(static) reduction(+ : clipped) if (nt >= PAR_MIN_TILES)
    for (size_t t = 0; t < nt; t++) {
        const float a = u2f(bits[t]);
        bool clip = false;
        const float st = a == 0.0f ? 1.0f
                         : !(a <= FLT_MAX)
                             ? nonfinite_tile_scale(nan_block)
                             : round_scale(c, needed_scale(c, r, a), r == FMT_SCALE_OCP, &clip);
        s[t] = st;
        inv[t] = 1.0f / st;
        clipped += clip;
    }
    return clipped;
}

// NVFP4: s_enc = (max_scale * max_elem) / A in float32, then per tile sf = round(amax / max_elem *
// s_enc) into the scale format without a lower clamp; q multiplier s_enc / sf, dequant sf / s_enc.
// sf == 0 (empty block, or a block too small for the scale format) quantizes the block to zero.
static uint64_t scales_two_level(float *sf_out, float *mul, float *deq, const uint32_t *bits,
                                 size_t nt, const scale_ctx *c, fmt_scale_round r,
                                 const fmt_scaling *sc, float *tensor_scale, uint64_t *zeroed_tiles) {
    uint32_t abits = 0;
    for (size_t t = 0; t < nt; t++) abits = bits[t] > abits ? bits[t] : abits;
    const float A = u2f(abits);
    float s_enc = (float)(sc->scale_fmt.max * c->elem_max) / A;
    if (s_enc > FLT_MAX) s_enc = FLT_MAX;  // as Transformer Engine clamps it
    if (A == 0.0f || !(A <= FLT_MAX) || s_enc == 0.0f) s_enc = 1.0f;
    *tensor_scale = 1.0f / s_enc;
    uint64_t clipped = 0, zeroed = 0;
#pragma omp parallel for schedule(static) reduction(+ : clipped, zeroed) if (nt >= PAR_MIN_TILES)
    for (size_t t = 0; t < nt; t++) {
        const float a = u2f(bits[t]);
        float sf;
        bool clip = false;
        if (!(a <= FLT_MAX)) {
            sf = nonfinite_tile_scale(sc->nan_block);  // A is non-finite too, so s_enc == 1
        } else {
            const float tq = a / c->elem_max * s_enc;
            const double need = r == FMT_SCALE_OCP && a > 0.0f ? needed_scale(c, r, (double)a * s_enc) : tq;
            if (need > c->hi) {
                sf = (float)c->hi, clip = true;
            } else {
                double v = need;
                fmt__round_f64_kernel(&c->k, c->mode, &v, 1, 0, NULL);
                sf = (float)v;
                if (c->mode == FMT_RUP && v < need) clip = true;
                if (a > 0.0f && sf == 0.0f) clip = true, zeroed++;
            }
        }
        sf_out[t] = sf;
        if (sf == 0.0f || isnan(sf)) {
            mul[t] = deq[t] = sf;  // 0: the block becomes zero; NaN: it becomes NaN
        } else {
            const float m = s_enc / sf;
            mul[t] = m <= FLT_MAX ? m : FLT_MAX;
            deq[t] = sf / s_enc;
        }
        clipped += clip;
    }
    *zeroed_tiles = zeroed;
    return clipped;
}

// ---------------------------------------------------------------------------------------------
// pass 3: scale, round, unscale

// x[a..b) (flat indices) *= m[tile of each element]. When zeroed is given, also counts the
// nonzero elements that a zero multiplier sends to zero (underflows the rounding cannot see).
static void mul_tiles(float *x, size_t a, size_t b, const geom *g, const float *m, uint64_t *zeroed) {
    while (a < b) {
        const size_t r = a / g->cols, c0 = a % g->cols, c1 = min_sz(g->cols, c0 + (b - a));
        const float *mr = m + (r / g->tr) * g->ntc;
        float *xr = x + r * g->cols;
        uint64_t z = 0;
        if (g->tc == 1) {
            if (zeroed)
                for (size_t c = c0; c < c1; c++) z += (mr[c] == 0.0f) & (xr[c] != 0.0f);
            for (size_t c = c0; c < c1; c++) xr[c] *= mr[c];
        } else {
            for (size_t c = c0; c < c1;) {
                const size_t e = min_sz(c1, (c / g->tc + 1) * g->tc);
                const float f = mr[c / g->tc];
                if (zeroed && f == 0.0f)
                    for (size_t i = c; i < e; i++) z += xr[i] != 0.0f;
                if (f != 1.0f)
                    for (; c < e; c++) xr[c] *= f;
                c = e;
            }
        }
        if (zeroed) *zeroed += z;
        a += c1 - c0;
    }
}

static void stats_add(fmt_stats *into, const fmt_stats *s) {
    into->n += s->n, into->overflow += s->overflow, into->underflow += s->underflow;
    into->subnormal += s->subnormal, into->nan_in += s->nan_in, into->invalid += s->invalid;
}

// elems (optional, n floats) receives the rounded values before they are multiplied back.
static int round_scaled(const fmt_t *elem, float *x, float *elems, const geom *g, const float *mul,
                        const float *deq, bool count_zeroed, const fmt_round_opts *o, fmt_stats *st) {
    const size_t n = g->rows * g->cols, nchunks = (n + CHUNK - 1) / CHUNK;
    fmt_stats total = {0};
    int status = FMT_OK;
    if (n < PAR_MIN_ELEMS) {  // small: one rounding call (its own parallel region) for all
        uint64_t zeroed = 0;
        mul_tiles(x, 0, n, g, mul, count_zeroed ? &zeroed : NULL);
        status = fmt_round_f32(elem, x, n, o, st ? &total : NULL);
        if (elems) memcpy(elems, x, n * sizeof *x);
        mul_tiles(x, 0, n, g, deq, NULL);
        total.underflow += zeroed;
        if (st) stats_add(st, &total);
        return status;
    }
#pragma omp parallel
    {
        fmt_stats local = {0};
        uint64_t zeroed = 0;
        int my_status = FMT_OK;
#pragma omp for schedule(static)
        for (size_t ci = 0; ci < nchunks; ci++) {
            const size_t a = ci * CHUNK, b = min_sz(n, a + CHUNK);
            fmt_round_opts oc = *o;
            oc.offset = o->offset + a;  // the element's flat index, whatever the tiling
            mul_tiles(x, a, b, g, mul, count_zeroed ? &zeroed : NULL);
            int s = fmt_round_f32(elem, x + a, b - a, &oc, st ? &local : NULL);
            if (s != FMT_OK) my_status = s;
            if (elems) memcpy(elems + a, x + a, (b - a) * sizeof *x);
            mul_tiles(x, a, b, g, deq, NULL);
        }
        local.underflow += zeroed;
#pragma omp critical(fplab_scale_stats)
        {
            stats_add(&total, &local);
            if (my_status != FMT_OK) status = my_status;
        }
    }
    if (st) stats_add(st, &total);
    return status;
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
    if (!(elem->max <= FLT_MAX) || !fmt_embeds_in_f32(elem)) return FMT_EINVAL;
    if (sc->tile_rows < 0 || sc->tile_cols < 0 || (unsigned)sc->scale_round > FMT_SCALE_RNE)
        return FMT_EINVAL;
    if (!sc->none && check_scale_format(&sc->scale_fmt, "", NULL, 0) != FMT_OK) return FMT_EINVAL;
    if (!sc->none && sc->nan_block && !sc->scale_fmt.has_nan) return FMT_EINVAL;  // as the parser says
    if (cols && rows > SIZE_MAX / cols) return FMT_EINVAL;
    const size_t n = rows * cols;
    if (n && (!out || !in)) return FMT_EINVAL;
    if (info) info->tensor_scale = 1.0f, info->scales_clipped = 0, info->scales_nan = 0;
    if (n == 0) return FMT_OK;

    if (sc->none) {
        if (out != in) memcpy(out, in, n * sizeof *out);
        const int status = fmt_round_f32(elem, out, n, o, stats);
        if (info && info->elems) memcpy(info->elems, out, n * sizeof *out);
        return status;
    }

    const geom g = geom_make(sc, rows, cols);
    const size_t nt = g.ntr * g.ntc;
    uint32_t *bits = calloc(nt, sizeof *bits);
    float *sbuf = malloc(3 * nt * sizeof *sbuf);
    if (!bits || !sbuf) {
        free(bits), free(sbuf);
        return FMT_ENOMEM;
    }
    float *scale = sbuf, *mul = sbuf + nt, *deq = sbuf + 2 * nt;

    const float in_amax = amax_tiles(bits, out, in, &g);

    scale_ctx c;
    scale_ctx_make(&c, elem, sc);
    uint64_t clipped, zeroed_tiles = 0;
    float tensor_scale = 1.0f;
    if (sc->tensor_scale) {
        clipped = scales_two_level(scale, mul, deq, bits, nt, &c, sc->scale_round, sc, &tensor_scale,
                                   &zeroed_tiles);
    } else {
        clipped = scales_one_level(scale, mul, bits, nt, &c, sc->scale_round, sc->nan_block);
        memcpy(deq, scale, nt * sizeof *deq);
    }
    uint64_t nan_tiles = 0;
    if (sc->nan_block)
        for (size_t t = 0; t < nt; t++) nan_tiles += bits[t] >= 0x7f800000u;  // inf or NaN amax

    fmt_stats st = {0};
    const int status = round_scaled(elem, out, info ? info->elems : NULL, &g, mul, deq, zeroed_tiles > 0, o, stats ? &st : NULL);
    if (stats) {
        stats_add(stats, &st);
        if (in_amax > stats->amax) stats->amax = in_amax;  // of the input, not the scaled values
    }
    if (info) {
        if (info->scales) memcpy(info->scales, scale, nt * sizeof *scale);
        info->tensor_scale = tensor_scale;
        info->scales_clipped = clipped;
        info->scales_nan = nan_tiles;
    }
    free(bits), free(sbuf);
    return status;
}
