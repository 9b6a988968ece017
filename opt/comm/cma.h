/* cma.h - single-copy intra-node reads for the MPI transport: Linux process_vm_readv (cross-memory
 * attach) from a peer process's strided views straight into this process's views. */
#ifndef RS_OPT_COMM_CMA_H
#define RS_OPT_COMM_CMA_H

#include <sys/types.h>
#include "../opt_internal.h"

/* Copy between the local views lv[0..nl) and the remote views rv[0..nr) of process pid (their bases
 * are addresses in that process): remote -> local (process_vm_readv), or local -> remote when write
 * (process_vm_writev). Both lists in row-major order, one view after the other; the byte counts
 * must match. At most IOV_MAX iovecs per call; short copies are resumed. 0 on success, else an
 * errno (EFAULT also for a call that makes no progress). */
int rs__cma_copy(pid_t pid, int write, const rs_view *lv, int64_t nl, const rs_view *rv, int64_t nr);
/* How many contiguous runs the views break into (the iovecs a list of them needs). */
int64_t rs__cma_runs(const rs_view *v, int64_t nv);
/* Read `bytes` at address `addr` of process pid into buf (the start-up probe): 0 or an errno. */
int rs__cma_probe(pid_t pid, void *buf, const void *addr, size_t bytes);

#endif
