/* ckpt.c - the checkpoint suite of `reshard conform` (SPEC 11): props' checkpoint generator (state
 * specs on N ranks, the same tensors on M ranks in other layouts, uneven and empty shards, every
 * dtype) drives save-then-load-into-another-layout through the backend; what it loads is held to
 * the oracle bit for bit. A backend that writes reshard's format is also held to `reshard ckpt
 * verify` and to reshard's own loader reading its checkpoint. Megatron-only features (sharded
 * objects, factories, flattened optimizer fragments, prepended axes, common entries) are taken
 * out of the specs: the suite holds tensors, which every checkpoint library has. Failures are
 * shrunk through the choice stream, as every campaign of props. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform/suite.h"
#include "core/json.h"
#include "core/values.h"
#include "props/ckpt.h"
#include "props/report.h"
#include "props/runner.h"

/* Plain tensors only: Megatron's ways of cutting a tensor into state-dict entries (flattened
 * fragments, GLU factories) are dropped from its description (the tensor and its layout stay),
 * tensors with prepended axes and the objects and byte entries are dropped. */
static void strip(rs_state_spec *s) {
  int k = 0;
  for (int i = 0; i < s->nt; i++) {
    rs_spec_tensor *t = &s->t[i];
    t->flatten_dim = -1, t->factory = -1, t->allow_shape_mismatch = 0;
    if (t->prepend > 0) free(t->key);
    else s->t[k++] = *t;
  }
  s->nt = k;
  for (int i = 0; i < s->no; i++) free(s->o[i].key);
  s->no = 0;
  for (int i = 0; i < s->ncommon; i++) free(s->common[i].key), free(s->common[i].val);
  s->ncommon = 0;
  for (int i = 0; i < s->nnp; i++) free(s->nonpersistent[i].key), free(s->nonpersistent[i].val);
  s->nnp = 0;
}

/* Keep only the load spec's tensors the save spec has too (and the other way round): a backend is
 * held to loading what was saved, not to Megatron's strict handling of missing keys. */
static void common_keys(rs_state_spec *a, rs_state_spec *b) {
  for (int pass = 0; pass < 2; pass++) {
    rs_state_spec *x = pass ? b : a, *y = pass ? a : b;
    int k = 0;
    for (int i = 0; i < x->nt; i++) {
      int found = 0;
      for (int j = 0; j < y->nt && !found; j++) found = strcmp(x->t[i].key, y->t[j].key) == 0;
      if (found) x->t[k++] = x->t[i];
      else free(x->t[i].key);
    }
    x->nt = k;
  }
}

typedef struct ck_case {
  rs_state_spec save, load;
} ck_case;

static void ck_free(ck_case *c) {
  rs_state_spec_free(&c->save);
  rs_state_spec_free(&c->load);
}

/* A case from the stream: RS_OK, or RS_ERR_UNSUPPORTED when nothing is left after stripping. */
static rs_status ck_gen(rs_choices *ch, ck_case *out) {
  rs_ckpt_case c;
  memset(out, 0, sizeof *out);
  rs_status st = rs_gen_ckpt_case(ch, &c);
  if (st) return st;
  st = rs_state_spec_copy(&c.a, &out->save);
  if (!st) st = rs_state_spec_copy(&c.a2, &out->load);
  rs_ckpt_case_free(&c);
  if (st) return st;
  strip(&out->save);
  strip(&out->load);
  common_keys(&out->save, &out->load);
  return out->save.nt ? RS_OK : RS_ERR_UNSUPPORTED;
}

static rs_outcome call_outcome(const rs_cf_call *call, const char *what, char *msg, size_t cap) {
  if (call->result == RS_BACKEND_OK) return RS_PASS;
  snprintf(msg, cap, "%s: %s%s", what, call->result == RS_BACKEND_UNSUPPORTED ? "unsupported: " : "backend failed: ", call->msg);
  return call->result == RS_BACKEND_UNSUPPORTED ? RS_SKIP : RS_FAIL;
}

