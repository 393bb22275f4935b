// report_plot.c: the plots of the report (report.h): for each, a data file and a gnuplot
// script in DIR/plots, and the PNG when gnuplot runs. The scripts use relative names, pick
// pngcairo when the gnuplot has it (else png), and are plain enough to edit by hand.
// Means over seeds use the completed runs (rp_counts) and, at each step, those of them with a
// finite value there: a diverged seed drops out of the curve where it went non-finite.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "experiments/report_internal.h"
#include "util/fileio.h"
#include "util/proc.h"

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

static void preamble(FILE *f, const rp_plot *p, const char *what, const char *xlabel, const char *ylabel) {
    fprintf(f, "# %s.gp: %s\n# Written by fplab report. Redraw (or edit, then redraw) with: gnuplot %s.gp\n"
               "# in this directory; the numbers are in %s.dat.\n",
            p->base, what, p->base, p->base);
    fputs("if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
          "    set terminal pngcairo noenhanced size 1000,600 font \",10\"\n"
          "} else {\n"
          "    set terminal png noenhanced size 1000,600\n"
          "}\n", f);
    fprintf(f, "set output \"%s.png\"\n", p->base);
    fputs("set title ", f), gp_str(f, p->title), fputc('\n', f);
    fputs("set xlabel ", f), gp_str(f, xlabel), fputc('\n', f);
    fputs("set ylabel ", f), gp_str(f, ylabel), fputc('\n', f);
    fputs("set datafile missing \"NaN\"\nset key outside right top\nset grid\n", f);
}

typedef struct {
    FILE *dat, *gp;
    fio_out d, g;
} files_t;

static int open_files(files_t *ff, const char *pdir, const rp_plot *p, char *msg, size_t msg_len) {
    char dpath[RP_PATH + 64], gpath[RP_PATH + 64];
    snprintf(dpath, sizeof dpath, "%s/%s.dat", pdir, p->base);
    snprintf(gpath, sizeof gpath, "%s/%s.gp", pdir, p->base);
    if (fio_create(&ff->d, dpath, msg, msg_len) != FIO_OK) return XP_EIO;
    if (fio_create(&ff->g, gpath, msg, msg_len) != FIO_OK) {
        fio_abort(&ff->d);
        return XP_EIO;
    }
    ff->dat = ff->d.f, ff->gp = ff->g.f;
    return XP_OK;
}

static int close_files(files_t *ff, char *msg, size_t msg_len) {
    const int st = fio_commit(&ff->d, msg, msg_len);
    char ignored[256];
    const int st2 = fio_commit(&ff->g, st ? ignored : msg, st ? sizeof ignored : msg_len);
    return st || st2 ? XP_EIO : XP_OK;
}

typedef enum { C_LOSS, C_VAL, C_SWAMP } curve_id;

static const double *curve(const rp_run *r, curve_id c) {
    return c == C_LOSS ? r->loss : c == C_VAL ? r->val : r->swamp;
}

// The mean over the completed runs of preset p of curve c at step s; NaN when none has a
// finite value. *n counts those that did.
static double step_mean(const rp_data *d, const rp_preset *p, curve_id cid, long s, int *n) {
    double sum = 0;
    *n = 0;
    for (int i = p->first; i < p->first + p->count; i++) {
        const rp_run *r = &d->runs[i];
        if (!rp_counts(r) || s >= r->ncurve) continue;
        const double *c = curve(r, cid);
        if (isfinite(c[s])) sum += c[s], (*n)++;
    }
    return *n ? sum / *n : NAN;
}

static long max_curve(const rp_data *d) {
    long m = 0;
    for (int i = 0; i < d->nruns; i++)
        if (d->runs[i].ncurve > m) m = d->runs[i].ncurve;
    return m;
}

// --- the plots

