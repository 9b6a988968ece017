/* p2p_transfers.c - a P2P plan's "transfers" list read into an rs_p2p_plan (see the header). */
#include <stdio.h>
#include <string.h>
#include "conform/p2p_transfers.h"

static int64_t find_param(const rs_p2p_model *m, const char *name) {
  for (int64_t p = 0; name && p < m->nparams; p++)
    if (strcmp(m->param[p].name, name) == 0) return p;
  return -1;
}

static rs_status read_one(const rs_p2p_model *m, const cJSON *t, const char *f, rs_p2p_plan *plan) {
  if (!cJSON_IsObject(t)) return rs_fail(RS_ERR_INVALID, "%s: not an object", f);
  const cJSON *pn = cJSON_GetObjectItemCaseSensitive(t, "param");
  int64_t p = find_param(m, cJSON_IsString(pn) ? pn->valuestring : NULL);
  if (p < 0) return rs_fail(RS_ERR_INVALID, "%s.param: not a parameter of the model", f);
  int64_t task, src, dst, off[RS_MAX_DIMS], size[RS_MAX_DIMS];
  int no = 0, ns = 0, nd = m->param[p].t.ndim;
  char fo[64], fs[64];
  snprintf(fo, sizeof fo, "%s.offsets", f);
  snprintf(fs, sizeof fs, "%s.sizes", f);
  rs_status st;
  if ((st = rs_json_i64_member(t, f, "task_id", 0, INT64_MAX, 1, &task)) ||
      (st = rs_json_i64_member(t, f, "src_rank", 0, INT32_MAX, 1, &src)) ||
      (st = rs_json_i64_member(t, f, "dst_rank", 0, INT32_MAX, 1, &dst)) ||
      (st = rs_json_i64_array(cJSON_GetObjectItemCaseSensitive(t, "offsets"), fo, RS_MAX_DIMS, 0, INT64_MAX, off, &no)) ||
      (st = rs_json_i64_array(cJSON_GetObjectItemCaseSensitive(t, "sizes"), fs, RS_MAX_DIMS, 0, INT64_MAX, size, &ns)))
    return st;
  if (no != nd || ns != nd)
    return rs_fail(RS_ERR_INVALID, "%s: offsets/sizes of '%s' have %d/%d dims, not %d", f, m->param[p].name, no, ns, nd);
  return rs_p2p_plan_add(plan, task, (int32_t)p, (int32_t)src, (int32_t)dst, nd, off, size);
}

rs_status rs__cf_read_transfers(const rs_p2p_model *m, const cJSON *list, rs_p2p_plan *plan) {
  if (!cJSON_IsArray(list)) return rs_fail(RS_ERR_INVALID, "\"transfers\" is not a list");
  const cJSON *t;
  int i = 0;
  cJSON_ArrayForEach(t, list) {
    char f[48];
    snprintf(f, sizeof f, "transfers[%d]", i++);
    rs_status st = read_one(m, t, f, plan);
    if (st) return st;
  }
  return RS_OK;
}
