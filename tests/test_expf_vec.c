// test_expf_vec.c: op_expf (kernels/expf_vec.h) on every float32 input: within OP_EXPF_MAX_ULP
// (strictly below: faithful rounding) of libm's double-precision exp, rounded results measured
// in ulps of the float32 result (2^-149 for subnormal results); +inf exactly where libm's expf
// overflows; NaN for NaN; the array loop (vectorised) and the scalar inline give the same bits.
// The whole range is used: SwiGLU's sigmoid takes exp(-g) for any gate value. The double exp
// (the costly part) is evaluated where op_expf and glibc's expf differ; where they agree, the
// result carries glibc's documented bound (0.502 ulp for float32 expf, round to nearest).
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/expf_vec.h"
#include "tests/test_util.h"

// Error of y against the exact e = exp(x) (a double), in ulps of the float32 format at e.
static double ulps(float y, double e) {
    int ex;
    frexp(e, &ex);  // e = m 2^ex, m in [0.5, 1)
    const int k = ex - 24 < -149 ? -149 : ex - 24;
    return fabs((double)y - e) / ldexp(1.0, k);
}

Test(expf_vec, every_float32_within_bound) {
    enum { CHUNK = 1 << 16 };
    const uint64_t nchunks = ((uint64_t)1 << 32) / CHUNK;
    double worst = 0.0;
    uint32_t worst_x = 0;
    uint64_t wrong = 0, first_wrong = UINT64_MAX;
#pragma omp parallel
    {
        float *x = malloc(CHUNK * sizeof *x), *y = malloc(CHUNK * sizeof *y);
        double w = 0.0;
        uint32_t wx = 0;
        uint64_t bad = 0, first = UINT64_MAX;
#pragma omp for schedule(dynamic, 64)
        for (uint64_t c = 0; c < nchunks; c++) {
            for (uint32_t i = 0; i < CHUNK; i++) x[i] = tu_u2f((uint32_t)(c * CHUNK + i));
            op_expf_f32(y, x, CHUNK);
            for (uint32_t i = 0; i < CHUNK; i++) {
                const float xi = x[i], yi = y[i], lib = expf(xi);
                bool ok = tu_samef(yi, op_expf(xi));  // the inline and the loop agree
                if (isnan(xi)) ok &= isnan(yi) != 0;
                else if (isinf(lib) || isinf(yi)) ok &= lib == yi;  // overflow exactly where libm's
                else if (yi != lib) {  // where they agree, libm's own bound (0.502 ulp) holds
                    const double e = ulps(yi, exp((double)xi));
                    ok &= e < OP_EXPF_MAX_ULP;
                    if (e > w) w = e, wx = tu_f2u(xi);
                }
                if (!ok && bad++ == 0) first = c * CHUNK + i;
            }
        }
#pragma omp critical(test_expf_vec)
        {
            if (w > worst) worst = w, worst_x = wx;
            wrong += bad;
            if (first < first_wrong) first_wrong = first;
        }
        free(x), free(y);
    }
    cr_log_info("op_expf: largest error %.4f ulp at x = %a", worst, tu_u2f(worst_x));
    cr_assert_eq(wrong, 0, "%llu inputs outside the bound; first x = %a (bits 0x%08llx): op_expf %a, libm %a",
                 (unsigned long long)wrong, tu_u2f((uint32_t)first_wrong), (unsigned long long)first_wrong,
                 op_expf(tu_u2f((uint32_t)first_wrong)), expf(tu_u2f((uint32_t)first_wrong)));
    cr_assert(worst > 0.5, "largest error %.4f: suspiciously small (was the loop run?)", worst);
}

Test(expf_vec, special_values) {
    cr_assert(tu_samef(op_expf(0.0f), 1.0f));
    cr_assert(tu_samef(op_expf(-0.0f), 1.0f));
    cr_assert(tu_samef(op_expf(-INFINITY), 0.0f));
    cr_assert(isinf(op_expf(INFINITY)) && op_expf(INFINITY) > 0);
    cr_assert(isnan(op_expf(NAN)));
    cr_assert(isinf(op_expf(88.8f)) && op_expf(88.7f) < INFINITY);
    cr_assert(op_expf(-103.0f) > 0.0f && op_expf(-104.0f) == 0.0f);  // the smallest subnormal is exp(-103.28)
}
