// fileio.h: the file helpers of util/, the bottom layer every other layer may use (there is one
// copy of each): a monotonic clock, mkdir -p, files written through a temporary name and a
// rename, one writer per place, and "is this output one of my inputs?".
// Constraints: library level (status + message, never exits); POSIX; nothing of fplab's above
// util/ (tests/check_layers.sh). Internal to fplab: libfplab.a has these, libfplab.so hides them.
#ifndef FPLAB_FILEIO_H
#define FPLAB_FILEIO_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum { FIO_OK = 0, FIO_EINVAL = 1, FIO_EIO = 2 };
enum { FIO_PATH_MAX = 4096 };

// The error path of a function that returns a status and says why: formats the message into
// msg (when msg and msg_len), returns status.
int fio_fail(int status, char *msg, size_t msg_len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

// Seconds on a monotonic clock (for durations only).
double fio_now(void);
// A duration as "45.3 s", "12m05s", "3h07m" ("?" when negative or not finite).
void fio_fmt_duration(double s, char *buf, size_t cap);

// mkdir -p: creates path and its missing parents (mode 0777 & ~umask); FIO_OK when path is a
// directory at the end, else FIO_EIO (or FIO_EINVAL for a path too long) with a message.
int fio_mkdir_p(const char *path, char *msg, size_t msg_len);
bool fio_is_dir(const char *path);
bool fio_is_file(const char *path);

// Atomic write. fio_create opens a fresh temporary file next to `path` ("<path>.tmp.XXXXXX",
// mode 0666 & ~umask, as fopen would); write through `f`; fio_commit flushes, fsyncs, closes and
// renames it over path, then fsyncs the directory so the rename survives a crash. On any failure
// fio_commit removes the temporary file, leaves path as it was and says why; fio_abort just
// removes it. A reader never sees a half-written path, and two writers never share a temporary
// file.
// What path names decides how (the rule lives here, for every writer): nothing or a regular file
// is replaced by the rename; a symbolic link is followed to the file it names (the link stays,
// its file is replaced; a dangling link is refused); a FIFO or a character device (/dev/null,
// /dev/stdout) is written through (`through`: no temporary file, no rename, no fsync; its bytes
// leave as they are written, so an abort cannot take them back); a directory, block device or
// socket is refused by fio_create with a message, before anything is written.
typedef struct fio_out_s {
    FILE *f;
    bool through;                // written in place (FIFO, character device)
    char tmp[FIO_PATH_MAX + 16]; // "" when through
    char path[FIO_PATH_MAX];     // the file written: a symlink's target, resolved
} fio_out;
int fio_create(fio_out *o, const char *path, char *msg, size_t msg_len);
// The same for a name the command chose inside a directory it writes (a report's report.md and
// plots/NAME.dat), not one the user named: the name is the command's, so whatever stands there is
// replaced by the rename, a symbolic link included (never followed: a link planted in the
// directory must not send the write outside it), a FIFO too (never written through: a planted
// FIFO must not hang the command); only a directory is refused.
int fio_create_owned(fio_out *o, const char *path, char *msg, size_t msg_len);
int fio_commit(fio_out *o, char *msg, size_t msg_len);
void fio_abort(fio_out *o);
// The outputs of one command, committed together or not at all: every file is flushed, fsynced
// and closed before any is renamed, and a failure there removes every temporary file (so no
// output changes). Then the renames, which fail only in extraordinary cases (the directory
// removed meanwhile); the message then names the output that failed. Each outs[i] comes from a
// successful fio_create and is closed afterwards whatever the outcome (fio_commit is n = 1).
int fio_commit_all(fio_out *const *outs, int n, char *msg, size_t msg_len);
// Appends n bytes to an output created by fio_create: what f holds is flushed, then the bytes go
// straight to the descriptor, large ones in pieces whose writeback starts while the rest is
// copied (fio_commit's fsync then waits for less). Mix it with writes through f only before it.
// FIO_EIO with "'PATH': write failed: ..." on failure; the caller then aborts (fio_abort) the
// output, which leaves path as it was.
int fio_write(fio_out *o, const void *data, size_t n, char *msg, size_t msg_len);
// The whole of data written atomically to path (fio_create + fio_write + fio_commit).
int fio_write_file(const char *path, const void *data, size_t n, char *msg, size_t msg_len);

// One writer per place: an exclusive lock (flock) on the file `lock_path` (created if missing,
// mode 0666 & ~umask), held until *fd is closed (or fio_unlock) or the process ends; with
// `inherit`, child processes started afterwards inherit it and hold it until they end too (an
// ablation's runs). The file keeps the holder's pid as text. FIO_EINVAL "WHAT is in use by WHO
// (pid N, lock 'PATH'); wait for it to end or choose another" when another process (or another
// descriptor of this one) holds it, e.g. two trainings given one --ckpt-dir, whatever MPI or the
// launcher says; FIO_EINVAL too, before anything is written, when lock_path is a symbolic link, a
// hard link (a file with another name, whose contents the pid would replace) or not a regular
// file; FIO_EIO when the file cannot be created or locked. A lock file its holder removed
// (fio_unlock) while this call was opening it is noticed and the lock taken on a new file.
int fio_lock(const char *lock_path, const char *what, const char *who, bool inherit, int *fd, char *msg,
             size_t msg_len);
// Releases a lock of fio_lock and removes its file, so that a run that ends leaves no lock file
// behind: the file is unlinked while still locked, and only when lock_path still names it
// (fio_lock's waiters then start again on a new file; see there). *fd becomes -1; nothing when it
// is already. With an inherited lock, only once no child that inherited it is alive.
void fio_unlock(int *fd, const char *lock_path);
// An output that one process at a time appends to while it works (a training's log), opened for
// appending (O_APPEND: every write lands at the end, so a truncation by anyone cannot leave a
// hole at an old offset). A regular file (created if missing, mode 0666 & ~umask, never
// truncated here) is locked (flock) until *f is closed: FIO_EINVAL "WHAT is in use by WHO ..."
// when another process holds it. A FIFO or character device (/dev/stdout, /dev/null) is opened
// for writing alone, without a lock; a directory or another special file is refused (FIO_EINVAL).
// The caller truncates (ftruncate of fileno) what it means to replace, once it holds the lock.
int fio_open_append(const char *path, const char *what, const char *who, FILE **f, char *msg, size_t msg_len);
// Removes the temporary files fio_create left next to path when a process was killed between
// fio_create and fio_commit ("<path>.tmp.XXXXXX": that name, six characters, a regular file).
// Only for a caller that holds the fio_lock making it path's one writer (else it could remove a
// live writer's file). Returns how many were removed.
int fio_remove_orphans(const char *path);

// True when both paths name one existing file (the same device and inode after following
// links: a symlink, a hard link or "./x" against "x" all count). A path that does not exist
// yet is nobody's input, so it is false then.
bool fio_same_file(const char *a, const char *b);
// True when two output paths name one file, existing or not: the same string, one existing file
// (fio_same_file), or the same name in the same directory (device and inode of the directories),
// so "x.npy" and "./x.npy" count before either exists.
bool fio_same_target(const char *a, const char *b);
// The one input/output check every command that writes goes through. FIO_EINVAL with "--OUT_OPT
// 'out' is the same file as --IN_OPT 'in'; refusing to overwrite an input" when out and in name
// one existing file (fio_same_file); when out ends in '/' (the directory of a command that
// writes a tree of files, such as ablate's --out) and exists, also when in lies inside it at any
// depth ("... lies inside --OUT_OPT"), since any name there may be written. Else FIO_OK. Empty or
// NULL paths pass.
// An option name in upper case (IN, OUT) names a positional argument and is printed bare.
int fio_refuse_same(const char *out_opt, const char *out, const char *in_opt, const char *in, char *msg,
                    size_t msg_len);
// Every input of a command: its option (for messages) and path; `list`: path is a comma-separated
// list of files (the trainer's --data shards). Inputs a checkpoint names (its run's corpus and
// validation shard) belong here as much as those on the command line.
typedef struct {
    const char *opt, *path;
    bool list;
} fio_input;
// fio_refuse_same of out against each input (each file of a list); the first refusal's status
// and message.
int fio_refuse_inputs(const char *out_opt, const char *out, const fio_input *in, int n, char *msg, size_t msg_len);

// --- reading
// The whole file as a NUL-terminated string (malloc'd), or NULL if it cannot be read.
char *fio_slurp(const char *path);
// The last `lines` lines of the file at path into buf (NUL-terminated, at most cap - 1 bytes,
// cut at the front when longer; a NUL byte in the file reads as a space); "" when the file is
// missing or empty. Returns strlen(buf).
size_t fio_tail(const char *path, int lines, char *buf, size_t cap);

#endif
