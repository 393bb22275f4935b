// _autocast.c: the CPython extension fplab._autocast: autocast's context (autocast/autocast.h)
// for fplab.torch. A Context holds one parsed policy and its ac_ctx (delayed-scaling histories,
// telemetry, loss scaler), and casts, multiplies and rounds caller-owned float32 buffers the
// way trainer/llama.c does for its projections: ac_cast for each operand site, op_matmul_* for
// float32 products, ac_cast_operand + mm_cpu for the accumulators the policy emulates; and
// autocast's operands of a projection's products (fprop_input, dgrad_operands,
// wgrad_operands), which reuse the casts autocast holds, as the trainer's backward does.
// Arguments may be given by keyword (names as in the docstrings); results are dicts.
// Constraints: no numerics here: every value comes from the C library. Buffers come through the
// buffer protocol (a CPU torch tensor's .numpy() view shares its memory), C-contiguous float32,
// checked here; sizes are checked against the shapes the caller states. A context is not
// thread-safe (neither is ac_ctx): fplab.torch calls it from one thread at a time.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autocast/autocast.h"
#include "kernels/cast_cuda.h"
#include "kernels/llama_ops.h"
#include "kernels/scaled_mm.h"
#include "trainer/optim.h"
#include "util/json.h"

// ---------------------------------------------------------------------------------------------
// buffers

static int get_f32(Py_buffer *v, PyObject *obj, size_t n, bool writable, const char *what) {
    if (PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected a C-contiguous%s float32 buffer, got %s", what,
                     writable ? " writable" : "", Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *f = v->format ? v->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    if (strcmp(f, "f") || v->itemsize != 4 || (size_t)v->len != n * 4) {
        PyErr_Format(PyExc_TypeError, "%s: expected %zu float32 values, got %zd items of format '%s'", what, n,
                     v->len / (v->itemsize ? v->itemsize : 1), v->format ? v->format : "B");
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Context

enum { CTX_MM_PATHS = 8 };  // rows of mm_paths: more than mm_path's kernels

typedef struct {
    PyObject_HEAD ac_ctx ac;
    bool ready;
    // The kernels mm_cpu ran for the policy's emulated and engine products (mm_path,
    // kernels/scaled_mm.h), one row per kernel, since the context was made: Context.mm_paths().
    struct {
        const char *kernel;  // NULL: an unused row
        long long products;
        unsigned long long outputs, model_outputs;
    } paths[CTX_MM_PATHS];
} ContextObject;

// mm_cpu on the context's behalf, its path counted in self->paths (called without the GIL: the
// context is used from one thread at a time).
static int ctx_mm_cpu(ContextObject *self, float *C, size_t ldc, const mm_operand *A, const mm_operand *B, size_t M,
                      size_t N, size_t K, mm_opts *mo) {
    mm_path path = {.kernel = NULL};
    mo->path = &path;
    const int st = mm_cpu(C, ldc, A, B, M, N, K, mo);
    mo->path = NULL;
    for (int i = 0; st == MM_OK && i < CTX_MM_PATHS; i++) {
        if (self->paths[i].kernel && strcmp(self->paths[i].kernel, path.kernel)) continue;
        self->paths[i].kernel = path.kernel;
        self->paths[i].products++;
        self->paths[i].outputs += path.outputs, self->paths[i].model_outputs += path.model_outputs;
        break;
    }
    return st;
}

static PyTypeObject ContextType;

// Grows the context's cast buffers to n floats (ac_init sized them for max_operand).
static int ensure_cap(ContextObject *self, size_t n) {
    ac_ctx *c = &self->ac;
    if (n <= c->buf_cap) return 0;
    float **bufs[2 * AC_NSLOTS + 2] = {&c->buf[0], &c->buf[1], &c->buf[2], &c->buf[3]};
    int nb = AC_NSLOTS;
    if (c->op_deq) {
        for (int i = 0; i < AC_NSLOTS; i++) bufs[nb++] = &c->op_scales[i];
        bufs[nb++] = &c->op_deq, bufs[nb++] = &c->op_tiles;
    }
    for (int i = 0; i < nb; i++) {
        float *p = realloc(*bufs[i], n * sizeof(float));
        if (!p) {
            PyErr_NoMemory();
            return -1;
        }
        *bufs[i] = p;
    }
    c->buf_cap = n;
    return 0;
}

static int context_init(ContextObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"text", "origin", "n_layers", "seed", "telemetry", NULL};
    const char *text, *origin, *tel = "sites";
    int n_layers = 0;
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|iKs", kwlist, &text, &origin, &n_layers, &seed, &tel))
        return -1;
    if (n_layers < 0 || n_layers > 1 << 20) {
        PyErr_Format(PyExc_ValueError, "n_layers %d: expected 0..%d", n_layers, 1 << 20);
        return -1;
    }
    const ac_telemetry t = !strcmp(tel, "off") ? AC_TEL_OFF : !strcmp(tel, "sites") ? AC_TEL_SITES
                         : !strcmp(tel, "layers") ? AC_TEL_LAYERS : (ac_telemetry)-1;
    if ((int)t < 0) {
        PyErr_Format(PyExc_ValueError, "telemetry '%s': expected off, sites or layers", tel);
        return -1;
    }
    ac_policy p;
    char msg[1024] = "";
    if (ac_policy_parse(&p, text, origin, msg, sizeof msg) != AC_OK) {
        PyErr_SetString(PyExc_ValueError, msg);
        return -1;
    }
    if (self->ready) ac_free(&self->ac), self->ready = false;
    char m2[256] = "";
    if (ac_init(&self->ac, &p, n_layers, seed, t, 1, m2, sizeof m2) != AC_OK) {
        PyErr_SetString(PyExc_MemoryError, m2);
        return -1;
    }
    self->ready = true;
    memset(self->paths, 0, sizeof self->paths);
    if (msg[0] && PyErr_WarnFormat(PyExc_UserWarning, 1, "%s", msg) < 0) return -1;
    return 0;
}

static void context_dealloc(ContextObject *self) {
    if (self->ready) ac_free(&self->ac);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_site(int s) {
    if (s < 0 || s >= AC_NSITES) {
        PyErr_Format(PyExc_ValueError, "site %d: expected 0..%d", s, AC_NSITES - 1);
        return -1;
    }
    return 0;
}

// Layers 0..n_layers-1, and n_layers (or -1) for model-level sites: the trainer casts its LM
// head as layer n_layers (the stochastic-rounding stream names the layer it is given).
static int check_layer(const ContextObject *self, int layer) {
    if (layer < -1 || layer > self->ac.n_layers) {
        PyErr_Format(PyExc_ValueError, "layer %d: expected 0..%d (%d: model level)", layer, self->ac.n_layers,
                     self->ac.n_layers);
        return -1;
    }
    return 0;
}

static PyObject *ctx_describe(ContextObject *self, PyObject *unused) {
    (void)unused;
    const ac_policy *p = &self->ac.pol;
    static const char *upd[] = {"fp32", "round", "sr", "kahan"};
    static const char *kind[] = {"none", "static", "dynamic"};
    PyObject *active = PyList_New(AC_NSITES), *names = PyList_New(AC_NSITES), *emu = PyList_New(AC_NPROJ),
             *both = PyList_New(AC_NSITES);
    if (!active || !names || !emu || !both) goto fail;
    for (int s = 0; s < AC_NSITES; s++) {
        PyList_SET_ITEM(active, s, PyBool_FromLong(p->site[s].active));
        // of an empty tensor: whether the rule casts alike in both orientations at every size
        PyList_SET_ITEM(both, s, PyBool_FromLong(ac_cast_orientation_free(&self->ac, (ac_site)s, 0, 0)));
        PyList_SET_ITEM(names, s, PyUnicode_FromString(ac_site_name((ac_site)s)));
    }
    for (int g = 0; g < AC_NPROJ; g++) {
        PyObject *row = PyTuple_New(AC_NPASSES);
        if (!row) goto fail;
        for (int k = 0; k < AC_NPASSES; k++) PyTuple_SET_ITEM(row, k, PyBool_FromLong(mm_acc_is_emulated(&p->acc[g][k])));
        PyList_SET_ITEM(emu, g, row);
    }
    size_t n = ac_policy_text(p, NULL, 0);
    char *text = malloc(n + 1);
    if (!text) goto fail;
    ac_policy_text(p, text, n + 1);
    PyObject *d = Py_BuildValue("{s:s,s:s,s:i,s:{s:s,s:f,s:f,s:f,s:i,s:f},s:N,s:N,s:N,s:N,s:s,s:i}", "name", p->name,
                                "update", upd[p->update], "hadamard", p->hadamard, "loss_scale", "kind",
                                kind[p->scaler.kind], "init", (double)p->scaler.init, "growth",
                                (double)p->scaler.growth, "backoff", (double)p->scaler.backoff, "interval",
                                p->scaler.interval, "min", (double)p->scaler.min_scale, "active", active,
                                "site_names", names, "emulated", emu, "both_ways", both, "text", text, "n_layers",
                                self->ac.n_layers);
    free(text);
    return d;
fail:
    Py_XDECREF(active), Py_XDECREF(names), Py_XDECREF(emu), Py_XDECREF(both);
    return PyErr_NoMemory();
}

static PyObject *ctx_begin_step(ContextObject *self, PyObject *args) {
    unsigned long long step;
    if (!PyArg_ParseTuple(args, "K", &step)) return NULL;
    ac_begin_step(&self->ac, step);
    Py_RETURN_NONE;
}

static PyObject *ctx_begin_micro(ContextObject *self, PyObject *args) {
    int micro;
    if (!PyArg_ParseTuple(args, "i", &micro)) return NULL;
    if (micro < 0 || micro >= 64) return PyErr_Format(PyExc_ValueError, "micro-batch %d: expected 0..63 (the "
                                                      "stochastic-rounding keys hold 64 per step)", micro);
    ac_begin_micro(&self->ac, micro);
    Py_RETURN_NONE;
}

// cast(out, x, site, layer, rows, cols, k_rows, count): out (rows, cols) = x cast for the site as
// ac_cast does; out may be x (in place). The context's slot 0 is pointed at out for the call,
// so the library writes there and nothing is copied.
static PyObject *ctx_cast(ContextObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"out", "x", "site", "layer", "rows", "cols", "k_rows", "count", NULL};
    PyObject *oo, *ox;
    int site, layer, k_rows, count;
    Py_ssize_t rows, cols;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOiinnpp", kwlist, &oo, &ox, &site, &layer, &rows, &cols, &k_rows,
                                     &count))
        return NULL;
    if (check_site(site) < 0 || check_layer(self, layer) < 0) return NULL;
    if (rows < 0 || cols < 0) return PyErr_Format(PyExc_ValueError, "shape (%zd, %zd)", rows, cols);
    const size_t n = (size_t)rows * (size_t)cols;
    Py_buffer o, x;
    if (get_f32(&o, oo, n, true, "out") < 0) return NULL;
    if (get_f32(&x, ox, n, false, "x") < 0) {
        PyBuffer_Release(&o);
        return NULL;
    }
    ac_ctx *c = &self->ac;
    float *saved = c->buf[0];
    const ac_cast_req r = {.site = (ac_site)site, .layer = layer, .k_rows = k_rows, .count = count, .slot = 0};
    Py_BEGIN_ALLOW_THREADS
    c->buf[0] = o.buf;
    const float *y = ac_cast(c, &r, x.buf, (size_t)rows, (size_t)cols);
    if (y == x.buf && o.buf != x.buf) memcpy(o.buf, x.buf, n * sizeof(float));  // inactive site
    c->buf[0] = saved;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o), PyBuffer_Release(&x);
    Py_RETURN_NONE;
}

