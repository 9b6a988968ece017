/* model_json.c - the JSON form of a cross-config resharding model (docs/p2p.md): parameters or a
 * transformer template, and a source and destination configuration each given as a Megatron-style
 * template or as explicit meshes plus per-parameter layouts. Integers are read exactly (core/json.h);
 * every error names the field. */
#include <stdlib.h>
#include <string.h>
#include "core/case_json.h"
#include "core/checked.h"
#include "core/json.h"
#include "core/p2p/p2p_internal.h"
#include "reshard/case.h"

static rs_status str_member(const cJSON *obj, const char *parent, const char *key, const char **out) {
  const cJSON *it;
  rs_status st = rs_json_member(obj, parent, key, cJSON_String, &it);
  *out = it ? it->valuestring : NULL;
  return st;
}

static rs_status int_member(const cJSON *obj, const char *parent, const char *key, int64_t lo,
                            int64_t hi, int64_t dflt, int64_t *out) {
  *out = dflt;
  return rs_json_i64_member(obj, parent, key, lo, hi, 0, out);
}

static rs_status read_params(const cJSON *arr, rs_p2p_model *m) {
  if (!cJSON_IsArray(arr)) return rs_fail(RS_ERR_INVALID, "model.params: expected an array");
  int64_t n = cJSON_GetArraySize(arr);
  m->param = calloc((size_t)(n ? n : 1), sizeof *m->param);
  if (!m->param) return rs_fail(RS_ERR_NOMEM, "model: out of memory");
  int64_t i = 0;
  const cJSON *it;
  rs_status st;
  cJSON_ArrayForEach(it, arr) {
    char f[64];
    snprintf(f, sizeof f, "model.params[%lld]", (long long)i);
    if (!cJSON_IsObject(it)) return rs_fail(RS_ERR_INVALID, "%s: expected an object", f);
    rs_p2p_param *p = &m->param[i];
    const char *name, *dt, *xf;
    if ((st = str_member(it, f, "name", &name)) || (st = str_member(it, f, "dtype", &dt)) ||
        (st = str_member(it, f, "transform", &xf)))
      return st;
    if (!name || !*name) return rs_fail(RS_ERR_INVALID, "%s.name: missing", f);
    for (int64_t j = 0; j < i; ++j)
      if (!strcmp(m->param[j].name, name)) return rs_fail(RS_ERR_INVALID, "%s.name: '%s' appears twice", f, name);
    p->name = strdup(name);
    m->nparams = i + 1;
    if (!p->name) return rs_fail(RS_ERR_NOMEM, "model: out of memory");
    if (!dt) return rs_fail(RS_ERR_INVALID, "%s.dtype: missing", f);
    if ((st = rs_dtype_parse(dt, &p->t.dtype))) {
      char pre[96];
      snprintf(pre, sizeof pre, "%s.dtype: ", f);
      return rs_fail_prefix(st, pre);
    }
    if (xf && !strcmp(xf, "mxfp8")) p->transform = RS_XFORM_MXFP8;
    else if (xf && strcmp(xf, "none"))
      return rs_fail(RS_ERR_INVALID, "%s.transform: unknown '%s' (mxfp8, none)", f, xf);
    const cJSON *sh;
    if ((st = rs_json_member(it, f, "shape", cJSON_Array, &sh))) return st;
    if (!sh) return rs_fail(RS_ERR_INVALID, "%s.shape: missing", f);
    char fs[80];
    snprintf(fs, sizeof fs, "%s.shape", f);
    int nd = 0;
    if ((st = rs_json_i64_array(sh, fs, RS_MAX_DIMS, 0, INT64_MAX, p->t.shape, &nd))) return st;
    p->t.ndim = nd;
    i++;
  }
  return RS_OK;
}

