/* p2p.c - the oracle of cross-config resharding (SPEC 10): every destination rank's local tensors
 * straight from the global tensor (no plan), MXFP8 destinations quantized by the oracle's own code
 * (a different method from ref's and opt's: nearest of the E4M3 code table), and the bitwise
 * comparison with its first difference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "reshard/p2p.h"

/* BF16 bits -> double, decoded by hand (no shared conversion code). */
static double bf16_value(uint16_t b, int *finite) {
  int sign = b >> 15, ex = (b >> 7) & 0xFF, man = b & 0x7F;
  *finite = ex != 0xFF;
  double v = ex ? ldexp(128 + man, ex - 127 - 7) : ldexp(man, -126 - 7);
  return sign ? -v : v;
}

/* value of a non-negative E4M3 code 0..0x7E */
static double e4m3_value(int code) {
  int ex = code >> 3, man = code & 7;
  return ex ? ldexp(8 + man, ex - 7 - 3) : ldexp(man, -6 - 3);
}

static uint8_t nearest_e4m3(double y) {
  static double table[0x7F];
  static int ready;
  if (!ready) {
    for (int c = 0; c <= 0x7E; ++c) table[c] = e4m3_value(c);
    ready = 1;
  }
  int neg = signbit(y) != 0;
  double a = fabs(y);
  if (a > 448) a = 448;
  /* the table is increasing: find the last code <= a, then pick the nearer neighbour */
  int lo = 0, hi = 0x7E;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (table[mid] <= a) lo = mid;
    else hi = mid - 1;
  }
  int best = lo;
  if (lo < 0x7E) {
    double dl = a - table[lo], dh = table[lo + 1] - a;
    if (dh < dl || (dh == dl && (lo & 1))) best = lo + 1;
  }
  return (uint8_t)((neg ? 0x80 : 0) | best);
}

rs_status rs_p2p_oracle_mxfp8(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale, const char *what) {
  if (n % 32) return rs_fail(RS_ERR_INVALID, "%s: MXFP8 needs a multiple of 32 elements along the last dim", what);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) {
      int fin;
      double v = bf16_value(x[b * 32 + i], &fin);
      if (!fin) return rs_fail(RS_ERR_INVALID, "%s: block %lld holds a NaN or Inf", what, (long long)b);
      if ((float)fabs(v) > amax) amax = (float)fabs(v);
    }
    int e = 0;
    if (amax != 0) {
      e = 127;
      while (e > -127 && (double)amax <= 448.0 * pow(2.0, e - 1)) e--;
    }
    scale[b] = (uint8_t)(e + 127);
    double unit = pow(2.0, e);
    for (int i = 0; i < 32; ++i) {
      int fin;
      q[b * 32 + i] = nearest_e4m3(bf16_value(x[b * 32 + i], &fin) / unit);
    }
  }
  return RS_OK;
}

rs_status rs_p2p_oracle_expected(const rs_p2p_model *m, int32_t rank, rs_p2p_locals *out) {
  rs_status st = rs_p2p_locals_alloc(m, RS_P2P_DST, rank, out);
  if (st) return st;
  for (int64_t p = 0; p < m->nparams && !st; ++p) {
    const rs_tensor *t = &m->param[p].t;
    int mx = m->param[p].transform == RS_XFORM_MXFP8;
    int es = rs_dtype_size(t->dtype);
    for (int64_t q = 0; q < out->npos[p] && !st; ++q) {
      rs_p2p_local *l = &out->loc[p][q];
      if (!l->data) continue;
      int64_t s[RS_MAX_DIMS], z[RS_MAX_DIMS], idx[RS_MAX_DIMS] = {0};
      rs_p2p_box(m, RS_P2P_DST, p, q, s, z);
      char *buf = mx ? malloc((size_t)l->numel * 2 + 1) : l->data;
      if (!buf) {
        st = rs_fail(RS_ERR_NOMEM, "oracle: out of memory");
        break;
      }
      for (int64_t k = 0; k < l->numel; ++k) {
        int64_t g = 0;
        for (int d = 0; d < t->ndim; ++d) g = g * t->shape[d] + s[d] + idx[d];
        rs_p2p_value(m, p, g, buf + k * es);
        for (int d = t->ndim - 1; d >= 0; --d) {
          if (++idx[d] < z[d]) break;
          idx[d] = 0;
        }
      }
      if (mx) {
        st = rs_p2p_oracle_mxfp8((const uint16_t *)buf, l->numel, (uint8_t *)l->data, l->scale, m->param[p].name);
        free(buf);
      }
    }
  }
  if (st) rs_p2p_locals_free(out);
  return st;
}

rs_status rs_p2p_compare(const rs_p2p_model *m, const rs_p2p_locals *want, const rs_p2p_locals *got) {
  for (int64_t p = 0; p < m->nparams; ++p) {
    int mx = m->param[p].transform == RS_XFORM_MXFP8;
    int es = mx ? 1 : rs_dtype_size(m->param[p].t.dtype);
    const rs_p2p_mesh *me = &m->cfg[RS_P2P_DST].mesh[m->cfg[RS_P2P_DST].place[p].mesh];
    for (int64_t q = 0; q < want->npos[p]; ++q) {
      const rs_p2p_local *a = &want->loc[p][q], *b = &got->loc[p][q];
      if (!a->data) continue;
      if (!b->data || b->numel != a->numel)
        return rs_fail(RS_ERR_MISMATCH, "rank %d %s: missing local tensor", me->ranks[q], m->param[p].name);
      for (int64_t k = 0; k < a->numel; ++k)
        if (memcmp(a->data + k * es, b->data + k * es, (size_t)es)) {
          uint64_t x = 0, y = 0;
          memcpy(&x, a->data + k * es, (size_t)es);
          memcpy(&y, b->data + k * es, (size_t)es);
          return rs_fail(RS_ERR_MISMATCH, "rank %d %s: local element %lld expected 0x%llx got 0x%llx%s",
                         me->ranks[q], m->param[p].name, (long long)k, (unsigned long long)x,
                         (unsigned long long)y, mx ? " (mxfp8)" : "");
        }
      for (int64_t k = 0; mx && k < a->numel / 32; ++k)
        if (a->scale[k] != b->scale[k])
          return rs_fail(RS_ERR_MISMATCH, "rank %d %s: mxfp8 block %lld scale expected %u got %u", me->ranks[q],
                         m->param[p].name, (long long)k, a->scale[k], b->scale[k]);
    }
  }
  return RS_OK;
}
