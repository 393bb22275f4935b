// llama.c: the Llama model: configs, the parameter table, activations, forward and backward
// (with optional recompute of each block), weight initialisation.
// Constraints: float32; every op is a kernels/llama_ops.h call, so the precision layers can
// intervene at the matmul sites; deterministic for a given thread count.
#include "trainer/llama.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/rng.h"
#include "kernels/llama_ops.h"

// --- configs

int llama_default_hidden(int dim) {
    const int h = 2 * (4 * dim) / 3;
    return (h + 31) / 32 * 32;
}

static const struct {
    const char *name;
    int dim, n_layers, n_heads, n_kv_heads, seq_len;
} named[] = {
    {"tiny", 16, 2, 4, 2, 8},
    {"shakespeare", 128, 4, 4, 4, 64},
    {"260k", 64, 5, 8, 4, 512},
    {"15m", 288, 6, 6, 6, 256},
};

int llama_config_named(llama_config *out, const char *name) {
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (!strcmp(name, named[i].name)) {
            *out = (llama_config){.dim = named[i].dim,
                                  .n_layers = named[i].n_layers,
                                  .n_heads = named[i].n_heads,
                                  .n_kv_heads = named[i].n_kv_heads,
                                  .hidden_dim = llama_default_hidden(named[i].dim),
                                  .vocab_size = 0,
                                  .seq_len = named[i].seq_len,
                                  .rope_theta = 10000.0f,
                                  .norm_eps = 1e-5f,
                                  .tied = true};
            return LLAMA_OK;
        }
    return LLAMA_EINVAL;
}

const char *llama_config_names(void) { return "tiny, shakespeare, 260k, 15m"; }

int llama_config_validate(const llama_config *c, char *msg, size_t msg_len) {
#define REQUIRE(cond, ...)                           \
    do {                                             \
        if (!(cond)) {                               \
            if (msg) snprintf(msg, msg_len, __VA_ARGS__); \
            return LLAMA_EINVAL;                     \
        }                                            \
    } while (0)
    // Each size alone first (its message names it), against its stated bound.
    REQUIRE(c->dim >= 1 && c->dim <= LLAMA_MAX_DIM, "model config: dim %d; expected 1 to %d", c->dim,
            LLAMA_MAX_DIM);
    REQUIRE(c->n_layers >= 1 && c->n_layers <= LLAMA_MAX_LAYERS, "model config: n_layers %d; expected 1 to %d",
            c->n_layers, LLAMA_MAX_LAYERS);
    REQUIRE(c->n_heads >= 1 && c->n_heads <= c->dim / 2,
            "model config: n_heads %d; expected 1 to dim/2 = %d (an even head size)", c->n_heads, c->dim / 2);
    REQUIRE(c->n_kv_heads >= 1 && c->n_kv_heads <= c->n_heads,
            "model config: n_kv_heads %d; expected 1 to n_heads = %d", c->n_kv_heads, c->n_heads);
    REQUIRE(c->hidden_dim >= 1 && c->hidden_dim <= LLAMA_MAX_HIDDEN,
            "model config: hidden_dim %d; expected 1 to %d", c->hidden_dim, LLAMA_MAX_HIDDEN);
    REQUIRE(c->vocab_size >= 1 && c->vocab_size <= LLAMA_MAX_VOCAB,
            "model config: vocab_size %d; expected 1 to %d", c->vocab_size, LLAMA_MAX_VOCAB);
    REQUIRE(c->seq_len >= 1 && c->seq_len <= LLAMA_MAX_SEQ_LEN, "model config: seq_len %d; expected 1 to %d",
            c->seq_len, LLAMA_MAX_SEQ_LEN);
    REQUIRE(c->dim % c->n_heads == 0, "model config: dim %d is not a multiple of n_heads %d", c->dim,
            c->n_heads);
    REQUIRE((c->dim / c->n_heads) % 2 == 0, "model config: head size %d must be even for RoPE",
            c->dim / c->n_heads);
    REQUIRE(c->n_heads % c->n_kv_heads == 0, "model config: n_heads %d is not a multiple of n_kv_heads %d",
            c->n_heads, c->n_kv_heads);
    REQUIRE(c->rope_theta > 0 && isfinite(c->rope_theta), "model config: rope_theta %g: expected > 0",
            c->rope_theta);
    REQUIRE(c->norm_eps >= 0 && isfinite(c->norm_eps), "model config: norm_eps %g: expected >= 0",
            c->norm_eps);
    REQUIRE((double)c->dim * c->vocab_size < 1e11 && (double)c->dim * c->hidden_dim * c->n_layers < 1e11,
            "model config: too large for this trainer");
#undef REQUIRE
    return LLAMA_OK;
}

// --- parameters

