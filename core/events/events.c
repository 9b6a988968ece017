/* events.c - value-changing event sequences (SPEC 5): from a step plan, the canonical one of a
 * (src, dst) pair, comparison and text form. */
#include <stdio.h>
#include <string.h>
#include "reshard/events.h"

static const char *const OP_NAMES[] = {"sum", "avg", "min", "max"};

static rs_status push(rs_events *out, int kind, int mesh_dim, int op) {
  if (out->n >= RS_MAX_EVENTS) return rs_fail(RS_ERR_INVALID, "events: more than %d", RS_MAX_EVENTS);
  rs_event *e = &out->ev[out->n++];
  e->kind = (int8_t)kind;
  e->mesh_dim = (int8_t)mesh_dim;
  e->op = (int8_t)op;
  return RS_OK;
}

static int moves_nothing(const rs_mesh *m, int md) {
  return m && md >= 0 && md < m->ndim && m->size[md] == 1;
}

rs_status rs_events_from_plan(const rs_mesh *m, const rs_plan *p, rs_events *out) {
  memset(out, 0, sizeof *out);
  if (!p || p->nsteps < 0 || p->nsteps > RS_MAX_STEPS)
    return rs_fail(RS_ERR_INVALID, "plan.nsteps: out of range");
  for (int i = 0; i < p->nsteps; ++i) {
    const rs_step *s = &p->step[i];
    int fp = s->from.kind == RS_PARTIAL, tp = s->to.kind == RS_PARTIAL;
    if (fp == tp || moves_nothing(m, s->mesh_dim)) continue; /* P(x) -> P(y) is rejected elsewhere */
    rs_status st = fp ? push(out, RS_EVENT_REDUCE, s->mesh_dim, s->from.op)
                      : push(out, RS_EVENT_PARTITION, s->mesh_dim, s->to.op);
    if (st) return st;
  }
  return RS_OK;
}

rs_status rs_events_canonical(const rs_mesh *m, const rs_sharding *src, const rs_sharding *dst,
                              rs_events *out) {
  memset(out, 0, sizeof *out);
  if (src->mesh_ndim != dst->mesh_ndim)
    return rs_fail(RS_ERR_INVALID, "events: src has %d mesh dims, dst %d", src->mesh_ndim, dst->mesh_ndim);
  for (int md = 0; md < src->mesh_ndim; ++md) {
    rs_placement a = src->p[md], b = dst->p[md];
    if (a.kind == RS_PARTIAL && !(b.kind == RS_PARTIAL && b.op == a.op) && !moves_nothing(m, md))
      push(out, RS_EVENT_REDUCE, md, a.op);
  }
  for (int md = 0; md < src->mesh_ndim; ++md) {
    rs_placement a = src->p[md], b = dst->p[md];
    if (b.kind == RS_PARTIAL && !(a.kind == RS_PARTIAL && a.op == b.op) && !moves_nothing(m, md))
      push(out, RS_EVENT_PARTITION, md, b.op);
  }
  return RS_OK;
}

int rs_events_equal(const rs_events *a, const rs_events *b) {
  if (a->n != b->n) return 0;
  for (int i = 0; i < a->n; ++i)
    if (a->ev[i].kind != b->ev[i].kind || a->ev[i].mesh_dim != b->ev[i].mesh_dim ||
        a->ev[i].op != b->ev[i].op)
      return 0;
  return 1;
}

int rs_events_format(const rs_events *e, char *buf, size_t cap) {
  size_t n = 0;
  if (cap) buf[0] = 0;
  if (e->n == 0) return snprintf(buf, cap, "none");
  for (int i = 0; i < e->n && n < cap; ++i) {
    const rs_event *v = &e->ev[i];
    const char *op = (unsigned)v->op < 4 ? OP_NAMES[v->op] : "?";
    int k = snprintf(buf + n, cap - n, "%s%s %d P(%s)", i ? ", " : "",
                     v->kind == RS_EVENT_REDUCE ? "reduce" : "partition", v->mesh_dim, op);
    if (k < 0) break;
    n += (size_t)k;
  }
  return (int)(n < cap ? n : cap ? cap - 1 : 0);
}
