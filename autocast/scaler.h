// scaler.h: the loss scaler. Static: a fixed scale. Dynamic, with the usual semantics (PyTorch's
// GradScaler, Micikevicius et al. 2018): start at init; after every step whose gradients are
// all finite, count it, and after `interval` such steps in a row multiply the scale by growth;
// on a step with an inf or NaN gradient, skip the optimizer step, multiply the scale by backoff
// (not below min_scale) and restart the count. A growth that would make the scale inf is not
// taken (the count restarts anyway), as in PyTorch.
// Static: the scale is cfg->init and never changes; a step with a non-finite gradient is still
// skipped (applying it would write inf/NaN into the weights; PyTorch with a fixed scale would).
// None: the scale is 1 and no step is ever skipped: an inf or NaN gradient goes into the update,
// which is what the no-scaling ablation (fp16-amp-noscale) is there to show.
// Counts: skipped counts skipped steps; grown and backed_off count the times the scale actually
// changed (a backoff at the min_scale floor skips the step but is not counted in backed_off).
// good_steps counts finite steps in a row, for every kind (reset by a non-finite step and, for
// dynamic, by a growth).
// Constraints: plain state in a struct (saved in checkpoints as is); no I/O.
#ifndef FPLAB_SCALER_H
#define FPLAB_SCALER_H
#include <stdbool.h>
#include <stdint.h>

#include "autocast/policy.h"

typedef struct {
    float scale;          // the scale the next backward multiplies the loss by (1: none)
    int32_t good_steps;   // finite steps since the last growth or backoff
    int64_t skipped;      // steps skipped so far
    int64_t grown, backed_off;
} ac_scaler;

void ac_scaler_init(ac_scaler *s, const ac_scaler_cfg *cfg);
// After the backward of a step: finite says whether every (scaled) gradient was finite.
// Returns true when the optimizer step must be skipped. Updates the scale for the next step.
bool ac_scaler_update(ac_scaler *s, const ac_scaler_cfg *cfg, bool finite);

#endif
