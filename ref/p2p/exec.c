/* exec.c - ref's P2P executor: every rank in this process, each transfer copied element by element
 * from the sender's local tensor to the receiver's; MXFP8 destinations collect their slices in a
 * BF16 accumulator and are quantized once at the end (core's plain quantizer). */
#include <stdlib.h>
#include <string.h>
#include "reshard/p2p.h"

static int64_t local_offset(int nd, const int64_t *g, const int64_t *bs, const int64_t *bz) {
  int64_t off = 0;
  for (int d = 0; d < nd; ++d) off = off * bz[d] + (g[d] - bs[d]);
  return off;
}

rs_status rs_p2p_ref_execute(const rs_p2p_model *m, const rs_p2p_plan *plan,
                             const rs_p2p_locals *src, rs_p2p_locals *out) {
  rs_status st = rs_p2p_locals_alloc(m, RS_P2P_DST, -1, out);
  if (st) return st;
  /* BF16 accumulators of the MXFP8 destinations, [param][pos] */
  uint16_t ***acc = calloc((size_t)(m->nparams ? m->nparams : 1), sizeof *acc);
  if (!acc) st = rs_fail(RS_ERR_NOMEM, "ref p2p: out of memory");
  for (int64_t p = 0; p < m->nparams && !st; ++p) {
    if (m->param[p].transform != RS_XFORM_MXFP8) continue;
    acc[p] = calloc((size_t)(out->npos[p] ? out->npos[p] : 1), sizeof **acc);
    if (!acc[p]) st = rs_fail(RS_ERR_NOMEM, "ref p2p: out of memory");
    for (int64_t q = 0; q < out->npos[p] && !st; ++q)
      if (!(acc[p][q] = calloc((size_t)out->loc[p][q].numel + 1, 2))) st = rs_fail(RS_ERR_NOMEM, "ref p2p: out of memory");
  }
  for (int64_t i = 0; i < plan->n && !st; ++i) {
    const rs_p2p_xfer *x = &plan->x[i];
    const rs_tensor *t = &m->param[x->param].t;
    int es = rs_dtype_size(t->dtype);
    const int64_t *bs = plan->coords + x->box, *bz = bs + t->ndim;
    int64_t sq = rs_p2p_pos(m, RS_P2P_SRC, x->param, x->src), dq = rs_p2p_pos(m, RS_P2P_DST, x->param, x->dst);
    if (sq < 0 || dq < 0) {
      st = rs_fail(RS_ERR_INVALID, "ref p2p: task %lld names a rank that does not hold %s", (long long)x->task,
                   m->param[x->param].name);
      break;
    }
    int64_t ss[RS_MAX_DIMS], sz[RS_MAX_DIMS], ds[RS_MAX_DIMS], dz[RS_MAX_DIMS], g[RS_MAX_DIMS], idx[RS_MAX_DIMS] = {0};
    rs_p2p_box(m, RS_P2P_SRC, x->param, sq, ss, sz);
    rs_p2p_box(m, RS_P2P_DST, x->param, dq, ds, dz);
    int64_t n = 1;
    for (int d = 0; d < t->ndim; ++d) {
      n *= bz[d];
      if (bz[d] < 0 || bs[d] < ss[d] || bs[d] < ds[d] || bs[d] + bz[d] > ss[d] + sz[d] || bs[d] + bz[d] > ds[d] + dz[d])
        st = rs_fail(RS_ERR_INVALID, "ref p2p: task %lld box of %s is outside the sender's or receiver's box",
                     (long long)x->task, m->param[x->param].name);
    }
    if (st) break;
    const char *from = src->loc[x->param][sq].data;
    char *to = acc[x->param] ? (char *)acc[x->param][dq] : out->loc[x->param][dq].data;
    for (int64_t k = 0; k < n; ++k) {
      for (int d = 0; d < t->ndim; ++d) g[d] = bs[d] + idx[d];
      memcpy(to + local_offset(t->ndim, g, ds, dz) * es, from + local_offset(t->ndim, g, ss, sz) * es, (size_t)es);
      for (int d = t->ndim - 1; d >= 0; --d) {
        if (++idx[d] < bz[d]) break;
        idx[d] = 0;
      }
    }
  }
  for (int64_t p = 0; p < m->nparams && !st; ++p) {
    if (!acc[p]) continue;
    for (int64_t q = 0; q < out->npos[p] && !st; ++q)
      st = rs_mxfp8_quantize_ref(acc[p][q], out->loc[p][q].numel, (uint8_t *)out->loc[p][q].data,
                                 out->loc[p][q].scale, m->param[p].name);
  }
  for (int64_t p = 0; acc && p < m->nparams; ++p) {
    if (!acc[p]) continue;
    for (int64_t q = 0; q < out->npos[p]; ++q) free(acc[p][q]);
    free(acc[p]);
  }
  free(acc);
  if (st) rs_p2p_locals_free(out);
  return st;
}
