/* ckpt_campaign.c - `reshard ckpt check` on the campaign runner (props/runner.h): case i is one
 * choice stream seeded from the seed and i, replayed from the start for every property (the
 * reference's six, opt's ckpt_opt, or both) so all see the same case; each property's first failure
 * is shrunk afterwards in this process and saved as a regression fixture (property + shrunk stream
 * + the specs it decodes to) that `reshard ckpt replay` and ctest run again. --jobs N workers each
 * work in a scratch directory of their own below the campaign's. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "core/mutant.h"
#include "core/numflag.h"
#include "core/ckpt/internal.h"
#include "core/json.h"
#include "core/values.h"
#include "props/ckpt.h"
#include "props/ckpt_opt.h"
#include "props/report.h"

#define MSG_CAP 1024

rs_status rs_ckpt_replay(const char *path, const char *scratch, int *failed, char *msg, size_t cap) {
  char *text = rs_read_text(path);
  if (!text) return RS_ERR_IO;
  cJSON *root;
  rs_status st = rs_json_parse(text, &root);
  free(text);
  if (st) return st;
  const cJSON *pn, *cs;
  rs_ckpt_prop p = RS_CKPT_PROP_VALID;
  if (!(st = rs_json_member(root, "", "property", cJSON_String, &pn)) && !pn)
    st = rs_fail(RS_ERR_INVALID, "%s: property: missing", path);
  if (!st) st = rs_ckpt_prop_parse(pn->valuestring, &p);
  if (!st && !(st = rs_json_member(root, "", "choices", cJSON_Array, &cs)) && !cs)
    st = rs_fail(RS_ERR_INVALID, "%s: choices: missing", path);
  uint64_t *v = NULL;
  size_t n = 0;
  if (!st) {
    v = malloc(sizeof *v * (size_t)(cJSON_GetArraySize(cs) + 1));
    if (!v) st = rs_fail(RS_ERR_NOMEM, "out of memory");
    const cJSON *it;
    if (v) cJSON_ArrayForEach(it, cs) {
        if ((st = rs_json_u64(it, "choices[]", &v[n]))) break;
        n++;
      }
  }
  cJSON_Delete(root);
  if (!st) {
    rs_choices ch;
    if (!(st = rs_choices_replay(&ch, v, n))) {
      *failed = rs_ckpt_prop_run(p, &ch, scratch, msg, cap) == RS_FAIL;
      rs_choices_free(&ch);
    }
  }
  free(v);
  return st;
}

/* ---- the campaigns on the runner (props/runner.h): ref's six properties, opt's ckpt_opt, or both ---- */

/* case i's stream seed: the campaign seed and the index only (the same for every --jobs) */
static uint64_t case_seed(uint64_t seed, int64_t index) { return rs_hash3(seed, 0x636b7074, (uint64_t)index); }

typedef struct ck_ctx {
  const rs_ckpt_campaign *o;
  int mode;              /* RS__CKPT_REF | RS__CKPT_OPT */
  rs_world *world;       /* opt's (NULL: ref only) */
  int mpi, me;
  const char *dir;       /* this process's scratch directory: the campaign's, or a worker's below it */
  char wdir[4300];       /* a forked worker's own */
  char verb[64];
  char msg[MSG_CAP];
} ck_ctx;

static int n_ref(int mode) { return mode & RS__CKPT_REF ? RS_CKPT_PROP_COUNT : 0; }
static int n_props(int mode) { return n_ref(mode) + (mode & RS__CKPT_OPT ? 1 : 0); }
static const char *prop_name(int mode, int p) {
  return p < n_ref(mode) ? rs_ckpt_prop_name((rs_ckpt_prop)p) : "ckpt_opt";
}

/* one outcome into the record; 1 when it ran out of memory (the record says so, nothing else runs) */
static int record(rs_run_case *rc, int p, rs_outcome out, const char *msg) {
  if (rs_outcome_is_oom(out)) {
    rc->oom = p + 1;
    snprintf(rc->msg[p], RS_RUN_MSG, "%s", msg);
    return 1;
  }
  rc->out[p] = out == RS_PASS ? RS_RUN_PASS : out == RS_SKIP ? RS_RUN_SKIP : RS_RUN_FAIL;
  if (out == RS_FAIL) snprintf(rc->msg[p], RS_RUN_MSG, "%s", msg);
  return 0;
}