/* reshard's own reader on a checkpoint the backend says is in reshard's format. */
static rs_outcome reshard_reads(const ck_case *c, const char *dir, const rs_ckpt_world *exp, char *msg, size_t cap) {
  FILE *devnull = fopen("/dev/null", "w");
  rs_ckpt_world rw = {0, NULL};
  rs_ckpt_report rep;
  memset(&rep, 0, sizeof rep);
  rs_outcome o = RS_PASS;
  char m2[1024];
  if (rs_ckpt_verify(dir, devnull)) {
    snprintf(msg, cap, "ckpt_save wrote reshard's format but `reshard ckpt verify` refuses it: %s", rs_last_error());
    o = RS_FAIL;
  } else if (rs_state_spec_build(&c->load, RS_FILL_INITIAL, &rw)) {
    snprintf(msg, cap, "build: %s", rs_last_error());
    o = RS_FAIL;
  } else {
    rs_ckpt_io_opts io = {0, 0, devnull, 0};
    if (rs_ref_ckpt_load(&rw, dir, -1, RS_STRICT_ASSUME_OK_UNEXPECTED, &io, &rep)) {
      snprintf(msg, cap, "reshard's loader cannot read the backend's checkpoint: %s", rs_last_error());
      o = RS_FAIL;
    } else if (rs_oracle_ckpt_compare(exp, &rw, m2, sizeof m2)) {
      snprintf(msg, cap, "reshard's loader reading the backend's checkpoint != oracle: %s", m2);
      o = RS_FAIL;
    }
  }
  if (devnull) fclose(devnull);
  rs_ckpt_report_free(&rep);
  rs_ckpt_world_free(&rw);
  return o;
}

static rs_outcome judge(rs_cf_backend *b, const ck_case *c, char *msg, size_t cap) {
  char dir[] = "/tmp/reshard-conform-ckpt-XXXXXX";
  const char *tmpdir = getenv("TMPDIR");
  char tdir[4096];
  snprintf(tdir, sizeof tdir, "%s/reshard-conform-ckpt-XXXXXX", tmpdir && tmpdir[0] ? tmpdir : "/tmp");
  char *d = mkdtemp(tdir);
  if (!d) d = mkdtemp(dir);
  if (!d) return snprintf(msg, cap, "ckpt: cannot make a scratch directory"), RS_FAIL;
  rs_ckpt_world aw = {0, NULL}, got = {0, NULL}, exp = {0, NULL};
  rs_cf_call *call = malloc(sizeof *call);
  char *sj = rs_state_spec_to_json(&c->save), *lj = rs_state_spec_to_json(&c->load), m2[1024];
  rs_outcome o = RS_PASS;
  if (!call || !sj || !lj) o = RS_FAIL, snprintf(msg, cap, "conform: out of memory");
  else if (rs_state_spec_build(&c->save, RS_FILL_VALUES, &aw) || rs_state_spec_build(&c->load, RS_FILL_INITIAL, &got) ||
           rs_oracle_ckpt_expected(&c->save, &c->load, &exp))
    o = RS_FAIL, snprintf(msg, cap, "ckpt: %s", rs_last_error());
  if (o == RS_PASS) {
    rs_cf_ckpt_save(b, sj, &aw, d, call);
    o = call_outcome(call, "ckpt_save", msg, cap);
  }
  if (o == RS_PASS) {
    rs_cf_ckpt_load(b, lj, d, &got, call);
    o = call_outcome(call, "ckpt_load", msg, cap);
  }
  if (o == RS_PASS && rs_oracle_ckpt_compare(&exp, &got, m2, sizeof m2)) {
    snprintf(msg, cap, "ckpt_load != oracle: %s", m2);
    o = RS_FAIL;
  }
  if (o == RS_PASS && rs_cf_backend_ckpt_reshard(b)) o = reshard_reads(c, d, &exp, msg, cap);
  rs_ckpt_rmtree(d);
  rs_ckpt_world_free(&aw);
  rs_ckpt_world_free(&got);
  rs_ckpt_world_free(&exp);
  free(call);
  free(sj);
  free(lj);
  return o;
}

/* ---- campaign, saved failures, replay ---- */

typedef struct pred_ctx {
  rs_cf_backend *b;
  char *msg;
  size_t cap;
  ck_case last;
} pred_ctx;

static int still_fails(void *vx, rs_choices *ch) {
  pred_ctx *x = vx;
  ck_case c;
  if (ck_gen(ch, &c)) {
    ck_free(&c);
    return 0;
  }
  int f = judge(x->b, &c, x->msg, x->cap) == RS_FAIL;
  if (f) {
    ck_free(&x->last);
    x->last = c;
  } else
    ck_free(&c);
  return f;
}

