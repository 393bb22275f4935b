// train_policy_dump.c: the C trainer's training step (trainer/train.c's forward_backward and
// update, one micro-batch, no clipping, constant learning rate) under a precision policy, run
// for a few steps on the model and weights of tools/dump_llama_setup.h, with everything
// tools/check_torch_policy.py needs to run the same training through fplab.torch on Hugging
// Face's LlamaForCausalLM and compare: the initial parameters, each step's batch, each step's
// log line (the C trainer's JSONL: loss, loss scale, skipped, per-site telemetry), and every cast
// of step 1 (through autocast's cast hook: site, layer, orientation, count flag, input, values).
//
// Output (--out DIR, created if missing): manifest.json (config, tensor table as dump_llama's,
// steps, lr, policy, and the files), params.f32 (initial parameters, llama.h order), tokens.i32
// and targets.i32 (steps, B, T), log.jsonl, casts.jsonl (one line per cast: site, layer, k_rows,
// count, rows, cols, x_offset or -1 for an in-place cast, y_offset) and casts.f32 (the floats the
// offsets point into), grads1.f32 (step 1's gradients as the backward left them: loss-scaled,
// before the grads site's cast), params1.f32 and params2.f32 (the weights after steps 1 and 2). Files are written to temporary names and renamed.
// Exit status: 0 written, 1 failure (message on stderr), 2 bad usage.
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autocast/autocast.h"
#include "tools/dump_llama_setup.h"
#include "trainer/llama.h"
#include "trainer/optim.h"
#include "util/fileio.h"
#include "util/json.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "train_policy_dump writes raw little-endian arrays"
#endif

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "train_policy_dump: %s:%d: ", __FILE__, __LINE__);  \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

// --- the cast record of step 1 (autocast's hook)

typedef struct {
    FILE *index;        // casts.jsonl
    float *data;        // casts.f32
    size_t n, cap;
} cast_log;

static size_t put(cast_log *r, const float *x, size_t n) {
    if (r->n + n > r->cap) {
        r->cap = (r->n + n) * 2;
        r->data = realloc(r->data, r->cap * sizeof *r->data);
        CHECK(r->data, "out of memory for the cast record");
    }
    memcpy(r->data + r->n, x, n * sizeof *x);
    r->n += n;
    return r->n - n;
}

static void on_cast(void *user, ac_site s, int layer, const float *x, const float *out, size_t rows, size_t cols,
                    bool k_rows, bool count) {
    cast_log *r = user;
    const long xo = x ? (long)put(r, x, rows * cols) : -1;
    const size_t yo = put(r, out, rows * cols);
    fprintf(r->index, "{\"site\":\"%s\",\"layer\":%d,\"k_rows\":%s,\"count\":%s,\"rows\":%zu,\"cols\":%zu,"
            "\"x_offset\":%ld,\"y_offset\":%zu}\n", ac_site_name(s), layer, k_rows ? "true" : "false",
            count ? "true" : "false", rows, cols, xo, yo);
}

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
    char path[4096], msg[512];
    CHECK(snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path, "path too long: %s", dir);
    CHECK(fio_write_file(path, data, n, msg, sizeof msg) == FIO_OK, "%s", msg);
}

// p[i] *= 1 + eps (2u - 1), u uniform in [0, 1) keyed by (seed, step, i) (--noise).
static void perturb(float *p, size_t n, double eps, uint64_t seed, uint64_t step) {
    const fmt_rng_key key = fmt_rng_make_key(seed, step);
    for (size_t i = 0; i < n; i++) p[i] *= (float)(1.0 + eps * (2.0 * fmt_rng_uniform(key, i) - 1.0));
}

static void usage(FILE *fh) {
    fprintf(fh, "usage: train_policy_dump --policy NAME --out DIR [--steps 50] [--lr 0.001] [--seed 0]\n"
                "                         [--noise EPS --noise-seed S]\n"
                "The C trainer's step under policy NAME (a preset or a policy file) for STEPS steps on the\n"
                "model of tools/dump_llama_setup.h (batch %d x %d, a new batch each step), written to DIR\n"
                "for tools/check_torch_policy.py (see the top of tools/train_policy_dump.c).\n"
                "--noise EPS multiplies every weight before step 1 and after every AdamW step (before the\n"
                "master site's and the update's rounding) by 1 + EPS (2u - 1), u uniform in [0, 1) keyed by\n"
                "(S, step, index): the size of the float32 reordering of another implementation, to measure\n"
                "how far the step-1 gradients and the loss curve move under it (the parity tolerances of\n"
                "tools/check_torch_policy.py). params.f32 holds the weights before the noise.\n",
            DUMP_B, DUMP_T);
}

