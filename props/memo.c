/* memo.c - per-case results shared by the properties: the source locals, the oracle's expected
 * locals, ref's plans and ref's runs of those plans on the source. Several properties need the same ones, and the graph planner and the
 * value generator are most of a campaign's time, so each is computed once per case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memo.h"
#include "reshard/oracle.h"
#include "reshard/ref.h"
#include "core/values.h"

#define MEMO_PLANS 8
#define MEMO_EXPECTED 3 /* event sequences per case: canonical, a greedy plan's, a graph plan's */
#define MEMO_RUNS 3     /* ref runs per case: the greedy plan's, the graph plan's, one more */

/* What a plan depends on (not the rank list, not the data). */
typedef struct plan_key {
  int planner, cost, enumeration, mesh_ndim;
  int64_t size[RS_MAX_MESH_DIMS];
  rs_tensor t;
  rs_sharding src, dst;
} plan_key;

typedef struct memo_data {
  int done;
  rs_status st;
  char err[512];
  rs_locals l;
} memo_data;

struct rs_prop_memo {
  rs_case key;
  int have_key;
  memo_data in, exp[MEMO_EXPECTED];
  rs_events exp_ev[MEMO_EXPECTED];
  int next_exp;
  memo_data run[MEMO_RUNS];
  rs_plan run_plan[MEMO_RUNS];
  int next_run;
  struct {
    int used;
    plan_key k;
    rs_status st;
    char err[512];
    rs_plan p;
  } plans[MEMO_PLANS];
  int next_plan;
};

rs_status rs_prop_memo_create(rs_prop_memo **out) {
  *out = calloc(1, sizeof **out);
  return *out ? RS_OK : rs_fail(RS_ERR_NOMEM, "memo: out of memory");
}

static void data_reset(memo_data *d) {
  rs_locals_free(&d->l);
  memset(d, 0, sizeof *d);
}

void rs_prop_memo_free(rs_prop_memo *m) {
  if (!m) return;
  data_reset(&m->in);
  for (int i = 0; i < MEMO_EXPECTED; i++) data_reset(&m->exp[i]);
  for (int i = 0; i < MEMO_RUNS; i++) data_reset(&m->run[i]);
  free(m);
}

/* Point the memo at case c, dropping data of another case. */
static void rekey(rs_prop_memo *m, const rs_case *c) {
  if (m->have_key && memcmp(&m->key, c, sizeof *c) == 0) return;
  data_reset(&m->in);
  for (int i = 0; i < MEMO_EXPECTED; i++) data_reset(&m->exp[i]);
  for (int i = 0; i < MEMO_RUNS; i++) data_reset(&m->run[i]);
  m->next_exp = 0;
  m->next_run = 0;
  memcpy(&m->key, c, sizeof *c);
  m->have_key = 1;
}

static rs_status replay_status(rs_status st, const char *err) {
  return st ? rs_fail(st, "%s", err) : RS_OK;
}

/* A remembered result handed out: its locals and its status again (with its message). */
static rs_status give(const memo_data *d, const rs_locals **out) {
  *out = &d->l;
  return replay_status(d->st, d->err);
}

/* The next slot of a ring of n, emptied for a new result. */
static int take_slot(memo_data *d, int n, int *next) {
  int i = *next;
  *next = (i + 1) % n;
  data_reset(&d[i]);
  return i;
}

static void remember(memo_data *d, rs_status st) {
  d->done = 1;
  d->st = st;
  if (st) snprintf(d->err, sizeof d->err, "%s", rs_last_error());
}

rs_status rs_memo_source(rs_prop_memo *m, const rs_case *c, rs_locals *tmp, const rs_locals **out) {
  if (!m) {
    *out = tmp;
    return rs_make_source(c, tmp);
  }
  rekey(m, c);
  if (!m->in.done) remember(&m->in, rs_make_source(c, &m->in.l));
  return give(&m->in, out);
}

