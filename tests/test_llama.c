// test_llama.c: the Llama model (trainer/llama.c): analytic gradients against central finite
// differences of an independent double-precision forward written here; the float32 forward
// against that reference; causality; gradient accumulation; block recompute; the KV-cache cast
// site (attn.kv): what attention reads is the formats library's rounding of the keys and values.
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/scale.h"
#include "kernels/llama_ops.h"
#include "tests/test_util.h"
#include "trainer/llama.h"

static void setup(void) { llama_ops_threads(0); }
TestSuite(llama, .init = setup);

// --- an independent double-precision forward (naive loops, straight from the equations)

typedef struct {
    const llama_config *c;
    const double *p;  // parameters in llama's buffer order
    size_t off[LP_COUNT];
    // Optional, (L, 2, B*T, kvd) each: kv_out receives each layer's keys (after RoPE) and values;
    // then kv_off is added to them (a frozen rounding error: the straight-through KV cast).
    double *kv_out;
    const double *kv_off;
} ref_model;

static void ref_init(ref_model *r, const llama_config *c, const double *p) {
    size_t s[LP_COUNT], o = 0;
    llama_param_sizes(c, s);
    for (int i = 0; i < LP_COUNT; i++) r->off[i] = o, o += s[i];
    r->c = c, r->p = p, r->kv_out = NULL, r->kv_off = NULL;
}

static const double *P(const ref_model *r, llama_param_id id) { return r->p + r->off[id]; }

static void ref_rmsnorm(double *out, const double *x, const double *w, int C, double eps) {
    double ss = 0;
    for (int i = 0; i < C; i++) ss += x[i] * x[i];
    const double rs = 1.0 / sqrt(ss / C + eps);
    for (int i = 0; i < C; i++) out[i] = x[i] * rs * w[i];
}

static void ref_linear(double *y, const double *x, const double *W, int in, int out) {
    for (int o = 0; o < out; o++) {
        double s = 0;
        for (int i = 0; i < in; i++) s += W[(size_t)o * in + i] * x[i];
        y[o] = s;
    }
}

static void ref_rope(double *x, int nheads, int hs, int pos, double theta) {
    for (int h = 0; h < nheads; h++)
        for (int i = 0; i < hs / 2; i++) {
            const double a = pos * pow(theta, -2.0 * i / hs), c = cos(a), s = sin(a);
            double *p = x + h * hs + 2 * i;
            const double x0 = p[0], x1 = p[1];
            p[0] = x0 * c - x1 * s, p[1] = x0 * s + x1 * c;
        }
}

