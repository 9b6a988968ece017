/* tp_style.h - the one definition of where a tensor-parallel style puts a module's parameters
 * (SPEC 12): used by the TP styles (ref/tp, opt/tp) and by the Megatron-style templates of
 * cross-config resharding (SPEC 10), so "column parallel" means one thing in the whole code. */
#ifndef RS_CORE_TP_STYLE_H
#define RS_CORE_TP_STYLE_H

#include "reshard/layout.h"

typedef enum rs_tp_style_kind {
  RS_TP_COLWISE = 0,  /* PyTorch ColwiseParallel */
  RS_TP_ROWWISE = 1,  /* PyTorch RowwiseParallel */
  RS_TP_SEQUENCE = 2, /* PyTorch SequenceParallel: parameters replicated */
  RS_TP_REPLICATE = 3 /* no style: parameters replicated on the TP dim */
} rs_tp_style_kind;

typedef enum rs_tp_module_kind {
  RS_TP_LINEAR = 0,    /* weight [out, in], bias [out] */
  RS_TP_EMBEDDING = 1, /* weight [vocab, dim] */
  RS_TP_NORM = 2       /* weight [dim] (and bias [dim] for LayerNorm) */
} rs_tp_module_kind;

typedef enum rs_tp_param_kind { RS_TP_WEIGHT = 0, RS_TP_BIAS = 1 } rs_tp_param_kind;

/* Placement on the TP mesh dim of `param` of a `module` under `style`:
 *   Colwise : Linear weight S(0), bias S(0); Embedding weight S(1)
 *   Rowwise : Linear weight S(1), bias R;    Embedding weight S(0)
 *   Sequence, Replicate: R for every parameter.
 * Colwise/Rowwise on a norm, or a bias of an Embedding, is RS_ERR_UNSUPPORTED with a message. */
rs_status rs_tp_param_placement(rs_tp_style_kind style, rs_tp_module_kind module,
                                rs_tp_param_kind param, rs_placement *out);

const char *rs_tp_style_name(rs_tp_style_kind style);

#endif
