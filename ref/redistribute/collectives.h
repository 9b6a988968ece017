/* collectives.h - ref/'s private helpers: per-rank working buffers and the plain collectives of
 * SPEC 6 over one group of ranks (the ranks that differ only in one mesh dim's coordinate).
 * Not part of the public API. */
#ifndef RESHARD_REF_COLLECTIVES_H
#define RESHARD_REF_COLLECTIVES_H

#include "reshard/case.h"

/* One rank's local tensor while a plan runs: row-major, contiguous, malloc'd. */
typedef struct ref_buf {
  int ndim;
  int64_t shape[RS_MAX_DIMS];
  int64_t numel;
  unsigned char *data;
} ref_buf;

void ref_buf_free(ref_buf *b);
/* A new buffer of the given shape (contents undefined), replacing b's. */
rs_status ref_buf_alloc(ref_buf *b, int ndim, const int64_t *shape, int esize);
rs_status ref_buf_copy(ref_buf *dst, const ref_buf *src, int esize);

/* torch.chunk's split of len into n pieces, piece i (SPEC 4); `chunk` marks the R -> S use. */
void ref_split(int64_t len, int64_t n, int64_t i, int chunk, int64_t *size, int64_t *offset);

/* out = the n pieces concatenated along tensor dim d, in coordinate order. Every other dim
 * must agree. `reverse` (a planted bug) concatenates in reverse order. */
rs_status ref_concat(const ref_buf *const *pieces, int n, int d, int esize, int reverse,
                     int pad_even, ref_buf *out);
/* out = in restricted to [offset, offset + size) along tensor dim d. */
rs_status ref_narrow(const ref_buf *in, int d, int64_t offset, int64_t size, int esize,
                     ref_buf *out);
/* out = the canonical reduction of the n pieces (SPEC 5): left fold over coordinates 0..n-1,
 * avg as a sum divided once by n. */
rs_status ref_reduce(const ref_buf *const *pieces, int n, rs_dtype t, rs_redop op, ref_buf *out);

#endif
