// scaled_mm_dev_kernels.cuh: the device side of kernels/scaled_mm_cuda_dev.h, the emulated
// accumulators and the matrix engines on device pointers, apart from the CUDA runtime calls so
// that tests/cuda_shim.cpp runs the very same source on the CPU (as cast_cuda_kernels.cuh).
// One thread per output, summing k in order: the definition in kernels/scaled_mm.h step by step,
// correctness first (no tiling, no shared memory).
// What is shared with the C library rather than written again (FMT_HD, compiled for both):
// - an emulated step s = round_acc(s + a b): mm__acc_step (kernels/scaled_mm_internal.h), the
//   scalar reference of the CPU's vector kernels, on fmt__round_one_f64; the segments
//   (mm__seg_end) and the epilogue (mm__epilogue);
// - the engines: kernels/engine/engine_model.c itself, #included below as a second copy of the
//   one source (MM_ENGINE_MODEL_COPY), one dot product per thread, chained one instruction at a
//   time as mm__engine_out1 (kernels/engine/scaled_mm_engine.c) chains it;
// - the output rounding: cc_round_elem (cast_cuda_kernels.cuh), the device's fmt_round_f32.
// Written a second time, small: the per-output loop of mm__engine_out1 and of the emulated tile
// kernels' promotion (mm__emu_promote), the type emins of the engines' operand types (checked
// against the format table at every call, mmd_emins_ok) and the scale-value tests that pick an
// engine's block-scaled kind (is_pow2_or_nan, is_ue4m3 of scaled_mm_engine.c): the host's are
// static and read host memory, and on the device the choice is made without a copy to the host.
// Every float and double operation is a single IEEE operation in the CPU's order (the .cu is
// compiled with -fmad=false, the CPU with -ffp-contract=off).
#pragma once

#include "kernels/cuda/cast_cuda_kernels.cuh"

extern "C" {
#include "kernels/engine.h"
#include "kernels/scaled_mm_internal.h"
}

// --- the engines' model, a copy of kernels/engine/engine_model.c for the device

// The smallest exponent of each operand type (MM_ET_* bit), as the format table has them
// (mm_engine_type_format); mmd_emins_ok holds the two together.
FMT_HD static int type_emin(unsigned t) {
    switch (t) {
    case MM_ET_F64: return -1022;
    case MM_ET_F16: return -14;
    case MM_ET_E4M3: return -6;
    case MM_ET_E5M2: return -14;
    case MM_ET_E3M2: return -2;
    case MM_ET_E2M3: return 0;
    case MM_ET_E2M1: return 0;
    case MM_ET_E4M3FNUZ: return -7;
    case MM_ET_E5M2FNUZ: return -15;
    default: return -126;  // F32, TF32, BF16; and engine_model.c's answer for no type
    }
}

#define MM_ENGINE_MODEL_COPY 1
#define MM_ENGINE_API static inline
#define mm_engine_operand mmd_engine_operand
#define mm__engine_dot_fault mmd_engine_dot_fault
#define mm_engine_dot mmd_engine_dot
// C's `terms T = {.n = 0}` zero-fills the rest in C++ too; g++ -Wextra would say so for each.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "kernels/engine/engine_model.c"
#pragma GCC diagnostic pop
#undef mm_engine_operand
#undef mm__engine_dot_fault
#undef mm_engine_dot

static bool mmd_emins_ok() {
    for (int t = 0; t < MM_ET_COUNT; t++) {
        const fmt_t *f = mm_engine_type_format(1u << t);
        if (!f || f->emin != type_emin(1u << t)) return false;
    }
    return true;
}

// --- arguments

enum { MMD_KMAX = 64, MMD_SMAX = 4 };  // the largest instruction k (tcgen05's mxf4nvf4), its scales
enum { MMD_STACK_BYTES = 8192 };       // per thread, for mmd_engine_kernel (scaled_mm_dev.cu)

// One instruction kind an engine product may run (the host's mm__engine_plan, by value).
struct MmdPlan {
    mm_engine_kind q;
    unsigned ta, tb;
    int scaled_kind, c_in_chain, valid;  // c_in_chain: also needs ab == 1 (mmd_ab)
};

