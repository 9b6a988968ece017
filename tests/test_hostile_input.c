/* test_hostile_input.c - bad input is refused with a message naming the field, never wrapped,
 * rounded, silently overridden or written past a buffer: the case codec (exact integers through
 * core/json.h), size arithmetic (core/checked.h), the CLI text syntax (core/text.c), the typed
 * "expected" block (core/expected.h) and the bounded int-list formatter (core/fmt.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "reshard/reshard.h"
#include "core/case_json.h"
#include "core/expected.h"
#include "core/fmt.h"
#include "core/json.h"
#include "core/box.h"
#include "core/elf_check.h"
#include "core/last_status.h"
#include "core/numflag.h"
#include "props/props.h"
#include "reshard/ckpt.h"
#include "reshard/p2p.h"
#include <fcntl.h>
#include <math.h>
#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#define BASE_MESH "\"mesh\":{\"shape\":[2]}"
#define CASE(mesh, shape, src_order) \
  "{" mesh ",\"tensor\":{\"shape\":" shape ",\"dtype\":\"F32\"},\"src\":{\"placements\":[\"S(0)\"]" src_order "},\"dst\":{\"placements\":[\"R\"]}"

/* Loads text; returns the status and leaves the message in rs_last_error(). */
static rs_status load(const char *text, rs_case *c) { return rs_case_from_json(text, c); }

static void refused(const char *text, const char *needle) {
  rs_case c;
  rs_status st = load(text, &c);
  if (st == RS_OK) {
    fprintf(stderr, "accepted: %s\n", text);
    rs_test_failures++;
    return;
  }
  if (needle && !strstr(rs_last_error(), needle)) {
    fprintf(stderr, "message '%s' does not name '%s' (for %s)\n", rs_last_error(), needle, text);
    rs_test_failures++;
  }
}

static void test_case_codec(void) {
  rs_case c;
  /* exact integers: 2^53 + 1 survives, a fraction or an exponent is no integer */
  CHECK(load(CASE(BASE_MESH, "[4]", "") ",\"seed\":9007199254740993}", &c) == RS_OK);
  CHECK(c.seed == 9007199254740993ull);
  CHECK(load(CASE(BASE_MESH, "[4]", "") ",\"seed\":18446744073709551615}", &c) == RS_OK);
  CHECK(c.seed == UINT64_MAX);
  refused(CASE(BASE_MESH, "[4]", "") ",\"seed\":18446744073709551616}", "seed");
  refused(CASE(BASE_MESH, "[4]", "") ",\"seed\":\"-1\"}", "seed");
  refused(CASE(BASE_MESH, "[4]", "") ",\"seed\":1.5}", "seed");
  refused(CASE(BASE_MESH, "[4.0]", "") "}", "tensor.shape[0]");
  refused(CASE(BASE_MESH, "[4e0]", "") "}", "tensor.shape[0]");
  refused(CASE(BASE_MESH, "[4]", ",\"shard_order\":[{\"tensor_dim\":0.5,\"mesh_dims\":[0]}]") "}",
          "src.shard_order[0].tensor_dim");
  /* a second entry for one tensor dim would override the first */
  refused(CASE(BASE_MESH, "[4]",
               ",\"shard_order\":[{\"tensor_dim\":0,\"mesh_dims\":[0]},{\"tensor_dim\":0,\"mesh_dims\":[0]}]") "}",
          "listed twice");
  refused(CASE(BASE_MESH, "[4]", ",\"shard_order\":[5]") "}", "src.shard_order[0]");
  /* sizes whose products overflow: meshes, element counts, byte counts */
  refused(CASE("\"mesh\":{\"shape\":[4294967296,4294967296,4294967296]}", "[4]", "") "}", "mesh.shape");
  refused(CASE("\"mesh\":{\"shape\":[2,4611686018427387904]}", "[4]", "") "}", "mesh.shape");
  refused(CASE(BASE_MESH, "[0,1000000000000000000,1000000000000000000]", "") "}", "overflows");
  refused(CASE(BASE_MESH, "[0,3000000000000000000]", "") "}", "byte count");
  refused(CASE(BASE_MESH, "[9223372036854775808]", "") "}", "tensor.shape[0]");
  refused(CASE("\"mesh\":{\"shape\":[2],\"ranks\":[0,2147483648]}", "[4]", "") "}", "mesh.ranks[1]");
  refused("{\"mesh\":", "json");
  refused("[1,2]", "case");
  refused(CASE(BASE_MESH, "[4]", "") ",\"values\":5}", "values");
  refused(CASE(BASE_MESH, "[4]", "") ",\"planner\":[]}", "planner");
  refused(CASE(BASE_MESH, "[4]", "") ",\"name\":7}", "name");
  /* the planner's enumeration: a string of two values, kept through a round trip; S -> P(sum)
   * is valid only under the pytorch enumeration */
  refused(CASE(BASE_MESH, "[4]", "") ",\"enumeration\":7}", "enumeration");
  refused(CASE(BASE_MESH, "[4]", "") ",\"enumeration\":\"PyTorch\"}", "enumeration");
  CHECK(load(CASE(BASE_MESH, "[4]", "") ",\"enumeration\":\"pytorch\"}", &c) == RS_OK && c.enumeration == RS_ENUM_PYTORCH);
  {
    char *j = rs_case_to_json(&c);
    rs_case back;
    CHECK(j && load(j, &back) == RS_OK && back.enumeration == RS_ENUM_PYTORCH);
    free(j);
  }
  const char *s2p = "{" BASE_MESH ",\"tensor\":{\"shape\":[4],\"dtype\":\"F32\"},\"src\":{\"placements\":[\"S(0)\"]},"
                    "\"dst\":{\"placements\":[\"P(sum)\"]}";
  char buf[512];
  snprintf(buf, sizeof buf, "%s}", s2p);
  refused(buf, "Shard -> Partial");
  snprintf(buf, sizeof buf, "%s,\"enumeration\":\"pytorch\"}", s2p);
  CHECK(load(buf, &c) == RS_OK);
  snprintf(buf, sizeof buf, "{" BASE_MESH ",\"tensor\":{\"shape\":[4],\"dtype\":\"F32\"},\"src\":{\"placements\":[\"S(0)\"]},"
                            "\"dst\":{\"placements\":[\"P(max)\"]},\"enumeration\":\"pytorch\"}");
  refused(buf, "other than P(sum)");
  /* a zero-size tensor whose other dims are small is fine */
  CHECK(load(CASE(BASE_MESH, "[0,5]", "") "}", &c) == RS_OK);
}

