/* cmd_p2p.c - `reshard p2p ...`: cross-config resharding (SPEC 10). plan prints a P2P plan, run
 * executes a model file with ref or opt (any transport or copy-service plug-in) and compares every
 * destination rank with the oracle, layout prints each rank's parameters and boxes, check runs the
 * property campaign. Exit: 0 pass, 1 a difference / failed property, 2 bad usage or input. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "core/mutant.h"
#include "reshard/case.h"
#include "props/p2p.h"
#include "reshard/p2p.h"
#ifdef RS_HAVE_OPT
#include "reshard/copy_service.h"
#include "reshard/opt.h"
#endif

static const char *HELP =
    "usage: reshard p2p <plan|run|layout|check> ...\n"
    "  plan MODEL.json [--planner ref|opt] [--json]\n"
    "      the transfers moving the model from src to dst; with --json\n"
    "      {\"transfers\":[{task_id,param,src_rank,dst_rank,offsets,sizes}],bytes_sent,lb,max_sender_bytes}\n"
    "  run MODEL.json [--impl ref|opt] [--transport local|mpi|nccl] [--copy-service NAME|LIB.so]\n"
    "                 [--json] [--dump DIR]\n"
    "      plan, check the plan (each dst element once, from a holder; opt: traffic == lb), execute and\n"
    "      compare every destination rank with the oracle. Exit 0 equal, 1 different, 2 bad input,\n"
    "      4 a peer stalled or died (--timeout SEC, default 300, for every transport and plug-in).\n"
    "      Under mpirun (--transport mpi|nccl) each process holds only its own parameters.\n"
    "      --json: per rank and parameter the destination shape, xxh3 of its bytes (and of the MXFP8\n"
    "      scales) and, with opt, the bytes sent and received as counted at the copy service (one\n"
    "      process: --transport local). --dump DIR: DIR/rank<R>/<param>.bin raw destination bytes\n"
    "      (and <param>.scale for MXFP8), each process its own ranks.\n"
    "  layout MODEL.json --config src|dst [--json]\n"
    "      each rank's parameters and boxes (global offsets and sizes); world = processes `run` needs\n"
    "  check [--seed S] [--cases N | --seconds T] [--impl ref|opt] [--transport local|mpi|nccl]\n"
    "        [--copy-service NAME|LIB.so] [--collocate any|yes|no] [--max-ranks N] [--regress-dir DIR]\n"
    "        [--json FILE] [--junit FILE] [--quiet] [--jobs N|auto] [--shard K/N] [--case-timeout SEC]\n"
    "      property campaign over random models; failures are shrunk and saved for `p2p run`.\n"
    "      Case i is drawn from the seed and i alone; each property's first failure (the lowest\n"
    "      case) is shrunk in the main process, so --jobs and --shard do not change the report.\n"
    "      --jobs is refused under --transport mpi|nccl (one process per rank: mpirun's -np).\n"
    CLI_RUNNER_HELP
    "The model format is in docs/p2p.md.\n";

static const char *C = "p2p";

static int load(const char *path, rs_p2p_model *m) {
  if (rs_p2p_model_load(path, m)) return cli_status_error(C, NULL); /* the message names the file */
  return CLI_OK;
}

