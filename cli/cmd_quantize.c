// cmd_quantize.c: `fplab quantize IN.npy OUT.npy --to FORMAT [...]`: quantize-dequantize a
// float32/float64 tensor with a scaling recipe and write the float32 result; optionally also the
// element codes (--codes) and the tile scales as codes of the scale format (--scales), as the
// Python binding's quantize() returns them in .codes and .scales.
// The work is fmt_quantize_f32 (or fmt_round_f64 for float64 input without scaling); OUT,
// --codes and --scales are written through fileio.h's atomic writer and committed together
// (fio_commit_all), so none is half-written and all are untouched on any error.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/codec.h"
#include "formats/qerror.h"
#include "formats/scale.h"
#include "npy.h"
#include "util/fileio.h"

static void help(FILE *fp) {
    fprintf(fp,
            "usage: fplab quantize IN.npy OUT.npy --to FORMAT [--round MODE] [--overflow P]\n"
            "                      [--scale RECIPE] [--flush] [--seed N] [--sr-bits B] [--sr-variant V]\n"
            "                      [--stats]\n"
            "                      [--codes CODES.npy] [--scales SCALES.npy]\n\n"
            "Reads IN.npy ('<f4' or '<f8', 1-D or 2-D, C order; 1-D is one row), rounds it to\n"
            "FORMAT under the scaling RECIPE and writes the dequantized values as float32 OUT.npy\n"
            "with the shape of IN. OUT (and --codes, --scales) are written to temporary files and\n"
            "renamed together: on any error every one of them is untouched.\n"
            "float64 input: with --scale none each value is rounded directly from float64\n"
            "(fmt_round_f64) and the result stored as float32 (exact for formats up to fp32);\n"
            "with any other recipe the input is first rounded to float32 (nearest-even), which\n"
            "can double-round.\n"
            "Overflow: a recipe with a scale saturates unless --overflow says otherwise (OCP MX\n"
            "clamps scaled values to the element's max: 500 in an MX e4m3 block becomes 448, not\n"
            "NaN); a plain cast (--scale none) follows IEEE, as NumPy and ml_dtypes do.\n\n"
            "options (default in brackets):\n"
            "  --to FORMAT     element format (see 'fplab finfo'), or a scheme (mxfp8, mxfp8_e5m2,\n"
            "                  mxfp6_e3m2, mxfp6_e2m3, mxfp4, mxint8, nvfp4: its element format, and\n"
            "                  its recipe unless --scale is given); required []\n"
            "  --round MODE    rne, rna, rtz, rup, rdn, rto, sr (sr:a, sr:b, sr:c: with its variant) [rne]\n"
            "  --overflow P    ieee, or IEEE P3109's saturate (satfinite), satpropagate, satnone\n"
            "                  (see 'fplab cast --help') [saturate with a scaling recipe, ieee with none]\n"
            "  --scale RECIPE  none, tensor, row, col, mx (block:32:e8m0), nvfp4 (block:16:e4m3\n"
            "                  + fp32 tensor scale; nvfp4:4over6: Four Over Six), fp8block1x128,\n"
            "                  fp8block128x128 (Transformer Engine's; :pow2 for e8m0 scales),\n"
            "                  block:K:SCALEFMT, tile:RxC:SCALEFMT; then optionally the scale\n"
            "                  rounding :ocp, :up, :rne, :ceil, :even or :rceil (torchao's FLOOR,\n"
            "                  CEIL, EVEN, RCEIL are ocp, ceil, even, rceil), :recip (multiply by\n"
            "                  the float32 reciprocal, as kernels do, instead of the exact x / s)\n"
            "                  and :nanblock (a block holding an inf or NaN gets the scale NaN and\n"
            "                  becomes all NaN, as microxcaling and torchao do) [none]\n"
            "  --flush         flush subnormal results to zero [off]\n"
            "  --seed N        stochastic rounding key (element i, row-major, draws counter i) [0]\n"
            "  --sr-bits B     random bits per stochastic rounding, 1..32 [32]\n"
            "  --sr-variant V  IEEE P3109's stochastic rounding variant a, b or c [a]\n"
            "  --codes FILE    also write the element codes to FILE (.npy, IN's shape; uint8 for\n"
            "                  formats of 8 bits or fewer, uint16 up to 16, uint32 up to 32): the\n"
            "                  codes of the element values before the scale is applied, as\n"
            "                  fplab.quantize(...).codes [not written]\n"
            "  --scales FILE   also write the tile scales as codes of the scale format to FILE\n"
            "                  (.npy: e8m0 for mx, e4m3 for nvfp4, fp32 for tensor/row/col, as\n"
            "                  uint8/uint16/uint32; shape (tile rows, tiles per row), or (tiles,)\n"
            "                  for a 1-D IN under a one-row recipe such as mx: as\n"
            "                  fplab.quantize(...).scales). x ~= decode(code) * decode(scale) *\n"
            "                  tensor_scale (see --stats); not with --scale none [not written]\n"
            "                  OUT, --codes and --scales must be distinct files, none of them IN\n"
            "  --stats         print n, overflow, underflow, subnormal, nan_in, invalid, amax,\n"
            "                  scales_clipped, scales_nan, tensor_scale and the error of OUT against\n"
            "                  IN (as float32; over the elements where both are finite): mse,\n"
            "                  sqnr_db = 10 log10(sum x^2 / sum (y - x)^2), max_abs_err, max_rel_err\n"
            "                  (over x != 0), err_nonfinite (elements left out), as 'key: value'\n"
            "                  lines [off]\n"
            "  -h, --help      this text\n\n");
    // Examples as plain text (no printf conversions): pasted into bash from the repository root,
    // they write only into a directory of their own (mktemp -d).
    fputs("examples:\n"
          "  # $d/x.npy: float32 [500, 1] (with NumPy: np.save(d + '/x.npy', np.float32([500, 1])))\n"
          "  d=$(mktemp -d)\n"
          "  { printf '\\x93NUMPY\\x01\\x00\\x76\\x00'; printf '%-117s\\n' \"{'descr': '<f4', "
          "'fortran_order': False, 'shape': (2,), }\"; "
          "printf '\\x00\\x00\\xfa\\x43\\x00\\x00\\x80\\x3f'; } > $d/x.npy\n"
          "  build/fplab quantize $d/x.npy $d/y.npy --to e4m3 --scale mx --stats   # 500 -> 448, 1 -> 1\n"
          "  od -An -f -j128 $d/y.npy\n"
          "  build/fplab quantize $d/x.npy $d/y.npy --to e2m1 --scale nvfp4 --round sr --seed 1\n"
          "  build/fplab quantize $d/x.npy $d/y.npy --to e4m3 --scale mx --overflow ieee   # 500 -> NaN\n",
          fp);
}

