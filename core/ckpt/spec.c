/* spec.c - the state spec: a compact JSON description of every rank's sharded state dict (tensors
 * by key, global shape, dtype and seed plus a layout from the layout model; objects sharded over
 * mesh dims; common and non-persistent entries), its parser, its printer and the builder that
 * turns it into each rank's state dict, with replica ids derived from Replicate mesh dims and
 * optional flattening across a data-parallel mesh dim as a distributed optimizer does. */
#include <stdlib.h>
#include <string.h>
#include "core/checked.h"
#include "core/box.h"
#include "core/ckpt/internal.h"
#include "core/mutant.h"
#include "core/json.h"
#include "reshard/case.h"

void rs_state_spec_free(rs_state_spec *s) {
  for (int i = 0; i < s->nt; ++i) free(s->t[i].key);
  for (int i = 0; i < s->no; ++i) free(s->o[i].key);
  for (int i = 0; i < s->ncommon; ++i) {
    free(s->common[i].key);
    free(s->common[i].val);
  }
  for (int i = 0; i < s->nnp; ++i) {
    free(s->nonpersistent[i].key);
    free(s->nonpersistent[i].val);
  }
  free(s->t);
  free(s->o);
  free(s->common);
  free(s->nonpersistent);
  memset(s, 0, sizeof *s);
}

static rs_status read_mesh(const cJSON *obj, const char *field, int world, rs_mesh *m) {
  const cJSON *ms, *rk;
  char f[160];
  snprintf(f, sizeof f, "%s.mesh", field);
  rs_status st = rs_json_member(obj, field, "mesh", cJSON_Array, &ms);
  if (st) return st;
  if (!ms) return rs_fail(RS_ERR_INVALID, "%s: missing", f);
  int64_t sz[RS_MAX_MESH_DIMS], rv[RS_MAX_RANKS];
  int nd, nr;
  if ((st = rs_json_i64_array(ms, f, RS_MAX_MESH_DIMS, 1, RS_MAX_RANKS, sz, &nd))) return st;
  if (nd < 1) return rs_fail(RS_ERR_INVALID, "%s: at least one mesh dim", f);
  if ((st = rs_json_member(obj, field, "ranks", cJSON_Array, &rk))) return st;
  int32_t r32[RS_MAX_RANKS];
  const int32_t *ranks = NULL;
  if (rk) {
    snprintf(f, sizeof f, "%s.ranks", field);
    if ((st = rs_json_i64_array(rk, f, RS_MAX_RANKS, 0, world - 1, rv, &nr))) return st;
    for (int i = 0; i < nr; ++i) r32[i] = (int32_t)rv[i];
    int64_t prod = 1;
    for (int i = 0; i < nd; ++i)
      if (!rs__mul_ok(prod, sz[i], &prod) || prod > RS_MAX_RANKS)
        return rs_fail(RS_ERR_INVALID, "%s.mesh: more than %d ranks", field, RS_MAX_RANKS);
    if (prod != nr)
      return rs_fail(RS_ERR_INVALID, "%s.ranks: %d ranks for a mesh of %lld", field, nr, (long long)prod);
    ranks = r32;
  }
  if ((st = rs_mesh_init(m, nd, sz, ranks))) {
    char pre[192];
    snprintf(pre, sizeof pre, "%s.mesh: ", field);
    return rs_fail_prefix(st, pre);
  }
  for (int i = 0; i < m->nranks; ++i)
    if (m->ranks[i] >= world)
      return rs_fail(RS_ERR_INVALID, "%s.mesh: %d ranks but the world has %d", field, m->nranks, world);
  return RS_OK;
}

static rs_status read_key(const cJSON *obj, const char *field, char **out) {
  const cJSON *k;
  rs_status st = rs_json_member(obj, field, "key", cJSON_String, &k);
  if (st) return st;
  if (!k || !rs__key_ok(k->valuestring))
    return rs_fail(RS_ERR_INVALID, "%s.key: missing or not printable ASCII without quotes", field);
  *out = rs__strdup(k->valuestring);
  return *out ? RS_OK : rs_fail(RS_ERR_NOMEM, "out of memory");
}

