// train_ckpt.c: the checkpoint of a training run (see train_internal.h): every section a
// resumed run needs, written atomically; on resume the optimizer moments and the training
// state, each checked against the model and the options before it is used.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/train_internal.h"

// What identifies the corpus a run trains on: its token count, the train/validation split and a
// 64-bit FNV-1a hash of the tokens (one token at a time). Saved as section "data"; a resume
// compares it with the corpus it loaded, so an edited file is refused rather than silently used.
typedef struct {
    uint64_t n_tokens, n_train, hash;
} corpus_id;

static corpus_id corpus_of(const data_set *d) {
    corpus_id c = {d->n_tokens, d->n_train, 0xcbf29ce484222325ull};
    for (size_t i = 0; i < d->n_tokens; i++) c.hash = (c.hash ^ (uint32_t)d->tokens[i]) * 0x100000001b3ull;
    return c;
}

int train__save_checkpoint(train_run_state *r, char *msg, size_t msg_len) {
    unsigned char cfg[CKPT_CONFIG_BYTES];
    ckpt_config_pack(cfg, &r->m.cfg);
    const size_t vbytes = ckpt_vocab_pack(NULL, &r->data.set.vocab), obytes = train_opts_text(&r->o, NULL, 0);
    const size_t pb = r->m.n_params * sizeof(float), ab = ac_state_bytes(&r->prec.ac);
    unsigned char *voc = malloc(vbytes);
    char *opt = malloc(obytes + 1);
    void *acs = malloc(ab ? ab : 1);
    if (!voc || !opt || !acs) {
        free(voc), free(opt), free(acs);
        snprintf(msg, msg_len, "out of memory writing a checkpoint");
        return -1;
    }
    ckpt_vocab_pack(voc, &r->data.set.vocab);
    train_opts_text(&r->o, opt, obytes + 1);
    ac_state_save(&r->prec.ac, acs);
    r->st.ranks = r->dist.w.size;
    const corpus_id cid = corpus_of(&r->data.set);
    ckpt_section s[11 + TRAIN_DIST_SECTIONS] = {
        {"config", cfg, sizeof cfg},     {"params", r->m.params, pb}, {"adam_m", r->optim.adam_m, pb},
        {"adam_v", r->optim.adam_v, pb}, {"state", &r->st, sizeof r->st}, {"vocab", voc, vbytes},
        {"options", opt, obytes},        {"policy", r->prec.pol_text, strlen(r->prec.pol_text)},
        {"acstate", acs, ab},            {"kahan", r->optim.kahan, r->optim.kahan ? pb : 0},
    };
    int ns = r->optim.kahan ? 10 : 9;
    s[ns++] = (ckpt_section){"data", &cid, sizeof cid};
    ns += train__dist_ckpt_sections(r, s + ns);  // collective: every rank gathers, rank 0 writes
    const int st = r->dist.w.rank == 0 ? ckpt_write(r->out.ckpt_path, s, ns, msg, msg_len) : CKPT_OK;
    free(voc), free(opt), free(acs);
    return st == CKPT_OK ? 0 : -1;
}

// The state section as the options allow it: a step within [0, steps], no more applied steps
// than steps, accum micro-batches per step and rank drawn (1 to DIST_RANKS_MAX ranks, which
// may change on resume), the options' seed, a validation loss that is NaN (none yet) or finite
// and non-negative.
static const char *state_problem(const train_state *s, const train_opts *o) {
    if (s->step < 0 || s->step > o->steps) return "its step count is outside [0, --steps]";
    if (s->applied < 0 || s->applied > s->step) return "its applied-step count is outside [0, step]";
    // Each step draws ranks x accum micro-batches, and the number of ranks may change on resume.
    if (s->ranks < 0 || s->ranks > DIST_RANKS_MAX) return "its number of ranks is outside [0, 65536]";
    if (s->batches_drawn < s->step * (int64_t)o->accum || s->batches_drawn % o->accum != 0 ||
        s->batches_drawn > s->step * (int64_t)o->accum * DIST_RANKS_MAX)
        return "its data position is not a multiple of --accum between step x --accum and 65536 times that";
    if (s->seed != o->seed) return "its seed differs from its options' --seed";
    if (!isnan(s->last_val_loss) && !(s->last_val_loss >= 0 && isfinite(s->last_val_loss)))
        return "its last validation loss is negative or infinite";
    return NULL;
}

int train__load_checkpoint(train_run_state *r, const ckpt_file *f, const char *path, char *msg, size_t msg_len) {
    const ckpt_section *am = ckpt_find(f, "adam_m"), *av = ckpt_find(f, "adam_v"), *st = ckpt_find(f, "state");
    const size_t pb = r->m.n_params * sizeof(float);
    if (!am || !av || !st || am->nbytes != pb || av->nbytes != pb || st->nbytes != sizeof r->st) {
        snprintf(msg, msg_len, "checkpoint '%s': optimizer or state section missing or of the wrong "
                 "size (a model-only export cannot be resumed)", path);
        return -1;
    }
    // The corpus: a checkpoint from before the "data" section has nothing to compare (accepted).
    const ckpt_section *ds = ckpt_find(f, "data");
    if (ds) {
        corpus_id was;
        const corpus_id now = corpus_of(&r->data.set);
        if (ds->nbytes != sizeof was) {
            snprintf(msg, msg_len, "checkpoint '%s': section 'data' has %zu bytes; expected %zu", path,
                     (size_t)ds->nbytes, sizeof was);
            return -1;
        }
        memcpy(&was, ds->data, sizeof was);
        if (was.n_tokens != now.n_tokens || was.n_train != now.n_train || was.hash != now.hash) {
            snprintf(msg, msg_len, "checkpoint '%s' was trained on another corpus than --data '%s' holds now "
                     "(%llu tokens, hash %016llx; the run had %llu tokens, hash %016llx): restore the data the run "
                     "was trained on, or start a fresh run", path, r->o.data, (unsigned long long)now.n_tokens,
                     (unsigned long long)now.hash, (unsigned long long)was.n_tokens, (unsigned long long)was.hash);
            return -1;
        }
    }
    memcpy(&r->st, st->data, sizeof r->st);
    const char *why = state_problem(&r->st, &r->o);
    if (why) {
        snprintf(msg, msg_len, "checkpoint '%s': section 'state' is inconsistent: %s", path, why);
        return -1;
    }
    r->optim.adam_m = malloc(pb), r->optim.adam_v = malloc(pb);
    if (!r->optim.adam_m || !r->optim.adam_v) {
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    memcpy(r->optim.adam_m, am->data, pb), memcpy(r->optim.adam_v, av->data, pb);
    // A run never saves non-finite weights or moments (it stops first), so such a file was not
    // written by one; the second moment is a mean of squares, and zero under SGD (adam_m holds
    // the momentum buffer).
    for (size_t i = 0; i < r->m.n_params; i++)
        if (!isfinite(r->m.params[i]) || !isfinite(r->optim.adam_m[i]) ||
            !(r->optim.adam_v[i] >= 0 && isfinite(r->optim.adam_v[i])) ||
            (r->optim.sgd && r->optim.adam_v[i] != 0)) {
            snprintf(msg, msg_len, "checkpoint '%s': parameter %zu or its optimizer state is not finite (or the "
                     "second moment is negative, or nonzero under --optimizer sgd): not a checkpoint a run would "
                     "write", path, i);
            return -1;
        }
    return 0;
}
