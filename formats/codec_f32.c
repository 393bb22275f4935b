// codec_f32.c: the vector kernels of codec.c (declared in codec_internal.h): codes of rounded
// float32 values, float32 values of codes, fp4 and fp6 packing.
// Constraints: the scalar functions of codec.c are the reference (tests/test_codec.c compares
// every code of every format up to 16 bits); branch-free integer arithmetic on eight lanes with
// GCC/Clang vector extensions, compiled once more per instruction set in portable builds
// (round_internal.h), as round_f32.c is; no libm, no MPFR.
//
// A value v of the format in float32 bits, v = sign | E' << 23 | F: in the normal binades its
// code is sign | (E' - 127 + bias) << m | F >> (23 - m), i.e. (|v| bits >> (23-m)) - ((127 -
// bias) << m); below the smallest normal it is the significand shifted right by the distance
// from v's binade to the format's last place. Decoding runs the other way; a subnormal code M
// is the float32 M (exact) times 2^(emin - m), added to the exponent field.
#include <string.h>

#include "codec_internal.h"
#include "isa_targets.h"
#include "vec_internal.h"

static uint32_t f2u(double d) {
    const float f = (float)d;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

void fmt__codek_make(fmt__codek *k, const fmt_t *f) {
    memset(k, 0, sizeof *k);
    if (!fmt_embeds_in_f32(f) || f->bits > 32) return;
    const int m = f->mbits;
    const uint32_t emask = (1u << f->ebits) - 1, mmask = (1u << m) - 1;
    k->bytes = f->bits <= 8 ? 1 : f->bits <= 16 ? 2 : 4;
    k->m = m, k->bits = f->bits;
    k->wide = f->emin == -126;
    k->code_mask = f->bits == 32 ? ~0u : (1u << f->bits) - 1;
    k->sbit = f->is_signed ? 1u << (f->bits - 1) : 0;
    k->mag_sub = (uint32_t)(127 - f->bias) << m;
    k->min_normal_bits = f2u(f->min_normal);
    k->sub_base = (uint32_t)(f->emin + 150 - m);
    k->negzero_mask = f->has_negzero ? ~0u : 0;
    k->inf_code = emask << m;
    switch (f->special) {
    case FMT_IEEE:
        k->nan_code = emask << m | (m ? 1u << (m - 1) : 0), k->nan_sign_mask = ~0u;
        k->nan_mask = emask << m, k->nan_match = emask << m, k->nan_frac = true;
        k->inf_mask = k->code_mask & ~k->sbit, k->inf_match = emask << m;
        break;
    case FMT_FN:
        k->nan_code = emask << m | mmask, k->nan_sign_mask = ~0u;
        k->nan_mask = k->code_mask & ~k->sbit, k->nan_match = emask << m | mmask;
        break;
    case FMT_E8M0:
        k->nan_code = emask << m | mmask;
        k->nan_mask = k->code_mask, k->nan_match = emask << m | mmask;
        break;
    case FMT_FNUZ: k->nan_code = k->sbit, k->nan_mask = k->code_mask, k->nan_match = k->sbit; break;
    case FMT_EXTENDED: {  // one NaN (the -0 code, or all-ones unsigned) and inf just below it
        const uint32_t top = k->code_mask & ~k->sbit;  // the all-ones magnitude
        k->nan_code = f->is_signed ? k->sbit : top;
        k->nan_mask = k->code_mask, k->nan_match = k->nan_code;
        k->inf_code = f->is_signed ? top : top - 1;
        k->inf_mask = top, k->inf_match = k->inf_code;
        break;
    }
    case FMT_FINITE: k->nan_code = k->sbit; break;
    }
    k->dec_add = (uint32_t)(127 - f->bias) << 23;
    k->dec_sub_add = (uint32_t)(f->emin - m) << 23;
    k->e8m0 = f->special == FMT_E8M0;
    // Encoding: the normal binades must be float32 normals (e8m0's 2^-127 is the one exception
    // the formula takes, with m = 0). Decoding: subnormal values must be float32 normals unless
    // the format is wide (then the code is the bit pattern), and e8m0's bias 127.
    k->enc = f->emin >= -126 || f->special == FMT_E8M0;
    k->dec = f->special == FMT_E8M0 ? f->bias == 127
           : k->wide || (f->emin > -126 && f->emin - m >= -126);
}

// --- encode

FMT__VEC vu codes8(const fmt__codek *k, vu rb) {
    const vu zero = rb * 0, one = zero + 1;
    const vu s = rb >> 31, ab = rb & 0x7fffffffu, Ef = ab >> 23;
    const vu Ez = lt(Ef, one), Ep = Ef - Ez;  // max(E', 1)
    const vu sig = (ab & 0x7fffffu) | (~Ez & 0x800000u);
    const vu normal = (ab >> (uint32_t)(23 - k->m)) - k->mag_sub;
    vu sh = k->sub_base - Ep;
    sh = sel(lt(sh, zero + 31), sh, zero + 31);  // zero and below: everything shifts out
    const vu mag = sel(lt(ab, zero + k->min_normal_bits), sig >> sh, normal);
    const vu sgn = (s << (uint32_t)(k->bits - 1)) & k->sbit;
    vu code = mag | (sgn & (k->negzero_mask | lt(zero, ab)));
    code = sel(lt(zero + 0x7f800000u, ab), (zero + k->nan_code) | (sgn & k->nan_sign_mask), code);
    code = sel(lt(ab ^ 0x7f800000u, one), (zero + k->inf_code) | sgn, code);  // ab == inf
    return code;
}

// Stores eight codes of b bytes each (b a constant where inlined).
FMT__VEC void store_codes(void *dst, vu code, int b) {
    typedef uint8_t v8u8 __attribute__((vector_size(8)));
    typedef uint16_t v8u16 __attribute__((vector_size(16)));
    if (b == 1) {
        const v8u8 c = __builtin_convertvector(code, v8u8);
        memcpy(dst, &c, sizeof c);
    } else if (b == 2) {
        const v8u16 c = __builtin_convertvector(code, v8u16);
        memcpy(dst, &c, sizeof c);
    } else {
        memcpy(dst, &code, sizeof code);
    }
}

FMT__VEC void encode_loop(const fmt__codek *k, const int b, uint8_t *codes, const float *r, size_t n) {
    size_t i = 0;
    for (; i + W <= n; i += W) {
        vu rb;
        memcpy(&rb, r + i, sizeof rb);
        store_codes(codes + i * (size_t)b, codes8(k, rb), b);
    }
    if (i < n) {
        float t[W] = {0};
        uint8_t c[4 * W];
        memcpy(t, r + i, (n - i) * sizeof *t);
        vu rb;
        memcpy(&rb, t, sizeof rb);
        store_codes(c, codes8(k, rb), b);
        memcpy(codes + i * (size_t)b, c, (n - i) * (size_t)b);
    }
}

FMT__VEC void encode_body(const fmt__codek *k, void *codes, const float *r, size_t n) {
    switch (k->bytes) {
    case 1: encode_loop(k, 1, codes, r, n); break;
    case 2: encode_loop(k, 2, codes, r, n); break;
    default: encode_loop(k, 4, codes, r, n); break;
    }
}

// --- decode

FMT__VEC vu load_codes(const void *src, int b) {
    typedef uint8_t v8u8 __attribute__((vector_size(8)));
    typedef uint16_t v8u16 __attribute__((vector_size(16)));
    if (b == 1) {
        v8u8 c;
        memcpy(&c, src, sizeof c);
        return __builtin_convertvector(c, vu);
    }
    if (b == 2) {
        v8u16 c;
        memcpy(&c, src, sizeof c);
        return __builtin_convertvector(c, vu);
    }
    vu c;
    memcpy(&c, src, sizeof c);
    return c;
}

FMT__VEC vu values8(const fmt__codek *k, vu c) {
    const vu zero = c * 0, one = zero + 1;
    c &= k->code_mask;
    const vu sgn = lt(zero, c & k->sbit) & 0x80000000u;
    const vu mag = c & ~k->sbit;
    vu v;
    if (k->e8m0) {
        v = (c << 23) + k->dec_add;
        v = sel(lt(v, one), zero + 0x00400000u, v);  // 2^-127
    } else if (k->wide) {
        v = mag << (uint32_t)(23 - k->m);
    } else {
        const vu M = mag & ((1u << k->m) - 1);
        const vu normal = (mag << (uint32_t)(23 - k->m)) + k->dec_add;
        const vu sub = bits(__builtin_convertvector((vi)M, vf)) + k->dec_sub_add;
        v = sel(lt(mag, zero + (1u << k->m)), sel(lt(M, one), zero, sub), normal);
    }
    v |= sgn;
    if (k->inf_mask) v = sel(lt((c & k->inf_mask) ^ k->inf_match, one), zero + 0x7f800000u, v) | sgn;
    if (k->nan_mask) {
        vu nan = lt((c & k->nan_mask) ^ k->nan_match, one);
        if (k->nan_frac) nan &= lt(zero, c & ((1u << k->m) - 1));
        v = sel(nan, zero + 0x7fc00000u, v);
    }
    return v;
}

FMT__VEC void decode_loop(const fmt__codek *k, const int b, float *x, const uint8_t *codes, size_t n) {
    size_t i = 0;
    for (; i + W <= n; i += W) {
        const vu v = values8(k, load_codes(codes + i * (size_t)b, b));
        memcpy(x + i, &v, sizeof v);
    }
    if (i < n) {
        uint8_t c[4 * W] = {0};
        memcpy(c, codes + i * (size_t)b, (n - i) * (size_t)b);
        const vu v = values8(k, load_codes(c, b));
        memcpy(x + i, &v, (n - i) * sizeof *x);
    }
}

FMT__VEC void decode_body(const fmt__codek *k, float *x, const void *codes, size_t n) {
    switch (k->bytes) {
    case 1: decode_loop(k, 1, x, codes, n); break;
    case 2: decode_loop(k, 2, x, codes, n); break;
    default: decode_loop(k, 4, x, codes, n); break;
    }
}

// --- packing: 32 codes at a time

typedef uint8_t v32u8 __attribute__((vector_size(32)));
typedef uint16_t v16u16 __attribute__((vector_size(32)));
typedef uint8_t v16u8 __attribute__((vector_size(16)));

// fp4: a pair of codes (two bytes, a 16-bit lane) becomes the byte lo | hi << 4.
FMT__VEC void pack4_body(uint8_t *packed, const uint8_t *codes, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        v16u16 w;
        memcpy(&w, codes + i, sizeof w);
        w = (w & 0x0f) | ((w >> 4) & 0xf0);
        const v16u8 b = __builtin_convertvector(w, v16u8);
        memcpy(packed + i / 2, &b, sizeof b);
    }
    for (; i < n; i += 2) packed[i / 2] = (uint8_t)((codes[i] & 0x0f) | (codes[i + 1] & 0x0f) << 4);
}

