// proc.h: the process helpers of util/ (prefix xp_): starting a child process with its output in
// a file, waiting for it, saying how it ended. Used by experiments/ (ablate's runs, gnuplot).
// Constraints: library level (status + message, never exits); POSIX (fork/execv/waitpid);
// nothing of fplab's above util/. Internal to fplab: libfplab.so hides these.
#ifndef FPLAB_UTIL_PROC_H
#define FPLAB_UTIL_PROC_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

// Starts `exe` with argv (NULL-terminated; argv[0] is what the child sees as its name) in
// directory cwd (NULL: this one), stdin from /dev/null, stdout and stderr to the file out
// (created or truncated; NULL: /dev/null). If exec fails the child writes why to out and
// exits 127. The child gets SIGTERM when this process dies (Linux PR_SET_PDEATHSIG). Returns the
// pid, or -1 with a message when fork or opening out fails.
pid_t xp_spawn(const char *exe, char *const argv[], const char *cwd, const char *out, char *msg,
               size_t msg_len);
// xp_spawn, then waits for the child to end: true with its wait status in *ws; false with why in
// msg when it could not be started or waited for.
bool xp_run(const char *exe, char *const argv[], const char *cwd, const char *out, int *ws, char *msg,
            size_t msg_len);
// "exit status N", "killed by signal N (name)" from a waitpid status.
void xp_describe_status(int wstatus, char *buf, size_t cap);

#endif
