// data.c: training data (see data.h): text files with a character or byte vocabulary, llm.c
// token shards, the 90/10 train/validation split and seeded batch sampling.
// Constraints: library level: every failure returns DATA_E* with a one-line message naming the
// file and what was expected versus what was found; nothing exits. Text files are read whole
// (corpora are a few MB); shards are read in chunks straight into int32 tokens. Sampling draws
// from the counter-based generator (formats/rng.h) only, so a batch is a function of
// (seed, split, batch index).
#include "trainer/data.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/rng.h"
#include "util/fileio.h"

enum {
    SHARD_HEADER_BYTES = 256 * 4,
    SHARD_MAGIC_U16 = 20240520, SHARD_VERSION_U16 = 1,
    SHARD_MAGIC_U32 = 20240801, SHARD_VERSION_U32 = 7,
    CP_LIMIT = 0x110000,  // code points are below this
};

// Generator streams of the batch starts: DATA_STREAM + split (0 train, 1 validation) for the
// first draw, + 2 * attempt for the rare redraw. Far from the small stream numbers the weight
// initialisation uses (tensor ids), so a seed shared with it gives unrelated draws.
static const uint64_t DATA_STREAM = 0x6461746100000000ULL;  // "data" << 32

// --- messages and helpers

// The first 90% is train: n_train = floor(0.9 n), computed without overflow. The same split as
// nanoGPT's data[:int(n*0.9)] (tinyshakespeare: 1003854 train, 111540 validation characters);
// validation gets ceil(0.1 n).
static size_t split_train_len(size_t n) { return n / 10 * 9 + n % 10 * 9 / 10; }

// Each split must hold one input and its target (T >= 1 needs T + 1 >= 2 tokens), so that a
// corpus too short for any batch fails at load rather than at the first validation.
static int check_splits(const data_set *d, const char *what, const char *path, char *msg,
                        size_t msg_len) {
    const size_t nv = d->n_tokens - d->n_train;
    if (d->n_train >= 2 && nv >= 2) return DATA_OK;
    return fio_fail(DATA_EINVAL, msg, msg_len,
                "%s '%s': %zu tokens give %zu for training and %zu for validation; each split needs "
                "at least 2 tokens (an input and its target)",
                what, path, d->n_tokens, d->n_train, nv);
}

static const char *vocab_kind_name(data_vocab_kind k) {
    return k == DATA_VOCAB_CHAR ? "char" : k == DATA_VOCAB_BYTE ? "byte" : k == DATA_VOCAB_TOKENS ? "tokens" : "unknown";
}

// A vocabulary handed in from outside (a checkpoint) is checked before it is trusted: char
// code points strictly ascending (binary search relies on it) and valid scalar values.
static int vocab_check(const data_vocab *v, const char *path, char *msg, size_t msg_len) {
    switch (v->kind) {
    case DATA_VOCAB_CHAR:
        if (v->size < 1 || !v->cp)
            return fio_fail(DATA_EINVAL, msg, msg_len, "'%s': char vocabulary of size %d without code points",
                        path, v->size);
        for (int i = 0; i < v->size; i++) {
            const uint32_t c = v->cp[i];
            if (c >= CP_LIMIT || (c >= 0xD800 && c <= 0xDFFF) || (i > 0 && c <= v->cp[i - 1]))
                return fio_fail(DATA_EINVAL, msg, msg_len,
                            "'%s': char vocabulary entry %d is U+%04lX; expected valid code points in "
                            "strictly ascending order",
                            path, i, (unsigned long)c);
        }
        return DATA_OK;
    case DATA_VOCAB_BYTE:
        if (v->size == 256) return DATA_OK;
        return fio_fail(DATA_EINVAL, msg, msg_len, "'%s': byte vocabulary of size %d, expected 256", path, v->size);
    case DATA_VOCAB_TOKENS:
        if (v->size >= 1) return DATA_OK;
        return fio_fail(DATA_EINVAL, msg, msg_len, "'%s': token vocabulary of size %d, expected >= 1", path, v->size);
    }
    return fio_fail(DATA_EINVAL, msg, msg_len, "'%s': unknown vocabulary kind %d", path, (int)v->kind);
}

