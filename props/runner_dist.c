/* runner_dist.c - --distribute: a campaign's case range shared by the MPI ranks of an mpirun
 * (runner.h). Not built yet: every open says so. */
#include "runner.h"

struct rs_run_dist {
  int rank, size;
};

rs_status rs_run_dist_open(rs_run_dist **out) {
  *out = NULL;
  return rs_fail(RS_ERR_UNSUPPORTED, "--distribute: not available in this build yet");
}

void rs_run_dist_close(rs_run_dist *d) { (void)d; }
int rs_run_dist_rank(const rs_run_dist *d) { return d ? d->rank : 0; }
int rs_run_dist_size(const rs_run_dist *d) { return d ? d->size : 1; }
