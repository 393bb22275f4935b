// test_train.c: the training run (trainer/train.c) end to end on a small generated corpus:
// the loss falls on learnable text; a run stopped and resumed from its checkpoint gives
// bitwise the losses and parameters of the uninterrupted run; damaged checkpoints and bad
// options are refused with a message.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/llama_ops.h"
#include "tests/test_util.h"
#include "trainer/checkpoint.h"
#include "trainer/dist.h"
#include "trainer/train.h"
#include "util/fileio.h"

static char dir[64];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/fplab_train_XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp");
    char path[128];
    snprintf(path, sizeof path, "%s/corpus.txt", dir);
    tu_word_corpus(path, 42, 6000);
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(train, .init = setup, .fini = teardown);

static train_opts small_opts(const char *sub) {
    train_opts o;
    train_opts_default(&o);
    snprintf(o.model, sizeof o.model, "tiny");
    snprintf(o.data, sizeof o.data, "%s/corpus.txt", dir);
    if (sub) snprintf(o.ckpt_dir, sizeof o.ckpt_dir, "%s/%s", dir, sub);
    o.batch = 4, o.steps = 24, o.warmup = 2, o.lr = 1e-2f, o.lr_min = 1e-3f;
    o.eval_every = 8, o.eval_batches = 2, o.progress = 0, o.threads = 2;
    return o;
}

