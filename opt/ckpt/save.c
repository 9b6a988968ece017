/* save.c - opt's parallel save. Every process computes the same plan from every rank's metadata:
 * replicas of one chunk form a group, and each group is written by one of the ranks that hold it,
 * chosen greedily (largest first, to the least loaded holder) so that bytes balance across ranks
 * as Megatron-Core's fully-parallel save does. A rank's file is its header (padded to 4096 bytes,
 * so data segments are page aligned) and its entries; it is written in `segment`-byte pieces by a
 * pool of threads that digest their blocks and pwritev them straight from the tensors (host memory;
 * device memory and O_DIRECT pieces off a 4096 boundary are staged first), O_DIRECT on request.
 * The commit is the reference's: all data fsynced, then rank 0 writes metadata.json (temp file,
 * fsync, rename, directory fsync) and `latest` the same way. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "core/ckpt/io.h"
#include "core/mutant.h"
#include "opt/ckpt/internal.h"

typedef struct item {
  int r, i, obj;
  char *name;
} item;

typedef struct group {
  int first, n; /* into items */
  int obj;
  int64_t bytes;
  int writer;   /* rank */
  int writer_item;
} group;

typedef struct piece {
  int64_t off, len;
  const uint8_t *src;
  int host; /* host memory even on a device world: headers, objects, factory-built tensors */
} piece;

typedef struct rfile {
  int rank;
  int ng;
  int *g;            /* groups in file order */
  int64_t *begin;    /* data_offsets begin per entry */
  char *hdr;
  size_t hl, hl_json; /* padded header, unpadded */
  int64_t size;
  int nblocks;
  uint64_t *digest;
  int fd;
  piece *pc;
  int npc;
} rfile;

typedef struct plan {
  rs__ock *c;
  rs_ckpt_world *w;
  item *it;
  int nit;
  group *g;
  int ng;
  rfile *f; /* one per rank (ng == 0: no file) */
  int64_t block, seg;
  int direct;
  char dir[4200];
  /* write tasks */
  int64_t *task_file, *task_seg;
  int64_t ntask;
  uint8_t **buf; /* per thread */
  XXH3_state_t **xs; /* per thread: streaming digests of blocks written from several pieces */
  /* every file operation is counted (core/ckpt/io.h) so that tests can kill the save or cut
   * its power at any of them; the I/O threads take the lock around each rs__io call */
  rs__io io;
  pthread_mutex_t mu;
  int64_t sync_ns;
  int64_t direct_unstaged; /* segments written under O_DIRECT straight from the tensors (under mu) */
} plan;

static rs_status io_tick(plan *p) {
  pthread_mutex_lock(&p->mu);
  rs_status st = rs__io_tick(&p->io);
  pthread_mutex_unlock(&p->mu);
  return st;
}

static int64_t item_bytes(const rs_ckpt_world *a, const item *x) {
  return x->obj ? a->sd[x->r].o[x->i].len : a->sd[x->r].t[x->i].nbytes;
}

static int cmp_item(const void *pa, const void *pb, void *ctx) {
  const item *a = pa, *b = pb;
  const rs_ckpt_world *w = ctx;
  if (a->obj != b->obj) return a->obj - b->obj;
  int c = strcmp(a->name, b->name);
  if (c) return c;
  if (!a->obj) {
    const rs_sh_tensor *x = &w->sd[a->r].t[a->i], *y = &w->sd[b->r].t[b->i];
    for (int d = 0; d < x->ndim && d < y->ndim; ++d)
      if (x->local_shape[d] != y->local_shape[d]) return x->local_shape[d] < y->local_shape[d] ? -1 : 1;
    if (x->has_flat && y->has_flat && x->flat_stop != y->flat_stop) return x->flat_stop < y->flat_stop ? -1 : 1;
  }
  return a->r - b->r;
}

static const rs_ckpt_world *g_sort_world;
static int cmp_item_q(const void *a, const void *b) { return cmp_item(a, b, (void *)g_sort_world); }

