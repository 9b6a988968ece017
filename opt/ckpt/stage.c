/* stage.c - the host staging buffers of opt's checkpoints (one per I/O thread, 4096-aligned for
 * O_DIRECT). On a device world (CUDA, or simulated with RS_SIM_DEVICE=1) they come from a pool the
 * world keeps: grow-only, page-locked once by cudaHostAlloc on CUDA (plain aligned memory when
 * simulated, so the same pool logic runs in CI), freed when the world is finalized. A warm world
 * allocates and pins nothing per save or load. Host worlds, a NULL world and an operation that finds
 * the world's pool in use by another get a pool of their own, freed when the operation ends. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include "comm/world.h"
#include "core/mutant.h"
#include "cuda/cuda_api.h"
#include "opt/ckpt/internal.h"

struct rs__ock_stage {
  int cuda;       /* buffers from cudaHostAlloc (page-locked); plain aligned memory otherwise */
  int n, capn;    /* buffers held, slots */
  uint8_t **buf;  /* 4096-aligned starts, what callers get */
  void **base;    /* what was allocated (cudaHostAlloc is over-allocated by 4095 bytes to align) */
  int64_t *cap;   /* usable bytes from buf[i] */
  int busy;       /* an operation holds it */
};

static void drop_buffer(rs__ock_stage *s, int i) {
  if (s->cuda) rs_cuda_host_free(s->base[i]);
  else free(s->base[i]);
  s->buf[i] = s->base[i] = NULL;
  s->cap[i] = 0;
}

static void stage_free(void *p) {
  rs__ock_stage *s = p;
  if (!s) return;
  for (int i = 0; i < s->n; ++i) drop_buffer(s, i);
  free(s->buf);
  free(s->base);
  free(s->cap);
  free(s);
}

static rs_status new_buffer(rs__ock_stage *s, int i, int64_t bytes) {
  void *p = NULL;
  if (s->cuda) {
    rs_status st = rs_cuda_host_alloc(&p, bytes + 4095);
    if (st) return st;
    s->base[i] = p;
    s->buf[i] = (uint8_t *)(((uintptr_t)p + 4095) & ~(uintptr_t)4095);
  } else {
    if (posix_memalign(&p, 4096, (size_t)bytes)) return rs_fail(RS_ERR_NOMEM, "checkpoint staging: out of memory");
    s->base[i] = p;
    s->buf[i] = p;
  }
  s->cap[i] = bytes;
  return RS_OK;
}

/* at least nbuf buffers of at least bytes each; buffers already large enough are kept */
static rs_status grow(rs__ock_stage *s, int nbuf, int64_t bytes, int64_t *allocs) {
  if (nbuf > s->capn) {
    uint8_t **b = realloc(s->buf, sizeof *b * (size_t)nbuf);
    if (b) s->buf = b;
    void **a = realloc(s->base, sizeof *a * (size_t)nbuf);
    if (a) s->base = a;
    int64_t *c = realloc(s->cap, sizeof *c * (size_t)nbuf);
    if (c) s->cap = c;
    if (!a || !b || !c) return rs_fail(RS_ERR_NOMEM, "checkpoint staging: out of memory");
    for (int i = s->capn; i < nbuf; ++i) {
      s->buf[i] = s->base[i] = NULL;
      s->cap[i] = 0;
    }
    s->capn = nbuf;
  }
  if (nbuf > s->n) s->n = nbuf;
  for (int i = 0; i < nbuf; ++i) {
    if (s->cap[i] >= bytes) continue;
    if (s->base[i]) drop_buffer(s, i);
    rs_status st = new_buffer(s, i, bytes);
    if (st) return st;
    ++*allocs;
  }
  return RS_OK;
}

rs_status rs__ock_stage_get(rs__ock *c, int nbuf, int64_t bytes, uint8_t ***bufs) {
  *bufs = NULL;
  rs_world *w = c->world;
  int cuda = c->device && !c->sim;
  rs__ock_stage *s = NULL;
  if (c->device && w) {
    if (!w->ckpt_stage) {
      if (!(w->ckpt_stage = calloc(1, sizeof(rs__ock_stage))))
        return rs_fail(RS_ERR_NOMEM, "checkpoint staging: out of memory");
      ((rs__ock_stage *)w->ckpt_stage)->cuda = cuda;
      w->ckpt_stage_free = stage_free;
    }
    s = w->ckpt_stage;
    int idle = 0;
    if (!__atomic_compare_exchange_n(&s->busy, &idle, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) s = NULL;
  }
  if (!s) {
    if (!(s = calloc(1, sizeof *s))) return rs_fail(RS_ERR_NOMEM, "checkpoint staging: out of memory");
    s->cuda = cuda;
    s->busy = 1;
    c->own_stage = 1;
  }
  c->stage = s;
  c->stage_bufs = nbuf;
  c->stage_bytes = bytes;
  rs_status st = grow(s, nbuf, bytes, &c->stage_allocs);
  if (!st) *bufs = s->buf;
  return st;
}

void rs__ock_stage_put(rs__ock *c) {
  rs__ock_stage *s = c->stage;
  c->stage = NULL;
  if (!s) return;
  /* RS_MUTANT 950: the world's pool gives its buffers back after every operation (it never
   * warms: every save and load allocates and page-locks its staging again) */
  if (c->own_stage || RS_MUTANT(950)) {
    for (int i = 0; i < s->n; ++i) drop_buffer(s, i);
    s->n = 0;
  }
  if (c->own_stage) {
    stage_free(s);
    c->own_stage = 0;
    return;
  }
  __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
}

void rs__ock_stage_stats(const rs__ock *c, rs_ckpt_opt_stats *stats) {
  stats->stage_bufs = c->stage_bufs;
  stats->stage_bytes = c->stage_bytes;
  stats->stage_allocs = c->stage_allocs;
}
