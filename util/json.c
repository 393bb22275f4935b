// json.c: the minimal JSON pull reader and writer helpers of json.h (fplab's own logs and
// ablate.json only; see the header for what is and is not accepted).
#include "util/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void jx_init(jx_cur *c, const char *text) {
    c->s = c->p = text;
    c->err[0] = 0;
}

static void fail(jx_cur *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(jx_cur *c, const char *fmt, ...) {
    if (c->err[0]) return;
    int k = snprintf(c->err, sizeof c->err, "column %d: ", (int)(c->p - c->s) + 1);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + k, sizeof c->err - (size_t)k, fmt, ap);
    va_end(ap);
}

static void ws(jx_cur *c) {
    while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r') c->p++;
}

// What the reader found, for messages: "'x'" or "the end of the line".
static const char *found(const jx_cur *c, char *buf, size_t cap) {
    if (!*c->p) return "the end of the line";
    snprintf(buf, cap, "'%c'", *c->p);
    return buf;
}

char jx_peek(jx_cur *c) {
    ws(c);
    return jx_ok(c) ? *c->p : 0;
}

bool jx_open(jx_cur *c, char opener) {
    if (!jx_ok(c)) return false;
    ws(c);
    char b[8];
    if (*c->p != opener) {
        fail(c, "expected '%c', found %s", opener, found(c, b, sizeof b));
        return false;
    }
    c->p++;
    ws(c);
    const char closer = opener == '{' ? '}' : ']';
    if (*c->p == closer) {
        c->p++;
        return false;
    }
    return true;
}

bool jx_more(jx_cur *c, char closer) {
    if (!jx_ok(c)) return false;
    ws(c);
    if (*c->p == ',') {
        c->p++;
        return true;
    }
    if (*c->p == closer) {
        c->p++;
        return false;
    }
    char b[8];
    fail(c, "expected ',' or '%c', found %s", closer, found(c, b, sizeof b));
    return false;
}

static int hexval(char h) {
    return h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
}

// Appends code point u as UTF-8 (lone surrogates are kept as their 3-byte encoding).
static size_t put_utf8(char *o, uint32_t u) {
    if (u < 0x80) return o[0] = (char)u, 1;
    if (u < 0x800) return o[0] = (char)(0xC0 | u >> 6), o[1] = (char)(0x80 | (u & 63)), 2;
    if (u < 0x10000)
        return o[0] = (char)(0xE0 | u >> 12), o[1] = (char)(0x80 | ((u >> 6) & 63)), o[2] = (char)(0x80 | (u & 63)), 3;
    o[0] = (char)(0xF0 | u >> 18), o[1] = (char)(0x80 | ((u >> 12) & 63));
    o[2] = (char)(0x80 | ((u >> 6) & 63)), o[3] = (char)(0x80 | (u & 63));
    return 4;
}

bool jx_str(jx_cur *c, char *buf, size_t cap) {
    if (cap) buf[0] = 0;
    if (!jx_ok(c)) return false;
    ws(c);
    char b[8];
    if (*c->p != '"') {
        fail(c, "expected a string, found %s", found(c, b, sizeof b));
        return false;
    }
    c->p++;
    size_t n = 0;
    for (;;) {
        char ch = *c->p, tmp[4];
        size_t k = 1;
        if (!ch || ch == '\n') {
            fail(c, "unterminated string");
            return false;
        }
        c->p++;
        if (ch == '"') break;
        tmp[0] = ch;
        if (ch == '\\') {
            const char e = *c->p++;
            switch (e) {
            case '"': case '\\': case '/': tmp[0] = e; break;
            case 'b': tmp[0] = '\b'; break;
            case 'f': tmp[0] = '\f'; break;
            case 'n': tmp[0] = '\n'; break;
            case 'r': tmp[0] = '\r'; break;
            case 't': tmp[0] = '\t'; break;
            case 'u': {
                uint32_t u = 0;
                for (int i = 0; i < 4; i++) {
                    const int h = hexval(c->p[i]);
                    if (h < 0) {
                        fail(c, "bad \\u escape");
                        return false;
                    }
                    u = u << 4 | (uint32_t)h;
                }
                c->p += 4;
                if (u >= 0xD800 && u < 0xDC00 && c->p[0] == '\\' && c->p[1] == 'u') {  // surrogate pair
                    uint32_t lo = 0;
                    bool good = true;
                    for (int i = 0; i < 4 && good; i++) {
                        const int h = hexval(c->p[2 + i]);
                        good = h >= 0, lo = lo << 4 | (uint32_t)(h < 0 ? 0 : h);
                    }
                    if (good && lo >= 0xDC00 && lo < 0xE000) {
                        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                        c->p += 6;
                    }
                }
                k = put_utf8(tmp, u);
                break;
            }
            default:
                c->p--;
                fail(c, "bad escape '\\%c' in a string", e ? e : '0');
                return false;
            }
        }
        for (size_t i = 0; i < k; i++)
            if (n + 1 < cap) buf[n++] = tmp[i];
    }
    if (cap) buf[n] = 0;
    return true;
}

bool jx_key(jx_cur *c, char *key, size_t cap) {
    if (!jx_str(c, key, cap)) return false;
    ws(c);
    char b[8];
    if (*c->p != ':') {
        fail(c, "expected ':' after the member name \"%.40s\", found %s", key, found(c, b, sizeof b));
        return false;
    }
    c->p++;
    return true;
}