static int same_chunk(const rs_ckpt_world *w, const item *a, const item *b) {
  if (a->obj != b->obj || strcmp(a->name, b->name)) return 0;
  if (a->obj) return 1;
  const rs_sh_tensor *p = &w->sd[a->r].t[a->i], *q = &w->sd[b->r].t[b->i];
  for (int d = 0; d < p->ndim; ++d)
    if (p->ndim != q->ndim || p->local_shape[d] != q->local_shape[d]) return 0;
  return !p->has_flat || p->flat_stop == q->flat_stop;
}

static int is_main(const rs_ckpt_world *w, const item *x) {
  return rs_replica_is_main(x->obj ? &w->sd[x->r].o[x->i].replica : &w->sd[x->r].t[x->i].replica);
}

static const group *g_sort_groups;
static int cmp_group_bytes(const void *pa, const void *pb) {
  int a = *(const int *)pa, b = *(const int *)pb;
  const group *x = &g_sort_groups[a], *y = &g_sort_groups[b];
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return a - b;
}

/* groups of replicas and their writers */
static rs_status make_groups(plan *p) {
  const rs_ckpt_world *a = &p->c->all;
  int cap = 0;
  char name[2200];
  for (int r = 0; r < a->n; ++r) {
    const rs_state_dict *sd = &a->sd[r];
    for (int i = 0; i < sd->nt + sd->no; ++i) {
      int obj = i >= sd->nt, k = obj ? i - sd->nt : i;
      if (!obj) {
        const rs_sh_tensor *t = &sd->t[k];
        if (t->nbytes == 0) continue;
        rs__chunk_name(t->key, t->ndim, t->global_offset, t->has_flat, t->flat_start, name, sizeof name);
      } else {
        rs_sh_object_unique_key(&sd->o[k], name, sizeof name);
      }
      if (!rs__grow((void **)&p->it, p->nit, &cap, sizeof *p->it)) return rs_fail(RS_ERR_NOMEM, "out of memory");
      item *x = &p->it[p->nit];
      x->r = r;
      x->i = k;
      x->obj = obj;
      if (!(x->name = rs__strdup(name))) return rs_fail(RS_ERR_NOMEM, "out of memory");
      p->nit++;
    }
  }
  g_sort_world = a;
  if (p->nit) qsort(p->it, (size_t)p->nit, sizeof *p->it, cmp_item_q);
  p->g = calloc((size_t)p->nit + 1, sizeof *p->g);
  if (!p->g) return rs_fail(RS_ERR_NOMEM, "out of memory");
  for (int i = 0; i < p->nit;) {
    int j = i + 1;
    while (j < p->nit && same_chunk(a, &p->it[i], &p->it[j])) j++;
    group *g = &p->g[p->ng++];
    g->first = i;
    g->n = j - i;
    g->obj = p->it[i].obj;
    g->bytes = item_bytes(a, &p->it[i]);
    i = j;
  }
  /* largest first to the least loaded holder: Megatron's distribution of shards to ranks */
  int64_t *load = calloc((size_t)a->n, sizeof *load);
  int *order = malloc(sizeof(int) * ((size_t)p->ng + 1));
  if (!load || !order) {
    free(load);
    free(order);
    return rs_fail(RS_ERR_NOMEM, "out of memory");
  }
  for (int k = 0; k < p->ng; ++k) order[k] = k;
  g_sort_groups = p->g;
  if (p->ng) qsort(order, (size_t)p->ng, sizeof *order, cmp_group_bytes);
  for (int k = 0; k < p->ng; ++k) {
    group *g = &p->g[order[k]];
    int best = -1;
    for (int m = g->first; m < g->first + g->n; ++m) {
      int r = p->it[m].r;
      if (best < 0 || load[r] < load[p->it[best].r] ||
          (load[r] == load[p->it[best].r] && is_main(a, &p->it[m]) && !is_main(a, &p->it[best])))
        best = m;
    }
    g->writer_item = best;
    g->writer = p->it[best].r;
    load[g->writer] += g->bytes;
  }
  free(order);
  free(load);
  return RS_OK;
}