static int cmd_plan_(int argc, char **argv) {
  const char *model = NULL, *planner = "opt", *v;
  int json = 0, r;
  for (int i = 1; i < argc; ++i) {
    CLI_OPT(C, "--planner", planner);
    if (cli_flag(argv, i, "--json")) json = 1;
    else if (argv[i][0] == '-') return cli_usage_error(C, "plan: unknown option %s", argv[i]);
    else model = argv[i];
  }
  if (!model) return cli_usage_error(C, "plan: MODEL.json missing");
  if (strcmp(planner, "ref") && strcmp(planner, "opt"))
    return cli_usage_error(C, "--planner: '%s', expected ref or opt", planner);
  rs_p2p_model m;
  if ((r = load(model, &m))) return r;
  rs_p2p_plan p;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  rs_status st;
#ifdef RS_HAVE_OPT
  st = !strcmp(planner, "ref") ? rs_p2p_ref_plan(&m, &p) : rs_p2p_opt_plan(&m, &p);
#else
  if (strcmp(planner, "ref")) {
    rs_p2p_model_free(&m);
    return cli_usage_error(C, "--planner opt: this build has no opt/ library");
  }
  st = rs_p2p_ref_plan(&m, &p);
#endif
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int64_t lb = 0;
  if (st || (st = rs_p2p_lower_bound(&m, &lb))) {
    rs_p2p_model_free(&m);
    return cli_status_error(C, "plan");
  }
  if (json) {
    rs_p2p_plan_json(&m, &p, lb, stdout);
  } else {
    double ms = 1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("planner %s: %lld transfers, %lld bytes sent, %lld copied locally, lower bound %lld (ratio %.3f)\n",
           planner, (long long)p.n, (long long)p.bytes_sent, (long long)p.bytes_local, (long long)lb,
           lb ? (double)p.bytes_sent / (double)lb : (p.bytes_sent ? 0.0 : 1.0));
    printf("senders %lld, max %lld bytes per sender, mean %.1f (max/mean %.3f); planned in %.3f ms\n",
           (long long)p.senders, (long long)p.max_sender_bytes,
           p.senders ? (double)p.bytes_sent / (double)p.senders : 0.0,
           p.senders && p.bytes_sent ? (double)p.max_sender_bytes * (double)p.senders / (double)p.bytes_sent : 0.0, ms);
  }
  rs_p2p_plan_free(&p);
  rs_p2p_model_free(&m);
  return CLI_OK;
}

static int cmd_layout_(int argc, char **argv) {
  const char *model = NULL, *cfg = NULL, *v;
  int json = 0, r;
  for (int i = 1; i < argc; ++i) {
    CLI_OPT(C, "--config", cfg);
    if (cli_flag(argv, i, "--json")) json = 1;
    else if (argv[i][0] == '-') return cli_usage_error(C, "layout: unknown option %s", argv[i]);
    else model = argv[i];
  }
  if (!model) return cli_usage_error(C, "layout: MODEL.json missing");
  if (!cfg || (strcmp(cfg, "src") && strcmp(cfg, "dst"))) return cli_usage_error(C, "--config: expected src or dst");
  int which = strcmp(cfg, "src") ? RS_P2P_DST : RS_P2P_SRC;
  rs_p2p_model m;
  if ((r = load(model, &m))) return r;
  if (json) printf("{\"config\":\"%s\",\"world\":%d,\"ranks\":[", cfg, m.world);
  int firstr = 1;
  for (int32_t rk = 0; rk < m.world; ++rk) {
    int any = 0;
    for (int64_t p = 0; p < m.nparams; ++p) {
      int64_t q = rs_p2p_pos(&m, which, p, rk);
      if (q < 0) continue;
      int64_t s[RS_MAX_DIMS], z[RS_MAX_DIMS];
      rs_p2p_shape_offset(&m, which, p, q, z, s);
      if (RS_MUTANT(657)) rs_p2p_box(&m, which, p, q, s, z); /* planted: the raw box, not SPEC 4's report */
      int nd = m.param[p].t.ndim;
      char pl[128];
      rs_format_sharding(&m.cfg[which].place[p].s, pl, sizeof pl);
      if (json) {
        if (!any) printf("%s\n{\"rank\":%d,\"params\":[", firstr ? "" : ",", rk);
        printf("%s{\"name\":", any ? "," : "");
        cli_json_str(stdout, m.param[p].name);
        printf(",\"placements\":\"%s\",\"offsets\":", pl);
        cli_json_ints(stdout, s, nd);
        printf(",\"sizes\":");
        cli_json_ints(stdout, z, nd);
        printf("}");
      } else {
        if (!any) printf("rank %d\n", rk);
        printf("  %-36s %-14s offsets [", m.param[p].name, pl);
        for (int d = 0; d < nd; ++d) printf("%s%lld", d ? "," : "", (long long)s[d]);
        printf("] sizes [");
        for (int d = 0; d < nd; ++d) printf("%s%lld", d ? "," : "", (long long)z[d]);
        printf("]%s\n", which == RS_P2P_DST && m.param[p].transform ? " mxfp8" : "");
      }
      any = 1;
    }
    if (any && json) printf("]}");
    if (any) firstr = 0;
  }
  if (json) printf("]}\n");
  rs_p2p_model_free(&m);
  return CLI_OK;
}

