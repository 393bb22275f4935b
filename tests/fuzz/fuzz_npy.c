// fuzz_npy.c: libFuzzer harness for the .npy reader (cli/npy.c). Each input is read twice: as a
// file that can seek (its size is checked against the header) and as a pipe (read as the data
// comes, in short reads). Both must agree: the same status, shape and bytes; an error leaves no
// data and says something.
#include <stdint.h>
#include <string.h>

#include "cli/npy.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    npy_array a[2];
    char msg[2][512];
    int st[2];
    for (int k = 0; k < 2; k++) {
        FILE *f = k == 0 ? fuzz_stream(d, n) : fuzz_pipe(d, n);
        if (!f) return 0;
        st[k] = npy_read_stream(f, k == 0 ? "fuzz.npy" : "fuzz.pipe", &a[k], msg[k], sizeof msg[k]);
        fclose(f);
        if (st[k] != NPY_OK) FUZZ_CHECK(!a[k].data && msg[k][0], "error without a message or with data");
    }
    FUZZ_CHECK(st[0] == st[1], "file %d ('%s'), pipe %d ('%s')", st[0], msg[0], st[1], msg[1]);
    if (st[0] != NPY_OK) return 0;
    const size_t item = npy_itemsize(a[0].dtype);  // float32, float64 or unsigned codes
    FUZZ_CHECK(a[0].ndim == a[1].ndim && a[0].dtype == a[1].dtype && a[0].n == a[1].n, "shapes differ");
    FUZZ_CHECK(a[0].n == a[0].shape[0] * a[0].shape[1], "n %zu", a[0].n);
    FUZZ_CHECK(a[0].n * item <= n && a[0].n * item <= NPY_MAX_DATA_BYTES, "n %zu from %zu bytes", a[0].n, n);
    FUZZ_CHECK(!memcmp(a[0].data, d + n - a[0].n * item, a[0].n * item), "the data is not the file's tail");
    FUZZ_CHECK(!memcmp(a[0].data, a[1].data, a[0].n * item), "file and pipe data differ");
    npy_free(&a[0]), npy_free(&a[1]);
    return 0;
}
