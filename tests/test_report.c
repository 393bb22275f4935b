// test_report.c: the training-log reader (experiments/runlog.h) and the ablation report
// (experiments/report.h) on synthetic logs written here: 3 presets x 2 seeds, 10 steps,
// evaluations at steps 5 and 10, with "nan"/"inf" strings, a skipped step, loss-scale changes,
// per-site telemetry (and per-layer keys), swamped updates. Checked: the parsed numbers; the
// summary rows of report.md (means, [min, max] spreads, the gap to fp32 paired by seed,
// skipped steps, swamped fraction, worst sites); the plot data and scripts; PNGs when gnuplot
// is on PATH (skipped otherwise); the report without gnuplot; failed, incomplete and diverged
// runs; resumed and cut-short logs; a malformed line named by file and line.
#include <criterion/criterion.h>

#include "util/fileio.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "experiments/report.h"
#include "experiments/runlog.h"

static char dir[64];

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

// --- fixture

static FILE *open_log(const char *preset, int seed) {
    char p[256], msg[256];
    snprintf(p, sizeof p, "%s/runs/%s/seed-%d", dir, preset, seed);
    cr_assert_eq(fio_mkdir_p(p, msg, sizeof msg), FIO_OK, "%s", msg);
    strcat(p, "/log.jsonl");
    FILE *f = fopen(p, "w");
    cr_assert(f, "%s", p);
    return f;
}

static void start_line(FILE *f, const char *preset, int seed) {
    fprintf(f, "{\"event\":\"start\",\"policy\":\"%s\",\"seed\":%d,\"model\":\"tiny\",\"steps\":10,"
               "\"tokens_per_step\":96,\"resumed_from\":0}\n", preset, seed);
}

// fp32 seed s: loss 3 - 0.1 i + 0.01 s, val 2.6 + 0.01 s at step 5 and 2.1 + 0.01 s at step 10,
// 1000 s tokens/s; no loss scale, no sites.
static void write_fp32(int s, int upto) {
    FILE *f = open_log("fp32", s);
    start_line(f, "fp32", s);
    fprintf(f, "{\"event\":\"val\",\"at_step\":0,\"val_loss\":%.9g}\n", 2.9 + 0.01 * s);  // the initial weights'
    for (int i = 1; i <= upto; i++) {
        fprintf(f, "{\"step\":%d,\"loss\":%.9g,\"lr\":0.001,\"grad_norm\":0.5,\"tokens_per_s\":%d,"
                   "\"elapsed_s\":%.3f,\"loss_scale\":1,\"skipped\":0",
                i, 3 - 0.1 * i + 0.01 * s, 1000 * s, 0.1 * i);
        if (i == 5) fprintf(f, ",\"val_loss\":%.9g", 2.6 + 0.01 * s);
        if (i == 10) fprintf(f, ",\"val_loss\":%.9g", 2.1 + 0.01 * s);
        fputs("}\n", f);
    }
    fclose(f);
}

// fp16-amp seed s: fp32's losses + 0.03 (val + 0.05); loss scale 65536 for steps 1-3 and
// 32768 from step 4; seed 1 skips step 4 (loss "nan", grad_norm "inf", attn.qkv.grad overflow
// 0.5 there). Sites: attn.qkv.grad underflow 0.01 s, mlp.down.grad underflow 0.001,
// attn.qkv.in all zero, lm_head.grad n=0 with "nan" fractions at step 2 (left out of means).
static void write_fp16(int s) {
    FILE *f = open_log("fp16-amp", s);
    start_line(f, "fp16-amp", s);
    fprintf(f, "{\"event\":\"val\",\"at_step\":0,\"val_loss\":%.9g}\n", 2.9 + 0.01 * s + 0.01);
    for (int i = 1; i <= 10; i++) {
        const bool skip = s == 1 && i == 4;
        fprintf(f, "{\"step\":%d,", i);
        if (skip) fputs("\"loss\":\"nan\",\"lr\":0.001,\"grad_norm\":\"inf\",", f);
        else fprintf(f, "\"loss\":%.9g,\"lr\":0.001,\"grad_norm\":0.5,", 3 - 0.1 * i + 0.01 * s + 0.03);
        fprintf(f, "\"tokens_per_s\":500,\"elapsed_s\":%.3f,\"loss_scale\":%d,\"skipped\":%d", 0.2 * i,
                i < 4 ? 65536 : 32768, skip);
        if (i == 5) fprintf(f, ",\"val_loss\":%.9g", 2.6 + 0.01 * s + 0.05);
        if (i == 10) fprintf(f, ",\"val_loss\":%.9g", 2.1 + 0.01 * s + 0.05);
        fprintf(f, ",\"sites\":{\"attn.qkv.in\":{\"n\":3072,\"overflow\":0,\"underflow\":0,\"subnormal\":0,"
                   "\"nan\":0,\"amax\":2.5,\"scale\":1},"
                   "\"attn.qkv.grad\":{\"n\":6144,\"overflow\":%g,\"underflow\":%g,\"subnormal\":0.002,\"nan\":0,"
                   "\"amax\":%s,\"scale\":1},"
                   "\"mlp.down.grad\":{\"n\":3072,\"overflow\":0,\"underflow\":0.001,\"subnormal\":0,\"nan\":0,"
                   "\"amax\":3,\"scale\":1}",
                skip ? 0.5 : 0.0, 0.01 * s, skip ? "\"inf\"" : "100");
        if (i == 2)
            fputs(",\"lm_head.grad\":{\"n\":0,\"overflow\":\"nan\",\"underflow\":\"nan\",\"subnormal\":\"nan\","
                  "\"nan\":\"nan\",\"amax\":0,\"scale\":1}", f);
        fputs("}}\n", f);
    }
    fclose(f);
}

// pure-bf16 seed s: fp32's losses + 0.2 (val + 0.2), swamped 0.1 s at every step, a master site
// and a per-layer key; 2000 tokens/s.
static void write_bf16(int s) {
    FILE *f = open_log("pure-bf16", s);
    start_line(f, "pure-bf16", s);
    for (int i = 1; i <= 10; i++) {
        fprintf(f, "{\"step\":%d,\"loss\":%.9g,\"lr\":0.001,\"grad_norm\":0.5,\"tokens_per_s\":2000,"
                   "\"elapsed_s\":%.3f,\"loss_scale\":1,\"skipped\":0",
                i, 3 - 0.1 * i + 0.01 * s + 0.2, 0.3 * i);
        if (i == 5) fprintf(f, ",\"val_loss\":%.9g", 2.6 + 0.01 * s + 0.2);
        if (i == 10) fprintf(f, ",\"val_loss\":%.9g", 2.1 + 0.01 * s + 0.2);
        fputs(",\"sites\":{\"master\":{\"n\":1000,\"overflow\":0,\"underflow\":0.0001,\"subnormal\":0,\"nan\":0,"
              "\"amax\":0.1,\"scale\":1},\"L0.attn.qkv.in\":{\"n\":10,\"overflow\":0,\"underflow\":0,"
              "\"subnormal\":0,\"nan\":0,\"amax\":1,\"scale\":1}}", f);
        fprintf(f, ",\"update\":{\"swamped\":%g,\"changed\":0.9}}\n", 0.1 * s);
    }
    fclose(f);
}

static void write_grid(void) {
    snprintf(dir, sizeof dir, "/tmp/fplab_report_XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp");
    for (int s = 1; s <= 2; s++) write_fp32(s, 10), write_fp16(s), write_bf16(s);
}

static void write_file(const char *rel, const char *text) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "w");
    cr_assert(f, "%s", p);
    fputs(text, f);
    fclose(f);
}

static char *read_file(const char *rel) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "rb");
    cr_assert(f, "cannot read %s", p);
    static char buf[1 << 17];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static bool exists(const char *rel) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    return access(p, F_OK) == 0;
}

