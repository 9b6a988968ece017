/* expected.c - typed reading of a fixture's "expected" block (see expected.h). Every member is
 * dispatched by name, so a duplicated key, an unknown key or a key of the wrong type is refused
 * with its path, and a rank entry is checked against the case's mesh before it is used as an index. */
#include "core/expected.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/json.h"

static rs_status dup_key(const cJSON *obj, const cJSON *m, const char *field) {
  for (const cJSON *o = obj->child; o && o != m; o = o->next)
    if (o->string && strcmp(o->string, m->string) == 0)
      return rs_fail(RS_ERR_INVALID, "%s.%s: key appears twice", field, m->string);
  return RS_OK;
}

static rs_status read_hex64(const cJSON *v, const char *f, uint64_t *out) {
  if (!cJSON_IsString(v)) return rs_fail(RS_ERR_INVALID, "%s: expected a string of 16 hex digits", f);
  const char *s = v->valuestring;
  uint64_t x = 0;
  int n = 0;
  for (; s[n]; ++n) {
    char ch = s[n];
    int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
          : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
    if (d < 0 || n >= 16) return rs_fail(RS_ERR_INVALID, "%s: expected a string of 16 hex digits", f);
    x = x << 4 | (uint64_t)d;
  }
  if (n != 16) return rs_fail(RS_ERR_INVALID, "%s: expected a string of 16 hex digits", f);
  *out = x;
  return RS_OK;
}

static rs_status read_dims(const cJSON *v, const char *f, int want_n, int64_t *out) {
  int n;
  rs_status st = rs_json_i64_array(v, f, RS_MAX_DIMS, 0, INT64_MAX, out, &n);
  if (st) return st;
  if (n != want_n) return rs_fail(RS_ERR_INVALID, "%s: %d entries for a %d-d tensor", f, n, want_n);
  return RS_OK;
}

static rs_status read_rank(const cJSON *e, const char *f, const rs_case *c, rs__exp_rank *r) {
  memset(r, 0, sizeof *r);
  r->pos = -1;
  if (!cJSON_IsObject(e)) return rs_fail(RS_ERR_INVALID, "%s: expected an object", f);
  char g[320];
  rs_status st;
  int have_rank = 0;
  for (const cJSON *m = e->child; m; m = m->next) {
    if ((st = dup_key(e, m, f))) return st;
    snprintf(g, sizeof g, "%s.%s", f, m->string);
    if (strcmp(m->string, "rank") == 0) {
      int64_t v;
      if ((st = rs_json_i64(m, g, 0, INT32_MAX, &v))) return st;
      r->rank = (int32_t)v;
      r->pos = rs_mesh_pos_of_rank(&c->mesh, r->rank);
      if (r->pos < 0) return rs_fail(RS_ERR_INVALID, "%s: rank %d is not in the mesh", g, (int)r->rank);
      have_rank = 1;
    } else if (strcmp(m->string, "coord") == 0) {
      int n;
      if ((st = rs_json_i64_array(m, g, RS_MAX_MESH_DIMS, 0, RS_MAX_RANKS - 1, r->coord, &n))) return st;
      if (n != c->mesh.ndim) return rs_fail(RS_ERR_INVALID, "%s: %d entries for a %d-d mesh", g, n, c->mesh.ndim);
      for (int i = 0; i < n; ++i)
        if (r->coord[i] >= c->mesh.size[i])
          return rs_fail(RS_ERR_INVALID, "%s[%d]: %lld is outside the mesh", g, i, (long long)r->coord[i]);
      r->has_coord = 1;
    } else if (strcmp(m->string, "local_shape") == 0) {
      if ((st = read_dims(m, g, c->tensor.ndim, r->shape))) return st;
      r->has_shape = 1;
    } else if (strcmp(m->string, "global_offset") == 0) {
      if ((st = read_dims(m, g, c->tensor.ndim, r->offset))) return st;
      r->has_offset = 1;
    } else if (strcmp(m->string, "xxh3") == 0) {
      if ((st = read_hex64(m, g, &r->xxh3))) return st;
      r->has_xxh3 = 1;
    } else if (strcmp(m->string, "api_local_shape") == 0 || strcmp(m->string, "api_global_offset") == 0) {
      int64_t tmp[RS_MAX_DIMS];
      if ((st = read_dims(m, g, c->tensor.ndim, tmp))) return st; /* PyTorch's API answer: noted only */
    } else if (strcmp(m->string, "dtype") == 0) {
      if (!cJSON_IsString(m)) return rs_fail(RS_ERR_INVALID, "%s: expected a string", g);
    } else {
      return rs_fail(RS_ERR_INVALID, "%s: unknown key", g);
    }
  }
  if (!have_rank) return rs_fail(RS_ERR_INVALID, "%s.rank: required", f);
  if (r->has_coord) {
    int64_t want[RS_MAX_MESH_DIMS] = {0};
    rs_mesh_coord(&c->mesh, r->pos, want);
    for (int i = 0; i < c->mesh.ndim; ++i)
      if (want[i] != r->coord[i])
        return rs_fail(RS_ERR_INVALID, "%s.coord: not the coordinate of rank %d", f, (int)r->rank);
  }
  return RS_OK;
}

