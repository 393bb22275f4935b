// train_setup.c: everything a training run does before its first step (see train_internal.h):
// the options (a resumed run's come from its checkpoint), the precision policy, the data, the
// model and optimizer state, autocast, and the output files, which must not be an input of the
// run nor another run's files.
// Constraints: nothing is created or truncated until every check has passed.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/llama_ops.h"
#include "kernels/scaled_mm.h"
#include "trainer/train_internal.h"

// The lock file that makes a run its --ckpt-dir's one writer: "<ckpt.bin>.lock".
static void ckpt_lock_path(const train_run_state *r, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.lock", r->out.ckpt_path);
}

void train__free(train_run_state *r) {
    llama_free(&r->m);
    data_free(&r->data.set);
    free(r->data.x), free(r->data.y);
    free(r->optim.adam_m), free(r->optim.adam_v), free(r->optim.kahan);
    free(r->prec.pol_text);
    ac_free(&r->prec.ac);
    train__dist_free(&r->dist);
    free(r->noise.ref), free(r->noise.micro);
    if (r->out.log) fclose(r->out.log);  // (train_run closes it first, checked, when the run went well)
    r->out.log = NULL;
    char lock[FIO_PATH_MAX + 8];
    ckpt_lock_path(r, lock, sizeof lock);
    fio_unlock(&r->out.ckpt_lock, lock);  // the run is over, however it ended: no lock file stays
}

// --- options

// A resumed run: the checkpoint's options, then the run_only options the caller gave. Those not
// given continue where the checkpoint lives: its directory, that directory's log (appended), and
// the checkpoint's thread count (bitwise resume needs it), telemetry and checkpoint interval;
// --stop-at, --progress and --overwrite start from their defaults. --steps, given and larger than
// the checkpoint's, extends the run: the cosine schedule is then recomputed over the new total
// (from the resume point on, the lr is what a run of that many steps has there), which the log's
// "extend" event records; a smaller --steps is refused.
static int resume_options(train_run_state *r, const train_opts *caller, const bool *given, const ckpt_file *f,
                          const char *path, char *msg, size_t msg_len) {
    const ckpt_section *os = ckpt_find(f, "options");
    if (!os) {
        snprintf(msg, msg_len, "checkpoint '%s': section 'options' missing", path);
        return -1;
    }
    char why[512];
    if (train_opts_from_text(&r->o, os->data, os->nbytes, why, sizeof why) != 0) {
        snprintf(msg, msg_len, "checkpoint '%s': section 'options': %s", path, why);
        return -1;
    }
    train_opts d;
    train_opts_default(&d);
    size_t n;
    const train_opt_desc *t = train_opt_table(&n);
    for (size_t i = 0; i < n; i++) {
        const bool got = given == NULL || given[i];
        char *dst = (char *)&r->o + t[i].offset;
        const char *mine = (const char *)caller + t[i].offset;
        if (t[i].resume == TOPT_RESUME_GROW && given && given[i] && memcmp(dst, mine, t[i].size)) {
            const long was = *(const long *)dst, want = *(const long *)mine;  // GROW options are TOPT_LONG
            if (want < was) {
                snprintf(msg, msg_len, "--%s %ld with --resume: the checkpoint's run has --%s %ld; --%s can only "
                         "extend it", t[i].name, want, t[i].name, was, t[i].name);
                return -1;
            }
            r->run.steps_before = was;
            memcpy(dst, mine, t[i].size);
        }
        if (!t[i].run_only) continue;
        if (got) memcpy(dst, mine, t[i].size);
        else if (t[i].resume == TOPT_RESUME_RESET) memcpy(dst, (const char *)&d + t[i].offset, t[i].size);
        else if (t[i].resume == TOPT_RESUME_HOME) {  // the checkpoint's own directory
            const char *slash = strrchr(path, '/');
            if (!slash) snprintf(dst, t[i].size, ".");
            else snprintf(dst, t[i].size, "%.*s", (int)(slash == path ? 1 : slash - path), path);
        }
    }
    return 0;
}

