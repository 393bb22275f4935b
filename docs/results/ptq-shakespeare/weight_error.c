// weight_error.c: the relative RMS error ||q(W) - W|| / ||W|| of each projection weight of a
// checkpoint quantized to e2m1 with several block recipes, each layer's matrix (out, in) one call
// with the scales along `in`, as the .w sites of fplab eval cast it. Built against libfplab
// with the libraries the Makefile links build/fplab with (README.md has the line), then run as
// weight_error CKPT.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/format.h"
#include "formats/scale.h"
#include "trainer/checkpoint.h"

int main(int argc, char **argv) {
    llama_model m;
    data_vocab v;
    char msg[512];
    if (argc != 2 || ckpt_load_model(argv[1], &m, &v, msg, sizeof msg)) {
        fprintf(stderr, "usage: weight_error CKPT (%s)\n", argc == 2 ? msg : "");
        return 2;
    }
    const char *recipes[] = {"mx", "nvfp4", "block:16:e4m3", "block:16:e8m0", "block:32:e4m3"};
    fmt_t e2m1;
    fmt_from_name(&e2m1, "e2m1");
    const llama_config *c = &m.cfg;
    const size_t C = c->dim, H = c->hidden_dim, qd = C, kvd = (size_t)c->n_kv_heads * (C / c->n_heads);
    const struct {
        int id;
        size_t oc, ic;
        const char *name;
    } mats[] = {{LP_WQ, qd, C, "wq"}, {LP_WK, kvd, C, "wk"}, {LP_WV, kvd, C, "wv"}, {LP_WO, C, qd, "wo"},
                {LP_W_GATE, H, C, "w_gate"}, {LP_W_UP, H, C, "w_up"}, {LP_W_DOWN, C, H, "w_down"}};
    printf("%-14s", "recipe");
    for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++) printf(" %7s", mats[k].name);
    printf("\n");
    for (size_t r = 0; r < sizeof recipes / sizeof recipes[0]; r++) {
        fmt_scaling sc;
        fmt_scaling_from_name(&sc, recipes[r], NULL, 0);
        printf("%-14s", recipes[r]);
        for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++) {
            double se = 0, ss = 0;
            const size_t n = mats[k].oc * mats[k].ic;
            float *q = malloc(n * sizeof *q);
            for (int l = 0; l < c->n_layers; l++) {
                const float *w = m.p.t[mats[k].id] + (size_t)l * n;
                fmt_quantize_f32(&e2m1, &sc, q, w, mats[k].oc, mats[k].ic, NULL, NULL, NULL);
                for (size_t i = 0; i < n; i++) se += ((double)q[i] - w[i]) * ((double)q[i] - w[i]), ss += (double)w[i] * w[i];
            }
            free(q);
            printf(" %7.4f", sqrt(se / ss));
        }
        printf("\n");
    }
    llama_free(&m);
    data_vocab_free(&v);
    return 0;
}
