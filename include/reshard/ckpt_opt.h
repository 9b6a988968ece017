/* ckpt_opt.h - opt's checkpoint save and load (opt/ckpt): the same on-disk format and commit
 * protocol as the reference (reshard/ckpt.h), made parallel the way Megatron-Core's fully-parallel
 * strategies are. Save: the writer of every replicated chunk is chosen among its replicas so that
 * bytes are balanced across ranks; each rank writes its own file with large aligned pwrites from a
 * pool of I/O threads, straight from the tensors' host memory (pwritev; staged only for device
 * memory or unaligned O_DIRECT pieces), each xxh3 block digest taken once as it is written. Load:
 * each rank preads only the digest blocks its requests touch (direct), or every stored chunk is
 * read once by one rank and sent over the transport to every rank that needs it (read-once).
 * Worlds: "local" (every rank in this process), "local-device" (tensor data in CUDA memory, staged
 * through host buffers) and "mpi" (one process per rank; a process's rs_ckpt_world holds only its
 * own state dict at index rs_world_rank, the others' metadata is gathered over the transport). */
#ifndef RESHARD_CKPT_OPT_H
#define RESHARD_CKPT_OPT_H

#include "reshard/ckpt.h"
#include "reshard/opt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rs_ckpt_opt_opts {
  int io_threads;     /* I/O threads per process; 0: rs_opt_ckpt_default_threads() */
  int64_t segment;    /* bytes per pwrite/pread (a power of two >= 4096); 0: 8 MiB */
  int64_t block;      /* digest block of a save (as rs_ckpt_io_opts.block); 0: 1 MiB */
  int read_once;      /* load: each stored chunk read by one rank, sent to the others */
  int64_t round_bytes; /* read-once: bytes of shared chunks in flight per round; 0: 1 GiB */
  int direct;         /* O_DIRECT data files (bypass the page cache) */
  FILE *log;          /* where log_* strict modes write (NULL: stderr) */
  int64_t crash_at;   /* save, tests: a simulated power loss at this counted I/O operation of this
                       * process (past the last: right after the save), as rs_ckpt_io_opts */
  int64_t kill_at;    /* save, tests: SIGKILL this process at this counted I/O operation */
} rs_ckpt_opt_opts;

typedef struct rs_ckpt_opt_stats {
  int64_t bytes_written;  /* by this process */
  int64_t bytes_read;     /* by this process, from data files */
  int64_t bytes_sent;     /* read-once: bytes this process sent over the transport */
  int64_t max_rank_bytes; /* save: the largest byte count one rank wrote (balance) */
  int files;              /* data files written (save) */
  int64_t io_ops;         /* save: counted I/O operations of this process (see crash_at) */
  int64_t sync_ns;        /* save: wall nanoseconds of this process's data-file fsyncs (the part of
                           * a save spent waiting for the disk after the last write) */
  int stage_bufs;         /* host staging buffers the operation used (one per I/O thread) ... */
  int64_t stage_bytes;    /* ... of at least this many bytes each */
  int64_t stage_allocs;   /* staging buffers it allocated: on a device world (CUDA or simulated)
                           * they are pooled across operations, so 0 once the world's pool holds
                           * stage_bufs buffers of stage_bytes */
  int direct;             /* save: this process's data files were opened O_DIRECT (0: not asked,
                           * or the file system refused it and the page cache took the writes) */
  int64_t direct_unstaged; /* save: segments holding tensor bytes (not the header alone) that this
                            * process wrote under O_DIRECT straight from host memory (pwritev, no
                            * staging: every source address and length on 4096 bytes, not the
                            * file's unaligned tail) */
} rs_ckpt_opt_stats;

/* Saves under root/step_<step>/ and commits `latest` (data fsynced, metadata.json by rename and
 * directory fsync, then latest), exactly as rs_ref_ckpt_save does; a step that already holds a
 * checkpoint is refused (RS_ERR_INVALID) as there. world NULL: local. */
rs_status rs_opt_ckpt_save(rs_world *world, rs_ckpt_world *w, const char *root, int64_t step,
                           const rs_ckpt_opt_opts *o, rs_ckpt_opt_stats *stats);
/* Loads as rs_ref_ckpt_load (step < 0: latest; strict handling and report the same). */
rs_status rs_opt_ckpt_load(rs_world *world, rs_ckpt_world *w, const char *root, int64_t step,
                           rs_strict strict, const rs_ckpt_opt_opts *o, rs_ckpt_report *rep,
                           rs_ckpt_opt_stats *stats);

/* Moves the tensor data of the ranks this process holds into the world's device memory (CUDA
 * allocations replace the host buffers, which are freed); nothing to do on a host world. Objects
 * stay on the host. On failure nothing is moved. rs_opt_ckpt_to_host moves the data back into
 * fresh host buffers: call it before rs_ckpt_world_free; it moves every tensor even when a copy
 * fails (that tensor gets zeros) and returns the first error. A local world with the environment
 * variable RS_SIM_DEVICE=1 simulates device memory (docs/ckpt-opt.md): host memory that host code
 * cannot dereference, to test the device path without a GPU. */
rs_status rs_opt_ckpt_to_device(rs_world *world, rs_ckpt_world *w);
rs_status rs_opt_ckpt_to_host(rs_world *world, rs_ckpt_world *w);
/* The default I/O threads per process: the online cores in [2, 8]; with O_DIRECT at least 4. */
int rs_opt_ckpt_default_threads(int direct);
/* 1 when RS_SIM_DEVICE=1 is set (local worlds then simulate device memory) */
int rs_opt_ckpt_sim_device(void);

/* Rank 0's len bytes to every process of the world (nothing to do on a local world). */
rs_status rs_opt_world_bcast(rs_world *world, void *buf, int64_t len);

#ifdef __cplusplus
}
#endif
#endif