static rs_status read_flag(const cJSON *obj, const char *field, const char *name, int *out) {
  const cJSON *b;
  rs_status st = rs_json_member(obj, field, name, cJSON_True | cJSON_False, &b);
  if (st) return st;
  *out = b && cJSON_IsTrue(b);
  return RS_OK;
}

static rs_status read_int(const cJSON *obj, const char *field, const char *name, int64_t lo,
                          int64_t hi, int64_t dflt, int64_t *out) {
  *out = dflt;
  return rs_json_i64_member(obj, field, name, lo, hi, 0, out);
}

static rs_status read_tensor(const cJSON *it, const char *field, int world, rs_spec_tensor *t) {
  memset(t, 0, sizeof *t);
  t->flatten_dim = -1;
  t->factory = -1;
  rs_status st = read_key(it, field, &t->key);
  if (st) return st;
  const cJSON *dt, *sh, *sd, *pl, *od, *fa;
  char f[192];
  if ((st = rs_json_member(it, field, "dtype", cJSON_String, &dt))) return st;
  if (!dt) return rs_fail(RS_ERR_INVALID, "%s.dtype: missing", field);
  if ((st = rs_dtype_parse(dt->valuestring, &t->dtype))) {
    snprintf(f, sizeof f, "%s.dtype: ", field);
    return rs_fail_prefix(st, f);
  }
  if ((st = rs_json_member(it, field, "shape", cJSON_Array, &sh))) return st;
  if (!sh) return rs_fail(RS_ERR_INVALID, "%s.shape: missing", field);
  snprintf(f, sizeof f, "%s.shape", field);
  if ((st = rs_json_i64_array(sh, f, RS_MAX_DIMS, 0, INT64_MAX, t->t.shape, &t->t.ndim))) return st;
  t->t.dtype = t->dtype;
  int64_t nb;
  if ((st = rs__tensor_nbytes_at(&t->t, f, &nb))) return st;
  if ((st = rs_json_member(it, field, "seed", cJSON_Number, &sd))) return st;
  if (sd) {
    snprintf(f, sizeof f, "%s.seed", field);
    if ((st = rs_json_u64(sd, f, &t->seed))) return st;
  }
  if ((st = read_mesh(it, field, world, &t->mesh))) return st;
  if ((st = rs_json_member(it, field, "placements", cJSON_String, &pl))) return st;
  if ((st = rs_json_member(it, field, "order", cJSON_String, &od))) return st;
  if (pl) {
    if ((st = rs_parse_placements(pl->valuestring, &t->sh))) {
      snprintf(f, sizeof f, "%s.placements: ", field);
      return rs_fail_prefix(st, f);
    }
  } else {
    t->sh.mesh_ndim = t->mesh.ndim;
  }
  if (t->sh.mesh_ndim != t->mesh.ndim)
    return rs_fail(RS_ERR_INVALID, "%s.placements: %d placements for a %d-d mesh", field,
                   t->sh.mesh_ndim, t->mesh.ndim);
  for (int m = 0; m < t->mesh.ndim; ++m)
    if (t->sh.p[m].kind == RS_PARTIAL)
      return rs_fail(RS_ERR_INVALID, "%s.placements: Partial on mesh dim %d (state dicts hold whole values)",
                     field, m);
  if ((st = rs_parse_order(od ? od->valuestring : NULL, &t->sh, t->t.ndim))) {
    snprintf(f, sizeof f, "%s.order: ", field);
    return rs_fail_prefix(st, f);
  }
  int64_t v;
  if ((st = read_int(it, field, "flatten", 0, t->mesh.ndim - 1, -1, &v))) return st;
  t->flatten_dim = (int)v;
  if ((st = read_int(it, field, "prepend", 0, t->t.ndim, 0, &v))) return st;
  t->prepend = (int)v;
  if ((st = read_flag(it, field, "allow_shape_mismatch", &t->allow_shape_mismatch))) return st;
  if ((st = rs_json_member(it, field, "factory", cJSON_String, &fa))) return st;
  if (fa) {
    if (strcmp(fa->valuestring, "glu") == 0) t->factory = RS_FACTORY_GLU;
    else if (strcmp(fa->valuestring, "flat") == 0) t->factory = RS_FACTORY_FLAT;
    else return rs_fail(RS_ERR_INVALID, "%s.factory: '%s' (glu or flat)", field, fa->valuestring);
  }
  if ((st = read_int(it, field, "glu_dim", 0, t->t.ndim > 0 ? t->t.ndim - 1 : 0, 0, &v))) return st;
  t->glu_dim = (int)v;
  /* the layout is checked against the shape it shards (the halved one for GLU) */
  rs_tensor lt = t->t;
  if (t->factory == RS_FACTORY_GLU) {
    if (t->t.ndim == 0 || t->t.shape[t->glu_dim] % 2)
      return rs_fail(RS_ERR_INVALID, "%s.glu_dim: the GLU dim must exist and have an even size", field);
    if (t->prepend || t->flatten_dim >= 0)
      return rs_fail(RS_ERR_INVALID, "%s.factory: glu takes no prepend and no flatten", field);
    lt.shape[t->glu_dim] /= 2;
  }
  if (t->factory == RS_FACTORY_FLAT && t->flatten_dim < 0)
    return rs_fail(RS_ERR_INVALID, "%s.factory: flat needs a flatten mesh dim", field);
  if ((st = rs_sharding_validate(&t->sh, &t->mesh, &lt))) {
    snprintf(f, sizeof f, "%s.placements: ", field);
    return rs_fail_prefix(st, f);
  }
  if (t->flatten_dim >= 0 && t->sh.p[t->flatten_dim].kind != RS_REPLICATE)
    return rs_fail(RS_ERR_INVALID, "%s.flatten: mesh dim %d must be Replicate", field, t->flatten_dim);
  return RS_OK;
}

