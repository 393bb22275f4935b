// names.c: the nearest-name rule of every "did you mean" (see names.h).
#include "names.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum { EDIT = 3, COMPLETE = 1, DIGIT = 5 };

static int min2(int a, int b) { return a < b ? a : b; }

// Weighted optimal-string-alignment distance (names.h); both strings are cut at
// FMT_SUGGEST_LEN - 1 characters (no format, mode or preset name is longer).
static int name_cost(const char *a, const char *b) {
    enum { L = FMT_SUGGEST_LEN };
    size_t na = strlen(a), nb = strlen(b);
    if (na >= L) na = L - 1;
    if (nb >= L) nb = L - 1;
    int d[L][L];
    for (size_t i = 0; i <= na; i++) d[i][0] = (int)i * EDIT;
    for (size_t j = 1; j <= nb; j++) d[0][j] = (int)j * (na == 0 ? COMPLETE : EDIT);
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            const int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            const int sub = ca == cb ? 0 : isdigit(ca) && isdigit(cb) ? DIGIT : EDIT;
            int v = min2(d[i - 1][j - 1] + sub, d[i - 1][j] + EDIT);
            v = min2(v, d[i][j - 1] + (i == na ? COMPLETE : EDIT));  // after the name's end: a completion
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb)
                v = min2(v, d[i - 2][j - 2] + EDIT);
            d[i][j] = v;
        }
    return d[na][nb];
}

void fmt_suggest_init(fmt_suggest *s, const char *name) {
    memset(s, 0, sizeof *s);
    snprintf(s->query, sizeof s->query, "%s", name ? name : "");
    s->cost = INT_MAX;
}

void fmt_suggest_try(fmt_suggest *s, const char *candidate) {
    if (!candidate || !*candidate || !s->query[0]) return;
    const int c = name_cost(s->query, candidate);
    if (c > s->cost) return;
    if (c < s->cost) s->cost = c, s->n = 0;
    for (int i = 0; i < s->n; i++)
        if (!strcasecmp(s->names[i], candidate)) return;
    if (s->n < FMT_SUGGEST_MAX) snprintf(s->names[s->n++], FMT_SUGGEST_LEN, "%s", candidate);
}

void fmt_suggest_try_list(fmt_suggest *s, const char *list) {
    for (const char *p = list; p && *p;) {
        const size_t n = strcspn(p, ", ");
        if (n && n < FMT_SUGGEST_LEN) {
            char one[FMT_SUGGEST_LEN];
            memcpy(one, p, n), one[n] = 0;
            fmt_suggest_try(s, one);
        }
        p += n;
        p += strspn(p, ", ");
    }
}

int fmt_suggest_text(const fmt_suggest *s, char *buf, size_t cap) {
    if (!buf || !cap) return 0;
    buf[0] = 0;
    if (!s->n || s->cost > EDIT * (1 + (int)strlen(s->query) / 3)) return 0;
    size_t k = (size_t)snprintf(buf, cap, "did you mean ");
    for (int i = 0; i < s->n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s'%s'", i == 0 ? "" : i == s->n - 1 ? " or " : ", ", s->names[i]);
    if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "? ");
    return (int)(k < cap ? k : cap - 1);
}