static const char *param_names[LP_COUNT] = {
    "tok_emb", "layers.attn_norm", "layers.wq", "layers.wk", "layers.wv", "layers.wo",
    "layers.mlp_norm", "layers.w_gate", "layers.w_down", "layers.w_up", "final_norm", "lm_head"};

const char *llama_param_name(llama_param_id p) { return p < LP_COUNT ? param_names[p] : "?"; }

bool llama_param_is_matrix(llama_param_id p) {
    return p != LP_ATTN_NORM && p != LP_MLP_NORM && p != LP_FINAL_NORM;
}

size_t llama_param_sizes(const llama_config *c, size_t s[LP_COUNT]) {
    const size_t C = c->dim, L = c->n_layers, V = c->vocab_size, H = c->hidden_dim;
    const size_t hs = C / c->n_heads, qd = c->n_heads * hs, kvd = c->n_kv_heads * hs;
    s[LP_TOK_EMB] = V * C;
    s[LP_ATTN_NORM] = L * C;
    s[LP_WQ] = L * qd * C;
    s[LP_WK] = L * kvd * C;
    s[LP_WV] = L * kvd * C;
    s[LP_WO] = L * C * qd;
    s[LP_MLP_NORM] = L * C;
    s[LP_W_GATE] = L * H * C;
    s[LP_W_DOWN] = L * C * H;
    s[LP_W_UP] = L * H * C;
    s[LP_FINAL_NORM] = C;
    s[LP_LM_HEAD] = c->tied ? 0 : V * C;
    size_t total = 0;
    for (int i = 0; i < LP_COUNT; i++) total += s[i];
    return total;
}

void llama_tensors_carve(llama_tensors *out, const llama_config *c, float *buf) {
    size_t s[LP_COUNT];
    llama_param_sizes(c, s);
    for (int i = 0; i < LP_COUNT; i++) {
        out->t[i] = buf;
        buf += s[i];
    }
}

// --- activations

// What one layer keeps for backward (views into the activation buffer).
typedef struct {
    float *rstd1;  // (N)
    float *h1;     // (N, C)      attention-norm output
    float *q;      // (N, qd)     after RoPE
    float *k, *v;  // (N, kvd)    k after RoPE; both as attention reads them (the KV cache)
    float *att;    // (B, NH, T, T)
    float *y;      // (N, qd)     attention output before wo
    float *x_mid;  // (N, C)      residual after attention
    float *rstd2;  // (N)
    float *h2;     // (N, C)      MLP-norm output
    float *gate, *up, *sig, *act;  // (N, H)  sig = sigmoid(gate)
} layer_acts;

struct llama_acts {
    size_t cap_rows, cap_att;  // rows N and attention entries B*NH*T*T this was sized for
    float *buf;
    size_t bytes;
    float **x_in;       // [L+1]: x_in[l] (N, C) is layer l's input; x_in[L] the final residual
    layer_acts *lay;    // [L], or [1] shared by every layer with recompute = block
    float *rstd_f, *hf, *logits, *lse;                // final norm (N), (N, C), (N, V), (N)
    float *dx, *dh, *dq, *dk, *dv, *dy, *dgate, *dup, *dact;  // backward scratch
    float *datt;        // (B, NH, T, T) attention backward's scratch
};

static float *take(float **p, size_t n) {
    float *r = *p;
    *p += n;
    return r;
}

// The floats of the activation buffer for (B, T): the residual stream of every layer, the saved
// activations of every layer (of one with block recompute), the head and the backward scratch.
// In double, exact below 2^53: a config from a file may describe more than a size_t can count.
static double acts_floats(const llama_config *c, llama_recompute rc, int B, int T) {
    const double N = (double)B * T, NH = c->n_heads, att = (double)B * NH * T * T;
    const double C = c->dim, L = c->n_layers, V = c->vocab_size, H = c->hidden_dim;
    const double hs = (double)(c->dim / c->n_heads), qd = NH * hs, kvd = c->n_kv_heads * hs;
    const double nlay = rc == LLAMA_RECOMPUTE_BLOCK ? 1 : L;
    const double layer = 2 * N + 3 * N * C + 2 * N * qd + 2 * N * kvd + att + 4 * N * H;
    return (L + 1) * N * C + nlay * layer + N * (2 + C + V) + N * (2 * C + 2 * qd + 2 * kvd + 3 * H) + att;
}

double llama_memory_bytes(const llama_config *c, llama_recompute rc, int B, int T, int extra_param_copies) {
    size_t sizes[LP_COUNT];
    const double n = (double)llama_param_sizes(c, sizes), half = (double)(c->dim / c->n_heads / 2);
    return 4.0 * ((2.0 + extra_param_copies) * n + 2.0 * c->seq_len * half + acts_floats(c, rc, B, T));
}

