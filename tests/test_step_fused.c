// test_step_fused.c: the optimizer step with the policy's weight side in one pass
// (ac_step_fused: adamw_tensor_step, adamw_step_policy, sgd_step_policy) against the same step
// made as separate passes (the step, then ac_round_update_at from a copy of the weights, then
// each state's ac_cast_inplace): the weights, the moments, Kahan's compensation, the update
// counts, the telemetry and the delayed-scaling histories bit for bit, on two threads, over
// sizes that end inside a chunk, for policies whose states cast in the pass (no recipe,
// stochastic rounding, delayed scaling) and after it (block and current scaling, or any while a
// cast hook is set, which then sees them).
#include <criterion/criterion.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autocast/autocast.h"
#include "tests/test_util.h"
#include "trainer/optim.h"

// Stochastic rounding and delayed scaling in the pass; the update stochastically rounded.
static const char *const SR_DELAYED = "name sr-delayed\n"
                                      "site master bf16\n"
                                      "site adam.m e4m3 sr\n"
                                      "site adam.v e5m2 delayed\n"
                                      "amax_history 4\n"
                                      "update sr\n";
// States cast after the pass: a block recipe and current scaling; Kahan's update.
static const char *const BLOCKS_KAHAN = "name blocks-kahan\n"
                                        "site master bf16\n"
                                        "site adam.m e4m3 mx\n"
                                        "site adam.v e5m2 tensor\n"
                                        "update kahan\n";

static void setup(void) { omp_set_num_threads(2); }
TestSuite(step_fused, .init = setup);

static void ctx_of(ac_ctx *c, const char *name_or_text) {
    ac_policy p;
    char msg[512] = "";
    const int st = strchr(name_or_text, '\n') ? ac_policy_parse(&p, name_or_text, "test", msg, sizeof msg)
                                              : ac_policy_load(&p, name_or_text, msg, sizeof msg);
    cr_assert_eq(st, AC_OK, "%s", msg);
    cr_assert_eq(ac_init(c, &p, 2, 7, AC_TEL_SITES, 0, msg, sizeof msg), AC_OK, "%s", msg);
}

// Whether two contexts counted the same: update counts, telemetry, histories.
static void same_counts(const ac_ctx *a, const ac_ctx *b, const char *what) {
    cr_assert_eq(a->upd_n, b->upd_n, "%s: updates %llu, fused %llu", what, (unsigned long long)a->upd_n,
                 (unsigned long long)b->upd_n);
    cr_assert_eq(a->upd_swamped, b->upd_swamped, "%s: swamped", what);
    cr_assert_eq(a->upd_changed, b->upd_changed, "%s: changed", what);
    char *ja = NULL, *jb = NULL;
    size_t la = 0, lb = 0;
    FILE *fa = open_memstream(&ja, &la), *fb = open_memstream(&jb, &lb);
    ac_write_json(a, fa), ac_write_json(b, fb);
    fclose(fa), fclose(fb);
    cr_assert_str_eq(ja, jb, "%s: telemetry", what);
    free(ja), free(jb);
    const size_t n = ac_state_bytes(a);
    cr_assert_eq(n, ac_state_bytes(b));
    void *sa = malloc(n), *sb = malloc(n);
    ac_state_save(a, sa), ac_state_save(b, sb);
    cr_assert(!memcmp(sa, sb, n), "%s: the saved states (histories, scaler) differ", what);
    free(sa), free(sb);
}

static void same_floats(const float *a, const float *b, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        cr_assert(tu_samef(a[i], b[i]), "%s[%zu]: separate %a, fused %a", what, i, a[i], b[i]);
}

typedef struct {
    float *p, *m, *v, *comp;
} arrays;

static arrays arrays_new(size_t n, const float *p0) {
    arrays a = {malloc(n * sizeof(float)), calloc(n, sizeof(float)), calloc(n, sizeof(float)),
                calloc(n, sizeof(float))};
    cr_assert(a.p && a.m && a.v && a.comp);
    memcpy(a.p, p0, n * sizeof *a.p);
    return a;
}

static void arrays_free(arrays *a) { free(a->p), free(a->m), free(a->v), free(a->comp); }

// One policy's two runs: separate passes (sep, a) and the fused pass (fus, b), from the same
// weights (normal, stored in the master format); g the step's gradients, old the weights before.
typedef struct {
    ac_ctx sep, fus;
    bool kahan;
    size_t n;
    arrays a, b;
    float *g, *old;
    tu_rng r;
} pair;

