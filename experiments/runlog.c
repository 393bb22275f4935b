// runlog.c: the training-log reader of runlog.h: one line at a time through json.h's cursor.
#include "experiments/runlog.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"

void runlog_free(runlog *l) {
    free(l->step);
    free(l->ent);
    free(l->sites);
    free(l->site_hash);
    memset(l, 0, sizeof *l);
    l->steps = l->tokens_per_step = -1;
}

// FNV-1a: site names are short, and the table only needs them spread.
static uint32_t site_hash(const char *name) {
    uint32_t h = 2166136261u;
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 16777619u;
    return h;
}

int runlog_site_index(const runlog *l, const char *name) {
    if (!l->hash_cap) return -1;
    const uint32_t mask = (uint32_t)l->hash_cap - 1;
    for (uint32_t h = site_hash(name) & mask;; h = (h + 1) & mask) {
        const int v = l->site_hash[h];
        if (!v) return -1;
        if (!strcmp(l->sites[v - 1], name)) return v - 1;
    }
}

// Puts site i into the table (which has room: at most half full).
static void hash_put(runlog *l, int i) {
    const uint32_t mask = (uint32_t)l->hash_cap - 1;
    uint32_t h = site_hash(l->sites[i]) & mask;
    while (l->site_hash[h]) h = (h + 1) & mask;
    l->site_hash[h] = i + 1;
}

// Rebuilds the table for sites 0 .. nsites-1 with room for `need` sites (at most half full).
static bool hash_rebuild(runlog *l, int need) {
    int cap = l->hash_cap > 64 ? l->hash_cap : 64;
    while (cap < 2 * need) cap *= 2;
    int *t = calloc((size_t)cap, sizeof *t);
    if (!t) return false;
    free(l->site_hash);
    l->site_hash = t, l->hash_cap = cap;
    for (int i = 0; i < l->nsites; i++) hash_put(l, i);
    return true;
}

const runlog_tel *runlog_tel_of(const runlog *l, size_t i, int site) {
    const runlog_step *s = &l->step[i];
    for (size_t k = s->ent0; k < s->ent0 + s->nent; k++)
        if (l->ent[k].site == site) return &l->ent[k].t;
    return NULL;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q, *cap = c;
    return true;
}

// The index of site `name`, added if new; -1 out of memory, -2 past RUNLOG_MAX_SITES.
static int site_intern(runlog *l, const char *name) {
    int i = runlog_site_index(l, name);
    if (i >= 0) return i;
    if (l->nsites >= RUNLOG_MAX_SITES) return -2;
    if (l->nsites == l->sites_cap) {
        const int c = l->sites_cap ? 2 * l->sites_cap : 32;
        void *q = realloc(l->sites, (size_t)c * sizeof *l->sites);
        if (!q) return -1;
        l->sites = q, l->sites_cap = c;
    }
    if (2 * (l->nsites + 1) > l->hash_cap && !hash_rebuild(l, l->nsites + 1)) return -1;
    snprintf(l->sites[l->nsites], sizeof l->sites[0], "%.*s", RUNLOG_SITE_NAME - 1, name);  // (checked: it fits)
    hash_put(l, l->nsites);
    return l->nsites++;
}

// "L<digits>." starts a per-layer key.
static bool is_layer_key(const char *k) {
    if (k[0] != 'L' || !isdigit((unsigned char)k[1])) return false;
    k++;
    while (isdigit((unsigned char)*k)) k++;
    return *k == '.';
}

// Drops the steps numbered > last (and their site entries), keeping the entries appended
// after them (those of the line being read: ent[keep_from .. nent)).
static void drop_after(runlog *l, long last, size_t keep_from) {
    size_t k = l->n;
    while (k > 0 && l->step[k - 1].step > last) k--;
    if (k == l->n) return;
    const size_t base = l->step[k].ent0, cnt = l->nent - keep_from;
    if (cnt) memmove(l->ent + base, l->ent + keep_from, cnt * sizeof *l->ent);  // (ent is NULL in a log
                                                                                // without telemetry)
    l->nent = base + cnt;
    l->n = k;
}