FMT__VEC void unpack4_body(uint8_t *codes, const uint8_t *packed, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        v16u8 b;
        memcpy(&b, packed + i / 2, sizeof b);
        v16u16 w = __builtin_convertvector(b, v16u16);
        w = (w & 0x0f) | ((w << 4) & 0x0f00);
        memcpy(codes + i, &w, sizeof w);
    }
    for (; i < n; i += 2) codes[i] = packed[i / 2] & 0x0f, codes[i + 1] = packed[i / 2] >> 4;
}

// fp6: four codes (a 32-bit lane) become 24 bits, c0 | c1 << 6 | c2 << 12 | c3 << 18, stored as
// three bytes.
FMT__VEC void pack6_body(uint8_t *packed, const uint8_t *codes, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        vu l;
        memcpy(&l, codes + i, sizeof l);
        l = (l & 0x3f) | ((l >> 2) & 0xfc0) | ((l >> 4) & 0x3f000) | ((l >> 6) & 0xfc0000);
        const v32u8 b = __builtin_shufflevector((v32u8)l, (v32u8)l, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14,
                                                16, 17, 18, 20, 21, 22, 24, 25, 26, 28, 29, 30,
                                                0, 0, 0, 0, 0, 0, 0, 0);
        memcpy(packed + i / 4 * 3, &b, 24);
    }
    for (; i < n; i += 4) {
        const uint32_t v = (codes[i] & 0x3fu) | (codes[i + 1] & 0x3fu) << 6 | (codes[i + 2] & 0x3fu) << 12 |
                           (codes[i + 3] & 0x3fu) << 18;
        packed[i / 4 * 3] = (uint8_t)v, packed[i / 4 * 3 + 1] = (uint8_t)(v >> 8);
        packed[i / 4 * 3 + 2] = (uint8_t)(v >> 16);
    }
}