// cast_plan(site, layer, rows, cols, k_rows, count) -> (kind, plan, one_scale): ac_cast_plan_make
// for the context's step and micro-batch: kind 0 (an inactive site: nothing to run), 1 (round,
// delayed scaling) or 2 (quantize); plan the ac_cast_plan as bytes, which fplab.torch_cuda hands
// to ac_cast_plan_run unchanged; one_scale: the run writes the tensor's single scale, which
// cast_finish wants. Make, run and finish one plan before the next (autocast.h).
static PyObject *ctx_cast_plan(ContextObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"site", "layer", "rows", "cols", "k_rows", "count", NULL};
    int site, layer, k_rows, count;
    Py_ssize_t rows, cols;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iinnpp", kwlist, &site, &layer, &rows, &cols, &k_rows, &count))
        return NULL;
    if (check_site(site) < 0 || check_layer(self, layer) < 0) return NULL;
    if (rows < 0 || cols < 0) return PyErr_Format(PyExc_ValueError, "shape (%zd, %zd)", rows, cols);
    ac_cast_plan p;
    const ac_cast_req r = {.site = (ac_site)site, .layer = layer, .k_rows = k_rows, .count = count};
    if (ac_cast_plan_make(&self->ac, &r, (size_t)rows, (size_t)cols, &p) != AC_OK)
        return PyErr_Format(PyExc_ValueError, "cast_plan: site %d layer %d shape (%zd, %zd)", site, layer, rows, cols);
    return Py_BuildValue("(iy#O)", (int)p.kind, (const char *)&p, (Py_ssize_t)sizeof p, p.one_scale ? Py_True : Py_False);
}

