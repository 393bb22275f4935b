// eval.c: the validation loss of a checkpoint under an inference policy, its telemetry, one
// site at a time (see eval.h).
// Constraints: the batches, their order and the double sum are the trainer's eval_loss
// (trainer/train.c), so that fp32 reproduces the checkpoint's validation loss bitwise.
#include "trainer/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/checkpoint.h"
#include "trainer/train_internal.h"
#include "util/fileio.h"
#include "util/json.h"

void eval_close(eval_model *e) {
    llama_free(&e->m);
    data_vocab_free(&e->vocab);
    data_free(&e->data);
    free(e->x), free(e->y), free(e->batch_loss), free(e->base_loss);
    memset(e, 0, sizeof *e);
}

// The run's options (defaults for a model-only file) and last validation loss.
static int read_run(eval_model *e, const ckpt_file *f, train_opts *o, char *msg, size_t msg_len) {
    train_opts_default(o);
    const ckpt_section *os = ckpt_find(f, "options"), *ss = ckpt_find(f, "state");
    char why[512];
    if (os && train_opts_from_text(o, os->data, os->nbytes, why, sizeof why) != 0) {
        snprintf(msg, msg_len, "checkpoint '%s': section 'options': %s", e->ckpt, why);
        return EVAL_EINVAL;
    }
    e->ckpt_val_loss = NAN;
    if (ss && ss->nbytes == sizeof(train_state)) {
        train_state st;
        memcpy(&st, ss->data, sizeof st);
        if (isfinite(st.last_val_loss) && st.last_val_loss >= 0) e->ckpt_val_loss = st.last_val_loss;
    }
    return os ? EVAL_OK : -1;  // -1: no options section (a model-only file)
}

static int load_val_data(eval_model *e, const char *val_data, char *msg, size_t msg_len) {
    if (!strcmp(e->tokens, "shard"))
        return data_load_shards(&e->data, e->data_path, val_data && val_data[0] ? val_data : NULL, e->vocab.size,
                                msg, msg_len) == DATA_OK ? EVAL_OK : EVAL_EINVAL;
    const data_vocab_kind kind = !strcmp(e->tokens, "byte") ? DATA_VOCAB_BYTE : DATA_VOCAB_CHAR;
    return data_load_text(&e->data, e->data_path, kind, &e->vocab, msg, msg_len) == DATA_OK ? EVAL_OK : EVAL_EINVAL;
}

int eval_open(eval_model *e, const eval_opts *o, char *msg, size_t msg_len) {
    memset(e, 0, sizeof *e);
    if (!o->ckpt || !o->ckpt[0]) {
        snprintf(msg, msg_len, "--ckpt: a checkpoint written by fplab train is required");
        return EVAL_EINVAL;
    }
    if (o->batches < 0 || o->batches > EVAL_BATCHES_MAX || o->batch < 0 || o->batch > 65536) {
        snprintf(msg, msg_len, "--batches %d, --batch %d: expected 1..%d and 1..65536 (0: the run's)", o->batches,
                 o->batch, EVAL_BATCHES_MAX);
        return EVAL_EINVAL;
    }
    ckpt_file f;
    if (ckpt_read(&f, o->ckpt, msg, msg_len) != CKPT_OK) return EVAL_EINVAL;
    snprintf(e->ckpt, sizeof e->ckpt, "%s", o->ckpt);
    train_opts run;
    int st = read_run(e, &f, &run, msg, msg_len);
    const bool model_only = st < 0;
    if (st > 0 || ckpt_load_model_from(&f, o->ckpt, &e->m, &e->vocab, msg, msg_len) != CKPT_OK) {
        ckpt_file_free(&f);
        eval_close(e);
        return EVAL_EINVAL;
    }
    ckpt_file_free(&f);
    const char *data = o->data && o->data[0] ? o->data : model_only ? NULL : run.data;
    if (!data || !data[0]) {
        snprintf(msg, msg_len, "checkpoint '%s' names no training data (a model-only file): give --data", o->ckpt);
        eval_close(e);
        return EVAL_EINVAL;
    }
    snprintf(e->data_path, sizeof e->data_path, "%s", data);
    snprintf(e->tokens, sizeof e->tokens, "%s",
             e->vocab.kind == DATA_VOCAB_TOKENS ? "shard" : e->vocab.kind == DATA_VOCAB_BYTE ? "byte" : "char");
    char why[512];
    const char *val = o->val_data && o->val_data[0] ? o->val_data : run.val_data;
    if (!strcmp(e->tokens, "shard")) snprintf(e->val_path, sizeof e->val_path, "%s", val);
    if (load_val_data(e, val, why, sizeof why) != EVAL_OK) {
        snprintf(msg, msg_len, "%s (the validation data of checkpoint '%s'%s)", why, o->ckpt,
                 o->data && o->data[0] ? "" : "; give --data if it moved");
        eval_close(e);
        return EVAL_EINVAL;
    }
    e->seed = run.seed;
    e->B = o->batch > 0 ? o->batch : run.batch;
    e->T = run.context > 0 && run.context <= e->m.cfg.seq_len ? run.context : e->m.cfg.seq_len;
    e->batches = o->batches > 0 ? o->batches : run.eval_batches;
    e->baseline = NAN;
    e->x = malloc((size_t)e->B * e->T * sizeof *e->x), e->y = malloc((size_t)e->B * e->T * sizeof *e->y);
    e->batch_loss = malloc((size_t)e->batches * sizeof *e->batch_loss);
    if (!e->x || !e->y || !e->batch_loss || llama_reserve(&e->m, e->B, e->T) != LLAMA_OK) {
        snprintf(msg, msg_len, "out of memory for (B %d, T %d) activations", e->B, e->T);
        eval_close(e);
        return EVAL_ENOMEM;
    }
    if (data_batch(&e->data, 1, e->seed, 0, e->B, e->T, e->x, e->y) != DATA_OK) {
        snprintf(msg, msg_len, "--data '%s': the validation split is shorter than one sequence of %d tokens",
                 e->data_path, e->T + 1);
        eval_close(e);
        return EVAL_EINVAL;
    }
    return EVAL_OK;
}

