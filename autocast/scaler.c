// scaler.c: the loss scaler's state machine (scaler.h): none, static, dynamic.
// Constraints: plain arithmetic on the struct; no I/O, no global state.
#include "autocast/scaler.h"

#include <math.h>
#include <string.h>

void ac_scaler_init(ac_scaler *s, const ac_scaler_cfg *cfg) {
    memset(s, 0, sizeof *s);
    s->scale = cfg->kind == AC_SCALE_NONE ? 1.0f : cfg->init;
}

bool ac_scaler_update(ac_scaler *s, const ac_scaler_cfg *cfg, bool finite) {
    if (finite) {
        s->good_steps++;
        if (cfg->kind == AC_SCALE_DYNAMIC && s->good_steps >= cfg->interval) {
            // PyTorch keeps the old scale when the grown one is not finite.
            const float grown = s->scale * cfg->growth;
            if (isfinite(grown) && grown != s->scale) s->scale = grown, s->grown++;
            s->good_steps = 0;
        }
        return false;
    }
    s->good_steps = 0;
    if (cfg->kind == AC_SCALE_NONE) return false;  // the ablation: inf/NaN reach the weights
    s->skipped++;
    if (cfg->kind == AC_SCALE_DYNAMIC) {
        float next = s->scale * cfg->backoff;
        if (!(next >= cfg->min_scale)) next = cfg->min_scale;
        if (next < s->scale) s->backed_off++;
        s->scale = next;
    }
    return true;
}
