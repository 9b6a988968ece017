/* serve.c - a backend plug-in served over the process protocol: what lets a C or C++ backend run
 * as `--backend exec:CMD` (in its own process, so a crash is that case's failure) with no JSON
 * code of its own, and the reference implementation of the protocol's child side. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform/conform.h"
#include "conform/backend_internal.h"
#include "conform/proto.h"
#include "core/json.h"
#include "reshard/ckpt.h"
#include "reshard/p2p.h"

static void answer(FILE *out, cJSON *a) {
  char *s = cJSON_PrintUnformatted(a);
  if (s) fprintf(out, "%s\n", s);
  else fprintf(out, "{\"ok\":false,\"message\":\"out of memory\"}\n");
  fflush(out);
  free(s);
  cJSON_Delete(a);
}

static cJSON *reply(const cJSON *req, int ok) {
  cJSON *a = cJSON_CreateObject();
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(req, "id");
  cJSON_AddNumberToObject(a, "id", cJSON_IsNumber(id) ? id->valuedouble : -1);
  cJSON_AddBoolToObject(a, "ok", ok);
  return a;
}

static cJSON *refuse(const cJSON *req, int result, const char *msg) {
  cJSON *a = reply(req, 0);
  if (result == RS_BACKEND_UNSUPPORTED) cJSON_AddBoolToObject(a, "unsupported", 1);
  cJSON_AddStringToObject(a, "message", msg && msg[0] ? msg : "(no message)");
  return a;
}

/* RS_BACKEND_P2P_ANY_PLAN, read only when the plug-in's struct_size covers p2p_flags. */
static int any_plan(const rs_backend *b) {
  return b->struct_size >= offsetof(rs_backend, p2p_flags) + sizeof b->p2p_flags &&
         (b->p2p_flags & RS_BACKEND_P2P_ANY_PLAN);
}

static cJSON *hello(const rs_backend *b, const cJSON *req) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, "version");
  if (!cJSON_IsNumber(v) || v->valuedouble != 1) return refuse(req, RS_BACKEND_ERROR, "this backend speaks protocol version 1");
  cJSON *a = cJSON_CreateObject(), *caps = cJSON_CreateArray();
  cJSON_AddBoolToObject(a, "ok", 1);
  cJSON_AddNumberToObject(a, "version", 1);
  cJSON_AddStringToObject(a, "name", b->name ? b->name : "(unnamed)");
  if (b->redistribute) cJSON_AddItemToArray(caps, cJSON_CreateString("redistribute"));
  if (b->tp_forward) cJSON_AddItemToArray(caps, cJSON_CreateString("tp"));
  if (b->p2p_plan) cJSON_AddItemToArray(caps, cJSON_CreateString("p2p_plan"));
  if (b->p2p_execute) cJSON_AddItemToArray(caps, cJSON_CreateString("p2p_execute"));
  if (b->p2p_execute && any_plan(b)) cJSON_AddItemToArray(caps, cJSON_CreateString("p2p_any_plan"));
  if ((b->p2p_plan || b->p2p_execute) && b->struct_size >= offsetof(rs_backend, p2p_flags) + sizeof b->p2p_flags &&
      (b->p2p_flags & RS_BACKEND_P2P_TEMPLATES))
    cJSON_AddItemToArray(caps, cJSON_CreateString("p2p_templates"));
  if (b->ckpt_save && b->ckpt_load) {
    cJSON_AddItemToArray(caps, cJSON_CreateString("ckpt"));
    cJSON_AddStringToObject(a, "ckpt_format", b->ckpt_format == RS_BACKEND_CKPT_RESHARD ? "reshard" : "own");
  }
  cJSON_AddItemToObject(a, "capabilities", caps);
  /* a plug-in that allows k instances at once: so does the process serving it */
  if (b->struct_size >= offsetof(rs_backend, max_instances) + sizeof b->max_instances && b->max_instances)
    cJSON_AddNumberToObject(a, "max_instances", b->max_instances);
  return a;
}

