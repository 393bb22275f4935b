// codec.c: encode/decode between values and codes, and sub-byte packing (see codec.h).
// The array functions run the vector kernels of codec_f32.c on the OpenMP threads, in chunks
// split by element index (so counts and stochastic draws do not depend on the thread count),
// for every format that embeds in float32; the scalar functions here are their reference and
// the path of the other formats.
#include "codec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"

enum { CHUNK = 1 << 14 };  // elements per parallel task (a multiple of 32: whole vector groups)

size_t fmt_code_bytes(const fmt_t *f) {
    return f->bits <= 8 ? 1 : f->bits <= 16 ? 2 : f->bits <= 32 ? 4 : 8;
}

static uint64_t code_load(const void *codes, size_t bytes, size_t i) {
    const uint8_t *p = (const uint8_t *)codes + i * bytes;
    uint64_t c = 0;
    for (size_t b = 0; b < bytes; b++) c |= (uint64_t)p[b] << (8 * b);
    return c;
}

static void code_store(void *codes, size_t bytes, size_t i, uint64_t c) {
    uint8_t *p = (uint8_t *)codes + i * bytes;
    for (size_t b = 0; b < bytes; b++) p[b] = (uint8_t)(c >> (8 * b));
}

double fmt_decode1(const fmt_t *f, uint64_t c) {
    const int m = f->mbits;
    const uint64_t emask = ((uint64_t)1 << f->ebits) - 1, mmask = ((uint64_t)1 << m) - 1;
    if (f->bits < 64) c &= ((uint64_t)1 << f->bits) - 1;
    const uint64_t sbit = f->is_signed ? (uint64_t)1 << (f->bits - 1) : 0;
    const bool neg = (c & sbit) != 0;
    const uint64_t E = (c >> m) & emask, M = c & mmask;
    switch (f->special) {
    case FMT_IEEE:
        if (E == emask) return M ? NAN : neg ? -INFINITY : INFINITY;
        break;
    case FMT_FN:
    case FMT_E8M0:
        if (E == emask && M == mmask) return NAN;
        break;
    case FMT_FNUZ:
        if (c == sbit) return NAN;
        break;
    case FMT_EXTENDED: {  // the NaN code, then inf on the largest magnitude code below it
        const uint64_t top = (((uint64_t)1 << (f->bits - (f->is_signed ? 1 : 0))) - 1);
        if (f->is_signed ? c == sbit : c == top) return NAN;
        if ((c & ~sbit) == (f->is_signed ? top : top - 1)) return neg ? -INFINITY : INFINITY;
        break;
    }
    case FMT_FINITE: break;
    }
    double v;
    if (f->special == FMT_E8M0) v = ldexp(1.0 + ldexp((double)M, -m), (int)E - f->bias);
    else if (E == 0) v = ldexp((double)M, f->emin - m);
    else v = ldexp(1.0 + ldexp((double)M, -m), (int)E - f->bias);
    return neg ? -v : v;
}

// The code of v, a value of f (or NaN, or an infinity f has).
static uint64_t encode_exact(const fmt_t *f, double v) {
    const int m = f->mbits;
    const uint64_t emask = ((uint64_t)1 << f->ebits) - 1, mmask = ((uint64_t)1 << m) - 1;
    const uint64_t sbit = f->is_signed ? (uint64_t)1 << (f->bits - 1) : 0;
    const uint64_t s = signbit(v) ? sbit : 0;
    if (isnan(v)) {
        switch (f->special) {
        case FMT_IEEE: return s | emask << m | (uint64_t)1 << (m - 1);
        case FMT_FN: return s | emask << m | mmask;
        case FMT_E8M0: return emask << m | mmask;
        case FMT_FNUZ: return sbit;
        case FMT_EXTENDED: return f->is_signed ? sbit : emask << m | mmask;
        case FMT_FINITE: return sbit;  // no NaN: -0, as rounding gives
        }
    }
    if (isinf(v))  // only IEEE and P3109 extended formats keep inf after rounding
        return f->special == FMT_EXTENDED ? s | ((emask << m | mmask) - (f->is_signed ? 0 : 1)) : s | emask << m;
    if (v == 0) return f->has_negzero ? s : 0;
    const double a = fabs(v);
    int k = ilogb(a);
    if (f->special != FMT_E8M0 && k < f->emin)
        return s | (uint64_t)ldexp(a, m - f->emin);  // subnormal: exponent field 0
    const uint64_t E = (uint64_t)(k + f->bias);
    const uint64_t M = (uint64_t)ldexp(ldexp(a, -k) - 1.0, m);
    return s | E << m | M;
}

