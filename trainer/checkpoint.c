// checkpoint.c: the tagged-section checkpoint container (see checkpoint.h) and loading a
// model from it.
// Constraints: a file from outside is hostile. Every count and length read from it is checked
// against the file's size and a stated limit before it sizes an allocation, and every section a
// loader interprets is checked against the config and the model's limits before anything of
// the model's size is allocated. The checksums only say that a section is intact.
#include "trainer/checkpoint.h"

#include "util/fileio.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

// Formats a message into msg (when non-NULL) and returns st.
// A tag: 1 to 8 printable ASCII characters (no space), NUL-padded to 8 bytes.
static bool tag_ok(const char tag[CKPT_TAG_LEN]) {
    size_t n = 0;
    while (n < CKPT_TAG_LEN && tag[n] > ' ' && tag[n] < 0x7f) n++;
    if (n == 0) return false;
    for (size_t i = n; i < CKPT_TAG_LEN; i++)
        if (tag[i] != 0) return false;
    return true;
}

static uint64_t fnv1a64(const void *p, uint64_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint64_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static int write_all(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }

int ckpt_write(const char *path, const ckpt_section *s, int n, char *msg, size_t msg_len) {
    // What a reader would refuse is not written.
    if (n < 0 || n > CKPT_MAX_SECTIONS)
        return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': cannot write %d sections (at most %d)", path, n,
                    CKPT_MAX_SECTIONS);
    for (int i = 0; i < n; i++) {
        char tag[CKPT_TAG_LEN] = {0};
        memcpy(tag, s[i].tag, strnlen(s[i].tag, CKPT_TAG_LEN));
        if (!tag_ok(tag) || strnlen(s[i].tag, CKPT_TAG_LEN + 1) > CKPT_TAG_LEN)
            return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': cannot write section %d: malformed tag", path, i);
        for (int j = 0; j < i; j++)
            if (!strncmp(s[i].tag, s[j].tag, CKPT_TAG_LEN))
                return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': cannot write section '%s' twice", path,
                            s[i].tag);
    }
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
    if (fio_is_dir(path))  // fopen takes a directory, then every read fails: say what it is
        return fio_fail(CKPT_EIO, msg, msg_len, "checkpoint '%s' is a directory; expected a checkpoint file "
                        "(fplab train writes DIR/ckpt.bin)", path);
    FILE *f = fopen(path, "rb");
    if (!f) return fio_fail(CKPT_EIO, msg, msg_len, "checkpoint '%s': cannot open: %s", path, strerror(errno));
    const int st = ckpt_read_stream(out, f, path, msg, msg_len);
    fclose(f);
    return st;
}

// The sections, read one by one: each header and length checked against what is left of the
// file (keeping room for the headers of the sections still to come) before its payload is
// allocated. On failure *out holds what was read so far (freed by the caller).
static int read_sections(ckpt_file *out, FILE *f, const char *path, uint32_t count, uint64_t size, char *msg,
                         size_t msg_len) {
    enum { HDR = CKPT_TAG_LEN + 16 };
    uint64_t pos = 16;
    for (uint32_t i = 0; i < count; i++) {
        ckpt_section *s = &out->s[i];
        char tag[CKPT_TAG_LEN];
        uint64_t meta[2];
        if (fread(tag, sizeof tag, 1, f) != 1 || fread(meta, sizeof meta, 1, f) != 1)
            return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': truncated at section %u (file of %llu bytes)",
                        path, (unsigned)i, (unsigned long long)size);
        if (!tag_ok(tag))
            return fio_fail(CKPT_EFORMAT, msg, msg_len,
                        "checkpoint '%s': section %u has a malformed tag (expected 1 to %d printable ASCII "
                        "characters, NUL-padded)", path, (unsigned)i, CKPT_TAG_LEN);
        memcpy(s->tag, tag, CKPT_TAG_LEN);
        s->tag[CKPT_TAG_LEN] = 0;
        if (ckpt_find(out, s->tag))
            return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': section '%s' appears twice", path, s->tag);
        pos += HDR;
        // pos <= size - HDR * (count - i - 1) holds by the check on the count and the ones below.
        const uint64_t left = size - pos - (uint64_t)HDR * (count - i - 1);
        if (meta[0] > left)
            return fio_fail(CKPT_EFORMAT, msg, msg_len,
                        "checkpoint '%s': section '%s' of %llu bytes runs past the end of the file (%llu bytes "
                        "left for it)", path, s->tag, (unsigned long long)meta[0], (unsigned long long)left);
        void *data = malloc(meta[0] ? (size_t)meta[0] : 1);
        if (!data)
            return fio_fail(CKPT_ENOMEM, msg, msg_len, "checkpoint '%s': out of memory for section '%s' (%llu bytes)",
                        path, s->tag, (unsigned long long)meta[0]);
        s->data = data, s->nbytes = meta[0];
        out->n = (int)i + 1;
        if (fread(data, 1, (size_t)meta[0], f) != meta[0])
            return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': section '%s' truncated (%llu bytes expected)",
                        path, s->tag, (unsigned long long)meta[0]);
        if (fnv1a64(data, meta[0]) != meta[1])
            return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': section '%s' damaged (checksum mismatch)", path,
                        s->tag);
        pos += meta[0];
    }
    if (pos != size)
        return fio_fail(CKPT_EFORMAT, msg, msg_len,
                    "checkpoint '%s': %llu bytes after the last section (a damaged header or not a checkpoint)",
                    path, (unsigned long long)(size - pos));
    return CKPT_OK;
}