static rs_status read_arch(const cJSON *o, rs_p2p_arch *a) {
  const char *P = "model.template";
  if (!cJSON_IsObject(o)) return rs_fail(RS_ERR_INVALID, "%s: expected an object", P);
  memset(a, 0, sizeof *a);
  rs_status st;
  if ((st = int_member(o, P, "layers", 0, 100000, -1, &a->layers)) ||
      (st = int_member(o, P, "hidden", 0, 1ll << 31, -1, &a->hidden)) ||
      (st = int_member(o, P, "ffn", 0, 1ll << 31, -1, &a->ffn)) ||
      (st = int_member(o, P, "vocab", 0, 1ll << 31, -1, &a->vocab)) ||
      (st = int_member(o, P, "experts", 0, 1ll << 31, 0, &a->experts)))
    return st;
  const char *req[] = {"layers", "hidden", "ffn", "vocab"};
  int64_t v[] = {a->layers, a->hidden, a->ffn, a->vocab};
  for (int i = 0; i < 4; ++i)
    if (v[i] < 0) return rs_fail(RS_ERR_INVALID, "%s.%s: missing", P, req[i]);
  const char *dt;
  if ((st = str_member(o, P, "dtype", &dt))) return st;
  a->dtype = RS_BF16;
  if (dt && (st = rs_dtype_parse(dt, &a->dtype))) return rs_fail_prefix(st, "model.template.dtype: ");
  const cJSON *b;
  if ((st = rs_json_member(o, P, "bias", cJSON_True | cJSON_False, &b))) return st;
  a->bias = b && cJSON_IsTrue(b);
  const cJSON *mx;
  if ((st = rs_json_member(o, P, "mxfp8", cJSON_Array, &mx))) return st;
  const cJSON *it;
  if (mx) cJSON_ArrayForEach(it, mx) {
    if (!cJSON_IsString(it) || strlen(it->valuestring) >= sizeof a->mxfp8[0])
      return rs_fail(RS_ERR_INVALID, "%s.mxfp8[%d]: expected a name suffix (string, < 64 chars)", P, a->nmxfp8);
    if (a->nmxfp8 >= 8) return rs_fail(RS_ERR_INVALID, "%s.mxfp8: at most 8 suffixes", P);
    snprintf(a->mxfp8[a->nmxfp8++], sizeof a->mxfp8[0], "%s", it->valuestring);
  }
  return RS_OK;
}

/* Rank list of a config: "ranks" (explicit) or "first_rank" (consecutive). */
static rs_status read_ranks(const cJSON *o, const char *field, int64_t need, int32_t **out) {
  const cJSON *r;
  rs_status st = rs_json_member(o, field, "ranks", cJSON_Array, &r);
  *out = NULL;
  if (st || !r) return st;
  int64_t n = cJSON_GetArraySize(r);
  if (n != need)
    return rs_fail(RS_ERR_INVALID, "%s.ranks: %lld ranks for %lld mesh positions", field, (long long)n, (long long)need);
  int32_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  if (!v) return rs_fail(RS_ERR_NOMEM, "config: out of memory");
  int64_t i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, r) {
    char f[96];
    int64_t x;
    snprintf(f, sizeof f, "%s.ranks[%lld]", field, (long long)i);
    if ((st = rs_json_i64(it, f, 0, (1 << 24) - 1, &x))) {
      free(v);
      return st;
    }
    v[i++] = (int32_t)x;
  }
  *out = v;
  return RS_OK;
}

static rs_status read_sharding(const cJSON *o, const char *f, int mesh_ndim, int tndim, rs_sharding *s) {
  memset(s, 0, sizeof *s);
  const cJSON *pl, *ord;
  rs_status st;
  if ((st = rs_json_member(o, f, "placements", cJSON_Array, &pl)) ||
      (st = rs_json_member(o, f, "shard_order", cJSON_Array | cJSON_NULL, &ord)))
    return st;
  if (!pl) return rs_fail(RS_ERR_INVALID, "%s.placements: missing", f);
  if ((st = rs__json_placements(pl, f, mesh_ndim, tndim, s))) return st;
  return rs__json_shard_order(ord, f, mesh_ndim, tndim, s);
}

