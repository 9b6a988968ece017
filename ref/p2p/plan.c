/* plan.c - ref's P2P planner (SPEC 10), the plainest one that is obviously right: for every
 * destination rank and parameter, every source chunk (distinct source box) that intersects the
 * destination box is sent by its first holder (lowest mesh position). No locality, no balance. */
#include <stdlib.h>
#include <string.h>
#include "core/mutant.h"
#include "reshard/p2p.h"

static int same_box(int nd, const int64_t *s0, const int64_t *z0, const int64_t *s1, const int64_t *z1) {
  for (int d = 0; d < nd; ++d)
    if (s0[d] != s1[d] || z0[d] != z1[d]) return 0;
  return 1;
}

rs_status rs_p2p_ref_plan(const rs_p2p_model *m, rs_p2p_plan *out) {
  memset(out, 0, sizeof *out);
  rs_status st = RS_OK;
  int64_t task = 0;
  for (int32_t r = 0; r < m->world && !st; ++r) {
    for (int64_t p = 0; p < m->nparams && !st; ++p) {
      const rs_tensor *t = &m->param[p].t;
      int64_t dq = rs_p2p_pos(m, RS_P2P_DST, p, r);
      if (dq < 0) continue;
      int64_t bs[RS_MAX_DIMS], bz[RS_MAX_DIMS];
      rs_p2p_box(m, RS_P2P_DST, p, dq, bs, bz);
      int empty = 0;
      for (int d = 0; d < t->ndim; ++d) empty |= bz[d] == 0;
      if (empty) continue;
      const rs_p2p_mesh *sm = &m->cfg[RS_P2P_SRC].mesh[m->cfg[RS_P2P_SRC].place[p].mesh];
      for (int64_t sq = 0; sq < sm->nranks && !st; ++sq) {
        int64_t as[RS_MAX_DIMS], az[RS_MAX_DIMS], is[RS_MAX_DIMS], iz[RS_MAX_DIMS];
        rs_p2p_box(m, RS_P2P_SRC, p, sq, as, az);
        int hit = 1;
        for (int d = 0; d < t->ndim; ++d) {
          int64_t lo = as[d] > bs[d] ? as[d] : bs[d];
          int64_t hi = as[d] + az[d] < bs[d] + bz[d] ? as[d] + az[d] : bs[d] + bz[d];
          if (hi <= lo) hit = 0;
          is[d] = lo;
          iz[d] = hi - lo;
        }
        if (!hit) continue;
        int first = 1;
        for (int64_t k = 0; k < sq && first; ++k) {
          int64_t ks[RS_MAX_DIMS], kz[RS_MAX_DIMS];
          rs_p2p_box(m, RS_P2P_SRC, p, k, ks, kz);
          if (same_box(t->ndim, ks, kz, as, az) && !RS_MUTANT(406)) first = 0; /* 406: every replica sends */
        }
        if (first) st = rs_p2p_plan_add(out, task++, (int32_t)p, sm->ranks[sq], r, t->ndim, is, iz);
      }
    }
  }
  if (!st) st = rs_p2p_plan_stats(m, out);
  if (st) rs_p2p_plan_free(out);
  return st;
}
