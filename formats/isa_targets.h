// isa_targets.h: the instruction sets of the run-time-dispatched kernel copies, as target
// attribute strings. Feature lists, never "arch=...": an arch replaces the build's -march, and
// where that -march has a feature the named arch lacks (haswell's rdrnd, cascadelake's
// avx512vnni) the function's target is narrower than the build's and GCC refuses to inline
// every always_inline helper and intrinsic into it ("target specific option mismatch"). A
// feature list only adds to the build's set, so it compiles under any -march.
#ifndef FPLAB_ISA_TARGETS_H
#define FPLAB_ISA_TARGETS_H

// x86-64-v3: AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE (and the SSE levels below them).
#define FMT_ISA_V3 "sse3,ssse3,sse4.1,sse4.2,popcnt,avx,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe"
// x86-64-v4: v3 plus AVX-512 F, BW, CD, DQ, VL. Written out (not concatenated) so that
// FMT_PRAGMA_TARGET can stringize it whole.
#define FMT_ISA_V4 \
    "sse3,ssse3,sse4.1,sse4.2,popcnt,avx,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,avx512f,avx512bw,avx512cd,avx512dq,avx512vl"

#define FMT_TARGET(isa) __attribute__((target(isa)))
// A whole translation unit's target from here on: FMT_PRAGMA_TARGET(FMT_ISA_V4).
#define FMT__DO_PRAGMA(x) _Pragma(#x)
#define FMT_PRAGMA_TARGET(isa) FMT__DO_PRAGMA(GCC target(isa))

#endif