static rs_status save_failure(const rs_cf_run *run, const ck_case *c, const char *msg, char *path, size_t cap) {
  char *sj = rs_state_spec_to_json(&c->save), *lj = rs_state_spec_to_json(&c->load);
  cJSON *root = cJSON_CreateObject(), *s = NULL, *l = NULL;
  rs_status st = RS_ERR_NOMEM;
  if (sj && lj && root && !rs_json_parse(sj, &s) && !rs_json_parse(lj, &l)) {
    cJSON_AddStringToObject(root, "suite", "ckpt");
    cJSON_AddItemToObject(root, "save", s);
    cJSON_AddItemToObject(root, "load", l);
    s = l = NULL;
    cJSON_AddStringToObject(root, "message", msg);
    char *text = cJSON_Print(root);
    st = text ? rs_cf_save_failure(run, text, "ckpt", path, cap) : RS_ERR_NOMEM;
    free(text);
  }
  cJSON_Delete(s), cJSON_Delete(l), cJSON_Delete(root);
  free(sj), free(lj);
  return st;
}

/* A saved failure's save and load specs; an error when text is not one. */
static rs_status ck_parse(const char *text, ck_case *c) {
  cJSON *root = NULL;
  memset(c, 0, sizeof *c);
  rs_status st = rs_json_parse(text, &root);
  if (st) return st;
  char *sj = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(root, "save"));
  char *lj = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(root, "load"));
  cJSON_Delete(root);
  if (!sj || !lj) st = rs_fail(RS_ERR_INVALID, "no save and load specs");
  else if (!(st = rs_state_spec_from_json(sj, &c->save))) st = rs_state_spec_from_json(lj, &c->load);
  free(sj), free(lj);
  if (st) ck_free(c);
  return st;
}

rs_outcome rs_cf_ckpt_replay(rs_cf_backend *b, const char *text, char *msg, size_t cap, int *bad) {
  ck_case c;
  if (ck_parse(text, &c)) return *bad = 1, snprintf(msg, cap, "not a saved ckpt failure: %s", rs_last_error()), RS_FAIL;
  rs_outcome o = judge(b, &c, msg, cap);
  ck_free(&c);
  return o;
}

/* ---- the --report page ---- */

static const char *tensor_key(const void *s, int64_t i) { return ((const rs_state_spec *)s)->t[i].key; }

/* Every rank's box of tensor t; its mesh named into text. */
static rs_status spec_boxes(const rs_spec_tensor *t, rs_html_box **out, int *n, char *text, size_t cap) {
  rs_case *c = calloc(1, sizeof *c);
  if (!c) return rs_fail(RS_ERR_NOMEM, "--report: out of memory");
  c->mesh = t->mesh, c->tensor = t->t;
  rs_status st = rs_html_boxes_of(c, &t->sh, out, n);
  rs_cf_mesh_text(t->mesh.ndim, t->mesh.size, t->mesh.ranks, t->mesh.nranks, text, cap);
  free(c);
  return st;
}

rs_status rs_cf_ckpt_draw(rs_cf_backend *b, struct rs_html *h, const char *name, const char *text,
                          const char *message, const char *replay) {
  (void)b;
  ck_case c;
  rs_status st = ck_parse(text, &c);
  if (st) return st;
  int64_t i = rs_cf_named(message, tensor_key, &c.save, c.save.nt), j = 0;
  while (j < c.load.nt && i < c.save.nt && strcmp(c.load.t[j].key, c.save.t[i].key) != 0) j++;
  if (i >= c.save.nt || j >= c.load.nt) {
    ck_free(&c);
    return rs_fail(RS_ERR_INVALID, "no tensor both saved and loaded");
  }
  /* one tensor drawn, as saved (source) and as loaded (destination) */
  const rs_spec_tensor *t[2] = {&c.save.t[i], &c.load.t[j]};
  rs_cf_drawing d = {t[0]->dtype, t[0]->t.ndim, t[0]->t.shape, {&t[0]->sh, &t[1]->sh}, {NULL, NULL}, {0, 0}, {"", ""}};
  for (int w = 0; w < 2 && !st; w++) st = spec_boxes(t[w], &d.box[w], &d.n[w], d.mesh[w], sizeof d.mesh[w]);
  char note[600];
  snprintf(note, sizeof note, "tensor '%.400s', %d of %d saved, source as saved and destination as loaded",
           t[0]->key, (int)i + 1, c.save.nt);
  if (!st) st = rs_cf_draw_add(h, name, message, replay, text, note, &d);
  free(d.box[0]), free(d.box[1]);
  ck_free(&c);
  return st;
}

