// test_format.c: the format table and derived properties against values known independently:
// ml_dtypes 0.6 and PyTorch finfo, the OCP MX v1.0 specification, IEEE 754 and NumPy's finfo.
// The table is built by the compiler: every row equals fmt_make of its six fields, it lives in
// read-only memory, and threads making the first lookup together all see the same rows (the
// last one is meaningful under ThreadSanitizer; the read-only check fails for any table that is
// filled in at run time).
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "formats/codec.h"
#include "formats/format.h"
#include "formats/names.h"

typedef struct {
    const char *name;
    double max, min, tiny, sub, eps, res;
    uint64_t finite, nan_codes;
    bool has_inf;
} known;

// Published values, typed here on purpose: they are the independent side of the comparison.
static const known published[] = {
    {"fp64", 0x1.fffffffffffffp+1023, -0x1.fffffffffffffp+1023, 0x1p-1022, 0x1p-1074, 0x1p-52, 1e-15,
     18437736874454810623ULL, 9007199254740990ULL, true},
    {"fp32", 3.4028234663852886e38, -3.4028234663852886e38, 1.1754943508222875e-38, 1.401298464324817e-45,
     1.1920928955078125e-07, 1e-06, 4278190079ULL, 16777214ULL, true},
    {"tf32", 0x1.ffcp+127, -0x1.ffcp+127, 0x1p-126, 0x1p-136, 0x1p-10, 1e-3, 522239ULL, 2046ULL, true},
    {"fp16", 65504, -65504, 6.103515625e-05, 5.960464477539063e-08, 0.0009765625, 1e-3, 63487ULL, 2046ULL, true},
    {"bf16", 3.3895313892515355e38, -3.3895313892515355e38, 1.1754943508222875e-38, 9.183549615799121e-41,
     0.0078125, 0.01, 65279ULL, 254ULL, true},
    {"e4m3", 448, -448, 0.015625, 0.001953125, 0.125, 1, 253, 2, false},
    {"e5m2", 57344, -57344, 6.103515625e-05, 1.52587890625e-05, 0.25, 1, 247, 6, true},
    {"e4m3fnuz", 240, -240, 0.0078125, 0.0009765625, 0.125, 1, 255, 1, false},
    {"e5m2fnuz", 57344, -57344, 3.0517578125e-05, 7.62939453125e-06, 0.25, 1, 255, 1, false},
    // OCP MX v1.0 Table: E8M0 max 2^127, min 2^-127 (the spec's table prints them swapped).
    {"e8m0", 0x1p127, 0x1p-127, 0x1p-127, 0x1p-127, 1, 1, 255, 1, false},
    {"e3m2", 28, -28, 0.25, 0.0625, 0.25, 1, 63, 0, false},
    {"e2m3", 7.5, -7.5, 1, 0.125, 0.125, 1, 63, 0, false},
    // fp4 has an eps like any float: 2^-1 (the OCP table gives none).
    {"e2m1", 6, -6, 1, 0.5, 0.5, 1, 15, 0, false},
};

Test(format, table_matches_published_values) {
    cr_assert_eq(fmt_table_count(), sizeof published / sizeof published[0]);
    for (size_t i = 0; i < fmt_table_count(); i++) {
        const known *k = &published[i];
        const fmt_t *f = fmt_table_get(i);
        cr_assert_str_eq(f->name, k->name);
        fmt_info in;
        fmt_get_info(f, &in);
        cr_expect_eq(in.max, k->max, "%s max %a want %a", k->name, in.max, k->max);
        cr_expect_eq(in.min, k->min, "%s min %a want %a", k->name, in.min, k->min);
        cr_expect_eq(in.smallest_normal, k->tiny, "%s tiny %a want %a", k->name, in.smallest_normal, k->tiny);
        cr_expect_eq(in.smallest_subnormal, k->sub, "%s sub %a want %a", k->name, in.smallest_subnormal, k->sub);
        cr_expect_eq(in.eps, k->eps, "%s eps", k->name);
        cr_expect_eq(in.resolution, k->res, "%s resolution %g want %g", k->name, in.resolution, k->res);
        cr_expect_eq(in.finite_values, k->finite, "%s finite %llu want %llu", k->name,
                     (unsigned long long)in.finite_values, (unsigned long long)k->finite);
        cr_expect_eq(in.nan_codes, k->nan_codes, "%s nan codes", k->name);
        cr_expect_eq(f->has_inf, k->has_inf, "%s has_inf", k->name);
    }
}

