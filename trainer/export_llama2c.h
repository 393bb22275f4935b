// export_llama2c.h: writes a trained model in the legacy (version 0) checkpoint format of
// karpathy/llama2.c's run.c, and the vocabulary as its tokenizer.bin, laid out so that
// `./run model.bin -z tok.bin -t 0` prints what `fplab sample --temperature 0` prints.
// Constraints: library level (status + message, never exits); each file is written through
// util/fileio.h's atomic write, so a failure leaves whatever was at the path untouched.
// Values are written in the machine's byte order, which is what run.c reads (it mmaps the
// file); every machine fplab targets is little-endian.
//
// --- what run.c does (generate, encode, decode in llama2.c's run.c)
//  encode(prompt): [1] (BOS); then, for a non-empty prompt, the id of the piece " " (the
//    "dummy prefix"); then each UTF-8 character's id, found by binary search over the pieces
//    sorted by strcmp; a character with no piece becomes its bytes as ids 3 + byte (byte
//    fallback: SentencePiece puts <0x00>..<0xFF> at 3..258). Then BPE merges: while some
//    adjacent pair's concatenated pieces is itself a piece, the pair whose piece scores highest
//    (the first on ties) becomes that piece.
//  generate: feeds the first token of that list at position 0; each step runs the model,
//    takes the next prompt token while there is one, else samples (-t 0: the first index of
//    the largest logit); stops when that token is 1, else prints it and feeds it; at most
//    steps positions (-n; 0 or more than seq_len means seq_len); prints "\n" at the end.
//  decode(prev, tok): a piece following token 1 loses one leading ' '; a piece "<0xXX>"
//    prints as that byte; a one-byte piece prints only if isprint or isspace (C locale).
//
// --- the layout written for char and byte vocabularies (V model tokens)
//   id 0 "<unk>", 1 "<s>", 2 "</s>"; ids 3..258 the byte tokens: a byte vocabulary's own
//   tokens (piece: the byte), or for a char vocabulary "<0x00>".."<0xFF>" followed by the
//   characters at 259..258+V; then "<s> " (bos_space below); then " " when a char vocabulary
//   has no space (run.c's dummy prefix must find one).
//   Embedding rows: a model token its own; "<s>" and "<s> " the row of the start token of
//   `fplab sample` (sample_start_token: '\n'); every other id zeros.
//   Classifier (always written untied, vocab_size < 0): a model token its own row; every
//   other id the mean of the model's rows, so its logit is the mean of the model's logits,
//   below the largest unless all are equal: greedy run.c never picks one (rounding: see .c).
//   All scores 0, max_token_length the longest piece. The only adjacent pair whose
//   concatenation is a piece is ("<s>", " "), so run.c's merge loop turns [1, dummy prefix]
//   into the one token "<s> " and nothing else: run.c feeds [start] without a prompt and
//   [start, prompt...] with one, which is what fplab sample feeds (sample_prompt_tokens).
//   Token-id vocabularies (llm.c shards) have no text: ids and the tied flag are kept as they
//   are (the shards' tokenizer decides what 1 means) and no tokenizer.bin is written.
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
// Tokenizer file: int32 max_token_length, then per id: float32 score, int32 len, len bytes.
//
// Known differences that remain (docs/trainer.md): run.c does not print one-byte pieces that
// are neither printable nor white space (control characters; a byte vocabulary's bytes
// >= 0x80); at temperature > 0 it samples with its own generator and can pick an added id
// (each has the geometric mean of the model's probabilities); a character outside the
// vocabulary, which fplab sample refuses, becomes zero-embedding byte tokens there.
#ifndef FPLAB_EXPORT_LLAMA2C_H
#define FPLAB_EXPORT_LLAMA2C_H
#include <stddef.h>
#include <stdint.h>

#include "trainer/data.h"
#include "trainer/llama.h"

// EXPORT_EUNSUPPORTED: the model or vocabulary cannot be expressed in llama2.c's format
// (rope_theta != 10000, norm_eps != 1e-5, a token-id vocabulary's tokenizer); EXPORT_EINVAL:
// malformed input (a bad config, a vocabulary entry that is not a character, a vocabulary
// whose size is not the model's, an output that is an input); EXPORT_EIO: a file cannot be
// written; EXPORT_ENOMEM.
enum { EXPORT_OK = 0, EXPORT_EIO = 1, EXPORT_EUNSUPPORTED = 2, EXPORT_EINVAL = 3, EXPORT_ENOMEM = 4 };
enum { EXPORT_LLAMA2C_HEADER_INTS = 7 };
enum { EXPORT_LLAMA2C_BOS = 1, EXPORT_LLAMA2C_N_SPECIAL = 3, EXPORT_LLAMA2C_N_BYTES = 256 };
#define EXPORT_LLAMA2C_ROPE_THETA 10000.0f  // what run.c hard-codes
#define EXPORT_LLAMA2C_NORM_EPS 1e-5f

// Where the model's tokens and the added pieces sit among run.c's ids.
typedef struct {
    int n_ids;       // ids written: the tokenizer's entries and |vocab_size| of the model file
    int n_model;     // the model's vocabulary V
    int model_base;  // id of model token 0: 3 (byte), 259 (char), 0 (token ids: unchanged)
    int bos_space;   // id of "<s> ", what run.c's merge makes of BOS + dummy prefix (-1: none)
    int space;       // id of the piece " ": the model's space or an added id (-1: none)
    int32_t start;   // the model token whose embedding "<s>" and "<s> " get (sample_start_token)
} export_llama2c_layout;

// The layout for vocabulary v (see above). EXPORT_EINVAL for a malformed vocabulary.
int export_llama2c_layout_of(export_llama2c_layout *l, const data_vocab *v, char *msg, size_t msg_len);

// EXPORT_OK if run.c can run a model of this config, else EXPORT_EUNSUPPORTED with a message
// naming the field, its value and what run.c needs.
int export_llama2c_check(const llama_config *c, char *msg, size_t msg_len);
// Refuses (EXPORT_EINVAL, message naming both options) an output that is an input or the other
// output: --llama2c or --tokenizer the same file as --ckpt (after following links), or
// --llama2c and --tokenizer naming one file (also one that does not exist yet: the same
// directory and name). NULL or "" paths are not checked. What `fplab export` calls first.
int export_llama2c_check_paths(const char *ckpt, const char *model_out, const char *tok_out, char *msg,
                               size_t msg_len);
// Bytes of the model file for this config and layout.
size_t export_llama2c_model_bytes(const llama_config *c, const export_llama2c_layout *l);
// Writes m's weights to path laid out for vocabulary v (v->size must be the model's vocab).
// Checks the config first (nothing is written if it fails).
int export_llama2c_model(const char *path, const llama_model *m, const data_vocab *v, char *msg,
                         size_t msg_len);
// Writes the vocabulary's pieces to path as llama2.c's tokenizer.bin (layout above).
// EXPORT_EUNSUPPORTED for a token-id vocabulary.
int export_llama2c_tokenizer(const char *path, const data_vocab *v, char *msg, size_t msg_len);

#endif
