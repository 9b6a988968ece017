/* conform_serve_child.c - the opt plug-in (conform_opt_plugin.c) as a separate program speaking the
 * process protocol on stdin/stdout: `reshard conform --backend exec:'conform_serve_child OPTIONS'`.
 * OPTIONS are the plug-in's (e.g. bug=last_rank), plus abi=v1: serve it as a plug-in built against
 * the header before p2p_flags (a struct_size that stops there), a child whose hello declares no
 * "p2p_any_plan" and that is always sent "plan": null. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "conform/conform.h"

int main(int argc, char **argv) {
  const char *options = argc > 1 ? argv[1] : "";
  rs_backend b = *rs_backend_entry();
  if (strstr(options, "abi=v1")) b.struct_size = offsetof(rs_backend, p2p_flags);
  return rs_conform_serve(&b, options, stdin, stdout);
}
