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
  int64_t first_fail;  /* the failing case's index (-1: none) */
  int crashed;         /* --impl opt: a worker crashed (printed "FAIL crash: ..."; --impl both counts
                          it in the reference result's failed) */
  char message[1024];  /* the shrunk failure */
  char fixture[1024];  /* its regression fixture ("" when not written) */
  char verb[64];
  rs_run_result run;   /* what the runner counted */
} rs_ckpt_opt_campaign_result;

const char *rs_ckpt_opt_feature_name(int f);
/* 1 when feature f must occur in a campaign of RS_FEATURE_MIN_CASES cases or more: the unstaged
 * O_DIRECT save, wherever the scratch file system took O_DIRECT (r->feat[RS_CKPT_OPT_F_DIRECT]) */
int rs_ckpt_opt_feature_required(const rs_ckpt_opt_campaign_result *r, int f);

/* The campaign: o->cases cases (or o->seconds) on the runner (case i drawn from the seed and i
 * only), stopping at the first failure (the lowest failing index, whatever --jobs), which is shrunk
 * afterwards in this process and saved as a fixture (property "ckpt_opt"). Under MPI (world not
 * local) every process runs every case (jobs stays 1) and the shrink is collective. Statuses as
 * rs_ckpt_campaign_run's, and RS_ERR_TIMEOUT for a stalled or dead peer. */
rs_status rs_ckpt_opt_campaign_run(rs_world *world, const rs_ckpt_campaign *o, rs_ckpt_opt_campaign_result *r);
/* --impl both on a local world: one campaign whose cases run the reference's properties and then
 * ckpt_opt (seven properties; it runs to its end, each property's first failure shrunk). */
rs_status rs_ckpt_both_campaign_run(rs_world *world, const rs_ckpt_campaign *o, rs_ckpt_campaign_result *ref,
                                    rs_ckpt_opt_campaign_result *opt);
/* props-internal (ckpt_campaign.c): the checkpoint campaigns on the runner; mode: which property
 * sets run (RS__CKPT_REF: the reference's six, RS__CKPT_OPT: ckpt_opt, both: one campaign of
 * seven); ref and opt get the results of the sets that ran (NULL for the other). */
enum { RS__CKPT_REF = 1, RS__CKPT_OPT = 2 };
rs_status rs__ckpt_campaign(rs_world *world, const rs_ckpt_campaign *o, int mode, rs_ckpt_campaign_result *ref,
                            rs_ckpt_opt_campaign_result *opt);
/* props-internal: the cross property on the case drawn from ch, with feat (RS_CKPT_OPT_F_COUNT
 * flags, may be NULL) set to what its step-2 save exercised (ckpt_campaign.c's runner eval). */
rs_outcome rs__ckpt_opt_case(rs_world *world, rs_choices *ch, const char *dir, char *msg, size_t cap, int *feat);
/* Replays a fixture whose property is ckpt_opt (local world). */
rs_status rs_ckpt_opt_replay(const uint64_t *v, size_t n, const char *scratch, int *failed, char *msg, size_t cap);

#endif
