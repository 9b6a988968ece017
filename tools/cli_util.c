/* cli_util.c - flag scanning, layout-flag parsing and error printing shared by the subcommands.
 * Every error names the flag it came from and exits 2. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "props/runner.h"
#include "core/checked.h"
#include "core/box.h"
#include "core/last_status.h"
#include "core/numflag.h"

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "reshard %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see reshard %s --help)\n", cmd);
  return CLI_USAGE;
}

int cli_status_error(const char *cmd, const char *what) {
  const char *e = rs_last_error();
  fprintf(stderr, "reshard %s: %s%s%s\n", cmd, what ? what : "", what && *what ? ": " : "",
          e[0] ? e : "error");
  return rs__last_status() == RS_ERR_NOMEM ? CLI_NOMEM : rs__last_status() == RS_ERR_TIMEOUT ? CLI_PEER : CLI_USAGE;
}

int cli_flag_error(const char *cmd, const char *flag, const char *lib) {
  const char *e = rs_last_error();
  for (const char *n = lib; n && *n;) {
    size_t len = strcspn(n, "|");
    const char *rest = e + len;
    if (len && strncmp(e, n, len) == 0 && (*rest == ' ' || *rest == ':' || *rest == '[' || *rest == 0)) {
      if (*rest == ':') ++rest;
      while (*rest == ' ') ++rest;
      /* "mesh.ranks[1]: ..." keeps its index: "--ranks[1]: ..." */
      fprintf(stderr, "reshard %s: %s%s%s\n", cmd, flag, *rest == '[' ? "" : ": ", *rest ? rest : "invalid");
      return rs__last_status() == RS_ERR_NOMEM ? CLI_NOMEM : CLI_USAGE;
    }
    n += len + (n[len] == '|');
  }
  return cli_status_error(cmd, flag);
}

int cli_nomem(const char *cmd, const char *what) {
  fprintf(stderr, "reshard %s: out of memory (%s)\n", cmd, what);
  return CLI_NOMEM;
}

int cli_opt(int argc, char **argv, int *i, const char *name, const char **val) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0) return 0;
  if (a[n] == '=') {
    *val = a + n + 1;
    return 1;
  }
  if (a[n] != 0) return 0;
  if (*i + 1 >= argc) return -1;
  *val = argv[++*i];
  return 1;
}

int cli_flag(char **argv, int i, const char *name) { return strcmp(argv[i], name) == 0; }

int cli_is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

int cli_u64(const char *s, unsigned long long *out) { return rs__flag_u64(s, out); }

int cli_int(const char *s, long long lo, long long hi, long long *out) { return rs__flag_int(s, lo, hi, out); }

int cli_seconds(const char *s, double *out) { return rs__flag_seconds(s, out); }
int cli_share(const char *s, double *out) { return rs__flag_share(s, out); }

