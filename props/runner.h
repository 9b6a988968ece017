/* runner.h - the one campaign runner: every campaign verb (check, p2p check, ckpt check, tp check,
 * conform's suites, fuzz-planner) hands it a function that runs case number i and fills a record;
 * the runner decides which indices run (--cases / --seconds, --shard K/N), where they run (this
 * process, --jobs N forked workers, or MPI ranks under --distribute), and adds the records up in
 * index order, so the result does not depend on how many workers ran it:
 *   - a case's draws depend on the seed and its index only (the verb seeds its choice stream with
 *     rs_hash3(seed, index, ...)), so every worker count draws the same cases;
 *   - the records are added in index order and a stop (--seconds, --max-failures, an error, out of
 *     memory) cuts the campaign at an index: what ran is always the indices of one prefix;
 *   - each property's first failure is the lowest failing index; the verb shrinks it afterwards in
 *     its own process, so the shrunk case is the same too.
 * Shrinking, fixtures and reports stay with the verb; the runner's part of every report (counts,
 * features, first failing indices, gates) is one JSON object, "runner", which `reshard report
 * merge` adds up over the shards of one campaign. */
#ifndef RS_PROPS_RUNNER_H
#define RS_PROPS_RUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "reshard/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_RUN_PROPS 32     /* properties (or objectives) one campaign counts */
#define RS_RUN_FEATURES 64  /* features of its feature table */
#define RS_RUN_COUNTERS 24  /* the verb's own per-case figures (Partial cases, declines, ...) */
#define RS_RUN_MSG 1024     /* one failure message as the runner keeps it (the shrunk one is the verb's) */
#define RS_RUN_EXTRA 4096   /* bytes of a verb's own per-case record (rs_run_case.extra) */

/* one property's outcome on one case */
enum { RS_RUN_NOT_RUN = 0, RS_RUN_PASS = 1, RS_RUN_FAIL = 2, RS_RUN_SKIP = 3 };

/* What one case produced: filled by the verb's eval, zeroed by the runner before each call. */
typedef struct rs_run_case {
  int64_t index;                     /* the campaign's case index (set by the runner) */
  uint8_t out[RS_RUN_PROPS];         /* RS_RUN_* per property */
  uint16_t feature[RS_RUN_FEATURES]; /* what this case adds to each feature's count */
  int64_t counter[RS_RUN_COUNTERS];  /* what it adds to each of the verb's counters */
  int oom;                           /* 1 + the property that ran out of memory (0: none): no verdict,
                                        the campaign stops here with RS_ERR_NOMEM (exit 3), nothing is
                                        shrunk; msg[that property] says what ran out */
  char msg[RS_RUN_PROPS][RS_RUN_MSG]; /* the failure message of each RS_RUN_FAIL property */
  /* optional: what the verb keeps of this case beyond the runner's sums (a score, a worst-case
   * line), extra_len bytes (0..RS_RUN_EXTRA), carried to the parent as they are and handed to
   * ops->add there */
  uint32_t extra_len;
  unsigned char extra[RS_RUN_EXTRA];
} rs_run_case;

/* The verb's side. eval runs case `index` (every property on it) and returns RS_OK; another status
 * (with the error set) stops the campaign at that index with that error (a stalled peer, conform's
 * --max-timeouts). worker_init / worker_exit run in each forked worker (--jobs > 1) before its first
 * and after its last case: a process backend starts its own child there (a worker must never talk
 * to its parent's child). */
typedef struct rs_run_ops {
  void *ctx;
  rs_status (*eval)(void *ctx, int64_t index, rs_run_case *rc);
  rs_status (*worker_init)(void *ctx, int worker);
  void (*worker_exit)(void *ctx);
  int nprops;        /* properties in use: 0..nprops-1 of out[] */
  int nfeatures;
  int ncounters;
  /* optional, in the parent (the one process with --jobs 1): each case's record as the runner adds
   * it, in index order, after counting it (not for a case cut off by a stop, an error or out of
   * memory); a verb adds up what the runner does not hold here (a score table, worst cases, sums of
   * doubles), so that too does not depend on the worker count */
  void (*add)(void *ctx, int64_t index, const rs_run_case *rc);
} rs_run_ops;

