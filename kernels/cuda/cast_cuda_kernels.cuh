// cast_cuda_kernels.cuh: the device side of kernels/cast_cuda.h, element rounding and block
// quantization, apart from the CUDA runtime calls so that tests/cuda_shim.cpp runs the very same
// source on the CPU (there __global__ and __device__ are empty and a thread is a std::thread).
// What is shared with the C library rather than written again:
// - the rounding of one element: for a format whose values embed in float32 (every element
//   format of the presets), the CPU's float32 method itself (formats/round_lane_internal.h's
//   fmt__lane_round, the lanes of round_f32.c's vector kernel, here one element per thread in
//   32-bit integer operations); for the others fmt__round_one_f64 (formats/round_scalar.h), the
//   CPU's float64 kernel's, on which a float32 rounds as a double (exact). The draw is
//   fmt_rng_u32 (formats/rng.h). tests/test_round.c holds the CPU's two kernels together,
//   tests/test_cast_cuda_shim.c this file to the CPU's casts;
// - the per-call parameters fmt__kparams, made on the host by fmt__kparams_make.
// Written a second time (scalar, one thread per tile) from formats/scale.c, whose versions are
// static and vectorised over eight tiles: the scale rules (tile_scales, scales_pow2,
// finish_two_level, needed_scale, round_scale), the round-to-odd quotient div_rto and the
// 4over6 error sums. Every float and double operation is a single IEEE operation in the CPU's
// order (the .cu is compiled with -fmad=false, the CPU with -ffp-contract=off).
// Work: grid-stride loops over a.blocks x a.threads threads; telemetry per thread, added to the
// device counters with atomics only where nonzero.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

extern "C" {
#include "formats/round_scalar.h"
#include "kernels/cast_cuda.h"
}

typedef unsigned long long cc_ull;

// round_lane_internal.h's lanes as one element (a device thread's), in a namespace of their own:
// its helpers' short names (sel, lt, bits) stay out of the kernels' scope. The vectors' lanes wrap
// and shift arithmetically by definition; here uint32-to-int32 conversion and >> of a negative
// int32 are implementation-defined under nvcc's C++17 (defined in the shim's C++20), and nvcc and
// g++ both convert modulo 2^32 and shift arithmetically, as the lanes do.
namespace cc_lane {
typedef uint32_t vu;
typedef int32_t vi;
typedef float vf;
__device__ __forceinline__ vu sel(vu m, vu a, vu b) { return b ^ ((a ^ b) & m); }
__device__ __forceinline__ vu bits(vf x) { vu u; memcpy(&u, &x, sizeof u); return u; }
__device__ __forceinline__ vf as_f(vu u) { vf x; memcpy(&x, &u, sizeof x); return x; }
// all-ones where a < b (a - b fits in an int32 at every use, as vec_internal.h says)
__device__ __forceinline__ vu lt(vu a, vu b) { return (vu)((vi)(a - b) >> 31); }
__device__ __forceinline__ vu lt_i(vi a, vi b) { return (vu)((vi)((vu)a - (vu)b) >> 31); }
__device__ __forceinline__ vu ltu_full(vu a, vu b) { return ((~a & b) | (~(a ^ b) & (a - b))) >> 31; }
#define FMT_LANE_FN static __device__ __forceinline__
#include "formats/round_lane_internal.h"
#undef FMT_LANE_FN
}  // namespace cc_lane

struct CastArgs {
    fmt__kparams k;
    fmt__k32 k32;  // k for the float32 method, where f32 (cc_float32_method)
    int f32;
    int mode;   // fmt_round_mode
    int copy;   // a format that holds every float32 and does not embed in it (fp64): nothing rounds
    float pre, post;  // out = round(in * pre) * post (fmt_round_f32_scaled; no multiply where 1)
    const float *in;
    float *out;
    uint64_t n;
    cc_ull *counts;  // MM_CUDA_NCOUNTS, or NULL
    unsigned blocks, threads;
};

