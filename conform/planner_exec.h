/* planner_exec.h - internal to conform/: a planner in a child process (`--planner exec:CMD`),
 * speaking the JSON-lines protocol of docs/conformance.md (role "planner", ops "plan" and
 * "p2p_plan"), presented as the same vtable a plug-in exports. */
#ifndef RS_CONFORM_PLANNER_EXEC_H
#define RS_CONFORM_PLANNER_EXEC_H

#include "reshard/planner.h"

/* Starts the child (cmd is run by /bin/sh -c) and does the hello exchange; every later request is
 * bounded by timeout_s. A child that crashes, times out or answers garbage fails that request
 * (RS_ERR_TRANSPORT, its last stderr lines in the message) and is restarted for the next. */
rs_status rs__planner_exec_open(const char *cmd, double timeout_s, const rs_planner_vtable **vt, void **self);
/* A forked --jobs worker's own child (its worker_init): the child inherited from the parent is
 * forgotten (only our pipe ends are closed; it stays the parent's, untouched) and the same command
 * is started again, with hello. The new child dies with the worker (PR_SET_PDEATHSIG, conform/exec.c);
 * the worker stops it with the vtable's destroy (bye, then a kill of its process group). */
rs_status rs__planner_exec_reopen(void *self);
/* How many children of this planner may run at once: the hello's "max_instances" (0 when absent:
 * any number; 1: one only, --jobs N then runs one worker). Checked at open. */
int64_t rs__planner_exec_max_instances(const void *self);

#endif
