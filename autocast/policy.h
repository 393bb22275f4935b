// policy.h: precision policies. A policy maps every cast site of the model to a format, a
// scaling recipe and a rounding mode, and says how the loss is scaled, how the weights are
// stored and updated, and which accumulator the matmuls emulate. Policies are small text files
// (autocast/presets/*.policy) a user can copy and edit.
// Constraints: library level (status codes and messages, never exits); no trainer types here:
// the trainer asks the policy what to do at each site.
//
// Policy file format: one setting per line, '#' starts a comment, blank lines ignored.
//   name pure-bf16-sr                      the preset's name
//   site SITE FORMAT [RECIPE] [MODE] [saturate|ieee]
//                                          SITE is a site name below or a glob with '*'
//                                          ("*.w", "attn.*", "*": a glob matches every site
//                                          of this build, attn.kv included); later lines override
//                                          earlier ones; FORMAT fp32 means "leave in float32";
//                                          RECIPE as fmt_scaling_from_name (none, tensor, mx,
//                                          nvfp4, block:K:FMT, tile:RxC:FMT, ...) or "delayed"
//                                          (per-tensor scale from an amax history); MODE as
//                                          fmt_round_mode names (rne, sr, ...)
//   loss_scale none | static S | dynamic [init=65536] [growth=2] [backoff=0.5]
//              [interval=2000] [min=1]
//   update fp32 | round | sr | kahan       how new weights are stored: fp32 master (plain),
//                                          rounded to the master site's format (rne), with
//                                          stochastic rounding, or with a Kahan compensation
//                                          buffer in that format
//   accumulator fp32 | SPEC [GEMM]         mm_acc_from_name spec (bf16, m13:promote=128, ...)
//                                          for the matmul GEMM (a name below or a glob:
//                                          "*.fprop", "mlp.*"); every matmul when omitted;
//                                          later lines override earlier ones
//   amax_history LEN                       delayed scaling: history length (1024)
//   amax_margin M                          delayed scaling: scale = 2^-M * max / amax (0)
//   hadamard 0|16                          random Hadamard transform of the wgrad operands
//                                          (NVFP4 recipe), 0 off
#ifndef FPLAB_POLICY_H
#define FPLAB_POLICY_H
#include <stdbool.h>
#include <stddef.h>

#include "formats/round.h"
#include "formats/scale.h"
#include "kernels/scaled_mm.h"

// The cast sites. Matmul sites come in threes per projection: .in (the activation operand, in
// forward and in wgrad), .w (the weight operand, in forward and in dgrad), .grad (the gradient
// of the output, in dgrad and wgrad). attn.kv: the keys (after RoPE) and values that attention
// stores and reads, i.e. what a KV cache holds.
// Sites are only ever appended: a site's index is its place in the autocast state of a
// checkpoint (autocast.h) and in the stochastic-rounding streams, so the first AC_NSITES_V1
// sites keep the indices of version 1 (fplab 0.2.0, before attn.kv).
#define AC_SITE_LIST(X)                                                                     \
    X(AC_QKV_IN, "attn.qkv.in") X(AC_QKV_W, "attn.qkv.w") X(AC_QKV_GRAD, "attn.qkv.grad")  \
    X(AC_O_IN, "attn.o.in") X(AC_O_W, "attn.o.w") X(AC_O_GRAD, "attn.o.grad")              \
    X(AC_GATEUP_IN, "mlp.gate_up.in") X(AC_GATEUP_W, "mlp.gate_up.w")                      \
    X(AC_GATEUP_GRAD, "mlp.gate_up.grad")                                                  \
    X(AC_DOWN_IN, "mlp.down.in") X(AC_DOWN_W, "mlp.down.w") X(AC_DOWN_GRAD, "mlp.down.grad") \
    X(AC_HEAD_IN, "lm_head.in") X(AC_HEAD_W, "lm_head.w") X(AC_HEAD_GRAD, "lm_head.grad")  \
    X(AC_ATT_SCORES, "attn.scores") X(AC_ATT_PROBS, "attn.probs")                          \
    X(AC_RESIDUAL, "residual") X(AC_SAVED, "acts.saved")                                   \
    X(AC_GRADS, "grads") X(AC_MASTER, "master") X(AC_ADAM_M, "adam.m") X(AC_ADAM_V, "adam.v") \
    X(AC_KV, "attn.kv")