// --- policies for inference

bool eval_site_in_forward(ac_site s) {
    switch (s) {
    case AC_QKV_GRAD: case AC_O_GRAD: case AC_GATEUP_GRAD: case AC_DOWN_GRAD: case AC_HEAD_GRAD:
    case AC_GRADS: case AC_MASTER: case AC_ADAM_M: case AC_ADAM_V: case AC_NSITES:
        return false;
    default:
        return true;
    }
}

int eval_policy_check(const ac_policy *p, char *msg, size_t msg_len) {
    const ac_rule *sc = &p->site[AC_ATT_SCORES], *pr = &p->site[AC_ATT_PROBS];
    const bool att_recipe = (sc->active && (!sc->scaling.none || sc->delayed)) ||
                            (pr->active && (!pr->scaling.none || pr->delayed));
    const char *why = att_recipe ? "a scaling recipe on attention scores or probabilities (plain rounding only)"
                                 : NULL;
    if (!why) return EVAL_OK;
    snprintf(msg, msg_len, "policy '%s': %s is not supported by the forward yet", p->name, why);
    return EVAL_EINVAL;
}

bool eval_kv_per_token(const ac_policy *p) {
    const ac_rule *r = &p->site[AC_KV];
    const fmt_scaling *sc = &r->scaling;
    return !r->active || (!r->delayed && (sc->none || (sc->tile_rows == 1 && !sc->tensor_scale)));
}

void eval_policy_only(ac_policy *out, const ac_policy *p, ac_site s) {
    *out = *p;
    ac_policy f32;
    ac_policy_fp32(&f32);
    for (int i = 0; i < AC_NSITES; i++)
        if (i != (int)s) out->site[i] = f32.site[i];
    // An emulated accumulator needs both its operands cast (ac_policy_validate's rule): where the
    // derived policy keeps only one of them, that matmul accumulates in float32 as fp32 does.
    for (int g = 0; g < AC_NPROJ; g++)
        for (int k = 0; k < AC_NPASSES; k++) {
            ac_site a, b;
            ac_gemm_sites(g, k, &a, &b);
            if (!out->site[a].active || !out->site[b].active) out->acc[g][k] = f32.acc[g][k];
        }
}

int eval_attach_policy(llama_model *m, ac_ctx *ac, const eval_attach_req *r, char *msg, size_t msg_len) {
    memset(ac, 0, sizeof *ac);
    if (eval_policy_check(r->p, msg, msg_len) != EVAL_OK || ac_policy_validate(r->p, msg, msg_len) != AC_OK)
        return EVAL_EINVAL;
    if (ac_init(ac, r->p, m->cfg.n_layers, r->seed, r->tel, llama_max_operand(&m->cfg, r->B, r->T), msg, msg_len) !=
        AC_OK)
        return EVAL_EINVAL;
    ac_begin_step(ac, 0);
    m->ac = ac;
    m->uncounted = r->uncounted;
    return EVAL_OK;
}

