/* test_core.c - unit tests of core/: splits, boxes, conversions, text syntax, JSON round trip,
 * step bookkeeping, exact values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "core/values.h"
#include "reshard/reshard.h"

static void test_split(void) {
  int64_t s, o;
  int64_t e6[4] = {2, 2, 2, 0}, e5[4] = {2, 2, 1, 0}, o5[4] = {0, 2, 4, 5};
  for (int i = 0; i < 4; ++i) {
    rs_split(6, 4, i, &s, &o);
    CHECK_EQ_I(s, e6[i]);
    rs_split(5, 4, i, &s, &o);
    CHECK_EQ_I(s, e5[i]);
    CHECK_EQ_I(o, o5[i]);
  }
  rs_split(0, 3, 2, &s, &o);
  CHECK_EQ_I(s, 0);
  /* torch.chunk leaves trailing chunks empty: 10 into 8 is 2,2,2,2,2,0,0,0, empties at the end */
  for (int i = 0; i < 8; ++i) {
    rs_split(10, 8, i, &s, &o);
    CHECK_EQ_I(s, i < 5 ? 2 : 0);
    CHECK_EQ_I(o, i < 5 ? 2 * i : 10);
  }
  /* the longest dim: chunk 2^61 (hand-computed), no intermediate overflow (a fuzzer found
   * (len + n - 1) / n overflowing here) */
  const int64_t big = INT64_MAX, q = (int64_t)1 << 61;
  for (int i = 0; i < 4; ++i) {
    rs_split(big, 4, i, &s, &o);
    CHECK_EQ_I(s, i < 3 ? q : q - 1);
    CHECK_EQ_I(o, q * i);
  }
  rs_split(big - 1, 3, 2, &s, &o); /* 2^63-2 = 3 * 3074457345618258602 exactly */
  CHECK_EQ_I(s, (big - 1) / 3);
  rs_split(big, 7, 6, &s, &o); /* 2^63-1 = 7 * 1317624576693539401 exactly */
  CHECK_EQ_I(s, big / 7);
  CHECK_EQ_I(o, big / 7 * 6);
  /* every split of a small dim against the definition: chunk c = ceil(len/n) taken in turn */
  for (int64_t len = 0; len <= 40; ++len)
    for (int64_t n = 1; n <= 12; ++n) {
      int64_t c = n > 0 ? (len + n - 1) / n : 0, at = 0, sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        int64_t want = len - at < c ? len - at : c;
        rs_split(len, n, i, &s, &o);
        CHECK_EQ_I(s, want);
        CHECK_EQ_I(o, at);
        at += want;
        sum += s;
      }
      CHECK_EQ_I(sum, len);
    }
}

static void layout_case(int64_t rows, const int64_t *exp_shape0, const int64_t *exp_off0) {
  rs_mesh m;
  int64_t sz[2] = {4, 2};
  CHECK(rs_mesh_init(&m, 2, sz, NULL) == RS_OK);
  rs_sharding s;
  CHECK(rs_parse_placements("S0,S0", &s) == RS_OK);
  rs_tensor t = {RS_F32, 2, {rows, 2}};
  CHECK(rs_sharding_set_default_order(&s, 2) == RS_OK);
  CHECK(rs_sharding_validate(&s, &m, &t) == RS_OK);
  for (int pos = 0; pos < 8; ++pos) {
    int64_t coord[RS_MAX_MESH_DIMS], shape[RS_MAX_DIMS], off[RS_MAX_DIMS];
    rs_mesh_coord(&m, pos, coord);
    rs_local_shape_offset(&m, &s, &t, coord, shape, off);
    CHECK_EQ_I(shape[0], exp_shape0[pos]);
    CHECK_EQ_I(off[0], exp_off0[pos]);
    CHECK_EQ_I(shape[1], 2);
    CHECK_EQ_I(off[1], 0);
  }
}

static void test_layouts(void) {
  int64_t s18[8] = {3, 2, 3, 2, 3, 2, 2, 1}, o18[8] = {0, 3, 5, 8, 10, 13, 15, 17};
  layout_case(18, s18, o18);
  int64_t s13[8] = {2, 2, 2, 2, 2, 2, 1, 0}, o13[8] = {0, 2, 4, 6, 8, 10, 12, 13};
  layout_case(13, s13, o13);
}