typedef enum {
#define AC_ENUM(id, name) id,
    AC_SITE_LIST(AC_ENUM)
#undef AC_ENUM
    AC_NSITES
} ac_site;
enum { AC_NSITES_V1 = AC_ADAM_V + 1 };  // version 1's sites: every site up to adam.v

const char *ac_site_name(ac_site s);
int ac_site_from_name(const char *name);  // -1 if unknown

typedef struct {
    bool active;          // false: the site stays float32 (nothing is rounded or counted)
    fmt_t fmt;
    fmt_scaling scaling;  // scaling.none for plain rounding
    bool delayed;         // per-tensor scale from the amax history (Transformer Engine)
    fmt_round_opts round; // mode, overflow policy (saturate by default), sr bits
} ac_rule;

// The matmuls of the model: each projection's three products, named PROJECTION.PASS
// (attn.qkv.fprop, mlp.down.wgrad, ...): fprop = in x w^T, dgrad = grad x w, wgrad = grad^T x in.
// A projection's operand sites are its three sites in AC_SITE_LIST (.in, .w, .grad).
typedef enum { AC_PROJ_QKV, AC_PROJ_O, AC_PROJ_GATEUP, AC_PROJ_DOWN, AC_PROJ_HEAD, AC_NPROJ } ac_proj;
typedef enum { AC_FPROP, AC_DGRAD, AC_WGRAD, AC_NPASSES } ac_pass;
static inline ac_site ac_proj_in(ac_proj p) { return (ac_site)(AC_QKV_IN + 3 * (int)p); }
static inline ac_site ac_proj_w(ac_proj p) { return (ac_site)(AC_QKV_W + 3 * (int)p); }
static inline ac_site ac_proj_grad(ac_proj p) { return (ac_site)(AC_QKV_GRAD + 3 * (int)p); }
// "attn.qkv.fprop", ...; "?" out of range.
const char *ac_gemm_name(ac_proj p, ac_pass pass);
// The sites of the left (a) and right (b) operand of a pass: fprop (in, w), dgrad (grad, w),
// wgrad (grad, in).
void ac_gemm_sites(ac_proj p, ac_pass pass, ac_site *a, ac_site *b);

typedef enum { AC_SCALE_NONE, AC_SCALE_STATIC, AC_SCALE_DYNAMIC } ac_scale_kind;
typedef enum { AC_UPDATE_FP32, AC_UPDATE_ROUND, AC_UPDATE_SR, AC_UPDATE_KAHAN } ac_update;

typedef struct {
    ac_scale_kind kind;
    float init;        // static: the scale; dynamic: the first scale (65536)
    float growth;      // 2
    float backoff;     // 0.5
    int interval;      // clean steps before growing (2000)
    float min_scale;   // floor (1)
} ac_scaler_cfg;

typedef struct {
    char name[64];
    ac_rule site[AC_NSITES];
    ac_scaler_cfg scaler;
    ac_update update;
    mm_acc acc[AC_NPROJ][AC_NPASSES];  // each matmul's accumulator: fp32 unless emulated
    int amax_history;    // 1024, at most AC_AMAX_HISTORY_MAX
    float amax_margin;   // 0
    int hadamard;        // 0 or 16
} ac_policy;

enum { AC_OK = 0, AC_EINVAL = 1, AC_EIO = 2 };
// Delayed scaling keeps a history per site and layer (sites x (layers + 1) x history floats):
// 16 times Transformer Engine's default of 1024 bounds what a policy file can make it allocate.
enum { AC_AMAX_HISTORY_MAX = 16384 };

