// autocast.h: applying a precision policy while the model runs. The trainer hands each tensor
// to the context at its cast site; the context rounds it (with its scaling recipe, delayed
// amax-history scaling, or plain rounding), counts what happened (telemetry), and returns the
// values to compute with. It also rounds stored buffers (gradients, master weights, AdamW
// moments) and the weight update (round to nearest, stochastic, Kahan-compensated), counting
// swamped updates.
// Constraints: library level; deterministic: stochastic rounding draws are keyed by
// (seed, step, call number within the step), so a resumed run draws the same bits.
#ifndef FPLAB_AUTOCAST_H
#define FPLAB_AUTOCAST_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "autocast/policy.h"
#include "autocast/scaler.h"
#include "kernels/mm_operand.h"

typedef enum { AC_TEL_OFF, AC_TEL_SITES, AC_TEL_LAYERS } ac_telemetry;

typedef struct {
    uint64_t n, overflow, underflow, subnormal, nan;
    double amax;   // of the input (before scaling)
    float scale;   // last per-tensor scale used (1 when the recipe has none; tile recipes:
                   // the mean of log2 of the tile scales is not kept, 0 is written)
} ac_tel;

// An observer of casts (for cross-checks such as tools/train_policy_dump.c): called after every
// cast that returns values (ac_cast, ac_cast_inplace; not ac_cast_operand, whose output is element
// values apart from their scales) with the input (NULL for in-place casts), the values, and the
// cast's site, layer, shape, orientation and count flag. NULL: none (the default).
typedef void (*ac_cast_hook)(void *user, ac_site s, int layer, const float *x, const float *out, size_t rows,
                             size_t cols, bool k_rows, bool count);

enum { AC_NSLOTS = 4 };  // scratch buffers of out-of-place casts (see ac_cast_req.slot)

// What a scratch buffer holds that a later cast may reuse (ac_dgrad_operands,
// ac_wgrad_operands; internal): the cast of x for a pass's site, made in a given step and
// micro-batch. Any other write to the buffer forgets it (x = NULL).
typedef struct {
    const float *x;       // the input that was cast; NULL: nothing to reuse
    ac_pass pass;
    ac_site site;
    int layer;
    size_t rows, cols;
    bool k_rows;
    int micro;
    uint64_t step;
    uint64_t gen;         // wgrad's input: the ac_fprop_input it followed (ac_input.gen)
    uint64_t call;        // dgrad's output gradient: the product-level call that cast it
    float pre;            // delayed scaling: the scale it was cast with (0: another rule)
} ac_held;

// The last ac_fprop_input of one projection and layer (internal).
typedef struct {
    const float *x;
    size_t rows, cols;
    bool in_place;        // x was overwritten by its cast, which serves wgrad as it is
    uint64_t gen;         // numbers the ac_fprop_input calls of the context (0: none)
} ac_input;

typedef struct {
    ac_policy pol;
    ac_scaler scaler;
    int n_layers;         // site instances 0..n_layers-1 are per layer; n_layers is model-level
    ac_telemetry telemetry;
    uint64_t seed, step;  // stochastic rounding key: (seed, step, micro, site, layer, orientation)
    int micro;            // micro-batch within the step (ac_begin_micro)
    float *hist;          // delayed scaling: [AC_NSITES][n_layers+1][pol.amax_history] amaxes
    int64_t *hist_count;  // [AC_NSITES][n_layers+1] amaxes pushed so far
    ac_tel *tel;          // [AC_NSITES][n_layers+1], reset by ac_begin_step
    float *buf[AC_NSLOTS];  // cast outputs, buf_cap floats each
    size_t buf_cap;
    // Emulated accumulators only (NULL otherwise), buf_cap floats each: the expanded K-block
    // scales of the operand in buf[i], and the scratch of ac_cast_operand (the dequantized
    // values it does not return, the tile scales before expansion).
    float *op_scales[AC_NSLOTS], *op_deq, *op_tiles;
    uint64_t upd_n, upd_swamped, upd_changed;  // weight update telemetry of this step
    ac_cast_hook hook;    // NULL unless a caller observes the casts (set after ac_init)
    void *hook_user;
    // Cast sharing between a projection's products (ac_fprop_input .. ac_wgrad_operands).
    ac_held held[AC_NSLOTS];
    ac_input *inputs;     // [AC_NPROJ][n_layers+1]
    uint64_t gen, calls;  // ac_fprop_input calls; product-level calls
    // Set by the trainer's gradient-noise telemetry around a second backward of the same
    // forward: ac_dgrad_operands and ac_wgrad_operands then return their operands uncast, for
    // float32 products (no emulated accumulator), and count nothing.
    bool exact_backward;
    // Delayed scaling under recompute (ac_layer_mark, ac_replay_begin/end; NULL without delayed
    // scaling): each layer's histories as its counted forward found them, [n_layers+1][sites],
    // and the present ones of the layer being replayed.
    float *mark_hist, *now_hist;
    int64_t *mark_count, *now_count;
    bool replay;          // uncounted casts push their amax (a recompute replaying its forward)
} ac_ctx;

