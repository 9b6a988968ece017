/* cmd_run.c - `reshard run CASE.json`: execute one case with ref (or opt), check it bit for bit
 * against the oracle and, for fixtures, against the "expected" object the file carries. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "cli.h"
#include "reshard/oracle.h"
#include "reshard/ref.h"
#include "core/values.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

static const char *HELP =
    "usage: reshard run CASE.json [--impl ref|opt] [--planner greedy|graph]\n"
    "Executes the case, prints the plan trace and every rank's shape, offset and xxh3 digest,\n"
    "and compares with the oracle. A fixture's \"expected\" object (ranks with local_shape,\n"
    "global_offset, xxh3; trace; collectives counts) is checked too. Exit 0 pass, 1 fail.\n";


static int ints_equal(const cJSON *arr, const int64_t *v, int n) {
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != n) return 0;
  int i = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, arr) {
    if (!cJSON_IsNumber(x) || (int64_t)x->valuedouble != v[i++]) return 0;
  }
  return 1;
}

/* Checks the fixture's "expected" keys; returns the number of mismatches (printed). */
static int check_expected(const cJSON *exp, const rs_case *c, const rs_locals *out,
                          const rs_plan *p, int have_plan, const char *trace) {
  int bad = 0;
  const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(exp, "ranks");
  const cJSON *e;
  cJSON_ArrayForEach(e, ranks) {
    const cJSON *rj = cJSON_GetObjectItemCaseSensitive(e, "rank");
    int pos = cJSON_IsNumber(rj) ? rs_mesh_pos_of_rank(&c->mesh, (int32_t)rj->valuedouble) : -1;
    if (pos < 0) {
      printf("expected: rank entry %s is not a mesh rank\n", cJSON_IsNumber(rj) ? "" : "(no rank)");
      bad++;
      continue;
    }
    int64_t coord[RS_MAX_MESH_DIMS] = {0}, shp[RS_MAX_DIMS], off[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_shape_offset(&c->mesh, &c->dst, &c->tensor, coord, shp, off);
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(e, "local_shape");
    const cJSON *go = cJSON_GetObjectItemCaseSensitive(e, "global_offset");
    const cJSON *xx = cJSON_GetObjectItemCaseSensitive(e, "xxh3");
    int rank = (int)rj->valuedouble;
    if (ls && !ints_equal(ls, shp, c->tensor.ndim)) {
      printf("expected: rank %d local_shape differs\n", rank);
      bad++;
    }
    if (go && !ints_equal(go, off, c->tensor.ndim)) {
      printf("expected: rank %d global_offset differs\n", rank);
      bad++;
    }
    if (xx) {
      char got[17];
      snprintf(got, sizeof got, "%016llx", (unsigned long long)rs_local_digest(&out->r[pos]));
      if (!cJSON_IsString(xx) || strcasecmp(xx->valuestring, got) != 0) {
        printf("expected: rank %d xxh3 %s, got %s\n", rank, cJSON_IsString(xx) ? xx->valuestring : "?", got);
        bad++;
      }
    }
  }
  const cJSON *tj = cJSON_GetObjectItemCaseSensitive(exp, "trace");
  /* PyTorch prints a 1-d greedy no-op plan as just "R"; seed 001's stringify gives "R->R". */
  char want[4096] = "";
  if (cJSON_IsString(tj)) {
    if (c->mesh.ndim == 1 && rs_case_resolve_planner(c) == RS_PLANNER_GREEDY && !strstr(tj->valuestring, "->"))
      snprintf(want, sizeof want, "%s->%s", tj->valuestring, tj->valuestring);
    else
      snprintf(want, sizeof want, "%s", tj->valuestring);
  }
  if (cJSON_IsString(tj) && (!have_plan || strcmp(want, trace) != 0)) {
    printf("expected: trace %s, got %s\n", want, have_plan ? trace : "(no plan)");
    bad++;
  }
  const cJSON *cj = cJSON_GetObjectItemCaseSensitive(exp, "collectives");
  if (cJSON_IsObject(cj)) { /* null: not recorded */
    int count[RS_COLL_COUNT] = {0};
    for (int i = 0; have_plan && i < p->nsteps; i++) {
      rs_collective k;
      /* a step on a mesh dim of size 1 moves nothing (SPEC 6): PyTorch calls no collective */
      if (c->mesh.size[p->step[i].mesh_dim] == 1) continue;
      if (rs_step_collective(&p->step[i], &k) == RS_OK) count[k]++;
    }
    for (int k = 1; k < RS_COLL_COUNT; k++) {
      const cJSON *n = cJSON_GetObjectItemCaseSensitive(cj, rs_collective_name((rs_collective)k));
      int want = cJSON_IsNumber(n) ? (int)n->valuedouble : 0;
      if (want != count[k]) {
        printf("expected: %d %s, plan has %d\n", want, rs_collective_name((rs_collective)k), count[k]);
        bad++;
      }
    }
  }
  return bad;
}

int cmd_run(int argc, char **argv) {
  const char *C = "run";
  const char *file = NULL, *impl = "ref", *planner = NULL, *v;
  int r;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      return CLI_OK;
    }
    if ((r = cli_opt(argc, argv, &i, "--impl", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--impl: missing value");
      impl = v;
      continue;
    }
    if ((r = cli_opt(argc, argv, &i, "--planner", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--planner: missing value");
      planner = v;
      continue;
    }
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
  if (!text) return cli_usage_error(C, "%s: cannot read", file);
  rs_case *c = calloc(1, sizeof *c);
  cJSON *root = cJSON_Parse(text);
  int rc = CLI_USAGE;
  rs_locals in = {0}, out = {0}, exp = {0};
  rs_diff *diff = calloc(1, sizeof *diff);
  if (!c || !diff) goto done;
  if (rs_case_from_json(text, c) != RS_OK) {
    rc = cli_status_error(C, file);
    goto done;
  }
  if (planner) {
    if (rs_planner_parse(planner, &c->planner) != RS_OK) {
      rc = cli_usage_error(C, "--planner: '%s', expected greedy or graph", planner);
      goto done;
    }
  }
  rc = CLI_FAIL;
  rs_plan p;
  int have_plan = rs_ref_plan(c, &p) == RS_OK;
  char trace[4096] = "(no plan)";
  if (have_plan) rs_plan_trace(&c->mesh, &c->src, c->tensor.ndim, &p, trace, sizeof trace);
  else snprintf(trace, sizeof trace, "(no plan: %s)", rs_last_error());
  char s1[256], s2[256];
  rs_format_sharding(&c->src, s1, sizeof s1);
  rs_format_sharding(&c->dst, s2, sizeof s2);
  printf("case %s: %s %s -> %s, %s planner\n", c->name[0] ? c->name : file, rs_dtype_name(c->tensor.dtype),
         s1, s2, rs_planner_name(rs_case_resolve_planner(c)));
  printf("plan: %s\n", trace);
  if (rs_make_source(c, &in) != RS_OK) {
    printf("FAIL: rs_make_source: %s\n", rs_last_error());
    goto done;
  }
  rs_status st;
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
    st = have_plan ? rs_ref_execute(c, &p, &in, &out) : RS_ERR_NOPATH;
  }
  if (st != RS_OK) {
    printf("FAIL: %s: %s\n", use_opt ? "opt" : "ref", rs_last_error());
    goto done;
  }
  /* SPEC 5: ref's result is its plan's event sequence, opt's own schedule the canonical one */
  rs_events ev;
  if (use_opt || !have_plan) rs_events_canonical(&c->mesh, &c->src, &c->dst, &ev);
  else rs_events_from_plan(&c->mesh, &p, &ev);
  if (rs_oracle_expected_events(c, &c->dst, &ev, &exp) != RS_OK) {
    printf("FAIL: oracle: %s\n", rs_last_error());
    goto done;
  }
  {
    static const char *const VALUES[] = {"bits", "exact", "order"};
    char evtext[512];
    rs_events_format(&ev, evtext, sizeof evtext);
    printf("values: %s; events: %s\n", (unsigned)c->values < 3 ? VALUES[c->values] : "?", evtext);
  }
  printf("%6s  %-18s %-18s %s\n", "rank", "local_shape", "global_offset", "xxh3");
  for (int pos = 0; pos < c->mesh.nranks; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS] = {0}, shp[RS_MAX_DIMS], off[RS_MAX_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_shape_offset(&c->mesh, &c->dst, &c->tensor, coord, shp, off);
    char b1[96], b2[96];
    int n = snprintf(b1, sizeof b1, "[");
    for (int d = 0; d < c->tensor.ndim; d++) n += snprintf(b1 + n, sizeof b1 - n, "%s%lld", d ? "," : "", (long long)out.r[pos].shape[d]);
    snprintf(b1 + n, sizeof b1 - n, "]");
    n = snprintf(b2, sizeof b2, "[");
    for (int d = 0; d < c->tensor.ndim; d++) n += snprintf(b2 + n, sizeof b2 - n, "%s%lld", d ? "," : "", (long long)off[d]);
    snprintf(b2 + n, sizeof b2 - n, "]");
    printf("%6d  %-18s %-18s %016llx\n", (int)c->mesh.ranks[pos], b1, b2,
           (unsigned long long)rs_local_digest(&out.r[pos]));
  }
  int bad = rs_oracle_compare(c, &c->dst, &exp, &out, diff);
  if (bad) printf("oracle: %d rank(s) differ\n%s\n", bad, diff->text);
  const cJSON *ej = root ? cJSON_GetObjectItemCaseSensitive(root, "expected") : NULL;
  int ebad = ej ? check_expected(ej, c, &out, &p, have_plan, trace) : 0;
  rc = bad || ebad ? CLI_FAIL : CLI_OK;
  printf("%s (%s%s)\n", rc == CLI_OK ? "PASS" : "FAIL", use_opt ? "opt" : "ref",
         ej ? ", fixture expectations checked" : "");
done:
  rs_locals_free(&in);
  rs_locals_free(&out);
  rs_locals_free(&exp);
  cJSON_Delete(root);
  free(diff);
  free(c);
  free(text);
  return rc;
}
