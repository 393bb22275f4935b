// report_plot.c: the plots of the report (report.h): for each, a data file and a gnuplot
// script in OUT/plots, and the PNG when gnuplot runs. The scripts use relative names, pick
// pngcairo when the gnuplot has it (else png), and are plain enough to edit by hand.
// Means over seeds use the completed runs (rp_counts) and, at each step, those of them with a
// finite value there: a diverged seed drops out of the curve where it went non-finite.
// Curves follow the steps the runs logged (rp_data.xs), never a dense range of step numbers.
// Where more than RP_PANELS_FROM presets would share one set of axes, the plot is small
// multiples: one panel per preset (gnuplot multiplot), the same axes in each, the baseline in
// grey behind the preset, so that curves lying on each other can still be told apart.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "experiments/report_internal.h"
#include "util/fileio.h"
#include "util/proc.h"

enum { RP_PANELS_FROM = 4, PANEL_COLS = 3, TOP_SITES_PLOTTED = 5 };

// --- helpers

// A gnuplot double-quoted string.
static void gp_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputc('"', f);
}

// The line style of preset q: 15 colours that stay apart on a white background (gnuplot's
// default cycle repeats after 8: fp32 and mxfp4 were both purple), and a dash pattern that
// changes every 5 presets, so that curves lying on each other stay distinguishable.
enum { NCOLOURS = 15 };
static const char *const colour[NCOLOURS] = {
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#000000", "#000080", "#b8860b", "#006400", "#800000"};
static const char baseline_grey[] = "#a0a0a0";

static void gp_style(FILE *f, int q, bool dashes) {
    fprintf(f, "lc rgb \"%s\"", colour[q % NCOLOURS]);
    if (dashes) fprintf(f, " dt %d", (q / 5) % 3 + 1 + 3 * (q / NCOLOURS));
}

// Stochastic rounding: a "swamped" update there is one the draw rounded back to the old weight
// (it still counts in expectation); the presets named *-sr say so in the key.
static bool is_sr(const char *preset) {
    const size_t n = strlen(preset);
    return n > 3 && !strcmp(preset + n - 3, "-sr");
}

static void dat_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "\t%.9g", v);
    else fputs("\tNaN", f);
}

// The script's head: terminal, output, labels. npanels > 1: a multiplot of that many panels,
// PANEL_COLS to a row, the title over all of them (each panel then sets its own title).
static void preamble(FILE *f, const rp_plot *p, const char *what, const char *xlabel, const char *ylabel,
                     int npanels) {
    fprintf(f, "# %s.gp: %s\n# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot %s.gp\n"
               "# in this directory; the numbers are in %s.dat.\n",
            p->base, what, p->base, p->base);
    const int cols = npanels > 1 ? (npanels < PANEL_COLS ? npanels : PANEL_COLS) : 1;
    const int rows = npanels > 1 ? (npanels + cols - 1) / cols : 1;
    const int w = npanels > 1 ? 420 * cols : 1000, h = npanels > 1 ? 360 * rows + 40 : 600;
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
               "    set terminal pngcairo noenhanced size %d,%d font \",10\"\n"
               "} else {\n"
               "    set terminal png noenhanced size %d,%d\n"
               "}\n", w, h, w, h);
    fprintf(f, "set output \"%s.png\"\n", p->base);
    fputs("set ylabel ", f), gp_str(f, ylabel), fputc('\n', f);
    fputs("set datafile missing \"NaN\"\nset grid\n", f);
    if (npanels > 1) {
        // the key under each panel (inside, it hid the curves that ran through its corner), where
        // the x label was: the overall title names the x axis instead
        char t[300];
        snprintf(t, sizeof t, "%s (x: %s; one panel per preset)", p->title, xlabel);
        fprintf(f, "set key below font \",8\" samplen 2\nset multiplot layout %d,%d title ", rows, cols);
        gp_str(f, t);
        fputs(" font \",12\"\n", f);
    } else {
        fputs("set xlabel ", f), gp_str(f, xlabel), fputc('\n', f);
        fputs("set key outside right top\nset title ", f), gp_str(f, p->title), fputc('\n', f);
    }
}

static void panel_title(FILE *f, const char *name) { fputs("set title ", f), gp_str(f, name), fputc('\n', f); }

typedef struct {
    FILE *dat, *gp;
    fio_out d, g;
} files_t;

static int open_files(files_t *ff, const char *pdir, const rp_plot *p, char *msg, size_t msg_len) {
    char dpath[RP_PATH + 64], gpath[RP_PATH + 64];
    snprintf(dpath, sizeof dpath, "%s/%s.dat", pdir, p->base);
    snprintf(gpath, sizeof gpath, "%s/%s.gp", pdir, p->base);
    if (fio_create_owned(&ff->d, dpath, msg, msg_len) != FIO_OK) return XP_EIO;
    if (fio_create_owned(&ff->g, gpath, msg, msg_len) != FIO_OK) {
        fio_abort(&ff->d);
        return XP_EIO;
    }
    ff->dat = ff->d.f, ff->gp = ff->g.f;
    return XP_OK;
}