// max_operand: the largest tensor (in floats) that will be cast out of place.
int ac_init(ac_ctx *c, const ac_policy *p, int n_layers, uint64_t seed, ac_telemetry t,
            size_t max_operand, char *msg, size_t msg_len);
void ac_free(ac_ctx *c);
static inline bool ac_active(const ac_ctx *c, ac_site s) { return c && c->pol.site[s].active; }

// Starts optimizer step `step` (resets the telemetry) and micro-batch `micro` within it. The
// stochastic-rounding draws of a cast depend only on (seed, step, micro, site, layer,
// orientation), so recomputing a block in backward draws the same bits as its forward did.
void ac_begin_step(ac_ctx *c, uint64_t step);
void ac_begin_micro(ac_ctx *c, int micro);

// A recomputed forward casts as its counted forward did. Under delayed scaling each counted
// cast pushes its amax before the next cast of its site reads the history (q's weight before
// k's), so the recompute of `layer` must start from the histories that forward found and push
// the same amaxes: ac_layer_mark(c, layer) before the layer's counted forward keeps its sites'
// histories; ac_replay_begin(c, layer) puts them back (keeping the present ones) and makes
// uncounted casts push (no telemetry); ac_replay_end(c, layer) puts the present ones back.
// No-ops without delayed scaling (or c NULL).
void ac_layer_mark(ac_ctx *c, int layer);
void ac_replay_begin(ac_ctx *c, int layer);
void ac_replay_end(ac_ctx *c, int layer);

// A cast request: which site's rule, for which layer, in which orientation, counted or not,
// and into which scratch buffer. Name the fields: {.site = AC_QKV_IN, .layer = l, .count = true}.
typedef struct {
    ac_site site;
    int layer;    // -1 (or n_layers): model level
    bool k_rows;  // the matmul sums along the rows of x (x is the right-hand operand of the
                  // product, or a transposed left one): 1-D block scales run down columns;
                  // false: along rows
    bool count;   // add to the telemetry and, for delayed scaling, push the amax to the
                  // history (false for the second orientation of a tensor and for recomputed
                  // forwards, which then reproduce the first cast)
    int slot;     // 0..AC_NSLOTS-1: the buffer c->buf[slot] that receives the cast
} ac_cast_req;

// The values of x (rows, cols), row-major, cast as r says into c->buf[r->slot] and returned;
// x itself when the site is inactive (or c is NULL).
const float *ac_cast(ac_ctx *c, const ac_cast_req *r, const float *x, size_t rows, size_t cols);
// The same in place (for tensors that are stored in the format: residual, saved activations,
// gradients, AdamW moments).
void ac_cast_inplace(ac_ctx *c, ac_site s, int layer, float *x, size_t rows, size_t cols, bool count);

// --- a cast as a plan: the host decides, an executor computes
//
// ac_cast's rule for one cast without its data, so that an executor elsewhere (the CUDA kernels
// of kernels/cast_cuda.h, on device pointers) computes the cast and hands back what it counted:
//   ac_cast_plan_make    what the cast does for (site, layer, rows, cols, orientation, count) in
//                        the current step and micro-batch: the format, rounding options with the
//                        stochastic-rounding key (seed, stream, offset 0: element i draws counter
//                        i, row-major), the oriented recipe, and for delayed scaling the scale
//                        from the amax history (pre = scale, post = 1/scale);
//   ac_cast_plan_run     the cast on an executor (the host library, or the CUDA kernels);
//   ac_cast_plan_finish  what the cast counted, fed back as ac_cast records it: the amax joins the
//                        delayed-scaling history and the counts the telemetry (count only).
// ac_cast and ac_cast_inplace are these three steps on the host (cast_into), so the rule exists
// once. Make, run and finish one cast before the next plan of the same site and layer is made:
// a counted delayed cast moves the history that the next one reads. Not covered: the operands of
// emulated accumulators (ac_cast_operand: element values and scales apart) and the Hadamard
// rotation of wgrad's operands (ac_hadamard16); the cast hook is not called.
typedef enum {
    AC_PLAN_COPY,      // inactive site: out = x (nothing to run or finish)
    AC_PLAN_ROUND,     // out = round(x * pre) * post, fmt_round_f32_scaled (delayed scaling)
    AC_PLAN_QUANTIZE,  // out = fmt_quantize_f32(x) under scaling (recipe none: element rounding)
} ac_plan_kind;

