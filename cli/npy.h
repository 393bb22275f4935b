// npy.h: read float32/float64 NumPy .npy files (1-D or 2-D, C order) and unsigned-integer code
// arrays (uint8/16/32/64), and write float32 ones and code arrays (as `fplab quantize
// --codes/--scales` writes them). A command that wants values refuses codes with npy_want_float.
// Constraints: never exits; every failure returns NPY_ERR with a one-line message naming the
// file and what was expected. Little-endian hosts only (checked at compile time).
// Decisions: versions 1.0, 2.0 and 3.0 are read (3.0 differs only in allowing UTF-8 in the
// header, which the parser does not need); big-endian dtypes ('>f4', '>f8') are rejected, not
// byte-swapped. The file's size must be the header's plus shape x itemsize exactly (NumPy would
// ignore data after the last element; fplab refuses a file that disagrees with its own header),
// and the data may be at most NPY_MAX_DATA_BYTES: both are checked before anything of the
// header's size is allocated. A stream that cannot seek (a pipe) is read as the data comes, in
// a buffer that grows with it, and must end after exactly the header's bytes.
#ifndef FPLAB_NPY_H
#define FPLAB_NPY_H

#include <stddef.h>
#include <stdio.h>

#include "util/fileio.h"

enum { NPY_OK = 0, NPY_ERR = 1 };

typedef enum { NPY_F4, NPY_F8, NPY_U1, NPY_U2, NPY_U4, NPY_U8 } npy_dtype;

typedef struct {
    npy_dtype dtype;
    int ndim;          // 1 or 2
    size_t shape[2];   // shape[1] is 1 when ndim == 1
    size_t n;          // shape[0] * shape[1] (ndim 1: shape[0])
    union {
        void *data;    // npy_alloc'd, n elements, C order; free with npy_free (or free())
        float *f4;     // dtype NPY_F4
        double *f8;    // dtype NPY_F8
    };                 // NPY_U*: unsigned codes of 1, 2, 4 or 8 bytes (npy_itemsize), little-endian
} npy_array;

// The largest array npy_read accepts: 16 GiB of data (2^32 float32), far above what the
// commands that read .npy files (quantize, matmul-check) handle on this machine.
#define NPY_MAX_DATA_BYTES ((size_t)1 << 34)

// A buffer for array data (npy_read's, and outputs of the same size), freed with free(). From
// 2 MiB on it is asked for in transparent huge pages: a fresh 64 MiB buffer otherwise costs
// 16384 page faults, which were most of `fplab quantize`'s time on a 4096 x 4096 file.
void *npy_alloc(size_t bytes);

size_t npy_itemsize(npy_dtype t);
// NPY_OK for float data; else NPY_ERR with "WHAT 'PATH' holds uintN codes; expected float32 or
// float64 values" in msg.
int npy_want_float(const npy_array *a, const char *what, const char *path, char *msg, size_t msglen);

// Reads path into out (overwritten). On error out->data is NULL and msg says what is wrong.
int npy_read(const char *path, npy_array *out, char *msg, size_t msglen);
// The same from an open stream at its start (name only names it in messages); reads to its end.
int npy_read_stream(FILE *fp, const char *name, npy_array *out, char *msg, size_t msglen);
void npy_free(npy_array *a);

// Writes data (n = product of shape, C order) as a version 1.0 '<f4' .npy, through the atomic
// writer of util/fileio.h (fio_create, fio_commit): path is either the old file or the
// complete new one, never half-written; on error path is untouched. What path may name (a
// symlink, /dev/null, a FIFO; not a directory) is that writer's rule. ndim is 1 or 2.
int npy_write_f32(const char *path, const float *data, int ndim, const size_t *shape, char *msg,
                  size_t msglen);

// The same for any little-endian dtype: descr is the header's dtype string as NumPy writes it
// ('<f4', '|u1' for uint8, '<u2', '<u4'; at most 8 characters), itemsize its bytes per element;
// data holds product(shape) * itemsize bytes. Same protocol and errors as npy_write_f32.
int npy_write(const char *path, const char *descr, size_t itemsize, const void *data, int ndim,
              const size_t *shape, char *msg, size_t msglen);
// The array written into an output already created (fio_create) and not committed: for a
// command with several outputs, which commits them together (fio_commit_all). NPY_ERR with a
// message naming o->path; the caller then aborts (fio_abort) every output.
int npy_write_to(fio_out *o, const char *descr, size_t itemsize, const void *data, int ndim,
                 const size_t *shape, char *msg, size_t msglen);
// The dtype string NumPy writes for unsigned integers of `bytes` bytes (1, 2, 4 or 8): '|u1',
// '<u2', '<u4', '<u8'; NULL for any other size.
const char *npy_uint_descr(size_t bytes);

#endif
