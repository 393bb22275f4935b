// dump_llama.c: one forward and backward of fplab's Llama (trainer/llama.h) on a small model,
// written out for tools/check_llama_torch.py to compare with Hugging Face's LlamaForCausalLM.
// The model, weights and batch come from tools/dump_llama_setup.h, which
// tests/test_llama_torch.c shares, so the committed fixture and the test see one computation.
//
// Output (in --out DIR, created if missing): manifest.json (format name and version, config,
// seed, batch shape, loss, and for every file its dtype and shape, for params and grads each
// tensor's name, offset and shape), and raw little-endian arrays without header (numpy reads
// them with fromfile; the manifest carries the magic and version instead): tokens.i32 (B,T),
// targets.i32 (B,T) (-1: ignored), params.f32 (the whole parameter buffer, llama.h order),
// logits.f32 (B,T,V), grads.f32 (the whole gradient buffer: d mean loss / d params).
// Each file is written to a temporary name and renamed; the manifest comes last.
// Exit status: 0 written, 1 failure (message on stderr), 2 bad usage.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/llama_ops.h"
#include "tools/dump_llama_setup.h"
#include "trainer/llama.h"
#include "util/fileio.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dump_llama writes raw little-endian arrays: a big-endian host needs byte swapping here"
#endif

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "dump_llama: %s:%d: ", __FILE__, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void usage(FILE *fh) {
    const llama_config d = dump_default_config();
    fprintf(fh,
            "usage: dump_llama --out DIR [--dim %d] [--layers %d] [--heads %d] [--kv-heads %d]\n"
            "                  [--hidden %d] [--vocab %d] [--seq-len %d] [--theta %g] [--eps %g]\n"
            "                  [--tied] [--seed %llu]\n"
            "One forward and backward of fplab's Llama on a batch of %d x min(%d, seq-len) tokens,\n"
            "written to DIR as raw little-endian arrays and manifest.json (see the top of\n"
            "tools/dump_llama.c). The defaults are the ones shown.\n",
            d.dim, d.n_layers, d.n_heads, d.n_kv_heads, d.hidden_dim, d.vocab_size, d.seq_len,
            d.rope_theta, d.norm_eps, (unsigned long long)DUMP_SEED, DUMP_B, DUMP_T);
}

static long parse_int(const char *opt, const char *s) {
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v <= 0 || v > 1000000) {
        fprintf(stderr, "dump_llama: %s '%s': expected a positive integer\n", opt, s);
        exit(2);
    }
    return v;
}

static float parse_float(const char *opt, const char *s) {
    char *end;
    errno = 0;
    const float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v)) {
        fprintf(stderr, "dump_llama: %s '%s': expected a finite number\n", opt, s);
        exit(2);
    }
    return v;
}

// Writes n bytes to DIR/name through a temporary file and a rename.
static void write_file(const char *dir, const char *name, const void *data, size_t n) {
    char path[4096], msg[4200];
    CHECK(snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path, "path too long: %s", dir);
    CHECK(fio_write_file(path, data, n, msg, sizeof msg) == FIO_OK, "%s", msg);
}

