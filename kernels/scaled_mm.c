// scaled_mm.c: the backend-independent part of the scaled-matmul interface (scaled_mm.h):
// default options, accumulator specs, validation, and the test for an emulated accumulator.
// Constraints: no MPFR here (every backend links it); no global state but the one process-level
// default of mm_opts.fixed_order (scaled_mm.h says why); messages name the input and what was
// expected.
//
// Decisions the backends share (keep mm_ref and mm_cpu in step with them):
// - An accumulator is emulated (rounded step by step, bit-exact across backends) unless it is
//   plain float32 with rne and no promotion: "fp32:rtz" or "fp32:promote=64" ask for the
//   step-by-step definition with a float32-precision accumulator.
// - K-blocks come from the operands that have scales: an operand with scales == NULL has no
//   blocks, and its block_k is ignored (a warning). When both have scales with block_k > 0 the
//   two block_k must be equal.
// - Emulated accumulators are signed formats with a zero, NaN and at least one fraction bit
//   (IEEE-like); stochastic rounding of the accumulator is not supported (mm_acc carries no
//   generator key, and bit-exact results are the point of the emulation).
#include "kernels/scaled_mm.h"

#include <stdatomic.h>

#include "kernels/engine.h"
#include "kernels/scaled_mm_internal.h"
#include "formats/names.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- helpers

