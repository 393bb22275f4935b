// xp_util.h: what the experiment runner (ablate.h) and the report (report.h) share: status
// codes, directories, files written through a temporary and a rename, the tail of a file,
// and starting a child process with its output in a file.
// Constraints: library level (status + message, never exits); POSIX (fork/execv/waitpid).
#ifndef FPLAB_XP_UTIL_H
#define FPLAB_XP_UTIL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

enum { XP_OK = 0, XP_EINVAL = 1, XP_EIO = 2, XP_ENOMEM = 3 };

// mkdir -p: creates path and its missing parents (mode 0777 & ~umask).
int xp_mkdir_p(const char *path, char *msg, size_t msg_len);
bool xp_is_dir(const char *path);
bool xp_is_file(const char *path);
// The whole file as a NUL-terminated string (malloc'd), or NULL if it cannot be read.
char *xp_slurp(const char *path);

// Atomic write: xp_create opens "<path>.tmp.<pid>" for writing (its name in tmp, tmp_cap
// bytes); xp_commit closes it, checks for write errors and renames it to path, or removes it
// and says why. On failure of xp_create, NULL with a message.
FILE *xp_create(const char *path, char *tmp, size_t tmp_cap, char *msg, size_t msg_len);
int xp_commit(FILE *f, const char *tmp, const char *path, char *msg, size_t msg_len);

// The last `lines` lines of the file at path into buf (NUL-terminated, at most cap - 1 bytes,
// cut at the front when longer); "" when the file is missing or empty. Returns strlen(buf).
size_t xp_tail(const char *path, int lines, char *buf, size_t cap);

// Starts `exe` with argv (NULL-terminated; argv[0] is what the child sees as its name) in
// directory cwd (NULL: this one), stdin from /dev/null, stdout and stderr to the file out
// (created or truncated; NULL: /dev/null). If exec fails the child writes why to out and
// exits 127. The child gets SIGTERM when this process dies (Linux PR_SET_PDEATHSIG). Returns the pid, or -1 with a message when fork or opening out fails.
pid_t xp_spawn(const char *exe, char *const argv[], const char *cwd, const char *out, char *msg,
               size_t msg_len);
// Takes an exclusive lock on DIR/.lock (flock) so that two ablations never run in one
// directory. Returns the descriptor (close it to release; the children started afterwards
// inherit it, so it is held until they are gone too), or -1 with a message.
int xp_lock(const char *dir, char *msg, size_t msg_len);
// "exit status N", "killed by signal N (name)" from a waitpid status.
void xp_describe_status(int wstatus, char *buf, size_t cap);
// A duration as "45.3 s", "12m05s", "3h07m".
void xp_fmt_duration(double s, char *buf, size_t cap);
// Seconds on a monotonic clock (for durations only).
double xp_now(void);

#endif
