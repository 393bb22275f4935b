// test_scale.c: scaling recipes (formats/scale.h). Hand-built blocks with expectations worked
// out by hand (MX OCP vs UP vs RNE scales, exact max_elem*2^k amax, ragged blocks, NVFP4's two
// levels, zero/inf/NaN tiles with and without :nanblock, clipped scales, statistics, saturation
// by default for scaled recipes); an independent slow implementation
// (scalar loops over tiles, one fmt_round_f32 call per element, scales computed in double from
// the recipe's definition) compared bit for bit, with statistics, for every rounding mode and
// many recipes; stochastic rounding independent of tile shape and thread count; every output
// divided by its power-of-two scale is a value of the element format; parsing of every spelling
// and of bad specs. Seed: env FPLAB_SEED (printed).
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "formats/scale.h"
#include "test_util.h"

// --- helpers

// This suite's seed: FPLAB_SEED, else its default; printed with the test's name.
static uint64_t test_seed(const char *test) { return tu_seed("test_scale", test, 0x5ca1e2024ULL); }

static fmt_round_opts opts(fmt_round_mode m, fmt_overflow ov) {
    fmt_round_opts o = {0};
    o.mode = m, o.overflow = ov, o.seed = 7, o.stream = 3, o.offset = 1000;
    return o;
}

// Random tensor: log-uniform magnitudes over 2^[-lo, hi], random signs, some exact zeros, and
// per-row swings so that tiles see different amaxes.
static float *random_tensor(size_t rows, size_t cols, uint64_t *s, int lo, int hi) {
    float *x = malloc(rows * cols * sizeof *x);
    for (size_t r = 0; r < rows; r++) {
        const int swing = (int)(tu_splitmix64(s) % 9) - 4;
        for (size_t c = 0; c < cols; c++) {
            double u = tu_sm_unif(s);
            double v = ldexp(1.0 + tu_sm_unif(s), (int)floor(-lo + u * (lo + hi)) + swing);
            if (tu_splitmix64(s) % 23 == 0) v = 0;
            x[r * cols + c] = (float)((tu_splitmix64(s) & 1) ? -v : v);
        }
    }
    return x;
}

// --- the independent slow implementation

typedef struct {
    bool per_element;   // in: round each element on its own (see ref_quantize)
    float *scales;      // out: one per tile
    float *q;           // out (optional): the element values before the multiplication back
    float tensor_scale;
    uint64_t clipped, nan_tiles;
    fmt_stats st;
} ref_result;

// One element through the float64 kernel (fmt_round_f64 of one double, drawing counter
// o->offset + i): no code in common with the float32 paths fmt_quantize_f32 takes. Its counts
// go to st (its amax is of the scaled value, which the recipe does not report: left out).
static float ref_round_element(const fmt_t *elem, double x, size_t i, const fmt_round_opts *o, fmt_stats *st) {
    double d = x;
    fmt_round_opts oi = *o;
    oi.offset = o->offset + i;
    fmt_stats s1 = {0};
    cr_assert_eq(fmt_round_f64(elem, &d, 1, &oi, &s1), FMT_OK);
    st->n += s1.n, st->overflow += s1.overflow, st->underflow += s1.underflow;
    st->subnormal += s1.subnormal, st->nan_in += s1.nan_in, st->invalid += s1.invalid;
    return (float)d;
}

// The needed scale of a tile with amax a > 0 under rule r, from the rules' definitions in double
// (log2 is exact at powers of two and tells a float32 ulp either side of one apart).
static bool ref_pow2_rule(fmt_scale_round r) {
    return r == FMT_SCALE_OCP || r == FMT_SCALE_CEIL || r == FMT_SCALE_EVEN;
}
static double ref_need(const fmt_t *elem, fmt_scale_round r, double a) {
    switch (r) {
    case FMT_SCALE_OCP: return ldexp(1.0, (int)floor(log2(a)) - elem->emax);
    case FMT_SCALE_CEIL: return ldexp(1.0, (int)ceil(log2(a)) - elem->emax);
    case FMT_SCALE_EVEN: {  // a rounded to mbits fraction bits, ties away (round()), then floor
        int e;
        const double m = round(ldexp(frexp(a, &e), elem->mbits + 1));
        return ldexp(1.0, (int)floor(log2(ldexp(m, e - elem->mbits - 1))) - elem->emax);
    }
    case FMT_SCALE_RCEIL: return (float)a / (float)elem->max;
    default: return a / elem->max;
    }
}

static void ref_quantize(const fmt_t *elem, const fmt_scaling *sc, float *out, const float *in,
                         size_t rows, size_t cols, const fmt_round_opts *o, ref_result *res) {
    memset(&res->st, 0, sizeof res->st);
    res->clipped = 0, res->nan_tiles = 0, res->tensor_scale = 1.0f;
    size_t tr = sc->tile_rows ? (size_t)sc->tile_rows : rows, tc = sc->tile_cols ? (size_t)sc->tile_cols : cols;
    size_t ntr = (rows + tr - 1) / tr, ntc = (cols + tc - 1) / tc;
    const fmt_t *sf = &sc->scale_fmt;
    double A = 0;
    bool A_nonfinite = false;
    for (size_t i = 0; i < rows * cols; i++) {
        if (!isfinite(in[i])) A_nonfinite = true;
        if (!isnan(in[i])) res->st.amax = fmax(res->st.amax, fabs(in[i]));
        if (isfinite(in[i])) A = fmax(A, fabs(in[i]));
    }
    float s_enc = 1.0f;
    if (sc->tensor_scale && !A_nonfinite && A > 0) {
        s_enc = (float)(sf->max * elem->max) / (float)A;
        if (s_enc > FLT_MAX) s_enc = FLT_MAX;
    }
    res->tensor_scale = 1.0f / s_enc;
    const double lo = fmax(sf->min_subnormal, 0x1p-127), hi = sf->max;
    float *deqs = malloc(rows * cols * sizeof *deqs);
    // Exact quotients (the default wherever a scale need not be a power of two): the element is
    // round(x / deq), from the float64 quotient, which decides every mode exactly for float32 x
    // and deq (scale.c says why; test_scale's exact_quotients checks it against rationals).
    const bool exact = !sc->none && !sc->recip &&
                       (sc->tensor_scale || (sf->mbits > 0 && !ref_pow2_rule(sc->scale_round)));
    double *zq = malloc(rows * cols * sizeof *zq);
    fmt_round_opts so = {0};
    so.overflow = FMT_SATURATE;
    so.mode = sc->scale_round == FMT_SCALE_UP || sc->scale_round == FMT_SCALE_RCEIL ? FMT_RUP : FMT_RNE;
    if (sc->none) ntr = ntc = 0;  // no scale: out = round(in)
    for (size_t i = 0; i < rows * cols; i++) out[i] = in[i], deqs[i] = 1.0f;
    for (size_t bi = 0; bi < ntr; bi++)
        for (size_t bj = 0; bj < ntc; bj++) {
            const size_t r0 = bi * tr, r1 = r0 + tr < rows ? r0 + tr : rows;
            const size_t c0 = bj * tc, c1 = c0 + tc < cols ? c0 + tc : cols;
            double a = 0;
            bool nonfinite = false;
            for (size_t r = r0; r < r1; r++)
                for (size_t c = c0; c < c1; c++) {
                    float v = in[r * cols + c];
                    if (!isfinite(v)) nonfinite = true;
                    else a = fmax(a, fabs(v));
                }
            float mul, deq, reported;
            if (sc->tensor_scale) {
                float sfv;
                if (nonfinite) sfv = sc->nan_block ? NAN : 1.0f;
                else {
                    const float t = (float)a / (float)elem->max * s_enc;
                    double need = t;
                    if (ref_pow2_rule(sc->scale_round) && a > 0) need = ref_need(elem, sc->scale_round, a * (double)s_enc);
                    if (need > hi) sfv = (float)hi, res->clipped++;
                    else {
                        sfv = (float)fmt_round1(sf, need, &so);
                        if ((so.mode == FMT_RUP && sfv < need) || (a > 0 && sfv == 0)) res->clipped++;
                    }
                }
                reported = sfv;
                mul = sfv == 0 ? 0.0f : s_enc / sfv;
                if (mul > FLT_MAX) mul = FLT_MAX;
                deq = sfv == 0 ? 0.0f : sfv / s_enc;
            } else {
                double s = nonfinite && sc->nan_block ? NAN : 1;
                if (a > 0 && !nonfinite) {
                    const double need = ref_need(elem, sc->scale_round, a);
                    if (need > hi) s = hi, res->clipped++;
                    else if (need < lo) s = lo, res->clipped++;
                    else {
                        s = fmt_round1(sf, need, &so);
                        if (so.mode == FMT_RUP && s < need) res->clipped++;
                    }
                }
                reported = (float)s, deq = (float)s, mul = 1.0f / (float)s;
            }
            res->scales[bi * ntc + bj] = reported;
            res->nan_tiles += nonfinite && sc->nan_block;
            for (size_t r = r0; r < r1; r++)
                for (size_t c = c0; c < c1; c++) {
                    const size_t i = r * cols + c;
                    out[i] = in[i] * mul;
                    zq[i] = exact && deq != 0 ? (double)in[i] / deq : (double)out[i];
                    if (mul == 0 && in[i] != 0) res->st.underflow++;
                    deqs[i] = deq;
                }
        }
    // One rounding call over the whole scaled tensor: element i draws o->offset + i by
    // fmt_round_f32's own contract, independently of how the library splits the work; or
    // (per_element) each element through the float64 kernel on its own.
    if (sc->none || !exact) {
        for (size_t i = 0; i < rows * cols; i++) zq[i] = out[i];
    }
    // Stochastic rounding into a format of up to 22 bits draws against the quotient rounded to
    // odd in float32 (truncated with nextafterf, the last bit set where inexact).
    const bool sr_f32 = exact && o->mode == FMT_SR && elem->mbits <= 21 && elem->min_subnormal >= 0x1p-147;
    if (sr_f32)
        for (size_t i = 0; i < rows * cols; i++) {
            float y = (float)zq[i];
            if (!isnan(zq[i]) && (double)y != zq[i]) {
                if (fabs((double)y) > fabs(zq[i])) y = nextafterf(y, 0.0f);
                uint32_t u;
                memcpy(&u, &y, 4);
                u |= 1;
                memcpy(&y, &u, 4);
            }
            out[i] = y;
        }
    if (exact && !sr_f32) {
        for (size_t i = 0; i < rows * cols; i++) out[i] = ref_round_element(elem, zq[i], i, o, &res->st);
    } else if (res->per_element) {
        for (size_t i = 0; i < rows * cols; i++) out[i] = ref_round_element(elem, out[i], i, o, &res->st);
    } else {
        fmt_stats st = {0};
        fmt_round_f32(elem, out, rows * cols, o, &st);
        res->st.n += st.n, res->st.overflow += st.overflow, res->st.underflow += st.underflow;
        res->st.subnormal += st.subnormal, res->st.nan_in += st.nan_in, res->st.invalid += st.invalid;
    }
    if (res->q) memcpy(res->q, out, rows * cols * sizeof *out);
    for (size_t i = 0; i < rows * cols; i++) {
        const bool finite = isfinite(out[i]);
        out[i] *= deqs[i];
        res->st.overflow += finite && isinf(out[i]);  // the dequantization overflowed float32
    }
    free(deqs), free(zq);
}

// Library vs reference on one tensor: values, element values (info.elems), scales, tensor
// scale, clipped and NaN-scale counts, statistics. per_element: see ref_result. in_place: the
// library quantizes a copy of in in place (out == in).
static void check_ref(const fmt_t *elem, const char *spec, const float *in, size_t rows, size_t cols,
                      const fmt_round_opts *o, bool per_element, bool in_place) {
    const fmt_scaling sc = tu_scaling(spec);
    const size_t n = rows * cols, ns = fmt_scale_count(&sc, rows, cols);
    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    float *gq = malloc(n * sizeof *gq), *wq = malloc(n * sizeof *wq);
    float *gs = malloc((ns + 1) * sizeof *gs), *ws = malloc((ns + 1) * sizeof *ws);
    fmt_stats st = {0};
    fmt_quant_info info = {.scales = gs, .elems = gq};
    if (in_place) memcpy(got, in, n * sizeof *got);
    cr_assert_eq(fmt_quantize_f32(elem, &sc, got, in_place ? got : in, rows, cols, o, &st, &info), FMT_OK);
    ref_result ref = {.per_element = per_element, .scales = ws, .q = wq};
    ref_quantize(elem, &sc, want, in, rows, cols, o, &ref);
    const char *mn = fmt_mode_name(o->mode);
    for (size_t t = 0; t < ns; t++)
        cr_assert(tu_samef(gs[t], ws[t]), "%s %s %s: scale %zu is %a, want %a", elem->name, spec, mn, t,
                  gs[t], ws[t]);
    for (size_t i = 0; i < n; i++) {
        cr_assert(tu_samef(got[i], want[i]), "%s %s %s %s: element (%zu,%zu) in %a: got %a want %a",
                  elem->name, spec, mn, fmt_overflow_name(o->overflow), i / cols, i % cols, in[i], got[i],
                  want[i]);
        cr_assert(tu_samef(gq[i], wq[i]), "%s %s %s: element value (%zu,%zu) in %a: got %a want %a",
                  elem->name, spec, mn, i / cols, i % cols, in[i], gq[i], wq[i]);
    }
    cr_assert_eq(info.scales_nan, ref.nan_tiles, "%s %s: NaN scales %" PRIu64 " want %" PRIu64, elem->name,
                 spec, info.scales_nan, ref.nan_tiles);
    cr_assert(tu_samef(info.tensor_scale, ref.tensor_scale), "%s %s: tensor scale %a want %a", elem->name,
              spec, info.tensor_scale, ref.tensor_scale);
    cr_assert_eq(info.scales_clipped, ref.clipped, "%s %s %s: clipped %" PRIu64 " want %" PRIu64,
                 elem->name, spec, mn, info.scales_clipped, ref.clipped);
    cr_assert_eq(st.n, ref.st.n);
    cr_assert_eq(st.overflow, ref.st.overflow, "%s %s %s: overflow %" PRIu64 " want %" PRIu64,
                 elem->name, spec, mn, st.overflow, ref.st.overflow);
    cr_assert_eq(st.underflow, ref.st.underflow, "%s %s %s: underflow %" PRIu64 " want %" PRIu64,
                 elem->name, spec, mn, st.underflow, ref.st.underflow);
    cr_assert_eq(st.subnormal, ref.st.subnormal, "%s %s %s: subnormal", elem->name, spec, mn);
    cr_assert_eq(st.nan_in, ref.st.nan_in);
    cr_assert_eq(st.invalid, ref.st.invalid);
    cr_assert_eq(st.amax, ref.st.amax, "%s %s: amax %a want %a", elem->name, spec, st.amax, ref.st.amax);
    free(got), free(want), free(gq), free(wq), free(gs), free(ws);
}