/* Decode a list of tensors into bufs (data malloc'd; elem: bytes per element, or a function of the
 * tensor's name through elem_of). */
static int decode(const cJSON *arr, const char *key, const char *name_key, int elem,
                  int (*elem_of)(const char *, void *), void *ctx, rs_backend_bufs *out, char *why, size_t cap) {
  int n = cJSON_GetArraySize(arr), i = 0;
  out->n = 0;
  out->b = calloc((size_t)(n ? n : 1), sizeof *out->b);
  if (!cJSON_IsArray(arr) || !out->b) {
    snprintf(why, cap, "'%s' must be a list", key);
    return 0;
  }
  const cJSON *t;
  cJSON_ArrayForEach(t, arr) {
    rs_backend_buf *bb = &out->b[i];
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(t, name_key);
    bb->name = cJSON_IsString(nm) ? nm->valuestring : NULL;
    int es = elem_of ? elem_of(bb->name, ctx) : elem;
    char what[64];
    snprintf(what, sizeof what, "%s[%d]", key, i);
    int nd = 0;
    if (rs_proto_tensor_read(t, what, es, RS_BACKEND_MAX_DIMS, &bb->rank, &nd, bb->shape, &bb->data, &bb->nbytes)) {
      snprintf(why, cap, "%s", rs_last_error());
      return 0;
    }
    bb->ndim = nd;
    bb->capacity = bb->nbytes;
    out->n = ++i;
  }
  return 1;
}

static void bufs_free(rs_backend_bufs *v) {
  for (int i = 0; v->b && i < v->n; i++) free(v->b[i].data);
  free(v->b);
  v->b = NULL, v->n = 0;
}

/* Output buffers, one per mesh rank: shape and capacity given (zeroed). */
static int outputs(const rs_mesh *m, int64_t (*shape)[RS_BACKEND_MAX_DIMS], const int *ndim, int elem,
                   rs_backend_bufs *out) {
  out->n = m->nranks;
  out->b = calloc((size_t)m->nranks, sizeof *out->b);
  if (!out->b) return 0;
  for (int p = 0; p < m->nranks; p++) {
    rs_backend_buf *bb = &out->b[p];
    int64_t n = 1;
    bb->rank = m->ranks[p];
    bb->ndim = ndim[p];
    for (int d = 0; d < ndim[p]; d++) bb->shape[d] = shape[p][d], n *= shape[p][d];
    bb->nbytes = bb->capacity = n * elem;
    if (!(bb->data = calloc((size_t)(bb->nbytes ? bb->nbytes : 1), 1))) return 0;
  }
  return 1;
}

static cJSON *answer_locals(const cJSON *req, const rs_backend_bufs *out) {
  cJSON *a = reply(req, 1), *arr = cJSON_CreateArray();
  for (int p = 0; p < out->n; p++) {
    const rs_backend_buf *bb = &out->b[p];
    int64_t nb = bb->nbytes <= bb->capacity ? bb->nbytes : bb->capacity;
    cJSON_AddItemToArray(arr, rs_proto_tensor(bb->rank, bb->ndim, bb->shape, bb->data, nb, NULL, NULL));
  }
  cJSON_AddItemToObject(a, "locals", arr);
  return a;
}

typedef int (*op_fn)(void *self, const char *case_json, const rs_backend_bufs *in, rs_backend_bufs *out, char *msg,
                     size_t cap);

