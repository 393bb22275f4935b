// scaled_mm.h: scaled matrix multiplication for operands in any fplab format, with one interface
// for every backend (ref: MPFR ground truth; cpu: BLAS + emulated accumulators; cuda).
//
//   C = round_out( alpha * ta * tb * sum_g  sa[i,g] * sb[g,j] * P_g[i,j]  + beta * C )
//
// where P_g is the sum of a[i,k] * b[k,j] over the K-block g (a, b: the operands' element
// values, i.e. values of their formats, unscaled), sa/sb the block scales along K and ta/tb the
// operands' tensor scales. Block scales are applied to each block's partial sum, as block-scaled
// tensor cores do.
//
// Accumulation (mm_acc):
// - fp32 (default): the exact value of the formula is the reference (mm_ref computes it exactly
//   and rounds once to the output format); mm_cpu accumulates in float32 in its own order and is
//   held to |err| <= gamma_{K+2} * |alpha ta tb| * sum_k |a b sa sb| (u = 2^-24) plus the output
//   rounding.
// - emulated (acc.fmt not fp32, e.g. bf16, fp16, or e8m13 for a 13-bit H100 fp8 accumulator):
//   every addition is rounded, step by step, and the result is defined bit for bit:
//     total = 0 (float32)
//     for each segment of K (segments end at every K-block boundary and after every
//     acc.promote_every products; promote_every 0 means only at block boundaries):
//         s = 0;  for k in segment: s = round_acc(s + a[i,k] * b[k,j])   (product exact)
//         total = fl32(total + fl32(s * fl32(sa * sb)))
//     y = fl32(fl32(alpha * ta * tb) * total);  if beta != 0: y = fl32(y + fl32(beta * C))
//     C = round_out(y)
//   mm_ref follows these steps in MPFR; mm_cpu must match it exactly. Precisely: K-blocks come
//   only from operands that have scales; promotion counts restart at each block's start;
//   fl32(alpha * ta * tb) is one rounding of the exact triple product; an exact zero sum in
//   round-down is -0. "Emulated" is any accumulator other than plain float32 rne without
//   promotion (so fp32:rtz or fp32:promote=64 are emulated too).
//   Requires element formats of at most 12 bits of precision (so a product is exact in 24
//   bits) and an accumulator of at most 24.
// - engine (acc.engine, spelled ARCH:INSTR[:kN][:f16][:promote=N], e.g. hopper:wgmma): the
//   arithmetic of a real matrix unit (kernels/engine.h), also emulated and bit-exact. The
//   operand formats pick the instruction kind. Operands with block scales of 16 or 32 whose
//   engine has a block-scaled kind for them (mxf8f6f4, mxf4nvf4) give the scales to the
//   instruction (one segment); otherwise the segments are those above, and in each the
//   instruction is chained along K from C = +0 (a segment that is not a multiple of k is
//   padded with zero products, as kernels pad K), its D then promoted as s above. With one
//   segment, alpha * ta * tb = 1 and beta = 1, C itself is the chain's first C (D = A B + C,
//   the instruction's own form); otherwise beta * C joins in the epilogue above.
//
// Layout: every matrix row-major with a leading dimension; op(A) is M x K and op(B) is K x N;
// an operand with trans set is stored transposed (A as K x M, B as N x K).
// Constraints: outputs first, then inputs, then sizes; no global state.
#ifndef FPLAB_SCALED_MM_H
#define FPLAB_SCALED_MM_H

#include "formats/round.h"

enum { MM_OK = 0, MM_EINVAL = 1, MM_ENOMEM = 2, MM_ENODEV = 3, MM_EUNSUPPORTED = 4 };

typedef struct {
    const float *x;       // element values (values of fmt); stored (M x K) or, if trans, (K x M)
                          // for A; (K x N) or, if trans, (N x K) for B
    size_t ld;            // leading dimension of the stored matrix
    bool trans;
    fmt_t fmt;            // the element format the values belong to
    const float *scales;  // NULL: all 1. A: (M, nblocks) row-major; B: (nblocks, N) row-major,
                          // nblocks = ceil(K / block_k)
    int block_k;          // K-block length of the scales; 0: one block spanning K (per-row of
                          // A / per-column of B scales)
    float tensor_scale;   // second-level scale (NVFP4); 0 is read as 1
} mm_operand;

