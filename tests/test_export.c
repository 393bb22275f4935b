// test_export.c: the llama2.c export (trainer/export_llama2c.h). The model file is read back by
// an independent implementation of llama2.c run.c's inference (written here from run.c's
// semantics: one token at a time with a KV cache, float32 arithmetic, rmsnorm with eps 1e-5f,
// RoPE on adjacent pairs with freq = 10000^(-head_dim_index/head_size), GQA kv_mul =
// n_heads/n_kv_heads, SwiGLU w2(silu(w1 x) * w3 x)) whose logits at every position must agree
// with llama_forward's. Also: the header bytes and the tied/untied sign, the exact file size
// and payload, the freq_cis tables, the tokenizer bytes (char and byte vocabularies), and the
// refusals (rope_theta, norm_eps, token-id tokenizer) that leave existing files untouched.
// Files go to a temporary directory removed by the suite's fini. FPLAB_SEED replays.
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/llama_ops.h"
#include "tests/test_util.h"
#include "trainer/export_llama2c.h"
#include "trainer/llama.h"

// --- temporary directory

static char tmp_dir[64];

static void setup(void) {
    llama_ops_threads(1);
    strcpy(tmp_dir, "/tmp/fplab_test_export_XXXXXX");
    cr_assert(mkdtemp(tmp_dir), "mkdtemp failed");
}

static void teardown(void) {
    DIR *d = opendir(tmp_dir);
    if (!d) return;
    char p[512];
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", tmp_dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(tmp_dir);
}

TestSuite(export, .init = setup, .fini = teardown);

static const char *tmp_path(const char *name) {
    static char p[4][512];
    static int k;
    char *r = p[k++ % 4];
    snprintf(r, sizeof p[0], "%s/%s", tmp_dir, name);
    return r;
}

