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
 *    push order (here one entry per state, its least (cost, counter): see heap_relax);
 *  - the search returns when the destination is popped, not when it is pushed. */
#include <stdlib.h>
#include <string.h>

#include "core/mutant.h"
#include "reshard/ref.h"

/* Give up beyond this many distinct states: a 6-D mesh over an 8-D tensor has millions, and
 * searching 2^20 of them takes seconds and a few hundred MB. */
#define GRAPH_MAX_STATES (1 << 20)

/* ---- DistStates as 64-bit keys ----
 *
 * A DistState is one byte per mesh dim (byte md = bits 8*md .. 8*md+7 of the key):
 *   0x00                Replicate
 *   0x40 | d << 3 | k   Shard(d), and md is the k-th (from 0) mesh dim of tensor dim d's shard order
 *   0x80 | op           Partial(op)
 * Bytes beyond the mesh are 0. Tensor dim d's shard order is the mesh dims holding Shard(d), sorted
 * by k, so one key says placements and shard order together, and two DistStates are equal exactly
 * when their keys are. Invariant: the positions k of tensor dim d's mesh dims are 0 .. len-1 (every
 * transition removes the last of a list or appends after it, so it holds along the search). Copying,
 * hashing and comparing a state is a word operation; that, and no allocation for small searches, is
 * all that makes this search fast: the search itself is PyTorch's, step for step. */
typedef uint64_t gkey;

enum { B_REPLICATE = 0x00, B_SHARD = 0x40, B_PARTIAL = 0x80 };

_Static_assert(RS_MAX_MESH_DIMS <= 8 && RS_MAX_DIMS <= 8, "a key holds 8 mesh dims; d and k take 3 bits");

static uint8_t b_shard(int d, int k) {
  /* Planted bug 915: the key forgets the shard-order position, so DistStates that differ only in
   * their shard order are one state (the search takes one order for another). */
  return (uint8_t)(B_SHARD | d << 3 | (RS_MUTANT(915) ? 0 : k));
}
static uint8_t b_partial(int op) { return (uint8_t)(B_PARTIAL | op); }
static int b_kind(uint8_t b) { return b & B_PARTIAL ? RS_PARTIAL : b & B_SHARD ? RS_SHARD : RS_REPLICATE; }
static int b_dim(uint8_t b) { return (b >> 3) & 7; }
static int b_pos(uint8_t b) { return b & 7; }

/* The placement a byte holds (its shard-order position dropped). */
static rs_placement b_placement(uint8_t b) {
  switch (b_kind(b)) {
  case RS_SHARD: return rs_pl_shard(b_dim(b));
  case RS_PARTIAL: return rs_pl_partial((rs_redop)(b & 3));
  default: return rs_pl_replicate();
  }
}

static uint8_t key_byte(gkey k, int md) { return (uint8_t)(k >> (8 * md)); }
static gkey key_set(gkey k, int md, uint8_t b) {
  return (k & ~((gkey)0xff << (8 * md))) | (gkey)b << (8 * md);
}

static rs_status from_sharding(const rs_sharding *s, int mesh_ndim, int tndim, gkey *out) {
  gkey k = 0;
  for (int i = 0; i < mesh_ndim; i++) {
    rs_placement p = s->p[i];
    if (p.kind == RS_SHARD && p.dim < 0) p.dim = (int8_t)(p.dim + tndim);
    if (p.kind == RS_SHARD && (p.dim < 0 || p.dim >= tndim))
      return rs_fail(RS_ERR_INVALID, "plan_graph: placements[%d]: shard dim %d out of range", i,
                     (int)s->p[i].dim);
    if (p.kind == RS_PARTIAL && (p.op < RS_SUM || p.op > RS_MAX))
      return rs_fail(RS_ERR_INVALID, "plan_graph: placements[%d]: unknown reduce op %d", i, (int)p.op);
    if (p.kind != RS_SHARD && p.kind != RS_PARTIAL && p.kind != RS_REPLICATE)
      return rs_fail(RS_ERR_INVALID, "plan_graph: placements[%d]: unknown kind %d", i, (int)p.kind);
    if (p.kind == RS_PARTIAL) k = key_set(k, i, b_partial(p.op));
    if (p.kind != RS_SHARD) continue;
    int pos = -1; /* where the shard order lists mesh dim i */
    for (int j = 0; j < s->order_len[p.dim] && j < RS_MAX_MESH_DIMS; j++)
      if (s->order[p.dim][j] == i) pos = pos < 0 ? j : RS_MAX_MESH_DIMS;
    if (pos < 0 || pos >= mesh_ndim)
      return rs_fail(RS_ERR_INVALID, "plan_graph: placements[%d] is S(%d) but the shard order of tensor "
                     "dim %d lists mesh dim %d %s", i, p.dim, p.dim, i, pos < 0 ? "nowhere" : "twice");
    k = key_set(k, i, b_shard(p.dim, pos));
  }
  for (int d = 0; d < tndim; d++) { /* every listed mesh dim is S(d): the orders are complete */
    int count = 0;
    for (int i = 0; i < mesh_ndim; i++)
      if (b_kind(key_byte(k, i)) == RS_SHARD && b_dim(key_byte(k, i)) == d) count++;
    if (s->order_len[d] != count)
      return rs_fail(RS_ERR_INVALID, "plan_graph: the shard order of tensor dim %d lists %d mesh dims "
                     "but %d placements shard it", d, s->order_len[d], count);
  }
  *out = k;
  return RS_OK;
}

