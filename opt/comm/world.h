/* world.h - the inside of an rs_world: which transport plays the mesh ranks and where data lives. */
#ifndef RS_OPT_WORLD_H
#define RS_OPT_WORLD_H

#include "comm/comm.h"

enum { RS_WORLD_LOCAL = 0, RS_WORLD_MPI = 1, RS_WORLD_NCCL = 2 };

struct rs_world {
  int kind;
  int device; /* buffers the transport touches live in device memory */
  int rank, size;
  int mpi_owned;
  rs_comm *comm; /* local or mpi; NCCL comms come per mesh from `nccl` */
  rs_nccl_world *nccl;
  rs_comm *count; /* the byte counter in front of whichever comm serves the current mesh */
  char name[32];
  void *ckpt_stage; /* opt/ckpt/stage.c: checkpoint staging pool of a device world */
  void (*ckpt_stage_free)(void *);
};

/* The comm that serves mesh m on world w. */
rs_status rs_world_comm(rs_world *w, const rs_mesh *m, rs_comm **out);

#endif
