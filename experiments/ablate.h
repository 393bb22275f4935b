// ablate.h: runs an ablation grid, policies x seeds, each run a child process
// `EXE train --policy P --seed S --ckpt-dir OUT/runs/P/seed-S --progress 0 --telemetry T ...`,
// one at a time or `jobs` at a time, and records the command in OUT/ablate.json.
// Layout of OUT (what report.h reads):
//   ablate.json                   the command, its arguments and the grid
//   runs/P/seed-S/log.jsonl       the run's log (the trainer writes it)
//   runs/P/seed-S/ckpt.bin        its final checkpoint
//   runs/P/seed-S/train.err       the child's stderr and stdout while it runs, and if it failed;
//   runs/P/seed-S/train.out       the same, renamed so, once the run completed
//   runs/P/seed-S/FAILED          present while the last attempt failed: one line, why
//   runs/P/seed-S/ptq.jsonl       with ptq: `fplab eval --format json` of the final checkpoint
//                                 under fp32 and the ptq policies (post-training quantization)
//   runs/P/seed-S/ptq.err         that evaluation's stderr (ptq.out once it succeeded)
// Resuming: a run whose log already ends with the final step is skipped, so running the same
// command again after an interruption continues where it stopped. A run that did not finish is
// started again from step 0 (the trainer rewrites its log): simple, and the result does not
// depend on where the interruption fell.
// One ablation at a time per OUT: OUT/.lock is held (flock) while it runs and while any run it
// started lives; the runs get SIGTERM if the runner dies (so an interrupted ablation leaves
// nothing writing into OUT). The runner removes the file once every run it started has ended.
// Constraints: library level: returns a status and a message, never exits; the only output is
// the progress lines written to opts.progress. Children are started with fork/execv and reaped
// with waitpid on their own pids.
#ifndef FPLAB_ABLATE_H
#define FPLAB_ABLATE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "experiments/status.h"

typedef struct {
    const char *exe;           // the program to run (NULL: /proc/self/exe, this fplab)
    const char *const *presets;  // policy names or policy files, npresets of them
    int npresets;
    int nseeds;                // seeds seed_base .. seed_base + nseeds - 1
    uint64_t seed_base;        // 1
    const char *model, *data;  // passed as --model, --data
    long steps;                // passed as --steps
    const char *out;           // the ablation directory (created)
    int jobs;                  // runs at a time (1)
    long eval_every;           // passed as --eval-every when >= 0
    int threads;               // passed as --threads when > 0
    long ckpt_every;           // passed as --ckpt-every when > 0: a run cut short (a session's end, a
                               // scheduler's time limit) then resumes from its last checkpoint
    const char *telemetry;     // passed as --telemetry ("sites")
    const char *const *extra;  // further train arguments, nextra of them, passed last
    int nextra;
    const char *const *argv;   // the command as the user typed it (for ablate.json), argc long
    int argc;
    int shard, nshards;        // run only the runs i (seed-major order) with i % nshards == shard
                               // (nshards 0 or 1: all); shards may run at once in the same OUT
                               // (one lock per shard) and `fplab report OUT` merges them
    bool dry_run;              // print the child commands, run nothing, write nothing
    bool check_train;          // validate also does what the child `fplab train` would: sets
                               // model, data, steps, ... and the extra options through the
                               // trainer's option table, validates them, and loads every preset
                               // (ac_policy_load), so a typo fails before any run
    FILE *progress;            // progress lines (NULL: none)
    const char *ptq;           // NULL or "": none; else comma-separated inference policies: every
                               // complete run's checkpoint is then evaluated under fp32 and them
                               // (`EXE eval`, one run at a time after the training runs) into
                               // ptq.jsonl, again only where that file lacks one of them
} ablate_opts;

typedef struct {
    int total, done, skipped, failed;  // runs of this shard (the whole grid without one); finished now; already done; failed
    int ptq_failed;                    // post-training evaluations that failed
    double seconds;
} ablate_result;

// Checks the options (counts, names usable as directory names, extra arguments that would
// collide with the ones the runner sets, and with check_train the train options and policies).
// Returns XP_OK or XP_EINVAL with a message.
int ablate_validate(const ablate_opts *o, char *msg, size_t msg_len);

// Splits a string of extra arguments at white space; '...' and "..." group (no escapes).
// Returns the count (at most cap; more is an error: -1) with the pieces in one malloc'd
// buffer *store (free it) that out[] points into; -1 with a message on an unclosed quote.
int ablate_split_args(const char *s, char **out, int cap, char **store, char *msg, size_t msg_len);

// Runs the grid (see the top of this file). Returns XP_OK when every run is done (even if
// some failed: r->failed counts them), XP_EINVAL when OUT holds an ablation made with other
// settings (model, data, steps, eval-every, telemetry, extra arguments) or another ablation is
// running in OUT, XP_EIO when OUT or a
// run directory cannot be written or a child cannot be started.
int ablate_run(const ablate_opts *o, ablate_result *r, char *msg, size_t msg_len);

// Writes the command line argv as one shell-quoted string (as the user could paste it).
void ablate_quote_command(char *buf, size_t cap, const char *const *argv, int argc);

// Takes the exclusive lock of an ablation directory, DIR/.lock (util/fileio.h's fio_lock, the
// holder's pid inside), so that two ablations never run in one directory. Returns the descriptor
// (close it to release; the children started afterwards inherit it, so it is held until they are
// gone too), or -1 with a message ("... is in use by another 'fplab ablate' or a run it started
// (pid N ...)").
int ablate_lock(const char *dir, char *msg, size_t msg_len);

#endif