// The bare words some writers use for non-finite numbers: Python's json (NaN, Infinity) and
// C's printf("%g") (nan, -nan, inf, -inf).
static bool bare_word(jx_cur *c, double *v) {
    static const struct {
        const char *w;
        double v;
    } words[] = {{"NaN", NAN}, {"nan", NAN}, {"-NaN", NAN}, {"-nan", NAN}, {"-Infinity", -INFINITY},
                 {"Infinity", INFINITY}, {"-inf", -INFINITY}, {"inf", INFINITY}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        const size_t n = strlen(words[i].w);
        if (!strncmp(c->p, words[i].w, n)) {
            c->p += n;
            *v = words[i].v;
            return true;
        }
    }
    return false;
}

double jx_num(jx_cur *c) {
    if (!jx_ok(c)) return NAN;
    ws(c);
    double v;
    if (*c->p == '"') {
        char s[16];
        const char *at = c->p;
        if (!jx_str(c, s, sizeof s)) return NAN;
        if (!strcmp(s, "nan") || !strcmp(s, "NaN")) return NAN;
        if (!strcmp(s, "inf") || !strcmp(s, "Infinity")) return INFINITY;
        if (!strcmp(s, "-inf") || !strcmp(s, "-Infinity")) return -INFINITY;
        c->p = at;
        fail(c, "expected a number or \"nan\", \"inf\", \"-inf\", found the string \"%s\"", s);
        return NAN;
    }
    if (bare_word(c, &v)) return v;
    // JSON's grammar: -?digits[.digits][e[+-]digits]; strtod alone would take hex and "infinity".
    const char *q = c->p;
    if (*q == '-') q++;
    char b[8];
    if (*q < '0' || *q > '9') {
        fail(c, "expected a number, found %s", found(c, b, sizeof b));
        return NAN;
    }
    while (*q >= '0' && *q <= '9') q++;
    if (*q == '.') {
        q++;
        while (*q >= '0' && *q <= '9') q++;
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-') q++;
        while (*q >= '0' && *q <= '9') q++;
    }
    char tmp[64];
    const size_t len = (size_t)(q - c->p);
    if (len >= sizeof tmp) {
        fail(c, "number too long");
        return NAN;
    }
    memcpy(tmp, c->p, len);
    tmp[len] = 0;
    char *end;
    v = strtod(tmp, &end);
    if (*end) {
        fail(c, "malformed number '%s'", tmp);
        return NAN;
    }
    c->p = q;
    return v;
}

bool jx_u64(jx_cur *c, uint64_t *out) {
    *out = 0;
    if (!jx_ok(c)) return false;
    ws(c);
    char b[8];
    if (*c->p < '0' || *c->p > '9') {
        fail(c, "expected a non-negative integer, found %s", found(c, b, sizeof b));
        return false;
    }
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(c->p, &end, 10);
    if (errno || *end == '.' || *end == 'e' || *end == 'E') {
        fail(c, "expected an integer below 2^64");
        return false;
    }
    c->p = end;
    *out = (uint64_t)v;
    return true;
}

// depth bounds the recursion: fplab's documents nest three levels; 64 is plenty.
static void skip_d(jx_cur *c, int depth) {
    if (!jx_ok(c)) return;
    const char ch = jx_peek(c);
    if ((ch == '{' || ch == '[') && depth >= 64) {
        fail(c, "nested deeper than 64 levels");
    } else if (ch == '{') {
        if (jx_open(c, '{')) do {
                char k[8];
                jx_key(c, k, sizeof k);
                skip_d(c, depth + 1);
            } while (jx_more(c, '}'));
    } else if (ch == '[') {
        if (jx_open(c, '[')) do skip_d(c, depth + 1);
            while (jx_more(c, ']'));
    } else if (ch == '"') {
        char s[1];
        jx_str(c, s, sizeof s);
    } else if (!strncmp(c->p, "true", 4) || !strncmp(c->p, "null", 4)) {
        c->p += 4;
    } else if (!strncmp(c->p, "false", 5)) {
        c->p += 5;
    } else {
        jx_num(c);
    }
}

void jx_skip(jx_cur *c) { skip_d(c, 0); }

bool jx_end(jx_cur *c) {
    if (!jx_ok(c)) return false;
    ws(c);
    char b[8];
    if (*c->p) {
        fail(c, "unexpected %s after the value", found(c, b, sizeof b));
        return false;
    }
    return true;
}

// --- writing

void jx_write_num(FILE *f, double v, int digits) {
    if (isnan(v)) fputs("\"nan\"", f);
    else if (isinf(v)) fputs(v > 0 ? "\"inf\"" : "\"-inf\"", f);
    else fprintf(f, "%.*g", digits, v);
}

// The length of the valid UTF-8 sequence at p (2 to 4), or 0 (overlong forms, surrogates and
// code points above U+10FFFF are invalid, as RFC 3629 says).
static int utf8_len(const unsigned char *p) {
    const unsigned c = p[0];
    if (c >= 0xC2 && c <= 0xDF) return (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        const unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        const unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80 ? 4 : 0;
    }
    return 0;
}

void jx_write_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', f), fputc(*p, f);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p == '\r') fputs("\\r", f);
        else if (*p == '\b') fputs("\\b", f);
        else if (*p == '\f') fputs("\\f", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else if (*p < 0x80) fputc(*p, f);
        else {
            const int k = utf8_len(p);  // reads at most up to the NUL: a continuation byte is never 0
            if (k) fwrite(p, 1, (size_t)k, f), p += k - 1;
            else fputs("\\ufffd", f);
        }
    }
    fputc('"', f);
}
