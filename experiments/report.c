// report.c: reads an ablation directory into per-run summaries and writes report.md (see
// report.h); the plots are report_plot.c's.
// Statistics: over the seeds of a preset whose run completed and whose value is finite, as
// mean [min, max] (with 2-5 seeds a standard deviation says little; the range shows all of
// it). The gap to fp32 pairs runs by seed (same initialisation and batches), so seed noise
// common to both cancels; it is the mean [min, max] of the per-seed differences.
#include "experiments/report.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "experiments/report_internal.h"
#include "experiments/runlog.h"
#include "util/fileio.h"
#include "util/json.h"

// --- ablate.json

typedef struct {
    char (*names)[RP_NAME];  // run_names, in the order of --presets
    int nnames;
    uint64_t *seeds;
    int nseeds;
} grid_t;

static int load_manifest(rp_data *d, grid_t *g, char *msg, size_t msg_len) {
    char path[RP_PATH + 32], key[32];
    snprintf(path, sizeof path, "%s/ablate.json", d->dir);
    char *text = fio_slurp(path);
    if (!text) return XP_OK;
    d->have_manifest = true;
    jx_cur c;
    jx_init(&c, text);
    int cap_n = 0, cap_s = 0;
    if (jx_open(&c, '{')) do {
            jx_key(&c, key, sizeof key);
            if (!strcmp(key, "command")) jx_str(&c, d->command, sizeof d->command);
            else if (!strcmp(key, "cwd")) jx_str(&c, d->cwd, sizeof d->cwd);
            else if (!strcmp(key, "model")) jx_str(&c, d->model, sizeof d->model);
            else if (!strcmp(key, "data")) jx_str(&c, d->data, sizeof d->data);
            else if (!strcmp(key, "steps")) {
                const double v = jx_num(&c);
                d->steps = v >= 1 && v < 1e15 ? (long)v : -1;
            } else if (!strcmp(key, "run_names")) {
                if (jx_open(&c, '[')) do {
                        if (g->nnames == cap_n) {
                            cap_n = cap_n ? 2 * cap_n : 16;
                            void *q = realloc(g->names, (size_t)cap_n * sizeof *g->names);
                            if (!q) return free(text), snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
                            g->names = q;
                        }
                        jx_str(&c, g->names[g->nnames++], RP_NAME);
                    } while (jx_more(&c, ']'));
            } else if (!strcmp(key, "seeds")) {
                if (jx_open(&c, '[')) do {
                        if (g->nseeds == cap_s) {
                            cap_s = cap_s ? 2 * cap_s : 16;
                            void *q = realloc(g->seeds, (size_t)cap_s * sizeof *g->seeds);
                            if (!q) return free(text), snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
                            g->seeds = q;
                        }
                        jx_u64(&c, &g->seeds[g->nseeds++]);
                    } while (jx_more(&c, ']'));
            } else jx_skip(&c);
        } while (jx_more(&c, '}'));
    jx_end(&c);
    free(text);
    if (!jx_ok(&c)) {
        snprintf(msg, msg_len, "%s: malformed: %s", path, c.err);
        return XP_EINVAL;
    }
    return XP_OK;
}

// --- finding runs

static int add_run(rp_data *d, int *cap, const char *preset, uint64_t seed) {
    for (int i = 0; i < d->nruns; i++)
        if (d->runs[i].seed == seed && !strcmp(d->runs[i].preset, preset)) return XP_OK;
    if (d->nruns == *cap) {
        *cap = *cap ? 2 * *cap : 32;
        void *q = realloc(d->runs, (size_t)*cap * sizeof *d->runs);
        if (!q) return XP_ENOMEM;
        d->runs = q;
    }
    rp_run *r = &d->runs[d->nruns++];
    memset(r, 0, sizeof *r);
    snprintf(r->preset, sizeof r->preset, "%s", preset);
    r->seed = seed;
    snprintf(r->dir, sizeof r->dir, "%s/runs/%s/seed-%llu", d->dir, preset, (unsigned long long)seed);
    return XP_OK;
}

static bool parse_seed_dir(const char *name, uint64_t *seed) {
    if (strncmp(name, "seed-", 5) || name[5] < '0' || name[5] > '9') return false;
    char *end;
    errno = 0;
    *seed = strtoull(name + 5, &end, 10);
    return !*end && !errno;
}

