#!/usr/bin/env bash
# p2p_mcore_ranks.sh RESHARD - tests/p2p_mcore_ranks.py (reshard's template expansion against
# Megatron-Core's RankGenerator) with the python in RS_MCORE_PYTHON (default python3; CI sets it to
# the venv of ci/torch_env.sh). Exit 77 (skipped) where that python is missing or megatron-core does
# not import in it.
py=${RS_MCORE_PYTHON:-python3}
command -v "$py" >/dev/null 2>&1 || { echo "SKIP: no python '$py' (set RS_MCORE_PYTHON)"; exit 77; }
exec nice "$py" "$(dirname "$0")/p2p_mcore_ranks.py" "$1"
