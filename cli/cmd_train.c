// cmd_train.c: `fplab train`: trains a Llama on a text file or llm.c token shards. Its long
// options are the rows of the trainer's option table (trainer/train_opts.c), plus --resume.
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "trainer/train.h"

static void help(FILE *fp, const train_opts *d) {
    fprintf(fp, "usage: fplab train --data FILE [--model NAME] [--option value ...]\n"
                "       fplab train --resume CKPT [--ckpt-dir DIR] [--threads N] ...\n\n"
                "Trains a Llama decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU) in float32 with\n"
                "AdamW, warmup + cosine schedule, gradient accumulation and clipping. Defaults are\n"
                "nanoGPT's CPU Shakespeare recipe. Prints a progress line (on a terminal) and writes a\n"
                "JSON-lines log (one object per step); checkpoints are atomic and --resume continues a\n"
                "run bitwise (same thread count).\n\noptions (default in brackets):\n");
    size_t n;
    const train_opt_desc *t = train_opt_table(&n);
    for (size_t i = 0; i < n; i++) {
        char v[TRAIN_PATH_MAX + 8];
        train_opt_get(d, &t[i], v, sizeof v);
        fprintf(fp, "  --%-13s %s [%s]\n", t[i].name, t[i].help, v);
    }
    fprintf(fp, "  --resume CKPT    continue the run saved in CKPT; only --ckpt-dir, --ckpt-every,\n"
                "                   --log, --progress, --stop-at and --threads may be given with it\n"
                "  -h, --help       this text\n\n"
                "example (nanoGPT's Shakespeare anchor, about 2 minutes on 2 cores):\n"
                "  fplab train --data ../shared/data/tinyshakespeare.txt --ckpt-dir runs/shakespeare\n");
}

int cmd_train(int argc, char **argv) {
    train_opts o, dflt;
    train_opts_default(&o);
    dflt = o;
    size_t n;
    const train_opt_desc *t = train_opt_table(&n);
    struct option longopts[n + 3];
    for (size_t i = 0; i < n; i++) longopts[i] = (struct option){t[i].name, required_argument, NULL, (int)(256 + i)};
    longopts[n] = (struct option){"resume", required_argument, NULL, 'r'};
    longopts[n + 1] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[n + 2] = (struct option){0};
    bool given[n];
    memset(given, 0, sizeof given);
    const char *resume = NULL;
    char msg[512];
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h') {
            help(stdout, &dflt);
            return 0;
        }
        if (c == 'r') {
            resume = optarg;
            continue;
        }
        if (c < 256 || c >= 256 + (int)n) cli_usage_error("train");
        given[c - 256] = true;
        CLI_CHECK(train_opt_set(&o, t[c - 256].name, optarg, msg, sizeof msg) == 0, "%s", msg);
    }
    CLI_CHECK(optind == argc, "train: unexpected argument '%s' (options take the form --name value)", argv[optind]);
    if (resume) {
        for (size_t i = 0; i < n; i++)
            CLI_CHECK(!given[i] || t[i].run_only,
                      "--%s cannot change with --resume: the checkpoint fixes it (run_only options: "
                      "--ckpt-dir, --ckpt-every, --log, --progress, --stop-at, --threads)", t[i].name);
    } else {
        CLI_CHECK(train_opts_validate(&o, msg, sizeof msg) == 0, "%s", msg);
    }
    train_report rep = {0};
    if (train_run(&o, resume, &rep, msg, sizeof msg) != 0) {
        fprintf(stderr, "fplab: train: %s\n", msg);
        return CLI_EXIT_USAGE;
    }
    fprintf(stderr, "done: %ld steps, train loss %.4f, val loss %.4f, %.1f s, %.0f tokens/s "
                    "(forward %.1f s, backward %.1f s, optimizer %.1f s, eval %.1f s)\n",
            rep.steps_done, rep.final_loss, rep.final_val_loss, rep.seconds, rep.tokens_per_s, rep.fwd_s,
            rep.bwd_s, rep.opt_s, rep.eval_s);
    return 0;
}
