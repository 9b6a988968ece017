/* fold.c - the ordered reduction of one job on the host (SPEC 5): contribution slots are indexed
 * in mixed radix over the reduced mesh dims, lowest mesh dim fastest; each level folds left over its
 * coordinates 0..n-1 into the group's first slot and finishes avg with one division by n. Levels go
 * in ascending mesh dim: the canonical event sequence of opt's own schedule. */
#include <stdlib.h>
#include "opt_internal.h"
#include "core/values.h"
#include "core/mutant.h"

/* Planted bugs 204 (right-to-left), 205 (pairwise tree), 207 (avg divides every contribution
 * first): one group of n slots `stride` apart, folded into the first. */
static void fold_group(const rs_sched *s, char *acc, int64_t n, int64_t stride, int64_t bytes,
                       int64_t last, rs_redop op, int64_t numel) {
  rs_redop fop = op == RS_AVG ? RS_SUM : op;
  if (RS_MUTANT(204) && n > 2) {
    for (int64_t j = n - 2; j >= 1; --j) rs_arith_fold(s->dtype, fop, acc + (n - 1) * stride * bytes, acc + j * stride * bytes, numel);
    rs_arith_fold(s->dtype, fop, acc + (n - 1) * stride * bytes, acc, numel);
    for (int64_t i = 0; i < bytes; ++i) acc[i] = acc[(n - 1) * stride * bytes + i];
  } else if (RS_MUTANT(205) && n > 2) {
    for (int64_t w = 1; w < n; w *= 2)
      for (int64_t j = 0; j + w < n; j += 2 * w)
        rs_arith_fold(s->dtype, fop, acc + j * stride * bytes, acc + (j + w) * stride * bytes, numel);
  } else if (RS_MUTANT(207) && op == RS_AVG) {
    for (int64_t j = 0; j < n; ++j) rs_arith_div(s->dtype, acc + j * stride * bytes, n, numel);
    for (int64_t j = 1; j < n; ++j) rs_arith_fold(s->dtype, fop, acc, acc + j * stride * bytes, numel);
    return;
  } else {
    for (int64_t j = 1; j < last; ++j) rs_arith_fold(s->dtype, fop, acc, acc + j * stride * bytes, numel);
  }
  if (op == RS_AVG) rs_arith_div(s->dtype, acc, n, numel);
}

void rs_fold_job(const rs_sched *s, char *slot0, int64_t numel) {
  int64_t bytes = numel * s->esize;
  int64_t stride[RS_MAX_MESH_DIMS], st = 1;
  for (int lv = 0; lv < s->nlevel; ++lv) {
    stride[lv] = st;
    st *= s->level_n[lv];
  }
  /* Mutant 208: the levels go in descending mesh dim (not the canonical sequence). */
  int rev = RS_MUTANT(208) && s->nlevel > 1;
  for (int k = 0; k < s->nlevel; ++k) {
    int lv = rev ? s->nlevel - 1 - k : k;
    int64_t n = s->level_n[lv];
    /* Mutant 104: level 0 drops its last contributor. */
    int64_t last = RS_MUTANT(104) && lv == 0 && n > 1 ? n - 1 : n;
    /* the groups: every slot whose digit lv is 0 and whose already-folded digits are 0 */
    for (int64_t b = 0; b < s->ncontrib; ++b) {
      int skip = (b / stride[lv]) % n != 0;
      for (int j = 0; j < k && !skip; ++j) {
        int done = rev ? s->nlevel - 1 - j : j;
        skip = (b / stride[done]) % s->level_n[done] != 0;
      }
      if (!skip) fold_group(s, slot0 + b * bytes, n, stride[lv], bytes, last, (rs_redop)s->level_op[lv], numel);
    }
  }
}
