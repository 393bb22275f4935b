// policy.c: precision policies (policy.h): site names, the policy text format (parse, check,
// canonical text), equality, and loading a preset or a file. The preset texts live in presets.c.
// Constraints: library level: status codes and messages ("ORIGIN:LINE: ..."), never exits; no
// global state. Every name (formats, recipes, modes, accumulators) is parsed by the layer
// below that owns it; this file only adds the policy's own words.
#include "autocast/policy.h"

#include "kernels/engine.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>

// ---------------------------------------------------------------------------------------------
// sites

static const char *const site_names[AC_NSITES] = {
#define AC_NAME(id, name) name,
    AC_SITE_LIST(AC_NAME)
#undef AC_NAME
};

const char *ac_site_name(ac_site s) { return (unsigned)s < AC_NSITES ? site_names[s] : "?"; }

int ac_site_from_name(const char *name) {
    for (int s = 0; name && s < AC_NSITES; s++)
        if (!strcmp(name, site_names[s])) return s;
    return -1;
}

// Sites that hold gradients: what loss scaling protects.
static bool is_grad_site(int s) {
    return s == AC_QKV_GRAD || s == AC_O_GRAD || s == AC_GATEUP_GRAD || s == AC_DOWN_GRAD ||
           s == AC_HEAD_GRAD || s == AC_GRADS;
}

static const char *const gemm_names[AC_NPROJ][AC_NPASSES] = {
    {"attn.qkv.fprop", "attn.qkv.dgrad", "attn.qkv.wgrad"},
    {"attn.o.fprop", "attn.o.dgrad", "attn.o.wgrad"},
    {"mlp.gate_up.fprop", "mlp.gate_up.dgrad", "mlp.gate_up.wgrad"},
    {"mlp.down.fprop", "mlp.down.dgrad", "mlp.down.wgrad"},
    {"lm_head.fprop", "lm_head.dgrad", "lm_head.wgrad"},
};

const char *ac_gemm_name(ac_proj p, ac_pass pass) {
    return (unsigned)p < AC_NPROJ && (unsigned)pass < AC_NPASSES ? gemm_names[p][pass] : "?";
}

void ac_gemm_sites(ac_proj p, ac_pass pass, ac_site *a, ac_site *b) {
    *a = pass == AC_FPROP ? ac_proj_in(p) : ac_proj_grad(p);
    *b = pass == AC_WGRAD ? ac_proj_in(p) : ac_proj_w(p);
}

static void site_list(char *buf, size_t len) {
    size_t n = 0;
    buf[0] = 0;
    for (int s = 0; s < AC_NSITES && n < len; s++) {
        const int w = snprintf(buf + n, len - n, "%s%s", s ? " " : "", site_names[s]);
        if (w < 0) break;
        n += (size_t)w;
    }
}

// ---------------------------------------------------------------------------------------------
// defaults

static const char *const update_names[] = {"fp32", "round", "sr", "kahan"};
enum { NUPDATES = sizeof update_names / sizeof update_names[0] };

// The float32 layout under any name (fp32, float, e8m23): a site in it rounds nothing.
static bool is_f32_layout(const fmt_t *f) { return fmt_contains_f32(f) && fmt_embeds_in_f32(f); }

static void rule_default(ac_rule *r, const fmt_t *f, bool active) {
    memset(r, 0, sizeof *r);
    r->active = active;
    r->fmt = *f;
    fmt_scaling_from_name(&r->scaling, "none", NULL, 0);  // cannot fail
    r->delayed = false;
    r->round.mode = FMT_RNE;
    r->round.overflow = FMT_SATURATE;  // training recipes saturate (TE, satfinite)
}

static void scaler_none(ac_scaler_cfg *c) {
    *c = (ac_scaler_cfg){.kind = AC_SCALE_NONE, .init = 1, .growth = 1, .backoff = 1, .interval = 0,
                         .min_scale = 1};
}

void ac_policy_fp32(ac_policy *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "fp32");
    fmt_t f32;
    fmt_from_name(&f32, "fp32");  // a table row: cannot fail
    for (int s = 0; s < AC_NSITES; s++) rule_default(&p->site[s], &f32, false);
    scaler_none(&p->scaler);
    p->update = AC_UPDATE_FP32;
    for (int g = 0; g < AC_NPROJ; g++)
        for (int k = 0; k < AC_NPASSES; k++) p->acc[g][k] = (mm_acc){.fmt = f32, .mode = FMT_RNE};
    p->amax_history = 1024;
    p->amax_margin = 0;
    p->hadamard = 0;
}

// ---------------------------------------------------------------------------------------------
// messages: errors and warnings, located by origin and line when there are any

typedef struct {
    const char *origin;        // NULL: a policy struct checked by ac_policy_validate
    const char *pname;         // its name, for messages without an origin
    int site_line[AC_NSITES];  // line that last set each site (0: none)
    int acc_line[AC_NPROJ][AC_NPASSES];  // line that last set each matmul's accumulator
    int update_line, scale_line, hist_line, margin_line, had_line, name_line;
    char *msg;
    size_t len;
    char warn[512];
} ctx;

