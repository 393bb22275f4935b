// llama_ops.c: the Llama operations on the CPU (see llama_ops.h for shapes and the = / +=
// contract). Elementwise and attention loops are OpenMP-parallel over rows or (batch, head);
// the projections are mm_cpu calls (one sgemm each).
// Constraints: deterministic for a given thread count: every reduction has a fixed order (the
// `omp simd` reductions are vectorised in an order fixed at compile time), no atomics.
// exp: op_expf (kernels/expf_vec.h, < 1 ulp, vectorised) in SwiGLU, the softmax and
// cross-entropy's backward, where glibc's expf (a scalar call) was; cross-entropy's forward
// keeps libm's double exp for its double sum (V exps a row: not worth a change of bits).
#include "kernels/llama_ops.h"

#include <math.h>
#include <string.h>

#include "kernels/blas_tune.h"
#include "kernels/expf_vec.h"
#include "kernels/scaled_mm.h"

#ifdef _OPENMP
#include <omp.h>
#endif

// --- embedding

void op_encoder_forward(float *out, const int *tokens, const float *wte, size_t N, size_t C) {
#pragma omp parallel for schedule(static)
    for (size_t n = 0; n < N; n++) memcpy(out + n * C, wte + (size_t)tokens[n] * C, C * sizeof *out);
}

void op_encoder_backward(float *dwte, const float *dout, const int *tokens, size_t N, size_t C) {
    // Rows in sequence: two positions with the same token add into one row, so a parallel
    // loop would race; this is O(N*C), negligible next to the matmuls.
    for (size_t n = 0; n < N; n++) {
        float *d = dwte + (size_t)tokens[n] * C;
        const float *g = dout + n * C;
        for (size_t c = 0; c < C; c++) d[c] += g[c];
    }
}

// --- RMSNorm

// Rows per group in the forward's sums: each row's sum stays one sequential chain in c, as before,
// and a group's chains are interleaved, so that the adds of RMS_RB rows overlap instead of each
// add waiting on the one before it (a double add's latency, not its throughput, bound these
// loops). Scalar on purpose: vectorised across rows, GCC gathers the strided elements with a
// shuffle each, slower than the interleaved chains.
#define RMS_RB 8

// ss[r] = sum_c x[r,c]^2 in double, c in order, for RMS_RB rows of x (stride C).
__attribute__((noinline, optimize("no-tree-vectorize"))) static void rms_sumsq(double *ss, const float *x, size_t C) {
    double acc[RMS_RB] = {0};
    for (size_t c = 0; c < C; c++)
        for (size_t r = 0; r < RMS_RB; r++) acc[r] += (double)x[r * C + c] * x[r * C + c];
    for (size_t r = 0; r < RMS_RB; r++) ss[r] = acc[r];
}

void op_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, size_t N,
                     size_t C, float eps) {
    const size_t groups = (N + RMS_RB - 1) / RMS_RB;
#pragma omp parallel for schedule(static)
    for (size_t gi = 0; gi < groups; gi++) {
        const size_t n0 = gi * RMS_RB, nr = N - n0 < RMS_RB ? N - n0 : RMS_RB;
        const float *x = inp + n0 * C;
        double ss[RMS_RB] = {0};
        if (nr == RMS_RB) {
            rms_sumsq(ss, x, C);
        } else {
            for (size_t r = 0; r < nr; r++)
                for (size_t c = 0; c < C; c++) ss[r] += (double)x[r * C + c] * x[r * C + c];
        }
        for (size_t r = 0; r < nr; r++) {
            const float rs = (float)(1.0 / sqrt(ss[r] / (double)C + (double)eps));
            rstd[n0 + r] = rs;
            const float *xr = x + r * C;
            float *o = out + (n0 + r) * C;
            for (size_t c = 0; c < C; c++) o[c] = xr[c] * rs * weight[c];
        }
    }
}

// y = x r w with r = (mean x^2 + eps)^-1/2:  dx = r (w dy) - x r^3 / C * sum_c (w dy x)
void op_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                      const float *weight, const float *rstd, size_t N, size_t C) {
    // Per row: interleaving the rows' chains as the forward does measured slower in the
    // trainer's profile (each element takes two loads, a multiply and two conversions before
    // its add, so the chain was not what bound this loop).
#pragma omp parallel for schedule(static)
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C, *dy = dout + n * C;
        const float r = rstd[n];
        double dot = 0.0;
        for (size_t c = 0; c < C; c++) dot += (double)(weight[c] * dy[c]) * x[c];
        const float k = (float)(dot * (double)r * r * r / (double)C);
        float *dx = dinp + n * C;
        for (size_t c = 0; c < C; c++) dx[c] += r * weight[c] * dy[c] - k * x[c];
    }
    // dweight: column sums over rows in row order (deterministic), in double; each thread
    // owns a range of columns and walks the rows, so the inner loop is contiguous.
