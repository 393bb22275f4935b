// train_opts.c: the training options: defaults (nanoGPT's CPU Shakespeare recipe), one table
// that the command line, the printed configuration, the checkpoint and resume all read, and
// validation.
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/dist_wire.h"
#include "trainer/train.h"

void train_opts_default(train_opts *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->model, sizeof o->model, "shakespeare");
    snprintf(o->tokens, sizeof o->tokens, "char");
    snprintf(o->recompute, sizeof o->recompute, "none");
    snprintf(o->policy, sizeof o->policy, "fp32");
    snprintf(o->telemetry, sizeof o->telemetry, "sites");
    snprintf(o->optimizer, sizeof o->optimizer, "adamw");
    o->momentum = 0.9f;
    o->batch = 12, o->accum = 1, o->steps = 2000;
    o->lr = 1e-3f, o->lr_min = 1e-4f, o->warmup = 100;
    o->beta1 = 0.9f, o->beta2 = 0.99f, o->adam_eps = 1e-8f, o->weight_decay = 0.1f, o->grad_clip = 1.0f;
    o->eval_every = 250, o->eval_batches = 20;
    o->stall_ratio = 1.73205081f;  // sqrt(3), Chmiel et al.'s
    o->progress = -1;
    o->seed = 1337;
    snprintf(o->comm, sizeof o->comm, "fp32");
    snprintf(o->comm_accum, sizeof o->comm_accum, "f32");
    snprintf(o->outer_opt, sizeof o->outer_opt, "none");
    o->outer_lr = 0.7f, o->outer_momentum = 0.9f;  // DiLoCo's
}

#define OPTR(name, field, type, run_only, resume, help) \
    {name, type, offsetof(train_opts, field), sizeof(((train_opts *)0)->field), run_only, resume, help}
#define OPT(name, field, type, run_only, help) OPTR(name, field, type, run_only, TOPT_RESUME_KEEP, help)

