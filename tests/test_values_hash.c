/* test_values_hash.c - the test value generator (SPEC 8) pinned bit for bit. Every fixture digest
 * and every recorded PyTorch case depends on the exact values core/values.c generates, so a faster
 * generator must produce the same bytes. This test draws 6,000 cases from its own small stream
 * (meshes of 1 to 4 dims, tensors of 0 to 4 dims with uneven and empty extents, every dtype, every
 * value mode, Partial sources of every op, random seeds), then 1,500 of a wide stream (5-6-d
 * meshes, 5-8-d tensors) and hashes everything the generator gives
 * out: every rank's source local (rs_make_source, hence rs_value_pieces), rs_value_global,
 * rs_value_range and rs_value_piece at every rank's coordinate. The hashes below were recorded
 * with the generator as it was before it was made faster (per-element calls, no per-case tables);
 * a change that moves any one of them changes the values. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "reshard/case.h"
#include "core/values.h"

static uint64_t rng_state;
static uint64_t rnd(uint64_t n) { return rs_mix64(rng_state++) % n; }

static uint64_t fold(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull; /* FNV-1a */
  return h;
}

static const char *const DTYPES[] = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2",
                                     "I64", "I32", "I16", "I8", "U8", "BOOL"};
static const char *const OPS[] = {"sum", "avg", "min", "max"};
static const char *const MODES[] = {"bits", "exact", "order"};

/* One random case as JSON; NULL-free: the caller skips what rs_case_from_json refuses. */
static void draw(char *json, size_t cap, int wide) {
  int mnd = 1 + (int)rnd(4), tnd = (int)rnd(5), big = rnd(16) == 0;
  int64_t msz[RS_MAX_MESH_DIMS], tsz[RS_MAX_DIMS];
  if (wide) { /* the wide stream: 5-6-d meshes of 1-2 per dim, 5-8-d tensors of 0-3 per dim */
    mnd = 5 + (int)rnd(2);
    tnd = 5 + (int)rnd(4);
    big = 0;
  }
  for (int m = 0; m < mnd; m++) msz[m] = 1 + (int64_t)rnd(wide ? 2 : mnd > 2 ? 3 : 4);
  for (int d = 0; d < tnd; d++)
    tsz[d] = rnd(8) == 0 ? 0 : 1 + (int64_t)rnd(wide ? 3 : big ? 24 : tnd > 2 ? 5 : 9);
  const char *op = OPS[rnd(4)], *op2 = !strcmp(op, "sum") && rnd(2) ? "avg" : op;
  char mesh[64] = "", shape[96] = "", src[256] = "", dst[256] = "";
  for (int m = 0; m < mnd; m++) snprintf(mesh + strlen(mesh), sizeof mesh - strlen(mesh), "%s%lld", m ? "," : "", (long long)msz[m]);
  for (int d = 0; d < tnd; d++) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "," : "", (long long)tsz[d]);
  for (int side = 0; side < 2; side++) {
    char *out = side ? dst : src;
    size_t oc = side ? sizeof dst : sizeof src;
    for (int m = 0; m < mnd; m++) {
      uint64_t k = rnd(side ? 3 : 4);
      if (wide && k >= 2 && rnd(4)) k = rnd(2); /* fewer Partials: bits mode needs none in src */
      char pl[32];
      if (k == 0 || (k == 1 && tnd == 0)) snprintf(pl, sizeof pl, "R");
      else if (k == 1) snprintf(pl, sizeof pl, "S(%d)", (int)rnd((uint64_t)tnd));
      else snprintf(pl, sizeof pl, "P(%s)", m % 2 ? op2 : op);
      snprintf(out + strlen(out), oc - strlen(out), "%s\"%s\"", m ? "," : "", pl);
    }
  }
  /* drawn one by one: the order of a call's arguments is unspecified (gcc and clang differ); this
   * is the order the pins were recorded in */
  const char *mode = MODES[rnd(3)];
  uint64_t seed = rs_mix64(rng_state++) >> 12;
  const char *dtype = DTYPES[rnd(12)];
  snprintf(json, cap,
           "{\"name\":\"h\",\"mesh\":{\"shape\":[%s]},\"tensor\":{\"shape\":[%s],\"dtype\":\"%s\"},"
           "\"src\":{\"placements\":[%s]},\"dst\":{\"placements\":[%s]},\"seed\":%" PRIu64 ",\"values\":\"%s\"}",
           mesh, shape, dtype, src, dst, seed, mode);
}