// A single run's directory (DIR/log.jsonl, as `fplab train --ckpt-dir DIR` writes; no runs/):
// reported as a grid of one run, named by its log's policy and seed, its files in DIR itself.
static int find_single_run(rp_data *d, int *cap, char *msg, size_t msg_len) {
    char path[RP_PATH + 64];
    snprintf(path, sizeof path, "%s/log.jsonl", d->dir);
    runlog l;
    const int st = runlog_read(&l, path, false, msg, msg_len);
    if (st == RUNLOG_ENOMEM) return XP_ENOMEM;
    if (st) return XP_EINVAL;
    const char *name = l.has_start && l.policy[0] ? l.policy : "run";
    char preset[RP_NAME];
    snprintf(preset, sizeof preset, "%.63s", strrchr(name, '/') ? strrchr(name, '/') + 1 : name);
    const uint64_t seed = l.has_start ? l.seed : 0;
    runlog_free(&l);
    if (add_run(d, cap, preset, seed)) return snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    snprintf(d->runs[0].dir, sizeof d->runs[0].dir, "%s", d->dir);
    return XP_OK;
}

static int find_runs(rp_data *d, const grid_t *g, char *msg, size_t msg_len) {
    char path[RP_PATH + 64];
    snprintf(path, sizeof path, "%s/runs", d->dir);
    DIR *top = opendir(path);
    int cap = 0;
    char one[RP_PATH + 64];
    snprintf(one, sizeof one, "%s/log.jsonl", d->dir);
    if (!top && !g->nnames && fio_is_file(one)) return find_single_run(d, &cap, msg, msg_len);
    if (!top && !g->nnames) {
        snprintf(msg, msg_len, "'%s': no runs/ directory and no log.jsonl (expected an ablation, "
                 "DIR/runs/PRESET/seed-S/log.jsonl as 'fplab ablate' writes, or a run, DIR/log.jsonl as "
                 "'fplab train --ckpt-dir DIR' writes)", d->dir);
        return XP_EINVAL;
    }
    for (struct dirent *e; top && (e = readdir(top));) {
        if (e->d_name[0] == '.') continue;
        char sub[RP_PATH + 512];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        DIR *pd = fio_is_dir(sub) && strlen(e->d_name) < RP_NAME ? opendir(sub) : NULL;
        for (struct dirent *s; pd && (s = readdir(pd));) {
            uint64_t seed;
            char sd[RP_PATH + 1024];
            snprintf(sd, sizeof sd, "%s/%s", sub, s->d_name);
            if (parse_seed_dir(s->d_name, &seed) && fio_is_dir(sd) && add_run(d, &cap, e->d_name, seed))
                return closedir(pd), closedir(top), snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
        }
        if (pd) closedir(pd);
    }
    if (top) closedir(top);
    for (int i = 0; i < g->nnames; i++)  // the grid's runs that left no directory
        for (int s = 0; s < g->nseeds; s++)
            if (add_run(d, &cap, g->names[i], g->seeds[s])) return snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    if (!d->nruns) {
        snprintf(msg, msg_len, "'%s': no runs found (expected %s/PRESET/seed-S/log.jsonl)", d->dir, path);
        return XP_EINVAL;
    }
    return XP_OK;
}

// Order: the grid's presets as --presets listed them, then fp32, then the rest by name.
static int preset_rank(const grid_t *g, const char *p) {
    for (int i = 0; i < g->nnames; i++)
        if (!strcmp(g->names[i], p)) return i;
    return g->nnames + (strcmp(p, "fp32") != 0);
}
static int cmp_run(const void *a, const void *b, void *grid) {
    const rp_run *x = a, *y = b;
    const int rx = preset_rank(grid, x->preset), ry = preset_rank(grid, y->preset);
    if (rx != ry) return rx < ry ? -1 : 1;
    const int c = strcmp(x->preset, y->preset);
    if (c) return c;
    return x->seed < y->seed ? -1 : x->seed > y->seed;
}

// --- one run

static void mean_site(rp_site *s, const runlog *l, int site) {
    double sum[4] = {0}, cnt[4] = {0};
    s->amax = NAN;
    for (size_t i = 0; i < l->n; i++) {
        const runlog_tel *t = runlog_tel_of(l, i, site);
        if (!t || !(t->n > 0)) continue;
        const double f[4] = {t->overflow, t->underflow, t->subnormal, t->nan};
        for (int k = 0; k < 4; k++)
            if (isfinite(f[k])) sum[k] += f[k], cnt[k]++;
        if (isfinite(t->amax) && !(t->amax <= s->amax)) s->amax = t->amax;
    }
    for (int k = 0; k < 4; k++) s->frac[k] = cnt[k] ? sum[k] / cnt[k] : NAN;
}

