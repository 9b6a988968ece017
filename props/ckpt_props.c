/* ckpt_props.c - the SPEC 11 properties run on generated checkpoint cases: validation accepts every
 * generated state and rejects each planted invalidity by name; a load equals the oracle and its
 * strict mode reports exactly the missing / unexpected keys; exports do not depend on the layout;
 * a power loss at any I/O operation of a save leaves `latest` loadable and correct; one flipped
 * byte is refused by both load and verify. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include "core/ckpt/internal.h"
#include "props/ckpt.h"
#include "core/mutant.h"

static const char *PROP_NAMES[RS_CKPT_PROP_COUNT] = {"ckpt_valid",  "ckpt_reject", "ckpt_load",
                                                     "ckpt_export", "ckpt_crash",  "ckpt_corrupt"};

const char *rs_ckpt_prop_name(rs_ckpt_prop p) { return (unsigned)p < RS_CKPT_PROP_COUNT ? PROP_NAMES[p] : "?"; }

rs_status rs_ckpt_prop_parse(const char *name, rs_ckpt_prop *out) {
  for (int i = 0; i < RS_CKPT_PROP_COUNT; ++i)
    if (strcmp(name, PROP_NAMES[i]) == 0) {
      *out = (rs_ckpt_prop)i;
      return RS_OK;
    }
  return rs_fail(RS_ERR_INVALID, "property: unknown '%s'", name);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  remove(p);
  return 0;
}

void rs_ckpt_rmtree(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

void rs_ckpt_scratch_path(const char *base, const char *what, long tag, char *out, size_t cap) {
  if (base) mkdir(base, 0777); /* a missing --scratch whose parent exists (checked by the CLI) */
  else base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(out, cap, "%s/reshard-%s-%ld", base, what, tag);
  /* RS_MUTANT 958: the campaign works in --scratch itself (and empties it before every case) */
  if (RS_MUTANT(958)) snprintf(out, cap, "%s", base);
}

#define FAIL(...)                          \
  do {                                     \
    snprintf(msg, cap, __VA_ARGS__);       \
    out = RS_FAIL;                         \
    goto done;                             \
  } while (0)

/* ---- helpers ---- */
static rs_status build_applied(const rs_state_spec *s, rs_fill fill, rs_ckpt_world *w) {
  rs_status st = rs_state_spec_build(s, fill, w);
  for (int r = 0; !st && r < w->n; ++r) st = rs_sd_apply_factories(&w->sd[r]);
  return st;
}

static rs_status save_spec(const rs_state_spec *s, const char *root, int64_t step, int64_t block, int64_t crash_at) {
  rs_ckpt_world w;
  rs_status st = rs_state_spec_build(s, RS_FILL_VALUES, &w);
  if (st) return st;
  rs_ckpt_io_opts io = {crash_at, 0, NULL, block};
  st = rs_ref_ckpt_save(&w, root, step, &io, NULL);
  rs_ckpt_world_free(&w);
  return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted distinct keys (tensor keys, object unique keys) of a built world. */
static int world_keys(const rs_ckpt_world *w, char ***out) {
  int n = 0, cap = 0;
  char **v = NULL, uk[2048];
  for (int r = 0; r < w->n; ++r)
    for (int i = 0; i < w->sd[r].nt + w->sd[r].no; ++i) {
      const char *k = uk;
      if (i < w->sd[r].nt) k = w->sd[r].t[i].key;
      else rs_sh_object_unique_key(&w->sd[r].o[i - w->sd[r].nt], uk, sizeof uk);
      int dup = 0;
      for (int j = 0; j < n && !dup; ++j) dup = strcmp(v[j], k) == 0;
      if (!dup && rs__grow((void **)&v, n, &cap, sizeof *v)) v[n++] = rs__strdup(k);
    }
  if (n) qsort(v, (size_t)n, sizeof *v, cmp_str);
  *out = v;
  return n;
}

static void free_keys(char **v, int n) {
  for (int i = 0; i < n; ++i) free(v[i]);
  free(v);
}

/* a \ b into out (both sorted) */
static int minus(char **a, int na, char **b, int nb, char **out) {
  int k = 0;
  for (int i = 0; i < na; ++i)
    if (nb == 0 || !bsearch(&a[i], b, (size_t)nb, sizeof *b, cmp_str)) out[k++] = a[i];
  return k;
}

static int same_list(char **a, int na, char **b, int nb) {
  if (na != nb) return 0;
  for (int i = 0; i < na; ++i)
    if (strcmp(a[i], b[i]) != 0) return 0;
  return 1;
}

static void list_text(char **v, int n, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < n && k < cap; ++i) k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? "," : "", v[i]);
}

