/* main.c - the reshard command: dispatch to the subcommands and the top-level help.
 * Exit status everywhere: 0 pass, 1 a check failed, 2 bad usage or input, 3 out of memory
 * (docs/cli-robustness.md). */
#include <string.h>
#include "cli.h"

static const char *HELP =
    "usage: reshard <command> [options]\n"
    "\n"
    "commands:\n"
    "  layout   each rank's local shape and global offset for a mesh, placements and shape\n"
    "  plan     the step plan (and collectives) that redistributes src placements to dst\n"
    "  run      execute one case JSON with ref (or opt) and check it against the oracle\n"
    "  check    the property campaign: random cases, shrinking, regression fixtures\n"
    "  replay   re-run a saved failing case (exit 1 if it still fails)\n"
    "  gen      print generated cases as JSON lines\n"
    "  p2p      cross-config resharding: P2P plans, runs, layouts and checks of model files\n"
    "  bench    benchmarks: traffic ratio, planning time, throughput (prints a table, writes CSV)\n"
    "  ckpt     distributed checkpoints: save, load, verify, inspect, export, check, torture\n"
    "  tp       tensor-parallel styles: run a TP case, or the TP property campaign (docs/tp.md)\n"
    "  conform  hold another backend (plug-in or process) to every suite (docs/conformance.md)\n"
    "  report merge  add up the --json reports of the shards (--shard K/N) of one campaign\n"
    "  fuzz-planner  fuzz an outside planner (plug-in or exec:CMD) against the contract and reshard's planners\n"
    "\n"
    "examples:\n"
    "  reshard layout --mesh 4x2 --placements S0,S0 --shape 18x2 --json\n"
    "  reshard plan --mesh 2x2x2 --shape 8x8x8 --src S0,S0,S0 --dst R,S0,S0 --json\n"
    "  reshard check --seed 7 --cases 20000\n"
    "\n"
    "reshard <command> --help describes each command.\n"
    "Exit: 0 pass, 1 failure, 2 bad usage or input, 3 out of memory.\n";

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(HELP, stderr);
    return CLI_USAGE;
  }
  const char *cmd = argv[1];
  if (cli_is_help(cmd) || strcmp(cmd, "help") == 0) {
    fputs(HELP, stdout);
    return CLI_OK;
  }
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } cmds[] = {{"layout", cmd_layout}, {"plan", cmd_plan},     {"run", cmd_run},
              {"check", cmd_check},   {"replay", cmd_replay}, {"gen", cmd_gen},
              {"bench", cmd_bench},
              {"ckpt", cmd_ckpt},
              {"tp", cmd_tp},
              {"p2p", cmd_p2p},
              {"conform", cmd_conform},
              {"fuzz-planner", cmd_fuzz_planner},
              {"report", cmd_report},
  };
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (strcmp(cmd, cmds[i].name) == 0) return cmds[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "reshard: unknown command '%s' (see reshard --help)\n", cmd);
  return CLI_USAGE;
}