int llama_reserve(llama_model *m, int B, int T) {
    const llama_config *c = &m->cfg;
    const size_t N = (size_t)B * T, NH = c->n_heads, att = (size_t)B * NH * T * T;
    if (m->acts && m->acts->cap_rows >= N && m->acts->cap_att >= att) return LLAMA_OK;
    const size_t C = c->dim, L = c->n_layers, V = c->vocab_size, H = c->hidden_dim;
    const size_t hs = C / NH, qd = NH * hs, kvd = c->n_kv_heads * hs;
    const size_t nlay = m->recompute == LLAMA_RECOMPUTE_BLOCK ? 1 : L;
    const double fl = acts_floats(c, m->recompute, B, T);
    if (!(fl * sizeof(float) < (double)SIZE_MAX)) return LLAMA_ENOMEM;
    const size_t floats = (size_t)fl;
    llama_acts *a = calloc(1, sizeof *a);
    float *buf = a ? malloc(floats * sizeof *buf) : NULL;
    float **x_in = buf ? malloc((L + 1) * sizeof *x_in) : NULL;
    layer_acts *lay = x_in ? malloc(nlay * sizeof *lay) : NULL;
    if (!lay) {
        free(a), free(buf), free(x_in);
        return LLAMA_ENOMEM;
    }
    if (m->acts) {
        free(m->acts->buf), free(m->acts->x_in), free(m->acts->lay), free(m->acts);
    }
    *a = (llama_acts){.cap_rows = N, .cap_att = att, .buf = buf, .bytes = floats * sizeof *buf,
                      .x_in = x_in, .lay = lay};
    float *p = buf;
    for (size_t l = 0; l <= L; l++) x_in[l] = take(&p, N * C);
    for (size_t l = 0; l < nlay; l++) {
        layer_acts *la = &lay[l];
        la->rstd1 = take(&p, N), la->h1 = take(&p, N * C), la->q = take(&p, N * qd);
        la->k = take(&p, N * kvd), la->v = take(&p, N * kvd), la->att = take(&p, att);
        la->y = take(&p, N * qd), la->x_mid = take(&p, N * C), la->rstd2 = take(&p, N);
        la->h2 = take(&p, N * C), la->gate = take(&p, N * H), la->up = take(&p, N * H);
        la->sig = take(&p, N * H);
        la->act = take(&p, N * H);
    }
    a->rstd_f = take(&p, N), a->hf = take(&p, N * C), a->logits = take(&p, N * V), a->lse = take(&p, N);
    a->dx = take(&p, N * C), a->dh = take(&p, N * C), a->dq = take(&p, N * qd);
    a->dk = take(&p, N * kvd), a->dv = take(&p, N * kvd), a->dy = take(&p, N * qd);
    a->dgate = take(&p, N * H), a->dup = take(&p, N * H), a->dact = take(&p, N * H);
    a->datt = take(&p, att);
    m->acts = a;
    return LLAMA_OK;
}

size_t llama_max_operand(const llama_config *c, int B, int T) {
    const size_t N = (size_t)B * T, C = c->dim, H = c->hidden_dim, V = c->vocab_size;
    const size_t qd = c->dim;  // n_heads * head size
    size_t w = C > H ? C : H;
    if (V > w) w = V;
    if (qd > w) w = qd;
    size_t most = N * w;  // activations and gradients (N, width)
    if (V * C > most) most = V * C;  // weights: embedding / head, MLP
    if (H * C > most) most = H * C;
    return most;
}

size_t llama_acts_bytes(const llama_model *m) { return m->acts ? m->acts->bytes : 0; }

// --- model

int llama_init(llama_model *m, const llama_config *c, llama_recompute rc, char *msg, size_t msg_len) {
    memset(m, 0, sizeof *m);
    int st = llama_config_validate(c, msg, msg_len);
    if (st != LLAMA_OK) return st;
    m->cfg = *c;
    m->recompute = rc;
    size_t sizes[LP_COUNT];
    m->n_params = llama_param_sizes(c, sizes);
    const size_t half = (size_t)(c->dim / c->n_heads) / 2;
    m->params = calloc(m->n_params, sizeof *m->params);
    m->grads = calloc(m->n_params, sizeof *m->grads);
    m->rope_cos = malloc((size_t)c->seq_len * half * sizeof(float));
    m->rope_sin = malloc((size_t)c->seq_len * half * sizeof(float));
    if (!m->params || !m->grads || !m->rope_cos || !m->rope_sin) {
        llama_free(m);
        if (msg) snprintf(msg, msg_len, "out of memory for %zu parameters", m->n_params);
        return LLAMA_ENOMEM;
    }
    llama_tensors_carve(&m->p, c, m->params);
    llama_tensors_carve(&m->g, c, m->grads);
    op_rope_tables(m->rope_cos, m->rope_sin, (size_t)c->seq_len, 2 * half, c->rope_theta);
    return LLAMA_OK;
}

