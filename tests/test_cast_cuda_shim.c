// test_cast_cuda_shim.c: the CUDA casts (kernels/cast_cuda.h: element rounding and block
// quantization, kernels/cuda/cast_cuda_kernels.cuh) against the CPU library, bit for bit, results and
// telemetry. Built twice: as this suite, the kernels run on the CPU through tests/cuda_shim.cpp
// (the same source nvcc compiles; every machine, make test); as test_cast_cuda (tests/
// test_cast_cuda.c defines CAST_ON_DEVICE), on device memory through mm_cuda_round_f32 and
// mm_cuda_quantize_f32 (make test-gpu; skipped without a GPU unless FPLAB_REQUIRE_GPU=1).
// What is checked:
// - casts: every table format, some custom and IEEE P3109 ones, every mode, every overflow
//   policy, flushing on and off, stochastic rounding with variants A, B, C, 3 and 32 random
//   bits and several offsets; inputs are every code's neighbourhood (the value, one float32 ulp
//   either side, the midpoints to the next value and one ulp either side of them; strided for
//   16-bit formats in the loops, all of them once), float32 subnormals, the overflow threshold,
//   +-0, +-inf, NaNs with both signs and payloads, and seeded random bit patterns and values
//   around the format's range (a few hundred thousand per format in the full pass). Results
//   must be the CPU's bits (NaNs included), counts fmt_stats' exactly.
// - block quantization: every recipe and scale rule (mx and its rules, nanblock, recip, nvfp4,
//   nvfp4:4over6, tensor, row, col, Transformer Engine's blocks, 1-D and 2-D tiles with fp32,
//   bf16, e4m3, e5m3 and e8m0 scales), several element formats (fp32 elements take the float64
//   exact quotient), ragged shapes, zero blocks, subnormals, inf and NaN; modes rne, rtz, rup and
//   stochastic rounding at two offsets; out, elems and scales bit for bit (a NaN where the CPU
//   has one), fmt_stats and fmt_quant_info's counts exactly.
// Random inputs come from the library's generator; the seed is printed and read from FPLAB_SEED.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/codec.h"
#include "formats/rng.h"
#include "formats/scale.h"
#include "kernels/cast_cuda.h"
#include "test_util.h"

// --- the backend: the shim on host memory, or the device

