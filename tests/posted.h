/* posted.h - the byte-count check the opt tests share: the bytes a world's transport layer counted
 * (rs_world_posted) against opt's compiled schedule (rs_opt_sched_pairs), pair by pair. Call
 * rs_world_posted_reset before the run. */
#ifndef RS_TEST_POSTED_H
#define RS_TEST_POSTED_H
#include <stdio.h>
#include <stdlib.h>
#include "reshard/opt.h"

/* 1 when the posted bytes differ from the schedule. me: this process's world rank (an MPI/NCCL
 * process sees only its own sends and receives), or -1 on a local world (every row is checked). */
static int posted_bad(rs_opt *o, rs_world *w, const rs_case *c, int me) {
  rs_posted *got = NULL, *want = NULL;
  int64_t ng = 0, nw = 0;
  int bad = rs_world_posted(w, &got, &ng) != RS_OK || rs_opt_sched_pairs(o, c, &want, &nw) != RS_OK;
  for (int64_t i = 0; !bad && i < nw; ++i) {
    int64_t s = 0, r = 0;
    for (int64_t j = 0; j < ng; ++j)
      if (got[j].from == want[i].from && got[j].to == want[i].to) s = got[j].sent, r = got[j].recvd;
    if ((me < 0 || want[i].from == me) && s != want[i].sent) bad = 1;
    if ((me < 0 || want[i].to == me) && r != want[i].recvd) bad = 1;
  }
  for (int64_t j = 0; !bad && j < ng; ++j) {
    int64_t i = 0;
    while (i < nw && !(want[i].from == got[j].from && want[i].to == got[j].to)) ++i;
    if (i == nw && (got[j].sent || got[j].recvd)) bad = 1;
  }
  if (bad) fprintf(stderr, "rank %d: posted bytes differ from the schedule\n", me);
  free(got);
  free(want);
  return bad;
}
#endif
