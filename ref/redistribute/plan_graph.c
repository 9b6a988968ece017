/* plan_graph.c - PyTorch's graph redistribute planner (DTensorRedistributePlanner, reference):
 * Dijkstra over DistStates = (placements, shard order), with the transitions of the reference
 * get_next_state (cases 1..6, in its order), a choice of cost model, and a choice of transition
 * enumeration: `seed` (the reference planner: case 6 makes P(sum) only) or `pytorch`, current
 * PyTorch's torch/distributed/tensor/_redistribute.py (case 6 makes P(op) for each op in the source
 * or the destination, never mixing ops other than sum with avg; and after each expansion the
 * explicit Shard -> Partial(sum) zero-fill edges toward the destination, cost 0).
 *
 * Fidelity points that decide which of several equal-cost paths comes out:
 *  - next states are enumerated exactly in the reference order, into a dict: a state produced twice
 *    keeps its first position and its last cost;
 *  - the heap is keyed (cost, counter), the counter growing on every push, so equal costs pop in
 *    push order;
 *  - the search returns when the destination is popped, not when it is pushed. */
#include <stdlib.h>
#include <string.h>

#include "core/mutant.h"
#include "reshard/ref.h"

/* Give up beyond this many distinct states: a 6-D mesh over an 8-D tensor has millions, and
 * searching 2^20 of them takes seconds and a few hundred MB. */
#define GRAPH_MAX_STATES (1 << 20)

/* A DistState in a canonical byte form: unused fields zero, so memcmp is equality. */
typedef struct gstate {
  int8_t pl[RS_MAX_MESH_DIMS][3]; /* kind, shard dim, reduce op */
  int8_t len[RS_MAX_DIMS];
  int8_t ord[RS_MAX_DIMS][RS_MAX_MESH_DIMS];
} gstate;

typedef struct gtable {
  gstate *st;
  int32_t n, cap;
  int32_t *slot; /* open addressing: state id + 1, 0 = empty */
  uint32_t mask;
} gtable;

typedef struct hentry {
  double cost;
  int64_t counter;
  int32_t state, node;
} hentry;

typedef struct gsearch {
  gtable tab;
  hentry *heap;
  int64_t hn, hcap;
  int32_t *node_state, *node_parent; /* one path node per push: the path is parent links */
  int64_t nn, ncap;
  uint8_t *visited;
  int32_t *stamp, *stamp_pos; /* per state: expansion that produced it, and its dict slot */
  int32_t vcap;
} gsearch;

/* ---- canonical states ---- */

static void set_pl(gstate *g, int md, rs_placement p) {
  g->pl[md][0] = p.kind;
  g->pl[md][1] = p.kind == RS_SHARD ? p.dim : 0;
  g->pl[md][2] = p.kind == RS_PARTIAL ? p.op : 0;
}

static rs_placement get_pl(const gstate *g, int md) {
  rs_placement p;
  p.kind = g->pl[md][0];
  p.dim = g->pl[md][1];
  p.op = g->pl[md][2];
  return p;
}

static rs_status from_sharding(const rs_sharding *s, int mesh_ndim, int tndim, gstate *g) {
  memset(g, 0, sizeof *g);
  for (int i = 0; i < mesh_ndim; i++) {
    rs_placement p = s->p[i];
    if (p.kind == RS_SHARD && p.dim < 0) p.dim = (int8_t)(p.dim + tndim);
    if (p.kind == RS_SHARD && (p.dim < 0 || p.dim >= tndim))
      return rs_fail(RS_ERR_INVALID, "plan_graph: placements[%d]: shard dim %d out of range", i,
                     (int)s->p[i].dim);
    set_pl(g, i, p);
  }
  for (int d = 0; d < tndim; d++) {
    if (s->order_len[d] < 0 || s->order_len[d] > mesh_ndim)
      return rs_fail(RS_ERR_INVALID, "plan_graph: shard order of tensor dim %d: bad length", d);
    g->len[d] = s->order_len[d];
    for (int k = 0; k < s->order_len[d]; k++) g->ord[d][k] = s->order[d][k];
  }
  return RS_OK;
}

/* The table's slot hash (it decides only where a state sits in the table, never its id or the
 * search order): eight bytes at a time, each word mixed in with a multiply-xorshift. */
