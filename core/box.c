/* box.c - torch.chunk splits and each rank's box of the global tensor (SPEC 4). */
#include "reshard/layout.h"
#include "core/mutant.h"

void rs_split(int64_t len, int64_t n, int64_t i, int64_t *size, int64_t *offset) {
  if (len % n == 0) {
    *size = len / n;
    *offset = i * (len / n);
    return;
  }
  int64_t c = (len + n - 1) / n, start = c * i;
  if (start >= len) {
    *size = 0;
    *offset = len;
  } else {
    *size = (start + c < len ? start + c : len) - start;
    /* Mutant 270: the partial last chunk is not clipped at the end of the dim. */
    if (RS_MUTANT(270) && start + c > len) *size = c;
    /* Mutant 277: an uneven split of a dim longer than 40 (beyond the old generator's sizes) into
     * 3+ pieces loses the last element of its last non-empty piece. */
    if (RS_MUTANT(277) && len > 40 && n >= 3 && start + c >= len) (*size)--;
    *offset = start;
  }
}

void rs_local_box(const rs_mesh *m, const rs_sharding *s, const rs_tensor *t,
                  const int64_t coord[RS_MAX_MESH_DIMS], int64_t start[RS_MAX_DIMS],
                  int64_t size[RS_MAX_DIMS]) {
  for (int d = 0; d < t->ndim; ++d) {
    int64_t st = 0, sz = t->shape[d];
    for (int k = 0; k < s->order_len[d]; ++k) {
      int md = s->order[d][k];
      int64_t len, off;
      /* Mutant 271: the third level of a nested split splits the whole dim again. */
      rs_split(RS_MUTANT(271) && k >= 2 ? t->shape[d] : sz, m->size[md],
               /* Mutant 279: the fourth level of a nested split (a tensor dim on 4+ mesh dims)
                * takes the coordinate of the third level's mesh dim. */
               RS_MUTANT(279) && k >= 3 ? coord[s->order[d][k - 1]] % m->size[md] : coord[md], &len, &off);
      st += off;
      sz = len;
    }
    start[d] = st;
    size[d] = sz;
  }
}

void rs_local_shape_offset(const rs_mesh *m, const rs_sharding *s, const rs_tensor *t,
                           const int64_t coord[RS_MAX_MESH_DIMS], int64_t shape[RS_MAX_DIMS],
                           int64_t offset[RS_MAX_DIMS]) {
  rs_local_box(m, s, t, coord, offset, shape);
  for (int d = 0; d < t->ndim; ++d)
    if (shape[d] == 0 && s->order_len[d] > 0) offset[d] = t->shape[d];
}

rs_status rs_shape_numel(int ndim, const int64_t *shape, int64_t *numel) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] < 0) return rs_fail(RS_ERR_INVALID, "shape[%d]: negative size", d);
    if (shape[d] && n > INT64_MAX / shape[d])
      return rs_fail(RS_ERR_OVERFLOW, "shape: element count overflows int64");
    n *= shape[d];
  }
  *numel = n;
  return RS_OK;
}

rs_status rs_tensor_nbytes(const rs_tensor *t, int64_t *nbytes) {
  int64_t n;
  rs_status st = rs_shape_numel(t->ndim, t->shape, &n);
  if (st) return st;
  int es = rs_dtype_size(t->dtype);
  if (es == 0) return rs_fail(RS_ERR_INVALID, "tensor.dtype: invalid");
  if (n > INT64_MAX / es) return rs_fail(RS_ERR_OVERFLOW, "tensor.shape: byte count overflows int64");
  *nbytes = n * es;
  return RS_OK;
}