static int close_files(files_t *ff, char *msg, size_t msg_len) {
    fio_out *outs[2] = {&ff->d, &ff->g};
    return fio_commit_all(outs, 2, msg, msg_len) == FIO_OK ? XP_OK : XP_EIO;
}

// A y range shared by every panel, from the values written: a margin of 5% of the span.
typedef struct {
    double lo, hi;
} span_t;
static void span_add(span_t *s, double v) {
    if (isfinite(v)) s->lo = fmin(s->lo, v), s->hi = fmax(s->hi, v);
}
static void span_set(FILE *f, const span_t *s) {
    if (!(s->lo <= s->hi)) return;
    const double m = s->hi > s->lo ? 0.05 * (s->hi - s->lo) : fmax(0.05 * fabs(s->hi), 1e-3);
    fprintf(f, "set yrange [%.9g:%.9g]\n", s->lo - m, s->hi + m);
}

typedef enum { C_LOSS, C_VAL, C_SWAMP, C_SNR } curve_id;

static const double *curve(const rp_run *r, curve_id c) {
    return c == C_LOSS ? r->loss : c == C_VAL ? r->val : c == C_SWAMP ? r->swamp : r->snr;
}

// The mean over the completed runs of preset p of curve c at step s; NaN when none has a
// finite value. *n counts those that did.
static double step_mean(const rp_data *d, const rp_preset *p, curve_id cid, long s, int *n) {
    double sum = 0;
    *n = 0;
    for (int i = p->first; i < p->first + p->count; i++) {
        const rp_run *r = &d->runs[i];
        if (!rp_counts(r)) continue;
        const long k = rp_point(r, s);
        if (k < 0) continue;
        const double v = curve(r, cid)[k];
        if (isfinite(v)) sum += v, (*n)++;
    }
    return *n ? sum / *n : NAN;
}

// The baseline a preset is compared with: fp32 when there is one, else the first preset.
static int baseline(const rp_data *d) { return d->fp32 >= 0 ? d->fp32 : 0; }

// --- the plots