static const train_opt_desc table[] = {
    OPT("model", model, TOPT_STR, false, "named config: tiny, shakespeare, 260k, 15m"),
    OPT("dim", dim, TOPT_INT, false, "model width (0: the named config's)"),
    OPT("n-layers", n_layers, TOPT_INT, false, "layers (0: the named config's)"),
    OPT("n-heads", n_heads, TOPT_INT, false, "query heads (0: the named config's)"),
    OPT("n-kv-heads", n_kv_heads, TOPT_INT, false, "key/value heads (0: the named config's)"),
    OPT("hidden-dim", hidden_dim, TOPT_INT, false, "SwiGLU width (0: 2/3 of 4*dim rounded up to 32)"),
    OPT("seq-len", seq_len, TOPT_INT, false, "context of the model (0: the named config's)"),
    OPT("untied", untied, TOPT_INT, false, "1: separate LM head; 0: tied to the embedding"),
    OPT("rope-theta", rope_theta, TOPT_FLOAT, false, "RoPE base (0: 10000)"),
    OPT("norm-eps", norm_eps, TOPT_FLOAT, false, "RMSNorm epsilon (0: 1e-5)"),
    OPT("data", data, TOPT_STR, false, "text file, or llm.c token shards (comma-separated)"),
    OPT("tokens", tokens, TOPT_STR, false, "char (vocabulary from the text) | byte (256) | shard"),
    OPT("val-data", val_data, TOPT_STR, false, "shards: a validation shard (default: the last 10%)"),
    OPT("vocab-size", vocab_size, TOPT_INT, false, "shards: vocabulary size (0: largest token + 1)"),
    OPT("batch", batch, TOPT_INT, false, "sequences per micro-batch"),
    OPT("context", context, TOPT_INT, false, "tokens per sequence (0: seq_len)"),
    OPT("accum", accum, TOPT_INT, false, "micro-batches per optimizer step (gradient accumulation)"),
    OPTR("steps", steps, TOPT_LONG, false, TOPT_RESUME_GROW, "optimizer steps"),
    OPT("lr", lr, TOPT_FLOAT, false, "peak learning rate"),
    OPT("lr-min", lr_min, TOPT_FLOAT, false, "learning-rate floor of the cosine decay"),
    OPT("warmup", warmup, TOPT_LONG, false, "optimizer steps of linear warmup"),
    OPT("beta1", beta1, TOPT_FLOAT, false, "AdamW beta1"),
    OPT("beta2", beta2, TOPT_FLOAT, false, "AdamW beta2"),
    OPT("adam-eps", adam_eps, TOPT_FLOAT, false, "AdamW epsilon"),
    OPT("weight-decay", weight_decay, TOPT_FLOAT, false, "decoupled weight decay (matrices only)"),
    OPT("grad-clip", grad_clip, TOPT_FLOAT, false, "global gradient-norm clip (0: off)"),
    OPT("optimizer", optimizer, TOPT_STR, false, "adamw | sgd (momentum; --weight-decay is then L2 in the gradient)"),
    OPT("momentum", momentum, TOPT_FLOAT, false, "SGD momentum in [0, 1)"),
    OPT("eval-every", eval_every, TOPT_LONG, false, "validation every N steps (0: only at the end)"),
    OPT("eval-batches", eval_batches, TOPT_INT, false, "validation batches (a fixed set)"),
    OPT("seed", seed, TOPT_U64, false, "seed of the initialisation and the batches"),
    OPT("recompute", recompute, TOPT_STR, false, "gradient checkpointing: none | block"),
    OPT("policy", policy, TOPT_STR, false, "precision policy: a preset (fplab policy --list) or a policy file"),
    OPTR("switch-policy", switch_policy, TOPT_STR, true, TOPT_RESUME_RESET,
         "with --resume: continue under this policy (autocast's state starts afresh)"),
    OPT("comm", comm, TOPT_STR, false, "wire format of the reductions, FORMAT[:RECIPE][:sr] (fp32: plain)"),
    OPT("comm-gather", comm_gather, TOPT_STR, false, "format of the reduced sums sent back (empty: --comm's)"),
    OPT("comm-accum", comm_accum, TOPT_STR, false, "partial sums: f32 (decoded, fixed rank order) | wire (ring)"),
    OPT("error-feedback", error_feedback, TOPT_INT, false, "1: carry the wire rounding error to the next step"),
    OPT("local-sgd", local_sgd, TOPT_LONG, false, "local SGD: average parameters every K steps (0: data parallel)"),
    OPT("outer-opt", outer_opt, TOPT_STR, false, "none | nesterov (DiLoCo; every --local-sgd steps)"),
    OPT("outer-lr", outer_lr, TOPT_FLOAT, false, "DiLoCo outer learning rate"),
    OPT("outer-momentum", outer_momentum, TOPT_FLOAT, false, "DiLoCo outer Nesterov momentum"),
    OPT("telemetry", telemetry, TOPT_STR, true, "per-site numerics in the log: off | sites | layers"),
    OPT("grad-noise-every", grad_noise_every, TOPT_LONG, true, "log ||g|| and ||g_policy - g|| every N steps (a second, uncast backward; 0: off)"),
    OPT("stall-switch", stall_switch, TOPT_STR, false, "continue under this policy from the first --grad-noise-every step where ||g|| < --stall-ratio x ||g_policy - g|| (needs --ckpt-dir)"),
    OPT("stall-ratio", stall_ratio, TOPT_FLOAT, false, "--stall-switch's threshold on ||g|| / ||g_policy - g||"),
    OPTR("ckpt-dir", ckpt_dir, TOPT_STR, true, TOPT_RESUME_HOME, "directory for ckpt.bin (and log.jsonl); '' = none"),
    OPT("ckpt-every", ckpt_every, TOPT_LONG, true, "checkpoint every N steps (0: only at the end)"),
    OPTR("log", log, TOPT_STR, true, TOPT_RESUME_RESET, "JSON-lines log (default <ckpt_dir>/log.jsonl)"),
    OPTR("progress", progress, TOPT_INT, true, TOPT_RESUME_RESET, "progress line: -1 on a terminal, 0 off, 1 on"),
    OPTR("stop-at", stop_at, TOPT_LONG, true, TOPT_RESUME_RESET, "end this invocation after step N, checkpointed (0: run to --steps)"),
    OPT("threads", threads, TOPT_INT, true, "threads for BLAS and OpenMP (0: one per processor)"),
    OPT("reproducible", reproducible, TOPT_INT, false, "1: float32 matmuls summed in one fixed order, the same bits on every x86-64 CPU (slower)"),
    OPTR("overwrite", overwrite, TOPT_INT, true, TOPT_RESUME_RESET, "1: a fresh run may replace the checkpoint/log in its places"),
};
#undef OPT
#undef OPTR