static void check_against_ref(const fmt_t *elem, const char *spec, const float *in, size_t rows,
                              size_t cols, const fmt_round_opts *o) {
    check_ref(elem, spec, in, rows, cols, o, false, false);
}

// Quantize one row of values with a recipe; returns outputs in out and the scales in scales.
static void quant(const char *elem, const char *spec, float *out, const float *in, size_t rows,
                  size_t cols, fmt_round_opts o, fmt_stats *st, fmt_quant_info *info) {
    fmt_t e = tu_fmt(elem);
    fmt_scaling sc = tu_scaling(spec);
    cr_assert_eq(fmt_quantize_f32(&e, &sc, out, in, rows, cols, &o, st, info), FMT_OK);
}

// --- hand-built blocks

// e4m3 (max 448, emax 8), one MX block of 32 with amax 500.
//   OCP: floor(log2 500) = 8, 8 - 8 = 0: scale 1; 500 saturates to 448.
//   UP:  500/448 = 1.116 rounded up in e8m0: 2; 500/2 = 250 -> e4m3 256 (grid 240, 256) -> 512.
//   RNE: 1.116 to nearest e8m0: 1, as OCP.
Test(scale, mx_e4m3_ocp_up_rne_amax_500) {
    float in[32] = {500, -3, 0.5f, 100};
    for (int i = 4; i < 32; i++) in[i] = 1.0f / (float)i;
    const fmt_round_opts o = opts(FMT_RNE, FMT_SATURATE);
    float out[32], s;
    fmt_stats st = {0};
    fmt_quant_info info = {.scales = &s};
    quant("e4m3", "mx", out, in, 1, 32, o, &st, &info);
    cr_assert_eq(s, 1.0f);
    cr_assert_eq(out[0], 448.0f);
    cr_assert_eq(out[1], -3.0f);
    cr_assert_eq(st.overflow, 1);
    quant("e4m3", "block:32:e8m0:rne", out, in, 1, 32, o, NULL, &info);
    cr_assert_eq(s, 1.0f);
    cr_assert_eq(out[0], 448.0f);
    memset(&st, 0, sizeof st);
    quant("e4m3", "mx:up", out, in, 1, 32, o, &st, &info);
    cr_assert_eq(s, 2.0f);
    cr_assert_eq(out[0], 512.0f);
    cr_assert_eq(out[1], -3.0f);  // -1.5 is an e4m3 value
    cr_assert_eq(st.overflow, 0);
    cr_assert_eq(info.scales_clipped, 0);
}

// e2m1 (max 6, emax 2), MX blocks: amax 7 OCP: floor(log2 7) = 2, scale 1, 7 -> 6 (e2m1 has no
// inf, so even the IEEE policy gives max); UP: 7/6 -> 2, 7/2 = 3.5 -> 4 (tie to even) -> 8.
Test(scale, mx_e2m1_ocp_vs_up) {
    float in[32] = {7, 1.25f, -0.2f};
    float out[32], s;
    fmt_quant_info info = {.scales = &s};
    quant("e2m1", "mx", out, in, 1, 32, opts(FMT_RNE, FMT_OVERFLOW_IEEE), NULL, &info);
    cr_assert_eq(s, 1.0f);
    cr_assert_eq(out[0], 6.0f);
    cr_assert_eq(out[1], 1.0f);   // 1.25 is the tie of 1 and 1.5: even is 1
    cr_assert_eq(out[2], -0.0f);  // below 0.25: to zero, sign kept
    cr_assert(signbit(out[2]));
    quant("e2m1", "mx:up", out, in, 1, 32, opts(FMT_RNE, FMT_OVERFLOW_IEEE), NULL, &info);
    cr_assert_eq(s, 2.0f);
    cr_assert_eq(out[0], 8.0f);
    cr_assert_eq(out[1], 1.0f);   // 0.625 -> 0.5 -> 1
    cr_assert_eq(out[2], -0.0f);  // -0.1 -> -0
}

// amax exactly max_elem * 2^k: every rule gives 2^k and the amax is kept exactly.
Test(scale, amax_is_max_times_power_of_two) {
    const char *specs[] = {"mx", "mx:up", "mx:rne", "block:32:fp32", "block:32:e4m3:rne",
                           "block:32:bf16:up"};
    struct { const char *elem; float amax, scale; } cases[] = {
        {"e4m3", 448 * 4, 4}, {"e4m3", 448.0f / 256, 1.0f / 256}, {"e2m1", 12, 2},
        {"e5m2", 57344.0f / 8, 0.125f}, {"e2m3", 7.5f * 16, 16}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t j = 0; j < sizeof specs / sizeof specs[0]; j++) {
            float in[32], out[32], s;
            for (int i = 0; i < 32; i++) in[i] = cases[k].amax / (float)(1 << (i % 3));
            in[7] = -cases[k].amax;
            fmt_stats st = {0};
            fmt_quant_info info = {.scales = &s};
            quant(cases[k].elem, specs[j], out, in, 1, 32, opts(FMT_RNE, FMT_OVERFLOW_IEEE), &st, &info);
            cr_assert_eq(s, cases[k].scale, "%s %s: scale %a want %a", cases[k].elem, specs[j], s,
                         cases[k].scale);
            for (int i = 0; i < 32; i++) cr_assert_eq(out[i], in[i], "%s %s [%d]", cases[k].elem, specs[j], i);
            cr_assert_eq(st.overflow, 0);
        }
}

// cols = 100 with k = 32: four blocks per row, the last of 4 elements, with a scale of its own.
Test(scale, ragged_blocks) {
    const size_t rows = 3, cols = 100;
    float in[300], out[300], s[12];
    for (size_t i = 0; i < 300; i++) in[i] = 0.25f;
    for (size_t r = 0; r < rows; r++) {
        in[r * cols + 97] = 3.0f * (float)(r + 1);  // last block: amax 3, 6, 9
        in[r * cols + 5] = 100.0f;                  // first block: amax 100
    }
    fmt_scaling sc = tu_scaling("block:32:e8m0");
    cr_assert_eq(fmt_scale_count(&sc, rows, cols), 12);
    fmt_quant_info info = {.scales = s};
    quant("e2m1", "block:32:e8m0", out, in, rows, cols, opts(FMT_RNE, FMT_SATURATE), NULL, &info);
    // e2m1 emax 2: OCP scale 2^(floor(log2 amax) - 2).
    for (size_t r = 0; r < rows; r++) {
        cr_assert_eq(s[r * 4 + 0], 16.0f);  // floor(log2 100) = 6
        cr_assert_eq(s[r * 4 + 1], 0.0625f);  // 0.25: -2 - 2
        cr_assert_eq(s[r * 4 + 2], 0.0625f);
        const float want = r == 0 ? 0.5f : r == 1 ? 1.0f : 2.0f;  // 3, 6, 9: floor(log2) = 1, 2, 3
        cr_assert_eq(s[r * 4 + 3], want, "row %zu: %a", r, s[r * 4 + 3]);
        cr_assert_eq(out[r * cols + 97], r == 2 ? 8.0f : 3.0f * (float)(r + 1));  // 9/2 = 4.5 -> 4
        cr_assert_eq(out[r * cols + 96], r == 0 ? 0.25f : 0.0f);  // 0.5 exact; 0.25 ties to 0; 0.125
        cr_assert_eq(out[r * cols + 5], 96.0f);   // 100/16 = 6.25 -> 6
        cr_assert_eq(out[r * cols + 6], 0.0f);    // 0.25/16 < 0.25: zero
    }
}

// Per-tensor, per-row and per-column with fp32 scales: the scale is amax / max_elem in fp32.
Test(scale, tensor_row_col_fp32_scales) {
    const size_t rows = 4, cols = 6;
    float in[24], out[24], s[8];
    for (size_t i = 0; i < 24; i++) in[i] = (float)(i % 7) - 2.5f;
    in[1 * cols + 2] = 30.0f, in[3 * cols + 5] = -90.0f;
    const fmt_t e = tu_fmt("e4m3");
    fmt_quant_info info = {.scales = s};
    quant("e4m3", "tensor", out, in, rows, cols, opts(FMT_RNE, FMT_SATURATE), NULL, &info);
    cr_assert_eq(fmt_scale_count(&(fmt_scaling){.tile_rows = 0, .tile_cols = 0}, rows, cols), 1);
    cr_assert_eq(s[0], (float)(90.0 / 448.0));
    quant("e4m3", "row", out, in, rows, cols, opts(FMT_RNE, FMT_SATURATE), NULL, &info);
    for (size_t r = 0; r < rows; r++) {
        double a = 0;
        for (size_t c = 0; c < cols; c++) a = fmax(a, fabs(in[r * cols + c]));
        cr_assert_eq(s[r], (float)(a / e.max), "row %zu", r);
        // The row's amax element comes back within e4m3's half-ulp (2^-4 relative).
        for (size_t c = 0; c < cols; c++)
            if (fabs(in[r * cols + c]) == a) cr_assert_leq(fabs(out[r * cols + c] - in[r * cols + c]), a / 16);
    }
    quant("e4m3", "col", out, in, rows, cols, opts(FMT_RNE, FMT_SATURATE), NULL, &info);
    for (size_t c = 0; c < cols; c++) {
        double a = 0;
        for (size_t r = 0; r < rows; r++) a = fmax(a, fabs(in[r * cols + c]));
        cr_assert_eq(s[c], (float)(a / e.max), "col %zu", c);
    }
    float s_up;
    info.scales = &s_up;
    quant("e4m3", "tensor:up", out, in, rows, cols, opts(FMT_RNE, FMT_SATURATE), NULL, &info);
    float want_up = (float)(90.0 / 448.0);
    if ((double)want_up < 90.0 / 448.0) want_up = nextafterf(want_up, INFINITY);
    cr_assert_eq(s_up, want_up);
}

// NVFP4 by hand: A = 6, s_enc = 2688/6 = 448. Block 0 (amax 6): sf = 448, multiplier 1.
// Block 1 (amax 0.75): sf = 0.75/6*448 = 56 (an e4m3 value), q = x * 448/56 = 8x, out = q/8.
Test(scale, nvfp4_by_hand) {
    float in[48] = {0}, out[48], s[3];
    in[0] = 6, in[1] = -3, in[2] = 1.4f, in[3] = 0.2f;
    in[16] = 0.75f, in[17] = 0.3f, in[18] = -0.1f, in[19] = 0.05f;
    for (int i = 32; i < 48; i++) in[i] = -0.0f;  // block 2: all zero, sf = 0
    fmt_stats st = {0};
    fmt_quant_info info = {.scales = s};
    quant("e2m1", "nvfp4", out, in, 1, 48, opts(FMT_RNE, FMT_SATURATE), &st, &info);
    cr_assert_eq(info.tensor_scale, 1.0f / 448.0f);
    cr_assert_eq(s[0], 448.0f);
    cr_assert_eq(s[1], 56.0f);
    cr_assert_eq(s[2], 0.0f);
    cr_assert_eq(info.scales_clipped, 0);
    cr_assert_eq(out[0], 6.0f);
    cr_assert_eq(out[1], -3.0f);
    cr_assert_eq(out[2], 1.5f);
    cr_assert_eq(out[3], 0.0f);    // 0.2 < 0.25
    cr_assert_eq(out[16], 0.75f);  // 6 * 0.125
    cr_assert_eq(out[17], 0.25f);  // 2.4 -> 2
    cr_assert_eq(out[18], -0.125f);   // -0.8 -> -1 (grid 0.5, 1)
    cr_assert_eq(out[19], 0.0625f);   // 0.4 -> 0.5
    for (int i = 32; i < 48; i++) cr_assert(out[i] == 0.0f && signbit(out[i]), "[%d] %a", i, out[i]);
    cr_assert_eq(st.amax, 6.0);
}

