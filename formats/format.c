// format.c: the format table, name lookup, custom eXmY parsing and derived properties.
// Every constant is derived from the six descriptor fields by one set of expressions (D_*),
// which the compiler evaluates for the table and fmt_make evaluates for custom formats; nothing
// is typed in, and no state is written after start-up (the table is const: thread-safe).
#include "format.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "names.h"

const char *fmt_strerror(int status) {
    switch (status) {
    case FMT_OK: return "ok";
    case FMT_EINVAL: return "invalid argument";
    case FMT_EUNKNOWN: return "unknown name";
    case FMT_ENOMEM: return "out of memory";
    default: return "unknown status";
    }
}

// --- derivation: one set of expressions, evaluated by the compiler for the table below and at
// run time by fmt_make for custom formats. Arguments: e, m exponent and mantissa bits, b bias,
// sg signedness, sp the fmt_special value. They assume what fmt_make checks first (1 <= e <= 11,
// 0 <= m <= 52, a result that embeds in fp64).

// 2^k for 0 <= k < 2048 (F2P) and 2^-k (F2N) as constant expressions: one power-of-two factor per
// bit of k. Every partial product is a power of two between 1 and the result, so each is exact.
#define F2B(k, bit, v) (((k) & (bit)) ? (v) : 1.0)
#define F2P(k)                                                                                     \
    (F2B(k, 1, 0x1p1) * F2B(k, 2, 0x1p2) * F2B(k, 4, 0x1p4) * F2B(k, 8, 0x1p8) * F2B(k, 16, 0x1p16) * \
     F2B(k, 32, 0x1p32) * F2B(k, 64, 0x1p64) * F2B(k, 128, 0x1p128) * F2B(k, 256, 0x1p256) *           \
     F2B(k, 512, 0x1p512))
#define F2N(k)                                                                                          \
    (F2B(k, 1, 0x1p-1) * F2B(k, 2, 0x1p-2) * F2B(k, 4, 0x1p-4) * F2B(k, 8, 0x1p-8) *                    \
     F2B(k, 16, 0x1p-16) * F2B(k, 32, 0x1p-32) * F2B(k, 64, 0x1p-64) * F2B(k, 128, 0x1p-128) *          \
     F2B(k, 256, 0x1p-256) * F2B(k, 512, 0x1p-512) * F2B(k, 1024, 0x1p-1024))
// 2^k for -1074 <= k <= 1023: one of the two factors is 1.
#define POW2(k) (F2P((k) > 0 ? (k) : 0) * F2N((k) < 0 ? -(k) : 0))

#define D_ETOP(e) ((1 << (e)) - 1)                         // the all-ones exponent field
#define D_MONES(m) ((1ULL << (m)) - 1)                     // the all-ones mantissa field
#define D_NAN_TOP(sp) ((sp) == FMT_FN || (sp) == FMT_E8M0)  // the all-ones code is NaN
// How many of the largest magnitude codes are not finite: IEEE's whole top binade (inf and
// NaN), the all-ones NaN of fn and e8m0, P3109 extended's inf (and, unsigned, its NaN above it).
#define D_TOP_TAKEN(m, sp, sg) \
    ((sp) == FMT_IEEE ? 1ULL << (m) : D_NAN_TOP(sp) ? 1ULL : (sp) == FMT_EXTENDED ? ((sg) ? 1ULL : 2ULL) : 0ULL)
