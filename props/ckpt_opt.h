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

/* Features: cases whose step-2 opt save (the one verified, exported and loaded) had O_DIRECT
 * files, and cases whose step-2 save wrote a segment under O_DIRECT straight from the tensors'
 * memory (no staging); counted from the save's stats (rs_ckpt_opt_stats), not from the draws. */
enum { RS_CKPT_OPT_F_DIRECT, RS_CKPT_OPT_F_DIRECT_UNSTAGED, RS_CKPT_OPT_F_COUNT };

typedef struct rs_ckpt_opt_campaign_result {
  int64_t cases, pass, skip, fail;
  double seconds;
  int64_t feat[RS_CKPT_OPT_F_COUNT]; /* cases exercising each feature */
} rs_ckpt_opt_campaign_result;

const char *rs_ckpt_opt_feature_name(int f);
/* 1 when feature f must occur in a campaign of RS_FEATURE_MIN_CASES cases or more: the unstaged
 * O_DIRECT save, wherever the scratch file system took O_DIRECT (r->feat[RS_CKPT_OPT_F_DIRECT]) */
int rs_ckpt_opt_feature_required(const rs_ckpt_opt_campaign_result *r, int f);

/* The campaign: o->cases cases (or o->seconds), shrinking and a fixture (property "ckpt_opt")
 * on the first failure. */
rs_status rs_ckpt_opt_campaign_run(rs_world *world, const rs_ckpt_campaign *o, rs_ckpt_opt_campaign_result *r);
/* Replays a fixture whose property is ckpt_opt (local world). */
rs_status rs_ckpt_opt_replay(const uint64_t *v, size_t n, const char *scratch, int *failed, char *msg, size_t cap);

#endif
