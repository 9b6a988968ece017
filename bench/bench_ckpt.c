/* bench_ckpt.c - `reshard bench ckpt`: opt's checkpoint save and load throughput against the disk.
 * A state dict of --bytes (default 2 GiB: 16 F32 weight matrices sharded along dim 0 plus small
 * replicated norms) is saved and loaded with 1, 2 and 4 ranks on the local world, and in the same
 * run the same bytes are written and read back sequentially by one thread to one file on the same
 * directory: each opt figure is reported as a ratio to that plain sequential I/O. Saves include
 * their fsyncs and the commit; before every read the page cache is emptied of the files read
 * (posix_fadvise DONTNEED after they were fsynced, or O_DIRECT with --direct), so the disk is
 * what is measured. Loads start from zeroed buffers and are checked against a digest of the
 * saved bytes. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "bench.h"
#include "core/last_status.h"
#include "core/numflag.h"
#include "reshard/ckpt_opt.h"
#ifdef RS_BENCH_LIVE
#include "conform/exec.h"
#include "core/ckpt/internal.h"
#include "props/ckpt_reshard.h"
#endif

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define BENCH_MAX_REPS 31

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void drop_file(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return;
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

static void drop_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[8800];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    drop_file(p);
  }
  closedir(d);
}

static void rm_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[8800];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) rm_dir(p);
    else unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

/* the benchmark's state spec: nw weights of rows x 4096 F32 sharded on dim 0, 8 replicated norms */
static char *bench_spec_dim(int ranks, int64_t bytes, int dim) {
  int nw = 16;
  int64_t rows = bytes / nw / (4096 * 4);
  rows = rows / 4 * 4;
  if (rows < 4) rows = 4;
  size_t cap = 8192;
  char *s = malloc(cap);
  if (!s) return NULL;
  int n = snprintf(s, cap, "{\"world\":%d,\"tensors\":[", ranks);
  for (int i = 0; i < nw; ++i)
    n += snprintf(s + n, cap - (size_t)n,
                  "%s{\"key\":\"decoder.layers.%d.mlp.linear_fc1.weight\",\"dtype\":\"F32\",\"shape\":[%lld,4096],"
                  "\"seed\":%d,\"mesh\":[%d],\"placements\":\"S%d\"}",
                  i ? "," : "", i, (long long)rows, i + 1, ranks, dim);
  for (int i = 0; i < 8; ++i)
    n += snprintf(s + n, cap - (size_t)n,
                  ",{\"key\":\"decoder.layers.%d.input_layernorm.weight\",\"dtype\":\"F32\",\"shape\":[4096],"
                  "\"seed\":%d,\"mesh\":[%d],\"placements\":\"R\"}",
                  i, 100 + i, ranks);
  snprintf(s + n, cap - (size_t)n, "],\"common\":{\"iteration\":\"1\"}}");
  return s;
}

static char *bench_spec(int ranks, int64_t bytes) { return bench_spec_dim(ranks, bytes, 0); }

static int64_t world_bytes(const rs_ckpt_world *w, uint64_t *digest, int zero) {
  int64_t b = 0;
  XXH3_state_t *st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (int r = 0; r < w->n; ++r)
    for (int i = 0; i < w->sd[r].nt; ++i) {
      const rs_sh_tensor *t = &w->sd[r].t[i];
      if (rs_replica_is_main(&t->replica)) b += t->nbytes;
      if (digest) XXH3_64bits_update(st, t->data, (size_t)t->nbytes);
      if (zero) memset(t->data, 0, (size_t)t->nbytes);
    }
  if (digest) *digest = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return b;
}

