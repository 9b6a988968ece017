/* values_params.c - the host half of the device value generator (values_math.h): what a case
 * decides once, in the same terms as core/values.c (value mode, the exact range with its min/max
 * headroom and avg budget, the order bounds), for one rank's box. Built in every build, so the CPU
 * test (tests/test_device_values.c) checks the math the kernel runs. */
#include <string.h>
#include "core/mutant.h"
#include "core/values.h"
#include "cuda/cuda_api.h"
#include "cuda/values_math.h"
#include "reshard/case.h"
#include "reshard/opt.h"

static int ceil_log2(int64_t n) {
  int k = 0;
  while (((int64_t)1 << k) < n) ++k;
  return k;
}

/* SPEC 8's exact range: unit * |U| stays exactly representable and within the integer range,
 * less 2 per Partial level (min/max pieces move by up to 2), over the avg dims' n-fold sums. */
static void exact_range(const rs_case *c, rs_dvals *p) {
  int64_t navg = 1, levels = 0, budget;
  for (int m = 0; m < c->src.mesh_ndim; ++m) {
    if (c->src.p[m].kind == RS_PARTIAL) levels++;
    if ((c->src.p[m].kind == RS_PARTIAL && c->src.p[m].op == RS_AVG) ||
        (c->dst.p[m].kind == RS_PARTIAL && c->dst.p[m].op == RS_AVG))
      navg *= c->mesh.size[m];
  }
  switch (c->tensor.dtype) {
    case RS_F64: case RS_I64: budget = (1ll << 40) / p->unit; break;
    case RS_F32: budget = (1ll << 24) / p->unit; break;
    case RS_F16: budget = (1ll << 11) / p->unit; break;
    case RS_BF16: budget = (1ll << 8) / p->unit; break;
    case RS_I32: budget = INT32_MAX / p->unit; break;
    case RS_I16: budget = INT16_MAX / p->unit; break;
    case RS_I8: budget = INT8_MAX / p->unit; break;
    case RS_U8: budget = UINT8_MAX / p->unit; break;
    default: budget = 0; break;
  }
  int64_t umax = (budget - 2 * levels) / navg;
  p->hi = umax > 1000 ? 1000 : umax;
  p->lo = p->is_unsigned ? 0 : -p->hi;
}

/* Order values of integer dtypes: the whole range when only min/max Partials appear, else the
 * range over the rank count (no sum overflows). */
static void order_bounds(const rs_case *c, rs_dvals *p) {
  int sums = 0, any = rs_sharding_has_partial(&c->src) || rs_sharding_has_partial(&c->dst);
  const rs_sharding *ss[2] = {&c->src, &c->dst};
  for (int k = 0; k < 2; ++k)
    for (int m = 0; m < ss[k]->mesh_ndim; ++m)
      if (ss[k]->p[m].kind == RS_PARTIAL && (ss[k]->p[m].op == RS_SUM || ss[k]->p[m].op == RS_AVG)) sums = 1;
  int minmax_only = any && !sums;
  int64_t mx;
  switch (c->tensor.dtype) {
    case RS_I64: mx = (int64_t)1 << 40; break;
    case RS_I32: mx = INT32_MAX; break;
    case RS_I16: mx = INT16_MAX; break;
    case RS_I8: mx = INT8_MAX; break;
    case RS_U8: mx = UINT8_MAX; break;
    default: mx = 0; break;
  }
  p->ibound = minmax_only ? mx : mx / c->mesh.nranks;
  if (c->values == RS_VALUES_WRAP) p->ibound = rs_values_wrap_bound(c->tensor.dtype);
  p->ilo = c->tensor.dtype == RS_U8 ? 0 : minmax_only || c->values == RS_VALUES_WRAP ? -p->ibound - 1 : -p->ibound;
  p->f16_ehi = 13 - ceil_log2(c->mesh.nranks);
}

