// scale_recipe.c: scaling recipes as people write them: the presets, the schemes (an element
// format with its recipe), the parser of a recipe's name (fmt_scaling_from_name, with the
// "+tensor" of a second level that autocast's policies use too), the canonical spelling, and the
// one check of a recipe that the parser and fmt_quantize_f32 share.
// Constraints: no arithmetic on data here; the rules' names come from scale_rules.c's table.
#include <float.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "scale_internal.h"

// Presets: the names people type. "none" is handled on its own (it has no scale). A preset
// with fixed_round names its rounding too (":pow2" is e8m0 with UP): it takes no rounding
// suffix, and names a recipe only with that rounding.
typedef struct {
    const char *name;
    int tile_rows, tile_cols;
    const char *scale_fmt;
    fmt_scale_round round;
    bool tensor_scale, fixed_round;
} preset;

// Transformer Engine's Float8BlockScaling: 1x128 tiles for activations and gradients, 128x128
// for weights, float32 scales amax / max_elem; with force_pow_2_scales (TE's default) the scale
// is the power of two that nothing clips: 2^-floor(log2 fl(max_elem / amax)), which is UP into
// e8m0 bit for bit (docs/formats.md, "Transformer Engine's block scaling").
static const preset presets[] = {
    {"tensor", 0, 0, "fp32", FMT_SCALE_RNE, false, false},
    {"row", 1, 0, "fp32", FMT_SCALE_RNE, false, false},
    {"col", 0, 1, "fp32", FMT_SCALE_RNE, false, false},
    {"mx", 1, 32, "e8m0", FMT_SCALE_OCP, false, false},
    {"nvfp4", 1, 16, "e4m3", FMT_SCALE_RNE, true, false},
    {"fp8block1x128", 1, 128, "fp32", FMT_SCALE_RNE, false, false},
    {"fp8block128x128", 128, 128, "fp32", FMT_SCALE_RNE, false, false},
    {"fp8block1x128:pow2", 1, 128, "e8m0", FMT_SCALE_UP, false, true},
    {"fp8block128x128:pow2", 128, 128, "e8m0", FMT_SCALE_UP, false, true},
};
enum { NPRESETS = sizeof presets / sizeof presets[0] };

// Schemes: an element format with its recipe, as OCP MX v1.0 and NVIDIA name them. As a recipe
// a scheme name means its recipe; where a format and a recipe are both wanted, both.
static const struct {
    const char *name, *elem, *recipe;
} schemes[] = {
    {"mxfp8", "e4m3", "mx"},      {"mxfp8_e4m3", "e4m3", "mx"}, {"mxfp8_e5m2", "e5m2", "mx"},
    {"mxfp6_e3m2", "e3m2", "mx"}, {"mxfp6_e2m3", "e2m3", "mx"}, {"mxfp4", "e2m1", "mx"},
    {"mxfp4_e2m1", "e2m1", "mx"}, {"nvfp4", "e2m1", "nvfp4"},
    // OCP MX v1.0 INT8: two's complement k with an implicit 2^-6, i.e. k/64; its emax is 0, so
    // the scale is 2^floor(log2 amax). e1m6 with one exponent bit of bias 1 and no specials has
    // exactly the values k/64, |k| <= 127 (sign-magnitude: -128/64 is not one of them, as in
    // microxcaling, which clamps int8 to +-127/64).
    {"mxint8", "e1m6:finite:bias=1", "mx"},
};
enum { NSCHEMES = sizeof schemes / sizeof schemes[0] };

size_t fmt_scheme_count(void) { return NSCHEMES; }

const char *fmt_scheme_get(size_t i, const char **elem, const char **recipe) {
    if (i >= NSCHEMES) return NULL;
    if (elem) *elem = schemes[i].elem;
    if (recipe) *recipe = schemes[i].recipe;
    return schemes[i].name;
}

static int scheme_index(const char *name, size_t n) {
    for (int i = 0; i < NSCHEMES; i++)
        if (strlen(schemes[i].name) == n && !strncasecmp(name, schemes[i].name, n)) return i;
    return -1;
}

int fmt_scheme_from_name(fmt_t *elem, fmt_scaling *sc, const char *name) {
    const int i = name ? scheme_index(name, strlen(name)) : -1;
    if (i < 0) return FMT_EUNKNOWN;
    if (elem) fmt_from_name(elem, schemes[i].elem);
    if (sc) fmt_scaling_from_name(sc, schemes[i].recipe, NULL, 0);
    return FMT_OK;
}