/* header and entry offsets of every rank's file (every process computes all of them: metadata) */
static rs_status make_files(plan *p) {
  const rs_ckpt_world *a = &p->c->all;
  p->f = calloc((size_t)a->n, sizeof *p->f);
  if (!p->f) return rs_fail(RS_ERR_NOMEM, "out of memory");
  for (int r = 0; r < a->n; ++r) p->f[r].fd = -1;
  for (int k = 0; k < p->ng; ++k) p->f[p->g[k].writer].ng++;
  rs_status st = RS_OK;
  for (int r = 0; r < a->n && !st; ++r) {
    rfile *f = &p->f[r];
    f->rank = r;
    if (!f->ng) continue;
    f->g = malloc(sizeof(int) * (size_t)f->ng);
    f->begin = malloc(sizeof(int64_t) * (size_t)f->ng);
    rs__st_entry *e = calloc((size_t)f->ng, sizeof *e);
    if (!f->g || !f->begin || !e) {
      free(e);
      return rs_fail(RS_ERR_NOMEM, "out of memory");
    }
    int n = 0;
    int64_t at = 0;
    /* widest elements first: with the header padded to 4096 bytes, every element then sits on a
     * multiple of its size, so a load's piece boundaries never split one */
    for (int pass = 0; pass < 4; ++pass)
    for (int k = 0; k < p->ng; ++k) {
      if (p->g[k].writer != r) continue;
      const item *y = &p->it[p->g[k].writer_item];
      int es = y->obj ? 1 : rs_dtype_size(a->sd[y->r].t[y->i].dtype);
      if ((pass == 0 && es < 8) || (pass == 1 && es != 4) || (pass == 2 && es != 2) ||
          (pass == 3 && (es >= 8 || es == 4 || es == 2)))
        continue;
      const item *x = &p->it[p->g[k].writer_item];
      f->g[n] = k;
      e[n].name = x->name;
      if (x->obj) {
        e[n].dtype = RS_U8;
        e[n].ndim = 1;
        e[n].shape[0] = a->sd[x->r].o[x->i].len;
      } else {
        const rs_sh_tensor *t = &a->sd[x->r].t[x->i];
        e[n].dtype = t->dtype;
        if (t->has_flat) {
          e[n].ndim = 1;
          e[n].shape[0] = t->flat_stop - t->flat_start;
        } else {
          e[n].ndim = t->ndim;
          memcpy(e[n].shape, t->local_shape, sizeof e[n].shape);
        }
      }
      e[n].begin = f->begin[n] = at;
      e[n].end = at += p->g[k].bytes;
      n++;
    }
    rs_kv meta = {"format", (uint8_t *)"pt", 2};
    char *h = NULL;
    size_t hl = 0;
    st = rs__st_header_bytes(e, n, &meta, 1, &h, &hl);
    free(e);
    if (st) return st;
    /* pad the JSON with spaces so that the data section starts on a 4096-byte boundary, or on a
     * digest block boundary when the data is large: chunk ends then fall on block ends and a load
     * verifies whole blocks in place instead of re-reading the ones a chunk shares */
    size_t align = at >= 16 * p->block ? (size_t)p->block : 4096;
    if (align < 4096) align = 4096;
    size_t H = (hl + align - 1) / align * align;
    char *h2 = realloc(h, H);
    if (!h2) {
      free(h);
      return rs_fail(RS_ERR_NOMEM, "out of memory");
    }
    memset(h2 + hl, ' ', H - hl);
    uint64_t jl = H - 8;
    for (int b = 0; b < 8; ++b) h2[b] = (char)(jl >> (8 * b) & 0xff);
    f->hdr = h2;
    f->hl = H;
    f->hl_json = hl;
    f->size = (int64_t)H + at;
    f->nblocks = (int)((f->size + p->block - 1) / p->block);
    f->digest = calloc((size_t)f->nblocks + 1, sizeof *f->digest);
    if (!f->digest) return rs_fail(RS_ERR_NOMEM, "out of memory");
  }
  return st;
}

/* the pieces of [s, e) as iovecs straight onto their bytes (no staging): only when every piece is
 * host memory and, under O_DIRECT, every address and length is 4096-aligned; 0 otherwise (or when
 * more than RS__SAVE_IOV pieces meet the segment) and the caller stages */
