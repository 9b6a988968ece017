/* comm.h - the copy service every transport implements (Megatron-Core's CopyService shape):
 * submit_send(views, peer, task), submit_recv(views, peer, task), run(). A send and a receive match
 * when they name the same (sender, receiver, task); their views must hold the same byte count, and
 * bytes travel in row-major order of the views, one after the other. Views stay owned by the caller
 * and must stay valid until run() returns; the descriptors themselves are copied at submit. */
#ifndef RS_OPT_COMM_H
#define RS_OPT_COMM_H

#include "opt_internal.h"

typedef struct rs_comm rs_comm;

typedef struct rs_comm_ops {
  const char *name;
  /* `from`/`to` are world ranks. On a one-rank-per-process transport `from` (send) or `to` (recv)
   * must be this process's rank. */
  rs_status (*submit_send)(rs_comm *c, int32_t from, int32_t to, int64_t task, const rs_view *v,
                           int nv);
  rs_status (*submit_recv)(rs_comm *c, int32_t to, int32_t from, int64_t task, const rs_view *v,
                           int nv);
  /* Complete every submitted transfer; afterwards the comm is empty and reusable. */
  rs_status (*run)(rs_comm *c);
  void (*destroy)(rs_comm *c);
} rs_comm_ops;

struct rs_comm {
  const rs_comm_ops *ops;
  int device; /* views point to device memory */
};

/* ---- progress timeout (timeout.c), shared by every transport of the process ---- */
#define RS_COMM_DEFAULT_TIMEOUT 300.0
/* A wait that sees no transfer complete for this long fails with RS_ERR_TIMEOUT naming the peer. */
void rs__comm_set_timeout(double seconds);
double rs__comm_timeout(void);
/* Record the first failure (printf-style message) and return RS_ERR_TIMEOUT with it. After one,
 * rs__comm_check fails at once and rs__comm_failure returns the message (NULL while healthy). */
rs_status rs__comm_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
rs_status rs__comm_check(void);
const char *rs__comm_failure(void);
/* Monotonic seconds, and one polling pause that grows with the time already waited. */
double rs__comm_clock(void);
void rs__comm_backoff(double waited);

/* ---- byte counting (count.c): wraps whatever transport serves a mesh ---- */
rs_status rs__comm_count_create(rs_comm **out);
/* Forward to `inner` from now on (the world points it at the comm of the current mesh). */
void rs__comm_count_wrap(rs_comm *counter, rs_comm *inner);
void rs__comm_count_reset(rs_comm *counter);
/* The transport a counter forwards to (c itself when c is no counter). */
rs_comm *rs__comm_count_inner(rs_comm *c);
/* The tally: one entry per (from, to) pair that posted anything; *out is malloc'd. */
rs_status rs__comm_count_pairs(const rs_comm *counter, rs_posted **out, int64_t *n);

/* In-process matcher: every rank lives in this process. device selects CUDA copies. */
rs_status rs_comm_local_create(int device, rs_comm **out);
/* When c (or the transport behind its counter) is the host in-process matcher: queue n local copies
 * (dst[i] <- src[i]) into its next run(), one batch with the transfers, and return 1; else 0. The
 * views must stay valid until run(), which the caller calls next. */
int rs__comm_local_defer(rs_comm *c, const rs_view *dst, const rs_view *src, int64_t n);

/* ---- MPI (comm_mpi.c; stubs returning RS_ERR_UNSUPPORTED when built without MPI) ---- */
int rs_mpi_available(void);
/* Initialize MPI if needed; rank and size of MPI_COMM_WORLD; *owned is 1 when we initialized it. */
rs_status rs_mpi_start(int *argc, char ***argv, int *rank, int *size, int *owned);
void rs_mpi_stop(int owned);
rs_status rs_mpi_allreduce_or(int *flag);
rs_status rs_mpi_barrier(void);
/* bytes of buf from world rank root to every rank (point-to-point, under the timeout). */
rs_status rs_mpi_bcast(void *buf, int bytes, int root);
rs_status rs_comm_mpi_create(rs_comm **out);

/* ---- NCCL (comm_nccl.c; stubs without CUDA) ---- */
int rs_nccl_available(void);
typedef struct rs_nccl_world rs_nccl_world;
rs_status rs_nccl_world_create(int rank, int size, rs_nccl_world **out);
void rs_nccl_world_destroy(rs_nccl_world *w);
/* A comm over the communicator of mesh m (split once per rank list and cached). */
rs_status rs_comm_nccl_for_mesh(rs_nccl_world *w, const rs_mesh *m, rs_comm **out);
/* The communicator over every process of the world (ranks 0..size-1, no rs_mesh and so no
 * RS_MAX_RANKS cap): cross-config resharding's copy service. */
rs_status rs_comm_nccl_all(rs_nccl_world *w, rs_comm **out);

#endif