/* ---- properties ---- */
static rs_outcome prop_valid(rs_ckpt_case *c, char *msg, size_t cap) {
  const rs_state_spec *s[3] = {&c->a, &c->a2, &c->b};
  const char *nm[3] = {"A", "A2", "B"};
  for (int i = 0; i < 3; ++i) {
    rs_ckpt_world w;
    rs_status st = build_applied(s[i], RS_FILL_VALUES, &w);
    if (!st) st = rs_ckpt_validate(&w);
    rs_ckpt_world_free(&w);
    if (st) {
      snprintf(msg, cap, "a valid state dict (%s) was rejected: %s", nm[i], rs_last_error());
      return RS_FAIL;
    }
  }
  return RS_PASS;
}

static rs_dtype same_size_dtype(rs_dtype t) {
  switch (t) {
    case RS_F32: return RS_I32;
    case RS_I32: return RS_F32;
    case RS_F64: return RS_I64;
    case RS_I64: return RS_F64;
    case RS_F16: return RS_BF16;
    case RS_BF16: return RS_I16;
    case RS_I16: return RS_F16;
    case RS_I8: return RS_U8;
    case RS_U8: return RS_F8_E4M3;
    case RS_F8_E4M3: return RS_F8_E5M2;
    case RS_F8_E5M2: return RS_BOOL;
    default: return RS_I8;
  }
}

static rs_outcome plant_shared_name(rs_ckpt_case *c, rs_choices *ch, char *msg, size_t cap) {
  rs_ckpt_world w;
  if (build_applied(&c->a, RS_FILL_VALUES, &w)) {
    snprintf(msg, cap, "build: %s", rs_last_error());
    return RS_FAIL;
  }
  rs_outcome out = RS_PASS;
  int ro = -1, rt = -1;
  for (int r = 0; r < w.n; ++r) {
    if (ro < 0 && w.sd[r].no) ro = r;
    if (rt < 0 && w.sd[r].nt) rt = r;
  }
  if (ro >= 0 && rt >= 0) {
    const rs_state_dict *so = &w.sd[ro], *stt = &w.sd[rt];
    char uk[2200], old[1100];
    rs_sh_object_unique_key(&so->o[rs_draw(ch, (uint64_t)so->no)], uk, sizeof uk);
    snprintf(old, sizeof old, "%s", stt->t[rs_draw(ch, (uint64_t)stt->nt)].key);
    for (int r = 0; r < w.n; ++r)
      for (int i = 0; i < w.sd[r].nt; ++i)
        if (!strcmp(w.sd[r].t[i].key, old)) {
          char *k = rs__strdup(uk);
          if (!k) {
            snprintf(msg, cap, "out of memory");
            out = RS_FAIL;
            continue;
          }
          free(w.sd[r].t[i].key);
          w.sd[r].t[i].key = k;
        }
    char want[2300];
    snprintf(want, sizeof want, "key '%s'", uk);
    if (out == RS_PASS && rs_ckpt_validate(&w) == RS_OK) {
      snprintf(msg, cap, "tensor '%s' renamed to object unique key '%s' was accepted by validation", old, uk);
      out = RS_FAIL;
    } else if (out == RS_PASS && (!strstr(rs_last_error(), want) || !strstr(rs_last_error(), "namespace"))) {
      snprintf(msg, cap, "tensor '%s' renamed to object unique key '%s' rejected with the wrong message: %s", old, uk,
               rs_last_error());
      out = RS_FAIL;
    }
  }
  rs_ckpt_world_free(&w);
  return out;
}

