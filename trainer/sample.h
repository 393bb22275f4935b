// sample.h: token generation from a trained llama_model: greedy (temperature 0), temperature
// sampling and nucleus (top-p) sampling, one token at a time through a callback.
// Constraints: library level (status + message, never exits); the output is a pure function of
// (model, prompt, options): the draw of step i is fmt_rng_uniform(key, i) with
// key = fmt_rng_make_key(seed, SAMPLE_RNG_STREAM), nothing comes from the clock.
//
// The model has no KV cache: each step runs llama_forward over the last min(len, seq_len)
// tokens (B = 1) and reads the last position's logits. That is O(T^2) work a token instead of
// O(T), which is fine for the small models this lab trains; a cache would be one more code
// path to keep identical to the training forward. A policy with an attn.kv site (the KV cache,
// e.g. kv8-fp8) rounds the keys and values the attention reads at every step (tests/test_sample.c
// checks each step). With a per-token recipe (eval_kv_per_token) a token's rounded keys and
// values are a function of its own unrounded ones, so each step reads what a cache of rounded
// values would hold, up to the last bits of the float32 keys themselves: recomputed over a
// longer window, the projection's sgemm (blocked by the row count) may round a position's keys
// differently in float32, with or without a policy.
//
// What is fed: the start token, then the prompt's tokens (sample_prompt_tokens). The start
// token stands where llama2.c puts BOS, so that every generation, with or without a prompt,
// begins from the same first step; the llama2.c export gives run.c's BOS that token's
// embedding (trainer/export_llama2c.h), so run.c feeds the model the same sequence.
#ifndef FPLAB_SAMPLE_H
#define FPLAB_SAMPLE_H
#include <stddef.h>
#include <stdint.h>

#include "trainer/data.h"
#include "trainer/llama.h"

enum { SAMPLE_OK = 0, SAMPLE_EINVAL = 1, SAMPLE_ENOMEM = 2, SAMPLE_EMODEL = 3 };
enum { SAMPLE_RNG_STREAM = 0x73616d70 };  // "samp": the stream of the sampler's draws

typedef struct {
    long n_tokens;       // tokens to generate (>= 0)
    double temperature;  // 0: greedy argmax; > 0: softmax(logits / temperature)
    double top_p;        // (0, 1]; 1: off; else keep the most probable tokens whose mass
                         // first exceeds top_p (at least one) and renormalise
    uint64_t seed;       // key of the draws (unused when greedy)
} sample_opts;

// The defaults of `fplab sample`: 256 tokens, temperature 1, top-p 1 (off), seed 1337.
sample_opts sample_opts_default(void);
// SAMPLE_OK, or SAMPLE_EINVAL with a message naming the field and the accepted range.
int sample_opts_validate(const sample_opts *o, char *msg, size_t msg_len);

// Picks a token from one row of logits. temperature 0: the first index of the largest logit
// (u, work, idx unused). Otherwise probabilities softmax(logits / temperature) in double with
// the maximum subtracted; with top_p < 1 they are sorted by (probability descending, index
// ascending), cut after the shortest prefix whose sum exceeds top_p, and the draw u in [0, 1)
// picks the first token whose cumulative mass exceeds u * (mass kept). Returns the token, or
// -1 if a logit is NaN or infinite.
int sample_pick(const float *logits,  // (V)
                int V, double temperature, double top_p, double u,
                double *work,         // (V) scratch
                int *idx);            // (V) scratch (used only when top_p < 1)

// The token every generation starts from: '\n' when a char or byte vocabulary has it (text
// then starts as after a line break, as most lines of a corpus do), else token 0 (token-id
// vocabularies always 0). The llama2.c export gives BOS this token's embedding row.
int32_t sample_start_token(const data_vocab *v);
// The sequence fed before generating: the start token, then the tokens of `prompt` (NULL or ""
// adds none). Returns the count (>= 1), writing at most cap tokens when tokens is non-NULL
// (NULL: only counts), or -1 with a message: a character outside the vocabulary, invalid
// UTF-8, a prompt given to a token-id vocabulary, more than cap tokens.
long sample_prompt_tokens(const data_vocab *v, const char *prompt, int32_t *tokens, size_t cap,
                          char *msg, size_t msg_len);

// Called with each generated token in order; a non-zero return stops the generation (e.g. a
// failed write), which is not an error.
typedef int (*sample_emit_fn)(void *ctx, int32_t token);

// Where sample_generate's tokens go.
typedef struct {
    sample_emit_fn emit;  // each token as it is drawn, with ctx (NULL: none)
    void *ctx;
    int32_t *out;         // every token (o->n_tokens entries; NULL: not kept)
    long n_done;          // set: the number generated
} sample_sink;

// Generates up to o->n_tokens tokens after the prompt (n_prompt >= 1 tokens in [0, V); a prompt
// longer than seq_len is fine: only its last seq_len tokens are seen), into sink (may be NULL).
// Overwrites the model's activations. SAMPLE_EINVAL for bad options or prompt, SAMPLE_ENOMEM,
// SAMPLE_EMODEL when the forward fails or gives non-finite logits (a diverged model), each with
// a message.
int sample_generate(llama_model *m, const int32_t *prompt, int n_prompt, const sample_opts *o, sample_sink *sink,
                    char *msg, size_t msg_len);

#endif