// The largest finite code's magnitude, and its exponent and mantissa fields.
#define D_TOP_CODE(e, m, sp, sg) (((1ULL << ((e) + (m))) - 1) - D_TOP_TAKEN(m, sp, sg))
#define D_TOP_E(e, m, sp, sg) ((int)(D_TOP_CODE(e, m, sp, sg) >> (m)))
#define D_TOP_M(e, m, sp, sg) (D_TOP_CODE(e, m, sp, sg) & D_MONES(m))
// Exponent field 0 is the subnormal binade except in e8m0 style, where it is a normal one.
#define D_EMIN(b, sp) ((sp) == FMT_E8M0 ? -(b) : 1 - (b))
#define D_EMAX(e, m, b, sp, sg) (D_TOP_E(e, m, sp, sg) - (b))
#define D_SUBN(m, sp) ((sp) != FMT_E8M0 && (m) > 0)
// (1 + top_m 2^-m) 2^emax, as the integer (2^m + top_m) < 2^53 times a power of two: exact.
#define D_MAX(e, m, b, sp, sg) \
    ((double)((1ULL << (m)) + D_TOP_M(e, m, sp, sg)) * POW2(D_EMAX(e, m, b, sp, sg) - (m)))
#define D_MIN_NORMAL(b, sp) POW2(D_EMIN(b, sp))
#define D_MIN_SUB(m, b, sp) POW2(D_EMIN(b, sp) - (D_SUBN(m, sp) ? (m) : 0))

#define FMT_ROW(nm, nbits, e, m, b, sg, sp)                                                          \
    {.name = nm, .bits = nbits, .ebits = e, .mbits = m, .bias = b, .is_signed = sg, .special = sp,  \
     .emin = D_EMIN(b, sp), .emax = D_EMAX(e, m, b, sp, sg), .max = D_MAX(e, m, b, sp, sg),           \
     .min_normal = D_MIN_NORMAL(b, sp), .min_subnormal = D_MIN_SUB(m, b, sp),                         \
     .has_inf = (sp) == FMT_IEEE || (sp) == FMT_EXTENDED, .has_nan = (sp) != FMT_FINITE, .has_zero = (sp) != FMT_E8M0,         \
     .has_negzero = (sg) && (sp) != FMT_FNUZ && (sp) != FMT_EXTENDED, .has_subnormals = D_SUBN(m, sp)}

// --- the table: (name, bits, e, m, bias, signed, special) and the names people already use.
// A constant the compiler builds (test_format checks every row against fmt_make): it is never
// written, so threads may look formats up concurrently from the first call on.
typedef struct {
    fmt_t f;
    const char *aliases[8];
} table_row;

static const table_row table[] = {
    {FMT_ROW("fp64", 64, 11, 52, 1023, true, FMT_IEEE), {"float64", "double", "binary64", NULL}},
    {FMT_ROW("fp32", 32, 8, 23, 127, true, FMT_IEEE), {"float32", "float", "single", "binary32", NULL}},
    {FMT_ROW("tf32", 19, 8, 10, 127, true, FMT_IEEE), {"tensorfloat32", NULL}},
    {FMT_ROW("fp16", 16, 5, 10, 15, true, FMT_IEEE), {"float16", "half", "binary16", NULL}},
    {FMT_ROW("bf16", 16, 8, 7, 127, true, FMT_IEEE), {"bfloat16", NULL}},
    {FMT_ROW("e4m3", 8, 4, 3, 7, true, FMT_FN), {"float8_e4m3fn", "fp8_e4m3", "e4m3fn", NULL}},
    {FMT_ROW("e5m2", 8, 5, 2, 15, true, FMT_IEEE), {"float8_e5m2", "fp8_e5m2", NULL}},
    {FMT_ROW("e4m3fnuz", 8, 4, 3, 8, true, FMT_FNUZ), {"float8_e4m3fnuz", "fp8_e4m3fnuz", NULL}},
    {FMT_ROW("e5m2fnuz", 8, 5, 2, 16, true, FMT_FNUZ), {"float8_e5m2fnuz", "fp8_e5m2fnuz", NULL}},
    {FMT_ROW("e8m0", 8, 8, 0, 127, false, FMT_E8M0), {"float8_e8m0fnu", "e8m0fnu", "ue8m0", NULL}},
    {FMT_ROW("e3m2", 6, 3, 2, 3, true, FMT_FINITE), {"float6_e3m2fn", "fp6_e3m2", NULL}},
    {FMT_ROW("e2m3", 6, 2, 3, 1, true, FMT_FINITE), {"float6_e2m3fn", "fp6_e2m3", NULL}},
    {FMT_ROW("e2m1", 4, 2, 1, 1, true, FMT_FINITE), {"float4_e2m1fn", "fp4_e2m1", "fp4", "float4_e2m1fn_x2", NULL}},
};
enum { TABLE_N = sizeof table / sizeof table[0] };