// Mean cross-entropy of one sequence batch (B, T) over targets >= 0; logits (B*T, V) if non-NULL.
static double ref_loss(const ref_model *r, const int *tok, const int *tgt, int B, int T, double *logits) {
    const llama_config *c = r->c;
    const int C = c->dim, NH = c->n_heads, NKV = c->n_kv_heads, hs = C / NH, H = c->hidden_dim,
              V = c->vocab_size, L = c->n_layers, kvd = NKV * hs;
    const int N = B * T;
    double *x = calloc((size_t)N * C, sizeof *x), *h = malloc(C * sizeof *h);
    double *q = malloc((size_t)N * C * sizeof *q), *k = malloc((size_t)N * kvd * sizeof *k),
           *v = malloc((size_t)N * kvd * sizeof *v), *y = malloc((size_t)N * C * sizeof *y);
    double *g = malloc(H * sizeof *g), *u = malloc(H * sizeof *u), *o = malloc(C * sizeof *o),
           *sc = malloc(T * sizeof *sc), *lg = malloc(V * sizeof *lg);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < C; i++) x[(size_t)n * C + i] = P(r, LP_TOK_EMB)[(size_t)tok[n] * C + i];
    for (int l = 0; l < L; l++) {
        const double *wq = P(r, LP_WQ) + (size_t)l * C * C, *wk = P(r, LP_WK) + (size_t)l * kvd * C,
                     *wv = P(r, LP_WV) + (size_t)l * kvd * C, *wo = P(r, LP_WO) + (size_t)l * C * C,
                     *wg = P(r, LP_W_GATE) + (size_t)l * H * C, *wd = P(r, LP_W_DOWN) + (size_t)l * C * H,
                     *wu = P(r, LP_W_UP) + (size_t)l * H * C;
        for (int n = 0; n < N; n++) {
            ref_rmsnorm(h, x + (size_t)n * C, P(r, LP_ATTN_NORM) + l * C, C, c->norm_eps);
            ref_linear(q + (size_t)n * C, h, wq, C, C);
            ref_linear(k + (size_t)n * kvd, h, wk, C, kvd);
            ref_linear(v + (size_t)n * kvd, h, wv, C, kvd);
            ref_rope(q + (size_t)n * C, NH, hs, n % T, c->rope_theta);
            ref_rope(k + (size_t)n * kvd, NKV, hs, n % T, c->rope_theta);
        }
        const size_t nkv = (size_t)N * kvd;
        for (size_t i = 0; i < nkv && (r->kv_out || r->kv_off); i++) {
            double *kv[2] = {k + i, v + i};
            for (int j = 0; j < 2; j++) {
                const size_t at = ((size_t)l * 2 + (size_t)j) * nkv + i;
                if (r->kv_out) r->kv_out[at] = *kv[j];
                if (r->kv_off) *kv[j] += r->kv_off[at];
            }
        }
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int hh = 0; hh < NH; hh++) {
                    const int kh = hh / (NH / NKV);
                    const double *qt = q + (size_t)(b * T + t) * C + hh * hs;
                    double mx = -INFINITY, sum = 0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double s = 0;
                        for (int d = 0; d < hs; d++) s += qt[d] * k[(size_t)(b * T + t2) * kvd + kh * hs + d];
                        sc[t2] = s / sqrt(hs);
                        mx = fmax(mx, sc[t2]);
                    }
                    for (int t2 = 0; t2 <= t; t2++) sum += (sc[t2] = exp(sc[t2] - mx));
                    for (int d = 0; d < hs; d++) {
                        double s = 0;
                        for (int t2 = 0; t2 <= t; t2++) s += sc[t2] / sum * v[(size_t)(b * T + t2) * kvd + kh * hs + d];
                        y[(size_t)(b * T + t) * C + hh * hs + d] = s;
                    }
                }
        for (int n = 0; n < N; n++) {
            double *xn = x + (size_t)n * C;
            ref_linear(o, y + (size_t)n * C, wo, C, C);
            for (int i = 0; i < C; i++) xn[i] += o[i];
            ref_rmsnorm(h, xn, P(r, LP_MLP_NORM) + l * C, C, c->norm_eps);
            ref_linear(g, h, wg, C, H);
            ref_linear(u, h, wu, C, H);
            for (int i = 0; i < H; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            ref_linear(o, g, wd, H, C);
            for (int i = 0; i < C; i++) xn[i] += o[i];
        }
    }
    double loss = 0;
    int count = 0;
    const double *head = c->tied ? P(r, LP_TOK_EMB) : P(r, LP_LM_HEAD);
    for (int n = 0; n < N; n++) {
        ref_rmsnorm(h, x + (size_t)n * C, P(r, LP_FINAL_NORM), C, c->norm_eps);
        ref_linear(lg, h, head, C, V);
        if (logits) memcpy(logits + (size_t)n * V, lg, V * sizeof *lg);
        if (tgt[n] < 0) continue;
        double mx = -INFINITY, s = 0;
        for (int i = 0; i < V; i++) mx = fmax(mx, lg[i]);
        for (int i = 0; i < V; i++) s += exp(lg[i] - mx);
        loss += mx + log(s) - lg[tgt[n]];
        count++;
    }
    free(x), free(h), free(q), free(k), free(v), free(y), free(g), free(u), free(o), free(sc), free(lg);
    return loss / count;
}

// --- fixtures

static llama_config tiny_config(bool tied) {
    llama_config c;
    cr_assert_eq(llama_config_named(&c, "tiny"), LLAMA_OK);
    c.vocab_size = 11;
    c.tied = tied;
    return c;
}

// Parameters large enough that attention is far from uniform and every path carries gradient:
// matrices uniform in +-0.5, norm gains in [0.5, 1.5].
static void fill_params(llama_model *m, uint64_t seed) {
    tu_rng r = {fmt_rng_make_key(seed, 7), 0};
    size_t s[LP_COUNT];
    llama_param_sizes(&m->cfg, s);
    for (int i = 0; i < LP_COUNT; i++)
        for (size_t j = 0; j < s[i]; j++)
            m->p.t[i][j] = llama_param_is_matrix(i) ? (float)(tu_rng_unif(&r) - 0.5)
                                                    : (float)(0.5 + tu_rng_unif(&r));
}

static void fill_tokens(int *tok, int *tgt, int n, int V, uint64_t seed) {
    tu_rng r = {fmt_rng_make_key(seed, 8), 0};
    for (int i = 0; i < n; i++) tok[i] = tu_rng_int(&r, 0, V - 1), tgt[i] = tu_rng_int(&r, 0, V - 1);
}

// Tolerance of the float32 forward and backward against the exact function: every quantity is
// a chain of at most ~20 dependent ops (2 layers x ~8 + head) each a sum of at most K = 64
// terms (max of C, H, N, T here), so gamma_K per op with u = 2^-24 compounds to about
// 20 * 64 * 2^-24 = 7.6e-5 of the magnitudes involved; we allow 1e-4 of the tensor's largest
// gradient (norm-wise, as gradient checks are stated).
static const double GRAD_TOL = 1e-4;

