/* memo.h - internal to props/: per-case results shared by the properties (see memo.c). With a
 * NULL memo every getter just computes (into *tmp where it returns locals). */
#ifndef RS_PROPS_MEMO_H
#define RS_PROPS_MEMO_H

#include "props/props.h"
#include "reshard/events.h"

rs_status rs_memo_source(rs_prop_memo *m, const rs_case *c, rs_locals *tmp, const rs_locals **out);
/* The oracle's locals of c->dst after the events ev (NULL: the canonical sequence of src -> dst). */
rs_status rs_memo_expected(rs_prop_memo *m, const rs_case *c, const rs_events *ev, rs_locals *tmp,
                           const rs_locals **out);
/* ref's run of plan p on `in`, which must be c's source (rs_memo_source): the properties that run
 * one plan (ref vs oracle, the first half of a round trip) share it. The locals are read-only. */
rs_status rs_memo_run(rs_prop_memo *m, const rs_case *c, const rs_plan *p, const rs_locals *in, rs_locals *tmp,
                      const rs_locals **out);
/* k: greedy, graph (with c->cost) or auto (resolved as SPEC 7 says). */
rs_status rs_memo_plan(rs_prop_memo *m, const rs_case *c, rs_planner_kind k, rs_plan *out);

#endif