size_t fmt_table_count(void) { return TABLE_N; }
const fmt_t *fmt_table_get(size_t i) { return i < TABLE_N ? &table[i].f : NULL; }
const char *const *fmt_table_aliases(size_t i) { return i < TABLE_N ? table[i].aliases : NULL; }

// --- derivation at run time (custom formats)

// The fields and what derives from them without doubles (every descriptor, wide ones included).
static void set_fields(fmt_t *f, int bits, int e, int m, int b, bool sg, fmt_special sp) {
    f->bits = bits, f->ebits = e, f->mbits = m, f->bias = b;
    f->is_signed = sg, f->special = sp;
    f->emin = D_EMIN(b, sp);
    f->emax = D_EMAX(e, m, b, sp, sg);
    f->has_inf = sp == FMT_IEEE || sp == FMT_EXTENDED;
    f->has_nan = sp != FMT_FINITE;
    f->has_zero = sp != FMT_E8M0;
    f->has_negzero = sg && sp != FMT_FNUZ && sp != FMT_EXTENDED;
    f->has_subnormals = D_SUBN(m, sp);
}

int fmt_make(fmt_t *f, const char *name, int bits, int ebits, int mbits, int bias, bool is_signed,
             fmt_special special) {
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name ? name : "custom");
    if (ebits < 1 || ebits > 11 || mbits < 0 || mbits > 52) return FMT_EINVAL;
    if (bits != (is_signed ? 1 : 0) + ebits + mbits) return FMT_EINVAL;
    if ((unsigned)special > FMT_EXTENDED) return FMT_EINVAL;
    if (special == FMT_IEEE && mbits < 1) return FMT_EINVAL;    // inf and NaN need two codes
    if (special == FMT_FNUZ && !is_signed) return FMT_EINVAL;   // its NaN is the -0 code
    if (special == FMT_E8M0 && is_signed) return FMT_EINVAL;
    if (bias < -(1 << 20) || bias > (1 << 20)) return FMT_EINVAL;  // far outside fp64 anyway
    const int e = ebits, m = mbits, b = bias;
    const fmt_special sp = special;
    const bool sg = is_signed;
    if ((1ULL << (e + m)) <= D_TOP_TAKEN(m, sp, sg) + 1) return FMT_EINVAL;  // no finite codes
    if (D_TOP_E(e, m, sp, sg) == 0 && sp != FMT_E8M0) return FMT_EINVAL;  // no normal values at all
    // Must embed in fp64 (which also keeps POW2 in its range).
    if (D_EMAX(e, m, b, sp, sg) > 1023 || D_EMIN(b, sp) - m < -1074) return FMT_EINVAL;
    set_fields(f, bits, e, m, b, sg, sp);
    f->max = D_MAX(e, m, b, sp, sg);
    f->min_normal = D_MIN_NORMAL(b, sp);
    f->min_subnormal = D_MIN_SUB(m, b, sp);
    return FMT_OK;
}