// cast_finish(plan, counts, one_scale): ac_cast_plan_finish_counts: counts the host copy of the
// run's counters (kernels/cast_cuda.h: MM_CUDA_NCOUNTS uint64, bytes), one_scale the scale the
// run wrote (where cast_plan said so).
static PyObject *ctx_cast_finish(ContextObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"plan", "counts", "one_scale", NULL};
    Py_buffer pb, cb;
    float one;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*y*f", kwlist, &pb, &cb, &one)) return NULL;
    PyObject *res = NULL;
    if ((size_t)pb.len != sizeof(ac_cast_plan) || (size_t)cb.len != MM_CUDA_NCOUNTS * sizeof(uint64_t)) {
        PyErr_Format(PyExc_ValueError, "cast_finish: a plan of %zd bytes and counters of %zd; expected %zu and %zu",
                     pb.len, cb.len, sizeof(ac_cast_plan), (size_t)MM_CUDA_NCOUNTS * sizeof(uint64_t));
    } else {
        ac_cast_plan p;
        uint64_t c[MM_CUDA_NCOUNTS];
        memcpy(&p, pb.buf, sizeof p), memcpy(c, cb.buf, sizeof c);
        if ((unsigned)p.site >= AC_NSITES || p.layer < -1 || p.layer > self->ac.n_layers) {
            PyErr_SetString(PyExc_ValueError, "cast_finish: not a plan of this context");
        } else {
            ac_cast_plan_finish_counts(&self->ac, &p, c, one);
            res = Py_None, Py_INCREF(res);
        }
    }
    PyBuffer_Release(&pb), PyBuffer_Release(&cb);
    return res;
}

// hadamard(out, x, rows, cols): ac_hadamard16 (the NVFP4 recipe's wgrad rotation).
static PyObject *ctx_hadamard(ContextObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"out", "x", "rows", "cols", NULL};
    PyObject *oo, *ox;
    Py_ssize_t rows, cols;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOnn", kwlist, &oo, &ox, &rows, &cols)) return NULL;
    if (rows < 0 || cols < 0) return PyErr_Format(PyExc_ValueError, "shape (%zd, %zd)", rows, cols);
    const size_t n = (size_t)rows * (size_t)cols;
    Py_buffer o, x;
    if (get_f32(&o, oo, n, true, "out") < 0) return NULL;
    if (get_f32(&x, ox, n, false, "x") < 0) {
        PyBuffer_Release(&o);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    ac_hadamard16(&self->ac, o.buf, x.buf, (size_t)rows, (size_t)cols);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o), PyBuffer_Release(&x);
    Py_RETURN_NONE;
}

// matmul(pass, out, a, b, N, IC, OC, accumulate): the trainer's float32 products (llama_ops.h):
// fprop out (N, OC) = a (N, IC) b^T, b (OC, IC); dgrad out (N, IC) (= or +=) a (N, OC) b (OC, IC);
// wgrad out (OC, IC) += a^T b, a (N, OC), b (N, IC).
static PyObject *ctx_matmul(ContextObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"pass_", "out", "a", "b", "N", "IC", "OC", "accumulate", NULL};
    PyObject *oo, *oa, *ob;
    int pass, accumulate;
    Py_ssize_t N, IC, OC;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iOOOnnnp", kwlist, &pass, &oo, &oa, &ob, &N, &IC, &OC, &accumulate))
        return NULL;
    if (pass < 0 || pass >= AC_NPASSES || N < 0 || IC < 0 || OC < 0)
        return PyErr_Format(PyExc_ValueError, "matmul: pass %d, sizes (%zd, %zd, %zd)", pass, N, IC, OC);
    const size_t n = (size_t)N, ic = (size_t)IC, oc = (size_t)OC;
    const size_t no = pass == AC_FPROP ? n * oc : pass == AC_DGRAD ? n * ic : oc * ic;
    const size_t na = pass == AC_FPROP ? n * ic : n * oc;
    const size_t nb = pass == AC_WGRAD ? n * ic : oc * ic;
    Py_buffer o, a, b;
    if (get_f32(&o, oo, no, true, "out") < 0) return NULL;
    if (get_f32(&a, oa, na, false, "a") < 0) {
        PyBuffer_Release(&o);
        return NULL;
    }
    if (get_f32(&b, ob, nb, false, "b") < 0) {
        PyBuffer_Release(&o), PyBuffer_Release(&a);
        return NULL;
    }
    int st = 0;
    Py_BEGIN_ALLOW_THREADS
    if (pass == AC_FPROP) st = op_matmul_forward(o.buf, a.buf, b.buf, n, ic, oc);
    else if (pass == AC_DGRAD) st = op_matmul_dgrad(o.buf, a.buf, b.buf, n, ic, oc, accumulate);
    else st = op_matmul_wgrad(o.buf, a.buf, b.buf, n, ic, oc);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o), PyBuffer_Release(&a), PyBuffer_Release(&b);
    if (st == MM_ENOMEM) return PyErr_Format(PyExc_MemoryError, "matmul (%zd x %zd x %zd): out of memory", N, IC, OC);
    if (st != MM_OK)
        return PyErr_Format(PyExc_ValueError, "matmul (%zd x %zd x %zd): the library refused the product (status %d%s)",
                            N, IC, OC, st, n == 0 || ic == 0 || oc == 0 ? ": an empty product" : "");
    Py_RETURN_NONE;
}

// matmul_emulated(proj, pass, out, a, site_a, ra, ca, krows_a, count_a, b, site_b, rb, cb, krows_b,
//                 count_b, layer, M, N, K, accumulate): out (M, N) (= or +=) A B with the operands
// cast by ac_cast_operand (A into slot 0, B into slot 1) and the accumulator the policy emulates
// for (proj, pass), as trainer/llama.c's mm_emulated.
static PyObject *ctx_matmul_emulated(ContextObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"proj", "pass_", "out", "a", "site_a", "rows_a", "cols_a", "k_rows_a", "count_a",
                             "b", "site_b", "rows_b", "cols_b", "k_rows_b", "count_b", "layer", "M", "N", "K",
                             "accumulate", NULL};
    PyObject *oo, *oa, *ob;
    int proj, pass, sa, sb, ka, kb, ca_, cb_, layer, accumulate;
    Py_ssize_t ra, ca, rb, cb, M, N, K;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iiOOinnppOinnppinnnp", kwlist, &proj, &pass, &oo, &oa, &sa, &ra, &ca,
                                     &ka, &ca_, &ob, &sb, &rb, &cb, &kb, &cb_, &layer, &M, &N, &K, &accumulate))
        return NULL;
    if (proj < 0 || proj >= AC_NPROJ || pass < 0 || pass >= AC_NPASSES)
        return PyErr_Format(PyExc_ValueError, "matmul_emulated: projection %d, pass %d", proj, pass);
    if (check_site(sa) < 0 || check_site(sb) < 0 || check_layer(self, layer) < 0) return NULL;
    ac_ctx *c = &self->ac;
    const mm_acc *acc = ac_emulated_acc(c, (ac_proj)proj, (ac_pass)pass);
    if (!acc || !ac_active(c, (ac_site)sa) || !ac_active(c, (ac_site)sb))
        return PyErr_Format(PyExc_ValueError, "matmul_emulated: %s has no emulated accumulator in this policy",
                            ac_gemm_name((ac_proj)proj, (ac_pass)pass));
    if (M < 0 || N < 0 || K < 0 || ra * ca != M * K || rb * cb != K * N)
        return PyErr_Format(PyExc_ValueError, "matmul_emulated: operands (%zd, %zd) and (%zd, %zd) for M=%zd N=%zd "
                            "K=%zd", ra, ca, rb, cb, M, N, K);
    const size_t na = (size_t)ra * (size_t)ca, nb = (size_t)rb * (size_t)cb;
    if (ensure_cap(self, na > nb ? na : nb) < 0) return NULL;
    Py_buffer o, a, b;
    if (get_f32(&o, oo, (size_t)M * (size_t)N, true, "out") < 0) return NULL;
    if (get_f32(&a, oa, na, false, "a") < 0) {
        PyBuffer_Release(&o);
        return NULL;
    }
    if (get_f32(&b, ob, nb, false, "b") < 0) {
        PyBuffer_Release(&o), PyBuffer_Release(&a);
        return NULL;
    }
    int st;
    Py_BEGIN_ALLOW_THREADS
    mm_operand A, B;
    const ac_cast_req qa = {.site = (ac_site)sa, .layer = layer, .k_rows = ka, .count = ca_, .slot = 0},
                      qb = {.site = (ac_site)sb, .layer = layer, .k_rows = kb, .count = cb_, .slot = 1};
    ac_cast_operand(c, &qa, a.buf, (size_t)ra, (size_t)ca, MM_SIDE_A, &A);
    ac_cast_operand(c, &qb, b.buf, (size_t)rb, (size_t)cb, MM_SIDE_B, &B);
    mm_opts mo;
    mm_opts_default(&mo);
    mo.acc = *acc;
    mo.beta = accumulate ? 1.0f : 0.0f;
    st = ctx_mm_cpu(self, o.buf, (size_t)N, &A, &B, (size_t)M, (size_t)N, (size_t)K, &mo);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o), PyBuffer_Release(&a), PyBuffer_Release(&b);
    if (st != MM_OK) return PyErr_Format(PyExc_ValueError, "matmul_emulated: mm_cpu returned %d", st);
    Py_RETURN_NONE;
}