Test(train, loss_falls) {
    train_opts o = small_opts(NULL);
    o.steps = 60;
    float losses[60];
    train_report rep = {.losses = losses, .losses_cap = 60};
    char msg[512] = "";
    cr_assert_eq(train_run(&o, NULL, NULL, &rep, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(rep.steps_done, 60);
    // uniform over the 14 characters of the corpus is ln 14 = 2.64; the words are learnable
    cr_assert(losses[0] > 2.3f, "first loss %g", losses[0]);
    cr_assert(rep.final_val_loss < 0.7f * losses[0], "val loss %g after 60 steps (first train loss %g)",
              rep.final_val_loss, losses[0]);
}

static void read_params(const char *path, float **out, size_t *n) {
    ckpt_file f;
    char msg[512];
    cr_assert_eq(ckpt_read(&f, path, msg, sizeof msg), CKPT_OK, "%s", msg);
    const ckpt_section *p = ckpt_find(&f, "params");
    cr_assert(p);
    *n = p->nbytes / sizeof(float);
    *out = malloc(p->nbytes);
    memcpy(*out, p->data, p->nbytes);
    ckpt_file_free(&f);
}

// The checkpoints dir/a/ckpt.bin and dir/b/ckpt.bin hold the same parameters, bit for bit.
static void assert_same_params(const char *a, const char *b, const char *what) {
    char path[160];
    float *p1, *p2;
    size_t n1, n2;
    snprintf(path, sizeof path, "%s/%s/ckpt.bin", dir, a);
    read_params(path, &p1, &n1);
    snprintf(path, sizeof path, "%s/%s/ckpt.bin", dir, b);
    read_params(path, &p2, &n2);
    cr_assert(n1 == n2 && memcmp(p1, p2, n1 * sizeof *p1) == 0, "%s: final parameters differ", what);
    free(p1), free(p2);
}

static void resume_is_bitwise_with(int accum, const char *recompute, const char *policy, const char *optimizer) {
    char msg[512] = "", path[160];
    float full[24], part[24];
    memset(part, 0, sizeof part);
    train_opts o = small_opts("full");
    snprintf(o.policy, sizeof o.policy, "%s", policy);
    snprintf(o.optimizer, sizeof o.optimizer, "%s", optimizer);
    o.accum = accum;
    snprintf(o.recompute, sizeof o.recompute, "%s", recompute);
    train_report rep = {.losses = full, .losses_cap = 24};
    cr_assert_eq(train_run(&o, NULL, NULL, &rep, msg, sizeof msg), 0, "%s", msg);

    train_opts a = small_opts("part");
    snprintf(a.policy, sizeof a.policy, "%s", policy);
    snprintf(a.optimizer, sizeof a.optimizer, "%s", optimizer);
    a.accum = accum;
    snprintf(a.recompute, sizeof a.recompute, "%s", recompute);
    a.stop_at = 10;
    train_report ra = {.losses = part, .losses_cap = 24};
    cr_assert_eq(train_run(&a, NULL, NULL, &ra, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(ra.steps_done, 10);
    snprintf(path, sizeof path, "%s/part/ckpt.bin", dir);
    train_opts run_only = small_opts("part");  // only the run_only fields are read on resume
    run_only.stop_at = 0;
    train_report rb = {.losses = part, .losses_cap = 24};
    cr_assert_eq(train_run(&run_only, path, NULL, &rb, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(rb.steps_done, 24);
    for (int s = 0; s < 24; s++)
        cr_assert(tu_samef(full[s], part[s]), "step %d: loss %a uninterrupted, %a resumed", s + 1, full[s], part[s]);

    assert_same_params("full", "part", policy);

    // the log of the resumed run holds each step once
    snprintf(path, sizeof path, "%s/part/log.jsonl", dir);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char line[512];
    int lines = 0;
    int ends = 0;
    while (fgets(line, sizeof line, f)) lines += !strncmp(line, "{\"step\":", 8), ends += strstr(line, "\"event\":\"end\"") != NULL;
    fclose(f);
    cr_assert_eq(lines, 24, "log has %d step lines", lines);
    cr_assert_eq(ends, 2, "log has %d end events (one per invocation)", ends);
}

static void resume_is_bitwise(int accum, const char *recompute, const char *policy) {
    resume_is_bitwise_with(accum, recompute, policy, "adamw");
}

Test(train, resume_is_bitwise) { resume_is_bitwise(1, "none", "fp32"); }
Test(train, resume_is_bitwise_accum_recompute) { resume_is_bitwise(3, "block", "fp32"); }
// dynamic loss scaling (its scale and counters in the checkpoint), SR and Kahan state, delayed
// amax histories
Test(train, resume_is_bitwise_fp16_amp) { resume_is_bitwise(2, "none", "fp16-amp"); }
Test(train, resume_is_bitwise_pure_bf16_kahan) { resume_is_bitwise(1, "block", "pure-bf16-kahan"); }
Test(train, resume_is_bitwise_pure_bf16_sr) { resume_is_bitwise(1, "none", "pure-bf16-sr"); }
Test(train, resume_is_bitwise_fp8_delayed) { resume_is_bitwise(2, "block", "fp8-delayed"); }
// SGD with momentum: its buffer (adam_m's place) in the checkpoint, with a dynamic loss scaler
Test(train, resume_is_bitwise_sgd) { resume_is_bitwise_with(2, "none", "fp16-amp", "sgd"); }

// SGD with momentum learns, keeps its buffer where AdamW keeps m and leaves v zero; a checkpoint
// of an SGD run whose v is not zero was not written by a run.
Test(train, sgd_momentum) {
    train_opts o = small_opts("sgd");
    snprintf(o.optimizer, sizeof o.optimizer, "sgd");
    o.steps = 60, o.lr = 0.5f, o.lr_min = 0.05f, o.weight_decay = 0;
    float losses[60];
    train_report rep = {.losses = losses, .losses_cap = 60};
    char msg[512] = "", path[160];
    cr_assert_eq(train_run(&o, NULL, NULL, &rep, msg, sizeof msg), 0, "%s", msg);
    cr_assert(rep.final_val_loss < 0.8f * losses[0], "val loss %g after 60 steps (first train loss %g)",
              rep.final_val_loss, losses[0]);
    snprintf(path, sizeof path, "%s/sgd/ckpt.bin", dir);
    ckpt_file cf;
    cr_assert_eq(ckpt_read(&cf, path, msg, sizeof msg), CKPT_OK, "%s", msg);
    const ckpt_section *ms = ckpt_find(&cf, "adam_m"), *vs = ckpt_find(&cf, "adam_v");
    cr_assert(ms && vs && ms->nbytes == vs->nbytes);
    const float *m = ms->data, *v = vs->data;
    size_t nonzero = 0;
    for (size_t i = 0; i < vs->nbytes / sizeof(float); i++) {
        nonzero += m[i] != 0;
        cr_assert_eq(v[i], 0.0f, "adam_v[%zu] = %g under SGD", i, v[i]);
    }
    cr_assert(nonzero > 0, "the momentum buffer is all zero");
    ckpt_file_free(&cf);
    o.optimizer[0] = 'x';
    cr_assert_eq(train_opts_validate(&o, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "--optimizer 'xgd'"), "%s", msg);
    snprintf(o.optimizer, sizeof o.optimizer, "sgd");
    o.momentum = 1;
    cr_assert_eq(train_opts_validate(&o, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "--momentum"), "%s", msg);
}

// A loss scale that overflows fp16 gradients to inf: every step is skipped, so the weights
// stay the initial ones and the AdamW moments stay zero; the schedule does not advance.
Test(train, skipped_steps_change_nothing) {
    char path[160], msg[512] = "";
    snprintf(path, sizeof path, "%s/overflow.policy", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("name overflow\nsite *.grad fp16 none rne ieee\nloss_scale static 1e30\n", f);
    fclose(f);
    train_opts o = small_opts("skip");
    snprintf(o.policy, sizeof o.policy, "%s", path);
    o.steps = 3;
    train_report rep = {0};
    cr_assert_eq(train_run(&o, NULL, NULL, &rep, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(rep.skipped, 3, "skipped %ld of 3", rep.skipped);
    snprintf(path, sizeof path, "%s/skip/ckpt.bin", dir);
    ckpt_file cf;
    cr_assert_eq(ckpt_read(&cf, path, msg, sizeof msg), CKPT_OK, "%s", msg);
    const ckpt_section *ps = ckpt_find(&cf, "params"), *ms = ckpt_find(&cf, "adam_m"), *vs = ckpt_find(&cf, "adam_v");
    llama_config c;
    llama_model m;
    cr_assert_eq(ckpt_config_unpack(&c, ckpt_find(&cf, "config")), CKPT_OK);
    cr_assert_eq(llama_init(&m, &c, LLAMA_RECOMPUTE_NONE, NULL, 0), LLAMA_OK);
    llama_init_weights(&m, o.seed);
    cr_assert(memcmp(ps->data, m.params, ps->nbytes) == 0, "weights changed on skipped steps");
    for (size_t i = 0; i < m.n_params; i++)
        cr_assert(((const float *)ms->data)[i] == 0 && ((const float *)vs->data)[i] == 0, "moment %zu changed", i);
    llama_free(&m);
    ckpt_file_free(&cf);
    snprintf(path, sizeof path, "%s/skip/log.jsonl", dir);
    f = fopen(path, "r");
    char line[8192];
    int skipped = 0;
    while (fgets(line, sizeof line, f)) skipped += strstr(line, "\"skipped\":1") != NULL;
    fclose(f);
    cr_assert_eq(skipped, 3, "log shows %d skipped steps", skipped);
}

Test(train, damaged_checkpoints_are_refused) {
    char msg[512] = "", path[160], bad[176];
    train_opts o = small_opts("d");
    o.steps = 2;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), 0, "%s", msg);
    snprintf(path, sizeof path, "%s/d/ckpt.bin", dir);
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    rewind(f);
    unsigned char *buf = malloc(size);
    cr_assert_eq(fread(buf, 1, size, f), (size_t)size);
    fclose(f);
    snprintf(bad, sizeof bad, "%s/bad.bin", dir);
    struct { long at, len; unsigned char x; const char *expect; } cases[] = {
        {200, size, 0x40, "damaged"},  // a flipped bit inside the config/params sections
        {-1, size / 2, 0, "truncated"},
        {0, size, 0x01, "magic"},
        {4, size, 0x02, "version"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        f = fopen(bad, "wb");
        if (cases[i].at >= 0) buf[cases[i].at] ^= cases[i].x;
        fwrite(buf, 1, cases[i].len, f);
        fclose(f);
        if (cases[i].at >= 0) buf[cases[i].at] ^= cases[i].x;
        msg[0] = 0;
        cr_assert_neq(train_run(&o, bad, NULL, NULL, msg, sizeof msg), 0, "case %zu accepted", i);
        // a cut inside a section reads "runs past the end of the file" (trainer/checkpoint.c)
        const bool said = strstr(msg, cases[i].expect) ||
                          (!strcmp(cases[i].expect, "truncated") && strstr(msg, "past the end of the file"));
        cr_assert(said && strstr(msg, bad), "case %zu: message '%s'", i, msg);
    }
    free(buf);
    // the good one still resumes (and has nothing left to do)
    train_report rep = {0};
    cr_assert_eq(train_run(&o, path, NULL, &rep, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(rep.steps_done, 2);
}

Test(train, bad_options) {
    char msg[512];
    train_opts o = small_opts(NULL);
    cr_assert_eq(train_opt_set(&o, "lr", "fast", msg, sizeof msg), -1);
    cr_assert(strstr(msg, "--lr"), "%s", msg);
    cr_assert_eq(train_opt_set(&o, "nope", "1", msg, sizeof msg), -1);
    // integers are decimal, or hexadecimal after 0x; a leading 0 is not octal (issue 34, 3.7)
    cr_assert_eq(train_opt_set(&o, "seed", "010", msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(o.seed, 10);
    cr_assert_eq(train_opt_set(&o, "seed", "0x10", msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(o.seed, 16);
    cr_assert_eq(train_opt_set(&o, "seed", "09", msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(o.seed, 9);
    snprintf(o.model, sizeof o.model, "gpt5");
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "gpt5"), "%s", msg);
    o = small_opts(NULL);
    snprintf(o.data, sizeof o.data, "%s/missing.txt", dir);
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "missing.txt"), "%s", msg);
    o = small_opts(NULL);
    o.context = 1000;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "context"), "%s", msg);
}

// --- what a user of the command relies on: places, inputs never overwritten, divergence stops

static bool *none_given(void) {
    static bool g[64];
    memset(g, 0, sizeof g);
    return g;
}

static bool file_has(const char *path, const char *text) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[16384];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

static int64_t ckpt_step(const char *path) {
    ckpt_file f;
    char msg[512];
    cr_assert_eq(ckpt_read(&f, path, msg, sizeof msg), CKPT_OK, "%s", msg);
    const ckpt_section *s = ckpt_find(&f, "state");
    cr_assert(s && s->nbytes >= sizeof(int64_t));
    int64_t step;
    memcpy(&step, s->data, sizeof step);
    ckpt_file_free(&f);
    return step;
}

// `fplab train --resume DIR/ckpt.bin` with nothing else: the run continues in DIR, its
// checkpoint advances and its log is appended (it used to write nothing at all).
Test(train, resume_continues_where_the_checkpoint_lives) {
    char msg[512] = "", path[160], log[160];
    train_opts o = small_opts("here");
    o.steps = 6, o.stop_at = 3;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), 0, "%s", msg);
    snprintf(path, sizeof path, "%s/here/ckpt.bin", dir);
    snprintf(log, sizeof log, "%s/here/log.jsonl", dir);
    cr_assert_eq(ckpt_step(path), 3);
    train_opts cli;  // what cmd_train passes when only --resume was given
    train_opts_default(&cli);
    train_report rep = {0};
    cr_assert_eq(train_run(&cli, path, none_given(), &rep, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(rep.steps_done, 6);
    cr_assert_eq(ckpt_step(path), 6, "the checkpoint in the run's directory did not advance");
    cr_assert(file_has(log, "\"resumed_from\":3"), "the log was not appended");
    cr_assert(file_has(log, "\"step\":1,"), "the log lost its first part");
    cr_assert(file_has(log, "\"step\":6,"), "the log lacks the resumed steps");
}

Test(train, fresh_run_refuses_a_directory_with_a_run) {
    char msg[512] = "", path[160];
    train_opts o = small_opts("taken");
    o.steps = 2;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), 0, "%s", msg);
    snprintf(path, sizeof path, "%s/taken/ckpt.bin", dir);
    o.steps = 1;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EREFUSED);
    cr_assert(strstr(msg, "already holds a run") && strstr(msg, "--resume"), "%s", msg);
    cr_assert_eq(ckpt_step(path), 2, "the other run's checkpoint was touched");
    o.overwrite = 1;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(ckpt_step(path), 1);
}

// An output that is an input, directly, through a symlink or a hard link, is refused and the
// input keeps its bytes.
Test(train, outputs_never_overwrite_inputs) {
    char msg[512] = "", data[160], sym[160], hard[160];
    snprintf(data, sizeof data, "%s/corpus.txt", dir);
    snprintf(sym, sizeof sym, "%s/sym.txt", dir);
    snprintf(hard, sizeof hard, "%s/hard.txt", dir);
    cr_assert_eq(symlink(data, sym), 0);
    cr_assert_eq(link(data, hard), 0);
    struct stat before, after;
    cr_assert_eq(stat(data, &before), 0);
    const char *outs[] = {data, sym, hard};
    for (size_t i = 0; i < 3; i++) {
        train_opts o = small_opts(NULL);
        o.steps = 1;
        snprintf(o.log, sizeof o.log, "%s", outs[i]);
        cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EREFUSED, "log %s accepted", outs[i]);
        cr_assert(strstr(msg, "same file as --data"), "%s", msg);
    }
    cr_assert_eq(stat(data, &after), 0);
    cr_assert_eq(after.st_size, before.st_size, "the corpus was truncated");
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

// The log cannot be one of the checkpoint's files (issue 34: --log d/ckpt.bin with --ckpt-dir d
// was accepted and the checkpoint's rename replaced the log), by path, by file or by name, and
// the lock file cannot be an input (it gets the pid).
Test(train, outputs_never_overwrite_each_other) {
    char msg[512] = "", ck[160], hard[160], lock[160], data[160];
    train_opts o = small_opts("same");
    o.steps = 1;
    const char *logs[] = {"same/ckpt.bin", "same/./ckpt.bin", "same/ckpt.bin.lock", "elsewhere.d/ckpt.bin",
                          "ckpt.bin.tmp.Ab12Cd"};
    snprintf(ck, sizeof ck, "%s/elsewhere.d", dir);
    cr_assert_eq(mkdir(ck, 0777), 0);
    for (size_t i = 0; i < sizeof logs / sizeof *logs; i++) {
        snprintf(o.log, sizeof o.log, "%s/%s", dir, logs[i]);
        cr_expect_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EREFUSED, "--log %s accepted", logs[i]);
        cr_expect(strstr(msg, "--log '") && (strstr(msg, "(or its lock)") || strstr(msg, "a checkpoint's files")),
                  "%s", msg);
    }
    o.log[0] = 0;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), 0, "%s", msg);
    snprintf(ck, sizeof ck, "%s/same/ckpt.bin", dir);
    snprintf(hard, sizeof hard, "%s/hard.jsonl", dir);
    cr_assert_eq(link(ck, hard), 0);
    snprintf(o.log, sizeof o.log, "%s", hard);
    o.overwrite = 1;
    cr_expect_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EREFUSED, "a hard link to the checkpoint");
    cr_expect(strstr(msg, "(or its lock)"), "%s", msg);
    // the corpus under the lock file's name
    snprintf(lock, sizeof lock, "%s/same/ckpt.bin.lock", dir);
    snprintf(data, sizeof data, "%s/corpus.txt", dir);
    cr_assert_eq(link(data, lock), 0);
    const long n = file_size(data);
    o.log[0] = 0;
    snprintf(o.data, sizeof o.data, "%s", lock);
    cr_expect_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EREFUSED);
    cr_expect(strstr(msg, "same file as --data"), "%s", msg);
    cr_expect_eq(file_size(data), n, "the corpus was overwritten by a pid");
}

// A lock file that is a hard link is refused and its other name keeps its bytes (issue 34); a
// run that ends leaves no lock file.
Test(train, a_hard_linked_lock_is_refused_and_runs_leave_no_lock) {
    char msg[512] = "", lock[160], keep[160];
    train_opts o = small_opts("hl");
    o.steps = 1;
    snprintf(lock, sizeof lock, "%s/hl/ckpt.bin.lock", dir);
    snprintf(keep, sizeof keep, "%s/keep.txt", dir);
    FILE *f = fopen(keep, "w");
    cr_assert(f);
    fputs("keep me\n", f), fclose(f);
    char d[160];
    snprintf(d, sizeof d, "%s/hl", dir);
    cr_assert_eq(mkdir(d, 0777), 0);
    cr_assert_eq(link(keep, lock), 0);
    cr_expect_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EREFUSED);
    cr_expect(strstr(msg, "hard link"), "%s", msg);
    cr_expect_eq(file_size(keep), 8, "the linked file lost its contents");
    cr_assert_eq(unlink(lock), 0);
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), 0, "%s", msg);
    cr_expect_eq(access(lock, F_OK), -1, "the run left its lock file");
    // refused (the directory holds a run), after looking whether a run holds it: no lock file either
    cr_expect_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EREFUSED);
    cr_expect_eq(access(lock, F_OK), -1, "a refused run left a lock file");
}

