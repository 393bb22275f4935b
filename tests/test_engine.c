// test_engine.c: the matrix-engine models (kernels/engine.h) against MMA-Sim itself: every line
// of tests/fixtures/engines/*.txt (written by tools/mmasim_fixtures.py, which runs MMA-Sim on
// torch CPU) is one dot product of one instruction, or of four chained along K; the model must
// give the same D bit for bit (AMD NaNs: NaN-ness only; MMA-Sim's AMD NaN bits are torch's).
// Then each model with a fault injected (mm__engine_dot_fault, scaled_mm_internal.h:
// MM__EFAULT_*) must disagree with the fixtures somewhere: the fixtures can catch a wrong width
// or rounding.
// FPLAB_ROOT locates tests/fixtures when not run from the repository root.
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/engine.h"
#include "kernels/scaled_mm_internal.h"  // mm__engine_dot_fault

// --- qualifiers (MMA-Sim's instruction strings)

typedef struct {
    unsigned ta, tb;
    int k, block;
    bool ue4m3, f16_out, f64, amd_1k;
} qual;

static unsigned nv_type(const char *s) {
    static const struct { const char *n; unsigned t; } m[] = {
        {"f64", MM_ET_F64}, {"tf32", MM_ET_TF32}, {"f16", MM_ET_F16}, {"bf16", MM_ET_BF16}, {"e4m3", MM_ET_E4M3},
        {"e5m2", MM_ET_E5M2}, {"e3m2", MM_ET_E3M2}, {"e2m3", MM_ET_E2M3}, {"e2m1", MM_ET_E2M1}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!strcmp(s, m[i].n)) return m[i].t;
    return 0;
}

static unsigned amd_type(const char *s) {
    static const struct { const char *n; unsigned t; } m[] = {
        {"f64", MM_ET_F64}, {"f32", MM_ET_F32}, {"xf32", MM_ET_TF32}, {"f16", MM_ET_F16},
        {"bf16", MM_ET_BF16}, {"fp8", MM_ET_E4M3FNUZ}, {"bf8", MM_ET_E5M2FNUZ}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!strcmp(s, m[i].n)) return m[i].t;
    return 0;
}

// NVIDIA: SHAPE[.blockN].D.A.B[.C][.SCALE]; AMD: D_MxNxK..., the types attached or after '_'.
static bool parse_qual(qual *q, const char *s, bool amd) {
    memset(q, 0, sizeof *q);
    char buf[128], *tok[8], *save = NULL;
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    for (char *t = strtok_r(buf, amd ? "_" : ".", &save); t && n < 8; t = strtok_r(NULL, amd ? "_" : ".", &save))
        tok[n++] = t;
    if (!amd) {
        const char *kp = strchr(tok[0], 'k');
        if (!kp || n < 4) return false;
        q->k = atoi(kp + 1);
        int i = 1;
        if (!strncmp(tok[1], "block", 5)) q->block = atoi(tok[1] + 5), i = 2;
        q->f16_out = !strcmp(tok[i], "f16");
        q->f64 = !strcmp(tok[i], "f64");
        q->ta = nv_type(tok[i + 1]), q->tb = nv_type(tok[i + 2]);
        if (q->block) q->ue4m3 = !strcmp(tok[n - 1], "ue4m3");
        return q->ta && q->tb;
    }
    // AMD: tok[0] = D type; tok[1] = MxNxK with the type possibly attached (CDNA1/2).
    q->f64 = !strcmp(tok[0], "f64");
    int m, nn, k, used = 0;
    if (sscanf(tok[1], "%dx%dx%d%n", &m, &nn, &k, &used) != 3) return false;
    q->k = k;
    const char *attached = tok[1] + used;
    if (*attached) {
        q->ta = q->tb = amd_type(attached);
        q->amd_1k = n > 2 && !strcmp(tok[2], "1k");
    } else if (n >= 4 && amd_type(tok[n - 2]) && (!strcmp(tok[n - 1], "fp8") || !strcmp(tok[n - 1], "bf8"))) {
        q->ta = amd_type(tok[n - 2]), q->tb = amd_type(tok[n - 1]);
    } else {
        q->ta = q->tb = amd_type(tok[n - 1]);
    }
    return q->ta && q->tb;
}