static uint32_t hash_state(const gstate *g) {
  const unsigned char *b = (const unsigned char *)g;
  uint64_t h = 1469598103934665603ull, w;
  size_t i = 0;
  for (; i + 8 <= sizeof *g; i += 8) {
    memcpy(&w, b + i, 8);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  }
  for (; i < sizeof *g; i++) h = (h ^ b[i]) * 1099511628211ull;
  return (uint32_t)(h ^ (h >> 32));
}

static void table_free(gtable *t) {
  free(t->st);
  free(t->slot);
  memset(t, 0, sizeof *t);
}

static rs_status table_rehash(gtable *t, uint32_t nslots) {
  int32_t *slot = calloc(nslots, sizeof *slot);
  if (!slot) return rs_fail(RS_ERR_NOMEM, "plan_graph: out of memory (state table)");
  uint32_t mask = nslots - 1;
  for (int32_t i = 0; i < t->n; i++) {
    uint32_t h = hash_state(&t->st[i]) & mask;
    while (slot[h]) h = (h + 1) & mask;
    slot[h] = i + 1;
  }
  free(t->slot);
  t->slot = slot;
  t->mask = mask;
  return RS_OK;
}

/* Id of state g, adding it when new. */
static rs_status table_intern(gtable *t, const gstate *g, int32_t *id) {
  uint32_t h = hash_state(g) & t->mask;
  while (t->slot[h]) {
    int32_t i = t->slot[h] - 1;
    if (memcmp(&t->st[i], g, sizeof *g) == 0) {
      *id = i;
      return RS_OK;
    }
    h = (h + 1) & t->mask;
  }
  if (t->n >= GRAPH_MAX_STATES)
    return rs_fail(RS_ERR_NOPATH, "plan_graph: search gave up after %d states", GRAPH_MAX_STATES);
  if (t->n == t->cap) {
    int32_t ncap = t->cap ? t->cap * 2 : 256;
    gstate *ns = realloc(t->st, (size_t)ncap * sizeof *ns);
    if (!ns) return rs_fail(RS_ERR_NOMEM, "plan_graph: out of memory (states)");
    t->st = ns;
    t->cap = ncap;
  }
  t->st[t->n] = *g;
  *id = t->n++;
  t->slot[h] = *id + 1;
  if ((uint32_t)t->n * 2 > t->mask + 1) return table_rehash(t, (t->mask + 1) * 2);
  return RS_OK;
}

/* ---- cost models ---- */

typedef struct gcost {
  rs_cost_model model;
  rs_enumeration e;
  int nops;
  int8_t ops[4];      /* pytorch: the Partial ops of src and dst, in order of appearance */
  const gstate *dst;  /* pytorch: zero-fill edges go toward the destination's P(sum) */
  const rs_mesh *m;
  const rs_tensor *t;
  /* pytorch model: per mesh dim bandwidth (GB/s) and hop latency (us) */
  double bw[RS_MAX_MESH_DIMS], lat[RS_MAX_MESH_DIMS];
} gcost;

/* Devices per host assumed by the pytorch cost model. PyTorch asks the device handle; recording
 * fixtures with the CPU fake process group gives 1 (every mesh dim of size > 1 counts as
 * inter-host). */
#define PYTORCH_DEVICES_PER_HOST 1

static void cost_setup(gcost *c, rs_cost_model model, const rs_mesh *m, const rs_tensor *t) {
  c->model = model;
  c->m = m;
  c->t = t;
  int64_t total = 1;
  for (int md = m->ndim - 1; md >= 0; md--) {
    c->bw[md] = 87.7;
    c->lat[md] = 0.6;
    total *= m->size[md];
    if (total > PYTORCH_DEVICES_PER_HOST) {
      c->bw[md] *= 0.22;
      c->lat[md] = 2.7;
    }
  }
}

enum { T_A2A, T_GATHER, T_REDUCE, T_CHUNK, T_RSCATTER, T_PARTITION };

/* Ring cost of PyTorch's allgather/reduce_scatter (hops = n-1) and allreduce (hops = 2(n-1)). */
static double ring_cost(const gcost *c, int md, double bytes_gb, double hops) {
  double n = (double)c->m->size[md];
  double latency = 6.6 + hops * c->lat[md];
  double bw = (bytes_gb * hops / n) / c->bw[md];
  return latency + bw * 1e6;
}

