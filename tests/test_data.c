// test_data.c: training data (trainer/data.h): char and byte vocabularies of text files, UTF-8
// (every 1-, 2- and 3-byte string and the 4-byte edges against a reference written from the
// definition), the 90/10 split (train = floor(0.9 n)), llm.c shards (uint16, uint32, lists,
// a validation shard), batch sampling (determinism, rows are the corpus at a start, every start
// reachable and uniform by chi-square), and every error: code, file named, one line.
// Inputs are temporary files under /tmp, removed by the suite's fini even when an assertion
// fails (a crash can leave them behind).
// Random tests print their seed and read FPLAB_SEED to replay.
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/test_util.h"
#include "trainer/data.h"

static uint64_t test_seed(const char *test) { return tu_seed("test_data", test, 0xda7a5eedULL); }

// --- temporary files

enum { MAX_TMP = 16, MSG_LEN = 1024 };
static char tmp_paths[MAX_TMP][64];
static int n_tmp;

static void tmp_cleanup(void) {
    for (int i = 0; i < n_tmp; i++) unlink(tmp_paths[i]);
    n_tmp = 0;
}

TestSuite(data, .fini = tmp_cleanup);

// Writes n bytes to a new temporary file; returns its path (removed by tmp_cleanup).
static const char *tmp_file(const void *bytes, size_t n) {
    cr_assert_lt(n_tmp, MAX_TMP, "too many temporary files");
    char *p = tmp_paths[n_tmp];
    strcpy(p, "/tmp/fplab_test_data_XXXXXX");
    const int fd = mkstemp(p);
    cr_assert_geq(fd, 0, "mkstemp failed");
    n_tmp++;
    for (size_t done = 0; done < n;) {
        const ssize_t w = write(fd, (const char *)bytes + done, n - done);
        cr_assert_gt(w, 0, "write to %s failed", p);
        done += (size_t)w;
    }
    close(fd);
    return p;
}

static const char *tmp_text(const char *s) { return tmp_file(s, strlen(s)); }

// A path that does not exist (a removed temporary file).
static const char *tmp_missing(void) {
    const char *p = tmp_file("", 0);
    unlink(p);
    return p;
}

