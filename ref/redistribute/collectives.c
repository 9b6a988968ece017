/* collectives.c - the plain collectives the reference executor runs over one group of ranks:
 * concatenation (all-gather), narrowing (chunk, and the split half of reduce-scatter and
 * all-to-all) and the canonical left-fold reduction. Written as the definitions read; the only
 * concession to speed is that rows are copied with memcpy and reductions go through the
 * vectorised rs_arith_fold, never one call per element. */
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "core/mutant.h"
#include "core/values.h"

void ref_buf_free(ref_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

rs_status ref_buf_alloc(ref_buf *b, int ndim, const int64_t *shape, int esize) {
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) numel *= shape[d];
  /* +1 so an empty tensor still owns a distinct, freeable block */
  unsigned char *p = malloc((size_t)(numel * esize) + 1);
  if (!p) return rs_fail(RS_ERR_NOMEM, "ref: out of memory (%lld elements)", (long long)numel);
  free(b->data);
  b->data = p;
  b->ndim = ndim;
  for (int d = 0; d < RS_MAX_DIMS; d++) b->shape[d] = d < ndim ? shape[d] : 0;
  b->numel = numel;
  return RS_OK;
}

rs_status ref_buf_copy(ref_buf *dst, const ref_buf *src, int esize) {
  rs_status st = ref_buf_alloc(dst, src->ndim, src->shape, esize);
  if (st == RS_OK && src->numel) memcpy(dst->data, src->data, (size_t)(src->numel * esize));
  return st;
}

void ref_split(int64_t len, int64_t n, int64_t i, int chunk, int64_t *size, int64_t *offset) {
  if (len % n == 0) {
    *size = len / n;
    *offset = i * (len / n);
    return;
  }
  int64_t c = (chunk && RS_MUTANT(1)) ? len / n : (len + n - 1) / n;
  int64_t start = c * i;
  if (start >= len) {
    if (RS_MUTANT(6)) {
      /* planted bug: an empty shard takes the tail of the tensor instead of nothing */
      *size = c < len ? c : len;
      *offset = len - *size;
      return;
    }
    *size = 0;
    *offset = len;
    return;
  }
  *size = (start + c < len ? start + c : len) - start;
  *offset = start;
}

/* Elements before tensor dim d (rows) and after it (one row's inner run). */
static void outer_inner(const ref_buf *b, int d, int64_t *outer, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int k = 0; k < d; k++) *outer *= b->shape[k];
  for (int k = d + 1; k < b->ndim; k++) *inner *= b->shape[k];
}

rs_status ref_concat(const ref_buf *const *pieces, int n, int d, int esize, int reverse,
                     int pad_even, ref_buf *out) {
  const ref_buf *p0 = pieces[0];
  if (d < 0 || d >= p0->ndim) return rs_fail(RS_ERR_INVALID, "all_gather: tensor dim %d", d);
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    const ref_buf *p = pieces[i];
    for (int k = 0; k < p0->ndim; k++)
      if (k != d && p->shape[k] != p0->shape[k])
        return rs_fail(RS_ERR_MISMATCH, "all_gather: piece %d has size %lld on dim %d, piece 0 %lld",
                       i, (long long)p->shape[k], k, (long long)p0->shape[k]);
    total += p->shape[d];
  }
  if (pad_even) total = p0->shape[d] * n; /* planted bug: the padded length is kept */
  int64_t shape[RS_MAX_DIMS];
  memcpy(shape, p0->shape, sizeof shape);
  shape[d] = total;
  rs_status st = ref_buf_alloc(out, p0->ndim, shape, esize);
  if (st != RS_OK) return st;
  if (pad_even) memset(out->data, 0, (size_t)(out->numel * esize));
  /* no bytes to move: an empty result must not walk the (possibly huge) product of its other dims */
  if (out->numel == 0) return RS_OK;
  int64_t outer, inner;
  outer_inner(p0, d, &outer, &inner);
  const size_t row = (size_t)(inner * esize);
  for (int64_t o = 0; o < outer; o++) {
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
      const ref_buf *p = pieces[reverse ? n - 1 - k : k];
      int64_t len = p->shape[d];
      if (pad_even) at = k * p0->shape[d];
      if (len && row)
        memcpy(out->data + ((size_t)(o * total + at)) * row,
               p->data + ((size_t)(o * len)) * row, (size_t)len * row);
      at += len;
    }
  }
  return RS_OK;
}

