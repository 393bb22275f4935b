// sample.c: token generation (see sample.h): greedy, temperature and nucleus sampling over the
// logits of llama_forward, the draws from the counter-based generator.
#include "trainer/sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/rng.h"

sample_opts sample_opts_default(void) {
    return (sample_opts){.n_tokens = 256, .temperature = 1.0, .top_p = 1.0, .seed = 1337};
}

int sample_opts_validate(const sample_opts *o, char *msg, size_t msg_len) {
    const char *why = NULL;
    char buf[160];
    if (o->n_tokens < 0) {
        snprintf(buf, sizeof buf, "tokens %ld: expected >= 0", o->n_tokens);
        why = buf;
    } else if (!(o->temperature >= 0) || !isfinite(o->temperature)) {
        snprintf(buf, sizeof buf, "temperature %g: expected a finite value >= 0 (0: greedy)",
                 o->temperature);
        why = buf;
    } else if (!(o->top_p > 0 && o->top_p <= 1)) {
        snprintf(buf, sizeof buf, "top-p %g: expected a value in (0, 1] (1: off)", o->top_p);
        why = buf;
    }
    if (!why) return SAMPLE_OK;
    if (msg && msg_len) snprintf(msg, msg_len, "%s", why);
    return SAMPLE_EINVAL;
}

// --- picking one token

// qsort_r comparator over token indices; ctx: the probabilities (V).
static int cmp_prob_desc(const void *a, const void *b, void *ctx) {
    const double *p = ctx;
    const int i = *(const int *)a, j = *(const int *)b;
    if (p[i] != p[j]) return p[i] > p[j] ? -1 : 1;
    return (i > j) - (i < j);  // ties: lower index first, so the order never depends on qsort
}

int sample_pick(const float *logits, int V, double temperature, double top_p, double u,
                double *work, int *idx) {
    int best = 0;
    for (int i = 0; i < V; i++) {
        if (!isfinite(logits[i])) return -1;
        if (logits[i] > logits[best]) best = i;
    }
    if (temperature == 0) return best;
    // Softmax in double: exp of (logit - max) / T <= 0, so nothing overflows and the largest
    // term is exactly 1; the sum is >= 1 and its rounding error (V ulps of double) is far below
    // the resolution of the 53-bit draw that reads it.
    const double mx = logits[best];
    double total = 0;
    for (int i = 0; i < V; i++) total += work[i] = exp(((double)logits[i] - mx) / temperature);
    if (top_p >= 1) {
        const double r = u * total;
        double cdf = 0;
        for (int i = 0; i < V; i++) {
            cdf += work[i];
            if (r < cdf) return i;
        }
        for (int i = V; i-- > 0;)  // r rounded up to the total: the last token with mass
            if (work[i] > 0) return i;
        return best;
    }
    for (int i = 0; i < V; i++) idx[i] = i;
    qsort_r(idx, (size_t)V, sizeof *idx, cmp_prob_desc, work);
    // The nucleus: the shortest prefix whose probability exceeds top_p (at least one token).
    const double cut = top_p * total;
    double kept = 0;
    int n = 0;
    while (n < V) {
        kept += work[idx[n++]];
        if (kept > cut) break;
    }
    const double r = u * kept;
    double cdf = 0;
    for (int k = 0; k < n; k++) {
        cdf += work[idx[k]];
        if (r < cdf) return idx[k];
    }
    return idx[n - 1];
}

// --- what is fed

int32_t sample_start_token(const data_vocab *v) {
    int32_t t = 0;
    if (v->kind != DATA_VOCAB_TOKENS && data_encode(v, "\n", &t, 1, NULL, 0) == 1) return t;
    return 0;
}