int main(int argc, char **argv) {
    const char *policy = NULL, *out = NULL;
    long steps = 50;
    double lr = 1e-3;
    unsigned long long seed = 0, noise_seed = 0;
    double noise = 0.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        if (!v) return usage(stderr), 2;
        char *end;
        errno = 0;
        if (!strcmp(a, "--policy")) policy = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--steps")) steps = strtol(v, &end, 10);
        else if (!strcmp(a, "--lr")) lr = strtod(v, &end);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, &end, 10);
        else if (!strcmp(a, "--noise")) noise = strtod(v, &end);
        else if (!strcmp(a, "--noise-seed")) noise_seed = strtoull(v, &end, 10);
        else return usage(stderr), 2;
        if (errno || steps < 2 || steps > 100000 || !(lr > 0) || !(noise >= 0 && noise < 0.5)) {
            fprintf(stderr, "train_policy_dump: %s '%s': out of range\n", a, v);
            return 2;
        }
        i++;
    }
    if (!policy || !out) return usage(stderr), 2;
    char msg[1024];
    CHECK(fio_mkdir_p(out, msg, sizeof msg) == 0, "%s", msg);

    const llama_config c = dump_default_config();
    const int B = DUMP_B, T = DUMP_T, V = c.vocab_size;
    llama_model m;
    CHECK(llama_init(&m, &c, LLAMA_RECOMPUTE_NONE, msg, sizeof msg) == LLAMA_OK, "%s", msg);
    dump_fill_params(&m, DUMP_SEED);
    const size_t n = m.n_params;
    write_file(out, "params.f32", m.params, n * sizeof(float));

    ac_policy pol;
    CHECK(ac_policy_load(&pol, policy, msg, sizeof msg) == AC_OK, "%s", msg);
    ac_ctx ac;
    CHECK(ac_init(&ac, &pol, c.n_layers, seed, AC_TEL_SITES, llama_max_operand(&c, B, T), msg, sizeof msg) == AC_OK,
          "%s", msg);
    m.ac = &ac;
    char *idx = NULL;
    size_t idx_n = 0;
    cast_log rec = {.index = open_memstream(&idx, &idx_n)};
    CHECK(rec.index, "out of memory");
    ac.hook = on_cast, ac.hook_user = &rec;

    float *am = calloc(n, sizeof *am), *av = calloc(n, sizeof *av), *p_old = malloc(n * sizeof *p_old);
    float *kahan = pol.update == AC_UPDATE_KAHAN ? calloc(n, sizeof *kahan) : NULL;
    int *tokens = malloc((size_t)steps * B * T * sizeof *tokens), *targets = malloc((size_t)steps * B * T * sizeof *targets);
    CHECK(am && av && p_old && tokens && targets && (kahan || pol.update != AC_UPDATE_KAHAN), "out of memory");
    // Noise before step 1 too: the other implementation's step 1 already computes differently.
    if (noise > 0) perturb(m.params, n, noise, noise_seed, UINT64_MAX);
    // The trainer rounds the initial weights to the master site's format (train_setup.c).
    if (pol.site[AC_MASTER].active) ac_cast_inplace(&ac, AC_MASTER, -1, m.params, n, 1, false);

    char *log = NULL;
    size_t log_n = 0;
    FILE *lf = open_memstream(&log, &log_n);
    CHECK(lf, "out of memory");
    long applied = 0;
    for (long step = 0; step < steps; step++) {
        int *x = tokens + (size_t)step * B * T, *y = targets + (size_t)step * B * T;
        dump_fill_batch(x, y, B * T, V, DUMP_SEED + 1 + (uint64_t)step);
        ac_begin_step(&ac, (uint64_t)step);
        ac_begin_micro(&ac, 0);
        const float scale = ac.scaler.scale;
        const float loss = llama_forward(&m, x, y, B, T);
        llama_zero_grad(&m);
        llama_backward(&m, x, y, scale);
        if (step == 0) write_file(out, "grads1.f32", m.grads, n * sizeof(float));  // scaled, before any cast
        ac_cast_inplace(&ac, AC_GRADS, -1, m.grads, n, 1, true);
        if (scale != 1.0f) {
            const float inv = 1.0f / scale;
            for (size_t i = 0; i < n; i++) m.grads[i] *= inv;
        }
        const double gnorm = clip_grad_norm(m.grads, n, 0.0);
        const bool finite = isfinite(gnorm);
        const bool skipped = ac_scaler_update(&ac.scaler, &pol.scaler, finite);
        if (!skipped && finite) {
            memcpy(p_old, m.params, n * sizeof *p_old);
            const adamw_opts ao = {(float)lr, 0.9f, 0.95f, 1e-8f, 0.0f};
            adamw_step(m.params, am, av, m.grads, &c, &ao, applied + 1);
            if (noise > 0) perturb(m.params, n, noise, noise_seed, (uint64_t)step);
            ac_round_update(&ac, m.params, p_old, kahan, n);
            ac_cast_inplace(&ac, AC_ADAM_M, -1, am, n, 1, true);
            ac_cast_inplace(&ac, AC_ADAM_V, -1, av, n, 1, true);
            applied++;
        }
        fprintf(lf, "{\"step\":%ld,\"loss\":", step + 1);
        jx_write_num(lf, loss, 9);
        fputs(",\"grad_norm\":", lf), jx_write_num(lf, gnorm, 9);
        fputs(",\"loss_scale\":", lf), jx_write_num(lf, scale, 9);
        fprintf(lf, ",\"skipped\":%d", skipped);
        ac_write_json(&ac, lf);
        fputs("}\n", lf);
        if (step < 2) write_file(out, step ? "params2.f32" : "params1.f32", m.params, n * sizeof(float));
        ac.hook = NULL;  // the casts of step 1 only
    }
    CHECK(fclose(lf) == 0 && fclose(rec.index) == 0, "cannot build the logs");
    write_file(out, "log.jsonl", log, log_n);
    write_file(out, "casts.jsonl", idx, idx_n);
    write_file(out, "casts.f32", rec.data, rec.n * sizeof(float));
    write_file(out, "tokens.i32", tokens, (size_t)steps * B * T * sizeof *tokens);
    write_file(out, "targets.i32", targets, (size_t)steps * B * T * sizeof *targets);

    char *js = NULL;
    size_t jn = 0;
    FILE *j = open_memstream(&js, &jn);
    CHECK(j, "out of memory for the manifest");
    fprintf(j, "{\n  \"format\": \"fplab-train-policy-dump\",\n  \"version\": 1,\n");
    dump_json_config(j, &c);
    fprintf(j, "  \"policy\": \"%s\",\n  \"seed\": %llu,\n  \"steps\": %ld,\n  \"lr\": %.9g,\n", pol.name, seed,
            steps, lr);
    fprintf(j, "  \"adamw\": {\"beta1\": 0.9, \"beta2\": 0.95, \"eps\": 1e-8, \"weight_decay\": 0},\n");
    fprintf(j, "  \"batch\": %d,\n  \"tokens_per_row\": %d,\n  \"n_params\": %zu,\n  \"n_casts\": %zu,\n", B, T, n,
            rec.n);
    fprintf(j,
            "  \"files\": {\n"
            "    \"tokens\": {\"file\": \"tokens.i32\", \"dtype\": \"<i4\", \"shape\": [%ld, %d, %d]},\n"
            "    \"targets\": {\"file\": \"targets.i32\", \"dtype\": \"<i4\", \"shape\": [%ld, %d, %d]},\n"
            "    \"params\": {\"file\": \"params.f32\", \"dtype\": \"<f4\", \"shape\": [%zu]},\n"
            "    \"grads1\": {\"file\": \"grads1.f32\", \"dtype\": \"<f4\", \"shape\": [%zu]},\n"
            "    \"params1\": {\"file\": \"params1.f32\", \"dtype\": \"<f4\", \"shape\": [%zu]},\n"
            "    \"params2\": {\"file\": \"params2.f32\", \"dtype\": \"<f4\", \"shape\": [%zu]},\n"
            "    \"casts\": {\"file\": \"casts.f32\", \"dtype\": \"<f4\", \"shape\": [%zu]}\n  },\n",
            steps, B, T, steps, B, T, n, n, n, n, rec.n);
    CHECK(dump_json_tensors(j, &c), "a tensor's shape disagrees with llama_param_sizes");
    fprintf(j, "}\n");
    CHECK(fclose(j) == 0, "cannot build the manifest");
    write_file(out, "manifest.json", js, jn);
    printf("train_policy_dump: %s: policy %s, %ld steps, final loss line written, %zu cast floats\n", out, pol.name,
           steps, rec.n);
    free(js), free(log), free(idx), free(rec.data), free(am), free(av), free(p_old), free(kahan);
    free(tokens), free(targets);
    ac_free(&ac);
    llama_free(&m);
    return 0;
}