// Empty, infinite and NaN tiles get scale 1: zeros keep their sign, non-finite values meet the
// element format's own rules and are counted. MX e4m3, blocks of 32:
//   block 0: zeros;  block 1: inf, 3, 1000;  block 2: NaN, 2, 1e6, 0.01 (an e4m3 subnormal).
// IEEE policy: inf, 1000 and 1e6 become NaN (e4m3 has no inf): 3 overflows; saturate: 448.
Test(scale, zero_inf_nan_tiles_and_stats) {
    float in[96] = {0}, out[96], s[3];
    for (int i = 0; i < 32; i += 2) in[i] = -0.0f;
    in[32] = INFINITY, in[33] = 3, in[34] = 1000;
    in[64] = NAN, in[65] = 2, in[66] = 1e6f, in[67] = 0.01f, in[68] = 1e-6f;
    fmt_stats st = {0};
    fmt_quant_info info = {.scales = s};
    quant("e4m3", "mx", out, in, 1, 96, opts(FMT_RNE, FMT_OVERFLOW_IEEE), &st, &info);
    cr_assert(s[0] == 1 && s[1] == 1 && s[2] == 1, "%a %a %a", s[0], s[1], s[2]);
    for (int i = 0; i < 32; i++) cr_assert(tu_samef(out[i], in[i]), "[%d]", i);
    cr_assert(isnan(out[32]) && out[33] == 3 && isnan(out[34]));
    cr_assert(isnan(out[64]) && out[65] == 2 && isnan(out[66]));
    cr_assert_eq(out[67], 0x5p-9f);  // 0.01 = 5.12 * 2^-9 -> 5 * 2^-9
    cr_assert_eq(out[68], 0.0f);
    cr_assert_eq(st.n, 96);
    cr_assert_eq(st.overflow, 3);
    cr_assert_eq(st.nan_in, 1);
    cr_assert_eq(st.underflow, 1);
    cr_assert_eq(st.subnormal, 1);
    cr_assert_eq(st.amax, INFINITY);
    cr_assert_eq(info.scales_clipped, 0);
    quant("e4m3", "mx", out, in, 1, 96, opts(FMT_RNE, FMT_SATURATE), NULL, &info);
    cr_assert(out[32] == 448 && out[34] == 448 && out[66] == 448 && isnan(out[64]));
    // e5m2 keeps inf under the IEEE policy (not an overflow); 1e6 overflows to inf.
    memset(&st, 0, sizeof st);
    quant("e5m2", "mx", out, in, 1, 96, opts(FMT_RNE, FMT_OVERFLOW_IEEE), &st, &info);
    cr_assert(out[32] == INFINITY && out[66] == INFINITY && out[34] == 1024);
    cr_assert_eq(st.overflow, 1);
    // NVFP4 with a non-finite tensor amax: s_enc = 1, the inf/NaN blocks get sf = 1, block 0 sf 0.
    float s4[6];
    info.scales = s4;
    quant("e2m1", "nvfp4", out, in, 1, 96, opts(FMT_RNE, FMT_SATURATE), NULL, &info);
    cr_assert_eq(info.tensor_scale, 1.0f);
    cr_assert(s4[0] == 0 && s4[1] == 0 && s4[2] == 1 && s4[4] == 1, "%a %a %a %a", s4[0], s4[1], s4[2], s4[4]);
    cr_assert(out[32] == 6 && out[33] == 3 && out[34] == 6 && isnan(out[64]) == 0);  // e2m1: NaN -> -0
}

// Block-scaled recipes saturate by default (OCP MX v1.0 section 6.3: scaled normal numbers above
// the element's max are clamped to it, keeping the sign). [500, 1, ...] under MX e4m3 gets scale 1
// and 500 > 464 (e4m3's overflow threshold): 448, not NaN; e5m2 130000 gets scale 2 and
// 65000 > 61440: 57344 * 2, not inf. With NULL options, every recipe with a scale saturates; the
// plain cast ("none") keeps IEEE overflow, as ml_dtypes does.
Test(scale, scaled_recipes_saturate_by_default) {
    float in[32], out[32];
    for (int i = 0; i < 32; i++) in[i] = 1;
    in[0] = 500;
    const fmt_t e4 = tu_fmt("e4m3"), e5 = tu_fmt("e5m2");
    static const char *const specs[] = {"mx", "mx:rne", "block:32:e8m0", "tile:1x32:e8m0", "tensor:ocp",
                                        "block:16:e8m0:ocp", "row:ocp"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        const fmt_scaling sc = tu_scaling(specs[k]);
        fmt_stats st = {0};
        cr_assert_eq(fmt_quantize_f32(&e4, &sc, out, in, 1, 32, NULL, &st, NULL), FMT_OK);
        cr_assert_eq(out[0], 448.0f, "%s: e4m3 500 -> %g, expected 448 (saturated)", specs[k], out[0]);
        cr_assert_eq(st.overflow, 1, "%s", specs[k]);
    }
    in[0] = 130000;
    const fmt_scaling mx = tu_scaling("mx");
    cr_assert_eq(fmt_quantize_f32(&e5, &mx, out, in, 1, 32, NULL, NULL, NULL), FMT_OK);
    cr_assert_eq(out[0], 114688.0f, "e5m2 130000 -> %g, expected 57344 * 2", out[0]);
    // An explicit IEEE policy is honoured (what ml_dtypes' cast of the scaled block gives).
    const fmt_round_opts ieee = opts(FMT_RNE, FMT_OVERFLOW_IEEE);
    cr_assert_eq(fmt_quantize_f32(&e5, &mx, out, in, 1, 32, &ieee, NULL, NULL), FMT_OK);
    cr_assert_eq(out[0], INFINITY);
    // No recipe: a plain cast, IEEE by default (e4m3 has no inf: NaN).
    in[0] = 500;
    const fmt_scaling none = tu_scaling("none");
    cr_assert_eq(fmt_quantize_f32(&e4, &none, out, in, 1, 32, NULL, NULL, NULL), FMT_OK);
    cr_assert(isnan(out[0]), "none: %g", out[0]);
    // Random blocks under every block recipe with NULL options: never a NaN or an inf.
    uint64_t seed = test_seed("scaled_recipes_saturate_by_default");
    float *x = random_tensor(16, 96, &seed, 20, 20), *y = malloc(16 * 96 * sizeof *y);
    static const char *const all[] = {"mx", "mx:up", "mx:rne", "nvfp4", "nvfp4:ocp", "block:16:e4m3",
                                      "tile:4x8:e8m0", "tile:16x16:e4m3:ocp", "tensor:ocp", "col:ocp"};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        for (int f = 0; f < 2; f++) {
            const fmt_scaling sc = tu_scaling(all[k]);
            cr_assert_eq(fmt_quantize_f32(f ? &e5 : &e4, &sc, y, x, 16, 96, NULL, NULL, NULL), FMT_OK);
            for (size_t i = 0; i < 16 * 96; i++)
                cr_assert(isfinite(y[i]), "%s %s: element %zu %a -> %a", f ? "e5m2" : "e4m3", all[k], i, x[i], y[i]);
        }
    free(x), free(y);
}

// The default options of a recipe: saturating when it has a scale, IEEE for a plain cast.
Test(scale, default_opts) {
    static const char *const scaled[] = {"mx", "nvfp4", "tensor", "row", "col", "block:16:e4m3",
                                         "tile:128x128:fp32", "mx:nanblock"};
    for (size_t k = 0; k < sizeof scaled / sizeof scaled[0]; k++) {
        const fmt_scaling sc = tu_scaling(scaled[k]);
        const fmt_round_opts o = fmt_scaling_default_opts(&sc);
        cr_assert(o.mode == FMT_RNE && o.overflow == FMT_SATURATE && !o.flush_subnormals && o.sr_bits == 0 &&
                      o.seed == 0 && o.stream == 0 && o.offset == 0, "%s", scaled[k]);
    }
    const fmt_scaling none = tu_scaling("none");
    const fmt_round_opts o = fmt_scaling_default_opts(&none);  // a zero-initialised fmt_round_opts
    cr_assert(o.mode == FMT_RNE && o.overflow == FMT_OVERFLOW_IEEE && !o.flush_subnormals && o.sr_bits == 0 &&
              o.seed == 0 && o.stream == 0 && o.offset == 0, "none");
}

// :nanblock (microxcaling's and torchao's rule): a tile whose amax is inf or NaN gets the scale
// NaN and all its elements become NaN; without it (fplab's rule) the tile keeps scale 1 and
// each element meets the element format's own rules. Same 96 values as above.
Test(scale, nanblock_tiles) {
    float in[96] = {0}, out[96], q[96], s[6];
    for (int i = 0; i < 32; i += 2) in[i] = -0.0f;
    in[32] = INFINITY, in[33] = 3, in[34] = 1000;
    in[64] = NAN, in[65] = 2, in[66] = 1e6f, in[67] = 0.01f, in[68] = 1e-6f;
    fmt_stats st = {0};
    fmt_quant_info info = {.scales = s, .elems = q};
    const fmt_t e4 = tu_fmt("e4m3"), e2 = tu_fmt("e2m1");
    fmt_scaling sc = tu_scaling("mx:nanblock");
    cr_assert(sc.nan_block);
    cr_assert_eq(fmt_quantize_f32(&e4, &sc, out, in, 1, 96, NULL, &st, &info), FMT_OK);
    cr_assert(s[0] == 1 && isnan(s[1]) && isnan(s[2]), "%a %a %a", s[0], s[1], s[2]);
    for (int i = 0; i < 32; i++) cr_assert(tu_samef(out[i], in[i]), "[%d]", i);
    for (int i = 32; i < 96; i++) cr_assert(isnan(out[i]) && isnan(q[i]), "[%d] %g %g", i, out[i], q[i]);
    cr_assert_eq(info.scales_nan, 2);
    cr_assert_eq(st.nan_in, 64);   // every element of the two tiles became NaN before rounding
    cr_assert_eq(st.overflow, 0);
    cr_assert_eq(st.amax, INFINITY);
    // fplab's rule, default options (saturating): scale 1, 3 stays 3, inf and 1000 become 448.
    sc = tu_scaling("mx");
    memset(&st, 0, sizeof st);
    cr_assert_eq(fmt_quantize_f32(&e4, &sc, out, in, 1, 96, NULL, &st, &info), FMT_OK);
    cr_assert(s[1] == 1 && s[2] == 1);
    cr_assert(out[32] == 448 && out[33] == 3 && out[34] == 448 && isnan(out[64]) && out[65] == 2);
    cr_assert_eq(info.scales_nan, 0);
    cr_assert_eq(st.nan_in, 1);
    // Elements without NaN (e2m1): q is their rounding of NaN (-0), the value is still NaN.
    sc = tu_scaling("mx:nanblock");
    cr_assert_eq(fmt_quantize_f32(&e2, &sc, out, in, 1, 96, NULL, NULL, &info), FMT_OK);
    for (int i = 32; i < 96; i++) cr_assert(isnan(out[i]) && q[i] == 0 && signbit(q[i]), "[%d] %g", i, q[i]);
    // NVFP4: blocks of 16 under a tensor scale (s_enc = 1 for a non-finite tensor amax).
    sc = tu_scaling("nvfp4:nanblock");
    info.elems = NULL;
    cr_assert_eq(fmt_quantize_f32(&e2, &sc, out, in, 1, 96, NULL, NULL, &info), FMT_OK);
    cr_assert_eq(info.tensor_scale, 1.0f);
    cr_assert(s[0] == 0 && s[1] == 0 && isnan(s[2]) && s[3] == 0 && isnan(s[4]) && s[5] == 0);
    for (int i = 0; i < 96; i++)
        cr_assert(((i >= 32 && i < 48) || (i >= 64 && i < 80)) ? isnan(out[i]) : out[i] == 0, "[%d] %g", i, out[i]);
    cr_assert_eq(info.scales_nan, 2);
    // A finite tensor: nanblock changes nothing.
    float fin[64], a[64], b[64];
    for (int i = 0; i < 64; i++) fin[i] = (float)(i - 20) * 0.37f;
    const fmt_scaling plain = tu_scaling("mx"), nb = tu_scaling("mx:nanblock");
    cr_assert_eq(fmt_quantize_f32(&e4, &plain, a, fin, 2, 32, NULL, NULL, NULL), FMT_OK);
    cr_assert_eq(fmt_quantize_f32(&e4, &nb, b, fin, 2, 32, NULL, NULL, NULL), FMT_OK);
    cr_assert(!memcmp(a, b, sizeof a));
}

