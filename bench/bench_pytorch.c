/* bench_pytorch.c - `reshard bench pytorch`: our planners' time against PyTorch's, per case, on the
 * recorded corpus (the .jsonl.gz files of fixtures/pytorch).
 *
 * PyTorch's side is live when a python with torch is at hand: tools/pytorch/planner.py (the
 * process protocol's planner role, docs/conformance.md) runs PyTorch's greedy and graph planners on
 * the same cases, one child per planner, and answers each plan with "t_ns", the planner call's
 * time with PyTorch's planner caches cleared before it. Otherwise the times the recorder stored
 * (t_greedy_ns, t_graph_ns: best of 3 cold calls) stand in, and the output says so.
 *
 * Both sides are cold (no plan cache: PyTorch's caches are cleared before each call) and timed
 * alike, two ways, reported as two tables: the headline "single call" is the first planning call
 * of a case on each side (one call, nothing cached, nothing warmed by a call before it on that
 * case), and "best of CALLS" is the least of CALLS back-to-back calls, as the recorder timed
 * PyTorch (the later calls run on warm instruction and data caches: a kinder figure for both
 * sides, and much kinder to PyTorch's Python). The recorded times are best-of-3 only, so with
 * --recorded there is no single-call table. They are interleaved: repetition r times every case, ours then PyTorch's, before repetition r+1 starts, so
 * load on the machine falls on both. A case's ratio is
 * the median over repetitions of ours/PyTorch's; the table gives the median of those over cases
 * with their [min, max], and the corpus ratio of each repetition (median over cases) as median
 * [min, max] over repetitions. Both planners run PyTorch's transition set and the graph planner
 * its cost model (RS_ENUM_PYTORCH, RS_COST_PYTORCH), so both sides search the same graph; live,
 * the plans are compared too. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>
#include "bench.h"
#include "core/case_json.h"
#include "reshard/ref.h"
#ifdef RS_BENCH_LIVE
#include "conform/proto.h"
#endif

enum { GREEDY, GRAPH, NPLANNERS };
static const char *const PLANNER_NAME[NPLANNERS] = {"greedy", "graph"};

typedef struct bcase {
  rs_case c;
  double rec[NPLANNERS]; /* recorded PyTorch ns; <= 0: none */
  int usable[NPLANNERS]; /* still measured: both planners planned it so far */
  int same[NPLANNERS];   /* live: PyTorch's plan is ours, step for step */
  int index;             /* place in the corpus (ties of the rank-count order) */
} bcase;