void llama_free(llama_model *m) {
    if (m->acts) free(m->acts->buf), free(m->acts->x_in), free(m->acts->lay), free(m->acts);
    free(m->params), free(m->grads), free(m->rope_cos), free(m->rope_sin), free(m->w_keep);
    memset(m, 0, sizeof *m);
}

void llama_zero_grad(llama_model *m) { memset(m->grads, 0, m->n_params * sizeof *m->grads); }

// Normal draws by Box-Muller from the counter-based generator: stream = tensor id.
static void fill_normal(float *x, size_t n, double std, uint64_t seed, uint64_t stream) {
    const fmt_rng_key key = fmt_rng_make_key(seed, stream);
    for (size_t i = 0; i < n; i++) {
        const double u1 = 1.0 - fmt_rng_uniform(key, 2 * (uint64_t)i);  // (0, 1]
        const double u2 = fmt_rng_uniform(key, 2 * (uint64_t)i + 1);
        x[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
    }
}

void llama_init_weights(llama_model *m, uint64_t seed) {
    size_t s[LP_COUNT];
    llama_param_sizes(&m->cfg, s);
    const double std = 0.02, std_out = 0.02 / sqrt(2.0 * m->cfg.n_layers);
    for (int i = 0; i < LP_COUNT; i++) {
        if (!llama_param_is_matrix(i)) {
            for (size_t j = 0; j < s[i]; j++) m->p.t[i][j] = 1.0f;
        } else {
            fill_normal(m->p.t[i], s[i], (i == LP_WO || i == LP_W_DOWN) ? std_out : std, seed, i);
        }
    }
}

// --- forward

typedef struct {  // one layer's weights (views)
    const float *attn_norm, *wq, *wk, *wv, *wo, *mlp_norm, *w_gate, *w_down, *w_up;
} layer_w;

typedef struct {  // one layer's weight gradients (views)
    float *attn_norm, *wq, *wk, *wv, *wo, *mlp_norm, *w_gate, *w_down, *w_up;
} layer_g;

#define LAYER_VIEWS(T, src, l, c)                                                         \
    (T) {                                                                                 \
        .attn_norm = (src).t[LP_ATTN_NORM] + (l) * (c).C,                                  \
        .wq = (src).t[LP_WQ] + (l) * (c).qd * (c).C, .wk = (src).t[LP_WK] + (l) * (c).kvd * (c).C, \
        .wv = (src).t[LP_WV] + (l) * (c).kvd * (c).C, .wo = (src).t[LP_WO] + (l) * (c).C * (c).qd, \
        .mlp_norm = (src).t[LP_MLP_NORM] + (l) * (c).C,                                    \
        .w_gate = (src).t[LP_W_GATE] + (l) * (c).H * (c).C,                                \
        .w_down = (src).t[LP_W_DOWN] + (l) * (c).C * (c).H,                                \
        .w_up = (src).t[LP_W_UP] + (l) * (c).H * (c).C                                     \
    }

typedef struct {  // sizes of one forward, as size_t
    size_t B, T, N, C, NH, NKV, hs, qd, kvd, H, V;
} dims;

static dims dims_of(const llama_model *m, int B, int T) {
    const llama_config *c = &m->cfg;
    dims d = {.B = B, .T = T, .N = (size_t)B * T, .C = c->dim, .NH = c->n_heads,
              .NKV = c->n_kv_heads, .hs = c->dim / c->n_heads, .H = c->hidden_dim,
              .V = c->vocab_size};
    d.qd = d.NH * d.hs;
    d.kvd = d.NKV * d.hs;
    return d;
}

static layer_acts *acts_of(llama_model *m, size_t l) {
    return m->recompute == LLAMA_RECOMPUTE_BLOCK ? &m->acts->lay[0] : &m->acts->lay[l];
}

// Casts for the precision policy (no-ops when m->ac is NULL or a site is inactive): stored
// tensors are cast in place; a recomputed forward casts again, identically, without counting.
static void cast_store(llama_model *m, ac_site s, size_t l, float *x, size_t rows, size_t cols) {
    ac_cast_inplace(m->ac, s, (int)l, x, rows, cols, !m->uncounted);
}

// Adds one product's path to m->mm_paths (its kernel's row; a kernel past the table's rows is not
// counted: there are fewer kernels than rows).
static void count_path(llama_model *m, const mm_path *p) {
    for (int i = 0; i < LLAMA_MM_PATHS; i++) {
        if (m->mm_paths[i].kernel && strcmp(m->mm_paths[i].kernel, p->kernel)) continue;
        m->mm_paths[i].kernel = p->kernel;
        m->mm_paths[i].products++;
        m->mm_paths[i].outputs += p->outputs, m->mm_paths[i].model_outputs += p->model_outputs;
        return;
    }
}

// A product with the accumulator the policy emulates (scaled_mm.h): C (M, N) = op(A) op(B) of
// autocast's operands o, plus C when accumulate. The operands are valid (the policy's checks),
// so the kernel fails only for want of memory; C is then NaN and m->fault says why, so that the
// run reports the failure, not a non-finite loss.
static void mm_emulated(llama_model *m, float *C, const ac_operands *o, size_t M, size_t N, size_t K,
                        bool accumulate) {
    mm_opts mo;
    mm_opts_default(&mo);
    mo.acc = *o->acc;
    mo.beta = accumulate ? 1.0f : 0.0f;
    mm_path path = {.kernel = NULL};
    mo.path = &path;
    const int st = mm_cpu(C, N, &o->A, &o->B, M, N, K, &mo);
    if (st == MM_OK) count_path(m, &path);
    if (st != MM_OK && m->fault == LLAMA_OK) m->fault = st == MM_ENOMEM ? LLAMA_ENOMEM : LLAMA_EINVAL;
    if (st != MM_OK)
        for (size_t i = 0; i < M * N; i++) C[i] = NAN;
}

// The request of projection p's products at layer l (autocast.h): out (N, OC) = in (N, IC) W^T.
// The input of a projection is read by its products only (RMSNorm, attention and SwiGLU
// backward read their own inputs), so autocast may cast it in place.
static ac_gemm_req gemm(const llama_model *m, ac_proj p, size_t l, size_t N, size_t IC, size_t OC) {
    return (ac_gemm_req){.proj = p, .layer = (int)l, .N = N, .IC = IC, .OC = OC, .recompute = m->uncounted,
                         .in_place_ok = true};
}

// Where the forward's cast of weight w (inside m->params) is kept for dgrad: m->w_keep's copy of
// w's place, where the policy keeps W's cast for g (ac_keeps_w_cast); NULL otherwise. The same
// for fprop and dgrad of one step: the policy and m->w_keep do not change in between.
static float *w_keep_of(const llama_model *m, const ac_gemm_req *g, const float *w) {
    if (!m->w_keep || w < m->params || w >= m->params + m->n_params || !ac_keeps_w_cast(m->ac, g)) return NULL;
    return m->w_keep + (w - m->params);
}

// m->w_keep, allocated once a forward runs under a policy that keeps some projection's W cast
// (the projections' shapes at batch d, for casts with one scale per tensor).
static void w_keep_reserve(llama_model *m, const dims *d) {
    if (!m->ac || m->w_keep || m->w_keep_none) return;
    const ac_gemm_req g[] = {gemm(m, AC_PROJ_QKV, 0, d->N, d->C, d->qd), gemm(m, AC_PROJ_QKV, 0, d->N, d->C, d->kvd),
                             gemm(m, AC_PROJ_O, 0, d->N, d->qd, d->C), gemm(m, AC_PROJ_GATEUP, 0, d->N, d->C, d->H),
                             gemm(m, AC_PROJ_DOWN, 0, d->N, d->H, d->C),
                             gemm(m, AC_PROJ_HEAD, (size_t)m->cfg.n_layers, d->N, d->C, d->V)};
    bool any = false;
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) any |= ac_keeps_w_cast(m->ac, &g[i]);
    if (!any) return;
    m->w_keep = malloc(m->n_params * sizeof *m->w_keep);
    m->w_keep_none = !m->w_keep;
}

