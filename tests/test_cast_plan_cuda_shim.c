// test_cast_plan_cuda_shim.c: autocast's cast plans (autocast.h: ac_cast_plan_make, _run,
// _finish) run by the CUDA kernels against ac_cast, bit for bit: values, telemetry and the
// delayed-scaling histories. Built twice: as this suite, the kernels run on the CPU through
// tests/cuda_shim.cpp (the same source nvcc compiles; every machine, make test); as
// test_cast_plan_cuda (tests/test_cast_plan_cuda.c defines PLAN_ON_DEVICE), on device memory
// through ac_cast_plan_run(AC_EXEC_CUDA) (make test-gpu; skipped without a GPU unless
// FPLAB_REQUIRE_GPU=1).
// What is checked: for every preset (ac_preset_names: fp32 and all others) and every site, three
// contexts of the same policy and seed see the same casts: one through ac_cast (the reference),
// one through plans run by the CUDA kernels, one through plans run by the host executor
// (AC_EXEC_HOST). Casts in both orientations, counted and not, at layer 0 and model level, over
// three steps and two micro-batches of one step, inputs whose magnitude moves from step to step
// (so delayed scaling's history and scale move), with outliers that overflow and values that
// underflow. After every cast: the values' bits, the whole telemetry array and the whole amax
// history (counts and entries) equal the reference's. Then that the comparison sees an
// executor that used another stochastic-rounding stream or another delayed scale than the plan
// says, and the refusals.
// Random inputs come from the library's generator; the seed is printed and read from FPLAB_SEED.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autocast/autocast.h"
#include "autocast/cast_plan_internal.h"
#include "formats/rng.h"
#include "kernels/cast_cuda.h"
#include "test_util.h"

// --- the executor: the shim on host memory, or the device

