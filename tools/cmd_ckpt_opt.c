/* cmd_ckpt_opt.c - `reshard ckpt save|load|check` with --impl opt (or both) and --transport
 * local|mpi: opt's parallel save and load (opt/ckpt), every process of an MPI world holding only
 * its own rank's state dict, and the campaign that holds opt to ref and the oracle. Exit codes as
 * the rest of `reshard ckpt`: 0 pass, 1 a difference or an integrity failure, 2 bad input. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "core/mutant.h"
#include "cmd_ckpt_opt.h"
#include "core/json.h"
#include "props/ckpt_opt.h"
#include "props/props.h"
#include "reshard/ckpt_opt.h"

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int check_impl(const char *C, const char *impl, int allow_both) {
  if (!strcmp(impl, "opt") || (allow_both && !strcmp(impl, "both"))) return CLI_OK;
  if (!strcmp(impl, "ref")) return cli_usage_error(C, "--impl ref runs in one process: drop --transport");
  return cli_usage_error(C, "--impl: '%s', expected ref, opt%s", impl, allow_both ? " or both" : "");
}

static int start_world(const char *C, const char *tr, rs_world **w) {
  if (strcmp(tr, "local") && strcmp(tr, "mpi") && strcmp(tr, "local-device"))
    return cli_usage_error(C, "--transport: '%s', expected local, local-device or mpi", tr);
  if (!strcmp(tr, "local-device") && rs_opt_ckpt_sim_device()) {
    fprintf(stderr, "reshard %s: RS_SIM_DEVICE=1: tensor data in simulated device memory (no GPU used)\n", C);
    tr = "local";
  }
  if (rs_world_init(tr, NULL, NULL, w)) return cli_status_error(C, "");
  return CLI_OK;
}

/* the transport as reports name it */
static const char *world_name(rs_world *w) {
  return rs_world_is_local(w) && !rs_world_uses_device(w) && rs_opt_ckpt_sim_device() ? "local-device (simulated)"
                                                                                       : rs_world_transport(w);
}

/* this process keeps only its own state dict (MPI) */
static void keep_mine(rs_world *world, rs_ckpt_world *w) {
  if (rs_world_is_local(world)) return;
  int me = rs_world_rank(world);
  for (int r = 0; r < w->n; ++r)
    if (r != me) {
      rs_state_dict_free(&w->sd[r]);
      memset(&w->sd[r], 0, sizeof w->sd[r]);
      w->sd[r].rank = r;
    }
}

/* *st keeps the first failure (and its message); a later one only when there was none */
static void keep_error(rs_status *st, rs_status later) {
  if (!*st) *st = later;
}

/* Under MPI each process builds its own state dict before the first collective. One that fails
 * there (out of memory) must not leave the others waiting in the save's or load's agreement until
 * --timeout: every process's status is agreed (rs_world_agree_status). Returns 0 when every
 * process built its state dict, else the exit code (its own message printed, or the peers'). */
static int agree_built(const char *C, rs_world *world, rs_status st) {
  int flags;
  if (st) fprintf(stderr, "reshard %s: %s\n", C, rs_last_error());
  /* RS_MUTANT 957: a process that could not build its state dict does not tell its peers */
  if (rs_world_agree_status(world, RS_MUTANT(957) ? RS_OK : st, &flags)) {
    fprintf(stderr, "reshard %s: %s\n", C, rs_last_error());
    return CLI_PEER;
  }
  if (!flags) return 0;
  if (!st)
    fprintf(stderr, "reshard %s: another process %s building its state dict\n", C,
            flags & RS_AGREE_NOMEM ? "ran out of memory" : "failed");
  /* as before the agreement: out of memory 3, anything else about the spec's state dict 2 */
  return flags & RS_AGREE_NOMEM ? CLI_NOMEM : CLI_USAGE;
}

static void fill_opts(const ckpt_io_args *a, rs_ckpt_opt_opts *o) {
  memset(o, 0, sizeof *o);
  o->io_threads = (int)a->threads;
  o->segment = a->segment;
  o->block = a->block;
  o->direct = a->direct;
  o->read_once = a->read_once;
}

