// round_lean_avx2.c: round_lean.c's element rounding (FMT_PATH_LEAN) on eight lanes, for CPUs
// with AVX2 and without AVX-512 (AMD Zen 1 to 3, Intel before Skylake-SP and the E-cores): the
// same classes (wide, narrow, e8m0), every mode, either overflow policy, with or without flushing
// and statistics, bit for bit the generic kernel's results (tests/test_round.c holds every path
// to it; test_round's lean_avx2 test holds this file's kernel to it on CPUs that take the
// AVX-512 one). The codes stay AVX-512 only; block scaling's one pass has its AVX2 kernel in
// round_lean_block_avx2.c (round_lean_avx2_internal.h has what the two share).
// Methods (round_lean.c's opening comment has the derivations):
// - wide formats: integer add and mask on the bits, as round_lean.c;
// - narrow formats: the magic constant c = 2^(max(e, emin) + 23 - m), but AVX2 has no embedded
//   rounding, so the sum of the magnitudes s = |x| + c is always rounded to nearest (MXCSR's
//   default mode: the kernel declines where a thread set another, or DAZ or FTZ), and the other
//   modes step from it: y = s - c is exact, and y against |x| says whether s went up or down,
//   so truncation is s less one unit of its bits where it went up (s lies in [c, 2c], whose last
//   place is the format's at x; 2c less one unit is 2c - u), rounding away is s plus one unit
//   where it went down, rna adds one where it went down from a tie (|x| - y = u/2, exact), rto
//   sets the last bit of the truncation where inexact, and sr adds one unit to the truncation
//   where the generic kernel's draw says up;
// - e8m0: round_lean.c's integer method.
// Then lean16's rules in the same order. Unsigned comparisons are signed ones on magnitudes
// (below 2^31) or on values with the sign bit flipped.
#include "round_lean_avx2_internal.h"

#ifdef LEAN_X86

// out = round(in) (in place allowed); the tail through a buffer of eight (masked stores are
// slow on AMD, and zeros in the lanes past n are counted by no statistic once live masks them).
V3 void lean_loop8(const lk *kp, lean_class cls, fmt_round_mode mode, float *out, const float *in, size_t n,
                   fmt__counts *counts) {
    const lk kl = *kp;  // not read again after every store through out (see round_lean.c)
    const lk *k = &kl;
    const v8 zero = _mm256_setzero_si256(), all = set1(~0u);
    counts8 c8 = {zero, zero, zero, zero, zero, zero};
    counts8 *cnt = counts ? &c8 : NULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const v8 rnd = mode == FMT_SR ? draws8(k->key, k->first + i) : zero;
        const v8 v = lean8(k, cls, mode, _mm256_loadu_si256((const v8 *)(in + i)), rnd, cnt, all);
        _mm256_storeu_si256((v8 *)(out + i), v);
    }
    if (i < n) {
        float t[8] = {0};
        memcpy(t, in + i, (n - i) * sizeof *t);
        const v8 live = first_lanes(n - i);
        const v8 rnd = mode == FMT_SR ? draws8(k->key, k->first + i) : zero;
        const v8 v = lean8(k, cls, mode, _mm256_loadu_si256((const v8 *)t), rnd, cnt, live);
        _mm256_storeu_si256((v8 *)t, v);
        memcpy(out + i, t, (n - i) * sizeof *t);
    }
    if (cnt) add_counts_avx2(counts, &c8);
}

TARGET_V3 static void lean_run_avx2(const lk *k, lean_class cls, fmt_round_mode mode, float *out, const float *in,
                                    size_t n, fmt__counts *counts) {
#define CALL(cl, m) lean_loop8(k, cl, m, out, in, n, counts)
    WITH_COUNTS(cls, mode, CALL)
#undef CALL
}

// AVX2 and FMA (the block kernel's remainders), and the rest of x86-64-v3 that TARGET_V3 lets
// the compiler use: a VM may show AVX2 without all of them.
bool fmt__lean_avx2_runs(void) {
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && defined(__BMI__) && defined(__BMI2__)
    return true;
#else
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
           __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
#endif
}

bool fmt__round_f32_lean_avx2(const fmt__kparams *p, fmt_round_mode mode, float *out, const float *in, size_t n,
                              uint64_t base, fmt__counts *counts) {
    const lean_class cls = class_of(p);
    if (cls == LEAN_NONE || (unsigned)mode >= FMT_NMODES || !fmt__lean_avx2_runs() ||
        (mode == FMT_SR && p->sr_variant != FMT_SR_A))
        return false;
    // The narrow method's float32 sums see subnormals and round by MXCSR's mode: to nearest,
    // without DAZ or FTZ, or the generic kernel runs.
    if (cls == LEAN_NARROW && !mxcsr_nearest_exact()) return false;
    for (size_t done = 0; done < n; done += LEAN_BLOCK) {
        const size_t len = n - done < LEAN_BLOCK ? n - done : LEAN_BLOCK;
        const lk k = lk_make(p, cls, base + done);
        lean_run_avx2(&k, cls, mode, out + done, in + done, len, counts);
    }
    return true;
}

#else  // not x86-64

bool fmt__lean_avx2_runs(void) { return false; }

bool fmt__round_f32_lean_avx2(const fmt__kparams *p, fmt_round_mode mode, float *out, const float *in, size_t n,
                              uint64_t base, fmt__counts *counts) {
    (void)p, (void)mode, (void)out, (void)in, (void)n, (void)base, (void)counts;
    return false;
}

#endif