// m's gradients against central differences of r's loss in each parameter of p (r's
// parameters, each restored after its step), within GRAD_TOL of each tensor's largest gradient.
static void expect_grads_are_fd(const llama_model *m, const ref_model *r, double *p, const int *tok,
                                const int *tgt, int B, int T) {
    size_t sizes[LP_COUNT];
    llama_param_sizes(&m->cfg, sizes);
    const double h = 1e-6;  // truncation ~h^2 |L'''| ~ 1e-12, rounding ~1e-16 / h ~ 1e-10
    for (int t = 0; t < LP_COUNT; t++) {
        if (!sizes[t]) continue;
        double *fd = malloc(sizes[t] * sizeof *fd), gmax = 0, emax = 0;
        size_t worst = 0;
        for (size_t j = 0; j < sizes[t]; j++) {
            double *x = p + r->off[t] + j, x0 = *x;
            *x = x0 + h;
            const double lp = ref_loss(r, tok, tgt, B, T, NULL);
            *x = x0 - h;
            const double lm = ref_loss(r, tok, tgt, B, T, NULL);
            *x = x0;
            fd[j] = (lp - lm) / (2 * h);
            gmax = fmax(gmax, fabs(fd[j]));
        }
        for (size_t j = 0; j < sizes[t]; j++) {
            const double e = fabs(m->g.t[t][j] - fd[j]);
            if (e > emax) emax = e, worst = j;
        }
        cr_assert(gmax > 0, "%s: zero gradient everywhere (the check would be vacuous)", llama_param_name(t));
        cr_assert(emax <= GRAD_TOL * gmax, "%s[%zu]: analytic %.9g, finite difference %.9g (max |g| %.3g)",
                  llama_param_name(t), worst, m->g.t[t][worst], fd[worst], gmax);
        free(fd);
    }
}

static void gradcheck(bool tied, llama_recompute rc) {
    const uint64_t seed = tu_seed("llama", "gradcheck", 20261122);
    llama_config c = tiny_config(tied);
    llama_model m;
    char msg[256];
    cr_assert_eq(llama_init(&m, &c, rc, msg, sizeof msg), LLAMA_OK, "%s", msg);
    fill_params(&m, seed);
    enum { B = 2, T = 8 };
    int tok[B * T], tgt[B * T];
    fill_tokens(tok, tgt, B * T, c.vocab_size, seed);
    tgt[3] = -1;  // an ignored position
    const float loss = llama_forward(&m, tok, tgt, B, T);
    llama_zero_grad(&m);
    llama_backward(&m, tok, tgt, 1.0f);

    double *p = malloc(m.n_params * sizeof *p);
    for (size_t i = 0; i < m.n_params; i++) p[i] = m.params[i];
    ref_model r;
    ref_init(&r, &c, p);
    const double ref = ref_loss(&r, tok, tgt, B, T, NULL);
    cr_assert(fabs(loss - ref) <= GRAD_TOL * ref, "loss %.9g, double reference %.9g", loss, ref);
    expect_grads_are_fd(&m, &r, p, tok, tgt, B, T);
    free(p);
    llama_free(&m);
}

Test(llama, gradcheck_tied) { gradcheck(true, LLAMA_RECOMPUTE_NONE); }
Test(llama, gradcheck_untied) { gradcheck(false, LLAMA_RECOMPUTE_NONE); }
Test(llama, gradcheck_recompute) { gradcheck(false, LLAMA_RECOMPUTE_BLOCK); }

Test(llama, logits_match_double_reference) {
    llama_config c = tiny_config(false);
    llama_model m;
    cr_assert_eq(llama_init(&m, &c, LLAMA_RECOMPUTE_NONE, NULL, 0), LLAMA_OK);
    fill_params(&m, 5);
    enum { B = 3, T = 8 };
    int tok[B * T], tgt[B * T];
    fill_tokens(tok, tgt, B * T, c.vocab_size, 5);
    llama_forward(&m, tok, NULL, B, T);
    double *p = malloc(m.n_params * sizeof *p), ref[B * T * 11], lmax = 0;
    for (size_t i = 0; i < m.n_params; i++) p[i] = m.params[i];
    ref_model r;
    ref_init(&r, &c, p);
    ref_loss(&r, tok, tgt, B, T, ref);
    for (int i = 0; i < B * T * c.vocab_size; i++) lmax = fmax(lmax, fabs(ref[i]));
    for (int i = 0; i < B * T * c.vocab_size; i++)
        cr_assert(fabs(llama_logits(&m)[i] - ref[i]) <= GRAD_TOL * lmax, "logit %d: %.9g vs %.9g", i,
                  llama_logits(&m)[i], ref[i]);
    free(p);
    llama_free(&m);
}

