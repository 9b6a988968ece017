/* locals.c - the local tensors ranks hold in a configuration: allocation (all ranks in one process,
 * or only one world rank's under MPI) and the source data of SPEC 8. */
#include <stdlib.h>
#include <string.h>
#include "core/p2p/p2p_internal.h"

void rs_p2p_locals_free(rs_p2p_locals *l) {
  if (!l) return;
  for (int64_t p = 0; p < l->nparams; ++p) {
    if (!l->loc || !l->loc[p]) continue;
    for (int64_t q = 0; q < l->npos[p] && !l->borrowed; ++q) {
      free(l->loc[p][q].data);
      free(l->loc[p][q].scale);
    }
    free(l->loc[p]);
  }
  free(l->loc);
  free(l->npos);
  memset(l, 0, sizeof *l);
}

/* The structure of which's locals for `rank`, each played entry's numel set; with buffers (poisoned)
 * when `buffers`, else none (borrowed: the caller's). */
static rs_status locals_make(const rs_p2p_model *m, int which, int32_t rank, int buffers, rs_p2p_locals *out) {
  memset(out, 0, sizeof *out);
  out->borrowed = !buffers;
  out->which = which;
  out->nparams = m->nparams;
  out->npos = calloc((size_t)(m->nparams ? m->nparams : 1), sizeof *out->npos);
  out->loc = calloc((size_t)(m->nparams ? m->nparams : 1), sizeof *out->loc);
  if (!out->npos || !out->loc) {
    rs_p2p_locals_free(out);
    return rs_fail(RS_ERR_NOMEM, "locals: out of memory");
  }
  const rs_p2p_config *c = &m->cfg[which];
  for (int64_t p = 0; p < m->nparams; ++p) {
    const rs_p2p_mesh *me = &c->mesh[c->place[p].mesh];
    const rs_tensor *t = &m->param[p].t;
    int mx = which == RS_P2P_DST && m->param[p].transform == RS_XFORM_MXFP8;
    out->npos[p] = me->nranks;
    out->loc[p] = calloc((size_t)(me->nranks ? me->nranks : 1), sizeof **out->loc);
    if (!out->loc[p]) {
      rs_p2p_locals_free(out);
      return rs_fail(RS_ERR_NOMEM, "locals: out of memory");
    }
    for (int64_t q = 0; q < me->nranks; ++q) {
      if (rank >= 0 && me->ranks[q] != rank) continue;
      int64_t s[RS_MAX_DIMS], z[RS_MAX_DIMS];
      rs_p2p_box(m, which, p, q, s, z);
      int64_t n = rs__p2p_numel(t->ndim, z);
      if (mx && n && z[t->ndim - 1] % RS_MXFP8_BLOCK) {
        rs_p2p_locals_free(out);
        return rs_fail(RS_ERR_INVALID,
                       "dst.params.%s: MXFP8 needs the local last dim to be a multiple of 32 (rank %d holds %lld)",
                       m->param[p].name, me->ranks[q], (long long)z[t->ndim - 1]);
      }
      rs_p2p_local *l = &out->loc[p][q];
      l->numel = n;
      if (!buffers) continue;
      l->data = malloc((size_t)(n * (mx ? 1 : rs_dtype_size(t->dtype))) + 1);
      if (mx) l->scale = malloc((size_t)(n / RS_MXFP8_BLOCK) + 1);
      if (!l->data || (mx && !l->scale)) {
        rs_p2p_locals_free(out);
        return rs_fail(RS_ERR_NOMEM, "locals: out of memory");
      }
      /* poison: an element no transfer writes shows up in the comparison */
      memset(l->data, 0xA5, (size_t)(n * (mx ? 1 : rs_dtype_size(t->dtype))));
    }
  }
  return RS_OK;
}

rs_status rs_p2p_locals_alloc(const rs_p2p_model *m, int which, int32_t rank, rs_p2p_locals *out) {
  return locals_make(m, which, rank, 1, out);
}

rs_status rs_p2p_locals_layout(const rs_p2p_model *m, int which, int32_t rank, rs_p2p_locals *out) {
  return locals_make(m, which, rank, 0, out);
}

rs_status rs_p2p_source_locals(const rs_p2p_model *m, int32_t rank, rs_p2p_locals *out) {
  rs_status st = rs_p2p_locals_alloc(m, RS_P2P_SRC, rank, out);
  if (st) return st;
  for (int64_t p = 0; p < m->nparams; ++p) {
    const rs_tensor *t = &m->param[p].t;
    int es = rs_dtype_size(t->dtype);
    for (int64_t q = 0; q < out->npos[p]; ++q) {
      rs_p2p_local *l = &out->loc[p][q];
      if (!l->data) continue;
      int64_t s[RS_MAX_DIMS], z[RS_MAX_DIMS], idx[RS_MAX_DIMS] = {0};
      rs_p2p_box(m, RS_P2P_SRC, p, q, s, z);
      for (int64_t k = 0; k < l->numel; ++k) {
        int64_t g = 0;
        for (int d = 0; d < t->ndim; ++d) g = g * t->shape[d] + s[d] + idx[d];
        rs_p2p_value(m, p, g, l->data + k * es);
        for (int d = t->ndim - 1; d >= 0; --d) {
          if (++idx[d] < z[d]) break;
          idx[d] = 0;
        }
      }
    }
  }
  return RS_OK;
}
