/* cmd_layout.c - `reshard layout`: every mesh rank's coordinate, local shape and global offset
 * (PyTorch's compute_local_shape_and_global_offset), in mesh-position order. */
#include <string.h>
#include "cli.h"
#include "core/fmt.h"

static const char *HELP =
    "usage: reshard layout --mesh 4x2 --placements S0,S0 --shape 18x2 [--order 0:1,0]\n"
    "                      [--ranks 0,1,...] [--dtype F32] [--json]\n"
    "Prints each mesh rank's coordinate, local shape and global offset (empty dims report\n"
    "offset = global size, as PyTorch does). Ranks are listed in mesh-position order.\n"
    "  --order  shard order: <tensor dim>:<mesh dims in split order>;...  e.g. 0:1,0\n";

int cmd_layout(int argc, char **argv) {
  const char *C = "layout";
  cli_layout_args a = {0};
  const char *pl = NULL, *order = NULL, *v;
  int json = 0, r;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      return CLI_OK;
    }
    if (cli_flag(argv, i, "--json")) { json = 1; continue; }
    if ((r = cli_layout_opt(C, argc, argv, &i, &a)) != 0) {
      if (r < 0) return CLI_USAGE;
      continue;
    }
    CLI_OPT(C, "--placements", pl)
    CLI_OPT(C, "--order", order)
    return cli_usage_error(C, "unknown argument '%s'", argv[i]);
  }
  rs_case c;
  memset(&c, 0, sizeof c);
  if ((r = cli_build_mesh_tensor(C, &a, &c)) != CLI_OK) return r;
  if ((r = cli_build_sharding(C, "--placements", pl, "--order", order, &c, &c.src)) != CLI_OK) return r;
  if (json) printf("{\"ranks\":[");
  else {
    char s[256];
    rs_format_sharding(&c.src, s, sizeof s);
    printf("layout %s on mesh %s, shape %s\n", s, a.mesh, a.shape ? a.shape : "(scalar)");
    printf("%6s  %-14s %-20s %-20s\n", "rank", "coord", "local_shape", "global_offset");
  }
  for (int pos = 0; pos < c.mesh.nranks; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS] = {0}, shp[RS_MAX_DIMS], off[RS_MAX_DIMS];
    rs_mesh_coord(&c.mesh, pos, coord);
    rs_local_shape_offset(&c.mesh, &c.src, &c.tensor, coord, shp, off);
    if (json) {
      printf("%s{\"rank\":%d,\"coord\":", pos ? "," : "", (int)c.mesh.ranks[pos]);
      cli_json_ints(stdout, coord, c.mesh.ndim);
      printf(",\"local_shape\":");
      cli_json_ints(stdout, shp, c.tensor.ndim);
      printf(",\"global_offset\":");
      cli_json_ints(stdout, off, c.tensor.ndim);
      printf("}");
    } else {
      char b1[64], b2[96], b3[96];
      rs__fmt_ints(b1, sizeof b1, coord, c.mesh.ndim, "(", ",", ")");
      rs__fmt_ints(b2, sizeof b2, shp, c.tensor.ndim, "[", ",", "]");
      rs__fmt_ints(b3, sizeof b3, off, c.tensor.ndim, "[", ",", "]");
      printf("%6d  %-14s %-20s %-20s\n", (int)c.mesh.ranks[pos], b1, b2, b3);
    }
  }
  if (json) printf("]}\n");
  return CLI_OK;
}
