// sum_squares_internal.h: clip_grad_norm's sum (internal to trainer/): sum of x[i]^2 in double,
// added in index order with each addition rounded to nearest, the bits of the plain loop
// `s += (double)x[i] * x[i]` that the logged norm and the clip factor carry, without the loop's
// chain of dependent additions.
// Constraints: exact (no tolerance: the result is the plain loop's, NaN and inf included);
// runs in the default floating-point environment (round to nearest).
#ifndef FPLAB_SUM_SQUARES_INTERNAL_H
#define FPLAB_SUM_SQUARES_INTERNAL_H
#include <stddef.h>

// x: (n) floats, read only. Returns the plain loop's sum from s = +0.
double clip__sum_squares(const float *x, size_t n);

#endif
