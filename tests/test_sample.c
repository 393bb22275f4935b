// test_sample.c: token generation (trainer/sample.h). sample_pick on hand-made logits (greedy,
// first index on ties, inverse-CDF picks at known draws, temperature, the nucleus cut,
// non-finite logits); sample_generate against a step-by-step reference written here (the
// window of the last seq_len tokens, argmax for greedy, the documented draw
// fmt_rng_uniform(key(seed, SAMPLE_RNG_STREAM), step) for sampling); determinism and seed
// dependence; top-p with a tiny p equals greedy; option and prompt validation; what is fed
// (the start token, then the prompt: sample_start_token, sample_prompt_tokens); under a KV-cache
// policy every step reads what a cache of rounded keys and values holds. What `fplab sample`
// prints, against llama2.c's run.c, is checked in test_export.c.
// FPLAB_SEED replays the random models.
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/scale.h"
#include "kernels/llama_ops.h"
#include "tests/test_util.h"
#include "trainer/eval.h"
#include "trainer/llama.h"
#include "trainer/sample.h"

static void setup(void) { llama_ops_threads(1); }
TestSuite(sample, .init = setup);

// --- sample_pick on hand-made logits

enum { V4 = 4 };
static double work[64];
static int idx[64];

// logits log(0.1), log(0.2), log(0.3), log(0.4): probabilities 0.1 .. 0.4 at temperature 1.
static void four_logits(float *l) {
    static const double p[V4] = {0.1, 0.2, 0.3, 0.4};
    for (int i = 0; i < V4; i++) l[i] = (float)log(p[i]);
}

Test(sample, pick_greedy_is_first_argmax) {
    float l[V4];
    four_logits(l);
    cr_assert_eq(sample_pick(l, V4, 0, 1, 0.99, work, idx), 3);
    const float ties[5] = {-1, 2, 0.5f, 2, 2};
    cr_assert_eq(sample_pick(ties, 5, 0, 1, 0, work, idx), 1, "ties go to the first index");
    cr_assert_eq(sample_pick(ties, 5, 1, 1e-9, 0.999, work, idx), 1, "tiny top-p: the first argmax");
}

