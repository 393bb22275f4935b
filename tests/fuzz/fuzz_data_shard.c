// fuzz_data_shard.c: libFuzzer harness for the llm.c token-shard reader of trainer/data.c: the
// input as one shard (vocabulary from its tokens, and a fixed vocabulary of 300), and as the
// same shard listed twice with itself as validation data. A loaded set holds the header's
// count of tokens, each below the vocabulary size, and batches draw inside the splits.
// Each input runs twice: as it is, and with the header's token count set to what the file's
// size holds (a fuzzer rarely makes the two agree by mutation, and the reader stops at the first
// disagreement).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "trainer/data.h"

static void check_set(const data_set *s, size_t n) {
    FUZZ_CHECK(s->n_tokens <= n, "%zu tokens from %zu bytes", s->n_tokens, n);
    for (size_t i = 0; i < s->n_tokens; i++)
        FUZZ_CHECK(s->tokens[i] >= 0 && s->tokens[i] < s->vocab.size, "token %d of %d", s->tokens[i], s->vocab.size);
    int32_t x[4], y[4];
    for (int split = 0; split < 2; split++)
        if (data_batch(s, split, 3, 5, 2, 2, x, y) == DATA_OK)
            for (int i = 0; i < 4; i++) FUZZ_CHECK(x[i] >= 0 && x[i] < s->vocab.size, "batch token %d", x[i]);
}

static void run(const uint8_t *d, size_t n) {
    const char *path = fuzz_file(d, n);
    char msg[512], list[160];
    data_set s;
    if (data_load_shards(&s, path, NULL, 0, msg, sizeof msg) == DATA_OK) check_set(&s, n);
    data_free(&s);
    if (data_load_shards(&s, path, NULL, 300, msg, sizeof msg) == DATA_OK) check_set(&s, n);
    data_free(&s);
    snprintf(list, sizeof list, "%s,%s", path, path);
    if (data_load_shards(&s, list, path, 0, msg, sizeof msg) == DATA_OK) check_set(&s, 3 * n);
    data_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    run(d, n);
    if (n < 1024 + 4) return 0;
    uint8_t *b = malloc(n);
    if (!b) abort();
    memcpy(b, d, n);
    // the magic 20240801 (uint32 tokens) is 0x0134d9a1: its first byte 0xa1
    const uint32_t elt = b[0] == 0xa1 ? 4 : 2, count = (uint32_t)((n - 1024) / elt);
    memcpy(b + 8, &count, 4);
    run(b, n);
    free(b);
    return 0;
}
