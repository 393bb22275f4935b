// test_checkpoint.c: the checkpoint container and the model loaders of trainer/checkpoint.c on
// files built here whose checksums all match but whose contents lie: every field read from a
// file is checked against the rest of the file and a stated limit before it sizes anything
// (model config fields and their bounds, the params section against the config, the vocab
// section, the container's header, tags and lengths). Each refusal names the file, the section
// and what was expected. Files live under a mkdtemp directory.
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/checkpoint.h"

static char dir[64];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/fplab_ckpt_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
TestSuite(checkpoint, .init = setup, .fini = teardown);

static const char *path_of(const char *name) {
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

// The tiny config of the tests: 10 characters 'a'..'j'.
static llama_config tiny(void) {
    return (llama_config){.dim = 16, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .hidden_dim = 64,
                          .vocab_size = 10, .seq_len = 8, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                          .tied = true};
}

// A model-only checkpoint: config (raw fields, so that a test can lie in any of them), params of
// n_params floats, vocab (raw bytes).
static const char *write_model(const char *name, const int32_t cfg_i[8], const float cfg_f[2], size_t n_params,
                               const void *vocab, size_t vocab_bytes) {
    unsigned char cfg[CKPT_CONFIG_BYTES];
    memcpy(cfg, cfg_i, 32), memcpy(cfg + 32, cfg_f, 8);
    float *params = calloc(n_params ? n_params : 1, sizeof *params);
    cr_assert(params);
    for (size_t i = 0; i < n_params; i++) params[i] = 0.01f * (float)(i % 7);
    const ckpt_section s[] = {{"config", cfg, sizeof cfg},
                              {"params", params, n_params * sizeof(float)},
                              {"vocab", vocab, vocab_bytes}};
    char msg[512];
    const char *p = path_of(name);
    cr_assert_eq(ckpt_write(p, s, 3, msg, sizeof msg), CKPT_OK, "%s", msg);
    free(params);
    return p;
}

static void config_fields(const llama_config *c, int32_t i[8], float f[2]) {
    const int32_t v[8] = {c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->hidden_dim,
                          c->vocab_size, c->seq_len, c->tied};
    memcpy(i, v, sizeof v);
    f[0] = c->rope_theta, f[1] = c->norm_eps;
}

// The vocab section of 'a'..'a'+n-1 (char).
static size_t char_vocab(unsigned char *out, int n) {
    const int32_t h[2] = {DATA_VOCAB_CHAR, n};
    memcpy(out, h, 8);
    for (int k = 0; k < n; k++) {
        const uint32_t cp = (uint32_t)('a' + k);
        memcpy(out + 8 + 4 * k, &cp, 4);
    }
    return 8 + 4 * (size_t)n;
}

static size_t n_params_of(const llama_config *c) {
    size_t s[LP_COUNT];
    return llama_param_sizes(c, s);
}

// Loads path; expects CKPT_EFORMAT with a message naming the file and holding `expect`.
static void assert_refused(const char *path, const char *expect, const char *what) {
    llama_model m;
    data_vocab v;
    char msg[512] = "";
    const int st = ckpt_load_model(path, &m, &v, msg, sizeof msg);
    if (st == CKPT_OK) llama_free(&m), data_vocab_free(&v);
    cr_assert_eq(st, CKPT_EFORMAT, "%s: accepted (status %d, '%s')", what, st, msg);
    cr_assert(strstr(msg, path), "%s: message '%s' does not name the file", what, msg);
    cr_assert(strstr(msg, expect), "%s: message '%s' lacks '%s'", what, msg, expect);
}

Test(checkpoint, a_valid_model_loads) {
    const llama_config c = tiny();
    int32_t ci[8];
    float cf[2];
    config_fields(&c, ci, cf);
    unsigned char voc[8 + 4 * 10];
    const char *p = write_model("ok.bin", ci, cf, n_params_of(&c), voc, char_vocab(voc, 10));
    llama_model m;
    data_vocab v;
    char msg[512];
    cr_assert_eq(ckpt_load_model(p, &m, &v, msg, sizeof msg), CKPT_OK, "%s", msg);
    cr_assert_eq(m.cfg.dim, 16);
    cr_assert_eq(m.cfg.seq_len, 8);
    cr_assert_eq(m.n_params, n_params_of(&c));
    cr_assert_eq(m.params[3], 0.03f);
    cr_assert_eq(v.kind, DATA_VOCAB_CHAR);
    cr_assert_eq(v.size, 10);
    cr_assert_eq(v.cp[9], (uint32_t)'j');
    llama_free(&m);
    data_vocab_free(&v);
}

// Every config field: positive, divisible where the model needs it, and under its stated
// limit. The params section has the size of the tiny config, so each refusal comes from the
// field itself (a seq_len or an odd head size does not change the parameter count).
Test(checkpoint, config_fields_are_validated_with_upper_bounds) {
    static const struct {
        int field;  // index into the 8 int32 fields; 8, 9: rope_theta, norm_eps
        double value;
        const char *expect;
    } cases[] = {
        {0, 0, "dim"},
        {0, -16, "dim"},
        {1, 0, "layers"},
        {1, -3, "layers"},
        {2, 3, "n_heads"},        // 16 % 3
        {2, -4, "heads"},
        {3, 3, "n_kv_heads"},     // 4 % 3
        {4, 0, "hidden"},
        {5, 0, "vocab"},
        {5, -10, "vocab"},
        {5, LLAMA_MAX_VOCAB + 1.0, "vocab"},
        {6, 0, "seq_len"},
        {6, -1, "seq_len"},
        {6, LLAMA_MAX_SEQ_LEN + 1.0, "seq_len"},
        {6, 1 << 30, "seq_len"},
        {6, INT32_MAX, "seq_len"},
        {1, LLAMA_MAX_LAYERS + 1.0, "layers"},
        {4, LLAMA_MAX_HIDDEN + 1.0, "hidden"},
        {7, 7, "tied"},
        {7, -1, "tied"},
        {8, NAN, "rope_theta"},
        {8, -1, "rope_theta"},
        {8, INFINITY, "rope_theta"},
        {9, -1e-5, "norm_eps"},
        {9, NAN, "norm_eps"},
    };
    const llama_config c = tiny();
    unsigned char voc[8 + 4 * 10];
    const size_t vb = char_vocab(voc, 10);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int32_t ci[8];
        float cf[2];
        config_fields(&c, ci, cf);
        if (cases[k].field < 8) ci[cases[k].field] = (int32_t)cases[k].value;
        else cf[cases[k].field - 8] = (float)cases[k].value;
        char what[64];
        snprintf(what, sizeof what, "field %d = %g", cases[k].field, cases[k].value);
        assert_refused(write_model("cfg.bin", ci, cf, n_params_of(&c), voc, vb), cases[k].expect, what);
    }
    // an odd head size (16 / 16 = 1) breaks RoPE's pairs
    int32_t ci[8];
    float cf[2];
    config_fields(&c, ci, cf);
    ci[2] = 16, ci[3] = 16;
    assert_refused(write_model("odd.bin", ci, cf, n_params_of(&c), voc, vb), "head size", "head size 1");
}

