// dist_wire.h: the numerics of communication. What crosses the wire is rounded to an fplab
// format with a scaling recipe (formats/round.h, formats/scale.h), and the sum over the ranks is
// done in a fixed, documented order (docs/distributed.md):
//   f32 accumulation (MS-AMP style): each rank rounds its contribution once; rank c owns chunk
//     c of the buffer, receives every rank's piece of it (all-to-all) and sums them in float32
//     in rank order, ((x_0 + x_1) + x_2) + ...; the sum is rounded to the wire format once more
//     and all-gathered.
//   wire accumulation (NCCL's ring): chunk c starts at rank c as Q(x_c[c]) and travels the ring
//     c -> c+1 -> ... -> c-1; each rank adds its own Q(x_r[c]) in float32 and rounds the partial
//     sum to the wire format before passing it on; the last rank's sum is all-gathered as is.
// Q rounds each piece of a chunk that lies inside one parameter tensor as a (1, len) row: a
// per-tensor recipe has one scale per (piece), MX blocks start at the piece's first element.
// Error feedback keeps x - Q(x) of the rank's contribution and adds it to the next one.
// Transport: packed codes. A piece travels as [s_enc, fp32, two-level recipes only][the tile
// scales' codes, packed][the element codes, packed]; float32 (the plain path) as its bytes. The
// sender computes with what the receivers decode, so every rank holds the same values.
// Directions: the contributions (and the ring's partial sums) travel in the wire format, the
// reduced sums that are gathered back in the gather format (the wire's unless given).
// Constraints: fixed order: the result depends on neither MPI's algorithms nor the thread
// count, and is the same on every rank.
#ifndef FPLAB_DIST_WIRE_H
#define FPLAB_DIST_WIRE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/scale.h"
#include "trainer/dist.h"

typedef struct {
    bool active;         // false: float32 on the wire, nothing rounded (the plain path, bitwise)
    fmt_t fmt;
    fmt_scaling sc;
    fmt_round_opts ro;   // element rounding (rne, or sr with ":sr"); saturating with a recipe
    char name[64];       // as given
} dist_wire;

// Parses FORMAT[:RECIPE][:sr]: any fplab format (fmt_from_name, custom eXmY[:flags] included)
// and any fmt_scaling spelling (tensor, row, mx, nvfp4, block:K:FMT, ...); also mxfp8 (e4m3:mx),
// mxfp6 (e2m3:mx), mxfp4 (e2m1:mx), nvfp4 (e2m1:nvfp4). "fp32" (or "") is the plain path. A
// format whose range is narrower than bfloat16's (fp16, fp8, fp6, fp4) without a recipe is
// refused: gradients would underflow. DIST_EINVAL with a message naming the option opt (e.g.
// "--comm") and the spec.
int dist_wire_parse(dist_wire *w, const char *opt, const char *spec, char *msg, size_t msg_len);

// What one step's communication did (summed over its calls; reset by the caller).
typedef struct {
    uint64_t n;          // values rounded to the wire format
    uint64_t overflow, underflow, nan;  // as fmt_stats counts them
    uint64_t swamped;    // wire accumulation: a nonzero addend that left the partial sum unchanged
    double bytes;        // bytes this rank sent (packed size)
    double seconds;      // wall time in the reduction (rounding, sums and transfers)
} dist_comm_tel;

// Bytes of one piece of len values on the wire: codes, scales, the tensor scale.
size_t dist_wire_bytes(const dist_wire *w, size_t len);

// How a buffer crosses the wire: its format, the pieces it is cut into (the parameter tensors:
// each piece is rounded and packed as one (1, len) row with its own scales) and the key of its
// stochastic rounding draws. The functions below take elements lo..hi of the buffer.
typedef struct {
    const dist_wire *w;
    const size_t *seg;      // piece boundaries seg[0..nseg]: ascending, seg[0] = 0, seg[nseg] >= hi
    int nseg;
    uint64_t seed, stream;  // the draws' key, with the element's index in the whole buffer
                            // (encoding only)
} dist_crossing;

