/* bench.c - opt's benchmarks, each printing a table and writing a CSV:
 *   traffic  bytes sent / SPEC 7 lower bound on a fixed corpus of copy-only cases, for opt and for
 *            ref's greedy and graph step plans (ref's bytes from rs_ref_plan_traffic);
 *   plan     opt's schedule compile time per case (cache miss) and cache-hit time, median ns;
 *   local    opt on the local transport vs glibc memcpy and a streaming-store copy of the same
 *            bytes, 1 MiB .. --max-mib;
 *   mpi      opt on the MPI transport vs MPI_Alltoallv moving the same bytes (run under mpirun).
 * Both throughput benches print median [min, max] of per-repetition ratios over interleaved runs.
 * Usage: bench [traffic|plan|local|mpi|all] [--cases N] [--max-mib M] [--reps R] [--csv DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/fmt.h"
#include "bench.h"
#include "reshard/reshard.h"
#include "reshard/opt.h"
#ifdef RS_BENCH_MPI
#include <mpi.h>
#endif

typedef struct bopts {
  int cases, max_mib, reps;
  const char *csv;
} bopts;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t g_rng;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}
static int rint_(int n) { return (int)(rnd() % (uint64_t)n); }

static FILE *csv_open(const bopts *o, const char *name, const char *header) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", o->csv, name);
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "bench: cannot write %s\n", path);
    return NULL;
  }
  fprintf(f, "%s\n", header);
  printf("(csv: %s)\n", path);
  return f;
}

/* ---- the fixed corpus of copy-only cases ---- */

static void corpus_sharding(rs_sharding *s, int nm, int nd) {
  memset(s, 0, sizeof *s);
  s->mesh_ndim = nm;
  for (int m = 0; m < nm; ++m)
    s->p[m] = rint_(3) == 0 ? rs_pl_replicate() : rs_pl_shard(rint_(nd));
  for (int d = 0; d < nd; ++d) {
    int n = 0;
    for (int m = 0; m < nm; ++m)
      if (s->p[m].kind == RS_SHARD && s->p[m].dim == d) s->order[d][n++] = (int8_t)m;
    for (int i = n - 1; i > 0; --i) {
      int j = rint_(i + 1);
      int8_t t = s->order[d][i];
      s->order[d][i] = s->order[d][j];
      s->order[d][j] = t;
    }
    s->order_len[d] = (int8_t)n;
  }
}

/* Case k of the corpus (deterministic in k). */
static int corpus_case(int k, rs_case *c) {
  g_rng = 0x5DEECE66Dull * (uint64_t)(k + 1) + 0x2545F4914F6CDD1Dull;
  for (int i = 0; i < 4; ++i) rnd();
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "corpus-%d", k);
  int nm = 1 + rint_(3);
  int64_t sizes[RS_MAX_MESH_DIMS];
  for (int m = 0; m < nm; ++m) sizes[m] = 1 + rint_(nm == 1 ? 16 : nm == 2 ? 8 : 4);
  if (rs_mesh_init(&c->mesh, nm, sizes, NULL) != RS_OK) return 0;
  c->tensor.dtype = (rs_dtype)rint_(RS_DTYPE_COUNT);
  c->tensor.ndim = 1 + rint_(4);
  for (int d = 0; d < c->tensor.ndim; ++d) c->tensor.shape[d] = 1 + rint_(d < 2 ? 64 : 12);
  corpus_sharding(&c->src, nm, c->tensor.ndim);
  corpus_sharding(&c->dst, nm, c->tensor.ndim);
  c->values = RS_VALUES_BITS;
  c->planner = RS_PLANNER_AUTO;
  return rs_case_validate(c) == RS_OK;
}

static double ratio(int64_t sent, int64_t lb) {
  if (lb == 0) return sent == 0 ? 1.0 : (double)1e30;
  return (double)sent / (double)lb;
}

static void describe(const rs_case *c, char *buf, size_t cap) {
  char m[64] = "", t[64] = "", a[128], b[128];
  rs__fmt_ints(m, sizeof m, c->mesh.size, c->mesh.ndim, "", "x", "");
  rs__fmt_ints(t, sizeof t, c->tensor.shape, c->tensor.ndim, "", "x", "");
  rs_format_sharding(&c->src, a, sizeof a);
  rs_format_sharding(&c->dst, b, sizeof b);
  snprintf(buf, cap, "%s,%s,%s,%s,%s", m, t, rs_dtype_name(c->tensor.dtype), a, b);
}

