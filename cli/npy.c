// npy.c: the .npy reader (versions 1.0/2.0/3.0, '<f4'/'<f8' and unsigned codes, 1-D or 2-D, C
// order) and the writer (float32, unsigned-integer codes). Writing is only the header's format:
// the bytes go through util/fileio.h's atomic writer (fio_create, fio_write, fio_commit), the one
// copy of it. See npy.h for decisions.
// Constraints: never exits, never leaves a partial output file; messages name the file.
#include "npy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c reads and writes little-endian data in place: little-endian hosts only"
#endif

static const char magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
enum { MAX_HEADER = 1 << 20 };  // NumPy itself refuses headers over 10000 bytes by default

static int fail(char *msg, size_t len, const char *path, const char *fmt, ...) {
    if (msg && len) {
        int k = snprintf(msg, len, "%s: ", path);
        va_list ap;
        va_start(ap, fmt);
        if (k >= 0 && (size_t)k < len) vsnprintf(msg + k, len - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return NPY_ERR;
}

// --- header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }

typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}
static bool eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) return c->p++, true;
    return false;
}
// A Python string literal in ' or " quotes (no escapes: the keys and dtypes never need them).
static bool parse_str(cursor *c, char *out, size_t cap) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    size_t k = 0;
    while (c->p < c->end && *c->p != q) {
        if (k + 1 < cap) out[k++] = *c->p;
        c->p++;
    }
    out[k] = 0;
    return c->p < c->end && c->p++;
}
static bool parse_bool(cursor *c, bool *out) {
    skip_ws(c);
    size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && !memcmp(c->p, "True", 4)) return c->p += 4, *out = true, true;
    if (left >= 5 && !memcmp(c->p, "False", 5)) return c->p += 5, *out = false, true;
    return false;
}
// (), (5,), (2, 3), (2,3,): dims counted up to 8, the first two kept.
static bool parse_shape(cursor *c, size_t *shape, int *ndim) {
    if (!eat(c, '(')) return false;
    *ndim = 0;
    for (;;) {
        if (eat(c, ')')) return true;
        skip_ws(c);
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return false;
        uint64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > (UINT64_MAX - 9) / 10) return false;
            v = v * 10 + (uint64_t)(*c->p++ - '0');
        }
        if (c->p < c->end && *c->p == 'L') c->p++;  // Python 2 longs
        if (*ndim < 2) shape[*ndim] = (size_t)v;
        if (++*ndim > 8) return false;
        if (!eat(c, ',')) return eat(c, ')');
    }
}