// The line of text that starts with prefix (copied into out), failing the test if none.
static const char *line_of(const char *text, const char *prefix, char *out, size_t cap) {
    for (const char *s = text; *s;) {
        const char *e = strchr(s, '\n');
        const size_t n = e ? (size_t)(e - s) : strlen(s);
        if (!strncmp(s, prefix, strlen(prefix))) {
            snprintf(out, cap, "%.*s", (int)n, s);
            return out;
        }
        s += n + (e != NULL);
    }
    cr_assert_fail("no line starts with '%s' in:\n%s", prefix, text);
    return NULL;
}

static void report_ok(const char *gnuplot, report_result *r) {
    char msg[1024] = "";
    report_opts o = {.dir = dir, .gnuplot = gnuplot};
    cr_assert_eq(report_write(&o, r, msg, sizeof msg), XP_OK, "report_write: %s", msg);
}

TestSuite(report, .fini = teardown);

// --- the reader

Test(report, parses_numbers_nan_strings_and_sites) {
    write_grid();
    char p[256], msg[512];
    snprintf(p, sizeof p, "%s/runs/fp16-amp/seed-1/log.jsonl", dir);
    runlog l;
    cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_OK, "%s", msg);
    cr_assert(l.has_start);
    cr_assert_str_eq(l.policy, "fp16-amp");
    cr_assert_str_eq(l.model, "tiny");
    cr_assert_eq(l.seed, 1);
    cr_assert_eq(l.steps, 10);
    cr_assert_eq(l.tokens_per_step, 96);
    cr_assert_eq(l.n, 10);
    cr_assert_eq(l.step[0].step, 1);
    cr_assert_float_eq(l.step[0].loss, 2.94, 1e-12);
    cr_assert_eq(l.step[0].loss_scale, 65536);
    cr_assert_eq(l.step[3].loss_scale, 32768);
    cr_assert(isnan(l.step[3].loss), "\"nan\" reads as NaN");
    cr_assert(isinf(l.step[3].grad_norm) && l.step[3].grad_norm > 0, "\"inf\" reads as +inf");
    cr_assert_eq(l.step[3].skipped, 1);
    cr_assert_eq(l.step[2].skipped, 0);
    cr_assert(!l.step[3].has_val && isnan(l.step[3].val_loss));
    cr_assert(l.step[4].has_val);
    cr_assert_float_eq(l.step[9].val_loss, 2.16, 1e-12);
    cr_assert_float_eq(l.step[9].elapsed_s, 2.0, 1e-12);
    cr_assert(!l.step[0].has_update && isnan(l.step[0].swamped));
    cr_assert_eq(l.nsites, 4, "attn.qkv.in, attn.qkv.grad, mlp.down.grad, lm_head.grad");
    const int g = runlog_site_index(&l, "attn.qkv.grad"), h = runlog_site_index(&l, "lm_head.grad");
    cr_assert(g >= 0 && h >= 0);
    cr_assert_eq(runlog_site_index(&l, "nope"), -1);
    const runlog_tel *t = runlog_tel_of(&l, 3, g);
    cr_assert(t);
    cr_assert_eq(t->n, 6144);
    cr_assert_eq(t->overflow, 0.5);
    cr_assert_float_eq(t->underflow, 0.01, 1e-15);
    cr_assert_eq(t->subnormal, 0.002);
    cr_assert(isinf(t->amax));
    cr_assert_eq(runlog_tel_of(&l, 0, g)->amax, 100);
    cr_assert(runlog_tel_of(&l, 1, h) && isnan(runlog_tel_of(&l, 1, h)->underflow));
    cr_assert_null(runlog_tel_of(&l, 2, h), "lm_head.grad only at step 2");
    runlog_free(&l);

    snprintf(p, sizeof p, "%s/runs/pure-bf16/seed-2/log.jsonl", dir);
    cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_OK, "%s", msg);
    cr_assert(l.step[0].has_update);
    cr_assert_float_eq(l.step[0].swamped, 0.2, 1e-15);
    cr_assert_eq(l.step[0].changed, 0.9);
    cr_assert_eq(l.nsites, 1, "per-layer keys skipped");
    runlog_free(&l);
    cr_assert_eq(runlog_read(&l, p, true, msg, sizeof msg), RUNLOG_OK, "%s", msg);
    cr_assert_eq(l.nsites, 2);
    cr_assert(runlog_site_index(&l, "L0.attn.qkv.in") >= 0, "per-layer keys kept with layers");
    runlog_free(&l);
}

Test(report, reader_resume_truncation_and_tolerance) {
    snprintf(dir, sizeof dir, "/tmp/fplab_report_XXXXXX");
    cr_assert(mkdtemp(dir));
    // steps 1-6, then a resume from step 4 that redoes 5 and 6 with other numbers, an unknown
    // member, an unknown event, bare NaN (as Python writes it) and -nan (as printf does), CRLF, a
    // blank line, and a last line cut short by a crash (no newline).
    write_file("log.jsonl",
               "{\"event\":\"start\",\"policy\":\"x\",\"seed\":18446744073709551615,\"steps\":8}\n"
               "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":2}\n{\"step\":3,\"loss\":3}\n"
               "{\"step\":4,\"loss\":4,\"sites\":{\"a\":{\"n\":1,\"underflow\":0.5}}}\n"
               "{\"step\":5,\"loss\":5,\"sites\":{\"a\":{\"n\":1,\"underflow\":0.25}}}\n{\"step\":6,\"loss\":6}\n"
               "{\"event\":\"start\",\"policy\":\"x\",\"seed\":1,\"steps\":8,\"resumed_from\":4}\n"
               "{\"step\":5,\"loss\":50,\"future\":[1,{\"b\":null}],\"sites\":{\"a\":{\"n\":2,\"underflow\":0.75}}}\r\n"
               "\n{\"event\":\"eval\",\"whatever\":true}\n"
               "{\"step\":6,\"loss\":NaN,\"grad_norm\":-nan}\n{\"step\":7,\"loss\":70}\n{\"step\":8,\"lo");
    char p[256], msg[512];
    snprintf(p, sizeof p, "%s/log.jsonl", dir);
    runlog l;
    cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_OK, "%s", msg);
    cr_assert_eq(l.seed, UINT64_MAX, "the first start line counts, seeds exactly");
    cr_assert_eq(l.resumes, 1);
    cr_assert_eq(l.truncated, 1);
    cr_assert_eq(l.n, 7);
    for (size_t i = 0; i < l.n; i++) cr_assert_eq(l.step[i].step, (long)i + 1);
    cr_assert_eq(l.step[4].loss, 50, "the resumed run's step 5 replaces the first");
    cr_assert(isnan(l.step[5].loss) && isnan(l.step[5].grad_norm));
    const int a = runlog_site_index(&l, "a");
    cr_assert_eq(runlog_tel_of(&l, 3, a)->underflow, 0.5);
    cr_assert_eq(runlog_tel_of(&l, 4, a)->underflow, 0.75);
    cr_assert_eq(runlog_tel_of(&l, 4, a)->n, 2);
    cr_assert_null(runlog_tel_of(&l, 5, a));
    cr_assert(isnan(runlog_tel_of(&l, 4, a)->overflow), "absent members read as NaN");
    runlog_free(&l);
}

// A last line cut short (a full disk, a kill), which the resumed run ends with a newline before
// it appends its start line: the cut line is dropped and counted, as the glued form is. A bad
// line followed by anything else is still an error, and so is a bad whole last line.
Test(report, torn_line_then_newline_then_resume) {
    snprintf(dir, sizeof dir, "/tmp/fplab_report_XXXXXX");
    cr_assert(mkdtemp(dir));
    write_file("torn.jsonl",
               "{\"event\":\"start\",\"policy\":\"fp32\",\"seed\":1,\"steps\":4,\"resumed_from\":0}\n"
               "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":2}\n{\"step\":3,\"lo\n"
               "{\"event\":\"start\",\"policy\":\"fp32\",\"seed\":1,\"steps\":4,\"resumed_from\":2}\n"
               "{\"step\":3,\"loss\":30}\n{\"step\":4,\"loss\":40}\n");
    write_file("bad_mid.jsonl", "{\"step\":1,\"loss\":1}\n{\"step\":2,\"lo\n{\"step\":3,\"loss\":3}\n");
    write_file("bad_last.jsonl", "{\"step\":1,\"loss\":1}\n{\"step\":2,\"lo\n");
    char p[256], msg[512] = "";
    snprintf(p, sizeof p, "%s/torn.jsonl", dir);
    runlog l;
    cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_OK, "%s", msg);
    cr_assert_eq(l.truncated, 1);
    cr_assert_eq(l.n, 4);
    cr_assert_eq(l.step[2].loss, 30);
    runlog_free(&l);
    const char *bad[2] = {"bad_mid.jsonl", "bad_last.jsonl"};
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, bad[k]);
        cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_EFORMAT, "%s", bad[k]);
        cr_assert(strstr(msg, ":2:"), "%s: the message names line 2: %s", bad[k], msg);
    }
}

