// test_fileio.c: the file helpers of util/fileio.h: the atomic writer renames only over a
// regular file or nothing (a symlink is followed to its file, a FIFO or character device is
// written through, a directory or other special file is refused), several outputs are committed
// together or not at all, and the input/output check sees every input it is given.
// Every test works in its own temporary directory; a character device is made there (mknod,
// root only) rather than touching /dev/null, so a regression cannot break the machine.
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/test_util.h"
#include "util/fileio.h"

static char dir[64];

static void mkdir_tmp(void) { tu_tmpdir(dir, sizeof dir, "fio"); }
static void rm_tmp(void) { tu_rmtree(dir); }
TestSuite(fileio, .init = mkdir_tmp, .fini = rm_tmp);

static void path_in(char *p, size_t cap, const char *name) { snprintf(p, cap, "%s/%s", dir, name); }

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s: %s", path, strerror(errno));
    fputs(text, f), fclose(f);
}
static void get(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s: %s", path, strerror(errno));
    const size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0, fclose(f);
}
// No "<name>.tmp.*" left in the directory.
static int tmp_files(void) {
    char cmd[160], buf[16] = "";
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c '\\.tmp\\.'", dir);
    FILE *p = popen(cmd, "r");
    if (p && fgets(buf, sizeof buf, p)) {}
    if (p) pclose(p);
    return atoi(buf);
}

Test(fileio, replaces_a_regular_file_and_creates_a_new_one) {
    char p[128], m[256], b[64];
    path_in(p, sizeof p, "a");
    cr_assert_eq(fio_write_file(p, "one", 3, m, sizeof m), FIO_OK, "%s", m);
    cr_assert_eq(fio_write_file(p, "two", 3, m, sizeof m), FIO_OK, "%s", m);
    get(p, b, sizeof b);
    cr_assert_str_eq(b, "two");
    cr_assert_eq(tmp_files(), 0);
}