// A run's log is its own while it lives (issue 34: another run's --log A/log.jsonl --overwrite 1
// truncated it). Held here as a live run holds it: refused, and the bytes stay.
Test(train, a_live_runs_log_is_refused_even_with_overwrite) {
    char msg[512] = "", log[160];
    snprintf(log, sizeof log, "%s/live.jsonl", dir);
    FILE *held = NULL;
    cr_assert_eq(fio_open_append(log, "--log", "a test", &held, msg, sizeof msg), FIO_OK, "%s", msg);
    fputs("{\"event\":\"start\"}\n", held), fflush(held);
    train_opts o = small_opts(NULL);
    o.steps = 1, o.overwrite = 1;
    snprintf(o.log, sizeof o.log, "%s", log);
    cr_expect_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EREFUSED);
    cr_expect(strstr(msg, "is in use by another training"), "%s", msg);
    cr_expect_eq(file_size(log), 18, "the live log was cut");
    fclose(held);
    cr_expect_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), 0, "%s", msg);
    cr_expect(!file_has(log, "{\"event\":\"start\"}\n"), "--overwrite 1 replaces a log nobody holds");
}

// A log that cannot be written stops the run, non-zero, with the reason (issue 34: --log
// /dev/full said "done"); the checkpoint keeps what it had.
Test(train, a_log_that_cannot_be_written_stops_the_run) {
    struct stat st;
    if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode)) cr_skip_test("no /dev/full here");
    char msg[512] = "", path[160];
    train_opts o = small_opts("full");
    o.steps = 6, o.stop_at = 2;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), 0, "%s", msg);
    snprintf(path, sizeof path, "%s/full/ckpt.bin", dir);
    train_opts cli;
    train_opts_default(&cli);
    snprintf(cli.log, sizeof cli.log, "/dev/full");
    bool *given = none_given();
    size_t n;
    const train_opt_desc *t = train_opt_table(&n);
    for (size_t i = 0; i < n; i++) given[i] = !strcmp(t[i].name, "log");
    cr_expect_eq(train_run(&cli, path, given, NULL, msg, sizeof msg), TRAIN_EFAILED, "a run without its log went on");
    cr_expect(strstr(msg, "--log '/dev/full': write failed at step 2: No space left on device"), "%s", msg);
    cr_expect_eq(ckpt_step(path), 2);
}

