/* cmd_plan.c - `reshard plan`: the step plan ref's planners produce for src -> dst, with each
 * step's collective and the trace in PyTorch's notation. */
#include <string.h>
#include "cli.h"
#include "core/mutant.h"
#include "reshard/ref.h"

static const char *HELP =
    "usage: reshard plan --mesh 2x2x2 --shape 8x8x8 --src S0,S0,S0 --dst R,S0,S0\n"
    "                    [--src-order 0:1,0] [--dst-order ...] [--ranks ...] [--dtype F32]\n"
    "                    [--planner greedy|graph] [--cost seed|pytorch] [--json]\n"
    "                    [--enumeration seed|pytorch]\n"
    "Without --planner the graph planner runs when either side has a non-default shard order,\n"
    "else the greedy one (as PyTorch decides). --enumeration pytorch adds current PyTorch's\n"
    "transitions (R -> P(avg|min|max), Shard -> P(sum) by zero-fill, no step for an equal\n"
    "1-d greedy redistribute). A plan needs no test values, so a dtype too narrow for exact\n"
    "values (I8 P(sum) over 32 ranks) plans here; run and check refuse it.\n";

int cmd_plan(int argc, char **argv) {
  const char *C = "plan";
  cli_layout_args a = {0};
  const char *src = NULL, *dst = NULL, *so = NULL, *dso = NULL, *planner = NULL, *cost = NULL, *enumeration = NULL, *v;
  int json = 0, r;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      return CLI_OK;
    }
    if (cli_flag(argv, i, "--json")) { json = 1; continue; }
    if ((r = cli_layout_opt(C, argc, argv, &i, &a)) != 0) {
      if (r < 0) return CLI_USAGE;
      continue;
    }
    CLI_OPT(C, "--src", src)
    CLI_OPT(C, "--dst", dst)
    CLI_OPT(C, "--src-order", so)
    CLI_OPT(C, "--dst-order", dso)
    CLI_OPT(C, "--planner", planner)
    CLI_OPT(C, "--cost", cost)
    CLI_OPT(C, "--enumeration", enumeration)
    return cli_usage_error(C, "unknown argument '%s'", argv[i]);
  }
  rs_case c;
  memset(&c, 0, sizeof c);
  if ((r = cli_build_mesh_tensor(C, &a, &c)) != CLI_OK) return r;
  if ((r = cli_build_sharding(C, "--src", src, "--src-order", so, &c, &c.src)) != CLI_OK) return r;
  if ((r = cli_build_sharding(C, "--dst", dst, "--dst-order", dso, &c, &c.dst)) != CLI_OK) return r;
  c.planner = RS_PLANNER_AUTO;
  c.cost = RS_COST_SEED;
  if ((r = cli_planner_flags(C, planner, 0, cost, enumeration, &c.planner, &c.cost, &c.enumeration)) != CLI_OK)
    return r;
  c.values = rs_case_default_values(&c);
  /* a plan needs no values: only commands that fill them refuse a dtype too narrow for them */
  if ((RS_MUTANT(659) ? rs_case_validate(&c) : rs_case_validate_layout(&c)) != RS_OK) /* 659: values too */
    return cli_status_error(C, "--src/--dst");
  rs_planner_kind k = rs_case_resolve_planner(&c);
  c.planner = k;
  rs_plan p;
  if (rs_ref_plan(&c, &p) != RS_OK) return cli_status_error(C, "planner");
  char trace[4096];
  if (rs_plan_trace(&c.mesh, &c.src, c.tensor.ndim, &p, trace, sizeof trace) != RS_OK)
    return cli_status_error(C, "trace");
  if (json) {
    /* the key appears only for the non-default enumeration: the seed form stays as it was */
    printf("{\"planner\":\"%s\",%s\"steps\":[", rs_planner_name(k),
           c.enumeration == RS_ENUM_PYTORCH ? "\"enumeration\":\"pytorch\"," : "");
  } else {
    printf("planner %s%s%s: %d step%s\n", rs_planner_name(k),
           k == RS_PLANNER_GRAPH ? (c.cost == RS_COST_PYTORCH ? " (cost pytorch)" : " (cost seed)") : "",
           c.enumeration == RS_ENUM_PYTORCH ? " (enumeration pytorch)" : "", p.nsteps, p.nsteps == 1 ? "" : "s");
  }
  for (int i = 0; i < p.nsteps; i++) {
    char f[32], t[32];
    rs_collective coll = RS_COLL_NONE;
    if (rs_step_collective_enum(&p.step[i], p.enumeration, &coll) != RS_OK) return cli_status_error(C, "plan step");
    rs_format_placement(p.step[i].from, f, sizeof f);
    rs_format_placement(p.step[i].to, t, sizeof t);
    if (json) {
      printf("%s{\"mesh_dim\":%d,\"from\":", i ? "," : "", p.step[i].mesh_dim);
      cli_json_str(stdout, f);
      printf(",\"to\":");
      cli_json_str(stdout, t);
      printf(",\"collective\":");
      cli_json_str(stdout, rs_collective_name(coll));
      printf("}");
    } else {
      printf("  %2d. mesh dim %d: %-8s -> %-8s %s\n", i + 1, p.step[i].mesh_dim, f, t,
             rs_collective_name(coll));
    }
  }
  if (json) {
    printf("],\"trace\":");
    cli_json_str(stdout, trace);
    printf("}\n");
  } else {
    printf("trace: %s\n", trace);
  }
  return CLI_OK;
}