// A symlink stays a link; the file it names gets the new content (atomically).
Test(fileio, writes_through_a_symlink_to_its_file) {
    char p[128], l[128], m[256], b[64];
    path_in(p, sizeof p, "target"), path_in(l, sizeof l, "link");
    put(p, "old");
    cr_assert_eq(symlink(p, l), 0);
    cr_assert_eq(fio_write_file(l, "new", 3, m, sizeof m), FIO_OK, "%s", m);
    struct stat st;
    cr_assert_eq(lstat(l, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the symlink was replaced by a regular file");
    get(p, b, sizeof b);
    cr_assert_str_eq(b, "new");
    cr_assert_eq(tmp_files(), 0);
}

// A dangling symlink: refused with a message, the link left as it was.
Test(fileio, refuses_a_dangling_symlink) {
    char l[128], t[128], m[256] = "";
    path_in(l, sizeof l, "dangling"), path_in(t, sizeof t, "nowhere/x");
    cr_assert_eq(symlink(t, l), 0);
    cr_assert_neq(fio_write_file(l, "x", 1, m, sizeof m), FIO_OK);
    cr_assert(strstr(m, "symbolic link"), "message: %s", m);
    struct stat st;
    cr_assert_eq(lstat(l, &st), 0);
    cr_assert(S_ISLNK(st.st_mode));
}

// A FIFO is written through: the reader gets the bytes, the FIFO stays a FIFO.
Test(fileio, writes_through_a_fifo) {
    char p[128], m[256], b[64] = "";
    path_in(p, sizeof p, "fifo");
    cr_assert_eq(mkfifo(p, 0600), 0);
    const int rfd = open(p, O_RDONLY | O_NONBLOCK);  // a reader, so that the writer's open does not block
    cr_assert_geq(rfd, 0);
    cr_assert_eq(fio_write_file(p, "hello", 5, m, sizeof m), FIO_OK, "%s", m);
    cr_assert_eq(read(rfd, b, sizeof b - 1), 5);
    close(rfd);
    cr_assert_str_eq(b, "hello");
    struct stat st;
    cr_assert_eq(lstat(p, &st), 0);
    cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced by a regular file");
    cr_assert_eq(tmp_files(), 0);
}

// A character device (a copy of /dev/null made in the test's directory) is written through.
Test(fileio, writes_through_a_character_device) {
    char p[128], m[256];
    path_in(p, sizeof p, "null");
    if (mknod(p, S_IFCHR | 0666, makedev(1, 3)) != 0) cr_skip_test("mknod needs root: %s", strerror(errno));
    cr_assert_eq(fio_write_file(p, "gone", 4, m, sizeof m), FIO_OK, "%s", m);
    struct stat st;
    cr_assert_eq(lstat(p, &st), 0);
    cr_assert(S_ISCHR(st.st_mode), "the device node was replaced by a regular file");
    cr_assert_eq(tmp_files(), 0);
}

Test(fileio, refuses_a_directory_before_writing) {
    char p[128], m[256] = "";
    path_in(p, sizeof p, "d");
    cr_assert_eq(mkdir(p, 0700), 0);
    fio_out o;
    cr_assert_neq(fio_create(&o, p, m, sizeof m), FIO_OK);
    cr_assert(strstr(m, "directory"), "message: %s", m);
    cr_assert_eq(tmp_files(), 0);
}

// A symlink to a FIFO (as /dev/stdout is to a pipe, through /proc) is written through the link.
Test(fileio, writes_through_a_symlink_to_a_fifo) {
    char p[128], l[128], m[256], b[64] = "";
    path_in(p, sizeof p, "fifo"), path_in(l, sizeof l, "out");
    cr_assert_eq(mkfifo(p, 0600), 0);
    cr_assert_eq(symlink(p, l), 0);
    const int rfd = open(p, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(rfd, 0);
    cr_assert_eq(fio_write_file(l, "abc", 3, m, sizeof m), FIO_OK, "%s", m);
    cr_assert_eq(read(rfd, b, sizeof b - 1), 3);
    close(rfd);
    cr_assert_str_eq(b, "abc");
    struct stat st;
    cr_assert_eq(lstat(l, &st), 0);
    cr_assert(S_ISLNK(st.st_mode));
    cr_assert_eq(tmp_files(), 0);
}

// One writer per place: a lock another process holds is refused with its pid; released by the
// holder's exit, it is taken again (issue 20: two trainings shared a --ckpt-dir); a second
// descriptor of the holding process is refused as well.
Test(fileio, a_lock_held_by_another_process_is_refused_with_its_pid) {
    char lock[128], msg[512];
    path_in(lock, sizeof lock, "ckpt.bin.lock");
    int go[2], ready[2];
    cr_assert(pipe(go) == 0 && pipe(ready) == 0);
    const pid_t child = fork();
    if (child == 0) {
        int fd;
        char c = fio_lock(lock, "child", "a test", false, &fd, NULL, 0) == FIO_OK ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(1);
        _exit(0);
    }
    char c = 0;
    cr_assert(read(ready[0], &c, 1) == 1 && c == 'y', "the child could not take the lock");
    int fd = -1;
    cr_expect_eq(fio_lock(lock, "--ckpt-dir 'x'", "another training", false, &fd, msg, sizeof msg), FIO_EINVAL);
    cr_expect_eq(fd, -1);
    char want[96];
    snprintf(want, sizeof want, "--ckpt-dir 'x' is in use by another training (pid %ld, lock", (long)child);
    cr_expect(strstr(msg, want), "%s", msg);
    cr_assert(write(go[1], "g", 1) == 1);
    waitpid(child, NULL, 0);
    cr_expect_eq(fio_lock(lock, "--ckpt-dir 'x'", "another training", false, &fd, msg, sizeof msg), FIO_OK, "%s", msg);
    int fd2;  // a second descriptor of this process: refused too (flock holds per open file)
    cr_expect_eq(fio_lock(lock, "--ckpt-dir 'x'", "another training", false, &fd2, msg, sizeof msg), FIO_EINVAL);
    cr_expect(fd >= 0);
    char pid[32], mine[32];
    get(lock, pid, sizeof pid);
    snprintf(mine, sizeof mine, "%ld\n", (long)getpid());
    cr_expect_str_eq(pid, mine);
    close(fd);
}

// A lock file that is a hard link (issue 34: the file it links to lost its contents to the pid)
// or a symbolic link is refused before a byte is written, and the other name keeps its bytes.
Test(fileio, a_lock_file_that_is_a_link_is_refused_untouched) {
    char lock[128], precious[128], msg[512], b[64];
    path_in(lock, sizeof lock, "ckpt.bin.lock");
    path_in(precious, sizeof precious, "precious.txt");
    put(precious, "the only copy\n");
    cr_assert_eq(link(precious, lock), 0, "%s", strerror(errno));
    int fd = 7;
    cr_expect_eq(fio_lock(lock, "--ckpt-dir 'x'", "another training", false, &fd, msg, sizeof msg), FIO_EINVAL);
    cr_expect_eq(fd, -1);
    cr_expect(strstr(msg, "--ckpt-dir 'x': the lock file") && strstr(msg, "hard link"), "%s", msg);
    get(precious, b, sizeof b);
    cr_expect_str_eq(b, "the only copy\n");
    cr_assert_eq(unlink(lock), 0);
    cr_assert_eq(symlink(precious, lock), 0);
    cr_expect_eq(fio_lock(lock, "--ckpt-dir 'x'", "another training", false, &fd, msg, sizeof msg), FIO_EINVAL);
    cr_expect(strstr(msg, "symbolic link"), "%s", msg);
    get(precious, b, sizeof b);
    cr_expect_str_eq(b, "the only copy\n");
}

// A holder that ends cleanly leaves no lock file (issue 34), and the place can be locked again.
// fio_unlock removes only the file it holds: a file put in its place meanwhile stays.
Test(fileio, unlock_removes_its_own_lock_file_only) {
    char lock[128], msg[512], other[128];
    path_in(lock, sizeof lock, ".lock");
    int fd = -1;
    cr_assert_eq(fio_lock(lock, "'d'", "another ablation", false, &fd, msg, sizeof msg), FIO_OK, "%s", msg);
    fio_unlock(&fd, lock);
    cr_expect_eq(fd, -1);
    cr_expect_eq(access(lock, F_OK), -1, "the lock file stayed");
    fio_unlock(&fd, lock);  // a second call does nothing
    cr_assert_eq(fio_lock(lock, "'d'", "another ablation", false, &fd, msg, sizeof msg), FIO_OK, "%s", msg);
    path_in(other, sizeof other, "other");
    put(other, "someone else's\n");
    cr_assert_eq(rename(other, lock), 0);
    fio_unlock(&fd, lock);
    cr_expect_eq(access(lock, F_OK), 0, "a file that was not the lock was removed");
}

// Removing the lock file at the end must not let two processes hold the lock at once: one that
// opened the old file just before its holder removed it takes a lock on a file without a name,
// while a third creates a new one. Processes take and release the lock in a loop and each time
// claim a marker with O_EXCL, which fails if another holder is inside too.
Test(fileio, lock_and_unlock_in_a_loop_never_give_two_holders) {
    char lock[128], mark[128];
    path_in(lock, sizeof lock, "busy.lock");
    path_in(mark, sizeof mark, "inside");
    enum { PROCS = 4, ROUNDS = 400 };
    pid_t pid[PROCS];
    for (int p = 0; p < PROCS; p++) {
        if ((pid[p] = fork()) != 0) continue;
        for (int i = 0; i < ROUNDS; i++) {
            int fd = -1;
            while (fio_lock(lock, "'d'", "a test", false, &fd, NULL, 0) != FIO_OK) {}
            const int m = open(mark, O_CREAT | O_EXCL | O_WRONLY, 0600);
            if (m < 0) _exit(2);  // another holder is inside
            close(m), unlink(mark);
            fio_unlock(&fd, lock);
        }
        _exit(0);
    }
    for (int p = 0; p < PROCS; p++) {
        int ws = 0;
        waitpid(pid[p], &ws, 0);
        cr_expect(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "process %d: two holders of one lock (status 0x%x)", p, ws);
    }
    cr_expect_eq(access(lock, F_OK), -1, "the lock file stayed");
}

// One process at a time appends to a log (issue 34: a second run's --overwrite truncated a live
// run's log, which then went on writing at its old offset: NUL bytes). A second opener is
// refused while the first holds it; writes land at the end whatever happens to the file's size.
Test(fileio, an_append_output_is_one_writers_and_never_leaves_holes) {
    char p[128], msg[512], b[64];
    path_in(p, sizeof p, "log.jsonl");
    FILE *f = NULL, *g = NULL;
    cr_assert_eq(fio_open_append(p, "--log 'l'", "another training", &f, msg, sizeof msg), FIO_OK, "%s", msg);
    fputs("first line\n", f), fflush(f);
    cr_expect_eq(fio_open_append(p, "--log 'l'", "another training", &g, msg, sizeof msg), FIO_EINVAL);
    cr_expect_null(g);
    cr_expect(strstr(msg, "--log 'l' is in use by another training"), "%s", msg);
    cr_assert_eq(truncate(p, 0), 0);  // as an outside writer could
    fputs("second\n", f);
    cr_assert_eq(fclose(f), 0);
    get(p, b, sizeof b);
    cr_expect_str_eq(b, "second\n");  // not 11 NUL bytes then "second"
    cr_assert_eq(fio_open_append(p, "--log 'l'", "another training", &g, msg, sizeof msg), FIO_OK, "%s", msg);
    fputs("third\n", g), fclose(g);
    get(p, b, sizeof b);
    cr_expect_str_eq(b, "second\nthird\n", "opening never truncates");
    char d[128];
    path_in(d, sizeof d, "adir");
    cr_assert_eq(mkdir(d, 0777), 0);
    cr_expect_eq(fio_open_append(d, "--log 'adir'", "another training", &g, msg, sizeof msg), FIO_EINVAL);
    cr_expect(strstr(msg, "is a directory"), "%s", msg);
}

// The temporary files of a killed writer go; names that only look alike stay.
Test(fileio, removes_only_a_killed_writers_temporary_files) {
    char p[128], path[128];
    path_in(path, sizeof path, "ckpt.bin");
    const char *orphans[] = {"ckpt.bin.tmp.Ab12Cd", "ckpt.bin.tmp.x9Y8z7"};
    const char *keep[] = {"ckpt.bin", "ckpt.bin.tmp.notours", "ckpt.bin.tmp.", "xckpt.bin.tmp.Ab12Cd", "log.jsonl"};
    for (int i = 0; i < 2; i++) path_in(p, sizeof p, orphans[i]), put(p, "half");
    for (int i = 0; i < 5; i++) path_in(p, sizeof p, keep[i]), put(p, "keep");
    path_in(p, sizeof p, "ckpt.bin.tmp.D1r3ct");
    cr_assert(mkdir(p, 0700) == 0);  // a directory of that name is not a file to remove
    cr_expect_eq(fio_remove_orphans(path), 2);
    for (int i = 0; i < 2; i++) {
        path_in(p, sizeof p, orphans[i]);
        cr_expect(!fio_is_file(p), "%s stayed", orphans[i]);
    }
    for (int i = 0; i < 5; i++) {
        path_in(p, sizeof p, keep[i]);
        cr_expect(fio_is_file(p), "%s went", keep[i]);
    }
    path_in(p, sizeof p, "ckpt.bin.tmp.D1r3ct");
    cr_expect(fio_is_dir(p));
    rmdir(p);
}

// fio_write: the bytes after what f already holds, in order, across the 8 MiB pieces it writes
// in; nothing reaches path before fio_commit; an abort leaves the old file.
Test(fileio, write_appends_after_stdio_and_commits_or_aborts) {
    char p[128], m[256];
    path_in(p, sizeof p, "big");
    put(p, "old");
    const size_t n = ((size_t)8 << 20) * 2 + 12345;  // two whole pieces and a part
    unsigned char *data = malloc(n);
    cr_assert(data);
    for (size_t i = 0; i < n; i++) data[i] = (unsigned char)(i * 2654435761u >> 13);
    fio_out o;
    cr_assert_eq(fio_create(&o, p, m, sizeof m), FIO_OK, "%s", m);
    fputs("head", o.f);  // still in stdio's buffer: fio_write must flush it first
    cr_assert_eq(fio_write(&o, data, n, m, sizeof m), FIO_OK, "%s", m);
    fio_abort(&o);
    char b[16];
    get(p, b, sizeof b);
    cr_assert_str_eq(b, "old");
    cr_assert_eq(fio_create(&o, p, m, sizeof m), FIO_OK, "%s", m);
    fputs("head", o.f);
    cr_assert_eq(fio_write(&o, data, n, m, sizeof m), FIO_OK, "%s", m);
    cr_assert_eq(fio_commit(&o, m, sizeof m), FIO_OK, "%s", m);
    cr_assert_eq(tmp_files(), 0);
    char *back = fio_slurp(p);
    cr_assert(back);
    struct stat st;
    cr_assert(stat(p, &st) == 0 && (size_t)st.st_size == n + 4, "size %lld", (long long)st.st_size);
    cr_assert(!memcmp(back, "head", 4) && !memcmp(back + 4, data, n));
    free(back), free(data);
}

// fio_tail: the last lines without the final newline, a NUL read as a space, "" for a missing
// file; a tail longer than the buffer keeps its end.
Test(fileio, tail_and_slurp) {
    char p[128], b[64];
    path_in(p, sizeof p, "log");
    put(p, "one\ntwo\nthree\nfour\n");
    cr_assert_eq(fio_tail(p, 2, b, sizeof b), 10);
    cr_assert_str_eq(b, "three\nfour");
    cr_assert_eq(fio_tail(p, 10, b, sizeof b), strlen("one\ntwo\nthree\nfour"));
    FILE *f = fopen(p, "wb");
    cr_assert(f);
    fwrite("a\nb\0c\n", 1, 6, f), fclose(f);
    fio_tail(p, 1, b, sizeof b);
    cr_assert_str_eq(b, "b c");
    char small[4];
    fio_tail(p, 5, small, sizeof small);  // the last 3 bytes, "\0c\n"
    cr_assert_str_eq(small, " c");
    path_in(p, sizeof p, "missing");
    cr_assert_eq(fio_tail(p, 3, b, sizeof b), 0);
    cr_assert_str_eq(b, "");
    cr_assert_null(fio_slurp(p));
}