/* Cost of one transition of kind `kind` on mesh dim md, leaving state `from`. */
static double step_cost(const gcost *c, const gstate *from, int kind, int md) {
  if (c->model == RS_COST_SEED) {
    switch (kind) {
    case T_A2A: return 1;
    case T_GATHER: return 2;
    case T_REDUCE: return 4;
    case T_RSCATTER: return 2;
    default: return 0; /* chunk; the reference planner also charges chunk_cost for R -> P */
    }
  }
  /* pytorch: bytes of the whole tensor over the current state's shard count, in GiB */
  int64_t numel = 1;
  for (int d = 0; d < c->t->ndim; d++) numel *= c->t->shape[d];
  int64_t shards = 1;
  for (int i = 0; i < c->m->ndim; i++)
    if (from->pl[i][0] == RS_SHARD) shards *= c->m->size[i];
  double gb = (double)(numel * rs_dtype_size(c->t->dtype)) / (double)shards;
  gb = gb / 1024 / 1024 / 1024;
  double n = (double)c->m->size[md];
  switch (kind) {
  case T_GATHER: return ring_cost(c, md, gb * n, n - 1);
  case T_A2A: return ring_cost(c, md, gb, n - 1) + 1.0;
  case T_REDUCE: return ring_cost(c, md, gb, 2 * (n - 1));
  case T_RSCATTER: return ring_cost(c, md, gb, n - 1);
  default: return 0.0;
  }
}

/* ---- get_next_state ---- */

typedef struct gnext {
  int32_t n;
  int32_t id[RS_MAX_MESH_DIMS * (RS_MAX_DIMS + 2) * 2 + RS_MAX_DIMS * RS_MAX_DIMS];
  double cost[RS_MAX_MESH_DIMS * (RS_MAX_DIMS + 2) * 2 + RS_MAX_DIMS * RS_MAX_DIMS];
} gnext;

static rs_status grow_visit(gsearch *s) {
  int32_t ncap = s->tab.cap;
  if (ncap <= s->vcap) return RS_OK;
  uint8_t *v = realloc(s->visited, (size_t)ncap);
  int32_t *st = realloc(s->stamp, (size_t)ncap * sizeof *st);
  if (v) s->visited = v;
  if (st) s->stamp = st;
  int32_t *sp = realloc(s->stamp_pos, (size_t)ncap * sizeof *sp);
  if (sp) s->stamp_pos = sp;
  if (!v || !st || !sp) return rs_fail(RS_ERR_NOMEM, "plan_graph: out of memory (visited)");
  memset(s->visited + s->vcap, 0, (size_t)(ncap - s->vcap));
  for (int32_t i = s->vcap; i < ncap; i++) s->stamp[i] = -1;
  s->vcap = ncap;
  return RS_OK;
}

/* Dict insert: a new key goes to the end; an existing one keeps its place, takes the new cost. */
static rs_status next_put(gsearch *s, gnext *nx, int32_t expansion, const gstate *g, double cost) {
  int32_t id;
  rs_status st = table_intern(&s->tab, g, &id);
  if (st != RS_OK) return st;
  if ((st = grow_visit(s)) != RS_OK) return st;
  if (s->stamp[id] == expansion) {
    nx->cost[s->stamp_pos[id]] = cost;
    return RS_OK;
  }
  s->stamp[id] = expansion;
  s->stamp_pos[id] = nx->n;
  nx->id[nx->n] = id;
  nx->cost[nx->n] = cost;
  nx->n++;
  return RS_OK;
}

/* Current PyTorch after cases 1-5: case 6 for each op of the redistribution, then the
 * destination-directed zero-fill edges (find_min_cost_path adds them to the same dict). */
