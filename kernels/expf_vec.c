// expf_vec.c: op_expf over an array (see expf_vec.h for the method and its accuracy).
// Constraints: vectorised by the compiler from the static inline op_expf; no libm.
#include "kernels/expf_vec.h"

void op_expf_f32(float *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = op_expf(x[i]);
}