/* ---- what a move produced, for other tools: `run --json` and `run --dump` ---- */

typedef struct run_out {
  rs_p2p_locals got; /* destination locals of the ranks this process plays */
  int32_t me;        /* -1: every rank */
#ifdef RS_HAVE_OPT
  rs_copy_service *cs; /* counted; NULL for ref */
#endif
} run_out;

static int64_t local_bytes(const rs_p2p_model *m, int64_t p, const rs_p2p_local *l) {
  return m->param[p].transform == RS_XFORM_MXFP8 ? l->numel : l->numel * rs_dtype_size(m->param[p].t.dtype);
}

static uint64_t digest(const void *data, int64_t n) {
  rs_local l;
  memset(&l, 0, sizeof l);
  l.data = (void *)data;
  l.nbytes = n;
  return rs_local_digest(&l);
}

/* Executes the model once more (the properties above keep their locals to themselves), keeping
 * the destination locals and, with opt, the copy service's byte counts. */
static rs_status run_keep(const rs_p2p_model *m, int opt, void *world, const char *svc, run_out *o) {
  memset(o, 0, sizeof *o);
  o->me = -1;
  rs_p2p_plan plan;
  rs_p2p_locals src;
  memset(&plan, 0, sizeof plan);
  memset(&src, 0, sizeof src);
  rs_status st;
  if (!opt) {
    if (!(st = rs_p2p_ref_plan(m, &plan)) && !(st = rs_p2p_source_locals(m, -1, &src)))
      st = rs_p2p_ref_execute(m, &plan, &src, &o->got);
  } else {
#ifdef RS_HAVE_OPT
    rs_world *w = world;
    o->me = rs_world_is_local(w) ? -1 : rs_world_rank(w);
    st = o->me >= 0 ? rs_p2p_opt_plan_rank(m, o->me, &plan) : rs_p2p_opt_plan(m, &plan);
    if (!st) st = rs_copy_service_open(svc ? svc : rs_world_transport(w), w, &o->cs);
    if (!st) rs_copy_service_count(o->cs, 1);
    if (!st) st = rs_p2p_source_locals(m, o->me, &src);
    if (!st) st = rs_p2p_opt_execute(m, &plan, o->cs, o->me, &src, &o->got, NULL);
#else
    (void)world;
    (void)svc;
    st = rs_fail(RS_ERR_UNSUPPORTED, "this build has no opt/ library");
#endif
  }
  rs_p2p_locals_free(&src);
  rs_p2p_plan_free(&plan);
  return st;
}

static void run_out_free(run_out *o) {
  rs_p2p_locals_free(&o->got);
#ifdef RS_HAVE_OPT
  rs_copy_service_close(o->cs);
#endif
}

/* The destination local of rank r for parameter p, NULL when r holds none (or another process
 * plays it). */
static const rs_p2p_local *held(const rs_p2p_model *m, const run_out *o, int64_t p, int32_t r, int64_t *pos) {
  *pos = rs_p2p_pos(m, RS_P2P_DST, p, r);
  if (*pos < 0 || (o->me >= 0 && r != o->me) || !o->got.loc || !o->got.loc[p]) return NULL;
  const rs_p2p_local *l = &o->got.loc[p][*pos];
  return l->data ? l : NULL;
}