// Mean-over-seeds curves, one block per preset that has a value at some step: val_loss
// (points at the evaluation steps), train_loss (with a trailing moving average), swamped.
// Small multiples past RP_PANELS_FROM presets, the baseline's curve in grey in each panel.
static int plot_mean_curve(const rp_data *d, rp_plot *p, const char *pdir, curve_id cid, bool smooth,
                           const char *ylabel, char *msg, size_t msg_len) {
    const long nx = d->nxs;
    int *blk = malloc(((size_t)d->npresets + 1) * sizeof *blk), nhave = 0;
    double *m = malloc(((size_t)nx + 1) * sizeof *m);
    if (!blk || !m) return free(blk), free(m), snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    const long x0 = cid == C_VAL ? 0 : 1;  // step 0: the initial weights' validation loss
    for (int q = 0; q < d->npresets; q++) {
        blk[q] = -1;
        for (long k = 0; k < nx && blk[q] < 0; k++) {
            int n;
            if (d->xs[k] >= x0 && isfinite(step_mean(d, &d->presets[q], cid, d->xs[k], &n))) blk[q] = nhave++;
        }
    }
    if (!nhave) {
        free(blk), free(m);
        return XP_OK;  // p->written stays false; the caller's note says why
    }
    files_t ff;
    int st = open_files(&ff, pdir, p, msg, msg_len);
    if (st) return free(blk), free(m), st;
    const long w = smooth ? (nx / 50 > 1 ? nx / 50 : 1) : 1;  // logged steps in the moving average
    const int col = smooth ? 4 : 2;
    span_t span = {INFINITY, -INFINITY};
    fprintf(ff.dat, "# %s: mean over the completed seeds of each preset, one block per preset\n", p->title);
    for (int q = 0; q < d->npresets; q++) {
        if (blk[q] < 0) continue;
        const rp_preset *ps = &d->presets[q];
        fprintf(ff.dat, "%s# preset %s\n# step\tmean\truns%s\n", blk[q] ? "\n\n" : "", ps->name,
                smooth ? "\tmoving_average" : "");
        for (long k = 0; k < nx; k++) {
            int n = 0;
            m[k] = d->xs[k] >= x0 ? step_mean(d, ps, cid, d->xs[k], &n) : NAN;
            if (!n) continue;
            fprintf(ff.dat, "%ld", d->xs[k]);
            dat_num(ff.dat, m[k]);
            fprintf(ff.dat, "\t%d", n);
            double v = m[k];
            if (smooth) {  // trailing mean of the last w logged steps' means that are finite
                double a = 0;
                int c = 0;
                for (long j = k; j > k - w && j >= 0; j--)
                    if (isfinite(m[j])) a += m[j], c++;
                dat_num(ff.dat, v = c ? a / c : NAN);
            }
            span_add(&span, v);
            fputc('\n', ff.dat);
        }
    }
    const bool panels = nhave > RP_PANELS_FROM;
    preamble(ff.gp, p, p->title, "optimizer step", ylabel, panels ? nhave : 1);
    if (cid == C_SWAMP) {
        fputs("set yrange [0:*]\n", ff.gp);  // a fraction: from 0, not from the data's minimum
        for (int q = 0; q < d->npresets; q++)
            if (blk[q] >= 0 && is_sr(d->presets[q].name) && !panels) {
                fputs("set label \"SR: a 'swamped' update is one this draw rounded back to the old weight; it is "
                      "not lost on average\" at graph 0.02, graph 0.96 front\n", ff.gp);
                break;
            }
    } else if (cid == C_SNR) {
        // log axis from at most 1, so that it shows Chmiel et al.'s threshold, below which
        // quantized training stops improving
        fprintf(ff.gp, "set logscale y\nset yrange [%g:*]\nset arrow from graph 0, first sqrt(3) to graph 1, first "
                "sqrt(3) nohead dt 2 lc rgb \"#606060\"\nset label \"sqrt(3)\" at graph 0.01, first sqrt(3) offset "
                "0,0.6 front\n", fmin(1.0, span.lo / 1.5));
    } else if (panels) span_set(ff.gp, &span);
    // points only where they are few (the evaluation and measured steps); per-step curves as lines
    const char *style = cid == C_VAL || cid == C_SNR ? "linespoints pt 7 ps 0.8" : "lines";
    const int b = baseline(d);
    for (int q = 0, first = 1; q < d->npresets; q++) {
        if (blk[q] < 0) continue;
        const rp_preset *ps = &d->presets[q];
        char t[RP_NAME + 48];
        snprintf(t, sizeof t, cid == C_SWAMP && is_sr(ps->name) ? "%s (SR, see the caption)" : "%s", ps->name);
        if (panels) {
            panel_title(ff.gp, t);
            fputs("plot ", ff.gp);
            if (q != b && blk[b] >= 0) {
                fprintf(ff.gp, "\"%s.dat\" index %d using 1:%d with %s lw 1.5 lc rgb \"%s\" title ", p->base, blk[b],
                        col, style, baseline_grey);
                gp_str(ff.gp, d->presets[b].name);
                fputs(", \\\n    ", ff.gp);
            }
            fprintf(ff.gp, "\"%s.dat\" index %d using 1:%d with %s lw 2 ", p->base, blk[q], col, style);
            gp_style(ff.gp, q, false);
            fputs(" title ", ff.gp), gp_str(ff.gp, t), fputc('\n', ff.gp);
            continue;
        }
        fprintf(ff.gp, "%s    \"%s.dat\" index %d using 1:%d with %s lw 2 ", first ? "plot \\\n" : ", \\\n", p->base,
                blk[q], col, style);
        gp_style(ff.gp, q, true);
        fputs(" title ", ff.gp), gp_str(ff.gp, t);
        first = 0;
    }
    fputs(panels ? "unset multiplot\n" : "\n", ff.gp);
    free(blk), free(m);
    if ((st = close_files(&ff, msg, msg_len))) return st;
    p->written = true;
    const char *how = panels ? " One panel per preset, the same axes in each, the baseline in grey." : "";
    if (smooth && w > 1)
        snprintf(p->caption, sizeof p->caption,
                 "Training loss against optimizer step, mean over seeds, as a trailing moving average over %ld "
                 "logged steps (the raw mean is column 2 of the data).%s", w, how);
    else if (smooth)
        snprintf(p->caption, sizeof p->caption,
                 "Training loss against optimizer step, mean over seeds (not smoothed: under 100 logged steps).%s",
                 how);
    else
        snprintf(p->caption, sizeof p->caption,
                 "Validation loss at each evaluation step (step 0: the initial weights), mean over the completed "
                 "seeds of each preset.%s", how);
    return XP_OK;
}

// Whether run r's loss scale moved (grew, backed off, or a step was skipped): a static scale is
// a flat line, which the table says better.
static bool scale_moved(const rp_run *r) {
    if (!r->has_scale) return false;
    double first = NAN;
    for (long k = 0; k < r->npt; k++) {
        if (r->skip[k]) return true;
        if (!isfinite(r->scale[k])) continue;
        if (isnan(first)) first = r->scale[k];
        else if (r->scale[k] != first) return true;
    }
    return false;
}