#define RS__SAVE_IOV 64
static int direct_iov(const plan *p, const rfile *f, int lo, int64_t s, int64_t e, struct iovec *iov) {
  int n = 0;
  for (int k = lo; k < f->npc && f->pc[k].off < e; ++k) {
    const piece *pc = &f->pc[k];
    int64_t a = pc->off > s ? pc->off : s, b = pc->off + pc->len < e ? pc->off + pc->len : e;
    if (b <= a) continue;
    if (!pc->host || n == RS__SAVE_IOV) return 0;
    const uint8_t *src = pc->src + (a - pc->off);
    if (p->direct && (((uintptr_t)src | (uintptr_t)(b - a)) & 4095)) return 0;
    iov[n].iov_base = (void *)src;
    iov[n++].iov_len = (size_t)(b - a);
  }
  return n;
}

/* digests of the blocks of [s, e) over the iovecs that hold it, streaming across piece borders
 * (the same value XXH3_64bits gives over the contiguous bytes) */
static void digest_iov(const plan *p, rfile *f, int64_t s, int64_t e, const struct iovec *iov, int n,
                       XXH3_state_t *xs) {
  int k = 0;
  size_t in = 0; /* bytes of iov[k] already hashed */
  for (int64_t o = s; o < e; o += p->block) {
    int64_t l = e - o < p->block ? e - o : p->block;
    XXH3_64bits_reset(xs);
    for (int parts = 0; l > 0 && k < n; ++parts) {
      size_t take = iov[k].iov_len - in < (size_t)l ? iov[k].iov_len - in : (size_t)l;
      /* RS_MUTANT 925: a block that spans two pieces is digested without its part in the second */
      if (!(RS_MUTANT(925) && parts > 0)) XXH3_64bits_update(xs, (const uint8_t *)iov[k].iov_base + in, take);
      l -= (int64_t)take;
      in += take;
      if (in == iov[k].iov_len) {
        k++;
        in = 0;
      }
    }
    f->digest[o / p->block] = XXH3_64bits_digest(xs);
  }
}

/* pwritev of every iovec at off, resuming after a short write */
static rs_status write_iov(rfile *f, struct iovec *iov, int n, int64_t off) {
  while (n > 0) {
    ssize_t w = pwritev(f->fd, iov, n, off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      return rs_fail(RS_ERR_IO, "file rank_%d.safetensors: write at %lld failed (%s)", f->rank, (long long)off,
                     w ? strerror(errno) : "no progress");
    off += w;
    while (n > 0 && (size_t)w >= iov->iov_len) {
      w -= (ssize_t)iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (uint8_t *)iov->iov_base + w;
      iov->iov_len -= (size_t)w;
    }
  }
  return RS_OK;
}

static rs_status write_task(void *ctx, int64_t task, int tid) {
  plan *p = ctx;
  rfile *f = &p->f[p->task_file[task]];
  int64_t s = p->task_seg[task] * p->seg, e = s + p->seg < f->size ? s + p->seg : f->size;
  uint8_t *buf = p->buf[tid];
  rs_status st = RS_OK;
  /* first piece ending after s */
  int lo = 0, hi = f->npc;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (f->pc[mid].off + f->pc[mid].len <= s) lo = mid + 1;
    else hi = mid;
  }
  struct iovec iov[RS__SAVE_IOV + 1];
  int64_t wl = e - s;
  int niov = direct_iov(p, f, lo, s, e, iov);
  if (niov && p->direct && (wl & 4095)) niov = 0; /* the file's unaligned tail: staged and padded */
  if (niov) {
    /* straight from the tensors: each block hashed once, then the kernel copies it (or the
     * device reads it, O_DIRECT) from where it lies */
    digest_iov(p, f, s, e, iov, niov, p->xs[tid]);
    if ((st = io_tick(p))) return st;
    if (p->direct && e > (int64_t)f->hl) { /* tensor bytes (a header-only segment is unstaged
                                              * whenever malloc happened to put it on a page) */
      pthread_mutex_lock(&p->mu);
      p->direct_unstaged++;
      pthread_mutex_unlock(&p->mu);
      /* RS_MUTANT 955: under O_DIRECT an unstaged write of tensor bytes leaves out the segment's
       * last 4096 bytes (every iovec is a multiple of 4096 there: the last one shrinks, or goes
       * when that empties it) */
      if (RS_MUTANT(955) && (iov[niov - 1].iov_len -= 4096) == 0) niov--;
    }
    return write_iov(f, iov, niov, s);
  }
  for (int k = lo; k < f->npc && f->pc[k].off < e; ++k) {
    const piece *pc = &f->pc[k];
    int64_t a = pc->off > s ? pc->off : s, b = pc->off + pc->len < e ? pc->off + pc->len : e;
    if (b <= a) continue;
    st = rs__ock_copy_in(p->c, !pc->host, buf + (a - s), pc->src + (a - pc->off), b - a);
    if (st) return st;
  }
  for (int64_t o = s; o < e; o += p->block) {
    int64_t l = e - o < p->block ? e - o : p->block;
    uint64_t d = XXH3_64bits(buf + (o - s), (size_t)l);
    /* RS_MUTANT 351: the digest of a block is taken before its last byte is staged */
    if (RS_MUTANT(351) && l > 1) d = XXH3_64bits(buf + (o - s), (size_t)l - 1);
    f->digest[o / p->block] = d;
  }
  if (p->direct && (wl & 4095)) {
    int64_t pad = (wl + 4095) / 4096 * 4096;
    memset(buf + wl, 0, (size_t)(pad - wl));
    wl = pad;
  }
  st = io_tick(p);
  if (st) return st;
  iov[0].iov_base = buf;
  iov[0].iov_len = (size_t)wl;
  return write_iov(f, iov, 1, s);
}