// A count from the log (steps, tokens per step, a step to resume from) as a long: its integer
// part when it is a number in [0, 1e15), else dflt. Converting a double outside long's range
// (1e300, inf, NaN) is undefined behaviour, so the range is checked before the cast.
static long to_count(double v, long dflt) { return v >= 0 && v < 1e15 ? (long)v : dflt; }

static runlog_tel parse_tel(jx_cur *c) {
    runlog_tel t = {NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    char k[32];
    if (jx_open(c, '{')) do {
            jx_key(c, k, sizeof k);
            double *f = !strcmp(k, "n") ? &t.n : !strcmp(k, "overflow") ? &t.overflow
                      : !strcmp(k, "underflow") ? &t.underflow : !strcmp(k, "subnormal") ? &t.subnormal
                      : !strcmp(k, "nan") ? &t.nan : !strcmp(k, "amax") ? &t.amax
                      : !strcmp(k, "scale") ? &t.scale : NULL;
            if (f) *f = jx_num(c);
            else jx_skip(c);
        } while (jx_more(c, '}'));
    return t;
}

// An object with two numbers, ka's into *a and kb's into *b (other members skipped): the
// "update" and "grad_noise" members.
static void parse_pair(jx_cur *c, const char *ka, double *a, const char *kb, double *b) {
    char key[64];
    if (jx_open(c, '{')) do {
            jx_key(c, key, sizeof key);
            if (!strcmp(key, ka)) *a = jx_num(c);
            else if (!strcmp(key, kb)) *b = jx_num(c);
            else jx_skip(c);
        } while (jx_more(c, '}'));
}

// Parses one line. Returns RUNLOG_OK, RUNLOG_EFORMAT (c->err says why) or RUNLOG_ENOMEM.
static int parse_line(runlog *l, jx_cur *c, bool layers) {
    char key[64], event[32] = "";
    runlog_step s = {.step = -1, .loss = NAN, .lr = NAN, .grad_norm = NAN, .tokens_per_s = NAN,
                     .elapsed_s = NAN, .loss_scale = 1, .val_loss = NAN, .swamped = NAN, .changed = NAN,
                     .exact_norm = NAN, .noise_norm = NAN};
    bool have_step = false;
    char policy[sizeof l->policy] = "", model[sizeof l->model] = "";
    uint64_t seed = 0;
    double steps = -1, tps = -1, resumed = 0;
    const size_t e0 = l->nent;
    if (!jx_open(c, '{')) {
        if (jx_ok(c)) return jx_end(c) ? RUNLOG_OK : RUNLOG_EFORMAT;  // "{}": nothing to record
        return RUNLOG_EFORMAT;
    }
    do {
        jx_key(c, key, sizeof key);
        if (!strcmp(key, "event")) jx_str(c, event, sizeof event);
        else if (!strcmp(key, "policy")) jx_str(c, policy, sizeof policy);
        else if (!strcmp(key, "model")) jx_str(c, model, sizeof model);
        else if (!strcmp(key, "seed")) jx_u64(c, &seed);
        else if (!strcmp(key, "steps")) steps = jx_num(c);
        else if (!strcmp(key, "tokens_per_step")) tps = jx_num(c);
        else if (!strcmp(key, "resumed_from")) resumed = jx_num(c);
        else if (!strcmp(key, "step")) {
            const double v = jx_num(c);
            if (!jx_ok(c)) return RUNLOG_EFORMAT;  // (v is NaN then: never converted)
            if (!(v >= 1 && v == floor(v) && v < 1e15)) {
                snprintf(c->err, sizeof c->err, "column %d: \"step\" must be an integer >= 1",
                         (int)(c->p - c->s));
                return RUNLOG_EFORMAT;
            }
            s.step = (long)v, have_step = true;
        } else if (!strcmp(key, "loss")) s.loss = jx_num(c);
        else if (!strcmp(key, "lr")) s.lr = jx_num(c);
        else if (!strcmp(key, "grad_norm")) s.grad_norm = jx_num(c);
        else if (!strcmp(key, "tokens_per_s")) s.tokens_per_s = jx_num(c);
        else if (!strcmp(key, "elapsed_s")) s.elapsed_s = jx_num(c);
        else if (!strcmp(key, "loss_scale")) s.loss_scale = jx_num(c);
        else if (!strcmp(key, "val_loss")) s.val_loss = jx_num(c), s.has_val = true;
        else if (!strcmp(key, "skipped")) s.skipped = jx_num(c) != 0;
        else if (!strcmp(key, "update")) {
            s.has_update = true;
            parse_pair(c, "swamped", &s.swamped, "changed", &s.changed);
        } else if (!strcmp(key, "grad_noise")) {
            parse_pair(c, "exact_norm", &s.exact_norm, "noise_norm", &s.noise_norm);
        } else if (!strcmp(key, "sites")) {
            char name[RUNLOG_SITE_NAME + 1];  // one byte more: a longer name is seen, not cut
            if (jx_open(c, '{')) do {
                    if (!jx_key(c, name, sizeof name)) break;
                    if (!layers && is_layer_key(name)) {
                        jx_skip(c);
                        continue;
                    }
                    if (strlen(name) >= RUNLOG_SITE_NAME) {
                        snprintf(c->err, sizeof c->err, "column %d: a site name longer than %d bytes",
                                 (int)(c->p - c->s), RUNLOG_SITE_NAME - 1);
                        return RUNLOG_EFORMAT;
                    }
                    runlog_entry e = {site_intern(l, name), parse_tel(c)};
                    if (e.site == -2) {
                        snprintf(c->err, sizeof c->err, "column %d: more than %d distinct cast sites",
                                 (int)(c->p - c->s), RUNLOG_MAX_SITES);
                        return RUNLOG_EFORMAT;
                    }
                    if (e.site < 0 || !grow((void **)&l->ent, &l->ent_cap, l->nent + 1, sizeof *l->ent))
                        return RUNLOG_ENOMEM;
                    l->ent[l->nent++] = e;
                } while (jx_more(c, '}'));
        } else jx_skip(c);
    } while (jx_more(c, '}'));
    if (!jx_end(c)) return RUNLOG_EFORMAT;

    if (event[0]) {  // an event line: "start", and "val" (the validation loss at step 0)
        l->nent = e0;
        if (!strcmp(event, "val") && s.has_val) l->has_val0 = true, l->val0 = s.val_loss;
        if (strcmp(event, "start")) return RUNLOG_OK;
        if (!l->has_start) {
            l->has_start = true;
            snprintf(l->policy, sizeof l->policy, "%s", policy);
            snprintf(l->model, sizeof l->model, "%s", model);
            l->seed = seed;
            l->tokens_per_step = tps == floor(tps) ? to_count(tps, -1) : -1;
        }
        const long target = steps == floor(steps) ? to_count(steps, -1) : -1;
        if (target >= 0) l->steps = target;  // the last invocation's target stands
        if (resumed > 0) {  // (NaN is not): a resume from beyond every step logged drops nothing
            l->resumes++;
            drop_after(l, to_count(resumed, LONG_MAX), l->nent);
        }
        return RUNLOG_OK;
    }
    if (!have_step) {
        snprintf(c->err, sizeof c->err, "an object with neither \"step\" nor \"event\"");
        return RUNLOG_EFORMAT;
    }
    // A step at or before the last one without a start line in between: the run was restarted
    // from an earlier point; the later lines are the trajectory that stands.
    if (l->n && s.step <= l->step[l->n - 1].step) drop_after(l, s.step - 1, e0);
    s.ent0 = l->n ? l->step[l->n - 1].ent0 + l->step[l->n - 1].nent : 0;
    s.nent = l->nent - s.ent0;
    if (!grow((void **)&l->step, &l->cap, l->n + 1, sizeof *l->step)) return RUNLOG_ENOMEM;
    l->step[l->n++] = s;
    return RUNLOG_OK;
}

int runlog_read(runlog *l, const char *path, bool layers, char *msg, size_t msg_len) {
    memset(l, 0, sizeof *l);
    l->steps = l->tokens_per_step = -1;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(msg, msg_len, "%s: cannot open for reading", path);
        return RUNLOG_EIO;
    }
    int st = runlog_read_stream(l, f, path, layers, msg, msg_len);
    fclose(f);
    return st;
}

