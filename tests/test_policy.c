// test_policy.c: precision policies (autocast/policy.h). Site names; every preset loads,
// validates and round-trips through its canonical text (parse(text(p)) == p, field by field);
// chosen sites of chosen presets have the expected format, recipe and mode; the fp16-static-S
// family; globs, override order and free order of the optional fields; errors (AC_EINVAL with
// "ORIGIN:LINE:" and the offending token) and warnings; hand-built policies through
// ac_policy_validate; loading files; the files autocast/presets/*.policy equal the compiled-in
// texts (read from the repository root, or $FPLAB_ROOT); every preset has a one-line description
// (its "# description:" line); every site of a preset with a scaling recipe saturates.
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autocast/policy.h"
#include "formats/scale.h"

enum { MSG = 1024 };

// --- helpers

static ac_policy load(const char *name) {
    ac_policy p;
    char msg[MSG];
    cr_assert_eq(ac_policy_load(&p, name, msg, sizeof msg), AC_OK, "load %s: %s", name, msg);
    return p;
}

static ac_policy parse(const char *text) {
    ac_policy p;
    char msg[MSG];
    cr_assert_eq(ac_policy_parse(&p, text, "test", msg, sizeof msg), AC_OK, "parse: %s\n%s", msg, text);
    return p;
}

static const ac_rule *rule(const ac_policy *p, const char *site) {
    const int s = ac_site_from_name(site);
    cr_assert(s >= 0, "no site %s", site);
    return &p->site[s];
}

static void expect_scaling(const ac_rule *r, const char *spec, const char *what) {
    fmt_scaling sc;
    char msg[MSG];
    cr_assert_eq(fmt_scaling_from_name(&sc, spec, msg, sizeof msg), FMT_OK, "%s", msg);
    const fmt_scaling *x = &r->scaling;
    char got[128];
    fmt_scaling_name(x, got, sizeof got);
    cr_assert(x->none == sc.none && x->tile_rows == sc.tile_rows && x->tile_cols == sc.tile_cols &&
              x->scale_round == sc.scale_round && x->tensor_scale == sc.tensor_scale &&
              x->nan_block == sc.nan_block &&
              !strcmp(x->scale_fmt.name, sc.scale_fmt.name),
              "%s: recipe %s, expected %s", what, got, spec);
}

// Site has format fmt (active), recipe spec, mode and overflow.
static void expect_site(const ac_policy *p, const char *site, const char *fmt, const char *spec,
                        fmt_round_mode mode, fmt_overflow ov, bool delayed) {
    const ac_rule *r = rule(p, site);
    cr_assert(r->active, "%s: %s inactive, expected %s", p->name, site, fmt);
    cr_assert_str_eq(r->fmt.name, fmt, "%s: %s is %s, expected %s", p->name, site, r->fmt.name, fmt);
    char what[128];
    snprintf(what, sizeof what, "%s: %s", p->name, site);
    expect_scaling(r, spec, what);
    cr_assert_eq(r->round.mode, mode, "%s: mode %s, expected %s", what, fmt_mode_name(r->round.mode),
                 fmt_mode_name(mode));
    cr_assert_eq(r->round.overflow, ov, "%s: overflow %s, expected %s", what,
                 fmt_overflow_name(r->round.overflow), fmt_overflow_name(ov));
    cr_assert_eq(r->delayed, delayed, "%s: delayed %d, expected %d", what, r->delayed, delayed);
}

static void expect_inactive(const ac_policy *p, const char *site) {
    cr_assert(!rule(p, site)->active, "%s: %s is %s, expected fp32 (inactive)", p->name, site,
              rule(p, site)->fmt.name);
}

// text(p) parses back to p, and writing that again gives the same text.
static void expect_round_trip(const ac_policy *p) {
    const size_t n = ac_policy_text(p, NULL, 0);
    cr_assert(n > 0);
    char *t = malloc(n + 1), *u = malloc(n + 1);
    cr_assert_eq(ac_policy_text(p, t, n + 1), n);
    cr_assert_eq(strlen(t), n);
    ac_policy q;
    char msg[MSG];
    cr_assert_eq(ac_policy_parse(&q, t, "canonical", msg, sizeof msg), AC_OK, "%s: %s\n%s", p->name, msg, t);
    cr_assert(ac_policy_equal(p, &q), "%s: parse(text(p)) differs from p:\n%s", p->name, t);
    cr_assert_eq(ac_policy_text(&q, u, n + 1), n);
    cr_assert_str_eq(t, u, "%s: canonical text not stable", p->name);
    free(t), free(u);
}

// Each preset name in ac_preset_names, in order.
static int preset_list(char names[][64], int cap) {
    int n = 0;
    const char *s = ac_preset_names();
    while (*s && n < cap) {
        const size_t len = strcspn(s, ",");
        cr_assert(len > 0 && len < 64);
        memcpy(names[n], s, len);
        names[n++][len] = 0;
        s += len + (s[len] == ',');
    }
    return n;
}

static const char *const matmul_sites[] = {
    "attn.qkv.in", "attn.qkv.w", "attn.qkv.grad", "attn.o.in", "attn.o.w", "attn.o.grad",
    "mlp.gate_up.in", "mlp.gate_up.w", "mlp.gate_up.grad", "mlp.down.in", "mlp.down.w",
    "mlp.down.grad", "lm_head.in", "lm_head.w", "lm_head.grad"};
enum { NMATMUL = sizeof matmul_sites / sizeof matmul_sites[0] };

static const char *suffix(const char *site) { return strrchr(site, '.'); }
static bool is_head(const char *site) { return !strncmp(site, "lm_head.", 8); }

// --- sites

Test(policy, site_names) {
    cr_assert_eq(AC_NSITES, 24);
    // Sites are appended only: version 1's 23 keep their indices, attn.kv (the KV cache) is last.
    cr_assert_eq(AC_NSITES_V1, 23);
    cr_assert_eq(AC_ADAM_V, AC_NSITES_V1 - 1);
    cr_assert_eq(ac_site_from_name("attn.kv"), AC_KV);
    cr_assert_eq(AC_KV, AC_NSITES - 1);
    for (int s = 0; s < AC_NSITES; s++) {
        cr_assert_eq(ac_site_from_name(ac_site_name((ac_site)s)), s, "%s", ac_site_name((ac_site)s));
        for (int t = 0; t < s; t++) cr_assert_str_neq(ac_site_name((ac_site)s), ac_site_name((ac_site)t));
    }
    cr_assert_eq(ac_site_from_name("attn.qkv.grad"), AC_QKV_GRAD);
    cr_assert_eq(ac_site_from_name("adam.v"), AC_ADAM_V);
    cr_assert_eq(ac_site_from_name("attn.qkv"), -1);
    cr_assert_eq(ac_site_from_name("ATTN.QKV.IN"), -1, "site names are case-sensitive");
    cr_assert_eq(ac_site_from_name(NULL), -1);
}

