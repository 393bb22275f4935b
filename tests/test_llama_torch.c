// test_llama_torch.c: fplab's Llama against the committed result of its cross-check with Hugging
// Face transformers (tests/fixtures/llama_torch_check.json, written by
// tools/check_llama_torch.py; regenerate with `make check-trainer-torch`, which needs PyTorch).
// Without PyTorch this suite re-runs, in-process, the computation tools/dump_llama did for the
// fixture (the same setup: tools/dump_llama_setup.h) and checks that
// - the fixture records a passing comparison (every relative error <= its tolerance),
// - fplab's loss today equals the fixture's fplab loss within 1e-6 relative (a regression in the
//   model shows here), and HF's float64 loss within the cross-check tolerance,
// - each gradient tensor's largest magnitude is HF's within that tolerance (implied by the
//   element-wise comparison the fixture records: | max|a| - max|b| | <= max|a - b|).
// 1e-6 for the loss: the float32 loss of this model is ~3.5, so 1e-6 relative is ~15 ulps of a
// float32 result. The same code on the same thread count gives the same bits; another summation
// order (another thread count: OpenBLAS 0.3.21's sgemm sums differently for 16 rows than for 32;
// another CPU's BLAS kernel; -O1 under make asan) moves the logits by up to ~7e-7 relative and
// the loss by far less (measured: 1 and 2 threads give the same loss bits, asan too), while fplab's
// loss is 2e-8..4e-8 from transformers' float64 one (the fixture's loss_rel_err).
// Fixture paths are relative to $FPLAB_ROOT (default ".", the repository root).
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/llama_ops.h"
#include "tools/dump_llama_setup.h"
#include "trainer/llama.h"

static void setup(void) { llama_ops_threads(0); }
TestSuite(llama_torch, .init = setup);

static const double LOSS_REGRESSION_TOL = 1e-6;

// --- the fixture: a small JSON file read by key (every key looked up is unique in its case)

static char *read_fixture(void) {
    const char *root = getenv("FPLAB_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/llama_torch_check.json", root && *root ? root : ".");
    FILE *fh = fopen(path, "rb");
    cr_assert(fh, "cannot open %s: run the suite from the repository root, set FPLAB_ROOT, or "
              "regenerate the fixture with `make check-trainer-torch` (needs torch, transformers)", path);
    fseek(fh, 0, SEEK_END);
    const long n = ftell(fh);
    rewind(fh);
    char *s = malloc((size_t)n + 1);
    cr_assert(s && n > 0 && fread(s, 1, (size_t)n, fh) == (size_t)n, "cannot read %s", path);
    s[n] = 0;
    fclose(fh);
    return s;
}

// The text after `"key":` in [from, to), or fails the test.
static const char *fx_find(const char *from, const char *to, const char *key) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(from, pat);
    cr_assert(p && p < to, "fixture: key \"%s\" not found (regenerate with make check-trainer-torch)", key);
    p += strlen(pat);
    while (*p == ' ' || *p == '\n') p++;
    return p;
}

static double fx_num(const char *from, const char *to, const char *key) {
    const char *p = fx_find(from, to, key);
    char *end;
    const double v = strtod(p, &end);
    cr_assert(end != p, "fixture: \"%s\" is not a number", key);
    return v;
}

static bool fx_bool(const char *from, const char *to, const char *key) {
    const char *p = fx_find(from, to, key);
    cr_assert(!strncmp(p, "true", 4) || !strncmp(p, "false", 5), "fixture: \"%s\" is not a boolean", key);
    return p[0] == 't';
}

// [*from, *to): the record of case `name` ("untied", "tied"), ending after its "pass" key.
static void fx_case(const char *text, const char *end, const char *name, const char **from,
                    const char **to) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"name\": \"%s\"", name);
    *from = strstr(text, pat);
    cr_assert(*from, "fixture: no case \"%s\" (regenerate with make check-trainer-torch)", name);
    *to = strstr(*from, "\"pass\":");
    cr_assert(*to, "fixture: case \"%s\" has no \"pass\"", name);
    *to = *to + strlen("\"pass\":") + 8 < end ? *to + strlen("\"pass\":") + 8 : end;
}

// --- the test