static void pair_start(pair *q, const char *policy, size_t n, uint64_t seed) {
    ctx_of(&q->sep, policy), ctx_of(&q->fus, policy);
    q->kahan = q->sep.pol.update == AC_UPDATE_KAHAN, q->n = n;
    q->r = (tu_rng){fmt_rng_make_key(seed, n), 0};
    float *p0 = malloc(n * sizeof *p0);
    q->g = malloc(n * sizeof *q->g), q->old = malloc(n * sizeof *q->old);
    cr_assert(p0 && q->g && q->old);
    for (size_t i = 0; i < n; i++) p0[i] = (float)tu_rng_normal(&q->r);
    ac_cast_inplace(&q->sep, AC_MASTER, -1, p0, n, 1, false);
    q->a = arrays_new(n, p0), q->b = arrays_new(n, p0);
    free(p0);
}

// Step t begins: both contexts keyed alike; gradients of mixed sizes (updates that bf16 keeps
// and that it swamps); the separate run's weights kept.
static void pair_begin(pair *q, long t) {
    ac_begin_step(&q->sep, (uint64_t)t), ac_begin_step(&q->fus, (uint64_t)t);
    ac_begin_micro(&q->sep, 0), ac_begin_micro(&q->fus, 0);
    for (size_t i = 0; i < q->n; i++) q->g[i] = (float)(tu_rng_normal(&q->r) * (i % 3 ? 1e-5 : 1e-1));
    memcpy(q->old, q->a.p, q->n * sizeof *q->old);
}

// Step t ends: the separate run rounds and casts; then both runs agree in every bit and count.
static void pair_end(pair *q, bool with_v, size_t first, const char *policy) {
    ac_round_update_at(&q->sep, q->a.p, q->old, q->kahan ? q->a.comp : NULL, q->n, first);
    ac_cast_inplace(&q->sep, AC_ADAM_M, -1, q->a.m, q->n, 1, true);
    if (with_v) ac_cast_inplace(&q->sep, AC_ADAM_V, -1, q->a.v, q->n, 1, true);
    same_floats(q->a.p, q->b.p, q->n, "p"), same_floats(q->a.m, q->b.m, q->n, "m");
    same_floats(q->a.v, q->b.v, q->n, "v"), same_floats(q->a.comp, q->b.comp, q->n, "comp");
    same_counts(&q->sep, &q->fus, policy);
}

static void pair_free(pair *q) {
    arrays_free(&q->a), arrays_free(&q->b);
    free(q->g), free(q->old);
    ac_free(&q->sep), ac_free(&q->fus);
}

// Three steps of one tensor, elements `first`.. of the flat vector, both ways.
static void tensor_steps(const char *policy, size_t n, size_t first) {
    pair q;
    pair_start(&q, policy, n, 11);
    const adamw_opts o = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
    for (long t = 1; t <= 3; t++) {
        pair_begin(&q, t);
        adamw_tensor_step(q.a.p, q.a.m, q.a.v, q.g, n, &o, t, NULL, 0, NULL);
        adamw_tensor_step(q.b.p, q.b.m, q.b.v, q.g, n, &o, t, &q.fus, first, q.kahan ? q.b.comp : NULL);
        pair_end(&q, true, first, policy);
    }
    cr_assert_gt(q.sep.upd_swamped, 0, "the test wants swamped updates");
    cr_assert_gt(q.sep.upd_changed, 0, "the test wants weights that move");
    pair_free(&q);
}

// A hook that counts the casts it sees, by site.
static void count_casts(void *user, ac_site s, int layer, const float *x, const float *out, size_t rows,
                        size_t cols, bool k_rows, bool count) {
    (void)layer, (void)x, (void)out, (void)rows, (void)cols, (void)k_rows, (void)count;
    ((int *)user)[s]++;
}

// With a hook set, the states are cast after the pass by ac_cast_inplace, which shows them to
// the hook: the same casts seen on both sides, and the same bits.
Test(step_fused, a_hook_sees_the_state_casts) {
    pair q;
    int seen_sep[AC_NSITES] = {0}, seen_fus[AC_NSITES] = {0};
    pair_start(&q, SR_DELAYED, 3 * 4096 + 5, 3);
    q.sep.hook = count_casts, q.sep.hook_user = seen_sep;
    q.fus.hook = count_casts, q.fus.hook_user = seen_fus;
    const adamw_opts o = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
    for (long t = 1; t <= 2; t++) {
        pair_begin(&q, t);
        adamw_tensor_step(q.a.p, q.a.m, q.a.v, q.g, q.n, &o, t, NULL, 0, NULL);
        adamw_tensor_step(q.b.p, q.b.m, q.b.v, q.g, q.n, &o, t, &q.fus, 7, NULL);
        pair_end(&q, true, 7, SR_DELAYED);
    }
    cr_assert_eq(seen_fus[AC_ADAM_M], 2);
    cr_assert_eq(seen_fus[AC_ADAM_V], 2);
    cr_assert(!memcmp(seen_sep, seen_fus, sizeof seen_sep), "the hook saw other casts");
    pair_free(&q);
}