#pragma omp parallel
    {
        size_t c0 = 0, c1 = C;
#ifdef _OPENMP
        const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
        c0 = C * id / nt, c1 = C * (id + 1) / nt;
#endif
        double acc[c1 > c0 ? c1 - c0 : 1];
        for (size_t c = c0; c < c1; c++) acc[c - c0] = 0.0;
        for (size_t n = 0; n < N; n++) {
            const float *dy = dout + n * C, *x = inp + n * C;
            const float r = rstd[n];
            for (size_t c = c0; c < c1; c++) acc[c - c0] += (double)dy[c] * x[c] * r;
        }
        for (size_t c = c0; c < c1; c++) dweight[c] += (float)acc[c - c0];
    }
}

// --- RoPE

void op_rope_tables(float *cos_t, float *sin_t, size_t T, size_t hs, double theta) {
    const size_t half = hs / 2;
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < half; i++) {
            const double a = (double)t * pow(theta, -(double)(2 * i) / (double)hs);
            cos_t[t * half + i] = (float)cos(a);
            sin_t[t * half + i] = (float)sin(a);
        }
}

// dir +1 rotates by +angle (forward); -1 by -angle (the transpose, for the gradient).
static void rope_rotate(float *x, const float *cos_t, const float *sin_t, size_t B, size_t T,
                        size_t nheads, size_t hs, float dir) {
    const size_t half = hs / 2, width = nheads * hs;
#pragma omp parallel for schedule(static)
    for (size_t n = 0; n < B * T; n++) {
        const float *c = cos_t + (n % T) * half, *s = sin_t + (n % T) * half;
        for (size_t h = 0; h < nheads; h++) {
            float *p = x + n * width + h * hs;
            for (size_t i = 0; i < half; i++) {
                const float a = p[2 * i], b = p[2 * i + 1], si = dir * s[i];
                p[2 * i] = a * c[i] - b * si;
                p[2 * i + 1] = a * si + b * c[i];
            }
        }
    }
}

void op_rope_forward(float *x, const float *cos_t, const float *sin_t, size_t B, size_t T,
                  size_t nheads, size_t hs) {
    rope_rotate(x, cos_t, sin_t, B, T, nheads, hs, 1.0f);
}

void op_rope_backward(float *dx, const float *cos_t, const float *sin_t, size_t B, size_t T,
                   size_t nheads, size_t hs) {
    rope_rotate(dx, cos_t, sin_t, B, T, nheads, hs, -1.0f);
}

// --- attention
//
// As matrix products per (batch, head), each one mm_cpu call (a single-threaded cblas_sgemm
// inside the OpenMP loop): forward S = scale Q K^T, softmax by rows with the causal mask fused
// (only t2 <= t is read; the rest of the row is written 0), Y = P V; backward dP = dY V^T,
// dS = P (dP - rowsum(P dP)) scale (masked the same way), dQ = dS K, dK += dS^T Q, dV += P^T dY
// (+= over the query heads of one key/value group, in head order).
// Summation order (what changed from the per-key dot/axpy loops this replaced): every dot
// product over hs (the scores, dP) and every sum over keys t2 (Y, dQ, dK, dV) is now summed in
// the order the BLAS kernel chooses for that shape instead of sequentially in t2 or in the
// compiler's fixed `omp simd` lanes; the error bound (gamma_K sum |a||b| per element, K = hs or
// T) is unchanged, the bits are not. The products S and dP cover the whole T x T square (the
// masked half is computed and then overwritten: cheaper than many small triangular calls at the
// sizes trained here), and Y, dQ, dK, dV sum over all T keys with exact zeros in the masked
// entries (x + 0*y == x), so row t still depends only on positions <= t, bitwise -- unless a
// later position holds an inf or NaN value of v (or dy), which 0*inf now spreads into the row.

// Rounds x[0..n) for one attention row, counting into the thread's own record.
static void attn_round(const attn_cast *c, float *x, size_t n, uint64_t offset, fmt_stats *st) {
    fmt_round_opts o = c->opts;
    o.offset += offset;
    fmt_round_f32(c->fmt, x, n, &o, st);
}

static void stats_add(fmt_stats *to, const fmt_stats *s) {
    to->n += s->n, to->overflow += s->overflow, to->underflow += s->underflow;
    to->subnormal += s->subnormal, to->nan_in += s->nan_in, to->invalid += s->invalid;
    if (s->amax > to->amax) to->amax = s->amax;
}

