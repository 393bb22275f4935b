// train.c: the training loop (see train.h), read top to bottom like llm.c's: set up, then per
// optimizer step: forward/backward over the micro-batches, unscale, clip, update, check, log,
// evaluate, checkpoint. Setup is train_setup.c, the checkpoint train_ckpt.c.
// Constraints: every random choice is keyed by (seed, index) (initialisation, batches), so the
// state to resume is the parameters, the AdamW moments and the step count. A step that leaves
// the loss, the gradients or the weights non-finite, and that the loss scaler did not skip,
// stops the run before anything is saved: the last checkpoint stays the last good one.
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/llama_ops.h"
#include "trainer/optim.h"
#include "trainer/run_env_internal.h"
#include "trainer/train_internal.h"
#include "util/json.h"

// --- one optimizer step

// The mean loss over the fixed validation batches. Batch i is evaluated by rank i mod N and the
// losses summed in batch order, so the value is the single-process one; with local SGD between
// syncs the ranks hold different weights, and rank 0 evaluates its own alone.
static float eval_loss(train_run_state *r, long step) {
    const train_data *d = &r->data;
    const double t0 = fio_now();
    const int E = r->o.eval_batches, N = r->dist.w.size;
    const bool alone = !train__dist_synced(r, step);
    double *l = calloc((size_t)E, sizeof *l), sum = 0.0;
    if (!l) dist_abort(&r->dist.w, "out of memory for the validation losses");
    r->m.uncounted = true;  // evaluation casts leave telemetry and amax histories alone
    for (int i = 0; i < E; i++) {
        if (alone ? r->dist.w.rank != 0 : i % N != r->dist.w.rank) continue;
        data_batch(&d->set, 1, r->st.seed, (uint64_t)i, d->B, d->T, d->x, d->y);
        l[i] = llama_forward(&r->m, d->x, d->y, d->B, d->T);
    }
    r->m.uncounted = false;
    if (alone) dist_bcast(&r->dist.w, l, (size_t)E * sizeof *l, 0);
    else dist_sum_disjoint_f64(&r->dist.w, l, (size_t)E);
    for (int i = 0; i < E; i++) sum += l[i];
    free(l);
    r->run.eval_s += fio_now() - t0;
    return (float)(sum / E);
}

// grads (and its views) pointed at buf: a micro-batch's backward into a buffer of its own.
static void grads_into(llama_model *m, float *buf) {
    m->grads = buf;
    llama_tensors_carve(&m->g, &m->cfg, buf);
}