typedef struct {
    ac_plan_kind kind;
    ac_site site;
    int layer;
    size_t rows, cols;
    bool k_rows, count;
    fmt_t fmt;             // the site's element format
    fmt_round_opts round;  // mode, overflow, sr bits; seed, stream and offset of this cast
    fmt_scaling scaling;   // QUANTIZE: the recipe, tiles swapped for k_rows
    float pre, post;       // ROUND: the delayed scale and its reciprocal (1 while no history)
    bool one_scale;        // QUANTIZE with a single scale for the tensor: finish wants its value
                           // (the telemetry's scale), so run writes it
} ac_cast_plan;

// The plan of cast r (r->slot is not read) of a rows x cols tensor. AC_EINVAL for a site or layer
// out of range (-1..n_layers) or c NULL; else AC_OK. Reads c; changes nothing.
int ac_cast_plan_make(const ac_ctx *c, const ac_cast_req *r, size_t rows, size_t cols, ac_cast_plan *p);
// What the run counted, as ac_cast records it (nothing unless p->count; COPY: nothing): st the
// counts of the values rounded (fmt_stats: for ROUND those of x * pre), one_scale the tensor's
// tile scale (p->one_scale; else not read), tensor_scale fmt_quant_info's (QUANTIZE).
void ac_cast_plan_finish(ac_ctx *c, const ac_cast_plan *p, const fmt_stats *st, float one_scale, float tensor_scale);
// The same from a host copy of kernels/cast_cuda.h's counters (MM_CUDA_NCOUNTS, as the run
// filled them from zero).
void ac_cast_plan_finish_counts(ac_ctx *c, const ac_cast_plan *p, const uint64_t *counts, float one_scale);

// Executors of a plan.
typedef enum {
    AC_EXEC_HOST,  // the host library (fmt_round_f32_scaled, fmt_quantize_f32): what ac_cast computes
    AC_EXEC_CUDA,  // kernels/cast_cuda.h on device pointers and stream (a cudaStream_t; NULL: default)
} ac_exec;
// out (rows x cols; out == in allowed) = the cast of in as p says, on executor e. counts (may be
// NULL: nothing counted; else MM_CUDA_NCOUNTS uint64 zeroed by the caller, in the executor's
// memory) receive kernels/cast_cuda.h's counters; one_scale (1 float, the executor's memory)
// the single tile scale where p->one_scale (may be NULL when nothing is counted). CUDA: asynchronous
// on stream, nothing copied to the host. Returns kernels/cast_cuda.h's statuses: MM_OK, MM_EINVAL
// (a plan the executor refuses, an unknown executor; COPY, which is not run: the caller keeps in),
// MM_ENODEV (CUDA: no device, or a build without nvcc), MM_ENOMEM.
int ac_cast_plan_run(const ac_cast_plan *p, ac_exec e, float *out, float *one_scale, const float *in,
                     uint64_t *counts, void *stream);

// Whether x's cast for site s has the same bits along rows as along columns (k_rows), so that
// one cast serves both products: an active site without delayed scaling (whose history the
// first cast moves) or stochastic rounding (whose draws are keyed by the orientation), and
// without block scales, with square tiles (16x16, 128x128: the same grid both ways) or with one
// scale for the whole of the rows x cols tensor (asked of a 0 x 0 tensor: at every size).
bool ac_cast_orientation_free(const ac_ctx *c, ac_site s, size_t rows, size_t cols);

// The accumulator the policy emulates for a matmul, or NULL when it accumulates in plain
// float32 (or c is NULL).
const mm_acc *ac_emulated_acc(const ac_ctx *c, ac_proj p, ac_pass pass);