// The table row that runs q on engine e, with k set to the instruction's (the chain's unit).
static bool find_row(mm_engine_kind *out, int e, const qual *q) {
    char msg[300];
    const mm_engine_kind *r = NULL;
    // CDNA2 keeps CDNA1's bf16 instructions (groups of 2, k 2, 4, 8) beside the _1k ones; the
    // table's one row of them (16x16x2) stands for all three, so k is set from the qualifier.
    const bool cdna2_bf16 = q->ta == MM_ET_BF16 && !q->amd_1k && e == mm_engine_index("cdna2:mfma");
    if (cdna2_bf16) {
        for (size_t i = 0; i < mm_engine_kind_count() && !r; i++) {
            const mm_engine_kind *x = mm_engine_kind_get(i);
            if (x->engine == e && x->types == MM_ET_BF16 && x->group == 2) r = x;
        }
    } else {
        r = mm_engine_find(e, q->ta, q->tb, q->k, q->f16_out, q->block, q->ue4m3, msg, sizeof msg);
    }
    if (!r) return false;
    *out = *r;
    out->k = q->k;
    return r->k == q->k || cdna2_bf16;  // every other qualifier has its own row, of its own k
}

// --- fixture lines

// Float32 bits are read as the engine reads an operand of type t (mm_engine_operand).
static int hexlist(double *v, size_t cap, const char *s, bool f64, unsigned t) {
    int n = 0;
    while (*s && *s != ' ' && (size_t)n < cap) {
        char *end;
        const unsigned long long u = strtoull(s, &end, 16);
        if (f64) {
            memcpy(&v[n], &u, 8);
        } else {
            const uint32_t w = (uint32_t)u;
            float f;
            memcpy(&f, &w, 4);
            v[n] = mm_engine_operand(f, t);
        }
        n++;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static const char *field(const char *line, const char *key) {
    const char *p = strstr(line, key);
    return p ? p + strlen(key) : NULL;
}

// A value in the D type's bits -> double, and back.
static double from_bits(uint64_t u, const qual *q) {
    if (q->f64) {
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    if (q->f16_out) {
        const uint16_t h = (uint16_t)u;
        _Float16 x;
        memcpy(&x, &h, 2);
        return (double)x;
    }
    const uint32_t w = (uint32_t)u;
    float f;
    memcpy(&f, &w, 4);
    return f;
}

static uint64_t to_bits(double d, const qual *q) {
    if (q->f64) {
        uint64_t u;
        memcpy(&u, &d, 8);
        return u;
    }
    if (q->f16_out) {
        const _Float16 x = (_Float16)d;
        uint16_t h;
        memcpy(&h, &x, 2);
        return h;
    }
    const float f = (float)d;
    uint32_t w;
    memcpy(&w, &f, 4);
    return w;
}

typedef struct {
    size_t lines, mismatches, skipped, nan_lines;
    char first[6][600];
} tally;

static char *fixture_dir(void) {
    static char p[1024];
    const char *root = getenv("FPLAB_ROOT");
    snprintf(p, sizeof p, "%s/tests/fixtures/engines", root && *root ? root : ".");
    return p;
}

// Runs every line of one fixture file with the given fault.
static void run_file(tally *t, const char *file, int fault) {
    char engine[64], path[1200];
    snprintf(engine, sizeof engine, "%s", file);
    *strrchr(engine, '.') = 0;
    *strrchr(engine, '_') = ':';
    const int e = mm_engine_index(engine);
    cr_assert_geq(e, 0, "fixture %s names no engine (%s)", file, engine);
    const bool amd = !strncmp(engine, "cdna", 4);
    snprintf(path, sizeof path, "%s/%s", fixture_dir(), file);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    static char line[1 << 16];
    double a[256], b[256], sa[32], sb[32], c;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char qs[128];
        if (sscanf(line, "%127s", qs) != 1) continue;
        qual q;
        mm_engine_kind row;
        cr_assert(parse_qual(&q, qs, amd), "%s: cannot parse qualifier %s", file, qs);
        cr_assert(find_row(&row, e, &q), "%s: no model row for %s", file, qs);
        const char *pk = field(line, " K="), *pa = field(line, " A="), *pb = field(line, " B="),
                   *pc = field(line, " C="), *pd = field(line, " D=");
        cr_assert(pk && pa && pb && pc && pd, "%s: malformed line: %.200s", file, line);
        const int K = atoi(pk);
        const bool in64 = q.f64;
        cr_assert(K > 0 && K <= 256 && hexlist(a, 256, pa, in64, q.ta) == K && hexlist(b, 256, pb, in64, q.tb) == K,
                  "%s: K and the operand lists disagree: %.200s", file, line);
        c = from_bits(strtoull(pc, NULL, 16), &q);
        const uint64_t want = strtoull(pd, NULL, 16);
        const char *psa = field(line, " SA="), *psb = field(line, " SB=");
        if (row.block) {
            cr_assert(psa && psb && hexlist(sa, 32, psa, false, 0) == K / row.block &&
                          hexlist(sb, 32, psb, false, 0) == K / row.block,
                      "%s: block-scaled line without K/%d scales: %.200s", file, row.block, line);
        }
        const double d = mm__engine_dot_fault(&row, q.f16_out, q.ta, q.tb, a, b, row.block ? sa : NULL,
                                              row.block ? sb : NULL, c, (size_t)K, fault);
        const uint64_t got = to_bits(d, &q);
        const bool nan_want = isnan(from_bits(want, &q));
        t->lines++;
        t->nan_lines += nan_want;
        const bool ok = amd && nan_want ? isnan(d) : got == want;
        if (!ok) {
            if (t->mismatches < 6)
                snprintf(t->first[t->mismatches], sizeof t->first[0], "%s %s: got %llx want %llx  (%.300s)", file,
                         qs, (unsigned long long)got, (unsigned long long)want, line);
            t->mismatches++;
        }
    }
    fclose(f);
}

static size_t list_fixtures(char names[][64], size_t cap) {
    DIR *d = opendir(fixture_dir());
    cr_assert_not_null(d, "no fixture directory %s (run from the repository root or set FPLAB_ROOT)",
                       fixture_dir());
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        const size_t l = strlen(de->d_name);
        if (l > 4 && !strcmp(de->d_name + l - 4, ".txt")) snprintf(names[n++], 64, "%s", de->d_name);
    }
    closedir(d);
    return n;
}

Test(engine, every_fixture_bit_for_bit) {
    char names[32][64];
    const size_t n = list_fixtures(names, 32);
    cr_assert_geq(n, 12, "expected a fixture file per engine (12), found %zu", n);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        tally t = {0};
        run_file(&t, names[i], MM__EFAULT_NONE);
        total += t.lines;
        for (size_t j = 0; j < t.mismatches && j < 6; j++) fprintf(stderr, "mismatch: %s\n", t.first[j]);
        cr_expect_eq(t.mismatches, 0, "%s: %zu of %zu dot products differ from MMA-Sim", names[i], t.mismatches,
                     t.lines);
        cr_expect_gt(t.lines, 0, "%s has no cases", names[i]);
    }
    fprintf(stderr, "engine fixtures: %zu dot products in %zu files\n", total, n);
}

