// cmd_matmul_check_ext.c: the external mode of `fplab matmul-check` (--result): A and B as the
// user's kernel took them (.npy element values or codes, with the recipe's tile scales) and the
// C it wrote, verified as one row; --errors writes the per-output columns. The files are read
// here; the rules on their contents (values of the formats, the tile grids, B's tile transposed,
// sane scales) are mm_check_from_values's.
#include <math.h>
#include <string.h>

#include "cmd_matmul_check.h"
#include "formats/codec.h"
#include "npy.h"
#include "util/fileio.h"

// The float32 values of a .npy file: float32 or float64 values (each a float32), or with `codes`
// (the format of the codes; NULL: values only) unsigned codes of it, decoded (the width
// fmt_code_bytes gives it, as `fplab quantize --codes/--scales` and fplab.quantize write them).
// *rows, *cols: its 2-D shape (a 1-D file is one row). what names the option in messages.
static float *read_f32_or_codes(const char *path, const char *what, const fmt_t *codes, size_t *rows, size_t *cols) {
    npy_array a;
    char msg[512];
    CLI_CHECK(npy_read(path, &a, msg, sizeof msg) == NPY_OK, "matmul-check: %s: %s", what, msg);
    *rows = a.ndim == 1 ? 1 : a.shape[0], *cols = a.ndim == 1 ? a.shape[0] : a.shape[1];
    if (a.dtype == NPY_F4) return a.f4;
    // Every check before the buffer: an exit with it allocated would be a leak to the sanitizers.
    if (a.dtype != NPY_F8) {
        CLI_CHECK(codes, "matmul-check: %s '%s' holds uint%zu codes; expected float32 or float64 values", what, path,
                  8 * npy_itemsize(a.dtype));
        const size_t want = fmt_code_bytes(codes);
        CLI_CHECK(npy_itemsize(a.dtype) == want, "matmul-check: %s '%s' holds uint%zu codes; %s codes are uint%zu "
                  "(as 'fplab quantize --codes/--scales' writes them)", what, path, 8 * npy_itemsize(a.dtype),
                  codes->name, 8 * want);
        size_t bad = 0;
        CLI_CHECK(fmt_codes_check(codes, a.data, a.n, &bad) == FMT_OK, "matmul-check: %s '%s': element [%zu, %zu] "
                  "is not a %d-bit code of %s", what, path, bad / *cols, bad % *cols, codes->bits, codes->name);
    } else {
        for (size_t i = 0; i < a.n; i++)
            CLI_CHECK((float)a.f8[i] == a.f8[i] || isnan(a.f8[i]), "matmul-check: %s '%s': element %zu (%.17g) is "
                      "not a float32 value; expected values of the format", what, path, i, a.f8[i]);
    }
    float *y = malloc(a.n ? a.n * sizeof *y : 1);
    CLI_CHECK_LIB(y ? FMT_OK : FMT_ENOMEM, "the array does not fit in memory");
    if (a.dtype != NPY_F8) {
        CLI_CHECK_LIB(fmt_decode_f32(codes, y, a.data, a.n), "decoding the codes");
        npy_free(&a);
        return y;
    }
    for (size_t i = 0; i < a.n; i++) y[i] = (float)a.f8[i];
    npy_free(&a);
    return y;
}

// The files of the external mode, as read.
typedef struct {
    float *x[2], *tiles[2], *C, *Cin;  // A, B; their tile scales (NULL: none given)
    size_t ntiles[2];
    mm_vmat A, B;                      // the operands, pointing into x
    char what[2][FIO_PATH_MAX + 32], swhat[2][FIO_PATH_MAX + 32];
} ext_data;

// Operand s (0: A, 1: B): its values or codes, and its tile scales' file where given (values or
// codes of the recipe's scale format; with the recipe none, values only: the library refuses them).
static void ext_read(ext_data *d, int s, const mc_cfg *k, size_t *rows, size_t *cols) {
    const char *vopt = s ? "--b-values" : "--a-values", *sopt = s ? "--b-scales" : "--a-scales";
    const char *vpath = s ? k->b_values : k->a_values, *spath = s ? k->b_scales : k->a_scales;
    d->x[s] = read_f32_or_codes(vpath, vopt, s ? &k->p.fb : &k->p.fa, rows, cols);
    CLI_CHECK(*rows >= 1 && *cols >= 1, "matmul-check: %s '%s' is %zu x %zu; expected at least one row and one "
              "column (an empty product has no output to verify)", vopt, vpath, *rows, *cols);
    snprintf(d->what[s], sizeof d->what[s], "%s '%s'", vopt, vpath);
    snprintf(d->swhat[s], sizeof d->swhat[s], spath ? "%s '%s'" : "%s", sopt, spath);
    if (spath) {
        size_t sr, sc;
        d->tiles[s] = read_f32_or_codes(spath, sopt, k->p.sc.none ? NULL : &k->p.sc.scale_fmt, &sr, &sc);
        d->ntiles[s] = sr * sc;
    }
}

