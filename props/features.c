/* features.c - what a generated case exercises. The campaign tallies these so that a generator
 * which silently stops producing a feature (Partial(avg), reordered 2-way splits, 6-d meshes, ...)
 * fails the campaign instead of passing it with less coverage than it claims. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "props/features.h"

enum {
  F_UNEVEN, F_EMPTY, F_ORDER, F_ORDER_2WAY, F_NEST_3WAY, F_NEST_4WAY,
  F_P_SUM, F_P_AVG, F_P_MIN, F_P_MAX,
  F_MESH_5D, F_MESH_6D, F_TENSOR_0D, F_TENSOR_5D_PLUS, F_TENSOR_8D, F_NUMEL_BIG,
  F_RANKS_PERMUTED, F_RANKS_SPARSE,
  F_VALUES_BITS, F_VALUES_EXACT, F_VALUES_ORDER,
  F_GRAPH_BOUNDED,
  F_ENUM_PYTORCH, F_ZERO_FILL, F_PARTITION_ODD,
  F_DTYPE0, /* one per dtype */
  /* added after the dtypes, so the measured rates' indexes above keep their rows */
  F_INT_SUM_WRAPS = F_DTYPE0 + RS_DTYPE_COUNT,
  F_COUNT
};

/* Cases above this many elements count as "numel_big" (the old generator's ceiling). */
#define BIG_NUMEL 4096

static const char *const NAMES[F_DTYPE0] = {
    "uneven_shards", "empty_shards", "order_nondefault", "order_nondefault_2way",
    "split_3way", "split_4way_plus",
    "partial_sum", "partial_avg", "partial_min", "partial_max",
    "mesh_5d", "mesh_6d", "tensor_0d", "tensor_5d_plus", "tensor_8d", "numel_over_4096",
    "ranks_permuted", "ranks_sparse",
    "values_bits", "values_exact", "values_order",
    "graph_bounded",
    "enumeration_pytorch", "zero_fill", "partition_2plus_odd_order_float"};

int rs_feature_count(void) { return F_COUNT; }

const char *rs_feature_name(int f) {
  static char dt[F_COUNT][32];
  if (f < 0 || f >= F_COUNT) return "?";
  if (f < F_DTYPE0) return NAMES[f];
  if (f == F_INT_SUM_WRAPS) return "int_sum_wraps";
  if (!dt[f][0]) snprintf(dt[f], sizeof dt[f], "dtype_%s", rs_dtype_name((rs_dtype)(f - F_DTYPE0)));
  return dt[f];
}

/* The value modes by the name the case codec writes, so a mode added later ("order") is counted
 * under its name without props knowing its enum value. -1: not a mode the codec names. */
static int value_feature(rs_value_mode v) {
  static int cache[8], done[8];
  unsigned i = (unsigned)v;
  if (i >= 8) return -1;
  if (!done[i]) {
    done[i] = 1;
    cache[i] = -1;
    rs_case c;
    memset(&c, 0, sizeof c);
    c.values = v;
    char *j = rs_case_to_json(&c);
    const char *p = j ? strstr(j, "\"values\"") : NULL;
    if (p) {
      p += 8;
      while (*p == ':' || *p == ' ') p++;
      if (!strncmp(p, "\"bits\"", 6)) cache[i] = F_VALUES_BITS;
      else if (!strncmp(p, "\"exact\"", 7)) cache[i] = F_VALUES_EXACT;
      else if (!strncmp(p, "\"order\"", 7)) cache[i] = F_VALUES_ORDER;
    }
    free(j);
  }
  return cache[i];
}

/* 1 when the codec knows an "order" value mode (then campaigns must produce it). */
static int have_order_values(void) {
  for (int v = 0; v < 8; v++)
    if (value_feature((rs_value_mode)v) == F_VALUES_ORDER) return 1;
  return 0;
}

static void layout_features(const rs_case *c, const rs_sharding *s, int *hit) {
  const rs_tensor *t = &c->tensor;
  int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) {
    lo[d] = INT64_MAX;
    hi[d] = -1;
    if (s->order_len[d] == 3) hit[F_NEST_3WAY] = 1;
    if (s->order_len[d] >= 4) hit[F_NEST_4WAY] = 1;
    if (s->order_len[d] >= 2) {
      for (int k = 0; k + 1 < s->order_len[d]; k++)
        if (s->order[d][k] > s->order[d][k + 1]) {
          hit[F_ORDER] = 1;
          if (s->order_len[d] == 2) hit[F_ORDER_2WAY] = 1;
        }
    }
  }
  for (int pos = 0; pos < c->mesh.nranks; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS], st[RS_MAX_DIMS], sz[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_box(&c->mesh, s, t, coord, st, sz);
    for (int d = 0; d < t->ndim; d++) {
      if (sz[d] < lo[d]) lo[d] = sz[d];
      if (sz[d] > hi[d]) hi[d] = sz[d];
    }
  }
  for (int d = 0; d < t->ndim; d++) {
    if (lo[d] != hi[d]) hit[F_UNEVEN] = 1;
    if (lo[d] == 0 && t->shape[d] > 0) hit[F_EMPTY] = 1;
  }
  for (int m = 0; m < s->mesh_ndim; m++)
    if (s->p[m].kind == RS_PARTIAL && s->p[m].op >= 0 && s->p[m].op <= RS_MAX) hit[F_P_SUM + s->p[m].op] = 1;
}

