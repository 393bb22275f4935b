// test_eval.c: a trained model under inference policies (trainer/eval.h). A small model is
// trained in the suite's setup; then: under fp32 the evaluation is bitwise the run's last
// validation loss; a weights-only policy equals float32 evaluation of a model whose weights were
// quantized beforehand by the formats library itself (the same recipe, tensor by tensor); the
// telemetry counts every element cast; one site at a time; the KV-cache preset, and which KV
// recipes round each token on its own (eval_kv_per_token); bad checkpoints, data and policies
// are refused with a message.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/scale.h"
#include "kernels/llama_ops.h"
#include "tests/test_util.h"
#include "trainer/eval.h"
#include "trainer/train.h"

static char dir[64], ckpt[128], corpus[128];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/fplab_eval_XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp");
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    tu_word_corpus(corpus, 7, 4000);
    // dim 32, so that K (32, 96) spans several MX and NVFP4 blocks
    train_opts o;
    train_opts_default(&o);
    snprintf(o.model, sizeof o.model, "tiny");
    snprintf(o.data, sizeof o.data, "%s", corpus);
    snprintf(o.ckpt_dir, sizeof o.ckpt_dir, "%s/run", dir);
    o.dim = 32, o.batch = 4, o.steps = 20, o.warmup = 2, o.lr = 1e-2f, o.lr_min = 1e-3f;
    o.eval_every = 0, o.eval_batches = 3, o.progress = 0, o.threads = 2;
    char msg[512] = "";
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_OK, "%s", msg);
    snprintf(ckpt, sizeof ckpt, "%s/run/ckpt.bin", dir);
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(eval, .init = setup, .fini = teardown);

static void open_model(eval_model *e, int batches) {
    char msg[512] = "";
    const eval_opts o = {.ckpt = ckpt, .batches = batches};
    cr_assert_eq(eval_open(e, &o, msg, sizeof msg), EVAL_OK, "%s", msg);
}

static ac_policy parse(const char *text) {
    ac_policy p;
    char msg[512] = "";
    cr_assert_eq(ac_policy_parse(&p, text, "test", msg, sizeof msg), AC_OK, "%s", msg);
    return p;
}

// The trainer's validation loss, recomputed: same batches, same order, same sum (train_run left
// the thread count at 2).
Test(eval, fp32_is_the_runs_validation_loss) {
    eval_model e;
    open_model(&e, 0);
    cr_assert_eq(e.batches, 3);
    cr_assert_eq(e.B, 4);
    cr_assert_eq(e.T, 8);
    cr_assert(!isnan(e.ckpt_val_loss));
    eval_result r;
    char msg[512] = "";
    cr_assert_eq(eval_baseline(&e, &r, msg, sizeof msg), EVAL_OK, "%s", msg);
    cr_assert(tu_samef(r.loss, e.ckpt_val_loss), "eval %a, run %a", r.loss, e.ckpt_val_loss);
    cr_assert_eq(r.tokens, 3 * 4 * 8);
    // the fp32 preset casts nothing: the same bits, delta exactly 0 with no spread
    ac_policy p;
    cr_assert_eq(ac_policy_load(&p, "fp32", msg, sizeof msg), AC_OK);
    eval_result q;
    cr_assert_eq(eval_loss(&e, &p, AC_TEL_SITES, NULL, &q, msg, sizeof msg), EVAL_OK, "%s", msg);
    cr_assert(tu_samef(q.loss, r.loss));
    cr_assert(q.delta == 0 && q.delta_se == 0, "delta %g se %g", q.delta, q.delta_se);
    eval_close(&e);
}

// Quantizes the projection weights of m in place as the policy's .w sites would cast them: one
// call per layer and matrix (OC, IC), scales along IC (K of the forward product).
static void prequantize(llama_model *m, const ac_rule *r) {
    const llama_config *c = &m->cfg;
    const size_t C = c->dim, H = c->hidden_dim, hs = C / c->n_heads;
    const size_t qd = c->n_heads * hs, kvd = c->n_kv_heads * hs;
    const struct {
        llama_param_id id;
        size_t oc, ic;
    } mats[] = {{LP_WQ, qd, C}, {LP_WK, kvd, C}, {LP_WV, kvd, C}, {LP_WO, C, qd},
                {LP_W_GATE, H, C}, {LP_W_UP, H, C}, {LP_W_DOWN, C, H}};
    for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++)
        for (int l = 0; l < c->n_layers; l++) {
            float *w = m->p.t[mats[k].id] + (size_t)l * mats[k].oc * mats[k].ic;
            cr_assert_eq(fmt_quantize_f32(&r->fmt, &r->scaling, w, w, mats[k].oc, mats[k].ic, &r->round, NULL, NULL),
                         FMT_OK);
        }
}