// The rows of the run's ptq.jsonl, if it has one: whole-model rows only (site null); lines that
// do not parse (a file cut short) end the reading. Out of memory leaves the rows read so far.
static void load_ptq(rp_run *r) {
    char path[RP_PATH + 32];
    snprintf(path, sizeof path, "%s/ptq.jsonl", r->dir);
    char *text = fio_slurp(path);
    if (!text) return;
    int cap = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        rp_ptq row = {.delta = NAN};
        bool whole = true;
        jx_cur c;
        jx_init(&c, line);
        char key[32];
        if (jx_open(&c, '{')) do {
                jx_key(&c, key, sizeof key);
                if (!strcmp(key, "policy")) jx_str(&c, row.policy, sizeof row.policy);
                else if (!strcmp(key, "site")) whole = jx_peek(&c) == 'n', jx_skip(&c);
                else if (!strcmp(key, "delta")) row.delta = jx_num(&c);
                else jx_skip(&c);
            } while (jx_more(&c, '}'));
        if (!jx_ok(&c) || !row.policy[0]) break;
        if (!whole) continue;
        if (r->nptq == cap) {
            rp_ptq *p = realloc(r->ptq, (size_t)(cap = cap ? 2 * cap : 8) * sizeof *p);
            if (!p) break;
            r->ptq = p;
        }
        r->ptq[r->nptq++] = row;
    }
    free(text);
}

static int load_run(rp_run *r, char *msg, size_t msg_len) {
    char path[RP_PATH + 32];
    r->val_loss = r->train_loss = r->tokens_per_s = r->elapsed_s = r->swamped = NAN;
    r->planned = -1;
    snprintf(path, sizeof path, "%s/FAILED", r->dir);
    FILE *f = fopen(path, "r");
    if (f) {
        r->status = RP_FAILED;
        if (!fgets(r->why, sizeof r->why, f)) snprintf(r->why, sizeof r->why, "failed");
        r->why[strcspn(r->why, "\n")] = 0;
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/log.jsonl", r->dir);
    if (!fio_is_file(path)) {
        if (r->status != RP_FAILED) r->status = RP_MISSING, snprintf(r->why, sizeof r->why, "no log.jsonl");
        return XP_OK;
    }
    runlog l;
    const int st = runlog_read(&l, path, false, msg, msg_len);
    if (st == RUNLOG_ENOMEM) return XP_ENOMEM;
    if (st) return XP_EINVAL;
    r->planned = l.has_start ? l.steps : -1;
    if (!l.n) {
        if (r->status != RP_FAILED) r->status = RP_MISSING, snprintf(r->why, sizeof r->why, "no step logged");
        runlog_free(&l);
        return XP_OK;
    }
    const runlog_step *last = &l.step[l.n - 1];
    r->last_step = last->step;
    r->tokens_per_s = last->tokens_per_s, r->elapsed_s = last->elapsed_s;
    const long k = rp_train_window((long)l.n);
    double sum = 0;
    for (size_t i = l.n - (size_t)k; i < l.n; i++) sum += l.step[i].loss;
    r->train_loss = sum / (double)k;
    double sw = 0, nsw = 0;
    r->ncurve = r->last_step + 1;
    r->loss = malloc((size_t)r->ncurve * sizeof *r->loss);
    r->val = malloc((size_t)r->ncurve * sizeof *r->val);
    r->scale = malloc((size_t)r->ncurve * sizeof *r->scale);
    r->swamp = malloc((size_t)r->ncurve * sizeof *r->swamp);
    r->skip = calloc((size_t)r->ncurve, 1);
    r->sites = calloc((size_t)l.nsites + 1, sizeof *r->sites);
    if (!r->loss || !r->val || !r->scale || !r->swamp || !r->skip || !r->sites) {
        runlog_free(&l);
        return snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    }
    for (long i = 0; i < r->ncurve; i++) r->loss[i] = r->val[i] = r->scale[i] = r->swamp[i] = NAN;
    for (size_t i = 0; i < l.n; i++) {
        const runlog_step *s = &l.step[i];
        r->loss[s->step] = s->loss;
        r->scale[s->step] = s->loss_scale;
        r->skip[s->step] = (unsigned char)s->skipped;
        r->skipped += s->skipped;
        if (s->has_val) r->val[s->step] = s->val_loss, r->val_loss = s->val_loss, r->has_val = true;
        if (l.has_val0) r->val[0] = l.val0;  // the initial weights' (step 0)
        if (isfinite(s->loss_scale) && s->loss_scale != 1) r->has_scale = true;
        if (s->has_update) {
            r->has_update = true;
            r->swamp[s->step] = s->swamped;
            if (isfinite(s->swamped)) sw += s->swamped, nsw++;
        }
    }
    r->swamped = nsw ? sw / nsw : NAN;
    for (int s = 0; s < l.nsites; s++) {
        snprintf(r->sites[s].name, RP_NAME, "%s", l.sites[s]);
        mean_site(&r->sites[s], &l, s);
    }
    r->nsites = l.nsites;
    runlog_free(&l);
    load_ptq(r);
    return XP_OK;
}

static void free_data(rp_data *d) {
    for (int i = 0; i < d->nruns; i++) {
        rp_run *r = &d->runs[i];
        free(r->loss), free(r->val), free(r->scale), free(r->swamp), free(r->skip), free(r->sites), free(r->ptq);
    }
    free(d->runs);
    free(d->presets);
}

// --- statistics and formatting

typedef struct {
    int n;
    double sum, min, max;
} acc_t;

static void acc_add(acc_t *a, double v) {
    if (!isfinite(v)) return;
    if (!a->n || v < a->min) a->min = v;
    if (!a->n || v > a->max) a->max = v;
    a->sum += v, a->n++;
}

// "mean [min, max]" with the printf format f for each number; "—" without values; the mean
// alone when min and max print the same.
static const char *fmt_acc(char *buf, size_t cap, const acc_t *a, const char *f) {
    if (!a->n) return snprintf(buf, cap, "—"), buf;
    char m[40], lo[40], hi[40];
    snprintf(m, sizeof m, f, a->sum / a->n);
    snprintf(lo, sizeof lo, f, a->min);
    snprintf(hi, sizeof hi, f, a->max);
    if (!strcmp(lo, hi)) snprintf(buf, cap, "%s", m);
    else snprintf(buf, cap, "%s [%s, %s]", m, lo, hi);
    return buf;
}

static void md_cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
}

