/* reader.c - checked reads of a step directory (see reader.h). */
#define _POSIX_C_SOURCE 200809L
#include "ref/ckpt/reader.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include "core/mutant.h"
#include "core/ckpt/io.h"

rs_status rs__reader_open(rs__reader *r, const char *stepdir) {
  memset(r, 0, sizeof *r);
  rs_status st = rs__ckpt_dir_ok(stepdir);
  if (st) return st;
  r->dir = rs__strdup(stepdir);
  if (!r->dir) return rs_fail(RS_ERR_NOMEM, "out of memory");
  char path[4200];
  snprintf(path, sizeof path, "%s/metadata.json", stepdir);
  uint8_t *b;
  size_t n;
  st = rs__read_file(path, &b, &n);
  if (st) {
    free(r->dir);
    r->dir = NULL;
    if (st != RS_ERR_IO) return st; /* a symbolic link, not a regular file, out of memory */
    rs_fail(RS_ERR_INVALID, "%s: no metadata.json (an incomplete or missing checkpoint)", stepdir);
    free(r->dir);
    r->dir = NULL;
    return RS_ERR_INVALID;
  }
  st = rs__md_parse((const char *)b, n, &r->md);
  free(b);
  if (st) {
    char pre[4300];
    snprintf(pre, sizeof pre, "%s: ", path);
    free(r->dir);
    r->dir = NULL;
    return rs_fail_prefix(st, pre);
  }
  r->hdr = calloc((size_t)r->md.nf + 1, sizeof *r->hdr);
  r->hdr_ok = calloc((size_t)r->md.nf + 1, sizeof *r->hdr_ok);
  r->fd = malloc(sizeof(int) * ((size_t)r->md.nf + 1));
  for (int f = 0; r->fd && f < r->md.nf; ++f) r->fd[f] = -1;
  r->corder = calloc((size_t)r->md.nt + 1, sizeof *r->corder);
  r->cmax0 = calloc((size_t)r->md.nt + 1, sizeof *r->cmax0);
  if (!r->hdr || !r->hdr_ok || !r->fd || !r->corder || !r->cmax0) {
    rs__reader_close(r);
    return rs_fail(RS_ERR_NOMEM, "out of memory");
  }
  return RS_OK;
}

static void cache_clear(rs__reader *r) {
  for (int64_t i = 0; i < r->capcache; ++i) {
    free(r->cache[i].data);
    r->cache[i].data = NULL;
    r->cache[i].file = -1;
  }
  r->ncache = r->cache_bytes = 0;
}

static int64_t slot_of(const rs__reader *r, int file, int64_t b) {
  uint64_t h = ((uint64_t)b * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)file * 0xc2b2ae3d27d4eb4full);
  int64_t i = (int64_t)(h >> 17) & (r->capcache - 1);
  while (r->cache[i].file >= 0 && !(r->cache[i].file == file && r->cache[i].block == b)) i = (i + 1) & (r->capcache - 1);
  return i;
}

/* a verified block, or NULL */
static const uint8_t *cache_get(rs__reader *r, int file, int64_t b) {
  if (!r->capcache) return NULL;
  return r->cache[slot_of(r, file, b)].data;
}

/* keeps a verified block (takes data; on failure the block is simply not kept) */
static void cache_put(rs__reader *r, int file, int64_t b, uint8_t *data, int64_t len) {
  if (r->cache_bytes + len > RS__READER_CACHE) cache_clear(r);
  if (2 * (r->ncache + 1) > r->capcache) {
    int64_t cap = r->capcache ? 2 * r->capcache : 1024;
    rs__rblock *old = r->cache, *nc = malloc(sizeof *nc * (size_t)cap);
    if (!nc) {
      free(data);
      return;
    }
    for (int64_t i = 0; i < cap; ++i) nc[i] = (rs__rblock){-1, 0, NULL};
    int64_t ocap = r->capcache;
    r->cache = nc;
    r->capcache = cap;
    for (int64_t i = 0; i < ocap; ++i)
      if (old[i].file >= 0) r->cache[slot_of(r, old[i].file, old[i].block)] = old[i];
    free(old);
  }
  rs__rblock *s = &r->cache[slot_of(r, file, b)];
  *s = (rs__rblock){file, b, data};
  r->ncache++;
  r->cache_bytes += len;
}