static rs_status read_collectives(const cJSON *m, const char *f, rs__expected *e) {
  if (!cJSON_IsObject(m)) return rs_fail(RS_ERR_INVALID, "%s: expected an object or null", f);
  e->has_collectives = 1;
  char g[320];
  rs_status st;
  for (const cJSON *k = m->child; k; k = k->next) {
    if ((st = dup_key(m, k, f))) return st;
    snprintf(g, sizeof g, "%s.%s", f, k->string);
    int which = -1;
    for (int i = RS_COLL_ALL_GATHER; i < RS_COLL_COUNT; ++i)
      if (strcmp(k->string, rs_collective_name((rs_collective)i)) == 0) which = i;
    /* PyTorch's planner names its Shard -> Partial(sum) zero-fill step (pytorch enumeration) */
    int zero_fill = strcmp(k->string, "shard_to_partial") == 0;
    if (which < 0 && !zero_fill) return rs_fail(RS_ERR_INVALID, "%s: not a collective", g);
    int64_t v;
    if ((st = rs_json_i64(k, g, 0, RS_MAX_STEPS, &v))) return st;
    if (zero_fill) e->shard_to_partial = (int)v;
    else e->collectives[which] = (int)v;
  }
  return RS_OK;
}

rs_status rs__expected_parse(const cJSON *exp, const char *field, int strict, const rs_case *c,
                             rs__expected *out) {
  memset(out, 0, sizeof *out);
  if (!cJSON_IsObject(exp)) return rs_fail(RS_ERR_INVALID, "%s: expected an object", field);
  char f[160];
  rs_status st = RS_OK;
  for (const cJSON *m = exp->child; m && !st; m = m->next) {
    if ((st = dup_key(exp, m, field))) break;
    snprintf(f, sizeof f, "%s.%s", field, m->string);
    if (cJSON_IsNull(m) && (strcmp(m->string, "ranks") == 0 || strcmp(m->string, "trace") == 0 ||
                            strcmp(m->string, "collectives") == 0 || strcmp(m->string, "error") == 0))
      continue; /* null: not recorded */
    if (strcmp(m->string, "ranks") == 0) {
      if (!cJSON_IsArray(m)) {
        st = rs_fail(RS_ERR_INVALID, "%s: expected an array of objects", f);
        break;
      }
      int n = cJSON_GetArraySize(m);
      if (n > c->mesh.nranks) {
        st = rs_fail(RS_ERR_INVALID, "%s: %d entries for a mesh of %d ranks", f, n, (int)c->mesh.nranks);
        break;
      }
      out->ranks = calloc((size_t)(n ? n : 1), sizeof *out->ranks);
      if (!out->ranks) {
        st = rs_fail(RS_ERR_NOMEM, "%s: out of memory", f);
        break;
      }
      out->has_ranks = 1;
      const cJSON *e;
      cJSON_ArrayForEach(e, m) {
        char g[200];
        snprintf(g, sizeof g, "%s[%d]", f, out->nranks);
        if ((st = read_rank(e, g, c, &out->ranks[out->nranks]))) break;
        for (int j = 0; j < out->nranks; ++j)
          if (out->ranks[j].pos == out->ranks[out->nranks].pos) {
            st = rs_fail(RS_ERR_INVALID, "%s.rank: rank %d appears twice", g, (int)out->ranks[j].rank);
            break;
          }
        if (st) break;
        out->nranks++;
      }
    } else if (strcmp(m->string, "trace") == 0) {
      if (!cJSON_IsString(m)) st = rs_fail(RS_ERR_INVALID, "%s: expected a string", f);
      else out->trace = m->valuestring;
    } else if (strcmp(m->string, "collectives") == 0) {
      st = read_collectives(m, f, out);
    } else if (strcmp(m->string, "error") == 0) {
      if (!cJSON_IsString(m)) st = rs_fail(RS_ERR_INVALID, "%s: expected a string", f);
      else out->error = m->valuestring;
    } else if (strcmp(m->string, "pytorch_test_comms") == 0) {
      int64_t v;
      st = rs_json_i64(m, f, 0, RS_MAX_STEPS, &v);
    } else if (strict) {
      st = rs_fail(RS_ERR_INVALID, "%s: unknown key (ranks, trace, collectives, error, pytorch_test_comms)", f);
    }
  }
  if (st) rs__expected_free(out);
  return st;
}

void rs__expected_free(rs__expected *e) {
  free(e->ranks);
  e->ranks = NULL;
  e->nranks = 0;
}
