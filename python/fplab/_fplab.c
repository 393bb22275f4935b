// _fplab.c: the CPython extension under the `fplab` package: thin calls into libfplab.so on
// contiguous buffers (PEP 3118 buffer protocol), with the GIL released around every library call.
// Constraints: no numerics here: every value comes from the C library. The Python layer
// (fplab/__init__.py) checks dtypes and shapes, allocates with NumPy and handles strides; this
// file checks again what it relies on (item size, native byte order, contiguity, writability),
// so a wrong buffer is a TypeError, never a wrong read. Nothing is converted: a buffer of the
// wrong type is refused.
// Why the buffer protocol and not the NumPy C API: every call needs a pointer, an item type and
// a length, which PEP 3118 gives for any exporter; the extension then builds against Python's
// headers alone (no NumPy at build time, no ABI tie to a NumPy version), and NumPy stays a
// runtime dependency of the Python layer only.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "formats/codec.h"
#include "formats/format.h"
#include "formats/qerror.h"
#include "formats/round.h"
#include "formats/scale.h"
#include "kernels/blas_tune.h"
#include "kernels/mm_check.h"
#include "kernels/mm_operand.h"
#include "kernels/mm_verify.h"
#include "kernels/scaled_mm.h"

#ifndef FPLAB_VERSION
#define FPLAB_VERSION "unknown"
#endif

// ---------------------------------------------------------------------------------------------
// Format: a parsed descriptor, so that a name is parsed once (fplab caches these by name)

typedef struct {
    PyObject_HEAD fmt_t f;
} FormatObject;

static PyTypeObject FormatType;

static int format_parse(fmt_t *f, const char *name) {
    const int st = fmt_from_name(f, name);
    if (st == FMT_OK) return 0;
    const char *elem, *recipe;
    for (size_t i = 0; fmt_scheme_get(i, &elem, &recipe); i++)
        if (!strcasecmp(name, fmt_scheme_get(i, NULL, NULL))) {
            PyErr_Format(PyExc_ValueError, "format '%s': a scheme (%s elements under the recipe %s), where a "
                         "format is expected; expected its element format %s (quantize(x, '%s') takes the "
                         "scheme)", name, elem, recipe, elem, name);
            return -1;
        }
    char msg[1024];
    fmt_name_message(name, st, msg, sizeof msg);
    PyErr_Format(PyExc_ValueError, "format '%s': %s", name, msg);
    return -1;
}

