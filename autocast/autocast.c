// autocast.c: casting at the sites of a policy, delayed scaling, telemetry, weight-update
// rounding (see autocast.h).
#include "autocast/autocast.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "formats/rng.h"
#include "kernels/cast_cuda.h"
#include "util/json.h"


// Floats of one (site, layer) amax history (1 for a hand-built policy without one).
static size_t hist_len(const ac_ctx *c) { return c->pol.amax_history > 0 ? (size_t)c->pol.amax_history : 1; }

static size_t slot_index(const ac_ctx *c, ac_site s, int layer) {
    return (size_t)s * (size_t)(c->n_layers + 1) + (size_t)(layer < 0 ? c->n_layers : layer);
}

int ac_init(ac_ctx *c, const ac_policy *p, int n_layers, uint64_t seed, ac_telemetry t,
            size_t max_operand, char *msg, size_t msg_len) {
    memset(c, 0, sizeof *c);
    c->pol = *p;
    c->n_layers = n_layers;
    c->seed = seed;
    c->telemetry = t;
    ac_scaler_init(&c->scaler, &p->scaler);
    const size_t slots = (size_t)AC_NSITES * (size_t)(n_layers + 1);
    c->hist = calloc(slots * hist_len(c), sizeof *c->hist);
    c->hist_count = calloc(slots, sizeof *c->hist_count);
    c->tel = calloc(slots, sizeof *c->tel);
    c->inputs = calloc((size_t)AC_NPROJ * (size_t)(n_layers + 1), sizeof *c->inputs);
    c->buf_cap = max_operand;
    bool ok = c->hist && c->hist_count && c->tel && c->inputs;
    bool delayed = false;
    for (int i = 0; i < AC_NSITES; i++) delayed |= p->site[i].active && p->site[i].delayed;
    if (delayed && ok) {
        c->mark_hist = malloc(slots * hist_len(c) * sizeof *c->mark_hist);
        c->mark_count = calloc(slots, sizeof *c->mark_count);
        c->now_hist = malloc((size_t)AC_NSITES * hist_len(c) * sizeof *c->now_hist);
        c->now_count = malloc((size_t)AC_NSITES * sizeof *c->now_count);
        ok = c->mark_hist && c->mark_count && c->now_hist && c->now_count;
    }
    const size_t cap = (max_operand ? max_operand : 1) * sizeof(float);
    for (int i = 0; i < AC_NSLOTS && ok; i++) ok = (c->buf[i] = malloc(cap));
    bool emulated = false;
    for (int g = 0; g < AC_NPROJ; g++)
        for (int k = 0; k < AC_NPASSES; k++) emulated |= mm_acc_is_emulated(&p->acc[g][k]);
    if (emulated && ok) {
        for (int i = 0; i < AC_NSLOTS && ok; i++) ok = (c->op_scales[i] = malloc(cap));
        ok = ok && (c->op_deq = malloc(cap)) && (c->op_tiles = malloc(cap));
    }
    if (!ok) {
        ac_free(c);
        snprintf(msg, msg_len, "autocast: out of memory for %zu-float cast buffers", max_operand);
        return AC_EINVAL;
    }
    return AC_OK;
}

void ac_free(ac_ctx *c) {
    free(c->hist), free(c->hist_count), free(c->tel), free(c->inputs);
    for (int i = 0; i < AC_NSLOTS; i++) free(c->buf[i]), free(c->op_scales[i]);
    free(c->op_deq), free(c->op_tiles);
    free(c->mark_hist), free(c->mark_count), free(c->now_hist), free(c->now_count);
    memset(c, 0, sizeof *c);
}

// Copies layer's (site, layer) histories and counts between the context and (hist, count),
// laid out [site][amax_history] and [site]: to the context when `in`.
static void layer_hist_copy(ac_ctx *c, int layer, float *hist, int64_t *count, bool in) {
    const size_t hl = hist_len(c);
    for (int s = 0; s < AC_NSITES; s++) {
        const size_t k = slot_index(c, (ac_site)s, layer);
        float *h = c->hist + k * hl, *o = hist + (size_t)s * hl;
        if (in) memcpy(h, o, hl * sizeof *h), c->hist_count[k] = count[s];
        else memcpy(o, h, hl * sizeof *h), count[s] = c->hist_count[k];
    }
}

static bool layer_ok(const ac_ctx *c, int layer) {
    return c && c->mark_hist && layer >= -1 && layer <= c->n_layers;
}

// The mark of layer: [site][amax_history] floats and [site] counts.
static float *mark_hist_of(ac_ctx *c, int layer) {
    return c->mark_hist + slot_index(c, 0, layer) * AC_NSITES * hist_len(c);
}

void ac_layer_mark(ac_ctx *c, int layer) {
    if (!layer_ok(c, layer)) return;
    layer_hist_copy(c, layer, mark_hist_of(c, layer), c->mark_count + slot_index(c, 0, layer) * AC_NSITES, false);
}

void ac_replay_begin(ac_ctx *c, int layer) {
    if (!layer_ok(c, layer)) return;
    layer_hist_copy(c, layer, c->now_hist, c->now_count, false);
    layer_hist_copy(c, layer, mark_hist_of(c, layer), c->mark_count + slot_index(c, 0, layer) * AC_NSITES, true);
    c->replay = true;
}

void ac_replay_end(ac_ctx *c, int layer) {
    if (!layer_ok(c, layer)) return;
    c->replay = false;
    layer_hist_copy(c, layer, c->now_hist, c->now_count, true);
}

void ac_begin_step(ac_ctx *c, uint64_t step) {
    if (!c) return;
    c->step = step;
    c->micro = 0;
    memset(c->tel, 0, (size_t)AC_NSITES * (size_t)(c->n_layers + 1) * sizeof *c->tel);
    c->upd_n = c->upd_swamped = c->upd_changed = 0;
}

void ac_begin_micro(ac_ctx *c, int micro) {
    if (c) c->micro = micro;
}

