// mm_operand.c: scaled-matmul operands from float32 matrices (quantize with a recipe, expand the
// tile scales along K) and random test matrices from the counter-based generator.
// Constraints: no MPFR; the quantization is fmt_quantize_f32's, unchanged.
#include "kernels/mm_operand.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "formats/rng.h"

// ---------------------------------------------------------------------------------------------
// operands

static size_t resolve(int t, size_t n) { return t <= 0 || (size_t)t >= n ? n : (size_t)t; }

fmt_scaling mm_side_scaling(const fmt_scaling *sc, mm_side side) {
    fmt_scaling s = *sc;
    if (side == MM_SIDE_B) s.tile_rows = sc->tile_cols, s.tile_cols = sc->tile_rows;
    return s;
}

void mm_qmat_free(mm_qmat *m) {
    if (!m) return;
    free(m->q), free(m->scales), free(m->deq);
    memset(m, 0, sizeof *m);
}

size_t mm_operand_from_tiles(mm_operand *op, float *scales, mm_side side, bool k_rows, const float *q,
                             size_t rows, size_t cols, const fmt_t *elem, const fmt_scaling *sc,
                             const float *tile_s, float ts) {
    const size_t K = k_rows ? rows : cols, other = k_rows ? cols : rows;
    if (K == 0 || other == 0) {  // an empty matrix has no tiles (and no tile size to divide by)
        *op = (mm_operand){.x = q, .ld = cols, .trans = side == MM_SIDE_A ? k_rows : !k_rows, .fmt = *elem,
                           .tensor_scale = ts};
        return 0;
    }
    const int tk = k_rows ? sc->tile_rows : sc->tile_cols;  // the recipe's tile length along K
    const size_t kt = resolve(tk, K);
    const size_t ot = resolve(k_rows ? sc->tile_cols : sc->tile_rows, other);
    const size_t ntk = (K + kt - 1) / kt, nto = (other + ot - 1) / ot;
    const bool as_tensor = !sc->none && sc->tile_rows == 0 && sc->tile_cols == 0 && !sc->tensor_scale;
    const bool expand = !sc->none && !as_tensor;
    if (as_tensor) ts *= tile_s[0];  // one level: the tensor scale is 1, the tile's scale is all
    if (expand) {
        // The quantize call's tile grid is row-major over (rows, cols): (nto x ntk) when K runs
        // along the columns, (ntk x nto) when it runs along the rows.
        for (size_t o = 0; o < other; o++)
            for (size_t g = 0; g < ntk; g++) {
                const float s = k_rows ? tile_s[g * nto + o / ot] : tile_s[(o / ot) * ntk + g];
                if (side == MM_SIDE_A) scales[o * ntk + g] = s;
                else scales[g * other + o] = s;
            }
    }
    *op = (mm_operand){
        .x = q,
        .ld = cols,
        .trans = side == MM_SIDE_A ? k_rows : !k_rows,
        .fmt = *elem,
        .scales = expand ? scales : NULL,
        // The recipe's block length even when one block covers K (K <= 32 under mx): a
        // block-scaled instruction takes the scales only from K-blocks of its own length.
        .block_k = expand && tk > 0 ? tk : 0,
        .tensor_scale = ts,
    };
    return expand ? ntk : 0;
}

int mm_operand_scales_check(const fmt_scaling *sc, const float *tile_s, size_t ntiles, float ts,
                            const char *what, char *msg, size_t msg_len) {
    const bool as_tensor = !sc->none && sc->tile_rows == 0 && sc->tile_cols == 0 && !sc->tensor_scale;
    for (int l = 0; l < 1 + (as_tensor && tile_s && ntiles); l++) {
        const float t = l ? tile_s[0] : ts;
        if (!(t > 0.0f && t <= FLT_MAX)) {
            snprintf(msg, msg_len, "%s: the %s is %g; expected a finite scale > 0 (a scale of 0 would make every "
                     "product 0, and mm_operand reads a tensor scale of 0 as 1)", what,
                     l ? "one scale of the recipe 'tensor'" : "tensor scale", (double)t);
            return MM_EINVAL;
        }
    }
    for (size_t i = 0; !as_tensor && tile_s && i < ntiles; i++)
        if (tile_s[i] < 0.0f) {
            snprintf(msg, msg_len, "%s: scale %zu is %g; expected scales >= 0 (a scale is a magnitude)", what, i,
                     (double)tile_s[i]);
            return MM_EINVAL;
        }
    return MM_OK;
}