// A float32 operand of mm_cpu (row-major, leading dimension ld, transposed or not).
static mm_operand operand(const float *x, size_t ld, bool trans) {
    mm_operand o = {0};
    o.x = x;
    o.ld = ld;
    o.trans = trans;
    fmt_from_name(&o.fmt, "fp32");
    return o;
}

// The options and operand format every attention product shares, made once per op call: the
// products are small (T x T x hs), and building them by name in each call (mm_opts_default and
// operand look "fp32" up in the format table) cost as much as a tenth of the products' own time.
typedef struct {
    mm_opts o;   // float32 accumulation, alpha 1, beta 0
    mm_operand x;  // a float32 operand with x, ld and trans to fill in
} attn_mm_base;

static attn_mm_base attn_base(void) {
    attn_mm_base b;
    mm_opts_default(&b.o);
    b.x = operand(NULL, 1, false);
    return b;
}

// C (M x N, ldc) = alpha op(A) op(B) (+ C when accumulate): float32 operands, one sgemm.
static void attn_mm(const attn_mm_base *base, float *C, size_t ldc, const float *A, size_t lda, bool ta,
                    const float *B, size_t ldb, bool tb, size_t M, size_t N, size_t K, float alpha,
                    bool accumulate) {
    mm_opts o = base->o;
    o.alpha = alpha;
    o.beta = accumulate ? 1.0f : 0.0f;
    mm_operand a = base->x, b = base->x;
    a.x = A, a.ld = lda, a.trans = ta;
    b.x = B, b.ld = ldb, b.trans = tb;
    mm_cpu(C, ldc, &a, &b, M, N, K, &o);  // valid shapes and float32: cannot fail
}

// max(x[0..n)) as `x > m ? x : m` from -inf (not fmaxf: a libm call here), in 8 lanes and then
// across them: a NaN never wins in either order, and where -0 and +0 tie, the one returned is
// only subtracted from the row (x - mx is the same for either zero but at x = -0, where exp
// gives 1 for both), so the probabilities are those of the sequential loop, bit for bit.
static inline float row_max(const float *x, size_t n) {
    float m[8];
    for (int l = 0; l < 8; l++) m[l] = -INFINITY;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
    float mx = -INFINITY;
    for (int l = 0; l < 8; l++) mx = m[l] > mx ? m[l] : mx;
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

// The softmax's row sums: nr (<= ATT_RB) consecutive causal rows t0 .. t0+nr-1 of a (T, T)
// block, row t summing its keys 0..t in key order from +0, one float add at a time: the order
// the per-row loop had. The rows' chains run interleaved over the keys they share (0..t0), then
// row by row over the rest, so that ATT_RB adds are in flight where each waited on the one
// before it. Scalar on purpose: vectorised across rows, GCC shuffles the strided loads into
// lanes, slower than the chains; the accumulators are local because sum may alias p.
#define ATT_RB 8

__attribute__((noinline, optimize("no-tree-vectorize"))) static void row_sums(float *sum, const float *p, size_t T,
                                                                              size_t t0, size_t nr) {
    float acc[ATT_RB] = {0};
    if (nr == ATT_RB) {
        for (size_t t2 = 0; t2 <= t0; t2++)
            for (size_t r = 0; r < ATT_RB; r++) acc[r] += p[r * T + t2];
    } else {
        for (size_t r = 0; r < nr; r++)
            for (size_t t2 = 0; t2 <= t0; t2++) acc[r] += p[r * T + t2];
    }
    for (size_t r = 0; r < nr; r++) {
        for (size_t t2 = t0 + 1; t2 <= t0 + r; t2++) acc[r] += p[r * T + t2];
        sum[r] = acc[r];
    }
}

void op_attention_forward(float *y, float *att, const float *q, const float *k, const float *v,
                       size_t B, size_t T, size_t NH, size_t NKV, size_t hs,
                       const attn_cast *scores, const attn_cast *probs) {
    const size_t qw = NH * hs, kw = NKV * hs, group = NH / NKV;
    const float scale = 1.0f / sqrtf((float)hs);
    const attn_mm_base base = attn_base();
#pragma omp parallel
    {
        fmt_stats st_s = {0}, st_p = {0};  // per thread, merged below
#pragma omp for collapse(2) schedule(static)
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < NH; h++) {
                const size_t kh = h / group, head = (b * NH + h) * T * T;
                const float *qb = q + b * T * qw + h * hs, *kb = k + b * T * kw + kh * hs,
                            *vb = v + b * T * kw + kh * hs;
                float *s = att + head;
                attn_mm(&base, s, T, qb, qw, false, kb, kw, true, T, T, hs, scale, false);  // Q K^T
                for (size_t t0 = 0; t0 < T; t0 += ATT_RB) {
                    const size_t nr = T - t0 < ATT_RB ? T - t0 : ATT_RB;
                    float sum[ATT_RB];
                    for (size_t r = 0; r < nr; r++) {
                        const size_t t = t0 + r;
                        float *p = s + t * T;
                        if (scores) attn_round(scores, p, t + 1, head + t * T, &st_s);
                        const float mx = row_max(p, t + 1);
                        for (size_t t2 = 0; t2 <= t; t2++) p[t2] = op_expf(p[t2] - mx);  // vectorised
                    }
                    row_sums(sum, s + t0 * T, T, t0, nr);  // each row in key order, as before
                    for (size_t r = 0; r < nr; r++) {
                        const size_t t = t0 + r;
                        float *p = s + t * T;
                        const float inv = 1.0f / sum[r];
                        for (size_t t2 = 0; t2 <= t; t2++) p[t2] *= inv;
                        if (probs) attn_round(probs, p, t + 1, head + t * T, &st_p);
                        for (size_t t2 = t + 1; t2 < T; t2++) p[t2] = 0.0f;
                    }
                }
                attn_mm(&base, y + b * T * qw + h * hs, qw, s, T, false, vb, kw, false, T, hs, T, 1.0f, false);  // P V
            }
#pragma omp critical(op_attention_stats)  // counts and a max: the order does not matter
        {
            if (scores && scores->stats) stats_add(scores->stats, &st_s);
            if (probs && probs->stats) stats_add(probs->stats, &st_p);
        }
    }
}

