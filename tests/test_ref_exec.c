/* test_ref_exec.c - the reference executor: hand-computed collectives on tiny cases, then a
 * random campaign of ref against the plan-free oracle (random meshes, placements, shard orders,
 * uneven and empty shards, every dtype, both planners and cost models).
 *
 * RS_REF_CASES=<n> sets the campaign size (default 3000). With a mutant active (RS_MUTANT=<id>
 * in an RS_MUTATION build) the campaign stops at the first failure and says after how many cases,
 * which is how ref/MUTANTS.md's "caught within" figures are measured. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "props/props.h"
#include "core/mutant.h"
#include "reshard/oracle.h"
#include "reshard/ref.h"
#include "core/values.h"

/* ---- hand-computed cases: F32, mesh [n] or [2,2], locals set by hand ---- */

static void set_case(rs_case *c, const char *mesh, const char *shape, const char *src,
                     const char *dst) {
  memset(c, 0, sizeof *c);
  int64_t ms[RS_MAX_MESH_DIMS];
  int n;
  CHECK(rs_parse_dims(mesh, RS_MAX_MESH_DIMS, ms, &n) == RS_OK);
  CHECK(rs_mesh_init(&c->mesh, n, ms, NULL) == RS_OK);
  c->tensor.dtype = RS_F32;
  CHECK(rs_parse_dims(shape, RS_MAX_DIMS, c->tensor.shape, &c->tensor.ndim) == RS_OK);
  CHECK(rs_parse_placements(src, &c->src) == RS_OK);
  CHECK(rs_parse_placements(dst, &c->dst) == RS_OK);
  CHECK(rs_sharding_set_default_order(&c->src, c->tensor.ndim) == RS_OK);
  CHECK(rs_sharding_set_default_order(&c->dst, c->tensor.ndim) == RS_OK);
  c->values = rs_case_default_values(c);
  if (rs_case_validate(c) != RS_OK) {
    fprintf(stderr, "bad hand case: %s\n", rs_last_error());
    rs_test_failures++;
  }
}

/* Locals of c->src's layout filled from vals (concatenated per rank, by mesh position). */
static void set_locals(const rs_case *c, rs_locals *l, const float *vals) {
  CHECK(rs_locals_for_layout(l, c, &c->src) == RS_OK);
  for (int i = 0; i < l->n; i++) {
    memcpy(l->r[i].data, vals, (size_t)l->r[i].nbytes);
    vals += l->r[i].nbytes / 4;
  }
}

/* Run and compare rank `pos`'s local with want[0..n). */
static void expect_rank(const rs_locals *out, int pos, const float *want, int n) {
  if (!out->r || pos >= out->n) {
    fprintf(stderr, "no local for rank %d\n", pos);
    rs_test_failures++;
    return;
  }
  CHECK_EQ_I(out->r[pos].nbytes, n * 4);
  if (out->r[pos].nbytes != n * 4) return;
  const float *got = out->r[pos].data;
  for (int i = 0; i < n; i++)
    if (got[i] != want[i]) {
      fprintf(stderr, "rank %d elem %d: got %g want %g\n", pos, i, got[i], want[i]);
      rs_test_failures++;
    }
}

