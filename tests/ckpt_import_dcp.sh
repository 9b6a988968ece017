#!/usr/bin/env bash
# ckpt_import_dcp.sh RESHARD SRC - tests/ckpt_import.sh's silent cases of issue 23 on files that
# real PyTorch DCP wrote (tests/ckpt_import_dcp.py: HuggingFaceStorageWriter on 3 and 2 gloo ranks
# and in one process). Needs torch in RS_TORCH_PYTHON (default python3; ci/torch_env.sh prints a
# venv python that has it); exit 77 (ctest: skipped) when torch does not import there.
set -euo pipefail
R=$1 S=$2
PY=${RS_TORCH_PYTHON:-python3}
if ! "$PY" -c "from torch.distributed.checkpoint import HuggingFaceStorageWriter" 2>/dev/null; then
  echo "skip: torch with HuggingFaceStorageWriter does not import in $PY (set RS_TORCH_PYTHON)"
  exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
D=$T/dcp
"$PY" "$S/tests/ckpt_import_dcp.py" "$D"
n=0
run() { # run WANT_RC PATTERN... -- CMD
  local want=$1; shift
  local pats=()
  while [ "$1" != "--" ]; do pats+=("$1"); shift; done
  shift
  set +e; "$@" >"$T/out" 2>"$T/err"; local rc=$?; set -e
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: expected exit $want, got $rc: $*" >&2; cat "$T/err" >&2; exit 1
  fi
  for p in "${pats[@]}"; do
    grep -qF -- "$p" "$T/err" || { echo "FAIL: '$p' not in the message of: $*" >&2; cat "$T/err" >&2; exit 1; }
  done
  n=$((n + 1))
}
# export's w and b bytes must equal new.bin (torch's own values at base 0)
same_as_torch() {
  "$R" ckpt export "$1" "$T/e.safetensors" >/dev/null
  "$PY" - "$T/e.safetensors" "$D/new.bin" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
got = b"".join(b[8 + n + h[k]["data_offsets"][0]:8 + n + h[k]["data_offsets"][1]] for k in ("w", "b"))
assert h["w"]["shape"] == [6, 4] and h["b"]["shape"] == [5], h
assert got == open(sys.argv[2], "rb").read(), "imported values differ from what torch saved"
PY
}
imp() { "$R" ckpt import "$@"; }
SH=$D/shapes.json
run 2 "recorded no global shape" -- imp "$D/good" --root "$T/g0" --step 0
run 0 -- imp "$D/good" --root "$T/g1" --step 0 --shapes "$SH"
same_as_torch "$T/g1"
# (a) a re-save into the same path, distributed (no index) and without save_distributed (index)
run 2 "(of 00001) and" "(of 00002) come from two saves" -- imp "$D/stale_shards" --root "$T/a0" --step 0 --shapes "$SH"
run 2 "$D/stale_index/model-00001-of-00001.safetensors: not named by model.safetensors.index.json" -- \
  imp "$D/stale_index" --root "$T/a1" --step 0
run 0 -- imp "$D/stale_index" --root "$T/a2" --step 0 --ignore-unindexed
same_as_torch "$T/a2"
# (b) a stray shard of another layout (w over 2 ranks: [3, 4] at [0, 0])
cp -r "$D/good" "$T/stray"
cp "$D/other/shard-00001-model-00001-of-00001.safetensors" "$T/stray/shard-00099-model-00001-of-00001.safetensors"
run 2 "key 'w' chunk at offsets [0, 0]" "shard-00001-model-00001-of-00001.safetensors holds shape [2, 4] F32" \
  "shard-00099-model-00001-of-00001.safetensors holds shape [3, 4], not [2, 4]" -- imp "$T/stray" --root "$T/b0" --step 0 --shapes "$SH"
# (c) the last rank's file missing
cp -r "$D/good" "$T/missing"
rm "$T/missing/shard-00003-model-00001-of-00001.safetensors"
run 2 "key 'w': gap: region [4:6, 0:4] not covered" -- imp "$T/missing" --root "$T/c0" --step 0 --shapes "$SH"
run 2 "recorded no global shape" -- imp "$T/missing" --root "$T/c1" --step 0
# (d) a copy of rank 0's file as rank 4's: equal bytes are a replica; one other byte is refused
cp -r "$D/good" "$T/rep"
cp "$T/rep/shard-00001-model-00001-of-00001.safetensors" "$T/rep/shard-00004-model-00001-of-00001.safetensors"
run 0 -- imp "$T/rep" --root "$T/d0" --step 0 --shapes "$SH"
same_as_torch "$T/d0"
f=$T/rep/shard-00004-model-00001-of-00001.safetensors
printf '\x55' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") - 1 )) conv=notrunc status=none
run 2 "key 'w' chunk at offsets [0, 0]" "shard-00004-model-00001-of-00001.safetensors holds other bytes" -- \
  imp "$T/rep" --root "$T/d1" --step 0 --shapes "$SH"
echo "ckpt_import_dcp: $n imports of PyTorch DCP output gave the expected exit status and message; imported values equal torch's"
