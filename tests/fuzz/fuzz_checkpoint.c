// fuzz_checkpoint.c: libFuzzer harness for the checkpoint reader (trainer/checkpoint.c) and the
// loaders that interpret its sections: the container (ckpt_read_stream), the model (config,
// params, vocab: ckpt_load_model_from), and, as a resumed run does, the policy section
// (ac_policy_parse) and the autocast state (ac_state_load). What loads is then used: a forward
// of a few tokens through the model, and one counted cast at every delayed-scaling site of every
// layer followed by a loss-scaler update (where a lying amax count used to overflow the heap).
// The harness first rewrites the checksum of every section it can find in the input: the
// threat is a file whose checksums match but whose contents lie, and a fuzzer cannot forge
// FNV-1a by mutation (without this it never gets past the checksums).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autocast/autocast.h"
#include "tests/fuzz/fuzz_util.h"
#include "trainer/checkpoint.h"

// policy.c bounds amax_history below only; ac_init allocates AC_NSITES * (layers + 1) *
// amax_history floats for it (see docs/fuzzing.md). The harness skips longer histories so
// that the fuzzer explores the state checks rather than that allocation.
enum { FUZZ_MAX_HISTORY = 4096 };

static int run(const uint8_t *d, size_t n);

static void use_state(const llama_model *m, const ckpt_file *f) {
    const ckpt_section *ps = ckpt_find(f, "policy"), *as = ckpt_find(f, "acstate");
    if (!ps || !as) return;
    char *text = fuzz_cstr(ps->data, ps->nbytes);
    ac_policy pol;
    char msg[1024];
    if (ac_policy_parse(&pol, text, "checkpoint fuzz.ckpt", msg, sizeof msg) == AC_OK &&
        pol.amax_history <= FUZZ_MAX_HISTORY) {
        ac_ctx ac;
        enum { CAP = 64 };
        if (ac_init(&ac, &pol, m->cfg.n_layers, 1, AC_TEL_SITES, CAP, msg, sizeof msg) == AC_OK) {
            const int st = ac_state_check(&ac, as->data, as->nbytes, msg, sizeof msg);
            FUZZ_CHECK(st == ac_state_load(&ac, as->data, as->nbytes), "check and load disagree");
            if (st == AC_OK) {
                float x[CAP];
                for (int i = 0; i < CAP; i++) x[i] = (float)(i - 20) * 0.37f;
                ac_begin_step(&ac, 3);
                for (int s = 0; s < AC_NSITES; s++)
                    if (ac.pol.site[s].active && ac.pol.site[s].delayed)
                        for (int layer = -1; layer < m->cfg.n_layers; layer++)
                            ac_cast(&ac, &(ac_cast_req){.site = (ac_site)s, .layer = layer, .count = true}, x, 8, 8);
                ac_scaler_update(&ac.scaler, &ac.pol.scaler, false);
                ac_scaler_update(&ac.scaler, &ac.pol.scaler, true);
                FUZZ_CHECK(ac.scaler.scale > 0, "scale %g", ac.scaler.scale);
            } else {
                FUZZ_CHECK(msg[0], "a refusal without a message");
            }
            ac_free(&ac);
        }
    }
    free(text);
}

// Walks the container as ckpt_read does and writes each section's FNV-1a-64 into its header.
static void fix_checksums(uint8_t *b, size_t n) {
    if (n < 16) return;
    uint32_t count;
    memcpy(&count, b + 8, 4);
    size_t pos = 16;
    for (uint32_t i = 0; i < count && i < CKPT_MAX_SECTIONS && n - pos >= 24; i++) {
        uint64_t len;
        memcpy(&len, b + pos + 8, 8);
        if (len > n - pos - 24) return;
        uint64_t h = 0xcbf29ce484222325ULL;
        for (size_t k = 0; k < len; k++) h = (h ^ b[pos + 24 + k]) * 0x100000001b3ULL;
        memcpy(b + pos + 16, &h, 8);
        pos += 24 + (size_t)len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t n) {
    uint8_t *d = malloc(n ? n : 1);
    if (!d) abort();
    memcpy(d, in, n);
    fix_checksums(d, n);
    const int rc = run(d, n);
    free(d);
    return rc;
}

static int run(const uint8_t *d, size_t n) {
    FILE *fp = fuzz_stream(d, n);
    if (!fp) return 0;
    ckpt_file f;
    char msg[1024];
    const int st = ckpt_read_stream(&f, fp, "fuzz.ckpt", msg, sizeof msg);
    fclose(fp);
    if (st != CKPT_OK) {
        FUZZ_CHECK(f.n == 0 && f.s == NULL && msg[0], "an error left sections or no message");
        return 0;
    }
    uint64_t total = 16;
    for (int i = 0; i < f.n; i++) total += 24 + f.s[i].nbytes;
    FUZZ_CHECK(total == n, "sections of %llu bytes in a file of %zu", (unsigned long long)total, n);
    llama_model m;
    data_vocab v;
    if (ckpt_load_model_from(&f, "fuzz.ckpt", &m, &v, msg, sizeof msg) == CKPT_OK) {
        FUZZ_CHECK(m.n_params * sizeof(float) <= n, "%zu parameters from %zu bytes", m.n_params, n);
        FUZZ_CHECK(v.size == m.cfg.vocab_size, "vocab %d, config %d", v.size, m.cfg.vocab_size);
        int tok[4] = {0, 0, 0, 0}, tgt[4];
        const int T = m.cfg.seq_len < 4 ? m.cfg.seq_len : 4;
        for (int t = 0; t < T; t++) tok[t] = t % m.cfg.vocab_size, tgt[t] = (t + 1) % m.cfg.vocab_size;
        if (llama_reserve(&m, 1, T) == LLAMA_OK) llama_forward(&m, tok, tgt, 1, T);
        use_state(&m, &f);
        llama_free(&m);
        data_vocab_free(&v);
    } else {
        FUZZ_CHECK(msg[0] && m.params == NULL && v.cp == NULL, "a refusal left memory or no message");
    }
    ckpt_file_free(&f);
    return 0;
}