static rs_outcome prop_reject(rs_ckpt_case *c, rs_choices *ch, char *msg, size_t cap) {
  rs_ckpt_world w;
  rs_outcome out = RS_PASS;
  if (build_applied(&c->a, RS_FILL_VALUES, &w)) {
    snprintf(msg, cap, "build: %s", rs_last_error());
    return RS_FAIL;
  }
  int kind = (int)rs_draw(ch, 6);
  /* candidates: (rank, index) of tensor entries / objects */
  int cand[4096][2], n = 0;
  const char *want = NULL;
  char key[1100];
  for (int r = 0; r < w.n; ++r) {
    rs_state_dict *sd = &w.sd[r];
    int lim = kind >= 4 ? sd->no : sd->nt;
    for (int i = 0; i < lim && n < 4096; ++i) {
      int ok, same = 0;
      /* entries of the same key: a gap needs one left behind (a key that vanishes entirely is
       * a missing key, not an invalid checkpoint), a disagreement needs two */
      for (int r2 = 0; r2 < w.n; ++r2) {
        if (kind >= 4)
          for (int j = 0; j < w.sd[r2].no; ++j) same += strcmp(w.sd[r2].o[j].key, sd->o[i].key) == 0;
        else
          for (int j = 0; j < w.sd[r2].nt; ++j) same += strcmp(w.sd[r2].t[j].key, sd->t[i].key) == 0;
      }
      if (kind >= 4) ok = rs_replica_is_main(&sd->o[i].replica) && (kind == 4 || same >= 2);
      else if (kind <= 1) ok = rs_replica_is_main(&sd->t[i].replica) && sd->t[i].nbytes > 0 && (kind == 0 || same >= 2);
      else ok = same >= 2 && (kind == 2 || sd->t[i].ndim >= 1);
      if (ok) {
        cand[n][0] = r;
        cand[n][1] = i;
        n++;
      }
    }
  }
  if (n == 0) {
    snprintf(msg, cap, "no entry to plant invalidity kind %d on", kind);
    out = RS_SKIP;
    rs_ckpt_world_free(&w);
    return out;
  }
  /* no goto above here: nothing below is skipped on the way to done: (-Wjump-misses-init) */
  int pick = (int)rs_draw(ch, (uint64_t)n), r = cand[pick][0], i = cand[pick][1];
  rs_state_dict *sd = &w.sd[r];
  int other = (r + 1 + (int)rs_draw(ch, (uint64_t)w.n)) % w.n;
  rs_status st;
  const char *e;
  switch (kind) {
    case 0: /* overlap: a second main replica of the same box on another rank */
      snprintf(key, sizeof key, "key '%s'", sd->t[i].key);
      want = "overlap";
      {
        rs_sh_tensor copy = sd->t[i]; /* the add may move sd->t */
        if (rs_sd_add_tensor(&w.sd[other], &copy)) FAIL("%s", rs_last_error());
      }
      break;
    case 1: /* gap: a main replica disappears */
      snprintf(key, sizeof key, "key '%s'", sd->t[i].key);
      want = "gap";
      free(sd->t[i].key);
      free(sd->t[i].data);
      memmove(&sd->t[i], &sd->t[i + 1], sizeof *sd->t * (size_t)(sd->nt - i - 1));
      sd->nt--;
      break;
    case 2:
      snprintf(key, sizeof key, "key '%s'", sd->t[i].key);
      want = "dtype disagreement";
      sd->t[i].dtype = same_size_dtype(sd->t[i].dtype);
      break;
    case 3:
      snprintf(key, sizeof key, "key '%s'", sd->t[i].key);
      want = "global shape disagreement";
      sd->t[i].global_shape[sd->t[i].ndim - 1]++;
      break;
    case 4:
      snprintf(key, sizeof key, "object '%s'", sd->o[i].key);
      want = "overlap";
      {
        rs_sh_object copy = sd->o[i];
        if (rs_sd_add_object(&w.sd[other], &copy)) FAIL("%s", rs_last_error());
      }
      break;
    default:
      snprintf(key, sizeof key, "object '%s'", sd->o[i].key);
      want = "gap";
      free(sd->o[i].key);
      free(sd->o[i].data);
      memmove(&sd->o[i], &sd->o[i + 1], sizeof *sd->o * (size_t)(sd->no - i - 1));
      sd->no--;
      break;
  }
  st = rs_ckpt_validate(&w);
  e = rs_last_error();
  if (st == RS_OK) FAIL("planted %s (%s) was accepted by validation", want, key);
  /* the message names the kind, the key, and where: the region (tensors), the ranks, the shard */
  static const char *WHERE[6] = {"region", "region", "rank", "rank", "ranks", "shard"};
  if (!strstr(e, want) || !strstr(e, key) || !strstr(e, WHERE[kind]))
    FAIL("planted %s (%s) rejected with the wrong message: %s", want, key, e);
  /* drawn last (older fixtures replay unchanged): 1 case in 3 a tensor key is renamed, on every
   * rank, to an object's unique key; validation must refuse the shared name */
  if (rs_draw(ch, 3) == 1) out = plant_shared_name(c, ch, msg, cap);
done:
  rs_ckpt_world_free(&w);
  return out;
}

