#!/usr/bin/env bash
# ci/gpu.sh - build with CUDA (one fatbin: SASS for sm_80 and sm_90, PTX of sm_90) and prove opt's
# device paths on a GPU, writing a report (BUILD/gpu-report.txt: every step with its verdict):
#   1. the value-generator kernel vs core/values.c (test_device_values gpu);
#   2. the kernels + local transport on device memory vs the CPU path and the oracle, bit for bit,
#      with host locals and through the device-memory API (sources generated on the GPU) (test_opt_gpu);
#   3. opt checkpoints with tensor data in device memory (ckpt check, local-device; bench ckpt);
#   4. the MXFP8 and TP Linear kernels vs the CPU oracle;
#   5. NCCL with one rank sending to itself (ncclSend/ncclRecv in one group), and a P2P campaign over it;
#   6. an attempt at two NCCL ranks on one GPU (reported, not required: NCCL may refuse);
#   7. `reshard bench gpu` (ratios to cudaMemcpy D2D; kernels against HBM bandwidth) -> BUILD/bench_gpu.csv.
# Without a GPU every GPU step is skipped with a message, and the CPU halves run (the value math,
# the same test binaries on the host paths, the checkpoint device path on simulated device memory).
# Usage: ci/gpu.sh [build-dir] [cases]   (defaults: build-gpu, 10000)
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
CASES=${2:-10000}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mkdir -p "$BUILD"
REPORT=$BUILD/gpu-report.txt
exec > >(tee "$REPORT") 2>&1
echo "gpu.sh: $(date -u +%FT%TZ) on $(hostname); report: $REPORT"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRS_WITH_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=80-real;90" \
  || exit 1
cmake --build "$BUILD" -j"$JOBS" --target test_opt_gpu test_opt_random test_tp_gpu test_p2p_mxfp8 test_device_values \
  reshard || exit 1
grep -q "CMAKE_CUDA_COMPILER:FILEPATH=.*nvcc" "$BUILD/CMakeCache.txt" \
  && echo "gpu.sh: built with nvcc (sm_80 + sm_90 + PTX)" || echo "gpu.sh: nvcc not found: CPU-only build"

T=$BUILD/tests/test_opt_gpu
R=$BUILD/reshard
fail=0
summary=()
# step NAME CMD...: run, record the verdict for the summary
step() {
  local name=$1; shift
  echo "== $name"
  local t0=$SECONDS
  if "$@"; then summary+=("pass  $name ($((SECONDS - t0)) s)"); else summary+=("FAIL  $name"); fail=1; fi
}
skip() { echo "== $1: skipped ($2)"; summary+=("skip  $1: $2"); }

have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  have_gpu=1
  nvidia-smi -L
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi

if [ "$have_gpu" = 0 ]; then
  echo "gpu.sh: no GPU on this machine: the GPU steps are skipped; their CPU halves run"
  step "1. value generator math vs core/values.c (CPU half)" "$BUILD/tests/test_device_values" . 3000 gpu
  step "2. test_opt_gpu on the host paths" "$T" . "$CASES" local-device
  step "2b. opt random (host)" "$BUILD/tests/test_opt_random" .
  step "3. checkpoints on simulated device memory (RS_SIM_DEVICE=1)" \
    env RS_SIM_DEVICE=1 "$R" ckpt check --impl opt --transport local-device --cases 1000 --quiet
  skip "4. MXFP8 and TP kernels" "no GPU"
  skip "5. NCCL one rank" "no GPU"
  skip "6. NCCL two ranks" "no GPU"
  step "7. bench gpu (prints its skip message)" "$R" bench gpu
else
  step "1. value generator kernel vs core/values.c" "$BUILD/tests/test_device_values" . 3000 gpu
  step "2. kernels + local transport on device memory vs CPU and oracle, $CASES cases" "$T" . "$CASES" local-device
  step "3. checkpoints on device memory: opt beside ref and the oracle" \
    "$R" ckpt check --impl both --transport local-device --cases 3000 --quiet
  step "3b. bench ckpt on device memory" "$R" bench ckpt --bytes 1G --ranks 1,2,4 --dir "$BUILD/bench-ckpt" \
    --transport local-device
  step "4. MXFP8 kernel vs the CPU oracle" "$BUILD/tests/test_p2p_mxfp8" .
  step "4b. TP Linear kernel vs the CPU oracle" "$BUILD/tests/test_tp_gpu" .
  step "5. NCCL, one rank (ncclSend/ncclRecv to itself inside one group)" "$T" . 2000 nccl
  step "5b. P2P campaign over NCCL (one process; pooled device staging, the world communicator)" \
    timeout 600 mpirun --oversubscribe --allow-run-as-root -np 1 "$R" p2p check --impl opt --transport nccl \
    --cases 300 --timeout 60 --quiet
  echo "== 6. NCCL, two ranks on one GPU (attempt)"
  cat > "$BUILD/nccl_rank.sh" <<'EOS'
#!/usr/bin/env bash
# one NCCL "host" per rank so that NCCL treats the ranks as separate nodes
export NCCL_HOSTID="reshard-rank-${OMPI_COMM_WORLD_RANK:-0}"
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1
exec "$@"
EOS
  chmod +x "$BUILD/nccl_rank.sh"
  if timeout 300 mpirun --oversubscribe --allow-run-as-root -np 2 "$BUILD/nccl_rank.sh" "$T" . 500 nccl; then
    summary+=("pass  6. two NCCL ranks on one GPU")
  else
    summary+=("info  6. two NCCL ranks on one GPU did not run (NCCL may refuse two ranks per GPU; not required)")
  fi
  step "7. bench gpu" "$R" bench gpu --csv "$BUILD"
fi

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
echo "gpu.sh: $([ $fail = 0 ] && echo passed || echo FAILED)$([ $have_gpu = 0 ] && echo ' (no GPU: CPU halves only)')"
exit $fail