// A disk that fills mid-run (here a file size limit: writes past it fail with EFBIG, as ENOSPC
// would): the run stops at the step whose line did not fit, exit status TRAIN_EFAILED.
Test(train, a_log_that_fills_mid_run_stops_the_run) {
    char msg[512] = "", log[160];
    snprintf(log, sizeof log, "%s/cut.jsonl", dir);
    train_opts o = small_opts(NULL);
    o.steps = 40;
    snprintf(o.log, sizeof o.log, "%s", log);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit was, lim;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &was), 0);
    lim = was, lim.rlim_cur = 2000;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    const int rc = train_run(&o, NULL, NULL, NULL, msg, sizeof msg);
    setrlimit(RLIMIT_FSIZE, &was);
    cr_expect_eq(rc, TRAIN_EFAILED, "the run said done with its log cut: %s", msg);
    long step = -1;
    cr_expect(sscanf(strstr(msg, "write failed at step ") ? strstr(msg, "write failed at step ") : "", "write failed at "
                     "step %ld", &step) == 1 && step > 0 && step < 40, "%s", msg);
    cr_expect(strstr(msg, "File too large"), "%s", msg);
    cr_expect_eq(file_size(log), 2000, "the log holds what fitted");
}

// A resume with no step left says so (cmd_train: "done already") and writes nothing: the log
// gets no start and end events (issue 34), the checkpoint stays as it was.
Test(train, a_resume_with_nothing_to_do_writes_nothing) {
    char msg[512] = "", path[160], log[160];
    train_opts o = small_opts("idle");
    o.steps = 2;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), 0, "%s", msg);
    snprintf(path, sizeof path, "%s/idle/ckpt.bin", dir);
    snprintf(log, sizeof log, "%s/idle/log.jsonl", dir);
    const long n = file_size(log);
    struct stat before, after;
    cr_assert_eq(stat(path, &before), 0);
    train_opts cli;
    train_opts_default(&cli);
    train_report rep = {0};
    cr_assert_eq(train_run(&cli, path, none_given(), &rep, msg, sizeof msg), 0, "%s", msg);
    cr_expect_eq(rep.steps_run, 0);
    cr_expect_eq(rep.steps_done, 2);
    cr_expect_eq(file_size(log), n, "the log of a finished run grew");
    cr_assert_eq(stat(path, &after), 0);
    cr_expect_eq(after.st_ino, before.st_ino, "the checkpoint was rewritten");
}

