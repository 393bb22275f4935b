// scaled_mm_cpu_emu.c: the emulated-accumulator path of mm_cpu, set up once per product: the
// segments of K (promotion points), the accumulator's rounding, the packed operands, and the
// choice of tile kernel (scaled_mm_internal.h). Both kernels follow the step-by-step definition
// in scaled_mm.h bit for bit (checked against mm_ref by test_mm_cpu).
// Constraints: no MPFR, no global state (the MXCSR a kernel sets is put back); results do not
// depend on the number of threads (each accumulator is one lane, whatever the tile it is in).
#if defined(__AVX512F__)
#include <immintrin.h>  // the transposing pack's shuffles
#elif defined(__SSE__)
#include <xmmintrin.h>  // _mm_getcsr, _mm_setcsr
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/scaled_mm_internal.h"

// --- the floating-point environment of a kernel's thread

typedef struct {
    unsigned csr;
} fpenv;

static void fpenv_enter(fpenv *saved) {
#if defined(__SSE__)
    saved->csr = _mm_getcsr();
    _mm_setcsr(0x1f80);  // every exception masked, round to nearest, FTZ and DAZ off
#else
    saved->csr = 0;  // elsewhere the default environment is assumed
#endif
}

static void fpenv_leave(const fpenv *saved) {
#if defined(__SSE__)
    _mm_setcsr(saved->csr);
#else
    (void)saved;
#endif
}

// --- packing and the tile loop

#if defined(__AVX512F__)
// Four lines' 16 elements from k (line u's at src[u * st + k']) into the panel rows k .. k + 15
// at d (w floats apart): a 4 x 16 transpose by shuffles (pure moves: every bit kept). Per 128-bit
// lane l, u_j holds the four lines' element 4l + j.
static inline __attribute__((always_inline)) void pack4x16(float *d, const float *src, size_t st, size_t w) {
    const __m512 r0 = _mm512_loadu_ps(src), r1 = _mm512_loadu_ps(src + st);
    const __m512 r2 = _mm512_loadu_ps(src + 2 * st), r3 = _mm512_loadu_ps(src + 3 * st);
    const __m512 t0 = _mm512_unpacklo_ps(r0, r1), t1 = _mm512_unpackhi_ps(r0, r1);
    const __m512 t2 = _mm512_unpacklo_ps(r2, r3), t3 = _mm512_unpackhi_ps(r2, r3);
    const __m512 u[4] = {_mm512_shuffle_ps(t0, t2, 0x44), _mm512_shuffle_ps(t0, t2, 0xee),
                         _mm512_shuffle_ps(t1, t3, 0x44), _mm512_shuffle_ps(t1, t3, 0xee)};
    if (w == 4) {  // the 16 rows are contiguous: the lanes gathered into four whole vectors
        const __m512 v0 = _mm512_shuffle_f32x4(u[0], u[1], 0x44), v1 = _mm512_shuffle_f32x4(u[0], u[1], 0xee);
        const __m512 v2 = _mm512_shuffle_f32x4(u[2], u[3], 0x44), v3 = _mm512_shuffle_f32x4(u[2], u[3], 0xee);
        _mm512_storeu_ps(d, _mm512_shuffle_f32x4(v0, v2, 0x88));
        _mm512_storeu_ps(d + 16, _mm512_shuffle_f32x4(v0, v2, 0xdd));
        _mm512_storeu_ps(d + 32, _mm512_shuffle_f32x4(v1, v3, 0x88));
        _mm512_storeu_ps(d + 48, _mm512_shuffle_f32x4(v1, v3, 0xdd));
        return;
    }
    for (int j = 0; j < 4; j++) {
        _mm_storeu_ps(d + (size_t)j * w, _mm512_extractf32x4_ps(u[j], 0));
        _mm_storeu_ps(d + (size_t)(4 + j) * w, _mm512_extractf32x4_ps(u[j], 1));
        _mm_storeu_ps(d + (size_t)(8 + j) * w, _mm512_extractf32x4_ps(u[j], 2));
        _mm_storeu_ps(d + (size_t)(12 + j) * w, _mm512_extractf32x4_ps(u[j], 3));
    }
}
#endif