Test(policy, fp32_policy) {
    ac_policy p;
    ac_policy_fp32(&p);
    cr_assert_str_eq(p.name, "fp32");
    for (int s = 0; s < AC_NSITES; s++) cr_assert(!p.site[s].active);
    cr_assert_eq(p.scaler.kind, AC_SCALE_NONE);
    cr_assert_eq(p.update, AC_UPDATE_FP32);
    for (int g = 0; g < AC_NPROJ; g++)
        for (int k = 0; k < AC_NPASSES; k++) cr_assert(!mm_acc_is_emulated(&p.acc[g][k]));
    cr_assert_eq(p.amax_history, 1024);
    cr_assert_eq(p.amax_margin, 0.0f);
    cr_assert_eq(p.hadamard, 0);
    char msg[MSG];
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_OK, "%s", msg);
    cr_assert_str_eq(msg, "");
    expect_round_trip(&p);
    ac_policy q = load("fp32");
    cr_assert(ac_policy_equal(&p, &q), "preset fp32 is not ac_policy_fp32");
}

// --- every preset

Test(policy, presets_load_validate_round_trip) {
    static const char *const expected[] = {
        "fp32", "bf16-amp", "fp16-amp", "fp16-amp-noscale", "fp16-static-1024", "pure-bf16",
        "pure-bf16-sr", "pure-bf16-kahan", "fp8-delayed", "fp8-current", "fp8-block", "mxfp8",
        "mxfp6", "mxfp4", "nvfp4", "w8-fp8", "w8a8-fp8", "w4-mxfp4", "w4-nvfp4", "w4a8-mx", "kv8-fp8",
        "w8a8kv8-fp8"};
    char names[32][64];
    const int n = preset_list(names, 32);
    cr_assert_eq(n, (int)(sizeof expected / sizeof expected[0]), "ac_preset_names: %s", ac_preset_names());
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(names[i], expected[i]);
        ac_policy p = load(names[i]);
        cr_assert_str_eq(p.name, names[i], "preset %s is named %s", names[i], p.name);
        char msg[MSG];
        cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_OK, "%s: %s", names[i], msg);
        expect_round_trip(&p);
        // Ops practitioners keep in fp32 stay there in every preset.
        expect_inactive(&p, "attn.scores");
        expect_inactive(&p, "attn.probs");
        expect_inactive(&p, "residual");
        expect_inactive(&p, "acts.saved");
        for (int g = 0; g < AC_NPROJ; g++)
            for (int k = 0; k < AC_NPASSES; k++) cr_assert(!mm_acc_is_emulated(&p.acc[g][k]), "%s", names[i]);
        // Every preset text says where it comes from in a comment.
        char text[4096];
        const size_t len = ac_preset_text(names[i], text, sizeof text);
        cr_assert(len > 0 && len < sizeof text);
        cr_assert_eq(text[0], '#', "%s: no comment line first", names[i]);
    }
}

// One line per preset for `fplab policy --list`, kept in the preset's text ("# description:").
Test(policy, preset_descriptions) {
    char names[32][64];
    const int n = preset_list(names, 32);
    for (int i = 0; i < n; i++) {
        char d[256];
        const size_t len = ac_preset_description(names[i], d, sizeof d);
        cr_assert(len > 10 && len < 100, "%s: description of %zu characters: '%s'", names[i], len, d);
        cr_assert_eq(strlen(d), len);
        cr_assert(!strchr(d, '\n') && d[0] != ' ' && d[len - 1] != ' ', "%s: '%s'", names[i], d);
        // It is the text's own line, once.
        char text[4096], line[300];
        ac_preset_text(names[i], text, sizeof text);
        snprintf(line, sizeof line, "# description: %s\n", d);
        const char *at = strstr(text, line);
        cr_assert(at && (at == text || at[-1] == '\n') && !strstr(at + 1, "# description:"), "%s", names[i]);
        // snprintf-like: the length without a buffer, a truncated copy with a small one.
        cr_assert_eq(ac_preset_description(names[i], NULL, 0), len);
        char small[8];
        cr_assert_eq(ac_preset_description(names[i], small, sizeof small), len);
        cr_assert(strlen(small) == 7 && !strncmp(small, d, 7));
    }
    char d[256];
    cr_assert(ac_preset_description("fp16-static-512", d, sizeof d) > 0 && strstr(d, "512") && !strstr(d, "@S@"),
              "%s", d);
    cr_assert_eq(ac_preset_description("nosuch", d, sizeof d), 0u);
    cr_assert_eq(ac_preset_description(NULL, d, sizeof d), 0u);
}

// Block-scaled sites saturate (OCP MX clamps scaled values to the element's max): every preset
// site with a scaling recipe does, by the site default, so the library's default changed nothing
// here; and a site's explicit "ieee" is kept.
Test(policy, scaled_sites_saturate) {
    char names[32][64];
    const int n = preset_list(names, 32);
    int scaled = 0;
    for (int i = 0; i < n; i++) {
        const ac_policy p = load(names[i]);
        for (int s = 0; s < AC_NSITES; s++) {
            const ac_rule *r = &p.site[s];
            if (!r->active || r->scaling.none) continue;
            scaled++;
            const fmt_round_opts d = fmt_scaling_default_opts(&r->scaling);
            cr_assert_eq(r->round.overflow, FMT_SATURATE, "%s: site %s", names[i], ac_site_name(s));
            cr_assert_eq(r->round.overflow, d.overflow, "%s: site %s", names[i], ac_site_name(s));
        }
    }
    cr_assert(scaled >= 60, "only %d scaled sites in the presets", scaled);
    ac_policy p = parse("site *.grad e5m2 mx ieee\nsite *.in e4m3 mx:nanblock\n");
    expect_site(&p, "attn.o.grad", "e5m2", "mx", FMT_RNE, FMT_OVERFLOW_IEEE, false);
    expect_site(&p, "attn.o.in", "e4m3", "mx:nanblock", FMT_RNE, FMT_SATURATE, false);
    expect_round_trip(&p);
    // A hand-built :nanblock needs a scale format that can hold the NaN, as the recipe parser says.
    cr_assert_eq(fmt_from_name(&p.site[AC_O_IN].scaling.scale_fmt, "e3m2"), FMT_OK);
    char msg[MSG];
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_EINVAL);
    cr_assert(strstr(msg, "attn.o.in") && strstr(msg, "nanblock"), "%s", msg);
}

