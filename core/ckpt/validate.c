/* validate.c - SPEC 11 validation before save, over every rank's metadata: one dtype, global shape
 * and kind per key; boxes inside the global shape; prepended axes of local size 1; main replicas
 * of a tensor tiling it exactly (flat fragments tiling their box's flattening); main replicas of an
 * object covering every shard index once. Errors name the key, the ranks and the region. The same
 * tiling routine checks the chunk lists read back from metadata.json. */
#include <stdlib.h>
#include <string.h>
#include "core/checked.h"
#include "core/mutant.h"
#include "core/ckpt/internal.h"

typedef struct ref {
  int rank;
  const rs_sh_tensor *t;
} ref;

/* A piece of a tiling: a box, optionally one flat fragment of it, and who holds it. */
typedef struct piece {
  int nd;
  const int64_t *off, *size;
  int has_flat;
  int64_t fs, fe;
  int who; /* rank (validation) or chunk index (metadata) */
} piece;

static int cmp_box_then_flat(const void *a, const void *b) {
  const piece *x = a, *y = b;
  for (int d = 0; d < x->nd; ++d) {
    if (x->off[d] != y->off[d]) return x->off[d] < y->off[d] ? -1 : 1;
    if (x->size[d] != y->size[d]) return x->size[d] < y->size[d] ? -1 : 1;
  }
  int64_t xs = x->has_flat ? x->fs : 0, ys = y->has_flat ? y->fs : 0;
  return xs < ys ? -1 : xs > ys;
}