// Every engine, faulted either way, disagrees with its fixtures somewhere.
Test(engine, faults_are_caught) {
    char names[32][64];
    const size_t n = list_fixtures(names, 32);
    for (size_t i = 0; i < n; i++)
        for (int fault = MM__EFAULT_FRAC; fault <= MM__EFAULT_RNE; fault++) {
            tally t = {0};
            run_file(&t, names[i], fault);
            cr_expect_gt(t.mismatches, 0, "%s with fault %d: no fixture line notices", names[i], fault);
        }
}

// The table: every engine has rows, every row is consistent, and every engine name is found.
Test(engine, table_is_consistent) {
    for (size_t e = 0; e < mm_engine_count(); e++) {
        cr_assert_eq(mm_engine_index(mm_engine_name(e)), (int)e);
        size_t rows = 0;
        for (size_t i = 0; i < mm_engine_kind_count(); i++) {
            const mm_engine_kind *q = mm_engine_kind_get(i);
            if (q->engine != (int)e) continue;
            rows++;
            cr_assert(q->k > 0 && q->k <= 64 && q->k % q->split == 0, "%s %s k %d", mm_engine_name(e), q->kind, q->k);
            if (q->op == MM_EOP_FUSED) cr_assert(q->frac >= 13 && q->frac <= 35 && (q->out_frac == 23 || q->out_frac == 13));
            if (q->block) cr_assert(q->k % q->block == 0);
            if (q->group) cr_assert(q->k % q->group == 0 || q->op == MM_EOP_PAIRWISE, "%s %s", mm_engine_name(e), q->kind);
        }
        cr_assert_gt(rows, 0, "%s has no rows", mm_engine_name(e));
    }
    cr_assert_eq(mm_engine_index("hopper:WGMMA"), -1);
    char msg[300];
    cr_assert_null(mm_engine_find(mm_engine_index("volta:mma"), MM_ET_E4M3, MM_ET_E4M3, 0, false, 0, false, msg,
                                  sizeof msg));
    cr_assert(strstr(msg, "fp16"), "%s", msg);
}