const train_opt_desc *train_opt_table(size_t *n) {
    *n = sizeof table / sizeof table[0];
    return table;
}

static const train_opt_desc *find(const char *name) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name)) return &table[i];
    return NULL;
}

int train_opt_set(train_opts *o, const char *name, const char *value, char *msg, size_t msg_len) {
    const train_opt_desc *d = find(name);
    if (!d) {
        snprintf(msg, msg_len, "unknown training option '%s'", name);
        return -1;
    }
    char *end = NULL, *p = (char *)o + d->offset;
    errno = 0;
    switch (d->type) {
    case TOPT_INT: {
        const long v = strtol(value, &end, 10);
        if (v < -2147483647L || v > 2147483647L) errno = ERANGE;
        *(int *)p = (int)v;
        break;
    }
    case TOPT_LONG: *(long *)p = strtol(value, &end, 10); break;
    case TOPT_U64: {
        // Decimal, or hexadecimal after 0x: a leading 0 is not octal (--seed 010 is 10, as the
        // CLI reads its integers). strtoull would wrap "-1" to 2^64 - 1: a sign is refused.
        const char *v = value + strspn(value, " \t");
        *(uint64_t *)p = strtoull(value, &end, v[0] == '0' && (v[1] == 'x' || v[1] == 'X') ? 16 : 10);
        if (v[0] == '-') errno = ERANGE;
        break;
    }
    case TOPT_FLOAT: *(float *)p = strtof(value, &end); break;
    case TOPT_STR:
        if (strlen(value) >= d->size) {
            snprintf(msg, msg_len, "--%s: '%.40s...' is longer than %zu characters", name, value, d->size - 1);
            return -1;
        }
        snprintf(p, d->size, "%s", value);
        return 0;
    }
    if (errno || end == value || *end) {
        snprintf(msg, msg_len, "--%s: '%s' is not a valid %s", name, value,
                 d->type == TOPT_FLOAT ? "number" : d->type == TOPT_U64 ? "non-negative integer below 2^64" : "integer");
        return -1;
    }
    return 0;
}

void train_opt_get(const train_opts *o, const train_opt_desc *d, char *buf, size_t len) {
    const char *p = (const char *)o + d->offset;
    switch (d->type) {
    case TOPT_INT: snprintf(buf, len, "%d", *(const int *)p); break;
    case TOPT_LONG: snprintf(buf, len, "%ld", *(const long *)p); break;
    case TOPT_U64: snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case TOPT_FLOAT: {  // the shortest text that reads back as the same float
        const float v = *(const float *)p;
        for (int prec = 6; prec <= 9; prec++) {
            snprintf(buf, len, "%.*g", prec, v);
            if (strtof(buf, NULL) == v) break;
        }
        break;
    }
    case TOPT_STR: snprintf(buf, len, "%s", p); break;
    }
}

size_t train_opts_text(const train_opts *o, char *buf, size_t cap) {
    size_t len = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        char v[TRAIN_PATH_MAX + 8];
        train_opt_get(o, &table[i], v, sizeof v);
        len += (size_t)snprintf(buf ? buf + len : NULL, buf ? cap - len : 0, "%s %s\n", table[i].name, v);
    }
    return len;
}

int train_opts_from_text(train_opts *o, const char *text, size_t n, char *msg, size_t msg_len) {
    train_opts_default(o);
    char *copy = strndup(text, n), *save = NULL;
    if (!copy) return snprintf(msg, msg_len, "out of memory"), -1;
    int st = 0;
    for (char *line = strtok_r(copy, "\n", &save); line && !st; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        if (!sp) continue;
        *sp = 0;
        st = train_opt_set(o, line, sp + 1, msg, msg_len);
    }
    free(copy);
    return st;
}