static void vlocate(const ctx *c, int line, char *buf, size_t len, const char *fmt, va_list ap) {
    int n;
    if (c->origin && line > 0) n = snprintf(buf, len, "%s:%d: ", c->origin, line);
    else if (c->origin) n = snprintf(buf, len, "%s: ", c->origin);
    else n = snprintf(buf, len, "policy '%s': ", c->pname);
    if (n >= 0 && (size_t)n < len) vsnprintf(buf + n, len - (size_t)n, fmt, ap);
}

__attribute__((format(printf, 3, 4))) static int fail(ctx *c, int line, const char *fmt, ...) {
    if (c->msg && c->len) {
        va_list ap;
        va_start(ap, fmt);
        vlocate(c, line, c->msg, c->len, fmt, ap);
        va_end(ap);
    }
    return AC_EINVAL;
}

// Warnings pile up in c->warn, separated by "; ", and reach msg only if the policy is valid.
__attribute__((format(printf, 3, 4))) static void warn(ctx *c, int line, const char *fmt, ...) {
    const size_t n = strlen(c->warn);
    if (n + 3 >= sizeof c->warn) return;
    char *w = c->warn + n;
    size_t left = sizeof c->warn - n;
    if (n) {
        snprintf(w, left, "; ");
        w += 2, left -= 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vlocate(c, line, w, left, fmt, ap);
    va_end(ap);
}

// ---------------------------------------------------------------------------------------------
// checks shared by parsing and ac_policy_validate

static int check_element(ctx *c, int line, int s, const fmt_t *f, const char *token) {
    const char *name = token ? token : f->name;
    if (!fmt_embeds_in_f32(f))
        return fail(c, line, "site %s: format '%s' does not fit in float32; expected a format of "
                    "32 bits or fewer (bf16, fp16, e4m3, e5m2, e2m1, ...): sites are emulated in float32",
                    site_names[s], name);
    if (f->special == FMT_E8M0)
        return fail(c, line, "site %s: '%s' is a scale format (powers of two, no zero), not an element "
                    "format; expected an element format (bf16, fp16, e4m3, e5m2, ...), with e8m0 as the "
                    "scale of a recipe (mx, block:32:e8m0)", site_names[s], name);
    if (!f->is_signed && s != AC_ADAM_V)
        return fail(c, line, "site %s: format '%s' is unsigned, but the values of this site have both "
                    "signs; expected a signed format", site_names[s], name);
    return AC_OK;
}

static bool is_tensor_recipe(const fmt_scaling *sc) {
    return !sc->none && sc->tile_rows == 0 && sc->tile_cols == 0 && !sc->tensor_scale;
}

static int check_rule(ctx *c, int s, const ac_rule *r) {
    const int line = c->site_line[s];
    if (!r->active) return AC_OK;
    if (is_f32_layout(&r->fmt))
        return fail(c, line, "site %s is active in float32, which rounds nothing; expected active = "
                    "false (what format fp32 means in a policy)", site_names[s]);
    int st = check_element(c, line, s, &r->fmt, NULL);
    if (st) return st;
    char m[256];
    if (fmt_validate_round_opts(&r->fmt, &r->round, m, sizeof m) != FMT_OK)
        return fail(c, line, "site %s: %s", site_names[s], m);
    if (m[0]) warn(c, line, "site %s: %s", site_names[s], m);
    const fmt_scaling *sc = &r->scaling;
    if (!sc->none && (sc->tile_rows < 0 || sc->tile_cols < 0 || (unsigned)sc->scale_round >= FMT_SCALE_NRULES))
        return fail(c, line, "site %s: scaling has tile %dx%d and scale rounding %d; expected tile sizes "
                    ">= 0 and a scale rounding below FMT_SCALE_NRULES (%d)", site_names[s], sc->tile_rows,
                    sc->tile_cols, (int)sc->scale_round, (int)FMT_SCALE_NRULES);
    if (!sc->none && sc->nan_block && !sc->scale_fmt.has_nan)
        return fail(c, line, "site %s: scaling has :nanblock with scale format %s, which has no NaN; expected "
                    "a scale format with one (e8m0, e4m3, bf16, fp32, ...)", site_names[s], sc->scale_fmt.name);
    if (r->delayed && !is_tensor_recipe(sc))
        return fail(c, line, "site %s: delayed scaling needs the per-tensor recipe (tensor); the rule has "
                    "another one", site_names[s]);
    return AC_OK;
}

static int check_scaler(ctx *c, const ac_scaler_cfg *k) {
    const int line = c->scale_line;
    switch (k->kind) {
    case AC_SCALE_NONE: return AC_OK;
    case AC_SCALE_STATIC:
        if (!(k->init > 0) || !isfinite(k->init))
            return fail(c, line, "loss_scale static %g: expected a positive finite scale", k->init);
        return AC_OK;
    case AC_SCALE_DYNAMIC:
        if (!(k->init > 0) || !isfinite(k->init))
            return fail(c, line, "loss_scale dynamic: init=%g; expected a positive finite scale", k->init);
        if (!(k->growth >= 1) || !isfinite(k->growth))
            return fail(c, line, "loss_scale dynamic: growth=%g; expected a finite factor >= 1", k->growth);
        if (!(k->backoff > 0 && k->backoff <= 1))
            return fail(c, line, "loss_scale dynamic: backoff=%g; expected a factor in (0, 1]", k->backoff);
        if (k->interval < 1)
            return fail(c, line, "loss_scale dynamic: interval=%d; expected a number of steps >= 1",
                        k->interval);
        if (!(k->min_scale > 0) || !isfinite(k->min_scale))
            return fail(c, line, "loss_scale dynamic: min=%g; expected a positive finite floor", k->min_scale);
        if (k->init < k->min_scale)
            return fail(c, line, "loss_scale dynamic: init=%g is below min=%g; expected init >= min",
                        k->init, k->min_scale);
        return AC_OK;
    }
    return fail(c, line, "loss scaler kind %d; expected none, static or dynamic", (int)k->kind);
}

// The K-block length of a site's recipe: a cast turns the recipe's tile so that its columns run
// along the summed dimension, so that is tile_cols (0: no blocks along K).
static int k_block(const ac_rule *r) {
    return r->active && !r->delayed && !r->scaling.none ? r->scaling.tile_cols : 0;
}

// An emulated accumulator multiplies the operands' element values exactly (at most 12 bits of
// precision each) and applies their scales to each K-block's partial sum, so both operands
// must be cast, and K-blocks that both operands have must be the same blocks.
static int check_emulated(ctx *c, const ac_policy *p, ac_proj g, ac_pass k) {
    const mm_acc *acc = &p->acc[g][k];
    if (!mm_acc_is_emulated(acc)) return AC_OK;
    ac_site sa, sb;
    ac_gemm_sites(g, k, &sa, &sb);
    const ac_site ops[2] = {sa, sb};
    if (acc->engine) {
        // An engine takes its instruction types (an uncast site is float32: tf32 or f32 kinds).
        fmt_t f32;
        fmt_from_name(&f32, "fp32");
        const fmt_t *fa = p->site[sa].active ? &p->site[sa].fmt : &f32, *fb = p->site[sb].active ? &p->site[sb].fmt : &f32;
        // The same check as the matmul's own (mm_validate): the kind, and promote=N against its k.
        const int ka = k_block(&p->site[sa]), kb = k_block(&p->site[sb]);
        char m[512];
        if (mm_acc_check_operands(acc, fa, fb, ka == kb ? ka : 0, m, sizeof m) != MM_OK)
            return fail(c, c->acc_line[g][k], "%s (matmul %s: operands %s x %s)", m, gemm_names[g][k],
                        site_names[sa], site_names[sb]);
    }
    for (int i = 0; i < 2 && !acc->engine; i++) {
        const ac_rule *r = &p->site[ops[i]];
        if (!r->active || r->fmt.mbits + 1 > 12)
            return fail(c, c->acc_line[g][k], "accumulator %s of %s is emulated, which needs operands of at "
                        "most 12 bits of precision (exact products), but its operand site %s is %s; "
                        "expected that site in bf16, fp16 or narrower, or accumulator fp32 for %s",
                        acc->fmt.name, gemm_names[g][k], site_names[ops[i]], r->active ? r->fmt.name : "fp32",
                        gemm_names[g][k]);
    }
    const int ka = k_block(&p->site[sa]), kb = k_block(&p->site[sb]);
    if (ka > 0 && kb > 0 && ka != kb)
        return fail(c, c->acc_line[g][k], "accumulator %s of %s is emulated, which applies block scales "
                    "to partial sums of K-blocks, but %s has blocks of %d along K and %s blocks of %d; "
                    "expected the same block length", acc->fmt.name, gemm_names[g][k], site_names[sa], ka,
                    site_names[sb], kb);
    return AC_OK;
}

static int check_policy(ctx *c, const ac_policy *p) {
    int st;
    if (!memchr(p->name, 0, sizeof p->name)) return fail(c, 0, "the name is not terminated");
    for (const char *q = p->name; *q; q++)
        if (isspace((unsigned char)*q) || *q == '#')
            return fail(c, c->name_line, "name '%s' holds a space or '#'; expected one word", p->name);
    for (int s = 0; s < AC_NSITES; s++)
        if ((st = check_rule(c, s, &p->site[s]))) return st;

    const ac_rule *master = &p->site[AC_MASTER];
    if ((unsigned)p->update >= NUPDATES)
        return fail(c, c->update_line, "update %d; expected fp32, round, sr or kahan", (int)p->update);
    if (p->update != AC_UPDATE_FP32 && !master->active)
        return fail(c, c->update_line, "update %s stores the weights in the master site's format, but "
                    "site master is fp32; expected a 'site master FORMAT' line (e.g. site master bf16), "
                    "or update fp32", update_names[p->update]);
    if (p->update == AC_UPDATE_FP32 && master->active)
        return fail(c, c->update_line ? c->update_line : c->site_line[AC_MASTER],
                    "site master is %s, but update fp32 keeps float32 master weights; expected update "
                    "round, sr or kahan (how the %s weights are updated), or site master fp32",
                    master->fmt.name, master->fmt.name);

    if ((st = check_scaler(c, &p->scaler))) return st;
    if (p->amax_history < 1 || p->amax_history > AC_AMAX_HISTORY_MAX)
        return fail(c, c->hist_line, "amax_history %d; expected a history length in [1, %d]", p->amax_history,
                    AC_AMAX_HISTORY_MAX);
    if (!isfinite(p->amax_margin))
        return fail(c, c->margin_line, "amax_margin %g; expected a finite number", p->amax_margin);
    if (p->hadamard != 0 && p->hadamard != 16)
        return fail(c, c->had_line, "hadamard %d; expected 0 (off) or 16", p->hadamard);

    for (int g = 0; g < AC_NPROJ; g++)
        for (int k = 0; k < AC_NPASSES; k++)
            if ((st = check_emulated(c, p, (ac_proj)g, (ac_pass)k))) return st;

    // Warnings: valid, but worth saying.
    for (int s = 0; s < AC_NSITES; s++) {
        const ac_rule *r = &p->site[s];
        if (is_grad_site(s) && r->active && r->scaling.none && p->scaler.kind == AC_SCALE_NONE &&
            r->fmt.min_subnormal > 0x1p-40) {
            warn(c, c->site_line[s], "site %s: %s gradients with neither loss scaling nor a scaling "
                 "recipe: values below 2^%d round to zero (the point of an ablation such as "
                 "fp16-amp-noscale; loss_scale dynamic avoids it)", site_names[s], r->fmt.name,
                 ilogb(r->fmt.min_subnormal) - 1);
            break;
        }
    }
    for (int s = 0; s < AC_NSITES; s++) {
        const ac_rule *r = &p->site[s];
        if (is_grad_site(s) && r->active && r->scaling.none && p->scaler.kind != AC_SCALE_NONE &&
            r->round.overflow == FMT_SATURATE && r->fmt.has_inf) {
            warn(c, c->site_line[s], "site %s saturates on overflow, so the loss scaler never sees an "
                 "inf there and cannot back off; expected 'ieee' with loss scaling", site_names[s]);
            break;
        }
    }
    return AC_OK;
}

static void finish_warnings(ctx *c) {
    if (c->msg && c->len) snprintf(c->msg, c->len, "%s", c->warn);
}

int ac_policy_validate(const ac_policy *p, char *msg, size_t msg_len) {
    ctx c;
    memset(&c, 0, sizeof c);
    c.pname = p->name, c.msg = msg, c.len = msg_len;
    if (msg && msg_len) msg[0] = 0;
    const int st = check_policy(&c, p);
    if (st == AC_OK) finish_warnings(&c);
    return st;
}

// ---------------------------------------------------------------------------------------------
// parsing

enum { MAX_TOKENS = 16, MAX_LINE = 1024 };

static bool parse_float(const char *t, float *out) {
    char *end;
    const double v = strtod(t, &end);
    if (end == t || *end || !isfinite(v) || fabs(v) > FLT_MAX) return false;
    *out = (float)v;
    return true;
}

static bool parse_int(const char *t, int *out) {
    char *end;
    errno = 0;
    const long v = strtol(t, &end, 10);
    if (end == t || *end || errno || v < INT_MIN || v > INT_MAX) return false;
    *out = (int)v;
    return true;
}

static bool has_glob(const char *t) { return strpbrk(t, "*?[") != NULL; }
// A site or matmul line's first word against a name: a glob matches as fnmatch does, else the
// word must be the name.
static bool word_matches(const char *word, const char *name) {
    return has_glob(word) ? !fnmatch(word, name, 0) : !strcmp(word, name);
}

// site SITE FORMAT [RECIPE] [MODE] [saturate|ieee]: the optional fields are told apart by what
// they are (mode and overflow names do not collide with recipes), so their order is free.
static int parse_site(ctx *c, ac_policy *p, int line, char **tok, int n) {
    if (n < 3)
        return fail(c, line, "site needs a site and a format; expected site SITE FORMAT [RECIPE] [MODE] "
                    "[saturate|ieee]");
    if (n > 6)
        return fail(c, line, "site %s: too many fields ('%s'); expected site SITE FORMAT [RECIPE] "
                    "[MODE] [saturate|ieee]", tok[1], tok[6]);
    bool match[AC_NSITES] = {false};
    int nmatch = 0;
    for (int s = 0; s < AC_NSITES; s++)
        if (word_matches(tok[1], site_names[s]))
            match[s] = true, nmatch++;
    if (!nmatch) {
        char list[512];
        site_list(list, sizeof list);
        return fail(c, line, "%s '%s'%s; expected a site (%s) or a glob such as *.w",
                    has_glob(tok[1]) ? "site pattern" : "unknown site", tok[1],
                    has_glob(tok[1]) ? " matches no site" : "", list);
    }

    fmt_t f;
    if (fmt_from_name(&f, tok[2]) != FMT_OK)
        return fail(c, line, "unknown format '%s'; expected a format name (fp32, bf16, fp16, e4m3, e5m2, "
                    "e3m2, e2m3, e2m1, ... or eXmY[:flags])", tok[2]);
    ac_rule r;
    if (is_f32_layout(&f)) {
        if (n > 3)
            return fail(c, line, "site %s: format %s leaves the site in float32 and takes no recipe, mode "
                        "or overflow policy; found '%s'", tok[1], tok[2], tok[3]);
        rule_default(&r, &f, false);
    } else {
        // The sign check depends on the site; check every matched one.
        for (int s = 0; s < AC_NSITES; s++) {
            if (!match[s]) continue;
            const int st = check_element(c, line, s, &f, tok[2]);
            if (st) return st;
        }
        rule_default(&r, &f, true);
        bool have_recipe = false, have_mode = false, have_ov = false;
        int recipe_at = 0;
        for (int i = 3; i < n; i++) {
            const char *t = tok[i];
            fmt_round_opts mo = r.round;
            fmt_overflow ov;
            if (fmt_mode_spec_from_name(&mo, t) == FMT_OK) {  // a mode, or sr:a|b|c (P3109's variants)
                if (have_mode)
                    return fail(c, line, "site %s: a second rounding mode '%s'; expected one mode", tok[1], t);
                r.round.mode = mo.mode, r.round.sr_variant = mo.sr_variant, have_mode = true;
                continue;
            }
            if (fmt_overflow_from_name(&ov, t) == FMT_OK) {
                if (have_ov)
                    return fail(c, line, "site %s: a second overflow policy '%s'; expected one of ieee, "
                                "saturate, satpropagate or satnone", tok[1], t);
                r.round.overflow = ov, have_ov = true;
                continue;
            }
            if (have_recipe)
                return fail(c, line, "site %s: '%s' is not a rounding mode (rne rna rtz rup rdn rto sr sr:b "
                            "sr:c) or an overflow policy (ieee saturate satpropagate satnone), and the "
                            "site has its recipe already "
                            "('%s'); expected at most one recipe", tok[1], t, tok[recipe_at]);
            have_recipe = true, recipe_at = i;
            if (!strcasecmp(t, "delayed")) {
                fmt_scaling_from_name(&r.scaling, "tensor", NULL, 0);  // cannot fail
                r.delayed = true;
                continue;
            }
            char m[512];  // RECIPE+tensor too: the recipe parser has the grammar
            if (fmt_scaling_from_name(&r.scaling, t, m, sizeof m) != FMT_OK)
                return fail(c, line, "site %s: '%s' is not a rounding mode (rne rna rtz rup rdn rto sr), "
                            "an overflow policy (saturate|ieee), delayed, or a recipe: %s", tok[1], t, m);
        }
    }
    for (int s = 0; s < AC_NSITES; s++)
        if (match[s]) p->site[s] = r, c->site_line[s] = line;
    return AC_OK;
}

static int parse_loss_scale(ctx *c, ac_policy *p, int line, char **tok, int n) {
    static const char expect[] = "expected loss_scale none | static S | dynamic [init=65536] [growth=2] "
                                 "[backoff=0.5] [interval=2000] [min=1]";
    if (n < 2) return fail(c, line, "loss_scale needs a kind; %s", expect);
    ac_scaler_cfg k;
    if (!strcmp(tok[1], "none")) {
        if (n > 2) return fail(c, line, "loss_scale none takes nothing more; found '%s'", tok[2]);
        scaler_none(&k);
    } else if (!strcmp(tok[1], "static")) {
        float s;
        if (n != 3 || !parse_float(tok[2], &s) || !(s > 0))
            return fail(c, line, "loss_scale static %s: expected one positive finite scale S",
                        n > 2 ? tok[2] : "(missing)");
        k = (ac_scaler_cfg){.kind = AC_SCALE_STATIC, .init = s, .growth = 1, .backoff = 1, .interval = 0,
                            .min_scale = s};
    } else if (!strcmp(tok[1], "dynamic")) {
        k = (ac_scaler_cfg){.kind = AC_SCALE_DYNAMIC, .init = 65536, .growth = 2, .backoff = 0.5f,
                            .interval = 2000, .min_scale = 1};
        for (int i = 2; i < n; i++) {
            const char *eq = strchr(tok[i], '=');
            const size_t kl = eq ? (size_t)(eq - tok[i]) : 0;
            const char *v = eq ? eq + 1 : "";
            bool ok;
            if (kl == 4 && !strncmp(tok[i], "init", 4)) ok = parse_float(v, &k.init);
            else if (kl == 6 && !strncmp(tok[i], "growth", 6)) ok = parse_float(v, &k.growth);
            else if (kl == 7 && !strncmp(tok[i], "backoff", 7)) ok = parse_float(v, &k.backoff);
            else if (kl == 8 && !strncmp(tok[i], "interval", 8)) ok = parse_int(v, &k.interval);
            else if (kl == 3 && !strncmp(tok[i], "min", 3)) ok = parse_float(v, &k.min_scale);
            else
                return fail(c, line, "loss_scale dynamic: unknown setting '%s'; expected init=, growth=, "
                            "backoff=, interval= or min=", tok[i]);
            if (!ok)
                return fail(c, line, "loss_scale dynamic: '%s' is not a number; expected %.*s=NUMBER",
                            tok[i], (int)kl, tok[i]);
        }
    } else {
        return fail(c, line, "unknown loss_scale '%s'; %s", tok[1], expect);
    }
    p->scaler = k, c->scale_line = line;
    return AC_OK;
}

static int parse_accumulator(ctx *c, ac_policy *p, int line, char **tok, int n) {
    if (n < 2 || n > 3)
        return fail(c, line, "accumulator takes a spec and optionally a matmul; found %d values", n - 1);
    mm_acc acc;
    char m[384];
    if (mm_acc_from_name(&acc, tok[1], m, sizeof m) != MM_OK)
        return fail(c, line, "accumulator '%s': %s", tok[1], m);
    const char *pat = n == 3 ? tok[2] : "*";
    int nmatch = 0;
    for (int g = 0; g < AC_NPROJ; g++)
        for (int k = 0; k < AC_NPASSES; k++)
            if (word_matches(pat, gemm_names[g][k]))
                p->acc[g][k] = acc, c->acc_line[g][k] = line, nmatch++;
    if (!nmatch)
        return fail(c, line, "accumulator %s: %s '%s'%s; expected a matmul PROJECTION.PASS (projections "
                    "attn.qkv, attn.o, mlp.gate_up, mlp.down, lm_head; passes fprop, dgrad, wgrad) or a "
                    "glob such as *.fprop", tok[1], has_glob(pat) ? "pattern" : "unknown matmul", pat,
                    has_glob(pat) ? " matches no matmul" : "");
    return AC_OK;
}

static int parse_line(ctx *c, ac_policy *p, int line, char **tok, int n) {
    const char *key = tok[0];
    if (!strcmp(key, "site")) return parse_site(c, p, line, tok, n);
    if (!strcmp(key, "loss_scale")) return parse_loss_scale(c, p, line, tok, n);
    if (n != 2) {
        const bool known = !strcmp(key, "name") || !strcmp(key, "update") ||
                           !strcmp(key, "amax_history") || !strcmp(key, "amax_margin") ||
                           !strcmp(key, "hadamard");
        if (known)
            return fail(c, line, "%s takes one value; found %d", key, n - 1);
    }
    if (!strcmp(key, "accumulator")) return parse_accumulator(c, p, line, tok, n);
    if (!strcmp(key, "name")) {
        if (strlen(tok[1]) >= sizeof p->name)
            return fail(c, line, "name '%s' is too long; expected at most %zu characters", tok[1],
                        sizeof p->name - 1);
        snprintf(p->name, sizeof p->name, "%s", tok[1]);
        c->name_line = line;
        return AC_OK;
    }
    if (!strcmp(key, "update")) {
        for (int u = 0; u < NUPDATES; u++)
            if (!strcmp(tok[1], update_names[u])) {
                p->update = (ac_update)u, c->update_line = line;
                return AC_OK;
            }
        return fail(c, line, "unknown update '%s'; expected fp32, round, sr or kahan", tok[1]);
    }
    if (!strcmp(key, "amax_history")) {
        if (!parse_int(tok[1], &p->amax_history) || p->amax_history < 1 || p->amax_history > AC_AMAX_HISTORY_MAX)
            return fail(c, line, "amax_history '%s'; expected a history length in [1, %d] (1024)", tok[1],
                        AC_AMAX_HISTORY_MAX);
        c->hist_line = line;
        return AC_OK;
    }
    if (!strcmp(key, "amax_margin")) {
        if (!parse_float(tok[1], &p->amax_margin))
            return fail(c, line, "amax_margin '%s'; expected a finite number (0)", tok[1]);
        c->margin_line = line;
        return AC_OK;
    }
    if (!strcmp(key, "hadamard")) {
        if (!parse_int(tok[1], &p->hadamard) || (p->hadamard != 0 && p->hadamard != 16))
            return fail(c, line, "hadamard '%s'; expected 0 (off) or 16", tok[1]);
        c->had_line = line;
        return AC_OK;
    }
    return fail(c, line, "unknown setting '%s'; expected name, site, loss_scale, update, accumulator, "
                "amax_history, amax_margin or hadamard", key);
}

int ac_policy_parse(ac_policy *p, const char *text, const char *origin, char *msg, size_t msg_len) {
    ctx c;
    memset(&c, 0, sizeof c);
    c.origin = origin && *origin ? origin : "policy", c.msg = msg, c.len = msg_len;
    if (msg && msg_len) msg[0] = 0;
    if (!text) return fail(&c, 0, "no text");
    ac_policy q;
    ac_policy_fp32(&q);
    q.name[0] = 0;
    int line = 0;
    for (const char *s = text; *s;) {
        const char *e = strchr(s, '\n');
        const size_t len = e ? (size_t)(e - s) : strlen(s);
        line++;
        char buf[MAX_LINE];
        if (len >= sizeof buf)
            return fail(&c, line, "line of %zu characters; expected at most %d", len, MAX_LINE - 1);
        memcpy(buf, s, len);
        buf[len] = 0;
        char *hash = strchr(buf, '#');
        if (hash) *hash = 0;
        char *tok[MAX_TOKENS];
        int n = 0;
        char *save = NULL;
        for (char *t = strtok_r(buf, " \t\r\v\f", &save); t; t = strtok_r(NULL, " \t\r\v\f", &save)) {
            if (n == MAX_TOKENS)
                return fail(&c, line, "more than %d fields on one line", MAX_TOKENS);
            tok[n++] = t;
        }
        if (n) {
            const int st = parse_line(&c, &q, line, tok, n);
            if (st) return st;
        }
        s += len + (e ? 1 : 0);
    }
    c.pname = q.name;
    const int st = check_policy(&c, &q);
    if (st) return st;
    finish_warnings(&c);
    *p = q;
    return AC_OK;
}

// ---------------------------------------------------------------------------------------------
// loading

enum { MAX_FILE = 1 << 20 };

int ac_policy_load(ac_policy *p, const char *name_or_path, char *msg, size_t msg_len) {
    if (msg && msg_len) msg[0] = 0;
    if (!name_or_path || !*name_or_path) {
        if (msg) snprintf(msg, msg_len, "no policy given; expected a preset (%s) or a policy file",
                          ac_preset_names());
        return AC_EINVAL;
    }
    const size_t tlen = ac_preset_text(name_or_path, NULL, 0);
    if (tlen) {
        char *text = malloc(tlen + 1);
        if (!text) {
            if (msg) snprintf(msg, msg_len, "out of memory loading preset %s", name_or_path);
            return AC_EIO;
        }
        ac_preset_text(name_or_path, text, tlen + 1);
        char origin[96];
        snprintf(origin, sizeof origin, "preset %s", name_or_path);
        const int st = ac_policy_parse(p, text, origin, msg, msg_len);
        free(text);
        return st;
    }

    struct stat sb;
    if (stat(name_or_path, &sb) == 0 && S_ISDIR(sb.st_mode)) {  // fopen would take it, and reading fail
        if (msg)
            snprintf(msg, msg_len, "'%s' is a directory; expected a preset (%s, fp16-static-S) or a policy file",
                     name_or_path, ac_preset_names());
        return AC_EIO;
    }
    FILE *fh = fopen(name_or_path, "rb");
    if (!fh) {
        const int err = errno;
        const bool static_family = !strncmp(name_or_path, "fp16-static-", 12);
        char near[160];
        ac_preset_suggest(name_or_path, near, sizeof near);
        if (msg)
            snprintf(msg, msg_len, "'%s' is not a preset%s and cannot be read as a policy file (%s); "
                     "%sexpected a preset (%s, fp16-static-S) or a path", name_or_path,
                     static_family ? " (fp16-static-S needs a positive number S)" : "", strerror(err), near,
                     ac_preset_names());
        return static_family ? AC_EINVAL : AC_EIO;
    }
    char *text = malloc(MAX_FILE + 1);
    size_t n = text ? fread(text, 1, MAX_FILE + 1, fh) : 0;
    const bool bad = !text || ferror(fh) || n > MAX_FILE;
    fclose(fh);
    if (bad) {
        if (msg) snprintf(msg, msg_len, "%s: %s", name_or_path,
                          !text ? "out of memory" : n > MAX_FILE ? "larger than 1 MiB; expected a policy "
                          "file" : "read error");
        free(text);
        return AC_EIO;
    }
    text[n] = 0;
    if (memchr(text, 0, n)) {
        if (msg) snprintf(msg, msg_len, "%s: holds a NUL byte; expected a policy text file", name_or_path);
        free(text);
        return AC_EINVAL;
    }
    ac_policy q;
    const int st = ac_policy_parse(&q, text, name_or_path, msg, msg_len);
    free(text);
    if (st) return st;
    if (!q.name[0]) {  // named after the file: "dir/my-fp8.policy" -> "my-fp8"
        const char *base = strrchr(name_or_path, '/');
        base = base ? base + 1 : name_or_path;
        size_t bl = strlen(base);
        if (bl > 7 && !strcmp(base + bl - 7, ".policy")) bl -= 7;
        if (bl >= sizeof q.name) bl = sizeof q.name - 1;
        memcpy(q.name, base, bl);
        q.name[bl] = 0;
        for (char *t = q.name; *t; t++)
            if (isspace((unsigned char)*t) || *t == '#') *t = '_';
    }
    *p = q;
    return AC_OK;
}

// ---------------------------------------------------------------------------------------------
// canonical text

typedef struct {
    char *buf;
    size_t cap, n;
} out;

__attribute__((format(printf, 2, 3))) static void put(out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(o->n < o->cap ? o->buf + o->n : NULL, o->n < o->cap ? o->cap - o->n : 0, fmt, ap);
    va_end(ap);
    if (w > 0) o->n += (size_t)w;
}

static bool acc_same(const mm_acc *a, const mm_acc *b);

size_t ac_policy_text(const ac_policy *p, char *buf, size_t cap) {
    out o = {buf, buf ? cap : 0, 0};
    if (o.cap) buf[0] = 0;
    put(&o, "# fplab precision policy (canonical form)\n");
    if (p->name[0]) put(&o, "name %s\n", p->name);
    for (int s = 0; s < AC_NSITES; s++) {
        const ac_rule *r = &p->site[s];
        if (!r->active) {
            put(&o, "site %s fp32\n", site_names[s]);
            continue;
        }
        char recipe[128];
        if (r->delayed) snprintf(recipe, sizeof recipe, "delayed");
        else fmt_scaling_name(&r->scaling, recipe, sizeof recipe);
        char mode[16];  // sr with P3109's variant B or C keeps it: the text parses back to the rule
        snprintf(mode, sizeof mode, "%s%s%s", fmt_mode_name(r->round.mode),
                 r->round.mode == FMT_SR && r->round.sr_variant != FMT_SR_A ? ":" : "",
                 r->round.mode == FMT_SR && r->round.sr_variant != FMT_SR_A ? fmt_sr_variant_name(r->round.sr_variant)
                                                                             : "");
        put(&o, "site %s %s %s %s %s\n", site_names[s], r->fmt.name, recipe, mode, fmt_overflow_name(r->round.overflow));
    }
    const ac_scaler_cfg *k = &p->scaler;
    if (k->kind == AC_SCALE_STATIC) put(&o, "loss_scale static %.9g\n", k->init);
    else if (k->kind == AC_SCALE_DYNAMIC)
        put(&o, "loss_scale dynamic init=%.9g growth=%.9g backoff=%.9g interval=%d min=%.9g\n", k->init,
            k->growth, k->backoff, k->interval, k->min_scale);
    else put(&o, "loss_scale none\n");
    put(&o, "update %s\n", (unsigned)p->update < NUPDATES ? update_names[p->update] : "?");
    // One line when every matmul has the same accumulator, else one per matmul.
    bool same = true;
    for (int g = 0; g < AC_NPROJ; g++)
        for (int k = 0; k < AC_NPASSES; k++) same &= acc_same(&p->acc[g][k], &p->acc[0][0]);
    for (int g = 0; g < AC_NPROJ; g++)
        for (int k = 0; k < AC_NPASSES; k++) {
            if (same && (g || k)) continue;
            char name[80];
            put(&o, "accumulator %s", mm_acc_name(&p->acc[g][k], name, sizeof name));
            if (same) put(&o, "\n");
            else put(&o, " %s\n", gemm_names[g][k]);
        }
    put(&o, "amax_history %d\namax_margin %.9g\nhadamard %d\n", p->amax_history, p->amax_margin,
        p->hadamard);
    return o.n;
}

// ---------------------------------------------------------------------------------------------
// equality

// An element or accumulator format: the text writes its name, so the name is part of it.
static bool fmt_same(const fmt_t *a, const fmt_t *b) { return !strcmp(a->name, b->name) && fmt_same_layout(a, b); }

static bool acc_same(const mm_acc *a, const mm_acc *b) {
    return fmt_same(&a->fmt, &b->fmt) && a->mode == b->mode && a->promote_every == b->promote_every &&
           a->engine == b->engine && a->engine_k == b->engine_k && a->engine_f16 == b->engine_f16;
}

static bool accs_same(const ac_policy *a, const ac_policy *b) {
    for (int g = 0; g < AC_NPROJ; g++)
        for (int k = 0; k < AC_NPASSES; k++)
            if (!acc_same(&a->acc[g][k], &b->acc[g][k])) return false;
    return true;
}

static bool rule_same(const ac_rule *a, const ac_rule *b) {
    if (!a->active && !b->active) return true;  // an inactive site casts nothing: its fields do not matter
    const fmt_scaling *x = &a->scaling, *y = &b->scaling;
    const fmt_round_opts *r = &a->round, *t = &b->round;
    return a->active == b->active && fmt_same(&a->fmt, &b->fmt) && a->delayed == b->delayed &&
           x->none == y->none && x->tile_rows == y->tile_rows && x->tile_cols == y->tile_cols &&
           // (a recipe's text names its preset by the scale format's fields: fmt_scaling_name)
           fmt_same_layout(&x->scale_fmt, &y->scale_fmt) && x->scale_round == y->scale_round &&
           x->tensor_scale == y->tensor_scale && x->nan_block == y->nan_block && x->recip == y->recip &&
           r->mode == t->mode && r->sr_variant == t->sr_variant &&
           r->overflow == t->overflow &&
           r->flush_subnormals == t->flush_subnormals && r->sr_bits == t->sr_bits && r->seed == t->seed &&
           r->stream == t->stream && r->offset == t->offset;
}

bool ac_policy_equal(const ac_policy *a, const ac_policy *b) {
    if (strncmp(a->name, b->name, sizeof a->name)) return false;
    for (int s = 0; s < AC_NSITES; s++)
        if (!rule_same(&a->site[s], &b->site[s])) return false;
    const ac_scaler_cfg *x = &a->scaler, *y = &b->scaler;
    return x->kind == y->kind && x->init == y->init && x->growth == y->growth && x->backoff == y->backoff &&
           x->interval == y->interval && x->min_scale == y->min_scale && a->update == b->update &&
           accs_same(a, b) && a->amax_history == b->amax_history &&
           a->amax_margin == b->amax_margin && a->hadamard == b->hadamard;
}
