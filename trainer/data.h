// data.h: training data for the trainer: a UTF-8 text file (character-level vocabulary built
// from the corpus, or byte-level 256) or llm.c token shards, split into train and validation,
// and deterministic batch sampling.
// Constraints: library level: every failure returns DATA_E* with a message naming the file and
// what was expected (never exits); sampling is a pure function of (seed, batch index), so the
// data position is one counter and a resumed run draws the same batches.
//
// llm.c token shards: a header of 256 int32 (little-endian): [0] magic, [1] version, [2] number
// of tokens, rest 0; then the tokens: magic 20240520 version 1 as uint16, magic 20240801
// version 7 as uint32.
#ifndef FPLAB_DATA_H
#define FPLAB_DATA_H
#include <stddef.h>
#include <stdint.h>

// DATA_EIO: a file cannot be opened or read. DATA_EFORMAT: its content is wrong (empty, bad
// header or length, invalid UTF-8, a token or character outside the vocabulary). DATA_EINVAL:
// bad arguments (a vocabulary that is not well formed, B or T <= 0) or data too short for the
// request (a split under 2 tokens at load, under T + 1 in data_batch).
enum { DATA_OK = 0, DATA_EIO = 1, DATA_EFORMAT = 2, DATA_EINVAL = 3, DATA_ENOMEM = 4 };

typedef enum { DATA_VOCAB_CHAR, DATA_VOCAB_BYTE, DATA_VOCAB_TOKENS } data_vocab_kind;

// The vocabulary. Char: token i is the Unicode code point cp[i] (sorted ascending); byte:
// token i is byte i (size 256); tokens (shards): ids only, size = the model's vocabulary.
typedef struct {
    data_vocab_kind kind;
    int size;
    uint32_t *cp;  // char: size code points; NULL otherwise
} data_vocab;

typedef struct {
    data_vocab vocab;
    int32_t *tokens;  // all tokens of the corpus
    size_t n_tokens;
    size_t n_train;   // tokens [0, n_train) train; [n_train, n_tokens) validation
} data_set;

// Reads a text file. kind DATA_VOCAB_CHAR builds the vocabulary from the corpus's code points
// (invalid UTF-8 is an error naming the byte offset); DATA_VOCAB_BYTE uses the 256 bytes (any
// bytes load: no UTF-8 check). When `vocab` is non-NULL (a resumed run or a checkpoint's
// vocabulary) it is used instead (its kind must equal `kind`) and a character outside it is an
// error. The first floor(0.9 n) tokens are train, the rest validation (nanoGPT's split); each
// split needs at least 2 tokens. On failure *out is left empty (data_free is safe).
int data_load_text(data_set *out, const char *path, data_vocab_kind kind, const data_vocab *vocab,
                   char *msg, size_t msg_len);
// Reads one llm.c shard (or several: paths joined by ','); the last 10% of tokens (the same
// rounding as text: train is floor(0.9 n)) is validation unless val_path (NULL or "": none; a
// ','-list too) names shards of its own. Tokens >= vocab_size are an error
// (vocab_size 0: the largest token + 1). A header whose count disagrees with the file size, a
// wrong magic or version, a missing or empty file: DATA_EFORMAT / DATA_EIO with a message.
int data_load_shards(data_set *out, const char *paths, const char *val_path, int vocab_size,
                     char *msg, size_t msg_len);
void data_free(data_set *d);

// Encodes UTF-8 text with the vocabulary into tokens (cap entries); returns the count, or -1
// with a message for a character outside the vocabulary, invalid UTF-8, more than cap tokens or
// a token-id vocabulary. tokens NULL: only counts (cap ignored).
long data_encode(const data_vocab *v, const char *text, int32_t *tokens, size_t cap, char *msg,
                 size_t msg_len);
// Writes the text of token t at buf (NUL-terminated, at most 4 bytes + NUL for char/byte;
// "<t>" for ids); returns the bytes written without the NUL (a caller appends by advancing buf;
// byte token 0 writes one NUL byte and returns 1), or -1 (buf "" when cap > 0) for t outside
// the vocabulary or cap too small.
int data_decode(const data_vocab *v, int32_t t, char *buf, size_t cap);
// Copies v (deep) into out. DATA_OK or DATA_ENOMEM (out left empty).
int data_vocab_copy(data_vocab *out, const data_vocab *v);
void data_vocab_free(data_vocab *v);

// Batch number `index` of split `val` (0 train, 1 validation): B rows of T+1 consecutive tokens
// starting at positions drawn uniformly from the split (keyed by seed, split and index), as
// inputs x (B, T) and targets y (B, T) (y is x shifted by one). DATA_EINVAL if the split holds
// fewer than T+1 tokens. Row b uses draw index * B + b of the split's stream (unbiased bounded
// draw over every start 0 .. len - T - 1), so batch i with B rows equals draws i*B .. i*B+B-1
// taken one row at a time.
int data_batch(const data_set *d, int val, uint64_t seed, uint64_t index, int B, int T, int32_t *x,
               int32_t *y);

#endif
