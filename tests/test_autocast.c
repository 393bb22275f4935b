// test_autocast.c: applying policies (autocast/autocast.c) and their effect on the model: the
// fp32 policy is bitwise the plain model; cast tensors hold values of their format; telemetry
// counts match hand-built tensors; the weight update rounds, stochastically rounds or
// compensates as its policy says, and swamping is counted; a saved state that lies in any field
// (history counts and amaxes, the loss scaler) is refused on load.
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "autocast/autocast.h"
#include "kernels/llama_ops.h"
#include "tests/test_util.h"
#include "trainer/llama.h"
#include "util/json.h"

static void setup(void) { llama_ops_threads(0); }
TestSuite(autocast, .init = setup);

static ac_policy policy(const char *name) {
    ac_policy p;
    char msg[256];
    cr_assert_eq(ac_policy_load(&p, name, msg, sizeof msg), AC_OK, "%s", msg);
    return p;
}

static void init_ctx(ac_ctx *c, const ac_policy *p, int layers, size_t cap) {
    char msg[256];
    cr_assert_eq(ac_init(c, p, layers, 1, AC_TEL_SITES, cap, msg, sizeof msg), AC_OK, "%s", msg);
    ac_begin_step(c, 0);
}

static bool representable(const fmt_t *f, float v) {
    float r = v;
    fmt_round_opts o = {0};
    fmt_round_f32(f, &r, 1, &o, NULL);
    return tu_samef(r, v);
}

// The fp32 policy (every site inactive) gives bitwise the loss and gradients of the model
// without a policy, with and without recompute.
Test(autocast, fp32_policy_is_the_plain_model) {
    llama_config c;
    llama_config_named(&c, "tiny");
    c.vocab_size = 13;
    for (int rc = 0; rc < 2; rc++) {
        llama_model a, b;
        cr_assert_eq(llama_init(&a, &c, rc, NULL, 0), LLAMA_OK);
        cr_assert_eq(llama_init(&b, &c, rc, NULL, 0), LLAMA_OK);
        llama_init_weights(&a, 3);
        llama_init_weights(&b, 3);
        ac_policy p = policy("fp32");
        ac_ctx ctx;
        init_ctx(&ctx, &p, c.n_layers, llama_max_operand(&c, 2, 8));
        b.ac = &ctx;
        int tok[16], tgt[16];
        for (int i = 0; i < 16; i++) tok[i] = (i * 5) % 13, tgt[i] = (i * 7 + 1) % 13;
        const float la = llama_forward(&a, tok, tgt, 2, 8), lb = llama_forward(&b, tok, tgt, 2, 8);
        llama_backward(&a, tok, tgt, 1.0f);
        llama_backward(&b, tok, tgt, 1.0f);
        cr_assert(tu_samef(la, lb), "loss %a vs %a", la, lb);
        cr_assert(memcmp(a.grads, b.grads, a.n_params * sizeof(float)) == 0, "gradients differ");
        ac_free(&ctx);
        llama_free(&a), llama_free(&b);
    }
}

// Every value a bf16 policy feeds a matmul is a bf16 value, and the model's output changes.
Test(autocast, bf16_operands_are_bf16) {
    ac_policy p = policy("bf16-amp");
    ac_ctx c;
    init_ctx(&c, &p, 1, 4096);
    tu_rng r = {fmt_rng_make_key(5, 0), 0};
    float x[4096];
    for (int i = 0; i < 4096; i++) x[i] = (float)tu_rng_normal(&r);
    const float *y = ac_cast(&c, &(ac_cast_req){.site = AC_QKV_IN, .layer = 0, .count = true}, x, 64, 64);
    cr_assert(y != x);
    fmt_t bf16;
    fmt_from_name(&bf16, "bf16");
    int changed = 0;
    for (int i = 0; i < 4096; i++) {
        cr_assert(representable(&bf16, y[i]), "element %d: %a is not bf16", i, y[i]);
        cr_assert(fabsf(y[i] - x[i]) <= ldexpf(fabsf(x[i]), -8), "element %d: error beyond half a bf16 ulp", i);
        changed += y[i] != x[i];
    }
    cr_assert(changed > 3000, "only %d of 4096 values changed", changed);
    ac_free(&c);
}

// A per-tensor fp8 cast: value * scale is an e4m3 value (up to float32 rounding of the scale's
// inverse) for every element; delayed scaling
// uses the amax of earlier casts (scale 1 on the first).
Test(autocast, fp8_values_scale_into_e4m3) {
    ac_policy p = policy("fp8-delayed");
    ac_ctx c;
    init_ctx(&c, &p, 1, 1024);
    fmt_t e4m3;
    fmt_from_name(&e4m3, "e4m3");
    float x[1024];
    tu_rng r = {fmt_rng_make_key(6, 0), 0};
    for (int i = 0; i < 1024; i++) x[i] = (float)(tu_rng_normal(&r) * 0.01);
    const float *y = ac_cast(&c, &(ac_cast_req){.site = AC_QKV_IN, .layer = 0, .count = true}, x, 32, 32);
    const size_t k = (size_t)AC_QKV_IN * 2 + 0;
    cr_assert_eq(c.tel[k].scale, 1.0f, "first delayed cast: scale %g", c.tel[k].scale);
    for (int i = 0; i < 1024; i++) cr_assert(representable(&e4m3, y[i]));
    y = ac_cast(&c, &(ac_cast_req){.site = AC_QKV_IN, .layer = 0, .count = true}, x, 32, 32);
    const float s = c.tel[k].scale;
    cr_assert_float_eq(s, (float)(448.0 / c.tel[k].amax), 1e-6 * s, "second cast: scale %g, amax %g", s, c.tel[k].amax);
    // y = q * fl(1/s) in float32: q is an e4m3 value and y * s is within two float32 roundings
    // (2^-23 relative) of it, far inside e4m3's spacing (2^-3 relative)
    for (int i = 0; i < 1024; i++) {
        float q = y[i] * s;
        fmt_round_opts o = {0};
        fmt_round_f32(&e4m3, &q, 1, &o, NULL);
        cr_assert(fabsf(q - y[i] * s) <= 0x1p-22f * fabsf(q), "element %d: %a * %g is not near an e4m3 value", i, y[i], s);
    }
    ac_free(&c);
}

// Telemetry against a hand-built tensor: fp16 with IEEE overflow (fp16-amp's grad sites).
Test(autocast, telemetry_counts) {
    ac_policy p = policy("fp16-amp");
    ac_ctx c;
    init_ctx(&c, &p, 1, 16);
    const float x[8] = {1e5f, -7e4f, 1e-9f, -1e-10f, 1e-6f, 3.0f, NAN, 0.0f};
    ac_cast(&c, &(ac_cast_req){.site = AC_O_GRAD, .layer = 0, .count = true}, x, 1, 8);
    const ac_tel *t = &c.tel[(size_t)AC_O_GRAD * 2 + 0];
    cr_assert_eq(t->n, 8);
    cr_assert_eq(t->overflow, 2, "overflow %llu", (unsigned long long)t->overflow);  // 1e5, -7e4 > 65504
    cr_assert_eq(t->underflow, 2, "underflow %llu", (unsigned long long)t->underflow);  // below 2^-25
    cr_assert_eq(t->subnormal, 1, "subnormal %llu", (unsigned long long)t->subnormal);  // 1e-6
    cr_assert_eq(t->nan, 1);
    cr_assert_float_eq(t->amax, 1e5, 1e-3);
    const float *y = c.buf[0];
    cr_assert(isinf(y[0]) && isinf(y[1]) && y[2] == 0 && y[3] == 0, "IEEE overflow to inf, underflow to 0");
    ac_cast(&c, &(ac_cast_req){.site = AC_O_GRAD, .layer = 0}, x, 1, 8);  // not counted
    cr_assert_eq(t->n, 8);
    ac_free(&c);
}

