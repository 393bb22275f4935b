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

// How a tile's scale is chosen from its amax (the largest |x| in the tile).
typedef enum {
    FMT_SCALE_OCP,  // 2^(floor(log2 amax) - emax_elem): OCP MX v1.0; may clip the top of a tile
    FMT_SCALE_UP,   // amax / max_elem rounded up into the scale format: nothing clips (NVIDIA)
    FMT_SCALE_RNE,  // amax / max_elem rounded to nearest-even into the scale format
} fmt_scale_round;

typedef struct {
    bool none;             // no scaling: plain element-wise rounding
    int tile_rows;         // rows sharing a scale; 0 = all rows
    int tile_cols;         // columns sharing a scale; 0 = all columns
    fmt_t scale_fmt;       // format the scales are stored in (fp32: the exact quotient in fp32)
    fmt_scale_round scale_round;
    bool tensor_scale;     // two levels (NVFP4): an fp32 tensor scale maps the tensor amax to
                           // max_scale_fmt * max_elem, and tile scales are stored relative to it
} fmt_scaling;

// Parses a recipe: none | tensor | row | col | mx | nvfp4 | block:K:SCALEFMT |
// tile:RxC:SCALEFMT, with an optional ":ocp", ":up" or ":rne" suffix for the scale rounding.
// Defaults: tensor/row/col use fp32 scales (RNE, i.e. the fp32 quotient); mx is block:32:e8m0
// with OCP rounding; nvfp4 is block:16:e4m3 with RNE and a tensor scale; block and tile default
// to OCP for power-of-two scale formats (e8m0) and RNE otherwise.
// Returns FMT_OK, or FMT_EUNKNOWN/FMT_EINVAL with a message in msg naming what was expected.
int fmt_scaling_from_name(fmt_scaling *out, const char *spec, char *msg, size_t msg_len);
// Writes the canonical spelling of sc into buf (e.g. "block:32:e8m0:ocp").
void fmt_scaling_name(const fmt_scaling *sc, char *buf, size_t len);

// Optional outputs of a quantize call, all caller-owned; any pointer may be NULL.
typedef struct {
    float *scales;        // one decoded scale per tile, row-major over the tile grid:
                          // fmt_scale_count() floats (x ~= q * scale * tensor_scale)
    float tensor_scale;   // the fp32 second-level scale (1 when the recipe has none)
    uint64_t scales_clipped;  // tiles whose needed scale was out of the scale format's range
} fmt_quant_info;

// Number of tiles (and so of scales) for a rows x cols tensor under sc.
size_t fmt_scale_count(const fmt_scaling *sc, size_t rows, size_t cols);

// out = dequantize(quantize(in)): for each tile with decoded scale s (times the tensor scale),
// q = round_elem(in * (1/s)) and out = q * s, in float32 arithmetic; 1/s and q*s are exact for
// power-of-two scales. Scale rules for amax: 0 -> scale 1; inf or NaN -> scale 1, so the
// non-finite values go through the element format's own rules and are counted.
// out may equal in. stats counts the element rounding (overflow, underflow, ...), amax of in.
int fmt_quantize_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, const float *in,
                     size_t rows, size_t cols, const fmt_round_opts *o, fmt_stats *stats,
                     fmt_quant_info *info);

#endif
