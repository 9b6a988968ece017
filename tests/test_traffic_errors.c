/* test_traffic_errors.c - the traffic count of ref plans against the SPEC 7 lower bound, the
 * oracle's report of a shape mismatch, and loader errors that name the file and field (cases, TP
 * cases, state specs, p2p models). */
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

/* Every from-file loader names the file first, then the field ("PATH: case: ..."). */
static const char *load_bad(const char *text, int which) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/rs_test_loadXXXXXX");
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
  rs_status st = RS_OK;
  if (which == 0) {
    rs_tp_case *c = malloc(sizeof *c);
    st = rs_tp_case_from_file(path, c);
    free(c);
  } else if (which == 1) {
    rs_state_spec s;
    st = rs_state_spec_from_file(path, &s);
  } else {
    rs_p2p_model m;
    st = rs_p2p_model_load(path, &m);
  }
  CHECK(st == RS_ERR_INVALID);
  remove(path);
  char want[80];
  snprintf(want, sizeof want, "%s: ", path);
  CHECK(strncmp(rs_last_error(), want, strlen(want)) == 0);
  return rs_last_error() + strlen(want);
}

static void test_loaders_name_the_file(void) {
  CHECK(strcmp(load_bad("[]", 0), "case: expected a JSON object") == 0);
  CHECK(strcmp(load_bad("[]", 1), "state spec: expected a JSON object") == 0);
  CHECK(strcmp(load_bad("{}", 2), "model: missing") == 0);
  CHECK(strncmp(load_bad("{", 0), "json: syntax error", 18) == 0);
  rs_tp_case *c = malloc(sizeof *c);
  CHECK(rs_tp_case_from_file("/nonexistent/tp.json", c) == RS_ERR_IO);
  CHECK(strstr(rs_last_error(), "/nonexistent/tp.json") != NULL);
  free(c);
  /* a p2p model that lists one tensor dim twice in a shard order is refused (it was accepted, the
   * later entry silently winning), as a case file's is */
  const char *dup =
      "{\"model\": {\"params\": [{\"name\": \"w\", \"shape\": [8, 4], \"dtype\": \"F32\"}]},"
      " \"src\": {\"meshes\": [{\"shape\": [2, 2], \"ranks\": [0, 1, 2, 3]}], \"params\": {\"w\": {\"mesh\": 0,"
      " \"placements\": [\"S(0)\", \"S(0)\"], \"shard_order\": [{\"tensor_dim\": 0, \"mesh_dims\": [1, 0]},"
      " {\"tensor_dim\": 0, \"mesh_dims\": [0, 1]}]}}},"
      " \"dst\": {\"meshes\": [{\"shape\": [4], \"ranks\": [0, 1, 2, 3]}], \"params\": {\"w\": {\"mesh\": 0,"
      " \"placements\": [\"R\"]}}}}";
  CHECK(strstr(load_bad(dup, 2), "tensor dim 0 is listed twice") != NULL);
  rs_p2p_model m;
  CHECK(rs_p2p_model_load("/nonexistent/model.json", &m) == RS_ERR_IO);
  CHECK(strstr(rs_last_error(), "/nonexistent/model.json") != NULL);
}

int main(void) {
  test_traffic();
  test_loaders_name_the_file();
  test_shape_mismatch_report();
  test_file_errors();
  TEST_DONE();
}
