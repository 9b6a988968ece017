/* ckpt_gen.c - checkpoint cases from the choice stream, one generator per kind of thing: a layout
 * (mesh, rank list, placements, shard order), a tensor (key, dtype, shape, seed), its sharding
 * extras (GLU factory, flattening over a DP dim, flat factory, prepended axes), an object, and the
 * save/load pair. 0 is always the simplest draw, so shrinking leads to small cases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/ckpt/internal.h"
#include "props/ckpt.h"

#define PICK(ch, tbl) (tbl)[rs_draw((ch), sizeof(tbl) / sizeof((tbl)[0]))]

static const rs_dtype DTYPES[] = {RS_F32, RS_F64, RS_I32, RS_BF16, RS_F16,     RS_I64,
                                  RS_I16, RS_I8,  RS_U8,  RS_BOOL, RS_F8_E4M3, RS_F8_E5M2};
static const int TND[] = {1, 1, 2, 2, 0, 3, 4};
static const int DIMSZ[] = {2, 1, 3, 4, 0, 5, 6, 8, 7};
static const int MND[] = {1, 1, 2, 2, 3, 4};
static const int MSZ[] = {1, 2, 2, 3, 4};

void rs_ckpt_case_free(rs_ckpt_case *c) {
  rs_state_spec_free(&c->a);
  rs_state_spec_free(&c->a2);
  rs_state_spec_free(&c->b);
}

/* Mesh sizes shaved to at most `world` ranks, ranks default, permuted or a subset of the world. */
static rs_status gen_mesh(rs_choices *ch, int world, int nd, int64_t *size, rs_mesh *m) {
  int64_t prod = 1;
  for (int i = 0; i < nd; ++i) prod *= size[i];
  while (prod > world) {
    int big = 0;
    for (int i = 1; i < nd; ++i)
      if (size[i] >= size[big]) big = i;
    prod = prod / size[big] * (size[big] - 1);
    size[big]--;
  }
  int32_t pool[RS_MAX_RANKS];
  for (int i = 0; i < world; ++i) pool[i] = i;
  int mode = (int)rs_draw(ch, 4);
  if (mode >= 2)
    for (int i = 0; i < (int)prod; ++i) {
      int j = i + (int)rs_draw(ch, (uint64_t)(world - i));
      int32_t t = pool[i];
      pool[i] = pool[j];
      pool[j] = t;
    }
  return rs_mesh_init(m, nd, size, pool);
}

/* A layout of tensor `lt` on a mesh within `world` ranks (no Partial). */
static rs_status gen_layout(rs_choices *ch, int world, const rs_tensor *lt, rs_mesh *m, rs_sharding *s) {
  int nd = PICK(ch, MND);
  int64_t size[RS_MAX_MESH_DIMS];
  memset(s, 0, sizeof *s);
  s->mesh_ndim = nd;
  for (int i = 0; i < nd; ++i) {
    size[i] = PICK(ch, MSZ);
    int k = (int)rs_draw(ch, 3);
    s->p[i] = k && lt->ndim ? rs_pl_shard((int)rs_draw(ch, (uint64_t)lt->ndim)) : rs_pl_replicate();
  }
  rs_status st = gen_mesh(ch, world, nd, size, m);
  if (st) return st;
  if ((st = rs_sharding_set_default_order(s, lt->ndim))) return st;
  for (int d = 0; d < lt->ndim; ++d) /* a non-default shard order: rotate the list */
    if (s->order_len[d] > 1 && rs_draw(ch, 2)) {
      int8_t first = s->order[d][0];
      memmove(&s->order[d][0], &s->order[d][1], (size_t)(s->order_len[d] - 1));
      s->order[d][s->order_len[d] - 1] = first;
    }
  rs_tensor t = *lt;
  return rs_sharding_validate(s, m, &t);
}

