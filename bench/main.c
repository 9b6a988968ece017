/* main.c - the `bench` binary: runs rs_bench_main and reports a failure on stderr. */
#include <stdio.h>
#include <string.h>
#include "bench.h"

int main(int argc, char **argv) {
  rs_status st = rs_bench_main(argc, argv);
  if (st) {
    const char *e = rs_last_error(); /* the benchmarks' messages start with "bench ..." */
    fprintf(stderr, "%s%s\n", strncmp(e, "bench", 5) ? "bench: " : "", e);
    return 1;
  }
  return 0;
}