/* What runs once per next state is inlined into each transition loop: a call there was a fifth of
 * the search's instructions (callgrind on the recorded corpus, 298M -> 241M). */
#if defined(__GNUC__)
#define PER_NEXT_STATE static inline __attribute__((always_inline))
#else
#define PER_NEXT_STATE static inline
#endif

/* ---- the search's arrays ----
 *
 * Every array starts in the search's own first buffer (on the stack), which holds the typical
 * search whole (the recorded PyTorch corpus's median search interns 10 states and pushes 15 times);
 * a search that outgrows one moves that array to the heap, doubling. No allocation is made for a
 * small plan and nothing outlives the call. */
#define FIRST_STATES 64 /* states (and heap entries); the slot table starts with twice as many slots */

typedef struct gstate {
  gkey key;
  /* In the heap: the least (cost, counter) pushed for it and the state whose expansion pushed it;
   * expanded: its distance and its predecessor on the path. */
  double cost;
  int64_t counter;
  int32_t parent; /* -1: the source */
  int32_t hpos;   /* its place in the heap, -1 when not there */
  int32_t stamp, pos; /* the last expansion that produced it, and its place in that dict */
  int32_t visited;    /* expanded already */
} gstate;

typedef struct gsearch {
  gstate *st; /* by id: ids are given in order of first sight */
  int32_t n, cap;
  int32_t *slot; /* open addressing over st: id + 1, 0 = empty; at most half full */
  uint32_t mask;
  int32_t *heap; /* state ids, a binary heap on their (cost, counter) */
  int32_t hn, hcap;
  gstate st0[FIRST_STATES];
  int32_t slot0[2 * FIRST_STATES];
  int32_t heap0[FIRST_STATES];
} gsearch;

static void search_init(gsearch *s) {
  s->st = s->st0, s->n = 0, s->cap = FIRST_STATES;
  s->slot = s->slot0, s->mask = 2 * FIRST_STATES - 1;
  memset(s->slot0, 0, sizeof s->slot0);
  s->heap = s->heap0, s->hn = 0, s->hcap = FIRST_STATES;
}

static void search_free(gsearch *s) {
  if (s->st != s->st0) free(s->st);
  if (s->slot != s->slot0) free(s->slot);
  if (s->heap != s->heap0) free(s->heap);
}

/* A copy of array a (cap elements of size sz, `first` when still the first buffer) with twice the
 * room, or NULL (a is then unchanged). */
static void *grow(void *a, int32_t cap, size_t sz, const void *first) {
  if (cap > INT32_MAX / 2) return NULL;
  if (a != first) return realloc(a, 2 * (size_t)cap * sz);
  void *b = malloc(2 * (size_t)cap * sz);
  if (b) memcpy(b, a, (size_t)cap * sz);
  return b;
}

/* The slot of a key: its Fibonacci hash. It decides only where a state sits in the table, never its
 * id or the search order. */
