// dist_wire.c: rounding what crosses the wire and summing over the ranks in a fixed order (see
// dist_wire.h). The transfers are dist.h's; every addition is here.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/codec.h"
#include "trainer/dist_wire.h"
#include "util/fileio.h"

// --- the wire format

static bool narrow(const fmt_t *f) { return f->emax < 127 || f->emin > -126; }

int dist_wire_parse(dist_wire *w, const char *opt, const char *spec, char *msg, size_t msg_len) {
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
        snprintf(msg, msg_len, "%s '%s': expected FORMAT[:RECIPE][:sr], e.g. bf16, fp16:tensor, e4m3:tensor, "
                 "e5m2:block:128:fp32, mxfp8, mxfp4, nvfp4, e3m0:finite:tensor", opt, spec);
        return DIST_EINVAL;
    }
    if (!recipe) w->sc.none = true;
    if (!w->fmt.is_signed || !w->fmt.has_zero) {  // e8m0, unsigned formats: refused before step 1
        snprintf(msg, msg_len, "%s '%s': %s has %s, which gradients need; expected a signed format with zero "
                 "(e.g. bf16, e4m3:tensor, mxfp8)", opt, spec, w->fmt.name,
                 !w->fmt.is_signed && !w->fmt.has_zero ? "no sign and no zero" : !w->fmt.is_signed ? "no sign" : "no zero");
        return DIST_EINVAL;
    }
    if (w->sc.none && narrow(&w->fmt)) {
        snprintf(msg, msg_len, "%s '%s': %s has a narrower range than bfloat16 and needs a scaling recipe "
                 "(e.g. %s:tensor, %s:mx): unscaled gradients would underflow or overflow", opt, spec, w->fmt.name,
                 w->fmt.name, w->fmt.name);
        return DIST_EINVAL;
    }
    if (w->fmt.bits > 32 || fmt_validate_round_opts(&w->fmt, &w->ro, NULL, 0) != FMT_OK) {
        snprintf(msg, msg_len, "%s '%s': the wire format must be at most 32 bits wide", opt, spec);
        return DIST_EINVAL;
    }
    const fmt_round_opts d = fmt_scaling_default_opts(&w->sc);
    w->ro.overflow = d.overflow;
    w->active = !(w->fmt.bits == 32 && w->fmt.ebits == 8 && w->sc.none && w->ro.mode == FMT_RNE);
    return DIST_OK;
}

// Tiles, and so scales, of one piece: a (1, len) row under the recipe.
static size_t piece_tiles(const dist_wire *w, size_t len) { return w->sc.none ? 0 : fmt_scale_count(&w->sc, 1, len); }

size_t dist_wire_bytes(const dist_wire *w, size_t len) {
    if (!w->active) return 4 * len;
    size_t b = fmt_packed_bytes(&w->fmt, len);
    if (!w->sc.none) b += fmt_packed_bytes(&w->sc.scale_fmt, piece_tiles(w, len)) + (w->sc.tensor_scale ? 4 : 0);
    return b;
}

// The end of the piece that starts at element a: the next tensor boundary, or hi.
static size_t piece_end(const size_t *seg, int nseg, size_t a, size_t hi) {
    for (int s = 1; s <= nseg; s++)
        if (seg[s] > a) return seg[s] < hi ? seg[s] : hi;
    return hi;
}

size_t dist_wire_span_bytes(const dist_crossing *cx, size_t lo, size_t hi) {
    size_t bytes = 0;
    for (size_t a = lo, b; a < hi; a = b)
        b = piece_end(cx->seg, cx->nseg, a, hi), bytes += dist_wire_bytes(cx->w, b - a);
    return bytes;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "fplab: out of memory for a %zu-byte communication buffer\n", n);
        exit(1);
    }
    return p;
}

