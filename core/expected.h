/* expected.h - a fixture's "expected" block (and the "pytorch" record of the recorded corpus), read
 * by type before anything is compared: a key of the wrong type, an unknown key, a rank that is not
 * in the mesh or a digest that is not 16 hex digits is bad input, never a silent PASS. */
#ifndef RS_CORE_EXPECTED_H
#define RS_CORE_EXPECTED_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include "reshard/case.h"

typedef struct rs__exp_rank {
  int pos;                        /* mesh position of "rank" */
  int32_t rank;
  int has_coord, has_shape, has_offset, has_xxh3;
  int64_t coord[RS_MAX_MESH_DIMS];
  int64_t shape[RS_MAX_DIMS], offset[RS_MAX_DIMS];
  uint64_t xxh3;
} rs__exp_rank;

typedef struct rs__expected {
  int has_ranks, nranks;
  rs__exp_rank *ranks;            /* malloc'd, nranks entries */
  const char *trace;              /* NULL when absent; points into the cJSON tree */
  const char *error;              /* "error": PyTorch raised (message); NULL when absent */
  int has_collectives;            /* 0 when absent or null (not recorded) */
  int collectives[RS_COLL_COUNT];
  int shard_to_partial;           /* PyTorch's S -> P(sum) zero-fill steps (no collective) */
} rs__expected;

/* Read `exp` (from rs_json_parse) for case c. field names it in errors ("expected", "pytorch").
 * strict: every key must be one of ranks, trace, collectives, error, pytorch_test_comms (the
 * fixture form); otherwise other keys are left to the caller (PyTorch's record carries more). */
rs_status rs__expected_parse(const cJSON *exp, const char *field, int strict, const rs_case *c,
                             rs__expected *out);
void rs__expected_free(rs__expected *e);

#endif
