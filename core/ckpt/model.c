/* model.c - the sharded state dict (Megatron-Core dist_checkpointing.mapping): entries, replica
 * ids, object unique keys, the test values of SPEC 8 for checkpoints, box helpers, and the two
 * factories (GLU split along a dim; a distributed optimizer's flat fragment) with build and merge. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include "core/checked.h"
#include "core/ckpt/internal.h"
#include "core/mutant.h"
#include "core/values.h"

/* ---- small helpers ---- */
uint64_t rs__str_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

char *rs__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

int rs__grow(void **arr, int n, int *cap, size_t es) {
  if (n < *cap) return 1;
  int nc = *cap ? *cap * 2 : 8;
  void *p = realloc(*arr, (size_t)nc * es);
  if (!p) return 0;
  memset((char *)p + (size_t)*cap * es, 0, (size_t)(nc - *cap) * es);
  *arr = p;
  *cap = nc;
  return 1;
}

int rs__key_ok(const char *k) {
  if (!k || !*k) return 0;
  for (const unsigned char *p = (const unsigned char *)k; *p; ++p)
    if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\') return 0;
  return strlen(k) < 1024;
}

int rs__file_name_ok(const char *n) {
  if (!n || !*n || n[0] == '.' || strlen(n) > 128) return 0;
  for (const char *p = n; *p; ++p) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

int rs__box_intersect(int nd, const int64_t *ao, const int64_t *as, const int64_t *bo,
                      const int64_t *bs, int64_t *io, int64_t *is) {
  int nonempty = 1;
  for (int d = 0; d < nd; ++d) {
    int64_t lo = ao[d] > bo[d] ? ao[d] : bo[d];
    int64_t ae = ao[d] + as[d], be = bo[d] + bs[d];
    int64_t hi = ae < be ? ae : be;
    /* RS_MUTANT 300: off-by-one chunk intersection (a box ending where another starts overlaps) */
    if (RS_MUTANT(300) && hi == lo && as[d] > 0 && bs[d] > 0) hi = lo + 1;
    io[d] = lo;
    is[d] = hi > lo ? hi - lo : 0;
    if (is[d] == 0) nonempty = 0;
  }
  return nonempty;
}

void rs__region_text(int nd, const int64_t *off, const int64_t *sz, char *buf, size_t cap) {
  size_t n = 0;
  n += (size_t)snprintf(buf + n, cap - n, "[");
  for (int d = 0; d < nd && n < cap; ++d)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld:%lld", d ? ", " : "", (long long)off[d],
                          (long long)(off[d] + sz[d]));
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

int64_t rs__flat_index(int nd, const int64_t *shape, const int64_t *idx) {
  int64_t f = 0;
  for (int d = 0; d < nd; ++d) f = f * shape[d] + idx[d];
  return f;
}

int rs__box_next(int nd, const int64_t *off, const int64_t *sz, int64_t *idx) {
  for (int d = nd - 1; d >= 0; --d) {
    if (++idx[d] < off[d] + sz[d]) return 1;
    idx[d] = off[d];
  }
  return 0;
}

void rs__unflatten(int nd, const int64_t *shape, int64_t f, int64_t *idx) {
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = shape[d] ? f % shape[d] : 0;
    f = shape[d] ? f / shape[d] : 0;
  }
}

/* ---- replica ids, unique keys, values ---- */
int rs_replica_is_main(const rs_replica_id *r) {
  for (int i = 0; i < r->n; ++i)
    if (r->v[i] != 0) return 0;
  return 1;
}

static void join_ints(char *buf, size_t cap, const int64_t *v, int n) {
  size_t len = strlen(buf);
  for (int i = 0; i < n && len < cap; ++i) {
    snprintf(buf + len, cap - len, "%s%lld", i ? "." : "", (long long)v[i]);
    len = strlen(buf);
  }
}

int rs_sh_object_unique_key(const rs_sh_object *o, char *buf, size_t cap) {
  char tmp[2048];
  snprintf(tmp, sizeof tmp, "%s/shard_", o->key);
  join_ints(tmp, sizeof tmp, o->global_offset, o->ndim);
  size_t l = strlen(tmp);
  snprintf(tmp + l, sizeof tmp - l, "_");
  join_ints(tmp, sizeof tmp, o->global_shape, o->ndim);
  return snprintf(buf, cap, "%s", tmp);
}