static int parse_header(const char *path, const char *h, size_t hlen, npy_array *a, char *msg, size_t len) {
    cursor c = {h, h + hlen};
    bool got_descr = false, got_order = false, got_shape = false, fortran = false;
    char descr[32] = "";
    if (!eat(&c, '{')) return fail(msg, len, path, "header is not a Python dict (expected '{')");
    for (;;) {
        if (eat(&c, '}')) break;
        char key[32];
        if (!parse_str(&c, key, sizeof key) || !eat(&c, ':'))
            return fail(msg, len, path, "malformed header dict near offset %d (expected 'key': value)", (int)(c.p - h));
        bool ok;
        if (!strcmp(key, "descr") && !got_descr) ok = got_descr = parse_str(&c, descr, sizeof descr);
        else if (!strcmp(key, "fortran_order") && !got_order) ok = got_order = parse_bool(&c, &fortran);
        else if (!strcmp(key, "shape") && !got_shape) ok = got_shape = parse_shape(&c, a->shape, &a->ndim);
        else return fail(msg, len, path, "unexpected or repeated header key '%s' (expected descr, fortran_order, shape)", key);
        if (!ok) return fail(msg, len, path, "malformed value of header key '%s'", key);
        if (!eat(&c, ',')) {
            if (eat(&c, '}')) break;
            return fail(msg, len, path, "malformed header dict near offset %d (expected ',' or '}')", (int)(c.p - h));
        }
    }
    if (!got_descr || !got_order || !got_shape)
        return fail(msg, len, path, "header lacks key '%s'", !got_descr ? "descr" : !got_order ? "fortran_order" : "shape");
    if (descr[0] == '>')
        return fail(msg, len, path, "dtype '%s' is big-endian; expected '<f4' or '<f8' (convert with .astype('<f4'))", descr);
    const bool le = descr[0] == '<' || descr[0] == '=' || descr[0] == '|';
    static const struct { const char *name; npy_dtype t; } types[] = {
        {"f4", NPY_F4}, {"f8", NPY_F8}, {"u1", NPY_U1}, {"u2", NPY_U2}, {"u4", NPY_U4}, {"u8", NPY_U8}};
    size_t ti = 0;
    while (ti < sizeof types / sizeof *types && !(le && !strcmp(descr + 1, types[ti].name))) ti++;
    if (ti == sizeof types / sizeof *types)
        return fail(msg, len, path, "dtype '%s' is not supported; expected '<f4' (float32) or '<f8' (float64) "
                    "values, or unsigned codes ('|u1', '<u2', '<u4', '<u8')", descr);
    a->dtype = types[ti].t;
    if (fortran) return fail(msg, len, path, "fortran_order is True; expected a C-order array (np.ascontiguousarray)");
    if (a->ndim < 1 || a->ndim > 2)
        return fail(msg, len, path, "array is %d-D; expected 1-D or 2-D", a->ndim);
    if (a->ndim == 1) a->shape[1] = 1;
    if (a->shape[1] && a->shape[0] > SIZE_MAX / 8 / a->shape[1])
        return fail(msg, len, path, "shape %zu x %zu is too large", a->shape[0], a->shape[1]);
    a->n = a->shape[0] * a->shape[1];
    return NPY_OK;
}

// --- reading

void *npy_alloc(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes < huge) return malloc(bytes ? bytes : 1);
    const size_t whole = (bytes + huge - 1) / huge * huge;  // aligned_alloc wants a multiple
    void *p = aligned_alloc(huge, whole);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, whole, MADV_HUGEPAGE);  // advice only: may fail, or THP be off
#endif
    return p;
}

