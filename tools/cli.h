/* cli.h - what the reshard subcommands share: flag scanning, building a case from layout flags,
 * usage errors (exit 2) and small JSON printing helpers. */
#ifndef RS_TOOLS_CLI_H
#define RS_TOOLS_CLI_H

#include <stdio.h>
#include "reshard/case.h"

/* Exit codes of every verb (docs/cli-robustness.md): 1 is kept for "a check failed", so running
 * out of memory (or another resource) has a code of its own. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_NOMEM = 3 };
/* A peer stalled or died (the transport's --timeout ran out): its own code, never "bad input". */
enum { CLI_PEER = 4 };

/* An rs_status failure whose message starts with the library's own name for the field (one of the
 * '|'-separated names in lib: "shape '4x': ..." from the shape parser) printed under the user's
 * flag instead, so the field is named once: "reshard layout: --mesh: '4x': ...". An index is kept
 * ("mesh.ranks[1]: ..." as "--ranks[1]: ..."); another message gets the flag in front. Returns
 * CLI_NOMEM for RS_ERR_NOMEM, else CLI_USAGE. */
int cli_flag_error(const char *cmd, const char *flag, const char *lib);
/* Prints "reshard <cmd>: out of memory (...)" and returns CLI_NOMEM. */
int cli_nomem(const char *cmd, const char *what);

/* Prints "reshard <cmd>: <message>" to stderr and returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Same, for an rs_status failure: the message is rs_last_error() prefixed with `what`. Returns
 * CLI_NOMEM when that failure was RS_ERR_NOMEM, else CLI_USAGE. */
int cli_status_error(const char *cmd, const char *what);

/* If argv[*i] is --name (value in argv[*i+1]) or --name=value, sets *val, advances *i and returns
 * 1; returns -1 when the value is missing, 0 when argv[*i] is another argument. */
int cli_opt(int argc, char **argv, int *i, const char *name, const char **val);
/* 1 when argv[i] is the flag --name (no value). */
int cli_flag(char **argv, int i, const char *name);
int cli_is_help(const char *a);
/* In a flag loop (variables argc, argv, i, r, v in scope): take `--name VALUE` into var and
 * continue, or return a usage error when the value is missing. */
#define CLI_OPT(cmd, name, var)                                               \
  if ((r = cli_opt(argc, argv, &i, name, &v)) != 0) {                         \
    if (r < 0) return cli_usage_error(cmd, "%s: missing value", name);        \
    var = v;                                                                  \
    continue;                                                                 \
  }

/* Parse a decimal unsigned (no hex), or a decimal int in [lo, hi]: digits only (no spaces,
 * signs on unsigned, fractions), overflow refused; 0 on success. */
int cli_u64(const char *s, unsigned long long *out);
int cli_int(const char *s, long long lo, long long hi, long long *out);
/* --seconds: digits with an optional fraction, 0 < T <= one week (no nan, inf, sign or exponent);
 * 0 on success. All three are the one checked parser of core/numflag.h. */
int cli_seconds(const char *s, double *out);
int cli_share(const char *s, double *out); /* 0..1 (rs__flag_share) */
#define CLI_SECONDS_EXPECTED "expected a number of seconds, 0 < T <= 604800 (one week)"
/* A directory the command will write into (--scratch, ...): a writable directory, or a missing one
 * whose parent is a writable directory (the command makes it). CLI_OK, or CLI_USAGE after a message
 * naming flag and path. */
int cli_dir_arg(const char *cmd, const char *flag, const char *path);

/* The layout flags that describe a mesh and a tensor. */
typedef struct cli_layout_args {
  const char *mesh, *ranks, *shape, *dtype;
} cli_layout_args;

/* In a flag loop: 1 when argv[*i] was --mesh, --ranks, --shape or --dtype (taken into a, *i
 * advanced), 0 when it is another argument, -1 after printing a usage error (value missing). */
int cli_layout_opt(const char *cmd, int argc, char **argv, int *i, cli_layout_args *a);
/* Build c->mesh and c->tensor from the flags (defaults: dtype F32, shape scalar). */
int cli_build_mesh_tensor(const char *cmd, const cli_layout_args *a, rs_case *c);
/* Parse placements + order (order text may be NULL) into s for case c. */
int cli_build_sharding(const char *cmd, const char *flag_pl, const char *pl, const char *flag_order,
                       const char *order, const rs_case *c, rs_sharding *s);

/* The values of --planner, --cost and --enumeration (NULL when not given: that output is left as it
 * is). --planner takes greedy or graph, and auto too when allow_auto. CLI_OK or a usage error. */