Test(policy, preset_fp32_bf16_amp) {
    ac_policy p = load("fp32");
    for (int s = 0; s < AC_NSITES; s++) cr_assert(!p.site[s].active);
    p = load("bf16-amp");
    for (int i = 0; i < NMATMUL; i++)
        expect_site(&p, matmul_sites[i], "bf16", "none", FMT_RNE, FMT_SATURATE, false);
    expect_inactive(&p, "master");
    expect_inactive(&p, "grads");
    expect_inactive(&p, "adam.m");
    cr_assert_eq(p.scaler.kind, AC_SCALE_NONE);
    cr_assert_eq(p.update, AC_UPDATE_FP32);
}

Test(policy, preset_fp16) {
    ac_policy p = load("fp16-amp");
    for (int i = 0; i < NMATMUL; i++)
        expect_site(&p, matmul_sites[i], "fp16", "none", FMT_RNE, FMT_OVERFLOW_IEEE, false);
    expect_inactive(&p, "master");
    const ac_scaler_cfg *k = &p.scaler;
    cr_assert_eq(k->kind, AC_SCALE_DYNAMIC);
    cr_assert(k->init == 65536 && k->growth == 2 && k->backoff == 0.5f && k->interval == 2000 &&
              k->min_scale == 1, "dynamic defaults");
    // The same defaults when the line gives none of them.
    ac_policy q = parse("name fp16-amp\nsite *.in fp16 none rne ieee\nsite *.w fp16 none rne ieee\n"
                        "site *.grad fp16 none rne ieee\nloss_scale dynamic\n");
    cr_assert(ac_policy_equal(&p, &q), "loss_scale dynamic without settings differs from the preset");

    p = load("fp16-amp-noscale");
    expect_site(&p, "mlp.down.grad", "fp16", "none", FMT_RNE, FMT_OVERFLOW_IEEE, false);
    cr_assert_eq(p.scaler.kind, AC_SCALE_NONE);

    p = load("fp16-static-1024");
    cr_assert_eq(p.scaler.kind, AC_SCALE_STATIC);
    cr_assert_eq(p.scaler.init, 1024.0f);
    expect_site(&p, "attn.o.w", "fp16", "none", FMT_RNE, FMT_OVERFLOW_IEEE, false);
}

Test(policy, fp16_static_family) {
    ac_policy p = load("fp16-static-512");
    cr_assert_str_eq(p.name, "fp16-static-512");
    cr_assert_eq(p.scaler.kind, AC_SCALE_STATIC);
    cr_assert_eq(p.scaler.init, 512.0f);
    expect_site(&p, "attn.qkv.grad", "fp16", "none", FMT_RNE, FMT_OVERFLOW_IEEE, false);
    expect_round_trip(&p);
    p = load("fp16-static-0.5");
    cr_assert_eq(p.scaler.init, 0.5f);
    p = load("fp16-static-1e4");
    cr_assert_eq(p.scaler.init, 10000.0f);
    // Apart from S, the same policy as the example file.
    ac_policy a = load("fp16-static-8"), b = load("fp16-static-1024");
    a.scaler = b.scaler;
    snprintf(a.name, sizeof a.name, "%s", b.name);
    cr_assert(ac_policy_equal(&a, &b));
    // Not a positive number: not a preset, and no such file.
    static const char *const bad[] = {"fp16-static-0", "fp16-static--4", "fp16-static-abc",
                                      "fp16-static-", "fp16-static-1e99", "fp16-static-nan",
                                      "fp16-static- 8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[MSG];
        cr_assert_eq(ac_preset_text(bad[i], NULL, 0), 0u, "%s", bad[i]);
        cr_assert_eq(ac_policy_load(&p, bad[i], msg, sizeof msg), AC_EINVAL, "%s", bad[i]);
        cr_assert(strstr(msg, bad[i]) && strstr(msg, "positive number"), "%s: %s", bad[i], msg);
    }
}

