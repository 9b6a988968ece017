/* plan.c - P2P plans (SPEC 10): storage, traffic statistics, SPEC 7's lower bound summed over
 * parameters, the JSON form the CLI prints, and the checker every planner is held to. */
#include <stdlib.h>
#include <string.h>
#include "core/p2p/p2p_internal.h"
#include "reshard/plan.h"

void rs_p2p_plan_free(rs_p2p_plan *p) {
  if (!p) return;
  free(p->x);
  free(p->coords);
  memset(p, 0, sizeof *p);
}

rs_status rs_p2p_plan_add(rs_p2p_plan *p, int64_t task, int32_t param, int32_t src, int32_t dst,
                          int ndim, const int64_t *start, const int64_t *size) {
  if (p->n == p->cap) {
    int64_t nc = p->cap ? p->cap * 2 : 256;
    rs_p2p_xfer *x = realloc(p->x, (size_t)nc * sizeof *x);
    if (!x) return rs_fail(RS_ERR_NOMEM, "plan: out of memory");
    p->x = x;
    p->cap = nc;
  }
  if (p->ncoords + 2 * ndim > p->capcoords) {
    int64_t nc = p->capcoords ? p->capcoords * 2 : 1024;
    while (nc < p->ncoords + 2 * ndim) nc *= 2;
    int64_t *c = realloc(p->coords, (size_t)nc * sizeof *c);
    if (!c) return rs_fail(RS_ERR_NOMEM, "plan: out of memory");
    p->coords = c;
    p->capcoords = nc;
  }
  rs_p2p_xfer *x = &p->x[p->n++];
  x->task = task;
  x->param = param;
  x->src = src;
  x->dst = dst;
  x->box = p->ncoords;
  memcpy(p->coords + p->ncoords, start, (size_t)ndim * sizeof(int64_t));
  memcpy(p->coords + p->ncoords + ndim, size, (size_t)ndim * sizeof(int64_t));
  p->ncoords += 2 * ndim;
  return RS_OK;
}

rs_status rs_p2p_plan_stats(const rs_p2p_model *m, rs_p2p_plan *p) {
  int64_t *sent = calloc((size_t)(m->world ? m->world : 1), sizeof *sent);
  if (!sent) return rs_fail(RS_ERR_NOMEM, "plan: out of memory");
  p->bytes_sent = p->bytes_local = p->max_sender_bytes = p->senders = 0;
  for (int64_t i = 0; i < p->n; ++i) {
    const rs_p2p_xfer *x = &p->x[i];
    const rs_tensor *t = &m->param[x->param].t;
    int64_t b = rs__p2p_numel(t->ndim, p->coords + x->box + t->ndim) * rs_dtype_size(t->dtype);
    if (x->src == x->dst) {
      p->bytes_local += b;
    } else {
      p->bytes_sent += b;
      sent[x->src] += b;
    }
  }
  for (int32_t r = 0; r < m->world; ++r) {
    if (sent[r] > p->max_sender_bytes) p->max_sender_bytes = sent[r];
    if (sent[r]) p->senders++;
  }
  free(sent);
  return RS_OK;
}

rs_status rs_p2p_lower_bound(const rs_p2p_model *m, int64_t *lb) {
  int64_t total = 0;
  for (int64_t p = 0; p < m->nparams; ++p) {
    const rs_tensor *t = &m->param[p].t;
    const rs_p2p_mesh *dm = &m->cfg[RS_P2P_DST].mesh[m->cfg[RS_P2P_DST].place[p].mesh];
    for (int64_t q = 0; q < dm->nranks; ++q) {
      int64_t ds[RS_MAX_DIMS], dz[RS_MAX_DIMS], ss[RS_MAX_DIMS], sz[RS_MAX_DIMS];
      rs_p2p_box(m, RS_P2P_DST, p, q, ds, dz);
      int64_t need = rs__p2p_numel(t->ndim, dz), have = 0;
      int64_t sp = rs_p2p_pos(m, RS_P2P_SRC, p, dm->ranks[q]);
      if (sp >= 0 && need) {
        rs_p2p_box(m, RS_P2P_SRC, p, sp, ss, sz);
        have = rs_box_overlap(t->ndim, ds, dz, ss, sz);
      }
      total += (need - have) * rs_dtype_size(t->dtype);
    }
  }
  *lb = total;
  return RS_OK;
}

