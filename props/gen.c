/* gen.c - redistribute cases decoded from a choice stream. Every choice is drawn so that 0 means
 * the simplest option (one mesh dim, size 1, default ranks, F32, Replicate, default order), which
 * is what lets the shrinker reach small cases by lowering and deleting draws. Tables below are
 * monotone for the same reason: a smaller draw never gives a bigger case. */
#include <string.h>
#include "props/props.h"
#include "core/mutant.h"

enum { FAM_SUMAVG = 0, FAM_MIN, FAM_MAX };

void rs_gen_opts_default(rs_gen_opts *o) {
  memset(o, 0, sizeof *o);
  o->max_ranks = 64;
  o->max_mesh_dims = RS_MAX_MESH_DIMS;
  o->max_tensor_dims = RS_MAX_DIMS;
  o->max_numel = 1 << 14;
  o->max_work = 1 << 16;
  o->max_dim = 64;
  o->partial = RS_GEN_PARTIAL_SOME;
  o->rank_lists = RS_GEN_RANKS_PERMUTED | RS_GEN_RANKS_SPARSE;
  o->orders = 1;
  o->graph_states = 729;
  o->order_share = 50;
}

static int64_t graph_states(int mesh_ndim, int tensor_ndim) {
  int64_t n = 1;
  for (int i = 0; i < mesh_ndim && n <= ((int64_t)1 << 40); i++) n *= tensor_ndim + 2;
  return n;
}

int rs_gen_graph_bounded(const rs_gen_opts *o, const rs_case *c) {
  int64_t bound = o && o->graph_states > 0 ? o->graph_states : 729;
  return graph_states(c->mesh.ndim, c->tensor.ndim) > bound;
}

#define PICK(ch, tbl) (tbl)[rs_draw((ch), sizeof(tbl) / sizeof((tbl)[0]))]