struct QuantArgs {
    fmt__kparams ek, sk;  // element format with the caller's options; scale format, saturating
    fmt__k32 ek32;        // ek for the float32 method, where ef32 (as CastArgs' k32)
    int ef32;
    int emode, smode;     // their modes (smode: FMT_RNE or FMT_RUP)
    int rule;             // fmt_scale_round
    int nan_block, two_level, pow2, exact, exact_f64, count, count_zeroed;
    double lo, hi, enc_max;  // scale_ctx's
    uint32_t carry32;
    uint64_t carry64;
    float elem_max, alt_max, deq_big;
    int elem_emax, e_hi, e_lo;
    uint64_t rows, cols, tr, tc, ntr, ntc;
    const float *in;
    float *out, *elems, *scales_out;
    uint32_t *bits, *abits;  // per tile: max |x| bits (NaN above inf); the tensor's
    float *s, *mul, *deq;    // per tile
    uint8_t *pick;           // 4over6 winners per tile (pick_all < 0)
    int pick_all;            // 4over6 candidate passes: 0 or 1 for every tile (and which error
                             // sums quant_sqerr_kernel writes); -1: pick[]
    double *err;             // 4over6: 2 x nt error sums
    cc_ull *counts;
    unsigned blocks, threads;
};

#define CC_LOOP(i, n, a)                                                                             \
    for (uint64_t i = (uint64_t)blockIdx.x * (a).threads + threadIdx.x; i < (n);                     \
         i += (uint64_t)(a).blocks * (a).threads)