/* Case `index`: every property of the mode on the stream seeded from the seed and the index, each
 * from its start (all see the same case). */
static rs_status ck_eval(void *vx, int64_t index, rs_run_case *rc) {
  ck_ctx *x = vx;
  /* test hooks of tests/jobs_ckpt.sh (mutation builds only, as check's in props/campaign.c): case
   * 38 crashes, hangs or runs out of memory, so the runner's reports of each are seen */
  if (index == 37 && RS_MUTANT(993)) raise(SIGSEGV);
  if (index == 37 && RS_MUTANT(994))
    for (;;) pause();
  if (index == 37 && RS_MUTANT(995)) {
    rc->oom = 1;
    snprintf(rc->msg[0], RS_RUN_MSG, "%s: out of memory (planted)", prop_name(x->mode, 0));
    return RS_OK;
  }
  uint64_t seed = case_seed(x->o->seed, index);
  int nr = n_ref(x->mode);
  for (int p = 0; p < nr; ++p) {
    rs_choices ch;
    rs_choices_seed(&ch, seed);
    rs_clear_error();
    rs_outcome out = rs_ckpt_prop_run((rs_ckpt_prop)p, &ch, x->dir, x->msg, MSG_CAP);
    rs_choices_free(&ch);
    if (record(rc, p, out, x->msg)) return RS_OK;
  }
  if (!(x->mode & RS__CKPT_OPT)) return RS_OK;
  int feat[RS_CKPT_OPT_F_COUNT] = {0};
  rs_choices ch;
  rs_choices_seed(&ch, seed);
  rs_clear_error();
  rs_outcome out = rs__ckpt_opt_case(x->world, &ch, x->dir, x->msg, MSG_CAP, feat);
  rs_choices_free(&ch);
  for (int f = 0; f < RS_CKPT_OPT_F_COUNT; ++f) rc->feature[f] = (uint16_t)feat[f];
  /* a stalled or dead peer (--timeout) is no case's failure: the campaign stops, nothing shrunk */
  if (rs_opt_transport_failure()) return rs_fail(RS_ERR_TIMEOUT, "%s", rs_opt_transport_failure());
  record(rc, nr, out, x->msg);
  return RS_OK;
}

/* a forked worker (--jobs N): a scratch directory of its own below the campaign's, never shared */
static rs_status ck_worker_init(void *vx, int w) {
  ck_ctx *x = vx;
  snprintf(x->wdir, sizeof x->wdir, "%s/w%d", x->dir, w + 1);
  rs_ckpt_rmtree(x->wdir);
  if (mkdir(x->wdir, 0777) != 0) return rs_fail(RS_ERR_IO, "scratch: cannot create %s", x->wdir);
  x->dir = x->wdir;
  return x->o->worker_init ? x->o->worker_init(x->o->worker_ctx, w) : RS_OK;
}

static void ck_worker_exit(void *vx) {
  ck_ctx *x = vx;
  if (x->o->worker_exit) x->o->worker_exit(x->o->worker_ctx);
  rs_ckpt_rmtree(x->wdir);
}

/* MPI: time is local, so rank 0's clock decides when a timed campaign stops */
static int ck_agree_stop(void *vx, int stop) {
  ck_ctx *x = vx;
  rs_opt_world_bcast(x->world, &stop, sizeof stop);
  return stop;
}

static void ck_ops(ck_ctx *x, rs_run_ops *ops) {
  memset(ops, 0, sizeof *ops);
  ops->ctx = x;
  ops->eval = ck_eval;
  ops->worker_init = ck_worker_init;
  ops->worker_exit = ck_worker_exit;
  ops->nprops = n_props(x->mode);
  ops->nfeatures = x->mode & RS__CKPT_OPT ? RS_CKPT_OPT_F_COUNT : 0;
  ops->ncounters = 0;
}

static void ck_verb(int mode, rs_world *world, char *out, size_t cap) {
  const char *tr = world ? rs_world_transport(world) : "local";
  /* RS_SIM_DEVICE=1: a local world's tensor data in simulated device memory (other code paths) */
  if (world && rs_world_is_local(world) && !rs_world_uses_device(world) && rs_opt_ckpt_sim_device()) tr = "local-device";
  if (mode == RS__CKPT_REF) snprintf(out, cap, "ckpt check");
  else snprintf(out, cap, "ckpt check --impl %s%s%s", mode == RS__CKPT_OPT ? "opt" : "both",
                strcmp(tr, "local") ? " --transport " : "", strcmp(tr, "local") ? tr : "");
}