// ---------------------------------------------------------------------------------------------
// the operands of a projection's products (autocast.h), float32 products only

// The request of a projection's product from keywords already parsed, checked.
static int gemm_req(ContextObject *self, ac_gemm_req *g, int proj, int layer, Py_ssize_t N, Py_ssize_t IC,
                    Py_ssize_t OC, int recompute) {
    if (proj < 0 || proj >= AC_NPROJ) {
        PyErr_Format(PyExc_ValueError, "projection %d: expected 0..%d", proj, AC_NPROJ - 1);
        return -1;
    }
    if (check_layer(self, layer) < 0) return -1;
    if (N < 0 || IC < 0 || OC < 0) {
        PyErr_Format(PyExc_ValueError, "sizes N=%zd IC=%zd OC=%zd: expected >= 0", N, IC, OC);
        return -1;
    }
    // Python's tensors are never the caller's to overwrite: no in-place input casts.
    *g = (ac_gemm_req){.proj = (ac_proj)proj, .layer = layer, .N = (size_t)N, .IC = (size_t)IC, .OC = (size_t)OC,
                       .recompute = recompute};
    const size_t most = g->N * (g->IC > g->OC ? g->IC : g->OC), w = g->IC * g->OC;
    return ensure_cap(self, most > w ? most : w);
}

static int refuse_emulated(ContextObject *self, ac_proj p, ac_pass pass) {
    if (!ac_emulated_acc(&self->ac, p, pass)) return 0;
    PyErr_Format(PyExc_ValueError, "%s has an emulated accumulator in this policy: use matmul_emulated",
                 ac_gemm_name(p, pass));
    return -1;
}

// Buffers of a call: up to five (dgrad's a, b, dout, w and w_cast), released together.
typedef struct {
    Py_buffer v[5];
    int n;
} buf_set;

static int take(buf_set *b, PyObject *obj, size_t n, bool writable, const char *what) {
    if (get_f32(&b->v[b->n], obj, n, writable, what) < 0) return -1;
    b->n++;
    return 0;
}

static void release(buf_set *b) {
    for (int i = 0; i < b->n; i++) PyBuffer_Release(&b->v[i]);
}

static void copy_out(void *out, const float *v, size_t n) {
    if (out != v) memcpy(out, v, n * sizeof(float));
}

// fprop_input(out, x, proj, layer, N, IC, *, recompute=False): out (N, IC) = the input x as
// ac_fprop_input casts it for the projection's products (and records it for wgrad).
static PyObject *ctx_fprop_input(ContextObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"out", "x", "proj", "layer", "N", "IC", "recompute", NULL};
    PyObject *oo, *ox;
    int proj, layer, recompute = 0;
    Py_ssize_t N, IC;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOiinn|$p", kwlist, &oo, &ox, &proj, &layer, &N, &IC, &recompute))
        return NULL;
    ac_gemm_req g;
    if (gemm_req(self, &g, proj, layer, N, IC, 0, recompute) < 0 || refuse_emulated(self, g.proj, AC_FPROP) < 0)
        return NULL;
    buf_set b = {.n = 0};
    if (take(&b, oo, g.N * g.IC, true, "out") < 0 || take(&b, ox, g.N * g.IC, false, "x") < 0) {
        release(&b);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    ac_operands in;
    ac_fprop_input(&self->ac, &g, b.v[1].buf, &in);
    copy_out(b.v[0].buf, in.a, g.N * g.IC);
    Py_END_ALLOW_THREADS
    release(&b);
    Py_RETURN_NONE;
}

// The reuse bits of ac_operands as a dict.
static PyObject *reused_dict(unsigned r) {
    return Py_BuildValue("{s:O,s:O,s:O,s:O}", "input", r & AC_REUSED_INPUT ? Py_True : Py_False, "wgrad_x",
                         r & AC_REUSED_WGRAD_X ? Py_True : Py_False, "dgrad_dout",
                         r & AC_REUSED_DGRAD_DOUT ? Py_True : Py_False, "fprop_w",
                         r & AC_REUSED_FPROP_W ? Py_True : Py_False);
}

// dgrad_operands(*, a, b, dout, w, proj, layer, N, IC, OC, w_cast=None) and wgrad_operands(*, a,
// b, dout, x, proj, layer, N, IC, OC): the float32 operands of dgrad (a = dout cast (N, OC), b = W
// cast (OC, IC)) or wgrad (a = dout cast along N (N, OC), b = x cast along N (N, IC),
// Hadamard-rotated first under the policy's transform) as ac_dgrad_operands / ac_wgrad_operands
// give them, so that wgrad reuses dgrad's cast of dout and an earlier wgrad's cast of the same x,
// and dgrad the forward's cast of W (w_cast, the caller's) where autocast's rules allow. Returns
// {"input", "wgrad_x", "dgrad_dout", "fprop_w"}: which casts were reused. With a=None and b=None
// nothing is copied: returns (reused, a, b), each a writable memoryview of autocast's own buffer
// (or of w_cast), valid only until the context's next call (multiply at once), or None where that
// operand is the input itself (not cast).
static PyObject *operand_view(const float *v, const void *input, size_t n) {
    if ((const void *)v == input) Py_RETURN_NONE;
    return PyMemoryView_FromMemory((char *)v, (Py_ssize_t)(n * sizeof(float)), PyBUF_WRITE);
}

