/* planner_exec.c - a planner in a child process: the process protocol's planner role (ops "plan" and
 * "p2p_plan", docs/conformance.md) over conform/proto.c, presented as a planner vtable so the host
 * and the campaign treat it like a plug-in. Requests carry the case (or the P2P model) in the
 * fixtures' JSON form; answers carry the steps of `reshard plan --json` (or the transfers of
 * `reshard p2p plan --json`). An answer that is not of that form is a garbage fault: that case
 * fails and the child is restarted. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform/p2p_transfers.h"
#include "conform/planner_exec.h"
#include "conform/proto.h"
#include "core/case_json.h"
#include "core/json.h"

typedef struct exec_planner {
  rs_planner_vtable vt;
  rs_proto *p;
  char err[2048];
  rs_planner_steps steps;
  rs_step step[RS_MAX_STEPS];
  rs_p2p_plan plan;
  int64_t max_instances; /* hello "max_instances" (0: any number at once) */
} exec_planner;

static rs_status fail_msg(exec_planner *x, rs_status st, const char *fmt, const char *what) {
  snprintf(x->err, sizeof x->err, fmt, what);
  return st;
}

/* One request; RS_OK with *answer (caller frees), else the planner's status with x->err set. */
static rs_status call(exec_planner *x, cJSON *req, cJSON **answer) {
  rs_exec_fault fault = RS_EXEC_FINE;
  char msg[2048];
  rs_proto_result res = rs_proto_call(x->p, req, answer, msg, sizeof msg, &fault);
  cJSON_Delete(req);
  switch (res) {
  case RS_PROTO_OK: return RS_OK;
  case RS_PROTO_UNSUPPORTED: return fail_msg(x, RS_ERR_UNSUPPORTED, "%s", msg);
  case RS_PROTO_FAILED: return fail_msg(x, RS_ERR_INVALID, "%s", msg);
  default: return fail_msg(x, RS_ERR_TRANSPORT, "%s", msg);
  }
}

/* A malformed answer: the child's fault (garbage), restarted before the next request. */
/* A placement text as a planner may write it, its shard dim any integer (S(8), S(-9), S(200)):
 * out of range for the case is the checker's `illegal`, not a garbage answer. A dim beyond what
 * a placement holds (int8) is kept as the nearest it holds, out of range all the same. */
static int wide_placement(const char *text, rs_placement *out) {
  if (rs_parse_placement(text, out) == RS_OK) return 0;
  long long v;
  char close = 0, extra = 0;
  if (sscanf(text, "S(%lld%c%c", &v, &close, &extra) == 2 && close == ')' && text[2] != ' ' && text[2] != '+') {
    *out = rs_pl_shard(v < INT8_MIN ? INT8_MIN : v > INT8_MAX ? INT8_MAX : (int)v);
    return 0;
  }
  return 1;
}

static rs_status garbage(exec_planner *x, cJSON *answer, const char *what) {
  rs_proto_reject_answer(x->p);
  cJSON_Delete(answer);
  return fail_msg(x, RS_ERR_TRANSPORT, "garbage answer: %s", what);
}

static rs_status plan_(void *self, const rs_planner_problem *pb, rs_planner_steps **out) {
  exec_planner *x = self;
  rs_case c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "fuzz-planner");
  c.mesh = *pb->mesh;
  c.tensor = *pb->tensor;
  c.src = *pb->src;
  c.dst = *pb->dst;
  c.enumeration = (rs_enumeration)pb->enumeration;
  c.values = rs_case_default_values(&c);
  cJSON *req = cJSON_CreateObject(), *cj = rs__case_to_cjson(&c), *answer = NULL;
  if (!req || !cj) {
    cJSON_Delete(req);
    cJSON_Delete(cj);
    return fail_msg(x, RS_ERR_NOMEM, "%s", "out of memory");
  }
  cJSON_AddStringToObject(req, "op", "plan");
  cJSON_AddItemToObject(req, "case", cj);
  rs_status st = call(x, req, &answer);
  if (st != RS_OK) return st;
  const cJSON *steps = cJSON_GetObjectItemCaseSensitive(answer, "steps");
  if (!cJSON_IsArray(steps)) return garbage(x, answer, "\"steps\" is not a list");
  int n = cJSON_GetArraySize(steps);
  if (n > RS_MAX_STEPS) {
    cJSON_Delete(answer);
    snprintf(x->err, sizeof x->err, "a plan of %d steps (at most %d)", n, RS_MAX_STEPS);
    return RS_ERR_INVALID;
  }
  int i = 0;
  const cJSON *s;
  cJSON_ArrayForEach(s, steps) {
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(s, "from"), *to = cJSON_GetObjectItemCaseSensitive(s, "to");
    int64_t md;
    /* One rule for a step out of range: a step of the right shape (an integer mesh_dim, two
     * placement texts) is judged by the plan checker, so a mesh dim or shard dim beyond the case
     * (mesh_dim 2 on a 2-d mesh, 6, -1, S(8), S(-9)) is `illegal`, whatever the number; only a step
     * of another shape is `error` (garbage answer). docs/conformance.md "Planner fuzzing". */
    if (!cJSON_IsObject(s) || rs_json_i64_member(s, "steps", "mesh_dim", INT_MIN, INT_MAX, 1, &md) ||
        !cJSON_IsString(from) || !cJSON_IsString(to) || wide_placement(from->valuestring, &x->step[i].from) ||
        wide_placement(to->valuestring, &x->step[i].to))
      return garbage(x, answer, "a step is not {\"mesh_dim\":int,\"from\":placement,\"to\":placement}");
    x->step[i++].mesh_dim = (int)md;
  }
  cJSON_Delete(answer);
  x->steps.nsteps = n;
  x->steps.step = x->step;
  *out = &x->steps;
  return RS_OK;
}