/* plain sequential write (+fsync) and read of the main replicas' bytes, one thread, one file */
static rs_status sequential(const rs_ckpt_world *w, const char *path, int direct, int64_t seg, double *tw, double *tsync,
                            double *tr) {
  uint8_t *buf = NULL;
  if (posix_memalign((void **)&buf, 4096, (size_t)seg)) return rs_fail(RS_ERR_NOMEM, "out of memory");
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | (direct ? O_DIRECT : 0), 0644);
  if (fd < 0) {
    free(buf);
    return rs_fail(RS_ERR_IO, "%s: cannot create (%s)", path, strerror(errno));
  }
  double t0 = mono();
  int64_t fill = 0, total = 0;
  rs_status st = RS_OK;
  for (int r = 0; r < w->n && !st; ++r)
    for (int i = 0; i < w->sd[r].nt && !st; ++i) {
      const rs_sh_tensor *t = &w->sd[r].t[i];
      if (!rs_replica_is_main(&t->replica)) continue;
      for (int64_t o = 0; o < t->nbytes && !st;) {
        int64_t k = seg - fill < t->nbytes - o ? seg - fill : t->nbytes - o;
        memcpy(buf + fill, t->data + o, (size_t)k);
        fill += k;
        o += k;
        if (fill == seg) {
          if (write(fd, buf, (size_t)seg) != seg) st = rs_fail(RS_ERR_IO, "%s: write failed", path);
          total += seg;
          fill = 0;
        }
      }
    }
  if (!st && fill) {
    int64_t wl = direct ? (fill + 4095) / 4096 * 4096 : fill;
    memset(buf + fill, 0, (size_t)(wl - fill));
    if (write(fd, buf, (size_t)wl) != wl) st = rs_fail(RS_ERR_IO, "%s: write failed", path);
    total += fill;
  }
  if (!st && direct && ftruncate(fd, total) != 0) st = rs_fail(RS_ERR_IO, "%s: truncate failed", path);
  double ts = mono();
  if (!st && fsync(fd) != 0) st = rs_fail(RS_ERR_IO, "%s: fsync failed", path);
  *tw = mono() - t0;
  *tsync = mono() - ts;
  close(fd);
  if (!st) {
    drop_file(path);
    fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
    t0 = mono();
    int64_t got = 0;
    for (;;) {
      ssize_t n = read(fd, buf, (size_t)seg);
      if (n <= 0) break;
      got += n;
    }
    *tr = mono() - t0;
    close(fd);
    if (got != total) st = rs_fail(RS_ERR_IO, "%s: read %lld of %lld bytes", path, (long long)got, (long long)total);
  }
  free(buf);
  return st;
}

/* plain sequential read of the file sequential() wrote, one thread, straight into the tensors'
 * buffers (the destination a load fills), in segment-sized read()s */