static rs_status read_explicit(const cJSON *o, const char *cn, rs_p2p_model *m, rs_p2p_config *c) {
  const cJSON *meshes, *params, *it;
  rs_status st;
  if ((st = rs_json_member(o, cn, "meshes", cJSON_Array, &meshes)) ||
      (st = rs_json_member(o, cn, "params", cJSON_Object, &params)))
    return st;
  if (!meshes) return rs_fail(RS_ERR_INVALID, "%s.meshes: missing (or give a template)", cn);
  if (!params) return rs_fail(RS_ERR_INVALID, "%s.params: missing", cn);
  c->nmesh = cJSON_GetArraySize(meshes);
  c->mesh = calloc((size_t)(c->nmesh ? c->nmesh : 1), sizeof *c->mesh);
  c->place = calloc((size_t)(m->nparams ? m->nparams : 1), sizeof *c->place);
  if (!c->mesh || !c->place) return rs_fail(RS_ERR_NOMEM, "config: out of memory");
  int i = 0;
  cJSON_ArrayForEach(it, meshes) {
    char f[64];
    snprintf(f, sizeof f, "%s.meshes[%d]", cn, i);
    rs_p2p_mesh *me = &c->mesh[i++];
    const cJSON *sh;
    if ((st = rs_json_member(it, f, "shape", cJSON_Array, &sh))) return st;
    if (!sh) return rs_fail(RS_ERR_INVALID, "%s.shape: missing", f);
    char fs[80];
    snprintf(fs, sizeof fs, "%s.shape", f);
    int nd;
    if ((st = rs_json_i64_array(sh, fs, RS_MAX_MESH_DIMS, 1, 1 << 24, me->size, &nd))) return st;
    if (nd < 1) return rs_fail(RS_ERR_INVALID, "%s: a mesh has 1..%d dims", fs, RS_MAX_MESH_DIMS);
    me->ndim = nd;
    int64_t n = 1;
    for (int d = 0; d < nd; ++d)
      if (!rs__mul_ok(n, me->size[d], &n) || n > (1 << 24))
        return rs_fail(RS_ERR_INVALID, "%s: more than 2^24 ranks", fs);
    me->nranks = n;
    if ((st = read_ranks(it, f, n, &me->ranks))) return st;
    if (!me->ranks) {
      int64_t first;
      if ((st = int_member(it, f, "first_rank", 0, (1 << 24) - n, 0, &first))) return st;
      me->ranks = malloc((size_t)n * sizeof(int32_t));
      if (!me->ranks) return rs_fail(RS_ERR_NOMEM, "config: out of memory");
      for (int64_t q = 0; q < n; ++q) me->ranks[q] = (int32_t)(first + q);
    }
  }
  cJSON_ArrayForEach(it, params) {
    int64_t p;
    for (p = 0; p < m->nparams; ++p)
      if (!strcmp(m->param[p].name, it->string)) break;
    if (p == m->nparams) return rs_fail(RS_ERR_INVALID, "%s.params.%s: not a parameter of the model", cn, it->string);
  }
  for (int64_t p = 0; p < m->nparams; ++p) {
    char f[200];
    snprintf(f, sizeof f, "%s.params.%s", cn, m->param[p].name);
    const cJSON *lo = cJSON_GetObjectItemCaseSensitive(params, m->param[p].name);
    if (!cJSON_IsObject(lo)) return rs_fail(RS_ERR_INVALID, "%s: missing (every parameter needs a layout)", f);
    int64_t mi;
    if ((st = int_member(lo, f, "mesh", 0, c->nmesh - 1, 0, &mi))) return st;
    if (c->nmesh == 0) return rs_fail(RS_ERR_INVALID, "%s.meshes: empty", cn);
    c->place[p].mesh = (int32_t)mi;
    if ((st = read_sharding(lo, f, c->mesh[mi].ndim, m->param[p].t.ndim, &c->place[p].s))) return st;
  }
  return RS_OK;
}

