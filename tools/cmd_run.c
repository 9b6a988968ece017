/* cmd_run.c - `reshard run CASE.json`: execute one case with ref (or opt), check it bit for bit
 * against the oracle and, for fixtures, against the "expected" object the file carries; --json
 * prints all of it as one document for scripts. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "reshard/oracle.h"
#include "reshard/ref.h"
#include "core/case_json.h"
#include "core/expected.h"
#include "core/fmt.h"
#include "core/json.h"
#include "core/mutant.h"
#include "core/values.h"
#include "oracle/partial_sum.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

static const char *HELP =
    "usage: reshard run CASE.json [--impl ref|opt] [--planner greedy|graph] [--cost seed|pytorch]\n"
    "                             [--enumeration seed|pytorch] [--json]\n"
    "Executes the case, prints the plan trace and every rank's shape, offset and xxh3 digest,\n"
    "and compares with the oracle. A fixture's \"expected\" object (ranks with local_shape,\n"
    "global_offset, xxh3; trace; collectives counts) is read by type and checked too.\n"
    "--json prints one JSON document instead: the case, the plan (trace and steps), every rank's\n"
    "local_shape, global_offset and xxh3, the oracle and expectation mismatches and the verdict.\n"
    "--enumeration pytorch plans with current PyTorch's transitions (R -> P(avg|min|max), Shard ->\n"
    "P(sum) by zero-fill); where a plan zero-fills, ref's pieces on those mesh dims are PyTorch's,\n"
    "so their sums over those dims are compared with the oracle's tensor before any partition.\n"
    "Exit 0 pass, 1 fail, 2 bad usage or input, 3 out of memory.\n";

/* Mismatch lines: printed at once in text mode, gathered into an array for --json. */
typedef struct sink {
  cJSON *arr; /* NULL: text mode */
  int n;
} sink;

