// report.h: the report of an ablation directory (the layout ablate.h writes), of one run, or
// a comparison of several. Each input is an ablation directory (DIR/runs/PRESET/seed-S/log.jsonl,
// and DIR/ablate.json when present), a run's directory (DIR/log.jsonl, as `fplab train --ckpt-dir
// DIR` writes) or a log file (`fplab train --log FILE.jsonl`). A run outside an ablation is named
// by its policy (its "preset") and seed; runs of one policy and seed from different inputs (the
// same preset trained twice with other options) are named by their input instead: the file name
// without .jsonl or the directory's name, prefixed to an ablation's preset names ("abl/fp32").
// The report goes to OUT (the one input directory by default):
//   OUT/report.md        the command, a summary table per preset (final train/val loss as
//                        mean [min, max] over seeds, gap to fp32, skipped steps, worst
//                        overflow/underflow site, swamped updates, tokens/s), the sites of
//                        each preset, the plots, every run with its status, failed runs'
//                        stderr, and how to read it all
//   OUT/plots/NAME.dat   the numbers of each plot (gnuplot's format: blocks, # comments)
//   OUT/plots/NAME.gp    the gnuplot script (cd OUT/plots && gnuplot NAME.gp redraws it)
//   OUT/plots/NAME.png   when gnuplot is found and succeeds
// Plots: val_delta (validation loss minus the baseline's, fp32 or the first preset, paired by
// seed: mean line, min..max band), val_loss (mean over seeds, per preset, from step 0: the
// initial weights), train_loss (the same, moving average), overflow and underflow (the fraction
// at each site over steps, the sites with the highest rates, one panel per preset), loss_scale
// (every run whose scale moved, log y), grad_underflow (mean underflow fraction of each *.grad
// site, one bar per preset that underflowed), swamped (swamped-update fraction over steps,
// presets that store weights in low precision; from 0). Where more than RP_PANELS_FROM presets
// would lie on each other, a plot is small multiples (gnuplot multiplot: one panel per preset,
// the baseline in grey in each, shared axes). A plot without data is not written.
// Every text file is written to a temporary and renamed (fio_create_owned: a link planted at one
// of these names is replaced, never followed; a plots/ that is a link is refused). Without gnuplot
// the report is written without images and says so; that is not an error.
// The planned steps of a run are its last start line's (a resume may extend the run).
// Constraints: library level (status + message, never exits). Statistics over seeds use the
// runs that completed; a diverged run (non-finite final loss) is counted, not averaged.
#ifndef FPLAB_REPORT_H
#define FPLAB_REPORT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "experiments/status.h"

typedef struct {
    const char *dir;      // the one input (an ablation or run directory) when ninputs is 0
    const char *const *inputs;  // the inputs (directories or .jsonl logs), ninputs of them
    int ninputs;
    const char *out;      // the directory to write (created if missing); NULL: the one input directory
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

// Writes the report of the inputs. Returns XP_OK; XP_EINVAL when an input is missing or neither
// kind, no run has a log, a log or ablate.json is malformed (msg names file and line), or there is
// no out directory to default to (several inputs, or a log file); XP_EIO when a file cannot be
// written.
int report_write(const report_opts *o, report_result *r, char *msg, size_t msg_len);

#endif
