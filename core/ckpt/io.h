/* io.h - the file rules every checkpoint reader and writer of both implementations share.
 *
 * Reading: rs__ckpt_open_read is the one way to open a checkpoint file (metadata.json, latest, a
 * data file, an imported safetensors file): O_NOFOLLOW | O_NONBLOCK, fstat, anything but a regular
 * file (a symbolic link, a FIFO, a device, a directory) refused with RS_ERR_UNSUPPORTED naming the
 * file, then O_NONBLOCK cleared. A symbolic link could lead a read outside the root; a FIFO would
 * block the reader forever.
 *
 * Writing: the file operations of a save, counted so that a test can stop the save at
 * any one of them: either by SIGKILL (a real crash: what the page cache holds survives) or by a
 * simulated power loss (what was not fsynced is lost: unsynced file data reads back as zeros and
 * renames whose directory was not fsynced are undone). The second is what makes a missing or
 * misplaced fsync visible to a test. */
#ifndef RS_CORE_CKPT_IO_H
#define RS_CORE_CKPT_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include "reshard/ckpt.h"

/* Opens path for reading under the rule above (extra: more open flags, e.g. O_DIRECT). *fd and
 * *sb on success. A missing or unreadable file: RS_ERR_IO naming it. */
rs_status rs__ckpt_open_read(const char *path, int extra, int *fd, struct stat *sb);
/* A step directory that is a symbolic link is refused the same way (RS_ERR_UNSUPPORTED). */
rs_status rs__ckpt_dir_ok(const char *dir);
/* root/latest: the step it names. No latest: RS_ERR_INVALID; malformed: RS_ERR_INVALID naming
 * the file; a symbolic link or a non-regular file: RS_ERR_UNSUPPORTED. */
rs_status rs__ckpt_read_latest(const char *root, int64_t *step);
/* root/step_<step> already holds a committed checkpoint (its metadata.json exists, as any kind of
 * file): RS_ERR_INVALID naming it. Every save of both implementations refuses it. */
rs_status rs__ckpt_refuse_committed(const char *root, int64_t step);

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
/* One counted operation with nothing done (a pwrite of a piece of a data file); stops there when
 * asked. Not thread safe: callers that write from several threads hold a lock around every
 * rs__io call. */
rs_status rs__io_tick(rs__io *io);
/* create/truncate path (counted) and return its descriptor; its content is not durable until
 * rs__io_fsync_fd. flags: more open flags (O_DIRECT). */
rs_status rs__io_create(rs__io *io, const char *path, int flags, int *fd);
rs_status rs__io_fsync_fd(rs__io *io, int fd, const char *path);
/* all n bytes at fd's offset, resuming after short writes (not counted: the caller ticks) */
rs_status rs__io_write_all(int fd, const char *path, const void *buf, size_t n);
/* Records that path was fsynced (by the caller, outside any lock) after its counted tick. */
void rs__io_durable(rs__io *io, const char *path);
/* A power loss now: what was not made durable is lost (see above). */
void rs__io_power_loss(rs__io *io);

/* Whole file into memory (binary safe), opened under the read rule. */
rs_status rs__read_file(const char *path, uint8_t **buf, size_t *len);

#endif
