// cmd_report.c: `fplab report INPUT... [--out DIR]`: writes report.md and the plots of an
// ablation directory, of one run (its directory or its log), or a comparison of several
// (experiments/report.h). Notes go to stderr; stdout stays empty but for --help.
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "experiments/report.h"

static void help(FILE *fp) {
    fputs("usage: fplab report INPUT... [--out DIR] [--gnuplot CMD] [--no-plots]\n\n"
          "Writes report.md and plots of training runs. Each INPUT is one of:\n"
          "  an ablation directory  DIR/runs/PRESET/seed-S/log.jsonl as 'fplab ablate' writes them (and\n"
          "                         DIR/ablate.json when present)\n"
          "  a run's directory      DIR/log.jsonl, as 'fplab train --ckpt-dir DIR' writes it\n"
          "  a run's log            FILE.jsonl, as 'fplab train --log FILE.jsonl' writes it\n"
          "report.md holds: where the runs came from (an ablation's command), a table per preset (final\n"
          "train and validation loss as mean [min, max] over seeds, gap to fp32 paired by seed, skipped\n"
          "steps, worst overflow and underflow site, swamped updates, tokens/s), the sites of each preset,\n"
          "plots, every run's status, and how to read it. A run outside an ablation is named by its policy;\n"
          "runs of one policy and seed from different inputs by their file or directory name. The plots\n"
          "are PNGs drawn by gnuplot from DIR/plots/NAME.gp and NAME.dat, which stay there to edit and\n"
          "redraw; where many presets would lie on each other, one panel per preset. Without gnuplot the\n"
          "report is written without images and says so.\n\n"
          "options (default in brackets):\n"
          "  --out DIR         where report.md and plots/ go (created if missing) [the INPUT, when it is\n"
          "                    the only one and a directory; required otherwise]\n"
          "  --gnuplot CMD     the gnuplot program, a name on PATH or a path [gnuplot]\n"
          "  --no-plots        write the plot data and scripts, do not run gnuplot\n"
          "  -h, --help        this text\n\n"
          "exit status: 0 written, 1 a file could not be written, 2 bad input (no such input, no runs, a\n"
          "malformed log: the message names the file and line; no --out where one is needed).\n\n"
          "examples:\n"
          "  # an ablation to report on (a few seconds on 2 cores), then its report again\n"
          "  d=$(mktemp -d)\n"
          "  build/fplab ablate --presets fp32,bf16-amp --model tiny --steps 100 --eval-every 50 \\\n"
          "      --data data/tinyshakespeare.txt --out $d/abl\n"
          "  build/fplab report $d/abl              # redraws $d/abl/report.md and its plots\n"
          "  build/fplab report $d/abl --no-plots   # the tables; plot data and scripts in $d/abl/plots\n"
          "  build/fplab report $d/abl/runs/fp32/seed-1   # one run of it\n"
          "  # two separate trainings compared (their logs), written to $d/cmp\n"
          "  build/fplab report $d/scaled.jsonl $d/noscale.jsonl --out $d/cmp\n",
          fp);
}

int cmd_report(int argc, char **argv) {
    static const struct option lo[] = {{"out", required_argument, 0, 'o'},
                                       {"gnuplot", required_argument, 0, 'g'},
                                       {"no-plots", no_argument, 0, 'P'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    argv[0] = "fplab report";
    report_opts o = {.gnuplot = "gnuplot", .info = stderr};
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        switch (c) {
        case 'o': o.out = optarg; break;
        case 'g': o.gnuplot = optarg; break;
        case 'P': o.gnuplot = NULL; break;
        case 'h': help(stdout); return 0;
        default: cli_usage_error("report");
        }
    }
    CLI_CHECK(argc - optind >= 1, "report: expected at least one INPUT (an ablation directory, a run's directory or "
              "a .jsonl log; see 'fplab report --help')");
    CLI_CHECK(!o.out || o.out[0], "report: --out: empty; expected a directory");
    o.inputs = (const char *const *)(argv + optind);
    o.ninputs = argc - optind;
    char msg[1024];
    report_result r;
    const int st = report_write(&o, &r, msg, sizeof msg);
    if (st != XP_OK) {
        fprintf(stderr, "fplab: report: %s\n", msg);
        return st == XP_EINVAL ? CLI_EXIT_USAGE : 1;
    }
    fprintf(stderr, "report: %s/report.md: %d runs of %d presets (%d completed, %d failed, %d incomplete), "
                    "%d plots, %d drawn\n",
            o.out ? o.out : argv[optind], r.runs, r.presets, r.ok, r.failed, r.incomplete, r.plots_written, r.pngs);
    return 0;
}
