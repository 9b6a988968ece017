/* layout.h - device meshes, placements, shard order and local boxes (SPEC 2-4). */
#ifndef RESHARD_LAYOUT_H
#define RESHARD_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include "reshard/dtype.h"
#include "reshard/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_MAX_MESH_DIMS 6
#define RS_MAX_DIMS 8
#define RS_MAX_RANKS 1024

/* A mesh: sizes and the row-major list of world ranks it holds. */
typedef struct rs_mesh {
  int ndim;
  int64_t size[RS_MAX_MESH_DIMS];
  int32_t nranks; /* product of sizes */
  int32_t ranks[RS_MAX_RANKS];
} rs_mesh;

typedef enum rs_pkind { RS_REPLICATE = 0, RS_SHARD = 1, RS_PARTIAL = 2 } rs_pkind;
typedef enum rs_redop { RS_SUM = 0, RS_AVG = 1, RS_MIN = 2, RS_MAX = 3 } rs_redop;

typedef struct rs_placement {
  int8_t kind; /* rs_pkind */
  int8_t dim;  /* tensor dim for RS_SHARD (may be negative until normalized) */
  int8_t op;   /* rs_redop for RS_PARTIAL */
} rs_placement;

/* Placements of one tensor on a mesh plus its shard order:
 * order[d][0..order_len[d]) lists the mesh dims with S(d) in the order they split d. */
typedef struct rs_sharding {
  int mesh_ndim;
  rs_placement p[RS_MAX_MESH_DIMS];
  int8_t order_len[RS_MAX_DIMS];
  int8_t order[RS_MAX_DIMS][RS_MAX_MESH_DIMS];
} rs_sharding;

typedef struct rs_tensor {
  rs_dtype dtype;
  int ndim;
  int64_t shape[RS_MAX_DIMS];
} rs_tensor;

/* ---- meshes ---- */
/* ranks == NULL gives the default 0..N-1. Checks sizes, distinct non-negative ranks. */
rs_status rs_mesh_init(rs_mesh *m, int ndim, const int64_t *sizes, const int32_t *ranks);
/* Position of a world rank in the mesh's rank list, or -1 if it holds nothing. */
int rs_mesh_pos_of_rank(const rs_mesh *m, int32_t world_rank);
void rs_mesh_coord(const rs_mesh *m, int pos, int64_t coord[RS_MAX_MESH_DIMS]);
int rs_mesh_pos(const rs_mesh *m, const int64_t coord[RS_MAX_MESH_DIMS]);

/* ---- torch.chunk split (SPEC 4) ---- */
void rs_split(int64_t len, int64_t n, int64_t i, int64_t *size, int64_t *offset);

/* ---- placements and shard order ---- */
rs_placement rs_pl_replicate(void);
rs_placement rs_pl_shard(int dim);
rs_placement rs_pl_partial(rs_redop op);
int rs_pl_equal(rs_placement a, rs_placement b);
/* Normalize negative shard dims and fill the default shard order (ascending mesh dims). */
rs_status rs_sharding_set_default_order(rs_sharding *s, int tensor_ndim);
/* Full check of a sharding against a mesh and tensor (SPEC 3, 9). Normalizes negative dims. The
 * shard order must be complete: one parsed by rs_parse_placements needs rs_sharding_set_default_order
 * or rs_parse_order first (an empty order is refused, the message says so). */
rs_status rs_sharding_validate(rs_sharding *s, const rs_mesh *m, const rs_tensor *t);
int rs_sharding_is_default_order(const rs_sharding *s, int tensor_ndim);
int rs_sharding_equal(const rs_sharding *a, const rs_sharding *b, int tensor_ndim);
int rs_sharding_has_partial(const rs_sharding *s);
/* Equal up to where mesh dims of size 1 sit in the shard orders (they split nothing, so the boxes
 * are the same). m == NULL means rs_sharding_equal. */
int rs_sharding_equivalent(const rs_mesh *m, const rs_sharding *a, const rs_sharding *b, int tensor_ndim);

/* ---- boxes ---- */
/* The rank's box in global coordinates: start[d], size[d]. Empty dims have size 0. */
void rs_local_box(const rs_mesh *m, const rs_sharding *s, const rs_tensor *t,
                  const int64_t coord[RS_MAX_MESH_DIMS], int64_t start[RS_MAX_DIMS],
                  int64_t size[RS_MAX_DIMS]);
/* PyTorch's compute_local_shape_and_global_offset: empty dims report offset = global size. */
void rs_local_shape_offset(const rs_mesh *m, const rs_sharding *s, const rs_tensor *t,
                           const int64_t coord[RS_MAX_MESH_DIMS], int64_t shape[RS_MAX_DIMS],
                           int64_t offset[RS_MAX_DIMS]);
/* Element count and byte count of a shape, with overflow checks. */
rs_status rs_shape_numel(int ndim, const int64_t *shape, int64_t *numel);
rs_status rs_tensor_nbytes(const rs_tensor *t, int64_t *nbytes);

/* ---- text forms (CLI syntax, PyTorch notation) ---- */
rs_status rs_parse_dims(const char *text, int max, int64_t *out, int *n); /* "4x2", "" -> 0 dims */
rs_status rs_parse_ranks(const char *text, int32_t *out, int max, int *n); /* "3,1,2,0" */
rs_status rs_parse_placement(const char *text, rs_placement *out);        /* R S0 S(1) P P(avg) */
/* "S0,R,P": the placements only. The shard order is left EMPTY (the text does not say the tensor's
 * rank, which S(-1) and the default order need), so *out is not yet a valid sharding: follow with
 * rs_sharding_set_default_order(out, tensor_ndim) or rs_parse_order(text, out, tensor_ndim), then
 * rs_sharding_validate, before any layout function. docs/library.md has a complete example. */
rs_status rs_parse_placements(const char *text, rs_sharding *out);
/* "0:1,0;1:0": tensor dim 0 split by mesh dim 1 then 0; tensor dim 1 by mesh dim 0. */
rs_status rs_parse_order(const char *text, rs_sharding *s, int tensor_ndim);
int rs_format_placement(rs_placement p, char *buf, size_t cap);
/* PyTorch's format_shard_order_str, e.g. "S(0)[1]S(0)[0]R". */
int rs_format_sharding(const rs_sharding *s, char *buf, size_t cap);
/* "0:1,0;1:0", the CLI form; "" for no shards. */
int rs_format_order(const rs_sharding *s, int tensor_ndim, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
