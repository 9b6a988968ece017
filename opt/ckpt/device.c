/* device.c - opt checkpoints on device memory. On a local-device world the tensor data of every
 * rank lives in CUDA memory: save stages it into host buffers (stage.c: pooled, page-locked)
 * before hashing and writing, load reads and verifies in host buffers and copies the verified rows
 * out, so no host code ever dereferences tensor data. rs_opt_ckpt_to_device/to_host move a world's
 * data between host and device for the callers that build worlds on the host (CLI, properties).
 *
 * Simulated device (RS_SIM_DEVICE=1, local worlds only): for testing the device path where no GPU
 * is lent, "device memory" is host memory whose addresses are moved into a range no process can
 * map (SIM_OFFSET added), so a host access of tensor data faults at once, and the copies translate
 * the addresses back. Everything else (staging, row-wise copies, which paths are taken) is the
 * device path as it runs on a GPU. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cuda/cuda_api.h"
#include "core/mutant.h"
#include "opt/ckpt/internal.h"

/* bit 55: outside every user address space (x86-64 4- and 5-level paging, AArch64 with or
 * without top-byte-ignore, which covers bits 56-63 only) */
#define SIM_OFFSET ((uintptr_t)1 << 55)

int rs__ock_sim_requested(void) {
  const char *e = getenv("RS_SIM_DEVICE");
  return e && e[0] == '1' && !e[1];
}

int rs_opt_ckpt_sim_device(void) { return rs__ock_sim_requested(); }

static void *sim_host(const void *dev) { return (void *)((uintptr_t)dev - SIM_OFFSET); }

int rs__ock_on_device(const rs__ock *c, const rs_sh_tensor *t) { return c->device && !t->factory; }

rs_status rs__ock_copy_in(const rs__ock *c, int dev, void *host, const void *src, int64_t n) {
  if (n <= 0) return RS_OK;
  if (!dev) memcpy(host, src, (size_t)n);
  else if (c->sim) memcpy(host, sim_host(src), (size_t)n);
  else return rs_cuda_d2h(host, src, n);
  return RS_OK;
}

rs_status rs__ock_copy_out(const rs__ock *c, int dev, void *dst, const void *host, int64_t n) {
  if (n <= 0) return RS_OK;
  if (!dev) memcpy(dst, host, (size_t)n);
  else if (c->sim) memcpy(sim_host(dst), host, (size_t)n);
  else return rs_cuda_h2d(dst, host, n);
  return RS_OK;
}

void rs__ock_rows_init(rs__ock_rows *b, const rs__ock *c, int dev) {
  memset(b, 0, sizeof *b);
  b->c = c;
  b->dev = dev;
}

/* the pending run: one 2-d device copy, or its rows one by one on the host / simulated device */
static rs_status rows_issue(rs__ock_rows *b) {
  rs_status st = RS_OK;
  if (b->rows == 0) return RS_OK;
  if (b->dev && !b->c->sim) {
    st = rs_cuda_copy_2d(b->dst, b->dpitch, b->src, b->spitch, b->width, b->rows, 1);
    b->issued++;
  } else {
    for (int64_t r = 0; r < b->rows && !st; ++r)
      st = rs__ock_copy_out(b->c, b->dev, b->dst + r * b->dpitch, b->src + r * b->spitch, b->width);
  }
  b->rows = 0;
  return st;
}

rs_status rs__ock_rows_add(rs__ock_rows *b, void *dst, const void *host, int64_t n) {
  char *d = dst;
  const char *h = host;
  if (n <= 0) return RS_OK;
  if (b->rows == 1 && n == b->width && d - b->dst >= n && h - b->src >= n) {
    /* a second row fixes the pitches */
    b->dpitch = d - b->dst;
    b->spitch = h - b->src;
    /* RS_MUTANT 934: the source pitch is taken from the destination (a chunk and a tensor box
     * whose rows differ in length then read the wrong bytes) */
    if (RS_MUTANT(934) && b->dev) b->spitch = b->dpitch;
    b->rows = 2;
    return RS_OK;
  }
  if (b->rows >= 2 && n == b->width && d == b->dst + b->rows * b->dpitch && h == b->src + b->rows * b->spitch) {
    b->rows++;
    return RS_OK;
  }
  rs_status st = rows_issue(b);
  b->dst = d;
  b->src = h;
  b->width = n;
  b->dpitch = b->spitch = n;
  b->rows = 1;
  return st;
}

