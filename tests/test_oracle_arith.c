/* test_oracle_arith.c - SPEC 1, 2 and 4 against values computed by hand, for core/ (what ref and
 * opt use) and for the oracle's own formulation (oracle/arith.c) alike. ref, opt and the oracle
 * would share a bug of one implementation of this arithmetic; two implementations held to one
 * table of hand-computed answers cannot. Every tie below is one where rounding up and rounding to
 * even give different bits. */
#include <math.h>
#include <string.h>
#include "check.h"
#include "core/values.h"
#include "oracle/arith.h"
#include "reshard/layout.h"

static float f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint32_t u32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

#define CHECK_HEX(got, want, what)                                                                \
  do {                                                                                            \
    unsigned long long g_ = (unsigned long long)(got), w_ = (unsigned long long)(want);           \
    if (g_ != w_) {                                                                               \
      fprintf(stderr, "%s:%d: %s: 0x%llx, expected 0x%llx\n", __FILE__, __LINE__, what, g_, w_); \
      rs_test_failures++;                                                                         \
    }                                                                                             \
  } while (0)

/* F32 bits -> BF16 / F16 bits, worked out by hand. */
static const struct { uint32_t in; uint16_t bf16, f16; const char *why; } CONV[] = {
    {0x3F808000, 0x3F80, 0x3C04, "1+2^-8: BF16 tie, even is down (up would be 0x3F81)"},
    {0x3F818000, 0x3F82, 0x3C0C, "1+3*2^-8: BF16 tie, even is up"},
    {0x3F808001, 0x3F81, 0x3C04, "just above the BF16 tie"},
    {0x3F807FFF, 0x3F80, 0x3C04, "just below the BF16 tie"},
    {0xBF808000, 0xBF80, 0xBC04, "negative BF16 tie"},
    {0x3F801000, 0x3F80, 0x3C00, "1+2^-11: F16 tie, even is down (up would be 0x3C01)"},
    {0x3F803000, 0x3F80, 0x3C02, "1+3*2^-11: F16 tie, even is up"},
    {0x00008000, 0x0000, 0x0000, "F32 subnormal on a BF16 tie: even is 0"},
    {0x00018000, 0x0002, 0x0000, "F32 subnormal 3*2^-150 quanta: BF16 tie up to even"},
    {0x00010001, 0x0001, 0x0000, "F32 subnormal above a BF16 quantum"},
    {0x33800000, 0x3380, 0x0001, "2^-24: smallest F16 subnormal"},
    {0x33000000, 0x3300, 0x0000, "2^-25: F16 tie between 0 and 2^-24, even is 0"},
    {0x33C00000, 0x33C0, 0x0002, "3*2^-25: F16 tie between 1 and 2 quanta, even is 2"},
    {0x33000001, 0x3300, 0x0001, "just above 2^-25"},
    {0x387FE000, 0x3880, 0x0400, "1023.5*2^-24: F16 subnormal tie rounds into the smallest normal"},
    {0x477FE000, 0x4780, 0x7BFF, "65504: F16 max"},
    {0x477FF000, 0x4780, 0x7C00, "65520: F16 tie between max and overflow, even is Inf"},
    {0x477FEFFF, 0x4780, 0x7BFF, "just below 65520"},
    {0x7F7F8000, 0x7F80, 0x7C00, "BF16 tie at the top: even is Inf"},
    {0x7F7F7FFF, 0x7F7F, 0x7C00, "BF16 max"},
    {0x80000000, 0x8000, 0x8000, "-0"},
    {0x7F800000, 0x7F80, 0x7C00, "Inf"},
    {0xFF800000, 0xFF80, 0xFC00, "-Inf"},
    {0x7FC00001, 0x7FC0, 0x7E00, "quiet NaN with payload: BF16 0x7FC0 (SPEC 1), F16 quiet"},
    {0x7FA00000, 0x7FC0, 0x7F00, "signalling NaN: F16 keeps payload bits, quieted"},
    {0xFFC00001, 0x7FC0, 0xFE00, "negative NaN: BF16 0x7FC0, F16 keeps the sign"},
};

