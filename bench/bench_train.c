// bench_train.c: trainer throughput: tokens/s of a training step (forward, backward, AdamW) for
// the shakespeare and 15m configs with random weights and tokens, the forward/backward split,
// and the memory of activations and the process peak (ru_maxrss) with --recompute none and
// block: the time/memory trade-off of gradient checkpointing. Each configuration runs in its
// own child process, so its peak memory is its own.
// Not a test: prints a table, never fails on a timing.
// Usage: bench_train [--steps N] [--quick]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/blas_tune.h"
#include "kernels/llama_ops.h"
#include "trainer/llama.h"
#include "trainer/optim.h"
#include "trainer/fileio.h"

typedef struct {
    double tok_s, fwd_ms, bwd_ms, opt_ms, acts_mb, rss_mb;
    size_t params;
} result;

static result run_one(const char *name, int B, int T, int V, llama_recompute rc, int steps) {
    llama_config c;
    llama_config_named(&c, name);
    c.vocab_size = V;
    llama_model m;
    char msg[256];
    result r = {0};
    if (llama_init(&m, &c, rc, msg, sizeof msg) != LLAMA_OK) {
        fprintf(stderr, "bench_train: %s\n", msg);
        exit(1);
    }
    llama_init_weights(&m, 1);
    float *am = calloc(m.n_params, sizeof *am), *av = calloc(m.n_params, sizeof *av);
    int *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    for (int i = 0; i < B * T; i++) x[i] = (i * 7919) % V, y[i] = (i * 104729 + 3) % V;
    const adamw_opts ao = {1e-3f, 0.9f, 0.99f, 1e-8f, 0.1f};
    double fwd = 0, bwd = 0, opt = 0;
    for (int s = -2; s < steps; s++) {  // two warm-up steps
        const double t0 = fio_now();
        llama_zero_grad(&m);
        llama_forward(&m, x, y, B, T);
        const double t1 = fio_now();
        llama_backward(&m, x, y, 1.0f);
        const double t2 = fio_now();
        clip_grad_norm(m.grads, m.n_params, 1.0);
        adamw_step(m.params, am, av, m.grads, &c, &ao, s + 3);
        const double t3 = fio_now();
        if (s >= 0) fwd += t1 - t0, bwd += t2 - t1, opt += t3 - t2;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r.tok_s = (double)steps * B * T / (fwd + bwd + opt);
    r.fwd_ms = 1e3 * fwd / steps, r.bwd_ms = 1e3 * bwd / steps, r.opt_ms = 1e3 * opt / steps;
    r.acts_mb = (double)llama_acts_bytes(&m) / 1048576.0;
    r.rss_mb = (double)ru.ru_maxrss / 1024.0;
    r.params = m.n_params;
    free(am), free(av), free(x), free(y);
    llama_free(&m);
    return r;
}

int main(int argc, char **argv) {
    mm_blas_tune_or_reexec(argv);
    int steps = 20;
    llama_ops_threads(0);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) steps = 3;
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_train [--steps N] [--quick]\n");
            return 2;
        }
    }
    static const struct { const char *name; int B, T, V; } cfgs[] = {
        {"shakespeare", 12, 64, 65},  // nanoGPT's CPU Shakespeare batch
        {"15m", 8, 256, 512},         // stories15M shape with a 512-token vocabulary
    };
    printf("trainer step (forward + backward + AdamW), %d timed steps, float32\n", steps);
    printf("%-12s %-9s %9s %10s %8s %8s %8s %10s %9s\n", "config", "recompute", "params", "tokens/s",
           "fwd ms", "bwd ms", "opt ms", "acts MiB", "peak MiB");
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        for (int rc = 0; rc < 2; rc++) {
            int fd[2];
            if (pipe(fd) != 0) return 1;
            const pid_t pid = fork();
            if (pid == 0) {
                close(fd[0]);
                const result r = run_one(cfgs[i].name, cfgs[i].B, cfgs[i].T, cfgs[i].V, rc, steps);
                if (write(fd[1], &r, sizeof r) != sizeof r) _exit(1);
                _exit(0);
            }
            close(fd[1]);
            result r;
            const ssize_t got = read(fd[0], &r, sizeof r);
            close(fd[0]);
            waitpid(pid, NULL, 0);
            if (got != sizeof r) {
                fprintf(stderr, "bench_train: %s failed\n", cfgs[i].name);
                return 1;
            }
            printf("%-12s %-9s %9zu %10.0f %8.1f %8.1f %8.1f %10.1f %9.1f\n", cfgs[i].name,
                   rc ? "block" : "none", r.params, r.tok_s, r.fwd_ms, r.bwd_ms, r.opt_ms, r.acts_mb, r.rss_mb);
            fflush(stdout);
        }
    return 0;
}
