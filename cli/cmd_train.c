// cmd_train.c: `fplab train`: trains a Llama on a text file or llm.c token shards. Its long
// options are the rows of the trainer's option table (trainer/train_opts.c), plus --resume.
#include <math.h>
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
        fprintf(fp, "  --%-13s %s%s [%s]\n", t[i].name, t[i].help, t[i].run_only ? " (run-only)" : "", v);
    }
    fprintf(fp, "  --resume CKPT    continue the run saved in CKPT, in CKPT's directory (its log is\n"
                "                   appended); only the options marked run-only above may be given with\n"
                "                   it: --ckpt-dir, --ckpt-every, --log, --progress, --stop-at, --threads,\n"
                "                   --telemetry, --overwrite; and --steps N, larger than the run's, extends\n"
                "                   it: the cosine schedule is recomputed over N steps from there on (the\n"
                "                   lr jumps to what an N-step run has at that step; logged as \"extend\")\n"
                "  -h, --help       this text\n\n"
                "A run stops (exit status 1) when the loss, a gradient or a weight becomes inf or NaN in a\n"
                "step the loss scaler did not skip; its checkpoint then still holds the last good state.\n"
                "A fresh run refuses a --ckpt-dir or --log that holds another run (--overwrite 1 replaces\n"
                "it, but never one a live run holds), any output that is one of its inputs, and a log that is\n"
                "its checkpoint. A log that cannot be written (a full disk) stops the run (exit status 1).\n\n"
                "examples:\n"
                "  build/fplab train --data data/tinyshakespeare.txt --ckpt-dir runs/shakespeare   # nanoGPT's anchor, ~2 min\n"
                "  build/fplab train --data data/tinyshakespeare.txt --steps 300 --stop-at 100 --ckpt-dir runs/x\n"
                "  build/fplab train --resume runs/x/ckpt.bin\n"
                "  mpirun -np 4 build/fplab train --data data/tinyshakespeare.txt --comm bf16   # data parallel\n"
                "  mpirun -np 4 build/fplab train --data data/tinyshakespeare.txt --local-sgd 8 --outer-opt nesterov\n\n"
                "Under a launcher (mpirun, srun) rank r takes micro-batches r, r+N, ... of each step (--accum is\n"
                "per rank) and rank 0 writes the checkpoint and the log (docs/distributed.md).\n");
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
            CLI_CHECK(!given[i] || t[i].run_only || t[i].resume == TOPT_RESUME_GROW,
                      "--%s cannot change with --resume: the checkpoint fixes it (run-only options: "
                      "--ckpt-dir, --ckpt-every, --log, --progress, --stop-at, --threads, --telemetry, "
                      "--overwrite; --steps may extend the run)", t[i].name);
    } else {
        CLI_CHECK(train_opts_validate(&o, msg, sizeof msg) == 0, "%s", msg);
    }
    train_report rep = {0};
    const int st = train_run(&o, resume, given, &rep, msg, sizeof msg);
    if (st != TRAIN_OK) {  // refused before training: bad input (2); failed while training (1)
        fprintf(stderr, "fplab: train: %s\n", msg);
        return st == TRAIN_EREFUSED ? CLI_EXIT_USAGE : 1;
    }
    if (rep.rank != 0) return 0;  // under a launcher, rank 0 says how the run went
    if (resume && rep.steps_run == 0) {
        fprintf(stderr, "done already: the checkpoint holds all %ld steps of its run; nothing ran (--steps N "
                        "with N > %ld extends it)\n", rep.steps_done, rep.steps_done);
        return 0;
    }
    char val[48] = "no validation run";
    if (!isnan(rep.final_val_loss)) snprintf(val, sizeof val, "val loss %.4f", rep.final_val_loss);
    char train[48] = "no step run";
    if (!isnan(rep.final_loss)) snprintf(train, sizeof train, "train loss %.4f", rep.final_loss);
    fprintf(stderr, "done: %ld steps (%ld applied, %ld skipped), %s, %s, %.1f s, %.0f tokens/s "
                    "(forward %.1f s, backward %.1f s, optimizer %.1f s, eval %.1f s)\n",
            rep.steps_done, rep.applied, rep.skipped, train, val, rep.seconds, rep.tokens_per_s, rep.fwd_s,
            rep.bwd_s, rep.opt_s, rep.eval_s);
    return 0;
}
