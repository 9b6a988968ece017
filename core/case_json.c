/* case_json.c - the JSON form of a case (cJSON). Unknown keys are ignored so fixtures can carry
 * expectations; every error names the offending field. */
#include <cjson/cJSON.h>
#include "core/mutant.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "reshard/case.h"
#include "core/checked.h"
#include "core/json.h"
#include "core/case_json.h"

/* Integers are read exactly from their JSON text (core/json.h): 0.5 or 1e3 is not an integer and
 * 9007199254740993 stays itself. Each bound below is the widest the model can hold, so a value is
 * refused before any arithmetic sees it. */
#define MESH_SIZE_MAX RS_MAX_RANKS

rs_status rs__json_shard_order(const cJSON *ord, const char *field, int mesh_ndim, int tensor_ndim, rs_sharding *s) {
  const cJSON *it;
  rs_status st;
  if (!ord || cJSON_IsNull(ord)) return RS_OK;
  if (!cJSON_IsArray(ord)) return rs_fail(RS_ERR_INVALID, "%s.shard_order: expected an array", field);
  /* Partial: the placements set the default order; an entry overrides its tensor dim only (as
   * `--order` does, rs_parse_order). Mutant 658: the listed dims replace the whole order. */
  if (RS_MUTANT(658)) memset(s->order_len, 0, sizeof s->order_len);
  int listed[RS_MAX_DIMS] = {0};
  int e = 0;
  cJSON_ArrayForEach(it, ord) {
    char f[200];
    snprintf(f, sizeof f, "%.150s.shard_order[%d]", field, e);
    if (!cJSON_IsObject(it)) return rs_fail(RS_ERR_INVALID, "%s: expected an object", f);
    const cJSON *td = cJSON_GetObjectItemCaseSensitive(it, "tensor_dim");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(it, "mesh_dims");
    char ft[220];
    snprintf(ft, sizeof ft, "%s.tensor_dim", f);
    int64_t d;
    if ((st = rs_json_i64(td, ft, -RS_MAX_DIMS, RS_MAX_DIMS - 1, &d))) return st;
    if (d < 0) d += tensor_ndim;
    if (d < 0 || d >= tensor_ndim)
      return rs_fail(RS_ERR_INVALID, "%s: out of range for a %d-d tensor", ft, tensor_ndim);
    /* a second entry for one tensor dim would silently replace the first */
    if (listed[d]++ && !RS_MUTANT(232)) /* planted: the later entry silently wins */
      return rs_fail(RS_ERR_INVALID, "%s: tensor dim %d is listed twice", ft, (int)d);
    int64_t dims[RS_MAX_MESH_DIMS];
    int n;
    snprintf(ft, sizeof ft, "%s.mesh_dims", f);
    if ((st = rs_json_i64_array(md, ft, RS_MAX_MESH_DIMS, 0, mesh_ndim - 1, dims, &n))) return st;
    for (int j = 0; j < n; ++j) s->order[d][j] = (int8_t)dims[j];
    s->order_len[d] = (int8_t)n;
    e++;
  }
  return RS_OK;
}

rs_status rs__json_placements(const cJSON *pl, const char *field, int mesh_ndim, int tensor_ndim, rs_sharding *s) {
  int k = 0;
  const cJSON *it;
  rs_status st;
  cJSON_ArrayForEach(it, pl) {
    if (!cJSON_IsString(it)) return rs_fail(RS_ERR_INVALID, "%s.placements[%d]: expected a string", field, k);
    if (k >= RS_MAX_MESH_DIMS) return rs_fail(RS_ERR_INVALID, "%s.placements: too many", field);
    if ((st = rs_parse_placement(it->valuestring, &s->p[k]))) {
      char pre[200];
      snprintf(pre, sizeof pre, "%.150s.placements[%d]: ", field, k);
      return rs_fail_prefix(st, pre);
    }
    k++;
  }
  if (k != mesh_ndim)
    return rs_fail(RS_ERR_INVALID, "%s.placements: %d placements for a %d-d mesh", field, k, mesh_ndim);
  s->mesh_ndim = k;
  if ((st = rs_sharding_set_default_order(s, tensor_ndim))) {
    char pre[200];
    snprintf(pre, sizeof pre, "%.150s.", field);
    return rs_fail_prefix(st, pre);
  }
  return RS_OK;
}

