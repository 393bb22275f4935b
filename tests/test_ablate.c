// test_ablate.c: the ablation runner (experiments/ablate.h) with a stand-in for `fplab train`:
// a shell script that records its arguments and writes a log as the trainer does, fails for
// policy "bad" (exit 3, a message on stderr), stops early for policy "short" and appends a
// malformed line for policy "garbled" (both exit 0). Checked:
// the child's command line, the run directories, stderr captured, failed runs marked and
// reported while the others go on, jobs in parallel, a second invocation skipping the finished
// runs (resume), settings that do not match an earlier ablate.json refused, one ablation per
// directory (the lock), option validation, argument splitting and quoting. The real trainer
// (and check_train) is exercised by tests/cli_test.sh.
#include <criterion/criterion.h>

#include "util/fileio.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "experiments/ablate.h"
#include "experiments/report.h"

static char dir[64], exe[128], out[128], data[128];

static const char fake[] =
    "#!/bin/sh\n"
    "# a stand-in for 'fplab train': --policy P --seed S --ckpt-dir D --steps N\n"
    "echo \"$@\" >&2\n"
    "while [ $# -gt 0 ]; do\n"
    "  case $1 in\n"
    "    --policy) P=$2; shift;; --seed) S=$2; shift;; --ckpt-dir) D=$2; shift;; --steps) N=$2; shift;;\n"
    "  esac; shift\n"
    "done\n"
    "echo \"$P $S\" >>\"$D/../../../calls\"\n"
    "if [ \"$P\" = bad ]; then echo 'fplab: train: bad policy here' >&2; exit 3; fi\n"
    "echo \"{\\\"event\\\":\\\"start\\\",\\\"policy\\\":\\\"$P\\\",\\\"seed\\\":$S,\\\"steps\\\":$N}\" >\"$D/log.jsonl\"\n"
    "[ \"$P\" = short ] && N=$((N / 2))\n"
    "i=1; while [ $i -le $N ]; do\n"
    "  v=''; [ $i -eq $N ] && v=',\"val_loss\":2.5'\n"
    "  echo \"{\\\"step\\\":$i,\\\"loss\\\":3,\\\"tokens_per_s\\\":100$v}\" >>\"$D/log.jsonl\"; i=$((i + 1))\n"
    "done\n"
    "[ \"$P\" = garbled ] && echo '{\"step\":7,\"loss\":}' >>\"$D/log.jsonl\"\n"
    "exit 0\n";

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/fplab_ablate_XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp");
    snprintf(exe, sizeof exe, "%s/fake-train", dir);
    snprintf(out, sizeof out, "%s/abl", dir);
    snprintf(data, sizeof data, "%s/corpus.txt", dir);
    FILE *f = fopen(exe, "w");
    cr_assert(f);
    fputs(fake, f);
    fclose(f);
    cr_assert_eq(chmod(exe, 0755), 0);
    f = fopen(data, "w");
    fputs("some text\n", f);
    fclose(f);
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(ablate, .init = setup, .fini = teardown);

static const char *const argv0[] = {"fplab", "ablate", "--presets", "a,bad,short", "--extra", "--batch 4"};
static const char *const extra0[] = {"--batch", "4"};

static ablate_opts opts(const char *const *presets, int n) {
    return (ablate_opts){.exe = exe, .presets = presets, .npresets = n, .nseeds = 2, .seed_base = 1,
                         .model = "tiny", .data = data, .steps = 6, .out = out, .jobs = 1, .eval_every = 3,
                         .threads = 1, .telemetry = "sites", .extra = extra0, .nextra = 2, .argv = argv0,
                         .argc = 6};
}

static char *slurp(const char *path) {
    static char buf[1 << 16];
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
    fclose(f);
    return buf;
}