// Rounding options of one cast: the rule's, with a stochastic-rounding stream that names the
// cast (not a running counter, so recompute and resume draw the same bits). The streams were
// laid out for the AC_NSITES_V1 sites of version 1; a later site draws under a seed of its own
// block (s / AC_NSITES_V1), so that adding a site changes no earlier site's bits and a run
// resumed from an older checkpoint continues as it would have.
static fmt_round_opts cast_opts(const ac_ctx *c, const ac_rule *r, ac_site s, int layer, bool k_rows) {
    fmt_round_opts o = r->round;
    const uint64_t block = (uint64_t)s / AC_NSITES_V1, site = (uint64_t)s % AC_NSITES_V1;
    o.seed = (c->seed ^ 0x6175746f63617374ULL) + block * 0x9e3779b97f4a7c15ULL;  // "autocast"
    o.stream = ((c->step * 64 + (uint64_t)c->micro) * AC_NSITES_V1 + site) * 1024 +
               (uint64_t)(layer + 1) * 2 + (k_rows ? 1 : 0);
    o.offset = 0;
    return o;
}

static void add_tel(ac_ctx *c, ac_site s, int layer, const fmt_stats *st, double amax, float scale) {
    ac_tel *t = &c->tel[slot_index(c, s, layer)];
    t->n += st->n, t->overflow += st->overflow, t->underflow += st->underflow;
    t->subnormal += st->subnormal, t->nan += st->nan_in;
    if (amax > t->amax) t->amax = amax;
    t->scale = scale;
}

// Delayed scaling (Transformer Engine): scale = max_elem / (2^margin * max(history)), from the
// amaxes of earlier casts of this site; 1 while the history is empty. Then the current amax
// joins the history (when counted).
static float delayed_scale(const ac_ctx *c, ac_site s, int layer, const ac_rule *r) {
    const size_t k = slot_index(c, s, layer), hl = (size_t)c->pol.amax_history;
    const int64_t cnt = c->hist_count[k];
    if (cnt == 0) return 1.0f;
    const size_t m = cnt < (int64_t)hl ? (size_t)cnt : hl;
    float amax = 0.0f;
    for (size_t i = 0; i < m; i++) amax = fmaxf(amax, c->hist[k * hl + i]);
    if (!(amax > 0.0f) || !isfinite(amax)) return 1.0f;
    const double sc = r->fmt.max / (pow(2.0, c->pol.amax_margin) * amax);
    return isfinite(sc) && sc > 0 ? (float)fmin(sc, 3.0e38) : 1.0f;
}

static void push_amax(ac_ctx *c, ac_site s, int layer, float amax) {
    const size_t k = slot_index(c, s, layer), hl = (size_t)c->pol.amax_history;
    c->hist[k * hl + (size_t)(c->hist_count[k] % (int64_t)hl)] = amax;
    c->hist_count[k]++;
}

// Where ac_cast_operand wants an operand of an emulated product: its side, the buffer of its
// expanded scales, the description to fill.
typedef struct {
    mm_side side;
    float *scales;
    mm_operand *op;
} operand_out;

// --- plans (autocast.h): the rule of a cast, made once here for the host path and executors

static void plan_make(const ac_ctx *c, const ac_cast_req *q, size_t rows, size_t cols, ac_cast_plan *p) {
    const ac_site s = q->site;
    const ac_rule *r = &c->pol.site[s];
    memset(p, 0, sizeof *p);
    p->site = s, p->layer = q->layer, p->rows = rows, p->cols = cols, p->k_rows = q->k_rows, p->count = q->count;
    p->pre = p->post = 1.0f;
    if (!r->active) {
        p->kind = AC_PLAN_COPY;
        return;
    }
    p->fmt = r->fmt;
    p->round = cast_opts(c, r, s, q->layer, q->k_rows);
    if (r->delayed) {
        p->kind = AC_PLAN_ROUND;
        p->pre = delayed_scale(c, s, q->layer, r);
        p->post = 1.0f / p->pre;
        return;
    }
    p->kind = AC_PLAN_QUANTIZE;
    p->scaling = r->scaling;
    if (q->k_rows) {  // scales run along K: down the columns of this operand
        const int t = p->scaling.tile_rows;
        p->scaling.tile_rows = p->scaling.tile_cols, p->scaling.tile_cols = t;
    }
    p->one_scale = !p->scaling.none && fmt_scale_count(&p->scaling, rows, cols) == 1;
}

int ac_cast_plan_make(const ac_ctx *c, const ac_cast_req *r, size_t rows, size_t cols, ac_cast_plan *p) {
    if (!c || !r || !p || (unsigned)r->site >= AC_NSITES || r->layer < -1 || r->layer > c->n_layers) return AC_EINVAL;
    if (cols && rows > SIZE_MAX / cols) return AC_EINVAL;
    plan_make(c, r, rows, cols, p);
    return AC_OK;
}

void ac_cast_plan_finish(ac_ctx *c, const ac_cast_plan *p, const fmt_stats *st, float one_scale, float tensor_scale) {
    if (!c || !p || p->kind == AC_PLAN_COPY) return;
    if (!p->count) {  // a replayed recompute pushes what its counted forward pushed, uncounted
        if (c->replay && p->kind == AC_PLAN_ROUND) {
            const float scale = p->pre;
            const double amax = st->amax / scale;
            push_amax(c, p->site, p->layer, (float)amax);
        }
        return;
    }
    float scale;
    double amax;
    if (p->kind == AC_PLAN_ROUND) {  // the counts are of x * scale
        scale = p->pre;
        amax = st->amax / scale;
        push_amax(c, p->site, p->layer, (float)amax);
    } else {
        scale = p->scaling.none ? 1.0f : p->one_scale ? 1.0f / (one_scale * tensor_scale) : 0.0f;
        amax = st->amax;
    }
    if (c->telemetry != AC_TEL_OFF) add_tel(c, p->site, p->layer, st, amax, scale);
}

void ac_cast_plan_finish_counts(ac_ctx *c, const ac_cast_plan *p, const uint64_t *counts, float one_scale) {
    fmt_stats st = {0};
    fmt_quant_info info = {0};
    mm_cuda_counts_read(counts, &st, &info);
    ac_cast_plan_finish(c, p, &st, one_scale, info.tensor_scale);
}