// A run killed mid-line and resumed: the resumed invocation appends its start line right after
// the cut-short write (the log is opened for appending; no newline comes first), so one line
// holds a fragment and then a whole start line. The fragment is dropped and counted, the start
// line and the redone steps count. This log has no site telemetry (an fp32 run): the entry
// array was never allocated, and dropping the redone steps moved entries from a NULL pointer.
Test(report, kill_and_resume_without_telemetry) {
    snprintf(dir, sizeof dir, "/tmp/fplab_report_XXXXXX");
    cr_assert(mkdtemp(dir));
    write_file("glued.jsonl",
               "{\"event\":\"start\",\"policy\":\"fp32\",\"seed\":1,\"steps\":5,\"resumed_from\":0}\n"
               "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":2}\n{\"step\":3,\"loss\":3}\n{\"step\":4,\"lo"
               "{\"event\":\"start\",\"policy\":\"fp32\",\"seed\":1,\"steps\":5,\"resumed_from\":2}\n"
               "{\"step\":3,\"loss\":30}\n{\"step\":4,\"loss\":40}\n{\"step\":5,\"loss\":50}\n");
    // the same with the kill between lines (a newline after step 3, nothing cut)
    write_file("clean.jsonl",
               "{\"event\":\"start\",\"policy\":\"fp32\",\"seed\":1,\"steps\":5,\"resumed_from\":0}\n"
               "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":2}\n{\"step\":3,\"loss\":3}\n"
               "{\"event\":\"start\",\"policy\":\"fp32\",\"seed\":1,\"steps\":5,\"resumed_from\":2}\n"
               "{\"step\":3,\"loss\":30}\n{\"step\":4,\"loss\":40}\n{\"step\":5,\"loss\":50}\n");
    const char *names[2] = {"clean.jsonl", "glued.jsonl"};
    for (int k = 0; k < 2; k++) {
        char p[256], msg[512] = "";
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        runlog l;
        cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_OK, "%s: %s", names[k], msg);
        cr_assert_eq(l.resumes, 1, "%s", names[k]);
        cr_assert_eq(l.truncated, (size_t)(k == 1), "%s: %zu cut-short writes", names[k], l.truncated);
        cr_assert_eq(l.n, 5, "%s: %zu steps", names[k], l.n);
        for (size_t i = 0; i < l.n; i++) cr_assert_eq(l.step[i].step, (long)i + 1);
        cr_assert_eq(l.step[1].loss, 2);
        cr_assert_eq(l.step[2].loss, 30, "%s: the redone step 3 stands", names[k]);
        cr_assert_eq(l.nsites, 0);
        runlog_free(&l);
    }
    // a fragment glued to anything but a start line is still a malformed line
    write_file("bad.jsonl", "{\"step\":1,\"loss\":1}\n{\"step\":2,\"lo{\"step\":2,\"loss\":2}\n");
    char p[256], msg[512] = "";
    snprintf(p, sizeof p, "%s/bad.jsonl", dir);
    runlog l;
    cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_EFORMAT);
    cr_assert(strstr(msg, "bad.jsonl:2: "), "%s", msg);
}

// Numbers of any size where the reader expects counts: "steps", "tokens_per_step" and
// "resumed_from" of 1e300, -1e300, "inf", "nan", or a fraction. They become "unknown" (-1) or
// are ignored, never an out-of-range conversion (undefined behaviour, caught by make asan's
// float-cast-overflow; in a release build (long)1e300 gave LONG_MIN).
Test(report, out_of_range_numbers_are_not_converted) {
    snprintf(dir, sizeof dir, "/tmp/fplab_report_XXXXXX");
    cr_assert(mkdtemp(dir));
    static const char *vals[] = {"1e300", "-1e300", "\"inf\"", "\"-inf\"", "\"nan\"", "NaN", "Infinity",
                                 "-5", "2.5", "1e15", "9223372036854775807", "18446744073709551616"};
    for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"event\":\"start\",\"policy\":\"x\",\"steps\":%s,\"tokens_per_step\":%s,\"resumed_from\":0}\n"
                 "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":2}\n"
                 "{\"event\":\"start\",\"policy\":\"x\",\"steps\":%s,\"resumed_from\":%s}\n"
                 "{\"step\":3,\"loss\":3,\"sites\":{\"a\":{\"n\":%s,\"amax\":%s}}}\n",
                 vals[k], vals[k], vals[k], vals[k], vals[k], vals[k]);
        write_file("big.jsonl", text);
        char p[256], msg[512] = "";
        snprintf(p, sizeof p, "%s/big.jsonl", dir);
        runlog l;
        cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_OK, "%s: %s", vals[k], msg);
        cr_assert_eq(l.steps, -1, "%s: steps %ld; expected -1 (unknown)", vals[k], l.steps);
        cr_assert_eq(l.tokens_per_step, -1, "%s: tokens_per_step %ld", vals[k], l.tokens_per_step);
        // a resume from beyond every logged step drops nothing; one from 2.5 drops nothing either
        cr_assert_eq(l.n, 3, "%s: %zu steps", vals[k], l.n);
        runlog_free(&l);
    }
    // a "step" that is not a number at all is a malformed line (its NaN was converted to long
    // before the line was refused: found by fuzz_runlog)
    static const char *bad_steps[] = {"{\"step\":}\n", "{\"step\":\"lots\"}\n", "{\"step\":x,\"loss\":1}\n"};
    for (size_t k = 0; k < sizeof bad_steps / sizeof bad_steps[0]; k++) {
        write_file("bad.jsonl", bad_steps[k]);
        char p[256], msg[512] = "";
        snprintf(p, sizeof p, "%s/bad.jsonl", dir);
        runlog l;
        cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_EFORMAT, "%s", bad_steps[k]);
        cr_assert(strstr(msg, "bad.jsonl:1: column "), "%s", msg);
    }
    // in range: the numbers as written
    write_file("ok.jsonl", "{\"event\":\"start\",\"steps\":123,\"tokens_per_step\":4096}\n{\"step\":1}\n");
    char p[256], msg[512] = "";
    snprintf(p, sizeof p, "%s/ok.jsonl", dir);
    runlog l;
    cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_OK, "%s", msg);
    cr_assert_eq(l.steps, 123);
    cr_assert_eq(l.tokens_per_step, 4096);
    runlog_free(&l);
}

// runlog_read_stream reads any stream (what the fuzz harness uses), naming it in messages.
Test(report, reader_reads_a_memory_stream) {
    static const char text[] = "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":}\n";
    FILE *f = fmemopen((void *)text, sizeof text - 1, "r");
    cr_assert(f);
    runlog l;
    char msg[256];
    cr_assert_eq(runlog_read_stream(&l, f, "mem", false, msg, sizeof msg), RUNLOG_EFORMAT);
    cr_assert(strstr(msg, "mem:2: "), "%s", msg);
    fclose(f);
    f = fmemopen((void *)text, 22, "r");
    cr_assert_eq(runlog_read_stream(&l, f, "mem", false, msg, sizeof msg), RUNLOG_OK, "%s", msg);
    cr_assert_eq(l.n, 1);
    runlog_free(&l);
    fclose(f);
}

