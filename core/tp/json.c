/* json.c - the JSON form of a TP case (`reshard tp run CASE.json`), read through core/json.h
 * (exact integers) and written back in the same form. Unknown keys are ignored, so fixtures can
 * carry the recorded PyTorch results beside the case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/json.h"
#include "core/tp/tp_internal.h"

static const char *STYLE_KEYS[RS_TP_STYLE_COUNT] = {"colwise", "rowwise", "sequence", "none",
                                                    "prepare_input", "prepare_output"};

static rs_status get_pl(const cJSON *obj, const char *parent, const char *key, rs_placement *out) {
  const cJSON *it;
  rs_status st = rs_json_member(obj, parent, key, cJSON_String, &it);
  if (st || !it) return st;
  if ((st = rs_parse_placement(it->valuestring, out))) {
    char pre[160];
    snprintf(pre, sizeof pre, "%s.%s: ", parent, key);
    return rs_fail_prefix(st, pre);
  }
  return RS_OK;
}

static rs_status get_bool(const cJSON *obj, const char *parent, const char *key, int *out) {
  const cJSON *it;
  rs_status st = rs_json_member(obj, parent, key, cJSON_True | cJSON_False, &it);
  if (st || !it) return st;
  *out = cJSON_IsTrue(it);
  return RS_OK;
}

static rs_status read_module(const cJSON *o, int i, rs_tp_module *m) {
  char f[48];
  snprintf(f, sizeof f, "plan[%d]", i);
  memset(m, 0, sizeof *m);
  if (!cJSON_IsObject(o)) return rs_fail(RS_ERR_INVALID, "%s: expected an object", f);
  const cJSON *it;
  rs_status st;
  if ((st = rs_json_member(o, f, "path", cJSON_String, &it))) return st;
  if (it) {
    if (strlen(it->valuestring) >= sizeof m->path)
      return rs_fail(RS_ERR_INVALID, "%s.path: longer than %d characters", f, RS_TP_PATH_LEN - 1);
    snprintf(m->path, sizeof m->path, "%s", it->valuestring);
  }
  if ((st = rs_json_member(o, f, "module", cJSON_String, &it))) return st;
  if (!it) return rs_fail(RS_ERR_INVALID, "%s.module: required (linear, embedding, norm, layernorm or rmsnorm)", f);
  int k = -1;
  for (int j = 0; j < RS_TP_MODULE_COUNT; j++)
    if (strcmp(it->valuestring, rs_tp_module_name((rs_tp_module_kind)j)) == 0) k = j;
  if (k < 0)
    return rs_fail(RS_ERR_INVALID, "%s.module: '%s', expected linear, embedding, norm, layernorm or rmsnorm", f,
                   it->valuestring);
  m->kind = (rs_tp_module_kind)k;
  const int64_t MX = (int64_t)1 << 24;
  if (m->kind == RS_TP_LINEAR) {
    if ((st = rs_json_i64_member(o, f, "in", 1, MX, 1, &m->in)) ||
        (st = rs_json_i64_member(o, f, "out", 1, MX, 1, &m->out)) || (st = get_bool(o, f, "bias", &m->bias)))
      return st;
  } else if (m->kind == RS_TP_EMBEDDING) {
    if ((st = rs_json_i64_member(o, f, "vocab", 1, MX, 1, &m->in)) ||
        (st = rs_json_i64_member(o, f, "dim", 1, MX, 1, &m->out)))
      return st;
  } else {
    if ((st = rs_json_i64_member(o, f, "dim", 1, MX, 1, &m->in))) return st;
    m->out = m->in;
    m->bias = m->kind == RS_TP_LAYERNORM; /* nn.LayerNorm's default */
    if (m->kind == RS_TP_LAYERNORM && (st = get_bool(o, f, "bias", &m->bias))) return st;
  }
  if ((st = rs_json_member(o, f, "style", cJSON_String, &it))) return st;
  int sk = RS_TP_REPLICATE;
  if (it) {
    sk = -1;
    for (int j = 0; j < RS_TP_STYLE_COUNT; j++)
      if (strcmp(it->valuestring, STYLE_KEYS[j]) == 0) sk = j;
    if (sk < 0)
      return rs_fail(RS_ERR_INVALID,
                     "%s.style: '%s', expected colwise, rowwise, sequence, prepare_input, prepare_output or none",
                     f, it->valuestring);
  }
  rs_tp_style_default((rs_tp_style_kind)sk, &m->style);
  rs_tp_style *s = &m->style;
  int64_t sd = s->sequence_dim;
  /* an argument the case leaves out takes PyTorch's default (and stays out when written back) */
  static const char *ARG_KEYS[6] = {"input_layouts", "desired_input_layouts", "output_layouts",
                                    "desired_output_layouts", "use_local_output", "sequence_dim"};
  s->omitted = 0;
  for (int a = 0; a < 6; a++)
    if (!cJSON_GetObjectItemCaseSensitive(o, ARG_KEYS[a])) s->omitted |= 1u << a;
  s->omitted &= rs__tp_style_args(s->kind);
  if ((st = get_pl(o, f, "input_layouts", &s->input_layout)) ||
      (st = get_pl(o, f, "desired_input_layouts", &s->desired_input)) ||
      (st = get_pl(o, f, "output_layouts", &s->output_layout)) ||
      (st = get_pl(o, f, "desired_output_layouts", &s->desired_output)) ||
      (st = get_bool(o, f, "use_local_output", &s->use_local_output)) ||
      (st = rs_json_i64_member(o, f, "sequence_dim", -3, 2, 0, &sd)))
    return st;
  s->sequence_dim = (int)sd;
  return RS_OK;
}

