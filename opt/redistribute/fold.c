/* fold.c - the ordered reduction of one job on the host (SPEC 5): contribution slots are indexed
 * in mixed radix over the reduced mesh dims, lowest mesh dim fastest; each level folds left over its
 * coordinates 0..n-1 into the group's first slot and finishes avg with one division by n. */
#include "opt_internal.h"
#include "core/values.h"
#include "core/mutant.h"

void rs_fold_job(const rs_sched *s, char *slot0, int64_t numel) {
  int64_t bytes = numel * s->esize, stride = 1;
  for (int lv = 0; lv < s->nlevel; ++lv) {
    int64_t n = s->level_n[lv];
    rs_redop op = (rs_redop)s->level_op[lv];
    rs_redop fop = op == RS_AVG ? RS_SUM : op;
    int64_t ngroups = s->ncontrib / (stride * n);
    /* Mutant 104: level 0 drops its last contributor. */
    int64_t last = RS_MUTANT(104) && lv == 0 && n > 1 ? n - 1 : n;
    for (int64_t g = 0; g < ngroups; ++g) {
      char *acc = slot0 + g * stride * n * bytes;
      for (int64_t j = 1; j < last; ++j) rs_arith_fold(s->dtype, fop, acc, acc + j * stride * bytes, numel);
      if (op == RS_AVG) rs_arith_div(s->dtype, acc, n, numel);
    }
    stride *= n;
  }
}
