#!/usr/bin/env bash
# torch_env.sh [VENV] - make (or reuse) the Python environment that the live-PyTorch and live
# Megatron-Core stages run in, and print its python's path on the last line of stdout.
#   VENV defaults to build/torch-venv. Pinned: torch 2.15.0 (PyPI's default build; it runs on CPU),
#   megatron-core 0.16.1 (installed --no-deps, as its own docs say for CPU use: packaging and einops
#   are its only imports needed here), numpy, xxhash, safetensors.
# Exit 77 (with a message on stderr) when the packages cannot be installed: the caller skips the
# stages that need them and says so; any other failure is exit 1.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$top/build/torch-venv}
TORCH_VERSION=${RS_TORCH_VERSION:-2.15.0}
MCORE_VERSION=${RS_MCORE_VERSION:-0.16.1}
py="$venv/bin/python"
have() {
  "$py" - "$TORCH_VERSION" "$MCORE_VERSION" <<'PY' 2>/dev/null
import sys, importlib.metadata as md
import torch, numpy, xxhash, safetensors, psutil  # noqa: F401  (psutil: dist_checkpointing's torch_dist writer)
ok = torch.__version__.split("+")[0] == sys.argv[1] and md.version("megatron-core") == sys.argv[2]
import megatron.core.resharding, megatron.core.dist_checkpointing  # noqa: F401
sys.exit(0 if ok else 1)
PY
}
if [ -x "$py" ] && have; then echo "$py"; exit 0; fi
[ -x "$py" ] || python3 -m venv "$venv" >&2 || { echo "torch_env: python3 -m venv $venv failed" >&2; exit 1; }
log="$venv.install.log"
if ! { "$py" -m pip install -q "torch==$TORCH_VERSION" numpy xxhash safetensors packaging einops psutil &&
       "$py" -m pip install -q --no-deps "megatron-core==$MCORE_VERSION"; } >"$log" 2>&1; then
  tail -n 5 "$log" >&2
  echo "torch_env: torch $TORCH_VERSION / megatron-core $MCORE_VERSION could not be installed (log: $log)" >&2
  exit 77
fi
have || { echo "torch_env: installed, but torch/megatron-core do not import in $py" >&2; exit 1; }
echo "$py"
