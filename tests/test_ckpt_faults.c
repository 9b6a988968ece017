/* test_ckpt_faults.c - integrity of checkpoints under faults: single-byte flips of data files and
 * of metadata.json (every one refused by verify and by load, never loaded as data), and hostile
 * checkpoints (path traversal and absolute file names, overlapping or missing chunks, offsets past
 * the end of a file, sizes whose byte count overflows, a safetensors header over 100 MB or with
 * non-contiguous offsets, duplicate keys, truncated files, wrong format or version, a hostile
 * `latest`, symbolic links to elsewhere): each a clear error naming what is wrong, never a crash (the ASan build runs this too)
 * and never a read outside the checkpoint root. Hostile metadata is resealed (its digest line
 * and the data files' block digests recomputed) so the checks behind the digests are reached.
 * Usage: test_ckpt_faults SRC [FLIPS]   (FLIPS defaults to 1200, RS_CKPT_FLIPS overrides) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include "check.h"
#include "core/ckpt/internal.h"
#include "core/values.h"
#include "props/ckpt.h"

#define NFILES 5
static const char *FILES[NFILES] = {"metadata.json", "rank_0.safetensors", "rank_1.safetensors",
                                    "rank_2.safetensors", "rank_3.safetensors"};
static char root[512], step[600];
static uint8_t *pristine[NFILES];
static size_t pristine_len[NFILES];
static rs_state_spec spec;

static int slurp(const char *path, uint8_t **b, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  long l = ftell(f);
  fseek(f, 0, SEEK_SET);
  *b = malloc((size_t)l + 1);
  *n = fread(*b, 1, (size_t)l, f);
  (*b)[*n] = 0;
  fclose(f);
  return 1;
}

static void spill(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  if (n) fwrite(b, 1, n, f);
  fclose(f);
}

static void file_path(int i, char *buf, size_t cap) { snprintf(buf, cap, "%s/%s", step, FILES[i]); }

static void restore(void) {
  char p[800];
  for (int i = 0; i < NFILES; ++i) {
    file_path(i, p, sizeof p);
    unlink(p); /* it may be a planted symbolic link */
    spill(p, pristine[i], pristine_len[i]);
  }
  snprintf(p, sizeof p, "%s/latest", root);
  spill(p, "1\n", 2);
}

/* load must refuse; returns 1 when it did, with its message in msg */
static int load_refuses(char *msg, size_t cap, rs_status *stp) {
  rs_ckpt_world w;
  if (rs_state_spec_build(&spec, RS_FILL_INITIAL, &w)) return 0;
  rs_status st = rs_ref_ckpt_load(&w, root, -1, RS_STRICT_RAISE_ALL, NULL, NULL);
  snprintf(msg, cap, "%s", rs_last_error());
  rs_ckpt_world_free(&w);
  if (stp) *stp = st;
  return st != RS_OK;
}

/* ---- flips ---- */
static void flips(int n) {
  int det_verify = 0, det_load = 0, per_file[NFILES] = {0}, nomem = 0;
  char p[800], msg[1024];
  for (int k = 0; k < n; ++k) {
    uint64_t h = rs_hash3(0x666c6970, 1, (uint64_t)k);
    int fi = (k & 1) ? 0 : 1 + (int)((h >> 40) % (NFILES - 1)); /* half metadata.json */
    size_t at = (size_t)(h % pristine_len[fi]);
    uint8_t x = (uint8_t)(1 + (h >> 32) % 255);
    uint8_t *b = malloc(pristine_len[fi]);
    memcpy(b, pristine[fi], pristine_len[fi]);
    b[at] ^= x;
    file_path(fi, p, sizeof p);
    spill(p, b, pristine_len[fi]);
    free(b);
    per_file[fi]++;
    rs_status st = rs_ckpt_verify(root, NULL);
    if (st != RS_OK) det_verify++;
    else fprintf(stderr, "verify accepted %s byte %zu ^= 0x%02x\n", FILES[fi], at, x);
    rs_status ls;
    if (load_refuses(msg, sizeof msg, &ls)) det_load++;
    else fprintf(stderr, "load accepted %s byte %zu ^= 0x%02x\n", FILES[fi], at, x);
    nomem += st == RS_ERR_NOMEM || ls == RS_ERR_NOMEM;
    spill(p, pristine[fi], pristine_len[fi]);
  }
  printf("flips: %d single-byte flips (%d of metadata.json, %d of data files): detected by verify %d (%.1f%%), by load %d (%.1f%%)\n",
         n, per_file[0], n - per_file[0], det_verify, 100.0 * det_verify / n, det_load, 100.0 * det_load / n);
  CHECK_EQ_I(det_verify, n);
  CHECK_EQ_I(det_load, n);
  CHECK_EQ_I(nomem, 0);
}