static void put_le(unsigned char *p, uint32_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

// The bytes of an llm.c shard (malloc'd, *bytes long): header {magic, version, count, 0...}
// and n tokens of elt (2 or 4) bytes.
static unsigned char *shard_bytes(uint32_t magic, uint32_t version, uint32_t count, const uint32_t *tok, size_t n,
                                  int elt, size_t *bytes) {
    *bytes = 1024 + n * (size_t)elt;
    unsigned char *b = calloc(*bytes, 1);
    put_le(b, magic, 4), put_le(b + 4, version, 4), put_le(b + 8, count, 4);
    for (size_t i = 0; i < n; i++) put_le(b + 1024 + i * (size_t)elt, tok[i], elt);
    return b;
}

static const char *tmp_shard(uint32_t magic, uint32_t version, uint32_t count, const uint32_t *tok, size_t n,
                             int elt) {
    size_t bytes;
    unsigned char *b = shard_bytes(magic, version, count, tok, n, elt, &bytes);
    const char *p = tmp_file(b, bytes);
    free(b);
    return p;
}

// A pipe holding n bytes, as a path ("/dev/fd/N"): not a regular file, so the loaders cannot
// learn its size in advance. A child process writes (a pipe buffers only 64 KiB).
static const char *pipe_of(const void *bytes, size_t n, char path[32]) {
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        close(fds[0]);
        for (size_t done = 0; done < n;) {
            const ssize_t w = write(fds[1], (const char *)bytes + done, n - done);
            if (w <= 0) _exit(1);
            done += (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    snprintf(path, 32, "/dev/fd/%d", fds[0]);
    return path;
}

static const char *shard16(const uint32_t *tok, size_t n) { return tmp_shard(20240520, 1, (uint32_t)n, tok, n, 2); }
static const char *shard32(const uint32_t *tok, size_t n) { return tmp_shard(20240801, 7, (uint32_t)n, tok, n, 4); }

// A uint16 shard of the tokens 0 .. n-1, loaded: token value = position, so a row's start is
// its first token.
static void load_iota(data_set *d, size_t n) {
    uint32_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (uint32_t)i;
    const char *p = shard16(t, n);
    free(t);
    char msg[MSG_LEN] = "";
    const int rc = data_load_shards(d, p, NULL, 0, msg, sizeof msg);
    unlink(p);  // now, not at fini: a test that crashes later leaves nothing behind
    cr_assert_eq(rc, DATA_OK, "%s", msg);
}

// --- expected failures: the code, the file named, one line, nothing left in *d

static void check_failed(int rc, int want, const data_set *d, const char *msg, const char *name, const char *needle) {
    cr_assert_eq(rc, want, "%s: code %d, expected %d (message: %s)", name, rc, want, msg);
    cr_assert(strstr(msg, name), "message does not name '%s': %s", name, msg);
    cr_assert(!needle || strstr(msg, needle), "message lacks '%s': %s", needle, msg);
    cr_assert(!strchr(msg, '\n'), "message is not one line: %s", msg);
    cr_assert(d->tokens == NULL && d->n_tokens == 0 && d->vocab.cp == NULL, "%s: data left after a failure", name);
}

static void text_fails(const char *path, data_vocab_kind kind, const data_vocab *v, int want, const char *needle) {
    data_set d;
    char msg[MSG_LEN] = "";
    const int rc = data_load_text(&d, path, kind, v, msg, sizeof msg);
    check_failed(rc, want, &d, msg, path, needle);
}

static void shards_fail(const char *paths, const char *val, int vocab_size, int want, const char *name,
                        const char *needle) {
    data_set d;
    char msg[MSG_LEN] = "";
    const int rc = data_load_shards(&d, paths, val, vocab_size, msg, sizeof msg);
    check_failed(rc, want, &d, msg, name, needle);
}

// --- reference UTF-8, written from the definition (not from data.c): a lead byte says the
// length, the rest are 10xxxxxx, and the value must be a scalar value (no surrogate, at most
// U+10FFFF) whose shortest form has exactly that length.

static int ref_utf8_len(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

static int ref_encode(uint32_t c, unsigned char *o) {
    const int n = ref_utf8_len(c);
    if (n == 1) {
        o[0] = (unsigned char)c;
        return 1;
    }
    for (int i = n - 1; i > 0; i--, c >>= 6) o[i] = (unsigned char)(0x80 | (c & 0x3F));
    o[0] = (unsigned char)((0xFF00 >> n) & 0xFF) | (unsigned char)c;
    return n;
}

// Length of the well-formed character at s (NUL-terminated), or 0.
static int ref_decode(const unsigned char *s, uint32_t *cp) {
    const unsigned b = s[0];
    const int n = b < 0x80 ? 1 : b >= 0xC0 && b < 0xE0 ? 2 : b >= 0xE0 && b < 0xF0 ? 3 : b >= 0xF0 && b < 0xF8 ? 4 : 0;
    if (!n) return 0;
    uint32_t c = n == 1 ? b : b & (0x7Fu >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || ref_utf8_len(c) != n) return 0;
    *cp = c;
    return n;
}

static bool ref_valid(const unsigned char *s) {
    uint32_t c;
    for (int n; *s; s += n)
        if (!(n = ref_decode(s, &c))) return false;
    return true;
}

// Concatenated text of tokens t[0..n) (buf has room for 4 n + 1 bytes); returns its length.
static size_t decode_all(const data_vocab *v, const int32_t *t, size_t n, char *buf) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        const int k = data_decode(v, t[i], buf + len, 5);
        cr_assert_gt(k, 0, "token %d did not decode", t[i]);
        len += (size_t)k;
    }
    return len;
}

// --- vocabularies

// "héllo ✓\nhello 𝄞 world\n": 1-, 2-, 3- and 4-byte characters.
static const char KNOWN[] = "h\xC3\xA9llo \xE2\x9C\x93\nhello \xF0\x9D\x84\x9E world\n";

Test(data, char_vocab_of_known_text) {
    const char *p = tmp_text(KNOWN);
    data_set d;
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_load_text(&d, p, DATA_VOCAB_CHAR, NULL, msg, sizeof msg), DATA_OK, "%s", msg);
    const uint32_t want[] = {'\n', ' ', 'd', 'e', 'h', 'l', 'o', 'r', 'w', 0xE9, 0x2713, 0x1D11E};
    const int nw = (int)(sizeof want / sizeof want[0]);
    cr_assert_eq(d.vocab.kind, DATA_VOCAB_CHAR);
    cr_assert_eq(d.vocab.size, nw, "vocab size %d, expected %d", d.vocab.size, nw);
    for (int i = 0; i < nw; i++) cr_assert_eq(d.vocab.cp[i], want[i], "cp[%d] = U+%04X, expected U+%04X", i, d.vocab.cp[i], want[i]);
    // 22 characters (35 bytes): 19 train, 3 validation.
    cr_assert_eq(d.n_tokens, 22, "%zu tokens", d.n_tokens);
    cr_assert_eq(d.n_train, 19, "%zu train", d.n_train);
    char buf[4 * 22 + 1];
    const size_t len = decode_all(&d.vocab, d.tokens, d.n_tokens, buf);
    cr_assert(len == strlen(KNOWN) && !memcmp(buf, KNOWN, len), "corpus does not decode back: %.*s", (int)len, buf);

    int32_t t[16];
    const char *hello = "h\xC3\xA9llo \xE2\x9C\x93";  // 7 characters, 10 bytes
    const long n = data_encode(&d.vocab, hello, t, 16, msg, sizeof msg);
    const int32_t ids[] = {4, 9, 5, 5, 6, 1, 10};  // h é l l o ' ' ✓
    cr_assert_eq(n, 7, "encode gave %ld tokens (%s)", n, msg);
    for (int i = 0; i < 7; i++) cr_assert_eq(t[i], ids[i], "token %d is %d, expected %d", i, t[i], ids[i]);
    cr_assert_eq(data_encode(&d.vocab, hello, NULL, 0, msg, sizeof msg), 7, "count only");
    const size_t l2 = decode_all(&d.vocab, t, 7, buf);
    cr_assert(l2 == 10 && !memcmp(buf, hello, 10), "round trip: %.*s", (int)l2, buf);
    char one[5];
    cr_assert_eq(data_decode(&d.vocab, 11, one, sizeof one), 4);
    cr_assert_str_eq(one, "\xF0\x9D\x84\x9E");
    data_free(&d);
    cr_assert(d.tokens == NULL && d.vocab.cp == NULL);
}

Test(data, byte_vocab) {
    const unsigned char bytes[] = {0x00, 'a', 0xFF, 0xC3, 0xA9, 0x80, '\n', 'z', 0xFE, 0x01, 0x7F, 0xC0, 'q', 0xED, 0xA0, 0x80, 'x', 'y', 'w', 'v'};
    const size_t n = sizeof bytes;
    const char *p = tmp_file(bytes, n);
    data_set d;
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_load_text(&d, p, DATA_VOCAB_BYTE, NULL, msg, sizeof msg), DATA_OK, "%s", msg);
    cr_assert(d.vocab.kind == DATA_VOCAB_BYTE && d.vocab.size == 256 && d.vocab.cp == NULL);
    cr_assert_eq(d.n_tokens, n);
    cr_assert_eq(d.n_train, 18);
    for (size_t i = 0; i < n; i++) cr_assert_eq(d.tokens[i], bytes[i], "token %zu", i);
    int32_t t[8];
    cr_assert_eq(data_encode(&d.vocab, "h\xC3\xA9llo", t, 8, msg, sizeof msg), 6);
    const unsigned char hello[] = {'h', 0xC3, 0xA9, 'l', 'l', 'o'};
    for (int i = 0; i < 6; i++) cr_assert_eq(t[i], hello[i]);
    for (int b = 0; b < 256; b++) {
        char out[2] = {1, 1};
        cr_assert_eq(data_decode(&d.vocab, b, out, sizeof out), 1, "byte %d", b);
        cr_assert(out[0] == (char)b && out[1] == 0, "byte %d decodes to 0x%02X", b, (unsigned char)out[0]);
    }
    data_free(&d);
    // The same bytes are not UTF-8: a char vocabulary refuses them at the 0xFF (offset 2).
    text_fails(p, DATA_VOCAB_CHAR, NULL, DATA_EFORMAT, "byte offset 2:");
}

