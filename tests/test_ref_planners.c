/* test_ref_planners.c - traces and collective counts of the reference planners (SPEC 7).
 *
 * Where the expected values come from:
 *  - "pytorch test": PyTorch's own test_redistribute.py expectations (DistributeWithDeviceOrderTest
 *    test_ordered_redistribute, which runs the graph planner: the reference version of that test
 *    expects the reference constant costs, the current one the byte/topology costs; and
 *    MultiDimRedistributeTest test_redistribute_shard_dim_multi_dim_mesh's comm counts, greedy);
 *  - "torch x-check": the installed torch 2.15 DTensorRedistributePlanner with its cost callback
 *    replaced by the reference constants, case 6 limited to Partial(sum) and the explicit
 *    Shard -> Partial edge removed (what the reference enumerates); its greedy planner is unchanged
 *    from the reference except on 1-D meshes;
 *  - "reference": hand-run of the reference algorithm where torch today behaves differently. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "reshard/ref.h"

typedef struct pcase {
  const char *mesh, *shape, *src, *src_order, *dst, *dst_order;
  const char *planner; /* greedy | graph */
  const char *cost;    /* seed | pytorch */
  const char *expect;  /* the trace, or "ERR <status name>" */
} pcase;

static const pcase cases[] = {
    /* pytorch test: test_ordered_redistribute, reference-version costs (graph planner) */
    {"2x2x2", "8x8x8", "S0,S0,S0", "0:0,1,2", "R,S0,S0", "0:1,2", "graph", "seed",
     "S(0)[0]S(0)[1]S(0)[2]->S(0)[0]S(0)[1]S(1)->S(0)S(1)[1]S(1)[0]->RS(1)[1]S(1)[0]->RS(0)S(1)->"
     "RS(0)[0]S(0)[1]"},
    {"2x2x2", "8x8x8", "S0,S0,S0", "0:1,0,2", "R,S0,S0", "0:1,2", "graph", "seed",
     "S(0)[1]S(0)[0]S(0)[2]->S(0)[1]S(0)[0]S(1)->RS(0)S(1)->RS(0)[0]S(0)[1]"},
    {"2x2x2", "8x8x8", "S0,S0,S0", "0:1,0,2", "S0,S0,R", "0:0,1", "graph", "seed",
     "S(0)[1]S(0)[0]S(0)[2]->S(0)[1]S(0)[0]R->S(1)S(0)R->S(1)S(2)R->S(0)S(2)R->S(0)[0]S(0)[1]R"},
    {"2x2x2", "8x8x8", "S0,S0,R", "0:0,1", "R,S1,S0", "0:2;1:1", "graph", "seed",
     "S(0)[0]S(0)[1]R->S(0)S(1)R->RS(1)R->RS(1)S(0)"},
    /* pytorch test: the same cases, current PyTorch costs */
    {"2x2x2", "8x8x8", "S0,S0,S0", "0:0,1,2", "R,S0,S0", "0:1,2", "graph", "pytorch",
     "S(0)[0]S(0)[1]S(0)[2]->S(0)[0]S(0)[1]R->S(0)RR->RRR->RS(0)R->RS(0)[0]S(0)[1]"},
    {"2x2x2", "8x8x8", "S0,S0,S0", "0:1,0,2", "R,S0,S0", "0:1,2", "graph", "pytorch",
     "S(0)[1]S(0)[0]S(0)[2]->S(0)[1]S(0)[0]R->RS(0)R->RS(0)[0]S(0)[1]"},
    {"2x2x2", "8x8x8", "S0,S0,S0", "0:1,0,2", "S0,S0,R", "0:0,1", "graph", "pytorch",
     "S(0)[1]S(0)[0]S(0)[2]->S(0)[1]S(0)[0]R->RS(0)R->RRR->S(0)RR->S(0)[0]S(0)[1]R"},
    {"2x2x2", "8x8x8", "S0,S0,R", "0:0,1", "R,S1,S0", "0:2;1:1", "graph", "pytorch",
     "S(0)[0]S(0)[1]R->S(0)RR->S(0)S(1)R->RS(1)R->RS(1)S(0)"},
    /* greedy, the nested-sharding examples of the reference planner's docstring */
    {"2x2x2", "8x8x8", "S0,S0,S0", "", "R,S0,S0", "", "greedy", "seed",
     "S(0)[0]S(0)[1]S(0)[2]->S(0)[0]S(0)[1]R->S(0)RR->RRR->RS(0)R->RS(0)[0]S(0)[1]"},
    {"2x2", "8x8", "S0,S0", "", "R,S0", "", "greedy", "seed", "S(0)[0]S(0)[1]->S(0)R->RR->RS(0)"},
    /* torch x-check: greedy */
    {"4x1x2", "7x9x5", "S0,S2,R", "", "S1,S1,P(avg)", "", "greedy", "seed",
     "S(0)S(2)R->S(0)S(2)P(avg)->S(0)RP(avg)->S(1)RP(avg)->S(1)[0]S(1)[1]P(avg)"},
    {"3x1x3x3", "6x7", "S0,S0,S0,S0", "", "R,S1,S0,S0", "", "greedy", "seed",
     "S(0)[0]S(0)[1]S(0)[2]S(0)[3]->S(0)[0]S(0)[1]S(0)[2]R->S(0)[0]S(0)[1]RR->S(0)S(1)RR->"
     "RS(1)RR->RS(1)S(0)R->RS(1)S(0)[0]S(0)[1]"},
    {"3x3x4x1", "9x3", "S1,S1,R,S0", "", "S0,S1,P,S0", "", "greedy", "seed",
     "S(1)[0]S(1)[1]RS(0)->S(1)[0]S(1)[1]RR->S(1)[0]S(1)[1]P(sum)R->S(1)RP(sum)R->S(0)RP(sum)R->"
     "S(0)S(1)P(sum)R->S(0)[0]S(1)P(sum)S(0)[1]"},
    {"4x2x4x2", "", "P(avg),P,P,P(avg)", "", "R,R,R,P(avg)", "", "greedy", "seed",
     "P(avg)P(sum)P(sum)P(avg)->RP(sum)P(sum)P(avg)->RRP(sum)P(avg)->RRRP(avg)"},
    /* reference: a 1-D mesh always gets its one direct step (torch today drops it when equal) */
    {"4", "8", "S0", "", "S0", "", "greedy", "seed", "S(0)->S(0)"},
    {"4", "8", "S0", "", "R", "", "greedy", "seed", "S(0)->R"},
    /* the reference skips the nested-sharding pass when the sharded mesh dims all have size 1; the
     * resulting steps are legal because a size-1 mesh dim splits nothing (rs_mesh_apply_step) */
    {"4x1", "7", "R,S0", "", "S0,R", "", "greedy", "seed", "RS(0)->S(0)[1]S(0)[0]->S(0)R"},
    /* greedy plans containing S -> P or P(x) -> P(y): planned, rejected by the bookkeeping */
    {"2x1", "8x6", "S1,R", "", "P,R", "", "greedy", "seed", "ERR unsupported"},
    {"2", "3", "P", "", "P(avg)", "", "greedy", "seed", "ERR unsupported"},
    /* torch x-check: graph planner, seed costs, with Partial */
    {"2x4x3", "5x7x0", "S1,S2,S2", "1:0;2:2,1", "S0,P,P", "0:0", "graph", "seed",
     "S(1)S(2)[1]S(2)[0]->S(1)RS(2)->S(1)P(sum)S(2)->S(1)P(sum)R->S(1)P(sum)P(sum)->S(0)P(sum)P(sum)"},
    {"1x1x1", "3", "R,S0,P", "0:1", "S0,R,S0", "0:0,2", "graph", "seed",
     "RS(0)P(sum)->RRP(sum)->S(0)RP(sum)->S(0)[0]RS(0)[1]"},
    {"3x3x2", "8x2x2", "P,R,S0", "0:2", "S1,S0,R", "0:1;1:0", "graph", "seed",
     "P(sum)RS(0)->P(sum)RR->P(sum)S(0)R->S(1)S(0)R"},
    {"2x2x2", "6x2x3", "S0,P(avg),S0", "0:2,0", "S0,S1,S1", "0:0;1:1,2", "graph", "seed",
     "S(0)[1]P(avg)S(0)[0]->S(2)P(avg)S(0)->S(2)S(1)S(0)->S(2)S(1)[0]S(1)[1]->S(0)S(1)[0]S(1)[1]"},
    {"2x4x1", "1x9", "S0,S1,P", "0:0;1:1", "S1,S0,S1", "0:1;1:0,2", "graph", "seed",
     "S(0)S(1)P(sum)->RS(1)P(sum)->RS(0)P(sum)->S(1)S(0)P(sum)->S(1)[0]S(0)S(1)[1]"},
    {"4x2x3", "4x4", "S0,R,S0", "0:2,0", "S0,S1,S0", "0:0,2;1:1", "graph", "seed",
     "S(0)[1]RS(0)[0]->S(0)[1]S(1)S(0)[0]->RS(1)S(0)->RS(1)[0]S(1)[1]->S(0)S(1)[0]S(1)[1]->"
     "S(0)[0]S(1)S(0)[1]"},
    {"1x4", "6", "S0,R", "0:0", "P,S0", "0:1", "graph", "seed", "S(0)R->RR->RS(0)->P(sum)S(0)"},
    /* torch x-check: graph planner, current PyTorch costs (Partial(sum) only, see report) */
    {"3x3", "1", "S0,S0", "0:1,0", "S0,S0", "0:0,1", "graph", "pytorch",
     "S(0)[1]S(0)[0]->RS(0)->RR->S(0)R->S(0)[0]S(0)[1]"},
    {"2x2", "3x8x4", "S1,P", "1:0", "P,S2", "2:1", "graph", "pytorch",
     "S(1)P(sum)->S(1)S(2)->RS(2)->P(sum)S(2)"},
    {"4x1x2", "8x1", "S1,P,S0", "0:2;1:0", "S1,S1,S1", "1:1,2,0", "graph", "pytorch",
     "S(1)P(sum)S(0)->RP(sum)S(0)->RS(1)S(0)->RS(1)R->RS(1)[0]S(1)[1]->S(1)[2]S(1)[0]S(1)[1]"},
    {"1x4x3", "1", "S0,S0,S0", "0:1,2,0", "P,S0,S0", "0:2,1", "graph", "pytorch",
     "S(0)[2]S(0)[0]S(0)[1]->RS(0)[0]S(0)[1]->P(sum)S(0)[0]S(0)[1]->P(sum)S(0)R->P(sum)RR->"
     "P(sum)RS(0)->P(sum)S(0)[1]S(0)[0]"},
    /* no path: case 6 makes only Partial(sum) */
    {"2", "8", "R", "", "P(avg)", "", "graph", "seed", "ERR nopath"},
    {"4x3", "", "R,R", "", "R,P(avg)", "", "graph", "pytorch", "ERR nopath"},
    /* nothing to do */
    {"2x2", "4x4", "S0,S1", "", "S0,S1", "", "graph", "seed", "S(0)S(1)"},
    {"2x2", "4x4", "S0,S1", "", "S0,S1", "", "greedy", "seed", "S(0)S(1)"},
};

