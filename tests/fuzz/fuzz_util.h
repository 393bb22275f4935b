// fuzz_util.h: what the libFuzzer harnesses of tests/fuzz/ share (header-only, static inline):
// the input as a seekable stream (fmemopen), as a stream that cannot seek (fopencookie without a
// seek function, as a pipe behaves), as a NUL-terminated string, and as a file with a path
// (a memfd reached through /proc/self/fd, so nothing touches the disk), and FUZZ_CHECK for the
// invariants a harness checks beyond "no crash" (a failed check aborts: libFuzzer reports it).
// Constraints: the harnesses are built only by mk/fuzz.mk (clang, -fsanitize=fuzzer); nothing
// here is part of the library.
#ifndef FPLAB_FUZZ_UTIL_H
#define FPLAB_FUZZ_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#define FUZZ_CHECK(cond, ...)                                                              \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

// The input as a seekable stream (an empty input reads as an empty file).
static inline FILE *fuzz_stream(const uint8_t *d, size_t n) {
    return n ? fmemopen((void *)d, n, "rb") : fopen("/dev/null", "rb");
}

typedef struct {
    const uint8_t *d;
    size_t n, at;
} fuzz_pipe_state;

static inline ssize_t fuzz_pipe_read(void *cookie, char *buf, size_t size) {
    fuzz_pipe_state *s = cookie;
    size_t k = s->n - s->at < size ? s->n - s->at : size;
    if (k > 7) k = k / 2 + 1;  // short reads, as a pipe gives them
    memcpy(buf, s->d + s->at, k);
    s->at += k;
    return (ssize_t)k;
}
static inline int fuzz_pipe_close(void *cookie) {
    free(cookie);
    return 0;
}

// The input as a stream that cannot seek (ftello fails), delivered in short reads.
static inline FILE *fuzz_pipe(const uint8_t *d, size_t n) {
    fuzz_pipe_state *s = malloc(sizeof *s);
    if (!s) return NULL;
    *s = (fuzz_pipe_state){d, n, 0};
    const cookie_io_functions_t io = {.read = fuzz_pipe_read, .close = fuzz_pipe_close};
    FILE *f = fopencookie(s, "rb", io);
    if (!f) free(s);
    return f;
}

// The input as a NUL-terminated string (malloc'd; free it). An input holding NUL bytes is cut
// at the first, as a C string would be.
static inline char *fuzz_cstr(const uint8_t *d, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, d, n);
    s[n] = 0;
    return s;
}

// The input as a file with a path ("/proc/self/fd/N" of a memfd created once and rewritten on
// every call). Returns the path (static storage).
static inline const char *fuzz_file(const uint8_t *d, size_t n) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fplab-fuzz", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, d, n, 0) != (ssize_t)n) abort();
    return path;
}

#endif
