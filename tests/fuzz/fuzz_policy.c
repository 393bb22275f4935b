// fuzz_policy.c: libFuzzer harness for the policy parser (autocast/policy.c ac_policy_parse).
// A policy it accepts must pass ac_policy_validate, and its text (ac_policy_text) must parse
// back to the same policy (the header's promise: exact for every policy the parser produces).
#include <stdint.h>
#include <stdlib.h>

#include "autocast/policy.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    char *text = fuzz_cstr(d, n);
    ac_policy p, q;
    char msg[1024];
    if (ac_policy_parse(&p, text, "fuzz.policy", msg, sizeof msg) == AC_OK) {
        char vmsg[1024];
        FUZZ_CHECK(ac_policy_validate(&p, vmsg, sizeof vmsg) == AC_OK, "parsed but invalid: %s", vmsg);
        const size_t len = ac_policy_text(&p, NULL, 0);
        char *back = malloc(len + 1);
        if (!back) abort();
        FUZZ_CHECK(ac_policy_text(&p, back, len + 1) == len, "length changed");
        FUZZ_CHECK(ac_policy_parse(&q, back, "fuzz.policy (written back)", msg, sizeof msg) == AC_OK,
                   "the written text does not parse: %s\n%s", msg, back);
        FUZZ_CHECK(ac_policy_equal(&p, &q), "the written text parses to another policy:\n%s", back);
        free(back);
    }
    free(text);
    return 0;
}
