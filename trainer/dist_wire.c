// dist_wire.c: rounding what crosses the wire and summing over the ranks in a fixed order (see
// dist_wire.h). The transfers are dist.h's; every addition is here.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/codec.h"
#include "trainer/dist_wire.h"
#include "trainer/fileio.h"

// --- the wire format

static bool narrow(const fmt_t *f) { return f->emax < 127 || f->emin > -126; }

int dist_wire_parse(dist_wire *w, const char *spec, char *msg, size_t msg_len) {
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", spec && spec[0] ? spec : "fp32");
    if (!spec || !spec[0] || !strcmp(spec, "fp32") || !strcmp(spec, "f32")) return DIST_OK;
    static const char *const alias[][2] = {
        {"mxfp8", "e4m3:mx"}, {"mxfp6", "e2m3:mx"}, {"mxfp4", "e2m1:mx"}, {"nvfp4", "e2m1:nvfp4"}};
    char s[128];
    snprintf(s, sizeof s, "%s", spec);
    for (size_t i = 0; i < sizeof alias / sizeof *alias; i++) {
        const size_t k = strlen(alias[i][0]);
        if (!strncmp(spec, alias[i][0], k) && (spec[k] == 0 || spec[k] == ':'))
            snprintf(s, sizeof s, "%s%s", alias[i][1], spec + k);
    }
    size_t len = strlen(s);
    if (len > 3 && !strcmp(s + len - 3, ":sr")) w->ro.mode = FMT_SR, s[len -= 3] = 0;
    // FORMAT and RECIPE may both hold ':' (e3m0:finite, block:32:e8m0): the first split at which
    // both parse wins.
    bool ok = false, recipe = false;
    for (size_t i = 0; i <= len && !ok; i++) {
        if (s[i] != ':' && s[i] != 0) continue;
        char f[128];
        snprintf(f, sizeof f, "%.*s", (int)i, s);
        if (fmt_from_name(&w->fmt, f) != FMT_OK) continue;
        recipe = s[i] == ':';
        ok = !recipe ? true : fmt_scaling_from_name(&w->sc, s + i + 1, NULL, 0) == FMT_OK;
    }
    if (!ok) {
        snprintf(msg, msg_len, "--comm '%s': expected FORMAT[:RECIPE][:sr], e.g. bf16, fp16:tensor, e4m3:tensor, "
                 "e5m2:block:128:fp32, mxfp8, mxfp4, nvfp4, e3m0:finite:tensor", spec);
        return DIST_EINVAL;
    }
    if (!recipe) w->sc.none = true;
    if (w->sc.none && narrow(&w->fmt)) {
        snprintf(msg, msg_len, "--comm '%s': %s has a narrower range than bfloat16 and needs a scaling recipe "
                 "(e.g. %s:tensor, %s:mx): unscaled gradients would underflow or overflow", spec, w->fmt.name,
                 w->fmt.name, w->fmt.name);
        return DIST_EINVAL;
    }
    if (w->fmt.bits > 32 || fmt_validate_round_opts(&w->fmt, &w->ro, NULL, 0) != FMT_OK) {
        snprintf(msg, msg_len, "--comm '%s': the wire format must be at most 32 bits wide", spec);
        return DIST_EINVAL;
    }
    const fmt_round_opts d = fmt_scaling_default_opts(&w->sc);
    w->ro.overflow = d.overflow;
    w->active = !(w->fmt.bits == 32 && w->fmt.ebits == 8 && w->sc.none && w->ro.mode == FMT_RNE);
    return DIST_OK;
}

double dist_wire_bytes(const dist_wire *w, size_t len) {
    if (!w->active) return 4.0 * (double)len;
    double b = (double)fmt_packed_bytes(&w->fmt, len);
    if (!w->sc.none) {
        b += (double)fmt_scale_count(&w->sc, 1, len) * (double)w->sc.scale_fmt.bits / 8.0;
        if (w->sc.tensor_scale) b += 4.0;
    }
    return b;
}

