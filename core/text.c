/* text.c - the CLI text syntax (shapes, rank lists, placements, shard orders) and PyTorch's
 * printed notation of placements and sharding states. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "reshard/layout.h"
#include "core/fmt.h"

static const char *const op_names[] = {"sum", "avg", "min", "max"};

/* An optional '-' (when lo < 0) and decimal digits, nothing else: no spaces, '+', hex or
 * fractions; a value beyond [lo, hi] (overflow included) is refused, never wrapped. */
static int parse_int(const char **p, long long lo, long long hi, long long *out) {
  const char *q = *p;
  int neg = 0;
  if (*q == '-' && lo < 0) {
    neg = 1;
    ++q;
  }
  if (!isdigit((unsigned char)*q)) return 0;
  long long v = 0;
  for (; isdigit((unsigned char)*q); ++q) {
    int dgt = *q - '0';
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, neg ? -dgt : dgt, &v)) return 0;
  }
  if (v < lo || v > hi) return 0;
  *out = v;
  *p = q;
  return 1;
}

rs_status rs_parse_dims(const char *text, int max, int64_t *out, int *n) {
  *n = 0;
  if (!text) return rs_fail(RS_ERR_INVALID, "shape: missing");
  if (!*text || strcmp(text, "()") == 0 || strcmp(text, "scalar") == 0) return RS_OK;
  const char *p = text;
  for (;;) {
    long long v;
    if (!parse_int(&p, 0, INT64_MAX, &v))
      return rs_fail(RS_ERR_INVALID, "shape '%s': expected sizes like 4x2 (each 0..2^63-1)", text);
    if (*n >= max) return rs_fail(RS_ERR_INVALID, "shape '%s': more than %d dims", text, max);
    out[(*n)++] = v;
    if (!*p) return RS_OK;
    if (*p != 'x' && *p != 'X' && *p != ',')
      return rs_fail(RS_ERR_INVALID, "shape '%s': unexpected '%c'", text, *p);
    ++p;
  }
}

rs_status rs_parse_ranks(const char *text, int32_t *out, int max, int *n) {
  *n = 0;
  const char *p = text;
  if (!p || !*p) return rs_fail(RS_ERR_INVALID, "ranks: empty list");
  for (;;) {
    long long v;
    if (!parse_int(&p, 0, INT32_MAX, &v))
      return rs_fail(RS_ERR_INVALID, "ranks '%s': expected non-negative integers like 3,1,2,0", text);
    if (*n >= max) return rs_fail(RS_ERR_INVALID, "ranks '%s': more than %d ranks", text, max);
    out[(*n)++] = (int32_t)v;
    if (!*p) return RS_OK;
    if (*p != ',') return rs_fail(RS_ERR_INVALID, "ranks '%s': unexpected '%c'", text, *p);
    ++p;
  }
}

rs_status rs_parse_placement(const char *text, rs_placement *out) {
  const char *p = text;
  while (isspace((unsigned char)*p)) ++p;
  size_t len = strlen(p);
  while (len && isspace((unsigned char)p[len - 1])) --len;
  char buf[32];
  if (len == 0 || len >= sizeof buf) return rs_fail(RS_ERR_INVALID, "placement '%s': malformed", text);
  memcpy(buf, p, len);
  buf[len] = 0;
  if (strcmp(buf, "R") == 0) { *out = rs_pl_replicate(); return RS_OK; }
  if (strcmp(buf, "P") == 0) { *out = rs_pl_partial(RS_SUM); return RS_OK; }
  if (buf[0] == 'P' && buf[1] == '(' && buf[len - 1] == ')') {
    for (int i = 0; i < 4; ++i)
      if (len == strlen(op_names[i]) + 3 && strncmp(buf + 2, op_names[i], len - 3) == 0) {
        *out = rs_pl_partial((rs_redop)i);
        return RS_OK;
      }
    return rs_fail(RS_ERR_INVALID, "placement '%s': unknown partial op (sum, avg, min, max)", text);
  }
  if (buf[0] == 'S') {
    const char *q = buf + 1;
    int paren = (*q == '(');
    if (paren) ++q;
    long long d;
    if (!parse_int(&q, -RS_MAX_DIMS, RS_MAX_DIMS - 1, &d))
      return rs_fail(RS_ERR_INVALID, "placement '%s': bad shard dim", text);
    if (paren && *q++ != ')') return rs_fail(RS_ERR_INVALID, "placement '%s': missing ')'", text);
    if (*q) return rs_fail(RS_ERR_INVALID, "placement '%s': trailing characters", text);
    *out = rs_pl_shard((int)d);
    return RS_OK;
  }
  return rs_fail(RS_ERR_INVALID, "placement '%s': expected R, S<d>, S(<d>), P or P(<op>)", text);
}