/* Both ops take a case, a list of input tensors and give per-rank outputs. */
static cJSON *run_op(const rs_backend *b, void *self, op_fn fn, const cJSON *req, const char *case_json,
                     const cJSON *inputs, const char *in_key, int in_elem, int (*elem_of)(const char *, void *),
                     void *ctx, const rs_mesh *m, int64_t (*shape)[RS_BACKEND_MAX_DIMS], const int *ndim, int out_elem) {
  (void)b;
  rs_backend_bufs in = {0, NULL}, out = {0, NULL};
  char *msg = calloc(1, 4096);
  cJSON *a;
  if (!msg) return refuse(req, RS_BACKEND_ERROR, "out of memory");
  if (!decode(inputs, in_key, "name", in_elem, elem_of, ctx, &in, msg, 4096)) a = refuse(req, RS_BACKEND_ERROR, msg);
  else if (!outputs(m, shape, ndim, out_elem, &out)) a = refuse(req, RS_BACKEND_ERROR, "out of memory");
  else {
    int r = fn(self, case_json, &in, &out, msg, 4096);
    a = r == RS_BACKEND_OK ? answer_locals(req, &out) : refuse(req, r == RS_BACKEND_UNSUPPORTED ? r : RS_BACKEND_ERROR, msg);
  }
  bufs_free(&in);
  bufs_free(&out);
  free(msg);
  return a;
}

static int tp_elem(const char *name, void *ctx) {
  const rs_tp_case *c = ctx;
  return name && strcmp(name, "input") == 0 && c->mod[0].kind == RS_TP_EMBEDDING ? 8 : 4;
}

/* ---- cross-config ---- */

typedef struct plan_sink {
  const rs_p2p_model *m;
  cJSON *arr;
} plan_sink;

static int sink_add(void *vctx, int64_t task, int32_t param, int32_t src, int32_t dst, int32_t ndim,
                    const int64_t *start, const int64_t *size) {
  plan_sink *x = vctx;
  if (param < 0 || param >= x->m->nparams) return 1;
  cJSON *t = cJSON_CreateObject(), *o = cJSON_CreateArray(), *s = cJSON_CreateArray();
  cJSON_AddNumberToObject(t, "task_id", (double)task);
  cJSON_AddStringToObject(t, "param", x->m->param[param].name);
  cJSON_AddNumberToObject(t, "src_rank", src);
  cJSON_AddNumberToObject(t, "dst_rank", dst);
  for (int d = 0; d < ndim; d++) {
    cJSON_AddItemToArray(o, cJSON_CreateNumber((double)start[d]));
    cJSON_AddItemToArray(s, cJSON_CreateNumber((double)size[d]));
  }
  cJSON_AddItemToObject(t, "offsets", o);
  cJSON_AddItemToObject(t, "sizes", s);
  cJSON_AddItemToArray(x->arr, t);
  return 0;
}

static int p2p_elem(const char *name, void *ctx) {
  const rs_p2p_model *m = ctx;
  for (int64_t p = 0; name && p < m->nparams; p++)
    if (strcmp(m->param[p].name, name) == 0) return rs_dtype_size(m->param[p].t.dtype);
  return 1;
}