static void print_stats(const fmt_stats *s, const fmt_quant_info *info, const fmt_qerror *qe) {
    printf("n: %llu\noverflow: %llu\nunderflow: %llu\nsubnormal: %llu\nnan_in: %llu\ninvalid: %llu\n",
           (unsigned long long)s->n, (unsigned long long)s->overflow, (unsigned long long)s->underflow,
           (unsigned long long)s->subnormal, (unsigned long long)s->nan_in, (unsigned long long)s->invalid);
    printf("amax: %.17g\nscales_clipped: %llu\nscales_nan: %llu\ntensor_scale: %.17g\n", s->amax,
           (unsigned long long)info->scales_clipped, (unsigned long long)info->scales_nan,
           (double)info->tensor_scale);
    // The error of OUT against IN (as float32), over the elements where both are finite.
    printf("mse: %.17g\nsqnr_db: %.17g\nmax_abs_err: %.17g\nmax_rel_err: %.17g\nerr_nonfinite: %llu\n", qe->mse,
           qe->sqnr_db, qe->max_abs, qe->max_rel, (unsigned long long)qe->nonfinite);
}

int cmd_quantize(int argc, char **argv) {
    static const struct option lo[] = {
        {"to", required_argument, 0, 't'},      {"round", required_argument, 0, 'r'},
        {"overflow", required_argument, 0, 'o'}, {"scale", required_argument, 0, 'S'},
        {"flush", no_argument, 0, 'F'},         {"seed", required_argument, 0, 's'},
        {"sr-bits", required_argument, 0, 'b'}, {"stats", no_argument, 0, 'x'},
        {"sr-variant", required_argument, 0, 'v'},
        {"codes", required_argument, 0, 'c'},   {"scales", required_argument, 0, 'C'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    char *pos[argc + 1];
    int npos = cli_split_args(&argc, argv, lo, pos);
    argv[0] = "fplab quantize";
    fmt_round_opts o = {0};
    const char *to = NULL, *scale = "none", *codes_path = NULL, *scales_path = NULL;
    bool stats_on = false, overflow_given = false, scale_given = false;
    for (int c; (c = getopt_long(argc, argv, "h", lo, NULL)) != -1;) {
        switch (c) {
        case 't': to = optarg; break;
        case 'r': cli_parse_round(&o, optarg); break;
        case 'o': o.overflow = cli_parse_overflow(optarg), overflow_given = true; break;
        case 'S': scale = optarg, scale_given = true; break;
        case 'F': o.flush_subnormals = true; break;
        case 's': o.seed = cli_parse_u64(optarg, "--seed"); break;
        case 'b': o.sr_bits = (int)cli_parse_long(optarg, "--sr-bits", 1, 32); break;
        case 'v': o.sr_variant = cli_parse_sr_variant(optarg); break;
        case 'x': stats_on = true; break;
        case 'c': codes_path = optarg; break;
        case 'C': scales_path = optarg; break;
        case 'h': help(stdout); return 0;
        default: cli_usage_error("quantize");
        }
    }
    CLI_CHECK(npos == 2, "quantize: expected IN.npy and OUT.npy, got %d arguments (see 'fplab quantize --help')", npos);
    CLI_CHECK(to, "quantize: --to FORMAT is required (e.g. --to e4m3)");
    const char *in_path = pos[0], *out_path = pos[1];
    // No output may be the input, and all outputs must be distinct (a later rename would replace
    // an earlier output): by name, or as one existing file.
    const char *outs[3] = {out_path, codes_path, scales_path}, *out_names[3] = {"OUT", "--codes", "--scales"};
    const fio_input in[1] = {{"IN", in_path, false}};
    char msg[512];
    for (int i = 0; i < 3; i++) {
        if (!outs[i]) continue;
        CLI_CHECK(outs[i][0], "quantize: %s: empty path; expected FILE.npy", out_names[i]);
        CLI_CHECK(fio_refuse_inputs(out_names[i] + (i ? 2 : 0), outs[i], in, 1, msg, sizeof msg) == FIO_OK,
                  "quantize: %s (write to another path)", msg);
        for (int j = 0; j < i; j++)
            CLI_CHECK(!outs[j] || !fio_same_target(outs[i], outs[j]),
                      "quantize: %s '%s' is the same file as %s '%s'; expected a distinct path for each output",
                      out_names[i], outs[i], out_names[j], outs[j]);
    }
    fmt_t f;
    // A scheme (--to mxfp4) gives the element format and, unless --scale says otherwise, its recipe.
    const char *scheme_recipe = cli_parse_elem(&f, to, "--to");
    if (scheme_recipe && !scale_given) scale = scheme_recipe;
    fmt_scaling sc;
    int st = fmt_scaling_from_name(&sc, scale, msg, sizeof msg);
    if (st != FMT_OK && msg[0]) cli_die("--scale: %s", msg);  // the library's message names the spec
    CLI_CHECK(st == FMT_OK, "--scale '%s': unknown recipe; expected none|tensor|row|col|mx|nvfp4|block:K:SCALEFMT|"
                            "tile:RxC:SCALEFMT", scale);
    // The recipe's own default (saturate when it has a scale) unless --overflow was given.
    if (!overflow_given) o.overflow = fmt_scaling_default_opts(&sc).overflow;
    CLI_CHECK(!scales_path || !sc.none, "quantize: --scales '%s': the recipe 'none' has no scales; expected a "
              "--scale recipe (e.g. --scale mx)", scales_path);
    CLI_CHECK(fmt_values_fit_f32(&f),
              "--to '%s': OUT is float32, so the element format must fit in float32 (fp32 or narrower)", to);
    CLI_CHECK(fmt_validate_round_opts(&f, &o, msg, sizeof msg) == FMT_OK, "quantize: %s", msg);
    if (msg[0]) fprintf(stderr, "fplab quantize: %s\n", msg);

    npy_array a;
    CLI_CHECK(npy_read(in_path, &a, msg, sizeof msg) == NPY_OK && npy_want_float(&a, "IN", in_path, msg, sizeof msg) ==
              NPY_OK, "%s", msg);
    // A 1-D array is one row, so 1-D blocks (mx, nvfp4) run along it.
    size_t rows = a.ndim == 1 ? 1 : a.shape[0], cols = a.ndim == 1 ? a.shape[0] : a.shape[1];
    char sname[96];
    fmt_scaling_name(&sc, sname, sizeof sname);
    fprintf(stderr, "fplab quantize: %s (%s, %zu x %zu) -> %s to=%s round=%s overflow=%s scale=%s%s seed=%llu\n",
            in_path, a.dtype == NPY_F4 ? "float32" : "float64", rows, cols, out_path, f.name, fmt_mode_name(o.mode),
            fmt_overflow_name(o.overflow), sname, o.flush_subnormals ? " flush" : "", (unsigned long long)o.seed);

    // float32 input is quantized in place: the buffer read is the one written (no second 64 MiB
    // buffer to fault in and copy for a 4096 x 4096 tensor); float64 input needs a float32 one.
    // --stats keeps a float32 copy of the input for the error metrics.
    float *y = a.dtype == NPY_F4 ? a.f4 : npy_alloc(a.n * sizeof(float));
    CLI_CHECK_LIB(y ? FMT_OK : FMT_ENOMEM, "the tensor does not fit in memory");
    if (a.dtype == NPY_F4) a.data = NULL;  // y owns it now
    else
        for (size_t i = 0; i < a.n; i++) y[i] = (float)a.f8[i];
    float *x0 = NULL;
    if (stats_on) {
        x0 = npy_alloc(a.n * sizeof(float));
        CLI_CHECK_LIB(x0 ? FMT_OK : FMT_ENOMEM, "a copy of the input for --stats does not fit in memory");
        memcpy(x0, y, a.n * sizeof(float));
    }
    // The codes (--codes: of the element values, before the scale) and the scale codes
    // (--scales) come from the library's one call, which the Python binding's quantize() makes too.
    void *codes = NULL, *scodes = NULL;
    const size_t cb = fmt_code_bytes(&f), scb = sc.none ? 0 : fmt_code_bytes(&sc.scale_fmt);
    size_t grid[2];
    fmt_scale_grid(&sc, rows, cols, grid);
    if (codes_path) {
        CLI_CHECK(npy_uint_descr(cb), "quantize: --codes: %s has %zu-byte codes; expected 1, 2, 4 or 8", f.name, cb);
        codes = malloc(a.n ? a.n * cb : 1);
        CLI_CHECK_LIB(codes ? FMT_OK : FMT_ENOMEM, "the codes do not fit in memory");
    }
    if (scales_path) {
        CLI_CHECK(npy_uint_descr(scb), "quantize: --scales: %s has %zu-byte codes; expected 1, 2, 4 or 8",
                  sc.scale_fmt.name, scb);
        const size_t ns = grid[0] * grid[1];
        scodes = malloc(ns ? ns * scb : 1);
        CLI_CHECK_LIB(scodes ? FMT_OK : FMT_ENOMEM, "the scale codes do not fit in memory");
    }
    fmt_stats s = {0};
    fmt_quant_info info = {.tensor_scale = 1};  // 1: "none", float64
    if (a.dtype == NPY_F8 && sc.none) {
        // Rounded from float64 directly: values of the format, encoded as they are.
        st = fmt_round_f64(&f, a.f8, a.n, &o, &s);
        for (size_t i = 0; i < a.n; i++) y[i] = (float)a.f8[i];
        const fmt_round_opts enc = {0};  // nearest-even: exact for values of the format
        if (st == FMT_OK && codes) st = fmt_encode_f32(&f, codes, y, a.n, &enc, NULL);
    } else {
        st = fmt_quantize_codes_f32(&f, &sc, y, codes, scodes, y, rows, cols, &o, &s, &info);
    }
    npy_free(&a);
    CLI_CHECK(st == FMT_OK, "quantize: scale '%s' with element format %s refused the %zu x %zu tensor of %s (%s); "
              "expected a recipe whose scale format and tile fit this shape", sname, f.name, rows, cols, in_path,
              fmt_strerror(st));
    // The scales' shape is the tile grid, as fplab.quantize(...).scales; 1-D (tiles per row,) for
    // a 1-D IN under a recipe with one-row tiles (mx, nvfp4, row). Nothing is written before here,
    // so an error leaves every output untouched.
    size_t sshape[2] = {grid[0], grid[1]};
    int sndim = 2;
    if (a.ndim == 1 && sc.tile_rows == 1) sndim = 1, sshape[0] = grid[1];
    fmt_qerror qe = {0};
    if (x0) fmt_qerror_f32(&qe, y, x0, a.n);
    free(x0);
    // All outputs are written to temporary files (or through, for a device), then committed
    // together: an error anywhere leaves every output as it was.
    fio_out fo[3];
    fio_out *open_outs[3];
    int nopen = 0;
    const struct { const char *path, *descr; size_t size; const void *data; int ndim; const size_t *shape; } w[3] = {
        {out_path, "<f4", sizeof(float), y, a.ndim, a.shape},
        {codes_path, codes_path ? npy_uint_descr(cb) : NULL, cb, codes, a.ndim, a.shape},
        {scales_path, scales_path ? npy_uint_descr(scb) : NULL, scb, scodes, sndim, sshape}};
    st = NPY_OK;
    for (int i = 0; i < 3 && st == NPY_OK; i++) {
        if (!w[i].path) continue;
        char why[FIO_PATH_MAX + 128];
        if (fio_create(&fo[i], w[i].path, why, sizeof why) != FIO_OK) {
            snprintf(msg, sizeof msg, "quantize: %s: %.480s", out_names[i], why);
            st = NPY_ERR;
            break;
        }
        open_outs[nopen++] = &fo[i];
        st = npy_write_to(&fo[i], w[i].descr, w[i].size, w[i].data, w[i].ndim, w[i].shape, msg, sizeof msg);
    }
    if (st != NPY_OK) {
        for (int i = 0; i < nopen; i++) fio_abort(open_outs[i]);
    } else if (fio_commit_all(open_outs, nopen, msg, sizeof msg) != FIO_OK) {
        st = NPY_ERR;
    }
    free(y);
    CLI_CHECK(st == NPY_OK, "%s (OUT, --codes and --scales are as they were)", msg);
    free(codes), free(scodes);
    if (stats_on) print_stats(&s, &info, &qe);
    return 0;
}