static void ck_run_opts(const rs_ckpt_campaign *o, ck_ctx *x, const char *verb, rs_run_opts *ro) {
  memset(ro, 0, sizeof *ro);
  ro->verb = verb;
  ro->seed = o->seed;
  ro->cases = o->cases;
  ro->seconds = o->seconds;
  ro->jobs = o->jobs > 1 && !x->mpi && !o->dist ? o->jobs : 1;
  ro->shard_k = o->shard_k;
  ro->shard_n = o->shard_n;
  /* ckpt_opt alone stops at its first failure (as it always did); the reference's properties and
   * --impl both run to the end, each property's first failure shrunk */
  ro->max_failures = x->mode == RS__CKPT_OPT ? 1 : 0;
  ro->case_timeout = o->case_timeout;
  ro->progress = !o->quiet && x->me == 0;
  ro->dist = o->dist;
  if (x->mpi) {
    ro->agree_stop = ck_agree_stop;
    ro->stop_ctx = x;
  }
}

/* the runner object's names: the properties, and opt's features, whose rates follow
 * rs_ckpt_opt_feature_required (the unstaged O_DIRECT save is required from RS_FEATURE_MIN_CASES
 * cases wherever some save had O_DIRECT files; the others are figures) */
static void ck_names(int mode, const rs_run_result *rr, rs_run_names *nm) {
  memset(nm, 0, sizeof *nm);
  for (int p = 0; p < n_props(mode); ++p) {
    nm->prop[p] = prop_name(mode, p);
    nm->prop_on[p] = 1;
  }
  if (mode & RS__CKPT_OPT) {
    rs_ckpt_opt_campaign_result fr;
    memset(&fr, 0, sizeof fr);
    for (int f = 0; f < RS_CKPT_OPT_F_COUNT; ++f) fr.feat[f] = rr->feature[f];
    for (int f = 0; f < RS_CKPT_OPT_F_COUNT; ++f) {
      nm->feature[f] = rs_ckpt_opt_feature_name(f);
      nm->rate[f] = rs_ckpt_opt_feature_required(&fr, f) ? -1 : 0;
    }
  }
  nm->judge_from = RS_FEATURE_MIN_CASES;
}

typedef struct pred_ctx {
  int mode, p;
  rs_world *world;
  const char *dir;
  char *msg;
} pred_ctx;

static int still_fails(void *vx, rs_choices *ch) {
  pred_ctx *x = vx;
  rs_outcome out = x->p < n_ref(x->mode) ? rs_ckpt_prop_run((rs_ckpt_prop)x->p, ch, x->dir, x->msg, MSG_CAP)
                                         : rs__ckpt_opt_case(x->world, ch, x->dir, x->msg, MSG_CAP, NULL);
  return out == RS_FAIL;
}

/* The campaign's scratch directory named "$SCRATCH" in msg: it is gone when the campaign ends, and
 * its name (the process id) would make two runs of one campaign report different messages. */
static void neutral_scratch(char *msg, size_t cap, const char *dir) {
  size_t dl = strlen(dir);
  char *out = malloc(cap);
  if (!out || !dl) {
    free(out);
    return;
  }
  size_t n = 0;
  for (const char *p = msg; *p && n + 1 < cap;) {
    if (!strncmp(p, dir, dl)) {
      n += (size_t)snprintf(out + n, cap - n, "$SCRATCH");
      if (n >= cap) n = cap - 1;
      p += dl;
    } else {
      out[n++] = *p++;
    }
  }
  out[n] = 0;
  memcpy(msg, out, n + 1);
  free(out);
}

/* Property p's first failure (case `index`), in this process whatever --jobs was: the case run
 * again to record its draws, shrunk, saved as a fixture (rank 0) and printed with its replay. */
