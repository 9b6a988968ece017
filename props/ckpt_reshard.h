/* ckpt_reshard.h - `reshard ckpt reshard`: a checkpoint read into another layout and world size
 * and written out as a new checkpoint (ref's load and save, or opt's on a local or MPI world),
 * every byte from digest-verified source bytes, the result verified before it is committed; and
 * its property (random source and target layouts from the checkpoint generator: the export of the
 * result equals the export of the source byte for byte). */
#ifndef RS_PROPS_CKPT_RESHARD_H
#define RS_PROPS_CKPT_RESHARD_H

#include "props/ckpt.h"
#include "reshard/ckpt_opt.h"

typedef struct rs_ckpt_reshard_opts {
  const char *src;          /* a checkpoint root (its latest) or a step directory step_<N> */
  const char *layout_path;  /* LAYOUT.json (named in errors) */
  const char *layout_text;  /* its content, when not read from layout_path */
  const char *dst;          /* the new root: absent or an empty directory */
  int64_t step;             /* the step written under dst */
  int opt;                  /* 0: ref's load and save (one process); 1: opt's on `world` */
  rs_world *world;          /* opt: the world (NULL: opt on a local world) */
  rs_ckpt_opt_opts oo;      /* opt's I/O options (block is used by both) */
} rs_ckpt_reshard_opts;

typedef struct rs_ckpt_reshard_result {
  int input_error;   /* the failure is the caller's input (layout, SRC, DST): exit 2 */
  int src_world;     /* data files of the source */
  int world;         /* target ranks */
  int relaid, carried, objects;
  int64_t bytes_read, bytes_written; /* by this process (opt) or all ranks (ref) */
  double t_plan, t_load, t_save, t_verify; /* seconds */
} rs_ckpt_reshard_result;

/* Reads o->src into the layout and writes o->dst/step_<step> with its latest, through a staging
 * root "<dst>.partial" that is verified (every digest, tiling, header rules; the source's keys,
 * dtypes, shapes, objects and common entries) and then renamed to dst. Under MPI every process
 * calls it and every process gets the same status (rank 0 verifies and commits). */
rs_status rs_ckpt_reshard(const rs_ckpt_reshard_opts *o, rs_ckpt_reshard_result *r);

/* The property on the case drawn from ch: A saved by ref on N ranks, a layout made of A2's
 * layouts (M ranks; some tensors left out, so carried over), resharded by ref (impl 0), opt
 * (1) or each in turn (2): the result verifies and its export equals A's export byte for byte;
 * resharding it back to A's layout gives A's export again. dir: scratch (emptied). */
rs_outcome rs_ckpt_reshard_prop_run(rs_choices *ch, int impl, const char *dir, char *msg, size_t cap);

#endif