// dst += src, element by element (a micro-batch's gradient into the step's).
static void add_into(float *dst, const float *src, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

// The gradient-noise telemetry's reference (train_noise): micro-batch a's backward once more
// with autocast's exact_backward (float32 products of the operands uncast; the forward's casts
// stay, recomputed blocks included), into noise.ref (a = 0) or noise.micro, added to it in
// order. Nothing is cast or counted: the policy's gradients and autocast's state are unchanged.
static void exact_backward(train_run_state *r, int a) {
    float *keep = r->m.grads, *ref = r->noise.ref, *micro = r->noise.micro;
    grads_into(&r->m, a == 0 ? ref : micro);
    llama_zero_grad(&r->m);
    r->prec.ac.exact_backward = true;
    llama_backward_again(&r->m, r->data.x);
    r->prec.ac.exact_backward = false;
    grads_into(&r->m, keep);
    if (a > 0) add_into(ref, micro, r->m.n_params);
}

// ||g_exact|| and ||g_policy - g_exact||, unscaled (S: the loss scale both carry), each a
// sequential double sum (the same bits at every thread count; one pass every N steps).
static void noise_norms(train_run_state *r, float S) {
    const float *g = r->m.grads, *ref = r->noise.ref;
    double ss = 0, dd = 0;
    for (size_t i = 0; i < r->m.n_params; i++) {
        const double d = (double)g[i] - ref[i];
        ss += (double)ref[i] * ref[i], dd += d * d;
    }
    r->noise.exact_norm = sqrt(ss) / S, r->noise.noise_norm = sqrt(dd) / S;
}

// Forward and backward over this rank's micro-batches of the step; returns the mean loss over
// all N x accum of them. Rank r takes micro-batches j = a N + r (a < accum) of the batch
// sequence one process would draw, with the same cast keys, so N ranks x accum A take the data
// of one process x accum N A. Each loss is scaled by S over the number of micro-batches whose
// gradients the update sums (N A; with local SGD the rank's own A). The first micro-batch's
// backward goes into the zeroed gradients, each later one into a buffer of its own, added in
// order: the sum is ((g_0 + g_1) + g_2) + ..., the order the ranks' reduction continues.
static float forward_backward(train_run_state *r, float S) {
    const train_data *d = &r->data;
    const int N = r->dist.w.size, A = r->o.accum, K = N * A;
    const float scale = S / (float)(r->dist.local ? A : K);
    float *grads = r->m.grads;
    llama_zero_grad(&r->m);
    memset(r->dist.micro_loss, 0, (size_t)K * sizeof *r->dist.micro_loss);
    for (int a = 0; a < A; a++) {
        const int j = a * N + r->dist.w.rank;
        ac_begin_micro(&r->prec.ac, j);
        data_batch(&d->set, 0, r->st.seed, (uint64_t)(r->st.batches_drawn + j), d->B, d->T, d->x, d->y);
        const double t0 = fio_now();
        r->dist.micro_loss[j] = llama_forward(&r->m, d->x, d->y, d->B, d->T);
        const double t1 = fio_now();
        if (a > 0) grads_into(&r->m, r->dist.micro), llama_zero_grad(&r->m);
        llama_backward(&r->m, d->x, d->y, scale);
        if (a > 0) {
            grads_into(&r->m, grads);
            add_into(grads, r->dist.micro, r->m.n_params);
        }
        ac_cast_inplace(&r->prec.ac, AC_GRADS, -1, r->m.grads, r->m.n_params, 1, true);
        r->run.fwd_s += t1 - t0, r->run.bwd_s += fio_now() - t1;
        if (r->noise.now) exact_backward(r, a);
    }
    r->st.batches_drawn += K;
    dist_sum_disjoint_f64(&r->dist.w, r->dist.micro_loss, (size_t)K);
    double lsum = 0;
    for (int j = 0; j < K; j++) lsum += r->dist.micro_loss[j];
    return (float)(lsum / K);
}

// AdamW (its t counts applied steps) or SGD with momentum, whose buffer is adam_m (the first
// moment's place; adam_v stays zero), so checkpoints, resume and local SGD carry it unchanged.
// The policy's weight side (the master rounding, the moments' casts) runs in the same pass.
static void optimizer_step(train_run_state *r, float lr) {
    if (r->optim.sgd) {
        const sgd_opts so = {lr, r->o.momentum, r->o.weight_decay};
        sgd_step_policy(r->m.params, r->optim.adam_m, r->m.grads, &r->m.cfg, &so, &r->prec.ac, r->optim.kahan);
        return;
    }
    const adamw_opts ao = {lr, r->o.beta1, r->o.beta2, r->o.adam_eps, r->o.weight_decay};
    adamw_step_policy(r->m.params, r->optim.adam_m, r->optim.adam_v, r->m.grads, &r->m.cfg, &ao,
                      (long)r->st.applied + 1, &r->prec.ac, r->optim.kahan);
}

// Unscale (in float32), clip, then let the scaler decide: a non-finite gradient skips the step
// when the policy has a loss scaler; without one it would go into the weights, and the caller
// stops instead. The norm (a double sum of float32 squares, which cannot overflow) is finite
// exactly when every gradient is, and clipping leaves non-finite gradients alone.
static void update(train_run_state *r, train_step_out *out) {
    const double t0 = fio_now();
    if (out->scale != 1.0f) {
        const float inv = 1.0f / out->scale;
        float *g = r->m.grads;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < r->m.n_params; i++) g[i] *= inv;
    }
    out->gnorm = clip_grad_norm(r->m.grads, r->m.n_params, r->o.grad_clip);
    // Data parallel: every rank holds the same gradients. Local SGD: each its own, and the
    // scaler skips on every rank when one rank's are not finite, so the scalers stay equal.
    const bool finite = dist_min_int(&r->dist.w, isfinite(out->gnorm));
    out->skipped = ac_scaler_update(&r->prec.ac.scaler, &r->prec.pol.scaler, finite);
    const lr_schedule sched = {r->o.lr, r->o.lr_min, r->o.warmup, r->o.steps};
    out->lr = lr_at(&sched, (long)r->st.applied);
    if (!out->skipped && finite) {
        // One update a step: its draws (the master rounding, the moments') are micro-batch 0's on
        // every rank, whatever the accumulation, so the ranks stay replicas and R ranks x A
        // micro-batches update as one process x R A (micro 0's stream: these sites cast nowhere
        // else, and runs without accumulation keep their bits). Local SGD's ranks each update
        // their own weights: each draws its own (micro-batch `rank`), as independent devices do.
        ac_begin_micro(&r->prec.ac, r->dist.local ? r->dist.w.rank : 0);
        optimizer_step(r, out->lr);
        r->st.applied++;
    }
    r->run.opt_s += fio_now() - t0;
}