static void weights_only_is_prequantized(const char *format_recipe) {
    char text[256];
    snprintf(text, sizeof text, "name w\nsite *.w %s\nsite lm_head.w fp32\n", format_recipe);
    const ac_policy p = parse(text);
    eval_model e;
    open_model(&e, 2);
    eval_result q, f;
    char msg[512] = "";
    cr_assert_eq(eval_loss(&e, &p, AC_TEL_OFF, NULL, &q, msg, sizeof msg), EVAL_OK, "%s", msg);
    eval_result plain;
    cr_assert_eq(eval_loss(&e, NULL, AC_TEL_OFF, NULL, &plain, msg, sizeof msg), EVAL_OK, "%s", msg);
    cr_assert(!tu_samef(q.loss, plain.loss), "%s changed nothing", format_recipe);
    prequantize(&e.m, &p.site[AC_QKV_W]);
    cr_assert_eq(eval_loss(&e, NULL, AC_TEL_OFF, NULL, &f, msg, sizeof msg), EVAL_OK, "%s", msg);
    cr_assert(tu_samef(q.loss, f.loss), "%s: policy %a, prequantized weights %a", format_recipe, q.loss, f.loss);
    eval_close(&e);
}

Test(eval, weights_only_e4m3_per_channel) { weights_only_is_prequantized("e4m3 row"); }
Test(eval, weights_only_mxfp4) { weights_only_is_prequantized("e2m1 mx"); }
Test(eval, weights_only_nvfp4) { weights_only_is_prequantized("e2m1 nvfp4"); }

// Every forward cast is counted: attn.qkv.w casts wq, wk, wv of every layer once per batch.
Test(eval, telemetry_counts_every_cast) {
    eval_model e;
    open_model(&e, 2);
    ac_policy p;
    char msg[512] = "";
    cr_assert_eq(ac_policy_load(&p, "w8a8-fp8", msg, sizeof msg), AC_OK, "%s", msg);
    ac_ctx ac;
    eval_result r;
    cr_assert_eq(eval_loss(&e, &p, AC_TEL_SITES, &ac, &r, msg, sizeof msg), EVAL_OK, "%s", msg);
    const llama_config *c = &e.m.cfg;
    const uint64_t C = c->dim, L = c->n_layers, hs = C / c->n_heads, N = (uint64_t)e.B * e.T;
    uint64_t nw = 0, nin = 0, ngrad = 0;
    for (int l = 0; l <= c->n_layers; l++) {
        nw += ac.tel[AC_QKV_W * (L + 1) + l].n;
        nin += ac.tel[AC_QKV_IN * (L + 1) + l].n;
        ngrad += ac.tel[AC_QKV_GRAD * (L + 1) + l].n;
    }
    cr_assert_eq(nw, 2 * L * (c->n_heads + 2 * c->n_kv_heads) * hs * C, "attn.qkv.w n %llu", (unsigned long long)nw);
    cr_assert_eq(nin, 2 * L * N * C);
    cr_assert_eq(ngrad, 0);
    // the JSON line carries the trainer's telemetry members
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(eval_baseline(&e, &r, msg, sizeof msg) == EVAL_OK);
    ac_free(&ac);
    cr_assert_eq(eval_loss(&e, &p, AC_TEL_SITES, &ac, &r, msg, sizeof msg), EVAL_OK);
    eval_write_json(f, &e, p.name, NULL, &r, &ac);
    fclose(f);
    cr_assert(strstr(buf, "\"policy\":\"w8a8-fp8\",\"site\":null,\"val_loss\":"), "%s", buf);
    cr_assert(strstr(buf, "\"delta_se\":") && strstr(buf, ",\"sites\":{\"attn.qkv.in\":{\"n\":"), "%s", buf);
    free(buf);
    ac_free(&ac);
    eval_close(&e);
}