static void shrink_one(ck_ctx *x, int p, int64_t index, const char *first, char *message, char *fixture) {
  const rs_ckpt_campaign *o = x->o;
  int opt = p >= n_ref(x->mode);
  char *msg = x->msg;
  pred_ctx pc = {x->mode, p, x->world, x->dir, msg};
  rs_choices ch;
  rs_choices_seed(&ch, case_seed(o->seed, index));
  rs_clear_error();
  /* a case that passes here (flaky) keeps the message it failed with */
  if (!still_fails(&pc, &ch)) snprintf(msg, MSG_CAP, "%s", first);
  size_t n = 0;
  int runs = 0, defruns = opt ? 500 : 1000;
  uint64_t *v = rs__ckpt_shrink(still_fails, &pc, &ch, msg, MSG_CAP, o->shrink_runs > 0 ? o->shrink_runs : defruns,
                                &n, &runs);
  rs_choices_free(&ch);
  neutral_scratch(msg, MSG_CAP, x->dir);
  const char *name = prop_name(x->mode, p);
  char path[4400] = "";
  rs_status st = RS_OK;
  if (x->me == 0)
    st = v ? rs__ckpt_write_fixture(o->regress_dir ? o->regress_dir : "fixtures/ckpt/regressions", name, v, n, msg, path,
                                    sizeof path)
           : rs_fail(RS_ERR_NOMEM, "out of memory");
  snprintf(message, 1024, "%.1000s", msg);
  if (!st) snprintf(fixture, 1024, "%.1000s", path);
  if (x->me == 0 || !strstr(msg, "another rank")) {
    printf("FAIL %s%s (case %lld, seed %llu; shrunk in %d runs to %zu draws)\n  %s\n", name, x->mpi ? " [rank]" : "",
           (long long)index, (unsigned long long)o->seed, runs, n, msg);
    if (x->me == 0 && !st && path[0]) printf("  replay: reshard ckpt replay %s\n", path);
    else if (x->me == 0 && st) printf("  (fixture not written: %s)\n", rs_last_error());
    fflush(stdout);
  }
  free(v);
}

/* the sums into the verbs' result structs */
static void ck_results(int mode, const rs_run_result *rr, const char *verb, rs_ckpt_campaign_result *r,
                       rs_ckpt_opt_campaign_result *opt) {
  int nr = n_ref(mode);
  if (r) {
    r->cases = rr->cases;
    r->seconds = rr->seconds;
    for (int p = 0; p < nr; ++p) {
      r->pass[p] = rr->pass[p];
      r->skip[p] = rr->skip[p];
      r->fail[p] = rr->fail[p];
      r->failed += rr->fail[p] > 0;
    }
    snprintf(r->verb, sizeof r->verb, "%s", verb);
    r->run = *rr;
  }
  if (opt) {
    opt->cases = rr->cases;
    opt->seconds = rr->seconds;
    opt->pass = rr->pass[nr];
    opt->skip = rr->skip[nr];
    opt->fail = rr->fail[nr];
    opt->first_fail = rr->first_fail[nr];
    for (int f = 0; f < RS_CKPT_OPT_F_COUNT; ++f) opt->feat[f] = rr->feature[f];
    snprintf(opt->verb, sizeof opt->verb, "%s", verb);
    opt->run = *rr;
  }
}

/* The campaign's own scratch directory (every process of an MPI world shares rank 0's; a
 * --distribute rank has its own, named by its rank as well). */
static void ck_scratch(rs_world *world, const rs_ckpt_campaign *o, int mode, char *scratch, size_t cap) {
  long tag = (long)getpid();
  char what[48];
  snprintf(what, sizeof what, "%s", mode == RS__CKPT_OPT ? "ckpt-opt" : "ckpt");
  if (o->dist) snprintf(what, sizeof what, "%s-rank%d", mode == RS__CKPT_OPT ? "ckpt-opt" : "ckpt", rs_run_dist_rank(o->dist));
  if (world) rs_opt_world_bcast(world, &tag, sizeof tag); /* one scratch directory for every process */
  if (!world || rs_world_rank(world) == 0) {
    rs_ckpt_scratch_path(o->scratch, what, tag, scratch, cap);
    mkdir(scratch, 0777);
  }
  if (world) rs_opt_world_bcast(world, scratch, cap); /* rank 0 made --scratch when missing */
}