static rs_status from_cjson(const cJSON *root, void *out) {
  rs_tp_case *c = out;
  memset(c, 0, sizeof *c);
  if (!cJSON_IsObject(root)) return rs_fail(RS_ERR_INVALID, "case: expected a JSON object");
  const cJSON *it, *mesh;
  rs_status st;
  if ((st = rs_json_member(root, "case", "name", cJSON_String, &it))) return st;
  if (it) snprintf(c->name, sizeof c->name, "%s", it->valuestring);
  if ((st = rs_json_member(root, "case", "mesh", cJSON_Object, &mesh))) return st;
  if (!mesh) return rs_fail(RS_ERR_INVALID, "mesh: required");
  int64_t sizes[RS_MAX_MESH_DIMS], r64[RS_MAX_RANKS];
  int32_t r32[RS_MAX_RANKS];
  int nd, nr = 0;
  if ((st = rs_json_member(mesh, "mesh", "shape", cJSON_Array, &it))) return st;
  if (!it) return rs_fail(RS_ERR_INVALID, "mesh.shape: required");
  if ((st = rs_json_i64_array(it, "mesh.shape", 2, 1, RS_MAX_RANKS, sizes, &nd))) return st;
  if ((st = rs_json_member(mesh, "mesh", "ranks", cJSON_Array, &it))) return st;
  if (it) {
    if ((st = rs_json_i64_array(it, "mesh.ranks", RS_MAX_RANKS, 0, INT32_MAX, r64, &nr))) return st;
    for (int i = 0; i < nr; i++) r32[i] = (int32_t)r64[i];
  }
  if ((st = rs_mesh_init(&c->mesh, nd, sizes, it ? r32 : NULL))) return st;
  if (it && nr != c->mesh.nranks)
    return rs_fail(RS_ERR_INVALID, "mesh.ranks: %d ranks for a mesh of %d", nr, (int)c->mesh.nranks);
  int64_t v = 0;
  if ((st = rs_json_i64_member(root, "case", "tp_dim", 0, 1, 0, &v))) return st;
  c->tp_dim = (int)v;
  c->dp_layout = nd == 2 ? rs_pl_shard(0) : rs_pl_replicate();
  if ((st = get_pl(root, "case", "dp_layout", &c->dp_layout))) return st;
  c->batch = c->seq = 1;
  c->vmax = 2;
  if ((st = rs_json_i64_member(root, "case", "batch", 1, (int64_t)1 << 24, 1, &c->batch)) ||
      (st = rs_json_i64_member(root, "case", "seq", 1, (int64_t)1 << 24, 1, &c->seq)) ||
      (st = rs_json_i64_member(root, "case", "vmax", 1, 1000, 0, &c->vmax)))
    return st;
  if ((st = rs_json_member(root, "case", "dtype", cJSON_String, &it))) return st;
  if (it) {
    if (strcmp(it->valuestring, "F32") == 0) c->dtype = RS_TP_F32;
    else if (strcmp(it->valuestring, "BF16") == 0) c->dtype = RS_TP_BF16;
    else if (strcmp(it->valuestring, "F16") == 0) c->dtype = RS_TP_F16;
    else return rs_fail(RS_ERR_INVALID, "dtype: '%s', expected F32, BF16 or F16", it->valuestring);
  }
  if ((st = rs_json_member(root, "case", "seed", cJSON_Number, &it))) return st;
  if (it && (st = rs_json_u64(it, "seed", &c->seed))) return st;
  const cJSON *plan, *block;
  if ((st = rs_json_member(root, "case", "plan", cJSON_Array, &plan)) ||
      (st = rs_json_member(root, "case", "block", cJSON_Object, &block)))
    return st;
  if (!plan == !block) return rs_fail(RS_ERR_INVALID, "case: give one of plan (modules) or block");
  if (plan) {
    int n = cJSON_GetArraySize(plan);
    if (n < 1 || n > RS_TP_MAX_MODULES)
      return rs_fail(RS_ERR_INVALID, "plan: %d modules, expected 1..%d", n, RS_TP_MAX_MODULES);
    int i = 0;
    cJSON_ArrayForEach(it, plan) {
      if ((st = read_module(it, i, &c->mod[i]))) return st;
      i++;
    }
    c->nmod = n;
    c->input_layout = c->mod[0].style.input_layout;
  } else {
    const cJSON *k;
    int64_t vocab, hidden, ffn;
    int bias = 0;
    if ((st = rs_json_member(block, "block", "kind", cJSON_String, &k))) return st;
    if ((st = rs_json_i64_member(block, "block", "vocab", 1, 1 << 20, 1, &vocab)) ||
        (st = rs_json_i64_member(block, "block", "hidden", 1, 1 << 20, 1, &hidden)) ||
        (st = rs_json_i64_member(block, "block", "ffn", 1, 1 << 20, 1, &ffn)) ||
        (st = get_bool(block, "block", "bias", &bias)))
      return st;
    if ((st = rs_tp_block_plan(k ? k->valuestring : "tp", vocab, hidden, ffn, bias, c))) return st;
  }
  if ((st = get_pl(root, "case", "input_layout", &c->input_layout))) return st;
  return rs__tp_case_check_static(c);
}