static rs_status sync_task(void *ctx, int64_t task, int tid) {
  (void)tid;
  plan *p = ctx;
  rfile *f = &p->f[task];
  if (f->fd < 0) return RS_OK;
  if (p->direct && ftruncate(f->fd, f->size) != 0)
    return rs_fail(RS_ERR_IO, "file rank_%d.safetensors: truncate failed (%s)", f->rank, strerror(errno));
  rs_status st = io_tick(p);
  if (st) return st;
  if (fsync(f->fd) != 0)
    return rs_fail(RS_ERR_IO, "file rank_%d.safetensors: fsync failed (%s)", f->rank, strerror(errno));
  char path[4400];
  snprintf(path, sizeof path, "%s/rank_%d.safetensors", p->dir, f->rank);
  pthread_mutex_lock(&p->mu);
  rs__io_durable(&p->io, path);
  pthread_mutex_unlock(&p->mu);
  return RS_OK;
}

static rs_status write_mine(plan *p) {
  rs__ock *c = p->c;
  rs_status st = RS_OK;
  int64_t cap = 0;
  for (int r = 0; r < c->n && !st; ++r) {
    rfile *f = &p->f[r];
    if (!f->ng || !rs__ock_mine(c, r)) continue;
    char path[4400];
    snprintf(path, sizeof path, "%s/rank_%d.safetensors", p->dir, r);
    f->fd = -1;
    st = RS_ERR_IO;
#ifdef O_DIRECT
    if (p->direct) st = rs__io_create(&p->io, path, O_DIRECT, &f->fd);
#endif
    if (st) {
      if (p->io.crashed) return st;
      p->direct = 0; /* tmpfs and friends refuse O_DIRECT: the page cache it is */
      if ((st = rs__io_create(&p->io, path, 0, &f->fd))) return st;
    }
    f->pc = calloc((size_t)f->ng + 1, sizeof *f->pc);
    if (!f->pc) return rs_fail(RS_ERR_NOMEM, "out of memory");
    f->pc[0] = (piece){0, (int64_t)f->hl, (const uint8_t *)f->hdr, 1};
    f->npc = 1;
    for (int k = 0; k < f->ng; ++k) {
      const group *g = &p->g[f->g[k]];
      const item *x = &p->it[g->writer_item];
      /* the data lives in the caller's world (c->all may be a metadata-only shadow) */
      const uint8_t *src = x->obj ? p->w->sd[x->r].o[x->i].data : p->w->sd[x->r].t[x->i].data;
      int host = x->obj || !rs__ock_on_device(p->c, &p->w->sd[x->r].t[x->i]);
      if (g->bytes) f->pc[f->npc++] = (piece){(int64_t)f->hl + f->begin[k], g->bytes, src, host};
    }
    int64_t nseg = (f->size + p->seg - 1) / p->seg;
    if (p->ntask + nseg > cap) {
      cap = (p->ntask + nseg) * 2;
      int64_t *a = realloc(p->task_file, sizeof(int64_t) * (size_t)cap);
      if (a) p->task_file = a;
      int64_t *b = realloc(p->task_seg, sizeof(int64_t) * (size_t)cap);
      if (b) p->task_seg = b;
      if (!a || !b) return rs_fail(RS_ERR_NOMEM, "out of memory");
    }
    for (int64_t s = 0; s < nseg; ++s) {
      p->task_file[p->ntask] = r;
      p->task_seg[p->ntask++] = s;
    }
  }
  int nt = c->nthreads;
  p->xs = calloc((size_t)nt, sizeof *p->xs);
  if (!p->xs) return rs_fail(RS_ERR_NOMEM, "out of memory");
  if ((st = rs__ock_stage_get(c, nt, p->seg, &p->buf))) return st;
  for (int t = 0; t < nt; ++t)
    if (!(p->xs[t] = XXH3_createState())) return rs_fail(RS_ERR_NOMEM, "out of memory");
  st = rs__pool_run(nt, p->ntask, write_task, p);
  /* RS_MUTANT 600: the data files are fsynced after the commit (metadata.json and latest), not
   * before it */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (!st && !RS_MUTANT(600)) st = rs__pool_run(nt, c->n, sync_task, p);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  p->sync_ns = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
  return st;
}

