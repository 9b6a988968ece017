/* tp_style.h - the one definition of where a tensor-parallel style puts a module's parameters
 * (SPEC 12): used by the TP styles (core/tp/, ref/tp, opt/tp) and by the Megatron-style templates
 * of cross-config resharding (SPEC 10), so "column parallel" means one thing in the whole code.
 * The enums and rs_tp_param_placement are public (reshard/tp.h):
 *   Colwise : Linear weight S(0), bias S(0); Embedding weight S(1)
 *   Rowwise : Linear weight S(1), bias R;    Embedding weight S(0)
 *   Sequence, Replicate, PrepareModuleInput/Output: R for every parameter.
 * Colwise/Rowwise on a norm, or a bias of an Embedding, is an error with a message. */
#ifndef RS_CORE_TP_STYLE_H
#define RS_CORE_TP_STYLE_H

#include "reshard/tp.h"

#endif