rs_status rs__ock_rows_flush(rs__ock_rows *b) {
  rs_status st = rows_issue(b);
  if (b->dev && !b->c->sim && b->issued) {
    rs_status s2 = rs_cuda_sync();
    if (!st) st = s2;
  }
  return st;
}

/* 0: host world, 1: CUDA, 2: simulated */
static int device_kind(const rs_world *world) {
  if (rs_world_uses_device(world)) return 1;
  return rs_world_is_local(world) && rs__ock_sim_requested() ? 2 : 0;
}

/* host buffers as the state dict allocates them: page-aligned from a page up (O_DIRECT in place) */
static void *host_alloc(size_t n) {
  void *p = NULL;
  if (n >= 4096) return posix_memalign(&p, 4096, n) ? NULL : p;
  return malloc(n ? n : 1);
}

/* one tensor's data to (to_dev) or from the device; on failure t is unchanged */
static rs_status move_one(int kind, rs_sh_tensor *t, int to_dev) {
  size_t n = t->nbytes > 0 ? (size_t)t->nbytes : 0;
  void *p = NULL;
  rs_status st;
  if (kind == 2) {
    if (!(p = host_alloc(n))) return rs_fail(RS_ERR_NOMEM, "out of memory moving '%s'", t->key);
    uint8_t *old = to_dev ? t->data : (uint8_t *)sim_host(t->data);
    memcpy(p, old, n);
    free(old);
    t->data = to_dev ? (uint8_t *)p + SIM_OFFSET : p;
    return RS_OK;
  }
  if (to_dev) {
    if ((st = rs_cuda_malloc(&p, t->nbytes))) return st;
    if ((st = rs_cuda_h2d(p, t->data, t->nbytes))) {
      rs_cuda_free(p);
      return st;
    }
    free(t->data);
  } else {
    /* back to the host whatever happens, so the world can always be freed: a failed copy
     * leaves zeros (and the error) */
    if (!(p = host_alloc(n))) return rs_fail(RS_ERR_NOMEM, "out of memory moving '%s'", t->key);
    memset(p, 0, n);
    st = rs_cuda_d2h(p, t->data, t->nbytes);
    rs_cuda_free(t->data);
    t->data = p;
    return st;
  }
  t->data = p;
  return RS_OK;
}

/* every tensor with data of the ranks this process holds. To the device: a failure moves the
 * moved ones back. To the host: every tensor is moved, the first error is returned. */
static rs_status move(rs_world *world, rs_ckpt_world *w, int to_dev) {
  int kind = device_kind(world), me = rs_world_is_local(world) ? -1 : rs_world_rank(world);
  rs_status first = RS_OK;
  if (!kind) return RS_OK;
  for (int r = 0; r < w->n; ++r) {
    if (me >= 0 && r != me) continue;
    for (int i = 0; i < w->sd[r].nt; ++i) {
      if (!w->sd[r].t[i].data) continue;
      rs_status st = move_one(kind, &w->sd[r].t[i], to_dev);
      if (!st) continue;
      if (!to_dev) {
        if (!first) first = st;
        continue;
      }
      for (int r2 = 0; r2 <= r; ++r2)
        for (int j = 0; j < (r2 == r ? i : w->sd[r2].nt); ++j)
          if ((me < 0 || r2 == me) && w->sd[r2].t[j].data) (void)move_one(kind, &w->sd[r2].t[j], 0);
      return st;
    }
  }
  return first;
}

rs_status rs_opt_ckpt_to_device(rs_world *world, rs_ckpt_world *w) { return move(world, w, 1); }
rs_status rs_opt_ckpt_to_host(rs_world *world, rs_ckpt_world *w) { return move(world, w, 0); }
