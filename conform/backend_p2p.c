/* backend_p2p.c - the backend under test's cross-config calls (SPEC 10): plan a P2P model, and
 * execute it (the source config's locals in, every destination local out), over the plug-in ABI or
 * the process protocol. Locals are listed per (parameter, world rank); an MXFP8 destination also
 * carries its scales. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform/backend_internal.h"
#include "conform/b64.h"
#include "conform/p2p_transfers.h"
#include "core/json.h"
#include "reshard/p2p.h"


static int64_t find_param(const rs_p2p_model *m, const char *name) {
  for (int64_t p = 0; name && p < m->nparams; p++)
    if (strcmp(m->param[p].name, name) == 0) return p;
  return -1;
}

/* The model as the backend is sent it: in template form when it declares that it expands templates
 * (RS_CF_P2P_TEMPLATES) and the model has one that gives it back exactly, else explicit (templates
 * expanded by reshard). Either way the oracle holds the result to reshard's expansion. */
static rs_status model_text(rs_cf_backend *b, const rs_p2p_model *m, char **text) {
  if ((b->caps & RS_CF_P2P_TEMPLATES) && m->arch_set && rs_p2p_model_to_template_json(m, text) == RS_OK) {
    atomic_fetch_add(&b->sh->templates_sent, 1);
    return RS_OK;
  }
  return rs_p2p_model_to_json(m, NULL, text);
}

static cJSON *model_json(rs_cf_backend *b, const rs_p2p_model *m) {
  char *text = NULL;
  cJSON *j = NULL;
  if (model_text(b, m, &text) == RS_OK) rs_json_parse(text, &j);
  free(text);
  return j;
}

static int elem_of(const rs_p2p_model *m, int which, int64_t p) {
  return which == RS_P2P_DST && m->param[p].transform == RS_XFORM_MXFP8 ? 1 : rs_dtype_size(m->param[p].t.dtype);
}

/* ---- plan ---- */

typedef struct sink_ctx {
  const rs_p2p_model *m;
  rs_p2p_plan *plan;
  int bad;
  char why[256];
} sink_ctx;

static int sink_add(void *vctx, int64_t task, int32_t param, int32_t src, int32_t dst, int32_t ndim,
                    const int64_t *start, const int64_t *size) {
  sink_ctx *x = vctx;
  if (param < 0 || param >= x->m->nparams || ndim != x->m->param[param].t.ndim) {
    if (!x->bad++) snprintf(x->why, sizeof x->why, "transfer %lld: param %d / ndim %d do not name a parameter", (long long)task, param, ndim);
    return 1;
  }
  if (rs_p2p_plan_add(x->plan, task, param, src, dst, ndim, start, size)) {
    if (!x->bad++) snprintf(x->why, sizeof x->why, "%s", rs_last_error());
    return 1;
  }
  return 0;
}

void rs_cf_p2p_plan(rs_cf_backend *b, const rs_p2p_model *m, rs_p2p_plan *plan, rs_cf_call *call) {
  memset(call, 0, sizeof *call);
  memset(plan, 0, sizeof *plan);
  sink_ctx x = {m, plan, 0, ""};
  if (!b->proto) {
    char *text = NULL;
    if (model_text(b, m, &text)) return rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "%s", rs_last_error());
    rs_backend_p2p_sink sink = {&x, sink_add};
    call->result = b->abi.p2p_plan(b->self, text, &sink, call->msg, sizeof call->msg);
    free(text);
    if (call->result != RS_BACKEND_OK && call->result != RS_BACKEND_UNSUPPORTED) call->result = RS_BACKEND_ERROR;
    if (call->result == RS_BACKEND_OK && x.bad) rs__cf_bad_answer(b, call, x.why);
    return;
  }
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "op", "p2p_plan");
  cJSON_AddItemToObject(req, "model", model_json(b, m));
  cJSON *ans = rs__cf_request(b, req, call);
  cJSON_Delete(req);
  if (!ans) return;
  if (rs__cf_read_transfers(m, cJSON_GetObjectItemCaseSensitive(ans, "transfers"), plan))
    x.bad = 1, snprintf(x.why, sizeof x.why, "%s", rs_last_error());
  if (x.bad) rs__cf_bad_answer(b, call, x.why);
  cJSON_Delete(ans);
}

/* ---- execute ---- */

/* Every (parameter, position) local of one config as plug-in buffers (pointing into l), MXFP8
 * scales as extra buffers named "<param>.scale". names: storage for those names. */
