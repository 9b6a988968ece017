/* bench_gpu.c - `reshard bench gpu`: opt's device path on one GPU (the local-device world, every rank
 * in this process), as ratios measured in one run:
 *   - all-to-all (S0->S1 on 4 ranks), all-gather (S0->R on 4 ranks) and the 2x2 swap
 *     (S0,S1->S1,S0) from 64 MiB to --max-mib (default 4096) of F32 tensor: opt's time on the
 *     caller's device pointers (rs_opt_redistribute_device, sources generated on the device) against
 *     cudaMemcpy device-to-device of the same bytes written (goal: ratio >= 0.85);
 *   - the reduction kernel (the canonical fold of 4 contribution slots, F32 and BF16) and the MXFP8
 *     kernel, as their bytes moved (read + written) per second over the device-to-device copy's
 *     (2 x bytes per second: the HBM bandwidth this GPU reaches).
 * Medians of --reps (default 5) interleaved repetitions with [min, max]. Without a GPU it says so
 * and succeeds (ci/gpu.sh runs it on a GPU machine). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench.h"
#include "cuda/cuda_api.h"
#include "reshard/opt.h"
#include "reshard/reshard.h"

#define MAX_REPS 64

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* ratio per repetition (reference time / measured time), printed as median [min, max] */
static void ratio_stats(const double *ref, const double *t, int n, double *med, double *lo, double *hi) {
  double r[MAX_REPS];
  for (int i = 0; i < n; ++i) r[i] = t[i] > 0 ? ref[i] / t[i] : 0;
  qsort(r, (size_t)n, sizeof(double), cmp_d);
  *med = r[n / 2];
  *lo = r[0];
  *hi = r[n - 1];
}

static rs_status timed_d2d(void *dst, const void *src, int64_t bytes, double *t) {
  double t0 = now_s();
  rs_status st = rs_cuda_d2d(dst, src, bytes);
  if (!st) st = rs_cuda_sync();
  *t = now_s() - t0;
  return st;
}

typedef struct gbufs {
  void **din, **dout;
  char *a, *b; /* the reference copy's buffers */
  int n;
} gbufs;

static void gbufs_free(gbufs *g) {
  for (int i = 0; g->din && g->dout && i < g->n; ++i) {
    rs_cuda_free(g->din[i]);
    rs_cuda_free(g->dout[i]);
  }
  rs_cuda_free(g->a);
  rs_cuda_free(g->b);
  free(g->din);
  free(g->dout);
  memset(g, 0, sizeof *g);
}

/* one layout pair at one size: opt on device pointers vs cudaMemcpy D2D of the bytes written */
static rs_status one_move(rs_opt *opt, rs_world *w, const rs_case *c, int reps, FILE *csv, const char *name,
                          int64_t mib) {
  gbufs g = {0};
  g.n = c->mesh.nranks;
  g.din = calloc((size_t)g.n, sizeof(void *));
  g.dout = calloc((size_t)g.n, sizeof(void *));
  rs_status st = g.din && g.dout ? RS_OK : rs_fail(RS_ERR_NOMEM, "bench gpu: out of memory");
  int64_t written = 0;
  for (int p = 0; p < g.n && !st; ++p) {
    int64_t ib = rs_opt_box_bytes(c, 0, p), ob = rs_opt_box_bytes(c, 1, p);
    written += ob;
    if (!(st = rs_cuda_malloc(&g.din[p], ib))) st = rs_cuda_malloc(&g.dout[p], ob);
  }
  if (!st) st = rs_cuda_malloc((void **)&g.a, written);
  if (!st) st = rs_cuda_malloc((void **)&g.b, written);
  if (!st) st = rs_opt_device_source(w, c, g.din);
  /* warm-up: the schedule compiled and cached, the workspace pool grown */
  if (!st) st = rs_opt_redistribute_device(opt, w, c, g.din, g.dout, NULL);
  double to[MAX_REPS], tm[MAX_REPS];
  for (int r = 0; r < reps && !st; ++r) {
    double t0 = now_s();
    st = rs_opt_redistribute_device(opt, w, c, g.din, g.dout, NULL); /* ends synchronized */
    to[r] = now_s() - t0;
    if (!st) st = timed_d2d(g.b, g.a, written, &tm[r]);
  }
  if (!st) {
    double med, lo, hi;
    ratio_stats(tm, to, reps, &med, &lo, &hi);
    double sorted[MAX_REPS];
    memcpy(sorted, to, sizeof(double) * (size_t)reps);
    qsort(sorted, (size_t)reps, sizeof(double), cmp_d);
    double gbps = (double)written / sorted[reps / 2] / 1e9;
    printf("%-22s %7lld MiB %9.1f GB/s   ratio %.3f [%.3f, %.3f]%s\n", name, (long long)mib, gbps, med, lo, hi,
           med >= 0.85 ? "" : "   (below the 0.85 goal)");
    if (csv) fprintf(csv, "%s,%lld,%lld,%.6f,%.4f,%.4f,%.4f\n", name, (long long)mib, (long long)written, sorted[reps / 2],
                     med, lo, hi);
  }
  gbufs_free(&g);
  return st;
}

/* A kernel against the HBM bandwidth the device-to-device copy reaches: moved = bytes read +
 * written by the kernel, the copy moves 2 x `bytes`. */
