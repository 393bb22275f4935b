// round_f32.c: the fast float32 rounding kernel, for formats whose values embed in float32 and
// whose smallest normal is at or above float32's (every named format up to fp32 but e8m0).
// Constraints: branch-free 32-bit integer arithmetic per element so that the compiler
// vectorises the loop (checked with -fopt-info-vec); no libm, no MPFR.
//
// The method: write |x| = sig * 2^(E'-150) with sig < 2^24. The format's last place at x is
// 2^ue, ue = max(exponent(x), emin) - m, so s = ue - (E'-150) low bits of sig are dropped;
// the mode decides from (lsb, guard, sticky) whether to add one; the result is q * 2^ue, exact
// in float32. Overflow is judged on that unbounded-exponent result, as IEEE 754 defines it.
#include <string.h>

#include "round_internal.h"

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

// Float copies of the per-call parameters, so the hot loop touches no doubles.
typedef struct {
    int32_t sbase, emin_b, bias, r;
    bool m0, signed_fmt, negzero, flush, clamp_min, has_nan, has_zero, inf_exact;
    float max, min_normal, ovf0, ovf1, inf_res, nan_res, inval_res;
} k32;

static inline __attribute__((always_inline)) float
round_one(const k32 *k, const fmt_round_mode mode, const float x, const uint32_t rnd,
          unsigned *ovf_out, unsigned *unf_out, unsigned *sub_out, unsigned *nan_out,
          unsigned *inv_out) {
    const uint32_t b = f2u(x), sign = b >> 31, a = b & 0x7fffffffu, E = a >> 23;
    const uint32_t Ep = E ? E : 1;
    const uint32_t sig = (a & 0x7fffffu) | (E ? 0x800000u : 0u);
    int32_t d = k->emin_b - (int32_t)Ep;
    d = d > 0 ? d : 0;
    const int32_t s = k->sbase + d;
    const uint32_t s25 = s < 25 ? (uint32_t)s : 25u;  // sig < 2^24: dropping 25 bits drops all
    uint32_t q = sig >> s25;
    const uint32_t rem = sig & ((1u << s25) - 1u);
    const uint32_t half = (1u << s25) >> 1;
    const uint32_t guard = (rem & half) != 0, sticky = (rem & (half - 1u)) != 0;
    const int32_t ue = (int32_t)Ep - 150 + s;
    // With no fraction bits the last bit of a code is the exponent's (e8m0-like codes).
    const uint32_t lsb = k->m0 ? (((uint32_t)(ue + k->bias) & 1u) & (q != 0)) : (q & 1u);
    uint32_t sr_up = 0;
    if (mode == FMT_SR) {
        // Round up iff the top r dropped bits exceed an r-bit uniform draw.
        const int32_t t = s - k->r;
        const uint32_t top = t >= 0 ? rem >> (t < 31 ? t : 31) : rem << (-t < 31 ? -t : 31);
        sr_up = (rnd >> (32 - k->r)) < top;
    }
    q += fmt__round_inc(mode, sign, lsb, guard, sticky, sr_up);
    const float p2 = ue >= -126 ? u2f((uint32_t)(ue + 127) << 23) : u2f(1u << ((ue + 149) & 31));
    const float mag = (float)(int32_t)q * p2;

    const uint32_t special = E == 255u, is_nan = special & ((a & 0x7fffffu) != 0);
    const uint32_t over = !special & (mag > k->max);
    float r = over ? (sign ? k->ovf1 : k->ovf0) : mag;
    r = special ? (is_nan ? k->nan_res : k->inf_res) : r;
    const uint32_t tiny = !special & (r < k->min_normal);  // includes zero
    if (k->flush) r = tiny ? 0.0f : r;
    if (k->clamp_min) r = tiny ? k->min_normal : r;
    uint32_t inval = 0;
    if (!k->signed_fmt) {
        inval = (!is_nan) & ((sign & (a != 0)) | (!k->has_zero & (a == 0)));
        r = inval ? k->inval_res : r;
    }
    const uint32_t zero = r == 0.0f;
    // Signed zero only where the format has -0; a NaN input without NaN codes becomes -0.
    uint32_t osign = sign & (k->negzero | !zero);
    if (!k->has_nan) osign = is_nan ? (uint32_t)k->signed_fmt : osign;
    if (!k->signed_fmt) osign = 0;

    *ovf_out = (over | (special & !is_nan & !k->inf_exact)) & !inval;
    *unf_out = !special & !inval & (a != 0) & (zero | (k->clamp_min & tiny));
    *sub_out = !special & !zero & (r < k->min_normal) & !k->clamp_min;
    *nan_out = is_nan;
    *inv_out = inval;
    return u2f(f2u(r) | osign << 31);
}

