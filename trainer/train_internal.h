// train_internal.h: what the units of the training run share (train.c: the loop;
// train_setup.c: options, resume, data, model, policy and output files; train_ckpt.c: the
// checkpoint of a run). Internal: the train__ functions are not part of the library's API.
#ifndef FPLAB_TRAIN_INTERNAL_H
#define FPLAB_TRAIN_INTERNAL_H
#include <stdio.h>

#include "autocast/autocast.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/dist_wire.h"
#include "util/fileio.h"
#include "trainer/train.h"

// The training state section of a checkpoint: what a resumed run needs besides parameters and
// moments (stored as is; train__load_checkpoint validates every field).
typedef struct {
    int64_t step;           // optimizer steps done (applied or skipped by the loss scaler)
    int64_t applied;        // optimizer steps applied: the schedule and AdamW's t count these
    int64_t batches_drawn;  // micro-batches drawn from the training split (the data position)
    uint64_t seed;          // the key of every random draw (no other generator state exists)
    float last_val_loss;
    int32_t ranks;          // processes of the run that wrote it (0 in older files: 1)
} train_state;

// What one optimizer step produced (train.c).
typedef struct {
    float loss;       // mean train loss over the micro-batches
    double gnorm;     // global gradient norm before clipping (unscaled)
    float lr;         // the learning rate the step used (or would have used, if skipped)
    float scale;      // the loss scale of the step (1: none)
    bool skipped;     // skipped by the loss scaler
    float val;        // validation loss evaluated after the step (NAN: none)
} train_step_out;

// The optimizer's state (train.c's update; saved and restored by train_ckpt.c).
typedef struct {
    float *adam_m, *adam_v;  // AdamW's moments; --optimizer sgd: the momentum buffer, and zeros
    bool sgd;                // --optimizer sgd
    float *kahan;            // update kahan: what rounding the weights lost (float32)
} train_optim;

// The precision policy and the autocast context it drives (the model's casts point at ac).
typedef struct {
    ac_policy pol;
    char *pol_text;  // the policy as text (saved in checkpoints; resume parses it)
    ac_ctx ac;
} train_precision;

// The corpus and the batch buffers each micro-batch is drawn into.
typedef struct {
    data_set set;
    int B, T;
    int32_t *x, *y;  // (B, T)
} train_data;

// What the run writes besides the checkpoint's contents: the log, the checkpoint's place and
// the progress line.
typedef struct {
    FILE *log;                     // appended (O_APPEND) and locked while the run lives
    char ckpt_path[FIO_PATH_MAX];  // "" when the run keeps no checkpoint
    char log_path[FIO_PATH_MAX];   // "" when the run keeps no log
    int ckpt_lock;                 // fd holding --ckpt-dir's lock (rank 0), or -1
    bool progress;                 // a progress line (\r) on stderr
} train_outputs;

// This invocation's bookkeeping: where it started from and the time spent.
typedef struct {
    const char *resume;  // the checkpoint resumed from, or NULL
    char switched_from[128];  // --switch-policy: the checkpoint's policy name ("": no switch)
    long first_step;     // the step this invocation started at
    long steps_before;   // resume with a larger --steps: the checkpoint's --steps (else 0)
    double t_start;
    double fwd_s, bwd_s, opt_s, eval_s;
} train_run_info;

// Distributed state (dist_train.c; one process: rank 0 of 1, and the reducer is idle).
typedef struct {
    dist_world w;
    bool local;                 // local SGD / DiLoCo: each rank steps on its own gradients
    dist_reducer red;           // gradients (data parallel) or parameters/deltas (local)
    size_t seg[LP_COUNT + 1];   // parameter tensor boundaries (where the wire rounding cuts)
    int nseg;
    float *micro;               // accum > 1: a micro-batch's gradient, added in micro-batch order
    double *micro_loss;         // N x accum losses of the step, by global micro-batch index
    float *anchor, *outer_buf;  // local SGD / DiLoCo: parameters at the last sync; Nesterov buffer
    float *ckbuf;               // rank 0: the other ranks' state gathered for a checkpoint
    dist_comm_tel comm;         // this step's communication
} train_dist;

// The gradient-noise telemetry (--grad-noise-every N): every N steps the step's backward runs
// a second time with autocast's exact_backward (float32 products of uncast operands) into ref,
// and the step line logs the norm of that gradient and of the policy's gradient's distance to it.
typedef struct {
    float *ref, *micro;             // n_params each (micro: accum > 1), allocated when N > 0
    bool now;                       // this step is measured
    double exact_norm, noise_norm;  // ||g_exact||, ||g_policy - g_exact|| (unscaled)
} train_noise;

// A training run's state, grouped by what owns each part.
typedef struct {
    train_opts o;     // resolved: named-config and auto values replaced by what is used
    llama_model m;    // parameters, gradients and activations
    train_state st;   // what a checkpoint's state section holds
    train_optim optim;
    train_precision prec;
    train_data data;
    train_outputs out;
    train_run_info run;
    train_dist dist;
    train_noise noise;
} train_run_state;

// train_setup.c: everything before the first step; -1 with a message (r is then freed by
// train__free, whatever state it reached).
int train__setup(train_run_state *r, const train_opts *o, const char *resume, const bool *given, char *msg,
                 size_t msg_len);
void train__free(train_run_state *r);

// train_ckpt.c: the checkpoint of the run (atomic), and what a resumed run reads back besides
// the model (moments, state; all validated against the model and the options).
int train__save_checkpoint(train_run_state *r, char *msg, size_t msg_len);
int train__load_checkpoint(train_run_state *r, const ckpt_file *f, const char *path, char *msg, size_t msg_len);

// dist_train.c: the distributed steps of the loop (each a no-op with one process and the
// plain float32 wire). Collective: every rank calls them in the same order.
// Joins the job and sets up the reducer and the local SGD state; -1 with a message.
int train__dist_setup(train_run_state *r, char *msg, size_t msg_len);
// Agreement after a rank's setup: every rank's rc, then the fingerprint of what must be the
// same everywhere (options, data, initial weights). -1 on every rank when one rank failed or
// the ranks disagree, with a message.
int train__dist_agree(train_run_state *r, int rc, char *msg, size_t msg_len);
// Data parallel: the gradients summed over the ranks in the fixed order (dist_wire.h).
void train__dist_allreduce_grads(train_run_state *r, uint64_t step);
// Local SGD / DiLoCo after optimizer step `step` (0-based): averages parameters (or takes the
// outer step) when the step ends a round of --local-sgd steps or the run.
void train__dist_sync_params(train_run_state *r, long step);
// Delayed scaling: this step's amaxes become their maximum over the ranks (every step).
void train__dist_reduce_amax(train_run_state *r);
bool train__dist_synced(const train_run_state *r, long step);
// Local SGD state for a checkpoint: rank 0 gathers every rank's parameters, moments and error
// feedback residual (collective). The sections, in sec (up to TRAIN_DIST_SECTIONS; returns how
// many), point into buffers owned by r (on ranks other than 0 their data is NULL).
enum { TRAIN_DIST_SECTIONS = 6 };
int train__dist_ckpt_sections(train_run_state *r, ckpt_section *sec);
// Resume: this rank's share of those sections (rank r takes rank r mod N_old's state).
int train__dist_ckpt_load(train_run_state *r, const ckpt_file *f, const char *path, char *msg, size_t msg_len);
void train__dist_free(train_dist *d);

#endif
