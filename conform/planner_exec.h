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

#endif