// One piece: bytes and the decoded values out (may equal in).
static void encode_piece(const dist_wire *w, uint8_t *bytes, float *out, const float *in, size_t len,
                         const fmt_round_opts *ro, fmt_stats *st) {
    const fmt_round_opts exact = {0};  // the values are the format's already: codes are exact
    const size_t nt = piece_tiles(w, len);
    void *codes = xmalloc(len * fmt_code_bytes(&w->fmt) + nt * 4);
    if (w->sc.none) {
        fmt_encode_f32(&w->fmt, codes, in, len, ro, st);
        fmt_pack(&w->fmt, bytes, codes, len);
        fmt_decode_f32(&w->fmt, out, codes, len);
        free(codes);
        return;
    }
    float *q = xmalloc((len + nt) * sizeof *q), *sc = q + len;
    uint32_t abits = 0;
    if (w->sc.tensor_scale)
        for (size_t i = 0; i < len; i++) {
            uint32_t u;
            memcpy(&u, in + i, sizeof u);
            u &= 0x7fffffffu;
            abits = u > abits ? u : abits;
        }
    fmt_quant_info info = {.elems = q, .scales = sc};
    fmt_quantize_f32(&w->fmt, &w->sc, out, in, 1, len, ro, st, &info);
    uint8_t *p = bytes;
    if (w->sc.tensor_scale) {
        float A;  // the piece's largest |x| (NaN when it holds one), as fmt_quantize_f32 takes it
        memcpy(&A, &abits, sizeof A);
        const float s_enc = fmt_scaling_tensor_enc(&w->fmt, &w->sc, A);
        memcpy(p, &s_enc, 4), p += 4;
    }
    fmt_encode_f32(&w->sc.scale_fmt, codes, sc, nt, &exact, NULL);
    fmt_pack(&w->sc.scale_fmt, p, codes, nt), p += fmt_packed_bytes(&w->sc.scale_fmt, nt);
    fmt_encode_f32(&w->fmt, codes, q, len, &exact, NULL);
    fmt_pack(&w->fmt, p, codes, len);
    free(q), free(codes);
    dist_wire_decode(&(dist_crossing){.w = w, .seg = (const size_t[2]){0, len}, .nseg = 1}, out, bytes, 0, len);
}

void dist_wire_encode(const dist_crossing *cx, uint8_t *bytes, float *out, const float *in, size_t lo, size_t hi,
                      dist_comm_tel *t) {
    const dist_wire *w = cx->w;
    if (!w->active) {
        memcpy(bytes, in, (hi - lo) * sizeof *in);
        if (out != in) memcpy(out, in, (hi - lo) * sizeof *out);
        return;
    }
    fmt_round_opts ro = w->ro;
    ro.seed = cx->seed, ro.stream = cx->stream;
    fmt_stats st = {0};
    for (size_t a = lo, b; a < hi; a = b) {
        b = piece_end(cx->seg, cx->nseg, a, hi), ro.offset = a;
        encode_piece(w, bytes, out + (a - lo), in + (a - lo), b - a, &ro, &st);
        bytes += dist_wire_bytes(w, b - a);
    }
    if (t) t->n += st.n, t->overflow += st.overflow, t->underflow += st.underflow, t->nan += st.nan_in;
}

void dist_wire_decode(const dist_crossing *cx, float *out, const uint8_t *bytes, size_t lo, size_t hi) {
    const dist_wire *w = cx->w;
    if (!w->active) {
        memcpy(out, bytes, (hi - lo) * sizeof *out);
        return;
    }
    for (size_t a = lo, b; a < hi; a = b) {
        b = piece_end(cx->seg, cx->nseg, a, hi);
        const size_t len = b - a, nt = piece_tiles(w, len);
        float *o = out + (a - lo);
        const uint8_t *p = bytes;
        bytes += dist_wire_bytes(w, len);
        void *codes = xmalloc(len * fmt_code_bytes(&w->fmt) + nt * 4);
        if (w->sc.none) {
            fmt_unpack(&w->fmt, codes, p, len);
            fmt_decode_f32(&w->fmt, o, codes, len);
            free(codes);
            continue;
        }
        float s_enc = 1.0f, *deq = xmalloc(nt * sizeof *deq);
        if (w->sc.tensor_scale) memcpy(&s_enc, p, 4), p += 4;
        fmt_unpack(&w->sc.scale_fmt, codes, p, nt), p += fmt_packed_bytes(&w->sc.scale_fmt, nt);
        fmt_decode_f32(&w->sc.scale_fmt, deq, codes, nt);
        if (w->sc.tensor_scale)  // sf / s_enc; a zero or NaN tile scale stays itself
            for (size_t k = 0; k < nt; k++) deq[k] = deq[k] == 0.0f || isnan(deq[k]) ? deq[k] : deq[k] / s_enc;
        fmt_unpack(&w->fmt, codes, p, len);
        fmt_decode_f32(&w->fmt, o, codes, len);
        const size_t tc = w->sc.tile_cols > 0 ? (size_t)w->sc.tile_cols : len;
        for (size_t t = 0, i = 0; t < nt; t++)  // tile by tile: no division per element
            for (const size_t e = i + tc < len ? i + tc : len; i < e; i++) o[i] *= deq[t];
        free(deq), free(codes);
    }
}