static void test_text_syntax(void) {
  int64_t d[RS_MAX_DIMS];
  int n;
  int32_t r[8];
  rs_sharding s;
  CHECK(rs_parse_dims("4x2", RS_MAX_DIMS, d, &n) == RS_OK && n == 2 && d[0] == 4 && d[1] == 2);
  CHECK(rs_parse_dims("9223372036854775807x2", RS_MAX_DIMS, d, &n) == RS_OK);
  const char *bad_dims[] = {"9223372036854775808", "99999999999999999999x2", "4x", "x4", "4xx2", " 4",
                            "+4", "-4", "4x2 ", "4.5", "0x", "4,", "1x1x1x1x1x1x1x1x1"};
  for (size_t i = 0; i < sizeof bad_dims / sizeof *bad_dims; i++)
    if (rs_parse_dims(bad_dims[i], RS_MAX_DIMS, d, &n) == RS_OK) {
      fprintf(stderr, "dims '%s' accepted\n", bad_dims[i]);
      rs_test_failures++;
    }
  CHECK(rs_parse_ranks("3,1,2,0", r, 8, &n) == RS_OK && n == 4);
  const char *bad_ranks[] = {"", "1,,2", "1,", "-1", "2147483648", " 1", "+1", "1;2", "1,2,3,4,5,6,7,8,9"};
  for (size_t i = 0; i < sizeof bad_ranks / sizeof *bad_ranks; i++)
    if (rs_parse_ranks(bad_ranks[i], r, 8, &n) == RS_OK) {
      fprintf(stderr, "ranks '%s' accepted\n", bad_ranks[i]);
      rs_test_failures++;
    }
  const char *bad_pl[] = {"", "S", "S(", "S(0", "S(x)", "S99", "S(-9)", "S0)", "P(", "P(mean)", "Q", "R,",
                          ",R", "S(0)x", "S+0", "S 0", "R,R,R,R,R,R,R"};
  for (size_t i = 0; i < sizeof bad_pl / sizeof *bad_pl; i++)
    if (rs_parse_placements(bad_pl[i], &s) == RS_OK) {
      fprintf(stderr, "placements '%s' accepted\n", bad_pl[i]);
      rs_test_failures++;
    }
  CHECK(rs_parse_placements("S0,S(-1),P(avg),R", &s) == RS_OK && s.mesh_ndim == 4);
  CHECK(rs_parse_placements("S0,S0", &s) == RS_OK);
  CHECK(rs_parse_order("0:1,0", &s, 1) == RS_OK && s.order_len[0] == 2 && s.order[0][0] == 1);
  const char *bad_ord[] = {"0:0;0:1", "0", "0:", ":0", "0:6", "9:0", "0:0;", "0:0,", "0:1,0x", "0:0,0,0,0,0,0,0"};
  for (size_t i = 0; i < sizeof bad_ord / sizeof *bad_ord; i++) {
    CHECK(rs_parse_placements("S0,S0", &s) == RS_OK);
    if (rs_parse_order(bad_ord[i], &s, 1) == RS_OK) {
      fprintf(stderr, "order '%s' accepted\n", bad_ord[i]);
      rs_test_failures++;
    }
  }
}

