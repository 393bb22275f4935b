// test_dist.c: the numerics of distributed training (trainer/dist_wire.c, dist_train.c's
// one-process behaviour): wire format parsing and refusals, the fixed-order sums against
// independent loops, the ring hop, byte counts; the reduction that ran under mpirun against an
// independent emulation of the same order (tests/dist_test.sh dumps it and sets
// FPLAB_DIST_CHECK); and, without MPI, distributed options refused with a clear message.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/codec.h"
#include "formats/round.h"
#include "tests/test_util.h"
#include "trainer/dist_wire.h"
#include "trainer/train.h"

static float bf16(float x) {  // independent of dist_wire: one value through fmt_round1
    fmt_t f;
    fmt_from_name(&f, "bf16");
    const fmt_round_opts rne = {0};
    return (float)fmt_round1(&f, x, &rne);
}

Test(dist, wire_specs) {
    dist_wire w;
    char msg[256];
    const char *okay[] = {"fp32", "bf16", "fp16:tensor", "e4m3:tensor", "e5m2:block:128:fp32", "mxfp8",
                          "mxfp4", "nvfp4", "e3m0:finite:tensor", "e2m1:mx:sr", "bf16:sr"};
    for (size_t i = 0; i < sizeof okay / sizeof *okay; i++)
        cr_assert_eq(dist_wire_parse(&w, "--comm", okay[i], msg, sizeof msg), DIST_OK, "%s: %s", okay[i], msg);
    cr_assert_eq(dist_wire_parse(&w, "--comm", "fp32", msg, sizeof msg), DIST_OK);
    cr_assert(!w.active, "fp32 is the plain path");
    cr_assert_eq(dist_wire_parse(&w, "--comm", "e3m0:finite:tensor", msg, sizeof msg), DIST_OK);
    cr_assert(w.active && w.fmt.bits == 4 && w.fmt.ebits == 3 && !w.sc.none);
    const char *refused[][2] = {{"e4m3", "scaling recipe"}, {"fp16", "scaling recipe"}, {"e2m1", "scaling recipe"},
                                {"bogus", "expected FORMAT"}, {"bf16:nonsense", "expected FORMAT"},
                                {"e8m0", "no sign and no zero"}, {"e8m0:tensor", "no sign"}};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        msg[0] = 0;
        cr_assert_eq(dist_wire_parse(&w, "--comm", refused[i][0], msg, sizeof msg), DIST_EINVAL, "%s accepted", refused[i][0]);
        cr_assert(strstr(msg, refused[i][1]) && strstr(msg, refused[i][0]), "%s: '%s'", refused[i][0], msg);
    }
}

Test(dist, wire_bytes) {
    dist_wire w;
    char msg[128];
    dist_wire_parse(&w, "--comm", "fp32", msg, sizeof msg);
    cr_assert_eq(dist_wire_bytes(&w, 100), 400.0);
    dist_wire_parse(&w, "--comm", "bf16", msg, sizeof msg);
    cr_assert_eq(dist_wire_bytes(&w, 100), 200.0);
    dist_wire_parse(&w, "--comm", "mxfp4", msg, sizeof msg);  // 64 codes of 4 bits + 2 e8m0 scales
    cr_assert_eq(dist_wire_bytes(&w, 64), 34.0);
    dist_wire_parse(&w, "--comm", "nvfp4", msg, sizeof msg);  // 32 codes + 2 e4m3 scales + the fp32 tensor scale
    cr_assert_eq(dist_wire_bytes(&w, 32), 16.0 + 2.0 + 4.0);
}

Test(dist, chunks_and_rank_order) {
    size_t off[4];
    dist_chunks(off, 10, 3);
    cr_assert(off[0] == 0 && off[1] == 3 && off[2] == 6 && off[3] == 10);
    // ((a + b) + c) in float32, where a different order gives another value
    const float recv[3] = {1.0f, 0x1p-24f, 0x1p-24f}, expect = (1.0f + 0x1p-24f) + 0x1p-24f;
    float out;
    dist_sum_in_rank_order(&out, recv, 3, 1);
    cr_assert_eq(out, expect);
    cr_assert_neq(out, 1.0f + (0x1p-24f + 0x1p-24f), "the example must tell the orders apart");
}

