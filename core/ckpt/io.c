/* io.c - counted file operations of a save, with SIGKILL and power-loss injection (see io.h). */
#define _GNU_SOURCE
#include "core/ckpt/io.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/ckpt/internal.h"
#include "core/mutant.h"
#include "core/regular_file.h"

void rs__io_init(rs__io *io, const rs_ckpt_io_opts *o) {
  memset(io, 0, sizeof *io);
  if (o) {
    io->crash_at = o->crash_at;
    io->kill_at = o->kill_at;
  }
}

static void rec_free(rs__io_rec *r) {
  free(r->path);
  free(r->to);
  free(r->old);
}

void rs__io_free(rs__io *io) {
  for (int i = 0; i < io->nrec; ++i) rec_free(&io->rec[i]);
  free(io->rec);
  memset(io, 0, sizeof *io);
}

rs_status rs__ckpt_open_read(const char *path, int extra, int *fd, struct stat *sb) {
  /* no link followed (one planted in a checkpoint must not lead a read outside it), and opening a
   * FIFO must not wait for a writer: the shared rule of core/regular_file.c */
  switch (rs_open_regular(path, extra, fd, sb)) {
  case RS_OPEN_OK: return RS_OK;
  case RS_OPEN_LINK:
    return rs_fail(RS_ERR_UNSUPPORTED, "%s: a symbolic link (refused: a checkpoint file must be a regular file, "
                   "a link could lead outside the checkpoint)", path);
  case RS_OPEN_NOT_REGULAR:
    if (!sb->st_mode) return rs_fail(RS_ERR_UNSUPPORTED, "%s: not a regular file (refused)", path);
    return rs_fail(RS_ERR_UNSUPPORTED, "%s: %s (refused: a checkpoint file must be a regular file)", path,
                   rs_file_kind(sb->st_mode));
  default: return rs_fail(RS_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
  }
}

rs_status rs__ckpt_dir_ok(const char *dir) {
  struct stat sb;
  if (lstat(dir, &sb) == 0 && S_ISLNK(sb.st_mode))
    return rs_fail(RS_ERR_UNSUPPORTED, "%s: the step directory is a symbolic link (refused: it could lead outside the root)",
                   dir);
  return RS_OK;
}

rs_status rs__read_file(const char *path, uint8_t **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  int fd;
  struct stat sb;
  rs_status st = rs__ckpt_open_read(path, 0, &fd, &sb);
  if (st) return st;
  size_t n = (size_t)sb.st_size, got = 0;
  uint8_t *b = malloc(n + 1);
  if (!b) {
    close(fd);
    return rs_fail(RS_ERR_NOMEM, "%s: out of memory", path);
  }
  while (got < n) {
    ssize_t k = read(fd, b + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(fd);
  b[got] = 0;
  *buf = b;
  *len = got;
  return RS_OK;
}

rs_status rs__ckpt_read_latest(const char *root, int64_t *step) {
  char path[4200];
  snprintf(path, sizeof path, "%s/latest", root);
  uint8_t *b;
  size_t n;
  rs_status st = rs__read_file(path, &b, &n);
  if (st == RS_ERR_IO) return rs_fail(RS_ERR_INVALID, "%s: no latest checkpoint", root);
  if (st) return st;
  /* "<digits>\n", at most 19 digits (fits int64) */
  int ok = n >= 2 && n <= 20 && b[n - 1] == '\n';
  int64_t v = 0;
  for (size_t i = 0; ok && i + 1 < n; ++i) {
    if (b[i] < '0' || b[i] > '9') ok = 0;
    else v = v * 10 + (b[i] - '0');
  }
  free(b);
  if (!ok) return rs_fail(RS_ERR_INVALID, "%s: malformed (expected a step number and a newline)", path);
  *step = v;
  return RS_OK;
}

rs_status rs__ckpt_refuse_committed(const char *root, int64_t step) {
  /* data files are rewritten in place: over a committed step (which `latest` may name) a crash
   * would tear it, so, as Megatron's save refuses a non-empty directory, refuse it */
  char md[4200];
  struct stat sb;
  snprintf(md, sizeof md, "%s/step_%lld/metadata.json", root, (long long)step);
  if (lstat(md, &sb) == 0)
    return rs_fail(RS_ERR_INVALID, "%s/step_%lld already holds a checkpoint: saving over it could tear it "
                   "(remove it or save another step)", root, (long long)step);
  return RS_OK;
}

/* Raw writes used by the power-loss undo (never counted). */
static void put_file(const char *path, const void *buf, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  if (len) fwrite(buf, 1, len, f);
  fclose(f);
}

void rs__io_power_loss(rs__io *io) {
  for (int i = io->nrec - 1; i >= 0; --i) {
    rs__io_rec *r = &io->rec[i];
    if (r->type == 1) {
      uint8_t *cur;
      size_t n;
      if (rs__read_file(r->to, &cur, &n) == RS_OK) {
        put_file(r->path, cur, n);
        free(cur);
      }
      if (r->old_exists) put_file(r->to, r->old, (size_t)r->oldlen);
      else unlink(r->to);
      for (int j = 0; j < i; ++j)
        if (io->rec[j].type == 0 && io->rec[j].path && strcmp(io->rec[j].path, r->to) == 0) {
          free(io->rec[j].path);
          io->rec[j].path = rs__strdup(r->path);
        }
    } else if (r->path) {
      uint8_t *cur;
      size_t n;
      if (rs__read_file(r->path, &cur, &n) == RS_OK) {
        memset(cur, 0, n);
        put_file(r->path, cur, n);
        free(cur);
      }
    }
  }
  rs_clear_error();
}

/* Counts one operation; stops the save there when asked. */
rs_status rs__io_tick(rs__io *io) {
  if (io->crashed) return rs_fail(RS_ERR_IO, "simulated crash at I/O operation %lld", (long long)io->crash_at);
  io->ops++;
  if (io->kill_at > 0 && io->ops == io->kill_at) raise(SIGKILL);
  if (io->crash_at > 0 && io->ops == io->crash_at) {
    rs__io_power_loss(io);
    io->crashed = 1;
    return rs_fail(RS_ERR_IO, "simulated crash at I/O operation %lld", (long long)io->crash_at);
  }
  return RS_OK;
}

static rs_status add_rec(rs__io *io, int type, const char *path, const char *to) {
  if (!rs__grow((void **)&io->rec, io->nrec, &io->cap, sizeof *io->rec))
    return rs_fail(RS_ERR_NOMEM, "out of memory");
  rs__io_rec *r = &io->rec[io->nrec];
  memset(r, 0, sizeof *r);
  r->type = type;
  r->path = rs__strdup(path);
  if (to) {
    r->to = rs__strdup(to);
    uint8_t *old;
    size_t n;
    if (rs__read_file(to, &old, &n) == RS_OK) {
      r->old = old;
      r->oldlen = (int64_t)n;
      r->old_exists = 1;
    }
    rs_clear_error();
  }
  io->nrec++;
  return RS_OK;
}

rs_status rs__io_mkdir(rs__io *io, const char *dir) {
  rs_status st = rs__io_tick(io);
  if (st) return st;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return rs_fail(RS_ERR_IO, "%s: cannot create directory (%s)", dir, strerror(errno));
  return RS_OK;
}

rs_status rs__io_write_all(int fd, const char *path, const void *buf, size_t n) {
  const uint8_t *p = buf;
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return rs_fail(RS_ERR_IO, "%s: write failed (%s)", path, strerror(errno));
    p += k;
    n -= (size_t)k;
  }
  return RS_OK;
}

rs_status rs__io_create(rs__io *io, const char *path, int flags, int *fd) {
  *fd = -1;
  rs_status st = rs__io_tick(io);
  if (st) return st;
  int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | flags, 0666);
  if (f < 0) return rs_fail(RS_ERR_IO, "%s: cannot create (%s)", path, strerror(errno));
  int pending = 0;
  for (int i = 0; i < io->nrec; ++i) pending |= io->rec[i].type == 0 && io->rec[i].path && strcmp(io->rec[i].path, path) == 0;
  if (!pending && (st = add_rec(io, 0, path, NULL))) {
    close(f);
    return st;
  }
  *fd = f;
  return RS_OK;
}

rs_status rs__io_write_file(rs__io *io, const char *path, const void *buf, size_t len) {
  int fd;
  rs_status st = rs__io_create(io, path, 0, &fd);
  if (st) return st;
  size_t half = len / 2;
  st = rs__io_write_all(fd, path, buf, half);
  if (!st) st = rs__io_tick(io); /* a kill here leaves a torn file */
  if (!st) st = rs__io_write_all(fd, path, (const uint8_t *)buf + half, len - half);
  close(fd);
  return st;
}

void rs__io_durable(rs__io *io, const char *path) {
  for (int i = 0; i < io->nrec; ++i)
    if (io->rec[i].type == 0 && io->rec[i].path && strcmp(io->rec[i].path, path) == 0) {
      free(io->rec[i].path);
      io->rec[i].path = NULL; /* durable now */
    }
}

rs_status rs__io_fsync(rs__io *io, const char *path) {
  rs_status st = rs__io_tick(io);
  if (st) return st;
  int fd = open(path, O_RDONLY);
  if (fd < 0 || fsync(fd) != 0) {
    if (fd >= 0) close(fd);
    return rs_fail(RS_ERR_IO, "%s: fsync failed (%s)", path, strerror(errno));
  }
  close(fd);
  rs__io_durable(io, path);
  return RS_OK;
}

rs_status rs__io_fsync_fd(rs__io *io, int fd, const char *path) {
  rs_status st = rs__io_tick(io);
  if (st) return st;
  if (fsync(fd) != 0) return rs_fail(RS_ERR_IO, "%s: fsync failed (%s)", path, strerror(errno));
  rs__io_durable(io, path);
  return RS_OK;
}

rs_status rs__io_rename(rs__io *io, const char *from, const char *to) {
  rs_status st = rs__io_tick(io);
  if (st) return st;
  if ((st = add_rec(io, 1, from, to))) return st;
  if (rename(from, to) != 0) return rs_fail(RS_ERR_IO, "rename %s -> %s failed (%s)", from, to, strerror(errno));
  for (int i = 0; i < io->nrec; ++i)
    if (io->rec[i].type == 0 && io->rec[i].path && strcmp(io->rec[i].path, from) == 0) {
      free(io->rec[i].path);
      io->rec[i].path = rs__strdup(to);
    }
  return RS_OK;
}

static int in_dir(const char *path, const char *dir) {
  size_t n = strlen(dir);
  return strncmp(path, dir, n) == 0 && path[n] == '/' && !strchr(path + n + 1, '/');
}

rs_status rs__io_fsync_dir(rs__io *io, const char *dir) {
  rs_status st = rs__io_tick(io);
  if (st) return st;
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0 || fsync(fd) != 0) {
    if (fd >= 0) close(fd);
    return rs_fail(RS_ERR_IO, "%s: directory fsync failed (%s)", dir, strerror(errno));
  }
  close(fd);
  int k = 0;
  for (int i = 0; i < io->nrec; ++i) {
    if (io->rec[i].type == 1 && in_dir(io->rec[i].to, dir)) {
      rec_free(&io->rec[i]);
      continue;
    }
    io->rec[k++] = io->rec[i];
  }
  io->nrec = k;
  return RS_OK;
}