FMT__VEC void unpack6_body(uint8_t *codes, const uint8_t *packed, size_t n) {
    size_t i = 0;
    // 32 bytes are loaded for the 24 of a group (a 24-byte copy into a vector stalls store-to-
    // load forwarding): while 8 more are inside the packed input, i.e. 3i/4 + 32 <= 3n/4.
    for (; i + 43 <= n; i += 32) {
        v32u8 b;
        memcpy(&b, packed + i / 4 * 3, 32);
        const v32u8 z = {0};  // index 32: its first byte
        vu l = (vu)__builtin_shufflevector(b, z, 0, 1, 2, 32, 3, 4, 5, 32, 6, 7, 8, 32, 9, 10, 11, 32,
                                           12, 13, 14, 32, 15, 16, 17, 32, 18, 19, 20, 32, 21, 22, 23, 32);
        l = (l & 0x3f) | ((l << 2) & 0x3f00) | ((l << 4) & 0x3f0000) | ((l << 6) & 0x3f000000);
        memcpy(codes + i, &l, sizeof l);
    }
    for (; i < n; i += 4) {
        const uint32_t v = packed[i / 4 * 3] | (uint32_t)packed[i / 4 * 3 + 1] << 8 |
                           (uint32_t)packed[i / 4 * 3 + 2] << 16;
        codes[i] = v & 0x3f, codes[i + 1] = (v >> 6) & 0x3f;
        codes[i + 2] = (v >> 12) & 0x3f, codes[i + 3] = (v >> 18) & 0x3f;
    }
}

