/* ckpt_opt.h - opt's checkpoints held to the reference and the oracle: the cross property (a
 * checkpoint saved by ref loads in opt, one saved by opt loads in ref, both equal to the oracle
 * bit for bit, with the same strict report; opt's files verify and export byte-identically to
 * ref's) and its campaign, on a local world or one process per rank under MPI. */
#ifndef RS_PROPS_CKPT_OPT_H
#define RS_PROPS_CKPT_OPT_H

#include "props/ckpt.h"
#include "reshard/ckpt_opt.h"

/* Runs the cross property on the case drawn from ch. world NULL: local. Under MPI every process
 * calls it with the same stream and gets the same (agreed) outcome; only rank 0 touches the
 * reference. */
rs_outcome rs_ckpt_opt_prop_run(rs_world *world, rs_choices *ch, const char *dir, char *msg, size_t cap);

typedef struct rs_ckpt_opt_campaign_result {
  int64_t cases, pass, skip, fail;
  double seconds;
} rs_ckpt_opt_campaign_result;

/* The campaign: o->cases cases (or o->seconds), shrinking and a fixture (property "ckpt_opt")
 * on the first failure. */
rs_status rs_ckpt_opt_campaign_run(rs_world *world, const rs_ckpt_campaign *o, rs_ckpt_opt_campaign_result *r);
/* Replays a fixture whose property is ckpt_opt (local world). */
rs_status rs_ckpt_opt_replay(const uint64_t *v, size_t n, const char *scratch, int *failed, char *msg, size_t cap);

#endif