// The loss scale of every run of the presets that scale the loss, one line per run (a color
// per preset), skipped steps as dots; log y.
static int plot_loss_scale(const rp_data *d, rp_plot *p, const char *pdir, char *msg, size_t msg_len) {
    bool any = false;
    for (int i = 0; i < d->nruns; i++) any |= scale_moved(&d->runs[i]);
    if (!any) return XP_OK;
    files_t ff;
    int st = open_files(&ff, pdir, p, msg, msg_len);
    if (st) return st;
    fprintf(ff.dat, "# %s: one block per run\n", p->title);
    preamble(ff.gp, p, p->title, "optimizer step", "loss scale", 1);
    double lo = INFINITY, hi = -INFINITY;  // a factor 2 of room, so lines on the bounds show
    for (int i = 0; i < d->nruns; i++)
        for (long k = 0; k < d->runs[i].npt && scale_moved(&d->runs[i]); k++)
            if (isfinite(d->runs[i].scale[k]) && d->runs[i].scale[k] > 0)
                lo = fmin(lo, d->runs[i].scale[k]), hi = fmax(hi, d->runs[i].scale[k]);
    fputs("set logscale y 2\nset format y \"2^%L\"\n", ff.gp);
    if (lo <= hi) fprintf(ff.gp, "set yrange [%g:%g]\n", lo / 2, hi * 2);
    fputs("plot \\\n", ff.gp);
    int block = 0;
    for (int q = 0; q < d->npresets; q++) {
        const rp_preset *ps = &d->presets[q];
        bool titled = false;
        for (int i = ps->first; i < ps->first + ps->count; i++) {
            const rp_run *r = &d->runs[i];
            if (!r->npt || !scale_moved(r)) continue;
            fprintf(ff.dat, "%s# preset %s seed %llu (%s)\n# step\tloss_scale\tskipped\n", block ? "\n\n" : "",
                    r->preset, (unsigned long long)r->seed, r->status == RP_OK ? "completed" : "not completed");
            for (long k = 0; k < r->npt; k++) {
                if (isnan(r->loss[k]) && isnan(r->scale[k])) continue;  // not a training step (step 0)
                fprintf(ff.dat, "%ld", r->step[k]);
                dat_num(ff.dat, r->scale[k]);
                fprintf(ff.dat, "\t%d\n", r->skip[k]);
            }
            fprintf(ff.gp, "%s    \"%s.dat\" index %d using 1:2 with steps lw 1.5 ", block ? ", \\\n" : "",
                    p->base, block);
            gp_style(ff.gp, q, false);
            fputc(' ', ff.gp);
            if (titled) fputs("notitle", ff.gp);
            else fputs("title ", ff.gp), gp_str(ff.gp, ps->name);
            fprintf(ff.gp, ", \\\n    \"%s.dat\" index %d using 1:($3 > 0 ? $2 : 1/0) with points pt 7 ps 0.7 ",
                    p->base, block);
            gp_style(ff.gp, q, false);
            fputs(" notitle", ff.gp);
            titled = true;
            block++;
        }
    }
    fputc('\n', ff.gp);
    if ((st = close_files(&ff, msg, msg_len))) return st;
    p->written = true;
    snprintf(p->caption, sizeof p->caption,
             "Loss scale against optimizer step for every run whose scale moved (one line per seed, log scale; "
             "runs with a static scale are left out: theirs is a flat line); a dot marks a skipped step (a "
             "gradient overflowed: the scale backs off).");
    return XP_OK;
}

static bool is_grad_site(const char *s) {
    const size_t n = strlen(s);
    return n > 5 && !strcmp(s + n - 5, ".grad");
}

// Mean underflow fraction of each *.grad site, clustered by site, one bar per preset that has a
// nonzero rate somewhere (a preset whose every rate is zero would have a legend entry and no bar
// on the log scale: the caption names those instead), log y.
static int plot_grad_underflow(const rp_data *d, rp_plot *p, const char *pdir, char *msg, size_t msg_len) {
    const size_t np = (size_t)d->npresets, ns = (size_t)d->nsite;
    double *val = malloc((ns ? ns : 1) * np * sizeof *val);     // [gid][preset], NaN: not cast
    int *col = calloc(np + 1, sizeof *col), *row = calloc(ns + 1, sizeof *row);
    if (!val || !col || !row) return free(val), free(col), free(row), snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    for (size_t k = 0; k < ns * np; k++) val[k] = NAN;
    double minpos = INFINITY;
    for (int q = 0; q < d->npresets; q++) {
        rp_site_acc *v = NULL;
        const int n = rp_preset_sites(d, &d->presets[q], &v);
        if (n < 0) return free(val), free(col), free(row), snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
        for (int k = 0; k < n; k++) {
            const double u = rp_site_mean(&v[k], 1);
            if (!is_grad_site(d->site[v[k].gid]) || !isfinite(u)) continue;
            val[(size_t)v[k].gid * np + (size_t)q] = u;
            row[v[k].gid] = 1;
            if (!col[q]) col[q] = 1;           // casts a gradient site
            if (u > 0) col[q] = 2, minpos = fmin(minpos, u);  // and one underflowed
        }
        free(v);
    }
    int st = XP_OK, nbars = 0;
    for (int q = 0; q < d->npresets; q++) nbars += col[q] == 2;
    if (!nbars) goto done;
    files_t ff;
    if ((st = open_files(&ff, pdir, p, msg, msg_len))) goto done;
    fprintf(ff.dat, "# %s: rows are the gradient sites, columns the presets that cast one (NaN: not cast)\n# site",
            p->title);
    for (int q = 0; q < d->npresets; q++)
        if (col[q]) fprintf(ff.dat, "\t%s", d->presets[q].name);
    fputc('\n', ff.dat);
    for (size_t k = 0; k < ns; k++) {
        if (!row[k]) continue;
        fputs(d->site[k], ff.dat);
        for (int q = 0; q < d->npresets; q++)
            if (col[q]) dat_num(ff.dat, val[k * np + (size_t)q]);
        fputc('\n', ff.dat);
    }
    preamble(ff.gp, p, p->title, "gradient cast site", "underflow fraction (mean over steps and seeds)", 1);
    fputs("set style data histogram\nset style histogram cluster gap 1\nset style fill solid 0.85 border -1\n"
          "set boxwidth 0.9\nset xtics rotate by -25 nomirror\n", ff.gp);
    // log y from a decade below the smallest nonzero rate; zero bars stay empty
    fprintf(ff.gp, "set logscale y\nset format y \"%%.0e\"\nset yrange [%g:1]\n", pow(10, floor(log10(minpos)) - 1));
    fputs("plot \\\n", ff.gp);
    char none[200] = "";  // (fits the caption with its text)
    for (int q = 0, c = 0, drawn = 0; q < d->npresets; q++) {
        if (!col[q]) continue;
        if (col[q] == 2) {
            fprintf(ff.gp, "%s    \"%s.dat\" using %d%s ", drawn ? ", \\\n" : "", p->base, c + 2, drawn ? "" : ":xtic(1)");
            gp_style(ff.gp, q, false);
            fputs(" title ", ff.gp);
            gp_str(ff.gp, d->presets[q].name);
            drawn++;
        } else if (strlen(none) + strlen(d->presets[q].name) + 3 < sizeof none) {
            strcat(none, none[0] ? ", " : ""), strcat(none, d->presets[q].name);
        }
        c++;
    }
    fputc('\n', ff.gp);
    if ((st = close_files(&ff, msg, msg_len))) goto done;
    p->written = true;
    snprintf(p->caption, sizeof p->caption,
             "Fraction of the nonzero gradient values cast at each `*.grad` site that became zero, mean over steps "
             "and completed seeds, one bar per preset (log scale; a missing bar: zero, or the preset does not "
             "cast that site: see the data).%s%s%s", none[0] ? " No gradient site of " : "", none,
             none[0] ? " underflowed: no bars." : "");
done:
    free(val), free(col), free(row);
    return st;
}

