// gen_seeds.c: writes the seed corpora of the fuzz harnesses (make fuzz-seeds): small valid
// inputs of each reader, built with the library's own writers where it has them (checkpoints,
// .npy files, policies, the autocast state) so that the fuzzer starts from what fplab writes.
// Usage: gen_seeds DIR   (writes DIR/<harness>/<name>; the directories must exist or are made)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autocast/autocast.h"
#include "cli/npy.h"
#include "trainer/checkpoint.h"

static const char *root;

static void die(const char *what, const char *msg) {
    fprintf(stderr, "gen_seeds: %s: %s\n", what, msg);
    exit(1);
}

static const char *path_of(const char *harness, const char *name) {
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", root, harness);
    if (mkdir(p, 0777) != 0 && errno != EEXIST) die(p, strerror(errno));
    snprintf(p, sizeof p, "%s/%s/%s", root, harness, name);
    return p;
}

static void put(const char *harness, const char *name, const void *data, size_t n) {
    const char *p = path_of(harness, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) die(p, "cannot write");
}
static void put_str(const char *harness, const char *name, const char *text) { put(harness, name, text, strlen(text)); }

// --- checkpoints: a model of 4 tokens, width 4, one layer (124 parameters when tied)

static llama_config small_config(bool tied) {
    return (llama_config){.dim = 4, .n_layers = 1, .n_heads = 2, .n_kv_heads = 1, .hidden_dim = 8,
                          .vocab_size = 4, .seq_len = 4, .rope_theta = 10000.0f, .norm_eps = 1e-5f, .tied = tied};
}

// A checkpoint with the model's sections and, when policy is non-NULL, what a resumed run reads
// (moments, state, options, the policy text with a history of 4, its autocast state after a
// few casts).
static void checkpoint_seed(const char *name, bool tied, data_vocab_kind kind, const char *policy) {
    llama_config c = small_config(tied);
    data_vocab v = {kind, kind == DATA_VOCAB_BYTE ? 256 : 4, NULL};
    uint32_t cps[4] = {'\n', 'a', 'b', 0x00e9};
    if (kind == DATA_VOCAB_CHAR) v.cp = cps;
    c.vocab_size = v.size;
    llama_model m;
    char msg[512];
    if (llama_init(&m, &c, LLAMA_RECOMPUTE_NONE, msg, sizeof msg) != LLAMA_OK) die(name, msg);
    llama_init_weights(&m, 1);
    unsigned char cfg[CKPT_CONFIG_BYTES], voc[8 + 16];
    ckpt_config_pack(cfg, &c);
    const size_t vb = ckpt_vocab_pack(voc, &v), pb = m.n_params * sizeof(float);
    ckpt_section s[10] = {{"config", cfg, sizeof cfg}, {"params", m.params, pb}, {"vocab", voc, vb}};
    int n = 3;
    float *mom = calloc(m.n_params, sizeof *mom);
    void *acs = NULL;
    char *ptext = NULL;
    ac_ctx ac;
    const struct {
        int64_t step, applied, drawn;
        uint64_t seed;
        float val;
        int32_t pad;
    } st = {2, 2, 2, 1, 1.5f, 0};
    static const char opts[] = "model tiny\nsteps 4\nseed 1\naccum 1\nbatch 2\n";
    if (policy) {
        ac_policy p;
        if (ac_policy_load(&p, policy, msg, sizeof msg) != AC_OK) die(policy, msg);
        p.amax_history = 4;
        const size_t tl = ac_policy_text(&p, NULL, 0);
        ptext = malloc(tl + 1);
        ac_policy_text(&p, ptext, tl + 1);
        if (ac_init(&ac, &p, c.n_layers, 1, AC_TEL_SITES, 64, msg, sizeof msg) != AC_OK) die(policy, msg);
        float x[64];
        for (int i = 0; i < 64; i++) x[i] = (float)(i - 30) * 0.25f;
        ac_begin_step(&ac, 0);
        for (int k = 0; k < 5; k++) ac_cast(&ac, &(ac_cast_req){.site = AC_QKV_IN, .layer = 0, .count = true}, x, 8, 8);
        ac_cast(&ac, &(ac_cast_req){.site = AC_O_GRAD, .layer = -1, .count = true}, x, 8, 8);
        ac_scaler_update(&ac.scaler, &p.scaler, false);
        acs = malloc(ac_state_bytes(&ac));
        ac_state_save(&ac, acs);
        s[n++] = (ckpt_section){"adam_m", mom, pb};
        s[n++] = (ckpt_section){"adam_v", mom, pb};
        s[n++] = (ckpt_section){"state", &st, sizeof st};
        s[n++] = (ckpt_section){"options", opts, sizeof opts - 1};
        s[n++] = (ckpt_section){"policy", ptext, strlen(ptext)};
        s[n++] = (ckpt_section){"acstate", acs, ac_state_bytes(&ac)};
    }
    if (ckpt_write(path_of("fuzz_checkpoint", name), s, n, msg, sizeof msg) != CKPT_OK) die(name, msg);
    if (policy) ac_free(&ac);
    free(mom), free(acs), free(ptext);
    llama_free(&m);
}

