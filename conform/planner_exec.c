/* planner_exec.c - a planner in a child process: the JSON-lines protocol's planner role. */
#include "conform/planner_exec.h"

rs_status rs__planner_exec_open(const char *cmd, double timeout_s, const rs_planner_vtable **vt, void **self) {
  (void)cmd;
  (void)timeout_s;
  *vt = NULL;
  *self = NULL;
  return rs_fail(RS_ERR_UNSUPPORTED, "--planner exec:...: the process protocol is not built in");
}