// finite_values counted by brute force over every code of the small formats.
Test(format, finite_values_by_enumeration) {
    for (size_t i = 0; i < fmt_table_count(); i++) {
        const fmt_t *f = fmt_table_get(i);
        if (f->bits > 8) continue;
        fmt_info in;
        fmt_get_info(f, &in);
        uint64_t nan_list[4];
        size_t nn = fmt_nan_codes(f, nan_list, 4);
        cr_assert_eq(nn, in.nan_codes);
        uint64_t codes = (uint64_t)1 << f->bits, special = nn;
        if (f->has_inf) special += f->is_signed ? 2 : 1;
        cr_expect_eq(in.finite_values, codes - special - (f->has_negzero ? 1 : 0), "%s", f->name);
    }
}

Test(format, nan_code_lists) {
    fmt_t f;
    uint64_t c[8];
    cr_assert_eq(fmt_from_name(&f, "e4m3"), FMT_OK);
    cr_assert_eq(fmt_nan_codes(&f, c, 8), 2);
    cr_expect_eq(c[0], 0x7f);
    cr_expect_eq(c[1], 0xff);
    cr_assert_eq(fmt_from_name(&f, "e5m2"), FMT_OK);
    cr_assert_eq(fmt_nan_codes(&f, c, 8), 6);
    cr_expect_eq(c[0], 0x7d);
    cr_expect_eq(c[5], 0xff);
    cr_assert_eq(fmt_from_name(&f, "e4m3fnuz"), FMT_OK);
    cr_assert_eq(fmt_nan_codes(&f, c, 8), 1);
    cr_expect_eq(c[0], 0x80);
    cr_assert_eq(fmt_from_name(&f, "e8m0"), FMT_OK);
    cr_assert_eq(fmt_nan_codes(&f, c, 8), 1);
    cr_expect_eq(c[0], 0xff);
    cr_assert_eq(fmt_from_name(&f, "e2m1"), FMT_OK);
    cr_expect_eq(fmt_nan_codes(&f, c, 8), 0);
    cr_assert_eq(fmt_from_name(&f, "fp16"), FMT_OK);
    cr_expect_eq(fmt_nan_codes(&f, c, 2), 2046);  // count is exact even when the list is capped
    cr_expect_eq(c[0], 0x7c01);
}

Test(format, aliases_name_the_same_row) {
    static const char *pairs[][2] = {
        {"float8_e4m3fn", "e4m3"}, {"float8_e5m2", "e5m2"}, {"float8_e8m0fnu", "e8m0"},
        {"float6_e3m2fn", "e3m2"}, {"float6_e2m3fn", "e2m3"}, {"float4_e2m1fn", "e2m1"},
        {"float16", "fp16"}, {"bfloat16", "bf16"}, {"BFLOAT16", "bf16"}, {"float32", "fp32"},
        {"float8_e4m3fnuz", "e4m3fnuz"}, {"float8_e5m2fnuz", "e5m2fnuz"}, {"double", "fp64"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        fmt_t f;
        cr_assert_eq(fmt_from_name(&f, pairs[i][0]), FMT_OK, "%s", pairs[i][0]);
        cr_expect_str_eq(f.name, pairs[i][1]);
    }
}

// A custom format built from the same type agrees with the table row it spells.
Test(format, custom_specs) {
    static const char *same[][2] = {
        {"e5m10", "fp16"}, {"e8m7", "bf16"}, {"e8m23", "fp32"}, {"e11m52", "fp64"}, {"e5m2", "e5m2"},
        {"e4m3fn", "e4m3"}, {"e4m3:fn", "e4m3"}, {"e4m3:fnuz", "e4m3fnuz"}, {"e5m2:fnuz", "e5m2fnuz"},
        {"e2m1:finite", "e2m1"}, {"e3m2:finite", "e3m2"}, {"ue8m0:e8m0", "e8m0"}, {"e8m10", "tf32"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        fmt_t a, b;
        cr_assert_eq(fmt_from_name(&a, same[i][0]), FMT_OK, "%s", same[i][0]);
        cr_assert_eq(fmt_from_name(&b, same[i][1]), FMT_OK);
        cr_expect(a.bits == b.bits && a.ebits == b.ebits && a.mbits == b.mbits && a.bias == b.bias &&
                      a.special == b.special && a.is_signed == b.is_signed && a.max == b.max &&
                      a.min_subnormal == b.min_subnormal,
                  "%s differs from %s", same[i][0], same[i][1]);
    }
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, "e5m7"), FMT_OK);
    cr_expect_eq(f.bits, 13);
    cr_expect_eq(f.max, 0x1.fep15);  // (2 - 2^-7) * 2^15
    cr_assert_eq(fmt_from_name(&f, "e4m3:bias=10:finite"), FMT_OK);
    cr_expect_eq(f.max, 0x1.ep5);  // (2 - 2^-3) * 2^(15-10)
    cr_assert_eq(fmt_from_name(&f, "ue4m3:fn"), FMT_OK);
    cr_expect_eq(f.bits, 7);
    cr_expect(!f.is_signed && !f.has_negzero);
}

