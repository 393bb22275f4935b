// dist_mpi.c: dist.h over MPI (built when make finds MPI: FPLAB_HAVE_MPI; dist_nompi.c is the
// twin for builds without it). Data movement only: the sums are the caller's, in a fixed order.
// Constraints: MPI_ERRORS_RETURN on MPI_COMM_WORLD, and every call checked: an error (a peer
// died, a broken connection) prints which call failed on which rank and aborts the job rather
// than hang; counts above INT_MAX are sent in pieces.
#ifdef FPLAB_HAVE_MPI
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/dist.h"

bool dist_have_mpi(void) { return true; }

static void finalize(void) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

int dist_init(dist_world *w, char *msg, size_t msg_len) {
    (void)msg, (void)msg_len;
    *w = (dist_world){0, 1, false};
    int rank, size;
    const char *force = getenv("FPLAB_MPI");
    if (force && !strcmp(force, "0")) return DIST_OK;
    if (!dist_launcher(&rank, &size)) return DIST_OK;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            snprintf(msg, msg_len, "MPI_Init failed (rank %d of %d by the launcher's environment)", rank, size);
            return DIST_EINVAL;
        }
        atexit(finalize);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
    w->mpi = true;
    return DIST_OK;
}

void dist_abort(const dist_world *w, const char *what) {
    fprintf(stderr, "fplab: rank %d of %d: %s\n", w->rank, w->size, what);
    fflush(stderr);
    if (w->mpi) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

// Every MPI call goes through here: an error ends the job with the call's name and MPI's text.
static void check(const dist_world *w, int rc, const char *call) {
    if (rc == MPI_SUCCESS) return;
    char err[MPI_MAX_ERROR_STRING], what[MPI_MAX_ERROR_STRING + 160];
    int len = 0;
    MPI_Error_string(rc, err, &len);
    snprintf(what, sizeof what, "%s failed: %s. A rank died or the connection between ranks broke; the "
             "job stops (rank 0's last checkpoint is whole: resume from it)", call, err);
    dist_abort(w, what);
}

int dist_min_int(const dist_world *w, int v) {
    if (!w->mpi) return v;
    int out;
    check(w, MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce(min)");
    return out;
}

int dist_max_int(const dist_world *w, int v) {
    if (!w->mpi) return v;
    int out;
    check(w, MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce(max)");
    return out;
}

void dist_sum_disjoint_f64(const dist_world *w, double *x, size_t n) {
    for (size_t at = 0; w->mpi && at < n; at += INT_MAX) {
        const int k = n - at > INT_MAX ? INT_MAX : (int)(n - at);
        check(w, MPI_Allreduce(MPI_IN_PLACE, x + at, k, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce(sum)");
    }
}

void dist_bcast(const dist_world *w, void *x, size_t bytes, int root) {
    for (size_t at = 0; w->mpi && at < bytes; at += INT_MAX) {
        const int k = bytes - at > INT_MAX ? INT_MAX : (int)(bytes - at);
        check(w, MPI_Bcast((char *)x + at, k, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    }
}

static int count(const dist_world *w, size_t n) {
    if (n > INT_MAX) dist_abort(w, "a chunk of more than 2^31 bytes: use more ranks");
    return (int)n;
}

void dist_alltoall_bytes(const dist_world *w, void *recv, size_t rbytes, const void *send, const size_t *soff) {
    const int n = w->size;
    if (!w->mpi) {
        memcpy(recv, (const char *)send + soff[0], rbytes);
        return;
    }
    int *sc = malloc(4 * sizeof(int) * (size_t)n);
    if (!sc) dist_abort(w, "out of memory");
    int *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    for (int c = 0; c < n; c++) {
        sc[c] = count(w, soff[c + 1] - soff[c]), sd[c] = count(w, soff[c]);
        rc[c] = count(w, rbytes), rd[c] = count(w, (size_t)c * rbytes);
    }
    check(w, MPI_Alltoallv(send, sc, sd, MPI_BYTE, recv, rc, rd, MPI_BYTE, MPI_COMM_WORLD), "MPI_Alltoallv");
    free(sc);
}

void dist_allgather_bytes(const dist_world *w, void *buf, const size_t *off) {
    if (!w->mpi) return;
    const int n = w->size;
    int *cnt = malloc(2 * sizeof(int) * (size_t)n);
    if (!cnt) dist_abort(w, "out of memory");
    for (int c = 0; c < n; c++) cnt[c] = count(w, off[c + 1] - off[c]), cnt[n + c] = count(w, off[c]);
    check(w, MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, cnt + n, MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    free(cnt);
}

void dist_sendrecv_bytes(const dist_world *w, const void *send, size_t n, int to, void *recv, size_t m, int from) {
    if (!w->mpi) {
        memcpy(recv, send, n < m ? n : m);
        return;
    }
    check(w, MPI_Sendrecv(send, count(w, n), MPI_BYTE, to, 7, recv, count(w, m), MPI_BYTE, from, 7, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE), "MPI_Sendrecv");
}

void dist_max_f32(const dist_world *w, float *x, size_t n) {
    for (size_t at = 0; w->mpi && at < n; at += INT_MAX) {
        const int k = n - at > INT_MAX ? INT_MAX : (int)(n - at);
        check(w, MPI_Allreduce(MPI_IN_PLACE, x + at, k, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce(max)");
    }
}

void dist_gather_to0(const dist_world *w, float *out, const float *x, size_t n) {
    if (!w->mpi) return;
    for (int r = 1; r < w->size; r++) {
        for (size_t at = 0; at < n; at += INT_MAX) {
            const int k = n - at > INT_MAX ? INT_MAX : (int)(n - at);
            if (w->rank == 0)
                check(w, MPI_Recv(out + (size_t)(r - 1) * n + at, k, MPI_FLOAT, r, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "MPI_Recv");
            else if (w->rank == r)
                check(w, MPI_Send(x + at, k, MPI_FLOAT, 0, 8, MPI_COMM_WORLD), "MPI_Send");
        }
    }
}

void dist_barrier(const dist_world *w) {
    if (w->mpi) check(w, MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}
#endif
