/* view.c - boxes and strided views on the host: the CPU pack/unpack kernels. A view is copied as
 * nested loops over its outer dims with one copy per contiguous run (memcpy, an inline AVX2 loop, or
 * streaming stores); dims that are contiguous on both sides are merged first so that runs are as
 * long as the layouts allow. */
#include <string.h>
#include "opt_internal.h"
#include "core/mutant.h"

int64_t rs_box_numel(int ndim, const rs_box *b) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= b->size[d];
  return n;
}

int64_t rs_box_intersect(int ndim, const rs_box *a, const rs_box *b, rs_box *out) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    int64_t lo = a->start[d] > b->start[d] ? a->start[d] : b->start[d];
    int64_t ea = a->start[d] + a->size[d], eb = b->start[d] + b->size[d];
    int64_t hi = ea < eb ? ea : eb;
    out->start[d] = lo;
    out->size[d] = hi > lo ? hi - lo : 0;
    n *= out->size[d];
  }
  return n;
}

void rs_view_in_box(rs_view *v, void *data, int esize, int ndim, const rs_box *buf,
                    const rs_box *region) {
  v->esize = esize;
  v->ndim = ndim;
  int64_t stride = esize, off = 0;
  for (int d = ndim - 1; d >= 0; --d) {
    v->size[d] = region->size[d];
    v->stride[d] = stride;
    off += (region->start[d] - buf->start[d]) * stride;
    /* Mutant 101: strides from the region's extent instead of the buffer's. */
    stride *= RS_MUTANT(101) ? region->size[d] : buf->size[d];
  }
  v->base = (char *)data + off;
}

void rs_view_packed(rs_view *v, void *data, int esize, int ndim, const int64_t *size) {
  v->esize = esize;
  v->ndim = ndim;
  int64_t stride = esize;
  for (int d = ndim - 1; d >= 0; --d) {
    v->size[d] = size[d];
    v->stride[d] = stride;
    stride *= size[d];
  }
  v->base = data;
}

int64_t rs_view_bytes(const rs_view *v) {
  int64_t n = v->esize;
  for (int d = 0; d < v->ndim; ++d) n *= v->size[d];
  return n;
}

/* Merged loop nest of a copy: run bytes innermost, then up to RS_MAX_DIMS outer dims. */
typedef struct nest {
  int n;
  int64_t run;
  int64_t size[RS_MAX_DIMS];
  int64_t sd[RS_MAX_DIMS], ss[RS_MAX_DIMS];
} nest;

/* Build the nest of two views of the same shape; returns 0 when empty. */
static int make_nest(const rs_view *a, const rs_view *b, nest *o) {
  int64_t size[RS_MAX_DIMS], sa[RS_MAX_DIMS], sb[RS_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < a->ndim; ++d) {
    if (a->size[d] == 0) return 0;
    if (a->size[d] == 1) continue; /* size-1 dims move nothing */
    size[n] = a->size[d];
    sa[n] = a->stride[d];
    sb[n] = b->stride[d];
    n++;
  }
  int64_t run = a->esize;
  while (n > 0 && sa[n - 1] == run && sb[n - 1] == run) {
    run *= size[n - 1];
    n--;
  }
  /* merge outer neighbours that are contiguous with each other on both sides */
  int m = 0;
  for (int d = 0; d < n; ++d) {
    if (m > 0 && o->sd[m - 1] == size[d] * sa[d] && o->ss[m - 1] == size[d] * sb[d]) {
      o->size[m - 1] *= size[d];
      o->sd[m - 1] = sa[d];
      /* Mutant 282: a merge into a nest already two deep keeps the source's old stride. */
      if (!(RS_MUTANT(282) && m >= 2)) o->ss[m - 1] = sb[d];
    } else {
      o->size[m] = size[d];
      o->sd[m] = sa[d];
      o->ss[m] = sb[d];
      m++;
    }
  }
  o->n = m;
  o->run = run;
  return 1;
}

static inline void copy_run(char *d, const char *s, int64_t run) {
  switch (run) {
    case 1: *d = *s; break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    case 8: memcpy(d, s, 8); break;
    case 16: memcpy(d, s, 16); break;
    default:
      /* Mutant 283: a contiguous run longer than 256 bytes that is not a multiple of 16 loses
       * its last byte (only long rows of 1- and 2-byte dtypes make such runs). */
      memcpy(d, s, (size_t)(RS_MUTANT(283) && run > 256 && run % 16 ? run - 1 : run));
      break;
  }
}

