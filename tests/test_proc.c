// test_proc.c: the process helpers of util/proc.h: a child's output goes to the file named, its
// exit status and signal come back through xp_run and read as xp_describe_status says, and a
// program that cannot be executed exits 127 with why in its output file.
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/test_util.h"
#include "util/fileio.h"
#include "util/proc.h"

static char dir[64];

static void mkdir_tmp(void) { tu_tmpdir(dir, sizeof dir, "proc"); }
static void rm_tmp(void) { tu_rmtree(dir); }
TestSuite(proc, .init = mkdir_tmp, .fini = rm_tmp);

Test(proc, runs_a_child_with_its_output_in_a_file) {
    char out[128], msg[256], buf[128];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    char *const argv[] = {"sh", "-c", "pwd; echo to-stderr >&2; read x; echo \"[$x]\"; exit 3", NULL};
    int ws;
    cr_assert(xp_run("/bin/sh", argv, dir, out, &ws, msg, sizeof msg), "%s", msg);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 3);
    xp_describe_status(ws, buf, sizeof buf);
    cr_assert_str_eq(buf, "exit status 3");
    char *text = fio_slurp(out);
    cr_assert(text);
    char want[256];
    snprintf(want, sizeof want, "%s\nto-stderr\n[]\n", dir);  // cwd, stderr, stdin from /dev/null
    cr_assert_str_eq(text, want);
    free(text);
}

Test(proc, says_how_a_child_ended) {
    char msg[256], buf[128];
    char *const argv[] = {"sh", "-c", "kill -TERM $$", NULL};
    int ws;
    cr_assert(xp_run("/bin/sh", argv, NULL, NULL, &ws, msg, sizeof msg), "%s", msg);
    cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGTERM);
    xp_describe_status(ws, buf, sizeof buf);
    cr_assert(strstr(buf, "killed by signal 15"), "%s", buf);
}

Test(proc, a_program_that_cannot_run_exits_127_and_says_why) {
    char out[128], msg[256], buf[128];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    char *const argv[] = {"nope", NULL};
    int ws;
    cr_assert(xp_run("/nonexistent/nope", argv, NULL, out, &ws, msg, sizeof msg), "%s", msg);
    xp_describe_status(ws, buf, sizeof buf);
    cr_assert_str_eq(buf, "exit status 127 (could not execute?)");
    fio_tail(out, 1, buf, sizeof buf);
    cr_assert(strstr(buf, "cannot execute /nonexistent/nope"), "%s", buf);
    // An output file that cannot be created is refused before anything starts.
    snprintf(out, sizeof out, "%s/no/such/dir/out.txt", dir);
    cr_assert_eq(xp_spawn("/bin/true", argv, NULL, out, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "cannot write"), "%s", msg);
}
