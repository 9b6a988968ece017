/* conform_opt_plugin.c - reshard's own opt/ wrapped as a backend plug-in (include/reshard/backend.h):
 * the example every backend author can read, and the one `reshard conform` must pass on every suite
 * it drives. Options (--backend LIB.so?bug=NAME) plant one realistic bug, to show the suites catch
 * it with a shrunk case:
 *   bug=dst_order  redistribute lays the destination out in the default shard order, ignoring the
 *                  order the case names (what a planner that predates shard orders does);
 *   bug=tp_ranks   the TP output lists a 2-d mesh's locals column-major (mesh dims swapped);
 *   bug=last_rank  an off-by-one in the rank loop: the last rank's output is never written (P2P:
 *                  the plan's last transfer and the last destination local are dropped; ckpt:
 *                  the last shard of a load is not filled);
 *   bug=given_plan p2p_execute drops the last transfer of a plan it is given (plan_json), its own
 *                  plan stays right: only the harness's given-plan checks can see it;
 *   bug=template_ranks a P2P model that arrives in template form is expanded with each config's rank
 *                  list reversed (a backend whose rank order is not the template's): only the
 *                  template form can show it (RS_BACKEND_P2P_TEMPLATES);
 *   bug=int_saturate integer sums do not wrap: a redistribute of an I8/I16/I32/U8 case with a Partial
 *                  source runs in I64 and each result is clamped to the dtype (saturation, as a
 *                  backend that accumulates wide and converts with a clamp): only values whose
 *                  sums leave the dtype (wrap values, SPEC 8) can see it.
 * It declares RS_BACKEND_P2P_TEMPLATES (it expands templates itself, with reshard's parser) and
 * RS_BACKEND_P2P_ANY_PLAN: a plan given as plan_json is read with conform's one
 * transfers reader (conform/p2p_transfers.c) and run by opt's executor. Built with
 * RS_CONFORM_PLUGIN_V1 it says the struct_size of the header before p2p_flags (an older plug-in:
 * the harness must not see the flag, and hands it no plan).
 * The same file built into a program (conform_serve_child.c) serves it over the process protocol. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform/p2p_transfers.h"
#include "core/json.h"
#include "reshard/backend.h"
#include "reshard/ckpt.h"
#include "reshard/ckpt_opt.h"
#include "reshard/copy_service.h"
#include "reshard/opt.h"
#include "reshard/p2p.h"
#include "reshard/tp.h"

typedef struct plugin {
  rs_opt *opt;
  int dst_order, tp_ranks, last_rank, given_plan, int_saturate, template_ranks;
} plugin;

static int create(const char *options, void **self, char *msg, size_t cap) {
  plugin *p = calloc(1, sizeof *p);
  if (!p) return snprintf(msg, cap, "out of memory"), RS_BACKEND_ERROR;
  p->dst_order = strstr(options, "bug=dst_order") != NULL;
  p->tp_ranks = strstr(options, "bug=tp_ranks") != NULL;
  p->last_rank = strstr(options, "bug=last_rank") != NULL;
  p->given_plan = strstr(options, "bug=given_plan") != NULL;
  p->int_saturate = strstr(options, "bug=int_saturate") != NULL;
  p->template_ranks = strstr(options, "bug=template_ranks") != NULL;
  if (rs_opt_create(&p->opt)) {
    snprintf(msg, cap, "rs_opt_create: %s", rs_last_error());
    free(p);
    return RS_BACKEND_ERROR;
  }
  *self = p;
  return RS_BACKEND_OK;
}

static void destroy(void *self) {
  plugin *p = self;
  rs_opt_destroy(p->opt);
  free(p);
}

/* The harness's buffers seen as reshard locals (no copy). */
static int view(const rs_backend_bufs *b, rs_locals *l) {
  if (rs_locals_alloc(l, b->n)) return 0;
  for (int i = 0; i < b->n; i++) {
    l->r[i].ndim = b->b[i].ndim;
    memcpy(l->r[i].shape, b->b[i].shape, sizeof(int64_t) * (size_t)b->b[i].ndim);
    l->r[i].nbytes = b->b[i].nbytes;
    l->r[i].data = b->b[i].data;
  }
  return 1;
}

