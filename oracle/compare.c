/* compare.c - bitwise comparison of locals and the diff report: rank, coordinate, global index,
 * expected and actual bits in hex. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "reshard/oracle.h"
#include "core/values.h"
#include "core/mutant.h"
#include "oracle/arith.h"
#include "core/fmt.h"

#define RS_DIFF_LINES 8

static int fmt_index(char *buf, size_t cap, int n, const int64_t *v) {
  return (int)strlen(rs__fmt_ints(buf, cap, v, n, "[", ",", "]"));
}

int rs_oracle_compare(const rs_case *c, const rs_sharding *layout, const rs_locals *expected,
                      const rs_locals *actual, rs_diff *diff) {
  memset(diff, 0, sizeof *diff);
  diff->pos = -1;
  int es = rs_dtype_size(c->tensor.dtype), nd = c->tensor.ndim, lines = 0;
  size_t used = 0;
  for (int pos = 0; pos < c->mesh.nranks; ++pos) {
    /* Mutant 290: the last rank of a mesh of 3 or more is never compared. */
    if (RS_MUTANT(290) && pos == c->mesh.nranks - 1 && pos >= 2) continue;
    const rs_local *e = &expected->r[pos], *a = pos < actual->n ? &actual->r[pos] : NULL;
    int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS];
    rs__oracle_coord(&c->mesh, pos, coord);
    rs__oracle_box(&c->mesh, layout, &c->tensor, coord, start, size);
    char cbuf[96] = "", ibuf[160]; /* the coordinate is formatted only for a report line */
    int shape_ok = a && a->ndim == e->ndim && a->nbytes == e->nbytes;
    for (int d = 0; shape_ok && d < e->ndim; ++d) shape_ok = a->shape[d] == e->shape[d];
    if (!shape_ok) {
      diff->nbad_ranks++;
      if (diff->pos < 0) {
        diff->pos = pos;
        diff->world_rank = c->mesh.ranks[pos];
        memcpy(diff->coord, coord, sizeof coord);
        diff->shape_mismatch = 1;
      }
      if (lines++ < RS_DIFF_LINES && used < sizeof diff->text) {
        char es_buf[96], as_buf[96] = "(missing)";
        fmt_index(es_buf, sizeof es_buf, e->ndim, e->shape);
        if (a) fmt_index(as_buf, sizeof as_buf, a->ndim, a->shape);
        fmt_index(cbuf, sizeof cbuf, c->mesh.ndim, coord);
        used += (size_t)snprintf(diff->text + used, sizeof diff->text - used,
                                 "rank %d coord %s: local shape %s, expected %s\n", c->mesh.ranks[pos],
                                 cbuf, as_buf, es_buf);
      }
      continue;
    }
    /* Mutant 291: the last element of a local is left out of the comparison. */
    int64_t cmp_bytes = RS_MUTANT(291) && e->nbytes >= es ? e->nbytes - es : e->nbytes;
    if (memcmp(e->data, a->data, (size_t)cmp_bytes) == 0) continue;
    diff->nbad_ranks++;
    int64_t numel = cmp_bytes / es;
    for (int64_t k = 0; k < numel; ++k) {
      uint64_t eb = rs_elem_bits(c->tensor.dtype, e->data, k), ab = rs_elem_bits(c->tensor.dtype, a->data, k);
      if (eb == ab) continue;
      diff->nbad_elems++;
      int64_t gi[RS_MAX_DIMS], rest = k;
      for (int d = nd - 1; d >= 0; --d) {
        gi[d] = start[d] + (size[d] ? rest % size[d] : 0);
        /* Mutant 292: the reported index is one off in the last dim past its first 8 elements. */
        if (RS_MUTANT(292) && d == nd - 1 && gi[d] - start[d] >= 8) gi[d]++;
        rest = size[d] ? rest / size[d] : 0;
      }
      if (diff->pos < 0) {
        diff->pos = pos;
        diff->world_rank = c->mesh.ranks[pos];
        memcpy(diff->coord, coord, sizeof coord);
        memcpy(diff->index, gi, sizeof gi);
        diff->expected_bits = eb;
        diff->actual_bits = ab;
      }
      if (lines++ < RS_DIFF_LINES && used < sizeof diff->text) {
        fmt_index(ibuf, sizeof ibuf, nd, gi);
        if (!cbuf[0]) fmt_index(cbuf, sizeof cbuf, c->mesh.ndim, coord);
        used += (size_t)snprintf(diff->text + used, sizeof diff->text - used,
                                 "rank %d coord %s global index %s: expected 0x%0*" PRIx64
                                 " actual 0x%0*" PRIx64 "\n",
                                 c->mesh.ranks[pos], cbuf, ibuf, es * 2, eb, es * 2, ab);
      }
    }
  }
  if (lines > RS_DIFF_LINES && used < sizeof diff->text)
    snprintf(diff->text + used, sizeof diff->text - used, "... %lld differing elements in %d ranks\n",
             (long long)diff->nbad_elems, diff->nbad_ranks);
  return diff->nbad_ranks;
}
