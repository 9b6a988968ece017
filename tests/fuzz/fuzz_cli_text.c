/* fuzz_cli_text.c - libFuzzer target: the CLI text syntax (core/text.c) - meshes and shapes
 * ("4x2"), rank lists ("3,1,2,0"), placements ("S0,P(avg),R") and shard orders ("0:1,0;1:0").
 * The input is up to five fields separated by '|': mesh|shape|placements|order|ranks, fed through
 * the same sequence the CLI runs (parse, build the mesh, check sizes, validate the sharding,
 * every rank's box, the printed forms); each field is also fed to every parser on its own. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "reshard/reshard.h"
#include "core/fmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void each_parser(const char *s) {
  int64_t d[RS_MAX_DIMS];
  int n;
  int32_t r[RS_MAX_RANKS];
  rs_sharding sh;
  rs_placement pl;
  (void)rs_parse_dims(s, RS_MAX_DIMS, d, &n);
  (void)rs_parse_ranks(s, r, RS_MAX_RANKS, &n);
  (void)rs_parse_placement(s, &pl);
  if (rs_parse_placements(s, &sh) == RS_OK) {
    char buf[64];
    rs_format_sharding(&sh, buf, sizeof buf);
    for (int t = 0; t <= RS_MAX_DIMS; ++t) {
      rs_sharding o = sh;
      (void)rs_parse_order(s, &o, t);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  char *field[5] = {NULL, NULL, NULL, NULL, NULL};
  char *p = text;
  for (int i = 0; i < 5 && p; ++i) {
    field[i] = p;
    p = strchr(p, '|');
    if (p) *p++ = 0;
  }
  for (int i = 0; i < 5; ++i)
    if (field[i]) each_parser(field[i]);
  static int32_t ranks[RS_MAX_RANKS];
  int64_t sizes[RS_MAX_MESH_DIMS];
  int nd, nr = 0;
  rs_mesh *m = malloc(sizeof *m);
  rs_tensor t = {0};
  rs_sharding s;
  if (!m || !field[0] || rs_parse_dims(field[0], RS_MAX_MESH_DIMS, sizes, &nd) != RS_OK) goto out;
  if (field[4] && rs_parse_ranks(field[4], ranks, RS_MAX_RANKS, &nr) != RS_OK) goto out;
  if (rs_mesh_init(m, nd, sizes, field[4] ? ranks : NULL) != RS_OK) goto out;
  if (field[4] && nr != m->nranks) goto out;
  t.dtype = RS_F32;
  if (field[1] && rs_parse_dims(field[1], RS_MAX_DIMS, t.shape, &t.ndim) != RS_OK) goto out;
  int64_t nb;
  if (rs_tensor_nbytes(&t, &nb) != RS_OK) goto out;
  if (!field[2] || rs_parse_placements(field[2], &s) != RS_OK || s.mesh_ndim != m->ndim) goto out;
  if (rs_sharding_set_default_order(&s, t.ndim) != RS_OK) goto out;
  if (field[3] && rs_parse_order(field[3], &s, t.ndim) != RS_OK) goto out;
  if (rs_sharding_validate(&s, m, &t) != RS_OK) goto out;
  char b1[64], b2[96], b3[96], b4[128];
  rs_format_sharding(&s, b4, sizeof b4);
  rs_format_order(&s, t.ndim, b4, sizeof b4);
  for (int pos = 0; pos < m->nranks; ++pos) {
    int64_t coord[RS_MAX_MESH_DIMS] = {0}, shp[RS_MAX_DIMS], off[RS_MAX_DIMS];
    rs_mesh_coord(m, pos, coord);
    rs_local_shape_offset(m, &s, &t, coord, shp, off);
    rs__fmt_ints(b1, sizeof b1, coord, m->ndim, "(", ",", ")");
    rs__fmt_ints(b2, sizeof b2, shp, t.ndim, "[", ",", "]");
    rs__fmt_ints(b3, sizeof b3, off, t.ndim, "[", ",", "]");
    for (int d = 0; d < t.ndim; ++d)
      if (shp[d] < 0 || shp[d] > t.shape[d] || off[d] < 0 || off[d] > t.shape[d]) abort();
  }
out:
  free(m);
  free(text);
  return 0;
}