// The step line (ac_write_step_line) is one JSON object that util/json.h's reader walks to its
// end: the step's fields in order, val_loss only when there is one, the telemetry, then the
// caller's members before the closing brace.
static void more_comm(FILE *f, const void *arg) { fprintf(f, ",\"comm\":{\"ranks\":%d}", *(const int *)arg); }

static char *step_line(const ac_step_fields *s, const ac_ctx *c) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert(f);
    ac_write_step_line(f, s, c);
    fclose(f);
    cr_assert(!strchr(text, '\n'), "no newline: %s", text);
    return text;
}

// Walks the line's members into keys (joined by ','), checking numbers against want.
static void walk_step_line(const char *text, char *keys, size_t cap, const ac_step_fields *want) {
    jx_cur cur;
    jx_init(&cur, text);
    keys[0] = 0;
    cr_assert(jx_open(&cur, '{'), "%s", text);
    do {
        char key[32];
        jx_key(&cur, key, sizeof key);
        strncat(keys, keys[0] ? "," : "", cap - strlen(keys) - 1);
        strncat(keys, key, cap - strlen(keys) - 1);
        const struct { const char *k; double v; } nums[] = {
            {"step", (double)want->step}, {"loss", want->loss}, {"lr", want->lr},
            {"grad_norm", want->grad_norm}, {"loss_scale", want->loss_scale},
            {"skipped", want->skipped}, {"val_loss", want->val_loss}};
        bool done = false;
        for (size_t i = 0; i < sizeof nums / sizeof *nums && !done; i++)
            if (!strcmp(key, nums[i].k)) {
                const double v = jx_num(&cur);
                cr_assert(tu_samef((float)v, (float)nums[i].v), "%s: %g, want %g in %s", key, v, nums[i].v, text);
                done = true;
            }
        if (!done) jx_skip(&cur);
    } while (jx_more(&cur, '}'));
    cr_assert(jx_end(&cur) && jx_ok(&cur), "%s: %s", cur.err, text);
}

Test(autocast, step_line_parses_with_its_fields) {
    ac_step_fields s = {.step = 7, .loss = 2.5f, .lr = 3e-4f, .grad_norm = NAN, .tokens_per_s = 1234.56,
                        .elapsed_s = 1.5, .loss_scale = 65536, .skipped = true, .val_loss = NAN};
    char keys[512];
    char *text = step_line(&s, NULL);
    walk_step_line(text, keys, sizeof keys, &s);
    cr_assert_str_eq(keys, "step,loss,lr,grad_norm,tokens_per_s,elapsed_s,loss_scale,skipped", "%s", text);
    cr_assert(strstr(text, "\"grad_norm\":\"nan\"") || strstr(text, "\"grad_norm\":nan"), "%s", text);
    free(text);

    ac_policy p = policy("fp16-amp");
    ac_ctx c;
    init_ctx(&c, &p, 1, 16);
    const float x[4] = {1e5f, 1.0f, 2.0f, 3.0f};
    ac_cast(&c, &(ac_cast_req){.site = AC_O_GRAD, .layer = 0, .count = true}, x, 1, 4);
    const int ranks = 4;
    s.val_loss = 2.25f, s.grad_norm = 0.5f, s.skipped = false, s.more = more_comm, s.more_arg = &ranks;
    text = step_line(&s, &c);
    walk_step_line(text, keys, sizeof keys, &s);
    cr_assert_str_eq(keys, "step,loss,lr,grad_norm,tokens_per_s,elapsed_s,loss_scale,skipped,val_loss,sites,comm",
                     "%s", text);
    cr_assert(strstr(text, "\"comm\":{\"ranks\":4}}"), "the caller's member closes the line: %s", text);
    free(text);
    ac_free(&c);
}

// The weight update in bf16: nearest rounding loses updates below half an ulp (swamping);
// Kahan's compensation carries them until they add up; stochastic rounding keeps them in
// expectation.
Test(autocast, update_rounding_and_swamping) {
    enum { N = 4096, STEPS = 64 };
    const char *names[3] = {"pure-bf16", "pure-bf16-kahan", "pure-bf16-sr"};
    double moved[3];
    for (int v = 0; v < 3; v++) {
        ac_policy p = policy(names[v]);
        ac_ctx c;
        init_ctx(&c, &p, 1, 16);
        float *w = malloc(N * sizeof *w), *old = malloc(N * sizeof *old), *comp = calloc(N, sizeof *comp);
        for (int i = 0; i < N; i++) w[i] = 1.0f;
        // each step adds 2^-10: a quarter of bf16's ulp at 1 (2^-7 / 2 = 2^-8 is half an ulp)
        for (int s = 0; s < STEPS; s++) {
            ac_begin_step(&c, (uint64_t)s);
            memcpy(old, w, N * sizeof *w);
            for (int i = 0; i < N; i++) w[i] += 0x1p-10f;
            ac_round_update(&c, w, old, comp, N);
            if (v == 0 && s == 0) cr_assert_eq(c.upd_swamped, N, "rne: every update swamped (%llu)", (unsigned long long)c.upd_swamped);
        }
        double sum = 0;
        fmt_t bf16;
        fmt_from_name(&bf16, "bf16");
        for (int i = 0; i < N; i++) {
            sum += w[i] - 1.0;
            cr_assert(representable(&bf16, w[i]));
        }
        moved[v] = sum / N;  // exact: 64 * 2^-10 = 0.0625
        free(w), free(old), free(comp);
        ac_free(&c);
    }
    cr_assert_eq(moved[0], 0.0, "nearest: weights moved by %g (all updates swamped)", moved[0]);
    cr_assert_float_eq(moved[1], 0.0625, 1e-9, "kahan: mean move %g, exact 0.0625", moved[1]);
    // SR: each step moves up one ulp (2^-7) with probability 1/8 at first: the mean move is
    // 0.0625 within a few standard errors (a loose 10% over 4096 weights)
    cr_assert(fabs(moved[2] - 0.0625) < 0.00625, "sr: mean move %g, expected 0.0625", moved[2]);
}

