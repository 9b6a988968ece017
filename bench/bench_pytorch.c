/* bench_pytorch.c - `reshard bench pytorch`: our planners' time against PyTorch's, per case, on the
 * recorded corpus (the fixtures/pytorch .jsonl.gz files carry t_greedy_ns / t_graph_ns measured by
 * tools/pytorch/record.py with the planner cache cleared). Ours is timed the same way: one cold
 * planning call per repetition, median over repetitions. The graph planner runs with the cost model
 * PyTorch uses today (RS_COST_PYTORCH) so both sides search the same graph. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include "bench.h"
#include "reshard/ref.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  if (n == 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_dbl);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct series {
  double *ours, *theirs, *ratio;
  int n, cap;
} series;

static rs_status push(series *s, double ours, double theirs) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 1024;
    double *a = realloc(s->ours, (size_t)cap * sizeof *a), *b = a ? realloc(s->theirs, (size_t)cap * sizeof *b) : NULL,
           *c = b ? realloc(s->ratio, (size_t)cap * sizeof *c) : NULL;
    if (a) s->ours = a;
    if (b) s->theirs = b;
    if (!c) return rs_fail(RS_ERR_NOMEM, "bench pytorch: out of memory");
    s->ratio = c;
    s->cap = cap;
  }
  s->ours[s->n] = ours;
  s->theirs[s->n] = theirs;
  s->ratio[s->n] = ours / theirs;
  s->n++;
  return RS_OK;
}

static double time_plan(const rs_case *c, int graph, int reps, int *ok) {
  double t[16];
  if (reps > 16) reps = 16;
  *ok = 1;
  for (int r = 0; r < reps; ++r) {
    rs_plan p;
    double t0 = now_ns();
    rs_status st = graph ? rs_ref_plan_graph_enum(&c->mesh, &c->tensor, &c->src, &c->dst, RS_COST_PYTORCH, RS_ENUM_PYTORCH, &p)
                         : rs_ref_plan_greedy(&c->mesh, &c->tensor, &c->src, &c->dst, &p);
    t[r] = now_ns() - t0;
    if (st) *ok = 0;
  }
  return median(t, reps);
}

static rs_status one_line(const char *line, int reps, series *greedy, series *graph, FILE *csv) {
  rs_case c;
  if (rs_case_from_json(line, &c)) return RS_OK; /* the fixture test reports unreadable lines */
  cJSON *root = cJSON_Parse(line);
  if (!root) return RS_OK;
  const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pytorch");
  const cJSON *tg = cJSON_GetObjectItemCaseSensitive(pt, "t_greedy_ns");
  const cJSON *th = cJSON_GetObjectItemCaseSensitive(pt, "t_graph_ns");
  rs_status st = RS_OK;
  double og = -1, oh = -1;
  int ok;
  if (cJSON_IsNumber(tg) && tg->valuedouble > 0) {
    og = time_plan(&c, 0, reps, &ok);
    if (ok) st = push(greedy, og, tg->valuedouble);
  }
  if (!st && cJSON_IsNumber(th) && th->valuedouble > 0) {
    oh = time_plan(&c, 1, reps, &ok);
    if (ok) st = push(graph, oh, th->valuedouble);
  }
  if (csv)
    fprintf(csv, "%s,%.0f,%.0f,%.0f,%.0f\n", c.name, og, cJSON_IsNumber(tg) ? tg->valuedouble : -1, oh,
            cJSON_IsNumber(th) ? th->valuedouble : -1);
  cJSON_Delete(root);
  return st;
}

static void report(const char *name, series *s) {
  if (!s->n) {
    printf("%-8s %7d cases\n", name, 0);
    return;
  }
  int n = s->n;
  double mo = median(s->ours, n), mt = median(s->theirs, n), mr = median(s->ratio, n);
  printf("%-8s %7d %14.0f %14.0f %12.4f\n", name, n, mo, mt, mr);
}

rs_status rs_bench_pytorch(int argc, char **argv) {
  const char *dir = "fixtures/pytorch", *csvdir = ".";
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "pytorch")) continue;
    if (!strcmp(argv[i], "--fixtures") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csvdir = argv[++i];
    else {
      rs_status fst;
      if (!rs_bench_int_flag("bench pytorch", argc, argv, &i, "--reps", 1, 1000, &reps, &fst))
        return rs_fail(RS_ERR_INVALID, "bench pytorch: unknown option %s", argv[i]);
      if (fst) return fst;
    }
  }
  DIR *d = opendir(dir);
  if (!d) return rs_fail(RS_ERR_IO, "bench pytorch: cannot open %s (--fixtures DIR)", dir);
  char path[4096];
  snprintf(path, sizeof path, "%s/bench_pytorch.csv", csvdir);
  FILE *csv = fopen(path, "w");
  if (csv) fprintf(csv, "case,ours_greedy_ns,pytorch_greedy_ns,ours_graph_ns,pytorch_graph_ns\n");
  series g = {0}, h = {0};
  rs_status st = RS_OK;
  size_t cap = 1 << 20;
  char *line = malloc(cap);
  struct dirent *e;
  int files = 0;
  while (!st && line && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 9 || strcmp(e->d_name + len - 9, ".jsonl.gz")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    gzFile z = gzopen(path, "rb");
    if (!z) continue;
    files++;
    while (!st && gzgets(z, line, (int)cap)) st = one_line(line, reps, &g, &h, csv);
    gzclose(z);
  }
  closedir(d);
  free(line);
  if (csv) fclose(csv);
  if (!st && !files) st = rs_fail(RS_ERR_IO, "bench pytorch: no .jsonl.gz files in %s", dir);
  if (!st) {
    printf("planner time vs PyTorch (recorded corpus %s, cold planner, median of %d runs per case)\n", dir, reps);
    printf("%-8s %7s %14s %14s %12s\n", "planner", "cases", "ours (ns)", "pytorch (ns)", "ours/pytorch");
    report("greedy", &g);
    report("graph", &h);
    printf("(medians over cases; the ratio column is the median of per-case ratios)\n");
  }
  free(g.ours), free(g.theirs), free(g.ratio), free(h.ours), free(h.theirs), free(h.ratio);
  return st;
}