/* Every finite value of a small format survives the round trip, and the midpoint between two
 * neighbours rounds to the one with the even mantissa. */
static void test_conversions(void) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = rs_f16_to_f32((uint16_t)h);
    if (isnan(f)) continue;
    CHECK_EQ_I(rs_f32_to_f16(f), h);
    if ((h & 0x7FFF) < 0x7BFF) {
      float g = rs_f16_to_f32((uint16_t)(h + 1));
      float mid = (f + g) / 2; /* exact in F32 */
      uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
      CHECK_EQ_I(rs_f32_to_f16(mid), even);
    }
    float b = rs_bf16_to_f32((uint16_t)h);
    if (!isnan(b)) CHECK_EQ_I(rs_f32_to_bf16(b), h);
  }
  CHECK_EQ_I(rs_f32_to_bf16(NAN), 0x7FC0);
  CHECK_EQ_I(rs_f32_to_f16(65520.0f), 0x7C00);
  CHECK_EQ_I(rs_f32_to_f16(65519.0f), 0x7BFF);
  for (uint32_t v = 0; v < 256; ++v) {
    float f = rs_f8e4m3_to_f32((uint8_t)v);
    if (!isnan(f)) CHECK_EQ_I(rs_f32_to_f8e4m3(f), v);
    float g = rs_f8e5m2_to_f32((uint8_t)v);
    if (!isnan(g)) CHECK_EQ_I(rs_f32_to_f8e5m2(g), v);
  }
  CHECK(rs_f8e4m3_to_f32(0x7E) == 448.0f);
  CHECK(isnan(rs_f8e4m3_to_f32(0x7F)));
  CHECK_EQ_I(rs_f32_to_f8e4m3(1000.0f), 0x7F);
  CHECK(rs_f8e5m2_to_f32(0x7B) == 57344.0f);
  CHECK_EQ_I(rs_f32_to_f8e4m3(0.0013671875f), 0x01); /* smallest subnormal 2^-9 rounds up */
}

static void test_text_and_steps(void) {
  rs_sharding s;
  char buf[256];
  CHECK(rs_parse_placements("S0,S(0),S0", &s) == RS_OK);
  CHECK(rs_parse_order("0:1,0,2", &s, 3) == RS_OK);
  rs_format_sharding(&s, buf, sizeof buf);
  CHECK(strcmp(buf, "S(0)[1]S(0)[0]S(0)[2]") == 0);
  rs_format_order(&s, 3, buf, sizeof buf);
  CHECK(strcmp(buf, "0:1,0,2") == 0);
  CHECK(!rs_sharding_is_default_order(&s, 3));
  CHECK(rs_parse_placements("S0,P(avg),R,P", &s) == RS_OK);
  rs_format_sharding(&s, buf, sizeof buf);
  CHECK(strcmp(buf, "S(0)P(avg)RP(sum)") == 0);
  CHECK(rs_parse_placements("S0,,R", &s) != RS_OK);
  CHECK(rs_parse_placement("P(mean)", &s.p[0]) != RS_OK);
  CHECK(strstr(rs_last_error(), "P(mean)") != NULL);

  /* bookkeeping: S->R must take the last mesh dim of the list */
  CHECK(rs_parse_placements("S0,S0", &s) == RS_OK);
  CHECK(rs_sharding_set_default_order(&s, 2) == RS_OK);
  rs_step bad = {0, rs_pl_shard(0), rs_pl_replicate()};
  rs_sharding copy = s;
  CHECK(rs_sharding_apply_step(&copy, &bad, 2) == RS_ERR_ILLEGAL);
  rs_plan p = {2, {{1, rs_pl_shard(0), rs_pl_replicate()}, {0, rs_pl_shard(0), rs_pl_replicate()}}, RS_ENUM_SEED};
  CHECK(rs_plan_trace(NULL, &s, 2, &p, buf, sizeof buf) == RS_OK);
  CHECK(strcmp(buf, "S(0)[0]S(0)[1]->S(0)R->RR") == 0);
  rs_step sp = {0, rs_pl_shard(0), rs_pl_partial(RS_SUM)};
  rs_collective c;
  CHECK(rs_step_collective(&sp, &c) == RS_ERR_UNSUPPORTED);
}