// One call over many chunks (on the threads) rounds and counts as the calls of one chunk each
// that PolicyOptimizer makes tensor by tensor with `first`: the same weights, compensation,
// swamped and changed counts and master telemetry, on 1, 2 and 3 threads. The values include
// what the telemetry counts (NaN, bf16 subnormals, overflow) and a ragged last chunk.
Test(autocast, update_rounding_is_the_same_in_one_call_on_any_threads) {
    enum { N = 3 * 4096 + 123, PIECE = 1000 };
    const char *names[3] = {"pure-bf16", "pure-bf16-kahan", "pure-bf16-sr"};
    for (int v = 0; v < 3; v++) {
        ac_policy p = policy(names[v]);
        float *old = malloc(N * sizeof *old), *upd = malloc(N * sizeof *upd), *w[2], *comp[2];
        tu_rng r = {fmt_rng_make_key(17, (uint64_t)v), 0};
        for (int i = 0; i < N; i++) old[i] = (float)tu_rng_normal(&r);
        const fmt_t bf16 = tu_fmt("bf16");
        fmt_round_f32(&bf16, old, N, &(fmt_round_opts){0}, NULL);  // the stored weights
        for (int i = 0; i < N; i++) upd[i] = old[i] + (float)tu_rng_normal(&r) * 0x1p-9f;
        // (77 and 12404, in the ragged chunk, have no compensation: their targets are subnormal)
        old[77] = old[12404] = 0.0f;
        upd[5] = NAN, upd[77] = 0x1p-130f, upd[4100] = -0x1.ffp127f, upd[12404] = 0x1p-140f;
        ac_tel ref_tel[AC_NSITES * 2];
        uint64_t ref_swamped = 0, ref_changed = 0;
        for (int threads = 0; threads <= 3; threads++) {  // 0: the reference, a chunk per call
            llama_ops_threads(threads ? threads : 1);
            ac_ctx c;
            init_ctx(&c, &p, 1, 16);
            ac_begin_step(&c, 3);
            const int k = threads ? 1 : 0;
            w[k] = malloc(N * sizeof(float)), comp[k] = malloc(N * sizeof(float));
            memcpy(w[k], upd, N * sizeof(float));
            for (int i = 0; i < N; i++) comp[k][i] = (float)(i % 7) * 0x1p-12f;
            if (threads == 0) {
                for (size_t i0 = 0; i0 < N; i0 += PIECE) {
                    const size_t m = N - i0 < PIECE ? N - i0 : PIECE;
                    ac_round_update_at(&c, w[0] + i0, old + i0, comp[0] + i0, m, i0);
                }
                memcpy(ref_tel, c.tel, sizeof ref_tel), ref_swamped = c.upd_swamped, ref_changed = c.upd_changed;
                cr_assert(ref_swamped > 0 && ref_changed > 0, "%s: the data swamps some updates and not others", names[v]);
                const ac_tel *t = &ref_tel[AC_MASTER * 2 + 1];  // the master site's model-level slot (1 layer)
                cr_assert(t->n == N && t->nan == 1 && t->subnormal >= 1 && t->amax == 0x1.ffp127,
                          "%s: the master telemetry saw %llu values, %llu NaN, %llu subnormal, amax %a", names[v],
                          (unsigned long long)t->n, (unsigned long long)t->nan, (unsigned long long)t->subnormal, t->amax);
                cr_assert(v == 2 || t->overflow == 1, "%s: nearest rounds -0x1.ffp127 beyond bf16's max", names[v]);
            } else {
                ac_round_update(&c, w[1], old, comp[1], N);
                for (int i = 0; i < N; i++)
                    cr_assert(tu_samef(w[1][i], w[0][i]) && tu_samef(comp[1][i], comp[0][i]),
                              "%s, %d threads, element %d: %a (comp %a), a chunk per call %a (%a)", names[v], threads, i,
                              w[1][i], comp[1][i], w[0][i], comp[0][i]);
                cr_assert(c.upd_swamped == ref_swamped && c.upd_changed == ref_changed,
                          "%s, %d threads: swamped %llu changed %llu, a chunk per call %llu %llu", names[v], threads,
                          (unsigned long long)c.upd_swamped, (unsigned long long)c.upd_changed,
                          (unsigned long long)ref_swamped, (unsigned long long)ref_changed);
                cr_assert(memcmp(c.tel, ref_tel, sizeof ref_tel) == 0, "%s, %d threads: telemetry differs", names[v],
                          threads);
                free(w[1]), free(comp[1]);
            }
            ac_free(&c);
        }
        llama_ops_threads(0);
        free(w[0]), free(comp[0]), free(old), free(upd);
    }
}

Test(autocast, hadamard_is_orthogonal) {
    ac_policy p = policy("nvfp4");
    ac_ctx c;
    init_ctx(&c, &p, 1, 16);
    enum { R = 37, C = 5 };  // two full groups of 16 and a ragged 5
    float a[R * C], b[R * C], ha[R * C], hb[R * C];
    tu_rng r = {fmt_rng_make_key(9, 0), 0};
    for (int i = 0; i < R * C; i++) a[i] = (float)tu_rng_normal(&r), b[i] = (float)tu_rng_normal(&r);
    ac_hadamard16(&c, ha, a, R, C);
    ac_hadamard16(&c, hb, b, R, C);
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++) {  // (Ha)^T (Hb) = a^T b
            double d0 = 0, d1 = 0, mag = 0;
            for (int k = 0; k < R; k++) {
                d0 += (double)a[k * C + i] * b[k * C + j];
                d1 += (double)ha[k * C + i] * hb[k * C + j];
                mag += fabs((double)a[k * C + i] * b[k * C + j]);
            }
            cr_assert(fabs(d0 - d1) <= 64 * 0x1p-24 * mag, "(%d,%d): %g vs %g", i, j, d0, d1);
        }
    cr_assert(memcmp(ha + 32 * C, a + 32 * C, 5 * C * sizeof(float)) == 0, "ragged rows changed");
    cr_assert(memcmp(ha, a, 32 * C * sizeof(float)) != 0, "nothing rotated");
    ac_free(&c);
}

// Attention with its probabilities rounded to e4m3 and scores to bf16: every stored
// probability is an e4m3 value, the counts cover the causal triangle, and y is the product of
// the rounded probabilities with v.
Test(autocast, attention_scores_and_probs) {
    enum { B = 2, T = 6, NH = 2, NKV = 1, HS = 4 };
    float q[B * T * NH * HS], k[B * T * NKV * HS], v[B * T * NKV * HS], y[B * T * NH * HS], att[B * NH * T * T];
    tu_rng r = {fmt_rng_make_key(11, 0), 0};
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] = (float)tu_rng_normal(&r);
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) k[i] = (float)tu_rng_normal(&r), v[i] = (float)tu_rng_normal(&r);
    fmt_t bf16, e4m3;
    fmt_from_name(&bf16, "bf16");
    fmt_from_name(&e4m3, "e4m3");
    fmt_stats ss = {0}, sp = {0};
    const attn_cast sc = {&bf16, {0}, &ss}, pc = {&e4m3, {0}, &sp};
    op_attention_forward(y, att, q, k, v, B, T, NH, NKV, HS, &sc, &pc);
    const uint64_t tri = (uint64_t)B * NH * T * (T + 1) / 2;
    cr_assert_eq(ss.n, tri, "scores counted %llu", (unsigned long long)ss.n);
    cr_assert_eq(sp.n, tri);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *p = att + ((b * NH + h) * T + t) * T;
                for (int t2 = 0; t2 <= t; t2++) cr_assert(representable(&e4m3, p[t2]), "p=%a", p[t2]);
                for (int d = 0; d < HS; d++) {
                    double s = 0;
                    for (int t2 = 0; t2 <= t; t2++) s += (double)p[t2] * v[(b * T + t2) * HS + d];
                    cr_assert(fabs(y[(b * T + t) * NH * HS + h * HS + d] - s) <= 1e-5 * (1 + fabs(s)));
                }
            }
}

// --- checkpoint state (ac_state_save / ac_state_check / ac_state_load)

// The byte image (version 2): a header of six uint32, the scaler struct, then int64
// hist_count[AC_NSITES][n_layers+1], then float hist[AC_NSITES][n_layers+1][amax_history].
// Offsets for the corrupting tests below.
enum { HEAD = AC_STATE_HEADER_BYTES };
static size_t count_at(const ac_ctx *c, ac_site s, int slot) {
    return HEAD + sizeof(ac_scaler) + ((size_t)s * (size_t)(c->n_layers + 1) + (size_t)slot) * sizeof(int64_t);
}
static size_t hist_at(const ac_ctx *c, ac_site s, int slot, int i) {
    const size_t slots = (size_t)AC_NSITES * (size_t)(c->n_layers + 1);
    return HEAD + sizeof(ac_scaler) + slots * sizeof(int64_t) +
           (((size_t)s * (size_t)(c->n_layers + 1) + (size_t)slot) * (size_t)c->pol.amax_history + (size_t)i) *
               sizeof(float);
}

