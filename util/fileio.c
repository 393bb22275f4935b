// fileio.c: clock, mkdir -p, atomic files, locks, same-file checks, reading whole files and
// tails (see fileio.h).
#include "util/fileio.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int fio_fail(int status, char *msg, size_t msg_len, const char *fmt, ...) {
    if (msg && msg_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msg_len, fmt, ap);
        va_end(ap);
    }
    return status;
}

double fio_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void fio_fmt_duration(double s, char *buf, size_t cap) {
    if (!(s >= 0) || !isfinite(s)) snprintf(buf, cap, "?");
    else if (s < 60) snprintf(buf, cap, "%.1f s", s);
    else if (s < 3600) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else if (s < 1e9) snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else snprintf(buf, cap, "%.3g h", s / 3600);
}

bool fio_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool fio_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int fio_mkdir_p(const char *path, char *msg, size_t msg_len) {
    char p[FIO_PATH_MAX];
    if (!path[0] || snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
        snprintf(msg, msg_len, "'%.60s': empty or too long a directory name", path);
        return FIO_EINVAL;
    }
    for (char *q = p + 1;; q++) {
        if (*q != '/' && *q) continue;
        const char keep = *q;
        *q = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            snprintf(msg, msg_len, "cannot create directory '%s': %s", p, strerror(errno));
            return FIO_EIO;
        }
        if (!fio_is_dir(p)) {
            snprintf(msg, msg_len, "'%s' exists and is not a directory", p);
            return FIO_EIO;
        }
        *q = keep;
        if (!keep) break;
    }
    return FIO_OK;
}

// What may stand at an output's path: nothing or a regular file (replaced by a rename), a FIFO or
// a character device (written through: renaming over /dev/null would replace the device with a
// regular file), a symlink (followed to what it names, which must be one of these). Anything else
// (a directory, a block device, a socket, a dangling link) is refused before a byte is written.
// A name the command chose inside a directory it writes (`owned`) is its own: whatever stands
// there but a directory is replaced by the rename, a link included (never followed).
static int out_target(fio_out *o, const char *path, bool owned, char *msg, size_t msg_len) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return snprintf(o->path, sizeof o->path, "%s", path), FIO_OK;
        return fio_fail(FIO_EIO, msg, msg_len, "'%s': cannot write there: %s", path, strerror(errno));
    }
    snprintf(o->path, sizeof o->path, "%s", path);
    if (owned && !S_ISDIR(st.st_mode)) return FIO_OK;
    if (S_ISLNK(st.st_mode)) {
        if (stat(path, &st) != 0)
            return fio_fail(FIO_EINVAL, msg, msg_len,
                            "'%s': a symbolic link to a missing file (or a loop); expected a link to a file, "
                            "or a plain file name", path);
        // A file is replaced where it is (the link stays); a device or FIFO is opened through the
        // link itself (/dev/stdout names a pipe or terminal that has no path of its own).
        if (S_ISREG(st.st_mode)) {
            char *real = realpath(path, NULL);
            const bool fits = real && snprintf(o->path, sizeof o->path, "%s", real) < (int)sizeof o->path;
            free(real);
            if (!fits) return fio_fail(FIO_EINVAL, msg, msg_len, "'%.60s': cannot resolve the link's file", path);
        }
    }
    if (S_ISREG(st.st_mode)) return FIO_OK;
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return o->through = true, FIO_OK;
    const char *what = S_ISDIR(st.st_mode) ? "a directory" : S_ISBLK(st.st_mode) ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket" : "not a regular file";
    return fio_fail(FIO_EINVAL, msg, msg_len, "'%s' is %s; refusing to write there (expected a file name)", path, what);
}