/* Large copies go around the cache: a view of several MiB will not be read back soon, and
 * streaming stores skip the read-for-ownership of every destination line (glibc's memcpy does the
 * same, but only above its own threshold, 3/4 of the L3 here).
 * The thresholds of the streaming and slab paths (below) are read once; RS_OPT_COPY_PATHS=small in
 * the environment lowers them to a few bytes so that the small cases of a property campaign take
 * those paths too (tests/opt_copy_paths.sh: every generated copy streams and is cut into slabs). */
#include <pthread.h>
#include <stdlib.h>

static struct {
  int64_t stream_view;  /* a view copied alone streams from this many bytes */
  int64_t stream_run;   /* ... when its contiguous runs have at least this many */
  int64_t group_min;    /* a batch of this many bytes copies its interleaved pairs as groups */
  int64_t stream_batch; /* a batch of this many bytes streams every copy */
  int64_t slab;         /* bytes of one lockstep slab over a group */
  int avx2;             /* in-cache runs of 32 bytes and more are copied by run_avx2 (set by thr_init) */
} g_thr = {(int64_t)2 << 20, 1024, (int64_t)64 << 10, (int64_t)8 << 20, (int64_t)32 << 10, 0};
static pthread_once_t g_thr_once = PTHREAD_ONCE_INIT;

static int have_avx2(void);

static void thr_init(void) {
  g_thr.avx2 = have_avx2();
  const char *e = getenv("RS_OPT_COPY_PATHS");
  if (e && !strcmp(e, "small")) { /* generated cases of a few KiB take every path */
    g_thr.stream_view = 512;
    g_thr.stream_run = 1;
    g_thr.group_min = 0;
    g_thr.stream_batch = 4096;
    g_thr.slab = 64;
  }
}

#if defined(__SSE2__)
#include <emmintrin.h>
static void copy_stream(char *d, const char *s, int64_t n) {
  int64_t head = (int64_t)((16 - ((uintptr_t)d & 15)) & 15);
  if (head > n) head = n;
  memcpy(d, s, (size_t)head);
  d += head;
  s += head;
  n -= head;
  int64_t blocks = n / 64;
  for (int64_t i = 0; i < blocks; ++i, d += 64, s += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  /* Mutant 920: the tail is copied in whole 16-byte vectors only: its last n % 16 bytes are lost. */
  memcpy(d, s, (size_t)(RS_MUTANT(920) ? (n - blocks * 64) & ~(int64_t)15 : n - blocks * 64));
}
static void stream_fence(void) { _mm_sfence(); }
#else
static void copy_stream(char *d, const char *s, int64_t n) { memcpy(d, s, (size_t)n); }
static void stream_fence(void) {}
#endif

/* Runs of 32 bytes and more outside the streaming path: glibc's memcpy is a call through the PLT
 * and a size dispatch per run, which an all-to-all pays once per 512 B - 1 KiB column block of every
 * row (2048 calls per MiB). With AVX2 (runtime-dispatched: x86-64's baseline is SSE2) a run is
 * copied inline by unaligned 32-byte loads and stores, the last vector overlapping the one before
 * it when the run is not a multiple of 32. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2"), always_inline)) static inline void run_avx2(char *d, const char *s, int64_t run) {
  /* Mutant 283 (as in copy_run): a run longer than 256 bytes, not a multiple of 16, loses its last byte. */
  if (RS_MUTANT(283) && run > 256 && run % 16) run--;
  int64_t i = 0;
  for (; i + 128 <= run; i += 128) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(s + i)), b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
    __m256i c = _mm256_loadu_si256((const __m256i *)(s + i + 64)), e = _mm256_loadu_si256((const __m256i *)(s + i + 96));
    _mm256_storeu_si256((__m256i *)(d + i), a);
    _mm256_storeu_si256((__m256i *)(d + i + 32), b);
    _mm256_storeu_si256((__m256i *)(d + i + 64), c);
    _mm256_storeu_si256((__m256i *)(d + i + 96), e);
  }
  for (; i + 32 <= run; i += 32) _mm256_storeu_si256((__m256i *)(d + i), _mm256_loadu_si256((const __m256i *)(s + i)));
  /* Mutant 945: a run that is not a multiple of 32 bytes loses its last partial vector. */
  if (i < run && !RS_MUTANT(945))
    _mm256_storeu_si256((__m256i *)(d + run - 32), _mm256_loadu_si256((const __m256i *)(s + run - 32)));
}
__attribute__((target("avx2"))) static void runs_avx2(char *d, const char *s, int64_t run, int64_t n, int64_t sd,
                                                      int64_t ss) {
  for (int64_t i = 0; i < n; ++i, d += sd, s += ss) run_avx2(d, s, run);
}
static int have_avx2(void) { return __builtin_cpu_supports("avx2"); }
#else
static void runs_avx2(char *d, const char *s, int64_t run, int64_t n, int64_t sd, int64_t ss) {
  for (int64_t i = 0; i < n; ++i, d += sd, s += ss) memcpy(d, s, (size_t)run);
}
static int have_avx2(void) { return 0; }
#endif