static void test_expected(void) {
  rs_case c;
  CHECK(load(CASE("\"mesh\":{\"shape\":[2],\"ranks\":[4,7]}", "[4]", "") "}", &c) == RS_OK);
  const char *bad[] = {
      "{\"ranks\":\"oops\",\"trace\":5}",
      "{\"trace\":5}",
      "{\"ranks\":[{\"rank\":0}]}",                       /* rank 0 is not in the mesh */
      "{\"ranks\":[{\"rank\":4.0}]}",
      "{\"ranks\":[{\"rank\":4,\"xxh3\":\"abc\"}]}",
      "{\"ranks\":[{\"rank\":4,\"xxh3\":\"zzzzzzzzzzzzzzzz\"}]}",
      "{\"ranks\":[{\"rank\":4,\"local_shape\":[1,2]}]}",
      "{\"ranks\":[{\"rank\":4,\"coord\":[1]}]}",         /* rank 4 sits at coord 0 */
      "{\"ranks\":[{\"rank\":4},{\"rank\":4}]}",
      "{\"ranks\":[{\"local_shape\":[2]}]}",
      "{\"ranks\":[{\"rank\":4,\"bogus\":1}]}",
      "{\"collectives\":{\"all_gather\":\"1\"}}",
      "{\"collectives\":{\"teleport\":1}}",
      "{\"collectives\":[1]}",
      "{\"trace\":\"S(0)->R\",\"trace\":\"R->R\"}",
      "{\"tracee\":\"S(0)->R\"}",
      "[]",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    cJSON *j;
    CHECK(rs_json_parse(bad[i], &j) == RS_OK);
    rs__expected e;
    if (rs__expected_parse(j, "expected", 1, &c, &e) == RS_OK) {
      fprintf(stderr, "expected block accepted: %s\n", bad[i]);
      rs_test_failures++;
      rs__expected_free(&e);
    } else if (!strstr(rs_last_error(), "expected")) {
      fprintf(stderr, "message does not name the field: %s\n", rs_last_error());
      rs_test_failures++;
    }
    cJSON_Delete(j);
  }
  cJSON *j;
  CHECK(rs_json_parse("{\"ranks\":[{\"rank\":7,\"coord\":[1],\"local_shape\":[4],\"global_offset\":[0],"
                      "\"xxh3\":\"00000000DeadBeef\"}],\"trace\":\"S(0)->R\",\"collectives\":{\"all_gather\":1}}",
                      &j) == RS_OK);
  rs__expected e;
  CHECK(rs__expected_parse(j, "expected", 1, &c, &e) == RS_OK);
  CHECK(e.nranks == 1 && e.ranks[0].pos == 1 && e.ranks[0].xxh3 == 0xdeadbeefull);
  CHECK(e.collectives[RS_COLL_ALL_GATHER] == 1 && e.trace && strcmp(e.trace, "S(0)->R") == 0);
  rs__expected_free(&e);
  cJSON_Delete(j);
}