// --- precision policy

// The policy: from --policy on a fresh run; from the checkpoint's own copy on resume (so an
// edited policy file cannot change a run halfway), unless --switch-policy names the one the
// run continues under (what a schedule of precisions does: the checkpoint's name is kept for
// the log's switch event).
static int setup_policy(train_run_state *r, const ckpt_file *f, char *msg, size_t msg_len) {
    if (f && r->o.switch_policy[0]) {
        const ckpt_section *ps = ckpt_find(f, "policy");
        ac_policy was;
        char tmp[256];
        const char *name = "?";
        char *text = ps ? strndup(ps->data, ps->nbytes) : NULL;
        if (text && ac_policy_parse(&was, text, "checkpoint", tmp, sizeof tmp) == AC_OK) name = was.name;
        free(text);
        snprintf(r->run.switched_from, sizeof r->run.switched_from, "%s", name);
        snprintf(r->o.policy, sizeof r->o.policy, "%s", r->o.switch_policy);
        r->o.stall_switch[0] = '\0';  // a run switches once: its checkpoints no longer carry the trigger
        f = NULL;  // the new policy, loaded as a fresh run loads it
    }
    if (f) {
        const ckpt_section *ps = ckpt_find(f, "policy");
        if (!ps) {
            snprintf(msg, msg_len, "checkpoint '%s': section 'policy' missing", r->run.resume);
            return -1;
        }
        r->prec.pol_text = strndup(ps->data, ps->nbytes);
        char origin[FIO_PATH_MAX + 32];
        snprintf(origin, sizeof origin, "checkpoint %s", r->run.resume);
        if (!r->prec.pol_text || ac_policy_parse(&r->prec.pol, r->prec.pol_text, origin, msg, msg_len) != AC_OK)
            return -1;
    } else {
        if (ac_policy_load(&r->prec.pol, r->o.policy, msg, msg_len) != AC_OK) return -1;
        const size_t n = ac_policy_text(&r->prec.pol, NULL, 0);
        r->prec.pol_text = malloc(n + 1);
        if (!r->prec.pol_text) return -1;
        ac_policy_text(&r->prec.pol, r->prec.pol_text, n + 1);
    }
    // What the trainer does not do yet, refused rather than ignored.
    const ac_rule *sc = &r->prec.pol.site[AC_ATT_SCORES], *pr = &r->prec.pol.site[AC_ATT_PROBS];
    const bool att_recipe = (sc->active && (!sc->scaling.none || sc->delayed)) ||
                            (pr->active && (!pr->scaling.none || pr->delayed));
    const char *why = att_recipe ? "a scaling recipe on attention scores or probabilities (plain rounding only)"
                      : r->prec.pol.hadamard != 0 && r->prec.pol.hadamard != 16 ? "a Hadamard size other than 16"
                                                                                  : NULL;
    if (why) {
        snprintf(msg, msg_len, "--policy '%s': %s is not supported by the trainer yet", r->o.policy, why);
        return -1;
    }
    return 0;
}

