/* step.c - plan steps: the collective each performs, the shard-order bookkeeping with its legality
 * rules (SPEC 6), and the trace notation of PyTorch's _redistribute.py. */
#include <stdio.h>
#include <string.h>
#include "reshard/plan.h"
#include "core/mutant.h"

static const char *const coll_names[RS_COLL_COUNT] = {
    "none", "all_gather", "all_reduce", "reduce_scatter", "all_to_all", "chunk", "partition",
    "shard_to_partial"};

const char *rs_enumeration_name(rs_enumeration e) { return e == RS_ENUM_PYTORCH ? "pytorch" : "seed"; }

rs_status rs_enumeration_parse(const char *text, rs_enumeration *out) {
  if (text && strcmp(text, "seed") == 0) { *out = RS_ENUM_SEED; return RS_OK; }
  if (text && strcmp(text, "pytorch") == 0) { *out = RS_ENUM_PYTORCH; return RS_OK; }
  return rs_fail(RS_ERR_INVALID, "enumeration: '%s' is not seed or pytorch", text ? text : "");
}

const char *rs_collective_name(rs_collective c) {
  return (unsigned)c < RS_COLL_COUNT ? coll_names[c] : "?";
}

const char *rs_planner_name(rs_planner_kind k) {
  switch (k) {
    case RS_PLANNER_GREEDY: return "greedy";
    case RS_PLANNER_GRAPH: return "graph";
    default: return "auto";
  }
}

rs_status rs_planner_parse(const char *text, rs_planner_kind *out) {
  if (text && strcmp(text, "auto") == 0) { *out = RS_PLANNER_AUTO; return RS_OK; }
  if (text && strcmp(text, "greedy") == 0) { *out = RS_PLANNER_GREEDY; return RS_OK; }
  if (text && strcmp(text, "graph") == 0) { *out = RS_PLANNER_GRAPH; return RS_OK; }
  return rs_fail(RS_ERR_INVALID, "planner: '%s' is not auto, greedy or graph", text ? text : "");
}

static void pl_text(rs_placement p, char *buf, size_t cap) { rs_format_placement(p, buf, cap); }

rs_status rs_step_collective(const rs_step *st, rs_collective *out) {
  return rs_step_collective_enum(st, RS_ENUM_SEED, out);
}

rs_status rs_step_collective_enum(const rs_step *st, rs_enumeration e, rs_collective *out) {
  rs_placement f = st->from, t = st->to;
  *out = RS_COLL_NONE;
  if (rs_pl_equal(f, t)) return RS_OK;
  if (t.kind == RS_REPLICATE) {
    if (f.kind == RS_SHARD) *out = RS_COLL_ALL_GATHER;
    else *out = RS_COLL_ALL_REDUCE;
    return RS_OK;
  }
  if (t.kind == RS_SHARD) {
    if (f.kind == RS_PARTIAL) *out = RS_COLL_REDUCE_SCATTER;
    else if (f.kind == RS_REPLICATE) *out = RS_COLL_CHUNK;
    else *out = RS_COLL_ALL_TO_ALL;
    return RS_OK;
  }
  /* target Partial */
  if (f.kind == RS_REPLICATE) {
    *out = RS_COLL_PARTITION;
    return RS_OK;
  }
  /* PyTorch's explicit zero-fill: each rank embeds its shard in zeros, the sum is the tensor */
  if (e == RS_ENUM_PYTORCH && f.kind == RS_SHARD && t.op == RS_SUM) {
    *out = RS_COLL_SHARD_TO_PARTIAL;
    return RS_OK;
  }
  char a[32], b[32];
  pl_text(f, a, sizeof a);
  pl_text(t, b, sizeof b);
  return rs_fail(RS_ERR_UNSUPPORTED, "step on mesh dim %d: %s -> %s is not supported", st->mesh_dim, a, b);
}

rs_status rs_sharding_apply_step(rs_sharding *s, const rs_step *st, int tensor_ndim) {
  return rs_mesh_apply_step(NULL, s, st, tensor_ndim);
}

rs_status rs_mesh_apply_step(const rs_mesh *mesh, rs_sharding *s, const rs_step *st, int tensor_ndim) {
  return rs_mesh_apply_step_enum(mesh, s, st, tensor_ndim, RS_ENUM_SEED);
}