// "eXmY[:flag...]": a custom format built with the same type as the table rows.
static int parse_custom(fmt_t *out, const char *name) {
    // The name is kept in the descriptor; one that does not fit could not be read back.
    if (strlen(name) >= sizeof out->name) return FMT_EINVAL;
    const char *p = name;
    bool is_signed = true;
    if (*p == 'u' && p[1] == 'e') is_signed = false, p++;
    if (*p != 'e' || !isdigit((unsigned char)p[1])) return FMT_EUNKNOWN;
    char *end;
    long e = strtol(p + 1, &end, 10);
    if (*end != 'm' || !isdigit((unsigned char)end[1])) return FMT_EUNKNOWN;
    long m = strtol(end + 1, &end, 10);
    if (e < 1 || e > 11 || m < 0 || m > 52) return FMT_EINVAL;
    fmt_special special = FMT_IEEE;
    long bias = (1L << (e - 1)) - 1;
    bool bias_set = false;
    // Suffix spelled the OCP/ml_dtypes way (e4m3fn, e5m2fnuz) right after the digits, or as
    // ":flag" items; anything else (e8m0e8m0) is not a name.
    for (bool first = true; *end; first = false) {
        const bool colon = *end == ':';
        if (colon) end++;
        size_t len = strcspn(end, ":");
        if (!colon && !(first && ((len == 2 && !strncmp(end, "fn", 2)) || (len == 4 && !strncmp(end, "fnuz", 4)))))
            return FMT_EUNKNOWN;
        if (len == 2 && !strncmp(end, "fn", 2)) special = FMT_FN;
        else if (len == 4 && !strncmp(end, "fnuz", 4)) special = FMT_FNUZ;
        else if (len == 4 && !strncmp(end, "ieee", 4)) special = FMT_IEEE;
        else if (len == 6 && !strncmp(end, "finite", 6)) special = FMT_FINITE;
        else if (len == 4 && !strncmp(end, "e8m0", 4)) special = FMT_E8M0;
        else if (len == 8 && !strncmp(end, "unsigned", 8)) is_signed = false;
        else if (len > 5 && !strncmp(end, "bias=", 5)) {
            char *bend;
            bias = strtol(end + 5, &bend, 10);
            if (bend != end + len || bias < -(1L << 20) || bias > (1L << 20)) return FMT_EINVAL;
            bias_set = true;
        } else return FMT_EUNKNOWN;
        end += len;
    }
    // fnuz moves the bias up by one so that the range matches the formats that use it.
    if (special == FMT_FNUZ && !bias_set) bias += 1;
    if (special == FMT_E8M0) is_signed = false;
    return fmt_make(out, name, (is_signed ? 1 : 0) + (int)e + (int)m, (int)e, (int)m, (int)bias,
                    is_signed, special);
}

// --- names of other libraries

// Formats that peers name but the table has no row for: the peer's name (kept as the
// descriptor's name, so that it reads back) and the custom spec that builds it.
static const struct {
    const char *name, *spec, *peer;
} peer_formats[] = {
    {"float8_e4m3", "e4m3:ieee", "ml_dtypes (IEEE-style e4m3: inf and NaNs, max 240)"},
    {"float8_e3m4", "e3m4", "ml_dtypes (IEEE-style e3m4)"},
    {"float8_e4m3b11fnuz", "e4m3:fnuz:bias=11", "ml_dtypes (e4m3fnuz with bias 11, TPU)"},
};
enum { PEER_N = sizeof peer_formats / sizeof peer_formats[0] };

// Names that mean more than one format: refused, with the choices.
static const struct {
    const char *name, *choices;
} ambiguous[] = {
    {"fp8", "e4m3 (float8_e4m3fn, OCP E4M3) or e5m2 (float8_e5m2, OCP E5M2)"},
    {"float8", "e4m3 (float8_e4m3fn, OCP E4M3) or e5m2 (float8_e5m2, OCP E5M2)"},
    {"fp6", "e3m2 (float6_e3m2fn) or e2m3 (float6_e2m3fn)"},
    {"float6", "e3m2 (float6_e3m2fn) or e2m3 (float6_e2m3fn)"},
};
enum { AMBIGUOUS_N = sizeof ambiguous / sizeof ambiguous[0] };

// Module prefixes people paste with a dtype's name (torch.float8_e4m3fn, jnp.bfloat16).
static const char *const module_prefixes[] = {"torch.", "jax.numpy.", "jnp.", "ml_dtypes.", "numpy.", "np."};

