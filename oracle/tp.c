/* tp.c - the TP oracle: the unsharded forward of a case's module chain (no mesh, no style, no
 * redistribute; F32 accumulation over the reduction index in ascending order, then the bias), and
 * the bitwise comparison of a sharded result with it: every rank's local output must be the global
 * output restricted to its box of the result's layout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/checked.h"
#include "reshard/tp.h"

static rs_status linear(const rs_tp_case *c, int i, const float *x, int64_t rows, float **y) {
  const rs_tp_module *m = &c->mod[i];
  rs_tensor tw, tb;
  float *w = NULL, *b = NULL;
  rs_status st = rs_tp_global_param(c, i, RS_TP_WEIGHT, &tw, &w);
  if (st == RS_OK && m->bias) st = rs_tp_global_param(c, i, RS_TP_BIAS, &tb, &b);
  int64_t n = 0;
  if (st == RS_OK && !rs__mul_ok(rows, m->out, &n)) st = rs_fail(RS_ERR_OVERFLOW, "%s: size", m->path);
  if (st == RS_OK && !(*y = malloc((size_t)(n ? n : 1) * 4))) st = rs_fail(RS_ERR_NOMEM, "oracle: out of memory");
  for (int64_t r = 0; st == RS_OK && r < rows; r++)
    for (int64_t o = 0; o < m->out; o++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < m->in; k++) acc += x[r * m->in + k] * w[o * m->in + k];
      if (b) acc += b[o];
      (*y)[r * m->out + o] = acc;
    }
  free(w);
  free(b);
  return st;
}

/* nn.LayerNorm (eps 1e-5) / nn.RMSNorm (eps: F32 machine epsilon) of one row, F32, sums in
 * increasing index order (SPEC 12's norm, unsharded). */
static rs_status real_norm_row(const rs_tp_case *c, int i, rs_tp_module_kind k, const float *x, int64_t d,
                               const float *w, float *y) {
  float *b = NULL;
  rs_tensor tb;
  if (c->mod[i].bias) {
    rs_status st = rs_tp_global_param(c, i, RS_TP_BIAS, &tb, &b);
    if (st) return st;
  }
  float acc = 0.0f, acc2 = 0.0f, scale;
  if (k == RS_TP_LAYERNORM) {
    for (int64_t j = 0; j < d; j++) acc += x[j];
    float mean = acc / (float)d;
    for (int64_t j = 0; j < d; j++) acc2 += (x[j] - mean) * (x[j] - mean);
    scale = 1.0f / sqrtf(acc2 / (float)d + 1e-5f);
    for (int64_t j = 0; j < d; j++) y[j] = (x[j] - mean) * scale * w[j] + (b ? b[j] : 0.0f);
  } else {
    for (int64_t j = 0; j < d; j++) acc2 += x[j] * x[j];
    scale = 1.0f / sqrtf(acc2 / (float)d + 1.1920928955078125e-07f);
    for (int64_t j = 0; j < d; j++) y[j] = x[j] * scale * w[j];
  }
  free(b);
  return RS_OK;
}

rs_status rs_tp_oracle_forward(const rs_tp_case *c, rs_tensor *shape, float **out) {
  void *input = NULL;
  rs_tensor t;
  rs_status st = rs_tp_global_input(c, &t, &input);
  if (st) return st;
  int64_t rows = c->batch * c->seq; /* validated: fits */
  float *x = NULL;
  if (c->mod[0].kind != RS_TP_EMBEDDING) {
    x = input;
    input = NULL;
  }
  for (int i = 0; st == RS_OK && i < c->nmod; i++) {
    const rs_tp_module *m = &c->mod[i];
    float *y = NULL;
    if (m->kind == RS_TP_LINEAR) {
      st = linear(c, i, x, rows, &y);
    } else {
      rs_tensor tw;
      float *w = NULL;
      int64_t n = 0;
      st = rs_tp_global_param(c, i, RS_TP_WEIGHT, &tw, &w);
      if (st == RS_OK && !rs__mul_ok(rows, m->out, &n)) st = rs_fail(RS_ERR_OVERFLOW, "%s: size", m->path);
      if (st == RS_OK && !(y = malloc((size_t)(n ? n : 1) * 4))) st = rs_fail(RS_ERR_NOMEM, "oracle: out of memory");
      for (int64_t r = 0; st == RS_OK && r < rows; r++) {
        if (m->kind == RS_TP_EMBEDDING) {
          int64_t id = ((const int64_t *)input)[r];
          memcpy(y + r * m->out, w + id * m->out, (size_t)m->out * 4);
        } else if (m->kind == RS_TP_LAYERNORM || m->kind == RS_TP_RMSNORM) {
          st = real_norm_row(c, i, m->kind, x + r * m->out, m->out, w, y + r * m->out);
        } else {
          for (int64_t j = 0; j < m->out; j++) y[r * m->out + j] = x[r * m->out + j] * w[j];
        }
      }
      free(w);
    }
    free(x);
    x = y;
  }
  free(input);
  if (st) {
    free(x);
    return st;
  }
  memset(shape, 0, sizeof *shape);
  shape->dtype = RS_F32;
  shape->ndim = 3;
  shape->shape[0] = c->batch;
  shape->shape[1] = c->seq;
  shape->shape[2] = c->mod[c->nmod - 1].out;
  *out = x;
  return RS_OK;
}

