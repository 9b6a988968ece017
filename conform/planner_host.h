/* planner_host.h - internal to conform/: one planner behind one interface, whatever it is: a plug-in
 * library (reshard/planner.h, loaded with dlopen) or a child process speaking the JSON-lines
 * protocol (`exec:CMD`, docs/conformance.md). The harness copies every plan it gets into reshard's
 * own types and checks nothing here: legality, bytes and scores are planner_fuzz.c's. */
#ifndef RS_CONFORM_PLANNER_HOST_H
#define RS_CONFORM_PLANNER_HOST_H

#include <stddef.h>
#include "reshard/case.h"
#include "reshard/p2p.h"
#include "reshard/planner.h"

typedef struct rs_planner_host rs_planner_host;

enum { RS_PLANNER_CAP_PLAN = 1, RS_PLANNER_CAP_P2P = 2 };

/* spec: "exec:CMD ARGS" (a child process; timeout_s bounds each request), else a plug-in library
 * path. A plug-in that lacks the entry points, speaks another ABI version or reports a vtable
 * smaller than version 1's is refused with RS_ERR_INVALID naming `spec`. */
rs_status rs_planner_host_open(const char *spec, double timeout_s, rs_planner_host **out);
void rs_planner_host_close(rs_planner_host *h);
const char *rs_planner_host_name(const rs_planner_host *h);

/* --jobs N (props/runner.h): the planner in a forked worker. worker_start (the worker's first act):
 * an exec planner's worker forgets the child it inherited (pipe ends closed, the child stays the
 * parent's) and starts its own, which dies with the worker; a plug-in is the worker's own copy
 * after fork already (nothing to do). worker_stop (its last act) stops that child. */
rs_status rs_planner_host_worker_start(rs_planner_host *h);
void rs_planner_host_worker_stop(rs_planner_host *h);
/* How many instances of the planner may run at once: 0 any number (plug-ins; exec planners by
 * default), k from an exec planner's hello "max_instances" (1: it runs in one process only). */
int64_t rs_planner_host_max_instances(const rs_planner_host *h);
int rs_planner_host_caps(const rs_planner_host *h); /* RS_PLANNER_CAP_* bits */

/* One plan for case c (its mesh, tensor, src, dst and enumeration). RS_OK: *out holds the plan
 * (out->enumeration = c->enumeration). RS_ERR_UNSUPPORTED / RS_ERR_NOPATH: the planner declined.
 * RS_ERR_ILLEGAL: the answer is not a plan (more than RS_MAX_STEPS steps, a placement that is no
 * placement). Anything else: the planner failed (an error it reported, a crash, a timeout). msg
 * gets the one-line reason in every case but RS_OK. */
rs_status rs_planner_host_plan(rs_planner_host *h, const rs_case *c, rs_plan *out, char *msg, size_t cap);
/* The same for a P2P model: *out (zeroed by the caller) receives a copy of the planner's transfers.
 * RS_ERR_ILLEGAL: a transfer names a parameter or a box the answer does not hold. */
rs_status rs_planner_host_plan_p2p(rs_planner_host *h, const rs_p2p_model *m, rs_p2p_plan *out, char *msg,
                                   size_t cap);

#endif