static rs_status sequential_into(const rs_ckpt_world *w, const char *path, int direct, int64_t seg, double *t) {
  drop_file(path);
  int fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
  if (fd < 0) return rs_fail(RS_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
  rs_status st = RS_OK;
  double t0 = mono();
  for (int r = 0; r < w->n && !st; ++r)
    for (int i = 0; i < w->sd[r].nt && !st; ++i) {
      const rs_sh_tensor *x = &w->sd[r].t[i];
      if (!rs_replica_is_main(&x->replica)) continue;
      for (int64_t o = 0; o < x->nbytes && !st;) {
        int64_t k = x->nbytes - o < seg ? x->nbytes - o : seg;
        ssize_t n = read(fd, x->data + o, (size_t)k);
        if (n <= 0) st = rs_fail(RS_ERR_IO, "%s: read into '%s' failed (%s)", path, x->key, n ? strerror(errno) : "end of file");
        else o += n;
      }
    }
  *t = mono() - t0;
  close(fd);
  return st;
}

static const char B[] = "bench ckpt";

/* a whole file of the benchmark's own into memory */
static rs_status rs__read_file_bench(const char *path, uint8_t **buf, size_t *len) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    if (fd >= 0) close(fd);
    return rs_fail(RS_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
  }
  uint8_t *b = malloc(sb.st_size > 0 ? (size_t)sb.st_size : 1);
  size_t got = 0;
  while (b && got < (size_t)sb.st_size) {
    ssize_t k = read(fd, b + got, (size_t)sb.st_size - got);
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(fd);
  if (!b) return rs_fail(RS_ERR_NOMEM, "out of memory");
  if (got != (size_t)sb.st_size) {
    free(b);
    return rs_fail(RS_ERR_IO, "%s: short read", path);
  }
  *buf = b;
  *len = got;
  return RS_OK;
}

/* A run that failed: exit 3 when it ran out of memory (no verdict on the code), 2 when the user's
 * input was bad (a --dcp command that does not run), else 1. */
static int fail_rc(const char *what, rs_status st) {
  fprintf(stderr, "reshard bench ckpt: %s%s%s\n", what ? what : "", what ? ": " : "", rs_last_error());
  return st == RS_ERR_NOMEM ? 3 : st == RS_ERR_INVALID ? 2 : 1;
}

static int usage_fail(void) {
  fprintf(stderr, "reshard %s\n", rs_last_error());
  return 2;
}

/* what the directory's file system is: the figures on tmpfs (/dev/shm) are memory copies */
static const char *fs_name(const char *dir) {
  struct statfs sf;
  if (statfs(dir, &sf) != 0) return "unknown file system";
  switch ((unsigned long)sf.f_type) {
  case 0xEF53UL: return "ext4";
  case 0x01021994UL: return "tmpfs (memory)";
  case 0x58465342UL: return "xfs";
  case 0x9123683EUL: return "btrfs";
  case 0x794c7630UL: return "overlayfs";
  default: return "other file system";
  }
}

#ifdef RS_BENCH_LIVE
/* Run the user's command `line` as a child bounded by `timeout` s (conform/exec.c: a run that hangs
 * is killed, never waited for without end), keep its last stdout line that starts with '{' in out;
 * *ok: it exited with status 0; how: its exit, or "did not finish". A timeout is exit 2 naming
 * `flag` and --dcp-timeout. */
static rs_status run_json_child(const char *flag, const char *line, double timeout, char *out, size_t cap, int *ok,
                                char *how, size_t hcap) {
  rs_exec *x;
  out[0] = 0;
  rs_status st = rs_exec_start(line, 0, &x);
  if (st) return rs_fail(RS_ERR_INVALID, "%s: cannot run '%s': %s", flag, line, rs_last_error());
  double deadline = mono() + timeout;
  const char *l;
  for (;;) {
    double left = deadline - mono();
    if (left <= 0 || rs_exec_recv(x, left, &l) != RS_OK) break;
    if (l[0] == '{') snprintf(out, cap, "%s", l);
  }
  int timed_out = rs_exec_last_fault(x) == RS_EXEC_TIMEOUT || deadline - mono() <= 0;
  if (timed_out) rs_exec_stop(x, 5.0); /* SIGTERM, then SIGKILL after the grace */
  snprintf(how, hcap, "%s", timed_out ? "did not finish" : rs_exec_exit_text(x));
  *ok = !timed_out && strstr(how, "status 0") != NULL;
  rs_exec_free(x, 5.0);
  if (timed_out)
    return rs_fail(RS_ERR_INVALID, "%s: '%s' did not finish within --dcp-timeout %.0f s (killed)", flag, line, timeout);
  return RS_OK;
}
#endif

/* one DCP run of the same state dict (tools/pytorch/bench_dcp.py --once): its save (raw: data
 * files and .metadata fsynced, no directory fsync; durable: plus the directory fsync a power-loss
 * safe commit needs) and load times */
static rs_status run_dcp(const char *cmd, double timeout, int64_t bytes, int ranks, int threads, const char *dir,
                         double *save_raw, double *save_dur, double *load) {
  char line[9000], out[4096] = "";
  snprintf(line, sizeof line, "%s --once --bytes %lld --ranks %d --threads %d --dir '%s/dcp'", cmd, (long long)bytes, ranks,
           threads, dir);
#ifdef RS_BENCH_LIVE
  int ok;
  char how[128];
  rs_status st = run_json_child("--dcp", line, timeout, out, sizeof out, &ok, how, sizeof how);
  if (st) return st;
#else
  (void)timeout;
  FILE *f = popen(line, "r");
  if (!f) return rs_fail(RS_ERR_IO, "--dcp: cannot run '%s' (%s)", line, strerror(errno));
  char buf[4096];
  while (fgets(buf, sizeof buf, f))
    if (buf[0] == '{') snprintf(out, sizeof out, "%s", buf);
  int rc = pclose(f), ok = rc == 0;
  char how[64];
  snprintf(how, sizeof how, "exited with status %d", rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc));
#endif
  const char *a = strstr(out, "\"save_s\":"), *b = strstr(out, "\"save_durable_s\":"), *c = strstr(out, "\"load_s\":");
  /* the command is the user's: one that does not run or answers no times is bad input (exit 2);
   * DCP's reload differing from what it saved is a failed check (exit 1) */
  if (!ok || !a || !b || !c) return rs_fail(RS_ERR_INVALID, "--dcp: '%s' %s without printing its times", line, how);
  if (!strstr(out, "\"equal\": true"))
    return rs_fail(RS_ERR_MISMATCH, "--dcp: DCP's load of its own checkpoint differs from what it saved ('%s')", line);
  *save_raw = strtod(a + 9, NULL);
  *save_dur = strtod(b + 17, NULL);
  *load = strtod(c + 9, NULL);
  return RS_OK;
}

enum { T_SEQW, T_SEQSYNC, T_SAVE, T_SAVESYNC, T_SEQR, T_SEQT, T_LOAD, T_RO, T_DCPS, T_DCPSD, T_DCPL, T_N };

/* ratio = num / den of times (a throughput ratio): median [min, max] over the reps */
static void print_ratio(const char *name, double t[][T_N], int reps, int num, int den, const char *what) {
  double v[BENCH_MAX_REPS];
  for (int i = 0; i < reps; ++i) v[i] = t[i][num] / t[i][den];
  double med = median(v, reps);
  printf("      %-22s %6.2fx [%.2f, %.2f]  %s\n", name, med, v[0], v[reps - 1], what);
}

#ifdef RS_BENCH_LIVE
/* ---- --reshard: `ckpt reshard` against export + re-save and against DCP load + save ---- */

/* one run of tools/pytorch/bench_dcp_reshard.py --once: DCP saves on `from` processes (untimed),
 * then loads on `to` processes in the other layout and saves again (*t: load + save) */