#ifdef PLAN_ON_DEVICE
#define SUITE "test_cast_plan_cuda"
#include "cuda_suite.h"
#ifdef FPLAB_HAVE_CUDA
// The plan on device copies of in, out, one_scale and the counters (zeroed there); copies back.
static int run_plan(const ac_cast_plan *p, float *out, float *one_scale, const float *in, uint64_t *counts) {
    const size_t n = p->rows * p->cols;
    float *d_in, *d_out, *d_s;
    uint64_t *d_c;
    cr_assert_eq(cudaMalloc((void **)&d_in, n * 4 + 4), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&d_out, n * 4 + 4), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&d_s, 4), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&d_c, MM_CUDA_NCOUNTS * 8), cudaSuccess);
    cr_assert_eq(cudaMemcpy(d_in, in, n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    cr_assert_eq(cudaMemset(d_c, 0, MM_CUDA_NCOUNTS * 8), cudaSuccess);
    cr_assert_eq(cudaMemset(d_s, 0, 4), cudaSuccess);
    const int st = ac_cast_plan_run(p, AC_EXEC_CUDA, d_out, d_s, d_in, counts ? d_c : NULL, NULL);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
    cr_assert_eq(cudaMemcpy(out, d_out, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert_eq(cudaMemcpy(one_scale, d_s, 4, cudaMemcpyDeviceToHost), cudaSuccess);
    if (counts) cr_assert_eq(cudaMemcpy(counts, d_c, MM_CUDA_NCOUNTS * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(d_in), cudaFree(d_out), cudaFree(d_s), cudaFree(d_c);
    return st;
}
#else
static int run_plan(const ac_cast_plan *p, float *out, float *one_scale, const float *in, uint64_t *counts) {
    (void)p, (void)out, (void)one_scale, (void)in, (void)counts;
    return MM_ENODEV;
}
#endif

ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
    cuda_suite_report(stats, "CUDA cast plans", "test_cast_plan_cuda");
}

// A plan run by another executor than the plan says (the sensitivity test): device only through
// the real calls, so the shim's table is not needed here.
static int run_plan_with(const ac_cast_plan *p, float *out, float *one_scale, const float *in, uint64_t *counts) {
    return run_plan(p, out, one_scale, in, counts);
}
#else
#define SUITE "test_cast_plan_cuda_shim"
int shim_cast_round_f32_scaled(const fmt_t *f, float *out, const float *in, size_t n, float pre, float post,
                               const fmt_round_opts *o, uint64_t *counts);
int shim_cast_quantize_f32(const fmt_t *elem, const fmt_scaling *sc, float *out, float *elems, float *scales,
                           const float *in, size_t rows, size_t cols, const fmt_round_opts *o, uint64_t *counts);

static int shim_round(const fmt_t *f, float *out, const float *in, size_t n, float pre, float post,
                      const fmt_round_opts *o, uint64_t *counts, void *stream) {
    (void)stream;
    return shim_cast_round_f32_scaled(f, out, in, n, pre, post, o, counts);
}
static int shim_quantize(const fmt_t *elem, const fmt_scaling *sc, float *out, float *elems, float *scales,
                         const float *in, size_t rows, size_t cols, const fmt_round_opts *o, uint64_t *counts,
                         void *stream) {
    (void)stream;
    return shim_cast_quantize_f32(elem, sc, out, elems, scales, in, rows, cols, o, counts);
}
static const ac__cast_calls shim_calls = {shim_round, shim_quantize};

static void need_backend(void) {}

static int run_plan(const ac_cast_plan *p, float *out, float *one_scale, const float *in, uint64_t *counts) {
    return ac__cast_plan_run_with(p, &shim_calls, out, one_scale, in, counts, NULL);
}
static int run_plan_with(const ac_cast_plan *p, float *out, float *one_scale, const float *in, uint64_t *counts) {
    return run_plan(p, out, one_scale, in, counts);
}
#endif

// --- the comparison

enum { ROWS = 40, COLS = 96, NL = 2 };  // 40 x 96: ragged for 16x16 and 128-wide tiles, whole for 16 and 32

static uint64_t test_seed(const char *test) { return tu_seed(SUITE, test, 0x706c616eULL); }

// Inputs of magnitude 2^e: normal values, a few outliers 2^12 above (overflow, and the amax),
// a few 2^-30 below (underflow), some zeros.
static void fill(float *x, size_t n, tu_rng *r, int e) {
    for (size_t i = 0; i < n; i++) {
        const int k = tu_rng_int(r, 0, 99);
        const double v = tu_rng_normal(r);
        x[i] = k < 2 ? (float)ldexp(v, e + 12) : k < 6 ? (float)ldexp(v, e - 30) : k < 8 ? 0.0f : (float)ldexp(v, e);
    }
}

static size_t tel_bytes(const ac_ctx *c) { return (size_t)AC_NSITES * (size_t)(c->n_layers + 1) * sizeof *c->tel; }
static size_t slots(const ac_ctx *c) { return (size_t)AC_NSITES * (size_t)(c->n_layers + 1); }
static size_t hist_floats(const ac_ctx *c) {
    return slots(c) * (size_t)(c->pol.amax_history > 0 ? c->pol.amax_history : 1);
}

static void same_state(const char *what, const ac_ctx *want, const ac_ctx *got) {
    cr_assert(!memcmp(want->tel, got->tel, tel_bytes(want)), "%s: telemetry differs from ac_cast's", what);
    cr_assert(!memcmp(want->hist_count, got->hist_count, slots(want) * sizeof *want->hist_count),
              "%s: amax-history counts differ from ac_cast's", what);
    cr_assert(!memcmp(want->hist, got->hist, hist_floats(want) * sizeof *want->hist),
              "%s: amax histories differ from ac_cast's", what);
}

static void same_bits(const char *what, const float *want, const float *got, size_t n) {
    for (size_t i = 0; i < n; i++)
        cr_assert(tu_f2u(want[i]) == tu_f2u(got[i]), "%s: element %zu: %a (0x%08x), ac_cast %a (0x%08x)", what, i,
                  (double)got[i], tu_f2u(got[i]), (double)want[i], tu_f2u(want[i]));
}

// One cast through a plan on ctx c, run by the executor (dev) or the host executor: make, run,
// finish from the counters.
static void plan_cast(ac_ctx *c, const ac_cast_req *r, const float *x, float *out, bool dev, const char *what) {
    ac_cast_plan p;
    cr_assert_eq(ac_cast_plan_make(c, r, ROWS, COLS, &p), AC_OK, "%s: ac_cast_plan_make", what);
    if (p.kind == AC_PLAN_COPY) {
        cr_assert(!ac_active(c, r->site), "%s: a plan that copies for an active site", what);
        memcpy(out, x, ROWS * COLS * sizeof *out);
        return;
    }
    uint64_t counts[MM_CUDA_NCOUNTS] = {0};
    float one = 0.0f;
    const int st = dev ? run_plan(&p, out, &one, x, counts)
                       : ac_cast_plan_run(&p, AC_EXEC_HOST, out, &one, x, counts, NULL);
    cr_assert_eq(st, MM_OK, "%s: run (%s): status %d", what, dev ? "device" : "host", st);
    ac_cast_plan_finish_counts(c, &p, counts, one);
}

static void preset_case(const char *name, uint64_t seed, int *n_casts) {
    ac_policy pol;
    char msg[512];
    cr_assert_eq(ac_policy_load(&pol, name, msg, sizeof msg), AC_OK, "%s: %s", name, msg);
    ac_ctx ref, dev, host;
    const size_t cap = ROWS * COLS;
    cr_assert_eq(ac_init(&ref, &pol, NL, seed, AC_TEL_LAYERS, cap, msg, sizeof msg), AC_OK);
    cr_assert_eq(ac_init(&dev, &pol, NL, seed, AC_TEL_LAYERS, cap, msg, sizeof msg), AC_OK);
    cr_assert_eq(ac_init(&host, &pol, NL, seed, AC_TEL_LAYERS, cap, msg, sizeof msg), AC_OK);
    float *x = malloc(cap * sizeof *x), *o_dev = malloc(cap * sizeof *x), *o_host = malloc(cap * sizeof *x);
    cr_assert(x && o_dev && o_host);
    tu_rng rng = {fmt_rng_make_key(seed, 0x706c616eULL), 0};
    // (step, micro): three steps, two micro-batches in the second
    static const int sched[][2] = {{0, 0}, {1, 0}, {1, 1}, {2, 0}};
    for (size_t k = 0; k < sizeof sched / sizeof *sched; k++) {
        ac_ctx *cs[3] = {&ref, &dev, &host};
        for (int i = 0; i < 3; i++) ac_begin_step(cs[i], (uint64_t)sched[k][0]), ac_begin_micro(cs[i], sched[k][1]);
        for (int s = 0; s < AC_NSITES; s++)
            for (int li = 0; li < 2; li++)
                for (int kr = 0; kr < 2; kr++) {
                    // layer 0, and the model level (both rows of the history and telemetry)
                    // for the sites the C trainer casts there: the head's and the optimizer's
                    const bool model = s >= AC_HEAD_IN && s <= AC_HEAD_GRAD ? true : s >= AC_MASTER && s <= AC_ADAM_V;
                    if (li == 1 && !model) continue;
                    const int layer = li ? -1 : 0;
                    // the magnitude moves with the step, the site and the layer
                    fill(x, cap, &rng, 4 * (int)k - 6 + s % 5 - li);
                    const ac_cast_req r = {.site = (ac_site)s, .layer = layer, .k_rows = kr, .count = !kr};
                    char what[160];
                    snprintf(what, sizeof what, "%s: %s layer %d %s, step %d micro %d", name, ac_site_name(s), layer,
                             kr ? "k_rows" : "rows", sched[k][0], sched[k][1]);
                    const float *want = ac_cast(&ref, &r, x, ROWS, COLS);
                    plan_cast(&dev, &r, x, o_dev, true, what);
                    plan_cast(&host, &r, x, o_host, false, what);
                    same_bits(what, want, o_dev, cap);
                    same_bits(what, want, o_host, cap);
                    same_state(what, &ref, &dev);
                    same_state(what, &ref, &host);
                    *n_casts += ac_active(&ref, (ac_site)s);
                }
    }
    free(x), free(o_dev), free(o_host);
    ac_free(&ref), ac_free(&dev), ac_free(&host);
}

// Every preset, in two halves (so that --jobs 2 runs them side by side).
static void every_preset(int half) {
    need_backend();
    const uint64_t seed = test_seed("every_preset_every_site");
    char names[2048];
    snprintf(names, sizeof names, "%s", ac_preset_names());
    int n_presets = 0, n_casts = 0;
    for (char *save = NULL, *t = strtok_r(names, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        if (n_presets++ % 2 == half) preset_case(t, seed, &n_casts);
    }
    cr_assert_geq(n_presets, 22, "presets: %d", n_presets);
    fprintf(stderr, "%s: half %d of %d presets, %d active casts compared\n", SUITE, half, n_presets, n_casts);
}

Test(cast_plan_cuda, every_preset_every_site_0, .timeout = 900) { every_preset(0); }
Test(cast_plan_cuda, every_preset_every_site_1, .timeout = 900) { every_preset(1); }

// The comparison above fails for an executor that draws from another stochastic-rounding
// stream, or scales by another delayed scale, than the plan says: each perturbed plan's values
// differ from ac_cast's.
Test(cast_plan_cuda, a_wrong_key_or_scale_is_seen) {
    need_backend();
    const uint64_t seed = test_seed("a_wrong_key_or_scale_is_seen");
    static const struct { const char *preset; ac_site site; int what; } cases[] = {
        {"nvfp4", AC_QKV_GRAD, 0},            // stream (nvfp4's gradients round stochastically)
        {"nvfp4", AC_QKV_GRAD, 1},            // offset
        {"fp8-delayed", AC_QKV_IN, 2},        // delayed scale (after a step of history)
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ac_policy pol;
        char msg[512];
        cr_assert_eq(ac_policy_load(&pol, cases[i].preset, msg, sizeof msg), AC_OK);
        ac_ctx c;
        cr_assert_eq(ac_init(&c, &pol, NL, seed, AC_TEL_SITES, ROWS * COLS, msg, sizeof msg), AC_OK);
        float x[ROWS * COLS], out[ROWS * COLS];
        tu_rng rng = {fmt_rng_make_key(seed, i), 0};
        const ac_cast_req r = {.site = cases[i].site, .layer = 0, .count = true};
        ac_begin_step(&c, 0);
        fill(x, ROWS * COLS, &rng, 0);
        ac_cast(&c, &r, x, ROWS, COLS);  // a history for the delayed scale
        ac_begin_step(&c, 1);
        fill(x, ROWS * COLS, &rng, 0);
        ac_cast_plan p;
        cr_assert_eq(ac_cast_plan_make(&c, &r, ROWS, COLS, &p), AC_OK);
        cr_assert(ac_active(&c, r.site));
        if (cases[i].what == 2) cr_assert(p.kind == AC_PLAN_ROUND && p.pre != 1.0f, "%s: no delayed scale", cases[i].preset);
        else cr_assert(p.round.mode == FMT_SR, "%s: not stochastic", cases[i].preset);
        if (cases[i].what == 0) p.round.stream++;
        if (cases[i].what == 1) p.round.offset += 1;
        if (cases[i].what == 2) p.pre *= 2.0f, p.post *= 0.5f;
        cr_assert_eq(run_plan_with(&p, out, &(float){0}, x, NULL), MM_OK);
        const float *want = ac_cast(&c, &(ac_cast_req){.site = r.site, .layer = 0, .count = false}, x, ROWS, COLS);
        size_t diff = 0;
        for (size_t j = 0; j < ROWS * COLS; j++) diff += tu_f2u(want[j]) != tu_f2u(out[j]);
        cr_assert(diff > 0, "%s case %zu: a perturbed plan gave ac_cast's bits", cases[i].preset, i);
        ac_free(&c);
    }
}

// What a plan refuses: a layer or site out of range; running a copy; a counted single-scale
// cast without room for its scale.
Test(cast_plan_cuda, refusals) {
    ac_policy pol;
    char msg[512];
    cr_assert_eq(ac_policy_load(&pol, "fp8-current", msg, sizeof msg), AC_OK);
    ac_ctx c;
    cr_assert_eq(ac_init(&c, &pol, NL, 1, AC_TEL_SITES, 64, msg, sizeof msg), AC_OK);
    ac_cast_plan p;
    cr_assert_eq(ac_cast_plan_make(&c, &(ac_cast_req){.site = AC_QKV_IN, .layer = NL + 1}, 4, 4, &p), AC_EINVAL);
    cr_assert_eq(ac_cast_plan_make(&c, &(ac_cast_req){.site = AC_QKV_IN, .layer = -2}, 4, 4, &p), AC_EINVAL);
    cr_assert_eq(ac_cast_plan_make(&c, &(ac_cast_req){.site = AC_NSITES, .layer = 0}, 4, 4, &p), AC_EINVAL);
    cr_assert_eq(ac_cast_plan_make(NULL, &(ac_cast_req){.site = AC_QKV_IN, .layer = 0}, 4, 4, &p), AC_EINVAL);
    float x[16] = {1}, out[16];
    uint64_t counts[MM_CUDA_NCOUNTS] = {0};
    // fp8-current: one scale per tensor, which finish needs for the telemetry
    cr_assert_eq(ac_cast_plan_make(&c, &(ac_cast_req){.site = AC_QKV_IN, .layer = 0, .count = true}, 4, 4, &p), AC_OK);
    cr_assert(p.kind == AC_PLAN_QUANTIZE && p.one_scale);
    cr_assert_eq(ac_cast_plan_run(&p, AC_EXEC_HOST, out, NULL, x, counts, NULL), MM_EINVAL);
    cr_assert_eq(ac_cast_plan_run(&p, (ac_exec)7, out, NULL, x, NULL, NULL), MM_EINVAL);
    // an inactive site copies: nothing to run
    cr_assert_eq(ac_cast_plan_make(&c, &(ac_cast_req){.site = AC_MASTER, .layer = -1}, 4, 4, &p), AC_OK);
    cr_assert_eq(p.kind, AC_PLAN_COPY);
    cr_assert_eq(ac_cast_plan_run(&p, AC_EXEC_HOST, out, NULL, x, NULL, NULL), MM_EINVAL);
    ac_free(&c);
}
