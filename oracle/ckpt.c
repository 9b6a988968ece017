/* ckpt.c - the checkpoint oracle: for a load spec, every rank's expected local bytes after load
 * (and factory merges), straight from the SPEC 8 values of what was saved - no file, no planner,
 * no chunk: each requested element is either inside the saved tensor (its value) or not (the
 * destination's prior content stays). */
#include <stdlib.h>
#include <string.h>
#include "core/ckpt/internal.h"

static const rs_spec_tensor *saved_tensor(const rs_state_spec *s, const char *key) {
  for (int i = 0; i < s->nt; ++i)
    if (strcmp(s->t[i].key, key) == 0) return &s->t[i];
  return NULL;
}

/* The saved object with this unique key, or NULL. */
static const rs_spec_object *saved_object(const rs_state_spec *s, const char *ukey) {
  for (int i = 0; i < s->no; ++i) {
    const rs_spec_object *o = &s->o[i];
    size_t kl = strlen(o->key);
    if (strncmp(ukey, o->key, kl) != 0 || strncmp(ukey + kl, "/shard_", 7) != 0) continue;
    /* enumerate its shard grid */
    rs_sh_object g;
    memset(&g, 0, sizeof g);
    g.key = o->key;
    g.ndim = o->ndims;
    int64_t zero[RS_MAX_DIMS] = {0};
    for (int d = 0; d < o->ndims; ++d) g.global_shape[d] = o->mesh.size[o->dims[d]];
    char uk[2048];
    do {
      rs_sh_object_unique_key(&g, uk, sizeof uk);
      if (strcmp(uk, ukey) == 0) return o;
    } while (o->ndims > 0 && rs__box_next(o->ndims, zero, g.global_shape, g.global_offset));
  }
  return NULL;
}

/* Overwrites the elements of `t` (data indexed from `first` in the flattening of local_shape,
 * `n` elements) that lie inside the saved tensor with their saved values. glu_dim >= 0: t is a
 * fused [W; V] local tensor. only_lo/only_hi: local flat range that the load fills (FLAT). */
static void expect_tensor(const rs_sh_tensor *t, const rs_spec_tensor *sv, int glu_dim, int64_t first,
                          int64_t only_lo, int64_t only_hi) {
  int es = rs_dtype_size(t->dtype);
  int64_t n = t->nbytes / es, idx[RS_MAX_DIMS];
  for (int64_t i = 0; i < n; ++i) {
    int64_t li = first + i;
    if (li < only_lo || li >= only_hi) continue;
    rs__unflatten(t->ndim, t->local_shape, li, idx);
    if (glu_dim >= 0) {
      int64_t half = t->local_shape[glu_dim] / 2;
      if (idx[glu_dim] >= half) idx[glu_dim] += t->global_shape[glu_dim] / 2 - half;
    }
    int in = 1;
    for (int d = 0; d < t->ndim; ++d) {
      idx[d] += t->global_offset[d];
      in &= idx[d] < sv->t.shape[d];
    }
    if (!in) continue;
    rs_ckpt_value(sv->seed, t->key, t->dtype, rs__flat_index(t->ndim, sv->t.shape, idx), t->data + i * es);
  }
}

static int loadable(const rs_sh_tensor *t, const rs_spec_tensor *sv) {
  return sv && sv->dtype == t->dtype && sv->t.ndim == t->ndim;
}

rs_status rs_oracle_ckpt_expected(const rs_state_spec *saved, const rs_state_spec *load, rs_ckpt_world *expect) {
  rs_status st = rs_state_spec_build(load, RS_FILL_INITIAL, expect);
  if (st) return st;
  for (int r = 0; r < expect->n; ++r) {
    rs_state_dict *sd = &expect->sd[r];
    for (int i = 0; i < sd->nt; ++i) {
      const rs_spec_tensor *sv = saved_tensor(saved, sd->t[i].key);
      if (loadable(&sd->t[i], sv))
        expect_tensor(&sd->t[i], sv, -1, sd->t[i].has_flat ? sd->t[i].flat_start : 0, 0, INT64_MAX);
    }
    for (int i = 0; i < sd->nf; ++i) {
      rs_sh_factory *f = &sd->f[i];
      const rs_spec_tensor *sv = saved_tensor(saved, f->src.key);
      if (!loadable(&f->src, sv)) continue;
      if (f->kind == RS_FACTORY_GLU) expect_tensor(&f->src, sv, f->glu_dim, 0, 0, INT64_MAX);
      else expect_tensor(&f->src, sv, -1, 0, f->flat_start, f->flat_stop);
    }
    for (int i = 0; i < sd->no; ++i) {
      char uk[2048];
      rs_sh_object_unique_key(&sd->o[i], uk, sizeof uk);
      const rs_spec_object *so = saved_object(saved, uk);
      if (!so) continue;
      uint8_t buf[64];
      int64_t len;
      rs_ckpt_object_value(so->seed, uk, buf, &len);
      free(sd->o[i].data);
      sd->o[i].data = malloc(len ? (size_t)len : 1);
      if (!sd->o[i].data) return rs_fail(RS_ERR_NOMEM, "out of memory");
      memcpy(sd->o[i].data, buf, (size_t)len);
      sd->o[i].len = len;
    }
    for (int i = 0; i < saved->ncommon && !st; ++i)
      st = rs_sd_add_kv(&sd->common, &sd->ncommon, &sd->capc, saved->common[i].key, saved->common[i].val,
                        saved->common[i].len);
  }
  return st;
}