static const char *strip_module(const char *name) {
    for (size_t i = 0; i < sizeof module_prefixes / sizeof *module_prefixes; i++) {
        const size_t n = strlen(module_prefixes[i]);
        if (!strncasecmp(name, module_prefixes[i], n) && name[n]) return name + n;
    }
    return name;
}

// PyTorch's dtypes that name a format of the table. After "torch." only these are read: the
// bare name may be another library's format (torch has no float8_e4m3; ml_dtypes' is IEEE-style),
// so a mistyped torch dtype must not become it. Ordered so that a near miss suggests the OCP
// formats first.
static const char *const torch_dtypes[] = {"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                           "float8_e8m0fnu", "float4_e2m1fn_x2", "bfloat16", "float16", "half",
                                           "float32", "float", "float64", "double"};
enum { TORCH_N = sizeof torch_dtypes / sizeof *torch_dtypes };

// True where name is "torch." followed by a name that is not one of torch_dtypes.
static bool torch_unknown(const char *name) {
    if (strncasecmp(name, "torch.", 6) || !name[6]) return false;
    for (size_t i = 0; i < TORCH_N; i++)
        if (!strcasecmp(name + 6, torch_dtypes[i])) return false;
    return true;
}

size_t fmt_peer_count(void) { return PEER_N; }

const char *fmt_peer_get(size_t i, const char **spec, const char **peer) {
    if (i >= PEER_N) return NULL;
    if (spec) *spec = peer_formats[i].spec;
    if (peer) *peer = peer_formats[i].peer;
    return peer_formats[i].name;
}

// --- IEEE P3109 (draft v3.2 / interim report): binaryKpP{s|u}{e|f}, K bits, precision P, signed
// or unsigned, extended (with infinities) or finite. One zero, one NaN: 0x80 (the -0 code) in
// the signed formats, the all-ones code in the unsigned ones. Exponent bits w = K - P (signed)
// or K - P + 1 (unsigned), bias 2^(w-1), subnormals. The finite ones are descriptors fplab
// already has: signed = fnuz, unsigned = fn (only all-ones is NaN) without a sign bit; the
// extended ones put +-inf on the largest codes (FMT_EXTENDED). Returns FMT_EUNKNOWN where name
// is not of that shape, FMT_EINVAL where K, P are outside the draft or beyond float64 (*wide).
// A descriptor whose exponent range is wider than float64's (only P3109 names give one): the
// fields, emin, emax and the flags from the same expressions as fmt_make; the double fields,
// which could not hold its values, are 0 (fmt_is_wide says so; see format.h).
static void make_wide(fmt_t *f, const char *name, int bits, int e, int m, int b, bool sg, fmt_special sp) {
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    set_fields(f, bits, e, m, b, sg, sp);
}

static int parse_p3109(fmt_t *out, const char *name, bool *wide) {
    *wide = false;
    if (strncasecmp(name, "binary", 6) || !isdigit((unsigned char)name[6])) return FMT_EUNKNOWN;
    char *end;
    const long K = strtol(name + 6, &end, 10);
    if (tolower((unsigned char)*end) != 'p' || !isdigit((unsigned char)end[1])) return FMT_EUNKNOWN;
    const long P = strtol(end + 1, &end, 10);
    const char sg = (char)tolower((unsigned char)end[0]), dm = sg ? (char)tolower((unsigned char)end[1]) : 0;
    if ((sg != 's' && sg != 'u') || (dm != 'e' && dm != 'f') || end[2]) return FMT_EUNKNOWN;
    const bool is_signed = sg == 's';
    if (K < 3 || K > 16 || P < 1 || P > (is_signed ? K - 1 : K)) return FMT_EINVAL;
    const int w = (int)(K - P) + (is_signed ? 0 : 1), m = (int)P - 1;
    char canon[40];
    snprintf(canon, sizeof canon, "binary%ldp%ld%c%c", K, P, sg, dm);
    const fmt_special sp = dm == 'e' ? FMT_EXTENDED : is_signed ? FMT_FNUZ : FMT_FN;
    if (w > 11) {  // binary16p1, p2, ...: beyond float64's range, a wide descriptor
        make_wide(out, canon, (int)K, w, m, 1 << (w - 1), is_signed, sp);
        return *wide = true, FMT_EINVAL;
    }
    return fmt_make(out, canon, (int)K, w, m, 1 << (w - 1), is_signed, sp);
}