static rs_status build(const pcase *pc, rs_mesh *m, rs_tensor *t, rs_sharding *s, rs_sharding *d) {
  int64_t ms[RS_MAX_MESH_DIMS];
  int n;
  rs_status st;
  memset(t, 0, sizeof *t);
  memset(s, 0, sizeof *s);
  memset(d, 0, sizeof *d);
  t->dtype = RS_F32;
  if ((st = rs_parse_dims(pc->mesh, RS_MAX_MESH_DIMS, ms, &n))) return st;
  if ((st = rs_mesh_init(m, n, ms, NULL))) return st;
  if ((st = rs_parse_dims(pc->shape, RS_MAX_DIMS, t->shape, &t->ndim))) return st;
  if ((st = rs_parse_placements(pc->src, s))) return st;
  if ((st = rs_parse_order(pc->src_order, s, t->ndim))) return st;
  if ((st = rs_parse_placements(pc->dst, d))) return st;
  if ((st = rs_parse_order(pc->dst_order, d, t->ndim))) return st;
  if ((st = rs_sharding_validate(s, m, t))) return st;
  return rs_sharding_validate(d, m, t);
}

/* Plan, then trace (the trace applies the bookkeeping and so rejects illegal steps). */
static void run_trace(const pcase *pc, char *out, size_t cap) {
  rs_mesh m;
  rs_tensor t;
  rs_sharding s, d;
  rs_plan p;
  rs_status st = build(pc, &m, &t, &s, &d);
  if (st) {
    snprintf(out, cap, "BAD CASE %s", rs_last_error());
    return;
  }
  if (strcmp(pc->planner, "greedy") == 0)
    st = rs_ref_plan_greedy(&m, &t, &s, &d, &p);
  else
    st = rs_ref_plan_graph(&m, &t, &s, &d,
                           strcmp(pc->cost, "pytorch") == 0 ? RS_COST_PYTORCH : RS_COST_SEED, &p);
  if (!st) st = rs_plan_trace(&m, &s, t.ndim, &p, out, cap);
  if (!st && strncmp(pc->expect, "ERR", 3) == 0) st = rs_plan_check(&m, &s, &d, t.ndim, &p);
  if (st) snprintf(out, cap, "ERR %s", rs_status_name(st));
}

