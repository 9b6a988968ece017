/* conform_serve_child.c - the opt plug-in (conform_opt_plugin.c) as a separate program speaking the
 * process protocol on stdin/stdout: `reshard conform --backend exec:'conform_serve_child OPTIONS'`.
 * OPTIONS are the plug-in's (e.g. bug=last_rank). */
#include <stdio.h>
#include "conform/conform.h"

int main(int argc, char **argv) {
  return rs_conform_serve(rs_backend_entry(), argc > 1 ? argv[1] : "", stdin, stdout);
}
