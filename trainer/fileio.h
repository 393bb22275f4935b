// fileio.h: the file and process helpers every layer from trainer/ up shares (there is one copy
// of each): a monotonic clock, mkdir -p, files written through a temporary name and a rename,
// and "is this output one of my inputs?".
// Constraints: library level (status + message, never exits); POSIX. trainer/ is the lowest
// layer that writes files (checkpoints, exports); experiments/ and cli/ use these too.
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
// mode 0644 & ~umask); write through `f`; fio_commit flushes, fsyncs, closes and renames it over
// path, then fsyncs the directory so the rename survives a crash. On any failure fio_commit
// removes the temporary file, leaves path as it was and says why; fio_abort just removes it.
// A reader never sees a half-written path, and two writers never share a temporary file.
typedef struct {
    FILE *f;
    char tmp[FIO_PATH_MAX + 16];
    char path[FIO_PATH_MAX];
} fio_out;
int fio_create(fio_out *o, const char *path, char *msg, size_t msg_len);
int fio_commit(fio_out *o, char *msg, size_t msg_len);
void fio_abort(fio_out *o);
// The whole of data written atomically to path (fio_create + fwrite + fio_commit).
int fio_write_file(const char *path, const void *data, size_t n, char *msg, size_t msg_len);

// True when both paths name one existing file (the same device and inode after following
// links: a symlink, a hard link or "./x" against "x" all count). A path that does not exist
// yet is nobody's input, so it is false then.
bool fio_same_file(const char *a, const char *b);
// True when two output paths name one file, existing or not: the same string, one existing file
// (fio_same_file), or the same name in the same directory (device and inode of the directories),
// so "x.npy" and "./x.npy" count before either exists.
bool fio_same_target(const char *a, const char *b);
// Guard for commands that write: FIO_EINVAL with "--OUT_OPT 'out' is the same file as --IN_OPT
// 'in'; refusing to overwrite an input" when fio_same_file(out, in), else FIO_OK. Empty or
// NULL paths pass.
int fio_refuse_same(const char *out_opt, const char *out, const char *in_opt, const char *in, char *msg,
                    size_t msg_len);

#endif
