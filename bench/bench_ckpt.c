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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "bench.h"
#include "reshard/ckpt_opt.h"

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
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
static char *bench_spec(int ranks, int64_t bytes) {
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
                  "\"seed\":%d,\"mesh\":[%d],\"placements\":\"S0\"}",
                  i ? "," : "", i, (long long)rows, i + 1, ranks);
  for (int i = 0; i < 8; ++i)
    n += snprintf(s + n, cap - (size_t)n,
                  ",{\"key\":\"decoder.layers.%d.input_layernorm.weight\",\"dtype\":\"F32\",\"shape\":[4096],"
                  "\"seed\":%d,\"mesh\":[%d],\"placements\":\"R\"}",
                  i, 100 + i, ranks);
  snprintf(s + n, cap - (size_t)n, "],\"common\":{\"iteration\":\"1\"}}");
  return s;
}

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
static rs_status sequential(const rs_ckpt_world *w, const char *path, int direct, int64_t seg, double *tw, double *tr) {
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
  if (!st && fsync(fd) != 0) st = rs_fail(RS_ERR_IO, "%s: fsync failed", path);
  *tw = mono() - t0;
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
  unlink(path);
  free(buf);
  return st;
}

int rs_bench_ckpt_main(int argc, char **argv) {
  int64_t bytes = (int64_t)2 << 30;
  const char *dir = NULL, *json = NULL;
  int direct = 0, threads = 4, ranks[8] = {1, 2, 4}, nr = 3;
  int64_t seg = (int64_t)8 << 20;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--direct")) direct = 1;
    else if (!strcmp(a, "--bytes") && v) {
      char *e;
      double x = strtod(v, &e);
      if (*e == 'G' || *e == 'g') x *= 1 << 30;
      else if (*e == 'M' || *e == 'm') x *= 1 << 20;
      else if (*e == 'K' || *e == 'k') x *= 1 << 10;
      if (x < 65536 || x > 1e12) {
        fprintf(stderr, "reshard bench ckpt: --bytes: expected 64K .. 1000G\n");
        return 2;
      }
      bytes = (int64_t)x;
      i++;
    } else if (!strcmp(a, "--dir") && v) {
      dir = v;
      i++;
    } else if (!strcmp(a, "--json") && v) {
      json = v;
      i++;
    } else if (!strcmp(a, "--threads") && v) {
      threads = atoi(v);
      if (threads < 1 || threads > 64) {
        fprintf(stderr, "reshard bench ckpt: --threads: expected 1..64\n");
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--ranks") && v) {
      nr = 0;
      for (const char *p = v; *p && nr < 8;) {
        ranks[nr] = atoi(p);
        if (ranks[nr] < 1 || ranks[nr] > 64) {
          fprintf(stderr, "reshard bench ckpt: --ranks: a comma list of 1..64\n");
          return 2;
        }
        nr++;
        p = strchr(p, ',');
        if (!p) break;
        p++;
      }
      i++;
    } else {
      fprintf(stderr,
              "usage: reshard bench ckpt [--bytes 2G] [--ranks 1,2,4] [--dir DIR] [--threads T] [--direct] [--json FILE]\n");
      return 2;
    }
  }
  char dbuf[4200];
  if (!dir) {
    snprintf(dbuf, sizeof dbuf, "reshard-bench-ckpt-%d", (int)getpid());
    dir = dbuf;
  }
  mkdir(dir, 0777);
  FILE *jf = json ? fopen(json, "w") : NULL;
  if (jf) fprintf(jf, "{\"bytes\":%lld,\"direct\":%d,\"threads\":%d,\"runs\":[", (long long)bytes, direct, threads);
  printf("reshard bench ckpt: %.2f GiB state dict, dir %s, %s, %d I/O threads per process\n", bytes / 1073741824.0, dir,
         direct ? "O_DIRECT" : "page cache dropped per file (fsync + posix_fadvise DONTNEED)", threads);
  printf("%5s %12s %12s %12s %12s %12s %12s %10s %10s %10s\n", "ranks", "seq_w MB/s", "save MB/s", "save/seq",
         "seq_r MB/s", "load MB/s", "load/seq", "ro MB/s", "ro/seq", "check");
  int rc = 0;
  for (int k = 0; k < nr && !rc; ++k) {
    char *spec = bench_spec(ranks[k], bytes);
    rs_state_spec s;
    rs_ckpt_world w;
    if (!spec || rs_state_spec_from_json(spec, &s)) {
      fprintf(stderr, "reshard bench ckpt: spec: %s\n", rs_last_error());
      free(spec);
      return 1;
    }
    free(spec);
    if (rs_state_spec_build(&s, RS_FILL_VALUES, &w)) {
      fprintf(stderr, "reshard bench ckpt: build: %s\n", rs_last_error());
      rs_state_spec_free(&s);
      return 1;
    }
    uint64_t d0;
    int64_t b = world_bytes(&w, &d0, 0);
    char path[4400], root[4400];
    snprintf(path, sizeof path, "%s/sequential.bin", dir);
    snprintf(root, sizeof root, "%s/ckpt_%d", dir, ranks[k]);
    double tw = 0, tr = 0, ts = 0, tl = 0, to = 0;
    rs_status st = sequential(&w, path, direct, seg, &tw, &tr);
    rs_ckpt_opt_opts o;
    memset(&o, 0, sizeof o);
    o.io_threads = threads;
    o.segment = seg;
    o.direct = direct;
    rs_ckpt_opt_stats stats;
    if (!st) {
      double t0 = mono();
      st = rs_opt_ckpt_save(NULL, &w, root, 1, &o, &stats);
      ts = mono() - t0;
    }
    char sd[4500];
    snprintf(sd, sizeof sd, "%s/step_1", root);
    uint64_t d1 = 0, d2 = 0;
    for (int ro = 0; ro < 2 && !st; ++ro) {
      world_bytes(&w, NULL, 1);
      drop_dir(sd);
      o.read_once = ro;
      double t0 = mono();
      st = rs_opt_ckpt_load(NULL, &w, root, -1, RS_STRICT_ASSUME_OK_UNEXPECTED, &o, NULL, &stats);
      *(ro ? &to : &tl) = mono() - t0;
      world_bytes(&w, ro ? &d2 : &d1, 0);
    }
    if (st) {
      fprintf(stderr, "reshard bench ckpt: %s\n", rs_last_error());
      rc = 1;
    } else {
      double mb = (double)b / 1e6;
      int ok = d1 == d0 && d2 == d0;
      printf("%5d %12.0f %12.0f %11.2fx %12.0f %12.0f %11.2fx %10.0f %9.2fx %10s\n", ranks[k], mb / tw, mb / ts, tw / ts,
             mb / tr, mb / tl, tr / tl, mb / to, tr / to, ok ? "equal" : "DIFFERS");
      if (!ok) rc = 1;
      if (jf)
        fprintf(jf, "%s{\"ranks\":%d,\"bytes\":%lld,\"seq_write_s\":%.4f,\"seq_read_s\":%.4f,\"save_s\":%.4f,\"load_s\":%.4f,"
                    "\"load_read_once_s\":%.4f}",
                k ? "," : "", ranks[k], (long long)b, tw, tr, ts, tl, to);
    }
    fflush(stdout);
    rm_dir(root);
    rs_ckpt_world_free(&w);
    rs_state_spec_free(&s);
  }
  if (jf) {
    fprintf(jf, "]}\n");
    fclose(jf);
  }
  if (!strncmp(dir, "reshard-bench-ckpt-", 19)) rm_dir(dir);
  return rc;
}
