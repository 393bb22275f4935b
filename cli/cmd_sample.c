// cmd_sample.c: `fplab sample --ckpt FILE [...]`: generates text from a trained checkpoint
// (trainer/sample.h) and prints the prompt, then each token as it comes.
// The resolved configuration goes to stderr, the text alone to stdout (so it can be piped).
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "kernels/llama_ops.h"
#include "trainer/checkpoint.h"
#include "trainer/eval.h"
#include "trainer/sample.h"

static void help(FILE *fp) {
    const sample_opts d = sample_opts_default();
    fprintf(fp,
            "usage: fplab sample --ckpt FILE [--prompt TEXT] [--tokens N] [--temperature T]\n"
            "                    [--top-p P] [--seed S] [--policy P] [--threads N]\n\n"
            "Generates text from a checkpoint written by 'fplab train': prints the prompt, then each\n"
            "generated token as it comes. The output is a pure function of the checkpoint, the options\n"
            "and the thread count (draw i of the sampler is counter i of the generator keyed by seed).\n"
            "There is no KV cache: each token reruns the model over the last seq_len tokens. A policy's\n"
            "attn.kv site (e.g. --policy kv8-fp8) rounds the keys and values the attention reads; with a\n"
            "per-token recipe (plain, row, mx, block:K:FMT) that is what a cache holding the rounded\n"
            "values gives, token for token.\n\n"
            "What the model is fed: a start token (a newline if the vocabulary has one, else token 0),\n"
            "then the prompt's tokens; the start token is not printed. That is the sequence llama2.c's\n"
            "run.c feeds a model written by 'fplab export' (its BOS, and its BOS + \" \" dummy prefix,\n"
            "carry the start token's embedding). As run.c does after BOS, a space generated first\n"
            "after an empty prompt is not printed (it is still fed). To compare with run.c's\n"
            "'-t 0 -n 0' over the whole context, generate seq_len - (prompt tokens) + 1 tokens, where\n"
            "prompt tokens (printed on stderr) counts the start token.\n\n"
            "options:\n"
            "  --ckpt FILE        the checkpoint (required) []\n"
            "  --prompt TEXT      text to continue, in the checkpoint's vocabulary (token-id\n"
            "                     vocabularies: none) []\n"
            "  --tokens N         tokens to generate [%ld]\n"
            "  --temperature T    0: greedy (argmax); else softmax(logits / T) [%g]\n"
            "  --top-p P          nucleus sampling: keep the most probable tokens whose mass first\n"
            "                     exceeds P, in (0, 1]; 1: off [%g]\n"
            "  --seed S           seed of the sampler's draws [%llu]\n"
            "  --policy P         precision policy of the forward, as fplab eval applies it (a preset,\n"
            "                     e.g. w8a8-fp8, w4-nvfp4 or kv8-fp8, or a policy file) [fp32]\n"
            "  --threads N        OpenMP threads (0: one per processor; the last bits of the logits,\n"
            "                     hence near-ties, depend on it) [0]\n"
            "  -h, --help         this text\n\n"
            "examples:\n"
            "  build/fplab train --data /usr/share/games/fortunes/cookie --model tiny --seq-len 64 --steps 200 \\\n"
            "      --ckpt-dir runs/tiny\n"
            "  build/fplab sample --ckpt runs/tiny/ckpt.bin --prompt \"The\" --tokens 61 --temperature 0 --threads 1\n",
            d.n_tokens, d.temperature, d.top_p, (unsigned long long)d.seed);
}

typedef struct {
    const data_vocab *v;
    FILE *fp;
    bool after_start;  // the next token follows the start token directly (an empty prompt)
} printer;

// Writes the text of generated token t (byte token 0 is one NUL byte: fwrite, not fputs). A
// leading space right after the start token is dropped, as llama2.c's decoder drops it after
// BOS (SentencePiece's word-start marker), so that the text equals run.c's.
static int print_token(void *ctx, int32_t t) {
    printer *p = ctx;
    char buf[32];
    const int n = data_decode(p->v, t, buf, sizeof buf);
    const int skip = p->after_start && n > 0 && buf[0] == ' ';
    p->after_start = false;
    if (n > skip) fwrite(buf + skip, 1, (size_t)(n - skip), p->fp);
    fflush(p->fp);
    return ferror(p->fp) ? 1 : 0;  // e.g. a closed pipe: stop generating
}

static const char *vocab_kind(const data_vocab *v) {
    return v->kind == DATA_VOCAB_CHAR ? "char" : v->kind == DATA_VOCAB_BYTE ? "byte" : "token ids";
}

