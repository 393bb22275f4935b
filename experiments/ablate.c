// ablate.c: the ablation runner of ablate.h: the grid in seed-major order (every preset of
// seed 1 first, so an early look already compares all presets), children started with
// xp_spawn and polled with waitpid(pid, WNOHANG) so that no other child of the caller is reaped.
#include "experiments/ablate.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "autocast/autocast.h"
#include "autocast/policy.h"
#include "experiments/runlog.h"
#include "trainer/eval.h"
#include "trainer/train.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/proc.h"

enum { NAME_MAX_ = 64, PATH_MAX_ = 4096 };

// The options the runner sets itself; --extra may not repeat them.
static const char *const reserved[] = {"policy", "seed", "ckpt-dir", "progress", "telemetry", "model", "data",
                                       "steps", "log", "resume", "eval-every", "threads", "stop-at", "overwrite",
                                       "ckpt-every", "switch-policy"};

// The directory name of a preset: a policy file "dir/x.policy" runs as "x".
static void run_name(char *buf, size_t cap, const char *preset) {
    const char *b = strrchr(preset, '/');
    b = b ? b + 1 : preset;
    snprintf(buf, cap, "%s", b);
    const size_t n = strlen(buf);
    if (n > 7 && !strcmp(buf + n - 7, ".policy")) buf[n - 7] = 0;
}

static bool name_ok(const char *s) {
    if (!*s || *s == '.') return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("._+-", *s)))
            return false;
    return true;
}

// What the child `fplab train` would refuse, found before any run: the options through the
// trainer's table (full names only: "--name value" or "--name=value") and every policy.
static int check_train(const ablate_opts *o, char *msg, size_t msg_len) {
    train_opts t;
    train_opts_default(&t);
    char num[4][32], why[512];
    snprintf(num[0], sizeof num[0], "%ld", o->steps);
    snprintf(num[1], sizeof num[1], "%ld", o->eval_every);
    snprintf(num[2], sizeof num[2], "%d", o->threads);
    const char *set[][2] = {{"model", o->model}, {"data", o->data}, {"steps", num[0]}, {"telemetry", o->telemetry},
                            {"eval-every", o->eval_every >= 0 ? num[1] : NULL},
                            {"threads", o->threads > 0 ? num[2] : NULL}};
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        if (set[i][1] && train_opt_set(&t, set[i][0], set[i][1], why, sizeof why) != 0)
            return snprintf(msg, msg_len, "%s", why), XP_EINVAL;
    for (int i = 0; i < o->nextra; i++) {
        const char *a = o->extra[i];
        if (strncmp(a, "--", 2) || !a[2])
            return snprintf(msg, msg_len, "--extra: '%s': expected train options as --name value", a), XP_EINVAL;
        char name[64];
        const char *eq = strchr(a, '='), *val;
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - a - 2), a + 2);
            val = eq + 1;
        } else {
            if (i + 1 == o->nextra)
                return snprintf(msg, msg_len, "--extra: '%s' has no value", a), XP_EINVAL;
            snprintf(name, sizeof name, "%s", a + 2);
            val = o->extra[++i];
        }
        if (train_opt_set(&t, name, val, why, sizeof why) != 0)
            return snprintf(msg, msg_len, "--extra: %s (see 'fplab train --help')", why), XP_EINVAL;
    }
    if (train_opts_validate(&t, why, sizeof why) != 0) return snprintf(msg, msg_len, "%s", why), XP_EINVAL;
    for (int i = 0; i < o->npresets; i++) {
        ac_policy pol;
        if (ac_policy_load(&pol, o->presets[i], why, sizeof why) != AC_OK)
            return snprintf(msg, msg_len, "--presets: %s", why), XP_EINVAL;
    }
    return XP_OK;
}

// The --ptq list: each policy loads and is one the forward can evaluate (eval.h); their names
// (as fplab eval prints them) into names[0..cap) when names is not NULL. Returns the count, or
// XP_EINVAL (negated) with a message.
enum { PTQ_MAX = 64 };
static int check_ptq(const char *list, char (*names)[64], int cap, char *msg, size_t msg_len) {
    char buf[4096];
    if (strlen(list) >= sizeof buf) return snprintf(msg, msg_len, "--ptq: list too long"), -XP_EINVAL;
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        ac_policy p;
        char why[1024];
        if (ac_policy_load(&p, t, why, sizeof why) != AC_OK || eval_policy_check(&p, why, sizeof why) != EVAL_OK)
            return snprintf(msg, msg_len, "--ptq '%s': %s", t, why), -XP_EINVAL;
        if (n >= PTQ_MAX) return snprintf(msg, msg_len, "--ptq: more than %d policies", PTQ_MAX), -XP_EINVAL;
        if (names && n < cap) snprintf(names[n], 64, "%s", p.name);
        n++;
    }
    if (!n) return snprintf(msg, msg_len, "--ptq: expected a comma-separated list of policies"), -XP_EINVAL;
    return n;
}