/* dir/name by a temporary file: write, fsync, rename, directory fsync (every step counted) */
static rs_status write_synced(plan *p, const char *dir, const char *name, const void *b, size_t n) {
  char tmp[4400], dst[4400];
  snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
  snprintf(dst, sizeof dst, "%s/%s", dir, name);
  rs_status st = rs__io_write_file(&p->io, tmp, b, n);
  /* RS_MUTANT 601: the temporary file is renamed into place without an fsync of its content */
  if (!st && !RS_MUTANT(601)) st = rs__io_fsync(&p->io, tmp);
  if (!st) st = rs__io_rename(&p->io, tmp, dst);
  if (!st) st = rs__io_fsync_dir(&p->io, dir);
  return st;
}

/* rank 0: metadata.json from the plan and the writers' digests, then latest */
static rs_status commit(plan *p, const char *root, int64_t step) {
  const rs_ckpt_world *a = &p->c->all;
  rs__metadata md;
  memset(&md, 0, sizeof md);
  md.step = step;
  rs_status st = RS_OK;
  int *fidx = calloc((size_t)a->n, sizeof *fidx);
  if (!fidx) return rs_fail(RS_ERR_NOMEM, "out of memory");
  for (int r = 0; r < a->n && !st; ++r) {
    rfile *f = &p->f[r];
    fidx[r] = -1;
    if (!f->ng) continue;
    if (!rs__grow((void **)&md.f, md.nf, &md.capf, sizeof *md.f)) {
      st = rs_fail(RS_ERR_NOMEM, "out of memory");
      break;
    }
    rs__md_file *mf = &md.f[md.nf];
    memset(mf, 0, sizeof *mf);
    char nm[64];
    snprintf(nm, sizeof nm, "rank_%d.safetensors", r);
    mf->name = rs__strdup(nm);
    mf->size = f->size;
    mf->block = p->block;
    mf->nblocks = f->nblocks;
    mf->digest = malloc(sizeof(uint64_t) * ((size_t)f->nblocks + 1));
    if (!mf->name || !mf->digest) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    else memcpy(mf->digest, f->digest, sizeof(uint64_t) * (size_t)f->nblocks);
    fidx[r] = md.nf++;
  }
  for (int r = 0; r < a->n && !st; ++r)
    for (int i = 0; i < a->sd[r].nt && !st; ++i)
      if (!rs__md_tensor_for(&md, &a->sd[r].t[i])) st = rs_fail(RS_ERR_NOMEM, "out of memory");
  for (int r = 0; r < a->n && !st; ++r) {
    const rfile *f = &p->f[r];
    for (int k = 0; k < f->ng && !st; ++k) {
      const group *g = &p->g[f->g[k]];
      const item *x = &p->it[g->writer_item];
      /* RS_MUTANT 350: metadata offsets forget the header's padding to 4096 bytes */
      int64_t boff = (int64_t)(RS_MUTANT(350) ? f->hl_json : f->hl) + f->begin[k];
      if (x->obj) {
        if (!rs__grow((void **)&md.o, md.no, &md.capo, sizeof *md.o)) {
          st = rs_fail(RS_ERR_NOMEM, "out of memory");
          break;
        }
        rs__md_object *o = &md.o[md.no++];
        o->ukey = rs__strdup(x->name);
        o->file = fidx[r];
        o->byte_off = boff;
        o->length = g->bytes;
        if (!o->ukey) st = rs_fail(RS_ERR_NOMEM, "out of memory");
        continue;
      }
      const rs_sh_tensor *t = &a->sd[x->r].t[x->i];
      rs__md_tensor *mt = rs__md_tensor_for(&md, t);
      if (!mt || !rs__grow((void **)&mt->c, mt->nc, &mt->capc, sizeof *mt->c)) {
        st = rs_fail(RS_ERR_NOMEM, "out of memory");
        break;
      }
      rs__chunk *ch = &mt->c[mt->nc++];
      memset(ch, 0, sizeof *ch);
      memcpy(ch->off, t->global_offset, sizeof ch->off);
      memcpy(ch->size, t->local_shape, sizeof ch->size);
      ch->has_flat = t->has_flat;
      ch->flat_start = t->flat_start;
      ch->flat_stop = t->flat_stop;
      ch->file = fidx[r];
      ch->byte_off = boff;
      ch->length = g->bytes;
    }
  }
  free(fidx);
  if (!st) {
    rs__md_sort(&md);
    const rs_state_dict *r0 = &a->sd[0];
    for (int i = 0; i < r0->ncommon && !st; ++i)
      st = rs_sd_add_kv(&md.common, &md.ncommon, &md.capc, r0->common[i].key, r0->common[i].val, r0->common[i].len);
  }
  char *mdb = NULL;
  size_t mdl = 0;
  if (!st) st = rs__md_write(&md, &mdb, &mdl);
  if (!st) st = write_synced(p, p->dir, "metadata.json", mdb, mdl);
  if (!st) {
    char latest[64];
    int n = snprintf(latest, sizeof latest, "%lld\n", (long long)step);
    st = write_synced(p, root, "latest", latest, (size_t)n);
  }
  free(mdb);
  rs__md_free(&md);
  return st;
}