static void print_json(const rs_p2p_model *m, const run_out *o, const char *impl) {
  printf("{\"impl\":\"%s\",\"world\":%d,\"ranks\":[", impl, m->world);
  for (int32_t r = 0; r < m->world; ++r) {
    printf("%s\n{\"rank\":%d,\"params\":[", r ? "," : "", r);
    int any = 0;
    for (int64_t p = 0; p < m->nparams; ++p) {
      int64_t q, sent = 0, recv = 0;
      const rs_p2p_local *l = held(m, o, p, r, &q);
#ifdef RS_HAVE_OPT
      if (o->cs) rs_copy_service_counted(o->cs, r, p, &sent, &recv);
#endif
      if (!l && !sent && !recv) continue;
      printf("%s{\"name\":", any ? "," : "");
      cli_json_str(stdout, m->param[p].name);
      int mx = m->param[p].transform == RS_XFORM_MXFP8;
      if (l) {
        printf(",\"dtype\":\"%s\"", mx ? "F8_E4M3" : rs_dtype_name(m->param[p].t.dtype));
        int64_t s[RS_MAX_DIMS], z[RS_MAX_DIMS];
        rs_p2p_box(m, RS_P2P_DST, p, q, s, z);
        printf(",\"shape\":");
        cli_json_ints(stdout, z, m->param[p].t.ndim);
        printf(",\"xxh3\":\"%016llx\"", (unsigned long long)digest(l->data, local_bytes(m, p, l)));
        if (mx) printf(",\"scale_xxh3\":\"%016llx\"", (unsigned long long)digest(l->scale, l->numel / RS_MXFP8_BLOCK));
      }
#ifdef RS_HAVE_OPT
      if (o->cs) printf(",\"bytes_sent\":%lld,\"bytes_received\":%lld", (long long)sent, (long long)recv);
#endif
      printf("}");
      any = 1;
    }
    printf("]}");
  }
  printf("]}\n");
}