/* ---- hostile checkpoints ---- */
/* Rewrites metadata.json's digest line for its (edited) body. */
static void reseal_metadata(const char *body_with_line) {
  const char *nl = strchr(body_with_line, '\n');
  char p[800];
  file_path(0, p, sizeof p);
  if (!nl) return;
  const char *rest = nl + 1;
  char line[64];
  char hx[17];
  rs__hex64(XXH3_64bits(rest, strlen(rest)), hx);
  snprintf(line, sizeof line, "{\"digest\":\"xxh3:%s\",\n", hx);
  size_t a = strlen(line), b = strlen(rest);
  char *out = malloc(a + b + 1);
  memcpy(out, line, a);
  memcpy(out + a, rest, b + 1);
  spill(p, out, a + b);
  free(out);
}

/* metadata.json with every occurrence (or the first only) of `from` replaced by `to`, resealed */
static int edit_metadata(const char *from, const char *to, int all) {
  const char *src = (const char *)pristine[0];
  size_t fl = strlen(from), tl = strlen(to);
  char *out = malloc(pristine_len[0] * 2 + 4096), *o = out;
  int n = 0;
  for (const char *s = src; *s;) {
    const char *hit = (all || n == 0) ? strstr(s, from) : NULL;
    if (!hit) {
      strcpy(o, s);
      o += strlen(s);
      break;
    }
    memcpy(o, s, (size_t)(hit - s));
    o += hit - s;
    memcpy(o, to, tl);
    o += tl;
    s = hit + fl;
    n++;
  }
  *o = 0;
  if (n) reseal_metadata(out);
  free(out);
  return n;
}

/* Data file `fi` replaced by bytes b (same or other length); metadata's size and block digests
 * recomputed so that only the data's own checks can refuse it. */
static void edit_data(int fi, const uint8_t *b, size_t n) {
  char p[800];
  file_path(fi, p, sizeof p);
  spill(p, b, n);
  rs__metadata md;
  if (rs__md_parse((const char *)pristine[0], pristine_len[0], &md)) return;
  for (int i = 0; i < md.nf; ++i) {
    if (strcmp(md.f[i].name, FILES[fi]) != 0) continue;
    int64_t nb = ((int64_t)n + md.f[i].block - 1) / md.f[i].block;
    uint64_t *d = malloc(sizeof *d * (size_t)(nb + 1));
    for (int64_t k = 0; k < nb; ++k) {
      size_t o = (size_t)(k * md.f[i].block), l = n - o < (size_t)md.f[i].block ? n - o : (size_t)md.f[i].block;
      d[k] = XXH3_64bits(b + o, l);
    }
    free(md.f[i].digest);
    md.f[i].digest = d;
    md.f[i].nblocks = (int)nb;
    md.f[i].size = (int64_t)n;
  }
  char *mb;
  size_t ml;
  if (rs__md_write(&md, &mb, &ml) == RS_OK) {
    file_path(0, p, sizeof p);
    spill(p, mb, ml);
    free(mb);
  }
  rs__md_free(&md);
}