static rs_status run_dcp_reshard(const char *cmd, double timeout, int64_t bytes, int from, int to, int threads,
                                 const char *dir, double *t, double *tload) {
  char line[9000], out[4096] = "";
  snprintf(line, sizeof line, "%s --once --bytes %lld --ranks %d --to %d --threads %d --dir '%s/dcpr'", cmd,
           (long long)bytes, from, to, threads, dir);
  int ok;
  char how[128];
  rs_status st = run_json_child("--dcp-reshard", line, timeout, out, sizeof out, &ok, how, sizeof how);
  if (st) return st;
  const char *a = strstr(out, "\"total_s\":"), *b = strstr(out, "\"load_s\":");
  if (!ok || !a || !b) return rs_fail(RS_ERR_INVALID, "--dcp-reshard: '%s' %s without printing its times", line, how);
  if (!strstr(out, "\"equal\": true"))
    return rs_fail(RS_ERR_MISMATCH, "--dcp-reshard: DCP's resharded load differs from the source ('%s')", line);
  *t = strtod(a + 10, NULL);
  *tload = strtod(b + 9, NULL);
  return RS_OK;
}

/* export + re-save: the whole tensors exported to one file, read back, cut into the target
 * layout's boxes and saved by opt (what a user without `ckpt reshard` does); times of each part */
static rs_status export_resave(const char *src, const char *dir, const rs_state_spec *target, const rs_ckpt_opt_opts *o,
                               double *t_export, double *t_read, double *t_save) {
  char ex[4400], dst[4400];
  snprintf(ex, sizeof ex, "%s/export.safetensors", dir);
  snprintf(dst, sizeof dst, "%s/resaved", dir);
  double t0 = mono();
  rs_status st = rs_ckpt_export(src, ex);
  drop_file(ex);
  *t_export = mono() - t0;
  if (st) return st;
  t0 = mono();
  uint8_t *b = NULL;
  size_t n = 0;
  rs__st_header h;
  memset(&h, 0, sizeof h);
  st = rs__read_file_bench(ex, &b, &n);
  uint64_t hl = 0;
  if (!st && n >= 8) memcpy(&hl, b, 8);
  if (!st && (n < 8 || hl > n - 8)) st = rs_fail(RS_ERR_IO, "%s: not a safetensors file", ex);
  if (!st) st = rs__st_parse((const char *)b + 8, (size_t)hl, (int64_t)n, &h);
  rs_ckpt_world w = {0, NULL};
  if (!st) st = rs_state_spec_build(target, RS_FILL_NONE, &w);
  const uint8_t *data = b + 8 + hl;
  for (int r = 0; r < w.n && !st; ++r)
    for (int i = 0; i < w.sd[r].nt && !st; ++i) {
      rs_sh_tensor *t = &w.sd[r].t[i];
      int k = rs__st_find(&h, t->key);
      if (k < 0) {
        st = rs_fail(RS_ERR_MISMATCH, "%s: no '%s'", ex, t->key);
        break;
      }
      const uint8_t *g = data + h.e[k].begin;
      if (t->ndim == 1) {
        memcpy(t->data, g + t->global_offset[0] * 4, (size_t)t->nbytes);
        continue;
      }
      int64_t cols = t->global_shape[1], lc = t->local_shape[1];
      for (int64_t row = 0; row < t->local_shape[0]; ++row)
        memcpy(t->data + row * lc * 4, g + ((t->global_offset[0] + row) * cols + t->global_offset[1]) * 4, (size_t)(lc * 4));
    }
  rs__st_free(&h);
  free(b);
  unlink(ex);
  *t_read = mono() - t0;
  t0 = mono();
  rs_ckpt_opt_stats stats;
  if (!st) st = rs_opt_ckpt_save(NULL, &w, dst, 1, o, &stats);
  *t_save = mono() - t0;
  rs_ckpt_world_free(&w);
  rm_dir(dst);
  return st;
}

enum { R_RESHARD, R_RS_PLAN, R_RS_LOAD, R_RS_SAVE, R_RS_VERIFY, R_EXPORT, R_READ, R_RESAVE, R_ER, R_DCP, R_DCPL, R_N };

static void print_rratio(const char *name, double t[][R_N], int reps, int num, int den, const char *what) {
  double v[BENCH_MAX_REPS];
  for (int i = 0; i < reps; ++i) v[i] = t[i][num] / t[i][den];
  double med = median(v, reps);
  printf("  %-26s %6.2fx [%.2f, %.2f]  %s\n", name, med, v[0], v[reps - 1], what);
}