/* ---- the campaign, on the runner (props/runner.h) ---- */

#define CK_STREAM 0x636b7074 /* "ckpt": case i is drawn from rs_hash3(seed, i, CK_STREAM) */
#define CK_MSG 4096

typedef struct ck_ctx {
  rs_cf_run *run;
  char msg[CK_MSG];
} ck_ctx;

/* Case `index`: drawn from the seed and the index alone, saved and loaded through the backend (a
 * forked worker's own). */
static rs_status ck_eval(void *vx, int64_t index, rs_run_case *rc) {
  ck_ctx *x = vx;
  rs_choices ch;
  rs_choices_seed(&ch, rs_hash3(x->run->o->seed, (uint64_t)index, CK_STREAM));
  ck_case c;
  rs_outcome out = ck_gen(&ch, &c) ? RS_SKIP : judge(x->run->b, &c, x->msg, CK_MSG);
  ck_free(&c);
  rs_choices_free(&ch);
  rc->out[0] = out == RS_PASS ? RS_RUN_PASS : out == RS_SKIP ? RS_RUN_SKIP : RS_RUN_FAIL;
  if (out == RS_FAIL) snprintf(rc->msg[0], RS_RUN_MSG, "%.*s", RS_RUN_MSG - 1, x->msg);
  return RS_OK;
}

static rs_status ck_worker_init(void *vx, int w) { return rs_cf_worker_init(((ck_ctx *)vx)->run, w); }
static void ck_worker_exit(void *vx) { rs_cf_worker_exit(((ck_ctx *)vx)->run); }

static void ck_run_opts(const rs_cf_run *run, rs_run_opts *ro) {
  const rs_conform_opts *o = run->o;
  memset(ro, 0, sizeof *ro);
  ro->verb = "conform ckpt";
  ro->seed = o->seed;
  ro->cases = o->cases;
  ro->seconds = o->seconds;
  ro->jobs = run->jobs;
  ro->shard_k = o->shard_k;
  ro->shard_n = o->shard_n;
  ro->case_timeout = o->case_timeout;
  ro->progress = !o->quiet;
  ro->stop = rs_cf_gave_up;
  ro->stop_ctx = run->b;
}

/* The first failure (case `index`) shrunk here, in conform, saved, printed. */
static void ck_shrink(rs_cf_run *run, rs_cf_item *it, int64_t index, const char *first) {
  const rs_conform_opts *o = run->o;
  char *msg = malloc(CK_MSG);
  rs_choices ch;
  ck_case c;
  if (!msg) return;
  snprintf(msg, CK_MSG, "%s", first);
  rs_choices_seed(&ch, rs_hash3(o->seed, (uint64_t)index, CK_STREAM));
  ck_gen(&ch, &c); /* the draws of the failing case */
  ck_free(&c);
  size_t n = ch.n;
  uint64_t *v = malloc((n ? n : 1) * sizeof *v);
  pred_ctx x = {run->b, msg, CK_MSG, {{0}, {0}}};
  char path[1024] = "";
  if (v) {
    memcpy(v, ch.v, n * sizeof *v);
    int shrink_out = 0;
    char note[96];
    rs_shrink_stream_budget(still_fails, &x, &v, &n, o->shrink_runs, o->shrink_seconds, &shrink_out);
    rs_shrink_budget_note(shrink_out, o->shrink_runs, o->shrink_seconds, note, sizeof note);
    rs_choices rc;
    if (rs_choices_replay(&rc, v, n) == RS_OK) {
      if (!still_fails(&x, &rc)) snprintf(msg, CK_MSG, "%.1000s (shrinking lost the failure)", first);
      rs_choices_free(&rc);
    }
    if (note[0] && strlen(msg) + strlen(note) + 4 < CK_MSG) strcat(strcat(strcat(msg, " ("), note), ")");
    free(v);
  }
  rs_choices_free(&ch);
  if (x.last.save.nt && save_failure(run, &x.last, msg, path, sizeof path) == RS_OK) rs_cf_item_saved(run, it, path);
  RS_CF_PRINT(it->message, "%s", msg);
  printf("FAIL ckpt %s (shrunk: %d tensor(s), %d rank(s) saving, %d loading)\n  %s\n", it->name, x.last.save.nt,
         x.last.save.world, x.last.load.world, msg);
  if (it->replay[0]) printf("  replay: %s\n", it->replay);
  fflush(stdout);
  ck_free(&x.last);
  free(msg);
}