/* A share gate judged on the sums (and so again by report merge): counter `part` over counter
 * `total` must stay <= max_share (max) or >= min_share (min) once total >= judge_from. */
typedef struct rs_run_gate {
  const char *name;
  int part, total;   /* counter indices */
  double share;      /* the bound, in [0, 1] */
  int is_min;        /* 1: part/total >= share is required; 0: part/total <= share */
  int64_t judge_from;
} rs_run_gate;

#define RS_RUN_GATES 4

typedef struct rs_run_opts {
  const char *verb;    /* "check", "p2p check", ...: in messages and the JSON object */
  uint64_t seed;
  int64_t cases;       /* cases of the whole (unsharded) campaign; 0: run for `seconds` */
  double seconds;
  int jobs;            /* 1: this process; N > 1: N forked workers */
  int shard_k, shard_n; /* --shard K/N (1 <= K <= N): indices i with i % N == K - 1; 0/0: all */
  int max_failures;    /* stop once this many properties failed (0: never) */
  double case_timeout; /* seconds one case may run in a worker before it is called hung (0: 600) */
  int progress;        /* 1: the one aggregated progress line on a terminal */
  /* optional, parent only: checked before each index is handed out; a message stops the campaign
   * there (RS_ERR_TIMEOUT) */
  const char *(*stop)(void *ctx);
  void *stop_ctx;
  /* optional, --jobs 1 only: every process of an MPI campaign must stop a timed run at the same
   * index; given this process's decision (1: time is up), returns the agreed one */
  int (*agree_stop)(void *ctx, int stop);
  /* --distribute: the MPI ranks of an mpirun share the case range (NULL: not distributed); made by
   * rs_run_dist_open (props/runner_dist.c, with opt's MPI), see rs_run_result.follower */
  struct rs_run_dist *dist;
} rs_run_opts;

typedef struct rs_run_result {
  int64_t cases;       /* cases run (the prefix of this shard's indices) */
  int64_t end_index;   /* one past the last index run (0 when none ran) */
  int64_t pass[RS_RUN_PROPS], fail[RS_RUN_PROPS], skip[RS_RUN_PROPS];
  int64_t first_fail[RS_RUN_PROPS];   /* lowest failing index, -1: none */
  char first_msg[RS_RUN_PROPS][RS_RUN_MSG];
  int64_t feature[RS_RUN_FEATURES];
  int64_t counter[RS_RUN_COUNTERS];
  int failed_props;    /* properties with a failure */
  int64_t first_failure; /* lowest failing index over all properties, -1: none */
  /* a worker that crashed (a signal or an exit without its report) on a case: the campaign stops
   * there; the verb reports it as a failure (exit 1) naming the index */
  int crashed;
  int64_t crash_index;
  int oom_prop;        /* RS_ERR_NOMEM: the property (-1: none) and index that ran out of memory */
  int64_t oom_index;
  char oom_msg[RS_RUN_MSG];
  char crash_msg[256];
  double seconds;
  int jobs;            /* workers that ran */
  /* 1: this process is a rank other than 0 of a --distribute campaign: it ran its share of the
   * cases and sent the records to rank 0, which adds them up, shrinks and reports; the verb prints,
   * shrinks and writes nothing here and exits 0 (rank 0's exit status is the campaign's) */
  int follower;
} rs_run_result;

/* Runs the campaign. RS_OK when it ran to its end or stopped on a failure count or a crash (see
 * r->crashed); RS_ERR_NOMEM when a case ran out of memory (the message names property and index);
 * RS_ERR_TIMEOUT when a worker hung on one case past case_timeout or opts->stop stopped it; an eval
 * error's status otherwise. r holds what ran before the stop in every case. */
rs_status rs_run(const rs_run_opts *o, const rs_run_ops *ops, rs_run_result *r);