// Reads the whole file (regular file or stream); *buf is malloc'd (NULL when empty).
static int read_whole(const char *path, unsigned char **buf, size_t *n, char *msg, size_t msg_len) {
    *buf = NULL, *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return fio_fail(DATA_EIO, msg, msg_len, "text file '%s': cannot open: %s", path, strerror(errno));
    struct stat st;
    const bool have_st = fstat(fileno(f), &st) == 0;
    if (have_st && S_ISDIR(st.st_mode)) {
        fclose(f);
        return fio_fail(DATA_EIO, msg, msg_len, "text file '%s' is a directory, expected a file", path);
    }
    size_t cap = have_st && S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 1 : 1 << 16, len = 0;
    unsigned char *b = malloc(cap);
    int rc = b ? DATA_OK : fio_fail(DATA_ENOMEM, msg, msg_len, "text file '%s': out of memory for %zu bytes", path, cap);
    while (rc == DATA_OK) {
        if (len == cap) {
            unsigned char *nb = cap <= SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
            if (!nb) {
                rc = fio_fail(DATA_ENOMEM, msg, msg_len, "text file '%s': out of memory after %zu bytes", path, len);
                break;
            }
            b = nb, cap *= 2;
        }
        len += fread(b + len, 1, cap - len, f);
        if (len == cap) continue;
        if (ferror(f)) rc = fio_fail(DATA_EIO, msg, msg_len, "text file '%s': read error after %zu bytes: %s", path, len,
                                 strerror(errno));
        break;  // end of file
    }
    fclose(f);
    if (rc != DATA_OK || len == 0) {
        free(b);
        return rc;
    }
    *buf = b, *n = len;
    return DATA_OK;
}

// --- UTF-8

// Decodes the character at s[0..n) (n >= 1): returns its length in bytes with *cp, or 0 with
// `why` saying what was expected and what was found. Well-formed sequences only (Unicode table
// 3-7): no overlong forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF.
static int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp, char *why, size_t why_len) {
    const unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    const char *second = "";        // what a second byte outside [lo, hi] but in 0x80..0xBF means
    if (c < 0xC0) {
        snprintf(why, why_len, "expected the first byte of a character, found continuation byte 0x%02X", c);
        return 0;
    } else if (c < 0xC2) {
        snprintf(why, why_len, "expected a lead byte, found 0x%02X (an overlong 2-byte form)", c);
        return 0;
    } else if (c < 0xE0) {
        len = 2, v = c & 0x1F;
    } else if (c < 0xF0) {
        len = 3, v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0, second = " (an overlong form)";
        if (c == 0xED) hi = 0x9F, second = " (a surrogate U+D800..U+DFFF)";
    } else if (c < 0xF5) {
        len = 4, v = c & 0x07;
        if (c == 0xF0) lo = 0x90, second = " (an overlong form)";
        if (c == 0xF4) hi = 0x8F, second = " (above U+10FFFF)";
    } else {
        snprintf(why, why_len, "expected a lead byte 0x00-0x7F or 0xC2-0xF4, found 0x%02X (above U+10FFFF or never used)", c);
        return 0;
    }
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) {
            snprintf(why, why_len, "expected %d bytes after lead byte 0x%02X, found the end after %d", len, c, i);
            return 0;
        }
        const unsigned b = s[i], l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) {
            snprintf(why, why_len, "expected byte %d of the sequence of lead byte 0x%02X in 0x%02X-0x%02X, found 0x%02X%s",
                     i + 1, c, l, h, b, b >= 0x80 && b <= 0xBF ? second : "");
            return 0;
        }
        v = v << 6 | (b & 0x3F);
    }
    *cp = v;
    return len;
}

// Writes the UTF-8 of a valid code point into out (4 bytes room); returns its length.
static int utf8_encode(uint32_t c, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (c < 0x80) {
        o[0] = (unsigned char)c;
        return 1;
    } else if (c < 0x800) {
        o[0] = (unsigned char)(0xC0 | c >> 6), o[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    } else if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | c >> 12), o[1] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | c >> 18), o[1] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (c >> 6 & 0x3F)), o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

