// test_scaler.c: the loss scaler (autocast/scaler.h). Tables of steps with injected non-finite
// gradients and the expected skip, scale and counts after each, for dynamic (growth after exactly
// `interval` clean steps, backoff, the min_scale floor, a growth that would overflow), static
// (skips, never moves) and none (never skips, scale 1); the fp16-amp preset's defaults.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>

#include "autocast/scaler.h"

// One step: the input, then the expected state after ac_scaler_update.
typedef struct {
    bool finite;
    bool skip;
    float scale;
    int good, skipped, grown, backed_off;
} step;

static void run_table(const char *what, const ac_scaler_cfg *cfg, const step *t, int n) {
    ac_scaler s;
    ac_scaler_init(&s, cfg);
    for (int i = 0; i < n; i++) {
        const bool skip = ac_scaler_update(&s, cfg, t[i].finite);
        cr_assert_eq(skip, t[i].skip, "%s step %d (%s): skip %d, expected %d", what, i + 1,
                     t[i].finite ? "finite" : "inf/NaN", skip, t[i].skip);
        cr_assert_eq(s.scale, t[i].scale, "%s step %d: scale %g, expected %g", what, i + 1, s.scale,
                     t[i].scale);
        cr_assert_eq(s.good_steps, t[i].good, "%s step %d: good_steps %d, expected %d", what, i + 1,
                     (int)s.good_steps, t[i].good);
        cr_assert_eq(s.skipped, t[i].skipped, "%s step %d: skipped %lld, expected %d", what, i + 1,
                     (long long)s.skipped, t[i].skipped);
        cr_assert_eq(s.grown, t[i].grown, "%s step %d: grown %lld, expected %d", what, i + 1,
                     (long long)s.grown, t[i].grown);
        cr_assert_eq(s.backed_off, t[i].backed_off, "%s step %d: backed_off %lld, expected %d", what,
                     i + 1, (long long)s.backed_off, t[i].backed_off);
    }
}

#define F true
#define N false
#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

Test(scaler, dynamic_table) {
    const ac_scaler_cfg cfg = {.kind = AC_SCALE_DYNAMIC, .init = 8, .growth = 2, .backoff = 0.5f,
                               .interval = 3, .min_scale = 2};
    ac_scaler s;
    ac_scaler_init(&s, &cfg);
    cr_assert_eq(s.scale, 8.0f);
    cr_assert(s.good_steps == 0 && s.skipped == 0 && s.grown == 0 && s.backed_off == 0);
    const step t[] = {
        // finite, skip, scale, good, skipped, grown, backed_off
        {F, false, 8, 1, 0, 0, 0},
        {F, false, 8, 2, 0, 0, 0},   // interval - 1 clean steps: no growth yet
        {F, false, 16, 0, 0, 1, 0},  // exactly interval: grows, count restarts
        {N, true, 8, 0, 1, 1, 1},    // backoff, skip
        {F, false, 8, 1, 1, 1, 1},
        {F, false, 8, 2, 1, 1, 1},
        {N, true, 4, 0, 2, 1, 2},    // a non-finite step restarts the count (no growth at 3)
        {F, false, 4, 1, 2, 1, 2},
        {N, true, 2, 0, 3, 1, 3},    // down to the floor
        {N, true, 2, 0, 4, 1, 3},    // at the floor: skipped, scale kept, not counted as backoff
        {N, true, 2, 0, 5, 1, 3},
        {F, false, 2, 1, 5, 1, 3},
        {F, false, 2, 2, 5, 1, 3},
        {F, false, 4, 0, 5, 2, 3},
        {F, false, 4, 1, 5, 2, 3},
        {F, false, 4, 2, 5, 2, 3},
        {F, false, 8, 0, 5, 3, 3},
    };
    run_table("dynamic", &cfg, t, LEN(t));
}

// A floor that is not a power of two: the backoff is clamped to it (counted, it moved the scale).
Test(scaler, dynamic_floor_clamps) {
    const ac_scaler_cfg cfg = {.kind = AC_SCALE_DYNAMIC, .init = 4, .growth = 2, .backoff = 0.5f,
                               .interval = 1, .min_scale = 3};
    const step t[] = {
        {N, true, 3, 0, 1, 0, 1},   // 4 * 0.5 = 2 < 3: clamped to 3
        {N, true, 3, 0, 2, 0, 1},   // already at 3
        {F, false, 6, 0, 2, 1, 1},  // interval 1: every clean step grows
        {F, false, 12, 0, 2, 2, 1},
        {N, true, 6, 0, 3, 2, 2},
    };
    run_table("dynamic floor 3", &cfg, t, LEN(t));
}