int cmd_ckpt_opt_save(const ckpt_io_args *a) {
  const char *C = "ckpt save", *spec = a->spec, *root = a->root, *tr = a->tr;
  long long step = a->step;
  int r;
  if ((r = check_impl(C, a->impl, 0))) return r;
  rs_ckpt_opt_opts o;
  fill_opts(a, &o);
  rs_world *world = NULL;
  if ((r = start_world(C, tr, &world))) return r;
  rs_state_spec s;
  rs_ckpt_world w = {0, NULL};
  int rc = CLI_OK;
  if (rs_state_spec_from_file(spec, &s)) {
    rs_world_finalize(world);
    return cli_status_error(C, "");
  }
  /* under MPI this process builds only its own rank's state dict */
  int only = rs_world_is_local(world) ? -1 : rs_world_rank(world);
  if ((rc = agree_built(C, world, rs_state_spec_build_rank(&s, RS_FILL_VALUES, only, &w))) == CLI_OK) {
    rs_ckpt_opt_stats stats;
    double t0 = mono();
    rs_status st = rs_opt_ckpt_to_device(world, &w);
    if (!st) {
      st = rs_opt_ckpt_save(world, &w, root, step, &o, &stats);
      keep_error(&st, rs_opt_ckpt_to_host(world, &w));
    }
    double dt = mono() - t0;
    if (st) {
      fprintf(stderr, "reshard %s: %s\n", C, rs_last_error());
      rc = st == RS_ERR_INVALID ? CLI_USAGE : ckpt_exit_code(st);
    } else if (rs_world_rank(world) == 0) {
      printf("saved %s/step_%lld (opt, %s, %d ranks; largest rank file %lld bytes; %.3f s); latest = %lld\n", root, step,
             world_name(world), w.n, (long long)stats.max_rank_bytes, dt, step);
    }
  }
  rs_ckpt_world_free(&w);
  rs_state_spec_free(&s);
  rs_world_finalize(world);
  return rc;
}

int cmd_ckpt_opt_load(const ckpt_io_args *a) {
  const char *C = "ckpt load", *spec = a->spec, *root = a->root, *tr = a->tr;
  long long step = a->step;
  int r, read_once = a->read_once;
  if ((r = check_impl(C, a->impl, 0))) return r;
  rs_strict mode = RS_STRICT_ASSUME_OK_UNEXPECTED;
  if (a->strict && rs_strict_parse(a->strict, &mode)) return cli_flag_error(C, "--strict", "strict");
  rs_ckpt_opt_opts o;
  fill_opts(a, &o);
  o.log = stderr;
  rs_world *world = NULL;
  if ((r = start_world(C, tr, &world))) return r;
  int me = rs_world_rank(world), rc = CLI_OK;
  rs_state_spec s, saved;
  if (rs_state_spec_from_file(spec, &s)) {
    rs_world_finalize(world);
    return cli_status_error(C, "");
  }
  rs_status cst;
  if ((r = ckpt_load_target(C, root, step)) >= 0 || (cst = rs_ref_ckpt_catalog(root, step, &s, &saved))) {
    if (r < 0) fprintf(stderr, "reshard %s: %s\n", C, rs_last_error());
    rs_state_spec_free(&s);
    rs_world_finalize(world);
    return r >= 0 ? r : ckpt_exit_code(cst);
  }
  rs_ckpt_world got = {0, NULL}, exp = {0, NULL};
  rs_ckpt_report rep;
  memset(&rep, 0, sizeof rep);
  char msg[1024];
  rs_ckpt_opt_stats stats;
  double t0, dt;
  rs_status st;
  int bad = 0, flag;
  if ((rc = agree_built(C, world, rs_state_spec_build_rank(&s, RS_FILL_INITIAL, rs_world_is_local(world) ? -1 : me,
                                                           &got))))
    goto out;
  t0 = mono();
  st = rs_opt_ckpt_to_device(world, &got);
  if (!st) {
    st = rs_opt_ckpt_load(world, &got, root, step, mode, &o, &rep, &stats);
    keep_error(&st, rs_opt_ckpt_to_host(world, &got));
  }
  dt = mono() - t0;
  if (me == 0) {
    if (rep.nunexpected || mode == RS_STRICT_RETURN_UNEXPECTED || mode == RS_STRICT_RETURN_ALL) {
      printf("unexpected keys (%d):", rep.nunexpected);
      for (int i = 0; i < rep.nunexpected; ++i) printf(" %s", rep.unexpected[i]);
      printf("\n");
    }
    if (rep.nmissing || mode == RS_STRICT_RETURN_ALL) {
      printf("missing keys (%d):", rep.nmissing);
      for (int i = 0; i < rep.nmissing; ++i) printf(" %s", rep.missing[i]);
      printf("\n");
    }
  }
  if (st) {
    fprintf(stderr, "reshard %s: %s\n", C, rs_last_error());
    bad = st == RS_ERR_UNSUPPORTED ? 2 : st == RS_ERR_NOMEM ? 4 : st == RS_ERR_TIMEOUT ? 5 : 1;
  } else if ((st = rs_oracle_ckpt_expected(&saved, &s, &exp))) {
    fprintf(stderr, "reshard %s: oracle: %s\n", C, rs_last_error());
    bad = st == RS_ERR_NOMEM ? 4 : 2;
  } else {
    keep_mine(world, &exp);
    if (rs_oracle_ckpt_compare(&exp, &got, msg, sizeof msg)) {
      fprintf(stderr, "reshard %s: differs from the oracle: %s\n", C, msg);
      bad = 1;
    }
  }
  if (a->json) {
    /* local: one file with every rank; MPI: each process its own rank, in FILE.<rank> */
    char jp[4200];
    if (rs_world_is_local(world)) snprintf(jp, sizeof jp, "%s", a->json);
    else snprintf(jp, sizeof jp, "%s.%d", a->json, me);
    if (ckpt_load_json(C, jp, "opt", st ? "failed" : "ok", &got, rs_world_is_local(world) ? -1 : me) && !bad) bad = 3;
  }
  /* bits: 1 failed, 2 out of memory, 4 a stalled or dead peer; a failed agreement is the last */
  flag = (bad != 0) | (bad == 4) << 1 | (bad == 5) << 2;
  if (bad != 5 && rs_world_agree(world, &flag)) flag |= 4;
  if (flag & 4) rc = CLI_PEER;
  else if (flag & 2) {
    if (bad != 4) fprintf(stderr, "reshard %s: another process ran out of memory\n", C);
    rc = CLI_NOMEM;
  }
  else if (bad == 2 || bad == 3) rc = CLI_USAGE;
  else if (flag) rc = CLI_FAIL;
  else if (me == 0)
    printf("ok: %d ranks (opt, %s, %s), %lld bytes read by rank 0's process in %.3f s, every rank equals the oracle\n",
           s.world, world_name(world), read_once ? "read-once" : "direct", (long long)stats.bytes_read, dt);
out:
  rs_ckpt_report_free(&rep);
  rs_ckpt_world_free(&got);
  rs_ckpt_world_free(&exp);
  rs_state_spec_free(&s);
  rs_state_spec_free(&saved);
  rs_world_finalize(world);
  return rc;
}