static int count_lines(const char *path) {
    const char *s = slurp(path);
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

Test(ablate, runs_the_grid_marks_failures_and_resumes) {
    static const char *const presets[] = {"a", "bad", "short"};
    ablate_opts o = opts(presets, 3);
    o.jobs = 2;
    char msg[1024] = "", p[512];
    FILE *prog = tmpfile();
    o.progress = prog;
    ablate_result r;
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    cr_assert_eq(r.total, 6);
    cr_assert_eq(r.done, 2, "a x 2 seeds");
    cr_assert_eq(r.failed, 4, "bad (exit 3) and short (log ends early) x 2 seeds");
    cr_assert_eq(r.skipped, 0);
    snprintf(p, sizeof p, "%s/calls", out);
    cr_assert_eq(count_lines(p), 6);

    // the child's command line (echoed to its stderr, which is the run's output: train.out once
    // it completed, train.err while it runs and when it failed; issue 34: a completed run's
    // normal output was left as an "err" file)
    snprintf(p, sizeof p, "%s/runs/a/seed-2/train.out", out);
    char want[512];
    snprintf(want, sizeof want, "train --model tiny --data %s --steps 6 --policy a --seed 2 --ckpt-dir %s/runs/a/seed-2 "
             "--progress 0 --overwrite 1 --telemetry sites --eval-every 3 --threads 1 --reproducible 1 "
             "--batch 4\n", data, out);
    const char *err = slurp(p);
    cr_assert(err && !strcmp(err, want), "train.out:\n%s\nexpected:\n%s", err, want);
    snprintf(p, sizeof p, "%s/runs/a/seed-2/train.err", out);
    cr_assert(access(p, F_OK) != 0, "a completed run kept a train.err");
    snprintf(p, sizeof p, "%s/runs/bad/seed-1/train.err", out);
    err = slurp(p);
    cr_assert(err && strstr(err, "fplab: train: bad policy here\n"), "a failed run's train.err: %s", err);
    snprintf(p, sizeof p, "%s/runs/bad/seed-1/train.out", out);
    cr_assert(access(p, F_OK) != 0, "a failed run has a train.out");
    snprintf(p, sizeof p, "%s/.lock", out);
    cr_assert(access(p, F_OK) != 0, "the ablation left its lock file");
    snprintf(p, sizeof p, "%s/runs/a/seed-1/FAILED", out);
    cr_assert(access(p, F_OK) != 0, "no marker on success");
    snprintf(p, sizeof p, "%s/runs/bad/seed-1/FAILED", out);
    cr_assert_str_eq(slurp(p), "exit status 3\n");
    snprintf(p, sizeof p, "%s/runs/short/seed-2/FAILED", out);
    cr_assert_str_eq(slurp(p), "exit status 0, but its log ends at step 3 of 6\n");
    snprintf(p, sizeof p, "%s/ablate.json", out);
    const char *man = slurp(p);
    cr_assert(man && strstr(man, "\"command\":\"fplab ablate --presets a,bad,short --extra '--batch 4'\""), "%s", man);
    cr_assert(strstr(man, "\"seeds\":[1,2]") && strstr(man, "\"steps\":6") && strstr(man, "\"extra\":[\"--batch\",\"4\"]"));

    // progress: one line per run, failures with the end of their stderr
    rewind(prog);
    char all[8192];
    all[fread(all, 1, sizeof all - 1, prog)] = 0;
    fclose(prog);
    cr_assert(strstr(all, "3 presets x 2 seeds = 6 runs (6 to run, 0 done), 2 at a time"), "%s", all);
    cr_assert(strstr(all, "] a seed 1: val loss 2.5000, "), "%s", all);
    cr_assert(strstr(all, "] bad seed 2: FAILED (exit status 3)"), "%s", all);
    cr_assert(strstr(all, "    | fplab: train: bad policy here\n"), "%s", all);
    cr_assert(strstr(all, "[6/6] "), "%s", all);

    // the report of it: 2 completed, 4 failed
    report_opts ro = {.dir = out};
    report_result rr;
    cr_assert_eq(report_write(&ro, &rr, msg, sizeof msg), XP_OK, "%s", msg);
    cr_assert_eq(rr.ok, 2);
    cr_assert_eq(rr.failed, 4);

    // again: the finished runs are skipped, the failed ones tried again (one seed more now)
    o.nseeds = 3;
    o.progress = NULL;
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    cr_assert_eq(r.skipped, 2);
    cr_assert_eq(r.done, 1, "a seed 3");
    cr_assert_eq(r.failed, 6);
    snprintf(p, sizeof p, "%s/calls", out);
    cr_assert_eq(count_lines(p), 6 + 7);
}

Test(ablate, exit_0_with_an_unreadable_log_is_a_failure) {
    static const char *const presets[] = {"garbled"};
    ablate_opts o = opts(presets, 1);
    o.nseeds = 1;
    char msg[1024], p[512];
    ablate_result r;
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    cr_assert_eq(r.failed, 1);
    snprintf(p, sizeof p, "%s/runs/garbled/seed-1/FAILED", out);
    const char *why = slurp(p);
    cr_assert(why && strstr(why, "exit status 0, but its log cannot be read: ") && strstr(why, "log.jsonl:8: column 18"),
              "%s", why);
}

Test(ablate, refuses_other_settings_in_the_same_directory) {
    static const char *const presets[] = {"a"};
    ablate_opts o = opts(presets, 1);
    char msg[1024];
    ablate_result r;
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    o.steps = 8;
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "made with --steps 6 (now 8)"), "%s", msg);
    o.steps = 6;
    o.nextra = 0;
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "--extra [\"--batch\",\"4\"] (now [])"), "%s", msg);
    o.nextra = 2;
    o.model = "15m";
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "--model tiny (now 15m)"), "%s", msg);
    o.model = "tiny";
    o.jobs = 3, o.threads = 2, o.nseeds = 1;  // these may change
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    cr_assert_eq(r.skipped, 1);
}