// Values of float32 / fp16 / bf16 bit patterns (a float, not a double: a signalling NaN's bits
// would not survive the conversion).
static float f32_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static double bf16_bits(uint16_t u) { return f32_bits((uint32_t)u << 16); }
static double f16_bits(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (double)h;
}
static uint32_t bits_f32(double d) {
    const float f = (float)d;
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

// Issue 34: the cases MMA-Sim (commit c78513835c8b) was run on. A negative sum too small for D
// gives +0 in MMA-Sim's NVIDIA fused model (every zero D is +0: docs/engines.md "Signs of
// zero"); an AMD f32 instruction of k = 1 keeps C's -0 (no zero products padded in).
// The operand types' facts come from the format table: each type's format, its smallest normal
// exponent (a subnormal operand's exponent in the models), and the type each format maps back to.
Test(engine, operand_types_from_the_format_table) {
    static const struct {
        unsigned t;
        const char *name;
        int emin;
    } want[] = {{MM_ET_F64, "fp64", -1022},    {MM_ET_F32, "fp32", -126},     {MM_ET_TF32, "tf32", -126},
                {MM_ET_F16, "fp16", -14},      {MM_ET_BF16, "bf16", -126},    {MM_ET_E4M3, "e4m3", -6},
                {MM_ET_E5M2, "e5m2", -14},     {MM_ET_E3M2, "e3m2", -2},      {MM_ET_E2M3, "e2m3", 0},
                {MM_ET_E2M1, "e2m1", 0},       {MM_ET_E4M3FNUZ, "e4m3fnuz", -7}, {MM_ET_E5M2FNUZ, "e5m2fnuz", -15}};
    cr_assert_eq(sizeof want / sizeof want[0], (size_t)MM_ET_COUNT);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const fmt_t *f = mm_engine_type_format(want[i].t);
        cr_assert(f, "type %s has no format", want[i].name);
        cr_assert_eq(f->emin, want[i].emin, "type %s: emin %d, expected %d", want[i].name, f->emin, want[i].emin);
        fmt_t g;
        cr_assert_eq(fmt_from_name(&g, want[i].name), FMT_OK);
        const unsigned back = mm_engine_type_of(&g);
        cr_assert_eq(back, want[i].t == MM_ET_F32 ? MM_ET_F32 | MM_ET_TF32 : want[i].t, "%s: type 0x%x", want[i].name,
                     back);
    }
    cr_assert_null(mm_engine_type_format(0));
    cr_assert_null(mm_engine_type_format(1u << MM_ET_COUNT));
}

