// cmd_report.c: `fplab report DIR`: writes DIR/report.md and the plots of an ablation
// directory or of one run's directory (experiments/report.h). Notes go to stderr; stdout stays empty but for --help.
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "experiments/report.h"

static void help(FILE *fp) {
    fputs("usage: fplab report DIR [--gnuplot CMD] [--no-plots]\n\n"
          "Reads the runs of an ablation directory (DIR/runs/PRESET/seed-S/log.jsonl, as 'fplab ablate'\n"
          "writes them, and DIR/ablate.json when present) and writes DIR/report.md: the command, a table\n"
          "per preset (final train and validation loss as mean [min, max] over seeds, gap to fp32 paired\n"
          "by seed, skipped steps, worst overflow and underflow site, swamped updates, tokens/s), the\n"
          "sites of each preset, plots, every run's status, and how to read it. The plots are PNGs drawn\n"
          "by gnuplot from DIR/plots/NAME.gp and NAME.dat, which stay there to edit and redraw. Without\n"
          "gnuplot the report is written without images and says so.\n\n"
          "DIR may also be one run's directory (DIR/log.jsonl, as 'fplab train --ckpt-dir DIR' writes):\n"
          "the report is then of that run alone: its losses, loss scale, per-site underflow and\n"
          "swamped updates, written to DIR/report.md and DIR/plots.\n\n"
          "options (default in brackets):\n"
          "  --gnuplot CMD     the gnuplot program, a name on PATH or a path [gnuplot]\n"
          "  --no-plots        write the plot data and scripts, do not run gnuplot\n"
          "  -h, --help        this text\n\n"
          "exit status: 0 written, 1 a file could not be written, 2 bad input (no such directory, no\n"
          "runs, a malformed log: the message names the file and line).\n\n"
          "examples:\n"
          "  # an ablation to report on (a few seconds on 2 cores), then its report again\n"
          "  build/fplab ablate --presets fp32,bf16-amp --model tiny --steps 100 --eval-every 50 \\\n"
          "      --data data/tinyshakespeare.txt --out runs/abl-tiny\n"
          "  build/fplab report runs/abl-tiny              # redraws runs/abl-tiny/report.md and its plots\n"
          "  build/fplab report runs/abl-tiny --no-plots   # the tables; plot data and scripts in runs/abl-tiny/plots\n"
          "  build/fplab report runs/abl-tiny/runs/fp32/seed-1   # one run of it\n",
          fp);
}

int cmd_report(int argc, char **argv) {
    static const struct option lo[] = {{"gnuplot", required_argument, 0, 'g'},
                                       {"no-plots", no_argument, 0, 'P'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    argv[0] = "fplab report";
    report_opts o = {.gnuplot = "gnuplot", .info = stderr};
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        switch (c) {
        case 'g': o.gnuplot = optarg; break;
        case 'P': o.gnuplot = NULL; break;
        case 'h': help(stdout); return 0;
        default: cli_usage_error("report");
        }
    }
    CLI_CHECK(argc - optind == 1, "report: expected exactly one DIR (an ablation or a run directory; see 'fplab "
              "report --help')");
    o.dir = argv[optind];
    char msg[1024];
    report_result r;
    const int st = report_write(&o, &r, msg, sizeof msg);
    if (st != XP_OK) {
        fprintf(stderr, "fplab: report: %s\n", msg);
        return st == XP_EINVAL ? CLI_EXIT_USAGE : 1;
    }
    fprintf(stderr, "report: %s/report.md: %d runs of %d presets (%d completed, %d failed, %d incomplete), "
                    "%d plots, %d drawn\n",
            o.dir, r.runs, r.presets, r.ok, r.failed, r.incomplete, r.plots_written, r.pngs);
    return 0;
}