int train_opts_validate(const train_opts *o, char *msg, size_t msg_len) {
#define REQUIRE(cond, ...)                         \
    do {                                           \
        if (!(cond)) {                             \
            snprintf(msg, msg_len, __VA_ARGS__);   \
            return -1;                             \
        }                                          \
    } while (0)
    llama_config c;
    REQUIRE(llama_config_named(&c, o->model) == LLAMA_OK, "--model '%s': expected one of %s", o->model,
            llama_config_names());
    REQUIRE(o->data[0], "--data: a text file or token shards is required");
    REQUIRE(!strcmp(o->tokens, "char") || !strcmp(o->tokens, "byte") || !strcmp(o->tokens, "shard"),
            "--tokens '%s': expected char, byte or shard", o->tokens);
    REQUIRE(!strcmp(o->recompute, "none") || !strcmp(o->recompute, "block"),
            "--recompute '%s': expected none or block", o->recompute);
    // One check per option, so that a message names the option that is wrong (not a group).
    REQUIRE(o->batch > 0, "--batch %d: expected a positive integer", o->batch);
    REQUIRE(o->accum > 0, "--accum %d: expected a positive integer", o->accum);
    REQUIRE(o->steps > 0, "--steps %ld: expected a positive integer", o->steps);
    REQUIRE(o->context >= 0, "--context %d: expected >= 0", o->context);
    REQUIRE(o->eval_batches > 0, "--eval-batches %d: expected a positive integer", o->eval_batches);
    REQUIRE(o->lr > 0 && isfinite(o->lr), "--lr %g: expected a positive finite number", o->lr);
    REQUIRE(o->lr_min >= 0 && o->lr_min <= o->lr, "--lr-min %g: expected 0 <= lr_min <= --lr (%g)", o->lr_min,
            o->lr);
    REQUIRE(o->warmup >= 0, "--warmup %ld: expected >= 0", (long)o->warmup);
    REQUIRE(o->eval_every >= 0, "--eval-every %ld: expected >= 0", (long)o->eval_every);
    REQUIRE(o->grad_noise_every >= 0, "--grad-noise-every %ld: expected >= 0", (long)o->grad_noise_every);
    REQUIRE(o->stall_ratio > 0 && isfinite(o->stall_ratio), "--stall-ratio %g: expected a positive finite number",
            o->stall_ratio);
    REQUIRE(!o->stall_switch[0] || o->grad_noise_every > 0,
            "--stall-switch '%s': needs --grad-noise-every N (the ratio is measured on those steps)", o->stall_switch);
    REQUIRE(!o->stall_switch[0] || o->ckpt_dir[0],
            "--stall-switch '%s': needs --ckpt-dir (the run continues from the checkpoint of the step that stalled, "
            "as --resume --switch-policy would)", o->stall_switch);
    REQUIRE(o->ckpt_every >= 0, "--ckpt-every %ld: expected >= 0", (long)o->ckpt_every);
    REQUIRE(o->beta1 >= 0 && o->beta1 < 1, "--beta1 %g: expected a value in [0, 1)", o->beta1);
    REQUIRE(o->beta2 >= 0 && o->beta2 < 1, "--beta2 %g: expected a value in [0, 1)", o->beta2);
    REQUIRE(o->adam_eps > 0, "--adam-eps %g: expected a positive number", o->adam_eps);
    REQUIRE(o->weight_decay >= 0, "--weight-decay %g: expected >= 0", o->weight_decay);
    REQUIRE(o->grad_clip >= 0, "--grad-clip %g: expected >= 0", o->grad_clip);
    REQUIRE(!strcmp(o->optimizer, "adamw") || !strcmp(o->optimizer, "sgd"), "--optimizer '%s': expected adamw or sgd",
            o->optimizer);
    REQUIRE(o->momentum >= 0 && o->momentum < 1, "--momentum %g: expected a value in [0, 1)", o->momentum);
    REQUIRE(o->progress >= -1 && o->progress <= 1, "--progress %d: expected -1, 0 or 1", o->progress);
    REQUIRE(!strcmp(o->telemetry, "off") || !strcmp(o->telemetry, "sites") || !strcmp(o->telemetry, "layers"),
            "--telemetry '%s': expected off, sites or layers", o->telemetry);
    REQUIRE(o->policy[0], "--policy: expected a preset name or a policy file");
    REQUIRE(o->stop_at >= 0, "--stop-at %ld: expected >= 0", o->stop_at);
    REQUIRE(o->threads >= 0 && o->threads <= TRAIN_THREADS_MAX, "--threads %d: expected 0..%d", o->threads,
            TRAIN_THREADS_MAX);
    REQUIRE(o->overwrite == 0 || o->overwrite == 1, "--overwrite %d: expected 0 or 1", o->overwrite);
    REQUIRE(o->reproducible == 0 || o->reproducible == 1, "--reproducible %d: expected 0 or 1", o->reproducible);
    REQUIRE(o->untied == 0 || o->untied == 1, "--untied %d: expected 0 or 1", o->untied);
    dist_wire w;
    if (dist_wire_parse(&w, "--comm", o->comm, msg, msg_len) != DIST_OK) return -1;
    if (o->comm_gather[0] && dist_wire_parse(&w, "--comm-gather", o->comm_gather, msg, msg_len) != DIST_OK) return -1;
    REQUIRE(!strcmp(o->comm_accum, "f32") || !strcmp(o->comm_accum, "wire"),
            "--comm-accum '%s': expected f32 or wire", o->comm_accum);
    REQUIRE(o->error_feedback == 0 || o->error_feedback == 1, "--error-feedback %d: expected 0 or 1",
            o->error_feedback);
    REQUIRE(o->local_sgd >= 0, "--local-sgd %ld: expected >= 0", o->local_sgd);
    REQUIRE(!strcmp(o->outer_opt, "none") || !strcmp(o->outer_opt, "nesterov"),
            "--outer-opt '%s': expected none or nesterov", o->outer_opt);
    REQUIRE(!strcmp(o->outer_opt, "none") || o->local_sgd > 0,
            "--outer-opt %s: DiLoCo steps every --local-sgd H inner steps: give --local-sgd", o->outer_opt);
    REQUIRE(o->outer_lr > 0 && isfinite(o->outer_lr), "--outer-lr %g: expected a positive finite number",
            o->outer_lr);
    REQUIRE(o->outer_momentum >= 0 && o->outer_momentum < 1, "--outer-momentum %g: expected a value in [0, 1)",
            o->outer_momentum);
    const char *dist_opt = strcmp(o->comm, "fp32") ? "--comm"
                           : o->comm_gather[0] && strcmp(o->comm_gather, "fp32") ? "--comm-gather"
                           : strcmp(o->comm_accum, "f32") ? "--comm-accum"
                           : o->error_feedback ? "--error-feedback"
                           : o->local_sgd ? "--local-sgd"
                           : strcmp(o->outer_opt, "none") ? "--outer-opt" : NULL;
    REQUIRE(!dist_opt || dist_have_mpi(), "%s: this fplab was built without MPI, and the option is about "
            "communication between ranks: install Open MPI (make deps) and rebuild", dist_opt);
#undef REQUIRE
    return 0;
}