Test(report, malformed_line_names_file_and_line) {
    write_grid();
    // line 4 of fp32/seed-2: a member without a value (and a newline after it: not a cut-short write)
    char p[256], msg[1024] = "";
    snprintf(p, sizeof p, "%s/runs/fp32/seed-2/log.jsonl", dir);
    FILE *f = fopen(p, "w");
    cr_assert(f);
    start_line(f, "fp32", 2);
    fputs("{\"step\":1,\"loss\":3}\n{\"step\":2,\"loss\":2.9}\n{\"step\":3,\"loss\":}\n{\"step\":4,\"loss\":2.7}\n", f);
    fclose(f);
    runlog l;
    cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_EFORMAT);
    char want[300];
    snprintf(want, sizeof want, "%s:4: column 18: expected a number", p);
    cr_assert(strstr(msg, want), "message '%s' lacks '%s'", msg, want);
    cr_assert_eq(l.n, 0);
    runlog_free(&l);
    report_opts o = {.dir = dir};
    cr_assert_eq(report_write(&o, NULL, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, want), "report: '%s'", msg);
    cr_assert(!exists("report.md"), "nothing written on failure");

    // other kinds: a string where a number belongs, not an object, a line with neither step nor event
    static const char *bad[][2] = {{"{\"step\":1,\"loss\":\"lots\"}\n", "found the string \"lots\""},
                                   {"[1,2]\n", "expected '{'"},
                                   {"{\"loss\":1}\n", "neither \"step\" nor \"event\""},
                                   {"{\"step\":0,\"loss\":1}\n", "integer >= 1"},
                                   {"{\"step\":1,\"loss\":1} x\n", "unexpected 'x'"},
                                   {"{\"step\":1 \"loss\":1}\n", "expected ',' or '}'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file("bad.jsonl", bad[i][0]);
        snprintf(p, sizeof p, "%s/bad.jsonl", dir);
        cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_EFORMAT, "%s", bad[i][0]);
        cr_assert(strstr(msg, "bad.jsonl:1: ") && strstr(msg, bad[i][1]), "'%s' for %s", msg, bad[i][0]);
    }
    snprintf(p, sizeof p, "%s/nonexistent.jsonl", dir);
    cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_EIO);
    cr_assert(strstr(msg, "nonexistent.jsonl: cannot open"), "%s", msg);
}

// --- report.md

Test(report, summary_table_values) {
    write_grid();
    write_file("ablate.json",
               "{\"command\":\"fplab ablate --presets pure-bf16,fp16-amp,fp32 --seeds 2 --steps 10\",\"cwd\":\"/w\","
               "\"run_names\":[\"pure-bf16\",\"fp16-amp\",\"fp32\"],\"seeds\":[1,2],\"model\":\"tiny\","
               "\"data\":\"x.txt\",\"steps\":10,\"extra\":[]}\n");
    report_result r;
    report_ok(NULL, &r);
    cr_assert_eq(r.runs, 6);
    cr_assert_eq(r.presets, 3);
    cr_assert_eq(r.ok, 6);
    cr_assert_eq(r.failed + r.incomplete + r.missing + r.diverged, 0);
    const char *md = read_file("report.md");
    cr_assert(strstr(md, "    fplab ablate --presets pure-bf16,fp16-amp,fp32 --seeds 2 --steps 10\n"), "the command");
    cr_assert(strstr(md, "(run in `/w`)"));
    char row[1024];
    // Rows follow ablate.json's order; mean [min, max] over the 2 seeds.
    cr_assert_str_eq(line_of(md, "| preset |", row, sizeof row),
                     "| preset | runs | final train loss | final val loss | val gap to fp32 | skipped steps | "
                     "swamped updates | tokens/s | worst overflow | worst underflow |");
    cr_assert(strstr(md, "| pure-bf16 |") < strstr(md, "| fp16-amp |") && strstr(md, "| fp16-amp |") < strstr(md, "| fp32 |"));
    // fp32: train 2.01, 2.02; val 2.11, 2.12; tokens/s 1000, 2000.
    cr_assert_str_eq(line_of(md, "| fp32 |", row, sizeof row),
                     "| fp32 | 2/2 | 2.0150 [2.0100, 2.0200] | 2.1150 [2.1100, 2.1200] | (reference) | 0 | — | "
                     "1500 [1000, 2000] | — | — |");
    // fp16-amp: +0.03 / +0.05; seed 1 skipped one step; attn.qkv.grad overflowed 0.5 at one of
    // 10 steps of one of 2 seeds (0.025) and underflowed 0.01 s (0.015).
    cr_assert_str_eq(line_of(md, "| fp16-amp |", row, sizeof row),
                     "| fp16-amp | 2/2 | 2.0450 [2.0400, 2.0500] | 2.1650 [2.1600, 2.1700] | +0.05 | 0.5 [0, 1] | — | "
                     "500 | attn.qkv.grad 0.025 | attn.qkv.grad 0.015 |");
    cr_assert_str_eq(line_of(md, "| pure-bf16 |", row, sizeof row),
                     "| pure-bf16 | 2/2 | 2.2150 [2.2100, 2.2200] | 2.3150 [2.3100, 2.3200] | +0.2 | 0 | "
                     "0.15 [0.1, 0.2] | 2000 | 0 | master 0.0001 |");
    // The sites of fp16-amp: the two gradient sites, largest rate first; attn.qkv.in (all zero)
    // is not listed; lm_head.grad's only step had n = 0 (nan fractions): no rate.
    const char *sec = strstr(md, "### fp16-amp");
    cr_assert(sec);
    cr_assert_str_eq(line_of(sec, "| attn.qkv.grad |", row, sizeof row), "| attn.qkv.grad | 0.025 | 0.015 | 0.002 | 0 | 100 |");
    cr_assert_str_eq(line_of(sec, "| mlp.down.grad |", row, sizeof row), "| mlp.down.grad | 0 | 0.001 | 0 | 0 | 3 |");
    cr_assert(strstr(sec, "The 2 sites (of 4 cast)"));
    cr_assert(strstr(md, "### fp32\n\nNo cast site reported telemetry"));
    // every run listed
    cr_assert_str_eq(line_of(md, "| fp16-amp | 1 |", row, sizeof row),
                     "| fp16-amp | 1 | ok | 10/10 | 2.0400 | 2.1600 | 1 | 500 | 2.0 s |");
    cr_assert(strstr(md, "## How to read this"));
    cr_assert(strstr(md, "Plots were not drawn (--no-plots)"));
}

Test(report, without_fp32_and_without_manifest) {
    write_grid();
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s/runs/fp32", dir);
    cr_assert_eq(system(cmd), 0);
    report_result r;
    report_ok(NULL, &r);
    const char *md = read_file("report.md");
    char row[512];
    cr_assert(!strstr(md, "gap to fp32 |"), "no gap column without fp32");
    cr_assert(strstr(md, "No fp32 run here"));
    cr_assert(strstr(md, "No `ablate.json` in this directory"));
    cr_assert_str_eq(line_of(md, "| fp16-amp |", row, sizeof row),
                     "| fp16-amp | 2/2 | 2.0450 [2.0400, 2.0500] | 2.1650 [2.1600, 2.1700] | 0.5 [0, 1] | — | "
                     "500 | attn.qkv.grad 0.025 | attn.qkv.grad 0.015 |");
    cr_assert(strstr(md, "| fp16-amp |") < strstr(md, "| pure-bf16 |"), "by name without a manifest");
}