struct MmdArgs {
    float *C;
    uint64_t ldc;
    const float *a, *b;  // stored as mm_operand says: op(A) (M x K), op(B) (K x N)
    uint64_t lda, ldb;
    int transa, transb;
    const float *sa, *sb;  // block scales or NULL: A (M, nba), B (nbb, N)
    uint64_t nba, nbb, bka, bkb;
    uint64_t M, N, K, bk, pe;  // bk, pe: the segments (mm__seg_end)
    float ab, beta;        // ab = fl32(alpha * ta * tb), unless a tensor scale is on the device:
    float alpha, ta, tb;   // then the kernel computes it from these and *tsa, *tsb (0 read as 1)
    const float *tsa, *tsb;
    fmt__kparams acc;  // the emulated accumulator, IEEE overflow
    int acc_mode;
    fmt__kparams out;  // the output rounding (out_copy: none)
    int out_mode, out_copy;
    // engines: plan[0] the kind without scales, [1] the block-scaled kind for ue8m0 scales, [2]
    // for ue4m3; flags[0] (flags[1]) nonzero when some scale is not ue8m0 (ue4m3)
    MmdPlan plan[3];
    int f16;
    fmt__kparams f16k;  // fp16, rne: C rounded into an f16 chain
    cc_ull *flags;
    unsigned blocks, threads;
};

// --- device helpers

__device__ __forceinline__ float mmd_a(const MmdArgs &p, uint64_t i, uint64_t k) {
    return p.transa ? p.a[k * p.lda + i] : p.a[i * p.lda + k];
}
__device__ __forceinline__ float mmd_b(const MmdArgs &p, uint64_t k, uint64_t j) {
    return p.transb ? p.b[j * p.ldb + k] : p.b[k * p.ldb + j];
}

// fl32(alpha * ta * tb), with the tensor scales read from the device where given.
__device__ __forceinline__ float mmd_ab(const MmdArgs &p) {
    if (!p.tsa && !p.tsb) return p.ab;
    const float ta = p.tsa ? *p.tsa : p.ta, tb = p.tsb ? *p.tsb : p.tb;
    return mm__fl32_prod3(p.alpha, ta == 0.0f ? 1.0f : ta, tb == 0.0f ? 1.0f : tb);
}

// C(i, j) = round_out(y) (the output rounding of mm__round_output: element i * N + j draws
// stochastic counter offset + i * N + j).
__device__ __forceinline__ void mmd_store(const MmdArgs &p, uint64_t i, uint64_t j, float y) {
    fmt__flags fl;
    p.C[i * p.ldc + j] = p.out_copy ? y : cc_round_elem(p.out, p.out_mode, y, i * p.N + j, &fl);
}

// The segment's promotion: total = fl32(total + fl32(s * fl32(sa * sb))) (mm__emu_promote).
__device__ __forceinline__ float mmd_promote(const MmdArgs &p, uint64_t i, uint64_t j, uint64_t s0, float s,
                                             float total) {
    const float xa = p.sa ? p.sa[i * p.nba + s0 / p.bka] : 1.0f;
    const float xb = p.sb ? p.sb[(s0 / p.bkb) * p.N + j] : 1.0f;
    const float sc = xa * xb, part = s * sc;
    return total + part;
}

// --- the emulated accumulators: one output per thread

static __global__ void mmd_emu_kernel(const MmdArgs p) {
    const float ab = mmd_ab(p);
    CC_LOOP(t, p.M * p.N, p) {
        const uint64_t i = t / p.N, j = t % p.N;
        float total = 0.0f;
        for (uint64_t s0 = 0, s1; s0 < p.K; s0 = s1) {
            s1 = mm__seg_end(s0, p.K, p.bk, p.pe);
            double s = 0.0;
            for (uint64_t k = s0; k < s1; k++) {
                const double prod = (double)mmd_a(p, i, k) * (double)mmd_b(p, k, j);  // exact
                s = mm__acc_step(&p.acc, (fmt_round_mode)p.acc_mode, s, prod);
            }
            total = mmd_promote(p, i, j, s0, cc_d2f(s), total);  // s is a value of the accumulator: exact
        }
        mmd_store(p, i, j, mm__epilogue(ab, p.beta, total, &p.C[i * p.ldc + j]));
    }
}

// --- the engines: the block-scaled kind's choice, then one output per thread