static rs_status next_states_pytorch(gsearch *s, const gcost *c, int mesh_ndim, int tndim,
                                     const gstate *cur, int32_t expansion, gnext *nx) {
  rs_status st;
  gstate g;
  for (int md = 0; md < mesh_ndim; md++) {
    if (cur->pl[md][0] != RS_REPLICATE) continue;
    for (int k = 0; k < c->nops; k++) {
      if (RS_MUTANT(240) && c->ops[k] != RS_SUM) continue; /* planted: R -> P(avg|min|max) missing */
      g = *cur;
      /* Mutant 651: R -> P(op) takes the previous op of the list (off by one): R -> P(avg|min|max)
       * becomes a second R -> P(sum) edge, so those destinations have no path. */
      set_pl(&g, md, rs_pl_partial((rs_redop)c->ops[RS_MUTANT(651) && k > 0 ? k - 1 : k]));
      int mask = 0;
      for (int i = 0; i < mesh_ndim; i++)
        if (g.pl[i][0] == RS_PARTIAL) mask |= 1 << g.pl[i][2];
      /* no mixed Partial ops, except sum with avg (they commute) */
      if ((mask & (mask - 1)) && mask != ((1 << RS_SUM) | (1 << RS_AVG))) continue;
      if ((st = next_put(s, nx, expansion, &g, step_cost(c, cur, T_PARTITION, md))) != RS_OK) return st;
    }
  }
  if (RS_MUTANT(241)) return RS_OK; /* planted: the zero-fill edge is missing */
  for (int d = 0; d < tndim; d++) {
    if (cur->len[d] == 0) continue;
    int md = cur->ord[d][cur->len[d] - 1];
    const int8_t *want = c->dst->pl[md];
    if (want[0] != RS_PARTIAL || want[2] != RS_SUM) continue;
    g = *cur;
    g.ord[d][--g.len[d]] = 0;
    set_pl(&g, md, rs_pl_partial(RS_SUM));
    if ((st = next_put(s, nx, expansion, &g, 0.0)) != RS_OK) return st;
  }
  return RS_OK;
}

static rs_status next_states(gsearch *s, const gcost *c, int mesh_ndim, int tndim,
                             int32_t cur_id, int32_t expansion, gnext *nx) {
  const gstate cur = s->tab.st[cur_id]; /* a copy: interning may move the table */
  nx->n = 0;
  rs_status st;
  gstate g;
  /* case 1: S(a) -> S(b), all-to-all: the last mesh dim of a's list goes to the end of b's */
  for (int a = 0; a < tndim; a++) {
    if (cur.len[a] == 0) continue;
    for (int b = 0; b < tndim; b++) {
      if (a == b) continue;
      g = cur;
      int md = g.ord[a][--g.len[a]];
      g.ord[a][g.len[a]] = 0;
      if (RS_MUTANT(12)) {
        /* planted bug: the moved mesh dim goes to the front of b's list */
        for (int k = g.len[b]; k > 0; k--) g.ord[b][k] = g.ord[b][k - 1];
        g.ord[b][0] = (int8_t)md;
        g.len[b]++;
      } else {
        g.ord[b][g.len[b]++] = (int8_t)md;
      }
      set_pl(&g, md, rs_pl_shard(b));
      if ((st = next_put(s, nx, expansion, &g, step_cost(c, &cur, T_A2A, md))) != RS_OK)
        return st;
    }
  }
  /* case 2: S -> R, all-gather of the last mesh dim of each list */
  for (int a = 0; a < tndim; a++) {
    if (cur.len[a] == 0) continue;
    g = cur;
    int md;
    if (RS_MUTANT(10) && g.len[a] > 1) {
      /* planted bug: gather the first mesh dim of the list instead of the last */
      md = g.ord[a][0];
      for (int k = 0; k + 1 < g.len[a]; k++) g.ord[a][k] = g.ord[a][k + 1];
      g.ord[a][--g.len[a]] = 0;
    } else {
      md = g.ord[a][--g.len[a]];
      g.ord[a][g.len[a]] = 0;
    }
    set_pl(&g, md, rs_pl_replicate());
    if ((st = next_put(s, nx, expansion, &g, step_cost(c, &cur, T_GATHER, md))) != RS_OK)
      return st;
  }
  /* case 3: P -> R, all-reduce */
  for (int md = 0; md < mesh_ndim; md++) {
    if (cur.pl[md][0] != RS_PARTIAL) continue;
    g = cur;
    set_pl(&g, md, rs_pl_replicate());
    if ((st = next_put(s, nx, expansion, &g, step_cost(c, &cur, T_REDUCE, md))) != RS_OK)
      return st;
  }
  /* case 4: R -> S(b), chunk: the mesh dim goes to the end of b's list */
  for (int md = 0; md < mesh_ndim; md++) {
    if (cur.pl[md][0] != RS_REPLICATE) continue;
    for (int b = 0; b < tndim; b++) {
      g = cur;
      g.ord[b][g.len[b]++] = (int8_t)md;
      set_pl(&g, md, rs_pl_shard(b));
      if ((st = next_put(s, nx, expansion, &g, step_cost(c, &cur, T_CHUNK, md))) != RS_OK)
        return st;
    }
  }
  /* case 5: P -> S(b), reduce-scatter */
  for (int md = 0; md < mesh_ndim; md++) {
    if (cur.pl[md][0] != RS_PARTIAL) continue;
    for (int b = 0; b < tndim; b++) {
      g = cur;
      g.ord[b][g.len[b]++] = (int8_t)md;
      set_pl(&g, md, rs_pl_shard(b));
      if ((st = next_put(s, nx, expansion, &g, step_cost(c, &cur, T_RSCATTER, md))) != RS_OK)
        return st;
    }
  }
  if (c->e == RS_ENUM_PYTORCH) return next_states_pytorch(s, c, mesh_ndim, tndim, &cur, expansion, nx);
  /* case 6: R -> P(sum), local partition (PyTorch's default Partial()) */
  for (int md = 0; md < mesh_ndim; md++) {
    if (cur.pl[md][0] != RS_REPLICATE) continue;
    g = cur;
    set_pl(&g, md, rs_pl_partial(RS_SUM));
    if ((st = next_put(s, nx, expansion, &g, step_cost(c, &cur, T_PARTITION, md))) != RS_OK)
      return st;
  }
  return RS_OK;
}

