// scaled_mm_cpu_emu_f32_v4.c: the float32-lane kernel of the emulated accumulators
// (scaled_mm_cpu_emu_f32.c) compiled again for x86-64-v4, in a build whose -march lacks
// AVX-512; that file's entry points hand calls to this copy on CPUs that have it. Empty where
// -march has AVX-512 already (the one copy is the fast one) and in clang builds (the pragma
// below is GCC's; they keep the compile-time choice).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX512F__)
#include "formats/isa_targets.h"
FMT_PRAGMA_TARGET(FMT_ISA_V4)
#define MM_EMU_F32_V4_COPY 1
#include "kernels/cpu/scaled_mm_cpu_emu_f32.c"
#else
typedef int mm__emu_f32_v4_empty;  // ISO C wants a declaration in every translation unit
#endif
