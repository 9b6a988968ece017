/* world.c - rs_world: "local" (every rank in this process, host memory), "local-device" (the same
 * on CUDA device memory), "mpi" (one process per rank, host memory) and "nccl" (one process per
 * rank, device memory, bootstrapped over MPI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm/world.h"
#include "cuda/cuda_api.h"

rs_status rs_world_init(const char *transport, int *argc, char ***argv, rs_world **out) {
  *out = NULL;
  if (!transport) transport = "local";
  rs_world *w = calloc(1, sizeof *w);
  if (!w) return rs_fail(RS_ERR_NOMEM, "world: out of memory");
  snprintf(w->name, sizeof w->name, "%s", transport);
  w->size = 1;
  rs_status st = RS_OK;
  if (!strcmp(transport, "local")) {
    w->kind = RS_WORLD_LOCAL;
    st = rs_comm_local_create(0, &w->comm);
  } else if (!strcmp(transport, "local-device")) {
    w->kind = RS_WORLD_LOCAL;
    w->device = 1;
    if (rs_cuda_device_count() <= 0)
      st = rs_fail(RS_ERR_UNSUPPORTED, "transport: local-device needs a CUDA device and none is usable");
    else
      st = rs_comm_local_create(1, &w->comm);
  } else if (!strcmp(transport, "mpi")) {
    w->kind = RS_WORLD_MPI;
    if (!(st = rs_mpi_start(argc, argv, &w->rank, &w->size, &w->mpi_owned)))
      st = rs_comm_mpi_create(&w->comm);
  } else if (!strcmp(transport, "nccl")) {
    w->kind = RS_WORLD_NCCL;
    w->device = 1;
    if (!rs_nccl_available() || rs_cuda_device_count() <= 0) {
      st = rs_fail(RS_ERR_UNSUPPORTED, "transport: nccl needs CUDA, NCCL and a GPU, and %s",
                   rs_nccl_available() ? "no GPU is usable" : "this build has no NCCL");
    } else if (!(st = rs_mpi_start(argc, argv, &w->rank, &w->size, &w->mpi_owned))) {
      st = rs_nccl_world_create(w->rank, w->size, &w->nccl);
    }
  } else {
    st = rs_fail(RS_ERR_INVALID, "transport: unknown '%s' (local, local-device, mpi, nccl)", transport);
  }
  if (!st) st = rs__comm_count_create(&w->count);
  if (st) {
    rs_world_finalize(w);
    return st;
  }
  *out = w;
  return RS_OK;
}

int rs_world_rank(const rs_world *w) { return w ? w->rank : 0; }
int rs_world_size(const rs_world *w) { return w ? w->size : 1; }
int rs_world_is_local(const rs_world *w) { return !w || w->kind == RS_WORLD_LOCAL; }
int rs_world_uses_device(const rs_world *w) { return w && w->device; }
const char *rs_world_transport(const rs_world *w) { return w ? w->name : "local"; }

rs_status rs_world_agree(rs_world *w, int *flag) {
  if (!w || w->kind == RS_WORLD_LOCAL) return RS_OK;
  return rs_mpi_allreduce_or(flag);
}

rs_status rs_world_agree_status(rs_world *w, rs_status mine, int *flags) {
  *flags = (mine != RS_OK ? RS_AGREE_FAILED : 0) | (mine == RS_ERR_NOMEM ? RS_AGREE_NOMEM : 0);
  return rs_world_agree(w, flags);
}

rs_status rs_world_comm(rs_world *w, const rs_mesh *m, rs_comm **out) {
  rs_comm *inner = w->comm;
  if (w->kind == RS_WORLD_NCCL) {
    rs_status st = rs_comm_nccl_for_mesh(w->nccl, m, &inner);
    if (st) return st;
  }
  rs__comm_count_wrap(w->count, inner);
  *out = w->count;
  return RS_OK;
}

rs_status rs_world_posted(const rs_world *w, rs_posted **out, int64_t *n) {
  if (!w || !out || !n) return rs_fail(RS_ERR_INVALID, "rs_world_posted: NULL argument");
  return rs__comm_count_pairs(w->count, out, n);
}

void rs_world_posted_reset(rs_world *w) {
  if (w && w->count) rs__comm_count_reset(w->count);
}

void rs_world_finalize(rs_world *w) {
  if (!w) return;
  if (w->count) w->count->ops->destroy(w->count);
  if (w->comm) w->comm->ops->destroy(w->comm);
  if (w->nccl) rs_nccl_world_destroy(w->nccl);
  if (w->ckpt_stage_free) w->ckpt_stage_free(w->ckpt_stage);
  if (w->kind != RS_WORLD_LOCAL) rs_mpi_stop(w->mpi_owned);
  free(w);
}

void rs_opt_set_timeout(double seconds) { rs__comm_set_timeout(seconds); }
const char *rs_opt_transport_failure(void) { return rs__comm_failure(); }

int rs_opt_cuda_devices(void) { return rs_cuda_device_count(); }