static cJSON *serve_p2p(const rs_backend *b, void *self, const cJSON *req, int execute, const char *model_json) {
  rs_p2p_model m;
  if (rs_p2p_model_parse(model_json, &m)) return refuse(req, RS_BACKEND_ERROR, rs_last_error());
  char *msg = calloc(1, 4096);
  cJSON *a = NULL;
  if (!msg) a = refuse(req, RS_BACKEND_ERROR, "out of memory");
  else if (!execute) {
    plan_sink x = {&m, cJSON_CreateArray()};
    rs_backend_p2p_sink sink = {&x, sink_add};
    int r = b->p2p_plan(self, model_json, &sink, msg, 4096);
    if (r == RS_BACKEND_OK) {
      a = reply(req, 1);
      cJSON_AddItemToObject(a, "transfers", x.arr);
    } else {
      cJSON_Delete(x.arr);
      a = refuse(req, r, msg);
    }
  } else {
    rs_backend_bufs in = {0, NULL};
    rs_p2p_locals dst = {0};
    int nd = 0;
    char **names = NULL;
    rs_backend_buf *db = NULL;
    const cJSON *po = cJSON_GetObjectItemCaseSensitive(req, "plan");
    char *pj = cJSON_IsObject(po) ? cJSON_PrintUnformatted(po) : NULL;
    if (po && !cJSON_IsNull(po) && !cJSON_IsObject(po))
      a = refuse(req, RS_BACKEND_ERROR, "'plan' must be a plan object or null");
    else if (cJSON_IsObject(po) && !pj)
      a = refuse(req, RS_BACKEND_ERROR, "out of memory");
    else if (pj && !any_plan(b))
      a = refuse(req, RS_BACKEND_ERROR, "'plan': this backend executes only its own plan (no \"p2p_any_plan\")");
    else if (!decode(cJSON_GetObjectItemCaseSensitive(req, "src"), "src", "param", 0, p2p_elem, &m, &in, msg, 4096))
      a = refuse(req, RS_BACKEND_ERROR, msg);
    else if (rs_p2p_locals_alloc(&m, RS_P2P_DST, -1, &dst) || !(db = rs__cf_p2p_bufs(&m, RS_P2P_DST, &dst, &nd, &names)))
      a = refuse(req, RS_BACKEND_ERROR, rs_last_error());
    else {
      rs_backend_bufs out = {nd, db};
      for (int i = 0; i < nd; i++) rs__cf_poison(db[i].data, db[i].capacity); /* unwritten bytes read the same each run */
      int r = b->p2p_execute(self, model_json, pj, NULL, NULL, &in, &out, msg, 4096);
      if (r != RS_BACKEND_OK) a = refuse(req, r, msg);
      else {
        a = reply(req, 1);
        cJSON *arr = cJSON_CreateArray();
        for (int i = 0; i < nd; i++) {
          const rs_backend_buf *bb = &db[i];
          int scaled = i + 1 < nd && names[i + 1] != NULL; /* only scale buffers have a stored name */
          cJSON *t = rs_proto_tensor(bb->rank, bb->ndim, bb->shape, bb->data, bb->nbytes, "param", bb->name);
          if (scaled) {
            /* the scales ride along with their tensor */
            cJSON *s = rs_proto_tensor(bb->rank, 1, db[i + 1].shape, db[i + 1].data, db[i + 1].nbytes, NULL, NULL);
            cJSON_AddItemToObject(t, "scale", cJSON_DetachItemFromObjectCaseSensitive(s, "data"));
            cJSON_Delete(s);
            i++;
          }
          cJSON_AddItemToArray(arr, t);
        }
        cJSON_AddItemToObject(a, "dst", arr);
      }
    }
    free(db);
    free(pj);
    rs__cf_free_names(names, nd);
    rs_p2p_locals_free(&dst);
    bufs_free(&in);
  }
  free(msg);
  rs_p2p_model_free(&m);
  return a;
}

/* ---- checkpoints ---- */

static int ckpt_elem(const char *key, void *ctx) {
  const rs_state_spec *s = ctx;
  for (int i = 0; key && i < s->nt; i++)
    if (strcmp(s->t[i].key, key) == 0) return rs_dtype_size(s->t[i].dtype);
  return 1;
}