static void test_json(void) {
  const char *text =
      "{\"name\":\"t\",\"mesh\":{\"shape\":[2,3],\"ranks\":[5,4,3,2,1,0]},"
      "\"tensor\":{\"shape\":[7,5],\"dtype\":\"BF16\"},"
      "\"src\":{\"placements\":[\"S(0)\",\"S(0)\"],\"shard_order\":[{\"tensor_dim\":0,\"mesh_dims\":[1,0]}]},"
      "\"dst\":{\"placements\":[\"R\",\"S(-1)\"]},\"seed\":\"18446744073709551615\",\"planner\":\"graph\"}";
  rs_case c, d;
  CHECK(rs_case_from_json(text, &c) == RS_OK);
  CHECK(c.seed == UINT64_MAX);
  CHECK_EQ_I(c.dst.p[1].dim, 1);
  CHECK_EQ_I(c.src.order[0][0], 1);
  CHECK(c.values == RS_VALUES_BITS);
  char *j = rs_case_to_json(&c);
  CHECK(j && rs_case_from_json(j, &d) == RS_OK);
  char *j2 = rs_case_to_json(&d);
  CHECK(j2 && strcmp(j, j2) == 0);
  free(j);
  free(j2);
  CHECK(rs_case_from_json("{\"mesh\":{\"shape\":[2]},\"tensor\":{\"shape\":[4],\"dtype\":\"F7\"}}", &c) ==
        RS_ERR_INVALID);
  CHECK(strstr(rs_last_error(), "dtype") != NULL);
  CHECK(rs_case_from_json("{\"mesh\":{\"shape\":[2],\"ranks\":[0]},\"tensor\":{\"shape\":[4],\"dtype\":\"F32\"}}",
                          &c) == RS_ERR_INVALID);
  CHECK(strstr(rs_last_error(), "mesh.ranks") != NULL);
  CHECK(rs_case_from_json("{\"mesh\":{\"shape\":[2]},\"tensor\":{\"shape\":[4611686018427387904,4],"
                          "\"dtype\":\"F32\"},\"src\":{\"placements\":[\"R\"]},\"dst\":{\"placements\":[\"R\"]}}",
                          &c) == RS_ERR_OVERFLOW);
  CHECK(rs_case_from_json("{\"mesh\":{\"shape\":[2]},\"tensor\":{\"shape\":[4],\"dtype\":\"F8_E4M3\"},"
                          "\"src\":{\"placements\":[\"P\"]},\"dst\":{\"placements\":[\"R\"]}}",
                          &c) == RS_ERR_INVALID);
  CHECK(rs_case_from_json("{not json", &c) == RS_ERR_INVALID);
}

/* Source pieces of Partial dims reduce to the global value exactly, for every dtype and op. */
static void test_exact_pieces(void) {
  const char *ops[] = {"P(sum)", "P(avg)", "P(min)", "P(max)"};
  rs_dtype dts[] = {RS_F64, RS_F32, RS_F16, RS_BF16, RS_I64, RS_I32, RS_I16, RS_I8, RS_U8};
  for (int oi = 0; oi < 4; ++oi)
    for (unsigned di = 0; di < sizeof dts / sizeof dts[0]; ++di) {
      rs_case c;
      memset(&c, 0, sizeof c);
      int64_t sz[2] = {3, 4};
      CHECK(rs_mesh_init(&c.mesh, 2, sz, NULL) == RS_OK);
      c.tensor.dtype = dts[di];
      c.tensor.ndim = 1;
      c.tensor.shape[0] = 50;
      char pl[64];
      snprintf(pl, sizeof pl, "%s,%s", ops[oi], ops[oi]);
      CHECK(rs_parse_placements(pl, &c.src) == RS_OK);
      CHECK(rs_parse_placements("R,R", &c.dst) == RS_OK);
      rs_sharding_set_default_order(&c.src, 1);
      rs_sharding_set_default_order(&c.dst, 1);
      c.values = RS_VALUES_EXACT;
      c.seed = 42 + di;
      /* A dtype too narrow for exact values on 12 ranks (I8 avg) is refused, never zero-filled. */
      if (rs_case_check_values(&c) != RS_OK) {
        CHECK(dts[di] == RS_I8 || dts[di] == RS_U8 || dts[di] == RS_BF16);
        CHECK(rs_case_validate(&c) == RS_ERR_UNSUPPORTED);
        continue;
      }
      CHECK(rs_case_validate(&c) == RS_OK);
      rs_locals exp;
      CHECK(rs_oracle_expected(&c, &c.dst, &exp) == RS_OK);
      int es = rs_dtype_size(c.tensor.dtype);
      int nonzero = 0;
      for (int64_t i = 0; i < 50; ++i) {
        char g[8];
        rs_value_global(&c, i, g);
        CHECK(memcmp(g, (char *)exp.r[0].data + i * es, (size_t)es) == 0);
        for (int k = 0; k < es; ++k) nonzero |= g[k] != 0;
      }
      CHECK(nonzero);
      rs_locals_free(&exp);
    }
}