static rs_status read_sharding(const cJSON *obj, const char *field, int mesh_ndim, int tensor_ndim,
                               rs_sharding *s) {
  memset(s, 0, sizeof *s);
  if (!cJSON_IsObject(obj)) return rs_fail(RS_ERR_INVALID, "%s: expected an object", field);
  const cJSON *pl = cJSON_GetObjectItemCaseSensitive(obj, "placements");
  if (!cJSON_IsArray(pl)) return rs_fail(RS_ERR_INVALID, "%s.placements: expected an array of strings", field);
  rs_status st = rs__json_placements(pl, field, mesh_ndim, tensor_ndim, s);
  if (st) return st;
  return rs__json_shard_order(cJSON_GetObjectItemCaseSensitive(obj, "shard_order"), field, mesh_ndim, tensor_ndim, s);
}

/* A seed is a JSON integer (exact, 0..2^64-1) or, as older files wrote seeds above 2^53, a string
 * of decimal digits. */
static rs_status parse_seed(const cJSON *seed, uint64_t *out) {
  if (!seed || cJSON_IsNull(seed)) { *out = 0; return RS_OK; }
  if (cJSON_IsNumber(seed)) return rs_json_u64(seed, "seed", out);
  if (cJSON_IsString(seed)) {
    const char *p = seed->valuestring;
    uint64_t v = 0;
    if (!*p) return rs_fail(RS_ERR_INVALID, "seed: not an integer");
    for (; *p; ++p) {
      if (*p < '0' || *p > '9') return rs_fail(RS_ERR_INVALID, "seed: '%s' is not a decimal integer", seed->valuestring);
      if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
        return rs_fail(RS_ERR_INVALID, "seed: '%s' is beyond 2^64-1", seed->valuestring);
    }
    *out = v;
    return RS_OK;
  }
  return rs_fail(RS_ERR_INVALID, "seed: expected an integer or a string");
}

/* Optional string member: absent or null leaves *out NULL. */
static rs_status opt_string(const cJSON *root, const char *key, const char **out) {
  *out = NULL;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!v || cJSON_IsNull(v)) return RS_OK;
  if (!cJSON_IsString(v)) return rs_fail(RS_ERR_INVALID, "%s: expected a string", key);
  *out = v->valuestring;
  return RS_OK;
}