// A growth that would overflow float32 is not taken (PyTorch), and the count restarts.
Test(scaler, dynamic_growth_stays_finite) {
    const ac_scaler_cfg cfg = {.kind = AC_SCALE_DYNAMIC, .init = 0x1p127f, .growth = 2, .backoff = 0.5f,
                               .interval = 2, .min_scale = 1};
    const step t[] = {
        {F, false, 0x1p127f, 1, 0, 0, 0},
        {F, false, 0x1p127f, 0, 0, 0, 0},  // 2^128 is inf: kept
        {F, false, 0x1p127f, 1, 0, 0, 0},
        {N, true, 0x1p126f, 0, 1, 0, 1},
        {F, false, 0x1p126f, 1, 1, 0, 1},
        {F, false, 0x1p127f, 0, 1, 1, 1},
    };
    run_table("dynamic near FLT_MAX", &cfg, t, LEN(t));
}

// Static: a step with an inf or NaN gradient is skipped, the scale never moves.
Test(scaler, static_table) {
    const ac_scaler_cfg cfg = {.kind = AC_SCALE_STATIC, .init = 1024, .growth = 1, .backoff = 1,
                               .interval = 0, .min_scale = 1024};
    const step t[] = {
        {F, false, 1024, 1, 0, 0, 0},
        {F, false, 1024, 2, 0, 0, 0},
        {N, true, 1024, 0, 1, 0, 0},
        {N, true, 1024, 0, 2, 0, 0},
        {F, false, 1024, 1, 2, 0, 0},
        {F, false, 1024, 2, 2, 0, 0},
        {F, false, 1024, 3, 2, 0, 0},
    };
    run_table("static", &cfg, t, LEN(t));
    // Growth settings on a static config are ignored.
    const ac_scaler_cfg odd = {.kind = AC_SCALE_STATIC, .init = 512, .growth = 2, .backoff = 0.5f,
                               .interval = 1, .min_scale = 1};
    const step u[] = {{F, false, 512, 1, 0, 0, 0}, {N, true, 512, 0, 1, 0, 0}, {F, false, 512, 1, 1, 0, 0}};
    run_table("static with growth fields", &odd, u, LEN(u));
}

// None: scale 1 whatever init says, and no step is ever skipped.
Test(scaler, none_table) {
    const ac_scaler_cfg cfg = {.kind = AC_SCALE_NONE, .init = 4096, .growth = 2, .backoff = 0.5f,
                               .interval = 1, .min_scale = 1};
    const step t[] = {
        {F, false, 1, 1, 0, 0, 0},
        {N, false, 1, 0, 0, 0, 0},
        {N, false, 1, 0, 0, 0, 0},
        {F, false, 1, 1, 0, 0, 0},
        {F, false, 1, 2, 0, 0, 0},
    };
    run_table("none", &cfg, t, LEN(t));
}

// The fp16-amp preset: 65536, doubled after exactly 2000 clean steps, halved on overflow.
Test(scaler, fp16_amp_defaults) {
    ac_policy p;
    char msg[512];
    cr_assert_eq(ac_policy_load(&p, "fp16-amp", msg, sizeof msg), AC_OK, "%s", msg);
    const ac_scaler_cfg *cfg = &p.scaler;
    ac_scaler s;
    ac_scaler_init(&s, cfg);
    cr_assert_eq(s.scale, 65536.0f);
    for (int i = 0; i < 1999; i++) cr_assert(!ac_scaler_update(&s, cfg, true));
    cr_assert_eq(s.scale, 65536.0f, "grew before 2000 clean steps");
    cr_assert(!ac_scaler_update(&s, cfg, true));
    cr_assert_eq(s.scale, 131072.0f, "no growth after 2000 clean steps");
    cr_assert(ac_scaler_update(&s, cfg, false));
    cr_assert_eq(s.scale, 65536.0f);
    for (int i = 0; i < 40; i++) cr_assert(ac_scaler_update(&s, cfg, false));
    cr_assert_eq(s.scale, 1.0f, "the floor is min=1");
    cr_assert_eq(s.skipped, 41);
    cr_assert_eq(s.backed_off, 17);  // 2^16 ... 2^0: 17 halvings, then the floor
}
