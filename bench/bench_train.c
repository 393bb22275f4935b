// bench_train.c: trainer throughput: tokens/s of a training step (forward, backward, AdamW) for
// the shakespeare and 15m configs with random weights and tokens, the forward/backward split,
// and the memory of activations and the process peak (ru_maxrss) with --recompute none and
// block: the time/memory trade-off of gradient checkpointing. Each configuration runs in its
// own child process, so its peak memory is its own.
// Beside each float32 row with recompute none: "sgemm GF/s", the trainer's own sgemm path
// (op_matmul_forward/dgrad/wgrad, rows split over the OpenMP threads) on the step's projection
// shapes, timed alone (one pass over the step's 3 x (7 L + 1) products after each step; the
// best pass), and "step GF/s", the step's useful FLOPs (those products plus causal attention,
// half of each T x T product) over the best step's time; "of sgemm" is their ratio. Best of
// each, interleaved, so that a shared machine's slow moments (which move either one 2x here)
// do not fall on one side only; tokens/s and the ms columns are the steps' means.
// --policies P1,P2,...: instead, the step of --config (default shakespeare) under each precision
// policy (its casts, the gradients' site, AdamW with the weight side in its pass, as `fplab
// train` steps; no loss scaling), each policy in its own child process, the list run --rounds
// times in turn; the best step of every policy over the rounds, and its ratio to the first
// policy's (tokens/s of the best step over the first's: "x first"). With --paired, every policy's
// model in one process instead, stepped in turn, and medians of per-step ratios (run_paired).
// Not a test: prints a table, never fails on a timing.
// Usage: bench_train [--steps N] [--quick] [--threads N] [--config NAME] [--recompute none|block]
//        [--policies fp32,nvfp4,... [--rounds R | --paired]]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autocast/policy.h"
#include "kernels/blas_tune.h"
#include "kernels/llama_ops.h"
#include "trainer/llama.h"
#include "trainer/optim.h"
#include "util/fileio.h"

typedef struct {
    double tok_s, fwd_ms, bwd_ms, opt_ms, acts_mb, rss_mb, step_gf, sgemm_gf, best_tok_s;
    size_t params;
} result;

// The projections of one layer (and the head) as (IC, OC) pairs: q, k, v, o, gate, up, down.
static size_t proj_shapes(const llama_config *c, size_t ic[8], size_t oc[8]) {
    const size_t C = c->dim, hs = C / c->n_heads, qd = c->n_heads * hs, kvd = c->n_kv_heads * hs;
    const size_t H = c->hidden_dim;
    const size_t in[7] = {C, C, C, qd, C, C, H}, out[7] = {qd, kvd, kvd, C, H, H, C};
    for (int i = 0; i < 7; i++) ic[i] = in[i], oc[i] = out[i];
    return 7;
}

// FLOPs of one step's matrix products: 3 products (forward, dgrad, wgrad) of 2 N IC OC each,
// and attention's 6 products (2 forward, 4 backward) over the causal half of T x T.
static double step_flops(const llama_config *c, int B, int T) {
    size_t ic[8], oc[8];
    const size_t np = proj_shapes(c, ic, oc), N = (size_t)B * T, hs = c->dim / c->n_heads;
    double f = 6.0 * N * c->dim * c->vocab_size;  // the head
    for (size_t i = 0; i < np; i++) f += 6.0 * N * ic[i] * oc[i] * c->n_layers;
    f += 6.0 * 2.0 * B * c->n_heads * (T * (T + 1) / 2.0) * hs * c->n_layers;
    return f;
}

// The trainer's sgemm path on the step's projection shapes: one pass is every projection's 3
// products (forward, dgrad, wgrad) of every layer and the head's.
typedef struct {
    const llama_config *c;
    size_t np, ic[8], oc[8], N, V;
    float *x, *w, *y;
    double flops;
} sgemm_probe;

