// round_f64.c: the float64 rounding kernel, for every format (the float32 API falls back to it
// for e8m0-style formats and for custom formats that do not embed in float32).
// Constraints: the same method as round_f32.c on 64-bit integers (|x| = sig * 2^(E'-1075),
// sig < 2^53); branch-free per element; no libm, no MPFR.
#include <string.h>

#include "round_internal.h"

static inline uint64_t d2u(double f) { uint64_t u; memcpy(&u, &f, sizeof u); return u; }
static inline double u2d(uint64_t u) { double f; memcpy(&f, &u, sizeof f); return f; }

static inline __attribute__((always_inline)) double
round_one(const fmt__kparams *k, const fmt_round_mode mode, const double x, const uint32_t rnd,
          unsigned *ovf_out, unsigned *unf_out, unsigned *sub_out, unsigned *nan_out,
          unsigned *inv_out) {
    const uint64_t b = d2u(x), sign = b >> 63, a = b & 0x7fffffffffffffffULL, E = a >> 52;
    const uint64_t frac_mask = (1ULL << 52) - 1;
    const int64_t Ep = E ? (int64_t)E : 1;
    const uint64_t sig = (a & frac_mask) | (E ? 1ULL << 52 : 0);
    int64_t d = (k->emin + 1023) - Ep;
    d = d > 0 ? d : 0;
    const int64_t s = 52 - k->m + d;
    const uint64_t s54 = s < 54 ? (uint64_t)s : 54u;  // sig < 2^53: dropping 54 bits drops all
    uint64_t q = sig >> s54;
    const uint64_t rem = sig & ((1ULL << s54) - 1);
    const uint64_t half = (1ULL << s54) >> 1;
    const unsigned guard = (rem & half) != 0, sticky = (rem & (half - 1)) != 0;
    const int64_t ue = Ep - 1075 + s;
    const unsigned lsb = k->m == 0 ? (unsigned)((uint64_t)(ue + k->bias) & 1u & ((0u - q) >> 63)) : (unsigned)(q & 1u);
    unsigned sr_up = 0;
    if (mode == FMT_SR) {
        const int64_t t = s - k->sr_bits;
        const uint64_t top = t >= 0 ? rem >> (t < 63 ? t : 63) : rem << (-t < 63 ? -t : 63);
        sr_up = (uint64_t)(rnd >> (32 - k->sr_bits)) < top;
    }
    q += fmt__round_inc(mode, (unsigned)sign, lsb, guard, sticky, sr_up);
    const double p2 = ue >= -1022 ? u2d((uint64_t)(ue + 1023) << 52) : u2d(1ULL << ((ue + 1074) & 63));
    const double mag = (double)(int64_t)q * p2;

    const unsigned special = E == 2047u, is_nan = special & ((a & frac_mask) != 0);
    const unsigned over = !special & (mag > k->max);
    double r = over ? k->ovf[sign] : mag;
    r = special ? (is_nan ? (k->has_nan ? __builtin_nan("") : 0.0) : k->inf_result) : r;
    const unsigned tiny = !special & (r < k->min_normal);
    r = (k->flush & tiny) ? 0.0 : r;
    r = (k->clamp_min & tiny) ? k->min_normal : r;
    const unsigned inval = !k->is_signed & !is_nan & ((sign & (a != 0)) | (!k->has_zero & (a == 0)));
    r = inval ? (k->has_nan ? __builtin_nan("") : 0.0) : r;
    const unsigned zero = r == 0.0;
    uint64_t osign = sign & (k->negzero | !zero);
    osign = ((!k->has_nan) & is_nan) ? (uint64_t)k->is_signed : osign;
    osign &= k->is_signed;

    *ovf_out = (over | (special & !is_nan & !k->inf_exact)) & !inval;
    *unf_out = !special & !inval & (a != 0) & (zero | (k->clamp_min & tiny));
    *sub_out = !special & !zero & (r < k->min_normal) & !k->clamp_min;
    *nan_out = is_nan;
    *inv_out = inval;
    return u2d(d2u(r) | osign << 63);
}

static inline __attribute__((always_inline)) void
round_loop(const fmt__kparams *k, const uint64_t first, const fmt_round_mode mode,
           double *restrict x, const size_t n, fmt__counts *c) {
    unsigned ovf, unf, sub, nan, inv;
    uint64_t novf = 0, nunf = 0, nsub = 0, nnan = 0, ninv = 0;
    double amax = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double xi = x[i];
        uint32_t rnd = mode == FMT_SR ? fmt_rng_u32(k->key, first + i) : 0;
        x[i] = round_one(k, mode, xi, rnd, &ovf, &unf, &sub, &nan, &inv);
        novf += ovf, nunf += unf, nsub += sub, nnan += nan, ninv += inv;
        const double ax = xi < 0 ? -xi : xi;
        amax = ax > amax ? ax : amax;
    }
    if (!c) return;
    c->overflow += novf, c->underflow += nunf, c->subnormal += nsub;
    c->nan_in += nnan, c->invalid += ninv;
    if (amax > c->amax) c->amax = amax;
}

void fmt__round_f64_kernel(const fmt__kparams *k, fmt_round_mode mode, double *x, size_t n,
                           uint64_t base, fmt__counts *c) {
    const uint64_t first = k->offset + base;
    switch (mode) {
    case FMT_RNE: round_loop(k, first, FMT_RNE, x, n, c); break;
    case FMT_RNA: round_loop(k, first, FMT_RNA, x, n, c); break;
    case FMT_RTZ: round_loop(k, first, FMT_RTZ, x, n, c); break;
    case FMT_RUP: round_loop(k, first, FMT_RUP, x, n, c); break;
    case FMT_RDN: round_loop(k, first, FMT_RDN, x, n, c); break;
    case FMT_RTO: round_loop(k, first, FMT_RTO, x, n, c); break;
    case FMT_SR: round_loop(k, first, FMT_SR, x, n, c); break;
    default: break;
    }
}
