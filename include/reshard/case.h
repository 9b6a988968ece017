/* case.h - one redistribute case (mesh, tensor, src/dst layouts, data seed) and its JSON codec;
 * per-rank local tensors. */
#ifndef RESHARD_CASE_H
#define RESHARD_CASE_H

#include "reshard/layout.h"
#include "reshard/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SPEC 8 test values: raw bits (copy-only), exact integers (any order gives the same bits),
 * ordinary random finite values (results depend on the event sequence, SPEC 5) and wrap: order
 * values whose integers take the dtype's whole range (I64: +-2^62), so integer sums leave the dtype
 * and wrap around (SPEC 8; float dtypes: as order). */
typedef enum rs_value_mode {
  RS_VALUES_BITS = 0,
  RS_VALUES_EXACT = 1,
  RS_VALUES_ORDER = 2,
  RS_VALUES_WRAP = 3
} rs_value_mode;

typedef struct rs_case {
  char name[128];
  rs_mesh mesh;
  rs_tensor tensor;
  rs_sharding src, dst;
  uint64_t seed;
  rs_value_mode values;
  rs_planner_kind planner;
  rs_cost_model cost;
  rs_enumeration enumeration; /* the planner's transition set (JSON "enumeration", default seed) */
} rs_case;

/* Validate everything (mesh, tensor byte size, both shardings, partial-op mixing, value mode).
 * Normalizes negative shard dims. */
rs_status rs_case_validate(rs_case *c);
/* Everything rs_case_validate checks except the test values (a plan needs none: `reshard plan`
 * plans cases whose dtype cannot hold exact values, as PyTorch does; commands that fill values
 * use rs_case_validate). */
rs_status rs_case_validate_layout(rs_case *c);
/* The value mode a case needs: exact when any Partial appears in src or dst, else bits. */
rs_value_mode rs_case_default_values(const rs_case *c);
/* RS_OK when the case's dtype can hold its value mode for its mesh: exact values need a non-zero
 * range after the headroom of every partial fold; order values need sums that cannot overflow.
 * Otherwise RS_ERR_UNSUPPORTED naming the values field (a generator draws another case). */
rs_status rs_case_check_values(const rs_case *c);
/* Planner the case runs with once AUTO is resolved (graph if any non-default shard order). */
rs_planner_kind rs_case_resolve_planner(const rs_case *c);

/* JSON codec. The parser ignores unknown top-level keys (fixtures add "expected", "pytorch"). */
rs_status rs_case_from_json(const char *text, rs_case *out);
/* Errors name the file first ("PATH: field: ..."). */
rs_status rs_case_from_file(const char *path, rs_case *out);
/* A whole file as a malloc'd NUL-terminated string (caller frees), or NULL with rs_last_error set. */
char *rs_read_text(const char *path);
/* Returns a malloc'd JSON string (caller frees) or NULL with rs_last_error set. */
char *rs_case_to_json(const rs_case *c);

/* One rank's local tensor. */
typedef struct rs_local {
  int ndim;
  int64_t shape[RS_MAX_DIMS];
  int64_t nbytes;
  void *data;
} rs_local;

/* Local tensors indexed by mesh position (0..mesh.nranks-1). */
typedef struct rs_locals {
  int n;
  rs_local *r;
} rs_locals;

rs_status rs_locals_alloc(rs_locals *l, int n);
rs_status rs_local_resize(rs_local *l, int ndim, const int64_t *shape, int elem_size);
void rs_locals_free(rs_locals *l);
/* Empty boxes of a layout: allocate each rank's buffer with its box shape. */
rs_status rs_locals_for_layout(rs_locals *l, const rs_case *c, const rs_sharding *s);
/* xxh3-64 of a local's bytes. */
uint64_t rs_local_digest(const rs_local *l);
/* Fill every mesh rank's source local tensor for the case's src layout with the case's test values
 * (bits, exact or order mode), a pure function of (seed, global index). */
rs_status rs_make_source(const rs_case *c, rs_locals *out);

#ifdef __cplusplus
}
#endif
#endif
