/* p2p_plugin_wrong_abi.c - a copy-service plug-in that speaks another ABI version: loading it must be
 * refused before anything runs (exit 2, no campaign, no regression files; tests/cli_hostile.sh). */
#include "reshard/copy_service.h"

int rs_copy_service_abi_version(void) { return RS_COPY_SERVICE_ABI_VERSION + 98; }
int rs_copy_service_create(int32_t world_rank, int32_t world_size, const rs_copy_service_vtable **vt, void **self) {
  (void)world_rank;
  (void)world_size;
  *vt = 0;
  *self = 0;
  return 1;
}