/* Key, dtype, shape (at most 256 elements), seed. */
static rs_status gen_tensor(rs_choices *ch, const char *key, rs_spec_tensor *t) {
  memset(t, 0, sizeof *t);
  t->key = rs__strdup(key);
  if (!t->key) return rs_fail(RS_ERR_NOMEM, "out of memory");
  t->dtype = PICK(ch, DTYPES);
  t->t.dtype = t->dtype;
  t->t.ndim = PICK(ch, TND);
  for (int d = 0; d < t->t.ndim; ++d) t->t.shape[d] = PICK(ch, DIMSZ);
  for (;;) {
    int64_t n = 1;
    int big = 0;
    for (int d = 0; d < t->t.ndim; ++d) {
      n *= t->t.shape[d];
      if (t->t.shape[d] > t->t.shape[big]) big = d;
    }
    if (n <= 256) break;
    t->t.shape[big] = (t->t.shape[big] + 1) / 2;
  }
  t->seed = rs_draw(ch, 1u << 20);
  t->flatten_dim = -1;
  t->factory = -1;
  return RS_OK;
}

/* The sharding of tensor t on `world` ranks, with its Megatron extras. */
static rs_status gen_sharding(rs_choices *ch, int world, rs_spec_tensor *t) {
  t->factory = -1;
  t->flatten_dim = -1;
  t->prepend = 0;
  t->glu_dim = 0;
  rs_tensor lt = t->t;
  if (rs_draw(ch, 8) == 1)
    for (int d = 0; d < t->t.ndim; ++d)
      if (t->t.shape[d] > 0 && t->t.shape[d] % 2 == 0) {
        t->factory = RS_FACTORY_GLU;
        t->glu_dim = d;
        lt.shape[d] /= 2;
        break;
      }
  rs_status st = gen_layout(ch, world, &lt, &t->mesh, &t->sh);
  if (st) return st;
  if (t->factory == RS_FACTORY_GLU) return RS_OK;
  int rdims[RS_MAX_MESH_DIMS], nr = 0;
  for (int m = 0; m < t->mesh.ndim; ++m)
    if (t->sh.p[m].kind == RS_REPLICATE) rdims[nr++] = m;
  if (nr && rs_draw(ch, 3) == 1) {
    t->flatten_dim = rdims[rs_draw(ch, (uint64_t)nr)];
    if (rs_draw(ch, 3) == 1) t->factory = RS_FACTORY_FLAT;
  }
  /* prepended axes (layer stacking), also over an empty axis (whose key must not vanish). Over
   * an empty axis the choice comes from the seed, not from a draw, so that streams recorded
   * before empty axes were allowed replay unchanged */
  if (t->t.ndim >= 1 && (t->t.shape[0] > 0 ? rs_draw(ch, 6) == 1 : t->seed % 3 == 1)) t->prepend = 1;
  return RS_OK;
}

static rs_status gen_object(rs_choices *ch, const char *key, int world, rs_spec_object *o) {
  memset(o, 0, sizeof *o);
  o->key = rs__strdup(key);
  if (!o->key) return rs_fail(RS_ERR_NOMEM, "out of memory");
  o->seed = rs_draw(ch, 1u << 20);
  int nd = 1 + (int)rs_draw(ch, 2);
  int64_t size[RS_MAX_MESH_DIMS];
  for (int i = 0; i < nd; ++i) {
    size[i] = PICK(ch, MSZ);
    if (rs_draw(ch, 3)) o->dims[o->ndims++] = i;
  }
  return gen_mesh(ch, world, nd, size, &o->mesh);
}

/* The same object grid on other ranks (a ShardedObject's sharding cannot change). */
static rs_status move_object(rs_choices *ch, int world, rs_spec_object *o) {
  int64_t size[RS_MAX_MESH_DIMS];
  memcpy(size, o->mesh.size, sizeof size);
  return gen_mesh(ch, world, o->mesh.ndim, size, &o->mesh);
}

static rs_status add_kv(rs_kv **a, int *n, const char *k, const char *v) {
  int cap = *n;
  return rs_sd_add_kv(a, n, &cap, k, v, (int64_t)strlen(v));
}