// ac_cast for a product with an emulated accumulator, which needs the element values and their
// scales apart (scaled_mm.h): x cast as r says, as ac_cast would (the same rounding, telemetry
// and delayed-scaling history), but *op gets the element values q (in c->buf[r->slot]), the
// recipe's scales expanded along K (c->op_scales[r->slot]) and the tensor scale (delayed
// scaling: 1/scale), as side A or B of the product, transposed where x's storage asks (see
// mm_operand_from_tiles). q * scales * tensor scale is the value ac_cast returns, up to the
// last bit when a scale is not a power of two. Needs an emulated accumulator in the policy (the
// buffers) and an active site; x must not be c->buf[r->slot].
void ac_cast_operand(ac_ctx *c, const ac_cast_req *r, const float *x, size_t rows, size_t cols, mm_side side,
                     mm_operand *op);

// --- the operands of a projection's products
//
// A projection multiplies in llm.c's storage, all row-major: the input x (N, IC), the weight W
// (OC, IC), the output gradient dout (N, OC).
//   fprop  out (N, OC) = x W^T         A = x (.in),     B = W (.w),   summed along IC
//   dgrad  dx (N, IC) = dout W          A = dout (.grad), B = W (.w),  summed along OC
//   wgrad  dW (OC, IC) = dout^T x       A = dout (.grad), B = x (.in), summed along N
// These functions cast both operands of one product for the policy (orientation, scratch
// buffer, counting) and hand them over as float32 values, or as element values and scales
// for an accumulator the policy emulates. A cast is not made again where its bits are at hand:
// - fprop's input cast serves wgrad as it is where it has the same bits in both orientations
//   (ac_cast_orientation_free), both products take float32 values, the policy has no Hadamard
//   rotation and no hook observes the casts: ac_fprop_input then casts x in place (where the
//   request allows it), and ac_wgrad_operands uses x as it finds it;
// - wgrad's cast of x (after its Hadamard rotation) serves the next wgrad of the same input
//   (k and v after q, up after gate): same projection, layer, x and shape, same step and
//   micro-batch, no ac_fprop_input of that projection and layer since, nothing else written
//   to its buffer since, no hook;
// - wgrad's cast of dout is dgrad's where the dgrad of the same dout was the call just before
//   and the two orientations have the same bits (as above), or the rule is delayed scaling
//   (deterministic, no Hadamard rotation, no hook) whose scale the amax that dgrad's cast pushed
//   did not move: the scale wgrad's cast would take is computed and compared;
// - dgrad's cast of W is the forward's where the caller kept it (g->w_cast: the values its
//   fprop multiplied by, of this W, step and layer), W's rule casts alike in both orientations
//   and no hook observes the casts. A caller without a tensor of its own for that cast (the C
//   trainer) hands fprop a buffer (g->w_keep) where ac_keeps_w_cast says it serves, and that
//   buffer to dgrad as g->w_cast.
// The caller's part: x stays as fprop left it until the backward of that projection is done,
// and dout is not changed between its dgrad and its wgrad (saved activations and gradients,
// as any training loop keeps them).

// One product of a projection: where it runs and its sizes (name the fields).
typedef struct {
    ac_proj proj;
    int layer;         // -1..n_layers (-1 and n_layers: model level; the trainer's head is n_layers)
    size_t N, IC, OC;  // x (N, IC), W (OC, IC), dout (N, OC)
    bool recompute;    // a forward run again for backward: the same casts, nothing counted
    bool in_place_ok;  // fprop: x may be overwritten by its cast (only this projection reads it)
    const float *w_cast;  // dgrad: the forward's cast of W (.w, OC x IC), kept by the caller; NULL: none
    float *w_keep;        // fprop: OC x IC floats that receive W's cast where ac_keeps_w_cast; NULL: none
} ac_gemm_req;

// Whether fprop of g casts W into g->w_keep (when given) and dgrad of the same projection may
// take that cast as g->w_cast: both products in float32, W's rule alike in both orientations
// (ac_cast_orientation_free), no hook. False when c is NULL.
bool ac_keeps_w_cast(const ac_ctx *c, const ac_gemm_req *g);

