// dist_train.c: the distributed steps of the training loop (see train_internal.h and
// docs/distributed.md): agreement at start, the gradient reduction of data parallelism, the
// parameter averaging of local SGD and DiLoCo's outer Nesterov step, and the per-rank state
// that local SGD adds to a checkpoint.
// Constraints: every function is collective (all ranks call it, in the same order, with the same
// decisions), so a rank never waits for a call the others skip; with one process and the plain
// float32 wire they do nothing, and the trainer is bitwise the single-process one.
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/train_internal.h"

// --- setup and agreement

int train__dist_setup(train_run_state *r, char *msg, size_t msg_len) {
    train_dist *d = &r->dist;
    const size_t n = r->m.n_params;
    size_t sizes[LP_COUNT];
    llama_param_sizes(&r->m.cfg, sizes);
    d->nseg = 0, d->seg[0] = 0;
    for (int p = 0; p < LP_COUNT; p++)
        if (sizes[p]) d->seg[d->nseg + 1] = d->seg[d->nseg] + sizes[p], d->nseg++;
    d->local = r->o.local_sgd > 0;
    dist_wire wire, gather;
    if (dist_wire_parse(&wire, "--comm", r->o.comm, msg, msg_len) != DIST_OK) return -1;
    const bool own_gather = r->o.comm_gather[0];
    if (own_gather && dist_wire_parse(&gather, "--comm-gather", r->o.comm_gather, msg, msg_len) != DIST_OK) return -1;
    if ((d->w.size > 1 || wire.active || (own_gather && gather.active)) &&
        dist_reducer_init(&d->red, &d->w,
                          &(dist_reducer_opts){.wire = &wire, .gather = own_gather ? &gather : NULL,
                                               .wire_accum = !strcmp(r->o.comm_accum, "wire"),
                                               .ef = r->o.error_feedback == 1, .n = n, .seg = d->seg, .nseg = d->nseg},
                          msg, msg_len) != DIST_OK)
        return -1;
    if (r->o.accum > 1 && !(d->micro = malloc(n * sizeof *d->micro))) goto oom;
    if (!(d->micro_loss = calloc((size_t)d->w.size * r->o.accum, sizeof *d->micro_loss))) goto oom;
    if (d->local) {
        if (!(d->anchor = malloc(n * sizeof *d->anchor))) goto oom;
        memcpy(d->anchor, r->m.params, n * sizeof *d->anchor);
        if (!strcmp(r->o.outer_opt, "nesterov") && !(d->outer_buf = calloc(n, sizeof *d->outer_buf))) goto oom;
    }
    return 0;
oom:
    snprintf(msg, msg_len, "out of memory for the distributed buffers (%zu parameters)", n);
    return -1;
}