static int setup_autocast(train_run_state *r, const ckpt_file *f, char *msg, size_t msg_len) {
    const ac_telemetry tel = !strcmp(r->o.telemetry, "off")      ? AC_TEL_OFF
                             : !strcmp(r->o.telemetry, "layers") ? AC_TEL_LAYERS
                                                                 : AC_TEL_SITES;
    if (ac_init(&r->prec.ac, &r->prec.pol, r->m.cfg.n_layers, r->st.seed, tel,
                llama_max_operand(&r->m.cfg, r->data.B, r->data.T), msg, msg_len) != AC_OK)
        return -1;
    r->m.ac = &r->prec.ac;
    const size_t n = r->m.n_params;
    if (r->prec.pol.site[AC_MASTER].active && r->prec.pol.update == AC_UPDATE_KAHAN) {
        r->optim.kahan = calloc(n, sizeof *r->optim.kahan);
        if (!r->optim.kahan) {
            snprintf(msg, msg_len, "out of memory for the Kahan-compensated weight update");
            return -1;
        }
    }
    if (!f) {  // a fresh run stores its initial weights (and zero moments) in their formats
        ac_cast_inplace(&r->prec.ac, AC_MASTER, -1, r->m.params, n, 1, false);
        return 0;
    }
    const ckpt_section *as = ckpt_find(f, "acstate"), *ks = ckpt_find(f, "kahan");
    char why[512];
    if (!as) {
        snprintf(msg, msg_len, "checkpoint '%s': section 'acstate' missing", r->run.resume);
        return -1;
    }
    if (ac_state_check(&r->prec.ac, as->data, as->nbytes, why, sizeof why) != AC_OK ||
        ac_state_load(&r->prec.ac, as->data, as->nbytes) != AC_OK) {
        snprintf(msg, msg_len, "checkpoint '%s': section 'acstate': %s", r->run.resume, why);
        return -1;
    }
    if (r->optim.kahan && (!ks || ks->nbytes != n * sizeof(float))) {
        snprintf(msg, msg_len, "checkpoint '%s': section 'kahan' missing or not %zu floats", r->run.resume, n);
        return -1;
    }
    if (r->optim.kahan) {
        memcpy(r->optim.kahan, ks->data, ks->nbytes);
        for (size_t i = 0; i < n; i++)
            if (!isfinite(r->optim.kahan[i])) {
                snprintf(msg, msg_len, "checkpoint '%s': section 'kahan': compensation %zu is not finite",
                         r->run.resume, i);
                return -1;
            }
    }
    return 0;
}

// --- data and model

static int load_data(train_run_state *r, const data_vocab *vocab, char *msg, size_t msg_len) {
    const train_opts *o = &r->o;
    if (!strcmp(o->tokens, "shard"))
        return data_load_shards(&r->data.set, o->data, o->val_data[0] ? o->val_data : NULL,
                                vocab ? vocab->size : o->vocab_size, msg, msg_len) == DATA_OK ? 0 : -1;
    const data_vocab_kind kind = !strcmp(o->tokens, "byte") ? DATA_VOCAB_BYTE : DATA_VOCAB_CHAR;
    return data_load_text(&r->data.set, o->data, kind, vocab, msg, msg_len) == DATA_OK ? 0 : -1;
}

static bool same_config(const llama_config *a, const llama_config *b) {
    return a->dim == b->dim && a->n_layers == b->n_layers && a->n_heads == b->n_heads &&
           a->n_kv_heads == b->n_kv_heads && a->hidden_dim == b->hidden_dim && a->vocab_size == b->vocab_size &&
           a->seq_len == b->seq_len && a->tied == b->tied && a->rope_theta == b->rope_theta &&
           a->norm_eps == b->norm_eps;
}