static PyObject *format_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"name", NULL};
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s", kwlist, &name)) return NULL;
    FormatObject *self = (FormatObject *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    if (format_parse(&self->f, name) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyObject *format_wrap(const fmt_t *f) {
    FormatObject *self = PyObject_New(FormatObject, &FormatType);
    if (self) self->f = *f;
    return (PyObject *)self;
}

static const char *special_name(fmt_special s) {
    switch (s) {
    case FMT_IEEE: return "ieee";
    case FMT_FN: return "fn";
    case FMT_FNUZ: return "fnuz";
    case FMT_FINITE: return "finite";
    case FMT_E8M0: return "e8m0";
    case FMT_EXTENDED: return "extended";
    }
    return "?";
}

// Everything the descriptor and fmt_get_info know, as one dict (fplab.finfo builds on it).
static PyObject *format_describe(PyObject *self, PyObject *unused) {
    (void)unused;
    const fmt_t *f = &((FormatObject *)self)->f;
    fmt_info in;
    fmt_get_info(f, &in);
    return Py_BuildValue(
        "{s:s,s:i,s:i,s:i,s:i,s:O,s:s,s:i,s:i,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:K,s:K,s:O,s:O,s:O,"
        "s:O,s:O,s:n,s:O,s:O,s:s,s:O}",
        "name", f->name, "bits", f->bits, "exponent_bits", f->ebits, "mantissa_bits", f->mbits, "bias",
        f->bias, "is_signed", f->is_signed ? Py_True : Py_False, "special", special_name(f->special),
        "emin", f->emin, "emax", f->emax, "max", in.max, "min", in.min, "smallest_normal",
        in.smallest_normal, "smallest_subnormal", in.smallest_subnormal, "eps", in.eps, "resolution",
        in.resolution, "min_normal", f->min_normal, "min_subnormal", f->min_subnormal, "finite_values",
        (unsigned long long)in.finite_values, "nan_codes", (unsigned long long)in.nan_codes, "has_inf",
        f->has_inf ? Py_True : Py_False, "has_nan", f->has_nan ? Py_True : Py_False, "has_zero",
        f->has_zero ? Py_True : Py_False, "has_negzero", f->has_negzero ? Py_True : Py_False,
        "has_subnormals", f->has_subnormals ? Py_True : Py_False, "code_bytes",
        (Py_ssize_t)fmt_code_bytes(f), "embeds_in_f32", fmt_embeds_in_f32(f) ? Py_True : Py_False,
        "contains_f32", fmt_contains_f32(f) ? Py_True : Py_False, "kind", fmt_kind(f),
        "values_fit_f32", fmt_values_fit_f32(f) ? Py_True : Py_False);
}

static PyObject *format_nan_code_list(PyObject *self, PyObject *args) {
    Py_ssize_t cap = 64;
    if (!PyArg_ParseTuple(args, "|n", &cap)) return NULL;
    if (cap < 0 || cap > (1 << 20)) return PyErr_Format(PyExc_ValueError, "cap %zd: expected 0..2^20", cap);
    const fmt_t *f = &((FormatObject *)self)->f;
    uint64_t *codes = PyMem_Malloc((size_t)(cap ? cap : 1) * sizeof *codes);
    if (!codes) return PyErr_NoMemory();
    const size_t n = fmt_nan_codes(f, codes, (size_t)cap);
    const size_t k = n < (size_t)cap ? n : (size_t)cap;
    PyObject *list = PyList_New((Py_ssize_t)k);
    for (size_t i = 0; list && i < k; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(codes[i]);
        if (!v) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    PyMem_Free(codes);
    return list;
}

static PyObject *format_name_get(PyObject *self, void *c) {
    (void)c;
    return PyUnicode_FromString(((FormatObject *)self)->f.name);
}

static PyObject *format_repr(PyObject *self) {
    return PyUnicode_FromFormat("fplab.Format('%s')", ((FormatObject *)self)->f.name);
}

static PyMethodDef format_methods[] = {
    {"describe", format_describe, METH_NOARGS, "descriptor and finfo properties as a dict"},
    {"nan_code_list", format_nan_code_list, METH_VARARGS, "the NaN codes, in increasing order (at most cap)"},
    {NULL, NULL, 0, NULL}};
static PyObject *format_code_bytes_get(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromSize_t(fmt_code_bytes(&((FormatObject *)self)->f));
}

static PyObject *format_bits_get(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromLong(((FormatObject *)self)->f.bits);
}

static PyGetSetDef format_getset[] = {{"name", format_name_get, NULL, "canonical name", NULL},
                                      {"bits", format_bits_get, NULL, "bits of a code", NULL},
                                      {"code_bytes", format_code_bytes_get, NULL, "bytes per unpacked code", NULL},
                                      {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject FormatType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fplab._fplab.Format",
    .tp_basicsize = sizeof(FormatObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Format(name): a parsed fplab format (a table name, an alias or eXmY[:flags])",
    .tp_new = format_new,
    .tp_repr = format_repr,
    .tp_methods = format_methods,
    .tp_getset = format_getset,
};

static const fmt_t *as_format(PyObject *o) {
    if (!PyObject_TypeCheck(o, &FormatType)) {
        PyErr_SetString(PyExc_TypeError, "expected an fplab._fplab.Format");
        return NULL;
    }
    return &((FormatObject *)o)->f;
}

// ---------------------------------------------------------------------------------------------
// buffers

typedef enum { BUF_F32, BUF_F64, BUF_CODES } buf_kind;

// Native byte order: '@', '=' (and '<' on a little-endian machine) or no prefix.
static bool native_order(const char *fmt, const char **rest) {
    const int little = PY_LITTLE_ENDIAN;
    if (*fmt == '@' || *fmt == '=') fmt++;
    else if (*fmt == '<') {
        if (!little) return false;
        fmt++;
    } else if (*fmt == '>' || *fmt == '!') {
        if (little) return false;
        fmt++;
    }
    *rest = fmt;
    return true;
}

// Gets a C-contiguous buffer of the given kind (codes: unsigned integers of code_bytes bytes);
// TypeError naming `what` otherwise.
static int get_buf(Py_buffer *v, PyObject *obj, buf_kind kind, size_t code_bytes, bool writable, const char *what) {
    if (PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected a C-contiguous%s buffer (NumPy array), got %s", what,
                     writable ? " writable" : "", Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *f = v->format ? v->format : "B", *t;
    bool ok = native_order(f, &t);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: big-endian data ('%s'); fplab reads native (little-endian) "
                     "arrays only and converts nothing: byteswap explicitly, e.g. x.astype(x.dtype.newbyteorder('='))",
                     what, f);
        PyBuffer_Release(v);
        return -1;
    }
    switch (kind) {
    case BUF_F32: ok = !strcmp(t, "f") && v->itemsize == 4; break;
    case BUF_F64: ok = !strcmp(t, "d") && v->itemsize == 8; break;
    case BUF_CODES: ok = strlen(t) == 1 && strchr("BHILQ", t[0]) && (size_t)v->itemsize == code_bytes; break;
    }
    if (!ok) {
        static const char *const want[] = {"float32", "float64", "unsigned integer codes"};
        PyErr_Format(PyExc_TypeError, "%s: expected %s (%zu bytes per item), got item format '%s' of %zd bytes",
                     what, want[kind], kind == BUF_CODES ? code_bytes : (size_t)(kind == BUF_F32 ? 4 : 8), f,
                     v->itemsize);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

static size_t buf_n(const Py_buffer *v) { return (size_t)(v->len / (v->itemsize ? v->itemsize : 1)); }

// ---------------------------------------------------------------------------------------------
// options and statistics

// Fills o from the keyword values; overflow NULL keeps *o's (the caller's default).
static int parse_round_opts(fmt_round_opts *o, const fmt_t *f, const char *mode, const char *overflow, int flush,
                            int sr_bits, unsigned long long seed, unsigned long long stream,
                            unsigned long long offset, PyObject **warning) {
    const fmt_overflow default_overflow = o->overflow;
    memset(o, 0, sizeof *o);
    o->overflow = default_overflow;
    if (fmt_mode_spec_from_name(o, mode) != FMT_OK) {
        PyErr_Format(PyExc_ValueError,
                     "mode '%s': unknown rounding mode; expected one of rne rna rtz rup rdn rto sr (sr:a, sr:b, sr:c: "
                     "IEEE P3109's stochastic variants; sr is sr:a)", mode);
        return -1;
    }
    if (overflow && fmt_overflow_from_name(&o->overflow, overflow) != FMT_OK) {
        PyErr_Format(PyExc_ValueError, "overflow '%s': unknown overflow policy; expected one of ieee saturate (satfinite) satpropagate satnone",
                     overflow);
        return -1;
    }
    o->flush_subnormals = flush != 0;
    o->sr_bits = sr_bits;
    o->seed = seed, o->stream = stream, o->offset = offset;
    char msg[512] = "";
    if (fmt_validate_round_opts(f, o, msg, sizeof msg) != FMT_OK) {
        PyErr_Format(PyExc_ValueError, "%s", msg[0] ? msg : "invalid rounding options");
        return -1;
    }
    if (msg[0]) *warning = PyUnicode_FromString(msg);
    else Py_INCREF(Py_None), *warning = Py_None;
    return *warning ? 0 : -1;
}

// fmt_stats as a dict (the names of fplab.Stats).
static PyObject *stats_dict(const fmt_stats *s) {
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:d}", "n", (unsigned long long)s->n, "overflow",
                         (unsigned long long)s->overflow, "underflow", (unsigned long long)s->underflow, "subnormal",
                         (unsigned long long)s->subnormal, "nan_in", (unsigned long long)s->nan_in, "invalid",
                         (unsigned long long)s->invalid, "amax", s->amax);
}

// fmt_qerror as a dict (the names of fplab.Stats' error fields).
static PyObject *qerror_dict(const fmt_qerror *qe) {
    return Py_BuildValue("{s:d,s:d,s:d,s:d,s:K,s:K}", "mse", qe->mse, "sqnr_db", qe->sqnr_db, "max_abs_err",
                         qe->max_abs, "max_rel_err", qe->max_rel, "n", (unsigned long long)qe->n, "err_nonfinite",
                         (unsigned long long)qe->nonfinite);
}

// What round and encode return: (the stats as a dict when they were counted, else None; the
// warning or None).
static PyObject *stats_and_warning(const fmt_stats *s, bool counted, PyObject *warning) {
    PyObject *d = counted ? stats_dict(s) : (Py_INCREF(Py_None), Py_None);
    if (!d) return Py_DECREF(warning), NULL;
    return Py_BuildValue("(NN)", d, warning);
}

// Round keyword arguments shared by round/encode/quantize/random: parsed by each function.
// stats: whether to count (the library counts in a separate, slower loop only when asked).
#define ROUND_KW "mode", "overflow", "flush", "sr_bits", "seed", "stream", "offset", "stats"
#define ROUND_FMT "szpiKKKp"
#define ROUND_VARS                                                                             \
    const char *mode = "rne", *overflow = "ieee";                                              \
    int flush = 0, sr_bits = 0, want_stats = 1;                                                \
    unsigned long long seed = 0, stream = 0, offset = 0
#define ROUND_ARGS &mode, &overflow, &flush, &sr_bits, &seed, &stream, &offset, &want_stats

static PyObject *status_error(int st, const char *what) {
    if (st == FMT_ENOMEM) return PyErr_NoMemory();
    return PyErr_Format(PyExc_ValueError, "%s: %s", what, fmt_strerror(st));
}

// ---------------------------------------------------------------------------------------------
// formats

static PyObject *py_table(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    const size_t n = fmt_table_count();
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const char *const *al = fmt_table_aliases(i);
        Py_ssize_t na = 0;
        while (al[na]) na++;
        PyObject *aliases = PyTuple_New(na);
        for (Py_ssize_t k = 0; aliases && k < na; k++) {
            PyObject *s = PyUnicode_FromString(al[k]);
            if (!s) Py_CLEAR(aliases);
            else PyTuple_SET_ITEM(aliases, k, s);
        }
        PyObject *row = aliases ? Py_BuildValue("(sN)", fmt_table_get(i)->name, aliases) : NULL;
        if (!row) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, row);
    }
    return list;
}

// ---------------------------------------------------------------------------------------------
// round(F, x, **round): x rounded in place; returns (stats, warning)

static PyObject *py_round(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"fmt", "x", ROUND_KW, NULL};
    PyObject *fo, *xo;
    ROUND_VARS;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|" ROUND_FMT, kwlist, &fo, &xo, ROUND_ARGS)) return NULL;
    const fmt_t *f = as_format(fo);
    if (!f) return NULL;
    fmt_round_opts o = {0};
    PyObject *warning;
    if (parse_round_opts(&o, f, mode, overflow, flush, sr_bits, seed, stream, offset, &warning) < 0) return NULL;
    Py_buffer v;
    // float32 first, float64 second: the message names both.
    if (get_buf(&v, xo, BUF_F32, 0, true, "x") < 0) {
        PyErr_Clear();
        if (get_buf(&v, xo, BUF_F64, 0, true, "x") < 0) {
            Py_DECREF(warning);
            return NULL;
        }
    }
    const bool is64 = v.itemsize == 8;
    if (!is64 && !(fmt_values_fit_f32(f))) {
        PyBuffer_Release(&v);
        Py_DECREF(warning);
        return PyErr_Format(PyExc_TypeError, "format %s does not fit in float32: round a float64 array to it",
                            f->name);
    }
    fmt_stats s = {0};
    int st;
    Py_BEGIN_ALLOW_THREADS;
    fmt_stats *sp = want_stats ? &s : NULL;
    st = is64 ? fmt_round_f64(f, v.buf, buf_n(&v), &o, sp) : fmt_round_f32(f, v.buf, buf_n(&v), &o, sp);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&v);
    if (st != FMT_OK) {
        Py_DECREF(warning);
        return status_error(st, "round");
    }
    return stats_and_warning(&s, want_stats, warning);
}