// The cast of x as q says into out (q->slot is not read): its plan run on the host, then
// finished. With to (an operand of an emulated product), out gets the element values and
// *to->op describes them with their scales.
static void cast_into(ac_ctx *c, const ac_cast_req *q, float *out, const float *x, size_t rows, size_t cols,
                      const operand_out *to) {
    ac_cast_plan p;
    plan_make(c, q, rows, cols, &p);
    mm_operand *op = to ? to->op : NULL;
    const mm_side side = to ? to->side : MM_SIDE_A;
    float *op_scales = to ? to->scales : NULL;
    const size_t n = rows * cols;
    fmt_stats st = {0};
    // What ac_cast_plan_finish reads of the counts: a pre-scaled rounding's amax, which a counted
    // cast or a replayed one pushes to the history, and a counted cast's telemetry. Elsewhere
    // (the second orientation of a tensor, a recomputed forward, telemetry off) the kernels run
    // without their statistics, about a third of a cast's time; the values are the same.
    fmt_stats *stp = (p.kind == AC_PLAN_ROUND ? p.count || c->replay : p.count && c->telemetry != AC_TEL_OFF)
                         ? &st : NULL;
    float one_scale = 0.0f, tensor_scale = 1.0f;
    if (p.kind == AC_PLAN_ROUND) {
        // out = round(x * scale), and back to x's scale unless an emulated product takes the
        // scale beside the elements
        fmt_round_f32_scaled(&p.fmt, out, x, n, p.pre, op ? 1.0f : p.post, &p.round, stp);
        if (op) {
            fmt_scaling sc;
            fmt_scaling_from_name(&sc, "none", NULL, 0);  // cannot fail
            mm_operand_from_tiles(op, NULL, side, p.k_rows, out, rows, cols, &p.fmt, &sc, NULL, p.post);
        }
    } else {
        const fmt_scaling *sc = &p.scaling;
        fmt_quant_info info = {0};
        if (p.one_scale) info.scales = &one_scale;
        if (op && !sc->none) {
            if (!p.one_scale) info.scales = c->op_tiles;
            info.elems = out;
            fmt_quantize_f32(&p.fmt, sc, c->op_deq, x, rows, cols, &p.round, stp, &info);
            mm_operand_from_tiles(op, op_scales, side, p.k_rows, out, rows, cols, &p.fmt, sc, info.scales,
                                  info.tensor_scale);
        } else {
            fmt_quantize_f32(&p.fmt, sc, out, x, rows, cols, &p.round, stp, &info);
            if (op) mm_operand_from_tiles(op, NULL, side, p.k_rows, out, rows, cols, &p.fmt, sc, NULL, 1.0f);
        }
        tensor_scale = info.tensor_scale;
    }
    ac_cast_plan_finish(c, &p, &st, one_scale, tensor_scale);
}

const float *ac_cast(ac_ctx *c, const ac_cast_req *r, const float *x, size_t rows, size_t cols) {
    if (!ac_active(c, r->site)) return x;
    float *out = c->buf[r->slot];
    c->held[r->slot].x = NULL;
    cast_into(c, r, out, x, rows, cols, NULL);
    if (c->hook) c->hook(c->hook_user, r->site, r->layer, x, out, rows, cols, r->k_rows, r->count);
    return out;
}

void ac_cast_inplace(ac_ctx *c, ac_site s, int layer, float *x, size_t rows, size_t cols, bool count) {
    if (!ac_active(c, s)) return;
    cast_into(c, &(ac_cast_req){.site = s, .layer = layer, .count = count}, x, x, rows, cols, NULL);
    if (c->hook) c->hook(c->hook_user, s, layer, NULL, x, rows, cols, false, count);
}

bool ac_cast_orientation_free(const ac_ctx *c, ac_site s, size_t rows, size_t cols) {
    if (!ac_active(c, s)) return false;
    const ac_rule *r = &c->pol.site[s];
    // Square tiles (16x16, 128x128) give both orientations the same grid: the orientation swaps
    // a tile's sides (plan_make).
    return !r->delayed && r->round.mode != FMT_SR &&
           (r->scaling.none || r->scaling.tile_rows == r->scaling.tile_cols ||
            fmt_scale_count(&r->scaling, rows, cols) == 1);
}

const mm_acc *ac_emulated_acc(const ac_ctx *c, ac_proj p, ac_pass pass) {
    return c && mm_acc_is_emulated(&c->pol.acc[p][pass]) ? &c->pol.acc[p][pass] : NULL;
}

void ac_cast_operand(ac_ctx *c, const ac_cast_req *r, const float *x, size_t rows, size_t cols, mm_side side,
                     mm_operand *op) {
    c->held[r->slot].x = NULL;
    cast_into(c, r, c->buf[r->slot], x, rows, cols, &(operand_out){side, c->op_scales[r->slot], op});
}

// --- the operands of a projection's products (autocast.h states the sharing rules)

// Whether one cast of a tensor for site s serves both of its products: the same bits in both
// orientations, no Hadamard rotation of the wgrad operands between them, and no hook (which
// sees every cast with its input).
static bool one_cast_serves_both(const ac_ctx *c, ac_site s, size_t rows, size_t cols) {
    return !c->pol.hadamard && !c->hook && ac_cast_orientation_free(c, s, rows, cols);
}

// The record of projection p's input at g's layer; NULL for a layer outside -1..n_layers.
static ac_input *input_of(ac_ctx *c, const ac_gemm_req *g) {
    if (g->layer < -1 || g->layer > c->n_layers || (unsigned)g->proj >= AC_NPROJ) return NULL;
    const int l = g->layer < 0 ? c->n_layers : g->layer;
    return &c->inputs[(size_t)g->proj * (size_t)(c->n_layers + 1) + (size_t)l];
}

// Delayed scaling's scale for site s at layer where its rule is delayed and deterministic, else 0.
// A counted cast pushes its amax, so a later cast of the same tensor may take another scale; where
// it takes the same, its values are the earlier cast's (ac_wgrad_operands' dout_kept).
static float delayed_pre(const ac_ctx *c, ac_site s, int layer) {
    const ac_rule *r = &c->pol.site[s];
    return ac_active(c, s) && r->delayed && r->round.mode != FMT_SR && !c->hook ? delayed_scale(c, s, layer, r) : 0.0f;
}

static bool held_is(const ac_ctx *c, int slot, const ac_held *k) {
    const ac_held *h = &c->held[slot];
    return h->x && h->x == k->x && h->pass == k->pass && h->site == k->site && h->layer == k->layer &&
           h->rows == k->rows && h->cols == k->cols && h->k_rows == k->k_rows && h->step == k->step &&
           h->micro == k->micro && h->gen == k->gen && h->call == k->call;
}