// Index of code point c in the sorted char vocabulary, or -1.
static int vocab_find(const data_vocab *v, uint32_t c) {
    int lo = 0, hi = v->size - 1;
    while (lo <= hi) {
        const int mid = lo + (hi - lo) / 2;
        if (v->cp[mid] < c) lo = mid + 1;
        else if (v->cp[mid] > c) hi = mid - 1;
        else return mid;
    }
    return -1;
}

// Walks the UTF-8 text s[0..n): marks each code point in the bitmap `seen` (if non-NULL) and
// maps it with the char vocabulary v (if non-NULL) into out (if non-NULL, at most cap entries).
// Returns the number of characters, or -1 with a message that starts with `what` (the input).
static long walk_text(const unsigned char *s, size_t n, uint8_t *seen, const data_vocab *v, int32_t *out,
                      size_t cap, const char *what, char *msg, size_t msg_len) {
    char why[160];
    long count = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        const int len = utf8_decode(s + i, n - i, &c, why, sizeof why);
        if (!len) return fio_fail(-1, msg, msg_len, "%s: invalid UTF-8 at byte offset %zu: %s", what, i, why);
        if (seen) seen[c >> 3] |= (uint8_t)(1u << (c & 7));
        if (v) {
            const int id = vocab_find(v, c);
            if (id < 0) {
                char shown[16] = "";
                if (c >= 0x20 && c != 0x7F && !(c >= 0x80 && c < 0xA0))
                    snprintf(shown, sizeof shown, " '%.*s'", len, (const char *)s + i);
                return fio_fail(-1, msg, msg_len,
                            "%s: character U+%04lX%s at byte offset %zu is not in the vocabulary of %d "
                            "characters",
                            what, (unsigned long)c, shown, i, v->size);
            }
            if (out) {
                if ((size_t)count >= cap)
                    return fio_fail(-1, msg, msg_len, "%s: more than %zu tokens, expected at most the %zu given room for",
                                what, cap, cap);
                out[count] = id;
            }
        }
        count++, i += (size_t)len;
    }
    return count;
}

// --- text files