// ---------------------------------------------------------------------------------------------
// encode(F, codes, x, **round): codes = encode(round(x)); returns (stats, warning).
// float32 x: fmt_encode_f32. float64 x (formats that need it, fp64 above all): fmt_round_f64
// into a scratch copy, then the exact code of each rounded value (fmt_encode1 of a value of F).

static PyObject *py_encode(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"fmt", "codes", "x", ROUND_KW, NULL};
    PyObject *fo, *co, *xo;
    ROUND_VARS;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|" ROUND_FMT, kwlist, &fo, &co, &xo, ROUND_ARGS)) return NULL;
    const fmt_t *f = as_format(fo);
    if (!f) return NULL;
    fmt_round_opts o = {0};
    PyObject *warning;
    if (parse_round_opts(&o, f, mode, overflow, flush, sr_bits, seed, stream, offset, &warning) < 0) return NULL;
    Py_buffer c, x;
    if (get_buf(&c, co, BUF_CODES, fmt_code_bytes(f), true, "codes") < 0) return Py_DECREF(warning), NULL;
    if (get_buf(&x, xo, BUF_F32, 0, false, "x") < 0) {
        PyErr_Clear();
        if (get_buf(&x, xo, BUF_F64, 0, false, "x") < 0) {
            PyBuffer_Release(&c);
            return Py_DECREF(warning), NULL;
        }
    }
    const size_t n = buf_n(&x);
    const bool is64 = x.itemsize == 8;
    int st = FMT_OK;
    if (buf_n(&c) != n) {
        PyErr_Format(PyExc_ValueError, "codes: %zu items for %zu values", buf_n(&c), n);
        st = -1;
    } else if (!is64 && !(fmt_values_fit_f32(f))) {
        PyErr_Format(PyExc_TypeError, "format %s does not fit in float32: encode a float64 array", f->name);
        st = -1;
    }
    fmt_stats s = {0};
    if (st == FMT_OK) {
        double *tmp = NULL;
        if (is64 && !(tmp = PyMem_RawMalloc(n ? n * sizeof *tmp : 1))) st = FMT_ENOMEM;
        Py_BEGIN_ALLOW_THREADS;
        fmt_stats *sp = want_stats ? &s : NULL;
        if (!is64) {
            st = fmt_encode_f32(f, c.buf, x.buf, n, &o, sp);
        } else if (st == FMT_OK) {
            memcpy(tmp, x.buf, n * sizeof *tmp);
            st = fmt_round_f64(f, tmp, n, &o, sp);
            const size_t cb = fmt_code_bytes(f);
            for (size_t i = 0; st == FMT_OK && i < n; i++) {
                const uint64_t code = fmt_encode1(f, tmp[i]);
                memcpy((uint8_t *)c.buf + i * cb, &code, cb);  // little-endian: the low bytes
            }
        }
        Py_END_ALLOW_THREADS;
        PyMem_RawFree(tmp);
        if (st != FMT_OK) status_error(st, "encode");
    }
    PyBuffer_Release(&c);
    PyBuffer_Release(&x);
    if (st != FMT_OK) return Py_DECREF(warning), NULL;
    return stats_and_warning(&s, want_stats, warning);
}

// fmt_codes_check's rule for codes from Python: true (with ValueError set) when one has a bit
// above the format's width, which decode and pack would otherwise ignore.
static bool codes_out_of_range(const fmt_t *f, const Py_buffer *c) {
    size_t bad = 0;
    if (fmt_codes_check(f, c->buf, buf_n(c), &bad) == FMT_OK) return false;
    uint64_t code = 0;
    memcpy(&code, (const uint8_t *)c->buf + bad * fmt_code_bytes(f), fmt_code_bytes(f));
    PyErr_Format(PyExc_ValueError, "codes: element %zu is %llu, not a code of %s (%d bits: 0..%llu)", bad,
                 (unsigned long long)code, f->name, f->bits, (unsigned long long)(((uint64_t)1 << f->bits) - 1));
    return true;
}

// decode(F, x, codes): x (float32, or float64) = values of the codes.
static PyObject *py_decode(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *fo, *xo, *co;
    if (!PyArg_ParseTuple(args, "OOO", &fo, &xo, &co)) return NULL;
    const fmt_t *f = as_format(fo);
    if (!f) return NULL;
    Py_buffer c, x;
    if (get_buf(&c, co, BUF_CODES, fmt_code_bytes(f), false, "codes") < 0) return NULL;
    if (get_buf(&x, xo, BUF_F32, 0, true, "out") < 0) {
        PyErr_Clear();
        if (get_buf(&x, xo, BUF_F64, 0, true, "out") < 0) return PyBuffer_Release(&c), NULL;
    }
    const size_t n = buf_n(&c);
    const bool is64 = x.itemsize == 8;
    int st = FMT_OK;
    if (buf_n(&x) != n) {
        PyErr_Format(PyExc_ValueError, "out: %zu items for %zu codes", buf_n(&x), n);
        st = -1;
    } else if (codes_out_of_range(f, &c)) {
        st = -1;
    } else if (!is64 && !(fmt_values_fit_f32(f))) {
        PyErr_Format(PyExc_TypeError, "format %s does not fit in float32: decode to float64", f->name);
        st = -1;
    } else {
        Py_BEGIN_ALLOW_THREADS;
        if (!is64) {
            st = fmt_decode_f32(f, x.buf, c.buf, n);
        } else {
            const size_t cb = fmt_code_bytes(f);
            for (size_t i = 0; i < n; i++) {
                uint64_t code = 0;
                memcpy(&code, (const uint8_t *)c.buf + i * cb, cb);
                ((double *)x.buf)[i] = fmt_decode1(f, code);
            }
        }
        Py_END_ALLOW_THREADS;
        if (st != FMT_OK) status_error(st, "decode");
    }
    PyBuffer_Release(&c);
    PyBuffer_Release(&x);
    if (st != FMT_OK) return NULL;
    Py_RETURN_NONE;
}