static void free_plan_(void *self, rs_planner_steps *p) {
  (void)self;
  (void)p;
}

static rs_status plan_p2p_(void *self, const rs_p2p_model *m, rs_p2p_plan **out) {
  exec_planner *x = self;
  char *text = NULL;
  cJSON *model = NULL, *answer = NULL;
  rs_status st = rs_p2p_model_to_json(m, NULL, &text);
  if (st == RS_OK) st = rs_json_parse(text, &model);
  free(text);
  cJSON *req = st == RS_OK ? cJSON_CreateObject() : NULL;
  if (!req) {
    cJSON_Delete(model);
    return fail_msg(x, st ? st : RS_ERR_NOMEM, "the model as JSON: %s", rs_last_error());
  }
  cJSON_AddStringToObject(req, "op", "p2p_plan");
  cJSON_AddItemToObject(req, "model", model);
  if ((st = call(x, req, &answer)) != RS_OK) return st;
  rs_p2p_plan_free(&x->plan);
  memset(&x->plan, 0, sizeof x->plan);
  if (rs__cf_read_transfers(m, cJSON_GetObjectItemCaseSensitive(answer, "transfers"), &x->plan) != RS_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", rs_last_error());
    return garbage(x, answer, why);
  }
  cJSON_Delete(answer);
  *out = &x->plan;
  return RS_OK;
}

static void free_p2p_plan_(void *self, rs_p2p_plan *p) {
  (void)self;
  rs_p2p_plan_free(p);
  memset(p, 0, sizeof *p);
}

static const char *last_error_(void *self) { return ((exec_planner *)self)->err; }

static void destroy_(void *self) {
  exec_planner *x = self;
  rs_proto_close(x->p);
  rs_p2p_plan_free(&x->plan);
  free(x);
}

rs_status rs__planner_exec_reopen(void *self) {
  exec_planner *x = self;
  rs_status st = rs_proto_reopen(&x->p);
  if (st != RS_OK) return rs_fail_prefix(st, "--planner exec: a worker's own child: ");
  x->vt.name = rs_proto_name(x->p); /* the forgotten child's name went with it */
  return RS_OK;
}

int64_t rs__planner_exec_max_instances(const void *self) { return ((const exec_planner *)self)->max_instances; }

rs_status rs__planner_exec_open(const char *cmd, double timeout_s, const rs_planner_vtable **vt, void **self) {
  *vt = NULL;
  *self = NULL;
  exec_planner *x = calloc(1, sizeof *x);
  if (!x) return rs_fail(RS_ERR_NOMEM, "--planner: out of memory");
  rs_status st = rs_proto_open(cmd, "planner", timeout_s, &x->p);
  if (st != RS_OK) {
    free(x);
    return rs_fail_prefix(st, "--planner exec: ");
  }
  /* "max_instances": k >= 1 children of this command at most at once (a planner holding a port, a
   * file, a licence); 0 or absent: any number. The name is the conform backends' hello field. */
  if (rs_proto_hello_int(x->p, "max_instances", 0, INT32_MAX, &x->max_instances) < 0) {
    rs_status bad = rs_fail(RS_ERR_INVALID, "--planner exec:%s: %s (max_instances: an integer, 0 or absent for any "
                            "number)", cmd, rs_last_error());
    rs_proto_close(x->p);
    free(x);
    return bad;
  }
  int plan = rs_proto_has(x->p, "plan"), p2p = rs_proto_has(x->p, "p2p_plan");
  rs_planner_vtable v = {sizeof v,
                         RS_PLANNER_ABI_VERSION,
                         rs_proto_name(x->p),
                         plan ? plan_ : NULL,
                         plan ? free_plan_ : NULL,
                         p2p ? plan_p2p_ : NULL,
                         p2p ? free_p2p_plan_ : NULL,
                         last_error_,
                         destroy_};
  x->vt = v;
  *vt = &x->vt;
  *self = x;
  return RS_OK;
}