// A line that fails to parse but holds a whole start line after a fragment: a run killed
// mid-write and resumed appends its start line right after the cut-short write (the log is
// opened for appending and nothing writes a newline first). Returns where the start line
// begins, or NULL.
static const char *glued_start(const char *line) {
    const char *at = NULL;
    for (const char *q = strstr(line + 1, "{\"event\":\"start\""); q; q = strstr(q + 1, "{\"event\":\"start\""))
        at = q;
    return at;
}

// Whether a line is a start line of a resumed run (written by the trainer as
// {"event":"start",... "resumed_from":R ...}).
static bool starts_resume(const char *line) {
    while (*line == ' ' || *line == '\t') line++;
    static const char start[] = "{\"event\":\"start\"";
    return !strncmp(line, start, sizeof start - 1) && strstr(line, "\"resumed_from\":");
}

// Parses one line; on a format error the entries and site names it added are taken back, so
// that a dropped line leaves nothing behind.
static int parse_or_undo(runlog *l, jx_cur *c, bool layers) {
    const size_t nent = l->nent;
    const int nsites = l->nsites;
    const int rc = parse_line(l, c, layers);
    if (rc != RUNLOG_OK && l->nsites != nsites) {
        l->nsites = nsites;
        if (!hash_rebuild(l, nsites)) return l->nent = nent, RUNLOG_ENOMEM;  // (frees nothing it has)
    }
    if (rc != RUNLOG_OK) l->nent = nent;
    return rc;
}

