#!/usr/bin/env bash
# ckpt_interop.sh - checkpoints read by the `safetensors` Python package (tests/ckpt_interop.py):
# saves fixtures/ckpt/interop_numpy.json on 4 ranks, exports it, and checks both with safe_open
# and safetensors.numpy.load_file. PYTHON must have numpy and safetensors (ci/test.sh makes a venv
# under the build directory and pip-installs them from PyPI).
# Usage: ckpt_interop.sh path/to/reshard SRC PYTHON
set -euo pipefail
R=$1 S=$2 PY=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$R" ckpt save "$S/fixtures/ckpt/interop_numpy.json" --root "$T/root" --step 5 --block 256 >/dev/null
"$R" ckpt load "$S/fixtures/ckpt/interop_numpy.json" --root "$T/root" --strict raise_all >/dev/null
"$R" ckpt export "$T/root" "$T/export.safetensors" >/dev/null
"$PY" "$S/tests/ckpt_interop.py" "$T/root/step_5" "$T/export.safetensors"