static void probe_init(sgemm_probe *p, const llama_config *c, int B, int T) {
    p->c = c, p->np = proj_shapes(c, p->ic, p->oc), p->N = (size_t)B * T, p->V = c->vocab_size;
    size_t most = p->N * p->V > p->V * c->dim ? p->N * p->V : p->V * c->dim;
    for (size_t i = 0; i < p->np; i++) {
        if (p->N * p->ic[i] > most) most = p->N * p->ic[i];
        if (p->N * p->oc[i] > most) most = p->N * p->oc[i];
        if (p->ic[i] * p->oc[i] > most) most = p->ic[i] * p->oc[i];
    }
    p->x = calloc(most, sizeof *p->x), p->w = calloc(most, sizeof *p->w), p->y = calloc(most, sizeof *p->y);
    if (!p->x || !p->w || !p->y) {
        fprintf(stderr, "bench_train: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < most; i++) p->x[i] = (float)((i * 7) % 13) / 13.0f, p->w[i] = (float)((i * 5) % 11) / 110.0f;
    p->flops = 6.0 * p->N * c->dim * p->V;
    for (size_t i = 0; i < p->np; i++) p->flops += 6.0 * p->N * p->ic[i] * p->oc[i] * c->n_layers;
}

// Seconds of one pass.
static double probe_pass(const sgemm_probe *p) {
    const double t0 = fio_now();
    for (int l = 0; l < p->c->n_layers; l++)
        for (size_t i = 0; i < p->np; i++) {
            op_matmul_forward(p->y, p->x, p->w, p->N, p->ic[i], p->oc[i]);
            op_matmul_dgrad(p->y, p->x, p->w, p->N, p->ic[i], p->oc[i], false);
            op_matmul_wgrad(p->y, p->x, p->w, p->N, p->ic[i], p->oc[i]);
        }
    op_matmul_forward(p->y, p->x, p->w, p->N, p->c->dim, p->V);
    op_matmul_dgrad(p->y, p->x, p->w, p->N, p->c->dim, p->V, false);
    op_matmul_wgrad(p->y, p->x, p->w, p->N, p->c->dim, p->V);
    return fio_now() - t0;
}

static void probe_free(sgemm_probe *p) { free(p->x), free(p->w), free(p->y); }

// One model training under a policy (NULL: float32), as `fplab train` steps it: its casts, the
// gradients' site, AdamW with the weight side in its pass; no loss scaling.
typedef struct {
    llama_config c;
    llama_model m;
    ac_policy pol;
    ac_ctx ac;
    bool policy;
    float *kahan, *am, *av;
    int *x, *y;
    int B, T;
} trainer;

static void trainer_init(trainer *t, const char *name, int B, int T, int V, llama_recompute rc, const char *policy) {
    memset(t, 0, sizeof *t);
    llama_config_named(&t->c, name);
    t->c.vocab_size = V, t->B = B, t->T = T;
    char msg[256];
    if (llama_init(&t->m, &t->c, rc, msg, sizeof msg) != LLAMA_OK) {
        fprintf(stderr, "bench_train: %s\n", msg);
        exit(1);
    }
    llama_init_weights(&t->m, 1);
    if (policy) {  // as train_setup.c: the weights stored in the master format from the start
        if (ac_policy_load(&t->pol, policy, msg, sizeof msg) != AC_OK ||
            ac_init(&t->ac, &t->pol, t->c.n_layers, 1, AC_TEL_SITES, llama_max_operand(&t->c, B, T), msg, sizeof msg) !=
                AC_OK) {
            fprintf(stderr, "bench_train: policy %s: %s\n", policy, msg);
            exit(1);
        }
        t->policy = true;
        t->m.ac = &t->ac;
        if (t->pol.update == AC_UPDATE_KAHAN) t->kahan = calloc(t->m.n_params, sizeof *t->kahan);
        ac_cast_inplace(&t->ac, AC_MASTER, -1, t->m.params, t->m.n_params, 1, false);
    }
    t->am = calloc(t->m.n_params, sizeof *t->am), t->av = calloc(t->m.n_params, sizeof *t->av);
    t->x = malloc((size_t)B * T * sizeof *t->x), t->y = malloc((size_t)B * T * sizeof *t->y);
    if (!t->am || !t->av || !t->x || !t->y || (t->pol.update == AC_UPDATE_KAHAN && policy && !t->kahan)) {
        fprintf(stderr, "bench_train: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < B * T; i++) t->x[i] = (i * 7919) % V, t->y[i] = (i * 104729 + 3) % V;
}

// Step s (from -2: the warm-up steps); the seconds of its forward, backward and update.
static void trainer_step(trainer *t, int s, double sec[3]) {
    static const adamw_opts ao = {1e-3f, 0.9f, 0.99f, 1e-8f, 0.1f};
    const double t0 = fio_now();
    if (t->policy) ac_begin_step(&t->ac, (uint64_t)(s + 3)), ac_begin_micro(&t->ac, 0);
    llama_zero_grad(&t->m);
    llama_forward(&t->m, t->x, t->y, t->B, t->T);
    const double t1 = fio_now();
    llama_backward(&t->m, t->x, t->y, 1.0f);
    const double t2 = fio_now();
    if (t->policy) ac_cast_inplace(&t->ac, AC_GRADS, -1, t->m.grads, t->m.n_params, 1, true);
    clip_grad_norm(t->m.grads, t->m.n_params, 1.0);
    adamw_step_policy(t->m.params, t->am, t->av, t->m.grads, &t->c, &ao, s + 3, t->policy ? &t->ac : NULL, t->kahan);
    sec[0] = t1 - t0, sec[1] = t2 - t1, sec[2] = fio_now() - t2;
}

static void trainer_free(trainer *t) {
    free(t->am), free(t->av), free(t->x), free(t->y), free(t->kahan);
    if (t->policy) ac_free(&t->ac);
    llama_free(&t->m);
}

static result run_one(const char *name, int B, int T, int V, llama_recompute rc, int steps, const char *policy) {
    trainer t;
    trainer_init(&t, name, B, T, V, rc, policy);
    result r = {0};
    double fwd = 0, bwd = 0, opt = 0, best_step = 1e30, best_pass = 1e30;
    sgemm_probe probe = {0};
    const bool probing = rc == LLAMA_RECOMPUTE_NONE;
    if (probing) probe_init(&probe, &t.c, B, T);
    for (int s = -2; s < steps; s++) {  // two warm-up steps
        double sec[3];
        trainer_step(&t, s, sec);
        if (s >= 0) fwd += sec[0], bwd += sec[1], opt += sec[2];
        if (sec[0] + sec[1] + sec[2] < best_step && s >= 0) best_step = sec[0] + sec[1] + sec[2];
        if (probing && s >= 0) {  // beside each step, so that both see the machine alike
            const double dt = probe_pass(&probe);
            if (dt < best_pass) best_pass = dt;
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r.tok_s = (double)steps * B * T / (fwd + bwd + opt);
    r.fwd_ms = 1e3 * fwd / steps, r.bwd_ms = 1e3 * bwd / steps, r.opt_ms = 1e3 * opt / steps;
    r.acts_mb = (double)llama_acts_bytes(&t.m) / 1048576.0;
    r.rss_mb = (double)ru.ru_maxrss / 1024.0;
    r.params = t.m.n_params;
    r.step_gf = step_flops(&t.c, B, T) / best_step * 1e-9;
    r.best_tok_s = (double)B * T / best_step;
    if (probing) r.sgemm_gf = probe.flops / best_pass * 1e-9, probe_free(&probe);
    trainer_free(&t);
    return r;
}

// run_one in a child process (its peak memory its own); false when it failed.
static bool run_child(const char *name, int B, int T, int V, llama_recompute rc, int steps, const char *policy,
                      result *r) {
    int fd[2];
    if (pipe(fd) != 0) return false;
    const pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        const result one = run_one(name, B, T, V, rc, steps, policy);
        if (write(fd[1], &one, sizeof one) != sizeof one) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    const ssize_t got = read(fd[0], r, sizeof *r);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return got == sizeof *r;
}

enum { MAXP = 32 };

// The comma-separated policies of list (split in place) into pols; their number, 0 on an error.
static int policy_list(char *list, const char *pols[MAXP]) {
    int np = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (np == MAXP) {
            fprintf(stderr, "bench_train: --policies: more than %d policies\n", MAXP);
            return 0;
        }
        pols[np++] = tok;
    }
    if (np == 0) fprintf(stderr, "bench_train: --policies: expected a comma-separated list of policies\n");
    return np;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// --paired: every policy's model in this one process, stepped in turn (each step's order rotated
// by one), so that the steps compared are seconds apart: a VM whose speed drifts by 1.5x between
// runs (docs/benchmarks.md) moves both sides of a ratio alike. Per policy: the median of its
// steps' tokens/s, and the median over steps of its step's tokens/s over the first policy's step
// of the same turn.
static int run_paired(const char *name, int B, int T, int V, int steps, char *list) {
    const char *pols[MAXP];
    const int np = policy_list(list, pols);
    if (np == 0) return 2;
    trainer *tr = calloc((size_t)np, sizeof *tr);
    double *sec = malloc((size_t)np * (size_t)steps * sizeof *sec), *v = malloc((size_t)steps * sizeof *v);
    if (!tr || !sec || !v) {
        fprintf(stderr, "bench_train: out of memory\n");
        return 1;
    }
    for (int i = 0; i < np; i++) trainer_init(&tr[i], name, B, T, V, LLAMA_RECOMPUTE_NONE, pols[i]);
    for (int s = -2; s < steps; s++)
        for (int k = 0; k < np; k++) {
            const int i = (k + (s < 0 ? 0 : s)) % np;
            double t[3];
            trainer_step(&tr[i], s, t);
            if (s >= 0) sec[(size_t)i * (size_t)steps + (size_t)s] = t[0] + t[1] + t[2];
        }
    printf("%s, %d steps of each policy in turn in one process (the order rotated each step)\n", name, steps);
    printf("%-24s %12s %13s\n", "policy", "tokens/s", "x first, paired");
    for (int i = 0; i < np; i++) {
        for (int s = 0; s < steps; s++) v[s] = (double)B * T / sec[(size_t)i * (size_t)steps + (size_t)s];
        const double tok = median(v, steps);
        for (int s = 0; s < steps; s++) v[s] = sec[(size_t)s] / sec[(size_t)i * (size_t)steps + (size_t)s];
        printf("%-24s %12.0f %13.2f\n", pols[i], tok, median(v, steps));
    }
    for (int i = 0; i < np; i++) trainer_free(&tr[i]);
    free(tr), free(sec), free(v);
    return 0;
}

// --policies: every policy's best step over the rounds, each round the list in turn.
static int run_policies(const char *name, int B, int T, int V, int steps, int rounds, char *list) {
    const char *pols[MAXP];
    const int np = policy_list(list, pols);
    if (np == 0) return 2;
    double best[MAXP];
    for (int i = 0; i < np; i++) best[i] = 0.0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < np; i++) {
            result one;
            if (!run_child(name, B, T, V, LLAMA_RECOMPUTE_NONE, steps, pols[i], &one)) {
                fprintf(stderr, "bench_train: %s under %s failed\n", name, pols[i]);
                return 1;
            }
            if (one.best_tok_s > best[i]) best[i] = one.best_tok_s;
            fprintf(stderr, "round %d/%d: %s %.0f tokens/s (best step)\n", r + 1, rounds, pols[i], one.best_tok_s);
        }
    printf("%s, %d steps a run, best step of %d rounds in turn, tokens/s of that step\n", name, steps, rounds);
    printf("%-24s %12s %9s\n", "policy", "tokens/s", "x first");
    for (int i = 0; i < np; i++) printf("%-24s %12.0f %9.2f\n", pols[i], best[i], best[i] / best[0]);
    return 0;
}

int main(int argc, char **argv) {
    mm_blas_tune_or_reexec(argv);
    int steps = 20, threads = 0, rc_only = -1, rounds = 3;
    const char *only = NULL;
    char *policies = NULL;
    bool paired = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) steps = 3;
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--config") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--recompute") && i + 1 < argc) rc_only = !strcmp(argv[++i], "block");
        else if (!strcmp(argv[i], "--policies") && i + 1 < argc) policies = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--paired")) paired = true;
        else {
            fprintf(stderr, "usage: bench_train [--steps N] [--quick] [--threads N] [--config NAME] "
                    "[--recompute none|block] [--policies P1,P2,... [--rounds R | --paired]]\n");
            return 2;
        }
    }
    if (steps < 1 || rounds < 1) {
        fprintf(stderr, "bench_train: --steps %d, --rounds %d: expected positive counts\n", steps, rounds);
        return 2;
    }
    const int used = llama_ops_threads(threads);
    static const struct { const char *name; int B, T, V; } cfgs[] = {
        {"shakespeare", 12, 64, 65},  // nanoGPT's CPU Shakespeare batch
        {"15m", 8, 256, 512},         // stories15M shape with a 512-token vocabulary
    };
    if (policies) {
        for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
            if (!strcmp(cfgs[i].name, only ? only : "shakespeare"))
                return paired ? run_paired(cfgs[i].name, cfgs[i].B, cfgs[i].T, cfgs[i].V, steps, policies)
                              : run_policies(cfgs[i].name, cfgs[i].B, cfgs[i].T, cfgs[i].V, steps, rounds, policies);
        fprintf(stderr, "bench_train: --config %s: expected shakespeare or 15m\n", only);
        return 2;
    }
    printf("trainer step (forward + backward + AdamW), %d timed steps, float32, %d threads, "
           "OPENBLAS_CORETYPE=%s\n", steps, used, getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "(unset)");
    printf("%-12s %-9s %9s %10s %8s %8s %8s %10s %9s %8s %9s %8s\n", "config", "recompute", "params",
           "tokens/s", "fwd ms", "bwd ms", "opt ms", "acts MiB", "peak MiB", "step GF/s", "sgemm GF/s",
           "of sgemm");
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        for (int rc = 0; rc < 2; rc++) {
            if ((only && strcmp(only, cfgs[i].name)) || (rc_only >= 0 && rc != rc_only)) continue;
            result r;
            if (!run_child(cfgs[i].name, cfgs[i].B, cfgs[i].T, cfgs[i].V, rc, steps, NULL, &r)) {
                fprintf(stderr, "bench_train: %s failed\n", cfgs[i].name);
                return 1;
            }
            printf("%-12s %-9s %9zu %10.0f %8.1f %8.1f %8.1f %10.1f %9.1f %8.1f", cfgs[i].name,
                   rc ? "block" : "none", r.params, r.tok_s, r.fwd_ms, r.bwd_ms, r.opt_ms, r.acts_mb, r.rss_mb,
                   r.step_gf);
            if (r.sgemm_gf > 0) printf(" %9.1f %8.2f\n", r.sgemm_gf, r.step_gf / r.sgemm_gf);
            else printf(" %9s %8s\n", "-", "-");
            fflush(stdout);
        }
    return 0;
}