void rs__reader_close(rs__reader *r) {
  for (int i = 0; r->corder && i < r->md.nt; ++i) free(r->corder[i]);
  free(r->corder);
  free(r->cmax0);
  cache_clear(r);
  free(r->cache);
  for (int f = 0; r->fd && f < r->md.nf; ++f)
    if (r->fd[f] >= 0) close(r->fd[f]);
  free(r->fd);
  for (int i = 0; r->hdr && i < r->md.nf; ++i) rs__st_free(&r->hdr[i]);
  free(r->hdr);
  free(r->hdr_ok);
  rs__md_free(&r->md);
  free(r->dir);
  memset(r, 0, sizeof *r);
}

static rs_status open_data(rs__reader *r, int file, const char *key) {
  if (r->fd[file] >= 0) return RS_OK;
  const rs__md_file *f = &r->md.f[file];
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", r->dir, f->name);
  int fd;
  struct stat sb;
  rs_status st = rs__ckpt_open_read(path, 0, &fd, &sb);
  if (st) return st; /* the message names the file */
  if (sb.st_size != f->size) {
    close(fd);
    return rs_fail(RS_ERR_IO, "file %s (key '%s'): size %lld, metadata says %lld (truncated or replaced)", f->name,
                   key[0] == '@' ? key + 1 : key, (long long)sb.st_size, (long long)f->size);
  }
  r->fd[file] = fd;
  return RS_OK;
}

rs_status rs__reader_read(rs__reader *r, int file, int64_t off, int64_t len, const char *key, uint8_t *out) {
  const rs__md_file *f = &r->md.f[file];
  if (len == 0) return RS_OK;
  rs_status st = open_data(r, file, key);
  if (st) return st;
  const int64_t BS = f->block;
  for (int64_t b = off / BS; b <= (off + len - 1) / BS && !st; ++b) {
    int64_t bo = b * BS, bl = f->size - bo < BS ? f->size - bo : BS;
    int64_t lo = off > bo ? off : bo, hi = off + len < bo + bl ? off + len : bo + bl;
    const uint8_t *have = cache_get(r, file, b);
    if (have) {
      memcpy(out + (lo - off), have + (lo - bo), (size_t)(hi - lo));
      continue;
    }
    uint8_t *blk = malloc((size_t)bl); /* bl > 0: the block holds byte lo */
    if (!blk) return rs_fail(RS_ERR_NOMEM, "out of memory");
    ssize_t got = pread(r->fd[file], blk, (size_t)bl, bo);
    if (got != bl) {
      free(blk);
      return rs_fail(RS_ERR_IO, "file %s (key '%s'): short read of block %lld", f->name, key, (long long)b);
    }
    r->bytes_read += bl;
    /* RS_MUTANT 302: object reads skip the digest check (the U8 path of the loader) */
    int skip = RS_MUTANT(302) && key[0] == '@';
    if (!skip && XXH3_64bits(blk, (size_t)bl) != f->digest[b]) {
      free(blk);
      return rs_fail(RS_ERR_IO, "file %s block %lld (key '%s'): xxh3 digest mismatch (corrupt data)", f->name,
                     (long long)b, key[0] == '@' ? key + 1 : key);
    }
    memcpy(out + (lo - off), blk + (lo - bo), (size_t)(hi - lo));
    /* RS_MUTANT 605: every verified block is kept but the cache is never consulted, so each one
     * is read and hashed again by every chunk that touches it (the quadratic read amplification) */
    if (RS_MUTANT(605)) free(blk);
    else cache_put(r, file, b, blk, bl);
  }
  return st;
}

typedef struct off_ix {
  int64_t off0;
  int i;
} off_ix;

static int cmp_off_ix(const void *a, const void *b) {
  const off_ix *x = a, *y = b;
  if (x->off0 != y->off0) return x->off0 < y->off0 ? -1 : 1;
  return x->i - y->i;
}