void rs__chunk_name(const char *key, int nd, const int64_t *off, int has_flat, int64_t flat_start,
                    char *buf, size_t cap) {
  char tmp[2048];
  snprintf(tmp, sizeof tmp, "%s@", key);
  join_ints(tmp, sizeof tmp, off, nd);
  size_t l = strlen(tmp);
  if (has_flat) snprintf(tmp + l, sizeof tmp - l, "#%lld", (long long)flat_start);
  snprintf(buf, cap, "%s", tmp);
}

/* Hash streams distinct from the redistribute ones in core/values.c. */
enum { STREAM_CKPT = 0x636b7074, STREAM_INIT = 0x696e6974, STREAM_OBJ = 0x6f626a };

void rs_ckpt_value(uint64_t seed, const char *key, rs_dtype dt, int64_t idx, void *out) {
  uint64_t h = rs_hash3(seed ^ STREAM_CKPT, rs__str_hash(key), (uint64_t)idx);
  if (dt == RS_BOOL) h &= 1;
  memcpy(out, &h, (size_t)rs_dtype_size(dt));
}

void rs_ckpt_initial(int rank, const char *key, rs_dtype dt, int64_t idx, void *out) {
  uint64_t h = rs_hash3((uint64_t)rank ^ STREAM_INIT, rs__str_hash(key), (uint64_t)idx);
  if (dt == RS_BOOL) h &= 1;
  memcpy(out, &h, (size_t)rs_dtype_size(dt));
}

void rs_ckpt_object_value(uint64_t seed, const char *unique_key, uint8_t *out, int64_t *len) {
  uint64_t h = rs_hash3(seed ^ STREAM_OBJ, rs__str_hash(unique_key), 0);
  *len = (int64_t)(h % 24); /* empty objects too */
  for (int64_t i = 0; i < *len; ++i) out[i] = (uint8_t)(rs_hash3(h, STREAM_OBJ, (uint64_t)i) >> 7);
}

/* ---- state dicts ---- */
rs_status rs_sh_tensor_numel(const rs_sh_tensor *t, int64_t *numel, int64_t *nbytes) {
  int64_t n;
  if (!rs__numel_ok(t->local_shape, t->ndim, &n))
    return rs_fail(RS_ERR_OVERFLOW, "tensor '%s': local_shape element count overflows int64", t->key);
  if (t->has_flat) {
    if (t->flat_start < 0 || t->flat_stop < t->flat_start || t->flat_stop > n)
      return rs_fail(RS_ERR_INVALID, "tensor '%s': flattened_range [%lld, %lld) outside [0, %lld)",
                     t->key, (long long)t->flat_start, (long long)t->flat_stop, (long long)n);
    n = t->flat_stop - t->flat_start;
  }
  int64_t b;
  if (!rs__mul_ok(n, rs_dtype_size(t->dtype), &b))
    return rs_fail(RS_ERR_OVERFLOW, "tensor '%s': byte count overflows int64", t->key);
  if (numel) *numel = n;
  if (nbytes) *nbytes = b;
  return RS_OK;
}

rs_status rs_ckpt_world_init(rs_ckpt_world *w, int nranks) {
  memset(w, 0, sizeof *w);
  if (nranks < 1 || nranks > RS_MAX_RANKS)
    return rs_fail(RS_ERR_INVALID, "world: %d ranks (1..%d)", nranks, RS_MAX_RANKS);
  w->sd = calloc((size_t)nranks, sizeof *w->sd);
  if (!w->sd) return rs_fail(RS_ERR_NOMEM, "world: out of memory");
  w->n = nranks;
  for (int r = 0; r < nranks; ++r) w->sd[r].rank = r;
  return RS_OK;
}

static void kv_free(rs_kv *a, int n) {
  for (int i = 0; i < n; ++i) {
    free(a[i].key);
    free(a[i].val);
  }
  free(a);
}