// Whether --extra sets train option `name` ("--name value" or "--name=value").
static bool extra_sets(const ablate_opts *o, const char *name) {
    const size_t n = strlen(name);
    for (int i = 0; i < o->nextra; i++) {
        const char *t = o->extra[i];
        if (!strncmp(t, "--", 2) && !strncmp(t + 2, name, n) && (t[2 + n] == 0 || t[2 + n] == '=')) return true;
    }
    return false;
}

// The --val-data that --extra passes to every run ("--val-data F" or "--val-data=F"), or NULL.
static const char *extra_val_data(const ablate_opts *o) {
    for (int i = 0; i < o->nextra; i++) {
        const char *t = o->extra[i];
        if (!strcmp(t, "--val-data") && i + 1 < o->nextra) return o->extra[i + 1];
        if (!strncmp(t, "--val-data=", 11)) return t + 11;
    }
    return NULL;
}

int ablate_validate(const ablate_opts *o, char *msg, size_t msg_len) {
#define BAD(...) return snprintf(msg, msg_len, __VA_ARGS__), XP_EINVAL
    if (o->npresets < 1) BAD("--presets: expected at least one policy (e.g. fp32,bf16-amp)");
    if (o->nseeds < 1 || o->nseeds > 100000) BAD("--seeds %d: expected 1..100000", o->nseeds);
    if (o->steps < 1) BAD("--steps %ld: expected at least 1", o->steps);
    if (o->jobs < 1 || o->jobs > 1024) BAD("--jobs %d: expected 1..1024", o->jobs);
    if (o->nshards < 0 || o->nshards > 65536 || (o->nshards > 0 && (o->shard < 0 || o->shard >= o->nshards)))
        BAD("--shard %d/%d: expected i/n with 0 <= i < n <= 65536", o->shard, o->nshards);
    if (!o->out || !*o->out) BAD("--out DIR is required");
    if (!o->data || !*o->data) BAD("--data FILE is required");
    if (!o->model || !*o->model) BAD("--model: expected a model name");
    if (!o->telemetry || !*o->telemetry) BAD("--telemetry: expected off, sites or layers");
    for (int i = 0; i < o->npresets; i++) {
        char a[NAME_MAX_ + 8], b[NAME_MAX_ + 8];
        run_name(a, sizeof a, o->presets[i]);
        if (strlen(a) >= NAME_MAX_ || !name_ok(a))
            BAD("--presets: '%s' cannot name a run directory (letters, digits and . _ + - only, "
                "shorter than %d characters)", o->presets[i], NAME_MAX_);
        for (int j = 0; j < i; j++) {
            run_name(b, sizeof b, o->presets[j]);
            if (!strcmp(a, b)) BAD("--presets: '%s' and '%s' would share the run directory '%s'", o->presets[j],
                                   o->presets[i], a);
        }
    }
    for (int i = 0; i < o->nextra; i++) {
        const char *t = o->extra[i];
        if (strncmp(t, "--", 2)) continue;
        const size_t len = strcspn(t + 2, "=");
        for (size_t r = 0; r < sizeof reserved / sizeof reserved[0]; r++)
            if (len >= 3 && len <= strlen(reserved[r]) && !strncmp(t + 2, reserved[r], len)) {
                if (!strcmp(reserved[r], "switch-policy"))  // runs start fresh, and resume unswitched
                    BAD("--extra: '%s' (switch-policy) continues one resumed run: fplab train --resume CKPT "
                        "--switch-policy P", t);
                BAD("--extra: '%s' is set by ablate for each run (%s); %s", t, reserved[r],
                    !strcmp(reserved[r], "eval-every") || !strcmp(reserved[r], "threads")
                        ? "use ablate's own option of that name"
                        : "give it to ablate instead, or leave it out");
            }
    }
    if (o->ptq && o->ptq[0] && check_ptq(o->ptq, NULL, 0, msg, msg_len) < 0) return XP_EINVAL;
    // Nothing ablate reads may lie inside --out, whose files it writes (report.md, ablate.json,
    // plots, runs/...): the corpus, the policy files (presets, --ptq) and a validation shard.
    const fio_input in[3] = {{"data", o->data, true}, {"ptq", o->ptq, true}, {"val-data", extra_val_data(o), false}};
    char dir[FIO_PATH_MAX + 2];  // "OUT/": a directory output (fio_refuse_same)
    snprintf(dir, sizeof dir, "%s/", o->out);
    if (fio_refuse_inputs("out", dir, in, 3, msg, msg_len) != FIO_OK) return XP_EINVAL;
    for (int i = 0; i < o->npresets; i++)
        if (fio_refuse_same("out", dir, "presets", o->presets[i], msg, msg_len) != FIO_OK) return XP_EINVAL;
    if (o->check_train) return check_train(o, msg, msg_len);
    return XP_OK;
#undef BAD
}