// Resuming: a second file loads with the first one's vocabulary and ids.
Test(data, text_with_given_vocab) {
    const char *a = tmp_text("hello world, hello moon\n");
    const char *b = tmp_text("low hell old moon owl\n");
    data_set da, db;
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_load_text(&da, a, DATA_VOCAB_CHAR, NULL, msg, sizeof msg), DATA_OK, "%s", msg);
    data_vocab v;
    cr_assert_eq(data_vocab_copy(&v, &da.vocab), DATA_OK);
    data_free(&da);  // the copy is deep
    cr_assert_eq(data_load_text(&db, b, DATA_VOCAB_CHAR, &v, msg, sizeof msg), DATA_OK, "%s", msg);
    cr_assert_eq(db.vocab.size, v.size);
    cr_assert(db.vocab.cp != v.cp && !memcmp(db.vocab.cp, v.cp, (size_t)v.size * 4), "vocabulary not copied");
    char buf[4 * 64];
    const size_t len = decode_all(&v, db.tokens, db.n_tokens, buf);
    cr_assert(len == 22 && !memcmp(buf, "low hell old moon owl\n", len), "%.*s", (int)len, buf);
    data_free(&db);
    // A character the vocabulary lacks: 'x' (U+0078) at byte offset 2.
    text_fails(tmp_text("hex hex hex hex\n"), DATA_VOCAB_CHAR, &v, DATA_EFORMAT, "U+0078 'x' at byte offset 2");
    data_vocab_free(&v);
}

// Every 1- and 2-byte string, every 3-byte string with a 3-byte lead, 4-byte leads with every
// second byte and edge values after, against the reference; valid ones round-trip. The
// vocabulary is every scalar value but NUL (which a C string cannot hold).
Test(data, utf8_against_reference) {
    data_vocab v = {DATA_VOCAB_CHAR, 0, malloc(0x110000 * sizeof(uint32_t))};
    for (uint32_t c = 1; c < 0x110000; c++)
        if (c < 0xD800 || c > 0xDFFF) v.cp[v.size++] = c;
    cr_assert_eq(v.size, 0x110000 - 2048 - 1);
    unsigned char s[8];
    for (int t = 0; t < v.size; t++) {  // every character: decode, then encode back
        char out[5];
        unsigned char want[4];
        const int n = ref_encode(v.cp[t], want);
        cr_assert_eq(data_decode(&v, t, out, sizeof out), n, "U+%04X", v.cp[t]);
        cr_assert(!memcmp(out, want, (size_t)n), "U+%04X encodes wrongly", v.cp[t]);
        int32_t back = -1;
        cr_assert_eq(data_encode(&v, out, &back, 1, NULL, 0), 1, "U+%04X", v.cp[t]);
        cr_assert_eq(back, t, "U+%04X", v.cp[t]);
    }
    long checked = 0;
    const unsigned edge[] = {0x01, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF};
    for (unsigned b0 = 1; b0 < 256; b0++)
        for (unsigned b1 = 0; b1 < 256; b1++) {
            const bool three = b0 >= 0xE0 && b0 < 0xF0 && b1 > 0, four = b0 >= 0xF0 && b1 > 0;
            const unsigned n2 = three ? 256 : four ? sizeof edge / sizeof edge[0] : 1;
            for (unsigned k2 = 0; k2 < n2; k2++)
                for (unsigned k3 = 0; k3 < (four ? n2 : 1); k3++) {
                    const unsigned b2 = three ? k2 : four ? edge[k2] : 0, b3 = four ? edge[k3] : 0;
                    if (three && b2 == 0) continue;
                    s[0] = (unsigned char)b0, s[1] = (unsigned char)b1, s[2] = (unsigned char)b2;
                    s[3] = (unsigned char)b3, s[4] = 0;
                    const bool valid = ref_valid(s);
                    int32_t t[4];
                    char msg[256] = "";
                    const long n = data_encode(&v, (const char *)s, t, 4, msg, sizeof msg);
                    cr_assert_eq(n >= 0, valid, "%02X %02X %02X %02X: %s, reference says %s (%s)", b0, b1, b2, b3,
                                 n >= 0 ? "accepted" : "rejected", valid ? "valid" : "invalid", msg);
                    if (valid) {
                        char buf[17];
                        const size_t len = decode_all(&v, t, (size_t)n, buf);
                        cr_assert(len == strlen((const char *)s) && !memcmp(buf, s, len), "%02X %02X %02X %02X", b0, b1, b2, b3);
                    } else {
                        cr_assert(strstr(msg, "invalid UTF-8 at byte offset"), "%s", msg);
                    }
                    checked++;
                }
        }
    cr_assert_gt(checked, 1000000);
    data_vocab_free(&v);
}

