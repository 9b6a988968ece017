/* props.c - the redistribute properties' table, what every user of them shares (the campaign,
 * replays, reports, --properties): each property's name, the planner it runs, whether it takes a
 * planted-violation case and whether it needs opt/. The properties themselves are in
 * redistribute_props.c. */
#include <string.h>
#include "props/props.h"

static const struct {
  const char *name;
  rs_planner_kind planner;
  int bad, opt;
} PROPS[RS_PROP_COUNT] = {
    [RS_PROP_BOXES] = {"boxes", RS_PLANNER_AUTO, 0, 0},
    [RS_PROP_GREEDY_ORACLE] = {"greedy_oracle", RS_PLANNER_GREEDY, 0, 0},
    [RS_PROP_GRAPH_ORACLE] = {"graph_oracle", RS_PLANNER_GRAPH, 0, 0},
    [RS_PROP_ROUNDTRIP_GREEDY] = {"roundtrip_greedy", RS_PLANNER_GREEDY, 0, 0},
    [RS_PROP_ROUNDTRIP_GRAPH] = {"roundtrip_graph", RS_PLANNER_GRAPH, 0, 0},
    [RS_PROP_PLAN_LEGAL_GREEDY] = {"plan_legal_greedy", RS_PLANNER_GREEDY, 0, 0},
    [RS_PROP_PLAN_LEGAL_GRAPH] = {"plan_legal_graph", RS_PLANNER_GRAPH, 0, 0},
    [RS_PROP_REJECT_BAD] = {"reject_bad", RS_PLANNER_AUTO, 1, 0},
    [RS_PROP_COMPARE_SEES] = {"compare_sees", RS_PLANNER_AUTO, 0, 0},
    [RS_PROP_OPT_ORACLE] = {"opt_oracle", RS_PLANNER_AUTO, 0, 1},
    [RS_PROP_OPT_PLAN] = {"opt_plan", RS_PLANNER_AUTO, 0, 1},
    [RS_PROP_VALUES] = {"values", RS_PLANNER_AUTO, 0, 0},
    [RS_PROP_BACKEND] = {"backend_oracle", RS_PLANNER_AUTO, 0, 0},
};

const char *rs_prop_name(rs_prop_id id) {
  return (unsigned)id < RS_PROP_COUNT ? PROPS[id].name : "?";
}

rs_status rs_prop_parse(const char *name, rs_prop_id *out) {
  for (int i = 0; i < RS_PROP_COUNT; i++)
    if (name && strcmp(name, PROPS[i].name) == 0) {
      *out = (rs_prop_id)i;
      return RS_OK;
    }
  return rs_fail(RS_ERR_INVALID, "property: unknown name '%s'", name ? name : "(null)");
}

rs_planner_kind rs_prop_planner(rs_prop_id id) { return PROPS[id].planner; }
int rs_prop_bad_cases(rs_prop_id id) { return PROPS[id].bad; }
int rs_prop_needs_opt(rs_prop_id id) { return PROPS[id].opt; }