// The recipes a message expects; %s is the rules' list (rules_text).
#define EXPECTED_RECIPES                                                                          \
    "none, tensor, row, col, mx, nvfp4, fp8block1x128[:pow2], fp8block128x128[:pow2], "           \
    "block:K:SCALEFMT or tile:RxC:SCALEFMT (or a scheme: mxfp8, mxfp8_e5m2, mxfp6_e3m2, "         \
    "mxfp6_e2m3, mxfp4, mxint8), optionally followed by a scale rounding (%s), :nanblock and "   \
    ":recip, then +tensor for tiles under an fp32 tensor scale"
static const char nanblock_word[] = "nanblock", recip_word[] = "recip", plus_tensor[] = "+tensor";

// The rules' suffixes for a message, from the table: ":ocp, :up, ... or :4over6".
static const char *rules_text(char *buf, size_t len) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < FMT_SCALE_NRULES && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s:%s", i == 0 ? "" : i + 1 < FMT_SCALE_NRULES ? ", " : " or ",
                               fmt__scale_rules[i].name);
    return buf;
}

// The rule named word (a suffix without its ':'), or -1.
static int rule_index(const char *word) {
    for (int i = 0; i < FMT_SCALE_NRULES; i++)
        if (!strcasecmp(word, fmt__scale_rules[i].name)) return i;
    return -1;
}

bool fmt_values_fit_f32(const fmt_t *f) { return fmt_embeds_in_f32(f) && f->max <= FLT_MAX; }

// Scales are stored as float32 and scale 1 is the default of empty and non-finite tiles.
static int check_scale_format(const fmt_t *f, const char *spec, char *msg, size_t len) {
    if (!fmt_values_fit_f32(f)) {
        if (msg) snprintf(msg, len, "scaling '%s': scale format %s does not fit in float32; expected "
                          "a format of 32 bits or fewer (e8m0, e4m3, bf16, fp32, ...)", spec, f->name);
        return FMT_EINVAL;
    }
    if (!(f->min_subnormal <= 1.0 && f->max >= 1.0)) {
        if (msg) snprintf(msg, len, "scaling '%s': scale format %s cannot hold the scale 1", spec,
                          f->name);
        return FMT_EINVAL;
    }
    return FMT_OK;
}

// A whole decimal token [s, s+n) as a non-negative int.
static bool parse_count(const char *s, size_t n, int *out) {
    if (n == 0 || n > 9) return false;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    return *out = v, true;
}

int fmt__scaling_check(const fmt_scaling *sc, const char *spec, char *msg, size_t msg_len) {
    const fmt__scale_rule *rule = fmt__scale_rule_of(sc->scale_round);
    if (sc->tile_rows < 0 || sc->tile_cols < 0 || !rule) {
        if (msg) snprintf(msg, msg_len, "scaling '%s': tile %dx%d, rule %d; expected tile sizes >= 0 and a rule "
                          "of fmt_scale_round", spec, sc->tile_rows, sc->tile_cols, (int)sc->scale_round);
        return FMT_EINVAL;
    }
    const int st = check_scale_format(&sc->scale_fmt, spec, msg, msg_len);
    if (st != FMT_OK) return st;
    if (rule->by_error && !sc->tensor_scale) {
        if (msg) snprintf(msg, msg_len, "scaling '%s': :%s chooses each block's scale under an fp32 "
                          "tensor scale; expected the two-level recipe nvfp4 (nvfp4:%s)", spec, rule->name,
                          rule->name);
        return FMT_EINVAL;
    }
    if (sc->nan_block && !sc->scale_fmt.has_nan) {
        if (msg) snprintf(msg, msg_len, "scaling '%s': :nanblock stores a NaN scale, but scale format %s has "
                          "no NaN; expected a scale format with one (e8m0, e4m3, bf16, fp32, ...)", spec,
                          sc->scale_fmt.name);
        return FMT_EINVAL;
    }
    return FMT_OK;
}

// The last step of parsing a recipe with a scale: "+tensor" puts the tiles under a second level
// (only a one-level recipe with tiles takes it), then the recipe's check.
static int finish(fmt_scaling *out, fmt_scaling *sc, bool nan_block, bool two_level, const char *spec,
                  char *msg, size_t msg_len) {
    if (two_level) {
        if (sc->tensor_scale || (sc->tile_rows == 0 && sc->tile_cols == 0)) {
            if (msg) snprintf(msg, msg_len, "scaling '%s': +tensor puts tile scales under a tensor scale; "
                              "expected a recipe with tiles and one level (block:K:FMT+tensor, "
                              "tile:RxC:FMT+tensor)", spec);
            return FMT_EINVAL;
        }
        sc->tensor_scale = true;
    }
    sc->nan_block = nan_block;
    const int st = fmt__scaling_check(sc, spec, msg, msg_len);
    if (st == FMT_OK) *out = *sc;
    return st;
}

