/* box.c - torch.chunk splits and each rank's box of the global tensor (SPEC 4). */
#include "core/box.h"
#include "core/mutant.h"
#include "core/checked.h"

void rs_split(int64_t len, int64_t n, int64_t i, int64_t *size, int64_t *offset) {
  if (len % n == 0) {
    *size = len / n;
    *offset = i * (len / n);
    return;
  }
  /* ceil(len / n) and the clipping below are written so that no intermediate exceeds len: a dim
   * may be as long as INT64_MAX, where len + n - 1, c * i and start + c could overflow. */
  int64_t c = len / n + (len % n != 0);
  if (i > 0 && c > (len - 1) / i) { /* c * i >= len without forming c * i when it would overflow */
    *size = 0;
    *offset = len;
    return;
  }
  int64_t start = c * i;
  if (start >= len) {
    *size = 0;
    *offset = len;
  } else {
    int64_t rest = len - start; /* > 0 */
    *size = c < rest ? c : rest;
    /* Mutant 270: the partial last chunk is not clipped at the end of the dim. */
    if (RS_MUTANT(270) && c > rest) *size = c;
    /* Mutant 277: an uneven split of a dim longer than 40 (beyond the old generator's sizes) into
     * 3+ pieces loses the last element of its last non-empty piece. */
    if (RS_MUTANT(277) && len > 40 && n >= 3 && c >= rest) (*size)--;
    *offset = start;
  }
}

void rs_box_of_coord(const int64_t *mesh_size, const rs_sharding *s, const rs_tensor *t,
                     const int64_t *coord, int64_t *start, int64_t *size) {
  for (int d = 0; d < t->ndim; ++d) {
    int64_t st = 0, sz = t->shape[d];
    for (int k = 0; k < s->order_len[d]; ++k) {
      int md = s->order[d][k];
      int64_t len, off;
      /* Mutant 271: the third level of a nested split splits the whole dim again. */
      rs_split(RS_MUTANT(271) && k >= 2 ? t->shape[d] : sz, mesh_size[md],
               /* Mutant 279: the fourth level of a nested split (a tensor dim on 4+ mesh dims)
                * takes the coordinate of the third level's mesh dim. */
               RS_MUTANT(279) && k >= 3 ? coord[s->order[d][k - 1]] % mesh_size[md] : coord[md], &len, &off);
      st += off;
      sz = len;
    }
    start[d] = st;
    size[d] = sz;
  }
}

void rs_coord_of_pos(int ndim, const int64_t *mesh_size, int64_t pos, int64_t *coord) {
  for (int i = ndim - 1; i >= 0; --i) {
    coord[i] = pos % mesh_size[i];
    pos /= mesh_size[i];
  }
}

void rs_local_box(const rs_mesh *m, const rs_sharding *s, const rs_tensor *t,
                  const int64_t coord[RS_MAX_MESH_DIMS], int64_t start[RS_MAX_DIMS],
                  int64_t size[RS_MAX_DIMS]) {
  rs_box_of_coord(m->size, s, t, coord, start, size);
}

void rs_shape_offset_of_coord(const int64_t *mesh_size, const rs_sharding *s, const rs_tensor *t,
                              const int64_t *coord, int64_t *shape, int64_t *offset) {
  rs_box_of_coord(mesh_size, s, t, coord, offset, shape);
  for (int d = 0; d < t->ndim; ++d)
    if (shape[d] == 0 && s->order_len[d] > 0) offset[d] = t->shape[d];
}

void rs_local_shape_offset(const rs_mesh *m, const rs_sharding *s, const rs_tensor *t,
                           const int64_t coord[RS_MAX_MESH_DIMS], int64_t shape[RS_MAX_DIMS],
                           int64_t offset[RS_MAX_DIMS]) {
  rs_shape_offset_of_coord(m->size, s, t, coord, shape, offset);
}

/* A shape with a zero dim has no elements, but its other dims still enter strides and products
 * (values, oracle, views), so the product of the non-zero sizes and its byte count must fit too. */
static rs_status shape_numel_at(const char *field, int ndim, const int64_t *shape, int64_t *numel) {
  *numel = 0;
  for (int d = 0; d < ndim; ++d)
    if (shape[d] < 0) return rs_fail(RS_ERR_INVALID, "%s[%d]: negative size", field, d);
  if (!rs__numel_ok(shape, ndim, numel))
    return rs_fail(RS_ERR_OVERFLOW, "%s: element count overflows int64", field);
  return RS_OK;
}

rs_status rs_shape_numel(int ndim, const int64_t *shape, int64_t *numel) {
  return shape_numel_at("shape", ndim, shape, numel);
}

rs_status rs__tensor_nbytes_at(const rs_tensor *t, const char *field, int64_t *nbytes) {
  int64_t n = 0;
  rs_status st = shape_numel_at(field, t->ndim, t->shape, &n);
  if (st) return st;
  int es = rs_dtype_size(t->dtype);
  if (es == 0) return rs_fail(RS_ERR_INVALID, "%s: dtype invalid", field);
  int64_t nz = 1, nzb;
  for (int d = 0; d < t->ndim; ++d)
    if (t->shape[d]) (void)rs__mul_ok(nz, t->shape[d], &nz); /* fits: checked by rs__numel_ok */
  if (!rs__mul_ok(nz, es, &nzb)) return rs_fail(RS_ERR_OVERFLOW, "%s: byte count overflows int64", field);
  *nbytes = n * es;
  return RS_OK;
}

rs_status rs_tensor_nbytes(const rs_tensor *t, int64_t *nbytes) { return rs__tensor_nbytes_at(t, "tensor.shape", nbytes); }
