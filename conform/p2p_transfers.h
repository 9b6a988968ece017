/* p2p_transfers.h - the one reader of a P2P plan's "transfers" list as planners and backends
 * answer it over the process protocol (docs/conformance.md). */
#ifndef RS_CONFORM_P2P_TRANSFERS_H
#define RS_CONFORM_P2P_TRANSFERS_H
#include "core/json.h"
#include "reshard/p2p.h"

/* Appends every entry of list (a JSON array of {task_id, param, src_rank, dst_rank, offsets,
 * sizes}) to plan. A missing or malformed field fails with RS_ERR_INVALID and an rs_last_error()
 * naming it as transfers[i].field; entries before it stay in plan (the caller frees it). */
rs_status rs__cf_read_transfers(const rs_p2p_model *m, const cJSON *list, rs_p2p_plan *plan);

#endif