int rs_tp_oracle_compare(const rs_tp_case *c, const float *g, const rs_tp_result *r, char *msg,
                         size_t cap) {
  const rs_tensor *t = &r->out_tensor;
  size_t len = 0;
  int bad = 0;
  msg[0] = 0;
  if (t->ndim != 3 || t->shape[0] != c->batch || t->shape[1] != c->seq ||
      t->shape[2] != c->mod[c->nmod - 1].out || r->out.n != c->mesh.nranks) {
    snprintf(msg, cap, "output: global shape or rank count differs from the unsharded forward");
    return c->mesh.nranks > 0 ? c->mesh.nranks : 1;
  }
  int64_t D1 = t->shape[1], D2 = t->shape[2];
  rs_dtype dt = rs_tp_dtype_of(c->dtype);
  if (t->dtype != dt) {
    snprintf(msg, cap, "output: dtype %s, the case's is %s", rs_dtype_name(t->dtype), rs_dtype_name(dt));
    return c->mesh.nranks > 0 ? c->mesh.nranks : 1;
  }
  for (int pos = 0; pos < c->mesh.nranks; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_box(&c->mesh, &r->out_layout, t, coord, start, size);
    const rs_local *l = &r->out.r[pos];
    if (l->ndim != 3 || l->shape[0] != size[0] || l->shape[1] != size[1] || l->shape[2] != size[2]) {
      bad++;
      if (len < cap)
        len += (size_t)snprintf(msg + len, cap - len, "rank %d: local shape [%lld,%lld,%lld], box [%lld,%lld,%lld]\n",
                                pos, (long long)l->shape[0], (long long)l->shape[1], (long long)l->shape[2],
                                (long long)size[0], (long long)size[1], (long long)size[2]);
      continue;
    }
    /* the local values as F32 (a reduced dtype widens exactly) */
    int64_t cnt = size[0] * size[1] * size[2];
    float *wide = NULL;
    const float *v = l->data;
    if (dt != RS_F32) {
      wide = malloc((size_t)(cnt ? cnt : 1) * sizeof *wide);
      if (!wide) {
        snprintf(msg, cap, "out of memory");
        return bad + 1;
      }
      for (int64_t j = 0; j < cnt; j++) {
        uint16_t hv = ((const uint16_t *)l->data)[j];
        wide[j] = dt == RS_BF16 ? rs_bf16_to_f32(hv) : rs_f16_to_f32(hv);
      }
      v = wide;
    }
    float *sum = NULL;
    if (r->out_layout.p[c->tp_dim].kind == RS_PARTIAL) {
      /* a P(sum) output: the TP group's pieces (all of this box) sum to the output; checked once,
       * at TP coordinate 0, summing in coordinate order (exact values: any order gives these bits) */
      if (coord[c->tp_dim] != 0) {
        free(wide);
        continue;
      }
      int64_t n = size[0] * size[1] * size[2];
      sum = calloc((size_t)(n ? n : 1), sizeof *sum);
      if (!sum) {
        free(wide);
        snprintf(msg, cap, "out of memory");
        return bad + 1;
      }
      for (int64_t k = 0; k < c->mesh.size[c->tp_dim]; k++) {
        int64_t cc[RS_MAX_MESH_DIMS];
        memcpy(cc, coord, sizeof cc);
        cc[c->tp_dim] = k;
        const rs_local *lk = &r->out.r[rs_mesh_pos(&c->mesh, cc)];
        if (lk->ndim != 3 || lk->shape[0] != size[0] || lk->shape[1] != size[1] || lk->shape[2] != size[2]) {
          free(sum);
          sum = NULL;
          break;
        }
        for (int64_t j = 0; j < n; j++) {
          float pv;
          if (dt == RS_F32) pv = ((const float *)lk->data)[j];
          else {
            uint16_t hv = ((const uint16_t *)lk->data)[j];
            pv = dt == RS_BF16 ? rs_bf16_to_f32(hv) : rs_f16_to_f32(hv);
          }
          sum[j] += pv;
        }
      }
      if (!sum) { /* a piece's shape differs: reported at that rank by the check above */
        free(wide);
        bad++;
        continue;
      }
      v = sum;
    }
    int64_t i = 0, nbad = 0;
    for (int64_t a = 0; a < size[0]; a++)
      for (int64_t b = 0; b < size[1]; b++)
        for (int64_t d = 0; d < size[2]; d++, i++) {
          float e = g[((start[0] + a) * D1 + start[1] + b) * D2 + start[2] + d];
          if (dt == RS_BF16) e = rs_bf16_to_f32(rs_f32_to_bf16(e));
          else if (dt == RS_F16) e = rs_f16_to_f32(rs_f32_to_f16(e));
          if (memcmp(&e, &v[i], 4) != 0) {
            if (nbad++ == 0 && len < cap)
              len += (size_t)snprintf(msg + len, cap - len,
                                      "rank %d: [%lld,%lld,%lld] expected %g got %g\n", pos,
                                      (long long)(start[0] + a), (long long)(start[1] + b),
                                      (long long)(start[2] + d), (double)e, (double)v[i]);
          }
        }
    free(sum);
    free(wide);
    if (nbad) bad++;
  }
  return bad;
}