// A curve that only some presets log (cid: C_SWAMP, the "update" member; C_SNR, "grad_noise"),
// mean over seeds, for the presets whose completed runs logged it; none: no plot.
static int plot_logged_curve(const rp_data *d, rp_plot *p, const char *pdir, curve_id cid, const char *ylabel,
                             const char *caption, char *msg, size_t msg_len) {
    bool any = false;
    for (int i = 0; i < d->nruns; i++) {
        const rp_run *r = &d->runs[i];
        any |= (cid == C_SWAMP ? r->has_update : r->has_noise) && rp_counts(r);
    }
    if (!any) return XP_OK;
    const int st = plot_mean_curve(d, p, pdir, cid, false, ylabel, msg, msg_len);
    if (!st && p->written) snprintf(p->caption, sizeof p->caption, "%s", caption);
    return st;
}

// The swamped-update fraction over steps, presets that log "update".
static int plot_swamped(const rp_data *d, rp_plot *p, const char *pdir, char *msg, size_t msg_len) {
    return plot_logged_curve(
        d, p, pdir, C_SWAMP, "swamped fraction of weight updates",
        "Fraction of the weight updates that were nonzero but vanished when the weight was stored in its "
        "low-precision format, against step, mean over seeds, for the presets that store weights in low "
        "precision. Under stochastic rounding (*-sr) an update is never lost in expectation: 'swamped' "
        "there counts the updates this draw rounded back to the old weight, a measure of noise.",
        msg, msg_len);
}

// The gradient's norm over its quantization noise (train --grad-noise-every) against step.
static int plot_grad_snr(const rp_data *d, rp_plot *p, const char *pdir, char *msg, size_t msg_len) {
    return plot_logged_curve(
        d, p, pdir, C_SNR, "||g|| / ||g_policy - g||",
        "The norm of the gradient computed with an exact backward (float32 products of uncast operands, "
        "the same forward) over the distance of the policy's gradient to it, at the steps train "
        "--grad-noise-every measured, mean over seeds, log scale. The dashed line is sqrt(3), below which "
        "Chmiel et al. (2025) find that quantized training stops improving.",
        msg, msg_len);
}