static int hostile_n = 0, hostile_ok = 0;

/* verify, load, inspect and export must all refuse, each naming `want` */
static void expect_refused(const char *what, const char *want) {
  char msg[1024], e[800];
  int ok = 1;
  hostile_n++;
  rs_status st = rs_ckpt_verify(root, NULL);
  if (st == RS_OK || !strstr(rs_last_error(), want)) {
    fprintf(stderr, "hostile %s: verify %s: %s (want '%s')\n", what, st ? "message" : "accepted", rs_last_error(), want);
    ok = 0;
  }
  if (!load_refuses(msg, sizeof msg, NULL) || !strstr(msg, want)) {
    fprintf(stderr, "hostile %s: load: %s (want '%s')\n", what, msg, want);
    ok = 0;
  }
  FILE *devnull = fopen("/dev/null", "w");
  st = rs_ckpt_inspect(root, 1, devnull);
  if (devnull) fclose(devnull);
  /* inspect reads metadata only: it must refuse what metadata shows, and never crash otherwise */
  (void)st;
  snprintf(e, sizeof e, "%s/export.safetensors", root);
  if (rs_ckpt_export(root, e) == RS_OK) {
    fprintf(stderr, "hostile %s: export accepted it\n", what);
    ok = 0;
  }
  unlink(e);
  hostile_ok += ok;
  CHECK(ok);
  restore();
}

