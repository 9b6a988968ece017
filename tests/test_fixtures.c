/* test_fixtures.c - ref against real PyTorch: every hand-made fixture (fixtures/curated, *.json) and
 * every recorded random case (fixtures/pytorch, *.jsonl.gz), both written by tools/pytorch/record.py.
 *
 * Per case it checks
 *  - layouts: rs_local_shape_offset of each rank against PyTorch's local shape and global offset;
 *  - plans: the trace of ref's planners against PyTorch's, like with like - greedy against
 *    PyTorch's greedy planner; graph with the `pytorch` cost against PyTorch's graph planner cut
 *    back to the reference enumeration ("trace_graph_pytorch_cost"); graph with the `seed`
 *    cost against the same with the reference constant weights ("trace_graph_seed"). Curated cases
 *    also check the collective counts of ref's plan;
 *  - data: xxh3 of each rank's local after rs_make_source -> rs_ref_redistribute against the
 *    digest of PyTorch's redistributed local tensor.
 * A case marked known_bug (a PyTorch issue) or pytorch_deviates (PyTorch differs from SPEC) is held
 * to the oracle instead of PyTorch's digests.
 *
 * One documented difference between current and reference PyTorch is normalized, not skipped: on a
 * 1-D mesh with equal source and destination placements PyTorch's greedy planner emits no step,
 * the reference planner one no-op step ("X->X"). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "jsonl.h"
#include "reshard/oracle.h"
#include "reshard/ref.h"
#include "core/values.h"
#include "core/fmt.h"
#include "core/json.h"
#include "core/case_json.h"
#include "core/expected.h"
#include "oracle/partial_sum.h"

#define MAX_REPORTS 25

typedef struct counts {
  const char *kind;
  int cases, parse_fail;
  int layout_ranks, layout_fail;
  int greedy, greedy_fail, graph_pt, graph_pt_fail, graph_seed, graph_seed_fail;
  int trace, trace_fail, coll, coll_fail;
  int plan_err;
  int digest_cases, digest_ranks, digest_fail;
  int oracle_cases, oracle_fail;
  int exec_err;
  int torch_errors;
  int graph_enum_differs;
  int nopath_agree;
  int opt_cases, opt_fail;
  /* the pytorch enumeration against PyTorch's planners and redistribute as they are */
  int enum_greedy, enum_greedy_fail, enum_graph, enum_graph_fail;
  int enum_digest_cases, enum_digest_fail, enum_zero_fill;
} counts;

#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
static rs_opt *g_opt; /* opt runs every case ref runs; its bits must equal ref's (held to PyTorch) */
#endif

static int reports = 0;
static int max_reports = MAX_REPORTS; /* RS_FIXTURES_VERBOSE=1 prints every difference */

static void report(const char *name, const char *fmt, const char *a, const char *b) {
  rs_test_failures++;
  if (reports++ >= max_reports) return;
  fprintf(stderr, "  [%s] ", name);
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
}