static rs_status read_object(const cJSON *it, const char *field, int world, rs_spec_object *o) {
  memset(o, 0, sizeof *o);
  rs_status st = read_key(it, field, &o->key);
  if (st) return st;
  const cJSON *sd, *dims;
  char f[192];
  if ((st = rs_json_member(it, field, "seed", cJSON_Number, &sd))) return st;
  if (sd) {
    snprintf(f, sizeof f, "%s.seed", field);
    if ((st = rs_json_u64(sd, f, &o->seed))) return st;
  }
  if ((st = read_mesh(it, field, world, &o->mesh))) return st;
  if ((st = rs_json_member(it, field, "dims", cJSON_Array, &dims))) return st;
  if (dims) {
    int64_t d[RS_MAX_MESH_DIMS];
    snprintf(f, sizeof f, "%s.dims", field);
    if ((st = rs_json_i64_array(dims, f, RS_MAX_MESH_DIMS, 0, o->mesh.ndim - 1, d, &o->ndims))) return st;
    for (int i = 0; i < o->ndims; ++i) {
      o->dims[i] = (int)d[i];
      for (int j = 0; j < i; ++j)
        if (o->dims[j] == o->dims[i]) return rs_fail(RS_ERR_INVALID, "%s: mesh dim %d twice", f, o->dims[i]);
    }
  }
  return RS_OK;
}

static rs_status read_kvs(const cJSON *root, const char *name, rs_kv **arr, int *n) {
  const cJSON *obj, *it;
  rs_status st = rs_json_member(root, "", name, cJSON_Object, &obj);
  if (st || !obj) return st;
  int cap = 0;
  cJSON_ArrayForEach(it, obj) {
    if (!cJSON_IsString(it)) return rs_fail(RS_ERR_INVALID, "%s.%s: expected a string", name, it->string);
    if (!rs__key_ok(it->string)) return rs_fail(RS_ERR_INVALID, "%s: key not printable ASCII", name);
    for (int i = 0; i < *n; ++i)
      if (strcmp((*arr)[i].key, it->string) == 0)
        return rs_fail(RS_ERR_INVALID, "%s.%s: duplicate key", name, it->string);
    if ((st = rs_sd_add_kv(arr, n, &cap, it->string, it->valuestring, (int64_t)strlen(it->valuestring))))
      return st;
  }
  return RS_OK;
}