static rs_outcome prop_load(rs_ckpt_case *c, rs_choices *ch, const char *dir, char *msg, size_t cap) {
  static const int64_t BLOCKS[] = {RS_CKPT_BLOCK, 64, 256};
  int64_t block = BLOCKS[rs_draw(ch, 3)];
  rs_outcome out = RS_PASS;
  rs_ckpt_world got = {0, NULL}, exp = {0, NULL}, aw = {0, NULL}, bw = {0, NULL};
  rs_ckpt_report rep;
  memset(&rep, 0, sizeof rep);
  char **ka = NULL, **kb = NULL, **un = NULL, **mi = NULL;
  int na = 0, nb = 0, nun, nmi, expect_err, rep_un, rep_mi;
  rs_strict m = c->strict;
  FILE *devnull;
  rs_status st;
  if (save_spec(&c->a, dir, 1, block, 0)) FAIL("save A: %s", rs_last_error());
  if (build_applied(&c->a, RS_FILL_VALUES, &aw) || build_applied(&c->b, RS_FILL_VALUES, &bw))
    FAIL("build: %s", rs_last_error());
  na = world_keys(&aw, &ka);
  nb = world_keys(&bw, &kb);
  un = calloc((size_t)nb + 1, sizeof *un);
  mi = calloc((size_t)na + 1, sizeof *mi);
  if (!un || !mi) {
    out = rs_prop_oom(msg, cap, "key lists");
    goto done;
  }
  nun = minus(kb, nb, ka, na, un);
  nmi = minus(ka, na, kb, nb, mi);
  expect_err = (m == RS_STRICT_ASSUME_OK_UNEXPECTED && nun) ||
                   ((m == RS_STRICT_RAISE_UNEXPECTED || m == RS_STRICT_RAISE_ALL) && nun) ||
                   (m == RS_STRICT_RAISE_ALL && nmi);
  rep_un = m != RS_STRICT_ASSUME_OK_UNEXPECTED && m != RS_STRICT_IGNORE_ALL;
  rep_mi = m == RS_STRICT_LOG_ALL || m == RS_STRICT_RAISE_ALL || m == RS_STRICT_RETURN_ALL;
  if (rs_state_spec_build(&c->b, RS_FILL_INITIAL, &got)) FAIL("build B: %s", rs_last_error());
  devnull = fopen("/dev/null", "w");
  st = rs_ref_ckpt_load(&got, dir, -1, m, &(rs_ckpt_io_opts){0, 0, devnull, 0}, &rep);
  if (devnull) fclose(devnull);
  char l1[512], l2[512];
  if (!same_list(rep.unexpected, rep.nunexpected, un, rep_un ? nun : 0)) {
    list_text(rep.unexpected, rep.nunexpected, l1, sizeof l1);
    list_text(un, rep_un ? nun : 0, l2, sizeof l2);
    FAIL("strict %s: reported unexpected keys [%s], expected [%s]", rs_strict_name(m), l1, l2);
  }
  if (!same_list(rep.missing, rep.nmissing, mi, rep_mi ? nmi : 0)) {
    list_text(rep.missing, rep.nmissing, l1, sizeof l1);
    list_text(mi, rep_mi ? nmi : 0, l2, sizeof l2);
    FAIL("strict %s: reported missing keys [%s], expected [%s]", rs_strict_name(m), l1, l2);
  }
  if (expect_err && st == RS_OK) FAIL("strict %s: load succeeded with %d unexpected and %d missing keys", rs_strict_name(m), nun, nmi);
  if (!expect_err && st != RS_OK) FAIL("load failed: %s", rs_last_error());
  {
    /* linear in the checkpoint: every digest block is read (and hashed) at most once per load */
    char sd[4300];
    snprintf(sd, sizeof sd, "%s/step_1", dir);
    int64_t total = rs__ckpt_dir_bytes(sd);
    if (rep.bytes_read > total)
      FAIL("load read %lld bytes from data files of %lld bytes (a block read more than once)", (long long)rep.bytes_read,
           (long long)total);
  }
  if (!expect_err) {
    if (rs_oracle_ckpt_expected(&c->a, &c->b, &exp)) FAIL("oracle: %s", rs_last_error());
    if (rs_oracle_ckpt_compare(&exp, &got, msg, cap)) {
      char tmp[900];
      snprintf(tmp, sizeof tmp, "load != oracle: %s", msg);
      FAIL("%s", tmp);
    }
  }
done:
  free(un);
  free(mi);
  free_keys(ka, na);
  free_keys(kb, nb);
  rs_ckpt_report_free(&rep);
  rs_ckpt_world_free(&got);
  rs_ckpt_world_free(&exp);
  rs_ckpt_world_free(&aw);
  rs_ckpt_world_free(&bw);
  return out;
}