static const char *status_word(const rp_run *r) {
    switch (r->status) {
    case RP_OK: return isfinite(r->train_loss) && (!r->has_val || isfinite(r->val_loss)) ? "ok" : "diverged";
    case RP_INCOMPLETE: return "incomplete";
    case RP_FAILED: return "FAILED";
    default: return "not run";
    }
}

static bool diverged(const rp_run *r) { return r->status == RP_OK && !strcmp(status_word(r), "diverged"); }

// A preset's sites: the mean over its completed runs of each run's per-site means.
typedef struct {
    char name[RP_NAME];
    acc_t frac[4];
    double amax;
} site_acc;

static int preset_sites(const rp_data *d, const rp_preset *p, site_acc **out) {
    int n = 0, cap = 0;
    site_acc *v = NULL;
    for (int i = p->first; i < p->first + p->count; i++) {
        const rp_run *r = &d->runs[i];
        if (!rp_counts(r)) continue;
        for (int s = 0; s < r->nsites; s++) {
            int k = 0;
            while (k < n && strcmp(v[k].name, r->sites[s].name)) k++;
            if (k == n) {
                if (n == cap) {
                    cap = cap ? 2 * cap : 32;
                    void *q = realloc(v, (size_t)cap * sizeof *v);
                    if (!q) return free(v), -1;
                    v = q;
                }
                memset(&v[n], 0, sizeof v[n]);
                snprintf(v[n].name, RP_NAME, "%s", r->sites[s].name);
                v[n++].amax = NAN;
            }
            for (int j = 0; j < 4; j++) acc_add(&v[k].frac[j], r->sites[s].frac[j]);
            if (isfinite(r->sites[s].amax) && !(r->sites[s].amax <= v[k].amax)) v[k].amax = r->sites[s].amax;
        }
    }
    *out = v;
    return n;
}

static double site_mean(const site_acc *s, int j) { return s->frac[j].n ? s->frac[j].sum / s->frac[j].n : NAN; }

// The site with the largest mean fraction j ("—" when the preset casts nothing).
static void worst_site(char *buf, size_t cap, const site_acc *v, int n, int j) {
    int best = -1;
    for (int k = 0; k < n; k++)
        if (isfinite(site_mean(&v[k], j)) && (best < 0 || site_mean(&v[k], j) > site_mean(&v[best], j))) best = k;
    if (best < 0) snprintf(buf, cap, "—");
    else if (site_mean(&v[best], j) == 0) snprintf(buf, cap, "0");
    else snprintf(buf, cap, "%s %.3g", v[best].name, site_mean(&v[best], j));
}