void ac_fprop_input(ac_ctx *c, const ac_gemm_req *g, float *x, ac_operands *in) {
    *in = (ac_operands){.a = x};
    if (!c) return;
    c->calls++;
    const ac_site s = ac_proj_in(g->proj);
    in->acc = ac_emulated_acc(c, g->proj, AC_FPROP);
    const bool in_place = g->in_place_ok && !in->acc && !ac_emulated_acc(c, g->proj, AC_WGRAD) &&
                          one_cast_serves_both(c, s, g->N, g->IC);
    ac_input *rec = input_of(c, g);
    if (rec) *rec = (ac_input){.x = x, .rows = g->N, .cols = g->IC, .in_place = in_place, .gen = ++c->gen};
    const ac_cast_req r = {.site = s, .layer = g->layer, .count = !g->recompute, .slot = 0};
    if (in->acc) ac_cast_operand(c, &r, x, g->N, g->IC, MM_SIDE_A, &in->A);
    else if (in_place) ac_cast_inplace(c, s, g->layer, x, g->N, g->IC, r.count);
    else in->a = ac_cast(c, &r, x, g->N, g->IC);
}

void ac_fprop_operands(ac_ctx *c, const ac_gemm_req *g, const ac_operands *in, const float *w, ac_operands *o) {
    *o = *in;
    o->b = w, o->reused = 0;
    if (!c) return;
    c->calls++;
    const ac_cast_req r = {.site = ac_proj_w(g->proj), .layer = g->layer, .count = !g->recompute, .slot = 1};
    if (o->acc) {
        ac_cast_operand(c, &r, w, g->OC, g->IC, MM_SIDE_B, &o->B);
    } else if (g->w_keep && ac_keeps_w_cast(c, g)) {
        cast_into(c, &r, g->w_keep, w, g->OC, g->IC, NULL);  // no hook to call: ac_keeps_w_cast
        o->b = g->w_keep;
    } else {
        o->b = ac_cast(c, &r, w, g->OC, g->IC);
    }
}

bool ac_keeps_w_cast(const ac_ctx *c, const ac_gemm_req *g) {
    return c && !c->hook && !c->exact_backward && !ac_emulated_acc(c, g->proj, AC_FPROP) &&
           !ac_emulated_acc(c, g->proj, AC_DGRAD) && ac_cast_orientation_free(c, ac_proj_w(g->proj), g->OC, g->IC);
}

void ac_dgrad_operands(ac_ctx *c, const ac_gemm_req *g, const float *dout, const float *w, ac_operands *o) {
    *o = (ac_operands){.a = dout, .b = w};
    if (!c || c->exact_backward) return;
    const uint64_t call = ++c->calls;
    ac_site sa, sb;
    ac_gemm_sites(g->proj, AC_DGRAD, &sa, &sb);
    o->acc = ac_emulated_acc(c, g->proj, AC_DGRAD);
    const ac_cast_req ra = {.site = sa, .layer = g->layer, .count = !g->recompute, .slot = 0},
                      rb = {.site = sb, .layer = g->layer, .k_rows = true, .slot = 1};
    if (o->acc) {
        ac_cast_operand(c, &ra, dout, g->N, g->OC, MM_SIDE_A, &o->A);
        ac_cast_operand(c, &rb, w, g->OC, g->IC, MM_SIDE_B, &o->B);
        return;
    }
    const float pre = delayed_pre(c, sa, g->layer);  // before the cast pushes this amax
    o->a = ac_cast(c, &ra, dout, g->N, g->OC);
    if (o->a == c->buf[0])
        c->held[0] = (ac_held){.x = dout, .pass = AC_DGRAD, .site = sa, .layer = g->layer, .rows = g->N,
                               .cols = g->OC, .step = c->step, .micro = c->micro, .call = call, .pre = pre};
    if (g->w_cast && !c->hook && ac_cast_orientation_free(c, sb, g->OC, g->IC)) {
        o->b = g->w_cast;
        o->reused = AC_REUSED_FPROP_W;
    } else {
        o->b = ac_cast(c, &rb, w, g->OC, g->IC);
    }
}

void ac_wgrad_operands(ac_ctx *c, const ac_gemm_req *g, const float *dout, const float *x, ac_operands *o) {
    *o = (ac_operands){.a = dout, .b = x};
    if (!c || c->exact_backward) return;
    const uint64_t call = ++c->calls;
    const size_t N = g->N, IC = g->IC, OC = g->OC;
    ac_site sa, sb;
    ac_gemm_sites(g->proj, AC_WGRAD, &sa, &sb);
    o->acc = ac_emulated_acc(c, g->proj, AC_WGRAD);
    const ac_input *in = input_of(c, g);
    // the casts this one may reuse, described as the calls that made them recorded them
    const ac_held x_key = {.x = x, .pass = AC_WGRAD, .site = sb, .layer = g->layer, .rows = N, .cols = IC,
                           .k_rows = true, .step = c->step, .micro = c->micro, .gen = in ? in->gen : 0};
    const ac_held dout_key = {.x = dout, .pass = AC_DGRAD, .site = sa, .layer = g->layer, .rows = N, .cols = OC,
                              .step = c->step, .micro = c->micro, .call = call - 1};
    const bool x_cast = !o->acc && in && in->in_place && in->x == x && in->rows == N && in->cols == IC;
    const bool x_kept = !x_cast && !o->acc && !c->hook && held_is(c, 3, &x_key);
    // dgrad's cast of dout serves here too where the rule is orientation-free, or is delayed scaling
    // whose scale did not move with the amax that cast pushed (nor does it rotate: no Hadamard).
    const bool dout_kept = !o->acc && held_is(c, 0, &dout_key) &&
                           (one_cast_serves_both(c, sa, N, OC) ||
                            (!c->pol.hadamard && c->held[0].pre != 0.0f &&
                             delayed_pre(c, sa, g->layer) == c->held[0].pre));
    // NVFP4: both operands rotated along N, the summed dimension, into buffers 0 and 1 (dgrad
    // is done with them; the casts below write 2 and 3, which must not be their inputs).
    if (c->pol.hadamard) {
        ac_hadamard16(c, c->buf[0], dout, N, OC);
        c->held[0].x = NULL;
        if (!x_kept) ac_hadamard16(c, c->buf[1], x, N, IC), c->held[1].x = NULL;
        dout = c->buf[0], x = c->buf[1];
    }
    const ac_cast_req ra = {.site = sa, .layer = g->layer, .k_rows = true, .slot = 2},
                      rb = {.site = sb, .layer = g->layer, .k_rows = true, .slot = 3};
    if (o->acc) {
        ac_cast_operand(c, &ra, dout, N, OC, MM_SIDE_A, &o->A);
        ac_cast_operand(c, &rb, x, N, IC, MM_SIDE_B, &o->B);
        return;
    }
    o->a = dout_kept ? c->buf[0] : ac_cast(c, &ra, dout, N, OC);
    if (x_cast || x_kept) {
        o->b = x_cast ? x : c->buf[3];
    } else {
        o->b = ac_cast(c, &rb, x, N, IC);
        if (o->b == c->buf[3]) c->held[3] = x_key;
    }
    o->reused = (x_cast ? AC_REUSED_INPUT : 0) | (x_kept ? AC_REUSED_WGRAD_X : 0) |
                (dout_kept ? AC_REUSED_DGRAD_DOUT : 0);
}