static const char *str_of(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- layouts ---- */
static void check_layouts(counts *k, const rs_case *c, const rs__expected *e) {
  for (int i = 0; i < e->nranks; ++i) {
    const rs__exp_rank *r = &e->ranks[i];
    int64_t coord[RS_MAX_MESH_DIMS] = {0}, shape[RS_MAX_DIMS], off[RS_MAX_DIMS];
    char got[256], want[256];
    k->layout_ranks++;
    if (!r->has_coord || !r->has_shape || !r->has_offset) {
      k->layout_fail++;
      report(c->name, "rank entry without coord, local_shape or global_offset%s%s", "", "");
      continue;
    }
    rs_mesh_coord(&c->mesh, r->pos, coord);
    rs_local_shape_offset(&c->mesh, &c->dst, &c->tensor, coord, shape, off);
    int bad = 0;
    for (int d = 0; d < c->tensor.ndim; ++d)
      if (shape[d] != r->shape[d] || off[d] != r->offset[d]) bad = 1;
    if (!bad) continue;
    k->layout_fail++;
    int pos = r->pos;
    const int64_t *want_shape = r->shape, *want_off = r->offset;
    rs__sbuf gb, wb;
    rs__sbuf_init(&gb, got, sizeof got);
    rs__sbuf_init(&wb, want, sizeof want);
    rs__sbuf_add(&gb, "pos %d ", pos);
    rs__sbuf_ints(&gb, shape, c->tensor.ndim, "shape ", " ", " offset ");
    rs__sbuf_ints(&wb, want_shape, c->tensor.ndim, "shape ", " ", " offset ");
    rs__sbuf_ints(&gb, off, c->tensor.ndim, "", " ", "");
    rs__sbuf_ints(&wb, want_off, c->tensor.ndim, "", " ", "");
    report(c->name, "layout: ref %s, PyTorch %s", got, want);
  }
}

/* ---- plans ---- */
static int trace_of(const rs_case *c, rs_status st, const rs_plan *p, char *buf, size_t cap) {
  if (st) {
    snprintf(buf, cap, "ERR %s: %s", rs_status_name(st), rs_last_error());
    return 0;
  }
  if (rs_plan_trace(&c->mesh, &c->src, c->tensor.ndim, p, buf, cap)) {
    snprintf(buf, cap, "ERR trace: %s", rs_last_error());
    return 0;
  }
  return 1;
}

/* PyTorch's greedy trace as the reference planner writes it (see the header comment). */
static void seed_greedy_form(const rs_case *c, const char *torch_trace, char *out, size_t cap) {
  if (c->mesh.ndim == 1 && !strstr(torch_trace, "->"))
    snprintf(out, cap, "%s->%s", torch_trace, torch_trace);
  else
    snprintf(out, cap, "%s", torch_trace);
}

/* want is a trace, or "ERR ..." where PyTorch's planner found no path ("ERR no path": ref must
 * fail with RS_ERR_NOPATH too) or PyTorch's own bookkeeping rejected its plan (ref must reject the
 * same plan: any error). */
static void check_trace(counts *k, const rs_case *c, const char *what, const char *want,
                        rs_status st, const rs_plan *p, int *n, int *fail) {
  char got[4096];
  (*n)++;
  trace_of(c, st, p, got, sizeof got);
  if (strcmp(got, want) == 0) return;
  if (strncmp(want, "ERR", 3) == 0 && st) {
    if (strcmp(want, "ERR no path") != 0 || st == RS_ERR_NOPATH) return;
  }
  (*fail)++;
  (void)k;
  char label[64];
  snprintf(label, sizeof label, "%s: ref %%s, PyTorch %%s", what);
  report(c->name, label, got, want);
}

static void check_plans_pytorch(counts *k, const rs_case *c, const cJSON *pt) {
  rs_plan p;
  const char *tg = str_of(pt, "trace_greedy");
  if (tg) {
    char want[4096];
    seed_greedy_form(c, tg, want, sizeof want);
    rs_status st = rs_ref_plan_greedy(&c->mesh, &c->tensor, &c->src, &c->dst, &p);
    check_trace(k, c, "greedy trace", want, st, &p, &k->greedy, &k->greedy_fail);
  }
  const char *gp = str_of(pt, "trace_graph_pytorch_cost");
  if (gp) {
    rs_status st = rs_ref_plan_graph(&c->mesh, &c->tensor, &c->src, &c->dst, RS_COST_PYTORCH, &p);
    check_trace(k, c, "graph/pytorch trace", gp, st, &p, &k->graph_pt, &k->graph_pt_fail);
    /* PyTorch's planner as it is (its own enumeration too): counted, not compared */
    const char *actual = str_of(pt, "trace_graph");
    if (actual && strcmp(actual, gp)) k->graph_enum_differs++;
  }
  const char *gs = str_of(pt, "trace_graph_seed");
  if (gs) {
    rs_status st = rs_ref_plan_graph(&c->mesh, &c->tensor, &c->src, &c->dst, RS_COST_SEED, &p);
    check_trace(k, c, "graph/seed trace", gs, st, &p, &k->graph_seed, &k->graph_seed_fail);
  }
  /* the pytorch enumeration is PyTorch's planners as they are, traces taken verbatim */
  if (tg) {
    rs_status st = rs_ref_plan_greedy_enum(&c->mesh, &c->tensor, &c->src, &c->dst, RS_ENUM_PYTORCH, &p);
    check_trace(k, c, "greedy/pytorch-enumeration trace", tg, st, &p, &k->enum_greedy, &k->enum_greedy_fail);
  }
  const char *ga = str_of(pt, "trace_graph");
  if (ga) {
    rs_status st = rs_ref_plan_graph_enum(&c->mesh, &c->tensor, &c->src, &c->dst, RS_COST_PYTORCH,
                                          RS_ENUM_PYTORCH, &p);
    check_trace(k, c, "graph/pytorch-enumeration trace", ga, st, &p, &k->enum_graph, &k->enum_graph_fail);
  }
}

/* Data under the pytorch enumeration and cost, which is what PyTorch's redistribute ran: ref's
 * pieces must equal PyTorch's digests, zero-filled Partial(sum) pieces included. Cases where
 * PyTorch is wrong (known_bug) or changes the dtype are left to check_data's oracle. */
static void check_data_pytorch_enum(counts *k, const rs_case *c0, const rs__expected *e) {
  rs_case c = *c0;
  c.enumeration = RS_ENUM_PYTORCH;
  c.cost = RS_COST_PYTORCH;
  if (rs_case_validate(&c) != RS_OK) return;
  rs_plan p;
  rs_locals in = {0}, out = {0};
  rs_status st = rs_ref_plan(&c, &p);
  if (!st) st = rs_make_source(&c, &in);
  if (!st) st = rs_ref_execute(&c, &p, &in, &out);
  k->enum_digest_cases++;
  if (st) {
    k->enum_digest_fail++;
    report(c.name, "pytorch enumeration: ref failed: %s%s", rs_last_error(), "");
  } else {
    for (int i = 0; i < p.nsteps; ++i) {
      rs_collective cc;
      if (!rs_step_collective_enum(&p.step[i], p.enumeration, &cc) && cc == RS_COLL_SHARD_TO_PARTIAL) {
        k->enum_zero_fill++;
        break;
      }
    }
    for (int i = 0; i < e->nranks; ++i) {
      const rs__exp_rank *r = &e->ranks[i];
      if (!r->has_xxh3) continue;
      uint64_t got = rs_local_digest(&out.r[r->pos]);
      if (got == r->xxh3) continue;
      k->enum_digest_fail++;
      char where[64], want[24];
      snprintf(where, sizeof where, "pos %d: ref %016llx", r->pos, (unsigned long long)got);
      snprintf(want, sizeof want, "%016llx", (unsigned long long)r->xxh3);
      report(c.name, "pytorch enumeration: digest %s, PyTorch %s", where, want);
      break;
    }
  }
  rs_locals_free(&in);
  rs_locals_free(&out);
}

static void check_plans_curated(counts *k, const rs_case *c, const cJSON *exp, const rs__expected *e) {
  const char *want = e->trace;
  if (!want) return;
  rs_plan p;
  rs_status st = rs_ref_plan(c, &p);
  char w[4096];
  rs_planner_kind kind = rs_case_resolve_planner(c);
  if (kind == RS_PLANNER_GREEDY && c->enumeration == RS_ENUM_SEED)
    seed_greedy_form(c, want, w, sizeof w);
  else
    snprintf(w, sizeof w, "%s", want);
  check_trace(k, c, "trace", w, st, &p, &k->trace, &k->trace_fail);
  if (st || !e->has_collectives) return;
  const cJSON *coll = cJSON_GetObjectItemCaseSensitive(exp, "collectives");
  int have[RS_COLL_COUNT] = {0};
  for (int i = 0; i < p.nsteps; ++i) {
    rs_collective cc;
    if (rs_step_collective_enum(&p.step[i], p.enumeration, &cc)) continue;
    if (c->mesh.size[p.step[i].mesh_dim] == 1) continue; /* moves nothing (SPEC 6) */
    have[cc]++;
  }
  k->coll++;
  int bad = 0;
  for (int cc = RS_COLL_ALL_GATHER; cc < RS_COLL_COUNT; ++cc)
    if (e->collectives[cc] != have[cc]) bad = 1;
  if (bad) {
    k->coll_fail++;
    char got[256];
    rs__sbuf gb;
    rs__sbuf_init(&gb, got, sizeof got);
    for (int cc = RS_COLL_ALL_GATHER; cc < RS_COLL_COUNT; ++cc)
      if (have[cc]) rs__sbuf_add(&gb, "%s=%d ", rs_collective_name((rs_collective)cc), have[cc]);
    char *want_s = cJSON_PrintUnformatted(coll);
    report(c->name, "collectives: ref %s, PyTorch %s", got, want_s ? want_s : "?");
    free(want_s);
  }
}

/* ---- data ---- */
/* nopath_ok: PyTorch's like-for-like planner (the reference enumeration) found no path either. */
static void check_data(counts *k, const rs_case *c, const rs__expected *e, int bugged, int nopath_ok) {
  rs_locals in = {0}, out = {0};
  rs_plan plan;
  rs_events ev = {0}, canon = {0};
  memset(&plan, 0, sizeof plan);
  rs_status st = rs_make_source(c, &in);
  if (!st) st = rs_ref_redistribute(c, &in, &out, &plan);
  /* SPEC 5: ref's result is defined by its plan's events, opt's own schedule by the canonical ones */
  if (!st) st = rs_events_from_plan(&c->mesh, &plan, &ev);
  if (!st) st = rs_events_canonical(&c->mesh, &c->src, &c->dst, &canon);
  if (st == RS_ERR_NOPATH && nopath_ok) {
    k->nopath_agree++;
    rs_locals_free(&in);
    rs_locals_free(&out);
    return;
  }
  if (st) {
    k->exec_err++;
    report(c->name, "ref failed: %s%s", rs_last_error(), "");
    rs_locals_free(&in);
    rs_locals_free(&out);
    return;
  }
  if (bugged) {
    rs_locals exp = {0};
    k->oracle_cases++;
    if ((st = rs_oracle_expected_events(c, &c->dst, &ev, &exp))) {
      k->oracle_fail++;
      report(c->name, "oracle failed: %s%s", rs_last_error(), "");
    } else {
      rs_diff diff;
      if (rs_oracle_compare(c, &c->dst, &exp, &out, &diff)) {
        k->oracle_fail++;
        report(c->name, "ref differs from the oracle (known PyTorch bug case): %s%s", diff.text, "");
      }
    }
    rs_locals_free(&exp);
  } else {
    k->digest_cases++;
    for (int i = 0; e && i < e->nranks; ++i) {
      const rs__exp_rank *r = &e->ranks[i];
      if (!r->has_xxh3) continue;
      int pos = r->pos;
      uint64_t got = rs_local_digest(&out.r[pos]);
      k->digest_ranks++;
      if (got != r->xxh3) {
        k->digest_fail++;
        char where[64], want[24];
        snprintf(where, sizeof where, "pos %d: ref %016llx", pos, (unsigned long long)got);
        snprintf(want, sizeof want, "%016llx", (unsigned long long)r->xxh3);
        report(c->name, "digest %s, PyTorch %s", where, want);
      }
    }
  }
#ifdef RS_HAVE_OPT
  if (g_opt) {
    rs_locals oo = {0};
    rs_diff diff;
    memset(&diff, 0, sizeof diff);
    /* opt is plan-free (the contract's partition); where ref's plan zero-fills (pytorch
     * enumeration) ref's pieces differ, and the two are compared through the oracle */
    unsigned zf = rs__plan_zero_fill_dims(c, &plan);
    k->opt_cases++;
    if ((st = rs_opt_redistribute(g_opt, NULL, c, &in, &oo, NULL))) {
      k->opt_fail++;
      report(c->name, "opt failed: %s%s", rs_last_error(), "");
    } else if (zf) {
      /* ref zero-filled: opt is held to the oracle's pieces, ref's sums to the tensor before any
       * partition */
      rs_locals ex = {0}, un = {0};
      rs_sharding un_layout;
      if (rs_oracle_expected(c, &c->dst, &ex) || rs__oracle_sum_over(c, zf, &out) ||
          rs__oracle_expected_summed(c, &plan, zf, &un_layout, &un)) {
        k->opt_fail++;
        report(c->name, "oracle for a zero-fill plan: %s%s", rs_last_error(), "");
      } else if (rs_oracle_compare(c, &c->dst, &ex, &oo, &diff)) {
        k->opt_fail++;
        report(c->name, "opt differs from the oracle: %s%s", diff.text, "");
      } else if (rs_oracle_compare(c, &un_layout, &un, &out, &diff)) {
        k->opt_fail++;
        report(c->name, "ref's zero-filled pieces do not sum to the oracle's tensor: %s%s", diff.text, "");
      }
      rs_locals_free(&ex);
      rs_locals_free(&un);
    } else if (rs_events_equal(&ev, &canon) || c->values != RS_VALUES_ORDER) {
      if (rs_oracle_compare(c, &c->dst, &out, &oo, &diff)) {
        k->opt_fail++;
        report(c->name, "opt differs from ref: %s%s", diff.text, "");
      }
    } else {
      /* order values, another event sequence than ref's plan: opt is held to the oracle */
      rs_locals exp = {0};
      if (rs_oracle_expected(c, &c->dst, &exp) || rs_oracle_compare(c, &c->dst, &exp, &oo, &diff)) {
        k->opt_fail++;
        report(c->name, "opt differs from the oracle (canonical events): %s%s", diff.text, "");
      }
      rs_locals_free(&exp);
    }
    rs_locals_free(&oo);
  }
#endif
  rs_locals_free(&in);
  rs_locals_free(&out);
}

/* ---- one case ---- */
/* Every number is read exactly (core/json.h) and the recorded block by type (core/expected.h):
 * a record that does not read is counted as unreadable, never compared loosely. */
static void check_case(counts *k, const char *text, int curated, const char *where) {
  rs_case c;
  k->cases++;
  cJSON *root;
  if (rs_json_parse(text, &root)) {
    k->parse_fail++;
    report(where, "JSON does not parse: %s%s", rs_last_error(), "");
    return;
  }
  if (rs__case_from_cjson(root, &c)) {
    k->parse_fail++;
    report(where, "case does not load: %s%s", rs_last_error(), "");
    cJSON_Delete(root);
    return;
  }
  if (!c.name[0]) snprintf(c.name, sizeof c.name, "%.*s", (int)sizeof c.name - 1, where);
  int bugged = cJSON_GetObjectItemCaseSensitive(root, "known_bug") != NULL ||
               cJSON_GetObjectItemCaseSensitive(root, "pytorch_deviates") != NULL;
  const char *key = curated ? "expected" : "pytorch";
  const cJSON *rec = cJSON_GetObjectItemCaseSensitive(root, key);
  rs__expected e;
  if (rs__expected_parse(rec, key, curated, &c, &e)) {
    k->parse_fail++;
    report(c.name, "recorded block does not read: %s%s", rs_last_error(), "");
    cJSON_Delete(root);
    return;
  }
  if (!e.has_ranks) {
    /* PyTorch raised: only a known-bug case may lack results; ref is held to the oracle */
    if (bugged && e.error) {
      k->torch_errors++;
      check_data(k, &c, NULL, 1, 0);
    } else {
      k->parse_fail++;
      report(c.name, "no recorded ranks%s%s", "", "");
    }
    rs__expected_free(&e);
    cJSON_Delete(root);
    return;
  }
  check_layouts(k, &c, &e);
  if (curated)
    check_plans_curated(k, &c, rec, &e);
  else
    check_plans_pytorch(k, &c, rec);
  int nopath_ok = 0;
  if (rs_case_resolve_planner(&c) == RS_PLANNER_GRAPH) {
    const char *t = curated ? e.trace
                            : str_of(rec, c.cost == RS_COST_PYTORCH ? "trace_graph_pytorch_cost" : "trace_graph_seed");
    nopath_ok = t && strcmp(t, "ERR no path") == 0;
  }
  check_data(k, &c, &e, bugged, nopath_ok);
  if (!curated) {
    /* only the zero-fill deviation is PyTorch's enumeration; others (dtype, known bugs) stay out */
    const char *dev = str_of(root, "pytorch_deviates");
    int dtype_dev = dev && strstr(dev, "dtype");
    int ranks_dtype = 0;
    const cJSON *rk = cJSON_GetObjectItemCaseSensitive(rec, "ranks");
    const cJSON *it;
    cJSON_ArrayForEach(it, rk) ranks_dtype |= cJSON_GetObjectItemCaseSensitive(it, "dtype") != NULL;
    if (!cJSON_GetObjectItemCaseSensitive(root, "known_bug") && !dtype_dev && !ranks_dtype)
      check_data_pytorch_enum(k, &c, &e);
  }
  rs__expected_free(&e);
  cJSON_Delete(root);
}

static void run_curated(counts *k, const char *top) {
  char dir[1024], path[2048];
  snprintf(dir, sizeof dir, "%s/fixtures/curated", top);
  char **names;
  int n = rs_test_list_dir(dir, ".json", &names);
  for (int i = 0; i < n; ++i) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    char *text = rs_read_text(path);
    if (!text) {
      report(names[i], "cannot read %s%s", path, "");
    } else {
      check_case(k, text, 1, names[i]);
      free(text);
    }
    free(names[i]);
  }
  free(names);
}

