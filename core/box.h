/* box.h - a rank's box from mesh sizes and its coordinate alone, for callers whose meshes are too
 * large for rs_mesh's fixed rank list (cross-config resharding holds allocated rank lists). */
#ifndef RS_CORE_BOX_H
#define RS_CORE_BOX_H

#include "reshard/layout.h"

/* SPEC 4's box of the rank at `coord` on a mesh of sizes mesh_size[0..s->mesh_ndim). */
void rs_box_of_coord(const int64_t *mesh_size, const rs_sharding *s, const rs_tensor *t,
                     const int64_t *coord, int64_t *start, int64_t *size);
/* Row-major coordinate of position pos on a mesh of ndim sizes. */
void rs_coord_of_pos(int ndim, const int64_t *mesh_size, int64_t pos, int64_t *coord);
/* rs_tensor_nbytes with every message naming `field` (the user's own name for the shape, e.g.
 * "--shape" or "tensors[0].shape") once: "<field>: byte count overflows int64". */
rs_status rs__tensor_nbytes_at(const rs_tensor *t, const char *field, int64_t *nbytes);

#endif