// pack(F, packed, codes) / unpack(F, codes, packed, n)
static PyObject *py_pack(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *fo, *po, *co;
    if (!PyArg_ParseTuple(args, "OOO", &fo, &po, &co)) return NULL;
    const fmt_t *f = as_format(fo);
    if (!f) return NULL;
    Py_buffer c, p;
    if (get_buf(&c, co, BUF_CODES, fmt_code_bytes(f), false, "codes") < 0) return NULL;
    if (get_buf(&p, po, BUF_CODES, 1, true, "packed") < 0) return PyBuffer_Release(&c), NULL;
    const size_t n = buf_n(&c);
    int st = -1;
    if ((size_t)p.len != fmt_packed_bytes(f, n)) {
        PyErr_Format(PyExc_ValueError, "packed: %zd bytes for %zu codes of %s; expected %zu", p.len, n, f->name,
                     fmt_packed_bytes(f, n));
    } else if (!codes_out_of_range(f, &c)) {
        Py_BEGIN_ALLOW_THREADS;
        st = fmt_pack(f, p.buf, c.buf, n);
        Py_END_ALLOW_THREADS;
        if (st != FMT_OK) status_error(st, "pack"), st = -1;
    }
    PyBuffer_Release(&c);
    PyBuffer_Release(&p);
    if (st != FMT_OK) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_unpack(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *fo, *co, *po;
    if (!PyArg_ParseTuple(args, "OOO", &fo, &co, &po)) return NULL;
    const fmt_t *f = as_format(fo);
    if (!f) return NULL;
    Py_buffer c, p;
    if (get_buf(&c, co, BUF_CODES, fmt_code_bytes(f), true, "codes") < 0) return NULL;
    if (get_buf(&p, po, BUF_CODES, 1, false, "packed") < 0) return PyBuffer_Release(&c), NULL;
    const size_t n = buf_n(&c);
    int st = -1;
    if ((size_t)p.len < fmt_packed_bytes(f, n)) {
        PyErr_Format(PyExc_ValueError, "packed: %zd bytes hold fewer than %zu codes of %s (%zu bytes needed)",
                     p.len, n, f->name, fmt_packed_bytes(f, n));
    } else {
        Py_BEGIN_ALLOW_THREADS;
        st = fmt_unpack(f, c.buf, p.buf, n);
        Py_END_ALLOW_THREADS;
        if (st != FMT_OK) status_error(st, "unpack"), st = -1;
    }
    PyBuffer_Release(&c);
    PyBuffer_Release(&p);
    if (st != FMT_OK) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_packed_bytes(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *fo;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On", &fo, &n)) return NULL;
    const fmt_t *f = as_format(fo);
    if (!f) return NULL;
    if (n < 0) return PyErr_Format(PyExc_ValueError, "n %zd: expected n >= 0", n);
    return PyLong_FromSize_t(fmt_packed_bytes(f, (size_t)n));
}

// ---------------------------------------------------------------------------------------------
// scaling recipes

static int parse_scaling(fmt_scaling *sc, const char *spec) {
    char msg[512] = "";
    const int st = fmt_scaling_from_name(sc, spec, msg, sizeof msg);
    if (st == FMT_OK) return 0;
    PyErr_Format(PyExc_ValueError, "%s", msg[0] ? msg : "unknown scaling recipe");
    return -1;
}

// scheme(name) -> (element format name, recipe name), or None where name is not a scheme.
static PyObject *py_scheme(PyObject *m, PyObject *args) {
    (void)m;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    const char *elem, *recipe;
    for (size_t i = 0; fmt_scheme_get(i, &elem, &recipe); i++)
        if (!strcasecmp(name, fmt_scheme_get(i, NULL, NULL))) return Py_BuildValue("(ss)", elem, recipe);
    Py_RETURN_NONE;
}

// scaling(spec, rows, cols, side=None) -> {name: canonical name, count: number of scales,
//   scale_format: Format or None, tile_rows, tile_cols, two_level, grid: (rows, cols)}
// side 'a' or 'b': the recipe as that operand of a matmul takes it (mm_side_scaling: B, stored
// K x N, has the tile transposed); None: as quantize takes it (the same as 'a').
static PyObject *py_scaling(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"spec", "rows", "cols", "side", NULL};
    const char *spec, *side = NULL;
    Py_ssize_t rows, cols;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "snn|$z", kwlist, &spec, &rows, &cols, &side)) return NULL;
    if (rows < 0 || cols < 0) return PyErr_Format(PyExc_ValueError, "shape (%zd, %zd): negative", rows, cols);
    if (side && strcmp(side, "a") && strcmp(side, "b"))
        return PyErr_Format(PyExc_ValueError, "side '%s': expected 'a', 'b' or None", side);
    fmt_scaling sc;
    if (parse_scaling(&sc, spec) < 0) return NULL;
    sc = mm_side_scaling(&sc, side && side[0] == 'b' ? MM_SIDE_B : MM_SIDE_A);
    char name[128];
    fmt_scaling_name(&sc, name, sizeof name);
    PyObject *sf = sc.none ? (Py_INCREF(Py_None), Py_None) : format_wrap(&sc.scale_fmt);
    if (!sf) return NULL;
    size_t grid[2];
    fmt_scale_grid(&sc, (size_t)rows, (size_t)cols, grid);
    return Py_BuildValue("{s:s,s:n,s:N,s:i,s:i,s:O,s:(nn)}", "name", name, "count",
                         (Py_ssize_t)fmt_scale_count(&sc, (size_t)rows, (size_t)cols), "scale_format", sf, "tile_rows",
                         sc.tile_rows, "tile_cols", sc.tile_cols, "two_level", sc.tensor_scale ? Py_True : Py_False,
                         "grid", (Py_ssize_t)grid[0], (Py_ssize_t)grid[1]);
}