int ablate_split_args(const char *s, char **out, int cap, char **store, char *msg, size_t msg_len) {
    *store = malloc(strlen(s) + 1);
    if (!*store) return snprintf(msg, msg_len, "out of memory"), -1;
    char *w = *store;
    int n = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        if (!*s) break;
        if (n == cap) return snprintf(msg, msg_len, "--extra: more than %d arguments", cap), -1;
        out[n++] = w;
        while (*s && *s != ' ' && *s != '\t' && *s != '\n') {
            if (*s == '\'' || *s == '"') {
                const char q = *s++;
                while (*s && *s != q) *w++ = *s++;
                if (!*s) return snprintf(msg, msg_len, "--extra: unclosed %c quote", q), -1;
                s++;
            } else {
                *w++ = *s++;
            }
        }
        *w++ = 0;
    }
    return n;
}

void ablate_quote_command(char *buf, size_t cap, const char *const *argv, int argc) {
    size_t k = 0;
    buf[0] = 0;
#define PUT(ch) (k + 1 < cap ? (void)(buf[k++] = (ch)) : (void)0)
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (i) PUT(' ');
        bool plain = *a != 0;
        for (const char *p = a; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                  strchr("_./=:,+-@%", *p)))
                plain = false;
        if (plain) {
            for (const char *p = a; *p; p++) PUT(*p);
            continue;
        }
        PUT('\'');
        for (const char *p = a; *p; p++) {
            if (*p == '\'') {
                PUT('\''), PUT('\\'), PUT('\''), PUT('\'');
            } else {
                PUT(*p);
            }
        }
        PUT('\'');
    }
    buf[k] = 0;
#undef PUT
}

// --- ablate.json

static void write_str_array(FILE *f, const char *const *v, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i) fputc(',', f);
        jx_write_str(f, v[i]);
    }
    fputc(']', f);
}

static int write_manifest(const ablate_opts *o, const char *path, char *msg, size_t msg_len) {
    char cmd[8192], cwd[PATH_MAX_];
    fio_out out;
    if (fio_create(&out, path, msg, msg_len) != FIO_OK) return XP_EIO;
    FILE *f = out.f;
    ablate_quote_command(cmd, sizeof cmd, o->argv, o->argc);
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    char when[32] = "";
    const time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fputs("{\"command\":", f), jx_write_str(f, cmd);
    fputs(",\n \"cwd\":", f), jx_write_str(f, cwd);
    fputs(",\n \"argv\":", f), write_str_array(f, o->argv, o->argc);
    fputs(",\n \"presets\":", f), write_str_array(f, o->presets, o->npresets);
    fputs(",\n \"run_names\":[", f);
    for (int i = 0; i < o->npresets; i++) {
        char nm[NAME_MAX_ + 8];
        run_name(nm, sizeof nm, o->presets[i]);
        fputs(i ? "," : "", f), jx_write_str(f, nm);
    }
    fputs("],\n \"seeds\":[", f);
    for (int i = 0; i < o->nseeds; i++)
        fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)(o->seed_base + (uint64_t)i));
    fputs("],\n \"model\":", f), jx_write_str(f, o->model);
    fputs(",\n \"data\":", f), jx_write_str(f, o->data);
    fprintf(f, ",\n \"steps\":%ld,\n \"eval_every\":%ld,\n \"threads\":%d,\n \"jobs\":%d", o->steps,
            o->eval_every, o->threads, o->jobs);
    fputs(",\n \"telemetry\":", f), jx_write_str(f, o->telemetry);
    fputs(",\n \"extra\":", f), write_str_array(f, o->extra, o->nextra);
    fputs(",\n \"started\":", f), jx_write_str(f, when);
    fputs("}\n", f);
    return fio_commit(&out, msg, msg_len) == FIO_OK ? XP_OK : XP_EIO;
}