void dist_wire_round(const dist_wire *w, float *out, const float *in, size_t lo, size_t hi, const size_t *seg,
                     int nseg, uint64_t seed, uint64_t stream, dist_comm_tel *t) {
    if (!w->active) {
        if (out != in) memcpy(out, in, (hi - lo) * sizeof *out);
        return;
    }
    fmt_round_opts ro = w->ro;
    ro.seed = seed, ro.stream = stream;
    fmt_stats st = {0};
    size_t a = lo;
    for (int s = 0; s < nseg && a < hi; s++) {
        if (seg[s + 1] <= a) continue;
        const size_t b = seg[s + 1] < hi ? seg[s + 1] : hi;
        ro.offset = a;
        fmt_quantize_f32(&w->fmt, &w->sc, out + (a - lo), in + (a - lo), 1, b - a, &ro, &st, NULL);
        a = b;
    }
    if (t) t->n += st.n, t->overflow += st.overflow, t->underflow += st.underflow, t->nan += st.nan_in;
}

// --- the fixed-order sums

void dist_chunks(size_t *off, size_t n, int size) {
    for (int c = 0; c <= size; c++) off[c] = (size_t)((unsigned __int128)n * (unsigned)c / (unsigned)size);
}

void dist_sum_in_rank_order(float *out, const float *recv, int nranks, size_t len) {
    memcpy(out, recv, len * sizeof *out);
    for (int r = 1; r < nranks; r++) {
        const float *x = recv + (size_t)r * len;
        for (size_t i = 0; i < len; i++) out[i] += x[i];
    }
}

void dist_ring_add(const dist_wire *w, float *acc, const float *in, const float *own, size_t lo, size_t hi,
                   const size_t *seg, int nseg, uint64_t seed, uint64_t stream, dist_comm_tel *t) {
    uint64_t swamped = 0;
    const size_t len = hi - lo;
    float *tmp = acc == in ? malloc(len * sizeof *tmp) : NULL;
    if (tmp) memcpy(tmp, in, len * sizeof *tmp), in = tmp;
    for (size_t i = 0; i < len; i++) acc[i] = in[i] + own[i];
    dist_wire_round(w, acc, acc, lo, hi, seg, nseg, seed, stream, t);
    for (size_t i = 0; i < len; i++) swamped += own[i] != 0.0f && acc[i] == in[i];
    if (t) t->swamped += swamped;
    free(tmp);
}

// --- the reducer

void dist_reducer_free(dist_reducer *d) {
    free(d->seg), free(d->off), free(d->work), free(d->recv), free(d->resid);
    memset(d, 0, sizeof *d);
}

int dist_reducer_init(dist_reducer *d, const dist_world *w, const dist_wire *wire, bool wire_accum, bool ef,
                      size_t n, const size_t *seg, int nseg, char *msg, size_t msg_len) {
    memset(d, 0, sizeof *d);
    d->wire = *wire, d->wire_accum = wire_accum, d->ef = ef && wire->active, d->n = n, d->nseg = nseg;
    d->seg = malloc((size_t)(nseg + 1) * sizeof *d->seg);
    d->off = malloc((size_t)(w->size + 1) * sizeof *d->off);
    if (d->seg) memcpy(d->seg, seg, (size_t)(nseg + 1) * sizeof *d->seg);
    if (d->off) dist_chunks(d->off, n, w->size);
    size_t big = 0;
    for (int c = 0; d->off && c < w->size; c++) big = d->off[c + 1] - d->off[c] > big ? d->off[c + 1] - d->off[c] : big;
    d->work = malloc((n ? n : 1) * sizeof *d->work);
    d->recv = malloc(((wire_accum ? 1 : (size_t)w->size) * big + 1) * sizeof *d->recv);
    d->resid = d->ef ? calloc(n ? n : 1, sizeof *d->resid) : NULL;
    const char *dump = getenv("FPLAB_DIST_DUMP");
    if (dump) snprintf(d->dump, sizeof d->dump, "%s.r%d", dump, w->rank);
    if (!d->seg || !d->off || !d->work || !d->recv || (d->ef && !d->resid)) {
        dist_reducer_free(d);
        snprintf(msg, msg_len, "out of memory for the communication buffers (%zu floats)", n);
        return DIST_EINVAL;
    }
    return DIST_OK;
}