static int setup_model(train_run_state *r, const ckpt_file *f, const llama_config *cfg, char *msg, size_t msg_len) {
    train_data *d = &r->data;
    const llama_recompute rcmp = !strcmp(r->o.recompute, "block") ? LLAMA_RECOMPUTE_BLOCK : LLAMA_RECOMPUTE_NONE;
    if (f) {
        data_vocab v;
        if (ckpt_load_model_from(f, r->run.resume, &r->m, &v, msg, msg_len) != CKPT_OK) return -1;
        data_vocab_free(&v);  // the data was loaded with the checkpoint's vocabulary already
        r->m.recompute = rcmp;
        if (!same_config(&r->m.cfg, cfg)) {
            snprintf(msg, msg_len, "checkpoint '%s': its model config disagrees with its options", r->run.resume);
            return -1;
        }
        if (train__load_checkpoint(r, f, r->run.resume, msg, msg_len) != 0) return -1;
    } else {
        if (llama_init(&r->m, cfg, rcmp, msg, msg_len) != LLAMA_OK) return -1;
        llama_init_weights(&r->m, r->o.seed);
        r->optim.adam_m = calloc(r->m.n_params, sizeof(float));
        r->optim.adam_v = calloc(r->m.n_params, sizeof(float));
        r->st = (train_state){.seed = r->o.seed, .last_val_loss = NAN};
    }
    d->B = r->o.batch, d->T = r->o.context > 0 ? r->o.context : cfg->seq_len;
    d->x = malloc((size_t)d->B * d->T * sizeof *d->x), d->y = malloc((size_t)d->B * d->T * sizeof *d->y);
    if (!r->optim.adam_m || !r->optim.adam_v || !d->x || !d->y || llama_reserve(&r->m, d->B, d->T) != LLAMA_OK) {
        snprintf(msg, msg_len, "out of memory for %zu parameters and (B %d, T %d) activations", r->m.n_params,
                 d->B, d->T);
        return -1;
    }
    for (int split = 0; split < 2; split++)
        if (data_batch(&d->set, split, r->st.seed, 0, d->B, d->T, d->x, d->y) != DATA_OK) {
            snprintf(msg, msg_len, "--data '%s': the %s split is shorter than one sequence of %d tokens",
                     r->o.data, split ? "validation" : "training", d->T + 1);
            return -1;
        }
    return 0;
}

// The gradient-noise telemetry's buffers (train_noise). One process only: the reference gradient
// would have to be reduced across the ranks as the policy's is.
static int setup_noise(train_run_state *r, char *msg, size_t msg_len) {
    if (r->o.grad_noise_every <= 0) return 0;
    if (r->dist.w.size > 1) {
        snprintf(msg, msg_len, "--grad-noise-every %ld: one process only (this run has %d ranks)",
                 r->o.grad_noise_every, r->dist.w.size);
        return -1;
    }
    const size_t n = r->m.n_params;
    r->noise.ref = malloc(n * sizeof *r->noise.ref);
    if (r->o.accum > 1) r->noise.micro = malloc(n * sizeof *r->noise.micro);
    if (!r->noise.ref || (r->o.accum > 1 && !r->noise.micro)) {
        snprintf(msg, msg_len, "--grad-noise-every: out of memory for two more copies of %zu gradients", n);
        return -1;
    }
    return 0;
}

// Refuses up front, with the estimate, a configuration that cannot fit in this machine's memory
// (rather than being killed by the OOM killer after an hour of allocation and paging).
static int check_memory(train_run_state *r, const llama_config *cfg, char *msg, size_t msg_len) {
    const llama_recompute rc = !strcmp(r->o.recompute, "block") ? LLAMA_RECOMPUTE_BLOCK : LLAMA_RECOMPUTE_NONE;
    const int T = r->o.context > 0 ? r->o.context : cfg->seq_len;
    // AdamW's two moments, and the weights before an update plus Kahan's compensation at most;
    // --grad-noise-every's reference gradient, and its micro-batch buffer where it accumulates.
    const int noise = r->o.grad_noise_every > 0 ? 1 + (r->o.accum > 1) : 0;
    const double need = llama_memory_bytes(cfg, rc, r->o.batch, T, 4 + noise);
    const double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
    if (have > 0 && need > have) {
        snprintf(msg, msg_len, "the model (dim %d, %d layers, vocab %d, seq_len %d) with --batch %d and context %d "
                 "needs about %.1f GB to train, more than this machine's %.1f GB of memory: make it smaller "
                 "(--dim, --n-layers, --batch, --context) or use --recompute block",
                 cfg->dim, cfg->n_layers, cfg->vocab_size, cfg->seq_len, r->o.batch, T, need / 1e9, have / 1e9);
        return -1;
    }
    return 0;
}

// --- output files