static void shuffle_prefix(rs_choices *ch, int32_t *a, int len, int take) {
  for (int i = 0; i < take && i < len; i++) {
    int j = i + (int)rs_draw(ch, (uint64_t)(len - i));
    int32_t t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

static const int MESH_ND[] = {1, 1, 2, 2, 2, 3, 3, 4, 5, 6};
static const int MESH_SZ[] = {1, 2, 2, 2, 2, 3, 3, 4, 4, 5, 6, 8};
static const rs_dtype DTYPES[] = {RS_F32, RS_F64, RS_I32, RS_BF16, RS_F16, RS_I64,
                                  RS_I16, RS_I8,  RS_U8,  RS_BOOL, RS_F8_E4M3, RS_F8_E5M2};
static const int TENSOR_ND[] = {0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 5, 6, 7, 8};

/* The dtype table filtered by the options' mask, in the table's order (0 stays the simplest). */
static rs_dtype gen_dtype(rs_choices *ch, const rs_gen_opts *o) {
  rs_dtype ok[sizeof DTYPES / sizeof DTYPES[0]];
  int n = 0;
  for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++) {
    rs_dtype t = DTYPES[i];
    if (o->dtypes && !(o->dtypes & (1u << t))) continue;
    if (o->partial == RS_GEN_PARTIAL_OFTEN && !rs_dtype_reducible(t)) continue;
    ok[n++] = t;
  }
  if (n == 0) return RS_F32;
  return ok[rs_draw(ch, (uint64_t)n)];
}

/* Sizes drawn, then the rank list: default, a permutation, or a subset of a bigger world. */
static rs_status gen_ranks(rs_choices *ch, const rs_gen_opts *o, int nd, int64_t *size, rs_mesh *m) {
  int maxr = o->max_ranks < 1 ? 1 : o->max_ranks;
  if (o->world_size > 0 && maxr > o->world_size) maxr = o->world_size;
  if (maxr > RS_MAX_RANKS) maxr = RS_MAX_RANKS;
  int64_t prod = 1;
  for (int i = 0; i < nd; i++) prod *= size[i];
  /* Too many ranks: shave the largest dim (deterministic, so replay needs no extra draws). */
  while (prod > maxr) {
    int big = 0;
    for (int i = 1; i < nd; i++)
      if (size[i] >= size[big]) big = i;
    prod = prod / size[big] * (size[big] - 1);
    size[big]--;
  }
  int n = (int)prod;
  int32_t pool[RS_MAX_RANKS];
  int mode = (int)rs_draw(ch, 8); /* 0-3 default, 4-5 permutation, 6-7 subset of a bigger world */
  /* Mutant 263: sparse rank lists (a subset of a bigger world) are never produced. */
  if (RS_MUTANT(263) && mode >= 6) mode = 4;
  if (mode >= 6 && !(o->rank_lists & RS_GEN_RANKS_SPARSE) && o->world_size <= 0) mode = 4;
  if (mode >= 4 && mode < 6 && !(o->rank_lists & RS_GEN_RANKS_PERMUTED)) mode = 0;
  if (mode < 4 && o->world_size <= 0) return rs_mesh_init(m, nd, size, NULL);
  int world = n;
  if (mode >= 6) {
    world = o->world_size > 0 ? o->world_size : n + 1 + (int)rs_draw(ch, (uint64_t)n + 8);
    if (world > RS_MAX_RANKS) world = RS_MAX_RANKS;
  }
  for (int i = 0; i < world; i++) pool[i] = i;
  if (mode >= 4) shuffle_prefix(ch, pool, world, n);
  return rs_mesh_init(m, nd, size, pool);
}

static int64_t gen_dim_size(rs_choices *ch, const rs_gen_opts *o, const rs_mesh *m) {
  int64_t v, ms, maxd = o->max_dim > 0 ? o->max_dim : 64;
  int kind = (int)rs_draw(ch, 6);
  switch (kind) {
    case 0: v = (int64_t)rs_draw(ch, 4); break; /* often smaller than a mesh dim: empty shards */
    case 1: v = (int64_t)rs_draw(ch, 9); break;
    case 2: v = (int64_t)rs_draw(ch, 17); break;
    case 3: v = (int64_t)rs_draw(ch, (uint64_t)maxd + 1); break;
    default:
      /* sizes tied to a mesh dim: an even split, or just past one (uneven) */
      ms = m->size[rs_draw(ch, (uint64_t)m->ndim)];
      if (kind == 4) v = ms * (1 + (int64_t)rs_draw(ch, 4));
      else v = ms * (int64_t)rs_draw(ch, 3) + 1 + (int64_t)rs_draw(ch, (uint64_t)ms);
      break;
  }
  return v > maxd ? maxd : v;
}

/* Halve the largest dim until the case is small enough for the options (no draws). */
static void fit_shape(const rs_gen_opts *o, const rs_mesh *m, rs_tensor *t) {
  int64_t cap = o->max_numel > 0 ? o->max_numel : 1 << 14;
  int64_t work = o->max_work > 0 ? o->max_work : 1 << 16;
  if (cap > work / m->nranks) cap = work / m->nranks;
  /* Mutant 285: the element cap is the old generator's 4,096 whatever the options say. */
  if (RS_MUTANT(285) && cap > 4096) cap = 4096;
  if (cap < 1) cap = 1;
  for (;;) {
    int64_t numel = 1;
    int big = 0;
    for (int d = 0; d < t->ndim; d++) {
      /* saturate above cap: --max-dim may allow 8 dims whose product overflows int64 */
      numel = t->shape[d] && numel > cap / t->shape[d] ? cap + 1 : numel * t->shape[d];
      if (t->shape[d] > t->shape[big]) big = d;
    }
    if (numel <= cap) break;
    t->shape[big] = (t->shape[big] + 1) / 2;
  }
}

/* Dim sizes (some tied to mesh sizes), halved until the case is small enough. */
static void gen_shape(rs_choices *ch, const rs_gen_opts *o, const rs_mesh *m, rs_tensor *t, size_t tnd_at,
                      int64_t tnd_less) {
  for (int d = 0; d < t->ndim; d++) {
    size_t at = ch->pos;
    t->shape[d] = gen_dim_size(ch, o, m);
    if (tnd_less >= 0) rs_choices_item(ch, tnd_at, (uint64_t)tnd_less, at, ch->pos);
  }
  fit_shape(o, m, t);
}

static rs_placement gen_placement(rs_choices *ch, const rs_gen_opts *o, int ndim, int reducible,
                                  int fam) {
  uint64_t k = rs_draw(ch, 10);
  if (o->partial == RS_GEN_PARTIAL_NONE) reducible = 0;
  if (o->partial == RS_GEN_PARTIAL_OFTEN && k >= 5) k = 8;
  if (k >= 3 && k <= 7 && ndim > 0) {
    int d = (int)rs_draw(ch, (uint64_t)ndim);
    if (rs_draw(ch, 4) == 3) d -= ndim; /* the negative spelling of the same dim */
    return rs_pl_shard(d);
  }
  if (k >= 8 && reducible) {
    if (fam == FAM_MIN) return rs_pl_partial(RS_MIN);
    if (fam == FAM_MAX) return rs_pl_partial(RS_MAX);
    rs_redop op = rs_draw(ch, 3) == 2 ? RS_AVG : RS_SUM;
    /* Mutant 260: the generator stops producing Partial(avg). */
    if (RS_MUTANT(260)) op = RS_SUM;
    if (o->ops && !(o->ops & (1u << op))) op = op == RS_AVG ? RS_SUM : RS_AVG;
    if (o->ops && !(o->ops & (1u << op))) return rs_pl_replicate();
    return rs_pl_partial(op);
  }
  return rs_pl_replicate();
}

/* Mesh, tensor and raw placements (no shard order yet): the part both generators share.
 * Each mesh dim's draws (size, src placement, dst placement) sit together right after the
 * counts, so the shrinker drops a mesh dim by lowering the count and deleting one block. */
static rs_status gen_parts(rs_choices *ch, const rs_gen_opts *o, rs_case *c, int *fam) {
  static const int fam_tbl[] = {FAM_SUMAVG, FAM_SUMAVG, FAM_SUMAVG, FAM_SUMAVG, FAM_MIN, FAM_MAX};
  memset(c, 0, sizeof *c);
  int maxd = o->max_mesh_dims < 1 ? 1 : o->max_mesh_dims > RS_MAX_MESH_DIMS ? RS_MAX_MESH_DIMS : o->max_mesh_dims;
  int maxt = o->max_tensor_dims < 0 ? 0 : o->max_tensor_dims > RS_MAX_DIMS ? RS_MAX_DIMS : o->max_tensor_dims;
  size_t nd_at = ch->pos;
  int nd = PICK(ch, MESH_ND);
  if (nd > maxd) nd = maxd;
  /* Mutant 264: the mesh-rank table tops out at 5 dims. */
  if (RS_MUTANT(264) && nd > 5) nd = 5;
  c->tensor.dtype = gen_dtype(ch, o);
  size_t tnd_at = ch->pos;
  c->tensor.ndim = PICK(ch, TENSOR_ND);
  /* Mutant 284: the tensor-rank table tops out at 7 dims: no 8-d tensors. */
  if (RS_MUTANT(284) && c->tensor.ndim > 7) c->tensor.ndim = 7;
  if (c->tensor.ndim > maxt) c->tensor.ndim = maxt;
  *fam = PICK(ch, fam_tbl);
  /* An ops mask narrows the family to one it allows (sum/avg first). */
  if (o->ops) {
    int allow[3] = {(o->ops & ((1u << RS_SUM) | (1u << RS_AVG))) != 0, (o->ops & (1u << RS_MIN)) != 0,
                    (o->ops & (1u << RS_MAX)) != 0};
    for (int k = 0; k < 3 && !allow[*fam]; k++) *fam = (*fam + 1) % 3;
  }
  int red = rs_dtype_reducible(c->tensor.dtype), tnd = c->tensor.ndim;
  int64_t size[RS_MAX_MESH_DIMS];
  c->src.mesh_ndim = c->dst.mesh_ndim = nd;
  /* the draw of the mesh-dims table that gives one dim fewer: the shrinker drops a mesh dim
   * (its size and placements) with it */
  int64_t nd_less = -1;
  for (int k = (int)(sizeof MESH_ND / sizeof MESH_ND[0]) - 1; k >= 0 && nd > 1; k--)
    if ((MESH_ND[k] > maxd ? maxd : MESH_ND[k]) == nd - 1) {
      nd_less = k;
      break;
    }
  for (int m = 0; m < nd; m++) {
    size_t at = ch->pos;
    size[m] = PICK(ch, MESH_SZ);
    c->src.p[m] = gen_placement(ch, o, tnd, red, *fam);
    c->dst.p[m] = gen_placement(ch, o, tnd, red, *fam);
    if (nd_less >= 0) rs_choices_item(ch, nd_at, (uint64_t)nd_less, at, ch->pos);
  }
  /* the same for a tensor dim (its size draws, in gen_shape) */
  int64_t tnd_less = -1;
  for (int k = (int)(sizeof TENSOR_ND / sizeof TENSOR_ND[0]) - 1; k >= 0 && tnd > 0; k--)
    if ((TENSOR_ND[k] > maxt ? maxt : TENSOR_ND[k]) == tnd - 1) {
      tnd_less = k;
      break;
    }
  /* Mutant 288: a tensor dim is never split by more than 3 mesh dims (the 4th shard of a dim
   * becomes R). */
  for (int side = 0; RS_MUTANT(288) && side < 2; side++) {
    rs_sharding *sh = side ? &c->dst : &c->src;
    int per_dim[RS_MAX_DIMS] = {0};
    for (int m = 0; m < nd; m++)
      if (sh->p[m].kind == RS_SHARD && tnd > 0) {
        int d = ((sh->p[m].dim % tnd) + tnd) % tnd;
        if (++per_dim[d] > 3) sh->p[m] = rs_pl_replicate();
      }
  }
  rs_status st = gen_ranks(ch, o, nd, size, &c->mesh);
  if (st) return st;
  gen_shape(ch, o, &c->mesh, &c->tensor, tnd_at, tnd_less);
  return RS_OK;
}

/* Default order, then (sometimes) each tensor dim's list of mesh dims permuted. */
static rs_status gen_order(rs_choices *ch, rs_sharding *s, int ndim) {
  rs_status st = rs_sharding_set_default_order(s, ndim);
  if (st) return st;
  if (rs_draw(ch, 2) == 0) return RS_OK;
  for (int d = 0; d < ndim; d++) {
    int len = s->order_len[d];
    for (int i = 0; i + 1 < len; i++) {
      int j = i + (int)rs_draw(ch, (uint64_t)(len - i));
      /* Mutant 261: the shuffle never reorders a split over 2 or 3 mesh dims (so no 2-way split,
       * drawn as one or pruned from a 3-way one by the pytorch enumeration, is out of order). */
      if (RS_MUTANT(261) && len <= 3) j = i;
      /* Mutant 289: a 2-way split is reordered in about 1 case of 150 only (a hash of the draws so
       * far picks which): order_nondefault_2way falls from ~930 to ~6 in 20,000 cases, never to 0. */
      if (RS_MUTANT(289) && len == 2 && j != i) {
        uint64_t hsh = 0;
        for (size_t k = 0; k < ch->pos && k < ch->n; k++) hsh = hsh * 1000003u + ch->v[k] + 1;
        if (hsh % 150 != 0) j = i;
      }
      int8_t t = s->order[d][i];
      s->order[d][i] = s->order[d][j];
      s->order[d][j] = t;
    }
  }
  return RS_OK;
}

static void gen_tail(rs_choices *ch, const rs_gen_opts *o, rs_case *c) {
  c->seed = rs_draw(ch, 1ull << 32);
  c->planner = RS_PLANNER_AUTO;
  c->cost = rs_draw(ch, 4) == 3 ? RS_COST_PYTORCH : RS_COST_SEED;
  c->values = rs_case_default_values(c);
  /* SPEC 8: a large share of Partial cases carry ordinary values, which pin SPEC 5's order (draw 0,
   * the shrinker's simplest choice, keeps exact values) */
  /* Mutant 217: the share is drawn but ignored, so every Partial case keeps exact values. */
  if (c->values == RS_VALUES_EXACT && (int)rs_draw(ch, 100) >= 100 - o->order_share && !RS_MUTANT(217))
    c->values = RS_VALUES_ORDER;
  strcpy(c->name, "generated");
}

static rs_status gen_one(rs_choices *ch, const rs_gen_opts *o, rs_case *c);

rs_status rs_gen_case(rs_choices *ch, const rs_gen_opts *o, rs_case *c) {
  /* A dtype that cannot hold the case's values (exact values for the rank count) is never filled
   * with zeros: the case is drawn again from the following draws of the stream, and counted. */
  int items0 = ch->nitems;
  for (int attempt = 0;; attempt++) {
    ch->nitems = items0; /* the shrinker's structure marks: this attempt's draws only */
    rs_status st = gen_one(ch, o, c);
    if (st || attempt >= 63 || rs_case_check_values(c) == RS_OK) return st ? st : rs_case_validate(c);
    rs_clear_error();
    if (o->redraws) (*o->redraws)++;
  }
}

/* Drop from each tensor dim's shard order the mesh dims that no longer shard it. */
static void prune_orders(rs_sharding *s, int ndim) {
  for (int d = 0; d < ndim; d++) {
    int k = 0;
    for (int i = 0; i < s->order_len[d]; i++) {
      rs_placement p = s->p[s->order[d][i]];
      if (p.kind == RS_SHARD && (p.dim == d || p.dim + ndim == d)) s->order[d][k++] = s->order[d][i];
    }
    s->order_len[d] = (int8_t)k;
  }
}

static int has_partial(const rs_case *c) {
  return rs_sharding_has_partial(&c->src) || rs_sharding_has_partial(&c->dst);
}

/* Current PyTorch's transitions, 1 case in 4 (drawn after everything else, so the older draws keep
 * their meaning): R -> P(avg|min|max) become plannable, and a Shard whose dst was drawn P(sum) keeps
 * it (zero-fill) instead of falling back to R. The properties hold these cases to the oracle (sums
 * over the zero-filled mesh dims). */
static void gen_enumeration(rs_choices *ch, const rs_gen_opts *o, rs_case *c, const rs_placement *drawn) {
  int pyt = rs_draw(ch, 4) == 3;
  /* RS_GEN_ENUM_PYTORCH (fuzz-planner --enumeration pytorch): every case, the draw still taken */
  if (o->enumerations == RS_GEN_ENUM_PYTORCH) pyt = 1;
  else if (!pyt || o->enumerations != RS_GEN_ENUM_BOTH) return;
  c->enumeration = RS_ENUM_PYTORCH;
  for (int m = 0; m < c->mesh.ndim; m++)
    if (drawn[m].kind == RS_PARTIAL && drawn[m].op == RS_SUM && c->src.p[m].kind == RS_SHARD) c->dst.p[m] = drawn[m];
  /* a copy-only case that now carries a zero-filled Partial: the value mode gen_tail would draw */
  if (c->values == RS_VALUES_BITS && has_partial(c))
    c->values = (int)rs_draw(ch, 100) >= 100 - o->order_share ? RS_VALUES_ORDER : RS_VALUES_EXACT;
}

/* 1 case in 8 (drawn last): 2+ mesh dims of non-power-of-2 sizes partitioned R -> P(sum) at once,
 * with order values and a float dtype, so the order of the partition divisions shows in the bits
 * (ordinary draws give such a case about never: 0 in 20,000). */
static void gen_partition_bias(rs_choices *ch, const rs_gen_opts *o, rs_case *c) {
  static const int ODD[] = {3, 5, 6, 7};
  static const rs_dtype FLOATS[] = {RS_F32, RS_BF16, RS_F64, RS_F16};
  if (rs_draw(ch, 8) != 7) return;
  int nd = c->mesh.ndim, k = nd >= 2 ? 2 + (int)rs_draw(ch, (uint64_t)nd - 1) : 0;
  int pick[RS_MAX_MESH_DIMS], chosen[RS_MAX_MESH_DIMS] = {0};
  int64_t size[RS_MAX_MESH_DIMS];
  for (int m = 0; m < nd; m++) {
    pick[m] = m;
    size[m] = c->mesh.size[m];
  }
  for (int i = 0; i < k; i++) {
    int j = i + (int)rs_draw(ch, (uint64_t)(nd - i)), t = pick[i];
    pick[i] = pick[j];
    pick[j] = t;
    chosen[pick[i]] = 1;
    size[pick[i]] = ODD[rs_draw(ch, 4)];
  }
  rs_dtype dt = FLOATS[rs_draw(ch, 4)];
  for (int i = 0; i < 4 && o->dtypes && !(o->dtypes & (1u << dt)); i++) dt = FLOATS[i];
  if (k < 2 || o->partial == RS_GEN_PARTIAL_NONE || (o->ops && !(o->ops & (1u << RS_SUM))) ||
      (o->dtypes && !(o->dtypes & (1u << dt))))
    return;
  int maxr = o->max_ranks < 1 ? 1 : o->max_ranks;
  if (o->world_size > 0 && maxr > o->world_size) maxr = o->world_size;
  if (maxr > RS_MAX_RANKS) maxr = RS_MAX_RANKS;
  int64_t prod = 1;
  for (int m = 0; m < nd; m++) prod *= size[m];
  /* too many ranks: the other dims shrink to 1 first, then the partitioned ones to 3 */
  for (int m = 0; m < nd && prod > maxr; m++)
    if (!chosen[m]) prod = prod / size[m], size[m] = 1;
  for (int m = 0; m < nd && prod > maxr; m++)
    if (chosen[m]) prod = prod / size[m] * 3, size[m] = 3;
  if (prod > maxr) return;
  rs_mesh mesh;
  if (rs_mesh_init(&mesh, nd, size, NULL) != RS_OK) {
    rs_clear_error();
    return;
  }
  c->mesh = mesh;
  for (int m = 0; m < nd; m++) {
    if (chosen[m]) {
      c->src.p[m] = rs_pl_replicate();
      c->dst.p[m] = rs_pl_partial(RS_SUM);
    } else if (c->src.p[m].kind == RS_PARTIAL && c->src.p[m].op != RS_SUM && c->src.p[m].op != RS_AVG) {
      c->src.p[m] = c->dst.p[m] = rs_pl_replicate(); /* min/max do not mix with sum */
    } else if (c->dst.p[m].kind == RS_PARTIAL && c->dst.p[m].op != RS_SUM && c->dst.p[m].op != RS_AVG) {
      c->dst.p[m] = rs_pl_replicate();
    }
  }
  prune_orders(&c->src, c->tensor.ndim);
  prune_orders(&c->dst, c->tensor.ndim);
  c->tensor.dtype = dt;
  /* small tensors are enough to see the division order, and keep these cases as cheap as others */
  rs_gen_opts small = *o;
  if (small.max_numel <= 0 || small.max_numel > 256) small.max_numel = 256;
  fit_shape(&small, &c->mesh, &c->tensor);
  c->values = o->order_share > 0 ? RS_VALUES_ORDER : RS_VALUES_EXACT;
}

/* 1 when the case's src holds a Partial(sum) that the dst does not keep (a reduction of sums). */
static int reduces_sum(const rs_case *c) {
  for (int m = 0; m < c->mesh.ndim; m++)
    if (c->src.p[m].kind == RS_PARTIAL && c->src.p[m].op == RS_SUM &&
        !(c->dst.p[m].kind == RS_PARTIAL && c->dst.p[m].op == RS_SUM))
      return 1;
  return 0;
}

/* 1 case in 3 of those reducing an integer Partial(sum) (drawn last, and picked by 1, not 0, so
 * existing fixtures and shrunk streams replay unchanged): wrap values, whose sums leave the dtype,
 * so the contract's wrap-around (SPEC 6) is exercised. Not with avg anywhere: an avg divides a
 * wrapped sum, and which sum is divided depends on the event order the avg cases already pin. */
static void gen_int_wrap(rs_choices *ch, const rs_gen_opts *o, rs_case *c) {
  if (o->order_share <= 0 || rs_dtype_is_float(c->tensor.dtype) || !rs_dtype_reducible(c->tensor.dtype) ||
      (c->values != RS_VALUES_ORDER && c->values != RS_VALUES_EXACT) || !reduces_sum(c))
    return;
  for (int k = 0; k < 2; k++) {
    const rs_sharding *s = k ? &c->dst : &c->src;
    for (int m = 0; m < s->mesh_ndim; m++)
      if (s->p[m].kind == RS_PARTIAL && s->p[m].op == RS_AVG) return;
  }
  /* Mutant 297: the draw is taken but never picks wrap values (int_sum_wraps is never produced). */
  if (rs_draw(ch, 3) == 1 && !RS_MUTANT(297)) c->values = RS_VALUES_WRAP;
}

static rs_status gen_one(rs_choices *ch, const rs_gen_opts *o, rs_case *c) {
  int fam;
  rs_status st = gen_parts(ch, o, c, &fam);
  if (st) return st;
  rs_placement drawn[RS_MAX_MESH_DIMS];
  memcpy(drawn, c->dst.p, sizeof drawn);
  /* S->P and P(x)->P(y) on one mesh dim are contract errors, tested by rs_gen_bad_case. */
  for (int m = 0; m < c->mesh.ndim; m++) {
    rs_placement a = c->src.p[m], *b = &c->dst.p[m];
    if (b->kind == RS_PARTIAL && a.kind == RS_SHARD) *b = rs_pl_replicate();
    if (b->kind == RS_PARTIAL && a.kind == RS_PARTIAL && a.op != b->op) *b = a;
  }
  if ((st = gen_order(ch, &c->src, c->tensor.ndim))) return st;
  if ((st = gen_order(ch, &c->dst, c->tensor.ndim))) return st;
  /* Beyond the graph bound (or when asked) orders stay default, so AUTO plans greedily. The
   * draws above are still taken: the stream layout does not depend on the bound. */
  if (!o->orders || rs_gen_graph_bounded(o, c)) {
    if ((st = rs_sharding_set_default_order(&c->src, c->tensor.ndim))) return st;
    if ((st = rs_sharding_set_default_order(&c->dst, c->tensor.ndim))) return st;
  }
  gen_tail(ch, o, c);
  /* new draws go last: older campaigns' earlier draws keep their meaning */
  gen_enumeration(ch, o, c, drawn);
  gen_partition_bias(ch, o, c);
  gen_int_wrap(ch, o, c);
  return RS_OK;
}

rs_status rs_gen_bad_case(rs_choices *ch, const rs_gen_opts *o, rs_case *c) {
  static const rs_redop pairs[][2] = {{RS_SUM, RS_AVG}, {RS_AVG, RS_SUM}, {RS_MIN, RS_MAX},
                                      {RS_MAX, RS_MIN}, {RS_SUM, RS_MAX}, {RS_MIN, RS_AVG}};
  int fam;
  rs_status st = gen_parts(ch, o, c, &fam);
  if (st) return st;
  int nd = c->mesh.ndim, tnd = c->tensor.ndim;
  int m = (int)rs_draw(ch, (uint64_t)nd);
  int kind = (int)rs_draw(ch, 5);
  if (kind == 0 && tnd == 0) kind = 1;
  if (kind != 3 && !rs_dtype_reducible(c->tensor.dtype)) c->tensor.dtype = RS_F32;
  const rs_redop *pr = pairs[rs_draw(ch, 6)];
  switch (kind) {
    case 0: /* S -> P on one mesh dim */
      c->src.p[m] = rs_pl_shard((int)rs_draw(ch, (uint64_t)tnd));
      c->dst.p[m] = rs_pl_partial(fam == FAM_MIN ? RS_MIN : fam == FAM_MAX ? RS_MAX : RS_SUM);
      break;
    case 1: /* P(x) -> P(y), x != y */
      c->src.p[m] = rs_pl_partial(pr[0]);
      c->dst.p[m] = rs_pl_partial(pr[1]);
      break;
    case 2: /* mixed Partial ops on one tensor (src and dst together) */
      c->src.p[m] = rs_pl_partial(RS_SUM);
      c->dst.p[(m + 1) % nd] = rs_pl_partial(rs_draw(ch, 2) ? RS_MAX : RS_MIN);
      if (nd > 1 && c->src.p[(m + 1) % nd].kind == RS_SHARD) c->src.p[(m + 1) % nd] = rs_pl_replicate();
      break;
    case 3: /* Partial on a copy-only dtype */
      c->tensor.dtype = rs_draw(ch, 2) ? RS_F8_E4M3 : RS_BOOL;
      c->src.p[m] = rs_pl_partial(RS_SUM);
      break;
    default: /* shard dim out of range */
      c->dst.p[m] = rs_pl_shard(rs_draw(ch, 2) ? tnd + (int)rs_draw(ch, 2) : -tnd - 1);
      break;
  }
  /* Orders are best effort here: a planted bad dim makes them fail, which validation reports. */
  if (gen_order(ch, &c->src, tnd) != RS_OK) rs_clear_error();
  if (gen_order(ch, &c->dst, tnd) != RS_OK) rs_clear_error();
  gen_tail(ch, o, c);
  c->values = RS_VALUES_EXACT;
  strcpy(c->name, "generated-bad");
  return RS_OK;
}
