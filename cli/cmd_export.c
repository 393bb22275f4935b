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
            "tokenizer.bin, laid out so that './run OUT.bin -z TOK.bin -t 0 -n 0 [-i PROMPT]' prints\n"
            "what 'fplab sample --temperature 0 [--prompt PROMPT]' prints over the whole context.\n"
            "run.c hard-codes RoPE theta 10000 and RMSNorm eps 1e-5: other models are refused.\n"
            "Token-id vocabularies (llm.c shards) have no text: export the model alone (ids as they are).\n\n"
            "What run.c feeds: id 1 (BOS) first; with a non-empty prompt the id of the piece \" \" (its\n"
            "\"dummy prefix\"), then the prompt's characters (one it cannot find becomes <0xXX> byte\n"
            "tokens, ids 3 + byte), then it merges adjacent pairs whose joined text is a piece; it\n"
            "stops when it generates id 1 and drops a leading space of the piece printed right after\n"
            "id 1. The layout written for char and byte vocabularies:\n"
            "  ids 0 1 2     <unk> <s> </s>\n"
            "  ids 3..258    the byte tokens (a byte vocabulary's own tokens; <0x00>..<0xFF> for chars)\n"
            "  259..258+V    a char vocabulary's V characters\n"
            "  next          \"<s> \": run.c's merge turns [BOS, dummy prefix] into this one token\n"
            "  last          \" \" when the characters have no space\n"
            "<s> and \"<s> \" get the embedding of fplab sample's start token (a newline), the other added\n"
            "ids zeros; the classifier is written untied, each added id's row the mean of the model's\n"
            "rows, so greedy run.c never generates one (never stops early). run.c then feeds\n"
            "[start] or [start, prompt...], the sequence fplab sample feeds.\n"
            "Differences left: run.c skips one-byte pieces that are not printable or white space (a\n"
            "byte vocabulary's bytes >= 0x80 included); its sampling at -t > 0 uses its own random\n"
            "numbers. See docs/trainer.md, and tools/check_export_runc.sh to compare with a run.c.\n\n"
            "options:\n"
            "  --ckpt FILE        the checkpoint (required) []\n"
            "  --llama2c OUT      the model file to write (required; not the checkpoint) []\n"
            "  --tokenizer TOK    the tokenizer file to write (none: the model only) []\n"
            "  -h, --help         this text\n\n"
            "examples:\n"
            "  build/fplab train --data /usr/share/games/fortunes/cookie --model tiny --seq-len 64 --steps 200 \\\n"
            "      --ckpt-dir runs/tiny\n"
            "  build/fplab export --ckpt runs/tiny/ckpt.bin --llama2c runs/tiny/tiny.bin --tokenizer runs/tiny/tiny_tok.bin\n"
            "  ./run runs/tiny/tiny.bin -z runs/tiny/tiny_tok.bin -t 0 -n 0 -i \"The\"   # in a llama2.c checkout\n");
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
    char msg[2 * 4096 + 256];
    CLI_CHECK(export_llama2c_check_paths(ckpt, out, tok, msg, sizeof msg) == EXPORT_OK, "export: %s", msg);

    llama_model m;
    data_vocab v;
    CLI_CHECK(ckpt_load_model(ckpt, &m, &v, msg, sizeof msg) == CKPT_OK, "export: %s", msg);
    const llama_config *c = &m.cfg;
    CLI_CHECK(export_llama2c_check(c, msg, sizeof msg) == EXPORT_OK, "export: checkpoint '%s': %s", ckpt, msg);
    CLI_CHECK(!tok || v.kind != DATA_VOCAB_TOKENS,
              "export: --tokenizer: checkpoint '%s' has a token-id vocabulary (llm.c shards), which has "
              "no text; leave --tokenizer out and use the tokenizer the shards were made with", ckpt);
    export_llama2c_layout l;
    CLI_CHECK(export_llama2c_layout_of(&l, &v, msg, sizeof msg) == EXPORT_OK, "export: checkpoint '%s': %s",
              ckpt, msg);
    fprintf(stderr, "fplab export: %s: dim %d, hidden %d, layers %d, heads %d/%d, vocab %d, seq_len %d, %s\n",
            ckpt, c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size,
            c->seq_len, c->tied ? "tied classifier" : "untied classifier");

    int st = export_llama2c_model(out, &m, &v, msg, sizeof msg);
    if (st == EXPORT_OK) {
        printf("wrote %s (%zu bytes, llama2.c version 0, %d ids)\n", out, export_llama2c_model_bytes(c, &l), l.n_ids);
        if (l.model_base > 0)
            printf("run.c ids: 0-2 <unk> <s> </s>, 3-258 bytes, model tokens %d-%d, \"<s> \" %d%s\n", l.model_base,
                   l.model_base + l.n_model - 1, l.bos_space, l.space == l.n_ids - 1 ? ", \" \" (added) last" : "");
        if (tok && (st = export_llama2c_tokenizer(tok, &v, msg, sizeof msg)) == EXPORT_OK)
            printf("wrote %s (%d pieces)\n", tok, l.n_ids);
    }
    data_vocab_free(&v);
    llama_free(&m);
    if (st == EXPORT_OK) return 0;
    fprintf(stderr, "fplab: export: %s\n", msg);
    return st == EXPORT_EUNSUPPORTED || st == EXPORT_EINVAL ? CLI_EXIT_USAGE : 1;
}