static void test_fmt(void) {
  int64_t v[RS_MAX_DIMS];
  for (int i = 0; i < RS_MAX_DIMS; i++) v[i] = INT64_MAX;
  /* a guard after the buffer must survive the longest list */
  struct {
    char buf[16];
    char guard[16];
  } g;
  memset(g.guard, 'G', sizeof g.guard);
  rs__fmt_ints(g.buf, sizeof g.buf, v, RS_MAX_DIMS, "[", ",", "]");
  CHECK(strlen(g.buf) == sizeof g.buf - 1);
  CHECK(strcmp(g.buf + sizeof g.buf - 4, "...") == 0);
  for (size_t i = 0; i < sizeof g.guard; i++) CHECK(g.guard[i] == 'G');
  char b[64];
  int64_t w[] = {4, -2, 0};
  CHECK(strcmp(rs__fmt_ints(b, sizeof b, w, 3, "(", ",", ")"), "(4,-2,0)") == 0);
  CHECK(strcmp(rs__fmt_ints(b, sizeof b, w, 0, "[", ",", "]"), "[]") == 0);
  rs__sbuf sb;
  rs__sbuf_init(&sb, b, 8);
  rs__sbuf_add(&sb, "%s", "abcdefghijkl");
  rs__sbuf_add(&sb, "%s", "more");
  CHECK(strcmp(b, "abcd...") == 0 && sb.cut);
}

static void test_nomem_code(void) {
  rs_fail(RS_ERR_NOMEM, "x: out of memory");
  CHECK(rs__last_status() == RS_ERR_NOMEM);
  rs_clear_error();
  CHECK(rs__last_status() == RS_OK);
}

/* A saved failure records what it failed with, and reads it back. */
static void test_saved_failure(void) {
  rs_case c;
  CHECK(load(CASE(BASE_MESH, "[5]", "") ",\"seed\":9007199254740993}", &c) == RS_OK);
  c.tensor.shape[0] = 5;
  char dir[] = "/tmp/rs_hostile_XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(0);
    return;
  }
  rs_prop_env env;
  memset(&env, 0, sizeof env);
  env.impl = RS_IMPL_OPT;
  char path[512];
  CHECK(rs_write_regression(dir, RS_PROP_GREEDY_ORACLE, &c, "boom\nsecond line", &env, path, sizeof path) == RS_OK);
  rs_saved_failure *f = malloc(sizeof *f);
  CHECK(f && rs_saved_failure_read(path, f) == RS_OK);
  if (f) {
    CHECK(f->impl == RS_IMPL_OPT);
    CHECK(strcmp(f->transport, "local") == 0);
    CHECK(f->id == RS_PROP_GREEDY_ORACLE && f->case_ok);
    CHECK(f->c.seed == 9007199254740993ull);
  }
  env.impl = RS_IMPL_REF;
  char path2[512];
  CHECK(rs_write_regression(dir, RS_PROP_OPT_ORACLE, &c, "x", &env, path2, sizeof path2) == RS_OK);
  /* an opt property never replays under ref as a silent SKIP */
  int failed = 0;
  char msg[256];
  if (f && rs_saved_failure_read(path2, f) == RS_OK) CHECK(rs_saved_failure_replay(f, &env, &failed, msg, sizeof msg) != RS_OK);
  remove(path);
  remove(path2);
  rmdir(dir);
  free(f);
}

/* want == rs_last_error() verbatim: one message per failure, naming its field once */
static void says(const char *what, const char *want) {
  if (strcmp(rs_last_error(), want) != 0) {
    fprintf(stderr, "%s: message\n  '%s'\nwant\n  '%s'\n", what, rs_last_error(), want);
    rs_test_failures++;
  }
}

/* rs_fail may be given rs_last_error() itself (re-coding or prefixing the current message): it
 * formats apart, never into its own argument; and the size checks name the caller's field once. */
