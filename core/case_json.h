/* case_json.h - the case codec on an already parsed document, for readers that take more than the
 * case from one file (a fixture's "expected", a saved failure's impl/transport) and parse it once. */
#ifndef RS_CORE_CASE_JSON_H
#define RS_CORE_CASE_JSON_H

#include <cjson/cJSON.h>
#include "reshard/case.h"

/* root must come from rs_json_parse (exact integers). Same checks as rs_case_from_json. */
rs_status rs__case_from_cjson(const cJSON *root, rs_case *out);

/* A "placements" array (one string per mesh dim, exactly mesh_ndim of them) into s->p, then s's
 * default shard order for a tensor_ndim-d tensor. Errors name "FIELD.placements[i]". The case and
 * p2p model codecs share it; each reads its own "shard_order" (their rules differ). */
rs_status rs__json_placements(const cJSON *pl, const char *field, int mesh_ndim, int tensor_ndim, rs_sharding *s);
/* field.shard_order (absent or null: keep s's order): [{tensor_dim, mesh_dims}], a negative
 * tensor_dim counted from the end; a tensor dim listed twice is refused. */
rs_status rs__json_shard_order(const cJSON *ord, const char *field, int mesh_ndim, int tensor_ndim, rs_sharding *s);

/* The case as a cJSON tree (exact integers), for writers that add keys (saved failures). */
cJSON *rs__case_to_cjson(const rs_case *c);

#endif