static PyObject *grad_operands_parsed(ContextObject *self, ac_pass pass, PyObject *oa, PyObject *ob, PyObject *od,
                                      PyObject *ox, PyObject *owc, int proj, int layer, Py_ssize_t N, Py_ssize_t IC,
                                      Py_ssize_t OC);

static PyObject *grad_operands(ContextObject *self, PyObject *args, PyObject *kw, ac_pass pass) {
    static char *dkw[] = {"a", "b", "dout", "w", "proj", "layer", "N", "IC", "OC", NULL};
    static char *wkw[] = {"a", "b", "dout", "x", "proj", "layer", "N", "IC", "OC", NULL};
    PyObject *oa, *ob, *od, *ox, *owc = NULL;
    int proj, layer;
    Py_ssize_t N, IC, OC;
    // dgrad's optional w_cast, taken out first (a format cannot have optional keyword-only
    // arguments after required ones)
    if (pass == AC_DGRAD && kw && (owc = PyDict_GetItemString(kw, "w_cast")) != NULL) {
        Py_INCREF(owc);
        if (!(kw = PyDict_Copy(kw)) || PyDict_DelItemString(kw, "w_cast") < 0) {
            Py_XDECREF(kw), Py_DECREF(owc);
            return NULL;
        }
    }
    const int parsed = PyArg_ParseTupleAndKeywords(args, kw, "$OOOOiinnn", pass == AC_DGRAD ? dkw : wkw, &oa, &ob,
                                                   &od, &ox, &proj, &layer, &N, &IC, &OC);
    if (owc) Py_DECREF(kw);  // the copy
    else Py_INCREF(Py_None), owc = Py_None;
    if (!parsed) {
        Py_DECREF(owc);
        return NULL;
    }
    PyObject *r = grad_operands_parsed(self, pass, oa, ob, od, ox, owc, proj, layer, N, IC, OC);
    Py_DECREF(owc);
    return r;
}

static PyObject *grad_operands_parsed(ContextObject *self, ac_pass pass, PyObject *oa, PyObject *ob, PyObject *od,
                                      PyObject *ox, PyObject *owc, int proj, int layer, Py_ssize_t N, Py_ssize_t IC,
                                      Py_ssize_t OC) {
    ac_gemm_req g;
    if (gemm_req(self, &g, proj, layer, N, IC, OC, 0) < 0 || refuse_emulated(self, g.proj, pass) < 0) return NULL;
    const size_t nd = g.N * g.OC, nx = pass == AC_DGRAD ? g.OC * g.IC : g.N * g.IC;
    const bool views = oa == Py_None && ob == Py_None;
    buf_set b = {.n = 0};
    if ((!views && (take(&b, oa, nd, true, "a") < 0 || take(&b, ob, nx, true, "b") < 0)) ||
        take(&b, od, nd, false, "dout") < 0 || take(&b, ox, nx, false, pass == AC_DGRAD ? "w" : "x") < 0 ||
        (owc != Py_None && take(&b, owc, nx, false, "w_cast") < 0)) {
        release(&b);
        return NULL;
    }
    const int in = views ? 0 : 2;  // where dout and w (x) are in b, then w_cast
    if (owc != Py_None) g.w_cast = b.v[in + 2].buf;
    ac_operands o;
    Py_BEGIN_ALLOW_THREADS
    if (pass == AC_DGRAD) ac_dgrad_operands(&self->ac, &g, b.v[in].buf, b.v[in + 1].buf, &o);
    else ac_wgrad_operands(&self->ac, &g, b.v[in].buf, b.v[in + 1].buf, &o);
    if (!views) {
        copy_out(b.v[0].buf, o.a, nd);
        copy_out(b.v[1].buf, o.b, nx);
    }
    Py_END_ALLOW_THREADS
    PyObject *r = reused_dict(o.reused);
    if (views && r) {
        PyObject *va = operand_view(o.a, b.v[0].buf, nd), *vb = operand_view(o.b, b.v[1].buf, nx);
        PyObject *t = va && vb ? PyTuple_Pack(3, r, va, vb) : NULL;
        Py_XDECREF(va);
        Py_XDECREF(vb);
        Py_DECREF(r);
        r = t;
    }
    release(&b);
    return r;
}

static PyObject *ctx_dgrad_operands(ContextObject *self, PyObject *args, PyObject *kw) {
    return grad_operands(self, args, kw, AC_DGRAD);
}

static PyObject *ctx_wgrad_operands(ContextObject *self, PyObject *args, PyObject *kw) {
    return grad_operands(self, args, kw, AC_WGRAD);
}

// dgrad(*, out, dout, w, proj, layer, N, IC, OC, accumulate=False) and wgrad(*, out, dout, x,
// proj, layer, N, IC, OC): the product itself on the CPU, as trainer/llama.c's proj_backward
// runs it: autocast's operands (ac_dgrad_operands / ac_wgrad_operands, with their reuse and
// the Hadamard rotation) multiplied in float32 (op_matmul_dgrad / op_matmul_wgrad) or in the
// accumulator the policy emulates (mm_cpu). dgrad: out (N, IC) = (or +=) dout W; wgrad: out
// (OC, IC) += dout^T x. Returns the reuse dict of dgrad_operands.
static PyObject *grad_product(ContextObject *self, PyObject *args, PyObject *kw, ac_pass pass) {
    static char *dkw[] = {"out", "dout", "w", "proj", "layer", "N", "IC", "OC", NULL};
    static char *wkw[] = {"out", "dout", "x", "proj", "layer", "N", "IC", "OC", NULL};
    PyObject *oo, *od, *ox;
    int proj, layer, accumulate = 0;
    Py_ssize_t N, IC, OC;
    // dgrad's optional accumulate= is taken out first: a format cannot have required keyword-only
    // arguments ("$") followed by optional ones ("|")
    PyObject *kw_rest = kw;
    if (pass == AC_DGRAD && kw) {
        PyObject *acc = PyDict_GetItemString(kw, "accumulate");
        if (acc) {
            if ((accumulate = PyObject_IsTrue(acc)) < 0 || !(kw_rest = PyDict_Copy(kw))) return NULL;
            if (PyDict_DelItemString(kw_rest, "accumulate") < 0) {
                Py_DECREF(kw_rest);
                return NULL;
            }
        }
    }
    const int ok = PyArg_ParseTupleAndKeywords(args, kw_rest, "$OOOiinnn", pass == AC_DGRAD ? dkw : wkw, &oo, &od,
                                               &ox, &proj, &layer, &N, &IC, &OC);
    if (kw_rest != kw) Py_DECREF(kw_rest);
    if (!ok) return NULL;
    ac_gemm_req g;
    if (gemm_req(self, &g, proj, layer, N, IC, OC, 0) < 0) return NULL;
    const size_t nd = g.N * g.OC, nx = pass == AC_DGRAD ? g.OC * g.IC : g.N * g.IC;
    const size_t no = pass == AC_DGRAD ? g.N * g.IC : g.OC * g.IC;
    buf_set b = {.n = 0};
    if (take(&b, oo, no, true, "out") < 0 || take(&b, od, nd, false, "dout") < 0 ||
        take(&b, ox, nx, false, pass == AC_DGRAD ? "w" : "x") < 0) {
        release(&b);
        return NULL;
    }
    ac_operands o;
    int st = MM_OK;
    Py_BEGIN_ALLOW_THREADS
    float *out = b.v[0].buf;
    if (pass == AC_DGRAD) ac_dgrad_operands(&self->ac, &g, b.v[1].buf, b.v[2].buf, &o);
    else ac_wgrad_operands(&self->ac, &g, b.v[1].buf, b.v[2].buf, &o);
    // dgrad: M = N, N = IC, K = OC; wgrad: M = OC, N = IC, K = N
    const size_t M = pass == AC_DGRAD ? g.N : g.OC, K = pass == AC_DGRAD ? g.OC : g.N;
    if (o.acc) {
        mm_opts mo;
        mm_opts_default(&mo);
        mo.acc = *o.acc;
        mo.beta = pass == AC_WGRAD || accumulate ? 1.0f : 0.0f;
        st = ctx_mm_cpu(self, out, g.IC, &o.A, &o.B, M, g.IC, K, &mo);
    } else if (pass == AC_DGRAD) {
        st = op_matmul_dgrad(out, o.a, o.b, g.N, g.IC, g.OC, accumulate);
    } else {
        st = op_matmul_wgrad(out, o.a, o.b, g.N, g.IC, g.OC);
    }
    Py_END_ALLOW_THREADS
    release(&b);
    if (st == MM_ENOMEM) return PyErr_NoMemory();
    if (st != MM_OK) return PyErr_Format(PyExc_ValueError, "%s: the library refused the product (status %d)",
                                         ac_gemm_name(g.proj, pass), st);
    return reused_dict(o.reused);
}

