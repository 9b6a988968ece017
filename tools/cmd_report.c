/* cmd_report.c - `reshard report merge`: the --json reports of the shards of one campaign (--shard
 * K/N, run on N machines or CI jobs) added up into one report, judged again on the sums (props/
 * runner_json.c). */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "props/runner.h"

static const char *HELP_REPORT =
    "usage: reshard report merge A.json B.json ... [--json OUT] [--junit OUT] [--report DIR]\n"
    "Adds up the --json reports of the shards of one campaign (the same verb, seed and --cases, run\n"
    "with --shard 1/N ... N/N, each shard given once) into one: counts of every property, feature\n"
    "and counter summed; each property's first failure the one at the lowest case index (the same\n"
    "shrunk case and fixture an unsharded run reports); the feature minimums and share gates judged\n"
    "again on the sums. Prints the merged summary; --json writes the merged \"runner\" object,\n"
    "--junit one testcase per property, feature coverage and gate, --report DIR DIR/merged.html.\n"
    "Exit 0 the merged campaign passed, 1 it failed, 2 a report is missing, unreadable, of another\n"
    "campaign or a shard is missing or given twice.\n";

int cmd_report(int argc, char **argv) {
  const char *C = "report merge", *json = NULL, *junit = NULL, *dir = NULL;
  if (argc < 2 || cli_is_help(argv[1])) {
    fputs(HELP_REPORT, argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  if (strcmp(argv[1], "merge") != 0) return cli_usage_error("report", "unknown subcommand '%s' (expected merge)", argv[1]);
  const char **files = calloc((size_t)argc, sizeof *files);
  if (!files) return cli_nomem(C, "arguments");
  int n = 0, r;
  for (int i = 2; i < argc; i++) {
    const char *v;
    if (cli_is_help(argv[i])) {
      free(files);
      fputs(HELP_REPORT, stdout);
      return CLI_OK;
    }
    if ((r = cli_opt(argc, argv, &i, "--json", &v)) != 0) {
      if (r < 0) return free(files), cli_usage_error(C, "--json: missing file");
      json = v;
    } else if ((r = cli_opt(argc, argv, &i, "--junit", &v)) != 0) {
      if (r < 0) return free(files), cli_usage_error(C, "--junit: missing file");
      junit = v;
    } else if ((r = cli_opt(argc, argv, &i, "--report", &v)) != 0) {
      if (r < 0) return free(files), cli_usage_error(C, "--report: missing directory");
      dir = v;
    } else if (argv[i][0] == '-') {
      free(files);
      return cli_usage_error(C, "unknown argument '%s'", argv[i]);
    } else {
      files[n++] = argv[i];
    }
  }
  if (!n) {
    free(files);
    return cli_usage_error(C, "no reports given");
  }
  int failed = 0;
  rs_status st = rs_run_merge(files, n, json, junit, dir, stdout, &failed);
  free(files);
  if (st != RS_OK) return cli_status_error(C, NULL);
  return failed ? CLI_FAIL : CLI_OK;
}