// The operands of one product, cast: float32 values (acc NULL) or element values and scales
// for the accumulator the policy emulates (acc set). Valid until the next cast into their
// buffers (the next call of these functions may reuse them).
typedef struct {
    const mm_acc *acc;
    const float *a, *b;   // acc NULL: A and B as float32 values (autocast's buffers or the inputs)
    mm_operand A, B;      // acc set
    unsigned reused;      // AC_REUSED_* bits: a cast not made again (for tests)
} ac_operands;
enum { AC_REUSED_INPUT = 1, AC_REUSED_WGRAD_X = 2, AC_REUSED_DGRAD_DOUT = 4, AC_REUSED_FPROP_W = 8 };

// fprop's input x (N, IC), cast once for every product of the projection that reads it (q, k and
// v; gate and up): into *in, in buffer 0, or in x itself (see above; x is written only then).
void ac_fprop_input(ac_ctx *c, const ac_gemm_req *g, float *x, ac_operands *in);
// The operands of fprop out = x W^T, from the cast input *in and the weight w (OC, IC) (buffer 1).
void ac_fprop_operands(ac_ctx *c, const ac_gemm_req *g, const ac_operands *in, const float *w, ac_operands *o);
// The operands of dgrad dx = dout W (buffers 0 and 1).
void ac_dgrad_operands(ac_ctx *c, const ac_gemm_req *g, const float *dout, const float *w, ac_operands *o);
// The operands of wgrad dW = dout^T x, both rotated first under the policy's Hadamard transform
// (buffers 0 and 1 hold the rotations, 2 and 3 the casts), reusing the casts listed above.
void ac_wgrad_operands(ac_ctx *c, const ac_gemm_req *g, const float *dout, const float *x, ac_operands *o);

// The random Hadamard transform of the NVFP4 recipe: out = (1/4) H16 D x on each group of 16
// rows of x (rows, cols), with H16 the 16-point Walsh-Hadamard matrix and D a diagonal of random
// signs drawn from (seed, step); a ragged last group is copied unchanged. Applied to both
// operands of a product along its summed dimension it changes nothing in exact arithmetic
// (H16 D is orthogonal) but spreads outliers across each block before quantization.
void ac_hadamard16(const ac_ctx *c, float *out, const float *x, size_t rows, size_t cols);

// For sites rounded inside an op (attention scores and probabilities): the rule's format and
// rounding options with the keyed stochastic-rounding stream of (site, layer); false when the
// site is inactive. ac_add_stats then counts what the op reports (unless count is false).
bool ac_plain_opts(const ac_ctx *c, ac_site s, int layer, const fmt_t **fmt, fmt_round_opts *o);
void ac_add_stats(ac_ctx *c, ac_site s, int layer, const fmt_stats *st, bool count);

// After an optimizer step computed p (float32) from p_old: stores p in the master site's
// format as the policy's update says (round: nearest; sr: stochastic; kahan: nearest with the
// compensation comp (n floats, zero at the start) carried to the next step), and counts
// swamped (an update that changed p but vanished in the rounding) and changed weights.
// No-op (counts nothing) when the master site is inactive. Its draws are keyed by the current
// micro-batch: the trainer and fplab.torch key every step's update as micro-batch 0 (one update
// a step, the same draws on every data-parallel rank).
void ac_round_update(ac_ctx *c, float *p, const float *p_old, float *comp, size_t n);
// The same for elements first .. first + n - 1 of the weights' flat vector (one tensor of it,
// comp its part): stochastic rounding draws by that index, so tensor by tensor in any order is
// one call over the whole vector, bit for bit (telemetry and counts included).
void ac_round_update_at(ac_ctx *c, float *p, const float *p_old, float *comp, size_t n, size_t first);

// An optimizer step over one tensor of n weights p with the policy's weight side in the same
// pass (each array read and written once, not once more per site): chunk by chunk,
// step(user, i0, m) updates elements i0 .. i0 + m - 1 of p and of the optimizer's states in
// float32, elementwise (element i's new values from element i's alone; called from several
// threads at once, on disjoint chunks); then that chunk's update is rounded as
// ac_round_update_at(c, p, p_before_the_step, comp, n, first) rounds it, and state k cast as
// ac_cast_inplace(c, sites[k], -1, states[k], n, 1, true) casts it (its draws from counter 0 of
// the state). The same bits, counts and telemetry as the step over all n followed by those
// calls: a state whose cast is not elementwise with a scale known in advance (a block or
// current-scaling recipe), or any state while a cast hook is set, is cast after the pass by
// ac_cast_inplace itself (so are states past the first AC_STEP_MAX_STATES). c NULL: the step
// alone.
enum { AC_STEP_MAX_STATES = 4 };
typedef void (*ac_step_fn)(void *user, size_t i0, size_t m);
void ac_step_fused(ac_ctx *c, float *p, float *comp, size_t n, size_t first, float *const *states,
                   const ac_site *sites, int n_states, ac_step_fn step, void *user);