void dist_wire_round(const dist_crossing *cx, float *out, const float *in, size_t lo, size_t hi, dist_comm_tel *t) {
    if (!cx->w->active) {
        if (out != in) memcpy(out, in, (hi - lo) * sizeof *out);
        return;
    }
    uint8_t *bytes = xmalloc(dist_wire_span_bytes(cx, lo, hi));
    dist_wire_encode(cx, bytes, out, in, lo, hi, t);
    free(bytes);
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

void dist_ring_add(const dist_crossing *cx, uint8_t *bytes, float *acc, const float *in, const float *own, size_t lo,
                   size_t hi, dist_comm_tel *t) {
    uint64_t swamped = 0;
    const size_t len = hi - lo;
    float *tmp = acc == in ? xmalloc(len * sizeof *tmp) : NULL;
    if (tmp) memcpy(tmp, in, len * sizeof *tmp), in = tmp;
    for (size_t i = 0; i < len; i++) acc[i] = in[i] + own[i];
    if (bytes) dist_wire_encode(cx, bytes, acc, acc, lo, hi, t);
    else dist_wire_round(cx, acc, acc, lo, hi, t);
    for (size_t i = 0; i < len; i++) swamped += own[i] != 0.0f && acc[i] == in[i];
    if (t) t->swamped += swamped;
    free(tmp);
}

// --- the reducer

void dist_reducer_free(dist_reducer *d) {
    free(d->seg), free(d->off), free(d->boff), free(d->goff), free(d->work), free(d->recv), free(d->resid);
    free(d->wbuf), free(d->rbuf), free(d->hbuf), free(d->gbuf);
    memset(d, 0, sizeof *d);
}

static void byte_offsets(size_t *boff, const dist_crossing *cx, const size_t *off, int size) {
    boff[0] = 0;
    for (int c = 0; c < size; c++) boff[c + 1] = boff[c] + dist_wire_span_bytes(cx, off[c], off[c + 1]);
}

// The crossing of the reducer's buffer in format f (d->wire or d->gather) with the draws of
// stream.
static dist_crossing crossing(const dist_reducer *d, const dist_wire *f, uint64_t seed, uint64_t stream) {
    return (dist_crossing){.w = f, .seg = d->seg, .nseg = d->nseg, .seed = seed, .stream = stream};
}

int dist_reducer_init(dist_reducer *d, const dist_world *w, const dist_reducer_opts *o, char *msg, size_t msg_len) {
    memset(d, 0, sizeof *d);
    const size_t n = o->n, *seg = o->seg;
    const int nseg = o->nseg;
    const bool wire_accum = o->wire_accum;
    d->wire = *o->wire, d->gather = o->gather ? *o->gather : *o->wire, d->wire_accum = wire_accum;
    d->ef = o->ef && o->wire->active, d->n = n, d->nseg = nseg;
    const size_t N = (size_t)w->size;
    d->seg = malloc((size_t)(nseg + 1) * sizeof *d->seg);
    d->off = malloc((N + 1) * sizeof *d->off);
    d->boff = malloc((N + 1) * sizeof *d->boff);
    d->goff = malloc((N + 1) * sizeof *d->goff);
    size_t big = 0, bigb = 0;
    if (d->seg && d->off && d->boff && d->goff) {
        memcpy(d->seg, seg, (size_t)(nseg + 1) * sizeof *d->seg);
        dist_chunks(d->off, n, w->size);
        byte_offsets(d->boff, &(dist_crossing){.w = &d->wire, .seg = seg, .nseg = nseg}, d->off, w->size);
        byte_offsets(d->goff, &(dist_crossing){.w = &d->gather, .seg = seg, .nseg = nseg}, d->off, w->size);
        for (size_t c = 0; c < N; c++) {
            big = d->off[c + 1] - d->off[c] > big ? d->off[c + 1] - d->off[c] : big;
            bigb = d->boff[c + 1] - d->boff[c] > bigb ? d->boff[c + 1] - d->boff[c] : bigb;
        }
    }
    const size_t rows = wire_accum ? 1 : N;
    d->work = malloc((n ? n : 1) * sizeof *d->work);
    d->recv = malloc((rows * big + 1) * sizeof *d->recv);
    d->wbuf = d->boff ? malloc(d->boff[N] + 1) : NULL;
    d->rbuf = malloc(rows * bigb + 1);
    d->hbuf = malloc(bigb + 1);
    d->gbuf = d->goff ? malloc(d->goff[N] + 1) : NULL;
    d->resid = d->ef ? calloc(n ? n : 1, sizeof *d->resid) : NULL;
    const char *dump = getenv("FPLAB_DIST_DUMP");
    if (dump) snprintf(d->dump, sizeof d->dump, "%s.r%d", dump, w->rank);
    if (!d->seg || !d->off || !d->boff || !d->goff || !d->work || !d->recv || !d->wbuf || !d->rbuf || !d->hbuf ||
        !d->gbuf || (d->ef && !d->resid)) {
        dist_reducer_free(d);
        snprintf(msg, msg_len, "out of memory for the communication buffers (%zu floats)", n);
        return DIST_EINVAL;
    }
    return DIST_OK;
}

// SR streams of the reduction's roundings: the contribution, the sum (f32), its gather format
// (ring), ring hop h.
enum { STREAM_CONTRIB = 1, STREAM_SUM = 2, STREAM_GATHER = 3, STREAM_HOP = 16 };

static void dump(const dist_reducer *d, const char *ext, const float *x) {
    char path[300];
    snprintf(path, sizeof path, "%s.%s", d->dump, ext);
    char ignored[FIO_PATH_MAX + 128];  // a debugging aid: a failed dump stops nothing
    fio_write_file(path, x, d->n * sizeof *x, ignored, sizeof ignored);
}

// The ring's reduce-scatter: chunk c leaves rank c as its contribution's bytes and, at each hop,
// rank r adds its own Q(x_r[c]) to what came from r - 1 and rounds the partial sum (the bytes it
// passes on). After N - 1 hops this rank holds the finished chunk (me + 1) mod N; the gather
// expects chunk me here, so the finished chunks move one rank on (not counted: a ring
// all-gather starts from where the chunks finished). Leaves chunk me's sum in x and returns its
// bytes in the wire format.
static const uint8_t *ring_reduce(dist_reducer *d, const dist_world *w, float *x, uint64_t seed, uint64_t key) {
    const int N = w->size, me = w->rank, next = (me + 1) % N, prev = (me + N - 1) % N;
    const size_t *off = d->off, *boff = d->boff;
    const float *q = d->work;
    memcpy(x + off[me], q + off[me], (off[me + 1] - off[me]) * sizeof *x);
    const uint8_t *send = d->wbuf + boff[me];
    for (int h = 0; h < N - 1; h++) {
        const int send_c = (me - h + N) % N, recv_c = (me - 1 - h + 2 * N) % N;
        d->tel.bytes += (double)(boff[send_c + 1] - boff[send_c]);
        dist_sendrecv_bytes(w, send, boff[send_c + 1] - boff[send_c], next, d->rbuf, boff[recv_c + 1] - boff[recv_c],
                            prev);
        const size_t lo = off[recv_c], hi = off[recv_c + 1];
        const dist_crossing hop = crossing(d, &d->wire, seed, key | (uint64_t)(STREAM_HOP + h));
        dist_wire_decode(&hop, d->recv, d->rbuf, lo, hi);
        dist_ring_add(&hop, d->hbuf, x + lo, d->recv, q + lo, lo, hi, &d->tel);
        send = d->hbuf;
    }
    if (N == 1) return send;
    const int done = (me + 1) % N;
    dist_sendrecv_bytes(w, d->hbuf, boff[done + 1] - boff[done], next, d->rbuf, boff[me + 1] - boff[me], prev);
    dist_wire_decode(&(dist_crossing){.w = &d->wire, .seg = d->seg, .nseg = d->nseg}, x + off[me], d->rbuf, off[me],
                     off[me + 1]);  // decoding draws nothing: no key
    return d->rbuf;
}

void dist_allreduce_sum(dist_reducer *d, const dist_world *w, float *x, uint64_t seed, uint64_t stream) {
    if (d->dump[0]) dump(d, "in", x);
    const double t0 = fio_now();
    const int N = w->size, me = w->rank;
    const size_t *off = d->off, n = d->n, lo = off[me], hi = off[me + 1], mine = hi - lo;
    const uint64_t key = stream << 24;
    // The contribution: x (+ the residual kept from last time), rounded once into its bytes; the
    // residual is what that rounding lost.
    float *q = d->work;
    if (d->ef)
        for (size_t i = 0; i < n; i++) q[i] = x[i] + d->resid[i];
    else memcpy(q, x, n * sizeof *q);
    const dist_crossing contrib = crossing(d, &d->wire, seed, key | STREAM_CONTRIB);
    for (int c = 0; c < N; c++)  // chunk by chunk: each owner decodes its chunk's pieces alone
        dist_wire_encode(&contrib, d->wbuf + d->boff[c], q + off[c], q + off[c], off[c], off[c + 1], &d->tel);
    if (d->ef)
        for (size_t i = 0; i < n; i++) d->resid[i] = (x[i] + d->resid[i]) - q[i];
    uint8_t *mine_g = d->gbuf + d->goff[me];
    if (!d->wire_accum) {
        // all-to-all: rank c gets every rank's piece of chunk c and sums them in rank order
        const size_t rb = d->boff[me + 1] - d->boff[me];
        for (int c = 0; c < N; c++)
            if (c != me) d->tel.bytes += (double)(d->boff[c + 1] - d->boff[c]);
        dist_alltoall_bytes(w, d->rbuf, rb, d->wbuf, d->boff);
        for (int r = 0; r < N; r++) dist_wire_decode(&contrib, d->recv + (size_t)r * mine, d->rbuf + (size_t)r * rb, lo, hi);
        dist_sum_in_rank_order(x + lo, d->recv, N, mine);
        const dist_crossing sum = crossing(d, &d->gather, seed, key | STREAM_SUM);
        dist_wire_encode(&sum, mine_g, x + lo, x + lo, lo, hi, &d->tel);
    } else {
        const uint8_t *fin = ring_reduce(d, w, x, seed, key);
        const dist_crossing sum = crossing(d, &d->gather, seed, key | STREAM_GATHER);
        if (!memcmp(&d->gather, &d->wire, sizeof d->wire)) memcpy(mine_g, fin, d->goff[me + 1] - d->goff[me]);
        else dist_wire_encode(&sum, mine_g, x + lo, x + lo, lo, hi, &d->tel);
    }
    d->tel.bytes += (double)(N - 1) * (double)(d->goff[me + 1] - d->goff[me]);
    dist_allgather_bytes(w, d->gbuf, d->goff);
    const dist_crossing back = crossing(d, &d->gather, seed, key);
    for (int c = 0; c < N; c++)
        if (c != me) dist_wire_decode(&back, x + off[c], d->gbuf + d->goff[c], off[c], off[c + 1]);
    d->tel.seconds += fio_now() - t0;
    if (d->dump[0]) dump(d, "out", x), d->dump[0] = 0;
}
