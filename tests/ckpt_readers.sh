#!/usr/bin/env bash
# ckpt_readers.sh RESHARD SRC - the rules every checkpoint reader and writer of both implementations
# shares, through the CLI:
#  - a data file, metadata.json or `latest` that is a symbolic link (to an identical copy outside
#    the root) or a FIFO is refused with exit 2 naming the file, never followed and never waited on,
#    by verify, inspect, export, import, ref load and opt load (direct, read-once, O_DIRECT);
#  - a save over a step that holds a checkpoint is refused (exit 2) by ref and by opt;
#  - a malformed `latest` is exit 2 from both loads, verify and export;
#  - `prepend` over a size-0 axis keeps its key (fixtures/ckpt/prepend_empty_axis*.json);
#  - a tensor key equal to an object's unique key is refused (exit 2) by both saves;
#  - ref load is linear: 5,000 one-element chunks read each digest block once;
#  - `ckpt load --json` digests agree between ref and opt.
set -uo pipefail
R=$1
src=$2
fx=$src/fixtures/ckpt
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
bad=0
fail() { echo "FAIL: $*" >&2; bad=1; [ "${RS_TEST_FAIL_FAST:-0}" != 1 ] || exit 1; }
# run EXPECTED_RC WANT_IN_STDERR CMD...: under `timeout` (a reader that blocks is a failure)
run() {
  local want=$1 msg=$2; shift 2
  timeout 20 "$@" >"$T/out" 2>"$T/err"; local rc=$?
  [ "$rc" = 124 ] && { fail "hung: $*"; return; }
  [ "$rc" = "$want" ] || fail "exit $rc (want $want): $* :: $(head -c 300 "$T/err")"
  [ -z "$msg" ] || grep -q -- "$msg" "$T/err" || fail "stderr lacks '$msg': $* :: $(head -c 300 "$T/err")"
}
A=$fx/megatron_tp2_dp2.json
B=$fx/megatron_tp4.json
run 0 "" "$R" ckpt save "$A" --root "$T/r" --step 1 --impl opt
# the rule for each file kind, for each reader
readers() { # FILE-NAME-IN-MESSAGE
  local n=$1
  run 2 "$n" "$R" ckpt verify "$T/r"
  run 2 "$n" "$R" ckpt export "$T/r" "$T/e.safetensors"
  run 2 "$n" "$R" ckpt load "$B" --root "$T/r"
  run 2 "$n" "$R" ckpt load "$B" --root "$T/r" --impl opt
  run 2 "$n" "$R" ckpt load "$B" --root "$T/r" --impl opt --read-once
  run 2 "$n" "$R" ckpt load "$B" --root "$T/r" --impl opt --direct
}
for f in rank_0.safetensors metadata.json; do
  p=$T/r/step_1/$f
  cp "$p" "$T/keep"
  cp "$p" "$T/outside"; rm "$p"; ln -s "$T/outside" "$p"
  readers "$f: a symbolic link"
  [ "$f" = metadata.json ] && run 2 "$f: a symbolic link" "$R" ckpt inspect "$T/r"
  rm "$p"; mkfifo "$p"
  readers "$f: a FIFO"
  [ "$f" = metadata.json ] && run 2 "$f: a FIFO" "$R" ckpt inspect "$T/r"
  rm "$p"; cp "$T/keep" "$p"
done
run 0 "" "$R" ckpt verify "$T/r"
# latest
cp "$T/r/latest" "$T/keep"
for k in link fifo malformed; do
  rm -f "$T/r/latest"
  case $k in
    link) cp "$T/keep" "$T/outside_latest"; ln -s "$T/outside_latest" "$T/r/latest"; m="latest: a symbolic link" ;;
    fifo) mkfifo "$T/r/latest"; m="latest: a FIFO" ;;
    malformed) printf 'x1\n' >"$T/r/latest"; m="latest: malformed" ;;
  esac
  run 2 "$m" "$R" ckpt verify "$T/r"
  run 2 "$m" "$R" ckpt inspect "$T/r"
  run 2 "$m" "$R" ckpt export "$T/r" "$T/e.safetensors"
  run 2 "$m" "$R" ckpt load "$B" --root "$T/r"
  run 2 "$m" "$R" ckpt load "$B" --root "$T/r" --impl opt