bool ac_plain_opts(const ac_ctx *c, ac_site s, int layer, const fmt_t **fmt, fmt_round_opts *o) {
    if (!ac_active(c, s)) return false;
    *fmt = &c->pol.site[s].fmt;
    *o = cast_opts(c, &c->pol.site[s], s, layer, false);
    return true;
}

void ac_add_stats(ac_ctx *c, ac_site s, int layer, const fmt_stats *st, bool count) {
    if (count && c && c->telemetry != AC_TEL_OFF) add_tel(c, s, layer, st, st->amax, 1.0f);
}

void ac_round_update(ac_ctx *c, float *p, const float *p_old, float *comp, size_t n) {
    ac_round_update_at(c, p, p_old, comp, n, 0);
}

// into += s: what two parts of one call saw together (counts add, amax is the larger).
static void stats_merge(fmt_stats *into, const fmt_stats *s) {
    into->n += s->n, into->overflow += s->overflow, into->underflow += s->underflow;
    into->subnormal += s->subnormal, into->nan_in += s->nan_in, into->invalid += s->invalid;
    if (s->amax > into->amax) into->amax = s->amax;
}

// The update's rounding options: the master site's format rounded as the policy's update line
// says (sr: stochastic; else the site's mode, nearest where that is stochastic).
static fmt_round_opts update_opts(const ac_ctx *c) {
    const ac_rule *r = &c->pol.site[AC_MASTER];
    fmt_round_opts o = cast_opts(c, r, AC_MASTER, -1, false);
    o.mode = c->pol.update == AC_UPDATE_SR ? FMT_SR : r->round.mode == FMT_SR ? FMT_RNE : r->round.mode;
    return o;
}

enum { UPD_CHUNK = 4096 };  // weights per task of the update's passes (each keeps a float32 copy)

// Rounds the m <= UPD_CHUNK weights q updated from q0, drawing from counter `at` (comp: Kahan's
// compensation of these weights, or NULL), and counts into st, *swamped and *changed.
static void update_chunk(const ac_ctx *c, fmt_round_opts o, float *q, const float *q0, float *comp, size_t m,
                         size_t at, fmt_stats *st, uint64_t *swamped, uint64_t *changed) {
    float target[UPD_CHUNK];
    // Kahan: the float32 target carries what earlier roundings lost (comp, kept in float32);
    // after rounding, comp = target - stored, exact as the two are close.
    if (comp)
        for (size_t i = 0; i < m; i++) q[i] = q0[i] + ((q[i] - q0[i]) + comp[i]);
    memcpy(target, q, m * sizeof *target);
    o.offset = at;
    fmt_round_f32(&c->pol.site[AC_MASTER].fmt, q, m, &o, st);
    uint64_t sw = 0, ch = 0;
    for (size_t i = 0; i < m; i++) {
        const bool same = q[i] == q0[i];
        sw += target[i] != q0[i] && same;  // moved in float32, rounded back: lost
        ch += !same;
    }
    *swamped += sw, *changed += ch;
    if (comp)
        for (size_t i = 0; i < m; i++) comp[i] = target[i] - q[i];
}

// What an update of n weights counted, into the context.
static void update_finish(ac_ctx *c, size_t n, uint64_t swamped, uint64_t changed, const fmt_stats *st) {
    c->upd_n += n, c->upd_swamped += swamped, c->upd_changed += changed;
    if (c->telemetry != AC_TEL_OFF) add_tel(c, AC_MASTER, -1, st, st->amax, 1.0f);
}

void ac_round_update_at(ac_ctx *c, float *p, const float *p_old, float *comp, size_t n, size_t first) {
    if (!ac_active(c, AC_MASTER)) return;
    const fmt_round_opts o = update_opts(c);
    const bool kahan = c->pol.update == AC_UPDATE_KAHAN && comp;
    uint64_t swamped = 0, changed = 0;
    fmt_stats st = {0};
    // Chunks over the threads: a stochastic draw is keyed by the element's index (o.offset), and
    // counts and amax do not depend on the order they are gathered in, so the bits are the same
    // on any number of threads.
#pragma omp parallel if (n > UPD_CHUNK) reduction(+ : swamped, changed)
    {
        fmt_stats local = {0};
#pragma omp for schedule(static)
        for (size_t i0 = 0; i0 < n; i0 += UPD_CHUNK) {
            const size_t m = n - i0 < UPD_CHUNK ? n - i0 : UPD_CHUNK;
            update_chunk(c, o, p + i0, p_old + i0, kahan ? comp + i0 : NULL, m, first + i0, &local, &swamped,
                         &changed);
        }
#pragma omp critical
        stats_merge(&st, &local);
    }
    update_finish(c, n, swamped, changed, &st);
}

