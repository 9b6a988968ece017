/* cmd_check.c - `reshard check` (the property campaign) and `reshard replay` (one saved failure).
 * Under --transport mpi every process generates the same cases, plays its own mesh rank with opt,
 * and all agree on each outcome; only world rank 0 prints. */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "props/props.h"
#include "core/mutant.h"
#ifdef RS_HAVE_OPT
#include "reshard/opt.h"
#endif

static const char *HELP_CHECK =
    "usage: reshard check [--seed S] [--cases N | --seconds T] [--planner greedy|graph|both]\n"
    "                     [--impl ref|opt] [--transport local|mpi] [generator options]\n"
    "                     [--properties P,P,...] [--max-failures N]\n"
    "                     [--junit F] [--json F] [--report DIR] [--regress-dir D] [--quiet]\n"
    "                     [--jobs N|auto] [--shard K/N] [--case-timeout SEC]\n"
    "Runs the property campaign (default 20000 cases, seed 1) and prints the rate (cases/s).\n"
    "A failing property is shrunk, saved to the regression dir (default fixtures/regressions)\n"
    "and printed with the command that replays it. Exit 0 pass, 1 a property failed (or, from\n"
    "2000 cases on, a generator feature was never produced: see the feature table).\n"
    "--max-failures N stops after N failing properties (the JSON report's first_failure_case\n"
    "says after how many cases the first one failed).\n"
    "--order-share P: percent of Partial cases drawn with `order` values (default 50); the run\n"
    "fails when fewer than 3/5 of that share got them (from 200 Partial cases on).\n"
    "--report DIR writes DIR/check.html (check-opt.html with --impl opt): the result table and\n"
    "each failing case drawn (both layouts as per-rank boxes, differing elements marked).\n"
    "--transport mpi (under mpirun) runs opt with one process per rank against ref.\n"
    "--timeout SEC (default 300): a rank that sees no transfer finish for SEC seconds stops with\n"
    "an error naming the peer it waited for; exit 4 (a stalled or dead peer).\n"
    "--properties runs only the named properties (e.g. boxes: a fast campaign that still\n"
    "judges feature coverage).\n";

static const char *HELP_REPLAY =
    "usage: reshard replay FILE [--impl ref|opt] [--transport local|mpi] [--timeout SEC] [--planner auto|greedy|graph]\n"
    "                           [--cost seed|pytorch] [--enumeration seed|pytorch]\n"
    "Re-runs the property named in a saved failing case with what it failed with: the file's\n"
    "\"impl\" and \"transport\" and, in the case, its planner, cost and enumeration; the flags\n"
    "override them.\n"
    "Under mpirun, a case saved by an MPI campaign replays with one process per rank.\n"
    "Exit 0 passes now, 1 still fails, 2 bad file or flags, 3 out of memory.\n";

/* Opt state for --impl opt; torn down by env_close. */
static int env_open(const char *C, rs_prop_env *env, const char *impl, const char *transport,
                    int *argc, char ***argv) {
  memset(env, 0, sizeof *env);
  int mpi = strcmp(transport, "mpi") == 0;
  if (!mpi && strcmp(transport, "local") != 0)
    return cli_usage_error(C, "--transport: '%s', expected local or mpi", transport);
  if (strcmp(impl, "opt") == 0) env->impl = RS_IMPL_OPT;
  else if (strcmp(impl, "ref") != 0) return cli_usage_error(C, "--impl: '%s', expected ref or opt", impl);
  if (mpi) env->impl = RS_IMPL_OPT; /* MPI processes only make sense for opt */
  if (env->impl == RS_IMPL_REF) return CLI_OK;
#ifdef RS_HAVE_OPT
  rs_world *w = NULL;
  rs_opt *o = NULL;
  if (rs_world_init(mpi ? "mpi" : "local", argc, argv, &w) != RS_OK) return cli_status_error(C, "--transport");
  if (rs_opt_create(&o) != RS_OK) {
    rs_world_finalize(w);
    return cli_status_error(C, "--impl opt");
  }
  env->world = w;
  env->opt = o;
  env->distributed = mpi && !rs_world_is_local(w);
  return CLI_OK;
#else
  (void)argc;
  (void)argv;
  return cli_usage_error(C, "--impl opt / --transport mpi: this build has no opt/ library");
#endif
}

