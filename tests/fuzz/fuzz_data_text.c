// fuzz_data_text.c: libFuzzer harness for the text loader of trainer/data.c: the input as a text
// file with a character vocabulary (built from it), a byte vocabulary, and again with the
// character vocabulary handed in (as a resumed run does; it must load the same tokens). On a
// loaded set: every token is inside the vocabulary, batches draw inside the splits, and
// decoding then encoding the text gives the same tokens.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "trainer/data.h"

static void check_set(const data_set *s) {
    FUZZ_CHECK(s->n_train >= 2 && s->n_tokens - s->n_train >= 2, "splits %zu / %zu", s->n_train, s->n_tokens);
    for (size_t i = 0; i < s->n_tokens; i++)
        FUZZ_CHECK(s->tokens[i] >= 0 && s->tokens[i] < s->vocab.size, "token %d of %d", s->tokens[i], s->vocab.size);
    int32_t x[2 * 3], y[2 * 3];
    for (int split = 0; split < 2; split++)
        if (data_batch(s, split, 7, 1, 2, 1, x, y) == DATA_OK)
            for (int i = 0; i < 2; i++) FUZZ_CHECK(x[i] >= 0 && x[i] < s->vocab.size && y[i] >= 0, "batch");
    data_batch(s, 0, 7, 2, 2, 3, x, y);
}

// Decodes every token into text, encodes the text again: the same tokens (char vocabularies).
static void check_round_trip(const data_set *s) {
    char *text = malloc(s->n_tokens * 4 + 1), *p = text;
    if (!text) abort();
    for (size_t i = 0; i < s->n_tokens; i++) {
        const int k = data_decode(&s->vocab, s->tokens[i], p, 5);
        FUZZ_CHECK(k >= 1 && k <= 4, "decode of token %d gave %d", s->tokens[i], k);
        p += k;
    }
    *p = 0;
    const size_t len = (size_t)(p - text);
    if (strlen(text) == len) {  // (a U+0000 character would end the C string early)
        int32_t *t = malloc((s->n_tokens + 1) * sizeof *t);
        if (!t) abort();
        char msg[256];
        const long m = data_encode(&s->vocab, text, t, s->n_tokens + 1, msg, sizeof msg);
        FUZZ_CHECK(m == (long)s->n_tokens, "encode gave %ld of %zu tokens: %s", m, s->n_tokens, msg);
        FUZZ_CHECK(!memcmp(t, s->tokens, s->n_tokens * sizeof *t), "round trip changed the tokens");
        free(t);
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    const char *path = fuzz_file(d, n);
    char msg[512];
    data_set s;
    if (data_load_text(&s, path, DATA_VOCAB_CHAR, NULL, msg, sizeof msg) == DATA_OK) {
        check_set(&s);
        check_round_trip(&s);
        data_set r;
        FUZZ_CHECK(data_load_text(&r, path, DATA_VOCAB_CHAR, &s.vocab, msg, sizeof msg) == DATA_OK,
                   "the corpus does not load with its own vocabulary: %s", msg);
        FUZZ_CHECK(r.n_tokens == s.n_tokens && !memcmp(r.tokens, s.tokens, s.n_tokens * sizeof *s.tokens),
                   "other tokens with the same vocabulary");
        data_free(&r);
    }
    data_free(&s);
    if (data_load_text(&s, path, DATA_VOCAB_BYTE, NULL, msg, sizeof msg) == DATA_OK) {
        FUZZ_CHECK(s.n_tokens == n && s.vocab.size == 256, "%zu byte tokens from %zu bytes", s.n_tokens, n);
        check_set(&s);
    }
    data_free(&s);
    return 0;
}