static int bench_reshard(int64_t bytes, int from, int to, int reps, int threads, int direct, const char *dir,
                         const char *dcp, double dcp_timeout) {
  char *ss = bench_spec_dim(from, bytes, 0), *ts = bench_spec_dim(to, bytes, 1);
  rs_state_spec s, target;
  memset(&target, 0, sizeof target);
  int rc = 0;
  if (!ss || !ts || rs_state_spec_from_json(ss, &s)) {
    free(ss);
    free(ts);
    return fail_rc("spec", rs_fail(RS_ERR_NOMEM, "out of memory"));
  }
  rs_status st = rs_state_spec_from_json(ts, &target);
  /* the layout file: the target spec's tensors without seeds (norms left out: carried over) */
  char lay[8192];
  int n = snprintf(lay, sizeof lay, "{\"world\": %d, \"tensors\": [", to);
  for (int i = 0; i < 16; ++i)
    n += snprintf(lay + n, sizeof lay - (size_t)n, "%s{\"key\": \"decoder.layers.%d.mlp.linear_fc1.weight\", \"mesh\": [%d], "
                  "\"placements\": \"S1\"}", i ? ", " : "", i, to);
  snprintf(lay + n, sizeof lay - (size_t)n, "]}");
  free(ss);
  free(ts);
  char src[4400], dst[4400], sd[4500];
  snprintf(src, sizeof src, "%s/src", dir);
  snprintf(dst, sizeof dst, "%s/dst", dir);
  snprintf(sd, sizeof sd, "%s/step_1", src);
  rs_ckpt_opt_opts o;
  memset(&o, 0, sizeof o);
  o.io_threads = threads;
  o.direct = direct;
  /* the source: opt's save of the benchmark's state dict on `from` ranks, S0 (untimed) */
  rs_ckpt_world w;
  if (!st && !(st = rs_state_spec_build(&s, RS_FILL_VALUES, &w))) {
    rs_ckpt_opt_stats stats;
    rm_dir(src);
    st = rs_opt_ckpt_save(NULL, &w, src, 1, &o, &stats);
    rs_ckpt_world_free(&w);
  }
  int64_t payload = 0;
  if (!st) {
    for (int i = 0; i < s.nt; ++i) {
      int64_t e = 4;
      for (int d = 0; d < s.t[i].t.ndim; ++d) e *= s.t[i].t.shape[d];
      payload += e;
    }
    printf("reshard bench ckpt --reshard: %.2f GiB, %d ranks (matrices S0) -> %d ranks (S1, norms carried over), dir %s (%s),\n"
           "  %s, %d I/O threads, %d interleaved rep%s; the source's files dropped from the page cache before each run\n",
           payload / 1073741824.0, from, to, dir, fs_name(dir), direct ? "O_DIRECT" : "buffered", threads, reps,
           reps > 1 ? "s" : "");
    printf("  reshard: `ckpt reshard --impl opt` (load verified, save durable, verify before the commit)\n"
           "  export+resave: `ckpt export` + read the export + cut into the target boxes + opt's save (no verify)\n");
    if (dcp) printf("  DCP: PyTorch DCP load into Shard(1) DTensors on %d processes + save (sync_files, dir fsync)\n", to);
    printf("%4s %9s %7s %7s %7s %8s %9s %7s %8s %9s %7s %8s %6s\n", "rep", "reshard_s", "plan_s", "load_s", "save_s",
           "verify_s", "export_s", "read_s", "resave_s", "exp+res_s", "dcp_s", "dcp_ld_s", "check");
  }
  double t[BENCH_MAX_REPS][R_N];
  memset(t, 0, sizeof t);
  int all_equal = 1;
  for (int rep = 0; rep < reps && !st; ++rep) {
    double *x = t[rep];
    drop_dir(sd);
    rs_ckpt_reshard_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.src = src;
    ro.layout_path = "bench layout";
    ro.layout_text = lay;
    ro.dst = dst;
    ro.step = 2;
    ro.opt = 1;
    ro.oo = o;
    rs_ckpt_reshard_result res;
    double t0 = mono();
    st = rs_ckpt_reshard(&ro, &res);
    x[R_RESHARD] = mono() - t0;
    x[R_RS_PLAN] = res.t_plan;
    x[R_RS_LOAD] = res.t_load;
    x[R_RS_SAVE] = res.t_save;
    x[R_RS_VERIFY] = res.t_verify;
    if (st) break;
    int equal = 1;
    if (rep == 0) { /* the result holds the source's tensors: exports compared once (untimed) */
      char e1[4500], e2[4500];
      snprintf(e1, sizeof e1, "%s/e1.safetensors", dir);
      snprintf(e2, sizeof e2, "%s/e2.safetensors", dir);
      uint8_t *a = NULL, *b = NULL;
      size_t na = 0, nb = 0;
      equal = !rs_ckpt_export(src, e1) && !rs_ckpt_export(dst, e2) && !rs__read_file_bench(e1, &a, &na) &&
              !rs__read_file_bench(e2, &b, &nb) && na == nb && !memcmp(a, b, na);
      free(a);
      free(b);
      unlink(e1);
      unlink(e2);
    }
    all_equal &= equal;
    rm_dir(dst);
    drop_dir(sd);
    st = export_resave(src, dir, &target, &o, &x[R_EXPORT], &x[R_READ], &x[R_RESAVE]);
    x[R_ER] = x[R_EXPORT] + x[R_READ] + x[R_RESAVE];
    if (!st && dcp) st = run_dcp_reshard(dcp, dcp_timeout, bytes, from, to, threads, dir, &x[R_DCP], &x[R_DCPL]);
    if (!st)
      printf("%4d %9.3f %7.3f %7.3f %7.3f %8.3f %9.3f %7.3f %8.3f %9.3f %7.3f %8.3f %6s\n", rep, x[R_RESHARD],
             x[R_RS_PLAN], x[R_RS_LOAD], x[R_RS_SAVE], x[R_RS_VERIFY], x[R_EXPORT], x[R_READ], x[R_RESAVE], x[R_ER], x[R_DCP],
             x[R_DCPL],
             rep ? "" : equal ? "equal" : "DIFFERS");
    fflush(stdout);
  }
  if (st) rc = fail_rc(NULL, st);
  else {
    double v[BENCH_MAX_REPS];
    for (int i = 0; i < reps; ++i) v[i] = (double)payload / 1e6 / t[i][R_RESHARD];
    printf("  reshard: %.0f MB/s of checkpoint (median)\n", median(v, reps));
    print_rratio("reshard vs export+resave", t, reps, R_ER, R_RESHARD, "time of export + re-save / time of ckpt reshard");
    if (dcp) print_rratio("reshard vs DCP load+save", t, reps, R_DCP, R_RESHARD, "time of DCP's load + save / time of ckpt reshard");
    if (!all_equal) rc = 1;
  }
  rm_dir(src);
  rs_state_spec_free(&s);
  rs_state_spec_free(&target);
  return rc;
}
#endif