// Changing the tokens after position t leaves the logits at positions <= t bitwise unchanged.
Test(llama, causal) {
    llama_config c = tiny_config(true);
    llama_model m;
    cr_assert_eq(llama_init(&m, &c, LLAMA_RECOMPUTE_NONE, NULL, 0), LLAMA_OK);
    fill_params(&m, 9);
    enum { B = 1, T = 8 };
    const int V = c.vocab_size;
    int tok[T], tgt[T];
    fill_tokens(tok, tgt, T, V, 9);
    llama_forward(&m, tok, NULL, B, T);
    float before[T * 11];
    memcpy(before, llama_logits(&m), sizeof before);
    for (int t = 0; t < T - 1; t++) {
        int alt[T];
        memcpy(alt, tok, sizeof alt);
        for (int u = t + 1; u < T; u++) alt[u] = (tok[u] + 1 + u) % V;
        llama_forward(&m, alt, NULL, B, T);
        const float *after = llama_logits(&m);
        for (int i = 0; i <= t * V + V - 1; i++)
            cr_assert(tu_samef(before[i], after[i]), "t=%d: logit %d changed (%a -> %a)", t, i, before[i], after[i]);
        bool changed = false;  // and the future does see the change
        for (int i = (t + 1) * V; i < T * V; i++) changed |= !tu_samef(before[i], after[i]);
        cr_assert(changed, "t=%d: changing later tokens changed no later logit", t);
    }
    llama_free(&m);
}

static void grads_of(llama_model *m, const int *tok, const int *tgt, int B, int T, int micro, float *out) {
    llama_zero_grad(m);
    const int b = B / micro;
    for (int k = 0; k < micro; k++) {
        llama_forward(m, tok + k * b * T, tgt + k * b * T, b, T);
        llama_backward(m, tok + k * b * T, tgt + k * b * T, 1.0f / (float)micro);
    }
    memcpy(out, m->grads, m->n_params * sizeof *out);
}

// 4 micro-batches of B, each loss divided by 4, equal one batch of 4B: the two differ only in
// the order of the additions over rows, within GRAD_TOL of each tensor's largest gradient.
Test(llama, accumulation_matches_big_batch) {
    llama_config c = tiny_config(false);
    llama_model m;
    cr_assert_eq(llama_init(&m, &c, LLAMA_RECOMPUTE_NONE, NULL, 0), LLAMA_OK);
    fill_params(&m, 11);
    enum { B = 8, T = 8 };
    int tok[B * T], tgt[B * T];
    fill_tokens(tok, tgt, B * T, c.vocab_size, 11);
    float *g1 = malloc(m.n_params * sizeof *g1), *g4 = malloc(m.n_params * sizeof *g4);
    grads_of(&m, tok, tgt, B, T, 1, g1);
    grads_of(&m, tok, tgt, B, T, 4, g4);
    size_t s[LP_COUNT], off = 0;
    llama_param_sizes(&c, s);
    bool differ = false;
    for (int t = 0; t < LP_COUNT; t++, off += s[t - 1]) {
        double gmax = 0;
        for (size_t j = 0; j < s[t]; j++) gmax = fmax(gmax, fabs(g1[off + j]));
        for (size_t j = 0; j < s[t]; j++) {
            cr_assert(fabs(g1[off + j] - g4[off + j]) <= GRAD_TOL * gmax, "%s[%zu]: %.9g vs %.9g",
                      llama_param_name(t), j, g1[off + j], g4[off + j]);
            differ |= g1[off + j] != g4[off + j];
        }
    }
    cr_log_info("accumulation: gradients %s bitwise", differ ? "differ (within tolerance)" : "agree");
    free(g1), free(g4);
    llama_free(&m);
}

// Recomputing each block in backward gives bitwise the gradients of storing activations.
Test(llama, recompute_is_bitwise) {
    llama_config c = tiny_config(true);
    c.n_layers = 3;
    llama_model a, b;
    cr_assert_eq(llama_init(&a, &c, LLAMA_RECOMPUTE_NONE, NULL, 0), LLAMA_OK);
    cr_assert_eq(llama_init(&b, &c, LLAMA_RECOMPUTE_BLOCK, NULL, 0), LLAMA_OK);
    fill_params(&a, 13);
    memcpy(b.params, a.params, a.n_params * sizeof *a.params);
    enum { B = 4, T = 8 };
    int tok[B * T], tgt[B * T];
    fill_tokens(tok, tgt, B * T, c.vocab_size, 13);
    float *ga = malloc(a.n_params * sizeof *ga), *gb = malloc(a.n_params * sizeof *gb);
    grads_of(&a, tok, tgt, B, T, 2, ga);
    grads_of(&b, tok, tgt, B, T, 2, gb);
    cr_assert(memcmp(ga, gb, a.n_params * sizeof *ga) == 0, "recompute changed the gradients");
    cr_assert(llama_acts_bytes(&b) < llama_acts_bytes(&a), "recompute saved no memory (%zu vs %zu)",
              llama_acts_bytes(&b), llama_acts_bytes(&a));
    free(ga), free(gb);
    llama_free(&a), llama_free(&b);
}

