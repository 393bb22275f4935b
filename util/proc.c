// proc.c: child processes (see proc.h).
#include "util/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

pid_t xp_spawn(const char *exe, char *const argv[], const char *cwd, const char *out, char *msg,
               size_t msg_len) {
    const int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(msg, msg_len, "cannot write '%s': %s", out ? out : "/dev/null", strerror(errno));
        return -1;
    }
    fflush(NULL);  // nothing buffered here may be written twice by the child
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        snprintf(msg, msg_len, "fork: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (pid == 0) {  // child: only async-signal-safe calls until exec
        // A child does not outlive its parent: an ablation that is killed takes its runs with
        // it, instead of leaving them writing into directories a rerun will use.
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(127);
        const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in >= 0) dup2(in, 0);
        dup2(fd, 1), dup2(fd, 2);
        if (cwd && chdir(cwd) != 0) {
            static const char m[] = "fplab: cannot change to the run directory\n";
            (void)!write(2, m, sizeof m - 1);
            _exit(127);
        }
        execv(exe, argv);
        const char *e = strerror(errno);  // not async-signal-safe in theory; fine in practice
        (void)!write(2, "fplab: cannot execute ", 22);
        (void)!write(2, exe, strlen(exe));
        (void)!write(2, ": ", 2);
        (void)!write(2, e, strlen(e));
        (void)!write(2, "\n", 1);
        _exit(127);
    }
    close(fd);
    return pid;
}

bool xp_run(const char *exe, char *const argv[], const char *cwd, const char *out, int *ws, char *msg,
            size_t msg_len) {
    const pid_t pid = xp_spawn(exe, argv, cwd, out, msg, msg_len);
    if (pid < 0) return false;
    pid_t w;
    while ((w = waitpid(pid, ws, 0)) < 0 && errno == EINTR) {}
    if (w != pid) return snprintf(msg, msg_len, "waitpid: %s", strerror(errno)), false;
    return true;
}

void xp_describe_status(int ws, char *buf, size_t cap) {
    if (WIFEXITED(ws)) snprintf(buf, cap, "exit status %d%s", WEXITSTATUS(ws),
                                WEXITSTATUS(ws) == 127 ? " (could not execute?)" : "");
    else if (WIFSIGNALED(ws)) snprintf(buf, cap, "killed by signal %d (%s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
    else snprintf(buf, cap, "wait status 0x%x", ws);
}
