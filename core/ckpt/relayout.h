/* relayout.h - the target of `reshard ckpt reshard`: a layout file (LAYOUT.json) read against the
 * source checkpoint's metadata, and every target rank's state dict built from it. Tensors the
 * layout names take its mesh, placements and shard order (dtype and global shape come from the
 * source); every other tensor keeps its stored chunks, every object its shard and the common
 * entries their values, each on target rank (source file's rank mod the target world). Shared by
 * ref's and opt's runs of the verb (props/ckpt_reshard.c): core/ only. */
#ifndef RS_CORE_CKPT_RELAYOUT_H
#define RS_CORE_CKPT_RELAYOUT_H

#include "core/ckpt/internal.h"

/* The source's metadata.json of a step directory, read under the shared read rule and parsed with
 * every metadata rule (digest line, tiling). */
rs_status rs__relayout_read_md(const char *stepdir, rs__metadata *md);

/* LAYOUT.json (path; errors name it and the field) read against src: a state spec of the
 * re-laid-out tensors (world = the target world, dtype and shape = the source's, seed 0). A key
 * the source lacks, a shape or dtype that differs from the source's, a field that is no part of a
 * layout (seed, factory, objects, common, ...) are RS_ERR_INVALID naming the field. text: the
 * file's content when not NULL (the property passes its layouts without a file). */
rs_status rs__relayout_read(const char *path, const char *text, const rs__metadata *src, rs_state_spec *out);

/* Every target rank's state dict (only >= 0: that rank's alone, as one MPI process holds): the
 * layout's entries and the carried-over chunks and objects, buffers allocated but not filled (a
 * load fills them; rs__relayout_all_loaded checks it did). *carried gets the number of carried
 * tensors (optional). */
rs_status rs__relayout_build(const rs_state_spec *target, const rs__metadata *src, int only, rs_ckpt_world *w,
                             int *carried);

/* Every tensor entry and object the world holds (rank only, or all) was filled by the load:
 * RS_ERR_MISMATCH naming the first that was not. */
rs_status rs__relayout_all_loaded(const rs_ckpt_world *w, int only);

/* The written checkpoint holds what the source holds: the same tensor keys, dtypes and global
 * shapes, the same object unique keys and lengths, the same common entries (RS_ERR_MISMATCH
 * naming the first difference). */
rs_status rs__relayout_same_content(const rs__metadata *src, const rs__metadata *dst);

#endif