int runlog_read_stream(runlog *l, FILE *f, const char *path, bool layers, char *msg, size_t msg_len) {
    memset(l, 0, sizeof *l);
    l->steps = l->tokens_per_step = -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int rc = RUNLOG_OK;
    bool pending = false;  // the previous non-blank line did not parse (pending_msg says why)
    char pending_msg[256 + 160];
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        const bool complete = line[len - 1] == '\n';
        jx_cur c;
        jx_init(&c, line);
        if (strlen(line) != (size_t)len) {
            snprintf(c.err, sizeof c.err, "a NUL byte in the line");
            rc = RUNLOG_EFORMAT;
        } else {
            size_t k = 0;
            while (line[k] == ' ' || line[k] == '\t' || line[k] == '\r' || line[k] == '\n') k++;
            if (!line[k]) continue;  // blank line
            rc = parse_or_undo(l, &c, layers);
            const char *start = rc == RUNLOG_EFORMAT ? glued_start(line) : NULL;
            if (start) {  // a cut-short write, then the resumed run's start line
                jx_cur s;
                jx_init(&s, start);
                if (parse_or_undo(l, &s, layers) == RUNLOG_OK) {
                    l->truncated += 1 + pending, pending = false;
                    rc = RUNLOG_OK;
                    continue;
                }
            }
        }
        if (rc == RUNLOG_OK && pending) {
            // The line after one that did not parse: only a resumed run's start line excuses it
            // (the trainer ends a cut-short line with a newline before it appends).
            if (!starts_resume(line)) {
                snprintf(msg, msg_len, "%s", pending_msg);
                rc = RUNLOG_EFORMAT;
                break;
            }
            l->truncated++, pending = false;
        }
        if (rc == RUNLOG_EFORMAT && !complete) {  // the last write of a crashed run, cut short
            l->truncated++;
            rc = RUNLOG_OK;
            break;
        }
        if (rc == RUNLOG_EFORMAT && !pending) {  // a cut-short write if a resumed run's start line follows
            snprintf(pending_msg, sizeof pending_msg, "%s:%ld: %s", path, lineno, c.err);
            pending = true;
            rc = RUNLOG_OK;
            continue;
        }
        if (rc == RUNLOG_EFORMAT) snprintf(msg, msg_len, "%s", pending_msg);  // two bad lines: the first
        else if (rc == RUNLOG_ENOMEM) snprintf(msg, msg_len, "%s:%ld: out of memory", path, lineno);
        if (rc != RUNLOG_OK) break;
    }
    if (rc == RUNLOG_OK && pending) {  // a bad whole line at the end: nothing excuses it
        snprintf(msg, msg_len, "%s", pending_msg);
        rc = RUNLOG_EFORMAT;
    }
    if (rc == RUNLOG_OK && ferror(f)) {
        snprintf(msg, msg_len, "%s: read error", path);
        rc = RUNLOG_EIO;
    }
    free(line);
    if (rc != RUNLOG_OK) runlog_free(l);
    return rc;
}
