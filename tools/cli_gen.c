/* cli_gen.c - the generator's options as CLI flags, shared by `reshard check` and `reshard gen`
 * so that "case i of gen" is "case i of check" for the same seed and the same flags, and a
 * planner author can aim a campaign at one corner (one dtype, one Partial op, deep meshes). */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "props/props.h"

const char CLI_GEN_HELP[] =
    "generator options (defaults reach 6-d meshes and 8-d tensors):\n"
    "  --max-ranks N        ranks in a mesh (1..1024, default 64)\n"
    "  --max-mesh-dims K    1..6 (default 6)      --max-tensor-dims K  0..8 (default 8)\n"
    "  --max-dim N          one tensor dim (1..65536, default 64)\n"
    "  --max-numel N        elements of the global tensor (1..2^26, default 16384)\n"
    "  --max-work N         elements x ranks (1..2^28, default 65536)\n"
    "  --dtypes LIST        e.g. BF16,F32 (default all)   --ops LIST  of sum,avg,min,max\n"
    "  --partial none|some|often   copy-only, some (default), or Partial-heavy cases\n"
    "  --orders default|any        shard orders (default any)\n"
    "  --rank-lists none|permuted|sparse|all   mesh rank lists besides 0..n-1 (default all)\n"
    "  --order-share P      percent of Partial cases with order values, the rest exact (0..100,\n"
    "                       default 50)\n";

int cli_name_list(const char *cmd, const char *flag, const char *v, int (*name_bit)(const char *),
                  uint32_t *mask) {
  char buf[256];
  if (strlen(v) >= sizeof buf) return cli_usage_error(cmd, "%s: list too long", flag);
  strcpy(buf, v);
  uint32_t m = 0;
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int b = name_bit(t);
    if (b < 0 || b >= 32) return cli_usage_error(cmd, "%s: unknown name '%s'", flag, t);
    m |= 1u << b;
  }
  if (!m) return cli_usage_error(cmd, "%s: empty list", flag);
  *mask = m;
  return CLI_OK;
}

static int dtype_bit(const char *s) {
  rs_dtype t;
  if (rs_dtype_parse(s, &t) != RS_OK) {
    rs_clear_error();
    return -1;
  }
  return (int)t;
}

static int op_bit(const char *s) {
  static const char *const names[] = {"sum", "avg", "min", "max"};
  static const rs_redop ops[] = {RS_SUM, RS_AVG, RS_MIN, RS_MAX};
  for (int k = 0; k < 4; k++)
    if (strcmp(s, names[k]) == 0) return (int)ops[k];
  return -1;
}

/* One of `names` (NULL-terminated): its index, or a usage error. */
static int pick(const char *cmd, const char *flag, const char *v, const char *const *names, int *out) {
  for (int k = 0; names[k]; k++)
    if (strcmp(v, names[k]) == 0) {
      *out = k;
      return CLI_OK;
    }
  char list[64] = "";
  for (int k = 0; names[k]; k++) {
    if (k) strcat(list, "|");
    strcat(list, names[k]);
  }
  return cli_usage_error(cmd, "%s: '%s', expected %s", flag, v, list);
}

/* A usage error for flag (a range when lo < hi); -1 for cli_gen_opt's caller. */
static int missing(const char *cmd, const char *flag, long long lo, long long hi) {
  if (lo < hi) cli_usage_error(cmd, "%s: expected %lld..%lld", flag, lo, hi);
  else cli_usage_error(cmd, "%s: missing value", flag);
  return -1;
}

int cli_gen_opt(const char *cmd, int argc, char **argv, int *i, rs_gen_opts *g) {
  static const struct {
    const char *flag;
    long long lo, hi;
  } ints[] = {{"--max-ranks", 1, RS_MAX_RANKS},       {"--max-mesh-dims", 1, RS_MAX_MESH_DIMS},
              {"--max-tensor-dims", 0, RS_MAX_DIMS}, {"--max-dim", 1, 1 << 16},
              {"--max-numel", 1, 1 << 26},           {"--max-work", 1, 1 << 28},
              {"--order-share", 0, 100}};
  const char *v;
  int r;
  for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
    if ((r = cli_opt(argc, argv, i, ints[k].flag, &v)) == 0) continue;
    long long n;
    if (r < 0 || cli_int(v, ints[k].lo, ints[k].hi, &n))
      return missing(cmd, ints[k].flag, ints[k].lo, ints[k].hi);
    switch (k) {
      case 0: g->max_ranks = (int)n; break;
      case 1: g->max_mesh_dims = (int)n; break;
      case 2: g->max_tensor_dims = (int)n; break;
      case 3: g->max_dim = n; break;
      case 4: g->max_numel = n; break;
      case 5: g->max_work = n; break;
      default: g->order_share = (int)n; break;
    }
    return 1;
  }
  if ((r = cli_opt(argc, argv, i, "--dtypes", &v)) != 0) {
    if (r < 0) return missing(cmd, "--dtypes", 0, 0);
    return cli_name_list(cmd, "--dtypes", v, dtype_bit, &g->dtypes) == CLI_OK ? 1 : -1;
  }
  if ((r = cli_opt(argc, argv, i, "--ops", &v)) != 0) {
    if (r < 0) return missing(cmd, "--ops", 0, 0);
    return cli_name_list(cmd, "--ops", v, op_bit, &g->ops) == CLI_OK ? 1 : -1;
  }
  if ((r = cli_opt(argc, argv, i, "--partial", &v)) != 0) {
    static const char *const names[] = {"some", "none", "often", NULL};
    if (r < 0) return missing(cmd, "--partial", 0, 0);
    return pick(cmd, "--partial", v, names, &g->partial) == CLI_OK ? 1 : -1;
  }
  if ((r = cli_opt(argc, argv, i, "--orders", &v)) != 0) {
    static const char *const names[] = {"default", "any", NULL};
    if (r < 0) return missing(cmd, "--orders", 0, 0);
    return pick(cmd, "--orders", v, names, &g->orders) == CLI_OK ? 1 : -1;
  }
  if ((r = cli_opt(argc, argv, i, "--rank-lists", &v)) != 0) {
    static const char *const names[] = {"none", "permuted", "sparse", "all", NULL};
    int k = 0;
    if (r < 0) return missing(cmd, "--rank-lists", 0, 0);
    if (pick(cmd, "--rank-lists", v, names, &k) != CLI_OK) return -1;
    g->rank_lists = k; /* none 0, permuted 1, sparse 2, all 3: the RS_GEN_RANKS_* bits */
    return 1;
  }
  return 0;
}