static cJSON *serve_ckpt(const rs_backend *b, void *self, const cJSON *req, int load, const char *spec_json) {
  const cJSON *dir = cJSON_GetObjectItemCaseSensitive(req, "dir");
  rs_state_spec s;
  if (!cJSON_IsString(dir)) return refuse(req, RS_BACKEND_ERROR, "request has no 'dir' string");
  if (rs_state_spec_from_json(spec_json, &s)) return refuse(req, RS_BACKEND_ERROR, rs_last_error());
  char *msg = calloc(1, 4096);
  cJSON *a = NULL;
  rs_backend_bufs v = {0, NULL};
  rs_ckpt_world w = {0, NULL};
  if (!msg) a = refuse(req, RS_BACKEND_ERROR, "out of memory");
  else if (!load) {
    if (!decode(cJSON_GetObjectItemCaseSensitive(req, "tensors"), "tensors", "key", 0, ckpt_elem, &s, &v, msg, 4096))
      a = refuse(req, RS_BACKEND_ERROR, msg);
    else {
      int r = b->ckpt_save(self, spec_json, &v, dir->valuestring, msg, 4096);
      a = r == RS_BACKEND_OK ? reply(req, 1) : refuse(req, r, msg);
    }
    bufs_free(&v);
  } else if (rs_state_spec_build(&s, RS_FILL_INITIAL, &w)) {
    a = refuse(req, RS_BACKEND_ERROR, rs_last_error());
  } else {
    int n = 0, k = 0;
    for (int r = 0; r < w.n; r++) n += w.sd[r].nt;
    rs_backend_buf *bb = calloc((size_t)(n ? n : 1), sizeof *bb);
    for (int r = 0; bb && r < w.n; r++)
      for (int i = 0; i < w.sd[r].nt; i++) {
        const rs_sh_tensor *t = &w.sd[r].t[i];
        rs_backend_buf *x = &bb[k++];
        x->rank = r, x->ndim = t->ndim, x->nbytes = x->capacity = t->nbytes, x->data = t->data, x->name = t->key;
        memcpy(x->shape, t->local_shape, sizeof(int64_t) * (size_t)t->ndim);
      }
    rs_backend_bufs out = {n, bb};
    int r = bb ? b->ckpt_load(self, dir->valuestring, spec_json, &out, msg, 4096) : RS_BACKEND_ERROR;
    if (r != RS_BACKEND_OK) a = refuse(req, r, bb ? msg : "out of memory");
    else {
      a = reply(req, 1);
      cJSON *arr = cJSON_CreateArray();
      for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, rs_proto_tensor(bb[i].rank, bb[i].ndim, bb[i].shape, bb[i].data, bb[i].nbytes, "key", bb[i].name));
      cJSON_AddItemToObject(a, "tensors", arr);
    }
    free(bb);
  }
  rs_ckpt_world_free(&w);
  rs_state_spec_free(&s);
  free(msg);
  return a;
}

