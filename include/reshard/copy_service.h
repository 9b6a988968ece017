/* copy_service.h - the copy service: the transport interface of cross-config resharding (SPEC 10,
 * the shape of Megatron-Core's CopyService). submit_send / submit_recv queue transfers; run()
 * completes everything queued. A send and a receive match on (sender, receiver, task_id): the send
 * names its receiver as `peer`, the receive names its sender as `peer`. Buffers are plain bytes,
 * owned by the caller, valid until run() returns.
 *
 * Built-in services: "local" (every rank in this process), "mpi" (one process per rank), "nccl" (one
 * process per rank, bytes staged through the GPU). Any shared library that exports the two symbols
 * below is a plug-in (`reshard p2p run --copy-service ./libx.so`):
 *
 *   int rs_copy_service_abi_version(void);      returns RS_COPY_SERVICE_ABI_VERSION
 *   int rs_copy_service_create(int32_t world_rank, int32_t world_size,
 *                              const rs_copy_service_vtable **vt, void **self);   0 on success
 *
 * world_rank is -1 when one process plays every rank (then `me` in the calls below is any rank),
 * else this process's rank (then `me` is always world_rank). Every call returns 0 on success and
 * non-zero on failure, with a one-line reason from last_error. The ABI is plain C: no reshard
 * header is needed beyond this one, no reshard symbol is called back. */
#ifndef RESHARD_COPY_SERVICE_H
#define RESHARD_COPY_SERVICE_H

#include <stdint.h>
#include "reshard/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_COPY_SERVICE_ABI_VERSION 1

typedef struct rs_copy_service_vtable {
  int abi_version; /* RS_COPY_SERVICE_ABI_VERSION */
  const char *name;
  int (*submit_send)(void *self, int32_t me, const void *buf, int64_t bytes, int32_t peer, int64_t task_id);
  int (*submit_recv)(void *self, int32_t me, void *buf, int64_t bytes, int32_t peer, int64_t task_id);
  int (*run)(void *self);
  const char *(*last_error)(void *self);
  void (*destroy)(void *self);
} rs_copy_service_vtable;

typedef int (*rs_copy_service_abi_version_fn)(void);
typedef int (*rs_copy_service_create_fn)(int32_t world_rank, int32_t world_size,
                                         const rs_copy_service_vtable **vt, void **self);

/* ---- reshard's side (library functions; need opt/) ---- */
typedef struct rs_copy_service rs_copy_service;
struct rs_world;

/* "local", "mpi" or "nccl" on world w (NULL: local), or a plug-in library path (contains '/' or ends
 * in .so). Plug-ins get (world rank, world size) of w, or (-1, 1) on a local world. */
rs_status rs_copy_service_open(const char *name, struct rs_world *w, rs_copy_service **out);
void rs_copy_service_close(rs_copy_service *cs);
const char *rs_copy_service_name(const rs_copy_service *cs);
rs_status rs_copy_service_send(rs_copy_service *cs, int32_t me, const void *buf, int64_t bytes,
                               int32_t peer, int64_t task_id);
rs_status rs_copy_service_recv(rs_copy_service *cs, int32_t me, void *buf, int64_t bytes,
                               int32_t peer, int64_t task_id);
rs_status rs_copy_service_run(rs_copy_service *cs);
/* Byte counts at the transport (`p2p run --json`): with counting on, opt's executor tallies every
 * piece the service accepted under (rank, tag = the parameter index), whether it travelled alone
 * or inside its sender/receiver pair's coalesced message. rs_copy_service_counted reads one
 * (rank, tag): 0 when nothing passed. */
void rs_copy_service_count(rs_copy_service *cs, int on);
rs_status rs_copy_service_tally(rs_copy_service *cs, int32_t me, int64_t tag, int64_t bytes, int is_recv);
void rs_copy_service_counted(const rs_copy_service *cs, int32_t rank, int64_t tag, int64_t *sent, int64_t *recv);

#ifdef __cplusplus
}
#endif
#endif