rs_backend_buf *rs__cf_p2p_bufs(const rs_p2p_model *m, int which, const rs_p2p_locals *l, int *n, char ***names) {
  int cap = 0, k = 0;
  for (int64_t p = 0; p < m->nparams; p++) cap += (int)l->npos[p] * 2;
  rs_backend_buf *b = calloc((size_t)(cap ? cap : 1), sizeof *b);
  *names = calloc((size_t)(cap ? cap : 1), sizeof **names);
  if (!b || !*names) return free(b), NULL;
  const rs_p2p_config *c = &m->cfg[which];
  for (int64_t p = 0; p < m->nparams; p++) {
    const rs_p2p_mesh *me = &c->mesh[c->place[p].mesh];
    int es = elem_of(m, which, p), nd = m->param[p].t.ndim;
    for (int64_t q = 0; q < l->npos[p]; q++) {
      const rs_p2p_local *lo = &l->loc[p][q];
      if (!lo->data) continue;
      int64_t start[RS_MAX_DIMS];
      rs_backend_buf *x = &b[k++];
      x->rank = me->ranks[q];
      x->ndim = nd;
      rs_p2p_box(m, which, p, q, start, x->shape);
      x->nbytes = x->capacity = lo->numel * es;
      x->data = lo->data;
      x->name = m->param[p].name;
      if (lo->scale) {
        rs_backend_buf *s = &b[k];
        size_t len = strlen(m->param[p].name) + 8;
        if (!((*names)[k] = malloc(len))) continue;
        snprintf((*names)[k], len, "%s.scale", m->param[p].name);
        k++;
        s->rank = me->ranks[q];
        s->ndim = 1;
        s->shape[0] = lo->numel / RS_MXFP8_BLOCK;
        s->nbytes = s->capacity = s->shape[0];
        s->data = lo->scale;
        s->name = (*names)[k - 1];
      }
    }
  }
  *n = k;
  return b;
}

void rs__cf_free_names(char **names, int n) {
  for (int i = 0; names && i < n; i++) free(names[i]);
  free(names);
}

/* A process's "dst" list into the destination locals. */
static void read_dst(rs_cf_backend *b, const rs_p2p_model *m, const cJSON *ans, rs_p2p_locals *got, rs_cf_call *call) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(ans, "dst"), *t;
  char why[512];
  if (!cJSON_IsArray(arr)) return rs__cf_bad_answer(b, call, "'dst' must be a list");
  int i = 0;
  cJSON_ArrayForEach(t, arr) {
    char what[48];
    snprintf(what, sizeof what, "dst[%d]", i++);
    const cJSON *pn = cJSON_GetObjectItemCaseSensitive(t, "param");
    int64_t p = find_param(m, cJSON_IsString(pn) ? pn->valuestring : NULL);
    int32_t rank;
    int nd;
    int64_t shape[RS_MAX_DIMS], nbytes, start[RS_MAX_DIMS], want[RS_MAX_DIMS];
    void *data = NULL;
    if (p < 0) {
      snprintf(why, sizeof why, "%s.param: not a parameter of the model", what);
      return rs__cf_bad_answer(b, call, why);
    }
    if (rs_proto_tensor_read(t, what, elem_of(m, RS_P2P_DST, p), RS_MAX_DIMS, &rank, &nd, shape, &data, &nbytes))
      return rs__cf_bad_answer(b, call, rs_last_error());
    int64_t q = rs_p2p_pos(m, RS_P2P_DST, p, rank);
    rs_p2p_local *lo = q >= 0 ? &got->loc[p][q] : NULL;
    if (lo) rs_p2p_box(m, RS_P2P_DST, p, q, start, want);
    if (!lo || nd != m->param[p].t.ndim || memcmp(shape, want, sizeof(int64_t) * (size_t)nd) != 0) {
      free(data);
      /* a wrong shape or a rank that holds nothing is a wrong answer, not a protocol error */
      snprintf(call->msg, sizeof call->msg, "%s: parameter %s on rank %d: %s", what, m->param[p].name, rank,
               lo ? "local shape differs from its box (SPEC 4)" : "that rank holds no local of it in the dst config");
      call->result = RS_BACKEND_ERROR;
      return;
    }
    memcpy(lo->data, data, (size_t)nbytes);
    free(data);
    if (lo->scale) {
      const cJSON *sc = cJSON_GetObjectItemCaseSensitive(t, "scale");
      int64_t ns = lo->numel / RS_MXFP8_BLOCK;
      size_t len = cJSON_IsString(sc) ? strlen(sc->valuestring) : 0;
      if (!cJSON_IsString(sc) || len != rs_b64_len((size_t)ns) ||
          rs_b64_decode(sc->valuestring, len, lo->scale, (size_t)ns) != ns)
        return rs__cf_bad_answer(b, call, "an MXFP8 destination needs 'scale': base64 of numel/32 E8M0 bytes");
    }
  }
}