// Scales the scale format cannot hold are clamped to its range and counted.
Test(scale, clipped_scales) {
    // e8m0 bottom: amax 2^-149 needs 2^-157 (OCP) or 2^-149/448 (UP): both clamp to 2^-127.
    float in[32] = {0x1p-149f}, out[32], s;
    fmt_stats st = {0};
    fmt_quant_info info = {.scales = &s};
    quant("e4m3", "mx", out, in, 1, 32, opts(FMT_RNE, FMT_SATURATE), &st, &info);
    cr_assert_eq(s, 0x1p-127f);
    cr_assert_eq(info.scales_clipped, 1);
    cr_assert_eq(out[0], 0.0f);  // 2^-149 * 2^127 = 2^-22: below e4m3's 2^-10 half-subnormal
    cr_assert_eq(st.underflow, 1);
    quant("e4m3", "mx:up", out, in, 1, 32, opts(FMT_RNE, FMT_SATURATE), NULL, &info);
    cr_assert_eq(s, 0x1p-127f);
    cr_assert_eq(info.scales_clipped, 1);
    // e3m2 scales (max 28, smallest 2^-4): amax 1e6 needs 2232 -> 28; amax 1e-3 needs 2.2e-6 -> 1/16.
    float in2[64] = {1e6f, 5000.0f}, out2[64], s2[2];
    in2[32] = 1e-3f;
    info.scales = s2;
    quant("e4m3", "block:32:e3m2", out2, in2, 1, 64, opts(FMT_RNE, FMT_SATURATE), NULL, &info);
    cr_assert_eq(s2[0], 28.0f);
    cr_assert_eq(s2[1], 0.0625f);
    cr_assert_eq(info.scales_clipped, 2);
    cr_assert_eq(out2[0], 448.0f * 28);   // 1e6/28 saturates
    cr_assert_eq(out2[1], 176.0f * 28);   // 5000/28 = 178.6 -> 176 (grid 16 in [128, 256))
    cr_assert_eq(out2[32], 0x1p-10f);     // 0.016 = 8.19 * 2^-9 -> 2^-6, times 1/16
    // NVFP4: a nonzero block too small for e4m3 next to a big one gets sf = 0 and becomes zero.
    float in3[32] = {6, 1}, out3[32], s3[2];
    in3[16] = 1e-6f, in3[17] = -2e-6f;
    fmt_stats st3 = {0};
    info.scales = s3;
    quant("e2m1", "nvfp4", out3, in3, 1, 32, opts(FMT_RNE, FMT_SATURATE), &st3, &info);
    cr_assert_eq(s3[1], 0.0f);
    cr_assert_eq(info.scales_clipped, 1);
    cr_assert(out3[16] == 0 && out3[17] == 0 && signbit(out3[17]));
    cr_assert_eq(st3.underflow, 2);
}

// --- against the slow implementation, every mode

static const char *const ref_specs[] = {
    "mx", "mx:up", "mx:rne", "nvfp4", "nvfp4:up", "nvfp4:ocp", "block:16:e4m3", "block:32:fp32",
    "block:32:bf16:up", "block:7:e3m2", "tensor", "tensor:up", "row", "col", "col:up",
    "tile:16x16:e8m0", "tile:4x8:e8m0:up", "tile:3x5:fp32", "tile:0x9:e4m3:ocp", "block:1:e8m0",
    "mx:nanblock", "nvfp4:nanblock", "tile:4x8:e8m0:up:nanblock", "col:nanblock", "mx:ceil", "mx:even",
    "mx:rceil", "nvfp4:even", "block:16:e4m3:rceil"};
enum { NREF = sizeof ref_specs / sizeof ref_specs[0] };

static void ref_sweep(const char *elem_name, const float *x, size_t rows, size_t cols, bool both_policies) {
    const fmt_t e = tu_fmt(elem_name);
    for (int m = 0; m < FMT_NMODES; m++)
        for (int p = 0; p < (both_policies ? 2 : 1); p++)
            for (size_t k = 0; k < NREF; k++) {
                fmt_round_opts o = opts((fmt_round_mode)m, p ? FMT_OVERFLOW_IEEE : FMT_SATURATE);
                if (m == FMT_SR) o.sr_bits = 8 * (int)(k % 4);  // 0 (= 32), 8, 16, 24
                check_against_ref(&e, ref_specs[k], x, rows, cols, &o);
            }
}

Test(scale, matches_reference_e4m3) {
    uint64_t seed = test_seed("matches_reference_e4m3");
    float *x = random_tensor(21, 70, &seed, 20, 20);
    ref_sweep("e4m3", x, 21, 70, true);
    free(x);
}

Test(scale, matches_reference_e2m1_e5m2_e3m2) {
    uint64_t seed = test_seed("matches_reference_e2m1_e5m2_e3m2") + 1;
    float *x = random_tensor(19, 67, &seed, 12, 12);
    ref_sweep("e2m1", x, 19, 67, false);
    ref_sweep("e5m2", x, 19, 67, false);
    ref_sweep("e3m2", x, 19, 67, false);
    free(x);
}

// The block kernel's quick statistics (wide formats: a vector whose lanes all round to normal
// values at most max counts nothing but its amax): data of a narrow spread, where about half the
// vectors are such (a zero in 1 of 23 elements), with single lanes planted in their own vectors
// that round to a subnormal, to zero from nonzero, to exactly the smallest normal and to max, and
// inf and NaN. A quick check that let any of them through would lose its count.
Test(scale, quick_statistics_planted_lanes) {
    uint64_t seed = test_seed("quick_statistics_planted_lanes") + 5;
    const size_t rows = 40, cols = 128;
    float *x = random_tensor(rows, cols, &seed, 1, 1);  // |x| in [2^-5, 2^5)
    for (size_t i = 0; i < rows * cols; i++) x[i] *= 0x1p-6f;
    for (size_t r = 0; r < rows; r++) x[r * cols + 5] = 8.0f;  // every row's amax and the tensor's
    x[3 * cols + 17] = 8.0f * 0x1p-16f;   // e4m3 tensor and row (scale 56): a subnormal
    x[5 * cols + 33] = 8.0f * 0x1p-21f;   // e4m3: to zero (rne)
    x[7 * cols + 49] = 8.0f * 0x1p-32f;   // e5m2 (scale 7168): a subnormal
    x[9 * cols + 65] = 8.0f * 0x1p-45f;   // e5m2: to zero (rne)
    x[11 * cols + 81] = 8.0f * 0x1p-14f;  // e4m3: just above the smallest normal, 2^-6
    x[13 * cols + 97] = 8.0f * 0x1p-29f;  // e5m2: just above 2^-14
    x[15 * cols + 113] = INFINITY, x[17 * cols + 7] = NAN, x[19 * cols + 23] = -INFINITY;
    const char *specs[] = {"tensor", "row", "col", "mx", "mx:up", "tile:1x128:e8m0:up", "block:32:bf16", "nvfp4"};
    const char *elems[] = {"e4m3", "e5m2", "bf16"};
    for (size_t e = 0; e < 3; e++) {
        const fmt_t f = tu_fmt(elems[e]);
        for (int m = 0; m < FMT_NMODES; m++)
            for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++)
                for (int p = 0; p < 2; p++) {
                    fmt_round_opts o = opts((fmt_round_mode)m, p ? FMT_OVERFLOW_IEEE : FMT_SATURATE);
                    check_against_ref(&f, specs[k], x, rows, cols, &o);
                }
    }
    free(x);
}

// The one-level quotient rules' scales (float32 scales by RNE and UP, RCEIL, e8m0 by UP) on a row
// per amax, over every float32 binade: random significands, exact needs (448 x 2^k: a power of
// two; 7 x 2^k: 2^k / 64), and amaxes whose need lies near float32's smallest normal and its max.
// With a tensor scale too, whose power-of-two needs may lie past float32 (they saturate).
// scale_rules.c rounds most of these needs on a double's bits; the reference, with the float64
// kernel.
Test(scale, quotient_scales_on_every_binade) {
    uint64_t seed = test_seed("quotient_scales_on_every_binade") + 6;
    enum { COLS = 4 };
    float x[3 * 280 * COLS];
    size_t rows = 0;
    for (int k = -149; k <= 127; k++) {
        const float a[3] = {ldexpf(1.0f + (float)tu_sm_unif(&seed), k), ldexpf(448.0f, k - 8), ldexpf(7.0f, k - 2)};
        for (int j = 0; j < 3; j++) {
            if (!(a[j] > 0.0f && a[j] <= FLT_MAX)) continue;
            float *r = x + rows++ * COLS;
            r[0] = a[j], r[1] = -a[j] / 3.0f, r[2] = a[j] * 0.5f, r[3] = -a[j] * 0.75f;
        }
    }
    x[0] = FLT_MAX, x[COLS] = 448.0f * 0x1p-126f, x[2 * COLS] = nextafterf(448.0f * 0x1p-126f, 0.0f);
    const char *specs[] = {"row",       "row:up", "row:rceil", "block:4:e8m0:up", "block:4:e8m0:rceil", "tensor:up",
                           "block:4:fp32:ocp+tensor", "block:4:fp32:ceil+tensor"};
    const fmt_t e4 = tu_fmt("e4m3"), e2 = tu_fmt("e2m1");
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        const fmt_round_opts o = opts(FMT_RNE, FMT_SATURATE);
        check_against_ref(&e4, specs[k], x, rows, COLS, &o);
        check_against_ref(&e2, specs[k], x, rows, COLS, &o);
    }
}

// Extreme inputs: fp32 subnormals to near FLT_MAX (clipped scales, overflowing q*s), inf, NaN.
Test(scale, matches_reference_extremes) {
    uint64_t seed = test_seed("matches_reference_extremes") + 2;
    const size_t rows = 17, cols = 64;
    float *x = random_tensor(rows, cols, &seed, 140, 120);
    const fmt_t e4 = tu_fmt("e4m3"), e2 = tu_fmt("e2m1");
    for (int k = 0; k < 2; k++) {
        for (int m = 0; m < FMT_NMODES; m++)
            for (size_t j = 0; j < NREF; j++) {
                fmt_round_opts o = opts((fmt_round_mode)m, m % 2 ? FMT_OVERFLOW_IEEE : FMT_SATURATE);
                check_against_ref(&e4, ref_specs[j], x, rows, cols, &o);
                check_against_ref(&e2, ref_specs[j], x, rows, cols, &o);
            }
        // second round: with inf and NaN planted in a few tiles
        x[3] = INFINITY, x[5 * cols + 40] = NAN, x[9 * cols + 17] = -INFINITY;
    }
    free(x);
}

// 2-D tiles 16x16 and 128x128 on a 130x70 matrix: ragged in both directions.
Test(scale, tiles_2d_on_130x70) {
    uint64_t seed = test_seed("tiles_2d_on_130x70") + 3;
    const size_t rows = 130, cols = 70;
    float *x = random_tensor(rows, cols, &seed, 16, 16);
    cr_assert_eq(fmt_scale_count(&(fmt_scaling){.tile_rows = 16, .tile_cols = 16}, rows, cols), 9 * 5);
    cr_assert_eq(fmt_scale_count(&(fmt_scaling){.tile_rows = 128, .tile_cols = 128}, rows, cols), 2);
    const char *specs[] = {"tile:16x16:e8m0", "tile:128x128:e8m0", "tile:16x16:fp32", "tile:128x128:bf16:up"};
    const fmt_t e = tu_fmt("e4m3");
    for (size_t k = 0; k < 4; k++)
        for (int m = 0; m < FMT_NMODES; m += 3) {  // rne, rup, sr
            fmt_round_opts o = opts((fmt_round_mode)m, FMT_SATURATE);
            check_against_ref(&e, specs[k], x, rows, cols, &o);
        }
    free(x);
}

// A tensor big enough for the parallel path: chunks of the flat array cut rows and tiles anywhere.
Test(scale, matches_reference_parallel_path) {
    uint64_t seed = test_seed("matches_reference_parallel_path") + 9;
    const size_t rows = 301, cols = 700;
    float *x = random_tensor(rows, cols, &seed, 24, 24);
    x[77777] = NAN, x[123456] = -INFINITY;
    const char *specs[] = {"mx", "nvfp4", "col", "row:up", "tile:128x128:e8m0", "tile:7x300:fp32", "tensor"};
    const fmt_t e4 = tu_fmt("e4m3"), e2 = tu_fmt("e2m1");
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        fmt_round_opts o = opts(FMT_SR, FMT_SATURATE);
        check_against_ref(&e2, specs[k], x, rows, cols, &o);
        o = opts(FMT_RNE, FMT_OVERFLOW_IEEE);
        check_against_ref(&e4, specs[k], x, rows, cols, &o);
    }
    free(x);
}

// --- against the per-element reference: random and adversarial tensors, every recipe

// Adversarial tensor for element format e: every group of 16 (an NVFP4 block, half an MX block)
// takes one pattern: wide random magnitudes, all zero (random signs), an inf or a NaN among
// random values, amax exactly max_elem * 2^k or one float32 ulp either side of it, float32
// subnormals, tiny normals (NVFP4 blocks whose scale is below e4m3's range), values near
// FLT_MAX (clipped scales), midpoints of the element grid times 2^k with that amax (ties after
// scaling), and plain values; each row has its own swing so that tiles differ.
static float *adversarial_tensor(size_t rows, size_t cols, uint64_t *s, const fmt_t *e) {
    float *x = malloc(rows * cols * sizeof *x);
    const fmt_round_opts rtz = {.mode = FMT_RTZ}, rup = {.mode = FMT_RUP};
    for (size_t g = 0; g < rows * cols; g += 16) {
        const size_t end = g + 16 < rows * cols ? g + 16 : rows * cols;
        const int pat = (int)(tu_splitmix64(s) % 12), k = (int)(tu_splitmix64(s) % 41) - 20;
        const float top = (float)ldexp(e->max, k);
        for (size_t i = g; i < end; i++) {
            const double u = tu_sm_unif(s);
            double v;
            switch (pat) {
            case 0: v = ldexp(1.0 + tu_sm_unif(s), (int)floor(-140 + u * 265)); break;
            case 1: v = 0; break;
            case 2: v = i == g + 3 ? INFINITY : ldexp(1.0 + u, k); break;
            case 3: v = i == g + 5 ? NAN : ldexp(1.0 + u, k); break;
            case 4: case 5: case 6: {
                const float t = pat == 4 ? top : pat == 5 ? nextafterf(top, INFINITY) : nextafterf(top, 0);
                v = i == g ? t : t * u;
                break;
            }
            case 7: v = ldexp((double)(tu_splitmix64(s) % (1u << 23)), -149); break;
            case 8: v = ldexp(1.0 + u, -126 + (int)(u * 20)); break;
            case 9: v = ldexp(1.0 + u, 127) * (i == g ? 1.0 : u); if (v > FLT_MAX) v = FLT_MAX; break;
            case 10: {  // a midpoint of two neighbours of the element format, times 2^k
                const double r = e->max * u, lo = fmt_round1(e, r, &rtz), hi = fmt_round1(e, nextafter(lo, INFINITY), &rup);
                v = i == g ? top : ldexp((lo + hi) / 2, k);
                break;
            }
            default: v = ldexp(1.0 + u, (int)(u * 16) - 8); break;
            }
            x[i] = (float)((tu_splitmix64(s) & 1) ? -v : v);
        }
    }
    return x;
}