int data_load_text(data_set *out, const char *path, data_vocab_kind kind, const data_vocab *vocab,
                   char *msg, size_t msg_len) {
    if (!out) return fio_fail(DATA_EINVAL, msg, msg_len, "data_load_text: no output data set");
    memset(out, 0, sizeof *out);
    if (!path || !path[0]) return fio_fail(DATA_EINVAL, msg, msg_len, "no text file given (empty path)");
    if (vocab) {
        const int rc = vocab_check(vocab, path, msg, msg_len);
        if (rc != DATA_OK) return rc;
        if (vocab->kind != kind)
            return fio_fail(DATA_EINVAL, msg, msg_len, "text file '%s': a %s vocabulary was asked for, but a %s one was given",
                        path, vocab_kind_name(kind), vocab_kind_name(vocab->kind));
    }
    if (kind != DATA_VOCAB_CHAR && kind != DATA_VOCAB_BYTE)
        return fio_fail(DATA_EINVAL, msg, msg_len, "text file '%s': vocabulary kind %s, expected char or byte "
                    "(token ids come from shards)", path, vocab_kind_name(kind));
    unsigned char *buf;
    size_t n;
    int rc = read_whole(path, &buf, &n, msg, msg_len);
    if (rc != DATA_OK) return rc;
    if (n == 0) return fio_fail(DATA_EFORMAT, msg, msg_len, "text file '%s' is empty, expected UTF-8 text", path);
    uint8_t *seen = NULL;
    const size_t what_len = strlen(path) + 16;
    char *what = malloc(what_len);  // "text file 'PATH'", the start of walk_text's messages
    out->tokens = malloc(n * sizeof *out->tokens);  // a character takes at least one byte
    if (what) snprintf(what, what_len, "text file '%s'", path);
    if (!out->tokens || !what) {
        rc = fio_fail(DATA_ENOMEM, msg, msg_len, "text file '%s': out of memory for %zu tokens", path, n);
        goto done;
    }
    if (kind == DATA_VOCAB_BYTE) {  // every byte is a token: no UTF-8 check needed
        out->vocab = (data_vocab){DATA_VOCAB_BYTE, 256, NULL};
        for (size_t i = 0; i < n; i++) out->tokens[i] = buf[i];
        out->n_tokens = n;
    } else {
        if (vocab) {
            rc = data_vocab_copy(&out->vocab, vocab);
        } else {  // distinct code points, in ascending order from the bitmap
            seen = calloc(CP_LIMIT / 8, 1);
            rc = seen ? DATA_OK : DATA_ENOMEM;
            if (rc == DATA_OK && walk_text(buf, n, seen, NULL, NULL, 0, what, msg, msg_len) < 0) {
                rc = DATA_EFORMAT;
                goto done;
            }
            int size = 0;
            for (uint32_t c = 0; rc == DATA_OK && c < CP_LIMIT; c++) size += seen[c >> 3] >> (c & 7) & 1;
            out->vocab = (data_vocab){DATA_VOCAB_CHAR, size, rc == DATA_OK ? malloc((size_t)size * 4) : NULL};
            if (!out->vocab.cp) rc = DATA_ENOMEM;
            for (uint32_t c = 0, k = 0; rc == DATA_OK && c < CP_LIMIT; c++)
                if (seen[c >> 3] >> (c & 7) & 1) out->vocab.cp[k++] = c;
        }
        if (rc != DATA_OK) {
            fio_fail(rc, msg, msg_len, "text file '%s': out of memory for the vocabulary", path);
            goto done;
        }
        const long cnt = walk_text(buf, n, NULL, &out->vocab, out->tokens, n, what, msg, msg_len);
        if (cnt < 0) {
            rc = DATA_EFORMAT;
            goto done;
        }
        out->n_tokens = (size_t)cnt;
    }
    out->n_train = split_train_len(out->n_tokens);
    rc = check_splits(out, "text file", path, msg, msg_len);
done:
    free(buf), free(seen), free(what);
    if (rc != DATA_OK) data_free(out);
    return rc;
}

// --- llm.c token shards

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// Grows d->tokens (*cap entries) by doubling to hold at least `need` tokens; -1 when out of memory.
static int reserve_tokens(data_set *d, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 1;
    while (nc < need) nc *= 2;
    int32_t *nt = nc <= SIZE_MAX / sizeof *nt ? realloc(d->tokens, nc * sizeof *nt) : NULL;
    if (!nt) return -1;
    d->tokens = nt, *cap = nc;
    return 0;
}