/* ---- heap of (cost, counter) ---- */

static int hless(const hentry *a, const hentry *b) {
  if (a->cost != b->cost) return a->cost < b->cost;
  return a->counter < b->counter;
}

static rs_status heap_push(gsearch *s, hentry e) {
  if (s->hn == s->hcap) {
    int64_t ncap = s->hcap ? s->hcap * 2 : 1024;
    hentry *nh = realloc(s->heap, (size_t)ncap * sizeof *nh);
    if (!nh) return rs_fail(RS_ERR_NOMEM, "plan_graph: out of memory (heap)");
    s->heap = nh;
    s->hcap = ncap;
  }
  int64_t i = s->hn++;
  while (i > 0) {
    int64_t p = (i - 1) / 2;
    if (!hless(&e, &s->heap[p])) break;
    s->heap[i] = s->heap[p];
    i = p;
  }
  s->heap[i] = e;
  return RS_OK;
}

static hentry heap_pop(gsearch *s) {
  hentry top = s->heap[0], last = s->heap[--s->hn];
  int64_t i = 0;
  for (;;) {
    int64_t l = 2 * i + 1, r = l + 1, m = i;
    const hentry *best = &last;
    if (l < s->hn && hless(&s->heap[l], best)) m = l, best = &s->heap[l];
    if (r < s->hn && hless(&s->heap[r], best)) m = r;
    if (m == i) break;
    s->heap[i] = s->heap[m];
    i = m;
  }
  if (s->hn > 0) s->heap[i] = last;
  return top;
}

static rs_status node_add(gsearch *s, int32_t state, int32_t parent, int32_t *node) {
  if (s->nn == s->ncap) {
    int64_t ncap = s->ncap ? s->ncap * 2 : 1024;
    if (ncap > INT32_MAX) return rs_fail(RS_ERR_NOPATH, "plan_graph: search too large");
    int32_t *a = realloc(s->node_state, (size_t)ncap * sizeof *a);
    if (a) s->node_state = a;
    int32_t *b = realloc(s->node_parent, (size_t)ncap * sizeof *b);
    if (b) s->node_parent = b;
    if (!a || !b) return rs_fail(RS_ERR_NOMEM, "plan_graph: out of memory (paths)");
    s->ncap = ncap;
  }
  s->node_state[s->nn] = state;
  s->node_parent[s->nn] = parent;
  *node = (int32_t)s->nn++;
  return RS_OK;
}

static void search_free(gsearch *s) {
  table_free(&s->tab);
  free(s->heap);
  free(s->node_state);
  free(s->node_parent);
  free(s->visited);
  free(s->stamp);
  free(s->stamp_pos);
}

