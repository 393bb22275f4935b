// scale.h: scaling recipes. Quantize a whole (rows x cols, row-major) tensor to an element
// format with scales: none, per tensor, per row, per column, 1-D blocks along a row (MX k=32
// with e8m0 scales; NVFP4 k=16 with e4m3 scales under an fp32 tensor scale) and 2-D tiles.
// Every recipe is one shape: a tile of tile_rows x tile_cols elements shares one scale
// (0 means the whole dimension), so per-tensor is (0,0), per-row (1,0), per-column (0,1), MX
// (1,32). Ragged edges (sizes not a multiple of the tile) make smaller tiles, never an error.
// Constraints: no MPFR; the element rounding is fmt_round_f32, so all its modes apply.
#ifndef FPLAB_SCALE_H
#define FPLAB_SCALE_H

#include "round.h"

// How a tile's scale is chosen from its amax (the largest |x| in the tile). The "needed" scale
// (a power of two from amax's exponent, or amax / max_elem) is rounded into the scale format;
// a need above the format's max gives max, one below lo = max(smallest positive value, 2^-127)
// gives lo (so that 1/s is a finite float32; e8m0 has no zero anyway). Both are counted in
// fmt_quant_info.scales_clipped, as is a rounded-up scale that saturated below its need.
// OCP, CEIL and EVEN give powers of two (exact in every scale format that holds them); UP, RNE
// and RCEIL round a quotient. torchao's ScaleCalculationMode maps one to one: FLOOR = OCP,
// CEIL = CEIL, EVEN = EVEN, RCEIL = RCEIL (docs/formats.md, "Scaling recipes").
typedef enum {
    FMT_SCALE_OCP,   // 2^(floor(log2 amax) - emax_elem): OCP MX v1.0; may clip the top of a tile
    FMT_SCALE_UP,    // amax / max_elem (in double) rounded up into the scale format: nothing clips
    FMT_SCALE_RNE,   // amax / max_elem rounded to nearest-even into the scale format (fp32: the
                     // quotient itself, to float32)
    FMT_SCALE_CEIL,  // 2^(ceil(log2 amax) - emax_elem): nothing clips, up to a binade lost
    FMT_SCALE_EVEN,  // 2^(floor(log2 r) - emax_elem), r = amax rounded to the element's precision
                     // (mbits fraction bits, ties away from zero, exponent unbounded): OCP's rule
                     // but one binade up where amax's top bits would round up to the next power
                     // of two (torchao's EVEN, which does it by an add on amax's float32 bits)
    FMT_SCALE_RCEIL, // fl32(amax / max_elem), the float32 quotient, rounded up into the scale
                     // format: cuBLAS's UE8M0 recipe, PTX cvt.rp.satfinite.ue8m0x2.f32, torchao's
                     // RCEIL (its eager path takes the ceiling of a float32 log2, which misses
                     // a quotient a few ulps above 2^k: docs/formats.md). Differs from UP only
                     // where the float32 quotient rounds onto a power of two from above (below
                     // 2^-126, e8m0's bottom: 2^-127 where UP gives 2^-126)
    FMT_SCALE_4OVER6,// two levels only (nvfp4:4over6): "Four Over Six" (arXiv 2512.02010). Each
                     // block is quantized with its amax mapped to max_elem (RNE's scale) and to
                     // 2^emax_elem (4 for e2m1: scale amax / 4, RNE into the scale format) and
                     // keeps the one whose dequantized values have the smaller sum of squared
                     // errors (ties: max_elem). The tensor scale maps A to S * max_elem with S the
                     // largest power of two such that S * max_elem / 2^emax_elem <= max_scale_fmt
                     // (e4m3, e2m1: 256, the paper's, so that the 4-candidate's 384 fits)
    FMT_SCALE_NRULES
} fmt_scale_round;

typedef struct {
    bool none;             // no scaling: plain element-wise rounding
    int tile_rows;         // rows sharing a scale; 0 = all rows
    int tile_cols;         // columns sharing a scale; 0 = all columns
    fmt_t scale_fmt;       // format the scales are stored in (fp32: the exact quotient in fp32)
    fmt_scale_round scale_round;
    bool tensor_scale;     // two levels (NVFP4): an fp32 tensor scale maps the tensor amax to
                           // max_scale_fmt * max_elem, and tile scales are stored relative to it
                           // (Transformer Engine's recipe, in float32 arithmetic):
                           //   s_enc = (max_scale_fmt * max_elem) / A, clamped to FLT_MAX;
                           //           1 when A is 0, inf or NaN (4over6: S in place of
                           //           max_scale_fmt, see FMT_SCALE_4OVER6)
                           //   sf    = round(amax_b / max_elem * s_enc) into the scale format,
                           //           saturating, with no lower clamp (power-of-two rules: the
                           //           power of two of amax_b * s_enc, e.g. OCP's
                           //           2^(floor(log2(amax_b * s_enc)) - emax_elem); 4over6: also
                           //           amax_b / 2^emax_elem * s_enc, the block keeps the better)
                           //   q     = round_elem(x * (s_enc / sf)),  out = q * (sf / s_enc)
                           // sf == 0 (an all-zero block, or one too small for the scale format:
                           // counted as clipped, its nonzero elements as underflow) gives q = 0.
    bool nan_block;        // a tile holding an inf or NaN gets the scale NaN, so all its elements
                           // become NaN (":nanblock": microxcaling's and torchao's rule); false:
                           // scale 1 and each element meets the element format's own rules
    bool recip;            // ":recip": q = round(x * fl(1/s)) in float32, as GPU kernels and
                           // Transformer Engine compute it (fl(1/s) is the float32 reciprocal;
                           // for two levels fl(s_enc / sf)). false (the default): q = round(x / s),
                           // the exact quotient by the decoded scale s (two levels: s =
                           // fl(sf / s_enc)), wherever s need not be a power of two (see
                           // fmt_quantize_f32). Powers of two give the same either way.
} fmt_scaling;