static rs_status case_from_cjson(const cJSON *root, rs_case *c) {
  rs_status st;
  memset(c, 0, sizeof *c);
  if (!cJSON_IsObject(root)) return rs_fail(RS_ERR_INVALID, "case: expected a JSON object");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
  if (name && !cJSON_IsNull(name) && !cJSON_IsString(name))
    return rs_fail(RS_ERR_INVALID, "name: expected a string");
  if (cJSON_IsString(name)) snprintf(c->name, sizeof c->name, "%s", name->valuestring);

  const cJSON *mesh = cJSON_GetObjectItemCaseSensitive(root, "mesh");
  if (!cJSON_IsObject(mesh)) return rs_fail(RS_ERR_INVALID, "mesh: expected an object");
  int64_t sizes[RS_MAX_MESH_DIMS];
  int nd;
  if ((st = rs_json_i64_array(cJSON_GetObjectItemCaseSensitive(mesh, "shape"), "mesh.shape",
                              RS_MAX_MESH_DIMS, 1, MESH_SIZE_MAX, sizes, &nd)))
    return st;
  int64_t nranks;
  if (!rs__numel_ok(sizes, nd, &nranks) || nranks > RS_MAX_RANKS)
    return rs_fail(RS_ERR_INVALID, "mesh.shape: more than %d ranks", RS_MAX_RANKS);
  const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(mesh, "ranks");
  if (ranks && !cJSON_IsNull(ranks)) {
    static _Thread_local int64_t r64[RS_MAX_RANKS];
    static _Thread_local int32_t r32[RS_MAX_RANKS];
    int nr;
    if ((st = rs_json_i64_array(ranks, "mesh.ranks", RS_MAX_RANKS, 0, INT32_MAX, r64, &nr))) return st;
    if (nr != nranks)
      return rs_fail(RS_ERR_INVALID, "mesh.ranks: %d ranks for a mesh of %lld", nr, (long long)nranks);
    for (int i = 0; i < nr; ++i) r32[i] = (int32_t)r64[i];
    if ((st = rs_mesh_init(&c->mesh, nd, sizes, r32))) return st;
  } else if ((st = rs_mesh_init(&c->mesh, nd, sizes, NULL))) {
    return st;
  }

  const cJSON *tensor = cJSON_GetObjectItemCaseSensitive(root, "tensor");
  if (!cJSON_IsObject(tensor)) return rs_fail(RS_ERR_INVALID, "tensor: expected an object");
  if ((st = rs_json_i64_array(cJSON_GetObjectItemCaseSensitive(tensor, "shape"), "tensor.shape",
                              RS_MAX_DIMS, 0, INT64_MAX, c->tensor.shape, &c->tensor.ndim)))
    return st;
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(tensor, "dtype");
  if (!cJSON_IsString(dt)) return rs_fail(RS_ERR_INVALID, "tensor.dtype: expected a string");
  if ((st = rs_dtype_parse(dt->valuestring, &c->tensor.dtype))) return rs_fail_prefix(st, "tensor.");
  int64_t nbytes;
  if ((st = rs_tensor_nbytes(&c->tensor, &nbytes))) return st;

  if ((st = read_sharding(cJSON_GetObjectItemCaseSensitive(root, "src"), "src", nd, c->tensor.ndim, &c->src)))
    return st;
  if ((st = read_sharding(cJSON_GetObjectItemCaseSensitive(root, "dst"), "dst", nd, c->tensor.ndim, &c->dst)))
    return st;
  if ((st = parse_seed(cJSON_GetObjectItemCaseSensitive(root, "seed"), &c->seed))) return st;

  const char *text;
  if ((st = opt_string(root, "values", &text))) return st;
  if (text) {
    if (strcmp(text, "bits") == 0) c->values = RS_VALUES_BITS;
    else if (strcmp(text, "exact") == 0) c->values = RS_VALUES_EXACT;
    else if (strcmp(text, "order") == 0) c->values = RS_VALUES_ORDER;
    else if (strcmp(text, "wrap") == 0) c->values = RS_VALUES_WRAP;
    else return rs_fail(RS_ERR_INVALID, "values: '%s' is not bits, exact, order or wrap", text);
  } else {
    c->values = rs_case_default_values(c);
  }
  if ((st = opt_string(root, "planner", &text))) return st;
  if (text && (st = rs_planner_parse(text, &c->planner))) return st;
  if ((st = opt_string(root, "cost", &text))) return st;
  if (text) {
    if (strcmp(text, "seed") == 0) c->cost = RS_COST_SEED;
    else if (strcmp(text, "pytorch") == 0) c->cost = RS_COST_PYTORCH;
    else return rs_fail(RS_ERR_INVALID, "cost: '%s', expected \"seed\" or \"pytorch\"", text);
  }
  if ((st = opt_string(root, "enumeration", &text))) return st;
  if (text && (st = rs_enumeration_parse(text, &c->enumeration))) return st;
  return rs_case_validate(c);
}

rs_status rs__case_from_cjson(const cJSON *root, rs_case *out) { return case_from_cjson(root, out); }