// A saved state whose every field lies in turn (the checksum of a checkpoint would still
// match): each is refused by ac_state_check with a message naming the field, and ac_state_load
// leaves the context as it was. A negative amax-history count used to be accepted and then
// indexed the history at count % length < 0 (a heap overflow on the next cast).
Test(autocast, state_load_validates_every_field) {
    ac_policy p = policy("fp8-delayed");
    p.amax_history = 4;
    ac_ctx c;
    init_ctx(&c, &p, 2, 64);
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)(i - 20);
    const ac_cast_req qkv1 = {.site = AC_QKV_IN, .layer = 1, .count = true};
    for (int k = 0; k < 6; k++) ac_cast(&c, &qkv1, x, 8, 8);  // wraps the history
    ac_cast(&c, &(ac_cast_req){.site = AC_O_GRAD, .layer = 0, .count = true}, x, 8, 8);
    const size_t n = ac_state_bytes(&c);
    unsigned char *good = malloc(n), *bad = malloc(n), *again = malloc(n);
    cr_assert(good && bad && again);
    ac_state_save(&c, good);
    char msg[256] = "x";
    cr_assert_eq(ac_state_check(&c, good, n, msg, sizeof msg), AC_OK, "%s", msg);
    cr_assert_eq(ac_state_load(&c, good, n), AC_OK);
    ac_state_save(&c, again);
    cr_assert_eq(memcmp(good, again, n), 0, "save after load gives the same bytes");

    const int64_t neg = -5, big = (int64_t)1 << 62, three = 3;
    const float fnan = NAN, fneg = -1.0f, fzero = 0.0f, finf = INFINITY, fone = 1.0f, fhalf = 0.5f;
    const int32_t ineg = -1;
    struct {
        size_t at;
        const void *v;
        size_t len;
        const char *expect;
    } cases[] = {
        {count_at(&c, AC_QKV_IN, 1), &neg, 8, "count"},               // the reported overflow
        {count_at(&c, AC_QKV_IN, 1), &big, 8, "count"},               // over the stated limit
        {count_at(&c, AC_HEAD_IN, 0), &three, 8, "lm_head.in"},       // not a delayed site (bf16)
        {hist_at(&c, AC_QKV_IN, 1, 2), &fnan, 4, "amax"},
        {hist_at(&c, AC_QKV_IN, 1, 2), &fneg, 4, "amax"},
        {hist_at(&c, AC_O_GRAD, 0, 3), &fone, 4, "amax"},             // past the one amax pushed
        {hist_at(&c, AC_HEAD_IN, 2, 0), &fone, 4, "amax"},            // a site without history
        {HEAD + offsetof(ac_scaler, scale), &fzero, 4, "scale"},
        {HEAD + offsetof(ac_scaler, scale), &fneg, 4, "scale"},
        {HEAD + offsetof(ac_scaler, scale), &fnan, 4, "scale"},
        {HEAD + offsetof(ac_scaler, scale), &finf, 4, "scale"},
        {HEAD + offsetof(ac_scaler, scale), &fhalf, 4, "scale"},             // loss_scale none: exactly 1
        {HEAD + offsetof(ac_scaler, good_steps), &ineg, 4, "good_steps"},
        {HEAD + offsetof(ac_scaler, skipped), &neg, 8, "skipped"},
        {HEAD + offsetof(ac_scaler, skipped), &three, 8, "skipped"},          // none never skips
        {HEAD + offsetof(ac_scaler, grown), &three, 8, "grown"},
        {HEAD + offsetof(ac_scaler, backed_off), &neg, 8, "backed_off"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memcpy(bad, good, n);
        memcpy(bad + cases[k].at, cases[k].v, cases[k].len);
        msg[0] = 0;
        cr_assert_eq(ac_state_check(&c, bad, n, msg, sizeof msg), AC_EINVAL, "case %zu (%s) accepted", k,
                     cases[k].expect);
        cr_assert(strstr(msg, cases[k].expect), "case %zu: message '%s' lacks '%s'", k, msg, cases[k].expect);
        cr_assert_eq(ac_state_load(&c, bad, n), AC_EINVAL, "case %zu loaded", k);
        ac_state_save(&c, again);
        cr_assert_eq(memcmp(good, again, n), 0, "case %zu: a refused load changed the context", k);
    }
    // the size must be the context's exactly
    cr_assert_eq(ac_state_check(&c, good, n - 1, msg, sizeof msg), AC_EINVAL);
    cr_assert(strstr(msg, "bytes"), "%s", msg);
    cr_assert_eq(ac_state_load(&c, good, n + 1), AC_EINVAL);
    // +inf is an amax a cast can push (an infinite input), so it loads
    memcpy(bad, good, n);
    memcpy(bad + hist_at(&c, AC_QKV_IN, 1, 0), &finf, 4);
    cr_assert_eq(ac_state_check(&c, bad, n, msg, sizeof msg), AC_OK, "%s", msg);
    free(good), free(bad), free(again);
    ac_free(&c);
}

// Dynamic loss scaling: the scale stays at or above min (and finite), good_steps below the
// interval; static: the scale is the policy's.
Test(autocast, state_load_checks_the_scaler_against_the_policy) {
    const char *names[2] = {"fp16-amp", "fp16-static-1024"};
    for (int q = 0; q < 2; q++) {
        ac_policy p = policy(names[q]);
        ac_ctx c;
        init_ctx(&c, &p, 1, 16);
        const size_t n = ac_state_bytes(&c);
        unsigned char *b = malloc(n);
        cr_assert(b);
        ac_state_save(&c, b);
        char msg[256];
        cr_assert_eq(ac_state_check(&c, b, n, msg, sizeof msg), AC_OK, "%s: %s", names[q], msg);
        ac_scaler s;
        memcpy(&s, b + HEAD, sizeof s);
        const ac_scaler good = s;
        s.scale = q == 0 ? 0.5f : 2048.0f;  // below min=1; not the static scale
        memcpy(b + HEAD, &s, sizeof s);
        cr_assert_eq(ac_state_check(&c, b, n, msg, sizeof msg), AC_EINVAL, "%s: scale %g", names[q], s.scale);
        cr_assert(strstr(msg, "scale"), "%s", msg);
        if (q == 0) {
            s = good;
            s.good_steps = p.scaler.interval;
            memcpy(b + HEAD, &s, sizeof s);
            cr_assert_eq(ac_state_check(&c, b, n, msg, sizeof msg), AC_EINVAL, "good_steps = interval");
            cr_assert(strstr(msg, "good_steps"), "%s", msg);
            s = good;
            s.scale = 3.0e38f, s.grown = 5, s.backed_off = 7, s.skipped = 7;  // a grown scale is fine
            memcpy(b + HEAD, &s, sizeof s);
            cr_assert_eq(ac_state_check(&c, b, n, msg, sizeof msg), AC_OK, "%s", msg);
        }
        free(b);
        ac_free(&c);
    }
}

// A state written before attn.kv existed (version 1: no header, AC_NSITES_V1 sites) loads: its
// sites keep their scaler, counts and histories, and the KV site starts as in a fresh run (no
// amax pushed) even where the context held one; a save then writes version 2 with that state.
// The version-1 image is built here from its definition (the scaler, int64
// counts[23][layers+1], float histories[23][layers+1][amax_history]), not by ac_state_save.
Test(autocast, state_version_1_loads) {
    ac_policy p = policy("fp8-delayed");
    p.amax_history = 4;
    p.site[AC_KV] = p.site[AC_QKV_IN];  // delayed e4m3 on the KV cache too
    ac_ctx src, dst;
    init_ctx(&src, &p, 2, 64);
    init_ctx(&dst, &p, 2, 64);
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)(i - 20) * 0.25f;
    for (int k = 0; k < 6; k++) ac_cast(&src, &(ac_cast_req){.site = AC_QKV_IN, .layer = 1, .count = true}, x, 8, 8);
    ac_cast(&src, &(ac_cast_req){.site = AC_O_GRAD, .layer = -1, .count = true}, x, 8, 8);
    ac_cast(&dst, &(ac_cast_req){.site = AC_KV, .layer = 0, .count = true}, x, 8, 8);  // to be reset by the load
    src.scaler.good_steps = 3;
    const size_t L1 = 3, hl = 4, v1_slots = (size_t)AC_NSITES_V1 * L1;
    const size_t n1 = sizeof(ac_scaler) + v1_slots * (sizeof(int64_t) + hl * sizeof(float));
    unsigned char *v1 = malloc(n1);
    cr_assert(v1);
    memcpy(v1, &src.scaler, sizeof src.scaler);
    memcpy(v1 + sizeof src.scaler, src.hist_count, v1_slots * sizeof(int64_t));
    memcpy(v1 + sizeof src.scaler + v1_slots * sizeof(int64_t), src.hist, v1_slots * hl * sizeof(float));
    char msg[256] = "x";
    cr_assert_eq(ac_state_check(&dst, v1, n1, msg, sizeof msg), AC_OK, "%s", msg);
    cr_assert_eq(ac_state_load(&dst, v1, n1), AC_OK);
    cr_assert_eq(dst.scaler.good_steps, 3);
    cr_assert(!memcmp(dst.hist_count, src.hist_count, v1_slots * sizeof(int64_t)));
    cr_assert(!memcmp(dst.hist, src.hist, v1_slots * hl * sizeof(float)));
    for (size_t k = v1_slots; k < (size_t)AC_NSITES * L1; k++) {
        cr_assert_eq(dst.hist_count[k], 0, "KV slot %zu: count %lld after loading version 1", k,
                     (long long)dst.hist_count[k]);
        for (size_t i = 0; i < hl; i++) cr_assert_eq(dst.hist[k * hl + i], 0.0f);
    }
    // Saved again: version 2, every site, the same state.
    const size_t n2 = ac_state_bytes(&dst);
    cr_assert_eq(n2, AC_STATE_HEADER_BYTES + n1 + L1 * (sizeof(int64_t) + hl * sizeof(float)));
    unsigned char *v2 = malloc(n2);
    ac_state_save(&dst, v2);
    uint32_t h[6];
    memcpy(h, v2, sizeof h);
    cr_assert(h[0] == AC_STATE_MAGIC && h[1] == 2 && h[2] == AC_NSITES && h[3] == 2 && h[4] == 4 && h[5] == 0,
              "header %x %u %u %u %u %u", h[0], h[1], h[2], h[3], h[4], h[5]);
    ac_ctx again;
    init_ctx(&again, &p, 2, 64);
    cr_assert_eq(ac_state_load(&again, v2, n2), AC_OK);
    cr_assert(!memcmp(again.hist_count, dst.hist_count, (size_t)AC_NSITES * L1 * sizeof(int64_t)));
    // The magic read as float32 (where version 1 keeps its loss scale) is negative.
    float f;
    const uint32_t magic = AC_STATE_MAGIC;
    memcpy(&f, &magic, sizeof f);
    cr_assert(f < 0, "magic as a loss scale: %g", f);
    free(v1), free(v2);
    ac_free(&src), ac_free(&dst), ac_free(&again);
}