int ckpt_read_stream(ckpt_file *out, FILE *f, const char *path, char *msg, size_t msg_len) {
    memset(out, 0, sizeof *out);
    // The size first: every length in the file is checked against it.
    off_t end;
    if (fseeko(f, 0, SEEK_END) != 0 || (end = ftello(f)) < 0 || fseeko(f, 0, SEEK_SET) != 0)
        return fio_fail(CKPT_EIO, msg, msg_len, "checkpoint '%s': cannot seek (not a regular file?): %s", path,
                    strerror(errno));
    const uint64_t size = (uint64_t)end;
    uint32_t head[4] = {0};
    const size_t got = fread(head, 1, sizeof head, f);
    if (got < sizeof head || head[0] != CKPT_MAGIC)
        return fio_fail(CKPT_EFORMAT, msg, msg_len,
                    "checkpoint '%s': not an fplab checkpoint (magic 0x%08x expected, found 0x%08x)", path,
                    (unsigned)CKPT_MAGIC, got >= 4 ? (unsigned)head[0] : 0u);
    if (head[1] != CKPT_VERSION)
        return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': version %u, this fplab reads version %d", path,
                    (unsigned)head[1], CKPT_VERSION);
    if (head[3] != 0)
        return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': reserved header word is 0x%08x, expected 0 "
                    "(damaged header)", path, (unsigned)head[3]);
    if (head[2] > CKPT_MAX_SECTIONS)
        return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': %u sections, at most %d expected (damaged header)",
                    path, (unsigned)head[2], CKPT_MAX_SECTIONS);
    if ((uint64_t)head[2] * (CKPT_TAG_LEN + 16) > size - sizeof head)
        return fio_fail(CKPT_EFORMAT, msg, msg_len,
                    "checkpoint '%s': %u sections do not fit in a file of %llu bytes (each takes at least %d)",
                    path, (unsigned)head[2], (unsigned long long)size, CKPT_TAG_LEN + 16);
    out->s = calloc(head[2] ? head[2] : 1, sizeof *out->s);
    if (!out->s) return fio_fail(CKPT_ENOMEM, msg, msg_len, "checkpoint '%s': out of memory", path);
    const int st = read_sections(out, f, path, head[2], size, msg, msg_len);
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

int ckpt_config_read(llama_config *c, const ckpt_section *s, const char *path, char *msg, size_t msg_len) {
    memset(c, 0, sizeof *c);
    if (!s) return fio_fail(CKPT_EMISSING, msg, msg_len, "checkpoint '%s': section 'config' missing", path);
    if (s->nbytes != CKPT_CONFIG_BYTES)
        return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': section 'config' has %llu bytes, expected %d", path,
                    (unsigned long long)s->nbytes, CKPT_CONFIG_BYTES);
    int32_t i[8];
    memcpy(i, s->data, sizeof i);
    if (i[7] != 0 && i[7] != 1)
        return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': section 'config': tied %d; expected 0 or 1", path,
                    (int)i[7]);
    *c = (llama_config){.dim = i[0], .n_layers = i[1], .n_heads = i[2], .n_kv_heads = i[3],
                        .hidden_dim = i[4], .vocab_size = i[5], .seq_len = i[6], .tied = i[7] == 1};
    memcpy(&c->rope_theta, (const char *)s->data + 32, 4);
    memcpy(&c->norm_eps, (const char *)s->data + 36, 4);
    char why[256];
    if (llama_config_validate(c, why, sizeof why) != LLAMA_OK)
        return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': section 'config': %s", path, why);
    return CKPT_OK;
}

int ckpt_config_unpack(llama_config *c, const ckpt_section *s) { return ckpt_config_read(c, s, "", NULL, 0); }

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