Test(llama, bad_input) {
    llama_config c = tiny_config(true);
    char msg[256] = "";
    llama_model m;
    c.n_kv_heads = 3;
    cr_assert_eq(llama_init(&m, &c, LLAMA_RECOMPUTE_NONE, msg, sizeof msg), LLAMA_EINVAL);
    cr_assert(strstr(msg, "n_kv_heads"), "%s", msg);
    c = tiny_config(true);
    cr_assert_eq(llama_init(&m, &c, LLAMA_RECOMPUTE_NONE, msg, sizeof msg), LLAMA_OK);
    int tok[4] = {0, 1, 11, 2}, tgt[4] = {0, 0, 0, 0};
    cr_assert(isnan(llama_forward(&m, tok, tgt, 1, 4)), "token 11 of a vocabulary of 11 accepted");
    tok[2] = 2;
    cr_assert(isnan(llama_forward(&m, tok, tgt, 1, c.seq_len + 1)), "T > seq_len accepted");
    cr_assert(!isnan(llama_forward(&m, tok, tgt, 1, 4)));
    cr_assert_eq(llama_config_named(&c, "nope"), LLAMA_EINVAL);
    llama_free(&m);
}

// --- the KV-cache site

static ac_policy kv_policy(const char *format_recipe) {
    char text[128], msg[256];
    snprintf(text, sizeof text, "name kv\nsite attn.kv %s\n", format_recipe);
    ac_policy p;
    cr_assert_eq(ac_policy_parse(&p, text, "test", msg, sizeof msg), AC_OK, "%s", msg);
    return p;
}

// The keys and values layer 0's attention reads under an attn.kv policy are exactly the
// formats library's quantization (fmt_quantize_f32, the rule's recipe along each token's kvd
// features) of those of the float32 model: layer 0's input does not depend on the cast. Later
// layers see the rounding (their keys differ from float32's), so do the logits; the site counts
// the keys and values of every layer.
static void kv_is_the_rounding(const char *format_recipe) {
    llama_config c = tiny_config(true);
    llama_model m;
    cr_assert_eq(llama_init(&m, &c, LLAMA_RECOMPUTE_NONE, NULL, 0), LLAMA_OK);
    fill_params(&m, 17);
    enum { B = 2, T = 8 };
    const size_t N = B * T, kvd = (size_t)c.n_kv_heads * (c.dim / c.n_heads);
    int tok[B * T], tgt[B * T];
    fill_tokens(tok, tgt, B * T, c.vocab_size, 17);
    const float *k, *v;
    cr_assert(!llama_kv(&m, 0, &k, &v), "keys before any forward");
    llama_forward(&m, tok, NULL, B, T);
    float *k0 = malloc(N * kvd * sizeof *k0), *v0 = malloc(N * kvd * sizeof *v0), *k1 = malloc(N * kvd * sizeof *k1);
    float *logits = malloc(N * c.vocab_size * sizeof *logits);
    cr_assert(llama_kv(&m, 0, &k, &v));
    memcpy(k0, k, N * kvd * sizeof *k0), memcpy(v0, v, N * kvd * sizeof *v0);
    cr_assert(llama_kv(&m, 1, &k, &v) && !llama_kv(&m, 2, &k, &v) && !llama_kv(&m, -1, &k, &v));
    memcpy(k1, k, N * kvd * sizeof *k1);
    memcpy(logits, llama_logits(&m), N * c.vocab_size * sizeof *logits);

    const ac_policy p = kv_policy(format_recipe);
    const ac_rule *r = &p.site[AC_KV];
    ac_ctx ac;
    char msg[256];
    cr_assert_eq(ac_init(&ac, &p, c.n_layers, 1, AC_TEL_SITES, llama_max_operand(&c, B, T), msg, sizeof msg), AC_OK);
    ac_begin_step(&ac, 0);
    m.ac = &ac;
    llama_forward(&m, tok, NULL, B, T);
    cr_assert(fmt_quantize_f32(&r->fmt, &r->scaling, k0, k0, N, kvd, &r->round, NULL, NULL) == FMT_OK);
    cr_assert(fmt_quantize_f32(&r->fmt, &r->scaling, v0, v0, N, kvd, &r->round, NULL, NULL) == FMT_OK);
    cr_assert(llama_kv(&m, 0, &k, &v));
    int changed = 0;
    for (size_t i = 0; i < N * kvd; i++) {
        cr_assert(tu_samef(k[i], k0[i]) && tu_samef(v[i], v0[i]), "%s: element %zu: k %a v %a, rounded %a %a",
                  format_recipe, i, k[i], v[i], k0[i], v0[i]);
        changed += k[i] != k0[i];
    }
    cr_assert(llama_kv(&m, 1, &k, &v));
    for (size_t i = 0; i < N * kvd; i++) changed += k[i] != k1[i];
    cr_assert(changed > 0, "%s: layer 1's keys did not see layer 0's rounding", format_recipe);
    bool differ = false;
    for (size_t i = 0; i < N * (size_t)c.vocab_size; i++) differ |= llama_logits(&m)[i] != logits[i];
    cr_assert(differ, "%s changed no logit", format_recipe);
    uint64_t n = 0;
    for (int l = 0; l <= c.n_layers; l++) n += ac.tel[(size_t)AC_KV * (size_t)(c.n_layers + 1) + (size_t)l].n;
    cr_assert_eq(n, 2 * (uint64_t)c.n_layers * N * kvd, "attn.kv counted %llu values", (unsigned long long)n);
    free(k0), free(v0), free(k1), free(logits);
    ac_free(&ac);
    llama_free(&m);
}