rs_status rs_gen_ckpt_case(rs_choices *ch, rs_ckpt_case *c) {
  memset(c, 0, sizeof *c);
  int n = 1 + (int)rs_draw(ch, 8), m = 1 + (int)rs_draw(ch, 8), lo = n < m ? n : m;
  int nt = (int)rs_draw(ch, 5), no = (int)rs_draw(ch, 3);
  rs_state_spec *a = &c->a, *a2 = &c->a2;
  a->world = n;
  a2->world = m;
  a->t = calloc((size_t)nt + 1, sizeof *a->t);
  a2->t = calloc((size_t)nt + 2, sizeof *a2->t);
  a->o = calloc((size_t)no + 1, sizeof *a->o);
  a2->o = calloc((size_t)no + 2, sizeof *a2->o);
  if (!a->t || !a2->t || !a->o || !a2->o) return rs_fail(RS_ERR_NOMEM, "out of memory");
  rs_status st = RS_OK;
  char key[64];
  for (int i = 0; i < nt && !st; ++i) {
    snprintf(key, sizeof key, i % 2 ? "decoder.layers.%d.mlp.weight" : "embedding.%d.weight", i);
    if ((st = gen_tensor(ch, key, &a->t[i]))) break;
    a->nt++;
    a2->t[i] = a->t[i];
    if (!(a2->t[i].key = rs__strdup(key))) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    a2->nt++;
    if (!st) st = gen_sharding(ch, n, &a->t[i]);
    if (!st) st = gen_sharding(ch, m, &a2->t[i]);
    /* allow_shape_mismatch is a property of the key: both sides carry it */
    if (!st && rs_draw(ch, 5) == 1) a->t[i].allow_shape_mismatch = a2->t[i].allow_shape_mismatch = 1;
  }
  for (int i = 0; i < no && !st; ++i) {
    snprintf(key, sizeof key, "optimizer.rng_state.%d", i);
    if ((st = gen_object(ch, key, lo, &a->o[i]))) break;
    a->no++;
    a2->o[i] = a->o[i];
    if (!(a2->o[i].key = rs__strdup(key))) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    a2->no++;
    if (!st) st = move_object(ch, m, &a2->o[i]);
  }
  int ncm = st ? 0 : (int)rs_draw(ch, 3);
  if (ncm > 0 && !st) {
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)rs_draw(ch, 100000));
    st = add_kv(&a->common, &a->ncommon, "iteration", v);
  }
  if (ncm > 1 && !st) st = add_kv(&a->common, &a->ncommon, "args", "{\"lr\": 0.0003, \"tp\": \"\\u00e9\"}");
  if (!st && rs_draw(ch, 2)) st = add_kv(&a->nonpersistent, &a->nnp, "rerun_state", "local");
  int cap = 0;
  for (int i = 0; i < a->ncommon && !st; ++i)
    st = rs_sd_add_kv(&a2->common, &a2->ncommon, &cap, a->common[i].key, a->common[i].val, a->common[i].len);
  cap = 0;
  for (int i = 0; i < a->nnp && !st; ++i)
    st = rs_sd_add_kv(&a2->nonpersistent, &a2->nnp, &cap, a->nonpersistent[i].key, a->nonpersistent[i].val,
                      a->nonpersistent[i].len);
  if (!st) st = rs_state_spec_copy(a2, &c->b);
  /* the load side: keys dropped (missing), added (unexpected), shapes padded or cut */
  rs_state_spec *b = &c->b;
  if (!st && b->nt && rs_draw(ch, 4) == 1) {
    int j = (int)rs_draw(ch, (uint64_t)b->nt);
    free(b->t[j].key);
    memmove(&b->t[j], &b->t[j + 1], sizeof *b->t * (size_t)(b->nt - j - 1));
    b->nt--;
  }
  if (!st && rs_draw(ch, 4) == 1) {
    rs_spec_tensor *x = realloc(b->t, sizeof *b->t * (size_t)(b->nt + 1));
    if (!x) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    else {
      b->t = x;
      st = gen_tensor(ch, "extra.unexpected.weight", &b->t[b->nt]);
      if (!st) {
        b->nt++;
        st = gen_sharding(ch, m, &b->t[b->nt - 1]);
      }
    }
  }
  if (!st && b->no && rs_draw(ch, 5) == 1) {
    int j = (int)rs_draw(ch, (uint64_t)b->no);
    free(b->o[j].key);
    memmove(&b->o[j], &b->o[j + 1], sizeof *b->o * (size_t)(b->no - j - 1));
    b->no--;
  }
  if (!st && rs_draw(ch, 6) == 1) {
    rs_spec_object *x = realloc(b->o, sizeof *b->o * (size_t)(b->no + 1));
    if (!x) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    else {
      b->o = x;
      st = gen_object(ch, "extra.unexpected_object", m, &b->o[b->no]);
      if (!st) b->no++;
    }
  }
  for (int i = 0; i < b->nt && !st; ++i) {
    rs_spec_tensor *t = &b->t[i];
    if (!t->allow_shape_mismatch || t->factory == RS_FACTORY_GLU) continue;
    int glu_a = 0;
    for (int k = 0; k < a->nt; ++k)
      if (strcmp(a->t[k].key, t->key) == 0) glu_a = a->t[k].factory == RS_FACTORY_GLU;
    if (glu_a) continue;
    for (int d = 0; d < t->t.ndim; ++d) {
      int64_t delta = (int64_t)rs_draw(ch, 5) - 2; /* -2..2: cut or pad */
      if (t->t.shape[d] + delta >= 0 && !(d < t->prepend && t->t.shape[d] + delta == 0)) t->t.shape[d] += delta;
    }
  }
  if (!st) c->strict = (rs_strict)rs_draw(ch, RS_STRICT_COUNT);
  /* round trip through JSON: what a regression fixture would replay */
  if (st) rs_ckpt_case_free(c);
  return st;
}

