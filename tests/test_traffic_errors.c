/* test_traffic_errors.c - the traffic count of ref plans against the SPEC 7 lower bound, the
 * oracle's report of a shape mismatch, and case-file errors that name the file and field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "reshard/reshard.h"

static void make_case(rs_case *c, const char *mesh_json_shape, int64_t rows, const char *src, const char *dst) {
  char text[512];
  snprintf(text, sizeof text,
           "{\"mesh\":{\"shape\":%s},\"tensor\":{\"shape\":[%lld,4],\"dtype\":\"F32\"},"
           "\"src\":{\"placements\":%s},\"dst\":{\"placements\":%s},\"seed\":3}",
           mesh_json_shape, (long long)rows, src, dst);
  CHECK(rs_case_from_json(text, c) == RS_OK);
}

static void test_traffic(void) {
  rs_case c;
  rs_plan p;
  int64_t sent = -1, lb = -1;
  /* 1-D all-gather: every rank receives the 3 pieces it lacks, exactly the lower bound */
  make_case(&c, "[4]", 8, "[\"S(0)\"]", "[\"R\"]");
  CHECK(rs_ref_plan(&c, &p) == RS_OK);
  CHECK(rs_ref_plan_traffic(&c, &p, &sent) == RS_OK);
  CHECK(rs_traffic_lower_bound(&c.mesh, &c.tensor, &c.src, &c.dst, &lb) == RS_OK);
  CHECK_EQ_I(lb, 4 * 6 * 4 * 4);
  CHECK_EQ_I(sent, lb);
  /* [S0,S0] -> [R,S0]: greedy gathers both dims then chunks - more than the bound */
  make_case(&c, "[2,2]", 8, "[\"S(0)\",\"S(0)\"]", "[\"R\",\"S(0)\"]");
  CHECK(rs_ref_plan(&c, &p) == RS_OK);
  CHECK(rs_ref_plan_traffic(&c, &p, &sent) == RS_OK);
  CHECK(rs_traffic_lower_bound(&c.mesh, &c.tensor, &c.src, &c.dst, &lb) == RS_OK);
  CHECK(sent > lb);
  /* a copy that moves nothing */
  make_case(&c, "[2,2]", 8, "[\"S(0)\",\"R\"]", "[\"S(0)\",\"S(1)\"]");
  CHECK(rs_ref_plan(&c, &p) == RS_OK);
  CHECK(rs_ref_plan_traffic(&c, &p, &sent) == RS_OK);
  CHECK(rs_traffic_lower_bound(&c.mesh, &c.tensor, &c.src, &c.dst, &lb) == RS_OK);
  CHECK_EQ_I(sent, 0);
  CHECK_EQ_I(lb, 0);
  /* the bound is only defined for copy-only changes */
  make_case(&c, "[2]", 8, "[\"P(sum)\"]", "[\"R\"]");
  CHECK(rs_traffic_lower_bound(&c.mesh, &c.tensor, &c.src, &c.dst, &lb) == RS_ERR_INVALID);
}

static void test_shape_mismatch_report(void) {
  rs_case c;
  make_case(&c, "[2]", 5, "[\"R\"]", "[\"S(0)\"]");
  rs_locals exp, bad;
  CHECK(rs_oracle_expected(&c, &c.dst, &exp) == RS_OK);
  CHECK(rs_oracle_expected(&c, &c.src, &bad) == RS_OK); /* full tensors where shards are due */
  rs_diff d;
  CHECK_EQ_I(rs_oracle_compare(&c, &c.dst, &exp, &bad, &d), 2);
  CHECK(d.shape_mismatch);
  CHECK(strstr(d.text, "local shape [5,4], expected [3,4]") != NULL);
  CHECK_EQ_I(rs_oracle_compare(&c, &c.dst, &exp, &exp, &d), 0);
  rs_locals_free(&exp);
  rs_locals_free(&bad);
}

static void test_file_errors(void) {
  rs_case c;
  CHECK(rs_case_from_file("/nonexistent/case.json", &c) == RS_ERR_IO);
  CHECK(strstr(rs_last_error(), "/nonexistent/case.json") != NULL);
  char path[] = "/tmp/rs_test_caseXXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs("{\"mesh\":{\"shape\":[2]},\"tensor\":{\"shape\":[4],\"dtype\":\"F32\"},"
        "\"src\":{\"placements\":[\"S(3)\"]},\"dst\":{\"placements\":[\"R\"]}}",
        f);
  fclose(f);
  CHECK(rs_case_from_file(path, &c) == RS_ERR_INVALID);
  CHECK(strstr(rs_last_error(), path) != NULL);
  CHECK(strstr(rs_last_error(), "src.placements[0]") != NULL);
  remove(path);
}

int main(void) {
  test_traffic();
  test_shape_mismatch_report();
  test_file_errors();
  TEST_DONE();
}
