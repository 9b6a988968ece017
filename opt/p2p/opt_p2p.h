/* opt_p2p.h - what the files of opt/p2p share: the planner entry, the copy-service internals and
 * the MXFP8 kernels' host entry points. Not public API. */
#ifndef RS_OPT_P2P_H
#define RS_OPT_P2P_H

#include "reshard/copy_service.h"
#include "reshard/opt.h"
#include "reshard/p2p.h"

rs_status rs__p2p_opt_plan(const rs_p2p_model *m, rs_p2p_plan *out);

struct rs_copy_service {
  const rs_copy_service_vtable *vt;
  void *self;
  void *dl; /* dlopen handle of a plug-in */
  char name[64];
};

/* Built-in services as vtables (copy_service.c). */
rs_status rs__cs_builtin(const char *name, struct rs_world *w, const rs_copy_service_vtable **vt, void **self);

#endif