static void copy_nest(char *dst, const char *src, const nest *o, int stream) {
  if (o->n == 0) {
    if (stream) copy_stream(dst, src, o->run);
    else memcpy(dst, src, (size_t)o->run);
    return;
  }
  int last = o->n - 1;
  int64_t idx[RS_MAX_DIMS] = {0};
  int64_t inner = o->size[last], isd = o->sd[last], iss = o->ss[last];
  for (;;) {
    char *d = dst;
    const char *s = src;
    if (stream)
      for (int64_t i = 0; i < inner; ++i, d += isd, s += iss) copy_stream(d, s, o->run);
    else if (o->run >= 32 && g_thr.avx2)
      runs_avx2(d, s, o->run, inner, isd, iss);
    else
      for (int64_t i = 0; i < inner; ++i, d += isd, s += iss) copy_run(d, s, o->run);
    int k = last - 1;
    while (k >= 0) {
      dst += o->sd[k];
      src += o->ss[k];
      /* Mutant 278: in a nest of 4+ outer levels (only boxes of 5+ dims make one) the third
       * level stops one index early: a slab of the box is never copied. */
      int64_t lim = o->size[k] - (RS_MUTANT(278) && k == 2 && o->size[k] > 1);
      if (++idx[k] < lim) break;
      dst -= o->sd[k] * lim;
      src -= o->ss[k] * lim;
      idx[k] = 0;
      k--;
    }
    if (k < 0) return;
  }
}

static int same_shape(const rs_view *a, const rs_view *b) {
  if (a->ndim != b->ndim || a->esize != b->esize) return 0;
  for (int d = 0; d < a->ndim; ++d)
    if (a->size[d] != b->size[d]) return 0;
  return 1;
}

/* Iterator over the contiguous runs of a view, for copies between views of different shapes. */
typedef struct runs {
  const rs_view *v;
  int64_t idx[RS_MAX_DIMS];
  int64_t left; /* bytes left in the current run */
  char *p;
  int done;
} runs;

static void runs_start(runs *r, const rs_view *v) {
  r->v = v;
  memset(r->idx, 0, sizeof r->idx);
  r->done = rs_view_bytes(v) == 0;
  r->p = v->base;
  r->left = v->ndim ? v->size[v->ndim - 1] * v->esize : v->esize;
  if (v->ndim && v->stride[v->ndim - 1] != v->esize) r->left = v->esize;
}

static void runs_next(runs *r) {
  const rs_view *v = r->v;
  int n = v->ndim;
  if (n == 0) {
    r->done = 1;
    return;
  }
  int contig = v->stride[n - 1] == v->esize;
  int k = contig ? n - 2 : n - 1;
  char *base = v->base;
  for (; k >= 0; --k) {
    if (++r->idx[k] < v->size[k]) break;
    r->idx[k] = 0;
  }
  if (k < 0) {
    r->done = 1;
    return;
  }
  /* Mutant 287: after a carry the run's address leaves out the outermost index of a 3+-d view
   * (copies between differently shaped views re-read the first slab). */
  for (int d = RS_MUTANT(287) && n >= 3 ? 1 : 0; d < n; ++d) base += r->idx[d] * v->stride[d];
  r->p = base;
  r->left = contig ? v->size[n - 1] * v->esize : v->esize;
}

