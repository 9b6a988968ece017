#!/usr/bin/env bash
# ckpt_opt.sh RESHARD SRC - opt's checkpoints through the CLI: an opt save of a Megatron-like state
# spec loads in ref and in opt (direct and read-once) on another layout; PyTorch's safetensors DCP
# checkpoint (fixtures/ckpt-dcp/hf, written by HuggingFaceStorageWriter on 3 gloo ranks) imports
# (--hull: shard files record no global shape) and loads equal to the oracle; a flipped byte in it
# still imports (safetensors has no checksum) and the load's oracle comparison sees it; the
# benchmark's smoke size.
set -euo pipefail
R=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fx=$src/fixtures/ckpt
"$R" ckpt save "$fx/megatron_tp2_dp2.json" --root "$tmp/o" --step 5 --impl opt --threads 3 --segment 4096 --block 256
"$R" ckpt verify "$tmp/o"
"$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/o" >/dev/null
"$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/o" --impl opt >/dev/null
"$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/o" --impl opt --read-once >/dev/null
"$R" ckpt save "$fx/megatron_tp4.json" --root "$tmp/r" --step 1
"$R" ckpt load "$fx/megatron_tp2_dp2.json" --root "$tmp/r" --impl opt --read-once >/dev/null
# PyTorch DCP (safetensors) -> reshard
"$R" ckpt import "$src/fixtures/ckpt-dcp/hf" --root "$tmp/hf" --step 0 --hull   # shard files record no global shape
"$R" ckpt verify "$tmp/hf" >/dev/null
"$R" ckpt load "$src/fixtures/ckpt-dcp/hf_load_spec.json" --root "$tmp/hf"
"$R" ckpt load "$src/fixtures/ckpt-dcp/hf_load_spec.json" --root "$tmp/hf" --impl opt --read-once >/dev/null
cp -r "$src/fixtures/ckpt-dcp/hf" "$tmp/hfbad"
f=$(ls "$tmp/hfbad"/*.safetensors | head -1)
sz=$(stat -c %s "$f")
printf '\x7f' | dd of="$f" bs=1 seek=$((sz - 1)) conv=notrunc status=none
"$R" ckpt import "$tmp/hfbad" --root "$tmp/hfb" --step 0 --hull >/dev/null
if "$R" ckpt load "$src/fixtures/ckpt-dcp/hf_load_spec.json" --root "$tmp/hfb" >/dev/null 2>&1; then
  echo "a changed byte of PyTorch's checkpoint still loaded equal to the oracle" >&2
  exit 1
fi
# usage errors exit 2, a missing checkpoint exits 1
expect() {
  local want=$1; shift
  set +e; "$@" >/dev/null 2>&1; local rc=$?; set -e
  if [ "$rc" -ne "$want" ]; then echo "expected exit $want, got $rc: $*" >&2; exit 1; fi
}
spec=$fx/megatron_tp4.json
expect 2 "$R" ckpt save "$spec" --root "$tmp/x" --step 1 --impl fast
expect 2 "$R" ckpt save "$spec" --root "$tmp/x" --step 1 --impl opt --threads 0
expect 2 "$R" ckpt save "$spec" --root "$tmp/x" --step 1 --impl opt --segment 1000
expect 2 "$R" ckpt save "$spec" --root "$tmp/x" --step 1 --impl opt --transport carrier-pigeon
# local-device: refused by name without a GPU; the device path on simulated device memory
if ! (command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1); then
  expect 2 "$R" ckpt save "$spec" --root "$tmp/x" --step 1 --impl opt --transport local-device
  { "$R" ckpt save "$spec" --root "$tmp/x" --step 1 --impl opt --transport local-device 2>&1 || true; } |
    grep -q "needs a CUDA device"
fi
export RS_SIM_DEVICE=1
"$R" ckpt save "$fx/megatron_tp2_dp2.json" --root "$tmp/d" --step 2 --impl opt --transport local-device --segment 4096 \
  --block 256 2>/dev/null | grep -q "local-device (simulated)"
"$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/d" --impl opt --transport local-device 2>/dev/null >/dev/null
"$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/d" --impl opt --transport local-device --read-once 2>/dev/null >/dev/null
"$R" ckpt check --impl opt --transport local-device --cases 300 --quiet 2>/dev/null | grep -q "fail 0"
unset RS_SIM_DEVICE
"$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/d" >/dev/null
expect 2 "$R" ckpt save "$spec" --root "$tmp/x" --impl opt
expect 2 "$R" ckpt save "$spec" --root "$tmp/x" --step 1 --impl ref --transport mpi
expect 2 "$R" ckpt load "$spec" --impl opt
expect 2 "$R" ckpt load "$spec" --root "$tmp/o" --impl opt --strict sometimes
expect 2 "$R" ckpt load "$spec" --root "$tmp/nothing" --impl opt   # no checkpoint there: bad input, as for ref
expect 2 "$R" ckpt check --impl opt --cases 0
expect 2 "$R" ckpt check --impl opt --cases 3 --seconds 1
expect 2 "$R" ckpt import "$tmp/nothing" --root "$tmp/y" --step 0
expect 0 "$R" ckpt check --impl both --seconds 0.3 --shrink-runs 10 --junit "$tmp/j.xml" --json "$tmp/j.json"
"$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/o" --impl opt --strict return_all --threads 1 --segment 4096 >/dev/null
# where mktemp's file system takes O_DIRECT, the aligned variant reaches the unstaged O_DIRECT save
# (counted from the saves' stats: 6 of the first 300 cases of seed 1 on ext4)
feat=$("$R" ckpt check --impl opt --cases 300 --scratch "$tmp/odirect" | grep '^features')
nd=$(grep -oE 'odirect_save [0-9]+' <<<"$feat" | grep -oE '[0-9]+$')
nu=$(grep -oE 'odirect_save_unstaged\* [0-9]+' <<<"$feat" | grep -oE '[0-9]+$')
if [ "${nd:-0}" -gt 0 ] && [ "${nu:-0}" -eq 0 ]; then
  echo "ckpt check: O_DIRECT saves, none unstaged: $feat" >&2
  exit 1
fi
[ -n "$nd" ] && [ -n "$nu" ] || { echo "ckpt check: no feature counts: $feat" >&2; exit 1; }
# saved shrunk failures of the ckpt_opt property replay as passes
for f in "$src"/fixtures/ckpt-opt/regressions/*.json; do "$R" ckpt replay "$f" >/dev/null; done
# the benchmark at a smoke size, buffered and O_DIRECT (in place where the file system takes it;
# mktemp's directory is on disk in CI): every load's bytes are checked against the saved digest
"$R" bench ckpt --bytes 4M --ranks 1,2 --dir "$tmp/bench" --threads 2
out=$("$R" bench ckpt --bytes 8M --ranks 1,2 --reps 1 --direct --dir "$tmp/benchd")
[ "$(grep -c ' equal$' <<<"$out")" -eq 2 ] || { echo "bench ckpt --direct: $out" >&2; exit 1; }
# a --dcp command that does not run is the user's bad input: exit 2 naming --dcp
set +e
err=$("$R" bench ckpt --bytes 1M --ranks 1 --reps 1 --dir "$tmp/benchx" --dcp "$tmp/no-such-python" 2>&1 >/dev/null)
rc=$?
set -e
[ $rc -eq 2 ] && grep -q -- "--dcp" <<<"$err" || { echo "bench ckpt --dcp missing: exit $rc: $err" >&2; exit 1; }
# a --dcp command that hangs is killed after --dcp-timeout: exit 2 naming it, never a hang
printf '#!/bin/sh\nsleep 300\n' >"$tmp/hang.sh" && chmod +x "$tmp/hang.sh"
set +e
t0=$(date +%s)
err=$(timeout 120 "$R" bench ckpt --bytes 1M --ranks 1 --reps 1 --dir "$tmp/benchh" --dcp "$tmp/hang.sh" --dcp-timeout 2 2>&1 >/dev/null)
rc=$?
set -e
[ $rc -eq 2 ] && grep -q -- "--dcp-timeout" <<<"$err" && [ $(( $(date +%s) - t0 )) -lt 60 ] ||
  { echo "bench ckpt --dcp that hangs: exit $rc after $(( $(date +%s) - t0 )) s: $err" >&2; exit 1; }
"$R" ckpt save "$fx/megatron_tp2_dp2.json" --root "$tmp/dio" --step 1 --impl opt --direct >/dev/null
"$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/dio" --impl opt --direct >/dev/null
"$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/dio" --impl opt --direct --read-once >/dev/null
echo "ckpt_opt: ok"