void rs_state_dict_free(rs_state_dict *sd) {
  for (int i = 0; i < sd->nt; ++i) {
    free(sd->t[i].key);
    free(sd->t[i].data);
  }
  for (int i = 0; i < sd->no; ++i) {
    free(sd->o[i].key);
    free(sd->o[i].data);
  }
  for (int i = 0; i < sd->nf; ++i) {
    free(sd->f[i].src.key);
    free(sd->f[i].src.data);
  }
  free(sd->t);
  free(sd->o);
  free(sd->f);
  kv_free(sd->common, sd->ncommon);
  kv_free(sd->nonpersistent, sd->nnp);
  int rank = sd->rank;
  memset(sd, 0, sizeof *sd);
  sd->rank = rank;
}

void rs_ckpt_world_free(rs_ckpt_world *w) {
  for (int r = 0; r < w->n; ++r) rs_state_dict_free(&w->sd[r]);
  free(w->sd);
  memset(w, 0, sizeof *w);
}

/* page-aligned when a page or more, so that an O_DIRECT load can read into it in place */
static uint8_t *dup_bytes(const void *p, int64_t n) {
  void *v = NULL;
  if (n >= 4096 ? posix_memalign(&v, 4096, (size_t)n) != 0 : !(v = malloc(n > 0 ? (size_t)n : 1))) return NULL;
  uint8_t *d = v;
  if (d && n > 0) memcpy(d, p, (size_t)n);
  return d;
}

rs_status rs_sd_add_tensor(rs_state_dict *sd, const rs_sh_tensor *t) {
  if (!rs__grow((void **)&sd->t, sd->nt, &sd->capt, sizeof *sd->t))
    return rs_fail(RS_ERR_NOMEM, "state dict: out of memory");
  rs_sh_tensor *d = &sd->t[sd->nt];
  *d = *t;
  d->key = rs__strdup(t->key);
  d->data = dup_bytes(t->data, t->nbytes);
  if (!d->key || !d->data) {
    free(d->key);
    free(d->data);
    return rs_fail(RS_ERR_NOMEM, "state dict: out of memory");
  }
  sd->nt++;
  return RS_OK;
}

rs_status rs_sd_add_object(rs_state_dict *sd, const rs_sh_object *o) {
  if (!rs__grow((void **)&sd->o, sd->no, &sd->capo, sizeof *sd->o))
    return rs_fail(RS_ERR_NOMEM, "state dict: out of memory");
  rs_sh_object *d = &sd->o[sd->no];
  *d = *o;
  d->key = rs__strdup(o->key);
  d->data = dup_bytes(o->data, o->len);
  if (!d->key || !d->data) {
    free(d->key);
    free(d->data);
    return rs_fail(RS_ERR_NOMEM, "state dict: out of memory");
  }
  sd->no++;
  return RS_OK;
}

rs_status rs_sd_add_factory(rs_state_dict *sd, const rs_sh_factory *f) {
  if (!rs__grow((void **)&sd->f, sd->nf, &sd->capf, sizeof *sd->f))
    return rs_fail(RS_ERR_NOMEM, "state dict: out of memory");
  rs_sh_factory *d = &sd->f[sd->nf];
  *d = *f;
  d->src.key = rs__strdup(f->src.key);
  d->src.data = dup_bytes(f->src.data, f->src.nbytes);
  if (!d->src.key || !d->src.data) {
    free(d->src.key);
    free(d->src.data);
    return rs_fail(RS_ERR_NOMEM, "state dict: out of memory");
  }
  sd->nf++;
  return RS_OK;
}

rs_status rs_sd_add_kv(rs_kv **arr, int *n, int *cap, const char *key, const void *val, int64_t len) {
  if (!rs__grow((void **)arr, *n, cap, sizeof **arr)) return rs_fail(RS_ERR_NOMEM, "out of memory");
  rs_kv *d = &(*arr)[*n];
  d->key = rs__strdup(key);
  d->val = dup_bytes(val, len);
  d->len = len;
  if (!d->key || !d->val) {
    free(d->key);
    free(d->val);
    return rs_fail(RS_ERR_NOMEM, "out of memory");
  }
  (*n)++;
  return RS_OK;
}

/* ---- factories ---- */
/* Copy the part of a row-major tensor of `shape` whose index on `dim` lies in [lo, lo+len) into
 * (or out of) a packed buffer. */