// The validation loss of each preset minus the baseline's (fp32 when there is one, else the
// first preset), paired by seed (the same seed: the same initial weights and batches), at the
// evaluation steps: the mean difference over the seeds as a line, their min..max as a band.
// Curves that lie on each other in val_loss are apart here. Small multiples past
// RP_PANELS_FROM presets (the bands would cover each other).
static int plot_val_delta(const rp_data *d, rp_plot *p, const char *pdir, char *msg, size_t msg_len) {
    const int base = baseline(d);
    if (d->npresets < 2) return XP_OK;
    const rp_preset *bp = &d->presets[base];
    int *blk = malloc(((size_t)d->npresets + 1) * sizeof *blk), nblk = 0;
    if (!blk) return snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    files_t ff;
    int st = XP_OK;
    bool open = false;
    span_t span = {INFINITY, -INFINITY};
    for (int q = 0; q < d->npresets; q++) {
        blk[q] = -1;
        if (q == base) continue;
        const rp_preset *ps = &d->presets[q];
        for (long k = 0; k < d->nxs; k++) {
            const long s = d->xs[k];
            double sum = 0, lo = INFINITY, hi = -INFINITY;
            int n = 0;
            for (int i = ps->first; i < ps->first + ps->count; i++) {
                const rp_run *r = &d->runs[i];
                const long a = rp_counts(r) ? rp_point(r, s) : -1;
                if (a < 0 || !isfinite(r->val[a])) continue;
                for (int j = bp->first; j < bp->first + bp->count; j++) {
                    const rp_run *b = &d->runs[j];
                    const long c = b->seed == r->seed && rp_counts(b) ? rp_point(b, s) : -1;
                    if (c < 0 || !isfinite(b->val[c])) continue;
                    const double dv = r->val[a] - b->val[c];
                    sum += dv, n++, lo = fmin(lo, dv), hi = fmax(hi, dv);
                }
            }
            if (!n) continue;
            if (!open) {
                if ((st = open_files(&ff, pdir, p, msg, msg_len))) return free(blk), st;
                open = true;
                fprintf(ff.dat, "# %s: validation loss minus %s's, paired by seed; one block per preset\n", p->title,
                        bp->name);
            }
            if (blk[q] < 0) {
                fprintf(ff.dat, "%s# preset %s\n# step\tmean\tmin\tmax\tseeds\n", nblk ? "\n\n" : "", ps->name);
                blk[q] = nblk++;
            }
            fprintf(ff.dat, "%ld", s);
            dat_num(ff.dat, sum / n);
            dat_num(ff.dat, lo);
            dat_num(ff.dat, hi);
            fprintf(ff.dat, "\t%d\n", n);
            span_add(&span, lo), span_add(&span, hi), span_add(&span, 0);
        }
    }
    if (!open) return free(blk), XP_OK;
    const bool panels = nblk > RP_PANELS_FROM;
    char yl[RP_NAME + 64];
    snprintf(yl, sizeof yl, "validation loss - %s's (same seed)", bp->name);
    preamble(ff.gp, p, p->title, "optimizer step", yl, panels ? nblk : 1);
    fputs("set arrow from graph 0, first 0 to graph 1, first 0 nohead lc rgb \"#000000\" lw 1\n"
          "set style fill transparent solid 0.15 noborder\n", ff.gp);
    if (panels) span_set(ff.gp, &span);
    for (int q = 0, first = 1; q < d->npresets; q++) {
        if (blk[q] < 0) continue;
        if (panels) panel_title(ff.gp, d->presets[q].name);
        fprintf(ff.gp, "%s\"%s.dat\" index %d using 1:3:4 with filledcurves ",
                panels ? "plot " : first ? "plot \\\n    " : ", \\\n    ", p->base, blk[q]);
        gp_style(ff.gp, q, false);
        fprintf(ff.gp, " notitle, \\\n    \"%s.dat\" index %d using 1:2 with linespoints pt 7 ps 0.6 lw 2 ", p->base,
                blk[q]);
        gp_style(ff.gp, q, !panels);
        if (panels) fputs(" notitle\n", ff.gp);  // the panel's title names it
        else fputs(" title ", ff.gp), gp_str(ff.gp, d->presets[q].name);
        first = 0;
    }
    fputs(panels ? "unset multiplot\n" : "\n", ff.gp);
    free(blk);
    if ((st = close_files(&ff, msg, msg_len))) return st;
    p->written = true;
    snprintf(p->caption, sizeof p->caption,
             "Validation loss minus %s's at each evaluation step (step 0: the initial weights), paired by seed: "
             "the line is the mean difference over the seeds, the band their range (min to max). Above 0: worse "
             "than %s.%s", bp->name, bp->name,
             panels ? " One panel per preset, the same axes in each." : "");
    return XP_OK;
}