int rs__ckpt_file_bytes(const char *path, uint8_t **b, size_t *n) {
  *b = NULL;
  *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  long l = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (l < 0) {
    fclose(f);
    return 0;
  }
  *b = malloc((size_t)l + 1);
  *n = *b ? fread(*b, 1, (size_t)l, f) : 0;
  if (*b) (*b)[*n] = 0; /* text files can be searched as strings */
  fclose(f);
  return *b != NULL;
}

static rs_outcome prop_export(rs_ckpt_case *c, const char *dir, char *msg, size_t cap) {
  rs_outcome out = RS_PASS;
  char r1[4200], r2[4200], e1[4300], e2[4300];
  snprintf(r1, sizeof r1, "%s/a", dir);
  snprintf(r2, sizeof r2, "%s/a2", dir);
  snprintf(e1, sizeof e1, "%s/a.safetensors", dir);
  snprintf(e2, sizeof e2, "%s/a2.safetensors", dir);
  mkdir(dir, 0777);
  uint8_t *b1 = NULL, *b2 = NULL;
  size_t n1 = 0, n2 = 0;
  if (save_spec(&c->a, r1, 3, 0, 0)) FAIL("save A: %s", rs_last_error());
  if (save_spec(&c->a2, r2, 7, 0, 0)) FAIL("save A2: %s", rs_last_error());
  if (rs_ckpt_export(r1, e1)) FAIL("export A: %s", rs_last_error());
  if (rs_ckpt_export(r2, e2)) FAIL("export A2: %s", rs_last_error());
  if (!rs__ckpt_file_bytes(e1, &b1, &n1) || !rs__ckpt_file_bytes(e2, &b2, &n2)) FAIL("cannot read the exports");
  if (n1 != n2 || memcmp(b1, b2, n1) != 0) {
    size_t k = 0;
    while (k < n1 && k < n2 && b1[k] == b2[k]) k++;
    FAIL("exports differ: %zu and %zu bytes, first difference at byte %zu", n1, n2, k);
  }
done:
  free(b1);
  free(b2);
  return out;
}

rs_outcome rs__ckpt_check_latest(const char *dir, int64_t step1, const rs_state_spec *s1, int64_t step2,
                                 const rs_state_spec *s2, char *msg, size_t cap) {
  int64_t step;
  if (rs_ckpt_latest(dir, &step)) {
    snprintf(msg, cap, "torn: no readable latest (%s)", rs_last_error());
    return RS_FAIL;
  }
  if (step != step1 && step != step2) {
    snprintf(msg, cap, "torn: latest names step %lld", (long long)step);
    return RS_FAIL;
  }
  const rs_state_spec *s = step == step1 ? s1 : s2;
  rs_ckpt_world got, exp = {0, NULL};
  if (rs_state_spec_build(s, RS_FILL_INITIAL, &got)) {
    snprintf(msg, cap, "build: %s", rs_last_error());
    return RS_FAIL;
  }
  rs_outcome out = RS_PASS;
  if (rs_ref_ckpt_load(&got, dir, -1, RS_STRICT_RAISE_ALL, NULL, NULL)) {
    snprintf(msg, cap, "torn: latest (step %lld) does not load: %s", (long long)step, rs_last_error());
    out = RS_FAIL;
  } else if (rs_oracle_ckpt_expected(s, s, &exp) || rs_oracle_ckpt_compare(&exp, &got, msg, cap)) {
    char tmp[700];
    snprintf(tmp, sizeof tmp, "torn: latest (step %lld) loads wrong data: %s", (long long)step, msg);
    snprintf(msg, cap, "%s", tmp);
    out = RS_FAIL;
  } else if (rs_ckpt_verify(dir, NULL)) {
    snprintf(msg, cap, "torn: latest (step %lld) fails verify: %s", (long long)step, rs_last_error());
    out = RS_FAIL;
  }
  rs_ckpt_world_free(&got);
  rs_ckpt_world_free(&exp);
  return out;
}