static void print_kernel(FILE *csv, const char *name, int64_t mib, double moved, int64_t bytes, const double *tk,
                         const double *tm, int reps) {
  double rk[MAX_REPS], rm[MAX_REPS];
  for (int r = 0; r < reps; ++r) {
    rk[r] = moved / tk[r];
    rm[r] = 2.0 * (double)bytes / tm[r];
  }
  double med, lo, hi;
  ratio_stats(rk, rm, reps, &med, &lo, &hi); /* (moved/tk) / (2 bytes/tm) */
  printf("%-22s %7lld MiB   %.3f of HBM [%.3f, %.3f]\n", name, (long long)mib, med, lo, hi);
  if (csv) fprintf(csv, "%s,%lld,%lld,,%.4f,%.4f,%.4f\n", name, (long long)mib, (long long)bytes, med, lo, hi);
}

static rs_status kernels(int64_t mib, int reps, FILE *csv) {
  int64_t bytes = mib << 20;
  char *slots = NULL, *a = NULL, *b = NULL;
  rs_status st = rs_cuda_malloc((void **)&slots, 4 * bytes);
  if (!st) st = rs_cuda_malloc((void **)&a, bytes);
  if (!st) st = rs_cuda_malloc((void **)&b, bytes);
  if (!st) st = rs_cuda_memset(slots, 0, 4 * bytes); /* finite values (zeros) for every kernel */
  if (!st) st = rs_cuda_memset(a, 0, bytes);
  double tk[MAX_REPS], tm[MAX_REPS];
  /* the fold: 4 slots of numel elements, one Partial(sum) level; reads 4, writes 1 */
  static const rs_dtype fold_t[2] = {RS_F32, RS_BF16};
  for (int k = 0; k < 2 && !st; ++k) {
    int64_t es = rs_dtype_size(fold_t[k]), numel = bytes / es, level_n[1] = {4};
    int8_t level_op[1] = {RS_SUM};
    for (int r = 0; r < reps && !st; ++r) {
      double t0 = now_s();
      st = rs_cuda_fold(fold_t[k], 1, level_n, level_op, slots, numel);
      if (!st) st = rs_cuda_sync();
      tk[r] = now_s() - t0;
      if (!st) st = timed_d2d(b, a, bytes, &tm[r]);
    }
    char name[64];
    snprintf(name, sizeof name, "fold %s x4", rs_dtype_name(fold_t[k]));
    if (!st) print_kernel(csv, name, mib, 5.0 * (double)bytes, bytes, tk, tm, reps);
  }
  /* MXFP8: reads n BF16, writes n bytes + n/32 scales (the slots hold zeros: finite) */
  int64_t n = bytes / 2 / 32 * 32, bad = -1;
  for (int r = 0; r < reps && !st; ++r) {
    double t0 = now_s();
    st = rs_cuda_mxfp8_dev((const uint16_t *)slots, n, (uint8_t *)a, (uint8_t *)b, 0, &bad);
    tk[r] = now_s() - t0;
    if (!st) st = timed_d2d(b, a, bytes, &tm[r]);
  }
  if (!st) print_kernel(csv, "mxfp8 (BF16 -> E4M3)", mib, 2.0 * (double)n + (double)n + (double)n / 32, bytes, tk, tm, reps);
  rs_cuda_free(slots);
  rs_cuda_free(a);
  rs_cuda_free(b);
  return st;
}

rs_status rs_bench_gpu(int argc, char **argv) {
  int max_mib = 4096, reps = 5;
  const char *csvdir = ".";
  for (int i = 2; i < argc; ++i) {
    rs_status fst;
    if (rs_bench_int_flag("bench gpu", argc, argv, &i, "--max-mib", 64, 1 << 20, &max_mib, &fst) ||
        rs_bench_int_flag("bench gpu", argc, argv, &i, "--reps", 1, MAX_REPS, &reps, &fst)) {
      if (fst) return fst;
    } else if (!strcmp(argv[i], "--csv") && i + 1 < argc) {
      csvdir = argv[++i];
    } else {
      return rs_fail(RS_ERR_INVALID, "bench gpu: unknown option %s", argv[i]);
    }
  }
  rs_world *w = NULL;
  rs_status st = rs_world_init("local-device", NULL, NULL, &w);
  if (st == RS_ERR_UNSUPPORTED) {
    printf("bench gpu: skipped: %s\n", rs_last_error());
    rs_clear_error();
    return RS_OK;
  }
  if (st) return st;
  char path[4096];
  snprintf(path, sizeof path, "%s/bench_gpu.csv", csvdir);
  FILE *csv = fopen(path, "w");
  if (csv) fprintf(csv, "what,tensor_mib,bytes,opt_s,ratio,ratio_min,ratio_max\n");
  rs_opt *opt = NULL;
  if (!(st = rs_opt_create(&opt))) {
    printf("opt on device pointers vs cudaMemcpy D2D of the same bytes (F32, local-device world; median of %d "
           "interleaved runs [min, max]; goal >= 0.85)\n", reps);
    for (int k = 0; k < 3 && !st; ++k)
      for (int64_t mib = 64; mib <= max_mib && !st; mib *= 4) {
        rs_case c;
        const char *name;
        if (!(st = rs_bench_throughput_case(k, mib << 20, &c, &name))) st = one_move(opt, w, &c, reps, csv, name, mib);
      }
    printf("\nkernels as a share of the HBM bandwidth cudaMemcpy D2D reaches (bytes read + written)\n");
    for (int64_t mib = 256; mib <= max_mib && mib <= 1024 && !st; mib *= 4) st = kernels(mib, reps, csv);
  }
  rs_opt_destroy(opt);
  if (csv) fclose(csv);
  rs_world_finalize(w);
  return st;
}
