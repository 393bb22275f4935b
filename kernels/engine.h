// engine.h: the arithmetic of real matrix units (tensor cores, matrix cores), bit for bit, as
// Xie et al., "MMA-Sim: Bit-Accurate Reference Model of Tensor Cores and Matrix Cores" (arXiv
// 2511.10909, 2025) describes it. Each architecture is data (a row per instruction kind: widths,
// groupings, rounding, special cases) read by a few shared functions (engine_model.c).
//
// An engine is named ARCH:INSTR (volta:mma ... cdna3:mfma, mm_engine_count/mm_engine_name).
// The operand formats pick the instruction kind; where an architecture has several k for a
// kind, the largest is the default and mm_engine_find's k picks another. A GEMM is the
// instruction chained along K: the D of each instruction is the C of the next.
//
// The arithmetic families (what one instruction does to c and its k products):
// - MM_EOP_FUSED (NVIDIA): every product a*b (exact) and c are aligned to the largest exponent
//   among them, each truncated toward zero to `frac` fractional bits below that exponent,
//   summed exactly, then the sum is normalized and rounded into D: toward zero to float32 with
//   `out_frac` fraction bits (23, or 13 for Ada/Hopper fp8), or to nearest-even for an f16 D.
//   Exponents come from each operand's own format (a subnormal operand has its format's
//   smallest exponent and a significand below 1; a zero has exponent -126). Split-k
//   instructions (Ampere/Ada) do this in two halves, the first half's D feeding the second.
//   Block-scaled kinds add the scales' exponents to the products' (mxf8f6f4), or (mxf4nvf4)
//   sum each group of 16 products exactly and align the groups by their scales' exponents.
//   Inf/NaN: a sum with a NaN or inf anywhere (inf - inf included) gives the canonical NaN
//   (f32 0x7fffffff, f16 0x7fff) or that inf.
// - MM_EOP_FMA: one fused multiply-add per product, in the D type (f64; AMD f32).
// - MM_EOP_PAIRWISE (AMD CDNA1/2 f16, bf16): products of each group of `group` are rounded to
//   float32 and summed as a balanced binary tree (each addition rounded to nearest), then added
//   to the accumulator; CDNA2 flushes subnormal inputs to +0 and subnormal sums to a signed 0.
// - MM_EOP_AMD_FUSED (CDNA3; xf32 everywhere): each group of `group` products is summed as
//   MM_EOP_FUSED sums (24 fractional bits, toward zero); the group's sum is rounded down
//   (toward -inf) to 31 fractional bits and c to 24 at their common exponent, added, and the
//   result rounded to nearest-even into float32. fp8 (two_stage) sums the even and the odd
//   products separately and rounds each down to 24 bits at their common exponent first, and
//   drops a c more than 25 binades below.
// Constraints: no MPFR, no global state; values travel as doubles (every operand and D value
// of every kind is exact in double).
#ifndef FPLAB_ENGINE_H
#define FPLAB_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include "formats/format.h"

typedef enum { MM_EOP_FUSED, MM_EOP_FMA, MM_EOP_PAIRWISE, MM_EOP_AMD_FUSED } mm_engine_op;

// Operand types, as bits of a set.
enum {
    MM_ET_F64 = 1 << 0,
    MM_ET_F32 = 1 << 1,   // float32 operands, used whole (AMD f32 FMA)
    MM_ET_TF32 = 1 << 2,  // float32 operands truncated (not rounded) to 10 fraction bits
    MM_ET_F16 = 1 << 3,
    MM_ET_BF16 = 1 << 4,
    MM_ET_E4M3 = 1 << 5,
    MM_ET_E5M2 = 1 << 6,
    MM_ET_E3M2 = 1 << 7,
    MM_ET_E2M3 = 1 << 8,
    MM_ET_E2M1 = 1 << 9,
    MM_ET_E4M3FNUZ = 1 << 10,
    MM_ET_E5M2FNUZ = 1 << 11,
};
enum { MM_ET_COUNT = 12 };