/* Whether k is "<o's key>/shard_<offsets>_<shape>" for some shard of o: the form of
 * rs_sh_object_unique_key (integers joined by '.', written as %lld writes them), with each offset
 * below its mesh dim's size, which some position of o's mesh holds. */
static int is_unique_key_of(const rs_spec_object *o, const char *k) {
  size_t kl = strlen(o->key);
  if (strncmp(k, o->key, kl) != 0 || strncmp(k + kl, "/shard_", 7) != 0) return 0;
  const char *p = k + kl + 7;
  for (int i = 0; i < o->ndims; ++i) {
    if (i && *p++ != '.') return 0;
    int64_t v = 0;
    const char *d = p;
    while (*p >= '0' && *p <= '9' && v < o->mesh.size[o->dims[i]]) v = v * 10 + (*p++ - '0');
    if (p == d || (p - d > 1 && *d == '0') || v >= o->mesh.size[o->dims[i]]) return 0;
  }
  if (*p++ != '_') return 0;
  char shape[512] = "";
  for (int i = 0; i < o->ndims; ++i)
    snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", i ? "." : "",
             (long long)o->mesh.size[o->dims[i]]);
  return strcmp(p, shape) == 0;
}

static rs_status parse_root(const cJSON *root, rs_state_spec *s) {
  int64_t w;
  rs_status st = read_int(root, "", "world", 1, RS_MAX_RANKS, 0, &w);
  if (st) return st;
  if (w < 1) return rs_fail(RS_ERR_INVALID, "world: missing (the number of ranks)");
  s->world = (int)w;
  const cJSON *ts, *os, *it;
  if ((st = rs_json_member(root, "", "tensors", cJSON_Array, &ts))) return st;
  if ((st = rs_json_member(root, "", "objects", cJSON_Array, &os))) return st;
  int n = ts ? cJSON_GetArraySize(ts) : 0;
  s->t = calloc((size_t)n + 1, sizeof *s->t);
  if (!s->t) return rs_fail(RS_ERR_NOMEM, "out of memory");
  char f[64];
  if (ts) cJSON_ArrayForEach(it, ts) {
      snprintf(f, sizeof f, "tensors[%d]", s->nt);
      st = read_tensor(it, f, s->world, &s->t[s->nt]);
      s->nt++;
      if (st) return st;
      for (int j = 0; j < s->nt - 1; ++j)
        if (strcmp(s->t[j].key, s->t[s->nt - 1].key) == 0)
          return rs_fail(RS_ERR_INVALID, "%s.key: '%s' twice", f, s->t[j].key);
    }
  n = os ? cJSON_GetArraySize(os) : 0;
  s->o = calloc((size_t)n + 1, sizeof *s->o);
  if (!s->o) return rs_fail(RS_ERR_NOMEM, "out of memory");
  if (os) cJSON_ArrayForEach(it, os) {
      snprintf(f, sizeof f, "objects[%d]", s->no);
      st = read_object(it, f, s->world, &s->o[s->no]);
      s->no++;
      if (st) return st;
      for (int j = 0; j < s->no - 1; ++j)
        if (strcmp(s->o[j].key, s->o[s->no - 1].key) == 0)
          return rs_fail(RS_ERR_INVALID, "%s.key: '%s' twice", f, s->o[j].key);
      /* one key names one thing: a tensor and an object may not share it, and tensor keys share
       * one namespace with the objects' unique keys ("<key>/shard_<offsets>_<shape>") */
      for (int j = 0; j < s->nt; ++j) {
        if (strcmp(s->t[j].key, s->o[s->no - 1].key) == 0)
          return rs_fail(RS_ERR_INVALID, "%s.key: '%s' is a tensor's key too (tensors[%d])", f, s->t[j].key, j);
        if (is_unique_key_of(&s->o[s->no - 1], s->t[j].key))
          return rs_fail(RS_ERR_INVALID, "tensors[%d].key: '%s' is the unique key of a shard of %s ('%s'): tensor keys "
                         "and object unique keys share one namespace", j, s->t[j].key, f, s->o[s->no - 1].key);
      }
    }
  if ((st = read_kvs(root, "common", &s->common, &s->ncommon))) return st;
  return read_kvs(root, "nonpersistent", &s->nonpersistent, &s->nnp);
}