static rs_status read_config(const cJSON *root, int which, const rs_p2p_arch *arch, rs_p2p_model *m) {
  const char *cn = which == RS_P2P_SRC ? "src" : "dst";
  const cJSON *o, *t;
  rs_status st = rs_json_member(root, "", cn, cJSON_Object, &o);
  if (st) return st;
  if (!o) return rs_fail(RS_ERR_INVALID, "%s: missing", cn);
  if ((st = rs_json_member(o, cn, "template", cJSON_Object, &t))) return st;
  if (!t) return read_explicit(o, cn, m, &m->cfg[which]);
  if (!arch) return rs_fail(RS_ERR_INVALID, "%s.template: needs a model template (model.template)", cn);
  char f[32];
  snprintf(f, sizeof f, "%s.template", cn);
  rs_p2p_template tm;
  if ((st = int_member(t, f, "tp", 1, 1 << 24, 1, &tm.tp)) || (st = int_member(t, f, "pp", 1, 1 << 24, 1, &tm.pp)) ||
      (st = int_member(t, f, "dp", 1, 1 << 24, 1, &tm.dp)) || (st = int_member(t, f, "ep", 1, 1 << 24, 1, &tm.ep)))
    return st;
  int64_t world;
  if (!rs__mul_ok(tm.tp, tm.pp, &world) || !rs__mul_ok(world, tm.dp, &world) || world > (1 << 24))
    return rs_fail(RS_ERR_INVALID, "%s: tp*pp*dp exceeds 2^24 ranks", f);
  int32_t *ranks = NULL;
  int64_t first;
  if ((st = read_ranks(o, cn, world, &ranks))) return st;
  if ((st = int_member(o, cn, "first_rank", 0, (1 << 24) - world, 0, &first))) {
    free(ranks);
    return st;
  }
  st = rs_p2p_config_template(m, which, arch, &tm, ranks, (int32_t)first);
  free(ranks);
  return st;
}

/* *out is written only on success. */
static rs_status model_reader(const cJSON *root, void *out) {
  rs_status st = RS_OK;
  rs_p2p_model m;
  memset(&m, 0, sizeof m);
  const cJSON *model, *params, *tmpl, *seed;
  rs_p2p_arch arch;
  int have_arch = 0;
  if (!cJSON_IsObject(root)) st = rs_fail(RS_ERR_INVALID, "model file: expected a JSON object");
  if (!st) st = rs_json_member(root, "", "model", cJSON_Object, &model);
  if (!st && !model) st = rs_fail(RS_ERR_INVALID, "model: missing");
  if (!st) st = rs_json_member(root, "", "seed", cJSON_Number, &seed);
  if (!st && seed) st = rs_json_u64(seed, "seed", &m.seed);
  if (!st) st = rs_json_member(model, "model", "params", cJSON_Array, &params);
  if (!st) st = rs_json_member(model, "model", "template", cJSON_Object, &tmpl);
  if (!st && !!params == !!tmpl) st = rs_fail(RS_ERR_INVALID, "model: give exactly one of params and template");
  if (!st && params) st = read_params(params, &m);
  if (!st && tmpl && !(st = read_arch(tmpl, &arch))) {
    have_arch = 1;
    st = rs_p2p_arch_params(&arch, &m);
  }
  for (int k = 0; k < 2 && !st; ++k) st = read_config(root, k, have_arch ? &arch : NULL, &m);
  if (!st) st = rs_p2p_model_finish(&m);
  if (st) {
    rs_p2p_model_free(&m);
    return st;
  }
  *(rs_p2p_model *)out = m;
  return RS_OK;
}

rs_status rs_p2p_model_parse(const char *text, rs_p2p_model *out) { return rs__json_from_text(text, model_reader, out); }

rs_status rs_p2p_model_load(const char *path, rs_p2p_model *out) { return rs__json_from_file(path, model_reader, out); }

/* ---- writer ---- */