// An earlier ablate.json in OUT: its runs are only comparable (and resumable) under the same
// model, data, steps, evaluation, telemetry and extra arguments.
static int check_manifest(const ablate_opts *o, const char *path, char *msg, size_t msg_len) {
    char *text = fio_slurp(path);
    if (!text) return XP_OK;
    jx_cur c;
    jx_init(&c, text);
    char key[32], model[256] = "", data[PATH_MAX_] = "", tel[32] = "", extra[8192] = "", mine[8192] = "";
    double steps = -1, eval = -1;
    if (jx_open(&c, '{')) do {
            jx_key(&c, key, sizeof key);
            if (!strcmp(key, "model")) jx_str(&c, model, sizeof model);
            else if (!strcmp(key, "data")) jx_str(&c, data, sizeof data);
            else if (!strcmp(key, "telemetry")) jx_str(&c, tel, sizeof tel);
            else if (!strcmp(key, "steps")) steps = jx_num(&c);
            else if (!strcmp(key, "eval_every")) eval = jx_num(&c);
            else if (!strcmp(key, "extra")) {
                const char *a = c.p;
                jx_skip(&c);
                snprintf(extra, sizeof extra, "%.*s", (int)(c.p - a), a);
            } else jx_skip(&c);
        } while (jx_more(&c, '}'));
    jx_end(&c);
    free(text);
    if (!jx_ok(&c)) {
        snprintf(msg, msg_len, "%s: malformed (%s); move it away to start a new ablation in this directory", path, c.err);
        return XP_EINVAL;
    }
    // The extra arguments compare as the JSON text this runner writes for them.
    FILE *m = fmemopen(mine, sizeof mine - 1, "w");
    if (m) write_str_array(m, o->extra, o->nextra), fclose(m);
    const char *e = extra;
    while (*e == ' ') e++;
    char what[PATH_MAX_ + 256] = "";
    if (strcmp(model, o->model)) snprintf(what, sizeof what, "--model %s (now %s)", model, o->model);
    else if (strcmp(data, o->data)) snprintf(what, sizeof what, "--data %s (now %s)", data, o->data);
    else if (steps != (double)o->steps) snprintf(what, sizeof what, "--steps %.0f (now %ld)", steps, o->steps);
    else if (eval != (double)o->eval_every)
        snprintf(what, sizeof what, "--eval-every %.0f (now %ld; -1: not given)", eval, o->eval_every);
    else if (strcmp(tel, o->telemetry)) snprintf(what, sizeof what, "--telemetry %s (now %s)", tel, o->telemetry);
    else if (strcmp(e, mine)) snprintf(what, sizeof what, "--extra %.1500s (now %.1500s)", e, mine);
    if (!what[0]) return XP_OK;
    snprintf(msg, msg_len, "%s: this directory holds an ablation made with %s; its runs would not compare. "
             "Use another --out, or the same settings (presets and seeds may change)", path, what);
    return XP_EINVAL;
}

// --- the runs

typedef struct {
    const char *preset;
    char name[NAME_MAX_ + 8];
    uint64_t seed;
    char dir[PATH_MAX_];
    pid_t pid;
    double t0;
} run_t;

static void run_file(char *buf, size_t cap, const run_t *r, const char *file) {
    snprintf(buf, cap, "%s/%s", r->dir, file);
}

// Reads the run's log: true when it ends with the final step. *val gets the last val_loss;
// err (when not NULL) why the log could not be read ("" if it could).
static bool run_complete(const run_t *r, long steps, double *val, long *last, char *err, size_t err_len) {
    char path[PATH_MAX_ + 16], msg[512];
    runlog l;
    *val = NAN, *last = 0;
    if (err) err[0] = 0;
    run_file(path, sizeof path, r, "log.jsonl");
    if (runlog_read(&l, path, false, msg, sizeof msg) != RUNLOG_OK) {
        if (err) snprintf(err, err_len, "%s", msg);
        return false;
    }
    for (size_t i = l.n; i-- > 0;)
        if (l.step[i].has_val) {
            *val = l.step[i].val_loss;
            break;
        }
    *last = l.n ? l.step[l.n - 1].step : 0;
    const bool done = l.n && *last == steps && (!l.has_start || l.steps < 0 || l.steps == steps);
    runlog_free(&l);
    return done;
}

// Whether an unfinished run resumes: it checkpointed (ckpt.bin) and its log stops short of the
// last step. The manifest check has made sure that its settings are this ablation's.
static bool run_resumes(const ablate_opts *o, const run_t *r) {
    char path[PATH_MAX_ + 16];
    run_file(path, sizeof path, r, "ckpt.bin");
    if (o->ckpt_every <= 0 || access(path, R_OK) != 0) return false;
    double val;
    long last;
    return !run_complete(r, o->steps, &val, &last, NULL, 0) && last > 0;
}