/* Frees what it read when it fails, so a caller never holds half a spec. */
static rs_status spec_reader(const cJSON *root, void *out) {
  rs_status st = cJSON_IsObject(root) ? parse_root(root, out)
                                      : rs_fail(RS_ERR_INVALID, "state spec: expected a JSON object");
  if (st) rs_state_spec_free(out);
  return st;
}

rs_status rs_state_spec_from_json(const char *text, rs_state_spec *out) {
  memset(out, 0, sizeof *out);
  /* a key "w\u0000x" would be cut to "w" by the JSON reader: refused (the key rule) */
  rs_status st = text ? rs__json_no_nul(text, strlen(text), "state spec") : RS_OK;
  return st ? st : rs__json_from_text(text, spec_reader, out);
}

rs_status rs_state_spec_from_file(const char *path, rs_state_spec *out) {
  memset(out, 0, sizeof *out);
  char *text = rs_read_text(path);
  if (!text) return RS_ERR_IO; /* rs_read_text named the file */
  rs_status st = rs__json_no_nul(text, strlen(text), path);
  free(text); /* a spec is small: read again by the shared reader */
  return st ? st : rs__json_from_file(path, spec_reader, out);
}

/* ---- printing ---- */
static void add_ints(cJSON *o, const char *name, const int64_t *v, int n) {
  cJSON *a = cJSON_AddArrayToObject(o, name);
  for (int i = 0; i < n; ++i) {
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)v[i]);
    cJSON_AddItemToArray(a, cJSON_CreateRaw(b));
  }
}

static void add_mesh(cJSON *o, const rs_mesh *m) {
  add_ints(o, "mesh", m->size, m->ndim);
  int dflt = 1;
  for (int i = 0; i < m->nranks; ++i) dflt &= m->ranks[i] == i;
  if (!dflt) {
    int64_t r[RS_MAX_RANKS];
    for (int i = 0; i < m->nranks; ++i) r[i] = m->ranks[i];
    add_ints(o, "ranks", r, m->nranks);
  }
}

static void add_u64(cJSON *o, const char *name, uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  cJSON_AddRawToObject(o, name, b);
}

static void add_int(cJSON *o, const char *name, int64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%lld", (long long)v);
  cJSON_AddRawToObject(o, name, b);
}

