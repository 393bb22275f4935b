// test_npy.c: the .npy reader and writer of cli/npy.c: round trips, hand-built headers of
// versions 1.0/2.0/3.0, every malformed case (an error with a message, never a crash), a size
// that disagrees with the header or a shape over the limit (refused before anything is
// allocated; pipes read as the data comes), and the temporary-file protocol (nothing left
// behind on error). Files live under a mkdtemp directory.
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli/npy.h"

static char dir[64];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/fplab_npy_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}
static void teardown(void) {
    DIR *d = opendir(dir);
    if (!d) return;
    char p[512];
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p)) rmdir(p);
    }
    closedir(d);
    rmdir(dir);
}
TestSuite(npy, .init = setup, .fini = teardown);

static const char *path_of(const char *name) {
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static int count_entries(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

// Writes magic, version, the header length (hlen_override if >= 0, else strlen(dict)), the dict,
// then `data`.
static const char *write_raw(const char *name, int major, int minor, const char *dict, long hlen_override,
                             const void *data, size_t datalen) {
    const char *p = path_of(name);
    FILE *fp = fopen(p, "wb");
    cr_assert_not_null(fp);
    fwrite("\x93NUMPY", 1, 6, fp);
    fputc(major, fp), fputc(minor, fp);
    unsigned long h = hlen_override >= 0 ? (unsigned long)hlen_override : strlen(dict);
    for (int i = 0; i < (major == 1 ? 2 : 4); i++) fputc((int)((h >> (8 * i)) & 0xff), fp);
    fwrite(dict, 1, strlen(dict), fp);
    if (datalen) fwrite(data, 1, datalen, fp);
    fclose(fp);
    return p;
}

static void assert_same_bits_f32(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t ua, ub;
        memcpy(&ua, &a[i], 4), memcpy(&ub, &b[i], 4);
        cr_assert_eq(ua, ub, "element %zu: 0x%08x != 0x%08x", i, ua, ub);
    }
}

// --- round trips

Test(npy, roundtrip_2d) {
    const float x[6] = {0.1f, -0.0f, INFINITY, NAN, 1e-45f, -3.5f};
    const size_t shape[2] = {2, 3};
    char msg[256];
    cr_assert_eq(npy_write_f32(path_of("a.npy"), x, 2, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    npy_array a;
    cr_assert_eq(npy_read(path_of("a.npy"), &a, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert_eq(a.dtype, NPY_F4);
    cr_assert_eq(a.ndim, 2);
    cr_assert(a.shape[0] == 2 && a.shape[1] == 3 && a.n == 6);
    assert_same_bits_f32(a.f4, x, 6);
    npy_free(&a);
    cr_assert_eq(count_entries(), 1, "the temporary file was left behind");
}

// Large arrays: the data buffer (npy_alloc: huge pages from 2 MiB on, a size that is no
// multiple of them) holds every byte of the file, is writable (fplab quantize rounds it in
// place and writes it back) and is freed with free().
Test(npy, large_roundtrip_in_the_read_buffer) {
    const size_t shape[2] = {1025, 1031};  // 4.03 MiB of float32: two huge pages and a part
    const size_t n = shape[0] * shape[1];
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)i * 0.25f - 7.0f;
    char msg[256];
    cr_assert_eq(npy_write_f32(path_of("big.npy"), x, 2, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    npy_array a;
    cr_assert_eq(npy_read(path_of("big.npy"), &a, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert(a.n == n && a.dtype == NPY_F4);
    assert_same_bits_f32(a.f4, x, n);
    for (size_t i = 0; i < n; i++) a.f4[i] = -a.f4[i];
    cr_assert_eq(npy_write_f32(path_of("neg.npy"), a.f4, 2, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    free(a.data);  // as npy_free does
    cr_assert_eq(npy_read(path_of("neg.npy"), &a, msg, sizeof msg), NPY_OK, "%s", msg);
    for (size_t i = 0; i < n; i++) x[i] = -x[i];
    assert_same_bits_f32(a.f4, x, n);
    npy_free(&a);
    for (size_t bytes = 0; bytes <= ((size_t)5 << 20); bytes += (size_t)5 << 19) {
        unsigned char *p = npy_alloc(bytes);
        cr_assert_not_null(p, "npy_alloc(%zu)", bytes);
        if (bytes) p[0] = 1, p[bytes - 1] = 2;
        free(p);
    }
    free(x);
}

Test(npy, roundtrip_1d_and_empty) {
    const float x[5] = {1, 2, 3, 4, 5};
    size_t shape[1] = {5};
    char msg[256];
    npy_array a;
    cr_assert_eq(npy_write_f32(path_of("b.npy"), x, 1, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert_eq(npy_read(path_of("b.npy"), &a, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert(a.ndim == 1 && a.shape[0] == 5 && a.shape[1] == 1 && a.n == 5);
    assert_same_bits_f32(a.f4, x, 5);
    npy_free(&a);
    shape[0] = 0;
    cr_assert_eq(npy_write_f32(path_of("e.npy"), x, 1, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert_eq(npy_read(path_of("e.npy"), &a, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert(a.ndim == 1 && a.n == 0);
    npy_free(&a);
}

Test(npy, written_header_is_numpy_layout) {
    const float x[3] = {1, 2, 3};
    const size_t shape[1] = {3};
    char msg[256];
    cr_assert_eq(npy_write_f32(path_of("h.npy"), x, 1, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    unsigned char b[256];
    FILE *fp = fopen(path_of("h.npy"), "rb");
    size_t got = fread(b, 1, sizeof b, fp);
    fclose(fp);
    size_t hlen = b[8] | b[9] << 8;
    cr_assert_eq(memcmp(b, "\x93NUMPY\x01\x00", 8), 0);
    cr_assert_eq((10 + hlen) % 64, 0, "data must start at a multiple of 64 bytes");
    cr_assert_eq(b[10 + hlen - 1], '\n');
    cr_assert_eq(got, 10 + hlen + 12);
    cr_assert_not_null(strstr((char *)b + 10, "'shape': (3,)"));
}

// --- hand-built headers

Test(npy, v1_f8_keys_in_any_order_with_spaces_and_trailing_comma) {
    const double x[6] = {1, -2, 0.1, 1e300, -0.0, 5e-324};
    const char *p = write_raw("f8.npy", 1, 0, "{ \"shape\" : ( 2 ,3 ) , 'fortran_order':False,'descr':'<f8', }   \n", -1, x,
                              sizeof x);
    npy_array a;
    char msg[256];
    cr_assert_eq(npy_read(p, &a, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert(a.dtype == NPY_F8 && a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3);
    cr_assert_eq(memcmp(a.f8, x, sizeof x), 0);
    npy_free(&a);
}

Test(npy, v2_and_v3_headers) {
    const float x[5] = {1, 2, 3, 4, 5};
    for (int major = 2; major <= 3; major++) {
        const char *p = write_raw("v.npy", major, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }\n", -1,
                                  x, sizeof x);
        npy_array a;
        char msg[256];
        cr_assert_eq(npy_read(p, &a, msg, sizeof msg), NPY_OK, "version %d: %s", major, msg);
        cr_assert(a.ndim == 1 && a.shape[0] == 5);
        assert_same_bits_f32(a.f4, x, 5);
        npy_free(&a);
    }
}

// The file's size must be what the header says: header, then shape x itemsize bytes. Data
// after the last element (NumPy's np.load would ignore it) is refused too: a file whose size
// disagrees with its own header was not written by np.save, and the message says what was
// expected.
Test(npy, size_must_match_the_header) {
    const float x[3] = {1, 2, 3};
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}";
    const char *p = write_raw("long.npy", 1, 0, dict, -1, x, sizeof x);
    npy_array a;
    char msg[256];
    cr_assert_eq(npy_read(p, &a, msg, sizeof msg), NPY_ERR, "4 bytes after the last element accepted");
    cr_assert_null(a.data);
    char want[160];
    snprintf(want, sizeof want, "needs 8 data bytes after the %zu-byte header, found 12", 10 + strlen(dict));
    cr_assert(strstr(msg, p) && strstr(msg, want) && strstr(msg, "longer"), "message '%s' lacks '%s'", msg, want);
    p = write_raw("short.npy", 1, 0, dict, -1, x, 7);
    cr_assert_eq(npy_read(p, &a, msg, sizeof msg), NPY_ERR);
    snprintf(want, sizeof want, "needs 8 data bytes after the %zu-byte header, found 7", 10 + strlen(dict));
    cr_assert(strstr(msg, p) && strstr(msg, want) && strstr(msg, "shorter"), "message '%s' lacks '%s'", msg, want);
    p = write_raw("exact.npy", 1, 0, dict, -1, x, 8);
    cr_assert_eq(npy_read(p, &a, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert_eq(a.n, 2);
    npy_free(&a);
}

// A header's shape sizes nothing before the file is known to hold it: a 100-byte file that
// claims 2^30 float32 (4 GiB) is refused by its size, and a shape over the stated limit
// (NPY_MAX_DATA_BYTES) by the limit.
Test(npy, huge_shapes_are_refused_before_allocation) {
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824,)}";
    const char *p = write_raw("huge.npy", 1, 0, dict, -1, "abcd", 4);
    npy_array a;
    char msg[256];
    cr_assert_eq(npy_read(p, &a, msg, sizeof msg), NPY_ERR);
    cr_assert(strstr(msg, p) && strstr(msg, "needs 4294967296 data bytes"), "%s", msg);
    char dict2[128];
    snprintf(dict2, sizeof dict2, "{'descr': '<f8', 'fortran_order': False, 'shape': (%zu, 2)}",
             (size_t)NPY_MAX_DATA_BYTES / 16 + 1);
    p = write_raw("limit.npy", 1, 0, dict2, -1, "abcd", 4);
    cr_assert_eq(npy_read(p, &a, msg, sizeof msg), NPY_ERR);
    cr_assert(strstr(msg, p) && strstr(msg, "limit"), "%s", msg);
}

// A pipe has no size to compare with: the data is read as it comes (the buffer grows with what
// arrives, never to the header's claim at once), and a stream shorter or longer than the header
// says is refused the same way.
static void pipe_case(const char *name, const char *dict, const void *data, size_t datalen, int expect,
                      const char *want) {
    const char *p = path_of(name);
    cr_assert_eq(mkfifo(p, 0600), 0);
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {  // the writer
        FILE *fp = fopen(p, "wb");
        if (!fp) _exit(1);
        fwrite("\x93NUMPY\x01\x00", 1, 8, fp);
        const size_t h = strlen(dict);
        fputc((int)(h & 0xff), fp), fputc((int)(h >> 8), fp);
        fwrite(dict, 1, h, fp);
        fwrite(data, 1, datalen, fp);
        fclose(fp);
        _exit(0);
    }
    npy_array a;
    char msg[256] = "";
    const int st = npy_read(p, &a, msg, sizeof msg);
    int ws;
    waitpid(pid, &ws, 0);
    cr_assert_eq(st, expect, "%s: status %d, '%s'", name, st, msg);
    if (st == NPY_OK) {
        cr_assert_eq(a.n, datalen / 4);
        cr_assert_eq(memcmp(a.f4, data, datalen), 0);
        npy_free(&a);
    } else {
        cr_assert(strstr(msg, p) && strstr(msg, want), "%s: message '%s' lacks '%s'", name, msg, want);
    }
}

Test(npy, pipes_are_read_as_the_data_comes) {
    float x[1000];
    for (int i = 0; i < 1000; i++) x[i] = (float)i;
    pipe_case("ok.fifo", "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 100)}", x, sizeof x, NPY_OK, "");
    pipe_case("short.fifo", "{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824,)}", x, sizeof x,
              NPY_ERR, "shorter");
    pipe_case("long.fifo", "{'descr': '<f4', 'fortran_order': False, 'shape': (999,)}", x, sizeof x, NPY_ERR,
              "longer");
}

// npy_read_stream reads any stream (what the fuzz harness uses), naming it in messages.
Test(npy, reads_from_a_memory_stream) {
    unsigned char b[128];
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}";
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)strlen(dict), b[9] = 0;
    memcpy(b + 10, dict, strlen(dict));
    const float x[2] = {1.5f, -2};
    memcpy(b + 10 + strlen(dict), x, 8);
    FILE *fp = fmemopen(b, 18 + strlen(dict), "rb");
    cr_assert(fp);
    npy_array a;
    char msg[256];
    cr_assert_eq(npy_read_stream(fp, "mem", &a, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert(a.n == 2 && a.f4[0] == 1.5f && a.f4[1] == -2);
    npy_free(&a);
    fclose(fp);
    fp = fmemopen(b, 17 + strlen(dict), "rb");
    cr_assert_eq(npy_read_stream(fp, "mem", &a, msg, sizeof msg), NPY_ERR);
    cr_assert(strstr(msg, "mem: ") && strstr(msg, "found 7"), "%s", msg);
    fclose(fp);
}

// --- malformed files: each is an error with a message naming the file and the problem

typedef struct {
    const char *what;
    int major, minor;
    const char *dict;
    long hlen;         // -1: the dict's length
    size_t datalen;    // bytes of data after the header
    const char *expect;  // substring of the message
} bad_case;

Test(npy, malformed_files_are_errors_with_messages) {
    static const bad_case cases[] = {
        {"version 4.0", 4, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", -1, 8, "version 4.0"},
        {"version 1.1", 1, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", -1, 8, "version 1.1"},
        {"int dtype", 1, 0, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)}", -1, 8, "'<i4' is not supported"},
        {"f2 dtype", 1, 0, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,)}", -1, 8, "not supported"},
        {"big-endian", 1, 0, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}", -1, 8, "big-endian"},
        {"fortran", 1, 0, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}", -1, 16, "fortran_order is True"},
        {"3-D", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 2)}", -1, 32, "3-D"},
        {"0-D", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': ()}", -1, 4, "0-D"},
        {"short data", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", -1, 20, "shorter than its header says"},
        {"short header", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 400, 0, "shorter than its header length"},
        {"missing key", 1, 0, "{'descr': '<f4', 'shape': (2,)}", -1, 8, "lacks key 'fortran_order'"},
        {"unknown key", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", -1, 8, "unexpected"},
        {"repeated key", 1, 0, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", -1, 8, "repeated"},
        {"not a dict", 1, 0, "descr: <f4", -1, 8, "not a Python dict"},
        {"open tuple", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", -1, 8, "malformed value of header key 'shape'"},
        {"negative dim", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", -1, 8, "malformed value"},
        {"bad bool", 1, 0, "{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}", -1, 8, "fortran_order"},
        {"no closing brace", 1, 0, "{'descr': '<f4', 'fortran_order': False 'shape': (2,)}", -1, 8, "expected ',' or '}'"},
        {"huge shape", 1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", -1, 8, "too large"},
        {"v2 huge header length", 2, 0, "{}", 0x7fffffff, 0, "implausible"},
    };
    const float zeros[16] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        const char *p = write_raw("bad.npy", c->major, c->minor, c->dict, c->hlen, zeros, c->datalen);
        npy_array a;
        char msg[256] = "";
        cr_assert_eq(npy_read(p, &a, msg, sizeof msg), NPY_ERR, "%s: read succeeded", c->what);
        cr_assert_null(a.data, "%s: data not freed", c->what);
        cr_assert_not_null(strstr(msg, p), "%s: message does not name the file: %s", c->what, msg);
        cr_assert_not_null(strstr(msg, c->expect), "%s: message '%s' lacks '%s'", c->what, msg, c->expect);
    }
}

Test(npy, not_npy_empty_and_missing_files) {
    char msg[256];
    npy_array a;
    FILE *fp = fopen(path_of("empty.npy"), "wb");
    fclose(fp);
    cr_assert_eq(npy_read(path_of("empty.npy"), &a, msg, sizeof msg), NPY_ERR);
    cr_assert_not_null(strstr(msg, "not a .npy file"), "%s", msg);
    fp = fopen(path_of("text.npy"), "wb");
    fputs("hello, world\n", fp);
    fclose(fp);
    cr_assert_eq(npy_read(path_of("text.npy"), &a, msg, sizeof msg), NPY_ERR);
    cr_assert_not_null(strstr(msg, "magic"), "%s", msg);
    fp = fopen(path_of("cut.npy"), "wb");
    fwrite("\x93NUMPY\x02\x00\x10", 1, 9, fp);  // ends inside a 4-byte header length
    fclose(fp);
    cr_assert_eq(npy_read(path_of("cut.npy"), &a, msg, sizeof msg), NPY_ERR);
    cr_assert_not_null(strstr(msg, "header length"), "%s", msg);
    cr_assert_eq(npy_read(path_of("missing.npy"), &a, msg, sizeof msg), NPY_ERR);
    cr_assert_not_null(strstr(msg, "cannot open"), "%s", msg);
    cr_assert_eq(npy_read(dir, &a, msg, sizeof msg), NPY_ERR, "a directory is not a .npy file");
}

// --- the write protocol

Test(npy, failed_write_leaves_no_file_and_keeps_the_target) {
    const float x[2] = {1, 2};
    const size_t shape[1] = {2};
    char msg[256];
    cr_assert_eq(mkdir(path_of("sub"), 0755), 0);
    // A directory is refused before anything is written (fileio.h's rule for every output).
    cr_assert_eq(npy_write_f32(path_of("sub"), x, 1, shape, msg, sizeof msg), NPY_ERR);
    cr_assert_not_null(strstr(msg, "is a directory"), "%s", msg);
    cr_assert_eq(count_entries(), 1, "a temporary file was left behind");
    // A directory that does not exist: no file anywhere.
    cr_assert_eq(npy_write_f32(path_of("nodir/o.npy"), x, 1, shape, msg, sizeof msg), NPY_ERR);
    cr_assert_not_null(strstr(msg, "nodir/o.npy"), "%s", msg);
    cr_assert_eq(count_entries(), 1);
    // A 3-D shape is refused before anything is written.
    const size_t s3[3] = {1, 1, 2};
    cr_assert_eq(npy_write_f32(path_of("three.npy"), x, 3, s3, msg, sizeof msg), NPY_ERR);
    cr_assert_eq(access(path_of("three.npy"), F_OK), -1);
    cr_assert_eq(count_entries(), 1);
}

Test(npy, overwrite_replaces_the_whole_file) {
    const float big[100] = {7}, small[2] = {1, 2};
    size_t shape[1] = {100};
    char msg[256];
    cr_assert_eq(npy_write_f32(path_of("o.npy"), big, 1, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    shape[0] = 2;
    cr_assert_eq(npy_write_f32(path_of("o.npy"), small, 1, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    npy_array a;
    cr_assert_eq(npy_read(path_of("o.npy"), &a, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert_eq(a.n, 2);
    assert_same_bits_f32(a.f4, small, 2);
    npy_free(&a);
    struct stat st;
    cr_assert_eq(stat(path_of("o.npy"), &st), 0);
    cr_assert_eq(st.st_size, 128 + 8);
    cr_assert_eq(count_entries(), 1);
}

// --- npy_write: unsigned-integer codes with NumPy's own header bytes

// The 128-byte header NumPy's np.save writes for dict (version 1.0, padded with spaces to a
// multiple of 64, ended by '\n').
static void numpy_header(unsigned char *h, const char *dict) {
    memcpy(h, "\x93NUMPY\x01\x00\x76\x00", 10);
    memset(h + 10, ' ', 118);
    memcpy(h + 10, dict, strlen(dict));
    h[127] = '\n';
}

static void assert_file_bytes(const char *p, const unsigned char *want, size_t n) {
    unsigned char b[512];
    FILE *fp = fopen(p, "rb");
    cr_assert_not_null(fp);
    size_t got = fread(b, 1, sizeof b, fp);
    fclose(fp);
    cr_assert_eq(got, n, "%s: %zu bytes, expected %zu", p, got, n);
    for (size_t i = 0; i < n; i++) cr_assert_eq(b[i], want[i], "%s: byte %zu is 0x%02x, expected 0x%02x", p, i, b[i], want[i]);
}

Test(npy, write_uint8_and_uint16_as_numpy_does) {
    char msg[256];
    cr_assert_str_eq(npy_uint_descr(1), "|u1");
    cr_assert_str_eq(npy_uint_descr(2), "<u2");
    cr_assert_str_eq(npy_uint_descr(4), "<u4");
    cr_assert_null(npy_uint_descr(3));
    // np.save(p, np.array([0x7e, 0x38, 0xff], np.uint8))
    const uint8_t c8[3] = {0x7e, 0x38, 0xff};
    size_t shape[2] = {3, 0};
    cr_assert_eq(npy_write(path_of("u1.npy"), npy_uint_descr(1), 1, c8, 1, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    unsigned char want[256];
    numpy_header(want, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }");
    memcpy(want + 128, c8, 3);
    assert_file_bytes(path_of("u1.npy"), want, 131);
    // np.save(p, np.array([[0x3f80, 0x43fa, 0xffff], [0, 1, 0x8000]], np.uint16)): little-endian
    const uint16_t c16[6] = {0x3f80, 0x43fa, 0xffff, 0, 1, 0x8000};
    shape[0] = 2, shape[1] = 3;
    cr_assert_eq(npy_write(path_of("u2.npy"), npy_uint_descr(2), 2, c16, 2, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    numpy_header(want, "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }");
    const unsigned char d16[12] = {0x80, 0x3f, 0xfa, 0x43, 0xff, 0xff, 0, 0, 1, 0, 0x00, 0x80};
    memcpy(want + 128, d16, 12);
    assert_file_bytes(path_of("u2.npy"), want, 140);
    // An empty 2-D grid (a tensor with no scales) and the float32 path through the same writer.
    shape[0] = 0, shape[1] = 0;
    cr_assert_eq(npy_write(path_of("e.npy"), "|u1", 1, c8, 2, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    numpy_header(want, "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 0), }");
    assert_file_bytes(path_of("e.npy"), want, 128);
    // The reader reads the codes back (matmul-check takes them); a command that wants values
    // refuses them by name (npy_want_float); signed integers are not codes.
    npy_array a;
    cr_assert_eq(npy_read(path_of("u2.npy"), &a, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert(a.dtype == NPY_U2 && a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3 && a.n == 6);
    cr_assert_eq(memcmp(a.data, c16, sizeof c16), 0);
    cr_assert_eq(npy_want_float(&a, "IN", path_of("u2.npy"), msg, sizeof msg), NPY_ERR);
    cr_assert_not_null(strstr(msg, "IN holds uint16 codes; expected float32 or float64 values"), "%s", msg);
    npy_free(&a);
    cr_assert_eq(npy_read(path_of("u1.npy"), &a, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert(a.dtype == NPY_U1 && a.n == 3 && !memcmp(a.data, c8, 3));
    npy_free(&a);
    cr_assert_eq(npy_write(path_of("i4.npy"), "<i4", 4, c16, 1, shape, msg, sizeof msg), NPY_OK, "%s", msg);
    cr_assert_eq(npy_read(path_of("i4.npy"), &a, msg, sizeof msg), NPY_ERR);
    cr_assert_not_null(strstr(msg, "'<i4' is not supported"), "%s", msg);
    cr_assert_eq(count_entries(), 4, "a temporary file was left behind");
}

Test(npy, write_refuses_bad_descr_and_leaves_nothing) {
    char msg[256];
    const uint8_t c[2] = {1, 2};
    const size_t shape[1] = {2};
    cr_assert_eq(npy_write(path_of("q.npy"), "<u'2", 2, c, 1, shape, msg, sizeof msg), NPY_ERR);
    cr_assert_not_null(strstr(msg, "cannot write dtype"), "%s", msg);
    cr_assert_eq(npy_write(path_of("q.npy"), "|u1", 0, c, 1, shape, msg, sizeof msg), NPY_ERR);
    cr_assert_eq(npy_write(path_of("q.npy"), "", 1, c, 1, shape, msg, sizeof msg), NPY_ERR);
    cr_assert_eq(count_entries(), 0);
}
