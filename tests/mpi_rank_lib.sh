# mpi_rank_lib.sh - sourced by the tests that stop or kill one rank of an mpirun job
# (tests/peer_timeout.sh, tests/jobs_distribute.sh).
# mpi_rank_wrapper PATH: writes the executable rank wrapper PATH, run by mpirun as
# `PATH DIR CMD...`: each rank runs CMD in the background (stdout dropped, stderr in DIR/err.RANK),
# writes its pid to DIR/pid.RANK (the process a test signals) and, when CMD ends, its exit code and
# the time to DIR/end.RANK.
mpi_rank_wrapper() {
  cat >"$1" <<'EOS'
#!/usr/bin/env bash
d=$1; shift
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
"$@" 2>"$d/err.$r" >/dev/null &
echo $! >"$d/pid.$r"
wait $!
echo "$? $(date +%s.%N)" >"$d/end.$r"
EOS
  chmod +x "$1"
}