// Named failures with the offset of the sequence's first byte.
Test(data, invalid_utf8_in_file) {
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"ab\x80" "cd", "byte offset 2: expected the first byte of a character, found continuation byte 0x80"},
        {"a\xC0\xAF", "byte offset 1: expected a lead byte, found 0xC0"},
        {"xy\xE0\x80\xAF", "byte offset 2: expected byte 2 of the sequence of lead byte 0xE0 in 0xA0-0xBF, found 0x80 (an overlong form)"},
        {"\xF0\x8F\xBF\xBF", "byte offset 0: expected byte 2 of the sequence of lead byte 0xF0 in 0x90-0xBF, found 0x8F (an overlong form)"},
        {"\xED\xA0\x80", "byte offset 0: expected byte 2 of the sequence of lead byte 0xED in 0x80-0x9F, found 0xA0 (a surrogate"},
        {"abc\xF4\x90\x80\x80", "byte offset 3: expected byte 2 of the sequence of lead byte 0xF4 in 0x80-0x8F, found 0x90 (above U+10FFFF)"},
        {"\xF5\x80\x80\x80", "byte offset 0: expected a lead byte 0x00-0x7F or 0xC2-0xF4, found 0xF5"},
        {"ok \xC3(", "byte offset 3: expected byte 2 of the sequence of lead byte 0xC3 in 0x80-0xBF, found 0x28"},
        {"end\xE2\x9C", "byte offset 3: expected 3 bytes after lead byte 0xE2, found the end after 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) text_fails(tmp_text(bad[i].text), DATA_VOCAB_CHAR, NULL, DATA_EFORMAT, bad[i].needle);
}

// --- the split: train = floor(0.9 n), validation = ceil(0.1 n), both at least 2 tokens

Test(data, split_is_90_10) {
    const size_t sizes[] = {11, 12, 19, 20, 21, 99, 100, 101, 999, 12345, 1115394};
    char *bytes = malloc(1115394);
    for (size_t i = 0; i < 1115394; i++) bytes[i] = (char)('a' + i % 26);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const size_t n = sizes[k];
        const char *p = tmp_file(bytes, n);
        data_set d;
        char msg[MSG_LEN] = "";
        cr_assert_eq(data_load_text(&d, p, DATA_VOCAB_BYTE, NULL, msg, sizeof msg), DATA_OK, "%s", msg);
        cr_assert_eq(d.n_tokens, n);
        cr_assert_eq(d.n_train, 9 * n / 10, "n %zu: %zu train, expected floor(0.9 n) = %zu", n, d.n_train, 9 * n / 10);
        cr_assert(10 * d.n_train <= 9 * n && 9 * n < 10 * (d.n_train + 1), "n %zu", n);
        data_free(&d);
        unlink(p);
    }
    free(bytes);
    // nanoGPT's tinyshakespeare split (data[:int(n*0.9)]), and exact tenths.
    const size_t n_ts = 1115394;
    cr_assert_eq(9 * n_ts / 10, 1003854);
    // Characters, not bytes: 20 two-byte characters give 18 + 2.
    char e20[41] = "";
    for (int i = 0; i < 20; i++) strcat(e20, "\xC3\xA9");
    data_set d;
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_load_text(&d, tmp_text(e20), DATA_VOCAB_CHAR, NULL, msg, sizeof msg), DATA_OK, "%s", msg);
    cr_assert(d.n_tokens == 20 && d.n_train == 18 && d.vocab.size == 1, "%zu tokens, %zu train", d.n_tokens, d.n_train);
    data_free(&d);
    // Shards: the same rounding. 50 tokens: 45 + 5.
    load_iota(&d, 50);
    cr_assert(d.n_tokens == 50 && d.n_train == 45, "%zu tokens, %zu train", d.n_tokens, d.n_train);
    data_free(&d);
}

// The shortest text that loads has 11 tokens (9 + 2); shorter ones name the file and the split.
Test(data, split_too_short) {
    text_fails(tmp_text("abcdefghij"), DATA_VOCAB_BYTE, NULL, DATA_EINVAL, "10 tokens give 9 for training and 1 for validation");
    text_fails(tmp_text("abc"), DATA_VOCAB_CHAR, NULL, DATA_EINVAL, "3 tokens give 2 for training and 1 for validation");
    text_fails(tmp_text("a"), DATA_VOCAB_CHAR, NULL, DATA_EINVAL, "0 for training");
    const uint32_t t[5] = {1, 2, 3, 4, 5};
    const char *s = shard16(t, 5);
    shards_fail(s, NULL, 0, DATA_EINVAL, s, "5 tokens give 4 for training and 1 for validation");
    const char *v = shard16(t, 1);
    shards_fail(s, v, 0, DATA_EINVAL, v, "5 training and 1 validation");
}

// --- shards

Test(data, shard_uint16_round_trip) {
    const uint64_t seed = test_seed("shard_uint16_round_trip");
    tu_rng r = {fmt_rng_make_key(seed, 1), 0};
    enum { N = 3000 };
    uint32_t t[N];
    for (int i = 0; i < N; i++) t[i] = (uint32_t)tu_rng_int(&r, 0, 50256);
    t[17] = 50256, t[18] = 0;
    const char *p = shard16(t, N);
    data_set d;
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_load_shards(&d, p, NULL, 50257, msg, sizeof msg), DATA_OK, "%s", msg);
    cr_assert(d.vocab.kind == DATA_VOCAB_TOKENS && d.vocab.size == 50257 && d.vocab.cp == NULL);
    cr_assert(d.n_tokens == N && d.n_train == 2700);
    for (int i = 0; i < N; i++) cr_assert_eq(d.tokens[i], (int32_t)t[i], "token %d", i);
    char buf[16];
    cr_assert_eq(data_decode(&d.vocab, 42, buf, sizeof buf), 4);
    cr_assert_str_eq(buf, "<42>");
    cr_assert_eq(data_decode(&d.vocab, 50257, buf, sizeof buf), -1);
    cr_assert_eq(data_encode(&d.vocab, "hi", NULL, 0, msg, sizeof msg), -1, "ids cannot encode text");
    data_free(&d);
    // vocab_size 0: the largest token + 1 (65535 is the largest uint16).
    t[5] = 65535;
    p = shard16(t, N);
    cr_assert_eq(data_load_shards(&d, p, "", 0, msg, sizeof msg), DATA_OK, "%s", msg);
    cr_assert_eq(d.vocab.size, 65536);
    cr_assert_eq(d.tokens[5], 65535);
    data_free(&d);
}

