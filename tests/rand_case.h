/* rand_case.h - the small random generator the opt tests share: an xorshift stream and random
 * placements with any shard order (props/ has the shrinking generator; these tests draw their own
 * wider cases: bigger tensors, world subsets for MPI). */
#ifndef RS_TEST_RAND_CASE_H
#define RS_TEST_RAND_CASE_H
#include <stdint.h>
#include <string.h>
#include "reshard/layout.h"

static uint64_t rng_state = 0x1234567ull;
static inline uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static inline int rint_(int n) { return (int)(rnd() % (uint64_t)n); }

/* pool[0..n) = a random permutation of 0..n-1 (mesh rank lists over any subset of a world). */
static inline void random_rank_pool(int32_t *pool, int n) {
  for (int i = 0; i < n; ++i) pool[i] = i;
  for (int i = n - 1; i > 0; --i) {
    int j = rint_(i + 1);
    int32_t t = pool[i];
    pool[i] = pool[j];
    pool[j] = t;
  }
}

/* Random placements with a random shard order; op is the Partial op for this case. */
static inline void random_sharding(rs_sharding *s, int mesh_ndim, int tndim, int allow_partial, rs_redop op) {
  memset(s, 0, sizeof *s);
  s->mesh_ndim = mesh_ndim;
  for (int m = 0; m < mesh_ndim; ++m) {
    int k = rint_(allow_partial ? 4 : 3);
    if (k == 0 || (k == 1 && tndim == 0)) s->p[m] = rs_pl_replicate();
    else if (k <= 2 && tndim > 0) s->p[m] = rs_pl_shard(rint_(tndim));
    else s->p[m] = allow_partial ? rs_pl_partial(op) : rs_pl_replicate();
  }
  for (int d = 0; d < tndim; ++d) {
    int n = 0;
    for (int m = 0; m < mesh_ndim; ++m)
      if (s->p[m].kind == RS_SHARD && s->p[m].dim == d) s->order[d][n++] = (int8_t)m;
    for (int i = n - 1; i > 0; --i) { /* shuffle: any shard order */
      int j = rint_(i + 1);
      int8_t t = s->order[d][i];
      s->order[d][i] = s->order[d][j];
      s->order[d][j] = t;
    }
    s->order_len[d] = (int8_t)n;
  }
}
#endif