static void hostile(void) {
  char p[800];
  /* a copy of a data file just outside the step directory: a traversal would find valid bytes */
  snprintf(p, sizeof p, "%s/rank_1.safetensors", root);
  spill(p, pristine[2], pristine_len[2]);
  CHECK(edit_metadata("\"rank_1.safetensors\"", "\"../rank_1.safetensors\"", 1) > 1);
  expect_refused("path traversal", "not a plain file name");
  snprintf(p, sizeof p, "\"%s/rank_1.safetensors\"", root);
  CHECK(edit_metadata("\"rank_1.safetensors\"", p, 1) > 1);
  expect_refused("absolute file name", "not a plain file name");
  CHECK(edit_metadata("\"rank_1.safetensors\"", "\"rank_1.safetensors/\"", 1) > 1);
  expect_refused("file name with a slash", "not a plain file name");
  /* chunks of decoder.layers.0.mlp.linear_fc1.weight: [0:4] [4:8] [8:12] [12:16] on dim 0 */
  CHECK(edit_metadata("\"offsets\":\t[8, 0]", "\"offsets\":\t[4, 0]", 0) == 1);
  expect_refused("overlapping chunks", "overlap");
  CHECK(edit_metadata("\"shape\":\t[48]", "\"shape\":\t[49]", 0) == 1);
  expect_refused("missing chunk (gap)", "gap");
  CHECK(edit_metadata("\"offset\":\t12496", "\"offset\":\t99912496", 0) == 1);
  expect_refused("offset past the end of the file", "rank_0.safetensors");
  CHECK(edit_metadata("\"length\":\t192", "\"length\":\t9223372036854775807", 0) == 1);
  expect_refused("length past the end of the file", "decoder.final_layernorm.weight");
  CHECK(edit_metadata("\"shape\":\t[48]", "\"shape\":\t[4611686018427387904]", 0) == 1);
  expect_refused("byte count overflow (1-d)", "decoder.final_layernorm.weight");
  CHECK(edit_metadata("\"shape\":\t[16, 8]", "\"shape\":\t[4294967296, 4294967296]", 0) == 1);
  expect_refused("element count overflow (2-d)", "overflow");
  CHECK(edit_metadata("\"size\":\t1518", "\"size\":\t9223372036854775807", 0) == 1);
  expect_refused("file size overflow", "metadata");
  CHECK(edit_metadata("\"version\":\t1", "\"version\":\t2", 0) == 1);
  expect_refused("wrong format version", "version");
  CHECK(edit_metadata("\"format\":\t\"reshard-ckpt\"", "\"format\":\t\"other-ckpt\"", 0) == 1);
  expect_refused("wrong format", "format");
  CHECK(edit_metadata("\"tensors\":\t{", "\"tensors\":\t{\"step\":{\"dtype\":\"I64\",\"shape\":[],\"chunks\":[]},", 0) == 1);
  expect_refused("duplicate tensor key", "twice");
  CHECK(edit_metadata("\"files\":\t[{", "\"files\":\t[{\"name\":\"rank_3.safetensors\",\"size\":1,\"block\":64,\"xxh3\":[\"0000000000000000\"]},{", 0) == 1);
  expect_refused("duplicate file", "twice");
  CHECK(edit_metadata("\"step\":\t1,", "\"step\":\t1, \"step\": 2,", 0) == 1);
  expect_refused("duplicate member", "step");
  /* a NUL after a name (cJSON would cut the string there and find the right file or key) */
  CHECK(edit_metadata("\"rank_1.safetensors\"", "\"rank_1.safetensors\\u0000x\"", 1) > 1);
  expect_refused("file name with a NUL", "NUL");
  CHECK(edit_metadata("\"decoder.final_layernorm.weight\"", "\"decoder.final_layernorm.weight\\u0000\"", 0) == 1);
  expect_refused("tensor key with a NUL", "NUL");
  /* a FIFO in place of a data file: refused as a file kind, never waited on */
  file_path(1, p, sizeof p);
  unlink(p);
  CHECK(mkfifo(p, 0600) == 0);
  expect_refused("data file is a FIFO", "a FIFO");
  unlink(p);
  restore();
  /* truncations */
  file_path(1, p, sizeof p);
  spill(p, pristine[1], pristine_len[1] - 100);
  expect_refused("truncated data file", "truncated");
  file_path(0, p, sizeof p);
  spill(p, pristine[0], pristine_len[0] / 2);
  expect_refused("truncated metadata.json", "metadata.json");
  file_path(3, p, sizeof p);
  unlink(p);
  expect_refused("missing data file", "rank_2.safetensors");
  /* safetensors headers behind valid (resealed) digests */
  {
    uint8_t *b = malloc(pristine_len[4]);
    memcpy(b, pristine[4], pristine_len[4]);
    uint64_t big = 200000000; /* 200 MB header */
    for (int i = 0; i < 8; ++i) b[i] = (uint8_t)(big >> (8 * i));
    edit_data(4, b, pristine_len[4]);
    expect_refused("safetensors header over 100 MB", "100 MB");
    memcpy(b, pristine[4], pristine_len[4]);
    for (int i = 0; i < 8; ++i) b[i] = 0xff;
    edit_data(4, b, pristine_len[4]);
    expect_refused("safetensors header length 2^64-1", "safetensors");
    /* shift one entry's data_offsets by one byte (same text length): not contiguous */
    memcpy(b, pristine[4], pristine_len[4]);
    char *hit = strstr((char *)b + 8, "\"data_offsets\":[0,");
    CHECK(hit != NULL);
    if (hit) {
      hit[16] = '1';
      edit_data(4, b, pristine_len[4]);
      expect_refused("safetensors non-contiguous offsets", "safetensors");
    }
    memcpy(b, pristine[4], pristine_len[4]);
    hit = strstr((char *)b + 8, "\"dtype\":\"U8\"");
    CHECK(hit != NULL);
    if (hit) {
      memcpy(hit + 9, "I8", 2);
      edit_data(4, b, pristine_len[4]);
      expect_refused("safetensors entry disagrees with metadata", "rank_3.safetensors");
    }
    free(b);
  }
  /* symbolic links: a data file pointing outside the root, a step directory elsewhere */
  {
    char out[800], tgt[800];
    snprintf(tgt, sizeof tgt, "%s/rank_1.safetensors", root); /* the valid copy planted above */
    file_path(2, p, sizeof p);
    unlink(p);
    if (symlink(tgt, p) == 0) expect_refused("data file is a symbolic link", "symbolic link");
    snprintf(out, sizeof out, "%s-elsewhere", root);
    rs_ckpt_rmtree(out);
    snprintf(p, sizeof p, "%s/step_1", root);
    if (rename(p, out) == 0 && symlink(out, p) == 0) {
      expect_refused("step directory is a symbolic link", "symbolic link");
      unlink(p);
      rename(out, p);
      restore();
    }
  }
  /* hostile latest: never a path */
  snprintf(p, sizeof p, "%s/latest", root);
  spill(p, "../../etc\n", 10);
  expect_refused("latest names a path", "latest");
  spill(p, "99\n", 3);
  expect_refused("latest names a missing step", "step_99");
  printf("hostile: %d hostile checkpoints, %d refused by verify, load and export with a message naming the defect\n",
         hostile_n, hostile_ok);
}