// SR streams of the reduction's roundings: the contribution, the sum (f32), ring hop h.
enum { STREAM_CONTRIB = 1, STREAM_SUM = 2, STREAM_HOP = 16 };

static void dump(const dist_reducer *d, const char *ext, const float *x) {
    char path[300];
    snprintf(path, sizeof path, "%s.%s", d->dump, ext);
    FILE *f = fopen(path, "wb");
    if (f) fwrite(x, sizeof *x, d->n, f), fclose(f);
}

void dist_allreduce_sum(dist_reducer *d, const dist_world *w, float *x, uint64_t seed, uint64_t stream) {
    if (d->dump[0]) dump(d, "in", x);
    const double t0 = fio_now();
    const int N = w->size, me = w->rank;
    const size_t *off = d->off, n = d->n;
    const uint64_t key = stream << 24;
    // The contribution: x (+ the residual kept from last time), rounded once; the residual is
    // what that rounding lost.
    float *q = d->work;
    if (d->ef)
        for (size_t i = 0; i < n; i++) q[i] = x[i] + d->resid[i];
    else memcpy(q, x, n * sizeof *q);
    dist_wire_round(&d->wire, q, q, 0, n, d->seg, d->nseg, seed, key | STREAM_CONTRIB, &d->tel);
    if (d->ef)
        for (size_t i = 0; i < n; i++) d->resid[i] = (x[i] + d->resid[i]) - q[i];
    const size_t lo = off[me], hi = off[me + 1], mine = hi - lo;
    if (!d->wire_accum) {
        // all-to-all: rank c gets every rank's piece of chunk c and sums them in rank order
        for (int c = 0; c < N; c++)
            if (c != me) d->tel.bytes += dist_wire_bytes(&d->wire, off[c + 1] - off[c]);
        dist_alltoall_chunks(w, d->recv, q, off);
        dist_sum_in_rank_order(x + lo, d->recv, N, mine);
        dist_wire_round(&d->wire, x + lo, x + lo, lo, hi, d->seg, d->nseg, seed, key | STREAM_SUM, &d->tel);
    } else {
        // the ring: at hop h rank r passes chunk (r - h) mod N to r + 1 and adds its own piece
        // to chunk (r - 1 - h) mod N coming from r - 1; chunk c therefore starts at rank c and
        // ends, after N - 1 hops, at rank c - 1.
        const int next = (me + 1) % N, prev = (me + N - 1) % N;
        memcpy(x + lo, q + lo, mine * sizeof *x);
        for (int h = 0; h < N - 1; h++) {
            const int send_c = (me - h + N) % N, recv_c = (me - 1 - h + 2 * N) % N;
            d->tel.bytes += dist_wire_bytes(&d->wire, off[send_c + 1] - off[send_c]);
            dist_sendrecv(w, x + off[send_c], off[send_c + 1] - off[send_c], next, d->recv,
                          off[recv_c + 1] - off[recv_c], prev);
            dist_ring_add(&d->wire, x + off[recv_c], d->recv, q + off[recv_c], off[recv_c], off[recv_c + 1], d->seg,
                          d->nseg, seed, key | (uint64_t)(STREAM_HOP + h), &d->tel);
        }
        // this rank now holds the finished chunk (me + 1) mod N; the all-gather expects chunk me
        // at rank me, so the finished chunks first move one rank on.
        const int done = (me + 1) % N;
        if (N > 1) {  // (not counted: a ring all-gather starts from where the chunks finished)
            dist_sendrecv(w, x + off[done], off[done + 1] - off[done], next, d->recv, mine, prev);
            memcpy(x + lo, d->recv, mine * sizeof *x);
        }
    }
    for (int c = 0; c < N; c++)
        if (c != me) d->tel.bytes += dist_wire_bytes(&d->wire, mine);
    dist_allgather_chunks(w, x, off);
    d->tel.seconds += fio_now() - t0;
    if (d->dump[0]) dump(d, "out", x), d->dump[0] = 0;
}