int train_model_config(llama_config *c, const train_opts *o, int vocab_size, char *msg, size_t msg_len) {
    if (llama_config_named(c, o->model) != LLAMA_OK) {
        snprintf(msg, msg_len, "--model '%s': expected one of %s", o->model, llama_config_names());
        return -1;
    }
    if (o->dim > 0) c->dim = o->dim, c->hidden_dim = llama_default_hidden(o->dim);
    if (o->n_layers > 0) c->n_layers = o->n_layers;
    if (o->n_heads > 0) c->n_heads = o->n_heads, c->n_kv_heads = o->n_kv_heads > 0 ? o->n_kv_heads : o->n_heads;
    if (o->n_kv_heads > 0) c->n_kv_heads = o->n_kv_heads;
    if (o->hidden_dim > 0) c->hidden_dim = o->hidden_dim;
    if (o->seq_len > 0) c->seq_len = o->seq_len;
    // 0 means the default; anything else must be a positive number (a negative or NaN value was
    // silently the default before).
    if (!(o->rope_theta >= 0 && isfinite(o->rope_theta)) || !(o->norm_eps >= 0 && isfinite(o->norm_eps))) {
        const bool theta = !(o->rope_theta >= 0 && isfinite(o->rope_theta));
        snprintf(msg, msg_len, "--%s %g: expected a positive finite number (0: the default, %s)",
                 theta ? "rope-theta" : "norm-eps", theta ? o->rope_theta : o->norm_eps, theta ? "10000" : "1e-5");
        return -1;
    }
    if (o->rope_theta > 0) c->rope_theta = o->rope_theta;
    if (o->norm_eps > 0) c->norm_eps = o->norm_eps;
    c->tied = !o->untied;
    c->vocab_size = vocab_size;
    if (llama_config_validate(c, msg, msg_len) != LLAMA_OK) return -1;
    if (o->context > c->seq_len) {
        snprintf(msg, msg_len, "--context %d exceeds the model's seq_len %d", o->context, c->seq_len);
        return -1;
    }
    return 0;
}
