// checkpoint.h: the trainer's checkpoint file: a magic number and version, then tagged
// sections (config, parameters, optimizer moments, training state, vocabulary, resolved run
// options; later layers add their own, e.g. the loss scaler's), each with its length and a
// checksum, so that a reader names what is missing or damaged.
// Constraints: written to "<path>.tmp", fsynced and renamed over path, so a crash mid-write
// leaves the previous checkpoint intact; library level: returns CKPT_E* with a message.
// A file from outside is hostile: every count and length in it is checked against the file's
// size and a stated limit before it sizes an allocation, and the loaders below check every
// field they interpret against the config and the model's limits (llama.h's LLAMA_MAX_*).
// The checksums are FNV-1a: they detect damage (a flipped bit, a torn write), not tampering;
// anyone can recompute them, so a file with matching checksums is intact, not trustworthy.
//
// File layout (little-endian):
//   u32 magic 0x4b43504c ("LPCK" read as bytes "LPCK"), u32 version 1, u32 section count
//   (at most CKPT_MAX_SECTIONS), u32 0
//   per section: char tag[8] (1 to 8 printable ASCII characters, NUL-padded; each tag once),
//                u64 payload bytes, u64 FNV-1a-64 of the payload, payload
//   nothing after the last section
#ifndef FPLAB_CHECKPOINT_H
#define FPLAB_CHECKPOINT_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trainer/data.h"
#include "trainer/llama.h"

enum { CKPT_OK = 0, CKPT_EIO = 1, CKPT_EFORMAT = 2, CKPT_ENOMEM = 3, CKPT_EMISSING = 4 };
enum { CKPT_MAGIC = 0x4b43504c, CKPT_VERSION = 1, CKPT_TAG_LEN = 8, CKPT_MAX_SECTIONS = 64 };

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
// CKPT_EFORMAT (nothing written) for what a reader would refuse: more than CKPT_MAX_SECTIONS,
// a malformed or repeated tag.
int ckpt_write(const char *path, const ckpt_section *s, int n, char *msg, size_t msg_len);
// Reads a whole checkpoint. CKPT_EFORMAT with a message naming the file, the section and what
// was expected for: a wrong magic, version or reserved word; a section count over the limit or
// more than the file can hold; a malformed or repeated tag; a section longer than what is left
// of the file; a checksum mismatch; bytes after the last section. No payload is allocated
// before its length is known to fit in the file. On failure *out is empty.
int ckpt_read(ckpt_file *out, const char *path, char *msg, size_t msg_len);
// The same from a stream that can seek (its size is found by seeking to the end); name only
// names it in messages. CKPT_EIO when it cannot seek (a pipe).
int ckpt_read_stream(ckpt_file *out, FILE *f, const char *name, char *msg, size_t msg_len);
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
// Decodes and validates the "config" section: 40 bytes, tied 0 or 1, and llama_config_validate
// (every size positive and under its LLAMA_MAX_*, divisibility, finite rope_theta and norm_eps).
// CKPT_EMISSING for s NULL, CKPT_EFORMAT otherwise, with a message naming path and the field
// (msg may be NULL). *c is zeroed on failure.
int ckpt_config_read(llama_config *c, const ckpt_section *s, const char *path, char *msg, size_t msg_len);
int ckpt_config_unpack(llama_config *c, const ckpt_section *s);  // ckpt_config_read without a message
// Packs v into out (NULL: only measure); returns the byte count.
size_t ckpt_vocab_pack(unsigned char *out, const data_vocab *v);
// Decodes and validates the "vocab" section into v (free with data_vocab_free): a known kind, a
// size in [1, LLAMA_MAX_VOCAB] (256 for bytes), a length that matches, and for characters
// Unicode scalar values in strictly ascending order. Whether the size equals the model's
// vocab_size is the caller's check (ckpt_load_model_from does it). CKPT_EMISSING / CKPT_EFORMAT
// with a message (msg may be NULL); v is left empty on failure.
int ckpt_vocab_read(data_vocab *v, const ckpt_section *s, const char *path, char *msg, size_t msg_len);
int ckpt_vocab_unpack(data_vocab *v, const ckpt_section *s);  // ckpt_vocab_read without a message
// As ckpt_load_model, from a file already read (path only names it in messages). The config,
// the params section's size (the config's parameter count) and the vocabulary (its size equal
// to the config's vocab_size) are all checked before the model is allocated; m and v are
// zeroed on failure.
int ckpt_load_model_from(const ckpt_file *f, const char *path, llama_model *m, data_vocab *v,
                         char *msg, size_t msg_len);

// Loads the model (config + params, weights only) and the vocabulary of a checkpoint, for
// sampling and export. m is initialised here (llama_init); v is filled (data_vocab_free).
int ckpt_load_model(const char *path, llama_model *m, data_vocab *v, char *msg, size_t msg_len);

#endif
