// checkpoint.c: the tagged-section checkpoint container (see checkpoint.h) and loading a
// model from it.
#include "trainer/checkpoint.h"

#include "trainer/fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t fnv1a64(const void *p, uint64_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint64_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static int write_all(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }

int ckpt_write(const char *path, const ckpt_section *s, int n, char *msg, size_t msg_len) {
    fio_out o;
    char why[FIO_PATH_MAX + 128];
    if (fio_create(&o, path, why, sizeof why) != FIO_OK) {
        snprintf(msg, msg_len, "checkpoint %s", why);
        return CKPT_EIO;
    }
    const uint32_t head[4] = {CKPT_MAGIC, CKPT_VERSION, (uint32_t)n, 0};
    int bad = write_all(o.f, head, sizeof head);
    for (int i = 0; i < n && !bad; i++) {
        char tag[CKPT_TAG_LEN] = {0};
        memcpy(tag, s[i].tag, strnlen(s[i].tag, CKPT_TAG_LEN));
        const uint64_t meta[2] = {s[i].nbytes, fnv1a64(s[i].data, s[i].nbytes)};
        bad = write_all(o.f, tag, sizeof tag) || write_all(o.f, meta, sizeof meta) ||
              write_all(o.f, s[i].data, s[i].nbytes);
    }
    if (bad) {
        snprintf(msg, msg_len, "checkpoint '%s': write failed: %s (the previous file is intact)", path,
                 strerror(errno));
        fio_abort(&o);
        return CKPT_EIO;
    }
    if (fio_commit(&o, why, sizeof why) != FIO_OK) {
        snprintf(msg, msg_len, "checkpoint %s", why);
        return CKPT_EIO;
    }
    return CKPT_OK;
}

void ckpt_file_free(ckpt_file *f) {
    for (int i = 0; f->s && i < f->n; i++) free((void *)f->s[i].data);
    free(f->s);
    f->s = NULL, f->n = 0;
}

int ckpt_read(ckpt_file *out, const char *path, char *msg, size_t msg_len) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, msg_len, "checkpoint '%s': cannot open: %s", path, strerror(errno));
        return CKPT_EIO;
    }
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    rewind(f);
    uint32_t head[4];
    int st = CKPT_OK;
    if (fread(head, sizeof head, 1, f) != 1 || head[0] != CKPT_MAGIC) {
        snprintf(msg, msg_len, "checkpoint '%s': not an fplab checkpoint (magic 0x%08x expected, found 0x%08x)",
                 path, (unsigned)CKPT_MAGIC, size >= 4 ? (unsigned)head[0] : 0u);
        st = CKPT_EFORMAT;
    } else if (head[1] != CKPT_VERSION) {
        snprintf(msg, msg_len, "checkpoint '%s': version %u, this fplab reads version %d", path,
                 (unsigned)head[1], CKPT_VERSION);
        st = CKPT_EFORMAT;
    } else if (head[2] > 1024) {
        snprintf(msg, msg_len, "checkpoint '%s': %u sections (damaged header)", path, (unsigned)head[2]);
        st = CKPT_EFORMAT;
    }
    if (st == CKPT_OK) {
        out->s = calloc(head[2] ? head[2] : 1, sizeof *out->s);
        if (!out->s) st = CKPT_ENOMEM;
    }
    long pos = (long)sizeof head;
    for (uint32_t i = 0; st == CKPT_OK && i < head[2]; i++) {
        ckpt_section *s = &out->s[i];
        char tag[CKPT_TAG_LEN];
        uint64_t meta[2];
        if (fread(tag, sizeof tag, 1, f) != 1 || fread(meta, sizeof meta, 1, f) != 1 ||
            meta[0] > (uint64_t)(size - pos)) {
            snprintf(msg, msg_len, "checkpoint '%s': truncated at section %u (file of %ld bytes)", path,
                     (unsigned)i, size);
            st = CKPT_EFORMAT;
            break;
        }
        memcpy(s->tag, tag, CKPT_TAG_LEN);
        s->tag[CKPT_TAG_LEN] = 0;
        void *data = malloc(meta[0] ? meta[0] : 1);
        if (!data) {
            st = CKPT_ENOMEM;
            break;
        }
        s->data = data, s->nbytes = meta[0];
        out->n = (int)i + 1;
        if (fread(data, 1, meta[0], f) != meta[0]) {
            snprintf(msg, msg_len, "checkpoint '%s': section '%s' truncated (%llu bytes expected)", path,
                     s->tag, (unsigned long long)meta[0]);
            st = CKPT_EFORMAT;
        } else if (fnv1a64(data, meta[0]) != meta[1]) {
            snprintf(msg, msg_len, "checkpoint '%s': section '%s' damaged (checksum mismatch)", path, s->tag);
            st = CKPT_EFORMAT;
        }
        pos += (long)(sizeof tag + sizeof meta + meta[0]);
    }
    fclose(f);
    if (st != CKPT_OK) ckpt_file_free(out);
    return st;
}

const ckpt_section *ckpt_find(const ckpt_file *f, const char *tag) {
    for (int i = 0; i < f->n; i++)
        if (!strncmp(f->s[i].tag, tag, CKPT_TAG_LEN)) return &f->s[i];
    return NULL;
}