static void unview(rs_locals *l) {
  for (int i = 0; i < l->n; i++) l->r[i].data = NULL; /* the harness owns them */
  rs_locals_free(l);
}

/* opt's locals into the harness's buffers; rank i of `from` goes to out[map[i]]. */
static int give(const plugin *p, const rs_locals *from, const int *map, rs_backend_bufs *out, char *msg, size_t cap) {
  if (from->n != out->n) return snprintf(msg, cap, "%d locals for %d ranks", from->n, out->n), RS_BACKEND_ERROR;
  int n = p->last_rank ? out->n - 1 : out->n; /* planted: off by one */
  for (int i = 0; i < n; i++) {
    rs_backend_buf *b = &out->b[map ? map[i] : i];
    const rs_local *l = &from->r[i];
    if (l->nbytes > b->capacity)
      return snprintf(msg, cap, "rank %d: %lld bytes, room for %lld", b->rank, (long long)l->nbytes,
                      (long long)b->capacity), RS_BACKEND_ERROR;
    b->ndim = l->ndim;
    memcpy(b->shape, l->shape, sizeof(int64_t) * (size_t)l->ndim);
    b->nbytes = l->nbytes;
    if (l->nbytes) memcpy(b->data, l->data, (size_t)l->nbytes);
  }
  return RS_BACKEND_OK;
}