int fmt_from_name_wide(fmt_t *out, const char *name) {
    bool wide;
    if (name && !torch_unknown(name) && parse_p3109(out, strip_module(name), &wide) == FMT_EINVAL && wide)
        return FMT_OK;
    return fmt_from_name(out, name);
}

bool fmt_is_wide(const fmt_t *f) { return f->ebits > 11; }

uint64_t fmt_max_code(const fmt_t *f) { return D_TOP_CODE(f->ebits, f->mbits, f->special, f->is_signed); }

int fmt_from_name(fmt_t *out, const char *name) {
    if (!name || !*name || torch_unknown(name)) return FMT_EUNKNOWN;
    name = strip_module(name);
    bool wide;
    const int pst = parse_p3109(out, name, &wide);
    if (pst != FMT_EUNKNOWN) return pst;
    for (size_t i = 0; i < TABLE_N; i++) {
        if (!strcasecmp(name, table[i].f.name)) return *out = table[i].f, FMT_OK;
        for (const char *const *a = table[i].aliases; *a; a++)
            if (!strcasecmp(name, *a)) return *out = table[i].f, FMT_OK;
    }
    for (size_t i = 0; i < PEER_N; i++) {
        if (strcasecmp(name, peer_formats[i].name)) continue;
        const int st = parse_custom(out, peer_formats[i].spec);
        if (st == FMT_OK) snprintf(out->name, sizeof out->name, "%s", peer_formats[i].name);
        return st;
    }
    for (size_t i = 0; i < AMBIGUOUS_N; i++)
        if (!strcasecmp(name, ambiguous[i].name)) return FMT_EUNKNOWN;
    return parse_custom(out, name);
}

bool fmt_same_layout(const fmt_t *a, const fmt_t *b) {
    return a->bits == b->bits && a->ebits == b->ebits && a->mbits == b->mbits && a->bias == b->bias &&
           a->is_signed == b->is_signed && a->special == b->special;
}

const char *fmt_kind(const fmt_t *f) {
    for (size_t i = 0; i < TABLE_N; i++)
        if (fmt_same_layout(f, &table[i].f)) return "table";
    for (size_t i = 0; i < PEER_N; i++) {
        fmt_t p;
        if (parse_custom(&p, peer_formats[i].spec) == FMT_OK && fmt_same_layout(f, &p)) return "peer";
    }
    fmt_t p;
    bool wide;
    const int st = parse_p3109(&p, f->name, &wide);
    if ((st == FMT_OK || wide) && fmt_same_layout(f, &p)) return "p3109";
    return "custom";
}

// The known names nearest to name (names.h's rule): table names and aliases, peers' names, and
// every IEEE P3109 name binaryKpP{s|u}{e|f} (binary8p3s -> binary8p3se or binary8p3sf).
static void suggest_format(fmt_suggest *s, const char *name) {
    fmt_suggest_init(s, name);
    for (size_t i = 0; i < TABLE_N; i++) {
        fmt_suggest_try(s, table[i].f.name);
        for (const char *const *a = table[i].aliases; *a; a++) fmt_suggest_try(s, *a);
    }
    for (size_t i = 0; i < PEER_N; i++) fmt_suggest_try(s, peer_formats[i].name);
    for (int K = 3; K <= 16; K++)
        for (int sg = 1; sg >= 0; sg--)
            for (int P = 1; P <= (sg ? K - 1 : K); P++)
                for (int dm = 0; dm < 2; dm++) {
                    char n[24];
                    snprintf(n, sizeof n, "binary%dp%d%c%c", K, P, sg ? 's' : 'u', dm ? 'f' : 'e');
                    fmt_suggest_try(s, n);
                }
}