void rs__features_of_case(const rs_case *c, int *hit) {
  memset(hit, 0, sizeof(int) * F_COUNT);
  layout_features(c, &c->src, hit);
  layout_features(c, &c->dst, hit);
  hit[F_MESH_5D] = c->mesh.ndim == 5;
  hit[F_MESH_6D] = c->mesh.ndim == 6;
  hit[F_TENSOR_0D] = c->tensor.ndim == 0;
  hit[F_TENSOR_5D_PLUS] = c->tensor.ndim >= 5;
  hit[F_TENSOR_8D] = c->tensor.ndim == 8;
  int64_t numel = 1;
  for (int d = 0; d < c->tensor.ndim; d++) numel *= c->tensor.shape[d];
  hit[F_NUMEL_BIG] = numel > BIG_NUMEL;
  int perm = 0, sparse = 0;
  for (int i = 0; i < c->mesh.nranks; i++) {
    perm |= c->mesh.ranks[i] != i;
    sparse |= c->mesh.ranks[i] >= c->mesh.nranks;
  }
  hit[F_RANKS_PERMUTED] = perm && !sparse;
  hit[F_RANKS_SPARSE] = sparse;
  int vf = value_feature(c->values);
  if (vf >= 0) hit[vf] = 1;
  hit[F_GRAPH_BOUNDED] = rs_gen_graph_bounded(NULL, c);
  hit[F_ENUM_PYTORCH] = c->enumeration == RS_ENUM_PYTORCH;
  /* 2+ mesh dims of non-power-of-2 sizes partitioned into P(sum) at once, on order values and a
   * float dtype: the order of the partition divisions shows in the bits */
  int odd_parts = 0;
  for (int m = 0; m < c->mesh.ndim; m++) {
    rs_placement a = c->src.p[m], b = c->dst.p[m];
    int64_t n = c->mesh.size[m];
    if (b.kind == RS_PARTIAL && b.op == RS_SUM && a.kind == RS_SHARD) hit[F_ZERO_FILL] = 1;
    if (b.kind == RS_PARTIAL && b.op == RS_SUM && a.kind == RS_REPLICATE && (n & (n - 1))) odd_parts++;
  }
  hit[F_PARTITION_ODD] = odd_parts >= 2 && c->values == RS_VALUES_ORDER && rs_dtype_is_float(c->tensor.dtype) &&
                         rs_dtype_reducible(c->tensor.dtype);
  if ((unsigned)c->tensor.dtype < RS_DTYPE_COUNT) hit[F_DTYPE0 + c->tensor.dtype] = 1;
  /* an integer Partial(sum) reduced on wrap values (the dtype's whole range): its sums leave the
   * dtype, so the contract's wrap-around is what the oracle and the backend must agree on */
  int sum_reduced = 0;
  for (int m = 0; m < c->mesh.ndim; m++)
    if (c->src.p[m].kind == RS_PARTIAL && c->src.p[m].op == RS_SUM &&
        !(c->dst.p[m].kind == RS_PARTIAL && c->dst.p[m].op == RS_SUM))
      sum_reduced = 1;
  hit[F_INT_SUM_WRAPS] = sum_reduced && c->values == RS_VALUES_WRAP && rs_dtype_reducible(c->tensor.dtype) &&
                         !rs_dtype_is_float(c->tensor.dtype);
}

static int dtype_allowed(const rs_gen_opts *o, rs_dtype t) {
  if (o->dtypes && !(o->dtypes & (1u << t))) return 0;
  return o->partial != RS_GEN_PARTIAL_OFTEN || rs_dtype_reducible(t);
}