// out (N, OC) = in W^T, W (OC, IC), with in the projection's input as ac_fprop_input cast it.
static void proj(llama_model *m, const ac_gemm_req *g, float *out, const ac_operands *in, const float *w) {
    ac_operands o;
    ac_gemm_req gk = *g;
    gk.w_keep = w_keep_of(m, g, w);
    ac_fprop_operands(m->ac, &gk, in, w, &o);
    if (o.acc) mm_emulated(m, out, &o, g->N, g->OC, g->IC, false);
    else op_matmul_forward(out, o.a, o.b, g->N, g->IC, g->OC);
}

// Attention, with its scores and probabilities rounded where the policy says (plain rounding:
// the policy layer refuses a scaling recipe on these sites).
static void attention_cast(llama_model *m, const dims *d, size_t l, layer_acts *a) {
    fmt_stats st[2] = {{0}, {0}};
    attn_cast c[2];
    const bool on[2] = {ac_plain_opts(m->ac, AC_ATT_SCORES, (int)l, &c[0].fmt, &c[0].opts),
                        ac_plain_opts(m->ac, AC_ATT_PROBS, (int)l, &c[1].fmt, &c[1].opts)};
    c[0].stats = &st[0], c[1].stats = &st[1];
    op_attention_forward(a->y, a->att, a->q, a->k, a->v, d->B, d->T, d->NH, d->NKV, d->hs,
                      on[0] ? &c[0] : NULL, on[1] ? &c[1] : NULL);
    if (on[0]) ac_add_stats(m->ac, AC_ATT_SCORES, (int)l, &st[0], !m->uncounted);
    if (on[1]) ac_add_stats(m->ac, AC_ATT_PROBS, (int)l, &st[1], !m->uncounted);
}

