/* test_opt_views.c - opt's host copy kernels on the paths the campaigns never reach: copies between
 * views of different shapes (the run iterator behind the local transport's restaging), pack /
 * unpack round trips, and batches big enough (8 MiB and more) to be cut into source-ordered slabs.
 * Expected bytes come from plain index loops over the global row-major order, not from opt. */
#include <stdint.h>
#include <string.h>
#include "check.h"
#ifdef RS_HAVE_OPT
#include "opt/opt_internal.h"

/* Byte offset of element k (row-major order over the view's sizes) in view v. */
static int64_t elem_off(const rs_view *v, int64_t k) {
  int64_t off = 0;
  for (int d = v->ndim - 1; d >= 0; --d) {
    off += (k % v->size[d]) * v->stride[d];
    k /= v->size[d];
  }
  return off;
}

static int64_t view_numel(const rs_view *v) {
  int64_t n = 1;
  for (int d = 0; d < v->ndim; ++d) n *= v->size[d];
  return n;
}

/* dst must hold src's elements in row-major order; bytes of dst's buffer outside the view keep
 * their fill. Returns the number of wrong bytes. */
static int64_t check_copy(const rs_view *dst, const rs_view *src, const unsigned char *dbuf, int64_t dcap,
                          unsigned char fill) {
  int64_t bad = 0, n = view_numel(src);
  static unsigned char touched[1 << 16];
  memset(touched, 0, (size_t)dcap);
  for (int64_t k = 0; k < n; ++k) {
    int64_t so = elem_off(src, k), dof = elem_off(dst, k);
    bad += memcmp(src->base + so, dst->base + dof, (size_t)src->esize) != 0;
    memset(touched + (dst->base - (const char *)dbuf) + dof, 1, (size_t)dst->esize);
  }
  for (int64_t i = 0; i < dcap; ++i) bad += !touched[i] && dbuf[i] != fill;
  return bad;
}

/* Shapes of equal element counts, copied both ways between a region of a strided buffer and a
 * differently shaped (strided or packed) view. */
static void different_shapes(void) {
  static unsigned char sbuf[1 << 15], dbuf[1 << 15];
  for (size_t i = 0; i < sizeof sbuf; ++i) sbuf[i] = (unsigned char)(i * 131 + 7);
  /* region sizes (3-d) and the 2-d shape they are copied into, and the dst buffer's extra columns */
  static const int64_t cases[][6] = {
      {2, 3, 4, 6, 4, 0}, {2, 3, 4, 4, 6, 3}, {3, 1, 5, 15, 1, 2}, {1, 4, 4, 2, 8, 1},
      {4, 2, 3, 24, 1, 0}, {2, 5, 2, 5, 4, 5}, {5, 3, 1, 3, 5, 1}, {2, 2, 7, 7, 4, 2}};
  int esizes[] = {1, 2, 4, 8};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
    for (size_t e = 0; e < sizeof esizes / sizeof esizes[0]; ++e)
      for (int pad = 0; pad < 3; ++pad) {
        const int64_t *k = cases[c];
        int es = esizes[e];
        /* source: region k[0..2] at offset (1, pad, 1) of a buffer box with `pad` extra on each dim */
        rs_box buf = {{0, 0, 0}, {k[0] + 1 + pad, k[1] + pad + pad, k[2] + 2 + pad}};
        rs_box reg = {{1, pad, 1}, {k[0], k[1], k[2]}};
        rs_view sv, dv;
        rs_view_in_box(&sv, sbuf, es, 3, &buf, &reg);
        /* destination: a k[3] x k[4] region of a buffer k[3] + 1 rows by k[4] + k[5] columns */
        rs_box dbx = {{0, 0}, {k[3] + 1, k[4] + k[5]}}, dreg = {{1, k[5] ? 1 : 0}, {k[3], k[4]}};
        int64_t dcap = (k[3] + 1) * (k[4] + k[5]) * es;
        memset(dbuf, 0xA5, (size_t)dcap);
        rs_view_in_box(&dv, dbuf, es, 2, &dbx, &dreg);
        rs_view_copy(&dv, &sv);
        int64_t bad = check_copy(&dv, &sv, dbuf, dcap, 0xA5);
        if (bad) fprintf(stderr, "case %zu esize %d pad %d: 3-d region -> 2-d region: %lld bad bytes\n", c, es, pad, (long long)bad);
        CHECK(bad == 0);
        /* and back: 2-d region -> 3-d region of a cleared buffer */
        static unsigned char back[1 << 15];
        int64_t bcap = (buf.size[0] * buf.size[1] * buf.size[2]) * es;
        memset(back, 0x5A, (size_t)bcap);
        rs_view bv;
        rs_view_in_box(&bv, back, es, 3, &buf, &reg);
        rs_view_copy(&bv, &dv);
        bad = check_copy(&bv, &dv, back, bcap, 0x5A);
        if (bad) fprintf(stderr, "case %zu esize %d pad %d: 2-d region -> 3-d region: %lld bad bytes\n", c, es, pad, (long long)bad);
        CHECK(bad == 0);
        /* pack the strided region, unpack it into the cleared buffer: the same bytes */
        static unsigned char packed[1 << 15];
        CHECK_EQ_I(rs_views_pack((char *)packed, &sv, 1), view_numel(&sv) * es);
        memset(back, 0x5A, (size_t)bcap);
        CHECK_EQ_I(rs_views_unpack(&bv, 1, (const char *)packed), view_numel(&sv) * es);
        CHECK(check_copy(&bv, &sv, back, bcap, 0x5A) == 0);
      }
}