// The element rounding a recipe uses when the caller gives no options (fmt_quantize_f32 with
// o == NULL): round to nearest even, subnormals kept, and overflow FMT_SATURATE for every recipe
// with a scale (OCP MX v1.0, 6.3: scaled values above the element's max are clamped to it; as
// Transformer Engine's and CUDA's satfinite casts), FMT_OVERFLOW_IEEE for "none" (a plain cast,
// as NumPy/ml_dtypes). A zero-initialised fmt_round_opts passed explicitly means IEEE overflow
// for every recipe: callers that set some fields start from this instead.
fmt_round_opts fmt_scaling_default_opts(const fmt_scaling *sc);

// Parses a recipe: none | tensor | row | col | mx | nvfp4 | fp8block1x128 | fp8block128x128 |
// fp8block1x128:pow2 | fp8block128x128:pow2 | block:K:SCALEFMT | tile:RxC:SCALEFMT, with an
// optional scale rounding suffix (":ocp", ":up", ":rne", ":ceil", ":even", ":rceil", or
// ":4over6" for two-level recipes only), an optional ":nanblock" (the scale format must have a
// NaN) and ":recip", in any order at the end, then an optional "+tensor": a one-level recipe's
// tiles (not "tensor"'s single one) under an fp32 tensor scale (fmt_scaling.tensor_scale), as
// autocast's policies write NVFP4's weights (tile:16x16:e4m3+tensor). A ":pow2" name fixes its
// rounding and takes no rounding suffix.
// Keywords are case-insensitive; K >= 1; R, C >= 0 (0 = the whole dimension); SCALEFMT is any
// name fmt_from_name accepts, custom ":flag"s included (block:32:e5m3:fn:up), that fits in
// float32 and holds 1.
// Defaults: tensor/row/col use fp32 scales (RNE, i.e. the fp32 quotient); mx is block:32:e8m0
// with OCP rounding; nvfp4 is block:16:e4m3 with RNE and a tensor scale; fp8block1x128 and
// fp8block128x128 are tile:1x128:fp32 and tile:128x128:fp32 (RNE), their ":pow2" forms the same
// tiles with e8m0 scales and UP (Transformer Engine's Float8BlockScaling, fp32 or power-of-two
// scales); block and tile default to OCP for power-of-two scale formats (no mantissa bits:
// e8m0) and RNE otherwise.
// Returns FMT_OK, or FMT_EUNKNOWN/FMT_EINVAL with a message in msg (may be NULL) that names the
// spec and what was expected.
int fmt_scaling_from_name(fmt_scaling *out, const char *spec, char *msg, size_t msg_len);
// Schemes: an element format together with its recipe (mxfp8 = mxfp8_e4m3, mxfp8_e5m2,
// mxfp6_e3m2, mxfp6_e2m3, mxfp4 = mxfp4_e2m1: the element with mx; mxint8: e1m6:finite:bias=1,
// the values k/64 with |k| <= 127, with mx; nvfp4: e2m1 with nvfp4).
// fmt_scaling_from_name takes a scheme's name as its recipe ("mxfp4:up" is "mx:up"); this
// call gives both (elem, sc may be NULL). Returns FMT_OK or FMT_EUNKNOWN (also for the
// ambiguous "mxfp6").
int fmt_scheme_from_name(fmt_t *elem, fmt_scaling *sc, const char *name);
size_t fmt_scheme_count(void);
// Scheme i's name, element format and recipe names (NULL beyond the last).
const char *fmt_scheme_get(size_t i, const char **elem, const char **recipe);

// Writes the canonical spelling of sc into buf: the preset name where sc is a preset, with a
// rounding suffix only when it differs from the preset's ("mx", "mx:up", "tensor", "nvfp4",
// "nvfp4:4over6", "fp8block128x128"; a ":pow2" name only with its own rounding), otherwise the
// explicit form with its rounding ("block:16:e4m3:rne", "tile:16x16:fp32:rne",
// "block:128:e8m0:ocp"), then ":nanblock" and ":recip" when set ("mx:nanblock", "mx:up:nanblock").
// It parses back to the same recipe; a two-level struct that is not nvfp4-shaped is spelled in
// the explicit form followed by "+tensor" ("tile:16x16:e4m3:rne+tensor"), which parses back too
// where it has tiles.
void fmt_scaling_name(const fmt_scaling *sc, char *buf, size_t len);