// The all-float32 policy (every site inactive, no loss scaling, fp32 update).
void ac_policy_fp32(ac_policy *p);
// Parses policy text (origin names it in messages: a path or "preset NAME"). Starts from
// ac_policy_fp32 with an empty name; an active site gets recipe none, mode rne and saturate
// unless its line says otherwise (RECIPE, MODE and the overflow word may come in any order),
// and fp32 (as FORMAT) takes no further field. Then checks the whole policy as
// ac_policy_validate does. Errors: AC_EINVAL with "ORIGIN:LINE: ..." naming the token and what
// was expected; p is left as it was. Warnings: AC_OK with the message in msg;
// msg[0] == 0 means none. Extensions of the grammar above:
//   RECIPE+tensor   a recipe with tiles under an fp32 tensor scale (fmt_scaling.tensor_scale),
//                   e.g. tile:16x16:e4m3+tensor (NVFP4's weights); fmt_scaling_name spells it so
//   loss_scale none | static S: growth = backoff = 1, interval 0, min = the scale (1 for none)
int ac_policy_parse(ac_policy *p, const char *text, const char *origin, char *msg, size_t msg_len);
// Loads a policy by preset name (autocast/presets/NAME.policy, compiled in; fp16-static-S for
// any positive number S) or, when the name is not a preset, from a file path (a file without a
// "name" line is named after the file, less its directory and ".policy"); a preset name wins
// over a file of the same name (write ./NAME for the file). AC_EIO when the file cannot be
// read; otherwise as ac_policy_parse.
int ac_policy_load(ac_policy *p, const char *name_or_path, char *msg, size_t msg_len);
// Writes the policy back as text that parses to the same policy (one site line per site, every
// field explicit). Returns the length of the whole text, like snprintf: the text was truncated
// when the result is >= cap. Exact for every policy ac_policy_parse can produce (a hand-built
// rule's sr_bits, flush_subnormals, seed, stream and offset have no spelling and are dropped).
size_t ac_policy_text(const ac_policy *p, char *buf, size_t cap);
// The preset names, comma-separated, each loadable by ac_policy_load and each with its file
// autocast/presets/NAME.policy (fp16-static-1024 stands for the fp16-static-S family).
const char *ac_preset_names(void);
// "did you mean 'bf16-amp'? " for a name that is near preset names (formats/names.h's rule),
// else "", into buf like snprintf; returns the length written.
size_t ac_preset_suggest(const char *name, char *buf, size_t cap);

// Checks a policy built by hand (ac_policy_parse runs the same checks with line numbers):
// site formats that do not fit in float32, e8m0 or unsigned element formats (unsigned allowed
// for adam.v), delayed on anything but the per-tensor recipe, a :nanblock recipe whose scale
// format has no NaN, update round|sr|kahan without an active master site or update fp32 with
// one, bad loss-scale numbers, amax_history < 1, hadamard not 0 or 16, an emulated accumulator
// on a matmul whose operand sites are not both active with at most 12 bits of precision (exact
// products) or whose two operands' recipes have K-blocks of different lengths. AC_EINVAL with a message, or AC_OK with warnings in msg (fp16-range gradients with
// neither loss nor tensor scaling; loss scaling with saturating gradient casts, which hide the
// overflow from the scaler).
int ac_policy_validate(const ac_policy *p, char *msg, size_t msg_len);
// True when a and b are the same policy, field by field (names included; floats by ==).
bool ac_policy_equal(const ac_policy *a, const ac_policy *b);
// The text of preset name (as ac_policy_load uses it) into buf, like snprintf: returns its
// length, or 0 when name is not a preset.
size_t ac_preset_text(const char *name, char *buf, size_t cap);
// The one-line description of preset name (for `fplab policy --list`): its text's
// "# description: ..." line, less that prefix and the newline, into buf, like snprintf;
// 0 when name is not a preset (every preset has one: tests/test_policy.c).
size_t ac_preset_description(const char *name, char *buf, size_t cap);

#endif
