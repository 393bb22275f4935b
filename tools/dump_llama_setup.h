// dump_llama_setup.h: the model, weights and batch of the Hugging Face cross-check, shared by
// tools/dump_llama.c (which writes them for tools/check_llama_torch.py) and
// tests/test_llama_torch.c (which recomputes the loss in-process against the committed fixture),
// so both run the very same computation.
// Header-only (static functions): the Makefile builds every tools/*.c into a program of its
// own, so a shared .c here would be taken for a tool; this header needs only libfplab.
// Constraints: a pure function of (config, seed): counter-based draws (formats/rng.h), no
// clock, no global state.
#ifndef FPLAB_DUMP_LLAMA_SETUP_H
#define FPLAB_DUMP_LLAMA_SETUP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "formats/rng.h"
#include "trainer/llama.h"

// The batch of the cross-check: B sequences of T tokens (T <= seq_len).
enum { DUMP_B = 2, DUMP_T = 16, DUMP_IGNORED = 5 };  // targets[DUMP_IGNORED] = -1 (not counted)
#define DUMP_SEED 20261201ULL

// Default config: small, but with grouped-query attention (2 query heads per kv head), an
// untied head and a SwiGLU width that is not a multiple of the model width.
static inline llama_config dump_default_config(void) {
    return (llama_config){.dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                          .hidden_dim = 96, .vocab_size = 23, .seq_len = 16,
                          .rope_theta = 10000.0f, .norm_eps = 1e-5f, .tied = false};
}

// Weights: the trainer's llama_init_weights(seed) first, then every tensor redrawn larger, since
// with its N(0, 0.02) matrices the attention scores are ~1e-3 and attention is a plain average,
// which would leave the softmax, RoPE and causal mask barely tested: matrices uniform in +-0.3
// (O(1) scores for dim 32) and norm gains in [0.5, 1.5] (a gain applied to the wrong channel
// shows). Stream 1000 + tensor id keeps these draws apart from llama_init_weights'.
static inline void dump_fill_params(llama_model *m, uint64_t seed) {
    llama_init_weights(m, seed);
    size_t s[LP_COUNT];
    llama_param_sizes(&m->cfg, s);
    for (int i = 0; i < LP_COUNT; i++) {
        const fmt_rng_key key = fmt_rng_make_key(seed, 1000 + (uint64_t)i);
        for (size_t j = 0; j < s[i]; j++) {
            const double u = fmt_rng_uniform(key, j);  // [0, 1)
            m->p.t[i][j] = llama_param_is_matrix(i) ? (float)(0.6 * u - 0.3) : (float)(0.5 + u);
        }
    }
}

// Tokens and targets (n = B*T each) in [0, V), from stream 999 of seed; one target ignored.
static inline void dump_fill_batch(int *tokens, int *targets, int n, int V, uint64_t seed) {
    const fmt_rng_key key = fmt_rng_make_key(seed, 999);
    for (int i = 0; i < n; i++) {
        tokens[i] = (int)(fmt_rng_u32(key, 2 * (uint64_t)i) % (uint32_t)V);
        targets[i] = (int)(fmt_rng_u32(key, 2 * (uint64_t)i + 1) % (uint32_t)V);
    }
    if (n > DUMP_IGNORED) targets[DUMP_IGNORED] = -1;
}

// Builds the model of c with dump_fill_params(seed) and the batch (B*T tokens and targets).
// LLAMA_OK, or the llama_init status with its message in msg.
static inline int dump_setup(llama_model *m, const llama_config *c, uint64_t seed, int *tokens,
                             int *targets, int B, int T, char *msg, size_t msg_len) {
    const int st = llama_init(m, c, LLAMA_RECOMPUTE_NONE, msg, msg_len);
    if (st != LLAMA_OK) return st;
    dump_fill_params(m, seed);
    dump_fill_batch(tokens, targets, B * T, c->vocab_size, seed);
    return LLAMA_OK;
}

// The shape of each tensor of the parameter buffer (all layers together, as llama.h lists them);
// the number of dimensions (0 for LP_COUNT). tools/dump_llama.c and tools/train_policy_dump.c
// write it into their manifests.
static inline int dump_param_shape(const llama_config *c, llama_param_id p, size_t shape[3]) {
    const size_t C = c->dim, L = c->n_layers, V = c->vocab_size, H = c->hidden_dim;
    const size_t hs = C / c->n_heads, qd = c->n_heads * hs, kvd = c->n_kv_heads * hs;
    switch (p) {
    case LP_TOK_EMB: case LP_LM_HEAD: shape[0] = V, shape[1] = C; return 2;
    case LP_ATTN_NORM: case LP_MLP_NORM: shape[0] = L, shape[1] = C; return 2;
    case LP_WQ: shape[0] = L, shape[1] = qd, shape[2] = C; return 3;
    case LP_WK: case LP_WV: shape[0] = L, shape[1] = kvd, shape[2] = C; return 3;
    case LP_WO: shape[0] = L, shape[1] = C, shape[2] = qd; return 3;
    case LP_W_GATE: case LP_W_UP: shape[0] = L, shape[1] = H, shape[2] = C; return 3;
    case LP_W_DOWN: shape[0] = L, shape[1] = C, shape[2] = H; return 3;
    case LP_FINAL_NORM: shape[0] = C; return 1;
    case LP_COUNT: break;
    }
    return 0;
}

// The manifests' shared parts (tools/dump_llama.c, tools/train_policy_dump.c): the config
// object's line, and the "tensors" list (each parameter tensor's name, offset in the flat
// parameter array and shape). dump_json_tensors returns false, having written a partial list,
// when a shape disagrees with llama_param_sizes.
static inline void dump_json_config(FILE *j, const llama_config *c) {
    fprintf(j,
            "  \"config\": {\"dim\": %d, \"n_layers\": %d, \"n_heads\": %d, \"n_kv_heads\": %d, "
            "\"hidden_dim\": %d, \"vocab_size\": %d, \"seq_len\": %d, \"rope_theta\": %.9g, "
            "\"norm_eps\": %.9g, \"tied\": %s},\n",
            c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->hidden_dim, c->vocab_size, c->seq_len,
            c->rope_theta, c->norm_eps, c->tied ? "true" : "false");
}
static inline bool dump_json_tensors(FILE *j, const llama_config *c) {
    size_t sizes[LP_COUNT], off = 0;
    llama_param_sizes(c, sizes);
    fprintf(j, "  \"tensors\": [");
    for (int p = 0, first = 1; p < LP_COUNT; p++) {
        if (sizes[p]) {
            size_t shape[3], prod = 1;
            const int nd = dump_param_shape(c, (llama_param_id)p, shape);
            for (int k = 0; k < nd; k++) prod *= shape[k];
            if (prod != sizes[p]) return false;
            fprintf(j, "%s\n    {\"name\": \"%s\", \"offset\": %zu, \"shape\": [", first ? "" : ",",
                    llama_param_name(p), off);
            for (int k = 0; k < nd; k++) fprintf(j, "%s%zu", k ? ", " : "", shape[k]);
            fprintf(j, "]}");
            first = 0;
        }
        off += sizes[p];
    }
    fprintf(j, "\n  ]\n");
    return true;
}

#endif