static rs_status diff_bytes(int rank, const char *what, const char *key, rs_dtype dt, const uint8_t *a,
                            const uint8_t *b, int64_t nbytes, char *msg, size_t cap) {
  if (nbytes == 0 || memcmp(a, b, (size_t)nbytes) == 0) return RS_OK;
  int es = rs_dtype_size(dt);
  for (int64_t i = 0; i < nbytes / es; ++i)
    if (memcmp(a + i * es, b + i * es, (size_t)es) != 0) {
      uint64_t x = 0, y = 0;
      memcpy(&x, a + i * es, (size_t)es);
      memcpy(&y, b + i * es, (size_t)es);
      snprintf(msg, cap, "rank %d %s '%s' local element %lld: expected 0x%llx, got 0x%llx", rank, what, key,
               (long long)i, (unsigned long long)x, (unsigned long long)y);
      return RS_ERR_MISMATCH;
    }
  return RS_OK;
}

static int kv_equal(const rs_kv *a, int na, const rs_kv *b, int nb) {
  if (na != nb) return 0;
  for (int i = 0; i < na; ++i) {
    int found = 0;
    for (int j = 0; j < nb && !found; ++j)
      found = strcmp(a[i].key, b[j].key) == 0 && a[i].len == b[j].len && memcmp(a[i].val, b[j].val, (size_t)a[i].len) == 0;
    if (!found) return 0;
  }
  return 1;
}

rs_status rs_oracle_ckpt_compare(const rs_ckpt_world *e, const rs_ckpt_world *g, char *msg, size_t cap) {
  if (e->n != g->n) {
    snprintf(msg, cap, "%d ranks expected, %d loaded", e->n, g->n);
    return RS_ERR_MISMATCH;
  }
  for (int r = 0; r < e->n; ++r) {
    const rs_state_dict *a = &e->sd[r], *b = &g->sd[r];
    if (a->nt != b->nt || a->no != b->no || a->nf != b->nf) {
      snprintf(msg, cap, "rank %d: %d/%d/%d tensors/objects/factories expected, %d/%d/%d present", r, a->nt, a->no,
               a->nf, b->nt, b->no, b->nf);
      return RS_ERR_MISMATCH;
    }
    for (int i = 0; i < a->nt; ++i) {
      if (a->t[i].nbytes != b->t[i].nbytes || strcmp(a->t[i].key, b->t[i].key) != 0) {
        snprintf(msg, cap, "rank %d tensor '%s': entry shape differs", r, a->t[i].key);
        return RS_ERR_MISMATCH;
      }
      if (diff_bytes(r, "tensor", a->t[i].key, a->t[i].dtype, a->t[i].data, b->t[i].data, a->t[i].nbytes, msg, cap))
        return RS_ERR_MISMATCH;
    }
    for (int i = 0; i < a->nf; ++i)
      if (diff_bytes(r, "factory tensor", a->f[i].src.key, a->f[i].src.dtype, a->f[i].src.data, b->f[i].src.data,
                     a->f[i].src.nbytes, msg, cap))
        return RS_ERR_MISMATCH;
    for (int i = 0; i < a->no; ++i)
      if (a->o[i].len != b->o[i].len || (a->o[i].len && memcmp(a->o[i].data, b->o[i].data, (size_t)a->o[i].len))) {
        snprintf(msg, cap, "rank %d object '%s': bytes differ (%lld expected, %lld loaded)", r, a->o[i].key,
                 (long long)a->o[i].len, (long long)b->o[i].len);
        return RS_ERR_MISMATCH;
      }
    if (!kv_equal(a->common, a->ncommon, b->common, b->ncommon)) {
      snprintf(msg, cap, "rank %d: common entries differ", r);
      return RS_ERR_MISMATCH;
    }
    if (!kv_equal(a->nonpersistent, a->nnp, b->nonpersistent, b->nnp)) {
      snprintf(msg, cap, "rank %d: a LocalNonpersistentObject changed", r);
      return RS_ERR_MISMATCH;
    }
  }
  return RS_OK;
}