Test(policy, preset_pure_bf16) {
    static const struct {
        const char *name;
        ac_update update;
    } cases[] = {{"pure-bf16", AC_UPDATE_ROUND}, {"pure-bf16-sr", AC_UPDATE_SR}, {"pure-bf16-kahan", AC_UPDATE_KAHAN}};
    for (int c = 0; c < 3; c++) {
        ac_policy p = load(cases[c].name);
        for (int i = 0; i < NMATMUL; i++)
            expect_site(&p, matmul_sites[i], "bf16", "none", FMT_RNE, FMT_SATURATE, false);
        expect_site(&p, "master", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
        expect_site(&p, "grads", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
        expect_site(&p, "adam.m", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
        expect_site(&p, "adam.v", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
        cr_assert_eq(p.update, cases[c].update, "%s", cases[c].name);
        cr_assert_eq(p.scaler.kind, AC_SCALE_NONE);
    }
}

Test(policy, preset_fp8) {
    ac_policy p = load("fp8-delayed");
    expect_site(&p, "attn.qkv.grad", "e5m2", "tensor", FMT_RNE, FMT_SATURATE, true);
    expect_site(&p, "attn.qkv.in", "e4m3", "tensor", FMT_RNE, FMT_SATURATE, true);
    expect_site(&p, "mlp.down.w", "e4m3", "tensor", FMT_RNE, FMT_SATURATE, true);
    for (int i = 0; i < NMATMUL; i++)
        if (is_head(matmul_sites[i]))
            expect_site(&p, matmul_sites[i], "bf16", "none", FMT_RNE, FMT_SATURATE, false);
    cr_assert_eq(p.amax_history, 1024);
    cr_assert_eq(p.amax_margin, 0.0f);
    expect_inactive(&p, "master");
    cr_assert_eq(p.update, AC_UPDATE_FP32);

    p = load("fp8-current");
    expect_site(&p, "attn.o.in", "e4m3", "tensor", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "mlp.gate_up.grad", "e5m2", "tensor", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "lm_head.grad", "bf16", "none", FMT_RNE, FMT_SATURATE, false);

    p = load("fp8-block");
    expect_site(&p, "attn.o.in", "e4m3", "tile:1x128:e8m0:up", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "attn.o.w", "e4m3", "tile:128x128:e8m0:up", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "mlp.down.grad", "e4m3", "tile:1x128:e8m0:up", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "lm_head.w", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
}

// The KV-cache presets: kv8-fp8 casts attn.kv alone (e4m3, one scale per token, saturating);
// w8a8kv8-fp8 is w8a8-fp8 plus that site. No other preset touches the KV cache.
Test(policy, preset_kv) {
    ac_policy kv = load("kv8-fp8");
    for (int s = 0; s < AC_NSITES; s++)
        cr_assert_eq(kv.site[s].active, s == AC_KV, "kv8-fp8: %s", ac_site_name((ac_site)s));
    expect_site(&kv, "attn.kv", "e4m3", "row", FMT_RNE, FMT_SATURATE, false);
    ac_policy full = load("w8a8kv8-fp8"), w8a8 = load("w8a8-fp8");
    snprintf(w8a8.name, sizeof w8a8.name, "%s", full.name);
    w8a8.site[AC_KV] = kv.site[AC_KV];
    cr_assert(ac_policy_equal(&full, &w8a8), "w8a8kv8-fp8 is not w8a8-fp8 plus kv8-fp8's attn.kv");
    char names[32][64];
    const int n = preset_list(names, 32);
    for (int i = 0; i < n; i++)
        if (strncmp(names[i], "kv8-", 4) && strcmp(names[i], "w8a8kv8-fp8")) {
            ac_policy p = load(names[i]);
            expect_inactive(&p, "attn.kv");
        }
}

// A policy file written for version 1 (before attn.kv): the canonical text fplab 0.2.0 printed
// for fp8-delayed (`fplab policy --check fp8-delayed`) parses to the preset, with the KV cache
// float32, and its own canonical text (now with an attn.kv line) round-trips. Globs match the
// new site by its name: "attn.*" and "*" do, "*.in" does not.
Test(policy, version_1_text_parses) {
    static const char v1[] =
        "# fplab precision policy (canonical form)\n"
        "name fp8-delayed\n"
        "site attn.qkv.in e4m3 delayed rne saturate\n"
        "site attn.qkv.w e4m3 delayed rne saturate\n"
        "site attn.qkv.grad e5m2 delayed rne saturate\n"
        "site attn.o.in e4m3 delayed rne saturate\n"
        "site attn.o.w e4m3 delayed rne saturate\n"
        "site attn.o.grad e5m2 delayed rne saturate\n"
        "site mlp.gate_up.in e4m3 delayed rne saturate\n"
        "site mlp.gate_up.w e4m3 delayed rne saturate\n"
        "site mlp.gate_up.grad e5m2 delayed rne saturate\n"
        "site mlp.down.in e4m3 delayed rne saturate\n"
        "site mlp.down.w e4m3 delayed rne saturate\n"
        "site mlp.down.grad e5m2 delayed rne saturate\n"
        "site lm_head.in bf16 none rne saturate\n"
        "site lm_head.w bf16 none rne saturate\n"
        "site lm_head.grad bf16 none rne saturate\n"
        "site attn.scores fp32\n"
        "site attn.probs fp32\n"
        "site residual fp32\n"
        "site acts.saved fp32\n"
        "site grads fp32\n"
        "site master fp32\n"
        "site adam.m fp32\n"
        "site adam.v fp32\n"
        "loss_scale none\n"
        "update fp32\n"
        "accumulator fp32\n"
        "amax_history 1024\n"
        "amax_margin 0\n"
        "hadamard 0\n";
    ac_policy p = parse(v1), q = load("fp8-delayed");
    cr_assert(ac_policy_equal(&p, &q), "the version-1 text of fp8-delayed is not the preset");
    expect_inactive(&p, "attn.kv");
    expect_round_trip(&p);
    char t[4096];
    ac_policy_text(&p, t, sizeof t);
    cr_assert(strstr(t, "\nsite adam.v fp32\nsite attn.kv fp32\nloss_scale none\n"), "%s", t);

    p = parse("site *.in e4m3\n");
    expect_inactive(&p, "attn.kv");
    p = parse("site attn.* bf16\n");
    expect_site(&p, "attn.kv", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
    p = parse("site * e5m2 block:32:fp32 sr\nsite master fp32\n");
    expect_site(&p, "attn.kv", "e5m2", "block:32:fp32", FMT_SR, FMT_SATURATE, false);
    expect_round_trip(&p);
    // A scale format spelled as a custom spec that is e8m0 itself: the text names the recipe by
    // its fields ("mx"), so that spelling must not make the written policy another one (found
    // by fuzz_policy).
    p = parse("site attn.qkv.in e6m3 block:32:e8m0:e8m0\n");
    expect_round_trip(&p);
}

Test(policy, preset_mx) {
    static const struct {
        const char *name, *in_w, *grad;
    } cases[] = {{"mxfp8", "e4m3", "e5m2"}, {"mxfp6", "e2m3", "e3m2"}, {"mxfp4", "e2m1", "e2m1"}};
    for (int c = 0; c < 3; c++) {
        ac_policy p = load(cases[c].name);
        for (int i = 0; i < NMATMUL; i++) {
            const char *s = matmul_sites[i];
            if (is_head(s)) expect_site(&p, s, "bf16", "none", FMT_RNE, FMT_SATURATE, false);
            else
                expect_site(&p, s, !strcmp(suffix(s), ".grad") ? cases[c].grad : cases[c].in_w,
                            "block:32:e8m0:ocp", FMT_RNE, FMT_SATURATE, false);
        }
        expect_inactive(&p, "master");
    }
}

Test(policy, preset_nvfp4) {
    ac_policy p = load("nvfp4");
    expect_site(&p, "attn.qkv.in", "e2m1", "nvfp4", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "mlp.down.grad", "e2m1", "nvfp4", FMT_SR, FMT_SATURATE, false);
    expect_site(&p, "attn.o.grad", "e2m1", "nvfp4", FMT_SR, FMT_SATURATE, false);
    expect_site(&p, "lm_head.in", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "lm_head.grad", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
    // Weights: 16x16 tiles of e4m3 scales under the fp32 tensor scale.
    const ac_rule *w = rule(&p, "mlp.gate_up.w");
    cr_assert(w->active && !strcmp(w->fmt.name, "e2m1"));
    cr_assert(w->scaling.tile_rows == 16 && w->scaling.tile_cols == 16 && w->scaling.tensor_scale &&
              !strcmp(w->scaling.scale_fmt.name, "e4m3") && w->scaling.scale_round == FMT_SCALE_RNE);
    cr_assert_eq(w->round.mode, FMT_RNE);
    cr_assert_eq(p.hadamard, 16);
    // The formats layer quantizes with that recipe: 4 tiles for 32x32, a tensor scale, and every
    // value within half the widest e2m1 gap (2, between 4 and 6) of its tile's scale s: an RNE
    // e4m3 scale is within 2^-4 of amax/6, so a clipped top costs at most 0.375 s.
    enum { R = 32, C = 32 };
    float in[R * C], out[R * C], scales[4];
    for (int i = 0; i < R * C; i++) in[i] = (float)((i * 37 % 101) - 50) * (1.0f + (float)(i / 256));
    fmt_quant_info info = {.scales = scales};
    fmt_stats st = {0};
    cr_assert_eq(fmt_scale_count(&w->scaling, R, C), 4u);
    cr_assert_eq(fmt_quantize_f32(&w->fmt, &w->scaling, out, in, R, C, &w->round, &st, &info), FMT_OK);
    cr_assert(info.tensor_scale != 1.0f, "no second-level scale");
    for (int i = 0; i < R * C; i++) {
        const double s = (double)scales[(i / C / 16) * 2 + (i % C) / 16] * info.tensor_scale;
        cr_assert(isfinite(out[i]) && fabs((double)out[i] - in[i]) <= 1.0 * s * (1 + 0x1p-20),
                  "%d: %g -> %g (tile scale %g)", i, in[i], out[i], s);
    }
}

// --- the text format

Test(policy, globs_and_override_order) {
    ac_policy p = parse("# a comment\n"
                        "\n"
                        "name   globs   # trailing comment\n"
                        "site *       bf16\n"
                        "site *.w     fp16 tensor sr ieee\n"
                        "site attn.*  e4m3\n"
                        "site attn.qkv.w fp32\n"
                        "site acts.saved fp32\n"
                        "site mlp.*.grad e5m2 mx\n"
                        "\tupdate\tround\r\n");
    cr_assert_str_eq(p.name, "globs");
    expect_site(&p, "mlp.down.in", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "mlp.down.w", "fp16", "tensor", FMT_SR, FMT_OVERFLOW_IEEE, false);
    expect_site(&p, "lm_head.w", "fp16", "tensor", FMT_SR, FMT_OVERFLOW_IEEE, false);
    // A later line replaces the whole rule: attn.o.w loses fp16's recipe and mode.
    expect_site(&p, "attn.o.w", "e4m3", "none", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "attn.scores", "e4m3", "none", FMT_RNE, FMT_SATURATE, false);
    expect_inactive(&p, "attn.qkv.w");
    expect_inactive(&p, "acts.saved");
    expect_site(&p, "mlp.gate_up.grad", "e5m2", "mx", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "lm_head.grad", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "master", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
    expect_site(&p, "adam.v", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
    cr_assert_eq(p.update, AC_UPDATE_ROUND);
    expect_round_trip(&p);

    // Later lines win, whichever is more specific.
    p = parse("site attn.qkv.w e5m2\nsite *.w bf16\n");
    expect_site(&p, "attn.qkv.w", "bf16", "none", FMT_RNE, FMT_SATURATE, false);
    // '?' and [...] are globs too.
    p = parse("site attn.?.w e4m3\nsite mlp.[d]own.in e5m2\n");
    expect_site(&p, "attn.o.w", "e4m3", "none", FMT_RNE, FMT_SATURATE, false);
    expect_inactive(&p, "attn.qkv.w");
    expect_site(&p, "mlp.down.in", "e5m2", "none", FMT_RNE, FMT_SATURATE, false);
    expect_inactive(&p, "mlp.gate_up.in");
}

Test(policy, optional_fields_any_order_and_aliases) {
    ac_policy a = parse("site *.in e4m3 mx sr ieee\n");
    ac_policy b = parse("site *.in float8_e4m3fn ieee SR MX\n");
    cr_assert(ac_policy_equal(&a, &b));
    expect_site(&a, "attn.o.in", "e4m3", "mx", FMT_SR, FMT_OVERFLOW_IEEE, false);
    ac_policy c = parse("site *.in e4m3 delayed rtz\n");
    expect_site(&c, "attn.o.in", "e4m3", "tensor", FMT_RTZ, FMT_SATURATE, true);
    expect_round_trip(&c);
    // "+tensor" on a 1-D block recipe as well.
    ac_policy d = parse("site *.w e2m1 block:16:e4m3:up+tensor\n");
    const ac_rule *r = rule(&d, "mlp.down.w");
    cr_assert(r->scaling.tile_rows == 1 && r->scaling.tile_cols == 16 && r->scaling.tensor_scale &&
              r->scaling.scale_round == FMT_SCALE_UP);
    expect_round_trip(&d);
}

// Everything the format can say, through the canonical text and back.
Test(policy, round_trip_everything) {
    ac_policy p = parse("name everything\n"
                        "site * e3m4 row rdn\n"
                        "site *.w e5m3:fn block:32:bf16:up rna ieee\n"
                        "site *.grad e5m2fnuz tile:16x16:e4m3+tensor sr\n"
                        "site attn.o.* e4m3 col rto\n"
                        "site attn.o.* e6m5:bias=30 tile:0x64:e8m0:rne rup\n"
                        "site adam.v ue5m3 tensor rtz\n"
                        "site residual tf32\n"
                        "site lm_head.* fp16 delayed\n"
                        "loss_scale dynamic init=1024.5 growth=1.5 backoff=0.25 interval=7 min=0.125\n"
                        "update kahan\n"
                        "accumulator m13:promote=128:rtz *.fprop\n"
                        "accumulator bf16:rtz lm_head.*\n"
                        "amax_history 16\n"
                        "amax_margin 1.5\n"
                        "hadamard 16\n");
    expect_round_trip(&p);
    cr_assert_eq(p.scaler.init, 1024.5f);
    cr_assert_eq(p.scaler.min_scale, 0.125f);
    cr_assert_eq(p.scaler.interval, 7);
    cr_assert_eq(p.acc[AC_PROJ_DOWN][AC_FPROP].promote_every, 128);
    cr_assert_eq(p.acc[AC_PROJ_QKV][AC_FPROP].mode, FMT_RTZ);
    cr_assert_eq(p.acc[AC_PROJ_QKV][AC_FPROP].fmt.mbits, 13);
    cr_assert(p.acc[AC_PROJ_HEAD][AC_DGRAD].mode == FMT_RTZ && p.acc[AC_PROJ_HEAD][AC_DGRAD].fmt.mbits == 7);
    cr_assert(!mm_acc_is_emulated(&p.acc[AC_PROJ_DOWN][AC_WGRAD]));
    cr_assert_eq(p.amax_margin, 1.5f);
    cr_assert(!rule(&p, "adam.v")->fmt.is_signed);
    char t[8192];
    ac_policy_text(&p, t, sizeof t);
    cr_assert(strstr(t, "\naccumulator e8m13:promote=128:rtz attn.qkv.fprop\n"), "%s", t);
    cr_assert(strstr(t, "\naccumulator bf16:rtz lm_head.wgrad\n"), "%s", t);
    cr_assert(strstr(t, "\nsite lm_head.w fp16 delayed rne saturate\n"), "%s", t);
    cr_assert(strstr(t, "\nsite master e3m4 row rdn saturate\n"), "%s", t);
    cr_assert(strstr(t, "\nsite residual tf32 none rne saturate\n"), "%s", t);
    // A static scale that is not a short decimal survives too.
    ac_policy q = parse("site *.grad fp16 none rne ieee\nloss_scale static 0.1\n");
    cr_assert_eq(q.scaler.init, 0.1f);
    expect_round_trip(&q);
}

Test(policy, text_truncation) {
    ac_policy p = load("nvfp4");
    const size_t n = ac_policy_text(&p, NULL, 0);
    char small[40];
    cr_assert_eq(ac_policy_text(&p, small, sizeof small), n);
    cr_assert_eq(strlen(small), sizeof small - 1);
    char *full = malloc(n + 1);
    ac_policy_text(&p, full, n + 1);
    cr_assert(!strncmp(full, small, sizeof small - 1));
    free(full);
    cr_assert_eq(ac_preset_text("no-such-preset", small, sizeof small), 0u);
    const size_t pn = ac_preset_text("bf16-amp", small, sizeof small);
    cr_assert(pn > sizeof small && strlen(small) == sizeof small - 1);
}

// --- errors

typedef struct {
    const char *text;
    int line;
    const char *token;   // must appear in the message
    const char *token2;  // and this, when given
} bad_case;

Test(policy, errors_name_line_and_token) {
    static const bad_case cases[] = {
        {"# c\n\nsite attn.qkv.x bf16\n", 3, "'attn.qkv.x'", "unknown site"},
        {"site foo.* bf16\n", 1, "'foo.*'", "matches no site"},
        {"site *.w bf17\n", 1, "'bf17'", "unknown format"},
        {"site *.w e4m3 blok:32:e8m0\n", 1, "'blok:32:e8m0'", "a recipe: unknown scaling recipe"},
        {"site *.w e4m3 mx rnz\n", 1, "'rnz'", "rounding mode"},
        {"site *.w e4m3 rnz\n", 1, "'rnz'", "rounding mode (rne"},
        {"site *.w e4m3 tile:axb:fp32\n", 1, "tile:axb:fp32", NULL},
        {"site *.w e8m0\n", 1, "'e8m0'", "scale format"},
        {"site *.w e5m2:e8m0\n", 1, "e5m2:e8m0", "scale format"},
        {"site *.w fp64\n", 1, "'fp64'", "float32"},
        {"site *.w ue4m3\n", 1, "'ue4m3'", "unsigned"},
        {"site *.w\n", 1, "site", "FORMAT"},
        {"site *.w fp32 mx\n", 1, "'mx'", "fp32"},
        {"site *.w e4m3 sr rne\n", 1, "'rne'", "mode"},
        {"site *.w e4m3 mx tensor\n", 1, "'tensor'", "recipe already ('mx')"},
        {"site *.w e4m3 saturate ieee\n", 1, "'ieee'", "overflow"},
        {"site *.w e2m1 nvfp4+tensor\n", 1, "'nvfp4+tensor'", "+tensor"},
        {"site *.w e2m1 none+tensor\n", 1, "'none+tensor'", "+tensor"},
        {"site *.w e2m1 tensor+tensor\n", 1, "'tensor+tensor'", "+tensor"},
        {"site *.w e4m3 a b c d\n", 1, "'d'", "too many"},
        {"site *.w bf16\n\nupdate sr\n", 3, "update sr", "site master"},
        {"site *.w bf16\nupdate kahan\n", 2, "update kahan", "site master"},
        {"site master bf16\n", 1, "site master is bf16", "update fp32"},
        {"site master bf16\nupdate fp32\n", 2, "site master is bf16", "update fp32"},
        {"update stochastic\n", 1, "'stochastic'", "fp32, round, sr or kahan"},
        {"lossscale none\n", 1, "'lossscale'", "unknown setting"},
        {"loss_scale sometimes\n", 1, "'sometimes'", "dynamic"},
        {"loss_scale static 0\n", 1, "static 0", "positive"},
        {"loss_scale static -8\n", 1, "static -8", "positive"},
        {"loss_scale static\n", 1, "static", "positive"},
        {"loss_scale static 1e39\n", 1, "static 1e39", "positive"},
        {"loss_scale none 4\n", 1, "'4'", "none"},
        {"loss_scale dynamic growth=abc\n", 1, "'growth=abc'", "NUMBER"},
        {"loss_scale dynamic speed=2\n", 1, "'speed=2'", "unknown setting"},
        {"loss_scale dynamic interval=0\n", 1, "interval=0", ">= 1"},
        {"loss_scale dynamic backoff=2\n", 1, "backoff=2", "(0, 1]"},
        {"loss_scale dynamic growth=0.5\n", 1, "growth=0.5", ">= 1"},
        {"loss_scale dynamic min=0\n", 1, "min=0", "positive"},
        {"loss_scale dynamic init=0.5\n", 1, "init=0.5", "min=1"},
        {"accumulator bogus\n", 1, "'bogus'", NULL},
        {"accumulator bf16\n", 1, "accumulator bf16", "attn.qkv.in"},
        {"accumulator m13 mlp.up.fprop\n", 1, "'mlp.up.fprop'", "PROJECTION.PASS"},
        {"accumulator m13 *.fwd\n", 1, "'*.fwd'", "matches no matmul"},
        {"accumulator m13 *.fprop x\n", 1, "accumulator", "found 3"},
        {"site *.in e4m3\nsite *.w e4m3\nsite *.grad e5m2\nsite lm_head.w fp32\naccumulator m13 lm_head.dgrad\n",
         5, "lm_head.dgrad", "lm_head.w is fp32"},
        {"site *.in e4m3 block:32:e8m0\nsite *.w e4m3 block:16:e8m0\nsite *.grad e5m2\naccumulator m13\n",
         4, "attn.qkv.fprop", "same block length"},
        {"site * e4m3\nsite master fp32\nsite lm_head.w e5m12\n# x\naccumulator m10\n", 5,
         "lm_head.w", "12 bits"},
        // Issue 34: engine accumulators whose promote=N is not a multiple of the k the operands
        // pick (hopper:wgmma fp8: 32; ampere:mma bf16: 16), or a :k the engine lacks.
        {"site * e4m3\nsite master fp32\naccumulator hopper:wgmma:promote=33\n", 3, "promote=33", "32, 16, 8"},
        {"site * e4m3\nsite master fp32\naccumulator hopper:wgmma:promote=16\n", 3, "promote=16", "k = 32"},
        {"site * bf16\nsite master fp32\naccumulator ampere:mma:promote=12\n", 3, "promote=12", "k = 16"},
        {"site * fp16\nsite master fp32\naccumulator cdna1:mfma:k3\n", 3, "k = 3", "16, 8, 4, 2, 1"},
        {"amax_history 0\n", 1, "'0'", "[1, 16384]"},
        {"amax_history 16385\n", 1, "'16385'", "[1, 16384]"},
        {"amax_history many\n", 1, "'many'", "[1, 16384]"},
        {"amax_margin inf\n", 1, "'inf'", "finite"},
        {"hadamard 8\n", 1, "'8'", "0 (off) or 16"},
        {"hadamard\n", 1, "hadamard", "one value"},
        {"name a b\n", 1, "name", "one value"},
        {"name 0123456789012345678901234567890123456789012345678901234567890123456789\n", 1,
         "too long", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        ac_policy p;
        char msg[MSG], where[32];
        cr_assert_eq(ac_policy_parse(&p, c->text, "my.policy", msg, sizeof msg), AC_EINVAL,
                     "accepted:\n%s", c->text);
        snprintf(where, sizeof where, "my.policy:%d: ", c->line);
        cr_assert(!strncmp(msg, where, strlen(where)), "expected '%s' first: %s", where, msg);
        cr_assert(strstr(msg, c->token), "'%s' not in: %s", c->token, msg);
        if (c->token2) cr_assert(strstr(msg, c->token2), "'%s' not in: %s", c->token2, msg);
    }
}

Test(policy, warnings) {
    ac_policy p;
    char msg[MSG];
    // No-scaling ablation: valid, with a warning about underflow.
    cr_assert_eq(ac_policy_load(&p, "fp16-amp-noscale", msg, sizeof msg), AC_OK, "%s", msg);
    cr_assert(strstr(msg, "2^-25 round to zero") && strstr(msg, "preset fp16-amp-noscale:"), "%s", msg);
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_OK);
    cr_assert(strstr(msg, "round to zero") && strstr(msg, "policy 'fp16-amp-noscale'"), "%s", msg);
    // Loss scaling over saturating fp16 gradient casts: the scaler never sees the inf.
    cr_assert_eq(ac_policy_parse(&p, "site *.grad fp16\nloss_scale dynamic\n", "t", msg, sizeof msg), AC_OK);
    cr_assert(strstr(msg, "t:1:") && strstr(msg, "saturates"), "%s", msg);
    // The other presets load without a word.
    static const char *const quiet[] = {"fp32", "bf16-amp", "fp16-amp", "fp16-static-1024", "pure-bf16-sr",
                                        "fp8-delayed", "fp8-block", "mxfp4", "nvfp4"};
    for (size_t i = 0; i < sizeof quiet / sizeof quiet[0]; i++) {
        cr_assert_eq(ac_policy_load(&p, quiet[i], msg, sizeof msg), AC_OK);
        cr_assert_str_eq(msg, "", "%s: %s", quiet[i], msg);
    }
}

// Policies built by hand: the same checks, named by the policy.
Test(policy, validate_hand_built) {
    char msg[MSG];
    ac_policy p = load("pure-bf16-sr");
    p.update = AC_UPDATE_FP32;
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_EINVAL);
    cr_assert(strstr(msg, "policy 'pure-bf16-sr': ") == msg && strstr(msg, "update fp32"), "%s", msg);

    p = load("bf16-amp");
    p.update = AC_UPDATE_SR;
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_EINVAL);
    cr_assert(strstr(msg, "update sr"), "%s", msg);

    p = load("mxfp8");
    p.site[AC_QKV_W].delayed = true;  // delayed needs the per-tensor recipe
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_EINVAL);
    cr_assert(strstr(msg, "attn.qkv.w") && strstr(msg, "delayed"), "%s", msg);

    p = load("mxfp8");
    fmt_from_name(&p.site[AC_O_IN].fmt, "e8m0");
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_EINVAL);
    cr_assert(strstr(msg, "attn.o.in") && strstr(msg, "e8m0"), "%s", msg);

    p = load("bf16-amp");
    fmt_from_name(&p.site[AC_RESIDUAL].fmt, "fp32");
    p.site[AC_RESIDUAL].active = true;
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_EINVAL);
    cr_assert(strstr(msg, "residual") && strstr(msg, "active"), "%s", msg);

    p = load("bf16-amp");
    p.hadamard = 8;
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_EINVAL);
    cr_assert(strstr(msg, "hadamard 8"), "%s", msg);

    p = load("fp16-amp");
    p.scaler.backoff = 0;
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_EINVAL);
    cr_assert(strstr(msg, "backoff=0"), "%s", msg);

    p = load("fp16-amp");
    p.site[AC_GRADS].round.mode = (fmt_round_mode)42;
    p.site[AC_GRADS].active = true;
    p.site[AC_GRADS].fmt = p.site[AC_QKV_IN].fmt;
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_EINVAL);
    cr_assert(strstr(msg, "grads"), "%s", msg);

    p = load("bf16-amp");
    snprintf(p.name, sizeof p.name, "two words");
    cr_assert_eq(ac_policy_validate(&p, msg, sizeof msg), AC_EINVAL);
}

// --- files

static char *read_all(const char *path) {
    FILE *fh = fopen(path, "rb");
    if (!fh) return NULL;
    fseek(fh, 0, SEEK_END);
    const long n = ftell(fh);
    rewind(fh);
    char *s = malloc((size_t)n + 1);
    cr_assert(s && fread(s, 1, (size_t)n, fh) == (size_t)n, "cannot read %s", path);
    s[n] = 0;
    fclose(fh);
    return s;
}

Test(policy, preset_files_equal_compiled_texts) {
    const char *root = getenv("FPLAB_ROOT");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/autocast/presets", root && *root ? root : ".");
    DIR *d = opendir(dir);
    if (!d) cr_skip_test("%s not present: run from the repository root or set FPLAB_ROOT", dir);
    char names[32][64];
    const int n = preset_list(names, 32);
    bool seen[32] = {false};
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t len = strlen(e->d_name);
        if (len < 8 || strcmp(e->d_name + len - 7, ".policy")) continue;
        files++;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - 7), e->d_name);
        int k = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(names[i], name)) k = i;
        cr_assert(k >= 0, "%s/%s is not a preset in ac_preset_names (%s)", dir, e->d_name, ac_preset_names());
        seen[k] = true;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *file = read_all(path);
        cr_assert(file, "cannot open %s", path);
        const size_t tn = ac_preset_text(name, NULL, 0);
        char *text = malloc(tn + 1);
        ac_preset_text(name, text, tn + 1);
        cr_assert_str_eq(file, text, "%s differs from the compiled-in preset %s (autocast/presets.c)", path, name);
        // And the file loads as a file, to the same policy.
        ac_policy a = load(name), b = load(path);
        cr_assert(ac_policy_equal(&a, &b), "%s", path);
        free(file), free(text);
    }
    closedir(d);
    for (int i = 0; i < n; i++) cr_assert(seen[i], "no file %s/%s.policy", dir, names[i]);
    cr_assert_eq(files, n);
}