int main(int argc, char **argv) {
    llama_config c = dump_default_config();
    unsigned long long seed = DUMP_SEED;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--tied")) {
            c.tied = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "dump_llama: %s: unknown option or missing value\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--dim")) c.dim = (int)parse_int(a, v);
        else if (!strcmp(a, "--layers")) c.n_layers = (int)parse_int(a, v);
        else if (!strcmp(a, "--heads")) c.n_heads = (int)parse_int(a, v);
        else if (!strcmp(a, "--kv-heads")) c.n_kv_heads = (int)parse_int(a, v);
        else if (!strcmp(a, "--hidden")) c.hidden_dim = (int)parse_int(a, v);
        else if (!strcmp(a, "--vocab")) c.vocab_size = (int)parse_int(a, v);
        else if (!strcmp(a, "--seq-len")) c.seq_len = (int)parse_int(a, v);
        else if (!strcmp(a, "--theta")) c.rope_theta = parse_float(a, v);
        else if (!strcmp(a, "--eps")) c.norm_eps = parse_float(a, v);
        else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            seed = strtoull(v, &end, 0);
            if (errno || end == v || *end) {
                fprintf(stderr, "dump_llama: --seed '%s': expected an unsigned integer\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "dump_llama: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!out) {
        fprintf(stderr, "dump_llama: --out DIR is required\n");
        usage(stderr);
        return 2;
    }
    char msg[256];
    if (llama_config_validate(&c, msg, sizeof msg) != LLAMA_OK) {
        fprintf(stderr, "dump_llama: %s\n", msg);
        return 2;
    }
    if (fio_mkdir_p(out, msg, sizeof msg) != FIO_OK) {
        fprintf(stderr, "dump_llama: the output directory: %s\n", msg);
        return 1;
    }

    llama_ops_threads(0);
    const int B = DUMP_B, T = c.seq_len < DUMP_T ? c.seq_len : DUMP_T, N = B * T;
    int *tokens = malloc((size_t)N * sizeof *tokens), *targets = malloc((size_t)N * sizeof *targets);
    CHECK(tokens && targets, "out of memory");
    llama_model m;
    CHECK(dump_setup(&m, &c, seed, tokens, targets, B, T, msg, sizeof msg) == LLAMA_OK, "%s", msg);
    const size_t V = (size_t)c.vocab_size;
    float *logits = malloc((size_t)N * V * sizeof *logits);
    CHECK(logits, "out of memory for the logits");
    write_file(out, "params.f32", m.params, m.n_params * sizeof(float));  // before any update

    const float loss = llama_forward(&m, tokens, targets, B, T);
    CHECK(isfinite(loss), "forward returned %g", loss);
    // llama_backward turns the logits buffer into dlogits: copy them first.
    memcpy(logits, llama_logits(&m), (size_t)N * V * sizeof *logits);
    llama_zero_grad(&m);
    llama_backward(&m, tokens, targets, 1.0f);

    write_file(out, "tokens.i32", tokens, (size_t)N * sizeof(int32_t));
    write_file(out, "targets.i32", targets, (size_t)N * sizeof(int32_t));
    write_file(out, "logits.f32", logits, (size_t)N * V * sizeof(float));
    write_file(out, "grads.f32", m.grads, m.n_params * sizeof(float));

    // --- manifest
    char *js = NULL;
    size_t jn = 0;
    FILE *j = open_memstream(&js, &jn);
    CHECK(j, "out of memory for the manifest");
    fprintf(j, "{\n  \"format\": \"fplab-llama-dump\",\n  \"version\": 1,\n");
    dump_json_config(j, &c);
    fprintf(j, "  \"seed\": %llu,\n  \"batch\": %d,\n  \"tokens_per_row\": %d,\n", seed, B, T);
    fprintf(j, "  \"loss\": %.9g,\n  \"loss_hex\": \"%a\",\n", loss, loss);
    fprintf(j, "  \"n_params\": %zu,\n", m.n_params);
    fprintf(j,
            "  \"files\": {\n"
            "    \"tokens\": {\"file\": \"tokens.i32\", \"dtype\": \"<i4\", \"shape\": [%d, %d]},\n"
            "    \"targets\": {\"file\": \"targets.i32\", \"dtype\": \"<i4\", \"shape\": [%d, %d]},\n"
            "    \"params\": {\"file\": \"params.f32\", \"dtype\": \"<f4\", \"shape\": [%zu]},\n"
            "    \"logits\": {\"file\": \"logits.f32\", \"dtype\": \"<f4\", \"shape\": [%d, %d, %zu]},\n"
            "    \"grads\": {\"file\": \"grads.f32\", \"dtype\": \"<f4\", \"shape\": [%zu]}\n  },\n",
            B, T, B, T, m.n_params, B, T, V, m.n_params);
    CHECK(dump_json_tensors(j, &c), "a tensor's shape disagrees with llama_param_sizes");
    fprintf(j, "}\n");
    CHECK(fclose(j) == 0, "cannot build the manifest");
    write_file(out, "manifest.json", js, jn);
    printf("dump_llama: %s: loss %.9g, %zu parameters, batch %d x %d (seed %llu)\n", out, loss,
           m.n_params, B, T, seed);
    free(js), free(logits), free(tokens), free(targets);
    llama_free(&m);
    return 0;
}