// The two-level recipe's (NVFP4's) encoding scale for a tensor whose largest |x| is amax, as
// fmt_scaling.tensor_scale describes it: s_enc = (max_scale_fmt * max_elem) / amax in float32
// (4over6: S * max_elem / amax), clamped to FLT_MAX; 1 when amax is 0, inf or NaN. A value
// decodes as q * (sf / s_enc); a transport of codes sends s_enc (fmt_quant_info.tensor_scale is
// 1 / s_enc, rounded).
float fmt_scaling_tensor_enc(const fmt_t *elem, const fmt_scaling *sc, float amax);

// Optional outputs of a quantize call, all caller-owned; any pointer may be NULL.
typedef struct {
    float *scales;        // one decoded scale per tile, row-major over the tile grid:
                          // fmt_scale_count() floats (x ~= q * scale * tensor_scale)
    float *elems;         // rows*cols floats: the element values q (values of the element
                          // format, before the multiplication back by the scale), row-major;
                          // must not overlap in or out ("none": a copy of out)
    float tensor_scale;   // the fp32 second-level scale (1 when the recipe has none)
    uint64_t scales_clipped;  // tiles whose needed scale was out of the scale format's range
    uint64_t scales_nan;      // nan_block: tiles whose scale is NaN (they held an inf or NaN)
} fmt_quant_info;

// Number of tiles (and so of scales) for a rows x cols tensor under sc: ceil(rows/tr) *
// ceil(cols/tc) (0 for an empty tensor, and for "none", which has no scales).
size_t fmt_scale_count(const fmt_scaling *sc, size_t rows, size_t cols);

// The tile grid of a rows x cols tensor under sc: grid[0] tile rows (ceil(rows / tile rows)),
// grid[1] tiles per row; grid[0] * grid[1] == fmt_scale_count (both 0 for "none" or an empty
// tensor). Scales are laid out row-major over it.
void fmt_scale_grid(const fmt_scaling *sc, size_t rows, size_t cols, size_t grid[2]);

// True when every value of f is a finite float32 value (fmt_embeds_in_f32 and max <= FLT_MAX):
// the element and scale formats fmt_quantize_f32 takes, and the formats whose values a float32
// array can hold.
bool fmt_values_fit_f32(const fmt_t *f);

// out = dequantize(quantize(in)): for each tile with decoded scale s (times the tensor scale),
// q = round_elem(in * (1/s)) and out = q * s, in float32 arithmetic; 1/s and q*s are exact for
// power-of-two scales. Scale rules for amax: 0 -> scale 1; inf or NaN -> scale 1, so the
// non-finite values go through the element format's own rules and are counted (the tile's
// finite values are rounded unscaled); with sc->nan_block, scale NaN instead: q and out are NaN
// for the whole tile (q = the element format's rounding of NaN: -0 in formats without NaN), its
// elements are counted in nan_in and the tile in info->scales_nan.
// Two levels: see fmt_scaling.tensor_scale; info->scales holds sf and info->tensor_scale
// 1/s_enc, while out is q * fl(sf / s_enc) (which can differ from q * sf * tensor_scale in
// the last bit).
// Element i = row*cols + col is rounded with stochastic-rounding counter o->offset + i, so the
// result does not depend on the tile shape or the thread count. o may be NULL:
// fmt_scaling_default_opts(sc) (saturating for every recipe but "none").
// out may equal in (no other overlap). stats counts the element rounding (overflow, underflow,
// ...; n = rows*cols) and amax of in, not of the scaled values. Returns FMT_OK, FMT_EINVAL
// (bad options, element format beyond float32, negative tile sizes, bad scale format) or
// FMT_ENOMEM; on error out is unspecified. nan_block with a scale format without NaN is
// FMT_EINVAL, as fmt_scaling_from_name refuses it.
int fmt_quantize_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, const float *in,
                     size_t rows, size_t cols, const fmt_round_opts *o, fmt_stats *stats,
                     fmt_quant_info *info);

// fmt_quantize_f32, and the result as codes: codes[rows*cols] the codes of the element values
// q (fmt_code_bytes(elem) bytes each, row-major; for "none" the codes of out), scale_codes the
// tile scales as codes of sc->scale_fmt (fmt_code_bytes bytes each, row-major over
// fmt_scale_grid; nothing for "none"). x ~= decode(code) * decode(scale_code) * tensor_scale.
// Any of out, codes, scale_codes and info may be NULL (not wanted; the buffers the call needs
// are then its own). Codes are encoded with nearest-even, which is exact for values of the
// format. Returns as fmt_quantize_f32, or FMT_ENOMEM.
int fmt_quantize_codes_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, void *codes, void *scale_codes,
                           const float *in, size_t rows, size_t cols, const fmt_round_opts *o, fmt_stats *stats,
                           fmt_quant_info *info);

#endif