Test(engine, signs_of_zero_as_mmasim) {
    double a[16] = {0}, b[16] = {0};
    // hopper:wgmma bf16 m64nNk16: a = 0x8080 (-2^-126), b = 0x3380 (2^-24), C = +0 -> D = +0.
    const mm_engine_kind *q = mm_engine_find(mm_engine_index("hopper:wgmma"), MM_ET_BF16, MM_ET_BF16, 16, false,
                                             0, false, NULL, 0);
    cr_assert_not_null(q);
    a[0] = bf16_bits(0x8080), b[0] = bf16_bits(0x3380);
    cr_assert_eq(bits_f32(mm_engine_dot(q, false, MM_ET_BF16, MM_ET_BF16, a, b, NULL, NULL, 0.0, 16)), 0u);
    // The same sum with C = -0: still +0.
    cr_assert_eq(bits_f32(mm_engine_dot(q, false, MM_ET_BF16, MM_ET_BF16, a, b, NULL, NULL, -0.0, 16)), 0u);
    // volta:mma m8n8k4 f16 D: a = 0x8400 (-2^-14), b = 0x0400 (2^-14), C = +0 -> D = +0 (f16 0x0000).
    q = mm_engine_find(mm_engine_index("volta:mma"), MM_ET_F16, MM_ET_F16, 4, true, 0, false, NULL, 0);
    cr_assert_not_null(q);
    memset(a, 0, sizeof a), memset(b, 0, sizeof b);
    a[0] = f16_bits(0x8400), b[0] = f16_bits(0x0400);
    const double d16 = mm_engine_dot(q, true, MM_ET_F16, MM_ET_F16, a, b, NULL, NULL, 0.0, 4);
    cr_assert(d16 == 0.0 && !signbit(d16), "volta f16 D: %a", d16);
    // cdna1:mfma f32 k = 1 (32x32x1): K = 1, a = -1, b = 0, C = -0 -> -0 (fma(-1, 0, -0)).
    q = mm_engine_find(mm_engine_index("cdna1:mfma"), MM_ET_F32, MM_ET_F32, 1, false, 0, false, NULL, 0);
    cr_assert_not_null(q);
    cr_assert_eq(q->k, 1);
    a[0] = -1.0, b[0] = 0.0;
    const double dz = mm_engine_dot(q, false, MM_ET_F32, MM_ET_F32, a, b, NULL, NULL, -0.0, 1);
    cr_assert(dz == 0.0 && signbit(dz), "cdna1 k1: %a", dz);
}

// Each engine's k are its instructions' own: a :k the engine lacks is refused with the list
// (never run as another k), and every AMD f32 k (1, 2, 4) has its row.
Test(engine, k_is_never_mapped_to_another) {
    char msg[300];
    for (const char *const *e = (const char *const[]){"cdna1:mfma", "cdna2:mfma", "cdna3:mfma", NULL}; *e; e++)
        for (int k = 1; k <= 4; k *= 2) {
            const mm_engine_kind *q = mm_engine_find(mm_engine_index(*e), MM_ET_F32, MM_ET_F32, k, false, 0, false,
                                                     msg, sizeof msg);
            cr_assert(q && q->k == k, "%s f32 k%d: %s", *e, k, msg);
        }
    const mm_engine_kind *q = mm_engine_find(mm_engine_index("hopper:mma"), MM_ET_F64, MM_ET_F64, 8, false, 0, false,
                                             msg, sizeof msg);
    cr_assert(q && q->k == 8, "hopper:mma f64 k8: %s", msg);
    cr_assert_null(mm_engine_find(mm_engine_index("cdna1:mfma"), MM_ET_F32, MM_ET_F32, 8, false, 0, false, msg,
                                  sizeof msg));
    cr_assert(strstr(msg, "k = 8") && strstr(msg, "4, 2, 1"), "%s", msg);
    cr_assert_null(mm_engine_find(mm_engine_index("ampere:mma"), MM_ET_F64, MM_ET_F64, 16, false, 0, false, msg,
                                  sizeof msg));
    cr_assert(strstr(msg, ": 4 "), "%s", msg);
    char ks[96];
    cr_assert_str_eq(mm_engine_ks(mm_engine_index("hopper:wgmma"), ks, sizeof ks), "32, 16, 8");
}