Test(format, bad_names_and_descriptors) {
    fmt_t f;
    cr_expect_eq(fmt_from_name(&f, "fp7"), FMT_EUNKNOWN);
    cr_expect_eq(fmt_from_name(&f, ""), FMT_EUNKNOWN);
    cr_expect_eq(fmt_from_name(&f, "e4m3:bogus"), FMT_EUNKNOWN);
    cr_expect_eq(fmt_from_name(&f, "e12m3"), FMT_EINVAL);  // does not fit in fp64
    cr_expect_eq(fmt_from_name(&f, "e4m0"), FMT_EINVAL);   // IEEE needs a mantissa for NaN
    cr_expect_eq(fmt_from_name(&f, "e4m3:bias=x"), FMT_EINVAL);
    cr_expect_eq(fmt_make(&f, "x", 9, 4, 3, 7, true, FMT_FN), FMT_EINVAL);  // bits do not add up
    cr_expect_eq(fmt_make(&f, "x", 8, 4, 3, 7, false, FMT_FNUZ), FMT_EINVAL);
}

Test(format, embedding_predicates) {
    fmt_t f;
    static const char *in32[] = {"fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2", "e8m0", "e2m1"};
    for (size_t i = 0; i < 8; i++) {
        cr_assert_eq(fmt_from_name(&f, in32[i]), FMT_OK);
        cr_expect(fmt_embeds_in_f32(&f), "%s", in32[i]);
    }
    cr_assert_eq(fmt_from_name(&f, "fp64"), FMT_OK);
    cr_expect(!fmt_embeds_in_f32(&f) && fmt_contains_f32(&f));
    cr_assert_eq(fmt_from_name(&f, "fp32"), FMT_OK);
    cr_expect(fmt_contains_f32(&f));
    cr_assert_eq(fmt_from_name(&f, "bf16"), FMT_OK);
    cr_expect(!fmt_contains_f32(&f));
    cr_assert_eq(fmt_from_name(&f, "e9m3"), FMT_OK);
    cr_expect(!fmt_embeds_in_f32(&f));
}

// --- the table is a constant the compiler builds

// Every row equals what the run-time constructor derives from its six fields: one derivation.
Test(format, rows_equal_fmt_make) {
    for (size_t i = 0; i < fmt_table_count(); i++) {
        const fmt_t *t = fmt_table_get(i);
        fmt_t m;
        cr_assert_eq(fmt_make(&m, t->name, t->bits, t->ebits, t->mbits, t->bias, t->is_signed, t->special), FMT_OK,
                     "%s", t->name);
        cr_expect(m.emin == t->emin && m.emax == t->emax, "%s: emin/emax %d %d, fmt_make %d %d", t->name, t->emin,
                  t->emax, m.emin, m.emax);
        cr_expect(m.max == t->max && m.min_normal == t->min_normal && m.min_subnormal == t->min_subnormal,
                  "%s: max %a min_normal %a min_subnormal %a, fmt_make %a %a %a", t->name, t->max, t->min_normal,
                  t->min_subnormal, m.max, m.min_normal, m.min_subnormal);
        cr_expect(m.has_inf == t->has_inf && m.has_nan == t->has_nan && m.has_zero == t->has_zero &&
                      m.has_negzero == t->has_negzero && m.has_subnormals == t->has_subnormals,
                  "%s: flags differ from fmt_make's", t->name);
    }
    cr_expect_null(fmt_table_get(fmt_table_count()));
    cr_expect_null(fmt_table_aliases(fmt_table_count()));
}