// Panels of w lines of a stored matrix x, (ceil(n/w), K, w): line t (a row of op(A), a column of
// op(B)) has its element k at x[t * st + k * sk] (st or sk is 1); lines from n on are zero.
// Each k's w floats are written together: where lines are contiguous in memory (st == 1) they
// are one copy, otherwise (a transpose) w loads from as many lines, which stream along k, and
// with AVX-512 whole panels' 16 k's at a time four lines by four (pack4x16: the scalar gathers
// were most of the engine kernels' set-up at the trainer's shapes). The tile widths the kernels
// use come as constants, so that a whole panel's rows are vector moves.
static inline __attribute__((always_inline)) void pack_panel(float *d, const float *x, size_t st, size_t sk,
                                                              size_t t0, size_t cnt, size_t K, size_t w) {
    size_t k = 0;
#if defined(__AVX512F__)
    if (sk == 1 && st != 1 && cnt == w && w % 4 == 0)
        for (; k + 16 <= K; k += 16)
            for (size_t t = 0; t < w; t += 4) pack4x16(d + k * w + t, x + (t0 + t) * st + k, st, w);
#endif
    for (; k < K; k++) {
        const float *src = x + t0 * st + k * sk;
        float *row = d + k * w;
        if (cnt == w) {
            for (size_t t = 0; t < w; t++) row[t] = src[t * st];
        } else {
            size_t t = 0;
            for (; t < cnt; t++) row[t] = src[t * st];
            for (; t < w; t++) row[t] = 0.0f;
        }
    }
}

// pack_panel with the tile widths the kernels use as constants.
static inline __attribute__((always_inline)) void pack_panel_w(float *d, const float *x, size_t st, size_t sk,
                                                                size_t t0, size_t cnt, size_t K, size_t w) {
    switch (w) {
    case 4: pack_panel(d, x, st, sk, t0, cnt, K, 4); break;
    case 8: pack_panel(d, x, st, sk, t0, cnt, K, 8); break;
    case 16: pack_panel(d, x, st, sk, t0, cnt, K, 16); break;
    case 32: pack_panel(d, x, st, sk, t0, cnt, K, 32); break;
    default: pack_panel(d, x, st, sk, t0, cnt, K, w); break;
    }
}

// Panel p of the n lines of x (see pack_panel) into dst.
static void pack_one(float *dst, const float *x, size_t st, size_t sk, size_t n, size_t K, size_t w, size_t p) {
    float *d = dst + p * K * w;
    const size_t t0 = p * w, cnt = n - t0 < w ? n - t0 : w;
    if (st == 1) pack_panel_w(d, x, 1, sk, t0, cnt, K, w);  // contiguous lines: st as a constant
    else pack_panel_w(d, x, st, sk, t0, cnt, K, w);
}

int mm__emu_pack_each(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, size_t mr, size_t nr,
                      const float **ap, const float **bp, mm__emu_panel_fn *each, void *ctx) {
    const size_t npa = (J->M + mr - 1) / mr, npb = (J->N + nr - 1) / nr, K = J->K;
    float *a = mm__scratch_f32(MM__SCRATCH_A, npa * mr * K);
    float *b = mm__scratch_f32(MM__SCRATCH_B, npb * nr * K);
    if (!a || !b) return MM_ENOMEM;
    // op(A)'s row i has element k at x[i * ld + k], or x[k * ld + i] when stored transposed;
    // op(B)'s column j at x[k * ld + j], or x[j * ld + k].
    const size_t sta = A->trans ? 1 : A->ld, ska = A->trans ? A->ld : 1;
    const size_t stb = B->trans ? B->ld : 1, skb = B->trans ? 1 : B->ld;
    // One parallel region for both operands and each's hook (at the trainer's shapes the regions
    // of separate passes cost more than their work): the panels A's, then B's, in turn, each
    // thread an equal share of their lines (B's panels are nr / mr times A's).
    const size_t lines = npa * mr + npb * nr;
#pragma omp parallel
    {
        size_t id = 0, nt = 1;
#ifdef _OPENMP
        id = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
#endif
        const size_t lo = lines * id / nt, hi = lines * (id + 1) / nt;
        for (size_t u = 0; u < npa + npb; u++) {
            const bool in_a = u < npa;
            const size_t first = in_a ? u * mr : npa * mr + (u - npa) * nr, p = in_a ? u : u - npa;
            if (first < lo) continue;
            if (first >= hi) break;
            if (in_a) pack_one(a, A->x, sta, ska, J->M, K, mr, p);
            else pack_one(b, B->x, stb, skb, J->N, K, nr, p);
            if (each) each(ctx, in_a, p, in_a ? a + p * K * mr : b + p * K * nr);
        }
    }
    *ap = a, *bp = b;
    return MM_OK;
}