// scaled_mm_engine.c's tests of a scale value: a power of two in [2^-127, 2^127] (ue8m0), a
// value of e4m3 >= 0 (ue4m3); NaN passes both.
__device__ __forceinline__ bool mmd_pow2_or_nan(float x) {
    if (cc_isnan(x)) return true;
    int e;
    return x > 0 && frexpf(x, &e) == 0.5f && e - 1 >= -127 && e - 1 <= 127;
}
__device__ __forceinline__ bool mmd_ue4m3(float x) {
    if (cc_isnan(x)) return true;
    if (!(x >= 0 && x <= 448.0f)) return false;
    if (x == 0) return true;
    const int e = ilogbf(x) < -6 ? -6 : ilogbf(x);
    const float m = ldexpf(x, 3 - e);
    return m == truncf(m);
}

// flags[0] (flags[1]) = 1 when a scale of A or B is not ue8m0 (not ue4m3).
static __global__ void mmd_scale_kinds_kernel(const MmdArgs p) {
    const uint64_t na = p.M * p.nba;
    bool not_e8 = false, not_u4 = false;
    CC_LOOP(t, na + p.nbb * p.N, p) {
        const float x = t < na ? p.sa[t] : p.sb[t - na];
        not_e8 |= !mmd_pow2_or_nan(x), not_u4 |= !mmd_ue4m3(x);
    }
    if (not_e8) atomicMax(p.flags + 0, 1ull);
    if (not_u4) atomicMax(p.flags + 1, 1ull);
}

// The kind mm__engine_plan_make picks: ue8m0 scales' block-scaled kind, else ue4m3's, else the
// kind without scales; NULL when none applies (the host refused what it could see before).
__device__ __forceinline__ const MmdPlan *mmd_pick(const MmdArgs &p) {
    if (p.flags) {
        if (!p.flags[0] && p.plan[1].valid) return &p.plan[1];
        if (!p.flags[1] && p.plan[2].valid) return &p.plan[2];
    }
    return p.plan[0].valid ? &p.plan[0] : nullptr;
}

static __global__ void mmd_engine_kernel(const MmdArgs p) {
    const MmdPlan *pl = mmd_pick(p);
    const float ab = mmd_ab(p);
    const bool chain = pl && pl->c_in_chain && ab == 1.0f;
    CC_LOOP(t, p.M * p.N, p) {
        const uint64_t i = t / p.N, j = t % p.N;
        const float cij = p.C[i * p.ldc + j];
        if (!pl) {  // scales that no kind of this engine takes: mm_cpu refuses; NaN marks it
            p.C[i * p.ldc + j] = cc_u2f(0x7fc00000u);
            continue;
        }
        const mm_engine_kind *q = &pl->q;
        const uint64_t unit = (uint64_t)q->k, bk = pl->scaled_kind ? p.K : p.bk;
        float total = 0.0f;
        double d = 0.0;
        for (uint64_t s0 = 0, s1; s0 < p.K; s0 = s1) {
            s1 = mm__seg_end(s0, p.K, bk, p.pe);
            const uint64_t n = s1 - s0, np = (n + unit - 1) / unit * unit;
            double c = 0.0;
            if (chain) {
                fmt__flags fl;
                c = p.f16 ? fmt__round_one_f64(&p.f16k, FMT_RNE, cc_f2d(cij), 0, &fl) : (double)cij;
            }
            // The chain, one instruction at a time (mm_engine_dot over np products is this loop).
            for (uint64_t k0 = 0; k0 < np; k0 += unit) {
                double La[MMD_KMAX], Lb[MMD_KMAX], Lsa[MMD_SMAX], Lsb[MMD_SMAX];
                for (uint64_t k = 0; k < unit; k++) {
                    const bool in = k0 + k < n;
                    const uint64_t kk = s0 + k0 + k;
                    La[k] = in ? mmd_engine_operand(mmd_a(p, i, kk), pl->ta) : 0.0;
                    Lb[k] = in ? mmd_engine_operand(mmd_b(p, kk, j), pl->tb) : 0.0;
                }
                if (pl->scaled_kind)
                    for (uint64_t g = 0; g < unit / (uint64_t)q->block; g++) {
                        const uint64_t kk = s0 + k0 + g * (uint64_t)q->block;
                        const bool in = kk < s1;
                        Lsa[g] = in ? p.sa[i * p.nba + kk / p.bka] : 1.0;
                        Lsb[g] = in ? p.sb[(kk / p.bkb) * p.N + j] : 1.0;
                    }
                c = mmd_engine_dot(q, p.f16 != 0, pl->ta, pl->tb, La, Lb, pl->scaled_kind ? Lsa : nullptr,
                                   pl->scaled_kind ? Lsb : nullptr, c, unit);
            }
            d = c;
            // A block-scaled kind applied the scales; otherwise the segment's are applied here.
            total = pl->scaled_kind ? total + (float)d : mmd_promote(p, i, j, s0, (float)d, total);
        }
        mmd_store(p, i, j, chain ? (float)d : mm__epilogue(ab, p.beta, total, &cij));
    }
}