static inline __attribute__((always_inline)) void
round_loop(const k32 *k, const fmt_rng_key key, const uint64_t first, const fmt_round_mode mode,
           float *restrict x, const size_t n, fmt__counts *c) {
    unsigned ovf, unf, sub, nan, inv;
    if (!c) {
        for (size_t i = 0; i < n; i++) {
            uint32_t rnd = mode == FMT_SR ? fmt_rng_u32(key, first + i) : 0;
            x[i] = round_one(k, mode, x[i], rnd, &ovf, &unf, &sub, &nan, &inv);
        }
        return;
    }
    uint32_t novf = 0, nunf = 0, nsub = 0, nnan = 0, ninv = 0;
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        const float xi = x[i];
        uint32_t rnd = mode == FMT_SR ? fmt_rng_u32(key, first + i) : 0;
        x[i] = round_one(k, mode, xi, rnd, &ovf, &unf, &sub, &nan, &inv);
        novf += ovf, nunf += unf, nsub += sub, nnan += nan, ninv += inv;
        const float ax = xi < 0 ? -xi : xi;  // NaN compares false and is skipped
        amax = ax > amax ? ax : amax;
    }
    c->overflow += novf, c->underflow += nunf, c->subnormal += nsub;
    c->nan_in += nnan, c->invalid += ninv;
    if (amax > c->amax) c->amax = amax;
}

void fmt__round_f32_kernel(const fmt__kparams *p, fmt_round_mode mode, float *x, size_t n,
                           uint64_t base, fmt__counts *c) {
    const k32 k = {
        .sbase = 23 - p->m, .emin_b = p->emin + 127, .bias = p->bias, .r = p->sr_bits,
        .m0 = p->m == 0, .signed_fmt = p->is_signed, .negzero = p->negzero, .flush = p->flush,
        .clamp_min = p->clamp_min, .has_nan = p->has_nan, .has_zero = p->has_zero,
        .inf_exact = p->inf_exact, .max = (float)p->max, .min_normal = (float)p->min_normal,
        .ovf0 = (float)p->ovf[0], .ovf1 = (float)p->ovf[1], .inf_res = (float)p->inf_result,
        .nan_res = p->has_nan ? __builtin_nanf("") : 0.0f,
        .inval_res = p->has_nan ? __builtin_nanf("") : 0.0f,
    };
    const uint64_t first = p->offset + base;
    // One specialised loop per mode, so the mode switch is outside the vector loop. The
    // count is kept below 2^32 per call of round_loop so the 32-bit counters cannot wrap.
    for (size_t done = 0; done < n;) {
        size_t len = n - done < ((size_t)1 << 30) ? n - done : (size_t)1 << 30;
        float *xs = x + done;
        switch (mode) {
        case FMT_RNE: round_loop(&k, p->key, first + done, FMT_RNE, xs, len, c); break;
        case FMT_RNA: round_loop(&k, p->key, first + done, FMT_RNA, xs, len, c); break;
        case FMT_RTZ: round_loop(&k, p->key, first + done, FMT_RTZ, xs, len, c); break;
        case FMT_RUP: round_loop(&k, p->key, first + done, FMT_RUP, xs, len, c); break;
        case FMT_RDN: round_loop(&k, p->key, first + done, FMT_RDN, xs, len, c); break;
        case FMT_RTO: round_loop(&k, p->key, first + done, FMT_RTO, xs, len, c); break;
        case FMT_SR: round_loop(&k, p->key, first + done, FMT_SR, xs, len, c); break;
        default: return;
        }
        done += len;
    }
}