Test(data, shard_uint32_round_trip) {
    const uint32_t t[] = {0, 65535, 65536, 100000, 2147483646u, 7, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15};
    const size_t n = sizeof t / sizeof t[0];
    const char *p = shard32(t, n);
    data_set d;
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_load_shards(&d, p, NULL, 0, msg, sizeof msg), DATA_OK, "%s", msg);
    cr_assert_eq(d.vocab.size, 2147483647);
    cr_assert(d.n_tokens == n && d.n_train == 18);
    for (size_t i = 0; i < n; i++) cr_assert_eq((uint32_t)d.tokens[i], t[i], "token %zu", i);
    data_free(&d);
}

// "a,b" concatenates (uint16 then uint32 shards); a validation shard is kept whole.
Test(data, shard_lists_and_validation_shard) {
    uint32_t a[30], b[20];
    for (int i = 0; i < 30; i++) a[i] = (uint32_t)i;
    for (int i = 0; i < 20; i++) b[i] = (uint32_t)(1000 + i);
    const char *pa = shard16(a, 30), *pb = shard32(b, 20);
    char list[256];
    snprintf(list, sizeof list, "%s,%s", pa, pb);
    data_set d;
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_load_shards(&d, list, NULL, 2000, msg, sizeof msg), DATA_OK, "%s", msg);
    cr_assert(d.n_tokens == 50 && d.n_train == 45 && d.vocab.size == 2000);
    for (int i = 0; i < 50; i++) cr_assert_eq(d.tokens[i], i < 30 ? i : 1000 + i - 30, "token %d", i);
    data_free(&d);
    cr_assert_eq(data_load_shards(&d, pa, pb, 0, msg, sizeof msg), DATA_OK, "%s", msg);
    cr_assert(d.n_tokens == 50 && d.n_train == 30 && d.vocab.size == 1020, "%zu %zu %d", d.n_tokens, d.n_train, d.vocab.size);
    for (int i = 0; i < 50; i++) cr_assert_eq(d.tokens[i], i < 30 ? i : 1000 + i - 30, "token %d", i);
    data_free(&d);
}

Test(data, shard_errors) {
    const uint32_t t[64] = {1, 2, 3, 4, 5, 6, 7, 500, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    const char *good = shard16(t, 20);
    const char *missing = tmp_missing();
    shards_fail(missing, NULL, 0, DATA_EIO, missing, "cannot open");
    const char *empty = tmp_file("", 0);
    shards_fail(empty, NULL, 0, DATA_EFORMAT, empty, "is empty");
    unsigned char hundred[100] = {0};
    const char *short_hdr = tmp_file(hundred, sizeof hundred);
    shards_fail(short_hdr, NULL, 0, DATA_EFORMAT, short_hdr, "has 100 bytes");
    const char *magic = tmp_shard(12345, 1, 20, t, 20, 2);
    shards_fail(magic, NULL, 0, DATA_EFORMAT, magic, "magic 12345, expected 20240520");
    const char *v16 = tmp_shard(20240520, 7, 20, t, 20, 2);
    shards_fail(v16, NULL, 0, DATA_EFORMAT, v16, "version 7 with magic 20240520, expected version 1");
    const char *v32 = tmp_shard(20240801, 1, 20, t, 20, 4);
    shards_fail(v32, NULL, 0, DATA_EFORMAT, v32, "version 1 with magic 20240801, expected version 7");
    const char *longer = tmp_shard(20240520, 1, 40, t, 20, 2);  // header lies: 40 tokens, 20 there
    shards_fail(longer, NULL, 0, DATA_EFORMAT, longer, "header says 40 uint16 tokens (1104 bytes in all), but the file has 1064 bytes");
    const char *shorter = tmp_shard(20240801, 7, 10, t, 20, 4);
    shards_fail(shorter, NULL, 0, DATA_EFORMAT, shorter, "header says 10 uint32 tokens (1064 bytes in all), but the file has 1104 bytes");
    const char *zero = tmp_shard(20240520, 1, 0, t, 0, 2);
    shards_fail(zero, NULL, 0, DATA_EFORMAT, zero, "0 tokens");
    shards_fail(good, NULL, 256, DATA_EFORMAT, good, "token 500 at position 7, expected tokens below the vocabulary size 256");
    shards_fail(good, NULL, 500, DATA_EFORMAT, good, "token 500 at position 7, expected tokens below the vocabulary size 500");
    data_set d;
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_load_shards(&d, good, NULL, 501, msg, sizeof msg), DATA_OK, "token 500 fits 501: %s", msg);
    data_free(&d);
    const uint32_t int_max[20] = {3, 2147483647u};  // vocab_size 0: the largest + 1 must be an int
    const char *im = shard32(int_max, 20);
    shards_fail(im, NULL, 0, DATA_EFORMAT, im, "token 2147483647 at position 1, expected tokens below 2147483647");
    const uint32_t huge[20] = {3, 0xFFFFFFFFu};
    const char *big = shard32(huge, 20);
    shards_fail(big, NULL, 0, DATA_EFORMAT, big, "token 4294967295 at position 1");
    shards_fail("/tmp", NULL, 0, DATA_EIO, "/tmp", NULL);  // a directory
    // Lists name the shard at fault.
    char list[256];
    snprintf(list, sizeof list, "%s,%s", good, missing);
    shards_fail(list, NULL, 0, DATA_EIO, missing, "cannot open");
    snprintf(list, sizeof list, "%s,,%s", good, good);
    shards_fail(list, NULL, 0, DATA_EINVAL, list, "entry 2 is empty");
    snprintf(list, sizeof list, "%s,", good);
    shards_fail(list, NULL, 0, DATA_EINVAL, list, "entry 2 is empty");
    shards_fail(good, missing, 0, DATA_EIO, missing, "cannot open");
    shards_fail(good, magic, 0, DATA_EFORMAT, magic, "magic 12345");
    shards_fail(good, NULL, -1, DATA_EINVAL, good, "vocabulary size -1");
    cr_assert_eq(data_load_shards(&d, "", NULL, 0, msg, sizeof msg), DATA_EINVAL);
    cr_assert_eq(data_load_shards(&d, NULL, NULL, 0, NULL, 0), DATA_EINVAL);
}

