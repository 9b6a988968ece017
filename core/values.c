/* values.c - deterministic test values (SPEC 8): raw random bits for copy-only cases; exact
 * integer values for cases with Partial or partition, where the source pieces of every Partial mesh
 * dim reduce (in any order) to the logical global tensor without rounding. */
#include <stdlib.h>
#include <string.h>
#include "core/values.h"
#include "core/mutant.h"

/* Hash streams, so that different uses of one (seed, index) never share bits. */
enum { STREAM_BITS = 1, STREAM_EXACT = 2, STREAM_PIECE = 3, STREAM_ORDER = 4 };

static void store_units_int(rs_dtype t, int64_t v, void *out) {
  switch (t) {
    case RS_I64: { int64_t x = v; memcpy(out, &x, 8); break; }
    case RS_I32: { int32_t x = (int32_t)v; memcpy(out, &x, 4); break; }
    case RS_I16: { int16_t x = (int16_t)v; memcpy(out, &x, 2); break; }
    case RS_I8: { int8_t x = (int8_t)v; memcpy(out, &x, 1); break; }
    case RS_U8: { uint8_t x = (uint8_t)v; memcpy(out, &x, 1); break; }
    default: break;
  }
}

static void store_units(rs_dtype t, int64_t v, void *out) {
  switch (t) {
    case RS_F64: { double d = (double)v; memcpy(out, &d, 8); break; }
    case RS_F32: { float f = (float)v; memcpy(out, &f, 4); break; }
    case RS_F16: { uint16_t h = rs_f32_to_f16((float)v); memcpy(out, &h, 2); break; }
    case RS_BF16: { uint16_t h = rs_f32_to_bf16((float)v); memcpy(out, &h, 2); break; }
    default: store_units_int(t, v, out); break;
  }
}

int64_t rs_values_wrap_bound(rs_dtype t) {
  switch (t) {
    case RS_I64: return ((int64_t)1 << 62) - 2;
    case RS_I32: return INT32_MAX;
    case RS_I16: return INT16_MAX;
    case RS_I8: return INT8_MAX;
    case RS_U8: return UINT8_MAX;
    default: return 0;
  }
}

static int exact_mode(const rs_case *c) {
  return c->values == RS_VALUES_EXACT && rs_dtype_reducible(c->tensor.dtype);
}

/* wrap values are order values with wider integer bounds (order_int_bound) */
static int order_mode(const rs_case *c) {
  return (c->values == RS_VALUES_ORDER || c->values == RS_VALUES_WRAP) && rs_dtype_reducible(c->tensor.dtype);
}

/* The range of the integer U with G = U * unit (unit = the mesh's rank count), chosen so that every
 * partial fold of the pieces stays exactly representable: for floats unit * |sum| <= 2^p; for
 * integers unit * |sum| <= the type's max. Pieces of avg dims sum to n * U, and min/max pieces move
 * up to 2 per level, which is headroom taken off the budget before the range. hi < 1 means the dtype
 * cannot hold exact values for this case (never filled with zeros: rs_case_check_values refuses). */
typedef struct exact_params {
  int64_t unit, lo, hi;
  int is_unsigned;
} exact_params;

static exact_params exact_range(const rs_case *c) {
  exact_params e;
  e.unit = c->mesh.nranks;
  e.is_unsigned = c->tensor.dtype == RS_U8;
  int64_t navg = 1, levels = 0;
  for (int m = 0; m < c->src.mesh_ndim; ++m) {
    if (c->src.p[m].kind == RS_PARTIAL) levels++;
    /* an avg dim on either side is summed n-fold somewhere (a reduction, or a round trip back) */
    if ((c->src.p[m].kind == RS_PARTIAL && c->src.p[m].op == RS_AVG) ||
        (c->dst.p[m].kind == RS_PARTIAL && c->dst.p[m].op == RS_AVG))
      navg *= c->mesh.size[m];
  }
  /* Partitioned values k * G / n (k < n) must stay exact too, so the bound is on unit * |U|
   * itself (integers up to 2^p are exact in a float with p significant bits). */
  int64_t budget;
  switch (c->tensor.dtype) {
    case RS_F64: budget = (1ll << 40) / e.unit; break;
    case RS_F32: budget = (1ll << 24) / e.unit; break;
    case RS_F16: budget = (1ll << 11) / e.unit; break;
    case RS_BF16: budget = (1ll << 8) / e.unit; break;
    case RS_I64: budget = (1ll << 40) / e.unit; break;
    case RS_I32: budget = INT32_MAX / e.unit; break;
    case RS_I16: budget = INT16_MAX / e.unit; break;
    case RS_I8: budget = INT8_MAX / e.unit; break;
    case RS_U8: budget = UINT8_MAX / e.unit; break;
    default: budget = 0; break;
  }
  /* Mutant 216: the min/max headroom is forgotten, so pieces v +- k leave the dtype and wrap. */
  int64_t umax = (budget - (RS_MUTANT(216) ? 0 : 2 * levels)) / navg;
  if (umax > 1000) umax = 1000;
  e.hi = umax;
  e.lo = e.is_unsigned ? 0 : -umax;
  return e;
}

