// scale_internal.h: what the three files of block scaling share. scale_recipe.c reads and
// writes recipes, scale_rules.c chooses a tile's scale from its amax (the rules, one table row
// each), scale.c runs the passes over a tensor. Internal to formats/: not installed.
#ifndef FPLAB_SCALE_INTERNAL_H
#define FPLAB_SCALE_INTERNAL_H

#include <string.h>

#include "round_internal.h"
#include "scale.h"

static inline uint32_t fmt__f2u(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float fmt__u2f(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

// --- the rules (scale_rules.c)

// One scale rule, a row of fmt__scale_rules (indexed by fmt_scale_round, as formats are rows of
// format.c's table). A rule is a power-of-two rule (carry set: the scale is 2^(E - emax_elem)
// with E the exponent of amax after the carry) or a quotient rule (quotient set: amax / max_elem
// rounded into the scale format by mode). A new rule is a row here and its function; the parser,
// the spelling, the messages and the passes read the row.
typedef struct {
    const char *name;      // its recipe suffix, without the ':' ("ocp")
    fmt_round_mode mode;   // how a need is rounded into the scale format: FMT_RNE or FMT_RUP
    // Power-of-two rules: what is added to the significand of a normalised amax (frac_bits
    // fraction bits) before its exponent is read; it carries into the exponent exactly where the
    // rule goes up a binade.
    uint64_t (*carry)(int elem_mbits, int frac_bits);
    // Quotient rules: the one-level need of a tile whose amax is a (finite, > 0).
    double (*quotient)(double a, float elem_max);
    // Chooses each block's scale between two candidates by their errors (4over6): needs the
    // fp32 tensor scale to choose under, and runs the pass once per candidate, then the winners.
    bool by_error;
} fmt__scale_rule;

extern const fmt__scale_rule fmt__scale_rules[FMT_SCALE_NRULES];

// The rule of r, NULL when r is out of range.
static inline const fmt__scale_rule *fmt__scale_rule_of(fmt_scale_round r) {
    return (unsigned)r < FMT_SCALE_NRULES ? &fmt__scale_rules[r] : NULL;
}

// The scale formats whose roundings of a need take a few integer steps on a double's bits
// instead of the general float64 kernel: float32 (RNE, UP) and e8m0 (UP).
typedef enum { FMT_NEED_GENERIC, FMT_NEED_FP32, FMT_NEED_E8M0 } fmt__need_kind;

// How a tile's scale is computed in one call, from (element format, recipe).
typedef struct {
    const fmt__scale_rule *rule;
    fmt__kparams k;       // the scale format, saturating, for the rounding of a needed scale
    fmt_round_mode mode;  // the rule's mode
    fmt_round_path path;  // float32 path of (k, mode): two-level needs are float32 quotients
    bool nan_block, two_level;
    double lo, hi;        // the scale range: smallest positive value whose reciprocal is a finite
                          // float32 (>= 2^-127), and the format's max
    uint32_t carry32;     // power-of-two rules: the rule's carry for float32 bits (and carry64
    uint64_t carry64;     // for a double's)
    float elem_max;
    double enc_max;       // two levels: what s_enc maps the tensor amax to, over max_elem
    float alt_max;        // by_error: the second target of a block's amax, 2^emax_elem (4 for e2m1)
    int elem_emax;
    float s_enc;          // two levels: the tensor's encoding scale (1 until its amax is known)
    fmt__need_kind need;  // how a one-level need is rounded (scale_rules.c's round_need)
} fmt__scale_ctx;

void fmt__scale_ctx_make(fmt__scale_ctx *c, const fmt_t *elem, const fmt_scaling *sc);

// The two-level encoding scale from abits, the max |x| bits of the tensor (a NaN pattern if any).
float fmt__scale_encoding(const fmt__scale_ctx *c, uint32_t abits);

typedef struct {
    uint64_t clipped;  // scales out of the scale format's range (fmt_quant_info.scales_clipped)
    uint64_t nan;      // nan_block: tiles whose scale is NaN
} fmt__tile_counts;

// The scales of nt tiles from their amax bits: s (the decoded scale, as fmt_quant_info.scales
// reports it), mul (the elements' multiplier before rounding) and deq (the rounded values'
// multiplier after it). Every array holds round_up(nt, W) entries (vec_internal.h's W), bits
// zero beyond nt.
// One level: s = deq = the tile scale, mul = 1/s in float32.
// Two levels (NVFP4): sf = round(amax / max_elem * s_enc) into the scale format without a lower
// clamp (power-of-two rules: the power of two of amax * s_enc; RCEIL is UP, whose quotient is
// already float32's here); mul = s_enc / sf, deq = sf / s_enc. sf == 0 (an empty block, or one
// too small for the scale format) gives mul = deq = 0: the block becomes zero.
// pick (by_error rules; NULL otherwise): per tile, nonzero where the block's amax maps to
// alt_max instead of max_elem (round_up(nt, W) entries, like bits).
void fmt__tile_scales(const fmt__scale_ctx *c, const uint32_t *bits, const uint8_t *pick, size_t nt, float *s,
                      float *mul, float *deq, fmt__tile_counts *tc);

// --- recipes (scale_recipe.c)

// Checks a recipe with a scale as the parser does (the tile sizes, the rule, a scale format that
// fits in float32 and holds 1, a by_error rule under a tensor scale, :nanblock with a NaN in the
// scale format): FMT_OK or FMT_EINVAL with a message naming spec in msg (may be NULL).
int fmt__scaling_check(const fmt_scaling *sc, const char *spec, char *msg, size_t len);

#endif