// quantize(F, spec, out, x, rows, cols, elems, scales, codes, scale_codes, **round)
//   -> {stats, tensor_scale, scales_clipped, scales_nan, overflow (the policy used), warning,
//       error (qerror_dict)}
// out, elems: rows*cols float32; codes: rows*cols codes of F; scales: fmt_scale_count float32 and
// scale_codes as many codes of the scale format (both None when there are none). One library
// call (fmt_quantize_codes_f32) fills them all, as `fplab quantize` does; the error is of out
// against x (fmt_qerror_f32).
static PyObject *py_quantize(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"fmt", "spec", "out", "x", "rows", "cols", "elems", "scales", "codes", "scale_codes",
                             ROUND_KW, NULL};
    PyObject *fo, *outo, *xo, *eo, *so, *co, *sco;
    const char *spec;
    Py_ssize_t rows, cols;
    ROUND_VARS;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OsOOnnOOOO|" ROUND_FMT, kwlist, &fo, &spec, &outo, &xo, &rows, &cols,
                                     &eo, &so, &co, &sco, ROUND_ARGS))
        return NULL;
    const fmt_t *f = as_format(fo);
    if (!f) return NULL;
    if (rows < 0 || cols < 0) return PyErr_Format(PyExc_ValueError, "shape (%zd, %zd): negative", rows, cols);
    if (!fmt_values_fit_f32(f))
        return PyErr_Format(PyExc_ValueError, "format %s: quantize works in float32; expected an element format "
                            "of float32 or narrower", f->name);
    fmt_scaling sc;
    if (parse_scaling(&sc, spec) < 0) return NULL;
    // overflow=None: the recipe's default (saturate with a scale, IEEE for "none"), as the CLI.
    fmt_round_opts o = fmt_scaling_default_opts(&sc);
    PyObject *warning;
    if (parse_round_opts(&o, f, mode, overflow, flush, sr_bits, seed, stream, offset, &warning) < 0) return NULL;
    const size_t n = (size_t)rows * (size_t)cols, ns = fmt_scale_count(&sc, (size_t)rows, (size_t)cols);
    Py_buffer b[6] = {{0}};  // out, x, elems, codes, scales, scale codes
    bool have[6] = {false};
    PyObject *objs[6] = {outo, xo, eo, co, so, sco};
    const char *what[6] = {"out", "x", "elems", "codes", "scales", "scale_codes"};
    const buf_kind kinds[6] = {BUF_F32, BUF_F32, BUF_F32, BUF_CODES, BUF_F32, BUF_CODES};
    const size_t cbytes[6] = {0, 0, 0, fmt_code_bytes(f), 0, sc.none ? 0 : fmt_code_bytes(&sc.scale_fmt)};
    int err = 0;
    for (int i = 0; i < 6 && !err; i++) {
        if (i >= 4 && objs[i] == Py_None) continue;
        err = get_buf(&b[i], objs[i], kinds[i], cbytes[i], i != 1, what[i]);
        have[i] = !err;
    }
    int st = -1;
    fmt_stats stats = {0};
    fmt_quant_info info = {.tensor_scale = 1};
    fmt_qerror qe = {0};
    if (err) {
    } else if (buf_n(&b[0]) != n || buf_n(&b[1]) != n || buf_n(&b[2]) != n || buf_n(&b[3]) != n) {
        PyErr_Format(PyExc_ValueError, "quantize: buffers of %zu, %zu, %zu and %zu items for a %zd x %zd tensor",
                     buf_n(&b[0]), buf_n(&b[1]), buf_n(&b[2]), buf_n(&b[3]), rows, cols);
    } else if ((have[4] ? buf_n(&b[4]) : 0) != ns || (have[5] ? buf_n(&b[5]) : 0) != ns) {
        PyErr_Format(PyExc_ValueError, "scales: %zu and %zu items; the recipe '%s' has %zu scales for %zd x %zd",
                     have[4] ? buf_n(&b[4]) : 0, have[5] ? buf_n(&b[5]) : 0, spec, ns, rows, cols);
    } else {
        info.elems = b[2].buf;
        info.scales = have[4] ? b[4].buf : NULL;
        Py_BEGIN_ALLOW_THREADS;
        st = fmt_quantize_codes_f32(f, &sc, b[0].buf, b[3].buf, have[5] ? b[5].buf : NULL, b[1].buf, (size_t)rows,
                                    (size_t)cols, &o, &stats, &info);
        if (st == FMT_OK) fmt_qerror_f32(&qe, b[0].buf, b[1].buf, n);
        Py_END_ALLOW_THREADS;
        if (st != FMT_OK) {
            if (st == FMT_ENOMEM) PyErr_NoMemory();
            else
                PyErr_Format(PyExc_ValueError, "quantize: scale '%s' with element format %s refused the %zd x %zd "
                             "tensor (%s); expected a recipe whose scale format and tile fit this shape",
                             spec, f->name, rows, cols, fmt_strerror(st));
            st = -1;
        }
    }
    for (int i = 0; i < 6; i++)
        if (have[i]) PyBuffer_Release(&b[i]);
    if (st != FMT_OK) return Py_DECREF(warning), NULL;
    return Py_BuildValue("{s:N,s:d,s:K,s:K,s:s,s:N,s:N}", "stats", stats_dict(&stats), "tensor_scale",
                         (double)info.tensor_scale, "scales_clipped", (unsigned long long)info.scales_clipped,
                         "scales_nan", (unsigned long long)info.scales_nan, "overflow", fmt_overflow_name(o.overflow),
                         "warning", warning, "error", qerror_dict(&qe));
}

// ulp(F, out, x): out[i] = fmt_ulp(F, x[i]), float64 arrays of one size.
static PyObject *py_ulp(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *fo, *oo, *xo;
    if (!PyArg_ParseTuple(args, "OOO", &fo, &oo, &xo)) return NULL;
    const fmt_t *f = as_format(fo);
    if (!f) return NULL;
    Py_buffer o, x;
    if (get_buf(&o, oo, BUF_F64, 0, true, "out") < 0) return NULL;
    if (get_buf(&x, xo, BUF_F64, 0, false, "x") < 0) return PyBuffer_Release(&o), NULL;
    const size_t n = buf_n(&x);
    const bool ok = buf_n(&o) == n;
    if (ok) {
        double *out = o.buf;
        const double *in = x.buf;
        for (size_t i = 0; i < n; i++) out[i] = fmt_ulp(f, in[i]);
    } else {
        PyErr_Format(PyExc_ValueError, "ulp: %zu and %zu items", buf_n(&o), n);
    }
    PyBuffer_Release(&o), PyBuffer_Release(&x);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

// qerror(y, x) -> qerror_dict (mse, sqnr_db, max_abs_err, max_rel_err, n, err_nonfinite): y and x
// float32 or float64 arrays of one dtype and size (fmt_qerror_f32 / _f64).
static PyObject *py_qerror(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *yo, *xo;
    if (!PyArg_ParseTuple(args, "OO", &yo, &xo)) return NULL;
    Py_buffer y, x;
    bool is64 = false;
    if (get_buf(&y, yo, BUF_F32, 0, false, "y") < 0) {
        PyErr_Clear();
        if (get_buf(&y, yo, BUF_F64, 0, false, "y") < 0) return NULL;
        is64 = true;
    }
    if (get_buf(&x, xo, is64 ? BUF_F64 : BUF_F32, 0, false, "x") < 0) return PyBuffer_Release(&y), NULL;
    fmt_qerror qe = {0};
    const size_t n = buf_n(&y);
    const bool ok = buf_n(&x) == n;
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "qerror: %zu and %zu items", n, buf_n(&x));
    } else if (is64) {
        fmt_qerror_f64(&qe, y.buf, x.buf, n);
    } else {
        fmt_qerror_f32(&qe, y.buf, x.buf, n);
    }
    PyBuffer_Release(&y), PyBuffer_Release(&x);
    if (!ok) return NULL;
    return qerror_dict(&qe);
}

// ---------------------------------------------------------------------------------------------
// scaled matmul: the library's check front end (kernels/mm_check.h) and verifier
// (kernels/mm_verify.h), as `fplab matmul-check` calls them. Keyword-only arguments; the
// results are dicts.

// An optional buffer argument: None, or a C-contiguous buffer of kind `kind` with n items.
typedef struct {
    const char *name;
    PyObject *obj;
    buf_kind kind;
    bool writable;
    Py_buffer v;
    bool have;
} opt_buf;

// Gets every buffer of bs (None: absent); each must hold want[i] items (0: any). -1 with the
// error set (and nothing held) when one is refused.
static int get_bufs(opt_buf *bs, int nb, const size_t *want, const char *fn) {
    for (int i = 0; i < nb; i++) {
        opt_buf *b = &bs[i];
        b->have = false;
        if (!b->obj || b->obj == Py_None) continue;
        int err = get_buf(&b->v, b->obj, b->kind, 1, b->writable, b->name);
        if (!err && want[i] && buf_n(&b->v) != want[i]) {
            PyErr_Format(PyExc_ValueError, "%s: %s holds %zu items; expected %zu", fn, b->name, buf_n(&b->v), want[i]);
            PyBuffer_Release(&b->v);
            err = -1;
        }
        if (err) {
            for (int j = 0; j < i; j++)
                if (bs[j].have) PyBuffer_Release(&bs[j].v), bs[j].have = false;
            return -1;
        }
        b->have = true;
    }
    return 0;
}

static void release_bufs(opt_buf *bs, int nb) {
    for (int i = 0; i < nb; i++)
        if (bs[i].have) PyBuffer_Release(&bs[i].v), bs[i].have = false;
}

#define OPT_BUF(n_, k_, w_) {.name = (n_), .kind = (k_), .writable = (w_)}

static void *buf_ptr(const opt_buf *b) { return b->have ? b->v.buf : NULL; }