// Appends the tokens of the shard at `path` to d->tokens (*cap entries allocated), each checked
// against `limit` (vocab_size, or INT32_MAX so that the largest + 1 is still an int);
// *max_tok tracks the largest.
static int read_shard(data_set *d, size_t *cap, const char *path, int vocab_size, uint32_t *max_tok,
                      char *msg, size_t msg_len) {
    FILE *f = fopen(path, "rb");
    if (!f) return fio_fail(DATA_EIO, msg, msg_len, "shard '%s': cannot open: %s", path, strerror(errno));
    unsigned char h[SHARD_HEADER_BYTES];
    int rc = DATA_OK;
    const size_t got = fread(h, 1, sizeof h, f);
    if (got < sizeof h) {
        if (ferror(f)) rc = fio_fail(DATA_EIO, msg, msg_len, "shard '%s': read error: %s", path, strerror(errno));
        else if (got == 0) rc = fio_fail(DATA_EFORMAT, msg, msg_len, "shard '%s' is empty, expected a 1024-byte llm.c "
                                     "header (256 int32) and tokens", path);
        else rc = fio_fail(DATA_EFORMAT, msg, msg_len, "shard '%s' has %zu bytes, expected at least the 1024-byte llm.c "
                       "header (256 int32)", path, got);
        fclose(f);
        return rc;
    }
    const uint32_t magic = le32(h), version = le32(h + 4), count = le32(h + 8);
    size_t elt;
    uint32_t want;
    if (magic == SHARD_MAGIC_U16) elt = 2, want = SHARD_VERSION_U16;
    else if (magic == SHARD_MAGIC_U32) elt = 4, want = SHARD_VERSION_U32;
    else {
        fclose(f);
        return fio_fail(DATA_EFORMAT, msg, msg_len, "shard '%s': magic %lu, expected %d (uint16 tokens) or %d (uint32 "
                    "tokens) of an llm.c token shard", path, (unsigned long)magic, SHARD_MAGIC_U16, SHARD_MAGIC_U32);
    }
    const char *type = elt == 2 ? "uint16" : "uint32";
    if (version != want) {
        fclose(f);
        return fio_fail(DATA_EFORMAT, msg, msg_len, "shard '%s': version %lu with magic %lu, expected version %lu (%s tokens)",
                    path, (unsigned long)version, (unsigned long)magic, (unsigned long)want, type);
    }
    if (count == 0) {
        fclose(f);
        return fio_fail(DATA_EFORMAT, msg, msg_len, "shard '%s': header says 0 tokens, expected at least 1", path);
    }
    const unsigned long long expect = SHARD_HEADER_BYTES + (unsigned long long)count * elt;
    struct stat st;  // a regular file's size is checked before allocating what the header claims
    if (fstat(fileno(f), &st) != 0) st.st_mode = 0;
    if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size != expect) {
        fclose(f);
        return fio_fail(DATA_EFORMAT, msg, msg_len, "shard '%s': header says %lu %s tokens (%llu bytes in all), but the "
                    "file has %lld bytes", path, (unsigned long)count, type, expect, (long long)st.st_size);
    }
    // A regular file's size was checked against the header, so its tokens are reserved at once; a
    // pipe's are reserved as they arrive, never by what its header claims.
    const bool regular = S_ISREG(st.st_mode);
    if (regular && reserve_tokens(d, cap, d->n_tokens + count) != 0) {
        fclose(f);
        return fio_fail(DATA_ENOMEM, msg, msg_len, "shard '%s': out of memory for %zu tokens", path, d->n_tokens + count);
    }
    const int64_t limit = vocab_size > 0 ? vocab_size : INT32_MAX;
    unsigned char chunk[1 << 16];  // a multiple of 4: whole tokens of either width
    for (size_t done = 0; done < count && rc == DATA_OK;) {
        const size_t want_n = count - done < sizeof chunk / elt ? count - done : sizeof chunk / elt;
        const size_t got_n = fread(chunk, elt, want_n, f);
        if (!regular && reserve_tokens(d, cap, d->n_tokens + done + got_n) != 0) {
            rc = fio_fail(DATA_ENOMEM, msg, msg_len, "shard '%s': out of memory for %zu tokens", path,
                      d->n_tokens + done + got_n);
            break;
        }
        int32_t *dst = d->tokens + d->n_tokens;
        for (size_t i = 0; i < got_n; i++) {
            const unsigned char *p = chunk + i * elt;
            const uint32_t t = elt == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : le32(p);
            if ((int64_t)t >= limit) {
                rc = vocab_size > 0
                         ? fio_fail(DATA_EFORMAT, msg, msg_len, "shard '%s': token %lu at position %zu, expected tokens "
                                "below the vocabulary size %d", path, (unsigned long)t, done + i, vocab_size)
                         : fio_fail(DATA_EFORMAT, msg, msg_len, "shard '%s': token %lu at position %zu, expected tokens "
                                "below %ld", path, (unsigned long)t, done + i, (long)INT32_MAX);
                break;
            }
            dst[done + i] = (int32_t)t;
            if (t > *max_tok) *max_tok = t;
        }
        done += got_n;
        if (rc == DATA_OK && got_n < want_n)  // not a regular file, or it shrank while read
            rc = ferror(f) ? fio_fail(DATA_EIO, msg, msg_len, "shard '%s': read error: %s", path, strerror(errno))
                           : fio_fail(DATA_EFORMAT, msg, msg_len, "shard '%s': header says %lu %s tokens (%llu bytes in "
                                  "all), but the file ends after %zu tokens", path, (unsigned long)count, type, expect, done);
    }
    if (rc == DATA_OK && fgetc(f) != EOF)
        rc = fio_fail(DATA_EFORMAT, msg, msg_len, "shard '%s': header says %lu %s tokens (%llu bytes in all), but the file "
                  "is longer", path, (unsigned long)count, type, expect);
    fclose(f);
    if (rc == DATA_OK) d->n_tokens += count;
    return rc;
}