// A name of the checkpoint's files, whatever the directory: ckpt.bin, its lock ckpt.bin.lock and
// its temporary files ckpt.bin.tmp.XXXXXX, which a run replaces by a rename, truncates, or
// removes as a killed run's leftovers. A log there would be lost, this run's or another's.
static bool ckpt_file_name(const char *path) {
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    return !strcmp(base, "ckpt.bin") || !strncmp(base, "ckpt.bin.", 9);
}

// A regular file with something in it (a FIFO or a device such as /dev/stdout holds no run).
static bool holds_data(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

static int refuse_used_log(const train_run_state *r, char *msg, size_t msg_len) {
    snprintf(msg, msg_len, "--log '%s' already holds another run's log: choose another --log or --ckpt-dir, or "
             "replace it with --overwrite 1", r->out.log_path);
    return -1;
}

// Refuses an output that is an input (every data shard, the validation shard, a policy file,
// the checkpoint resumed from unless the output continues it), an output that is another output
// of the run (the log and the checkpoint's files, by path or by file), or one that holds
// another run.
static int check_outputs(train_run_state *r, char *msg, size_t msg_len) {
    const train_opts *o = &r->o;
    char lock[FIO_PATH_MAX + 8] = "";
    if (r->out.ckpt_path[0]) ckpt_lock_path(r, lock, sizeof lock);
    const fio_input in[] = {{"data", o->data, true}, {"val-data", o->val_data, false},
                            {"policy", o->policy, false}, {"resume", r->run.resume, false}};
    // The checkpoint may continue the one resumed (its input is not checked against it).
    const struct {
        const char *opt, *path;
        int n_in;
    } outs[] = {{"ckpt-dir", r->out.ckpt_path, 3}, {"ckpt-dir", lock, 4}, {"log", r->out.log_path, 4}};
    for (size_t k = 0; k < sizeof outs / sizeof *outs; k++)
        if (outs[k].path[0] && fio_refuse_inputs(outs[k].opt, outs[k].path, in, outs[k].n_in, msg, msg_len) != FIO_OK)
            return -1;
    const char *log = r->out.log_path;
    if (log[0] && r->out.ckpt_path[0] && (fio_same_target(log, r->out.ckpt_path) || fio_same_target(log, lock))) {
        snprintf(msg, msg_len, "--log '%s' is the checkpoint '%s' of --ckpt-dir '%s' (or its lock): the checkpoint "
                 "would replace the log; choose another --log", log, r->out.ckpt_path, o->ckpt_dir);
        return -1;
    }
    if (log[0] && ckpt_file_name(log)) {
        snprintf(msg, msg_len, "--log '%s': ckpt.bin, ckpt.bin.lock and ckpt.bin.tmp.* are a checkpoint's files, "
                 "which a run replaces or removes; choose another name for the log", log);
        return -1;
    }
    if (o->overwrite) return 0;
    if (!r->run.resume && r->out.ckpt_path[0] && fio_is_file(r->out.ckpt_path)) {
        snprintf(msg, msg_len, "--ckpt-dir '%s' already holds a run (%s): continue it with --resume %s, choose "
                 "another --ckpt-dir, or replace it with --overwrite 1", o->ckpt_dir, r->out.ckpt_path,
                 r->out.ckpt_path);
        return -1;
    }
    if (r->run.resume && r->out.ckpt_path[0] && fio_is_file(r->out.ckpt_path) &&
        !fio_same_file(r->out.ckpt_path, r->run.resume)) {
        snprintf(msg, msg_len, "--ckpt-dir '%s' holds another run's checkpoint (%s), not the one resumed (%s): "
                 "choose another --ckpt-dir, or replace it with --overwrite 1", o->ckpt_dir, r->out.ckpt_path,
                 r->run.resume);
        return -1;
    }
    if (!r->run.resume && log[0] && holds_data(log)) return refuse_used_log(r, msg, msg_len);
    return 0;
}

// The lock that makes this run --ckpt-dir's one writer (fio_lock: FIO_EINVAL when another holds it).
static int lock_ckpt_dir(const train_run_state *r, int *fd, char *msg, size_t msg_len) {
    char lock[FIO_PATH_MAX + 8], what[FIO_PATH_MAX + 16];
    ckpt_lock_path(r, lock, sizeof lock);
    snprintf(what, sizeof what, "--ckpt-dir '%s'", r->o.ckpt_dir);
    return fio_lock(lock, what, "another training", false, fd, msg, msg_len);
}

// The log, locked for this run (a second run given the same --log is refused while this one
// lives, --overwrite or not) and appended to: a fresh run empties it only once it holds the lock
// (and, without --overwrite, only when it is empty: the check of check_outputs, repeated now
// that no other run can race it); a resumed run continues it.
static int open_log(train_run_state *r, char *msg, size_t msg_len) {
    train_outputs *out = &r->out;
    char what[FIO_PATH_MAX + 16];
    snprintf(what, sizeof what, "--log '%s'", out->log_path);
    if (fio_open_append(out->log_path, what, "another training", &out->log, msg, msg_len) != FIO_OK) return -1;
    const int fd = fileno(out->log);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;  // a device or FIFO: written through
    if (!r->run.resume) {
        if (st.st_size > 0 && !r->o.overwrite) return refuse_used_log(r, msg, msg_len);
        if (ftruncate(fd, 0) != 0) {
            snprintf(msg, msg_len, "--log '%s': cannot empty it: %s", out->log_path, strerror(errno));
            return -1;
        }
        return 0;
    }
    // A run killed mid-write leaves a cut line: the continuation starts on a line of its own.
    char last = '\n';
    if (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n') fputc('\n', out->log);
    return 0;
}

static int open_outputs(train_run_state *r, char *msg, size_t msg_len) {
    train_outputs *out = &r->out;
    const train_opts *o = &r->o;
    if (o->ckpt_dir[0] && snprintf(out->ckpt_path, sizeof out->ckpt_path, "%s/ckpt.bin", o->ckpt_dir) >=
                              (int)sizeof out->ckpt_path) {
        snprintf(msg, msg_len, "--ckpt-dir '%.60s...': path too long", o->ckpt_dir);
        return -1;
    }
    if (o->log[0]) snprintf(out->log_path, sizeof out->log_path, "%s", o->log);
    else if (o->ckpt_dir[0]) snprintf(out->log_path, sizeof out->log_path, "%s/log.jsonl", o->ckpt_dir);
    if (check_outputs(r, msg, msg_len) != 0) {
        // What it found there may be another run's, at work in the directory right now: say that
        // (the lock below would), not that a finished run's files are in the way.
        if (o->ckpt_dir[0] && fio_is_dir(o->ckpt_dir)) {
            char busy[FIO_PATH_MAX * 2 + 200], lock[FIO_PATH_MAX + 8];
            int fd = -1;
            if (lock_ckpt_dir(r, &fd, busy, sizeof busy) == FIO_EINVAL && strstr(busy, " is in use by "))
                snprintf(msg, msg_len, "%s", busy);
            ckpt_lock_path(r, lock, sizeof lock);
            fio_unlock(&fd, lock);
        }
        return -1;
    }
    char why[FIO_PATH_MAX + 128];
    if (o->ckpt_dir[0] && fio_mkdir_p(o->ckpt_dir, why, sizeof why) != FIO_OK) {
        snprintf(msg, msg_len, "--ckpt-dir: %s", why);
        return -1;
    }
    // One run per --ckpt-dir, whatever launched it (two FPLAB_MPI=0 processes under mpirun each
    // think they are rank 0). Held, the directory is ours: a killed run's half-written
    // checkpoints can go, and the checks above are repeated now that no other run can race them.
    if (o->ckpt_dir[0]) {
        if (lock_ckpt_dir(r, &out->ckpt_lock, msg, msg_len) != FIO_OK || check_outputs(r, msg, msg_len) != 0)
            return -1;
        const int orphans = fio_remove_orphans(out->ckpt_path);
        if (orphans)
            fprintf(stderr, "fplab train: removed %d temporary checkpoint file%s that a killed run left in '%s'\n",
                    orphans, orphans > 1 ? "s" : "", o->ckpt_dir);
    }
    // A resumed run with no step left writes nothing: the log stays as the run left it.
    const bool nothing_to_do = r->run.resume && r->st.step >= o->steps;
    if (out->log_path[0] && !nothing_to_do && open_log(r, msg, msg_len) != 0) return -1;
    return 0;
}

// --- what the run prints

// The options as used: the named config's sizes, the context, the thread count and the
// progress choice instead of the "0: default" and "-1: auto" the user may have given.
static void resolve_options(train_run_state *r, int threads) {
    train_opts *o = &r->o;
    const llama_config *c = &r->m.cfg;
    o->dim = c->dim, o->n_layers = c->n_layers, o->n_heads = c->n_heads, o->n_kv_heads = c->n_kv_heads;
    o->hidden_dim = c->hidden_dim, o->seq_len = c->seq_len, o->rope_theta = c->rope_theta;
    o->norm_eps = c->norm_eps, o->context = r->data.T, o->threads = threads;
    if (!strcmp(o->tokens, "shard")) o->vocab_size = c->vocab_size;
    r->out.progress = o->progress < 0 ? isatty(fileno(stderr)) : o->progress;
    o->progress = r->out.progress;
    if (r->dist.w.rank != 0) r->out.progress = false;  // one progress line: rank 0's
}

static void print_config(const train_run_state *r) {
    const llama_config *c = &r->m.cfg;
    fprintf(stderr, "fplab train: model dim %d, layers %d, heads %d (kv %d), hidden %d, vocab %d, seq_len %d, "
                    "%s head, rope_theta %g, norm_eps %g: %zu parameters\n",
            c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->hidden_dim, c->vocab_size, c->seq_len,
            c->tied ? "tied" : "untied", c->rope_theta, c->norm_eps, r->m.n_params);
    size_t n;
    const train_opt_desc *t = train_opt_table(&n);
    fprintf(stderr, "  options:");
    for (size_t i = 0; i < n; i++) {
        char v[TRAIN_PATH_MAX + 8];
        train_opt_get(&r->o, &t[i], v, sizeof v);
        fprintf(stderr, "%s--%s %s", i % 6 == 5 ? "\n    " : " ", t[i].name, v[0] ? v : "''");
    }
    fprintf(stderr, "\n  outputs: checkpoint %s, log %s\n",
            r->out.ckpt_path[0] ? r->out.ckpt_path : "none (no --ckpt-dir)",
            r->out.log_path[0] ? r->out.log_path : "none");
    const train_dist *d = &r->dist;
    if (d->w.size > 1 || d->red.n)
        fprintf(stderr, "  distributed: %d rank%s, %s, wire %s%s%s (%s accumulation%s), %d x %d micro-batches per step\n",
                d->w.size, d->w.size > 1 ? "s" : "",
                d->local ? (d->outer_buf ? "DiLoCo (outer Nesterov)" : "local SGD") : "data parallel",
                d->red.wire.name, r->o.comm_gather[0] ? ", sums gathered as " : "", r->o.comm_gather,
                d->red.wire_accum ? "wire" : "f32", d->red.ef ? ", error feedback" : "", d->w.size, r->o.accum);
    if (r->run.resume) fprintf(stderr, "resuming from '%s' at step %lld\n", r->run.resume, (long long)r->st.step);
}

// --- setup

// Everything up to the output files, which rank 0 opens only once every rank has agreed.
static int setup_run(train_run_state *r, const train_opts *o, const bool *given, ckpt_file *f, data_vocab *vocab, char *msg, size_t msg_len) {
    if (r->run.resume) {
        if (ckpt_read(f, r->run.resume, msg, msg_len) != CKPT_OK) return -1;
        const ckpt_section *vs = ckpt_find(f, "vocab");
        if (!vs) {
            snprintf(msg, msg_len, "checkpoint '%s': section 'vocab' missing", r->run.resume);
            return -1;
        }
        if (ckpt_vocab_read(vocab, vs, r->run.resume, msg, msg_len) != CKPT_OK) return -1;
        if (resume_options(r, o, given, f, r->run.resume, msg, msg_len) != 0) return -1;
    }
    if (train_opts_validate(&r->o, msg, msg_len) != 0) return -1;
    if (!r->run.resume && r->o.switch_policy[0]) {
        snprintf(msg, msg_len, "--switch-policy '%s': only with --resume (a fresh run takes --policy)",
                 r->o.switch_policy);
        return -1;
    }
    if (!r->run.resume && r->o.stall_switch[0]) {  // refused now, not at the stall hours later
        ac_policy p;
        char why[256];
        if (ac_policy_load(&p, r->o.stall_switch, why, sizeof why) != AC_OK) {
            snprintf(msg, msg_len, "--stall-switch: %s", why);
            return -1;
        }
    }
    r->optim.sgd = !strcmp(r->o.optimizer, "sgd");
    if (setup_policy(r, r->run.resume ? f : NULL, msg, msg_len) != 0) return -1;
    const int threads = llama_ops_threads(r->o.threads);
    mm_fixed_order_set_default(r->o.reproducible);  // every product's mm_opts_default from here on
    if (load_data(r, r->run.resume ? vocab : NULL, msg, msg_len) != 0) return -1;
    llama_config cfg;
    if (train_model_config(&cfg, &r->o, r->data.set.vocab.size, msg, msg_len) != 0) return -1;
    if (check_memory(r, &cfg, msg, msg_len) != 0) return -1;
    if (setup_model(r, r->run.resume ? f : NULL, &cfg, msg, msg_len) != 0) return -1;
    // a switched policy starts autocast's state afresh and stores the weights in its formats
    if (setup_autocast(r, r->run.resume && !r->run.switched_from[0] ? f : NULL, msg, msg_len) != 0) return -1;
    if (train__dist_setup(r, msg, msg_len) != 0) return -1;
    if (setup_noise(r, msg, msg_len) != 0) return -1;
    if (r->run.resume && train__dist_ckpt_load(r, f, r->run.resume, msg, msg_len) != 0) return -1;
    resolve_options(r, threads);
    return 0;
}

int train__setup(train_run_state *r, const train_opts *o, const char *resume, const bool *given, char *msg,
                 size_t msg_len) {
    memset(r, 0, sizeof *r);
    r->out.ckpt_lock = -1;
    r->o = *o;
    r->run.resume = resume && resume[0] ? resume : NULL;
    if (dist_init(&r->dist.w, msg, msg_len) != DIST_OK) return -1;
    ckpt_file f = {0};
    data_vocab vocab = {0};
    int rc = setup_run(r, o, given, &f, &vocab, msg, msg_len);
    ckpt_file_free(&f);
    data_vocab_free(&vocab);
    // Every rank set up the same run (or all stop); then rank 0 alone checks and opens the
    // checkpoint and log places, and the others learn whether it could.
    if (train__dist_agree(r, rc, msg, msg_len) != 0) return -1;
    rc = r->dist.w.rank == 0 ? open_outputs(r, msg, msg_len) : 0;
    if (!dist_min_int(&r->dist.w, rc == 0)) {
        if (rc == 0)
            snprintf(msg, msg_len, "rank %d: rank 0 refused its outputs (its message says why)", r->dist.w.rank);
        return -1;
    }
    if (r->dist.w.rank == 0) print_config(r);
    return 0;
}