// --- .npy

static void npy_seeds(void) {
    const float x[6] = {0.5f, -1, 3e38f, 1e-45f, 0, 2};
    char msg[256];
    const size_t s1[1] = {6}, s2[2] = {2, 3}, s0[1] = {0};
    if (npy_write_f32(path_of("fuzz_npy", "f4_1d.npy"), x, 1, s1, msg, sizeof msg) ||
        npy_write_f32(path_of("fuzz_npy", "f4_2d.npy"), x, 2, s2, msg, sizeof msg) ||
        npy_write_f32(path_of("fuzz_npy", "empty.npy"), x, 1, s0, msg, sizeof msg))
        die("npy", msg);
    // version 2.0, float64, keys in another order
    const char dict[] = "{'shape': (2,), 'fortran_order': False, 'descr': '<f8', }\n";
    unsigned char b[128];
    memcpy(b, "\x93NUMPY\x02\x00", 8);
    const uint32_t hl = sizeof dict - 1;
    memcpy(b + 8, &hl, 4);
    memcpy(b + 12, dict, hl);
    const double y[2] = {1.25, -0.0};
    memcpy(b + 12 + hl, y, sizeof y);
    put("fuzz_npy", "f8_v2.npy", b, 12 + hl + sizeof y);
    // unsigned codes, as `fplab quantize --codes/--scales` writes them (matmul-check reads them)
    const uint8_t c8[4] = {0x38, 0x7f, 0x80, 0};
    const uint16_t c16[4] = {0x3f80, 0x7fc0, 0x8000, 1};
    if (npy_write(path_of("fuzz_npy", "u1_2d.npy"), "|u1", 1, c8, 2, (const size_t[2]){2, 2}, msg, sizeof msg) ||
        npy_write(path_of("fuzz_npy", "u2_1d.npy"), "<u2", 2, c16, 1, (const size_t[1]){4}, msg, sizeof msg))
        die("npy", msg);
}

// --- llm.c shards: header of 256 int32, then tokens