int rs__feature_required(const rs_gen_opts *o, int f) {
  int reducible = 0;
  for (int t = 0; t < RS_DTYPE_COUNT; t++) reducible |= dtype_allowed(o, (rs_dtype)t) && rs_dtype_reducible((rs_dtype)t);
  int partial = o->partial != RS_GEN_PARTIAL_NONE && reducible;
  switch (f) {
    case F_TENSOR_0D: return 1;
    case F_UNEVEN: case F_EMPTY: return o->max_tensor_dims >= 1;
    case F_ORDER: case F_ORDER_2WAY: return o->orders && o->max_mesh_dims >= 2 && o->max_tensor_dims >= 1;
    case F_P_SUM: case F_P_AVG: case F_P_MIN: case F_P_MAX:
      return partial && (!o->ops || (o->ops & (1u << (f - F_P_SUM))));
    case F_NEST_3WAY: return o->max_mesh_dims >= 3 && o->max_tensor_dims >= 1;
    case F_NEST_4WAY: return o->max_mesh_dims >= 4 && o->max_tensor_dims >= 1;
    case F_MESH_5D: return o->max_mesh_dims >= 5;
    case F_MESH_6D: return o->max_mesh_dims >= 6;
    case F_TENSOR_5D_PLUS: return o->max_tensor_dims >= 5;
    case F_TENSOR_8D: return o->max_tensor_dims >= 8;
    case F_NUMEL_BIG: {
      /* required where ordinary draws reach it: every dim up to 16 (most draws are; bigger dims
       * are rare), so 4+ tensor dims, unless the element bounds rule it out */
      int64_t reach = 1, typ = o->max_dim > 0 && o->max_dim < 16 ? o->max_dim : 16;
      for (int d = 0; d < o->max_tensor_dims && reach <= BIG_NUMEL; d++) reach *= typ;
      return o->max_numel > BIG_NUMEL && o->max_work > BIG_NUMEL && reach > BIG_NUMEL;
    }
    case F_RANKS_PERMUTED: return o->world_size > 1 || (o->rank_lists & RS_GEN_RANKS_PERMUTED);
    case F_RANKS_SPARSE: return o->world_size > 1 || (o->rank_lists & RS_GEN_RANKS_SPARSE);
    case F_VALUES_BITS: return o->partial != RS_GEN_PARTIAL_OFTEN;
    /* --order-share 100 puts every Partial case on order values, 0 none */
    case F_VALUES_EXACT: return partial && o->order_share < 100;
    case F_VALUES_ORDER: return partial && have_order_values() && o->order_share > 0;
    case F_GRAPH_BOUNDED: return 0; /* how often the graph properties were bounded: a figure, not a goal */
    case F_ENUM_PYTORCH: return o->enumerations != RS_GEN_ENUM_SEED;
    case F_ZERO_FILL: return o->enumerations != RS_GEN_ENUM_SEED && partial && (!o->ops || (o->ops & (1u << RS_SUM)));
    case F_PARTITION_ODD: {
      int fl = 0;
      const rs_dtype f[] = {RS_F32, RS_BF16, RS_F64, RS_F16};
      for (int i = 0; i < 4; i++) fl |= dtype_allowed(o, f[i]);
      return fl && partial && o->max_mesh_dims >= 2 && o->order_share > 0 && o->max_ranks >= 9 &&
             (o->world_size <= 0 || o->world_size >= 9) && (!o->ops || (o->ops & (1u << RS_SUM)));
    }
    case F_INT_SUM_WRAPS: {
      int ints = 0;
      const rs_dtype it[] = {RS_I64, RS_I32, RS_I16, RS_I8, RS_U8};
      for (int i = 0; i < 5; i++) ints |= dtype_allowed(o, it[i]);
      return ints && partial && o->order_share > 0 && (!o->ops || (o->ops & (1u << RS_SUM)));
    }
    default:
      return f >= F_DTYPE0 && f < F_INT_SUM_WRAPS && dtype_allowed(o, (rs_dtype)(f - F_DTYPE0));
  }
}

/* ---- designed rates and the one coverage gate (docs/harness.md, "Feature coverage") ---- */

/* 1 when o draws like the default generator (rs_gen_opts_default; any enumerations): the only
 * options whose feature rates were measured. Narrowed options (--max-mesh-dims, --dtypes, an MPI
 * world, ...) move the rates, so their features are held to "at least once" only. */
static int default_draws(const rs_gen_opts *o) {
  rs_gen_opts d;
  rs_gen_opts_default(&d);
  return o->max_ranks == d.max_ranks && o->max_mesh_dims == d.max_mesh_dims &&
         o->max_tensor_dims == d.max_tensor_dims && o->world_size == d.world_size && o->max_numel == d.max_numel &&
         o->max_work == d.max_work && o->max_dim == d.max_dim && o->dtypes == d.dtypes && o->ops == d.ops &&
         o->partial == d.partial && o->rank_lists == d.rank_lists && o->orders == d.orders &&
         o->graph_states == d.graph_states && o->order_share == d.order_share;
}

/* Measured share of cases exercising each feature at the default options, per enumerations mode
 * (SEED, BOTH, PYTORCH): the mean of seeds 1, 2 and 3 at 20,000 cases each (tests/test_feature_rates.c
 * measures them again and fails when one moved by more than a fifth). 0: not measured (the
 * feature is not required, or is a figure only). */
static const struct {
  const char *name; /* rs_feature_name: the table does not depend on the enum's order */
  double rate[3];
} RATES[] = {
#include "props/feature_rates.inc"
};

double rs__feature_rate_measured(int f, int enumerations) {
  int col = enumerations == RS_GEN_ENUM_PYTORCH ? 2 : enumerations == RS_GEN_ENUM_BOTH ? 1 : 0;
  const char *name = rs_feature_name(f);
  for (size_t i = 0; i < sizeof RATES / sizeof RATES[0]; i++)
    if (!strcmp(RATES[i].name, name)) return RATES[i].rate[col];
  return 0;
}

double rs__feature_rate(const rs_gen_opts *o, int f) {
  if (f < 0 || f >= F_COUNT || !rs__feature_required(o, f)) return 0;
  double r = default_draws(o) ? rs__feature_rate_measured(f, o->enumerations) : 0;
  return r > 0 ? r : -1;
}
