/* cmd_fuzz_planner.c - `reshard fuzz-planner`: fuzz a resharding planner from outside (a plug-in
 * library of reshard/planner.h or a child process over the JSON-lines protocol) against the
 * contract, the oracle and reshard's own planners (conform/planner_fuzz.h). */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "conform/planner_fuzz.h"

static const char *HELP =
    "usage: reshard fuzz-planner --planner LIB.so|exec:'CMD ARGS' [--kind redistribute|p2p]\n"
    "                            [--seed S] [--cases N | --seconds T]\n"
    "                            [--objective steps|seed-cost|pytorch-cost|traffic|max-sender]\n"
    "                            [--enumeration seed|pytorch] [--timeout SECONDS] [--worst K]\n"
    "                            [--max-decline-share P] [--shrink-runs N] [--shrink-seconds T]\n"
    "                            [--json F] [--junit F] [--regress-dir D] [--quiet] [generator options]\n"
    "                            [--jobs N|auto] [--shard K/N] [--case-timeout SEC]\n"
    "       reshard fuzz-planner --planner ... [--kind ..] [--enumeration ..] --case FILE\n"
    "Draws cases with the property generators, asks the planner for a plan, checks it (legality,\n"
    "SPEC 6 / SPEC 10), executes it with ref and compares every rank's bytes with the oracle, then\n"
    "scores it (wins/ties/losses per objective) against reshard's greedy and graph planners (both\n"
    "cost models) - for P2P against ref's and opt's planners - and the traffic lower bound. The\n"
    "first failure of each kind (error, illegal, wrong) is shrunk, saved under --regress-dir\n"
    "(default fuzz-planner-failures) and printed with the command that replays it (--case FILE).\n"
    "--objective picks whose worst cases are listed (default seed-cost; traffic for p2p).\n"
    "--enumeration pytorch checks plans against current PyTorch's transitions (SPEC 7).\n"
    "--timeout bounds each request to an exec planner (default 10 s).\n"
    "--max-decline-share P fails a planner that declines more than the share P (0..1, default 0.5)\n"
    "of the cases; a run that checked no plan at all fails whatever P says.\n"
    "--shrink-runs N: attempts per shrunk failure (default 2000; an exec planner 300);\n"
    "--shrink-seconds T: wall-clock cap per shrunk failure (default 120; a hanging step still\n"
    "takes its --timeout). A budget that ran out is said on the FAIL line and in the JSON.\n"
    "Redistribute runs of 1,000 cases or more also fail when a feature of the generator fell\n"
    "under its minimum count (the feature table of reshard check; docs/harness.md).\n"
    "--jobs N: an exec planner gets one child per worker (each dies with its worker); a planner\n"
    "whose hello says \"max_instances\": k runs in at most k workers (docs/conformance.md).\n"
    "The --json report's \"runner\" object holds the failure kinds, outcomes, declines, the score\n"
    "against the best planner and the feature table; `reshard report merge` judges the shards'\n"
    "sums (the decline share and \"checked something\" are share gates).\n"
    "Exit: 0 every plan legal and right, 1 a failure (or a crashed worker), 2 bad usage, 3 out of\n"
    "memory, 4 a worker hung on one case past --case-timeout.\n";

