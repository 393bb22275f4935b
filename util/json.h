// json.h: a minimal pull reader and the writers (numbers, strings) of the small JSON documents
// fplab itself writes: the training and evaluation logs (one object per line, read back by
// experiments/runlog.h), ablate.json, the commands' --format json output.
// Not a general JSON library: no tree, no allocation; the caller walks the text with a cursor
// and picks the members it knows, skipping the rest. Tolerant where fplab's own writers are:
// numbers may be the strings "nan", "inf", "-inf", or bare NaN/Infinity (Python's json) and
// nan/-nan/inf/-inf (C's printf %g).
// No JSON library is a dependency of fplab (checked: none in the Makefile's DEB_PKGS), and
// these fixed schemas do not justify one.
// Constraints: library level: errors are recorded in the cursor (first error wins, with its
// column), never printed, never fatal. util/: nothing of fplab's above it.
#ifndef FPLAB_UTIL_JSON_H
#define FPLAB_UTIL_JSON_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    const char *s;  // the text (NUL-terminated)
    const char *p;  // the read position
    char err[160];  // "" or the first error, "column N: ..."
} jx_cur;

void jx_init(jx_cur *c, const char *text);
static inline bool jx_ok(const jx_cur *c) { return c->err[0] == 0; }

// Containers. Walk an object as
//   if (jx_open(c, '{')) do { jx_key(c, key, sizeof key); ...value... } while (jx_more(c, '}'));
// jx_open consumes the opener and returns true when a first element follows, false when the
// container is empty (closer consumed) or on error. jx_more consumes ',' (true) or the closer
// (false); anything else is an error (false). The same with '[' and ']' for arrays.
bool jx_open(jx_cur *c, char opener);
bool jx_more(jx_cur *c, char closer);
// Reads a member name into key (truncated to cap - 1 bytes) and the ':' after it.
bool jx_key(jx_cur *c, char *key, size_t cap);

// Values. Each consumes one value; on a type mismatch it records an error and returns NaN,
// 0 or false.
double jx_num(jx_cur *c);                        // a number, or "nan" / "inf" / "-inf"
bool jx_u64(jx_cur *c, uint64_t *out);           // a non-negative integer (exact up to 2^64-1)
bool jx_str(jx_cur *c, char *buf, size_t cap);   // a string, escapes decoded, truncated to cap-1
void jx_skip(jx_cur *c);                         // any value (object, array, string, literal)
char jx_peek(jx_cur *c);                         // the next non-space character (0 at the end)
// True when only white space is left; records an error otherwise.
bool jx_end(jx_cur *c);

// --- writing
// A number with `digits` significant digits (%.*g: 17 reads back as the same double, 9 as the
// same float32), and the strings "nan", "inf", "-inf" for the values JSON has no literal for
// (the convention of fplab's logs, which jx_num reads back).
void jx_write_num(FILE *f, double v, int digits);
// s as a JSON string, quotes included: the one writer of strings for every JSON fplab writes
// (training and evaluation logs, ablate.json, --format json tables), so that text from a user
// (a policy's name, a path, a message) can never end the string or add members. '"' and '\'
// are escaped, control characters become \n, \t, \r, \b, \f or \u00XX, and a byte that does
// not start a valid UTF-8 sequence becomes \ufffd (the file stays valid UTF-8 for any reader).
void jx_write_str(FILE *f, const char *s);

#endif