rs_status rs_p2p_plan_json(const rs_p2p_model *m, const rs_p2p_plan *p, int64_t lb, FILE *f) {
  fputs("{\"transfers\":[", f);
  for (int64_t i = 0; i < p->n; ++i) {
    const rs_p2p_xfer *x = &p->x[i];
    int nd = m->param[x->param].t.ndim;
    fprintf(f, "%s\n{\"task_id\":%lld,\"param\":\"%s\",\"src_rank\":%d,\"dst_rank\":%d,\"offsets\":[",
            i ? "," : "", (long long)x->task, m->param[x->param].name, x->src, x->dst);
    for (int d = 0; d < nd; ++d) fprintf(f, "%s%lld", d ? "," : "", (long long)p->coords[x->box + d]);
    fputs("],\"sizes\":[", f);
    for (int d = 0; d < nd; ++d) fprintf(f, "%s%lld", d ? "," : "", (long long)p->coords[x->box + nd + d]);
    fputs("]}", f);
  }
  fprintf(f, "],\n\"bytes_sent\":%lld,\"bytes_local\":%lld,\"lb\":%lld,\"max_sender_bytes\":%lld,\"senders\":%lld}\n",
          (long long)p->bytes_sent, (long long)p->bytes_local, (long long)lb, (long long)p->max_sender_bytes,
          (long long)p->senders);
  return RS_OK;
}

typedef struct trip {
  int32_t src, dst;
  int64_t task;
} trip;

static int trip_cmp(const void *a, const void *b) {
  const trip *x = a, *y = b;
  if (x->src != y->src) return x->src < y->src ? -1 : 1;
  if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
  return (x->task > y->task) - (x->task < y->task);
}

static int box_inside(int nd, const int64_t *s, const int64_t *z, const int64_t *bs, const int64_t *bz) {
  for (int d = 0; d < nd; ++d)
    if (z[d] < 0 || s[d] < bs[d] || s[d] + z[d] > bs[d] + bz[d]) return 0;
  return 1;
}