// Every recipe, including "none", the non-finite block rules and tile shapes whose work units
// split rows, hold several rows, or span whole bands.
static const char *const all_specs[] = {
    "none", "tensor", "tensor:up", "tensor:ocp", "row", "row:up", "row:nanblock", "col", "col:ocp",
    "mx", "mx:up", "mx:rne", "mx:nanblock", "mx:up:nanblock", "nvfp4", "nvfp4:up", "nvfp4:ocp",
    "nvfp4:nanblock", "block:1:e8m0", "block:7:e3m2", "block:16:e4m3", "block:16:e4m3:up",
    "block:32:fp32", "block:64:bf16:up", "block:100:e8m0", "tile:2x32:e8m0", "tile:3x5:fp32",
    "tile:16x16:e8m0:nanblock", "tile:128x128:e8m0", "tile:0x9:e4m3:ocp", "tile:7x300:fp32",
    // issue 22's scale rules and names: they change only how a tile's amax becomes its scale, which
    // does not depend on the work units, so the small tensors cover them (NALL_LARGE leaves them out)
    "mx:ceil", "mx:even:nanblock", "mx:rceil", "tile:3x5:bf16:even", "nvfp4:ceil", "nvfp4:rceil",
    "fp8block1x128:pow2"};
enum { NALL = sizeof all_specs / sizeof all_specs[0], NALL_LARGE = NALL - 7 };

// Small ragged tensors, every element format kind, every recipe, mode and overflow policy, with
// flushing and short stochastic draws on some: in place and not.
Test(scale, matches_per_element_reference_small) {
    uint64_t seed = test_seed("matches_per_element_reference_small") + 10;
    static const char *const elems[] = {"e4m3", "e2m1", "e5m2", "e3m2", "e2m3", "e4m3fnuz", "bf16", "fp16"};
    for (size_t j = 0; j < sizeof elems / sizeof elems[0]; j++) {
        const fmt_t e = tu_fmt(elems[j]);
        const size_t rows = 13 + j, cols = 45 + 7 * j;
        float *x = j % 2 ? adversarial_tensor(rows, cols, &seed, &e) : random_tensor(rows, cols, &seed, 30, 30);
        if (j % 2 == 0) x[3] = -INFINITY, x[cols + 40] = NAN;
        for (size_t k = 0; k < NALL; k++)
            for (int m = 0; m < FMT_NMODES; m++)
                for (int p = 0; p < 2; p++) {
                    fmt_round_opts o = opts((fmt_round_mode)m, p ? FMT_OVERFLOW_IEEE : FMT_SATURATE);
                    o.flush_subnormals = (k + (size_t)m) % 5 == 0;
                    if (m == FMT_SR) o.sr_bits = (int)(k % 3) * 7;  // 0 (= 32), 7, 14
                    check_ref(&e, all_specs[k], x, rows, cols, &o, true, (k + (size_t)p) % 2 == 0);
                }
        free(x);
    }
}

// Tensors large enough for the parallel path and for work units of several rows, of part of a
// row, and of 2-D tiles over many rows; adversarial and random, every recipe, every mode.
Test(scale, matches_per_element_reference_large) {
    uint64_t seed = test_seed("matches_per_element_reference_large") + 11;
    static const struct { size_t rows, cols; } shapes[] = {{300, 257}, {5, 20000}, {2600, 40}};
    const fmt_t e4 = tu_fmt("e4m3"), e2 = tu_fmt("e2m1");
    for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++) {
        const size_t rows = shapes[h].rows, cols = shapes[h].cols;
        const fmt_t *e = h % 2 ? &e4 : &e2;
        float *x = h == 1 ? random_tensor(rows, cols, &seed, 24, 24) : adversarial_tensor(rows, cols, &seed, e);
        if (h == 1) x[77777] = NAN, x[12345] = -INFINITY;
        for (size_t k = 0; k < NALL_LARGE; k++) {
            const int m = (int)((k + h) % FMT_NMODES);
            fmt_round_opts o = opts((fmt_round_mode)m, (k + h) % 2 ? FMT_OVERFLOW_IEEE : FMT_SATURATE);
            o.offset = 123456789ULL * (k + 1);
            check_ref(e, all_specs[k], x, rows, cols, &o, true, k % 2 == 0);
            o = opts(FMT_SR, FMT_SATURATE);  // and stochastic rounding on every recipe
            check_ref(e, all_specs[k], x, rows, cols, &o, true, k % 2 == 1);
        }
        free(x);
    }
    // 2-D tiles too tall for a unit that measures its own tiles, on rows longer than a unit:
    // units whose columns start inside a tile (4096 is no multiple of 7 or 3).
    const size_t rows = 131, cols = 4500;
    float *x = adversarial_tensor(rows, cols, &seed, &e4);
    static const char *const tall[] = {"tile:131x7:e8m0", "tile:0x3:fp32:up", "col:nanblock"};
    for (size_t k = 0; k < sizeof tall / sizeof tall[0]; k++) {
        fmt_round_opts o = opts(k == 1 ? FMT_SR : FMT_RNE, FMT_SATURATE);
        check_ref(&e4, tall[k], x, rows, cols, &o, true, k != 1);
    }
    free(x);
}

// Tiles of whole vectors (48 columns) too large for a unit that measures its own tiles, on rows
// longer than a unit: the second unit of a row starts at column 4096, inside a tile, so the
// one-pass kernel (which takes segments that start on a tile boundary) must leave it to the
// other passes. Each tile column has its own magnitude, so that a tile's scale applied to its
// neighbour's elements shows.
Test(scale, units_starting_inside_tiles) {
    uint64_t seed = test_seed("units_starting_inside_tiles") + 12;
    const size_t rows = 131, cols = 4500;
    float *x = malloc(rows * cols * sizeof *x);
    for (size_t i = 0; i < rows * cols; i++)
        x[i] = (float)ldexp(tu_sm_unif(&seed) - 0.5, (int)((i % cols) / 48 % 9) - 4);
    const fmt_t e4 = tu_fmt("e4m3");
    for (int m = 0; m < FMT_NMODES; m += 3) {  // rne, rup, sr
        const fmt_round_opts o = opts((fmt_round_mode)m, FMT_SATURATE);
        check_ref(&e4, "tile:131x48:e8m0", x, rows, cols, &o, true, m == 0);
        check_ref(&e4, "tile:64x48:e4m3:up", x, rows, cols, &o, true, m != 0);
    }
    free(x);
}

// NVFP4 on a random tensor: every output is q * s_b with q a value of e2m1 and
// s_b = sf / s_enc, s_enc = 2688 / A in fp32; the block holding A gets sf = 448 exactly.
Test(scale, nvfp4_two_levels) {
    uint64_t seed = test_seed("nvfp4_two_levels") + 4;
    const size_t rows = 40, cols = 96, n = rows * cols, nb = rows * cols / 16;
    float *x = random_tensor(rows, cols, &seed, 10, 10), *out = malloc(n * sizeof *out);
    float *sf = malloc(nb * sizeof *sf);
    const fmt_t e4 = tu_fmt("e4m3");
    const fmt_round_opts rne = {0};
    for (int m = 0; m < FMT_NMODES; m++) {
        fmt_quant_info info = {.scales = sf};
        quant("e2m1", "nvfp4", out, x, rows, cols, opts((fmt_round_mode)m, FMT_SATURATE), NULL, &info);
        float A = 0;
        size_t arg = 0;
        for (size_t i = 0; i < n; i++)
            if (fabsf(x[i]) > A) A = fabsf(x[i]), arg = i;
        const float s_enc = 2688.0f / A;
        cr_assert_eq(info.tensor_scale, 1.0f / s_enc);
        cr_assert_eq(sf[arg / 16], 448.0f);
        for (size_t b = 0; b < nb; b++) {
            cr_assert(sf[b] <= 448.0f && sf[b] >= 0, "block %zu sf %a", b, sf[b]);
            cr_assert_eq(fmt_round1(&e4, sf[b], &rne), sf[b], "sf %a is not an e4m3 value", sf[b]);
            const float s_b = sf[b] / s_enc;
            for (size_t i = b * 16; i < b * 16 + 16; i++) {
                bool found = false;
                static const float grid[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};  // e2m1, by hand
                for (int c = 0; c < 16 && !found; c++) {
                    const float q = c < 8 ? grid[c] : -grid[c - 8];
                    found = tu_samef(q * s_b, out[i]);
                }
                cr_assert(found, "mode %d: out[%zu] = %a is not q * %a for an e2m1 q", m, i, out[i], s_b);
                cr_assert_leq(fabsf(out[i]), 6.0f * s_b);
            }
        }
    }
    free(x), free(out), free(sf);
}

// Every output divided by its power-of-two tile scale is a value of the element format.
Test(scale, outputs_are_element_values_times_scale) {
    uint64_t seed = test_seed("outputs_are_element_values_times_scale") + 5;
    const size_t rows = 24, cols = 80;
    float *x = random_tensor(rows, cols, &seed, 30, 30), *out = malloc(rows * cols * sizeof *out);
    const char *specs[] = {"mx", "mx:up", "block:16:e8m0:rne", "tile:16x16:e8m0", "tile:5x7:e8m0:up"};
    const char *elems[] = {"e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "bf16"};
    const fmt_round_opts rne = {0};
    for (size_t k = 0; k < 5; k++)
        for (size_t j = 0; j < 6; j++)
            for (int m = 0; m < FMT_NMODES; m++) {
                const fmt_scaling sc = tu_scaling(specs[k]);
                const fmt_t e = tu_fmt(elems[j]);
                float s[256];
                cr_assert_leq(fmt_scale_count(&sc, rows, cols), 256);
                fmt_quant_info info = {.scales = s};
                fmt_round_opts o = opts((fmt_round_mode)m, FMT_SATURATE);
                cr_assert_eq(fmt_quantize_f32(&e, &sc, out, x, rows, cols, &o, NULL, &info), FMT_OK);
                const size_t tr = (size_t)sc.tile_rows, tc = (size_t)sc.tile_cols, ntc = (cols + tc - 1) / tc;
                for (size_t i = 0; i < rows * cols; i++) {
                    const float st = s[(i / cols / tr) * ntc + (i % cols) / tc];
                    const double q = (double)out[i] / st;
                    cr_assert_eq(fmt_round1(&e, q, &rne), q, "%s %s mode %d: out %a / scale %a = %a is "
                                 "not a value", elems[j], specs[k], m, out[i], st, q);
                    cr_assert_leq(fabs(q), e.max);
                }
            }
    free(x), free(out);
}

// --- stochastic rounding: reproducible, independent of the tiling and of the thread count

// Every row has +-112 = 448/4 at each column multiple of 8, so every tile of every recipe below
// has amax 112 and scale 1/4: then the outputs can only differ through the random draws.
Test(scale, sr_independent_of_tile_shape) {
    uint64_t seed = test_seed("sr_independent_of_tile_shape") + 6;
    const size_t rows = 64, cols = 64, n = rows * cols;
    float *x = random_tensor(rows, cols, &seed, 8, 6), *ref = malloc(n * sizeof *ref), *out = malloc(n * sizeof *out);
    for (size_t i = 0; i < n; i++) {
        if (fabsf(x[i]) >= 112) x[i] = 100;
        if (i % 8 == 0) x[i] = (i / 8) % 2 ? 112.0f : -112.0f;
    }
    const char *specs[] = {"tensor", "row", "mx", "block:8:e8m0", "block:16:e4m3", "tile:8x8:e8m0",
                           "tile:16x16:fp32", "tile:4x64:e8m0:up", "tile:64x8:bf16", "nvfp4"};
    const fmt_t e = tu_fmt("e4m3");
    fmt_round_opts o = opts(FMT_SR, FMT_SATURATE);
    const fmt_scaling tensor = tu_scaling("tensor");
    fmt_stats st0 = {0};
    cr_assert_eq(fmt_quantize_f32(&e, &tensor, ref, x, rows, cols, &o, &st0, NULL), FMT_OK);
    size_t changed = 0;
    for (size_t i = 0; i < n; i++) changed += ref[i] != x[i];
    cr_assert_gt(changed, n / 2);
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        if (!strcmp(specs[k], "nvfp4")) continue;  // scales relative to 448 * 6: not 1/4
        const fmt_scaling sc = tu_scaling(specs[k]);
        fmt_stats st = {0};
        cr_assert_eq(fmt_quantize_f32(&e, &sc, out, x, rows, cols, &o, &st, NULL), FMT_OK);
        for (size_t i = 0; i < n; i++)
            cr_assert(tu_samef(out[i], ref[i]), "%s: [%zu] %a vs tensor %a", specs[k], i, out[i], ref[i]);
        cr_assert_eq(st.underflow, st0.underflow);
        cr_assert_eq(st.subnormal, st0.subnormal);
    }
    // And the draws are the element's own: another offset or seed changes them.
    o.offset += 1;
    cr_assert_eq(fmt_quantize_f32(&e, &tensor, out, x, rows, cols, &o, NULL, NULL), FMT_OK);
    changed = 0;
    for (size_t i = 0; i < n; i++) changed += !tu_samef(out[i], ref[i]);
    cr_assert_gt(changed, 0);
    free(x), free(ref), free(out);
}