Test(eval, one_site_at_a_time) {
    ac_policy p, one;
    char msg[512] = "";
    cr_assert_eq(ac_policy_load(&p, "w8a8-fp8", msg, sizeof msg), AC_OK, "%s", msg);
    eval_policy_only(&one, &p, AC_DOWN_IN);
    for (int s = 0; s < AC_NSITES; s++) cr_assert_eq(one.site[s].active, s == AC_DOWN_IN, "%s", ac_site_name(s));
    cr_assert(!memcmp(&one.site[AC_DOWN_IN], &p.site[AC_DOWN_IN], sizeof one.site[0]));
    cr_assert_str_eq(one.name, p.name);
    cr_assert(eval_site_in_forward(AC_QKV_IN) && eval_site_in_forward(AC_ATT_PROBS) && eval_site_in_forward(AC_SAVED));
    cr_assert(!eval_site_in_forward(AC_QKV_GRAD) && !eval_site_in_forward(AC_MASTER) && !eval_site_in_forward(AC_ADAM_V));
}

// Issue 20: a single-site policy derived from one with emulated accumulators keeps each
// accumulator only where both its operands are still cast (the rule a direct policy is held
// to); before, every derived policy broke it and --per-site printed NaN rows.
Test(eval, one_site_keeps_the_operand_rule) {
    const ac_policy p = parse("name acc13\nsite *.in e4m3 tensor\nsite *.w e4m3 mx\n"
                              "accumulator m13:promote=16 *.fprop\n");
    char msg[512] = "";
    for (int s = 0; s < AC_NSITES; s++) {
        if (!p.site[s].active || !eval_site_in_forward(s)) continue;
        ac_policy one;
        eval_policy_only(&one, &p, s);
        cr_assert_eq(ac_policy_validate(&one, msg, sizeof msg), AC_OK, "%s only: %s", ac_site_name(s), msg);
    }
}

Test(eval, refusals) {
    char msg[512] = "", path[160];
    eval_model e;
    // not a checkpoint
    eval_opts o = {.ckpt = corpus};
    cr_assert_eq(eval_open(&e, &o, msg, sizeof msg), EVAL_EINVAL);
    cr_assert(strstr(msg, corpus), "%s", msg);
    o.ckpt = NULL;
    cr_assert_eq(eval_open(&e, &o, msg, sizeof msg), EVAL_EINVAL);
    cr_assert(strstr(msg, "--ckpt"), "%s", msg);
    // the data moved
    snprintf(path, sizeof path, "%s/nosuch.txt", dir);
    o = (eval_opts){.ckpt = ckpt, .data = path};
    cr_assert_eq(eval_open(&e, &o, msg, sizeof msg), EVAL_EINVAL);
    cr_assert(strstr(msg, "nosuch.txt"), "%s", msg);
    // data with a character outside the checkpoint's vocabulary
    snprintf(path, sizeof path, "%s/other.txt", dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 200; i++) fputs("zebra quiz ", f);
    fclose(f);
    cr_assert_eq(eval_open(&e, &o, msg, sizeof msg), EVAL_EINVAL);
    o.batches = -1, o.data = NULL;
    cr_assert_eq(eval_open(&e, &o, msg, sizeof msg), EVAL_EINVAL);
    cr_assert(strstr(msg, "--batches"), "%s", msg);
    // what the forward cannot do
    ac_policy p = parse("name a\nsite attn.scores e4m3\n");
    cr_assert_eq(eval_policy_check(&p, msg, sizeof msg), EVAL_OK, "%s", msg);
    p.site[AC_ATT_SCORES].scaling.none = false;  // a recipe on the scores (the parser may allow it)
    cr_assert_eq(eval_policy_check(&p, msg, sizeof msg), EVAL_EINVAL);
    cr_assert(strstr(msg, "attention"), "%s", msg);
    // an emulated accumulator is no refusal (llama.c runs those matmuls in the emulating kernel)
    ac_policy acc = parse("name b\nsite *.in e4m3\nsite *.w e4m3\nsite *.grad e5m2\naccumulator m13:promote=128\n");
    cr_assert_eq(eval_policy_check(&acc, msg, sizeof msg), EVAL_OK, "%s", msg);
    open_model(&e, 1);
    eval_result r;
    cr_assert_eq(eval_loss(&e, &p, AC_TEL_OFF, NULL, &r, msg, sizeof msg), EVAL_EINVAL);
    eval_close(&e);
}