// Sites by their larger rate, overflow or underflow, highest first.
static int cmp_site_idx(const void *a, const void *b, void *sites) {
    const site_acc *v = sites;
    const int x = *(const int *)a, y = *(const int *)b;
    const double ux = site_mean(&v[x], 1), uy = site_mean(&v[y], 1);
    const double ox = site_mean(&v[x], 0), oy = site_mean(&v[y], 0);
    const double kx = fmax(isfinite(ox) ? ox : 0, isfinite(ux) ? ux : 0);
    const double ky = fmax(isfinite(oy) ? oy : 0, isfinite(uy) ? uy : 0);
    return kx > ky ? -1 : kx < ky ? 1 : x - y;
}

// --- report.md

enum { TOP_SITES = 5 };

static void write_summary(FILE *f, const rp_data *d) {
    const bool gap = d->fp32 >= 0;
    fprintf(f, "| preset | runs | final train loss | final val loss |%s skipped steps | swamped updates | "
               "tokens/s | worst overflow | worst underflow |\n",
            gap ? " val gap to fp32 |" : "");
    fprintf(f, "| --- | ---: | ---: | ---: |%s ---: | ---: | ---: | --- | --- |\n", gap ? " ---: |" : "");
    for (int p = 0; p < d->npresets; p++) {
        const rp_preset *ps = &d->presets[p];
        acc_t tr = {0}, va = {0}, gp = {0}, sk = {0}, sw = {0}, tps = {0};
        int ok = 0, div = 0;
        for (int i = ps->first; i < ps->first + ps->count; i++) {
            const rp_run *r = &d->runs[i];
            if (!rp_counts(r)) continue;
            ok++;
            div += diverged(r);
            acc_add(&tr, r->train_loss);
            acc_add(&va, r->val_loss);
            acc_add(&sk, (double)r->skipped);
            if (r->has_update) acc_add(&sw, r->swamped);
            acc_add(&tps, r->tokens_per_s);
            if (gap && p != d->fp32 && isfinite(r->val_loss)) {
                const rp_preset *f32 = &d->presets[d->fp32];
                for (int j = f32->first; j < f32->first + f32->count; j++) {
                    const rp_run *q = &d->runs[j];
                    if (q->seed == r->seed && rp_counts(q) && isfinite(q->val_loss)) acc_add(&gp, r->val_loss - q->val_loss);
                }
            }
        }
        char b[6][128], wo[RP_NAME + 32], wu[RP_NAME + 32];
        site_acc *sv = NULL;
        const int ns = preset_sites(d, ps, &sv);
        worst_site(wo, sizeof wo, sv, ns, 0);
        worst_site(wu, sizeof wu, sv, ns, 1);
        free(sv);
        fputs("| ", f), md_cell(f, ps->name);
        fprintf(f, " | %d/%d", ok, ps->count);
        if (div) fprintf(f, " (%d diverged)", div);
        fprintf(f, " | %s | %s |", fmt_acc(b[0], sizeof b[0], &tr, "%.4f"), fmt_acc(b[1], sizeof b[1], &va, "%.4f"));
        if (gap) fprintf(f, " %s |", p == d->fp32 ? "(reference)" : fmt_acc(b[2], sizeof b[2], &gp, "%+.3g"));
        fprintf(f, " %s | %s | %s | ", fmt_acc(b[3], sizeof b[3], &sk, "%g"), fmt_acc(b[4], sizeof b[4], &sw, "%.3g"),
                fmt_acc(b[5], sizeof b[5], &tps, "%.0f"));
        md_cell(f, wo), fputs(" | ", f), md_cell(f, wu), fputs(" |\n", f);
    }
}

