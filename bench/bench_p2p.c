/* bench_p2p.c - `reshard bench p2p`: cross-config resharding (SPEC 10), measured in one run:
 *   plan   opt's planning time for a 100-layer Megatron template against the rank count (64 ..
 *          32,768), with its traffic ratio (bytes sent / lower bound) and max/mean bytes per sender,
 *          and ref's planner beside it while it stays affordable;
 *   move   one realistic move (TP2 PP2 DP n/4 -> TP4 PP1 DP n/4 on n ranks) executed by opt over
 *          MPI, against MPI_Alltoallv of the same per-pair bytes (run under mpirun -np 4, 8, 16),
 *          with where opt's time goes (allocate, local copies, pack + post, wait, unpack).
 * Usage: bench p2p [plan|move|all] [--max-ranks N] [--reps R] [--layers L] [--csv DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench.h"
#include "reshard/copy_service.h"
#include "reshard/opt.h"
#include "reshard/p2p.h"
#ifdef RS_BENCH_MPI
#include <mpi.h>
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifdef RS_BENCH_MPI
static double proc_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static rs_status make_model(const rs_p2p_arch *a, const rs_p2p_template *s, const rs_p2p_template *d,
                            rs_p2p_model *m) {
  memset(m, 0, sizeof *m);
  m->seed = 1;
  rs_status st = rs_p2p_arch_params(a, m);
  if (!st) st = rs_p2p_config_template(m, RS_P2P_SRC, a, s, NULL, 0);
  if (!st) st = rs_p2p_config_template(m, RS_P2P_DST, a, d, NULL, 0);
  if (!st) st = rs_p2p_model_finish(m);
  if (st) rs_p2p_model_free(m);
  return st;
}

static rs_status bench_plan(int max_ranks, int reps, int layers, const char *csv) {
  rs_p2p_arch a;
  memset(&a, 0, sizeof a);
  a.layers = layers;
  a.hidden = 8192;
  a.ffn = 28672;
  a.vocab = 128256;
  a.dtype = RS_BF16;
  char path[512];
  snprintf(path, sizeof path, "%s/bench_p2p_plan.csv", csv);
  FILE *f = fopen(path, "w");
  if (f)
    fprintf(f, "ranks,params,transfers,opt_ms,opt_cpu_ms,rank0_ms,rank0_transfers,ref_ms,bytes_sent,lb,ratio,max_sender,"
               "mean_sender\n");
  printf("\nP2P planning, %d-layer template (hidden 8192, ffn 28672, vocab 128256, BF16):\n"
         "src TP8 PP8 DP N/64 -> dst TP16 PP2 DP N/32 (collocated), median of %d; ms = wall, cpu = this thread's CPU time\n",
         layers, reps);
  printf("%7s %7s %10s %9s %9s %9s %8s %9s %8s %9s\n", "ranks", "params", "transfers", "opt ms", "opt cpu", "rank0 ms",
         "rank0 n", "ref ms", "traffic", "max/mean");
  rs_status st = RS_OK;
  double gate_ms = -1, gate_cpu = -1;
  for (int n = 64; n <= max_ranks && !st; n *= 2) {
    rs_p2p_template s = {8, 8, n / 64, 1}, d = {16, 2, n / 32, 1};
    rs_p2p_model m;
    if ((st = make_model(&a, &s, &d, &m))) break;
    double *t = calloc((size_t)reps, sizeof *t), *tc = calloc((size_t)reps, sizeof *tc);
    rs_p2p_plan p;
    memset(&p, 0, sizeof p);
    for (int r = 0; r < reps && !st; ++r) {
      rs_p2p_plan_free(&p);
      double t0 = now_s(), c0 = cpu_s();
      st = rs_p2p_opt_plan(&m, &p);
      t[r] = now_s() - t0;
      tc[r] = cpu_s() - c0;
    }
    /* what one process of a distributed run does: plan everything, keep only rank 0's transfers */
    double own_ms = 0;
    int64_t own_n = 0;
    if (!st) {
      rs_p2p_plan op;
      double t0 = now_s();
      if (!(st = rs_p2p_opt_plan_rank(&m, 0, &op))) own_ms = 1e3 * (now_s() - t0), own_n = op.n;
      rs_p2p_plan_free(&op);
    }
    double ref_ms = -1;
    if (!st && n <= 256) {
      rs_p2p_plan rp;
      double t0 = now_s();
      if (!(st = rs_p2p_ref_plan(&m, &rp))) ref_ms = 1e3 * (now_s() - t0);
      rs_p2p_plan_free(&rp);
    }
    int64_t lb = 0;
    if (!st) st = rs_p2p_lower_bound(&m, &lb);
    if (!st) {
      qsort(t, (size_t)reps, sizeof *t, cmp_d);
      qsort(tc, (size_t)reps, sizeof *tc, cmp_d);
      if (n == 4096) gate_ms = 1e3 * t[reps / 2], gate_cpu = 1e3 * tc[reps / 2];
      double mean = p.senders ? (double)p.bytes_sent / (double)p.senders : 0;
      double ratio = lb ? (double)p.bytes_sent / (double)lb : 1.0;
      char refs[32];
      snprintf(refs, sizeof refs, ref_ms < 0 ? "-" : "%.1f", ref_ms);
      printf("%7d %7lld %10lld %9.1f %9.1f %9.1f %8lld %9s %8.3f %9.3f\n", n, (long long)m.nparams, (long long)p.n,
             1e3 * t[reps / 2], 1e3 * tc[reps / 2], own_ms, (long long)own_n, refs, ratio, mean > 0 ? (double)p.max_sender_bytes / mean : 0.0);
      fflush(stdout);
      if (f)
        fprintf(f, "%d,%lld,%lld,%.3f,%.3f,%.3f,%lld,%.3f,%lld,%lld,%.4f,%lld,%.1f\n", n, (long long)m.nparams,
                (long long)p.n, 1e3 * t[reps / 2], 1e3 * tc[reps / 2], own_ms, (long long)own_n, ref_ms, (long long)p.bytes_sent, (long long)lb, ratio,
                (long long)p.max_sender_bytes, mean);
    }
    rs_p2p_plan_free(&p);
    free(t);
    free(tc);
    rs_p2p_model_free(&m);
  }
  if (f) fclose(f);
  if (!st && gate_ms >= 0)
    printf("4,096 ranks: %.1f ms wall, %.1f ms CPU (target < 50 ms: %s)\n", gate_ms, gate_cpu,
           gate_ms < 50 ? "met" : gate_cpu < 50 ? "met in CPU time; wall time includes waiting for a core" : "MISSED");
  return st;
}