// The KV-cache preset in an evaluation: attn.kv is a forward site, it changes the loss, and the
// telemetry counts the keys and values of every layer of every batch; the JSON names it.
Test(eval, kv_cache_preset) {
    cr_assert(eval_site_in_forward(AC_KV));
    eval_model e;
    open_model(&e, 2);
    ac_policy p;
    char msg[512] = "";
    cr_assert_eq(ac_policy_load(&p, "kv8-fp8", msg, sizeof msg), AC_OK, "%s", msg);
    eval_result base, r;
    cr_assert_eq(eval_baseline(&e, &base, msg, sizeof msg), EVAL_OK, "%s", msg);
    ac_ctx ac;
    cr_assert_eq(eval_loss(&e, &p, AC_TEL_SITES, &ac, &r, msg, sizeof msg), EVAL_OK, "%s", msg);
    cr_assert(!tu_samef(r.loss, base.loss), "kv8-fp8 changed nothing");
    const llama_config *c = &e.m.cfg;
    const uint64_t L = c->n_layers, kvd = (uint64_t)c->n_kv_heads * (c->dim / c->n_heads), N = (uint64_t)e.B * e.T;
    uint64_t n = 0;
    for (uint64_t l = 0; l <= L; l++) n += ac.tel[AC_KV * (L + 1) + l].n;
    cr_assert_eq(n, 2 * 2 * L * N * kvd, "attn.kv n %llu", (unsigned long long)n);  // 2 batches, keys and values
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    eval_write_json(f, &e, p.name, NULL, &r, &ac);
    fclose(f);
    cr_assert(strstr(buf, "\"sites\":{\"attn.kv\":{\"n\":"), "%s", buf);
    free(buf);
    ac_free(&ac);
    eval_close(&e);
}

// eval_kv_per_token is what it promises: for the recipes it accepts, quantizing a window of
// tokens (rows) gives, row by row, what quantizing each token alone gives (a cache rounds a
// token once, when it is stored; stochastic rounding keyed by the position's index); for a
// recipe it refuses, the rows of a window depend on each other.
Test(eval, kv_per_token_recipes) {
    static const struct {
        const char *rule;
        bool per_token;
    } cases[] = {{"e4m3", true},          {"e4m3 row", true},        {"e2m1 mx", true},
                 {"e5m2 block:8:fp32 sr", true}, {"fp32", true},     {"e4m3 tensor", false},
                 {"e4m3 delayed", false}, {"e4m3 col", false},       {"e4m3 tile:2x8:fp32", false},
                 {"e2m1 nvfp4", false}};
    enum { T = 6, KVD = 32 };
    float x[T * KVD], all[T * KVD], one[KVD];
    for (int i = 0; i < T * KVD; i++) x[i] = (float)((i * 37 % 101) - 50) * (1.0f + (float)(i / KVD) * 7.0f) / 16;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[128];
        snprintf(text, sizeof text, "name k\nsite attn.kv %s\n", cases[k].rule);
        const ac_policy p = parse(text);
        cr_assert_eq(eval_kv_per_token(&p), cases[k].per_token, "%s", cases[k].rule);
        const ac_rule *r = &p.site[AC_KV];
        if (!r->active || r->delayed) continue;
        fmt_round_opts o = r->round;
        o.seed = 3;
        cr_assert_eq(fmt_quantize_f32(&r->fmt, &r->scaling, all, x, T, KVD, &o, NULL, NULL), FMT_OK);
        bool same = true;
        for (int t = 0; t < T; t++) {
            o.offset = (uint64_t)t * KVD;  // the element's counter: its index in the window
            cr_assert_eq(fmt_quantize_f32(&r->fmt, &r->scaling, one, x + t * KVD, 1, KVD, &o, NULL, NULL), FMT_OK);
            for (int i = 0; i < KVD; i++) same &= tu_samef(one[i], all[t * KVD + i]);
        }
        cr_assert_eq(same, cases[k].per_token, "%s: a window %s token by token", cases[k].rule,
                     same ? "rounds as" : "does not round as");
    }
}