// The child's argv: EXE train --model M ... extra..., or, for a run that resumes (run_resumes),
// EXE train --resume DIR/ckpt.bin with the options a resume takes; in store (freed by the caller).
static char **child_argv(const ablate_opts *o, const run_t *r, char nums[5][32], char *ckpt, size_t ckpt_cap) {
    const int max = 32 + o->nextra;
    char **v = calloc((size_t)max, sizeof *v);
    if (!v) return NULL;
    int n = 0;
    snprintf(nums[0], 32, "%ld", o->steps);
    snprintf(nums[1], 32, "%llu", (unsigned long long)r->seed);
    snprintf(nums[2], 32, "%ld", o->eval_every);
    snprintf(nums[3], 32, "%d", o->threads);
    snprintf(nums[4], 32, "%ld", o->ckpt_every);
    if (run_resumes(o, r)) {
        // the model, data, policy, seed, schedule and thread count come from the checkpoint (no
        // --threads: a changed --threads would not continue it bit for bit)
        run_file(ckpt, ckpt_cap, r, "ckpt.bin");
        v[n++] = "fplab", v[n++] = "train";
        v[n++] = "--resume", v[n++] = ckpt;
        v[n++] = "--ckpt-dir", v[n++] = (char *)r->dir;
        v[n++] = "--progress", v[n++] = "0";
        v[n++] = "--telemetry", v[n++] = (char *)o->telemetry;
        v[n++] = "--ckpt-every", v[n++] = nums[4];
        v[n] = NULL;
        return v;
    }
    v[n++] = "fplab", v[n++] = "train";
    v[n++] = "--model", v[n++] = (char *)o->model;
    v[n++] = "--data", v[n++] = (char *)o->data;
    v[n++] = "--steps", v[n++] = nums[0];
    v[n++] = "--policy", v[n++] = (char *)r->preset;
    v[n++] = "--seed", v[n++] = nums[1];
    v[n++] = "--ckpt-dir", v[n++] = (char *)r->dir;
    v[n++] = "--progress", v[n++] = "0";
    v[n++] = "--overwrite", v[n++] = "1";  // the run is not complete (or failed): it starts over
    v[n++] = "--telemetry", v[n++] = (char *)o->telemetry;
    if (o->eval_every >= 0) v[n++] = "--eval-every", v[n++] = nums[2];
    if (o->threads > 0) v[n++] = "--threads", v[n++] = nums[3];
    if (o->ckpt_every > 0) v[n++] = "--ckpt-every", v[n++] = nums[4];
    // A study compares runs that may come from different machines: every float32 matmul in one
    // fixed order unless --extra says otherwise (docs/benchmarks.md has its cost).
    if (!extra_sets(o, "reproducible")) v[n++] = "--reproducible", v[n++] = "1";
    for (int i = 0; i < o->nextra; i++) v[n++] = (char *)o->extra[i];
    v[n] = NULL;
    return v;
}

static void mark_failed(const run_t *r, const char *why) {
    char path[PATH_MAX_ + 16];
    run_file(path, sizeof path, r, "FAILED");
    char text[1024], ignored[FIO_PATH_MAX + 128];
    const int n = snprintf(text, sizeof text, "%s\n", why);
    fio_write_file(path, text, n < (int)sizeof text ? (size_t)n : sizeof text - 1, ignored, sizeof ignored);
}

// A run's output (stdout and stderr of `fplab train` or `eval`) is STEM.err while it runs and when
// it failed, where a reader (and report) looks for why; a run that went well keeps it as
// STEM.out, its normal output (the configuration, the timing), not an error.
static void settle_output(const run_t *r, const char *stem, bool ok) {
    char err[PATH_MAX_ + 16], out[PATH_MAX_ + 16], name[16];
    snprintf(name, sizeof name, "%s.err", stem);
    run_file(err, sizeof err, r, name);
    snprintf(name, sizeof name, "%s.out", stem);
    run_file(out, sizeof out, r, name);
    if (ok) rename(err, out);
    else unlink(out);  // a stale one of an earlier attempt
}

// The last lines of the run's file (its output: train.err, ptq.err), indented under a progress line.
static void print_tail(FILE *p, const run_t *r, const char *file) {
    char path[PATH_MAX_ + 16], tail[2048];
    run_file(path, sizeof path, r, file);
    if (!fio_tail(path, 8, tail, sizeof tail)) {
        fprintf(p, "    (%s is empty)\n", path);
        return;
    }
    fprintf(p, "    last lines of %s:\n", path);
    for (char *s = tail, *e; *s; s = e + (*e != 0)) {
        e = strchr(s, '\n');
        if (!e) e = s + strlen(s);
        fprintf(p, "    | %.*s\n", (int)(e - s), s);
    }
}

// --- the grid: plan, start, reap

typedef struct {
    const ablate_opts *o;
    ablate_result *res;
    const char *exe;
    FILE *p;           // progress (NULL: quiet)
    run_t *runs;
    bool *todo;        // runs[i] still has to run
    size_t nruns, next;  // runs started so far: those before next
    int ntodo, running, executed, k;  // k: runs reported so far
    double t_start;
} grid_t;

