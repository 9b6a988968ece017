/* test_events.c - SPEC 5's event sequences by hand: the canonical sequence of a (src, dst) pair, the
 * sequence of a step plan, and the oracle refusing a sequence that does not take src's Partial dims
 * to dst's (it is an input, so a wrong one must be an error, never a silent other result). */
#include <string.h>
#include "check.h"
#include "reshard/events.h"
#include "reshard/oracle.h"

static rs_sharding shard(const char *text) {
  rs_sharding s;
  memset(&s, 0, sizeof s);
  CHECK(rs_parse_placements(text, &s) == RS_OK);
  CHECK(rs_sharding_set_default_order(&s, 2) == RS_OK);
  return s;
}

static void expect_text(const rs_events *e, const char *want) {
  char buf[256];
  rs_events_format(e, buf, sizeof buf);
  if (strcmp(buf, want) != 0) {
    fprintf(stderr, "events \"%s\", expected \"%s\"\n", buf, want);
    rs_test_failures++;
  }
}

static rs_placement P(const char *text) {
  rs_sharding s = shard(text);
  return s.p[0];
}

int main(void) {
  int64_t sz[3] = {2, 3, 4};
  rs_mesh m;
  CHECK(rs_mesh_init(&m, 3, sz, NULL) == RS_OK);
  rs_events e;

  /* reductions ascending, then partitions ascending; a Partial kept with its op is no event */
  rs_sharding a = shard("P(avg),R,P(max)"), b = shard("R,P(sum),P(max)");
  CHECK(rs_events_canonical(&m, &a, &b, &e) == RS_OK);
  expect_text(&e, "reduce 0 P(avg), partition 1 P(sum)");
  a = shard("R,P(sum),P(sum)");
  b = shard("P(sum),S0,R");
  CHECK(rs_events_canonical(&m, &a, &b, &e) == RS_OK);
  expect_text(&e, "reduce 1 P(sum), reduce 2 P(sum), partition 0 P(sum)");
  /* a changed op on one dim: reduce the old, partition the new */
  a = shard("P(sum),R,R");
  b = shard("P(max),R,R");
  CHECK(rs_events_canonical(&m, &a, &b, &e) == RS_OK);
  expect_text(&e, "reduce 0 P(sum), partition 0 P(max)");
  CHECK(rs_events_canonical(&m, &b, &b, &e) == RS_OK);
  expect_text(&e, "none");

  /* size-1 mesh dims move nothing: no event (with a mesh), kept without one */
  int64_t sz1[2] = {1, 3};
  rs_mesh m1;
  CHECK(rs_mesh_init(&m1, 2, sz1, NULL) == RS_OK);
  a = shard("P(sum),P(sum)");
  b = shard("R,R");
  CHECK(rs_events_canonical(&m1, &a, &b, &e) == RS_OK);
  expect_text(&e, "reduce 1 P(sum)");
  CHECK(rs_events_canonical(NULL, &a, &b, &e) == RS_OK);
  expect_text(&e, "reduce 0 P(sum), reduce 1 P(sum)");

  /* a plan's sequence is its step order, whatever the canonical one says */
  rs_plan p;
  memset(&p, 0, sizeof p);
  p.nsteps = 4;
  p.step[0] = (rs_step){1, P("P(sum)"), P("R")};
  p.step[1] = (rs_step){0, P("S0"), P("R")}; /* moves data, changes no value */
  p.step[2] = (rs_step){0, P("R"), P("P(avg)")};
  p.step[3] = (rs_step){2, P("P(min)"), P("S1")};
  CHECK(rs_events_from_plan(&m, &p, &e) == RS_OK);
  expect_text(&e, "reduce 1 P(sum), partition 0 P(avg), reduce 2 P(min)");
  rs_events same = e;
  CHECK(rs_events_equal(&e, &same));
  same.ev[0].mesh_dim = 2;
  CHECK(!rs_events_equal(&e, &same));

  /* the oracle refuses sequences that do not fit the case */
  rs_case c;
  memset(&c, 0, sizeof c);
  c.mesh = m;
  c.tensor.dtype = RS_F32;
  c.tensor.ndim = 1;
  c.tensor.shape[0] = 6;
  c.src = shard("P(sum),P(sum),R");
  c.dst = shard("R,R,R");
  c.values = RS_VALUES_ORDER;
  c.seed = 5;
  rs_locals out;
  CHECK(rs_events_canonical(&c.mesh, &c.src, &c.dst, &e) == RS_OK);
  CHECK(rs_oracle_expected_events(&c, &c.dst, &e, &out) == RS_OK);
  rs_locals_free(&out);
  rs_events bad = e;
  bad.n = 1; /* dim 1 never reduced: dst is not reached */
  CHECK(rs_oracle_expected_events(&c, &c.dst, &bad, &out) == RS_ERR_INVALID);
  rs_clear_error();
  bad = e;
  bad.ev[1].mesh_dim = 2; /* reduces a dim that is not Partial */
  CHECK(rs_oracle_expected_events(&c, &c.dst, &bad, &out) == RS_ERR_INVALID);
  rs_clear_error();
  bad = e;
  bad.ev[0].op = RS_MAX; /* the wrong op */
  CHECK(rs_oracle_expected_events(&c, &c.dst, &bad, &out) == RS_ERR_INVALID);
  rs_clear_error();
  TEST_DONE();
}
