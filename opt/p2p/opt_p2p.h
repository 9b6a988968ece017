/* opt_p2p.h - what the files of opt/p2p share: the planner entry, the copy-service internals and
 * the MXFP8 kernels' host entry points. Not public API. */
#ifndef RS_OPT_P2P_H
#define RS_OPT_P2P_H

#include "reshard/copy_service.h"
#include "reshard/opt.h"
#include "reshard/p2p.h"

/* only >= 0: keep the transfers rank `only` sends or receives (rs_p2p_opt_plan_rank). */
rs_status rs__p2p_opt_plan(const rs_p2p_model *m, int32_t only, rs_p2p_plan *out);

/* Bytes that went through submit_send / submit_recv for one (rank, tag). */
typedef struct rs_cs_count {
  uint64_t key; /* rank << 32 | tag, 0 = empty slot (stored + 1) */
  int64_t sent, recv;
} rs_cs_count;

struct rs_copy_service {
  const rs_copy_service_vtable *vt;
  void *self;
  void *dl; /* dlopen handle of a plug-in */
  char name[64];
  int counting; /* rs_copy_service_count: tally accepted submissions per (rank, tag) */
  rs_cs_count *count; /* open addressing, ncount slots (a power of two), nused filled */
  int64_t ncount, nused;
  struct rs_world *w; /* the world it was opened on (agreement before an exchange) */
  int32_t rank;       /* this process's world rank (-1: it plays every rank) */
  int32_t recv_peer;  /* the first peer a receive of the current run waits on (-1: none) */
  int64_t nrecv;      /* receives submitted for the current run */
  int stuck;          /* a plug-in's run() outlived the timeout and still runs on its thread */
  char *stage;        /* the executor's staging buffer, kept across calls (rs__cs_stage) */
  int64_t stage_cap;
};

/* A staging buffer of at least `bytes` owned by cs (grown, never shrunk); NULL when out of memory. */
char *rs__cs_stage(rs_copy_service *cs, int64_t bytes);

/* The transport of a built-in host-memory service ("local", "mpi"), NULL for plug-ins and "nccl":
 * the executor posts strided views to it, so a box that is not one contiguous byte range travels
 * without the executor's staging (the local matcher copies view to view, MPI stages it itself). */
struct rs_comm;
struct rs_view;
struct rs_comm *rs__cs_comm(rs_copy_service *cs);
/* Post one view as a send (is_recv 0) or receive on rs__cs_comm(cs); completes in rs_copy_service_run. */
rs_status rs__cs_post_view(rs_copy_service *cs, int is_recv, int32_t me, const struct rs_view *v, int32_t peer,
                           int64_t task_id);

/* Built-in services as vtables (copy_service.c). */
rs_status rs__cs_builtin(const char *name, struct rs_world *w, const rs_copy_service_vtable **vt, void **self);

#endif