static bool in_shard(const ablate_opts *o, size_t i) {
    return o->nshards <= 1 || i % (size_t)o->nshards == (size_t)o->shard;
}

// The runs in seed-major order, with their directories.
static int grid_plan(grid_t *g, char *msg, size_t msg_len) {
    const ablate_opts *o = g->o;
    g->nruns = (size_t)o->npresets * (size_t)o->nseeds;
    g->runs = calloc(g->nruns, sizeof *g->runs);
    g->todo = calloc(g->nruns, sizeof *g->todo);
    if (!g->runs || !g->todo) return snprintf(msg, msg_len, "out of memory"), XP_ENOMEM;
    for (int s = 0; s < o->nseeds; s++)
        for (int i = 0; i < o->npresets; i++) {
            run_t *r = &g->runs[(size_t)s * (size_t)o->npresets + (size_t)i];
            r->preset = o->presets[i];
            r->seed = o->seed_base + (uint64_t)s;
            run_name(r->name, sizeof r->name, r->preset);
            if (snprintf(r->dir, sizeof r->dir, "%s/runs/%s/seed-%llu", o->out, r->name,
                         (unsigned long long)r->seed) >= (int)sizeof r->dir)
                return snprintf(msg, msg_len, "--out '%.60s...': path too long", o->out), XP_EINVAL;
        }
    return XP_OK;
}

// Which runs are done already (their logs end at the last step); prints the plan.
static void grid_survey(grid_t *g) {
    const ablate_opts *o = g->o;
    char path[PATH_MAX_ + 32];
    double *done_val = calloc(g->nruns, sizeof *done_val);
    g->res->total = 0;
    for (size_t i = 0; i < g->nruns; i++) {
        long last;
        double val;
        if (!in_shard(o, i)) {  // another shard's: neither to do nor done here
            g->todo[i] = 0;
            continue;
        }
        g->res->total++;
        g->todo[i] = !run_complete(&g->runs[i], o->steps, &val, &last, NULL, 0);
        if (done_val) done_val[i] = val;
        g->ntodo += g->todo[i];
        g->res->skipped += !g->todo[i];
        if (!g->todo[i] && !o->dry_run) {
            run_file(path, sizeof path, &g->runs[i], "FAILED");
            unlink(path);  // a stale marker of an attempt that a later one completed
        }
    }
    FILE *p = g->p;
    if (p) {
        char one[8192], thr[32];
        snprintf(thr, sizeof thr, "%d", o->threads);
        char shard[48] = "";
        if (o->nshards > 1) snprintf(shard, sizeof shard, " (shard %d/%d: %d of them)", o->shard, o->nshards, g->res->total);
        fprintf(p, "ablate: %d presets x %d seeds = %zu runs%s (%d to run, %d done), %d at a time, "
                   "threads per run: %s, out %s\n",
                o->npresets, o->nseeds, g->nruns, shard, g->ntodo, g->res->skipped, o->jobs,
                o->threads > 0 ? thr : "the trainer's default", o->out);
        for (size_t i = 0; i < g->nruns; i++) {
            if (!g->todo[i]) continue;
            char nums[5][32], ckpt[PATH_MAX_ + 16];
            char **v = child_argv(o, &g->runs[i], nums, ckpt, sizeof ckpt);
            if (v) {
                int n = 0;
                while (v[n]) n++;
                ablate_quote_command(one, sizeof one, (const char *const *)v, n);
                fprintf(p, "%s%s\n", o->dry_run ? "  " : "  first run: ", one);
                free(v);
            }
            if (!o->dry_run) break;
        }
        for (size_t i = 0; i < g->nruns; i++)
            if (!g->todo[i] && in_shard(o, i))
                fprintf(p, "[%d/%zu] %s seed %llu: already done (val loss %.4f), skipped\n", ++g->k, (size_t)g->res->total,
                        g->runs[i].name, (unsigned long long)g->runs[i].seed, done_val ? done_val[i] : NAN);
        fflush(p);
    }
    free(done_val);
}