// A version-2 header that this build cannot honour is refused with a message naming it: more
// sites than this build knows (a newer fplab), another version, another model or history; a
// state of fewer sites (an older version-2 writer) loads with the rest fresh. A headerless image
// of the wrong size is neither version.
Test(autocast, state_header_refusals) {
    ac_policy p = policy("fp8-delayed");
    p.amax_history = 2;
    ac_ctx c;
    init_ctx(&c, &p, 1, 16);
    const size_t L1 = 2, hl = 2, per_site = L1 * (sizeof(int64_t) + hl * sizeof(float));
    const size_t n = ac_state_bytes(&c), big = n + per_site;
    unsigned char *b = calloc(1, big);
    ac_state_save(&c, b);
    char msg[256];
    struct {
        int word;
        uint32_t value;
        size_t size;
        const char *expect;
    } cases[] = {
        {2, AC_NSITES + 1, big, "cast sites; this build knows"},
        {2, AC_NSITES + 1, n, "newer fplab"},
        {2, 0, n, "0 cast sites"},
        {1, 3, n, "header version 3"},
        {1, 1, n, "header version 1"},
        {3, 2, n, "layers"},
        {4, 1024, n, "amax_history"},
        {5, 1, n, "reserved"},
        {2, AC_NSITES - 1, n, "bytes"},  // the header says 23 sites, the size is 24's
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        unsigned char *bad = calloc(1, big);
        memcpy(bad, b, n);
        memcpy(bad + 4 * cases[k].word, &cases[k].value, 4);
        msg[0] = 0;
        cr_assert_eq(ac_state_check(&c, bad, cases[k].size, msg, sizeof msg), AC_EINVAL, "case %zu accepted", k);
        cr_assert(strstr(msg, cases[k].expect), "case %zu: '%s' lacks '%s'", k, msg, cases[k].expect);
        cr_assert_eq(ac_state_load(&c, bad, cases[k].size), AC_EINVAL);
        free(bad);
    }
    // 23 sites under a version-2 header: the first 23 sites' slots, then the histories.
    const size_t n23 = n - per_site;
    unsigned char *s23 = malloc(n23);
    const size_t counts = AC_STATE_HEADER_BYTES + sizeof(ac_scaler), c23 = (size_t)AC_NSITES_V1 * L1 * sizeof(int64_t);
    memcpy(s23, b, counts + c23);
    memcpy(s23 + counts + c23, b + counts + c23 + L1 * sizeof(int64_t), (size_t)AC_NSITES_V1 * L1 * hl * sizeof(float));
    const uint32_t sites23 = AC_NSITES_V1;
    memcpy(s23 + 8, &sites23, 4);
    cr_assert_eq(ac_state_check(&c, s23, n23, msg, sizeof msg), AC_OK, "%s", msg);
    cr_assert_eq(ac_state_load(&c, s23, n23), AC_OK);
    // headerless, and not version 1's size
    cr_assert_eq(ac_state_check(&c, b + AC_STATE_HEADER_BYTES, n - AC_STATE_HEADER_BYTES, msg, sizeof msg), AC_EINVAL);
    cr_assert(strstr(msg, "version-1"), "%s", msg);
    free(b), free(s23);
    ac_free(&c);
}

// Adding a site changed no stochastic-rounding draw of the version-1 sites (a run resumed from
// an older checkpoint continues as it would have): their key is (seed ^ "autocast", stream
// ((step * 64 + micro) * 23 + site) * 1024 + 2 * (layer + 1) + orientation), as in version 1;
// attn.kv draws under a seed of its own.
Test(autocast, sr_streams_of_version_1_sites) {
    ac_policy p = policy("fp32");
    p.site[AC_ATT_PROBS] = policy("bf16-amp").site[AC_QKV_IN];
    p.site[AC_KV] = p.site[AC_ATT_PROBS];
    ac_ctx c;
    char msg[256];
    cr_assert_eq(ac_init(&c, &p, 2, 77, AC_TEL_OFF, 16, msg, sizeof msg), AC_OK, "%s", msg);
    ac_begin_step(&c, 3);
    ac_begin_micro(&c, 2);
    const fmt_t *f;
    fmt_round_opts o, k;
    cr_assert(ac_plain_opts(&c, AC_ATT_PROBS, 1, &f, &o));
    cr_assert_eq(o.seed, 77 ^ 0x6175746f63617374ULL);
    cr_assert_eq(o.stream, ((3 * 64 + 2) * 23 + (uint64_t)AC_ATT_PROBS) * 1024 + 2 * 2 + 0);
    cr_assert(ac_plain_opts(&c, AC_KV, 1, &f, &k));
    cr_assert(k.seed != o.seed, "attn.kv shares the key of the version-1 sites");
    ac_free(&c);
}

