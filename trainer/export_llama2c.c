// export_llama2c.c: llama2.c's legacy model file and tokenizer.bin (see export_llama2c.h for
// what run.c does with them and the layout that makes it generate what fplab sample does).
#include "trainer/export_llama2c.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/fileio.h"
#include "trainer/sample.h"

static const char *const special_piece[EXPORT_LLAMA2C_N_SPECIAL] = {"<unk>", "<s>", "</s>"};
static const char bos_space_piece[] = "<s> ";  // special_piece[1] + the dummy prefix " "

// --- layout

int export_llama2c_layout_of(export_llama2c_layout *l, const data_vocab *v, char *msg, size_t msg_len) {
    const bool ok = v->size > 0 && (v->kind != DATA_VOCAB_BYTE || v->size == 256) &&
                    (v->kind != DATA_VOCAB_CHAR || (v->cp && v->size <= 0x110000));
    if (!ok) {
        if (msg) snprintf(msg, msg_len, "vocabulary of kind %d and size %d is malformed", (int)v->kind, v->size);
        return EXPORT_EINVAL;
    }
    *l = (export_llama2c_layout){.n_ids = v->size, .n_model = v->size, .model_base = 0, .bos_space = -1,
                                 .space = -1, .start = sample_start_token(v)};
    if (v->kind == DATA_VOCAB_TOKENS) return EXPORT_OK;
    int32_t sp = -1;
    const bool has_space = data_encode(v, " ", &sp, 1, NULL, 0) == 1;
    // A byte vocabulary is run.c's byte fallback itself (byte b at 3 + b); a char vocabulary
    // gets the 256 byte tokens too, so that the ids run.c's fallback feeds for a character the
    // model does not know exist (they would otherwise be other characters or beyond the table).
    l->model_base = EXPORT_LLAMA2C_N_SPECIAL + (v->kind == DATA_VOCAB_CHAR ? EXPORT_LLAMA2C_N_BYTES : 0);
    l->bos_space = l->model_base + v->size;
    l->n_ids = l->bos_space + 1;
    l->space = has_space ? l->model_base + sp : l->n_ids++;
    return EXPORT_OK;
}

// The piece of id (NUL-terminated in buf, cap >= 8); its length in bytes (a byte vocabulary's
// byte 0 is one NUL byte), or -1 for a code point that is not a character.
static int piece_of(const export_llama2c_layout *l, const data_vocab *v, int id, char *buf, size_t cap) {
    if (id < EXPORT_LLAMA2C_N_SPECIAL) return snprintf(buf, cap, "%s", special_piece[id]);
    if (id == l->bos_space) return snprintf(buf, cap, "%s", bos_space_piece);
    if (id >= l->model_base && id < l->model_base + l->n_model) return data_decode(v, id - l->model_base, buf, cap);
    if (id == l->space) return snprintf(buf, cap, " ");
    return snprintf(buf, cap, "<0x%02X>", (unsigned)(id - EXPORT_LLAMA2C_N_SPECIAL));  // char vocab's byte tokens
}

// --- checks

int export_llama2c_check(const llama_config *c, char *msg, size_t msg_len) {
    // Exact comparisons: the config holds float32 and run.c uses exactly these constants.
    if (c->rope_theta != EXPORT_LLAMA2C_ROPE_THETA) {
        if (msg)
            snprintf(msg, msg_len, "model rope_theta %g: llama2.c's run.c hard-codes RoPE theta 10000; "
                     "this model cannot be exported", c->rope_theta);
        return EXPORT_EUNSUPPORTED;
    }
    if (c->norm_eps != EXPORT_LLAMA2C_NORM_EPS) {
        if (msg)
            snprintf(msg, msg_len, "model norm_eps %g: llama2.c's run.c hard-codes RMSNorm eps 1e-5; "
                     "this model cannot be exported", c->norm_eps);
        return EXPORT_EUNSUPPORTED;
    }
    return EXPORT_OK;
}

int export_llama2c_check_paths(const char *ckpt, const char *model_out, const char *tok_out, char *msg,
                               size_t msg_len) {
    char m[2 * FIO_PATH_MAX + 128];
    if (fio_refuse_same("llama2c", model_out, "ckpt", ckpt, m, sizeof m) != FIO_OK ||
        fio_refuse_same("tokenizer", tok_out, "ckpt", ckpt, m, sizeof m) != FIO_OK) {
        if (msg) snprintf(msg, msg_len, "%s", m);
        return EXPORT_EINVAL;
    }
    // Two outputs: fio_same_target also catches names of files that do not exist yet (and uses
    // fio_same_file for the ones that do); fio_refuse_same's "overwrite an input" would misname it.
    if (model_out && tok_out && *model_out && *tok_out && fio_same_target(model_out, tok_out)) {
        if (msg)
            snprintf(msg, msg_len, "--tokenizer '%s' and --llama2c '%s' name the same file; give two names",
                     tok_out, model_out);
        return EXPORT_EINVAL;
    }
    return EXPORT_OK;
}