static void test_messages(void) {
  rs_fail(RS_ERR_INVALID, "shard_0_3': offsets past the end");
  rs_fail(RS_ERR_IO, "file rank_0.safetensors: %s", rs_last_error());
  says("rs_fail of its own message", "file rank_0.safetensors: shard_0_3': offsets past the end");
  CHECK(rs__last_status() == RS_ERR_IO);
  rs_fail(RS_ERR_INVALID, "%s", rs_last_error());
  says("rs_fail re-coding", "file rank_0.safetensors: shard_0_3': offsets past the end");
  rs_fail(RS_ERR_INVALID, "x");
  rs_fail_prefix(RS_ERR_INVALID, "src.");
  says("rs_fail_prefix", "src.x");
  rs_tensor t = {RS_F32, 2, {4611686018427387904ll, 3}};
  int64_t nb;
  CHECK(rs__tensor_nbytes_at(&t, "--shape", &nb) == RS_ERR_OVERFLOW);
  says("element count", "--shape: element count overflows int64");
  rs_tensor t2 = {RS_F64, 1, {2305843009213693952ll}};
  CHECK(rs__tensor_nbytes_at(&t2, "tensors[0].shape", &nb) == RS_ERR_OVERFLOW);
  says("byte count", "tensors[0].shape: byte count overflows int64");
  CHECK(rs_tensor_nbytes(&t2, &nb) == RS_ERR_OVERFLOW);
  says("case field", "tensor.shape: byte count overflows int64");
  /* through the readers: the state spec (was "tensors[0].shapetensor.shape: ...") and a P2P model */
  rs_state_spec s;
  CHECK(rs_state_spec_from_json("{\"world\":1,\"tensors\":[{\"key\":\"w\",\"dtype\":\"F64\",\"shape\":"
                                "[2305843009213693952],\"mesh\":[1],\"placements\":\"R\"}]}",
                                &s) != RS_OK);
  says("state spec", "tensors[0].shape: byte count overflows int64");
  /* tensor keys and object unique keys share one namespace: a spec whose tensor key is the unique
   * key of some shard of an object is refused by the parser (a fuzzer found specs that parsed and
   * then failed validation: "<key>/shard__" of an object with no shard dims) */
  const char *clash[] = {"o/shard__", "o/shard_1.2_2.3", "o/shard_0.0_2.3"};
  const char *mesh[] = {"[2]", "[2,3],\"dims\":[0,1]"};
  const char *fine[] = {"o/shard_2.0_2.3", "o/shard_01.0_2.3", "o/shard_1.0_2.3x", "o/shard_1_2", "o/shard_1.0_3.2"};
  char js[512];
  for (int i = 0; i < 3; i++) {
    snprintf(js, sizeof js, "{\"world\":6,\"tensors\":[{\"key\":\"%s\",\"dtype\":\"F32\",\"shape\":[2],\"mesh\":[1],"
             "\"placements\":\"R\"}],\"objects\":[{\"key\":\"o\",\"seed\":1,\"mesh\":%s}]}", clash[i], i ? mesh[1] : mesh[0]);
    if (rs_state_spec_from_json(js, &s) == RS_OK) {
      fprintf(stderr, "state spec with tensor key '%s' beside object 'o' accepted\n", clash[i]);
      rs_test_failures++;
      rs_state_spec_free(&s);
    } else {
      char want[256];
      snprintf(want, sizeof want, "tensors[0].key: '%s' is the unique key of a shard of objects[0] ('o'): tensor keys "
               "and object unique keys share one namespace", clash[i]);
      says("unique key clash", want);
    }
  }
  for (int i = 0; i < 5; i++) {
    snprintf(js, sizeof js, "{\"world\":6,\"tensors\":[{\"key\":\"%s\",\"dtype\":\"F32\",\"shape\":[2],\"mesh\":[1],"
             "\"placements\":\"R\"}],\"objects\":[{\"key\":\"o\",\"seed\":1,\"mesh\":%s}]}", fine[i], mesh[1]);
    if (rs_state_spec_from_json(js, &s) != RS_OK) {
      fprintf(stderr, "state spec with tensor key '%s' (no shard's unique key) refused: %s\n", fine[i], rs_last_error());
      rs_test_failures++;
    } else {
      rs_state_spec_free(&s);
    }
  }
  rs_p2p_model m;
  CHECK(rs_p2p_model_parse("{\"model\":{\"params\":[{\"name\":\"w\",\"shape\":[2305843009213693952],"
                           "\"dtype\":\"F64\"}]},\"src\":{\"meshes\":[{\"shape\":[1],\"ranks\":[0]}],"
                           "\"params\":{\"w\":{\"mesh\":0,\"placements\":[\"R\"]}}},\"dst\":{\"meshes\":"
                           "[{\"shape\":[1],\"ranks\":[0]}],\"params\":{\"w\":{\"mesh\":0,\"placements\":[\"R\"]}}}}",
                           &m) != RS_OK);
  says("p2p model", "model.params.w.shape: byte count overflows int64");
}