// The report of mm_verify_run as a dict: its scalars and candidates [{acc, reproduced, extra}].
static PyObject *report_dict(const mm_verify_report *rep) {
    PyObject *cl = PyList_New((Py_ssize_t)rep->ncand);
    for (size_t i = 0; cl && i < rep->ncand; i++) {
        const mm_verify_cand *c0 = &rep->cand[i];
        PyObject *c = Py_BuildValue("{s:s,s:n,s:O}", "acc", c0->spec, "reproduced", (Py_ssize_t)c0->reproduced,
                                    "extra", c0->extra ? Py_True : Py_False);
        if (!c) Py_CLEAR(cl);
        else PyList_SET_ITEM(cl, (Py_ssize_t)i, c);
    }
    if (!cl) return NULL;
    return Py_BuildValue(
        "{s:n,s:n,s:n,s:n,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:O,s:s,s:z,s:z,s:z,s:N}", "n", (Py_ssize_t)rep->n, "judged",
        (Py_ssize_t)rep->judged, "excluded", (Py_ssize_t)rep->excluded, "outside", (Py_ssize_t)rep->outside, "u",
        rep->u, "gamma", rep->gamma, "max_err_ulp", rep->max_ulp, "median_err_ulp", rep->med_ulp, "max_rel_err",
        rep->max_rel, "median_rel_err", rep->med_rel, "max_bound_ulp", rep->max_bound_ulp, "median_bound_ulp",
        rep->med_bound_ulp, "passed", rep->pass ? Py_True : Py_False, "rule", mm_verify_rule_name(rep->rule),
        "rule_acc", rep->rule_cand >= 0 ? rep->cand[rep->rule_cand].spec : NULL, "bound_engine",
        rep->bound_spec[0] ? rep->bound_spec : NULL, "expect", rep->expect_cand >= 0 ? rep->cand[rep->expect_cand].spec
                                                                                      : NULL,
        "candidates", cl);
}

// The problem's sizes, formats and recipe from the arguments every matmul call shares.
static int problem_parse(mm_check_problem *p, const char *fn, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                         PyObject *afo, PyObject *bfo, PyObject *ofo, const char *spec) {
    const fmt_t *fa = as_format(afo), *fb = fa ? as_format(bfo) : NULL, *fo = fb ? as_format(ofo) : NULL;
    if (!fo) return -1;
    if (M < 1 || N < 1 || K < 1) {
        PyErr_Format(PyExc_ValueError, "%s: shapes (%zd x %zd) @ (%zd x %zd): expected every size >= 1", fn, M, K, K,
                     N);
        return -1;
    }
    *p = (mm_check_problem){.M = (size_t)M, .N = (size_t)N, .K = (size_t)K, .fa = *fa, .fb = *fb};
    if (parse_scaling(&p->sc, spec) < 0) return -1;
    mm_opts_default(&p->o);
    p->o.out_fmt = *fo;
    return 0;
}

// matmul(*, a, b, m, n, k, a_fmt, b_fmt, out_fmt, scale, acc, backend, c, c_in, alpha, beta,
//        quant_mode, quant_overflow, round_mode, overflow, seed, ref, exact, absdot, err_ulp)
//   -> {stats_a, stats_b, scales_clipped_a, scales_clipped_b, emulated, verify, kernel, model_outputs}
// a (M x K), b (K x N) float32 are quantized to their formats with the recipe (mm_check_quantize:
// tiles along K, elements rounded with quant_mode/quant_overflow); then C = the scaled product on
// `backend` (cpu or ref), rounded to out_fmt with (round_mode, overflow, seed). c_in: the C read
// when beta != 0. ref/exact/absdot/err_ulp (or None): mm_ref's result with the same options and,
// through mm_verify_run with C held to mm_ref with acc, the exact value, sum|a b s| and the error
// in ulps of out_fmt; verify is then the report (report_dict) with mismatches (outputs whose bits
// differ from mm_ref with acc), else None. kernel, model_outputs: the kernel mm_cpu ran (mm_path,
// scaled_mm.h) and the outputs it left to the engine's scalar model; None and 0 on backend ref.
static PyObject *py_matmul(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"a", "b", "m", "n", "k", "a_fmt", "b_fmt", "out_fmt", "scale", "acc", "backend", "c",
                             "c_in", "alpha", "beta", "quant_mode", "quant_overflow", "round_mode", "overflow", "seed",
                             "ref", "exact", "absdot", "err_ulp", NULL};
    PyObject *afo = NULL, *bfo = NULL, *ofo = NULL;
    opt_buf bs[8] = {OPT_BUF("a", BUF_F32, false), OPT_BUF("b", BUF_F32, false),   OPT_BUF("c", BUF_F32, true),
                     OPT_BUF("c_in", BUF_F32, false), OPT_BUF("ref", BUF_F32, true), OPT_BUF("exact", BUF_F64, true),
                     OPT_BUF("absdot", BUF_F64, true), OPT_BUF("err_ulp", BUF_F64, true)};
    Py_ssize_t M = -1, N = -1, K = -1;
    const char *spec = "none", *acc = "fp32", *backend = "cpu", *qmode = "rne", *qovf = "saturate", *omode = "rne";
    const char *oovf = "ieee";
    double alpha = 1.0, beta = 0.0;
    unsigned long long oseed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOnnnOOOsssOOddssssKOOOO", kwlist, &bs[0].obj, &bs[1].obj, &M, &N,
                                     &K, &afo, &bfo, &ofo, &spec, &acc, &backend, &bs[2].obj, &bs[3].obj, &alpha,
                                     &beta, &qmode, &qovf, &omode, &oovf, &oseed, &bs[4].obj, &bs[5].obj, &bs[6].obj,
                                     &bs[7].obj))
        return NULL;
    if (!bs[0].obj || !bs[1].obj || !bs[2].obj || !afo || !bfo || !ofo || M < 0 || N < 0 || K < 0)
        return PyErr_Format(PyExc_TypeError, "matmul: a, b, c, m, n, k, a_fmt, b_fmt and out_fmt are required");
    mm_check_problem p;
    if (problem_parse(&p, "scaled_matmul", M, N, K, afo, bfo, ofo, spec) < 0) return NULL;
    const bool use_ref = !strcmp(backend, "ref");
    if (!use_ref && strcmp(backend, "cpu"))
        return PyErr_Format(PyExc_ValueError, "backend '%s': expected 'cpu' or 'ref'", backend);
    const struct {
        const fmt_t *f;
        const char *what;
    } fs[3] = {{&p.fa, "a_fmt"}, {&p.fb, "b_fmt"}, {&p.o.out_fmt, "out"}};
    for (int i = 0; i < 3; i++)
        if (!(fmt_values_fit_f32(fs[i].f)))
            return PyErr_Format(PyExc_ValueError, "%s %s: operands and C are float32; expected a format of float32 "
                                "or narrower", fs[i].what, fs[i].f->name);
    p.o.out_round.overflow = FMT_OVERFLOW_IEEE;
    p.o.alpha = (float)alpha, p.o.beta = (float)beta;
    char msg[512] = "";
    if (mm_acc_from_name(&p.o.acc, acc, msg, sizeof msg) != MM_OK)
        return PyErr_Format(PyExc_ValueError, "acc: %s", msg[0] ? msg : "unknown accumulator");
    PyObject *w1 = NULL, *w2 = NULL;
    fmt_round_opts qo = {0};
    if (parse_round_opts(&qo, &p.fa, qmode, qovf, 0, 0, 0, 0, 0, &w1) < 0) return NULL;
    Py_DECREF(w1);
    if (parse_round_opts(&p.o.out_round, &p.o.out_fmt, omode, oovf, 0, 0, oseed, 0, 0, &w2) < 0) return NULL;
    Py_DECREF(w2);
    const size_t mn = p.M * p.N, want[8] = {p.M * p.K, p.K * p.N, mn, mn, mn, mn, mn, mn};
    if (get_bufs(bs, 8, want, "scaled_matmul") < 0) return NULL;
    if (p.o.beta != 0.0f && !bs[3].have) {
        release_bufs(bs, 8);
        return PyErr_Format(PyExc_ValueError, "scaled_matmul: beta != 0 needs c (the matrix C to add)");
    }
    mm_qmat qa, qb;
    mm_verify_report vrep;
    mm_path path = {.kernel = NULL};
    const bool verify = bs[5].have || bs[6].have || bs[7].have;
    int stq, st = MM_OK;
    Py_BEGIN_ALLOW_THREADS;
    stq = mm_check_quantize(&qa, &qb, &p, bs[0].v.buf, bs[1].v.buf, &qo, msg, sizeof msg);
    if (stq == MM_OK) {
        float *C = bs[2].v.buf;
        const float *cin = buf_ptr(&bs[3]);
        if (cin) memcpy(C, cin, mn * sizeof *C);
        mm_opts po = p.o;  // the path of this product alone (the checks below run their own)
        po.path = &path;
        st = use_ref ? mm_ref(C, p.N, &qa.op, &qb.op, p.M, p.N, p.K, &p.o)
                     : mm_cpu(C, p.N, &qa.op, &qb.op, p.M, p.N, p.K, &po);
        if (st == MM_OK && bs[4].have) {
            if (cin) memcpy(bs[4].v.buf, cin, mn * sizeof(float));
            st = mm_ref(bs[4].v.buf, p.N, &qa.op, &qb.op, p.M, p.N, p.K, &p.o);
        }
        if (st == MM_OK && verify) {
            // C must equal mm_ref with this accumulator: its count of outputs reproduced gives
            // the mismatches.
            const mm_verify_opts vo = {.expect = acc, .no_candidates = true};
            const mm_verify_outputs vout = {.exact = buf_ptr(&bs[5]), .absdot = buf_ptr(&bs[6]),
                                            .err_ulp = buf_ptr(&bs[7])};
            const mm_verify_problem vp = {.A = &qa.op, .B = &qb.op, .M = p.M, .N = p.N, .K = p.K, .o = p.o, .C = C,
                                          .C_in = cin, .ldc = p.N};
            st = mm_verify_run(&vrep, &vout, &vp, &vo, NULL, 0);
        }
    }
    Py_END_ALLOW_THREADS;
    release_bufs(bs, 8);
    PyObject *result = NULL;
    if (stq != MM_OK) {
        if (stq == MM_ENOMEM) PyErr_NoMemory();
        else PyErr_Format(PyExc_ValueError, "scaled_matmul: %s", msg[0] ? msg : "the configuration is not valid");
    } else if (st != MM_OK) {
        if (st == MM_ENOMEM) PyErr_NoMemory();
        else PyErr_Format(PyExc_RuntimeError, "scaled_matmul: backend %s failed (%s)", backend, mm_strerror(st));
    } else {
        PyObject *v = verify ? report_dict(&vrep) : (Py_INCREF(Py_None), Py_None);
        if (verify && v) {
            PyObject *mis = PyLong_FromSize_t(vrep.n - vrep.cand[vrep.expect_cand].reproduced);
            if (!mis || PyDict_SetItemString(v, "mismatches", mis) < 0) Py_CLEAR(v);
            Py_XDECREF(mis);
        }
        if (v)
            result = Py_BuildValue("{s:N,s:N,s:K,s:K,s:O,s:N,s:z,s:n}", "stats_a", stats_dict(&qa.stats), "stats_b",
                                   stats_dict(&qb.stats), "scales_clipped_a", (unsigned long long)qa.scales_clipped,
                                   "scales_clipped_b", (unsigned long long)qb.scales_clipped, "emulated",
                                   mm_acc_is_emulated(&p.o.acc) ? Py_True : Py_False, "verify", v, "kernel",
                                   path.kernel, "model_outputs", (Py_ssize_t)path.model_outputs);
    }
    if (stq == MM_OK) mm_qmat_free(&qa), mm_qmat_free(&qb);
    return result;
}