void train__dist_free(train_dist *d) {
    dist_reducer_free(&d->red);
    free(d->micro), free(d->micro_loss), free(d->anchor), free(d->outer_buf), free(d->ckbuf);
    d->micro = d->anchor = d->outer_buf = d->ckbuf = NULL, d->micro_loss = NULL;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

// What must be the same on every rank: the options that shape the run (not the run-only ones),
// the data, the weights every rank starts from (the last sync's, with local SGD) and the step.
static uint64_t fingerprint(const train_run_state *r) {
    train_opts o = r->o, d;
    train_opts_default(&d);
    size_t n;
    const train_opt_desc *t = train_opt_table(&n);
    for (size_t i = 0; i < n; i++)
        if (t[i].run_only) memcpy((char *)&o + t[i].offset, (const char *)&d + t[i].offset, t[i].size);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {  // each option's text, on the stack: nothing here can fail
        char v[TRAIN_PATH_MAX + 8];
        train_opt_get(&o, &t[i], v, sizeof v);
        h = fnv(h, t[i].name, strlen(t[i].name) + 1), h = fnv(h, v, strlen(v) + 1);
    }
    // Run-only options that still decide which steps hold a collective (a checkpoint's agreement,
    // local SGD's gather of per-rank state): whether there is a checkpoint, how often, and the
    // step this invocation stops at. Ranks that differ here would meet different collectives.
    const long every = r->o.ckpt_every, stop = r->o.stop_at, ckpt = r->o.ckpt_dir[0] != 0;
    h = fnv(h, &every, sizeof every), h = fnv(h, &stop, sizeof stop), h = fnv(h, &ckpt, sizeof ckpt);
    h = fnv(h, &r->data.set.n_tokens, sizeof r->data.set.n_tokens);
    h = fnv(h, &r->data.set.n_train, sizeof r->data.set.n_train);
    h = fnv(h, r->data.set.tokens, r->data.set.n_tokens * sizeof *r->data.set.tokens);
    h = fnv(h, r->dist.local ? r->dist.anchor : r->m.params, r->m.n_params * sizeof(float));
    h = fnv(h, &r->st.step, sizeof r->st.step);
    return fnv(h, &r->st.batches_drawn, sizeof r->st.batches_drawn);
}

int train__dist_agree(train_run_state *r, int rc, char *msg, size_t msg_len) {
    if (!dist_min_int(&r->dist.w, rc == 0)) {
        if (rc == 0) snprintf(msg, msg_len, "rank %d: another rank refused to start (its message says why)",
                              r->dist.w.rank);
        return -1;
    }
    if (r->dist.w.size == 1 || rc != 0) return rc;
    // Rank 0's fingerprint to all, then the lowest rank whose own differs: two collectives that
    // every rank reaches (nothing between them can fail; an allocation here once let a rank skip
    // the gather and hang the others).
    const uint64_t mine = fingerprint(r);
    uint64_t fp0 = mine;
    dist_bcast(&r->dist.w, &fp0, sizeof fp0, 0);
    const int bad = dist_min_int(&r->dist.w, mine != fp0 ? r->dist.w.rank : INT_MAX);
    if (bad == INT_MAX) return 0;
    if (bad == r->dist.w.rank)
        snprintf(msg, msg_len, "the ranks disagree on their options, data or starting weights: rank %d's fingerprint "
                 "%016llx is not rank 0's %016llx (every rank must be given the same options, --ckpt-dir, "
                 "--ckpt-every and --stop-at included, and see the same --data and --resume files)", bad,
                 (unsigned long long)mine, (unsigned long long)fp0);
    else
        snprintf(msg, msg_len, "the ranks disagree on their options, data or starting weights: rank %d's fingerprint "
                 "is not rank 0's (every rank must be given the same options, --ckpt-dir, --ckpt-every and "
                 "--stop-at included, and see the same --data and --resume files)", bad);
    return -1;
}

// --- data parallel

void train__dist_allreduce_grads(train_run_state *r, uint64_t step) {
    if (r->dist.local || !r->dist.red.n) return;  // one process on the plain wire: nothing to do
    dist_allreduce_sum(&r->dist.red, &r->dist.w, r->m.grads, r->st.seed, step);
    // The optimizer reads the gradient in its policy format: the sum is stored in it too
    // (uncounted: the site counted each micro-batch already), with the same draws on every rank
    // (keyed as micro-batch K = ranks x accum, one past the step's last: no micro-batch's cast
    // shares its stream), so that stochastic rounding leaves the ranks replicas.
    ac_begin_micro(&r->prec.ac, r->dist.w.size * r->o.accum);
    ac_cast_inplace(&r->prec.ac, AC_GRADS, -1, r->m.grads, r->m.n_params, 1, false);
}

// Delayed scaling: the amaxes of this step, pushed into every rank's histories, are replaced by
// their maximum over the ranks (Transformer Engine reduces amaxes over its data-parallel group
// the same way), so every rank scales alike and rank 0's histories, which the checkpoint keeps,
// are every rank's. The whole history is reduced: an older entry is already the same everywhere.
void train__dist_reduce_amax(train_run_state *r) {
    size_t n;
    float *hist = ac_amax_histories(&r->prec.ac, &n);
    if (r->dist.w.size > 1 && hist) dist_max_f32(&r->dist.w, hist, n);
}

// --- local SGD and DiLoCo

bool train__dist_synced(const train_run_state *r, long step) {
    return !r->dist.local || (step + 1) % r->o.local_sgd == 0 || step + 1 == r->o.steps;
}

void train__dist_sync_params(train_run_state *r, long step) {
    train_dist *d = &r->dist;
    if (!d->local || !train__dist_synced(r, step)) return;
    const size_t n = r->m.n_params;
    float *p = r->m.params;
    const float N = (float)d->w.size;  // division by N, as a mean is computed
    if (d->outer_buf) {
        // DiLoCo: the outer gradient is the mean over the ranks of (anchor - local weights);
        // Nesterov as torch.optim.SGD (dampening 0): b = mu b + g; p = anchor - lr (g + mu b).
        float *delta = r->m.grads;  // free between steps
        for (size_t i = 0; i < n; i++) delta[i] = d->anchor[i] - p[i];
        if (d->red.n) dist_allreduce_sum(&d->red, &d->w, delta, r->st.seed, (uint64_t)step);
        const float mu = r->o.outer_momentum, lr = r->o.outer_lr;
        for (size_t i = 0; i < n; i++) {
            const float g = delta[i] / N;
            d->outer_buf[i] = mu * d->outer_buf[i] + g;
            p[i] = d->anchor[i] - lr * (g + mu * d->outer_buf[i]);
        }
    } else if (d->red.n) {
        // Accelerate's LocalSGD: the parameters themselves are averaged.
        dist_allreduce_sum(&d->red, &d->w, p, r->st.seed, (uint64_t)step);
        for (size_t i = 0; i < n; i++) p[i] = p[i] / N;
    }
    ac_cast_inplace(&r->prec.ac, AC_MASTER, -1, p, n, 1, false);  // stored weights stay in their format
    memcpy(d->anchor, p, n * sizeof *p);
}

// --- checkpoint

int train__dist_ckpt_sections(train_run_state *r, ckpt_section *sec) {
    train_dist *d = &r->dist;
    const size_t n = r->m.n_params, N = (size_t)d->w.size;
    const bool ef = d->red.ef;
    if (!d->local && !ef) return 0;
    // rank_p, rank_m, rank_v: ranks 1..N-1 (rank 0's are the main sections); ef: ranks 0..N-1
    const size_t per = d->local ? 3 * (N - 1) * n : 0, all = per + (ef ? N * n : 0);
    if (d->w.rank == 0 && !d->ckbuf && !(d->ckbuf = malloc((all ? all : 1) * sizeof(float))))
        dist_abort(&d->w, "out of memory gathering the ranks' state for a checkpoint");
    float *b = d->ckbuf;
    int k = 0;
    if (d->local) {
        const float *src[3] = {r->m.params, r->optim.adam_m, r->optim.adam_v};
        static const char *const tag[3] = {"rank_p", "rank_m", "rank_v"};
        for (int j = 0; j < 3; j++) {
            dist_gather_to0(&d->w, b ? b + j * (N - 1) * n : NULL, src[j], n);
            sec[k++] = (ckpt_section){.data = b ? b + j * (N - 1) * n : NULL, .nbytes = (N - 1) * n * sizeof(float)};
            snprintf(sec[k - 1].tag, sizeof sec[k - 1].tag, "%s", tag[j]);
        }
        sec[k++] = (ckpt_section){.tag = "anchor", .data = d->anchor, .nbytes = n * sizeof(float)};
        if (d->outer_buf)
            sec[k++] = (ckpt_section){.tag = "outer_m", .data = d->outer_buf, .nbytes = n * sizeof(float)};
    }
    if (ef) {
        float *e = b ? b + per : NULL;
        if (e) memcpy(e, d->red.resid, n * sizeof *e);
        dist_gather_to0(&d->w, e ? e + n : NULL, d->red.resid, n);
        sec[k++] = (ckpt_section){.tag = "ef_resid", .data = e, .nbytes = N * n * sizeof(float)};
    }
    return k;
}

static const ckpt_section *need(const ckpt_file *f, const char *tag, size_t bytes, const char *path, char *msg,
                                size_t msg_len) {
    const ckpt_section *s = ckpt_find(f, tag);
    if (!s || s->nbytes != bytes)
        snprintf(msg, msg_len, "checkpoint '%s': section '%s' %s (expected %zu bytes for its --local-sgd, "
                 "--outer-opt and --error-feedback)", path, tag, s ? "has the wrong size" : "is missing", bytes);
    return s && s->nbytes == bytes ? s : NULL;
}

int train__dist_ckpt_load(train_run_state *r, const ckpt_file *f, const char *path, char *msg, size_t msg_len) {
    train_dist *d = &r->dist;
    const size_t n = r->m.n_params, pb = n * sizeof(float);
    const size_t old = r->st.ranks > 1 ? (size_t)r->st.ranks : 1, src = (size_t)d->w.rank % old;
    if (d->local) {
        const ckpt_section *a = need(f, "anchor", pb, path, msg, msg_len);
        if (!a) return -1;
        memcpy(d->anchor, a->data, pb);
        if (d->outer_buf) {
            const ckpt_section *m = need(f, "outer_m", pb, path, msg, msg_len);
            if (!m) return -1;
            memcpy(d->outer_buf, m->data, pb);
        }
        float *dst[3] = {r->m.params, r->optim.adam_m, r->optim.adam_v};
        static const char *const tag[3] = {"rank_p", "rank_m", "rank_v"};
        for (int j = 0; j < 3; j++) {
            const ckpt_section *s = need(f, tag[j], (old - 1) * pb, path, msg, msg_len);
            if (!s) return -1;
            if (src > 0) memcpy(dst[j], (const char *)s->data + (src - 1) * pb, pb);
        }
    }
    if (d->red.ef) {
        const ckpt_section *e = need(f, "ef_resid", old * pb, path, msg, msg_len);
        if (!e) return -1;
        memcpy(d->red.resid, (const char *)e->data + src * pb, pb);
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(r->m.params[i]) || !isfinite(r->optim.adam_m[i]) ||
            !(r->optim.adam_v[i] >= 0 && isfinite(r->optim.adam_v[i])) || (d->anchor && !isfinite(d->anchor[i])) ||
            (d->red.ef && !isfinite(d->red.resid[i]))) {
            snprintf(msg, msg_len, "checkpoint '%s': rank %zu's state holds a value that is not finite", path, src);
            return -1;
        }
    return 0;
}
