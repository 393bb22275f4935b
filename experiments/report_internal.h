// report_internal.h: what report.c (reading runs, report.md) and report_plot.c (data files,
// gnuplot scripts, running gnuplot) share: the per-run summaries and the plot list.
// Internal to experiments/: not installed, not for other layers.
#ifndef FPLAB_REPORT_INTERNAL_H
#define FPLAB_REPORT_INTERNAL_H
#include <stdbool.h>
#include <stdint.h>

#include "experiments/report.h"

enum { RP_NAME = 64, RP_PATH = 4096 };

typedef enum { RP_OK, RP_INCOMPLETE, RP_FAILED, RP_MISSING } rp_status;

// Telemetry of one cast site over one run: fractions averaged over the steps that reported
// the site with n > 0 (overflow, underflow, subnormal, nan), amax its largest value.
typedef struct {
    char name[RP_NAME];
    double frac[4];
    double amax;
} rp_site;

// One row of a run's ptq.jsonl (`fplab eval --format json` of its checkpoint, ablate --ptq).
typedef struct {
    char policy[RP_NAME];
    double delta;  // the loss under the policy minus the checkpoint's fp32 loss
} rp_ptq;

typedef struct {
    char preset[RP_NAME];  // the run directory's parent name
    uint64_t seed;
    char dir[RP_PATH];
    rp_status status;
    char why[256];         // the FAILED marker's text, or what is missing
    long last_step;        // the last step logged (0: none)
    long planned;          // the steps its start line announced (-1: none)
    double train_loss;     // mean loss of the last k logged steps (rp_train_window)
    double val_loss;       // the last logged val_loss (NaN: none or diverged)
    bool has_val;
    double tokens_per_s, elapsed_s;  // of the last logged step
    long skipped;
    bool has_scale;        // some step logged a finite loss_scale != 1
    bool has_update;
    double swamped;        // mean over the steps that logged "update"
    rp_site *sites;
    int nsites;
    long ncurve;           // the curves below hold steps 0 .. ncurve-1 (index = step; 0 unused)
    double *loss, *val, *scale, *swamp;  // NaN where not logged
    unsigned char *skip;
    rp_ptq *ptq;           // its post-training evaluations (NULL, 0: none)
    int nptq;
} rp_run;

typedef struct {
    char name[RP_NAME];
    int first, count;      // its runs: runs[first .. first + count), by seed
} rp_preset;

typedef struct {
    const char *dir;
    rp_run *runs;
    int nruns;
    rp_preset *presets;
    int npresets;
    long steps;            // planned steps: ablate.json's, else the start lines', else the longest log
    bool have_manifest;
    char command[8192], cwd[RP_PATH], model[64], data[RP_PATH];
    int fp32;              // index of the preset "fp32", or -1
} rp_data;

// A run counts in the statistics when it completed.
static inline bool rp_counts(const rp_run *r) { return r->status == RP_OK; }
// k: how many of the last logged losses make the "final train loss": max(1, min(50, n/20)).
static inline long rp_train_window(long n) {
    long k = n / 20;
    return k < 1 ? 1 : k > 50 ? 50 : k;
}

typedef struct {
    const char *base;      // file name without extension ("val_loss")
    const char *title;
    char caption[512];
    bool written;          // .dat and .gp exist
    bool png;              // gnuplot drew the PNG
    char note[512];        // why not, if not
} rp_plot;

enum { RP_NPLOTS = 6 };

// Writes DIR/plots/*.dat and *.gp for the plots that have data and, when gnuplot is found,
// runs it on each. Fills plots[RP_NPLOTS]. gnuplot_found says whether it was found.
int rp_write_plots(const rp_data *d, const report_opts *o, rp_plot plots[RP_NPLOTS], bool *gnuplot_found,
                   char *msg, size_t msg_len);

#endif