static void glu_copy(const rs_sh_tensor *src, int dim, int64_t lo, int64_t len, uint8_t *packed,
                     int to_packed) {
  int es = rs_dtype_size(src->dtype);
  int64_t outer = 1, inner = es;
  for (int d = 0; d < dim; ++d) outer *= src->local_shape[d];
  for (int d = dim + 1; d < src->ndim; ++d) inner *= src->local_shape[d];
  int64_t full = src->local_shape[dim];
  for (int64_t o = 0; o < outer; ++o) {
    uint8_t *a = src->data + (o * full + lo) * inner;
    uint8_t *b = packed + o * len * inner;
    if (len * inner == 0) continue;
    if (to_packed) memcpy(b, a, (size_t)(len * inner));
    else memcpy(a, b, (size_t)(len * inner));
  }
}

rs_status rs_sd_apply_factories(rs_state_dict *sd) {
  for (int i = 0; i < sd->nf; ++i) {
    const rs_sh_factory *f = &sd->f[i];
    rs_sh_tensor e = f->src;
    e.data = NULL;
    e.loaded = 0;
    e.factory = i + 1;
    int es = rs_dtype_size(e.dtype);
    if (f->kind == RS_FACTORY_GLU) {
      int d = f->glu_dim;
      if (d < 0 || d >= e.ndim || e.local_shape[d] % 2 || e.global_shape[d] % 2 || e.has_flat)
        return rs_fail(RS_ERR_INVALID, "factory '%s': GLU dim %d must be an even, unflattened dim",
                       e.key, d);
      int64_t half = e.local_shape[d] / 2, ghalf = e.global_shape[d] / 2;
      for (int part = 0; part < 2; ++part) {
        rs_sh_tensor p = e;
        p.local_shape[d] = half;
        p.global_offset[d] = f->src.global_offset[d] + part * ghalf;
        p.has_axis_frag = 0;
        int64_t nb;
        rs_status st = rs_sh_tensor_numel(&p, NULL, &nb);
        if (st) return st;
        uint8_t *buf = malloc(nb ? (size_t)nb : 1);
        if (!buf) return rs_fail(RS_ERR_NOMEM, "factory: out of memory");
        glu_copy(&f->src, d, part * half, half, buf, 1);
        p.data = buf;
        p.nbytes = nb;
        st = rs_sd_add_tensor(sd, &p);
        free(buf);
        if (st) return st;
      }
    } else {
      int64_t n;
      rs_status st = rs_sh_tensor_numel(&e, &n, NULL);
      if (st) return st;
      if (e.has_flat || f->flat_start < 0 || f->flat_stop < f->flat_start || f->flat_stop > n)
        return rs_fail(RS_ERR_INVALID, "factory '%s': flat range [%lld, %lld) outside [0, %lld)",
                       e.key, (long long)f->flat_start, (long long)f->flat_stop, (long long)n);
      e.has_flat = 1;
      e.flat_start = f->flat_start;
      e.flat_stop = f->flat_stop;
      e.has_axis_frag = 0;
      e.data = f->src.data + f->flat_start * es;
      e.nbytes = (f->flat_stop - f->flat_start) * es;
      st = rs_sd_add_tensor(sd, &e);
      if (st) return st;
    }
  }
  return RS_OK;
}

rs_status rs_sd_apply_factory_merges(rs_state_dict *sd) {
  int keep = 0;
  for (int i = 0; i < sd->nt; ++i) {
    rs_sh_tensor *t = &sd->t[i];
    if (!t->factory) {
      sd->t[keep++] = *t;
      continue;
    }
    rs_sh_factory *f = &sd->f[t->factory - 1];
    int es = rs_dtype_size(t->dtype);
    if (t->loaded) {
      if (f->kind == RS_FACTORY_GLU) {
        int d = f->glu_dim;
        int part = t->global_offset[d] != f->src.global_offset[d];
        /* RS_MUTANT 307: the merge puts both halves of a fused GLU tensor into the W half */
        if (RS_MUTANT(307)) part = 0;
        glu_copy(&f->src, d, part * t->local_shape[d], t->local_shape[d], t->data, 0);
      } else if (t->nbytes) {
        memcpy(f->src.data + f->flat_start * es, t->data, (size_t)t->nbytes);
      }
    }
    free(t->key);
    free(t->data);
  }
  sd->nt = keep;
  return RS_OK;
}