Test(ablate, one_ablation_per_directory) {
    static const char *const presets[] = {"a"};
    ablate_opts o = opts(presets, 1);
    char msg[1024];
    cr_assert_eq(fio_mkdir_p(out, msg, sizeof msg), FIO_OK, "%s", msg);
    const int fd = ablate_lock(out, msg, sizeof msg);  // as a running ablation holds it
    cr_assert(fd >= 0, "%s", msg);
    ablate_result r;
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "is in use by another 'fplab ablate' or a run it started (pid "), "%s", msg);
    close(fd);
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    cr_assert_eq(r.done, 2);
    char p[512];
    snprintf(p, sizeof p, "%s/.lock", out);
    cr_assert(access(p, F_OK) != 0, "the ablation left its lock file");
    o.nshards = 2, o.shard = 1;  // a shard's lock lives in a directory of its own, which goes too
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    snprintf(p, sizeof p, "%s/.shard-1-of-2", out);
    cr_assert(access(p, F_OK) != 0, "the shard left its lock directory");
}

Test(ablate, dry_run_writes_nothing) {
    static const char *const presets[] = {"a", "b"};
    ablate_opts o = opts(presets, 2);
    o.dry_run = true;
    char msg[512], all[4096];
    FILE *prog = tmpfile();
    o.progress = prog;
    ablate_result r;
    cr_assert_eq(ablate_run(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    rewind(prog);
    all[fread(all, 1, sizeof all - 1, prog)] = 0;
    fclose(prog);
    cr_assert(access(out, F_OK) != 0, "no directory");
    cr_assert(strstr(all, "--policy b --seed 2"), "%s", all);
}

Test(ablate, validation) {
    static const char *const ok[] = {"a"}, *const dup[] = {"x.policy", "dir/x"}, *const weird[] = {"a b"};
    char msg[512];
    ablate_opts o = opts(ok, 1);
    cr_assert_eq(ablate_validate(&o, msg, sizeof msg), XP_OK, "%s", msg);
    o = opts(dup, 2);
    cr_assert_eq(ablate_validate(&o, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "share the run directory 'x'"), "%s", msg);
    o = opts(weird, 1);
    cr_assert_eq(ablate_validate(&o, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "cannot name a run directory"), "%s", msg);
    static const char *const bad_extra[][2] = {{"--seed", "3"}, {"--policy=x", ""}, {"--ckpt", "d"}, {"--eval-every", "5"}};
    for (int i = 0; i < 4; i++) {
        o = opts(ok, 1);
        o.extra = bad_extra[i];
        cr_assert_eq(ablate_validate(&o, msg, sizeof msg), XP_EINVAL, "%s", bad_extra[i][0]);
        cr_assert(strstr(msg, "is set by ablate"), "%s", msg);
    }
    o = opts(ok, 1);
    o.nseeds = 0;
    cr_assert_eq(ablate_validate(&o, msg, sizeof msg), XP_EINVAL);
    o = opts(ok, 1);
    o.jobs = 0;
    cr_assert_eq(ablate_validate(&o, msg, sizeof msg), XP_EINVAL);
}

Test(ablate, split_and_quote) {
    char *v[8], *store, msg[128];
    int n = ablate_split_args("  --batch 8 --lr '3e-4' --data \"a b.txt\"\t--x=''", v, 8, &store, msg, sizeof msg);
    cr_assert_eq(n, 7, "%s", msg);
    cr_assert_str_eq(v[1], "8");
    cr_assert_str_eq(v[3], "3e-4");
    cr_assert_str_eq(v[5], "a b.txt");
    cr_assert_str_eq(v[6], "--x=");
    free(store);
    cr_assert_eq(ablate_split_args("--a 'b", v, 8, &store, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "unclosed"), "%s", msg);
    free(store);
    cr_assert_eq(ablate_split_args("1 2 3", v, 2, &store, msg, sizeof msg), -1);
    free(store);
    const char *a[] = {"fplab", "ablate", "--extra", "--lr 1e-3", "it's", ""};
    char buf[256];
    ablate_quote_command(buf, sizeof buf, a, 6);
    cr_assert_str_eq(buf, "fplab ablate --extra '--lr 1e-3' 'it'\\''s' ''");
}