/* Communicating collectives of a greedy plan (what CommDebugMode counts). */
static int comm_count(const char *mesh, const char *shape, const char *src, const char *dst) {
  pcase pc = {mesh, shape, src, "", dst, "", "greedy", "seed", ""};
  rs_mesh m;
  rs_tensor t;
  rs_sharding s, d;
  rs_plan p;
  if (build(&pc, &m, &t, &s, &d) || rs_ref_plan_greedy(&m, &t, &s, &d, &p)) return -1;
  if (rs_plan_check(&m, &s, &d, t.ndim, &p)) return -2;
  int n = 0;
  for (int i = 0; i < p.nsteps; i++) {
    rs_collective c;
    if (rs_step_collective(&p.step[i], &c)) return -3;
    if (m.size[p.step[i].mesh_dim] > 1 &&
        (c == RS_COLL_ALL_GATHER || c == RS_COLL_ALL_REDUCE || c == RS_COLL_REDUCE_SCATTER ||
         c == RS_COLL_ALL_TO_ALL))
      n++;
  }
  return n;
}

int main(void) {
  char got[4096];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_trace(&cases[i], got, sizeof got);
    if (strcmp(got, cases[i].expect) != 0) {
      fprintf(stderr, "case %zu (%s %s %s[%s] -> %s[%s], %s/%s):\n  expected %s\n  got      %s\n", i,
              cases[i].mesh, cases[i].shape, cases[i].src, cases[i].src_order, cases[i].dst,
              cases[i].dst_order, cases[i].planner, cases[i].cost, cases[i].expect, got);
      rs_test_failures++;
    }
  }

  /* pytorch test: test_redistribute_shard_dim_multi_dim_mesh (greedy, mesh 2x2x2, 8x8x8) */
  CHECK_EQ_I(comm_count("2x2x2", "8x8x8", "S0,S0,S0", "S1,S1,S1"), 3);
  CHECK_EQ_I(comm_count("2x2x2", "8x8x8", "S0,S1,S0", "S1,S0,S0"), 3);
  CHECK_EQ_I(comm_count("2x2x2", "8x8x8", "S0,S1,S2", "S2,S1,S0"), 2);
  CHECK_EQ_I(comm_count("2x2x2", "8x8x8", "S1,S0,S0", "R,S0,S0"), 1);
  CHECK_EQ_I(comm_count("2x2x2", "8x8x8", "S1,R,S0", "R,S0,S0"), 2);
  CHECK_EQ_I(comm_count("2x2x2", "8x8x8", "S0,S0,S1", "S0,S1,S2"), 2);
  /* [S0,S0] -> [R,S0]: two all-gathers and a chunk */
  CHECK_EQ_I(comm_count("2x2", "8x8", "S0,S0", "R,S0"), 2);

  /* the exact steps of [S0,S0] -> [R,S0] */
  {
    pcase pc = {"2x2", "8x8", "S0,S0", "", "R,S0", "", "greedy", "seed", ""};
    rs_mesh m;
    rs_tensor t;
    rs_sharding s, d;
    rs_plan p;
    CHECK(build(&pc, &m, &t, &s, &d) == RS_OK);
    CHECK(rs_ref_plan_greedy(&m, &t, &s, &d, &p) == RS_OK);
    CHECK_EQ_I(p.nsteps, 3);
    rs_collective c;
    CHECK(p.step[0].mesh_dim == 1 && rs_step_collective(&p.step[0], &c) == RS_OK &&
          c == RS_COLL_ALL_GATHER);
    CHECK(p.step[1].mesh_dim == 0 && rs_step_collective(&p.step[1], &c) == RS_OK &&
          c == RS_COLL_ALL_GATHER);
    CHECK(p.step[2].mesh_dim == 1 && rs_step_collective(&p.step[2], &c) == RS_OK &&
          c == RS_COLL_CHUNK);
  }

  /* rs_ref_plan: AUTO picks graph for a non-default order, greedy otherwise */
  {
    rs_case c;
    memset(&c, 0, sizeof c);
    pcase pc = {"2x2x2", "8x8x8", "S0,S0,S0", "0:1,0,2", "R,S0,S0", "0:1,2", "", "", ""};
    CHECK(build(&pc, &c.mesh, &c.tensor, &c.src, &c.dst) == RS_OK);
    c.planner = RS_PLANNER_AUTO;
    c.cost = RS_COST_SEED;
    rs_plan p;
    CHECK(rs_ref_plan(&c, &p) == RS_OK);
    CHECK(rs_plan_trace(&c.mesh, &c.src, 3, &p, got, sizeof got) == RS_OK);
    CHECK(strcmp(got, cases[1].expect) == 0);
    c.cost = RS_COST_PYTORCH;
    CHECK(rs_ref_plan(&c, &p) == RS_OK);
    CHECK(rs_plan_trace(&c.mesh, &c.src, 3, &p, got, sizeof got) == RS_OK);
    CHECK(strcmp(got, cases[5].expect) == 0);
    /* the same placements in default order go to the greedy planner */
    pcase pd = {"2x2x2", "8x8x8", "S0,S0,S0", "", "R,S0,S0", "", "", "", ""};
    CHECK(build(&pd, &c.mesh, &c.tensor, &c.src, &c.dst) == RS_OK);
    CHECK(rs_ref_plan(&c, &p) == RS_OK);
    CHECK(rs_plan_trace(&c.mesh, &c.src, 3, &p, got, sizeof got) == RS_OK);
    CHECK(strcmp(got, cases[8].expect) == 0);
    /* a NOPATH error names both states */
    pcase pn = {"2", "8", "R", "", "P(avg)", "", "", "", ""};
    CHECK(build(&pn, &c.mesh, &c.tensor, &c.src, &c.dst) == RS_OK);
    c.planner = RS_PLANNER_GRAPH;
    CHECK(rs_ref_plan(&c, &p) == RS_ERR_NOPATH);
    CHECK(strstr(rs_last_error(), "P(avg)") != NULL);
  }
  TEST_DONE();
}