static void hand_cases(void) {
  rs_case c;
  rs_locals in = {0}, out = {0};
  rs_plan p;

  /* all-gather of uneven pieces: 5 over 4 = 2,2,1,0 */
  set_case(&c, "4", "5", "S0", "R");
  {
    const float v[] = {1, 2, 3, 4, 5};
    set_locals(&c, &in, v);
    CHECK(rs_ref_redistribute(&c, &in, &out, &p) == RS_OK);
    for (int r = 0; r < 4; r++) expect_rank(&out, r, v, 5);
    rs_locals_free(&in);
    rs_locals_free(&out);
  }
  /* chunk: 6 over 4 = 2,2,2,0 */
  set_case(&c, "4", "6", "R", "S0");
  {
    const float v[] = {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6};
    set_locals(&c, &in, v);
    CHECK(rs_ref_redistribute(&c, &in, &out, &p) == RS_OK);
    expect_rank(&out, 0, v, 2);
    expect_rank(&out, 1, v + 2, 2);
    expect_rank(&out, 2, v + 4, 2);
    expect_rank(&out, 3, v, 0);
    rs_locals_free(&in);
    rs_locals_free(&out);
  }
  /* all-reduce sum / avg / max, and reduce-scatter of 3 over 2 = 2,1 */
  {
    const float v[] = {1, 2, 3, 10, 20, 30};
    const float sum[] = {11, 22, 33}, avg[] = {5.5f, 11, 16.5f}, mx[] = {10, 20, 30};
    set_case(&c, "2", "3", "P", "R");
    set_locals(&c, &in, v);
    CHECK(rs_ref_redistribute(&c, &in, &out, &p) == RS_OK);
    expect_rank(&out, 0, sum, 3);
    expect_rank(&out, 1, sum, 3);
    rs_locals_free(&in);
    rs_locals_free(&out);
    set_case(&c, "2", "3", "P(avg)", "R");
    set_locals(&c, &in, v);
    CHECK(rs_ref_redistribute(&c, &in, &out, &p) == RS_OK);
    expect_rank(&out, 1, avg, 3);
    rs_locals_free(&in);
    rs_locals_free(&out);
    set_case(&c, "2", "3", "P(max)", "R");
    set_locals(&c, &in, v);
    CHECK(rs_ref_redistribute(&c, &in, &out, &p) == RS_OK);
    expect_rank(&out, 0, mx, 3);
    rs_locals_free(&in);
    rs_locals_free(&out);
    set_case(&c, "2", "3", "P", "S0");
    set_locals(&c, &in, v);
    CHECK(rs_ref_redistribute(&c, &in, &out, &p) == RS_OK);
    expect_rank(&out, 0, sum, 2);
    expect_rank(&out, 1, sum + 2, 1);
    rs_locals_free(&in);
    rs_locals_free(&out);
  }
  /* partition: R -> P(sum) divides by n, R -> P(max) keeps the value */
  {
    const float v[] = {4, 8, 4, 8}, half[] = {2, 4};
    set_case(&c, "2", "2", "R", "P");
    set_locals(&c, &in, v);
    CHECK(rs_ref_redistribute(&c, &in, &out, &p) == RS_OK);
    expect_rank(&out, 0, half, 2);
    expect_rank(&out, 1, half, 2);
    rs_locals_free(&in);
    rs_locals_free(&out);
    set_case(&c, "2", "2", "R", "P(max)");
    set_locals(&c, &in, v);
    CHECK(rs_ref_redistribute(&c, &in, &out, &p) == RS_OK);
    expect_rank(&out, 1, v, 2);
    rs_locals_free(&in);
    rs_locals_free(&out);
  }
  /* all-to-all S0 -> S1 on a 2x3 tensor over 2 ranks: rows {0},{1} -> cols {0,1},{2} */
  set_case(&c, "2", "2x3", "S0", "S1");
  {
    const float v[] = {1, 2, 3, 4, 5, 6};
    const float r0[] = {1, 2, 4, 5}, r1[] = {3, 6};
    set_locals(&c, &in, v);
    CHECK(rs_ref_redistribute(&c, &in, &out, &p) == RS_OK);
    CHECK_EQ_I(p.nsteps, 1);
    expect_rank(&out, 0, r0, 4);
    expect_rank(&out, 1, r1, 2);
    rs_locals_free(&in);
    rs_locals_free(&out);
  }
  /* nested shards on a 2x2 mesh, 4 rows: [S0,S0] -> [R,S0] (gather, gather, chunk) */
  set_case(&c, "2x2", "4", "S0,S0", "R,S0");
  {
    const float v[] = {1, 2, 3, 4};
    const float a[] = {1, 2}, b[] = {3, 4};
    set_locals(&c, &in, v);
    CHECK(rs_ref_redistribute(&c, &in, &out, &p) == RS_OK);
    CHECK_EQ_I(p.nsteps, 3);
    expect_rank(&out, 0, a, 2); /* coord (0,0) */
    expect_rank(&out, 1, b, 2); /* coord (0,1) */
    expect_rank(&out, 2, a, 2);
    expect_rank(&out, 3, b, 2);
    rs_locals_free(&in);
    rs_locals_free(&out);
  }
  /* errors: an illegal step, an unsupported step, a plan that ends elsewhere */
  set_case(&c, "2x2", "4", "S0,S0", "R,S0");
  {
    const float v[] = {1, 2, 3, 4};
    set_locals(&c, &in, v);
    rs_plan bad;
    memset(&bad, 0, sizeof bad);
    bad.nsteps = 1;
    bad.step[0].mesh_dim = 0; /* mesh dim 0 is not the last to split dim 0 */
    bad.step[0].from = rs_pl_shard(0);
    bad.step[0].to = rs_pl_replicate();
    CHECK(rs_ref_execute(&c, &bad, &in, &out) == RS_ERR_ILLEGAL);
    CHECK(strstr(rs_last_error(), "plan step 0") != NULL);
    bad.step[0].mesh_dim = 1;
    bad.step[0].to = rs_pl_partial(RS_SUM);
    CHECK(rs_ref_execute(&c, &bad, &in, &out) == RS_ERR_UNSUPPORTED);
    bad.step[0].to = rs_pl_replicate();
    CHECK(rs_ref_execute(&c, &bad, &in, &out) == RS_ERR_ILLEGAL); /* ends at S0,R */
    CHECK(strstr(rs_last_error(), "greedy") != NULL);
    rs_locals_free(&in);
  }
}