/* A batch of pairs that read interleaved column blocks of one source, as an all-to-all does, each
 * written to the same block of the destination (so the result is the source again). */
static void batch(int rows, int cols, int es, int pairs, const char *what) {
  size_t bytes = (size_t)rows * (size_t)cols * (size_t)es;
  unsigned char *src = malloc(bytes), *dst = malloc(bytes);
  CHECK(src && dst && pairs <= 8);
  if (!src || !dst || pairs > 8) {
    free(src);
    free(dst);
    return;
  }
  for (size_t i = 0; i < bytes; ++i) src[i] = (unsigned char)(i % 251);
  memset(dst, 0, bytes);
  rs_view d[8], s[8];
  rs_box whole = {{0, 0}, {rows, cols}};
  for (int p = 0; p < pairs; ++p) {
    rs_box blk = {{0, (int64_t)p * (cols / pairs)}, {rows, cols / pairs}};
    rs_view_in_box(&s[p], src, es, 2, &whole, &blk);
    rs_view_in_box(&d[p], dst, es, 2, &whole, &blk);
  }
  CHECK(rs_views_copy_batch(d, s, pairs) == RS_OK);
  size_t bad = 0;
  for (size_t i = 0; i < bytes; ++i) bad += dst[i] != src[i];
  if (bad) fprintf(stderr, "%s: %zu bytes differ\n", what, bad);
  CHECK(bad == 0);
  free(src);
  free(dst);
}

int main(void) {
  different_shapes();
  /* 12 MiB: streamed, cut into lockstep slabs along each pair's outer dim */
  batch(1536, 1024, 8, 4, "12 MiB batch");
  /* in cache (64 KiB - 8 MiB): row by row across the group; runs of 148 bytes (AVX2 loop and an
   * overlapping tail vector), of 20 bytes (below 32: the plain per-run copy) */
  batch(512, 4 * 37, 4, 4, "296 KiB batch, 148-byte runs");
  batch(2048, 4 * 5, 4, 4, "160 KiB batch, 20-byte runs");
  TEST_DONE();
}
#else
int main(void) {
  printf("opt is not built: nothing to test\n");
  return 0;
}
#endif