// Whether no x[i] is inf or NaN (an all-ones exponent field): one branch-free pass of integer
// ors the compiler vectorises (a float sum of x * 0 was one add's latency per element).
static bool all_finite(const float *x, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

// Why the step cannot go on (NULL: it can). A step the scaler skipped changed nothing. Every
// rank decides the same: when one rank's step went wrong, all stop.
static const char *non_finite(const train_run_state *r, const train_step_out *s) {
    const char *why = r->m.fault ? "a product with the policy's emulated accumulator could not get its buffers "
                                   "(out of memory): its result is not a number"
                      : s->skipped ? NULL
                      : !isfinite(s->loss) ? "the training loss is not finite"
                      : !isfinite(s->gnorm) ? "a gradient is not finite and the policy has no loss scaler to skip the step"
                      : !all_finite(r->m.params, r->m.n_params) ? "a weight is not finite after the update"
                                                                 : NULL;
    const int worst = dist_max_int(&r->dist.w, why ? r->dist.w.rank + 1 : 0);
    if (!why && worst) return "another rank's step was not finite (local SGD: its gradient or weights)";
    return why;
}

// --- logging

// The step line's "comm" member: what the reductions of this step put on the wire.
static void log_comm(FILE *f, const void *arg) {
    const train_run_state *r = arg;
    const dist_comm_tel *c = &r->dist.comm;
    fprintf(f, ",\"comm\":{\"ranks\":%d,\"wire\":", r->dist.w.size);
    jx_write_str(f, r->dist.red.wire.name);
    fputs(",\"gather\":", f), jx_write_str(f, r->dist.red.gather.name);
    fprintf(f, ",\"n\":%llu,\"overflow\":%llu,\"underflow\":%llu,\"nan\":%llu,\"swamped\":%llu,"
            "\"bytes\":%.0f,\"seconds\":%.6f}",
            (unsigned long long)c->n, (unsigned long long)c->overflow, (unsigned long long)c->underflow,
            (unsigned long long)c->nan, (unsigned long long)c->swamped, c->bytes, c->seconds);
}

// The step line's members after the telemetry: "comm" (reductions) and "grad_noise".
static void log_more(FILE *f, const void *arg) {
    const train_run_state *r = arg;
    if (r->dist.red.n) log_comm(f, arg);
    if (r->noise.now) {
        fputs(",\"grad_noise\":{\"exact_norm\":", f), jx_write_num(f, r->noise.exact_norm, 9);
        fputs(",\"noise_norm\":", f), jx_write_num(f, r->noise.noise_norm, 9);
        fputc('}', f);
    }
}

static void log_step(train_run_state *r, long step, const train_step_out *s) {
    FILE *f = r->out.log;
    const double el = fio_now() - r->run.t_start;
    const double tps =
        (double)(step + 1 - r->run.first_step) * r->dist.w.size * r->o.accum * r->data.B * r->data.T / el;
    if (f) {
        const ac_step_fields line = {.step = step + 1, .loss = s->loss, .lr = s->lr, .grad_norm = s->gnorm,
                                     .tokens_per_s = tps, .elapsed_s = el, .loss_scale = s->scale,
                                     .skipped = s->skipped, .val_loss = s->val,
                                     .more = r->dist.red.n || r->noise.now ? log_more : NULL, .more_arg = r};
        ac_write_step_line(f, &line, &r->prec.ac);
        fputc('\n', f);
    }
    if (r->dist.w.rank == 0 && (r->out.progress || !isnan(s->val))) {
        char eta[32], val[32] = "-";
        fio_fmt_duration(el / (double)(step + 1 - r->run.first_step) * (double)(r->o.steps - step - 1), eta,
                         sizeof eta);
        if (!isnan(r->st.last_val_loss)) snprintf(val, sizeof val, "%.4f", r->st.last_val_loss);
        fprintf(stderr, "%sstep %ld/%ld | loss %.4f | val %s | lr %.2e | %.0f tok/s | scale %g | ETA %s%s",
                r->out.progress ? "\r" : "", step + 1, r->o.steps, s->loss, val, s->lr, tps, s->scale, eta,
                r->out.progress && isnan(s->val) ? "   " : "\n");
    }
}

// After the run's first step, the kernels that ran the policy's emulated and engine products
// (llama_model.mm_paths: e.g. "engine-fast" for hopper:wgmma on fp8, with the outputs left to the
// engine's scalar model), so that the log says which path the run took. None: no line.
static void log_mm_paths(const train_run_state *r, long step) {
    FILE *f = r->out.log;
    if (!f || !r->m.mm_paths[0].kernel) return;
    fprintf(f, "{\"event\":\"mm_paths\",\"step\":%ld,\"paths\":[", step + 1);
    for (int i = 0; i < LLAMA_MM_PATHS && r->m.mm_paths[i].kernel; i++) {
        fputs(i ? ",{\"kernel\":" : "{\"kernel\":", f), jx_write_str(f, r->m.mm_paths[i].kernel);
        fprintf(f, ",\"products\":%lld,\"outputs\":%llu,\"model_outputs\":%llu}", r->m.mm_paths[i].products,
                r->m.mm_paths[i].outputs, r->m.mm_paths[i].model_outputs);
    }
    fputs("]}\n", f);
}

static void log_failed(const train_run_state *r, long step, int err, char *msg, size_t msg_len) {
    snprintf(msg, msg_len, "--log '%s': write failed at step %ld: %s; the run stopped there%s", r->out.log_path,
             step, strerror(err), r->out.ckpt_path[0] ? " (its checkpoint keeps the last state it saved: resume "
                                                        "from it once the log can be written)" : "");
}

// The log's last line: how the run ended, for a reader of the log alone.
static void log_end(train_run_state *r, const char *how, const char *why) {
    FILE *f = r->out.log;
    if (!f) return;
    fputs("{\"event\":\"end\",\"how\":", f), jx_write_str(f, how);
    fprintf(f, ",\"step\":%lld,\"applied\":%lld,\"skipped\":%lld", (long long)r->st.step,
            (long long)r->st.applied, (long long)r->prec.ac.scaler.skipped);
    if (why) fputs(",\"reason\":", f), jx_write_str(f, why);
    fputs("}\n", f);
    fflush(f);
}

// Whether what the log was given so far reached the file: flushed (a line per step, so a
// reader sees the run as it goes and a full disk is found at the step it fills), and no write
// failed. A log that cannot be written stops the run: a run that says "done" with its log cut
// or missing has lost its record. Every rank learns the outcome (rank 0 alone writes), so all
// stop together; -1 with a message when the log failed.
static int log_written(train_run_state *r, long step, char *msg, size_t msg_len) {
    FILE *f = r->out.log;
    errno = 0;
    const bool ok = !f || (fflush(f) == 0 && !ferror(f));
    const int e = errno ? errno : EIO;
    if (dist_min_int(&r->dist.w, ok)) return 0;
    if (ok) snprintf(msg, msg_len, "rank 0 could not write the log (its message says why)");
    else log_failed(r, step, e, msg, msg_len);
    return -1;
}

// Rank 0 writes (the others take part in gathering local SGD's per-rank state); every rank
// learns whether the write worked, so all stop together when it did not.
static int maybe_checkpoint(train_run_state *r, long step, bool last, bool stop, char *msg, size_t msg_len) {
    if (!r->o.ckpt_dir[0] || !(last || stop || (r->o.ckpt_every > 0 && (step + 1) % r->o.ckpt_every == 0)))
        return 0;
    const int st = train__save_checkpoint(r, msg, msg_len);
    if (!dist_min_int(&r->dist.w, st == 0)) {
        if (st == 0) snprintf(msg, msg_len, "rank 0 could not write the checkpoint (its message says why)");
        return -1;
    }
    return 0;
}

// --- the run

// A test hook (tests/dist_test.sh): FPLAB_TEST_KILL=RANK:STEP kills that rank with SIGKILL as
// the step starts, as a crashed machine would; the job must end with a message, not hang. Read
// once, before the loop: the step this rank dies at, or -1.
static long test_kill_step(const train_run_state *r) {
    const char *k = getenv("FPLAB_TEST_KILL");
    int rank;
    long at;
    return k && sscanf(k, "%d:%ld", &rank, &at) == 2 && rank == r->dist.w.rank ? at : -1;
}

static void report(const train_run_state *r, float loss, train_report *rep) {
    if (!rep) return;
    rep->steps_done = (long)r->st.step;
    rep->steps_run = (long)r->st.step - r->run.first_step;
    rep->final_loss = loss;
    rep->final_val_loss = r->st.last_val_loss;
    rep->seconds = fio_now() - r->run.t_start;
    rep->tokens_per_s = (double)(r->st.step - r->run.first_step) * r->dist.w.size * r->o.accum * r->data.B *
                        r->data.T / rep->seconds;
    rep->fwd_s = r->run.fwd_s, rep->bwd_s = r->run.bwd_s, rep->opt_s = r->run.opt_s, rep->eval_s = r->run.eval_s;
    rep->n_params = r->m.n_params;
    rep->rank = r->dist.w.rank, rep->ranks = r->dist.w.size;
    rep->skipped = (long)r->prec.ac.scaler.skipped;
    rep->applied = (long)r->st.applied;
    rep->loss_scale = r->prec.ac.scaler.scale;
}

// FP4's stall (--stall-switch): a measured step whose exact gradient is shorter than the
// threshold times the backward's quantization noise (Chmiel et al. 2025: r < sqrt(3)). The step
// line already holds both norms; the event names the switch that follows.
static bool stalled(train_run_state *r, long step) {
    if (!r->noise.now || !r->o.stall_switch[0] || !(r->noise.exact_norm < r->o.stall_ratio * r->noise.noise_norm))
        return false;
    if (r->out.log) {
        fprintf(r->out.log, "{\"event\":\"stall\",\"step\":%ld,\"ratio\":%.9g,\"threshold\":%.9g,\"switch_to\":",
                step + 1, r->noise.exact_norm / r->noise.noise_norm, r->o.stall_ratio);
        jx_write_str(r->out.log, r->o.stall_switch), fputs("}\n", r->out.log);
    }
    if (r->out.progress) fputc('\n', stderr);
    fprintf(stderr, "step %ld: ||g|| / ||g_policy - g|| = %.3g < %g (--stall-ratio): checkpointed; continuing "
                    "under %s\n", step + 1, r->noise.exact_norm / r->noise.noise_norm, r->o.stall_ratio,
            r->o.stall_switch);
    return true;
}

static int run_once(const train_opts *o, const char *resume, const bool *given, train_report *rep, char *ckpt,
                    char *switch_to, char *msg, size_t msg_len);

// A run that stalls (--stall-switch) ends its first part with a checkpoint and continues in a
// second part resumed from it under the new policy: the same code and the same bits as
// `fplab train --resume CKPT --switch-policy P` (tests/test_train.c).
int train_run(const train_opts *o, const char *resume, const bool *given, train_report *rep, char *msg,
              size_t msg_len) {
    char ckpt[FIO_PATH_MAX] = "", to[TRAIN_PATH_MAX] = "";
    const int st = run_once(o, resume, given, rep, ckpt, to, msg, msg_len);
    if (st != TRAIN_OK || !to[0]) return st;
    train_opts next = *o;
    snprintf(next.switch_policy, sizeof next.switch_policy, "%s", to);
    size_t n;
    const train_opt_desc *t = train_opt_table(&n);
    bool gave[n];
    for (size_t i = 0; i < n; i++)
        gave[i] = (given ? given[i] : true) || !strcmp(t[i].name, "switch-policy");
    char unused_ckpt[FIO_PATH_MAX] = "", unused_to[TRAIN_PATH_MAX] = "";  // the switched run's trigger is cleared
    return run_once(&next, ckpt, gave, rep, unused_ckpt, unused_to, msg, msg_len);
}

// One invocation's training; a stall names the checkpoint and the policy to continue under.
static int run_once(const train_opts *o, const char *resume, const bool *given, train_report *rep, char *ckpt,
                    char *switch_to, char *msg, size_t msg_len) {
    train_run_state r;
    if (train__setup(&r, o, resume, given, msg, msg_len) != 0) {
        train__free(&r);
        return TRAIN_EREFUSED;
    }
    if (r.out.log) {
        fputs("{\"event\":\"start\",\"policy\":", r.out.log), jx_write_str(r.out.log, r.prec.pol.name);
        fprintf(r.out.log, ",\"seed\":%llu,\"model\":", (unsigned long long)r.o.seed);
        jx_write_str(r.out.log, r.o.model);
        fprintf(r.out.log, ",\"steps\":%ld,\"tokens_per_step\":%ld,\"resumed_from\":%lld,\"ranks\":%d", r.o.steps,
                (long)r.dist.w.size * r.o.accum * r.o.batch * r.data.T, (long long)r.st.step, r.dist.w.size);
        train__log_env(r.out.log, r.o.reproducible);
        fputs("}\n", r.out.log);
        if (r.run.switched_from[0]) {
            fprintf(r.out.log, "{\"event\":\"switch\",\"step\":%lld,\"from\":", (long long)r.st.step);
            jx_write_str(r.out.log, r.run.switched_from);
            fputs(",\"to\":", r.out.log), jx_write_str(r.out.log, r.prec.pol.name);
            fputs("}\n", r.out.log);
        }
    }
    if (r.run.switched_from[0] && r.dist.w.rank == 0)
        fprintf(stderr, "switching the policy from %s to %s at step %lld (--switch-policy): weights, moments, data "
                        "position and schedule continue; autocast's state starts afresh\n",
                r.run.switched_from, r.prec.pol.name, (long long)r.st.step);
    if (r.run.steps_before > 0) {  // an extended run: the schedule over the new total, from here on
        const lr_schedule was = {r.o.lr, r.o.lr_min, r.o.warmup, r.run.steps_before};
        const lr_schedule now = {r.o.lr, r.o.lr_min, r.o.warmup, r.o.steps};
        const float lr_was = lr_at(&was, (long)r.st.applied), lr_now = lr_at(&now, (long)r.st.applied);
        if (r.out.log)
            fprintf(r.out.log, "{\"event\":\"extend\",\"step\":%lld,\"steps_before\":%ld,\"steps\":%ld,"
                               "\"lr_before\":%.9g,\"lr\":%.9g,\"schedule\":\"cosine over the new total\"}\n",
                    (long long)r.st.step, r.run.steps_before, r.o.steps, lr_was, lr_now);
        if (r.dist.w.rank == 0)
            fprintf(stderr, "extending the run from %ld to %ld steps at step %lld: the cosine schedule is "
                            "recomputed over %ld steps (lr %g here, was %g)\n", r.run.steps_before, r.o.steps,
                    (long long)r.st.step, r.o.steps, lr_now, lr_was);
    }
    r.run.t_start = fio_now();
    r.run.first_step = (long)r.st.step;
    // The validation loss of the initial weights (fresh runs that validate): the curves of a
    // report start at step 0. Uncounted casts, stateless batches: the run itself is unchanged.
    if (r.run.first_step == 0 && r.o.eval_every > 0) {
        const float v0 = eval_loss(&r, -1);
        if (r.out.log) fprintf(r.out.log, "{\"event\":\"val\",\"at_step\":0,\"val_loss\":%.9g}\n", v0);
    }
    float loss = NAN;
    int rc = log_written(&r, r.run.first_step, msg, msg_len) == 0 ? 0 : TRAIN_EFAILED;
    const long kill_at = test_kill_step(&r);
    for (long step = r.run.first_step; rc == 0 && step < r.o.steps; step++) {
        if (step == kill_at) {
            fprintf(stderr, "fplab: rank %d: FPLAB_TEST_KILL: killing myself at step %ld\n", r.dist.w.rank, step);
            raise(SIGKILL);
        }
        ac_begin_step(&r.prec.ac, (uint64_t)step);
        r.dist.comm = r.dist.red.tel = (dist_comm_tel){0};
        train_step_out s = {.scale = r.prec.ac.scaler.scale, .val = NAN};
        r.noise.now = r.o.grad_noise_every > 0 && (step + 1) % r.o.grad_noise_every == 0;
        s.loss = loss = forward_backward(&r, s.scale);
        if (r.noise.now) noise_norms(&r, s.scale);
        train__dist_allreduce_grads(&r, (uint64_t)step);
        update(&r, &s);
        train__dist_sync_params(&r, step);
        train__dist_reduce_amax(&r);
        r.dist.comm = r.dist.red.tel;
        const char *bad = non_finite(&r, &s);
        if (bad) {
            log_step(&r, step, &s);
            if (step == r.run.first_step) log_mm_paths(&r, step);
            const char *hint = r.m.fault ? "Free memory or use a smaller --batch"
                               : r.out.ckpt_path[0] ? "The checkpoint holds the last good state; lower --lr or use a "
                                                      "policy with a loss scaler"
                                                    : "Lower --lr or use a policy with a loss scaler";
            snprintf(msg, msg_len, "step %ld: %s (loss %g, gradient norm %g, lr %g); stopped. %s", step + 1, bad,
                     s.loss, s.gnorm, s.lr, hint);
            log_end(&r, "non-finite", msg);
            rc = TRAIN_EFAILED;
            break;
        }
        r.st.step = step + 1;
        if (rep && rep->losses && (size_t)step < rep->losses_cap) rep->losses[step] = s.loss;
        const bool last = step + 1 == r.o.steps;
        const bool stop = r.o.stop_at > 0 && step + 1 >= r.o.stop_at && !last;
        if (last || (r.o.eval_every > 0 && (step + 1) % r.o.eval_every == 0))
            s.val = r.st.last_val_loss = eval_loss(&r, step);
        log_step(&r, step, &s);
        if (step == r.run.first_step) log_mm_paths(&r, step);
        const bool stall = !last && stalled(&r, step);
        if (log_written(&r, step + 1, msg, msg_len) != 0 ||
            maybe_checkpoint(&r, step, last, stop || stall, msg, msg_len) != 0) {
            rc = TRAIN_EFAILED;
            break;
        }
        if (stall) {
            snprintf(ckpt, FIO_PATH_MAX, "%s", r.out.ckpt_path);
            snprintf(switch_to, TRAIN_PATH_MAX, "%s", r.o.stall_switch);
            break;
        }
        if (stop && r.dist.w.rank == 0) {
            fprintf(stderr, "%sstopped at step %ld of %ld (--stop-at); continue with: fplab train --resume %s\n",
                    r.out.progress ? "\n" : "", step + 1, r.o.steps,
                    r.out.ckpt_path[0] ? r.out.ckpt_path : "(nothing to resume: no --ckpt-dir was given)");
        }
        if (stop) break;
    }
    if (rc == 0 && r.dist.w.rank == 0) {
        const long ran = (long)r.st.step - r.run.first_step;
        const long skipped = (long)r.prec.ac.scaler.skipped;
        if (r.st.step > 0 && r.st.applied == 0) {
            fprintf(stderr, "warning: all %lld optimizer steps were skipped by the loss scaler (non-finite "
                            "gradients at loss scale %g): the weights never changed\n",
                    (long long)r.st.step, r.prec.ac.scaler.scale);
            log_end(&r, "all-skipped", "every optimizer step was skipped by the loss scaler");
        } else {
            log_end(&r, r.st.step == r.o.steps ? "done" : switch_to[0] ? "stalled" : "stopped", NULL);
            if (skipped > 0 && ran > 0)
                fprintf(stderr, "note: %ld of %lld optimizer steps were skipped by the loss scaler\n", skipped,
                        (long long)r.st.step);
        }
    }
    // The log's last bytes reach the file before the run says how it went.
    if (r.out.log) {
        FILE *f = r.out.log;
        r.out.log = NULL;
        errno = 0;
        const bool ok = fflush(f) == 0 && !ferror(f);
        const int e = errno ? errno : EIO;
        if ((fclose(f) != 0 || !ok) && rc == 0) {
            log_failed(&r, (long)r.st.step, ok ? (errno ? errno : EIO) : e, msg, msg_len);
            rc = TRAIN_EFAILED;
        }
    }
    if (r.out.progress && rc != 0) fputc('\n', stderr);
    report(&r, loss, rep);
    train__free(&r);
    return rc;
}