int cmd_sample(int argc, char **argv) {
    static const struct option lo[] = {
        {"ckpt", required_argument, 0, 'c'},    {"prompt", required_argument, 0, 'p'},
        {"tokens", required_argument, 0, 'n'},  {"temperature", required_argument, 0, 't'},
        {"top-p", required_argument, 0, 'P'},   {"seed", required_argument, 0, 's'},
        {"threads", required_argument, 0, 'j'}, {"policy", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    argv[0] = "fplab sample";
    sample_opts o = sample_opts_default();
    const char *ckpt = NULL, *prompt = NULL, *policy = "fp32";
    int threads = 0;
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        switch (c) {
        case 'c': ckpt = optarg; break;
        case 'p': prompt = optarg; break;
        case 'n': o.n_tokens = cli_parse_long(optarg, "--tokens", 0, 1000000000L); break;
        case 't': o.temperature = cli_parse_double(optarg, "--temperature"); break;
        case 'P': o.top_p = cli_parse_double(optarg, "--top-p"); break;
        case 's': o.seed = cli_parse_u64(optarg, "--seed"); break;
        case 'j': threads = (int)cli_parse_long(optarg, "--threads", 0, 4096); break;
        case 'o': policy = optarg; break;
        case 'h': help(stdout); return 0;
        default: cli_usage_error("sample");
        }
    }
    CLI_CHECK(optind == argc, "sample: unexpected argument '%s' (options take the form --name value)",
              argv[optind]);
    CLI_CHECK(ckpt, "sample: --ckpt FILE is required (see 'fplab sample --help')");
    char msg[512];
    CLI_CHECK(sample_opts_validate(&o, msg, sizeof msg) == SAMPLE_OK, "sample: --%s", msg);
    ac_policy pol;
    CLI_CHECK(ac_policy_load(&pol, policy, msg, sizeof msg) == AC_OK, "sample: --policy '%s': %s", policy, msg);
    if (!eval_kv_per_token(&pol))
        fprintf(stderr, "fplab: sample: --policy '%s': note: attn.kv's scales span tokens, so each step "
                        "re-quantizes the whole window, which a KV cache does not\n", policy);

    llama_model m;
    data_vocab v;
    CLI_CHECK(ckpt_load_model(ckpt, &m, &v, msg, sizeof msg) == CKPT_OK, "sample: %s", msg);
    llama_ops_threads(threads);
    // The policy's forward casts, uncounted (trainer/eval.h); fp32 casts nothing.
    ac_ctx ac;
    const eval_attach_req req = {.p = &pol, .B = 1, .T = m.cfg.seq_len, .seed = o.seed, .tel = AC_TEL_OFF,
                                 .uncounted = true};
    CLI_CHECK(eval_attach_policy(&m, &ac, &req, msg, sizeof msg) == EVAL_OK, "sample: --policy '%s': %s", policy,
              msg);

    // What is fed: the start token, then the prompt (trainer/sample.h).
    const long n = sample_prompt_tokens(&v, prompt, NULL, 0, msg, sizeof msg);
    CLI_CHECK(n >= 1, "sample: --prompt: %s (checkpoint '%s')", msg, ckpt);
    CLI_CHECK(n <= 1000000000L, "sample: --prompt: %ld tokens is too long", n);
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    CLI_CHECK(tok, "sample: out of memory for a prompt of %ld tokens", n);
    CLI_CHECK(sample_prompt_tokens(&v, prompt, tok, (size_t)n, msg, sizeof msg) == n, "sample: --prompt: %s", msg);

    const llama_config *c = &m.cfg;
    fprintf(stderr,
            "fplab sample: %s: dim %d, layers %d, heads %d/%d, vocab %d (%s), seq_len %d; prompt %ld "
            "tokens, generating %ld, temperature %g, top-p %g, seed %llu, policy %s\n",
            ckpt, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size, vocab_kind(&v),
            c->seq_len, n, o.n_tokens, o.temperature, o.top_p, (unsigned long long)o.seed, pol.name);
    // The prompt as given (it is what its tokens decode to), without the start token.
    if (n > 1) fputs(prompt, stdout);
    printer pr = {&v, stdout, n == 1};
    sample_sink sink = {.emit = print_token, .ctx = &pr};
    const int st = sample_generate(&m, tok, (int)n, &o, &sink, msg, sizeof msg);
    if (st == SAMPLE_OK && sink.n_done == o.n_tokens) fputc('\n', stdout);
    fflush(stdout);
    free(tok);
    data_vocab_free(&v);
    eval_detach_policy(&m, &ac);
    llama_free(&m);
    if (st != SAMPLE_OK) {
        fprintf(stderr, "fplab: sample: %s (checkpoint '%s')\n", msg, ckpt);
        return 1;
    }
    if (sink.n_done < o.n_tokens) {
        fprintf(stderr, "fplab: sample: output failed after %ld tokens\n", sink.n_done);
        return 1;
    }
    return 0;
}