int ckpt_vocab_read(data_vocab *v, const ckpt_section *s, const char *path, char *msg, size_t msg_len) {
    memset(v, 0, sizeof *v);
    if (!s) return fio_fail(CKPT_EMISSING, msg, msg_len, "checkpoint '%s': section 'vocab' missing", path);
    if (s->nbytes < 8)
        return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': section 'vocab' has %llu bytes, expected at least 8",
                    path, (unsigned long long)s->nbytes);
    int32_t h[2];
    memcpy(h, s->data, sizeof h);
    if (h[0] < DATA_VOCAB_CHAR || h[0] > DATA_VOCAB_TOKENS)
        return fio_fail(CKPT_EFORMAT, msg, msg_len,
                    "checkpoint '%s': section 'vocab': kind %d; expected 0 (char), 1 (byte) or 2 (token ids)", path,
                    (int)h[0]);
    if (h[1] < 1 || h[1] > LLAMA_MAX_VOCAB)
        return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': section 'vocab': size %d; expected 1 to %d", path,
                    (int)h[1], LLAMA_MAX_VOCAB);
    if (h[0] == DATA_VOCAB_BYTE && h[1] != 256)
        return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': section 'vocab': a byte vocabulary of size %d; "
                    "expected 256", path, (int)h[1]);
    const size_t n = h[0] == DATA_VOCAB_CHAR ? (size_t)h[1] : 0;
    if (s->nbytes != 8 + n * 4)
        return fio_fail(CKPT_EFORMAT, msg, msg_len,
                    "checkpoint '%s': section 'vocab' has %llu bytes; a %s vocabulary of size %d needs %zu", path,
                    (unsigned long long)s->nbytes, h[0] == DATA_VOCAB_CHAR ? "char" : h[0] == DATA_VOCAB_BYTE ? "byte"
                    : "token-id", (int)h[1], 8 + n * 4);
    // Characters: Unicode scalar values, strictly ascending (the encoder's binary search and
    // the decoder's UTF-8 writer rely on both).
    const unsigned char *cp = (const unsigned char *)s->data + 8;
    uint32_t prev = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t c;
        memcpy(&c, cp + 4 * k, 4);
        if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || (k > 0 && c <= prev))
            return fio_fail(CKPT_EFORMAT, msg, msg_len,
                        "checkpoint '%s': section 'vocab': character %zu is U+%04lX; expected Unicode scalar "
                        "values in strictly ascending order", path, k, (unsigned long)c);
        prev = c;
    }
    if (n) {
        v->cp = malloc(n * 4);
        if (!v->cp) return fio_fail(CKPT_ENOMEM, msg, msg_len, "checkpoint '%s': out of memory for the vocabulary", path);
        memcpy(v->cp, cp, n * 4);
    }
    v->kind = (data_vocab_kind)h[0], v->size = h[1];
    return CKPT_OK;
}

int ckpt_vocab_unpack(data_vocab *v, const ckpt_section *s) { return ckpt_vocab_read(v, s, "", NULL, 0); }

int ckpt_load_model_from(const ckpt_file *f, const char *path, llama_model *m, data_vocab *v,
                         char *msg, size_t msg_len) {
    memset(m, 0, sizeof *m);
    memset(v, 0, sizeof *v);
    const ckpt_section *cs = ckpt_find(f, "config"), *ps = ckpt_find(f, "params"),
                       *vs = ckpt_find(f, "vocab");
    if (!cs || !ps || !vs)
        return fio_fail(CKPT_EMISSING, msg, msg_len, "checkpoint '%s': section '%s' missing", path,
                    !cs ? "config" : !ps ? "params" : "vocab");
    // Everything is checked before the model is allocated: the config against its bounds, the
    // parameter count it implies against the params section, the vocabulary against the config.
    llama_config c;
    int st = ckpt_config_read(&c, cs, path, msg, msg_len);
    if (st != CKPT_OK) return st;
    size_t sizes[LP_COUNT];
    const size_t pbytes = llama_param_sizes(&c, sizes) * sizeof(float);  // < 2^42 within the bounds
    if (ps->nbytes != pbytes)
        return fio_fail(CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': section 'params' has %llu bytes, the config needs %zu",
                    path, (unsigned long long)ps->nbytes, pbytes);
    if ((st = ckpt_vocab_read(v, vs, path, msg, msg_len)) != CKPT_OK) return st;
    if (v->size != c.vocab_size) {
        data_vocab_free(v);
        return fio_fail(CKPT_EFORMAT, msg, msg_len,
                    "checkpoint '%s': section 'vocab' holds %d tokens; the config's vocab_size is %d", path, v->size,
                    c.vocab_size);
    }
    char why[256];
    if ((st = llama_init(m, &c, LLAMA_RECOMPUTE_NONE, why, sizeof why)) != LLAMA_OK) {
        data_vocab_free(v);
        return fio_fail(st == LLAMA_ENOMEM ? CKPT_ENOMEM : CKPT_EFORMAT, msg, msg_len, "checkpoint '%s': %s", path, why);
    }
    memcpy(m->params, ps->data, pbytes);
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
