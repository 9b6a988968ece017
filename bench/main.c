/* main.c - the `bench` binary: runs rs_bench_main and reports a failure on stderr. */
#include <stdio.h>
#include "bench.h"

int main(int argc, char **argv) {
  rs_status st = rs_bench_main(argc, argv);
  if (st) {
    fprintf(stderr, "bench: %s\n", rs_last_error());
    return 1;
  }
  return 0;
}