static PyObject *ctx_dgrad(ContextObject *self, PyObject *args, PyObject *kw) {
    return grad_product(self, args, kw, AC_DGRAD);
}

static PyObject *ctx_wgrad(ContextObject *self, PyObject *args, PyObject *kw) {
    return grad_product(self, args, kw, AC_WGRAD);
}

// round_update(p, p_old, comp_or_None, n, first=0): ac_round_update_at over n floats, elements
// first.. of the weights' flat vector.
static PyObject *ctx_round_update(ContextObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"p", "p_old", "comp", "n", "first", NULL};
    PyObject *op, *oold, *ocomp;
    Py_ssize_t n, first = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOn|n", kwlist, &op, &oold, &ocomp, &n, &first)) return NULL;
    if (first < 0) return PyErr_Format(PyExc_ValueError, "round_update: first %zd: expected >= 0", first);
    Py_buffer p, old, comp = {0};
    if (get_f32(&p, op, (size_t)n, true, "p") < 0) return NULL;
    if (get_f32(&old, oold, (size_t)n, false, "p_old") < 0) {
        PyBuffer_Release(&p);
        return NULL;
    }
    const bool has_comp = ocomp != Py_None;
    if (has_comp && get_f32(&comp, ocomp, (size_t)n, true, "comp") < 0) {
        PyBuffer_Release(&p), PyBuffer_Release(&old);
        return NULL;
    }
    if (!has_comp && self->ac.pol.update == AC_UPDATE_KAHAN && self->ac.pol.site[AC_MASTER].active) {
        PyBuffer_Release(&p), PyBuffer_Release(&old);
        return PyErr_Format(PyExc_ValueError, "round_update: update kahan needs its compensation buffer");
    }
    Py_BEGIN_ALLOW_THREADS
    ac_round_update_at(&self->ac, p.buf, old.buf, has_comp ? comp.buf : NULL, (size_t)n, (size_t)first);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&p), PyBuffer_Release(&old);
    if (has_comp) PyBuffer_Release(&comp);
    Py_RETURN_NONE;
}

// adamw_step(p, m, v, g, n, lr, beta1, beta2, eps, weight_decay, step, first=0, comp=None):
// trainer/optim.h's adamw_tensor_step over n floats (p, m, v written; g read) at step `step`
// (1-based), with ac's weight side fused (ac NULL: the step alone; else elements first.. of the
// weights' flat vector, comp their Kahan compensation).
static PyObject *adamw_call(ac_ctx *ac, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"p", "m", "v", "g", "n", "lr", "beta1", "beta2", "eps", "weight_decay", "step",
                             "first", "comp", NULL};
    PyObject *obj[4], *ocomp = Py_None;
    Py_ssize_t n, first = 0;
    long step;
    float lr, b1, b2, eps, wd;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOnfffffl|nO", kwlist, &obj[0], &obj[1], &obj[2], &obj[3], &n, &lr,
                                     &b1, &b2, &eps, &wd, &step, &first, &ocomp))
        return NULL;
    if (n < 0 || first < 0 || step < 1)
        return PyErr_Format(PyExc_ValueError, "adamw_step: n %zd, first %zd, step %ld: expected n, first >= 0, step >= 1",
                            n, first, step);
    if (!ac && (first != 0 || ocomp != Py_None))
        return PyErr_Format(PyExc_ValueError, "adamw_step: first and comp belong to a policy's update: call "
                                              "Context.adamw_step");
    static const char *names[4] = {"p", "m", "v", "g"};
    Py_buffer b[5] = {{0}};
    int got = 0;
    for (; got < 4; got++)
        if (get_f32(&b[got], obj[got], (size_t)n, got < 3, names[got]) < 0) break;
    const bool has_comp = ocomp != Py_None;
    bool ok = got == 4 && (!has_comp || get_f32(&b[4], ocomp, (size_t)n, true, "comp") == 0);
    if (ok && !has_comp && ac && ac->pol.update == AC_UPDATE_KAHAN && ac->pol.site[AC_MASTER].active) {
        PyErr_SetString(PyExc_ValueError, "adamw_step: update kahan needs its compensation buffer");
        ok = false;
    }
    if (ok) {
        const adamw_opts o = {lr, b1, b2, eps, wd};
        Py_BEGIN_ALLOW_THREADS
        adamw_tensor_step(b[0].buf, b[1].buf, b[2].buf, b[3].buf, (size_t)n, &o, step, ac, (size_t)first,
                          has_comp ? b[4].buf : NULL);
        Py_END_ALLOW_THREADS
        PyBuffer_Release(&b[4]);
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyObject *ctx_adamw_step(ContextObject *self, PyObject *args, PyObject *kw) {
    return adamw_call(&self->ac, args, kw);
}

static PyObject *py_adamw_step(PyObject *mod, PyObject *args, PyObject *kw) {
    (void)mod;
    return adamw_call(NULL, args, kw);
}

// json(): the step's telemetry members as ac_write_json writes them (",\"sites\":{...}...").
static PyObject *ctx_json(ContextObject *self, PyObject *unused) {
    (void)unused;
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    if (!f) return PyErr_NoMemory();
    ac_write_json(&self->ac, f);
    fclose(f);
    PyObject *r = PyUnicode_FromStringAndSize(s ? s : "", (Py_ssize_t)len);
    free(s);
    return r;
}

// json_num(v, digits): jx_write_num's spelling of a number for the JSON-lines logs.
static PyObject *py_json_num(PyObject *mod, PyObject *args) {
    (void)mod;
    double v;
    int digits;
    if (!PyArg_ParseTuple(args, "di", &v, &digits)) return NULL;
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    if (!f) return PyErr_NoMemory();
    jx_write_num(f, v, digits);
    fclose(f);
    PyObject *r = PyUnicode_FromStringAndSize(s ? s : "", (Py_ssize_t)len);
    free(s);
    return r;
}

// step_line(step, loss, lr, grad_norm, tokens_per_s, elapsed_s, loss_scale, skipped, val_loss): the
// C trainer's JSON-lines step line (less its "comm" member) with this context's telemetry,
// written by the trainer's own writer, ac_write_step_line; val_loss NaN: left out. Arguments
// by position or by these names.
static PyObject *ctx_step_line(ContextObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"step", "loss", "lr", "grad_norm", "tokens_per_s", "elapsed_s", "loss_scale",
                            "skipped", "val_loss", NULL};
    ac_step_fields line = {0};
    int skipped;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Lddddddpd", names, &line.step, &line.loss, &line.lr,
                                     &line.grad_norm, &line.tokens_per_s, &line.elapsed_s, &line.loss_scale,
                                     &skipped, &line.val_loss))
        return NULL;
    line.skipped = skipped;
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    if (!f) return PyErr_NoMemory();
    ac_write_step_line(f, &line, &self->ac);
    fclose(f);
    PyObject *r = PyUnicode_FromStringAndSize(s ? s : "", (Py_ssize_t)len);
    free(s);
    return r;
}

