// qerror.c: quantization error metrics (qerror.h): one pass in float64, written once for both
// input types.
#include "qerror.h"

#include <math.h>

#define QERROR_BODY(Y, X)                                                      \
    double se = 0, sx = 0, max_abs = 0, max_rel = 0;                           \
    uint64_t used = 0;                                                         \
    for (size_t i = 0; i < n; i++) {                                           \
        const double xi = (X)[i], yi = (Y)[i];                                 \
        if (!isfinite(xi) || !isfinite(yi)) continue;                          \
        const double d = fabs(yi - xi);                                        \
        used++;                                                                \
        se += d * d, sx += xi * xi;                                            \
        if (d > max_abs) max_abs = d;                                          \
        if (xi != 0 && d / fabs(xi) > max_rel) max_rel = d / fabs(xi);         \
    }                                                                          \
    finish(out, n, used, se, sx, max_abs, max_rel)

static void finish(fmt_qerror *out, size_t n, uint64_t used, double se, double sx, double max_abs, double max_rel) {
    out->n = used;
    out->nonfinite = n - used;
    out->mse = used ? se / (double)used : 0;
    out->sqnr_db = !used ? NAN : se == 0 ? INFINITY : sx == 0 ? -INFINITY : 10.0 * log10(sx / se);
    out->max_abs = max_abs;
    out->max_rel = max_rel;
}

// float32 operands: the float64 difference is exact.
void fmt_qerror_f32(fmt_qerror *out, const float *y, const float *x, size_t n) { QERROR_BODY(y, x); }

void fmt_qerror_f64(fmt_qerror *out, const double *y, const double *x, size_t n) { QERROR_BODY(y, x); }