// Overflow (j = 0) or underflow (j = 1) fraction against step at the sites where it is highest:
// one panel per preset that has a nonzero rate (its TOP_SITES_PLOTTED sites by mean rate, mean
// over seeds at each step), log y shared by the panels; a site has one colour in every panel.
static int plot_site_rates(const rp_data *d, rp_plot *p, const char *pdir, int j, char *msg, size_t msg_len) {
    const size_t np = (size_t)d->npresets, nx = (size_t)d->nxs;
    int *top = malloc((np * TOP_SITES_PLOTTED + 1) * sizeof *top);     // [preset][rank]: gid or -1
    int *hue = malloc(((size_t)d->nsite + 1) * sizeof *hue), nhue = 0; // gid -> colour, -1 none
    double *rate = malloc((nx + 1) * sizeof *rate), *cnt = malloc((nx + 1) * sizeof *cnt);
    int st = XP_OK, npanel = 0;
    files_t ff;
    bool open = false;
    if (!top || !hue || !rate || !cnt) {
        st = XP_ENOMEM;
        goto done;
    }
    for (int k = 0; k < d->nsite; k++) hue[k] = -1;
    for (int q = 0; q < d->npresets; q++) {  // the sites to draw: the highest mean rates above zero
        rp_site_acc *v = NULL;
        const int n = rp_preset_sites(d, &d->presets[q], &v);
        if (n < 0) {
            st = XP_ENOMEM;
            goto done;
        }
        int *t = &top[(size_t)q * TOP_SITES_PLOTTED];
        for (int r = 0; r < TOP_SITES_PLOTTED; r++) {
            int best = -1;
            for (int k = 0; k < n; k++) {
                const double m = rp_site_mean(&v[k], j);
                bool taken = false;
                for (int u = 0; u < r; u++) taken |= t[u] == v[k].gid;
                if (m > 0 && !taken && (best < 0 || m > rp_site_mean(&v[best], j))) best = k;
            }
            t[r] = best < 0 ? -1 : v[best].gid;
            if (best >= 0 && hue[t[r]] < 0) hue[t[r]] = nhue++;
        }
        npanel += t[0] >= 0;
        free(v);
    }
    if (!npanel) goto done;
    if ((st = open_files(&ff, pdir, p, msg, msg_len))) goto done;
    open = true;
    const char *what = j ? "underflow" : "overflow";
    fprintf(ff.dat, "# %s: the %s fraction at the sites with the highest mean rate, mean over the completed "
                    "seeds; one block per preset and site\n", p->title, what);
    double minpos = INFINITY;
    int block = 0;
    for (int q = 0; q < d->npresets; q++) {
        const rp_preset *ps = &d->presets[q];
        for (int r = 0; r < TOP_SITES_PLOTTED; r++) {
            const int gid = top[(size_t)q * TOP_SITES_PLOTTED + (size_t)r];
            if (gid < 0) break;
            for (size_t k = 0; k < nx; k++) rate[k] = cnt[k] = 0;
            for (int i = ps->first; i < ps->first + ps->count; i++) {  // each run's entries at this site
                const rp_run *run = &d->runs[i];
                if (!rp_counts(run)) continue;
                long x = 0;  // run points and d->xs both ascend: one merge
                for (size_t e = 0; e < run->ntel; e++) {
                    const rp_tel *t = &run->tel[e];
                    const double v = j ? t->under : t->over;
                    if (run->sites[t->site].gid != gid || !isfinite(v)) continue;
                    while (d->xs[x] < run->step[t->pt]) x++;
                    rate[x] += v, cnt[x]++;
                }
            }
            fprintf(ff.dat, "%s# preset %s site %s\n# step\t%s\truns\n", block ? "\n\n" : "", ps->name, d->site[gid],
                    what);
            for (size_t k = 0; k < nx; k++) {
                if (!cnt[k]) continue;
                const double m = rate[k] / cnt[k];
                fprintf(ff.dat, "%ld", d->xs[k]);
                dat_num(ff.dat, m);
                fprintf(ff.dat, "\t%.0f\n", cnt[k]);
                if (m > 0) minpos = fmin(minpos, m);
            }
            block++;
        }
    }
    const bool panels = npanel > 1;
    char yl[64];
    snprintf(yl, sizeof yl, "%s fraction (log scale)", what);
    preamble(ff.gp, p, p->title, "optimizer step", yl, npanel);
    fprintf(ff.gp, "set logscale y\nset format y \"1e%%L\"\nset yrange [%g:1]\n",
            pow(10, floor(log10(minpos))));
    block = 0;
    for (int q = 0; q < d->npresets; q++) {
        const int *t = &top[(size_t)q * TOP_SITES_PLOTTED];
        if (t[0] < 0) continue;
        if (panels) panel_title(ff.gp, d->presets[q].name);
        else {
            char tt[RP_NAME + 64];
            snprintf(tt, sizeof tt, "%s: %s", p->title, d->presets[q].name);
            panel_title(ff.gp, tt);
        }
        fputs("plot ", ff.gp);
        for (int r = 0; r < TOP_SITES_PLOTTED && t[r] >= 0; r++) {
            fprintf(ff.gp, "%s\"%s.dat\" index %d using 1:2 with lines lw 1.5 ", r ? ", \\\n    " : "", p->base,
                    block++);
            gp_style(ff.gp, hue[t[r]], true);
            fputs(" title ", ff.gp), gp_str(ff.gp, d->site[t[r]]);
        }
        fputc('\n', ff.gp);
    }
    if (panels) fputs("unset multiplot\n", ff.gp);
    st = close_files(&ff, msg, msg_len);
    open = false;
    if (st) goto done;
    p->written = true;
    snprintf(p->caption, sizeof p->caption,
             "Fraction of the values cast at a site that %s, against optimizer step, mean over the completed seeds: "
             "for each preset with a nonzero rate, its %d sites with the highest mean rate (log scale; a gap is a "
             "step where the rate was zero; every site's rate is in the Cast sites tables).%s",
             j ? "underflowed (nonzero, became zero)" : "overflowed (exceeded the format)", TOP_SITES_PLOTTED,
             panels ? " One panel per preset, the same axes in each; a site has the same colour in every panel." : "");
done:
    if (open) fio_abort(&ff.d), fio_abort(&ff.g);
    if (st == XP_ENOMEM) snprintf(msg, msg_len, "out of memory");
    free(top), free(hue), free(rate), free(cnt);
    return st;
}

// --- running gnuplot