rs_status rs_p2p_plan_verify(const rs_p2p_model *m, const rs_p2p_plan *p) {
  rs_status st = RS_OK;
  trip *tr = malloc((size_t)(p->n ? p->n : 1) * sizeof *tr);
  uint8_t ***cnt = calloc((size_t)(m->nparams ? m->nparams : 1), sizeof *cnt);
  if (!tr || !cnt) {
    free(tr);
    free(cnt);
    return rs_fail(RS_ERR_NOMEM, "verify: out of memory");
  }
  for (int64_t i = 0; i < p->n && !st; ++i) {
    const rs_p2p_xfer *x = &p->x[i];
    tr[i].src = x->src;
    tr[i].dst = x->dst;
    tr[i].task = x->task;
    if (x->param < 0 || x->param >= m->nparams) {
      st = rs_fail(RS_ERR_INVALID, "plan.transfers[%lld].param: out of range", (long long)i);
      break;
    }
    const rs_tensor *t = &m->param[x->param].t;
    const char *nm = m->param[x->param].name;
    const int64_t *bs = p->coords + x->box, *bz = bs + t->ndim;
    int64_t sp = rs_p2p_pos(m, RS_P2P_SRC, x->param, x->src), dp = rs_p2p_pos(m, RS_P2P_DST, x->param, x->dst);
    int64_t s0[RS_MAX_DIMS], z0[RS_MAX_DIMS], s1[RS_MAX_DIMS], z1[RS_MAX_DIMS];
    if (dp < 0) {
      st = rs_fail(RS_ERR_INVALID, "plan: task %lld writes %s on rank %d, which does not hold it in dst",
                   (long long)x->task, nm, x->dst);
      break;
    }
    rs_p2p_box(m, RS_P2P_DST, x->param, dp, s1, z1);
    if (!box_inside(t->ndim, bs, bz, s1, z1)) {
      st = rs_fail(RS_ERR_INVALID, "plan: task %lld box of %s is outside rank %d's dst box", (long long)x->task, nm, x->dst);
      break;
    }
    int64_t n = rs__p2p_numel(t->ndim, bz);
    if (n == 0) continue;
    if (sp < 0) {
      st = rs_fail(RS_ERR_INVALID, "plan: task %lld reads %s from rank %d, which holds none of it in src",
                   (long long)x->task, nm, x->src);
      break;
    }
    rs_p2p_box(m, RS_P2P_SRC, x->param, sp, s0, z0);
    if (!box_inside(t->ndim, bs, bz, s0, z0)) {
      st = rs_fail(RS_ERR_INVALID, "plan: task %lld reads %s from rank %d outside its src box", (long long)x->task, nm, x->src);
      break;
    }
    if (!cnt[x->param]) {
      int64_t np = m->cfg[RS_P2P_DST].mesh[m->cfg[RS_P2P_DST].place[x->param].mesh].nranks;
      cnt[x->param] = calloc((size_t)np, sizeof **cnt);
      if (!cnt[x->param]) {
        st = rs_fail(RS_ERR_NOMEM, "verify: out of memory");
        break;
      }
    }
    if (!cnt[x->param][dp]) {
      cnt[x->param][dp] = calloc((size_t)rs__p2p_numel(t->ndim, z1) + 1, 1);
      if (!cnt[x->param][dp]) {
        st = rs_fail(RS_ERR_NOMEM, "verify: out of memory");
        break;
      }
    }
    /* mark every element of the box in the destination local tensor */
    int64_t idx[RS_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; ++k) {
      int64_t off = 0;
      for (int d = 0; d < t->ndim; ++d) off = off * z1[d] + (bs[d] - s1[d] + idx[d]);
      if (cnt[x->param][dp][off] < 255) cnt[x->param][dp][off]++;
      for (int d = t->ndim - 1; d >= 0; --d) {
        if (++idx[d] < bz[d]) break;
        idx[d] = 0;
      }
    }
  }
  for (int64_t q = 0; q < m->nparams && !st; ++q) {
    const rs_tensor *t = &m->param[q].t;
    const rs_p2p_mesh *dm = &m->cfg[RS_P2P_DST].mesh[m->cfg[RS_P2P_DST].place[q].mesh];
    for (int64_t pos = 0; pos < dm->nranks && !st; ++pos) {
      int64_t s1[RS_MAX_DIMS], z1[RS_MAX_DIMS];
      rs_p2p_box(m, RS_P2P_DST, q, pos, s1, z1);
      int64_t n = rs__p2p_numel(t->ndim, z1);
      for (int64_t k = 0; k < n; ++k) {
        int c = cnt[q] && cnt[q][pos] ? cnt[q][pos][k] : 0;
        if (c != 1) {
          st = rs_fail(RS_ERR_MISMATCH, "plan: element %lld of %s on dst rank %d is written %d times",
                       (long long)k, m->param[q].name, dm->ranks[pos], c);
          break;
        }
      }
    }
  }
  if (!st) {
    qsort(tr, (size_t)p->n, sizeof *tr, trip_cmp);
    for (int64_t i = 1; i < p->n; ++i)
      if (!trip_cmp(&tr[i - 1], &tr[i])) {
        st = rs_fail(RS_ERR_MISMATCH, "plan: task id %lld used twice from rank %d to rank %d",
                     (long long)tr[i].task, tr[i].src, tr[i].dst);
        break;
      }
  }
  for (int64_t q = 0; q < m->nparams; ++q) {
    if (!cnt[q]) continue;
    int64_t np = m->cfg[RS_P2P_DST].mesh[m->cfg[RS_P2P_DST].place[q].mesh].nranks;
    for (int64_t pos = 0; pos < np; ++pos) free(cnt[q][pos]);
    free(cnt[q]);
  }
  free(cnt);
  free(tr);
  return st;
}