/* SPEC 1 arithmetic: integers wrap, F16/BF16 round after every op, min/max, division truncates. */
static void test_arith(void) {
  int8_t a8[3] = {127, -128, 5}, b8[3] = {1, -1, -7};
  rs_arith_fold(RS_I8, RS_SUM, a8, b8, 3);
  CHECK_EQ_I(a8[0], -128);
  CHECK_EQ_I(a8[1], 127);
  CHECK_EQ_I(a8[2], -2);
  uint8_t u[2] = {255, 3}, v[2] = {1, 9};
  rs_arith_fold(RS_U8, RS_SUM, u, v, 2);
  CHECK_EQ_I(u[0], 0);
  CHECK_EQ_I(u[1], 12);
  int64_t l[1] = {INT64_MAX}, m[1] = {1};
  rs_arith_fold(RS_I64, RS_SUM, l, m, 1);
  CHECK(l[0] == INT64_MIN);
  int32_t x[2] = {-7, 7}, y[2] = {3, 9};
  rs_arith_fold(RS_I32, RS_MIN, x, y, 2);
  CHECK_EQ_I(x[0], -7);
  CHECK_EQ_I(x[1], 7);
  rs_arith_fold(RS_I32, RS_MAX, x, y, 2);
  CHECK_EQ_I(x[0], 3);
  CHECK_EQ_I(x[1], 9);
  rs_arith_div(RS_I32, x, 2, 2);
  CHECK_EQ_I(x[0], 1);
  CHECK_EQ_I(x[1], 4);
  int16_t n16[1] = {-7};
  rs_arith_div(RS_I16, n16, 2, 1);
  CHECK_EQ_I(n16[0], -3); /* truncation toward zero */
  /* F16: 2048 + 1 is not representable; it rounds to even (2048) after the op */
  uint16_t h[1] = {rs_f32_to_f16(2048.0f)}, one[1] = {rs_f32_to_f16(1.0f)};
  rs_arith_fold(RS_F16, RS_SUM, h, one, 1);
  CHECK(rs_f16_to_f32(h[0]) == 2048.0f);
  uint16_t bb[1] = {rs_f32_to_bf16(256.0f)}, b3[1] = {rs_f32_to_bf16(3.0f)};
  rs_arith_fold(RS_BF16, RS_SUM, bb, b3, 1);
  CHECK(rs_bf16_to_f32(bb[0]) == 260.0f); /* 259 rounds to 260 (ties to even on the 2-ulp grid) */
  double d[1] = {1.0}, e[1] = {-0.0};
  rs_arith_fold(RS_F64, RS_MAX, d, e, 1);
  CHECK(d[0] == 1.0);
  float f[1] = {6.0f};
  rs_arith_div(RS_F32, f, 4, 1);
  CHECK(f[0] == 1.5f);
}

int main(void) {
  test_split();
  test_arith();
  test_layouts();
  test_conversions();
  test_text_and_steps();
  test_json();
  test_exact_pieces();
  TEST_DONE();
}