// Mean-over-seeds curves, one block per preset that has a value at some step: val_loss
// (points at the evaluation steps) and train_loss (with a trailing moving average).
static int plot_mean_curve(const rp_data *d, rp_plot *p, const char *pdir, curve_id cid, bool smooth,
                           const char *ylabel, char *msg, size_t msg_len) {
    const long ns = max_curve(d);
    int *has = calloc((size_t)d->npresets + 1, sizeof *has), nhave = 0;
    double *m = malloc(((size_t)ns + 1) * sizeof *m);
    if (!has || !m) return free(has), free(m), snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    const long s0 = cid == C_VAL ? 0 : 1;  // step 0: the initial weights' validation loss
    for (int q = 0; q < d->npresets; q++)
        for (long s = s0; s < ns && !has[q]; s++) {
            int n;
            if (isfinite(step_mean(d, &d->presets[q], cid, s, &n))) has[q] = 1, nhave++;
        }
    if (!nhave) {
        free(has), free(m);
        return XP_OK;  // p->written stays false; the caller's note says why
    }
    files_t ff;
    int st = open_files(&ff, pdir, p, msg, msg_len);
    if (st) return free(has), free(m), st;
    const long w = smooth ? (d->steps / 50 > 1 ? d->steps / 50 : 1) : 1;
    fprintf(ff.dat, "# %s: mean over the completed seeds of each preset, one block per preset\n", p->title);
    preamble(ff.gp, p, p->title, "optimizer step", ylabel);
    if (cid == C_SWAMP) {
        fputs("set yrange [0:*]\n", ff.gp);  // a fraction: from 0, not from the data's minimum
        for (int q = 0; q < d->npresets; q++)
            if (has[q] && is_sr(d->presets[q].name)) {
                fputs("set label \"SR: a 'swamped' update is one this draw rounded back to the old weight; it is "
                      "not lost on average\" at graph 0.02, graph 0.96 front\n", ff.gp);
                break;
            }
    }
    fputs("plot \\\n", ff.gp);
    // points only where they are few (the evaluation steps); per-step curves as lines
    const char *style = cid == C_VAL ? "linespoints pt 7 ps 0.8" : "lines";
    int block = 0;
    for (int q = 0; q < d->npresets; q++) {
        if (!has[q]) continue;
        const rp_preset *ps = &d->presets[q];
        fprintf(ff.dat, "%s# preset %s\n# step\tmean\truns%s\n", block ? "\n\n" : "", ps->name,
                smooth ? "\tmoving_average" : "");
        for (long s = s0; s < ns; s++) {
            int n;
            m[s] = step_mean(d, ps, cid, s, &n);
            if (!n) continue;
            fprintf(ff.dat, "%ld", s);
            dat_num(ff.dat, m[s]);
            fprintf(ff.dat, "\t%d", n);
            if (smooth) {  // trailing mean of the last w steps' means that are finite
                double a = 0;
                int k = 0;
                for (long j = s; j > s - w && j >= 1; j--)
                    if (isfinite(m[j])) a += m[j], k++;
                dat_num(ff.dat, k ? a / k : NAN);
            }
            fputc('\n', ff.dat);
        }
        fprintf(ff.gp, "%s    \"%s.dat\" index %d using 1:%d with %s lw 2 ", block ? ", \\\n" : "", p->base, block,
                smooth ? 4 : 2, style);
        gp_style(ff.gp, q, true);
        fputs(" title ", ff.gp);
        if (cid == C_SWAMP && is_sr(ps->name)) {
            char t[RP_NAME + 48];
            snprintf(t, sizeof t, "%s (SR, see the note)", ps->name);
            gp_str(ff.gp, t);
        } else gp_str(ff.gp, ps->name);
        block++;
    }
    fputc('\n', ff.gp);
    free(has), free(m);
    if ((st = close_files(&ff, msg, msg_len))) return st;
    p->written = true;
    if (smooth && w > 1)
        snprintf(p->caption, sizeof p->caption,
                 "Training loss against optimizer step, mean over seeds, as a trailing moving average over %ld "
                 "steps (the raw mean is column 2 of the data).", w);
    else if (smooth)
        snprintf(p->caption, sizeof p->caption,
                 "Training loss against optimizer step, mean over seeds (not smoothed: under 100 steps).");
    else
        snprintf(p->caption, sizeof p->caption,
                 "Validation loss at each evaluation step, mean over the completed seeds of each preset.");
    return XP_OK;
}

// The loss scale of every run of the presets that scale the loss, one line per run (a color
// per preset), skipped steps as dots; log y.
// Whether run r's loss scale moved (grew, backed off, or a step was skipped): a static scale is
// a flat line, which the table says better.
static bool scale_moved(const rp_run *r) {
    if (!r->has_scale) return false;
    double first = NAN;
    for (long s = 1; s < r->ncurve; s++) {
        if (r->skip[s]) return true;
        if (!isfinite(r->scale[s])) continue;
        if (isnan(first)) first = r->scale[s];
        else if (r->scale[s] != first) return true;
    }
    return false;
}

