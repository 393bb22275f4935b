// fuzz_runlog.c: libFuzzer harness for the training-log reader (experiments/runlog.c, on top of
// json.c), with and without per-layer keys. An accepted log must hold each step once, in
// increasing order, with site entries that tile the entry array and name known sites.
#include <stdint.h>

#include "experiments/runlog.h"
#include "tests/fuzz/fuzz_util.h"

static void check(const runlog *l) {
    size_t ent = 0;
    for (size_t i = 0; i < l->n; i++) {
        const runlog_step *s = &l->step[i];
        FUZZ_CHECK(s->step >= 1 && (i == 0 || s->step > l->step[i - 1].step), "step %zu is %ld", i, s->step);
        FUZZ_CHECK(s->ent0 == ent && s->ent0 + s->nent <= l->nent, "step %zu: entries %zu+%zu of %zu", i, s->ent0,
                   s->nent, l->nent);
        ent += s->nent;
        for (size_t k = s->ent0; k < s->ent0 + s->nent; k++) {
            FUZZ_CHECK(l->ent[k].site >= 0 && l->ent[k].site < l->nsites, "site %d of %d", l->ent[k].site, l->nsites);
            FUZZ_CHECK(runlog_tel_of(l, i, l->ent[k].site) != NULL, "entry not found");
        }
    }
    FUZZ_CHECK(ent == l->nent, "%zu entries belong to steps, %zu held", ent, l->nent);
    FUZZ_CHECK(l->steps >= -1 && l->tokens_per_step >= -1, "negative counts");
    for (int s = 0; s < l->nsites; s++) FUZZ_CHECK(runlog_site_index(l, l->sites[s]) == s, "site %d twice", s);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    for (int layers = 0; layers < 2; layers++) {
        FILE *f = fuzz_stream(d, n);
        if (!f) return 0;
        runlog l;
        char msg[512];
        if (runlog_read_stream(&l, f, "fuzz.jsonl", layers, msg, sizeof msg) == RUNLOG_OK) check(&l);
        else FUZZ_CHECK(l.n == 0 && l.step == NULL && msg[0], "an error left steps or no message");
        runlog_free(&l);
        fclose(f);
    }
    return 0;
}
