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
    "                     [--impl ref|opt] [--transport local|mpi] [--max-ranks N]\n"
    "                     [--max-mesh-dims K] [--max-tensor-dims K] [--max-failures N]\n"
    "                     [--junit F] [--json F] [--regress-dir D] [--quiet]\n"
    "Runs the property campaign (default 20000 cases, seed 1) and prints the rate (cases/s).\n"
    "A failing property is shrunk, saved to the regression dir (default fixtures/regressions)\n"
    "and printed with the command that replays it. Exit 0 pass, 1 a property failed (or, from\n"
    "2000 cases on, a generator feature was never produced: see the feature table).\n"
    "--max-failures N stops after N failing properties (the JSON report's first_failure_case\n"
    "says after how many cases the first one failed).\n"
    "--transport mpi (under mpirun) runs opt with one process per rank against ref.\n";

static const char *HELP_REPLAY =
    "usage: reshard replay FILE [--impl ref|opt] [--transport local|mpi]\n"
    "Re-runs the property named in a saved failing case with what it failed with: the file's\n"
    "\"impl\" and \"transport\" (and, in the case, its planner and cost); the flags override them.\n"
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

int cmd_check(int argc, char **argv) {
  const char *C = "check";
  rs_campaign_opts o;
  rs_campaign_opts_default(&o);
  const char *impl = "ref", *transport = "local", *v;
  int r, have_cases = 0, have_secs = 0;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP_CHECK, stdout);
      return CLI_OK;
    }
    if (cli_flag(argv, i, "--quiet")) { o.quiet = 1; continue; }
    const char *name = argv[i];
    unsigned long long u;
    long long n;
    if ((r = cli_opt(argc, argv, &i, "--seed", &v)) != 0) {
      if (r < 0 || cli_u64(v, &u)) return cli_usage_error(C, "--seed: expected an unsigned integer");
      o.seed = u;
    } else if ((r = cli_opt(argc, argv, &i, "--cases", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, (long long)1 << 40, &n)) return cli_usage_error(C, "--cases: expected a positive integer");
      o.cases = n;
      have_cases = 1;
    } else if ((r = cli_opt(argc, argv, &i, "--seconds", &v)) != 0) {
      char *end;
      double t = r < 0 ? 0 : strtod(v, &end);
      if (r < 0 || *end || !(t > 0)) return cli_usage_error(C, "--seconds: expected a positive number");
      o.seconds = t;
      have_secs = 1;
    } else if ((r = cli_opt(argc, argv, &i, "--planner", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--planner: missing value");
      if (strcmp(v, "greedy") == 0) o.planners = 1;
      else if (strcmp(v, "graph") == 0) o.planners = 2;
      else if (strcmp(v, "both") == 0) o.planners = 3;
      else return cli_usage_error(C, "--planner: '%s', expected greedy, graph or both", v);
    } else if ((r = cli_opt(argc, argv, &i, "--impl", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--impl: missing value");
      impl = v;
    } else if ((r = cli_opt(argc, argv, &i, "--transport", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--transport: missing value");
      transport = v;
    } else if ((r = cli_opt(argc, argv, &i, "--max-ranks", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, RS_MAX_RANKS, &n)) return cli_usage_error(C, "--max-ranks: expected 1..%d", RS_MAX_RANKS);
      o.gen.max_ranks = (int)n;
    } else if ((r = cli_opt(argc, argv, &i, "--max-mesh-dims", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, RS_MAX_MESH_DIMS, &n)) return cli_usage_error(C, "--max-mesh-dims: expected 1..%d", RS_MAX_MESH_DIMS);
      o.gen.max_mesh_dims = (int)n;
    } else if ((r = cli_opt(argc, argv, &i, "--max-tensor-dims", &v)) != 0) {
      if (r < 0 || cli_int(v, 0, RS_MAX_DIMS, &n)) return cli_usage_error(C, "--max-tensor-dims: expected 0..%d", RS_MAX_DIMS);
      o.gen.max_tensor_dims = (int)n;
    } else if ((r = cli_opt(argc, argv, &i, "--max-failures", &v)) != 0) {
      if (r < 0 || cli_int(v, 1, RS_PROP_COUNT, &n)) return cli_usage_error(C, "--max-failures: expected 1..%d", RS_PROP_COUNT);
      o.max_failures = (int)n;
    } else if ((r = cli_opt(argc, argv, &i, "--junit", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--junit: missing file");
      o.junit = v;
    } else if ((r = cli_opt(argc, argv, &i, "--json", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--json: missing file");
      o.json = v;
    } else if ((r = cli_opt(argc, argv, &i, "--regress-dir", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--regress-dir: missing dir");
      o.regress_dir = v;
    } else {
      return cli_usage_error(C, "unknown argument '%s'", name);
    }
  }
  if (have_cases && have_secs) return cli_usage_error(C, "--cases and --seconds: give one");
  if (have_secs) o.cases = 0;
  if ((r = env_open(C, &o.env, impl, transport, &argc, &argv)) != CLI_OK) return r;
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
    return cli_nomem(C, "campaign results");
  }
  rs_status st = rs_campaign_run(&o, res);
  int rc = st != RS_OK ? cli_status_error(C, NULL) : res->failed ? CLI_FAIL : CLI_OK;
  free(res);
  env_close(&o.env);
  return rc;
}

int cmd_replay(int argc, char **argv) {
  const char *C = "replay", *file = NULL, *impl = NULL, *transport = NULL, *v;
  int r;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP_REPLAY, stdout);
      return CLI_OK;
    }
    CLI_OPT(C, "--impl", impl)
    CLI_OPT(C, "--transport", transport)
    if (argv[i][0] == '-' || file) return cli_usage_error(C, "unknown argument '%s'", argv[i]);
    file = argv[i];
  }
  if (!file) return cli_usage_error(C, "FILE: required");
  rs_saved_failure *f = malloc(sizeof *f);
  if (!f) return cli_nomem(C, "saved case");
  if (rs_saved_failure_read(file, f) != RS_OK) {
    free(f);
    return cli_status_error(C, file);
  }
  /* what it failed with, unless a flag says otherwise */
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
