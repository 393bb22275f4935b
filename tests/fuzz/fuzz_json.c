// fuzz_json.c: libFuzzer harness for the JSON pull reader (util/json.c). Skips one value
// and checks the end; then reads a leading string or number and checks that the writer's
// spelling of it (jx_write_str, jx_write_num) reads back as the same string or number (a string
// that is not valid UTF-8 reads back as itself with U+FFFD for each invalid byte: only checked
// to read back).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "util/json.h"

static void round_trip_str(const char *s) {
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) abort();
    jx_write_str(f, s);
    fclose(f);
    jx_cur c;
    jx_init(&c, out);
    const size_t cap = 3 * strlen(s) + 1;  // each invalid byte reads back as U+FFFD's 3 bytes
    char *back = malloc(cap);
    if (!back) abort();
    FUZZ_CHECK(jx_str(&c, back, cap) && jx_end(&c), "'%s' written as %s does not read back: %s", s, out, c.err);
    FUZZ_CHECK(strstr(out, "\\ufffd") || !strcmp(back, s), "'%s' written as %s reads back as '%s'", s, out, back);
    free(back), free(out);
}

static void round_trip_num(double v) {
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) abort();
    jx_write_num(f, v, 17);
    fclose(f);
    jx_cur c;
    jx_init(&c, out);
    const double w = jx_num(&c);
    FUZZ_CHECK(jx_ok(&c) && jx_end(&c), "%.17g written as %s does not read back: %s", v, out, c.err);
    FUZZ_CHECK((isnan(v) && isnan(w)) || v == w, "%.17g written as %s reads back as %.17g", v, out, w);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    char *text = fuzz_cstr(d, n);
    jx_cur c;
    jx_init(&c, text);
    jx_skip(&c);
    jx_end(&c);
    FUZZ_CHECK(c.p >= c.s && c.p <= c.s + strlen(c.s), "the cursor left the text");
    jx_init(&c, text);
    const char first = jx_peek(&c);
    if (first == '"') {
        char buf[256];
        if (jx_str(&c, buf, sizeof buf) && strlen(buf) < sizeof buf - 1) round_trip_str(buf);
    } else {
        const double v = jx_num(&c);
        if (jx_ok(&c)) round_trip_num(v);
        jx_init(&c, text);
        uint64_t u;
        jx_u64(&c, &u);
    }
    free(text);
    return 0;
}