// x += r, elementwise over the OpenMP threads (the residual stream, (N, C)).
static void residual_add(float *x, const float *r, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] += r[i];
}

static void layer_forward(llama_model *m, const dims *d, size_t l, layer_acts *a, const float *x,
                          float *x_out) {
    const layer_w w = LAYER_VIEWS(layer_w, m->p, l, *d);
    const float eps = m->cfg.norm_eps;
    const size_t N = d->N;
    const ac_gemm_req q = gemm(m, AC_PROJ_QKV, l, N, d->C, d->qd), kv = gemm(m, AC_PROJ_QKV, l, N, d->C, d->kvd);
    const ac_gemm_req o = gemm(m, AC_PROJ_O, l, N, d->qd, d->C);
    const ac_gemm_req gu = gemm(m, AC_PROJ_GATEUP, l, N, d->C, d->H), down = gemm(m, AC_PROJ_DOWN, l, N, d->H, d->C);
    ac_operands in;
    op_rmsnorm_forward(a->h1, a->rstd1, x, w.attn_norm, N, d->C, eps);
    cast_store(m, AC_SAVED, l, a->h1, N, d->C);
    ac_fprop_input(m->ac, &q, a->h1, &in);
    proj(m, &q, a->q, &in, w.wq);
    proj(m, &kv, a->k, &in, w.wk);
    proj(m, &kv, a->v, &in, w.wv);
    op_rope_forward(a->q, m->rope_cos, m->rope_sin, d->B, d->T, d->NH, d->hs);
    op_rope_forward(a->k, m->rope_cos, m->rope_sin, d->B, d->T, d->NKV, d->hs);
    // The KV cache: k after RoPE and v as projected, rounded in place where a cache would store
    // them, so attention (and its backward, straight through the rounding) reads the stored
    // values. Row scales run along a token's kvd features: a per-token recipe rounds each
    // token from its own keys and values, as a cache filled one token at a time does.
    cast_store(m, AC_KV, l, a->k, N, d->kvd);
    cast_store(m, AC_KV, l, a->v, N, d->kvd);
    cast_store(m, AC_SAVED, l, a->q, N, d->qd);
    cast_store(m, AC_SAVED, l, a->k, N, d->kvd);
    cast_store(m, AC_SAVED, l, a->v, N, d->kvd);
    attention_cast(m, d, l, a);
    cast_store(m, AC_SAVED, l, a->y, N, d->qd);
    ac_fprop_input(m->ac, &o, a->y, &in);
    proj(m, &o, a->x_mid, &in, w.wo);
    residual_add(a->x_mid, x, N * d->C);
    cast_store(m, AC_RESIDUAL, l, a->x_mid, N, d->C);
    op_rmsnorm_forward(a->h2, a->rstd2, a->x_mid, w.mlp_norm, N, d->C, eps);
    cast_store(m, AC_SAVED, l, a->h2, N, d->C);
    ac_fprop_input(m->ac, &gu, a->h2, &in);
    proj(m, &gu, a->gate, &in, w.w_gate);
    proj(m, &gu, a->up, &in, w.w_up);
    cast_store(m, AC_SAVED, l, a->gate, N, d->H);
    cast_store(m, AC_SAVED, l, a->up, N, d->H);
    op_swiglu_forward(a->act, a->sig, a->gate, a->up, N * d->H);
    cast_store(m, AC_SAVED, l, a->act, N, d->H);
    ac_fprop_input(m->ac, &down, a->act, &in);
    proj(m, &down, x_out, &in, w.w_down);
    residual_add(x_out, a->x_mid, N * d->C);
    cast_store(m, AC_RESIDUAL, l, x_out, N, d->C);
}