static void env_close(rs_prop_env *env) {
#ifdef RS_HAVE_OPT
  if (env->opt) rs_opt_destroy((rs_opt *)env->opt);
  if (env->world) rs_world_finalize((rs_world *)env->world);
#endif
  env->opt = env->world = NULL;
}

/* A property's bit for --properties (names as in the report table). */
static int prop_bit(const char *name) {
  rs_prop_id id;
  if (rs_prop_parse(name, &id) == RS_OK) return (int)id;
  rs_clear_error();
  return -1;
}

int cmd_check(int argc, char **argv) {
  const char *C = "check";
  rs_campaign_opts o;
  rs_campaign_opts_default(&o);
  const char *impl = "ref", *transport = "local", *v;
  int r;
  cli_campaign_args ca = {.seed = o.seed};
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP_CHECK, stdout);
      fputs(CLI_RUNNER_HELP, stdout);
      fputs(CLI_GEN_HELP, stdout);
      return CLI_OK;
    }
    if (cli_flag(argv, i, "--quiet")) { o.quiet = 1; continue; }
    const char *name = argv[i];
    long long n;
    if ((r = cli_campaign_opt(C, argc, argv, &i, &ca)) != 0) {
      if (r < 0) return CLI_USAGE;
    } else if ((r = cli_opt(argc, argv, &i, "--planner", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--planner: missing value");
      if (strcmp(v, "greedy") == 0) o.planners = 1;
      else if (strcmp(v, "graph") == 0) o.planners = 2;
      else if (strcmp(v, "both") == 0) o.planners = 3;
      else return cli_usage_error(C, "--planner: '%s', expected greedy, graph or both", v);
    } else if ((r = cli_opt(argc, argv, &i, "--properties", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--properties: missing value");
      if (cli_name_list(C, "--properties", v, prop_bit, &o.props) != CLI_OK) return CLI_USAGE;
    } else if ((r = cli_opt(argc, argv, &i, "--impl", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--impl: missing value");
      impl = v;
    } else if ((r = cli_opt(argc, argv, &i, "--report", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--report: missing directory");
      o.report_dir = v;
    } else if ((r = cli_opt(argc, argv, &i, "--transport", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--transport: missing value");
      transport = v;
    } else if ((r = cli_timeout_opt(C, argc, argv, &i)) != 0) {
      if (r < 0) return CLI_USAGE;
    } else if ((r = cli_gen_opt(C, argc, argv, &i, &o.gen)) != 0) {
      if (r < 0) return CLI_USAGE;
    } else if ((r = cli_opt(argc, argv, &i, "--max-failures", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, RS_PROP_COUNT, &n)) return cli_usage_error(C, "--max-failures: expected 1..%d", RS_PROP_COUNT);
      o.max_failures = (int)n;
    } else {
      return cli_usage_error(C, "unknown argument '%s'", name);
    }
  }
  if (ca.cases && ca.seconds > 0) return cli_usage_error(C, "--cases and --seconds: give one");
  o.seed = ca.seed;
  if (ca.cases) o.cases = ca.cases;
  if (ca.seconds > 0) {
    o.seconds = ca.seconds;
    o.cases = 0;
  }
  if (ca.junit) o.junit = ca.junit;
  if (ca.json) o.json = ca.json;
  if (ca.regress_dir) o.regress_dir = ca.regress_dir;
  o.jobs = ca.run.jobs;
  o.shard_k = ca.run.shard_k;
  o.shard_n = ca.run.shard_n;
  o.case_timeout = ca.run.case_timeout;
  if (o.jobs > 1 && strcmp(transport, "mpi") == 0)
    return cli_usage_error(C, "--jobs: one process per rank under --transport mpi (use mpirun's -np, or --jobs 1)");
  if (ca.run.distribute && strcmp(transport, "mpi") == 0)
    return cli_usage_error(C, "--distribute: the ranks of --transport mpi play one case together; give one of the two");
  if ((r = cli_runner_start(C, &ca.run)) != CLI_OK) return r;
  o.dist = ca.run.dist;
  if ((r = env_open(C, &o.env, impl, transport, &argc, &argv)) != CLI_OK) {
    cli_runner_stop(&ca.run);
    return r;
  }
  o.impl = o.env.impl;
#ifdef RS_HAVE_OPT
  if (o.env.distributed) {
    rs_world *w = (rs_world *)o.env.world;
    o.gen.world_size = rs_world_size(w);
    if (o.gen.max_ranks > o.gen.world_size) o.gen.max_ranks = o.gen.world_size;
    o.print = rs_world_rank(w) == 0;
  }
#endif
  rs_campaign_result *res = calloc(1, sizeof *res);
  if (!res) {
    env_close(&o.env);
    cli_runner_stop(&ca.run);
    return cli_nomem(C, "campaign results");
  }
  rs_status st = rs_campaign_run(&o, res);
  int rc = st != RS_OK ? cli_status_error(C, NULL) : res->failed && !res->run.follower ? CLI_FAIL : CLI_OK;
  free(res);
  env_close(&o.env);
  cli_runner_stop(&ca.run);
  return rc;
}

int cmd_replay(int argc, char **argv) {
  const char *C = "replay", *file = NULL, *impl = NULL, *transport = NULL, *v;
  const char *planner = NULL, *cost = NULL, *enumeration = NULL;
  int r;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP_REPLAY, stdout);
      return CLI_OK;
    }
    CLI_OPT(C, "--impl", impl)
    CLI_OPT(C, "--transport", transport)
    CLI_TIMEOUT_OPT(C)
    CLI_OPT(C, "--planner", planner)
    CLI_OPT(C, "--cost", cost)
    CLI_OPT(C, "--enumeration", enumeration)
    if (argv[i][0] == '-' || file) return cli_usage_error(C, "unknown argument '%s'", argv[i]);
    file = argv[i];
  }
  if (!file) return cli_usage_error(C, "FILE: required");
  rs_planner_kind pk = RS_PLANNER_AUTO;
  rs_cost_model cm = RS_COST_SEED;
  rs_enumeration en = RS_ENUM_SEED;
  if ((r = cli_planner_flags(C, planner, 1, cost, enumeration, &pk, &cm, &en)) != CLI_OK) return r;
  rs_saved_failure *f = malloc(sizeof *f);
  if (!f) return cli_nomem(C, "saved case");
  if (rs_saved_failure_read(file, f) != RS_OK) {
    free(f);
    return cli_status_error(C, NULL); /* the message names the file */
  }
  /* what it failed with, unless a flag says otherwise */
  if (f->case_ok && (planner || cost || enumeration)) {
    if (planner) f->c.planner = pk;
    if (cost) f->c.cost = cm;
    if (enumeration) f->c.enumeration = en;
    if (rs_case_validate(&f->c) != RS_OK) { /* e.g. S -> P(sum) outside the pytorch enumeration */
      free(f);
      return cli_status_error(C, "--planner/--cost/--enumeration");
    }
  }
  if (!impl) impl = f->impl == RS_IMPL_OPT ? "opt" : "ref";
  if (RS_MUTANT(236)) impl = "ref"; /* planted: replay drops the saved impl */
  if (!transport) transport = f->transport;
  rs_prop_env env;
  if ((r = env_open(C, &env, impl, transport, &argc, &argv)) != CLI_OK) {
    free(f);
    return r;
  }
  char msg[8192];
  int failed = 0;
  rs_status st = rs_saved_failure_replay(f, &env, &failed, msg, sizeof msg);
  env_close(&env);
  free(f);
  if (st) return cli_status_error(C, file);
  printf("%s\n", msg);
  return failed ? CLI_FAIL : CLI_OK;
}
