/* ckpt_reshard.c - `reshard ckpt reshard` (ckpt_reshard.h): the source's metadata and the layout
 * give every target rank's state dict (core/ckpt/relayout.c); ref's or opt's load fills it under
 * strict raise_all (every key of the source requested, every block digest verified before a byte
 * is used, every entry filled); ref's or opt's save writes it under a staging root, which is
 * verified and compared with the source before it is renamed to DST. Also the property that holds
 * it to the source through `ckpt export`. */
#define _POSIX_C_SOURCE 200809L
#include "props/ckpt_reshard.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/ckpt/relayout.h"
#include "core/json.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* step directory ".../step_<N>" -> root and N */
static rs_status root_and_step(const char *stepdir, char *root, size_t cap, int64_t *step) {
  char d[4200];
  snprintf(d, sizeof d, "%s", stepdir);
  size_t n = strlen(d);
  while (n > 1 && d[n - 1] == '/') d[--n] = 0;
  char *b = strrchr(d, '/');
  const char *base = b ? b + 1 : d;
  long long s = -1;
  int len = 0;
  if (sscanf(base, "step_%lld%n", &s, &len) != 1 || base[len] || s < 0 || base[5] < '0' || base[5] > '9')
    return rs_fail(RS_ERR_INVALID, "%s: a step directory must be named step_<N> (inside its root)", stepdir);
  if (b == d) snprintf(root, cap, "/");
  else if (b) {
    *b = 0;
    snprintf(root, cap, "%s", d);
  } else snprintf(root, cap, ".");
  *step = s;
  return RS_OK;
}