int64_t rs__ckpt_dir_bytes(const char *dir) {
  int64_t total = 0;
  DIR *d = opendir(dir);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    char p[4600];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    if (strstr(de->d_name, ".safetensors") && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode)) total += sb.st_size;
  }
  if (d) closedir(d);
  return total;
}

void rs__ckpt_reseal(char *m, size_t n) {
  /* the first line is {"digest":"xxh3:<16 hex>",\n and digests the rest */
  const char *nl = memchr(m, '\n', n);
  char *hx = strstr(m, "xxh3:");
  if (!nl || !hx || hx > nl) return;
  char h[17];
  rs__hex64(XXH3_64bits(nl + 1, n - (size_t)(nl + 1 - m)), h);
  memcpy(hx + 5, h, 16);
}

int rs__ckpt_plant_kind(const char *file, int kind, const char *outside) {
  if (kind == 0) {
    /* a symbolic link to an identical copy outside the checkpoint: following it would load the
     * right bytes, so only the read rule can refuse it */
    uint8_t *b;
    size_t n;
    if (!rs__ckpt_file_bytes(file, &b, &n)) return 0;
    FILE *f = fopen(outside, "wb");
    int ok = f && fwrite(b, 1, n, f) == n;
    if (f) fclose(f);
    free(b);
    return ok && unlink(file) == 0 && symlink(outside, file) == 0;
  }
  return unlink(file) == 0 && mkfifo(file, 0600) == 0;
}

rs_status rs__ckpt_shifted_spec(const rs_state_spec *s, uint64_t shift, rs_state_spec *out) {
  rs_status st = rs_state_spec_copy(s, out);
  if (st) return st;
  for (int i = 0; i < out->nt; ++i) out->t[i].seed += shift;
  for (int i = 0; i < out->no; ++i) out->o[i].seed += shift;
  return RS_OK;
}

static rs_outcome prop_crash(rs_ckpt_case *c, rs_choices *ch, const char *dir, char *msg, size_t cap) {
  rs_state_spec next;
  if (rs__ckpt_shifted_spec(&c->a2, 1000003, &next)) {
    snprintf(msg, cap, "copy: %s", rs_last_error());
    return RS_FAIL;
  }
  rs_outcome out = RS_PASS;
  int64_t crash_at = 1 + (int64_t)rs_draw(ch, (uint64_t)(16 + 3 * next.world)); /* some past the end */
  if (save_spec(&c->a, dir, 1, 256, 0)) {
    snprintf(msg, cap, "save step 1: %s", rs_last_error());
    out = RS_FAIL;
  } else {
    rs_status st = save_spec(&next, dir, 2, 256, crash_at);
    if (st && !strstr(rs_last_error(), "simulated crash")) {
      snprintf(msg, cap, "save step 2: %s", rs_last_error());
      out = RS_FAIL;
    } else {
      out = rs__ckpt_check_latest(dir, 1, &c->a, 2, &next, msg, cap);
      if (out == RS_FAIL) {
        char tmp[900];
        snprintf(tmp, sizeof tmp, "power loss at I/O operation %lld of the step-2 save: %s", (long long)crash_at, msg);
        snprintf(msg, cap, "%s", tmp);
      }
    }
  }
  rs_state_spec_free(&next);
  return out;
}

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* verify, ref load (spec a) and export of the checkpoint at dir must each fail with status `want`
 * and a message holding `text`; `what` describes the planted defect */