// lr 1e30 without a loss scaler: the loss goes non-finite within a few steps. The run stops
// with TRAIN_EFAILED and the checkpoint holds the last finite step, never NaN weights.
Test(train, divergence_stops_and_keeps_the_last_good_checkpoint) {
    char msg[512] = "", path[160], log[160];
    train_opts o = small_opts("nan");
    o.steps = 20, o.lr = 1e30f, o.lr_min = 0, o.warmup = 0, o.ckpt_every = 1;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EFAILED, "a diverged run succeeded");
    cr_assert(strstr(msg, "not finite") && strstr(msg, "stopped"), "%s", msg);
    snprintf(path, sizeof path, "%s/nan/ckpt.bin", dir);
    snprintf(log, sizeof log, "%s/nan/log.jsonl", dir);
    cr_assert(ckpt_step(path) < 20);
    float *p;
    size_t n;
    read_params(path, &p, &n);
    for (size_t i = 0; i < n; i++) cr_assert(isfinite(p[i]), "checkpoint parameter %zu is %g", i, p[i]);
    free(p);
    cr_assert(file_has(log, "\"how\":\"non-finite\""), "the log does not say why the run ended");
    // and it resumes into the same failure rather than training on
    train_opts cli;
    train_opts_default(&cli);
    cr_assert_eq(train_run(&cli, path, none_given(), NULL, msg, sizeof msg), TRAIN_EFAILED);
}