Test(dist, ring_hop_rounds_each_partial_sum) {
    dist_wire w;
    char msg[128];
    dist_wire_parse(&w, "--comm", "bf16", msg, sizeof msg);
    const size_t seg[2] = {0, 64};
    uint64_t s = 7;
    float in[64], own[64], acc[64];
    for (int i = 0; i < 64; i++) {
        in[i] = bf16((float)(tu_splitmix64(&s) % 2000) / 1000.0f - 1.0f);
        own[i] = i % 8 ? bf16((float)(tu_splitmix64(&s) % 2000) / 1e6f) : 0.0f;
    }
    dist_comm_tel t = {0};
    dist_ring_add(&(dist_crossing){.w = &w, .seg = seg, .nseg = 1, .seed = 1, .stream = 1}, NULL, acc, in, own, 0, 64,
                  &t);
    uint64_t swamped = 0;
    for (int i = 0; i < 64; i++) {
        cr_assert_eq(acc[i], bf16(in[i] + own[i]), "element %d", i);
        swamped += own[i] != 0 && acc[i] == in[i];
    }
    cr_assert_eq(t.swamped, swamped);
    cr_assert(swamped > 0, "small addends to bf16 partial sums are swamped");
    cr_assert_eq(t.n, 64);
}

// The packed transport: for every recipe, what a receiver decodes from the bytes is what
// fmt_quantize_f32 gives (the emulation the wire formats are defined by), bitwise, piece by
// piece, for ragged pieces and values across the range (zeros, subnormals, large, infinite);
// and the bytes are as many as dist_wire_span_bytes says.
Test(dist, packed_transport_decodes_to_the_quantized_values) {
    const char *specs[] = {"bf16", "fp16:tensor", "e4m3:tensor", "e5m2:block:128:fp32", "mxfp8", "mxfp6", "mxfp4",
                           "nvfp4", "e3m0:finite:tensor", "e2m1:mx:sr", "bf16:sr", "e4m3:row", "e2m1:mx:nanblock"};
    const size_t seg[4] = {0, 37, 37 + 100, 37 + 100 + 301};  // ragged against every block size
    enum { N = 37 + 100 + 301 };
    uint64_t st = 11;
    float x[N], expect[N], got[N];
    for (int i = 0; i < N; i++) {
        const double u = tu_sm_unif(&st) * 2 - 1;
        x[i] = (float)(u * ldexp(1.0, tu_sm_int(&st, -30, 20)));
        if (i % 53 == 0) x[i] = 0.0f;
        if (i % 97 == 5) x[i] = 1e-40f;  // a float32 subnormal
    }
    x[200] = INFINITY;  // one block holds an inf: scale 1 (nanblock: NaN) for that tile
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        dist_wire w;
        char msg[256];
        cr_assert_eq(dist_wire_parse(&w, "--comm", specs[k], msg, sizeof msg), DIST_OK, "%s: %s", specs[k], msg);
        const dist_crossing cx = {.w = &w, .seg = seg, .nseg = 3, .seed = 5, .stream = 9};
        const size_t nb = dist_wire_span_bytes(&cx, 0, N);
        uint8_t *bytes = malloc(nb + 16);
        memset(bytes, 0xA5, nb + 16);
        dist_comm_tel t = {0};
        dist_wire_encode(&cx, bytes, got, x, 0, N, &t);
        for (int i = 0; i < 16; i++) cr_assert_eq(bytes[nb + i], 0xA5, "%s: wrote past the span", specs[k]);
        size_t want_bytes = 0;
        for (int p = 0; p < 3; p++) {
            const size_t len = seg[p + 1] - seg[p];
            fmt_round_opts ro = w.ro;
            ro.seed = 5, ro.stream = 9, ro.offset = seg[p];
            cr_assert_eq(fmt_quantize_f32(&w.fmt, &w.sc, expect + seg[p], x + seg[p], 1, len, &ro, NULL, NULL), FMT_OK);
            want_bytes += w.sc.none ? fmt_packed_bytes(&w.fmt, len)
                                    : fmt_packed_bytes(&w.fmt, len) +
                                          fmt_packed_bytes(&w.sc.scale_fmt, fmt_scale_count(&w.sc, 1, len)) +
                                          (w.sc.tensor_scale ? 4 : 0);
        }
        cr_assert_eq(nb, want_bytes, "%s: %zu bytes, expected %zu", specs[k], nb, want_bytes);
        float dec[N];
        dist_wire_decode(&cx, dec, bytes, 0, N);
        for (int i = 0; i < N; i++) {
            cr_assert(memcmp(&got[i], &expect[i], 4) == 0 || (isnan(got[i]) && isnan(expect[i])),
                      "%s element %d (%a): sender holds %a, fmt_quantize_f32 %a", specs[k], i, x[i], got[i], expect[i]);
            cr_assert(memcmp(&dec[i], &got[i], 4) == 0, "%s element %d: receiver %a, sender %a", specs[k], i, dec[i],
                      got[i]);
        }
        cr_assert_eq(t.n, N, "%s", specs[k]);
        free(bytes);
    }
}