// A dim larger than the limit is refused by name, before the params section is even looked at.
Test(checkpoint, dim_over_the_limit_is_refused) {
    const llama_config c = tiny();
    int32_t ci[8];
    float cf[2];
    config_fields(&c, ci, cf);
    ci[0] = LLAMA_MAX_DIM * 2, ci[2] = 4, ci[3] = 4;
    unsigned char voc[8 + 4 * 10];
    assert_refused(write_model("dim.bin", ci, cf, 16, voc, char_vocab(voc, 10)), "dim", "dim 2x the limit");
}

// The params section must hold exactly the config's parameter count, checked before the model
// is allocated: a small file claiming a large model names both sizes (instead of allocating
// the claimed model first and failing for memory or on the comparison afterwards).
Test(checkpoint, params_section_is_checked_against_the_config_before_allocation) {
    llama_config c = tiny();
    c.dim = LLAMA_MAX_DIM, c.n_heads = 128, c.n_kv_heads = 128, c.hidden_dim = LLAMA_MAX_HIDDEN,
    c.vocab_size = 1 << 16, c.n_layers = 64;  // within every bound: about 1.1e12 bytes of parameters
    int32_t ci[8];
    float cf[2];
    config_fields(&c, ci, cf);
    const int32_t h[2] = {DATA_VOCAB_TOKENS, 1 << 16};
    char expect[96];
    snprintf(expect, sizeof expect, "needs %zu", n_params_of(&c) * sizeof(float));
    assert_refused(write_model("big.bin", ci, cf, 100, h, sizeof h), expect, "a large config in a small file");
    // one float short and one too many
    c = tiny();
    config_fields(&c, ci, cf);
    unsigned char voc[8 + 4 * 10];
    const size_t vb = char_vocab(voc, 10);
    assert_refused(write_model("short.bin", ci, cf, n_params_of(&c) - 1, voc, vb), "'params'", "one short");
    assert_refused(write_model("long.bin", ci, cf, n_params_of(&c) + 1, voc, vb), "'params'", "one over");
}