// --- model

size_t export_llama2c_model_bytes(const llama_config *c, const export_llama2c_layout *l) {
    size_t s[LP_COUNT];
    const size_t n = llama_param_sizes(c, s);
    const size_t hs = (size_t)(c->dim / c->n_heads), C = (size_t)c->dim;
    const bool layout = l->model_base > 0;  // char/byte: both tables n_ids rows, untied
    const size_t tables = layout ? 2 * (size_t)l->n_ids * C : s[LP_TOK_EMB] + s[LP_LM_HEAD];
    return EXPORT_LLAMA2C_HEADER_INTS * 4 + 4 * (n - s[LP_TOK_EMB] - s[LP_LM_HEAD] + tables +
                                                 2 * (size_t)c->seq_len * (hs / 2));
}

// Writes one table of l->n_ids rows of C floats: model token t's row is rows[t]; the rows of
// "<s>" and "<s> " are rows[l->start] when bos_row is set; every other id gets `other`.
static void put_table(FILE *f, const export_llama2c_layout *l, const float *rows, size_t C, bool bos_row,
                      const float *other) {
    for (int id = 0; id < l->n_ids; id++) {
        const int t = id - l->model_base;
        const float *r = other;
        if (t >= 0 && t < l->n_model) r = rows + (size_t)t * C;
        else if (bos_row && (id == EXPORT_LLAMA2C_BOS || id == l->bos_space)) r = rows + (size_t)l->start * C;
        fwrite(r, sizeof(float), C, f);  // a failure sets the stream's error flag: fio_commit reports it
    }
}

// The mean of the V classifier rows (V,C), in double, rounded once. Why greedy run.c never
// picks an id with this row: in exact arithmetic its logit m.x is the mean of the model's
// logits w_i.x, at most their maximum, with equality only when all V are equal. run.c's float
// dot products of length C err by at most gamma_C * A (A = max_i sum_j |w_ij x_j|, which also
// bounds sum_j |m_j x_j|), and rounding m to float adds u * A, so the added id can reach the
// largest computed logit (a tie goes to it: its id is smaller) only if the model's logits all
// lie within (2 gamma_C + u) A ~ (2C + 1) 2^-24 A of their mean: a prediction uniform to
// ~1e-5 relative (C = 128), where any two implementations' argmaxes disagree anyway. The one
// case certain to tie, all classifier rows equal (every x), is refused by the caller.
static int mean_row(float *out, const float *rows, int V, size_t C) {
    double *acc = calloc(C, sizeof *acc);
    if (!acc) return EXPORT_ENOMEM;
    for (int i = 0; i < V; i++)
        for (size_t j = 0; j < C; j++) acc[j] += rows[(size_t)i * C + j];
    for (size_t j = 0; j < C; j++) out[j] = (float)(acc[j] / V);
    free(acc);
    return EXPORT_OK;
}

static bool rows_all_equal(const float *rows, int V, size_t C) {
    for (int i = 1; i < V; i++)
        if (memcmp(rows, rows + (size_t)i * C, C * sizeof *rows)) return false;
    return true;
}

int export_llama2c_model(const char *path, const llama_model *m, const data_vocab *v, char *msg,
                         size_t msg_len) {
    const llama_config *c = &m->cfg;
    int st = llama_config_validate(c, msg, msg_len);
    if (st != LLAMA_OK) return EXPORT_EINVAL;
    if ((st = export_llama2c_check(c, msg, msg_len)) != EXPORT_OK) return st;
    export_llama2c_layout l;
    if ((st = export_llama2c_layout_of(&l, v, msg, msg_len)) != EXPORT_OK) return st;
    if (l.n_model != c->vocab_size) {
        if (msg)
            snprintf(msg, msg_len, "the vocabulary has %d entries but the model %d tokens", l.n_model, c->vocab_size);
        return EXPORT_EINVAL;
    }
    const bool layout = l.model_base > 0;
    const size_t C = (size_t)c->dim;
    const float *head = c->tied ? m->p.t[LP_TOK_EMB] : m->p.t[LP_LM_HEAD];
    if (layout && rows_all_equal(head, l.n_model, C)) {
        if (msg)
            snprintf(msg, msg_len, "every row of the model's classifier is the same: all logits tie, and "
                     "run.c's argmax would pick the added id 0 (<unk>) instead of token 0");
        return EXPORT_EUNSUPPORTED;
    }
    float *zero = calloc(C, sizeof *zero), *mean = malloc(C * sizeof *mean);
    if (!zero || !mean || mean_row(mean, head, l.n_model, C) != EXPORT_OK) {
        free(zero), free(mean);
        if (msg) snprintf(msg, msg_len, "out of memory for rows of %zu floats", C);
        return EXPORT_ENOMEM;
    }
    const int32_t head_ints[EXPORT_LLAMA2C_HEADER_INTS] = {
        c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
        // run.c: shared_weights = vocab_size > 0; the laid-out tables always differ
        layout ? -l.n_ids : c->tied ? c->vocab_size : -c->vocab_size, c->seq_len};
    size_t s[LP_COUNT];
    llama_param_sizes(c, s);
    const size_t freq = (size_t)c->seq_len * (size_t)(c->dim / c->n_heads / 2);
    fio_out o;
    if (fio_create(&o, path, msg, msg_len) != FIO_OK) {
        free(zero), free(mean);
        return EXPORT_EIO;
    }
    fwrite(head_ints, sizeof head_ints, 1, o.f);
    if (layout) put_table(o.f, &l, m->p.t[LP_TOK_EMB], C, true, zero);
    else fwrite(m->p.t[LP_TOK_EMB], sizeof(float), s[LP_TOK_EMB], o.f);
    // llama.h's order up to the final norm is run.c's order (the _Static_assert below).
    for (int i = LP_ATTN_NORM; i <= LP_FINAL_NORM; i++) fwrite(m->p.t[i], sizeof(float), s[i], o.f);
    fwrite(m->rope_cos, sizeof(float), freq, o.f);  // freq_cis_real (seq_len, hs/2)
    fwrite(m->rope_sin, sizeof(float), freq, o.f);  // freq_cis_imag
    if (layout) put_table(o.f, &l, head, C, false, mean);
    else if (!c->tied) fwrite(m->p.t[LP_LM_HEAD], sizeof(float), s[LP_LM_HEAD], o.f);
    free(zero), free(mean);
    return fio_commit(&o, msg, msg_len) == FIO_OK ? EXPORT_OK : EXPORT_EIO;
}