rs_status rs_mesh_apply_step_enum(const rs_mesh *mesh, rs_sharding *s, const rs_step *st, int tensor_ndim,
                                  rs_enumeration e) {
  int m = st->mesh_dim;
  if (m < 0 || m >= s->mesh_ndim)
    return rs_fail(RS_ERR_ILLEGAL, "step: mesh dim %d out of range", m);
  rs_placement from = st->from, to = st->to;
  if (from.kind == RS_SHARD && from.dim < 0) from.dim = (int8_t)(from.dim + tensor_ndim);
  if (to.kind == RS_SHARD && to.dim < 0) to.dim = (int8_t)(to.dim + tensor_ndim);
  char a[32], b[32], cur[32];
  pl_text(from, a, sizeof a);
  pl_text(to, b, sizeof b);
  if (!rs_pl_equal(from, s->p[m])) {
    pl_text(s->p[m], cur, sizeof cur);
    return rs_fail(RS_ERR_ILLEGAL, "step on mesh dim %d: from %s but the placement is %s", m, a, cur);
  }
  if (to.kind == RS_SHARD && (to.dim < 0 || to.dim >= tensor_ndim))
    return rs_fail(RS_ERR_ILLEGAL, "step on mesh dim %d: shard dim of %s out of range", m, b);
  rs_collective c;
  rs_status sc = rs_step_collective_enum(st, e, &c);
  if (sc) return sc;
  if (c == RS_COLL_NONE) return RS_OK;
  if (from.kind == RS_SHARD) {
    int d = from.dim, n = s->order_len[d], at = n - 1;
    if (mesh && m < mesh->ndim && mesh->size[m] == 1)
      while (at >= 0 && s->order[d][at] != m) --at;
    if (at < 0 || s->order[d][at] != m)
      return rs_fail(RS_ERR_ILLEGAL,
                     "step on mesh dim %d: %s -> %s but mesh dim %d is not the last to split tensor dim %d",
                     m, a, b, m, d);
    for (int k = at; k + 1 < n; ++k) s->order[d][k] = s->order[d][k + 1];
    s->order_len[d]--;
  }
  if (to.kind == RS_SHARD) {
    int d = to.dim;
    /* Mutant 273: a mesh dim joining a list of two or more goes first instead of last. */
    if (RS_MUTANT(273) && s->order_len[d] >= 2) {
      for (int k = s->order_len[d]; k > 0; --k) s->order[d][k] = s->order[d][k - 1];
      s->order[d][0] = (int8_t)m;
      s->order_len[d]++;
    } else {
      s->order[d][s->order_len[d]++] = (int8_t)m;
    }
  }
  s->p[m] = to;
  return RS_OK;
}

rs_status rs_plan_trace(const rs_mesh *m, const rs_sharding *src, int tensor_ndim, const rs_plan *p,
                        char *buf, size_t cap) {
  rs_sharding cur = *src;
  size_t used = 0;
  char state[256];
  if (cap) buf[0] = 0;
  for (int i = 0; i <= p->nsteps; ++i) {
    if (i > 0) {
      rs_status st = rs_mesh_apply_step_enum(m, &cur, &p->step[i - 1], tensor_ndim, p->enumeration);
      if (st) return st;
    }
    int n = rs_format_sharding(&cur, state, sizeof state);
    if (used + (size_t)n + 3 >= cap) return rs_fail(RS_ERR_INVALID, "trace: buffer too small");
    if (i > 0) {
      memcpy(buf + used, "->", 2);
      used += 2;
    }
    memcpy(buf + used, state, (size_t)n + 1);
    used += (size_t)n;
  }
  return RS_OK;
}

rs_status rs_plan_check(const rs_mesh *m, const rs_sharding *src, const rs_sharding *dst,
                        int tensor_ndim, const rs_plan *p) {
  rs_sharding cur = *src;
  for (int i = 0; i < p->nsteps; ++i) {
    rs_status st = rs_mesh_apply_step_enum(m, &cur, &p->step[i], tensor_ndim, p->enumeration);
    if (st) {
      char where[32];
      snprintf(where, sizeof where, "plan step %d: ", i);
      return rs_fail_prefix(st, where);
    }
  }
  if (!rs_sharding_equivalent(m, &cur, dst, tensor_ndim)) {
    char a[256], b[256];
    rs_format_sharding(&cur, a, sizeof a);
    rs_format_sharding(dst, b, sizeof b);
    return rs_fail(RS_ERR_ILLEGAL, "plan ends at %s, not at the destination %s", a, b);
  }
  return RS_OK;
}