int cli_dir_arg(const char *cmd, const char *flag, const char *path) {
  struct stat sb;
  if (!*path) return cli_usage_error(cmd, "%s: empty path", flag);
  if (stat(path, &sb) == 0) {
    if (!S_ISDIR(sb.st_mode)) return cli_usage_error(cmd, "%s: '%s': not a directory", flag, path);
    if (access(path, W_OK | X_OK) != 0) return cli_usage_error(cmd, "%s: '%s': not writable", flag, path);
    return CLI_OK;
  }
  if (errno != ENOENT) return cli_usage_error(cmd, "%s: '%s': %s", flag, path, strerror(errno));
  /* missing: the command creates it (one level), so its parent must be a writable directory */
  char parent[4096];
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') --n;
  while (n > 0 && path[n - 1] != '/') --n;
  while (n > 1 && path[n - 1] == '/') --n;
  if (n >= sizeof parent) return cli_usage_error(cmd, "%s: path too long", flag);
  snprintf(parent, sizeof parent, "%.*s", (int)n, n ? path : ".");
  if (n == 0) snprintf(parent, sizeof parent, ".");
  if (stat(parent, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(parent, W_OK | X_OK) != 0)
    return cli_usage_error(cmd, "%s: '%s': no such directory, and '%s' is no writable directory to make it in", flag,
                           path, parent);
  return CLI_OK;
}

int cli_layout_opt(const char *cmd, int argc, char **argv, int *i, cli_layout_args *a) {
  static const char *const flags[] = {"--mesh", "--ranks", "--shape", "--dtype"};
  const char **vals[] = {&a->mesh, &a->ranks, &a->shape, &a->dtype};
  for (int k = 0; k < 4; k++) {
    const char *v;
    int r = cli_opt(argc, argv, i, flags[k], &v);
    if (r == 0) continue;
    if (r < 0) {
      cli_usage_error(cmd, "%s: missing value", flags[k]);
      return -1;
    }
    *vals[k] = v;
    return 1;
  }
  return 0;
}

int cli_planner_flags(const char *cmd, const char *planner, int allow_auto, const char *cost,
                      const char *enumeration, rs_planner_kind *pk, rs_cost_model *cm, rs_enumeration *en) {
  if (planner) {
    rs_planner_kind k;
    if (rs_planner_parse(planner, &k) != RS_OK || (k == RS_PLANNER_AUTO && !allow_auto))
      return cli_usage_error(cmd, "--planner: '%s', expected %sgreedy or graph", planner, allow_auto ? "auto, " : "");
    *pk = k;
  }
  if (cost) {
    if (strcmp(cost, "seed") == 0) *cm = RS_COST_SEED;
    else if (strcmp(cost, "pytorch") == 0) *cm = RS_COST_PYTORCH;
    else return cli_usage_error(cmd, "--cost: '%s', expected seed or pytorch", cost);
  }
  if (enumeration && rs_enumeration_parse(enumeration, en) != RS_OK)
    return cli_usage_error(cmd, "--enumeration: '%s', expected seed or pytorch", enumeration);
  return CLI_OK;
}

/* A usage error inside a flag loop helper: -1 for its caller. */
static int flag_error(const char *cmd, const char *msg) {
  cli_usage_error(cmd, "%s", msg);
  return -1;
}

int cli_runner_opt(const char *cmd, int argc, char **argv, int *i, cli_runner_args *a) {
  const char *v;
  int r;
  if ((r = cli_opt(argc, argv, i, "--jobs", &v)) != 0) {
    if (r < 0 || rs_run_parse_jobs(v, &a->jobs) != RS_OK) {
      cli_usage_error(cmd, "--jobs: '%s', expected auto or 1..%d", r < 0 ? "" : v, RS_RUN_MAX_JOBS);
      return -1;
    }
  } else if ((r = cli_opt(argc, argv, i, "--shard", &v)) != 0) {
    if (r < 0 || rs_run_parse_shard(v, &a->shard_k, &a->shard_n) != RS_OK) {
      cli_usage_error(cmd, "--shard: '%s', expected K/N with 1 <= K <= N <= 100000", r < 0 ? "" : v);
      return -1;
    }
  } else if ((r = cli_opt(argc, argv, i, "--case-timeout", &v)) != 0) {
    if (r < 0 || cli_seconds_value(v, 1e6, &a->case_timeout))
      return flag_error(cmd, "--case-timeout: expected seconds in (0, 1000000]");
  } else if (cli_flag(argv, *i, "--distribute")) {
    a->distribute = 1;
  } else {
    return 0;
  }
  return 1;
}

int cli_runner_start(const char *cmd, cli_runner_args *a) {
  if (!a->distribute) return CLI_OK;
  if (a->jobs > 1) return cli_usage_error(cmd, "--distribute and --jobs: one process per MPI rank (set the ranks with mpirun -np)");
  if (a->shard_n > 1) return cli_usage_error(cmd, "--distribute and --shard: give one");
  if (rs_run_dist_open(&a->dist) != RS_OK) return cli_status_error(cmd, "--distribute");
  return CLI_OK;
}

void cli_runner_stop(cli_runner_args *a) {
  rs_run_dist_close(a->dist);
  a->dist = NULL;
}

int cli_campaign_opt(const char *cmd, int argc, char **argv, int *i, cli_campaign_args *a) {
  const char *v;
  int r;
  if ((r = cli_runner_opt(cmd, argc, argv, i, &a->run)) != 0) return r;
  if ((r = cli_opt(argc, argv, i, "--seed", &v)) != 0) {
    if (r < 0 || cli_u64(v, &a->seed)) return flag_error(cmd, "--seed: expected decimal digits (0 .. 18446744073709551615)");
  } else if ((r = cli_opt(argc, argv, i, "--cases", &v)) != 0) {
    if (r < 0 || cli_int(v, 1, (long long)1 << 40, &a->cases)) return flag_error(cmd, "--cases: expected a positive integer");
  } else if (!a->no_seconds && (r = cli_opt(argc, argv, i, "--seconds", &v)) != 0) {
    if (r < 0 || cli_seconds(v, &a->seconds)) {
      cli_usage_error(cmd, "--seconds: %s", CLI_SECONDS_EXPECTED);
      return -1;
    }
  } else if ((r = cli_opt(argc, argv, i, "--junit", &v)) != 0) {
    if (r < 0) return flag_error(cmd, "--junit: missing file");
    a->junit = v;
  } else if ((r = cli_opt(argc, argv, i, "--json", &v)) != 0) {
    if (r < 0) return flag_error(cmd, "--json: missing file");
    a->json = v;
  } else if ((r = cli_opt(argc, argv, i, "--regress-dir", &v)) != 0) {
    if (r < 0) return flag_error(cmd, "--regress-dir: missing dir");
    a->regress_dir = v;
  } else {
    return 0;
  }
  return 1;
}

int cli_build_mesh_tensor(const char *cmd, const cli_layout_args *a, rs_case *c) {
  int64_t sizes[RS_MAX_MESH_DIMS];
  int nd = 0;
  if (!a->mesh) return cli_usage_error(cmd, "--mesh: required (e.g. --mesh 4x2)");
  if (rs_parse_dims(a->mesh, RS_MAX_MESH_DIMS, sizes, &nd) != RS_OK) return cli_flag_error(cmd, "--mesh", "shape");
  if (nd < 1) return cli_usage_error(cmd, "--mesh: at least one mesh dim");
  int32_t *ranks = NULL;
  int nr = 0;
  if (a->ranks) {
    ranks = malloc(sizeof(int32_t) * RS_MAX_RANKS);
    if (!ranks) return cli_nomem(cmd, "--ranks");
    if (rs_parse_ranks(a->ranks, ranks, RS_MAX_RANKS, &nr) != RS_OK) {
      free(ranks);
      return cli_flag_error(cmd, "--ranks", "ranks");
    }
    int64_t prod;
    if (!rs__numel_ok(sizes, nd, &prod) || prod > RS_MAX_RANKS) {
      free(ranks);
      return cli_usage_error(cmd, "--mesh: more than %d ranks", RS_MAX_RANKS);
    }
    if (nr != prod) {
      free(ranks);
      return cli_usage_error(cmd, "--ranks: %d ranks for a mesh of %lld", nr, (long long)prod);
    }
  }
  rs_status st = rs_mesh_init(&c->mesh, nd, sizes, ranks);
  free(ranks);
  if (st) return strncmp(rs_last_error(), "mesh.ranks", 10) == 0 ? cli_flag_error(cmd, "--ranks", "mesh.ranks")
                                                                : cli_flag_error(cmd, "--mesh", "mesh.shape|mesh");
  c->tensor.dtype = RS_F32;
  if (a->dtype && rs_dtype_parse(a->dtype, &c->tensor.dtype) != RS_OK) return cli_flag_error(cmd, "--dtype", "dtype");
  c->tensor.ndim = 0;
  if (a->shape && rs_parse_dims(a->shape, RS_MAX_DIMS, c->tensor.shape, &c->tensor.ndim) != RS_OK)
    return cli_flag_error(cmd, "--shape", "shape");
  int64_t nb;
  if (rs__tensor_nbytes_at(&c->tensor, "--shape", &nb) != RS_OK) return cli_status_error(cmd, NULL);
  return CLI_OK;
}

int cli_build_sharding(const char *cmd, const char *flag_pl, const char *pl, const char *flag_order,
                       const char *order, const rs_case *c, rs_sharding *s) {
  if (!pl) return cli_usage_error(cmd, "%s: required (e.g. %s S0,R)", flag_pl, flag_pl);
  static const char PL[] = "placements|placement", ORD[] = "shard_order|order";
  if (rs_parse_placements(pl, s) != RS_OK) return cli_flag_error(cmd, flag_pl, PL);
  if (s->mesh_ndim != c->mesh.ndim)
    return cli_usage_error(cmd, "%s: %d placements for a %d-d mesh", flag_pl, s->mesh_ndim, c->mesh.ndim);
  if (rs_sharding_set_default_order(s, c->tensor.ndim) != RS_OK) return cli_flag_error(cmd, flag_pl, PL);
  if (order && rs_parse_order(order, s, c->tensor.ndim) != RS_OK) return cli_flag_error(cmd, flag_order, ORD);
  if (rs_sharding_validate(s, &c->mesh, &c->tensor) != RS_OK)
    return order ? cli_flag_error(cmd, flag_order, ORD) : cli_flag_error(cmd, flag_pl, PL);
  return CLI_OK;
}

void cli_json_ints(FILE *f, const int64_t *v, int n) {
  fputc('[', f);
  for (int i = 0; i < n; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)v[i]);
  fputc(']', f);
}

void cli_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch == '\n') fputs("\\n", f);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}