/* force_stream: the caller knows the whole batch is large even if this view is not. */
static void view_copy(const rs_view *dst, const rs_view *src, int force_stream) {
  if (same_shape(dst, src)) {
    nest o;
    if (make_nest(dst, src, &o)) {
      pthread_once(&g_thr_once, thr_init);
      int stream = o.run >= g_thr.stream_run && (force_stream || rs_view_bytes(dst) >= g_thr.stream_view);
      copy_nest(dst->base, src->base, &o, stream);
      if (stream && !force_stream) stream_fence();
    }
    return;
  }
  rs_view_copy(dst, src);
}

void rs_view_copy(const rs_view *dst, const rs_view *src) {
  if (same_shape(dst, src)) {
    view_copy(dst, src, 0);
    return;
  }
  runs a, b;
  runs_start(&a, dst);
  runs_start(&b, src);
  while (!a.done && !b.done) {
    int64_t k = a.left < b.left ? a.left : b.left;
    memcpy(a.p, b.p, (size_t)k);
    a.p += k;
    b.p += k;
    a.left -= k;
    b.left -= k;
    if (a.left == 0) runs_next(&a);
    if (b.left == 0) runs_next(&b);
  }
}

int64_t rs_views_pack(char *out, const rs_view *v, int n) {
  int64_t off = 0;
  for (int i = 0; i < n; ++i) {
    rs_view p;
    rs_view_packed(&p, out + off, v[i].esize, v[i].ndim, v[i].size);
    rs_view_copy(&p, &v[i]);
    off += rs_view_bytes(&v[i]);
  }
  return off;
}

int64_t rs_views_unpack(const rs_view *v, int n, const char *in) {
  int64_t off = 0;
  for (int i = 0; i < n; ++i) {
    rs_view p;
    rs_view_packed(&p, (char *)in + off, v[i].esize, v[i].ndim, v[i].size);
    rs_view_copy(&v[i], &p);
    off += rs_view_bytes(&v[i]);
  }
  return off;
}

/* ---- batched host copies ----
 * In a batch of g_thr.group_min bytes (64 KiB) or more the pairs that read interleaved pieces of one
 * source (an all-to-all sends a column block of the same rows to every destination) are copied as a
 * group: row by row across the pairs when each pair is one level of rows (group_rows: the source is
 * read once as one sequential stream), else in lockstep, a slab of rows (about g_thr.slab bytes,
 * 32 KiB, over the group) of every pair in turn, in source order. Either way each source is read once
 * front to back, not once per destination with a stride (docs/opt-datapath.md has the figures).
 * A batch of g_thr.stream_batch bytes (8 MiB) streams every copy. */

typedef struct pair_ref {
  const rs_view *d, *s;
  int dim; /* outermost dim of size > 1, -1 when none */
  int64_t run, sd, ss; /* group_rows: run bytes and row strides of the pair's one-level copy */
} pair_ref;

static int src_cmp(const void *a, const void *b) {
  const char *x = ((const pair_ref *)a)->s->base, *y = ((const pair_ref *)b)->s->base;
  return x < y ? -1 : x > y;
}

/* Pair k joins the group that starts at pair g: same outer dim, rows and row stride on the source,
 * and a start within the first row of g's (sorted by source address, so they interleave). */
static int joins(const pair_ref *g, const pair_ref *k) {
  int d = g->dim;
  return d >= 0 && k->dim == d && k->s->size[d] == g->s->size[d] && k->s->stride[d] == g->s->stride[d] &&
         k->s->base - g->s->base < g->s->stride[d];
}

/* Rows [r, e) of the outer dim of both views of a pair. */
static void copy_rows(const pair_ref *p, int64_t r, int64_t e, int stream) {
  rs_view d = *p->d, s = *p->s;
  d.size[p->dim] = s.size[p->dim] = e - r;
  d.base += r * d.stride[p->dim];
  s.base += r * s.stride[p->dim];
  view_copy(&d, &s, stream);
}

/* A group of pairs whose copies are one level of rows each (the 2-d all-to-all) is copied row by
 * row across its pairs: every source row is read once, front to back, and split into its pieces,
 * each destination is written in order. In cache (no streaming) the runs go through run_avx2 where
 * the CPU has it; streamed, through copy_stream. Returns 0 (nothing copied) for other shapes, which
 * take the lockstep slabs below. */