/* The one checked parser of numeric flags: exact, bounded, never atoi/strtod. */
static void test_numflags(void) {
  long long v;
  unsigned long long u;
  int64_t b;
  double t;
  CHECK(rs__flag_int("4096", 1, 1 << 20, &v) == 0 && v == 4096);
  CHECK(rs__flag_int("-5", -10, 10, &v) == 0 && v == -5);
  const char *bad_int[] = {"4294967297", "1e3", "nan", "inf", "-1", "", " 1", "+1", "1.0", "0x10", "1 ", "9223372036854775808", "0"};
  for (size_t i = 0; i < sizeof bad_int / sizeof *bad_int; i++)
    if (rs__flag_int(bad_int[i], 1, 1 << 20, &v) == 0) {
      fprintf(stderr, "int flag '%s' accepted as %lld\n", bad_int[i], v);
      rs_test_failures++;
    }
  CHECK(rs__flag_u64("18446744073709551615", &u) == 0 && u == UINT64_MAX);
  CHECK(rs__flag_u64("0xdeadBEEF", &u) != 0 && rs__flag_u64("0x10", &u) != 0 && rs__flag_u64("0X1", &u) != 0);
  CHECK(rs__flag_u64("16", &u) == 0 && u == 16 && rs__flag_u64("+1", &u) != 0 && rs__flag_u64(" 1", &u) != 0);
  CHECK(rs__flag_u64("18446744073709551616", &u) != 0 && rs__flag_u64("-1", &u) != 0 && rs__flag_u64("0x", &u) != 0);
  CHECK(rs__flag_bytes("2G", 1, INT64_MAX, &b) == 0 && b == (int64_t)2 << 30);
  CHECK(rs__flag_bytes("512MiB", 1, INT64_MAX, &b) == 0 && b == (int64_t)512 << 20);
  CHECK(rs__flag_bytes("65536", 1, INT64_MAX, &b) == 0 && b == 65536);
  CHECK(rs__flag_bytes("64kb", 1, INT64_MAX, &b) == 0 && b == 65536);
  const char *bad_bytes[] = {"nan", "inf", "-1G", "1.5G", "1e9", "2X", "2Gi", "4294967297T", "9223372036854775807K", "", "G"};
  for (size_t i = 0; i < sizeof bad_bytes / sizeof *bad_bytes; i++)
    if (rs__flag_bytes(bad_bytes[i], 1, INT64_MAX, &b) == 0) {
      fprintf(stderr, "byte flag '%s' accepted as %lld\n", bad_bytes[i], (long long)b);
      rs_test_failures++;
    }
  CHECK(rs__flag_seconds("0.5", &t) == 0 && t == 0.5);
  CHECK(rs__flag_seconds("600", &t) == 0 && t == 600);
  CHECK(rs__flag_seconds("604800", &t) == 0);
  const char *bad_sec[] = {"inf", "nan", "NaN", "-1", "0", "0.0", "1e3", "604801", "1e999", "", ".", "1..2", " 1", "+1",
                           "99999999999999999999999999999999999999"};
  for (size_t i = 0; i < sizeof bad_sec / sizeof *bad_sec; i++)
    if (rs__flag_seconds(bad_sec[i], &t) == 0) {
      fprintf(stderr, "--seconds '%s' accepted as %g\n", bad_sec[i], t);
      rs_test_failures++;
    }
  CHECK(!rs__seconds_ok(NAN) && !rs__seconds_ok(INFINITY) && rs__seconds_ok(1));
}

/* Out of memory is no verdict: a FAIL whose last error is RS_ERR_NOMEM. */
static void test_oom_outcome(void) {
  char msg[128];
  rs_clear_error();
  CHECK(!rs_outcome_is_oom(RS_FAIL));
  CHECK(rs_prop_oom(msg, sizeof msg, "compare") == RS_FAIL && rs_outcome_is_oom(RS_FAIL));
  CHECK(strcmp(msg, "compare: out of memory") == 0);
  CHECK(!rs_outcome_is_oom(RS_PASS) && !rs_outcome_is_oom(RS_SKIP));
  rs_fail(RS_ERR_INVALID, "bad");
  CHECK(!rs_outcome_is_oom(RS_FAIL));
}

/* A plug-in must be a complete ELF shared object before dlopen maps it (a cut one raised SIGBUS):
 * this test's own executable (a PIE: ET_DYN) is whole, its truncations are not. */