fmt_round_opts fmt_scaling_default_opts(const fmt_scaling *sc) {
    fmt_round_opts o = {0};
    o.mode = FMT_RNE;
    o.overflow = sc && !sc->none ? FMT_SATURATE : FMT_OVERFLOW_IEEE;
    return o;
}

int fmt_scaling_from_name(fmt_scaling *out, const char *spec, char *msg, size_t msg_len) {
    if (msg && msg_len) msg[0] = 0;
    if (!spec || !*spec) {
        char rules[128];
        if (msg) snprintf(msg, msg_len, "empty scaling recipe; expected " EXPECTED_RECIPES, rules_text(rules, sizeof rules));
        return FMT_EUNKNOWN;
    }
    char buf[256];
    if (strlen(spec) >= sizeof buf) {
        if (msg) snprintf(msg, msg_len, "scaling recipe is %zu characters long; expected at most %zu",
                          strlen(spec), sizeof buf - 1);
        return FMT_EINVAL;
    }
    // A scheme's name (mxfp4:up) stands for its recipe (mx:up).
    const size_t head = strcspn(spec, ":");
    const int si = scheme_index(spec, head);
    if (si >= 0) snprintf(buf, sizeof buf, "%s%s", schemes[si].recipe, spec + head);
    else strcpy(buf, spec);
    if (si < 0 && head == 5 && !strncasecmp(spec, "mxfp6", 5)) {
        if (msg) snprintf(msg, msg_len, "scaling '%s': mxfp6 is ambiguous: mxfp6_e3m2 or mxfp6_e2m3 (both the "
                          "recipe mx); say which", spec);
        return FMT_EUNKNOWN;
    }

    // A trailing "+tensor" (a second level), then a scale rounding (a rule's name), ":nanblock"
    // and ":recip" in any order (SCALEFMT may itself hold ':' flags, so strip from the end).
    const size_t blen = strlen(buf), tlen = sizeof plus_tensor - 1;
    const bool two_level = blen > tlen && !strcasecmp(buf + blen - tlen, plus_tensor);
    if (two_level) buf[blen - tlen] = 0;
    int rnd = -1;
    bool nan_block = false, recip = false;
    for (char *colon; (colon = strrchr(buf, ':'));) {
        const int r = rule_index(colon + 1);
        const bool nb = !strcasecmp(colon + 1, nanblock_word), rc = !strcasecmp(colon + 1, recip_word);
        if (r < 0 && !nb && !rc) break;
        if ((r >= 0 && rnd >= 0) || (nb && nan_block) || (rc && recip)) {
            char rules[128];
            if (msg) snprintf(msg, msg_len, "scaling '%s': %s is given twice; expected at most one of %s, one "
                              ":nanblock and one :recip at the end", spec,
                              r >= 0 ? "the scale rounding" : nb ? ":nanblock" : ":recip", rules_text(rules, sizeof rules));
            return FMT_EINVAL;
        }
        if (r >= 0) rnd = r;
        else if (nb) nan_block = true;
        else recip = true;
        *colon = 0;
    }

    fmt_scaling sc;
    memset(&sc, 0, sizeof sc);
    if (!strcasecmp(buf, "none")) {
        if (rnd >= 0 || nan_block || recip || two_level) {
            if (msg) snprintf(msg, msg_len, "scaling '%s': 'none' has no scale to %s; expected plain 'none'",
                              spec, two_level ? "put under a tensor scale (+tensor)" : nan_block ? "make NaN"
                                    : recip ? "divide by" : "round");
            return FMT_EINVAL;
        }
        sc.none = true;
        fmt_from_name(&sc.scale_fmt, "fp32");
        sc.scale_round = FMT_SCALE_RNE;
        return *out = sc, FMT_OK;
    }
    for (int i = 0; i < NPRESETS; i++) {
        if (strcasecmp(buf, presets[i].name)) continue;
        if (presets[i].fixed_round && rnd >= 0) {
            if (msg) snprintf(msg, msg_len, "scaling '%s': %s fixes the scale rounding (%s); expected it "
                              "without :%s, or the explicit form (block:K:SCALEFMT:RULE, tile:RxC:SCALEFMT:RULE)",
                              spec, presets[i].name, fmt__scale_rules[presets[i].round].name, fmt__scale_rules[rnd].name);
            return FMT_EINVAL;
        }
        sc.tile_rows = presets[i].tile_rows, sc.tile_cols = presets[i].tile_cols;
        fmt_from_name(&sc.scale_fmt, presets[i].scale_fmt);
        sc.scale_round = rnd >= 0 ? (fmt_scale_round)rnd : presets[i].round;
        sc.tensor_scale = presets[i].tensor_scale;
        sc.recip = recip;
        return finish(out, &sc, nan_block, two_level, spec, msg, msg_len);
    }

    const bool is_block = !strncasecmp(buf, "block:", 6), is_tile = !strncasecmp(buf, "tile:", 5);
    if (!is_block && !is_tile) {
        char rules[128];
        if (msg) snprintf(msg, msg_len, "unknown scaling recipe '%s'; expected " EXPECTED_RECIPES, spec,
                          rules_text(rules, sizeof rules));
        return FMT_EUNKNOWN;
    }
    const char *shape = buf + (is_block ? 6 : 5);
    const char *fmtname = strchr(shape, ':');
    const size_t shape_len = fmtname ? (size_t)(fmtname - shape) : strlen(shape);
    if (is_block) {
        int k;
        if (!parse_count(shape, shape_len, &k) || k < 1) {
            if (msg) snprintf(msg, msg_len, "scaling '%s': block size '%.*s' is not a positive integer; "
                              "expected block:K:SCALEFMT, e.g. block:32:e8m0", spec, (int)shape_len, shape);
            return FMT_EINVAL;
        }
        sc.tile_rows = 1, sc.tile_cols = k;
    } else {
        const char *x = memchr(shape, 'x', shape_len);
        if (!x) x = memchr(shape, 'X', shape_len);
        int r, c;
        if (!x || !parse_count(shape, (size_t)(x - shape), &r) ||
            !parse_count(x + 1, shape_len - (size_t)(x - shape) - 1, &c)) {
            if (msg) snprintf(msg, msg_len, "scaling '%s': tile shape '%.*s' is not RxC with non-negative "
                              "integers (0 = whole dimension); expected tile:RxC:SCALEFMT, e.g. "
                              "tile:128x128:fp32", spec, (int)shape_len, shape);
            return FMT_EINVAL;
        }
        sc.tile_rows = r, sc.tile_cols = c;
    }
    if (!fmtname || !fmtname[1]) {
        if (msg) snprintf(msg, msg_len, "scaling '%s': no scale format; expected %s:SCALEFMT with "
                          "SCALEFMT a format name (e8m0, e4m3, bf16, fp32, ...)", spec,
                          is_block ? "block:K" : "tile:RxC");
        return FMT_EINVAL;
    }
    int st = fmt_from_name(&sc.scale_fmt, fmtname + 1);
    if (st != FMT_OK) {
        if (msg) snprintf(msg, msg_len, "scaling '%s': '%s' is not a format; expected a scale format "
                          "name (e8m0, e4m3, bf16, fp32, ... or eXmY[:flags])", spec, fmtname + 1);
        return st;
    }
    // Exponent-only scale formats hold only powers of two: OCP's choice is the natural default.
    sc.scale_round = rnd >= 0 ? (fmt_scale_round)rnd
                              : sc.scale_fmt.mbits == 0 ? FMT_SCALE_OCP : FMT_SCALE_RNE;
    sc.recip = recip;
    return finish(out, &sc, nan_block, two_level, spec, msg, msg_len);
}

