/* test_opt_random.c - opt on the local transport against the plan-free oracle on random small cases
 * (meshes of 1..3 dims, uneven shards, any shard order, Partial in src and/or dst), bit for bit;
 * the traffic of copy-only cases equals SPEC 7's lower bound exactly; a cached schedule re-run on
 * fresh data is still right; ref's step plans executed on opt agree too. */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "reshard/reshard.h"
#include "reshard/opt.h"

#include "rand_case.h"

static int random_case(rs_case *c, int want_partial, int big) {
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "opt-random");
  int nm = 1 + rint_(big ? 4 : 3);
  int64_t sizes[RS_MAX_MESH_DIMS];
  int64_t n = 1;
  for (int m = 0; m < nm; ++m) {
    sizes[m] = 1 + rint_(nm == 1 ? (big ? 16 : 6) : (big && nm <= 2 ? 5 : 3));
    if (n * sizes[m] > 64) sizes[m] = 1;
    n *= sizes[m];
  }
  int32_t ranks[64];
  for (int i = 0; i < n; ++i) ranks[i] = i;
  int permuted = rint_(3) == 0;
  for (int i = (int)n - 1; permuted && i > 0; --i) {
    int j = rint_(i + 1);
    int32_t t = ranks[i];
    ranks[i] = ranks[j];
    ranks[j] = t;
  }
  if (rs_mesh_init(&c->mesh, nm, sizes, ranks) != RS_OK) return 0;
  c->tensor.ndim = rint_(big ? 5 : 4);
  for (int d = 0; d < c->tensor.ndim; ++d)
    c->tensor.shape[d] = rint_(8) == 0 ? 0 : 1 + rint_(big && d < 2 ? 40 : 9);
  static const rs_dtype red[] = {RS_F64, RS_F32, RS_F16, RS_BF16, RS_I64, RS_I32, RS_I16, RS_I8, RS_U8};
  if (want_partial) c->tensor.dtype = red[rint_(9)];
  else c->tensor.dtype = (rs_dtype)rint_(RS_DTYPE_COUNT);
  rs_redop op = (rs_redop)rint_(4);
  random_sharding(&c->src, nm, c->tensor.ndim, want_partial, op);
  random_sharding(&c->dst, nm, c->tensor.ndim, want_partial, op);
  /* a Partial dim of src may only stay Partial with the same op or become R/S: fine as drawn */
  c->seed = rnd();
  c->values = rs_case_default_values(c);
  c->planner = RS_PLANNER_AUTO;
  c->cost = RS_COST_SEED;
  return rs_case_validate(c) == RS_OK;
}

static int64_t nfail = 0;
static int cur_case = 0, first_bad_case = -1;

static void run_case(rs_opt *o, rs_case *c, int check_ref_plan) {
  rs_locals in = {0, NULL}, exp = {0, NULL}, out = {0, NULL};
  rs_opt_stats st;
  CHECK(rs_make_source(c, &in) == RS_OK);
  CHECK(rs_oracle_expected(c, &c->dst, &exp) == RS_OK);
  rs_status s = rs_opt_redistribute(o, NULL, c, &in, &out, &st);
  if (s != RS_OK) {
    fprintf(stderr, "opt failed: %s\n", rs_last_error());
    CHECK(s == RS_OK);
  } else {
    rs_diff diff;
    int bad = rs_oracle_compare(c, &c->dst, &exp, &out, &diff);
    if (bad && nfail++ < 5) {
      char *j = rs_case_to_json(c);
      fprintf(stderr, "MISMATCH %s\n%s\n", j ? j : "?", diff.text);
      free(j);
    }
    CHECK(bad == 0);
    if (!rs_sharding_has_partial(&c->src) && !rs_sharding_has_partial(&c->dst)) {
      int64_t lb = -1, lb2 = -1;
      CHECK(rs_opt_traffic_lb(c, &lb) == RS_OK);
      CHECK(rs_traffic_lower_bound(&c->mesh, &c->tensor, &c->src, &c->dst, &lb2) == RS_OK);
      CHECK_EQ_I(lb, lb2);
      CHECK_EQ_I(st.bytes_sent, lb);
    }
  }
  if (check_ref_plan) {
    rs_plan p;
    if (rs_ref_plan(c, &p) == RS_OK) {
      rs_locals out2 = {0, NULL};
      s = rs_opt_execute_plan(o, NULL, c, &p, &in, &out2, NULL);
      if (s != RS_OK) {
        char *j = rs_case_to_json(c), tr[1024] = "";
        rs_plan_trace(&c->mesh, &c->src, c->tensor.ndim, &p, tr, sizeof tr);
        fprintf(stderr, "opt plan failed: %s\n%s\n%s\n", rs_last_error(), j ? j : "?", tr);
        free(j);
        CHECK(s == RS_OK);
      } else {
        rs_diff diff;
        int bad = rs_oracle_compare(c, &c->dst, &exp, &out2, &diff);
        if (bad && nfail++ < 5) {
          char *j = rs_case_to_json(c);
          fprintf(stderr, "PLAN MISMATCH %s\n%s\n", j ? j : "?", diff.text);
          free(j);
        }
        CHECK(bad == 0);
      }
      rs_locals_free(&out2);
    }
  }
  rs_locals_free(&in);
  rs_locals_free(&exp);
  rs_locals_free(&out);
}