rs_status rs_parse_placements(const char *text, rs_sharding *out) {
  memset(out, 0, sizeof *out);
  if (!text || !*text) return rs_fail(RS_ERR_INVALID, "placements: empty");
  const char *p = text;
  while (*p) {
    const char *start = p;
    int depth = 0;
    while (*p && (depth || *p != ',')) {
      if (*p == '(') depth++;
      if (*p == ')') depth--;
      ++p;
    }
    char item[32];
    size_t len = (size_t)(p - start);
    if (len == 0 || len >= sizeof item) return rs_fail(RS_ERR_INVALID, "placements '%s': malformed", text);
    if (out->mesh_ndim >= RS_MAX_MESH_DIMS)
      return rs_fail(RS_ERR_INVALID, "placements '%s': more than %d", text, RS_MAX_MESH_DIMS);
    memcpy(item, start, len);
    item[len] = 0;
    rs_status st = rs_parse_placement(item, &out->p[out->mesh_ndim]);
    if (st) return st;
    out->mesh_ndim++;
    if (*p == ',') {
      ++p;
      if (!*p) return rs_fail(RS_ERR_INVALID, "placements '%s': trailing comma", text);
    }
  }
  return RS_OK;
}

rs_status rs_parse_order(const char *text, rs_sharding *s, int tensor_ndim) {
  /* Start from the default order, then override the listed tensor dims. */
  rs_status st = rs_sharding_set_default_order(s, tensor_ndim);
  if (st) return st;
  if (!text || !*text) return RS_OK;
  const char *p = text;
  int listed[RS_MAX_DIMS] = {0};
  for (;;) {
    long long d;
    if (!parse_int(&p, -RS_MAX_DIMS, RS_MAX_DIMS - 1, &d) || *p != ':')
      return rs_fail(RS_ERR_INVALID, "order '%s': expected <tensor dim>:<mesh dims>, e.g. 0:1,0;1:0", text);
    ++p;
    if (d < 0) d += tensor_ndim;
    if (d < 0 || d >= tensor_ndim)
      return rs_fail(RS_ERR_INVALID, "order '%s': tensor dim out of range", text);
    if (listed[d]++) /* a second entry would silently replace the first */
      return rs_fail(RS_ERR_INVALID, "order '%s': tensor dim %lld is listed twice", text, d);
    int n = 0;
    for (;;) {
      long long m;
      if (!parse_int(&p, 0, RS_MAX_MESH_DIMS - 1, &m))
        return rs_fail(RS_ERR_INVALID, "order '%s': bad mesh dim", text);
      if (n >= RS_MAX_MESH_DIMS) return rs_fail(RS_ERR_INVALID, "order '%s': too many mesh dims", text);
      s->order[d][n++] = (int8_t)m;
      if (*p != ',') break;
      ++p;
    }
    s->order_len[d] = (int8_t)n;
    if (!*p) return RS_OK;
    if (*p != ';') return rs_fail(RS_ERR_INVALID, "order '%s': unexpected '%c'", text, *p);
    ++p;
  }
}

int rs_format_placement(rs_placement p, char *buf, size_t cap) {
  switch (p.kind) {
    case RS_SHARD: return snprintf(buf, cap, "S(%d)", p.dim);
    case RS_PARTIAL: return snprintf(buf, cap, "P(%s)", op_names[p.op & 3]);
    default: return snprintf(buf, cap, "R");
  }
}

int rs_format_sharding(const rs_sharding *s, char *buf, size_t cap) {
  size_t used = 0;
  if (cap) buf[0] = 0;
  for (int m = 0; m < s->mesh_ndim; ++m) {
    char one[48], pl[16];
    rs__sbuf ob;
    rs__sbuf_init(&ob, one, sizeof one);
    rs_format_placement(s->p[m], pl, sizeof pl);
    rs__sbuf_add(&ob, "%s", pl);
    if (s->p[m].kind == RS_SHARD) {
      int d = s->p[m].dim;
      if (d >= 0 && d < RS_MAX_DIMS && s->order_len[d] > 1)
        for (int k = 0; k < s->order_len[d] && k < RS_MAX_MESH_DIMS; ++k)
          if (s->order[d][k] == m) rs__sbuf_add(&ob, "[%d]", k);
    }
    int n = (int)ob.len;
    if (used + (size_t)n < cap) memcpy(buf + used, one, (size_t)n + 1);
    used += (size_t)n;
  }
  return (int)used;
}

int rs_format_order(const rs_sharding *s, int tensor_ndim, char *buf, size_t cap) {
  size_t used = 0;
  if (cap) buf[0] = 0;
  for (int d = 0; d < tensor_ndim; ++d) {
    if (!s->order_len[d]) continue;
    char one[64];
    rs__sbuf ob;
    rs__sbuf_init(&ob, one, sizeof one);
    rs__sbuf_add(&ob, "%s%d:", used ? ";" : "", d);
    for (int k = 0; k < s->order_len[d] && k < RS_MAX_MESH_DIMS; ++k)
      rs__sbuf_add(&ob, "%s%d", k ? "," : "", s->order[d][k]);
    int n = (int)ob.len;
    if (used + (size_t)n < cap) memcpy(buf + used, one, (size_t)n + 1);
    used += (size_t)n;
  }
  return (int)used;
}