// One instruction kind of one engine: a row of the table (engine_table.c).
typedef struct {
    int engine;          // index of the engine (mm_engine_name)
    const char *kind;    // "f16", "bf16", "tf32", "xf32", "f32", "f64", "f8", "f8f6f4", "mxf8f6f4", "mxf4nvf4"
    const char *shape;   // the instruction's shape as its ISA writes it, e.g. "m64nNk32", "32x32x8"
    unsigned types;      // operand types A and B may have (MM_ET_*)
    bool same_types;     // A and B must have the same type
    int k;               // products per instruction
    mm_engine_op op;
    int frac;            // fused families: fractional bits kept below the largest exponent
    int out_frac;        // NVIDIA f32 D: fraction bits kept (toward zero); 23 or 13
    bool f16_out;        // an f16 C/D variant exists
    int split;           // NVIDIA: 2 for split-k instructions (two fused halves), else 1
    int group;           // AMD: products per group; mxf4nvf4: products per exact inner group
    bool flush;          // CDNA2: subnormal inputs and sums flushed
    bool two_stage;      // CDNA3 fp8: even and odd products summed apart
    int block;           // block-scaled kinds: products per scale (16 or 32); 0 otherwise
    bool ue4m3_scales;   // block-scaled: scales are ue4m3 (else ue8m0)
    const char *note;    // where the model comes from (the paper's section) and what is special
} mm_engine_kind;

// Engines, in listing order.
size_t mm_engine_count(void);
const char *mm_engine_name(size_t e);  // "hopper:wgmma"
// Index of the engine named name (exact, lower case), or -1.
int mm_engine_index(const char *name);
// The rows of the table (every kind of every engine), for listings and tests.
size_t mm_engine_kind_count(void);
const mm_engine_kind *mm_engine_kind_get(size_t i);

// The k of engine's instructions (every kind), without repeats, as "32, 16, 8"; returns out.
char *mm_engine_ks(int engine, char *out, size_t len);

// The format whose layout operand type t is (the lowest MM_ET_* bit of t; e.g. MM_ET_E4M3:
// fp8_e4m3), from the format table: the one statement of a type's facts (emin, name). NULL for
// t = 0 or a bit past MM_ET_COUNT.
const fmt_t *mm_engine_type_format(unsigned t);
// The operand type of format f (MM_ET_*), or 0 when f is none of them. fp32 gives MM_ET_F32 |
// MM_ET_TF32 (either kind takes it); tf32 gives MM_ET_TF32.
unsigned mm_engine_type_of(const fmt_t *f);
// The kind engine e runs for operands of types ta and tb (one MM_ET_* bit each or an
// mm_engine_type_of set): k > 0 picks the instruction with that k, 0 the largest; f16_out asks
// for an f16 C/D; block > 0 asks for a block-scaled kind with that block and scale type (0: a
// kind without scales). NULL when there is none; msg then says what the engine accepts.
const mm_engine_kind *mm_engine_find(int engine, unsigned ta, unsigned tb, int k, bool f16_out, int block,
                                     bool ue4m3_scales, char *msg, size_t msg_len);

// The value an engine reads from the float32 bits x of an operand of type t (one MM_ET_* bit):
// x itself, but for MM_ET_TF32 (NVIDIA tf32, AMD xf32) the top 19 bits alone, as the hardware
// reads the register (MMA-Sim truncates the same bits): a NaN whose payload lies only in the
// 13 low bits (0x7f800001) reads as inf. Load operands from float32 storage through it:
// mm_engine_dot's own truncation of doubles cannot see a signalling NaN's bits.
double mm_engine_operand(float x, unsigned t);

// D = the instructions of kind q chained over K products (K a multiple of q->k), starting from
// C = c. a, b: the K operand values, of types ta and tb (one MM_ET_* bit each, taken by q:
// a subnormal's exponent is its type's smallest; tf32 inputs are truncated here). sa, sb:
// block-scaled kinds, the K / q->block scales' values (powers of two for ue8m0, ue4m3 values;
// NaN allowed); NULL otherwise. f16 D: c and the result are f16 values. Returns D (NaN as the
// engine writes it: for NVIDIA, a double whose conversion to float32 or fp16 gives the
// canonical bits).
double mm_engine_dot(const mm_engine_kind *q, bool f16_out, unsigned ta, unsigned tb, const double *a,
                     const double *b, const double *sa, const double *sb, double c, size_t K);

#endif