// Every step skipped (static scale 1e30 overflows fp16 gradients): the run completes but the
// log's end event says so.
Test(train, all_steps_skipped_is_said) {
    char path[160], msg[512] = "", log[160];
    snprintf(path, sizeof path, "%s/overflow2.policy", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("name overflow\nsite *.grad fp16 none rne ieee\nloss_scale static 1e30\n", f);
    fclose(f);
    train_opts o = small_opts("allskip");
    snprintf(o.policy, sizeof o.policy, "%s", path);
    o.steps = 3;
    train_report rep = {0};
    cr_assert_eq(train_run(&o, NULL, NULL, &rep, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(rep.applied, 0);
    snprintf(log, sizeof log, "%s/allskip/log.jsonl", dir);
    cr_assert(file_has(log, "\"how\":\"all-skipped\""), "the log does not say every step was skipped");
}

Test(train, threads_are_bounded) {
    char msg[512] = "";
    train_opts o = small_opts(NULL);
    o.threads = 100000;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EREFUSED);
    cr_assert(strstr(msg, "--threads"), "%s", msg);
}

// Local SGD with one process (a build with MPI, no launcher): the average of one rank is its
// own weights, so the run is the plain one bitwise; DiLoCo with outer lr 1 and no momentum sets
// the weights to anchor - (anchor - local), within an ulp of the plain run's. Without MPI the
// options are refused (tests/test_dist.c).
// One run of the gradient-noise tests: 8 steps of 2 micro-batches under policy, recompute rc,
// --grad-noise-every `every`, its checkpoint and log in dir/sub.
static void noise_run(const char *sub, const char *policy, const char *rc, long every, float *losses) {
    char msg[512] = "";
    train_opts o = small_opts(sub);
    snprintf(o.policy, sizeof o.policy, "%s", policy);
    snprintf(o.recompute, sizeof o.recompute, "%s", rc);
    o.steps = 8, o.accum = 2, o.grad_noise_every = every;
    train_report rep = {.losses = losses, .losses_cap = 8};
    cr_assert_eq(train_run(&o, NULL, NULL, &rep, msg, sizeof msg), 0, "%s %s: %s", policy, rc, msg);
}

// The number after "name": in line (NAN where absent).
static double member(const char *line, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *p = strstr(line, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

// line without its grad_noise member and its timings (elapsed_s, tokens_per_s), in place.
static void strip_noise(char *line) {
    char *p = strstr(line, ",\"grad_noise\":{");
    if (p) {
        const char *e = strchr(p, '}') + 1;
        memmove(p, e, strlen(e) + 1);
    }
    for (const char *k = "\"elapsed_s\":"; k; k = strcmp(k, "\"elapsed_s\":") ? NULL : "\"tokens_per_s\":") {
        char *q = strstr(line, k);
        if (!q) continue;
        q += strlen(k);
        const char *e = q + strcspn(q, ",}");
        memmove(q, e, strlen(e) + 1);
    }
}

// The step lines of dir/sub/log.jsonl (at most 8), stripped when strip; returns their count.
static int step_lines(const char *sub, char **lines, bool strip) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s/log.jsonl", dir, sub);
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0)
        if (!strncmp(line, "{\"step\":", 8) && n < 8) {
            lines[n] = strdup(line);
            if (strip) strip_noise(lines[n]);
            n++;
        }
    free(line);
    fclose(f);
    return n;
}

// --grad-noise-every 2: the second backward without casts changes nothing of the run (losses,
// the step lines with their telemetry, the final weights, all bitwise), under a block-scaled
// and a delayed-scaling policy, with and without recompute; every second step's line carries
// grad_noise with a positive noise.
Test(train, grad_noise_changes_nothing) {
    const char *policies[] = {"nvfp4", "fp8-delayed"}, *rcs[] = {"none", "block"};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            float with[8], without[8];
            char sw[32], so[32];
            snprintf(sw, sizeof sw, "n%d%d", i, j), snprintf(so, sizeof so, "p%d%d", i, j);
            noise_run(sw, policies[i], rcs[j], 2, with);
            noise_run(so, policies[i], rcs[j], 0, without);
            for (int s = 0; s < 8; s++)
                cr_assert(tu_samef(with[s], without[s]), "%s %s step %d: loss %a with, %a without", policies[i],
                          rcs[j], s + 1, with[s], without[s]);
            char *lw[8], *lo[8], *raw[8];
            cr_assert_eq(step_lines(sw, lw, true), 8);
            cr_assert_eq(step_lines(so, lo, true), 8);
            cr_assert_eq(step_lines(sw, raw, false), 8);
            for (int s = 0; s < 8; s++) {
                cr_assert_str_eq(lw[s], lo[s], "%s %s step %d", policies[i], rcs[j], s + 1);
                const double noise = member(raw[s], "noise_norm"), exact = member(raw[s], "exact_norm");
                if (s % 2 == 1)
                    cr_assert(noise > 0 && isfinite(noise) && exact > 0 && isfinite(exact),
                              "%s %s step %d: noise %g, exact %g", policies[i], rcs[j], s + 1, noise, exact);
                else
                    cr_assert(isnan(noise) && isnan(exact), "step %d measured", s + 1);
                free(lw[s]), free(lo[s]), free(raw[s]);
            }
            assert_same_params(sw, so, policies[i]);
        }
}

// Under fp32 the policy's backward is the exact one: the noise is exactly 0 and the exact
// gradient's norm is the step's grad_norm, at every step (the backward run twice gives the
// same bits, recomputed blocks included).
Test(train, grad_noise_of_fp32_is_zero) {
    const char *rcs[] = {"none", "block"};
    for (int j = 0; j < 2; j++) {
        float losses[8];
        char sub[16];
        snprintf(sub, sizeof sub, "z%d", j);
        noise_run(sub, "fp32", rcs[j], 1, losses);
        char *raw[8];
        cr_assert_eq(step_lines(sub, raw, false), 8);
        for (int s = 0; s < 8; s++) {
            cr_assert(member(raw[s], "noise_norm") == 0, "%s step %d: %s", rcs[j], s + 1, raw[s]);
            cr_assert(member(raw[s], "exact_norm") == member(raw[s], "grad_norm"), "%s step %d", rcs[j], s + 1);
            free(raw[s]);
        }
    }
}

// Gradient checkpointing changes no bit of a run, delayed scaling included: the recompute of a
// block starts from the amax histories its counted forward found and pushes the same amaxes,
// so each cast gets that forward's scale (before, it read the histories after the forward's
// own pushes: k's weight cast with q's amax in the history twice over).
Test(train, recompute_is_bitwise_under_every_scaling) {
    const char *policies[] = {"fp8-delayed", "fp8-current", "nvfp4", "fp16-amp"};
    for (int i = 0; i < 4; i++) {
        float none[8], block[8];
        char sn[16], sb[16];
        snprintf(sn, sizeof sn, "rn%d", i), snprintf(sb, sizeof sb, "rb%d", i);
        noise_run(sn, policies[i], "none", 0, none);
        noise_run(sb, policies[i], "block", 0, block);
        for (int s = 0; s < 8; s++)
            cr_assert(tu_samef(none[s], block[s]), "%s step %d: loss %a stored, %a recomputed", policies[i], s + 1,
                      none[s], block[s]);
        char *ln[8], *lb[8];
        cr_assert_eq(step_lines(sn, ln, true), 8);
        cr_assert_eq(step_lines(sb, lb, true), 8);
        for (int s = 0; s < 8; s++) {
            cr_assert_str_eq(ln[s], lb[s], "%s step %d: the telemetry differs", policies[i], s + 1);
            free(ln[s]), free(lb[s]);
        }
        assert_same_params(sn, sb, policies[i]);
    }
}

// Resumes dir/sub/ckpt.bin to step 16 under --switch-policy sw ("": none) into losses.
static void resume_to_16(const char *sub, const char *sw, float *losses) {
    char msg[512] = "", path[160];
    snprintf(path, sizeof path, "%s/%s/ckpt.bin", dir, sub);
    train_opts run_only = small_opts(sub);  // only the run_only fields are read on resume
    snprintf(run_only.switch_policy, sizeof run_only.switch_policy, "%s", sw);
    train_report rep = {.losses = losses, .losses_cap = 16};
    cr_assert_eq(train_run(&run_only, path, NULL, &rep, msg, sizeof msg), 0, "%s", msg);
    cr_assert_eq(rep.steps_done, 16);
}

// --switch-policy: a resumed run continues under another policy with its weights, moments, data
// position and schedule. Switching to the same stateless policy is the plain resume, bitwise;
// to another, the steps after the switch differ, the log says so (a switch event, the start
// line's policy), and a later resume keeps the new policy. A fresh run refuses the option.
Test(train, switch_policy_continues_the_run) {
    const char *sub[] = {"plain", "same", "other"};
    for (int i = 0; i < 3; i++) {
        train_opts o = small_opts(sub[i]);
        snprintf(o.policy, sizeof o.policy, "nvfp4");
        o.steps = 16, o.stop_at = 8;
        char msg[512] = "";
        float l[16];
        train_report rep = {.losses = l, .losses_cap = 16};
        cr_assert_eq(train_run(&o, NULL, NULL, &rep, msg, sizeof msg), 0, "%s", msg);
    }
    float plain[16] = {0}, same[16] = {0}, other[16] = {0};
    resume_to_16("plain", "", plain);
    resume_to_16("same", "nvfp4", same);
    resume_to_16("other", "bf16-amp", other);
    bool differs = false;
    for (int s = 8; s < 16; s++) {
        cr_assert(tu_samef(plain[s], same[s]), "step %d: %a plain, %a switched to the same policy", s + 1, plain[s],
                  same[s]);
        differs |= !tu_samef(plain[s], other[s]);
    }
    cr_assert(differs, "bf16-amp's steps equal nvfp4's");
    char path[160];
    snprintf(path, sizeof path, "%s/other/log.jsonl", dir);
    cr_assert(file_has(path, "{\"event\":\"switch\",\"step\":8,\"from\":\"nvfp4\",\"to\":\"bf16-amp\"}"));
    cr_assert(file_has(path, "\"policy\":\"bf16-amp\""));
    snprintf(path, sizeof path, "%s/plain/log.jsonl", dir);
    cr_assert(!file_has(path, "\"switch\""));
    assert_same_params("plain", "same", "nvfp4 switched to nvfp4");
    // the checkpoint written after the switch holds the new policy
    ckpt_file f;
    char msg[512];
    snprintf(path, sizeof path, "%s/other/ckpt.bin", dir);
    cr_assert_eq(ckpt_read(&f, path, msg, sizeof msg), CKPT_OK, "%s", msg);
    const ckpt_section *ps = ckpt_find(&f, "policy");
    cr_assert(ps && memmem(ps->data, ps->nbytes, "bf16", 4), "the checkpoint's policy");
    ckpt_file_free(&f);
    train_opts o = small_opts("fresh");
    snprintf(o.switch_policy, sizeof o.switch_policy, "fp32");
    cr_assert_neq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), 0);
    cr_assert(strstr(msg, "only with --resume"), "%s", msg);
}

