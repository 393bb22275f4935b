// export_llama2c.c: llama2.c's legacy model file and tokenizer.bin (see export_llama2c.h).
#include "trainer/export_llama2c.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// --- atomic file writing

typedef struct {
    FILE *f;
    char tmp[4096];
    const char *path;
    int bad;  // a write failed
} out_file;

static int out_open(out_file *o, const char *path, char *msg, size_t msg_len) {
    o->path = path, o->bad = 0;
    if ((size_t)snprintf(o->tmp, sizeof o->tmp, "%s.tmp", path) >= sizeof o->tmp) {
        if (msg) snprintf(msg, msg_len, "'%s': path too long", path);
        return EXPORT_EIO;
    }
    o->f = fopen(o->tmp, "wb");
    if (!o->f) {
        if (msg) snprintf(msg, msg_len, "'%s': cannot create: %s", o->tmp, strerror(errno));
        return EXPORT_EIO;
    }
    return EXPORT_OK;
}

static void out_write(out_file *o, const void *p, size_t n) {
    if (o->bad || !n) return;
    errno = 0;
    if (fwrite(p, 1, n, o->f) != n) o->bad = errno ? errno : EIO;
}

// Flushes, fsyncs and renames over path (then fsyncs the directory so the rename survives a
// crash); on any failure removes the temporary file and leaves path as it was.
static int out_close(out_file *o, char *msg, size_t msg_len) {
    int err = o->bad;
    if (!err && (fflush(o->f) != 0 || fsync(fileno(o->f)) != 0)) err = errno;
    if (fclose(o->f) != 0 && !err) err = errno;
    if (!err && rename(o->tmp, o->path) != 0) err = errno;
    if (err) {
        unlink(o->tmp);
        if (msg) snprintf(msg, msg_len, "'%s': write failed: %s (nothing was replaced)", o->path, strerror(err));
        return EXPORT_EIO;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", o->path);
    const int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) fsync(dfd), close(dfd);
    return EXPORT_OK;
}

// --- model

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

size_t export_llama2c_model_bytes(const llama_config *c) {
    size_t s[LP_COUNT];
    const size_t n = llama_param_sizes(c, s);
    const size_t hs = (size_t)(c->dim / c->n_heads);
    return EXPORT_LLAMA2C_HEADER_INTS * 4 + 4 * (n + 2 * (size_t)c->seq_len * (hs / 2));
}

int export_llama2c_model(const char *path, const llama_model *m, char *msg, size_t msg_len) {
    const llama_config *c = &m->cfg;
    int st = llama_config_validate(c, msg, msg_len);
    if (st != LLAMA_OK) return EXPORT_EINVAL;
    if ((st = export_llama2c_check(c, msg, msg_len)) != EXPORT_OK) return st;
    const int32_t head[EXPORT_LLAMA2C_HEADER_INTS] = {
        c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
        c->tied ? c->vocab_size : -c->vocab_size,  // run.c: shared_weights = vocab_size > 0
        c->seq_len};
    size_t s[LP_COUNT];
    llama_param_sizes(c, s);
    const size_t freq = (size_t)c->seq_len * (size_t)(c->dim / c->n_heads / 2);
    out_file o;
    if ((st = out_open(&o, path, msg, msg_len)) != EXPORT_OK) return st;
    out_write(&o, head, sizeof head);
    // llama.h's order up to the final norm is run.c's order (the _Static_assert below).
    for (int i = LP_TOK_EMB; i <= LP_FINAL_NORM; i++) out_write(&o, m->p.t[i], s[i] * sizeof(float));
    out_write(&o, m->rope_cos, freq * sizeof(float));  // freq_cis_real (seq_len, hs/2)
    out_write(&o, m->rope_sin, freq * sizeof(float));  // freq_cis_imag
    if (!c->tied) out_write(&o, m->p.t[LP_LM_HEAD], s[LP_LM_HEAD] * sizeof(float));
    return out_close(&o, msg, msg_len);
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
    if (v->size <= 0 || (v->kind == DATA_VOCAB_BYTE && v->size != 256) ||
        (v->kind == DATA_VOCAB_CHAR && !v->cp)) {
        if (msg) snprintf(msg, msg_len, "vocabulary of kind %d and size %d is malformed", (int)v->kind, v->size);
        return EXPORT_EINVAL;
    }
    // Pieces first (data_decode gives the UTF-8 of a code point, or the raw byte of a byte
    // token: bytes >= 0x80 are written as they are, one byte each; run.c prints none of them,
    // see the header), so that nothing is written when one fails.
    char(*piece)[8] = malloc((size_t)v->size * sizeof *piece);
    int *len = malloc((size_t)v->size * sizeof *len);
    if (!piece || !len) {
        free(piece), free(len);
        if (msg) snprintf(msg, msg_len, "out of memory for a vocabulary of %d", v->size);
        return EXPORT_ENOMEM;
    }
    int32_t max_len = 0;
    for (int i = 0; i < v->size; i++) {
        len[i] = data_decode(v, i, piece[i], sizeof piece[i]);
        if (len[i] <= 0) {
            if (msg) snprintf(msg, msg_len, "vocabulary entry %d is not a valid character", i);
            free(piece), free(len);
            return EXPORT_EINVAL;
        }
        if (len[i] > max_len) max_len = len[i];
    }
    out_file o;
    int st = out_open(&o, path, msg, msg_len);
    if (st == EXPORT_OK) {
        out_write(&o, &max_len, sizeof max_len);
        const float score = 0.0f;
        for (int i = 0; i < v->size; i++) {
            const int32_t n = len[i];
            out_write(&o, &score, sizeof score);
            out_write(&o, &n, sizeof n);
            out_write(&o, piece[i], (size_t)n);
        }
        st = out_close(&o, msg, msg_len);
    }
    free(piece), free(len);
    return st;
}