rs_status ref_narrow(const ref_buf *in, int d, int64_t offset, int64_t size, int esize,
                     ref_buf *out) {
  if (d < 0 || d >= in->ndim) return rs_fail(RS_ERR_INVALID, "split: tensor dim %d", d);
  if (offset < 0 || size < 0 || offset + size > in->shape[d])
    return rs_fail(RS_ERR_MISMATCH, "split: [%lld, %lld) outside dim %d of size %lld",
                   (long long)offset, (long long)(offset + size), d, (long long)in->shape[d]);
  int64_t shape[RS_MAX_DIMS];
  memcpy(shape, in->shape, sizeof shape);
  shape[d] = size;
  rs_status st = ref_buf_alloc(out, in->ndim, shape, esize);
  if (st != RS_OK) return st;
  int64_t outer, inner;
  outer_inner(in, d, &outer, &inner);
  const size_t row = (size_t)(inner * esize);
  const int64_t len = in->shape[d];
  if (size && row)
    for (int64_t o = 0; o < outer; o++)
      memcpy(out->data + (size_t)(o * size) * row, in->data + (size_t)(o * len + offset) * row,
             (size_t)size * row);
  return RS_OK;
}

rs_status ref_reduce(const ref_buf *const *pieces, int n, rs_dtype t, rs_redop op, ref_buf *out) {
  const int esize = rs_dtype_size(t);
  for (int i = 1; i < n; i++) {
    if (pieces[i]->ndim != pieces[0]->ndim ||
        memcmp(pieces[i]->shape, pieces[0]->shape, sizeof pieces[0]->shape) != 0)
      return rs_fail(RS_ERR_MISMATCH, "reduce: piece %d's shape differs from piece 0's", i);
  }
  /* planted bug: with more than two pieces the fold starts at coordinate 1 */
  int first = (RS_MUTANT(4) && n > 2) ? 1 : 0;
  rs_status st = ref_buf_copy(out, pieces[first], esize);
  if (st != RS_OK) return st;
  rs_redop fold_op = op;
  if (RS_MUTANT(13) && op == RS_MAX) fold_op = RS_MIN; /* planted bug: max folded as min */
  if (RS_MUTANT(200) && n > 2) {
    /* planted bug: the fold runs right to left, (v[n-1] op v[n-2]) op ... */
    if ((st = ref_buf_copy(out, pieces[n - 1], esize)) != RS_OK) return st;
    for (int i = n - 2; i >= 0; i--) rs_arith_fold(t, fold_op, out->data, pieces[i]->data, out->numel);
  } else if (RS_MUTANT(202) && n > 2) {
    /* planted bug: a pairwise tree ((v0 op v1) op (v2 op v3)) ..., as a ring/tree all-reduce would */
    ref_buf *tmp = calloc((size_t)n, sizeof *tmp);
    if (!tmp) return rs_fail(RS_ERR_NOMEM, "ref: out of memory");
    for (int i = 0; i < n && st == RS_OK; i++) st = ref_buf_copy(&tmp[i], pieces[i], esize);
    for (int w = 1; w < n && st == RS_OK; w *= 2)
      for (int i = 0; i + w < n; i += 2 * w) rs_arith_fold(t, fold_op, tmp[i].data, tmp[i + w].data, out->numel);
    if (st == RS_OK) memcpy(out->data, tmp[0].data, (size_t)(out->numel * esize));
    for (int i = 0; i < n; i++) ref_buf_free(&tmp[i]);
    free(tmp);
    if (st != RS_OK) return st;
  } else if (RS_MUTANT(201) && op == RS_AVG) {
    /* planted bug: avg divides every piece by n before the sum instead of once at the event */
    rs_arith_div(t, out->data, n, out->numel);
    for (int i = first + 1; i < n; i++) {
      ref_buf piece;
      memset(&piece, 0, sizeof piece);
      if ((st = ref_buf_copy(&piece, pieces[i], esize)) != RS_OK) return st;
      rs_arith_div(t, piece.data, n, piece.numel);
      rs_arith_fold(t, RS_SUM, out->data, piece.data, out->numel);
      ref_buf_free(&piece);
    }
    return RS_OK;
  } else {
    for (int i = first + 1; i < n; i++) rs_arith_fold(t, fold_op, out->data, pieces[i]->data, out->numel);
  }
  if (op == RS_AVG) {
    rs_arith_div(t, out->data, n, out->numel);
    if (RS_MUTANT(3)) rs_arith_div(t, out->data, n, out->numel); /* planted bug: divided twice */
  }
  return RS_OK;
}