Test(llama, kv_site_e4m3) { kv_is_the_rounding("e4m3"); }
Test(llama, kv_site_e4m3_per_token) { kv_is_the_rounding("e4m3 row"); }
Test(llama, kv_site_e2m1_mx) { kv_is_the_rounding("e2m1 block:4:e8m0"); }  // one scale per token and head (hs 4)

// Training through the KV cast: backward reads the rounded keys and values and passes the
// gradient straight through the rounding, as at every activation site. Checked exactly: the
// gradients are the finite differences of the double reference whose keys and values carry
// the rounding errors of this point, frozen (offsets set layer by layer so that the reference's
// keys and values equal the float32 model's rounded ones), within the gradcheck's GRAD_TOL. And
// recomputing each block casts again, identically: the gradients are bitwise the same.
Test(llama, kv_site_is_straight_through) {
    llama_config c = tiny_config(false);
    enum { B = 2, T = 8 };
    int tok[B * T], tgt[B * T];
    fill_tokens(tok, tgt, B * T, c.vocab_size, 19);
    const ac_policy pol = kv_policy("e4m3");
    llama_model m[2];
    ac_ctx ac[2];
    for (int rc = 0; rc < 2; rc++) {
        cr_assert_eq(llama_init(&m[rc], &c, rc ? LLAMA_RECOMPUTE_BLOCK : LLAMA_RECOMPUTE_NONE, NULL, 0), LLAMA_OK);
        fill_params(&m[rc], 19);
        cr_assert_eq(ac_init(&ac[rc], &pol, c.n_layers, 1, AC_TEL_OFF, llama_max_operand(&c, B, T), NULL, 0), AC_OK);
        ac_begin_step(&ac[rc], 0);
        m[rc].ac = &ac[rc];
        llama_zero_grad(&m[rc]);
        llama_forward(&m[rc], tok, tgt, B, T);
        llama_backward(&m[rc], tok, tgt, 1.0f);
    }
    cr_assert(!memcmp(m[0].grads, m[1].grads, m[0].n_params * sizeof(float)), "recompute changed the gradients");

    const size_t nkv = (size_t)B * T * (size_t)c.n_kv_heads * (size_t)(c.dim / c.n_heads);
    double *p = malloc(m[0].n_params * sizeof *p), *out = malloc(2 * c.n_layers * nkv * sizeof *out);
    double *off = calloc(2 * c.n_layers * nkv, sizeof *off);
    for (size_t i = 0; i < m[0].n_params; i++) p[i] = m[0].params[i];
    ref_model r;
    ref_init(&r, &c, p);
    r.kv_out = out, r.kv_off = off;
    for (int l = 0; l < c.n_layers; l++) {  // layer l's keys depend on the offsets of layers < l
        ref_loss(&r, tok, tgt, B, T, NULL);
        const float *kv[2];
        cr_assert(llama_kv(&m[0], l, &kv[0], &kv[1]));
        for (int j = 0; j < 2; j++)
            for (size_t i = 0; i < nkv; i++) {
                const size_t at = ((size_t)l * 2 + (size_t)j) * nkv + i;
                off[at] = kv[j][i] - out[at];
            }
    }
    r.kv_out = NULL;
    double emax = 0;
    for (size_t i = 0; i < 2 * c.n_layers * nkv; i++) emax = fmax(emax, fabs(off[i]));
    cr_assert(emax > 0, "e4m3 rounded no key or value");
    expect_grads_are_fd(&m[0], &r, p, tok, tgt, B, T);
    free(p), free(out), free(off);
    for (int rc = 0; rc < 2; rc++) ac_free(&ac[rc]), llama_free(&m[rc]);
}

// --- emulated accumulators per matmul