static rs_outcome readers_refuse(const char *dir, const rs_state_spec *a, rs_status want, const char *text,
                                 const char *what, char *msg, size_t cap) {
  char e[4500];
  snprintf(e, sizeof e, "%s/export.safetensors", dir);
  for (int op = 0; op < 3; ++op) {
    rs_status st;
    if (op == 0) st = rs_ckpt_verify(dir, NULL);
    else if (op == 2) st = rs_ckpt_export(dir, e);
    else {
      rs_ckpt_world got;
      if (rs_state_spec_build(a, RS_FILL_INITIAL, &got)) {
        snprintf(msg, cap, "build: %s", rs_last_error());
        return RS_FAIL;
      }
      st = rs_ref_ckpt_load(&got, dir, -1, RS_STRICT_RAISE_ALL, NULL, NULL);
      rs_ckpt_world_free(&got);
    }
    static const char *OPS[] = {"verify", "ref load", "export"};
    if (st != want || !strstr(rs_last_error(), text)) {
      snprintf(msg, cap, "%s of a checkpoint whose %s: status %d (want %d naming '%s'), %s", OPS[op], what, (int)st,
               (int)want, text, st ? rs_last_error() : "accepted");
      return RS_FAIL;
    }
  }
  return RS_PASS;
}

rs_outcome rs__ckpt_kind_refused(const char *dir, const rs_state_spec *a, const char *path, int kind, char *msg,
                                 size_t cap) {
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  char what[400];
  snprintf(what, sizeof what, "%s is %s", name, kind ? "a FIFO" : "a symbolic link");
  return readers_refuse(dir, a, RS_ERR_UNSUPPORTED, name, what, msg, cap);
}

/* metadata.json of sdir with its first data file name followed by \u0000x, resealed: verify, ref
 * load and export must refuse it as bad input naming the NUL */
static rs_outcome nul_name_refused(const char *dir, const char *sdir, const rs_state_spec *a, char *msg, size_t cap) {
  char mp[4400];
  snprintf(mp, sizeof mp, "%s/metadata.json", sdir);
  uint8_t *m = NULL;
  size_t n = 0;
  if (!rs__ckpt_file_bytes(mp, &m, &n)) {
    snprintf(msg, cap, "cannot read %s", mp);
    return RS_FAIL;
  }
  const char *at = strstr((const char *)m, ".safetensors\"");
  if (!at) {
    free(m);
    return RS_PASS; /* a checkpoint with no data file */
  }
  size_t k = (size_t)(at - (const char *)m) + 12;
  char *e = malloc(n + 16);
  if (!e) {
    free(m);
    snprintf(msg, cap, "out of memory");
    return RS_FAIL;
  }
  memcpy(e, m, k);
  memcpy(e + k, "\\u0000x", 7);
  memcpy(e + k + 7, m + k, n - k);
  free(m);
  rs__ckpt_reseal(e, n + 7);
  FILE *f = fopen(mp, "wb");
  if (f) {
    fwrite(e, 1, n + 7, f);
    fclose(f);
  }
  free(e);
  return readers_refuse(dir, a, RS_ERR_INVALID, "NUL", "metadata.json names a file 'NAME\\u0000x'", msg, cap);
}