static cJSON *ints(const int64_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; ++i) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v[i]);
    cJSON_AddItemToArray(a, cJSON_CreateRaw(buf));
  }
  return a;
}

rs_status rs_p2p_model_to_json(const rs_p2p_model *m, const char *extra, char **out) {
  cJSON *root = cJSON_CreateObject();
  char sb[32];
  snprintf(sb, sizeof sb, "%llu", (unsigned long long)m->seed);
  cJSON_AddItemToObject(root, "seed", cJSON_CreateRaw(sb));
  cJSON *model = cJSON_AddObjectToObject(root, "model");
  cJSON *ps = cJSON_AddArrayToObject(model, "params");
  for (int64_t p = 0; p < m->nparams; ++p) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", m->param[p].name);
    cJSON_AddItemToObject(o, "shape", ints(m->param[p].t.shape, m->param[p].t.ndim));
    cJSON_AddStringToObject(o, "dtype", rs_dtype_name(m->param[p].t.dtype));
    if (m->param[p].transform == RS_XFORM_MXFP8) cJSON_AddStringToObject(o, "transform", "mxfp8");
    cJSON_AddItemToArray(ps, o);
  }
  for (int k = 0; k < 2; ++k) {
    const rs_p2p_config *c = &m->cfg[k];
    cJSON *co = cJSON_AddObjectToObject(root, k ? "dst" : "src");
    cJSON *ms = cJSON_AddArrayToObject(co, "meshes");
    for (int32_t i = 0; i < c->nmesh; ++i) {
      cJSON *mo = cJSON_CreateObject();
      cJSON_AddItemToObject(mo, "shape", ints(c->mesh[i].size, c->mesh[i].ndim));
      cJSON *rk = cJSON_AddArrayToObject(mo, "ranks");
      for (int64_t q = 0; q < c->mesh[i].nranks; ++q) {
        char b[16];
        snprintf(b, sizeof b, "%d", c->mesh[i].ranks[q]);
        cJSON_AddItemToArray(rk, cJSON_CreateRaw(b));
      }
      cJSON_AddItemToArray(ms, mo);
    }
    cJSON *po = cJSON_AddObjectToObject(co, "params");
    for (int64_t p = 0; p < m->nparams; ++p) {
      const rs_p2p_place *pl = &c->place[p];
      cJSON *lo = cJSON_CreateObject();
      char b[32];
      snprintf(b, sizeof b, "%d", pl->mesh);
      cJSON_AddItemToObject(lo, "mesh", cJSON_CreateRaw(b));
      cJSON *pa = cJSON_AddArrayToObject(lo, "placements");
      for (int i = 0; i < pl->s.mesh_ndim; ++i) {
        rs_format_placement(pl->s.p[i], b, sizeof b);
        cJSON_AddItemToArray(pa, cJSON_CreateString(b));
      }
      if (!rs_sharding_is_default_order(&pl->s, m->param[p].t.ndim)) {
        cJSON *so = cJSON_AddArrayToObject(lo, "shard_order");
        for (int d = 0; d < m->param[p].t.ndim; ++d) {
          if (!pl->s.order_len[d]) continue;
          cJSON *e = cJSON_CreateObject();
          int64_t md[RS_MAX_MESH_DIMS];
          for (int i = 0; i < pl->s.order_len[d]; ++i) md[i] = pl->s.order[d][i];
          cJSON_AddItemToObject(e, "tensor_dim", cJSON_CreateNumber((double)d));
          cJSON_AddItemToObject(e, "mesh_dims", ints(md, pl->s.order_len[d]));
          cJSON_AddItemToArray(so, e);
        }
      }
      cJSON_AddItemToObject(po, m->param[p].name, lo);
    }
  }
  if (extra) {
    cJSON *x = cJSON_Parse(extra), *it;
    if (x) {
      while ((it = x->child)) {
        cJSON_DetachItemViaPointer(x, it);
        cJSON_AddItemToObject(root, it->string, it);
      }
      cJSON_Delete(x);
    }
  }
  *out = cJSON_Print(root);
  cJSON_Delete(root);
  if (!*out) return rs_fail(RS_ERR_NOMEM, "model: out of memory");
  return RS_OK;
}