/* DST: absent (its parent a directory) or an empty directory; the staging root must not exist */
static rs_status dst_ok(const char *dst, const char *staging) {
  struct stat sb;
  if (lstat(dst, &sb) == 0) {
    if (S_ISLNK(sb.st_mode))
      return rs_fail(RS_ERR_INVALID, "--root: '%s' is a symbolic link (give a new or empty directory)", dst);
    if (!S_ISDIR(sb.st_mode)) return rs_fail(RS_ERR_INVALID, "--root: '%s' exists and is not a directory", dst);
    DIR *dd = opendir(dst);
    if (!dd) return rs_fail(RS_ERR_INVALID, "--root: '%s': cannot open (%s)", dst, strerror(errno));
    struct dirent *e;
    int entries = 0;
    while ((e = readdir(dd)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) entries++;
    closedir(dd);
    if (entries)
      return rs_fail(RS_ERR_INVALID, "--root: '%s' is not empty (ckpt reshard writes a new checkpoint root: give a "
                     "new or empty directory)", dst);
  } else if (errno != ENOENT) {
    return rs_fail(RS_ERR_INVALID, "--root: '%s': %s", dst, strerror(errno));
  }
  if (lstat(staging, &sb) == 0)
    return rs_fail(RS_ERR_INVALID, "--root: '%s' exists (left by an interrupted ckpt reshard? remove it)", staging);
  return RS_OK;
}

static rs_status fsync_parent(const char *path) {
  char d[4200];
  snprintf(d, sizeof d, "%s", path);
  char *b = strrchr(d, '/');
  if (b == d) d[1] = 0;
  else if (b) *b = 0;
  else snprintf(d, sizeof d, ".");
  int fd = open(d, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return rs_fail(RS_ERR_IO, "%s: cannot open to fsync (%s)", d, strerror(errno));
  int rc = fsync(fd);
  close(fd);
  return rc ? rs_fail(RS_ERR_IO, "%s: fsync failed (%s)", d, strerror(errno)) : RS_OK;
}

/* every process's status (MPI); a process that did not fail itself reports its peers' failure */
static rs_status agree(rs_world *world, int mpi, rs_status st) {
  if (!mpi) return st;
  int flags = 0;
  rs_status a = rs_world_agree_status(world, st, &flags);
  if (a) return a;
  if (st || !flags) return st;
  return flags & RS_AGREE_NOMEM ? rs_fail(RS_ERR_NOMEM, "another process ran out of memory")
                                : rs_fail(RS_ERR_IO, "another process failed (its message names the cause)");
}

/* verify (every digest, headers, tiling) and the source's keys, shapes, objects, common entries */
static rs_status check_written(const char *staging, int64_t step, const rs__metadata *src) {
  rs_status st = rs_ckpt_verify(staging, NULL);
  if (st) return st;
  char sd[4400];
  snprintf(sd, sizeof sd, "%s/step_%lld", staging, (long long)step);
  rs__metadata dm;
  if ((st = rs__relayout_read_md(sd, &dm))) return st;
  st = rs__relayout_same_content(src, &dm);
  rs__md_free(&dm);
  return st;
}

rs_status rs_ckpt_reshard(const rs_ckpt_reshard_opts *o, rs_ckpt_reshard_result *r) {
  memset(r, 0, sizeof *r);
  rs_world *world = o->world;
  int mpi = o->opt && world && !rs_world_is_local(world);
  int me = mpi ? rs_world_rank(world) : 0, only = mpi ? me : -1;
  double t0 = now();
  char *stepdir = NULL, root[4200], staging[4300];
  int64_t sstep = -1;
  rs__metadata md;
  memset(&md, 0, sizeof md);
  rs_state_spec target;
  memset(&target, 0, sizeof target);
  rs_ckpt_world w = {0, NULL};
  int staged = 0;
  rs_status st = RS_OK;
  if (o->step < 0) st = rs_fail(RS_ERR_INVALID, "--step: %lld (must be >= 0)", (long long)o->step);
  else if (strlen(o->dst) > 4000 || !o->dst[0]) st = rs_fail(RS_ERR_INVALID, "--root: empty or too long");
  /* SRC: a directory that holds no checkpoint is bad input, as for the other verbs */
  if (!st && (st = rs_ckpt_resolve_dir(o->src, &stepdir))) r->input_error = st != RS_ERR_NOMEM;
  if (!st && (st = root_and_step(stepdir, root, sizeof root, &sstep))) r->input_error = 1;
  /* the source's metadata: damage is an integrity failure (1), a link or a FIFO bad input (2) */
  if (!st) st = rs__relayout_read_md(stepdir, &md);
  if (!st && (st = rs__relayout_read(o->layout_path, o->layout_text, &md, &target))) r->input_error = st != RS_ERR_NOMEM;
  if (!st && mpi && target.world != rs_world_size(world)) {
    st = rs_fail(RS_ERR_INVALID, "%s: world: %d ranks, but %d processes run (one process per target rank)",
                 o->layout_path ? o->layout_path : "layout", target.world, rs_world_size(world));
    r->input_error = 1;
  }
  /* DST without trailing slashes; the staging root beside it */
  char dst[4200];
  snprintf(dst, sizeof dst, "%s", o->dst);
  for (size_t n = strlen(dst); n > 1 && dst[n - 1] == '/'; --n) dst[n - 1] = 0;
  snprintf(staging, sizeof staging, "%s.partial", dst);
  if (!st && (st = dst_ok(dst, staging))) r->input_error = 1;
  st = agree(world, mpi, st);
  if (!st) {
    staged = 1;
    r->world = target.world;
    r->src_world = md.nf;
    r->relaid = target.nt;
    r->objects = md.no;
    st = rs__relayout_build(&target, &md, only, &w, &r->carried);
  }
  st = agree(world, mpi, st);
  double t1 = now();
  r->t_plan = t1 - t0;
  rs_ckpt_report rep;
  memset(&rep, 0, sizeof rep);
  if (!st) {
    if (o->opt) {
      rs_ckpt_opt_stats stats;
      memset(&stats, 0, sizeof stats);
      st = rs_opt_ckpt_load(world, &w, root, sstep, RS_STRICT_RAISE_ALL, &o->oo, &rep, &stats);
      r->bytes_read = stats.bytes_read;
    } else {
      rs_ckpt_io_opts io = {0, 0, stderr, 0};
      st = rs_ref_ckpt_load(&w, root, sstep, RS_STRICT_RAISE_ALL, &io, &rep);
      r->bytes_read = rep.bytes_read;
    }
    rs_ckpt_report_free(&rep);
    /* nothing is written that the load did not fill from verified source bytes */
    if (!st) st = rs__relayout_all_loaded(&w, only);
    st = agree(world, mpi, st);
  }
  double t2 = now();
  r->t_load = t2 - t1;
  if (!st) {
    if (o->opt) {
      rs_ckpt_opt_stats stats;
      memset(&stats, 0, sizeof stats);
      st = rs_opt_ckpt_save(world, &w, staging, o->step, &o->oo, &stats);
      r->bytes_written = stats.bytes_written;
    } else {
      rs_ckpt_io_opts io = {0, 0, NULL, o->oo.block};
      st = rs_ref_ckpt_save(&w, staging, o->step, &io, NULL);
    }
    st = agree(world, mpi, st);
  }
  rs_ckpt_world_free(&w);
  double t3 = now();
  r->t_save = t3 - t2;
  /* verified before it is committed: rank 0 checks the staged checkpoint, then renames it */
  if (!st && me == 0) st = check_written(staging, o->step, &md);
  st = agree(world, mpi, st);
  if (!st && me == 0) {
    if (rename(staging, dst) != 0)
      st = rs_fail(RS_ERR_IO, "%s -> %s: rename failed (%s)", staging, dst, strerror(errno));
    else st = fsync_parent(dst);
  }
  st = agree(world, mpi, st);
  r->t_verify = now() - t3;
  if (st && staged && me == 0) rs_ckpt_rmtree(staging);
  free(stepdir);
  rs__md_free(&md);
  rs_state_spec_free(&target);
  return st;
}

/* ---- the property ---- */
#define FAILF(...)                      \
  do {                                  \
    snprintf(msg, cap, __VA_ARGS__);    \
    out = RS_FAIL;                      \
    goto done;                          \
  } while (0)

/* spec s as a layout: keys, meshes, placements, orders, flatten and prepend of the tensors kept
 * (keep[i]), dtype and shape sometimes restated; no seeds, factories, objects or common entries */
static char *layout_of(const rs_state_spec *s, const int *keep, const int *restate) {
  char *text = rs_state_spec_to_json(s);
  if (!text) return NULL;
  cJSON *root = NULL;
  if (rs_json_parse(text, &root)) {
    free(text);
    return NULL;
  }
  free(text);
  cJSON_DeleteItemFromObjectCaseSensitive(root, "objects");
  cJSON_DeleteItemFromObjectCaseSensitive(root, "common");
  cJSON_DeleteItemFromObjectCaseSensitive(root, "nonpersistent");
  cJSON *ts = cJSON_GetObjectItemCaseSensitive(root, "tensors");
  for (int i = s->nt - 1; i >= 0; --i) {
    if (!keep[i]) {
      cJSON_DeleteItemFromArray(ts, i);
      continue;
    }
    cJSON *t = cJSON_GetArrayItem(ts, i);
    const char *drop[] = {"seed", "factory", "glu_dim", "allow_shape_mismatch"};
    for (int k = 0; k < 4; ++k) cJSON_DeleteItemFromObjectCaseSensitive(t, drop[k]);
    if (!restate[i]) {
      cJSON_DeleteItemFromObjectCaseSensitive(t, "dtype");
      cJSON_DeleteItemFromObjectCaseSensitive(t, "shape");
    }
  }
  text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return text;
}

static int same_files(const char *a, const char *b) {
  uint8_t *x = NULL, *y = NULL;
  size_t nx = 0, ny = 0;
  int same = rs__ckpt_file_bytes(a, &x, &nx) && rs__ckpt_file_bytes(b, &y, &ny) && nx == ny && !memcmp(x, y, nx);
  free(x);
  free(y);
  return same;
}

rs_outcome rs_ckpt_reshard_prop_run(rs_choices *ch, int impl, const char *dir, char *msg, size_t cap) {
  rs_ckpt_case c;
  memset(&c, 0, sizeof c);
  if (rs_gen_ckpt_case(ch, &c)) {
    snprintf(msg, cap, "generator: %s", rs_last_error());
    return RS_SKIP;
  }
  rs_outcome out = RS_PASS;
  char src[4200], dst[4200], back[4200], e1[4200], e2[4200], e3[4200];
  char *lay = NULL, *lay_back = NULL;
  int *keep = NULL, *restate = NULL, *all = NULL, *none = NULL;
  rs_ckpt_world w = {0, NULL};
  rs_ckpt_io_opts io = {0, 0, NULL, 0};
  rs_ckpt_reshard_opts o;
  rs_ckpt_reshard_result res;
  int n = 0, which = 0;
  rs_ckpt_rmtree(dir);
  mkdir(dir, 0777);
  snprintf(src, sizeof src, "%s/src", dir);
  snprintf(dst, sizeof dst, "%s/dst", dir);
  snprintf(back, sizeof back, "%s/back", dir);
  snprintf(e1, sizeof e1, "%s/src.safetensors", dir);
  snprintf(e2, sizeof e2, "%s/dst.safetensors", dir);
  snprintf(e3, sizeof e3, "%s/back.safetensors", dir);
  /* the source: A saved by ref on N ranks */
  if (rs_state_spec_build(&c.a, RS_FILL_VALUES, &w)) {
    snprintf(msg, cap, "build A: %s", rs_last_error());
    out = RS_SKIP;
    goto done;
  }
  io.block = (int64_t)64 << rs_draw(ch, 3) * 7; /* 64 B, 8 KiB, 1 MiB */
  if (rs_ref_ckpt_save(&w, src, 1, &io, NULL)) {
    snprintf(msg, cap, "save A: %s", rs_last_error());
    out = RS_SKIP;
    goto done;
  }
  /* the target: A2's layouts on M ranks, about one tensor in four left out (carried over) */
  n = c.a2.nt > c.a.nt ? c.a2.nt : c.a.nt;
  keep = calloc((size_t)n + 1, sizeof *keep);
  restate = calloc((size_t)n + 1, sizeof *restate);
  all = calloc((size_t)n + 1, sizeof *all);
  none = calloc((size_t)n + 1, sizeof *none);
  if (!keep || !restate || !all || !none) FAILF("out of memory");
  for (int i = 0; i < n; ++i) {
    keep[i] = rs_draw(ch, 4) != 0;
    restate[i] = rs_draw(ch, 3) == 0;
    all[i] = 1;
  }
  lay = layout_of(&c.a2, keep, restate);
  lay_back = layout_of(&c.a, all, none);
  if (!lay || !lay_back) FAILF("layout: out of memory");
  which = impl == 2 ? (int)rs_draw(ch, 2) : impl;
  memset(&o, 0, sizeof o);
  o.src = src;
  o.layout_path = "layout";
  o.layout_text = lay;
  o.dst = dst;
  o.step = 2;
  o.opt = which;
  o.oo.io_threads = 1 + (int)rs_draw(ch, 2);
  o.oo.segment = 4096;
  o.oo.block = (int64_t)64 << rs_draw(ch, 3) * 7;
  o.oo.read_once = (int)rs_draw(ch, 2);
  if (rs_ckpt_reshard(&o, &res)) FAILF("reshard (%s) to %d ranks failed: %s (layout %s)", which ? "opt" : "ref",
                                       c.a2.world, rs_last_error(), lay);
  if (rs_ckpt_export(src, e1)) FAILF("export of the source: %s", rs_last_error());
  if (rs_ckpt_export(dst, e2)) FAILF("export of the result: %s", rs_last_error());
  if (!same_files(e1, e2))
    FAILF("the export of the result (%s, %d -> %d ranks) differs from the source's; layout %s", which ? "opt" : "ref",
          c.a.world, c.a2.world, lay);
  /* and back to A's own layout on N ranks, by the other implementation */
  o.src = dst;
  o.layout_text = lay_back;
  o.dst = back;
  o.step = 3;
  o.opt = impl == 2 ? !which : which;
  if (rs_ckpt_reshard(&o, &res)) FAILF("reshard back (%s) to %d ranks failed: %s", o.opt ? "opt" : "ref", c.a.world,
                                       rs_last_error());
  if (rs_ckpt_export(back, e3)) FAILF("export of the round trip: %s", rs_last_error());
  if (!same_files(e1, e3)) FAILF("the export after the round trip %d -> %d -> %d ranks differs from the source's",
                                 c.a.world, c.a2.world, c.a.world);
done:
  rs_ckpt_world_free(&w);
  free(lay);
  free(lay_back);
  free(keep);
  free(restate);
  free(all);
  free(none);
  rs_ckpt_case_free(&c);
  return out;
}