static rs_status case_reader(const cJSON *root, void *out) { return case_from_cjson(root, out); }

rs_status rs_case_from_json(const char *text, rs_case *out) { return rs__json_from_text(text, case_reader, out); }

rs_status rs_case_from_file(const char *path, rs_case *out) { return rs__json_from_file(path, case_reader, out); }

/* Integers are written from their int64 text (cJSON_CreateRaw), never through a double, so a
 * size or seed beyond 2^53 reads back as itself. */
static cJSON *raw_int(long long v) {
  char b[24];
  snprintf(b, sizeof b, "%lld", v);
  return cJSON_CreateRaw(b);
}

static cJSON *int_array(const int64_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; ++i) cJSON_AddItemToArray(a, raw_int((long long)v[i]));
  return a;
}

static cJSON *sharding_json(const rs_sharding *s, int tensor_ndim) {
  cJSON *o = cJSON_CreateObject();
  cJSON *pl = cJSON_AddArrayToObject(o, "placements");
  for (int m = 0; m < s->mesh_ndim; ++m) {
    char buf[32];
    rs_format_placement(s->p[m], buf, sizeof buf);
    cJSON_AddItemToArray(pl, cJSON_CreateString(buf));
  }
  cJSON *ord = cJSON_AddArrayToObject(o, "shard_order");
  for (int d = 0; d < tensor_ndim; ++d) {
    if (!s->order_len[d]) continue;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "tensor_dim", d);
    int64_t dims[RS_MAX_MESH_DIMS];
    for (int k = 0; k < s->order_len[d]; ++k) dims[k] = s->order[d][k];
    cJSON_AddItemToObject(e, "mesh_dims", int_array(dims, s->order_len[d]));
    cJSON_AddItemToArray(ord, e);
  }
  return o;
}

cJSON *rs__case_to_cjson(const rs_case *c) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  if (c->name[0]) cJSON_AddStringToObject(root, "name", c->name);
  cJSON *mesh = cJSON_AddObjectToObject(root, "mesh");
  cJSON_AddItemToObject(mesh, "shape", int_array(c->mesh.size, c->mesh.ndim));
  cJSON *ranks = cJSON_AddArrayToObject(mesh, "ranks");
  for (int i = 0; i < c->mesh.nranks; ++i) cJSON_AddItemToArray(ranks, cJSON_CreateNumber(c->mesh.ranks[i]));
  cJSON *tensor = cJSON_AddObjectToObject(root, "tensor");
  cJSON_AddItemToObject(tensor, "shape", int_array(c->tensor.shape, c->tensor.ndim));
  cJSON_AddStringToObject(tensor, "dtype", rs_dtype_name(c->tensor.dtype));
  cJSON_AddItemToObject(root, "src", sharding_json(&c->src, c->tensor.ndim));
  cJSON_AddItemToObject(root, "dst", sharding_json(&c->dst, c->tensor.ndim));
  char seed[24];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
  cJSON_AddItemToObject(root, "seed", cJSON_CreateRaw(seed));
  cJSON_AddStringToObject(root, "values", c->values == RS_VALUES_EXACT   ? "exact"
                                        : c->values == RS_VALUES_ORDER ? "order"
                                        : c->values == RS_VALUES_WRAP  ? "wrap"
                                                                       : "bits");
  cJSON_AddStringToObject(root, "planner", rs_planner_name(c->planner));
  cJSON_AddStringToObject(root, "cost", c->cost == RS_COST_PYTORCH ? "pytorch" : "seed");
  cJSON_AddStringToObject(root, "enumeration", rs_enumeration_name(c->enumeration));
  return root;
}

char *rs_case_to_json(const rs_case *c) {
  cJSON *root = rs__case_to_cjson(c);
  if (!root) { rs_fail(RS_ERR_NOMEM, "json: out of memory"); return NULL; }
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!s) rs_fail(RS_ERR_NOMEM, "json: out of memory");
  return s;
}