int main(int argc, char **argv) {
  rng_state = 0x1234567ull;
  (void)argc;
  (void)argv;
  rs_opt *o;
  CHECK(rs_opt_create(&o) == RS_OK);
  int ncopy = 0, npart = 0, nref = 0;
  for (int it = 0; it < 3000; ++it) {
    rs_case c;
    int want_partial = it % 2;
    if (!random_case(&c, want_partial, it >= 2000)) continue;
    if (rs_sharding_has_partial(&c.src) || rs_sharding_has_partial(&c.dst)) npart++;
    else ncopy++;
    int with_ref = it % 3 == 0;
    nref += with_ref;
    cur_case++;
    int before = rs_test_failures;
    run_case(o, &c, with_ref);
    /* the cached schedule on fresh data */
    c.seed = rnd();
    run_case(o, &c, 0);
    if (rs_test_failures != before && first_bad_case < 0) first_bad_case = cur_case;
  }
  if (first_bad_case >= 0) fprintf(stderr, "first failing case: %d\n", first_bad_case);
  /* large cases: the host batch path (slabs in source order, streaming stores) kicks in at 8 MiB */
  {
    static const struct { int nm; int64_t mesh[2]; int64_t shape[2]; const char *src, *dst; } big[] = {
        {1, {4, 1}, {2048, 2048}, "S0", "S1"},
        {1, {4, 1}, {2047, 2051}, "S1", "S0"},
        {2, {2, 2}, {2050, 2049}, "S0,S1", "S1,S0"},
        {2, {2, 3}, {1555, 3001}, "S0,R", "R,S1"},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; ++i) {
      rs_case c;
      memset(&c, 0, sizeof c);
      CHECK(rs_mesh_init(&c.mesh, big[i].nm, big[i].mesh, NULL) == RS_OK);
      c.tensor.dtype = RS_F32;
      c.tensor.ndim = 2;
      c.tensor.shape[0] = big[i].shape[0];
      c.tensor.shape[1] = big[i].shape[1];
      CHECK(rs_parse_placements(big[i].src, &c.src) == RS_OK);
      CHECK(rs_parse_placements(big[i].dst, &c.dst) == RS_OK);
      rs_sharding_set_default_order(&c.src, 2);
      rs_sharding_set_default_order(&c.dst, 2);
      c.seed = 99 + i;
      c.values = RS_VALUES_BITS;
      CHECK(rs_case_validate(&c) == RS_OK);
      run_case(o, &c, 0);
    }
  }
  /* P(x) -> P(y) on one mesh dim has no meaning: refused with a message */
  {
    rs_case c;
    memset(&c, 0, sizeof c);
    int64_t sz[1] = {2};
    CHECK(rs_mesh_init(&c.mesh, 1, sz, NULL) == RS_OK);
    c.tensor.dtype = RS_F32;
    c.tensor.ndim = 1;
    c.tensor.shape[0] = 4;
    c.src.mesh_ndim = c.dst.mesh_ndim = 1;
    c.src.p[0] = rs_pl_partial(RS_SUM);
    c.dst.p[0] = rs_pl_partial(RS_MAX);
    c.values = RS_VALUES_EXACT;
    rs_locals in = {0, NULL}, out = {0, NULL};
    CHECK(rs_make_source(&c, &in) == RS_OK);
    rs_clear_error();
    CHECK(rs_opt_redistribute(o, NULL, &c, &in, &out, NULL) == RS_ERR_UNSUPPORTED);
    CHECK(rs_last_error()[0] != 0);
    rs_locals_free(&in);
    rs_locals_free(&out);
  }
  printf("copy-only %d, partial %d, with ref plans %d\n", ncopy, npart, nref);
  CHECK(ncopy > 500 && npart > 500);
  rs_opt_destroy(o);
  TEST_DONE();
}