float llama_forward(llama_model *m, const int *tokens, const int *targets, int B, int T) {
    const llama_config *c = &m->cfg;
    if (B <= 0 || T <= 0 || T > c->seq_len) return NAN;
    for (size_t i = 0; i < (size_t)B * T; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size || (targets && targets[i] >= c->vocab_size))
            return NAN;
    if (llama_reserve(m, B, T) != LLAMA_OK) return NAN;
    m->B = B, m->T = T;
    const dims d = dims_of(m, B, T);
    w_keep_reserve(m, &d);
    llama_acts *a = m->acts;
    op_encoder_forward(a->x_in[0], tokens, m->p.t[LP_TOK_EMB], d.N, d.C);
    cast_store(m, AC_RESIDUAL, (size_t)c->n_layers, a->x_in[0], d.N, d.C);
    for (size_t l = 0; l < (size_t)c->n_layers; l++) {
        // what a recompute of the layer replays (delayed scaling's histories; ac_layer_mark)
        if (m->recompute == LLAMA_RECOMPUTE_BLOCK && !m->uncounted) ac_layer_mark(m->ac, (int)l);
        layer_forward(m, &d, l, acts_of(m, l), a->x_in[l], a->x_in[l + 1]);
    }
    op_rmsnorm_forward(a->hf, a->rstd_f, a->x_in[c->n_layers], m->p.t[LP_FINAL_NORM], d.N, d.C,
                    c->norm_eps);
    const float *head = c->tied ? m->p.t[LP_TOK_EMB] : m->p.t[LP_LM_HEAD];
    // model-level sites count as "layer" L
    const ac_gemm_req hg = gemm(m, AC_PROJ_HEAD, (size_t)c->n_layers, d.N, d.C, d.V);
    ac_operands in;
    ac_fprop_input(m->ac, &hg, a->hf, &in);
    proj(m, &hg, a->logits, &in, head);
    if (!targets) return 0.0f;
    return (float)op_crossentropy_forward(a->lse, a->logits, targets, d.N, d.V);
}

const float *llama_logits(const llama_model *m) { return m->acts ? m->acts->logits : NULL; }

bool llama_kv(const llama_model *m, int l, const float **k, const float **v) {
    if (!m->acts || !m->B || l < 0 || l >= m->cfg.n_layers || m->recompute != LLAMA_RECOMPUTE_NONE) return false;
    *k = m->acts->lay[l].k, *v = m->acts->lay[l].v;
    return true;
}

// --- backward

// Whether a projection's dgrad writes dinp or adds to it (the second and third members of a
// fused projection: k and v after q, up after gate).
typedef enum { DINP_SET, DINP_ADD } dinp_mode;

// llm.c's matmul_backward: dinp (N, IC) (= or +=) dout W and dW (OC, IC) += dout^T inp, with
// each product's operands cast by autocast for the policy (which reuses the casts it already
// holds) and multiplied in float32 or in the accumulator the policy emulates.
static void proj_backward(llama_model *m, const ac_gemm_req *g, float *dinp, float *dw, const float *dout,
                          const float *inp, const float *w, dinp_mode mode) {
    const size_t N = g->N, IC = g->IC, OC = g->OC;
    const bool accumulate = mode == DINP_ADD;
    if (!m->ac) {
        op_matmul_backward(dinp, dw, dout, inp, w, N, IC, OC, accumulate);
        return;
    }
    ac_operands o;
    ac_gemm_req gk = *g;
    gk.w_cast = w_keep_of(m, g, w);
    ac_dgrad_operands(m->ac, &gk, dout, w, &o);
    m->w_casts_kept += (o.reused & AC_REUSED_FPROP_W) != 0;
    if (o.acc) mm_emulated(m, dinp, &o, N, IC, OC, accumulate);  // dinp (N, IC) = dout (N, OC) W
    else op_matmul_dgrad(dinp, o.a, o.b, N, IC, OC, accumulate);
    ac_wgrad_operands(m->ac, g, dout, inp, &o);
    if (o.acc) mm_emulated(m, dw, &o, OC, IC, N, true);  // dW (OC, IC) += dout^T x (N, IC)
    else op_matmul_wgrad(dw, o.a, o.b, N, IC, OC);
}