void ac_step_fused(ac_ctx *c, float *p, float *comp, size_t n, size_t first, float *const *states,
                   const ac_site *sites, int n_states, ac_step_fn step, void *user) {
    const bool upd = c && ac_active(c, AC_MASTER);
    const bool kahan = upd && c->pol.update == AC_UPDATE_KAHAN && comp;
    const fmt_round_opts uo = upd ? update_opts(c) : (fmt_round_opts){0};
    // A state's cast joins the pass where it rounds element by element with a scale known before
    // its data (no recipe, or delayed scaling) and no hook watches whole casts; the others (and
    // states past AC_STEP_MAX_STATES) are made after the pass, as ac_cast_inplace.
    const int np = n_states < AC_STEP_MAX_STATES ? n_states : AC_STEP_MAX_STATES;
    ac_cast_plan plan[AC_STEP_MAX_STATES];
    bool in_pass[AC_STEP_MAX_STATES] = {false};
    for (int k = 0; k < np; k++) {
        if (!c || c->hook || !ac_active(c, sites[k])) continue;
        plan_make(c, &(ac_cast_req){.site = sites[k], .layer = -1, .count = true}, n, 1, &plan[k]);
        in_pass[k] = plan[k].kind == AC_PLAN_ROUND || (plan[k].kind == AC_PLAN_QUANTIZE && plan[k].scaling.none);
    }
    uint64_t swamped = 0, changed = 0;
    fmt_stats ust = {0}, sst[AC_STEP_MAX_STATES] = {{0}};
#pragma omp parallel if (n > UPD_CHUNK) reduction(+ : swamped, changed)
    {
        fmt_stats ul = {0}, sl[AC_STEP_MAX_STATES] = {{0}};
        float old[UPD_CHUNK];
#pragma omp for schedule(static)
        for (size_t i0 = 0; i0 < n; i0 += UPD_CHUNK) {
            const size_t m = n - i0 < UPD_CHUNK ? n - i0 : UPD_CHUNK;
            if (upd) memcpy(old, p + i0, m * sizeof *old);
            step(user, i0, m);
            if (upd)
                update_chunk(c, uo, p + i0, old, kahan ? comp + i0 : NULL, m, first + i0, &ul, &swamped, &changed);
            for (int k = 0; k < np; k++) {
                if (!in_pass[k]) continue;
                fmt_round_opts o = plan[k].round;
                o.offset += i0;  // element i of the state draws counter i, as in one cast of it
                float *x = states[k] + i0;
                fmt_round_f32_scaled(&plan[k].fmt, x, x, m, plan[k].pre, plan[k].post, &o, &sl[k]);
            }
        }
#pragma omp critical
        {
            stats_merge(&ust, &ul);
            for (int k = 0; k < np; k++) stats_merge(&sst[k], &sl[k]);
        }
    }
    if (upd) update_finish(c, n, swamped, changed, &ust);
    for (int k = 0; k < n_states && c; k++) {
        if (k < np && in_pass[k]) ac_cast_plan_finish(c, &plan[k], &sst[k], 0.0f, 1.0f);
        else ac_cast_inplace(c, sites[k], -1, states[k], n, 1, true);
    }
}

void ac_hadamard16(const ac_ctx *c, float *out, const float *x, size_t rows, size_t cols) {
    float sign[16];
    const fmt_rng_key key = fmt_rng_make_key(c->seed ^ 0x68616461ULL, c->step);  // "hada"
    for (int i = 0; i < 16; i++) sign[i] = (fmt_rng_u32(key, (uint64_t)i) & 1) ? -1.0f : 1.0f;
    const size_t full = rows / 16 * 16;
    // Columns in chunks of JB: each butterfly is then a contiguous loop over the chunk, which
    // the compiler vectorises (the per-column loop it replaced was scalar, 15.7% of an nvfp4
    // step). Every element sees the same operations in the same order: the bits are unchanged.
    enum { JB = 64 };
#pragma omp parallel for schedule(static)
    for (size_t r0 = 0; r0 < full; r0 += 16)
        for (size_t j0 = 0; j0 < cols; j0 += JB) {
            const size_t nj = cols - j0 < JB ? cols - j0 : JB;
            float v[16][JB];
            for (int i = 0; i < 16; i++) {
                const float *xr = x + (r0 + (size_t)i) * cols + j0;
                for (size_t jj = 0; jj < nj; jj++) v[i][jj] = sign[i] * xr[jj];
            }
            for (int h = 1; h < 16; h *= 2)  // fast Walsh-Hadamard butterflies
                for (int i = 0; i < 16; i += 2 * h)
                    for (int k = i; k < i + h; k++)
                        for (size_t jj = 0; jj < nj; jj++) {
                            const float a = v[k][jj], b = v[k + h][jj];
                            v[k][jj] = a + b, v[k + h][jj] = a - b;
                        }
            for (int i = 0; i < 16; i++) {
                float *o = out + (r0 + (size_t)i) * cols + j0;
                for (size_t jj = 0; jj < nj; jj++) o[jj] = 0.25f * v[i][jj];
            }
        }
    if (out != x) memcpy(out + full * cols, x + full * cols, (rows - full) * cols * sizeof *out);
}

// --- telemetry as JSON

static void write_tel(FILE *f, const char *prefix, const char *name, const ac_tel *t, bool *first) {
    const double n = (double)t->n;
    char key[96];
    snprintf(key, sizeof key, "%s%s", prefix, name);
    fputs(*first ? "" : ",", f), jx_write_str(f, key);
    fprintf(f, ":{\"n\":%llu,\"overflow\":", (unsigned long long)t->n);
    jx_write_num(f, t->overflow / n, 6);
    fputs(",\"underflow\":", f), jx_write_num(f, t->underflow / n, 6);
    fputs(",\"subnormal\":", f), jx_write_num(f, t->subnormal / n, 6);
    fputs(",\"nan\":", f), jx_write_num(f, t->nan / n, 6);
    fputs(",\"amax\":", f), jx_write_num(f, t->amax, 6);
    fputs(",\"scale\":", f), jx_write_num(f, t->scale, 6);
    fputc('}', f);
    *first = false;
}

