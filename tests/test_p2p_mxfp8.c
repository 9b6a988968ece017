/* test_p2p_mxfp8.c - SPEC 10's MXFP8 transform on blocks computed by hand, for each of the three
 * quantizers (core's plain reference used by ref/, opt's integer one shared with the CUDA kernel,
 * the oracle's table search): amax 0, exact ties, E4M3 subnormals, the clamped exponent, the 448
 * boundary, NaN/Inf and size errors naming the parameter and block. */
#include <string.h>
#include "check.h"
#include "reshard/p2p.h"

typedef rs_status (*quant_fn)(const uint16_t *, int64_t, uint8_t *, uint8_t *, const char *);

typedef struct hand {
  const char *what;
  uint16_t x[4]; /* the first elements of the block; the rest are +0 */
  uint8_t scale;
  uint8_t q[4];
} hand;

static const hand HAND[] = {
    /* amax 0: e = 0, -0 keeps its sign */
    {"zeros", {0x0000, 0x8000, 0x0000, 0x8000}, 127, {0x00, 0x80, 0x00, 0x80}},
    /* amax = 448 exactly: e = 0; 448 -> 0x7E, 1.0 -> 0x38 */
    {"448 boundary", {0x43E0, 0x3F80, 0xC3E0, 0x0000}, 127, {0x7E, 0x38, 0xFE, 0x00}},
    /* amax = 450 (the next BF16): e = 1; 450/2 = 225 -> 224 (0x76); 448/2 = 224 */
    {"just above 448", {0x43E1, 0x43E0, 0x3F80, 0x0000}, 128, {0x76, 0x76, 0x30, 0x00}},
    /* ties with e = 0: 1.0625 -> 1.0 (even), 1.1875 -> 1.25 (even), -1.0625 -> -1.0 */
    {"exact ties", {0x43E0, 0x3F88, 0x3F98, 0xBF88}, 127, {0x7E, 0x38, 0x3A, 0xB8}},
    /* E4M3 subnormals (e = 0): 2^-8 -> 2 units; 1.5*2^-9 ties to 2; 2^-10 ties to 0; 15*2^-10 ties up
     * to the smallest normal 2^-6 (code 8) */
    {"subnormals", {0x43E0, 0x3B80, 0x3B40, 0x3A80}, 127, {0x7E, 0x02, 0x02, 0x00}},
    {"subnormal to normal", {0x43E0, 0x3C70, 0x3AC0, 0x0000}, 127, {0x7E, 0x08, 0x01, 0x00}},
    /* tiny amax: e clamps at -127 (scale byte 0); 2^-133 / 2^-127 = 2^-6 -> code 8; 2^-120 -> 128 */
    {"clamped exponent", {0x0001, 0x0000, 0x0000, 0x0000}, 0, {0x08, 0x00, 0x00, 0x00}},
    {"clamped exponent 2", {0x0380, 0x0001, 0x0000, 0x0000}, 0, {0x70, 0x08, 0x00, 0x00}},
    /* huge amax: 2^127 -> e = 119, element 2^8 -> 0x78 */
    {"large exponent", {0x7F00, 0x3F80, 0x0000, 0x0000}, 246, {0x78, 0x00, 0x00, 0x00}},
    /* amax = 1.0: e = -8 (1 <= 448 * 2^-8 = 1.75), 1.0 -> 256 -> 0x78 */
    {"amax one", {0x3F80, 0xBF80, 0x3F00, 0x0000}, 119, {0x78, 0xF8, 0x70, 0x00}},
};

static void check_fn(const char *name, quant_fn f) {
  for (size_t k = 0; k < sizeof HAND / sizeof HAND[0]; ++k) {
    uint16_t x[32] = {0};
    uint8_t q[32], s = 0xAA;
    memcpy(x, HAND[k].x, sizeof HAND[k].x);
    rs_status st = f(x, 32, q, &s, "w");
    if (st || s != HAND[k].scale || memcmp(q, HAND[k].q, 4)) {
      fprintf(stderr, "%s: block '%s': status %d scale %u (want %u) q %02x %02x %02x %02x (want %02x %02x %02x %02x)\n",
              name, HAND[k].what, (int)st, s, HAND[k].scale, q[0], q[1], q[2], q[3], HAND[k].q[0], HAND[k].q[1],
              HAND[k].q[2], HAND[k].q[3]);
      rs_test_failures++;
    }
    for (int i = 4; i < 32; ++i) CHECK_EQ_I(q[i], 0);
  }
  /* NaN and Inf name the parameter and the block */
  uint16_t x[64] = {0};
  uint8_t q[64], s[2];
  x[40] = 0x7FC0;
  CHECK(f(x, 64, q, s, "layers.3.mlp.fc1.weight") == RS_ERR_INVALID);
  CHECK(strstr(rs_last_error(), "layers.3.mlp.fc1.weight") && strstr(rs_last_error(), "block 1"));
  x[40] = 0xFF80; /* -Inf */
  CHECK(f(x, 64, q, s, "p") == RS_ERR_INVALID);
  CHECK(f(x, 48, q, s, "odd.param") == RS_ERR_INVALID);
  CHECK(strstr(rs_last_error(), "odd.param") != NULL);
}

/* every BF16 pattern in a block against the others (the three quantizers agree bit for bit) */
static void check_agree(quant_fn a, quant_fn b, const char *what) {
  for (uint32_t base = 0; base < 0x10000; base += 32) {
    uint16_t x[32];
    uint8_t qa[32], qb[32], sa, sb;
    for (int i = 0; i < 32; ++i) {
      uint16_t v = (uint16_t)(base + (uint32_t)i);
      x[i] = (v & 0x7F80) == 0x7F80 ? (uint16_t)(v & ~0x4000) : v;
    }
    rs_status s1 = a(x, 32, qa, &sa, "x"), s2 = b(x, 32, qb, &sb, "x");
    if (s1 || s2 || sa != sb || memcmp(qa, qb, 32)) {
      fprintf(stderr, "%s: block at 0x%04x differs\n", what, base);
      rs_test_failures++;
      return;
    }
  }
}

int main(void) {
  check_fn("ref", rs_mxfp8_quantize_ref);
  check_fn("oracle", rs_p2p_oracle_mxfp8);
#ifdef RS_HAVE_OPT
  check_fn("opt", rs_mxfp8_quantize_opt);
  check_agree(rs_mxfp8_quantize_opt, rs_p2p_oracle_mxfp8, "opt vs oracle");
#endif
  check_agree(rs_mxfp8_quantize_ref, rs_p2p_oracle_mxfp8, "ref vs oracle");
  TEST_DONE();
}