// The external mode's files into d, k's sizes from them, and the operands.
static void ext_load(ext_data *d, mc_cfg *k) {
    size_t ar, ac, br, bc, cr, cc;
    ext_read(d, 0, k, &ar, &ac);
    ext_read(d, 1, k, &br, &bc);
    CLI_CHECK(ac == br, "matmul-check: A '%s' is %zu x %zu and B '%s' is %zu x %zu; expected A (M x K) and "
              "B (K x N)", k->a_values, ar, ac, k->b_values, br, bc);
    k->p.M = ar, k->p.K = ac, k->p.N = bc;
    mc_check_memory(k);
    d->C = read_f32_or_codes(k->result, "--result", NULL, &cr, &cc);
    CLI_CHECK(cr == k->p.M && cc == k->p.N, "matmul-check: --result '%s' is %zu x %zu; expected M x N = %zu x %zu",
              k->result, cr, cc, k->p.M, k->p.N);
    if (k->c_in) {
        d->Cin = read_f32_or_codes(k->c_in, "--c-in", NULL, &cr, &cc);
        CLI_CHECK(cr == k->p.M && cc == k->p.N, "matmul-check: --c-in '%s' is %zu x %zu; expected %zu x %zu",
                  k->c_in, cr, cc, k->p.M, k->p.N);
    }
    mm_values v[2];
    for (int s = 0; s < 2; s++) {
        const float ts = s ? k->b_ts : k->a_ts;
        v[s] = (mm_values){.x = d->x[s], .tiles = d->tiles[s], .ntiles = d->ntiles[s], .ts = ts > 0 ? ts : 1.0f,
                           .what = d->what[s], .scales_what = d->swhat[s]};
    }
    char msg[2 * FIO_PATH_MAX + 512];
    const int st = mm_check_from_values(&d->A, &d->B, &k->p, &v[0], &v[1], msg, sizeof msg);
    CLI_CHECK_LIB(st == MM_ENOMEM ? FMT_ENOMEM : FMT_OK, "the scales do not fit in memory");
    CLI_CHECK(st == MM_OK, "matmul-check: %s", msg[0] ? msg : "the operands do not make a valid product");
    // The tile arrays were expanded into the operands' scales: no longer read.
    free(d->tiles[0]), free(d->tiles[1]);
    d->tiles[0] = d->tiles[1] = NULL;
}

// --errors: per-output float64 rows (exact, err, err_ulp, bound_ulp, judged, in_bound).
static void write_errors(const char *path, const double *ex, const double *err, const double *ulp,
                         const double *bnd, const unsigned char *jd, const unsigned char *ib, size_t n) {
    double *t = malloc(n * 6 * sizeof *t);
    CLI_CHECK_LIB(t ? FMT_OK : FMT_ENOMEM, "the per-output errors do not fit in memory");
    for (size_t i = 0; i < n; i++) {
        double *r = &t[i * 6];
        r[0] = ex[i], r[1] = err[i], r[2] = ulp[i], r[3] = bnd[i], r[4] = jd[i], r[5] = ib[i];
    }
    const size_t shape[2] = {n, 6};
    char msg[512];
    CLI_CHECK(npy_write(path, "<f8", sizeof(double), t, 2, shape, msg, sizeof msg) == NPY_OK, "%s", msg);
    free(t);
}

int mc_external(mc_cfg *k) {
    ext_data d = {0};
    ext_load(&d, k);
    const size_t n = k->p.M * k->p.N;
    if (k->outfmt == CLI_OUT_TABLE) {
        printf("matmul-check: M=%zu N=%zu K=%zu a=%s b=%s out=%s scale=%s result=%s alpha=%g beta=%g\n", k->p.M,
               k->p.N, k->p.K, k->p.fa.name, k->p.fb.name, k->p.o.out_fmt.name, k->sname, k->result, k->p.o.alpha,
               k->p.o.beta);
        fflush(stdout);
    }
    double *ex = NULL, *err = NULL, *ulp = NULL, *bnd = NULL;
    unsigned char *jd = NULL, *ib = NULL;
    if (k->errors) {
        ex = malloc(n * sizeof *ex), err = malloc(n * sizeof *err), ulp = malloc(n * sizeof *ulp);
        bnd = malloc(n * sizeof *bnd), jd = malloc(n), ib = malloc(n);
        CLI_CHECK_LIB(ex && err && ulp && bnd && jd && ib ? FMT_OK : FMT_ENOMEM, "the per-output errors do not fit");
    }
    const mm_verify_outputs out = {.exact = ex, .err = err, .err_ulp = ulp, .bound_ulp = bnd, .judged = jd,
                                   .in_bound = ib};
    mc_row row = {.name = k->result, .time_s = NAN};
    mc_verify_row(&row, &out, d.C, d.Cin, &d.A.op, &d.B.op, k, k->u, k->expect, true);
    const int rc = mc_report(k, &row, 1);
    if (k->errors) write_errors(k->errors, ex, err, ulp, bnd, jd, ib, n);
    mm_vmat_free(&d.A), mm_vmat_free(&d.B);
    free(d.x[0]), free(d.x[1]), free(d.C), free(d.Cin);
    free(ex), free(err), free(ulp), free(bnd), free(jd), free(ib);
    return rc;
}