/* Never all zeros: element 0 of a non-empty tensor is never 0, so no source is all-zero bytes. */
static int64_t exact_units(const rs_case *c, const exact_params *e, int64_t idx) {
  if (e->hi < 1) return 0; /* refused by rs_case_check_values; only reached by a planted bug */
  uint64_t h = rs_hash3(c->seed, STREAM_EXACT, (uint64_t)idx);
  uint64_t span = (uint64_t)(e->hi - e->lo + 1);
  int64_t u = e->lo + (int64_t)(h % span);
  if (u == 0 && idx == 0) u = e->hi;
  return u;
}

/* Order values: ordinary random finite numbers with random mantissas over a spread of binades, a
 * few signed zeros (which make min/max order-sensitive too), magnitudes small enough that no sum of
 * the case's nranks pieces overflows (F16: 2^15 over the rank count rounded up to a power of two;
 * integers: the type's max over the rank count). */
static int ceil_log2(int64_t n) {
  int k = 0;
  while (((int64_t)1 << k) < n) ++k;
  return k;
}

/* Only min/max Partials: no sum can overflow, so integers take the dtype's whole range (which is
 * what tells a signed from an unsigned comparison). */
static int order_minmax_only(const rs_case *c) {
  const rs_sharding *ss[2] = {&c->src, &c->dst};
  for (int k = 0; k < 2; ++k)
    for (int m = 0; m < ss[k]->mesh_ndim; ++m)
      if (ss[k]->p[m].kind == RS_PARTIAL && (ss[k]->p[m].op == RS_SUM || ss[k]->p[m].op == RS_AVG)) return 0;
  return rs_sharding_has_partial(&c->src) || rs_sharding_has_partial(&c->dst);
}

static int64_t order_int_bound(const rs_case *c) {
  int64_t mx;
  /* wrap values: the whole range (I64: 2^62 - 2, so that the span fits an int64), sums wrap */
  if (c->values == RS_VALUES_WRAP) return rs_values_wrap_bound(c->tensor.dtype);
  switch (c->tensor.dtype) {
    case RS_I64: mx = (int64_t)1 << 40; break;
    case RS_I32: mx = INT32_MAX; break;
    case RS_I16: mx = INT16_MAX; break;
    case RS_I8: mx = INT8_MAX; break;
    case RS_U8: mx = UINT8_MAX; break;
    default: return 0;
  }
  /* Mutant 220: sums get the whole range too, so sums of the pieces wrap (deterministically:
   * ref, opt and the oracle agree; only the values property's 64-bit fold sees it) */
  return order_minmax_only(c) || RS_MUTANT(220) ? mx : mx / c->mesh.nranks;
}

/* Order values of the float dtypes from the hash h of the element's piece (F16: exponents from
 * f16_elo, nine binades). */