static void test_conversions(void) {
  for (unsigned i = 0; i < sizeof CONV / sizeof CONV[0]; i++) {
    float f = f32(CONV[i].in);
    CHECK_HEX(rs_f32_to_bf16(f), CONV[i].bf16, CONV[i].why);
    CHECK_HEX(rs__oracle_f32_to_bf16(f), CONV[i].bf16, CONV[i].why);
    CHECK_HEX(rs_f32_to_f16(f), CONV[i].f16, CONV[i].why);
    CHECK_HEX(rs__oracle_f32_to_f16(f), CONV[i].f16, CONV[i].why);
  }
  /* decodings */
  static const struct { uint16_t h; uint32_t f; } F16D[] = {
      {0x0001, 0x33800000}, {0x03FF, 0x387FC000}, {0x0400, 0x38800000}, {0x3C00, 0x3F800000},
      {0x7BFF, 0x477FE000}, {0x8000, 0x80000000}, {0xFC00, 0xFF800000}, {0xC000, 0xC0000000}};
  for (unsigned i = 0; i < sizeof F16D / sizeof F16D[0]; i++) {
    CHECK_HEX(u32(rs_f16_to_f32(F16D[i].h)), F16D[i].f, "F16 -> F32");
    CHECK_HEX(u32((float)rs__oracle_f16_to_double(F16D[i].h)), F16D[i].f, "oracle F16 -> F32");
  }
  static const uint16_t BFD[] = {0x0001, 0x007F, 0x0080, 0x3F80, 0x7F7F, 0x8001, 0xFF80};
  for (unsigned i = 0; i < sizeof BFD / sizeof BFD[0]; i++) {
    CHECK_HEX(u32(rs_bf16_to_f32(BFD[i])), (uint32_t)BFD[i] << 16, "BF16 -> F32");
    CHECK_HEX(u32((float)rs__oracle_bf16_to_double(BFD[i])), (uint32_t)BFD[i] << 16, "oracle BF16 -> F32");
  }
}

/* One op through core's vector fold and the oracle's element op: both must give `want`. */
static void op_case(rs_dtype t, rs_redop op, uint64_t a, uint64_t b, uint64_t want, const char *why) {
  int es = rs_dtype_size(t);
  unsigned char x[8] = {0}, y[8] = {0}, z[8] = {0};
  memcpy(x, &a, (size_t)es);
  memcpy(y, &b, (size_t)es);
  memcpy(z, &a, (size_t)es);
  rs_arith_fold(t, op, x, y, 1);
  rs__oracle_op(t, op, z, y);
  uint64_t gx = 0, gz = 0;
  memcpy(&gx, x, (size_t)es);
  memcpy(&gz, z, (size_t)es);
  CHECK_HEX(gx, want, why);
  CHECK_HEX(gz, want, why);
}

static void div_case(rs_dtype t, uint64_t a, int64_t d, uint64_t want, const char *why) {
  int es = rs_dtype_size(t);
  unsigned char x[8] = {0}, z[8] = {0};
  memcpy(x, &a, (size_t)es);
  memcpy(z, &a, (size_t)es);
  rs_arith_div(t, x, d, 1);
  rs__oracle_div(t, z, d);
  uint64_t gx = 0, gz = 0;
  memcpy(&gx, x, (size_t)es);
  memcpy(&gz, z, (size_t)es);
  CHECK_HEX(gx, want, why);
  CHECK_HEX(gz, want, why);
}

