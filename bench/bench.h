/* bench.h - opt's benchmarks as a library entry point (the `bench` binary and `reshard bench`). */
#ifndef RS_BENCH_H
#define RS_BENCH_H
#include "reshard/status.h"

/* argv[1..]: [traffic|plan|local|mpi|all] [--cases N] [--max-mib M] [--reps R] [--csv DIR].
 * Prints tables to stdout and writes bench_<name>.csv into DIR. `mpi` runs under mpirun. */
rs_status rs_bench_main(int argc, char **argv);
/* argv[1..]: pytorch [--fixtures DIR] [--csv DIR] [--reps R]: planner time against the times
 * recorded from PyTorch in the .jsonl.gz files of DIR (bench_pytorch.c). */
rs_status rs_bench_pytorch(int argc, char **argv);

/* argv[1..]: p2p [plan|move|all] [--max-ranks N] [--reps R] [--layers L] [--csv DIR]: cross-config
 * resharding planning time against rank count, and one move against MPI_Alltoallv (bench_p2p.c). */
rs_status rs_bench_p2p(int argc, char **argv);

#endif