// tf32/xf32 operands are the top 19 bits of the float32 register: a NaN whose payload lies only
// in the 13 dropped bits reads as inf (MMA-Sim truncates the bits first: 0x7f800001 gives inf).
Test(engine, tf32_reads_the_top_19_bits) {
    cr_assert_eq(bits_f32(mm_engine_operand(f32_bits(0x7f800001), MM_ET_TF32)), 0x7f800000u);
    cr_assert_eq(bits_f32(mm_engine_operand(f32_bits(0xff801fff), MM_ET_TF32)), 0xff800000u);
    cr_assert(isnan(mm_engine_operand(f32_bits(0x7f802000), MM_ET_TF32)), "a payload in the top bits stays NaN");
    cr_assert(isnan(mm_engine_operand(f32_bits(0x7f800001), MM_ET_F32)), "f32 operands are used whole");
    cr_assert_eq(bits_f32(mm_engine_operand(f32_bits(0x3f801fff), MM_ET_TF32)), 0x3f800000u);
    const mm_engine_kind *q = mm_engine_find(mm_engine_index("hopper:wgmma"), MM_ET_TF32, MM_ET_TF32, 0, false, 0,
                                             false, NULL, 0);
    cr_assert_not_null(q);
    double a[8] = {0}, b[8] = {0};
    a[0] = mm_engine_operand(f32_bits(0x7f800001), MM_ET_TF32), b[0] = 1.0;
    cr_assert_eq(bits_f32(mm_engine_dot(q, false, MM_ET_TF32, MM_ET_TF32, a, b, NULL, NULL, 0.0, 8)), 0x7f800000u);
}

// --- engines as accumulators of scaled matmul (kernels/scaled_mm.h)

#include "kernels/scaled_mm.h"