static void plan_free(plan *p) {
  for (int i = 0; i < p->nit; ++i) free(p->it[i].name);
  free(p->it);
  free(p->g);
  for (int r = 0; p->f && r < p->c->n; ++r) {
    rfile *f = &p->f[r];
    if (f->fd >= 0) close(f->fd);
    free(f->g);
    free(f->begin);
    free(f->hdr);
    free(f->digest);
    free(f->pc);
  }
  free(p->f);
  free(p->task_file);
  free(p->task_seg);
  rs__ock_stage_put(p->c);
  p->buf = NULL;
  for (int t = 0; p->xs && t < p->c->nthreads; ++t) XXH3_freeState(p->xs[t]);
  free(p->xs);
  rs__io_free(&p->io);
  pthread_mutex_destroy(&p->mu);
}

static void drop_built(rs__ock *c, rs_ckpt_world *w) {
  for (int r = 0; r < w->n; ++r) {
    if (!rs__ock_mine(c, r)) continue;
    for (int i = 0; i < w->sd[r].nt; ++i) w->sd[r].t[i].loaded = 0;
    rs_sd_apply_factory_merges(&w->sd[r]);
  }
}

rs_status rs_opt_ckpt_save(rs_world *world, rs_ckpt_world *w, const char *root, int64_t step,
                           const rs_ckpt_opt_opts *o, rs_ckpt_opt_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  if (step < 0) return rs_fail(RS_ERR_INVALID, "step: %lld (must be >= 0)", (long long)step);
  if (strlen(root) > 4000) return rs_fail(RS_ERR_INVALID, "root: path too long");
  int64_t block = o && o->block ? o->block : RS_CKPT_BLOCK;
  if (block < 64 || block > (1 << 30) || (block & (block - 1)))
    return rs_fail(RS_ERR_INVALID, "block: %lld (a power of two in [64, 2^30])", (long long)block);
  rs__ock c;
  rs_status st = rs__ock_init(&c, world, w, o);
  if (st) return st;
  /* the shared rule (core/ckpt/io.c); every process looks, so every one reports it.
   * RS_MUTANT 602: opt's save writes over a step that already holds a checkpoint */
  if (!RS_MUTANT(602)) st = rs__ckpt_refuse_committed(root, step);
  for (int r = 0; r < w->n && !st; ++r)
    if (rs__ock_mine(&c, r)) st = rs_sd_apply_factories(&w->sd[r]);
  st = rs__ock_agree(&c, st);
  if (!st) st = rs__ock_gather(&c, w);
  if (!st) st = rs_ckpt_validate(&c.all);
  if (st) {
    drop_built(&c, w);
    rs__ock_free(&c);
    return st;
  }
  plan p;
  memset(&p, 0, sizeof p);
  p.c = &c;
  p.w = w;
  p.block = block;
  p.seg = c.segment > block ? c.segment : block;
  p.direct = o && o->direct;
  rs_ckpt_io_opts iop = {o ? o->crash_at : 0, o ? o->kill_at : 0, NULL, block};
  rs__io_init(&p.io, &iop);
  pthread_mutex_init(&p.mu, NULL);
  snprintf(p.dir, sizeof p.dir, "%s/step_%lld", root, (long long)step);
  st = make_groups(&p);
  if (!st) st = make_files(&p);
  if (!st && c.me == 0) {
    st = rs__io_mkdir(&p.io, root);
    if (!st) st = rs__io_mkdir(&p.io, p.dir);
  }
  st = rs__ock_agree(&c, st);
  if (!st) st = write_mine(&p);
  st = rs__ock_agree(&c, st);
  /* the writers' digests travel to rank 0, which commits */
  if (!st && !c.local) {
    int nm = 0, from[RS_MAX_RANKS], to[RS_MAX_RANKS];
    void *buf[RS_MAX_RANKS];
    int64_t len[RS_MAX_RANKS];
    for (int r = 1; r < c.n && nm < RS_MAX_RANKS; ++r) {
      if (!p.f[r].ng) continue;
      from[nm] = r;
      to[nm] = 0;
      buf[nm] = p.f[r].digest;
      len[nm++] = (int64_t)sizeof(uint64_t) * p.f[r].nblocks;
    }
    st = rs__ock_agree(&c, rs__ock_exchange(&c, nm, from, to, buf, len));
  }
  if (!st && c.me == 0) st = commit(&p, root, step);
  if (!st && RS_MUTANT(600)) st = rs__pool_run(c.nthreads, c.n, sync_task, &p);
  /* crash_at past the last operation: the power fails right after the save returned */
  if (!st && p.io.crash_at > p.io.ops) {
    rs__io_power_loss(&p.io);
    st = rs_fail(RS_ERR_IO, "simulated crash after the save completed (%lld I/O operations)", (long long)p.io.ops);
  }
  st = rs__ock_agree(&c, st);
  if (stats) {
    int64_t mx = 0;
    for (int r = 0; r < c.n && p.f; ++r) {
      int64_t b = p.f[r].ng ? p.f[r].size : 0;
      if (b > mx) mx = b;
      if (rs__ock_mine(&c, r) && p.f[r].ng) {
        stats->bytes_written += b;
        stats->files++;
      }
    }
    stats->max_rank_bytes = mx;
    stats->io_ops = p.io.ops;
    stats->sync_ns = p.sync_ns;
    stats->direct = p.direct && stats->files > 0;
    stats->direct_unstaged = p.direct_unstaged;
    rs__ock_stage_stats(&c, stats);
  }
  plan_free(&p);
  drop_built(&c, w);
  rs__ock_free(&c);
  return st;
}