// The gnuplot program as a path: as given if it has a '/', else the first match on PATH.
static bool find_program(const char *name, char *out, size_t cap) {
    if (strchr(name, '/')) {
        snprintf(out, cap, "%s", name);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    for (const char *s = path; *s;) {
        const size_t n = strcspn(s, ":");
        snprintf(out, cap, "%.*s/%s", (int)n, s, name);
        struct stat st;
        if (n && stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0) return true;
        s += n + (s[n] == ':');
    }
    return false;
}

static void draw(rp_plot *p, const char *prog, const char *pdir) {
    char png[RP_PATH + 64], log[RP_PATH + 64], gp[RP_NAME + 8], why[256] = "";
    snprintf(png, sizeof png, "%s/%s.png", pdir, p->base);
    snprintf(log, sizeof log, "%s/%s.log", pdir, p->base);
    snprintf(gp, sizeof gp, "%s.gp", p->base);
    // A PNG left from an earlier report would pass for this one's; and gnuplot (the PNG) and the
    // log's open follow a link, so a link planted at either name goes before they write.
    unlink(png), unlink(log);
    char *argv[] = {"gnuplot", gp, NULL};
    int ws = 0;
    if (!xp_run(prog, argv, pdir, log, &ws, why, sizeof why)) {
        snprintf(p->note, sizeof p->note, "gnuplot could not be started: %s", why);
        return;
    }
    char tail[200];
    fio_tail(log, 1, tail, sizeof tail);
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && access(png, F_OK) == 0) {
        p->png = true;
        unlink(log);  // warnings only (e.g. "no valid points" for the skipped-step dots)
        return;
    }
    xp_describe_status(ws, why, sizeof why);
    snprintf(p->note, sizeof p->note, "gnuplot failed on plots/%s.gp (%s): %s (see plots/%s.log)", p->base, why,
             tail[0] ? tail : "no message", p->base);
}

int rp_write_plots(const rp_data *d, const report_opts *o, rp_plot plots[RP_NPLOTS], bool *gnuplot_found,
                   char *msg, size_t msg_len) {
    static const struct {
        const char *base, *title, *none;
    } spec[RP_NPLOTS] = {
        {"val_delta", "Validation loss against the baseline",
         "fewer than two presets, or no evaluation step that a preset and the baseline share with a seed."},
        {"val_loss", "Validation loss", "no completed run logged a validation loss."},
        {"train_loss", "Training loss", "no completed run logged a finite training loss."},
        {"overflow", "Overflow per site over steps",
         "no site overflowed in a completed run (or no run reported telemetry: float32, or --telemetry off)."},
        {"underflow", "Underflow per site over steps",
         "no site underflowed in a completed run (or no run reported telemetry: float32, or --telemetry off)."},
        {"loss_scale", "Loss scale", "no run's loss scale moved (no preset scales the loss, or every scale was static)."},
        {"grad_underflow", "Gradient underflow per site",
         "no `*.grad` site underflowed in a completed run (float32 or bf16 gradients, loss scaling that works, or "
         "--telemetry off)."},
        {"swamped", "Swamped weight updates", "no preset stores its weights in low precision (no \"update\" telemetry)."},
        {"grad_snr", "Gradient signal over quantization noise",
         "no run measured its gradient noise (train --grad-noise-every)."},
    };
    char pdir[RP_PATH + 16];
    snprintf(pdir, sizeof pdir, "%s/plots", d->out);
    int st = fio_mkdir_p(pdir, msg, msg_len) == FIO_OK ? XP_OK : XP_EIO;
    if (st) return st;
    for (int i = 0; i < RP_NPLOTS; i++) {
        memset(&plots[i], 0, sizeof plots[i]);
        plots[i].base = spec[i].base, plots[i].title = spec[i].title;
    }
    if (!st) st = plot_val_delta(d, &plots[0], pdir, msg, msg_len);
    if (!st) st = plot_mean_curve(d, &plots[1], pdir, C_VAL, false, "validation loss", msg, msg_len);
    if (!st) st = plot_mean_curve(d, &plots[2], pdir, C_LOSS, true, "training loss", msg, msg_len);
    if (!st) st = plot_site_rates(d, &plots[3], pdir, 0, msg, msg_len);
    if (!st) st = plot_site_rates(d, &plots[4], pdir, 1, msg, msg_len);
    if (!st) st = plot_loss_scale(d, &plots[5], pdir, msg, msg_len);
    if (!st) st = plot_grad_underflow(d, &plots[6], pdir, msg, msg_len);
    if (!st) st = plot_swamped(d, &plots[7], pdir, msg, msg_len);
    if (!st) st = plot_grad_snr(d, &plots[8], pdir, msg, msg_len);
    if (st) return st;
    char prog[RP_PATH];
    *gnuplot_found = o->gnuplot && find_program(o->gnuplot, prog, sizeof prog);
    if (o->gnuplot && !*gnuplot_found && o->info)
        fprintf(o->info, "fplab report: '%s' not found: writing the report without plots (the scripts are in %s)\n",
                o->gnuplot, pdir);
    for (int i = 0; i < RP_NPLOTS; i++) {
        rp_plot *p = &plots[i];
        if (!p->written) {
            snprintf(p->note, sizeof p->note, "%s", spec[i].none);
            static const char *const ext[] = {"dat", "gp", "png", "log"};
            for (int e = 0; e < 4; e++) {  // files of an earlier report that no longer apply
                char f[RP_PATH + 64];
                snprintf(f, sizeof f, "%s/%s.%s", pdir, p->base, ext[e]);
                unlink(f);
            }
            continue;
        }
        if (*gnuplot_found) draw(p, prog, pdir);
        if (*gnuplot_found && !p->png && o->info) fprintf(o->info, "fplab report: %s\n", p->note);
    }
    return XP_OK;
}