static void order_value(uint64_t h, int64_t idx, void *out, rs_dtype t, int f16_elo) {
  uint64_t h2 = rs_mix64(h ^ 0xD1B54A32D192ED03ull);
  int zero = (h2 & 31) == 0 && idx != 0;
  uint64_t neg = (h2 >> 5) & 1;
  int espan;
  switch (t) {
    case RS_F64: {
      espan = 25; /* 2^-12 .. 2^12 */
      uint64_t e = (uint64_t)((int64_t)((h2 >> 8) % (uint64_t)espan) - 12 + 1023);
      uint64_t b = zero ? neg << 63 : neg << 63 | e << 52 | (h & 0xFFFFFFFFFFFFFull);
      memcpy(out, &b, 8);
      break;
    }
    case RS_F32: {
      espan = 25;
      uint32_t e = (uint32_t)((int64_t)((h2 >> 8) % (uint64_t)espan) - 12 + 127);
      uint32_t b = zero ? (uint32_t)neg << 31 : (uint32_t)neg << 31 | e << 23 | (uint32_t)(h & 0x7FFFFFu);
      memcpy(out, &b, 4);
      break;
    }
    case RS_BF16: {
      espan = 17; /* 2^-8 .. 2^8 */
      uint32_t e = (uint32_t)((int64_t)((h2 >> 8) % (uint64_t)espan) - 8 + 127);
      uint16_t b = (uint16_t)(zero ? neg << 15 : neg << 15 | e << 7 | (h & 0x7Fu));
      memcpy(out, &b, 2);
      break;
    }
    case RS_F16: {
      uint32_t e = (uint32_t)(f16_elo + (int)((h2 >> 8) % 9u) + 15);
      uint16_t b = (uint16_t)(zero ? neg << 15 : neg << 15 | e << 10 | (h & 0x3FFu));
      memcpy(out, &b, 2);
      break;
    }
    default: break; /* the integers: order_value_x, with the per-case bounds */
  }
}

rs_status rs_case_check_values(const rs_case *c) {
  if (!rs_dtype_reducible(c->tensor.dtype) || c->mesh.nranks < 1) return RS_OK;
  /* Mutant 213: the check is skipped, so an impossible exact range fills the source with zeros. */
  if (exact_mode(c) && exact_range(c).hi < 1 && !RS_MUTANT(213))
    return rs_fail(RS_ERR_UNSUPPORTED,
                   "values: %s cannot hold exact values on %d ranks with these Partial dims (use "
                   "\"order\" or a wider dtype)", rs_dtype_name(c->tensor.dtype), (int)c->mesh.nranks);
  if (order_mode(c) && !rs_dtype_is_float(c->tensor.dtype) && order_int_bound(c) < 1)
    return rs_fail(RS_ERR_UNSUPPORTED, "values: %s order values would overflow on %d ranks",
                   rs_dtype_name(c->tensor.dtype), (int)c->mesh.nranks);
  if (order_mode(c) && c->tensor.dtype == RS_F16 && 13 - ceil_log2(c->mesh.nranks) - 8 < -14)
    return rs_fail(RS_ERR_UNSUPPORTED, "values: F16 order values would overflow on %d ranks",
                   (int)c->mesh.nranks);
  return RS_OK;
}

void rs_value_global(const rs_case *c, int64_t idx, void *out) { rs_value_range(c, NULL, idx, 1, out); }

/* Piece number `coord` of value v (in units) over a Partial mesh dim of size n with op.
 * `key` identifies the element and the path of coordinates above this level. */
static int64_t piece_of(int64_t v, rs_redop op, int64_t n, int64_t coord, uint64_t key,
                        int is_unsigned) {
  if (op == RS_MIN || op == RS_MAX) {
    int64_t keep = (int64_t)(rs_mix64(key) % (uint64_t)n);
    if (coord == keep) return v;
    int64_t k = (int64_t)(rs_mix64(key ^ (uint64_t)(coord + 1) * 0x9E37ull) % 3);
    if (op == RS_MIN) return v + k;
    if (is_unsigned && k > v) k = v;
    return v - k;
  }
  int64_t total = op == RS_AVG ? v * n : v;
  int64_t sign = total < 0 ? -1 : 1, rem = total < 0 ? -total : total;
  for (int64_t j = 0; j < n; ++j) {
    int64_t part;
    if (j == n - 1) {
      part = rem;
    } else {
      int64_t cap = 2 * rem / (n - j) + 1;
      part = (int64_t)(rs_mix64(key + (uint64_t)j * 0x632BE59BD9B4E019ull) % (uint64_t)cap);
      if (part > rem) part = rem;
    }
    if (j == coord) return sign * part;
    rem -= part;
  }
  return 0;
}

/* What rs_value_piece decides per case, decided once for a loop over many elements: the mode, the
 * src Partial mesh dims, the exact range and the order-value bounds. The per-element work that is
 * left is the hashes (and, for exact pieces, the splits). */
enum { MODE_BITS, MODE_EXACT, MODE_ORDER };