/* Everything the generator gives out for one case, folded into h. */
static uint64_t hash_case(const rs_case *c, uint64_t h) {
  int es = rs_dtype_size(c->tensor.dtype);
  int64_t numel = 1;
  for (int d = 0; d < c->tensor.ndim; d++) numel *= c->tensor.shape[d];
  rs_locals in;
  memset(&in, 0, sizeof in);
  if (rs_make_source(c, &in) != RS_OK) {
    fprintf(stderr, "rs_make_source: %s\n", rs_last_error());
    rs_test_failures++;
    return h;
  }
  for (int pos = 0; pos < in.n; pos++) h = fold(h, in.r[pos].data, (size_t)in.r[pos].nbytes);
  rs_locals_free(&in);
  unsigned char *buf = malloc((size_t)(numel * es) + 8), one[8];
  if (!buf) return h;
  for (int64_t i = 0; i < numel; i++) rs_value_global(c, i, buf + i * es);
  h = fold(h, buf, (size_t)(numel * es));
  for (int pos = 0; pos < c->mesh.nranks; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    int64_t from = numel ? (int64_t)rnd((uint64_t)numel) : 0;
    rs_value_range(c, coord, from, numel - from, buf);
    h = fold(h, buf, (size_t)((numel - from) * es));
    if (numel) {
      rs_value_piece(c, coord, numel - 1, one);
      h = fold(h, one, (size_t)es);
    }
  }
  free(buf);
  return h;
}

/* recorded with the per-element generator (main at 8b79024) */
#define PIN_BITS 0xfde8bb1c44eaa664ull
#define PIN_EXACT 0x478130c96e9467c7ull
#define PIN_ORDER 0xb986e2d1b9629fa6ull

/* recorded with this generator when the wide stream was added (its narrow pins above unchanged) */
#define PIN_WIDE_BITS 0x259cc48b995fc178ull
#define PIN_WIDE_EXACT 0x722ae123c4cda404ull
#define PIN_WIDE_ORDER 0x2ea92bb73f01f21aull

/* Hashes `want` valid cases of one stream per value mode into h[3]; returns the cases taken. */
static int hash_stream(int wide, int want, uint64_t *h, int *n) {
  int tried = 0;
  while (n[0] + n[1] + n[2] < want && tried < 300000) {
    char json[1024];
    rs_case c;
    draw(json, sizeof json, wide);
    tried++;
    if (rs_case_from_json(json, &c) != RS_OK) { /* an invalid draw or a refused dtype: skip */
      rs_clear_error();
      continue;
    }
    int mode = c.values == RS_VALUES_BITS ? 0 : c.values == RS_VALUES_EXACT ? 1 : 2;
    h[mode] = hash_case(&c, h[mode]);
    n[mode]++;
  }
  return n[0] + n[1] + n[2];
}

int main(void) {
  /* per value mode: cases hashed and the hash of their values */
  uint64_t h[3] = {0xCBF29CE484222325ull, 0xCBF29CE484222325ull, 0xCBF29CE484222325ull};
  int n[3] = {0, 0, 0};
  rng_state = 0x5EED;
  CHECK_EQ_I(hash_stream(0, 6000, h, n), 6000);
  printf("bits %d 0x%016" PRIx64 "\nexact %d 0x%016" PRIx64 "\norder %d 0x%016" PRIx64 "\n", n[0], h[0], n[1],
         h[1], n[2], h[2]);
  CHECK(h[0] == PIN_BITS);
  CHECK(h[1] == PIN_EXACT);
  CHECK(h[2] == PIN_ORDER);
  uint64_t w[3] = {0xCBF29CE484222325ull, 0xCBF29CE484222325ull, 0xCBF29CE484222325ull};
  int wn[3] = {0, 0, 0};
  rng_state = 0x5EED6;
  CHECK_EQ_I(hash_stream(1, 1500, w, wn), 1500);
  printf("wide: bits %d 0x%016" PRIx64 "\nwide: exact %d 0x%016" PRIx64 "\nwide: order %d 0x%016" PRIx64 "\n", wn[0],
         w[0], wn[1], w[1], wn[2], w[2]);
  CHECK(w[0] == PIN_WIDE_BITS);
  CHECK(w[1] == PIN_WIDE_EXACT);
  CHECK(w[2] == PIN_WIDE_ORDER);
  TEST_DONE();
}
