// codec_internal.h: the vector kernels behind codec.c (defined in codec_f32.c): codes of rounded
// float32 values, float32 values of codes, and fp4/fp6 packing, on unpacked codes of 1, 2 or 4
// bytes. Internal to formats/: not installed.
// Contract: bit for bit what codec.c's scalar functions give (encode_exact, fmt_decode1 as a
// float32, the bit-stream packing); tests/test_codec.c holds them together on every code of
// every format up to 16 bits.
#ifndef FPLAB_CODEC_INTERNAL_H
#define FPLAB_CODEC_INTERNAL_H

#include "round_internal.h"

// Per-format constants of the kernels, all derived from the descriptor by fmt__codek_make.
typedef struct {
    bool enc, dec;           // the vector kernels cover encoding / decoding this format
    int bytes;               // of an unpacked code
    int m, bits;
    bool wide;               // float32's binades (emin = -126): the code is the bit pattern >> (23-m)
    uint32_t code_mask, sbit;    // the code's bits, its sign bit (0 if unsigned)
    uint32_t mag_sub;            // (127 - bias) << m: a float32 exponent field to the format's
    uint32_t min_normal_bits;    // below it, the subnormal binade of the format
    uint32_t sub_base;           // emin + 150 - m: the right shift of a float32 significand with
                                 // exponent field E' (>= 1) into a subnormal code is sub_base - E'
    uint32_t negzero_mask;       // all-ones where the format has -0
    uint32_t nan_code, nan_sign_mask;  // the canonical NaN code, and whether it keeps the sign
    uint32_t inf_code;           // the code of +inf (IEEE: the exponent field all ones)
    uint32_t nan_mask, nan_match;      // decode: code & nan_mask == nan_match is NaN ...
    bool nan_frac;                     // ... with a nonzero fraction (IEEE)
    uint32_t inf_mask, inf_match;      //         code & inf_mask == inf_match is +-inf
    uint32_t dec_add;            // decode, normal codes: (127 - bias) << 23
    uint32_t dec_sub_add;        // decode, subnormal codes: (emin - m) << 23 added to float(M)
    bool e8m0;                   // decode: 2^(code - 127)
} fmt__codek;

// Fills k for f (float32-embedded formats only: the others leave k->enc and k->dec false).
void fmt__codek_make(fmt__codek *k, const fmt_t *f);

// codes[0..n) = the codes of r[0..n), values of the format as fmt_round_f32 leaves them (NaN as
// the quiet NaN). copy is the instruction set (FMT_PATH_GENERIC, _AVX2 or _AVX512, one that
// fmt__copy_runs accepts); k->enc must be true.
void fmt__codes_from_f32(const fmt__codek *k, fmt_round_path copy, void *codes, const float *r,
                         size_t n);
// x[0..n) = the float32 values of codes[0..n) (bits above the code ignored; NaN is 0x7fc00000);
// k->dec must be true.
void fmt__f32_from_codes(const fmt__codek *k, fmt_round_path copy, float *x, const void *codes,
                         size_t n);
// Packing of whole groups: fp4 pairs (n even) into n/2 bytes, fp6 quads (n a multiple of 4) into
// 3n/4 bytes; bits above the code's width ignored. The caller does the remainder.
void fmt__pack4(fmt_round_path copy, uint8_t *packed, const uint8_t *codes, size_t n);
void fmt__unpack4(fmt_round_path copy, uint8_t *codes, const uint8_t *packed, size_t n);
void fmt__pack6(fmt_round_path copy, uint8_t *packed, const uint8_t *codes, size_t n);
void fmt__unpack6(fmt_round_path copy, uint8_t *codes, const uint8_t *packed, size_t n);


// The same on sixteen lanes of AVX-512 (round_lean.c), where fmt__codes_lean_ok /
// fmt__values_lean_ok (c covered, CPU with AVX-512). fmt__encode_f32_lean rounds x with the
// explicit kernels first when round is true (then (p, mode) must be what fmt__f32_lean_covers
// accepts; it declines, returning false, where MXCSR has DAZ or FTZ set), and takes x as values
// of the format when false. Element i draws counter p->offset + base + i; the rounding's
// statistics go to counts (NULL: none wanted).
bool fmt__codes_lean_ok(const fmt__codek *c);
bool fmt__values_lean_ok(const fmt__codek *c);
bool fmt__encode_f32_lean(const fmt__kparams *p, const fmt__codek *c, fmt_round_mode mode, bool round,
                          void *codes, const float *x, size_t n, uint64_t base, fmt__counts *counts);
void fmt__decode_f32_lean(const fmt__codek *c, float *x, const void *codes, size_t n);
// FMT_PATH_HW's encoding (no statistics), for a call fmt__f32_hw_covers accepts: fp16 codes
// straight from the converter (vcvtps2ph, rne/rtz/rup/rdn, on sixteen lanes of AVX-512) with
// round_hw.c's fix-ups done on the codes. False (nothing written) for bf16, without AVX-512, or
// where MXCSR has DAZ or FTZ set.
bool fmt__encode_f32_hw(const fmt__kparams *p, const fmt__codek *c, fmt_round_mode mode, void *codes,
                        const float *x, size_t n);

#endif