static void test_arith(void) {
  /* halves: the sum runs in F32 and is rounded back with ties to even */
  op_case(RS_BF16, RS_SUM, 0x3F80, 0x3B80, 0x3F80, "BF16 1 + 2^-8: tie, even is 1 (ties-up gives 0x3F81)");
  op_case(RS_BF16, RS_SUM, 0x3F81, 0x3B80, 0x3F82, "BF16 (1+2^-7) + 2^-8: tie, even is up");
  op_case(RS_BF16, RS_SUM, 0x7F7F, 0x7F7F, 0x7F80, "BF16 max + max = Inf");
  op_case(RS_F16, RS_SUM, 0x3C00, 0x1000, 0x3C00, "F16 1 + 2^-11: tie, even is 1");
  op_case(RS_F16, RS_SUM, 0x3C01, 0x1000, 0x3C02, "F16 (1+2^-10) + 2^-11: tie, even is up");
  op_case(RS_F16, RS_SUM, 0x7BFF, 0x7BFF, 0x7C00, "F16 overflow to Inf");
  op_case(RS_F16, RS_SUM, 0x0001, 0x0001, 0x0002, "F16 subnormals add exactly");
  op_case(RS_F16, RS_SUM, 0x8001, 0x0001, 0x0000, "F16 x + -x = +0");
  op_case(RS_F16, RS_SUM, 0x7D01, 0x3C00, 0x7F01, "F16 signalling NaN + 1: quieted, payload kept");
  op_case(RS_F16, RS_SUM, 0x3C00, 0xFE05, 0xFE05, "F16 1 + negative NaN: the NaN's sign and payload");
  op_case(RS_F32, RS_SUM, 0x3F800000, 0x33800000, 0x3F800000, "F32 1 + 2^-24: tie, even is 1");
  op_case(RS_F32, RS_SUM, 0x3F800001, 0x33800000, 0x3F800002, "F32 tie, even is up");
  op_case(RS_F64, RS_SUM, 0x3FF0000000000000ull, 0x3CA0000000000000ull, 0x3FF0000000000000ull, "F64 1 + 2^-53: tie");
  /* min/max: strict comparison keeps the accumulator on ties (+0/-0) and keeps a NaN accumulator */
  op_case(RS_F32, RS_MAX, 0x00000000, 0x80000000, 0x00000000, "max(+0, -0) keeps +0");
  op_case(RS_F32, RS_MAX, 0x80000000, 0x00000000, 0x80000000, "max(-0, +0) keeps -0");
  op_case(RS_F32, RS_MIN, 0x3F800000, 0x7FC00123, 0x3F800000, "min(1, NaN) = 1");
  op_case(RS_F32, RS_MIN, 0x7FC00123, 0x3F800000, 0x7FC00123, "min(NaN, 1) keeps the NaN payload");
  op_case(RS_BF16, RS_MIN, 0x7FC1, 0x3F80, 0x7FC0, "BF16 min(NaN, 1): through F32, back as 0x7FC0");
  op_case(RS_F16, RS_MAX, 0xC000, 0x8001, 0x8001, "F16 max(-2, -2^-24)");
  op_case(RS_BF16, RS_MIN, 0x0001, 0x8001, 0x8001, "BF16 min of subnormals");
  op_case(RS_BF16, RS_MAX, 0xBF80, 0x8000, 0x8000, "BF16 max(-1, -0) = -0");
  op_case(RS_BF16, RS_MAX, 0x0000, 0x8000, 0x0000, "BF16 max(+0, -0) keeps +0");
  op_case(RS_F16, RS_MIN, 0x0000, 0x8000, 0x0000, "F16 min(+0, -0) keeps +0 (no sign preference)");
  op_case(RS_F16, RS_MIN, 0x7BFF, 0xFBFF, 0xFBFF, "F16 min(max, -max)");
  op_case(RS_F64, RS_MIN, 0x0000000000000001ull, 0x8000000000000001ull, 0x8000000000000001ull, "F64 min of subnormals");
  op_case(RS_F64, RS_MAX, 0x7FEFFFFFFFFFFFFFull, 0x7FF0000000000000ull, 0x7FF0000000000000ull, "F64 max(max, Inf)");
  op_case(RS_F64, RS_MAX, 0x7FF8000000000123ull, 0x3FF0000000000000ull, 0x7FF8000000000123ull, "F64 max(NaN, 1) keeps the NaN payload");
  op_case(RS_F32, RS_MAX, 0xFF800000, 0xFF7FFFFF, 0xFF7FFFFF, "F32 max(-Inf, -max)");
  /* integers: wrap, signed and unsigned min/max at the extremes of every width */
  op_case(RS_I8, RS_SUM, 0x64, 0x64, 0xC8, "I8 100 + 100 wraps to -56");
  op_case(RS_I8, RS_SUM, 0x80, 0xFF, 0x7F, "I8 -128 + -1 wraps to 127");
  op_case(RS_U8, RS_SUM, 0xC8, 0x64, 0x2C, "U8 200 + 100 wraps to 44");
  op_case(RS_I16, RS_SUM, 0x7FFF, 0x0001, 0x8000, "I16 max + 1 = min");
  op_case(RS_I32, RS_SUM, 0x7FFFFFFF, 0x1, 0x80000000, "I32 max + 1 = min");
  op_case(RS_I64, RS_SUM, 0x7FFFFFFFFFFFFFFFull, 0x1, 0x8000000000000000ull, "I64 max + 1 = min");
  op_case(RS_U8, RS_MIN, 0xC8, 0x64, 0x64, "U8 min(200, 100) = 100 (signed would say 200)");
  op_case(RS_U8, RS_MAX, 0x64, 0xC8, 0xC8, "U8 max(100, 200) = 200");
  op_case(RS_U8, RS_MIN, 0xFF, 0x00, 0x00, "U8 min(255, 0)");
  op_case(RS_U8, RS_MAX, 0x00, 0xFF, 0xFF, "U8 max(0, 255)");
  op_case(RS_I8, RS_MIN, 0x7F, 0x80, 0x80, "I8 min(127, -128)");
  op_case(RS_I8, RS_MAX, 0x80, 0x7F, 0x7F, "I8 max(-128, 127)");
  op_case(RS_I16, RS_MIN, 0x7FFF, 0x8000, 0x8000, "I16 min(max, min)");
  op_case(RS_I16, RS_MAX, 0x8000, 0x7FFF, 0x7FFF, "I16 max(min, max)");
  op_case(RS_I32, RS_MIN, 0x7FFFFFFF, 0x80000000, 0x80000000, "I32 min(max, min)");
  op_case(RS_I32, RS_MAX, 0x80000000, 0x7FFFFFFF, 0x7FFFFFFF, "I32 max(min, max)");
  op_case(RS_I64, RS_MIN, 0x7FFFFFFFFFFFFFFFull, 0x8000000000000000ull, 0x8000000000000000ull, "I64 min");
  op_case(RS_I64, RS_MAX, 0x8000000000000000ull, 0x7FFFFFFFFFFFFFFFull, 0x7FFFFFFFFFFFFFFFull, "I64 max");
  /* division: once, SPEC 1 arithmetic; integers truncate toward zero */
  div_case(RS_F32, 0x3F800000, 3, 0x3EAAAAAB, "F32 1/3");
  div_case(RS_BF16, 0x3F80, 3, 0x3EAB, "BF16 1/3 through F32");
  div_case(RS_F16, 0x3C00, 3, 0x3555, "F16 1/3 through F32");
  div_case(RS_F16, 0x0001, 2, 0x0000, "F16 2^-24 / 2: tie, even is 0");
  div_case(RS_F16, 0x0003, 2, 0x0002, "F16 3*2^-24 / 2: tie, even is 2");
  div_case(RS_BF16, 0x3F81, 2, 0x3F01, "BF16 exact halving");
  div_case(RS_I8, 0xF9, 2, 0xFD, "I8 -7 / 2 = -3");
  div_case(RS_I8, 0x80, 3, 0xD6, "I8 -128 / 3 = -42");
  div_case(RS_U8, 0xFF, 2, 0x7F, "U8 255 / 2 = 127");
  div_case(RS_I32, 0x80000000, 2, 0xC0000000, "I32 min / 2");
  div_case(RS_I64, 0x8000000000000000ull, 3, 0xD555555555555556ull, "I64 min / 3 truncates");
  div_case(RS_I16, 0x8000, 7, 0xEDB7, "I16 -32768 / 7 = -4681");
}