// The mapping of /proc/self/maps that holds address p: its permission string in perms.
static bool mapping_perms(const void *p, char perms[5]) {
    FILE *fh = fopen("/proc/self/maps", "r");
    if (!fh) return false;
    const uintptr_t a = (uintptr_t)p;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, fh)) {
        uintptr_t lo, hi;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s", &lo, &hi, perms) == 3 && a >= lo && a < hi) found = true;
    }
    fclose(fh);
    return found;
}

// Read-only memory cannot be written by a lazy initialiser, so there is nothing to race on.
Test(format, table_lives_in_read_only_memory) {
    char perms[5];
    const fmt_t *row = fmt_table_get(0);
    if (!mapping_perms(row, perms)) cr_skip_test("no /proc/self/maps: cannot check the mapping");
    cr_assert(perms[0] == 'r' && perms[1] == '-', "the format table is in a %s mapping; expected read-only "
              "(a constant the compiler builds, not one filled in at the first lookup)", perms);
    const char *const *al = fmt_table_aliases(0);
    cr_assert(mapping_perms(al, perms) && perms[1] == '-', "the alias table is in a %s mapping", perms);
}

enum { NTHREADS = 8, NPROBES = 64 };

typedef struct {
    pthread_barrier_t *go;
    fmt_t got[NPROBES];
    int n, status;
} lookup_job;

// Every table name, alias and row, looked up at once by all threads (the first lookup of the
// process: Criterion runs each test in its own process).
static void *lookup_all(void *arg) {
    lookup_job *j = arg;
    pthread_barrier_wait(j->go);
    for (size_t i = 0; i < fmt_table_count(); i++) {
        const fmt_t *row = fmt_table_get(i);
        if (j->n < NPROBES) j->got[j->n++] = *row;
        for (const char *const *a = fmt_table_aliases(i); *a; a++)
            if (j->n < NPROBES && (j->status |= fmt_from_name(&j->got[j->n], *a)) == FMT_OK) j->n++;
    }
    return NULL;
}

Test(format, first_lookup_from_many_threads) {
    pthread_barrier_t go;
    cr_assert_eq(pthread_barrier_init(&go, NULL, NTHREADS), 0);
    static lookup_job jobs[NTHREADS];
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        jobs[t] = (lookup_job){.go = &go};
        cr_assert_eq(pthread_create(&th[t], NULL, lookup_all, &jobs[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&go);
    for (int t = 0; t < NTHREADS; t++) {
        cr_assert_eq(jobs[t].status, FMT_OK);
        cr_assert_eq(jobs[t].n, jobs[0].n);
        for (int k = 0; k < jobs[t].n; k++)
            cr_assert(!memcmp(&jobs[t].got[k], &jobs[0].got[k], sizeof(fmt_t)), "thread %d probe %d (%s)", t, k,
                      jobs[0].got[k].name);
    }
    // And what they saw is the published table.
    for (int k = 0; k < jobs[0].n; k++) {
        const fmt_t *f = &jobs[0].got[k];
        size_t i = 0;
        while (i < sizeof published / sizeof published[0] && strcmp(published[i].name, f->name)) i++;
        cr_assert(i < sizeof published / sizeof published[0], "probe %d: unknown row %s", k, f->name);
        cr_assert(f->max == published[i].max && f->min_subnormal == published[i].sub, "%s", f->name);
    }
}

// Custom names: the OCP suffixes attach to the digits, flags need ':'; a name too long for the
// descriptor is refused rather than cut (a cut name would not read back).
Test(format, custom_name_edges) {
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, "e4m3fn"), FMT_OK);
    cr_assert_eq(fmt_from_name(&f, "e5m2fnuz"), FMT_OK);
    cr_assert_eq(fmt_from_name(&f, "e8m0:e8m0"), FMT_OK);
    cr_assert_neq(fmt_from_name(&f, "e8m0e8m0"), FMT_OK);
    cr_assert_neq(fmt_from_name(&f, "e4m3fnfn"), FMT_OK);
    cr_assert_neq(fmt_from_name(&f, "e4m3:fn:x"), FMT_OK);
    cr_assert_neq(fmt_from_name(&f, "e3m0000000000000000000000000000000000000000000000000001"), FMT_OK);
}

