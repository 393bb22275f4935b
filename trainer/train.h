// train.h: the training run: options (one table drives the command line, the printed
// configuration, the checkpoint's "options" section and resume), the loop (gradient
// accumulation, clipping, AdamW, schedule, validation, checkpoints, progress and JSON-lines
// log) and resume.
// Constraints: process level (prints progress to stderr) but returns errors with a message
// instead of exiting, so tests drive it; a resumed run is bitwise the uninterrupted one for the
// same thread count.
#ifndef FPLAB_TRAIN_H
#define FPLAB_TRAIN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trainer/llama.h"

enum { TRAIN_PATH_MAX = 1024 };
enum { TRAIN_OK = 0, TRAIN_EREFUSED = -1, TRAIN_EFAILED = -2 };
// More threads than this is a typing error, not a machine: libgomp crashed at 100000 and hung at
// 20000 (one stack each). The same bound as `fplab sample` and `fplab ablate`.
enum { TRAIN_THREADS_MAX = 4096 };

typedef struct {
    // model: a named config, fields > 0 override it
    char model[32];
    int dim, n_layers, n_heads, n_kv_heads, hidden_dim, seq_len, untied;
    float rope_theta, norm_eps;
    // data
    char data[TRAIN_PATH_MAX];      // text file, or llm.c shards (comma-separated)
    char tokens[8];                 // char | byte | shard
    char val_data[TRAIN_PATH_MAX];  // shards: a validation shard (else the last 10%)
    int vocab_size;                 // shards: 0 = largest token + 1
    // batch and schedule
    int batch;         // sequences per micro-batch B
    int context;       // tokens per sequence T (<= seq_len; 0 = seq_len)
    int accum;         // micro-batches per optimizer step K (each loss divided by K)
    long steps;        // optimizer steps
    float lr, lr_min;  // peak and floor of the cosine schedule
    long warmup;       // optimizer steps of linear warmup
    float beta1, beta2, adam_eps, weight_decay, grad_clip;  // grad_clip 0: off
    char optimizer[8]; // adamw | sgd (momentum SGD: weight_decay is L2 in the gradient)
    float momentum;    // sgd: mu
    // evaluation, checkpoints, logging
    long eval_every;   // validation every N steps (and at the end); 0: only at the end
    int eval_batches;  // fixed validation batches (the same every time)
    char ckpt_dir[TRAIN_PATH_MAX];  // "": no checkpoints
    long ckpt_every;   // 0: only at the end
    char log[TRAIN_PATH_MAX];       // JSON lines; "" = <ckpt_dir>/log.jsonl or none
    int progress;      // -1 auto (a terminal), 0 off, 1 on
    long stop_at;      // > 0: end this invocation after that step (checkpointed) as if
                       // interrupted; the schedule still spans `steps` (resume continues)
    // run
    uint64_t seed;
    int threads;       // 0: as OpenMP/OpenBLAS decide (at most TRAIN_THREADS_MAX)
    int overwrite;     // 1: a fresh run may replace the checkpoint and log already in its places
    char recompute[8]; // none | block
    // precision
    char policy[TRAIN_PATH_MAX];  // preset name or policy file (autocast/presets)
    char switch_policy[TRAIN_PATH_MAX];  // with --resume: continue under this policy instead ("": no)
    char telemetry[8];  // off | sites | layers
    long grad_noise_every;  // > 0: every N steps the backward again without its casts; the step
                            // line's grad_noise member (one process only)
    // FP4's stall (Chmiel et al. 2025): at the first measured step where ||g|| < stall_ratio x
    // ||g_policy - g||, the run checkpoints and continues under this policy, as --resume
    // --switch-policy from that checkpoint would ("": never; once switched it is cleared)
    char stall_switch[TRAIN_PATH_MAX];
    float stall_ratio;  // the threshold (default sqrt(3))
    // distributed (docs/distributed.md; under a launcher, N ranks)
    char comm[64];        // wire format of the reductions: FORMAT[:RECIPE][:sr]; fp32: plain
    char comm_gather[64]; // format of the reduced sums as they are gathered back ("": --comm's)
    char comm_accum[8];   // f32 (sum decoded values in float32) | wire (round every partial sum)
    int error_feedback;   // 1: keep what the wire rounding lost and add it next time
    long local_sgd;       // > 0: local steps, parameters averaged every K optimizer steps
    char outer_opt[16];   // none | nesterov (DiLoCo: an outer step every --local-sgd steps)
    float outer_lr, outer_momentum;
    // 1: every float32 matmul summed in one fixed order (mm_opts.fixed_order): the same bits
    // on every x86-64 CPU, BLAS kernel and thread count; 0: OpenBLAS's sgemm
    int reproducible;
} train_opts;

