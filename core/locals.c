/* locals.c - per-rank local tensors: allocation by layout, digests. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "reshard/case.h"

rs_status rs_locals_alloc(rs_locals *l, int n) {
  l->n = n;
  l->r = calloc((size_t)(n > 0 ? n : 1), sizeof *l->r);
  if (!l->r) return rs_fail(RS_ERR_NOMEM, "locals: out of memory");
  return RS_OK;
}

rs_status rs_local_resize(rs_local *l, int ndim, const int64_t *shape, int elem_size) {
  int64_t numel;
  rs_status st = rs_shape_numel(ndim, shape, &numel);
  if (st) return st;
  if (numel > INT64_MAX / elem_size) return rs_fail(RS_ERR_OVERFLOW, "local: byte count overflows");
  int64_t nbytes = numel * elem_size;
  void *p = realloc(l->data, (size_t)(nbytes > 0 ? nbytes : 1));
  if (!p) return rs_fail(RS_ERR_NOMEM, "local: cannot allocate %lld bytes", (long long)nbytes);
  l->data = p;
  l->nbytes = nbytes;
  l->ndim = ndim;
  for (int d = 0; d < ndim; ++d) l->shape[d] = shape[d];
  return RS_OK;
}

void rs_locals_free(rs_locals *l) {
  if (!l->r) return;
  for (int i = 0; i < l->n; ++i) free(l->r[i].data);
  free(l->r);
  l->r = NULL;
  l->n = 0;
}

rs_status rs_locals_for_layout(rs_locals *l, const rs_case *c, const rs_sharding *s) {
  rs_status st = rs_locals_alloc(l, c->mesh.nranks);
  if (st) return st;
  int es = rs_dtype_size(c->tensor.dtype);
  for (int pos = 0; pos < c->mesh.nranks; ++pos) {
    int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_box(&c->mesh, s, &c->tensor, coord, start, size);
    if ((st = rs_local_resize(&l->r[pos], c->tensor.ndim, size, es))) {
      rs_locals_free(l);
      return st;
    }
  }
  return RS_OK;
}

uint64_t rs_local_digest(const rs_local *l) {
  return (uint64_t)XXH3_64bits(l->data, (size_t)l->nbytes);
}