Test(engine, accumulator_specs) {
    char msg[300], name[80];
    mm_acc a;
    cr_assert_eq(mm_acc_from_name(&a, "hopper:wgmma", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(a.engine == mm_engine_index("hopper:wgmma") + 1 && a.engine_k == 0 && !a.engine_f16);
    cr_assert(mm_acc_is_emulated(&a));
    cr_assert_eq(mm_acc_from_name(&a, "ampere:mma:k8:f16:promote=128", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert(a.engine_k == 8 && a.engine_f16 && a.promote_every == 128);
    cr_assert_str_eq(mm_acc_name(&a, name, sizeof name), "ampere:mma:k8:f16:promote=128");
    const char *bad[] = {"hopper:wgmma:rtz", "hopper:wgmma:k0", "hopper:wgmma:k8:k16", "hopper:wgmma:promote=0",
                         "hopper:wgmma:f32", "hopper:mfma"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_neq(mm_acc_from_name(&a, bad[i], msg, sizeof msg), MM_OK, "'%s' accepted", bad[i]);
    // :kN must be one of the engine's k, promote=N a multiple of a k (issue 34: promote=33 gave NaN).
    const char *bad_k[][2] = {{"cdna1:mfma:k3", "4, 2, 1"}, {"hopper:wgmma:promote=33", "32, 16, 8"},
                              {"hopper:wgmma:k16:promote=24", "(16)"}, {"volta:mma:k8", "k = 8"}};
    for (size_t i = 0; i < sizeof bad_k / sizeof bad_k[0]; i++) {
        cr_assert_eq(mm_acc_from_name(&a, bad_k[i][0], msg, sizeof msg), MM_EINVAL, "'%s' accepted", bad_k[i][0]);
        cr_assert(strstr(msg, bad_k[i][1]), "'%s': %s", bad_k[i][0], msg);
    }
    cr_assert_eq(mm_acc_from_name(&a, "cdna1:mfma:k1", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert_eq(mm_acc_from_name(&a, "ampere:mma:promote=12", msg, sizeof msg), MM_OK, "%s", msg);
    // ... which the operands then refuse: bf16 runs m16n8k16.
    fmt_t bf16, e4m3, fp32, fp64;
    fmt_from_name(&bf16, "bf16"), fmt_from_name(&e4m3, "e4m3"), fmt_from_name(&fp32, "fp32"), fmt_from_name(&fp64, "fp64");
    cr_assert_eq(mm_acc_check_operands(&a, &bf16, &bf16, 0, msg, sizeof msg), MM_EINVAL);
    cr_assert(strstr(msg, "promote=12") && strstr(msg, "k = 16") && strstr(msg, "bf16"), "%s", msg);
    cr_assert_eq(mm_acc_check_operands(&a, &fp64, &fp64, 0, msg, sizeof msg), MM_OK, "f64 k4: %s", msg);
    cr_assert_eq(mm_acc_check_operands(&a, &fp32, &fp32, 0, msg, sizeof msg), MM_EINVAL, "tf32 runs k8");
    cr_assert_eq(mm_acc_from_name(&a, "hopper:wgmma:promote=16", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert_eq(mm_acc_check_operands(&a, &e4m3, &e4m3, 0, msg, sizeof msg), MM_EINVAL);
    cr_assert(strstr(msg, "k = 32"), "%s", msg);
    cr_assert_eq(mm_acc_check_operands(&a, &bf16, &bf16, 0, msg, sizeof msg), MM_OK, "%s", msg);
    // The emulated spec grammar is unchanged by the engines.
    cr_assert_eq(mm_acc_from_name(&a, "m13:rtz:promote=128", msg, sizeof msg), MM_OK, "%s", msg);
    cr_assert_str_eq(mm_acc_name(&a, name, sizeof name), "e8m13:promote=128:rtz");
}

// Deterministic e4m3 values from a small generator (every value exact in e4m3).
static float e4m3_value(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    const int m = (int)(*s >> 29), e = (int)((*s >> 24) & 7) - 4, sg = (*s >> 23) & 1;
    const float v = ldexpf(1.0f + m / 8.0f, e);
    return sg ? -v : v;
}

// mm_cpu and mm_ref under an engine: the instruction chained along K, bit for bit the model's
// chain; with C as the chain's first C (beta 1) and with promotion every 64 products.
Test(engine, matmul_is_the_chained_instruction) {
    enum { M = 5, N = 3, K = 128 };
    float a[M * K], b[K * N], c0[M * N], c[M * N], r[M * N];
    uint32_t s = 7;
    for (int i = 0; i < M * K; i++) a[i] = e4m3_value(&s);
    for (int i = 0; i < K * N; i++) b[i] = e4m3_value(&s);
    for (int i = 0; i < M * N; i++) c0[i] = (float)(i - 7) * 0.37f;
    mm_operand A = {.x = a, .ld = K}, B = {.x = b, .ld = N};
    fmt_from_name(&A.fmt, "e4m3");
    B.fmt = A.fmt;
    const mm_engine_kind *q = mm_engine_find(mm_engine_index("hopper:wgmma"), MM_ET_E4M3, MM_ET_E4M3, 0, false, 0,
                                             false, NULL, 0);
    cr_assert_not_null(q);
    char msg[300];
    for (int pass = 0; pass < 3; pass++) {
        mm_opts o;
        mm_opts_default(&o);
        cr_assert_eq(mm_acc_from_name(&o.acc, pass == 2 ? "hopper:wgmma:promote=64" : "hopper:wgmma", msg, sizeof msg),
                     MM_OK);
        o.beta = pass == 1 ? 1.0f : 0.0f;
        memcpy(c, c0, sizeof c), memcpy(r, c0, sizeof r);
        cr_assert_eq(mm_validate(&A, &B, M, N, K, &o, msg, sizeof msg), MM_OK, "%s", msg);
        cr_assert_eq(mm_cpu(c, N, &A, &B, M, N, K, &o), MM_OK);
        cr_assert_eq(mm_ref(r, N, &A, &B, M, N, K, &o), MM_OK);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double x[K], y[K];
                for (int k = 0; k < K; k++) x[k] = a[i * K + k], y[k] = b[k * N + j];
                float want;
                if (pass == 2) {
                    const float d0 = (float)mm_engine_dot(q, false, MM_ET_E4M3, MM_ET_E4M3, x, y, NULL, NULL, 0.0, 64);
                    const float d1 = (float)mm_engine_dot(q, false, MM_ET_E4M3, MM_ET_E4M3, x + 64, y + 64, NULL, NULL,
                                                          0.0, 64);
                    want = 0.0f + d0;
                    want = want + d1;
                } else {
                    want = (float)mm_engine_dot(q, false, MM_ET_E4M3, MM_ET_E4M3, x, y, NULL, NULL,
                                                pass == 1 ? c0[i * N + j] : 0.0, K);
                }
                cr_assert(c[i * N + j] == want && r[i * N + j] == want, "pass %d (%d,%d): cpu %a ref %a model %a", pass,
                          i, j, c[i * N + j], r[i * N + j], want);
            }
    }
    // Operands the engine does not take are refused with the types it does.
    mm_opts o;
    mm_opts_default(&o);
    mm_acc_from_name(&o.acc, "volta:mma", msg, sizeof msg);
    cr_assert_eq(mm_validate(&A, &B, M, N, K, &o, msg, sizeof msg), MM_EINVAL);
    cr_assert(strstr(msg, "fp16"), "%s", msg);
}

// --- engines in precision policies (autocast/policy.h): parsed, checked against the operand
// sites' formats, written back and read back equal.

#include "autocast/policy.h"

Test(engine, policy_accumulator_lines) {
    static char text[1 << 14], back[1 << 14];
    char msg[512];
    cr_assert_gt(ac_preset_text("fp8-delayed", text, sizeof text), 0);
    strcat(text, "accumulator hopper:wgmma:promote=128\naccumulator fp32 lm_head.*\n");
    ac_policy p, q;
    cr_assert_eq(ac_policy_parse(&p, text, "test", msg, sizeof msg), AC_OK, "%s", msg);
    cr_assert_eq(p.acc[AC_PROJ_DOWN][AC_FPROP].engine, mm_engine_index("hopper:wgmma") + 1);
    cr_assert_eq(p.acc[AC_PROJ_DOWN][AC_FPROP].promote_every, 128);
    cr_assert_gt(ac_policy_text(&p, back, sizeof back), 0);
    cr_assert(strstr(back, "accumulator hopper:wgmma:promote=128"), "%s", back);
    cr_assert_eq(ac_policy_parse(&q, back, "round trip", msg, sizeof msg), AC_OK, "%s", msg);
    cr_assert(ac_policy_equal(&p, &q));
    // fp8 operands on an engine without fp8 instructions: refused, naming the operands.
    cr_assert_gt(ac_preset_text("fp8-delayed", text, sizeof text), 0);
    strcat(text, "accumulator ampere:mma\naccumulator fp32 lm_head.*\n");
    cr_assert_neq(ac_policy_parse(&p, text, "test", msg, sizeof msg), AC_OK);
    cr_assert(strstr(msg, "ampere:mma") && strstr(msg, "e4m3"), "%s", msg);
}
