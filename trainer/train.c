// train.c: the training loop (see train.h): micro-batches with gradient accumulation, global-
// norm clipping, AdamW on a warmup + cosine schedule, validation on a fixed set of batches,
// atomic checkpoints, a progress line and a JSON-lines log; resume from a checkpoint.
// Constraints: every random choice is keyed by (seed, index) (initialisation, batches), so the
// state to resume is the parameters, the AdamW moments and the step count.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kernels/llama_ops.h"
#include "autocast/autocast.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/optim.h"
#include "trainer/train.h"

// mkdir -p: the directory and its missing parents; 0 if it exists at the end.
static int mkdir_p(const char *path) {
    char buf[TRAIN_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    struct stat st;
    return stat(buf, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// The training state section: what a resumed run needs besides parameters and moments.
typedef struct {
    int64_t step;           // optimizer steps done (applied or skipped by the loss scaler)
    int64_t applied;        // optimizer steps applied: the schedule and AdamW's t count these
    int64_t batches_drawn;  // micro-batches drawn from the training split (the data position)
    uint64_t seed;          // the key of every random draw (no other generator state exists)
    float last_val_loss;
    int32_t pad;
} train_state;

typedef struct {
    train_opts o;
    llama_model m;
    data_set data;
    float *adam_m, *adam_v;
    float *p_old, *kahan;  // low-precision weights: the weights before the update; Kahan's
                           // compensation (float32)
    ac_policy pol;
    char *pol_text;        // the policy as text (saved in checkpoints; resume parses it)
    ac_ctx ac;
    train_state st;
    int B, T;
    int32_t *x, *y;  // (B, T)
    FILE *log;
    char ckpt_path[TRAIN_PATH_MAX + 16];
} run;

static void run_free(run *r) {
    llama_free(&r->m);
    data_free(&r->data);
    free(r->adam_m), free(r->adam_v), free(r->x), free(r->y), free(r->p_old), free(r->kahan);
    free(r->pol_text);
    ac_free(&r->ac);
    if (r->log) fclose(r->log);
}

// --- options as text ("key value" lines), for the checkpoint and the printout

static size_t opts_text(const train_opts *o, char *buf, size_t cap) {
    size_t n, len = 0;
    const train_opt_desc *t = train_opt_table(&n);
    for (size_t i = 0; i < n; i++) {
        char v[TRAIN_PATH_MAX + 8];
        train_opt_get(o, &t[i], v, sizeof v);
        len += (size_t)snprintf(buf ? buf + len : NULL, buf ? cap - len : 0, "%s %s\n", t[i].name, v);
    }
    return len;
}

static int opts_from_text(train_opts *o, const char *text, size_t n, char *msg, size_t msg_len) {
    train_opts_default(o);
    char *copy = strndup(text, n), *save = NULL;
    int st = copy ? 0 : -1;
    for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL; line && !st; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        if (!sp) continue;
        *sp = 0;
        st = train_opt_set(o, line, sp + 1, msg, msg_len);
    }
    free(copy);
    return st;
}


static void print_config(FILE *f, const train_opts *o, const llama_config *c, size_t n_params) {
    fprintf(f, "fplab train: model dim %d, layers %d, heads %d (kv %d), hidden %d, vocab %d, "
               "seq_len %d, %s head, rope_theta %g, norm_eps %g: %zu parameters\n",
            c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->hidden_dim, c->vocab_size, c->seq_len,
            c->tied ? "tied" : "untied", c->rope_theta, c->norm_eps, n_params);
    size_t n;
    const train_opt_desc *t = train_opt_table(&n);
    fprintf(f, "  options:");
    for (size_t i = 0; i < n; i++) {
        char v[TRAIN_PATH_MAX + 8];
        train_opt_get(o, &t[i], v, sizeof v);
        fprintf(f, "%s--%s %s", i % 6 == 5 ? "\n    " : " ", t[i].name, v[0] ? v : "''");
    }
    fprintf(f, "\n");
}

// --- checkpoint

static int save_checkpoint(run *r, char *msg, size_t msg_len) {
    unsigned char cfg[CKPT_CONFIG_BYTES];
    ckpt_config_pack(cfg, &r->m.cfg);
    const size_t vbytes = ckpt_vocab_pack(NULL, &r->data.vocab), obytes = opts_text(&r->o, NULL, 0);
    unsigned char *voc = malloc(vbytes);
    char *opt = malloc(obytes + 1);
    if (!voc || !opt) {
        free(voc), free(opt);
        snprintf(msg, msg_len, "out of memory writing a checkpoint");
        return -1;
    }
    ckpt_vocab_pack(voc, &r->data.vocab);
    opts_text(&r->o, opt, obytes + 1);
    const size_t pb = r->m.n_params * sizeof(float), ab = ac_state_bytes(&r->ac);
    void *acs = malloc(ab);
    if (!acs) {
        free(voc), free(opt);
        snprintf(msg, msg_len, "out of memory writing a checkpoint");
        return -1;
    }
    ac_state_save(&r->ac, acs);
    ckpt_section s[] = {
        {"config", cfg, sizeof cfg}, {"params", r->m.params, pb}, {"adam_m", r->adam_m, pb},
        {"adam_v", r->adam_v, pb},   {"state", &r->st, sizeof r->st}, {"vocab", voc, vbytes},
        {"options", opt, obytes},    {"policy", r->pol_text, strlen(r->pol_text)},
        {"acstate", acs, ab},        {"kahan", r->kahan, r->kahan ? pb : 0},
    };
    const int st = ckpt_write(r->ckpt_path, s, sizeof s / sizeof s[0] - (r->kahan ? 0 : 1), msg, msg_len);
    free(voc), free(opt), free(acs);
    return st == CKPT_OK ? 0 : -1;
}

// Loads everything but the data (which needs the options first) from a checkpoint.
static int load_checkpoint(run *r, const ckpt_file *f, const char *path, char *msg, size_t msg_len) {
    data_vocab v;
    if (ckpt_load_model_from(f, path, &r->m, &v, msg, msg_len) != CKPT_OK) return -1;
    data_vocab_free(&v);  // the data is reloaded with the vocabulary by the caller
    const ckpt_section *am = ckpt_find(f, "adam_m"), *av = ckpt_find(f, "adam_v"), *st = ckpt_find(f, "state");
    const size_t pb = r->m.n_params * sizeof(float);
    if (!am || !av || !st || am->nbytes != pb || av->nbytes != pb || st->nbytes != sizeof r->st) {
        snprintf(msg, msg_len, "checkpoint '%s': optimizer or state section missing or of the wrong "
                 "size (a model-only export cannot be resumed)", path);
        return -1;
    }
    r->adam_m = malloc(pb), r->adam_v = malloc(pb);
    if (!r->adam_m || !r->adam_v) {
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    memcpy(r->adam_m, am->data, pb), memcpy(r->adam_v, av->data, pb);
    memcpy(&r->st, st->data, sizeof r->st);
    return 0;
}

// --- data

static int load_data(run *r, const data_vocab *vocab, char *msg, size_t msg_len) {
    const train_opts *o = &r->o;
    if (!strcmp(o->tokens, "shard"))
        return data_load_shards(&r->data, o->data, o->val_data[0] ? o->val_data : NULL,
                                vocab ? vocab->size : o->vocab_size, msg, msg_len) == DATA_OK ? 0 : -1;
    const data_vocab_kind kind = !strcmp(o->tokens, "byte") ? DATA_VOCAB_BYTE : DATA_VOCAB_CHAR;
    return data_load_text(&r->data, o->data, kind, vocab, msg, msg_len) == DATA_OK ? 0 : -1;
}

// --- the loop

static float eval_loss(run *r) {
    double sum = 0.0;
    r->m.uncounted = true;  // evaluation casts leave telemetry and amax histories alone
    for (int i = 0; i < r->o.eval_batches; i++) {
        data_batch(&r->data, 1, r->st.seed, (uint64_t)i, r->B, r->T, r->x, r->y);
        sum += llama_forward(&r->m, r->x, r->y, r->B, r->T);
    }
    r->m.uncounted = false;
    return (float)(sum / r->o.eval_batches);
}

static void fmt_duration(char *buf, size_t len, double s) {
    if (!isfinite(s) || s < 0) s = 0;
    if (s < 60) snprintf(buf, len, "%.0fs", s);
    else if (s < 3600) snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, len, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

// --- precision policy

// The policy: from --policy on a fresh run; from the checkpoint's own copy on resume (so an
// edited policy file cannot change a run halfway).
static int setup_policy(run *r, const ckpt_file *f, const char *path, char *msg, size_t msg_len) {
    if (f) {
        const ckpt_section *ps = ckpt_find(f, "policy");
        if (!ps) {
            snprintf(msg, msg_len, "checkpoint '%s': section 'policy' missing", path);
            return -1;
        }
        r->pol_text = strndup(ps->data, ps->nbytes);
        char origin[TRAIN_PATH_MAX + 32];
        snprintf(origin, sizeof origin, "checkpoint %s", path);
        if (!r->pol_text || ac_policy_parse(&r->pol, r->pol_text, origin, msg, msg_len) != AC_OK) return -1;
    } else {
        if (ac_policy_load(&r->pol, r->o.policy, msg, msg_len) != AC_OK) return -1;
        const size_t n = ac_policy_text(&r->pol, NULL, 0);
        r->pol_text = malloc(n + 1);
        if (!r->pol_text) return -1;
        ac_policy_text(&r->pol, r->pol_text, n + 1);
    }
    // What the trainer does not do yet, refused rather than ignored.
    const char *why = mm_acc_is_emulated(&r->pol.acc) ? "an emulated accumulator (the CPU kernel for it runs "
                                                        "at about 0.1 GFLOP/s: use fplab matmul-check)"
                      : (r->pol.site[AC_ATT_SCORES].active && (!r->pol.site[AC_ATT_SCORES].scaling.none ||
                                                                r->pol.site[AC_ATT_SCORES].delayed)) ||
                                (r->pol.site[AC_ATT_PROBS].active && (!r->pol.site[AC_ATT_PROBS].scaling.none ||
                                                                     r->pol.site[AC_ATT_PROBS].delayed))
                          ? "a scaling recipe on attention scores or probabilities (plain rounding only)"
                      : r->pol.hadamard != 0 && r->pol.hadamard != 16 ? "a Hadamard size other than 16"
                                                                        : NULL;
    if (why) {
        snprintf(msg, msg_len, "--policy '%s': %s is not supported by the trainer yet", r->o.policy, why);
        return -1;
    }
    return 0;
}

static int setup_autocast(run *r, const ckpt_file *f, const char *path, char *msg, size_t msg_len) {
    const ac_telemetry tel = !strcmp(r->o.telemetry, "off")      ? AC_TEL_OFF
                             : !strcmp(r->o.telemetry, "layers") ? AC_TEL_LAYERS
                                                                 : AC_TEL_SITES;
    if (ac_init(&r->ac, &r->pol, r->m.cfg.n_layers, r->st.seed, tel,
                llama_max_operand(&r->m.cfg, r->B, r->T), msg, msg_len) != AC_OK)
        return -1;
    r->m.ac = &r->ac;
    const size_t n = r->m.n_params;
    if (r->pol.site[AC_MASTER].active) {
        r->p_old = malloc(n * sizeof *r->p_old);
        if (r->pol.update == AC_UPDATE_KAHAN) r->kahan = calloc(n, sizeof *r->kahan);
        if (!r->p_old || (r->pol.update == AC_UPDATE_KAHAN && !r->kahan)) {
            snprintf(msg, msg_len, "out of memory for the low-precision weight update");
            return -1;
        }
    }
    if (!f) {  // a fresh run stores its initial weights (and zero moments) in their formats
        ac_cast_inplace(&r->ac, AC_MASTER, -1, r->m.params, n, 1, false);
        return 0;
    }
    const ckpt_section *as = ckpt_find(f, "acstate"), *ks = ckpt_find(f, "kahan");
    if (!as || ac_state_load(&r->ac, as->data, as->nbytes) != AC_OK ||
        (r->kahan && (!ks || ks->nbytes != n * sizeof(float)))) {
        snprintf(msg, msg_len, "checkpoint '%s': section '%s' missing or of the wrong size", path,
                 !as ? "acstate" : "kahan");
        return -1;
    }
    if (r->kahan) memcpy(r->kahan, ks->data, ks->nbytes);
    return 0;
}

int train_run(const train_opts *opts, const char *resume, train_report *rep, char *msg, size_t msg_len) {
    run r = {0};
    r.o = *opts;
    const bool resuming = resume && resume[0];
    ckpt_file f = {0};
    data_vocab vocab = {0};
    int rc = -1;
    if (resuming) {
        if (ckpt_read(&f, resume, msg, msg_len) != CKPT_OK) goto out;
        const ckpt_section *os = ckpt_find(&f, "options"), *vs = ckpt_find(&f, "vocab");
        if (!os || !vs || ckpt_vocab_unpack(&vocab, vs) != CKPT_OK) {
            snprintf(msg, msg_len, "checkpoint '%s': section 'options' or 'vocab' missing or malformed", resume);
            goto out;
        }
        if (opts_from_text(&r.o, os->data, os->nbytes, msg, msg_len) != 0) goto out;
        size_t n;  // the run_only options come from the caller
        const train_opt_desc *t = train_opt_table(&n);
        for (size_t i = 0; i < n; i++)
            if (t[i].run_only) memcpy((char *)&r.o + t[i].offset, (const char *)opts + t[i].offset, t[i].size);
    }
    if (train_opts_validate(&r.o, msg, msg_len) != 0) goto out;
    if (setup_policy(&r, resuming ? &f : NULL, resume, msg, msg_len) != 0) goto out;
    llama_ops_threads(r.o.threads);
    if (load_data(&r, resuming ? &vocab : NULL, msg, msg_len) != 0) goto out;
    llama_config cfg;
    if (train_model_config(&cfg, &r.o, r.data.vocab.size, msg, msg_len) != 0) goto out;
    const llama_recompute rcmp = !strcmp(r.o.recompute, "block") ? LLAMA_RECOMPUTE_BLOCK : LLAMA_RECOMPUTE_NONE;
    if (resuming) {
        if (load_checkpoint(&r, &f, resume, msg, msg_len) != 0) goto out;
        r.m.recompute = rcmp;
        const llama_config *k = &r.m.cfg;
        if (k->dim != cfg.dim || k->n_layers != cfg.n_layers || k->n_heads != cfg.n_heads ||
            k->n_kv_heads != cfg.n_kv_heads || k->hidden_dim != cfg.hidden_dim ||
            k->vocab_size != cfg.vocab_size || k->seq_len != cfg.seq_len || k->tied != cfg.tied ||
            k->rope_theta != cfg.rope_theta || k->norm_eps != cfg.norm_eps) {
            snprintf(msg, msg_len, "checkpoint '%s': its model config disagrees with its options", resume);
            goto out;
        }
    } else {
        char why[256];
        if (llama_init(&r.m, &cfg, rcmp, why, sizeof why) != LLAMA_OK) {
            snprintf(msg, msg_len, "%s", why);
            goto out;
        }
        llama_init_weights(&r.m, r.o.seed);
        r.adam_m = calloc(r.m.n_params, sizeof(float)), r.adam_v = calloc(r.m.n_params, sizeof(float));
        r.st = (train_state){.seed = r.o.seed, .last_val_loss = NAN};
    }
    r.B = r.o.batch, r.T = r.o.context > 0 ? r.o.context : cfg.seq_len;
    r.x = malloc((size_t)r.B * r.T * sizeof *r.x), r.y = malloc((size_t)r.B * r.T * sizeof *r.y);
    if (!r.adam_m || !r.adam_v || !r.x || !r.y || llama_reserve(&r.m, r.B, r.T) != LLAMA_OK) {
        snprintf(msg, msg_len, "out of memory for %zu parameters and (B %d, T %d) activations", r.m.n_params, r.B, r.T);
        goto out;
    }
    if (setup_autocast(&r, resuming ? &f : NULL, resume, msg, msg_len) != 0) goto out;
    for (int split = 0; split < 2; split++)
        if (data_batch(&r.data, split, r.st.seed, 0, r.B, r.T, r.x, r.y) != DATA_OK) {
            snprintf(msg, msg_len, "--data '%s': the %s split is shorter than one sequence of %d tokens",
                     r.o.data, split ? "validation" : "training", r.T + 1);
            goto out;
        }
    if (r.o.ckpt_dir[0]) {
        if (mkdir_p(r.o.ckpt_dir) != 0) {
            snprintf(msg, msg_len, "--ckpt-dir '%s': cannot create: %s", r.o.ckpt_dir, strerror(errno));
            goto out;
        }
        snprintf(r.ckpt_path, sizeof r.ckpt_path, "%s/ckpt.bin", r.o.ckpt_dir);
    }
    char log_path[TRAIN_PATH_MAX + 16] = "";
    if (r.o.log[0]) snprintf(log_path, sizeof log_path, "%s", r.o.log);
    else if (r.o.ckpt_dir[0]) snprintf(log_path, sizeof log_path, "%s/log.jsonl", r.o.ckpt_dir);
    if (log_path[0] && !(r.log = fopen(log_path, resuming ? "a" : "w"))) {
        snprintf(msg, msg_len, "--log '%s': cannot open for writing: %s", log_path, strerror(errno));
        goto out;
    }
    if (r.log)
        fprintf(r.log, "{\"event\":\"start\",\"policy\":\"%s\",\"seed\":%llu,\"model\":\"%s\",\"steps\":%ld,"
                       "\"tokens_per_step\":%ld,\"resumed_from\":%lld}\n",
                r.pol.name, (unsigned long long)r.o.seed, r.o.model, r.o.steps,
                (long)r.o.accum * r.o.batch * r.T, (long long)r.st.step);
    const bool progress = r.o.progress < 0 ? isatty(fileno(stderr)) : r.o.progress;
    print_config(stderr, &r.o, &cfg, r.m.n_params);
    if (resuming) fprintf(stderr, "resuming from '%s' at step %lld\n", resume, (long long)r.st.step);

    const lr_schedule sched = {r.o.lr, r.o.lr_min, r.o.warmup, r.o.steps};
    const adamw_opts ao0 = {0, r.o.beta1, r.o.beta2, r.o.adam_eps, r.o.weight_decay};
    const double t_start = now_s();
    const long first = (long)r.st.step;
    float loss = NAN;
    double fwd = 0, bwd = 0, opt = 0, ev = 0;
    for (long step = first; step < r.o.steps; step++) {
        llama_zero_grad(&r.m);
        ac_begin_step(&r.ac, (uint64_t)step);
        const float S = r.ac.scaler.scale;  // the loss scale of this step (1: none)
        double lsum = 0;
        for (int k = 0; k < r.o.accum; k++) {
            ac_begin_micro(&r.ac, k);
            data_batch(&r.data, 0, r.st.seed, (uint64_t)r.st.batches_drawn++, r.B, r.T, r.x, r.y);
            const double t0 = now_s();
            lsum += llama_forward(&r.m, r.x, r.y, r.B, r.T);
            const double t1 = now_s();
            llama_backward(&r.m, r.x, r.y, S / (float)r.o.accum);
            ac_cast_inplace(&r.ac, AC_GRADS, -1, r.m.grads, r.m.n_params, 1, true);
            fwd += t1 - t0, bwd += now_s() - t1;
        }
        loss = (float)(lsum / r.o.accum);
        const double t2 = now_s();
        // Unscale (in float32), then decide: a non-finite gradient skips the step when the
        // policy scales the loss; without loss scaling it goes into the weights, as it would.
        // The norm (a double sum of float32 squares, which cannot overflow) is finite exactly
        // when every gradient is, and clipping leaves non-finite gradients alone.
        if (S != 1.0f) {
            const float inv = 1.0f / S;
            for (size_t i = 0; i < r.m.n_params; i++) r.m.grads[i] *= inv;
        }
        const double gnorm = clip_grad_norm(r.m.grads, r.m.n_params, r.o.grad_clip);
        const bool skip = ac_scaler_update(&r.ac.scaler, &r.pol.scaler, isfinite(gnorm));
        adamw_opts ao = ao0;
        ao.lr = lr_at(&sched, (long)r.st.applied);
        if (!skip) {
            if (r.p_old) memcpy(r.p_old, r.m.params, r.m.n_params * sizeof *r.p_old);
            adamw_step(r.m.params, r.adam_m, r.adam_v, r.m.grads, &r.m.cfg, &ao, (long)r.st.applied + 1);
            if (r.p_old) ac_round_update(&r.ac, r.m.params, r.p_old, r.kahan, r.m.n_params);
            ac_cast_inplace(&r.ac, AC_ADAM_M, -1, r.adam_m, r.m.n_params, 1, true);
            ac_cast_inplace(&r.ac, AC_ADAM_V, -1, r.adam_v, r.m.n_params, 1, true);
            r.st.applied++;
        }
        r.st.step = step + 1;
        opt += now_s() - t2;
        if (rep && rep->losses && (size_t)step < rep->losses_cap) rep->losses[step] = loss;
        const bool stop = r.o.stop_at > 0 && step + 1 >= r.o.stop_at && step + 1 < r.o.steps;
        const bool last = step + 1 == r.o.steps;
        float val = NAN;
        if (last || (r.o.eval_every > 0 && (step + 1) % r.o.eval_every == 0)) {
            const double t3 = now_s();
            val = r.st.last_val_loss = eval_loss(&r);
            ev += now_s() - t3;
        }
        const double el = now_s() - t_start;
        const double tps = (double)(step + 1 - first) * r.o.accum * r.B * r.T / el;
        if (r.log) {
            fprintf(r.log, "{\"step\":%ld,\"loss\":", step + 1);
            ac_json_num(r.log, loss, 9);
            fputs(",\"lr\":", r.log), ac_json_num(r.log, ao.lr, 9);
            fputs(",\"grad_norm\":", r.log), ac_json_num(r.log, gnorm, 9);
            fprintf(r.log, ",\"tokens_per_s\":%.1f,\"elapsed_s\":%.3f,\"loss_scale\":", tps, el);
            ac_json_num(r.log, S, 9);
            fprintf(r.log, ",\"skipped\":%d", skip);
            if (!isnan(val)) fputs(",\"val_loss\":", r.log), ac_json_num(r.log, val, 9);
            ac_write_json(&r.ac, r.log);
            fprintf(r.log, "}\n");
        }
        if (progress || !isnan(val)) {
            char eta[32];
            fmt_duration(eta, sizeof eta, el / (double)(step + 1 - first) * (double)(r.o.steps - step - 1));
            fprintf(stderr, "%sstep %ld/%ld | loss %.4f | val %.4f | lr %.2e | %.0f tok/s | ETA %s%s",
                    progress ? "\r" : "", step + 1, r.o.steps, loss, r.st.last_val_loss, ao.lr, tps, eta,
                    progress && isnan(val) ? "   " : "\n");
        }
        if (r.ckpt_path[0] && (last || stop || (r.o.ckpt_every > 0 && (step + 1) % r.o.ckpt_every == 0))) {
            if (r.log) fflush(r.log);
            if (save_checkpoint(&r, msg, msg_len) != 0) goto out;
        }
        if (stop) {
            fprintf(stderr, "%sstopped at step %ld of %ld (--stop-at); continue with --resume %s\n",
                    progress ? "\n" : "", step + 1, r.o.steps, r.ckpt_path[0] ? r.ckpt_path : "(no --ckpt-dir!)");
            break;
        }
    }
    if (rep) {
        rep->steps_done = (long)r.st.step;
        rep->final_loss = loss;
        rep->final_val_loss = r.st.last_val_loss;
        rep->seconds = now_s() - t_start;
        rep->tokens_per_s = (double)(r.st.step - first) * r.o.accum * r.B * r.T / rep->seconds;
        rep->fwd_s = fwd, rep->bwd_s = bwd, rep->opt_s = opt, rep->eval_s = ev;
        rep->n_params = r.m.n_params;
        rep->skipped = (long)r.ac.scaler.skipped;
        rep->loss_scale = r.ac.scaler.scale;
    }
    rc = 0;
out:
    ckpt_file_free(&f);
    data_vocab_free(&vocab);
    run_free(&r);
    return rc;
}