int mm_qmat_from_f32(mm_qmat *m, mm_side side, const float *x, size_t rows, size_t cols,
                     const fmt_t *elem, const fmt_scaling *sc, const fmt_round_opts *o) {
    if (!m || !x || !elem || !sc || rows == 0 || cols == 0) return MM_EINVAL;
    memset(m, 0, sizeof *m);
    if (cols > SIZE_MAX / sizeof(float) / rows) return MM_EINVAL;
    const size_t n = rows * cols;
    const bool is_a = side == MM_SIDE_A;
    const size_t K = is_a ? cols : rows, other = is_a ? rows : cols;  // other: M for A, N for B

    const fmt_scaling s = mm_side_scaling(sc, side);  // a tile of either side spans one K-block
    const size_t kt = resolve(sc->tile_cols, K), ntk = (K + kt - 1) / kt;
    const bool as_tensor = !sc->none && sc->tile_rows == 0 && sc->tile_cols == 0 && !sc->tensor_scale;
    const size_t nt = fmt_scale_count(&s, rows, cols);

    m->q = malloc(n * sizeof *m->q);
    m->deq = malloc(n * sizeof *m->deq);
    float *tile_s = nt ? malloc(nt * sizeof *tile_s) : NULL;
    if (!sc->none && !as_tensor) m->scales = malloc(ntk * other * sizeof *m->scales);
    if (!m->q || !m->deq || (nt && !tile_s) || (!sc->none && !as_tensor && !m->scales)) {
        free(tile_s);
        mm_qmat_free(m);
        return MM_ENOMEM;
    }
    fmt_quant_info info = {.scales = tile_s, .elems = m->q};
    const int st = fmt_quantize_f32(elem, &s, m->deq, x, rows, cols, o, &m->stats, &info);
    if (st != FMT_OK) {
        free(tile_s);
        mm_qmat_free(m);
        return st == FMT_ENOMEM ? MM_ENOMEM : MM_EINVAL;
    }
    m->rows = rows, m->cols = cols, m->scales_clipped = info.scales_clipped;
    m->nblocks = mm_operand_from_tiles(&m->op, m->scales, side, !is_a, m->q, rows, cols, elem, &s, tile_s,
                                       info.tensor_scale);
    free(tile_s);
    return MM_OK;
}

// ---------------------------------------------------------------------------------------------
// random matrices

static const char *const dist_names[MM_DIST_COUNT] = {"normal", "uniform", "lognormal", "outliers"};

const char *mm_dist_name(mm_dist d) { return (unsigned)d < MM_DIST_COUNT ? dist_names[d] : "?"; }

int mm_dist_from_name(mm_dist *out, const char *name) {
    for (int i = 0; name && i < MM_DIST_COUNT; i++)
        if (!strcasecmp(name, dist_names[i])) return *out = (mm_dist)i, MM_OK;
    return MM_EINVAL;
}

// Box-Muller on draws 2i and 2i+1; 1 - u lies in (0, 1], so the log is finite.
static double normal_at(fmt_rng_key key, uint64_t i) {
    const double u1 = fmt_rng_uniform(key, 2 * i), u2 = fmt_rng_uniform(key, 2 * i + 1);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

void mm_random_f32(float *x, size_t n, mm_dist d, uint64_t seed, uint64_t stream) {
    const fmt_rng_key key = fmt_rng_make_key(seed, stream);
    // Signs and outlier choices come from a second stream, so the normal draws are shared.
    const fmt_rng_key aux = fmt_rng_make_key(seed, stream ^ 0x8000000000000000ULL);
#pragma omp parallel for schedule(static) if (n >= (1u << 16))
    for (size_t i = 0; i < n; i++) {
        double v;
        switch (d) {
        case MM_DIST_UNIFORM: v = 2.0 * fmt_rng_uniform(key, i) - 1.0; break;
        case MM_DIST_LOGNORMAL:
            v = exp(normal_at(key, i));
            if (fmt_rng_u32(aux, i) & 1) v = -v;
            break;
        case MM_DIST_OUTLIERS:
            v = normal_at(key, i);
            if ((fmt_rng_u32(aux, i) & 127) == 0) v *= 1000.0;
            break;
        default: v = normal_at(key, i); break;
        }
        x[i] = (float)v;
    }
}