static void write_sites(FILE *f, const rp_data *d) {
    for (int p = 0; p < d->npresets; p++) {
        site_acc *v = NULL;
        const int n = preset_sites(d, &d->presets[p], &v);
        fputs("### ", f), md_cell(f, d->presets[p].name), fputs("\n\n", f);
        if (n <= 0) {
            fputs("No cast site reported telemetry (float32 everywhere, or telemetry off).\n\n", f);
            free(v);
            continue;
        }
        int *idx = malloc((size_t)n * sizeof *idx), shown = 0;
        if (!idx) {
            free(v);
            continue;
        }
        for (int k = 0; k < n; k++) idx[k] = k;
        qsort_r(idx, (size_t)n, sizeof *idx, cmp_site_idx, v);
        for (int k = 0; k < n; k++) {
            const site_acc *s = &v[idx[k]];
            const double o = site_mean(s, 0), u = site_mean(s, 1);
            if (!(o > 0 || u > 0) || shown == TOP_SITES) break;
            if (!shown++) fputs("| site | overflow | underflow | subnormal | nan | amax |\n"
                                "| --- | ---: | ---: | ---: | ---: | ---: |\n", f);
            fputs("| ", f), md_cell(f, s->name);
            fprintf(f, " | %.3g | %.3g | %.3g | %.3g | %.4g |\n", o, u, site_mean(s, 2), site_mean(s, 3), s->amax);
        }
        if (shown) fprintf(f, "\nThe %d sites (of %d cast) with the highest overflow or underflow rate.\n\n", shown, n);
        else fprintf(f, "None of its %d cast sites overflowed or underflowed.\n\n", n);
        free(idx);
        free(v);
    }
}

// Post-training quantization (ablate --ptq): for each trained preset and each inference policy,
// the increase of the validation loss over the same checkpoint in fp32, over the seeds. The
// policies are those of the first run with evaluations, in its order.
static void write_ptq(FILE *f, const rp_data *d) {
    const rp_run *first = NULL;
    for (int i = 0; i < d->nruns && !first; i++)
        if (rp_counts(&d->runs[i]) && d->runs[i].nptq) first = &d->runs[i];
    if (!first) return;
    fputs("## Post-training quantization\n\n"
          "Each run's final checkpoint evaluated under inference policies (`fplab eval`, the run's own "
          "validation batches): the increase of the validation loss over the same checkpoint in fp32, "
          "mean [min, max] over seeds.\n\n| trained with |", f);
    for (int j = 0; j < first->nptq; j++)
        if (strcmp(first->ptq[j].policy, "fp32")) fputc(' ', f), md_cell(f, first->ptq[j].policy), fputs(" |", f);
    fputs("\n| --- |", f);
    for (int j = 0; j < first->nptq; j++)
        if (strcmp(first->ptq[j].policy, "fp32")) fputs(" ---: |", f);
    fputc('\n', f);
    for (int p = 0; p < d->npresets; p++) {
        const rp_preset *pr = &d->presets[p];
        fputs("| ", f), md_cell(f, pr->name), fputs(" |", f);
        for (int j = 0; j < first->nptq; j++) {
            if (!strcmp(first->ptq[j].policy, "fp32")) continue;
            acc_t a = {0};
            for (int k = pr->first; k < pr->first + pr->count; k++) {
                const rp_run *r = &d->runs[k];
                for (int m = 0; rp_counts(r) && m < r->nptq; m++)
                    if (!strcmp(r->ptq[m].policy, first->ptq[j].policy)) acc_add(&a, r->ptq[m].delta);
            }
            char cell[128];
            fprintf(f, " %s |", fmt_acc(cell, sizeof cell, &a, "%+.4f"));
        }
        fputc('\n', f);
    }
    fputc('\n', f);
}

static void write_runs(FILE *f, const rp_data *d) {
    fputs("| preset | seed | status | steps | final train loss | final val loss | skipped | tokens/s | time |\n"
          "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n", f);
    for (int i = 0; i < d->nruns; i++) {
        const rp_run *r = &d->runs[i];
        char t[32] = "—";
        if (isfinite(r->elapsed_s)) fio_fmt_duration(r->elapsed_s, t, sizeof t);
        fputs("| ", f), md_cell(f, r->preset);
        fprintf(f, " | %llu | %s", (unsigned long long)r->seed, status_word(r));
        if (r->status != RP_OK && r->why[0]) fputs(": ", f), md_cell(f, r->why);
        fprintf(f, " | %ld/%ld | %.4f | %.4f | %ld | %.0f | %s |\n", r->last_step, d->steps, r->train_loss,
                r->val_loss, r->skipped, r->tokens_per_s, t);
    }
    bool any = false;
    for (int i = 0; i < d->nruns; i++) {
        const rp_run *r = &d->runs[i];
        if (r->status != RP_FAILED) continue;
        if (!any) fputs("\n### Failed runs\n", f), any = true;
        char path[RP_PATH + 32], tail[3000];
        snprintf(path, sizeof path, "%s/train.err", r->dir);
        fputs("\n", f), md_cell(f, r->preset);
        fprintf(f, " seed %llu: %s. The end of `runs/", (unsigned long long)r->seed, r->why);
        md_cell(f, r->preset);
        fprintf(f, "/seed-%llu/train.err`:\n\n", (unsigned long long)r->seed);
        if (!fio_tail(path, 12, tail, sizeof tail)) snprintf(tail, sizeof tail, "(empty)");
        for (char *s = tail, *e; *s; s = e + (*e != 0)) {
            e = strchr(s, '\n');
            if (!e) e = s + strlen(s);
            fprintf(f, "    %.*s\n", (int)(e - s), s);
        }
    }
}