typedef struct bench {
  bcase *cs;
  int n, cap, reps;
  double *ours[NPLANNERS], *theirs[NPLANNERS]; /* [case * reps + rep]: best of CALLS */
  double *ours1[NPLANNERS], *theirs1[NPLANNERS]; /* the same: the single first call */
  int single;                                    /* theirs1 measured (live, t_first_ns answered) */
  int declined[NPLANNERS];                     /* live: PyTorch declined or failed */
  char declined_msg[NPLANNERS][256];
} bench;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n) (sorted in place); with min and max when asked. */
static double median(double *v, int n, double *lo, double *hi) {
  if (n == 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_dbl);
  if (lo) *lo = v[0];
  if (hi) *hi = v[n - 1];
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the corpus ---- */

static rs_status add_line(bench *b, const char *line) {
  if (b->n == b->cap) {
    int cap = b->cap ? 2 * b->cap : 1024;
    bcase *cs = realloc(b->cs, (size_t)cap * sizeof *cs);
    if (!cs) return rs_fail(RS_ERR_NOMEM, "bench pytorch: out of memory");
    b->cs = cs;
    b->cap = cap;
  }
  bcase *k = &b->cs[b->n];
  memset(k, 0, sizeof *k);
  if (rs_case_from_json(line, &k->c)) return RS_OK; /* the fixture test reports unreadable lines */
  cJSON *root = cJSON_Parse(line);
  if (!root) return RS_OK;
  const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pytorch");
  const char *key[NPLANNERS] = {"t_greedy_ns", "t_graph_ns"};
  for (int p = 0; p < NPLANNERS; p++) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(pt, key[p]);
    k->rec[p] = cJSON_IsNumber(t) ? t->valuedouble : -1;
  }
  cJSON_Delete(root);
  b->n++;
  return RS_OK;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every .jsonl.gz of dir, in name order. */
static rs_status load_corpus(bench *b, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return rs_fail(RS_ERR_IO, "bench pytorch: cannot open %s (--fixtures DIR)", dir);
  char *names[256];
  int nn = 0;
  struct dirent *e;
  while ((e = readdir(d)) && nn < 256) {
    size_t len = strlen(e->d_name);
    if (len >= 9 && !strcmp(e->d_name + len - 9, ".jsonl.gz") && (names[nn] = strdup(e->d_name))) nn++;
  }
  closedir(d);
  qsort(names, (size_t)nn, sizeof *names, cmp_name);
  rs_status st = RS_OK;
  size_t cap = 1 << 20;
  char *line = malloc(cap), path[4096];
  if (!line) st = rs_fail(RS_ERR_NOMEM, "bench pytorch: out of memory");
  for (int i = 0; i < nn && !st; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    gzFile z = gzopen(path, "rb");
    if (!z) continue;
    while (!st && gzgets(z, line, (int)cap)) st = add_line(b, line);
    gzclose(z);
  }
  for (int i = 0; i < nn; i++) free(names[i]);
  free(line);
  if (!st && !nn) st = rs_fail(RS_ERR_IO, "bench pytorch: no .jsonl.gz files in %s", dir);
  return st;
}

/* Keep about `want` cases, evenly spread over the corpus; then order them by rank count (PyTorch's
 * side builds one fake process group per world size: fewer rebuilds), stable. */
static int cmp_ranks(const void *a, const void *b) {
  const bcase *x = a, *y = b;
  int64_t nx = x->c.mesh.nranks, ny = y->c.mesh.nranks;
  if (nx != ny) return nx < ny ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

static void select_cases(bench *b, int want) {
  if (want > 0 && want < b->n) {
    int k = 0;
    for (int i = 0; i < want; i++) b->cs[k++] = b->cs[(int64_t)i * b->n / want];
    b->n = k;
  }
  for (int i = 0; i < b->n; i++) b->cs[i].index = i;
  qsort(b->cs, (size_t)b->n, sizeof *b->cs, cmp_ranks);
}

/* ---- our side ---- */

static rs_status plan_ours(const rs_case *c, int planner, rs_plan *p) {
  return planner == GRAPH
             ? rs_ref_plan_graph_enum(&c->mesh, &c->tensor, &c->src, &c->dst, RS_COST_PYTORCH, RS_ENUM_PYTORCH, p)
             : rs_ref_plan_greedy_enum(&c->mesh, &c->tensor, &c->src, &c->dst, RS_ENUM_PYTORCH, p);
}

/* Each side's time for one case in one repetition: the least of this many back-to-back planning
 * calls, each without a plan cache (the recorder's t_greedy_ns/t_graph_ns are the least of 3). */
#define CALLS 3

/* Our time for case c in ns, the least of CALLS calls (*first: the first call's), or -1 when the
 * planner found no plan. */
static double time_ours(const rs_case *c, int planner, rs_plan *p, double *first) {
  double best = -1;
  for (int k = 0; k < CALLS; k++) {
    double t0 = now_ns();
    rs_status st = plan_ours(c, planner, p);
    double t = now_ns() - t0;
    if (st) return -1;
    if (!k) *first = t;
    if (best < 0 || t < best) best = t;
  }
  return best;
}

/* ---- PyTorch's side, live ---- */

typedef struct live {
  int on;
  char why[512];  /* recorded: the reason */
  char name[160]; /* live: the planner's hello name */
#ifdef RS_BENCH_LIVE
  rs_proto *p[NPLANNERS];
#endif
} live;

#ifdef RS_BENCH_LIVE
/* Start planner.py --mode greedy and --mode graph under `python`. RS_OK with lv->on, or the
 * reason it could not start (lv->why). */
static rs_status live_open(live *lv, const char *python, const char *script, int timeout) {
  struct stat sb;
  if (stat(script, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    snprintf(lv->why, sizeof lv->why, "%s is not there (a build outside its source tree)", script);
    return RS_ERR_IO;
  }
  char qp[1024], qs[4200], cmd[5400];
  rs_exec_quote(python, qp, sizeof qp);
  rs_exec_quote(script, qs, sizeof qs);
  for (int k = 0; k < NPLANNERS; k++) {
    snprintf(cmd, sizeof cmd, "%s %s --mode %s --timing-calls %d", qp, qs, PLANNER_NAME[k], CALLS);
    rs_status st = rs_proto_open(cmd, "planner", (double)timeout, &lv->p[k]);
    if (st == RS_OK && !rs_proto_has(lv->p[k], "plan"))
      st = rs_fail(RS_ERR_INVALID, "its hello lists no \"plan\" capability");
    if (st != RS_OK) {
      const char *e = rs_last_error();
      const char *nl = strchr(e, '\n'); /* the first line says why; the stderr tail follows */
      snprintf(lv->why, sizeof lv->why, "%s did not start PyTorch's planner: %.*s", python,
               nl ? (int)(nl - e) : (int)strlen(e), e);
      return st;
    }
  }
  snprintf(lv->name, sizeof lv->name, "%s", rs_proto_name(lv->p[GRAPH]));
  lv->on = 1;
  return RS_OK;
}

static void live_close(live *lv) {
  for (int k = 0; k < NPLANNERS; k++) rs_proto_close(lv->p[k]), lv->p[k] = NULL;
}

/* PyTorch's steps equal ours? */
static int same_steps(const cJSON *steps, const rs_plan *ours) {
  if (cJSON_GetArraySize(steps) != ours->nsteps) return 0;
  int i = 0;
  const cJSON *s;
  cJSON_ArrayForEach(s, steps) {
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(s, "mesh_dim");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(s, "from"), *t = cJSON_GetObjectItemCaseSensitive(s, "to");
    rs_placement pf, pt;
    const rs_step *o = &ours->step[i++];
    if (!cJSON_IsNumber(md) || !cJSON_IsString(f) || !cJSON_IsString(t)) return 0;
    if (rs_parse_placement(f->valuestring, &pf) || rs_parse_placement(t->valuestring, &pt)) return 0;
    if (md->valueint != o->mesh_dim || pf.kind != o->from.kind || pt.kind != o->to.kind) return 0;
    if ((pf.kind == RS_SHARD && pf.dim != o->from.dim) || (pt.kind == RS_SHARD && pt.dim != o->to.dim)) return 0;
    if ((pf.kind == RS_PARTIAL && pf.op != o->from.op) || (pt.kind == RS_PARTIAL && pt.op != o->to.op)) return 0;
  }
  return 1;
}

/* PyTorch's planner on case c: its time (ns, the least of CALLS calls; *first: the first call's,
 * -1 when the child does not answer "t_first_ns"), or -1 when it declined or failed (msg says why). */
static double time_theirs(live *lv, int planner, cJSON *req, const rs_plan *ours, int *same, double *first,
                          char *msg, size_t cap) {
  cJSON *a = NULL;
  rs_exec_fault fault;
  rs_proto_result r = rs_proto_call(lv->p[planner], req, &a, msg, cap, &fault);
  if (r != RS_PROTO_OK) return -1;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(a, "t_ns");
  const cJSON *t1 = cJSON_GetObjectItemCaseSensitive(a, "t_first_ns");
  *first = cJSON_IsNumber(t1) && t1->valuedouble > 0 ? t1->valuedouble : -1;
  const cJSON *steps = cJSON_GetObjectItemCaseSensitive(a, "steps");
  double ns = cJSON_IsNumber(t) && t->valuedouble > 0 ? t->valuedouble : -1;
  if (ns < 0) snprintf(msg, cap, "answer without \"t_ns\" (tools/pytorch/planner.py too old?)");
  *same = cJSON_IsArray(steps) && same_steps(steps, ours);
  cJSON_Delete(a);
  return ns;
}
#endif

/* ---- the measurement ---- */

static rs_status measure(bench *b, live *lv) {
  for (int p = 0; p < NPLANNERS; p++) {
    b->ours[p] = calloc((size_t)b->n * b->reps, sizeof(double));
    b->theirs[p] = calloc((size_t)b->n * b->reps, sizeof(double));
    b->ours1[p] = calloc((size_t)b->n * b->reps, sizeof(double));
    b->theirs1[p] = calloc((size_t)b->n * b->reps, sizeof(double));
    if (!b->ours[p] || !b->theirs[p] || !b->ours1[p] || !b->theirs1[p]) return rs_fail(RS_ERR_NOMEM, "bench pytorch: out of memory");
  }
  b->single = lv->on;
  for (int i = 0; i < b->n; i++) {
    bcase *k = &b->cs[i];
    int dflt = rs_sharding_is_default_order(&k->c.src, k->c.tensor.ndim) &&
               rs_sharding_is_default_order(&k->c.dst, k->c.tensor.ndim);
    /* PyTorch plans non-default shard orders with the graph planner only */
    k->usable[GREEDY] = lv->on ? dflt : k->rec[GREEDY] > 0;
    k->usable[GRAPH] = lv->on ? 1 : k->rec[GRAPH] > 0;
    k->same[GREEDY] = k->same[GRAPH] = 1;
  }
#ifdef RS_BENCH_LIVE
  cJSON **req = calloc((size_t)b->n, sizeof *req);
  if (!req) return rs_fail(RS_ERR_NOMEM, "bench pytorch: out of memory");
  rs_status st = RS_OK;
  for (int i = 0; lv->on && i < b->n && !st; i++) {
    cJSON *cj = rs__case_to_cjson(&b->cs[i].c);
    req[i] = cJSON_CreateObject();
    if (!cj || !req[i] || !cJSON_AddStringToObject(req[i], "op", "plan")) st = RS_ERR_NOMEM;
    if (req[i] && cj) cJSON_AddItemToObject(req[i], "case", cj);
    else cJSON_Delete(cj);
  }
  if (st) st = rs_fail(RS_ERR_NOMEM, "bench pytorch: out of memory");
#endif
  for (int r = 0; r < b->reps; r++) {
    for (int i = 0; i < b->n; i++) {
      bcase *k = &b->cs[i];
      for (int p = 0; p < NPLANNERS; p++) {
        if (!k->usable[p]) continue;
        rs_plan plan;
        double ours1 = -1, theirs1 = -1;
        double ours = time_ours(&k->c, p, &plan, &ours1), theirs = k->rec[p];
        if (ours < 0) {
          k->usable[p] = 0;
          continue;
        }
#ifdef RS_BENCH_LIVE
        if (lv->on) {
          int same = 0;
          char msg[2048];
          theirs = time_theirs(lv, p, req[i], &plan, &same, &theirs1, msg, sizeof msg);
          if (theirs < 0) {
            k->usable[p] = 0;
            msg[strcspn(msg, "\n")] = 0; /* the first line: the stderr tail follows it */
            if (!b->declined[p]++) snprintf(b->declined_msg[p], sizeof b->declined_msg[p], "%.200s", msg);
            continue;
          }
          k->same[p] &= same;
          if (theirs1 < 0) b->single = 0; /* an older planner.py: no single-call table */
        }
#endif
        b->ours[p][(size_t)i * b->reps + r] = ours;
        b->theirs[p][(size_t)i * b->reps + r] = theirs;
        b->ours1[p][(size_t)i * b->reps + r] = ours1;
        b->theirs1[p][(size_t)i * b->reps + r] = theirs1;
      }
    }
  }
#ifdef RS_BENCH_LIVE
  for (int i = 0; i < b->n; i++) cJSON_Delete(req[i]);
  free(req);
  return st;
#else
  return RS_OK;
#endif
}

/* ---- the report ---- */

static rs_status report(bench *b, int p, int single, const live *lv, FILE *csv) {
  int n = 0, reps = b->reps, same = 0;
  double *const *OURS = single ? b->ours1 : b->ours, *const *THEIRS = single ? b->theirs1 : b->theirs;
  double *o = malloc(sizeof(double) * (size_t)b->n + 1), *t = malloc(sizeof(double) * (size_t)b->n + 1),
         *ratio = malloc(sizeof(double) * (size_t)b->n + 1), *per_rep = malloc(sizeof(double) * (size_t)reps),
         *v = malloc(sizeof(double) * (size_t)(reps > b->n ? reps : b->n) + 1);
  if (!o || !t || !ratio || !per_rep || !v) {
    free(o), free(t), free(ratio), free(per_rep), free(v);
    return rs_fail(RS_ERR_NOMEM, "bench pytorch: out of memory");
  }
  for (int i = 0; i < b->n; i++) {
    if (!b->cs[i].usable[p]) continue;
    const double *ours = &OURS[p][(size_t)i * reps], *theirs = &THEIRS[p][(size_t)i * reps];
    for (int r = 0; r < reps; r++) v[r] = ours[r];
    o[n] = median(v, reps, NULL, NULL);
    for (int r = 0; r < reps; r++) v[r] = theirs[r];
    t[n] = median(v, reps, NULL, NULL);
    for (int r = 0; r < reps; r++) v[r] = ours[r] / theirs[r];
    ratio[n] = median(v, reps, NULL, NULL);
    same += b->cs[i].same[p];
    if (csv)
      fprintf(csv, "%s,%s,%s,%.0f,%.0f,%.6g\n", b->cs[i].c.name, PLANNER_NAME[p], single ? "single" : "best3", o[n],
              t[n], ratio[n]);
    n++;
  }
  for (int r = 0; r < reps && n; r++) { /* the corpus ratio of each repetition */
    int m = 0;
    for (int i = 0; i < b->n; i++)
      if (b->cs[i].usable[p]) v[m++] = OURS[p][(size_t)i * reps + r] / THEIRS[p][(size_t)i * reps + r];
    per_rep[r] = median(v, m, NULL, NULL);
  }
  if (!n) {
    printf("%-7s %6d cases\n", PLANNER_NAME[p], 0);
  } else {
    double lo = 0, hi = 0, rlo = 0, rhi = 0, mo = median(o, n, NULL, NULL), mt = median(t, n, NULL, NULL);
    double mr = median(ratio, n, &lo, &hi), rr = median(per_rep, reps, &rlo, &rhi);
    printf("%-7s %6d %10.0f %12.0f   %.5f [%.5f, %.5f]   %.5f [%.5f, %.5f]  %7.0fx\n", PLANNER_NAME[p], n, mo,
           mt, mr, lo, hi, rr, rlo, rhi, 1 / mr);
    if (lv->on && !single)
      printf("        plans: %d of %d identical to PyTorch's, step for step\n", same, n);
  }
  if (lv->on && b->declined[p] && !single)
    printf("        PyTorch declined or failed %d case(s), left out; the first: %s\n", b->declined[p],
           b->declined_msg[p]);
  free(o), free(t), free(ratio), free(per_rep), free(v);
  return RS_OK;
}

rs_status rs_bench_pytorch(int argc, char **argv) {
  const char *dir = "fixtures/pytorch", *csvdir = ".", *python = NULL;
  int reps = 5, cases = 0, timeout = 60, recorded = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "pytorch")) continue;
    if (!strcmp(argv[i], "--fixtures") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csvdir = argv[++i];
    else if (!strcmp(argv[i], "--python") && i + 1 < argc) python = argv[++i];
    else if (!strcmp(argv[i], "--recorded")) recorded = 1;
    else {
      rs_status fst = RS_OK;
      if (!rs_bench_int_flag("bench pytorch", argc, argv, &i, "--reps", 5, 1000, &reps, &fst) &&
          !rs_bench_int_flag("bench pytorch", argc, argv, &i, "--cases", 1, 10000000, &cases, &fst) &&
          !rs_bench_int_flag("bench pytorch", argc, argv, &i, "--timeout", 1, 3600, &timeout, &fst))
        return rs_fail(RS_ERR_INVALID, "bench pytorch: unknown option %s", argv[i]);
      if (fst) return fst;
    }
  }
  int explicit_python = python != NULL;
  if (!python && getenv("RS_PYTHON") && *getenv("RS_PYTHON")) python = getenv("RS_PYTHON"), explicit_python = 1;
  if (!python) python = "python3";
  if (recorded && explicit_python) return rs_fail(RS_ERR_INVALID, "bench pytorch: --recorded with --python");

  bench b = {0};
  b.reps = reps;
  live lv = {0};
  rs_status st = load_corpus(&b, dir);
  if (!st) select_cases(&b, cases);
  if (st) goto out;
  if (recorded) {
    snprintf(lv.why, sizeof lv.why, "--recorded");
  } else {
#ifdef RS_BENCH_LIVE
    if (live_open(&lv, python, RS_SOURCE_DIR "/tools/pytorch/planner.py", timeout) != RS_OK) {
      live_close(&lv);
      if (explicit_python) {
        st = rs_fail(RS_ERR_INVALID, "bench pytorch: --python/RS_PYTHON: %s", lv.why);
        goto out;
      }
    }
#else
    snprintf(lv.why, sizeof lv.why, "this build has no process protocol (conform/)");
#endif
  }
  if (!lv.on)
    printf("PyTorch's side: the times recorded in %s (best of 3 cold calls each); live PyTorch not run: %s\n",
           dir, lv.why);
  else
    printf("PyTorch's side: live, %s (%s, tools/pytorch/planner.py), in the same run\n", lv.name, python);
  fflush(stdout);
  st = measure(&b, &lv);
#ifdef RS_BENCH_LIVE
  live_close(&lv);
#endif
  if (!st) {
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_pytorch.csv", csvdir);
    FILE *csv = fopen(path, "w");
    if (csv) fprintf(csv, "case,planner,timing,ours_ns,pytorch_ns,ours_over_pytorch\n");
    printf("planner time vs PyTorch's, no plan cache either side, %d cases of %s, %d interleaved "
           "repetitions\n", b.n, dir, reps);
    for (int single = 1; single >= 0 && !st; single--) {
      if (single && !b.single) {
        printf("single call (the headline): not measured (%s)\n",
               lv.on ? "the planner child answers no \"t_first_ns\"" : "the recorded times are best of 3");
        continue;
      }
      if (single)
        printf("single call (the headline): each time is the first planning call of the case on that side, "
               "one call, nothing cached\n");
      else
        printf("best of %d: each time is the least of %d back-to-back calls (warm caches after the first)\n",
               CALLS, CALLS);
      printf("%-7s %6s %10s %12s   %-27s   %-27s  %8s\n", "planner", "cases", "ours (ns)", "pytorch (ns)",
             "ours/pytorch [min, max]", "per repetition [min, max]", "speedup");
      for (int p = 0; p < NPLANNERS && !st; p++) st = report(&b, p, single, &lv, csv);
    }
    printf("(ns: medians over cases of each case's median over repetitions; ours/pytorch: median over cases\n"
           " of each case's median ratio, [min, max] over cases; per repetition: each repetition's median\n"
           " ratio over cases, median [min, max] over repetitions; speedup = 1 / ours/pytorch)\n");
    if (csv) fclose(csv);
  }
out:
  for (int p = 0; p < NPLANNERS; p++) free(b.ours[p]), free(b.theirs[p]), free(b.ours1[p]), free(b.theirs1[p]);
  free(b.cs);
  return st;
}