static int create(fio_out *o, const char *path, bool owned, char *msg, size_t msg_len) {
    o->f = NULL, o->through = false, o->tmp[0] = 0;
    if (strlen(path) >= sizeof o->path) return fio_fail(FIO_EINVAL, msg, msg_len, "'%.60s...': path too long", path);
    if (!path[0]) return fio_fail(FIO_EINVAL, msg, msg_len, "empty output path; expected a file name");
    const int st = out_target(o, path, owned, msg, msg_len);
    if (st != FIO_OK) return st;
    if (o->through) {
        const int fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
            const int e = errno;
            if (fd >= 0) close(fd);
            return fio_fail(FIO_EIO, msg, msg_len, "'%s': cannot open it for writing: %s", path, strerror(e));
        }
        return FIO_OK;
    }
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp.XXXXXX", o->path);
    const int fd = mkstemp(o->tmp);
    if (fd < 0)
        return fio_fail(FIO_EIO, msg, msg_len, "'%s': cannot create a temporary file next to it: %s", path,
                        strerror(errno));
    const mode_t um = umask(0);  // mkstemp makes 0600; give the file the mode fopen would
    umask(um);
    if (fchmod(fd, 0666 & ~um) != 0 || !(o->f = fdopen(fd, "wb"))) {
        const int e = errno;
        close(fd), unlink(o->tmp);
        return fio_fail(FIO_EIO, msg, msg_len, "'%s': cannot open a temporary file: %s", path, strerror(e));
    }
    return FIO_OK;
}

int fio_create(fio_out *o, const char *path, char *msg, size_t msg_len) { return create(o, path, false, msg, msg_len); }
int fio_create_owned(fio_out *o, const char *path, char *msg, size_t msg_len) {
    return create(o, path, true, msg, msg_len);
}

void fio_abort(fio_out *o) {
    if (!o->f) return;
    fclose(o->f), o->f = NULL;
    if (!o->through) unlink(o->tmp);
}

// Everything but the rename: flush, fsync (a file only: a device or FIFO has nothing to sync),
// close. 0 or the errno; o->f is closed either way.
static int out_finish(fio_out *o) {
    int err = ferror(o->f) ? (errno ? errno : EIO) : 0;
    if (!err && fflush(o->f) != 0) err = errno;
    if (!err && !o->through && fsync(fileno(o->f)) != 0) err = errno;
    if (fclose(o->f) != 0 && !err) err = errno;
    o->f = NULL;
    return err;
}

static void fsync_dir_of(const char *path) {
    char dir[FIO_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
    const int dfd = open(d, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) fsync(dfd), close(dfd);
}

int fio_commit(fio_out *o, char *msg, size_t msg_len) { return fio_commit_all(&o, 1, msg, msg_len); }

int fio_commit_all(fio_out *const *outs, int n, char *msg, size_t msg_len) {
    // Files first (each complete and on disk before any is renamed), written-through outputs last
    // (their bytes are out already; a failure among the files still keeps every file as it was).
    int bad = -1, err = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            fio_out *o = outs[i];
            if (!o->f || o->through != (pass == 1)) continue;
            if (bad >= 0) {
                fio_abort(o);
                continue;
            }
            if ((err = out_finish(o)) != 0) bad = i;
        }
    if (bad < 0)
        for (int i = 0; i < n; i++)
            if (!outs[i]->through && outs[i]->tmp[0] && rename(outs[i]->tmp, outs[i]->path) != 0) {
                err = errno, bad = i;  // a rename fails before it replaces anything: the rest stay as they were
                break;
            }
    if (bad >= 0) {
        for (int i = 0; i < n; i++) {
            fio_abort(outs[i]);
            if (!outs[i]->through && outs[i]->tmp[0]) unlink(outs[i]->tmp);
        }
        return fio_fail(FIO_EIO, msg, msg_len, "'%s': write failed: %s (%s)", outs[bad]->path, strerror(err),
                        n > 1 ? "the outputs not yet renamed are as they were" : "the previous file, if any, is intact");
    }
    // Make the renames durable; a failure here cannot undo the (complete) files.
    for (int i = 0; i < n; i++)
        if (!outs[i]->through) fsync_dir_of(outs[i]->path);
    return FIO_OK;
}

static bool write_all(int fd, const char *p, size_t n) {
    while (n) {
        const ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k, n -= (size_t)k;
    }
    return true;
}