static void write_plots_md(FILE *f, const rp_plot *pl, bool found, bool wanted) {
    if (!wanted)
        fputs("Plots were not drawn (--no-plots): the data and scripts are in `plots/`; run "
              "`cd plots && gnuplot NAME.gp` to draw one.\n\n", f);
    else if (!found)
        fputs("gnuplot was not found, so there are no images: the data and scripts are in `plots/`; "
              "install gnuplot (Debian: gnuplot-nox) and run `fplab report` again, or "
              "`cd plots && gnuplot NAME.gp`.\n\n", f);
    for (int i = 0; i < RP_NPLOTS; i++) {
        const rp_plot *p = &pl[i];
        fprintf(f, "### %s\n\n", p->title);
        if (!p->written) {
            fprintf(f, "No plot: %s\n\n", p->note);
            continue;
        }
        if (p->png) fprintf(f, "![%s](plots/%s.png)\n\n", p->title, p->base);
        else if (found) fprintf(f, "No image: %s\n\n", p->note);
        fprintf(f, "%s Data `plots/%s.dat`, script `plots/%s.gp`.\n\n", p->caption, p->base, p->base);
    }
}

static const char how_to_read[] =
    "## How to read this\n\n"
    "Each preset was trained once per seed; the seed fixes the initialisation and the order of the "
    "batches, so two presets with the same seed see the same data. Numbers in the summary are "
    "mean [min, max] over the seeds whose run completed (the range, not a standard deviation: "
    "with a handful of seeds the range shows everything there is); a single number means the "
    "seeds agreed or only one completed. *Final train loss* is the mean training loss of the last "
    "k logged steps (k = steps/20, between 1 and 50), since one batch is noisy; *final val loss* is "
    "the last evaluation. *Val gap to fp32* is the per-seed difference of the final validation "
    "loss from fp32's with the same seed: positive means worse than fp32; a gap inside the spread of "
    "fp32's own seeds is noise, not a finding. A *diverged* run ended with a non-finite loss and is "
    "left out of the means. *Skipped steps* are optimizer steps the dynamic loss scaler dropped "
    "because a gradient overflowed; a few early ones while the scale settles are normal, a steady "
    "stream is not. *Overflow* is the fraction of the values cast at a site that exceeded the "
    "format (saturated, or became inf/NaN), *underflow* the fraction of nonzero values that became "
    "zero, *subnormal* those that landed in the subnormal range (lost precision), each averaged over "
    "the steps; gradient sites (`*.grad`) underflowing is what loss scaling exists to prevent. "
    "*Swamped updates* is the fraction of weight updates that were nonzero in float32 but vanished "
    "when the weight was stored in its low-precision format (|update| below half an ulp of the "
    "weight): the reason pure-bf16 training stalls and stochastic rounding or Kahan summation help. "
    "*Tokens/s* is the throughput of the emulation on this machine (formats are emulated in float32), "
    "so it compares the cost of emulation, not of real low-precision hardware.\n";