rs_status rs_dvals_make(const rs_case *c, const int64_t coord[RS_MAX_MESH_DIMS], const int64_t *start,
                        const int64_t *size, rs_dvals *p) {
  memset(p, 0, sizeof *p);
  int nd = c->tensor.ndim;
  if (nd < 0 || nd > RS_MAX_DIMS || c->src.mesh_ndim > RS_MAX_MESH_DIMS || c->mesh.nranks < 1)
    return rs_fail(RS_ERR_INVALID, "device values: case out of range");
  for (int d = 0; d < nd; ++d)
    if (start[d] < 0 || size[d] < 0 || start[d] + size[d] > c->tensor.shape[d])
      return rs_fail(RS_ERR_INVALID, "device values: box dim %d [%lld, +%lld) outside the tensor", d,
                     (long long)start[d], (long long)size[d]);
  rs_dtype t = c->tensor.dtype;
  p->seed = c->seed;
  p->dtype = (int32_t)t;
  p->esize = rs_dtype_size(t);
  p->is_unsigned = t == RS_U8;
  p->unit = c->mesh.nranks;
  int red = rs_dtype_reducible(t);
  /* wrap values are order values with the whole integer range (core/values.c) */
  p->mode = red && (c->values == RS_VALUES_ORDER || c->values == RS_VALUES_WRAP) ? RS_DV_ORDER
          : red && c->values == RS_VALUES_EXACT                                ? RS_DV_EXACT
                                                                               : RS_DV_BITS;
  p->partial = rs_sharding_has_partial(&c->src);
  if (p->mode == RS_DV_EXACT) exact_range(c, p);
  if (p->mode == RS_DV_ORDER) order_bounds(c, p);
  p->nmesh = c->src.mesh_ndim;
  for (int m = 0; m < RS_MAX_MESH_DIMS; ++m) p->pop[m] = -1;
  for (int m = 0; m < p->nmesh; ++m) {
    if (c->src.p[m].kind == RS_PARTIAL) p->pop[m] = c->src.p[m].op;
    p->msize[m] = c->mesh.size[m];
    p->coord[m] = coord ? coord[m] : 0;
  }
  p->ndim = nd;
  int64_t stride = 1;
  for (int d = nd - 1; d >= 0; --d) {
    p->start[d] = start[d];
    p->size[d] = size[d];
    p->gstride[d] = stride;
    stride *= c->tensor.shape[d];
  }
  p->mutant = RS_MUTANT(930) ? 930 : RS_MUTANT(931) ? 931 : RS_MUTANT(932) ? 932 : RS_MUTANT(933) ? 933 : 0;
  return RS_OK;
}

int64_t rs_dvals_numel(const rs_dvals *p) {
  int64_t n = 1;
  for (int d = 0; d < p->ndim; ++d) n *= p->size[d];
  return n;
}

void rs_dvals_fill_host(const rs_dvals *p, void *out) {
  int64_t n = rs_dvals_numel(p);
  unsigned char *o = out;
  for (int64_t k = 0; k < n; ++k) {
    uint64_t b = rs_dv_value(p, rs_dv_flat(p, k));
    for (int i = 0; i < p->esize; ++i) o[k * p->esize + i] = (unsigned char)(b >> (8 * i));
  }
}

int64_t rs_opt_box_bytes(const rs_case *c, int dst, int pos) {
  if (!c || pos < 0 || pos >= c->mesh.nranks || c->tensor.ndim > RS_MAX_DIMS) return -1;
  int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS], n = rs_dtype_size(c->tensor.dtype);
  rs_mesh_coord(&c->mesh, pos, coord);
  rs_local_box(&c->mesh, dst ? &c->dst : &c->src, &c->tensor, coord, start, size);
  for (int d = 0; d < c->tensor.ndim; ++d) n *= size[d];
  return n;
}

/* every played position's box of the src (dst 0) or dst (dst 1) layout: the value kernel fills it
 * (ndiff NULL) or checks it (the differing elements added to *ndiff) */
static rs_status each_box(rs_world *w, const rs_case *c, int dst, void *const *dev, int64_t *ndiff) {
  if (!c || !dev) return rs_fail(RS_ERR_INVALID, "opt: NULL argument");
  if (!rs_world_uses_device(w)) return rs_fail(RS_ERR_INVALID, "transport: device values need a device world");
  rs_case cc = *c;
  rs_status st = rs_case_validate(&cc);
  int me = rs_world_is_local(w) ? -1 : rs_world_rank(w);
  for (int pos = 0; pos < cc.mesh.nranks && !st; ++pos) {
    if (me >= 0 && cc.mesh.ranks[pos] != me) continue;
    int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS], nd = 0;
    rs_mesh_coord(&cc.mesh, pos, coord);
    rs_local_box(&cc.mesh, dst ? &cc.dst : &cc.src, &cc.tensor, coord, start, size);
    rs_dvals p;
    if ((st = rs_dvals_make(&cc, coord, start, size, &p))) break;
    if (!ndiff) {
      st = rs_cuda_fill_values(&p, dev[pos], rs_dvals_numel(&p));
    } else {
      st = rs_cuda_check_values(&p, dev[pos], rs_dvals_numel(&p), &nd);
      *ndiff += nd;
    }
  }
  return st ? st : rs_cuda_sync();
}

rs_status rs_opt_device_source(rs_world *w, const rs_case *c, void *const *in_dev) {
  return each_box(w, c, 0, in_dev, NULL);
}

rs_status rs_opt_device_check(rs_world *w, const rs_case *c, void *const *out_dev, int64_t *ndiff) {
  if (!ndiff) return rs_fail(RS_ERR_INVALID, "opt: NULL argument");
  *ndiff = 0;
  if (c && (rs_sharding_has_partial(&c->src) || rs_sharding_has_partial(&c->dst)))
    return rs_fail(RS_ERR_UNSUPPORTED, "opt: the device check covers copy-only cases (this one has a Partial)");
  return each_box(w, c, 1, out_dev, ndiff);
}
