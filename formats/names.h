// names.h: the one nearest-name rule behind every "did you mean" of fplab (formats, rounding
// modes, overflow policies, stochastic variants, policy presets): the candidates tried whose
// cost from the name is least, at most three of them, when that cost is small enough.
// Constraints: no allocation, no global state; candidates are copied (generated names may be
// tried from a stack buffer).
#ifndef FPLAB_NAMES_H
#define FPLAB_NAMES_H

#include <stddef.h>

enum { FMT_SUGGEST_MAX = 3, FMT_SUGGEST_LEN = 40 };

// The cost of turning name into candidate, case-insensitive: an edit distance whose inserting,
// deleting, replacing or swapping two neighbouring characters costs 3, except that completing
// the name (characters added after its end: bfloat -> bfloat16, binary8p3s -> binary8p3se)
// costs 1 a character and replacing one digit by another 5 (digits are a format's fields:
// float6_e3m2 is float6_e3m2fn, not float8_e5m2). A candidate is suggested when its cost is at
// most 3 (1 + strlen(name) / 3): about a third of the name edited.
typedef struct {
    char query[FMT_SUGGEST_LEN];
    int cost;   // the least cost so far (INT_MAX before a candidate)
    int n;      // candidates kept at that cost (at most FMT_SUGGEST_MAX; duplicates once)
    char names[FMT_SUGGEST_MAX][FMT_SUGGEST_LEN];
} fmt_suggest;

void fmt_suggest_init(fmt_suggest *s, const char *name);
void fmt_suggest_try(fmt_suggest *s, const char *candidate);
// Every name of list, separated by commas or spaces ("rne,rna,rtz" or "fp32 bf16-amp").
void fmt_suggest_try_list(fmt_suggest *s, const char *list);
// "did you mean 'a'? ", "did you mean 'a' or 'b'? ", "did you mean 'a', 'b' or 'c'? ", or ""
// where no candidate is close enough, into buf like snprintf; returns the length written.
int fmt_suggest_text(const fmt_suggest *s, char *buf, size_t cap);

#endif