typedef struct value_ctx {
  const rs_case *c;
  rs_dtype t;
  int es, mode, partial, is_float;
  int np;                      /* src Partial mesh dims, ascending */
  int pm[RS_MAX_MESH_DIMS];
  int64_t pn[RS_MAX_MESH_DIMS];
  rs_redop pop[RS_MAX_MESH_DIMS];
  exact_params e;
  int64_t olo, ospan;          /* order values of integer dtypes: lo + h % ospan */
  int64_t obound;
  int f16_elo;                 /* order values of F16: exponents f16_elo .. f16_elo + 8 */
} value_ctx;

static void value_ctx_init(value_ctx *x, const rs_case *c) {
  memset(x, 0, sizeof *x);
  x->c = c;
  x->t = c->tensor.dtype;
  x->es = rs_dtype_size(x->t);
  x->is_float = rs_dtype_is_float(x->t);
  x->mode = order_mode(c) ? MODE_ORDER : exact_mode(c) ? MODE_EXACT : MODE_BITS;
  x->partial = rs_sharding_has_partial(&c->src);
  for (int m = 0; m < c->src.mesh_ndim; ++m)
    if (c->src.p[m].kind == RS_PARTIAL) {
      x->pm[x->np] = m;
      x->pn[x->np] = c->mesh.size[m];
      x->pop[x->np++] = (rs_redop)c->src.p[m].op;
    }
  if (x->mode == MODE_EXACT) x->e = exact_range(c);
  if (x->mode == MODE_ORDER && !rs_dtype_is_float(x->t)) {
    x->obound = order_int_bound(c);
    x->olo = x->t == RS_U8 ? 0 : order_minmax_only(c) || c->values == RS_VALUES_WRAP ? -x->obound - 1 : -x->obound;
    x->ospan = x->obound - x->olo + 1;
  }
  if (x->mode == MODE_ORDER && x->t == RS_F16) {
    /* nranks * 2^(ehi+1) <= 2^14; mutant 218 adds the rank count's log instead of taking it off
     * (on 4+ ranks sums overflow, on 8+ the top binade is Inf) */
    int ehi = RS_MUTANT(218) ? 13 + ceil_log2(c->mesh.nranks) : 13 - ceil_log2(c->mesh.nranks);
    x->f16_elo = ehi - 8;
  }
}

/* order_value with the per-case bounds of x. */
static void order_value_x(const value_ctx *x, uint64_t h, int64_t idx, void *out) {
  if (x->is_float) {
    order_value(h, idx, out, x->t, x->f16_elo);
    return;
  }
  int64_t v = x->olo + (int64_t)(h % (uint64_t)x->ospan);
  if (v == 0 && idx == 0) v = x->obound;
  store_units_int(x->t, v, out);
}

/* Elements flat0 .. flat0 + n - 1 of the piece at `coord` into out. */
static void value_run(const value_ctx *x, const int64_t *coord, int64_t flat0, int64_t n, char *out) {
  const rs_case *c = x->c;
  const int es = x->es;
  if (x->mode == MODE_BITS) {
    const uint64_t mask = x->t == RS_BOOL ? 1 : ~0ull;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t h = rs_hash3(c->seed, STREAM_BITS, (uint64_t)(flat0 + i)) & mask;
      switch (es) {
        case 8: memcpy(out + i * 8, &h, 8); break;
        case 4: { uint32_t w = (uint32_t)h; memcpy(out + i * 4, &w, 4); break; }
        case 2: { uint16_t w = (uint16_t)h; memcpy(out + i * 2, &w, 2); break; }
        default: out[i] = (char)(unsigned char)h; break;
      }
    }
    return;
  }
  if (x->mode == MODE_ORDER) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t idx = flat0 + i;
      uint64_t key = rs_hash3(c->seed, STREAM_ORDER, (uint64_t)idx);
      for (int k = 0; coord && k < x->np; ++k) key = rs_hash3(key, (uint64_t)x->pm[k], (uint64_t)coord[x->pm[k]]);
      order_value_x(x, key, idx, out + i * es);
    }
    return;
  }
  const exact_params *e = &x->e;
  for (int64_t i = 0; i < n; ++i) {
    int64_t idx = flat0 + i, v = exact_units(c, e, idx);
    if (coord && x->np) {
      uint64_t key = rs_hash3(c->seed, STREAM_PIECE, (uint64_t)idx);
      for (int k = 0; k < x->np; ++k) {
        int m = x->pm[k];
        v = piece_of(v, x->pop[k], x->pn[k], coord[m], key, e->is_unsigned);
        key = rs_hash3(key, (uint64_t)m, (uint64_t)coord[m]);
      }
    }
    store_units(x->t, v * e->unit, out + i * es);
  }
}