Test(data, text_errors) {
    const char *missing = tmp_missing();
    text_fails(missing, DATA_VOCAB_CHAR, NULL, DATA_EIO, "cannot open");
    const char *empty = tmp_file("", 0);
    text_fails(empty, DATA_VOCAB_CHAR, NULL, DATA_EFORMAT, "is empty");
    text_fails(empty, DATA_VOCAB_BYTE, NULL, DATA_EFORMAT, "is empty");
    text_fails("/tmp", DATA_VOCAB_CHAR, NULL, DATA_EIO, "directory");
    const char *p = tmp_text("some text that is long enough\n");
    text_fails(p, DATA_VOCAB_TOKENS, NULL, DATA_EINVAL, "expected char or byte");
    uint32_t cps[3] = {'a', 'c', 'b'};  // not ascending
    data_vocab bad = {DATA_VOCAB_CHAR, 3, cps};
    text_fails(p, DATA_VOCAB_CHAR, &bad, DATA_EINVAL, "entry 2 is U+0062");
    cps[1] = 0xD800, cps[2] = 0xE000;  // a surrogate
    text_fails(p, DATA_VOCAB_CHAR, &bad, DATA_EINVAL, "entry 1 is U+D800");
    const data_vocab byte = {DATA_VOCAB_BYTE, 256, NULL};
    text_fails(p, DATA_VOCAB_CHAR, &byte, DATA_EINVAL, "a char vocabulary was asked for, but a byte one was given");
    const data_vocab byte_bad = {DATA_VOCAB_BYTE, 255, NULL};
    text_fails(p, DATA_VOCAB_BYTE, &byte_bad, DATA_EINVAL, "expected 256");
    data_set d;
    cr_assert_eq(data_load_text(&d, "", DATA_VOCAB_CHAR, NULL, NULL, 0), DATA_EINVAL);
}

Test(data, encode_decode_errors) {
    const uint32_t cps[] = {'a', 'b', 0xE9, 0x2713};
    const data_vocab v = {DATA_VOCAB_CHAR, 4, (uint32_t *)cps};
    int32_t t[8];
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_encode(&v, "ab\xFF", t, 8, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "text: invalid UTF-8 at byte offset 2"), "%s", msg);
    cr_assert_eq(data_encode(&v, "a\xC3\xA9z", t, 8, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "U+007A 'z' at byte offset 3 is not in the vocabulary of 4 characters"), "%s", msg);
    cr_assert_eq(data_encode(&v, "a\n", t, 8, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "U+000A at byte offset 1"), "control characters are not quoted: %s", msg);
    cr_assert_eq(data_encode(&v, "abab", t, 3, msg, sizeof msg), -1, "4 tokens into room for 3");
    cr_assert(strstr(msg, "more than 3 tokens"), "%s", msg);
    cr_assert_eq(data_encode(&v, "abab", t, 4, msg, sizeof msg), 4);
    cr_assert_eq(data_encode(&v, "", t, 0, msg, sizeof msg), 0);
    const data_vocab bytes = {DATA_VOCAB_BYTE, 256, NULL};
    cr_assert_eq(data_encode(&bytes, "abab", t, 3, msg, sizeof msg), -1);
    cr_assert_eq(data_encode(&bytes, "abab", NULL, 0, msg, sizeof msg), 4);
    char buf[8] = "x";
    cr_assert_eq(data_decode(&v, -1, buf, sizeof buf), -1);
    cr_assert_str_eq(buf, "");
    cr_assert_eq(data_decode(&v, 4, buf, sizeof buf), -1);
    cr_assert_eq(data_decode(&v, 3, buf, 3), -1, "3 bytes + NUL do not fit 3");
    cr_assert_eq(data_decode(&v, 3, buf, 4), 3);
    cr_assert_str_eq(buf, "\xE2\x9C\x93");
    cr_assert_eq(data_decode(&bytes, 256, buf, sizeof buf), -1);
}

Test(data, vocab_copy_is_deep) {
    data_vocab v = {DATA_VOCAB_CHAR, 3, malloc(3 * sizeof(uint32_t))}, c;
    v.cp[0] = 'a', v.cp[1] = 0xE9, v.cp[2] = 0x1D11E;
    cr_assert_eq(data_vocab_copy(&c, &v), DATA_OK);
    cr_assert(c.kind == v.kind && c.size == 3 && c.cp != v.cp);
    v.cp[1] = 'x';
    data_vocab_free(&v);
    cr_assert(v.cp == NULL && v.size == 0);
    cr_assert(c.cp[0] == 'a' && c.cp[1] == 0xE9 && c.cp[2] == 0x1D11E);
    data_vocab_free(&c);
    const data_vocab b = {DATA_VOCAB_BYTE, 256, NULL};
    cr_assert_eq(data_vocab_copy(&c, &b), DATA_OK);
    cr_assert(c.kind == DATA_VOCAB_BYTE && c.size == 256 && c.cp == NULL);
}

