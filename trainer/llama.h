// llama.h: a Llama decoder (token embedding; per layer RMSNorm, grouped-query causal attention
// with RoPE, residual, RMSNorm, SwiGLU MLP, residual; final RMSNorm; LM head; softmax
// cross-entropy), its parameters in one buffer carved by a size table, forward and backward
// written by hand, and gradient checkpointing (recompute a block in backward).
// Constraints: float32 throughout (the precision policies of autocast/ plug in at the matmul
// sites); matrix products go through kernels/ (mm_cpu); deterministic for a given thread count.
//
// Weights are stored (out, in) row-major, as PyTorch's nn.Linear and llama2.c keep them, so a
// projection is y = x W^T. RoPE rotates adjacent pairs (2i, 2i+1) of each head, as Meta's Llama
// and llama2.c do (HF's rotate_half layout is a permutation of the q/k weight rows).
#ifndef FPLAB_LLAMA_H
#define FPLAB_LLAMA_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autocast/autocast.h"

typedef struct {
    int dim;          // model width C
    int n_layers;     // L
    int n_heads;      // query heads NH (head size hs = dim / n_heads)
    int n_kv_heads;   // key/value heads NKV (NH % NKV == 0)
    int hidden_dim;   // SwiGLU width H
    int vocab_size;   // V
    int seq_len;      // longest context T the model is trained on
    float rope_theta; // RoPE base (10000)
    float norm_eps;   // RMSNorm epsilon (1e-5)
    bool tied;        // LM head shares the token embedding
} llama_config;

// Upper bounds of llama_config_validate. A config read from a file (a checkpoint, an export) is
// checked against them before it sizes any allocation. They are far above what a CPU trainer
// runs (Llama 3 405B has dim 16384, 126 layers, hidden 53248, vocabulary 128256) and keep every
// size computed from a config well inside size_t: n_heads <= dim / 2 (an even head size) and
// n_kv_heads <= n_heads follow from the divisibility rules.
enum {
    LLAMA_MAX_DIM = 16384,
    LLAMA_MAX_LAYERS = 256,
    LLAMA_MAX_HIDDEN = 65536,
    LLAMA_MAX_VOCAB = 1 << 20,
    LLAMA_MAX_SEQ_LEN = 1 << 16,
};
enum { LLAMA_OK = 0, LLAMA_EINVAL = 1, LLAMA_ENOMEM = 2 };

// Named configs: tiny (tests), shakespeare (dim 128, 4 layers, 4 heads, context 64), 260k
// (llama2.c's stories260K: dim 64, 5 layers, 8 heads, 4 kv heads, context 512), 15m (stories15M:
// dim 288, 6 layers, 6 heads, context 256). vocab_size is left 0: the data decides it.
// LLAMA_EINVAL for an unknown name.
int llama_config_named(llama_config *out, const char *name);
const char *llama_config_names(void);  // "tiny, shakespeare, 260k, 15m"
// The SwiGLU width llama2.c and Meta's code derive from dim: 2/3 of 4*dim, rounded up to a
// multiple of 32.
int llama_default_hidden(int dim);
// LLAMA_OK, or LLAMA_EINVAL with a message naming the field and what was expected: every size
// in [1, its LLAMA_MAX_*], dim a multiple of n_heads with an even head size, n_heads a multiple
// of n_kv_heads, rope_theta positive and finite, norm_eps non-negative and finite.
int llama_config_validate(const llama_config *c, char *msg, size_t msg_len);

// --- parameters: one buffer, tensors in this order (layer-stacked, as llama2.c stores them)
typedef enum {
    LP_TOK_EMB,    // (V, C)
    LP_ATTN_NORM,  // (L, C)
    LP_WQ,         // (L, NH*hs, C)
    LP_WK,         // (L, NKV*hs, C)
    LP_WV,         // (L, NKV*hs, C)
    LP_WO,         // (L, C, NH*hs)
    LP_MLP_NORM,   // (L, C)
    LP_W_GATE,     // (L, H, C)   llama2.c's w1
    LP_W_DOWN,     // (L, C, H)   llama2.c's w2
    LP_W_UP,       // (L, H, C)   llama2.c's w3
    LP_FINAL_NORM, // (C)
    LP_LM_HEAD,    // (V, C); size 0 when tied
    LP_COUNT
} llama_param_id;

const char *llama_param_name(llama_param_id p);  // "tok_emb", "layers.wq", ...
// Element counts of each tensor (all layers together) and their sum.
size_t llama_param_sizes(const llama_config *c, size_t sizes[LP_COUNT]);
// True for the tensors AdamW decays (the matrices; not the norm gains).
bool llama_param_is_matrix(llama_param_id p);

typedef struct {
    float *t[LP_COUNT];  // views into one buffer
} llama_tensors;
// Carves buf (llama_param_sizes floats) into views.
void llama_tensors_carve(llama_tensors *out, const llama_config *c, float *buf);

// --- activations: one struct, sized for (B, T)
typedef enum { LLAMA_RECOMPUTE_NONE, LLAMA_RECOMPUTE_BLOCK } llama_recompute;