/* SPEC 2 by hand: a 2x3x4 mesh, row-major (last dim fastest). */
static void test_coords(void) {
  int64_t sz[3] = {2, 3, 4};
  rs_mesh m;
  CHECK(rs_mesh_init(&m, 3, sz, NULL) == RS_OK);
  static const struct { int pos; int64_t c[RS_MAX_MESH_DIMS]; } T[] = {
      {0, {0, 0, 0}}, {1, {0, 0, 1}}, {3, {0, 0, 3}}, {4, {0, 1, 0}}, {11, {0, 2, 3}},
      {12, {1, 0, 0}}, {17, {1, 1, 1}}, {23, {1, 2, 3}}};
  for (unsigned i = 0; i < sizeof T / sizeof T[0]; i++) {
    int64_t a[RS_MAX_MESH_DIMS] = {0}, b[RS_MAX_MESH_DIMS] = {0};
    rs_mesh_coord(&m, T[i].pos, a);
    rs__oracle_coord(&m, T[i].pos, b);
    for (int d = 0; d < 3; d++) {
      CHECK_EQ_I(a[d], T[i].c[d]);
      CHECK_EQ_I(b[d], T[i].c[d]);
    }
    CHECK_EQ_I(rs_mesh_pos(&m, T[i].c), T[i].pos);
  }
  int64_t sz2[2] = {3, 2};
  CHECK(rs_mesh_init(&m, 2, sz2, NULL) == RS_OK);
  int64_t a[RS_MAX_MESH_DIMS] = {0}, b[RS_MAX_MESH_DIMS] = {0};
  rs_mesh_coord(&m, 3, a);
  rs__oracle_coord(&m, 3, b);
  CHECK(a[0] == 1 && a[1] == 1 && b[0] == 1 && b[1] == 1);
  rs_mesh_coord(&m, 4, a);
  rs__oracle_coord(&m, 4, b);
  CHECK(a[0] == 2 && a[1] == 0 && b[0] == 2 && b[1] == 0);
  /* a rank's coordinate is its position in the mesh's rank list, unravelled: 2x2 over [3,1,0,2]
   * puts rank 0 at position 2 = (1,0) and rank 3 at position 0 = (0,0) */
  int64_t sz22[2] = {2, 2};
  int32_t ranks[4] = {3, 1, 0, 2};
  CHECK(rs_mesh_init(&m, 2, sz22, ranks) == RS_OK);
  CHECK_EQ_I(rs_mesh_pos_of_rank(&m, 0), 2);
  CHECK_EQ_I(rs_mesh_pos_of_rank(&m, 3), 0);
  rs_mesh_coord(&m, rs_mesh_pos_of_rank(&m, 0), a);
  rs__oracle_coord(&m, rs_mesh_pos_of_rank(&m, 0), b);
  CHECK(a[0] == 1 && a[1] == 0 && b[0] == 1 && b[1] == 0);
  rs_mesh_coord(&m, rs_mesh_pos_of_rank(&m, 2), a);
  rs__oracle_coord(&m, rs_mesh_pos_of_rank(&m, 2), b);
  CHECK(a[0] == 1 && a[1] == 1 && b[0] == 1 && b[1] == 1);
}