void eval_detach_policy(llama_model *m, ac_ctx *ac) {
    m->ac = NULL;
    m->uncounted = false;
    ac_free(ac);
}

// --- the loss

int eval_loss(eval_model *e, const ac_policy *p, ac_telemetry tel, ac_ctx *ac, eval_result *r, char *msg,
              size_t msg_len) {
    ac_ctx own;
    ac_ctx *c = ac ? ac : &own;
    ac_policy f32;
    if (!p) ac_policy_fp32(&f32), p = &f32;
    memset(r, 0, sizeof *r);
    const eval_attach_req req = {.p = p, .B = e->B, .T = e->T, .seed = e->seed, .tel = tel};
    if (eval_attach_policy(&e->m, c, &req, msg, msg_len) != EVAL_OK) {
        if (!ac) ac_free(c);
        return EVAL_EINVAL;
    }
    const double t0 = fio_now();
    double sum = 0.0;
    for (int i = 0; i < e->batches; i++) {
        ac_begin_micro(c, i);  // stochastic rounding: a draw per (batch, site, layer)
        data_batch(&e->data, 1, e->seed, (uint64_t)i, e->B, e->T, e->x, e->y);
        // Activations were reserved for (B, T) and the tokens come from the vocabulary, so the
        // forward cannot fail; a NaN is a result (a cast that overflowed to inf, say).
        sum += e->batch_loss[i] = llama_forward(&e->m, e->x, e->y, e->B, e->T);
        if (e->progress) e->progress(e->progress_arg, i + 1, e->batches);
    }
    if (e->m.fault) {
        snprintf(msg, msg_len, "a product with the policy's emulated accumulator could not get its buffers (out "
                 "of memory)");
        e->m.fault = LLAMA_OK;
        e->m.ac = NULL;
        if (!ac) ac_free(c);
        return EVAL_ENOMEM;
    }
    r->loss = (float)(sum / e->batches);
    r->delta = r->delta_se = NAN;
    if (e->base_loss) {
        r->delta = (double)r->loss - e->baseline;
        if (e->batches > 1) {  // the sample standard deviation of the paired differences / sqrt(n)
            double m = 0, ss = 0;
            for (int i = 0; i < e->batches; i++) m += e->batch_loss[i] - e->base_loss[i];
            m /= e->batches;
            for (int i = 0; i < e->batches; i++) {
                const double d = e->batch_loss[i] - e->base_loss[i] - m;
                ss += d * d;
            }
            r->delta_se = sqrt(ss / (e->batches - 1) / e->batches);
        }
    }
    r->tokens = (long)e->batches * e->B * e->T;
    r->seconds = fio_now() - t0;
    e->m.ac = NULL;  // ac stays the caller's, with its counts
    if (!ac) ac_free(c);
    return EVAL_OK;
}

int eval_baseline(eval_model *e, eval_result *r, char *msg, size_t msg_len) {
    free(e->base_loss);
    e->base_loss = NULL, e->baseline = NAN;
    const int st = eval_loss(e, NULL, AC_TEL_OFF, NULL, r, msg, msg_len);
    if (st != EVAL_OK) return st;
    if (!(e->base_loss = malloc((size_t)e->batches * sizeof *e->base_loss))) {
        snprintf(msg, msg_len, "out of memory");
        return EVAL_ENOMEM;
    }
    memcpy(e->base_loss, e->batch_loss, (size_t)e->batches * sizeof *e->base_loss);
    e->baseline = r->loss;
    r->delta = 0, r->delta_se = 0;
    return EVAL_OK;
}

// --- output

void eval_write_json(FILE *f, const eval_model *e, const char *policy, const char *site, const eval_result *r,
                     const ac_ctx *ac) {
    fputs("{\"ckpt\":", f), jx_write_str(f, e->ckpt);
    fputs(",\"policy\":", f), jx_write_str(f, policy);
    fputs(",\"site\":", f);
    if (site) jx_write_str(f, site);
    else fputs("null", f);
    fputs(",\"val_loss\":", f), jx_write_num(f, r->loss, 9);
    if (e->base_loss) {
        fputs(",\"fp32_val_loss\":", f), jx_write_num(f, e->baseline, 9);
        fputs(",\"delta\":", f), jx_write_num(f, r->delta, 6);
        fputs(",\"delta_se\":", f), jx_write_num(f, r->delta_se, 6);
    }
    fprintf(f, ",\"batches\":%d,\"tokens\":%ld,\"seconds\":%.3f", e->batches, r->tokens, r->seconds);
    ac_write_json(ac, f);
    fputs("}\n", f);
}