static int write_md(const rp_data *d, const rp_plot *pl, bool found, bool wanted, const report_result *res,
                    char *msg, size_t msg_len) {
    char path[RP_PATH + 32];
    snprintf(path, sizeof path, "%s/report.md", d->dir);
    fio_out out;
    if (fio_create(&out, path, msg, msg_len) != FIO_OK) return XP_EIO;
    FILE *f = out.f;
    fputs("# Ablation report\n\n", f);
    if (d->have_manifest && d->command[0]) {
        fprintf(f, "Made by this command%s%s%s:\n\n    %s\n\n", d->cwd[0] ? " (run in `" : "", d->cwd,
                d->cwd[0] ? "`)" : "", d->command);
        fputs("It is recorded with its arguments in `ablate.json`. Running it again skips the finished runs; "
              "`fplab report DIR` rewrites this page.\n\n", f);
    } else {
        fputs("No `ablate.json` in this directory, so the command that made the runs is not known; the runs "
              "are whatever `runs/*/seed-*/log.jsonl` holds.\n\n", f);
    }
    fprintf(f, "%d runs of %d presets, %ld steps each", d->nruns, d->npresets, d->steps);
    if (d->model[0]) fprintf(f, ", model `%s`", d->model);
    if (d->data[0]) fprintf(f, ", data `%s`", d->data);
    fprintf(f, ". Completed: %d", res->ok);
    if (res->diverged) fprintf(f, " (%d of them diverged)", res->diverged);
    if (res->failed) fprintf(f, "; failed: %d", res->failed);
    if (res->incomplete) fprintf(f, "; incomplete: %d", res->incomplete);
    if (res->missing) fprintf(f, "; not run: %d", res->missing);
    fputs(" (see Runs).\n\n## Summary\n\n", f);
    write_summary(f, d);
    fputs("\nmean [min, max] over seeds (see How to read this).", f);
    if (d->fp32 < 0) fputs(" No fp32 run in this directory: no gap to fp32.", f);
    fputs("\n\n", f);
    write_ptq(f, d);
    fputs("## Cast sites\n\n", f);
    write_sites(f, d);
    fputs("## Plots\n\n", f);
    write_plots_md(f, pl, found, wanted);
    fputs("## Runs\n\n", f);
    write_runs(f, d);
    fputs("\n", f);
    fputs(how_to_read, f);
    return fio_commit(&out, msg, msg_len) == FIO_OK ? XP_OK : XP_EIO;
}

// --- entry

int report_write(const report_opts *o, report_result *res, char *msg, size_t msg_len) {
    report_result dummy;
    if (!res) res = &dummy;
    memset(res, 0, sizeof *res);
    if (!o->dir || !fio_is_dir(o->dir)) {
        snprintf(msg, msg_len, "'%s': no such directory (expected the --out DIR of 'fplab ablate')",
                 o->dir ? o->dir : "");
        return XP_EINVAL;
    }
    rp_data d = {.dir = o->dir, .steps = -1, .fp32 = -1};
    grid_t g = {0};
    rp_plot plots[RP_NPLOTS];
    int st = load_manifest(&d, &g, msg, msg_len);
    if (!st) st = find_runs(&d, &g, msg, msg_len);
    if (st) goto out;
    qsort_r(d.runs, (size_t)d.nruns, sizeof *d.runs, cmp_run, &g);
    long longest = 0, announced = -1;
    for (int i = 0; i < d.nruns; i++) {
        if ((st = load_run(&d.runs[i], msg, msg_len))) goto out;
        if (d.runs[i].last_step > longest) longest = d.runs[i].last_step;
        if (d.runs[i].planned > announced) announced = d.runs[i].planned;
    }
    if (d.steps < 1) d.steps = announced > 0 ? announced : longest;
    d.presets = calloc((size_t)d.nruns, sizeof *d.presets);
    if (!d.presets) {
        st = XP_ENOMEM, snprintf(msg, msg_len, "out of memory");
        goto out;
    }
    for (int i = 0; i < d.nruns; i++) {
        rp_run *r = &d.runs[i];
        if (r->status == RP_OK && r->last_step < (r->planned > 0 ? r->planned : d.steps)) {
            r->status = RP_INCOMPLETE;
            snprintf(r->why, sizeof r->why, "the log ends at step %ld", r->last_step);
        }
        res->ok += r->status == RP_OK, res->failed += r->status == RP_FAILED;
        res->incomplete += r->status == RP_INCOMPLETE, res->missing += r->status == RP_MISSING;
        res->diverged += diverged(r);
        if (!d.npresets || strcmp(d.presets[d.npresets - 1].name, r->preset)) {
            rp_preset *p = &d.presets[d.npresets++];
            snprintf(p->name, sizeof p->name, "%s", r->preset);
            p->first = i;
            if (!strcmp(r->preset, "fp32")) d.fp32 = d.npresets - 1;
        }
        d.presets[d.npresets - 1].count++;
    }
    res->runs = d.nruns, res->presets = d.npresets;
    if (!res->ok && !res->incomplete && !res->failed) {
        snprintf(msg, msg_len, "'%s': none of the %d runs has logged a step", o->dir, d.nruns);
        st = XP_EINVAL;
        goto out;
    }
    bool found = false;
    if ((st = rp_write_plots(&d, o, plots, &found, msg, msg_len))) goto out;
    res->gnuplot_found = found;
    for (int i = 0; i < RP_NPLOTS; i++) res->plots_written += plots[i].written, res->pngs += plots[i].png;
    st = write_md(&d, plots, found, o->gnuplot != NULL, res, msg, msg_len);
out:
    free_data(&d);
    free(g.names);
    free(g.seeds);
    return st;
}