Test(report, failed_incomplete_diverged_and_missing_runs) {
    write_grid();
    // fp32 seed 2 stopped at step 7; fp16-amp seed 2 failed (marker + stderr); pure-bf16 seed 1
    // diverged (nan val loss at the end); ablate.json's grid has a seed 3 nobody ran.
    write_fp32(2, 7);
    write_file("runs/fp16-amp/seed-2/FAILED", "exit status 2\n");
    write_file("runs/fp16-amp/seed-2/train.err", "loading\nfplab: train: something broke\n");
    char p[256];
    snprintf(p, sizeof p, "%s/runs/pure-bf16/seed-1/log.jsonl", dir);
    FILE *f = fopen(p, "w");
    cr_assert(f);
    start_line(f, "pure-bf16", 1);
    for (int i = 1; i <= 10; i++)
        fprintf(f, "{\"step\":%d,\"loss\":%s,\"skipped\":0%s}\n", i, i < 9 ? "2.5" : "\"nan\"",
                i == 10 ? ",\"val_loss\":\"nan\"" : "");
    fclose(f);
    write_file("ablate.json", "{\"run_names\":[\"fp32\",\"fp16-amp\",\"pure-bf16\"],\"seeds\":[1,2,3],\"steps\":10}");
    report_result r;
    report_ok(NULL, &r);
    cr_assert_eq(r.runs, 9);
    cr_assert_eq(r.ok, 4, "fp32/1, fp16-amp/1, pure-bf16/1 (diverged), pure-bf16/2");
    cr_assert_eq(r.diverged, 1);
    cr_assert_eq(r.failed, 1);
    cr_assert_eq(r.incomplete, 1);
    cr_assert_eq(r.missing, 3);
    const char *md = read_file("report.md");
    char row[1024];
    cr_assert_str_eq(line_of(md, "| fp32 |", row, sizeof row),
                     "| fp32 | 1/3 | 2.0100 | 2.1100 | (reference) | 0 | — | 1000 | — | — |");
    // pure-bf16: seed 1 diverged and is left out of the means; seed 2 has no completed fp32 run
    // to pair with, so there is no gap.
    cr_assert_str_eq(line_of(md, "| pure-bf16 |", row, sizeof row),
                     "| pure-bf16 | 2/3 (1 diverged) | 2.2200 | 2.3200 | — | 0 | 0.2 | 2000 | 0 | master 0.0001 |");
    cr_assert_str_eq(line_of(md, "| fp32 | 2 |", row, sizeof row),
                     "| fp32 | 2 | incomplete: the log ends at step 7 | 7/10 | 2.3200 | 2.6200 | 0 | 2000 | 0.7 s |");
    cr_assert(strstr(md, "| fp16-amp | 2 | FAILED: exit status 2 |"));
    cr_assert(strstr(md, "| pure-bf16 | 1 | diverged |"));
    cr_assert(strstr(md, "| fp32 | 3 | not run: no log.jsonl | 0/10 |"));
    cr_assert(strstr(md, "### Failed runs"));
    cr_assert(strstr(md, "    fplab: train: something broke\n"), "the end of train.err");
}

// --- plots

static void check_plot_files(void) {
    static const char *const base[] = {"val_loss", "train_loss", "loss_scale", "grad_underflow", "swamped",
                                       "val_delta", "overflow", "underflow"};
    for (int i = 0; i < 8; i++) {
        char f[64];
        snprintf(f, sizeof f, "plots/%s.dat", base[i]);
        cr_assert(exists(f), "%s", f);
        snprintf(f, sizeof f, "plots/%s.gp", base[i]);
        cr_assert(exists(f), "%s", f);
    }
    // val_loss.dat: a block per preset with the mean over seeds at the evaluation steps
    const char *v = read_file("plots/val_loss.dat");
    char row[256];
    const char *b = strstr(v, "# preset fp16-amp");
    cr_assert(b);
    cr_assert_str_eq(line_of(b, "5\t", row, sizeof row), "5\t2.665\t2");
    cr_assert_str_eq(line_of(b, "10\t", row, sizeof row), "10\t2.165\t2");
    // step 0: the initial weights' validation loss, from the "val" event (issue 24)
    cr_assert_str_eq(line_of(strstr(v, "# preset fp32"), "0\t", row, sizeof row), "0\t2.915\t2");
    // val_delta.dat: each preset minus fp32 paired by seed: mean, min, max, seeds
    const char *dl = read_file("plots/val_delta.dat");
    cr_assert(strstr(dl, "minus fp32's"), "%s", dl);
    cr_assert(!strstr(dl, "# preset fp32\n"), "the baseline has no curve of its own");
    const char *fb = strstr(dl, "# preset fp16-amp");
    cr_assert(fb, "%s", dl);
    cr_assert_str_eq(line_of(fb, "0\t", row, sizeof row), "0\t0.01\t0.01\t0.01\t2");
    cr_assert_str_eq(line_of(fb, "5\t", row, sizeof row), "5\t0.05\t0.05\t0.05\t2");
    const char *pb = strstr(dl, "# preset pure-bf16");
    cr_assert(pb, "%s", dl);
    cr_assert_str_eq(line_of(pb, "10\t", row, sizeof row), "10\t0.2\t0.2\t0.2\t2");
    const char *dg = read_file("plots/val_delta.gp");
    cr_assert(strstr(dg, "using 1:3:4 with filledcurves"), "a band of the seeds' range");
    cr_assert(strstr(dg, "set style fill transparent solid"));
    const char *s = read_file("plots/loss_scale.dat");
    cr_assert(strstr(s, "# preset fp16-amp seed 1"));
    cr_assert(!strstr(s, "fp32"), "fp32 does not scale the loss");
    cr_assert(strstr(s, "4\t32768\t1\n"), "the skipped step");
    const char *g = read_file("plots/grad_underflow.dat");
    cr_assert(strstr(g, "# site\tfp16-amp\n"), "only presets with gradient sites: %s", g);
    cr_assert(strstr(g, "attn.qkv.grad\t0.015\n"));
    cr_assert(strstr(g, "mlp.down.grad\t0.001\n"));
    const char *w = read_file("plots/swamped.dat");
    cr_assert(strstr(w, "# preset pure-bf16") && !strstr(w, "# preset fp16-amp"));
    cr_assert(strstr(w, "\n7\t0.15\t2\n"));
    // the swamped fraction's axis starts at 0 (it started at the data's minimum, 0.1)
    cr_assert(strstr(read_file("plots/swamped.gp"), "set yrange [0:*]"));
    const char *gp = read_file("plots/val_loss.gp");
    cr_assert(strstr(gp, "set output \"val_loss.png\""));
    cr_assert(strstr(gp, "\"val_loss.dat\" index 0 using 1:2"));
    cr_assert(strstr(gp, "title \"fp16-amp\""));
    cr_assert(strstr(gp, "lc rgb \"#1f77b4\"") && strstr(gp, "lc rgb \"#d62728\""), "the palette's colours");
}

Test(report, plots_with_gnuplot) {
    write_grid();
    char prog[512] = "";
    FILE *w = popen("command -v gnuplot", "r");
    if (w) {
        if (!fgets(prog, sizeof prog, w)) prog[0] = 0;
        pclose(w);
    }
    report_result r;
    report_ok("gnuplot", &r);
    check_plot_files();
    cr_assert_eq(r.plots_written, 8);
    if (!prog[0]) cr_skip_test("gnuplot not on PATH: the PNGs are not checked");
    cr_assert(r.gnuplot_found);
    cr_assert_eq(r.pngs, 8, "every plot drawn");
    const char *md = read_file("report.md");
    static const char *const base[] = {"val_loss", "train_loss", "loss_scale", "grad_underflow", "swamped",
                                       "val_delta", "overflow", "underflow"};
    for (int i = 0; i < 8; i++) {
        char f[256], link[80];
        snprintf(f, sizeof f, "plots/%s.png", base[i]);
        cr_assert(exists(f), "%s", f);
        snprintf(f, sizeof f, "plots/%s.log", base[i]);
        cr_assert(!exists(f), "no gnuplot log left after success: %s", f);
        snprintf(link, sizeof link, "(plots/%s.png)", base[i]);
        cr_assert(strstr(md, link), "%s linked", link);
        snprintf(f, sizeof f, "%s/plots/%s.png", dir, base[i]);
        struct stat st;
        cr_assert(stat(f, &st) == 0 && st.st_size > 1000, "%s looks empty", f);
    }
}