// Starts runs until --jobs are running or none is left.
static void grid_start(grid_t *g) {
    char path[PATH_MAX_ + 32];
    while (g->running < g->o->jobs && g->next < g->nruns) {
        run_t *r = &g->runs[g->next];
        if (!g->todo[g->next++]) continue;
        char nums[5][32], ckpt[PATH_MAX_ + 16], err[PATH_MAX_ + 32], why[PATH_MAX_ + 64] = "";
        run_file(path, sizeof path, r, "FAILED");
        unlink(path);
        run_file(err, sizeof err, r, "train.err");
        char **v = NULL;
        r->pid = -1;
        if (fio_mkdir_p(r->dir, why, sizeof why) == FIO_OK && (v = child_argv(g->o, r, nums, ckpt, sizeof ckpt)))
            r->pid = xp_spawn(g->exe, v, NULL, err, why, sizeof why);
        else if (!v && !why[0]) snprintf(why, sizeof why, "out of memory");
        free(v);
        r->t0 = fio_now();
        if (r->pid < 0) {
            g->res->failed++, g->executed++;
            mark_failed(r, why);
            if (g->p) fprintf(g->p, "[%d/%zu] %s seed %llu: FAILED to start: %s\n", ++g->k, (size_t)g->res->total, r->name,
                              (unsigned long long)r->seed, why);
            continue;
        }
        g->running++;
    }
}

// A child that ended: done when it exited 0 and its log reaches the last step, else failed
// (marked with a FAILED file saying why, and the tail of its output printed).
static void grid_finish(grid_t *g, run_t *r, pid_t w, int ws) {
    const ablate_opts *o = g->o;
    g->running--, g->executed++;
    const double secs = fio_now() - r->t0;
    r->pid = 0;
    char why[1024], dur[32], eta[32], err[512];
    double val;
    long last;
    if (w < 0) snprintf(why, sizeof why, "waitpid: %s", strerror(errno));
    else xp_describe_status(ws, why, sizeof why);
    const bool exited0 = w > 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    const bool complete = run_complete(r, o->steps, &val, &last, err, sizeof err);
    if (exited0 && !complete && err[0])
        snprintf(why, sizeof why, "exit status 0, but its log cannot be read: %s", err);
    else if (exited0 && !complete)
        snprintf(why, sizeof why, "exit status 0, but its log ends at step %ld of %ld", last, o->steps);
    fio_fmt_duration(secs, dur, sizeof dur);
    const int left = g->ntodo - g->executed;
    fio_fmt_duration(left ? (fio_now() - g->t_start) / g->executed * left : 0, eta, sizeof eta);
    FILE *p = g->p;
    settle_output(r, "train", exited0 && complete);
    if (exited0 && complete) {
        g->res->done++;
        if (p) fprintf(p, "[%d/%zu] %s seed %llu: val loss %.4f, %s; ETA %s\n", ++g->k, (size_t)g->res->total, r->name,
                       (unsigned long long)r->seed, val, dur, eta);
    } else {
        g->res->failed++;
        mark_failed(r, why);
        if (p) {
            fprintf(p, "[%d/%zu] %s seed %llu: FAILED (%s) after %s; ETA %s\n", ++g->k, (size_t)g->res->total, r->name,
                    (unsigned long long)r->seed, why, dur, eta);
            print_tail(p, r, "train.err");
        }
    }
    if (p) fflush(p);
}

// Polls the running children (waitpid WNOHANG on each own pid: no other child of the caller is
// reaped); true when one ended.
static bool grid_reap(grid_t *g) {
    bool reaped = false;
    for (size_t i = 0; i < g->next; i++) {
        run_t *r = &g->runs[i];
        if (!g->todo[i] || r->pid <= 0) continue;
        int ws;
        const pid_t w = waitpid(r->pid, &ws, WNOHANG);
        if (w == 0 || (w < 0 && errno == EINTR)) continue;
        reaped = true;
        grid_finish(g, r, w, ws);
    }
    return reaped;
}

// Whether the run's ptq.jsonl holds a row for every policy name.
static bool ptq_done(const run_t *r, char (*names)[64], int n) {
    char path[PATH_MAX_ + 16], key[96];
    run_file(path, sizeof path, r, "ptq.jsonl");
    char *text = fio_slurp(path);
    bool all = text != NULL;
    for (int i = 0; all && i < n; i++) {
        snprintf(key, sizeof key, "\"policy\":\"%.63s\"", names[i]);
        all = strstr(text, key) != NULL;
    }
    free(text);
    return all;
}

