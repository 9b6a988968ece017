/* exec.h - the schedule executor's inputs: per-position buffers in one memory space. */
#ifndef RS_OPT_EXEC_H
#define RS_OPT_EXEC_H

#include "comm/comm.h"

typedef struct rs_exec_bufs {
  int device;         /* all pointers are device pointers */
  const char *played; /* per position: 1 when this process plays it */
  char **in, **out;   /* per position (NULL when not played) */
  char **ws;          /* per position: the reduction workspace (sched->ws_bytes) */
} rs_exec_bufs;

/* stale_ws: the workspace was reused from an earlier run (only mutant 103 cares). */
rs_status rs_exec_sched(const rs_sched *s, const rs_exec_bufs *b, const rs_mesh *m, rs_comm *comm,
                        int stale_ws);

#endif
