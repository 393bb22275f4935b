// dist_nompi.c: dist.h for a build without MPI (the twin of dist_mpi.c): one process, rank 0 of
// 1; the collectives are copies. Under a launcher that started several processes it refuses
// to run, since each would train alone and write the same files.
#ifndef FPLAB_HAVE_MPI
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/dist.h"

bool dist_have_mpi(void) { return false; }

int dist_init(dist_world *w, char *msg, size_t msg_len) {
    *w = (dist_world){0, 1, false};
    int rank, size;
    if (dist_launcher(&rank, &size) && size > 1) {
        snprintf(msg, msg_len, "a launcher started %d processes, but this fplab was built without MPI: "
                 "install Open MPI (make deps) and rebuild, or run without the launcher", size);
        return DIST_ENOMPI;
    }
    return DIST_OK;
}

void dist_abort(const dist_world *w, const char *what) {
    fprintf(stderr, "fplab: rank %d of %d: %s\n", w->rank, w->size, what);
    exit(1);
}

int dist_min_int(const dist_world *w, int v) { return (void)w, v; }
int dist_max_int(const dist_world *w, int v) { return (void)w, v; }
void dist_sum_disjoint_f64(const dist_world *w, double *x, size_t n) { (void)w, (void)x, (void)n; }
void dist_bcast(const dist_world *w, void *x, size_t bytes, int root) { (void)w, (void)x, (void)bytes, (void)root; }

void dist_alltoall_bytes(const dist_world *w, void *recv, size_t rbytes, const void *send, const size_t *soff) {
    (void)w;
    memcpy(recv, (const char *)send + soff[0], rbytes);
}

void dist_allgather_bytes(const dist_world *w, void *buf, const size_t *off) { (void)w, (void)buf, (void)off; }

void dist_sendrecv_bytes(const dist_world *w, const void *send, size_t n, int to, void *recv, size_t m, int from) {
    (void)w, (void)to, (void)from;
    memcpy(recv, send, n < m ? n : m);
}

void dist_max_f32(const dist_world *w, float *x, size_t n) { (void)w, (void)x, (void)n; }
void dist_gather_to0(const dist_world *w, float *out, const float *x, size_t n) { (void)w, (void)out, (void)x, (void)n; }
void dist_barrier(const dist_world *w) { (void)w; }
#endif