/* bug=int_saturate: the case run in I64 (locals widened), each result clamped to the dtype. */
static int64_t narrow_get(rs_dtype t, const void *p, int64_t i) {
  switch (t) {
    case RS_I32: { int32_t v; memcpy(&v, (const char *)p + 4 * i, 4); return v; }
    case RS_I16: { int16_t v; memcpy(&v, (const char *)p + 2 * i, 2); return v; }
    case RS_I8: return ((const int8_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
  }
}

static void narrow_put(rs_dtype t, void *p, int64_t i, int64_t v) {
  int64_t lo = t == RS_I32 ? INT32_MIN : t == RS_I16 ? INT16_MIN : t == RS_I8 ? INT8_MIN : 0;
  int64_t hi = t == RS_I32 ? INT32_MAX : t == RS_I16 ? INT16_MAX : t == RS_I8 ? INT8_MAX : UINT8_MAX;
  v = v < lo ? lo : v > hi ? hi : v; /* planted: saturate instead of wrapping */
  switch (t) {
    case RS_I32: { int32_t x = (int32_t)v; memcpy((char *)p + 4 * i, &x, 4); break; }
    case RS_I16: { int16_t x = (int16_t)v; memcpy((char *)p + 2 * i, &x, 2); break; }
    case RS_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    default: ((uint8_t *)p)[i] = (uint8_t)v; break;
  }
}

static int saturating(plugin *p, const rs_case *c, const rs_locals *src, rs_locals *dst, char *msg, size_t cap) {
  rs_dtype t = c->tensor.dtype;
  int es = rs_dtype_size(t);
  rs_case w = *c;
  w.tensor.dtype = RS_I64;
  rs_locals ws = {0, NULL}, wd = {0, NULL};
  int r = RS_BACKEND_OK;
  if (rs_locals_alloc(&ws, src->n)) r = RS_BACKEND_ERROR;
  for (int i = 0; i < src->n && r == RS_BACKEND_OK; i++) {
    const rs_local *l = &src->r[i];
    if (rs_local_resize(&ws.r[i], l->ndim, l->shape, 8)) r = RS_BACKEND_ERROR;
    for (int64_t k = 0; r == RS_BACKEND_OK && k < l->nbytes / es; k++) {
      int64_t v = narrow_get(t, l->data, k);
      memcpy((char *)ws.r[i].data + 8 * k, &v, 8);
    }
  }
  if (r == RS_BACKEND_OK && rs_opt_redistribute(p->opt, NULL, &w, &ws, &wd, NULL)) r = RS_BACKEND_ERROR;
  if (r == RS_BACKEND_OK && rs_locals_alloc(dst, wd.n)) r = RS_BACKEND_ERROR;
  for (int i = 0; i < wd.n && r == RS_BACKEND_OK; i++) {
    const rs_local *l = &wd.r[i];
    if (rs_local_resize(&dst->r[i], l->ndim, l->shape, es)) r = RS_BACKEND_ERROR;
    for (int64_t k = 0; r == RS_BACKEND_OK && k < l->nbytes / 8; k++) {
      int64_t v;
      memcpy(&v, (const char *)l->data + 8 * k, 8);
      narrow_put(t, dst->r[i].data, k, v);
    }
  }
  if (r != RS_BACKEND_OK) snprintf(msg, cap, "int_saturate: %s", rs_last_error());
  rs_locals_free(&ws);
  rs_locals_free(&wd);
  return r;
}

static int redistribute(void *self, const char *case_json, const rs_backend_bufs *in, rs_backend_bufs *out,
                        char *msg, size_t cap) {
  plugin *p = self;
  rs_case c;
  if (rs_case_from_json(case_json, &c)) return snprintf(msg, cap, "case: %s", rs_last_error()), RS_BACKEND_ERROR;
  if (p->dst_order) { /* planted: the destination's shard order is dropped */
    memset(c.dst.order_len, 0, sizeof c.dst.order_len);
    rs_sharding_set_default_order(&c.dst, c.tensor.ndim);
  }
  rs_locals src = {0, NULL}, dst = {0, NULL};
  int r = RS_BACKEND_OK;
  rs_dtype t = c.tensor.dtype;
  int narrow_int = t == RS_I32 || t == RS_I16 || t == RS_I8 || t == RS_U8;
  if (!view(in, &src)) r = RS_BACKEND_ERROR, snprintf(msg, cap, "out of memory");
  else if (p->int_saturate && narrow_int && rs_sharding_has_partial(&c.src)) {
    if ((r = saturating(p, &c, &src, &dst, msg, cap)) == RS_BACKEND_OK) r = give(p, &dst, NULL, out, msg, cap);
  } else if (rs_opt_redistribute(p->opt, NULL, &c, &src, &dst, NULL))
    r = RS_BACKEND_ERROR, snprintf(msg, cap, "rs_opt_redistribute: %s", rs_last_error());
  else r = give(p, &dst, NULL, out, msg, cap);
  unview(&src);
  rs_locals_free(&dst);
  return r;
}

static int tp_forward(void *self, const char *case_json, const rs_backend_bufs *inputs, rs_backend_bufs *out,
                      char *msg, size_t cap) {
  plugin *p = self;
  (void)inputs; /* opt makes the same test values from the case's seed (SPEC 8) */
  rs_tp_case c;
  if (rs_tp_case_from_json(case_json, &c)) return snprintf(msg, cap, "case: %s", rs_last_error()), RS_BACKEND_ERROR;
  rs_tp_result res;
  if (rs_tp_opt_forward(p->opt, NULL, &c, &res))
    return snprintf(msg, cap, "rs_tp_opt_forward: %s", rs_last_error()), RS_BACKEND_ERROR;
  int *map = NULL;
  if (p->tp_ranks && c.mesh.ndim == 2 && (map = malloc(sizeof *map * (size_t)c.mesh.nranks))) {
    /* planted: position (i, j) written where (j, i) of the transposed mesh would be */
    int64_t a = c.mesh.size[0], b = c.mesh.size[1];
    for (int64_t i = 0; i < a; i++)
      for (int64_t j = 0; j < b; j++) map[i * b + j] = (int)(j * a + i);
  }
  int r = give(p, &res.out, map, out, msg, cap);
  free(map);
  rs_tp_result_free(&res);
  return r;
}

/* ---- cross-config (SPEC 10): opt's plan, opt's executor over the local copy service ---- */

static int64_t param_of(const rs_p2p_model *m, const char *name, int *is_scale) {
  size_t n = name ? strlen(name) : 0;
  *is_scale = n > 6 && strcmp(name + n - 6, ".scale") == 0;
  for (int64_t p = 0; name && p < m->nparams; p++)
    if (strncmp(m->param[p].name, name, *is_scale ? n - 6 : n) == 0 && m->param[p].name[*is_scale ? n - 6 : n] == 0)
      return p;
  return -1;
}

/* The model as this backend reads it: reshard's parser, which expands a template form itself;
 * bug=template_ranks reverses a templated config's rank list first. */
static rs_status parse_model(const plugin *p, const char *model_json, rs_p2p_model *m) {
  if (!p->template_ranks) return rs_p2p_model_parse(model_json, m);
  cJSON *j = NULL;
  rs_status st = rs_json_parse(model_json, &j);
  for (int k = 0; !st && k < 2; k++) {
    cJSON *c = cJSON_GetObjectItemCaseSensitive(j, k ? "dst" : "src");
    cJSON *rk = cJSON_GetObjectItemCaseSensitive(c, "ranks"), *rev = cJSON_CreateArray(), *it;
    if (!cJSON_GetObjectItemCaseSensitive(c, "template") || !cJSON_IsArray(rk) || !rev) {
      cJSON_Delete(rev);
      continue;
    }
    cJSON_ArrayForEach(it, rk) cJSON_InsertItemInArray(rev, 0, cJSON_Duplicate(it, 1));
    cJSON_ReplaceItemInObjectCaseSensitive(c, "ranks", rev);
  }
  char *t = st ? NULL : cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  if (!st) st = t ? rs_p2p_model_parse(t, m) : rs_fail(RS_ERR_NOMEM, "out of memory");
  free(t);
  return st;
}

static int p2p_plan(void *self, const char *model_json, const rs_backend_p2p_sink *sink, char *msg, size_t cap) {
  plugin *p = self;
  rs_p2p_model m;
  rs_p2p_plan plan;
  if (parse_model(p, model_json, &m)) return snprintf(msg, cap, "model: %s", rs_last_error()), RS_BACKEND_ERROR;
  int r = RS_BACKEND_OK;
  if (rs_p2p_opt_plan(&m, &plan)) r = RS_BACKEND_ERROR, snprintf(msg, cap, "rs_p2p_opt_plan: %s", rs_last_error());
  else {
    int64_t n = p->last_rank && plan.n ? plan.n - 1 : plan.n; /* planted: off by one */
    for (int64_t i = 0; i < n && r == RS_BACKEND_OK; i++) {
      const rs_p2p_xfer *x = &plan.x[i];
      int nd = m.param[x->param].t.ndim;
      if (sink->add(sink->ctx, x->task, x->param, x->src, x->dst, nd, plan.coords + x->box, plan.coords + x->box + nd))
        r = RS_BACKEND_ERROR, snprintf(msg, cap, "the harness refused transfer %lld", (long long)x->task);
    }
    rs_p2p_plan_free(&plan);
  }
  rs_p2p_model_free(&m);
  return r;
}

/* The plan handed over (`reshard p2p plan --json`): its "transfers" read by conform's one reader. */
static rs_status given_plan(const plugin *p, const rs_p2p_model *m, const char *plan_json, rs_p2p_plan *plan) {
  cJSON *j = NULL;
  rs_status st = rs_json_parse(plan_json, &j);
  if (!st && !cJSON_IsObject(j)) st = rs_fail(RS_ERR_INVALID, "plan: not a JSON object");
  if (!st) st = rs__cf_read_transfers(m, cJSON_GetObjectItemCaseSensitive(j, "transfers"), plan);
  cJSON_Delete(j);
  if (!st && p->given_plan && plan->n) plan->n--; /* planted: a given plan's last transfer is dropped */
  return st ? st : rs_p2p_plan_stats(m, plan);
}

static int p2p_execute(void *self, const char *model_json, const char *plan_json, const rs_copy_service_vtable *cs,
                       void *cs_self, const rs_backend_bufs *src, rs_backend_bufs *dst, char *msg, size_t cap) {
  plugin *p = self;
  (void)cs, (void)cs_self; /* over reshard's local copy service */
  rs_p2p_model m;
  if (parse_model(p, model_json, &m)) return snprintf(msg, cap, "model: %s", rs_last_error()), RS_BACKEND_ERROR;
  rs_p2p_plan plan = {0};
  rs_p2p_locals in = {0}, out = {0};
  rs_copy_service *svc = NULL;
  int r = RS_BACKEND_OK, sc;
  if (plan_json ? given_plan(p, &m, plan_json, &plan) : rs_p2p_opt_plan(&m, &plan))
    r = RS_BACKEND_ERROR, snprintf(msg, cap, "%s%s", plan_json ? "the plan given: " : "", rs_last_error());
  else if (rs_p2p_locals_alloc(&m, RS_P2P_SRC, -1, &in) || rs_copy_service_open("local", NULL, &svc))
    r = RS_BACKEND_ERROR, snprintf(msg, cap, "%s", rs_last_error());
  for (int i = 0; i < src->n && r == RS_BACKEND_OK; i++) {
    const rs_backend_buf *b = &src->b[i];
    int64_t k = param_of(&m, b->name, &sc), q = k >= 0 ? rs_p2p_pos(&m, RS_P2P_SRC, k, b->rank) : -1;
    if (q < 0 || b->nbytes != in.loc[k][q].numel * rs_dtype_size(m.param[k].t.dtype))
      r = RS_BACKEND_ERROR, snprintf(msg, cap, "src %s on rank %d: not a local of the source config", b->name, b->rank);
    else memcpy(in.loc[k][q].data, b->data, (size_t)b->nbytes);
  }
  if (r == RS_BACKEND_OK && rs_p2p_opt_execute(&m, &plan, svc, -1, &in, &out, NULL))
    r = RS_BACKEND_ERROR, snprintf(msg, cap, "rs_p2p_opt_execute: %s", rs_last_error());
  int n = p->last_rank && dst->n ? dst->n - 1 : dst->n; /* planted: off by one */
  for (int i = 0; i < n && r == RS_BACKEND_OK; i++) {
    rs_backend_buf *b = &dst->b[i];
    int64_t k = param_of(&m, b->name, &sc), q = k >= 0 ? rs_p2p_pos(&m, RS_P2P_DST, k, b->rank) : -1;
    const rs_p2p_local *l = q >= 0 ? &out.loc[k][q] : NULL;
    int64_t bytes = !l ? 0 : sc ? l->numel / RS_MXFP8_BLOCK
                          : l->numel * (l->scale ? 1 : rs_dtype_size(m.param[k].t.dtype));
    if (!l || bytes > b->capacity) r = RS_BACKEND_ERROR, snprintf(msg, cap, "dst %s on rank %d: no room", b->name, b->rank);
    else {
      memcpy(b->data, sc ? (void *)l->scale : (void *)l->data, (size_t)bytes);
      b->nbytes = bytes;
    }
  }
  rs_copy_service_close(svc);
  rs_p2p_locals_free(&in);
  rs_p2p_locals_free(&out);
  rs_p2p_plan_free(&plan);
  rs_p2p_model_free(&m);
  return r;
}

/* ---- checkpoints (SPEC 11): opt's save and load, reshard's format ---- */

/* The shard of (key, rank) among the harness's buffers. */
static rs_backend_buf *shard(const rs_backend_bufs *b, const char *key, int rank) {
  for (int i = 0; i < b->n; i++)
    if (b->b[i].rank == rank && b->b[i].name && strcmp(b->b[i].name, key) == 0) return &b->b[i];
  return NULL;
}

static int ckpt_save(void *self, const char *state_json, const rs_backend_bufs *tensors, const char *dir,
                     char *msg, size_t cap) {
  (void)self;
  rs_state_spec s;
  rs_ckpt_world w = {0, NULL};
  if (rs_state_spec_from_json(state_json, &s)) return snprintf(msg, cap, "state: %s", rs_last_error()), RS_BACKEND_ERROR;
  int r = RS_BACKEND_OK;
  if (rs_state_spec_build(&s, RS_FILL_VALUES, &w)) r = RS_BACKEND_ERROR, snprintf(msg, cap, "%s", rs_last_error());
  for (int k = 0; k < w.n && r == RS_BACKEND_OK; k++)
    for (int i = 0; i < w.sd[k].nt && r == RS_BACKEND_OK; i++) {
      rs_sh_tensor *t = &w.sd[k].t[i];
      const rs_backend_buf *b = shard(tensors, t->key, k);
      if (!b || b->nbytes != t->nbytes) r = RS_BACKEND_ERROR, snprintf(msg, cap, "no shard of %s on rank %d", t->key, k);
      else memcpy(t->data, b->data, (size_t)t->nbytes); /* the harness's bytes, not our own values */
    }
  if (r == RS_BACKEND_OK && rs_opt_ckpt_save(NULL, &w, dir, 1, NULL, NULL))
    r = RS_BACKEND_ERROR, snprintf(msg, cap, "rs_opt_ckpt_save: %s", rs_last_error());
  rs_ckpt_world_free(&w);
  rs_state_spec_free(&s);
  return r;
}

static int ckpt_load(void *self, const char *dir, const char *state_json, rs_backend_bufs *tensors, char *msg,
                     size_t cap) {
  plugin *p = self;
  rs_state_spec s;
  rs_ckpt_world w = {0, NULL};
  rs_ckpt_report rep;
  memset(&rep, 0, sizeof rep);
  if (rs_state_spec_from_json(state_json, &s)) return snprintf(msg, cap, "state: %s", rs_last_error()), RS_BACKEND_ERROR;
  int r = RS_BACKEND_OK;
  if (rs_state_spec_build(&s, RS_FILL_INITIAL, &w) ||
      rs_opt_ckpt_load(NULL, &w, dir, -1, RS_STRICT_ASSUME_OK_UNEXPECTED, NULL, &rep, NULL))
    r = RS_BACKEND_ERROR, snprintf(msg, cap, "rs_opt_ckpt_load: %s", rs_last_error());
  int n = 0;
  for (int k = 0; k < w.n; k++) n += w.sd[k].nt;
  if (p->last_rank) n--; /* planted: off by one */
  for (int k = 0; k < w.n && r == RS_BACKEND_OK; k++)
    for (int i = 0; i < w.sd[k].nt && r == RS_BACKEND_OK && n-- > 0; i++) {
      const rs_sh_tensor *t = &w.sd[k].t[i];
      rs_backend_buf *b = shard(tensors, t->key, k);
      if (!b || b->capacity < t->nbytes) r = RS_BACKEND_ERROR, snprintf(msg, cap, "no room for %s on rank %d", t->key, k);
      else memcpy(b->data, t->data, (size_t)t->nbytes), b->nbytes = t->nbytes;
    }
  rs_ckpt_report_free(&rep);
  rs_ckpt_world_free(&w);
  rs_state_spec_free(&s);
  return r;
}

static const rs_backend BACKEND = {
#ifdef RS_CONFORM_PLUGIN_V1
    .struct_size = offsetof(rs_backend, p2p_flags), /* an older header's sizeof(rs_backend) */
#else
    .struct_size = sizeof(rs_backend),
#endif
    .abi_version = RS_BACKEND_ABI_VERSION,
    .name = "reshard-opt",
    .ckpt_format = RS_BACKEND_CKPT_RESHARD,
    .create = create,
    .destroy = destroy,
    .redistribute = redistribute,
    .tp_forward = tp_forward,
    .p2p_plan = p2p_plan,
    .p2p_execute = p2p_execute,
    .ckpt_save = ckpt_save,
    .ckpt_load = ckpt_load,
    .p2p_flags = RS_BACKEND_P2P_ANY_PLAN | RS_BACKEND_P2P_TEMPLATES, /* unread past a V1 struct_size */
};

/* CONFORM_PLUGIN_MAX_INSTANCES=K (environment, tests/jobs_conform.sh): the struct says max_instances
 * K, as a plug-in bound to a fixed port would say 1 (`conform --jobs N` then runs min(N, K)). */
const rs_backend *rs_backend_entry(void) {
  static rs_backend b;
  b = BACKEND;
#ifndef RS_CONFORM_PLUGIN_V1
  const char *k = getenv("CONFORM_PLUGIN_MAX_INSTANCES");
  if (k) b.max_instances = (uint32_t)strtoul(k, NULL, 10);
#endif
  return &b;
}