void fmt_scaling_name(const fmt_scaling *sc, char *buf, size_t len) {
    if (!buf || !len) return;
    if (sc->none) {
        snprintf(buf, len, "none");
        return;
    }
    const fmt__scale_rule *rule = fmt__scale_rule_of(sc->scale_round);
    const char *rn = rule ? rule->name : "?";
    char nb[24];
    snprintf(nb, sizeof nb, "%s%s", sc->nan_block ? ":nanblock" : "", sc->recip ? ":recip" : "");
    for (int i = 0; i < NPRESETS; i++) {
        const preset *p = &presets[i];
        fmt_t pf;
        fmt_from_name(&pf, p->scale_fmt);
        if (p->tile_rows != sc->tile_rows || p->tile_cols != sc->tile_cols ||
            p->tensor_scale != sc->tensor_scale || !fmt_same_layout(&pf, &sc->scale_fmt) ||
            (p->fixed_round && sc->scale_round != p->round))
            continue;
        if (sc->scale_round == p->round) snprintf(buf, len, "%s%s", p->name, nb);
        else snprintf(buf, len, "%s:%s%s", p->name, rn, nb);
        return;
    }
    // A two-level struct of another shape: the explicit form, then "+tensor".
    const char *ts = sc->tensor_scale ? "+tensor" : "";
    if (sc->tile_rows == 1 && sc->tile_cols > 0)
        snprintf(buf, len, "block:%d:%s:%s%s%s", sc->tile_cols, sc->scale_fmt.name, rn, nb, ts);
    else
        snprintf(buf, len, "tile:%dx%d:%s:%s%s%s", sc->tile_rows, sc->tile_cols, sc->scale_fmt.name,
                 rn, nb, ts);
}
