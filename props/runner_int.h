/* runner_int.h - what --distribute (props/runner_dist.c) reaches of the runner (props/runner.c): the
 * shard's case count, the record a case travels as (the forked workers' format), and the in-order
 * adding of records with its cut, so that records from MPI ranks take the same path as the records
 * of forked workers. Internal to props/. */
#ifndef RS_PROPS_RUNNER_INT_H
#define RS_PROPS_RUNNER_INT_H

#include "runner.h"
#include "report.h"

struct agg; /* runner.c's sums, order and cut of one rs_run */

/* the kinds of a record */
enum { RS__REC_CASE = 1, RS__REC_ERROR = 2 };

/* cases of o's shard (INT64_MAX for a timed campaign) */
int64_t rs__run_shard_cases(const rs_run_opts *o);
/* bytes a packed record of ops's campaign may take at most */
size_t rs__run_record_cap(const rs_run_ops *ops);
/* packs rc into buf (rs__run_record_cap bytes): the payload of an RS__REC_CASE record */
size_t rs__run_pack_case(const rs_run_ops *ops, const rs_run_case *rc, char *buf);

rs_run_result *rs__run_result(struct agg *a);
/* the next j (0-based position in the shard) to be added; j >= the cut are never added
 * (INT64_MAX: no cut yet) */
int64_t rs__run_base(const struct agg *a);
int64_t rs__run_cut(const struct agg *a);
/* stops the campaign at j (the cases before it count): st is the campaign's status (RS_OK: a clean
 * stop), msg its error message */
void rs__run_cut_at(struct agg *a, int64_t j, rs_status st, const char *msg);

/* Records of the j-th case arriving in any order: each kept until every lower one has arrived,
 * then added exactly as a forked worker's record is (kind RS__REC_CASE: a packed case; RS__REC_ERROR:
 * the eval's status and error message as payload). */
typedef struct rs__run_sink rs__run_sink;
rs__run_sink *rs__run_sink_new(struct agg *a);
void rs__run_sink_free(rs__run_sink *s);
void rs__run_sink_put(rs__run_sink *s, int64_t j, int kind, rs_status st, const char *payload, size_t len);

/* --distribute's run (runner_dist.c): rank 0 hands out case indices, runs cases itself and adds
 * every rank's records through a sink; another rank runs what it is given, sends the records and
 * returns with r->follower = 1. */
rs_status rs__run_dist(const rs_run_opts *o, const rs_run_ops *ops, struct agg *a, rs_progress *prog, double t0);

#endif