// An operand of an emulated product (ac_cast_operand) holds what ac_cast returns, split into
// element values and scales: read through mm_operand's definition (scaled_mm.h: A (M x K) or
// B (K x N), transposed or not, A's scales (M, nblocks), B's (nblocks, N), the tensor scale),
// the value at each stored element is ac_cast's, bitwise for power-of-two scales and within 4
// roundings (4u) for NVFP4's e4m3 scales under an fp32 tensor scale (scale.h: ac_cast returns
// q * fl(sf / s_enc), the operand q, sf and fl(1 / s_enc)). Every orientation: K along the
// columns or the rows of the stored matrix, as side A or B; ragged tiles.
Test(autocast, operand_holds_the_cast_values) {
    static const char *const rules[] = {"e4m3", "e4m3 tensor", "e4m3 delayed", "e4m3 mx", "e4m3 row",
                                        "e4m3 block:8:e8m0", "e4m3 tile:4x8:e8m0", "e2m1 nvfp4",
                                        "e5m2 block:8:e8m0 sr"};
    enum { R = 13, C = 37 };
    float x[R * C], deq[R * C];
    tu_rng g = {fmt_rng_make_key(5, 5), 0};
    for (int i = 0; i < R * C; i++) x[i] = (float)(tu_rng_normal(&g) * exp2(tu_rng_normal(&g) * 3));
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        char text[256], msg[512];
        snprintf(text, sizeof text, "name t\nsite * fp32\nsite mlp.down.in %s\nsite mlp.down.w %s\n"
                 "accumulator m13 mlp.down.fprop\n", rules[r], rules[r]);
        ac_policy p;
        cr_assert_eq(ac_policy_parse(&p, text, "test", msg, sizeof msg), AC_OK, "%s", msg);
        ac_ctx c;
        init_ctx(&c, &p, 1, R * C);
        // Delayed scaling: a history first, so that the scale is not 1.
        ac_cast(&c, &(ac_cast_req){.site = AC_DOWN_IN, .layer = 0, .count = true}, x, R, C);
        const bool pow2 = !strstr(rules[r], "nvfp4");
        for (int kr = 0; kr < 2; kr++)
            for (int side = 0; side < 2; side++) {
                const ac_cast_req q = {.site = AC_DOWN_IN, .layer = 0, .k_rows = kr};
                memcpy(deq, ac_cast(&c, &q, x, R, C), sizeof deq);
                mm_operand op;
                const ac_cast_req q1 = {.site = AC_DOWN_IN, .layer = 0, .k_rows = kr, .slot = 1};
                ac_cast_operand(&c, &q1, x, R, C, side ? MM_SIDE_B : MM_SIDE_A, &op);
                const size_t K = kr ? R : C, other = kr ? C : R;
                const size_t nb = op.scales ? (op.block_k ? (K + (size_t)op.block_k - 1) / (size_t)op.block_k : 1) : 0;
                const bool trans = side ? !kr : kr;
                cr_assert_eq(op.trans, trans, "%s", rules[r]);
                for (size_t i = 0; i < R; i++)
                    for (size_t j = 0; j < C; j++) {
                        const size_t k = kr ? i : j, o = kr ? j : i;  // index along K, along the other
                        // mm_operand's reading: A[o][k] or B[k][o], stored transposed or not.
                        const size_t at = side == 0 ? (trans ? k * op.ld + o : o * op.ld + k)
                                                    : (trans ? o * op.ld + k : k * op.ld + o);
                        const size_t blk = op.block_k ? k / (size_t)op.block_k : 0;
                        const float s = !op.scales ? 1.0f : side == 0 ? op.scales[o * nb + blk] : op.scales[blk * other + o];
                        const float v = op.x[at] * s * op.tensor_scale, want = deq[i * C + j];
                        if (pow2) cr_assert(tu_samef(v, want), "%s kr %d side %d (%zu,%zu): %a vs %a", rules[r], kr, side, i, j, v, want);
                        else cr_assert(fabsf(v - want) <= 0x1p-22f * fabsf(want), "%s (%zu,%zu): %a vs %a", rules[r], i, j, v, want);
                        cr_assert(representable(&p.site[AC_DOWN_IN].fmt, op.x[at]), "%s: %a not an element value", rules[r], op.x[at]);
                    }
            }
        ac_free(&c);
    }
}

// Operands from ac_cast_operand, in each storage (A as M x K or K x M, B as K x N or N x K),
// multiplied by mm_cpu with an emulated accumulator, equal the MPFR reference (mm_ref) bit for
// bit: the trainer's emulated products are the kernel's, on the operands the policy casts.
Test(autocast, operand_products_are_the_reference) {
    enum { M = 9, N = 7, K = 70 };
    float a[M * K], at[K * M], b[K * N], bt[N * K];
    tu_rng g = {fmt_rng_make_key(6, 6), 0};
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) a[i * K + k] = at[k * M + i] = (float)tu_rng_normal(&g);
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) b[k * N + j] = bt[j * K + k] = (float)(tu_rng_normal(&g) * 1e-3);
    static const char *const rules[][2] = {{"e4m3 block:16:e8m0", "e5m2 block:16:e8m0"},
                                           {"e4m3 tensor", "e5m2 delayed"},
                                           {"e2m1 nvfp4", "e2m1 nvfp4"},
                                           {"e4m3 row", "e4m3 tile:4x16:e8m0"}};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        char text[256], msg[512];
        snprintf(text, sizeof text, "name t\nsite * fp32\nsite mlp.down.in %s\nsite mlp.down.grad %s\n"
                 "accumulator m10:rtz:promote=16 mlp.down.wgrad\n", rules[r][0], rules[r][1]);
        ac_policy p;
        cr_assert_eq(ac_policy_parse(&p, text, "test", msg, sizeof msg), AC_OK, "%s", msg);
        ac_ctx c;
        init_ctx(&c, &p, 1, M * K);
        const ac_cast_req hist = {.site = AC_DOWN_GRAD, .layer = 0, .k_rows = true, .count = true};
        ac_cast(&c, &hist, b, K, N);  // a history for delayed scaling
        mm_opts o;
        mm_opts_default(&o);
        o.acc = p.acc[AC_PROJ_DOWN][AC_WGRAD];
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                mm_operand A, B;
                const ac_cast_req qa = {.site = AC_DOWN_IN, .layer = 0, .k_rows = ta},
                                  qb = {.site = AC_DOWN_GRAD, .layer = 0, .k_rows = !tb, .slot = 1};
                if (ta) ac_cast_operand(&c, &qa, at, K, M, MM_SIDE_A, &A);
                else ac_cast_operand(&c, &qa, a, M, K, MM_SIDE_A, &A);
                if (tb) ac_cast_operand(&c, &qb, bt, N, K, MM_SIDE_B, &B);
                else ac_cast_operand(&c, &qb, b, K, N, MM_SIDE_B, &B);
                float cpu[M * N], ref[M * N];
                cr_assert_eq(mm_cpu(cpu, N, &A, &B, M, N, K, &o), MM_OK, "%s", rules[r][0]);
                cr_assert_eq(mm_ref(ref, N, &A, &B, M, N, K, &o), MM_OK, "%s", rules[r][0]);
                for (int i = 0; i < M * N; i++)
                    cr_assert(tu_samef(cpu[i], ref[i]), "%s/%s trans %d%d [%d]: cpu %a, mpfr %a", rules[r][0],
                              rules[r][1], ta, tb, i, cpu[i], ref[i]);
                if (ta == 0 && tb == 0) continue;
                // Every storage holds the same operand: the product is the untransposed one's.
                mm_operand A0, B0;
                ac_cast_operand(&c, &(ac_cast_req){.site = AC_DOWN_IN, .layer = 0, .slot = 2}, a, M, K, MM_SIDE_A, &A0);
                const ac_cast_req qb0 = {.site = AC_DOWN_GRAD, .layer = 0, .k_rows = true, .slot = 3};
                ac_cast_operand(&c, &qb0, b, K, N, MM_SIDE_B, &B0);
                float c0[M * N];
                cr_assert_eq(mm_cpu(c0, N, &A0, &B0, M, N, K, &o), MM_OK);
                for (int i = 0; i < M * N; i++)
                    cr_assert(tu_samef(cpu[i], c0[i]), "%s trans %d%d [%d]: %a vs %a", rules[r][0], ta, tb, i,
                              cpu[i], c0[i]);
            }
        ac_free(&c);
    }
}

// The cast hook sees every value-returning cast once, after it, with its input, its values and
// its key (site, layer, shape, orientation, count); inactive sites and operand casts call nothing.
typedef struct {
    int calls;
    ac_site site;
    int layer;
    const float *x, *out;
    size_t rows, cols;
    bool k_rows, count;
} hook_seen;

static void record_hook(void *user, ac_site s, int layer, const float *x, const float *out, size_t rows, size_t cols,
                        bool k_rows, bool count) {
    hook_seen *h = user;
    *h = (hook_seen){h->calls + 1, s, layer, x, out, rows, cols, k_rows, count};
}