int cli_planner_flags(const char *cmd, const char *planner, int allow_auto, const char *cost,
                      const char *enumeration, rs_planner_kind *pk, rs_cost_model *cm, rs_enumeration *en);

/* The flags the campaign verbs share (check, tp check, p2p check): --seed, --cases (1..2^40),
 * --seconds (> 0; refused as unknown when no_seconds), --junit FILE, --json FILE, --regress-dir DIR.
 * The caller sets the defaults (seed) before its flag loop; cases and seconds stay 0 when not given,
 * the file names NULL. */
/* The runner's flags, the same on every campaign verb (props/runner.h): --jobs N|auto (forked
 * workers; 0 here: not given, 1), --shard K/N (0/0: not given), --case-timeout SEC (seconds one case
 * may run in a worker before it is called hung; 0: the runner's default) and --distribute (MPI ranks
 * share the case range; set only by verbs that support it). */
typedef struct cli_runner_args {
  int jobs, shard_k, shard_n, distribute;
  double case_timeout;
  struct rs_run_dist *dist; /* set by cli_runner_start under --distribute */
} cli_runner_args;
/* In a flag loop: 1 when argv[*i] was one of those flags, 0 when another argument, -1 after a usage
 * error. */
int cli_runner_opt(const char *cmd, int argc, char **argv, int *i, cli_runner_args *a);
/* After the flag loop: --distribute joins the MPI world (a->dist); CLI_OK or the exit status of
 * the error it printed. stop leaves it (call it on every path after a successful start). */
int cli_runner_start(const char *cmd, cli_runner_args *a);
void cli_runner_stop(cli_runner_args *a);
#define CLI_RUNNER_HELP                                                                             \
  "--jobs N|auto runs the cases in N worker processes (auto: the cores this process may use); the\n" \
  "result does not depend on N. --shard K/N runs only cases i with i % N == K-1 (merge the --json\n" \
  "reports with `reshard report merge`). --case-timeout SEC (default 600): a worker on one case\n"    \
  "longer is reported hung and the campaign stops (exit 4).\n"

typedef struct cli_campaign_args {
  unsigned long long seed;
  long long cases;
  double seconds;
  const char *junit, *json, *regress_dir;
  int no_seconds;
  cli_runner_args run;
} cli_campaign_args;
/* In a flag loop: 1 when argv[*i] was one of those flags, 0 when another argument, -1 after a usage
 * error. */
int cli_campaign_opt(const char *cmd, int argc, char **argv, int *i, cli_campaign_args *a);

/* `--timeout SEC` (cli_timeout.c): the transports' progress timeout, seconds in (0, 1e6]. In a
 * flag loop: 1 when argv[*i] was it (set for the process, *i advanced), 0 when another argument,
 * -1 after a usage error. cli_seconds_value: 0 and *out for a plain positive decimal <= max. */
int cli_timeout_opt(const char *cmd, int argc, char **argv, int *i);
int cli_seconds_value(const char *s, double max, double *out);
/* In a flag loop (argc, argv, i, r in scope): take --timeout and continue, or return exit 2. */
#define CLI_TIMEOUT_OPT(cmd)                                   \
  if ((r = cli_timeout_opt(cmd, argc, argv, &i)) != 0) {       \
    if (r < 0) return CLI_USAGE;                               \
    continue;                                                  \
  }

/* JSON: a [a,b,...] list of int64 and a JSON string with escapes. */
void cli_json_ints(FILE *f, const int64_t *v, int n);
void cli_json_str(FILE *f, const char *s);

/* The generator's options (props' rs_gen_opts) as flags, for check and gen. Returns 1 when argv[*i]
 * was one (consumed, *i advanced), 0 when it is another argument, -1 after printing a usage error. */
struct rs_gen_opts;
/* "a,b,c" into a bit mask (name_bit: a name's bit, -1 when unknown); CLI_OK or a usage error. */
int cli_name_list(const char *cmd, const char *flag, const char *v, int (*name_bit)(const char *),
                  uint32_t *mask);
int cli_gen_opt(const char *cmd, int argc, char **argv, int *i, struct rs_gen_opts *g);
extern const char CLI_GEN_HELP[];

int cmd_layout(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_ckpt(int argc, char **argv);
int cmd_tp(int argc, char **argv);
int cmd_p2p(int argc, char **argv);
int cmd_conform(int argc, char **argv);
int cmd_fuzz_planner(int argc, char **argv);
int cmd_report(int argc, char **argv);

#endif