// Pipes: the size is not known in advance, so the length checks happen while reading; a text
// of 200000 bytes makes the reader grow its buffer.
Test(data, pipes_take_the_streaming_path) {
    uint32_t t[20];
    for (int i = 0; i < 20; i++) t[i] = (uint32_t)(7 * i);
    char path[32], msg[MSG_LEN] = "";
    size_t n;
    data_set d;
    unsigned char *b = shard_bytes(20240520, 1, 20, t, 20, 2, &n);
    cr_assert_eq(data_load_shards(&d, pipe_of(b, n, path), NULL, 0, msg, sizeof msg), DATA_OK, "%s", msg);
    cr_assert(d.n_tokens == 20 && d.tokens[19] == 133 && d.vocab.size == 134);
    data_free(&d);
    free(b);
    b = shard_bytes(20240520, 1, 40, t, 20, 2, &n);
    shards_fail(pipe_of(b, n, path), NULL, 0, DATA_EFORMAT, path, "header says 40 uint16 tokens (1104 bytes in all), but the file ends after 20 tokens");
    free(b);
    b = shard_bytes(20240801, 7, 10, t, 20, 4, &n);
    shards_fail(pipe_of(b, n, path), NULL, 0, DATA_EFORMAT, path, "header says 10 uint32 tokens (1064 bytes in all), but the file is longer");
    free(b);
    enum { TEXT = 200000 };
    char *text = malloc(TEXT);
    for (int i = 0; i < TEXT; i++) text[i] = (char)('a' + i % 7);
    cr_assert_eq(data_load_text(&d, pipe_of(text, TEXT, path), DATA_VOCAB_CHAR, NULL, msg, sizeof msg), DATA_OK, "%s", msg);
    cr_assert(d.n_tokens == TEXT && d.vocab.size == 7 && d.n_train == 180000);
    for (int i = 0; i < TEXT; i++) cr_assert_eq(d.tokens[i], i % 7, "token %d", i);
    data_free(&d);
    free(text);
    while (wait(NULL) > 0) {}
}

// --- batches

// Row b of (x, y) is tokens [s, s + T] of the corpus for one s in [lo, lo + len - T - 1].
static size_t check_row(const data_set *d, int val, const int32_t *x, const int32_t *y, int T, const char *what) {
    const size_t lo = val ? d->n_train : 0, len = val ? d->n_tokens - d->n_train : d->n_train;
    for (size_t s = lo; s + T + 1 <= lo + len; s++)
        if (!memcmp(x, d->tokens + s, (size_t)T * 4) && !memcmp(y, d->tokens + s + 1, (size_t)T * 4)) return s;
    cr_assert_fail("%s: row is not T + 1 consecutive tokens of the %s split", what, val ? "validation" : "training");
    return 0;
}

Test(data, batch_rows_are_the_corpus) {
    const uint64_t seed = test_seed("batch_rows_are_the_corpus");
    tu_rng r = {fmt_rng_make_key(seed, 2), 0};
    enum { N = 2000, B = 4, T = 16 };
    unsigned char bytes[N];
    for (int i = 0; i < N; i++) bytes[i] = (unsigned char)tu_rng_u32(&r);
    data_set d;
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_load_text(&d, tmp_file(bytes, N), DATA_VOCAB_BYTE, NULL, msg, sizeof msg), DATA_OK, "%s", msg);
    int32_t x[B * T], y[B * T];
    for (int val = 0; val < 2; val++)
        for (uint64_t i = 0; i < 50; i++) {
            cr_assert_eq(data_batch(&d, val, seed, i, B, T, x, y), DATA_OK);
            for (int b = 0; b < B; b++) {
                for (int t = 0; t + 1 < T; t++) cr_assert_eq(y[b * T + t], x[b * T + t + 1], "y is not x shifted");
                check_row(&d, val, x + b * T, y + b * T, T, "random bytes");
            }
        }
    data_free(&d);
}

Test(data, batch_determinism) {
    const uint64_t seed = test_seed("batch_determinism");
    enum { B = 4, T = 16 };
    data_set d, d2;
    load_iota(&d, 1000);
    load_iota(&d2, 1000);
    int32_t x[B * T], y[B * T], x2[B * T], y2[B * T];
    for (int val = 0; val < 2; val++) {
        cr_assert_eq(data_batch(&d, val, seed, 7, B, T, x, y), DATA_OK);
        cr_assert_eq(data_batch(&d2, val, seed, 7, B, T, x2, y2), DATA_OK);
        cr_assert(!memcmp(x, x2, sizeof x) && !memcmp(y, y2, sizeof y), "same seed and index, different batch");
        cr_assert_eq(data_batch(&d, val, seed, 8, B, T, x2, y2), DATA_OK);
        cr_assert(memcmp(x, x2, sizeof x), "index 7 and 8 give the same batch");
        cr_assert_eq(data_batch(&d, val, seed + 1, 7, B, T, x2, y2), DATA_OK);
        cr_assert(memcmp(x, x2, sizeof x), "seeds %llu and +1 give the same batch", (unsigned long long)seed);
    }
    // Row b of batch i with B rows is draw i * B + b: the same as batches of one row.
    for (int val = 0; val < 2; val++)
        for (uint64_t i = 0; i < 20; i++) {
            cr_assert_eq(data_batch(&d, val, seed, i, B, T, x, y), DATA_OK);
            for (int b = 0; b < B; b++) {
                cr_assert_eq(data_batch(&d, val, seed, i * B + (uint64_t)b, 1, T, x2, y2), DATA_OK);
                cr_assert(!memcmp(x + b * T, x2, T * 4) && !memcmp(y + b * T, y2, T * 4), "batch %llu row %d",
                          (unsigned long long)i, b);
            }
        }
    // Indices near 2^64 stay in range.
    const size_t len = d.n_train;
    for (uint64_t i = UINT64_MAX - 3; i != 0; i++) {
        cr_assert_eq(data_batch(&d, 0, seed, i, B, T, x, y), DATA_OK);
        for (int b = 0; b < B; b++) cr_assert_leq((size_t)x[b * T], len - T - 1);
    }
    data_free(&d2);
    // Train and validation draw from different streams: splits of equal length (100 + 100
    // tokens with a validation shard) give different relative starts.
    uint32_t a[100], v[100];
    for (int i = 0; i < 100; i++) a[i] = (uint32_t)i, v[i] = (uint32_t)(100 + i);
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_load_shards(&d2, shard16(a, 100), shard16(v, 100), 0, msg, sizeof msg), DATA_OK, "%s", msg);
    enum { B8 = 8 };
    int32_t xt[B8 * T], yt[B8 * T], xv[B8 * T], yv[B8 * T];
    cr_assert_eq(data_batch(&d2, 0, seed, 0, B8, T, xt, yt), DATA_OK);
    cr_assert_eq(data_batch(&d2, 1, seed, 0, B8, T, xv, yv), DATA_OK);
    int same = 0;
    for (int b = 0; b < B8; b++) {
        cr_assert(xt[b * T] < 100 && xv[b * T] >= 100, "rows from the wrong split");
        same += xt[b * T] == xv[b * T] - 100;
    }
    cr_assert_lt(same, B8, "train and validation drew the same starts");
    data_free(&d2);
    data_free(&d);
}