// Writes the telemetry of the step as JSON members: ,"sites":{...},"update":{...} (nothing
// when telemetry is off or nothing was counted), through util/json.h's writers.
void ac_write_json(const ac_ctx *c, FILE *f);

// One optimizer step as its JSON log line reports it: the trainer's --log (trainer/train.c)
// and fplab.torch's end_step write it through ac_write_step_line, so the two logs are one
// schema, read back by experiments/runlog.h.
typedef struct {
    long long step;                 // steps done (1 after the first)
    double loss, lr, grad_norm;     // NaN is written "nan" (jx_write_num), as the reader takes it
    double tokens_per_s, elapsed_s; // timing, at %.1f and %.3f
    double loss_scale;              // the scaler's scale the step ran with
    bool skipped;                   // the loss scaler skipped the step
    double val_loss;                // NaN: no validation this step, the member left out
    // Members the caller adds after the telemetry (the trainer's "comm"), each written as
    // ,"name":value; NULL: none. Autocast knows nothing of what they hold.
    void (*more)(FILE *f, const void *arg);
    const void *more_arg;
} ac_step_fields;

// Writes the step line: {"step","loss","lr","grad_norm","tokens_per_s","elapsed_s",
// "loss_scale","skipped"[,"val_loss"]} with c's telemetry (ac_write_json; c NULL: none) and
// the caller's members before the closing brace; no newline (a JSON-lines writer adds it).
void ac_write_step_line(FILE *f, const ac_step_fields *s, const ac_ctx *c);


// The delayed-scaling amax histories, [AC_NSITES][n_layers+1][amax_history] floats (*n of them),
// for callers that keep several contexts alike (the ranks of a distributed run reduce them);
// NULL and 0 when no active site of the policy scales from a history.
float *ac_amax_histories(ac_ctx *c, size_t *n);

// State for checkpoints, version 2: a header of six uint32 (AC_STATE_MAGIC, AC_STATE_VERSION,
// the number of sites S = AC_NSITES, n_layers, amax_history, 0), a flat byte image of the loss
// scaler (the ac_scaler struct), then int64 hist_count[S][n_layers+1], then float
// hist[S][n_layers+1][amax_history]. Version 1 (fplab 0.2.0) is the same without the header,
// with S = AC_NSITES_V1. Sites are only appended (policy.h), so site k of an image with S sites
// is this build's site k; the sites it lacks load as a fresh run starts them (no amax pushed).
// The magic, read as the float32 that opens a version-1 image (its loss scale), is negative,
// so the two versions cannot be mistaken for each other.
#define AC_STATE_MAGIC 0xff736361u  // the bytes "acs\xff"
enum { AC_STATE_VERSION = 2, AC_STATE_HEADER_BYTES = 6 * 4 };
size_t ac_state_bytes(const ac_ctx *c);  // of the version-2 image ac_state_save writes
void ac_state_save(const ac_ctx *c, void *out);
// Largest count the state may hold (amaxes pushed, steps skipped, scale changes): 2^53, far
// above any run and exact in a double.
#define AC_STATE_MAX_COUNT ((int64_t)1 << 53)
// Checks an image (version 2, or version 1) against c's policy and model before anything is
// loaded: the header (the version; 1 to AC_NSITES sites: more is a state from a newer fplab;
// the model's layers and the policy's amax_history) and the size it implies; the loss scale
// positive and finite (1 for loss_scale none, the policy's scale for static, at least min for
// dynamic, with good_steps below its interval); the scaler's counts in [0, AC_STATE_MAX_COUNT]
// (none: no skips; none and static: no scale changes); each slot's amax count in
// [0, AC_STATE_MAX_COUNT] and 0 for sites without delayed scaling; history entries >= 0 (not
// NaN) where pushed and 0 past the count. AC_EINVAL with a message naming the field (msg may
// be NULL), else AC_OK. Reads only; c is not changed.
int ac_state_check(const ac_ctx *c, const void *in, size_t n, char *msg, size_t msg_len);
// ac_state_check, then the image into c; AC_EINVAL (c unchanged) when the check fails.
int ac_state_load(ac_ctx *c, const void *in, size_t n);

#endif
