// presets.c: the preset policies as text, the source of truth for ac_policy_load. The files
// autocast/presets/NAME.policy are the same texts for a user to copy (test_policy checks that
// they are equal). fp16-static-S is one template: "@S@" stands for the scale, so that
// fp16-static-1024 is the example file and any positive S loads by name. Each text opens with a
// "# description: ..." comment line, the one line `fplab policy --list` prints for it.
// Constraints: data and lookup only; parsing lives in policy.c.
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autocast/policy.h"
#include "formats/names.h"

typedef struct {
    const char *name;
    const char *text;
} preset;

static const preset presets[] = {
    {"fp32",
     "# description: float32 everywhere: the baseline, bitwise the plain trainer\n"
     "# fp32: the baseline. Nothing is cast: every site stays float32, the weights are updated in\n"
     "# float32 and the loss is not scaled.\n"
     "name fp32\n"
     "site * fp32\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"bf16-amp",
     "# description: bf16 matmul operands, fp32 master weights, no loss scaling (PyTorch autocast)\n"
     "# bf16-amp: mixed precision after Micikevicius et al. 2018 (\"Mixed Precision Training\", ICLR)\n"
     "# with bfloat16 in place of fp16, as PyTorch's autocast(dtype=torch.bfloat16) runs it: the\n"
     "# operands of every matmul in bf16, float32 master weights, optimizer and everything else.\n"
     "# bf16 has float32's exponent range, so the loss is not scaled.\n"
     "name bf16-amp\n"
     "site *.in   bf16\n"
     "site *.w    bf16\n"
     "site *.grad bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"fp16-amp",
     "# description: fp16 matmul operands, fp32 master weights, dynamic loss scaling (GradScaler)\n"
     "# fp16-amp: Micikevicius et al. 2018 (\"Mixed Precision Training\", ICLR): the operands of every\n"
     "# matmul in fp16, float32 master weights, and dynamic loss scaling with PyTorch GradScaler's\n"
     "# defaults (a step whose gradients hold an inf or NaN is skipped and the scale halved; the\n"
     "# scale doubles after 2000 clean steps). Casts overflow to inf as a real fp16 cast does: the\n"
     "# scaler needs the inf to see the overflow.\n"
     "name fp16-amp\n"
     "site *.in   fp16 none rne ieee\n"
     "site *.w    fp16 none rne ieee\n"
     "site *.grad fp16 none rne ieee\n"
     "loss_scale dynamic init=65536 growth=2 backoff=0.5 interval=2000 min=1\n"
     "update fp32\n"},
    {"fp16-amp-noscale",
     "# description: fp16-amp without loss scaling: the ablation where small gradients underflow\n"
     "# fp16-amp-noscale: fp16-amp without loss scaling, the ablation of Micikevicius et al. 2018\n"
     "# (\"Mixed Precision Training\", ICLR): gradients below fp16's smallest subnormal (2^-24)\n"
     "# underflow to zero, and an overflow goes into the weights, since no step is ever skipped.\n"
     "name fp16-amp-noscale\n"
     "site *.in   fp16 none rne ieee\n"
     "site *.w    fp16 none rne ieee\n"
     "site *.grad fp16 none rne ieee\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"fp16-static-@S@",
     "# description: fp16-amp with a constant loss scale of @S@ (any positive S loads by name)\n"
     "# fp16-static-@S@: fp16-amp with a constant loss scale of @S@, the first recipe of\n"
     "# Micikevicius et al. 2018 (\"Mixed Precision Training\", ICLR): a step whose gradients hold an\n"
     "# inf or NaN is skipped, and the scale never changes. Any positive scale loads by name:\n"
     "# fp16-static-S (fp16-static-8, fp16-static-32768, ...).\n"
     "name fp16-static-@S@\n"
     "site *.in   fp16 none rne ieee\n"
     "site *.w    fp16 none rne ieee\n"
     "site *.grad fp16 none rne ieee\n"
     "loss_scale static @S@\n"
     "update fp32\n"},
    {"pure-bf16",
     "# description: bf16 weights, gradients and Adam moments, updates rounded to nearest (swamping)\n"
     "# pure-bf16: everything in bfloat16, with no float32 copy of the weights: matmul operands,\n"
     "# weights, parameter gradients and both Adam moments in bf16, and each new weight rounded to\n"
     "# nearest. An update smaller than half an ulp of its weight is lost (swamping): the failure\n"
     "# that Zamirai et al. 2020 (\"Revisiting BFloat16 Training\") fix with stochastic rounding or\n"
     "# Kahan summation (pure-bf16-sr, pure-bf16-kahan).\n"
     "name pure-bf16\n"
     "site *.in   bf16\n"
     "site *.w    bf16\n"
     "site *.grad bf16\n"
     "site master bf16\n"
     "site grads  bf16\n"
     "site adam.m bf16\n"
     "site adam.v bf16\n"
     "loss_scale none\n"
     "update round\n"},
    {"pure-bf16-sr",
     "# description: pure-bf16 with stochastic rounding of the weight update\n"
     "# pure-bf16-sr: pure-bf16 with the weight update rounded stochastically (Zamirai et al. 2020,\n"
     "# \"Revisiting BFloat16 Training\"): a small update moves its weight one ulp with probability\n"
     "# |update| / ulp, so it is kept in expectation instead of being swamped.\n"
     "name pure-bf16-sr\n"
     "site *.in   bf16\n"
     "site *.w    bf16\n"
     "site *.grad bf16\n"
     "site master bf16\n"
     "site grads  bf16\n"
     "site adam.m bf16\n"
     "site adam.v bf16\n"
     "loss_scale none\n"
     "update sr\n"},
    {"pure-bf16-kahan",
     "# description: pure-bf16 with a Kahan-compensated weight update\n"
     "# pure-bf16-kahan: pure-bf16 with Kahan-compensated weight updates (Zamirai et al. 2020,\n"
     "# \"Revisiting BFloat16 Training\"): a bf16 buffer per weight keeps the part of each update that\n"
     "# rounding lost and adds it back at the next step.\n"
     "name pure-bf16-kahan\n"
     "site *.in   bf16\n"
     "site *.w    bf16\n"
     "site *.grad bf16\n"
     "site master bf16\n"
     "site grads  bf16\n"
     "site adam.m bf16\n"
     "site adam.v bf16\n"
     "loss_scale none\n"
     "update kahan\n"},
    {"fp8-delayed",
     "# description: e4m3 forward, e5m2 gradients, per-tensor scales from a 1024-step amax history\n"
     "# fp8-delayed: FP8 training with NVIDIA Transformer Engine's DelayedScaling recipe at its\n"
     "# defaults: format HYBRID (e4m3 for activations and weights, e5m2 for gradients),\n"
     "# amax_history_len 1024, amax_compute_algo \"max\", margin 0, saturating casts; each tensor is\n"
     "# scaled by max_fp8 / (largest amax of its last 1024 steps). Float32 master weights.\n"
     "# Transformer Engine keeps the first and last layers in higher precision: the LM head is bf16.\n"
     "name fp8-delayed\n"
     "site *.in   e4m3 delayed\n"
     "site *.w    e4m3 delayed\n"
     "site *.grad e5m2 delayed\n"
     "site lm_head.* bf16\n"
     "amax_history 1024\n"
     "amax_margin 0\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"fp8-current",
     "# description: e4m3 forward, e5m2 gradients, per-tensor scales from the current amax\n"
     "# fp8-current: fp8-delayed with current scaling, as Transformer Engine's\n"
     "# Float8CurrentScaling recipe: each tensor is scaled by max_fp8 / its own amax, computed on the\n"
     "# spot (recipe tensor). e4m3 activations and weights, e5m2 gradients, float32 master weights;\n"
     "# the LM head stays bf16 (Transformer Engine keeps the first and last layers in higher\n"
     "# precision).\n"
     "name fp8-current\n"
     "site *.in   e4m3 tensor\n"
     "site *.w    e4m3 tensor\n"
     "site *.grad e5m2 tensor\n"
     "site lm_head.* bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"fp8-block",
     "# description: e4m3, power-of-two scales per 1x128 tile and 128x128 weight block (DeepSeek-V3)\n"
     "# fp8-block: fine-grained FP8 after DeepSeek-V3 (DeepSeek-AI 2024, technical report): e4m3\n"
     "# everywhere, gradients included; activations and gradients get one scale per 1x128 tile\n"
     "# (per token, per 128 channels), weights one per 128x128 block. Here the scales are powers of\n"
     "# two (e8m0) rounded up, so nothing clips; tile:1x128:fp32 gives the report's float32 scales.\n"
     "# Float32 master weights; the LM head stays bf16.\n"
     "name fp8-block\n"
     "site *.in   e4m3 tile:1x128:e8m0:up\n"
     "site *.w    e4m3 tile:128x128:e8m0:up\n"
     "site *.grad e4m3 tile:1x128:e8m0:up\n"
     "site lm_head.* bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"mxfp8",
     "# description: OCP MXFP8: e4m3 (e5m2 gradients) in blocks of 32 with e8m0 scales\n"
     "# mxfp8: OCP Microscaling Formats (MX) Specification v1.0: every block of 32 elements along K\n"
     "# shares an e8m0 scale, chosen as OCP specifies (2^(floor(log2 amax) - emax_elem), which may\n"
     "# clip the top of a block); e4m3 activations and weights, e5m2 gradients. \"mx:up\" rounds the\n"
     "# scale up instead so that nothing clips (NVIDIA's MXFP8 training recipe).\n"
     "# Float32 master weights; the LM head stays bf16.\n"
     "name mxfp8\n"
     "site *.in   e4m3 mx\n"
     "site *.w    e4m3 mx\n"
     "site *.grad e5m2 mx\n"
     "site lm_head.* bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"mxfp6",
     "# description: OCP MXFP6: e2m3 (e3m2 gradients) in blocks of 32 with e8m0 scales\n"
     "# mxfp6: OCP Microscaling Formats (MX) Specification v1.0, MXFP6: blocks of 32 with an e8m0\n"
     "# scale (OCP rounding; mx:up is the alternative), e2m3 activations and weights (more\n"
     "# precision), e3m2 gradients (more range). Float32 master weights; the LM head stays bf16.\n"
     "name mxfp6\n"
     "site *.in   e2m3 mx\n"
     "site *.w    e2m3 mx\n"
     "site *.grad e3m2 mx\n"
     "site lm_head.* bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"mxfp4",
     "# description: OCP MXFP4: e2m1 in blocks of 32 with e8m0 scales\n"
     "# mxfp4: OCP Microscaling Formats (MX) Specification v1.0, MXFP4: e2m1 elements in blocks of\n"
     "# 32 with an e8m0 scale (OCP rounding; mx:up is the alternative) on every matmul operand.\n"
     "# Float32 master weights; the LM head stays bf16.\n"
     "name mxfp4\n"
     "site *.in   e2m1 mx\n"
     "site *.w    e2m1 mx\n"
     "site *.grad e2m1 mx\n"
     "site lm_head.* bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"nvfp4",
     "# description: NVFP4: e2m1 in blocks of 16, e4m3 scales under an fp32 tensor scale, SR gradients\n"
     "# nvfp4: NVIDIA's NVFP4 pretraining recipe (NVIDIA 2025, \"Pretraining Large Language Models\n"
     "# with NVFP4\"): e2m1 elements, blocks of 16 with e4m3 scales under a float32 tensor scale.\n"
     "# Weights use 16x16 tiles of e4m3 scales under the tensor scale (\"+tensor\"), so the same\n"
     "# quantized weight serves the forward and the transposed dgrad product; gradients are rounded\n"
     "# stochastically; a random 16x16 Hadamard transform is applied to the wgrad operands.\n"
     "# Float32 master weights; the LM head stays bf16 (the paper also keeps a few of the last\n"
     "# blocks in bf16).\n"
     "name nvfp4\n"
     "site *.in   e2m1 nvfp4\n"
     "site *.w    e2m1 tile:16x16:e4m3+tensor\n"
     "site *.grad e2m1 nvfp4 sr\n"
     "site lm_head.* bf16\n"
     "hadamard 16\n"
     "loss_scale none\n"
     "update fp32\n"},
    // --- inference presets (fplab eval, fplab sample --policy): forward sites only
    {"w8-fp8",
     "# description: inference: weights only in e4m3 with one fp32 scale per output channel (W8A16)\n"
     "# w8-fp8: post-training quantization of the weights alone, FP8 weight-only (W8A16; vLLM runs\n"
     "# fp8 checkpoints so on GPUs without fp8 tensor cores): every projection weight in e4m3 with one\n"
     "# float32 scale per output channel (row: amax / 448 along K), activations float32. The LM\n"
     "# head's weight (with tied embeddings, the embedding table as the head reads it) stays bf16.\n"
     "# Only forward sites are set; in training this would be quantization-aware weights.\n"
     "name w8-fp8\n"
     "site *.w    e4m3 row\n"
     "site lm_head.w bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"w8a8-fp8",
     "# description: inference: e4m3 weights per output channel and e4m3 activations per token (W8A8)\n"
     "# w8a8-fp8: FP8 W8A8 with dynamic scales, the FP8_DYNAMIC scheme of vLLM / llm-compressor:\n"
     "# every projection weight in e4m3 with one float32 scale per output channel, every activation\n"
     "# operand in e4m3 with one float32 scale per token computed on the fly (row: per row of the\n"
     "# (tokens, K) operand). The LM head's weight and input stay bf16.\n"
     "name w8a8-fp8\n"
     "site *.w    e4m3 row\n"
     "site *.in   e4m3 row\n"
     "site lm_head.w bf16\n"
     "site lm_head.in bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"w4-mxfp4",
     "# description: inference: weights only in OCP MXFP4 (e2m1, blocks of 32, e8m0 scales), W4A16\n"
     "# w4-mxfp4: post-training quantization of the weights alone to OCP MXFP4 (MX Specification\n"
     "# v1.0): e2m1 elements in blocks of 32 along K with an e8m0 scale (OCP rounding), as\n"
     "# gpt-oss ships its MoE weights; activations float32. The LM head's weight stays bf16.\n"
     "name w4-mxfp4\n"
     "site *.w    e2m1 mx\n"
     "site lm_head.w bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"w4-nvfp4",
     "# description: inference: weights only in NVFP4 (e2m1, blocks of 16, e4m3 scales, fp32 tensor scale)\n"
     "# w4-nvfp4: post-training quantization of the weights alone to NVFP4 as NVIDIA's ModelOpt\n"
     "# exports it: e2m1 elements in blocks of 16 along K with e4m3 block scales under a float32\n"
     "# tensor scale per weight matrix; activations float32. The LM head's weight stays bf16.\n"
     "name w4-nvfp4\n"
     "site *.w    e2m1 nvfp4\n"
     "site lm_head.w bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"w4a8-mx",
     "# description: inference: MXFP4 weights x MXFP8 (e4m3) activations, blocks of 32 (W4A8)\n"
     "# w4a8-mx: mixed-precision W4A8 in OCP MX formats, the mixed e2m1 x e4m3 block-scaled product\n"
     "# that Blackwell's and MI355's tensor cores run natively: weights e2m1 and activation operands\n"
     "# e4m3, each in blocks of 32 along K with an e8m0 scale (OCP rounding). The LM head's weight\n"
     "# and input stay bf16.\n"
     "name w4a8-mx\n"
     "site *.w    e2m1 mx\n"
     "site *.in   e4m3 mx\n"
     "site lm_head.w bf16\n"
     "site lm_head.in bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"kv8-fp8",
     "# description: inference: the KV cache (keys after RoPE, values) in e4m3, one fp32 scale per token\n"
     "# kv8-fp8: an FP8 KV cache alone: the keys (after RoPE) and values that attention stores and\n"
     "# reads, in e4m3 with one float32 scale per token (row: amax / 448 over the token's keys, or\n"
     "# values, of every KV head), saturating; weights and activation operands float32. A per-token\n"
     "# scale depends on the token's own keys and values only, so a forward over a window rounds\n"
     "# each token as a cache filled one token at a time holds it (fplab sample). Serving stacks\n"
     "# often use one calibrated scale per tensor instead, or none (docs/results/ptq-shakespeare).\n"
     "name kv8-fp8\n"
     "site attn.kv e4m3 row\n"
     "loss_scale none\n"
     "update fp32\n"},
    {"w8a8kv8-fp8",
     "# description: inference: w8a8-fp8 with the KV cache in e4m3, one fp32 scale per token (W8A8KV8)\n"
     "# w8a8kv8-fp8: w8a8-fp8 (e4m3 weights with one float32 scale per output channel, e4m3\n"
     "# activation operands with one per token) plus an FP8 KV cache as kv8-fp8 casts it (e4m3, one\n"
     "# float32 scale per token): weights, matmul inputs and the KV cache in 8 bits. The LM head's\n"
     "# weight and input stay bf16.\n"
     "name w8a8kv8-fp8\n"
     "site *.w    e4m3 row\n"
     "site *.in   e4m3 row\n"
     "site attn.kv e4m3 row\n"
     "site lm_head.w bf16\n"
     "site lm_head.in bf16\n"
     "loss_scale none\n"
     "update fp32\n"},
};
enum { NPRESETS = sizeof presets / sizeof presets[0] };