/* The safetensors header parser directly: what a data file's digest would normally hide. */
static void st_unit(void) {
  rs__st_header h;
  static const char *bad[] = {
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,400000]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}",
      "{\"a\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
      "[1,2]",
      "{\"__metadata__\":{\"x\":1}}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i) {
    rs_status st = rs__st_parse(bad[i], strlen(bad[i]), 1024, &h);
    if (st == RS_OK) fprintf(stderr, "safetensors header accepted: %s\n", bad[i]);
    CHECK(st != RS_OK);
    rs__st_free(&h);
  }
  CHECK(rs__st_parse("{}", (size_t)RS_CKPT_MAX_HEADER + 1, (int64_t)RS_CKPT_MAX_HEADER + 100, &h) != RS_OK);
  CHECK(strstr(rs_last_error(), "100 MB") != NULL);
  rs__st_free(&h);
  const char *good = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  CHECK(rs__st_parse(good, strlen(good), 8 + (int64_t)strlen(good) + 4, &h) == RS_OK);
  rs__st_free(&h);
}

int main(int argc, char **argv) {
  const char *src = argc > 1 ? argv[1] : ".";
  int n = argc > 2 ? atoi(argv[2]) : 1200;
  if (getenv("RS_CKPT_FLIPS")) n = atoi(getenv("RS_CKPT_FLIPS"));
  char sp[600];
  snprintf(sp, sizeof sp, "%s/fixtures/ckpt/megatron_tp2_dp2.json", src);
  if (rs_state_spec_from_file(sp, &spec)) {
    fprintf(stderr, "%s\n", rs_last_error());
    return 1;
  }
  snprintf(root, sizeof root, "%s/rs-ckpt-faults-%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
  rs_ckpt_rmtree(root);
  snprintf(step, sizeof step, "%s/step_1", root);
  rs_ckpt_world w;
  CHECK(rs_state_spec_build(&spec, RS_FILL_VALUES, &w) == RS_OK);
  rs_ckpt_io_opts io = {0, 0, NULL, 256}; /* small blocks: flips land in many digests */
  CHECK(rs_ref_ckpt_save(&w, root, 1, &io, NULL) == RS_OK);
  rs_ckpt_world_free(&w);
  for (int i = 0; i < NFILES; ++i) {
    char p[800];
    file_path(i, p, sizeof p);
    CHECK(slurp(p, &pristine[i], &pristine_len[i]));
  }
  char msg[1024];
  CHECK(rs_ckpt_verify(root, NULL) == RS_OK);
  CHECK(!load_refuses(msg, sizeof msg, NULL));
  st_unit();
  flips(n);
  hostile();
  rs_ckpt_rmtree(root);
  for (int i = 0; i < NFILES; ++i) free(pristine[i]);
  rs_state_spec_free(&spec);
  TEST_DONE();
}
