// runlog.h: reads the JSON-lines log of one `fplab train` run (DIR/log.jsonl) into memory.
// The schema (written by trainer/ and autocast/):
//   {"event":"start","policy":P,"seed":S,"model":M,"steps":N,"tokens_per_step":K,"resumed_from":R}
//   {"step":N,"loss":F,"lr":F,"grad_norm":F,"tokens_per_s":F,"elapsed_s":F,"loss_scale":F,
//    "skipped":0|1,"val_loss":F (evaluation steps only),
//    "sites":{"attn.qkv.in":{"n":C,"overflow":F,"underflow":F,"subnormal":F,"nan":F,"amax":F,
//             "scale":F}, ..., "L0.attn.qkv.in":{...} (--telemetry layers)},
//    "update":{"swamped":F,"changed":F} (low-precision weights only),
//    "grad_noise":{"exact_norm":F,"noise_norm":F} (train --grad-noise-every steps only)}
// Numbers may be the strings "nan", "inf", "-inf". Members this reader does not know are
// skipped, lines with another "event" are ignored, so the schema can grow.
// A resumed run appends to its log: a start line with resumed_from R drops the steps after R
// that the interrupted invocation had logged (they are redone), so the result holds each step
// once, as the final trajectory has it. A last line without its newline that does not parse
// is a write cut short by a crash: it is dropped and counted in `truncated`. So is the fragment
// at the start of a line that does not parse but ends in a whole start line: the write a kill
// cut short, with the resumed run's start line appended right after it. And so is a whole line
// that does not parse when the next line is a resumed run's start line: the trainer ends a
// cut-short last line (a kill, a full disk) with a newline before it appends.
// The planned steps are the last start line's: a resume may extend the run (--resume --steps 400
// after 200 steps), and the target that stands is the one the last invocation worked toward.
// Memory follows what the log holds (one record per logged step, one per site entry, one name
// per distinct site), never a step number. Stated limits, checked before anything grows: a site
// name is at most RUNLOG_SITE_NAME - 1 bytes and a log names at most RUNLOG_MAX_SITES distinct
// sites (past either the log is malformed, with file and line). Site names are found by a hash.
// Counts are read as numbers: "steps", "tokens_per_step" outside [0, 1e15) or not integers
// (1e300, "inf", "nan", -5, 2.5) are unknown (-1), never converted out of range; a
// "resumed_from" beyond every step logged drops nothing.
// Constraints: library level (status + message naming file and line, never exits); the
// parser is json.h's minimal reader.
#ifndef FPLAB_RUNLOG_H
#define FPLAB_RUNLOG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { RUNLOG_OK = 0, RUNLOG_EIO = 1, RUNLOG_EFORMAT = 2, RUNLOG_ENOMEM = 3 };
enum { RUNLOG_SITE_NAME = 64, RUNLOG_MAX_SITES = 1 << 20 };

// One cast site's telemetry of one step. Fractions are of the `n` values cast at the site;
// NaN where the log had "nan" or lacked the member.
typedef struct {
    double n, overflow, underflow, subnormal, nan, amax, scale;
} runlog_tel;

typedef struct {
    int site;  // index into runlog.sites
    runlog_tel t;
} runlog_entry;

typedef struct {
    long step;  // 1-based optimizer step
    double loss, lr, grad_norm, tokens_per_s, elapsed_s;
    double loss_scale;      // 1 when the log has none (no loss scaling)
    double val_loss;        // NaN on steps without evaluation (and "nan" on a diverged one)
    bool has_val;           // the step was an evaluation step (val_loss was logged)
    int skipped;            // 1: the optimizer step was skipped (inf/NaN gradients)
    bool has_update;
    double swamped, changed;  // "update" fractions (NaN when absent)
    double exact_norm, noise_norm;  // "grad_noise" (NaN when absent; null: not finite)
    size_t ent0, nent;      // this step's site entries: ent[ent0 .. ent0 + nent)
} runlog_step;

typedef struct {
    // the first start line (has_start false when the log has none; older logs), but for steps
    bool has_start;
    char policy[128], model[64];
    uint64_t seed;
    long steps;                   // the last start line that gave a valid count; -1 when unknown
    long tokens_per_step;         // -1 when unknown
    int resumes;                  // start lines with resumed_from > 0
    bool has_val0;                // a {"event":"val","at_step":0,...} line: the initial weights'
    double val0;                  // validation loss (NaN: none)
    size_t truncated;             // cut-short writes dropped (see above)
    runlog_step *step;            // in order of step, each step once
    size_t n, cap;
    runlog_entry *ent;
    size_t nent, ent_cap;
    char (*sites)[RUNLOG_SITE_NAME];  // site names in order of first appearance
    int nsites, sites_cap;
    int *site_hash;               // open addressing: site index + 1, 0 empty (hash_cap a power of 2)
    int hash_cap;
} runlog;

// Reads the log at path. layers: also keep the per-layer site keys ("L0.attn.qkv.in");
// otherwise they are skipped (they are many, and the report uses the model-level sums).
// On error returns RUNLOG_EIO (cannot open/read) or RUNLOG_EFORMAT with msg
// "PATH:LINE: what was wrong (column C)"; *l is then empty (runlog_free is still safe).
int runlog_read(runlog *l, const char *path, bool layers, char *msg, size_t msg_len);
// The same from an open stream, read to its end (name only names it in messages).
int runlog_read_stream(runlog *l, FILE *f, const char *name, bool layers, char *msg, size_t msg_len);
void runlog_free(runlog *l);

// The index of site `name` in l->sites, or -1.
int runlog_site_index(const runlog *l, const char *name);
// Step i's telemetry of site index `site`, or NULL if that step did not report the site.
const runlog_tel *runlog_tel_of(const runlog *l, size_t i, int site);

#endif