/* The campaign's feature counts (printed unless quiet, or when one is missing); 1 when a
 * campaign of RS_FEATURE_MIN_CASES cases or more, with no failure, never produced a required one. */
static int ckpt_opt_features(const rs_ckpt_campaign *o, const rs_ckpt_opt_campaign_result *r) {
  /* props' one coverage gate: required features at least once (rate -1: they depend on the
   * scratch file system, so no designed rate) */
  double rate[RS_CKPT_OPT_F_COUNT];
  int64_t min[RS_CKPT_OPT_F_COUNT];
  for (int f = 0; f < RS_CKPT_OPT_F_COUNT; ++f) rate[f] = rs_ckpt_opt_feature_required(r, f) ? -1 : 0;
  int missing = rs_feature_gate(r->cases, RS_FEATURE_MIN_CASES, RS_CKPT_OPT_F_COUNT, r->feat, rate, min);
  int judged = r->cases >= RS_FEATURE_MIN_CASES && !r->fail;
  if (!o->quiet || (missing && judged)) {
    printf("features (cases; * = required from %d cases where the scratch file system takes O_DIRECT):",
           RS_FEATURE_MIN_CASES);
    for (int f = 0; f < RS_CKPT_OPT_F_COUNT; ++f)
      printf("%s %s%s %lld", f ? "," : "", rs_ckpt_opt_feature_name(f),
             f == RS_CKPT_OPT_F_DIRECT_UNSTAGED ? "*" : "", (long long)r->feat[f]);
    printf("\n");
  }
  if (!missing || !judged) return 0;
  for (int f = 0; f < RS_CKPT_OPT_F_COUNT; ++f)
    if (r->feat[f] < min[f])
      printf("FAIL feature coverage: no case with %s in %lld cases\n", rs_ckpt_opt_feature_name(f), (long long)r->cases);
  return 1;
}