typedef struct {
    fmt_t fmt;            // accumulator format; fp32 means plain float32 accumulation
    fmt_round_mode mode;  // rounding of each emulated addition: rne (default) or rtz, rup, ...
    int promote_every;    // emulated only: add the partial sum into float32 every N products
    // A matrix engine (kernels/engine.h) instead of fmt and mode: 0 none, e + 1 engine e.
    int engine;
    int engine_k;         // its instruction's k; 0: the largest for the operands' kind
    bool engine_f16;      // the instruction's C/D is f16 (default f32)
} mm_acc;

// The path a product took through mm_cpu: which kernel ran it and how many of its outputs the
// scalar engine model computed, so that a caller (the CLI's JSON, Python's result, the trainer's
// log, a test) states the path instead of guessing it from timing. Asked for by pointing
// mm_opts.path at one; mm_cpu fills it when it returns MM_OK (other backends leave it as it was).
// kernel is a static string, one of:
//   "none"          no kernel ran (mm_cpu sets it first; a kernel overwrites it);
//   "blas"          fp32 accumulation through cblas_sgemm;
//   "fixed"         fp32 accumulation in the fixed order (scaled_mm_cpu_fixed.c);
//   "emu-f32"       an emulated accumulator in float32 lanes (scaled_mm_cpu_emu_f32.c);
//   "emu-f64"       an emulated accumulator in double lanes (scaled_mm_cpu_emu_f64.c);
//   "engine-fast"   an engine through its fast vector kernel (scaled_mm_cpu_engine.c: the NVIDIA
//                   fused kinds, f32 and f16 D); the outputs it could not do exactly in vector
//                   lanes (special operands, results outside the normal float32 range) are
//                   counted in model_outputs;
//   "engine-model"  an engine through the scalar model alone, one dot product at a time
//                   (scaled_mm_engine.c): no fast kernel covers the kind; model_outputs = outputs.
// A new fast kernel (one file per family, e.g. kernels/engine/scaled_mm_cpu_engine_amd.c) adds a
// name of its own here ("engine-fast-<family>") and reports itself with one line in its run
// function, after its tiles: mm__path_note(o, "engine-fast-<family>", outputs it left to the
// model) (kernels/scaled_mm_internal.h). docs/kernels.md lists the names.
typedef struct {
    const char *kernel;
    size_t outputs;        // M * N
    size_t model_outputs;  // of those, computed by the scalar engine model (0 for a non-engine kernel)
} mm_path;

typedef struct {
    float alpha, beta;
    mm_acc acc;
    fmt_t out_fmt;            // C is rounded to this format (fp32: no extra rounding)
    fmt_round_opts out_round; // mode and overflow policy of that rounding
    // fp32 accumulation (not emulated) in one fixed order, the same bits on every x86-64 CPU,
    // build and thread count: each output summed over k = 0..K-1, every product rounded to
    // float32 and then added (kernels/cpu/scaled_mm_cpu_fixed.c). false: the BLAS's sgemm, whose
    // order is its kernel's (OpenBLAS picks one per CPU family). A build without a BLAS always
    // sums in the fixed order. Emulated and engine accumulators are fixed-order by definition.
    bool fixed_order;
    // Optional output (NULL: not asked): mm_cpu records the path it took here (mm_path above).
    // Copies of the options share the pointer: a caller that runs more than one product with
    // them sees the last one's path.
    mm_path *path;
} mm_opts;

