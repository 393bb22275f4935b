// round_f32.c: the generic float32 rounding kernel, for every format whose values embed in float32
// (every named format up to fp32, e8m0 included), and its copies for wider instruction sets.
// Constraints: branch-free 32-bit integer arithmetic on eight lanes at once, written with
// GCC/Clang vector extensions so that it is vectorised by construction (AVX-512, AVX2, SSE or
// NEON), not by the auto-vectoriser's goodwill; no intrinsics (round_hw.c has those), no libm
// per element, no MPFR. This kernel is the reference every other float32 path is held to.
//
// The method: write |x| = sig * 2^(E'-150) with sig < 2^24. The format's last place at x is
// 2^ue, ue = max(exponent(x), emin) - m, so s = ue - (E'-150) low bits of sig are dropped;
// the mode decides from (lsb, guard, sticky) whether to add one; the result is q * 2^ue, exact
// in float32. Overflow is judged on that unbounded-exponent result, as IEEE 754 defines it.
// round_f64.c is the same method on scalar 64-bit lanes, and the tests hold the two together.
//
// Copies per instruction set (see round_internal.h): the kernel is one always-inline body,
// compiled once for the build's -march and, in a portable build, again for x86-64-v3 and
// x86-64-v4; round.c picks the widest the CPU runs. Without them, the per-lane variable shifts of
// SSE code are scalarised (docs/benchmarks.md, "Comments' measurements", has the cost).
#include <math.h>
#include <string.h>

#include "isa_targets.h"
#include "round_internal.h"
#include "vec_internal.h"

#define FMT_LANE_FN FMT__VEC
#include "round_lane_internal.h"

typedef fmt__k32 k32;

// W draws: lane l holds fmt_rng_u32(key, index + l).
static inline __attribute__((always_inline)) vu rng_w(fmt_rng_key key, uint64_t index) {
    return fmt_rng_u32x8(key, index);
}

static uint64_t hsum(vu v) {
    uint64_t s = 0;
    for (int l = 0; l < W; l++) s += v[l];
    return s;
}

static inline __attribute__((always_inline)) void
round_loop(const k32 *k, const fmt_rng_key key, const uint64_t first, const bool simple,
           const fmt_round_mode mode, float *restrict x, const size_t n, fmt__counts *out) {
    fmt__lane_counts vc = {0};
    fmt__lane_counts *c = out ? &vc : NULL;
    const vu zero_draws = {0};
    size_t i = 0;
    for (; i + W <= n; i += W) {
        vf v;
        memcpy(&v, x + i, sizeof v);
        const vu rnd = mode == FMT_SR ? rng_w(key, first + i) : zero_draws;
        v = fmt__lane_round(k, simple, mode, v, rnd, c);
        memcpy(x + i, &v, sizeof v);
    }
    if (i < n) {  // the tail, padded with +0; the padding lanes are masked out of the counts
        float tail[W] = {0};
        memcpy(tail, x + i, (n - i) * sizeof *x);
        vf v;
        memcpy(&v, tail, sizeof v);
        const vu rnd = mode == FMT_SR ? rng_w(key, first + i) : zero_draws;
        fmt__lane_counts tc = {0};
        v = fmt__lane_round(k, simple, mode, v, rnd, c ? &tc : NULL);
        memcpy(tail, &v, sizeof v);
        memcpy(x + i, tail, (n - i) * sizeof *x);
        const vu lane = {0, 1, 2, 3, 4, 5, 6, 7};
        const vu live = lt(lane, lane * 0 + (uint32_t)(n - i));
        vc.ovf += tc.ovf & live, vc.unf += tc.unf & live, vc.sub += tc.sub & live;
        vc.nan += tc.nan & live, vc.inv += tc.inv & live;
        vc.amax = sel(lt(vc.amax, tc.amax) & live, tc.amax, vc.amax);
    }
    if (!out) return;
    out->overflow += hsum(vc.ovf), out->underflow += hsum(vc.unf), out->subnormal += hsum(vc.sub);
    out->nan_in += hsum(vc.nan), out->invalid += hsum(vc.inv);
    for (int l = 0; l < W; l++) {
        float a;
        memcpy(&a, (const uint32_t *)&vc.amax + l, sizeof a);
        if (a > out->amax) out->amax = a;
    }
}

