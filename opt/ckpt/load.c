/* load.c - opt's parallel load. Every process reads metadata.json and computes, from every rank's
 * requests (gathered under MPI), the pairs (requesting entry, stored chunk) that intersect. Direct
 * mode: each rank reads, for each chunk it needs, only the hull of the bytes its requests touch,
 * in segment-sized pieces on a pool of threads; every digest block a piece touches is verified
 * before a byte of it is scattered, row by row (trailing dims that both boxes hold whole are
 * merged into one run), straight into the destination. Read-once mode (Megatron-Core's
 * fully-parallel load): each needed chunk is read whole by one of the ranks needing it (balanced
 * by bytes) and sent over the transport to the others, which scatter from what they received.
 * Strict handling, error texts and the report follow the reference load. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include "core/ckpt/io.h"
#include "core/mutant.h"
#include "opt/ckpt/internal.h"

typedef struct pair {
  int r, i;      /* requesting rank and entry */
  int mt, mc;    /* metadata tensor and chunk (mc = -1: object mt) */
  int64_t h0, h1; /* file bytes the request touches (element aligned to the chunk) */
  int64_t got;
} pair;

typedef struct need {   /* one stored chunk a process reads */
  int mt, mc;
  int file;
  int64_t h0, h1;       /* hull of the bytes to read */
  int reader;           /* read-once: the rank that reads it */
  int solo;             /* read-once: one rank needs it, so it is read as in direct mode */
  int involved;         /* read-once: this process reads, sends or receives it */
  uint8_t *buf;         /* read-once: the whole chunk [h0, h1) */
} need;

typedef struct ldr {
  rs__ock *c;
  rs_ckpt_world *w;
  char dir[4200];
  rs__metadata md;
  int *fd;              /* per file, -1 until opened */
  int direct;
  pair *p;
  int np, capp;
  need *nd;
  int nn, capn;
  /* tasks: (need, piece) */
  int *tn;
  int64_t *ta, *tb;
  int64_t nt, capt;
  uint8_t **buf;
  int64_t bufsize;
  int read_once;
  int64_t round_bytes;  /* read-once: chunk bytes in flight per round */
  int64_t bytes_read;
} ldr;

/* ---- small helpers ---- */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static rs_status open_file(ldr *L, int file) {
  if (L->fd[file] >= 0) return RS_OK;
  const rs__md_file *f = &L->md.f[file];
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", L->dir, f->name);
  int fd = -1;
  struct stat sb;
  rs_status st = RS_ERR_IO;
#ifdef O_DIRECT
  if (L->direct && f->block >= 4096) {
    st = rs__ckpt_open_read(path, O_DIRECT, &fd, &sb);
    if (st == RS_ERR_UNSUPPORTED || st == RS_ERR_NOMEM) return st;
  }
#endif
  if (st) st = rs__ckpt_open_read(path, 0, &fd, &sb); /* tmpfs and friends refuse O_DIRECT */
  if (st) return st;
  if (sb.st_size != f->size) {
    close(fd);
    return rs_fail(RS_ERR_IO, "file %s: size %lld, metadata says %lld (truncated or replaced)", f->name,
                   (long long)sb.st_size, (long long)f->size);
  }
  L->fd[file] = fd;
  return RS_OK;
}

/* Reads the digest blocks covering [a, b) of a file into out (which starts at the first block's
 * offset) and verifies each; returns the offset of out[0]. */
