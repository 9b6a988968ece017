/* opt_internal.h - what the files of opt/ share: boxes, strided views, the compiled schedule and the
 * executor's entry points. Nothing here is public API. */
#ifndef RS_OPT_INTERNAL_H
#define RS_OPT_INTERNAL_H

#include <stdint.h>
#include "reshard/case.h"
#include "reshard/opt.h"

/* A box of the global tensor: start and size per tensor dim. */
typedef struct rs_box {
  int64_t start[RS_MAX_DIMS];
  int64_t size[RS_MAX_DIMS];
} rs_box;

int64_t rs_box_numel(int ndim, const rs_box *b);
/* Intersection of a and b into out; returns its element count (0 when empty). */
int64_t rs_box_intersect(int ndim, const rs_box *a, const rs_box *b, rs_box *out);

/* A strided view of bytes: ndim dims with sizes (elements) and strides (bytes). */
typedef struct rs_view {
  char *base;
  int esize;
  int ndim;
  int64_t size[RS_MAX_DIMS];
  int64_t stride[RS_MAX_DIMS];
} rs_view;

/* The region `region` of a row-major buffer that holds box `buf`. */
void rs_view_in_box(rs_view *v, void *data, int esize, int ndim, const rs_box *buf,
                    const rs_box *region);
/* A packed (contiguous, row-major) buffer of shape `size`. */
void rs_view_packed(rs_view *v, void *data, int esize, int ndim, const int64_t *size);
int64_t rs_view_bytes(const rs_view *v);
/* dst <- src (host memory). Shapes may differ as long as the byte counts agree: elements travel in
 * row-major order. */
void rs_view_copy(const rs_view *dst, const rs_view *src);
/* dst[i] <- src[i] for n pairs (host). */
rs_status rs_views_copy_batch(const rs_view *dst, const rs_view *src, int64_t n);
/* Pack a list of views into one contiguous buffer, or unpack it back (returns bytes moved). */
int64_t rs_views_pack(char *out, const rs_view *v, int n);
int64_t rs_views_unpack(const rs_view *v, int n, const char *in);

/* ---- the compiled schedule ---- */

/* Buffers a segment reads or writes, on the rank that owns them. */
enum { RS_BUF_IN = 0, RS_BUF_OUT = 1, RS_BUF_SLOT = 2, RS_BUF_RES = 3 };

/* Move box `box` from buffer sbuf of mesh position src to buffer dbuf of position dst. */
typedef struct rs_seg {
  int32_t src, dst;
  int8_t sbuf, dbuf;
  int32_t job;     /* reduction job of a SLOT/RES buffer, else -1 */
  int32_t contrib; /* slot index within the job (SLOT), else 0 */
  rs_box box;
} rs_seg;

/* The segments of one round between one ordered pair of positions (src != dst): one message. */
typedef struct rs_msg {
  int32_t src, dst;
  int64_t task;
  int32_t first, count; /* into the round's seg array */
  int64_t bytes;
} rs_msg;

typedef struct rs_round {
  int32_t nseg, nmsg, nlocal;
  rs_seg *seg;    /* messages' segments first (grouped), then local ones */
  rs_msg *msg;
  int32_t local0; /* index of the first local segment */
} rs_round;

/* One ordered reduction: the reducer gathers ncontrib pieces of `box` and folds them. */
typedef struct rs_job {
  int32_t reducer;
  rs_box box;
  int64_t numel;
  int64_t ws_off; /* byte offset of slot 0 in the reducer's workspace */
} rs_job;

typedef struct rs_sched {
  int ndim, esize, nranks;
  rs_dtype dtype;
  rs_box *in_box, *out_box; /* per position */
  int nrounds;              /* 1 (copy) or 2 (reduce, then distribute) */
  rs_round round[2];
  int32_t njob;
  rs_job *job;
  int64_t *ws_bytes;        /* per position: workspace the jobs need */
  /* reduction levels, ascending mesh dim; contribution index = mixed radix, level 0 fastest */
  int nlevel;
  int64_t level_n[RS_MAX_MESH_DIMS];
  int8_t level_op[RS_MAX_MESH_DIMS];
  int32_t ncontrib;
  /* partition divisors applied to the output, in ascending mesh-dim order */
  int ndiv;
  int64_t div[RS_MAX_MESH_DIMS];
  int64_t bytes_sent, bytes_local, messages;
} rs_sched;

/* Compile the schedule of src -> dst on mesh m for tensor t. */
rs_status rs_sched_compile(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                           const rs_sharding *dst, rs_sched **out);
void rs_sched_free(rs_sched *s);

/* Schedule cache of an rs_opt handle. */
rs_status rs_opt_get_sched(rs_opt *o, const rs_mesh *m, const rs_tensor *t,
                           const rs_sharding *src, const rs_sharding *dst, rs_sched **out,
                           int *hit);

/* Reusable scratch memory of an rs_opt handle (host). *fresh is 1 when newly allocated. */
void *rs_opt_scratch(rs_opt *o, int64_t bytes, int *fresh);

/* Fold the ncontrib slots of one job in canonical order into slot 0 (host). */
void rs_fold_job(const rs_sched *s, char *slot0, int64_t numel);

#endif
