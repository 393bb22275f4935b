// report.h: the report of an ablation directory (the layout ablate.h writes): reads every
// DIR/runs/PRESET/seed-S/log.jsonl (and DIR/ablate.json when present) and writes
//   DIR/report.md        the command, a summary table per preset (final train/val loss as
//                        mean [min, max] over seeds, gap to fp32, skipped steps, worst
//                        overflow/underflow site, swamped updates, tokens/s), the sites of
//                        each preset, the plots, every run with its status, failed runs'
//                        stderr, and how to read it all
//   DIR/plots/NAME.dat   the numbers of each plot (gnuplot's format: blocks, # comments)
//   DIR/plots/NAME.gp    the gnuplot script (cd DIR/plots && gnuplot NAME.gp redraws it)
//   DIR/plots/NAME.png   when gnuplot is found and succeeds
// Plots: val_loss (mean over seeds, per preset, from step 0: the initial weights), train_loss
// (the same, moving average), loss_scale (every run whose scale moved, log y), grad_underflow
// (mean underflow fraction of each *.grad site, per preset), swamped (swamped-update fraction
// over steps, presets that store weights in low precision; from 0), val_delta (validation loss
// minus the baseline's, fp32 or the first preset, paired by seed: mean line, min..max band).
// 15 colours, dash patterns changing every 5 presets. A plot without data is not written.
// Every text file is written to a temporary and renamed. Without gnuplot the report is written
// without images and says so; that is not an error.
// Constraints: library level (status + message, never exits). Statistics over seeds use the
// runs that completed; a diverged run (non-finite final loss) is counted, not averaged.
#ifndef FPLAB_REPORT_H
#define FPLAB_REPORT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "experiments/status.h"

typedef struct {
    const char *dir;      // the ablation directory
    const char *gnuplot;  // program name or path ("gnuplot": searched on PATH); NULL: no plots
    FILE *info;           // notes for the user, e.g. that gnuplot is missing (NULL: none)
} report_opts;

typedef struct {
    int runs, presets;        // run directories found (plus runs of ablate.json's grid not found)
    int ok, failed, incomplete, missing, diverged;
    int plots_written;        // .dat + .gp pairs
    int pngs;                 // PNGs gnuplot produced
    bool gnuplot_found;
} report_result;

// Writes the report of o->dir. Returns XP_OK; XP_EINVAL when the directory or its runs/ is
// missing, no run has a log, or a log or ablate.json is malformed (msg names file and line);
// XP_EIO when a file cannot be written.
int report_write(const report_opts *o, report_result *r, char *msg, size_t msg_len);

#endif