void ac_write_json(const ac_ctx *c, FILE *f) {
    if (!c || c->telemetry == AC_TEL_OFF) return;
    bool first = true;
    for (int s = 0; s < AC_NSITES; s++) {
        ac_tel sum = {0};
        for (int l = 0; l <= c->n_layers; l++) {
            const ac_tel *t = &c->tel[slot_index(c, s, l == c->n_layers ? -1 : l)];
            sum.n += t->n, sum.overflow += t->overflow, sum.underflow += t->underflow;
            sum.subnormal += t->subnormal, sum.nan += t->nan;
            if (t->amax > sum.amax) sum.amax = t->amax;
            if (t->n) sum.scale = t->scale;
        }
        if (!sum.n) continue;
        fputs(first ? ",\"sites\":{" : "", f);
        write_tel(f, "", ac_site_name(s), &sum, &first);
        if (c->telemetry == AC_TEL_LAYERS)
            for (int l = 0; l < c->n_layers; l++) {
                const ac_tel *t = &c->tel[slot_index(c, s, l)];
                if (!t->n) continue;
                char prefix[16];
                snprintf(prefix, sizeof prefix, "L%d.", l);
                write_tel(f, prefix, ac_site_name(s), t, &first);
            }
    }
    if (!first) fputc('}', f);
    if (c->upd_n) {
        fputs(",\"update\":{\"swamped\":", f), jx_write_num(f, (double)c->upd_swamped / (double)c->upd_n, 6);
        fputs(",\"changed\":", f), jx_write_num(f, (double)c->upd_changed / (double)c->upd_n, 6);
        fputc('}', f);
    }
}

void ac_write_step_line(FILE *f, const ac_step_fields *s, const ac_ctx *c) {
    fprintf(f, "{\"step\":%lld,\"loss\":", s->step);
    jx_write_num(f, s->loss, 9);
    fputs(",\"lr\":", f), jx_write_num(f, s->lr, 9);
    fputs(",\"grad_norm\":", f), jx_write_num(f, s->grad_norm, 9);
    fprintf(f, ",\"tokens_per_s\":%.1f,\"elapsed_s\":%.3f,\"loss_scale\":", s->tokens_per_s, s->elapsed_s);
    jx_write_num(f, s->loss_scale, 9);
    fprintf(f, ",\"skipped\":%d", s->skipped ? 1 : 0);
    if (!isnan(s->val_loss)) fputs(",\"val_loss\":", f), jx_write_num(f, s->val_loss, 9);
    ac_write_json(c, f);
    if (s->more) s->more(f, s->more_arg);
    fputc('}', f);
}

float *ac_amax_histories(ac_ctx *c, size_t *n) {
    bool delayed = false;
    for (int s = 0; s < AC_NSITES; s++) delayed |= c->pol.site[s].active && c->pol.site[s].delayed;
    *n = delayed ? (size_t)AC_NSITES * (size_t)(c->n_layers + 1) * hist_len(c) : 0;
    return delayed ? c->hist : NULL;
}

// --- checkpoint state

// The body of an image with `sites` sites (what follows the header): the scaler, the amax
// counts and the histories, site-major, so the first k sites are a prefix of each array.
static size_t state_body_bytes(const ac_ctx *c, size_t sites) {
    const size_t slots = sites * (size_t)(c->n_layers + 1);
    const size_t hl = hist_len(c);
    return sizeof c->scaler + slots * sizeof *c->hist_count + slots * hl * sizeof *c->hist;
}

size_t ac_state_bytes(const ac_ctx *c) { return AC_STATE_HEADER_BYTES + state_body_bytes(c, AC_NSITES); }

void ac_state_save(const ac_ctx *c, void *out) {
    const size_t slots = (size_t)AC_NSITES * (size_t)(c->n_layers + 1);
    const size_t hl = hist_len(c);
    const uint32_t head[AC_STATE_HEADER_BYTES / 4] = {AC_STATE_MAGIC, AC_STATE_VERSION, AC_NSITES,
                                                      (uint32_t)c->n_layers, (uint32_t)hl, 0};
    char *p = out;
    memcpy(p, head, sizeof head), p += sizeof head;
    memcpy(p, &c->scaler, sizeof c->scaler), p += sizeof c->scaler;
    memcpy(p, c->hist_count, slots * sizeof *c->hist_count), p += slots * sizeof *c->hist_count;
    memcpy(p, c->hist, slots * hl * sizeof *c->hist);
}

