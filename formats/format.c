// format.c: the format table, name lookup, custom eXmY parsing and derived properties.
// Every constant below is derived from the descriptor fields; the table holds only the fields.
#include "format.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fmt_strerror(int status) {
    switch (status) {
    case FMT_OK: return "ok";
    case FMT_EINVAL: return "invalid argument";
    case FMT_EUNKNOWN: return "unknown name";
    case FMT_ENOMEM: return "out of memory";
    default: return "unknown status";
    }
}

// --- the table: (name, bits, e, m, bias, signed, special) and the names people already use
typedef struct {
    const char *name;
    int bits, ebits, mbits, bias;
    bool is_signed;
    fmt_special special;
    const char *aliases[6];
} fmt_row;

static const fmt_row table_rows[] = {
    {"fp64", 64, 11, 52, 1023, true, FMT_IEEE, {"float64", "double", "binary64", NULL}},
    {"fp32", 32, 8, 23, 127, true, FMT_IEEE, {"float32", "float", "binary32", NULL}},
    {"tf32", 19, 8, 10, 127, true, FMT_IEEE, {"tensorfloat32", NULL}},
    {"fp16", 16, 5, 10, 15, true, FMT_IEEE, {"float16", "half", "binary16", NULL}},
    {"bf16", 16, 8, 7, 127, true, FMT_IEEE, {"bfloat16", NULL}},
    {"e4m3", 8, 4, 3, 7, true, FMT_FN, {"float8_e4m3fn", "fp8_e4m3", "e4m3fn", NULL}},
    {"e5m2", 8, 5, 2, 15, true, FMT_IEEE, {"float8_e5m2", "fp8_e5m2", NULL}},
    {"e4m3fnuz", 8, 4, 3, 8, true, FMT_FNUZ, {"float8_e4m3fnuz", "fp8_e4m3fnuz", NULL}},
    {"e5m2fnuz", 8, 5, 2, 16, true, FMT_FNUZ, {"float8_e5m2fnuz", "fp8_e5m2fnuz", NULL}},
    {"e8m0", 8, 8, 0, 127, false, FMT_E8M0, {"float8_e8m0fnu", "e8m0fnu", "ue8m0", NULL}},
    {"e3m2", 6, 3, 2, 3, true, FMT_FINITE, {"float6_e3m2fn", "fp6_e3m2", NULL}},
    {"e2m3", 6, 2, 3, 1, true, FMT_FINITE, {"float6_e2m3fn", "fp6_e2m3", NULL}},
    {"e2m1", 4, 2, 1, 1, true, FMT_FINITE, {"float4_e2m1fn", "fp4_e2m1", "fp4", NULL}},
};
enum { TABLE_N = sizeof table_rows / sizeof table_rows[0] };

static fmt_t table[TABLE_N];
static bool table_ready;

// The table is derived once; fmt_make on constant rows cannot fail (a test checks every row).
static void table_init(void) {
    if (table_ready) return;
    for (size_t i = 0; i < TABLE_N; i++) {
        const fmt_row *r = &table_rows[i];
        fmt_make(&table[i], r->name, r->bits, r->ebits, r->mbits, r->bias, r->is_signed, r->special);
    }
    table_ready = true;
}

size_t fmt_table_count(void) { return TABLE_N; }
const fmt_t *fmt_table_get(size_t i) {
    if (i >= TABLE_N) return NULL;
    table_init();
    return &table[i];
}
const char *const *fmt_table_aliases(size_t i) { return i < TABLE_N ? table_rows[i].aliases : NULL; }

// --- derivation