// Bytes of elements lo..hi: the sum of dist_wire_bytes over the pieces that overlap [lo, hi).
size_t dist_wire_span_bytes(const dist_crossing *cx, size_t lo, size_t hi);
// Q of in[0..hi-lo) (elements lo..hi of the buffer), piece by piece: the packed bytes
// (dist_wire_span_bytes of them) into bytes, and the values a receiver decodes from them into out
// (out may equal in). Counts into t (n and the stats; not bytes; NULL: not counted).
void dist_wire_encode(const dist_crossing *cx, uint8_t *bytes, float *out, const float *in, size_t lo, size_t hi,
                      dist_comm_tel *t);
// out[0..hi-lo) = the values of bytes as dist_wire_encode wrote them for elements lo..hi.
void dist_wire_decode(const dist_crossing *cx, float *out, const uint8_t *bytes, size_t lo, size_t hi);
// out = decode(encode(in)): the values that cross the wire (out may equal in).
void dist_wire_round(const dist_crossing *cx, float *out, const float *in, size_t lo, size_t hi, dist_comm_tel *t);

// --- the reducer: a buffer of n floats summed over the ranks in the fixed order above
typedef struct {
    dist_wire wire;      // contributions and the ring's partial sums
    dist_wire gather;    // the reduced sums, gathered back
    bool wire_accum;     // partial sums rounded to the wire format (ring); else f32 (all-to-all)
    bool ef;             // error feedback on the rank's contribution
    size_t n;
    size_t *seg;         // nseg + 1 tensor boundaries
    int nseg;
    size_t *off;         // size + 1 chunk boundaries: chunk c = [off[c], off[c+1])
    size_t *boff, *goff; // size + 1 byte offsets of the chunks on the wire, in the gather format
    float *work;         // n: the rounded contribution
    float *recv;         // f32: size * largest chunk (decoded); ring: largest chunk
    uint8_t *wbuf;       // the contribution's bytes (boff[size])
    uint8_t *rbuf;       // received bytes: f32: size * largest chunk; ring: one chunk
    uint8_t *hbuf;       // ring: the partial sum this rank passes on
    uint8_t *gbuf;       // the gathered sums' bytes (goff[size])
    float *resid;        // n, error feedback (zero at the start; part of the checkpoint)
    dist_comm_tel tel;
    char dump[256];      // FPLAB_DIST_DUMP=PREFIX (tests): the first reduction's input and output
                         // go to PREFIX.rR.in and PREFIX.rR.out (float32), then "" again
} dist_reducer;

// What a reducer sums, and how.
typedef struct {
    const dist_wire *wire;    // contributions and the ring's partial sums
    const dist_wire *gather;  // the reduced sums, gathered back (NULL: wire's)
    bool wire_accum;          // partial sums rounded to the wire format (ring); else f32 (all-to-all)
    bool ef;                  // error feedback on the rank's contribution
    size_t n;                 // floats in the buffer
    const size_t *seg;        // nseg + 1 tensor boundaries (dist_crossing's pieces; copied)
    int nseg;
} dist_reducer_opts;

int dist_reducer_init(dist_reducer *d, const dist_world *w, const dist_reducer_opts *o, char *msg, size_t msg_len);
void dist_reducer_free(dist_reducer *d);
// x = the sum over the ranks of every rank's x (in place, the same on every rank). seed and
// stream key stochastic rounding (the caller passes the step). One process: x is unchanged
// when both formats are float32; otherwise rounded as a contribution and as a sum would be.
void dist_allreduce_sum(dist_reducer *d, const dist_world *w, float *x, uint64_t seed, uint64_t stream);

// The fixed-order pieces, exposed for tests/test_dist.c:
// out[0..len) = ((recv[0] + recv[1]) + ...) + recv[nranks-1], recv holding nranks rows of len.
void dist_sum_in_rank_order(float *out, const float *recv, int nranks, size_t len);
// The ring hop for elements lo..hi: acc[0..hi-lo) = Q(in[i] + own[i]) (float32 sum, then
// dist_wire_encode: the bytes to pass on into bytes, NULL: not kept), counting swamped additions
// (own nonzero, result equal to in); acc may equal in.
void dist_ring_add(const dist_crossing *cx, uint8_t *bytes, float *acc, const float *in, const float *own, size_t lo,
                   size_t hi, dist_comm_tel *t);
// Chunk boundaries of n values over `size` ranks: off[c] = floor(c * n / size).
void dist_chunks(size_t *off, size_t n, int size);

#endif