// Gradients over two micro-batches (so wgrad must add to what the first left) and the last loss
// of an untied tiny model under the policy (text, or a preset's name with load), from fixed
// parameters and tokens; hook (NULL: none) observes the casts.
// keep false: dgrad casts W again (m.w_keep_none); *kept (optional): the dgrad products that took
// the forward's W cast.
static float grads_under_keep(const char *text, bool load, ac_cast_hook hook, bool keep, long long *kept,
                              float *grads) {
    llama_config c = tiny_config(false);
    llama_model m;
    cr_assert_eq(llama_init(&m, &c, LLAMA_RECOMPUTE_NONE, NULL, 0), LLAMA_OK);
    m.w_keep_none = !keep;
    fill_params(&m, 23);
    enum { B = 8, T = 8 };
    int tok[B * T], tgt[B * T];
    fill_tokens(tok, tgt, B * T, c.vocab_size, 23);
    ac_policy pol;
    char msg[512];
    cr_assert_eq(load ? ac_policy_load(&pol, text, msg, sizeof msg) : ac_policy_parse(&pol, text, "test", msg, sizeof msg),
                 AC_OK, "%s", msg);
    ac_ctx ac;
    cr_assert_eq(ac_init(&ac, &pol, c.n_layers, 1, AC_TEL_OFF, llama_max_operand(&c, B / 2, T), msg, sizeof msg),
                 AC_OK, "%s", msg);
    ac.hook = hook;
    ac_begin_step(&ac, 0);
    m.ac = &ac;
    llama_zero_grad(&m);
    float loss = 0;
    for (int k = 0; k < 2; k++) {
        ac_begin_micro(&ac, k);
        loss = llama_forward(&m, tok + k * (B / 2) * T, tgt + k * (B / 2) * T, B / 2, T);
        llama_backward(&m, tok + k * (B / 2) * T, tgt + k * (B / 2) * T, 0.5f);
    }
    memcpy(grads, m.grads, m.n_params * sizeof *grads);
    if (kept) *kept = m.w_casts_kept;
    ac_free(&ac);
    llama_free(&m);
    return loss;
}

// The parameters of the untied tiny model (grads_under_keep's gradients).
static size_t untied_params(void) {
    const llama_config c = tiny_config(false);
    size_t s[LP_COUNT];
    return llama_param_sizes(&c, s);
}

static float grads_under_with(const char *text, bool load, ac_cast_hook hook, float *grads) {
    return grads_under_keep(text, load, hook, true, NULL, grads);
}

static float grads_under(const char *text, float *grads) { return grads_under_with(text, false, NULL, grads); }

static void ignore_cast(void *user, ac_site s, int layer, const float *x, const float *out, size_t rows, size_t cols,
                        bool k_rows, bool count) {
    (void)user, (void)s, (void)layer, (void)x, (void)out, (void)rows, (void)cols, (void)k_rows, (void)count;
}

// k and v's wgrad take q's cast of their shared input (and up's gate's), and wgrad takes
// dgrad's cast of the output gradient where the recipe makes the two orientations the same
// bits; a cast hook turns both off, as every cast must then happen. Both ways give the same
// gradients bit for bit: per-block scales (rotated first: nvfp4), per-tensor scales from an
// amax history (which dgrad's cast moves), from the current amax, none (fp16 with a loss
// scale), and stochastic rounding (whose draws depend on the orientation).
Test(llama, wgrad_shares_the_cast_of_a_shared_input) {
    static const char *const presets[] = {"nvfp4", "mxfp8", "fp8-delayed", "fp8-current", "bf16-amp", "fp16-amp",
                                          "name t\nsite *.in bf16\nsite *.w bf16\nsite *.grad bf16 sr\n"};
    const size_t n = untied_params();
    float *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        const bool load = !strchr(presets[i], '\n');
        const float l0 = grads_under_with(presets[i], load, ignore_cast, g0),
                    l1 = grads_under_with(presets[i], load, NULL, g1);
        cr_assert_eq(l0, l1, "%s: loss", presets[i]);
        cr_assert(memcmp(g0, g1, n * sizeof *g0) == 0, "%s: the shared cast changed the gradients", presets[i]);
    }
    free(g0), free(g1);
}

// dgrad multiplies by the forward's cast of W, kept in m.w_keep, where W's rule casts alike in
// both orientations (tensor scales, NVFP4's 16x16 tiles, no scales) and by a fresh cast along OC
// elsewhere (MX's 1x32 blocks, delayed scaling, stochastic rounding; the presets' bf16 head
// keeps its cast); either way the gradients are those of a model that casts W again, bit for
// bit. The tiny model has 7 projections a layer and the head: 2 micro-batches x (7 x 2 + 1)
// dgrad products, of which 2 the head's.
Test(llama, dgrad_takes_the_kept_cast_of_w) {
    static const char *const presets[] = {"fp8-current", "nvfp4", "bf16-amp", "mxfp8", "fp8-delayed",
                                          "name t\nsite *.in bf16\nsite *.w bf16 sr\nsite *.grad bf16\n"};
    const long long kept[] = {30, 30, 30, 2, 2, 0};
    cr_assert_eq(tiny_config(false).n_layers, 2);
    const size_t n = untied_params();
    float *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        const bool load = !strchr(presets[i], '\n');
        long long k0 = -1, k1 = -1;
        const float l0 = grads_under_keep(presets[i], load, NULL, false, &k0, g0),
                    l1 = grads_under_keep(presets[i], load, NULL, true, &k1, g1);
        cr_assert_eq(k0, 0, "%s: kept %lld without m.w_keep", presets[i], k0);
        cr_assert_eq(k1, kept[i], "%s: %lld dgrad products took the kept cast", presets[i], k1);
        cr_assert_eq(l0, l1, "%s: loss", presets[i]);
        cr_assert(memcmp(g0, g1, n * sizeof *g0) == 0, "%s: the kept cast changed the gradients", presets[i]);
    }
    free(g0), free(g1);
}