void rs_value_piece(const rs_case *c, const int64_t coord[RS_MAX_MESH_DIMS], int64_t idx, void *out) {
  value_ctx x;
  value_ctx_init(&x, c);
  value_run(&x, x.partial ? coord : NULL, idx, 1, out);
}

void rs_value_range(const rs_case *c, const int64_t coord[RS_MAX_MESH_DIMS], int64_t flat0, int64_t n, void *out) {
  value_ctx x;
  value_ctx_init(&x, c);
  value_run(&x, x.partial ? coord : NULL, flat0, n, out);
}

/* The box walked one run of consecutive global indexes at a time: the last dim, merged with the dims
 * before it while the box spans the whole of every dim after them. */
void rs_value_pieces(const rs_case *c, const int64_t coord[RS_MAX_MESH_DIMS], const int64_t *start,
                     const int64_t *size, void *out) {
  value_ctx x;
  value_ctx_init(&x, c);
  const int64_t *co = x.partial ? coord : NULL;
  int nd = c->tensor.ndim, es = x.es;
  int64_t gstride[RS_MAX_DIMS], stride = 1, numel = 1, idx[RS_MAX_DIMS] = {0};
  for (int d = nd - 1; d >= 0; --d) {
    gstride[d] = stride;
    stride *= c->tensor.shape[d];
    numel *= size[d];
  }
  int outer = nd; /* dims outer..nd-1 form one run */
  int64_t run = 1;
  while (outer > 0) {
    run *= size[outer - 1];
    --outer;
    if (size[outer] != c->tensor.shape[outer]) break;
  }
  int64_t flat = 0;
  for (int d = 0; d < nd; ++d) flat += start[d] * gstride[d];
  char *p = out;
  for (int64_t k = 0; run > 0 && k < numel; k += run) {
    value_run(&x, co, flat, run, p + k * es);
    for (int d = outer - 1; d >= 0; --d) { /* next run: odometer over the outer dims */
      flat += gstride[d];
      if (++idx[d] < size[d]) break;
      flat -= size[d] * gstride[d];
      idx[d] = 0;
    }
  }
}

rs_status rs_make_source(const rs_case *c, rs_locals *out) {
  rs_status st = rs_locals_for_layout(out, c, &c->src);
  if (st) return st;
  int es = rs_dtype_size(c->tensor.dtype);
  int nd = c->tensor.ndim;
  /* An element's value depends only on its global index and the rank's coordinates on the src
   * Partial mesh dims, so a rank whose box and Partial coordinates equal an earlier rank's (a
   * replica) copies that rank's bytes. */
  int np = 0, pm[RS_MAX_MESH_DIMS];
  for (int m = 0; m < c->src.mesh_ndim; ++m)
    if (c->src.p[m].kind == RS_PARTIAL) pm[np++] = m;
  typedef struct twin_key { int64_t start[RS_MAX_DIMS], size[RS_MAX_DIMS], pc[RS_MAX_MESH_DIMS]; } twin_key;
  twin_key *key = calloc((size_t)(c->mesh.nranks ? c->mesh.nranks : 1), sizeof *key);
  for (int pos = 0; pos < c->mesh.nranks; ++pos) {
    int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_box(&c->mesh, &c->src, &c->tensor, coord, start, size);
    rs_local *l = &out->r[pos];
    int64_t numel = l->nbytes / es;
    char *p = l->data;
    int twin = -1;
    if (key) { /* without memory for the keys every rank is generated */
      memcpy(key[pos].start, start, sizeof(int64_t) * (size_t)nd);
      memcpy(key[pos].size, size, sizeof(int64_t) * (size_t)nd);
      /* Mutant 910: the key leaves out the Partial coordinates, so a rank copies the piece of another
       * Partial coordinate over the same box. */
      for (int k = 0; k < np && !RS_MUTANT(910); ++k) key[pos].pc[k] = coord[pm[k]];
      for (int q = 0; q < pos && twin < 0 && numel; ++q)
        if (!memcmp(&key[q], &key[pos], sizeof *key)) twin = q;
    }
    if (twin >= 0) memcpy(p, out->r[twin].data, (size_t)l->nbytes);
    else rs_value_pieces(c, coord, start, size, p);
  }
  free(key);
  return RS_OK;
}