rs_status rs__ckpt_campaign(rs_world *world, const rs_ckpt_campaign *o, int mode, rs_ckpt_campaign_result *r,
                            rs_ckpt_opt_campaign_result *opt) {
  if (r) memset(r, 0, sizeof *r);
  if (opt) {
    memset(opt, 0, sizeof *opt);
    opt->first_fail = -1;
  }
  if (o->cases <= 0 && !rs__seconds_ok(o->seconds)) /* NaN or inf would never end */
    return rs_fail(RS_ERR_INVALID, "seconds: %g, expected 0 < T <= %.0f (or a case count)", o->seconds, RS_MAX_SECONDS);
  ck_ctx *x = calloc(1, sizeof *x);
  rs_run_result *rr = malloc(sizeof *rr);
  char *scratch = malloc(4200);
  if (!x || !rr || !scratch) {
    free(x), free(rr), free(scratch);
    return rs_fail(RS_ERR_NOMEM, "ckpt check: out of memory");
  }
  x->o = o;
  x->mode = mode;
  x->world = world;
  x->mpi = world && !rs_world_is_local(world);
  x->me = world ? rs_world_rank(world) : 0;
  ck_scratch(world, o, mode, scratch, 4200);
  x->dir = scratch;
  ck_verb(mode, world, x->verb, sizeof x->verb);
  rs_run_opts ro;
  rs_run_ops ops;
  ck_run_opts(o, x, x->verb, &ro);
  ck_ops(x, &ops);
  rs_status st = rs_run(&ro, &ops, rr);
#ifdef RS_HAVE_OPT
  /* a peer that died while the ranks agreed on a timed stop ended the loop: its failure stopped it */
  if (st == RS_OK && rs_opt_transport_failure()) st = rs_fail(RS_ERR_TIMEOUT, "%s", rs_opt_transport_failure());
#endif
  ck_results(mode, rr, x->verb, r, opt);
  int np = n_props(mode), nr = n_ref(mode);
  if (st == RS_ERR_NOMEM && rr->oom_prop >= 0) {
    st = rs_campaign_oom(prop_name(mode, rr->oom_prop), (long long)rr->oom_index + 1, rr->oom_msg);
  } else if (st == RS_OK && !rr->follower) { /* a follower rank reports nothing (runner.h) */
    int done[RS_RUN_PROPS] = {0};
    for (int p; (p = rs_run_next_failure(rr, np, done)) >= 0;) {
      done[p] = 1;
      if (p < nr) shrink_one(x, p, rr->first_fail[p], rr->first_msg[p], r->message[p], r->fixture[p]);
      else shrink_one(x, p, rr->first_fail[p], rr->first_msg[p], opt->message, opt->fixture);
      if (p >= nr && rs_opt_transport_failure()) { /* a peer stalled while the case shrank */
        st = rs_fail(RS_ERR_TIMEOUT, "%s", rs_opt_transport_failure());
        break;
      }
    }
    if (st == RS_OK && rr->crashed) {
      if (r) r->failed++;
      else opt->crashed = 1;
      rs_run_print_crash(rr, (unsigned long long)o->seed);
    }
  }
  if (x->me == 0) rs_ckpt_rmtree(scratch);
  free(x);
  free(rr);
  free(scratch);
  return st;
}

rs_status rs_ckpt_campaign_run(const rs_ckpt_campaign *o, rs_ckpt_campaign_result *r) {
  return rs__ckpt_campaign(NULL, o, RS__CKPT_REF, r, NULL);
}

cJSON *rs__ckpt_runner_json(const rs_ckpt_campaign *o, const rs_ckpt_campaign_result *r,
                            const rs_ckpt_opt_campaign_result *opt) {
  int mode = (r ? RS__CKPT_REF : 0) | (opt ? RS__CKPT_OPT : 0);
  const rs_run_result *rr = r ? &r->run : &opt->run;
  ck_ctx x;
  memset(&x, 0, sizeof x);
  x.o = o;
  x.mode = mode;
  rs_run_opts ro;
  rs_run_ops ops;
  rs_run_names nm;
  ck_run_opts(o, &x, r ? r->verb : opt->verb, &ro);
  ck_ops(&x, &ops);
  ck_names(mode, rr, &nm);
  rs_run_failure_note notes[RS_RUN_PROPS];
  memset(notes, 0, sizeof notes);
  char replay[RS_CKPT_PROP_COUNT + 1][1100];
  int nr = n_ref(mode);
  for (int p = 0; p < n_props(mode); ++p) {
    if (!rr->fail[p]) continue;
    const char *m = p < nr ? r->message[p] : opt->message, *f = p < nr ? r->fixture[p] : opt->fixture;
    snprintf(replay[p], sizeof replay[p], "reshard ckpt replay %s", f);
    notes[p] = (rs_run_failure_note){m, f, f[0] ? replay[p] : NULL};
  }
  return rs_run_json(&ro, &ops, &nm, rr, notes);
}
