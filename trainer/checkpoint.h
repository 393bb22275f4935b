// checkpoint.h: the trainer's checkpoint file: a magic number and version, then tagged
// sections (config, parameters, optimizer moments, training state, vocabulary, resolved run
// options; later layers add their own, e.g. the loss scaler's), each with its length and a
// checksum, so that a reader names what is missing or damaged.
// Constraints: written to "<path>.tmp", fsynced and renamed over path, so a crash mid-write
// leaves the previous checkpoint intact; library level: returns CKPT_E* with a message.
//
// File layout (little-endian):
//   u32 magic 0x4b43504c ("LPCK" read as bytes "LPCK"), u32 version 1, u32 section count, u32 0
//   per section: char tag[8] (NUL-padded), u64 payload bytes, u64 FNV-1a-64 of the payload,
//                payload
#ifndef FPLAB_CHECKPOINT_H
#define FPLAB_CHECKPOINT_H
#include <stddef.h>
#include <stdint.h>

#include "trainer/data.h"
#include "trainer/llama.h"

enum { CKPT_OK = 0, CKPT_EIO = 1, CKPT_EFORMAT = 2, CKPT_ENOMEM = 3, CKPT_EMISSING = 4 };
enum { CKPT_MAGIC = 0x4b43504c, CKPT_VERSION = 1, CKPT_TAG_LEN = 8 };

typedef struct {
    char tag[CKPT_TAG_LEN + 1];
    const void *data;
    uint64_t nbytes;
} ckpt_section;

typedef struct {
    int n;
    ckpt_section *s;  // sections, their data owned by the file
} ckpt_file;

// Writes the sections to path atomically (tmp + fsync + rename; the directory is fsynced too).
int ckpt_write(const char *path, const ckpt_section *s, int n, char *msg, size_t msg_len);
// Reads a whole checkpoint; wrong magic/version, a truncated file or a checksum mismatch give
// CKPT_EFORMAT with a message naming the file, the section and what was expected.
int ckpt_read(ckpt_file *out, const char *path, char *msg, size_t msg_len);
void ckpt_file_free(ckpt_file *f);
// The section with this tag, or NULL.
const ckpt_section *ckpt_find(const ckpt_file *f, const char *tag);

// --- the trainer's sections (trainer/checkpoint.c)
// "config"  : llama_config as fixed little-endian fields (ckpt_config_*)
// "params"  : n_params float32
// "adam_m", "adam_v": n_params float32 each (absent in an export-only file)
// "state"   : the training state (train.h)
// "vocab"   : data_vocab (kind, size, code points)
// "options" : the resolved run options as text (one "key value" per line), for resume and humans

enum { CKPT_CONFIG_BYTES = 40 };
void ckpt_config_pack(unsigned char out[CKPT_CONFIG_BYTES], const llama_config *c);
int ckpt_config_unpack(llama_config *c, const ckpt_section *s);  // CKPT_EFORMAT on a bad size
// Packs v into out (NULL: only measure); returns the byte count.
size_t ckpt_vocab_pack(unsigned char *out, const data_vocab *v);
int ckpt_vocab_unpack(data_vocab *v, const ckpt_section *s);  // CKPT_EFORMAT if malformed
// As ckpt_load_model, from a file already read (path only names it in messages).
int ckpt_load_model_from(const ckpt_file *f, const char *path, llama_model *m, data_vocab *v,
                         char *msg, size_t msg_len);

// Loads the model (config + params, weights only) and the vocabulary of a checkpoint, for
// sampling and export. m is initialised here (llama_init); v is filled (data_vocab_free).
int ckpt_load_model(const char *path, llama_model *m, data_vocab *v, char *msg, size_t msg_len);

#endif