static uint32_t slot_of(gkey k, uint32_t mask) {
  return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

static rs_status table_rehash(gsearch *s) {
  uint32_t nslots = 2 * (s->mask + 1);
  int32_t *slot = calloc(nslots, sizeof *slot);
  if (!slot) return rs_fail(RS_ERR_NOMEM, "plan_graph: out of memory (state table)");
  for (int32_t i = 0; i < s->n; i++) {
    uint32_t h = slot_of(s->st[i].key, nslots - 1);
    while (slot[h]) h = (h + 1) & (nslots - 1);
    slot[h] = i + 1;
  }
  if (s->slot != s->slot0) free(s->slot);
  s->slot = slot;
  s->mask = nslots - 1;
  return RS_OK;
}

/* Id of state k, adding it (not visited, in no dict) when new. */
PER_NEXT_STATE rs_status table_intern(gsearch *s, gkey k, int32_t *id) {
  uint32_t h = slot_of(k, s->mask);
  for (; s->slot[h]; h = (h + 1) & s->mask)
    if (s->st[s->slot[h] - 1].key == k) {
      *id = s->slot[h] - 1;
      return RS_OK;
    }
  if (s->n >= GRAPH_MAX_STATES)
    return rs_fail(RS_ERR_NOPATH, "plan_graph: search gave up after %d states", GRAPH_MAX_STATES);
  if (s->n == s->cap) {
    gstate *ns = grow(s->st, s->cap, sizeof *ns, s->st0);
    if (!ns) return rs_fail(RS_ERR_NOMEM, "plan_graph: out of memory (states)");
    s->st = ns;
    s->cap *= 2;
  }
  s->st[s->n] = (gstate){.key = k, .parent = -1, .hpos = -1, .stamp = -1};
  *id = s->n++;
  s->slot[h] = *id + 1;
  if ((uint32_t)s->n * 2 > s->mask + 1) return table_rehash(s);
  return RS_OK;
}

/* ---- cost models ---- */

typedef struct gcost {
  rs_cost_model model;
  rs_enumeration e;
  int nops;
  int8_t ops[4]; /* pytorch: the Partial ops of src and dst, in order of appearance */
  gkey dst;      /* pytorch: zero-fill edges go toward the destination's P(sum) */
  const rs_mesh *m;
  int64_t bytes; /* the whole tensor's */
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
  int64_t numel = 1;
  for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
  c->bytes = numel * rs_dtype_size(t->dtype);
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

/* One state taken apart for its expansion: what every transition out of it needs, computed once. */
typedef struct gview {
  gkey key;
  int8_t len[RS_MAX_DIMS];  /* mesh dims sharding tensor dim d */
  int8_t first[RS_MAX_DIMS], last[RS_MAX_DIMS]; /* the first and last of them in d's order */
  int pmask;                /* bit op set when some mesh dim is Partial(op) */
  double gb;                /* pytorch cost: GiB per shard of this state */
} gview;

static void view_of(const gcost *c, gkey k, gview *v) {
  v->key = k;
  v->pmask = 0;
  memset(v->len, 0, sizeof v->len);
  int64_t shards = 1;
  for (int md = 0; md < c->m->ndim; md++) {
    uint8_t b = key_byte(k, md);
    if (b_kind(b) == RS_PARTIAL) v->pmask |= 1 << (b & 3);
    if (b_kind(b) != RS_SHARD) continue;
    shards *= c->m->size[md];
    int d = b_dim(b);
    v->len[d]++;
    if (b_pos(b) == 0) v->first[d] = (int8_t)md;
  }
  /* Positions are 0 .. len-1: the last is at len-1. Planted bug 916: the view takes a tensor dim's
   * first mesh dim for its last, so all-to-all and all-gather move a mesh dim that is not the last
   * of the order (illegal steps, or a wrong final order). */
  for (int md = 0; md < c->m->ndim; md++) {
    uint8_t b = key_byte(k, md);
    if (b_kind(b) == RS_SHARD && b_pos(b) == (RS_MUTANT(916) ? 0 : v->len[b_dim(b)] - 1))
      v->last[b_dim(b)] = (int8_t)md;
  }
  /* bytes of the whole tensor over the current state's shard count, in GiB */
  double gb = (double)c->bytes / (double)shards;
  v->gb = gb / 1024 / 1024 / 1024;
}

enum { T_A2A, T_GATHER, T_REDUCE, T_CHUNK, T_RSCATTER, T_PARTITION };

/* Ring cost of PyTorch's allgather/reduce_scatter (hops = n-1) and allreduce (hops = 2(n-1)). */
static double ring_cost(const gcost *c, int md, double bytes_gb, double hops) {
  double n = (double)c->m->size[md];
  double latency = 6.6 + hops * c->lat[md];
  double bw = (bytes_gb * hops / n) / c->bw[md];
  return latency + bw * 1e6;
}

/* Cost of one transition of kind `kind` on mesh dim md, leaving the state of view v. */
static double step_cost(const gcost *c, const gview *v, int kind, int md) {
  if (c->model == RS_COST_SEED) {
    switch (kind) {
    case T_A2A: return 1;
    case T_GATHER: return 2;
    case T_REDUCE: return 4;
    case T_RSCATTER: return 2;
    default: return 0; /* chunk; the reference planner also charges chunk_cost for R -> P */
    }
  }
  double gb = v->gb, n = (double)c->m->size[md];
  switch (kind) {
  case T_GATHER: return ring_cost(c, md, gb * n, n - 1);
  case T_A2A: return ring_cost(c, md, gb, n - 1) + 1.0;
  case T_REDUCE: return ring_cost(c, md, gb, 2 * (n - 1));
  case T_RSCATTER: return ring_cost(c, md, gb, n - 1);
  default: return 0.0;
  }
}

/* ---- get_next_state ---- */

/* The next states of one expansion, as PyTorch's dict: insertion order, and each state once. */
typedef struct gnext {
  int32_t n;
  int32_t id[RS_MAX_MESH_DIMS * (RS_MAX_DIMS + 2) * 2 + RS_MAX_DIMS * RS_MAX_DIMS];
  double cost[RS_MAX_MESH_DIMS * (RS_MAX_DIMS + 2) * 2 + RS_MAX_DIMS * RS_MAX_DIMS];
} gnext;

/* Dict insert: a new key goes to the end; an existing one keeps its place, takes the new cost. A
 * state expanded already is interned and left out: the search would skip it, and leaving it out
 * moves no other entry's relative place. */
PER_NEXT_STATE rs_status next_put(gsearch *s, gnext *nx, int32_t expansion, gkey k, double cost) {
  int32_t id = -1;
  rs_status st = table_intern(s, k, &id);
  if (st != RS_OK) return st;
  gstate *g = &s->st[id];
  if (g->visited) return RS_OK;
  if (g->stamp == expansion) {
    nx->cost[g->pos] = cost;
    return RS_OK;
  }
  g->stamp = expansion;
  g->pos = nx->n;
  nx->id[nx->n] = id;
  nx->cost[nx->n] = cost;
  nx->n++;
  return RS_OK;
}

/* Mesh dim md (R or P) becomes Shard(b), appended to the end of b's shard order. */
static gkey append_shard(const gview *v, gkey k, int md, int b) {
  if (RS_MUTANT(12)) {
    /* planted bug: the moved mesh dim goes to the front of b's list */
    for (int i = 0; i < RS_MAX_MESH_DIMS; i++) {
      uint8_t x = key_byte(k, i);
      if (b_kind(x) == RS_SHARD && b_dim(x) == b) k = key_set(k, i, b_shard(b, b_pos(x) + 1));
    }
    return key_set(k, md, b_shard(b, 0));
  }
  return key_set(k, md, b_shard(b, v->len[b]));
}

/* Current PyTorch after cases 1-5: case 6 for each op of the redistribution, then the
 * destination-directed zero-fill edges (find_min_cost_path adds them to the same dict). */
static rs_status next_states_pytorch(gsearch *s, const gcost *c, int tndim, const gview *v,
                                     int32_t expansion, gnext *nx) {
  rs_status st;
  for (int md = 0; md < c->m->ndim; md++) {
    if (b_kind(key_byte(v->key, md)) != RS_REPLICATE) continue;
    for (int k = 0; k < c->nops; k++) {
      if (RS_MUTANT(240) && c->ops[k] != RS_SUM) continue; /* planted: R -> P(avg|min|max) missing */
      /* Mutant 651: R -> P(op) takes the previous op of the list (off by one): R -> P(avg|min|max)
       * becomes a second R -> P(sum) edge, so those destinations have no path. */
      int op = c->ops[RS_MUTANT(651) && k > 0 ? k - 1 : k];
      int mask = v->pmask | 1 << op; /* md was Replicate: it adds op only */
      /* no mixed Partial ops, except sum with avg (they commute) */
      if ((mask & (mask - 1)) && mask != ((1 << RS_SUM) | (1 << RS_AVG))) continue;
      gkey g = key_set(v->key, md, b_partial(op));
      if ((st = next_put(s, nx, expansion, g, step_cost(c, v, T_PARTITION, md))) != RS_OK) return st;
    }
  }
  if (RS_MUTANT(241)) return RS_OK; /* planted: the zero-fill edge is missing */
  for (int d = 0; d < tndim; d++) {
    if (v->len[d] == 0) continue;
    int md = v->last[d];
    if (key_byte(c->dst, md) != b_partial(RS_SUM)) continue;
    if ((st = next_put(s, nx, expansion, key_set(v->key, md, b_partial(RS_SUM)), 0.0)) != RS_OK) return st;
  }
  return RS_OK;
}

static rs_status next_states(gsearch *s, const gcost *c, int tndim, int32_t cur_id, int32_t expansion,
                             gnext *nx) {
  gview v;
  view_of(c, s->st[cur_id].key, &v);
  const int mesh_ndim = c->m->ndim;
  nx->n = 0;
  rs_status st;
  /* case 1: S(a) -> S(b), all-to-all: the last mesh dim of a's list goes to the end of b's */
  for (int a = 0; a < tndim; a++) {
    if (v.len[a] == 0) continue;
    int md = v.last[a];
    double cost = step_cost(c, &v, T_A2A, md); /* a transition's cost depends on its mesh dim only */
    for (int b = 0; b < tndim; b++) {
      if (a == b) continue;
      gkey g = append_shard(&v, v.key, md, b);
      if ((st = next_put(s, nx, expansion, g, cost)) != RS_OK) return st;
    }
  }
  /* case 2: S -> R, all-gather of the last mesh dim of each list */
  for (int a = 0; a < tndim; a++) {
    if (v.len[a] == 0) continue;
    int md = v.last[a];
    gkey g = v.key;
    if (RS_MUTANT(10) && v.len[a] > 1) {
      /* planted bug: gather the first mesh dim of the list instead of the last */
      md = v.first[a];
      for (int i = 0; i < mesh_ndim; i++) {
        uint8_t x = key_byte(g, i);
        if (b_kind(x) == RS_SHARD && b_dim(x) == a && i != md) g = key_set(g, i, b_shard(a, b_pos(x) - 1));
      }
    }
    g = key_set(g, md, B_REPLICATE);
    if ((st = next_put(s, nx, expansion, g, step_cost(c, &v, T_GATHER, md))) != RS_OK) return st;
  }
  /* case 3: P -> R, all-reduce */
  for (int md = 0; md < mesh_ndim; md++) {
    if (b_kind(key_byte(v.key, md)) != RS_PARTIAL) continue;
    gkey g = key_set(v.key, md, B_REPLICATE);
    if ((st = next_put(s, nx, expansion, g, step_cost(c, &v, T_REDUCE, md))) != RS_OK) return st;
  }
  /* case 4: R -> S(b), chunk: the mesh dim goes to the end of b's list */
  for (int md = 0; md < mesh_ndim; md++) {
    if (b_kind(key_byte(v.key, md)) != RS_REPLICATE) continue;
    double cost = step_cost(c, &v, T_CHUNK, md);
    for (int b = 0; b < tndim; b++) {
      gkey g = append_shard(&v, v.key, md, b);
      if ((st = next_put(s, nx, expansion, g, cost)) != RS_OK) return st;
    }
  }
  /* case 5: P -> S(b), reduce-scatter */
  for (int md = 0; md < mesh_ndim; md++) {
    if (b_kind(key_byte(v.key, md)) != RS_PARTIAL) continue;
    double cost = step_cost(c, &v, T_RSCATTER, md);
    for (int b = 0; b < tndim; b++) {
      gkey g = append_shard(&v, v.key, md, b);
      if ((st = next_put(s, nx, expansion, g, cost)) != RS_OK) return st;
    }
  }
  if (c->e == RS_ENUM_PYTORCH) return next_states_pytorch(s, c, tndim, &v, expansion, nx);
  /* case 6: R -> P(sum), local partition (PyTorch's default Partial()) */
  for (int md = 0; md < mesh_ndim; md++) {
    if (b_kind(key_byte(v.key, md)) != RS_REPLICATE) continue;
    gkey g = key_set(v.key, md, b_partial(RS_SUM));
    if ((st = next_put(s, nx, expansion, g, step_cost(c, &v, T_PARTITION, md))) != RS_OK) return st;
  }
  return RS_OK;
}

/* ---- heap of (cost, push counter) ----
 *
 * PyTorch pushes an entry (cost, counter) for every next state of every expansion and skips an
 * entry whose state was expanded already. Of one state's entries only the least (cost, counter) can
 * pop first, and the counter only grows; so keeping one entry per state, replaced by a later push
 * only at a strictly lower cost (decrease-key), pops the states in PyTorch's order with PyTorch's
 * predecessors. */

static int hless(const gsearch *s, int32_t a, int32_t b) {
  const gstate *x = &s->st[a], *y = &s->st[b];
  if (x->cost != y->cost) return x->cost < y->cost;
  return x->counter < y->counter;
}

static void heap_up(gsearch *s, int32_t i) {
  int32_t id = s->heap[i];
  while (i > 0) {
    int32_t p = (i - 1) / 2;
    if (!hless(s, id, s->heap[p])) break;
    s->heap[i] = s->heap[p];
    s->st[s->heap[i]].hpos = i;
    i = p;
  }
  s->heap[i] = id;
  s->st[id].hpos = i;
}

/* Push (cost, counter) for state id, reached by expanding parent. */
static rs_status heap_relax(gsearch *s, int32_t id, double cost, int64_t counter, int32_t parent) {
  gstate *g = &s->st[id];
  if (g->hpos >= 0 && !(cost < g->cost)) return RS_OK; /* its entry in the heap pops first */
  if (g->hpos < 0) {
    if (s->hn == s->hcap) {
      int32_t *nh = grow(s->heap, s->hcap, sizeof *nh, s->heap0);
      if (!nh) return rs_fail(RS_ERR_NOMEM, "plan_graph: out of memory (heap)");
      s->heap = nh;
      s->hcap *= 2;
    }
    g->hpos = s->hn++;
    s->heap[g->hpos] = id;
  }
  g->cost = cost;
  g->counter = counter;
  g->parent = parent;
  heap_up(s, g->hpos);
  return RS_OK;
}

/* The state of the least (cost, counter). */
static int32_t heap_pop(gsearch *s) {
  int32_t top = s->heap[0], last = s->heap[--s->hn];
  s->st[top].hpos = -1;
  if (s->hn == 0) return top;
  int32_t i = 0;
  for (;;) {
    int32_t l = 2 * i + 1, r = l + 1, m = last;
    if (l < s->hn && hless(s, s->heap[l], m)) m = s->heap[l];
    if (r < s->hn && hless(s, s->heap[r], m)) m = s->heap[r];
    if (m == last) break;
    int32_t c = m == s->heap[l] ? l : r;
    s->heap[i] = m;
    s->st[m].hpos = i;
    i = c;
  }
  s->heap[i] = last;
  s->st[last].hpos = i;
  return top;
}

/* The path ending at state `last`, turned into steps: each hop changes exactly one mesh dim's
 * placement. */
static rs_status path_to_plan(gsearch *s, int32_t last, int mesh_ndim, rs_plan *out) {
  int32_t chain[RS_MAX_STEPS + 1];
  int len = 0;
  for (int32_t k = last; k >= 0; k = s->st[k].parent) {
    if (len > RS_MAX_STEPS) return rs_fail(RS_ERR_INVALID, "plan: more than %d steps", RS_MAX_STEPS);
    chain[len++] = k;
  }
  memset(out, 0, sizeof *out);
  for (int i = len - 1; i > 0; i--) {
    gkey a = s->st[chain[i]].key, b = s->st[chain[i - 1]].key;
    int md = -1;
    for (int j = 0; j < mesh_ndim; j++) {
      rs_placement pa = b_placement(key_byte(a, j)), pb = b_placement(key_byte(b, j));
      if (pa.kind == pb.kind && pa.dim == pb.dim && pa.op == pb.op) continue;
      if (md != -1) return rs_fail(RS_ERR_INVALID, "plan_graph: a hop changes two mesh dims");
      md = j;
    }
    if (md < 0) continue; /* placements equal: the reference planner emits no step */
    rs_step *st = &out->step[out->nsteps++];
    st->mesh_dim = md;
    st->from = b_placement(key_byte(a, md));
    st->to = b_placement(key_byte(b, md));
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
  gkey gs, gd;
  rs_status st;
  if ((st = from_sharding(src, m->ndim, t->ndim, &gs)) != RS_OK) return st;
  if ((st = from_sharding(dst, m->ndim, t->ndim, &gd)) != RS_OK) return st;

  /* Partial(op != sum) is never created (case 6 makes Partial(sum)) and no Partial moves to
   * another mesh dim, so such a destination Partial is reachable only where src has it already.
   * Saying so up front is what the exhaustive search would conclude, without the search. */
  for (int i = 0; e == RS_ENUM_SEED && i < m->ndim; i++) {
    uint8_t want = key_byte(gd, i);
    if (b_kind(want) == RS_PARTIAL && want != b_partial(RS_SUM) && want != key_byte(gs, i)) {
      char a[256], b[256], pd[32];
      describe(src, a, sizeof a);
      describe(dst, b, sizeof b);
      rs_format_placement(b_placement(want), pd, sizeof pd);
      return rs_fail(RS_ERR_NOPATH,
                     "plan_graph: no path from %s to %s: %s on mesh dim %d can only be kept from "
                     "the source (the reference planner creates Partial only as Partial(sum))",
                     a, b, pd, i);
    }
  }
  gcost c;
  cost_setup(&c, cost, m, t);
  c.e = e;
  c.dst = gd;
  c.nops = 0;
  for (int pass = 0; pass < 2; pass++) /* the ops of src, then of dst, each once */
    for (int i = 0; i < m->ndim; i++) {
      uint8_t b = key_byte(pass ? gd : gs, i);
      if (b_kind(b) != RS_PARTIAL) continue;
      int seen = 0;
      for (int k = 0; k < c.nops; k++) seen |= c.ops[k] == (b & 3);
      if (!seen) c.ops[c.nops++] = (int8_t)(b & 3);
    }

  /* Dijkstra as PyTorch runs it: pop the least (cost, counter); the destination ends the search
   * when popped (not when pushed); every next state not expanded yet is pushed with the next
   * counter (heap_relax keeps the entry that pops first). */
  gsearch s;
  gnext nx;
  int32_t src_id = -1, dst_id = -1, expansion = 0;
  int64_t counter = 0;
  search_init(&s);
  if ((st = table_intern(&s, gs, &src_id)) != RS_OK) goto done;
  if ((st = table_intern(&s, gd, &dst_id)) != RS_OK) goto done;
  if ((st = heap_relax(&s, src_id, 0.0, counter, -1)) != RS_OK) goto done;
  while (s.hn > 0) {
    int32_t state = heap_pop(&s);
    if (state == dst_id) {
      st = path_to_plan(&s, state, m->ndim, out);
      out->enumeration = e;
      goto done;
    }
    s.st[state].visited = 1;
    double dist = s.st[state].cost;
    if ((st = next_states(&s, &c, t->ndim, state, expansion++, &nx)) != RS_OK) goto done;
    for (int32_t k = 0; k < nx.n; k++) /* none of them is expanded yet (next_put) */
      if ((st = heap_relax(&s, nx.id[k], dist + nx.cost[k], ++counter, state)) != RS_OK) goto done;
  }
  {
    char a[256], b[256];
    describe(src, a, sizeof a);
    describe(dst, b, sizeof b);
    st = rs_fail(RS_ERR_NOPATH, "plan_graph: no path from %s to %s", a, b);
  }
done:
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
    gkey g;
    gview v;
    rs_collective coll;
    rs_status st;
    if ((st = from_sharding(&cur, m->ndim, t->ndim, &g)) != RS_OK) return st;
    view_of(&c, g, &v);
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
    if (coll != RS_COLL_NONE) sum += step_cost(&c, &v, kind, p->step[i].mesh_dim);
    if ((st = rs_mesh_apply_step_enum(m, &cur, &p->step[i], t->ndim, p->enumeration)) != RS_OK) return st;
  }
  *out = sum;
  return RS_OK;
}