int mm__emu_pack(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, size_t mr, size_t nr,
                 const float **ap, const float **bp) {
    return mm__emu_pack_each(J, A, B, mr, nr, ap, bp, NULL, NULL);
}

void mm__emu_tile_loop(const mm__emu_job *J, const float *ap, const float *bp, float *C, size_t ldc, size_t mr,
                       size_t nr, mm__emu_tile_fn *tile, const void *ctx) {
    const size_t nrb = (J->M + mr - 1) / mr, npan = (J->N + nr - 1) / nr;
#pragma omp parallel
    {
        fpenv env;
        fpenv_enter(&env);
        // Tiles go to whichever thread is free: a core taken by another process then does not
        // hold up the rest (each tile's result is the same whichever thread computes it). In
        // grabs of about a sixteenth of a thread's share, not one tile: a small product's tiles
        // take microseconds, and one grab each spent much of that on the shared loop counter
        // (docs/benchmarks.md, "The tile loop's grabs").
        // Column panels outermost: consecutive tiles reuse one panel of B from cache.
        size_t grab = 1;
#ifdef _OPENMP
        grab = nrb * npan / (16 * (size_t)omp_get_num_threads());
        if (grab < 1) grab = 1;
#endif
#pragma omp for schedule(dynamic, grab)
        for (size_t t = 0; t < nrb * npan; t++) tile(J, ctx, ap, bp, C, ldc, t % nrb, t / nrb);
        fpenv_leave(&env);
    }
}

int mm__emu_tiles(const mm__emu_job *J, const mm_operand *A, const mm_operand *B, float *C, size_t ldc,
                  size_t mr, size_t nr, mm__emu_tile_fn *tile, const void *ctx) {
    const float *ap, *bp;
    const int st = mm__emu_pack(J, A, B, mr, nr, &ap, &bp);
    if (st == MM_OK) mm__emu_tile_loop(J, ap, bp, C, ldc, mr, nr, tile, ctx);
    return st;
}

// --- entry

int mm__cpu_emulated(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                     size_t N, size_t K, const mm_opts *o) {
    if (o->acc.mode == FMT_SR) return MM_EUNSUPPORTED;  // no draw order is defined for it
    if (o->acc.engine) {
        // The kernel that covers the product (the NVIDIA fused one last: it hands what none
        // covers to the scalar model), each with the scalar model where it must.
        int st = mm__engine_amd_run(C, ldc, A, B, M, N, K, o);
        if (st == MM_EUNSUPPORTED) st = mm__engine_block_run(C, ldc, A, B, M, N, K, o);
        if (st == MM_EUNSUPPORTED) st = mm__engine_fast_run(C, ldc, A, B, M, N, K, o);
        return st == MM_OK ? mm__round_output(C, ldc, M, N, o) : st;
    }
    mm__emu_job J = {.M = M, .N = N, .K = K, .sa = A->scales, .sb = B->scales, .beta = o->beta};
    J.ab = mm__fl32_prod3(o->alpha, mm__tscale(A), mm__tscale(B));
    // The accumulator rounds with its mode and IEEE overflow (inf, or max toward zero).
    const fmt_round_opts ao = {.mode = o->acc.mode, .overflow = FMT_OVERFLOW_IEEE};
    fmt_rounder acc;
    if (fmt_rounder_make(&acc, &o->acc.fmt, &ao) != FMT_OK) return MM_EINVAL;
    J.k = acc.k;
    J.mode = acc.mode;

    J.nba = mm__nblocks(A, K, &J.bka);
    mm__nblocks(B, K, &J.bkb);
    J.bk = mm__seg_block(A, B, K), J.pe = mm__seg_promote(o);

    const bool f32 = mm__emu_f32_covers(A, B, M, N, K, &J.k, J.mode);
    mm__path_note(o, f32 ? "emu-f32" : "emu-f64", 0);
    const int st = f32 ? mm__emu_run_f32(&J, A, B, C, ldc) : mm__emu_run_f64(&J, A, B, C, ldc);
    return st == MM_OK ? mm__round_output(C, ldc, M, N, o) : st;
}