// The vocabulary: a known kind, a size equal to the config's, 256 for bytes, valid code points
// in strictly ascending order for characters (the encoder's binary search relies on it), and a
// length that matches.
Test(checkpoint, vocab_section_is_validated) {
    const llama_config c = tiny();
    int32_t ci[8];
    float cf[2];
    config_fields(&c, ci, cf);
    const size_t np = n_params_of(&c);
    unsigned char voc[8 + 4 * 300];
    struct {
        int at;           // -1: the header's kind; -2: its size; else the index of a code point
        uint32_t value;
        const char *expect;
    } cases[] = {
        {-1, 7, "kind"},
        {-1, (uint32_t)-1, "kind"},
        {-2, 0, "size"},
        {-2, (uint32_t)-5, "size"},
        {-2, 11, "size"},           // the length no longer matches either
        {3, 'a', "ascending"},      // a duplicate
        {4, 'b', "ascending"},      // out of order
        {9, 0xD800, "U+D800"},      // a surrogate
        {9, 0x110000, "U+110000"},  // beyond Unicode
        {9, 0xFFFFFFFFu, "U+FFFFFFFF"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const size_t vb = char_vocab(voc, 10);
        if (cases[k].at >= 0) memcpy(voc + 8 + 4 * cases[k].at, &cases[k].value, 4);
        else memcpy(voc + 4 * (size_t)(cases[k].at == -1 ? 0 : 1), &cases[k].value, 4);
        char what[64];
        snprintf(what, sizeof what, "vocab case %zu", k);
        assert_refused(write_model("voc.bin", ci, cf, np, voc, vb), cases[k].expect, what);
    }
    // a length that disagrees with the size, and a header cut short
    size_t vb = char_vocab(voc, 10);
    assert_refused(write_model("voc.bin", ci, cf, np, voc, vb - 4), "bytes", "one code point short");
    assert_refused(write_model("voc.bin", ci, cf, np, voc, 6), "bytes", "a 6-byte section");
    // bytes: size 256 and no code points
    const int32_t byte_ok[2] = {DATA_VOCAB_BYTE, 256}, byte_bad[2] = {DATA_VOCAB_BYTE, 255};
    int32_t cb[8];
    memcpy(cb, ci, sizeof cb);
    cb[5] = 256;
    llama_config c256 = c;
    c256.vocab_size = 256;
    const char *p = write_model("byte.bin", cb, cf, n_params_of(&c256), byte_ok, sizeof byte_ok);
    llama_model m;
    data_vocab v;
    char msg[512];
    cr_assert_eq(ckpt_load_model(p, &m, &v, msg, sizeof msg), CKPT_OK, "%s", msg);
    llama_free(&m), data_vocab_free(&v);
    cb[5] = 255;
    c256.vocab_size = 255;
    assert_refused(write_model("byte.bin", cb, cf, n_params_of(&c256), byte_bad, sizeof byte_bad), "256",
                   "a byte vocabulary of 255");
    // a size that disagrees with the config's vocab_size
    vb = char_vocab(voc, 9);
    assert_refused(write_model("voc.bin", ci, cf, np, voc, vb), "vocab_size", "9 characters for 10 tokens");
    // the same through ckpt_vocab_unpack (no message)
    vb = char_vocab(voc, 10);
    memcpy(voc + 8 + 4 * 5, &(uint32_t){'a'}, 4);
    const ckpt_section s = {"vocab", voc, vb};
    cr_assert_eq(ckpt_vocab_unpack(&v, &s), CKPT_EFORMAT);
    cr_assert_null(v.cp);
}

// --- the container

static void write_bytes(const char *p, const void *b, size_t n) {
    FILE *f = fopen(p, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

// Appends a section (tag of 8 bytes given raw, its stated length, a correct checksum of the
// `have` bytes of payload that follow).
static size_t put_section(unsigned char *b, size_t at, const char tag[8], uint64_t len, const void *payload,
                          size_t have) {
    memcpy(b + at, tag, 8);
    const uint64_t meta[2] = {len, fnv(payload, have)};
    memcpy(b + at + 8, meta, 16);
    memcpy(b + at + 24, payload, have);
    return at + 24 + have;
}

static void assert_read_refused(const unsigned char *b, size_t n, const char *expect, const char *what) {
    const char *p = path_of("raw.bin");
    write_bytes(p, b, n);
    ckpt_file f;
    char msg[512] = "";
    const int st = ckpt_read(&f, p, msg, sizeof msg);
    if (st == CKPT_OK) ckpt_file_free(&f);
    cr_assert_eq(st, CKPT_EFORMAT, "%s: accepted (%d)", what, st);
    cr_assert(strstr(msg, p) && strstr(msg, expect), "%s: message '%s' lacks '%s'", what, msg, expect);
    cr_assert_eq(f.n, 0);
    cr_assert_null(f.s);
}

Test(checkpoint, container_header_tags_and_lengths_are_validated) {
    unsigned char b[512];
    const char payload[] = "0123456789";
    uint32_t head[4] = {CKPT_MAGIC, CKPT_VERSION, 2, 0};
    memcpy(b, head, 16);
    size_t n = put_section(b, 16, "one\0\0\0\0\0", 10, payload, 10);
    n = put_section(b, n, "two\0\0\0\0\0", 10, payload, 10);
    {  // the good file reads
        const char *p = path_of("raw.bin");
        write_bytes(p, b, n);
        ckpt_file f;
        char msg[512];
        cr_assert_eq(ckpt_read(&f, p, msg, sizeof msg), CKPT_OK, "%s", msg);
        cr_assert_eq(f.n, 2);
        cr_assert(ckpt_find(&f, "two") && ckpt_find(&f, "two")->nbytes == 10);
        ckpt_file_free(&f);
    }
    // a duplicate tag: which one a reader would take is not defined
    unsigned char d[512];
    memcpy(d, b, n);
    memcpy(d + 16 + 34, "one\0\0\0\0\0", 8);
    assert_read_refused(d, n, "'one' appears twice", "a duplicate tag");
    // tags: empty, not NUL-padded, unprintable
    memcpy(d, b, n);
    memcpy(d + 50, "\0two\0\0\0\0", 8);
    assert_read_refused(d, n, "tag", "an empty tag");
    memcpy(d, b, n);
    memcpy(d + 50, "tw\0o\0\0\0\0", 8);
    assert_read_refused(d, n, "tag", "a tag with a byte after its NUL");
    memcpy(d, b, n);
    memcpy(d + 50, "t\nwo\0\0\0\0", 8);
    assert_read_refused(d, n, "tag", "a tag with a newline");
    // the reserved header word
    memcpy(d, b, n);
    d[12] = 1;
    assert_read_refused(d, n, "reserved", "a non-zero reserved word");
    // more sections than the file can hold (each takes at least 24 bytes) or than the limit
    memcpy(d, b, n);
    head[2] = 3;
    memcpy(d, head, 16);
    assert_read_refused(d, n, "3 sections", "3 sections in a file with 2");
    head[2] = 1000000;
    memcpy(d, head, 16);
    assert_read_refused(d, n, "1000000 sections", "a million sections");
    head[2] = 2;
    // a section longer than what is left of the file (by one byte, and by 2^63)
    memcpy(d, b, n);
    const uint64_t one_more = 11, huge = (uint64_t)1 << 63;
    memcpy(d + 50 + 8, &one_more, 8);
    assert_read_refused(d, n, "'two' of 11 bytes", "a section one byte too long");
    memcpy(d + 50 + 8, &huge, 8);
    assert_read_refused(d, n, "'two' of 9223372036854775808 bytes", "a section of 2^63 bytes");
    // bytes after the last section
    memcpy(d, b, n);
    d[n] = 0;
    assert_read_refused(d, n + 1, "after the last section", "a trailing byte");
    // a file shorter than its header
    assert_read_refused(b, 10, "magic", "10 bytes");
}

// ckpt_read_stream reads from any seekable stream (what the fuzz harness uses), with the same
// checks and the given name in messages.
Test(checkpoint, reads_from_a_memory_stream) {
    unsigned char b[128];
    const uint32_t head[4] = {CKPT_MAGIC, CKPT_VERSION, 1, 0};
    memcpy(b, head, 16);
    const size_t n = put_section(b, 16, "x\0\0\0\0\0\0\0", 3, "abc", 3);
    FILE *fp = fmemopen(b, n, "rb");
    cr_assert(fp);
    ckpt_file f;
    char msg[256];
    cr_assert_eq(ckpt_read_stream(&f, fp, "mem", msg, sizeof msg), CKPT_OK, "%s", msg);
    cr_assert_eq(f.n, 1);
    cr_assert_eq(memcmp(ckpt_find(&f, "x")->data, "abc", 3), 0);
    ckpt_file_free(&f);
    fclose(fp);
    b[40] ^= 1;  // the payload: checksum mismatch
    fp = fmemopen(b, n, "rb");
    cr_assert_eq(ckpt_read_stream(&f, fp, "mem", msg, sizeof msg), CKPT_EFORMAT);
    cr_assert(strstr(msg, "'mem'") && strstr(msg, "checksum"), "%s", msg);
    fclose(fp);
}