// Directions: the contribution travels in the wire format, the sum comes back in the gather
// format (one process: x = gather(wire(x))).
Test(dist, gather_format_rounds_the_sums) {
    dist_world wd = {0, 1, false};
    dist_wire w, g;
    char msg[128];
    dist_wire_parse(&w, "--comm", "e4m3:tensor", msg, sizeof msg);
    dist_wire_parse(&g, "--comm-gather", "bf16", msg, sizeof msg);
    const size_t seg[2] = {0, 64};
    for (int ring = 0; ring < 2; ring++) {
        dist_reducer d;
        const dist_reducer_opts o = {.wire = &w, .gather = &g, .wire_accum = ring, .n = 64, .seg = seg, .nseg = 1};
        cr_assert_eq(dist_reducer_init(&d, &wd, &o, msg, sizeof msg), DIST_OK, "%s", msg);
        float x[64], e[64];
        for (int i = 0; i < 64; i++) x[i] = 1.0f + (float)i * 0x1p-9f;
        dist_wire_round(&(dist_crossing){.w = &w, .seg = seg, .nseg = 1, .seed = 1, .stream = 0}, e, x, 0, 64, NULL);
        bool differs = false;
        for (int i = 0; i < 64; i++) differs |= bf16(e[i]) != e[i];
        cr_assert(differs, "the example must tell the two roundings apart");
        dist_allreduce_sum(&d, &wd, x, 1, 0);
        for (int i = 0; i < 64; i++) cr_assert_eq(x[i], bf16(e[i]), "%s element %d", ring ? "ring" : "f32", i);
        cr_assert_eq(d.tel.n, 128);
        dist_reducer_free(&d);
    }
    cr_assert_eq(dist_wire_parse(&g, "--comm-gather", "e4m3", msg, sizeof msg), DIST_EINVAL);
    cr_assert(strstr(msg, "--comm-gather 'e4m3'"), "'%s'", msg);
}

