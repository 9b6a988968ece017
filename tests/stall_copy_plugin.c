/* stall_copy_plugin.c - a copy-service plug-in (reshard/copy_service.h) whose run() never returns:
 * a peer that stalls forever, for the transport timeout test (tests/peer_timeout.sh). Submits are
 * accepted and dropped; run() sleeps until the process exits. */
#include <unistd.h>
#include "reshard/copy_service.h"

static int sub(void *self, int32_t me, const void *buf, int64_t bytes, int32_t peer, int64_t task) {
  (void)self; (void)me; (void)buf; (void)bytes; (void)peer; (void)task;
  return 0;
}
static int sub_recv(void *self, int32_t me, void *buf, int64_t bytes, int32_t peer, int64_t task) {
  return sub(self, me, buf, bytes, peer, task);
}
static int run(void *self) {
  (void)self;
  for (;;) pause();
  return 0;
}
static const char *err(void *self) { (void)self; return ""; }
static void destroy(void *self) { (void)self; }

static const rs_copy_service_vtable vt = {RS_COPY_SERVICE_ABI_VERSION, "stall", sub, sub_recv, run, err, destroy};
static int token;

int rs_copy_service_abi_version(void) { return RS_COPY_SERVICE_ABI_VERSION; }
int rs_copy_service_create(int32_t world_rank, int32_t world_size, const rs_copy_service_vtable **out, void **self) {
  (void)world_rank; (void)world_size;
  *out = &vt;
  *self = &token;
  return 0;
}