// The whole file (cr_assert if it cannot be read); *n its size.
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    const long sz = ftell(f);
    rewind(f);
    unsigned char *b = malloc((size_t)sz + 1);
    cr_assert(b);
    cr_assert_eq(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static void spit(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fputs(s, f);
    fclose(f);
}

static int32_t get_i32(const unsigned char *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

// --- the model under test

// The brief's config: dim 32, 2 layers, 4 heads, 2 kv heads (GQA), hidden 96, vocab 20,
// seq_len 16, theta 10000, eps 1e-5.
static llama_config small_config(bool tied) {
    return (llama_config){.dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .hidden_dim = 96,
                          .vocab_size = 20, .seq_len = 16, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                          .tied = tied};
}

// llama_init_weights, then scaled so that the model is far from its initial near-identity:
// with std 0.02 attention is almost uniform (RoPE and the q/k layout would hardly show) and the
// logits are ~0. Scaled, q.k/sqrt(hs) is O(1), every branch moves the residual stream, the
// logits are O(1), and the norm gains (1 + 0.2 N(0,1)) tell the three norms apart.
static void make_model(llama_model *m, bool tied, uint64_t seed) {
    const llama_config c = small_config(tied);
    char msg[256];
    cr_assert_eq(llama_init(m, &c, LLAMA_RECOMPUTE_NONE, msg, sizeof msg), LLAMA_OK, "%s", msg);
    llama_init_weights(m, seed);
    size_t s[LP_COUNT];
    llama_param_sizes(&c, s);
    static const float scale[LP_COUNT] = {[LP_TOK_EMB] = 50, [LP_WQ] = 15, [LP_WK] = 15, [LP_WV] = 10,
                                          [LP_WO] = 10, [LP_W_GATE] = 10, [LP_W_DOWN] = 10,
                                          [LP_W_UP] = 10, [LP_LM_HEAD] = 10};
    tu_rng r = {fmt_rng_make_key(seed, 99), 0};
    for (int i = 0; i < LP_COUNT; i++)
        for (size_t j = 0; j < s[i]; j++)
            m->p.t[i][j] = llama_param_is_matrix(i) ? m->p.t[i][j] * scale[i]
                                                    : (float)(1 + 0.2 * tu_rng_normal(&r));
}

// --- an independent reader and forward with llama2.c run.c's semantics

typedef struct {
    int dim, hidden, L, NH, NKV, V, T;
    bool shared;
    float *all;  // every float of the file after the header
    const float *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *fcr,
        *fci, *wcls;
} l2c_model;

// Maps the file as run.c's memory_map_weights does; fails the test if the file is not exactly
// that long (run.c itself would not notice a missing or extra tensor).
static void l2c_read(l2c_model *w, const unsigned char *b, size_t n) {
    cr_assert_geq(n, 28);
    w->dim = get_i32(b), w->hidden = get_i32(b + 4), w->L = get_i32(b + 8), w->NH = get_i32(b + 12);
    w->NKV = get_i32(b + 16), w->V = get_i32(b + 20), w->T = get_i32(b + 24);
    w->shared = w->V > 0;  // run.c: shared_weights = vocab_size > 0 ? 1 : 0
    w->V = abs(w->V);
    const size_t dim = w->dim, hid = w->hidden, L = w->L, hs = dim / w->NH,
                 kv_dim = dim * w->NKV / w->NH, V = w->V, T = w->T;
    const size_t nf = V * dim + L * dim + L * dim * dim + 2 * L * dim * kv_dim + L * dim * dim +
                      L * dim + 3 * L * dim * hid + dim + 2 * T * hs / 2 + (w->shared ? 0 : V * dim);
    cr_assert_eq(n, 28 + 4 * nf, "file of %zu bytes, run.c's layout needs %zu", n, 28 + 4 * nf);
    w->all = malloc(nf * sizeof(float));
    memcpy(w->all, b + 28, nf * sizeof(float));
    const float *p = w->all;
    w->emb = p, p += V * dim;
    w->rms_att = p, p += L * dim;
    w->wq = p, p += L * dim * dim;
    w->wk = p, p += L * dim * kv_dim;
    w->wv = p, p += L * dim * kv_dim;
    w->wo = p, p += L * dim * dim;
    w->rms_ffn = p, p += L * dim;
    w->w1 = p, p += L * dim * hid;
    w->w2 = p, p += L * hid * dim;
    w->w3 = p, p += L * dim * hid;
    w->rms_final = p, p += dim;
    w->fcr = p, p += T * hs / 2;
    w->fci = p, p += T * hs / 2;
    w->wcls = w->shared ? w->emb : p;
}

// Deliberately wrong readings, to show the comparison can fail.
typedef struct {
    bool swap_w13;   // gate and up exchanged
    bool rope_half;  // rotate (i, i + hs/2) as HF's rotate_half does, instead of (2i, 2i+1)
} l2c_variant;

typedef struct {
    float *x, *xb, *xb2, *hb, *hb2, *q, *att, *key_cache, *value_cache;
} l2c_state;

static void l2c_rmsnorm(float *o, const float *x, const float *w, int n) {
    float ss = 0.0f;
    for (int j = 0; j < n; j++) ss += x[j] * x[j];
    ss /= n;
    ss += 1e-5f;
    ss = 1.0f / sqrtf(ss);
    for (int j = 0; j < n; j++) o[j] = w[j] * (ss * x[j]);
}

static void l2c_matmul(float *xout, const float *x, const float *w, int n, int d) {  // W (d,n) x (n)
    for (int i = 0; i < d; i++) {
        float val = 0.0f;
        for (int j = 0; j < n; j++) val += w[(size_t)i * n + j] * x[j];
        xout[i] = val;
    }
}

static void l2c_softmax(float *x, int n) {
    float mx = x[0], sum = 0.0f;
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) sum += x[i] = expf(x[i] - mx);
    for (int i = 0; i < n; i++) x[i] /= sum;
}

static void l2c_rotate(float *v, int a, int b, float fcr, float fci) {
    const float v0 = v[a], v1 = v[b];
    v[a] = v0 * fcr - v1 * fci;
    v[b] = v0 * fci + v1 * fcr;
}

// Logits (V) of `token` at `pos` (earlier positions must have been run, in order); h (dim)
// receives the final normalised state.
static void l2c_forward(const l2c_model *w, l2c_state *s, const l2c_variant *var, int token, int pos,
                        float *logits, float *h) {
    const int dim = w->dim, hid = w->hidden, hs = dim / w->NH, kv_dim = dim * w->NKV / w->NH,
              kv_mul = w->NH / w->NKV;
    float *x = s->x;
    memcpy(x, w->emb + (size_t)token * dim, dim * sizeof *x);
    for (int l = 0; l < w->L; l++) {
        l2c_rmsnorm(s->xb, x, w->rms_att + l * dim, dim);
        const size_t loff = (size_t)l * w->T * kv_dim;
        float *k = s->key_cache + loff + (size_t)pos * kv_dim, *v = s->value_cache + loff + (size_t)pos * kv_dim;
        l2c_matmul(s->q, s->xb, w->wq + (size_t)l * dim * dim, dim, dim);
        l2c_matmul(k, s->xb, w->wk + (size_t)l * dim * kv_dim, dim, kv_dim);
        l2c_matmul(v, s->xb, w->wv + (size_t)l * dim * kv_dim, dim, kv_dim);
        if (!var->rope_half) {
            for (int i = 0; i < dim; i += 2) {
                const int head_dim = i % hs;
                const float freq = 1.0f / powf(10000.0f, head_dim / (float)hs);
                const float val = pos * freq, fcr = cosf(val), fci = sinf(val);
                l2c_rotate(s->q, i, i + 1, fcr, fci);
                if (i < kv_dim) l2c_rotate(k, i, i + 1, fcr, fci);
            }
        } else {
            for (int i = 0; i < dim; i++) {
                const int head = i / hs, j = i % hs;
                if (j >= hs / 2) continue;
                const float freq = 1.0f / powf(10000.0f, 2 * j / (float)hs);
                const float val = pos * freq, fcr = cosf(val), fci = sinf(val);
                l2c_rotate(s->q, head * hs + j, head * hs + j + hs / 2, fcr, fci);
                if (i < kv_dim) l2c_rotate(k, head * hs + j, head * hs + j + hs / 2, fcr, fci);
            }
        }
        for (int hh = 0; hh < w->NH; hh++) {
            const float *q = s->q + hh * hs;
            float *att = s->att + hh * w->T;
            for (int t = 0; t <= pos; t++) {
                const float *kt = s->key_cache + loff + (size_t)t * kv_dim + (hh / kv_mul) * hs;
                float score = 0.0f;
                for (int i = 0; i < hs; i++) score += q[i] * kt[i];
                att[t] = score / sqrtf(hs);
            }
            l2c_softmax(att, pos + 1);
            float *xb = s->xb + hh * hs;
            memset(xb, 0, hs * sizeof *xb);
            for (int t = 0; t <= pos; t++) {
                const float *vt = s->value_cache + loff + (size_t)t * kv_dim + (hh / kv_mul) * hs;
                for (int i = 0; i < hs; i++) xb[i] += att[t] * vt[i];
            }
        }
        l2c_matmul(s->xb2, s->xb, w->wo + (size_t)l * dim * dim, dim, dim);
        for (int i = 0; i < dim; i++) x[i] += s->xb2[i];
        l2c_rmsnorm(s->xb, x, w->rms_ffn + l * dim, dim);
        const float *w1 = w->w1 + (size_t)l * dim * hid, *w3 = w->w3 + (size_t)l * dim * hid;
        l2c_matmul(s->hb, s->xb, var->swap_w13 ? w3 : w1, dim, hid);
        l2c_matmul(s->hb2, s->xb, var->swap_w13 ? w1 : w3, dim, hid);
        for (int i = 0; i < hid; i++) s->hb[i] = s->hb[i] * (1.0f / (1.0f + expf(-s->hb[i]))) * s->hb2[i];
        l2c_matmul(s->xb, s->hb, w->w2 + (size_t)l * dim * hid, hid, dim);
        for (int i = 0; i < dim; i++) x[i] += s->xb[i];
    }
    l2c_rmsnorm(x, x, w->rms_final, dim);
    memcpy(h, x, dim * sizeof *h);
    l2c_matmul(logits, x, w->wcls, dim, w->V);
}

// Tolerance, in units of u * ||wcls_v|| * ||h|| (u = 2^-24, h the final normalised state of
// the reference): both sides compute the same function in float32 and differ only in
// summation orders and in where they round (run.c sums the RMSNorm squares in float, fplab in
// double; fplab's matmuls go through BLAS with its own blocking; a KV cache vs a full causal
// pass). First-order worst-case bounds along the path to a logit, relative to the norms
// involved (the network is normalised at every block input, so errors in a branch enter the
// next block relative to the residual stream, not amplified by it):
//   the logit's dot product of length C = 32:                    gamma_32 ~ 32 u
//   the final RMSNorm (float sum of 32 squares, then sqrt):          ~ 16 u + 3 u
//   per block branch (2L = 4 of them), the longest chain being
//   norm -> w1/w3 (length 32) -> silu -> w2 (length H = 96):      ~ (19 + 32 + 4 + 96) u
//   plus the attention branch's q.k (length 8), softmax (T <= 16) and sum over T <= 16,
//   each below the 96 u of the longest chain: take 4 * 151 u       = 604 u
// Sum ~ 655 u; with the angle rounding of RoPE (pos * freq in float: |angle| <= 15, an error
// of ~2 ulps of 15 is ~2^-19 absolute, i.e. ~ 32 u of the rotated values), 1024 u covers it
// with the rounding of the second-order terms. Random rounding errors add like a random walk,
// so the measured error is expected to be well below (the test prints it).
static const double EXPORT_TOL_U = 1024;

// Runs the reference over tok (T tokens) and compares with llama_forward's logits; returns the
// largest error in units of u * scale (see EXPORT_TOL_U).
static double compare_with_run_c(llama_model *m, const char *path, const int *tok, int T,
                                  const l2c_variant *var) {
    size_t n;
    unsigned char *b = slurp(path, &n);
    l2c_model w;
    l2c_read(&w, b, n);
    const int dim = w.dim, kv_dim = dim * w.NKV / w.NH;
    l2c_state s = {
        .x = calloc(dim, 4), .xb = calloc(dim, 4), .xb2 = calloc(dim, 4), .hb = calloc(w.hidden, 4),
        .hb2 = calloc(w.hidden, 4), .q = calloc(dim, 4), .att = calloc((size_t)w.NH * w.T, 4),
        .key_cache = calloc((size_t)w.L * w.T * kv_dim, 4),
        .value_cache = calloc((size_t)w.L * w.T * kv_dim, 4)};
    float *logits = malloc(w.V * sizeof *logits), *h = malloc(dim * sizeof *h);
    cr_assert(!isnan(llama_forward(m, tok, NULL, 1, T)));
    const float *ours = llama_logits(m);
    double worst = 0, max_logit = 0;
    for (int pos = 0; pos < T; pos++) {
        l2c_forward(&w, &s, var, tok[pos], pos, logits, h);
        double hn = 0;
        for (int i = 0; i < dim; i++) hn += (double)h[i] * h[i];
        hn = sqrt(hn);
        for (int v = 0; v < w.V; v++) {
            double wn = 0;
            for (int i = 0; i < dim; i++) wn += (double)w.wcls[(size_t)v * dim + i] * w.wcls[(size_t)v * dim + i];
            const double scale = sqrt(wn) * hn * 0x1p-24;
            const double err = fabs((double)logits[v] - ours[(size_t)pos * w.V + v]) / scale;
            worst = fmax(worst, isnan(err) ? INFINITY : err);
            max_logit = fmax(max_logit, fabs(logits[v]));
        }
    }
    cr_assert_gt(max_logit, 1.0, "logits of %g: the model is too close to zero to test anything", max_logit);
    free(s.x), free(s.xb), free(s.xb2), free(s.hb), free(s.hb2), free(s.q), free(s.att);
    free(s.key_cache), free(s.value_cache), free(logits), free(h), free(w.all), free(b);
    return worst;
}

static void check_forward(bool tied) {
    const uint64_t seed = tu_seed("export", tied ? "forward_tied" : "forward_untied", 0x11a3a2c);
    llama_model m;
    make_model(&m, tied, seed);
    char msg[256];
    const char *path = tmp_path(tied ? "tied.bin" : "untied.bin");
    cr_assert_eq(export_llama2c_model(path, &m, msg, sizeof msg), EXPORT_OK, "%s", msg);
    enum { T = 16 };  // every position of the context, so every freq_cis row is used
    int tok[T];
    tu_rng r = {fmt_rng_make_key(seed, 5), 0};
    for (int i = 0; i < T; i++) tok[i] = tu_rng_int(&r, 0, m.cfg.vocab_size - 1);
    const double err = compare_with_run_c(&m, path, tok, T, &(l2c_variant){0});
    fprintf(stderr, "export %s: max |run.c - fplab| = %.1f u * ||wcls_v|| ||h|| (tolerance %.0f)\n",
            tied ? "tied" : "untied", err, EXPORT_TOL_U);
    cr_assert_leq(err, EXPORT_TOL_U, "run.c-semantics logits differ by %.1f u * scale (tolerance %.0f)", err,
                  EXPORT_TOL_U);
    // The comparison can fail: the same file read with w1/w3 swapped, or with the rotate_half
    // RoPE layout, is far outside the tolerance.
    const double e_swap = compare_with_run_c(&m, path, tok, T, &(l2c_variant){.swap_w13 = true});
    const double e_rope = compare_with_run_c(&m, path, tok, T, &(l2c_variant){.rope_half = true});
    fprintf(stderr, "export %s: read wrongly: w1/w3 swapped %.3g, rotate_half RoPE %.3g\n",
            tied ? "tied" : "untied", e_swap, e_rope);
    cr_assert_gt(e_swap, 100 * EXPORT_TOL_U, "swapping w1/w3 went unnoticed (%.1f)", e_swap);
    cr_assert_gt(e_rope, 100 * EXPORT_TOL_U, "the rotate_half RoPE layout went unnoticed (%.1f)", e_rope);
    llama_free(&m);
}

Test(export, forward_tied) { check_forward(true); }
Test(export, forward_untied) { check_forward(false); }

// --- the bytes of the model file

static void check_bytes(bool tied) {
    llama_model m;
    make_model(&m, tied, 7);
    const llama_config *c = &m.cfg;
    char msg[256];
    const char *path = tmp_path("bytes.bin");
    cr_assert_eq(export_llama2c_model(path, &m, msg, sizeof msg), EXPORT_OK, "%s", msg);
    size_t n;
    unsigned char *b = slurp(path, &n);
    const int32_t want[7] = {32, 96, 2, 4, 2, tied ? 20 : -20, 16};
    for (int i = 0; i < 7; i++)
        cr_assert_eq(get_i32(b + 4 * i), want[i], "header int %d: %d, expected %d", i, get_i32(b + 4 * i), want[i]);
    const size_t hs = 8, freq = 16 * hs / 2;
    cr_assert_eq(n, 28 + 4 * (m.n_params + 2 * freq), "file size %zu", n);
    cr_assert_eq(n, export_llama2c_model_bytes(c));
    // The payload: the parameters up to the final norm in order, the tables, the head if untied.
    size_t s[LP_COUNT];
    llama_param_sizes(c, s);
    const unsigned char *p = b + 28;
    for (int i = LP_TOK_EMB; i <= LP_FINAL_NORM; i++) {
        cr_assert(!memcmp(p, m.p.t[i], s[i] * 4), "tensor %s differs", llama_param_name(i));
        p += s[i] * 4;
    }
    // freq_cis_real/imag (seq_len, hs/2): cos/sin(pos * 10000^(-2i/hs)) rounded to float; the
    // double computation may differ by a double ulp before rounding, so one float ulp (2^-24
    // for |v| < 1) is allowed.
    for (int k = 0; k < 2; k++)
        for (size_t t = 0; t < 16; t++)
            for (size_t i = 0; i < hs / 2; i++) {
                float got;
                memcpy(&got, p + 4 * ((size_t)k * freq + t * hs / 2 + i), 4);
                const double a = (double)t * pow(10000.0, -(double)(2 * i) / hs);
                const double want_v = k == 0 ? cos(a) : sin(a);
                cr_assert_leq(fabs(got - want_v), 0x1p-24 + 0x1p-25, "freq_cis_%s[%zu][%zu] = %.9g, expected %.9g",
                              k ? "imag" : "real", t, i, got, want_v);
            }
    p += 2 * freq * 4;
    if (!tied) {
        cr_assert(!memcmp(p, m.p.t[LP_LM_HEAD], s[LP_LM_HEAD] * 4), "wcls differs");
        p += s[LP_LM_HEAD] * 4;
    }
    cr_assert_eq((size_t)(p - b), n);
    free(b);
    // Written through a temporary name, which is gone.
    cr_assert_neq(access(tmp_path("bytes.bin.tmp"), F_OK), 0, "the temporary file was left behind");
    llama_free(&m);
}

Test(export, header_and_payload_tied) { check_bytes(true); }
Test(export, header_and_payload_untied) { check_bytes(false); }

// --- refusals

static void check_refused(float theta, float eps, const char *word) {
    llama_config c = small_config(true);
    c.rope_theta = theta, c.norm_eps = eps;
    llama_model m;
    char msg[256] = "";
    cr_assert_eq(llama_init(&m, &c, LLAMA_RECOMPUTE_NONE, msg, sizeof msg), LLAMA_OK, "%s", msg);
    llama_init_weights(&m, 1);
    const char *path = tmp_path("refused.bin");
    spit(path, "previous");
    cr_assert_eq(export_llama2c_check(&c, msg, sizeof msg), EXPORT_EUNSUPPORTED);
    msg[0] = 0;
    cr_assert_eq(export_llama2c_model(path, &m, msg, sizeof msg), EXPORT_EUNSUPPORTED);
    cr_assert(strstr(msg, word), "message '%s' should name %s", msg, word);
    size_t n;
    unsigned char *b = slurp(path, &n);
    cr_assert(n == 8 && !memcmp(b, "previous", 8), "the existing file was changed");
    free(b);
    llama_free(&m);
}

Test(export, refuses_rope_theta) { check_refused(500000.0f, 1e-5f, "rope_theta"); }
Test(export, refuses_norm_eps) { check_refused(10000.0f, 1e-6f, "norm_eps"); }

Test(export, accepts_run_c_constants) {
    const llama_config c = small_config(false);
    cr_assert_eq(export_llama2c_check(&c, NULL, 0), EXPORT_OK);
}

// --- tokenizer

Test(export, tokenizer_char_bytes) {
    uint32_t cp[] = {'\n', ' ', 'a', 0xE9, 0x20AC, 0x1F600};
    const data_vocab v = {DATA_VOCAB_CHAR, 6, cp};
    char msg[256];
    const char *path = tmp_path("tok.bin");
    cr_assert_eq(export_llama2c_tokenizer(path, &v, msg, sizeof msg), EXPORT_OK, "%s", msg);
    // Expected, written out by hand: max_token_length 4, then (score 0.0f, len, UTF-8) each.
    static const char *utf8[] = {"\n", " ", "a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    unsigned char want[4 + 6 * 8 + 16], *p = want;
    const int32_t max_len = 4;
    memcpy(p, &max_len, 4), p += 4;
    for (int i = 0; i < 6; i++) {
        const float zero = 0.0f;
        const int32_t len = (int32_t)strlen(utf8[i]);
        memcpy(p, &zero, 4), p += 4;
        memcpy(p, &len, 4), p += 4;
        memcpy(p, utf8[i], (size_t)len), p += len;
    }
    size_t n;
    unsigned char *b = slurp(path, &n);
    cr_assert_eq(n, (size_t)(p - want), "tokenizer of %zu bytes, expected %zu", n, (size_t)(p - want));
    for (size_t i = 0; i < n; i++) cr_assert_eq(b[i], want[i], "byte %zu: 0x%02x, expected 0x%02x", i, b[i], want[i]);
    free(b);
}

Test(export, tokenizer_byte_vocab) {
    const data_vocab v = {DATA_VOCAB_BYTE, 256, NULL};
    char msg[256];
    const char *path = tmp_path("tok_bytes.bin");
    cr_assert_eq(export_llama2c_tokenizer(path, &v, msg, sizeof msg), EXPORT_OK, "%s", msg);
    size_t n;
    unsigned char *b = slurp(path, &n);
    cr_assert_eq(n, 4 + 256 * 9);
    cr_assert_eq(get_i32(b), 1, "max_token_length");
    for (int i = 0; i < 256; i++) {
        const unsigned char *e = b + 4 + 9 * i;
        float score;
        memcpy(&score, e, 4);
        cr_assert(score == 0.0f && get_i32(e + 4) == 1 && e[8] == i, "entry %d", i);  // raw bytes, 0x80.. too
    }
    free(b);
}

Test(export, tokenizer_refuses_token_ids) {
    const data_vocab v = {DATA_VOCAB_TOKENS, 50257, NULL};
    char msg[256] = "";
    const char *path = tmp_path("tok_ids.bin");
    cr_assert_eq(export_llama2c_tokenizer(path, &v, msg, sizeof msg), EXPORT_EUNSUPPORTED);
    cr_assert(strstr(msg, "token-id"), "message: %s", msg);
    cr_assert_neq(access(path, F_OK), 0, "a file was written");
    cr_assert_neq(access(tmp_path("tok_ids.bin.tmp"), F_OK), 0, "a temporary file was written");
}

Test(export, tokenizer_refuses_bad_code_point) {
    uint32_t cp[] = {'a', 0x110000};  // beyond Unicode
    const data_vocab v = {DATA_VOCAB_CHAR, 2, cp};
    char msg[256] = "";
    cr_assert_eq(export_llama2c_tokenizer(tmp_path("bad.bin"), &v, msg, sizeof msg), EXPORT_EINVAL);
    cr_assert(strstr(msg, "entry 1"), "message: %s", msg);
}

Test(export, unwritable_path) {
    llama_model m;
    make_model(&m, true, 3);
    char msg[256] = "";
    cr_assert_eq(export_llama2c_model("/nonexistent_dir_fplab/x.bin", &m, msg, sizeof msg), EXPORT_EIO);
    cr_assert(strstr(msg, "/nonexistent_dir_fplab/x.bin"), "message: %s", msg);
    llama_free(&m);
}