rs_status rs_memo_expected(rs_prop_memo *m, const rs_case *c, const rs_events *ev, rs_locals *tmp,
                           const rs_locals **out) {
  rs_events canon;
  if (!ev) {
    rs_status st = rs_events_canonical(&c->mesh, &c->src, &c->dst, &canon);
    if (st) return st;
    ev = &canon;
  }
  if (!m) {
    *out = tmp;
    return rs_oracle_expected_events(c, &c->dst, ev, tmp);
  }
  rekey(m, c);
  for (int i = 0; i < MEMO_EXPECTED; i++)
    if (m->exp[i].done && rs_events_equal(&m->exp_ev[i], ev)) return give(&m->exp[i], out);
  int i = take_slot(m->exp, MEMO_EXPECTED, &m->next_exp);
  m->exp_ev[i] = *ev;
  remember(&m->exp[i], rs_oracle_expected_events(c, &c->dst, ev, &m->exp[i].l));
  return give(&m->exp[i], out);
}

/* Plans compared field by field (a step's padding bytes are not part of it). */
static int plan_equal(const rs_plan *a, const rs_plan *b) {
  if (a->nsteps != b->nsteps || a->enumeration != b->enumeration) return 0;
  for (int i = 0; i < a->nsteps; i++) {
    const rs_step *x = &a->step[i], *y = &b->step[i];
    if (x->mesh_dim != y->mesh_dim || x->from.kind != y->from.kind || x->from.dim != y->from.dim ||
        x->from.op != y->from.op || x->to.kind != y->to.kind || x->to.dim != y->to.dim || x->to.op != y->to.op)
      return 0;
  }
  return 1;
}

rs_status rs_memo_run(rs_prop_memo *m, const rs_case *c, const rs_plan *p, const rs_locals *in, rs_locals *tmp,
                      const rs_locals **out) {
  if (!m || p->nsteps < 0 || p->nsteps > RS_MAX_STEPS) { /* a plan out of range: ref refuses it, unshared */
    *out = tmp;
    return rs_ref_execute(c, p, in, tmp);
  }
  rekey(m, c);
  for (int i = 0; i < MEMO_RUNS; i++)
    if (m->run[i].done && plan_equal(&m->run_plan[i], p)) return give(&m->run[i], out);
  int i = take_slot(m->run, MEMO_RUNS, &m->next_run);
  m->run_plan[i] = *p;
  remember(&m->run[i], rs_ref_execute(c, p, in, &m->run[i].l));
  return give(&m->run[i], out);
}

static rs_status plan_now(const rs_case *c, rs_planner_kind k, rs_plan *out) {
  if (k == RS_PLANNER_GREEDY) return rs_ref_plan_greedy_enum(&c->mesh, &c->tensor, &c->src, &c->dst, c->enumeration, out);
  return rs_ref_plan_graph_enum(&c->mesh, &c->tensor, &c->src, &c->dst, c->cost, c->enumeration, out);
}

rs_status rs_memo_plan(rs_prop_memo *m, const rs_case *c, rs_planner_kind k, rs_plan *out) {
  if (k == RS_PLANNER_AUTO) k = rs_case_resolve_planner(c);
  if (!m) return plan_now(c, k, out);
  plan_key key;
  memset(&key, 0, sizeof key);
  key.planner = k;
  key.cost = k == RS_PLANNER_GRAPH ? (int)c->cost : 0;
  key.enumeration = (int)c->enumeration;
  key.mesh_ndim = c->mesh.ndim;
  memcpy(key.size, c->mesh.size, sizeof key.size);
  key.t = c->tensor;
  key.src = c->src;
  key.dst = c->dst;
  for (int i = 0; i < MEMO_PLANS; i++)
    if (m->plans[i].used && memcmp(&m->plans[i].k, &key, sizeof key) == 0) {
      *out = m->plans[i].p;
      return replay_status(m->plans[i].st, m->plans[i].err);
    }
  int i = m->next_plan;
  m->next_plan = (i + 1) % MEMO_PLANS;
  m->plans[i].used = 1;
  m->plans[i].k = key;
  memset(&m->plans[i].p, 0, sizeof m->plans[i].p);
  m->plans[i].st = plan_now(c, k, &m->plans[i].p);
  if (m->plans[i].st) snprintf(m->plans[i].err, sizeof m->plans[i].err, "%s", rs_last_error());
  *out = m->plans[i].p;
  return m->plans[i].st;
}