// mxfp4 measured every 4 steps, to 16 steps, with --stall-switch bf16-amp at `ratio` (sw: NULL
// none) and --stop-at `stop`; losses from step 1.
static void stall_run(const char *sub, const char *sw, float ratio, long stop, float *losses) {
    char msg[512] = "";
    train_opts o = small_opts(sub);
    snprintf(o.policy, sizeof o.policy, "mxfp4");
    if (sw) snprintf(o.stall_switch, sizeof o.stall_switch, "%s", sw);
    o.stall_ratio = ratio, o.steps = 16, o.grad_noise_every = 4, o.stop_at = stop;
    train_report rep = {.losses = losses, .losses_cap = 16};
    cr_assert_eq(train_run(&o, NULL, NULL, &rep, msg, sizeof msg), 0, "%s: %s", sub, msg);
    if (!stop) return;
    o.stop_at = 0;
    snprintf(o.switch_policy, sizeof o.switch_policy, "bf16-amp");
    char path[160];
    snprintf(path, sizeof path, "%s/%s/ckpt.bin", dir, sub);
    cr_assert_eq(train_run(&o, path, NULL, &rep, msg, sizeof msg), 0, "%s resumed: %s", sub, msg);
}

// --stall-switch (issue 38 item 5, Chmiel et al.'s trigger): the run whose measured ratio falls
// under the threshold (here at its first measurement, step 4) checkpoints there and continues
// under the new policy, bit for bit the run stopped at that step and resumed with
// --switch-policy; it switches once (the later measurements, also under the threshold, change
// nothing); a threshold never reached leaves the run the one without the option; the options
// it needs are checked before training.
Test(train, stall_switch_is_the_run_stopped_and_switched_there) {
    float trig[16] = {0}, sched[16] = {0}, never[16] = {0}, plain[16] = {0};
    stall_run("stall_trig", "bf16-amp", 1e6f, 0, trig);
    stall_run("stall_sched", NULL, 1.0f, 4, sched);
    stall_run("stall_never", "bf16-amp", 1e-6f, 0, never);
    stall_run("stall_plain", NULL, 1.0f, 0, plain);
    bool differs = false;
    for (int s = 0; s < 16; s++) {
        cr_assert(tu_samef(trig[s], sched[s]), "step %d: %a stalled, %a stopped and switched", s + 1, trig[s], sched[s]);
        cr_assert(tu_samef(never[s], plain[s]), "step %d: %a never stalled, %a without the option", s + 1, never[s],
                  plain[s]);
        differs |= !tu_samef(trig[s], plain[s]);
    }
    cr_assert(differs, "the switched run is the plain one");
    assert_same_params("stall_trig", "stall_sched", "stalled against stopped and switched");
    assert_same_params("stall_never", "stall_plain", "never stalled against no option");
    char path[160];
    snprintf(path, sizeof path, "%s/stall_trig/log.jsonl", dir);
    cr_assert(file_has(path, "{\"event\":\"stall\",\"step\":4,"));
    cr_assert(file_has(path, "\"threshold\":1000000,\"switch_to\":\"bf16-amp\"}"));
    cr_assert(file_has(path, "{\"event\":\"end\",\"how\":\"stalled\",\"step\":4,"));
    cr_assert(file_has(path, "{\"event\":\"switch\",\"step\":4,\"from\":\"mxfp4\",\"to\":\"bf16-amp\"}"));
    cr_assert(file_has(path, "{\"event\":\"end\",\"how\":\"done\",\"step\":16,"));
    cr_assert(!file_has(path, "{\"event\":\"stall\",\"step\":8,"), "it switched twice");
    snprintf(path, sizeof path, "%s/stall_never/log.jsonl", dir);
    cr_assert(!file_has(path, "\"stall\""));
    // refused up front: no measurement, no checkpoint to continue from, a policy that is none
    const char *want[] = {"needs --grad-noise-every", "needs --ckpt-dir", "--stall-switch: "};
    for (int i = 0; i < 3; i++) {
        train_opts o = small_opts(i == 1 ? NULL : "stall_bad");
        snprintf(o.stall_switch, sizeof o.stall_switch, "%s", i == 2 ? "no-such-policy" : "bf16-amp");
        o.grad_noise_every = i == 0 ? 0 : 4;
        char msg[512] = "";
        cr_assert_neq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), 0, "case %d", i);
        cr_assert(strstr(msg, want[i]), "case %d: %s", i, msg);
    }
}