// What a cast can leave in the state, checked field by field (a checkpoint's checksum says the
// bytes are intact, not that they are sane): the loss scaler as its policy allows it, and per
// (site, layer) slot an amax count in [0, AC_STATE_MAX_COUNT] (0 for sites without delayed
// scaling), history entries that are amaxes (>= 0, not NaN; +inf when an input was infinite)
// and zero past the count. A negative count used to index the history at count % length < 0.
static int state_fail(char *msg, size_t msg_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int state_fail(char *msg, size_t msg_len, const char *fmt, ...) {
    if (msg && msg_len) {
        int k = snprintf(msg, msg_len, "autocast state: ");
        va_list ap;
        va_start(ap, fmt);
        if (k >= 0 && (size_t)k < msg_len) vsnprintf(msg + k, msg_len - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return AC_EINVAL;
}

static int check_scaler(const ac_scaler *s, const ac_scaler_cfg *k, char *msg, size_t msg_len) {
    if (!(s->scale > 0) || !isfinite(s->scale))
        return state_fail(msg, msg_len, "loss scale %g; expected a positive finite number", s->scale);
    if (s->good_steps < 0) return state_fail(msg, msg_len, "good_steps %d; expected >= 0", (int)s->good_steps);
    const int64_t cnt[3] = {s->skipped, s->grown, s->backed_off};
    const char *name[3] = {"skipped", "grown", "backed_off"};
    for (int i = 0; i < 3; i++)
        if (cnt[i] < 0 || cnt[i] > AC_STATE_MAX_COUNT)
            return state_fail(msg, msg_len, "loss scaler %s %lld; expected 0 to %lld", name[i], (long long)cnt[i],
                              (long long)AC_STATE_MAX_COUNT);
    switch (k->kind) {
    case AC_SCALE_NONE:
        if (s->scale != 1.0f) return state_fail(msg, msg_len, "loss scale %g; loss_scale none keeps 1", s->scale);
        if (s->skipped || s->grown || s->backed_off)
            return state_fail(msg, msg_len, "loss scaler skipped %lld, grown %lld, backed_off %lld; loss_scale none "
                              "never skips or changes the scale", (long long)s->skipped, (long long)s->grown,
                              (long long)s->backed_off);
        return AC_OK;
    case AC_SCALE_STATIC:
        if (s->scale != k->init)
            return state_fail(msg, msg_len, "loss scale %g; loss_scale static keeps %g", s->scale, k->init);
        if (s->grown || s->backed_off)
            return state_fail(msg, msg_len, "loss scaler grown %lld, backed_off %lld; a static scale never changes",
                              (long long)s->grown, (long long)s->backed_off);
        return AC_OK;
    case AC_SCALE_DYNAMIC:
        if (s->scale < k->min_scale)
            return state_fail(msg, msg_len, "loss scale %g; expected at least the policy's min=%g", s->scale,
                              k->min_scale);
        if (s->good_steps >= k->interval)
            return state_fail(msg, msg_len, "good_steps %d; expected below the policy's interval=%d",
                              (int)s->good_steps, k->interval);
        return AC_OK;
    }
    return state_fail(msg, msg_len, "the policy's loss scaler kind %d is unknown", (int)k->kind);
}

// Where an image's body starts and how many sites it holds: version 2 by its magic (the
// header checked against c), else version 1 (no header, AC_NSITES_V1 sites); then the size.
static int state_layout(const ac_ctx *c, const void *in, size_t n, size_t *body, size_t *sites, char *msg,
                        size_t msg_len) {
    uint32_t h[AC_STATE_HEADER_BYTES / 4] = {0};
    if (n >= sizeof h) memcpy(h, in, sizeof h);
    const size_t hl = hist_len(c);
    if (h[0] != AC_STATE_MAGIC) {
        *body = 0, *sites = AC_NSITES_V1;
        const size_t want = state_body_bytes(c, AC_NSITES_V1);
        if (n != want)
            return state_fail(msg, msg_len, "%zu bytes without the version-%d header; expected a version-%d image "
                              "(%zu bytes for this policy and model) or a version-1 one of %zu bytes (%d sites, "
                              "%d layers)", n, AC_STATE_VERSION, AC_STATE_VERSION, ac_state_bytes(c), want,
                              AC_NSITES_V1, c->n_layers);
        return AC_OK;
    }
    if (h[1] != AC_STATE_VERSION)
        return state_fail(msg, msg_len, "header version %u; expected %d (version 1 has no header; a later version "
                          "is from a newer fplab)", h[1], AC_STATE_VERSION);
    if (h[2] < 1 || h[2] > AC_NSITES)
        return state_fail(msg, msg_len, "%u cast sites; this build knows %d (%s)", h[2], AC_NSITES,
                          h[2] ? "a checkpoint from a newer fplab, whose sites this one cannot apply" : "expected 1 or more");
    if (h[3] != (uint32_t)c->n_layers || h[4] != hl || h[5] != 0)
        return state_fail(msg, msg_len, "header of %u layers, amax_history %u, reserved %u; this policy and model "
                          "have %d layers and amax_history %zu (reserved 0)", h[3], h[4], h[5], c->n_layers, hl);
    *body = AC_STATE_HEADER_BYTES, *sites = h[2];
    const size_t want = AC_STATE_HEADER_BYTES + state_body_bytes(c, *sites);
    if (n != want)
        return state_fail(msg, msg_len, "%zu bytes; its header (%zu sites, %d layers) needs %zu", n, *sites,
                          c->n_layers, want);
    return AC_OK;
}

int ac_state_check(const ac_ctx *c, const void *in, size_t n, char *msg, size_t msg_len) {
    size_t body, sites;
    int st = state_layout(c, in, n, &body, &sites, msg, msg_len);
    if (st != AC_OK) return st;
    const size_t L1 = (size_t)(c->n_layers + 1), slots = sites * L1;
    const size_t hl = hist_len(c);
    const char *p = (const char *)in + body;
    ac_scaler s;
    memcpy(&s, p, sizeof s);
    st = check_scaler(&s, &c->pol.scaler, msg, msg_len);
    if (st != AC_OK) return st;
    const char *counts = p + sizeof s, *hist = counts + slots * sizeof(int64_t);
    for (size_t k = 0; k < slots; k++) {
        const ac_site site = (ac_site)(k / L1);
        const int layer = k % L1 == (size_t)c->n_layers ? -1 : (int)(k % L1);
        const bool delayed = c->pol.site[site].active && c->pol.site[site].delayed;
        int64_t cnt;
        memcpy(&cnt, counts + k * sizeof cnt, sizeof cnt);
        if (cnt < 0 || cnt > AC_STATE_MAX_COUNT || (!delayed && cnt != 0))
            return state_fail(msg, msg_len, "amax-history count %lld of site %s (layer %d); expected %s", (long long)cnt,
                              ac_site_name(site), layer, delayed ? "0 to 2^53" : "0 (the site has no delayed scaling)");
        const size_t used = (size_t)cnt < hl ? (size_t)cnt : hl;
        for (size_t i = 0; i < hl; i++) {
            float a;
            memcpy(&a, hist + (k * hl + i) * sizeof a, sizeof a);
            if (i < used ? !(a >= 0) : a != 0)
                return state_fail(msg, msg_len, "amax history of site %s (layer %d), entry %zu of %lld pushed: %g; "
                                  "expected %s", ac_site_name(site), layer, i, (long long)cnt, a,
                                  i < used ? "an amax (>= 0)" : "0 (never pushed)");
        }
    }
    return AC_OK;
}

int ac_state_load(ac_ctx *c, const void *in, size_t n) {
    if (ac_state_check(c, in, n, NULL, 0) != AC_OK) return AC_EINVAL;
    size_t body, sites;
    state_layout(c, in, n, &body, &sites, NULL, 0);
    const size_t L1 = (size_t)(c->n_layers + 1), have = sites * L1, all = (size_t)AC_NSITES * L1;
    const size_t hl = hist_len(c);
    const char *p = (const char *)in + body;
    memcpy(&c->scaler, p, sizeof c->scaler), p += sizeof c->scaler;
    // The image's sites are a prefix of this build's; the rest start as a fresh run's do.
    memset(c->hist_count, 0, all * sizeof *c->hist_count);
    memset(c->hist, 0, all * hl * sizeof *c->hist);
    memcpy(c->hist_count, p, have * sizeof *c->hist_count), p += have * sizeof *c->hist_count;
    memcpy(c->hist, p, have * hl * sizeof *c->hist);
    return AC_OK;
}
