/* io.h - the file operations of a checkpoint save, counted so that a test can stop the save at
 * any one of them: either by SIGKILL (a real crash: what the page cache holds survives) or by a
 * simulated power loss (what was not fsynced is lost: unsynced file data reads back as zeros and
 * renames whose directory was not fsynced are undone). The second is what makes a missing or
 * misplaced fsync visible to a test. */
#ifndef RS_REF_CKPT_IO_H
#define RS_REF_CKPT_IO_H

#include <stddef.h>
#include <stdint.h>
#include "reshard/ckpt.h"

typedef struct rs__io_rec {
  int type; /* 0 write, 1 rename */
  char *path, *to;
  uint8_t *old;
  int64_t oldlen;
  int old_exists;
} rs__io_rec;

typedef struct rs__io {
  int64_t crash_at, kill_at, ops;
  int crashed;
  rs__io_rec *rec;
  int nrec, cap;
} rs__io;

void rs__io_init(rs__io *io, const rs_ckpt_io_opts *o);
void rs__io_free(rs__io *io);
rs_status rs__io_mkdir(rs__io *io, const char *dir);
/* create/truncate and write (two counted halves), no sync */
rs_status rs__io_write_file(rs__io *io, const char *path, const void *buf, size_t len);
rs_status rs__io_fsync(rs__io *io, const char *path);
rs_status rs__io_rename(rs__io *io, const char *from, const char *to);
rs_status rs__io_fsync_dir(rs__io *io, const char *dir);

/* Whole file into memory (binary safe). */
rs_status rs__read_file(const char *path, uint8_t **buf, size_t *len);

#endif