/* ---- random campaign ---- */

/* Case `index` of the campaign from props' generator (the one every test draws from), skipping
 * cases whose AUTO planner cannot reach the dst Partial (the seed's graph planner only makes
 * Partial(sum); greedy steps into a Partial only from R or the same Partial). */
static void random_case(rs_case *c, uint64_t *index) {
  rs_gen_opts o;
  rs_gen_opts_default(&o);
  for (;; (*index)++) {
    rs_choices ch;
    rs_choices_seed(&ch, 0x5EEDull * 1000003u + *index);
    rs_status st = rs_gen_case(&ch, &o, c);
    rs_choices_free(&ch);
    if (st != RS_OK) continue;
    c->planner = (*index % 5) == 0 ? RS_PLANNER_GRAPH : RS_PLANNER_AUTO;
    if (c->planner == RS_PLANNER_GRAPH && rs_gen_graph_bounded(&o, c)) c->planner = RS_PLANNER_AUTO;
    int graph = rs_case_resolve_planner(c) == RS_PLANNER_GRAPH, ok = 1;
    for (int m = 0; m < c->mesh.ndim; m++) {
      rs_placement s = c->src.p[m], d = c->dst.p[m];
      if (d.kind != RS_PARTIAL) continue;
      int same = s.kind == RS_PARTIAL && s.op == d.op;
      if (graph && d.op != RS_SUM && !same) ok = 0;
      if (!graph && !same && s.kind != RS_REPLICATE) ok = 0;
    }
    if (ok) {
      (*index)++;
      return;
    }
  }
}

typedef struct tally {
  long run, failed, partial, graph;
} tally;

static int one_case(const rs_case *c, tally *t, long index) {
  rs_locals in = {0}, out = {0}, exp = {0};
  rs_plan p;
  rs_events ev;
  int bad = 0;
  char msg[4096] = "";
  rs_status st = rs_make_source(c, &in);
  if (st) {
    snprintf(msg, sizeof msg, "make_source: %s", rs_last_error());
    bad = 1;
  } else if ((st = rs_ref_redistribute(c, &in, &out, &p)) != RS_OK) {
    snprintf(msg, sizeof msg, "ref: %s: %s", rs_status_name(st), rs_last_error());
    bad = 1;
  } else if ((st = rs_events_from_plan(&c->mesh, &p, &ev)) != RS_OK) {
    snprintf(msg, sizeof msg, "events: %s", rs_last_error());
    bad = 1;
  } else if ((st = rs_oracle_expected_events(c, &c->dst, &ev, &exp)) != RS_OK) {
    /* ref's value follows its plan's event sequence (SPEC 5) */
    snprintf(msg, sizeof msg, "oracle: %s", rs_last_error());
    bad = 1;
  } else {
    rs_diff *d = calloc(1, sizeof *d);
    if (d && rs_oracle_compare(c, &c->dst, &exp, &out, d)) {
      char tr[1024] = "";
      rs_plan_trace(&c->mesh, &c->src, c->tensor.ndim, &p, tr, sizeof tr);
      snprintf(msg, sizeof msg, "differs from the oracle (plan %s)\n%s", tr, d->text);
      bad = 1;
    }
    free(d);
  }
  if (bad) {
    char *json = rs_case_to_json(c);
    fprintf(stderr, "case %ld: %s\n  %s\n", index, msg, json ? json : "(no json)");
    free(json);
    t->failed++;
  }
  t->run++;
  t->partial += rs_sharding_has_partial(&c->src) || rs_sharding_has_partial(&c->dst);
  t->graph += rs_case_resolve_planner(c) == RS_PLANNER_GRAPH;
  rs_locals_free(&in);
  rs_locals_free(&out);
  rs_locals_free(&exp);
  return bad;
}

int main(void) {
  hand_cases();

  long n = 3000;
  const char *env = getenv("RS_REF_CASES");
  if (env) n = atol(env);
  tally t = {0, 0, 0, 0};
  clock_t t0 = clock();
  uint64_t index = 0;
  for (long i = 0; i < n; i++) {
    rs_case c;
    random_case(&c, &index);
    if (one_case(&c, &t, i) && rs_mutant_id()) {
      printf("mutant %d caught after %ld cases\n", rs_mutant_id(), i + 1);
      return 1;
    }
  }
  double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
  printf("campaign: %ld cases (%ld with Partial, %ld graph-planned), %ld failed, %.0f cases/s "
         "(source + ref + oracle + compare)\n",
         t.run, t.partial, t.graph, t.failed, secs > 0 ? t.run / secs : 0.0);
  if (rs_mutant_id()) printf("mutant %d NOT caught in %ld cases\n", rs_mutant_id(), t.run);
  if (t.failed) rs_test_failures++;
  TEST_DONE();
}