/* Writes n bytes to DIR/rank<r>/<name><ext>, refusing to follow a symbolic link. */
static rs_status dump_file(const char *dir, int32_t r, const char *name, const char *ext, const void *data, int64_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/rank%d", dir, r);
  if (mkdir(path, 0755) && errno != EEXIST) return rs_fail(RS_ERR_IO, "--dump: cannot create %s: %s", path, strerror(errno));
  size_t k = strlen(path);
  snprintf(path + k, sizeof path - k, "/%s%s", name, ext);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return rs_fail(RS_ERR_IO, "--dump: cannot write %s: %s", path, strerror(errno));
  const char *b = data;
  for (int64_t done = 0; done < n;) {
    ssize_t w = write(fd, b + done, (size_t)(n - done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      close(fd);
      return rs_fail(RS_ERR_IO, "--dump: writing %s: %s", path, strerror(errno));
    }
    done += w;
  }
  if (close(fd)) return rs_fail(RS_ERR_IO, "--dump: closing %s: %s", path, strerror(errno));
  return RS_OK;
}

static rs_status dump_all(const rs_p2p_model *m, const run_out *o, const char *dir) {
  if (mkdir(dir, 0755) && errno != EEXIST) return rs_fail(RS_ERR_IO, "--dump: cannot create %s: %s", dir, strerror(errno));
  struct stat sb;
  if (lstat(dir, &sb) || !S_ISDIR(sb.st_mode)) return rs_fail(RS_ERR_INVALID, "--dump: %s is not a directory", dir);
  rs_status st = RS_OK;
  for (int32_t r = 0; r < m->world && !st; ++r)
    for (int64_t p = 0; p < m->nparams && !st; ++p) {
      int64_t q;
      const rs_p2p_local *l = held(m, o, p, r, &q);
      if (!l) continue;
      st = dump_file(dir, r, m->param[p].name, ".bin", l->data, local_bytes(m, p, l));
      if (!st && m->param[p].transform == RS_XFORM_MXFP8)
        st = dump_file(dir, r, m->param[p].name, ".scale", l->scale, l->numel / RS_MXFP8_BLOCK);
    }
  return st;
}

#ifdef RS_HAVE_OPT
static int open_world(const char *transport, int *argc, char ***argv, rs_world **w) {
  if (strcmp(transport, "local") && strcmp(transport, "mpi") && strcmp(transport, "nccl"))
    return cli_usage_error(C, "--transport: '%s', expected local, mpi or nccl", transport);
  if (rs_world_init(transport, argc, argv, w)) return cli_status_error(C, "--transport");
  return CLI_OK;
}

/* A missing, truncated or wrong-ABI plug-in is bad input (exit 2) found before any case runs, never
 * a failed property with regression files. */
static int probe_copy_service(rs_world *w, const char *svc) {
  rs_copy_service *probe = NULL;
  if (rs_copy_service_open(svc ? svc : rs_world_transport(w), w, &probe)) return cli_status_error(C, "--copy-service");
  rs_copy_service_close(probe);
  return CLI_OK;
}
#endif

static int cmd_run_(int argc, char **argv) {
  const char *model = NULL, *impl = "opt", *transport = "local", *svc = NULL, *dump = NULL, *v;
  int r, quiet = 0, json = 0;
  for (int i = 1; i < argc; ++i) {
    CLI_OPT(C, "--impl", impl);
    CLI_OPT(C, "--transport", transport);
    CLI_TIMEOUT_OPT(C)
    CLI_OPT(C, "--copy-service", svc);
    CLI_OPT(C, "--dump", dump);
    if (cli_flag(argv, i, "--json")) json = 1;
    else if (cli_flag(argv, i, "--quiet")) quiet = 1;
    else if (argv[i][0] == '-') return cli_usage_error(C, "run: unknown option %s", argv[i]);
    else model = argv[i];
  }
  if (!model) return cli_usage_error(C, "run: MODEL.json missing");
  if (strcmp(impl, "ref") && strcmp(impl, "opt")) return cli_usage_error(C, "--impl: '%s', expected ref or opt", impl);
  if (json && strcmp(transport, "local"))
    return cli_usage_error(C, "--json: one process must play every rank (--transport local); under mpirun use --dump DIR");
  if (dump && !*dump) return cli_usage_error(C, "--dump: expected a directory");
  rs_p2p_model m;
  if ((r = load(model, &m))) return r;
  void *keep_world = NULL; /* the world `--json` / `--dump` run on (opt) */
  int bad = 0;
  char msg[512];
  rs_p2p_env env = {RS_IMPL_REF, NULL, NULL, 0, NULL, NULL};
  if (!strcmp(impl, "ref")) {
    if (strcmp(transport, "local") || svc) {
      rs_p2p_model_free(&m);
      return cli_usage_error(C, "run: --impl ref runs every rank in this process (no --transport/--copy-service)");
    }
    for (int p = RS_P2P_PROP_REF_PLAN; p <= RS_P2P_PROP_REF_ORACLE && !bad; ++p) {
      rs_clear_error();
      rs_outcome o = rs_p2p_prop_run((rs_p2p_prop)p, &env, &m, msg, sizeof msg);
      if (o == RS_FAIL) bad = rs_outcome_is_oom(o) ? 3 : 1;
    }
  } else {
#ifdef RS_HAVE_OPT
    rs_world *w = NULL;
    if ((r = open_world(transport, &argc, &argv, &w))) {
      rs_p2p_model_free(&m);
      return r;
    }
    env.impl = RS_IMPL_OPT;
    env.world = w;
    env.copy_service = svc;
    env.distributed = !rs_world_is_local(w);
    if ((r = probe_copy_service(w, svc))) {
      rs_world_finalize(w);
      rs_p2p_model_free(&m);
      return r;
    }
    if (env.distributed && rs_world_size(w) < m.world) {
      int need = m.world, have = rs_world_size(w);
      rs_world_finalize(w);
      rs_p2p_model_free(&m);
      return cli_usage_error(C, "run: the model uses ranks up to %d but only %d processes run", need - 1, have);
    }
    for (int p = RS_P2P_PROP_OPT_PLAN; p <= RS_P2P_PROP_OPT_ORACLE && !bad; ++p) {
      if (env.distributed && p != RS_P2P_PROP_OPT_ORACLE) continue;
      rs_clear_error();
      rs_outcome o = rs_p2p_prop_run((rs_p2p_prop)p, &env, &m, msg, sizeof msg);
      if (o == RS_FAIL) bad = rs_outcome_is_oom(o) ? 3 : 1;
    }
    if (rs_opt_transport_failure()) { /* a stalled or dead peer: exit 4 on every rank */
      fprintf(stderr, "reshard p2p: %s\n", rs_opt_transport_failure());
      rs_world_finalize(w);
      rs_p2p_model_free(&m);
      return CLI_PEER;
    }
    quiet |= rs_world_rank(w) != 0 || json;
    keep_world = w;
#else
    rs_p2p_model_free(&m);
    return cli_usage_error(C, "--impl opt: this build has no opt/ library");
#endif
  }
  int rc = CLI_OK;
  if (!bad && (json || dump)) {
    /* after the check passed: what the move produced, for tools outside the process */
    run_out o;
    rs_status st = run_keep(&m, !strcmp(impl, "opt"), keep_world, svc, &o);
    if (!st && dump) st = dump_all(&m, &o, dump);
    if (!st && json) print_json(&m, &o, impl);
    run_out_free(&o);
    if (st) rc = cli_status_error(C, dump ? "--dump" : "--json"); /* bad directory 2, out of memory 3 */
  }
#ifdef RS_HAVE_OPT
  if (keep_world) rs_world_finalize(keep_world);
#endif
  if (bad == 3) fprintf(stderr, "reshard %s: %s\n", C, msg); /* out of memory: no verdict, exit 3 */
  else if (!quiet) {
    if (bad) printf("FAIL: %s\n", msg);
    else if (rc == CLI_OK) printf("ok: %lld parameters, every destination rank equals the oracle (%s)\n", (long long)m.nparams, impl);
  }
  rs_p2p_model_free(&m);
  return bad == 3 ? CLI_NOMEM : bad ? CLI_FAIL : rc;
}

/* The reports and the console summary of a finished campaign; its exit status. */
static int report_check(const rs_p2p_campaign *o, const rs_p2p_campaign_result *r, const cli_campaign_args *ca,
                        const char *impl, const char *transport, int quiet) {
  if (r->run.follower) return CLI_OK; /* --distribute: rank 0 reports the campaign */
  const char *tname = o->env.distributed ? transport : "local";
  if (o->print && ca->json && rs_p2p_report_json(ca->json, o, r, impl, tname)) return cli_status_error(C, "--json");
  if (o->print && ca->junit && rs_p2p_report_junit(ca->junit, r)) return cli_status_error(C, "--junit");
  if (o->print) {
    if (!quiet || r->failed) {
      for (int p = 0; p < RS_P2P_PROP_COUNT; ++p) {
        if (!r->pass[p] && !r->fail[p] && !r->skip[p]) continue;
        printf("%-16s pass %lld fail %lld skip %lld\n", rs_p2p_prop_name((rs_p2p_prop)p), (long long)r->pass[p],
               (long long)r->fail[p], (long long)r->skip[p]);
      }
    }
    for (int p = 0; p < RS_P2P_PROP_COUNT; ++p) {
      if (!r->fail[p]) continue;
      printf("FAIL %s (case %lld of the campaign): %s\n", rs_p2p_prop_name((rs_p2p_prop)p),
             (long long)r->caught_at[p], r->message[p]);
      if (r->fixture[p][0])
        printf("  shrunk model saved: %s\n  replay: reshard p2p run %s --impl %s\n", r->fixture[p], r->fixture[p],
               p <= RS_P2P_PROP_REF_ORACLE ? "ref" : "opt");
    }
    if (r->run.crashed)
      rs_run_print_crash(&r->run, (unsigned long long)o->seed);
    printf("p2p check (%s, %s): %lld cases in %.2f s, %s\n", impl, tname, (long long)r->cases, r->seconds,
           r->failed ? "FAILED" : "all properties hold");
  }
  return r->failed ? CLI_FAIL : CLI_OK;
}

/* Opens the world (opt), runs the campaign and reports it. */
static int run_check(rs_p2p_campaign *o, const cli_campaign_args *ca, const char *impl, const char *transport,
                     const char *svc, int quiet, int *argc, char ***argv) {
  int r;
  o->env.impl = strcmp(impl, "ref") ? RS_IMPL_OPT : RS_IMPL_REF;
  o->env.copy_service = svc;
#ifdef RS_HAVE_OPT
  rs_world *w = NULL;
  if (o->env.impl == RS_IMPL_OPT && (r = open_world(transport, argc, argv, &w))) return r;
  if (o->env.impl == RS_IMPL_OPT && (r = probe_copy_service(w, svc))) {
    rs_world_finalize(w);
    return r;
  }
  o->env.world = w;
  o->env.distributed = w && !rs_world_is_local(w);
  if (o->env.distributed) {
    o->gen.world = rs_world_size(w);
    o->print = rs_world_rank(w) == 0;
  }
#else
  (void)argc;
  (void)argv;
  if (o->env.impl == RS_IMPL_OPT) return cli_usage_error(C, "--impl opt: this build has no opt/ library");
#endif
  if (o->env.impl == RS_IMPL_REF && (strcmp(transport, "local") || svc))
    r = cli_usage_error(C, "check: --impl ref runs in one process (no --transport/--copy-service)");
  else {
    rs_p2p_campaign_result *res = calloc(1, sizeof *res);
    rs_status st = res ? rs_p2p_campaign_run(o, res) : RS_ERR_NOMEM;
    if (!res) r = cli_nomem(C, "campaign results");
    else r = st ? cli_status_error(C, "check") : report_check(o, res, ca, impl, transport, quiet);
    free(res);
  }
#ifdef RS_HAVE_OPT
  rs_world_finalize(w);
#endif
  return r;
}

static int cmd_check_(int argc, char **argv) {
  const char *impl = "opt", *transport = "local", *svc = NULL, *col = "any", *v;
  cli_campaign_args ca = {.seed = 1};
  long long maxr = 12;
  int r, quiet = 0;
  for (int i = 1; i < argc; ++i) {
    const char *mr = NULL;
    CLI_OPT(C, "--impl", impl);
    CLI_OPT(C, "--transport", transport);
    CLI_TIMEOUT_OPT(C)
    CLI_OPT(C, "--copy-service", svc);
    CLI_OPT(C, "--collocate", col);
    if ((r = cli_campaign_opt(C, argc, argv, &i, &ca))) {
      if (r < 0) return CLI_USAGE;
      continue;
    }
    if ((r = cli_opt(argc, argv, &i, "--max-ranks", &mr))) {
      if (r < 0 || cli_int(mr, 1, 4096, &maxr)) return cli_usage_error(C, "--max-ranks: expected 1..4096");
      continue;
    }
    if (cli_flag(argv, i, "--quiet")) quiet = 1;
    else return cli_usage_error(C, "check: unknown argument %s", argv[i]);
  }
  if (ca.cases && ca.seconds > 0) return cli_usage_error(C, "--cases and --seconds: give one");
  if (!ca.cases && ca.seconds <= 0) ca.cases = 1000;
  if (strcmp(impl, "ref") && strcmp(impl, "opt")) return cli_usage_error(C, "--impl: '%s', expected ref or opt", impl);
  rs_p2p_campaign o;
  memset(&o, 0, sizeof o);
  o.seed = ca.seed;
  o.cases = ca.cases;
  o.seconds = ca.seconds;
  rs_p2p_gen_opts_default(&o.gen);
  o.gen.max_ranks = (int)maxr;
  o.gen.collocate = !strcmp(col, "yes") ? 1 : !strcmp(col, "no") ? 0 : -1;
  if (strcmp(col, "yes") && strcmp(col, "no") && strcmp(col, "any"))
    return cli_usage_error(C, "--collocate: expected any, yes or no");
  o.regress_dir = ca.regress_dir;
  o.quiet = quiet;
  o.print = 1;
  o.jobs = ca.run.jobs;
  o.shard_k = ca.run.shard_k;
  o.shard_n = ca.run.shard_n;
  o.case_timeout = ca.run.case_timeout;
  int mpi = strcmp(transport, "local") != 0;
  if (o.jobs > 1 && mpi)
    return cli_usage_error(C, "--jobs: one process per rank under --transport %s (use mpirun's -np, or --jobs 1)", transport);
  if (ca.run.distribute && mpi)
    return cli_usage_error(C, "--distribute: the ranks of --transport %s play one case together; give one of the two", transport);
  if ((r = cli_runner_start(C, &ca.run)) != CLI_OK) return r;
  o.dist = ca.run.dist;
  r = run_check(&o, &ca, impl, transport, svc, quiet, &argc, &argv);
  cli_runner_stop(&ca.run);
  return r;
}

int cmd_p2p(int argc, char **argv) {
  if (argc < 2 || cli_is_help(argv[1])) {
    fputs(HELP, argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  for (int i = 2; i < argc; ++i)
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      return CLI_OK;
    }
  const char *sub = argv[1];
  if (!strcmp(sub, "plan")) return cmd_plan_(argc - 1, argv + 1);
  if (!strcmp(sub, "run")) return cmd_run_(argc - 1, argv + 1);
  if (!strcmp(sub, "layout")) return cmd_layout_(argc - 1, argv + 1);
  if (!strcmp(sub, "check")) return cmd_check_(argc - 1, argv + 1);
  return cli_usage_error(C, "unknown subcommand '%s' (plan, run, layout, check)", sub);
}