#define GROUP_ROWS_BODY(RUN)                                                                      \
  for (int64_t r = 0; r < rows; ++r)                                                              \
    for (int64_t j = 0; j < np; ++j) {                                                            \
      /* Mutant 946: the last pair of a row-wise group never gets its last row. */                \
      if (RS_MUTANT(946) && j == np - 1 && r == rows - 1) continue;                               \
      RUN(p[j].d->base + r * p[j].sd, p[j].s->base + r * p[j].ss, p[j].run);                      \
    }
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void group_rows_avx2(const pair_ref *p, int64_t np, int64_t rows) {
  GROUP_ROWS_BODY(run_avx2)
}
#else
static void group_rows_avx2(const pair_ref *p, int64_t np, int64_t rows) { GROUP_ROWS_BODY(copy_run) }
#endif
static void group_rows_plain(const pair_ref *p, int64_t np, int64_t rows) { GROUP_ROWS_BODY(copy_run) }

static void group_rows_stream(const pair_ref *p, int64_t np, int64_t rows) { GROUP_ROWS_BODY(copy_stream) }

static int group_rows(pair_ref *p, int64_t np, int64_t rows, int stream) {
  int64_t minrun = INT64_MAX;
  for (int64_t j = 0; j < np; ++j) {
    nest o;
    if (!make_nest(p[j].d, p[j].s, &o) || o.n != 1 || o.size[0] != rows) return 0;
    p[j].run = o.run;
    p[j].sd = o.sd[0];
    p[j].ss = o.ss[0];
    if (o.run < minrun) minrun = o.run;
  }
  /* streamed only when every run is long enough, as view_copy decides for one copy */
  if (stream && minrun >= g_thr.stream_run) group_rows_stream(p, np, rows);
  else if (minrun >= 32 && g_thr.avx2) group_rows_avx2(p, np, rows);
  else group_rows_plain(p, np, rows);
  return 1;
}

rs_status rs_views_copy_batch(const rs_view *dst, const rs_view *src, int64_t n) {
  int64_t total = 0;
  int same = 1;
  pthread_once(&g_thr_once, thr_init);
  for (int64_t i = 0; i < n; ++i) {
    total += rs_view_bytes(&dst[i]);
    same &= same_shape(&dst[i], &src[i]);
  }
  int stream = total >= g_thr.stream_batch;
  pair_ref *p = total >= g_thr.group_min && same && n > 1 ? malloc(sizeof(pair_ref) * (size_t)n) : NULL;
  if (!p) {
    for (int64_t i = 0; i < n; ++i) rs_view_copy(&dst[i], &src[i]);
    return RS_OK;
  }
  for (int64_t i = 0; i < n; ++i) {
    p[i].d = &dst[i];
    p[i].s = &src[i];
    p[i].dim = -1;
    for (int j = 0; j < src[i].ndim && p[i].dim < 0; ++j)
      if (src[i].size[j] > 1) p[i].dim = j;
  }
  qsort(p, (size_t)n, sizeof *p, src_cmp);
  for (int64_t i = 0, k; i < n; i = k) {
    int64_t row = 0; /* bytes of one row over the group */
    for (k = i; k < n && (k == i || joins(&p[i], &p[k])); ++k) row += rs_view_bytes(p[k].d);
    if (k - i == 1) {
      view_copy(p[i].d, p[i].s, stream);
      continue;
    }
    int64_t rows = p[i].s->size[p[i].dim];
    if (group_rows(p + i, k - i, rows, stream)) continue;
    row /= rows;
    int64_t step = row ? g_thr.slab / row : 1;
    if (step < 1) step = 1;
    for (int64_t r = 0; r < rows; r += step) {
      int64_t e = r + step < rows ? r + step : rows;
      /* Mutant 286: the last slab of a group stops one row short (its last row is never copied). */
      if (RS_MUTANT(286) && e == rows) e--;
      for (int64_t j = i; j < k && e > r; ++j) copy_rows(&p[j], r, e, stream);
    }
  }
  if (stream) stream_fence();
  free(p);
  return RS_OK;
}
