/* test_props_gen.c - generated cases always validate, stay within their bounds, and cover what
 * the campaign is meant to exercise (uneven and empty shards, nested shards, non-default orders,
 * Partial, permuted and subset rank lists); planted-violation cases are always rejected. */
#include <string.h>
#include "check.h"
#include "props/props.h"

int main(void) {
  rs_gen_opts o;
  rs_gen_opts_default(&o);
  static rs_case c;
  int nested = 0, nondefault = 0, partial = 0, empty = 0, uneven = 0, perm = 0, subset = 0,
      negative_ok = 1, dims4 = 0, scalar = 0, mesh5 = 0, mesh6 = 0, t8 = 0, big = 0, bounded = 0;
  for (uint64_t seed = 0; seed < 10000; seed++) {
    rs_choices ch;
    rs_choices_seed(&ch, seed * 7919 + 3);
    rs_status st = rs_gen_case(&ch, &o, &c);
    rs_choices_free(&ch);
    if (st != RS_OK) {
      fprintf(stderr, "seed %llu: %s\n", (unsigned long long)seed, rs_last_error());
      CHECK(st == RS_OK);
      continue;
    }
    CHECK(rs_case_validate(&c) == RS_OK);
    CHECK(c.mesh.nranks <= o.max_ranks);
    CHECK(c.mesh.ndim >= 1 && c.mesh.ndim <= 6);
    CHECK(c.tensor.ndim <= 8);
    int64_t numel = 1;
    for (int d = 0; d < c.tensor.ndim; d++) {
      CHECK(c.tensor.shape[d] >= 0 && c.tensor.shape[d] <= o.max_dim);
      numel *= c.tensor.shape[d];
    }
    CHECK(numel <= o.max_numel);
    CHECK(numel <= 1 || numel * c.mesh.nranks <= o.max_work);
    mesh5 += c.mesh.ndim == 5;
    mesh6 += c.mesh.ndim == 6;
    t8 += c.tensor.ndim == 8;
    big += numel > 4096;
    if (rs_gen_graph_bounded(&o, &c)) {
      /* beyond the graph planner's bound: default orders, so AUTO plans greedily */
      bounded++;
      CHECK(rs_case_resolve_planner(&c) == RS_PLANNER_GREEDY);
    }
    /* order or wrap values replace exact ones; wrap only on an integer dtype */
    CHECK(c.values == rs_case_default_values(&c) ||
          ((c.values == RS_VALUES_ORDER || c.values == RS_VALUES_WRAP) && rs_case_default_values(&c) == RS_VALUES_EXACT));
    CHECK(c.values != RS_VALUES_WRAP || !rs_dtype_is_float(c.tensor.dtype));
    dims4 += c.mesh.ndim == 4;
    scalar += c.tensor.ndim == 0;
    for (int d = 0; d < c.tensor.ndim; d++) {
      nested += c.src.order_len[d] > 1;
      for (int k = 0; k < c.src.order_len[d]; k++) {
        int64_t ms = c.mesh.size[c.src.order[d][k]];
        empty += c.tensor.shape[d] < ms;
        uneven += c.tensor.shape[d] % ms != 0;
      }
    }
    nondefault += !rs_sharding_is_default_order(&c.src, c.tensor.ndim) ||
                  !rs_sharding_is_default_order(&c.dst, c.tensor.ndim);
    partial += rs_sharding_has_partial(&c.src) || rs_sharding_has_partial(&c.dst);
    int is_perm = 0, is_subset = 0;
    for (int i = 0; i < c.mesh.nranks; i++) {
      is_perm |= c.mesh.ranks[i] != i;
      is_subset |= c.mesh.ranks[i] >= c.mesh.nranks;
      CHECK(c.mesh.ranks[i] >= 0);
    }
    perm += is_perm && !is_subset;
    subset += is_subset;
    for (int m = 0; m < c.mesh.ndim; m++) {
      /* negative dims are normalized by validation */
      if (c.src.p[m].kind == RS_SHARD && c.src.p[m].dim < 0) negative_ok = 0;
      /* no S->P, no P(x)->P(y) */
      CHECK(!(c.dst.p[m].kind == RS_PARTIAL && c.src.p[m].kind == RS_SHARD &&
              (c.enumeration != RS_ENUM_PYTORCH || c.dst.p[m].op != RS_SUM)));
      CHECK(!(c.dst.p[m].kind == RS_PARTIAL && c.src.p[m].kind == RS_PARTIAL &&
              c.dst.p[m].op != c.src.p[m].op));
    }
  }
  printf("nested %d nondefault %d partial %d empty %d uneven %d perm %d subset %d 4d-mesh %d scalar %d\n",
         nested, nondefault, partial, empty, uneven, perm, subset, dims4, scalar);
  CHECK(nested > 500);
  CHECK(nondefault > 500);
  CHECK(partial > 500);
  CHECK(empty > 500);
  CHECK(uneven > 500);
  CHECK(perm > 200);
  CHECK(subset > 200);
  CHECK(dims4 > 200);
  CHECK(scalar > 200);
  CHECK(negative_ok);
  printf("5-d mesh %d, 6-d mesh %d, 8-d tensor %d, numel > 4096 %d, graph-bounded %d\n", mesh5, mesh6, t8,
         big, bounded);
  CHECK(mesh5 > 300 && mesh6 > 300 && t8 > 200 && big > 200);

  /* Options narrow the space: dtype and op masks, copy-only / Partial-heavy, rank lists, orders. */
  {
    rs_gen_opts f;
    rs_gen_opts_default(&f);
    f.dtypes = (1u << RS_BF16) | (1u << RS_I8);
    f.ops = 1u << RS_AVG;
    f.rank_lists = 0;
    f.orders = 0;
    f.max_mesh_dims = 2;
    f.max_tensor_dims = 2;
    int part = 0;
    for (uint64_t seed = 0; seed < 2000; seed++) {
      rs_choices ch;
      rs_choices_seed(&ch, seed);
      CHECK(rs_gen_case(&ch, &f, &c) == RS_OK);
      rs_choices_free(&ch);
      CHECK(c.tensor.dtype == RS_BF16 || c.tensor.dtype == RS_I8);
      CHECK(c.mesh.ndim <= 2 && c.tensor.ndim <= 2);
      CHECK(rs_sharding_is_default_order(&c.src, c.tensor.ndim));
      CHECK(rs_sharding_is_default_order(&c.dst, c.tensor.ndim));
      for (int i = 0; i < c.mesh.nranks; i++) CHECK_EQ_I(c.mesh.ranks[i], i);
      for (int m = 0; m < c.mesh.ndim; m++) {
        if (c.src.p[m].kind == RS_PARTIAL) CHECK_EQ_I(c.src.p[m].op, RS_AVG);
        if (c.dst.p[m].kind == RS_PARTIAL) CHECK_EQ_I(c.dst.p[m].op, RS_AVG);
      }
      part += rs_sharding_has_partial(&c.src) || rs_sharding_has_partial(&c.dst);
    }
    CHECK(part > 200);
    f.dtypes = 0;
    f.ops = 0;
    int often = 0;
    for (int mode = 0; mode < 2; mode++) {
      f.partial = mode ? RS_GEN_PARTIAL_OFTEN : RS_GEN_PARTIAL_NONE;
      for (uint64_t seed = 0; seed < 1000; seed++) {
        rs_choices ch;
        rs_choices_seed(&ch, seed);
        CHECK(rs_gen_case(&ch, &f, &c) == RS_OK);
        rs_choices_free(&ch);
        int has = rs_sharding_has_partial(&c.src) || rs_sharding_has_partial(&c.dst);
        if (!mode) CHECK(!has);
        else {
          CHECK(rs_dtype_reducible(c.tensor.dtype));
          often += has;
        }
      }
    }
    CHECK(often > 600);
  }

  /* MPI campaigns: ranks come from 0..world_size-1. */
  o.world_size = 4;
  for (uint64_t seed = 0; seed < 2000; seed++) {
    rs_choices ch;
    rs_choices_seed(&ch, seed);
    CHECK(rs_gen_case(&ch, &o, &c) == RS_OK);
    rs_choices_free(&ch);
    CHECK(c.mesh.nranks <= 4);
    for (int i = 0; i < c.mesh.nranks; i++) CHECK(c.mesh.ranks[i] < 4);
  }

  /* Every planted violation is caught by validation or the planners (never a crash). */
  rs_gen_opts_default(&o);
  for (uint64_t seed = 0; seed < 3000; seed++) {
    rs_choices ch;
    rs_choices_seed(&ch, seed);
    CHECK(rs_gen_bad_case(&ch, &o, &c) == RS_OK);
    rs_choices_free(&ch);
    char msg[4096];
    rs_outcome out = rs_prop_run(RS_PROP_REJECT_BAD, NULL, &c, msg, sizeof msg);
    if (out == RS_FAIL) fprintf(stderr, "bad case %llu: %s\n", (unsigned long long)seed, msg);
    CHECK(out != RS_FAIL);
  }
  TEST_DONE();
}