static void test_elf_check(void) {
  char dir[] = "/tmp/rs_elf_XXXXXX", p[600];
  if (!mkdtemp(dir)) {
    CHECK(0);
    return;
  }
  FILE *f = fopen("/proc/self/exe", "rb");
  char *img = malloc(64 << 20);
  size_t n = f && img ? fread(img, 1, 64 << 20, f) : 0;
  if (f) fclose(f);
  CHECK(n > 4096);
  snprintf(p, sizeof p, "%s/whole.so", dir);
  FILE *o = fopen(p, "wb");
  if (o) {
    fwrite(img, 1, n, o);
    fclose(o);
  }
  CHECK(rs_elf_check_file("--copy-service", p) == RS_OK);
  /* cut anywhere: inside the ELF header, the program headers, a loaded segment, the section table */
  const size_t cuts[] = {0, 10, 63, 64, 100, 1000, 4096, n / 2, n - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    snprintf(p, sizeof p, "%s/cut%zu.so", dir, i);
    o = fopen(p, "wb");
    if (o) {
      fwrite(img, 1, cuts[i], o);
      fclose(o);
    }
    if (rs_elf_check_file("--copy-service", p) == RS_OK) {
      fprintf(stderr, "ELF cut to %zu of %zu bytes accepted\n", cuts[i], n);
      rs_test_failures++;
    } else if (strncmp(rs_last_error(), "--copy-service: '", 17) != 0 || !strstr(rs_last_error(), p)) {
      fprintf(stderr, "ELF message does not name the flag and the path once: %s\n", rs_last_error());
      rs_test_failures++;
    }
    remove(p);
  }
  snprintf(p, sizeof p, "%s/cut4.so", dir);
  o = fopen(p, "wb");
  if (o) {
    fwrite(img, 1, 100, o);
    fclose(o);
  }
  CHECK(rs_elf_check_file(NULL, p) != RS_OK);
  char want[700];
  snprintf(want, sizeof want, "'%s': truncated: the program header table lies past the end of the file", p);
  says("truncated ELF", want);
  remove(p);
  char q[600];
  snprintf(p, sizeof p, "%s/whole.so", dir);
  snprintf(q, sizeof q, "%s/link.so", dir);
  CHECK(symlink(p, q) == 0 && rs_elf_check_file(NULL, q) != RS_OK && strstr(rs_last_error(), "symbolic link"));
  remove(q);
  snprintf(q, sizeof q, "%s/fifo.so", dir);
  CHECK(mkfifo(q, 0600) == 0 && rs_elf_check_file(NULL, q) != RS_OK && strstr(rs_last_error(), "not a regular file"));
  remove(q);
  CHECK(rs_elf_check_file(NULL, dir) != RS_OK && strstr(rs_last_error(), "not a regular file"));
  snprintf(q, sizeof q, "%s/text.so", dir);
  o = fopen(q, "wb");
  if (o) {
    fputs("/* GNU ld script: the real library lies elsewhere */\nGROUP ( /usr/lib/libfoo.so.1 )\n", o);
    fclose(o);
  }
  CHECK(rs_elf_check_file(NULL, q) != RS_OK && strstr(rs_last_error(), "no ELF magic"));
  remove(q);
  snprintf(q, sizeof q, "%s/missing.so", dir);
  CHECK(rs_elf_check_file(NULL, q) == RS_ERR_IO);
  /* rs_elf_dlopen loads the checked descriptor; its refusals name the user's path, never /proc */
  void *h = NULL;
  CHECK(rs_elf_dlopen("--backend", p, RTLD_NOW | RTLD_LOCAL, &h) == RS_ERR_INVALID && !h); /* a PIE executable */
  snprintf(want, sizeof want, "--backend: '%s': cannot load: ", p);
  CHECK(strncmp(rs_last_error(), want, strlen(want)) == 0 && !strstr(rs_last_error(), "/proc/"));
  CHECK(symlink(p, q) == 0 && rs_elf_dlopen(NULL, q, RTLD_NOW, &h) != RS_OK && !h &&
        strstr(rs_last_error(), "symbolic link"));
  remove(q);
  Dl_info di;
  char real[PATH_MAX];
  if (dladdr((void *)&cos, &di) && di.dli_fname && realpath(di.dli_fname, real)) {
    CHECK(rs_elf_dlopen(NULL, real, RTLD_NOW | RTLD_LOCAL, &h) == RS_OK && h && dlsym(h, "cos"));
    if (h) dlclose(h);
  }
  remove(p);
  rmdir(dir);
  free(img);
}

/* A string holding \u0000: cJSON cuts it at the NUL ("w\u0000x" read as "w"), so rs_json_parse,
 * which every reader of reshard goes through, refuses it and names the field. */