// Parallel over (batch, kv head): the query heads of one group add into the same dk, dv rows,
// so they run in sequence inside one task.
void op_attention_backward(float *dq, float *dk, float *dv, float *datt, const float *dy,
                        const float *att, const float *q, const float *k, const float *v,
                        size_t B, size_t T, size_t NH, size_t NKV, size_t hs) {
    const size_t qw = NH * hs, kw = NKV * hs, group = NH / NKV;
    const float scale = 1.0f / sqrtf((float)hs);
    const attn_mm_base base = attn_base();
#pragma omp parallel for collapse(2) schedule(static)
    for (size_t b = 0; b < B; b++)
        for (size_t kh = 0; kh < NKV; kh++) {
            const float *kb = k + b * T * kw + kh * hs, *vb = v + b * T * kw + kh * hs;
            float *dkb = dk + b * T * kw + kh * hs, *dvb = dv + b * T * kw + kh * hs;
            for (size_t h = kh * group; h < (kh + 1) * group; h++) {
                const size_t head = (b * NH + h) * T * T;
                const float *p = att + head, *dyb = dy + b * T * qw + h * hs, *qb = q + b * T * qw + h * hs;
                float *ds = datt + head;
                const bool more = h > kh * group;  // dk, dv: = for the group's first head, then +=
                attn_mm(&base, ds, T, dyb, qw, false, vb, kw, true, T, T, hs, 1.0f, false);  // dP = dY V^T
                // the softmax Jacobian: ds = p (dp - sum p dp), row by row, masked
                for (size_t t = 0; t < T; t++) {
                    const float *pt = p + t * T;
                    float *d = ds + t * T, pdp = 0.0f;
                    for (size_t t2 = 0; t2 <= t; t2++) pdp += pt[t2] * d[t2];
                    for (size_t t2 = 0; t2 <= t; t2++) d[t2] = pt[t2] * (d[t2] - pdp) * scale;
                    for (size_t t2 = t + 1; t2 < T; t2++) d[t2] = 0.0f;
                }
                attn_mm(&base, dq + b * T * qw + h * hs, qw, ds, T, false, kb, kw, false, T, hs, T, 1.0f, false);  // dS K
                attn_mm(&base, dkb, kw, ds, T, true, qb, qw, false, T, hs, T, 1.0f, more);  // dS^T Q
                attn_mm(&base, dvb, kw, p, T, true, dyb, qw, false, T, hs, T, 1.0f, more);  // P^T dY
            }
        }
}

// --- SwiGLU

void op_swiglu_forward(float *out, float *sig, const float *gate, const float *up, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        const float g = gate[i], s = 1.0f / (1.0f + op_expf(-g));
        sig[i] = s;
        out[i] = g * s * up[i];
    }
}

// d silu(g)/dg = s (1 + g (1 - s)), s = sigmoid(g)
void op_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                     const float *up, const float *sig, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        const float g = gate[i], s = sig[i];
        dgate[i] = dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
        dup[i] = dout[i] * g * s;
    }
}

