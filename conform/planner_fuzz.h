/* planner_fuzz.h - internal to conform/: `reshard fuzz-planner`. Cases come from props' generators
 * (one choice stream per case); each plan of the planner under test is checked for legality
 * (SPEC 6, props' plan-legality check), executed by ref and compared bit for bit with the oracle,
 * then scored against reshard's own planners and SPEC 7's traffic lower bound. The first failure of
 * each kind is shrunk (props' stream shrinker), saved, and reported with its replay command. P2P
 * planners (SPEC 10) are checked for exact cover, legal senders and unique task ids, executed by
 * ref against the oracle and scored against ref's and opt's P2P planners and the lower bound. */
#ifndef RS_CONFORM_PLANNER_FUZZ_H
#define RS_CONFORM_PLANNER_FUZZ_H

#include <stdio.h>
#include "conform/planner_host.h"
#include "props/p2p.h"
#include "props/props.h"
#include "props/runner.h"

typedef enum rs_pf_kind { RS_PF_REDISTRIBUTE = 0, RS_PF_P2P = 1 } rs_pf_kind;

/* Objectives (lower is better). Redistribute: steps, seed-cost, pytorch-cost, traffic. P2P: traffic
 * (bytes sent between ranks) and max-sender (the most bytes one rank sends). */
enum { RS_PF_STEPS = 0, RS_PF_SEED_COST, RS_PF_PYTORCH_COST, RS_PF_TRAFFIC, RS_PF_NOBJ };
enum { RS_PF_P2P_TRAFFIC = 0, RS_PF_P2P_MAX_SENDER = 1, RS_PF_P2P_NOBJ = 2 };
/* Baselines: redistribute greedy, graph (seed cost), graph (pytorch cost); P2P ref, opt. The last
 * column of the score table is the best of them per case. */
#define RS_PF_MAX_BASE 4

/* What went wrong with a plan. */
typedef enum rs_pf_fail {
  RS_PF_ERROR = 0, /* the planner failed (its error, a crash, a timeout, garbage) */
  RS_PF_ILLEGAL,   /* a step breaks SPEC 6 (redistribute) / a transfer breaks SPEC 10's rules (P2P) */
  RS_PF_WRONG,     /* legal steps that end elsewhere, or bytes that differ from the oracle */
  RS_PF_NFAIL
} rs_pf_fail;

const char *rs_pf_fail_name(rs_pf_fail f);
const char *rs_pf_objective_name(rs_pf_kind k, int obj);
int rs_pf_objective_parse(rs_pf_kind k, const char *name); /* -1 when unknown */
int rs_pf_nobj(rs_pf_kind k);
int rs_pf_nbase(rs_pf_kind k); /* baselines, without the "best" column */
const char *rs_pf_base_name(rs_pf_kind k, int b);

typedef struct rs_pf_opts {
  const char *planner;  /* the --planner spec (for replay commands) */
  double timeout;       /* seconds per request of an exec planner */
  rs_pf_kind kind;
  uint64_t seed;
  int64_t cases;        /* 0: run for `seconds` */
  double seconds;
  int objective;        /* whose worst cases are listed */
  rs_enumeration enumeration;
  rs_gen_opts gen;
  rs_p2p_gen_opts p2p;
  const char *json, *junit, *regress_dir;
  int quiet, shrink_runs, worst;
  /* a planner declining more than this share of the cases fails (--max-decline-share, default
   * RS_PF_MAX_DECLINE_SHARE); >= 1: never */
  double max_decline_share;
  double shrink_seconds; /* --shrink-seconds: the time all shrinking of one run may take (0: none) */
  /* the runner (props/runner.h): --jobs N forked workers (1: this process; an exec planner's worker
   * starts its own child, at most the planner's max_instances workers), --shard K/N, the seconds one
   * case may run in a worker before it is called hung, --distribute; the hooks run in each worker
   * after the planner's own start and before its stop */
  int jobs, shard_k, shard_n;
  double case_timeout;
  rs_status (*worker_init)(void *ctx, int worker);
  void (*worker_exit)(void *ctx);
  void *worker_ctx;
  struct rs_run_dist *dist;
} rs_pf_opts;

#define RS_PF_MAX_DECLINE_SHARE 0.5
#define RS_PF_SHRINK_SECONDS 120.0
/* fuzz-planner judges feature coverage from this many cases (its default case count) */
#define RS_PF_FEATURE_MIN_CASES 1000