_Static_assert(LP_ATTN_NORM == LP_TOK_EMB + 1 && LP_WQ == LP_ATTN_NORM + 1 && LP_WK == LP_WQ + 1 &&
                   LP_WV == LP_WK + 1 && LP_WO == LP_WV + 1 && LP_MLP_NORM == LP_WO + 1 &&
                   LP_W_GATE == LP_MLP_NORM + 1 && LP_W_DOWN == LP_W_GATE + 1 &&
                   LP_W_UP == LP_W_DOWN + 1 && LP_FINAL_NORM == LP_W_UP + 1,
               "llama.h's parameter order must be llama2.c's for the export loop");

// --- tokenizer

int export_llama2c_tokenizer(const char *path, const data_vocab *v, char *msg, size_t msg_len) {
    if (v->kind == DATA_VOCAB_TOKENS) {
        if (msg)
            snprintf(msg, msg_len, "a token-id vocabulary (llm.c shards) has no text for a tokenizer.bin; "
                     "export the model alone and use the tokenizer of the shards' source");
        return EXPORT_EUNSUPPORTED;
    }
    export_llama2c_layout l;
    int st = export_llama2c_layout_of(&l, v, msg, msg_len);
    if (st != EXPORT_OK) return st;
    // Every piece first, so that nothing is written when one fails. A byte vocabulary's bytes
    // >= 0x80 are written as they are, one byte each (run.c prints none of them: see the header).
    char(*piece)[8] = malloc((size_t)l.n_ids * sizeof *piece);
    int *len = malloc((size_t)l.n_ids * sizeof *len);
    if (!piece || !len) {
        free(piece), free(len);
        if (msg) snprintf(msg, msg_len, "out of memory for a vocabulary of %d", l.n_ids);
        return EXPORT_ENOMEM;
    }
    // max_token_length sizes run.c's merge buffer (2 * max + 3 bytes, holding two pieces), so
    // it must be the longest piece: "<0xXX>" (6) for a char vocabulary, "<unk>" (5) for bytes.
    int32_t max_len = 0;
    for (int id = 0; id < l.n_ids; id++) {
        len[id] = piece_of(&l, v, id, piece[id], sizeof piece[id]);
        if (len[id] <= 0) {
            if (msg) snprintf(msg, msg_len, "vocabulary entry %d is not a valid character", id - l.model_base);
            free(piece), free(len);
            return EXPORT_EINVAL;
        }
        if (len[id] > max_len) max_len = len[id];
    }
    fio_out o;
    if (fio_create(&o, path, msg, msg_len) != FIO_OK) st = EXPORT_EIO;
    if (st == EXPORT_OK) {
        fwrite(&max_len, sizeof max_len, 1, o.f);
        // Scores play no part: the one mergeable pair is ("<s>", " ") (see the header).
        const float score = 0.0f;
        for (int id = 0; id < l.n_ids; id++) {
            const int32_t n = len[id];
            fwrite(&score, sizeof score, 1, o.f);
            fwrite(&n, sizeof n, 1, o.f);
            fwrite(piece[id], 1, (size_t)n, o.f);
        }
        st = fio_commit(&o, msg, msg_len) == FIO_OK ? EXPORT_OK : EXPORT_EIO;
    }
    free(piece), free(len);
    return st;
}