// --- the model's sections

// llama_config as fixed fields: int32 dim, n_layers, n_heads, n_kv_heads, hidden_dim,
// vocab_size, seq_len, tied; float32 rope_theta, norm_eps.

void ckpt_config_pack(unsigned char out[CKPT_CONFIG_BYTES], const llama_config *c) {
    const int32_t i[8] = {c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->hidden_dim,
                          c->vocab_size, c->seq_len, c->tied};
    memcpy(out, i, sizeof i);
    memcpy(out + 32, &c->rope_theta, 4);
    memcpy(out + 36, &c->norm_eps, 4);
}

int ckpt_config_unpack(llama_config *c, const ckpt_section *s) {
    if (!s || s->nbytes != CKPT_CONFIG_BYTES) return CKPT_EFORMAT;
    int32_t i[8];
    memcpy(i, s->data, sizeof i);
    *c = (llama_config){.dim = i[0], .n_layers = i[1], .n_heads = i[2], .n_kv_heads = i[3],
                        .hidden_dim = i[4], .vocab_size = i[5], .seq_len = i[6], .tied = i[7] != 0};
    memcpy(&c->rope_theta, (const char *)s->data + 32, 4);
    memcpy(&c->norm_eps, (const char *)s->data + 36, 4);
    return CKPT_OK;
}

// vocab: int32 kind, int32 size, then size uint32 code points (char vocabularies only).
size_t ckpt_vocab_pack(unsigned char *out, const data_vocab *v) {
    const int32_t h[2] = {(int32_t)v->kind, v->size};
    const size_t n = v->kind == DATA_VOCAB_CHAR ? (size_t)v->size : 0;
    if (out) {
        memcpy(out, h, sizeof h);
        if (n) memcpy(out + sizeof h, v->cp, n * 4);
    }
    return sizeof h + n * 4;
}

int ckpt_vocab_unpack(data_vocab *v, const ckpt_section *s) {
    memset(v, 0, sizeof *v);
    if (!s || s->nbytes < 8) return CKPT_EFORMAT;
    int32_t h[2];
    memcpy(h, s->data, sizeof h);
    if (h[0] < DATA_VOCAB_CHAR || h[0] > DATA_VOCAB_TOKENS || h[1] <= 0) return CKPT_EFORMAT;
    const size_t n = h[0] == DATA_VOCAB_CHAR ? (size_t)h[1] : 0;
    if (s->nbytes != 8 + n * 4) return CKPT_EFORMAT;
    v->kind = (data_vocab_kind)h[0], v->size = h[1];
    if (n) {
        v->cp = malloc(n * 4);
        if (!v->cp) return CKPT_ENOMEM;
        memcpy(v->cp, (const char *)s->data + 8, n * 4);
    }
    return CKPT_OK;
}

int ckpt_load_model_from(const ckpt_file *f, const char *path, llama_model *m, data_vocab *v,
                         char *msg, size_t msg_len) {
    llama_config c;
    const ckpt_section *cs = ckpt_find(f, "config"), *ps = ckpt_find(f, "params"),
                       *vs = ckpt_find(f, "vocab");
    if (!cs || !ps || !vs) {
        snprintf(msg, msg_len, "checkpoint '%s': section '%s' missing", path,
                 !cs ? "config" : !ps ? "params" : "vocab");
        return CKPT_EMISSING;
    }
    if (ckpt_config_unpack(&c, cs) != CKPT_OK) {
        snprintf(msg, msg_len, "checkpoint '%s': section 'config' has %llu bytes, expected %d", path,
                 (unsigned long long)cs->nbytes, CKPT_CONFIG_BYTES);
        return CKPT_EFORMAT;
    }
    char why[256];
    if (llama_init(m, &c, LLAMA_RECOMPUTE_NONE, why, sizeof why) != LLAMA_OK) {
        snprintf(msg, msg_len, "checkpoint '%s': %s", path, why);
        return CKPT_EFORMAT;
    }
    if (ps->nbytes != m->n_params * sizeof(float)) {
        snprintf(msg, msg_len, "checkpoint '%s': section 'params' has %llu bytes, the config needs %zu",
                 path, (unsigned long long)ps->nbytes, m->n_params * sizeof(float));
        llama_free(m);
        return CKPT_EFORMAT;
    }
    memcpy(m->params, ps->data, ps->nbytes);
    if (ckpt_vocab_unpack(v, vs) != CKPT_OK || v->size != c.vocab_size) {
        snprintf(msg, msg_len, "checkpoint '%s': section 'vocab' is malformed or disagrees with the "
                 "config's vocab_size %d", path, c.vocab_size);
        data_vocab_free(v);
        llama_free(m);
        return CKPT_EFORMAT;
    }
    return CKPT_OK;
}

int ckpt_load_model(const char *path, llama_model *m, data_vocab *v, char *msg, size_t msg_len) {
    ckpt_file f;
    int st = ckpt_read(&f, path, msg, msg_len);
    if (st != CKPT_OK) return st;
    st = ckpt_load_model_from(&f, path, m, v, msg, msg_len);
    ckpt_file_free(&f);
    return st;
}