static rs_outcome prop_corrupt(rs_ckpt_case *c, rs_choices *ch, const char *dir, char *msg, size_t cap) {
  static const int64_t BLOCKS[] = {64, RS_CKPT_BLOCK, 128};
  if (save_spec(&c->a, dir, 1, BLOCKS[rs_draw(ch, 3)], 0)) {
    snprintf(msg, cap, "save: %s", rs_last_error());
    return RS_FAIL;
  }
  char sdir[4200], names[64][300];
  snprintf(sdir, sizeof sdir, "%s/step_1", dir);
  DIR *d = opendir(sdir);
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)) && n < 64)
    if (de->d_name[0] != '.' && !strstr(de->d_name, ".tmp")) snprintf(names[n++], sizeof names[0], "%s", de->d_name);
  if (d) closedir(d);
  /* readdir order is the filesystem's: sort so a stream means one flip */
  qsort(names, (size_t)n, sizeof names[0], cmp_name);
  if (n == 0) {
    snprintf(msg, cap, "no files in %s", sdir);
    return RS_FAIL;
  }
  char path[4600];
  snprintf(path, sizeof path, "%s/%s", sdir, names[rs_draw(ch, (uint64_t)n)]);
  uint8_t *b = NULL;
  size_t len = 0;
  if (!rs__ckpt_file_bytes(path, &b, &len) || len == 0) {
    free(b);
    snprintf(msg, cap, "cannot read %s", path);
    return RS_FAIL;
  }
  size_t at = (size_t)rs_draw(ch, len);
  uint8_t x = (uint8_t)(1 + rs_draw(ch, 255));
  /* drawn last (a replayed stream that ends draws 0: older fixtures replay as flips): 1 case in 8
   * the file becomes a symbolic link to an identical copy outside the checkpoint, 1 in 8 a FIFO
   * (every reader must refuse either as a file kind, RS_ERR_UNSUPPORTED naming the file, without
   * blocking), 1 in 8 metadata.json names a data file with a NUL after its name, resealed (cJSON
   * would cut the name at the NUL and find the right file: it must be refused) */
  int kind = (int)rs_draw(ch, 8);
  if (kind == 5 || kind == 6) {
    free(b);
    char outside[4400];
    snprintf(outside, sizeof outside, "%s/outside.bin", dir);
    if (!rs__ckpt_plant_kind(path, kind - 5, outside)) {
      snprintf(msg, cap, "cannot plant a %s at %s", kind == 6 ? "FIFO" : "symbolic link", path);
      return RS_FAIL;
    }
    return rs__ckpt_kind_refused(dir, &c->a, path, kind - 5, msg, cap);
  }
  if (kind == 7) {
    free(b);
    return nul_name_refused(dir, sdir, &c->a, msg, cap);
  }
  b[at] ^= x;
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(b, 1, len, f);
    fclose(f);
  }
  free(b);
  rs_outcome out = RS_PASS;
  if (rs_ckpt_verify(dir, NULL) == RS_OK) {
    snprintf(msg, cap, "verify accepted a flipped byte (%s byte %zu ^= 0x%02x)", path, at, x);
    return RS_FAIL;
  }
  rs_ckpt_world got;
  if (rs_state_spec_build(&c->a, RS_FILL_INITIAL, &got)) {
    snprintf(msg, cap, "build: %s", rs_last_error());
    return RS_FAIL;
  }
  if (rs_ref_ckpt_load(&got, dir, -1, RS_STRICT_RAISE_ALL, NULL, NULL) == RS_OK) {
    snprintf(msg, cap, "load accepted a flipped byte (%s byte %zu ^= 0x%02x)", path, at, x);
    out = RS_FAIL;
  }
  rs_ckpt_world_free(&got);
  if (out == RS_PASS) {
    char e[4500];
    snprintf(e, sizeof e, "%s/export.safetensors", dir);
    if (rs_ckpt_export(dir, e) == RS_OK) {
      snprintf(msg, cap, "export accepted a flipped byte (%s byte %zu ^= 0x%02x)", path, at, x);
      out = RS_FAIL;
    }
  }
  return out;
}

rs_outcome rs_ckpt_prop_run(rs_ckpt_prop p, rs_choices *ch, const char *dir, char *msg, size_t cap) {
  rs_ckpt_case c;
  msg[0] = 0;
  if (rs_gen_ckpt_case(ch, &c)) {
    snprintf(msg, cap, "generator: %s", rs_last_error());
    return RS_FAIL;
  }
  rs_ckpt_rmtree(dir);
  mkdir(dir, 0777);
  rs_outcome o;
  switch (p) {
    case RS_CKPT_PROP_VALID: o = prop_valid(&c, msg, cap); break;
    case RS_CKPT_PROP_REJECT: o = prop_reject(&c, ch, msg, cap); break;
    case RS_CKPT_PROP_LOAD: o = prop_load(&c, ch, dir, msg, cap); break;
    case RS_CKPT_PROP_EXPORT: o = prop_export(&c, dir, msg, cap); break;
    case RS_CKPT_PROP_CRASH: o = prop_crash(&c, ch, dir, msg, cap); break;
    default: o = prop_corrupt(&c, ch, dir, msg, cap); break;
  }
  rs_ckpt_case_free(&c);
  return o;
}