// Fills o with alpha 1, beta 0, fp32 accumulation, fp32 output, rne, and fixed_order from the
// process's default (mm_fixed_order_set_default; false unless set).
void mm_opts_default(mm_opts *o);
// The fixed_order that mm_opts_default fills in from now on. A process-level setting, as the
// thread count is: a program (the trainer's run setup) sets it once, before its products, so
// that every product of the model ops (kernels/llama_ops.h) follows it without an argument.
void mm_fixed_order_set_default(bool on);
bool mm_fixed_order_default(void);
// Parses an accumulator spec: fp32 | bf16 | fp16 | mNN (NN fraction bits, float32's exponent
// range) | any format name, with an optional ":promote=N" and ":rtz"/":rne"/... suffix; or an
// engine ARCH:INSTR (kernels/engine.h) with optional ":kN", ":f16" and ":promote=N".
int mm_acc_from_name(mm_acc *out, const char *spec, char *msg, size_t msg_len);
// The spec of acc as mm_acc_from_name reads it back (e.g. "m13:rtz:promote=128",
// "hopper:wgmma:promote=128"); returns out.
char *mm_acc_name(const mm_acc *acc, char *out, size_t len);
// Checks shapes, leading dimensions, block sizes and the emulation's precision limits;
// MM_OK or MM_EINVAL with a message.
int mm_validate(const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                const mm_opts *o, char *msg, size_t msg_len);
// Whether acc can multiply operands of formats fa and fb, with K-blocks of block (16 or 32:
// scaled per block, which an engine's block-scaled kinds may take; else 0): for an engine, the
// operand types have an instruction kind of the spec's :k and :f16, and promote=N is a multiple
// of the k of every kind the operands may run. MM_OK for any other accumulator. MM_EINVAL with
// a message naming the spec, the operands and the valid choices. The one check of a spec
// against operands: mm_validate and the policy checks (autocast/policy.c) both call it.
int mm_acc_check_operands(const mm_acc *acc, const fmt_t *fa, const fmt_t *fb, int block, char *msg,
                          size_t msg_len);
// True when o asks for an emulated (rounded step by step) accumulator.
bool mm_acc_is_emulated(const mm_acc *acc);

// C (M x N, row-major, ldc) = the formula above. C is read when beta != 0 and overwritten.
int mm_ref(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
           size_t K, const mm_opts *o);
// mm_cpu keeps its operand copies (folded scales, packed panels) in buffers of the calling
// thread between calls, sized by the largest product so far; they are freed when the thread
// ends, or now by mm_scratch_release (e.g. after a large product, before a long pause).
void mm_scratch_release(void);
int mm_cpu(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
           size_t K, const mm_opts *o);

// The CUDA backend (kernels/cuda/scaled_mm_cuda.cu). Operands are copied to the device, encoded as
// packed codes of their formats, and multiplied there; MM_ENODEV when fplab was built without
// nvcc (kernels/cuda/scaled_mm_nocuda.c) or no GPU is present, with the reason from
// mm_cuda_available.
int mm_cuda(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
            size_t K, const mm_opts *o);
bool mm_cuda_available(char *msg, size_t msg_len);

// The path mm_cuda takes for a product, and the unit roundoff u of its accumulation: the fp32
// bound above holds with gamma_{K+2}(u). Paths, in the order the automatic choice tries them:
// - "cublaslt": bf16 x bf16, fp16 x fp16 (u = 2^-23: tensor cores truncate each addition) and
//   e4m3/e5m2 pairs on sm_89+ (u = 2^-13: fp8 tensor cores keep about 14 bits between
//   promotions), per-tensor scales only;
// - "tc": the own kernel on tensor cores (u = 2^-23), for element formats whose values are all
//   exact in bf16 (or all in fp16) and K-blocks that are multiples of 16;
// - "simt": the own fp32 FMA kernel (u = 2^-24), for everything.
// FPLAB_CUDA_KERNEL=auto|cublaslt|tc|simt forces a path. MM_EINVAL for another value,
// MM_EUNSUPPORTED when the forced path does not apply (msg says why), MM_ENODEV without nvcc.
typedef struct {
    char path[16];
    double u;
} mm_cuda_plan;
int mm_cuda_choose(mm_cuda_plan *plan, const mm_operand *A, const mm_operand *B, size_t K,
                   char *msg, size_t msg_len);
// For benchmarks: *ms = the mean device time of `reps` runs of the path mm_cuda_choose picks
// (named in *plan), after one untimed run; the operands are prepared and uploaded once and not
// counted, the result is not copied back or rounded. MM_EINVAL for an empty product or
// reps < 1; otherwise as mm_cuda (without the cuBLASLt fallback: MM_EUNSUPPORTED instead).
int mm_cuda_time(double *ms, mm_cuda_plan *plan, const mm_operand *A, const mm_operand *B,
                 size_t M, size_t N, size_t K, const mm_opts *o, int reps);

// Exact value of the formula before output rounding, and the bound terms, for the verifier:
// exact[i*N+j] (double nearest to the exact value) and absdot[i*N+j] = |alpha ta tb| *
// sum_k |a b sa sb| + |beta C| (computed in MPFR, rounded to double). Either may be NULL.
int mm_ref_exact(double *exact, double *absdot, const float *C_in, size_t ldc,
                 const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                 const mm_opts *o);

#endif