static rs_status from_cjson_validated(const cJSON *root, void *out) {
  rs_status st = from_cjson(root, out);
  return st ? st : rs__tp_forward(NULL, out, NULL);
}

rs_status rs__tp_case_parse(const char *text, rs_tp_case *out) { return rs__json_from_text(text, from_cjson, out); }

rs_status rs_tp_case_from_json(const char *text, rs_tp_case *out) {
  return rs__json_from_text(text, from_cjson_validated, out);
}

rs_status rs_tp_case_from_file(const char *path, rs_tp_case *out) {
  return rs__json_from_file(path, from_cjson_validated, out);
}

static void put_pl(cJSON *o, const char *key, rs_placement p) {
  char b[32];
  rs_format_placement(p, b, sizeof b);
  cJSON_AddStringToObject(o, key, b);
}

char *rs_tp_case_to_json(const rs_tp_case *c) {
  if (c->seed > ((uint64_t)1 << 53)) { /* a double cannot carry it exactly */
    rs_fail(RS_ERR_INVALID, "tp case: seed %llu above 2^53 cannot be written exactly", (unsigned long long)c->seed);
    return NULL;
  }
  cJSON *root = cJSON_CreateObject(), *mesh = cJSON_CreateObject(), *plan = cJSON_CreateArray();
  cJSON *shape, *ranks;
  char *text;
  if (!root || !mesh || !plan) {
    cJSON_Delete(mesh); /* not yet in root */
    goto oom;
  }
  if (c->name[0]) cJSON_AddStringToObject(root, "name", c->name);
  shape = cJSON_AddArrayToObject(mesh, "shape");
  ranks = cJSON_AddArrayToObject(mesh, "ranks");
  for (int i = 0; i < c->mesh.ndim; i++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)c->mesh.size[i]));
  for (int i = 0; i < c->mesh.nranks; i++) cJSON_AddItemToArray(ranks, cJSON_CreateNumber(c->mesh.ranks[i]));
  cJSON_AddItemToObject(root, "mesh", mesh);
  cJSON_AddNumberToObject(root, "tp_dim", c->tp_dim);
  if (c->mesh.ndim == 2) put_pl(root, "dp_layout", c->dp_layout);
  cJSON_AddNumberToObject(root, "batch", (double)c->batch);
  cJSON_AddNumberToObject(root, "seq", (double)c->seq);
  cJSON_AddNumberToObject(root, "seed", (double)c->seed);
  cJSON_AddNumberToObject(root, "vmax", (double)c->vmax);
  if (c->dtype != RS_TP_F32) cJSON_AddStringToObject(root, "dtype", rs_dtype_name(rs_tp_dtype_of(c->dtype)));
  put_pl(root, "input_layout", c->input_layout);
  for (int i = 0; i < c->nmod; i++) {
    const rs_tp_module *m = &c->mod[i];
    const rs_tp_style *s = &m->style;
    cJSON *o = cJSON_CreateObject();
    if (!o) goto oom;
    cJSON_AddStringToObject(o, "path", m->path);
    cJSON_AddStringToObject(o, "module", rs_tp_module_name(m->kind));
    if (m->kind == RS_TP_LINEAR) {
      cJSON_AddNumberToObject(o, "in", (double)m->in);
      cJSON_AddNumberToObject(o, "out", (double)m->out);
      cJSON_AddBoolToObject(o, "bias", m->bias);
    } else if (m->kind == RS_TP_EMBEDDING) {
      cJSON_AddNumberToObject(o, "vocab", (double)m->in);
      cJSON_AddNumberToObject(o, "dim", (double)m->out);
    } else {
      cJSON_AddNumberToObject(o, "dim", (double)m->in);
      if (m->kind == RS_TP_LAYERNORM) cJSON_AddBoolToObject(o, "bias", m->bias);
    }
    cJSON_AddStringToObject(o, "style", STYLE_KEYS[s->kind]);
    unsigned om = s->omitted;
#define PUT_PL(bit, key, v) \
  if (!(om & (bit))) put_pl(o, key, v)
#define PUT_ULO() \
  if (!(om & RS_TP_ARG_USE_LOCAL)) cJSON_AddBoolToObject(o, "use_local_output", s->use_local_output)
    switch (s->kind) {
    case RS_TP_COLWISE:
    case RS_TP_ROWWISE:
      PUT_PL(RS_TP_ARG_INPUT, "input_layouts", s->input_layout);
      PUT_PL(RS_TP_ARG_OUTPUT, "output_layouts", s->output_layout);
      PUT_ULO();
      break;
    case RS_TP_SEQUENCE:
      if (!(om & RS_TP_ARG_SEQUENCE_DIM)) cJSON_AddNumberToObject(o, "sequence_dim", s->sequence_dim);
      PUT_ULO();
      break;
    case RS_TP_PREPARE_INPUT:
      PUT_PL(RS_TP_ARG_INPUT, "input_layouts", s->input_layout);
      PUT_PL(RS_TP_ARG_DESIRED_INPUT, "desired_input_layouts", s->desired_input);
      PUT_ULO();
      break;
    case RS_TP_PREPARE_OUTPUT:
      PUT_PL(RS_TP_ARG_OUTPUT, "output_layouts", s->output_layout);
      PUT_PL(RS_TP_ARG_DESIRED_OUTPUT, "desired_output_layouts", s->desired_output);
      PUT_ULO();
      break;
    default:
      break;
    }
#undef PUT_PL
#undef PUT_ULO
    cJSON_AddItemToArray(plan, o);
  }
  cJSON_AddItemToObject(root, "plan", plan);
  plan = NULL;
  text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) rs_fail(RS_ERR_NOMEM, "tp case: out of memory");
  return text;
oom:
  cJSON_Delete(root);
  cJSON_Delete(plan);
  rs_fail(RS_ERR_NOMEM, "tp case: out of memory");
  return NULL;
}