// Peers' names (issue 22): ml_dtypes' formats the table has no row for, by their published
// values (ml_dtypes 0.5 finfo: float8_e4m3 max 240, float8_e3m4 max 15.5, float8_e4m3b11fnuz
// max 30); PyTorch and JAX spellings with their module prefix; torch's packed fp4.
Test(format, peer_names) {
    static const struct { const char *name; double max, sub; bool inf; } peers[] = {
        {"float8_e4m3", 240, 0x1p-9, true}, {"float8_e3m4", 15.5, 0x1p-6, true},
        {"float8_e4m3b11fnuz", 30, 0x1p-13, false}, {"ml_dtypes.float8_e3m4", 15.5, 0x1p-6, true},
    };
    for (size_t i = 0; i < sizeof peers / sizeof peers[0]; i++) {
        fmt_t f, g;
        cr_assert_eq(fmt_from_name(&f, peers[i].name), FMT_OK, "%s", peers[i].name);
        cr_expect_eq(f.max, peers[i].max, "%s max %g", peers[i].name, f.max);
        cr_expect_eq(f.min_subnormal, peers[i].sub, "%s", peers[i].name);
        cr_expect_eq(f.has_inf, peers[i].inf, "%s", peers[i].name);
        cr_expect_str_eq(fmt_kind(&f), "peer");
        cr_assert_eq(fmt_from_name(&g, f.name), FMT_OK, "%s reads back", f.name);  // the name reads back
    }
    static const char *pairs[][2] = {
        {"torch.float8_e4m3fn", "e4m3"}, {"torch.float8_e8m0fnu", "e8m0"}, {"torch.float4_e2m1fn_x2", "e2m1"},
        {"jnp.bfloat16", "bf16"}, {"jax.numpy.float8_e5m2", "e5m2"}, {"np.float16", "fp16"},
        {"torch.half", "fp16"}, {"torch.float8_e5m2fnuz", "e5m2fnuz"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        fmt_t f;
        cr_assert_eq(fmt_from_name(&f, pairs[i][0]), FMT_OK, "%s", pairs[i][0]);
        cr_expect_str_eq(f.name, pairs[i][1]);
        cr_expect_str_eq(fmt_kind(&f), "table");
    }
    fmt_t f;
    cr_assert_eq(fmt_from_name(&f, "e4m4"), FMT_OK);
    cr_expect_str_eq(fmt_kind(&f), "custom");
    cr_assert_eq(fmt_from_name(&f, "e4m3:ieee"), FMT_OK);
    cr_expect_str_eq(fmt_kind(&f), "peer");  // the fields of float8_e4m3
}

// fmt_same_layout: one layout under several names is the same; each of the six defining fields
// alone makes a difference (hand-changed copies), and the name and derived fields do not.
Test(format, same_layout) {
    static const char *same[][2] = {{"fp32", "e8m23"}, {"fp32", "float"}, {"e4m3", "float8_e4m3fn"},
                                    {"bf16", "e8m7"}, {"e4m3:ieee", "float8_e4m3"}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        fmt_t a, b;
        cr_assert_eq(fmt_from_name(&a, same[i][0]), FMT_OK, "%s", same[i][0]);
        cr_assert_eq(fmt_from_name(&b, same[i][1]), FMT_OK, "%s", same[i][1]);
        cr_expect(fmt_same_layout(&a, &b) && fmt_same_layout(&b, &a), "%s and %s", same[i][0], same[i][1]);
    }
    static const char *differ[][2] = {{"e4m3", "e4m3fnuz"}, {"e4m3", "e4m3:ieee"}, {"e5m2", "e5m2fnuz"},
                                      {"fp16", "bf16"}, {"e3m2", "e2m3"}, {"e4m3", "e4m3:bias=8"}};
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        fmt_t a, b;
        cr_assert_eq(fmt_from_name(&a, differ[i][0]), FMT_OK, "%s", differ[i][0]);
        cr_assert_eq(fmt_from_name(&b, differ[i][1]), FMT_OK, "%s", differ[i][1]);
        cr_expect(!fmt_same_layout(&a, &b), "%s and %s", differ[i][0], differ[i][1]);
    }
    fmt_t a, b;
    cr_assert_eq(fmt_from_name(&a, "e4m3"), FMT_OK);
    b = a, snprintf(b.name, sizeof b.name, "other"), b.max = 0;
    cr_expect(fmt_same_layout(&a, &b), "the name and the derived fields are not the layout");
    b = a, b.bits++;
    cr_expect(!fmt_same_layout(&a, &b), "bits");
    b = a, b.is_signed = false;
    cr_expect(!fmt_same_layout(&a, &b), "signedness");
}

