/* mesh.c - device meshes: sizes, rank lists, coordinates (SPEC 2). */
#include <string.h>
#include "reshard/layout.h"
#include "core/mutant.h"
#include "core/checked.h"

rs_status rs_mesh_init(rs_mesh *m, int ndim, const int64_t *sizes, const int32_t *ranks) {
  if (ndim < 1 || ndim > RS_MAX_MESH_DIMS)
    return rs_fail(RS_ERR_INVALID, "mesh.shape: %d dims, expected 1..%d", ndim, RS_MAX_MESH_DIMS);
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) {
    if (sizes[i] < 1) return rs_fail(RS_ERR_INVALID, "mesh.shape[%d]: size %lld < 1", i, (long long)sizes[i]);
    if (!rs__mul_ok(n, sizes[i], &n) || n > RS_MAX_RANKS)
      return rs_fail(RS_ERR_INVALID, "mesh.shape: more than %d ranks", RS_MAX_RANKS);
  }
  memset(m, 0, sizeof *m);
  m->ndim = ndim;
  for (int i = 0; i < ndim; ++i) m->size[i] = sizes[i];
  m->nranks = (int32_t)n;
  for (int i = 0; i < n; ++i) {
    int32_t r = ranks ? ranks[i] : i;
    if (r < 0) return rs_fail(RS_ERR_INVALID, "mesh.ranks[%d]: negative rank %d", i, r);
    for (int j = 0; j < i; ++j)
      if (m->ranks[j] == r) return rs_fail(RS_ERR_INVALID, "mesh.ranks[%d]: rank %d appears twice", i, r);
    m->ranks[i] = r;
  }
  return RS_OK;
}

int rs_mesh_pos_of_rank(const rs_mesh *m, int32_t world_rank) {
  for (int i = 0; i < m->nranks; ++i)
    if (m->ranks[i] == world_rank) return i;
  return -1;
}

void rs_mesh_coord(const rs_mesh *m, int pos, int64_t coord[RS_MAX_MESH_DIMS]) {
  if (RS_MUTANT(214) && m->ndim > 1) {
    /* Mutant 214: column-major (the first mesh dim varies fastest), against SPEC 2. */
    for (int i = 0; i < m->ndim; ++i) {
      coord[i] = pos % m->size[i];
      pos = (int)(pos / m->size[i]);
    }
    return;
  }
  for (int i = m->ndim - 1; i >= 0; --i) {
    coord[i] = pos % m->size[i];
    pos = (int)(pos / m->size[i]);
  }
  /* Mutant 272: on 5-d and 6-d meshes whose dims 1 and 2 have one size, coordinates 1 and 2
   * trade places (still in range, so only a check against SPEC 2 sees it). */
  if (RS_MUTANT(272) && m->ndim >= 5 && m->size[1] == m->size[2]) {
    int64_t t = coord[1];
    coord[1] = coord[2];
    coord[2] = t;
  }
}

int rs_mesh_pos(const rs_mesh *m, const int64_t coord[RS_MAX_MESH_DIMS]) {
  int64_t p = 0;
  if (RS_MUTANT(214) && m->ndim > 1) {
    for (int i = m->ndim - 1; i >= 0; --i) p = p * m->size[i] + coord[i];
    return (int)p;
  }
  for (int i = 0; i < m->ndim; ++i) p = p * m->size[i] + coord[i];
  return (int)p;
}