#ifdef CAST_ON_DEVICE
#define SUITE "test_cast_cuda"
#include "cuda_suite.h"
#ifdef FPLAB_HAVE_CUDA
// Device copies of in (n floats), out, elems, scales (ns) and the counters; the call; copies back.
static int backend(const fmt_t *f, const fmt_scaling *sc, float *out, float *elems, float *scales, const float *in,
                   size_t rows, size_t cols, const fmt_round_opts *o, uint64_t *counts) {
    const size_t n = rows * cols, ns = sc ? fmt_scale_count(sc, rows, cols) : 0;
    float *d_in, *d_out, *d_el = NULL, *d_sc = NULL;
    uint64_t *d_c;
    cr_assert_eq(cudaMalloc((void **)&d_in, n * 4 + 4), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&d_out, n * 4 + 4), cudaSuccess);
    if (elems) cr_assert_eq(cudaMalloc((void **)&d_el, n * 4 + 4), cudaSuccess);
    if (scales) cr_assert_eq(cudaMalloc((void **)&d_sc, ns * 4 + 4), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&d_c, MM_CUDA_NCOUNTS * 8), cudaSuccess);
    cr_assert_eq(cudaMemcpy(d_in, in, n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    cr_assert_eq(cudaMemset(d_c, 0, MM_CUDA_NCOUNTS * 8), cudaSuccess);
    const int st = sc ? mm_cuda_quantize_f32(f, sc, d_out, d_el, d_sc, d_in, rows, cols, o, d_c, NULL)
                      : mm_cuda_round_f32(f, d_out, d_in, n, o, d_c, NULL);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
    cr_assert_eq(cudaMemcpy(out, d_out, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    if (elems) cr_assert_eq(cudaMemcpy(elems, d_el, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    if (scales) cr_assert_eq(cudaMemcpy(scales, d_sc, ns * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert_eq(cudaMemcpy(counts, d_c, MM_CUDA_NCOUNTS * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(d_in), cudaFree(d_out), cudaFree(d_el), cudaFree(d_sc), cudaFree(d_c);
    return st;
}
#else
static int backend(const fmt_t *f, const fmt_scaling *sc, float *out, float *elems, float *scales, const float *in,
                   size_t rows, size_t cols, const fmt_round_opts *o, uint64_t *counts) {
    (void)f, (void)sc, (void)out, (void)elems, (void)scales, (void)in, (void)rows, (void)cols, (void)o, (void)counts;
    return MM_ENODEV;
}
#endif

ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
    cuda_suite_report(stats, "CUDA casts", "test_cast_cuda");
}
#else
#define SUITE "test_cast_cuda_shim"
int shim_cast_round_f32(const fmt_t *f, float *out, const float *in, size_t n, const fmt_round_opts *o,
                        uint64_t *counts);
int shim_cast_quantize_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, float *elems, float *scales,
                           const float *in, size_t rows, size_t cols, const fmt_round_opts *o, uint64_t *counts);

static void need_backend(void) {}

static int backend(const fmt_t *f, const fmt_scaling *sc, float *out, float *elems, float *scales, const float *in,
                   size_t rows, size_t cols, const fmt_round_opts *o, uint64_t *counts) {
    return sc ? shim_cast_quantize_f32(f, sc, out, elems, scales, in, rows, cols, o, counts)
              : shim_cast_round_f32(f, out, in, rows * cols, o, counts);
}
#endif

static uint64_t test_seed(const char *test) { return tu_seed(SUITE, test, 0x63617374ULL); }

// --- inputs

typedef struct {
    float *v;
    size_t n, cap;
} vec;

static void push(vec *a, float x) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 4096;
        a->v = realloc(a->v, a->cap * sizeof *a->v);
        cr_assert(a->v);
    }
    a->v[a->n++] = x;
}

static void push_near(vec *a, float x) {
    push(a, x), push(a, -x);
    push(a, nextafterf(x, INFINITY)), push(a, nextafterf(x, -INFINITY));
}

static int cmp_float(const void *p, const void *q) {
    const float a = *(const float *)p, b = *(const float *)q;
    return (a > b) - (a < b);
}

// Every stride-th code's neighbourhood (see the file's comment), the specials and nrand random
// inputs (half random bit patterns, half values around the format's range).
static vec inputs(const fmt_t *f, size_t stride, size_t nrand, tu_rng *r) {
    vec a = {0};
    static const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                        0xffc00000u, 0x7f800001u, 0xff812345u, 0x7fbfffffu, 0x00000001u,
                                        0x80000001u, 0x007fffffu, 0x00400000u, 0x7f7fffffu, 0xff7fffffu,
                                        0x00800000u, 0x3f800000u};
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) push(&a, tu_u2f(specials[i]));
    if (f->bits <= 16) {
        vec pos = {0};
        const uint64_t ncodes = 1ULL << f->bits;
        for (uint64_t c = 0; c < ncodes; c += stride) {
            const double v = fmt_decode1(f, c);
            if (v == v && v >= 0 && v <= FLT_MAX) push(&pos, (float)v);
        }
        if (f->max <= FLT_MAX) push(&pos, (float)f->max);
        qsort(pos.v, pos.n, sizeof *pos.v, cmp_float);
        for (size_t i = 0; i < pos.n; i++) {
            push_near(&a, pos.v[i]);
            if (i + 1 < pos.n) push_near(&a, (float)(((double)pos.v[i] + pos.v[i + 1]) / 2));
        }
        free(pos.v);
    }
    if (f->max <= FLT_MAX) {  // the overflow threshold: max plus half an ulp, either side
        const double m = f->max, h = m + fmt_ulp(f, m) / 2;
        push_near(&a, (float)m), push_near(&a, (float)h);
    }
    const double lmax = f->max < FLT_MAX ? log2(f->max) : 127, lmin = log2(f->min_subnormal > 0x1p-149 ? f->min_subnormal : 0x1p-149);
    for (size_t i = 0; i < nrand; i++) {
        if (i % 2) {
            push(&a, tu_u2f(tu_rng_u32(r)));
        } else {
            const double e = lmin - 2 + tu_rng_unif(r) * (lmax - lmin + 4);
            push(&a, (float)((tu_rng_u32(r) & 1 ? -1 : 1) * exp2(e)));
        }
    }
    return a;
}

// --- comparisons

static void check_counts(const char *what, const fmt_stats *want, const uint64_t *counts) {
    fmt_stats got = {0};
    mm_cuda_counts_read(counts, &got, NULL);
    cr_assert(got.n == want->n && got.overflow == want->overflow && got.underflow == want->underflow &&
                  got.subnormal == want->subnormal && got.nan_in == want->nan_in && got.invalid == want->invalid &&
                  got.amax == want->amax,
              "%s: counts n %llu/%llu overflow %llu/%llu underflow %llu/%llu subnormal %llu/%llu nan %llu/%llu "
              "invalid %llu/%llu amax %a/%a (got/want)",
              what, (unsigned long long)got.n, (unsigned long long)want->n, (unsigned long long)got.overflow,
              (unsigned long long)want->overflow, (unsigned long long)got.underflow,
              (unsigned long long)want->underflow, (unsigned long long)got.subnormal,
              (unsigned long long)want->subnormal, (unsigned long long)got.nan_in, (unsigned long long)want->nan_in,
              (unsigned long long)got.invalid, (unsigned long long)want->invalid, got.amax, want->amax);
}

// exact_nan: NaNs compare by their bits too (the casts); else any NaN equals any NaN.
static void check_same(const char *what, const char *which, const float *got, const float *want, const float *in,
                       size_t n, bool exact_nan) {
    for (size_t i = 0; i < n; i++) {
        const uint32_t g = tu_f2u(got[i]), w = tu_f2u(want[i]);
        const bool ok = exact_nan ? g == w : (g == w || (got[i] != got[i] && want[i] != want[i]));
        if (!ok)
            cr_assert_fail("%s: %s[%zu] of x = %a (0x%08x): got %a (0x%08x), CPU %a (0x%08x)", what, which, i,
                           (double)in[i], tu_f2u(in[i]), (double)got[i], g, (double)want[i], w);
    }
}

// One cast: the CPU's fmt_round_f32 against the backend.
static void cast_case(const char *what, const fmt_t *f, const vec *x, const fmt_round_opts *o) {
    float *want = malloc(x->n * sizeof *want), *got = malloc(x->n * sizeof *got);
    cr_assert(want && got);
    memcpy(want, x->v, x->n * sizeof *want);
    fmt_stats st = {0};
    cr_assert_eq(fmt_round_f32(f, want, x->n, o, &st), FMT_OK, "%s", what);
    uint64_t counts[MM_CUDA_NCOUNTS] = {0};
    cr_assert_eq(backend(f, NULL, got, NULL, NULL, x->v, 1, x->n, o, counts), MM_OK, "%s", what);
    check_same(what, "out", got, want, x->v, x->n, true);
    check_counts(what, &st, counts);
    free(want), free(got);
}

// --- casts

// Formats beyond the table: custom encodings, unsigned, without zero, IEEE P3109, wider than fp32.
static const char *const extra_formats[] = {"e5m3:fn", "e4m3:unsigned", "e3m3:fnuz", "e5m0:e8m0", "binary8p3se",
                                            "binary8p4uf", "binary6p3sf", "binary8p1ue", "e8m30", "e11m52"};

static size_t nformats(void) { return fmt_table_count() + sizeof extra_formats / sizeof *extra_formats; }

static fmt_t format_i(size_t i) {
    if (i < fmt_table_count()) return *fmt_table_get(i);
    return tu_fmt(extra_formats[i - fmt_table_count()]);
}

static bool cast_format(const fmt_t *f) { return !fmt_is_wide(f); }

// Every mode x overflow policy x flushing, on a strided neighbourhood set.
static void modes_policies(const char *test, bool flush_too) {
    tu_rng r = {fmt_rng_make_key(test_seed(test), 1), 0};
    for (size_t i = 0; i < nformats(); i++) {
        const fmt_t f = format_i(i);
        if (!cast_format(&f)) continue;
        vec x = inputs(&f, f.bits > 12 ? 97 : 1, 4000, &r);
        for (int m = 0; m < FMT_NMODES; m++)
            for (int ov = 0; ov < FMT_NOVERFLOW; ov++)
                for (int fl = 0; fl <= (int)flush_too; fl++) {
                    fmt_round_opts o = {.mode = (fmt_round_mode)m, .overflow = (fmt_overflow)ov,
                                        .flush_subnormals = fl, .seed = 7, .stream = 3, .offset = 11};
                    char what[160];
                    snprintf(what, sizeof what, "%s %s %s%s", f.name, fmt_mode_name(o.mode),
                             fmt_overflow_name(o.overflow), fl ? " flush" : "");
                    cast_case(what, &f, &x, &o);
                }
        free(x.v);
    }
}

Test(cast_cuda, modes_and_policies, .timeout = 600) {
    need_backend();
    modes_policies("modes_and_policies", true);
}

// Stochastic rounding: P3109's variants, few and many random bits, offsets across the 2^32 fold.
Test(cast_cuda, stochastic_rounding, .timeout = 600) {
    need_backend();
    tu_rng r = {fmt_rng_make_key(test_seed("stochastic_rounding"), 2), 0};
    static const uint64_t offsets[] = {0, 12345, 0xfffffff0ULL, 0x100000003ULL};
    for (size_t i = 0; i < nformats(); i++) {
        const fmt_t f = format_i(i);
        if (!cast_format(&f)) continue;
        vec x = inputs(&f, f.bits > 12 ? 61 : 1, 6000, &r);
        for (int v = 0; v < FMT_NSR_VARIANTS; v++)
            for (int b = 0; b < 3; b++)
                for (size_t k = 0; k < 4; k++) {
                    if (b != 1 && k % 2) continue;
                    fmt_round_opts o = {.mode = FMT_SR, .sr_variant = (fmt_sr_variant)v,
                                        .sr_bits = b == 0 ? 3 : b == 1 ? 0 : 13, .seed = 42 + k, .stream = k,
                                        .offset = offsets[k], .overflow = (fmt_overflow)(k % FMT_NOVERFLOW)};
                    char what[160];
                    snprintf(what, sizeof what, "%s sr:%s bits %d offset %llu", f.name,
                             fmt_sr_variant_name(o.sr_variant), o.sr_bits, (unsigned long long)o.offset);
                    cast_case(what, &f, &x, &o);
                }
        free(x.v);
    }
}

// Every code's neighbourhood and a few hundred thousand random inputs per format.
Test(cast_cuda, full_neighbourhoods, .timeout = 600) {
    need_backend();
    tu_rng r = {fmt_rng_make_key(test_seed("full_neighbourhoods"), 3), 0};
    static const fmt_round_mode modes[] = {FMT_RNE, FMT_RTO, FMT_SR};
    for (size_t i = 0; i < nformats(); i++) {
        const fmt_t f = format_i(i);
        if (!cast_format(&f)) continue;
        vec x = inputs(&f, 1, 300000, &r);
        for (size_t m = 0; m < 3; m++) {
            fmt_round_opts o = {.mode = modes[m], .overflow = (fmt_overflow)(m % 2 ? FMT_SATURATE : FMT_OVERFLOW_IEEE),
                                .seed = 9, .offset = 1000003};
            char what[160];
            snprintf(what, sizeof what, "%s %s (all codes)", f.name, fmt_mode_name(o.mode));
            cast_case(what, &f, &x, &o);
        }
        free(x.v);
    }
}

// In place (out == in), an empty call, and the refusals.
Test(cast_cuda, in_place_and_refusals) {
    need_backend();
    const fmt_t f = tu_fmt("e4m3");
    fmt_round_opts o = {0};
    uint64_t counts[MM_CUDA_NCOUNTS] = {0};
    float x[3] = {1.3f, 500.0f, -0.001f};
    cr_assert_eq(backend(&f, NULL, x, NULL, NULL, x, 1, 0, &o, counts), MM_OK);
    cr_assert_eq(counts[MM_CUDA_N], 0);
    o.sr_bits = 33;
    cr_assert_eq(backend(&f, NULL, x, NULL, NULL, x, 1, 3, &o, counts), MM_EINVAL);
    o.sr_bits = 0;
    o.mode = FMT_NMODES;
    cr_assert_eq(backend(&f, NULL, x, NULL, NULL, x, 1, 3, &o, counts), MM_EINVAL);
#ifndef CAST_ON_DEVICE
    o.mode = FMT_RNE;
    cr_assert_eq(shim_cast_round_f32(&f, x, x, 3, &o, counts), MM_OK);
    cr_assert(x[0] == 1.25f && isnan(x[1]) && x[2] == -0x1p-9f, "%a %a %a", x[0], x[1], x[2]);  // e4m3: no inf
    cr_assert_eq(counts[MM_CUDA_OVERFLOW], 1);
#endif
    fmt_scaling sc = tu_scaling("mx");
    sc.tile_cols = -1;
    cr_assert_eq(backend(&f, &sc, x, NULL, NULL, x, 1, 3, NULL, counts), MM_EINVAL);
}

// --- block quantization

static const char *const recipes[] = {
    "none", "tensor", "row", "col", "mx", "mx:up", "mx:ceil", "mx:even", "mx:rceil", "mx:nanblock", "mx:recip",
    "nvfp4", "nvfp4:4over6", "nvfp4:up", "nvfp4:ocp", "nvfp4:recip", "fp8block1x128", "fp8block128x128",
    "fp8block1x128:pow2", "block:16:e4m3", "block:32:e5m3:fn:up", "block:8:bf16:rceil", "tile:16x16:fp32",
    "tile:4x8:bf16", "tile:2x32:e8m0:even", "tile:0x1:fp32", "block:32:e8m0:nanblock"};

static const char *const elements[] = {"e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "e1m6:finite:bias=1", "bf16", "fp32"};

// rows x cols inputs: scaled normals with outliers, zero rows, subnormals and (special) infs and NaNs.
static float *quant_inputs(tu_rng *r, size_t rows, size_t cols, bool special) {
    float *x = malloc(rows * cols * sizeof *x);
    cr_assert(x);
    const double scale = exp2(tu_rng_int(r, -30, 30));
    for (size_t i = 0; i < rows * cols; i++) {
        double v = tu_rng_normal(r) * scale;
        const uint32_t k = tu_rng_u32(r) % 1000;
        if (k < 5) v *= 1e4;
        else if (k < 10) v = tu_u2f(tu_rng_u32(r) & 0x807fffffu);  // a float32 subnormal
        else if (k < 14) v = 0;
        else if (special && k < 16) v = k == 14 ? INFINITY * (tu_rng_u32(r) & 1 ? 1 : -1) : NAN;
        x[i] = (float)v;
    }
    if (rows > 2)
        for (size_t c = 0; c < cols; c++) x[cols + c] = 0;  // a zero row: empty tiles
    return x;
}

static void quant_case(const char *what, const fmt_t *elem, const fmt_scaling *sc, const float *x, size_t rows,
                       size_t cols, const fmt_round_opts *o) {
    const size_t n = rows * cols, ns = fmt_scale_count(sc, rows, cols);
    float *want = malloc(n * 4 + 4), *got = malloc(n * 4 + 4), *we = malloc(n * 4 + 4), *ge = malloc(n * 4 + 4);
    float *ws = malloc(ns * 4 + 4), *gs = malloc(ns * 4 + 4);
    cr_assert(want && got && we && ge && ws && gs);
    fmt_stats st = {0};
    fmt_quant_info info = {.scales = ws, .elems = we};
    cr_assert_eq(fmt_quantize_f32(elem, sc, want, x, rows, cols, o, &st, &info), FMT_OK, "%s", what);
    uint64_t counts[MM_CUDA_NCOUNTS] = {0};
    cr_assert_eq(backend(elem, sc, got, ge, gs, x, rows, cols, o, counts), MM_OK, "%s", what);
    check_same(what, "out", got, want, x, n, false);
    check_same(what, "elems", ge, we, x, n, false);
    for (size_t t = 0; t < ns; t++)
        cr_assert(tu_f2u(gs[t]) == tu_f2u(ws[t]) || (gs[t] != gs[t] && ws[t] != ws[t]),
                  "%s: scale %zu: got %a, CPU %a", what, t, (double)gs[t], (double)ws[t]);
    check_counts(what, &st, counts);
    fmt_quant_info gi = {0};
    mm_cuda_counts_read(counts, NULL, &gi);
    cr_assert(gi.scales_clipped == info.scales_clipped && gi.scales_nan == info.scales_nan &&
                  (sc->none || tu_f2u(gi.tensor_scale) == tu_f2u(info.tensor_scale)),
              "%s: clipped %llu/%llu, nan scales %llu/%llu, tensor scale %a/%a (got/want)", what,
              (unsigned long long)gi.scales_clipped, (unsigned long long)info.scales_clipped,
              (unsigned long long)gi.scales_nan, (unsigned long long)info.scales_nan, (double)gi.tensor_scale,
              (double)info.tensor_scale);
    free(want), free(got), free(we), free(ge), free(ws), free(gs);
}

// Every recipe with every element format it takes, shapes and modes drawn per case.
Test(cast_cuda, quantize_every_recipe, .timeout = 600) {
    need_backend();
    tu_rng r = {fmt_rng_make_key(test_seed("quantize_every_recipe"), 4), 0};
    for (size_t ri = 0; ri < sizeof recipes / sizeof *recipes; ri++) {
        const fmt_scaling sc = tu_scaling(recipes[ri]);
        for (size_t ei = 0; ei < sizeof elements / sizeof *elements; ei++) {
            const fmt_t elem = tu_fmt(elements[ei]);
            if (sc.tensor_scale && elem.bits > 8) continue;  // two levels: narrow elements
            for (int c = 0; c < 3; c++) {
                const bool big = c == 2 && (strstr(recipes[ri], "128") || strstr(recipes[ri], "tile"));
                const size_t rows = big ? 130 : (size_t)tu_rng_int(&r, 1, 40);
                const size_t cols = big ? 257 : (size_t)tu_rng_int(&r, 1, 100);
                float *x = quant_inputs(&r, rows, cols, c == 1);
                fmt_round_opts o = fmt_scaling_default_opts(&sc);
                static const fmt_round_mode modes[] = {FMT_RNE, FMT_SR, FMT_RTZ, FMT_RUP, FMT_SR};
                o.mode = modes[tu_rng_int(&r, 0, 4)];
                o.seed = 5, o.offset = (uint64_t)tu_rng_int(&r, 0, 3) * 0x7fffffffULL;
                if (c == 1) o.overflow = FMT_OVERFLOW_IEEE;
                char what[200];
                snprintf(what, sizeof what, "%s with %s, %zux%zu, %s %s offset %llu", elements[ei], recipes[ri], rows,
                         cols, fmt_mode_name(o.mode), fmt_overflow_name(o.overflow), (unsigned long long)o.offset);
                quant_case(what, &elem, &sc, x, rows, cols, c == 0 ? NULL : &o);
                free(x);
            }
        }
    }
}

// Tiles at the edges of the scale formats' ranges: amax near FLT_MAX (scales clipped, the
// dequantization overflowing) and tiny (scales clipped at the bottom, NVFP4 blocks zeroed).
Test(cast_cuda, quantize_range_edges) {
    need_backend();
    static const char *const rs[] = {"mx", "mx:ceil", "mx:up", "nvfp4", "nvfp4:4over6", "block:16:e4m3:up",
                                     "tensor", "mx:rceil"};
    static const float amax[] = {FLT_MAX, 3e38f, 1e-30f, 0x1p-140f, 0x1p-149f, 1e30f};
    const fmt_t e4 = tu_fmt("e4m3"), e2 = tu_fmt("e2m1");
    for (size_t ri = 0; ri < sizeof rs / sizeof *rs; ri++)
        for (size_t k = 0; k < sizeof amax / sizeof *amax; k++) {
            const fmt_scaling sc = tu_scaling(rs[ri]);
            float x[4 * 64];
            for (int i = 0; i < 4 * 64; i++) x[i] = amax[k] * (float)((i * 37 % 64) - 31) / 31.0f;
            x[5] = amax[(k + 1) % 6];  // another binade in the same tensor
            char what[120];
            snprintf(what, sizeof what, "%s, amax %a", rs[ri], (double)amax[k]);
            quant_case(what, sc.tensor_scale ? &e2 : &e4, &sc, x, 4, 64, NULL);
        }
}