/* A config made from a template, as the model file writes it: the template and the explicit rank
 * list (each stage's dense mesh holds its block of the list, in order). */
static cJSON *template_config(const rs_p2p_config *c, int moe) {
  cJSON *o = cJSON_CreateObject(), *t = cJSON_AddObjectToObject(o, "template");
  cJSON_AddNumberToObject(t, "tp", (double)c->tmpl.tp);
  cJSON_AddNumberToObject(t, "pp", (double)c->tmpl.pp);
  cJSON_AddNumberToObject(t, "dp", (double)c->tmpl.dp);
  cJSON_AddNumberToObject(t, "ep", (double)c->tmpl.ep);
  cJSON *rk = cJSON_AddArrayToObject(o, "ranks");
  for (int64_t s = 0; s < c->tmpl.pp; ++s) {
    const rs_p2p_mesh *me = &c->mesh[s * (moe ? 2 : 1)];
    for (int64_t q = 0; q < me->nranks; ++q) cJSON_AddItemToArray(rk, cJSON_CreateNumber(me->ranks[q]));
  }
  return o;
}

rs_status rs_p2p_model_to_template_json(const rs_p2p_model *m, char **out) {
  *out = NULL;
  if (!m->arch_set) return rs_fail(RS_ERR_INVALID, "model: not made from a model template");
  char *ex = NULL, *back_ex = NULL, *text = NULL;
  rs_status st = rs_p2p_model_to_json(m, NULL, &ex);
  if (st) return st;
  cJSON *root = cJSON_Parse(ex);
  if (!root) {
    free(ex);
    return rs_fail(RS_ERR_NOMEM, "model: out of memory");
  }
  const rs_p2p_arch *a = &m->arch;
  cJSON *model = cJSON_CreateObject(), *t = cJSON_AddObjectToObject(model, "template");
  cJSON_AddNumberToObject(t, "layers", (double)a->layers);
  cJSON_AddNumberToObject(t, "hidden", (double)a->hidden);
  cJSON_AddNumberToObject(t, "ffn", (double)a->ffn);
  cJSON_AddNumberToObject(t, "vocab", (double)a->vocab);
  cJSON_AddNumberToObject(t, "experts", (double)a->experts);
  cJSON_AddStringToObject(t, "dtype", rs_dtype_name(a->dtype));
  cJSON_AddBoolToObject(t, "bias", a->bias);
  if (a->nmxfp8) {
    cJSON *mx = cJSON_AddArrayToObject(t, "mxfp8");
    for (int i = 0; i < a->nmxfp8; ++i) cJSON_AddItemToArray(mx, cJSON_CreateString(a->mxfp8[i]));
  }
  cJSON_ReplaceItemInObjectCaseSensitive(root, "model", model);
  for (int k = 0; k < 2; ++k)
    if (m->cfg[k].is_template)
      cJSON_ReplaceItemInObjectCaseSensitive(root, k ? "dst" : "src", template_config(&m->cfg[k], a->experts > 0));
  text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) st = rs_fail(RS_ERR_NOMEM, "model: out of memory");
  /* only a template that gives this very model back (a shrunk model may have lost parameters) */
  rs_p2p_model back;
  if (!st && rs_p2p_model_parse(text, &back) == RS_OK) {
    if (rs_p2p_model_to_json(&back, NULL, &back_ex) || strcmp(ex, back_ex) != 0)
      st = rs_fail(RS_ERR_INVALID, "model: its template does not give this model back");
    rs_p2p_model_free(&back);
  } else if (!st) {
    st = rs_fail(RS_ERR_INVALID, "model: its template form does not parse");
  }
  free(ex);
  free(back_ex);
  if (st) free(text);
  else *out = text;
  return st;
}
