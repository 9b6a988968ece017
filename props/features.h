/* features.h - internal to props/: which generated-space features one case exercises, the
 * campaign's per-feature tally and the check that a large campaign produced each one. */
#ifndef RS_PROPS_FEATURES_H
#define RS_PROPS_FEATURES_H

#include "props/props.h"

/* Marks in hit[0..rs_feature_count()) the features case c exercises (hit is zeroed first). */
void rs__features_of_case(const rs_case *c, int *hit);
/* 1 when a campaign drawing with o must produce feature f (0: informational or ruled out by o). */
int rs__feature_required(const rs_gen_opts *o, int f);
/* The designed rate of feature f for a campaign drawing with o (rs_feature_gate's rate): the
 * measured rate at default options, -1 when required under narrowed options, 0 not required. */
double rs__feature_rate(const rs_gen_opts *o, int f);
/* The measured rate at default options for an enumerations mode (RS_GEN_ENUM_*). */
double rs__feature_rate_measured(int f, int enumerations);

#endif