static uint32_t f2u(double d) {
    float f = (float)d;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

void fmt__k32_make(k32 *out, const fmt__kparams *p) {
    const k32 k = {
        .sbase = 23 - p->m, .emin_b = p->emin + 127, .bias = p->bias, .r = p->sr_bits, .sr_variant = p->sr_variant,
        .m0 = p->m == 0, .signed_fmt = p->is_signed, .flush = p->flush, .clamp_min = p->clamp_min,
        .has_nan = p->has_nan, .has_zero = p->has_zero,
        .negzero_mask = p->negzero ? ~0u : 0u, .inf_exact_mask = p->inf_exact ? ~0u : 0u,
        .nan_sign_mask = p->has_nan ? 0u : ~0u, .nan_sign = p->is_signed ? ~0u : 0u,
        .min_normal_bits = f2u(p->min_normal),
        .max_bits = f2u(p->max), .min_sub_bits = f2u(ldexp(1.0, p->emin - p->m)),
        .ovf0 = f2u(p->ovf[0]), .ovf1 = f2u(p->ovf[1]), .inf_res = f2u(p->inf_result),
        .nan_res = p->has_nan ? 0x7fc00000u : 0u, .inval_res = f2u(p->inval_result), .ninf_res = f2u(p->ninf_result),
        .after_round_mask = p->inval_after_round ? ~0u : 0u,
    };
    *out = k;
}

// One loop per mode (and per simple or not), so that these switches are outside the vector loop.
static inline __attribute__((always_inline)) void
mode_loop(const k32 *k, const fmt_rng_key key, const uint64_t first, const bool simple,
          const fmt_round_mode mode, float *x, const size_t n, fmt__counts *c) {
    switch (mode) {
    case FMT_RNE: round_loop(k, key, first, simple, FMT_RNE, x, n, c); break;
    case FMT_RNA: round_loop(k, key, first, simple, FMT_RNA, x, n, c); break;
    case FMT_RTZ: round_loop(k, key, first, simple, FMT_RTZ, x, n, c); break;
    case FMT_RUP: round_loop(k, key, first, simple, FMT_RUP, x, n, c); break;
    case FMT_RDN: round_loop(k, key, first, simple, FMT_RDN, x, n, c); break;
    case FMT_RTO: round_loop(k, key, first, simple, FMT_RTO, x, n, c); break;
    case FMT_SR: round_loop(k, key, first, simple, FMT_SR, x, n, c); break;
    default: break;
    }
}

static inline __attribute__((always_inline)) void
kernel_body(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n, uint64_t base,
            fmt__counts *c) {
    k32 k;
    fmt__k32_make(&k, p);
    const bool simple = fmt__k32_simple(&k);
    const uint64_t first = p->offset + base;
    // Per-lane 32-bit counters: blocks of at most 2^31 elements cannot wrap them.
    for (size_t done = 0; done < n;) {
        const size_t len = n - done < ((size_t)1 << 31) ? n - done : (size_t)1 << 31;
        if (simple) mode_loop(&k, p->key, first + done, true, mode, x + done, len, c);
        else mode_loop(&k, p->key, first + done, false, mode, x + done, len, c);
        done += len;
    }
}

// --- the copies per instruction set (same source, same bits)

typedef void kernel_fn(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n,
                       uint64_t base, fmt__counts *c);

static void kernel_generic(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n,
                           uint64_t base, fmt__counts *c) {
    kernel_body(p, mode, x, n, base, c);
}

#ifdef FMT__AVX2_COPY
FMT_TARGET(FMT_ISA_V3) static void
kernel_avx2(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n, uint64_t base,
            fmt__counts *c) {
    kernel_body(p, mode, x, n, base, c);
}
#endif

#ifdef FMT__AVX512_COPY
FMT_TARGET(FMT_ISA_V4) static void
kernel_avx512(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n, uint64_t base,
              fmt__counts *c) {
    kernel_body(p, mode, x, n, base, c);
}
#endif

// The copy for path, or NULL where this build has none or the CPU cannot run it.
static kernel_fn *variant(fmt_round_path path) {
    if (!fmt__copy_runs(path)) return NULL;
    switch (path) {
    case FMT_PATH_GENERIC: return kernel_generic;
#ifdef FMT__AVX2_COPY
    case FMT_PATH_AVX2: return kernel_avx2;
#endif
#ifdef FMT__AVX512_COPY
    case FMT_PATH_AVX512: return kernel_avx512;
#endif
    default: return NULL;
    }
}

void fmt__round_f32_kernel(const fmt__kparams *p, fmt_round_path path, fmt_round_mode mode,
                           float *x, size_t n, uint64_t base, fmt__counts *c) {
    kernel_fn *fn = NULL;
    if (path == FMT_PATH_HW || path == FMT_PATH_LEAN) {
        if (path == FMT_PATH_HW ? fmt__round_f32_hw(p, mode, x, n) : fmt__round_f32_lean(p, mode, x, x, n, base, c))
            return;
        fn = variant(fmt__best_copy());  // declined: the generic kernel (the same bits)
    } else {
        fn = variant(path);
    }
    if (fn) fn(p, mode, x, n, base, c);
}
