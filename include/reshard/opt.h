/* opt.h - the optimized implementation: a plan compiler with minimal-traffic schedules and ordered
 * reductions, run over a transport (local threads, MPI, NCCL). It shares only core/ with ref/. */
#ifndef RESHARD_OPT_H
#define RESHARD_OPT_H

#include "reshard/case.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A world: the processes/threads that play the mesh's ranks.
 * "local": one process plays every rank; "mpi": one process per world rank (host memory);
 * "nccl": one process per rank on device memory, bootstrapped over MPI. */
typedef struct rs_world rs_world;

rs_status rs_world_init(const char *transport, int *argc, char ***argv, rs_world **out);
/* World rank of this process (0 for local) and the number of processes (1 for local). */
int rs_world_rank(const rs_world *w);
int rs_world_size(const rs_world *w);
/* True when this process plays every mesh rank (local transport). */
int rs_world_is_local(const rs_world *w);
/* Bitwise OR of flag over all processes (agreeing on a failure; several 0/1 flags travel as bits of
 * one int); a no-op for local. */
rs_status rs_world_agree(rs_world *w, int *flag);
/* Every process's status, agreed in one round: *flags gets RS_AGREE_FAILED when some process's
 * status is not RS_OK, and RS_AGREE_NOMEM too when some process ran out of memory (a local world:
 * this process's alone). For a process that failed before a collective step, so that its peers
 * stop at once instead of waiting for it until --timeout. Returns the agreement's own failure (a
 * stalled or dead peer). */
enum { RS_AGREE_FAILED = 1, RS_AGREE_NOMEM = 2 };
rs_status rs_world_agree_status(rs_world *w, rs_status mine, int *flags);
void rs_world_finalize(rs_world *w);
/* Progress timeout of every transport wait of this process, in seconds (> 0; default 300): a wait
 * (an exchange, an agreement, a plug-in copy service's run, an NCCL group) that sees nothing complete
 * for this long fails with RS_ERR_TIMEOUT naming the peer it waited for, on every rank that waits.
 * After that failure the transports are broken for good: every later wait fails at once with the
 * same message and rs_world_finalize skips the collective teardown that would wait for the peer. */
void rs_opt_set_timeout(double seconds);
/* The message of the peer failure that broke this process's transports; NULL while healthy. */
const char *rs_opt_transport_failure(void);
/* The MPI transport's single-copy intra-node path (process_vm_readv): "on (...)" or "off (why)", and
 * the copies it did (reads and writes) and their bytes in this process so far (NULL pointers: not wanted). */
const char *rs_opt_mpi_cma(int64_t *reads, int64_t *bytes);
/* Transports: "local", "local-device" (every rank in this process on CUDA device memory), "mpi",
 * "nccl". The name the world was made with, and whether its buffers live on a device. A NULL world
 * means a local one. */
const char *rs_world_transport(const rs_world *w);
int rs_world_uses_device(const rs_world *w);
/* Bytes handed to the world's transport since the last reset, per (sender, receiver) pair of world
 * ranks, counted by the layer every transport is wrapped in: `sent` sums the posted sends, `recvd`
 * the posted receives. A process of an MPI/NCCL world sees only the sends and receives it posts
 * itself. */
typedef struct rs_posted {
  int32_t from, to;
  int64_t sent, recvd;
} rs_posted;
/* *out: malloc'd array of *n entries (pairs that posted nothing are absent); caller frees. */
rs_status rs_world_posted(const rs_world *w, rs_posted **out, int64_t *n);
void rs_world_posted_reset(rs_world *w);

/* Usable CUDA devices (0 in a build without CUDA or on a machine without a GPU). */
int rs_opt_cuda_devices(void);

/* Caches compiled schedules by (layouts, shape, dtype). */
typedef struct rs_opt rs_opt;
rs_status rs_opt_create(rs_opt **out);
void rs_opt_destroy(rs_opt *o);

typedef struct rs_opt_stats {
  int64_t bytes_sent;  /* bytes moved between distinct ranks */
  int64_t bytes_local; /* bytes copied without the transport */
  int64_t messages;
  int cache_hit;
} rs_opt_stats;

/* Redistribute c->src -> c->dst with opt's own schedule. `in`/`out` are indexed by mesh position;
 * a process fills (and reads) only the positions it plays: all of them on a local world, the one
 * whose mesh rank equals its world rank under MPI/NCCL. stats may be NULL.
 * `in`/`out` are host memory on every transport (device worlds stage through the GPU). `out` is
 * either zeroed ({0, NULL}) or earlier locals of the same mesh; played positions are (re)sized to
 * their dst boxes. stats count the whole schedule (all ranks). */
rs_status rs_opt_redistribute(rs_opt *o, rs_world *w, const rs_case *c, const rs_locals *in,
                              rs_locals *out, rs_opt_stats *stats);
/* Device worlds ("local-device", "nccl"): the same on the caller's device memory, end to end. in_dev
 * and out_dev are indexed by mesh position; the played positions hold device pointers to packed
 * row-major locals of their src (in) and dst (out) boxes, rs_opt_box_bytes each. Only opt's pooled
 * workspace is used beside them; the schedule comes from the same cache. The inputs must be ready
 * (whatever stream wrote them synchronized); opt's work is complete on return. RS_ERR_INVALID on a
 * host world. */
rs_status rs_opt_redistribute_device(rs_opt *o, rs_world *w, const rs_case *c, void *const *in_dev,
                                     void *const *out_dev, rs_opt_stats *stats);
/* Bytes of the local at mesh position pos for c's src (dst = 0) or dst (dst = 1) layout; -1 when
 * the case or pos is invalid. */
int64_t rs_opt_box_bytes(const rs_case *c, int dst, int pos);
/* SPEC 8 source values of c generated on the device straight into in_dev (the played positions of
 * w, as above): the bytes rs_make_source gives, with nothing crossing PCIe. Complete on return. */
rs_status rs_opt_device_source(rs_world *w, const rs_case *c, void *const *in_dev);
/* A copy-only case (no Partial in src or dst): every dst element is the generator's value at its
 * global index, so the outputs in out_dev (played positions) are checked on the device against the
 * values generated there; *ndiff: the differing elements (0 on success). Only the count crosses
 * PCIe. RS_ERR_UNSUPPORTED for a case with a Partial (its outputs are reductions). */
rs_status rs_opt_device_check(rs_world *w, const rs_case *c, void *const *out_dev, int64_t *ndiff);
/* Execute a given step plan (ref's planners, plug-in planners) step by step on opt. */
rs_status rs_opt_execute_plan(rs_opt *o, rs_world *w, const rs_case *c, const rs_plan *p,
                              const rs_locals *in, rs_locals *out, rs_opt_stats *stats);

/* Compile (or fetch from the cache) opt's schedule for c and report its traffic, moving nothing.
 * Counts are over all ranks. */
rs_status rs_opt_plan_stats(rs_opt *o, const rs_case *c, rs_opt_stats *stats);
/* The bytes opt's own schedule for c sends between distinct ranks, per (sender, receiver) pair of
 * world ranks (all rounds together; sent == recvd in each entry). *out: malloc'd, caller frees.
 * SPEC 7's lower bound of a copy-only case is core's rs_traffic_lower_bound (reshard/plan.h). */
rs_status rs_opt_sched_pairs(rs_opt *o, const rs_case *c, rs_posted **out, int64_t *n);

#ifdef __cplusplus
}
#endif
#endif
