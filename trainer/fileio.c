// fileio.c: clock, mkdir -p, atomic files, same-file checks (see fileio.h).
#include "trainer/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
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

int fio_create(fio_out *o, const char *path, char *msg, size_t msg_len) {
    o->f = NULL;
    if (snprintf(o->path, sizeof o->path, "%s", path) >= (int)sizeof o->path) {
        snprintf(msg, msg_len, "'%.60s...': path too long", path);
        return FIO_EINVAL;
    }
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp.XXXXXX", path);
    const int fd = mkstemp(o->tmp);
    if (fd < 0) {
        snprintf(msg, msg_len, "'%s': cannot create a temporary file next to it: %s", path, strerror(errno));
        return FIO_EIO;
    }
    const mode_t um = umask(0);  // mkstemp makes 0600; give the file the mode fopen would
    umask(um);
    if (fchmod(fd, 0666 & ~um) != 0 || !(o->f = fdopen(fd, "wb"))) {
        snprintf(msg, msg_len, "'%s': cannot open a temporary file: %s", path, strerror(errno));
        close(fd), unlink(o->tmp);
        return FIO_EIO;
    }
    return FIO_OK;
}

void fio_abort(fio_out *o) {
    if (!o->f) return;
    fclose(o->f), o->f = NULL;
    unlink(o->tmp);
}

int fio_commit(fio_out *o, char *msg, size_t msg_len) {
    int err = ferror(o->f) ? (errno ? errno : EIO) : 0;
    if (!err && (fflush(o->f) != 0 || fsync(fileno(o->f)) != 0)) err = errno;
    if (fclose(o->f) != 0 && !err) err = errno;
    o->f = NULL;
    if (!err && rename(o->tmp, o->path) != 0) err = errno;
    if (err) {
        unlink(o->tmp);
        snprintf(msg, msg_len, "'%s': write failed: %s (the previous file, if any, is intact)", o->path,
                 strerror(err));
        return FIO_EIO;
    }
    // Make the rename itself durable; a failure here cannot undo the (complete) file.
    char dir[FIO_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", o->path);
    char *slash = strrchr(dir, '/');
    const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
    const int dfd = open(d, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) fsync(dfd), close(dfd);
    return FIO_OK;
}

int fio_write_file(const char *path, const void *data, size_t n, char *msg, size_t msg_len) {
    fio_out o;
    const int st = fio_create(&o, path, msg, msg_len);
    if (st != FIO_OK) return st;
    if (n && fwrite(data, 1, n, o.f) != n) {
        snprintf(msg, msg_len, "'%s': write failed: %s (the previous file, if any, is intact)", path,
                 strerror(errno));
        fio_abort(&o);
        return FIO_EIO;
    }
    return fio_commit(&o, msg, msg_len);
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

int fio_refuse_same(const char *out_opt, const char *out, const char *in_opt, const char *in, char *msg,
                    size_t msg_len) {
    if (!fio_same_file(out, in)) return FIO_OK;
    snprintf(msg, msg_len, "--%s '%s' is the same file as --%s '%s'; refusing to overwrite an input", out_opt,
             out, in_opt, in);
    return FIO_EINVAL;
}
