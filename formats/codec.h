// codec.h: codes of a format. Encode values to codes, decode codes to values, and pack
// sub-byte codes (two fp4 per byte, four fp6 in three bytes) for storage, files and GPUs.
// Contract: fmt_decode(fmt_encode(x)) == fmt_round(x) for every input, with the same options.
// Constraints: no MPFR; decode of 8- and 16-bit formats goes through a table built from the
// descriptor.
#ifndef FPLAB_CODEC_H
#define FPLAB_CODEC_H

#include "round.h"

// Bytes per code in unpacked storage: 1 (up to 8 bits), 2 (up to 16), 4 (up to 32) or 8.
size_t fmt_code_bytes(const fmt_t *f);

// The code of v, which must be a value of f, an infinity f has, or NaN (f's canonical NaN:
// IEEE quiet NaN with v's sign, the all-ones code for fn and e8m0, 100..0 for fnuz).
// A value f cannot hold (e.g. 0.3 in fp4) gets the code of fmt_round1(v) under defaults.
uint64_t fmt_encode1(const fmt_t *f, double v);
// The value of code c (bits above f->bits are ignored).
double fmt_decode1(const fmt_t *f, uint64_t c);

// codes[0..n) = encode(round(x[0..n))) with opts and stats as fmt_round_f32. codes holds
// n * fmt_code_bytes(f) bytes, one code per element, little-endian in memory order.
int fmt_encode_f32(const fmt_t *f, void *codes, const float *x, size_t n, const fmt_round_opts *o,
                   fmt_stats *stats);
// x[0..n) = decode(codes[0..n)) (codes as fmt_encode_f32 writes them; bits above the format's
// width are ignored: callers holding codes from outside check them with fmt_codes_check).
int fmt_decode_f32(const fmt_t *f, float *x, const void *codes, size_t n);
// FMT_OK when every code of codes[0..n) (fmt_code_bytes(f) bytes each) fits in f->bits, else
// FMT_EINVAL with *bad (when not NULL) the first index that does not. decode and pack keep their
// fast paths free of it (they ignore the bits above the width, which fplab's own codes never
// set); every entry point that takes codes from a user (the Python binding's decode and pack)
// checks them with this one rule first, so e2m1's 255 is refused rather than decoded as -6.
int fmt_codes_check(const fmt_t *f, const void *codes, size_t n, size_t *bad);

// Packed storage: formats under 8 bits as a little-endian bit stream (element i in bits
// [i*bits, (i+1)*bits)), so fp4 puts element 0 in the low nibble (as PyTorch's
// float4_e2m1fn_x2 and the OCP MX layout do) and fp6 puts four codes in three bytes; formats of
// 8 bits or more are stored as fmt_code_bytes(f) little-endian bytes per element.
size_t fmt_packed_bytes(const fmt_t *f, size_t n);
// packed = pack(codes[0..n)) (unpacked codes as fmt_encode_f32 writes them); unused trailing
// bits of the last byte are zero (bits above the width are ignored; see fmt_codes_check).
int fmt_pack(const fmt_t *f, uint8_t *packed, const void *codes, size_t n);
int fmt_unpack(const fmt_t *f, void *codes, const uint8_t *packed, size_t n);

#endif