static void shard_seed(const char *name, int magic, int version, int elt, int count) {
    unsigned char b[1024 + 4 * 16] = {0};
    const int32_t h[3] = {magic, version, count};
    memcpy(b, h, sizeof h);
    for (int i = 0; i < count; i++) {
        const uint32_t t = (uint32_t)(i * 7 % 11);
        memcpy(b + 1024 + (size_t)i * (size_t)elt, &t, (size_t)elt);
    }
    put("fuzz_data_shard", name, b, 1024 + (size_t)count * (size_t)elt);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gen_seeds DIR\n");
        return 2;
    }
    root = argv[1];
    if (mkdir(root, 0777) != 0 && errno != EEXIST) die(root, strerror(errno));

    checkpoint_seed("model_char.ckpt", true, DATA_VOCAB_CHAR, NULL);
    checkpoint_seed("model_tokens_untied.ckpt", false, DATA_VOCAB_TOKENS, NULL);
    checkpoint_seed("resume_fp8_delayed.ckpt", true, DATA_VOCAB_CHAR, "fp8-delayed");
    checkpoint_seed("resume_fp16_amp.ckpt", true, DATA_VOCAB_CHAR, "fp16-amp");
    checkpoint_seed("resume_pure_bf16.ckpt", false, DATA_VOCAB_TOKENS, "pure-bf16-sr");

    npy_seeds();

    put_str("fuzz_data_text", "ascii.txt", "First Citizen:\nBefore we proceed any further, hear me speak.\n");
    put_str("fuzz_data_text", "utf8.txt", "na\xc3\xafve caf\xc3\xa9 \xe2\x82\xac 10 \xf0\x9f\x98\x80 ok\n");
    put_str("fuzz_data_text", "invalid_utf8.txt", "abc\xc3(def\xed\xa0\x80ghij\n");
    shard_seed("u16.bin", 20240520, 1, 2, 12);
    shard_seed("u32.bin", 20240801, 7, 4, 12);

    const char *names = ac_preset_names();
    for (const char *p = names; *p;) {
        const char *e = strchr(p, ',');
        char name[64], file[80];
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        char text[4096];
        const size_t tl = ac_preset_text(name, text, sizeof text);
        if (!tl || tl >= sizeof text) die(name, "no preset text");
        snprintf(file, sizeof file, "%s.policy", name);
        put_str("fuzz_policy", file, text);
        if (!e) break;
        p = e + 1;
        while (*p == ' ') p++;
    }
    put_str("fuzz_policy", "custom.policy",
            "name custom\nsite *.in e4m3 tile:1x32:e8m0 sr saturate\nsite attn.* fp32\nsite *.grad e5m2 delayed\n"
            "loss_scale dynamic init=1024 growth=2 backoff=0.5 interval=10 min=1\nupdate fp32\n"
            "accumulator fp32\namax_history 16\namax_margin 1\nhadamard 16\n");

    put_str("fuzz_runlog", "grid.jsonl",
            "{\"event\":\"start\",\"policy\":\"fp16-amp\",\"seed\":1,\"model\":\"tiny\",\"steps\":4,"
            "\"tokens_per_step\":96,\"resumed_from\":0}\n"
            "{\"step\":1,\"loss\":2.94,\"lr\":0.001,\"grad_norm\":0.5,\"tokens_per_s\":1000.0,\"elapsed_s\":0.1,"
            "\"loss_scale\":65536,\"skipped\":0,\"sites\":{\"attn.qkv.in\":{\"n\":6144,\"overflow\":0,"
            "\"underflow\":0.01,\"subnormal\":0.002,\"nan\":0,\"amax\":100,\"scale\":1},\"L0.attn.qkv.in\":{\"n\":3072,"
            "\"overflow\":0,\"underflow\":0,\"subnormal\":0,\"nan\":0,\"amax\":100,\"scale\":1}},"
            "\"update\":{\"swamped\":0.2,\"changed\":0.9},\"grad_noise\":{\"exact_norm\":1.3,\"noise_norm\":0.27}}\n"
            "{\"step\":2,\"loss\":\"nan\",\"lr\":0.001,\"grad_norm\":\"inf\",\"loss_scale\":32768,\"skipped\":1,"
            "\"grad_noise\":{\"exact_norm\":1.2,\"noise_norm\":\"inf\"}}\n"
            "{\"event\":\"start\",\"policy\":\"fp16-amp\",\"seed\":1,\"steps\":4,\"resumed_from\":1}\n"
            "{\"step\":2,\"loss\":2.8,\"val_loss\":2.7}\n{\"step\":3,\"lo");
    put_str("fuzz_runlog", "glued.jsonl",
            "{\"event\":\"start\",\"policy\":\"fp32\",\"seed\":1,\"steps\":5,\"resumed_from\":0}\n"
            "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":2}\n{\"step\":3,\"lo"
            "{\"event\":\"start\",\"policy\":\"fp32\",\"seed\":1,\"steps\":5,\"resumed_from\":1}\n"
            "{\"step\":2,\"loss\":NaN,\"grad_norm\":-nan}\r\n\n{\"event\":\"eval\"}\n{\"step\":3,\"loss\":1e300}\n");

    put_str("fuzz_json", "object.json",
            "{\"a\":1.5e3,\"b\":[1,2,{\"c\":null}],\"d\":\"x\\\"y\\u00e9\\ud83d\\ude00\",\"e\":true,\"f\":false}");
    put_str("fuzz_json", "string.json", "\"tab\\there \\\\ \\/ \\n\"");
    put_str("fuzz_json", "number.json", "-0.000123456789012345678e-300");
    put_str("fuzz_json", "u64.json", "18446744073709551615");
    put_str("fuzz_json", "nan.json", "\"-inf\"");
    return 0;
}