// fp8 and fp6 name two formats: refused, and the message gives the choices; an unknown name
// gets the nearest known one and the list.
Test(format, ambiguous_and_unknown_names) {
    fmt_t f;
    char msg[1024];
    static const char *amb[] = {"fp8", "FP6", "float8", "torch.fp8"};
    for (size_t i = 0; i < sizeof amb / sizeof *amb; i++) {
        const int st = fmt_from_name(&f, amb[i]);
        cr_assert_eq(st, FMT_EUNKNOWN, "%s", amb[i]);
        fmt_name_message(amb[i], st, msg, sizeof msg);
        cr_expect(strstr(msg, "ambiguous") && strstr(msg, "e4m3") != strstr(msg, "e3m2"), "%s", msg);
    }
    int st = fmt_from_name(&f, "float8_e4m3fm");
    fmt_name_message("float8_e4m3fm", st, msg, sizeof msg);
    cr_expect(strstr(msg, "unknown format; did you mean 'float8_e4m3fn'"), "%s", msg);
    cr_expect(strstr(msg, "known formats: fp64 fp32"), "%s", msg);
    st = fmt_from_name(&f, "bflaot16");
    fmt_name_message("bflaot16", st, msg, sizeof msg);
    cr_expect(strstr(msg, "did you mean 'bfloat16'"), "%s", msg);
    st = fmt_from_name(&f, "zzzzzzzzzz");
    fmt_name_message("zzzzzzzzzz", st, msg, sizeof msg);
    cr_expect(!strstr(msg, "did you mean") && strstr(msg, "known formats"), "%s", msg);
}

// Issue 34: after "torch." only PyTorch's dtypes are read. torch has no float8_e4m3, and the bare
// name is ml_dtypes' IEEE-style e4m3 (max 240, not float8_e4m3fn's 448): refused, with the
// torch dtypes fplab maps and the nearest of them.
Test(format, torch_prefix_takes_only_torch_dtypes) {
    fmt_t f;
    char msg[1024];
    static const char *bad[] = {"torch.float8_e4m3", "TORCH.float8_e3m4", "torch.e4m3", "torch.fp32", "torch.binary8p3se",
                                "torch.binary16p1se", "torch.float6_e3m2fn"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const int st = fmt_from_name(&f, bad[i]);
        cr_expect_eq(st, FMT_EUNKNOWN, "%s", bad[i]);
        cr_expect_eq(fmt_from_name_wide(&f, bad[i]), FMT_EUNKNOWN, "%s (wide)", bad[i]);
        fmt_name_message(bad[i], st, msg, sizeof msg);
        cr_expect(strstr(msg, "not a torch dtype that fplab maps") && strstr(msg, "torch.float8_e4m3fn") &&
                  strstr(msg, "torch.float4_e2m1fn_x2") && strstr(msg, "torch.float64"), "%s: %s", bad[i], msg);
    }
    fmt_name_message("torch.float8_e4m3", FMT_EUNKNOWN, msg, sizeof msg);
    cr_expect(strstr(msg, "did you mean 'torch.float8_e4m3fn'"), "%s", msg);
    static const char *good[][2] = {
        {"torch.float8_e4m3fn", "e4m3"}, {"torch.float8_e5m2", "e5m2"}, {"torch.float8_e4m3fnuz", "e4m3fnuz"},
        {"torch.float8_e5m2fnuz", "e5m2fnuz"}, {"torch.float8_e8m0fnu", "e8m0"}, {"torch.float4_e2m1fn_x2", "e2m1"},
        {"torch.bfloat16", "bf16"}, {"torch.float16", "fp16"}, {"torch.half", "fp16"}, {"torch.float32", "fp32"},
        {"Torch.float", "fp32"}, {"torch.float64", "fp64"}, {"torch.double", "fp64"},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        cr_assert_eq(fmt_from_name(&f, good[i][0]), FMT_OK, "%s", good[i][0]);
        cr_expect_str_eq(f.name, good[i][1]);
    }
    // other prefixes keep their meaning: ml_dtypes and jnp do have float8_e4m3
    cr_assert_eq(fmt_from_name(&f, "ml_dtypes.float8_e4m3"), FMT_OK);
    cr_expect_eq(f.max, 240);
    cr_assert_eq(fmt_from_name(&f, "jnp.float8_e4m3"), FMT_OK);
    cr_expect_eq(f.max, 240);
}

