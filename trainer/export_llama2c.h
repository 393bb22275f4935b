// export_llama2c.h: writes a trained model in the legacy (version 0) checkpoint format of
// karpathy/llama2.c's run.c, and the vocabulary as its tokenizer.bin, so that
// `./run model.bin -z tok.bin` runs a model trained here.
// Constraints: library level (status + message, never exits); each file is written to
// "<path>.tmp", fsynced and renamed over path (the directory fsynced too), so a failure leaves
// whatever was at path untouched. Values are written in the machine's byte order, which is
// what run.c reads (it mmaps the file); every machine fplab targets is little-endian.
//
// Model file: 7 int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len,
// where vocab_size > 0 means the classifier is the token embedding (run.c: shared_weights =
// vocab_size > 0) and -V means an untied classifier follows at the end. Then float32, in
// exactly llama.h's parameter order (w1 = w_gate, w2 = w_down, w3 = w_up):
//   token_embedding_table (V,C), rms_att_weight (L,C), wq (L,C,C), wk (L,kv_dim,C),
//   wv (L,kv_dim,C), wo (L,C,C), rms_ffn_weight (L,C), w1 (L,H,C), w2 (L,C,H), w3 (L,H,C),
//   rms_final_weight (C), freq_cis_real (seq_len, hs/2), freq_cis_imag (seq_len, hs/2),
//   wcls (V,C) only when untied.
// run.c skips the two freq_cis tables (it recomputes RoPE with theta 10000); they are written
// with the model's actual cos/sin values so older readers that use them agree. run.c also
// hard-codes RMSNorm eps 1e-5 and rotates adjacent pairs, as fplab does; a model with another
// rope_theta or norm_eps would run with wrong numerics there, so the export refuses it.
//
// Tokenizer file: int32 max_token_length, then per token: float32 score, int32 len, len bytes
// (no NUL). Char vocabulary: the UTF-8 of each code point; byte vocabulary: the byte itself;
// token-id vocabularies (llm.c shards) have no text and are refused (export the model alone).
// All scores are 0: no piece is the concatenation of two others, so run.c's BPE merge loop
// finds nothing to merge and every character is looked up on its own.
//
// What to expect from run.c with these vocabularies (its tokenizer assumes SentencePiece's
// Llama 2 layout, where id 0 is <unk>, 1 is <s>, 2 is </s> and 3..258 are <0x00>..<0xFF>):
//  - id 1 is BOS and stop: run.c starts every prompt with token 1 and stops generating when it
//    samples 1. In a char vocabulary id 1 is the second-smallest code point of the corpus
//    (the space ' ' for Tiny Shakespeare, whose id 0 is '\n'), so generation ends at the first
//    sampled space and the model sees a space as the first token. A byte vocabulary's id 1 is
//    the byte 0x01, which real text never contains: generation runs for the full step count.
//  - a non-empty prompt also gets a "dummy prefix": the id of the piece " " (a space token
//    after BOS). If the vocabulary has no space, that lookup gives -1 and run.c indexes its
//    tables with -1 (undefined behaviour): give such a model an empty prompt.
//  - run.c strips the leading space of a piece that follows token 1.
//  - a character not in the vocabulary is not an error there: run.c falls back to its UTF-8
//    bytes + 3 as token ids (SentencePiece's byte tokens), which here are unrelated characters
//    or ids outside the vocabulary. With a byte vocabulary this happens to every non-ASCII
//    character of a prompt (run.c looks up whole UTF-8 sequences, and only single bytes exist).
//  - run.c's safe_printf prints a one-byte piece only if isprint or isspace holds for it (C
//    locale): the bytes 0x80..0xFF of a byte vocabulary (UTF-8 fragments), control bytes and
//    byte 0 print nothing, so non-ASCII text a byte model generates is dropped on output.
//    Multi-byte pieces of a char vocabulary print whole.
#ifndef FPLAB_EXPORT_LLAMA2C_H
#define FPLAB_EXPORT_LLAMA2C_H
#include <stddef.h>

#include "trainer/data.h"
#include "trainer/llama.h"

// EXPORT_EUNSUPPORTED: the model or vocabulary cannot be expressed in llama2.c's format
// (rope_theta != 10000, norm_eps != 1e-5, a token-id vocabulary); EXPORT_EINVAL: malformed
// input (a bad config, a vocabulary entry that is not a character); EXPORT_EIO: a file cannot
// be written; EXPORT_ENOMEM.
enum { EXPORT_OK = 0, EXPORT_EIO = 1, EXPORT_EUNSUPPORTED = 2, EXPORT_EINVAL = 3, EXPORT_ENOMEM = 4 };
enum { EXPORT_LLAMA2C_HEADER_INTS = 7 };
#define EXPORT_LLAMA2C_ROPE_THETA 10000.0f  // what run.c hard-codes
#define EXPORT_LLAMA2C_NORM_EPS 1e-5f

// EXPORT_OK if run.c can run a model of this config, else EXPORT_EUNSUPPORTED with a message
// naming the field, its value and what run.c needs.
int export_llama2c_check(const llama_config *c, char *msg, size_t msg_len);
// Bytes of the model file for this config.
size_t export_llama2c_model_bytes(const llama_config *c);
// Writes m's weights to path in the format above. Checks the config first (nothing is written
// if it fails).
int export_llama2c_model(const char *path, const llama_model *m, char *msg, size_t msg_len);
// Writes the vocabulary to path as llama2.c's tokenizer.bin (size v->size entries: run.c reads
// as many as the model's vocab_size). EXPORT_EUNSUPPORTED for a token-id vocabulary.
int export_llama2c_tokenizer(const char *path, const data_vocab *v, char *msg, size_t msg_len);

#endif