/* ---- the aligned variant: whole 4096-byte rows, for O_DIRECT's unstaged writes ---- */

#define ALIGNED_KEY "aligned.weight"
#define ALIGNED_ROW 512 /* F64 elements: 4096 bytes */

/* appends a copy of t (its key duplicated) to s */
static rs_status push_tensor(rs_state_spec *s, const rs_spec_tensor *t) {
  rs_spec_tensor *x = realloc(s->t, sizeof *s->t * (size_t)(s->nt + 1));
  if (!x) return rs_fail(RS_ERR_NOMEM, "out of memory");
  s->t = x;
  x[s->nt] = *t;
  if (!(x[s->nt].key = rs__strdup(ALIGNED_KEY))) return rs_fail(RS_ERR_NOMEM, "out of memory");
  s->nt++;
  return RS_OK;
}

/* ALIGNED_KEY on `world` ranks: replicated or split on its rows over a 1-d mesh of at most 4
 * ranks, so that every rank's chunk is whole rows of 4096 bytes */
static rs_status gen_aligned_side(rs_choices *ch, int world, int64_t rows, uint64_t seed, rs_spec_tensor *t) {
  memset(t, 0, sizeof *t);
  t->dtype = t->t.dtype = RS_F64;
  t->t.ndim = 2;
  t->t.shape[0] = rows;
  t->t.shape[1] = ALIGNED_ROW;
  t->seed = seed;
  t->flatten_dim = -1;
  t->factory = -1;
  int64_t size[1] = {1 + (int64_t)rs_draw(ch, (uint64_t)(world < 4 ? world : 4))};
  rs_status st = gen_mesh(ch, world, 1, size, &t->mesh);
  if (st) return st;
  t->sh.mesh_ndim = 1;
  t->sh.p[0] = rs_draw(ch, 2) ? rs_pl_shard(0) : rs_pl_replicate();
  if ((st = rs_sharding_set_default_order(&t->sh, 2))) return st;
  rs_tensor lt = t->t;
  return rs_sharding_validate(&t->sh, &t->mesh, &lt);
}

rs_status rs_gen_ckpt_aligned(rs_choices *ch, rs_ckpt_case *c) {
  int64_t rows = 2 * (1 + (int64_t)rs_draw(ch, 4));
  uint64_t seed = rs_draw(ch, 1u << 20);
  rs_spec_tensor ta, t2;
  rs_status st = gen_aligned_side(ch, c->a.world, rows, seed, &ta);
  if (!st) st = gen_aligned_side(ch, c->a2.world, rows, seed, &t2);
  if (!st) st = push_tensor(&c->a, &ta);
  if (!st) st = push_tensor(&c->a2, &t2);
  if (!st) st = push_tensor(&c->b, &t2);
  return st;
}
