#!/usr/bin/env bash
# ckpt_import.sh RESHARD SRC - `reshard ckpt import` takes only what the writer recorded, on
# hand-built HF-writer directories (tests/ckpt_import_gen.py: Python's standard library only).
# Each silent case of issue 23 is an input here: (a) an older save next to a newer one (with an
# index: the unindexed file is refused by name, and --ignore-unindexed imports the newer values
# exactly; without one: two numberings refused); (b) a stray shard-00099 with the same key and
# offsets but another shape (refused naming both files and the chunk); (c) the last shard missing
# (refused: no recorded shape without --shapes/--hull, the uncovered region with --shapes); (d) a
# replica with equal bytes (accepted) and with one other byte (refused). Then the index's own
# damage, the numbering of whole-tensor saves, the usage errors, and `ckpt load --root STEPDIR`. Planted bugs 971 (the index
# ignored) and 972 (replicas by file order) make it fail (tools/MUTANTS.md).
set -euo pipefail
R=$1 S=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 "$S/tests/ckpt_import_gen.py" "$T/in"
n=0
# run WANT_RC PATTERN... -- CMD: exit status WANT_RC and every PATTERN (fixed strings) on stderr
run() {
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
I=$T/in
imp() { "$R" ckpt import "$@"; }
# the good save: sharded files record no global shape, so --shapes or --hull is required
run 2 "recorded no global shape" "--shapes" "--hull" -- imp "$I/good" --root "$T/g0" --step 0
run 0 -- imp "$I/good" --root "$T/g1" --step 0 --shapes "$I/shapes.json"
run 0 -- imp "$I/good" --root "$T/g2" --step 0 --hull
"$R" ckpt verify "$T/g1" >/dev/null
"$R" ckpt export "$T/g1" "$T/g1.safetensors" >/dev/null
"$R" ckpt export "$T/g2" "$T/g2.safetensors" >/dev/null
cmp "$T/g1.safetensors" "$T/g2.safetensors"
# (a) stale files
run 2 "$I/stale_index/model-00001-of-00001.safetensors: not named by model.safetensors.index.json" -- \
  imp "$I/stale_index" --root "$T/a0" --step 0
run 0 "skipped $I/stale_index/model-00001-of-00001.safetensors" -- \
  imp "$I/stale_index" --root "$T/a1" --step 0 --ignore-unindexed
"$R" ckpt export "$T/a1" "$T/a1.safetensors" >/dev/null
python3 - "$T/a1.safetensors" "$I/expect_new.bin" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
got = b"".join(b[8 + n + h[k]["data_offsets"][0]:8 + n + h[k]["data_offsets"][1]] for k in ("w", "b"))
assert h["w"]["shape"] == [6, 4] and h["b"]["shape"] == [5], h
assert got == open(sys.argv[2], "rb").read(), "the import with --ignore-unindexed is not the newer save's values"
PY
run 2 "shard-00001-model-00001-of-00001.safetensors (of 00001)" "shard-00001-model-00001-of-00002.safetensors (of 00002)" -- \
  imp "$I/stale_shards" --root "$T/a2" --step 0 --hull
run 2 "--ignore-unindexed" "has no model.safetensors.index.json" -- \
  imp "$I/stale_shards" --root "$T/a3" --step 0 --hull --ignore-unindexed
# (b) a stray shard with the same key and offsets, another shape
run 2 "key 'w' chunk at offsets [0, 0]" "shard-00001-model-00001-of-00001.safetensors holds shape [2, 4] F32" \
  "shard-00099-model-00001-of-00001.safetensors holds shape [3, 4]" -- imp "$I/stray" --root "$T/b0" --step 0 --hull
# (c) the last shard missing: never a smaller tensor
run 2 "key 'b'" "recorded no global shape" -- imp "$I/missing" --root "$T/c0" --step 0
run 2 "key 'w': gap: region [4:6, 0:4] not covered" -- imp "$I/missing" --root "$T/c1" --step 0 --shapes "$I/shapes.json"
# (d) replicas
run 0 -- imp "$I/replica_equal" --root "$T/d0" --step 0 --hull
"$R" ckpt export "$T/d0" "$T/d0.safetensors" >/dev/null
cmp "$T/d0.safetensors" "$T/g1.safetensors"
run 2 "key 'w' chunk at offsets [0, 0]" "shard-00004-model-00001-of-00001.safetensors holds other bytes (the first at byte 30 of the chunk)" -- \
  imp "$I/replica_differs" --root "$T/d1" --step 0 --hull
# the index itself
run 2 "metadata.total_size is 7, the files it names hold 116 bytes" -- imp "$I/index_total" --root "$T/x0" --step 0
run 2 "names model-00002-of-00002.safetensors, which is not in" -- imp "$I/index_missing" --root "$T/x1" --step 0
run 2 "model-00001-of-00002.safetensors: key 'w', which model.safetensors.index.json maps to model-00002-of-00002.safetensors" -- \
  imp "$I/index_wrong" --root "$T/x2" --step 0
# numbering without an index
run 2 "model-00002-of-00002.safetensors is missing" -- imp "$I/whole_missing" --root "$T/y0" --step 0
run 2 "$I/odd_name/extra.safetensors: not a name PyTorch's HF writer gives" -- imp "$I/odd_name" --root "$T/y1" --step 0 --hull
run 0 -- imp "$I/lone" --root "$T/y2" --step 0
# --shapes that disagree with the files, usage errors
echo '{"w": [6, 4]}' >"$T/s1.json"
run 2 "key 'b' (in shard-00001-model-00001-of-00001.safetensors) is not in --shapes" -- imp "$I/good" --root "$T/z0" --step 0 --shapes "$T/s1.json"
echo '{"w": [6, 4], "b": [5], "c": [1]}' >"$T/s2.json"
run 2 "key 'c' (in --shapes $T/s2.json) has no chunk" -- imp "$I/good" --root "$T/z1" --step 0 --shapes "$T/s2.json"
echo '{"w": [6], "b": [5]}' >"$T/s3.json"
run 2 "1 dims, the chunks in" -- imp "$I/good" --root "$T/z2" --step 0 --shapes "$T/s3.json"
run 2 "exclude each other" -- imp "$I/good" --root "$T/z3" --step 0 --shapes "$I/shapes.json" --hull
run 2 "--shapes" -- imp "$I/good" --root "$T/z4" --step 0 --shapes "$T/nothing.json"
# `ckpt load --root STEPDIR` (docs/ckpt.md: DIR is a root or a step directory): a step directory
# named step_<N> means --root its parent --step N, for ref and opt; another --step, or a step
# directory of another name, is refused
F=$S/fixtures/ckpt
"$R" ckpt save "$F/megatron_tp2_dp2.json" --root "$T/L" --step 7 >/dev/null
run 0 -- "$R" ckpt load "$F/megatron_tp4.json" --root "$T/L/step_7"
run 0 -- "$R" ckpt load "$F/megatron_tp4.json" --root "$T/L/step_7/" --step 7 --impl opt
run 0 -- "$R" ckpt load "$F/megatron_tp4.json" --root "$T/L/step_7" --impl opt --read-once
run 2 "'$T/L/step_7' is step 7, --step says 3" -- "$R" ckpt load "$F/megatron_tp4.json" --root "$T/L/step_7" --step 3
cp -r "$T/L/step_7" "$T/L/mystep"
run 2 "'$T/L/mystep' is a step directory not named step_<N>" -- "$R" ckpt load "$F/megatron_tp4.json" --root "$T/L/mystep"
echo "ckpt_import: $n import and load cases gave the expected exit status and message"