static void test_json_nul(void) {
  static const struct {
    const char *text, *field;
  } bad[] = {
      {"{\"params\":[{\"name\":\"w\\u0000x\"}]}", "params[0].name"},
      {"{\"a\":{\"b\":[1,\"x\",\"\\u0000\"]}}", "a.b[2]"},
      {"{\"ok\":\"\\\\\",\"a\\u0000b\":1}", "key \"a\""},
      {"{\"m\":{\"\\u0000\":1}}", "m: a key"},
      {"\"\\u0000\"", "(top level)"},
      {"{\"a\":\"\\\\\\u0000\"}", "a: a string"}, /* an escaped backslash, then the NUL */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    cJSON *j = NULL;
    if (rs_json_parse(bad[i].text, &j) == RS_OK) {
      fprintf(stderr, "a NUL string accepted: %s\n", bad[i].text);
      rs_test_failures++;
      cJSON_Delete(j);
    } else if (!strstr(rs_last_error(), bad[i].field) || !strstr(rs_last_error(), "NUL")) {
      fprintf(stderr, "NUL message does not name %s: %s\n", bad[i].field, rs_last_error());
      rs_test_failures++;
    }
  }
  /* an escaped backslash before "u0000" is no NUL: kept as the 6 characters \u0000 */
  cJSON *j = NULL;
  CHECK(rs_json_parse("{\"a\":\"\\\\u0000\",\"b\":\"\\u0001\"}", &j) == RS_OK);
  CHECK(j && strcmp(cJSON_GetObjectItem(j, "a")->valuestring, "\\u0000") == 0);
  cJSON_Delete(j);
  /* the readers on top: a P2P model parameter, a case name, a state spec key */
  rs_p2p_model m;
  CHECK(rs_p2p_model_parse("{\"seed\":3,\"model\":{\"params\":[{\"name\":\"w\\u0000x\",\"shape\":[6],\"dtype\":\"F32\"}]},"
                           "\"src\":{\"meshes\":[{\"shape\":[2]}],\"params\":{\"w\":{\"mesh\":0,\"placements\":[\"S(0)\"]}}},"
                           "\"dst\":{\"meshes\":[{\"shape\":[2]}],\"params\":{\"w\":{\"mesh\":0,\"placements\":[\"R\"]}}}}",
                           &m) != RS_OK);
  CHECK(strstr(rs_last_error(), "model.params[0].name") != NULL);
  rs_case *c = malloc(sizeof *c);
  CHECK(c && rs_case_from_json("{\"name\":\"h\\u0000x\"," BASE_MESH ",\"tensor\":{\"shape\":[4],\"dtype\":\"F32\"},"
                               "\"src\":{\"placements\":[\"S(0)\"]},\"dst\":{\"placements\":[\"R\"]}}",
                               c) != RS_OK);
  CHECK(strstr(rs_last_error(), "name: a string holds") != NULL);
  free(c);
}

/* rs_parse_placements leaves the shard order empty (layout.h): validating before the order is
 * filled is refused with a message that names the call which fills it; after it, valid. */
static void test_parse_then_validate(void) {
  rs_sharding s;
  rs_mesh m;
  int64_t sz[2] = {2, 2};
  rs_tensor t = {RS_F32, 2, {7, 5}};
  CHECK(rs_mesh_init(&m, 2, sz, NULL) == RS_OK);
  CHECK(rs_parse_placements("S0,S(-1)", &s) == RS_OK);
  CHECK(rs_sharding_validate(&s, &m, &t) != RS_OK && strstr(rs_last_error(), "rs_sharding_set_default_order"));
  CHECK(rs_sharding_set_default_order(&s, t.ndim) == RS_OK && rs_sharding_validate(&s, &m, &t) == RS_OK);
  CHECK(s.p[1].dim == 1 && s.order_len[0] == 1 && s.order_len[1] == 1);
  CHECK(rs_parse_placements("S0,S0", &s) == RS_OK && rs_parse_order("0:1,0", &s, t.ndim) == RS_OK &&
        rs_sharding_validate(&s, &m, &t) == RS_OK && s.order[0][0] == 1);
}

int main(void) {
  test_messages();
  test_numflags();
  test_oom_outcome();
  test_elf_check();
  test_saved_failure();
  test_case_codec();
  test_text_syntax();
  test_expected();
  test_json_nul();
  test_parse_then_validate();
  test_fmt();
  test_nomem_code();
  TEST_DONE();
}
