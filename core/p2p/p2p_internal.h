/* p2p_internal.h - what the files of core/p2p share (not public API). */
#ifndef RS_CORE_P2P_INTERNAL_H
#define RS_CORE_P2P_INTERNAL_H

#include "reshard/p2p.h"

void rs__p2p_config_free(rs_p2p_config *c);
uint64_t rs__p2p_name_hash(const char *s);
/* Element count of a box (sizes already validated, so no overflow). */
static inline int64_t rs__p2p_numel(int ndim, const int64_t *size) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= size[d];
  return n;
}

#endif