// dx (N, C) holds the gradient of the layer's output on entry and of its input on exit.
static void layer_backward(llama_model *m, const dims *d, size_t l, const layer_acts *a,
                           const float *x) {
    const layer_w w = LAYER_VIEWS(layer_w, m->p, l, *d);
    const layer_g g = LAYER_VIEWS(layer_g, m->g, l, *d);
    llama_acts *s = m->acts;
    const size_t N = d->N, C = d->C, H = d->H;
    const ac_gemm_req q = gemm(m, AC_PROJ_QKV, l, N, C, d->qd), kv = gemm(m, AC_PROJ_QKV, l, N, C, d->kvd);
    const ac_gemm_req o = gemm(m, AC_PROJ_O, l, N, d->qd, C);
    const ac_gemm_req gu = gemm(m, AC_PROJ_GATEUP, l, N, C, H), down = gemm(m, AC_PROJ_DOWN, l, N, H, C);
    // MLP branch: x_out = x_mid + w_down(silu(w_gate h2) * w_up h2)
    proj_backward(m, &down, s->dact, g.w_down, s->dx, a->act, w.w_down, DINP_SET);
    op_swiglu_backward(s->dgate, s->dup, s->dact, a->gate, a->up, a->sig, N * H);
    proj_backward(m, &gu, s->dh, g.w_gate, s->dgate, a->h2, w.w_gate, DINP_SET);
    proj_backward(m, &gu, s->dh, g.w_up, s->dup, a->h2, w.w_up, DINP_ADD);
    op_rmsnorm_backward(s->dx, g.mlp_norm, s->dh, a->x_mid, w.mlp_norm, a->rstd2, N, C);
    // attention branch: x_mid = x + wo(attention(rope(wq h1), rope(wk h1), wv h1))
    proj_backward(m, &o, s->dy, g.wo, s->dx, a->y, w.wo, DINP_SET);
    op_attention_backward(s->dq, s->dk, s->dv, s->datt, s->dy, a->att, a->q, a->k, a->v, d->B, d->T, d->NH,
                       d->NKV, d->hs);
    op_rope_backward(s->dq, m->rope_cos, m->rope_sin, d->B, d->T, d->NH, d->hs);
    op_rope_backward(s->dk, m->rope_cos, m->rope_sin, d->B, d->T, d->NKV, d->hs);
    proj_backward(m, &q, s->dh, g.wq, s->dq, a->h1, w.wq, DINP_SET);
    proj_backward(m, &kv, s->dh, g.wk, s->dk, a->h1, w.wk, DINP_ADD);
    proj_backward(m, &kv, s->dh, g.wv, s->dv, a->h1, w.wv, DINP_ADD);
    op_rmsnorm_backward(s->dx, g.attn_norm, s->dh, x, w.attn_norm, a->rstd1, N, C);
}

// The backward from the loss's gradient on: the logits buffer holds dlogits, which nothing
// below writes, so llama_backward_again can run it a second time.
static void backward_from_dlogits(llama_model *m, const int *tokens) {
    const llama_config *c = &m->cfg;
    const dims d = dims_of(m, m->B, m->T);
    llama_acts *a = m->acts;
    const bool tied = c->tied;
    const float *head = tied ? m->p.t[LP_TOK_EMB] : m->p.t[LP_LM_HEAD];
    float *dhead = tied ? m->g.t[LP_TOK_EMB] : m->g.t[LP_LM_HEAD];
    const ac_gemm_req hg = gemm(m, AC_PROJ_HEAD, (size_t)c->n_layers, d.N, d.C, d.V);
    proj_backward(m, &hg, a->dh, dhead, a->logits, a->hf, head, DINP_SET);
    memset(a->dx, 0, d.N * d.C * sizeof *a->dx);
    op_rmsnorm_backward(a->dx, m->g.t[LP_FINAL_NORM], a->dh, a->x_in[c->n_layers],
                     m->p.t[LP_FINAL_NORM], a->rstd_f, d.N, d.C);
    for (size_t l = (size_t)c->n_layers; l-- > 0;) {
        layer_acts *la = acts_of(m, l);
        // Recompute: the block's forward again from its saved input. The ops are
        // deterministic, so the activations (and the gradients) are bitwise those of a run
        // that stored them. x_in[l+1] is rewritten with the same values.
        // Under delayed scaling it starts from the amax histories the block's counted forward
        // found and pushes the same amaxes (ac_replay_begin), so each cast gets that forward's
        // scale.
        if (m->recompute == LLAMA_RECOMPUTE_BLOCK) {
            m->uncounted = true;
            ac_replay_begin(m->ac, (int)l);
            layer_forward(m, &d, l, la, a->x_in[l], a->x_in[l + 1]);
            ac_replay_end(m->ac, (int)l);
            m->uncounted = false;
        }
        layer_backward(m, &d, l, la, a->x_in[l]);
    }
    op_encoder_backward(m->g.t[LP_TOK_EMB], a->dx, tokens, d.N, d.C);
}

void llama_backward(llama_model *m, const int *tokens, const int *targets, float loss_scale) {
    const dims d = dims_of(m, m->B, m->T);
    llama_acts *a = m->acts;
    // the logits buffer becomes dlogits (the logits are not needed after this)
    op_crossentropy_backward(a->logits, a->logits, a->lse, targets, d.N, d.V, loss_scale);
    backward_from_dlogits(m, tokens);
}

void llama_backward_again(llama_model *m, const int *tokens) {
    backward_from_dlogits(m, tokens);
}