Test(train, local_sgd_with_one_process_is_the_plain_run) {
    if (!dist_have_mpi()) cr_skip_test("this build has no MPI");
    char msg[512] = "";
    float plain[8], local[8], outer[8];
    train_opts o = small_opts(NULL);
    o.steps = 8, o.accum = 2;
    train_report rp = {.losses = plain, .losses_cap = 8};
    cr_assert_eq(train_run(&o, NULL, NULL, &rp, msg, sizeof msg), 0, "%s", msg);
    o.local_sgd = 3;
    train_report rl = {.losses = local, .losses_cap = 8};
    cr_assert_eq(train_run(&o, NULL, NULL, &rl, msg, sizeof msg), 0, "%s", msg);
    snprintf(o.outer_opt, sizeof o.outer_opt, "nesterov");
    o.outer_lr = 1.0f, o.outer_momentum = 0.0f;
    train_report ro = {.losses = outer, .losses_cap = 8};
    cr_assert_eq(train_run(&o, NULL, NULL, &ro, msg, sizeof msg), 0, "%s", msg);
    for (int s = 0; s < 8; s++) {
        cr_assert(tu_samef(plain[s], local[s]), "step %d: %a plain, %a local SGD", s + 1, plain[s], local[s]);
        cr_assert(fabsf(plain[s] - outer[s]) <= 1e-5f * plain[s], "step %d: %g plain, %g DiLoCo", s + 1, plain[s],
                  outer[s]);
    }
    cr_assert(tu_samef(rp.final_val_loss, rl.final_val_loss));
}

// The memory a configuration needs is known before anything is allocated: the estimate equals
// what the model allocates, and a configuration that cannot fit is refused with it.
Test(train, memory_is_estimated_and_refused_up_front) {
    llama_config c;
    cr_assert_eq(llama_config_named(&c, "tiny"), LLAMA_OK);
    c.vocab_size = 14;
    for (int rc = 0; rc < 2; rc++) {
        llama_model m;
        cr_assert_eq(llama_init(&m, &c, rc ? LLAMA_RECOMPUTE_BLOCK : LLAMA_RECOMPUTE_NONE, NULL, 0), LLAMA_OK);
        cr_assert_eq(llama_reserve(&m, 3, 8), LLAMA_OK);
        const double rope = 2.0 * c.seq_len * (c.dim / c.n_heads / 2) * 4;
        const double expect = 2.0 * 4 * m.n_params + rope + (double)llama_acts_bytes(&m);
        cr_assert_eq(llama_memory_bytes(&c, m.recompute, 3, 8, 0), expect, "recompute %d", rc);
        llama_free(&m);
    }
    char msg[512] = "";
    train_opts o = small_opts(NULL);
    o.dim = 8192, o.n_layers = 64;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EREFUSED);
    cr_assert(strstr(msg, "GB to train"), "%s", msg);
    // --grad-noise-every's two more gradient copies (accumulating) are in the estimate: about
    // 8 bytes x 52 G parameters = 412 GB more for this model.
    const char *at = strstr(msg, "needs about ");
    cr_assert(at, "%s", msg);
    const double plain = strtod(at + strlen("needs about "), NULL);
    o.grad_noise_every = 5, o.accum = 2;
    cr_assert_eq(train_run(&o, NULL, NULL, NULL, msg, sizeof msg), TRAIN_EREFUSED);
    cr_assert((at = strstr(msg, "needs about ")), "%s", msg);
    const double noise = strtod(at + strlen("needs about "), NULL);
    cr_assert_gt(noise, plain + 300.0, "%.1f GB with --grad-noise-every, %.1f without", noise, plain);
}
