// dist.h: the process group of a distributed run and the few collectives fplab uses, over MPI
// (Open MPI; any launcher: mpirun, srun, ...). trainer/dist_mpi.c is the MPI unit (built when
// make finds MPI); trainer/dist_nompi.c is its twin with the same functions for one process, so
// one fplab binary runs with and without a launcher.
// Constraints: these functions move bytes only; every sum fplab reduces is done by the caller
// in a fixed order (trainer/dist_wire.h), never by MPI's reduction algorithms, except where
// the result cannot depend on the order (a sum with one nonzero term per entry, a min, a max).
// An MPI error (a rank died, the network failed) is not returned: the rank prints what failed
// and the job is aborted (MPI_Abort), so no rank waits forever; checkpoints are written by rank
// 0 atomically, so the last one stays whole.
#ifndef FPLAB_DIST_H
#define FPLAB_DIST_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { DIST_OK = 0, DIST_EINVAL = 1, DIST_ENOMPI = 2 };
// More ranks than this is a typing error (and keeps rank-indexed arrays small).
enum { DIST_RANKS_MAX = 65536 };

typedef struct {
    int rank, size;  // this process and the number of processes (0 of 1 without a launcher)
    bool mpi;        // MPI is initialised (a launcher started this process)
} dist_world;

// True when this build has MPI.
bool dist_have_mpi(void);
// What the launcher says, from its environment only (no MPI call): Open MPI's
// OMPI_COMM_WORLD_RANK/SIZE, PMIx's PMIX_RANK with the size from OMPI or PMI, MPICH's
// PMI_RANK/PMI_SIZE. rank 0 of 1 and false when no launcher started this process.
bool dist_launcher(int *rank, int *size);
// Removes the launcher's variables from the environment, so that child processes (the runs
// of `fplab ablate`) do not believe they are ranks of this job.
void dist_launcher_forget(void);

// Joins the job: MPI_Init when a launcher started this process (once per process; MPI_Finalize
// runs at exit), else rank 0 of 1. FPLAB_MPI=0 in the environment skips MPI. DIST_ENOMPI with a
// message when a launcher started several processes but this build has no MPI.
int dist_init(dist_world *w, char *msg, size_t msg_len);

// --- collectives (every rank calls them in the same order; with one process they copy)
// Prints "fplab: rank R: what" on stderr and ends the whole job (MPI_Abort; exit without MPI).
void dist_abort(const dist_world *w, const char *what);
// min and max of an int over the ranks (agreement on errors and decisions).
int dist_min_int(const dist_world *w, int v);
int dist_max_int(const dist_world *w, int v);
// x[0..n) summed over the ranks where each entry is nonzero on at most one rank (others hold
// +0): exact whatever the order.
void dist_sum_disjoint_f64(const dist_world *w, double *x, size_t n);
// Rank `root`'s x[0..n) to every rank.
void dist_bcast(const dist_world *w, void *x, size_t bytes, int root);
// All-to-all of byte chunks: rank r sends send[soff[c]..soff[c+1]) to rank c and receives rank
// c's chunk r (rbytes bytes from every rank) into recv + c*rbytes (soff: size+1 offsets).
void dist_alltoall_bytes(const dist_world *w, void *recv, size_t rbytes, const void *send, const size_t *soff);
// All-gather in place: rank r's buf[off[r]..off[r+1]) (bytes) to every rank.
void dist_allgather_bytes(const dist_world *w, void *buf, const size_t *off);
// Sends n bytes to rank `to` and receives m bytes from rank `from` (a ring hop).
void dist_sendrecv_bytes(const dist_world *w, const void *send, size_t n, int to, void *recv, size_t m, int from);
// x[0..n) = the largest x[i] over the ranks (exact in any order; for values that are not NaN).
void dist_max_f32(const dist_world *w, float *x, size_t n);
// Rank 0 receives rank r's x[0..n) into out (r = 1..size-1, in order, each n floats); the
// other ranks send theirs. (For the checkpoint of local SGD's per-rank state.)
void dist_gather_to0(const dist_world *w, float *out, const float *x, size_t n);
void dist_barrier(const dist_world *w);

#endif
