// qerror.h: quantization error as users of torchao and llama.cpp read it: mean squared error,
// signal-to-quantization-noise ratio in dB, largest absolute and relative error, of a tensor y
// (quantized) against its source x.
// Constraints: no MPFR; sums in float64 (the error of a float32 tensor's sum of squares is then
// far below what the metric reports); elements where x or y is not finite are left out and
// counted, so one inf does not turn every metric into inf or NaN.
#ifndef FPLAB_QERROR_H
#define FPLAB_QERROR_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t n;          // elements compared (both x and y finite)
    uint64_t nonfinite;  // elements left out: x or y is inf or NaN
    double mse;          // sum (y - x)^2 / n (0 when n == 0)
    double sqnr_db;      // 10 log10(sum x^2 / sum (y - x)^2): +inf when y == x everywhere
                         // (no noise), -inf when x is all zero and y is not, NaN when n == 0
    double max_abs;      // max |y - x|
    double max_rel;      // max |y - x| / |x| over x != 0 (an x == 0 with y != 0 is only in
                         // max_abs and the MSE)
} fmt_qerror;

// *out = the metrics of y[0..n) against x[0..n). x and y may be the same array.
void fmt_qerror_f32(fmt_qerror *out, const float *y, const float *x, size_t n);
void fmt_qerror_f64(fmt_qerror *out, const double *y, const double *x, size_t n);

#endif