// Number of tensors whose gradients differ from ref's by more than GRAD_TOL of their largest;
// *which names the last.
static int tensors_off(const float *g, const float *ref, const llama_config *c, const char **which) {
    size_t s[LP_COUNT], off = 0;
    llama_param_sizes(c, s);
    int n = 0;
    for (int t = 0; t < LP_COUNT; off += s[t], t++) {
        double gmax = 0, emax = 0;
        for (size_t j = 0; j < s[t]; j++) gmax = fmax(gmax, fabs(ref[off + j]));
        for (size_t j = 0; j < s[t]; j++) emax = fmax(emax, fabs(g[off + j] - ref[off + j]));
        if (emax > GRAD_TOL * gmax) n++, *which = llama_param_name(t);
    }
    return n;
}

// Block-scaled e4m3/e5m2 operands (power-of-two scales on blocks of 8 along K, so K-blocks
// matter at every product) with an emulated float32 accumulator (rne, promoted every 16
// products) against the same casts multiplied by the float32 BLAS path: the operands' values
// q * s are the same, so the two differ only in the order of float32 additions, within
// GRAD_TOL of each tensor's largest gradient (as accumulation_matches_big_batch), in every
// product of the forward, dgrad and wgrad. A transposed operand, a misplaced scale or a wgrad
// that overwrote the first micro-batch's sum would miss by far more.
Test(llama, emulated_accumulator_matches_float32_products) {
    static const char base[] = "name t\nsite *.in e4m3 block:8:e8m0\nsite *.w e4m3 block:8:e8m0\n"
                               "site *.grad e5m2 block:8:e8m0\n";
    char emul[256];
    snprintf(emul, sizeof emul, "%saccumulator fp32:promote=16\n", base);
    const llama_config c = tiny_config(false);
    size_t n = 0, s[LP_COUNT];
    llama_param_sizes(&c, s);
    for (int t = 0; t < LP_COUNT; t++) n += s[t];
    float *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
    const float l0 = grads_under(base, g0), l1 = grads_under(emul, g1);
    cr_assert(fabsf(l1 - l0) <= GRAD_TOL * l0, "loss %.9g, float32 products %.9g", l1, l0);
    const char *which = "";
    cr_assert_eq(tensors_off(g1, g0, &c, &which), 0, "%s: gradients off", which);
    cr_assert(memcmp(g0, g1, n * sizeof *g0), "the emulated path was not taken: bitwise the same gradients");
    free(g0), free(g1);
}

// Each wgrad takes its own accumulator: a 3-bit accumulator on PROJ.wgrad changes that
// projection's weight gradients, and only those, beyond the tolerance above.
Test(llama, emulated_accumulator_per_matmul) {
    static const char *const gemm[] = {"attn.qkv.wgrad", "attn.o.wgrad", "mlp.gate_up.wgrad",
                                       "mlp.down.wgrad", "lm_head.wgrad"};
    static const char *const expect[][3] = {{"layers.wq", "layers.wk", "layers.wv"}, {"layers.wo"},
                                            {"layers.w_gate", "layers.w_up"}, {"layers.w_down"}, {"lm_head"}};
    static const int nexp[] = {3, 1, 2, 1, 1};
    static const char base[] = "name t\nsite *.in bf16\nsite *.w bf16\nsite *.grad bf16\n";
    const llama_config c = tiny_config(false);
    size_t n = 0, s[LP_COUNT];
    llama_param_sizes(&c, s);
    for (int t = 0; t < LP_COUNT; t++) n += s[t];
    float *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
    grads_under(base, g0);
    for (int k = 0; k < 5; k++) {
        char text[256];
        snprintf(text, sizeof text, "%saccumulator m2 %s\n", base, gemm[k]);
        grads_under(text, g1);
        const char *which = "";
        cr_assert_eq(tensors_off(g1, g0, &c, &which), nexp[k], "%s: %d tensors off (last %s), expected %d",
                     gemm[k], tensors_off(g1, g0, &c, &which), which, nexp[k]);
        bool named = false;
        for (int e = 0; e < nexp[k]; e++) named |= !strcmp(which, expect[k][e]);
        cr_assert(named, "%s changed %s", gemm[k], which);
    }
    free(g0), free(g1);
}