uint64_t fmt_encode1(const fmt_t *f, double v) {
    return encode_exact(f, isnan(v) ? v : fmt_round1(f, v, &(fmt_round_opts){0}));
}

// Decode table for formats of 16 bits or fewer, built from fmt_decode1.
static float *decode_table(const fmt_t *f) {
    size_t n = (size_t)1 << f->bits;
    float *t = malloc(n * sizeof *t);
    if (t)
        for (size_t c = 0; c < n; c++) t[c] = (float)fmt_decode1(f, c);
    return t;
}

int fmt_codes_check(const fmt_t *f, const void *codes, size_t n, size_t *bad) {
    const size_t bytes = fmt_code_bytes(f);
    if (f->bits >= 8 * (int)bytes) return FMT_OK;  // every code of the width is one of the format's
    const uint64_t high = ~(((uint64_t)1 << f->bits) - 1);
    uint64_t any = 0;  // one branch-free pass (it vectorizes); the index only when needed
    if (bytes == 1) {
        const uint8_t *c = codes;
        for (size_t i = 0; i < n; i++) any |= c[i];
    } else {
        for (size_t i = 0; i < n; i++) any |= code_load(codes, bytes, i);
    }
    if (!(any & high)) return FMT_OK;
    if (bad)
        for (size_t i = 0; i < n; i++)
            if (code_load(codes, bytes, i) & high) {
                *bad = i;
                break;
            }
    return FMT_EINVAL;
}

int fmt_decode_f32(const fmt_t *f, float *x, const void *codes, size_t n) {
    const size_t bytes = fmt_code_bytes(f);
    fmt__codek ck;
    fmt__codek_make(&ck, f);
    if (ck.dec) {  // the AVX-512 kernel where the CPU has it, else the widest vector copy
        const bool lean = fmt__values_lean_ok(&ck);
        const fmt_round_path copy = fmt__best_copy();
        const size_t nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (nchunks > 1)
        for (size_t ci = 0; ci < nchunks; ci++) {
            const size_t lo = ci * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;
            const uint8_t *c = (const uint8_t *)codes + lo * bytes;
            if (lean) fmt__decode_f32_lean(&ck, x + lo, c, len);
            else fmt__f32_from_codes(&ck, copy, x + lo, c, len);
        }
        return FMT_OK;
    }
    // A table costs 2^bits decodes: worth it when the array is at least that long, or tiny.
    if (f->bits <= 8 || (f->bits <= 16 && n >= ((size_t)1 << f->bits))) {
        float *t = decode_table(f);
        if (!t) return FMT_ENOMEM;
        const uint64_t mask = ((uint64_t)1 << f->bits) - 1;
        if (bytes == 1) {
            const uint8_t *c = codes;
#pragma omp parallel for schedule(static) if (n > 65536)
            for (size_t i = 0; i < n; i++) x[i] = t[c[i] & mask];
        } else {
            const uint16_t *c = codes;
#pragma omp parallel for schedule(static) if (n > 65536)
            for (size_t i = 0; i < n; i++) x[i] = t[c[i] & mask];
        }
        free(t);
        return FMT_OK;
    }
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) x[i] = (float)fmt_decode1(f, code_load(codes, bytes, i));
    return FMT_OK;
}