static PyObject *ctx_scaler_update(ContextObject *self, PyObject *args) {
    int finite;
    if (!PyArg_ParseTuple(args, "p", &finite)) return NULL;
    return PyBool_FromLong(ac_scaler_update(&self->ac.scaler, &self->ac.pol.scaler, finite));
}

static PyObject *ctx_scaler(ContextObject *self, PyObject *unused) {
    (void)unused;
    const ac_scaler *s = &self->ac.scaler;
    return Py_BuildValue("{s:f,s:i,s:L,s:L,s:L}", "scale", (double)s->scale, "good_steps", (int)s->good_steps,
                         "skipped", (long long)s->skipped, "grown", (long long)s->grown, "backed_off",
                         (long long)s->backed_off);
}

// state() / load_state(bytes): the checkpoint image of ac_state_save (scaler and amax histories).
static PyObject *ctx_state(ContextObject *self, PyObject *unused) {
    (void)unused;
    const size_t n = ac_state_bytes(&self->ac);
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (b) ac_state_save(&self->ac, PyBytes_AS_STRING(b));
    return b;
}

static PyObject *ctx_load_state(ContextObject *self, PyObject *args) {
    Py_buffer v;
    if (!PyArg_ParseTuple(args, "y*", &v)) return NULL;
    char msg[512] = "";
    int st = ac_state_check(&self->ac, v.buf, (size_t)v.len, msg, sizeof msg);
    if (st == AC_OK) st = ac_state_load(&self->ac, v.buf, (size_t)v.len);
    PyBuffer_Release(&v);
    if (st != AC_OK) return PyErr_Format(PyExc_ValueError, "autocast state: %s", msg[0] ? msg : "refused");
    Py_RETURN_NONE;
}

// tel_state() / load_tel_state(bytes): the step's telemetry so far (the per-site counts and the
// update counts), so that fplab.torch can replay counted casts (a recompute under delayed
// scaling pushes its amaxes again on a restored history) and put the counts back.
static size_t tel_bytes(const ContextObject *self) {
    return (size_t)AC_NSITES * (size_t)(self->ac.n_layers + 1) * sizeof(ac_tel) + 3 * sizeof(uint64_t);
}

static PyObject *ctx_tel_state(ContextObject *self, PyObject *unused) {
    (void)unused;
    const size_t n = tel_bytes(self), nt = n - 3 * sizeof(uint64_t);
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (!b) return NULL;
    char *p = PyBytes_AS_STRING(b);
    const uint64_t u[3] = {self->ac.upd_n, self->ac.upd_swamped, self->ac.upd_changed};
    memcpy(p, self->ac.tel, nt), memcpy(p + nt, u, sizeof u);
    return b;
}

static PyObject *ctx_load_tel_state(ContextObject *self, PyObject *args) {
    Py_buffer v;
    if (!PyArg_ParseTuple(args, "y*", &v)) return NULL;
    const size_t n = tel_bytes(self), nt = n - 3 * sizeof(uint64_t);
    if ((size_t)v.len != n) {
        PyBuffer_Release(&v);
        return PyErr_Format(PyExc_ValueError, "telemetry state: %zd bytes, expected %zu", v.len, n);
    }
    uint64_t u[3];
    memcpy(self->ac.tel, v.buf, nt), memcpy(u, (const char *)v.buf + nt, sizeof u);
    self->ac.upd_n = u[0], self->ac.upd_swamped = u[1], self->ac.upd_changed = u[2];
    PyBuffer_Release(&v);
    Py_RETURN_NONE;
}

// [{kernel, products, outputs, model_outputs}]: the kernels of the emulated and engine products
// so far (ContextObject.paths), in the order they first ran.
static PyObject *ctx_mm_paths(ContextObject *self, PyObject *unused) {
    (void)unused;
    PyObject *l = PyList_New(0);
    for (int i = 0; l && i < CTX_MM_PATHS && self->paths[i].kernel; i++) {
        PyObject *d = Py_BuildValue("{s:s,s:L,s:K,s:K}", "kernel", self->paths[i].kernel, "products",
                                    self->paths[i].products, "outputs", self->paths[i].outputs, "model_outputs",
                                    self->paths[i].model_outputs);
        if (!d || PyList_Append(l, d) < 0) Py_CLEAR(l);
        Py_XDECREF(d);
    }
    return l;
}