// A list of str from a list or tuple (at most cap); -1 with TypeError/ValueError otherwise.
static Py_ssize_t str_list(const char **out, Py_ssize_t cap, PyObject *seq, const char *what) {
    if (!seq || seq == Py_None) return 0;
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a list of str", what);
        return -1;
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > cap) {
        PyErr_Format(PyExc_ValueError, "%s: at most %zd accumulators, got %zd", what, cap, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(out[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i)))) return -1;
    return n;
}

static int opt_str(const char **out, PyObject *o) {
    *out = o && o != Py_None ? PyUnicode_AsUTF8(o) : NULL;
    return o && o != Py_None && !*out ? -1 : 0;
}

// check_matmul(*, a, b, c, m, n, k, a_fmt, b_fmt, out_fmt, scale, a_scales, b_scales,
//              a_tensor_scale, b_tensor_scale, alpha, beta, c_in, round_mode, u, also, expect,
//              engine, candidates, exact, absdot, err, err_ulp, bound_ulp, judged, in_bound) -> dict
// mm_verify_run on a result c (M x N float32) of A (M x K) and B (K x N) made from their values
// (mm_check_from_values): a, b float32 element values of a_fmt/b_fmt; a_scales/b_scales
// (float32, or None for the recipe 'none') the recipe's tile scales of each side (B's tile
// transposed); a_ts/b_ts tensor scales (finite, > 0); c_in read when beta != 0; u > 0
// (mm_verify bounds it above). also: a list of accumulator specs; expect and engine (the
// claimed engine, whose own bound replaces u's) a spec or None. The per-output buffers (float64;
// judged, in_bound uint8) are written. Returns report_dict.
static PyObject *py_check_matmul(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"a", "b", "c", "m", "n", "k", "a_fmt", "b_fmt", "out_fmt", "scale", "a_scales", "b_scales",
                             "a_tensor_scale", "b_tensor_scale", "alpha", "beta", "c_in", "round_mode", "u", "also",
                             "expect", "engine", "candidates", "exact", "absdot", "err", "err_ulp", "bound_ulp",
                             "judged", "in_bound", NULL};
    enum { NB = 13 };
    opt_buf bs[NB] = {OPT_BUF("a", BUF_F32, false),        OPT_BUF("b", BUF_F32, false),
                      OPT_BUF("c", BUF_F32, false),        OPT_BUF("a_scales", BUF_F32, false),
                      OPT_BUF("b_scales", BUF_F32, false), OPT_BUF("c_in", BUF_F32, false),
                      OPT_BUF("exact", BUF_F64, true),     OPT_BUF("absdot", BUF_F64, true),
                      OPT_BUF("err", BUF_F64, true),       OPT_BUF("err_ulp", BUF_F64, true),
                      OPT_BUF("bound_ulp", BUF_F64, true), OPT_BUF("judged", BUF_CODES, true),
                      OPT_BUF("in_bound", BUF_CODES, true)};
    PyObject *afo = NULL, *bfo = NULL, *ofo = NULL, *alsoo = NULL, *expecto = NULL, *engo = NULL;
    Py_ssize_t M = -1, N = -1, K = -1;
    const char *spec = "none", *omode = "rne";
    double a_ts = 1.0, b_ts = 1.0, alpha = 1.0, beta = 0.0, u = 0x1p-24;
    int candidates = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOnnnOOOsOOddddOsdOOOpOOOOOOO", kwlist, &bs[0].obj, &bs[1].obj,
                                     &bs[2].obj, &M, &N, &K, &afo, &bfo, &ofo, &spec, &bs[3].obj, &bs[4].obj, &a_ts,
                                     &b_ts, &alpha, &beta, &bs[5].obj, &omode, &u, &alsoo, &expecto, &engo,
                                     &candidates, &bs[6].obj, &bs[7].obj, &bs[8].obj, &bs[9].obj, &bs[10].obj,
                                     &bs[11].obj, &bs[12].obj))
        return NULL;
    if (!bs[0].obj || !bs[1].obj || !bs[2].obj || !afo || !bfo || !ofo || M < 0 || N < 0 || K < 0)
        return PyErr_Format(PyExc_TypeError, "check_matmul: a, b, c, m, n, k, a_fmt, b_fmt and out_fmt are required");
    mm_check_problem p;
    if (problem_parse(&p, "check_matmul", M, N, K, afo, bfo, ofo, spec) < 0) return NULL;
    p.o.alpha = (float)alpha, p.o.beta = (float)beta;
    PyObject *w = NULL;
    if (parse_round_opts(&p.o.out_round, &p.o.out_fmt, omode, "ieee", 0, 0, 0, 0, 0, &w) < 0) return NULL;
    Py_DECREF(w);
    const char *extra[16], *expect, *engine;
    const Py_ssize_t nx = str_list(extra, 16, alsoo, "also");
    if (nx < 0 || opt_str(&expect, expecto) < 0 || opt_str(&engine, engo) < 0) return NULL;
    // 0 would be the C default; the Python default is explicit, so 0, NaN and negatives are errors.
    if (!(u > 0)) {
        char ub[32];
        snprintf(ub, sizeof ub, "%g", u);  // PyErr_Format has no %g
        return PyErr_Format(PyExc_ValueError, "check_matmul: u = %s: expected a unit roundoff > 0", ub);
    }
    const size_t mn = p.M * p.N;
    const size_t want[NB] = {p.M * p.K, p.K * p.N, mn, 0, 0, mn, mn, mn, mn, mn, mn, mn, mn};
    if (get_bufs(bs, NB, want, "check_matmul") < 0) return NULL;
    if (p.o.beta != 0.0f && !bs[5].have) {
        release_bufs(bs, NB);
        return PyErr_Format(PyExc_ValueError, "check_matmul: beta != 0 needs c_in (the C that beta multiplies)");
    }
    const mm_values va = {.x = bs[0].v.buf, .tiles = buf_ptr(&bs[3]), .ntiles = bs[3].have ? buf_n(&bs[3].v) : 0,
                          .ts = (float)a_ts, .what = "a", .scales_what = "a_scales / a_tensor_scale"};
    const mm_values vb = {.x = bs[1].v.buf, .tiles = buf_ptr(&bs[4]), .ntiles = bs[4].have ? buf_n(&bs[4].v) : 0,
                          .ts = (float)b_ts, .what = "b", .scales_what = "b_scales / b_tensor_scale"};
    const mm_verify_opts vo = {.u = u, .extra = extra, .n_extra = (size_t)nx, .expect = expect,
                               .no_candidates = !candidates, .engine = engine};
    const mm_verify_outputs out = {.exact = buf_ptr(&bs[6]), .absdot = buf_ptr(&bs[7]), .err = buf_ptr(&bs[8]),
                                   .err_ulp = buf_ptr(&bs[9]), .bound_ulp = buf_ptr(&bs[10]),
                                   .judged = buf_ptr(&bs[11]), .in_bound = buf_ptr(&bs[12])};
    mm_vmat A, B;
    mm_verify_report rep;
    char msg[512] = "";
    int st;
    Py_BEGIN_ALLOW_THREADS;
    st = mm_check_from_values(&A, &B, &p, &va, &vb, msg, sizeof msg);
    if (st == MM_OK) {
        const mm_verify_problem vp = {.A = &A.op, .B = &B.op, .M = p.M, .N = p.N, .K = p.K, .o = p.o,
                                      .C = bs[2].v.buf, .C_in = buf_ptr(&bs[5]), .ldc = p.N};
        st = mm_verify_run(&rep, &out, &vp, &vo, msg, sizeof msg);
        mm_vmat_free(&A), mm_vmat_free(&B);
    }
    Py_END_ALLOW_THREADS;
    release_bufs(bs, NB);
    if (st == MM_ENOMEM) return PyErr_NoMemory();
    if (st != MM_OK)
        return PyErr_Format(PyExc_ValueError, "check_matmul: %s", msg[0] ? msg : "the configuration is not valid");
    return report_dict(&rep);
}