static void check_case(const char *name, bool tied) {
    char *text = read_fixture();
    const char *end = text + strlen(text);
    const double tol = fx_num(text, end, "tolerance");
    cr_assert(tol > 0 && tol <= 1e-4, "fixture tolerance %g: expected (0, 1e-4]", tol);
    cr_assert(fx_bool(text, end, "pass"), "the fixture records a FAILED comparison with transformers");
    const char *a, *b;
    fx_case(text, end, name, &a, &b);
    cr_assert(fx_bool(a, b, "pass"), "%s: the fixture records a FAILED comparison", name);

    // The fixture was made from this setup (else it says nothing about the model here).
    llama_config c = dump_default_config();
    c.tied = tied;
    const struct { const char *key; double want; } same[] = {
        {"dim", c.dim}, {"n_layers", c.n_layers}, {"n_heads", c.n_heads},
        {"n_kv_heads", c.n_kv_heads}, {"hidden_dim", c.hidden_dim}, {"vocab_size", c.vocab_size},
        {"seq_len", c.seq_len}, {"rope_theta", c.rope_theta}, {"norm_eps", c.norm_eps},
        {"seed", (double)DUMP_SEED}, {"batch", DUMP_B}, {"tokens_per_row", DUMP_T}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        const double v = fx_num(a, b, same[i].key);
        cr_assert(fabs(v - same[i].want) <= 1e-6 * fabs(same[i].want),
                  "%s: fixture %s = %.9g, tools/dump_llama_setup.h gives %.9g: the setup changed; "
                  "regenerate with make check-trainer-torch", name, same[i].key, v, same[i].want);
    }
    cr_assert_eq(fx_bool(a, b, "tied"), tied, "%s: fixture tied flag", name);

    // The recorded comparison passes number by number, not only by its flag.
    const double e_loss = fx_num(a, b, "loss_rel_err"), e_logits = fx_num(a, b, "logits_rel_err");
    cr_assert(e_loss <= tol && e_logits <= tol, "%s: fixture loss err %.3g, logits err %.3g > %g",
              name, e_loss, e_logits, tol);

    // fplab today, in-process.
    llama_model m;
    char msg[256];
    int tok[DUMP_B * DUMP_T], tgt[DUMP_B * DUMP_T];
    cr_assert_eq(dump_setup(&m, &c, DUMP_SEED, tok, tgt, DUMP_B, DUMP_T, msg, sizeof msg), LLAMA_OK,
                 "%s", msg);
    const double loss = llama_forward(&m, tok, tgt, DUMP_B, DUMP_T);
    llama_zero_grad(&m);
    llama_backward(&m, tok, tgt, 1.0f);
    const double fx_fplab = fx_num(a, b, "fplab_loss"), fx_torch = fx_num(a, b, "torch_loss");
    cr_log_info("%s: loss %.9g; fixture: fplab %.9g, transformers (float64) %.17g", name, loss,
                fx_fplab, fx_torch);
    cr_assert(fabs(loss - fx_fplab) <= LOSS_REGRESSION_TOL * fabs(fx_fplab),
              "%s: fplab loss %.9g, the fixture's fplab loss %.9g (relative %.3g > %g): the model "
              "changed since `make check-trainer-torch`", name, loss, fx_fplab,
              fabs(loss - fx_fplab) / fabs(fx_fplab), LOSS_REGRESSION_TOL);
    cr_assert(fabs(loss - fx_torch) <= tol * fabs(fx_torch),
              "%s: fplab loss %.9g, transformers' %.17g", name, loss, fx_torch);

    size_t sizes[LP_COUNT];
    llama_param_sizes(&c, sizes);
    for (int t = 0; t < LP_COUNT; t++) {
        if (!sizes[t]) continue;
        char pat[64];
        snprintf(pat, sizeof pat, "\"name\": \"%s\"", llama_param_name(t));
        const char *r = strstr(a, pat);
        cr_assert(r && r < b, "%s: fixture has no gradient record for %s", name, llama_param_name(t));
        const double err = fx_num(r, b, "rel_err"), gref = fx_num(r, b, "torch_grad_max");
        cr_assert(err <= tol, "%s: fixture gradient error of %s %.3g > %g", name, llama_param_name(t),
                  err, tol);
        double gmax = 0;
        for (size_t j = 0; j < sizes[t]; j++) gmax = fmax(gmax, fabs(m.g.t[t][j]));
        cr_assert(gref > 0, "%s: %s has zero gradient in the fixture (vacuous)", name, llama_param_name(t));
        cr_assert(fabs(gmax - gref) <= tol * gref, "%s: max |grad %s| %.9g, transformers' %.9g", name,
                  llama_param_name(t), gmax, gref);
    }
    llama_free(&m);
    free(text);
}

Test(llama_torch, untied) { check_case("untied", false); }
Test(llama_torch, tied) { check_case("tied", true); }