// Post-training quantization of every complete run of this shard (see ablate_opts.ptq): the
// checkpoint under fp32 and the --ptq policies, by `EXE eval`, one run at a time. A failed
// evaluation is reported (it leaves the run done: its training is) and counted in res->ptq_failed.
static void grid_ptq(grid_t *g) {
    const ablate_opts *o = g->o;
    char names[PTQ_MAX][64], msg[512], pol[4200], thr[32], ckpt[PATH_MAX_ + 16], out[PATH_MAX_ + 16],
        err[PATH_MAX_ + 16];
    int ws = 0;
    const int n = check_ptq(o->ptq, names, PTQ_MAX, msg, sizeof msg);
    if (n <= 0) return;  // (ablate_validate refused it already)
    snprintf(pol, sizeof pol, "fp32,%s", o->ptq);
    snprintf(thr, sizeof thr, "%d", o->threads);
    for (size_t i = 0; i < g->nruns; i++) {
        run_t *r = &g->runs[i];
        double val;
        long last;
        if (!in_shard(o, i) || !run_complete(r, o->steps, &val, &last, NULL, 0) || ptq_done(r, names, n)) continue;
        run_file(ckpt, sizeof ckpt, r, "ckpt.bin");
        run_file(out, sizeof out, r, "ptq.jsonl");
        run_file(err, sizeof err, r, "ptq.err");
        char *v[] = {"fplab", "eval", "--ckpt", ckpt, "--policy", pol, "--format", "json", "--telemetry", "off",
                     "--out", out, o->threads > 0 ? "--threads" : NULL, thr, NULL};
        const bool ran = xp_run(g->exe, v, NULL, err, &ws, msg, sizeof msg);
        const bool ok = ran && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
        if (!ok) g->res->ptq_failed++;
        settle_output(r, "ptq", ok);
        if (ran && !ok) xp_describe_status(ws, msg, sizeof msg);
        if (g->p) {
            fprintf(g->p, "ptq: %s seed %llu: %s\n", r->name, (unsigned long long)r->seed,
                    ok ? "evaluated" : msg);
            if (!ok) print_tail(g->p, r, "ptq.err");
            fflush(g->p);
        }
    }
}

int ablate_lock(const char *dir, char *msg, size_t msg_len) {
    char path[FIO_PATH_MAX + 8], what[FIO_PATH_MAX + 8];
    if (strlen(dir) >= FIO_PATH_MAX) return snprintf(msg, msg_len, "'%.60s...': path too long", dir), -1;
    snprintf(path, sizeof path, "%.*s/.lock", (int)FIO_PATH_MAX, dir);
    snprintf(what, sizeof what, "'%.*s'", (int)FIO_PATH_MAX, dir);
    // Inherited: the children hold the lock until the last of them has exited, even if this
    // process dies first.
    int fd;
    const int st = fio_lock(path, what, "another 'fplab ablate' or a run it started", true, &fd, msg, msg_len);
    return st == FIO_OK ? fd : -1;
}

int ablate_run(const ablate_opts *o, ablate_result *res, char *msg, size_t msg_len) {
    memset(res, 0, sizeof *res);
    int st = ablate_validate(o, msg, msg_len);
    if (st) return st;
    grid_t g = {.o = o, .res = res, .exe = o->exe ? o->exe : "/proc/self/exe", .p = o->progress};
    char path[PATH_MAX_ + 32], shard_dir[PATH_MAX_ + 64];
    int lock = -1;
    snprintf(path, sizeof path, "%s/ablate.json", o->out);
    snprintf(shard_dir, sizeof shard_dir, "%s/.shard-%d-of-%d", o->out, o->shard, o->nshards);
    if ((st = grid_plan(&g, msg, msg_len)) != XP_OK) goto out;
    if (!o->dry_run) {
        if (fio_mkdir_p(o->out, msg, msg_len) != FIO_OK) {
            st = XP_EIO;
            goto out;
        }
        // Shards of one grid run at once in OUT, each under a lock of its own.
        if (o->nshards > 1 && fio_mkdir_p(shard_dir, msg, msg_len) != FIO_OK) {
            st = XP_EIO;
            goto out;
        }
        if ((lock = ablate_lock(o->nshards > 1 ? shard_dir : o->out, msg, msg_len)) < 0) {
            st = XP_EINVAL;
            goto out;
        }
    }
    if ((st = check_manifest(o, path, msg, msg_len)) != XP_OK) goto out;
    if (!o->dry_run && (st = write_manifest(o, path, msg, msg_len)) != XP_OK) goto out;
    grid_survey(&g);
    if (o->dry_run) goto out;
    g.t_start = fio_now();
    while (g.next < g.nruns || g.running) {
        grid_start(&g);
        if (g.running && !grid_reap(&g)) nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    if (o->ptq && o->ptq[0]) grid_ptq(&g);
    res->seconds = fio_now() - g.t_start;
    st = XP_OK;
out:
    // Every run it started has ended (the loop above reaps them all): no process holds the
    // inherited lock any more, so its file can go, and an empty shard directory with it.
    if (lock >= 0) {
        char lock_path[PATH_MAX_ + 80];
        snprintf(lock_path, sizeof lock_path, "%s/.lock", o->nshards > 1 ? shard_dir : o->out);
        fio_unlock(&lock, lock_path);
        if (o->nshards > 1) rmdir(shard_dir);
    }
    free(g.runs), free(g.todo);
    return st;
}