// random(x, dist, seed, stream): x (float32) = draws of mm_random_f32 (what matmul-check uses).
static PyObject *py_random(PyObject *m, PyObject *args) {
    (void)m;
    PyObject *xo;
    const char *dist;
    unsigned long long seed, stream;
    if (!PyArg_ParseTuple(args, "OsKK", &xo, &dist, &seed, &stream)) return NULL;
    mm_dist d;
    if (mm_dist_from_name(&d, dist) != MM_OK)
        return PyErr_Format(PyExc_ValueError, "dist '%s': expected normal, uniform, lognormal or outliers", dist);
    Py_buffer x;
    if (get_buf(&x, xo, BUF_F32, 0, true, "out") < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS;
    mm_random_f32(x.buf, buf_n(&x), d, seed, stream);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&x);
    Py_RETURN_NONE;
}

// blas_env_wanted() -> {name: value}: what a launcher should export before starting Python
// (OpenBLAS and libgomp read them when they load; fplab never re-executes the interpreter).
static PyObject *py_blas_env_wanted(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    mm_env_var v[MM_BLAS_ENV_MAX];
    const int n = mm_blas_env_wanted(v);
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < n; i++) {
        PyObject *s = PyUnicode_FromString(v[i].value);
        if (!s || PyDict_SetItemString(d, v[i].name, s) < 0) Py_CLEAR(d);
        Py_XDECREF(s);
    }
    return d;
}

// ---------------------------------------------------------------------------------------------

static PyMethodDef methods[] = {
    {"table", py_table, METH_NOARGS, "[(name, aliases)] of the table of formats, in finfo order"},
    {"round", (PyCFunction)(void (*)(void))py_round, METH_VARARGS | METH_KEYWORDS, "round a buffer in place"},
    {"encode", (PyCFunction)(void (*)(void))py_encode, METH_VARARGS | METH_KEYWORDS, "codes of rounded values"},
    {"decode", py_decode, METH_VARARGS, "values of codes"},
    {"pack", py_pack, METH_VARARGS, "pack sub-byte codes"},
    {"unpack", py_unpack, METH_VARARGS, "unpack sub-byte codes"},
    {"packed_bytes", py_packed_bytes, METH_VARARGS, "bytes of n packed codes"},
    {"scaling", (PyCFunction)(void (*)(void))py_scaling, METH_VARARGS | METH_KEYWORDS, "parse a scaling recipe"},
    {"ulp", py_ulp, METH_VARARGS, "fmt_ulp over a float64 array"},
    {"qerror", py_qerror, METH_VARARGS, "fmt_qerror_f32/_f64: error metrics of y against x"},
    {"scheme", py_scheme, METH_VARARGS, "(element format, recipe) of a scheme name (mxfp4, nvfp4, ...), or None"},
    {"quantize", (PyCFunction)(void (*)(void))py_quantize, METH_VARARGS | METH_KEYWORDS, "fmt_quantize_f32"},
    {"matmul", (PyCFunction)(void (*)(void))py_matmul, METH_VARARGS | METH_KEYWORDS, "scaled matmul on cpu or ref"},
    {"check_matmul", (PyCFunction)(void (*)(void))py_check_matmul, METH_VARARGS | METH_KEYWORDS,
     "mm_check_from_values + mm_verify_run: verify a matmul result"},
    {"random", py_random, METH_VARARGS, "mm_random_f32"},
    {"blas_env_wanted", py_blas_env_wanted, METH_NOARGS, "environment OpenBLAS/libgomp should start with"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fplab._fplab",
                                    "fplab's C library on buffers (use the fplab package)", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fplab(void) {
    if (PyType_Ready(&FormatType) < 0) return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (!mod) return NULL;
    Py_INCREF(&FormatType);
    if (PyModule_AddObject(mod, "Format", (PyObject *)&FormatType) < 0 ||
        PyModule_AddStringConstant(mod, "VERSION", FPLAB_VERSION) < 0) {
        Py_DECREF(&FormatType);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