void rs_pf_opts_default(rs_pf_opts *o);

#define RS_PF_WORST 5
typedef struct rs_pf_worst {
  int64_t case_no; /* 1-based */
  double mine, best, excess;
  char layout[320];
  char mine_trace[320], best_trace[320];
} rs_pf_worst;

typedef struct rs_pf_result {
  int64_t cases, passed, declined, skipped, failed_cases;
  int64_t fail[RS_PF_NFAIL];
  int64_t first_failure_case;
  char message[RS_PF_NFAIL][1024];
  char fixture[RS_PF_NFAIL][512];
  int shrink_lost[RS_PF_NFAIL];
  int shrink_runs[RS_PF_NFAIL];  /* predicate runs the shrinker took */
  int shrink_out[RS_PF_NFAIL];   /* RS_SHRINK_RUNS_OUT / RS_SHRINK_TIME_OUT: the budget ran out */
  /* redistribute: feature coverage of the drawn cases (props' table and gate, as `reshard check`) */
  int64_t feature[RS_FEATURES_MAX], feature_min[RS_FEATURES_MAX];
  int feature_required[RS_FEATURES_MAX];
  int features_missing;          /* features under their minimum count (rs_feature_gate) */
  int nothing_checked;           /* no plan was checked (every case declined or not generated) */
  int decline_over;              /* declined > max_decline_share of the cases */
  /* score table: [objective][baseline column, the last = best of them] */
  int64_t win[RS_PF_NOBJ][RS_PF_MAX_BASE], tie[RS_PF_NOBJ][RS_PF_MAX_BASE], loss[RS_PF_NOBJ][RS_PF_MAX_BASE];
  double sum_mine[RS_PF_NOBJ], sum_best[RS_PF_NOBJ];
  int64_t scored[RS_PF_NOBJ];
  /* traffic against SPEC 7's / SPEC 10's lower bound (copy-only cases) */
  int64_t lb_cases, at_lb, lb_inf;
  double lb_ratio_sum, lb_ratio_max;
  rs_pf_worst worst[RS_PF_NOBJ][RS_PF_WORST];
  int nworst[RS_PF_NOBJ];
  double seconds;
  int failed; /* failure kinds seen, plus 1 each for coverage, nothing checked, too many declines, a
                 crashed worker */
  int jobs;   /* workers that ran (after the planner's max_instances) */
  rs_run_result run; /* the runner's sums (the "runner" object of --json; run.follower: say nothing) */
} rs_pf_result;

/* The campaign on the runner (props/runner.h): case i is drawn from rs_hash3(seed, i, 0) whatever
 * the worker count; the failure kinds are the runner's properties, the outcomes, declines and the
 * score against the best baseline its counters, the decline share and "checked something" its
 * share gates, redistribute's feature table its features, so `reshard report merge` judges the
 * shards' sums as the unsharded run. The first failure of each kind (its lowest index) is shrunk
 * here afterwards. RS_OK whether or not the planner failed (r->failed; a crashed worker is one).
 * Errors: the planner could not be used at all, out of memory, a hung worker (RS_ERR_TIMEOUT). */
rs_status rs_pf_run(rs_planner_host *h, const rs_pf_opts *o, rs_pf_result *r);
/* One saved case (a case JSON, or a P2P model for kind P2P): *failed = 1 when the planner still
 * fails it, 2 when it declines it, 0 when it passes; msg says how (or the plan's trace). */
rs_status rs_pf_replay(rs_planner_host *h, const rs_pf_opts *o, const char *path, int *failed, char *msg,
                       size_t cap);

/* The arguments after "reshard fuzz-planner" that replay one saved case with the same planner. */
void rs__pf_replay_args(const rs_pf_opts *o, const char *fixture, char *buf, size_t cap);
/* Reports (planner_report.c): the score table to f, the JSON summary, JUnit XML. */
void rs_pf_print(FILE *f, rs_planner_host *h, const rs_pf_opts *o, const rs_pf_result *r);
rs_status rs_pf_json(const char *path, rs_planner_host *h, const rs_pf_opts *o, const rs_pf_result *r);
rs_status rs_pf_junit(const char *path, const rs_pf_opts *o, const rs_pf_result *r);
/* The runner's object of the --json report (props/runner.h), with each failure's shrunk message,
 * fixture and replay command. */
struct cJSON *rs__pf_runner_json(const rs_pf_opts *o, const rs_pf_result *r);

#endif