// One process: the reducer rounds the contribution and the sum (f32) as N ranks would.
Test(dist, one_process_reduction) {
    dist_world wd = {0, 1, false};
    dist_wire w;
    char msg[128];
    dist_wire_parse(&w, "--comm", "bf16", msg, sizeof msg);
    const size_t seg[3] = {0, 5, 9};
    dist_reducer d;
    const dist_reducer_opts o = {.wire = &w, .ef = true, .n = 9, .seg = seg, .nseg = 2};
    cr_assert_eq(dist_reducer_init(&d, &wd, &o, msg, sizeof msg), DIST_OK, "%s", msg);
    float x[9], x0[9];
    for (int i = 0; i < 9; i++) x[i] = x0[i] = 1.0f + (float)i * 0x1p-12f;
    dist_allreduce_sum(&d, &wd, x, 1, 0);
    for (int i = 0; i < 9; i++) {
        cr_assert_eq(x[i], bf16(x0[i]), "element %d", i);
        cr_assert_eq(d.resid[i], x0[i] - bf16(x0[i]), "error feedback keeps what the wire lost");
    }
    cr_assert_eq(d.tel.n, 18);  // the contribution and the sum
    dist_reducer_free(&d);
}

// Under tests/dist_test.sh: FPLAB_DIST_CHECK="PREFIX N f32|wire" names the dumped first reduction
// of a bf16 run (PREFIX.rR.in, PREFIX.rR.out); every rank's output must equal this emulation.
Test(dist_mpi, dumped_reduction_equals_emulation) {
    const char *spec = getenv("FPLAB_DIST_CHECK");
    if (!spec) cr_skip_test("FPLAB_DIST_CHECK not set (tests/dist_test.sh sets it)");
    char prefix[256], mode[8];
    int N;
    cr_assert_eq(sscanf(spec, "%255s %d %7s", prefix, &N, mode), 3);
    float *x[16] = {0};
    size_t n = 0;
    for (int r = 0; r < N; r++) {
        char path[300];
        snprintf(path, sizeof path, "%s.r%d.in", prefix, r);
        FILE *f = fopen(path, "rb");
        cr_assert(f, "%s", path);
        fseek(f, 0, SEEK_END);
        n = (size_t)ftell(f) / sizeof(float);
        rewind(f);
        x[r] = malloc(n * sizeof(float));
        cr_assert_eq(fread(x[r], sizeof(float), n, f), n);
        fclose(f);
    }
    float *expect = malloc(n * sizeof *expect), *got = malloc(n * sizeof *got);
    for (size_t i = 0; i < n; i++) {
        int cc = 0;  // the chunk of element i: [floor(c n / N), floor((c + 1) n / N))
        while ((size_t)((unsigned __int128)n * (unsigned)(cc + 1) / (unsigned)N) <= i) cc++;
        float acc;
        if (!strcmp(mode, "f32")) {
            acc = bf16(x[0][i]);
            for (int r = 1; r < N; r++) acc += bf16(x[r][i]);
            acc = bf16(acc);
        } else {
            acc = bf16(x[cc][i]);
            for (int k = 1; k < N; k++) acc = bf16(acc + bf16(x[(cc + k) % N][i]));
        }
        expect[i] = acc;
    }
    for (int r = 0; r < N; r++) {
        char path[300];
        snprintf(path, sizeof path, "%s.r%d.out", prefix, r);
        FILE *f = fopen(path, "rb");
        cr_assert(f, "%s", path);
        cr_assert_eq(fread(got, sizeof(float), n, f), n);
        fclose(f);
        for (size_t i = 0; i < n; i++)
            cr_assert(memcmp(&got[i], &expect[i], sizeof(float)) == 0, "rank %d element %zu: %a, emulation %a", r, i,
                      got[i], expect[i]);
        free(x[r]);
    }
    free(expect), free(got);
}

// Without MPI the distributed options say so; with MPI and no launcher, local SGD with one
// rank is the plain run, bitwise.
Test(dist, options_without_mpi_or_with_one_rank) {
    train_opts o;
    train_opts_default(&o);
    snprintf(o.data, sizeof o.data, "x.txt");
    o.local_sgd = 4;
    char msg[512] = "";
    const int st = train_opts_validate(&o, msg, sizeof msg);
    if (dist_have_mpi()) cr_assert_eq(st, 0, "%s", msg);
    else cr_assert(st != 0 && strstr(msg, "without MPI") && strstr(msg, "--local-sgd"), "'%s'", msg);
}
