/* planner_plugin.c - example planner plug-ins (the C ABI of reshard/planner.h), built once per mode
 * (PLANNER_MODE) into its own shared library and loaded by `reshard fuzz-planner --planner LIB.so`:
 *   1 greedy   ref's greedy planner (declines non-default shard orders, as PyTorch's ignores them)
 *   2 graph    ref's graph planner, seed cost model (declines state spaces beyond 729 states)
 *   3 opt_p2p  opt's P2P planner
 *   4 bug      a planted bug: plans like 1/2 but drops the last step of a plan of 2+ steps; its P2P
 *              planner (opt's) sends one transfer twice
 *   5 illegal  plans like 1/2, then names a wrong `from` placement in the last step
 *   6 gather   a planted bug: plans like 1/2, but meets a destination P(sum) on a mesh dim whose
 *              source is S(d) (the pytorch enumeration's zero-fill) by gathering only: it plans to R
 *              there and stops (legal steps that end elsewhere: a wrong plan). Only a run that draws
 *              zero-fill cases can see it.
 * Modes 1, 2 and 3 must pass fuzz-planner; 4 must be caught as wrong (and as illegal for P2P), 5
 * as illegal. The plan memory is this plug-in's (malloc), returned through free_plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "reshard/planner.h"
#include "reshard/ref.h"

#ifndef PLANNER_MODE
#define PLANNER_MODE 1
#endif

rs_status rs__p2p_opt_plan(const rs_p2p_model *m, int32_t only, rs_p2p_plan *out); /* opt/p2p/plan.c */

typedef struct self_t {
  char err[512];
} self_t;

static rs_status decline(self_t *s, const char *why) {
  snprintf(s->err, sizeof s->err, "%s", why);
  return RS_ERR_UNSUPPORTED;
}

static int default_orders(const rs_planner_problem *pb) {
  return rs_sharding_is_default_order(pb->src, pb->tensor->ndim) &&
         rs_sharding_is_default_order(pb->dst, pb->tensor->ndim);
}

static rs_status plan_(void *self, const rs_planner_problem *pb, rs_planner_steps **out) {
  self_t *s = self;
  rs_plan p;
  rs_status st;
  rs_sharding gathered = *pb->dst;
  int nzf = 0;
  if (PLANNER_MODE == 6) { /* the planted bug: zero-fill destinations are planned as R */
    for (int m = 0; m < pb->mesh->ndim; m++)
      if (pb->dst->p[m].kind == RS_PARTIAL && pb->dst->p[m].op == RS_SUM && pb->src->p[m].kind == RS_SHARD) {
        gathered.p[m] = rs_pl_replicate();
        nzf++;
      }
    if (nzf) {
      rs_planner_problem q = *pb;
      q.dst = &gathered;
      return plan_(self, &q, out);
    }
  }
  int graph = PLANNER_MODE == 2 || !default_orders(pb);
  if (PLANNER_MODE == 1 && graph) return decline(s, "greedy: non-default shard order");
  if (graph) {
    int64_t states = 1;
    for (int i = 0; i < pb->mesh->ndim; i++) states *= pb->tensor->ndim + 2;
    if (states > 729) return decline(s, "graph: state space beyond 729 states");
    st = rs_ref_plan_graph_enum(pb->mesh, pb->tensor, pb->src, pb->dst, RS_COST_SEED, (rs_enumeration)pb->enumeration, &p);
  } else {
    st = rs_ref_plan_greedy_enum(pb->mesh, pb->tensor, pb->src, pb->dst, (rs_enumeration)pb->enumeration, &p);
  }
  if (st != RS_OK) {
    snprintf(s->err, sizeof s->err, "%s", rs_last_error());
    return st;
  }
  if (PLANNER_MODE == 4 && p.nsteps >= 2) p.nsteps--; /* the planted bug */
  if (PLANNER_MODE == 5 && p.nsteps >= 1) {          /* a `from` the layout does not have */
    rs_step *last = &p.step[p.nsteps - 1];
    last->from = last->from.kind == RS_REPLICATE ? rs_pl_partial(RS_MAX) : rs_pl_replicate();
  }
  rs_planner_steps *ps = malloc(sizeof *ps);
  if (!ps) return RS_ERR_NOMEM;
  ps->nsteps = p.nsteps;
  ps->step = malloc((p.nsteps ? p.nsteps : 1) * sizeof *ps->step);
  if (!ps->step) {
    free(ps);
    return RS_ERR_NOMEM;
  }
  memcpy(ps->step, p.step, p.nsteps * sizeof *ps->step);
  *out = ps;
  return RS_OK;
}

static void free_plan_(void *self, rs_planner_steps *p) {
  (void)self;
  if (p) free(p->step);
  free(p);
}

static rs_status plan_p2p_(void *self, const rs_p2p_model *m, rs_p2p_plan **out) {
  self_t *s = self;
  rs_p2p_plan *p = calloc(1, sizeof *p);
  if (!p) return RS_ERR_NOMEM;
  rs_status st = rs__p2p_opt_plan(m, -1, p);
  if (st == RS_OK && PLANNER_MODE == 4 && p->n > 0) { /* the planted bug: one transfer sent twice */
    rs_p2p_xfer x = p->x[0];
    int nd = m->param[x.param].t.ndim;
    int64_t box[2 * RS_MAX_DIMS];
    memcpy(box, p->coords + x.box, 2 * nd * sizeof *box);
    st = rs_p2p_plan_add(p, x.task + 1000000, x.param, x.src, x.dst, nd, box, box + nd);
  }
  if (st != RS_OK) {
    snprintf(s->err, sizeof s->err, "%s", rs_last_error());
    rs_p2p_plan_free(p);
    free(p);
    return st;
  }
  *out = p;
  return RS_OK;
}

static void free_p2p_plan_(void *self, rs_p2p_plan *p) {
  (void)self;
  rs_p2p_plan_free(p);
  free(p);
}

static const char *last_error_(void *self) { return ((self_t *)self)->err; }
static void destroy_(void *self) { free(self); }

#if PLANNER_MODE == 1
#define NAME "example-greedy"
#elif PLANNER_MODE == 2
#define NAME "example-graph"
#elif PLANNER_MODE == 3
#define NAME "example-opt-p2p"
#elif PLANNER_MODE == 4
#define NAME "example-planted-bug"
#elif PLANNER_MODE == 6
#define NAME "example-gather-not-zero-fill"
#else
#define NAME "example-illegal"
#endif

static const rs_planner_vtable VT = {
    sizeof(rs_planner_vtable), RS_PLANNER_ABI_VERSION, NAME,
    PLANNER_MODE == 3 ? NULL : plan_,       PLANNER_MODE == 3 ? NULL : free_plan_,
    PLANNER_MODE == 3 || PLANNER_MODE == 4 ? plan_p2p_ : NULL,
    PLANNER_MODE == 3 || PLANNER_MODE == 4 ? free_p2p_plan_ : NULL,
    last_error_, destroy_};

int rs_planner_abi_version(void) { return RS_PLANNER_ABI_VERSION; }

int rs_planner_create(const rs_planner_vtable **vt, void **self) {
  self_t *s = calloc(1, sizeof *s);
  if (!s) return 1;
  *vt = &VT;
  *self = s;
  return 0;
}