// Formats the vector kernels do not cover (fp64, custom formats beyond float32): round blocks
// of 4096 with fmt_round_f32, then encode each value on its own.
static int encode_scalar(const fmt_t *f, void *codes, const float *x, size_t n, const fmt_round_opts *o,
                         fmt_stats *stats) {
    const size_t bytes = fmt_code_bytes(f);
    enum { BLK = 4096 };
    for (size_t lo = 0; lo < n; lo += BLK) {
        float buf[BLK];
        size_t len = n - lo < BLK ? n - lo : BLK;
        memcpy(buf, x + lo, len * sizeof *buf);
        fmt_round_opts ob = *o;
        ob.offset = o->offset + lo;  // the same draws as rounding the whole array at once
        int st = fmt_round_f32(f, buf, len, &ob, stats);
        if (st != FMT_OK) return st;
        for (size_t i = 0; i < len; i++) code_store(codes, bytes, lo + i, encode_exact(f, buf[i]));
    }
    return FMT_OK;
}

int fmt_encode_f32(const fmt_t *f, void *codes, const float *x, size_t n, const fmt_round_opts *o,
                   fmt_stats *stats) {
    fmt__codek ck;
    fmt__codek_make(&ck, f);
    if (!ck.enc) return encode_scalar(f, codes, x, n, o, stats);
    if (fmt_validate_round_opts(f, o, NULL, 0) != FMT_OK) return FMT_EINVAL;
    fmt__kparams k;
    fmt__kparams_make(&k, f, o);
    const fmt_round_path path = fmt__f32_path(&k, o->path, o->mode, stats != NULL);
    if (path == FMT_NPATHS) return FMT_EINVAL;
    // One pass through the explicit AVX-512 kernels where they round the call (the path asked
    // for, or the one auto picks: they cover the hardware converters' calls too); otherwise each
    // chunk is rounded by its path in blocks that stay in L1 and turned into codes from there, by
    // the AVX-512 kernel where auto may choose, else by the vector copy of the path asked for.
    const bool auto_ = o->path == FMT_PATH_AUTO;
    const bool fused = (path == FMT_PATH_LEAN || (auto_ && path == FMT_PATH_HW)) &&
                       fmt__f32_lean_covers(&k, o->mode) && fmt__codes_lean_ok(&ck);
    const bool lean_codes =
        (auto_ || path == FMT_PATH_HW || path == FMT_PATH_LEAN) && fmt__codes_lean_ok(&ck);
    const fmt_round_path copy = path == FMT_PATH_AVX2 || path == FMT_PATH_AVX512 ? path
                              : path == FMT_PATH_GENERIC && !auto_ ? FMT_PATH_GENERIC : fmt__best_copy();
    const size_t bytes = (size_t)ck.bytes, nchunks = (n + CHUNK - 1) / CHUNK;
    fmt__counts total = {0};
#pragma omp parallel if (nchunks > 1)
    {
        enum { BLK = 2048 };
        float buf[BLK];
        fmt__counts local = {0};
#pragma omp for schedule(static)
        for (size_t ci = 0; ci < nchunks; ci++) {
            const size_t lo = ci * CHUNK, end = n - lo < CHUNK ? n : lo + CHUNK;
            if (path == FMT_PATH_HW &&
                fmt__encode_f32_hw(&k, &ck, o->mode, (uint8_t *)codes + lo * bytes, x + lo, end - lo))
                continue;  // fp16 through the converter (declined where MXCSR has DAZ: below)
            if (fused && fmt__encode_f32_lean(&k, &ck, o->mode, true, (uint8_t *)codes + lo * bytes, x + lo,
                                              end - lo, lo, stats ? &local : NULL))
                continue;  // (declined where MXCSR has DAZ or FTZ set: the blocks below)
            for (size_t i = lo; i < end; i += BLK) {
                const size_t len = end - i < BLK ? end - i : BLK;
                uint8_t *c = (uint8_t *)codes + i * bytes;
                memcpy(buf, x + i, len * sizeof *buf);
                fmt__round_f32_kernel(&k, path, o->mode, buf, len, i, stats ? &local : NULL);
                if (!lean_codes || !fmt__encode_f32_lean(&k, &ck, o->mode, false, c, buf, len, i, NULL))
                    fmt__codes_from_f32(&ck, copy, c, buf, len);
            }
        }
#pragma omp critical
        fmt__counts_merge(&total, &local);
    }
    if (stats) fmt__counts_add(stats, &total, n);
    return FMT_OK;
}