static int same_box(const piece *a, const piece *b) {
  for (int d = 0; d < a->nd; ++d)
    if (a->off[d] != b->off[d] || a->size[d] != b->size[d]) return 0;
  return 1;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Some cell of the global shape that no box covers (coordinate compression). 0 if not found in
 * a bounded search. */
static int find_gap(int nd, const int64_t *shape, const piece *p, const int *box_first, int nb,
                    int64_t *goff, int64_t *gsz) {
  int64_t *cuts[RS_MAX_DIMS];
  int ncut[RS_MAX_DIMS];
  int ok = 1;
  for (int d = 0; d < nd; ++d) {
    cuts[d] = malloc(sizeof(int64_t) * (size_t)(2 * nb + 2));
    if (!cuts[d]) ok = 0;
  }
  if (!ok) {
    for (int d = 0; d < nd; ++d) free(cuts[d]);
    return 0;
  }
  for (int d = 0; d < nd; ++d) {
    int k = 0;
    cuts[d][k++] = 0;
    cuts[d][k++] = shape[d];
    for (int i = 0; i < nb; ++i) {
      cuts[d][k++] = p[box_first[i]].off[d];
      cuts[d][k++] = p[box_first[i]].off[d] + p[box_first[i]].size[d];
    }
    qsort(cuts[d], (size_t)k, sizeof(int64_t), cmp_i64);
    int u = 0;
    for (int i = 0; i < k; ++i)
      if (!u || cuts[d][i] != cuts[d][u - 1]) cuts[d][u++] = cuts[d][i];
    ncut[d] = u;
  }
  int64_t ci[RS_MAX_DIMS] = {0}, zero[RS_MAX_DIMS] = {0}, cnt[RS_MAX_DIMS];
  for (int d = 0; d < nd; ++d) cnt[d] = ncut[d] - 1;
  int found = 0;
  long budget = 1000000;
  int nonempty = 1;
  for (int d = 0; d < nd; ++d) nonempty &= cnt[d] > 0;
  while (nonempty && budget-- > 0) {
    int covered = 0;
    for (int i = 0; i < nb && !covered; ++i) {
      const piece *b = &p[box_first[i]];
      int in = 1;
      for (int d = 0; d < nd && in; ++d)
        in = cuts[d][ci[d]] >= b->off[d] && cuts[d][ci[d]] < b->off[d] + b->size[d];
      covered = in;
    }
    if (!covered) {
      for (int d = 0; d < nd; ++d) {
        goff[d] = cuts[d][ci[d]];
        gsz[d] = cuts[d][ci[d] + 1] - cuts[d][ci[d]];
      }
      found = 1;
      break;
    }
    if (!rs__box_next(nd, zero, cnt, ci)) break;
  }
  for (int d = 0; d < nd; ++d) free(cuts[d]);
  return found;
}

/* The core tiling check over pieces (all main replicas / all chunks of one key). `what` is
 * "ranks" or "chunks" for the messages. */
static rs_status check_tiling(const char *key, int nd, const int64_t *shape, piece *p, int n,
                              const char *what) {
  char reg[256];
  int64_t total;
  if (!rs__numel_ok(shape, nd, &total))
    return rs_fail(RS_ERR_OVERFLOW, "key '%s': global shape element count overflows int64", key);
  /* drop empty pieces */
  int m = 0;
  for (int i = 0; i < n; ++i) {
    int64_t ne = 0;
    rs__numel_ok(p[i].size, nd, &ne);
    if (ne == 0 || (p[i].has_flat && p[i].fe == p[i].fs)) continue;
    p[m++] = p[i];
  }
  n = m;
  qsort(p, (size_t)n, sizeof *p, cmp_box_then_flat);
  int *box_first = malloc(sizeof(int) * (size_t)(n + 1));
  if (!box_first) return rs_fail(RS_ERR_NOMEM, "out of memory");
  int nb = 0;
  rs_status st = RS_OK;
  /* fragments of one box tile [0, numel(box)) */
  for (int i = 0; i < n && !st;) {
    int j = i;
    while (j < n && same_box(&p[i], &p[j])) j++;
    int64_t ne = 0;
    rs__numel_ok(p[i].size, nd, &ne);
    int64_t at = 0;
    rs__region_text(nd, p[i].off, p[i].size, reg, sizeof reg);
    for (int k = i; k < j && !st; ++k) {
      int64_t s = p[k].has_flat ? p[k].fs : 0, e = p[k].has_flat ? p[k].fe : ne;
      if (s < at) {
        st = rs_fail(RS_ERR_INVALID, "key '%s': %s %d and %d overlap in region %s flat [%lld:%lld)",
                     key, what, p[k - 1].who, p[k].who, reg, (long long)s,
                     (long long)(at < e ? at : e));
      } else if (s > at) {
        st = rs_fail(RS_ERR_INVALID, "key '%s': gap: region %s flat [%lld:%lld) not covered by any %s",
                     key, reg, (long long)at, (long long)s,
                     what[0] == 'r' ? "main replica" : "chunk");
      }
      at = e;
    }
    if (!st && at != ne)
      st = rs_fail(RS_ERR_INVALID, "key '%s': gap: region %s flat [%lld:%lld) not covered by any %s",
                   key, reg, (long long)at, (long long)ne, what[0] == 'r' ? "main replica" : "chunk");
    box_first[nb++] = i;
    i = j;
  }
  /* distinct boxes are disjoint and their sizes add up to the tensor */
  int64_t covered = 0;
  for (int a = 0; a < nb && !st; ++a) {
    const piece *x = &p[box_first[a]];
    int64_t ne = 0;
    rs__numel_ok(x->size, nd, &ne);
    covered += ne;
    /* boxes are sorted by their first offset: once one starts at or past x's end on dim 0, no
     * later one meets x (a sweep; the pairs it skips never overlap, so the first overlap found
     * is the one a full pairwise scan finds) */
    for (int b = a + 1; b < nb && !st; ++b) {
      const piece *y = &p[box_first[b]];
      if (nd > 0 && y->off[0] >= x->off[0] + x->size[0]) break;
      int64_t io[RS_MAX_DIMS], is[RS_MAX_DIMS];
      if (rs__box_intersect(nd, x->off, x->size, y->off, y->size, io, is)) {
        rs__region_text(nd, io, is, reg, sizeof reg);
        st = rs_fail(RS_ERR_INVALID, "key '%s': %s %d and %d overlap in region %s", key, what, x->who,
                     y->who, reg);
      }
    }
  }
  if (!st && covered != total) {
    int64_t go[RS_MAX_DIMS], gs[RS_MAX_DIMS];
    if (find_gap(nd, shape, p, box_first, nb, go, gs)) {
      rs__region_text(nd, go, gs, reg, sizeof reg);
      st = rs_fail(RS_ERR_INVALID, "key '%s': gap: region %s not covered by any %s", key, reg,
                   what[0] == 'r' ? "main replica" : "chunk");
    } else {
      st = rs_fail(RS_ERR_INVALID, "key '%s': gap: %lld of %lld elements not covered by any %s", key,
                   (long long)(total - covered), (long long)total,
                   what[0] == 'r' ? "main replica" : "chunk");
    }
  }
  free(box_first);
  return st;
}

rs_status rs__md_check_tiling(const rs__md_tensor *t) {
  piece *p = malloc(sizeof *p * (size_t)(t->nc + 1));
  if (!p) return rs_fail(RS_ERR_NOMEM, "out of memory");
  for (int i = 0; i < t->nc; ++i) {
    const rs__chunk *c = &t->c[i];
    p[i] = (piece){t->ndim, c->off, c->size, c->has_flat, c->flat_start, c->flat_stop, i};
  }
  rs_status st = check_tiling(t->key, t->ndim, t->shape, p, t->nc, "chunks");
  free(p);
  return st;
}

/* ---- per-entry checks ---- */
/* What must hold before entries of one key can be compared with each other. */
static rs_status check_entry_basic(int rank, const rs_sh_tensor *t) {
  if (!rs__key_ok(t->key)) return rs_fail(RS_ERR_INVALID, "rank %d: a tensor key is empty or not printable", rank);
  if ((int)t->dtype < 0 || t->dtype >= RS_DTYPE_COUNT)
    return rs_fail(RS_ERR_INVALID, "key '%s' rank %d: invalid dtype", t->key, rank);
  if (t->ndim < 0 || t->ndim > RS_MAX_DIMS)
    return rs_fail(RS_ERR_INVALID, "key '%s' rank %d: %d dims", t->key, rank, t->ndim);
  return RS_OK;
}

/* The rest, run after the key's ranks agree on dtype and global shape (so that a disagreement is
 * reported as one, not as a region that no longer fits one rank's shape). */
static rs_status check_entry(int rank, const rs_sh_tensor *t) {
  char reg[256];
  rs__region_text(t->ndim, t->global_offset, t->local_shape, reg, sizeof reg);
  for (int d = 0; d < t->ndim; ++d) {
    int64_t end;
    if (t->global_shape[d] < 0 || t->local_shape[d] < 0 || t->global_offset[d] < 0 ||
        !rs__add_ok(t->global_offset[d], t->local_shape[d], &end) || end > t->global_shape[d])
      return rs_fail(RS_ERR_INVALID, "key '%s' rank %d: region %s outside the global shape (dim %d of size %lld)",
                     t->key, rank, reg, d, (long long)t->global_shape[d]);
  }
  if (t->prepend_axis_num < 0 || t->prepend_axis_num > t->ndim)
    return rs_fail(RS_ERR_INVALID, "key '%s' rank %d: prepend_axis_num %d for %d dims", t->key, rank,
                   t->prepend_axis_num, t->ndim);
  for (int d = 0; d < t->prepend_axis_num; ++d)
    if (t->local_shape[d] != 1)
      return rs_fail(RS_ERR_INVALID, "key '%s' rank %d: prepended axis %d has local size %lld (must be 1)",
                     t->key, rank, d, (long long)t->local_shape[d]);
  if (t->has_axis_frag)
    for (int d = 0; d < t->ndim; ++d) {
      int64_t fr = t->axis_frag[d];
      if (fr < 1 || t->global_shape[d] % fr ||
          (t->local_shape[d] && t->global_offset[d] % t->local_shape[d]))
        return rs_fail(RS_ERR_INVALID, "key '%s' rank %d: axis_fragmentations[%d] = %lld does not match region %s",
                       t->key, rank, d, (long long)fr, reg);
    }
  int64_t nb;
  rs_status st = rs_sh_tensor_numel(t, NULL, &nb);
  if (st) return st;
  if (nb != t->nbytes)
    return rs_fail(RS_ERR_INVALID, "key '%s' rank %d: data holds %lld bytes, region %s needs %lld", t->key,
                   rank, (long long)t->nbytes, reg, (long long)nb);
  if (t->replica.n < 1 || t->replica.n > RS_MAX_MESH_DIMS + 1)
    return rs_fail(RS_ERR_INVALID, "key '%s' rank %d: bad replica_id", t->key, rank);
  return RS_OK;
}

static int cmp_ref(const void *a, const void *b) {
  const ref *x = a, *y = b;
  int c = strcmp(x->t->key, y->t->key);
  return c ? c : (x->rank - y->rank);
}

typedef struct oref {
  int rank;
  const rs_sh_object *o;
} oref;

static int cmp_oref(const void *a, const void *b) {
  const oref *x = a, *y = b;
  int c = strcmp(x->o->key, y->o->key);
  return c ? c : (x->rank - y->rank);
}

static rs_status validate_tensors(const rs_ckpt_world *w, ref *r, int n) {
  for (int i = 0; i < n; ++i) {
    rs_status st = check_entry_basic(r[i].rank, r[i].t);
    if (st) return st;
  }
  qsort(r, (size_t)n, sizeof *r, cmp_ref);
  piece *p = malloc(sizeof *p * (size_t)(n + 1));
  if (!p) return rs_fail(RS_ERR_NOMEM, "out of memory");
  rs_status st = RS_OK;
  for (int i = 0; i < n && !st;) {
    int j = i, np = 0;
    const rs_sh_tensor *a = r[i].t;
    for (; j < n && strcmp(r[j].t->key, a->key) == 0 && !st; ++j) {
      const rs_sh_tensor *b = r[j].t;
      /* RS_MUTANT 306: a dtype disagreement between same-size dtypes (F32 vs I32) passes */
      if (b->dtype != a->dtype && !(RS_MUTANT(306) && rs_dtype_size(b->dtype) == rs_dtype_size(a->dtype)))
        st = rs_fail(RS_ERR_INVALID, "key '%s': dtype disagreement: rank %d has %s, rank %d has %s", a->key,
                     r[i].rank, rs_dtype_name(a->dtype), r[j].rank, rs_dtype_name(b->dtype));
      else if (b->ndim != a->ndim ||
               memcmp(b->global_shape, a->global_shape, sizeof(int64_t) * (size_t)a->ndim) != 0) {
        char sa[200], sb[200];
        int64_t z[RS_MAX_DIMS] = {0};
        rs__region_text(a->ndim, z, a->global_shape, sa, sizeof sa);
        rs__region_text(b->ndim, z, b->global_shape, sb, sizeof sb);
        st = rs_fail(RS_ERR_INVALID, "key '%s': global shape disagreement: rank %d has %s, rank %d has %s",
                     a->key, r[i].rank, sa, r[j].rank, sb);
      } else if (rs_replica_is_main(&b->replica)) {
        p[np++] = (piece){b->ndim, b->global_offset, b->local_shape, b->has_flat, b->flat_start,
                          b->flat_stop, r[j].rank};
      }
    }
    for (int k = i; k < j && !st; ++k) st = check_entry(r[k].rank, r[k].t);
    for (int k = 0; k < w->n && !st; ++k)
      for (int q = 0; q < w->sd[k].no; ++q)
        if (strcmp(w->sd[k].o[q].key, a->key) == 0)
          st = rs_fail(RS_ERR_INVALID, "key '%s': kind disagreement: a tensor on rank %d, an object on rank %d",
                       a->key, r[i].rank, k);
    if (!st) st = check_tiling(a->key, a->ndim, a->global_shape, p, np, "ranks");
    i = j;
  }
  free(p);
  return st;
}

static rs_status validate_objects(oref *r, int n) {
  qsort(r, (size_t)n, sizeof *r, cmp_oref);
  rs_status st = RS_OK;
  for (int i = 0; i < n && !st;) {
    const rs_sh_object *a = r[i].o;
    int j = i;
    int64_t total = 1;
    if (!rs__key_ok(a->key)) return rs_fail(RS_ERR_INVALID, "rank %d: an object key is empty or not printable", r[i].rank);
    if (a->ndim < 0 || a->ndim > RS_MAX_DIMS || !rs__numel_ok(a->global_shape, a->ndim, &total) ||
        total > (1 << 24))
      return rs_fail(RS_ERR_INVALID, "object '%s' rank %d: bad global shape", a->key, r[i].rank);
    int *owner = malloc(sizeof(int) * (size_t)(total + 1));
    if (!owner) return rs_fail(RS_ERR_NOMEM, "out of memory");
    for (int64_t k = 0; k < total; ++k) owner[k] = -1;
    for (; j < n && strcmp(r[j].o->key, a->key) == 0 && !st; ++j) {
      const rs_sh_object *b = r[j].o;
      char reg[200];
      if (b->ndim != a->ndim ||
          memcmp(b->global_shape, a->global_shape, sizeof(int64_t) * (size_t)a->ndim) != 0) {
        st = rs_fail(RS_ERR_INVALID, "object '%s': global shape disagreement between ranks %d and %d", a->key,
                     r[i].rank, r[j].rank);
        break;
      }
      for (int d = 0; d < b->ndim; ++d)
        if (b->global_offset[d] < 0 || b->global_offset[d] >= b->global_shape[d]) {
          rs__region_text(b->ndim, b->global_offset, b->global_shape, reg, sizeof reg);
          st = rs_fail(RS_ERR_INVALID, "object '%s' rank %d: shard offset outside the shard grid %s", a->key,
                       r[j].rank, reg);
        }
      if (st) break;
      if (!rs_replica_is_main(&b->replica)) continue;
      int64_t f = rs__flat_index(b->ndim, b->global_shape, b->global_offset);
      if (owner[f] >= 0) {
        char uk[2048];
        rs_sh_object_unique_key(b, uk, sizeof uk);
        st = rs_fail(RS_ERR_INVALID, "object '%s': overlap: ranks %d and %d both hold main replica %s", a->key,
                     owner[f], r[j].rank, uk);
      }
      owner[f] = r[j].rank;
    }
    for (int64_t k = 0; k < total && !st; ++k)
      if (owner[k] < 0) {
        rs_sh_object g = *a;
        rs__unflatten(a->ndim, a->global_shape, k, g.global_offset);
        char uk[2048];
        rs_sh_object_unique_key(&g, uk, sizeof uk);
        st = rs_fail(RS_ERR_INVALID, "object '%s': gap: shard %s not held by any main replica", a->key, uk);
      }
    free(owner);
    i = j;
  }
  return st;
}

rs_status rs_ckpt_validate(const rs_ckpt_world *w) {
  int nt = 0, no = 0;
  for (int r = 0; r < w->n; ++r) {
    nt += w->sd[r].nt;
    no += w->sd[r].no;
  }
  ref *tr = malloc(sizeof *tr * (size_t)(nt + 1));
  oref *orr = malloc(sizeof *orr * (size_t)(no + 1));
  if (!tr || !orr) {
    free(tr);
    free(orr);
    return rs_fail(RS_ERR_NOMEM, "out of memory");
  }
  int k = 0, q = 0;
  for (int r = 0; r < w->n; ++r) {
    for (int i = 0; i < w->sd[r].nt; ++i) tr[k++] = (ref){r, &w->sd[r].t[i]};
    for (int i = 0; i < w->sd[r].no; ++i) orr[q++] = (oref){r, &w->sd[r].o[i]};
  }
  rs_status st = validate_tensors(w, tr, k);
  if (!st) st = validate_objects(orr, q);
  /* tensor keys and objects' unique keys are one namespace: strict reports and export (one
   * safetensors entry per name) name both. tr is sorted by key now.
   * RS_MUTANT 608: a tensor key equal to an object's unique key passes */
  for (int i = 0; i < q && !st && !RS_MUTANT(608); ++i) {
    char uk[2200];
    rs_sh_object_unique_key(orr[i].o, uk, sizeof uk);
    int lo = 0, hi = k;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (strcmp(tr[mid].t->key, uk) < 0) lo = mid + 1;
      else hi = mid;
    }
    if (lo < k && strcmp(tr[lo].t->key, uk) == 0)
      st = rs_fail(RS_ERR_INVALID, "key '%s': a tensor key (rank %d) equal to the unique key of object '%s' (rank %d): "
                   "tensor keys and object unique keys share one namespace", uk, tr[lo].rank, orr[i].o->key, orr[i].rank);
  }
  free(tr);
  free(orr);
  return st;
}