int cmd_ckpt_opt_check(const rs_ckpt_campaign *oc, const char *impl, const char *tr, const char *junit,
                       const char *jsonp) {
  const char *C = "ckpt check";
  rs_ckpt_campaign o = *oc;
  int r;
  if ((r = check_impl(C, impl, 1))) return r;
  rs_world *world = NULL;
  if ((r = start_world(C, tr, &world))) return r;
  int me = rs_world_rank(world), failed = 0;
  /* --impl both (local): one campaign, the reference's properties and then ckpt_opt on every case */
  int both = !strcmp(impl, "both") && rs_world_is_local(world);
  rs_ckpt_campaign_result *ref = both ? malloc(sizeof *ref) : NULL;
  rs_ckpt_opt_campaign_result *res = malloc(sizeof *res);
  if (!res || (both && !ref)) {
    free(ref), free(res);
    rs_world_finalize(world);
    return cli_nomem(C, "campaign result");
  }
  rs_status st = both ? rs_ckpt_both_campaign_run(world, &o, ref, res) : rs_ckpt_opt_campaign_run(world, &o, res);
  char err[1100];
  snprintf(err, sizeof err, "%s", st ? rs_last_error() : "");
  int wr = CLI_OK;
  if (!res->run.follower) { /* a follower rank of --distribute prints and writes nothing */
    if (both) {
      ckpt_ref_summary(&o, ref, "both");
      failed |= ref->failed != 0;
    }
    char jobs[32] = "";
    if (res->run.jobs > 1) snprintf(jobs, sizeof jobs, ", %d jobs", res->run.jobs);
    if (me == 0)
      printf("ckpt check: %lld cases (seed %llu, impl opt beside ref, %s, %d process%s%s) in %.1fs: ckpt_opt pass %lld  skip %lld  fail %lld\n",
             (long long)res->cases, (unsigned long long)o.seed, world_name(world), rs_world_size(world),
             rs_world_size(world) > 1 ? "es" : "", jobs, res->seconds, (long long)res->pass, (long long)res->skip,
             (long long)res->fail);
    failed |= res->fail != 0 || res->crashed;
    if (me == 0 && st == RS_OK && ckpt_opt_features(&o, res)) failed = 1;
    if (me == 0) wr = ckpt_check_reports(&o, ref, res, junit, jsonp);
  }
  free(ref);
  free(res);
  rs_world_finalize(world);
  int rc = ckpt_campaign_exit(st, err, failed);
  return st == RS_OK && wr != CLI_OK ? wr : rc;
}

int ckpt_opt_replay_file(const char *path) {
  char *text = rs_read_text(path);
  if (!text) return -1;
  cJSON *root;
  if (rs_json_parse(text, &root)) {
    free(text);
    return -1;
  }
  free(text);
  const cJSON *pn = cJSON_GetObjectItemCaseSensitive(root, "property"), *cs = cJSON_GetObjectItemCaseSensitive(root, "choices");
  if (!cJSON_IsString(pn) || strcmp(pn->valuestring, "ckpt_opt") || !cJSON_IsArray(cs)) {
    cJSON_Delete(root);
    return -1;
  }
  size_t n = 0;
  uint64_t *vv = malloc(sizeof *vv * ((size_t)cJSON_GetArraySize(cs) + 1));
  const cJSON *it;
  int bad = !vv;
  if (vv) cJSON_ArrayForEach(it, cs) {
      if (rs_json_u64(it, "choices[]", &vv[n])) {
        bad = 1;
        break;
      }
      n++;
    }
  cJSON_Delete(root);
  if (bad) {
    free(vv);
    return cli_status_error("ckpt replay", "");
  }
  char scratch[256], msg[1024];
  snprintf(scratch, sizeof scratch, "%s/reshard-ckpt-opt-replay-%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
           (int)getpid());
  int failed = 0;
  rs_status st = rs_ckpt_opt_replay(vv, n, scratch, &failed, msg, sizeof msg);
  rs_ckpt_rmtree(scratch);
  free(vv);
  if (st) return cli_status_error("ckpt replay", "");
  if (failed) {
    printf("FAIL %s: %s\n", path, msg);
    return CLI_FAIL;
  }
  printf("pass %s\n", path);
  return CLI_OK;
}