// finfo's min is the smallest finite value: -max where there is a sign, 0 in an unsigned format
// with a zero (every unsigned P3109 format, eXmY:unsigned), the smallest positive value only in
// one without (e8m0). Checked against every code of the formats named here and of the 148
// unsigned P3109 formats of K = 3..12 bits inside float64 (binary12p1u* is wide).
Test(format, min_is_the_smallest_value) {
    static const char *names[] = {"e8m0", "e4m3:unsigned", "ue5m2", "e3m2:fn:unsigned", "e4m3", "e2m1", "fp16"};
    size_t nformats = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names + 2 * 75; i++) {
        char name[40];
        if (i < sizeof names / sizeof *names) snprintf(name, sizeof name, "%s", names[i]);
        else {  // the unsigned P3109 formats of K = 3..12 bits, finite and extended
            const size_t j = i - sizeof names / sizeof *names;
            int K = 3, P = 1 + (int)(j / 2);
            while (P > K) P -= K, K++;
            snprintf(name, sizeof name, "binary%dp%due", K, P);
            if (j % 2) name[strlen(name) - 1] = 'f';
        }
        fmt_t f;
        if (fmt_from_name_wide(&f, name) == FMT_OK && fmt_is_wide(&f)) continue;  // binary12p1u*: no doubles
        cr_assert_eq(fmt_from_name(&f, name), FMT_OK, "%s", name);
        fmt_info in;
        fmt_get_info(&f, &in);
        double lo = INFINITY;
        for (uint64_t c = 0; c < (uint64_t)1 << f.bits; c++) {
            const double v = fmt_decode1(&f, c);
            if (isfinite(v) && v < lo) lo = v;
        }
        cr_assert_eq(in.min, lo == 0 ? 0.0 : lo, "%s: finfo min %a, smallest value %a", name, in.min, lo);
        cr_assert(f.is_signed || !f.has_zero || (in.min == 0 && !signbit(in.min)), "%s: min %a", name, in.min);
        nformats++;
    }
    cr_assert_eq(nformats, sizeof names / sizeof *names + 148);
}

// The one nearest-name rule (formats/names.h) behind every "did you mean": completions and
// whole fields win over a changed digit, ties are all named, and P3109 names are candidates.
Test(format, nearest_names) {
    static const struct { const char *name, *want; } cases[] = {
        {"float6_e3m2", "did you mean 'float6_e3m2fn'? "},
        {"float8_e8m0", "did you mean 'float8_e8m0fnu'? "},
        {"binary8p3s", "did you mean 'binary8p3se' or 'binary8p3sf'? "},
        {"bfloat", "did you mean 'bfloat16'? "},
        {"bflaot16", "did you mean 'bfloat16'? "},
        {"float8_e4m3fm", "did you mean 'float8_e4m3fn'? "},
        {"singel", "did you mean 'single'? "},
    };
    fmt_t f;
    char msg[1024];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const int st = fmt_from_name(&f, cases[i].name);
        cr_assert_eq(st, FMT_EUNKNOWN, "%s", cases[i].name);
        fmt_name_message(cases[i].name, st, msg, sizeof msg);
        cr_expect(!strncmp(msg, "unknown format; ", 16) && !strncmp(msg + 16, cases[i].want, strlen(cases[i].want)),
                  "%s: %s", cases[i].name, msg);
    }
    // NumPy's names of the IEEE formats
    static const char *numpy[][2] = {{"half", "fp16"}, {"single", "fp32"}, {"double", "fp64"}, {"np.single", "fp32"}};
    for (size_t i = 0; i < sizeof numpy / sizeof *numpy; i++) {
        cr_assert_eq(fmt_from_name(&f, numpy[i][0]), FMT_OK, "%s", numpy[i][0]);
        cr_expect_str_eq(f.name, numpy[i][1]);
    }
    // The rule on any list: policy presets, rounding modes.
    fmt_suggest sg;
    char buf[200];
    fmt_suggest_init(&sg, "bf16amp");
    fmt_suggest_try_list(&sg, "fp32,bf16-amp,fp16-amp,pure-bf16");
    fmt_suggest_text(&sg, buf, sizeof buf);
    cr_expect_str_eq(buf, "did you mean 'bf16-amp'? ");
    fmt_suggest_init(&sg, "zzzzzz");
    fmt_suggest_try_list(&sg, "rne rna rtz");
    cr_expect_eq(fmt_suggest_text(&sg, buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "");
}