void fmt_name_message(const char *name, int status, char *msg, size_t len) {
    if (!msg || !len) return;
    const char *bare = name ? strip_module(name) : "";
    for (size_t i = 0; i < AMBIGUOUS_N; i++)
        if (!strcasecmp(bare, ambiguous[i].name)) {
            snprintf(msg, len, "ambiguous: it names %s; say which", ambiguous[i].choices);
            return;
        }
    if (name && torch_unknown(name)) {
        fmt_suggest sg;
        fmt_suggest_init(&sg, name);
        for (size_t i = 0; i < TORCH_N; i++) {
            char t[FMT_SUGGEST_LEN];
            snprintf(t, sizeof t, "torch.%s", torch_dtypes[i]);
            fmt_suggest_try(&sg, t);
        }
        size_t k = (size_t)snprintf(msg, len, "not a torch dtype that fplab maps; ");
        if (k < len) k += (size_t)fmt_suggest_text(&sg, msg + k, len - k);
        if (k < len) k += (size_t)snprintf(msg + k, len - k, "torch dtypes fplab maps:");
        for (size_t i = 0; i < TORCH_N && k < len; i++)
            k += (size_t)snprintf(msg + k, len - k, " torch.%s", torch_dtypes[i]);
        if (k < len) snprintf(msg + k, len - k, " (other formats by their fplab name, without 'torch.')");
        return;
    }
    bool wide;
    fmt_t tmp;
    if (parse_p3109(&tmp, bare, &wide) == FMT_EINVAL) {
        snprintf(msg, len, "%s", wide ? "an IEEE P3109 format whose exponent range is wider than float64's "
                 "(more than 11 exponent bits: K - P > 11 signed, K - P + 1 > 11 unsigned): 'fplab finfo', 'values' "
                 "and 'cast' take it (its values as exact hexadecimal floats); arrays, matrix products and "
                 "policies compute in float32/float64 and do not"
                 : "an IEEE P3109 name outside the draft: expected binaryKpP{s|u}{e|f} with 3 <= K <= 16 and "
                 "1 <= P <= K-1 (signed) or K (unsigned)");
        return;
    }
    if (status == FMT_EINVAL) {
        snprintf(msg, len, "not a valid format (check sizes and flags: eXmY needs 1 <= X <= 11, Y <= 52, "
                 "and a range inside float64)");
        return;
    }
    fmt_suggest sg;
    suggest_format(&sg, bare);
    char near[3 * FMT_SUGGEST_LEN + 40];
    fmt_suggest_text(&sg, near, sizeof near);
    size_t k = (size_t)snprintf(msg, len, "unknown format; %s", near);
    if (k >= len) return;
    k += (size_t)snprintf(msg + k, len - k, "known formats:");
    for (size_t i = 0; i < TABLE_N && k < len; i++)
        k += (size_t)snprintf(msg + k, len - k, " %s", table[i].f.name);
    for (size_t i = 0; i < PEER_N && k < len; i++)
        k += (size_t)snprintf(msg + k, len - k, " %s", peer_formats[i].name);
    if (k < len)
        snprintf(msg + k, len - k, " (aliases: 'fplab finfo --aliases'), IEEE P3109's binaryKpP{s|u}{e|f} "
                 "(binary8p3se, ...), or a custom eXmY[:ieee|fn|fnuz|finite|e8m0][:unsigned][:bias=N]");
}

// --- finfo

static uint64_t pow2u(int k) { return k >= 64 ? 0 : (uint64_t)1 << k; }