static cJSON *serve_one(const rs_backend *b, void *self, const cJSON *req) {
  const cJSON *op = cJSON_GetObjectItemCaseSensitive(req, "op"), *cs = cJSON_GetObjectItemCaseSensitive(req, "case");
  const char *o = cJSON_IsString(op) ? op->valuestring : "";
  int is_rd = strcmp(o, "redistribute") == 0 && b->redistribute, is_tp = strcmp(o, "tp") == 0 && b->tp_forward;
  int is_plan = strcmp(o, "p2p_plan") == 0 && b->p2p_plan, is_exec = strcmp(o, "p2p_execute") == 0 && b->p2p_execute;
  int is_save = strcmp(o, "ckpt_save") == 0 && b->ckpt_save, is_load = strcmp(o, "ckpt_load") == 0 && b->ckpt_load;
  if (is_save || is_load) {
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(req, "state");
    char *sj = cJSON_IsObject(so) ? cJSON_PrintUnformatted(so) : NULL;
    cJSON *a = sj ? serve_ckpt(b, self, req, is_load, sj) : refuse(req, RS_BACKEND_ERROR, "request has no 'state' object");
    free(sj);
    return a;
  }
  if (is_plan || is_exec) {
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(req, "model");
    char *mj = cJSON_IsObject(mo) ? cJSON_PrintUnformatted(mo) : NULL;
    cJSON *a = mj ? serve_p2p(b, self, req, is_exec, mj) : refuse(req, RS_BACKEND_ERROR, "request has no 'model' object");
    free(mj);
    return a;
  }
  if (!is_rd && !is_tp) return refuse(req, RS_BACKEND_UNSUPPORTED, "this backend does not do this op");
  char *cj = cJSON_IsObject(cs) ? cJSON_PrintUnformatted(cs) : NULL;
  if (!cj) return refuse(req, RS_BACKEND_ERROR, "request has no 'case' object");
  cJSON *a;
  int64_t (*shape)[RS_BACKEND_MAX_DIMS] = NULL;
  int *ndim = NULL;
  if (is_rd) {
    rs_case *c = malloc(sizeof *c);
    rs_locals dst = {0, NULL};
    if (!c || rs_case_from_json(cj, c) || rs_locals_for_layout(&dst, c, &c->dst)) {
      a = refuse(req, RS_BACKEND_ERROR, c ? rs_last_error() : "out of memory");
    } else {
      shape = calloc((size_t)dst.n, sizeof *shape);
      ndim = calloc((size_t)dst.n, sizeof *ndim);
      for (int p = 0; shape && ndim && p < dst.n; p++) {
        ndim[p] = dst.r[p].ndim;
        memcpy(shape[p], dst.r[p].shape, sizeof(int64_t) * (size_t)dst.r[p].ndim);
      }
      a = shape && ndim ? run_op(b, self, b->redistribute, req, cj, cJSON_GetObjectItemCaseSensitive(req, "locals"),
                                 "locals", rs_dtype_size(c->tensor.dtype), NULL, NULL, &c->mesh, shape, ndim,
                                 rs_dtype_size(c->tensor.dtype))
                        : refuse(req, RS_BACKEND_ERROR, "out of memory");
    }
    rs_locals_free(&dst);
    free(c);
  } else {
    rs_tp_case *c = malloc(sizeof *c);
    if (!c || rs_tp_case_from_json(cj, c)) {
      a = refuse(req, RS_BACKEND_ERROR, c ? rs_last_error() : "out of memory");
    } else {
      /* each rank gets room for the whole output: the backend writes its local shape */
      shape = calloc((size_t)c->mesh.nranks, sizeof *shape);
      ndim = calloc((size_t)c->mesh.nranks, sizeof *ndim);
      for (int p = 0; shape && ndim && p < c->mesh.nranks; p++) {
        ndim[p] = 3;
        shape[p][0] = c->batch, shape[p][1] = c->seq, shape[p][2] = c->mod[c->nmod - 1].out;
      }
      a = shape && ndim ? run_op(b, self, b->tp_forward, req, cj, cJSON_GetObjectItemCaseSensitive(req, "inputs"),
                                 "inputs", 0, tp_elem, c, &c->mesh, shape, ndim, rs_dtype_size(rs_tp_dtype_of(c->dtype)))
                        : refuse(req, RS_BACKEND_ERROR, "out of memory");
    }
    free(c);
  }
  free(shape);
  free(ndim);
  free(cj);
  return a;
}

int rs_conform_serve(const rs_backend *b, const char *options, void *in_file, void *out_file) {
  FILE *in = in_file, *out = out_file;
  void *self = NULL;
  char msg[1024] = "";
  if (b->create && b->create(options ? options : "", &self, msg, sizeof msg) != RS_BACKEND_OK) {
    fprintf(stderr, "create failed: %s\n", msg);
    return 1;
  }
  char *line = NULL;
  size_t cap = 0;
  int rc = 0;
  while (getline(&line, &cap, in) >= 0) {
    cJSON *req = NULL;
    if (rs_json_parse(line, &req) || !cJSON_IsObject(req)) {
      cJSON_Delete(req);
      fprintf(stderr, "not a JSON object: %.80s\n", line);
      rc = 1;
      break;
    }
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(req, "op");
    if (cJSON_IsString(op) && strcmp(op->valuestring, "bye") == 0) {
      cJSON_Delete(req);
      break;
    }
    if (cJSON_IsString(op) && strcmp(op->valuestring, "hello") == 0) answer(out, hello(b, req));
    else answer(out, serve_one(b, self, req));
    cJSON_Delete(req);
  }
  free(line);
  if (b->destroy && self) b->destroy(self);
  return rc;
}