Test(sample, pick_inverse_cdf) {
    float l[V4];
    four_logits(l);
    // cdf 0.1, 0.3, 0.6, 1.0 (up to float rounding of the logits, ~1e-7): draws away from the
    // boundaries pick the interval they fall in.
    static const struct {
        double u;
        int want;
    } c[] = {{0, 0}, {0.05, 0}, {0.0999, 0}, {0.1001, 1}, {0.25, 1}, {0.31, 2}, {0.59, 2}, {0.61, 3}, {0.9999999, 3}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        cr_assert_eq(sample_pick(l, V4, 1, 1, c[i].u, work, idx), c[i].want, "u = %g", c[i].u);
}

Test(sample, pick_temperature) {
    float l[V4];
    four_logits(l);
    // temperature 2: probabilities proportional to sqrt(p); temperature 1e-3: token 3 holds all
    // but ~e^-288 of the mass (u = 0 exactly would pick token 2, whose mass is not 0).
    double q[V4], tot = 0, cdf = 0;
    for (int i = 0; i < V4; i++) tot += q[i] = sqrt(0.1 * (i + 1));
    for (int i = 0; i < V4; i++) {
        const double lo = cdf, hi = cdf + q[i] / tot;
        cdf = hi;
        cr_assert_eq(sample_pick(l, V4, 2, 1, (lo + hi) / 2, work, idx), i, "temperature 2, token %d", i);
        if (i < V4 - 1) {
            cr_assert_eq(sample_pick(l, V4, 2, 1, hi - 1e-6, work, idx), i);
            cr_assert_eq(sample_pick(l, V4, 2, 1, hi + 1e-6, work, idx), i + 1);
        }
    }
    cr_assert_eq(sample_pick(l, V4, 1e-3, 1, 0.5, work, idx), 3);
    cr_assert_eq(sample_pick(l, V4, 1e-3, 1, 1e-9, work, idx), 3);
}

Test(sample, pick_top_p) {
    float l[V4];
    four_logits(l);
    // sorted 0.4 (3), 0.3 (2), 0.2 (1), 0.1 (0). top-p 0.5: cumulative 0.4, 0.7 > 0.5, so the
    // nucleus is {3, 2} with mass 0.7; a draw u picks 3 below 0.4/0.7, else 2.
    cr_assert_eq(sample_pick(l, V4, 1, 0.5, 0.5, work, idx), 3);
    cr_assert_eq(sample_pick(l, V4, 1, 0.5, 0.4 / 0.7 - 1e-6, work, idx), 3);
    cr_assert_eq(sample_pick(l, V4, 1, 0.5, 0.4 / 0.7 + 1e-6, work, idx), 2);
    cr_assert_eq(sample_pick(l, V4, 1, 0.5, 0.9999999, work, idx), 2, "never outside the nucleus");
    // top-p 0.39: the first token alone exceeds it.
    for (double u = 0; u < 1; u += 0.125) cr_assert_eq(sample_pick(l, V4, 1, 0.39, u, work, idx), 3);
    // top-p 0.75: {3, 2, 1} (0.4, 0.7, 0.9 > 0.75); u = 0.99 picks the last of them, never 0.
    cr_assert_eq(sample_pick(l, V4, 1, 0.75, 0.99, work, idx), 1);
    cr_assert_eq(sample_pick(l, V4, 1, 0.75, 0.7 / 0.9 + 1e-6, work, idx), 1);
    cr_assert_eq(sample_pick(l, V4, 1, 0.75, 0.7 / 0.9 - 1e-6, work, idx), 2);
}

Test(sample, pick_rejects_non_finite) {
    float l[V4];
    four_logits(l);
    l[2] = NAN;
    cr_assert_eq(sample_pick(l, V4, 0, 1, 0, work, idx), -1);
    cr_assert_eq(sample_pick(l, V4, 1, 1, 0, work, idx), -1);
    l[2] = INFINITY;
    cr_assert_eq(sample_pick(l, V4, 1, 0.5, 0, work, idx), -1);
}

// --- generation from a model

// dim 32, 2 layers, 4 heads, 2 kv heads, hidden 96, vocab 20, seq_len 16, an untied head (with
// a tied one and large embeddings the argmax is the last token again: greedy would only repeat
// it, and a wrong context window would go unnoticed). `scaled`: matrices x10 (embedding x50)
// so that the logits are O(1) and greedy's argmax is well separated; unscaled
// (llama_init_weights as is) the logits are ~0.01 and sampling at temperature 1 is close to
// uniform over the 20 tokens.
static void make_model(llama_model *m, bool scaled, uint64_t seed) {
    const llama_config c = {.dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .hidden_dim = 96,
                            .vocab_size = 20, .seq_len = 16, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                            .tied = false};
    char msg[256];
    cr_assert_eq(llama_init(m, &c, LLAMA_RECOMPUTE_NONE, msg, sizeof msg), LLAMA_OK, "%s", msg);
    llama_init_weights(m, seed);
    size_t s[LP_COUNT];
    llama_param_sizes(&c, s);
    if (scaled)
        for (int i = 0; i < LP_COUNT; i++)
            if (llama_param_is_matrix(i))
                for (size_t j = 0; j < s[i]; j++) m->p.t[i][j] *= i == LP_TOK_EMB ? 50 : 10;
}

typedef struct {
    int32_t tok[256];
    int n;
} collected;

static int collect(void *ctx, int32_t t) {
    collected *c = ctx;
    cr_assert_lt(c->n, 256);
    c->tok[c->n++] = t;
    return 0;
}

static void generate(llama_model *m, const int32_t *prompt, int np, const sample_opts *o, int32_t *out) {
    char msg[256];
    collected c = {.n = 0};
    sample_sink sink = {.emit = collect, .ctx = &c, .out = out, .n_done = -1};
    cr_assert_eq(sample_generate(m, prompt, np, o, &sink, msg, sizeof msg), SAMPLE_OK, "%s", msg);
    cr_assert_eq(sink.n_done, o->n_tokens);
    cr_assert_eq(c.n, o->n_tokens, "the callback saw %d tokens", c.n);
    cr_assert(!memcmp(c.tok, out, (size_t)c.n * sizeof *out), "callback and out disagree");
}

static int n_distinct(const int32_t *t, int n) {
    int k = 0;
    for (int v = 0; v < 64; v++)
        for (int i = 0; i < n; i++)
            if (t[i] == v) {
                k++;
                break;
            }
    return k;
}

// The reference: the same steps written out. Each step runs llama_forward over the last
// min(len, seq_len) tokens; greedy takes the test's own argmax, sampling the inverse CDF of
// softmax(logits / T) in double at draw fmt_rng_uniform(key(seed, SAMPLE_RNG_STREAM), step).
static void reference(llama_model *m, const int32_t *prompt, int np, const sample_opts *o, int32_t *out) {
    const int V = m->cfg.vocab_size, T = m->cfg.seq_len;
    int *all = malloc((size_t)(np + o->n_tokens) * sizeof *all);
    for (int i = 0; i < np; i++) all[i] = prompt[i];
    const fmt_rng_key key = fmt_rng_make_key(o->seed, SAMPLE_RNG_STREAM);
    for (long s = 0; s < o->n_tokens; s++) {
        const int len = np + (int)s, t = len < T ? len : T;
        cr_assert(!isnan(llama_forward(m, all + len - t, NULL, 1, t)));
        const float *lg = llama_logits(m) + (size_t)(t - 1) * V;
        int pick = 0;
        if (o->temperature == 0) {
            for (int v = 1; v < V; v++)
                if (lg[v] > lg[pick]) pick = v;
        } else {
            double p[64], mx = -INFINITY, tot = 0, cdf = 0;
            for (int v = 0; v < V; v++) mx = fmax(mx, lg[v]);
            for (int v = 0; v < V; v++) tot += p[v] = exp((lg[v] - mx) / o->temperature);
            const double r = fmt_rng_uniform(key, (uint64_t)s) * tot;
            pick = V - 1;
            for (int v = 0; v < V; v++)
                if (r < (cdf += p[v])) {
                    pick = v;
                    break;
                }
        }
        out[s] = all[len] = pick;
    }
    free(all);
}

static void random_prompt(int32_t *p, int n, uint64_t seed) {
    tu_rng r = {fmt_rng_make_key(seed, 3), 0};
    for (int i = 0; i < n; i++) p[i] = tu_rng_int(&r, 0, 19);
}

Test(sample, greedy_is_argmax_and_deterministic) {
    const uint64_t seed = tu_seed("sample", "greedy", 0x5a3b1e);
    llama_model m;
    make_model(&m, true, seed);
    // A prompt longer than seq_len (16): the window must slide from the first step on, and 40
    // generated tokens slide it past the 2 * seq_len buffer twice.
    enum { NP = 21, N = 40 };
    int32_t prompt[NP], a[N], b[N], ref[N];
    random_prompt(prompt, NP, seed);
    const sample_opts o = {.n_tokens = N, .temperature = 0, .top_p = 1, .seed = 1};
    generate(&m, prompt, NP, &o, a);
    reference(&m, prompt, NP, &o, ref);
    for (int i = 0; i < N; i++) cr_assert_eq(a[i], ref[i], "step %d: %d, argmax %d", i, a[i], ref[i]);
    // A sequence that repeats one token would not tell the windows apart.
    cr_assert_geq(n_distinct(a, N), 5, "greedy gave only %d distinct tokens", n_distinct(a, N));
    const sample_opts o2 = {.n_tokens = N, .temperature = 0, .top_p = 1, .seed = 999};  // seed unused
    generate(&m, prompt, NP, &o2, b);
    cr_assert(!memcmp(a, b, sizeof a), "greedy depends on the seed or is not deterministic");
    // A short prompt too (the window grows before it slides).
    generate(&m, prompt, 1, &o, a);
    reference(&m, prompt, 1, &o, ref);
    cr_assert(!memcmp(a, ref, sizeof a), "greedy from one token differs from the argmax reference");
    llama_free(&m);
}

Test(sample, sampling_follows_the_documented_draws) {
    const uint64_t seed = tu_seed("sample", "draws", 0xd4a3);
    llama_model m;
    make_model(&m, true, seed);
    enum { NP = 5, N = 30 };
    int32_t prompt[NP], a[N], ref[N];
    random_prompt(prompt, NP, seed);
    const sample_opts o = {.n_tokens = N, .temperature = 1.5, .top_p = 1, .seed = seed};
    generate(&m, prompt, NP, &o, a);
    reference(&m, prompt, NP, &o, ref);
    for (int i = 0; i < N; i++) cr_assert_eq(a[i], ref[i], "step %d: %d, reference %d", i, a[i], ref[i]);
    llama_free(&m);
}

Test(sample, same_seed_same_output_different_seed_differs) {
    const uint64_t seed = tu_seed("sample", "seeds", 0x5eed);
    llama_model m;
    make_model(&m, false, seed);
    // Unscaled weights: temperature-1 sampling is nearly uniform over 20 tokens, so two seeds
    // give the same 64 tokens with probability about 20^-64: a mismatch would mean the seed
    // is ignored. (The outcome is a pure function of the seeds, so this cannot flake.)
    enum { NP = 3, N = 64 };
    int32_t prompt[NP], a[N], b[N], c[N];
    random_prompt(prompt, NP, seed);
    sample_opts o = {.n_tokens = N, .temperature = 1, .top_p = 1, .seed = seed};
    generate(&m, prompt, NP, &o, a);
    generate(&m, prompt, NP, &o, b);
    cr_assert(!memcmp(a, b, sizeof a), "the same seed gave different output");
    o.seed = seed + 1;
    generate(&m, prompt, NP, &o, c);
    cr_assert(memcmp(a, c, sizeof a), "seeds %llu and %llu gave the same %d tokens", (unsigned long long)seed,
              (unsigned long long)o.seed, N);
    // and the tokens are not all one value (the sampler samples)
    cr_assert_geq(n_distinct(a, N), 5, "only %d distinct tokens in %d near-uniform draws", n_distinct(a, N), N);
    llama_free(&m);
}

Test(sample, tiny_top_p_is_greedy) {
    const uint64_t seed = tu_seed("sample", "top_p", 0x70b);
    llama_model m;
    make_model(&m, false, seed);  // near-uniform logits: only the nucleus cut makes it greedy
    enum { NP = 4, N = 32 };
    int32_t prompt[NP], g[N], t[N];
    random_prompt(prompt, NP, seed);
    const sample_opts greedy = {.n_tokens = N, .temperature = 0, .top_p = 1, .seed = 0};
    const sample_opts tiny = {.n_tokens = N, .temperature = 1, .top_p = 1e-6, .seed = seed};
    generate(&m, prompt, NP, &greedy, g);
    generate(&m, prompt, NP, &tiny, t);
    for (int i = 0; i < N; i++) cr_assert_eq(t[i], g[i], "step %d: top-p 1e-6 gave %d, greedy %d", i, t[i], g[i]);
    llama_free(&m);
}

// Stops after the third token (ctx: a call counter).
static int stop_after_3(void *ctx, int32_t t) {
    (void)t;
    return ++*(int *)ctx >= 3;
}

Test(sample, callback_stops_early) {
    llama_model m;
    make_model(&m, false, 11);
    const int32_t prompt[1] = {0};
    const sample_opts o = {.n_tokens = 10, .temperature = 1, .top_p = 1, .seed = 2};
    int calls = 0;
    sample_sink sink = {.emit = stop_after_3, .ctx = &calls, .n_done = -1};
    char msg[256];
    cr_assert_eq(sample_generate(&m, prompt, 1, &o, &sink, msg, sizeof msg), SAMPLE_OK, "%s", msg);
    cr_assert_eq(calls, 3);
    cr_assert_eq(sink.n_done, 3);
    llama_free(&m);
}

Test(sample, validation) {
    char msg[256];
    sample_opts o = sample_opts_default();
    cr_assert_eq(sample_opts_validate(&o, msg, sizeof msg), SAMPLE_OK);
    static const struct {
        long n;
        double t, p;
        const char *word;
    } bad[] = {{-1, 1, 1, "tokens"},      {1, -0.5, 1, "temperature"}, {1, NAN, 1, "temperature"},
               {1, INFINITY, 1, "temperature"}, {1, 1, 0, "top-p"}, {1, 1, 1.5, "top-p"},
               {1, 1, NAN, "top-p"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o = (sample_opts){.n_tokens = bad[i].n, .temperature = bad[i].t, .top_p = bad[i].p};
        msg[0] = 0;
        cr_assert_eq(sample_opts_validate(&o, msg, sizeof msg), SAMPLE_EINVAL, "case %zu", i);
        cr_assert(strstr(msg, bad[i].word), "case %zu: message '%s' should name %s", i, msg, bad[i].word);
    }
    llama_model m;
    make_model(&m, false, 1);
    o = sample_opts_default();
    o.n_tokens = 2;
    const int32_t p_bad[2] = {3, 20};
    cr_assert_eq(sample_generate(&m, p_bad, 0, &o, NULL, msg, sizeof msg), SAMPLE_EINVAL);
    cr_assert(strstr(msg, "empty"), "%s", msg);
    cr_assert_eq(sample_generate(&m, p_bad, 2, &o, NULL, msg, sizeof msg), SAMPLE_EINVAL);
    cr_assert(strstr(msg, "position 1"), "%s", msg);
    llama_free(&m);
}

Test(sample, diverged_model_is_an_error) {
    llama_model m;
    make_model(&m, false, 1);
    m.p.t[LP_FINAL_NORM][0] = NAN;
    const int32_t prompt[1] = {0};
    const sample_opts o = {.n_tokens = 3, .temperature = 0, .top_p = 1, .seed = 0};
    char msg[256];
    sample_sink sink = {.n_done = -1};
    cr_assert_eq(sample_generate(&m, prompt, 1, &o, &sink, msg, sizeof msg), SAMPLE_EMODEL);
    cr_assert(strstr(msg, "not finite"), "%s", msg);
    cr_assert_eq(sink.n_done, 0);
    llama_free(&m);
}

// --- what is fed: the start token, then the prompt

Test(sample, start_token_and_prompt) {
    uint32_t cp[] = {'\n', ' ', 'a', 'b', 0xE9};
    const data_vocab v = {DATA_VOCAB_CHAR, 5, cp};
    cr_assert_eq(sample_start_token(&v), 0, "the newline");
    int32_t t[8];
    char msg[256];
    cr_assert_eq(sample_prompt_tokens(&v, NULL, t, 8, msg, sizeof msg), 1);
    cr_assert_eq(t[0], 0);
    cr_assert_eq(sample_prompt_tokens(&v, "", t, 8, msg, sizeof msg), 1, "an empty prompt is no prompt");
    cr_assert_eq(sample_prompt_tokens(&v, " ab\xc3\xa9", NULL, 0, msg, sizeof msg), 5, "count only");
    cr_assert_eq(sample_prompt_tokens(&v, " ab\xc3\xa9", t, 8, msg, sizeof msg), 5);
    static const int32_t want[5] = {0, 1, 2, 3, 4};
    cr_assert(!memcmp(t, want, sizeof want), "start, then the prompt as it is (no space added)");
    cr_assert_eq(sample_prompt_tokens(&v, "ab", t, 2, msg, sizeof msg), -1, "3 tokens in room for 2");
    msg[0] = 0;
    cr_assert_eq(sample_prompt_tokens(&v, "abc", t, 8, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "U+0063"), "names the character: %s", msg);
    // Without a newline: token 0; a byte vocabulary: byte 10; token ids: 0 and no text.
    uint32_t cp2[] = {' ', 'x'};
    const data_vocab v2 = {DATA_VOCAB_CHAR, 2, cp2}, vb = {DATA_VOCAB_BYTE, 256, NULL},
                     vt = {DATA_VOCAB_TOKENS, 100, NULL};
    cr_assert_eq(sample_start_token(&v2), 0);
    cr_assert_eq(sample_start_token(&vb), '\n');
    cr_assert_eq(sample_start_token(&vt), 0);
    cr_assert_eq(sample_prompt_tokens(&vb, "hi", t, 8, msg, sizeof msg), 3);
    cr_assert(t[0] == '\n' && t[1] == 'h' && t[2] == 'i');
    cr_assert_eq(sample_prompt_tokens(&vt, "", t, 8, msg, sizeof msg), 1);
    msg[0] = 0;
    cr_assert_eq(sample_prompt_tokens(&vt, "x", t, 8, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "token-id"), "%s", msg);
}

// --- sampling under a KV-cache policy

typedef struct {
    llama_model *m;
    ac_ctx *ac;
    const ac_rule *rule;
    int32_t seq[64];  // the prompt, then the tokens generated so far
    int len;          // the window of the step being checked
    long steps, changed;  // steps checked; key and value elements the rounding moved
} kv_check;

// The emit callback, after each step's forward: the keys and values layer 0's attention read
// are bitwise the formats library's rounding (the rule's recipe, along each token's features)
// of the float32 model's over the same window: each step reads rounded keys and values. (That
// a token's rounded keys and values depend on its own only, as a cache's do, is
// eval_kv_per_token's property: test_eval.c.)
static int check_kv(void *ctx, int32_t tok) {
    kv_check *k = ctx;
    const size_t t = (size_t)k->len, kvd = (size_t)k->m->cfg.n_kv_heads * (size_t)(k->m->cfg.dim / k->m->cfg.n_heads);
    const float *kv[2];
    cr_assert(llama_kv(k->m, 0, &kv[0], &kv[1]));
    float *got = malloc(2 * t * kvd * sizeof *got), *want = malloc(t * kvd * sizeof *want);
    memcpy(got, kv[0], t * kvd * sizeof *got), memcpy(got + t * kvd, kv[1], t * kvd * sizeof *got);
    k->m->ac = NULL;  // the float32 model over the same window (the next step's forward overwrites it)
    cr_assert(!isnan(llama_forward(k->m, k->seq, NULL, 1, (int)t)));
    k->m->ac = k->ac;
    cr_assert(llama_kv(k->m, 0, &kv[0], &kv[1]));
    const ac_rule *r = k->rule;
    for (int j = 0; j < 2; j++) {
        cr_assert_eq(fmt_quantize_f32(&r->fmt, &r->scaling, want, kv[j], t, kvd, &r->round, NULL, NULL), FMT_OK);
        for (size_t i = 0; i < t * kvd; i++) {
            cr_assert(tu_samef(got[j * t * kvd + i], want[i]), "window %zu, %s %zu: %a, rounded %a", t,
                      j ? "value" : "key", i, got[j * t * kvd + i], want[i]);
            k->changed += want[i] != kv[j][i];
        }
    }
    free(got), free(want);
    k->steps++;
    k->seq[k->len++] = tok;
    return 0;
}

// Greedy and temperature sampling under kv8-fp8 (e4m3, one scale per token) and a plain e5m2
// KV cache, attached as `fplab sample --policy` attaches it; the window grows to seq_len.
static void kv_sampling(const char *policy, double temperature) {
    llama_model m;
    make_model(&m, true, 23);
    ac_policy p;
    char msg[256];
    cr_assert_eq(policy[0] == '#' ? ac_policy_parse(&p, policy, "test", msg, sizeof msg)
                                  : ac_policy_load(&p, policy, msg, sizeof msg), AC_OK, "%s", msg);
    ac_ctx ac;
    const eval_attach_req req = {.p = &p, .B = 1, .T = m.cfg.seq_len, .seed = 5, .tel = AC_TEL_OFF,
                                 .uncounted = true};
    cr_assert_eq(eval_attach_policy(&m, &ac, &req, msg, sizeof msg), EVAL_OK, "%s", msg);
    kv_check k = {.m = &m, .ac = &ac, .rule = &p.site[AC_KV]};
    enum { NP = 3 };
    random_prompt(k.seq, NP, 23);
    k.len = NP;
    const sample_opts o = {.n_tokens = m.cfg.seq_len - NP + 1, .temperature = temperature, .top_p = 1, .seed = 9};
    sample_sink sink = {.emit = check_kv, .ctx = &k};
    cr_assert_eq(sample_generate(&m, k.seq, NP, &o, &sink, msg, sizeof msg), SAMPLE_OK, "%s", msg);
    cr_assert_eq(sink.n_done, o.n_tokens);
    cr_assert_eq(k.steps, o.n_tokens);
    cr_assert(k.changed > 0, "%s: the KV cast changed nothing", p.name);
    eval_detach_policy(&m, &ac);
    llama_free(&m);
}

Test(sample, reads_an_fp8_kv_cache) { kv_sampling("kv8-fp8", 0); }
Test(sample, reads_an_fp8_kv_cache_sampling) { kv_sampling("kv8-fp8", 1); }
Test(sample, reads_a_plain_e5m2_kv_cache) { kv_sampling("# plain\nsite attn.kv e5m2\n", 0); }
