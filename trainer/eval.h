// eval.h: a trained model under an inference policy (post-training quantization): the
// validation loss of a checkpoint with the forward cast sites of a precision policy applied,
// the per-site telemetry the trainer logs, and the same with one site at a time.
// Constraints: library level (status + message, never exits); the validation batches are the
// trainer's (batch i of the validation split, keyed by the run's seed), so under the fp32
// policy and the run's thread count the loss is bitwise the checkpoint's last validation loss.
// Only the forward runs: sites that act in backward or in the update (.grad, grads, master,
// adam.*) and the loss scaler change nothing here.
#ifndef FPLAB_EVAL_H
#define FPLAB_EVAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "autocast/autocast.h"
#include "trainer/data.h"
#include "trainer/llama.h"

enum { EVAL_OK = 0, EVAL_EINVAL = 1, EVAL_ENOMEM = 2 };
enum { EVAL_PATH_MAX = 1024, EVAL_BATCHES_MAX = 1 << 20 };

typedef struct {
    const char *ckpt;      // the checkpoint (required)
    const char *data;      // NULL or "": the checkpoint's --data (text file or shards)
    const char *val_data;  // shards: NULL or "": the checkpoint's --val-data
    int batches;           // validation batches; 0: the checkpoint's --eval-batches
    int batch;             // sequences per batch; 0: the checkpoint's --batch
} eval_opts;

typedef struct {
    char ckpt[EVAL_PATH_MAX];
    llama_model m;
    data_vocab vocab;       // the checkpoint's
    data_set data;          // loaded with the checkpoint's vocabulary
    char data_path[EVAL_PATH_MAX], tokens[8];
    char val_path[EVAL_PATH_MAX];  // the validation shard read ("" for none: text, or shards split 90/10)
    int B, T, batches;      // as resolved (the run's options unless given)
    uint64_t seed;          // the run's: the key of the validation batches
    float ckpt_val_loss;    // the run's last validation loss (NAN: none recorded)
    int32_t *x, *y;         // (B, T)
    double *batch_loss;     // (batches) each batch's loss in the last eval_loss
    double *base_loss;      // (batches) each batch's fp32 loss (eval_baseline; NULL before)
    float baseline;         // their mean (NAN before eval_baseline)
    // Called after each batch of eval_loss with (arg, batches done, batches) when set (the CLI
    // draws its progress line with it); NULL after eval_open.
    void (*progress)(void *arg, int done, int total);
    void *progress_arg;
} eval_model;

// Reads the checkpoint (model, vocabulary, the run's options and state) and its validation
// data. A model-only file (no options section) needs o->data and takes the trainer's default
// batch and eval-batches. EVAL_EINVAL with a message naming the file and what was expected
// (unreadable or damaged checkpoint, missing data, a split shorter than one sequence, a bad
// count), EVAL_ENOMEM. On failure e is left empty (eval_close is safe).
int eval_open(eval_model *e, const eval_opts *o, char *msg, size_t msg_len);
void eval_close(eval_model *e);

// Whether a site acts in the forward (.in, .w, attention scores and probabilities, the KV
// cache, residual, saved activations): the sites an evaluation applies.
bool eval_site_in_forward(ac_site s);
// What the forward cannot do, refused as the trainer refuses it: an emulated accumulator, a
// scaling recipe on attention scores or probabilities. EVAL_EINVAL with a message naming the
// policy, else EVAL_OK.
int eval_policy_check(const ac_policy *p, char *msg, size_t msg_len);
// Whether p's attn.kv site rounds each token's keys and values from that token's own values
// (inactive, plain rounding, or a recipe with one scale per row or per 1-D block of a row:
// row, mx, block:K:FMT), so that a forward over a window holds what a KV cache filled one token
// at a time would. false for per-tensor, delayed, column, 2-D tile and two-level (+tensor)
// recipes: their scales mix tokens, future ones included, and each forward re-quantizes the
// whole window, which a cache does not (the CLI prints a note, and still runs it).
bool eval_kv_per_token(const ac_policy *p);
// out = p with every site float32 except s, which keeps p's rule (the rest of p unchanged, but
// for each emulated accumulator whose operands are not both kept: float32, as a direct policy
// must have).
void eval_policy_only(ac_policy *out, const ac_policy *p, ac_site s);

// What eval_attach_policy sets up.
typedef struct {
    const ac_policy *p;
    int B, T;           // the largest batch the model will run
    uint64_t seed;      // the key of stochastic rounding
    ac_telemetry tel;
    bool uncounted;     // casts not counted (telemetry, amax history): sampling
} eval_attach_req;

// Sets up ac for r->p on model m and attaches it (m->ac = ac). EVAL_EINVAL with a message
// (eval_policy_check, or out of memory for the cast buffers). Detach and free with
// eval_detach_policy.
int eval_attach_policy(llama_model *m, ac_ctx *ac, const eval_attach_req *r, char *msg, size_t msg_len);
void eval_detach_policy(llama_model *m, ac_ctx *ac);

typedef struct {
    float loss;       // mean over the batches of each batch's mean loss, summed in double in
                      // batch order (the trainer's validation loss)
    double delta;     // loss - the fp32 baseline (NAN before eval_baseline)
    double delta_se;  // standard error of delta: of the mean of the per-batch differences
                      // (the batches are paired: the same tokens under both); NAN below 2
    long tokens;      // targets counted: batches x B x T
    double seconds;
} eval_result;

// The validation loss of e's model under policy p (NULL: float32, no casts). With ac non-NULL
// the casts are counted into it (ac_init'ed here with telemetry tel; the caller ac_free's it,
// also on failure); NULL: a context of its own, freed. EVAL_EINVAL with a message for a policy
// eval_policy_check refuses or cast buffers that cannot be allocated; EVAL_ENOMEM with a message
// when an emulated product could not get its buffers. A NaN loss is a result (a cast that
// overflowed to inf), not an error.
int eval_loss(eval_model *e, const ac_policy *p, ac_telemetry tel, ac_ctx *ac, eval_result *r, char *msg,
              size_t msg_len);

// eval_loss under float32 (no casts), kept as the baseline of the later results' delta.
int eval_baseline(eval_model *e, eval_result *r, char *msg, size_t msg_len);

// One JSON line: {"ckpt":..,"policy":..,"site":..|null,"val_loss":..,"fp32_val_loss":..,
// "delta":..,"delta_se":..,"batches":..,"tokens":..,"seconds":..} with ac's telemetry members
// (ac_write_json: "sites", per layer with AC_TEL_LAYERS) before the closing brace. site NULL:
// the whole policy; without a baseline no fp32_val_loss, delta and delta_se.
void eval_write_json(FILE *f, const eval_model *e, const char *policy, const char *site, const eval_result *r,
                     const ac_ctx *ac);

#endif