Test(autocast, cast_hook_sees_each_cast) {
    ac_policy p = policy("bf16-amp");
    ac_ctx c;
    init_ctx(&c, &p, 2, 256);
    hook_seen h = {0};
    c.hook = record_hook, c.hook_user = &h;
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = 1.0f + (float)i / 3.0f;
    const float *y = ac_cast(&c, &(ac_cast_req){.site = AC_DOWN_GRAD, .layer = 1, .k_rows = true, .slot = 2}, x, 8, 32);
    cr_assert_eq(h.calls, 1);
    cr_assert(h.site == AC_DOWN_GRAD && h.layer == 1 && h.x == x && h.out == y && h.rows == 8 && h.cols == 32);
    cr_assert(h.k_rows && !h.count);
    ac_cast_inplace(&c, AC_O_IN, 0, x, 16, 16, true);
    cr_assert_eq(h.calls, 2);
    cr_assert(h.x == NULL && h.out == x && h.count && !h.k_rows);
    const ac_cast_req master = {.site = AC_MASTER, .layer = -1, .count = true};
    ac_cast(&c, &master, x, 16, 16);  // inactive in bf16-amp: no call
    ac_cast_inplace(&c, AC_RESIDUAL, 0, x, 16, 16, true);
    cr_assert_eq(h.calls, 2);
    ac_free(&c);
}

// --- the operands of a projection's products: casts reused only while their bits hold

static void record_hook_nop(void *user, ac_site s, int layer, const float *x, const float *out, size_t rows,
                            size_t cols, bool k_rows, bool count) {
    (void)user, (void)s, (void)layer, (void)x, (void)out, (void)rows, (void)cols, (void)k_rows, (void)count;
}

static ac_policy policy_text(const char *text) {
    ac_policy p;
    char msg[256] = "";
    cr_assert_eq(ac_policy_parse(&p, text, "test", msg, sizeof msg), AC_OK, "%s", msg);
    return p;
}

enum { GN = 32, GIC = 16, GOC = 8 };

// wgrad's cast of x, made afresh in a context of its own at the same step and micro-batch.
static void fresh_wgrad_x(const ac_policy *p, uint64_t step, int micro, int layer, const float *x, float *out) {
    ac_ctx r;
    init_ctx(&r, p, 2, GN * GIC);
    ac_begin_step(&r, step), ac_begin_micro(&r, micro);
    const ac_cast_req q = {.site = AC_QKV_IN, .layer = layer, .k_rows = true, .slot = 3};
    memcpy(out, ac_cast(&r, &q, x, GN, GIC), sizeof(float) * GN * GIC);
    ac_free(&r);
}

static void fill(float *x, size_t n, uint64_t seed) {
    tu_rng r = {fmt_rng_make_key(seed, 0), 0};
    for (size_t i = 0; i < n; i++) x[i] = (float)tu_rng_normal(&r);
}

// One wgrad of q/k/v (layer `layer`): its x operand must be the fresh cast, and *reused says
// whether autocast took it from its buffer.
static void wgrad_x_check(ac_ctx *c, const ac_policy *p, int layer, const float *x, const float *dout, bool want,
                          const char *what) {
    const ac_gemm_req g = {.proj = AC_PROJ_QKV, .layer = layer, .N = GN, .IC = GIC, .OC = GOC};
    ac_operands o;
    ac_wgrad_operands(c, &g, dout, x, &o);
    static float ref[GN * GIC];
    fresh_wgrad_x(p, c->step, c->micro, layer, x, ref);
    cr_assert_eq(!!(o.reused & AC_REUSED_WGRAD_X), want, "%s: reused %u, expected %d", what, o.reused, want);
    cr_assert(memcmp(o.b, ref, sizeof ref) == 0, "%s: wgrad's x is not the fresh cast", what);
}

// wgrad's cast of x serves the next wgrad of the same input (k after q), and is cast again when
// anything its bits depend on moved: the micro-batch or step (the stochastic-rounding draws),
// another cast written to its buffer, another layer, a new forward of the projection (x
// rewritten in place), a hook. A cache that ignored any of these returns stale draws.
Test(autocast, wgrad_cast_of_x_is_reused_only_while_it_holds) {
    const ac_policy p = policy_text("name t\nsite *.in bf16 sr\nsite *.grad bf16\n");
    ac_ctx c;
    init_ctx(&c, &p, 2, GN * GIC);
    static float x[GN * GIC], x2[GN * GIC], dout[GN * GOC], in_buf[GN * GIC];
    fill(x, GN * GIC, 1), fill(x2, GN * GIC, 2), fill(dout, GN * GOC, 3);
    const ac_gemm_req f = {.proj = AC_PROJ_QKV, .layer = 0, .N = GN, .IC = GIC, .OC = GOC};
    ac_operands in;
    ac_fprop_input(&c, &f, x, &in);
    wgrad_x_check(&c, &p, 0, x, dout, false, "first wgrad");
    wgrad_x_check(&c, &p, 0, x, dout, true, "second wgrad, same input");
    ac_begin_micro(&c, 1);
    wgrad_x_check(&c, &p, 0, x, dout, false, "next micro-batch");
    wgrad_x_check(&c, &p, 0, x, dout, true, "again in that micro-batch");
    ac_begin_step(&c, 1);
    wgrad_x_check(&c, &p, 0, x, dout, false, "next step");
    ac_cast(&c, &(ac_cast_req){.site = AC_O_IN, .layer = 0, .k_rows = true, .slot = 3}, x2, GN, GIC);
    wgrad_x_check(&c, &p, 0, x, dout, false, "after another cast into its buffer");
    wgrad_x_check(&c, &p, 1, x, dout, false, "another layer");
    wgrad_x_check(&c, &p, 0, x, dout, false, "back to layer 0 (buffer overwritten by layer 1)");
    wgrad_x_check(&c, &p, 0, x2, dout, false, "another input");
    // a new forward of the projection with other values at the same address
    memcpy(in_buf, x, sizeof in_buf);
    ac_fprop_input(&c, &f, in_buf, &in);
    wgrad_x_check(&c, &p, 0, in_buf, dout, false, "first wgrad after the forward");
    memcpy(in_buf, x2, sizeof in_buf);
    ac_fprop_input(&c, &f, in_buf, &in);
    wgrad_x_check(&c, &p, 0, in_buf, dout, false, "after a new forward, new values");
    c.hook = record_hook_nop;
    wgrad_x_check(&c, &p, 0, in_buf, dout, false, "with a hook");
    ac_free(&c);
}

// wgrad's cast of dout is dgrad's where the two orientations have the same bits (bf16: no
// scales, no draws) and that dgrad was the call just before; otherwise, or with block scales
// (mxfp8's differ by orientation), it is cast again. Either way the values are the fresh cast.
Test(autocast, wgrad_reuses_dgrad_dout_only_where_orientations_agree) {
    static float x[GN * GIC], w[GOC * GIC], dout[GN * GOC], dout2[GN * GOC], ref[GN * GOC];
    fill(x, GN * GIC, 4), fill(w, GOC * GIC, 5), fill(dout, GN * GOC, 6), fill(dout2, GN * GOC, 7);
    const char *names[2] = {"bf16-amp", "mxfp8"};
    for (int k = 0; k < 2; k++) {
        const ac_policy p = policy(names[k]);
        ac_ctx c, r;
        init_ctx(&c, &p, 1, GN * GIC), init_ctx(&r, &p, 1, GN * GIC);
        const ac_gemm_req g = {.proj = AC_PROJ_O, .layer = 0, .N = GN, .IC = GIC, .OC = GOC};
        const ac_cast_req q = {.site = AC_O_GRAD, .layer = 0, .k_rows = true, .slot = 2};
        memcpy(ref, ac_cast(&r, &q, dout, GN, GOC), sizeof ref);
        for (int gap = 0; gap < 2; gap++) {
            ac_operands o;
            ac_dgrad_operands(&c, &g, dout, w, &o);
            if (gap) ac_dgrad_operands(&c, &g, dout2, w, &o);  // another dgrad between
            ac_wgrad_operands(&c, &g, dout, x, &o);
            const bool want = k == 0 && !gap;
            cr_assert_eq(!!(o.reused & AC_REUSED_DGRAD_DOUT), want, "%s, gap %d: reused %u", names[k], gap, o.reused);
            cr_assert(memcmp(o.a, ref, sizeof ref) == 0, "%s, gap %d: wgrad's dout is not the fresh cast", names[k],
                      gap);
        }
        ac_free(&c), ac_free(&r);
    }
}