static rs_status bench_traffic(const bopts *o) {
  FILE *f = csv_open(o, "bench_traffic.csv",
                     "case,mesh,shape,dtype,src,dst,lb_bytes,opt_bytes,opt_ratio,greedy_bytes,greedy_ratio,graph_bytes,graph_ratio");
  rs_opt *opt;
  rs_status st = rs_opt_create(&opt);
  if (st) return st;
  int n = 0, opt_exact = 0, gcount[2] = {0, 0};
  double omax = 0, osum = 0, gsum[2] = {0, 0}, gmax[2] = {0, 0};
  for (int k = 0; n < o->cases; ++k) {
    rs_case c;
    if (!corpus_case(k, &c)) continue;
    int64_t lb;
    rs_opt_stats s;
    if ((st = rs_case_validate(&c)) ||
        (st = rs_traffic_lower_bound(&c.mesh, &c.tensor, &c.src, &c.dst, &lb)) ||
        (st = rs_opt_plan_stats(opt, &c, &s)))
      break;
    double r = ratio(s.bytes_sent, lb);
    opt_exact += s.bytes_sent == lb;
    osum += r;
    if (r > omax) omax = r;
    int64_t gb[2] = {-1, -1};
    double gr[2] = {-1, -1};
    for (int g = 0; g < 2; ++g) {
      rs_plan p;
      rs_status ps = g == 0 ? rs_ref_plan_greedy(&c.mesh, &c.tensor, &c.src, &c.dst, &p)
                            : rs_ref_plan_graph(&c.mesh, &c.tensor, &c.src, &c.dst, RS_COST_SEED, &p);
      if (ps == RS_OK && rs_ref_plan_traffic(&c, &p, &gb[g]) == RS_OK) {
        gr[g] = ratio(gb[g], lb);
        if (gr[g] < 1e29) {
          gsum[g] += gr[g];
          gcount[g]++;
          if (gr[g] > gmax[g]) gmax[g] = gr[g];
        }
      }
    }
    if (f) {
      char d[512];
      describe(&c, d, sizeof d);
      fprintf(f, "%d,%s,%lld,%lld,%.6f,%lld,%.6f,%lld,%.6f\n", k, d, (long long)lb, (long long)s.bytes_sent, r,
              (long long)gb[0], gr[0], (long long)gb[1], gr[1]);
    }
    n++;
  }
  rs_opt_destroy(opt);
  if (f) fclose(f);
  if (st) return st;
  printf("\ntraffic ratio (bytes sent between distinct ranks / SPEC 7 lower bound), %d copy-only cases\n", n);
  printf("%-12s %8s %10s %10s\n", "planner", "cases", "mean", "max");
  printf("%-12s %8d %10.4f %10.4f   (ratio exactly 1.00 on %d of %d)\n", "opt", n, n ? osum / n : 0, omax,
         opt_exact, n);
  const char *gn[2] = {"ref-greedy", "ref-graph"};
  for (int g = 0; g < 2; ++g)
    printf("%-12s %8d %10.4f %10.4f   (planned cases; LB = 0 with traffic excluded)\n", gn[g], gcount[g],
           gcount[g] ? gsum[g] / gcount[g] : 0, gmax[g]);
  return opt_exact == n ? RS_OK : rs_fail(RS_ERR_MISMATCH, "bench traffic: opt ratio != 1 on %d cases", n - opt_exact);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void print_dist(const char *name, double *v, int n) {
  if (!n) {
    printf("%-22s %12s\n", name, "no cases");
    return;
  }
  qsort(v, (size_t)n, sizeof(double), cmp_d);
  printf("%-22s %8d %12.0f %12.0f %12.0f\n", name, n, v[n / 2], v[n * 9 / 10], v[n - 1]);
}

/* Planning time per case of ref's greedy and graph planners (seed costs) and opt's compiler (cold
 * and cached), on the copy-only corpus of the traffic benchmark. */
static rs_status bench_plan(const bopts *o) {
  FILE *f = csv_open(o, "bench_plan.csv",
                     "case,mesh,shape,dtype,src,dst,ranks,greedy_ns,graph_ns,compile_ns,cached_ns,messages");
  rs_opt *opt;
  rs_status st = rs_opt_create(&opt);
  if (st) return st;
  size_t sz = sizeof(double) * (size_t)o->cases;
  double *miss = malloc(sz), *hit = malloc(sz), *gr = malloc(sz), *gh = malloc(sz);
  int n = 0, ng = 0, nh = 0;
  for (int k = 0; n < o->cases && miss && hit && gr && gh; ++k) {
    rs_case c;
    if (!corpus_case(k, &c)) continue;
    rs_opt_stats s;
    rs_plan p;
    double t0 = now_s();
    rs_status gs = rs_ref_plan_greedy(&c.mesh, &c.tensor, &c.src, &c.dst, &p);
    double t1 = now_s();
    rs_status hs = rs_ref_plan_graph(&c.mesh, &c.tensor, &c.src, &c.dst, RS_COST_SEED, &p);
    double t2 = now_s();
    if ((st = rs_opt_plan_stats(opt, &c, &s))) break;
    double t3 = now_s();
    if ((st = rs_opt_plan_stats(opt, &c, &s))) break;
    double t4 = now_s();
    if (!gs) gr[ng++] = (t1 - t0) * 1e9;
    if (!hs) gh[nh++] = (t2 - t1) * 1e9;
    miss[n] = (t3 - t2) * 1e9;
    hit[n] = (t4 - t3) * 1e9;
    if (f) {
      char d[512];
      describe(&c, d, sizeof d);
      fprintf(f, "%d,%s,%d,%.0f,%.0f,%.0f,%.0f,%lld\n", k, d, c.mesh.nranks, gs ? -1 : (t1 - t0) * 1e9,
              hs ? -1 : (t2 - t1) * 1e9, miss[n], hit[n], (long long)s.messages);
    }
    n++;
  }
  if (f) fclose(f);
  if (!st && n) {
    printf("\nplanning time per case, %d copy-only cases (ns)\n", n);
    printf("%-22s %8s %12s %12s %12s\n", "planner", "cases", "median", "p90", "max");
    print_dist("ref greedy", gr, ng);
    print_dist("ref graph (seed)", gh, nh);
    print_dist("opt (cache miss)", miss, n);
    print_dist("opt (cache hit)", hit, n);
  }
  free(miss);
  free(hit);
  free(gr);
  free(gh);
  rs_opt_destroy(opt);
  return st;
}

/* ---- throughput ---- */

typedef struct layout_pair {
  const char *name;
  int nm;
  int64_t mesh[2];
  const char *src, *dst;
} layout_pair;

static const layout_pair k_pairs[] = {
    {"S0->S1 (all-to-all)", 1, {4, 1}, "S0", "S1"},
    {"S0->R (all-gather)", 1, {4, 1}, "S0", "R"},
    {"S0,S1->S1,S0 (2x2)", 2, {2, 2}, "S0,S1", "S1,S0"},
};

static rs_status make_throughput_case(const layout_pair *lp, int64_t bytes, int world_n, rs_case *c) {
  memset(c, 0, sizeof *c);
  int64_t mesh[2] = {lp->mesh[0], lp->mesh[1]};
  if (world_n > 0) mesh[0] = world_n; /* the mpi bench uses the whole world on one mesh dim */
  rs_status st = rs_mesh_init(&c->mesh, lp->nm, mesh, NULL);
  if (st) return st;
  c->tensor.dtype = RS_F32;
  c->tensor.ndim = 2;
  int64_t elems = bytes / 4, rows = 1;
  while (rows * rows < elems) rows *= 2;
  c->tensor.shape[0] = rows;
  c->tensor.shape[1] = elems / rows;
  if ((st = rs_parse_placements(lp->src, &c->src)) || (st = rs_parse_placements(lp->dst, &c->dst))) return st;
  rs_sharding_set_default_order(&c->src, 2);
  rs_sharding_set_default_order(&c->dst, 2);
  c->values = RS_VALUES_BITS;
  c->seed = 7;
  return rs_case_validate(c);
}

rs_status rs_bench_throughput_case(int k, int64_t bytes, rs_case *c, const char **name) {
  if (k < 0 || k >= (int)(sizeof k_pairs / sizeof k_pairs[0])) return rs_fail(RS_ERR_INVALID, "bench: layout %d", k);
  *name = k_pairs[k].name;
  return make_throughput_case(&k_pairs[k], bytes, 0, c);
}

static int64_t out_bytes(const rs_locals *l) {
  int64_t b = 0;
  for (int i = 0; i < l->n; ++i) b += l->r[i].nbytes;
  return b;
}

static rs_status fill_source(const rs_case *c, rs_locals *in) {
  /* a cheap pattern is enough for a throughput run (the tests check the bits) */
  rs_status st = rs_locals_for_layout(in, c, &c->src);
  if (st) return st;
  for (int i = 0; i < in->n; ++i) memset(in->r[i].data, 0x40 + i, (size_t)in->r[i].nbytes);
  return RS_OK;
}

/* ---- the copy baselines ----
 * glibc's memcpy switches to non-temporal stores only above its own threshold (3/4 of the L3 per
 * thread), so at 16 MiB it still reads every destination line for ownership while opt's copies
 * stream: the fair baseline for a large copy is a memcpy with streaming stores, written here on
 * its own (not opt's kernel) so that the two are measured against each other, not against
 * themselves. One thread on both sides, like opt's copies. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2"))) static void stream_copy_avx2(char *d, const char *s, size_t n) {
  size_t head = (32 - ((uintptr_t)d & 31)) & 31;
  if (head > n) head = n;
  memcpy(d, s, head);
  size_t i = head;
  for (; i + 128 <= n; i += 128)
    for (int k = 0; k < 128; k += 32)
      _mm256_stream_si256((__m256i *)(d + i + k), _mm256_loadu_si256((const __m256i *)(s + i + k)));
  memcpy(d + i, s + i, n - i);
  _mm_sfence();
}
static const char *stream_name(void) { return __builtin_cpu_supports("avx2") ? "avx2 stream" : "memcpy"; }
static void stream_copy(char *d, const char *s, size_t n) {
  if (__builtin_cpu_supports("avx2")) stream_copy_avx2(d, s, n);
  else memcpy(d, s, n);
}
#else
static const char *stream_name(void) { return "memcpy"; }
static void stream_copy(char *d, const char *s, size_t n) { memcpy(d, s, n); }
#endif

void rs_bench_mmm(double *v, int n, double out[3]) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  out[0] = v[n / 2];
  out[1] = v[0];
  out[2] = v[n - 1];
}

#define MAX_REPS 64
#define LOCAL_REP_BYTES ((int64_t)64 << 20)

/* One size of one layout: opt, glibc memcpy and the streaming copy of the same bytes, interleaved
 * (the order rotates per repetition so that none always runs after the others). Ratios are per
 * repetition (baseline time / opt time), then median [min, max]. */
static rs_status local_row(rs_opt *opt, const layout_pair *lp, int64_t mib, int reps, FILE *f) {
  rs_case c;
  rs_status st = make_throughput_case(lp, mib << 20, 0, &c);
  if (st) return st;
  /* in + out + two baseline buffers must fit comfortably (the dev VM has 24 GiB) */
  int64_t written_mib = mib * (lp->dst[0] == 'R' ? c.mesh.nranks : 1);
  if (mib + 3 * written_mib > 12288) {
    printf("%-20s %7lld MiB  skipped: would need %lld MiB of memory\n", lp->name, (long long)mib,
           (long long)(mib + 3 * written_mib));
    return RS_OK;
  }
  rs_locals in = {0, NULL}, out = {0, NULL};
  char *a = NULL, *b = NULL;
  int64_t wb = 0, inner;
  double t[3][MAX_REPS], rm[MAX_REPS], rs[MAX_REPS], mo[3], mm[3], ms[3], qm[3], qs[3], gb;
  volatile char sink;
  if ((st = fill_source(&c, &in))) goto done;
  /* warm up: allocates and touches the outputs, compiles the schedule */
  if ((st = rs_opt_redistribute(opt, NULL, &c, &in, &out, NULL))) goto done;
  wb = out_bytes(&out);
  a = malloc((size_t)wb);
  b = malloc((size_t)wb);
  if (!a || !b) {
    st = rs_fail(RS_ERR_NOMEM, "bench local: out of memory");
    goto done;
  }
  memset(a, 1, (size_t)wb);
  memset(b, 2, (size_t)wb); /* the baselines copy into touched pages, as opt's reused outputs are */
  /* a repetition times each contender over LOCAL_REP_BYTES or more, not one copy of 1 MiB (tens of
   * microseconds: the clock's and the scheduler's noise) */
  inner = wb < LOCAL_REP_BYTES ? LOCAL_REP_BYTES / wb : 1;
  for (int r = 0; r < reps && !st; ++r) {
    for (int k = 0; k < 3 && !st; ++k) {
      int which = (r + k) % 3;
      double t0 = now_s();
      for (int64_t i = 0; i < inner && !st; ++i) {
        if (which == 0) st = rs_opt_redistribute(opt, NULL, &c, &in, &out, NULL);
        else if (which == 1) memcpy(b, a, (size_t)wb);
        else stream_copy(b, a, (size_t)wb);
      }
      t[which][r] = (now_s() - t0) / (double)inner;
    }
    rm[r] = t[1][r] / t[0][r];
    rs[r] = t[2][r] / t[0][r];
  }
  if (st) goto done; /* a failed run (out of memory) has no timing: no row, exit 3 */
  sink = b[wb / 2];
  (void)sink;
  rs_bench_mmm(t[0], reps, mo);
  rs_bench_mmm(t[1], reps, mm);
  rs_bench_mmm(t[2], reps, ms);
  rs_bench_mmm(rm, reps, qm);
  rs_bench_mmm(rs, reps, qs);
  gb = (double)wb / 1e9;
  printf("%-20s %7lld MiB %8.1f MiB %8.2f %8.2f %8.2f   %5.2f [%4.2f, %5.2f]   %5.2f [%4.2f, %5.2f]\n", lp->name,
         (long long)mib, (double)wb / 1048576.0, gb / mo[0], gb / mm[0], gb / ms[0], qm[0], qm[1], qm[2], qs[0],
         qs[1], qs[2]);
  if (f)
    fprintf(f, "%s,%lld,%lld,%d,%.6f,%.6f,%.6f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", lp->name, (long long)(mib << 20),
            (long long)wb, reps, mo[0], mm[0], ms[0], qm[0], qm[1], qm[2], qs[0], qs[1], qs[2]);
done:
  free(a);
  free(b);
  rs_locals_free(&in);
  rs_locals_free(&out);
  return st;
}

static rs_status bench_local(const bopts *o) {
  FILE *f = csv_open(o, "bench_local.csv",
                     "layout,tensor_bytes,bytes_written,reps,opt_s,memcpy_s,stream_s,ratio_memcpy,ratio_memcpy_min,"
                     "ratio_memcpy_max,ratio_stream,ratio_stream_min,ratio_stream_max");
  rs_opt *opt;
  rs_status st = rs_opt_create(&opt);
  if (st) return st;
  int reps = o->reps < MAX_REPS ? o->reps : MAX_REPS;
  printf("\nopt local transport vs a copy of the same bytes (F32; 4 ranks; one thread on every side; GB/s and\n"
         "ratios = baseline time / opt time, median of %d interleaved repetitions [min, max], a repetition\n"
         "copying at least 64 MiB (below 64 MiB: the same copy repeated); stream = %s)\n",
         reps, stream_name());
  printf("%-20s %11s %12s %8s %8s %8s   %-20s   %-20s\n", "layout", "tensor", "written", "opt", "memcpy", "stream",
         "opt/memcpy", "opt/stream");
  for (size_t li = 0; li < sizeof k_pairs / sizeof k_pairs[0] && !st; ++li)
    for (int64_t mib = 1; mib <= o->max_mib && !st; mib *= 4) st = local_row(opt, &k_pairs[li], mib, reps, f);
  if (f) fclose(f);
  rs_opt_destroy(opt);
  return st;
}

#ifdef RS_BENCH_MPI
/* Bytes position p sends to position q under c (|src box of p ∩ dst box of q|, self included). */
static int64_t pair_bytes(const rs_case *c, int p, int q) {
  int64_t cp[RS_MAX_MESH_DIMS], cq[RS_MAX_MESH_DIMS], as[RS_MAX_DIMS], az[RS_MAX_DIMS], bs[RS_MAX_DIMS],
      bz[RS_MAX_DIMS];
  rs_mesh_coord(&c->mesh, p, cp);
  rs_mesh_coord(&c->mesh, q, cq);
  rs_local_box(&c->mesh, &c->src, &c->tensor, cp, as, az);
  rs_local_box(&c->mesh, &c->dst, &c->tensor, cq, bs, bz);
  return rs_box_overlap(c->tensor.ndim, as, az, bs, bz) * rs_dtype_size(c->tensor.dtype);
}

/* What MPI alone does with the same strided data: per peer, a subarray datatype of this rank's source
 * local for what it sends and of its output local for what it receives (MPI_Alltoallw). */
typedef struct w_types {
  int *cnt, *disp; /* [2n]: send then receive; displacements are 0 (the subarrays carry them) */
  MPI_Datatype *type;
} w_types;

static void overlap_type(const rs_case *c, const int64_t *ls, const int64_t *lz, const int64_t *bs,
                         const int64_t *bz, int *cnt, MPI_Datatype *t) {
  int nd = c->tensor.ndim, size[RS_MAX_DIMS], sub[RS_MAX_DIMS], start[RS_MAX_DIMS];
  *cnt = 0;
  *t = MPI_BYTE;
  for (int d = 0; d < nd; ++d) {
    int64_t lo = ls[d] > bs[d] ? ls[d] : bs[d], hi = ls[d] + lz[d] < bs[d] + bz[d] ? ls[d] + lz[d] : bs[d] + bz[d];
    if (hi <= lo) return;
    size[d] = (int)lz[d];
    sub[d] = (int)(hi - lo);
    start[d] = (int)(lo - ls[d]);
  }
  MPI_Type_create_subarray(nd, size, sub, start, MPI_ORDER_C, MPI_FLOAT, t);
  MPI_Type_commit(t);
  *cnt = 1;
}

static rs_status w_types_make(const rs_case *c, int me, int n, w_types *w) {
  w->cnt = calloc((size_t)n * 4, sizeof(int));
  w->type = calloc((size_t)n * 2, sizeof(MPI_Datatype));
  if (!w->cnt || !w->type) return rs_fail(RS_ERR_NOMEM, "bench mpi: out of memory");
  w->disp = w->cnt + 2 * n;
  int64_t cm[RS_MAX_MESH_DIMS], cq[RS_MAX_MESH_DIMS], ss[RS_MAX_DIMS], sz[RS_MAX_DIMS], ds[RS_MAX_DIMS],
      dz[RS_MAX_DIMS], bs[RS_MAX_DIMS], bz[RS_MAX_DIMS];
  rs_mesh_coord(&c->mesh, me, cm);
  rs_local_box(&c->mesh, &c->src, &c->tensor, cm, ss, sz);
  rs_local_box(&c->mesh, &c->dst, &c->tensor, cm, ds, dz);
  for (int q = 0; q < n; ++q) {
    rs_mesh_coord(&c->mesh, q, cq);
    rs_local_box(&c->mesh, &c->dst, &c->tensor, cq, bs, bz);
    overlap_type(c, ss, sz, bs, bz, &w->cnt[q], &w->type[q]);
    rs_local_box(&c->mesh, &c->src, &c->tensor, cq, bs, bz);
    overlap_type(c, ds, dz, bs, bz, &w->cnt[n + q], &w->type[n + q]);
  }
  return RS_OK;
}

static void w_types_free(w_types *w, int n) {
  for (int i = 0; w->type && i < 2 * n; ++i)
    if (w->type[i] != MPI_BYTE) MPI_Type_free(&w->type[i]);
  free(w->cnt);
  free(w->type);
}

static rs_status bench_mpi(const bopts *o, int *argc, char ***argv) {
  rs_world *w;
  rs_status st = rs_world_init("mpi", argc, argv, &w);
  if (st) return st;
  int me = rs_world_rank(w), n = rs_world_size(w);
  FILE *f = me == 0 ? csv_open(o, "bench_mpi.csv", "layout,ranks,tensor_bytes,bytes_moved,reps,opt_s,alltoallv_s,alltoallw_s,ratio,ratio_min,ratio_max,"
                                     "ratio_w,ratio_w_min,ratio_w_max") : NULL;
  rs_opt *opt;
  if ((st = rs_opt_create(&opt))) return st;
  if (me == 0) {
    printf("\nopt MPI transport vs MPI moving the same bytes (%d ranks, F32): a2av = MPI_Alltoallv between\n"
           "contiguous buffers (no packing), a2aw = MPI_Alltoallw from the same strided locals with subarray\n"
           "datatypes. GB/s of the slowest rank; ratio = MPI time / opt time, median of %d interleaved\n"
           "repetitions [min, max]\n", n, o->reps < MAX_REPS ? o->reps : MAX_REPS);
    printf("single-copy intra-node path (RS_MPI_CMA): %s\n", rs_opt_mpi_cma(NULL, NULL));
    printf("%-20s %11s %12s %8s %8s %8s   %-20s   %-20s\n", "layout", "tensor", "moved", "opt", "a2av", "a2aw",
           "opt/a2av", "opt/a2aw");
  }
  for (size_t li = 0; li < 2 && !st; ++li) { /* the 1-d layouts: the whole world on one mesh dim */
    for (int64_t mib = 1; mib <= o->max_mib && !st; mib *= 4) {
      rs_case c;
      if ((st = make_throughput_case(&k_pairs[li], mib << 20, n, &c))) break;
      rs_locals in = {0, NULL}, out = {0, NULL};
      if ((st = fill_source(&c, &in))) break;
      if ((st = rs_opt_redistribute(opt, w, &c, &in, &out, NULL))) break;
      int *sc = calloc((size_t)n * 4, sizeof(int)), *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
      int64_t sendb = 0, recvb = 0, moved = 0;
      for (int q = 0; q < n; ++q) {
        sc[q] = (int)pair_bytes(&c, me, q);
        rc[q] = (int)pair_bytes(&c, q, me);
        sd[q] = (int)sendb;
        rd[q] = (int)recvb;
        sendb += sc[q];
        recvb += rc[q];
      }
      for (int p = 0; p < n; ++p)
        for (int q = 0; q < n; ++q) moved += pair_bytes(&c, p, q);
      char *sbuf = malloc((size_t)(sendb ? sendb : 1)), *rbuf = malloc((size_t)(recvb ? recvb : 1));
      int64_t ob = out.r[me].nbytes;
      char *wbuf = malloc((size_t)(ob ? ob : 1));
      w_types wt = {NULL, NULL, NULL};
      if (!sc || !sbuf || !rbuf || !wbuf) st = rs_fail(RS_ERR_NOMEM, "bench mpi: out of memory");
      if (!st) st = w_types_make(&c, me, n, &wt);
      if (!st) {
        memset(sbuf, 3, (size_t)sendb);
        memset(rbuf, 4, (size_t)recvb);
        memset(wbuf, 5, (size_t)ob);
      }
      int reps = o->reps < MAX_REPS ? o->reps : MAX_REPS;
      double t[3][MAX_REPS], qv[MAX_REPS], qw[MAX_REPS];
      for (int r = 0; r < reps && !st; ++r) { /* interleaved; the order rotates per repetition */
        for (int k = 0; k < 3 && !st; ++k) {
          int which = (r + k) % 3;
          MPI_Barrier(MPI_COMM_WORLD);
          double t0 = MPI_Wtime(), t1;
          if (which == 0) st = rs_opt_redistribute(opt, w, &c, &in, &out, NULL);
          else if (which == 1) MPI_Alltoallv(sbuf, sc, sd, MPI_BYTE, rbuf, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
          else
            MPI_Alltoallw(in.r[me].data, wt.cnt, wt.disp, wt.type, wbuf, wt.cnt + n, wt.disp + n, wt.type + n,
                          MPI_COMM_WORLD);
          t1 = MPI_Wtime() - t0;
          MPI_Allreduce(&t1, &t[which][r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        }
        qv[r] = t[1][r] / t[0][r];
        qw[r] = t[2][r] / t[0][r];
      }
      /* MPI's own strided exchange is an outside truth for opt's bytes */
      if (!st && memcmp(wbuf, out.r[me].data, (size_t)ob))
        st = rs_fail(RS_ERR_MISMATCH, "bench mpi: rank %d: opt's output differs from MPI_Alltoallw's", me);
      if (me == 0 && !st) {
        double mo[3], ma[3], mw[3], mq[3], mr[3];
        rs_bench_mmm(t[0], reps, mo);
        rs_bench_mmm(t[1], reps, ma);
        rs_bench_mmm(t[2], reps, mw);
        rs_bench_mmm(qv, reps, mq);
        rs_bench_mmm(qw, reps, mr);
        double gb = (double)moved / 1e9;
        printf("%-20s %7lld MiB %8.1f MiB %8.2f %8.2f %8.2f   %5.2f [%4.2f, %5.2f]   %5.2f [%4.2f, %5.2f]\n",
               k_pairs[li].name, (long long)mib, (double)moved / 1048576.0, gb / mo[0], gb / ma[0], gb / mw[0], mq[0],
               mq[1], mq[2], mr[0], mr[1], mr[2]);
        if (f)
          fprintf(f, "%s,%d,%lld,%lld,%d,%.6f,%.6f,%.6f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", k_pairs[li].name, n,
                  (long long)(mib << 20), (long long)moved, reps, mo[0], ma[0], mw[0], mq[0], mq[1], mq[2], mr[0],
                  mr[1], mr[2]);
      }
      w_types_free(&wt, n);
      free(wbuf);
      free(sc);
      free(sbuf);
      free(rbuf);
      rs_locals_free(&in);
      rs_locals_free(&out);
    }
  }
  if (f) fclose(f);
  rs_opt_destroy(opt);
  rs_world_finalize(w);
  return st;
}
#endif

rs_status rs_bench_main(int argc, char **argv) {
  bopts o = {1000, 1024, 5, "."};
  const char *what = "all";
  if (argc > 1 && !strcmp(argv[1], "pytorch")) return rs_bench_pytorch(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "p2p")) return rs_bench_p2p(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "gpu")) return rs_bench_gpu(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "jobs")) return rs_bench_jobs(argc, argv);
  for (int i = 1; i < argc; ++i) {
    rs_status fst;
    if (rs_bench_int_flag("bench", argc, argv, &i, "--cases", 1, 10000000, &o.cases, &fst) ||
        rs_bench_int_flag("bench", argc, argv, &i, "--max-mib", 1, 1 << 20, &o.max_mib, &fst) ||
        rs_bench_int_flag("bench", argc, argv, &i, "--reps", 1, 1000, &o.reps, &fst)) {
      if (fst) return fst;
    } else if (!strcmp(argv[i], "--csv") && i + 1 < argc) o.csv = argv[++i];
    else if (argv[i][0] != '-') what = argv[i];
    else return rs_fail(RS_ERR_INVALID, "bench: unknown option %s", argv[i]);
  }
  int all = !strcmp(what, "all");
  rs_status st = RS_OK;
  if (!st && (all || !strcmp(what, "traffic"))) st = bench_traffic(&o);
  if (!st && (all || !strcmp(what, "plan"))) st = bench_plan(&o);
  if (!st && (all || !strcmp(what, "local"))) st = bench_local(&o);
  if (!st && !strcmp(what, "mpi")) {
#ifdef RS_BENCH_MPI
    st = bench_mpi(&o, &argc, &argv);
#else
    st = rs_fail(RS_ERR_UNSUPPORTED, "bench mpi: built without MPI");
#endif
  }
  if (!st && !all && strcmp(what, "traffic") && strcmp(what, "plan") && strcmp(what, "local") && strcmp(what, "mpi"))
    st = rs_fail(RS_ERR_INVALID, "bench: unknown benchmark '%s' (traffic, plan, local, mpi, all)", what);
  return st;
}