/* SPEC 4 by hand: 6 over 4 = 2,2,2,0; 5 over 4 = 2,2,1,0; 13 over (4 then 2). */
static void test_boxes(void) {
  rs_mesh m;
  int64_t s4[1] = {4};
  CHECK(rs_mesh_init(&m, 1, s4, NULL) == RS_OK);
  rs_tensor t = {RS_F32, 1, {6}};
  rs_sharding s;
  CHECK(rs_parse_placements("S0", &s) == RS_OK);
  CHECK(rs_sharding_set_default_order(&s, 1) == RS_OK);
  static const int64_t six_size[4] = {2, 2, 2, 0}, six_start[4] = {0, 2, 4, 6};
  static const int64_t five_size[4] = {2, 2, 1, 0}, five_start[4] = {0, 2, 4, 5};
  for (int i = 0; i < 4; i++) {
    int64_t c[RS_MAX_MESH_DIMS] = {i}, st[RS_MAX_DIMS], sz[RS_MAX_DIMS], ost[RS_MAX_DIMS], osz[RS_MAX_DIMS];
    t.shape[0] = 6;
    rs_local_box(&m, &s, &t, c, st, sz);
    rs__oracle_box(&m, &s, &t, c, ost, osz);
    CHECK(sz[0] == six_size[i] && st[0] == six_start[i] && osz[0] == six_size[i] && ost[0] == six_start[i]);
    t.shape[0] = 5;
    rs_local_box(&m, &s, &t, c, st, sz);
    rs__oracle_box(&m, &s, &t, c, ost, osz);
    CHECK(sz[0] == five_size[i] && st[0] == five_start[i] && osz[0] == five_size[i] && ost[0] == five_start[i]);
  }
  int64_t s42[2] = {4, 2};
  CHECK(rs_mesh_init(&m, 2, s42, NULL) == RS_OK);
  t.shape[0] = 13;
  CHECK(rs_parse_placements("S0,S0", &s) == RS_OK);
  CHECK(rs_sharding_set_default_order(&s, 1) == RS_OK);
  /* 13 over 4: 4,4,4,1 at 0,4,8,12; then over 2: (1,1) -> 4 + 2 = 6 size 2; (3,0) -> 12 size 1;
   * (3,1) -> 1 over 2 gives 1,0: empty at 12 + 1 = 13 */
  static const struct { int64_t c0, c1, start, size; } B[] = {{0, 0, 0, 2}, {1, 1, 6, 2}, {3, 0, 12, 1}, {3, 1, 13, 0}};
  for (unsigned i = 0; i < sizeof B / sizeof B[0]; i++) {
    int64_t c[RS_MAX_MESH_DIMS] = {B[i].c0, B[i].c1}, st[RS_MAX_DIMS], sz[RS_MAX_DIMS], ost[RS_MAX_DIMS], osz[RS_MAX_DIMS];
    rs_local_box(&m, &s, &t, c, st, sz);
    rs__oracle_box(&m, &s, &t, c, ost, osz);
    CHECK_EQ_I(sz[0], B[i].size);
    CHECK_EQ_I(osz[0], B[i].size);
    CHECK_EQ_I(st[0], B[i].start);
    CHECK_EQ_I(ost[0], B[i].start);
  }
}

int main(void) {
  test_conversions();
  test_arith();
  test_coords();
  test_boxes();
  TEST_DONE();
}