// Reads the shards of a ','-separated list, appending to d.
static int read_shard_list(data_set *d, size_t *cap, const char *list, int vocab_size, uint32_t *max_tok,
                           char *msg, size_t msg_len) {
    int k = 0;
    for (const char *p = list;; k++) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0)
            return fio_fail(DATA_EINVAL, msg, msg_len, "shard list '%s': entry %d is empty, expected paths joined by ','",
                        list, k + 1);
        char *path = malloc(len + 1);
        if (!path) return fio_fail(DATA_ENOMEM, msg, msg_len, "shard list '%s': out of memory", list);
        memcpy(path, p, len);
        path[len] = 0;
        const int rc = read_shard(d, cap, path, vocab_size, max_tok, msg, msg_len);
        free(path);
        if (rc != DATA_OK) return rc;
        if (!e) return DATA_OK;
        p = e + 1;
    }
}

int data_load_shards(data_set *out, const char *paths, const char *val_path, int vocab_size,
                     char *msg, size_t msg_len) {
    if (!out) return fio_fail(DATA_EINVAL, msg, msg_len, "data_load_shards: no output data set");
    memset(out, 0, sizeof *out);
    if (!paths || !paths[0]) return fio_fail(DATA_EINVAL, msg, msg_len, "no token shard given (empty path)");
    if (vocab_size < 0)
        return fio_fail(DATA_EINVAL, msg, msg_len, "shards '%s': vocabulary size %d, expected >= 0 (0: from the tokens)",
                    paths, vocab_size);
    const bool own_val = val_path && val_path[0];
    size_t cap = 0;
    uint32_t max_tok = 0;
    int rc = read_shard_list(out, &cap, paths, vocab_size, &max_tok, msg, msg_len);
    if (rc == DATA_OK) {
        out->n_train = own_val ? out->n_tokens : split_train_len(out->n_tokens);
        if (own_val) rc = read_shard_list(out, &cap, val_path, vocab_size, &max_tok, msg, msg_len);
    }
    if (rc == DATA_OK) {
        out->vocab = (data_vocab){DATA_VOCAB_TOKENS, vocab_size > 0 ? vocab_size : (int)max_tok + 1, NULL};
        if (!own_val) rc = check_splits(out, "shards", paths, msg, msg_len);
        else if (out->n_train < 2 || out->n_tokens - out->n_train < 2)
            rc = fio_fail(DATA_EINVAL, msg, msg_len, "shards '%s' with validation shards '%s': %zu training and %zu "
                      "validation tokens; each split needs at least 2 tokens (an input and its target)",
                      paths, val_path, out->n_train, out->n_tokens - out->n_train);
    }
    if (rc != DATA_OK) data_free(out);
    return rc;
}

void data_free(data_set *d) {
    if (!d) return;
    free(d->tokens);
    data_vocab_free(&d->vocab);
    memset(d, 0, sizeof *d);
}

// --- vocabulary

long data_encode(const data_vocab *v, const char *text, int32_t *tokens, size_t cap, char *msg,
                 size_t msg_len) {
    if (!v || !text) return fio_fail(-1, msg, msg_len, "data_encode: no vocabulary or no text");
    const size_t n = strlen(text);
    const unsigned char *s = (const unsigned char *)text;
    switch (v->kind) {
    case DATA_VOCAB_BYTE:
        if (tokens && n > cap)
            return fio_fail(-1, msg, msg_len, "text: %zu tokens, expected at most the %zu given room for", n, cap);
        for (size_t i = 0; tokens && i < n; i++) tokens[i] = s[i];
        return (long)n;
    case DATA_VOCAB_CHAR:
        if (v->size < 1 || !v->cp) return fio_fail(-1, msg, msg_len, "data_encode: char vocabulary without code points");
        return walk_text(s, n, NULL, v, tokens, cap, "text", msg, msg_len);
    default:
        return fio_fail(-1, msg, msg_len, "text: a %s vocabulary cannot encode text, expected char or byte",
                    vocab_kind_name(v->kind));
    }
}