#ifdef _OPENMP
// A rows x cols tensor quantized in e2m1 by stochastic rounding under each recipe of specs: 2 and
// 4 threads give 1 thread's values, scales, counts and tensor scale, out of place and in place.
static void same_with_threads(size_t rows, size_t cols, const char *const *specs, size_t nspecs, uint64_t seed) {
    const size_t n = rows * cols;
    float *x = random_tensor(rows, cols, &seed, 20, 20);
    x[n / 3] = NAN, x[n / 2 + 1] = INFINITY;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    const fmt_t e = tu_fmt("e2m1");
    const fmt_round_opts o = opts(FMT_SR, FMT_SATURATE);
    for (size_t k = 0; k < nspecs; k++) {
        const fmt_scaling sc = tu_scaling(specs[k]);
        const size_t ns = fmt_scale_count(&sc, rows, cols);
        float *sa = malloc((ns + 1) * sizeof *sa), *sb = malloc((ns + 1) * sizeof *sb);
        fmt_stats s1 = {0};
        fmt_quant_info ia = {.scales = sa};
        omp_set_num_threads(1);
        cr_assert_eq(fmt_quantize_f32(&e, &sc, a, x, rows, cols, &o, &s1, &ia), FMT_OK);
        for (int t = 2; t <= 4; t += 2) {
            omp_set_num_threads(t);
            fmt_stats s2 = {0};
            fmt_quant_info ib = {.scales = sb};
            memcpy(b, x, n * sizeof *b);  // and in place this time
            cr_assert_eq(fmt_quantize_f32(&e, &sc, b, b, rows, cols, &o, &s2, &ib), FMT_OK);
            for (size_t i = 0; i < n; i++)
                cr_assert(tu_samef(a[i], b[i]), "%zux%zu %s, %d threads: [%zu]", rows, cols, specs[k], t, i);
            for (size_t i = 0; i < ns; i++) cr_assert(tu_samef(sa[i], sb[i]));
            cr_assert(s1.n == s2.n && s1.overflow == s2.overflow && s1.underflow == s2.underflow &&
                      s1.subnormal == s2.subnormal && s1.nan_in == s2.nan_in && s1.amax == s2.amax,
                      "%zux%zu %s: stats differ with %d threads", rows, cols, specs[k], t);
            cr_assert_eq(ia.scales_clipped, ib.scales_clipped);
            cr_assert(tu_samef(ia.tensor_scale, ib.tensor_scale));
        }
        cr_assert_eq(s1.n, n);
        cr_assert_eq(s1.nan_in, 1);
        free(sa), free(sb);
    }
    omp_set_num_threads(1);
    free(x), free(a), free(b);
}
#endif

Test(scale, sr_independent_of_thread_count) {
#ifndef _OPENMP
    cr_skip_test("built without OpenMP");
#else
    const char *specs[] = {"mx", "tile:128x128:e8m0", "nvfp4", "col", "tensor:up", "none"};
    same_with_threads(160, 1000, specs, sizeof specs / sizeof specs[0],
                      test_seed("sr_independent_of_thread_count") + 7);
#endif
}

// The sizes a trainer's weights have, from the smallest that runs on several threads (2^14
// elements): 4 units of work or a few more, some ending mid-row, in both orientations of blocks.
Test(scale, small_tensors_independent_of_thread_count) {
#ifndef _OPENMP
    cr_skip_test("built without OpenMP");
#else
    const char *specs[] = {"mx", "tile:32x1:e8m0", "nvfp4", "tile:16x16:e4m3+tensor", "tile:1x128:fp32", "tensor"};
    uint64_t seed = test_seed("small_tensors_independent_of_thread_count");
    same_with_threads(128, 128, specs, sizeof specs / sizeof specs[0], seed);
    same_with_threads(96, 200, specs, sizeof specs / sizeof specs[0], seed + 1);
    same_with_threads(352, 128, specs, sizeof specs / sizeof specs[0], seed + 2);
#endif
}

// --- none, in place, arguments

Test(scale, none_is_plain_rounding) {
    uint64_t seed = test_seed("none_is_plain_rounding") + 8;
    const size_t n = 5000;
    float *x = random_tensor(1, n, &seed, 20, 20), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    const fmt_t e = tu_fmt("e4m3");
    const fmt_scaling sc = tu_scaling("none");
    cr_assert_eq(fmt_scale_count(&sc, 10, 500), 0);
    for (int m = 0; m < FMT_NMODES; m++) {
        fmt_round_opts o = opts((fmt_round_mode)m, FMT_OVERFLOW_IEEE);
        fmt_stats sa = {0}, sb = {0};
        fmt_quant_info info = {.scales = NULL, .tensor_scale = 5};
        cr_assert_eq(fmt_quantize_f32(&e, &sc, a, x, 10, 500, &o, &sa, &info), FMT_OK);
        memcpy(b, x, n * sizeof *b);
        cr_assert_eq(fmt_round_f32(&e, b, n, &o, &sb), FMT_OK);
        for (size_t i = 0; i < n; i++) cr_assert(tu_samef(a[i], b[i]));
        cr_assert(sa.n == sb.n && sa.overflow == sb.overflow && sa.underflow == sb.underflow && sa.amax == sb.amax);
        cr_assert_eq(info.tensor_scale, 1.0f);
    }
    free(x), free(a), free(b);
}

Test(scale, arguments) {
    const fmt_t e = tu_fmt("e4m3");
    const fmt_scaling sc = tu_scaling("mx");
    float x[4] = {1, 2, 3, 4};
    fmt_round_opts bad = {0};
    bad.mode = (fmt_round_mode)99;
    cr_assert_eq(fmt_quantize_f32(&e, &sc, x, x, 1, 4, &bad, NULL, NULL), FMT_EINVAL);
    cr_assert_eq(fmt_quantize_f32(&e, &sc, x, x, 0, 4, NULL, NULL, NULL), FMT_OK);
    cr_assert_eq(fmt_quantize_f32(&e, &sc, NULL, x, 1, 4, NULL, NULL, NULL), FMT_EINVAL);
    fmt_scaling neg = sc;
    neg.tile_cols = -1;
    cr_assert_eq(fmt_quantize_f32(&e, &neg, x, x, 1, 4, NULL, NULL, NULL), FMT_EINVAL);
    fmt_scaling nb = tu_scaling("block:4:e3m2");  // no NaN to store
    nb.nan_block = true;
    cr_assert_eq(fmt_quantize_f32(&e, &nb, x, x, 1, 4, NULL, NULL, NULL), FMT_EINVAL);
    const fmt_t f64 = tu_fmt("fp64");
    cr_assert_eq(fmt_quantize_f32(&f64, &sc, x, x, 1, 4, NULL, NULL, NULL), FMT_EINVAL);
    cr_assert_eq(fmt_quantize_f32(&e, &sc, x, x, 1, 4, NULL, NULL, NULL), FMT_OK);  // NULL opts: rne
    cr_assert(x[0] == 1 && x[3] == 4);
}

// --- parsing