int rs_bench_ckpt_main(int argc, char **argv) {
  int64_t bytes = (int64_t)2 << 30;
  const char *dir = NULL, *json = NULL, *transport = "local", *dcp = NULL;
  double dcp_timeout = 1800; /* seconds for one DCP run (save and load) */
  int reps = 5, direct = 0, threads = 0, ranks[8] = {1, 2, 4}, nr = 3;
  int64_t seg = (int64_t)8 << 20;
  int reshard = 0, to = 2, ranks_given = 0;
  const char *dcp_reshard = NULL;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    rs_status fst = RS_OK;
    if (rs_bench_int_flag(B, argc, argv, &i, "--reps", 1, BENCH_MAX_REPS, &reps, &fst) ||
        rs_bench_int_flag(B, argc, argv, &i, "--threads", 1, 64, &threads, &fst)) {
      if (fst) return usage_fail();
    } else if (rs_bench_int_flag(B, argc, argv, &i, "--to", 1, 64, &to, &fst)) {
      if (fst) return usage_fail();
    } else if (!strcmp(a, "--reshard")) reshard = 1;
    else if (!strcmp(a, "--dcp-reshard") && v) {
      dcp_reshard = v;
      i++;
    } else if (!strcmp(a, "--direct")) direct = 1;
    else if (!strcmp(a, "--bytes") && v) {
      if (rs__flag_bytes(v, 65536, (int64_t)1000 << 30, &bytes)) {
        fprintf(stderr, "reshard bench ckpt: --bytes: '%s', expected 64K .. 1000G (digits, optional K/M/G/T)\n", v);
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--dir") && v) {
      dir = v;
      i++;
    } else if (!strcmp(a, "--transport") && v) {
      transport = v;
      i++;
    } else if (!strcmp(a, "--json") && v) {
      json = v;
      i++;
    } else if (!strcmp(a, "--dcp") && v) {
      dcp = v;
      i++;
    } else if (!strcmp(a, "--dcp-timeout") && v) {
      if (rs__flag_seconds(v, &dcp_timeout)) {
        fprintf(stderr, "reshard bench ckpt: --dcp-timeout: '%s', expected a number of seconds, 0 < T <= 604800\n", v);
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--ranks") && v) {
      if (rs_bench_int_list(B, "--ranks", v, 1, 64, ranks, 8, &nr)) return usage_fail();
      ranks_given = 1;
      i++;
    } else {
      fprintf(stderr,
              "usage: reshard bench ckpt [--bytes 2G] [--ranks 1,2,4] [--reps 5] [--dir DIR] [--threads T] [--direct]\n"
              "                         [--transport local|local-device] [--dcp 'PYTHON tools/pytorch/bench_dcp.py']\n"
              "                         [--dcp-timeout SEC (default 1800)]\n"
              "       reshard bench ckpt --reshard [--ranks N (default 4)] [--to M (default 2)] [--bytes 2G] [--reps 5]\n"
              "                         [--dir DIR] [--threads T] [--direct] [--dcp-reshard 'PYTHON tools/pytorch/bench_dcp_reshard.py']\n"
              "                         [--json FILE]\n");
      return 2;
    }
  }
  char dbuf[4200];
  if (!dir) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dbuf, sizeof dbuf, "%s/reshard-bench-ckpt-%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    dir = dbuf;
  }
  mkdir(dir, 0777);
  if (!threads) threads = rs_opt_ckpt_default_threads(direct);
  if (reshard || dcp_reshard) {
#ifdef RS_BENCH_LIVE
    if (!reshard || strcmp(transport, "local") || dcp || json) {
      fprintf(stderr, "reshard bench ckpt: --dcp-reshard needs --reshard, which takes no --transport, --dcp or --json\n");
      return 2;
    }
    int rc = bench_reshard(bytes, ranks_given ? ranks[0] : 4, to, reps, threads, direct, dir, dcp_reshard, dcp_timeout);
    if (dir == dbuf) rm_dir(dir);
    return rc;
#else
    fprintf(stderr, "reshard bench ckpt: --reshard needs a build with conform/ and props/\n");
    return 2;
#endif
  }
  rs_world *world = NULL;
  int sim = 0;
  if (!strcmp(transport, "local-device")) {
    sim = rs_opt_ckpt_sim_device();
    if (rs_world_init(sim ? "local" : "local-device", NULL, NULL, &world)) {
      fprintf(stderr, "reshard bench ckpt: %s\n", rs_last_error());
      return 2;
    }
  } else if (strcmp(transport, "local")) {
    fprintf(stderr, "reshard bench ckpt: --transport: '%s', expected local or local-device\n", transport);
    return 2;
  }
  FILE *jf = json ? fopen(json, "w") : NULL;
  if (jf)
    fprintf(jf, "{\"bytes\":%lld,\"direct\":%d,\"threads\":%d,\"reps\":%d,\"transport\":\"%s\",\"runs\":[", (long long)bytes,
            direct, threads, reps, transport);
  printf("reshard bench ckpt: %.2f GiB state dict, dir %s (%s), %s, %d I/O threads, %s%s, %d interleaved rep%s\n",
         bytes / 1073741824.0, dir, fs_name(dir),
         direct ? "O_DIRECT" : "page cache dropped per file (fsync + posix_fadvise DONTNEED)", threads, transport,
         sim ? " (simulated device memory)" : "", reps, reps > 1 ? "s" : "");
  printf("  seq_w: one thread, one file, 8 MiB write()s from one buffer + fsync; seq_r: read()s into one buffer;\n"
         "  seq_t: read()s straight into the tensors; save: files + digests + fsyncs + commit (durable);\n"
         "  load: every byte verified (xxh3); ratios are throughput ratios: median [min, max] of the reps\n");
  if (dcp)
    printf("  DCP: torch.distributed.checkpoint FileSystemWriter(sync_files=True): fsyncs its files and .metadata but\n"
           "  not the directory (raw); durable: plus that directory fsync, as reshard's commit does\n");
  printf("%5s %8s %8s %8s %8s %8s %8s %8s %8s %7s %7s %7s\n", "ranks", "seq_w", "save", "seq_r", "seq_t", "load",
         "ro_load", "dcp_save", "dcp_load", "sync%w", "sync%s", "check");
  int rc = 0;
  for (int k = 0; k < nr && !rc; ++k) {
    char *spec = bench_spec(ranks[k], bytes);
    rs_state_spec s;
    rs_ckpt_world w;
    if (!spec || rs_state_spec_from_json(spec, &s)) {
      rc = !spec ? fail_rc("spec", rs_fail(RS_ERR_NOMEM, "out of memory")) : fail_rc("spec", rs__last_status());
      free(spec);
      break;
    }
    free(spec);
    rs_status bst = rs_state_spec_build(&s, RS_FILL_VALUES, &w);
    if (bst) {
      rc = fail_rc("build", bst);
      rs_state_spec_free(&s);
      break;
    }
    uint64_t d0;
    int64_t b = world_bytes(&w, &d0, 0);
    char path[4400], root[4400], sd[4500];
    snprintf(path, sizeof path, "%s/sequential.bin", dir);
    snprintf(root, sizeof root, "%s/ckpt_%d", dir, ranks[k]);
    snprintf(sd, sizeof sd, "%s/step_1", root);
    double t[BENCH_MAX_REPS][T_N];
    memset(t, 0, sizeof t);
    rs_ckpt_opt_opts o;
    memset(&o, 0, sizeof o);
    o.io_threads = threads;
    o.segment = seg;
    o.direct = direct;
    rs_ckpt_opt_stats stats;
    rs_status st = RS_OK;
    int ok = 1;
    for (int rep = 0; rep < reps && !st; ++rep) {
      double *x = t[rep];
      uint64_t dt = 0;
      /* the disk's plain sequential figures, opt's and DCP's, back to back, so they share the conditions */
      st = sequential(&w, path, direct, seg, &x[T_SEQW], &x[T_SEQSYNC], &x[T_SEQR]);
      if (!st) st = sequential_into(&w, path, direct, seg, &x[T_SEQT]);
      unlink(path);
      if (!st) {
        world_bytes(&w, &dt, 0);
        ok &= dt == d0;
      }
      /* tensor data on the world's device (if any) only while opt runs; zeroing and digests on the host */
      if (!st) st = rs_opt_ckpt_to_device(world, &w);
      if (!st) {
        double t0 = mono();
        st = rs_opt_ckpt_save(world, &w, root, 1, &o, &stats);
        x[T_SAVE] = mono() - t0;
        x[T_SAVESYNC] = stats.sync_ns * 1e-9;
        rs_status back = rs_opt_ckpt_to_host(world, &w);
        if (!st) st = back;
      }
      for (int ro = 0; ro < 2 && !st; ++ro) {
        world_bytes(&w, NULL, 1);
        if ((st = rs_opt_ckpt_to_device(world, &w))) break;
        drop_dir(sd);
        o.read_once = ro;
        double t0 = mono();
        st = rs_opt_ckpt_load(world, &w, root, -1, RS_STRICT_ASSUME_OK_UNEXPECTED, &o, NULL, &stats);
        x[ro ? T_RO : T_LOAD] = mono() - t0;
        rs_status back = rs_opt_ckpt_to_host(world, &w);
        if (!st) st = back;
        uint64_t dl = 0;
        world_bytes(&w, &dl, 0);
        ok &= dl == d0;
      }
      rm_dir(root);
      if (!st && dcp) st = run_dcp(dcp, dcp_timeout, bytes, ranks[k], threads, dir, &x[T_DCPS], &x[T_DCPSD], &x[T_DCPL]);
      if (jf && !st)
        fprintf(jf, "%s{\"ranks\":%d,\"rep\":%d,\"bytes\":%lld,\"seq_write_s\":%.4f,\"seq_fsync_s\":%.4f,\"save_s\":%.4f,"
                    "\"save_fsync_s\":%.4f,\"seq_read_s\":%.4f,\"seq_read_into_s\":%.4f,\"load_s\":%.4f,"
                    "\"load_read_once_s\":%.4f,\"dcp_save_s\":%.4f,\"dcp_save_durable_s\":%.4f,\"dcp_load_s\":%.4f}",
                k || rep ? "," : "", ranks[k], rep, (long long)b, x[T_SEQW], x[T_SEQSYNC], x[T_SAVE], x[T_SAVESYNC],
                x[T_SEQR], x[T_SEQT], x[T_LOAD], x[T_RO], x[T_DCPS], x[T_DCPSD], x[T_DCPL]);
    }
    if (st) {
      rc = fail_rc(NULL, st);
    } else {
      double mb = (double)b / 1e6, v[BENCH_MAX_REPS], med[T_N];
      for (int j = 0; j < T_N; ++j) {
        for (int i = 0; i < reps; ++i) v[i] = t[i][j] > 0 ? mb / t[i][j] : 0;
        med[j] = median(v, reps);
      }
      double fw[BENCH_MAX_REPS], fs[BENCH_MAX_REPS];
      for (int i = 0; i < reps; ++i) {
        fw[i] = 100 * t[i][T_SEQSYNC] / t[i][T_SEQW];
        fs[i] = 100 * t[i][T_SAVESYNC] / t[i][T_SAVE];
      }
      printf("%5d %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f %6.0f%% %6.0f%% %7s\n", ranks[k], med[T_SEQW],
             med[T_SAVE], med[T_SEQR], med[T_SEQT], med[T_LOAD], med[T_RO], med[T_DCPS], med[T_DCPL], median(fw, reps),
             median(fs, reps), ok ? "equal" : "DIFFERS");
      print_ratio("save / seq_w", t, reps, T_SEQW, T_SAVE, "durable save against one writer + fsync");
      if (dcp) {
        print_ratio("save / DCP durable", t, reps, T_DCPSD, T_SAVE, "DCP's save + its directory fsync");
        print_ratio("save / DCP raw", t, reps, T_DCPS, T_SAVE, "DCP as shipped (no directory fsync)");
      }
      print_ratio("load / seq_r", t, reps, T_SEQR, T_LOAD, "verified load against a plain read");
      print_ratio("load / seq_t", t, reps, T_SEQT, T_LOAD, "... against a plain read into the tensors");
      print_ratio("ro_load / seq_t", t, reps, T_SEQT, T_RO, "read-once load");
      if (dcp) print_ratio("load / DCP", t, reps, T_DCPL, T_LOAD, "DCP's load into DTensors");
      if (!ok) rc = 1;
    }
    fflush(stdout);
    rs_ckpt_world_free(&w);
    rs_state_spec_free(&s);
  }
  if (jf) {
    fprintf(jf, "]}\n");
    fclose(jf);
  }
  rs_world_finalize(world);
  if (dir == dbuf) rm_dir(dir);
  return rc;
}