// Under a launcher (mpirun -np N), --accum A is per rank: a step takes N x A micro-batches.
// nanoGPT's CPU Shakespeare recipe on the shakespeare config: batch 12, context 64, 2000 steps,
// lr 1e-3 -> 1e-4, warmup 100, beta2 0.99, weight decay 0.1, clip 1, no dropout.
void train_opts_default(train_opts *o);

// --- the option table
typedef enum { TOPT_INT, TOPT_LONG, TOPT_FLOAT, TOPT_U64, TOPT_STR } train_opt_type;
// What --resume does with an option (train_setup.c reads only this, never an option's name).
// A run_only option given on resume replaces the checkpoint's value; one that is not given:
typedef enum {
    TOPT_RESUME_KEEP = 0,  // keeps the checkpoint's value (run_only), or must equal it (the rest)
    TOPT_RESUME_RESET,     // starts from its default: it belongs to one invocation (--stop-at)
    TOPT_RESUME_HOME,      // becomes the checkpoint's own directory (--ckpt-dir)
    TOPT_RESUME_GROW,      // not run_only, yet may grow on resume, never shrink (--steps)
} train_opt_resume;
typedef struct {
    const char *name;    // the long option and the key in checkpoints and printouts
    train_opt_type type;
    size_t offset, size; // in train_opts (size: of the char array for strings)
    bool run_only;       // true: may change on resume (does not affect the trajectory)
    train_opt_resume resume;
    const char *help;
} train_opt_desc;
const train_opt_desc *train_opt_table(size_t *n);
// Sets option `name` from text; -1 with a message for an unknown name or a malformed value.
int train_opt_set(train_opts *o, const char *name, const char *value, char *msg, size_t msg_len);
// The option's value as text.
void train_opt_get(const train_opts *o, const train_opt_desc *d, char *buf, size_t len);
// Checks ranges and names; 0 or -1 with a message naming the option.
int train_opts_validate(const train_opts *o, char *msg, size_t msg_len);
// The options as text, one "name value" line each (table order), into buf (cap bytes, NUL-
// terminated; buf may be NULL to measure). Returns the length the whole text needs.
size_t train_opts_text(const train_opts *o, char *buf, size_t cap);
// Options from such text (n bytes, not NUL-terminated): defaults first, then every line; -1
// with a message for an unknown name or a bad value.
int train_opts_from_text(train_opts *o, const char *text, size_t n, char *msg, size_t msg_len);
// The model config the options describe (vocab_size from the data); -1 with a message.
int train_model_config(llama_config *c, const train_opts *o, int vocab_size, char *msg, size_t msg_len);

// --- the run
typedef struct {
    long steps_done;          // optimizer steps completed when the run ended
    long steps_run;           // of them, those this call ran (0: a resumed run that was done)
    float final_loss;         // mean train loss of the last step
    float final_val_loss;     // last validation loss (NAN if none)
    double seconds;           // wall time of the loop
    double tokens_per_s;
    double fwd_s, bwd_s, opt_s, eval_s;  // where the loop's time went
    long skipped;             // optimizer steps skipped by the loss scaler (in the whole run)
    long applied;             // optimizer steps applied (in the whole run)
    float loss_scale;         // the scaler's scale at the end
    size_t n_params;
    int rank, ranks;          // this process and the number of ranks (0 of 1 without a launcher)
    float *losses;            // optional, caller-owned: losses[s] = train loss of step s
    size_t losses_cap;
} train_report;

// Trains from scratch, or, with resume non-NULL and non-empty, continues that checkpoint (a
// given --steps larger than the checkpoint's extends it; see train_setup.c's resume_options): the
// checkpoint's options are used, except the run_only ones that the caller gave: given[i] says
// whether row i of the option table was given (NULL: every run_only option of `o` counts as
// given). A run_only option not given takes, on resume: --ckpt-dir the checkpoint's own
// directory, --log that directory's log.jsonl (appended), --stop-at 0, --progress auto,
// --overwrite 0, the others (threads, ckpt-every, telemetry) the checkpoint's values.
// Never overwrites an input (data, policy file, resumed checkpoint other than by continuing
// it), nor another run's checkpoint or log unless o->overwrite. Stops with -1 when the loss,
// the gradients or the weights become non-finite in a step the loss scaler did not skip (the
// last checkpoint stays the last good one). Returns TRAIN_OK; TRAIN_EREFUSED (-1) with a message
// when the options, files or checkpoint are refused before any step; TRAIN_EFAILED (-2) with a
// message when the run stopped on a non-finite step or a failed checkpoint write.
int train_run(const train_opts *o, const char *resume, const bool *given, train_report *rep, char *msg,
              size_t msg_len);

#endif
