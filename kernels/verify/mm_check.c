// mm_check.c: the front end of a matmul check (mm_check.h): a side's recipe, operands from
// values, the generated check's operands, a status's message.
#include "kernels/mm_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mm_strerror(int st) {
    switch (st) {
    case MM_OK: return "ok";
    case MM_EINVAL: return "invalid argument";
    case MM_ENOMEM: return "out of memory";
    case MM_ENODEV: return "no device";
    case MM_EUNSUPPORTED: return "unsupported";
    default: return "unknown status";
    }
}

// MM_OK when x holds values of f only; else msg names the first that is not, and what was
// expected of it.
static int values_check(const fmt_t *f, const float *x, size_t rows, size_t cols, const char *what,
                        const char *expected, char *msg, size_t msg_len) {
    const fmt_round_opts ro = {0};
    for (size_t i = 0; i < rows * cols; i++) {
        const double r = fmt_round1(f, x[i], &ro);
        if (r == x[i] || (isnan(r) && isnan(x[i]))) continue;
        snprintf(msg, msg_len, "%s: element [%zu, %zu] = %.9g is not a value of %s (nearest %.9g); expected %s", what,
                 i / cols, i % cols, (double)x[i], f->name, r, expected);
        return MM_EINVAL;
    }
    return MM_OK;
}

void mm_vmat_free(mm_vmat *m) {
    if (!m) return;
    free(m->scales);
    memset(m, 0, sizeof *m);
}

// One side of mm_check_from_values: x's values, the scales (given exactly when the recipe has
// them, as many as the side's grid, values of the scale format, sane), expanded into m->scales.
static int vmat_from_values(mm_vmat *m, mm_side side, const mm_check_problem *p, const mm_values *v, char *msg,
                            size_t msg_len) {
    const bool is_a = side == MM_SIDE_A;
    const size_t rows = is_a ? p->M : p->K, cols = is_a ? p->K : p->N, other = is_a ? p->M : p->N;
    const fmt_t *elem = is_a ? &p->fa : &p->fb;
    const fmt_scaling s = mm_side_scaling(&p->sc, side);
    memset(m, 0, sizeof *m);
    char rname[96];
    fmt_scaling_name(&p->sc, rname, sizeof rname);
    int st = values_check(elem, v->x, rows, cols, v->what, "the element values before scaling", msg, msg_len);
    if (st != MM_OK) return st;
    if (s.none != !v->tiles) {
        if (s.none) snprintf(msg, msg_len, "%s given but the recipe is none; expected the recipe that made the "
                             "scales", v->scales_what);
        else snprintf(msg, msg_len, "the recipe %s needs %s (the tile scales)", rname, v->scales_what);
        return MM_EINVAL;
    }
    size_t grid[2] = {0, 0};
    fmt_scale_grid(&s, rows, cols, grid);
    if (!s.none) {
        if (v->ntiles != grid[0] * grid[1]) {
            snprintf(msg, msg_len, "%s has %zu scales; the recipe %s on a %zu x %zu %s makes %zu (%zu x %zu)",
                     v->scales_what, v->ntiles, rname, rows, cols, is_a ? "A" : "B", grid[0] * grid[1], grid[0],
                     grid[1]);
            return MM_EINVAL;
        }
        if ((st = values_check(&s.scale_fmt, v->tiles, grid[0], grid[1], v->scales_what, "the recipe's scales",
                               msg, msg_len)) != MM_OK)
            return st;
    }
    if ((st = mm_operand_scales_check(&s, v->tiles, grid[0] * grid[1], v->ts, v->scales_what, msg, msg_len)) !=
        MM_OK)
        return st;
    if (!s.none) {
        // mm_operand_from_tiles writes other x ceil(K / tile along K) scales.
        const int t = is_a ? s.tile_cols : s.tile_rows;
        const size_t kt = t > 0 && (size_t)t < p->K ? (size_t)t : p->K;
        m->scales = malloc(other * ((p->K + kt - 1) / kt) * sizeof *m->scales);
        if (!m->scales) return MM_ENOMEM;
    }
    mm_operand_from_tiles(&m->op, m->scales, side, !is_a, v->x, rows, cols, elem, &s, v->tiles, v->ts);
    return MM_OK;
}