Test(step_fused, pure_bf16_sr) { tensor_steps("pure-bf16-sr", 3 * 4096 + 123, 5000); }
Test(step_fused, pure_bf16_kahan) { tensor_steps("pure-bf16-kahan", 2 * 4096 + 1, 0); }
Test(step_fused, sr_and_delayed_states_in_the_pass) { tensor_steps(SR_DELAYED, 5 * 4096 + 77, 123); }
Test(step_fused, block_and_current_states_after_the_pass) { tensor_steps(BLOCKS_KAHAN, 4 * 4096 + 9, 0); }
Test(step_fused, small_tensor) { tensor_steps(SR_DELAYED, 37, 4090); }

// The C trainer's flat buffers (tensors that start and end inside a chunk, decay on the
// matrices only): adamw_step_policy and sgd_step_policy against the separate passes.
static void flat_steps(const char *policy, bool sgd) {
    llama_config cfg;
    llama_config_named(&cfg, "tiny");
    cfg.vocab_size = 13;
    size_t sizes[LP_COUNT];
    const size_t n = llama_param_sizes(&cfg, sizes);
    pair q;
    pair_start(&q, policy, n, 5);
    for (long t = 1; t <= 3; t++) {
        pair_begin(&q, t);
        if (sgd) {
            const sgd_opts o = {3e-3f, 0.9f, 0.1f};
            sgd_step(q.a.p, q.a.m, q.g, &cfg, &o);
            sgd_step_policy(q.b.p, q.b.m, q.g, &cfg, &o, &q.fus, q.kahan ? q.b.comp : NULL);
        } else {
            const adamw_opts o = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
            adamw_step(q.a.p, q.a.m, q.a.v, q.g, &cfg, &o, t);
            adamw_step_policy(q.b.p, q.b.m, q.b.v, q.g, &cfg, &o, t, &q.fus, q.kahan ? q.b.comp : NULL);
        }
        pair_end(&q, !sgd, 0, policy);
    }
    pair_free(&q);
}

Test(step_fused, trainer_adamw) {
    flat_steps("pure-bf16-sr", false);
    flat_steps(BLOCKS_KAHAN, false);
}

Test(step_fused, trainer_sgd) {
    flat_steps(SR_DELAYED, true);
    flat_steps("pure-bf16-kahan", true);
}

// Without a policy the fused step is the step alone: adamw_tensor_step on each tensor of the flat
// buffer (decay where adamw_step decays) gives adamw_step's bits.
Test(step_fused, tensor_steps_are_the_flat_step) {
    llama_config cfg;
    llama_config_named(&cfg, "tiny");
    cfg.vocab_size = 13;
    size_t sizes[LP_COUNT];
    const size_t n = llama_param_sizes(&cfg, sizes);
    float *g = malloc(n * sizeof *g), *p0 = malloc(n * sizeof *p0);
    tu_rng r = {fmt_rng_make_key(9, 1), 0};
    for (size_t i = 0; i < n; i++) p0[i] = (float)tu_rng_normal(&r), g[i] = (float)tu_rng_normal(&r);
    arrays a = arrays_new(n, p0), b = arrays_new(n, p0);
    const adamw_opts o = {1e-2f, 0.9f, 0.99f, 1e-8f, 0.1f};
    for (long t = 1; t <= 2; t++) {
        adamw_step(a.p, a.m, a.v, g, &cfg, &o, t);
        size_t off = 0;
        for (int id = 0; id < LP_COUNT; id++) {
            adamw_opts oi = o;
            if (!llama_param_is_matrix(id)) oi.weight_decay = 0.0f;
            adamw_tensor_step(b.p + off, b.m + off, b.v + off, g + off, sizes[id], &oi, t, NULL, 0, NULL);
            off += sizes[id];
        }
    }
    same_floats(a.p, b.p, n, "p"), same_floats(a.m, b.m, n, "m"), same_floats(a.v, b.v, n, "v");
    arrays_free(&a), arrays_free(&b);
    free(g), free(p0);
}