size_t fmt_nan_codes(const fmt_t *f, uint64_t *codes, size_t cap) {
    const uint64_t mant_n = pow2u(f->mbits);
    const uint64_t top = (((uint64_t)1 << f->ebits) - 1) << f->mbits;  // all-ones exponent field
    const uint64_t sign = f->is_signed ? (uint64_t)1 << (f->bits - 1) : 0;
    size_t n = 0;
#define PUSH(c) do { if (n < cap) codes[n] = (c); n++; } while (0)
    switch (f->special) {
    case FMT_IEEE:
        for (int s = 0; s < (f->is_signed ? 2 : 1); s++)
            for (uint64_t m = 1; m < mant_n && n < cap + 1; m++) PUSH((s ? sign : 0) | top | m);
        n = (f->is_signed ? 2 : 1) * (size_t)(mant_n - 1);  // the list may be capped, the count not
        break;
    case FMT_FN:
        PUSH(top | (mant_n - 1));
        if (f->is_signed) PUSH(sign | top | (mant_n - 1));
        break;
    case FMT_FNUZ: PUSH(sign); break;
    case FMT_E8M0: PUSH(top | (mant_n - 1)); break;
    case FMT_EXTENDED: PUSH(f->is_signed ? sign : top | (mant_n - 1)); break;
    case FMT_FINITE: break;
    }
#undef PUSH
    return n;
}

void fmt_get_info(const fmt_t *f, fmt_info *o) {
    // A wide format's extremes are not doubles: NaN here (fmt_code_exact gives them).
    const double nan_if_wide = fmt_is_wide(f) ? NAN : 1;
    o->max = f->max * nan_if_wide;
    // The smallest finite value: -max, or 0 in an unsigned format with a zero (e8m0 has none).
    o->min = (f->is_signed ? -f->max : f->has_zero ? 0 : f->min_subnormal) * nan_if_wide;
    o->smallest_normal = f->min_normal * nan_if_wide;
    o->smallest_subnormal = f->min_subnormal * nan_if_wide;
    o->eps = ldexp(1.0, -f->mbits);
    o->resolution = pow(10.0, -floor(-log10(o->eps)));
    o->nan_codes = fmt_nan_codes(f, NULL, 0);
    // Codes minus NaN and inf codes; then +0/-0 are one value.
    uint64_t codes = f->bits >= 64 ? 0 : pow2u(f->bits);  // 2^64 wraps to 0; arithmetic mod 2^64
    uint64_t nonfinite = o->nan_codes + (f->has_inf ? (f->is_signed ? 2 : 1) : 0);
    o->finite_values = codes - nonfinite - (f->has_negzero ? 1 : 0);
    // The largest value below 1: in the binade [1/2, 1) when it is normal, else on the
    // subnormal grid (or 0 without subnormals); a format whose max is below 1 has max.
    double below;
    if (f->emax < 0) below = f->max;  // max < 1
    else if (f->emin <= -1) below = 1 - ldexp(1.0, -1 - f->mbits);
    else if (f->has_subnormals && f->emin - f->mbits <= 0) below = 1 - ldexp(1.0, f->emin - f->mbits);
    else below = 0;
    o->epsneg = 1 - below;
    o->maxexp = f->emax + 1, o->minexp = f->emin;
    o->precision = (int)floor(-log10(o->eps));
}

bool fmt_contains_f32(const fmt_t *f) {
    return f->mbits >= 23 && f->emax >= 127 && f->emin - f->mbits <= -149 && f->emin <= -126 &&
           f->has_inf && f->has_nan && f->has_negzero;
}

bool fmt_embeds_in_f32(const fmt_t *f) {
    return f->mbits <= 23 && f->emax <= 127 && f->emin - (f->has_subnormals ? f->mbits : 0) >= -149 &&
           f->emin >= -127;
}

double fmt_ulp(const fmt_t *f, double x) {
    int e = f->emin;
    if (x != 0 && isfinite(x)) {
        const int ex = ilogb(x);  // floor(log2|x|), subnormal doubles included
        if (ex > e) e = ex;
    }
    return ldexp(1.0, e - f->mbits);
}