// 50 tokens: train 45, so T = 4 leaves 41 starts 0..40. 16000 rows: every start seen, none out
// of range, and the counts uniform: chi-square with 40 degrees of freedom below its upper 1e-6
// quantile 97.65 (mpmath: gammainc(20, x/2, inf, regularized) = 1e-6).
Test(data, every_start_reachable_and_uniform) {
    const uint64_t seed = test_seed("every_start_reachable_and_uniform");
    enum { T = 4, B = 8, BATCHES = 2000, STARTS = 41 };
    data_set d;
    load_iota(&d, 50);
    int32_t x[B * T], y[B * T];
    long count[STARTS] = {0};
    for (uint64_t i = 0; i < BATCHES; i++) {
        cr_assert_eq(data_batch(&d, 0, seed, i, B, T, x, y), DATA_OK);
        for (int b = 0; b < B; b++) {
            const int32_t s = x[b * T];
            cr_assert(s >= 0 && s < STARTS, "start %d outside [0, %d]", s, STARTS - 1);
            for (int t = 0; t < T; t++) cr_assert(x[b * T + t] == s + t && y[b * T + t] == s + t + 1, "row at %d", s);
            count[s]++;
        }
    }
    const double e = (double)B * BATCHES / STARTS;
    double chi2 = 0;
    for (int s = 0; s < STARTS; s++) {
        cr_assert_gt(count[s], 0, "start %d never drawn", s);
        chi2 += (count[s] - e) * (count[s] - e) / e;
    }
    cr_assert_lt(chi2, 97.65, "chi2 %.1f over %d starts", chi2, STARTS);
    // Validation: 5 tokens (45..49), T = 4: the only start is 45.
    for (uint64_t i = 0; i < 10; i++) {
        cr_assert_eq(data_batch(&d, 1, seed, i, B, T, x, y), DATA_OK);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) cr_assert(x[b * T + t] == 45 + t && y[b * T + t] == 46 + t);
    }
    data_free(&d);
}

Test(data, batch_errors) {
    data_set d;
    load_iota(&d, 50);  // 45 + 5
    int32_t x[64], y[64];
    cr_assert_eq(data_batch(&d, 1, 1, 0, 2, 5, x, y), DATA_EINVAL, "5 validation tokens cannot hold T + 1 = 6");
    cr_assert_eq(data_batch(&d, 0, 1, 0, 2, 5, x, y), DATA_OK);
    cr_assert_eq(data_batch(&d, 0, 1, 0, 1, 44, x, y), DATA_OK, "T + 1 = 45 fits the 45 training tokens");
    for (int t = 0; t < 44; t++) cr_assert(x[t] == t && y[t] == t + 1);
    cr_assert_eq(data_batch(&d, 0, 1, 0, 1, 45, x, y), DATA_EINVAL);
    cr_assert_eq(data_batch(&d, 0, 1, 0, 0, 4, x, y), DATA_EINVAL);
    cr_assert_eq(data_batch(&d, 0, 1, 0, 2, 0, x, y), DATA_EINVAL);
    cr_assert_eq(data_batch(&d, 2, 1, 0, 2, 4, x, y), DATA_EINVAL);
    cr_assert_eq(data_batch(&d, 0, 1, 0, 2, 4, NULL, y), DATA_EINVAL);
    data_free(&d);
    cr_assert_eq(data_batch(&d, 0, 1, 0, 2, 4, x, y), DATA_EINVAL, "an empty data set");
}

// The real corpus when it is there: 65 characters, nanoGPT's split, an exact round trip.
Test(data, tinyshakespeare) {
    const char *p = "/work/shared/data/tinyshakespeare.txt";
    if (access(p, R_OK) != 0) cr_skip_test("%s not present", p);
    data_set d;
    char msg[MSG_LEN] = "";
    cr_assert_eq(data_load_text(&d, p, DATA_VOCAB_CHAR, NULL, msg, sizeof msg), DATA_OK, "%s", msg);
    cr_assert_eq(d.vocab.size, 65);
    cr_assert(d.n_tokens == 1115394 && d.n_train == 1003854, "%zu tokens, %zu train", d.n_tokens, d.n_train);
    FILE *f = fopen(p, "rb");
    cr_assert_not_null(f);
    char *text = malloc(d.n_tokens + 1), *back = malloc(4 * d.n_tokens + 1);
    cr_assert_eq(fread(text, 1, d.n_tokens + 1, f), d.n_tokens);  // ASCII: one byte a character
    fclose(f);
    cr_assert(decode_all(&d.vocab, d.tokens, d.n_tokens, back) == d.n_tokens && !memcmp(back, text, d.n_tokens));
    free(text), free(back);
    int32_t x[4 * 64], y[4 * 64];
    cr_assert_eq(data_batch(&d, 1, 1337, 0, 4, 64, x, y), DATA_OK);
    for (int b = 0; b < 4; b++) cr_assert_geq(check_row(&d, 1, x + b * 64, y + b * 64, 64, p), d.n_train);
    data_free(&d);
}
