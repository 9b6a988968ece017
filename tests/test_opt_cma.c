/* test_opt_cma.c - the single-copy path's copy (opt/comm/cma.c) against a plain pack, within this
 * process (process_vm_readv/writev on its own pid): lists longer than IOV_MAX, local and remote runs
 * cut at different places, several views on both sides, the run count that picks the copier. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

#if defined(RS_HAVE_OPT) && defined(__linux__)
#include "opt/opt_internal.h"
#include "opt/comm/cma.h"

static void view2(rs_view *v, char *base, int64_t rows, int64_t cols, int64_t stride) {
  memset(v, 0, sizeof *v);
  v->base = base;
  v->esize = 1;
  v->ndim = 2;
  v->size[0] = rows;
  v->size[1] = cols;
  v->stride[0] = stride;
  v->stride[1] = 1;
}

int main(void) {
  enum { ROWS = 3000, COLS = 40, STRIDE = 104 }; /* 3,000 runs: three IOV_MAX batches */
  static char src[ROWS * STRIDE], dst[ROWS * COLS], want[ROWS * COLS], back[ROWS * STRIDE];
  for (int i = 0; i < ROWS * STRIDE; ++i) src[i] = (char)(i * 131 + 7);
  rs_view s;
  view2(&s, src, ROWS, COLS, STRIDE);
  rs_views_pack(want, &s, 1);
  uint64_t probe = 0, token = 0x1234;
  int e = rs__cma_probe(getpid(), &probe, &token, sizeof token);
  if (e) { /* a sandbox that forbids the call: the transport falls back the same way */
    printf("process_vm_readv not permitted here (errno %d): skipped\n", e);
    return 0;
  }
  CHECK(probe == token);
  /* remote: the strided source as one view; local: two views cut mid-run (rows of 60 and 20) */
  rs_view d[2];
  view2(&d[0], dst, 1000, 60, 60);           /* 60,000 bytes, one dense run */
  view2(&d[1], dst + 60000, 3000, 20, 20);   /* the other 60,000 */
  CHECK_EQ_I(rs__cma_runs(&s, 1), ROWS);
  CHECK_EQ_I(rs__cma_runs(d, 2), 2);
  CHECK_EQ_I(rs__cma_copy(getpid(), 0, d, 2, &s, 1), 0);
  CHECK(!memcmp(dst, want, sizeof dst));
  /* write: the strided list local, the packed bytes remote (the sender's side of an all-to-all) */
  memset(back, 0, sizeof back);
  rs_view b, p;
  view2(&b, back, ROWS, COLS, STRIDE);
  view2(&p, want, 1, ROWS * COLS, ROWS * COLS);
  CHECK_EQ_I(rs__cma_copy(getpid(), 0, &b, 1, &p, 1), 0);
  CHECK(!memcmp(back + (ROWS - 1) * STRIDE, want + (ROWS - 1) * COLS, COLS));
  memset(dst, 0, sizeof dst);
  CHECK_EQ_I(rs__cma_copy(getpid(), 1, &b, 1, &p, 1), 0); /* write want -> ... reversed roles */
  rs_view q;
  view2(&q, dst, 1, ROWS * COLS, ROWS * COLS);
  CHECK_EQ_I(rs__cma_copy(getpid(), 1, &s, 1, &q, 1), 0); /* local strided source -> remote packed */
  CHECK(!memcmp(dst, want, sizeof dst));
  /* byte counts that differ are refused, not half copied silently */
  view2(&q, dst, 1, 10, 10);
  CHECK(rs__cma_copy(getpid(), 0, &q, 1, &s, 1) != 0);
  TEST_DONE();
}
#else
int main(void) {
  printf("opt is not built (or not Linux): nothing to test\n");
  return 0;
}
#endif