Test(policy, load_file) {
    char path[] = "/tmp/fplab_test_policy_XXXXXX.policy";
    const int fd = mkstemps(path, 7);
    cr_assert(fd >= 0);
    const char text[] = "# my recipe\nsite *.w e4m3 tensor\nsite *.in e4m3 tensor\nsite *.grad e5m2 tensor\n";
    cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    ac_policy p = load(path);
    char expect[64];
    const char *base = strrchr(path, '/') + 1;
    snprintf(expect, sizeof expect, "%.*s", (int)(strlen(base) - 7), base);
    cr_assert_str_eq(p.name, expect, "a file without a name line is named after the file");
    expect_site(&p, "attn.o.w", "e4m3", "tensor", FMT_RNE, FMT_SATURATE, false);
    // Errors in a file carry its path and line.
    FILE *fh = fopen(path, "w");
    fputs("site *.w e4m3\nsite *.x e4m3\n", fh);
    fclose(fh);
    char msg[MSG], where[128];
    cr_assert_eq(ac_policy_load(&p, path, msg, sizeof msg), AC_EINVAL);
    snprintf(where, sizeof where, "%s:2: ", path);
    cr_assert(strstr(msg, where) == msg && strstr(msg, "'*.x'"), "%s", msg);
    unlink(path);
    cr_assert_eq(ac_policy_load(&p, path, msg, sizeof msg), AC_EIO);
    cr_assert(strstr(msg, path) && strstr(msg, "bf16-amp"), "%s", msg);
    cr_assert_eq(ac_policy_load(&p, "", msg, sizeof msg), AC_EINVAL);
}

