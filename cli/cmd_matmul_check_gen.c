// cmd_matmul_check_gen.c: the generated mode of `fplab matmul-check`: random operands quantized
// with the recipe (mm_check_random), one product on the backend (cpu or cuda) and on mm_ref, both
// rows verified. An emulated accumulator (or an engine) defines the result bit for bit: C must
// equal mm_ref with it; otherwise the bound, with the backend's u.
#include <math.h>
#include <string.h>

#include "cmd_matmul_check.h"
#include "util/fileio.h"

// The backend under test into C (its unit roundoff into *u, its name into r->name); returns
// false when --backend cuda finds no GPU.
static bool run_backend(float *C, mc_row *r, double *u, char *path_name, size_t path_cap, const mc_cfg *k,
                        const mm_qmat *qa, const mm_qmat *qb) {
    char msg[512];
    int st;
    *u = 0x1p-24;
    double t0 = fio_now();
    if (k->use_cuda) {
        mm_cuda_plan plan;
        st = mm_cuda_available(msg, sizeof msg) ? mm_cuda_choose(&plan, &qa->op, &qb->op, k->p.K, msg, sizeof msg)
                                                : MM_ENODEV;
        if (st == MM_ENODEV) {
            mm_cuda_available(msg, sizeof msg);
            fprintf(stderr, "fplab matmul-check: no GPU: %s\n", msg[0] ? msg : "mm_cuda returned MM_ENODEV");
            return false;
        }
        CLI_CHECK(st == MM_OK || k->emulated, "matmul-check: --backend cuda: %s", msg);
        if (st == MM_OK && !k->emulated) {
            *u = plan.u;
            snprintf(path_name, path_cap, "cuda:%s", plan.path);
            r->name = path_name;
        }
        t0 = fio_now();
        st = mm_cuda(C, k->p.N, &qa->op, &qb->op, k->p.M, k->p.N, k->p.K, &k->p.o);
    } else {
        mm_opts o = k->p.o;  // the path of this call alone (the verifier runs its own products)
        o.path = &r->path;
        st = mm_cpu(C, k->p.N, &qa->op, &qb->op, k->p.M, k->p.N, k->p.K, &o);
    }
    r->time_s = fio_now() - t0;
    CLI_CHECK(st != MM_EUNSUPPORTED, "matmul-check: backend %s does not support this configuration", k->backend);
    MC_CHECK(st, "the backend failed on a configuration mm_validate accepted");
    return true;
}

int mc_generated(mc_cfg *k) {
    const size_t M = k->p.M, N = k->p.N, K = k->p.K, n = M * N;
    if (k->outfmt == CLI_OUT_TABLE) {
        printf("matmul-check: M=%zu N=%zu K=%zu a=%s b=%s out=%s scale=%s acc=%s backend=%s seed=%llu dist=%s\n", M,
               N, K, k->p.fa.name, k->p.fb.name, k->p.o.out_fmt.name, k->sname, k->acc_desc, k->backend,
               (unsigned long long)k->seed, mm_dist_name(k->dist));
        fflush(stdout);
    }
    mm_qmat qa, qb;
    char msg[512];
    const int st = mm_check_random(&qa, &qb, &k->p, k->dist, k->seed, msg, sizeof msg);
    CLI_CHECK_LIB(st == MM_ENOMEM ? FMT_ENOMEM : FMT_OK, "the operands do not fit in memory");
    CLI_CHECK(st == MM_OK, "matmul-check: %s", msg[0] ? msg : "the configuration is not valid");
    float *Cref = calloc(n, sizeof *Cref), *C = calloc(n, sizeof *C);
    CLI_CHECK_LIB(Cref && C ? 0 : FMT_ENOMEM, "the results do not fit in memory");
    mc_row rows[2] = {{.name = "ref"}, {.name = k->backend, .gflops = true}};
    double u;
    char path_name[32];
    int rc = MC_EXIT_NO_GPU;
    if (run_backend(C, &rows[1], &u, path_name, sizeof path_name, k, &qa, &qb)) {
        const double t0 = fio_now();
        MC_CHECK(mm_ref(Cref, N, &qa.op, &qb.op, M, N, K, &k->p.o), "mm_ref failed on a validated configuration");
        rows[0].time_s = fio_now() - t0;
        const char *expect = k->emulated ? k->acc_spec : NULL;
        mc_verify_row(&rows[0], NULL, Cref, NULL, &qa.op, &qb.op, k, 0x1p-24, expect, false);
        // A path's u at or beyond 1/(2(K+2)) (fp8 cuBLASLt's 2^-13 at K >= 4094) bounds
        // nothing; the row is then held to 2^-24, or to a candidate's bits.
        if (!(u < 0.5 / ((double)K + 2))) {
            if (k->outfmt == CLI_OUT_TABLE)
                printf("note: the %s path's u = 2^%d bounds nothing at K = %zu (gamma_%zu >= 1); its result is "
                       "held to u = 2^-24 or to a candidate's bits\n", rows[1].name, ilogb(u), K, K + 2);
            u = 0x1p-24;
        }
        mc_verify_row(&rows[1], NULL, C, NULL, &qa.op, &qb.op, k, u, expect, true);
        rc = mc_report(k, rows, 2);
    }
    free(Cref), free(C);
    mm_qmat_free(&qa), mm_qmat_free(&qb);
    return rc;
}