static PyMethodDef ctx_methods[] = {
    {"mm_paths", (PyCFunction)ctx_mm_paths, METH_NOARGS,
     "the kernels mm_cpu ran for the emulated and engine products: [{kernel, products, outputs, model_outputs}]"},
    {"describe", (PyCFunction)ctx_describe, METH_NOARGS, "the policy as fplab.torch needs it (a dict)"},
    {"begin_step", (PyCFunction)ctx_begin_step, METH_VARARGS, "ac_begin_step(step)"},
    {"begin_micro", (PyCFunction)ctx_begin_micro, METH_VARARGS, "ac_begin_micro(micro)"},
    {"cast", (PyCFunction)(void (*)(void))ctx_cast, METH_VARARGS | METH_KEYWORDS,
     "cast(out, x, site, layer, rows, cols, k_rows, count)"},
    {"cast_plan", (PyCFunction)(void (*)(void))ctx_cast_plan, METH_VARARGS | METH_KEYWORDS,
     "cast_plan(site, layer, rows, cols, k_rows, count) -> (kind, plan bytes, one_scale): ac_cast_plan_make"},
    {"cast_finish", (PyCFunction)(void (*)(void))ctx_cast_finish, METH_VARARGS | METH_KEYWORDS,
     "cast_finish(plan, counts, one_scale): ac_cast_plan_finish_counts (counts: 10 uint64 as bytes)"},
    {"hadamard", (PyCFunction)(void (*)(void))ctx_hadamard, METH_VARARGS | METH_KEYWORDS,
     "hadamard(out, x, rows, cols)"},
    {"matmul", (PyCFunction)(void (*)(void))ctx_matmul, METH_VARARGS | METH_KEYWORDS,
     "matmul(pass_, out, a, b, N, IC, OC, accumulate)"},
    {"matmul_emulated", (PyCFunction)(void (*)(void))ctx_matmul_emulated, METH_VARARGS | METH_KEYWORDS,
     "matmul_emulated(proj, pass_, out, a, site_a, rows_a, cols_a, k_rows_a, count_a, b, site_b, rows_b, cols_b, "
     "k_rows_b, count_b, layer, M, N, K, accumulate): a product with the emulated accumulator"},
    {"fprop_input", (PyCFunction)(void (*)(void))ctx_fprop_input, METH_VARARGS | METH_KEYWORDS,
     "fprop_input(out, x, proj, layer, N, IC, *, recompute=False): a projection's input cast once for its products"},
    {"dgrad_operands", (PyCFunction)(void (*)(void))ctx_dgrad_operands, METH_VARARGS | METH_KEYWORDS,
     "dgrad_operands(*, a, b, dout, w, proj, layer, N, IC, OC, w_cast=None) -> {input, wgrad_x, dgrad_dout, "
     "fprop_w}; w_cast: the forward's cast of w, taken where one cast serves both products; with a=b=None: "
     "(reused, a view or None, b view or None), views of autocast's buffers valid until its next call"},
    {"wgrad_operands", (PyCFunction)(void (*)(void))ctx_wgrad_operands, METH_VARARGS | METH_KEYWORDS,
     "wgrad_operands(*, a, b, dout, x, proj, layer, N, IC, OC) -> {input, wgrad_x, dgrad_dout, fprop_w}: which casts "
     "were reused; with a=b=None: (reused, a view or None, b view or None), as dgrad_operands"},
    {"dgrad", (PyCFunction)(void (*)(void))ctx_dgrad, METH_VARARGS | METH_KEYWORDS,
     "dgrad(*, out, dout, w, proj, layer, N, IC, OC, accumulate=False): out (N, IC) (=|+=) dout W, on the CPU, "
     "with autocast's operands -> {input, wgrad_x, dgrad_dout}"},
    {"wgrad", (PyCFunction)(void (*)(void))ctx_wgrad, METH_VARARGS | METH_KEYWORDS,
     "wgrad(*, out, dout, x, proj, layer, N, IC, OC): out (OC, IC) += dout^T x, on the CPU, with autocast's "
     "operands -> {input, wgrad_x, dgrad_dout}"},
    {"round_update", (PyCFunction)(void (*)(void))ctx_round_update, METH_VARARGS | METH_KEYWORDS,
     "round_update(p, p_old, comp, n, first=0)"},
    {"adamw_step", (PyCFunction)(void (*)(void))ctx_adamw_step, METH_VARARGS | METH_KEYWORDS,
     "adamw_step(p, m, v, g, n, lr, beta1, beta2, eps, weight_decay, step, first=0, comp=None): AdamW with the "
     "policy's weight side in one pass"},
    {"json", (PyCFunction)ctx_json, METH_NOARGS, "the step's telemetry as JSON members"},
    {"tel_state", (PyCFunction)ctx_tel_state, METH_NOARGS, "the step's telemetry so far (bytes)"},
    {"load_tel_state", (PyCFunction)ctx_load_tel_state, METH_VARARGS, "put back tel_state's telemetry"},
    {"step_line", (PyCFunction)(void (*)(void))ctx_step_line, METH_VARARGS | METH_KEYWORDS, "the trainer's JSON step line with this telemetry"},
    {"scaler_update", (PyCFunction)ctx_scaler_update, METH_VARARGS, "scaler_update(finite) -> skip"},
    {"scaler", (PyCFunction)ctx_scaler, METH_NOARGS, "the loss scaler's state (a dict)"},
    {"state", (PyCFunction)ctx_state, METH_NOARGS, "the checkpoint image (bytes)"},
    {"load_state", (PyCFunction)ctx_load_state, METH_VARARGS, "load a checkpoint image"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fplab._autocast.Context",
    .tp_basicsize = sizeof(ContextObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Context(text, origin, n_layers=0, seed=0, telemetry='sites'): a parsed policy and its autocast state",
    .tp_methods = ctx_methods,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)context_init,
    .tp_dealloc = (destructor)context_dealloc,
};

// ---------------------------------------------------------------------------------------------
// module functions

// policy_text(name_or_path) -> canonical text (ac_policy_load, then ac_policy_text).
static PyObject *py_policy_text(PyObject *mod, PyObject *args) {
    (void)mod;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    ac_policy p;
    char msg[1024] = "";
    if (ac_policy_load(&p, name, msg, sizeof msg) != AC_OK) {
        PyErr_SetString(PyExc_ValueError, msg);
        return NULL;
    }
    const size_t n = ac_policy_text(&p, NULL, 0);
    char *text = malloc(n + 1);
    if (!text) return PyErr_NoMemory();
    ac_policy_text(&p, text, n + 1);
    PyObject *r = PyUnicode_FromString(text);
    free(text);
    return r;
}

static PyObject *py_presets(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    return PyUnicode_FromString(ac_preset_names());
}

static PyMethodDef module_methods[] = {
    {"policy_text", py_policy_text, METH_VARARGS, "a preset or policy file as canonical policy text"},
    {"presets", py_presets, METH_NOARGS, "the preset names, comma-separated"},
    {"json_num", py_json_num, METH_VARARGS, "a number as the JSON-lines logs spell it"},
    {"adamw_step", (PyCFunction)(void (*)(void))py_adamw_step, METH_VARARGS | METH_KEYWORDS,
     "adamw_step(p, m, v, g, n, lr, beta1, beta2, eps, weight_decay, step): the C trainer's AdamW on one tensor"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fplab._autocast", "autocast contexts for fplab.torch",
                                    -1, module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__autocast(void) {
    if (PyType_Ready(&ContextType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&ContextType);
    if (PyModule_AddObject(m, "Context", (PyObject *)&ContextType) < 0 ||
        PyModule_AddIntConstant(m, "NSITES", AC_NSITES) < 0 || PyModule_AddIntConstant(m, "NPROJ", AC_NPROJ) < 0) {
        Py_DECREF(&ContextType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