rs_status rs__reader_chunk_window(rs__reader *r, int ti, int64_t a, int64_t b, const int **order, int *from, int *to) {
  const rs__md_tensor *t = &r->md.t[ti];
  *order = NULL;
  *from = 0;
  *to = t->nc;
  if (t->ndim == 0 || t->nc < 32) return RS_OK; /* few chunks: all of them */
  if (!r->corder[ti]) {
    off_ix *v = malloc(sizeof *v * (size_t)t->nc);
    int *o = malloc(sizeof *o * (size_t)t->nc);
    if (!v || !o) {
      free(v);
      free(o);
      return rs_fail(RS_ERR_NOMEM, "out of memory");
    }
    int64_t mx = 0;
    for (int i = 0; i < t->nc; ++i) {
      v[i] = (off_ix){t->c[i].off[0], i};
      if (t->c[i].size[0] > mx) mx = t->c[i].size[0];
    }
    qsort(v, (size_t)t->nc, sizeof *v, cmp_off_ix);
    for (int i = 0; i < t->nc; ++i) o[i] = v[i].i;
    free(v);
    r->corder[ti] = o;
    r->cmax0[ti] = mx;
  }
  const int *o = r->corder[ti];
  /* a chunk meets [a, b) on dim 0 only if a - max0 < off0 < b */
  int lo = 0, hi = t->nc;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (t->c[o[mid]].off[0] <= a - r->cmax0[ti]) lo = mid + 1;
    else hi = mid;
  }
  *from = lo;
  hi = t->nc;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (t->c[o[mid]].off[0] < b) lo = mid + 1;
    else hi = mid;
  }
  *to = lo;
  *order = o;
  return RS_OK;
}

rs_status rs__reader_header(rs__reader *r, int file, const rs__st_header **out) {
  if (r->hdr_ok[file]) {
    *out = &r->hdr[file];
    return RS_OK;
  }
  const rs__md_file *f = &r->md.f[file];
  if (f->size < 8) return rs_fail(RS_ERR_IO, "file %s: %lld bytes, too short for a safetensors header", f->name, (long long)f->size);
  uint8_t lenb[8];
  rs_status st = rs__reader_read(r, file, 0, 8, "(safetensors header)", lenb);
  if (st) return st;
  uint64_t hl = 0;
  for (int i = 7; i >= 0; --i) hl = hl << 8 | lenb[i];
  if (hl > RS_CKPT_MAX_HEADER || (int64_t)hl > f->size - 8)
    return rs_fail(RS_ERR_IO, "file %s: safetensors header of %llu bytes (over 100 MB or past the end)", f->name,
                   (unsigned long long)hl);
  char *h = malloc(hl + 1);
  if (!h) return rs_fail(RS_ERR_NOMEM, "out of memory");
  st = rs__reader_read(r, file, 8, (int64_t)hl, "(safetensors header)", (uint8_t *)h);
  if (!st) st = rs__st_parse(h, hl, f->size, &r->hdr[file]);
  free(h);
  if (st) {
    char pre[400];
    snprintf(pre, sizeof pre, "file %s: ", f->name);
    return rs_fail_prefix(RS_ERR_IO, pre);
  }
  r->hdr_ok[file] = 1;
  *out = &r->hdr[file];
  return RS_OK;
}

rs_status rs__reader_check_entry(rs__reader *r, int file, const char *name, rs_dtype dt, int nd,
                                 const int64_t *shape, int64_t off, int64_t len) {
  const rs__st_header *h;
  rs_status st = rs__reader_header(r, file, &h);
  if (st) return st;
  const char *fn = r->md.f[file].name;
  int i = rs__st_find(h, name);
  if (i < 0) return rs_fail(RS_ERR_IO, "file %s: no tensor '%s' in its safetensors header", fn, name);
  const rs__st_entry *e = &h->e[i];
  int same = e->dtype == dt && e->ndim == nd && 8 + h->header_len + e->begin == off && e->end - e->begin == len;
  for (int d = 0; same && d < nd; ++d) same = e->shape[d] == shape[d];
  if (!same)
    return rs_fail(RS_ERR_IO, "file %s: tensor '%s' in the safetensors header disagrees with metadata.json", fn, name);
  return RS_OK;
}

rs_status rs__reader_check_chunk(rs__reader *r, const rs__md_tensor *t, const rs__chunk *c) {
  char name[2200];
  rs__chunk_name(t->key, t->ndim, c->off, c->has_flat, c->flat_start, name, sizeof name);
  int64_t fl = c->flat_stop - c->flat_start;
  return rs__reader_check_entry(r, c->file, name, t->dtype, c->has_flat ? 1 : t->ndim, c->has_flat ? &fl : c->size,
                                c->byte_off, c->length);
}