typedef struct llama_acts llama_acts;  // opaque: trainer/llama.c

enum { LLAMA_MM_PATHS = 8 };  // rows of llama_model.mm_paths (kernels of scaled_mm.h's mm_path)

typedef struct {
    llama_config cfg;
    size_t n_params;
    float *params, *grads;  // n_params each; grads accumulate (+=) in llama_backward
    llama_tensors p, g;     // views
    llama_acts *acts;       // allocated lazily for the largest (B, T) used
    int B, T;
    llama_recompute recompute;
    float *rope_cos, *rope_sin;  // (seq_len, hs/2)
    ac_ctx *ac;             // precision policy applied at the cast sites; NULL: float32
    bool uncounted;        // a recomputed forward or an evaluation: casts are done but not
                            // counted (telemetry, amax history), so they change nothing
    // The forward's casts of the projection weights that dgrad takes instead of casting W again
    // (autocast.h's ac_keeps_w_cast): n_params floats, w_keep[i] for params[i]; allocated by the
    // first forward under a policy that keeps one. w_keep_none: none is kept (the allocation
    // failed, or the caller said so before that forward); dgrad then casts W again.
    float *w_keep;
    bool w_keep_none;
    long long w_casts_kept;  // dgrad products since init that took the forward's W cast
    int fault;              // LLAMA_OK, or the first failure of an emulated product since init
                            // (LLAMA_ENOMEM): its result is NaN, which is then not the run's
    // The kernels mm_cpu ran for the policy's emulated and engine products since init, one row per
    // kernel (mm_path, kernels/scaled_mm.h): products, their outputs, and of those the outputs the
    // engine's scalar model computed. The trainer logs them (its "mm_paths" event).
    struct {
        const char *kernel;  // NULL: an unused row
        long long products;
        unsigned long long outputs, model_outputs;
    } mm_paths[LLAMA_MM_PATHS];
} llama_model;

// Allocates parameters (zeroed) and gradients (zeroed); activations come with the first
// forward. LLAMA_EINVAL (with msg) for a bad config, LLAMA_ENOMEM.
int llama_init(llama_model *m, const llama_config *c, llama_recompute rc, char *msg, size_t msg_len);
void llama_free(llama_model *m);
// Allocates the activations for batches up to (B, T); LLAMA_ENOMEM. Forward calls it itself
// when a larger batch comes, and returns NAN if that fails.
int llama_reserve(llama_model *m, int B, int T);
// GPT-2/llama2.c-style initialisation, a pure function of seed: matrices N(0, 0.02), the
// output projections (wo, w_down) N(0, 0.02/sqrt(2L)), norm gains 1.
void llama_init_weights(llama_model *m, uint64_t seed);

// Forward over tokens (B, T) (T <= seq_len). With targets (B, T) non-NULL, returns the mean
// cross-entropy loss and keeps what backward needs; targets < 0 are ignored (not counted).
// With targets NULL returns 0 and leaves the logits: llama_logits. Overwrites the activations.
// Returns NAN on a token outside [0, V) or T > seq_len (nothing else can fail: activations
// are allocated in llama_reserve).
float llama_forward(llama_model *m, const int *tokens, const int *targets, int B, int T);
// Logits of the last forward: (B, T, V).
const float *llama_logits(const llama_model *m);
// The keys (after RoPE) and values that layer l's attention read in the last forward, (B, T,
// n_kv_heads * head size) each: what a KV cache holds, cast for the attn.kv site where the
// policy has one. false (k and v untouched) before a forward, for l outside [0, n_layers), and
// with block recompute (which keeps one layer's activations only).
bool llama_kv(const llama_model *m, int l, const float **k, const float **v);
// Backward of the last forward with targets: grads += d(loss_scale * mean loss)/d(params).
// (loss_scale: 1, or 1/K for gradient accumulation over K micro-batches, or a loss scale.)
void llama_backward(llama_model *m, const int *tokens, const int *targets, float loss_scale);
// The same backward once more (grads += again), from the dlogits llama_backward left in place of
// the logits; before the next forward only. The trainer's gradient-noise telemetry runs it with
// autocast's exact_backward set, for the gradient without the backward's casts.
void llama_backward_again(llama_model *m, const int *tokens);
void llama_zero_grad(llama_model *m);
// The largest tensor a cast site sees for batches up to (B, T), in floats (ac_init's
// max_operand).
size_t llama_max_operand(const llama_config *c, int B, int T);
// Bytes held by the activations (for the memory table of make bench).
size_t llama_acts_bytes(const llama_model *m);
// Bytes a model of config c needs to train on (B, T) batches before it allocates them: parameters
// and gradients, extra_param_copies more parameter-sized buffers (AdamW's two moments, a
// low-precision update's copies), the RoPE tables and the activations. A double, so that a
// config read from a file cannot overflow the count; the trainer refuses what cannot fit.
double llama_memory_bytes(const llama_config *c, llama_recompute rc, int B, int T, int extra_param_copies);

#endif
