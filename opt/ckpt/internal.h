/* internal.h - what the files of opt/ckpt share: the I/O thread pool, the view of every rank's
 * state dict a process works from (its own, plus the others' metadata gathered over the
 * transport under MPI), the agreement on errors, and host/device copies. */
#ifndef RS_OPT_CKPT_INTERNAL_H
#define RS_OPT_CKPT_INTERNAL_H

#include "comm/comm.h"
#include "core/ckpt/internal.h"
#include "reshard/ckpt_opt.h"

/* ---- pool: fn(ctx, task) for task in [0, ntasks) on nthreads threads; the first error wins and
 * is re-raised (message included) on the calling thread. */
typedef rs_status (*rs__pool_fn)(void *ctx, int64_t task, int tid);
rs_status rs__pool_run(int nthreads, int64_t ntasks, rs__pool_fn fn, void *ctx);

/* ---- the ranks a process works with ---- */
typedef struct rs__ock {
  rs_world *world;    /* NULL: local */
  int me, n;          /* this process's rank (0 when local), world ranks */
  int local;          /* every rank lives in this process */
  int device;         /* tensor data is device memory: never touched but through copy_in/out */
  int sim;            /* ... simulated (device.c): RS_SIM_DEVICE=1 on a local world */
  rs_comm *comm;
  rs_comm *own_comm;  /* owned host transport (local-device worlds) */
  rs_ckpt_world all;  /* every rank's state dict: data only where mine() */
  rs_state_dict *shadow; /* owned, MPI: the others' metadata */
  int nthreads;
  int64_t segment;
  struct rs__ock_stage *stage; /* stage.c: the staging pool this operation holds */
  int own_stage;               /* ... made for this operation alone */
  int stage_bufs;              /* what it asked for: buffers, bytes each */
  int64_t stage_bytes;
  int64_t stage_allocs;        /* buffers it had to allocate (0 once a device world's pool is warm) */
} rs__ock;

rs_status rs__ock_init(rs__ock *c, rs_world *world, rs_ckpt_world *w, const rs_ckpt_opt_opts *o);
static inline int rs__ock_mine(const rs__ock *c, int r) { return c->local || r == c->me; }
/* Gathers the metadata of every rank's state dict (after factories) into c->all. */
rs_status rs__ock_gather(rs__ock *c, rs_ckpt_world *w);
void rs__ock_free(rs__ock *c);
/* Every rank learns whether any failed: a rank that did not fail gets RS_ERR_IO "another rank
 * failed"; a failing rank keeps its own status and message. */
rs_status rs__ock_agree(rs__ock *c, rs_status st);
/* Rank `from` sends each listed buffer to `to` (one message per ordered pair and call). */
rs_status rs__ock_exchange(rs__ock *c, int nmsg, const int *from, const int *to, void *const *buf,
                           const int64_t *len);

/* ---- device.c ---- */
/* whether t's data is device memory: on a device world every tensor but those a factory built
 * inside save/load (host memory, like objects and headers) */
int rs__ock_on_device(const rs__ock *c, const rs_sh_tensor *t);
/* host <- tensor data and tensor data <- host: device copies when dev, memcpy otherwise */
rs_status rs__ock_copy_in(const rs__ock *c, int dev, void *host, const void *src, int64_t n);
rs_status rs__ock_copy_out(const rs__ock *c, int dev, void *dst, const void *host, int64_t n);
/* Rows host -> tensor data gathered into 2-d copies: consecutive rows of one width whose
 * destinations and sources advance by constant pitches become one cudaMemcpy2DAsync (a chunk's
 * rows into a tensor's box: one call per block of rows instead of one cudaMemcpy per row). add()
 * may issue the pending run; flush() issues the last and waits until every copy is done (the host
 * rows may be reused after it). Host and simulated worlds copy the same runs row by row. */
typedef struct rs__ock_rows {
  const rs__ock *c;
  int dev;
  char *dst;
  const char *src;
  int64_t width, dpitch, spitch, rows;
  int64_t issued; /* device calls issued (counted for the docs' claim: one per run) */
} rs__ock_rows;
void rs__ock_rows_init(rs__ock_rows *b, const rs__ock *c, int dev);
rs_status rs__ock_rows_add(rs__ock_rows *b, void *dst, const void *host, int64_t n);
rs_status rs__ock_rows_flush(rs__ock_rows *b);
/* ---- stage.c: nbuf host staging buffers of at least `bytes` each, 4096-aligned. A device world
 * (CUDA or simulated) keeps them across operations in a grow-only pool (page-locked on CUDA) freed
 * with the world; otherwise they are the operation's own. *bufs stays valid until put(), which
 * every operation calls once at its end (also after a failed get). */
typedef struct rs__ock_stage rs__ock_stage;
rs_status rs__ock_stage_get(rs__ock *c, int nbuf, int64_t bytes, uint8_t ***bufs);
void rs__ock_stage_put(rs__ock *c);
/* the operation's stage_bufs, stage_bytes and stage_allocs into stats */
void rs__ock_stage_stats(const rs__ock *c, rs_ckpt_opt_stats *stats);
/* RS_SIM_DEVICE=1: local worlds simulate device memory */
int rs__ock_sim_requested(void);

#endif