Test(scale, parse_every_spelling) {
    struct {
        const char *spec;
        bool none;
        int tr, tc;
        const char *fmt;
        fmt_scale_round r;
        bool ts;
        const char *canon;
    } cases[] = {
        {"none", true, 0, 0, "fp32", FMT_SCALE_RNE, false, "none"},
        {"NONE", true, 0, 0, "fp32", FMT_SCALE_RNE, false, "none"},
        {"tensor", false, 0, 0, "fp32", FMT_SCALE_RNE, false, "tensor"},
        {"tensor:up", false, 0, 0, "fp32", FMT_SCALE_UP, false, "tensor:up"},
        {"tensor:rne", false, 0, 0, "fp32", FMT_SCALE_RNE, false, "tensor"},
        {"row", false, 1, 0, "fp32", FMT_SCALE_RNE, false, "row"},
        {"row:ocp", false, 1, 0, "fp32", FMT_SCALE_OCP, false, "row:ocp"},
        {"col", false, 0, 1, "fp32", FMT_SCALE_RNE, false, "col"},
        {"Col:UP", false, 0, 1, "fp32", FMT_SCALE_UP, false, "col:up"},
        {"mx", false, 1, 32, "e8m0", FMT_SCALE_OCP, false, "mx"},
        {"mx:up", false, 1, 32, "e8m0", FMT_SCALE_UP, false, "mx:up"},
        {"mx:rne", false, 1, 32, "e8m0", FMT_SCALE_RNE, false, "mx:rne"},
        {"nvfp4", false, 1, 16, "e4m3", FMT_SCALE_RNE, true, "nvfp4"},
        {"nvfp4:up", false, 1, 16, "e4m3", FMT_SCALE_UP, true, "nvfp4:up"},
        {"block:32:e8m0", false, 1, 32, "e8m0", FMT_SCALE_OCP, false, "mx"},
        {"block:32:float8_e8m0fnu:ocp", false, 1, 32, "e8m0", FMT_SCALE_OCP, false, "mx"},
        {"block:16:e4m3", false, 1, 16, "e4m3", FMT_SCALE_RNE, false, "block:16:e4m3:rne"},
        {"block:16:e4m3:up", false, 1, 16, "e4m3", FMT_SCALE_UP, false, "block:16:e4m3:up"},
        {"block:64:fp32", false, 1, 64, "fp32", FMT_SCALE_RNE, false, "block:64:fp32:rne"},
        {"block:8:bf16:ocp", false, 1, 8, "bf16", FMT_SCALE_OCP, false, "block:8:bf16:ocp"},
        {"block:32:e5m3:fn", false, 1, 32, "e5m3:fn", FMT_SCALE_RNE, false, "block:32:e5m3:fn:rne"},
        {"block:32:e5m3:fn:up", false, 1, 32, "e5m3:fn", FMT_SCALE_UP, false, "block:32:e5m3:fn:up"},
        {"tile:128x128:fp32", false, 128, 128, "fp32", FMT_SCALE_RNE, false, "fp8block128x128"},
        {"tile:16x16:e8m0", false, 16, 16, "e8m0", FMT_SCALE_OCP, false, "tile:16x16:e8m0:ocp"},
        {"TILE:1X32:e8m0:up", false, 1, 32, "e8m0", FMT_SCALE_UP, false, "mx:up"},
        {"tile:0x0:fp32", false, 0, 0, "fp32", FMT_SCALE_RNE, false, "tensor"},
        {"tile:0x0:bf16:up", false, 0, 0, "bf16", FMT_SCALE_UP, false, "tile:0x0:bf16:up"},
        {"tile:1x0:fp32", false, 1, 0, "fp32", FMT_SCALE_RNE, false, "row"},
        {"mx:nanblock", false, 1, 32, "e8m0", FMT_SCALE_OCP, false, "mx:nanblock"},
        {"mx:nanblock:up", false, 1, 32, "e8m0", FMT_SCALE_UP, false, "mx:up:nanblock"},
        {"MX:UP:NANBLOCK", false, 1, 32, "e8m0", FMT_SCALE_UP, false, "mx:up:nanblock"},
        {"nvfp4:nanblock", false, 1, 16, "e4m3", FMT_SCALE_RNE, true, "nvfp4:nanblock"},
        {"block:32:e8m0:nanblock", false, 1, 32, "e8m0", FMT_SCALE_OCP, false, "mx:nanblock"},
        {"tile:16x16:e4m3:nanblock", false, 16, 16, "e4m3", FMT_SCALE_RNE, false, "tile:16x16:e4m3:rne:nanblock"},
        {"block:32:e5m3:fn:nanblock:up", false, 1, 32, "e5m3:fn", FMT_SCALE_UP, false, "block:32:e5m3:fn:up:nanblock"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const fmt_scaling sc = tu_scaling(cases[i].spec);
        cr_assert_eq(sc.none, cases[i].none, "%s", cases[i].spec);
        cr_assert_eq(sc.tile_rows, cases[i].tr, "%s", cases[i].spec);
        cr_assert_eq(sc.tile_cols, cases[i].tc, "%s", cases[i].spec);
        const fmt_t want = tu_fmt(cases[i].fmt);
        cr_assert(sc.scale_fmt.bits == want.bits && sc.scale_fmt.mbits == want.mbits &&
                  sc.scale_fmt.bias == want.bias && sc.scale_fmt.special == want.special, "%s", cases[i].spec);
        cr_assert_eq(sc.scale_round, cases[i].r, "%s", cases[i].spec);
        cr_assert_eq(sc.tensor_scale, cases[i].ts, "%s", cases[i].spec);
        cr_assert_eq(sc.nan_block, strstr(cases[i].canon, "nanblock") != NULL, "%s", cases[i].spec);
        char name[128];
        fmt_scaling_name(&sc, name, sizeof name);
        cr_assert_str_eq(name, cases[i].canon, "%s", cases[i].spec);
        // The canonical name parses back to the same recipe.
        const fmt_scaling back = tu_scaling(name);
        cr_assert(back.none == sc.none && back.tile_rows == sc.tile_rows && back.tile_cols == sc.tile_cols &&
                  back.scale_round == sc.scale_round && back.tensor_scale == sc.tensor_scale &&
                  back.scale_fmt.bits == sc.scale_fmt.bits && back.scale_fmt.mbits == sc.scale_fmt.mbits &&
                  back.nan_block == sc.nan_block,
                  "%s -> %s", cases[i].spec, name);
    }
}

Test(scale, parse_errors_name_the_spec) {
    struct { const char *spec; int status; const char *says; } cases[] = {
        {"", FMT_EUNKNOWN, "expected"},
        {"foo", FMT_EUNKNOWN, "'foo'"},
        {"mx32", FMT_EUNKNOWN, "expected none, tensor"},
        {"block", FMT_EUNKNOWN, "expected"},
        {"block:", FMT_EINVAL, "block size"},
        {"block:0:e8m0", FMT_EINVAL, "positive integer"},
        {"block:x:e8m0", FMT_EINVAL, "'x'"},
        {"block:-4:e8m0", FMT_EINVAL, "positive integer"},
        {"block:32", FMT_EINVAL, "no scale format"},
        {"block:32:", FMT_EINVAL, "no scale format"},
        {"block:32:nosuch", FMT_EUNKNOWN, "'nosuch' is not a format"},
        {"block:32:fp64", FMT_EINVAL, "float32"},
        {"tile:16:fp32", FMT_EINVAL, "RxC"},
        {"tile:16x:fp32", FMT_EINVAL, "RxC"},
        {"tile:axb:fp32", FMT_EINVAL, "RxC"},
        {"tile:16x16", FMT_EINVAL, "no scale format"},
        {"none:up", FMT_EINVAL, "none"},
        {"mx:up:rne", FMT_EINVAL, "twice"},
        {"mx:down", FMT_EUNKNOWN, "'mx:down'"},
        {"tensor:e8m0", FMT_EUNKNOWN, "expected"},
        {"none:nanblock", FMT_EINVAL, "none"},
        {"mx:nanblock:nanblock", FMT_EINVAL, "twice"},
        {"block:32:e3m2:nanblock", FMT_EINVAL, "no NaN"},
        {"tile:4x4:e2m1:up:nanblock", FMT_EINVAL, "no NaN"},
        // issue 22's names: the rules, 4over6 only on two levels, :pow2 fixing its rounding
        {"mx:floor", FMT_EUNKNOWN, ":ceil, :even, :rceil or :4over6"},
        {"mx:4over6", FMT_EINVAL, "nvfp4:4over6"},
        {"block:16:e4m3:4over6", FMT_EINVAL, "two-level"},
        {"fp8block1x128:pow2:ocp", FMT_EINVAL, "fixes the scale rounding (up)"},
        {"fp8block128x128:pow2:up", FMT_EINVAL, "block:K:SCALEFMT:RULE"},
        {"fp8block", FMT_EUNKNOWN, "fp8block1x128[:pow2], fp8block128x128[:pow2]"},
        {"fp8block1x128:pow3", FMT_EUNKNOWN, "expected none"},
        {"mx:even:ceil", FMT_EINVAL, "twice"},
        {"nvfp4:4over6:rne", FMT_EINVAL, "twice"},
        {"mxint4", FMT_EUNKNOWN, "mxint8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fmt_scaling sc;
        char msg[512];
        const int st = fmt_scaling_from_name(&sc, cases[i].spec, msg, sizeof msg);
        cr_assert_eq(st, cases[i].status, "'%s': status %d want %d (%s)", cases[i].spec, st, cases[i].status, msg);
        cr_assert(strstr(msg, cases[i].says), "'%s': message '%s' lacks '%s'", cases[i].spec, msg, cases[i].says);
        if (cases[i].spec[0]) cr_assert(strstr(msg, cases[i].spec), "'%s': message '%s' does not name it",
                                        cases[i].spec, msg);
    }
    fmt_scaling sc;
    cr_assert_eq(fmt_scaling_from_name(&sc, "mx", NULL, 0), FMT_OK);  // msg is optional
    cr_assert_eq(fmt_scaling_from_name(&sc, NULL, NULL, 0), FMT_EUNKNOWN);
}

// Schemes (issue 22): an element format with its recipe, and the recipe alone where a recipe
// is parsed; mxfp6 names two schemes and is refused.
Test(scale, schemes) {
    static const struct { const char *name, *elem, *recipe; } sch[] = {
        {"mxfp8", "e4m3", "mx"}, {"MXFP8_E5M2", "e5m2", "mx"}, {"mxfp6_e3m2", "e3m2", "mx"},
        {"mxfp6_e2m3", "e2m3", "mx"}, {"mxfp4", "e2m1", "mx"}, {"nvfp4", "e2m1", "nvfp4"},
        {"mxint8", "e1m6:finite:bias=1", "mx"},
    };
    for (size_t i = 0; i < sizeof sch / sizeof sch[0]; i++) {
        fmt_t e;
        fmt_scaling sc;
        char name[64];
        cr_assert_eq(fmt_scheme_from_name(&e, &sc, sch[i].name), FMT_OK, "%s", sch[i].name);
        cr_expect_str_eq(e.name, sch[i].elem);
        fmt_scaling_name(&sc, name, sizeof name);
        cr_expect_str_eq(name, sch[i].recipe);
        cr_assert_eq(fmt_scaling_from_name(&sc, sch[i].name, NULL, 0), FMT_OK, "%s as a recipe", sch[i].name);
        fmt_scaling_name(&sc, name, sizeof name);
        cr_expect_str_eq(name, sch[i].recipe);
    }
    fmt_scaling sc;
    char name[64], msg[256];
    cr_assert_eq(fmt_scaling_from_name(&sc, "mxfp4:up:nanblock", NULL, 0), FMT_OK);
    fmt_scaling_name(&sc, name, sizeof name);
    cr_expect_str_eq(name, "mx:up:nanblock");
    cr_expect_eq(fmt_scaling_from_name(&sc, "mxfp6", msg, sizeof msg), FMT_EUNKNOWN);
    cr_expect(strstr(msg, "mxfp6_e3m2") && strstr(msg, "mxfp6_e2m3"), "%s", msg);
    cr_expect_eq(fmt_scheme_from_name(NULL, NULL, "mxfp6"), FMT_EUNKNOWN);
    cr_expect_eq(fmt_scheme_from_name(NULL, NULL, "e2m1"), FMT_EUNKNOWN);
}

// Exact quotients (issue 22). The issue's two counterexamples of the reciprocal multiply: a
// row [56448, 21168] in e4m3 has scale 126 and 21168 / 126 = 168 exactly, a tie that RNE
// sends to 160 (x * fl(1/126) is above it: 176); NVFP4 with tensor amax 2016 and a block
// [0.3515625, 0.0732421875]: s_enc = fl(2688 / 2016), sf = 0.078125, the decoded scale
// fl(sf / s_enc) = 0.05859375 and 0.0732421875 / 0.05859375 = 5/4 exactly, which RNE sends to 1
// (x * fl(s_enc / sf) is above it: 1.5). ":recip" keeps the multiply.
Test(scale, exact_quotients_issue_examples) {
    const fmt_t e4m3 = tu_fmt("e4m3"), e2m1 = tu_fmt("e2m1");
    float row[2] = {56448.0f, 21168.0f}, out[2], el[2], sc[1];
    fmt_quant_info info = {.elems = el, .scales = sc};
    fmt_scaling rs = tu_scaling("row");
    cr_assert_eq(fmt_quantize_f32(&e4m3, &rs, out, row, 1, 2, NULL, NULL, &info), FMT_OK);
    cr_expect_eq(sc[0], 126.0f);
    cr_expect_eq(el[0], 448.0f);
    cr_expect_eq(el[1], 160.0f, "21168 / 126 = 168, a tie: RNE gives 160, got %g", el[1]);
    rs = tu_scaling("row:recip");
    cr_assert_eq(fmt_quantize_f32(&e4m3, &rs, out, row, 1, 2, NULL, NULL, &info), FMT_OK);
    cr_expect_eq(el[1], 176.0f, "the reciprocal multiply (what kernels do) gives 176, got %g", el[1]);

    float x[32] = {0}, o[32], q[32], s2[2];
    x[0] = 2016.0f, x[16] = 0.3515625f, x[17] = 0.0732421875f;
    fmt_quant_info in2 = {.elems = q, .scales = s2};
    fmt_scaling nv = tu_scaling("nvfp4");
    cr_assert_eq(fmt_quantize_f32(&e2m1, &nv, o, x, 1, 32, NULL, NULL, &in2), FMT_OK);
    cr_expect_eq(s2[1], 0.078125f);
    cr_expect_eq(q[17], 1.0f, "exact element 5/4, a tie: RNE gives 1, got %g", q[17]);
    nv = tu_scaling("nvfp4:recip");
    cr_assert_eq(fmt_quantize_f32(&e2m1, &nv, o, x, 1, 32, NULL, NULL, &in2), FMT_OK);
    cr_expect_eq(q[17], 1.5f, "reciprocal multiply gives 1.5, got %g", q[17]);
}

// Constructed ties: rows [s * max_elem, s * m - ulp, s * m, s * m + ulp] with s a random
// float32 of at most 12 significant bits (so s * max_elem and s * m are exact: the row's scale is
// s exactly) and m a midpoint of the element format: RNE must give the even neighbour for the
// tie and the neighbour on the side of the perturbation otherwise, in every format and mode of
// nearest rounding; directed modes must give the neighbour below/above. Counted: how often the
// reciprocal multiply gets a case wrong (it must be sometimes, or the test shows nothing).
Test(scale, exact_quotients_constructed_ties) {
    uint64_t seed = test_seed("exact_quotients_constructed_ties");
    static const char *elems[] = {"e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "bf16", "fp16"};
    uint64_t recip_wrong = 0, cases = 0;
    for (size_t fi = 0; fi < sizeof elems / sizeof *elems; fi++) {
        const fmt_t f = tu_fmt(elems[fi]);
        for (int it = 0; it < 400; it++) {
            // s in [1, 2) * 2^k with 12 bits, k in [-20, 20]
            const uint64_t r = tu_splitmix64(&seed);
            const float s = ldexpf(1.0f + (float)(r % 2048) / 2048.0f, (int)(r >> 40) % 41 - 20);
            // a midpoint between two neighbours a < b of f in [min_normal, max / 2]
            const int e = f.emin + (int)((r >> 12) % (unsigned)(f.emax - f.emin));
            const double ulp = ldexp(1.0, e - f.mbits);
            const double a = ldexp(1.0, e) + ulp * (double)((r >> 20) % (1u << (f.mbits < 10 ? f.mbits : 10)));
            const double mid = a + ulp / 2, b = a + ulp;
            const float xm = (float)(s * mid);
            if ((double)xm != (double)s * mid || (double)(float)(s * f.max) != (double)s * f.max) continue;
            float in[4] = {(float)(s * f.max), nextafterf(xm, 0), xm, nextafterf(xm, INFINITY)}, out[4], el[4];
            for (int m = 0; m < 2; m++) {
                fmt_round_opts o = fmt_scaling_default_opts(&(fmt_scaling){0});
                o.overflow = FMT_SATURATE;
                fmt_quant_info info = {.elems = el};
                fmt_scaling rs = tu_scaling(m ? "row:recip" : "row");
                cr_assert_eq(fmt_quantize_f32(&f, &rs, out, in, 1, 4, &o, NULL, &info), FMT_OK);
                const double even = fmod(a / ulp, 2.0) == 0 ? a : b;
                const bool ok = el[1] == (float)a && el[2] == (float)even && el[3] == (float)b;
                if (m) recip_wrong += !ok;
                else
                    cr_assert(ok, "%s s=%a mid=%a: got %a %a %a want %a %a %a", f.name, s, mid, el[1], el[2],
                              el[3], a, even, b);
                if (!m) {  // the same four values down each of 37 columns: the per-column path
                    enum { NC = 37 };
                    float cin[4 * NC], cout[4 * NC], cel[4 * NC];
                    for (int i = 0; i < 4 * NC; i++) cin[i] = in[i / NC];
                    fmt_quant_info ci = {.elems = cel};
                    fmt_scaling cs = tu_scaling("col");
                    cr_assert_eq(fmt_quantize_f32(&f, &cs, cout, cin, 4, NC, &o, NULL, &ci), FMT_OK);
                    for (int c = 0; c < NC; c++)
                        cr_assert(cel[NC + c] == (float)a && cel[2 * NC + c] == (float)even && cel[3 * NC + c] == (float)b,
                                  "%s col %d s=%a mid=%a: got %a %a %a", f.name, c, s, mid, cel[NC + c], cel[2 * NC + c],
                                  cel[3 * NC + c]);
                }
                // directed: toward zero and up give a, b for all three (s * mid is inexact in f)
                for (int dm = 0; dm < 2 && !m; dm++) {
                    o.mode = dm ? FMT_RUP : FMT_RTZ;
                    cr_assert_eq(fmt_quantize_f32(&f, &rs, out, in, 1, 4, &o, NULL, &info), FMT_OK);
                    const float want = dm ? (float)b : (float)a;
                    cr_assert(el[1] == (dm ? want : (float)a) && el[2] == want && el[3] == (dm ? (float)b : want),
                              "%s %s s=%a mid=%a: got %a %a %a", f.name, fmt_mode_name(o.mode), s, mid, el[1],
                              el[2], el[3]);
                    o.mode = FMT_RNE;
                }
            }
            cases++;
        }
    }
    cr_log_info("exact_quotients_constructed_ties: %" PRIu64 " cases, the reciprocal multiply got %" PRIu64
                " wrong\n", cases, recip_wrong);
    cr_assert(cases > 1000);
    cr_assert(recip_wrong > 0);
}

// Near ties with full-precision (24-bit) scales, where a float32 quotient can land on a midpoint
// that the exact quotient misses: x = fl(s * mid) is within half a float32 ulp of s * mid. Per
// row, per column and in tiles of 16 (the paths of scale.c and round_lean.c), every element must be the
// rounding of the exact quotient x / d (d the scale the call reports; the float64 quotient
// decides every mode exactly, scale.c says why).
Test(scale, exact_quotients_full_precision_scales) {
    uint64_t seed = test_seed("exact_quotients_full_precision_scales");
    enum { R = 4, C = 53 };
    static const char *elems[] = {"e2m1", "e4m3", "e3m2"};
    uint64_t checked = 0, f32_quotient_wrong = 0;
    for (size_t fi = 0; fi < sizeof elems / sizeof *elems; fi++) {
        const fmt_t f = tu_fmt(elems[fi]);
        for (int it = 0; it < 60; it++) {
            float in[R * C], out[R * C], el[R * C], sc[C > R ? C : R];
            for (int c = 0; c < C; c++) {  // column c: its amax s * max, then values near midpoints
                const uint64_t r = tu_splitmix64(&seed);
                const float s = ldexpf(1.0f + (float)(r >> 41) * 0x1p-23f, (int)(r % 21) - 10);
                in[c] = s * (float)f.max;
                for (int i = 1; i < R; i++) {
                    const uint64_t q = tu_splitmix64(&seed);
                    const int e = f.emin + (int)(q % (unsigned)(f.emax - f.emin));
                    const double ulp = ldexp(1.0, e - f.mbits);
                    const double mid = ldexp(1.0, e) + ulp * (double)((q >> 8) % (1u << f.mbits)) + ulp / 2;
                    in[i * C + c] = (float)(s * mid) * ((q >> 40) & 1 ? -1.0f : 1.0f);
                }
            }
            for (int layout = 0; layout < 2; layout++) {  // 0: per column; 1: the transpose, per row
                float x[R * C];
                for (int i = 0; i < R * C; i++) x[i] = layout ? in[(i % R) * C + i / R] : in[i];
                const size_t rows = layout ? C : R, cols = layout ? R : C;
                for (int m = 0; m < FMT_SR; m++) {
                    fmt_round_opts o = opts((fmt_round_mode)m, FMT_SATURATE);
                    fmt_quant_info info = {.elems = el, .scales = sc};
                    fmt_scaling rs = tu_scaling(layout ? "row" : "col");
                    cr_assert_eq(fmt_quantize_f32(&f, &rs, out, x, rows, cols, &o, NULL, &info), FMT_OK);
                    for (size_t i = 0; i < rows * cols; i++) {
                        const float d = sc[layout ? i / cols : i % cols];
                        const double want = fmt_round1(&f, (double)x[i] / d, &o);
                        cr_assert(el[i] == (float)want, "%s %s %s x=%a d=%a: got %a, exact quotient gives %a",
                                  f.name, layout ? "row" : "col", fmt_mode_name(o.mode), x[i], d, el[i], want);
                        f32_quotient_wrong += m == FMT_RNE && fmt_round1(&f, x[i] / d, &o) != want;
                        checked++;
                    }
                }
            }
        }
    }
    // Tiles of 16 (the one-pass kernel's broadcast divisor): 53 rows of two tiles, each tile its
    // amax s * max first, then values near midpoints.
    for (size_t fi = 0; fi < sizeof elems / sizeof *elems; fi++) {
        const fmt_t f = tu_fmt(elems[fi]);
        enum { TR = 53, TC = 32 };
        float x[TR * TC], out[TR * TC], el[TR * TC], sc[TR * 2];
        for (int t = 0; t < TR * 2; t++) {
            const uint64_t r = tu_splitmix64(&seed);
            const float s = ldexpf(1.0f + (float)(r >> 41) * 0x1p-23f, (int)(r % 21) - 10);
            x[t * 16] = s * (float)f.max;
            for (int i = 1; i < 16; i++) {
                const uint64_t q = tu_splitmix64(&seed);
                const int e = f.emin + (int)(q % (unsigned)(f.emax - f.emin));
                const double ulp = ldexp(1.0, e - f.mbits);
                const double mid = ldexp(1.0, e) + ulp * (double)((q >> 8) % (1u << f.mbits)) + ulp / 2;
                x[t * 16 + i] = (float)(s * mid) * ((q >> 40) & 1 ? -1.0f : 1.0f);
            }
        }
        for (int m = 0; m < FMT_SR; m++) {
            fmt_round_opts o = opts((fmt_round_mode)m, FMT_SATURATE);
            fmt_quant_info info = {.elems = el, .scales = sc};
            fmt_scaling rs = tu_scaling("block:16:fp32");
            cr_assert_eq(fmt_quantize_f32(&f, &rs, out, x, TR, TC, &o, NULL, &info), FMT_OK);
            for (size_t i = 0; i < TR * TC; i++) {
                const float d = sc[i / 16];
                const double want = fmt_round1(&f, (double)x[i] / d, &o);
                cr_assert(el[i] == (float)want, "%s block:16 %s x=%a d=%a: got %a, exact quotient gives %a", f.name,
                          fmt_mode_name(o.mode), x[i], d, el[i], want);
                f32_quotient_wrong += m == FMT_RNE && fmt_round1(&f, x[i] / d, &o) != want;
                checked++;
            }
        }
    }
    cr_log_info("exact_quotients_full_precision_scales: %" PRIu64 " elements; rounding the float32 quotient "
                "would get %" PRIu64 " of the nearest-even ones wrong\n", checked, f32_quotient_wrong);
    cr_assert(f32_quotient_wrong > 0, "no near tie constructed: the test would not tell a float32 quotient apart");
}

// Near FLT_MAX the rules that round amax up (ceil, even, up, rceil) take a scale one binade above
// OCP's (e4m3, amax 3.4e38: 2^120, as torchao and Transformer Engine do: test_scale_rules), and
// an element rounded up to 256 dequantizes to 2^128 = inf in float32, as in their dequantization.
// Each such output is an overflow and counted (it was not: 0 overflows, every big output inf);
// OCP's rule never takes such a scale (max_elem < 2^(emax_elem + 1)) and saturates its elements.
Test(scale, dequantized_overflow_is_counted) {
    static const char *specs[] = {"mx", "mx:ceil", "mx:rceil", "mx:even", "mx:up", "mx:rne", "block:32:fp32:up",
                                  "row:up"};
    static const char *elems[] = {"e4m3", "e5m2", "e2m1", "e3m2", "e2m3"};
    size_t ninf_total = 0;
    for (size_t k = 0; k < sizeof elems / sizeof *elems; k++)
        for (size_t j = 0; j < sizeof specs / sizeof *specs; j++) {
            float in[64] = {3.4e38f, 1.0f, -2e38f, 1e30f, FLT_MAX}, out[64], s[2];
            for (int i = 5; i < 32; i++) in[i] = 3.0e38f;
            in[32] = 1.0f, in[33] = -FLT_MAX;
            fmt_stats st = {0};
            fmt_quant_info info = {.scales = s};
            quant(elems[k], specs[j], out, in, 1, 64, opts(FMT_RNE, FMT_SATURATE), &st, &info);
            uint64_t ninf = 0;
            for (int i = 0; i < 64; i++) ninf += isinf(out[i]) != 0;
            ninf_total += ninf;
            const fmt_t e = tu_fmt(elems[k]);
            // Saturated elements (OCP's rule) and infinite products are both overflows: at least
            // every inf is counted, and an inf occurs only under a scale above FLT_MAX / max_elem.
            cr_assert_geq(st.overflow, ninf, "%s %s: %llu inf outputs, %llu overflows counted", elems[k], specs[j],
                          (unsigned long long)ninf, (unsigned long long)st.overflow);
            if (ninf) cr_assert_gt((double)s[0] * e.max, FLT_MAX, "%s %s: inf under scale %a", elems[k], specs[j], s[0]);
            if (!strcmp(specs[j], "mx")) cr_assert_eq(ninf, 0, "%s mx: %llu inf", elems[k], (unsigned long long)ninf);
        }
    cr_assert_gt(ninf_total, 0);  // the case is reached
}

// Issue 37: the dequantization's overflows are checked once per band of tile rows (the rows of
// a band share their scales), not once per row. Tiles several rows high whose bands alternate
// between scales that can overflow (amax near FLT_MAX, rounded up) and ordinary ones: every
// count equals the reference's, and overflows do occur.
Test(scale, dequantized_overflow_by_band) {
    enum { ROWS = 20, COLS = 12 };
    static const char *specs[] = {"tile:4x1:e8m0:up", "tile:4x8:e8m0:up", "tile:2x3:e8m0:up", "tile:8x1:e8m0:up", "mx:up"};
    float in[ROWS * COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)  // bands of 4 rows: odd bands near FLT_MAX in every third column
            in[r * COLS + c] = (r / 4) % 2 && c % 3 == 0 ? (r % 2 ? 3.4e38f : -3.39e38f) : 1.0f + (float)(r + c) / 64;
    const fmt_t e = tu_fmt("e4m3");
    for (size_t j = 0; j < sizeof specs / sizeof *specs; j++)
        for (int p = 0; p < 2; p++) {
            const fmt_round_opts o = opts(FMT_RNE, p ? FMT_OVERFLOW_IEEE : FMT_SATURATE);
            check_against_ref(&e, specs[j], in, ROWS, COLS, &o);
            float out[ROWS * COLS];
            fmt_stats st = {0};
            quant("e4m3", specs[j], out, in, ROWS, COLS, o, &st, NULL);
            uint64_t ninf = 0;
            for (int i = 0; i < ROWS * COLS; i++) ninf += isinf(out[i]) != 0;
            cr_assert_gt(ninf, 0, "%s: the case is reached", specs[j]);
        }
}

// Issue 35: "+tensor" (tiles under an fp32 tensor scale) is the recipe parser's grammar, as
// autocast's policies write it, so every spelling fmt_scaling_name gives a two-level recipe with
// tiles parses back; it is refused where there is no tile or already a second level. Every
// rule of the table is a suffix the parser takes and the spelling gives back.
Test(scale, plus_tensor_and_rule_names) {
    static const struct { const char *spec, *name; int rows, cols; fmt_scale_round r; } ok[] = {
        {"tile:16x16:e4m3+tensor", "tile:16x16:e4m3:rne+tensor", 16, 16, FMT_SCALE_RNE},
        {"block:16:e4m3:up+tensor", "nvfp4:up", 1, 16, FMT_SCALE_UP},
        {"block:16:e4m3+TENSOR", "nvfp4", 1, 16, FMT_SCALE_RNE},
        {"mx:nanblock+tensor", "block:32:e8m0:ocp:nanblock+tensor", 1, 32, FMT_SCALE_OCP},
        {"tile:16x16:e4m3:4over6+tensor", "tile:16x16:e4m3:4over6+tensor", 16, 16, FMT_SCALE_4OVER6},
        {"row+tensor", "tile:1x0:fp32:rne+tensor", 1, 0, FMT_SCALE_RNE},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        fmt_scaling sc, back;
        char name[64], msg[512];
        cr_assert_eq(fmt_scaling_from_name(&sc, ok[i].spec, msg, sizeof msg), FMT_OK, "%s: %s", ok[i].spec, msg);
        cr_expect(sc.tensor_scale && sc.tile_rows == ok[i].rows && sc.tile_cols == ok[i].cols &&
                  sc.scale_round == ok[i].r, "%s", ok[i].spec);
        fmt_scaling_name(&sc, name, sizeof name);
        cr_expect_str_eq(name, ok[i].name, "%s", ok[i].spec);
        cr_assert_eq(fmt_scaling_from_name(&back, name, msg, sizeof msg), FMT_OK, "%s: %s", name, msg);
        cr_expect(back.tensor_scale == sc.tensor_scale && back.tile_rows == sc.tile_rows &&
                  back.tile_cols == sc.tile_cols && back.scale_round == sc.scale_round &&
                  back.nan_block == sc.nan_block && fmt_same_layout(&back.scale_fmt, &sc.scale_fmt), "%s", name);
    }
    static const char *bad[] = {"nvfp4+tensor", "none+tensor", "tensor+tensor", "tile:0x0:fp32+tensor",
                                "block:16:e4m3:4over6", "+tensor"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fmt_scaling sc;
        char msg[512];
        cr_expect_neq(fmt_scaling_from_name(&sc, bad[i], msg, sizeof msg), FMT_OK, "%s", bad[i]);
        cr_expect(strstr(msg, bad[i]) != NULL, "%s: %s", bad[i], msg);
    }
    for (int r = 0; r < FMT_SCALE_NRULES; r++) {
        fmt_scaling sc;
        char name[64], msg[512];
        fmt_scaling_from_name(&sc, "tile:16x16:e4m3+tensor", NULL, 0);
        sc.scale_round = (fmt_scale_round)r;
        fmt_scaling_name(&sc, name, sizeof name);
        cr_assert_eq(fmt_scaling_from_name(&sc, name, msg, sizeof msg), FMT_OK, "%s: %s", name, msg);
        cr_expect_eq(sc.scale_round, r, "%s", name);
    }
    char msg[512];
    fmt_scaling sc;
    cr_expect_eq(fmt_scaling_from_name(&sc, "blocky", msg, sizeof msg), FMT_EUNKNOWN);
    cr_expect(strstr(msg, ":ocp, :up, :rne, :ceil, :even, :rceil or :4over6") && strstr(msg, "+tensor"), "%s", msg);
}