done
rm -f "$T/r/latest"; cp "$T/keep" "$T/r/latest"
# import: a .safetensors that is a link or a FIFO
mkdir -p "$T/hf"; cp "$src"/fixtures/ckpt-dcp/hf/*.safetensors "$T/hf/"
first=$(ls "$T/hf" | head -n 1)
mv "$T/hf/$first" "$T/hf_out.safetensors"; ln -s "$T/hf_out.safetensors" "$T/hf/$first"
run 2 "$first: a symbolic link" "$R" ckpt import "$T/hf" --root "$T/imp" --step 0
rm "$T/hf/$first"; mkfifo "$T/hf/$first"
run 2 "$first: a FIFO" "$R" ckpt import "$T/hf" --root "$T/imp2" --step 0
# a save over a committed step: refused by both, the checkpoint intact
run 2 "already holds a checkpoint" "$R" ckpt save "$A" --root "$T/r" --step 1 --impl opt
run 2 "already holds a checkpoint" "$R" ckpt save "$A" --root "$T/r" --step 1
run 0 "" "$R" ckpt load "$A" --root "$T/r" --strict raise_all
# prepend over a size-0 axis: the key stays, loads in another layout under raise_all, exports alike
run 0 "" "$R" ckpt save "$fx/prepend_empty_axis.json" --root "$T/pe" --step 1
run 0 "" "$R" ckpt save "$fx/prepend_empty_axis_load.json" --root "$T/pe2" --step 1 --impl opt
for impl in ref opt; do
  run 0 "" "$R" ckpt load "$fx/prepend_empty_axis_load.json" --root "$T/pe" --strict raise_all --impl $impl
  run 0 "" "$R" ckpt load "$fx/prepend_empty_axis.json" --root "$T/pe2" --strict raise_all --impl $impl
done
run 0 "" "$R" ckpt export "$T/pe" "$T/pe.safetensors"
run 0 "" "$R" ckpt export "$T/pe2" "$T/pe2.safetensors"
cmp -s "$T/pe.safetensors" "$T/pe2.safetensors" || fail "prepend over an empty axis: exports differ"
# a tensor key equal to an object's unique key
run 2 "share one namespace" "$R" ckpt save "$fx/key_equals_object_key.json" --root "$T/k" --step 1
run 2 "share one namespace" "$R" ckpt save "$fx/key_equals_object_key.json" --root "$T/k" --step 1 --impl opt
# a key with a NUL in the state spec (the JSON reader would cut it): refused
printf '{"world":1,"tensors":[{"key":"w\\u0000x","dtype":"F32","shape":[2],"seed":1,"mesh":[1],"placements":"R"}]}' >"$T/nul.json"
run 2 "NUL" "$R" ckpt save "$T/nul.json" --root "$T/n" --step 1
run 2 "NUL" "$R" ckpt save "$T/nul.json" --root "$T/n" --step 1 --impl opt
# ref load reads each digest block once: 5,000 one-element chunks
echo '{"world":1,"tensors":[{"key":"w","dtype":"F32","shape":[5000,1],"seed":1,"mesh":[1],"placements":"R","prepend":1}]}' >"$T/many.json"
run 0 "" "$R" ckpt save "$T/many.json" --root "$T/many" --step 1
run 0 "" "$R" ckpt load "$T/many.json" --root "$T/many"
size=$(stat -c %s "$T/many/step_1/rank_0.safetensors")
grep -q "($size bytes read)" "$T/out" || fail "ref load of 5,000 chunks: $(cat "$T/out") (want $size bytes read)"
# ckpt load --json: per rank and entry the xxh3 of what was loaded; ref's and opt's agree
run 0 "" "$R" ckpt load "$B" --root "$T/r" --json "$T/ref.json"
run 0 "" "$R" ckpt load "$B" --root "$T/r" --impl opt --read-once --json "$T/opt.json"
grep -q '"xxh3": "[0-9a-f]\{16\}"' "$T/ref.json" || fail "ckpt load --json: no digests in $(head -c 200 "$T/ref.json")"
sed 's/"impl": "[a-z]*"//' "$T/ref.json" >"$T/ref.n"
sed 's/"impl": "[a-z]*"//' "$T/opt.json" >"$T/opt.n"
cmp -s "$T/ref.n" "$T/opt.n" || fail "ckpt load --json: ref's and opt's digests differ"
[ $bad = 0 ] && echo "ckpt_readers: ok"
exit $bad