/* The path ending at node, turned into steps: each hop changes exactly one mesh dim. */
static rs_status path_to_plan(gsearch *s, int32_t node, int mesh_ndim, rs_plan *out) {
  int32_t chain[RS_MAX_STEPS + 1];
  int len = 0;
  for (int32_t k = node; k >= 0; k = s->node_parent[k]) {
    if (len > RS_MAX_STEPS) return rs_fail(RS_ERR_INVALID, "plan: more than %d steps", RS_MAX_STEPS);
    chain[len++] = s->node_state[k];
  }
  memset(out, 0, sizeof *out);
  for (int i = len - 1; i > 0; i--) {
    const gstate *a = &s->tab.st[chain[i]], *b = &s->tab.st[chain[i - 1]];
    int md = -1;
    for (int j = 0; j < mesh_ndim; j++) {
      if (memcmp(a->pl[j], b->pl[j], 3) == 0) continue;
      if (md != -1) return rs_fail(RS_ERR_INVALID, "plan_graph: a hop changes two mesh dims");
      md = j;
    }
    if (md < 0) continue; /* placements equal: the reference planner emits no step */
    rs_step *st = &out->step[out->nsteps++];
    st->mesh_dim = md;
    st->from = get_pl(a, md);
    st->to = get_pl(b, md);
  }
  return RS_OK;
}

static void describe(const rs_sharding *s, char *buf, size_t cap) {
  if (rs_format_sharding(s, buf, cap) < 0 && cap) buf[0] = 0;
}

rs_status rs_ref_plan_graph(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                            const rs_sharding *dst, rs_cost_model cost, rs_plan *out) {
  return rs_ref_plan_graph_enum(m, t, src, dst, cost, RS_ENUM_SEED, out);
}