static const char static_prefix[] = "fp16-static-";
static const char static_marker[] = "@S@";
enum { STATIC_PREFIX_LEN = sizeof static_prefix - 1, MARKER_LEN = sizeof static_marker - 1 };

const char *ac_preset_names(void) {
    return "fp32,bf16-amp,fp16-amp,fp16-amp-noscale,fp16-static-1024,pure-bf16,pure-bf16-sr,"
           "pure-bf16-kahan,fp8-delayed,fp8-current,fp8-block,mxfp8,mxfp6,mxfp4,nvfp4,w8-fp8,w8a8-fp8,w4-mxfp4,"
           "w4-nvfp4,w4a8-mx,kv8-fp8,w8a8kv8-fp8";
}

size_t ac_preset_suggest(const char *name, char *buf, size_t cap) {
    fmt_suggest sg;
    fmt_suggest_init(&sg, name);
    fmt_suggest_try_list(&sg, ac_preset_names());
    return (size_t)fmt_suggest_text(&sg, buf, cap);
}

// S of fp16-static-S: a plain positive number (digits first, no sign or space) that is a
// positive finite float32, and a name that fits in ac_policy.name.
static bool static_scale_ok(const char *s) {
    if (!((*s >= '0' && *s <= '9') || *s == '.')) return false;
    char *end;
    const double v = strtod(s, &end);
    return end != s && !*end && isfinite(v) && v <= FLT_MAX && (float)v > 0 &&
           STATIC_PREFIX_LEN + strlen(s) < sizeof ((ac_policy *)0)->name;
}