int data_decode(const data_vocab *v, int32_t t, char *buf, size_t cap) {
    char tmp[16];
    int len = -1;
    if (v && t >= 0 && t < v->size) {
        if (v->kind == DATA_VOCAB_CHAR && v->cp && v->cp[t] < CP_LIMIT) len = utf8_encode(v->cp[t], tmp);
        else if (v->kind == DATA_VOCAB_BYTE) tmp[0] = (char)(unsigned char)t, len = 1;
        else if (v->kind == DATA_VOCAB_TOKENS) len = snprintf(tmp, sizeof tmp, "<%ld>", (long)t);
    }
    if (len < 0 || !buf || (size_t)len >= cap) {
        if (buf && cap) buf[0] = 0;
        return -1;
    }
    memcpy(buf, tmp, (size_t)len);
    buf[len] = 0;
    return len;
}

int data_vocab_copy(data_vocab *out, const data_vocab *v) {
    const data_vocab src = *v;  // out may alias v
    *out = (data_vocab){src.kind, src.size, NULL};
    if (src.cp && src.size > 0) {
        out->cp = malloc((size_t)src.size * sizeof *out->cp);
        if (!out->cp) {
            memset(out, 0, sizeof *out);
            return DATA_ENOMEM;
        }
        memcpy(out->cp, src.cp, (size_t)src.size * sizeof *out->cp);
    }
    return DATA_OK;
}

void data_vocab_free(data_vocab *v) {
    if (!v) return;
    free(v->cp);
    memset(v, 0, sizeof *v);
}

// --- batches

// Draw `i` uniform on [0, n): the 64 bits of the two 32-bit draws 2i and 2i + 1 (the ones
// fmt_rng_uniform uses), reduced without bias: values below 2^64 mod n are rejected, the
// remaining range is a whole number of periods of v mod n. A rejection (probability < n / 2^64)
// redraws at the same index from the next retry stream.
static uint64_t draw_below(fmt_rng_key key, uint64_t seed, int val, uint64_t i, uint64_t n) {
    const uint64_t reject_below = (0 - n) % n;
    for (uint64_t attempt = 1;; attempt++) {
        const uint64_t v = (uint64_t)fmt_rng_u32(key, 2 * i) << 32 | fmt_rng_u32(key, 2 * i + 1);
        if (v >= reject_below) return v % n;
        key = fmt_rng_make_key(seed, DATA_STREAM + 2 * attempt + (uint64_t)val);
    }
}

int data_batch(const data_set *d, int val, uint64_t seed, uint64_t index, int B, int T, int32_t *x,
               int32_t *y) {
    if (!d || !d->tokens || d->n_train > d->n_tokens || (val != 0 && val != 1) || B <= 0 || T <= 0 || !x || !y)
        return DATA_EINVAL;
    const size_t lo = val ? d->n_train : 0, len = val ? d->n_tokens - d->n_train : d->n_train;
    if (len < (size_t)T + 1) return DATA_EINVAL;
    const uint64_t n_starts = len - (size_t)T;  // starts 0 .. len - T - 1: T + 1 tokens fit
    const fmt_rng_key key = fmt_rng_make_key(seed, DATA_STREAM + (uint64_t)val);
    for (int b = 0; b < B; b++) {
        const int32_t *p = d->tokens + lo + draw_below(key, seed, val, index * (uint64_t)B + (uint64_t)b, n_starts);
        memcpy(x + (size_t)b * T, p, (size_t)T * sizeof *x);
        memcpy(y + (size_t)b * T, p + 1, (size_t)T * sizeof *y);
    }
    return DATA_OK;
}