rs_status rs_ref_plan_graph_enum(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                                 const rs_sharding *dst, rs_cost_model cost, rs_enumeration e,
                                 rs_plan *out) {
  if (!m || !t || !src || !dst || !out)
    return rs_fail(RS_ERR_INVALID, "plan_graph: NULL argument");
  if (src->mesh_ndim != m->ndim || dst->mesh_ndim != m->ndim)
    return rs_fail(RS_ERR_INVALID, "plan_graph: placements count (%d, %d) != mesh ndim %d",
                   src->mesh_ndim, dst->mesh_ndim, m->ndim);
  if (cost != RS_COST_SEED && cost != RS_COST_PYTORCH)
    return rs_fail(RS_ERR_INVALID, "plan_graph: cost: unknown cost model %d", (int)cost);
  if (e != RS_ENUM_SEED && e != RS_ENUM_PYTORCH)
    return rs_fail(RS_ERR_INVALID, "plan_graph: enumeration: unknown %d", (int)e);
  gstate gs, gd;
  rs_status st;
  if ((st = from_sharding(src, m->ndim, t->ndim, &gs)) != RS_OK) return st;
  if ((st = from_sharding(dst, m->ndim, t->ndim, &gd)) != RS_OK) return st;

  /* Partial(op != sum) is never created (case 6 makes Partial(sum)) and no Partial moves to
   * another mesh dim, so such a destination Partial is reachable only where src has it already.
   * Saying so up front is what the exhaustive search would conclude, without the search. */
  for (int i = 0; e == RS_ENUM_SEED && i < m->ndim; i++) {
    if (gd.pl[i][0] == RS_PARTIAL && gd.pl[i][2] != RS_SUM && memcmp(gd.pl[i], gs.pl[i], 3) != 0) {
      char a[256], b[256], pd[32];
      describe(src, a, sizeof a);
      describe(dst, b, sizeof b);
      rs_format_placement(get_pl(&gd, i), pd, sizeof pd);
      return rs_fail(RS_ERR_NOPATH,
                     "plan_graph: no path from %s to %s: %s on mesh dim %d can only be kept from "
                     "the source (the reference planner creates Partial only as Partial(sum))",
                     a, b, pd, i);
    }
  }
  gcost c;
  cost_setup(&c, cost, m, t);
  c.e = e;
  c.dst = &gd;
  c.nops = 0;
  for (int pass = 0; pass < 2; pass++) /* the ops of src, then of dst, each once */
    for (int i = 0; i < m->ndim; i++) {
      const int8_t *pl = pass ? gd.pl[i] : gs.pl[i];
      if (pl[0] != RS_PARTIAL) continue;
      int seen = 0;
      for (int k = 0; k < c.nops; k++) seen |= c.ops[k] == pl[2];
      if (!seen) c.ops[c.nops++] = pl[2];
    }
  gsearch s;
  memset(&s, 0, sizeof s);
  gnext *nx = malloc(sizeof *nx);
  int32_t src_id, dst_id, node;
  int64_t counter = 0;
  int32_t expansion = 0;
  const rs_enumeration e_enum = e;
  hentry e0;
  if (!nx) return rs_fail(RS_ERR_NOMEM, "plan_graph: out of memory");
  if ((st = table_rehash(&s.tab, 1024)) != RS_OK) goto done;
  if ((st = table_intern(&s.tab, &gs, &src_id)) != RS_OK) goto done;
  if ((st = table_intern(&s.tab, &gd, &dst_id)) != RS_OK) goto done;
  if ((st = grow_visit(&s)) != RS_OK) goto done;
  if ((st = node_add(&s, src_id, -1, &node)) != RS_OK) goto done;
  e0 = (hentry){0.0, counter, src_id, node};
  if ((st = heap_push(&s, e0)) != RS_OK) goto done;
  while (s.hn > 0) {
    hentry e = heap_pop(&s);
    if (e.state == dst_id) {
      st = path_to_plan(&s, e.node, m->ndim, out);
      out->enumeration = e_enum;
      goto done;
    }
    if (s.visited[e.state]) continue;
    s.visited[e.state] = 1;
    if ((st = next_states(&s, &c, m->ndim, t->ndim, e.state, expansion++, nx)) != RS_OK)
      goto done;
    for (int32_t k = 0; k < nx->n; k++) {
      if (s.visited[nx->id[k]]) continue;
      if ((st = node_add(&s, nx->id[k], e.node, &node)) != RS_OK) goto done;
      hentry ne = {e.cost + nx->cost[k], ++counter, nx->id[k], node};
      if ((st = heap_push(&s, ne)) != RS_OK) goto done;
    }
  }
  {
    char a[256], b[256];
    describe(src, a, sizeof a);
    describe(dst, b, sizeof b);
    st = rs_fail(RS_ERR_NOPATH,
                 "plan_graph: no path from %s to %s", a, b);
  }
done:
  free(nx);
  search_free(&s);
  return st;
}

/* The cost model's price of a whole plan: each step priced from the state it leaves, as the search
 * prices an edge (so a plan the graph planner made costs what its search paid for it). */
rs_status rs_ref_plan_cost(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                           const rs_plan *p, rs_cost_model model, double *out) {
  if (!m || !t || !src || !p || !out) return rs_fail(RS_ERR_INVALID, "plan_cost: NULL argument");
  gcost c;
  memset(&c, 0, sizeof c);
  cost_setup(&c, model, m, t);
  rs_sharding cur = *src;
  double sum = 0;
  for (int i = 0; i < p->nsteps; i++) {
    gstate g;
    rs_collective coll;
    rs_status st;
    if ((st = from_sharding(&cur, m->ndim, t->ndim, &g)) != RS_OK) return st;
    if ((st = rs_step_collective_enum(&p->step[i], p->enumeration, &coll)) != RS_OK) return st;
    int kind = T_PARTITION;
    switch (coll) {
    case RS_COLL_ALL_GATHER: kind = T_GATHER; break;
    case RS_COLL_ALL_REDUCE: kind = T_REDUCE; break;
    case RS_COLL_REDUCE_SCATTER: kind = T_RSCATTER; break;
    case RS_COLL_ALL_TO_ALL: kind = T_A2A; break;
    case RS_COLL_CHUNK: kind = T_CHUNK; break;
    default: break;
    }
    if (coll != RS_COLL_NONE) sum += step_cost(&c, &g, kind, p->step[i].mesh_dim);
    if ((st = rs_mesh_apply_step_enum(m, &cur, &p->step[i], t->ndim, p->enumeration)) != RS_OK) return st;
  }
  *out = sum;
  return RS_OK;
}