size_t ac_preset_text(const char *name, char *buf, size_t cap) {
    if (!name) return 0;
    const char *tmpl = NULL, *s = NULL;
    for (int i = 0; i < NPRESETS && !tmpl; i++) {
        if (strstr(presets[i].name, static_marker)) {
            if (!strncmp(name, static_prefix, STATIC_PREFIX_LEN) && static_scale_ok(name + STATIC_PREFIX_LEN))
                tmpl = presets[i].text, s = name + STATIC_PREFIX_LEN;
        } else if (!strcmp(name, presets[i].name)) {
            tmpl = presets[i].text;
        }
    }
    if (!tmpl) return 0;
    // Copy, putting S in place of every marker (like snprintf: the length of the whole text).
    size_t n = 0;
    for (const char *t = tmpl; *t;) {
        const char *piece = t;
        size_t len = 1;
        if (s && !strncmp(t, static_marker, MARKER_LEN)) piece = s, len = strlen(s), t += MARKER_LEN;
        else t++;
        for (size_t j = 0; j < len; j++, n++)
            if (buf && n + 1 < cap) buf[n] = piece[j];
    }
    if (buf && cap) buf[n < cap ? n : cap - 1] = 0;
    return n;
}

static const char description_tag[] = "# description: ";

size_t ac_preset_description(const char *name, char *buf, size_t cap) {
    if (buf && cap) buf[0] = 0;
    const size_t tlen = ac_preset_text(name, NULL, 0);
    if (!tlen) return 0;
    char *text = malloc(tlen + 1);
    if (!text) return 0;
    ac_preset_text(name, text, tlen + 1);
    const size_t tag = sizeof description_tag - 1;
    const char *d = NULL;
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
        if (!strncmp(line, description_tag, tag)) {
            d = line + tag;
            break;
        }
    const size_t n = d ? strcspn(d, "\n") : 0;
    if (buf && cap) snprintf(buf, cap, "%.*s", (int)n, d ? d : "");
    free(text);
    return n;
}