__device__ __forceinline__ uint32_t cc_f2u(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
__device__ __forceinline__ float cc_u2f(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
__device__ __forceinline__ bool cc_isnan(float x) { return (cc_f2u(x) & 0x7fffffffu) > 0x7f800000u; }
__device__ __forceinline__ float cc_quiet(float x) { return cc_u2f(cc_f2u(x) | 0x400000u); }

// float -> double, a NaN keeping its sign and payload as x86's cvtss2sd does (a device conversion
// may give the canonical NaN, and the sign of a NaN input decides the sign of a NaN result).
__device__ __forceinline__ double cc_f2d(float x) {
    const uint32_t u = cc_f2u(x);
    if ((u & 0x7fffffffu) <= 0x7f800000u) return (double)x;
    return fmt__u2d((uint64_t)(u >> 31) << 63 | 0x7ff0000000000000ULL | (uint64_t)((u & 0x7fffffu) | 0x400000u) << 29);
}

// double -> float of a rounded value (exact, or RNE for formats wider than float32), a NaN as the
// CPU's conversion gives it: the sign kept, the payload the default quiet one (what the rounding
// makes is __builtin_nan with a sign).
__device__ __forceinline__ float cc_d2f(double r) {
    const uint64_t u = fmt__d2u(r);
    if ((u & 0x7fffffffffffffffULL) <= 0x7ff0000000000000ULL) return (float)r;
    return cc_u2f((uint32_t)(u >> 63) << 31 | 0x7fc00000u);
}

// a * b and a / b with x86's NaN rule (a NaN operand comes back quieted, the first one first);
// the device's operations return the canonical NaN instead, losing the sign.
__device__ __forceinline__ float cc_mul(float a, float b) {
    return cc_isnan(a) ? cc_quiet(a) : cc_isnan(b) ? cc_quiet(b) : __fmul_rn(a, b);
}
__device__ __forceinline__ float cc_div(float a, float b) {
    return cc_isnan(a) ? cc_quiet(a) : cc_isnan(b) ? cc_quiet(b) : __fdiv_rn(a, b);
}

// The stochastic-rounding draw of the element at counter index (0 in the other modes).
__device__ __forceinline__ uint32_t cc_draw(const fmt__kparams &k, int mode, uint64_t index) {
    return mode == FMT_SR ? fmt_rng_u32(k.key, k.offset + index) : 0u;
}

// One element: fmt_round_f32's result for x at counter index (mode, draws, flags as the CPU's).
__device__ __forceinline__ float cc_round_elem(const fmt__kparams &k, int mode, float x, uint64_t index,
                                               fmt__flags *fl) {
    return cc_d2f(fmt__round_one_f64(&k, (fmt_round_mode)mode, cc_f2d(x), cc_draw(k, mode, index), fl));
}

// Whether f's elements round by the float32 method (its values embed in float32, as
// fmt_round_f32 decides on the CPU), and then its parameters k32 made from k (on the host).
static inline bool cc_float32_method(const fmt_t *f, const fmt__kparams *k, fmt__k32 *k32) {
    if (!fmt_embeds_in_f32(f)) return false;
    fmt__k32_make(k32, k);
    return true;
}

// The same by the float32 method (k32 from cc_float32_method): the CPU's float32 kernel's result
// and flags, in 32-bit integer operations (the float64 method's 64-bit ones are several
// instructions each on a GPU).
__device__ __forceinline__ float cc_round_elem32(const fmt__kparams &k, const fmt__k32 &k32, int mode, float x,
                                                 uint64_t index, fmt__flags *fl) {
    cc_lane::fmt__lane_counts c;
    memset(&c, 0, sizeof c);
    const float r = cc_lane::fmt__lane_round(&k32, fmt__k32_simple(&k32), (fmt_round_mode)mode, x,
                                             cc_draw(k, mode, index), &c);
    // each count is 0 or 1: the method subtracts an all-ones mask from 0
    fl->overflow = c.ovf, fl->underflow = c.unf, fl->subnormal = c.sub, fl->nan_in = c.nan, fl->invalid = c.inv;
    return r;
}

// The same for an exact quotient held as a double (element formats beyond exact_fits_f32).
__device__ __forceinline__ float cc_round_elem_d(const fmt__kparams &k, int mode, double z, uint64_t index,
                                                 fmt__flags *fl) {
    return cc_d2f(fmt__round_one_f64(&k, (fmt_round_mode)mode, z, cc_draw(k, mode, index), fl));
}

// Per-thread telemetry, added to the device counters where nonzero.
struct CcCounts {
    cc_ull ovf = 0, unf = 0, sub = 0, nan = 0, inv = 0;
    uint32_t amax = 0;  // bits of the largest non-NaN |x|
    __device__ void add(const fmt__flags &f) {
        ovf += f.overflow, unf += f.underflow, sub += f.subnormal, nan += f.nan_in, inv += f.invalid;
    }
    __device__ void see(float x) {
        const uint32_t a = cc_f2u(x) & 0x7fffffffu;
        if (a <= 0x7f800000u && a > amax) amax = a;
    }
    __device__ void flush(cc_ull *c) const {
        if (ovf) atomicAdd(c + MM_CUDA_OVERFLOW, ovf);
        if (unf) atomicAdd(c + MM_CUDA_UNDERFLOW, unf);
        if (sub) atomicAdd(c + MM_CUDA_SUBNORMAL, sub);
        if (nan) atomicAdd(c + MM_CUDA_NAN_IN, nan);
        if (inv) atomicAdd(c + MM_CUDA_INVALID, inv);
        if (amax) atomicMax(c + MM_CUDA_AMAX, (cc_ull)amax);
    }
};

// --- element rounding

static __global__ void cast_round_kernel(const CastArgs a) {
    CcCounts c;
    CC_LOOP(i, a.n, a) {
        // fmt_round_f32_scaled's xfer: a copy where pre is 1 (NaN payloads pass), else x * pre;
        // the counts are of the values rounded (before post)
        const float x = a.pre == 1.0f ? a.in[i] : cc_mul(a.in[i], a.pre);
        float q;
        if (a.copy) {  // fmt_round_f32 of fp64 and wider: nothing changes, NaN inputs are counted
            q = x;
            c.nan += cc_isnan(x);
        } else {
            fmt__flags fl;
            q = a.f32 ? cc_round_elem32(a.k, a.k32, a.mode, x, i, &fl)
                      : cc_round_elem(a.k, a.mode, x, i, &fl);
            c.add(fl);
        }
        a.out[i] = a.post == 1.0f ? q : cc_mul(q, a.post);
        c.see(x);
    }
    if (!a.counts) return;
    c.flush(a.counts);
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(a.counts + MM_CUDA_N, (cc_ull)a.n);
}

// --- block quantization (formats/scale.c's pass, one kernel per step)

// Step 1: max |x| bits per tile (a NaN pattern above inf) and of the tensor, over segments of
// at most 32 columns of one row inside one tile; the NaN-free max is the statistics' amax.
static __global__ void quant_tile_amax_kernel(const QuantArgs a) {
    const uint64_t spt = (a.tc + 31) / 32, nseg_row = a.ntc * spt;
    uint32_t fin = 0;
    CC_LOOP(s, a.rows * nseg_row, a) {
        const uint64_t r = s / nseg_row, rem = s % nseg_row, t = rem / spt, j = rem % spt;
        const uint64_t c0 = t * a.tc + j * 32;
        uint64_t c1 = c0 + 32;
        if (c1 > (t + 1) * a.tc) c1 = (t + 1) * a.tc;
        if (c1 > a.cols) c1 = a.cols;
        uint32_t m = 0;
        for (uint64_t c = c0; c < c1; c++) {
            const uint32_t u = cc_f2u(a.in[r * a.cols + c]) & 0x7fffffffu;
            m = u > m ? u : m;
            if (u <= 0x7f800000u && u > fin) fin = u;
        }
        if (c0 < c1 && m) {
            atomicMax(a.bits + (r / a.tr) * a.ntc + t, m);
            atomicMax(a.abits, m);
        }
    }
    if (a.count && fin) atomicMax(a.counts + MM_CUDA_AMAX, (cc_ull)fin);
}

// NVFP4's encoding scale from the tensor amax (scale.c's tensor_enc).
__device__ __forceinline__ float cc_tensor_enc(double scale_max, float elem_max, float A) {
    float s_enc = __fdiv_rn((float)(scale_max * elem_max), A);
    if (s_enc > FLT_MAX) s_enc = FLT_MAX;
    if (A == 0.0f || !(A <= FLT_MAX) || s_enc == 0.0f) s_enc = 1.0f;
    return s_enc;
}

__device__ __forceinline__ double cc_needed_scale(const QuantArgs &a, double x) {
    if (a.rule == FMT_SCALE_RCEIL) return (double)__fdiv_rn((float)x, a.elem_max);
    if (!a.pow2) return x / (double)a.elem_max;
    const int e = (int)(((fmt__d2u(x) + a.carry64) >> 52) & 0x7ff) - 1023 - a.elem_emax;
    return e >= -1022 && e <= 1023 ? fmt__u2d((uint64_t)(e + 1023) << 52) : ldexp(1.0, e);
}

__device__ __forceinline__ double cc_round_need(const QuantArgs &a, double need) {
    fmt__flags fl;
    return fmt__round_one_f64(&a.sk, (fmt_round_mode)a.smode, need, 0, &fl);
}

// Step 2: each tile's scale s, multiplier mul and dequantization factor deq (scale.c's
// tile_scales for one tile), and the tiles' counts.
static __global__ void quant_scales_kernel(const QuantArgs a) {
    const uint64_t nt = a.ntr * a.ntc;
    const float nonfinite = a.nan_block ? cc_u2f(0x7fc00000u) : 1.0f;
    const float s_enc = a.two_level ? cc_tensor_enc(a.enc_max, a.elem_max, cc_u2f(*a.abits)) : 1.0f;
    cc_ull clipped = 0, nan = 0;
    CC_LOOP(t, nt, a) {
        const uint32_t b = a.bits[t];
        const float amax = cc_u2f(b);
        float s, mul, deq;
        nan += a.nan_block && b >= 0x7f800000u;
        if (!a.two_level && a.pow2) {
            uint32_t st;
            if (b == 0) {
                st = cc_f2u(1.0f);
            } else if (b >= 0x7f800000u) {
                st = cc_f2u(nonfinite);
            } else {
                const bool sub = b < 0x800000u;
                const uint32_t nb = sub ? cc_f2u((float)(int32_t)b) : b;
                const int E = (int)((nb + a.carry32) >> 23) - (sub ? 127 + 149 : 127) - a.elem_emax;
                const bool over = E > a.e_hi, under = E < a.e_lo;
                st = E < -126 ? 0x400000u : (uint32_t)(E + 127) << 23;
                st = over ? cc_f2u((float)a.hi) : under ? cc_f2u((float)a.lo) : st;
                clipped += over | under;
            }
            s = deq = cc_u2f(st);
            mul = cc_div(1.0f, s);
        } else if (!a.two_level) {
            if (amax == 0.0f) {
                s = 1.0f;
            } else if (!(amax <= FLT_MAX)) {
                s = nonfinite;
            } else {
                const double need = cc_needed_scale(a, (double)amax);
                if (need > a.hi) s = (float)a.hi, clipped++;
                else if (need < a.lo) s = (float)a.lo, clipped++;
                else {
                    const double r = cc_round_need(a, need);
                    clipped += a.smode == FMT_RUP && r < need;
                    s = (float)r;
                }
            }
            deq = s;
            mul = cc_div(1.0f, s);
        } else {
            // Two levels: the need q as a float32 and sf, it rounded into the scale format.
            float q, sf;
            if (!a.pow2) {
                const int alt = a.pick_all >= 0 ? a.pick_all : a.pick && a.pick[t];
                q = __fmul_rn(__fdiv_rn(amax, alt ? a.alt_max : a.elem_max), s_enc);
                fmt__flags fl;
                sf = cc_d2f(fmt__round_one_f64(&a.sk, (fmt_round_mode)a.smode, cc_f2d(q), 0, &fl));
            } else {
                const double need = amax > 0.0f && amax <= FLT_MAX ? cc_needed_scale(a, __dmul_rn((double)amax, (double)s_enc)) : 0.0;
                q = (float)need;
                sf = (float)cc_round_need(a, need);
            }
            // scale.c's finish_two_level: float magnitudes compare as their bits
            const uint32_t hi = cc_f2u((float)a.hi), qb = cc_f2u(q);
            const bool special = b >= 0x7f800000u, over = qb > hi;
            const bool zeroed = b > 0 && cc_f2u(sf) < 1 && !over && !special;
            clipped += (over || (a.smode == FMT_RUP && cc_f2u(sf) < qb) || zeroed) && !special;
            sf = special ? nonfinite : over ? cc_u2f(hi) : sf;
            const bool keep = cc_f2u(sf) < 1 || cc_f2u(sf) > 0x7f800000u;
            float m = __fdiv_rn(s_enc, sf);
            if (cc_f2u(m) > cc_f2u(FLT_MAX)) m = FLT_MAX;
            s = sf;
            mul = keep ? sf : m;
            deq = keep ? sf : __fdiv_rn(sf, s_enc);
        }
        a.s[t] = s, a.mul[t] = mul, a.deq[t] = deq;
        if (a.scales_out) a.scales_out[t] = s;
    }
    if (!a.count) return;
    if (clipped) atomicAdd(a.counts + MM_CUDA_CLIPPED, clipped);
    if (nan) atomicAdd(a.counts + MM_CUDA_SCALES_NAN, nan);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const float ts = a.two_level ? __fdiv_rn(1.0f, s_enc) : 1.0f;
        a.counts[MM_CUDA_TSCALE] = cc_f2u(ts);
    }
}

// fl(x / d) rounded to odd into float32 (scale.c's div_rto), NaNs as x86's division gives them.
__device__ __forceinline__ float cc_div_rto(float x, float d) {
    if (cc_isnan(x)) return cc_quiet(x);
    if (cc_isnan(d)) return cc_quiet(d);
    const double z = __ddiv_rn((double)x, (double)d);
    const float y = (float)z;
    uint32_t u = cc_f2u(y);
    const uint32_t inexact = (double)y != z;
    u -= inexact & (fabs((double)y) > fabs(z));
    return cc_u2f(u | inexact);
}

// Step 3: every element: q = round(x * mul) (or of the exact quotient x / deq), out = q * deq,
// elems = q; the element counts, zeroed blocks' elements as underflows, and the overflows of
// the dequantization (scale.c's count_dequant_overflow).
static __global__ void quant_elems_kernel(const QuantArgs a) {
    CcCounts c;
    cc_ull zeroed = 0;
    CC_LOOP(i, a.rows * a.cols, a) {
        const uint64_t r = i / a.cols, col = i % a.cols, t = (r / a.tr) * a.ntc + col / a.tc;
        const float x = a.in[i], m = a.mul[t], d = a.deq[t];
        const bool percol = a.tc == 1;  // per column the multiply is always made (scale.c's mul_row)
        zeroed += m == 0.0f && x != 0.0f;
        fmt__flags fl;
        float q;
        if (a.exact && a.exact_f64) {
            const double z = d == 0.0f ? (double)cc_mul(x, m) : __ddiv_rn(cc_f2d(x), (double)d);
            q = cc_round_elem_d(a.ek, a.emode, cc_isnan(x) ? cc_f2d(x) : z, i, &fl);
        } else {
            float y;
            if (a.exact) y = d == 0.0f ? cc_mul(x, m) : d == 1.0f ? x : cc_div_rto(x, d);
            else y = (m == 1.0f && !percol) ? x : cc_mul(x, m);
            q = a.ef32 ? cc_round_elem32(a.ek, a.ek32, a.emode, y, i, &fl)
                       : cc_round_elem(a.ek, a.emode, y, i, &fl);
        }
        const float o = (d == 1.0f && !percol) ? q : cc_mul(q, d);
        if (a.elems) a.elems[i] = q;
        a.out[i] = o;
        if (a.count) {
            c.add(fl);
            c.ovf += d > a.deq_big && (cc_f2u(o) & 0x7fffffffu) == 0x7f800000u;
        }
    }
    if (!a.count) return;
    if (a.count_zeroed) c.unf += zeroed;
    c.flush(a.counts);
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(a.counts + MM_CUDA_N, (cc_ull)(a.rows * a.cols));
}

// 4over6: the sum over tile t of (y - x)^2 in double, y = a.out, row by row in row-major order as
// scale.c's tile_sq_errors adds it, into err + nt * a.pick_all.
static __global__ void quant_sqerr_kernel(const QuantArgs a) {
    const float *y = a.out;
    const uint64_t which = (uint64_t)a.pick_all;
    CC_LOOP(t, a.ntr * a.ntc, a) {
        const uint64_t b = t / a.ntc, tcol = t % a.ntc;
        double e = 0;
        for (uint64_t r = b * a.tr; r < a.rows && r < (b + 1) * a.tr; r++)
            for (uint64_t c = tcol * a.tc; c < a.cols && c < (tcol + 1) * a.tc; c++) {
                const double d = __dsub_rn((double)y[r * a.cols + c], (double)a.in[r * a.cols + c]);
                e = __dadd_rn(e, __dmul_rn(d, d));
            }
        a.err[which * a.ntr * a.ntc + t] = e;
    }
}

// 4over6: the winners, the 4-candidate where its error is strictly smaller.
static __global__ void quant_pick_kernel(const QuantArgs a) {
    const uint64_t nt = a.ntr * a.ntc;
    CC_LOOP(t, nt, a) a.pick[t] = a.err[nt + t] < a.err[t];
}

// ---------------------------------------------------------------------------------------------
// host side: the sequence of launches, the same for the CUDA runtime (cast_cuda.cu) and the shim.
// L provides launch(kernel, args, work items) (it sets args.blocks and args.threads), alloc
// (zeroed), copy (device to device) and release, each returning an MM_ status (release none).

// Scratch on the device, released when it goes out of scope.
template <class L>
struct CcScratch {
    L &l;
    void *p = nullptr;
    explicit CcScratch(L &l_) : l(l_) {}
    CcScratch(const CcScratch &) = delete;
    CcScratch &operator=(const CcScratch &) = delete;
    ~CcScratch() { if (p) l.release(p); }
};

template <class L>
static int cc_round_run(L &l, const fmt_t *f, float *out, const float *in, size_t n, float pre, float post,
                        const fmt_round_opts *o, uint64_t *counts) {
    if (!f || !o || fmt_is_wide(f) || fmt_validate_round_opts(f, o, NULL, 0) != FMT_OK) return MM_EINVAL;
    if (n == 0) return MM_OK;
    if (!out || !in) return MM_EINVAL;
    CastArgs a;
    memset(&a, 0, sizeof a);
    fmt__kparams_make(&a.k, f, o);
    a.mode = o->mode;
    a.f32 = cc_float32_method(f, &a.k, &a.k32);
    a.copy = !a.f32 && fmt_contains_f32(f);
    a.pre = pre, a.post = post;
    a.in = in, a.out = out, a.n = n, a.counts = (cc_ull *)counts;
    return l.launch(cast_round_kernel, a, n);
}

// scale.c's scale_ctx_make and the choices of fmt_quantize_f32, into a (geometry and pointers
// aside).
static void cc_quant_params(QuantArgs *a, const fmt_t *elem, const fmt_scaling *sc, const fmt_round_opts *o) {
    const fmt_scale_round r = sc->scale_round;
    a->pow2 = r == FMT_SCALE_OCP || r == FMT_SCALE_CEIL || r == FMT_SCALE_EVEN;
    fmt__kparams_make(&a->ek, elem, o);
    a->emode = o->mode;
    a->ef32 = cc_float32_method(elem, &a->ek, &a->ek32);
    fmt_round_opts so;
    memset(&so, 0, sizeof so);
    so.overflow = FMT_SATURATE;
    so.mode = r == FMT_SCALE_UP || r == FMT_SCALE_RCEIL ? FMT_RUP : FMT_RNE;
    fmt__kparams_make(&a->sk, &sc->scale_fmt, &so);
    a->smode = so.mode;
    a->rule = r;
    a->nan_block = sc->nan_block, a->two_level = sc->tensor_scale;
    a->lo = fmax(sc->scale_fmt.min_subnormal, 0x1p-127);
    a->hi = sc->scale_fmt.max;
    // scale.c's pow2_carry at 23 and 52 fraction bits
    const int m = elem->mbits;
    a->carry32 = r == FMT_SCALE_CEIL ? (1u << 23) - 1 : r == FMT_SCALE_EVEN && m < 23 ? 1u << (22 - m) : 0;
    a->carry64 = r == FMT_SCALE_CEIL ? (1ULL << 52) - 1 : r == FMT_SCALE_EVEN && m < 52 ? 1ULL << (51 - m) : 0;
    a->elem_max = (float)elem->max;
    const double smax = sc->scale_fmt.max;  // scale.c's enc_scale_max
    a->enc_max = r == FMT_SCALE_4OVER6 ? ldexp(1.0, ilogb(smax * ldexp(1.0, elem->emax) / elem->max)) : smax;
    a->alt_max = ldexpf(1.0f, elem->emax);
    a->elem_emax = elem->emax;
    a->e_hi = ilogb(a->hi), a->e_lo = ilogb(a->lo);
    a->deq_big = (float)(FLT_MAX / elem->max);
    a->exact = !sc->recip && (sc->tensor_scale || (sc->scale_fmt.mbits > 0 && !a->pow2));
    // scale.c's exact_fits_f32: round-to-odd float32 quotients are exact enough for the element
    a->exact_f64 = a->exact && !(elem->mbits <= 21 && elem->min_subnormal >= 0x1p-147);
}

template <class L>
static int cc_quantize_run(L &l, const fmt_t *elem, const fmt_scaling *sc, float *out, float *elems, float *scales,
                           const float *in, size_t rows, size_t cols, const fmt_round_opts *o, uint64_t *counts) {
    if (!elem || !sc) return MM_EINVAL;
    const fmt_round_opts defaults = fmt_scaling_default_opts(sc);
    if (!o) o = &defaults;
    // fmt_quantize_f32's checks, all of which an empty call makes
    if (fmt_quantize_f32(elem, sc, NULL, NULL, 0, 0, o, NULL, NULL) != FMT_OK) return MM_EINVAL;
    if (cols && rows > SIZE_MAX / cols) return MM_EINVAL;
    const size_t n = rows * cols;
    if (n == 0) return MM_OK;
    if (!out || !in) return MM_EINVAL;
    if (sc->none) {
        int st = cc_round_run(l, elem, out, in, n, 1.0f, 1.0f, o, counts);
        if (st == MM_OK && elems) st = l.copy(elems, out, n * sizeof *out);
        return st;
    }
    QuantArgs a;
    memset(&a, 0, sizeof a);
    cc_quant_params(&a, elem, sc, o);
    a.rows = rows, a.cols = cols;  // scale.c's geom_make
    a.tr = sc->tile_rows > 0 && (size_t)sc->tile_rows < rows ? (size_t)sc->tile_rows : rows;
    a.tc = sc->tile_cols > 0 && (size_t)sc->tile_cols < cols ? (size_t)sc->tile_cols : cols;
    a.ntr = (rows + a.tr - 1) / a.tr, a.ntc = (cols + a.tc - 1) / a.tc;
    const size_t nt = a.ntr * a.ntc;
    const bool four6 = sc->tensor_scale && sc->scale_round == FMT_SCALE_4OVER6;
    a.in = in, a.out = out, a.elems = elems, a.scales_out = scales;
    a.count = counts != NULL, a.count_zeroed = counts && sc->tensor_scale;
    a.counts = (cc_ull *)counts;
    a.pick_all = -1;
    // scratch: amax bits (nt + 1), s, mul, deq (3 nt), and for 4over6 the error sums (2 nt
    // doubles), the candidates (2 n floats) and the winners (nt bytes)
    const size_t o_f = 4 * (nt + 1), o_e = (o_f + 12 * nt + 7) / 8 * 8, o_c = o_e + (four6 ? 16 * nt : 0);
    const size_t o_p = o_c + (four6 ? 8 * n : 0), total = o_p + (four6 ? nt : 0);
    CcScratch<L> sb(l);
    int st = l.alloc(&sb.p, total);
    if (st != MM_OK) return st;
    char *base = (char *)sb.p;
    a.bits = (uint32_t *)base, a.abits = a.bits + nt;
    a.s = (float *)(base + o_f), a.mul = a.s + nt, a.deq = a.mul + nt;
    st = l.launch(quant_tile_amax_kernel, a, a.rows * a.ntc * ((a.tc + 31) / 32));
    if (st == MM_OK && four6) {
        a.err = (double *)(base + o_e), a.pick = (uint8_t *)(base + o_p);
        for (int k = 0; k < 2 && st == MM_OK; k++) {  // both candidates, uncounted, then their errors
            QuantArgs c = a;
            c.out = (float *)(base + o_c) + k * n, c.elems = c.scales_out = NULL;
            c.count = c.count_zeroed = 0, c.pick_all = k;
            st = l.launch(quant_scales_kernel, c, nt);
            if (st == MM_OK) st = l.launch(quant_elems_kernel, c, n);
            if (st == MM_OK) st = l.launch(quant_sqerr_kernel, c, nt);
        }
        if (st == MM_OK) st = l.launch(quant_pick_kernel, a, nt);
    }
    if (st == MM_OK) st = l.launch(quant_scales_kernel, a, nt);
    if (st == MM_OK) st = l.launch(quant_elems_kernel, a, n);
    return st;
}