static void pytorch_line(void *k, char *text, const char *where) { check_case(k, text, 0, where); }

static void run_pytorch(counts *k, const char *top) {
  char dir[1024], path[2048];
  snprintf(dir, sizeof dir, "%s/fixtures/pytorch", top);
  char **names;
  int n = rs_test_list_dir(dir, ".jsonl.gz", &names);
  for (int i = 0; i < n; ++i) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (rs_test_jsonl_gz(path, names[i], pytorch_line, k)) report(names[i], "cannot open %s%s", path, "");
    free(names[i]);
  }
  free(names);
}

static void print_counts(const counts *k) {
  printf("%s: %d cases (%d unreadable)\n", k->kind, k->cases, k->parse_fail);
  printf("  layouts        %6d ranks, %d wrong\n", k->layout_ranks, k->layout_fail);
  if (k->trace || k->coll) {
    printf("  traces         %6d, %d wrong\n", k->trace, k->trace_fail);
    printf("  collectives    %6d, %d wrong\n", k->coll, k->coll_fail);
  }
  if (k->greedy || k->graph_pt || k->graph_seed) {
    printf("  greedy traces  %6d, %d wrong\n", k->greedy, k->greedy_fail);
    printf("  graph/pytorch  %6d, %d wrong\n", k->graph_pt, k->graph_pt_fail);
    printf("  graph/seed     %6d, %d wrong\n", k->graph_seed, k->graph_seed_fail);
    printf("  (PyTorch's own graph planner, with its wider enumeration, took another path in %d)\n",
           k->graph_enum_differs);
  }
  printf("  digests        %6d cases, %d ranks, %d wrong\n", k->digest_cases, k->digest_ranks, k->digest_fail);
  printf("  oracle (PyTorch bug/deviation) %d cases, %d wrong\n", k->oracle_cases, k->oracle_fail);
  printf("  ref errors     %6d\n", k->exec_err);
  if (k->opt_cases) printf("  opt == ref     %6d cases, %d wrong\n", k->opt_cases, k->opt_fail);
  if (k->enum_greedy || k->enum_graph || k->enum_digest_cases) {
    printf("  pytorch enumeration (PyTorch's planners and redistribute as they are):\n");
    printf("    greedy traces %6d, %d wrong\n", k->enum_greedy, k->enum_greedy_fail);
    printf("    graph traces  %6d, %d wrong (cost pytorch)\n", k->enum_graph, k->enum_graph_fail);
    printf("    digests       %6d cases (%d zero-fill), %d wrong\n", k->enum_digest_cases, k->enum_zero_fill,
           k->enum_digest_fail);
  }
  if (k->nopath_agree)
    printf("  no plan, as the reference enumeration (no data compared) %d\n", k->nopath_agree);
  if (k->torch_errors) printf("  PyTorch raised (known bug, ref checked by the oracle) %d\n", k->torch_errors);
}

int main(int argc, char **argv) {
  const char *top = argc > 1 ? argv[1] : ".";
  if (getenv("RS_FIXTURES_VERBOSE")) max_reports = 1 << 30;
  counts cur = {.kind = "curated"}, pt = {.kind = "pytorch"};
#ifdef RS_HAVE_OPT
  CHECK(rs_opt_create(&g_opt) == RS_OK);
#endif
  run_curated(&cur, top);
  run_pytorch(&pt, top);
  print_counts(&cur);
  print_counts(&pt);
  CHECK(cur.cases >= 60);
  CHECK(pt.cases >= 3000);
  CHECK(pt.enum_graph >= 2900 && pt.enum_digest_cases >= 2800 && pt.enum_zero_fill >= 3);
#ifdef RS_HAVE_OPT
  CHECK(cur.opt_cases >= 60 && cur.opt_fail == 0);
  CHECK(pt.opt_cases >= 2500 && pt.opt_fail == 0);
  rs_opt_destroy(g_opt);
#endif
  if (reports > max_reports)
    fprintf(stderr, "  ... %d more (RS_FIXTURES_VERBOSE=1 prints all)\n", reports - max_reports);
  TEST_DONE();
}
