/* tp_style.c - parameter placements of the tensor-parallel styles (see tp_style.h). */
#include "core/tp_style.h"
#include "core/mutant.h"

static rs_placement shard(int d) {
  rs_placement p = {RS_SHARD, (int8_t)d, 0};
  return p;
}

rs_status rs_tp_param_placement(rs_tp_style_kind style, rs_tp_module_kind module,
                                rs_tp_param_kind param, rs_placement *out) {
  rs_placement rep = {RS_REPLICATE, 0, 0};
  if (module == RS_TP_EMBEDDING && param == RS_TP_BIAS)
    return rs_fail(RS_ERR_INVALID, "tp: an embedding has no bias");
  if ((module == RS_TP_NORM || module == RS_TP_RMSNORM) && param == RS_TP_BIAS)
    return rs_fail(RS_ERR_INVALID, "tp: the norm has no bias");
  switch (style) {
  case RS_TP_SEQUENCE:
  case RS_TP_REPLICATE:
  case RS_TP_PREPARE_INPUT:
  case RS_TP_PREPARE_OUTPUT:
    *out = rep;
    return RS_OK;
  case RS_TP_COLWISE:
    if (module == RS_TP_LINEAR) *out = shard(0); /* weight [out, in] and bias [out]: split out */
    else if (module == RS_TP_EMBEDDING) *out = shard(1); /* split the embedding dim */
    else return rs_fail(RS_ERR_UNSUPPORTED, "tp: ColwiseParallel applies to Linear and Embedding only");
    return RS_OK;
  case RS_TP_ROWWISE:
    if (module == RS_TP_LINEAR) *out = param == RS_TP_WEIGHT ? shard(1) : rep; /* split in; bias whole */
    else if (module == RS_TP_EMBEDDING) *out = shard(0); /* split the vocabulary */
    else return rs_fail(RS_ERR_UNSUPPORTED, "tp: RowwiseParallel applies to Linear and Embedding only");
    /* planted bugs: a row-parallel bias split like a column-parallel one; a vocab-parallel table
     * split on the embedding dim */
    if (RS_MUTANT(500) && module == RS_TP_LINEAR && param == RS_TP_BIAS) *out = shard(0);
    if (RS_MUTANT(501) && module == RS_TP_EMBEDDING) *out = shard(1);
    return RS_OK;
  default:
    break;
  }
  return rs_fail(RS_ERR_INVALID, "tp: unknown style %d", (int)style);
}

const char *rs_tp_style_name(rs_tp_style_kind style) {
  switch (style) {
  case RS_TP_COLWISE: return "ColwiseParallel";
  case RS_TP_ROWWISE: return "RowwiseParallel";
  case RS_TP_SEQUENCE: return "SequenceParallel";
  case RS_TP_REPLICATE: return "Replicate";
  case RS_TP_PREPARE_INPUT: return "PrepareModuleInput";
  case RS_TP_PREPARE_OUTPUT: return "PrepareModuleOutput";
  case RS_TP_STYLE_COUNT: break;
  }
  return "?";
}