/* The runner object of the --json report (`reshard report merge` adds a campaign's shards up). */
static cJSON *ck_runner_json(const rs_cf_run *run, const rs_run_ops *ops, const rs_run_result *rr, const rs_cf_item *it) {
  rs_run_opts ro;
  rs_run_names nm;
  ck_run_opts(run, &ro);
  memset(&nm, 0, sizeof nm);
  nm.prop[0] = "backend_ckpt_oracle";
  nm.prop_on[0] = 1;
  rs_run_failure_note notes[RS_RUN_PROPS] = {{0}};
  if (rr->fail[0])
    notes[0] = (rs_run_failure_note){it->message, it->saved[0] ? it->saved : NULL, it->replay[0] ? it->replay : NULL};
  return rs_run_json(&ro, ops, &nm, rr, notes);
}

static void campaign(rs_cf_run *run) {
  rs_cf_item *it = rs_cf_add_item(run->r, RS_CF_SUITE_CKPT, 0, "backend_ckpt_oracle");
  ck_ctx *x = calloc(1, sizeof *x);
  rs_run_result *rr = calloc(1, sizeof *rr);
  if (!it || !x || !rr) {
    free(x), free(rr);
    return;
  }
  x->run = run;
  rs_run_opts ro;
  /* each forked worker (--jobs N) saves and loads through a backend of its own */
  rs_run_ops ops = {.ctx = x, .eval = ck_eval, .worker_init = ck_worker_init, .worker_exit = ck_worker_exit, .nprops = 1};
  ck_run_opts(run, &ro);
  rs_status st = rs_run(&ro, &ops, rr);
  it->pass = rr->pass[0], it->fail = rr->fail[0], it->skip = rr->skip[0], it->seconds = rr->seconds;
  cJSON *runner = NULL;
  if (st != RS_OK) {
    rs_cf_campaign_error(run, it, st);
  } else {
    if (rr->fail[0]) ck_shrink(run, it, rr->first_fail[0], rr->first_msg[0]);
    else if (rr->crashed) {
      it->fail++;
      RS_CF_PRINT(it->message, "crash: %s", rr->crash_msg);
    }
    if (rr->crashed)
      rs_run_print_crash(rr, (unsigned long long)run->o->seed);
    runner = ck_runner_json(run, &ops, rr, it);
  }
  if (!run->o->quiet || it->fail)
    printf("ckpt: %lld cases: %lld pass, %lld fail, %lld skip (%.2f s)\n", (long long)rr->cases, (long long)it->pass,
           (long long)it->fail, (long long)it->skip, it->seconds);
  fflush(stdout);
  rs_cf_campaign_done(run, RS_CF_SUITE_CKPT, runner, rr->skip[0], rr->pass[0] + rr->fail[0] + rr->skip[0]);
  free(rr);
  free(x);
}

typedef struct saving {
  const rs_cf_run *run;
  const ck_case *c;
} saving;

static rs_status save(void *vctx, const char *msg, char *path, size_t cap) {
  saving *x = vctx;
  return save_failure(x->run, x->c, msg, path, cap);
}

/* A state spec file of fixtures/ckpt: saved and loaded in its own layout. */
static void one_fixture(void *vctx, rs_cf_item *it, const char *text, const char *where) {
  rs_cf_run *run = vctx;
  ck_case c;
  memset(&c, 0, sizeof c);
  char msg[2048];
  if (rs_state_spec_from_json(text, &c.save) || rs_state_spec_copy(&c.save, &c.load)) {
    it->skip++;
    RS_CF_PRINT(it->message, "%s: not a state spec: %s", where, rs_last_error());
    ck_free(&c);
    return;
  }
  strip(&c.save);
  strip(&c.load);
  rs_outcome o = c.save.nt ? judge(run->b, &c, msg, sizeof msg) : RS_SKIP;
  if (!c.save.nt) snprintf(msg, sizeof msg, "no plain tensors");
  saving sv = {run, &c};
  rs_cf_tally(run, it, o, where, msg, save, &sv);
  ck_free(&c);
}

void rs_cf_suite_ckpt(rs_cf_run *run) {
  if (!rs_cf_require(run, RS_CF_SUITE_CKPT, RS_CF_CKPT, "backend_ckpt_oracle")) return;
  campaign(run);
  if (run->fixtures) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/ckpt", run->fixtures);
    rs_cf_walk_corpus(run, RS_CF_SUITE_CKPT, dir, one_fixture, run);
  }
}