/* The verb's shrink order, after rs_run: of properties 0..nprops-1 that failed and are not yet
 * done (done[p] == 0), the one whose first failing index is lowest (on a tie, the lowest
 * property); -1 when none is left. The verb marks done[p] and shrinks p's first failure, again and
 * again, so the failures shrink and print in the order of the cases that found them, whatever
 * the worker count. */
int rs_run_next_failure(const rs_run_result *r, int nprops, const int *done);

/* When r->crashed: prints the verbs' one crash line to stdout, "FAIL crash: <what> (case N of seed
 * S: replay it alone with --jobs 1)", N being 1-based (crash_index + 1, as first_failure_case and
 * the worker's own message count), and flushes. Nothing otherwise. */
void rs_run_print_crash(const rs_run_result *r, unsigned long long seed);

/* --distribute (props/runner_dist.c): joins the MPI world of an mpirun (MPI_Init when nobody did
 * yet); RS_ERR_UNSUPPORTED in a build without MPI. close finalizes what open started. */
typedef struct rs_run_dist rs_run_dist;
rs_status rs_run_dist_open(rs_run_dist **out);
void rs_run_dist_close(rs_run_dist *d);
int rs_run_dist_rank(const rs_run_dist *d);
int rs_run_dist_size(const rs_run_dist *d);

/* The case index of the j-th case (0-based) of o's shard. */
int64_t rs_run_index(const rs_run_opts *o, int64_t j);

/* "--jobs": auto (the cores this process may run on) or 1..RS_RUN_MAX_JOBS; "--shard": "K/N". */
#define RS_RUN_MAX_JOBS 256
rs_status rs_run_parse_jobs(const char *s, int *out);
rs_status rs_run_parse_shard(const char *s, int *k, int *n);
int rs_run_cores(void);

/* ---- the "runner" object of every report, and report merge (props/runner_json.c) ---- */
/* Names of what a campaign counted: properties, features (with their designed rate: > 0 designed,
 * < 0 required without one, 0 a figure only), counters and share gates. */
typedef struct rs_run_names {
  const char *prop[RS_RUN_PROPS];
  int prop_on[RS_RUN_PROPS];          /* 1: the property ran in this campaign (0: left out) */
  const char *feature[RS_RUN_FEATURES];
  double rate[RS_RUN_FEATURES];
  int64_t judge_from;                  /* cases from which features are judged (RS_FEATURE_MIN_CASES) */
  const char *counter[RS_RUN_COUNTERS];
  rs_run_gate gate[RS_RUN_GATES];
  int ngates;
} rs_run_names;

/* What the verb's report adds per failing property: the shrunk message, the fixture, the replay
 * command (NULL: none). */
typedef struct rs_run_failure_note {
  const char *message, *fixture, *replay;
} rs_run_failure_note;

/* Judges the feature table and the gates on r's sums: min[f] gets each feature's least passing
 * count; returns the number of features below it, and *gates_failed the number of failed gates
 * (names in order into failed_gate, may be NULL). */
int rs_run_judge(const rs_run_names *nm, const rs_run_ops *ops, const rs_run_result *r, int64_t *min,
                 int *gates_failed, const char **failed_gate);

struct cJSON;
/* The runner object of a report: verb, seed, shard, cases, index range, per-property counts with
 * first failing index and the verb's failure note, features (count, rate, min), counters, gates and
 * the verdict. notes: per property (may be NULL). */
struct cJSON *rs_run_json(const rs_run_opts *o, const rs_run_ops *ops, const rs_run_names *nm,
                          const rs_run_result *r, const rs_run_failure_note *notes);

/* reshard report merge: reads the "runner" objects of the given --json reports (the shards of one
 * campaign: same verb, seed and case count, shards K/N each once), adds them up and writes the
 * merged JSON (json_out), JUnit (junit_out) and an HTML page (report_dir), each may be NULL. *failed
 * gets 1 when the merged campaign failed. Errors name the file and the field. */
rs_status rs_run_merge(const char *const *paths, int n, const char *json_out, const char *junit_out,
                       const char *report_dir, FILE *summary, int *failed);

#ifdef __cplusplus
}
#endif
#endif