// --- the copies per instruction set, and the entry points

typedef enum { OP_ENCODE, OP_DECODE, OP_PACK4, OP_UNPACK4, OP_PACK6, OP_UNPACK6 } codec_op;

typedef struct {
    const fmt__codek *k;
    void *dst;
    const void *src;
    size_t n;
} codec_call;

FMT__VEC void run_body(codec_op op, const codec_call *c) {
    switch (op) {
    case OP_ENCODE: encode_body(c->k, c->dst, c->src, c->n); break;
    case OP_DECODE: decode_body(c->k, c->dst, c->src, c->n); break;
    case OP_PACK4: pack4_body(c->dst, c->src, c->n); break;
    case OP_UNPACK4: unpack4_body(c->dst, c->src, c->n); break;
    case OP_PACK6: pack6_body(c->dst, c->src, c->n); break;
    case OP_UNPACK6: unpack6_body(c->dst, c->src, c->n); break;
    }
}

static void run_generic(codec_op op, const codec_call *c) { run_body(op, c); }
#ifdef FMT__AVX2_COPY
FMT_TARGET(FMT_ISA_V3) static void run_avx2(codec_op op, const codec_call *c) {
    run_body(op, c);
}
#endif
#ifdef FMT__AVX512_COPY
FMT_TARGET(FMT_ISA_V4) static void run_avx512(codec_op op, const codec_call *c) {
    run_body(op, c);
}
#endif

static void run(fmt_round_path copy, codec_op op, const codec_call *c) {
    switch (copy) {
#ifdef FMT__AVX2_COPY
    case FMT_PATH_AVX2: run_avx2(op, c); break;
#endif
#ifdef FMT__AVX512_COPY
    case FMT_PATH_AVX512: run_avx512(op, c); break;
#endif
    default: run_generic(op, c); break;
    }
}

void fmt__codes_from_f32(const fmt__codek *k, fmt_round_path copy, void *codes, const float *r,
                         size_t n) {
    run(copy, OP_ENCODE, &(codec_call){k, codes, r, n});
}

void fmt__f32_from_codes(const fmt__codek *k, fmt_round_path copy, float *x, const void *codes,
                         size_t n) {
    run(copy, OP_DECODE, &(codec_call){k, x, codes, n});
}

void fmt__pack4(fmt_round_path copy, uint8_t *packed, const uint8_t *codes, size_t n) {
    run(copy, OP_PACK4, &(codec_call){NULL, packed, codes, n});
}

void fmt__unpack4(fmt_round_path copy, uint8_t *codes, const uint8_t *packed, size_t n) {
    run(copy, OP_UNPACK4, &(codec_call){NULL, codes, packed, n});
}

void fmt__pack6(fmt_round_path copy, uint8_t *packed, const uint8_t *codes, size_t n) {
    run(copy, OP_PACK6, &(codec_call){NULL, packed, codes, n});
}

void fmt__unpack6(fmt_round_path copy, uint8_t *codes, const uint8_t *packed, size_t n) {
    run(copy, OP_UNPACK6, &(codec_call){NULL, codes, packed, n});
}