long sample_prompt_tokens(const data_vocab *v, const char *prompt, int32_t *tokens, size_t cap,
                          char *msg, size_t msg_len) {
    if (tokens && cap < 1) {
        if (msg) snprintf(msg, msg_len, "no room for the start token");
        return -1;
    }
    if (tokens) tokens[0] = sample_start_token(v);
    if (!prompt || !*prompt) return 1;
    if (v->kind == DATA_VOCAB_TOKENS) {
        if (msg)
            snprintf(msg, msg_len, "a token-id vocabulary (llm.c shards) cannot encode text; "
                     "leave the prompt out to start from token 0");
        return -1;
    }
    const long n = data_encode(v, prompt, tokens ? tokens + 1 : NULL, tokens ? cap - 1 : 0, msg, msg_len);
    return n < 0 ? -1 : n + 1;
}

// --- generation

int sample_generate(llama_model *m, const int32_t *prompt, int n_prompt, const sample_opts *o, sample_sink *sink,
                    char *msg, size_t msg_len) {
    sample_sink none = {0};
    if (!sink) sink = &none;
    sink->n_done = 0;
    int st = sample_opts_validate(o, msg, msg_len);
    if (st != SAMPLE_OK) return st;
    const int V = m->cfg.vocab_size, T = m->cfg.seq_len;
    if (n_prompt < 1) {
        if (msg) snprintf(msg, msg_len, "prompt: empty; expected at least one token to start from");
        return SAMPLE_EINVAL;
    }
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V) {
            if (msg)
                snprintf(msg, msg_len, "prompt: token %d at position %d is outside the model's vocabulary [0, %d)",
                         (int)prompt[i], i, V);
            return SAMPLE_EINVAL;
        }
    // The context window: the last T tokens of prompt + generated text, kept contiguous in a
    // buffer of 2T that slides back by T when full (one copy every T tokens).
    const size_t cap = 2 * (size_t)T;
    int *win = malloc(cap * sizeof *win);
    double *work = malloc((size_t)V * sizeof *work);
    int *idx = malloc((size_t)V * sizeof *idx);
    if (!win || !work || !idx) {
        free(win), free(work), free(idx);
        if (msg) snprintf(msg, msg_len, "out of memory for the sampler (vocabulary %d, context %d)", V, T);
        return SAMPLE_ENOMEM;
    }
    const int first = n_prompt > T ? n_prompt - T : 0;
    size_t len = (size_t)(n_prompt - first);
    for (size_t i = 0; i < len; i++) win[i] = prompt[first + (int)i];
    const fmt_rng_key key = fmt_rng_make_key(o->seed, SAMPLE_RNG_STREAM);
    st = SAMPLE_OK;
    for (long step = 0; step < o->n_tokens; step++) {
        const size_t t = len < (size_t)T ? len : (size_t)T;
        const int *ctx_tok = win + (len - t);
        if (isnan(llama_forward(m, ctx_tok, NULL, 1, (int)t)) || !llama_logits(m)) {
            if (msg) snprintf(msg, msg_len, "step %ld: the forward failed (out of memory?)", step);
            st = SAMPLE_EMODEL;
            break;
        }
        const float *logits = llama_logits(m) + (t - 1) * (size_t)V;
        const double u = o->temperature > 0 ? fmt_rng_uniform(key, (uint64_t)step) : 0;
        const int next = sample_pick(logits, V, o->temperature, o->top_p, u, work, idx);
        if (next < 0) {
            if (msg) snprintf(msg, msg_len, "step %ld: the logits are not finite (a diverged model?)", step);
            st = SAMPLE_EMODEL;
            break;
        }
        if (sink->out) sink->out[step] = next;
        sink->n_done = step + 1;
        if (sink->emit && sink->emit(sink->ctx, next) != 0) break;
        if (len == cap) {  // slide: keep the last T - 1 tokens, then append
            memmove(win, win + (cap - (size_t)T + 1), ((size_t)T - 1) * sizeof *win);
            len = (size_t)T - 1;
        }
        win[len++] = next;
    }
    free(win), free(work), free(idx);
    return st;
}