char *rs_state_spec_to_json(const rs_state_spec *s) {
  cJSON *root = cJSON_CreateObject();
  add_int(root, "world", s->world);
  cJSON *ts = cJSON_AddArrayToObject(root, "tensors");
  for (int i = 0; i < s->nt; ++i) {
    const rs_spec_tensor *t = &s->t[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", t->key);
    cJSON_AddStringToObject(o, "dtype", rs_dtype_name(t->dtype));
    add_ints(o, "shape", t->t.shape, t->t.ndim);
    add_u64(o, "seed", t->seed);
    add_mesh(o, &t->mesh);
    char pl[128] = "";
    size_t n = 0;
    for (int m = 0; m < t->sh.mesh_ndim; ++m) {
      if (m) pl[n++] = ',';
      n += (size_t)rs_format_placement(t->sh.p[m], pl + n, sizeof pl - n);
    }
    cJSON_AddStringToObject(o, "placements", pl);
    char od[256];
    rs_tensor lt = t->t;
    if (t->factory == RS_FACTORY_GLU) lt.shape[t->glu_dim] /= 2;
    if (!rs_sharding_is_default_order(&t->sh, lt.ndim)) {
      rs_format_order(&t->sh, lt.ndim, od, sizeof od);
      cJSON_AddStringToObject(o, "order", od);
    }
    if (t->flatten_dim >= 0) add_int(o, "flatten", t->flatten_dim);
    if (t->prepend) add_int(o, "prepend", t->prepend);
    if (t->allow_shape_mismatch) cJSON_AddTrueToObject(o, "allow_shape_mismatch");
    if (t->factory == RS_FACTORY_GLU) {
      cJSON_AddStringToObject(o, "factory", "glu");
      add_int(o, "glu_dim", t->glu_dim);
    } else if (t->factory == RS_FACTORY_FLAT) {
      cJSON_AddStringToObject(o, "factory", "flat");
    }
    cJSON_AddItemToArray(ts, o);
  }
  cJSON *os = cJSON_AddArrayToObject(root, "objects");
  for (int i = 0; i < s->no; ++i) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", s->o[i].key);
    add_u64(o, "seed", s->o[i].seed);
    add_mesh(o, &s->o[i].mesh);
    int64_t d[RS_MAX_MESH_DIMS];
    for (int k = 0; k < s->o[i].ndims; ++k) d[k] = s->o[i].dims[k];
    add_ints(o, "dims", d, s->o[i].ndims);
    cJSON_AddItemToArray(os, o);
  }
  const rs_kv *kvs[2] = {s->common, s->nonpersistent};
  int nk[2] = {s->ncommon, s->nnp};
  const char *names[2] = {"common", "nonpersistent"};
  for (int k = 0; k < 2; ++k) {
    cJSON *o = cJSON_AddObjectToObject(root, names[k]);
    for (int i = 0; i < nk[k]; ++i) {
      char *v = malloc((size_t)kvs[k][i].len + 1);
      if (!v) continue;
      memcpy(v, kvs[k][i].val, (size_t)kvs[k][i].len);
      v[kvs[k][i].len] = 0;
      cJSON_AddStringToObject(o, kvs[k][i].key, v);
      free(v);
    }
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) rs_fail(RS_ERR_NOMEM, "state spec: out of memory");
  return text;
}

rs_status rs_state_spec_copy(const rs_state_spec *s, rs_state_spec *out) {
  char *text = rs_state_spec_to_json(s);
  if (!text) return RS_ERR_NOMEM;
  rs_status st = rs_state_spec_from_json(text, out);
  free(text);
  return st;
}

/* ---- building every rank's state dict ---- */
static void replica_of(const rs_mesh *m, const rs_sharding *sh, int skip_dim,
                       const int64_t *coord, rs_replica_id *r) {
  memset(r, 0, sizeof *r);
  int k = 0;
  for (int d = 0; d < m->ndim; ++d)
    if (d != skip_dim && sh->p[d].kind == RS_REPLICATE) r->v[k++] = coord[d];
  r->n = k ? k : 1;
  r->is_tuple = k > 1;
}

/* Fill an entry's data: element i of the buffer is global index (off + unflatten(i)). */
static void fill_entry(rs_sh_tensor *e, const rs_spec_tensor *t, rs_fill fill, int rank,
                       int glu_dim) {
  int es = rs_dtype_size(e->dtype);
  int64_t n = e->nbytes / (es ? es : 1), idx[RS_MAX_DIMS];
  int64_t first = e->has_flat ? e->flat_start : 0;
  if (fill == RS_FILL_NONE) return;
  for (int64_t i = 0; i < n; ++i) {
    if (fill == RS_FILL_INITIAL) {
      rs_ckpt_initial(rank, e->key, e->dtype, i, e->data + i * es);
      continue;
    }
    rs__unflatten(e->ndim, e->local_shape, first + i, idx);
    for (int d = 0; d < e->ndim; ++d) idx[d] += e->global_offset[d];
    if (glu_dim >= 0) {
      /* fused [W; V]: the second half of the local dim comes from the global second half */
      int64_t half = e->local_shape[glu_dim] / 2, local = idx[glu_dim] - e->global_offset[glu_dim];
      if (local >= half) idx[glu_dim] += e->global_shape[glu_dim] / 2 - half;
    }
    rs_ckpt_value(t->seed, e->key, e->dtype, rs__flat_index(e->ndim, e->global_shape, idx),
                  e->data + i * es);
  }
}