int fmt_make(fmt_t *f, const char *name, int bits, int ebits, int mbits, int bias, bool is_signed,
             fmt_special special) {
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name ? name : "custom");
    if (ebits < 1 || ebits > 11 || mbits < 0 || mbits > 52) return FMT_EINVAL;
    if (bits != (is_signed ? 1 : 0) + ebits + mbits) return FMT_EINVAL;
    if (special == FMT_IEEE && mbits < 1) return FMT_EINVAL;    // inf and NaN need two codes
    if (special == FMT_FNUZ && !is_signed) return FMT_EINVAL;   // its NaN is the -0 code
    if (special == FMT_E8M0 && is_signed) return FMT_EINVAL;
    f->bits = bits, f->ebits = ebits, f->mbits = mbits, f->bias = bias;
    f->is_signed = is_signed, f->special = special;

    const int etop = (1 << ebits) - 1;  // the all-ones exponent field
    f->has_inf = special == FMT_IEEE;
    f->has_nan = special != FMT_FINITE;
    f->has_zero = special != FMT_E8M0;
    f->has_negzero = is_signed && special != FMT_FNUZ;
    f->has_subnormals = special != FMT_E8M0 && mbits > 0;
    // Exponent field 0 is the subnormal binade except in e8m0 style, where it is a normal one.
    f->emin = special == FMT_E8M0 ? -bias : 1 - bias;

    // Largest finite (exponent field, mantissa field).
    int top_e = etop;
    double top_m = ldexp(1.0, mbits) - 1;  // all-ones mantissa
    switch (special) {
    case FMT_IEEE: top_e = etop - 1; break;
    case FMT_FN:
    case FMT_E8M0: top_m -= 1;  // the all-ones code is NaN
        if (top_m < 0) { top_e = etop - 1; top_m = ldexp(1.0, mbits) - 1; }
        break;
    case FMT_FNUZ:
    case FMT_FINITE: break;
    }
    if (top_e == 0 && special != FMT_E8M0) return FMT_EINVAL;  // no normal values at all
    f->emax = top_e - bias;
    f->max = ldexp(1.0 + ldexp(top_m, -mbits), f->emax);
    f->min_normal = ldexp(1.0, f->emin);
    f->min_subnormal = f->has_subnormals ? ldexp(1.0, f->emin - mbits) : f->min_normal;
    if (f->emax > 1023 || f->emin - mbits < -1074) return FMT_EINVAL;  // must embed in fp64
    return FMT_OK;
}

// "eXmY[:flag...]": a custom format built with the same type as the table rows.
static int parse_custom(fmt_t *out, const char *name) {
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
    // Suffix spelled the OCP/ml_dtypes way (e4m3fn, e5m2fnuz) or as ":flag" items.
    while (*end) {
        if (*end == ':') end++;
        size_t len = strcspn(end, ":");
        if (len == 2 && !strncmp(end, "fn", 2)) special = FMT_FN;
        else if (len == 4 && !strncmp(end, "fnuz", 4)) special = FMT_FNUZ;
        else if (len == 4 && !strncmp(end, "ieee", 4)) special = FMT_IEEE;
        else if (len == 6 && !strncmp(end, "finite", 6)) special = FMT_FINITE;
        else if (len == 4 && !strncmp(end, "e8m0", 4)) special = FMT_E8M0;
        else if (len == 8 && !strncmp(end, "unsigned", 8)) is_signed = false;
        else if (len > 5 && !strncmp(end, "bias=", 5)) {
            char *bend;
            bias = strtol(end + 5, &bend, 10);
            if (bend != end + len) return FMT_EINVAL;
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

int fmt_from_name(fmt_t *out, const char *name) {
    if (!name || !*name) return FMT_EUNKNOWN;
    table_init();
    for (size_t i = 0; i < TABLE_N; i++) {
        if (!strcasecmp(name, table_rows[i].name)) return *out = table[i], FMT_OK;
        for (const char *const *a = table_rows[i].aliases; *a; a++)
            if (!strcasecmp(name, *a)) return *out = table[i], FMT_OK;
    }
    return parse_custom(out, name);
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
    case FMT_FINITE: break;
    }
#undef PUSH
    return n;
}

void fmt_get_info(const fmt_t *f, fmt_info *o) {
    o->max = f->max;
    o->min = f->is_signed ? -f->max : f->min_subnormal;
    o->smallest_normal = f->min_normal;
    o->smallest_subnormal = f->min_subnormal;
    o->eps = ldexp(1.0, -f->mbits);
    o->resolution = pow(10.0, -floor(-log10(o->eps)));
    o->nan_codes = fmt_nan_codes(f, NULL, 0);
    // Codes minus NaN and inf codes; then +0/-0 are one value.
    uint64_t codes = f->bits >= 64 ? 0 : pow2u(f->bits);  // 2^64 wraps to 0; arithmetic mod 2^64
    uint64_t nonfinite = o->nan_codes + (f->has_inf ? (f->is_signed ? 2 : 1) : 0);
    o->finite_values = codes - nonfinite - (f->has_negzero ? 1 : 0);
}

bool fmt_contains_f32(const fmt_t *f) {
    return f->mbits >= 23 && f->emax >= 127 && f->emin - f->mbits <= -149 && f->emin <= -126 &&
           f->has_inf && f->has_nan && f->has_negzero;
}

bool fmt_embeds_in_f32(const fmt_t *f) {
    return f->mbits <= 23 && f->emax <= 127 && f->emin - (f->has_subnormals ? f->mbits : 0) >= -149 &&
           f->emin >= -127;
}
