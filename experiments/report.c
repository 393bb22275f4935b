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
#include <sys/stat.h>

#include "experiments/report_internal.h"
#include "experiments/runlog.h"
#include "util/fileio.h"
#include "util/json.h"

// --- ablate.json

typedef struct {
    char (*names)[RP_NAME];  // run_names, in the order of --presets (every ablation input's)
    int nnames;
    uint64_t *seeds;
    int nseeds;
    int first_name;          // where this input's names start (its grid: names[first_name ..])
} grid_t;

static bool push_name(grid_t *g, int *cap) {
    if (g->nnames < *cap) return true;
    *cap = *cap ? 2 * *cap : 16;
    void *q = realloc(g->names, (size_t)*cap * sizeof *g->names);
    if (!q) return false;
    g->names = q;
    return true;
}

// ablate.json of ablation input `in`; its run_names are appended to g (seeds: this input's).
static int load_manifest(rp_input *in, grid_t *g, int *cap_n, char *msg, size_t msg_len) {
    char path[RP_PATH + 32], key[32];
    snprintf(path, sizeof path, "%s/ablate.json", in->path);
    g->nseeds = 0, g->first_name = g->nnames;
    char *text = fio_slurp(path);
    if (!text) return XP_OK;
    in->have_manifest = true;
    jx_cur c;
    jx_init(&c, text);
    int cap_s = 0;
    if (jx_open(&c, '{')) do {
            jx_key(&c, key, sizeof key);
            if (!strcmp(key, "command")) jx_str(&c, in->command, sizeof in->command);
            else if (!strcmp(key, "cwd")) jx_str(&c, in->cwd, sizeof in->cwd);
            else if (!strcmp(key, "model")) jx_str(&c, in->model, sizeof in->model);
            else if (!strcmp(key, "data")) jx_str(&c, in->data, sizeof in->data);
            else if (!strcmp(key, "steps")) {
                const double v = jx_num(&c);
                in->steps = v >= 1 && v < 1e15 ? (long)v : -1;
            } else if (!strcmp(key, "run_names")) {
                if (jx_open(&c, '[')) do {
                        if (!push_name(g, cap_n)) return free(text), snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
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

static int add_run(rp_data *d, int *cap, int input, const char *preset, uint64_t seed) {
    for (int i = 0; i < d->nruns; i++)
        if (d->runs[i].input == input && d->runs[i].seed == seed && !strcmp(d->runs[i].preset, preset)) return XP_OK;
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
    r->input = input;
    snprintf(r->dir, sizeof r->dir, "%s/runs/%s/seed-%llu", d->input[input].path, preset, (unsigned long long)seed);
    snprintf(r->log, sizeof r->log, "%.*s/log.jsonl", RP_PATH - 16, r->dir);  // (a path past PATH_MAX fails to open)
    return XP_OK;
}

static bool parse_seed_dir(const char *name, uint64_t *seed) {
    if (strncmp(name, "seed-", 5) || name[5] < '0' || name[5] > '9') return false;
    char *end;
    errno = 0;
    *seed = strtoull(name + 5, &end, 10);
    return !*end && !errno;
}

static bool ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

// A single run (a directory with log.jsonl, or a log file): one run named by its log's policy
// (the last component of a policy file's path) and seed.
static int find_single_run(rp_data *d, int *cap, int input, const char *log, const char *dir, char *msg,
                           size_t msg_len) {
    runlog l;
    const int st = runlog_read(&l, log, false, msg, msg_len);
    if (st == RUNLOG_ENOMEM) return XP_ENOMEM;
    if (st) return XP_EINVAL;
    const char *name = l.has_start && l.policy[0] ? l.policy : "run";
    char preset[RP_NAME];
    snprintf(preset, sizeof preset, "%.63s", strrchr(name, '/') ? strrchr(name, '/') + 1 : name);
    const uint64_t seed = l.has_start ? l.seed : 0;
    runlog_free(&l);
    if (add_run(d, cap, input, preset, seed)) return snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    rp_run *r = &d->runs[d->nruns - 1];
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    snprintf(r->log, sizeof r->log, "%s", log);
    return XP_OK;
}

// The runs of input i: its kind decided by what it is (a .jsonl file, a directory with runs/ or
// ablate.json, a directory with log.jsonl).
static int find_runs(rp_data *d, int i, grid_t *g, int *cap, int *cap_n, char *msg, size_t msg_len) {
    rp_input *in = &d->input[i];
    const char *base = strrchr(in->path, '/') ? strrchr(in->path, '/') + 1 : in->path;
    char trimmed[RP_PATH];
    if (!*base) {  // "dir/": the name before the slash
        snprintf(trimmed, sizeof trimmed, "%s", in->path);
        while (strlen(trimmed) > 1 && trimmed[strlen(trimmed) - 1] == '/') trimmed[strlen(trimmed) - 1] = 0;
        base = strrchr(trimmed, '/') ? strrchr(trimmed, '/') + 1 : trimmed;
    }
    snprintf(in->stem, sizeof in->stem, "%.*s", (int)(ends_with(base, ".jsonl") ? strlen(base) - 6 : strlen(base)),
             base);
    in->steps = -1;
    if (fio_is_file(in->path)) {
        in->kind = RP_IN_LOG;
        return find_single_run(d, cap, i, in->path, "", msg, msg_len);
    }
    if (!fio_is_dir(in->path)) {
        snprintf(msg, msg_len, "'%s': no such file or directory (expected an ablation directory, a run's directory "
                 "or a .jsonl log)", in->path);
        return XP_EINVAL;
    }
    int st = load_manifest(in, g, cap_n, msg, msg_len);
    if (st) return st;
    char path[RP_PATH + 64], one[RP_PATH + 64];
    snprintf(path, sizeof path, "%s/runs", in->path);
    snprintf(one, sizeof one, "%s/log.jsonl", in->path);
    DIR *top = opendir(path);
    const int nmanifest = g->nnames - g->first_name;
    if (!top && !nmanifest && fio_is_file(one)) {
        in->kind = RP_IN_RUN_DIR;
        return find_single_run(d, cap, i, one, in->path, msg, msg_len);
    }
    in->kind = RP_IN_ABLATION;
    if (!top && !nmanifest) {
        snprintf(msg, msg_len, "'%s': no runs/ directory and no log.jsonl (expected an ablation, "
                 "DIR/runs/PRESET/seed-S/log.jsonl as 'fplab ablate' writes, a run, DIR/log.jsonl as "
                 "'fplab train --ckpt-dir DIR' writes, or a log file as 'fplab train --log FILE.jsonl' writes)",
                 in->path);
        return XP_EINVAL;
    }
    const int before = d->nruns;
    for (struct dirent *e; top && (e = readdir(top));) {
        if (e->d_name[0] == '.') continue;
        char sub[RP_PATH + 512];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        DIR *pd = fio_is_dir(sub) && strlen(e->d_name) < RP_NAME ? opendir(sub) : NULL;
        for (struct dirent *s; pd && (s = readdir(pd));) {
            uint64_t seed;
            char sd[RP_PATH + 1024];
            snprintf(sd, sizeof sd, "%s/%s", sub, s->d_name);
            if (parse_seed_dir(s->d_name, &seed) && fio_is_dir(sd) && add_run(d, cap, i, e->d_name, seed))
                return closedir(pd), closedir(top), snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
        }
        if (pd) closedir(pd);
    }
    if (top) closedir(top);
    for (int k = g->first_name; k < g->nnames; k++)  // the grid's runs that left no directory
        for (int s = 0; s < g->nseeds; s++)
            if (add_run(d, cap, i, g->names[k], g->seeds[s])) return snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    if (d->nruns == before) {
        snprintf(msg, msg_len, "'%s': no runs found (expected %s/PRESET/seed-S/log.jsonl)", in->path, path);
        return XP_EINVAL;
    }
    return XP_OK;
}

// Runs of one preset name and seed from different inputs are different runs: each input that has
// such a run names its runs by its stem ("noscale", or "abl/fp32" for an ablation's).
static void name_colliding_runs(rp_data *d) {
    bool *prefix = calloc((size_t)d->ninput, sizeof *prefix);
    if (!prefix) return;  // (then two inputs' runs share a name: they count as seeds of one preset)
    for (int i = 0; i < d->nruns; i++)
        for (int j = i + 1; j < d->nruns; j++)
            if (d->runs[i].input != d->runs[j].input && d->runs[i].seed == d->runs[j].seed &&
                !strcmp(d->runs[i].preset, d->runs[j].preset))
                prefix[d->runs[i].input] = prefix[d->runs[j].input] = true;
    for (int i = 0; i < d->nruns; i++) {
        rp_run *r = &d->runs[i];
        const rp_input *in = &d->input[r->input];
        if (!prefix[r->input]) continue;
        char name[RP_NAME];
        if (in->kind == RP_IN_ABLATION) snprintf(name, sizeof name, "%.31s/%.31s", in->stem, r->preset);
        else snprintf(name, sizeof name, "%s", in->stem);
        snprintf(r->preset, sizeof r->preset, "%s", name);
    }
    free(prefix);
}

// Order: the grids' presets as --presets listed them, then fp32, then the rest by name.
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
    if (x->seed != y->seed) return x->seed < y->seed ? -1 : 1;
    return x->input - y->input;
}

// --- one run

long rp_point(const rp_run *r, long s) {
    long lo = 0, hi = r->npt;
    while (lo < hi) {
        const long m = lo + (hi - lo) / 2;
        if (r->step[m] < s) lo = m + 1;
        else hi = m;
    }
    return lo < r->npt && r->step[lo] == s ? lo : -1;
}

// The per-site means of the log (rp_site.frac, amax) and the per-step rates (r->tel), in one pass
// over the log's site entries: the work follows the entries, whatever the number of sites.
static int read_sites(rp_run *r, const runlog *l, long pt0) {
    r->sites = calloc((size_t)l->nsites + 1, sizeof *r->sites);
    double (*sum)[8] = calloc((size_t)l->nsites + 1, sizeof *sum);  // sums [0..4), counts [4..8)
    r->tel = malloc((l->nent + 1) * sizeof *r->tel);
    if (!r->sites || !sum || !r->tel) return free(sum), XP_ENOMEM;
    for (int s = 0; s < l->nsites; s++) {
        snprintf(r->sites[s].name, RP_NAME, "%s", l->sites[s]);
        r->sites[s].amax = NAN;
    }
    for (size_t i = 0; i < l->n; i++) {
        const runlog_step *st = &l->step[i];
        for (size_t k = st->ent0; k < st->ent0 + st->nent; k++) {
            const runlog_tel *t = &l->ent[k].t;
            const int s = l->ent[k].site;
            const bool cast = t->n > 0;
            r->tel[r->ntel++] = (rp_tel){(long)i + pt0, s, cast ? t->overflow : NAN, cast ? t->underflow : NAN};
            if (!cast) continue;
            const double f[4] = {t->overflow, t->underflow, t->subnormal, t->nan};
            for (int j = 0; j < 4; j++)
                if (isfinite(f[j])) sum[s][j] += f[j], sum[s][4 + j]++;
            if (isfinite(t->amax) && !(t->amax <= r->sites[s].amax)) r->sites[s].amax = t->amax;
        }
    }
    for (int s = 0; s < l->nsites; s++)
        for (int j = 0; j < 4; j++) r->sites[s].frac[j] = sum[s][4 + j] ? sum[s][j] / sum[s][4 + j] : NAN;
    r->nsites = l->nsites;
    free(sum);
    return XP_OK;
}

// The rows of the run's ptq.jsonl, if it has one: whole-model rows only (site null); lines that
// do not parse (a file cut short) end the reading. Out of memory leaves the rows read so far.
static void load_ptq(rp_run *r) {
    char path[RP_PATH + 32];
    if (!r->dir[0]) return;
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
    FILE *f = r->dir[0] ? fopen(path, "r") : NULL;
    if (f) {
        r->status = RP_FAILED;
        if (!fgets(r->why, sizeof r->why, f)) snprintf(r->why, sizeof r->why, "failed");
        r->why[strcspn(r->why, "\n")] = 0;
        fclose(f);
    }
    if (!fio_is_file(r->log)) {
        if (r->status != RP_FAILED) r->status = RP_MISSING, snprintf(r->why, sizeof r->why, "no log.jsonl");
        return XP_OK;
    }
    runlog l;
    const int st = runlog_read(&l, r->log, false, msg, msg_len);
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
    const long pt0 = l.has_val0;  // point 0: the initial weights' validation (step 0)
    r->npt = (long)l.n + pt0;
    const size_t np = (size_t)r->npt;
    r->step = malloc(np * sizeof *r->step);
    r->loss = malloc(np * sizeof *r->loss);
    r->val = malloc(np * sizeof *r->val);
    r->scale = malloc(np * sizeof *r->scale);
    r->swamp = malloc(np * sizeof *r->swamp);
    r->snr = malloc(np * sizeof *r->snr);
    r->skip = calloc(np, 1);
    if (!r->step || !r->loss || !r->val || !r->scale || !r->swamp || !r->snr || !r->skip ||
        read_sites(r, &l, pt0)) {
        runlog_free(&l);
        return snprintf(msg, msg_len, "%s: out of memory", r->log), XP_ENOMEM;
    }
    for (size_t i = 0; i < np; i++) r->loss[i] = r->val[i] = r->scale[i] = r->swamp[i] = r->snr[i] = NAN;
    if (pt0) r->step[0] = 0, r->val[0] = l.val0;
    for (size_t i = 0; i < l.n; i++) {
        const runlog_step *s = &l.step[i];
        const size_t p = i + (size_t)pt0;
        r->step[p] = s->step;
        r->loss[p] = s->loss;
        r->scale[p] = s->loss_scale;
        r->skip[p] = (unsigned char)s->skipped;
        r->skipped += s->skipped;
        if (s->has_val) r->val[p] = s->val_loss, r->val_loss = s->val_loss, r->has_val = true;
        if (isfinite(s->loss_scale) && s->loss_scale != 1) r->has_scale = true;
        // the gradient's signal to its quantization noise (train --grad-noise-every)
        const double snr = s->exact_norm / s->noise_norm;
        if (isfinite(snr) && snr > 0) r->snr[p] = snr, r->has_noise = true;
        if (s->has_update) {
            r->has_update = true;
            r->swamp[p] = s->swamped;
            if (isfinite(s->swamped)) sw += s->swamped, nsw++;
        }
    }
    r->swamped = nsw ? sw / nsw : NAN;
    runlog_free(&l);
    load_ptq(r);
    return XP_OK;
}

static void free_data(rp_data *d) {
    for (int i = 0; i < d->nruns; i++) {
        rp_run *r = &d->runs[i];
        free(r->step), free(r->loss), free(r->val), free(r->scale), free(r->swamp), free(r->snr), free(r->skip);
        free(r->sites), free(r->tel), free(r->ptq);
    }
    free(d->runs);
    free(d->presets);
    free(d->input);
    free(d->site);
    free(d->xs);
}

// --- the tables every run shares: site names (sorted, so each run's sites find theirs by
// binary search) and the steps some run logged

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }
static int cmp_long(const void *a, const void *b) {
    const long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

static int build_tables(rp_data *d) {
    size_t ns = 0, nx = 0;
    for (int i = 0; i < d->nruns; i++) ns += (size_t)d->runs[i].nsites, nx += (size_t)d->runs[i].npt;
    d->site = malloc((ns + 1) * sizeof *d->site);
    d->xs = malloc((nx + 1) * sizeof *d->xs);
    if (!d->site || !d->xs) return XP_ENOMEM;
    ns = nx = 0;
    for (int i = 0; i < d->nruns; i++) {
        const rp_run *r = &d->runs[i];
        for (int s = 0; s < r->nsites; s++) memcpy(d->site[ns++], r->sites[s].name, RP_NAME);
        for (long p = 0; p < r->npt; p++) d->xs[nx++] = r->step[p];
    }
    qsort(d->site, ns, sizeof *d->site, cmp_name);
    qsort(d->xs, nx, sizeof *d->xs, cmp_long);
    size_t k = 0;
    for (size_t i = 0; i < ns; i++)
        if (!k || strcmp(d->site[k - 1], d->site[i])) memmove(d->site[k++], d->site[i], RP_NAME);
    d->nsite = (int)k;
    k = 0;
    for (size_t i = 0; i < nx; i++)
        if (!k || d->xs[k - 1] != d->xs[i]) d->xs[k++] = d->xs[i];
    d->nxs = (long)k;
    for (int i = 0; i < d->nruns; i++) {
        rp_run *r = &d->runs[i];
        for (int s = 0; s < r->nsites; s++) {
            const char(*hit)[RP_NAME] = bsearch(r->sites[s].name, d->site, (size_t)d->nsite, sizeof *d->site, cmp_name);
            r->sites[s].gid = (int)(hit - d->site);
        }
    }
    return XP_OK;
}

// --- statistics and formatting

void rp_acc_add(rp_acc *a, double v) {
    if (!isfinite(v)) return;
    if (!a->n || v < a->min) a->min = v;
    if (!a->n || v > a->max) a->max = v;
    a->sum += v, a->n++;
}

// "mean [min, max]" with the printf format f for each number; "—" without values; the mean
// alone when min and max print the same.
static const char *fmt_acc(char *buf, size_t cap, const rp_acc *a, const char *f) {
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

int rp_preset_sites(const rp_data *d, const rp_preset *p, rp_site_acc **out) {
    rp_site_acc *all = calloc((size_t)d->nsite + 1, sizeof *all);
    if (!all) return *out = NULL, -1;
    for (int k = 0; k < d->nsite; k++) all[k].gid = -1, all[k].amax = NAN;
    for (int i = p->first; i < p->first + p->count; i++) {
        const rp_run *r = &d->runs[i];
        if (!rp_counts(r)) continue;
        for (int s = 0; s < r->nsites; s++) {
            rp_site_acc *v = &all[r->sites[s].gid];
            v->gid = r->sites[s].gid;
            for (int j = 0; j < 4; j++) rp_acc_add(&v->frac[j], r->sites[s].frac[j]);
            if (isfinite(r->sites[s].amax) && !(r->sites[s].amax <= v->amax)) v->amax = r->sites[s].amax;
        }
    }
    int n = 0;
    for (int k = 0; k < d->nsite; k++)
        if (all[k].gid >= 0) all[n++] = all[k];
    *out = all;
    return n;
}

double rp_site_mean(const rp_site_acc *s, int j) { return s->frac[j].n ? s->frac[j].sum / s->frac[j].n : NAN; }

// The site with the largest mean fraction j ("—" when the preset casts nothing).
static void worst_site(char *buf, size_t cap, const rp_data *d, const rp_site_acc *v, int n, int j) {
    int best = -1;
    for (int k = 0; k < n; k++)
        if (isfinite(rp_site_mean(&v[k], j)) && (best < 0 || rp_site_mean(&v[k], j) > rp_site_mean(&v[best], j)))
            best = k;
    if (best < 0) snprintf(buf, cap, "—");
    else if (rp_site_mean(&v[best], j) == 0) snprintf(buf, cap, "0");
    else snprintf(buf, cap, "%s %.3g", d->site[v[best].gid], rp_site_mean(&v[best], j));
}

// Sites by their larger rate, overflow or underflow, highest first.
static int cmp_site_idx(const void *a, const void *b, void *sites) {
    const rp_site_acc *v = sites;
    const int x = *(const int *)a, y = *(const int *)b;
    const double ux = rp_site_mean(&v[x], 1), uy = rp_site_mean(&v[y], 1);
    const double ox = rp_site_mean(&v[x], 0), oy = rp_site_mean(&v[y], 0);
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
        rp_acc tr = {0}, va = {0}, gp = {0}, sk = {0}, sw = {0}, tps = {0};
        int ok = 0, div = 0;
        for (int i = ps->first; i < ps->first + ps->count; i++) {
            const rp_run *r = &d->runs[i];
            if (!rp_counts(r)) continue;
            ok++;
            div += diverged(r);
            rp_acc_add(&tr, r->train_loss);
            rp_acc_add(&va, r->val_loss);
            rp_acc_add(&sk, (double)r->skipped);
            if (r->has_update) rp_acc_add(&sw, r->swamped);
            rp_acc_add(&tps, r->tokens_per_s);
            if (gap && p != d->fp32 && isfinite(r->val_loss)) {
                const rp_preset *f32 = &d->presets[d->fp32];
                for (int j = f32->first; j < f32->first + f32->count; j++) {
                    const rp_run *q = &d->runs[j];
                    if (q->seed == r->seed && rp_counts(q) && isfinite(q->val_loss)) rp_acc_add(&gp, r->val_loss - q->val_loss);
                }
            }
        }
        char b[6][128], wo[RP_NAME + 32], wu[RP_NAME + 32];
        rp_site_acc *sv = NULL;
        const int ns = rp_preset_sites(d, ps, &sv);
        worst_site(wo, sizeof wo, d, sv, ns, 0);
        worst_site(wu, sizeof wu, d, sv, ns, 1);
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
        rp_site_acc *v = NULL;
        const int n = rp_preset_sites(d, &d->presets[p], &v);
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
            const rp_site_acc *s = &v[idx[k]];
            const double o = rp_site_mean(s, 0), u = rp_site_mean(s, 1);
            if (!(o > 0 || u > 0) || shown == TOP_SITES) break;
            if (!shown++) fputs("| site | overflow | underflow | subnormal | nan | amax |\n"
                                "| --- | ---: | ---: | ---: | ---: | ---: |\n", f);
            fputs("| ", f), md_cell(f, d->site[s->gid]);
            fprintf(f, " | %.3g | %.3g | %.3g | %.3g | %.4g |\n", o, u, rp_site_mean(s, 2), rp_site_mean(s, 3), s->amax);
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
            rp_acc a = {0};
            for (int k = pr->first; k < pr->first + pr->count; k++) {
                const rp_run *r = &d->runs[k];
                for (int m = 0; rp_counts(r) && m < r->nptq; m++)
                    if (!strcmp(r->ptq[m].policy, first->ptq[j].policy)) rp_acc_add(&a, r->ptq[m].delta);
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
        fprintf(f, " | %ld/%ld | %.4f | %.4f | %ld | %.0f | %s |\n", r->last_step, r->planned, r->train_loss,
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
        fprintf(f, " seed %llu: %s. The end of `", (unsigned long long)r->seed, r->why);
        md_cell(f, path);
        fputs("`:\n\n", f);
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

// The heading and where the runs came from: an ablation's command, a run's log, or the inputs of
// a comparison.
static void write_intro(FILE *f, const rp_data *d) {
    const rp_input *in = &d->input[0];
    if (d->ninput == 1 && in->kind == RP_IN_ABLATION) {
        fputs("# Ablation report\n\n", f);
        if (in->have_manifest && in->command[0]) {
            fprintf(f, "Made by this command%s%s%s:\n\n    %s\n\n", in->cwd[0] ? " (run in `" : "", in->cwd,
                    in->cwd[0] ? "`)" : "", in->command);
            fputs("It is recorded with its arguments in `ablate.json`. Running it again skips the finished runs; "
                  "`fplab report DIR` rewrites this page.\n\n", f);
        } else {
            fputs("No `ablate.json` in this directory, so the command that made the runs is not known; the runs "
                  "are whatever `runs/*/seed-*/log.jsonl` holds.\n\n", f);
        }
        return;
    }
    if (d->ninput == 1) {
        const rp_run *r = &d->runs[0];
        fputs("# Run report: ", f), md_cell(f, r->preset);
        fprintf(f, ", seed %llu\n\nOne training run, read from `", (unsigned long long)r->seed);
        md_cell(f, r->log);
        fputs("`.\n\n", f);
        return;
    }
    fprintf(f, "# Comparison of %d runs\n\nRead from %d inputs:\n\n", d->nruns, d->ninput);
    for (int i = 0; i < d->ninput; i++) {
        const rp_input *p = &d->input[i];
        fputs("- `", f), md_cell(f, p->path);
        fputs(p->kind == RP_IN_ABLATION ? "`: an ablation" : p->kind == RP_IN_RUN_DIR ? "`: a run's directory"
                                                                                     : "`: a run's log", f);
        if (p->have_manifest && p->command[0]) fputs(", made by `", f), md_cell(f, p->command), fputc('`', f);
        fputs(" (runs:", f);
        for (int k = 0, n = 0; k < d->nruns; k++)
            if (d->runs[k].input == i) {
                fputs(n++ ? ", " : " ", f), md_cell(f, d->runs[k].preset);
                fprintf(f, " seed %llu", (unsigned long long)d->runs[k].seed);
            }
        fputs(")\n", f);
    }
    fputs("\nRuns of one policy and seed from different inputs are named by their input (its file or "
          "directory name).\n\n", f);
}

static int write_md(const rp_data *d, const rp_plot *pl, bool found, bool wanted, const report_result *res,
                    char *msg, size_t msg_len) {
    char path[RP_PATH + 32];
    snprintf(path, sizeof path, "%s/report.md", d->out);
    fio_out out;
    if (fio_create_owned(&out, path, msg, msg_len) != FIO_OK) return XP_EIO;
    FILE *f = out.f;
    write_intro(f, d);
    fprintf(f, "%d run%s of %d preset%s", d->nruns, d->nruns == 1 ? "" : "s", d->npresets, d->npresets == 1 ? "" : "s");
    if (d->steps > 0) fprintf(f, ", %ld steps %s", d->steps, d->nruns == 1 ? "planned" : "each");
    else fputs(", of different lengths (steps: see Runs)", f);
    const rp_input *in = &d->input[0];
    if (d->ninput == 1 && in->model[0]) fprintf(f, ", model `%s`", in->model);
    if (d->ninput == 1 && in->data[0]) fprintf(f, ", data `%s`", in->data);
    fprintf(f, ". Completed: %d", res->ok);
    if (res->diverged) fprintf(f, " (%d of them diverged)", res->diverged);
    if (res->failed) fprintf(f, "; failed: %d", res->failed);
    if (res->incomplete) fprintf(f, "; incomplete: %d", res->incomplete);
    if (res->missing) fprintf(f, "; not run: %d", res->missing);
    fputs(" (see Runs).\n\n## Summary\n\n", f);
    write_summary(f, d);
    fputs("\nmean [min, max] over seeds (see How to read this).", f);
    if (d->fp32 < 0) fputs(" No fp32 run here: no gap to fp32.", f);
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

// The output directory: o->out, else the one input when it is a directory. Created if missing;
// its plots/ must not be a link (the report's names there are its own, not somewhere else's).
static int out_dir(rp_data *d, const report_opts *o, char *msg, size_t msg_len) {
    if (o->out) d->out = o->out;
    else if (d->ninput == 1 && d->input[0].kind != RP_IN_LOG) d->out = d->input[0].path;
    else {
        snprintf(msg, msg_len, "%s: give --out DIR, the directory to write report.md and plots/ to",
                 d->ninput > 1 ? "several inputs" : "a log file as input");
        return XP_EINVAL;
    }
    if (fio_mkdir_p(d->out, msg, msg_len) != FIO_OK) return XP_EIO;
    char plots[RP_PATH + 16], md[RP_PATH + 16];
    snprintf(plots, sizeof plots, "%s/plots/", d->out);
    snprintf(md, sizeof md, "%s/report.md", d->out);
    for (int i = 0; i < d->ninput; i++)  // a log given as input is never one of the outputs
        if (d->input[i].kind == RP_IN_LOG && (fio_refuse_same("--out", md, "INPUT", d->input[i].path, msg, msg_len) ||
                                              fio_refuse_same("--out", plots, "INPUT", d->input[i].path, msg, msg_len)))
            return XP_EINVAL;
    plots[strlen(plots) - 1] = 0;
    struct stat st;
    if (lstat(plots, &st) == 0 && S_ISLNK(st.st_mode)) {
        snprintf(msg, msg_len, "'%s' is a symbolic link; refusing to write the plots through it (remove it: the "
                 "report writes its own plots/ there)", plots);
        return XP_EINVAL;
    }
    return XP_OK;
}

int report_write(const report_opts *o, report_result *res, char *msg, size_t msg_len) {
    report_result dummy;
    if (!res) res = &dummy;
    memset(res, 0, sizeof *res);
    const char *const one[1] = {o->dir};
    const char *const *inputs = o->ninputs > 0 ? o->inputs : one;
    const int ninput = o->ninputs > 0 ? o->ninputs : 1;
    if (!inputs[0] || !inputs[0][0]) {
        snprintf(msg, msg_len, "no input (expected an ablation directory, a run's directory or a .jsonl log)");
        return XP_EINVAL;
    }
    rp_data d = {.steps = -1, .fp32 = -1};
    grid_t g = {0};
    rp_plot plots[RP_NPLOTS];
    int st = XP_OK, cap = 0, cap_n = 0;
    if (!(d.input = calloc((size_t)ninput, sizeof *d.input))) {
        snprintf(msg, msg_len, "out of memory");
        return XP_ENOMEM;
    }
    d.ninput = ninput;
    for (int i = 0; i < ninput && !st; i++) {
        d.input[i].path = inputs[i];
        st = find_runs(&d, i, &g, &cap, &cap_n, msg, msg_len);
    }
    if (!st) st = out_dir(&d, o, msg, msg_len);
    if (st) goto out;
    name_colliding_runs(&d);
    qsort_r(d.runs, (size_t)d.nruns, sizeof *d.runs, cmp_run, &g);
    long longest = 0;
    for (int i = 0; i < d.nruns; i++) {
        if ((st = load_run(&d.runs[i], msg, msg_len))) goto out;
        if (d.runs[i].last_step > longest) longest = d.runs[i].last_step;
    }
    // Each run's target: its last start line's, else its ablation's, else the longest log's.
    for (int i = 0; i < d.nruns; i++) {
        rp_run *r = &d.runs[i];
        const long grid = d.input[r->input].steps;
        if (r->planned < 1) r->planned = grid > 0 ? grid : longest;
        if (i == 0) d.steps = r->planned;
        else if (d.steps != r->planned) d.steps = -1;
    }
    if ((st = build_tables(&d))) {
        snprintf(msg, msg_len, "out of memory");
        goto out;
    }
    d.presets = calloc((size_t)d.nruns, sizeof *d.presets);
    if (!d.presets) {
        st = XP_ENOMEM, snprintf(msg, msg_len, "out of memory");
        goto out;
    }
    for (int i = 0; i < d.nruns; i++) {
        rp_run *r = &d.runs[i];
        if (r->status == RP_OK && r->last_step < r->planned) {
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
        snprintf(msg, msg_len, "%s: none of the %d runs has logged a step", ninput == 1 ? inputs[0] : "the inputs",
                 d.nruns);
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