/* plan as `reshard p2p plan --json` prints it (core/p2p/plan.c's printer: the one form), malloc'd;
 * NULL with rs_last_error() on failure. */
static char *plan_text(const rs_p2p_model *m, const rs_p2p_plan *plan) {
  int64_t lb = 0;
  char *buf = NULL;
  size_t len = 0;
  if (rs_p2p_lower_bound(m, &lb)) return NULL;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return rs_fail(RS_ERR_NOMEM, "plan: out of memory"), NULL;
  rs_status st = rs_p2p_plan_json(m, plan, lb, f);
  if (fclose(f) && !st) st = rs_fail(RS_ERR_NOMEM, "plan: out of memory");
  if (st) free(buf);
  return st ? NULL : buf;
}

void rs_cf_p2p_execute(rs_cf_backend *b, const rs_p2p_model *m, const rs_p2p_plan *plan, const rs_p2p_locals *src,
                       rs_p2p_locals *got, rs_cf_call *call) {
  memset(call, 0, sizeof *call);
  int ns = 0, nd = 0;
  char **sn = NULL, **dn = NULL, *pj = NULL;
  cJSON *pl = NULL;
  if (plan && (!(pj = plan_text(m, plan)) || (b->proto && rs_json_parse(pj, &pl)))) {
    free(pj);
    rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "plan: %s", rs_last_error());
    return;
  }
  rs_backend_buf *sb = rs__cf_p2p_bufs(m, RS_P2P_SRC, src, &ns, &sn);
  if (!sb) {
    free(pj);
    cJSON_Delete(pl);
    rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "%s", "out of memory");
    return;
  }
  if (b->proto) {
    cJSON *req = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    cJSON_AddStringToObject(req, "op", "p2p_execute");
    cJSON_AddItemToObject(req, "model", model_json(b, m));
    /* null: its own plan (what a child that did not declare "p2p_any_plan" is always sent) */
    if (pl) cJSON_AddItemToObject(req, "plan", pl);
    else cJSON_AddNullToObject(req, "plan");
    for (int i = 0; i < ns; i++)
      cJSON_AddItemToArray(arr, rs_proto_tensor(sb[i].rank, sb[i].ndim, sb[i].shape, sb[i].data, sb[i].nbytes, "param", sb[i].name));
    cJSON_AddItemToObject(req, "src", arr);
    cJSON *ans = rs__cf_request(b, req, call);
    cJSON_Delete(req);
    if (ans) read_dst(b, m, ans, got, call);
    cJSON_Delete(ans);
  } else {
    char *text = NULL;
    rs_backend_buf *db = rs__cf_p2p_bufs(m, RS_P2P_DST, got, &nd, &dn);
    if (!db || model_text(b, m, &text)) {
      rs__cf_call_set(call, RS_BACKEND_ERROR, RS_EXEC_FINE, "%s", db ? rs_last_error() : "out of memory");
    } else {
      rs_backend_bufs vs = {ns, sb}, vd = {nd, db};
      for (int i = 0; i < nd; i++) rs__cf_poison(db[i].data, db[i].capacity);
      /* pj NULL: its own plan; the backend's own transport always (cs NULL) */
      call->result = b->abi.p2p_execute(b->self, text, pj, NULL, NULL, &vs, &vd, call->msg, sizeof call->msg);
      if (call->result != RS_BACKEND_OK && call->result != RS_BACKEND_UNSUPPORTED) call->result = RS_BACKEND_ERROR;
      for (int i = 0; i < nd && call->result == RS_BACKEND_OK; i++)
        if (db[i].nbytes != db[i].capacity) {
          char why[256];
          snprintf(why, sizeof why, "dst %s on rank %d: %lld bytes written, the box holds %lld", db[i].name, db[i].rank,
                   (long long)db[i].nbytes, (long long)db[i].capacity);
          rs__cf_bad_answer(b, call, why);
        }
    }
    free(text);
    free(db);
    rs__cf_free_names(dn, nd);
  }
  free(sb);
  free(pj);
  rs__cf_free_names(sn, ns);
}