// --- softmax cross-entropy

double op_crossentropy_forward(float *lse, const float *logits, const int *targets, size_t N,
                            size_t V) {
    double loss = 0.0;
    size_t count = 0;
#pragma omp parallel for schedule(static)
    for (size_t n = 0; n < N; n++) {
        const float *l = logits + n * V;
        float mx = -INFINITY;
        for (size_t i = 0; i < V; i++) mx = l[i] > mx ? l[i] : mx;
        double s = 0.0;
        for (size_t i = 0; i < V; i++) s += exp((double)(l[i] - mx));
        lse[n] = (float)((double)mx + log(s));
    }
    // The loss sum in row order (the parallel loop above leaves no order-dependent sum).
    for (size_t n = 0; n < N; n++)
        if (targets[n] >= 0) {
            loss += (double)lse[n] - (double)logits[n * V + (size_t)targets[n]];
            count++;
        }
    return count ? loss / (double)count : 0.0;
}

void op_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                           const int *targets, size_t N, size_t V, float scale) {
    size_t count = 0;
    for (size_t n = 0; n < N; n++) count += targets[n] >= 0;
    const float s = count ? scale / (float)count : 0.0f;
#pragma omp parallel for schedule(static)
    for (size_t n = 0; n < N; n++) {
        const float *l = logits + n * V;
        float *d = dlogits + n * V;
        if (targets[n] < 0) {
            memset(d, 0, V * sizeof *d);
            continue;
        }
        const float m = lse[n];
        for (size_t i = 0; i < V; i++) d[i] = s * op_expf(l[i] - m);
        d[targets[n]] -= s;
    }
}

// --- projections

int llama_ops_threads(int n) {
    mm_blas_set_threads(1);
#ifdef _OPENMP
    const int used = n > 0 ? n : omp_get_num_procs();
    omp_set_num_threads(used);
    return used;
#else
    (void)n;
    return 1;
#endif
}

// C = A B (+ beta C) with the M rows of C split over the OpenMP threads, one single-threaded
// sgemm each: one thread pool for the whole step. (OpenBLAS's own threads next to OpenMP's
// spin against each other on 2 cores: a shakespeare step took 190 ms that way, 107 ms on one
// thread.) The bits depend on the split (OpenBLAS picks its blocking from M: 221 of 1024
// outputs of a 32x96x32 product differ between 1 and 2 threads), so results are deterministic
// for a given thread count only.
static int mm_rows(float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                   size_t N, size_t K, const mm_opts *o) {
    int st = MM_OK;
#pragma omp parallel reduction(| : st)
    {
        size_t m0 = 0, m1 = M;
#ifdef _OPENMP
        const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
        m0 = M * id / nt, m1 = M * (id + 1) / nt;
#endif
        if (m1 > m0) {
            mm_operand a = *A;
            a.x += A->trans ? m0 : m0 * A->ld;
            st |= mm_cpu(C + m0 * ldc, ldc, &a, B, m1 - m0, N, K, o);
        }
    }
    return st;
}

int op_matmul_forward(float *out, const float *inp, const float *weight, size_t N, size_t IC,
                   size_t OC) {
    mm_opts o;
    mm_opts_default(&o);
    const mm_operand a = operand(inp, IC, false), b = operand(weight, IC, true);
    return mm_rows(out, OC, &a, &b, N, OC, IC, &o);
}

int op_matmul_dgrad(float *dinp, const float *dout, const float *weight, size_t N, size_t IC,
                 size_t OC, bool accumulate) {
    mm_opts o;
    mm_opts_default(&o);
    o.beta = accumulate ? 1.0f : 0.0f;
    const mm_operand g = operand(dout, OC, false), w = operand(weight, IC, false);
    return mm_rows(dinp, IC, &g, &w, N, IC, OC, &o);  // (N,OC) x (OC,IC)
}

int op_matmul_wgrad(float *dweight, const float *dout, const float *inp, size_t N, size_t IC,
                 size_t OC) {
    mm_opts o;
    mm_opts_default(&o);
    o.beta = 1.0f;
    const mm_operand gt = operand(dout, OC, true), x = operand(inp, IC, false);
    return mm_rows(dweight, IC, &gt, &x, OC, IC, N, &o);  // (OC,N) x (N,IC)
}

int op_matmul_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                    const float *weight, size_t N, size_t IC, size_t OC, bool accumulate) {
    const int st = op_matmul_dgrad(dinp, dout, weight, N, IC, OC, accumulate);
    return st != MM_OK ? st : op_matmul_wgrad(dweight, dout, inp, N, IC, OC);
}