static int plot_loss_scale(const rp_data *d, rp_plot *p, const char *pdir, char *msg, size_t msg_len) {
    bool any = false;
    for (int i = 0; i < d->nruns; i++) any |= scale_moved(&d->runs[i]);
    if (!any) return XP_OK;
    files_t ff;
    int st = open_files(&ff, pdir, p, msg, msg_len);
    if (st) return st;
    fprintf(ff.dat, "# %s: one block per run\n", p->title);
    preamble(ff.gp, p, p->title, "optimizer step", "loss scale");
    double lo = INFINITY, hi = -INFINITY;  // a factor 2 of room, so lines on the bounds show
    for (int i = 0; i < d->nruns; i++)
        for (long s = 1; s < d->runs[i].ncurve && scale_moved(&d->runs[i]); s++)
            if (isfinite(d->runs[i].scale[s]) && d->runs[i].scale[s] > 0)
                lo = fmin(lo, d->runs[i].scale[s]), hi = fmax(hi, d->runs[i].scale[s]);
    fputs("set logscale y 2\nset format y \"2^%L\"\n", ff.gp);
    if (lo <= hi) fprintf(ff.gp, "set yrange [%g:%g]\n", lo / 2, hi * 2);
    fputs("plot \\\n", ff.gp);
    int block = 0;
    for (int q = 0; q < d->npresets; q++) {
        const rp_preset *ps = &d->presets[q];
        bool scaled = false, titled = false;
        for (int i = ps->first; i < ps->first + ps->count; i++) scaled |= scale_moved(&d->runs[i]);
        if (!scaled) continue;
        for (int i = ps->first; i < ps->first + ps->count; i++) {
            const rp_run *r = &d->runs[i];
            if (!r->ncurve || !scale_moved(r)) continue;
            fprintf(ff.dat, "%s# preset %s seed %llu (%s)\n# step\tloss_scale\tskipped\n", block ? "\n\n" : "",
                    r->preset, (unsigned long long)r->seed, r->status == RP_OK ? "completed" : "not completed");
            for (long s = 1; s < r->ncurve; s++) {
                if (isnan(r->loss[s]) && isnan(r->scale[s])) continue;  // not logged
                fprintf(ff.dat, "%ld", s);
                dat_num(ff.dat, r->scale[s]);
                fprintf(ff.dat, "\t%d\n", r->skip[s]);
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

// Mean underflow fraction of each *.grad site, one bar per preset (clustered by site), log y.
static int plot_grad_underflow(const rp_data *d, rp_plot *p, const char *pdir, char *msg, size_t msg_len) {
    char (*site)[RP_NAME] = NULL;
    int nsite = 0, cap = 0, ncols = 0;
    int *col = calloc((size_t)d->npresets + 1, sizeof *col);
    if (!col) return snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    for (int i = 0; i < d->nruns; i++) {
        const rp_run *r = &d->runs[i];
        if (!rp_counts(r)) continue;
        for (int s = 0; s < r->nsites; s++) {
            if (!is_grad_site(r->sites[s].name)) continue;
            int k = 0;
            while (k < nsite && strcmp(site[k], r->sites[s].name)) k++;
            if (k == nsite) {
                if (nsite == cap) {
                    cap = cap ? 2 * cap : 16;
                    void *q = realloc(site, (size_t)cap * sizeof *site);
                    if (!q) return free(site), free(col), snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
                    site = q;
                }
                snprintf(site[nsite++], RP_NAME, "%s", r->sites[s].name);
            }
        }
    }
    // the presets that cast some gradient site, and the mean underflow of each site
    double *val = calloc((size_t)(nsite ? nsite : 1) * (size_t)d->npresets, sizeof *val);
    if (!val) return free(site), free(col), snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    double minpos = INFINITY;
    for (int q = 0; q < d->npresets; q++) {
        const rp_preset *ps = &d->presets[q];
        for (int k = 0; k < nsite; k++) {
            double sum = 0;
            int n = 0;
            for (int i = ps->first; i < ps->first + ps->count; i++) {
                const rp_run *r = &d->runs[i];
                if (!rp_counts(r)) continue;
                for (int s = 0; s < r->nsites; s++)
                    if (!strcmp(r->sites[s].name, site[k]) && isfinite(r->sites[s].frac[1]))
                        sum += r->sites[s].frac[1], n++;
            }
            val[(size_t)k * (size_t)d->npresets + (size_t)q] = n ? sum / n : NAN;
            if (n) col[q] = 1;
            if (n && sum / n > 0 && sum / n < minpos) minpos = sum / n;
        }
        ncols += col[q];
    }
    int st = XP_OK;
    if (!nsite || !ncols) goto done;
    files_t ff;
    if ((st = open_files(&ff, pdir, p, msg, msg_len))) goto done;
    fprintf(ff.dat, "# %s: rows are the gradient sites, columns the presets (NaN: not cast)\n# site", p->title);
    for (int q = 0; q < d->npresets; q++)
        if (col[q]) fprintf(ff.dat, "\t%s", d->presets[q].name);
    fputc('\n', ff.dat);
    for (int k = 0; k < nsite; k++) {
        fputs(site[k], ff.dat);
        for (int q = 0; q < d->npresets; q++)
            if (col[q]) dat_num(ff.dat, val[(size_t)k * (size_t)d->npresets + (size_t)q]);
        fputc('\n', ff.dat);
    }
    preamble(ff.gp, p, p->title, "gradient cast site", "underflow fraction (mean over steps and seeds)");
    fputs("set style data histogram\nset style histogram cluster gap 1\nset style fill solid 0.85 border -1\n"
          "set boxwidth 0.9\nset xtics rotate by -25 nomirror\n", ff.gp);
    if (isfinite(minpos))  // log y from a decade below the smallest nonzero rate; zero bars stay empty
        fprintf(ff.gp, "set logscale y\nset format y \"%%.0e\"\nset yrange [%g:1]\n", pow(10, floor(log10(minpos)) - 1));
    else
        fputs("set yrange [0:1]\n", ff.gp);
    fputs("plot \\\n", ff.gp);
    for (int q = 0, c = 0; q < d->npresets; q++) {
        if (!col[q]) continue;
        fprintf(ff.gp, "%s    \"%s.dat\" using %d%s ", c ? ", \\\n" : "", p->base, c + 2, c ? "" : ":xtic(1)");
        gp_style(ff.gp, q, false);
        fputs(" title ", ff.gp);
        gp_str(ff.gp, d->presets[q].name);
        c++;
    }
    fputc('\n', ff.gp);
    if ((st = close_files(&ff, msg, msg_len))) goto done;
    p->written = true;
    snprintf(p->caption, sizeof p->caption,
             "Fraction of the nonzero gradient values cast at each `*.grad` site that became zero, mean over steps "
             "and completed seeds, one bar per preset (log scale%s; a missing bar: zero, or the preset does not "
             "cast that site: see the data).", isfinite(minpos) ? "" : ", all zero here");
done:
    free(site), free(col), free(val);
    return st;
}

// The swamped-update fraction over steps, mean over seeds, presets that log "update".
static int plot_swamped(const rp_data *d, rp_plot *p, const char *pdir, char *msg, size_t msg_len) {
    bool any = false;
    for (int i = 0; i < d->nruns; i++) any |= d->runs[i].has_update && rp_counts(&d->runs[i]);
    if (!any) return XP_OK;
    const int st = plot_mean_curve(d, p, pdir, C_SWAMP, false, "swamped fraction of weight updates",
                                   msg, msg_len);
    if (!st && p->written)
        snprintf(p->caption, sizeof p->caption,
                 "Fraction of the weight updates that were nonzero but vanished when the weight was stored in its "
                 "low-precision format, against step, mean over seeds, for the presets that store weights in low "
                 "precision. Under stochastic rounding (*-sr) an update is never lost in expectation: 'swamped' "
                 "there counts the updates this draw rounded back to the old weight, a measure of noise.");
    return st;
}

// The validation loss of each preset minus the baseline's (fp32 when the grid has it, else the
// first preset), paired by seed (the same seed: the same initial weights and batches), at the
// evaluation steps: the mean difference over the seeds as a line, their min..max as a band.
// Curves that lie on each other in val_loss are apart here.
static int plot_val_delta(const rp_data *d, rp_plot *p, const char *pdir, char *msg, size_t msg_len) {
    const int base = d->fp32 >= 0 ? d->fp32 : 0;
    if (d->npresets < 2) return XP_OK;
    const rp_preset *bp = &d->presets[base];
    const long ns = max_curve(d);
    files_t ff;
    int st = XP_OK, block = 0;
    bool open = false;
    for (int q = 0; q < d->npresets; q++) {
        if (q == base) continue;
        const rp_preset *ps = &d->presets[q];
        bool header = false;
        for (long s = 0; s < ns; s++) {
            double sum = 0, lo = INFINITY, hi = -INFINITY;
            int n = 0;
            for (int i = ps->first; i < ps->first + ps->count; i++) {
                const rp_run *r = &d->runs[i];
                if (!rp_counts(r) || s >= r->ncurve || !isfinite(r->val[s])) continue;
                for (int j = bp->first; j < bp->first + bp->count; j++) {
                    const rp_run *b = &d->runs[j];
                    if (b->seed != r->seed || !rp_counts(b) || s >= b->ncurve || !isfinite(b->val[s])) continue;
                    const double dv = r->val[s] - b->val[s];
                    sum += dv, n++, lo = fmin(lo, dv), hi = fmax(hi, dv);
                }
            }
            if (!n) continue;
            if (!open) {
                if ((st = open_files(&ff, pdir, p, msg, msg_len))) return st;
                open = true;
                fprintf(ff.dat, "# %s: validation loss minus %s's, paired by seed; one block per preset\n", p->title,
                        bp->name);
                char yl[RP_NAME + 64];
                snprintf(yl, sizeof yl, "validation loss - %s's (same seed)", bp->name);
                preamble(ff.gp, p, p->title, "optimizer step", yl);
                fputs("set arrow from graph 0, first 0 to graph 1, first 0 nohead lc rgb \"#000000\" lw 1\n"
                      "set style fill transparent solid 0.15 noborder\nplot \\\n", ff.gp);
            }
            if (!header) {
                fprintf(ff.dat, "%s# preset %s\n# step\tmean\tmin\tmax\tseeds\n", block ? "\n\n" : "", ps->name);
                fprintf(ff.gp, "%s    \"%s.dat\" index %d using 1:3:4 with filledcurves ", block ? ", \\\n" : "",
                        p->base, block);
                gp_style(ff.gp, q, false);
                fprintf(ff.gp, " notitle, \\\n    \"%s.dat\" index %d using 1:2 with linespoints pt 7 ps 0.6 lw 2 ",
                        p->base, block);
                gp_style(ff.gp, q, true);
                fputs(" title ", ff.gp);
                gp_str(ff.gp, ps->name);
                header = true;
                block++;
            }
            fprintf(ff.dat, "%ld", s);
            dat_num(ff.dat, sum / n);
            dat_num(ff.dat, lo);
            dat_num(ff.dat, hi);
            fprintf(ff.dat, "\t%d\n", n);
        }
    }
    if (!open) return XP_OK;
    fputc('\n', ff.gp);
    if ((st = close_files(&ff, msg, msg_len))) return st;
    p->written = true;
    snprintf(p->caption, sizeof p->caption,
             "Validation loss minus %s's at each evaluation step (step 0: the initial weights), paired by seed: "
             "the line is the mean difference over the seeds, the band their range (min to max). Above 0: worse "
             "than %s.", bp->name, bp->name);
    return XP_OK;
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
    unlink(png);  // a PNG left from an earlier report would pass for this one's
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
        {"val_loss", "Validation loss", "no completed run logged a validation loss."},
        {"train_loss", "Training loss", "no completed run logged a finite training loss."},
        {"loss_scale", "Loss scale", "no run's loss scale moved (no preset scales the loss, or every scale was static)."},
        {"grad_underflow", "Gradient underflow per site",
         "no completed run reported telemetry for a `*.grad` site (float32 or bf16 gradients, or --telemetry off)."},
        {"swamped", "Swamped weight updates", "no preset stores its weights in low precision (no \"update\" telemetry)."},
        {"val_delta", "Validation loss against the baseline",
         "fewer than two presets, or no evaluation step that a preset and the baseline share with a seed."},
    };
    char pdir[RP_PATH + 16];
    snprintf(pdir, sizeof pdir, "%s/plots", d->dir);
    int st = fio_mkdir_p(pdir, msg, msg_len) == FIO_OK ? XP_OK : XP_EIO;
    if (st) return st;
    for (int i = 0; i < RP_NPLOTS; i++) {
        memset(&plots[i], 0, sizeof plots[i]);
        plots[i].base = spec[i].base, plots[i].title = spec[i].title;
    }
    if (!st) st = plot_mean_curve(d, &plots[0], pdir, C_VAL, false, "validation loss", msg, msg_len);
    if (!st) st = plot_mean_curve(d, &plots[1], pdir, C_LOSS, true, "training loss", msg, msg_len);
    if (!st) st = plot_loss_scale(d, &plots[2], pdir, msg, msg_len);
    if (!st) st = plot_grad_underflow(d, &plots[3], pdir, msg, msg_len);
    if (!st) st = plot_swamped(d, &plots[4], pdir, msg, msg_len);
    if (!st) st = plot_val_delta(d, &plots[5], pdir, msg, msg_len);
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