int mm_check_from_values(mm_vmat *a, mm_vmat *b, const mm_check_problem *p, const mm_values *va,
                         const mm_values *vb, char *msg, size_t msg_len) {
    if (msg && msg_len) msg[0] = '\0';
    char dummy[8];
    if (!msg || !msg_len) msg = dummy, msg_len = sizeof dummy;
    memset(a, 0, sizeof *a), memset(b, 0, sizeof *b);
    if (!p->M || !p->N || !p->K || !va->x || !vb->x) {
        snprintf(msg, msg_len, "a %zu x %zu by %zu x %zu product%s; expected every size >= 1 and both operands",
                 p->M, p->K, p->K, p->N, va->x && vb->x ? "" : " without its operands");
        return MM_EINVAL;
    }
    int st = vmat_from_values(a, MM_SIDE_A, p, va, msg, msg_len);
    if (st == MM_OK) st = vmat_from_values(b, MM_SIDE_B, p, vb, msg, msg_len);
    if (st == MM_OK && mm_validate(&a->op, &b->op, p->M, p->N, p->K, &p->o, msg, msg_len) != MM_OK) {
        if (!msg[0]) snprintf(msg, msg_len, "the operands do not make a valid product");
        st = MM_EINVAL;
    }
    if (st != MM_OK) mm_vmat_free(a), mm_vmat_free(b);
    return st;
}

int mm_check_quantize(mm_qmat *qa, mm_qmat *qb, const mm_check_problem *p, const float *x_a, const float *x_b,
                      const fmt_round_opts *qo, char *msg, size_t msg_len) {
    if (msg && msg_len) msg[0] = '\0';
    char dummy[8];
    if (!msg || !msg_len) msg = dummy, msg_len = sizeof dummy;
    memset(qa, 0, sizeof *qa), memset(qb, 0, sizeof *qb);
    for (int s = 0; s < 2; s++) {
        const bool is_a = s == 0;
        const size_t rows = is_a ? p->M : p->K, cols = is_a ? p->K : p->N;
        const int st = mm_qmat_from_f32(is_a ? qa : qb, is_a ? MM_SIDE_A : MM_SIDE_B, is_a ? x_a : x_b, rows, cols,
                                        is_a ? &p->fa : &p->fb, &p->sc, qo);
        if (st == MM_OK) continue;
        if (st != MM_ENOMEM) {
            char rname[96];
            fmt_scaling_name(&p->sc, rname, sizeof rname);
            snprintf(msg, msg_len, "scale '%s' cannot quantize %s (%zu x %zu) to %s", rname, is_a ? "A" : "B", rows,
                     cols, (is_a ? &p->fa : &p->fb)->name);
        }
        mm_qmat_free(qa);
        return st == MM_ENOMEM ? MM_ENOMEM : MM_EINVAL;
    }
    if (mm_validate(&qa->op, &qb->op, p->M, p->N, p->K, &p->o, msg, msg_len) != MM_OK) {
        if (!msg[0]) snprintf(msg, msg_len, "the configuration is not valid");
        mm_qmat_free(qa), mm_qmat_free(qb);
        return MM_EINVAL;
    }
    return MM_OK;
}

int mm_check_random(mm_qmat *qa, mm_qmat *qb, const mm_check_problem *p, mm_dist dist, uint64_t seed, char *msg,
                    size_t msg_len) {
    if (msg && msg_len) msg[0] = '\0';
    memset(qa, 0, sizeof *qa), memset(qb, 0, sizeof *qb);
    float *xa = malloc(p->M * p->K * sizeof *xa), *xb = malloc(p->K * p->N * sizeof *xb);
    int st = xa && xb ? MM_OK : MM_ENOMEM;
    if (st == MM_OK) {
        mm_random_f32(xa, p->M * p->K, dist, seed, 1);
        mm_random_f32(xb, p->K * p->N, dist, seed, 2);
        const fmt_round_opts qo = {.mode = FMT_RNE, .overflow = FMT_SATURATE};
        st = mm_check_quantize(qa, qb, p, xa, xb, &qo, msg, msg_len);
    }
    free(xa), free(xb);
    return st;
}