int cmd_fuzz_planner(int argc, char **argv) {
  const char *C = "fuzz-planner";
  rs_pf_opts o;
  rs_pf_opts_default(&o);
  cli_campaign_args ca = {0};
  ca.seed = o.seed;
  const char *planner = NULL, *kind = NULL, *objective = NULL, *enumeration = NULL, *timeout = NULL,
             *worst = NULL, *case_file = NULL, *decline = NULL, *shrink = NULL, *shrink_sec = NULL, *v;
  int r;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      fputs(CLI_RUNNER_HELP, stdout);
      fputs(CLI_GEN_HELP, stdout);
      return CLI_OK;
    }
    if (cli_flag(argv, i, "--quiet")) { o.quiet = 1; continue; }
    if ((r = cli_campaign_opt(C, argc, argv, &i, &ca)) != 0) {
      if (r < 0) return CLI_USAGE;
      continue;
    }
    if ((r = cli_gen_opt(C, argc, argv, &i, &o.gen)) != 0) {
      if (r < 0) return CLI_USAGE;
      continue;
    }
    CLI_OPT(C, "--planner", planner)
    CLI_OPT(C, "--kind", kind)
    CLI_OPT(C, "--objective", objective)
    CLI_OPT(C, "--enumeration", enumeration)
    CLI_OPT(C, "--timeout", timeout)
    CLI_OPT(C, "--worst", worst)
    CLI_OPT(C, "--case", case_file)
    CLI_OPT(C, "--max-decline-share", decline)
    CLI_OPT(C, "--shrink-runs", shrink)
    CLI_OPT(C, "--shrink-seconds", shrink_sec)
    return cli_usage_error(C, "unknown argument '%s'", argv[i]);
  }
  if (!planner) return cli_usage_error(C, "--planner: required (a plug-in library or exec:'CMD')");
  o.planner = planner;
  if (kind && strcmp(kind, "p2p") == 0) o.kind = RS_PF_P2P;
  else if (kind && strcmp(kind, "redistribute") != 0)
    return cli_usage_error(C, "--kind: '%s' is not redistribute or p2p", kind);
  o.objective = o.kind == RS_PF_P2P ? RS_PF_P2P_TRAFFIC : RS_PF_SEED_COST;
  if (objective && (o.objective = rs_pf_objective_parse(o.kind, objective)) < 0)
    return cli_usage_error(C, "--objective: '%s' is not %s", objective,
                           o.kind == RS_PF_P2P ? "traffic or max-sender" : "steps, seed-cost, pytorch-cost or traffic");
  if (enumeration && rs_enumeration_parse(enumeration, &o.enumeration) != RS_OK)
    return cli_usage_error(C, "--enumeration: '%s' is not seed or pytorch", enumeration);
  if (timeout && cli_seconds_value(timeout, 3600, &o.timeout))
    return cli_usage_error(C, "--timeout: expected seconds in (0, 3600]");
  if (worst) {
    long long k;
    if (cli_int(worst, 0, RS_PF_WORST, &k)) return cli_usage_error(C, "--worst: expected 0..%d", RS_PF_WORST);
    o.worst = (int)k;
  }
  if (decline && cli_share(decline, &o.max_decline_share))
    return cli_usage_error(C, "--max-decline-share: expected a share 0..1 (e.g. 0.25)");
  {
    long long k = 0;
    if (shrink && cli_int(shrink, 0, 1000000, &k)) return cli_usage_error(C, "--shrink-runs: expected 0..1000000");
    o.shrink_runs = k ? (int)k : strncmp(planner, "exec:", 5) == 0 ? 300 : 2000;
  }
  if (shrink_sec && cli_seconds(shrink_sec, &o.shrink_seconds))
    return cli_usage_error(C, "--shrink-seconds: %s", CLI_SECONDS_EXPECTED);
  if (ca.cases && ca.seconds > 0) return cli_usage_error(C, "--cases and --seconds: give one of them");
  o.seed = ca.seed;
  o.cases = ca.seconds > 0 ? 0 : ca.cases ? ca.cases : o.cases;
  o.seconds = ca.seconds;
  o.json = ca.json;
  o.junit = ca.junit;
  if (ca.regress_dir) o.regress_dir = ca.regress_dir;
  o.jobs = ca.run.jobs;
  o.shard_k = ca.run.shard_k;
  o.shard_n = ca.run.shard_n;
  o.case_timeout = ca.run.case_timeout;
  if (case_file && (o.jobs > 1 || o.shard_n > 1 || ca.run.distribute))
    return cli_usage_error(C, "--case replays one saved case: --jobs, --shard and --distribute are for campaigns");

  if ((r = cli_runner_start(C, &ca.run)) != CLI_OK) return r;
  o.dist = ca.run.dist;
  rs_planner_host *h;
  if (rs_planner_host_open(planner, o.timeout, &h) != RS_OK) {
    r = cli_status_error(C, "");
    cli_runner_stop(&ca.run);
    return r;
  }
  int rc = CLI_OK;
  if (case_file) {
    char msg[8192];
    int failed = 0;
    if (rs_pf_replay(h, &o, case_file, &failed, msg, sizeof msg) != RS_OK) rc = cli_status_error(C, "--case");
    else {
      printf("%s %s: %s\n", failed == 1 ? "FAIL" : failed ? "DECLINED" : "PASS", case_file, msg);
      rc = failed == 1 ? CLI_FAIL : CLI_OK;
    }
    rs_planner_host_close(h);
    cli_runner_stop(&ca.run);
    return rc;
  }
  rs_pf_result *res = calloc(1, sizeof *res);
  if (!res) {
    rs_planner_host_close(h);
    cli_runner_stop(&ca.run);
    return cli_nomem(C, "result");
  }
  if (rs_pf_run(h, &o, res) != RS_OK) {
    rc = cli_status_error(C, "");
  } else if (res->run.follower) {
    rc = CLI_OK; /* a --distribute rank other than 0: rank 0 reports (props/runner.h) */
  } else {
    rs_pf_print(stdout, h, &o, res);
    if (o.json && rs_pf_json(o.json, h, &o, res) != RS_OK) rc = cli_status_error(C, "");
    if (rc == CLI_OK && o.junit && rs_pf_junit(o.junit, &o, res) != RS_OK) rc = cli_status_error(C, "");
    if (rc == CLI_OK && res->failed) rc = CLI_FAIL;
  }
  free(res);
  rs_planner_host_close(h);
  cli_runner_stop(&ca.run);
  return rc;
}
