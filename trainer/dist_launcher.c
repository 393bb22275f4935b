// dist_launcher.c: what a launcher (mpirun, srun, mpiexec) tells a process through its
// environment: its rank and the job's size. Shared by dist_mpi.c and dist_nompi.c; no MPI here,
// so `fplab ablate` can take its shard under mpirun without joining the job.
#include <stdlib.h>

#include "trainer/dist.h"

static int env_int(const char *name, int fallback) {
    const char *s = getenv(name);
    if (!s || !*s) return fallback;
    char *end;
    const long v = strtol(s, &end, 10);
    return *end || v < 0 || v > DIST_RANKS_MAX ? fallback : (int)v;
}

static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"};

bool dist_launcher(int *rank, int *size) {
    int r = -1, n = -1;
    for (size_t i = 0; i < sizeof rank_vars / sizeof *rank_vars && r < 0; i++) r = env_int(rank_vars[i], -1);
    for (size_t i = 0; i < sizeof size_vars / sizeof *size_vars && n < 0; i++) n = env_int(size_vars[i], -1);
    if (r < 0 || n < 1 || r >= n) {
        *rank = 0, *size = 1;
        return false;
    }
    *rank = r, *size = n;
    return true;
}

void dist_launcher_forget(void) {
    for (size_t i = 0; i < sizeof rank_vars / sizeof *rank_vars; i++) unsetenv(rank_vars[i]);
    for (size_t i = 0; i < sizeof size_vars / sizeof *size_vars; i++) unsetenv(size_vars[i]);
}