static uint32_t le32(const unsigned char *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

// The stream's size in bytes by seeking to its end, or -1 when it cannot seek (a pipe).
static long long stream_size(FILE *fp) {
    const off_t at = ftello(fp);
    if (at < 0 || fseeko(fp, 0, SEEK_END) != 0) return -1;
    const off_t end = ftello(fp);
    if (fseeko(fp, at, SEEK_SET) != 0) return -1;
    return end < at ? -1 : (long long)end;
}

// The data of a stream whose size is unknown: read as it comes into a buffer that grows with
// what arrives (doubling from 1 MiB), never to the header's claim at once; exactly `need` bytes
// must come.
static int read_growing(FILE *fp, const char *path, npy_array *a, size_t need, size_t head, char *msg,
                        size_t len) {
    size_t cap = need < ((size_t)1 << 20) ? need : ((size_t)1 << 20), got = 0;
    unsigned char *buf = malloc(cap ? cap : 1);
    if (!buf) return fail(msg, len, path, "out of memory");
    for (;;) {
        got += fread(buf + got, 1, cap - got, fp);
        if (got < cap || cap == need) break;
        const size_t next = cap > need / 2 ? need : 2 * cap;
        unsigned char *q = realloc(buf, next);
        if (!q) {
            free(buf);
            return fail(msg, len, path, "out of memory after %zu bytes of data", got);
        }
        buf = q, cap = next;
    }
    const bool longer = got == need && fgetc(fp) != EOF;
    if (got != need || longer) {
        free(buf);
        return fail(msg, len, path,
                    "the header's shape needs %zu data bytes after the %zu-byte header, found %s%zu: the stream is "
                    "%s than its header says", need, head, longer ? "more than " : "", got, longer ? "longer" : "shorter");
    }
    a->data = buf;
    return NPY_OK;
}

static int read_open(FILE *fp, const char *path, npy_array *a, char *msg, size_t len) {
    const long long size = stream_size(fp);  // -1: unknown (a pipe)
    unsigned char pre[12];
    if (fread(pre, 1, 8, fp) != 8 || memcmp(pre, magic, 6))
        return fail(msg, len, path, "not a .npy file (expected the magic \\x93NUMPY at the start)");
    int major = pre[6], minor = pre[7];
    if (!(minor == 0 && major >= 1 && major <= 3))
        return fail(msg, len, path, ".npy version %d.%d is not supported; expected 1.0, 2.0 or 3.0", major, minor);
    size_t lbytes = major == 1 ? 2 : 4;
    if (fread(pre + 8, 1, lbytes, fp) != lbytes) return fail(msg, len, path, "file ends inside the header length");
    size_t hlen = major == 1 ? (size_t)(pre[8] | pre[9] << 8) : le32(pre + 8);
    if (hlen > MAX_HEADER) return fail(msg, len, path, "header length %zu is implausible (over %d bytes)", hlen, MAX_HEADER);
    const size_t head = 8 + lbytes + hlen;  // where the data starts
    if (size >= 0 && (unsigned long long)size < head)
        return fail(msg, len, path, "file is shorter than its header length (%zu bytes)", hlen);
    char *h = malloc(hlen + 1);
    if (!h) return fail(msg, len, path, "out of memory");
    int st = NPY_OK;
    if (fread(h, 1, hlen, fp) != hlen) st = fail(msg, len, path, "file is shorter than its header length (%zu bytes)", hlen);
    else st = parse_header(path, h, hlen, a, msg, len);
    free(h);
    if (st) return st;
    // The header's claim is checked against the limit and the file's size before it sizes
    // anything (parse_header keeps n * 8 within size_t).
    const size_t item = npy_itemsize(a->dtype), need = a->n * item;
    if (need > NPY_MAX_DATA_BYTES)
        return fail(msg, len, path, "shape %zu x %zu of %zu-byte elements is %zu bytes, over the limit of %zu bytes",
                    a->shape[0], a->shape[1], item, need, (size_t)NPY_MAX_DATA_BYTES);
    if (size < 0) return read_growing(fp, path, a, need, head, msg, len);
    const unsigned long long have = (unsigned long long)size - head;
    if (have != need)
        return fail(msg, len, path,
                    "the header's shape needs %zu data bytes after the %zu-byte header, found %llu: the file is %s "
                    "than its header says", need, head, have, have < need ? "shorter" : "longer");
    a->data = npy_alloc(need);
    if (!a->data) return fail(msg, len, path, "out of memory for %zu elements", a->n);
    if (fread(a->data, 1, need, fp) != need)
        return fail(msg, len, path, "read error or file changed while reading (%zu data bytes expected)", need);
    return NPY_OK;
}

size_t npy_itemsize(npy_dtype t) {
    switch (t) {
    case NPY_U1: return 1;
    case NPY_U2: return 2;
    case NPY_F4:
    case NPY_U4: return 4;
    default: return 8;
    }
}

int npy_want_float(const npy_array *a, const char *what, const char *path, char *msg, size_t msglen) {
    if (a->dtype == NPY_F4 || a->dtype == NPY_F8) return NPY_OK;
    return fail(msg, msglen, path, "%s holds uint%zu codes; expected float32 or float64 values", what,
                8 * npy_itemsize(a->dtype));
}

int npy_read(const char *path, npy_array *out, char *msg, size_t msglen) {
    memset(out, 0, sizeof *out);
    if (msg && msglen) msg[0] = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return fail(msg, msglen, path, "cannot open for reading: %s", strerror(errno));
    int st = npy_read_stream(fp, path, out, msg, msglen);
    fclose(fp);
    return st;
}

int npy_read_stream(FILE *fp, const char *name, npy_array *out, char *msg, size_t msglen) {
    memset(out, 0, sizeof *out);
    if (msg && msglen) msg[0] = 0;
    int st = read_open(fp, name, out, msg, msglen);
    if (st) npy_free(out);
    return st;
}

void npy_free(npy_array *a) {
    free(a->data);
    a->data = NULL;
}

// --- writing

const char *npy_uint_descr(size_t bytes) {
    switch (bytes) {
    case 1: return "|u1";  // NumPy writes '|' (byte order not applicable) for one-byte types
    case 2: return "<u2";
    case 4: return "<u4";
    case 8: return "<u8";
    default: return NULL;
    }
}

int npy_write_f32(const char *path, const float *data, int ndim, const size_t *shape, char *msg, size_t msglen) {
    return npy_write(path, "<f4", sizeof(float), data, ndim, shape, msg, msglen);
}

int npy_write(const char *path, const char *descr, size_t itemsize, const void *data, int ndim,
              const size_t *shape, char *msg, size_t msglen) {
    if (msg && msglen) msg[0] = 0;
    fio_out o;
    char why[FIO_PATH_MAX + 128];
    if (fio_create(&o, path, why, sizeof why) != FIO_OK) return snprintf(msg, msglen, "%s", why), NPY_ERR;
    if (npy_write_to(&o, descr, itemsize, data, ndim, shape, msg, msglen) != NPY_OK) {
        fio_abort(&o);
        return NPY_ERR;
    }
    if (fio_commit(&o, why, sizeof why) != FIO_OK) return snprintf(msg, msglen, "%s", why), NPY_ERR;
    return NPY_OK;
}

int npy_write_to(fio_out *o, const char *descr, size_t itemsize, const void *data, int ndim, const size_t *shape,
                 char *msg, size_t msglen) {
    if (msg && msglen) msg[0] = 0;
    const char *path = o->path;
    if (ndim < 1 || ndim > 2) return fail(msg, msglen, path, "cannot write a %d-D array; expected 1-D or 2-D", ndim);
    if (!descr || !descr[0] || strlen(descr) > 8 || strchr(descr, '\'') || itemsize == 0)
        return fail(msg, msglen, path, "cannot write dtype '%s' of %zu-byte items", descr ? descr : "(null)", itemsize);
    char dict[160];
    int dl = ndim == 1 ? snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%zu,), }",
                                  descr, shape[0])
                       : snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%zu, %zu), }",
                                  descr, shape[0], shape[1]);
    // Header: magic, version 1.0, 2-byte length, dict padded with spaces and ended by '\n' so
    // that the data starts at a multiple of 64 bytes (what NumPy writes).
    size_t total = ((10 + (size_t)dl + 1) + 63) / 64 * 64, hlen = total - 10;
    unsigned char head[256];
    memcpy(head, magic, 6);
    head[6] = 1, head[7] = 0, head[8] = (unsigned char)(hlen & 0xff), head[9] = (unsigned char)(hlen >> 8);
    memset(head + 10, ' ', hlen);
    memcpy(head + 10, dict, (size_t)dl);
    head[total - 1] = '\n';
    size_t n = ndim == 1 ? shape[0] : shape[0] * shape[1];
    if (ndim == 2 && shape[1] && (shape[0] > SIZE_MAX / shape[1] || n > SIZE_MAX / itemsize))
        return fail(msg, msglen, path, "shape %zu x %zu of %zu-byte items is too large", shape[0], shape[1], itemsize);
    if (n > SIZE_MAX / itemsize) return fail(msg, msglen, path, "%zu items of %zu bytes is too large", n, itemsize);
    // fileio's one writer of bytes: the data goes straight to the descriptor, not through stdio.
    if (fio_write(o, head, total, msg, msglen) != FIO_OK || fio_write(o, data, n * itemsize, msg, msglen) != FIO_OK)
        return NPY_ERR;
    return NPY_OK;
}