// Delayed scaling: dgrad's cast of dout pushes its amax, so wgrad's cast of the same dout takes
// the scale of a history that now holds it. Where that scale is the one dgrad cast with (the
// history's max did not move), wgrad takes dgrad's cast; where it moved (the first step, a larger
// amax) it casts again. Either way wgrad's dout is bit for bit the fresh cast of a context with
// the same history.
Test(autocast, wgrad_reuses_delayed_dout_where_the_scale_stays) {
    static float x[GN * GIC], w[GOC * GIC], dout[GN * GOC], big[GN * GOC], small[GN * GOC], ref[GN * GOC];
    fill(x, GN * GIC, 4), fill(w, GOC * GIC, 5), fill(dout, GN * GOC, 6);
    for (size_t i = 0; i < GN * GOC; i++) big[i] = dout[i] * 4.0f, small[i] = dout[i] * 0.375f;
    const ac_policy p = policy("fp8-delayed");
    ac_ctx c, r;
    init_ctx(&c, &p, 1, GN * GIC), init_ctx(&r, &p, 1, GN * GIC);
    const ac_gemm_req g = {.proj = AC_PROJ_O, .layer = 0, .N = GN, .IC = GIC, .OC = GOC};
    const ac_cast_req q = {.site = AC_O_GRAD, .layer = 0, .k_rows = true, .slot = 2};
    const struct { const float *d; bool reused; const char *what; } cases[] = {
        {dout, false, "first cast: the history was empty"},
        {dout, true, "the same amax again"},
        {big, false, "a larger amax"},
        {small, true, "a smaller amax"},
        {dout, true, "between the two"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ac_operands o, ro;
        ac_dgrad_operands(&r, &g, cases[k].d, w, &ro);  // the same pushes in the reference context
        memcpy(ref, ac_cast(&r, &q, cases[k].d, GN, GOC), sizeof ref);
        ac_dgrad_operands(&c, &g, cases[k].d, w, &o);
        ac_wgrad_operands(&c, &g, cases[k].d, x, &o);
        cr_assert_eq(!!(o.reused & AC_REUSED_DGRAD_DOUT), cases[k].reused, "%s: reused %u", cases[k].what, o.reused);
        cr_assert(memcmp(o.a, ref, sizeof ref) == 0, "%s: wgrad's dout is not the fresh cast", cases[k].what);
    }
    ac_free(&c), ac_free(&r);
}

// dgrad takes the forward's cast of W (g.w_cast) where W's rule casts alike in both orientations
// (bf16; NVFP4's and fp8-block's square tiles, on a W of 150 x 140 whose rows and columns have
// their own magnitudes, with ragged last tiles) and no hook observes the casts; elsewhere (MX's
// 1x32 blocks, delayed scaling) it casts W again. Either way dgrad's W is the fresh cast along
// OC after the same forward, bit for bit: for the square tiles this is the claim that both
// orientations agree.
Test(autocast, dgrad_takes_the_forward_cast_of_w_where_orientations_agree) {
    enum { N = 8, OC = 150, IC = 140 };
    static float w[OC * IC], dout[N * OC], fwd[OC * IC], ref[OC * IC];
    fill(w, OC * IC, 11), fill(dout, N * OC, 12);
    for (int r = 0; r < OC; r++)
        for (int k = 0; k < IC; k++) w[r * IC + k] = ldexpf(w[r * IC + k], r % 7 - k % 5);
    const char *names[] = {"bf16-amp", "nvfp4", "fp8-block", "mxfp8", "fp8-delayed"};
    const bool agree[] = {true, true, true, false, false};
    for (int k = 0; k < 5; k++)
        for (int hook = 0; hook < 2; hook++) {
            const ac_policy p = policy(names[k]);
            ac_ctx c, r;
            init_ctx(&c, &p, 1, OC * IC), init_ctx(&r, &p, 1, OC * IC);
            cr_assert_eq(ac_cast_orientation_free(&c, AC_O_W, 0, 0), agree[k], "%s", names[k]);
            const ac_cast_req fq = {.site = AC_O_W, .layer = 0, .count = true, .slot = 1};
            memcpy(fwd, ac_cast(&c, &fq, w, OC, IC), sizeof fwd);
            const ac_cast_req dq = {.site = AC_O_W, .layer = 0, .k_rows = true, .slot = 1};
            ac_cast(&r, &fq, w, OC, IC);  // the same forward first (delayed scaling's history moves)
            memcpy(ref, ac_cast(&r, &dq, w, OC, IC), sizeof ref);
            if (hook) c.hook = record_hook_nop;
            const ac_gemm_req g = {.proj = AC_PROJ_O, .layer = 0, .N = N, .IC = IC, .OC = OC, .w_cast = fwd};
            ac_operands o;
            ac_dgrad_operands(&c, &g, dout, w, &o);
            const bool want = agree[k] && !hook;
            cr_assert_eq(!!(o.reused & AC_REUSED_FPROP_W), want, "%s, hook %d: reused %u", names[k], hook, o.reused);
            cr_assert_eq(o.b == fwd, want, "%s, hook %d", names[k], hook);
            cr_assert(memcmp(o.b, ref, sizeof ref) == 0, "%s, hook %d: dgrad's W is not the fresh cast along OC",
                      names[k], hook);
            ac_free(&c), ac_free(&r);
        }
}

// The forward casts a projection's input in place only where the request allows it and one
// cast serves wgrad too (bf16-amp); wgrad then multiplies by x as it is. Elsewhere x is left
// alone and wgrad casts it.
Test(autocast, fprop_input_in_place_serves_wgrad) {
    static float x0[GN * GIC], x[GN * GIC], dout[GN * GOC], ref[GN * GIC];
    fill(x0, GN * GIC, 8), fill(dout, GN * GOC, 9);
    const char *names[2] = {"bf16-amp", "mxfp8"};
    for (int k = 0; k < 2; k++)
        for (int ok = 0; ok < 2; ok++) {
            const ac_policy p = policy(names[k]);
            ac_ctx c, r;
            init_ctx(&c, &p, 1, GN * GIC), init_ctx(&r, &p, 1, GN * GIC);
            memcpy(ref, ac_cast(&r, &(ac_cast_req){.site = AC_DOWN_IN, .layer = 0}, x0, GN, GIC), sizeof ref);
            memcpy(x, x0, sizeof x);
            const ac_gemm_req g = {.proj = AC_PROJ_DOWN, .layer = 0, .N = GN, .IC = GIC, .OC = GOC, .in_place_ok = ok};
            ac_operands in, o;
            ac_fprop_input(&c, &g, x, &in);
            const bool in_place = k == 0 && ok;
            cr_assert_eq(in.a == x, in_place, "%s, in_place_ok %d", names[k], ok);
            cr_assert(memcmp(x, in_place ? ref : x0, sizeof x) == 0, "%s, in_place_ok %d: x", names[k], ok);
            cr_assert(memcmp(in.a, ref, sizeof ref) == 0, "%s, in_place_ok %d: the cast input", names[k], ok);
            ac_wgrad_operands(&c, &g, dout, x, &o);
            cr_assert_eq(!!(o.reused & AC_REUSED_INPUT), in_place, "%s, in_place_ok %d: reused %u", names[k], ok,
                         o.reused);
            memcpy(ref, ac_cast(&r, &(ac_cast_req){.site = AC_DOWN_IN, .layer = 0, .k_rows = true, .slot = 3}, x0, GN,
                                GIC), sizeof ref);
            cr_assert(memcmp(o.b, ref, sizeof ref) == 0, "%s, in_place_ok %d: wgrad's x", names[k], ok);
            ac_free(&c), ac_free(&r);
        }
}