static void note(sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(sink *s, const char *fmt, ...) {
  char line[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  s->n++;
  if (s->arr) cJSON_AddItemToArray(s->arr, cJSON_CreateString(line));
  else printf("%s\n", line);
}

static int ints_equal(const int64_t *a, const int64_t *b, int n) {
  for (int i = 0; i < n; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

/* Checks the parsed "expected" block; the mismatches go to s. */
static void check_expected(const rs__expected *e, const rs_case *c, const rs_locals *out,
                           const rs_plan *p, int have_plan, const char *trace, int digests, sink *s) {
  char b1[128], b2[128];
  for (int i = 0; i < e->nranks; i++) {
    const rs__exp_rank *x = &e->ranks[i];
    int64_t coord[RS_MAX_MESH_DIMS] = {0}, shp[RS_MAX_DIMS], off[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, x->pos, coord);
    rs_local_shape_offset(&c->mesh, &c->dst, &c->tensor, coord, shp, off);
    if (x->has_shape && !ints_equal(x->shape, shp, c->tensor.ndim))
      note(s, "expected: rank %d local_shape %s, got %s", (int)x->rank,
           rs__fmt_ints(b1, sizeof b1, x->shape, c->tensor.ndim, "[", ",", "]"),
           rs__fmt_ints(b2, sizeof b2, shp, c->tensor.ndim, "[", ",", "]"));
    if (x->has_offset && !ints_equal(x->offset, off, c->tensor.ndim))
      note(s, "expected: rank %d global_offset %s, got %s", (int)x->rank,
           rs__fmt_ints(b1, sizeof b1, x->offset, c->tensor.ndim, "[", ",", "]"),
           rs__fmt_ints(b2, sizeof b2, off, c->tensor.ndim, "[", ",", "]"));
    if (x->has_xxh3 && digests) {
      uint64_t got = rs_local_digest(&out->r[x->pos]);
      if (got != x->xxh3)
        note(s, "expected: rank %d xxh3 %016llx, got %016llx", (int)x->rank, (unsigned long long)x->xxh3,
             (unsigned long long)got);
    }
  }
  if (e->trace) {
    /* current PyTorch's greedy planner emits no step for an equal 1-d layout (trace "R"); the
     * reference enumeration emits one no-op step ("R->R") */
    char want[4096] = "";
    if (c->mesh.ndim == 1 && rs_case_resolve_planner(c) == RS_PLANNER_GREEDY && c->enumeration == RS_ENUM_SEED &&
        !strstr(e->trace, "->"))
      snprintf(want, sizeof want, "%s->%s", e->trace, e->trace);
    else
      snprintf(want, sizeof want, "%s", e->trace);
    if (!have_plan || strcmp(want, trace) != 0)
      note(s, "expected: trace %s, got %s", want, have_plan ? trace : "(no plan)");
  }
  if (e->has_collectives) {
    int count[RS_COLL_COUNT] = {0};
    for (int i = 0; have_plan && i < p->nsteps; i++) {
      rs_collective k;
      /* a step on a mesh dim of size 1 moves nothing (SPEC 6): PyTorch calls no collective */
      if (c->mesh.size[p->step[i].mesh_dim] == 1) continue;
      if (rs_step_collective_enum(&p->step[i], p->enumeration, &k) == RS_OK) count[k]++;
    }
    for (int k = 1; k < RS_COLL_COUNT; k++)
      if (e->collectives[k] != count[k])
        note(s, "expected: %d %s, plan has %d", e->collectives[k], rs_collective_name((rs_collective)k), count[k]);
  }
}

/* Exact integers in the JSON output (shapes may exceed 2^53). */
static cJSON *json_ints(const int64_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++) {
    char b[24];
    snprintf(b, sizeof b, "%lld", (long long)v[i]);
    cJSON_AddItemToArray(a, cJSON_CreateRaw(b));
  }
  return a;
}

static cJSON *json_plan(const rs_plan *p) {
  cJSON *steps = cJSON_CreateArray();
  for (int i = 0; steps && i < p->nsteps; i++) {
    cJSON *o = cJSON_CreateObject();
    char f[32], t[32];
    rs_format_placement(p->step[i].from, f, sizeof f);
    rs_format_placement(p->step[i].to, t, sizeof t);
    rs_collective k = RS_COLL_NONE;
    (void)rs_step_collective_enum(&p->step[i], p->enumeration, &k);
    cJSON_AddNumberToObject(o, "mesh_dim", p->step[i].mesh_dim);
    cJSON_AddStringToObject(o, "from", f);
    cJSON_AddStringToObject(o, "to", t);
    cJSON_AddStringToObject(o, "collective", rs_collective_name(k));
    cJSON_AddItemToArray(steps, o);
  }
  return steps;
}

int cmd_run(int argc, char **argv) {
  const char *C = "run";
  const char *file = NULL, *impl = "ref", *planner = NULL, *cost = NULL, *enumeration = NULL, *v;
  int r, json = 0;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      return CLI_OK;
    }
    if (cli_flag(argv, i, "--json")) { json = 1; continue; }
    CLI_OPT(C, "--impl", impl)
    CLI_OPT(C, "--planner", planner)
    CLI_OPT(C, "--cost", cost)
    CLI_OPT(C, "--enumeration", enumeration)
    if (argv[i][0] == '-' || file) return cli_usage_error(C, "unknown argument '%s'", argv[i]);
    file = argv[i];
  }
  if (!file) return cli_usage_error(C, "CASE.json: required");
  int use_opt = strcmp(impl, "opt") == 0;
  if (!use_opt && strcmp(impl, "ref") != 0) return cli_usage_error(C, "--impl: '%s', expected ref or opt", impl);
#ifndef RS_HAVE_OPT
  if (use_opt) return cli_usage_error(C, "--impl opt: this build has no opt/ library");
#endif
  char *text = rs_read_text(file);
  if (!text) return cli_status_error(C, NULL); /* the reader named the file */
  rs_case *c = calloc(1, sizeof *c);
  rs_diff *diff = calloc(1, sizeof *diff);
  rs_plan *p = calloc(1, sizeof *p);
  cJSON *root = NULL, *doc = NULL;
  rs__expected ex;
  memset(&ex, 0, sizeof ex);
  int have_exp = 0, rc = CLI_USAGE;
  rs_locals in = {0}, out = {0}, exp = {0};
  sink mism = {0};
  const cJSON *ej;
  if (!c || !diff || !p) {
    rc = cli_nomem(C, "case");
    goto done;
  }
  if (rs_json_parse(text, &root) != RS_OK || rs__case_from_cjson(root, c) != RS_OK) {
    rc = cli_status_error(C, file);
    goto done;
  }
  ej = cJSON_GetObjectItemCaseSensitive(root, "expected");
  if (ej) {
    if (rs__expected_parse(ej, "expected", 1, c, &ex) != RS_OK) {
      rc = cli_status_error(C, file);
      goto done;
    }
    have_exp = 1;
  }
  if ((rc = cli_planner_flags(C, planner, 0, cost, enumeration, &c->planner, &c->cost, &c->enumeration)) != CLI_OK)
    goto done;
  rc = CLI_USAGE;
  /* --enumeration may admit what the file's enumeration rejected (S -> P(sum)) or the reverse */
  if (enumeration && rs_case_validate(c) != RS_OK) {
    rc = cli_status_error(C, "--enumeration");
    goto done;
  }
  if (json) {
    doc = cJSON_CreateObject();
    mism.arr = cJSON_CreateArray();
    if (!doc || !mism.arr) {
      rc = cli_nomem(C, "--json");
      goto done;
    }
  }
  rc = CLI_FAIL;
  { /* a block: the gotos above jump past it to done: without skipping an initialisation */
    rs_status st = rs_ref_plan(c, p);
    int have_plan = st == RS_OK;
    char trace[4096] = "(no plan)", plan_err[600] = "";
    if (have_plan) have_plan = rs_plan_trace(&c->mesh, &c->src, c->tensor.ndim, p, trace, sizeof trace) == RS_OK;
    if (!have_plan) {
      snprintf(plan_err, sizeof plan_err, "%s: %s", rs_status_name(st ? st : RS_ERR_INVALID), rs_last_error());
      snprintf(trace, sizeof trace, "(no plan: %s)", rs_last_error());
    }
    char s1[256], s2[256];
    rs_format_sharding(&c->src, s1, sizeof s1);
    rs_format_sharding(&c->dst, s2, sizeof s2);
    const char *pname = rs_planner_name(rs_case_resolve_planner(c));
    if (doc) {
      cJSON_AddStringToObject(doc, "case", c->name[0] ? c->name : file);
      cJSON_AddStringToObject(doc, "impl", use_opt ? "opt" : "ref");
      cJSON_AddStringToObject(doc, "dtype", rs_dtype_name(c->tensor.dtype));
      cJSON_AddItemToObject(doc, "mesh", json_ints(c->mesh.size, c->mesh.ndim));
      cJSON_AddItemToObject(doc, "shape", json_ints(c->tensor.shape, c->tensor.ndim));
      cJSON_AddStringToObject(doc, "src", s1);
      cJSON_AddStringToObject(doc, "dst", s2);
      cJSON *pj = cJSON_AddObjectToObject(doc, "plan");
      cJSON_AddStringToObject(pj, "planner", pname);
      cJSON_AddStringToObject(pj, "cost", c->cost == RS_COST_PYTORCH ? "pytorch" : "seed");
      cJSON_AddStringToObject(pj, "enumeration", rs_enumeration_name(c->enumeration));
      if (have_plan) {
        cJSON_AddStringToObject(pj, "trace", trace);
        cJSON_AddItemToObject(pj, "steps", json_plan(p));
      } else {
        cJSON_AddNullToObject(pj, "trace");
        cJSON_AddStringToObject(pj, "error", plan_err);
      }
    } else {
      printf("case %s: %s %s -> %s, %s planner\n", c->name[0] ? c->name : file, rs_dtype_name(c->tensor.dtype),
             s1, s2, pname);
      printf("plan: %s\n", trace);
    }
    const char *fail = NULL;
    char failmsg[700] = "";
    if ((st = rs_make_source(c, &in)) != RS_OK) {
      snprintf(failmsg, sizeof failmsg, "rs_make_source: %s", rs_last_error());
      fail = failmsg;
    }
    if (!fail) {
      if (use_opt) {
  #ifdef RS_HAVE_OPT
        rs_world *w = NULL;
        rs_opt *o = NULL;
        st = rs_world_init("local", &argc, &argv, &w);
        if (st == RS_OK) st = rs_opt_create(&o);
        if (st == RS_OK) st = rs_opt_redistribute(o, w, c, &in, &out, NULL);
        if (o) rs_opt_destroy(o);
        if (w) rs_world_finalize(w);
  #else
        st = RS_ERR_UNSUPPORTED;
  #endif
      } else {
        st = have_plan ? rs_ref_execute(c, p, &in, &out) : RS_ERR_NOPATH;
      }
      if (st != RS_OK) {
        snprintf(failmsg, sizeof failmsg, "%s: %s", use_opt ? "opt" : "ref", have_plan || use_opt ? rs_last_error() : plan_err);
        fail = failmsg;
      }
    }
    /* SPEC 5: ref's result is its plan's event sequence, opt's own schedule the canonical one */
    rs_events ev;
    if (use_opt || !have_plan) rs_events_canonical(&c->mesh, &c->src, &c->dst, &ev);
    else rs_events_from_plan(&c->mesh, p, &ev);
    if (!fail && (st = rs_oracle_expected_events(c, &c->dst, &ev, &exp)) != RS_OK) {
      snprintf(failmsg, sizeof failmsg, "oracle: %s", rs_last_error());
      fail = failmsg;
    }
    if (fail) {
      if (st == RS_ERR_NOMEM && !RS_MUTANT(237)) rc = CLI_NOMEM; /* planted: out of memory reads as a failed check */
      if (doc) {
        cJSON_AddNullToObject(doc, "ranks");
        cJSON_AddStringToObject(doc, "error", fail);
        cJSON_AddStringToObject(doc, "verdict", rc == CLI_NOMEM ? "error" : "fail");
      } else {
        printf("FAIL: %s\n", fail);
        if (rc == CLI_NOMEM) fprintf(stderr, "reshard run: out of memory: %s\n", fail);
      }
      goto done;
    }
    if (!doc) {
      static const char *const VALUES[] = {"bits", "exact", "order"};
      char evtext[512];
      rs_events_format(&ev, evtext, sizeof evtext);
      printf("values: %s; events: %s\n", (unsigned)c->values < 3 ? VALUES[c->values] : "?", evtext);
    }
    cJSON *ranks = doc ? cJSON_AddArrayToObject(doc, "ranks") : NULL;
    if (!doc) printf("%6s  %-18s %-18s %s\n", "rank", "local_shape", "global_offset", "xxh3");
    for (int pos = 0; pos < c->mesh.nranks; pos++) {
      int64_t coord[RS_MAX_MESH_DIMS] = {0}, shp[RS_MAX_DIMS], off[RS_MAX_DIMS];
      rs_mesh_coord(&c->mesh, pos, coord);
      rs_local_shape_offset(&c->mesh, &c->dst, &c->tensor, coord, shp, off);
      char xx[20];
      snprintf(xx, sizeof xx, "%016llx", (unsigned long long)rs_local_digest(&out.r[pos]));
      if (doc) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "rank", c->mesh.ranks[pos]);
        cJSON_AddItemToObject(o, "coord", json_ints(coord, c->mesh.ndim));
        cJSON_AddItemToObject(o, "local_shape", json_ints(out.r[pos].shape, c->tensor.ndim));
        cJSON_AddItemToObject(o, "global_offset", json_ints(off, c->tensor.ndim));
        cJSON_AddStringToObject(o, "xxh3", xx);
        cJSON_AddItemToArray(ranks, o);
      } else {
        char b1[96], b2[96];
        rs__fmt_ints(b1, sizeof b1, out.r[pos].shape, c->tensor.ndim, "[", ",", "]");
        rs__fmt_ints(b2, sizeof b2, off, c->tensor.ndim, "[", ",", "]");
        printf("%6d  %-18s %-18s %s\n", (int)c->mesh.ranks[pos], b1, b2, xx);
      }
    }
    /* Zero-filled mesh dims hold PyTorch's pieces in ref's result and the contract's (partition by
     * 1/n) in the oracle's and in opt's, which is plan-free: ref is compared with the oracle by the
     * sums over those dims, and opt's pieces there are not PyTorch's, so its digests are not held to
     * the fixture's. */
    unsigned zf_plan = have_plan ? rs__plan_zero_fill_dims(c, p) : 0;
    unsigned zf = use_opt ? 0 : zf_plan;
    if (have_exp) check_expected(&ex, c, &out, p, have_plan, trace, !(use_opt && zf_plan), &mism);
    int bad = 0;
    if (zf) {
      /* one zero-fill compare for run and the campaigns (sums over those dims, -0 + +0 = +0) */
      bad = rs__oracle_compare_zero_fill(c, p, zf, &out, diff, &st);
      if (bad < 0) {
        if (st == RS_ERR_NOMEM) rc = CLI_NOMEM;
        note(&mism, "oracle: %s", rs_last_error());
        bad = 0;
      }
    } else if (exp.r) {
      bad = rs_oracle_compare(c, &c->dst, &exp, &out, diff);
    }
    if (bad) note(&mism, "oracle: %d rank(s) differ%s: %s", bad, zf ? " (sums over the zero-filled mesh dims)" : "", diff->text);
    if (rc != CLI_NOMEM) rc = mism.n ? CLI_FAIL : CLI_OK;
    if (doc) {
      static const char *const VALUES[] = {"bits", "exact", "order"};
      char evtext[512];
      rs_events_format(&ev, evtext, sizeof evtext);
      cJSON_AddStringToObject(doc, "values", (unsigned)c->values < 3 ? VALUES[c->values] : "?");
      cJSON_AddStringToObject(doc, "events", evtext); /* SPEC 5: what the result was held to */
      if (zf) {
        cJSON *z = cJSON_AddArrayToObject(doc, "oracle_summed_mesh_dims");
        for (int m = 0; m < c->mesh.ndim; m++)
          if (zf >> m & 1) cJSON_AddItemToArray(z, cJSON_CreateNumber(m));
      }
      cJSON_AddNumberToObject(doc, "oracle_ranks_differ", bad);
      cJSON_AddBoolToObject(doc, "expected_checked", have_exp);
      cJSON_AddBoolToObject(doc, "expected_digests_checked", have_exp && !(use_opt && zf_plan));
      cJSON_AddItemToObject(doc, "mismatches", mism.arr);
      mism.arr = NULL;
      cJSON_AddStringToObject(doc, "verdict", rc == CLI_OK ? "pass" : rc == CLI_NOMEM ? "error" : "fail");
    } else {
      printf("%s (%s%s%s%s)\n", rc == CLI_OK ? "PASS" : "FAIL", use_opt ? "opt" : "ref",
             have_exp ? ", fixture expectations checked" : "",
             zf ? ", zero-filled Partial(sum) compared by its sums" : "",
             use_opt && zf_plan && have_exp ? ", digests not compared: opt partitions where PyTorch zero-fills" : "");
    }
  }
done:
  if (doc) {
    char *s = cJSON_PrintUnformatted(doc);
    if (s) {
      printf("%s\n", s);
      free(s);
    } else {
      rc = cli_nomem(C, "--json");
    }
  }
  cJSON_Delete(doc);
  cJSON_Delete(mism.arr);
  rs__expected_free(&ex);
  rs_locals_free(&in);
  rs_locals_free(&out);
  rs_locals_free(&exp);
  cJSON_Delete(root);
  free(p);
  free(diff);
  free(c);
  free(text);
  return rc;
}
