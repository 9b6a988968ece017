/* test_p2p_mxfp8.c - SPEC 10's MXFP8 transform on blocks computed by hand, for each of the three
 * quantizers (core's plain reference used by ref/, opt's integer one shared with the CUDA kernel,
 * the oracle's table search): amax 0, exact ties, E4M3 subnormals, the clamped exponent, the 448
 * boundary, NaN/Inf and size errors naming the parameter and block; every finite BF16 pattern
 * through each pair; one block per positive finite amax with its scale worked out independently; and, when a GPU is present, the CUDA kernel against the CPU bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Every scale boundary: one block per positive finite BF16 amax (subnormal, tiny around the clamp
 * at 2^-127, each 448 * 2^e boundary and its neighbours, the top binades), the other elements the
 * amax's neighbours and lower binades of both signs. The scale byte must be the least e with
 * 448 * 2^e >= amax clamped to [-127, 127] (worked out here in doubles), and the quantizer agree
 * with the oracle's on every element. */
static double bf16_abs(uint16_t b) {
  int ex = (b >> 7) & 0xFF, man = b & 0x7F;
  return ex ? ldexp(1.0 + man / 128.0, ex - 127) : ldexp(man / 128.0, -126);
}

static void check_boundaries(quant_fn f, const char *what) {
  int bad = 0;
  for (uint32_t a = 1; a < 0x7F80 && bad < 5; ++a) {
    uint16_t x[32];
    x[0] = (uint16_t)a;
    x[1] = (uint16_t)(a | 0x8000);
    for (int i = 2; i < 32; ++i) {
      int32_t v = i % 2 ? (int32_t)a - (i - 1) : (int32_t)a - 0x80 * (i / 2);
      x[i] = (uint16_t)((v > 0 ? v : 0) | (i % 3 == 0 ? 0x8000 : 0));
    }
    double amax = bf16_abs((uint16_t)a);
    int e = -127;
    while (e < 127 && 448.0 * ldexp(1.0, e) < amax) e++;
    uint8_t q[32], qo[32], s = 0, so = 0;
    rs_status st = f(x, 32, q, &s, "x"), sto = rs_p2p_oracle_mxfp8(x, 32, qo, &so, "x");
    if (st || sto || s != (uint8_t)(e + 127) || so != s || memcmp(q, qo, 32)) {
      fprintf(stderr, "%s: amax 0x%04x (%g): scale %u, oracle %u, expected %d; elements %s\n", what, a, amax, s, so,
              e + 127, memcmp(q, qo, 32) ? "differ" : "agree");
      rs_test_failures++;
      bad++;
    }
  }
}

#ifdef RS_HAVE_OPT
/* opt's internals (opt/cuda): the device count and the kernel's host entry point. */
int rs_cuda_device_count(void);
rs_status rs_cuda_mxfp8(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, int half_up, int64_t *bad_block);

/* The CUDA kernel against opt's CPU path, bit for bit, on every finite BF16 pattern and on blocks
 * of random patterns (a GPU is needed; without one this says so and checks nothing). */
static void check_gpu(void) {
  if (rs_cuda_device_count() <= 0) {
    printf("no GPU: the CUDA MXFP8 kernel was not run\n");
    return;
  }
  const int64_t n = 0x10000 + 32 * 4096;
  uint16_t *x = malloc((size_t)n * 2);
  uint8_t *qg = malloc((size_t)n), *qc = malloc((size_t)n), *sg = malloc((size_t)n / 32), *sc = malloc((size_t)n / 32);
  CHECK(x && qg && qc && sg && sc);
  if (!x || !qg || !qc || !sg || !sc) return;
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v;
    if (i < 0x10000) v = (uint16_t)i;
    else h = h * 6364136223846793005ull + 1442695040888963407ull, v = (uint16_t)(h >> 48);
    x[i] = (v & 0x7F80) == 0x7F80 ? (uint16_t)(v & ~0x4000) : v;
  }
  int64_t bad = 0;
  CHECK(rs_cuda_mxfp8(x, n, qg, sg, 0, &bad) == RS_OK);
  CHECK_EQ_I(bad, -1);
  CHECK(rs_mxfp8_quantize_opt(x, n, qc, sc, "x") == RS_OK);
  CHECK(!memcmp(qg, qc, (size_t)n) && !memcmp(sg, sc, (size_t)n / 32));
  printf("GPU: CUDA MXFP8 kernel equals the CPU on %lld blocks\n", (long long)(n / 32));
  free(x); free(qg); free(qc); free(sg); free(sc);
}
#endif

int main(void) {
  check_fn("ref", rs_mxfp8_quantize_ref);
  check_fn("oracle", rs_p2p_oracle_mxfp8);
#ifdef RS_HAVE_OPT
  check_fn("opt", rs_mxfp8_quantize_opt);
  check_agree(rs_mxfp8_quantize_opt, rs_p2p_oracle_mxfp8, "opt vs oracle");
  check_boundaries(rs_mxfp8_quantize_opt, "opt boundaries");
  check_gpu();
#endif
  check_agree(rs_mxfp8_quantize_ref, rs_p2p_oracle_mxfp8, "ref vs oracle");
  check_boundaries(rs_mxfp8_quantize_ref, "ref boundaries");
  check_boundaries(rs_p2p_oracle_mxfp8, "oracle boundaries");
  TEST_DONE();
}