static rs_status read_verified(ldr *L, int file, int64_t a, int64_t b, uint8_t *out, int64_t *base,
                               const char *key) {
  const rs__md_file *f = &L->md.f[file];
  int64_t BS = f->block, s = a / BS * BS, e = (b + BS - 1) / BS * BS;
  if (e > f->size) e = f->size;
  *base = s;
  int64_t want = e - s, rl = want;
  if (L->direct && BS >= 4096) rl = (want + 4095) / 4096 * 4096;
  int64_t done = 0;
  while (done < rl) {
    ssize_t n = pread(L->fd[file], out + done, (size_t)(rl - done), s + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += n;
  }
  if (done < want)
    return rs_fail(RS_ERR_IO, "file %s (key '%s'): short read at %lld", f->name, key, (long long)(s + done));
  __atomic_fetch_add(&L->bytes_read, want, __ATOMIC_RELAXED);
  for (int64_t o = s; o < e; o += BS) {
    int64_t l = e - o < BS ? e - o : BS;
    /* RS_MUTANT 353: only the first block of a piece is checked against its digest */
    if (RS_MUTANT(353) && o > s) break;
    if (XXH3_64bits(out + (o - s), (size_t)l) != f->digest[o / BS])
      return rs_fail(RS_ERR_IO, "file %s block %lld (key '%s'): xxh3 digest mismatch (corrupt data)", f->name,
                     (long long)(o / BS), key);
  }
  return RS_OK;
}

/* the safetensors header of a file agrees with metadata.json for the entry */
static rs_status check_entry(ldr *L, rs__st_header *hdrs, int *hok, int file, const char *name, rs_dtype dt,
                             int nd, const int64_t *shape, int64_t off, int64_t len) {
  const rs__md_file *f = &L->md.f[file];
  rs_status st;
  if (!hok[file]) {
    if ((st = open_file(L, file))) return st;
    if (f->size < 8)
      return rs_fail(RS_ERR_IO, "file %s: %lld bytes, too short for a safetensors header", f->name, (long long)f->size);
    uint8_t *b = NULL;
    int64_t base;
    if (posix_memalign((void **)&b, 4096, (size_t)(f->block + 4096))) return rs_fail(RS_ERR_NOMEM, "out of memory");
    st = read_verified(L, file, 0, 8, b, &base, "(safetensors header)");
    uint64_t hl = 0;
    for (int i = 7; !st && i >= 0; --i) hl = hl << 8 | b[i];
    free(b);
    if (st) return st;
    if (hl > RS_CKPT_MAX_HEADER || (int64_t)hl > f->size - 8)
      return rs_fail(RS_ERR_IO, "file %s: safetensors header of %llu bytes (over 100 MB or past the end)", f->name,
                     (unsigned long long)hl);
    int64_t span = (int64_t)(8 + hl + (uint64_t)f->block) / f->block * f->block + 4096;
    if (posix_memalign((void **)&b, 4096, (size_t)span)) return rs_fail(RS_ERR_NOMEM, "out of memory");
    st = read_verified(L, file, 0, 8 + (int64_t)hl, b, &base, "(safetensors header)");
    if (st) {
      free(b);
      return st; /* its message names the file */
    }
    st = rs__st_parse((const char *)b + 8, hl, f->size, &hdrs[file]);
    free(b);
    if (st) {
      /* one message: "file F: <the parser's>" (never formatted into the buffer it reads) */
      char pre[300];
      snprintf(pre, sizeof pre, "file %s: ", f->name);
      return rs_fail_prefix(RS_ERR_IO, pre);
    }
    hok[file] = 1;
  }
  const rs__st_header *h = &hdrs[file];
  int i = rs__st_find(h, name);
  if (i < 0) return rs_fail(RS_ERR_IO, "file %s: no tensor '%s' in its safetensors header", f->name, name);
  const rs__st_entry *e = &h->e[i];
  int same = e->dtype == dt && e->ndim == nd && 8 + h->header_len + e->begin == off && e->end - e->begin == len;
  for (int d = 0; same && d < nd; ++d) same = e->shape[d] == shape[d];
  if (!same)
    return rs_fail(RS_ERR_IO, "file %s: tensor '%s' in the safetensors header disagrees with metadata.json", f->name, name);
  return RS_OK;
}

/* ---- strict handling (Megatron's StrictHandling; the same texts as the reference) ---- */
static void free_list(char **v, int n) {
  for (int i = 0; i < n; ++i) free(v[i]);
  free(v);
}

static rs_status strict_check(const rs_ckpt_world *a, const rs__metadata *md, rs_strict mode, FILE *log, int quiet,
                              rs_ckpt_report *rep, char ***unexpected, int *nun) {
  int nreq = 0, cap = 0;
  char **req = NULL, uk[2048];
  for (int r = 0; r < a->n; ++r)
    for (int i = 0; i < a->sd[r].nt + a->sd[r].no; ++i) {
      const char *k = uk;
      if (i < a->sd[r].nt) k = a->sd[r].t[i].key;
      else rs_sh_object_unique_key(&a->sd[r].o[i - a->sd[r].nt], uk, sizeof uk);
      if (!rs__grow((void **)&req, nreq, &cap, sizeof *req) || !(req[nreq] = rs__strdup(k))) {
        free_list(req, nreq);
        return rs_fail(RS_ERR_NOMEM, "out of memory");
      }
      nreq++;
    }
  if (nreq) qsort(req, (size_t)nreq, sizeof *req, cmp_str);
  int u = 0;
  for (int i = 0; i < nreq; ++i) {
    if (u && !strcmp(req[u - 1], req[i])) free(req[i]);
    else req[u++] = req[i];
  }
  nreq = u;
  int nck = md->nt + md->no;
  char **ck = malloc(sizeof *ck * ((size_t)nck + 1));
  char **un = malloc(sizeof *un * ((size_t)nreq + 1)), **mi = malloc(sizeof *mi * ((size_t)nck + 1));
  if (!ck || !un || !mi) {
    free(ck);
    free(un);
    free(mi);
    free_list(req, nreq);
    return rs_fail(RS_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < md->nt; ++i) ck[i] = md->t[i].key;
  for (int i = 0; i < md->no; ++i) ck[md->nt + i] = md->o[i].ukey;
  if (nck) qsort(ck, (size_t)nck, sizeof *ck, cmp_str);
  int nu = 0, nm = 0;
  for (int i = 0; i < nreq; ++i)
    if (!bsearch(&req[i], ck, (size_t)nck, sizeof *ck, cmp_str)) un[nu++] = rs__strdup(req[i]);
  for (int i = 0; i < nck; ++i)
    if (!nreq || !bsearch(&ck[i], req, (size_t)nreq, sizeof *req, cmp_str)) mi[nm++] = rs__strdup(ck[i]);
  free(ck);
  free_list(req, nreq);
  int want_un = mode != RS_STRICT_ASSUME_OK_UNEXPECTED && mode != RS_STRICT_IGNORE_ALL;
  int want_mi = mode == RS_STRICT_LOG_ALL || mode == RS_STRICT_RAISE_ALL || mode == RS_STRICT_RETURN_ALL;
  /* RS_MUTANT 354: log_all reports the unexpected keys but drops the missing ones */
  if (RS_MUTANT(354) && mode == RS_STRICT_LOG_ALL) want_mi = 0;
  if (!log) log = stderr;
  if (!quiet && (mode == RS_STRICT_LOG_UNEXPECTED || mode == RS_STRICT_LOG_ALL)) {
    for (int i = 0; i < nu; ++i) fprintf(log, "ckpt load: unexpected key '%s' (not in the checkpoint)\n", un[i]);
    for (int i = 0; want_mi && i < nm; ++i) fprintf(log, "ckpt load: missing key '%s' (requested by no rank)\n", mi[i]);
  }
  *unexpected = malloc(sizeof(char *) * ((size_t)nu + 1));
  *nun = 0;
  for (int i = 0; *unexpected && i < nu; ++i) (*unexpected)[(*nun)++] = rs__strdup(un[i]);
  if (want_un) {
    rep->unexpected = un;
    rep->nunexpected = nu;
  } else {
    free_list(un, nu);
  }
  if (want_mi) {
    rep->missing = mi;
    rep->nmissing = nm;
  } else {
    free_list(mi, nm);
  }
  if (mode == RS_STRICT_ASSUME_OK_UNEXPECTED && *nun)
    return rs_fail(RS_ERR_MISMATCH, "ckpt load: key '%s' is not in the checkpoint (strict mode assume_ok_unexpected)",
                   (*unexpected)[0]);
  if ((mode == RS_STRICT_RAISE_UNEXPECTED || mode == RS_STRICT_RAISE_ALL) && *nun)
    return rs_fail(RS_ERR_MISMATCH, "ckpt load: %d unexpected key(s), first '%s' (strict mode %s)", *nun,
                   (*unexpected)[0], rs_strict_name(mode));
  if (mode == RS_STRICT_RAISE_ALL && rep->nmissing)
    return rs_fail(RS_ERR_MISMATCH, "ckpt load: %d missing key(s), first '%s' (strict mode raise_all)", rep->nmissing,
                   rep->missing[0]);
  return RS_OK;
}

/* ---- the pairs ---- */
static int is_unexpected(char **un, int nun, const char *k) {
  return nun && bsearch(&k, un, (size_t)nun, sizeof *un, cmp_str) != NULL;
}

static int64_t elem_count_inside(const rs_sh_tensor *t, const rs__md_tensor *mt) {
  int64_t lo = t->has_flat ? t->flat_start : 0, n = 0;
  rs_sh_tensor_numel(t, &n, NULL);
  int inside = 1;
  for (int d = 0; d < t->ndim; ++d) inside &= t->global_offset[d] + t->local_shape[d] <= mt->shape[d];
  if (inside) return n;
  int64_t want = 0, idx[RS_MAX_DIMS];
  for (int64_t i = lo; i < lo + n; ++i) {
    rs__unflatten(t->ndim, t->local_shape, i, idx);
    int in = 1;
    for (int d = 0; d < t->ndim && in; ++d) in = t->global_offset[d] + idx[d] < mt->shape[d];
    want += in;
  }
  return want;
}

static rs_status add_pair(ldr *L, int r, int i, int mt, int mc, int64_t h0, int64_t h1) {
  if (!rs__grow((void **)&L->p, L->np, &L->capp, sizeof *L->p)) return rs_fail(RS_ERR_NOMEM, "out of memory");
  L->p[L->np++] = (pair){r, i, mt, mc, h0, h1, 0};
  return RS_OK;
}

/* every (request, chunk) pair of every rank; shape and dtype checks as the reference */
static rs_status make_pairs(ldr *L, char **un, int nun) {
  const rs_ckpt_world *a = &L->c->all;
  for (int r = 0; r < a->n; ++r) {
    const rs_state_dict *sd = &a->sd[r];
    for (int i = 0; i < sd->nt; ++i) {
      const rs_sh_tensor *t = &sd->t[i];
      if (is_unexpected(un, nun, t->key)) continue;
      int mi = rs__md_find_tensor(&L->md, t->key);
      const rs__md_tensor *mt = &L->md.t[mi];
      if (mt->dtype != t->dtype)
        return rs_fail(RS_ERR_MISMATCH, "key '%s' rank %d: dtype %s requested, the checkpoint holds %s", t->key, r,
                       rs_dtype_name(t->dtype), rs_dtype_name(mt->dtype));
      int same = mt->ndim == t->ndim;
      for (int d = 0; same && d < t->ndim; ++d) same = mt->shape[d] == t->global_shape[d];
      if (!same && (!t->allow_shape_mismatch || mt->ndim != t->ndim))
        return rs_fail(RS_ERR_MISMATCH, "key '%s' rank %d: global shape differs from the checkpoint's%s", t->key, r,
                       t->allow_shape_mismatch ? " (dims differ)" : " (allow_shape_mismatch is off)");
      int es = rs_dtype_size(t->dtype);
      for (int c = 0; c < mt->nc; ++c) {
        const rs__chunk *ch = &mt->c[c];
        int64_t io[RS_MAX_DIMS], is[RS_MAX_DIMS], last[RS_MAX_DIMS];
        if (!rs__box_intersect(t->ndim, t->global_offset, t->local_shape, ch->off, ch->size, io, is)) continue;
        for (int d = 0; d < t->ndim; ++d) last[d] = io[d] + is[d] - 1 - ch->off[d];
        int64_t first[RS_MAX_DIMS];
        for (int d = 0; d < t->ndim; ++d) first[d] = io[d] - ch->off[d];
        int64_t f0 = rs__flat_index(t->ndim, ch->size, first), f1 = rs__flat_index(t->ndim, ch->size, last) + 1;
        int64_t cfs = ch->has_flat ? ch->flat_start : 0, cfe = ch->has_flat ? ch->flat_stop : cfs + ch->length / es;
        if (f0 < cfs) f0 = cfs;
        if (f1 > cfe) f1 = cfe;
        if (f1 <= f0) continue;
        rs_status st = add_pair(L, r, i, mi, c, ch->byte_off + (f0 - cfs) * es, ch->byte_off + (f1 - cfs) * es);
        if (st) return st;
      }
    }
    char uk[2048];
    for (int i = 0; i < sd->no; ++i) {
      rs_sh_object_unique_key(&sd->o[i], uk, sizeof uk);
      if (is_unexpected(un, nun, uk)) continue;
      int mo = rs__md_find_object(&L->md, uk);
      const rs__md_object *o = &L->md.o[mo];
      rs_status st = add_pair(L, r, sd->nt + i, mo, -1, o->byte_off, o->byte_off + o->length);
      if (st) return st;
    }
  }
  return RS_OK;
}

static int cmp_pair(const void *x, const void *y) {
  const pair *a = x, *b = y;
  if (a->mc < 0 || b->mc < 0) {
    if ((a->mc < 0) != (b->mc < 0)) return a->mc < 0 ? 1 : -1;
    if (a->mt != b->mt) return a->mt - b->mt;
    return a->r != b->r ? a->r - b->r : a->i - b->i;
  }
  if (a->mt != b->mt) return a->mt - b->mt;
  if (a->mc != b->mc) return a->mc - b->mc;
  return a->r != b->r ? a->r - b->r : a->i - b->i;
}

/* ---- scatter: the bytes [a, b) of a chunk (held in buf from file offset base) into a request ---- */
static rs_status scatter(ldr *L, pair *p, const uint8_t *buf, int64_t base, int64_t a, int64_t b) {
  rs_sh_tensor *t = &L->w->sd[p->r].t[p->i];
  const rs__md_tensor *mt = &L->md.t[p->mt];
  const rs__chunk *ch = &mt->c[p->mc];
  int es = rs_dtype_size(t->dtype), nd = t->ndim;
  int64_t io[RS_MAX_DIMS], is[RS_MAX_DIMS];
  rs__box_intersect(nd, t->global_offset, t->local_shape, ch->off, ch->size, io, is);
  int64_t cfs = ch->has_flat ? ch->flat_start : 0, cfe = ch->has_flat ? ch->flat_stop : ch->length / es;
  int64_t lo = t->has_flat ? t->flat_start : 0, hi;
  rs_sh_tensor_numel(t, &hi, NULL);
  hi += lo;
  /* chunk elements whose bytes lie in [a, b) */
  int64_t ea = cfs + (a - ch->byte_off) / es, eb = cfs + (b - ch->byte_off) / es;
  if (ea < cfs) ea = cfs;
  if (eb > cfe) eb = cfe;
  /* merge trailing dims that both the chunk and the request hold whole */
  int cut = nd - 1;
  while (cut > 0 && is[cut] == ch->size[cut] && is[cut] == t->local_shape[cut]) cut--;
  int64_t run = 1;
  for (int d = (cut < 0 ? 0 : cut); d < nd; ++d) run *= is[d];
  int64_t g[RS_MAX_DIMS], cidx[RS_MAX_DIMS], lidx[RS_MAX_DIMS], got = 0;
  memcpy(g, io, sizeof g);
  rs_status st = RS_OK;
  rs__ock_rows rows; /* the rows go out as 2-d copies (device.c) */
  rs__ock_rows_init(&rows, L->c, rs__ock_on_device(L->c, t));
  for (;;) {
    for (int d = 0; d < nd; ++d) {
      cidx[d] = g[d] - ch->off[d];
      lidx[d] = g[d] - t->global_offset[d];
    }
    int64_t ci = nd ? rs__flat_index(nd, ch->size, cidx) : 0, li = nd ? rs__flat_index(nd, t->local_shape, lidx) : 0;
    if (ci >= eb) break;
    int64_t k0 = 0, k1 = run;
    if (ea - ci > k0) k0 = ea - ci;
    if (lo - li > k0) k0 = lo - li;
    if (eb - ci < k1) k1 = eb - ci;
    if (hi - li < k1) k1 = hi - li;
    /* RS_MUTANT 355: a run that ends exactly at the piece's end loses its last element */
    if (RS_MUTANT(355) && k1 == eb - ci && k1 - k0 > 1) k1--;
    if (k1 > k0) {
      int64_t fb = ch->byte_off + (ci + k0 - cfs) * es;
      st = rs__ock_rows_add(&rows, t->data + (li + k0 - lo) * es, buf + (fb - base), (k1 - k0) * es);
      if (st) break;
      got += k1 - k0;
    }
    /* next row: odometer over dims [0, cut) */
    int d = cut - 1;
    for (; d >= 0; --d) {
      if (++g[d] < io[d] + is[d]) break;
      g[d] = io[d];
    }
    if (d < 0) break;
  }
  rs_status fst = rs__ock_rows_flush(&rows);
  if (!st) st = fst;
  __atomic_fetch_add(&p->got, got, __ATOMIC_RELAXED);
  return st;
}

static rs_status scatter_object(ldr *L, pair *p, const uint8_t *buf, int64_t base) {
  rs_sh_object *o = &L->w->sd[p->r].o[p->i - L->w->sd[p->r].nt];
  const rs__md_object *mo = &L->md.o[p->mt];
  uint8_t *d = malloc(mo->length ? (size_t)mo->length : 1);
  if (!d) return rs_fail(RS_ERR_NOMEM, "out of memory");
  memcpy(d, buf + (mo->byte_off - base), (size_t)mo->length);
  free(o->data);
  o->data = d;
  o->len = mo->length;
  p->got = 1;
  return RS_OK;
}

/* ---- needs and read tasks ---- */
static int pair_chunk_eq(const pair *a, const pair *b) { return a->mt == b->mt && a->mc == b->mc; }

static const char *need_key(const ldr *L, const need *n) {
  return n->mc < 0 ? L->md.o[n->mt].ukey : L->md.t[n->mt].key;
}

static rs_status add_task(ldr *L, int n, int64_t a, int64_t b) {
  if (L->nt == L->capt) {
    int64_t nc = L->capt ? L->capt * 2 : 256;
    int *x = realloc(L->tn, sizeof(int) * (size_t)nc);
    if (x) L->tn = x;
    int64_t *y = realloc(L->ta, sizeof(int64_t) * (size_t)nc);
    if (y) L->ta = y;
    int64_t *z = realloc(L->tb, sizeof(int64_t) * (size_t)nc);
    if (z) L->tb = z;
    if (!x || !y || !z) return rs_fail(RS_ERR_NOMEM, "out of memory");
    L->capt = nc;
  }
  L->tn[L->nt] = n;
  L->ta[L->nt] = a;
  L->tb[L->nt++] = b;
  return RS_OK;
}

/* pieces of [h0, h1): boundaries on segment multiples when the chunk's elements sit on them */
static rs_status split(ldr *L, int n, int64_t seg) {
  const need *nd = &L->nd[n];
  int64_t off = nd->mc < 0 ? L->md.o[nd->mt].byte_off : L->md.t[nd->mt].c[nd->mc].byte_off;
  int es = nd->mc < 0 ? 1 : rs_dtype_size(L->md.t[nd->mt].dtype);
  int64_t base = off % es == 0 ? 0 : off % seg;
  int64_t a = nd->h0;
  if (a == nd->h1 || nd->mc < 0) return add_task(L, n, a, nd->h1); /* objects: one piece */
  while (a < nd->h1) {
    int64_t b = base + ((a - base) / seg + 1) * seg;
    if (b > nd->h1) b = nd->h1;
    rs_status st = add_task(L, n, a, b);
    if (st) return st;
    a = b;
  }
  return RS_OK;
}

/* pairs of chunk need n: [first, end) in L->p (sorted by chunk) */
typedef struct span {
  int first, end;
} span;

typedef struct rctx {
  ldr *L;
  span *sp;     /* per need */
  int64_t base; /* first task of the round */
} rctx;


/* [a, b) of a file straight into dst (no staging): the digest blocks inside [a, b) are verified
 * where they landed, the partial blocks at either end are read again whole into tmp, verified,
 * and their part copied over. 0 when [a, b) holds no whole block, or under O_DIRECT is not
 * 4096-aligned (the caller stages instead). */
static int read_into(ldr *L, int file, int64_t a, int64_t b, uint8_t *dst, uint8_t *tmp, const char *key,
                     rs_status *st) {
  const rs__md_file *f = &L->md.f[file];
  int64_t BS = f->block, s_in = (a + BS - 1) / BS * BS, e_in = b == f->size ? b : b / BS * BS;
  if (e_in - s_in < BS) return 0;
  /* O_DIRECT reads in place only what the device can take: offset, length and address on 4096 */
  if (L->direct && (a % 4096 || (b - a) % 4096 || (uintptr_t)dst % 4096)) return 0;
  int64_t done = 0, want = b - a, base;
  while (done < want) {
    ssize_t n = pread(L->fd[file], dst + done, (size_t)(want - done), a + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += n;
  }
  if (done < want) {
    *st = rs_fail(RS_ERR_IO, "file %s (key '%s'): short read at %lld", f->name, key, (long long)(a + done));
    return 1;
  }
  __atomic_fetch_add(&L->bytes_read, want, __ATOMIC_RELAXED);
  for (int64_t o = s_in; o < e_in; o += BS) {
    int64_t l = e_in - o < BS ? e_in - o : BS;
    /* RS_MUTANT 353: only the first block of a piece is checked against its digest */
    if (RS_MUTANT(353) && o > s_in) break;
    if (XXH3_64bits(dst + (o - a), (size_t)l) != f->digest[o / BS]) {
      *st = rs_fail(RS_ERR_IO, "file %s block %lld (key '%s'): xxh3 digest mismatch (corrupt data)", f->name,
                    (long long)(o / BS), key);
      return 1;
    }
  }
  *st = RS_OK;
  if (a < s_in && !(*st = read_verified(L, file, a, s_in, tmp, &base, key)))
    memcpy(dst, tmp + (a - base), (size_t)(s_in - a));
  if (!*st && e_in < b && !(*st = read_verified(L, file, e_in, b, tmp, &base, key)))
    memcpy(dst + (e_in - a), tmp + (e_in - base), (size_t)(b - e_in));
  return 1;
}

/* The one request of this process that takes every element of [a, b) as one contiguous run of
 * its buffer (a chunk loaded into the same layout): where in its buffer the bytes go. */
static pair *single_run(ldr *L, int first, int end, int64_t a, int64_t b, uint8_t **dst) {
  pair *one = NULL;
  for (int k = first; k < end; ++k) {
    pair *p = &L->p[k];
    if (!rs__ock_mine(L->c, p->r) || p->h1 <= a || p->h0 >= b) continue;
    if (one || p->mc < 0) return NULL;
    one = p;
  }
  if (!one) return NULL;
  rs_sh_tensor *t = &L->w->sd[one->r].t[one->i];
  /* RS_MUTANT 357: device memory is read into straight, as if it were the host's */
  if (rs__ock_on_device(L->c, t) && !RS_MUTANT(357)) return NULL;
  const rs__chunk *ch = &L->md.t[one->mt].c[one->mc];
  int es = rs_dtype_size(t->dtype), nd = t->ndim;
  int64_t io[RS_MAX_DIMS], is[RS_MAX_DIMS], cidx[RS_MAX_DIMS], lidx[RS_MAX_DIMS];
  rs__box_intersect(nd, t->global_offset, t->local_shape, ch->off, ch->size, io, is);
  int cut = nd - 1;
  while (cut > 0 && is[cut] == ch->size[cut] && is[cut] == t->local_shape[cut]) cut--;
  if (cut > 0) return NULL;
  int64_t run = 1;
  for (int d = 0; d < nd; ++d) {
    run *= is[d];
    cidx[d] = io[d] - ch->off[d];
    lidx[d] = io[d] - t->global_offset[d];
  }
  int64_t cfs = ch->has_flat ? ch->flat_start : 0, lo = t->has_flat ? t->flat_start : 0, hi;
  rs_sh_tensor_numel(t, &hi, NULL);
  hi += lo;
  int64_t ci = nd ? rs__flat_index(nd, ch->size, cidx) : 0, li = nd ? rs__flat_index(nd, t->local_shape, lidx) : 0;
  int64_t ea = cfs + (a - ch->byte_off) / es, eb = cfs + (b - ch->byte_off) / es;
  /* every element of [ea, eb) must be in the run and in the request's range */
  if ((a - ch->byte_off) % es || (b - ch->byte_off) % es || ea < ci || eb > ci + run || li + (ea - ci) < lo ||
      li + (eb - ci) > hi)
    return NULL;
  *dst = t->data + (li + (ea - ci) - lo) * es;
  return one;
}

static rs_status read_task(void *vx, int64_t task, int tid) {
  rctx *x = vx;
  ldr *L = x->L;
  need *nd = &L->nd[L->tn[task]];
  int64_t a = L->ta[task], b = L->tb[task], base = a;
  const span *s = &x->sp[L->tn[task]];
  if (b <= a) {
    /* an empty object is still loaded (with no bytes) */
    for (int k = s->first; k < s->end && (!L->read_once || nd->solo); ++k)
      if (L->p[k].mc < 0 && rs__ock_mine(L->c, L->p[k].r)) {
        rs_status st = scatter_object(L, &L->p[k], (const uint8_t *)"", a);
        if (st) return st;
      }
    return RS_OK;
  }
  rs_status st = open_file(L, nd->file);
  uint8_t *buf = L->buf[tid], *dst;
  if (st) return st;
  if (L->read_once && !nd->solo) {
    /* into the whole-chunk buffer that travels to the other ranks */
    if (read_into(L, nd->file, a, b, nd->buf + (a - nd->h0), buf, need_key(L, nd), &st)) return st;
    if (!st) st = read_verified(L, nd->file, a, b, buf, &base, need_key(L, nd));
    if (!st) memcpy(nd->buf + (a - nd->h0), buf + (a - base), (size_t)(b - a));
    return st;
  }
  pair *one = single_run(L, s->first, s->end, a, b, &dst);
  if (one && read_into(L, nd->file, a, b, dst, buf, need_key(L, nd), &st)) {
    if (!st) __atomic_fetch_add(&one->got, (b - a) / rs_dtype_size(L->md.t[one->mt].dtype), __ATOMIC_RELAXED);
    return st;
  }
  if (!st) st = read_verified(L, nd->file, a, b, buf, &base, need_key(L, nd));
  for (int k = s->first; k < s->end && !st; ++k) {
    pair *p = &L->p[k];
    if (!rs__ock_mine(L->c, p->r)) continue;
    if (p->mc < 0) st = scatter_object(L, p, buf, base);
    else if (p->h1 > a && p->h0 < b) st = scatter(L, p, buf, base, a, b);
  }
  return st;
}

static rs_status read_task_at(void *vx, int64_t task, int tid) {
  return read_task(vx, task + ((rctx *)vx)->base, tid);
}

static int64_t need_len(const ldr *L, const need *n) {
  return n->mc < 0 ? L->md.o[n->mt].length : L->md.t[n->mt].c[n->mc].length;
}

static int64_t need_off(const ldr *L, const need *n) {
  return n->mc < 0 ? L->md.o[n->mt].byte_off : L->md.t[n->mt].c[n->mc].byte_off;
}

static const need *g_needs;
static int cmp_need_bytes(const void *x, const void *y) {
  int a = *(const int *)x, b = *(const int *)y;
  int64_t la = g_needs[a].h1 - g_needs[a].h0, lb = g_needs[b].h1 - g_needs[b].h0;
  if (la != lb) return la > lb ? -1 : 1;
  return a - b;
}

static rs_status read_round(ldr *L, span *sp, int k0, int k1, const int64_t *tfirst, rs_status st,
                            rs_ckpt_opt_stats *stats);

static rs_status run_reads(ldr *L, rs_ckpt_opt_stats *stats) {
  rs__ock *c = L->c;
  rs_status st = RS_OK;
  if (L->np) qsort(L->p, (size_t)L->np, sizeof *L->p, cmp_pair);
  span *sp = NULL;
  int capsp = 0;
  /* one need per distinct chunk that some rank this process serves (direct) or any rank needs */
  for (int k = 0; k < L->np && !st;) {
    int e = k + 1;
    while (e < L->np && pair_chunk_eq(&L->p[k], &L->p[e])) e++;
    int64_t h0 = INT64_MAX, h1 = INT64_MIN;
    int mine = 0;
    for (int j = k; j < e; ++j) {
      if (!L->read_once && !rs__ock_mine(c, L->p[j].r)) continue;
      /* RS_MUTANT 352: the hull of a chunk is the first request's range only */
      if (RS_MUTANT(352) && mine) continue;
      mine = 1;
      if (L->p[j].h0 < h0) h0 = L->p[j].h0;
      if (L->p[j].h1 > h1) h1 = L->p[j].h1;
    }
    if (mine) {
      if (!rs__grow((void **)&L->nd, L->nn, &L->capn, sizeof *L->nd) ||
          !rs__grow((void **)&sp, L->nn, &capsp, sizeof *sp)) {
        st = rs_fail(RS_ERR_NOMEM, "out of memory");
        break;
      }
      need *n = &L->nd[L->nn];
      memset(n, 0, sizeof *n);
      n->mt = L->p[k].mt;
      n->mc = L->p[k].mc;
      n->file = n->mc < 0 ? L->md.o[n->mt].file : L->md.t[n->mt].c[n->mc].file;
      int solo = 1;
      for (int j = k + 1; j < e; ++j) solo &= L->p[j].r == L->p[k].r;
      if (L->read_once && !solo) {
        n->h0 = need_off(L, n);
        n->h1 = n->h0 + need_len(L, n);
      } else {
        n->solo = L->read_once;
        n->h0 = h0;
        n->h1 = h1;
      }
      n->reader = -1;
      sp[L->nn] = (span){k, e};
      L->nn++;
    }
    k = e;
  }
  int64_t seg = c->segment;
  int64_t maxblock = 64;
  for (int f = 0; f < L->md.nf; ++f)
    if (L->md.f[f].block > maxblock) maxblock = L->md.f[f].block;
  if (seg < maxblock) seg = maxblock;
  L->bufsize = seg + 2 * maxblock + 4096;
  /* read-once: readers balanced by bytes among the ranks needing the chunk */
  if (!st && L->read_once) {
    int64_t *load = calloc((size_t)c->n, sizeof *load);
    int *order = malloc(sizeof(int) * ((size_t)L->nn + 1));
    if (!load || !order) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    for (int k = 0; !st && k < L->nn; ++k) order[k] = k;
    g_needs = L->nd;
    if (!st && L->nn) qsort(order, (size_t)L->nn, sizeof *order, cmp_need_bytes);
    for (int k = 0; !st && k < L->nn; ++k) {
      need *n = &L->nd[order[k]];
      const span *s = &sp[order[k]];
      if (n->solo) {
        /* the one rank that needs it reads what it needs, as in direct mode */
        n->reader = L->p[s->first].r;
        load[n->reader] += n->h1 - n->h0;
        continue;
      }
      int best = -1;
      for (int j = s->first; j < s->end; ++j) {
        int r = L->p[j].r;
        if (best < 0 || load[r] < load[best]) best = r;
      }
      /* RS_MUTANT 356: the reader of a chunk is the least loaded rank of all, needing it or not;
       * nobody then sends it to the ranks that do */
      if (RS_MUTANT(356)) {
        best = 0;
        for (int r = 1; r < c->n; ++r)
          if (load[r] < load[best]) best = r;
      }
      n->reader = best;
      load[best] += n->h1 - n->h0;
      n->involved = rs__ock_mine(c, best);
      for (int j = s->first; j < s->end && !n->involved; ++j) n->involved = rs__ock_mine(c, L->p[j].r);
    }
    free(load);
    free(order);
  }
  /* header entries of the chunks this process reads */
  rs__st_header *hdrs = calloc((size_t)L->md.nf + 1, sizeof *hdrs);
  int *hok = calloc((size_t)L->md.nf + 1, sizeof *hok);
  if (!hdrs || !hok) st = rs_fail(RS_ERR_NOMEM, "out of memory");
  int64_t *tfirst = calloc((size_t)L->nn + 1, sizeof *tfirst);
  if (!tfirst) st = rs_fail(RS_ERR_NOMEM, "out of memory");
  for (int k = 0; !st && k < L->nn; ++k) {
    need *n = &L->nd[k];
    tfirst[k] = L->nt;
    if (L->read_once && !rs__ock_mine(c, n->reader)) continue;
    char name[2200];
    if (n->mc < 0) {
      const rs__md_object *o = &L->md.o[n->mt];
      int64_t shp = o->length;
      st = check_entry(L, hdrs, hok, n->file, o->ukey, RS_U8, 1, &shp, o->byte_off, o->length);
    } else {
      const rs__md_tensor *t = &L->md.t[n->mt];
      const rs__chunk *ch = &t->c[n->mc];
      rs__chunk_name(t->key, t->ndim, ch->off, ch->has_flat, ch->flat_start, name, sizeof name);
      int64_t fl = ch->flat_stop - ch->flat_start;
      st = check_entry(L, hdrs, hok, n->file, name, t->dtype, ch->has_flat ? 1 : t->ndim, ch->has_flat ? &fl : ch->size,
                       ch->byte_off, ch->length);
    }
    if (!st && (!L->read_once || rs__ock_mine(c, n->reader))) st = split(L, k, seg);
  }
  for (int f = 0; hdrs && f < L->md.nf; ++f) rs__st_free(&hdrs[f]);
  free(hdrs);
  free(hok);
  if (!st) st = rs__ock_stage_get(c, c->nthreads, L->bufsize, &L->buf);
  if (tfirst) tfirst[L->nn] = L->nt;
  /* rounds (read-once): at most round_bytes of shared chunks in flight, then exchanged, scattered
   * and freed; every process cuts the same rounds from the same list. Direct: one round. */
  int64_t budget = L->round_bytes > 0 ? L->round_bytes : (int64_t)1 << 30;
  for (int k0 = 0; tfirst && (k0 < L->nn || (k0 == 0 && L->nn == 0));) {
    int k1 = L->nn;
    if (L->read_once) {
      int64_t acc = 0;
      for (k1 = k0; k1 < L->nn; ++k1) {
        int64_t b = L->nd[k1].solo ? 0 : L->nd[k1].h1 - L->nd[k1].h0;
        if (k1 > k0 && acc + b > budget) break;
        acc += b;
      }
      for (int k = k0; !st && k < k1; ++k) {
        need *n = &L->nd[k];
        if (!n->solo && n->involved && !(n->buf = malloc(n->h1 - n->h0 ? (size_t)(n->h1 - n->h0) : 1)))
          st = rs_fail(RS_ERR_NOMEM, "out of memory");
      }
    }
    st = read_round(L, sp, k0, k1, tfirst, st, stats);
    for (int k = k0; k < k1; ++k) {
      free(L->nd[k].buf);
      L->nd[k].buf = NULL;
    }
    if (k1 >= L->nn) break;
    k0 = k1;
  }
  free(tfirst);
  free(sp);
  return st;
}


/* one round: the reads of needs [k0, k1), then (read-once) the transfers and the scatter */
static rs_status read_round(ldr *L, span *sp, int k0, int k1, const int64_t *tfirst, rs_status st,
                            rs_ckpt_opt_stats *stats) {
  rs__ock *c = L->c;
  rctx x = {L, sp, tfirst[k0]};
  if (!st) st = rs__pool_run(c->nthreads, tfirst[k1] - tfirst[k0], read_task_at, &x);
  if (L->read_once) {
    st = rs__ock_agree(c, st);
    /* every reader sends the chunk to each other rank needing it */
    int nm = 0, capm = 0, *from = NULL, *to = NULL;
    void **bufs = NULL;
    int64_t *lens = NULL;
    uint8_t **rbuf = NULL; /* receive buffers (freed below) */
    for (int k = k0; !st && k < k1; ++k) {
      need *n = &L->nd[k];
      const span *s = &sp[k];
      for (int j = s->first; j < s->end && !n->solo; ++j) {
        int r = L->p[j].r;
        if (r == n->reader || (j > s->first && L->p[j - 1].r == r)) continue;
        if (nm == capm) {
          capm = capm ? capm * 2 : 64;
          int *a1 = realloc(from, sizeof(int) * (size_t)capm), *a2 = realloc(to, sizeof(int) * (size_t)capm);
          if (a1) from = a1;
          if (a2) to = a2;
          void **a3 = realloc(bufs, sizeof(void *) * (size_t)capm);
          if (a3) bufs = a3;
          int64_t *a4 = realloc(lens, sizeof(int64_t) * (size_t)capm);
          if (a4) lens = a4;
          uint8_t **a5 = realloc(rbuf, sizeof(uint8_t *) * (size_t)capm);
          if (a5) rbuf = a5;
          if (!a1 || !a2 || !a3 || !a4 || !a5) {
            st = rs_fail(RS_ERR_NOMEM, "out of memory");
            break;
          }
        }
        from[nm] = n->reader;
        to[nm] = r;
        /* RS_MUTANT 356: a chunk travels without its second half */
        lens[nm] = RS_MUTANT(356) ? (n->h1 - n->h0) / 2 : n->h1 - n->h0;
        rbuf[nm] = NULL;
        if (c->local || n->reader == c->me) {
          bufs[nm] = n->buf; /* the sender's bytes */
          if (c->local) {
            /* in one process the receiver gets its own copy, as over a wire */
            rbuf[nm] = calloc(1, n->h1 - n->h0 ? (size_t)(n->h1 - n->h0) : 1);
            if (!rbuf[nm]) st = rs_fail(RS_ERR_NOMEM, "out of memory");
          }
        } else {
          bufs[nm] = n->buf; /* receiver: into its chunk buffer */
        }
        nm++;
      }
    }
    if (!st && c->local) {
      /* local transport: send from the reader's buffer into the receiver's copy */
      rs_comm *cm = c->comm;
      if (cm) {
        for (int m = 0; m < nm && !st; ++m) {
          rs_view vs, vr;
          rs_view_packed(&vs, bufs[m], 1, 1, &lens[m]);
          rs_view_packed(&vr, rbuf[m], 1, 1, &lens[m]);
          st = cm->ops->submit_send(cm, from[m], to[m], 13 + m, &vs, 1);
          if (!st) st = cm->ops->submit_recv(cm, to[m], from[m], 13 + m, &vr, 1);
        }
        if (!st) st = cm->ops->run(cm);
      } else {
        for (int m = 0; m < nm; ++m) memcpy(rbuf[m], bufs[m], (size_t)lens[m]);
      }
    } else if (!st) {
      st = rs__ock_exchange(c, nm, from, to, bufs, lens);
    }
    for (int m = 0; m < nm && stats && !st; ++m)
      if (from[m] == c->me || c->local) stats->bytes_sent += lens[m];
    /* scatter: each rank from its own copy of the chunk */
    for (int k = k0; !st && k < k1; ++k) {
      need *n = &L->nd[k];
      const span *s = &sp[k];
      if (n->solo) continue; /* scattered as it was read */
      for (int j = s->first; j < s->end && !st; ++j) {
        pair *p = &L->p[j];
        if (!rs__ock_mine(c, p->r)) continue;
        const uint8_t *src = n->buf;
        if (c->local && p->r != n->reader) {
          src = NULL;
          for (int m = 0; m < nm; ++m)
            if (bufs[m] == n->buf && to[m] == p->r) src = rbuf[m];
          if (!src) {
            st = rs_fail(RS_ERR_TRANSPORT, "read-once: rank %d was sent no copy of a chunk of '%s'", p->r, need_key(L, n));
            break;
          }
        }
        if (p->mc < 0) st = scatter_object(L, p, src, n->h0);
        else st = scatter(L, p, src, n->h0, n->h0, n->h1);
      }
    }
    for (int m = 0; m < nm && rbuf; ++m) free(rbuf[m]);
    free(rbuf);
    free(from);
    free(to);
    free(bufs);
    free(lens);
  }
  return st;
}

static void ldr_free(ldr *L) {
  for (int f = 0; L->fd && f < L->md.nf; ++f)
    if (L->fd[f] >= 0) close(L->fd[f]);
  free(L->fd);
  for (int k = 0; k < L->nn; ++k) free(L->nd[k].buf);
  free(L->nd);
  free(L->p);
  free(L->tn);
  free(L->ta);
  free(L->tb);
  rs__ock_stage_put(L->c);
  L->buf = NULL;
  rs__md_free(&L->md);
}

rs_status rs_opt_ckpt_load(rs_world *world, rs_ckpt_world *w, const char *root, int64_t step,
                           rs_strict strict, const rs_ckpt_opt_opts *o, rs_ckpt_report *rep,
                           rs_ckpt_opt_stats *stats) {
  rs_ckpt_report dummy;
  if (!rep) rep = &dummy;
  memset(rep, 0, sizeof *rep);
  if (stats) memset(stats, 0, sizeof *stats);
  rs__ock c;
  rs_status st = rs__ock_init(&c, world, w, o);
  if (st) return st;
  if (step < 0) st = rs__ckpt_read_latest(root, &step);
  ldr L;
  memset(&L, 0, sizeof L);
  L.c = &c;
  L.w = w;
  L.direct = o && o->direct;
  L.read_once = o && o->read_once;
  L.round_bytes = o ? o->round_bytes : 0;
  snprintf(L.dir, sizeof L.dir, "%s/step_%lld", root, (long long)step);
  if (!st) {
    char path[4400];
    snprintf(path, sizeof path, "%s/metadata.json", L.dir);
    uint8_t *raw = NULL;
    size_t n = 0;
    st = rs__ckpt_dir_ok(L.dir);
    if (!st && (st = rs__read_file(path, &raw, &n)) == RS_ERR_IO)
      st = rs_fail(RS_ERR_INVALID, "%s: no metadata.json (an incomplete or missing checkpoint)", L.dir);
    char *b = (char *)raw;
    if (!st && (st = rs__md_parse(b, (size_t)n, &L.md))) {
      char pre[4500];
      snprintf(pre, sizeof pre, "%s: ", path);
      st = rs_fail_prefix(st, pre);
    }
    free(b);
  }
  if (!st) {
    L.fd = malloc(sizeof(int) * ((size_t)L.md.nf + 1));
    if (!L.fd) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    for (int f = 0; L.fd && f < L.md.nf; ++f) L.fd[f] = -1;
  }
  for (int r = 0; r < w->n && !st; ++r)
    if (rs__ock_mine(&c, r)) st = rs_sd_apply_factories(&w->sd[r]);
  st = rs__ock_agree(&c, st);
  if (!st) st = rs__ock_gather(&c, w);
  char **un = NULL;
  int nun = 0;
  if (!st) st = strict_check(&c.all, &L.md, strict, o ? o->log : NULL, !c.local && c.me != 0, rep, &un, &nun);
  if (!st) st = make_pairs(&L, un, nun);
  if (!st) st = run_reads(&L, stats);
  /* every requested element arrived, per entry of this process's ranks */
  if (!st) {
    const rs_ckpt_world *a = &c.all;
    int64_t *got = NULL;
    for (int r = 0; r < w->n && !st; ++r) {
      if (!rs__ock_mine(&c, r)) continue;
      rs_state_dict *sd = &w->sd[r];
      got = calloc((size_t)(sd->nt + sd->no) + 1, sizeof *got);
      if (!got) {
        st = rs_fail(RS_ERR_NOMEM, "out of memory");
        break;
      }
      for (int k = 0; k < L.np; ++k)
        if (L.p[k].r == r) got[L.p[k].i] += L.p[k].got;
      for (int i = 0; i < sd->nt && !st; ++i) {
        rs_sh_tensor *t = &sd->t[i];
        if (is_unexpected(un, nun, t->key)) continue;
        int mi = rs__md_find_tensor(&L.md, t->key);
        int64_t want = elem_count_inside(&a->sd[r].t[i], &L.md.t[mi]);
        if (got[i] != want)
          st = rs_fail(RS_ERR_MISMATCH, "key '%s' rank %d: %lld of %lld requested elements found in the checkpoint",
                       t->key, r, (long long)got[i], (long long)want);
        else {
          t->loaded = 1;
          rep->tensors_loaded++;
        }
      }
      char uk[2048];
      for (int i = 0; i < sd->no && !st; ++i) {
        rs_sh_object_unique_key(&sd->o[i], uk, sizeof uk);
        if (is_unexpected(un, nun, uk)) continue;
        if (!got[sd->nt + i]) {
          st = rs_fail(RS_ERR_MISMATCH, "object '%s' rank %d: requested, found in metadata.json, never read", uk, r);
          break;
        }
        sd->o[i].loaded = 1;
        rep->objects_loaded++;
      }
      free(got);
      got = NULL;
      for (int i = 0; i < sd->ncommon; ++i) {
        free(sd->common[i].key);
        free(sd->common[i].val);
      }
      sd->ncommon = 0;
      for (int i = 0; i < L.md.ncommon && !st; ++i)
        st = rs_sd_add_kv(&sd->common, &sd->ncommon, &sd->capc, L.md.common[i].key, L.md.common[i].val,
                          L.md.common[i].len);
    }
  }
  st = rs__ock_agree(&c, st);
  for (int r = 0; r < w->n; ++r)
    if (rs__ock_mine(&c, r)) rs_sd_apply_factory_merges(&w->sd[r]);
  rep->bytes_read = L.bytes_read;
  if (stats) {
    stats->bytes_read = L.bytes_read;
    rs__ock_stage_stats(&c, stats);
  }
  for (int i = 0; i < nun; ++i) free(un[i]);
  free(un);
  ldr_free(&L);
  rs__ock_free(&c);
  if (rep == &dummy) rs_ckpt_report_free(&dummy);
  return st;
}