// ---------------------------------------------------------------------------------------------
// host side: checks, the plans and the launches, the same for the CUDA runtime
// (scaled_mm_dev.cu) and the shim. L is cast_cuda_kernels.cuh's launcher (launch, alloc, copy,
// release). Nothing is read from A, B or C: they are device memory.

static int mmd_fail(int st, char *msg, size_t len, const char *text) {
    if (msg && len) snprintf(msg, len, "%s", text);
    return st;
}

// mm_validate's checks of everything but the data (mm_validate reads the scales of an engine
// product to pick its kind; here that is done on the device), then the engines' candidate kinds.
static int mmd_prepare(MmdArgs *a, float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                       size_t N, size_t K, const mm_opts *o, char *msg, size_t len) {
    if (!A || !B || !o) return mmd_fail(MM_EINVAL, msg, len, "mm_cuda_dev: A, B and opts must not be NULL");
    const mm_acc *acc = &o->acc;
    if (!acc->engine && !mm_acc_is_emulated(acc))
        return mmd_fail(MM_EUNSUPPORTED, msg, len, "mm_cuda_dev: plain fp32 accumulation has no device kernel "
                        "here (its order is the BLAS's); use an emulated accumulator or an engine, or "
                        "PyTorch's own matmul");
    if (acc->mode == FMT_SR)
        return mmd_fail(MM_EUNSUPPORTED, msg, len, "mm_cuda_dev: stochastic rounding of the accumulator is not "
                        "supported (as mm_cpu)");
    mm_opts v = *o;
    if (acc->engine) {  // the data-free checks with a plain accumulator; the engine's below
        memset(&v.acc, 0, sizeof v.acc);
        fmt_from_name(&v.acc.fmt, "fp32");
        v.acc.mode = FMT_RNE;
    }
    int st = mm_validate(A, B, M, N, K, &v, msg, len);
    if (st != MM_OK) return st;
    if (!C || ldc < N) return mmd_fail(MM_EINVAL, msg, len, "mm_cuda_dev: C is NULL or ldc < N");
    memset(a, 0, sizeof *a);
    a->C = C, a->ldc = ldc;
    a->a = A->x, a->b = B->x, a->lda = A->ld, a->ldb = B->ld, a->transa = A->trans, a->transb = B->trans;
    a->sa = A->scales, a->sb = B->scales;
    size_t bka, bkb;
    a->nba = mm__nblocks(A, K, &bka), a->nbb = mm__nblocks(B, K, &bkb);
    a->bka = bka, a->bkb = bkb;
    a->M = M, a->N = N, a->K = K;
    a->bk = mm__seg_block(A, B, K), a->pe = mm__seg_promote(o);
    a->ab = mm__fl32_prod3(o->alpha, mm__tscale(A), mm__tscale(B));
    a->alpha = o->alpha, a->ta = mm__tscale(A), a->tb = mm__tscale(B);
    a->beta = o->beta;
    a->out_copy = fmt_contains_f32(&o->out_fmt);
    fmt__kparams_make(&a->out, &o->out_fmt, &o->out_round);
    a->out_mode = o->out_round.mode;
    if (!acc->engine) {
        fmt_round_opts ao;
        memset(&ao, 0, sizeof ao);
        ao.mode = acc->mode, ao.overflow = FMT_OVERFLOW_IEEE;
        fmt_rounder r;
        if (fmt_rounder_make(&r, &acc->fmt, &ao) != FMT_OK) return mmd_fail(MM_EINVAL, msg, len, "bad accumulator");
        a->acc = r.k, a->acc_mode = r.mode;
        return MM_OK;
    }
    // Engines: mm__acc_check's and mm__engine_plan_make's checks that need no scale values.
    if (acc->engine < 0 || (size_t)acc->engine > mm_engine_count() || acc->engine_k < 0 || acc->promote_every < 0)
        return mmd_fail(MM_EINVAL, msg, len, "mm_cuda_dev: accumulator engine, k or promote_every out of range");
    if (!mmd_emins_ok())
        return mmd_fail(MM_EINVAL, msg, len, "mm_cuda_dev: the device's type emins differ from the format table "
                        "(scaled_mm_dev_kernels.cuh's type_emin)");
    const bool blocked = A->scales && B->scales && A->block_k > 0 && (A->block_k == 16 || A->block_k == 32);
    st = mm_acc_check_operands(acc, &A->fmt, &B->fmt, blocked ? A->block_k : 0, msg, len);
    if (st != MM_OK) return st;
    const int e = acc->engine - 1;
    const unsigned ta = mm_engine_type_of(&A->fmt), tb = mm_engine_type_of(&B->fmt);
    const mm_engine_kind *cand[3] = {mm_engine_find(e, ta, tb, acc->engine_k, acc->engine_f16, 0, false, NULL, 0),
                                     NULL, NULL};
    if (blocked) {
        cand[1] = mm_engine_find(e, ta, tb, acc->engine_k, acc->engine_f16, A->block_k, false, NULL, 0);
        cand[2] = mm_engine_find(e, ta, tb, acc->engine_k, acc->engine_f16, A->block_k, true, NULL, 0);
    }
    const size_t pbk = A->scales && A->block_k > 0 ? bka : B->scales && B->block_k > 0 ? bkb : K;
    for (int c = 0; c < 3; c++) {
        const mm_engine_kind *q = cand[c];
        if (!q) continue;
        if (q->k > MMD_KMAX || (q->block && q->k / q->block > MMD_SMAX))
            return mmd_fail(MM_EINVAL, msg, len, "mm_cuda_dev: an instruction wider than the kernel's buffers");
        MmdPlan &pl = a->plan[c];
        pl.q = *q, pl.valid = 1, pl.scaled_kind = c > 0;
        pl.ta = ta & q->types & -(ta & q->types), pl.tb = tb & q->types & -(tb & q->types);
        const bool unscaled = pl.scaled_kind || (!A->scales && !B->scales);
        const size_t seg = pl.scaled_kind ? K : pbk;
        pl.c_in_chain = unscaled && o->beta == 1.0f && seg >= K &&
                        (acc->promote_every == 0 || (size_t)acc->promote_every >= K);
    }
    a->bk = pbk;
    a->f16 = acc->engine_f16;
    fmt_t f16;
    fmt_from_name(&f16, "fp16");
    fmt_round_opts rne;
    memset(&rne, 0, sizeof rne);
    rne.mode = FMT_RNE, rne.overflow = FMT_OVERFLOW_IEEE;
    fmt__kparams_make(&a->f16k, &f16, &rne);
    return MM_OK;
}

// tsa, tsb: device pointers to A's and B's tensor scales, read in place of the operands'
// tensor_scale (NULL: not).
template <class L>
static int mmd_run(L &l, float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M, size_t N,
                   size_t K, const mm_opts *o, const float *tsa, const float *tsb, char *msg, size_t len) {
    MmdArgs a;
    const int st = mmd_prepare(&a, C, ldc, A, B, M, N, K, o, msg, len);
    if (st != MM_OK) return st;
    a.tsa = tsa, a.tsb = tsb;
    if (!o->acc.engine) return l.launch(mmd_emu_kernel, a, (uint64_t)M * N);
    CcScratch<L> flags(l);
    if (a.plan[1].valid || a.plan[2].valid) {  // the scales' values pick the kind
        int s = l.alloc(&flags.p, 2 * sizeof(cc_ull));
        a.flags = (cc_ull *)flags.p;
        if (s == MM_OK) s = l.launch(mmd_scale_kinds_kernel, a, (uint64_t)M * a.nba + a.nbb * N);
        if (s != MM_OK) return s;
    }
    return l.launch(mmd_engine_kernel, a, (uint64_t)M * N);
}
