/* p2p.h - property testing of cross-config resharding (SPEC 10): the model generator (templates,
 * MoE stacks, random explicit layouts, uneven and empty shards, 0-size parameters, MXFP8
 * parameters, collocated / disjoint / overlapping / idle rank sets), the properties, and the
 * campaign with shrinking and regression fixtures. Uses the props engine's choice stream. */
#ifndef RS_PROPS_P2P_H
#define RS_PROPS_P2P_H

#include "props/props.h"
#include "reshard/p2p.h"

typedef struct rs_p2p_gen_opts {
  int max_ranks; /* ranks one config uses, at most (default 12) */
  int world;     /* > 0: ranks drawn from 0..world-1 (MPI campaigns: the process count) */
  int collocate; /* -1 any (default), 1 src and dst on the same ranks, 0 disjoint where possible */
} rs_p2p_gen_opts;

void rs_p2p_gen_opts_default(rs_p2p_gen_opts *o);
rs_status rs_p2p_gen(rs_choices *ch, const rs_p2p_gen_opts *o, rs_p2p_model *out);

typedef enum rs_p2p_prop {
  RS_P2P_PROP_REF_PLAN = 0, /* ref's plan: every dst element exactly once, legal holders, task ids */
  RS_P2P_PROP_REF_ORACLE,   /* ref plan + ref execute == oracle (MXFP8 included) */
  RS_P2P_PROP_OPT_PLAN,     /* opt's plan: as ref's, deterministic, per-rank plans = the whole plan's */
  RS_P2P_PROP_OPT_LB,       /* opt's traffic == SPEC 10's lower bound */
  RS_P2P_PROP_OPT_ORACLE,   /* opt plan + opt execute over the copy service == oracle */
  RS_P2P_PROP_COUNT
} rs_p2p_prop;

const char *rs_p2p_prop_name(rs_p2p_prop p);

typedef struct rs_p2p_env {
  int impl;       /* RS_IMPL_REF or RS_IMPL_OPT */
  void *world;    /* rs_world* (opt) */
  const char *copy_service; /* NULL: the world's transport */
  int distributed;          /* 1: each process plays its world rank only */
  /* A backend under test (reshard conform): when set, it alone is checked, as the property
   * p2p_opt_oracle's place (the campaign runs only that one). */
  rs_outcome (*backend)(void *ctx, const rs_p2p_model *m, char *msg, size_t cap);
  void *backend_ctx;
} rs_p2p_env;

/* Run one property on one model; RS_FAIL fills msg. */
rs_outcome rs_p2p_prop_run(rs_p2p_prop p, const rs_p2p_env *env, const rs_p2p_model *m, char *msg, size_t cap);

typedef struct rs_p2p_campaign {
  uint64_t seed;
  int64_t cases;
  double seconds;
  rs_p2p_gen_opts gen;
  rs_p2p_env env;
  const char *regress_dir;
  int quiet, print, shrink_runs;
  double shrink_seconds; /* wall-clock cap per shrunk failure (0: none) */
  int save_templates;    /* a saved failure keeps its template form where one gives the model back
                          * (a backend that expands templates itself is replayed as it was run) */
  /* the runner (props/runner.h), as rs_campaign_opts: --jobs N forked workers (1: this process;
   * MPI campaigns keep 1), --shard K/N, the seconds one case may run in a worker before it is
   * called hung (0: the runner's default) */
  int jobs, shard_k, shard_n;
  double case_timeout;
  /* optional: run in each forked worker before its first case / after its last (a process backend
   * starts its own child there) */
  rs_status (*worker_init)(void *ctx, int worker);
  void (*worker_exit)(void *ctx);
  void *worker_ctx;
  struct rs_run_dist *dist; /* --distribute (NULL: no) */
} rs_p2p_campaign;

typedef struct rs_p2p_campaign_result {
  int64_t cases, pass[RS_P2P_PROP_COUNT], fail[RS_P2P_PROP_COUNT], skip[RS_P2P_PROP_COUNT];
  double seconds;
  int failed;
  int64_t caught_at[RS_P2P_PROP_COUNT]; /* 1-based case number of a property's first failure */
  char message[RS_P2P_PROP_COUNT][512];
  char fixture[RS_P2P_PROP_COUNT][512];
  /* the runner's sums: first failing indices; a crashed worker (counted in `failed`, no property's
   * failure); follower: a --distribute rank other than 0, which reports nothing */
  rs_run_result run;
} rs_p2p_campaign_result;

/* Runs the campaign on the runner (props/runner.h): case i is drawn from the seed and i alone, each
 * property's lowest failing index is shrunk here, in the calling process. RS_OK whether or not a
 * property failed (see r->failed); a worker's crash is r->run.crashed (counted in r->failed). */
rs_status rs_p2p_campaign_run(const rs_p2p_campaign *o, rs_p2p_campaign_result *r);

/* The "runner" object of the --json report (props/runner_json.c; `reshard report merge` adds the
 * objects of a campaign's shards up). */
struct cJSON *rs_p2p_runner_json(const rs_p2p_campaign *o, const rs_p2p_campaign_result *r);

/* Reports for CI (p2p_report.c): JSON summary with first_failure_case, and JUnit XML. */
rs_status rs_p2p_report_json(const char *path, const rs_p2p_campaign *o, const rs_p2p_campaign_result *r,
                             const char *impl, const char *transport);
rs_status rs_p2p_report_junit(const char *path, const rs_p2p_campaign_result *r);

#endif
