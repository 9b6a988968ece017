/* cmd_bench.c - `reshard bench`: the benchmarks of bench/ (traffic ratio against the SPEC 7 lower
 * bound, planning time, local and MPI throughput, planner time against recorded PyTorch). */
#include <string.h>
#include "cli.h"
#include "core/last_status.h"
#ifdef RS_HAVE_BENCH
#include "bench.h"
#endif

static const char *BENCH_HELP =
    "usage: reshard bench [traffic|plan|local|mpi|pytorch|p2p|ckpt|gpu|all] [--cases N] [--max-mib M]\n"
    "                     [--reps R] [--csv DIR] [--fixtures DIR]\n"
    "Prints a table per benchmark and writes bench_<name>.csv into DIR (default .).\n"
    "  traffic  bytes sent / SPEC 7 lower bound of ref-greedy, ref-graph and opt (copy-only corpus)\n"
    "  plan     planning time per case (median ns) of greedy, graph and opt\n"
    "  local    opt on the local transport vs memcpy of the same bytes, 1 MiB .. --max-mib\n"
    "  mpi      opt on the mpi transport vs MPI_Alltoallv (run under mpirun)\n"
    "  pytorch  our planners' time vs PyTorch's on fixtures/pytorch: live when a python with torch is at\n"
    "           hand (--python PATH, RS_PYTHON, else python3), else the recorded times (--recorded forces\n"
    "           them); [--cases N] [--timeout S] [--reps R >= 5]\n"
    "  ckpt     checkpoint save/load throughput vs sequential I/O of the same bytes:\n"
    "           reshard bench ckpt [--bytes 2G] [--ranks 1,2,4] [--reps 5] [--dir DIR] [--threads T] [--direct]\n"
    "                              [--dcp 'PYTHON tools/pytorch/bench_dcp.py'] [--json F]\n"
    "  jobs [--jobs N] [--reps R] [--scale PERCENT] [--python PY] [--src DIR]  cases per wall second of\n"
    "           check, p2p check, tp check, ckpt check, fuzz-planner and conform (Python exec and live\n"
    "           PyTorch backends, with --python) at --jobs 1 against --jobs N (default 2), alternately\n"
    "  p2p [plan|move|all] [--max-ranks N] [--layers L]  cross-config resharding: planning time of a\n"
    "           Megatron template against rank count (64 .. 32768), traffic ratio, max/mean sender load;\n"
    "           move: TP2 PP2 DPn/4 -> TP4 PP1 DPn/4 over MPI vs MPI_Alltoallv (mpirun -np 4, 8, 16)\n"
    "  gpu [--max-mib M]  one GPU: opt on device pointers vs cudaMemcpy D2D (all-to-all, all-gather,\n"
    "           2x2 swap, 64 MiB .. 4 GiB), the fold and MXFP8 kernels vs HBM bandwidth (skipped without a GPU)\n";

int cmd_bench(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (cli_is_help(argv[i])) {
      fputs(BENCH_HELP, stdout);
      return CLI_OK;
    }
#ifdef RS_HAVE_BENCH
  if (argc > 1 && strcmp(argv[1], "ckpt") == 0) return rs_bench_ckpt_main(argc - 1, argv + 1);
  if (rs_bench_main(argc, argv)) {
    /* the benchmarks' own messages start with their name ("bench p2p: --reps: ..."): said once */
    const char *e = rs_last_error();
    if (strncmp(e, "bench", 5) != 0) return cli_status_error("bench", NULL);
    fprintf(stderr, "reshard %s\n", e);
    return rs__last_status() == RS_ERR_NOMEM ? CLI_NOMEM : CLI_USAGE;
  }
  return CLI_OK;
#else
  (void)argv;
  return cli_usage_error("bench", "this build has no opt/bench library");
#endif
}