#ifdef RS_BENCH_MPI
static rs_status bench_move(int reps, const char *csv, int *argc, char ***argv) {
  rs_world *w = NULL;
  rs_status st = rs_world_init("mpi", argc, argv, &w);
  if (st) return st;
  int me = rs_world_rank(w), n = rs_world_size(w);
  rs_p2p_arch a;
  memset(&a, 0, sizeof a);
  a.layers = 8;
  a.hidden = 1024;
  a.ffn = 4096;
  a.vocab = 32000;
  a.dtype = RS_BF16;
  /* TP2 PP2 DP n/4 -> TP4 PP1 DP n/4: every process sends and receives */
  rs_p2p_template s = {2, 2, n / 4, 1}, d = {4, 1, n / 4, 1};
  rs_p2p_model m;
  if (n < 4 || n % 4) {
    rs_world_finalize(w);
    return rs_fail(RS_ERR_INVALID, "bench p2p move: run under mpirun -np 4, 8, 16 ... (a multiple of 4)");
  }
  if ((st = make_model(&a, &s, &d, &m))) {
    rs_world_finalize(w);
    return st;
  }
  rs_p2p_plan p;
  rs_p2p_locals src, out;
  rs_copy_service *cs = NULL;
  memset(&src, 0, sizeof src);
  memset(&out, 0, sizeof out);
  memset(&p, 0, sizeof p);
  double tp0 = now_s();
  st = rs_p2p_opt_plan_rank(&m, me, &p);
  double plan_s = now_s() - tp0;
  if (!st && !(st = rs_copy_service_open("mpi", w, &cs))) st = rs_p2p_source_locals(&m, me, &src);
  /* per-pair bytes of the plan for the all-to-all of the same traffic */
  int *sc = calloc((size_t)n, sizeof *sc), *rc = calloc((size_t)n, sizeof *rc);
  int *sd = calloc((size_t)n, sizeof *sd), *rd = calloc((size_t)n, sizeof *rd);
  int64_t sends = 0; /* transfers this rank sends to another */
  int64_t own = 0;   /* bytes this rank copies locally */
  for (int64_t i = 0; i < p.n && !st; ++i) {
    const rs_p2p_xfer *x = &p.x[i];
    if (x->src == x->dst) continue;
    const rs_tensor *t = &m.param[x->param].t;
    int64_t b = rs_dtype_size(t->dtype);
    for (int k = 0; k < t->ndim; ++k) b *= p.coords[x->box + t->ndim + k];
    if (x->src == me) sc[x->dst] += (int)b;
    if (x->dst == me) rc[x->src] += (int)b;
    sends += x->src == me && b > 0;
    if (x->src == me && x->dst == me) own += b;
  }
  int64_t ts = 0, tr = 0;
  for (int k = 0; k < n; ++k) {
    sd[k] = (int)ts;
    rd[k] = (int)tr;
    ts += sc[k];
    tr += rc[k];
  }
  /* a second all-to-all also moves the bytes each rank keeps (its own pair): what an all-to-all
   * reshard pays for them, beside the goal's baseline, which moves only the bytes between ranks */
  int *sc2 = calloc((size_t)n, sizeof *sc2), *rc2 = calloc((size_t)n, sizeof *rc2);
  int *sd2 = calloc((size_t)n, sizeof *sd2), *rd2 = calloc((size_t)n, sizeof *rd2);
  for (int k = 0, o2 = 0, q2 = 0; k < n && sc2 && rc2 && sd2 && rd2; ++k) {
    sc2[k] = sc[k] + (k == me ? (int)own : 0);
    rc2[k] = rc[k] + (k == me ? (int)own : 0);
    sd2[k] = o2;
    rd2[k] = q2;
    o2 += sc2[k];
    q2 += rc2[k];
  }
  char *sb = malloc((size_t)(ts + own) + 1), *rb = malloc((size_t)(tr + own) + 1);
  if (sb) memset(sb, 1, (size_t)ts);
  if (rb) memset(rb, 0, (size_t)(tr + own) + 1);
  if (sb) memset(sb + ts, 1, (size_t)own);
  int oom = !sb || !rb || !sc2 || !rc2 || !sd2 || !rd2, any_oom = 0; /* every rank stops, or none */
  MPI_Allreduce(&oom, &any_oom, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!st && any_oom) st = rs_fail(RS_ERR_NOMEM, "bench p2p move: out of memory");
  /* the first (cold) call allocates and faults in the destinations and the staging buffer; the
   * timed calls reuse them, as a training job that reshards every N steps would */
  double cold = 0;
  rs_p2p_exec_stats xs;
  if (!st) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    st = rs_p2p_opt_execute(&m, &p, cs, me, &src, &out, &xs);
    MPI_Barrier(MPI_COMM_WORLD);
    cold = now_s() - t0;
  }
  double *to = calloc((size_t)reps, sizeof *to), *ta = calloc((size_t)reps, sizeof *ta),
         *ratio = calloc((size_t)reps, sizeof *ratio), *ph[5], *ta2 = calloc((size_t)reps, sizeof *ta2),
         *ratio2 = calloc((size_t)reps, sizeof *ratio2);
  /* CPU seconds of every process together: on an oversubscribed node wall time is mostly waiting
   * for a core, CPU time is the work itself (MPI's waits yield the core, see comm/timeout.c) */
  double *co = calloc((size_t)reps, sizeof *co), *ca = calloc((size_t)reps, sizeof *ca),
         *cratio = calloc((size_t)reps, sizeof *cratio);
  for (int k = 0; k < 5; ++k) ph[k] = calloc((size_t)reps, sizeof(double));
  /* two more opt moves per repetition: into destinations the caller owns (rs_p2p_locals_layout over
   * buffers allocated and faulted in here, as a serving engine's weights are), and into fresh
   * destinations the call allocates (a new output each time: page faults included) */
  double *tw = calloc((size_t)reps, sizeof *tw), *rw = calloc((size_t)reps, sizeof *rw);
  double *tf = calloc((size_t)reps, sizeof *tf), *rf = calloc((size_t)reps, sizeof *rf);
  rs_p2p_locals mine, owned;
  memset(&mine, 0, sizeof mine);
  memset(&owned, 0, sizeof owned);
  if (!st && (!tw || !rw || !tf || !rf)) st = rs_fail(RS_ERR_NOMEM, "bench p2p move: out of memory");
  if (!st) st = rs_p2p_locals_alloc(&m, RS_P2P_DST, me, &mine); /* allocated and written (poisoned) */
  if (!st) st = rs_p2p_locals_layout(&m, RS_P2P_DST, me, &owned);
  for (int64_t q = 0; !st && q < m.nparams; ++q)
    for (int64_t k = 0; k < owned.npos[q]; ++k) owned.loc[q][k].data = mine.loc[q][k].data;
  int64_t msgs = 0;
  for (int r = 0; r < reps && !st; ++r) { /* interleaved: drift hits both alike */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s(), c0 = proc_cpu_s();
    st = rs_p2p_opt_execute(&m, &p, cs, me, &src, &out, &xs);
    double c1 = proc_cpu_s();
    MPI_Barrier(MPI_COMM_WORLD);
    double t1 = now_s(), c2 = proc_cpu_s();
    MPI_Alltoallv(sb, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
    double c3 = proc_cpu_s();
    MPI_Barrier(MPI_COMM_WORLD);
    double t2 = now_s();
    to[r] = t1 - t0;
    ta[r] = t2 - t1;
    ratio[r] = ta[r] / to[r];
    MPI_Alltoallv(sb, sc2, sd2, MPI_BYTE, rb, rc2, rd2, MPI_BYTE, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    ta2[r] = now_s() - t2;
    ratio2[r] = ta2[r] / to[r];
    double cm[2] = {c1 - c0, c3 - c2}, cs2[2];
    MPI_Allreduce(cm, cs2, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    co[r] = cs2[0];
    ca[r] = cs2[1];
    cratio[r] = cs2[0] > 0 ? cs2[1] / cs2[0] : 0;
    double phase[5] = {xs.sec_alloc, xs.sec_local, xs.sec_pack, xs.sec_wait, xs.sec_unpack}, mx[5];
    MPI_Allreduce(phase, mx, 5, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (int k = 0; k < 5; ++k) ph[k][r] = mx[k];
    msgs = xs.messages;
    rs_p2p_exec_stats xo;
    MPI_Barrier(MPI_COMM_WORLD);
    double t3 = now_s();
    if (!st) st = rs_p2p_opt_execute(&m, &p, cs, me, &src, &owned, &xo);
    MPI_Barrier(MPI_COMM_WORLD);
    double t4 = now_s();
    rs_p2p_locals fresh;
    memset(&fresh, 0, sizeof fresh);
    if (!st) st = rs_p2p_opt_execute(&m, &p, cs, me, &src, &fresh, &xo);
    MPI_Barrier(MPI_COMM_WORLD);
    double t5 = now_s();
    rs_p2p_locals_free(&fresh);
    tw[r] = t4 - t3;
    rw[r] = ta[r] / tw[r];
    tf[r] = t5 - t4;
    rf[r] = ta[r] / tf[r];
  }
  int64_t all_msgs = 0, all_sends = 0;
  MPI_Allreduce(&msgs, &all_msgs, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&sends, &all_sends, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (!st && me == 0) {
    double mo[3], ma[3], mr[3], mp[5][3], mco[3], mca[3], mcr[3];
    rs_bench_mmm(to, reps, mo);
    rs_bench_mmm(ta, reps, ma);
    rs_bench_mmm(ratio, reps, mr);
    double ma2[3], mr2[3];
    rs_bench_mmm(ta2, reps, ma2);
    rs_bench_mmm(ratio2, reps, mr2);
    rs_bench_mmm(co, reps, mco);
    rs_bench_mmm(ca, reps, mca);
    rs_bench_mmm(cratio, reps, mcr);
    for (int k = 0; k < 5; ++k) rs_bench_mmm(ph[k], reps, mp[k]);
    printf("\nP2P move TP2 PP2 DP%d -> TP4 PP1 DP%d (%d MPI ranks, %lld params, 8 layers hidden 1024 ffn 4096 vocab 32000 BF16)\n",
           n / 4, n / 4, n, (long long)m.nparams);
    int64_t lb = 0;
    rs_p2p_lower_bound(&m, &lb);
    printf("bytes sent %lld (lower bound %lld, ratio %.3f), copied locally %lld; %lld messages for %lld transfers between ranks\n",
           (long long)p.bytes_sent, (long long)lb, lb ? (double)p.bytes_sent / (double)lb : 1.0, (long long)p.bytes_local,
           (long long)all_msgs, (long long)all_sends);
    printf("single-copy intra-node path (RS_MPI_CMA): %s\n", rs_opt_mpi_cma(NULL, NULL));
    printf("median of %d interleaved repetitions [min, max]; phases are the slowest rank's\n", reps);
    printf("  opt move            %8.2f ms [%.2f, %.2f]   (into the previous call's output; first call, allocating: %.2f ms; plan of rank 0: %.2f ms)\n",
           1e3 * mo[0], 1e3 * mo[1], 1e3 * mo[2], 1e3 * cold, 1e3 * plan_s);
    printf("  MPI_Alltoallv       %8.2f ms [%.2f, %.2f]   (same per-pair bytes, prepacked buffers)\n", 1e3 * ma[0],
           1e3 * ma[1], 1e3 * ma[2]);
    printf("  Alltoallv / opt     %8.2f    [%.2f, %.2f]   (goal >= 0.8)\n", mr[0], mr[1], mr[2]);
    double mw[3], mrw[3], mf[3], mrf[3];
    rs_bench_mmm(tw, reps, mw);
    rs_bench_mmm(rw, reps, mrw);
    rs_bench_mmm(tf, reps, mf);
    rs_bench_mmm(rf, reps, mrf);
    printf("  opt into caller-owned destinations %8.2f ms [%.2f, %.2f], Alltoallv / it %.2f [%.2f, %.2f]   (rs_p2p_locals_layout)\n",
           1e3 * mw[0], 1e3 * mw[1], 1e3 * mw[2], mrw[0], mrw[1], mrw[2]);
    printf("  opt into fresh destinations        %8.2f ms [%.2f, %.2f], Alltoallv / it %.2f [%.2f, %.2f]   (allocated by each call)\n",
           1e3 * mf[0], 1e3 * mf[1], 1e3 * mf[2], mrf[0], mrf[1], mrf[2]);
    printf("  Alltoallv with each rank's own bytes %.2f ms [%.2f, %.2f], / opt %.2f [%.2f, %.2f]\n", 1e3 * ma2[0],
           1e3 * ma2[1], 1e3 * ma2[2], mr2[0], mr2[1], mr2[2]);
    printf("  CPU, all ranks: opt %.1f ms [%.1f, %.1f], Alltoallv %.1f ms [%.1f, %.1f], Alltoallv / opt %.2f [%.2f, %.2f]\n",
           1e3 * mco[0], 1e3 * mco[1], 1e3 * mco[2], 1e3 * mca[0], 1e3 * mca[1], 1e3 * mca[2], mcr[0], mcr[1], mcr[2]);
    printf("  where opt's time goes (slowest rank; the plan once, before the moves):\n");
    printf("    %-17s %8.3f ms\n", "plan", 1e3 * plan_s);
    const char *names[5] = {"allocate", "local copies", "pack + post", "messages (wait)", "unpack"};
    for (int k = 0; k < 5; ++k)
      printf("    %-17s %8.3f ms [%.3f, %.3f]\n", names[k], 1e3 * mp[k][0], 1e3 * mp[k][1], 1e3 * mp[k][2]);
    char path[512];
    snprintf(path, sizeof path, "%s/bench_p2p_move.csv", csv);
    FILE *f = fopen(path, "w");
    if (f) {
      fprintf(f, "ranks,bytes_sent,bytes_local,messages,opt_ms,alltoallv_ms,ratio,ratio_min,ratio_max,cold_ms,plan_ms,"
                 "alloc_ms,local_ms,pack_ms,wait_ms,unpack_ms,opt_cpu_ms,alltoallv_cpu_ms,cpu_ratio\n"
                 "%d,%lld,%lld,%lld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n",
              n, (long long)p.bytes_sent, (long long)p.bytes_local, (long long)all_msgs, 1e3 * mo[0], 1e3 * ma[0], mr[0],
              mr[1], mr[2], 1e3 * cold, 1e3 * plan_s, 1e3 * mp[0][0], 1e3 * mp[1][0], 1e3 * mp[2][0], 1e3 * mp[3][0],
              1e3 * mp[4][0], 1e3 * mco[0], 1e3 * mca[0], mcr[0]);
      fclose(f);
    }
  }
  for (int k = 0; k < 5; ++k) free(ph[k]);
  free(tw);
  free(rw);
  free(tf);
  free(rf);
  rs_p2p_locals_free(&owned);
  rs_p2p_locals_free(&mine);
  free(co);
  free(ca);
  free(cratio);
  free(to);
  free(ta);
  free(ratio);
  free(sb);
  free(sc2);
  free(rc2);
  free(sd2);
  free(rd2);
  free(ta2);
  free(ratio2);
  free(rb);
  free(sc);
  free(rc);
  free(sd);
  free(rd);
  rs_p2p_locals_free(&out);
  rs_p2p_locals_free(&src);
  rs_copy_service_close(cs);
  rs_p2p_plan_free(&p);
  rs_p2p_model_free(&m);
  rs_world_finalize(w);
  return st;
}
#endif

rs_status rs_bench_p2p(int argc, char **argv) {
  const char *what = "plan", *csv = ".";
  int max_ranks = 32768, reps = 3, layers = 100;
  for (int i = 2; i < argc; ++i) {
    rs_status fst;
    if (rs_bench_int_flag("bench p2p", argc, argv, &i, "--max-ranks", 64, 1 << 20, &max_ranks, &fst) ||
        rs_bench_int_flag("bench p2p", argc, argv, &i, "--reps", 1, 1000, &reps, &fst) ||
        rs_bench_int_flag("bench p2p", argc, argv, &i, "--layers", 1, 10000, &layers, &fst)) {
      if (fst) return fst;
    } else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
    else if (argv[i][0] != '-') what = argv[i];
    else return rs_fail(RS_ERR_INVALID, "bench p2p: unknown option %s", argv[i]);
  }
  rs_status st = RS_OK;
  if (!strcmp(what, "plan") || !strcmp(what, "all")) st = bench_plan(max_ranks, reps, layers, csv);
  if (!st && (!strcmp(what, "move") || !strcmp(what, "all"))) {
#ifdef RS_BENCH_MPI
    st = bench_move(reps < 5 ? 5 : reps, csv, &argc, &argv);
#else
    st = rs_fail(RS_ERR_UNSUPPORTED, "bench p2p move: built without MPI");
#endif
  }
  if (!st && strcmp(what, "plan") && strcmp(what, "move") && strcmp(what, "all"))
    st = rs_fail(RS_ERR_INVALID, "bench p2p: unknown benchmark '%s' (plan, move, all)", what);
  return st;
}