Test(report, gnuplot_missing_is_not_an_error) {
    write_grid();
    report_result r;
    report_ok("/nonexistent/gnuplot", &r);
    cr_assert(!r.gnuplot_found);
    cr_assert_eq(r.pngs, 0);
    check_plot_files();
    const char *md = read_file("report.md");
    cr_assert(strstr(md, "gnuplot was not found"));
    cr_assert(!strstr(md, "](plots/"), "no image links without images");
}

Test(report, no_loss_scaling_no_scale_plot) {
    write_grid();
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s/runs/fp16-amp %s/runs/pure-bf16", dir, dir);
    cr_assert_eq(system(cmd), 0);
    report_result r;
    report_ok(NULL, &r);
    cr_assert_eq(r.plots_written, 2, "val_loss and train_loss only (one preset: no delta)");
    cr_assert(!exists("plots/loss_scale.dat"));
    const char *md = read_file("report.md");
    cr_assert(strstr(md, "No plot: no run's loss scale moved"));
    cr_assert(strstr(md, "No plot: no preset stores its weights in low precision"));
}

// A static loss scale is a flat line: no loss-scale plot for it (issue 24), and 15 presets get 15
// colours (gnuplot's default cycle repeated after 8).
Test(report, static_scale_no_plot_and_fifteen_colours) {
    write_grid();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s/runs/fp16-amp", dir);
    cr_assert_eq(system(cmd), 0);
    for (int q = 0; q < 13; q++) {
        char name[32];
        snprintf(name, sizeof name, "p%02d", q);
        FILE *f = open_log(name, 1);
        start_line(f, name, 1);
        for (int i = 1; i <= 10; i++)
            fprintf(f, "{\"step\":%d,\"loss\":%g,\"lr\":0.001,\"grad_norm\":0.5,\"tokens_per_s\":100,"
                       "\"elapsed_s\":1,\"loss_scale\":1024,\"skipped\":0%s}\n", i, 3 - 0.1 * i,
                    i == 10 ? ",\"val_loss\":2.5" : "");
        fclose(f);
    }
    report_result r;
    report_ok(NULL, &r);
    cr_assert(!exists("plots/loss_scale.dat"), "every scale was static");
    const char *gp = read_file("plots/val_loss.gp");
    char seen[16][8] = {{0}};
    int nseen = 0;
    for (const char *p = strstr(gp, "lc rgb \""); p; p = strstr(p + 1, "lc rgb \"")) {
        char c[8];
        snprintf(c, sizeof c, "%.7s", p + 8);
        int k = 0;
        while (k < nseen && strcmp(seen[k], c)) k++;
        if (k == nseen && nseen < 16 && strcmp(c, "#a0a0a0")) snprintf(seen[nseen++], sizeof seen[0], "%s", c);
    }
    cr_assert_eq(nseen, 15, "15 presets (fp32, pure-bf16, p00..p12), 15 colours (and the baseline's grey): %d", nseen);
}

