// cmd_export.c: `fplab export --ckpt FILE --llama2c OUT.bin [--tokenizer TOK.bin]`: writes a
// trained checkpoint as a llama2.c model (and its vocabulary as tokenizer.bin) for run.c
// (trainer/export_llama2c.h). Everything is checked before the first file is written.
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "trainer/checkpoint.h"
#include "trainer/export_llama2c.h"

static void help(FILE *fp) {
    fprintf(fp,
            "usage: fplab export --ckpt FILE --llama2c OUT.bin [--tokenizer TOK.bin]\n\n"
            "Writes the model of a checkpoint in llama2.c's legacy (version 0) format, which\n"
            "karpathy/llama2.c's run.c reads, and with --tokenizer its vocabulary as run.c's\n"
            "tokenizer.bin; then: ./run OUT.bin -z TOK.bin\n"
            "run.c hard-codes RoPE theta 10000 and RMSNorm eps 1e-5: other models are refused.\n"
            "Token-id vocabularies (llm.c shards) have no text: export the model alone.\n"
            "With a char vocabulary run.c treats token id 1 as BOS and stop (generation ends when\n"
            "it is sampled) and prefixes a prompt with the token of \" \"; see trainer/export_llama2c.h.\n\n"
            "options:\n"
            "  --ckpt FILE        the checkpoint (required)\n"
            "  --llama2c OUT      the model file to write (required)\n"
            "  --tokenizer TOK    the tokenizer file to write\n"
            "  -h, --help         this text\n");
}

int cmd_export(int argc, char **argv) {
    static const struct option lo[] = {{"ckpt", required_argument, 0, 'c'},
                                       {"llama2c", required_argument, 0, 'o'},
                                       {"tokenizer", required_argument, 0, 'z'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    argv[0] = "fplab export";
    const char *ckpt = NULL, *out = NULL, *tok = NULL;
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        switch (c) {
        case 'c': ckpt = optarg; break;
        case 'o': out = optarg; break;
        case 'z': tok = optarg; break;
        case 'h': help(stdout); return 0;
        default: cli_usage_error("export");
        }
    }
    CLI_CHECK(optind == argc, "export: unexpected argument '%s' (options take the form --name value)",
              argv[optind]);
    CLI_CHECK(ckpt, "export: --ckpt FILE is required (see 'fplab export --help')");
    CLI_CHECK(out, "export: --llama2c OUT.bin is required (see 'fplab export --help')");
    CLI_CHECK(!tok || strcmp(tok, out), "export: --tokenizer and --llama2c name the same file '%s'", out);

    char msg[512];
    llama_model m;
    data_vocab v;
    CLI_CHECK(ckpt_load_model(ckpt, &m, &v, msg, sizeof msg) == CKPT_OK, "export: %s", msg);
    const llama_config *c = &m.cfg;
    CLI_CHECK(export_llama2c_check(c, msg, sizeof msg) == EXPORT_OK, "export: checkpoint '%s': %s", ckpt, msg);
    CLI_CHECK(!tok || v.kind != DATA_VOCAB_TOKENS,
              "export: --tokenizer: checkpoint '%s' has a token-id vocabulary (llm.c shards), which has "
              "no text; leave --tokenizer out and use the tokenizer the shards were made with", ckpt);
    fprintf(stderr, "fplab export: %s: dim %d, hidden %d, layers %d, heads %d/%d, vocab %d, seq_len %d, %s\n",
            ckpt, c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size,
            c->seq_len, c->tied ? "tied classifier" : "untied classifier");

    int st = export_llama2c_model(out, &m, msg, sizeof msg);
    if (st == EXPORT_OK) {
        printf("wrote %s (%zu bytes, llama2.c version 0)\n", out, export_llama2c_model_bytes(c));
        if (tok && (st = export_llama2c_tokenizer(tok, &v, msg, sizeof msg)) == EXPORT_OK) {
            printf("wrote %s (%d tokens)\n", tok, v.size);
            if (v.kind == DATA_VOCAB_CHAR && v.size > 1) {
                char one[8], shown[16];
                data_decode(&v, 1, one, sizeof one);
                if (one[0] == ' ') snprintf(shown, sizeof shown, "the space");
                else if ((unsigned char)one[0] < 0x20) snprintf(shown, sizeof shown, "U+%04X", (unsigned)v.cp[1]);
                else snprintf(shown, sizeof shown, "'%s'", one);
                const bool has_space = data_encode(&v, " ", NULL, 0, NULL, 0) == 1;
                printf("note: run.c treats token 1 (%s) as BOS and stops generating at it%s\n", shown,
                       has_space ? "" : "; the vocabulary has no space: give run.c an empty prompt");
            }
        }
    }
    data_vocab_free(&v);
    llama_free(&m);
    if (st == EXPORT_OK) return 0;
    fprintf(stderr, "fplab: export: %s\n", msg);
    return st == EXPORT_EUNSUPPORTED || st == EXPORT_EINVAL ? CLI_EXIT_USAGE : 1;
}
