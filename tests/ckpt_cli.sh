#!/usr/bin/env bash
# ckpt_cli.sh - the stable forms of `reshard ckpt`: save, load (against the oracle, every strict
# mode), verify, inspect [--json], export, check, replay, torture, and their exit codes (0 pass,
# 1 a difference or an integrity failure, 2 bad input, 3 out of memory).
# Usage: ckpt_cli.sh path/to/reshard path/to/source-tree
set -u
R=${1:?usage: ckpt_cli.sh path/to/reshard SRC}
S=${2:?usage: ckpt_cli.sh path/to/reshard SRC}
F=$S/fixtures/ckpt
. "$(dirname "$0")/cli_lib.sh"

A=$F/megatron_tp2_dp2.json
B=$F/megatron_tp4.json
# save on TP2xDP2, load on TP4 (other layout, no flattening, another object grid is not asked)
expect_rc 0 "$R" ckpt save "$A" --root "$T/root" --step 10
expect_out "latest = 10"
[ "$(cat "$T/root/latest")" = "10" ] || fail "latest does not name step 10"
[ -f "$T/root/step_10/metadata.json" ] || fail "no step_10/metadata.json"
expect_rc 0 "$R" ckpt load "$B" --root "$T/root"
expect_out "every rank equals the oracle"
# a committed step is never written over (a crash would tear the checkpoint latest names)
expect_rc 2 "$R" ckpt save "$B" --root "$T/root" --step 10
expect_err "already holds a checkpoint"
expect_rc 0 "$R" ckpt load "$A" --root "$T/root" --step 10 --strict raise_all
expect_rc 0 "$R" ckpt verify "$T/root"
expect_out "every digest matches"
expect_rc 0 "$R" ckpt verify "$T/root/step_10"
expect_rc 0 "$R" ckpt inspect "$T/root"
expect_out "embedding.word_embeddings.weight"
expect_rc 0 "$R" ckpt inspect "$T/root" --json
head -c 40 "$T/out" | grep -q '^{"dir":' || fail "inspect --json: $(head -c 100 "$T/out")"
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["step"]==10 and len(d["tensors"])==6' "$T/out" ||
    fail "inspect --json is not the expected JSON"
fi
expect_rc 0 "$R" ckpt export "$T/root" "$T/a.safetensors"

# the same tensors saved on 4 TP ranks export to the same bytes
expect_rc 0 "$R" ckpt save "$B" --root "$T/root4" --step 3
expect_rc 0 "$R" ckpt export "$T/root4" "$T/b.safetensors"
cmp -s "$T/a.safetensors" "$T/b.safetensors" || fail "exports of two layouts differ"

# export writes OUT whole or not at all and never through a link or into the checkpoint it reads
echo precious >"$T/kept" && ln -s "$T/kept" "$T/link.safetensors"
expect_rc 0 "$R" ckpt export "$T/root" "$T/link.safetensors"
[ "$(cat "$T/kept")" = precious ] || fail "export wrote through a symbolic link at OUT"
cmp -s "$T/a.safetensors" "$T/link.safetensors" || fail "export over a link: not the export's bytes"
[ -L "$T/link.safetensors" ] && fail "export left the link at OUT"
expect_rc 0 "$R" ckpt export "$T/root" "$T/a.safetensors"   # over an earlier export: replaced whole
cmp -s "$T/a.safetensors" "$T/b.safetensors" || fail "export over an earlier OUT differs"
for victim in "$T/root/step_10/rank_0.safetensors" "$T/root/step_10/metadata.json" "$T/root/latest"; do
  expect_rc 2 "$R" ckpt export "$T/root" "$victim"
