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
    int gid;               // index into rp_data.site (every run's site names, sorted)
    double frac[4];
    double amax;
} rp_site;

// One step's overflow and underflow fraction at one site of a run (the plots over steps); NaN
// where the step did not cast at the site. As many as the log's site entries.
typedef struct {
    long pt;               // index into the run's points
    int site;              // index into the run's sites
    double over, under;
} rp_tel;

// One row of a run's ptq.jsonl (`fplab eval --format json` of its checkpoint, ablate --ptq).
typedef struct {
    char policy[RP_NAME];
    double delta;  // the loss under the policy minus the checkpoint's fp32 loss
} rp_ptq;

typedef struct {
    char preset[RP_NAME];  // the run directory's parent name, or the run's label (report.h)
    uint64_t seed;
    int input;             // index into rp_data.input
    char dir[RP_PATH];     // the run's directory (FAILED, train.err, ptq.jsonl); "" for a bare log
    char log[RP_PATH];     // its log
    rp_status status;
    char why[256];         // the FAILED marker's text, or what is missing
    long last_step;        // the last step logged (0: none)
    long planned;          // the steps its last start line announced (-1: none)
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
    // The points of the curves, one per logged step in order of step (step 0: the initial
    // weights' validation, when logged): memory follows the log, never a step number.
    long npt;
    long *step;
    double *loss, *val, *scale, *swamp;  // NaN where not logged
    double *snr;           // exact_norm / noise_norm of "grad_noise" steps (NaN elsewhere)
    bool has_noise;        // some step logged a finite, positive gradient-noise ratio
    unsigned char *skip;
    rp_tel *tel;           // in order of point
    size_t ntel;
    rp_ptq *ptq;           // its post-training evaluations (NULL, 0: none)
    int nptq;
} rp_run;

typedef struct {
    char name[RP_NAME];
    int first, count;      // its runs: runs[first .. first + count), by seed
} rp_preset;

typedef enum { RP_IN_ABLATION, RP_IN_RUN_DIR, RP_IN_LOG } rp_in_kind;

// One argument of `fplab report`: an ablation directory, a run's directory or a log.
typedef struct {
    const char *path;
    rp_in_kind kind;
    char stem[RP_NAME];    // its last path component without .jsonl (names runs that collide)
    bool have_manifest;
    char command[8192], cwd[RP_PATH], model[64], data[RP_PATH];
    long steps;            // ablate.json's, -1 without
} rp_input;

typedef struct {
    const char *out;       // where report.md and plots/ go
    rp_input *input;
    int ninput;
    rp_run *runs;
    int nruns;
    rp_preset *presets;
    int npresets;
    long steps;            // the runs' planned steps when they all agree, else -1
    int fp32;              // index of the preset "fp32", or -1
    char (*site)[RP_NAME]; // every run's site names, sorted, each once (rp_site.gid)
    int nsite;
    long *xs;              // every step some run logged (step 0 included), ascending, each once
    long nxs;
} rp_data;

// The index of step s among r's points, or -1.
long rp_point(const rp_run *r, long s);

// Values over seeds: count, sum, min and max of the finite ones.
typedef struct {
    int n;
    double sum, min, max;
} rp_acc;
void rp_acc_add(rp_acc *a, double v);

// A preset's sites: the mean over its completed runs of each run's per-site means.
typedef struct {
    int gid;               // rp_data.site
    rp_acc frac[4];
    double amax;
} rp_site_acc;
// The sites the completed runs of preset p cast, in order of gid, into *out (malloc'd); their
// count, or -1 out of memory.
int rp_preset_sites(const rp_data *d, const rp_preset *p, rp_site_acc **out);
double rp_site_mean(const rp_site_acc *s, int j);

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

enum { RP_NPLOTS = 9 };

// Writes DIR/plots/*.dat and *.gp for the plots that have data and, when gnuplot is found,
// runs it on each. Fills plots[RP_NPLOTS]. gnuplot_found says whether it was found.
int rp_write_plots(const rp_data *d, const report_opts *o, rp_plot plots[RP_NPLOTS], bool *gnuplot_found,
                   char *msg, size_t msg_len);

#endif
