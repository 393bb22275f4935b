// sum_squares.c: the gradient norm's in-order sum of squares (sum_squares_internal.h), in
// blocks of vector lanes where the CPU has AVX-512, else the plain loop.
//
// Why a block's additions need not wait on each other: a square q = (double)x * x is exact (48
// bits), and q >= 0, so the running sum s only grows. While s stays in one binade [2^(e-1),
// 2^e), the doubles there are the multiples of u = 2^(e - 53), s is one of them, and s + q rounds
// to s + rne(q / u) u, where rne rounds to the nearest integer: exactly what the plain loop's
// addition does, unless q / u lies halfway between two integers (a tie). Round-to-nearest-even
// then picks the neighbour that makes s / u even, a choice that depends on the running sum's
// parity, not on q alone. A tie's q / u is k^2 / 2 with k odd (q is k^2 times a power of two, and
// twice q / u must be odd), and k^2 = 1 mod 8, so q / u = 4j + 1/2: rne gives the lower neighbour
// 4j, and the addition adds 4j, or 4j + 1 where the sum before it is odd; after a tie the sum is
// even. So over a block, in units of u: the vector pass adds the rne terms (an integer sum: no
// rounding, no order) and keeps, 64 elements to a word, which terms are odd and where the ties
// are; a scalar walk over the ties follows the parity by popcounts and adds 1 at each tie that
// follows an odd sum. The block is taken only if its end stays below 2^e (the sums before it,
// smaller, then stayed in the binade too); a block that crosses a binade, or holds a square of
// 2^51 u or more, or a NaN or inf, is added by the plain loop, as is everything up to the first
// nonzero square.
#include "trainer/sum_squares_internal.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

enum { BLOCK = 512 };  // a multiple of 64 (one mask word per 64 squares)

static double plain(double s, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

#ifdef __AVX512F__
// The n squares of x (n <= BLOCK, a multiple of 8) added to *s (positive, finite) as the plain
// loop would; false (*s untouched) where the block must take the plain loop (above).
static bool block(double *s, const float *x, size_t n) {
    int e;
    frexp(*s, &e);  // s in [2^(e-1), 2^e): u = 2^(e - 53), s / u an integer in [2^52, 2^53)
    const double inv_u = ldexp(1.0, 53 - e);
    // rne(y) for 0 <= y < 2^51 by the magic number M = 1.5 * 2^52: y + M lands in [1.5 * 2^52,
    // 2^53], whose doubles are the integers, so its bits minus M's are rne(y) (at 2^53 too: the
    // exponent field carries); y - rne(y) is exact (Sterbenz, or rne(y) = 0), 1/2 at a tie.
    const __m512d inv = _mm512_set1_pd(inv_u), M = _mm512_set1_pd(0x1.8p52), lim = _mm512_set1_pd(0x1p51);
    const __m512d half = _mm512_set1_pd(0.5);
    __m512i acc = _mm512_setzero_si512();
    uint8_t odd[BLOCK / 8] = {0}, tie[BLOCK / 8] = {0};  // bit j of byte i: square 8i + j
    __mmask8 out = 0;
    for (size_t i = 0; i < n; i += 8) {
        const __m512d g = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
        const __m512d y = _mm512_mul_pd(_mm512_mul_pd(g, g), inv);  // exact: q, times a power of two
        const __m512d r = _mm512_add_pd(y, M);
        const __m512d d = _mm512_sub_pd(y, _mm512_sub_pd(r, M));
        const __m512i t = _mm512_sub_epi64(_mm512_castpd_si512(r), _mm512_castpd_si512(M));  // rne(y)
        acc = _mm512_add_epi64(acc, t);
        out |= _mm512_cmp_pd_mask(y, lim, _CMP_NLT_UQ);  // 2^51 u or more, NaN of either sign
        odd[i / 8] = (uint8_t)_mm512_test_epi64_mask(t, _mm512_set1_epi64(1));
        tie[i / 8] = (uint8_t)_mm512_cmp_pd_mask(d, half, _CMP_EQ_OQ);
    }
    if (out) return false;
    const double S0 = *s * inv_u;
    uint64_t odd_sum = (uint64_t)S0 & 1;  // the running sum's parity
    int64_t ups = 0;                      // the ties that add their upper neighbour
    for (size_t w = 0; w < (n + 63) / 64; w++) {
        uint64_t o, ties;
        memcpy(&o, odd + 8 * w, 8), memcpy(&ties, tie + 8 * w, 8);
        for (; ties; ties &= ties - 1) {
            const uint64_t before = (1ull << __builtin_ctzll(ties)) - 1;
            odd_sum ^= (uint64_t)__builtin_popcountll(o & before) & 1;
            ups += (int64_t)odd_sum;  // the sum becomes even
            odd_sum = 0;
            o &= ~before;  // counted (the tie's own term, 4j, is even)
        }
        odd_sum ^= (uint64_t)__builtin_popcountll(o) & 1;
    }
    // Below 2^53 the sum is exact; at or above it (rounded or not) the block left the binade.
    const double S = S0 + (double)(_mm512_reduce_add_epi64(acc) + ups);  // at most 2^60: no overflow
    if (S >= 0x1p53) return false;
    *s = ldexp(S, e - 53);
    return true;
}
#endif

double clip__sum_squares(const float *x, size_t n) {
    double s = 0.0;
    size_t i = 0;
    for (; i < n && s == 0.0; i++) s += (double)x[i] * x[i];  // until s has a binade
#ifdef __AVX512F__
    while (i < n) {
        const size_t m = n - i < BLOCK ? n - i : BLOCK, v = m / 8 * 8;
        if (!(isfinite(s) && v > 0 && block(&s, x + i, v))) s = plain(s, x + i, v);
        s = plain(s, x + i + v, m - v);
        i += m;
    }
#endif
    return plain(s, x + i, n - i);
}