done
expect_rc 0 "$R" ckpt verify "$T/root"
ls "$T"/*.tmp-* >/dev/null 2>&1 && fail "export left a temporary file"

# strict modes: a load spec with an extra key and without others
sed -e 's/"key":"step"/"key":"step_renamed"/' "$B" >"$T/b2.json"
expect_rc 1 "$R" ckpt load "$T/b2.json" --root "$T/root"
expect_err "step_renamed"
expect_rc 1 "$R" ckpt load "$T/b2.json" --root "$T/root" --strict raise_unexpected
expect_rc 0 "$R" ckpt load "$T/b2.json" --root "$T/root" --strict return_all
expect_out "unexpected keys (1): step_renamed"
expect_out "missing keys (1): step"
expect_rc 0 "$R" ckpt load "$T/b2.json" --root "$T/root" --strict ignore_all
expect_rc 1 "$R" ckpt load "$T/b2.json" --root "$T/root" --strict raise_all
expect_rc 0 "$R" ckpt load "$T/b2.json" --root "$T/root" --strict log_all
expect_err "step_renamed"
# the spec claims other values (seed): a difference, exit 1, naming rank and key
sed -e 's/"seed":4,/"seed":44,/' "$B" >"$T/b3.json"
expect_rc 1 "$R" ckpt load "$T/b3.json" --root "$T/root"
expect_err "decoder.layers.0.mlp.linear_fc1.weight"

# a flipped data byte: verify, load and export fail with exit 1 naming the file
cp -r "$T/root" "$T/bad"
f=$T/bad/step_10/rank_1.safetensors
printf '\xff' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 3)) conv=notrunc status=none
expect_rc 1 "$R" ckpt verify "$T/bad"
expect_err "rank_1.safetensors"
expect_rc 1 "$R" ckpt load "$A" --root "$T/bad"
expect_err "digest mismatch"
expect_rc 1 "$R" ckpt export "$T/bad" "$T/bad.safetensors"
# a flipped metadata.json byte
cp -r "$T/root" "$T/badm"
printf 'x' | dd of="$T/badm/step_10/metadata.json" bs=1 seek=200 conv=notrunc status=none
expect_rc 1 "$R" ckpt verify "$T/badm"
expect_err "metadata.json"
expect_rc 1 "$R" ckpt load "$A" --root "$T/badm"

# bad input: exit 2
expect_rc 2 "$R" ckpt
expect_rc 2 "$R" ckpt frobnicate
expect_rc 2 "$R" ckpt save "$A" --root "$T/x"
expect_rc 2 "$R" ckpt save "$A" --root "$T/x" --step -1
expect_rc 2 "$R" ckpt save "$T/nonexistent.json" --root "$T/x" --step 1
expect_rc 2 "$R" ckpt save "$A" --root "$T/x" --step 1 --impl fast
expect_err "--impl"
expect_rc 2 "$R" ckpt load "$A" --root "$T/empty"
expect_rc 2 "$R" ckpt load "$A" --root "$T/root" --step 99
expect_rc 2 "$R" ckpt load "$A" --root "$T/root" --strict sometimes
expect_err "strict"
expect_rc 2 "$R" ckpt verify "$T/nonexistent"
expect_rc 2 "$R" ckpt inspect "$T/root" --yaml
expect_rc 2 "$R" ckpt export "$T/root"
expect_rc 2 "$R" ckpt check --cases 0
echo '{"world":2,"tensors":[{"key":"w","dtype":"F32","shape":[4],"seed":1,"mesh":[3],"placements":"S0"}]}' >"$T/bad.json"
expect_rc 2 "$R" ckpt save "$T/bad.json" --root "$T/x" --step 1
expect_err "mesh"
# out of memory exits 3 (an 8 GiB tensor under a 1 GB address-space limit; sanitizer builds,
# which reserve terabytes of shadow memory, cannot run under the limit and skip this)
echo '{"world":1,"tensors":[{"key":"big","dtype":"F64","shape":[1048576,1024],"seed":1,"mesh":[1],"placements":"R"}]}' >"$T/big.json"
(ulimit -v 1000000; "$R" ckpt save "$T/big.json" --root "$T/big" --step 1) >"$T/out" 2>"$T/err"; rc=$?
if ! grep -q Sanitizer "$T/err"; then
  [ "$rc" = 3 ] || fail "out of memory: exit $rc (want 3): $(head -c 300 "$T/err")"
  expect_err "out of memory"
fi
for c in save load verify inspect export check replay torture; do expect_rc 0 "$R" ckpt $c --help; done

# check, torture and replay of a committed regression fixture
expect_rc 0 "$R" ckpt check --cases 40 --seed 5 --quiet --regress-dir "$T/reg" --junit "$T/j.xml" --json "$T/j.json"
expect_out "0 properties failed"
grep -q '<testsuite name="reshard.ckpt" tests="6" failures="0"' "$T/j.xml" || fail "junit: $(head -c 300 "$T/j.xml")"
grep -q '"ckpt_load"' "$T/j.json" || fail "json report: $(head -c 300 "$T/j.json")"
expect_rc 0 "$R" ckpt torture --kills 6 --seed 2 --root "$T/tort"
expect_out "torn = 0"
for fx in "$F"/regressions/*.json; do
  [ -f "$fx" ] || continue
  expect_rc 0 "$R" ckpt replay "$fx"
done

if [ $fails -ne 0 ]; then echo "ckpt_cli: $fails failure(s)"; exit 1; fi
echo "ckpt_cli: all forms ok"