// One run's directory (DIR/log.jsonl, no runs/): `fplab report RUN_DIR` reports that run (issue 24).
Test(report, single_run_directory) {
    write_grid();
    char run[300], cmd[700];
    snprintf(run, sizeof run, "%s/runs/fp16-amp/seed-1", dir);
    snprintf(cmd, sizeof cmd, "rm -rf %s/one && mv %s %s/one && rm -rf %s/runs", dir, run, dir, dir);
    cr_assert_eq(system(cmd), 0);
    char one[300], msg[1024] = "";
    snprintf(one, sizeof one, "%s/one", dir);
    report_opts o = {.dir = one, .gnuplot = NULL};
    report_result r;
    cr_assert_eq(report_write(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    cr_assert_eq(r.runs, 1);
    cr_assert_eq(r.ok, 1);
    cr_assert(exists("one/report.md") && exists("one/plots/val_loss.dat") && exists("one/plots/loss_scale.dat") &&
              exists("one/plots/grad_underflow.dat"), "the run's report and plots, in its own directory");
    const char *md = read_file("one/report.md");
    cr_assert(strstr(md, "| fp16-amp |"), "named by its policy");
}

Test(report, bad_directories) {
    char msg[512];
    report_opts o = {.dir = "/nonexistent/fplab/abl"};
    cr_assert_eq(report_write(&o, NULL, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "'/nonexistent/fplab/abl': no such file or directory"), "%s", msg);
    snprintf(dir, sizeof dir, "/tmp/fplab_report_XXXXXX");
    cr_assert(mkdtemp(dir));
    o.dir = dir;
    cr_assert_eq(report_write(&o, NULL, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "no runs/ directory"), "%s", msg);
    write_file("ablate.json", "{\"steps\":10,\"seeds\":[1,}");
    cr_assert_eq(report_write(&o, NULL, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "ablate.json: malformed: column"), "%s", msg);
}

// --- issue 34: memory and time follow the log; links at the report's names; comparisons

static void new_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/fplab_report_XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp");
}

// A 100-byte log whose one step is numbered 10^8 (or 2*10^9): the report sized its curves by step
// number (3.9 GB, or killed); now by the steps logged. Under an address-space limit of 1 GiB (not
// under ASan, whose shadow memory needs more) the report must still be written.
Test(report, memory_follows_the_steps_logged_not_their_numbers) {
    new_dir();
#ifndef __SANITIZE_ADDRESS__
    const struct rlimit lim = {1L << 30, 1L << 30};
    cr_assert_eq(setrlimit(RLIMIT_AS, &lim), 0);
#endif
    char msg[1024] = "";
    cr_assert_eq(fio_mkdir_p(strcat(strcpy((char[300]){0}, dir), "/run"), msg, sizeof msg), FIO_OK);
    write_file("run/log.jsonl", "{\"step\":1,\"loss\":3}\n{\"step\":100000000,\"loss\":2,\"val_loss\":2.5}\n"
                                "{\"step\":2000000000,\"loss\":1,\"val_loss\":2}\n");
    char run[300];
    snprintf(run, sizeof run, "%s/run", dir);
    report_opts o = {.dir = run};
    report_result r;
    cr_assert_eq(report_write(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    cr_assert_eq(r.ok, 1);
    const char *v = read_file("run/plots/val_loss.dat");
    cr_assert(strstr(v, "\n100000000\t2.5\t1\n") && strstr(v, "\n2000000000\t2\t1\n"), "%s", v);
    char row[512];
    cr_assert_str_eq(line_of(read_file("run/report.md"), "| run | 0 |", row, sizeof row),
                     "| run | 0 | ok | 2000000000/2000000000 | 1.0000 | 2.0000 | 0 | nan | — |");
}

// 200,000 distinct site names in one step: each name was looked up by a linear scan (and each
// site's mean by a scan of every entry), > 60 s; by hash and sorted table it is well under a
// second, so a 30 s limit tells the two apart by far more than any machine's noise.
Test(report, many_site_names_are_looked_up_not_scanned, .timeout = 30) {
    new_dir();
    char msg[1024] = "", run[300];
    snprintf(run, sizeof run, "%s/run", dir);
    cr_assert_eq(fio_mkdir_p(run, msg, sizeof msg), FIO_OK);
    char path[400];
    snprintf(path, sizeof path, "%s/log.jsonl", run);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (int step = 1; step <= 2; step++) {
        fprintf(f, "{\"step\":%d,\"loss\":1,\"sites\":{", step);
        for (int i = 0; i < 200000; i++)
            fprintf(f, "%s\"s%06d.grad\":{\"n\":1,\"underflow\":%g}", i ? "," : "", i, i == 123456 ? 0.5 : 0.0);
        fputs("}}\n", f);
    }
    fclose(f);
    runlog l;
    cr_assert_eq(runlog_read(&l, path, false, msg, sizeof msg), RUNLOG_OK, "%s", msg);
    cr_assert_eq(l.nsites, 200000);
    cr_assert_eq(runlog_site_index(&l, "s123456.grad"), 123456);
    cr_assert_eq(runlog_site_index(&l, "s200000.grad"), -1);
    runlog_free(&l);
    report_opts o = {.dir = run};
    report_result r;
    cr_assert_eq(report_write(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    char row[512];
    cr_assert_str_eq(line_of(strstr(read_file("run/report.md"), "## Cast sites"), "| s123456.grad |", row, sizeof row),
                     "| s123456.grad | nan | 0.5 | nan | nan | nan |");
}

// The stated limit on a site name: longer names were cut to 63 bytes (two names sharing a prefix
// merged); now the line is malformed, with file and line.
Test(report, a_site_name_past_the_limit_is_refused) {
    char line[400], msg[512];
    snprintf(line, sizeof line, "{\"step\":1,\"loss\":1,\"sites\":{\"%0*d\":{\"n\":1}}}\n{\"step\":2,\"loss\":1}\n",
             RUNLOG_SITE_NAME, 7);
    FILE *f = fmemopen(line, strlen(line), "r");
    runlog l;
    cr_assert_eq(runlog_read_stream(&l, f, "x.jsonl", false, msg, sizeof msg), RUNLOG_EFORMAT);
    fclose(f);
    cr_assert(strstr(msg, "x.jsonl:1: column") && strstr(msg, "a site name longer than 63 bytes"), "%s", msg);
    snprintf(line, sizeof line, "{\"step\":1,\"loss\":1,\"sites\":{\"%0*d\":{\"n\":1}}}\n", RUNLOG_SITE_NAME - 1, 7);
    f = fmemopen(line, strlen(line), "r");
    cr_assert_eq(runlog_read_stream(&l, f, "x.jsonl", false, msg, sizeof msg), RUNLOG_OK, "%s", msg);
    fclose(f);
    cr_assert_eq(l.nsites, 1);
    runlog_free(&l);
}

// `--resume --steps 400` after 200 steps: the last start line's target stands (the report said
// "200 steps each" and "400/200").
Test(report, a_resumed_run_has_its_final_target) {
    new_dir();
    char msg[512] = "", run[300];
    snprintf(run, sizeof run, "%s/run", dir);
    cr_assert_eq(fio_mkdir_p(run, msg, sizeof msg), FIO_OK);
    char path[400];
    snprintf(path, sizeof path, "%s/log.jsonl", run);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("{\"event\":\"start\",\"policy\":\"bf16-amp\",\"seed\":1,\"steps\":200,\"resumed_from\":0}\n", f);
    for (int i = 1; i <= 200; i++) fprintf(f, "{\"step\":%d,\"loss\":2}\n", i);
    fputs("{\"event\":\"start\",\"policy\":\"bf16-amp\",\"seed\":1,\"steps\":400,\"resumed_from\":200}\n", f);
    for (int i = 201; i <= 400; i++) fprintf(f, "{\"step\":%d,\"loss\":1}\n", i);
    fclose(f);
    runlog l;
    cr_assert_eq(runlog_read(&l, path, false, msg, sizeof msg), RUNLOG_OK, "%s", msg);
    cr_assert_eq(l.steps, 400);
    runlog_free(&l);
    report_opts o = {.dir = run};
    report_result r;
    cr_assert_eq(report_write(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    cr_assert_eq(r.ok, 1);
    const char *md = read_file("run/report.md");
    cr_assert(strstr(md, "1 run of 1 preset, 400 steps planned."), "%s", md);
    cr_assert(strstr(md, "| bf16-amp | 1 | ok | 400/400 |"), "%s", md);
    cr_assert(strstr(md, "# Run report: bf16-amp, seed 1\n"), "titled by what it is");
    cr_assert(!strstr(md, "Ablation report"));
}

// Links planted at the report's own names (report.md, plots/NAME.dat) are replaced by the rename,
// never followed (the file outside the directory was replaced); a plots/ that is a link is refused.
Test(report, planted_links_are_replaced_not_followed) {
    write_grid();
    char a[400], b[400], msg[512];
    write_file("outside.md", "precious\n");
    write_file("outside.dat", "precious too\n");
    snprintf(a, sizeof a, "%s/outside.md", dir), snprintf(b, sizeof b, "%s/report.md", dir);
    cr_assert_eq(symlink(a, b), 0);
    snprintf(b, sizeof b, "%s/plots", dir);
    cr_assert_eq(fio_mkdir_p(b, msg, sizeof msg), FIO_OK);
    snprintf(a, sizeof a, "%s/outside.dat", dir), snprintf(b, sizeof b, "%s/plots/val_loss.dat", dir);
    cr_assert_eq(symlink(a, b), 0);
    snprintf(b, sizeof b, "%s/plots/val_loss.log", dir);  // gnuplot's log: opened by xp_run
    cr_assert_eq(symlink(a, b), 0);
    report_result r;
    report_ok("/nonexistent/gnuplot", &r);
    cr_assert_str_eq(read_file("outside.md"), "precious\n");
    cr_assert_str_eq(read_file("outside.dat"), "precious too\n");
    struct stat st;
    snprintf(b, sizeof b, "%s/report.md", dir);
    cr_assert(lstat(b, &st) == 0 && S_ISREG(st.st_mode), "the link was replaced by the report");
    cr_assert(strstr(read_file("report.md"), "# Ablation report"));
    snprintf(b, sizeof b, "%s/plots/val_loss.dat", dir);
    cr_assert(lstat(b, &st) == 0 && S_ISREG(st.st_mode));
    // a plots/ that is a link to another directory: refused, nothing written there
    char cmd[900];
    snprintf(cmd, sizeof cmd, "rm -rf %s/plots && mkdir %s/elsewhere && ln -s %s/elsewhere %s/plots", dir, dir, dir, dir);
    cr_assert_eq(system(cmd), 0);
    report_opts o = {.dir = dir};
    cr_assert_eq(report_write(&o, NULL, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "plots' is a symbolic link"), "%s", msg);
    cr_assert(!exists("elsewhere/val_loss.dat"));
}

// A log as `fplab train --log FILE` writes it: losses base - 0.01 i, validation base + 1 at step 0 and
// base - 1 at the last step.
static void write_train_log(const char *rel, const char *policy, int seed, double base, int steps) {
    char p[400];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "w");
    cr_assert(f, "%s", p);
    fprintf(f, "{\"event\":\"start\",\"policy\":\"%s\",\"seed\":%d,\"model\":\"tiny\",\"steps\":%d,\"resumed_from\":0}\n",
            policy, seed, steps);
    fprintf(f, "{\"event\":\"val\",\"at_step\":0,\"val_loss\":%g}\n", base + 1);
    for (int i = 1; i < steps; i++)
        fprintf(f, "{\"step\":%d,\"loss\":%g,\"loss_scale\":1,\"skipped\":0}\n", i, base - 0.01 * i);
    fprintf(f, "{\"step\":%d,\"loss\":%g,\"val_loss\":%g}\n", steps, base - 0.01 * steps, base - 1);
    fclose(f);
}

// Two separate trainings (README: --log $d/noscale.jsonl) compared: logs and run directories as
// inputs, --out required, runs of one policy and seed named by their file; titled a comparison.
Test(report, compares_separate_runs) {
    new_dir();
    write_train_log("scaled.jsonl", "fp16-amp", 1, 3, 20);
    write_train_log("noscale.jsonl", "fp16-amp", 1, 3.5, 20);
    char msg[1024] = "", p1[300], p2[300], p3[300], out[300];
    snprintf(p1, sizeof p1, "%s/scaled.jsonl", dir);
    snprintf(p2, sizeof p2, "%s/noscale.jsonl", dir);
    const char *in[3] = {p1, p2, p3};
    report_opts o = {.inputs = in, .ninputs = 2};
    cr_assert_eq(report_write(&o, NULL, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "give --out DIR"), "%s", msg);
    o.ninputs = 1;
    cr_assert_eq(report_write(&o, NULL, msg, sizeof msg), XP_EINVAL, "a log alone: no directory to default to");
    // a fp32 run in its own directory as the third input
    snprintf(p3, sizeof p3, "%s/base", dir);
    cr_assert_eq(fio_mkdir_p(p3, msg, sizeof msg), FIO_OK);
    write_train_log("base/log.jsonl", "fp32", 1, 2.9, 20);
    snprintf(out, sizeof out, "%s/cmp", dir);
    o.ninputs = 3, o.out = out;
    report_result r;
    cr_assert_eq(report_write(&o, &r, msg, sizeof msg), XP_OK, "%s", msg);
    cr_assert_eq(r.runs, 3);
    cr_assert_eq(r.presets, 3, "scaled, noscale and fp32 apart, not two seeds of one preset");
    const char *md = read_file("cmp/report.md");
    cr_assert(strstr(md, "# Comparison of 3 runs\n"), "%s", md);
    cr_assert(strstr(md, "`: a run's log (runs: scaled seed 1)") && strstr(md, "(runs: noscale seed 1)") &&
              strstr(md, "`: a run's directory (runs: fp32 seed 1)"), "%s", md);
    cr_assert(strstr(md, "3 runs of 3 presets, 20 steps each."), "%s", md);
    char row[512];
    cr_assert_str_eq(line_of(md, "| noscale |", row, sizeof row),
                     "| noscale | 1/1 | 3.3000 | 2.5000 | +0.6 | 0 | — | — | — | — |");
    cr_assert(strstr(read_file("cmp/plots/val_delta.dat"), "# preset scaled"));
    // an input is never an output
    snprintf(out, sizeof out, "%s/scaled.jsonl", dir);
    snprintf(p3, sizeof p3, "%s/report.md", dir);
    cr_assert_eq(rename(p1, p3), 0);
    in[0] = p3, o.out = dir, o.ninputs = 1;
    cr_assert_eq(report_write(&o, NULL, msg, sizeof msg), XP_EINVAL);
    cr_assert(strstr(msg, "refusing to overwrite an input"), "%s", msg);
}

// Overflow and underflow per site over steps are drawn (they were tables only); more than 4
// presets are small multiples (one panel each, the baseline in grey, shared axes); the gradient
// underflow bars list only presets that have a bar (a preset whose rates are all zero is named
// in the caption instead of the legend).
Test(report, site_rates_over_steps_panels_and_bars) {
    write_grid();
    for (int q = 0; q < 3; q++) {  // three more presets: 6 in all, gradients that never underflow
        char name[32];
        snprintf(name, sizeof name, "zero%d", q);
        FILE *f = open_log(name, 1);
        start_line(f, name, 1);
        for (int i = 1; i <= 10; i++)
            fprintf(f, "{\"step\":%d,\"loss\":%g,\"skipped\":0%s,\"sites\":{\"attn.qkv.grad\":{\"n\":10,\"overflow\":0,"
                       "\"underflow\":0}}}\n", i, 3 - 0.1 * i - 0.01 * q, i == 5 ? ",\"val_loss\":2.6" : i == 10 ? ",\"val_loss\":2.1" : "");
        fclose(f);
    }
    report_result r;
    report_ok(NULL, &r);
    const char *o = read_file("plots/overflow.dat");
    char row[256];
    cr_assert(strstr(o, "# preset fp16-amp site attn.qkv.grad\n"), "%s", o);
    cr_assert_str_eq(line_of(strstr(o, "# preset fp16-amp site attn.qkv.grad"), "4\t", row, sizeof row), "4\t0.25\t2",
                     "seed 1 overflowed 0.5 at step 4, seed 2 not: mean 0.25");
    cr_assert(!strstr(o, "site mlp.down.grad"), "a site that never overflowed is not drawn");
    const char *u = read_file("plots/underflow.dat");
    cr_assert_str_eq(line_of(strstr(u, "# preset fp16-amp site attn.qkv.grad"), "3\t", row, sizeof row), "3\t0.015\t2");
    cr_assert(strstr(u, "# preset pure-bf16 site master\n"), "forward and master sites too");
    cr_assert(!strstr(u, "zero0"), "presets without underflow get no panel");
    const char *ugp = read_file("plots/underflow.gp");
    cr_assert(strstr(ugp, "set multiplot layout 1,2") && strstr(ugp, "set logscale y"), "%s", ugp);
    const char *vgp = read_file("plots/val_loss.gp");
    cr_assert(strstr(vgp, "set multiplot layout 2,3"), "6 presets: small multiples: %s", vgp);
    cr_assert(strstr(vgp, "lc rgb \"#a0a0a0\" title \"fp32\""), "the baseline in grey in the panels");
    cr_assert(strstr(vgp, "set yrange ["), "one y range for every panel");
    cr_assert(strstr(read_file("plots/val_delta.gp"), "set multiplot layout 2,3"), "5 deltas: panels");
    const char *bgp = read_file("plots/grad_underflow.gp");
    cr_assert(strstr(bgp, "title \"fp16-amp\"") && !strstr(bgp, "title \"zero0\""), "%s", bgp);
    cr_assert(strstr(read_file("plots/grad_underflow.dat"), "# site\tfp16-amp\tzero0\tzero1\tzero2\n"));
    cr_assert(strstr(read_file("report.md"), "No gradient site of zero0, zero1, zero2 underflowed: no bars."));
}

// train --grad-noise-every's member: the reader keeps both norms ("inf" read back as inf), and
// the report plots their ratio, mean over seeds, at the measured steps only, leaving out a step
// whose ratio is not finite and positive (an overflowed policy gradient), on a log axis with
// Chmiel et al.'s sqrt(3) drawn; a preset that measured nothing has no curve.
Test(report, gradient_noise_ratio) {
    new_dir();
    for (int s = 1; s <= 2; s++) {
        FILE *f = open_log("nvfp4", s);
        start_line(f, "nvfp4", s);
        for (int i = 1; i <= 10; i++) {
            fprintf(f, "{\"step\":%d,\"loss\":%g,\"grad_norm\":2", i, 3 - 0.1 * i);
            if (i % 2 == 0 && !(s == 2 && i == 4))
                fprintf(f, ",\"grad_noise\":{\"exact_norm\":2,\"noise_norm\":%g}", 0.1 * s * (i == 10 ? 10 : 1));
            else if (i == 4)
                fputs(",\"grad_noise\":{\"exact_norm\":2,\"noise_norm\":\"inf\"}", f);
            fprintf(f, "%s}\n", i == 10 ? ",\"val_loss\":2" : "");
        }
        fclose(f);
        write_fp32(s, 10);
    }
    runlog l;
    char msg[256], p[256];
    snprintf(p, sizeof p, "%s/runs/nvfp4/seed-2/log.jsonl", dir);
    cr_assert_eq(runlog_read(&l, p, false, msg, sizeof msg), RUNLOG_OK, "%s", msg);
    cr_assert(isnan(l.step[0].exact_norm) && isnan(l.step[0].noise_norm), "unmeasured step 1");
    cr_assert(l.step[1].exact_norm == 2 && l.step[1].noise_norm == 0.2);
    cr_assert(isinf(l.step[3].noise_norm), "step 4's \"inf\"");
    runlog_free(&l);
    report_result r;
    report_ok(NULL, &r);
    const char *d = read_file("plots/grad_snr.dat");
    cr_assert(!strstr(d, "# preset fp32"), "%s", d);
    char row[256];
    const char *b = strstr(d, "# preset nvfp4");
    cr_assert(b, "%s", d);
    cr_assert_str_eq(line_of(b, "2\t", row, sizeof row), "2\t15\t2");  // 2/0.1 and 2/0.2
    cr_assert_str_eq(line_of(b, "4\t", row, sizeof row), "4\t20\t1");  // seed 2's inf left out
    cr_assert_str_eq(line_of(b, "10\t", row, sizeof row), "10\t1.5\t2");
    cr_assert(!strstr(b, "\n3\t"), "an unmeasured step: %s", b);
    const char *gp = read_file("plots/grad_snr.gp");
    cr_assert(strstr(gp, "set logscale y") && strstr(gp, "first sqrt(3)"), "%s", gp);
    cr_assert(strstr(gp, "set yrange [1:*]"), "the axis reaches down to the threshold: %s", gp);
}
