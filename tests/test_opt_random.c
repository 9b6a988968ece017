/* test_opt_random.c - opt on the local transport against the plan-free oracle on random small cases
 * from props' generator (meshes of 1..6 dims, uneven shards, any shard order, Partial in src
 * and/or dst), bit for bit; the bytes the transport layer counted equal the schedule's, pair by
 * pair, and for copy-only cases SPEC 7's lower bound exactly; a cached schedule re-run on
 * fresh data is still right; ref's step plans executed on opt agree too. */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "reshard/reshard.h"
#include "reshard/opt.h"

#include "props/props.h"

/* Case `index` from props' generator: copy-only or Partial-heavy, small (meshes up to 3-d,
 * tensors up to 3-d) or the generator's full space (6-d meshes, 8-d tensors, bigger tensors). */
static int random_case(rs_case *c, int want_partial, int big, uint64_t index) {
  rs_gen_opts o;
  rs_gen_opts_default(&o);
  o.partial = want_partial ? RS_GEN_PARTIAL_OFTEN : RS_GEN_PARTIAL_NONE;
  if (!big) {
    o.max_mesh_dims = 3;
    o.max_tensor_dims = 3;
    o.max_numel = 4096;
  }
  rs_choices ch;
  rs_choices_seed(&ch, 0x1234567ull + index);
  rs_status st = rs_gen_case(&ch, &o, c);
  rs_choices_free(&ch);
  snprintf(c->name, sizeof c->name, "opt-random");
  return st == RS_OK;
}

static int64_t nfail = 0;
static int cur_case = 0, first_bad_case = -1;

static rs_world *world; /* local, behind the byte-counting layer */

/* Bytes the transport layer counted = the schedule's own count, pair by pair. */
static void check_posted(rs_opt *o, const rs_case *c, const rs_opt_stats *st) {
  rs_posted *got = NULL, *want = NULL;
  int64_t ng = 0, nw = 0, total = 0;
  CHECK(rs_world_posted(world, &got, &ng) == RS_OK);
  CHECK(rs_opt_sched_pairs(o, c, &want, &nw) == RS_OK);
  for (int64_t i = 0; i < ng; ++i) {
    total += got[i].sent;
    CHECK_EQ_I(got[i].sent, got[i].recvd);
    int64_t j = 0;
    while (j < nw && !(want[j].from == got[i].from && want[j].to == got[i].to)) ++j;
    CHECK(j < nw && want[j].sent == got[i].sent);
  }
  CHECK_EQ_I(ng, nw);
  CHECK_EQ_I(total, st->bytes_sent);
  free(got);
  free(want);
}

static void run_case(rs_opt *o, rs_case *c, int check_ref_plan) {
  rs_locals in = {0, NULL}, exp = {0, NULL}, out = {0, NULL};
  rs_opt_stats st;
  CHECK(rs_make_source(c, &in) == RS_OK);
  CHECK(rs_oracle_expected(c, &c->dst, &exp) == RS_OK);
  rs_world_posted_reset(world);
  rs_status s = rs_opt_redistribute(o, world, c, &in, &out, &st);
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
    check_posted(o, c, &st);
    if (!rs_sharding_has_partial(&c->src) && !rs_sharding_has_partial(&c->dst)) {
      int64_t lb = -1;
      CHECK(rs_traffic_lower_bound(&c->mesh, &c->tensor, &c->src, &c->dst, &lb) == RS_OK);
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
        /* a step plan's value follows its own event sequence (SPEC 5), not the canonical one */
        rs_events ev;
        rs_locals exp2 = {0, NULL};
        CHECK(rs_events_from_plan(&c->mesh, &p, &ev) == RS_OK);
        CHECK(rs_oracle_expected_events(c, &c->dst, &ev, &exp2) == RS_OK);
        rs_diff diff;
        int bad = rs_oracle_compare(c, &c->dst, &exp2, &out2, &diff);
        rs_locals_free(&exp2);
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
  (void)argc;
  (void)argv;
  rs_opt *o;
  CHECK(rs_opt_create(&o) == RS_OK);
  CHECK(rs_world_init("local", NULL, NULL, &world) == RS_OK);
  int ncopy = 0, npart = 0, nref = 0;
  for (int it = 0; it < 3000; ++it) {
    rs_case c;
    int want_partial = it % 2;
    if (!random_case(&c, want_partial, it >= 2000, (uint64_t)it)) continue;
    if (rs_sharding_has_partial(&c.src) || rs_sharding_has_partial(&c.dst)) npart++;
    else ncopy++;
    int with_ref = it % 3 == 0;
    nref += with_ref;
    cur_case++;
    int before = rs_test_failures;
    run_case(o, &c, with_ref);
    /* the cached schedule on fresh data */
    c.seed = c.seed * 6364136223846793005ull + 1442695040888963407ull;
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
  rs_world_finalize(world);
  TEST_DONE();
}