size_t fmt_packed_bytes(const fmt_t *f, size_t n) {
    if (f->bits < 8) return (n * (size_t)f->bits + 7) / 8;
    return n * fmt_code_bytes(f);
}

// The bit stream of codes[lo..n), for the elements after the last whole group (their bytes are
// zeroed first: the caller's buffer may hold anything).
static void pack_tail(const fmt_t *f, uint8_t *packed, const uint8_t *c, size_t lo, size_t n) {
    const unsigned w = (unsigned)f->bits, mask = (1u << w) - 1;
    const size_t first = lo * w / 8;  // lo is a whole group: a byte boundary
    memset(packed + first, 0, fmt_packed_bytes(f, n) - first);
    for (size_t i = lo; i < n; i++) {
        size_t bit = i * w;
        unsigned v = (c[i] & mask) << (bit % 8);  // at most 15 bits: spans two bytes
        packed[bit / 8] |= (uint8_t)v;
        if ((bit % 8) + w > 8) packed[bit / 8 + 1] |= (uint8_t)(v >> 8);
    }
}

static void unpack_tail(const fmt_t *f, uint8_t *c, const uint8_t *packed, size_t lo, size_t n) {
    const unsigned w = (unsigned)f->bits, mask = (1u << w) - 1;
    for (size_t i = lo; i < n; i++) {
        size_t bit = i * w;
        unsigned v = packed[bit / 8];
        if ((bit % 8) + w > 8) v |= (unsigned)packed[bit / 8 + 1] << 8;
        c[i] = (uint8_t)((v >> (bit % 8)) & mask);
    }
}

int fmt_pack(const fmt_t *f, uint8_t *packed, const void *codes, size_t n) {
    if (f->bits >= 8) {
        memcpy(packed, codes, n * fmt_code_bytes(f));
        return FMT_OK;
    }
    const uint8_t *c = codes;
    // fp4 pairs and fp6 quads with the vector kernels, on the threads; the rest bit by bit.
    const size_t group = f->bits == 4 ? 2 : f->bits == 6 ? 4 : 0;
    const size_t whole = group ? n / group * group : 0, nchunks = (whole + CHUNK - 1) / CHUNK;
    const fmt_round_path copy = fmt__best_copy();
#pragma omp parallel for schedule(static) if (nchunks > 1)
    for (size_t ci = 0; ci < nchunks; ci++) {
        const size_t lo = ci * CHUNK, len = whole - lo < CHUNK ? whole - lo : CHUNK;
        if (group == 2) fmt__pack4(copy, packed + lo / 2, c + lo, len);
        else fmt__pack6(copy, packed + lo / 4 * 3, c + lo, len);
    }
    pack_tail(f, packed, c, whole, n);
    return FMT_OK;
}

int fmt_unpack(const fmt_t *f, void *codes, const uint8_t *packed, size_t n) {
    if (f->bits >= 8) {
        memcpy(codes, packed, n * fmt_code_bytes(f));
        return FMT_OK;
    }
    uint8_t *c = codes;
    const size_t group = f->bits == 4 ? 2 : f->bits == 6 ? 4 : 0;
    const size_t whole = group ? n / group * group : 0, nchunks = (whole + CHUNK - 1) / CHUNK;
    const fmt_round_path copy = fmt__best_copy();
#pragma omp parallel for schedule(static) if (nchunks > 1)
    for (size_t ci = 0; ci < nchunks; ci++) {
        const size_t lo = ci * CHUNK, len = whole - lo < CHUNK ? whole - lo : CHUNK;
        if (group == 2) fmt__unpack4(copy, c + lo, packed + lo / 2, len);
        else fmt__unpack6(copy, c + lo, packed + lo / 4 * 3, len);
    }
    unpack_tail(f, c, packed, whole, n);
    return FMT_OK;
}