static rs_status add_tensor_entries(const rs_spec_tensor *t, rs_fill fill, int rank,
                                    rs_state_dict *sd) {
  int pos = rs_mesh_pos_of_rank(&t->mesh, rank);
  if (pos < 0) return RS_OK;
  int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS];
  rs_mesh_coord(&t->mesh, pos, coord);
  rs_tensor lt = t->t;
  if (t->factory == RS_FACTORY_GLU) lt.shape[t->glu_dim] /= 2;
  rs_local_box(&t->mesh, &t->sh, &lt, coord, start, size);
  rs_sh_tensor e;
  memset(&e, 0, sizeof e);
  e.key = t->key;
  e.dtype = t->dtype;
  e.ndim = t->t.ndim;
  memcpy(e.global_shape, t->t.shape, sizeof e.global_shape);
  memcpy(e.global_offset, start, sizeof start);
  memcpy(e.local_shape, size, sizeof size);
  if (t->factory == RS_FACTORY_GLU) e.local_shape[t->glu_dim] *= 2;
  replica_of(&t->mesh, &t->sh, t->flatten_dim, coord, &e.replica);
  e.prepend_axis_num = t->prepend;
  e.allow_shape_mismatch = t->allow_shape_mismatch;
  /* a regular grid gets axis_fragmentations, as from_rank_offsets sets them */
  if (t->factory < 0 && t->flatten_dim < 0) {
    int regular = 1;
    for (int d = 0; d < e.ndim; ++d) {
      int64_t fr = 1;
      for (int k = 0; k < t->sh.order_len[d]; ++k) fr *= t->mesh.size[t->sh.order[d][k]];
      if (d < t->prepend) fr = t->t.shape[d] ? t->t.shape[d] : 1;
      e.axis_frag[d] = fr;
      if (t->t.shape[d] % fr || (d >= t->prepend && size[d] != t->t.shape[d] / fr)) regular = 0;
    }
    e.has_axis_frag = regular;
  }
  /* prepended axes: one entry per index of the box on those axes */
  int64_t poff[RS_MAX_DIMS], psz[RS_MAX_DIMS], pidx[RS_MAX_DIMS];
  int np = t->prepend;
  /* a prepended axis of global size 0 has no index to explode: every rank would hold no entry and
   * the key would vanish from the checkpoint (and be "unexpected" to every other layout). An
   * empty tensor keeps its entry in every layout: one empty entry per rank, with no prepended
   * axes (0-size entries are saved as metadata only).
   * RS_MUTANT 607: the key of a tensor empty on a prepended axis vanishes */
  for (int d = 0; d < t->prepend && !RS_MUTANT(607); ++d)
    if (t->t.shape[d] == 0) {
      np = 0;
      e.prepend_axis_num = 0;
      e.has_axis_frag = 0;
    }
  for (int d = 0; d < np; ++d) {
    poff[d] = start[d];
    psz[d] = size[d];
    pidx[d] = start[d];
    if (size[d] == 0) return RS_OK;
  }
  do {
    rs_sh_tensor p = e;
    for (int d = 0; d < np; ++d) {
      p.global_offset[d] = pidx[d];
      p.local_shape[d] = 1;
    }
    int64_t numel;
    rs_status st = rs_sh_tensor_numel(&p, &numel, NULL);
    if (st) return st;
    int64_t fs = 0, fl = numel;
    if (t->flatten_dim >= 0) rs_split(numel, t->mesh.size[t->flatten_dim], coord[t->flatten_dim], &fl, &fs);
    if (t->flatten_dim >= 0 && t->factory != RS_FACTORY_FLAT) {
      p.has_flat = 1;
      p.flat_start = fs;
      p.flat_stop = fs + fl;
    }
    if ((st = rs_sh_tensor_numel(&p, NULL, &p.nbytes))) return st;
    p.data = malloc(p.nbytes ? (size_t)p.nbytes : 1);
    if (!p.data) return rs_fail(RS_ERR_NOMEM, "out of memory");
    fill_entry(&p, t, fill, rank, t->factory == RS_FACTORY_GLU ? t->glu_dim : -1);
    if (t->factory >= 0) {
      rs_sh_factory f;
      memset(&f, 0, sizeof f);
      f.kind = (rs_factory_kind)t->factory;
      f.src = p;
      f.glu_dim = t->glu_dim;
      f.flat_start = fs;
      f.flat_stop = fs + fl;
      st = rs_sd_add_factory(sd, &f);
    } else {
      st = rs_sd_add_tensor(sd, &p);
    }
    free(p.data);
    if (st) return st;
  } while (np > 0 && rs__box_next(np, poff, psz, pidx));
  return RS_OK;
}

