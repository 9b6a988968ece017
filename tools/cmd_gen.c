/* cmd_gen.c - `reshard gen`: generated cases as JSON lines, the same cases `reshard check` runs
 * for the same seed (the PyTorch recorder replays them in real DTensor). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "props/props.h"
#include "core/values.h"

static const char *HELP =
    "usage: reshard gen --seed S --cases N [--enumeration both|seed|pytorch] [generator options]\n"
    "Prints N generated cases, one JSON object per line (case i is case i of reshard check\n"
    "with the same seed and generator options). --enumeration: both (default, check's cases: 1 in\n"
    "4 on the pytorch enumeration), pytorch (every case: the cases of fuzz-planner --enumeration\n"
    "pytorch) or seed (none: fuzz-planner's default).\n";

int cmd_gen(int argc, char **argv) {
  const char *C = "gen", *v;
  unsigned long long seed = 1;
  long long cases = 10;
  rs_gen_opts g;
  rs_gen_opts_default(&g);
  g.enumerations = RS_GEN_ENUM_BOTH; /* the cases of `reshard check` */
  int r;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      fputs(CLI_GEN_HELP, stdout);
      return CLI_OK;
    }
    if ((r = cli_opt(argc, argv, &i, "--seed", &v)) != 0) {
      if (r < 0 || cli_u64(v, &seed)) return cli_usage_error(C, "--seed: expected decimal digits (0 .. 18446744073709551615)");
    } else if ((r = cli_opt(argc, argv, &i, "--cases", &v)) != 0) {
      if (r < 0 || cli_int(v, 0, (long long)1 << 40, &cases)) return cli_usage_error(C, "--cases: expected a count");
    } else if ((r = cli_opt(argc, argv, &i, "--enumeration", &v)) != 0) {
      if (r < 0) return cli_usage_error(C, "--enumeration: missing value");
      if (!strcmp(v, "both")) g.enumerations = RS_GEN_ENUM_BOTH;
      else if (!strcmp(v, "pytorch")) g.enumerations = RS_GEN_ENUM_PYTORCH;
      else if (!strcmp(v, "seed")) g.enumerations = RS_GEN_ENUM_SEED;
      else return cli_usage_error(C, "--enumeration: '%s' is not both, seed or pytorch", v);
    } else if ((r = cli_gen_opt(C, argc, argv, &i, &g)) != 0) {
      if (r < 0) return CLI_USAGE;
    } else {
      return cli_usage_error(C, "unknown argument '%s'", argv[i]);
    }
  }
  rs_case *c = malloc(sizeof *c);
  if (!c) return cli_nomem(C, "case");
  int rc = CLI_OK;
  for (long long i = 0; i < cases; i++) {
    rs_choices ch;
    rs_choices_seed(&ch, rs_hash3(seed, (uint64_t)i, 0));
    rs_status st = rs_gen_case(&ch, &g, c);
    rs_choices_free(&ch);
    if (st) {
      rc = cli_status_error(C, "generator");
      break;
    }
    snprintf(c->name, sizeof c->name, "gen-%llu-%lld", seed, i);
    char *j = rs_case_to_json(c);
    cJSON *root = j ? cJSON_Parse(j) : NULL;
    char *line = root ? cJSON_PrintUnformatted(root) : NULL;
    if (line) puts(line);
    free(line);
    cJSON_Delete(root);
    free(j);
    if (!line) {
      rc = cli_status_error(C, "rs_case_to_json");
      break;
    }
  }
  free(c);
  return rc;
}