// What fuzz_policy found (tests/fuzz/crashes/): policies whose text did not read back as
// themselves. A site set to a format equal to fp32 is inactive whatever it is called; a format
// name that does not fit the descriptor, or with junk after it, is refused instead of cut.
Test(policy, fuzzer_round_trips) {
    char msg[512];
    ac_policy p;
    cr_assert_eq(ac_policy_parse(&p, "site attn.qkv.in e8m23\n", "fuzz", msg, sizeof msg), AC_OK, "%s", msg);
    expect_round_trip(&p);
    cr_assert_neq(ac_policy_parse(&p, "site grads e4m3 block:32:e8m0e8m0\n", "fuzz", msg, sizeof msg), AC_OK);
    cr_assert_neq(ac_policy_parse(&p, "site attn.qkv.in e3m0000000000000000000000000000000000000000000000000001\n",
                                  "fuzz", msg, sizeof msg), AC_OK);
}

// accumulator SPEC [MATMUL]: later lines override earlier ones for the matmuls they name; the
// canonical text has one line when all agree, else one per matmul, and reads back the same.
// An emulated accumulator needs narrow operands only where it is used.
Test(policy, accumulator_per_matmul) {
    ac_policy p = parse("site *.in e4m3\nsite *.w e4m3\nsite *.grad e5m2\nsite lm_head.* fp32\n"
                        "accumulator m13 *.fprop\naccumulator m13:promote=128 mlp.*\n"
                        "accumulator fp32 lm_head.fprop\naccumulator bf16 attn.o.wgrad\n");
    for (int g = 0; g < AC_NPROJ; g++)
        for (int k = 0; k < AC_NPASSES; k++) {
            const mm_acc *a = &p.acc[g][k];
            const char *name = ac_gemm_name((ac_proj)g, (ac_pass)k);
            if (g == AC_PROJ_GATEUP || g == AC_PROJ_DOWN)
                cr_assert(a->fmt.mbits == 13 && a->promote_every == 128, "%s", name);
            else if (g == AC_PROJ_O && k == AC_WGRAD) cr_assert_str_eq(a->fmt.name, "bf16", "%s", name);
            else if (k == AC_FPROP && g != AC_PROJ_HEAD)
                cr_assert(a->fmt.mbits == 13 && a->promote_every == 0, "%s", name);
            else cr_assert(!mm_acc_is_emulated(a), "%s", name);
        }
    expect_round_trip(&p);
    char t[8192];
    ac_policy_text(&p, t, sizeof t);
    cr_assert(strstr(t, "\naccumulator e8m13 attn.qkv.fprop\n"), "%s", t);
    cr_assert(strstr(t, "\naccumulator e8m13:promote=128 mlp.down.wgrad\n"), "%s", t);
    cr_assert(strstr(t, "\naccumulator fp32 lm_head.fprop\n"), "%s", t);
    // One spec for every matmul is one line, as before per-matmul accumulators.
    ac_policy q = parse("site *.in e4m3\nsite *.w e4m3\nsite *.grad e5m2\naccumulator m13\n");
    ac_policy_text(&q, t, sizeof t);
    cr_assert(strstr(t, "\naccumulator e8m13\namax_history"), "%s", t);
    expect_round_trip(&q);
    cr_assert_str_eq(ac_gemm_name(AC_PROJ_GATEUP, AC_DGRAD), "mlp.gate_up.dgrad");
    ac_site a, b;
    ac_gemm_sites(AC_PROJ_DOWN, AC_WGRAD, &a, &b);
    cr_assert(a == AC_DOWN_GRAD && b == AC_DOWN_IN);
    ac_gemm_sites(AC_PROJ_O, AC_DGRAD, &a, &b);
    cr_assert(a == AC_O_GRAD && b == AC_O_W);
}
