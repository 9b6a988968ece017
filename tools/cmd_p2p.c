/* cmd_p2p.c - `reshard p2p ...`: cross-config resharding (SPEC 10). plan prints a P2P plan, run
 * executes a model file with ref or opt (any transport or copy-service plug-in) and compares every
 * destination rank with the oracle, layout prints each rank's parameters and boxes, check runs the
 * property campaign. Exit: 0 pass, 1 a difference / failed property, 2 bad usage or input. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"
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
    "      plan, check the plan (each dst element once, from a holder; opt: traffic == lb), execute and\n"
    "      compare every destination rank with the oracle. Exit 0 equal, 1 different, 2 bad input.\n"
    "      Under mpirun (--transport mpi|nccl) each process holds only its own parameters.\n"
    "  layout MODEL.json --config src|dst [--json]\n"
    "      each rank's parameters and boxes (global offsets and sizes); world = processes `run` needs\n"
    "  check [--seed S] [--cases N | --seconds T] [--impl ref|opt] [--transport local|mpi|nccl]\n"
    "        [--copy-service NAME|LIB.so] [--collocate any|yes|no] [--max-ranks N] [--regress-dir DIR]\n"
    "        [--json FILE] [--junit FILE] [--quiet]\n"
    "      property campaign over random models; failures are shrunk and saved for `p2p run`.\n"
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
      rs_p2p_box(&m, which, p, q, s, z);
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

#ifdef RS_HAVE_OPT
static int open_world(const char *transport, int *argc, char ***argv, rs_world **w) {
  if (strcmp(transport, "local") && strcmp(transport, "mpi") && strcmp(transport, "nccl"))
    return cli_usage_error(C, "--transport: '%s', expected local, mpi or nccl", transport);
  if (rs_world_init(transport, argc, argv, w)) return cli_status_error(C, "--transport");
  return CLI_OK;
}
#endif

static int cmd_run_(int argc, char **argv) {
  const char *model = NULL, *impl = "opt", *transport = "local", *svc = NULL, *v;
  int r, quiet = 0;
  for (int i = 1; i < argc; ++i) {
    CLI_OPT(C, "--impl", impl);
    CLI_OPT(C, "--transport", transport);
    CLI_OPT(C, "--copy-service", svc);
    if (cli_flag(argv, i, "--quiet")) quiet = 1;
    else if (argv[i][0] == '-') return cli_usage_error(C, "run: unknown option %s", argv[i]);
    else model = argv[i];
  }
  if (!model) return cli_usage_error(C, "run: MODEL.json missing");
  if (strcmp(impl, "ref") && strcmp(impl, "opt")) return cli_usage_error(C, "--impl: '%s', expected ref or opt", impl);
  rs_p2p_model m;
  if ((r = load(model, &m))) return r;
  if (rs_p2p_check_transforms(&m)) {
    rs_p2p_model_free(&m);
    return cli_status_error(C, model);
  }
  int bad = 0;
  char msg[512];
  rs_p2p_env env = {RS_IMPL_REF, NULL, NULL, 0, NULL, NULL};
  if (!strcmp(impl, "ref")) {
    if (strcmp(transport, "local") || svc) {
      rs_p2p_model_free(&m);
      return cli_usage_error(C, "run: --impl ref runs every rank in this process (no --transport/--copy-service)");
    }
    for (int p = RS_P2P_PROP_REF_PLAN; p <= RS_P2P_PROP_REF_ORACLE && !bad; ++p)
      if (rs_p2p_prop_run((rs_p2p_prop)p, &env, &m, msg, sizeof msg) == RS_FAIL) bad = 1;
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
    rs_copy_service *probe = NULL;
    if (rs_copy_service_open(svc ? svc : rs_world_transport(w), w, &probe)) {
      r = cli_status_error(C, "--copy-service");
      rs_world_finalize(w);
      rs_p2p_model_free(&m);
      return r;
    }
    rs_copy_service_close(probe);
    if (env.distributed && rs_world_size(w) < m.world) {
      int need = m.world, have = rs_world_size(w);
      rs_world_finalize(w);
      rs_p2p_model_free(&m);
      return cli_usage_error(C, "run: the model uses ranks up to %d but only %d processes run", need - 1, have);
    }
    for (int p = RS_P2P_PROP_OPT_PLAN; p <= RS_P2P_PROP_OPT_ORACLE && !bad; ++p) {
      if (env.distributed && p != RS_P2P_PROP_OPT_ORACLE) continue;
      rs_outcome o = rs_p2p_prop_run((rs_p2p_prop)p, &env, &m, msg, sizeof msg);
      if (o == RS_FAIL) bad = 1;
    }
    quiet |= rs_world_rank(w) != 0;
    rs_world_finalize(w);
#else
    rs_p2p_model_free(&m);
    return cli_usage_error(C, "--impl opt: this build has no opt/ library");
#endif
  }
  int input = 0;
  if (!quiet) {
    if (bad) printf("%s: %s\n", input ? "error" : "FAIL", msg);
    else printf("ok: %lld parameters, every destination rank equals the oracle (%s)\n", (long long)m.nparams, impl);
  }
  rs_p2p_model_free(&m);
  return bad ? (input ? CLI_USAGE : CLI_FAIL) : CLI_OK;
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
  o.env.impl = strcmp(impl, "ref") ? RS_IMPL_OPT : RS_IMPL_REF;
  o.env.copy_service = svc;
#ifdef RS_HAVE_OPT
  rs_world *w = NULL;
  if (o.env.impl == RS_IMPL_OPT && (r = open_world(transport, &argc, &argv, &w))) return r;
  o.env.world = w;
  o.env.distributed = w && !rs_world_is_local(w);
  if (o.env.distributed) {
    o.gen.world = rs_world_size(w);
    o.print = rs_world_rank(w) == 0;
  }
#else
  if (o.env.impl == RS_IMPL_OPT) return cli_usage_error(C, "--impl opt: this build has no opt/ library");
#endif
  if (o.env.impl == RS_IMPL_REF && (strcmp(transport, "local") || svc))
    return cli_usage_error(C, "check: --impl ref runs in one process (no --transport/--copy-service)");
  rs_p2p_campaign_result res;
  rs_status st = rs_p2p_campaign_run(&o, &res);
#ifdef RS_HAVE_OPT
  rs_world_finalize(w);
#endif
  if (st) return cli_status_error(C, "check");
  const char *tname = o.env.distributed ? transport : "local";
  if (o.print && ca.json && rs_p2p_report_json(ca.json, &o, &res, impl, tname)) return cli_status_error(C, "--json");
  if (o.print && ca.junit && rs_p2p_report_junit(ca.junit, &res)) return cli_status_error(C, "--junit");
  if (o.print) {
    if (!quiet || res.failed) {
      for (int p = 0; p < RS_P2P_PROP_COUNT; ++p) {
        if (!res.pass[p] && !res.fail[p] && !res.skip[p]) continue;
        printf("%-16s pass %lld fail %lld skip %lld\n", rs_p2p_prop_name((rs_p2p_prop)p), (long long)res.pass[p],
               (long long)res.fail[p], (long long)res.skip[p]);
      }
    }
    for (int p = 0; p < RS_P2P_PROP_COUNT; ++p) {
      if (!res.fail[p]) continue;
      printf("FAIL %s (case %lld of the campaign): %s\n", rs_p2p_prop_name((rs_p2p_prop)p),
             (long long)res.caught_at[p], res.message[p]);
      if (res.fixture[p][0])
        printf("  shrunk model saved: %s\n  replay: reshard p2p run %s --impl %s\n", res.fixture[p], res.fixture[p],
               p <= RS_P2P_PROP_REF_ORACLE ? "ref" : "opt");
    }
    printf("p2p check (%s, %s): %lld cases in %.2f s, %s\n", impl, o.env.distributed ? transport : "local",
           (long long)res.cases, res.seconds, res.failed ? "FAILED" : "all properties hold");
  }
  return res.failed ? CLI_FAIL : CLI_OK;
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