static rs_status add_object_entry(const rs_spec_object *so, rs_fill fill, int rank, rs_state_dict *sd) {
  int pos = rs_mesh_pos_of_rank(&so->mesh, rank);
  if (pos < 0) return RS_OK;
  int64_t coord[RS_MAX_MESH_DIMS];
  rs_mesh_coord(&so->mesh, pos, coord);
  rs_sh_object o;
  memset(&o, 0, sizeof o);
  o.key = so->key;
  o.ndim = so->ndims;
  int used[RS_MAX_MESH_DIMS] = {0};
  for (int i = 0; i < so->ndims; ++i) {
    o.global_shape[i] = so->mesh.size[so->dims[i]];
    o.global_offset[i] = coord[so->dims[i]];
    used[so->dims[i]] = 1;
  }
  int k = 0;
  for (int d = 0; d < so->mesh.ndim; ++d)
    if (!used[d]) o.replica.v[k++] = coord[d];
  o.replica.n = k ? k : 1;
  o.replica.is_tuple = k > 1;
  char uk[2048];
  rs_sh_object_unique_key(&o, uk, sizeof uk);
  uint8_t buf[64];
  rs_ckpt_object_value(fill == RS_FILL_VALUES ? so->seed : so->seed ^ 0x5a5a5a5aull, uk, buf, &o.len);
  o.data = buf;
  return rs_sd_add_object(sd, &o);
}

rs_status rs_state_spec_build(const rs_state_spec *s, rs_fill fill, rs_ckpt_world *w) {
  return rs_state_spec_build_rank(s, fill, -1, w);
}

rs_status rs_state_spec_build_rank(const rs_state_spec *s, rs_fill fill, int only, rs_ckpt_world *w) {
  rs_status st = rs_ckpt_world_init(w, s->world);
  if (st) return st;
  for (int r = 0; r < s->world && !st; ++r) {
    if (only >= 0 && r != only) continue;
    rs_state_dict *sd = &w->sd[r];
    for (int i = 0; i < s->nt && !st; ++i) st = add_tensor_entries(&s->t[i], fill, r, sd);
    for (int i = 0; i < s->no && !st; ++i) st = add_object_entry(&s->o[i], fill, r, sd);
    if (fill == RS_FILL_VALUES)
      for (int i = 0; i < s->ncommon && !st; ++i)
        st = rs_sd_add_kv(&sd->common, &sd->ncommon, &sd->capc, s->common[i].key, s->common[i].val,
                          s->common[i].len);
    for (int i = 0; i < s->nnp && !st; ++i)
      st = rs_sd_add_kv(&sd->nonpersistent, &sd->nnp, &sd->capn, s->nonpersistent[i].key,
                        s->nonpersistent[i].val, s->nonpersistent[i].len);
  }
  if (st) rs_ckpt_world_free(w);
  return st;
}
