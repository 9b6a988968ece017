/* bench.h - opt's benchmarks as a library entry point (the `bench` binary and `reshard bench`). */
#ifndef RS_BENCH_H
#define RS_BENCH_H
#include <stdint.h>
#include "reshard/status.h"

/* argv[1..]: [traffic|plan|local|mpi|all] [--cases N] [--max-mib M] [--reps R] [--csv DIR].
 * Prints tables to stdout and writes bench_<name>.csv into DIR. `mpi` runs under mpirun. */
rs_status rs_bench_main(int argc, char **argv);
/* argv[1..]: pytorch [--fixtures DIR] [--csv DIR] [--reps R] [--cases N] [--python PATH | --recorded]
 * [--timeout S]: planner time against PyTorch's on the cases of the .jsonl.gz files of DIR, PyTorch
 * run live (tools/pytorch/planner.py) or its recorded times (bench_pytorch.c). */
rs_status rs_bench_pytorch(int argc, char **argv);

/* argv[1..]: ckpt [--bytes 2G] [--ranks 1,2,4] [--dir DIR] [--threads T] [--direct] [--json F]:
 * opt's checkpoint save/load throughput as ratios to sequential I/O of the same bytes
 * (bench_ckpt.c). Returns an exit code (0, 1 failure, 2 usage). */
int rs_bench_ckpt_main(int argc, char **argv);
/* argv[1..]: p2p [plan|move|all] [--max-ranks N] [--reps R] [--layers L] [--csv DIR]: cross-config
 * resharding planning time against rank count, and one move against MPI_Alltoallv (bench_p2p.c). */
rs_status rs_bench_p2p(int argc, char **argv);

/* argv[1..]: gpu [--max-mib M] [--reps R] [--csv DIR]: opt's device path against cudaMemcpy D2D and
 * the reduction / MXFP8 kernels against HBM bandwidth (bench_gpu.c); without a GPU, a skip message. */
rs_status rs_bench_gpu(int argc, char **argv);

/* argv[1..]: jobs [--jobs N] [--reps R] [--scale PERCENT] [--python PY] [--src DIR]: cases per wall
 * second of each campaign verb with --jobs 1 against --jobs N, run alternately by this executable
 * (bench_jobs.c). */
rs_status rs_bench_jobs(int argc, char **argv);

/* The throughput cases of bench local (bench.c): layout k (0 all-to-all S0->S1 on 4 ranks, 1
 * all-gather S0->R on 4, 2 the 2x2 swap S0,S1->S1,S0) of an F32 tensor of `bytes`, named *name. */
struct rs_case;
rs_status rs_bench_throughput_case(int k, int64_t bytes, struct rs_case *c, const char **name);

/* The benchmarks' numeric flags (bench_flags.c), through core/numflag.h's checked parser. When
 * argv[*i] is `name`: takes its value (advancing *i) into *out if it is an integer in [lo, hi], else
 * *st is a usage error naming `who` and the flag; returns 1. Returns 0 for another argument. */
int rs_bench_int_flag(const char *who, int argc, char **argv, int *i, const char *name, long long lo,
                      long long hi, int *out, rs_status *st);
/* "a,b,c" of integers in [lo, hi], at most max of them, into out[0..*n). */
rs_status rs_bench_int_list(const char *who, const char *name, const char *v, long long lo, long long hi,
                            int *out, int max, int *n);

/* Median, min and max of v[0..n) into out[0..2] (v is sorted in place). */
void rs_bench_mmm(double *v, int n, double out[3]);

#endif