// Straight to the descriptor, in pieces of 8 MiB, each handed to the disk (sync_file_range:
// writeback started, not waited for) as soon as it is in the page cache, so that the device
// writes the file while the rest is still being copied and the fsync of fio_commit waits for
// less (a 64 MiB .npy: write 17 ms then fsync 23 ms, one after the other, before).
int fio_write(fio_out *o, const void *data, size_t n, char *msg, size_t msg_len) {
    const int fd = fileno(o->f);
    const size_t piece = (size_t)8 << 20;
    const char *p = data;
    errno = 0;
    bool ok = fflush(o->f) == 0 && !ferror(o->f);
    const off_t off = ok && !o->through ? lseek(fd, 0, SEEK_CUR) : -1;
    for (size_t done = 0; ok && done < n; done += piece) {
        const size_t len = n - done < piece ? n - done : piece;
        ok = write_all(fd, p + done, len);
#ifdef SYNC_FILE_RANGE_WRITE
        if (ok && off >= 0) sync_file_range(fd, off + (off_t)done, (off_t)len, SYNC_FILE_RANGE_WRITE);  // a hint: errors are fsync's
#else
        (void)off;
#endif
    }
    if (ok) return FIO_OK;
    return fio_fail(FIO_EIO, msg, msg_len, "'%s': write failed: %s (the previous file, if any, is intact)", o->path,
                    strerror(errno ? errno : EIO));
}

int fio_write_file(const char *path, const void *data, size_t n, char *msg, size_t msg_len) {
    fio_out o;
    int st = fio_create(&o, path, msg, msg_len);
    if (st == FIO_OK && (st = fio_write(&o, data, n, msg, msg_len)) != FIO_OK) fio_abort(&o);
    return st == FIO_OK ? fio_commit(&o, msg, msg_len) : st;
}