static void mm__msg(char *msg, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void mm__msg(char *msg, size_t len, const char *fmt, ...) {
    if (!msg || !len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
}

// The float32 layout itself (whatever name it was given: fp32, float, e8m23).
static bool mm__is_f32_layout(const fmt_t *f) {
    return f->ebits == 8 && f->mbits == 23 && f->bias == 127 && f->is_signed && f->special == FMT_IEEE;
}

// What an engine spec must be, whatever the operands: :kN one of the engine's k, promote=N a
// multiple of that k, or of some k of the engine (which k the operands pick is checked with
// them: mm_acc_check_operands).
static int mm__engine_spec_check(const mm_acc *acc, char *msg, size_t len) {
    const int e = acc->engine - 1;
    bool has_k = false, divides = false;
    for (size_t i = 0; i < mm_engine_kind_count(); i++) {
        const mm_engine_kind *q = mm_engine_kind_get(i);
        if (q->engine != e) continue;
        has_k |= q->k == acc->engine_k;
        divides |= acc->promote_every % (acc->engine_k ? acc->engine_k : q->k) == 0;
    }
    char ks[96], name[96];
    mm_engine_ks(e, ks, sizeof ks);
    mm_acc_name(acc, name, sizeof name);
    if (acc->engine_k && !has_k) {
        mm__msg(msg, len, "accumulator %s: %s has no instruction with k = %d; the k of its instructions: %s "
                "(:kN picks one; none: the largest for the operands)", name, mm_engine_name((size_t)e),
                acc->engine_k, ks);
        return MM_EINVAL;
    }
    if (acc->promote_every && !divides) {
        if (acc->engine_k)
            mm__msg(msg, len, "accumulator %s: promote=%d is not a multiple of the instruction's k (%d)", name,
                    acc->promote_every, acc->engine_k);
        else
            mm__msg(msg, len, "accumulator %s: promote=%d is not a multiple of any instruction's k (%s: k = %s); "
                    "expected a multiple of the k the operands pick", name, acc->promote_every,
                    mm_engine_name((size_t)e), ks);
        return MM_EINVAL;
    }
    return MM_OK;
}

// What an accumulator must be, whatever the operands: shared by mm_acc_from_name and mm_validate.
static int mm__acc_check(const mm_acc *acc, char *msg, size_t len) {
    const fmt_t *f = &acc->fmt;
    if ((unsigned)acc->mode >= FMT_NMODES) {
        mm__msg(msg, len, "accumulator rounding mode %d is not one of rne rna rtz rup rdn rto", acc->mode);
        return MM_EINVAL;
    }
    if (acc->promote_every < 0) {
        mm__msg(msg, len, "accumulator promote_every is %d; expected >= 0 (0: promote only at "
                "K-block boundaries)", acc->promote_every);
        return MM_EINVAL;
    }
    if (acc->engine) {
        if (acc->engine < 0 || (size_t)acc->engine > mm_engine_count() || acc->engine_k < 0) {
            mm__msg(msg, len, "accumulator engine %d (k %d) is not one of the %zu engines", acc->engine - 1,
                    acc->engine_k, mm_engine_count());
            return MM_EINVAL;
        }
        return mm__engine_spec_check(acc, msg, len);
    }
    if (!mm_acc_is_emulated(acc)) return MM_OK;
    if (acc->mode == FMT_SR) {
        mm__msg(msg, len, "accumulator %s: stochastic rounding of the accumulator is not supported "
                "(use rne, rna, rtz, rup, rdn or rto)", f->name);
        return MM_EINVAL;
    }
    if (!fmt_embeds_in_f32(f)) {
        mm__msg(msg, len, "accumulator %s does not fit in float32 (at most 8 exponent bits and 23 "
                "fraction bits, float32's range)", f->name);
        return MM_EINVAL;
    }
    if (f->mbits + 1 > 24) {  // implied by embedding; kept as the header states it
        mm__msg(msg, len, "accumulator %s has %d bits of precision; at most 24", f->name, f->mbits + 1);
        return MM_EINVAL;
    }
    if (!f->is_signed || !f->has_zero || !f->has_nan || f->mbits < 1) {
        mm__msg(msg, len, "accumulator %s must be a signed format with zero, NaN and at least one "
                "fraction bit (IEEE-like, e.g. bf16, fp16, e8m13)", f->name);
        return MM_EINVAL;
    }
    return MM_OK;
}

// --- public

// Written by the program's setup before its products run, read by every mm_opts_default after
// (relaxed atomics: no ordering is needed beyond the value itself).
static _Atomic bool fixed_order_default;

void mm_fixed_order_set_default(bool on) { atomic_store_explicit(&fixed_order_default, on, memory_order_relaxed); }

bool mm_fixed_order_default(void) { return atomic_load_explicit(&fixed_order_default, memory_order_relaxed); }

void mm_opts_default(mm_opts *o) {
    memset(o, 0, sizeof *o);
    o->fixed_order = mm_fixed_order_default();
    o->alpha = 1.0f;
    o->beta = 0.0f;
    fmt_from_name(&o->acc.fmt, "fp32");  // a table row: cannot fail
    o->acc.mode = FMT_RNE;
    o->acc.promote_every = 0;
    o->out_fmt = o->acc.fmt;
    // out_round zeroed: rne, IEEE overflow, subnormals kept.
}

bool mm_acc_is_emulated(const mm_acc *acc) {
    return acc->engine || !mm__is_f32_layout(&acc->fmt) || acc->mode != FMT_RNE || acc->promote_every != 0;
}

char *mm_acc_name(const mm_acc *acc, char *out, size_t len) {
    size_t n;
    if (acc->engine) {
        n = (size_t)snprintf(out, len, "%s", mm_engine_name((size_t)acc->engine - 1));
        if (acc->engine_k && n < len) n += (size_t)snprintf(out + n, len - n, ":k%d", acc->engine_k);
        if (acc->engine_f16 && n < len) n += (size_t)snprintf(out + n, len - n, ":f16");
    } else {
        n = (size_t)snprintf(out, len, "%s", acc->fmt.name);
    }
    if (acc->promote_every && n < len) n += (size_t)snprintf(out + n, len - n, ":promote=%d", acc->promote_every);
    if (!acc->engine && acc->mode != FMT_RNE && n < len) snprintf(out + n, len - n, ":%s", fmt_mode_name(acc->mode));
    return out;
}

// An engine spec: ARCH:INSTR then :kN, :f16 or :promote=N. 1 when spec names an engine (out
// filled, or MM_EINVAL in *st with a message), 0 when it does not start with one.
static int mm__engine_spec(mm_acc *out, int *st, const char *spec, char *msg, size_t len) {
    const char *c1 = strchr(spec, ':');
    if (!c1) return 0;
    const char *c2 = strchr(c1 + 1, ':');
    char name[64];
    const size_t nl = c2 ? (size_t)(c2 - spec) : strlen(spec);
    if (nl >= sizeof name) return 0;
    memcpy(name, spec, nl), name[nl] = 0;
    const int e = mm_engine_index(name);
    if (e < 0) return 0;
    mm_acc acc;
    memset(&acc, 0, sizeof acc);
    fmt_from_name(&acc.fmt, "fp32");
    acc.mode = FMT_RNE;
    acc.engine = e + 1;
    *st = MM_EINVAL;
    for (const char *p = c2; p && *p;) {
        const char *t = p + 1, *end = strchr(t, ':');
        const size_t tl = end ? (size_t)(end - t) : strlen(t);
        char tok[40];
        if (tl >= sizeof tok) {
            mm__msg(msg, len, "accumulator spec '%s': option '%.20s...' is too long", spec, t);
            return 1;
        }
        memcpy(tok, t, tl), tok[tl] = 0;
        char *rest;
        errno = 0;
        if (tok[0] == 'k' && tok[1] >= '1' && tok[1] <= '9' && !acc.engine_k) {
            const long k = strtol(tok + 1, &rest, 10);
            if (*rest || k > 1024) goto bad;
            acc.engine_k = (int)k;
        } else if (!strcmp(tok, "f16") && !acc.engine_f16) {
            acc.engine_f16 = true;
        } else if (!strncmp(tok, "promote=", 8) && !acc.promote_every && tok[8]) {
            const long v = strtol(tok + 8, &rest, 10);
            if (*rest || errno || v < 1 || v > 1L << 30) goto bad;
            acc.promote_every = (int)v;
        } else {
            goto bad;
        }
        p = end;
        continue;
    bad:;
        // The nearest option (formats/names.h's rule): f16, or promote= with the value as given.
        char near[80] = "";
        const char *eq = strchr(tok, '=');
        fmt_suggest sg;
        if (eq && strncmp(tok, "promote=", 8) && (size_t)(eq - tok) < FMT_SUGGEST_LEN) {
            char key[FMT_SUGGEST_LEN];
            memcpy(key, tok, (size_t)(eq - tok)), key[eq - tok] = 0;
            fmt_suggest_init(&sg, key);
            fmt_suggest_try(&sg, "promote");
            if (fmt_suggest_text(&sg, near, sizeof near)) snprintf(near, sizeof near, "did you mean 'promote=%.30s'? ", eq + 1);
        } else if (tok[0] != 'k') {
            fmt_suggest_init(&sg, tok);
            fmt_suggest_try(&sg, "f16");
            fmt_suggest_text(&sg, near, sizeof near);
        }
        mm__msg(msg, len, "accumulator spec '%s': '%s' is not an engine option; %s(expected kN: the "
                "instruction's k, f16: an f16 C/D, promote=N: add into float32 every N products; each once)",
                spec, tok, near);
        return 1;
    }
    *out = acc;
    *st = MM_OK;
    return 1;
}

// The message for a spec that is neither an engine nor a format with its options: the nearest
// engine when the spec looks like a mistyped one (ARCH:INSTR), else what is wrong in the spec's
// own words (its first word, or the option that is neither promote=N, a mode nor a flag), and
// every engine and the format grammar.
static void mm__unknown_acc(const char *spec, char *msg, size_t len) {
    char head[64];
    const char *c1 = strchr(spec, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    size_t hl = c2 ? (size_t)(c2 - spec) : strlen(spec);
    if (hl >= sizeof head) hl = sizeof head - 1;
    memcpy(head, spec, hl), head[hl] = 0;
    fmt_suggest sg;
    fmt_suggest_init(&sg, head);
    for (size_t e = 0; e < mm_engine_count(); e++) fmt_suggest_try(&sg, mm_engine_name(e));
    char near[160] = "";
    char engines[300] = "";
    for (size_t e = 0, n = 0; e < mm_engine_count() && n < sizeof engines; e++)
        n += (size_t)snprintf(engines + n, sizeof engines - n, "%s%s", e ? " " : "", mm_engine_name(e));
    if (c1 && fmt_suggest_text(&sg, near, sizeof near)) {
        mm__msg(msg, len, "accumulator spec '%s': '%s' is not an engine; %sEngines: %s "
                "(fplab engines), each with optional :kN, :f16, :promote=N", spec, head, near, engines);
        return;
    }
    // A format with options: name the first word or the option at fault, as the user wrote them.
    char buf[128], fname[130];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL, *tok = strtok_r(buf, ":", &save);
    fmt_t f;
    snprintf(fname, sizeof fname, "%s", tok ? tok : "");
    if ((fname[0] == 'm' || fname[0] == 'M') && isdigit((unsigned char)fname[1]))
        snprintf(fname, sizeof fname, "e8m%d", atoi(tok + 1));
    if (tok && fmt_from_name(&f, fname) != FMT_OK) {
        char why[1024];
        fmt_name_message(tok, fmt_from_name(&f, tok), why, sizeof why);
        mm__msg(msg, len, "accumulator spec '%s': '%s' is neither an engine (%s; fplab engines) nor a format "
                "(fp32 | bf16 | fp16 | mNN | a format name): %s", spec, tok, engines, why);
        return;
    }
    const char *word = tok ? tok : spec;
    while ((tok = strtok_r(NULL, ":", &save))) {
        fmt_round_mode m;
        if (strncmp(tok, "promote=", 8) && fmt_mode_from_name(&m, tok) != FMT_OK) {
            const size_t n = strlen(fname);
            snprintf(fname + n, sizeof fname - n, ":%s", tok);
            if (fmt_from_name(&f, fname) == FMT_OK) continue;  // a flag of the format
            const char *eq = strchr(tok, '=');
            char key[16] = "";
            if (eq && (size_t)(eq - tok) < sizeof key) memcpy(key, tok, (size_t)(eq - tok)), key[eq - tok] = 0;
            fmt_suggest_init(&sg, key);
            fmt_suggest_try(&sg, "promote");
            const bool promote = *key && fmt_suggest_text(&sg, near, sizeof near) > 0;
            mm__msg(msg, len, "accumulator spec '%s': '%s' is not an option of %s%s%s%s (expected promote=N, a "
                    "rounding mode rne rna rtz rup rdn rto, or a flag of the format)", spec, tok, word,
                    promote ? "; did you mean 'promote=" : "", promote ? eq + 1 : "", promote ? "'?" : "");
            return;
        }
    }
    mm__msg(msg, len, "accumulator spec '%s' is not an engine (%s) nor a format with options", spec, engines);
}

int mm_acc_from_name(mm_acc *out, const char *spec, char *msg, size_t msg_len) {
    mm__msg(msg, msg_len, "%s", "");
    if (!spec || !*spec) {
        mm__msg(msg, msg_len, "empty accumulator spec; expected fp32 | bf16 | fp16 | mNN | a format "
                "name, with optional :promote=N and :MODE, or an engine ARCH:INSTR (fplab engines)");
        return MM_EINVAL;
    }
    char buf[128];
    if (strlen(spec) >= sizeof buf) {
        mm__msg(msg, msg_len, "accumulator spec '%.40s...' is too long", spec);
        return MM_EINVAL;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    int est;
    mm_acc eacc;
    if (mm__engine_spec(&eacc, &est, spec, msg, msg_len)) {
        if (est == MM_OK) est = mm__acc_check(&eacc, msg, msg_len);
        if (est == MM_OK) *out = eacc;
        return est;
    }

    // Tokens after the first ':' are promote=N, a mode name, or a flag of a custom format
    // (e.g. "e5m10:fn"), which goes back onto the format name.
    char name[160];
    mm_acc acc;
    memset(&acc, 0, sizeof acc);
    acc.mode = FMT_RNE;
    bool have_mode = false, have_promote = false;
    char *save = NULL;
    char *tok = strtok_r(buf, ":", &save);
    if (!tok) {
        mm__msg(msg, msg_len, "accumulator spec '%s' has no format name", spec);
        return MM_EINVAL;
    }
    // mNN: NN fraction bits with float32's exponent range.
    if ((tok[0] == 'm' || tok[0] == 'M') && tok[1]) {
        const char *p = tok + 1;
        while (isdigit((unsigned char)*p)) p++;
        if (*p || p - tok > 3) {
            mm__msg(msg, msg_len, "accumulator '%s' in '%s': mNN needs NN = 1..23 fraction bits "
                    "(e.g. m13 for e8m13)", tok, spec);
            return MM_EINVAL;
        }
        const int nn = atoi(tok + 1);
        if (nn < 1 || nn > 23) {
            mm__msg(msg, msg_len, "accumulator '%s' in '%s': mNN needs NN = 1..23 fraction bits", tok, spec);
            return MM_EINVAL;
        }
        snprintf(name, sizeof name, "e8m%d", nn);
    } else {
        snprintf(name, sizeof name, "%s", tok);
    }
    while ((tok = strtok_r(NULL, ":", &save))) {
        fmt_round_mode m;
        if (!strncmp(tok, "promote=", 8)) {
            const char *v = tok + 8;
            char *end;
            errno = 0;
            const long n = strtol(v, &end, 10);
            if (have_promote || !*v || *end || errno || n < 0 || n > 1L << 30) {
                mm__msg(msg, msg_len, "'%s' in accumulator spec '%s': expected one promote=N with "
                        "N >= 0 (products between float32 promotions; 0: at K-block ends)", tok, spec);
                return MM_EINVAL;
            }
            acc.promote_every = (int)n, have_promote = true;
        } else if (fmt_mode_from_name(&m, tok) == FMT_OK) {
            if (have_mode) {
                mm__msg(msg, msg_len, "accumulator spec '%s' names two rounding modes", spec);
                return MM_EINVAL;
            }
            acc.mode = m, have_mode = true;
        } else {
            const size_t n = strlen(name);
            snprintf(name + n, sizeof name - n, ":%s", tok);  // a format flag (checked below)
        }
    }
    const int st = fmt_from_name(&acc.fmt, name);
    if (st != FMT_OK) {
        mm__unknown_acc(spec, msg, msg_len);
        return MM_EINVAL;
    }
    const int ck = mm__acc_check(&acc, msg, msg_len);
    if (ck != MM_OK) return ck;
    *out = acc;
    return MM_OK;
}

// Checks one operand: its format, its storage and its scales.
static int mm__operand_check(const mm_operand *X, char which, size_t rows, size_t cols, char *msg,
                             size_t len) {
    if (!X->x) {
        mm__msg(msg, len, "operand %c: x is NULL", which);
        return MM_EINVAL;
    }
    if (!fmt_embeds_in_f32(&X->fmt)) {
        mm__msg(msg, len, "operand %c: element format %s does not fit in float32", which, X->fmt.name);
        return MM_EINVAL;
    }
    // rows x cols is the stored shape.
    if (X->ld < cols) {
        mm__msg(msg, len, "operand %c is stored %zu x %zu%s: ld is %zu, expected >= %zu", which, rows,
                cols, X->trans ? " (transposed)" : "", X->ld, cols);
        return MM_EINVAL;
    }
    if (X->block_k < 0) {
        mm__msg(msg, len, "operand %c: block_k is %d; expected >= 0 (0: one block spanning K)", which,
                X->block_k);
        return MM_EINVAL;
    }
    return MM_OK;
}

int mm_validate(const mm_operand *A, const mm_operand *B, size_t M, size_t N, size_t K,
                const mm_opts *o, char *msg, size_t msg_len) {
    mm__msg(msg, msg_len, "%s", "");
    if (!A || !B || !o) {
        mm__msg(msg, msg_len, "mm_validate: A, B and opts must not be NULL");
        return MM_EINVAL;
    }
    if (M < 1 || N < 1 || K < 1) {
        mm__msg(msg, msg_len, "shape M=%zu N=%zu K=%zu: every dimension must be >= 1", M, N, K);
        return MM_EINVAL;
    }
    int st = mm__operand_check(A, 'A', A->trans ? K : M, A->trans ? M : K, msg, msg_len);
    if (st == MM_OK) st = mm__operand_check(B, 'B', B->trans ? N : K, B->trans ? K : N, msg, msg_len);
    if (st != MM_OK) return st;
    if (A->scales && B->scales && A->block_k > 0 && B->block_k > 0 && A->block_k != B->block_k) {
        mm__msg(msg, msg_len, "A.block_k is %d and B.block_k is %d: when both operands have K-block "
                "scales the blocks must have the same length", A->block_k, B->block_k);
        return MM_EINVAL;
    }
    st = mm__acc_check(&o->acc, msg, msg_len);
    if (st != MM_OK) return st;
    if (o->acc.engine) {
        mm__engine_plan plan;
        st = mm__engine_plan_make(&plan, A, B, M, N, K, o, msg, msg_len);
        if (st != MM_OK) return st;
    } else if (mm_acc_is_emulated(&o->acc)) {
        const mm_operand *ops[2] = {A, B};
        for (int t = 0; t < 2; t++) {
            if (ops[t]->fmt.mbits + 1 > 12) {
                mm__msg(msg, msg_len, "emulated accumulator %s: operand %c's format %s has %d bits "
                        "of precision; at most 12 (so that a product is exact in 24 bits)",
                        o->acc.fmt.name, "AB"[t], ops[t]->fmt.name, ops[t]->fmt.mbits + 1);
                return MM_EINVAL;
            }
        }
    }
    if (!fmt_embeds_in_f32(&o->out_fmt)) {
        mm__msg(msg, msg_len, "output format %s does not fit in float32 (C is a float array)",
                o->out_fmt.name);
        return MM_EINVAL;
    }
    char w[200];
    if (fmt_validate_round_opts(&o->out_fmt, &o->out_round, w, sizeof w) != FMT_OK) {
        mm__msg(msg, msg_len, "output rounding: %s", w);
        return MM_EINVAL;
    }
    // Warnings: valid, but worth saying (MM_OK with a message).
    if (w[0]) {
        mm__msg(msg, msg_len, "output rounding: %s", w);
    } else if ((!A->scales && A->block_k > 0) || (!B->scales && B->block_k > 0)) {
        mm__msg(msg, msg_len, "warning: operand %c has block_k %d but no scales; its block_k is "
                "ignored", !A->scales && A->block_k > 0 ? 'A' : 'B',
                !A->scales && A->block_k > 0 ? A->block_k : B->block_k);
    }
    return MM_OK;
}