bool fio_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (!a || !b || !a[0] || !b[0] || stat(a, &sa) != 0 || stat(b, &sb) != 0) return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool fio_same_target(const char *a, const char *b) {
    if (!strcmp(a, b) || fio_same_file(a, b)) return true;
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    const char *na = sa ? sa + 1 : a, *nb = sb ? sb + 1 : b;
    if (strcmp(na, nb)) return false;
    char da[FIO_PATH_MAX], db[FIO_PATH_MAX];
    snprintf(da, sizeof da, "%.*s", sa ? (int)(sa - a) + 1 : 1, sa ? a : ".");
    snprintf(db, sizeof db, "%.*s", sb ? (int)(sb - b) + 1 : 1, sb ? b : ".");
    struct stat x, y;
    return stat(da, &x) == 0 && stat(db, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

// Whether the existing file `in` lies inside the existing directory `dir` (their real paths).
static bool inside_dir(const char *dir, const char *in) {
    char *d = realpath(dir, NULL), *f = realpath(in, NULL);
    const size_t n = d ? strlen(d) : 0;
    const bool yes = d && f && !strncmp(d, f, n) && (f[n] == '/' || (n == 1 && d[0] == '/'));
    free(d), free(f);
    return yes;
}

// "--name" for an option, the bare name for a positional argument (upper case: IN, OUT).
static const char *dashes(const char *opt) { return opt[0] >= 'A' && opt[0] <= 'Z' ? "" : "--"; }

int fio_refuse_same(const char *out_opt, const char *out, const char *in_opt, const char *in, char *msg,
                    size_t msg_len) {
    if (!out || !in || !out[0] || !in[0]) return FIO_OK;
    if (fio_same_file(out, in))
        return fio_fail(FIO_EINVAL, msg, msg_len, "%s%s '%s' is the same file as %s%s '%s'; refusing to overwrite "
                        "an input", dashes(out_opt), out_opt, out, dashes(in_opt), in_opt, in);
    if (out[strlen(out) - 1] == '/' && fio_is_dir(out) && fio_is_file(in) && inside_dir(out, in))
        return fio_fail(FIO_EINVAL, msg, msg_len, "%s%s '%s' lies inside %s%s '%s', whose files this command "
                        "writes; refusing to risk overwriting an input (move it out, or choose another %s%s)",
                        dashes(in_opt), in_opt, in, dashes(out_opt), out_opt, out, dashes(out_opt), out_opt);
    return FIO_OK;
}

int fio_refuse_inputs(const char *out_opt, const char *out, const fio_input *in, int n, char *msg, size_t msg_len) {
    for (int i = 0; i < n; i++) {
        if (!in[i].path || !in[i].path[0]) continue;
        if (!in[i].list) {
            const int st = fio_refuse_same(out_opt, out, in[i].opt, in[i].path, msg, msg_len);
            if (st != FIO_OK) return st;
            continue;
        }
        char one[FIO_PATH_MAX];
        for (const char *p = in[i].path, *e; *p; p = e + (*e != 0)) {
            e = strchr(p, ',');
            if (!e) e = p + strlen(p);
            snprintf(one, sizeof one, "%.*s", (int)(e - p), p);
            const int st = fio_refuse_same(out_opt, out, in[i].opt, one, msg, msg_len);
            if (st != FIO_OK) return st;
        }
    }
    return FIO_OK;
}

// What may hold a lock's pid: a file of its own. A hard link would give the pid to another name's
// contents; anything but a regular file is not ours either. NULL when it may.
static const char *lock_problem(const struct stat *st) {
    if (!S_ISREG(st->st_mode)) return "is not a regular file";
    if (st->st_nlink > 1) return "has other names (a hard link: its contents belong to another file too)";
    return NULL;
}

// Closes d and says why its lock file is refused (lock_problem's words).
static int lock_refused(int d, const char *what, const char *lock_path, const char *bad, char *msg, size_t msg_len) {
    close(d);
    return fio_fail(FIO_EINVAL, msg, msg_len, "%s: the lock file '%s' %s; refusing to write into it (remove that "
                    "name and try again)", what, lock_path, bad);
}

int fio_lock(const char *lock_path, const char *what, const char *who, bool inherit, int *fd, char *msg,
             size_t msg_len) {
    *fd = -1;
    // A holder that ends cleanly removes the file while it still holds the lock (fio_unlock). One
    // that opened the file before that takes the lock of a file without a name: it sees that (the
    // path names another file, or none) and starts again. A few rounds at most in practice.
    for (int round = 0; round < 1000; round++) {
        const int d = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY | (inherit ? 0 : O_CLOEXEC), 0666);
        if (d < 0 && errno == ELOOP)  // O_NOFOLLOW: the lock would be written through the link
            return fio_fail(FIO_EINVAL, msg, msg_len, "%s: the lock file '%s' is a symbolic link; refusing to write "
                            "through it (remove that name and try again)", what, lock_path);
        if (d < 0)
            return fio_fail(FIO_EIO, msg, msg_len, "%s: cannot create the lock file '%s': %s", what, lock_path,
                            strerror(errno));
        struct stat st, now;
        const char *bad = fstat(d, &st) == 0 ? lock_problem(&st) : "cannot be examined";
        if (bad) return lock_refused(d, what, lock_path, bad, msg, msg_len);  // before a byte is written or read
        if (flock(d, LOCK_EX | LOCK_NB) != 0) {
            const int e = errno;
            char pid[32] = "";
            const ssize_t n = e == EWOULDBLOCK ? pread(d, pid, sizeof pid - 1, 0) : -1;
            pid[n > 0 ? n : 0] = 0;
            pid[strcspn(pid, "\n")] = 0;
            close(d);
            if (e != EWOULDBLOCK)
                return fio_fail(FIO_EIO, msg, msg_len, "%s: cannot lock '%s': %s", what, lock_path, strerror(e));
            return fio_fail(FIO_EINVAL, msg, msg_len, "%s is in use by %s (%s%s%slock '%s'); wait for it to end or "
                            "choose another", what, who, pid[0] ? "pid " : "", pid, pid[0] ? ", " : "", lock_path);
        }
        if (fstat(d, &st) != 0 || lstat(lock_path, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
            close(d);  // removed (or replaced) by its holder since we opened it
            continue;
        }
        if ((bad = lock_problem(&st)))  // a link made meanwhile
            return lock_refused(d, what, lock_path, bad, msg, msg_len);
        char pid[32];
        const int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(d, 0) != 0 || pwrite(d, pid, (size_t)n, 0) != n) {}  // the pid is for people only
        *fd = d;
        return FIO_OK;
    }
    return fio_fail(FIO_EIO, msg, msg_len, "%s: cannot lock '%s': it keeps being removed and created again", what,
                    lock_path);
}

void fio_unlock(int *fd, const char *lock_path) {
    if (*fd < 0) return;
    struct stat mine, there;
    if (fstat(*fd, &mine) == 0 && lstat(lock_path, &there) == 0 && mine.st_dev == there.st_dev &&
        mine.st_ino == there.st_ino)
        unlink(lock_path);  // still holding it: nobody can have taken it in between
    close(*fd), *fd = -1;
}

int fio_open_append(const char *path, const char *what, const char *who, FILE **f, char *msg, size_t msg_len) {
    *f = NULL;
    struct stat st;
    const bool exists = stat(path, &st) == 0;
    if (exists && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {  // written through; nothing to lock
        const int d = open(path, O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
        if (d < 0 || !(*f = fdopen(d, "a"))) {
            const int e = errno;
            if (d >= 0) close(d);
            return fio_fail(FIO_EIO, msg, msg_len, "%s: cannot open it for writing: %s", what, strerror(e));
        }
        return FIO_OK;
    }
    if (exists && !S_ISREG(st.st_mode))
        return fio_fail(FIO_EINVAL, msg, msg_len, "%s is %s; refusing to write there (expected a file name)", what,
                        S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    const int d = open(path, O_RDWR | O_CREAT | O_APPEND | O_NOCTTY | O_CLOEXEC, 0666);
    if (d < 0) return fio_fail(FIO_EIO, msg, msg_len, "%s: cannot open it for writing: %s", what, strerror(errno));
    if (fstat(d, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(d);
        return fio_fail(FIO_EINVAL, msg, msg_len, "%s is not a regular file; refusing to write there", what);
    }
    if (flock(d, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        close(d);
        if (e != EWOULDBLOCK) return fio_fail(FIO_EIO, msg, msg_len, "%s: cannot lock it: %s", what, strerror(e));
        return fio_fail(FIO_EINVAL, msg, msg_len, "%s is in use by %s (it holds the file's lock); wait for it to "
                        "end or choose another", what, who);
    }
    if (!(*f = fdopen(d, "a+"))) {
        const int e = errno;
        close(d);
        return fio_fail(FIO_EIO, msg, msg_len, "%s: cannot open it for writing: %s", what, strerror(e));
    }
    return FIO_OK;
}

int fio_remove_orphans(const char *path) {
    char dir[FIO_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : path;
    const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
    const size_t nb = strlen(base);
    DIR *dp = opendir(d);
    if (!dp) return 0;
    int removed = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        const char *name = e->d_name;
        if (strncmp(name, base, nb) != 0 || strncmp(name + nb, ".tmp.", 5) != 0 || strlen(name + nb + 5) != 6)
            continue;
        char full[FIO_PATH_MAX + 300];
        snprintf(full, sizeof full, "%s/%s", d, name);
        struct stat st;
        if (lstat(full, &st) == 0 && S_ISREG(st.st_mode) && unlink(full) == 0) removed++;
    }
    closedir(dp);
    return removed;
}

// --- reading

char *fio_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) s[fread(s, 1, (size_t)n, f)] = 0;
    fclose(f);
    return s;
}

size_t fio_tail(const char *path, int lines, char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f || cap < 2) {
        if (f) fclose(f);
        return 0;
    }
    // Read the last cap-1 bytes at most, then keep the last `lines` lines of them.
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    const long start = size > (long)cap - 1 ? size - ((long)cap - 1) : 0;
    fseek(f, start, SEEK_SET);
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    for (size_t i = 0; i < n; i++)
        if (!buf[i]) buf[i] = ' ';  // a NUL would end the text early
    while (n && buf[n - 1] == '\n') buf[--n] = 0;
    size_t from = 0;
    int seen = 0;
    for (size_t i = n; i-- > 0;)
        if (buf[i] == '\n' && ++seen == lines) {
            from = i + 1;
            break;
        }
    memmove(buf, buf + from, n - from + 1);
    return n - from;
}
