#!/usr/bin/env bash
# cli_hostile.sh - hostile input to the reshard CLI is refused with exit 2 and a message naming the
# field (never a crash, a wrap or a silent PASS); out of memory exits 3; `run --json` is one JSON
# document; `replay` re-runs a saved failure with the impl it failed with.
# Usage: cli_hostile.sh path/to/reshard
set -u
R=${1:?usage: cli_hostile.sh path/to/reshard}
. "$(dirname "$0")/cli_lib.sh"
# absolute paths, then work in the scratch dir: benchmarks and campaigns write into the working
# directory (CSV files, checkpoint scratch), which must never be the source tree
R=$(cd "$(dirname "$R")" && pwd)/$(basename "$R")
SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$T" || exit 1
names() { grep -q -- "$1" "$T/err" || fail "error does not name $1: $(head -c 300 "$T/err")"; }

# --- CLI text syntax: overflow and garbage ---
big=999999999999999999
expect_rc 2 "$R" layout --mesh 1 --placements R --shape "0x${big}x${big}x${big}x${big}x${big}x${big}x${big}"
names --shape
expect_rc 2 "$R" layout --mesh 1 --placements R --shape "0x${big}x${big}"
expect_rc 2 "$R" layout --mesh 9223372036854775807x2 --placements R,R --ranks 0,1
names --mesh
expect_rc 2 "$R" layout --mesh 9223372036854775808 --placements R
expect_rc 2 "$R" layout --mesh 4294967296x4294967296x4294967296 --placements R,R,R
for m in "" "4x" "x4" "4x-2" "+4" " 4" "4.0" "4 x2" "0"; do
  expect_rc 2 "$R" layout --mesh "$m" --placements R --shape 4
done
for s in "4x" "-1" "1e3" "0.5" "4,,2" "1x1x1x1x1x1x1x1x1"; do
  expect_rc 2 "$R" layout --mesh 2 --placements R --shape "$s"
  names --shape
done
for p in "S" "S(0" "S(9)" "P(mean)" "R,R" "S0," "Q" "S(0)x"; do
  expect_rc 2 "$R" layout --mesh 2 --placements "$p" --shape 4
done
expect_rc 2 "$R" layout --mesh 2x2 --placements S0,S0 --shape 4 --order "0:0,1;0:1,0"
names --order
for o in "0:" "0:9" "0" "0:1,0;" "0:1,0x"; do
  expect_rc 2 "$R" layout --mesh 2x2 --placements S0,S0 --shape 4 --order "$o"
done
for r in "0,1,1,2" "0,-1" "0,1,2,99999999999" "0,,1" "0,1,2"; do
  expect_rc 2 "$R" layout --mesh 2x2 --placements R,R --ranks "$r"
done
expect_rc 2 "$R" check --seed -1 --cases 1
expect_rc 2 "$R" check --seed 0x --cases 1
expect_rc 2 "$R" check --cases 99999999999999999999
expect_rc 2 "$R" gen --seed " 5" --cases 1
# --seed is decimal digits only, in every verb that takes one (hex used to be read: `gen --seed
# 0x10` made case gen-16-0, exit 0); a refusal names --seed
L=$(dirname "$R")/tests
for s in 0x10 0X10 +16 16.0 1e1; do
  for v in "gen --cases 1" "check --cases 1" "tp check --cases 1" "tp gen --cases 1" "p2p check --cases 1" \
           "ckpt check --cases 1" "ckpt torture" "conform --backend $L/libconform_opt_plugin.so --cases 1" \
           "fuzz-planner --planner $L/libplanner_greedy.so --cases 1"; do
    # shellcheck disable=SC2086
    expect_rc 2 "$R" $v --seed "$s"
    names --seed
  done
done
expect_rc 0 "$R" gen --seed 16 --cases 1
expect_out '"name":"gen-16-0"'

# --- case JSON: exact integers, duplicates, overflowing sizes ---
mk() { # mk FILE MESH SHAPE SRC_EXTRA TAIL
  printf '{"name":"h","mesh":{"shape":%s},"tensor":{"shape":%s,"dtype":"F32"},"src":{"placements":["S(0)"]%s},"dst":{"placements":["R"]}%s}\n' \
    "$2" "$3" "$4" "$5" >"$T/$1"
}
mk ok.json '[2]' '[5]' '' ',"seed":9007199254740993'
expect_rc 0 "$R" run "$T/ok.json"
mk frac.json '[2]' '[5]' ',"shard_order":[{"tensor_dim":0.5,"mesh_dims":[0]}]' ''
expect_rc 2 "$R" run "$T/frac.json"; names tensor_dim
mk dup.json '[2]' '[5]' ',"shard_order":[{"tensor_dim":0,"mesh_dims":[0]},{"tensor_dim":0,"mesh_dims":[0]}]' ''
expect_rc 2 "$R" run "$T/dup.json"; names "src.shard_order\[1\].tensor_dim"
mk mesh.json '[4294967296,4294967296,4294967296]' '[5]' '' ''
expect_rc 2 "$R" run "$T/mesh.json"; names mesh.shape
mk zero.json '[2]' '[0,1000000000000000000,1000000000000000000]' '' ''
expect_rc 2 "$R" run "$T/zero.json"; names shape
mk dims.json '[2]' '[5.0]' '' ''
expect_rc 2 "$R" run "$T/dims.json"; names "tensor.shape\[0\]"
mk seed.json '[2]' '[5]' '' ',"seed":18446744073709551616'
expect_rc 2 "$R" run "$T/seed.json"; names seed

# --- "expected" is read by type, every key ---
mk e1.json '[2]' '[5]' '' ',"seed":7,"expected":{"ranks":"oops","trace":5}'
expect_rc 2 "$R" run "$T/e1.json"; names expected.ranks
mk e2.json '[2]' '[5]' '' ',"seed":7,"expected":{"trace":5}'
expect_rc 2 "$R" run "$T/e2.json"; names expected.trace
mk e3.json '[2]' '[5]' '' ',"seed":7,"expected":{"ranks":[{"rank":9}]}'
expect_rc 2 "$R" run "$T/e3.json"; names "expected.ranks\[0\].rank"
mk e4.json '[2]' '[5]' '' ',"seed":7,"expected":{"collectives":{"all_gather":1.5}}'
expect_rc 2 "$R" run "$T/e4.json"; names expected.collectives.all_gather
mk e5.json '[2]' '[5]' '' ',"seed":7,"expected":{"trac":"S(0)->R"}'
expect_rc 2 "$R" run "$T/e5.json"; names expected.trac
mk e6.json '[2]' '[5]' '' ',"seed":7,"expected":{"ranks":[{"rank":0,"xxh3":"nothex"}]}'
expect_rc 2 "$R" run "$T/e6.json"; names xxh3
mk e7.json '[2]' '[5]' '' ',"seed":7,"expected":{"trace":"S(0)->R","collectives":{"all_gather":1}}'
expect_rc 0 "$R" run "$T/e7.json"

# --- out of memory exits 3 (not 1, which means a check failed) ---
mk big.json '[1]' '[3000000000]' '' ''
sed -i 's/"S(0)"/"R"/' "$T/big.json"
( ulimit -v 1500000 2>/dev/null && "$R" run "$T/big.json" >"$T/out" 2>"$T/err"; echo $? >"$T/rc" )
rc=$(cat "$T/rc")
if grep -q Sanitizer "$T/err"; then
  echo "(out-of-memory exit not checked under a sanitizer)"
else
  [ "$rc" = 3 ] || fail "out of memory: exit $rc, want 3 :: $(head -c 200 "$T/err")"
fi

# --- run --json: one document with the plan, every rank and the verdict ---
mk j.json '[2]' '[5]' '' ',"seed":7'
expect_rc 0 "$R" run "$T/j.json" --json
[ "$(wc -l <"$T/out")" = 1 ] || fail "run --json: not one line"
want='{"case":"h","impl":"ref","dtype":"F32","mesh":[2],"shape":[5],"src":"S(0)","dst":"R","plan":{"planner":"greedy","cost":"seed","enumeration":"seed","trace":"S(0)->R","steps":[{"mesh_dim":0,"from":"S(0)","to":"R","collective":"all_gather"}]},"ranks":[{"rank":0,"coord":[0],"local_shape":[5],"global_offset":[0],"xxh3":"'
case "$(cat "$T/out")" in "$want"*'"oracle_ranks_differ":0,"expected_checked":false,"expected_digests_checked":false,"mismatches":[],"verdict":"pass"}') ;;
  *) fail "run --json: $(head -c 600 "$T/out")" ;; esac
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["verdict"]=="pass" and len(d["ranks"])==2' "$T/out" ||
    fail "run --json is not valid JSON"
fi
mk j2.json '[2]' '[5]' '' ',"seed":7,"expected":{"trace":"S(0)->R->R"}'
expect_rc 1 "$R" run "$T/j2.json" --json
grep -q '"verdict":"fail"' "$T/out" && grep -q '"mismatches":\["expected: trace' "$T/out" || fail "run --json mismatch: $(cat "$T/out")"

# --- replay uses the impl the failure was found with ---
if "$R" run "$T/j.json" --impl opt >/dev/null 2>&1; then
  mk r1.json '[2]' '[5]' '' ',"seed":7,"property":"opt_oracle","message":"x"'
  expect_rc 0 "$R" replay "$T/r1.json"            # no "impl": an opt property replays with opt
  grep -q 'opt_oracle (opt): PASS' "$T/out" || fail "replay opt property: $(cat "$T/out")"
  mk r2.json '[2]' '[5]' '' ',"seed":7,"property":"greedy_oracle","message":"x","impl":"opt","transport":"local"'
  expect_rc 0 "$R" replay "$T/r2.json"
  grep -q 'greedy_oracle (opt): PASS' "$T/out" || fail "replay impl opt: $(cat "$T/out")"
  expect_rc 0 "$R" replay "$T/r2.json" --impl ref  # a flag overrides the file
  grep -q 'greedy_oracle (ref): PASS' "$T/out" || fail "replay --impl ref: $(cat "$T/out")"
  expect_rc 2 "$R" replay "$T/r1.json" --impl ref  # an opt property cannot run under ref: no silent SKIP
  mk r3.json '[2]' '[5]' '' ',"seed":7,"property":"greedy_oracle","impl":"gpu"'
  expect_rc 2 "$R" replay "$T/r3.json"; names impl
fi

# --- replay: planner, cost and enumeration come from the case, flags override them ---
mk r4.json '[2]' '[4]' '' ',"seed":7,"property":"graph_oracle","message":"x","impl":"ref"'
expect_rc 0 "$R" replay "$T/r4.json" --planner graph --cost pytorch --enumeration pytorch
expect_rc 2 "$R" replay "$T/r4.json" --planner sideways; names --planner
expect_rc 2 "$R" replay "$T/r4.json" --enumeration newest; names --enumeration
printf '{"mesh":{"shape":[2]},"tensor":{"shape":[4],"dtype":"F32"},"src":{"placements":["S(0)"]},"dst":{"placements":["P(sum)"]},"enumeration":"pytorch","seed":7,"property":"graph_oracle","message":"x","impl":"ref"}\n' >"$T/r5.json"
expect_rc 2 "$R" replay "$T/r5.json" --enumeration seed; names "Shard -> Partial"

# --- every numeric flag of every verb: the one checked parser (core/numflag.h), never atoi/strtod ---
# "verb words|--flag|extra args": each value below exits 2 naming the flag, at once (no run starts)
B=$(dirname "$R")
numeric_flags=(
  "check|--cases|" "check|--max-failures|--cases 1" "check|--max-ranks|--cases 1" "check|--max-numel|--cases 1"
  "gen|--cases|" "tp check|--cases|" "tp check|--max-ranks|--cases 1" "tp gen|--min-tp|--cases 1"
  "p2p check|--cases|" "p2p check|--max-ranks|--cases 1" "ckpt check|--cases|" "ckpt check|--shrink-runs|--cases 1"
  "ckpt torture|--kills|" "ckpt save|--step|x.json --root $T/r" "ckpt save|--block|x.json --root $T/r --step 1"
  "ckpt load|--threads|x.json --root $T/r" "ckpt load|--segment|x.json --root $T/r"
  "bench traffic|--cases|" "bench local|--max-mib|" "bench plan|--reps|" "bench p2p plan|--max-ranks|"
  "bench p2p plan|--reps|" "bench p2p plan|--layers|" "bench pytorch|--reps|" "bench ckpt|--bytes|"
  "bench ckpt|--ranks|" "bench ckpt|--reps|" "bench ckpt|--threads|")
for row in "${numeric_flags[@]}"; do
  IFS='|' read -r verb flag extra <<<"$row"
  for val in 18446744073709551617 1e3 nan inf -1; do
    # shellcheck disable=SC2086
    expect_rc 2 timeout 20 "$R" $verb $flag "$val" $extra; names "$flag"
  done
done
# atoi read these as 1 (4294967297 = 2^32 + 1) or 64 (4294967360): beyond each flag's range
for row in "traffic|--cases" "local|--max-mib" "p2p plan|--max-ranks" "ckpt|--ranks" "pytorch|--reps"; do
  IFS='|' read -r verb flag <<<"$row"
  # shellcheck disable=SC2086
  expect_rc 2 timeout 20 "$R" bench $verb $flag 4294967297; names "$flag"
done
expect_rc 2 timeout 20 "$R" bench p2p plan --max-ranks 4294967360; names --max-ranks
expect_rc 2 "$R" bench ckpt --ranks 1,,2; names --ranks
expect_rc 2 "$R" bench ckpt --ranks 1,2,3,4,5,6,7,8,9; names --ranks
# --seconds: nan passed "seconds <= 0" and inf never ended; both refused, and so is more than a week
for verb in check "ckpt check" "p2p check"; do
  for val in inf nan 1e3 -1 0 604801; do
    # shellcheck disable=SC2086
    expect_rc 2 timeout 20 "$R" $verb --seconds "$val"; names --seconds
  done
done

verbatim() { [ "$(cat "$T/err")" = "$1" ] || fail "message: '$(cat "$T/err")', want '$1'"; }
# --- one message per failure, naming the field once (no "shapeshape", no "--flag: --flag:") ---
expect_rc 2 "$R" layout --mesh 1 --placements R --shape 2305843009213693952 --dtype F64
[ "$(cat "$T/err")" = "reshard layout: --shape: byte count overflows int64" ] || fail "--shape message: $(cat "$T/err")"
expect_rc 2 "$R" bench traffic --cases 1e3
[ "$(cat "$T/err")" = "reshard bench: --cases: '1e3', expected an integer 1..10000000" ] || fail "bench message: $(cat "$T/err")"
printf '{"world":1,"tensors":[{"key":"w","dtype":"F64","shape":[2305843009213693952],"mesh":[1],"placements":"R"}]}\n' >"$T/spec.json"
expect_rc 2 "$R" ckpt save "$T/spec.json" --root "$T/r" --step 1; expect_err "tensors\[0\].shape: byte count overflows int64"
grep -q "shapeshape\|shape: tensor.shape" "$T/err" && fail "doubled field: $(cat "$T/err")"
# ckpt import of a bad header: the whole message after the path (it was formatted into its own
# buffer, and printed only the path)
st_file() { # st_file PATH HEADER_JSON: a safetensors file with 16 data bytes
  local n=${#2}
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x\\x00\\x00\\x00\\x00' $((n & 255)) $((n >> 8 & 255)) $((n >> 16 & 255)) $((n >> 24)))" >"$1"
  printf '%s' "$2" >>"$1"
  head -c 16 /dev/zero >>"$1"
}
mkdir -p "$T/imp"
st_file "$T/imp/model-00001-of-00001.safetensors" '{"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}}'
expect_rc 2 "$R" ckpt import "$T/imp" --root "$T/impout" --step 1
verbatim "reshard ckpt import: $T/imp/model-00001-of-00001.safetensors: safetensors: tensor 'w': byte count overflows int64"
st_file "$T/imp/model-00001-of-00001.safetensors" '{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,1600]}}'
expect_rc 2 "$R" ckpt import "$T/imp" --root "$T/impout" --step 1
verbatim "reshard ckpt import: $T/imp/model-00001-of-00001.safetensors: safetensors: tensor 'w': data_offsets [0, 1600) hold 1600 bytes, shape needs 16"
# the library's own name for a field is replaced by the user's flag, never printed after it
expect_rc 2 "$R" layout --mesh 2 --placements R --shape 4x; verbatim "reshard layout: --shape: '4x': expected sizes like 4x2 (each 0..2^63-1)"
expect_rc 2 "$R" layout --mesh 4x --placements R; verbatim "reshard layout: --mesh: '4x': expected sizes like 4x2 (each 0..2^63-1)"
expect_rc 2 "$R" layout --mesh 2 --placements R --ranks 0,0; verbatim "reshard layout: --ranks[1]: rank 0 appears twice"
expect_rc 2 "$R" layout --mesh 2 --placements Q --shape 4; verbatim "reshard layout: --placements: 'Q': expected R, S<d>, S(<d>), P or P(<op>)"
expect_rc 2 "$R" layout --mesh 2x2 --placements S0,S0 --shape 4 --order 0:9; verbatim "reshard layout: --order: '0:9': bad mesh dim"
expect_rc 2 "$R" ckpt load x.json --root "$T" --strict bogus; expect_err "reshard ckpt load: --strict: 'bogus'"
expect_rc 2 "$R" run "$T/none.json"; verbatim "reshard run: $T/none.json: cannot open (No such file or directory)"
expect_rc 2 "$R" replay "$T/none.json"; verbatim "reshard replay: $T/none.json: cannot open (No such file or directory)"
# every reader refuses a link and anything but a regular file (a FIFO used to block for ever)
mk link_target.json '[2]' '[5]' '' ''
ln -s "$T/link_target.json" "$T/link.json"
expect_rc 2 "$R" run "$T/link.json"; verbatim "reshard run: $T/link.json: a symbolic link (give the file itself)"
mkfifo "$T/fifo.json"
expect_rc 2 timeout 20 "$R" run "$T/fifo.json"; verbatim "reshard run: $T/fifo.json: not a regular file"
expect_rc 2 timeout 20 "$R" replay "$T/fifo.json"; expect_err "not a regular file"
expect_rc 2 timeout 20 "$R" p2p run "$T/fifo.json"; expect_err "not a regular file"
expect_rc 2 "$R" run "$T"; expect_err "not a regular file"

# --- copy-service plug-ins: checked before dlopen, refused before any case runs (exit 2, nothing saved) ---
P2P=$SRC/fixtures/p2p/dense_tp4pp2dp2_to_tp8pp1dp2.json
plugin=$B/tests/libp2p_copy_plugin.so
if [ -f "$plugin" ] && "$R" p2p run "$P2P" --copy-service "$plugin" --quiet >/dev/null 2>&1; then
  size=$(stat -c %s "$plugin")
  for cut in 16 100 1000 $((size / 2)) $((size - 64)); do
    head -c "$cut" "$plugin" >"$T/cut.so"   # a copy that stopped: dlopen of it died of SIGBUS
    expect_rc 2 "$R" p2p run "$P2P" --copy-service "$T/cut.so"
    case "$(cat "$T/err")" in "reshard p2p: --copy-service: '$T/cut.so': "*) ;; *) fail "cut plug-in: $(cat "$T/err")" ;; esac
  done
  ln -s "$plugin" "$T/link.so"
  expect_rc 2 "$R" p2p run "$P2P" --copy-service "$T/link.so"; expect_err "symbolic link"
  mkfifo "$T/fifo.so"
  expect_rc 2 timeout 20 "$R" p2p run "$P2P" --copy-service "$T/fifo.so"; expect_err "not a regular file"
  for lib in /nonexistent/lib.so "$T/cut.so" "$B/tests/libp2p_plugin_wrong_abi.so"; do
    rm -rf "$T/reg"
    expect_rc 2 timeout 20 "$R" p2p check --cases 50 --copy-service "$lib" --regress-dir "$T/reg"
    [ "$(grep -o -- '--copy-service' "$T/err" | wc -l)" = 1 ] || fail "names --copy-service once: $(cat "$T/err")"
    [ -e "$T/reg" ] && fail "p2p check --copy-service $lib saved regression files"
  done
  expect_rc 2 "$R" p2p run "$P2P" --copy-service "$B/tests/libp2p_plugin_wrong_abi.so"
  [ "$(cat "$T/err")" = "reshard p2p: --copy-service: '$B/tests/libp2p_plugin_wrong_abi.so': speaks copy-service ABI 99, reshard speaks 1" ] ||
    fail "wrong ABI message: $(cat "$T/err")"
fi
rm -rf "$T/reg"
expect_rc 2 timeout 20 "$R" ckpt check --cases 5 --scratch "$T/no/such/dir" --regress-dir "$T/reg"; names --scratch
[ -e "$T/reg" ] && fail "ckpt check --scratch of a missing directory saved regression files"
# ckpt torture clears its root: a --root of the user's that holds anything is refused (exit 2) and
# kept; a new one is used and kept, and then refused as not empty
mkdir -p "$T/tr" && echo precious >"$T/tr/notes.txt"
expect_rc 2 timeout 60 "$R" ckpt torture --kills 2 --root "$T/tr"; names --root
[ "$(cat "$T/tr/notes.txt" 2>/dev/null)" = precious ] || fail "ckpt torture --root removed the user's files"
expect_rc 0 timeout 120 "$R" ckpt torture --kills 2 --root "$T/tr_new"
expect_rc 2 timeout 60 "$R" ckpt torture --kills 2 --root "$T/tr_new"; names --root
rm -rf "$T/tr" "$T/tr_new" "$T/tr_new.measure"
# --scratch is the user's directory: a campaign works in a directory of its own under it and
# leaves every other entry alone (it used to empty --scratch itself before each case)
for impl in ref opt; do
  mkdir -p "$T/keep" && echo precious >"$T/keep/notes.txt" && mkdir -p "$T/keep/sub" && touch "$T/keep/sub/f"
  expect_rc 0 timeout 120 "$R" ckpt check --impl $impl --cases 5 --quiet --scratch "$T/keep" --regress-dir "$T/reg"
  [ "$(cat "$T/keep/notes.txt" 2>/dev/null)" = precious ] && [ -e "$T/keep/sub/f" ] ||
    fail "ckpt check --impl $impl --scratch removed the user's files: $(ls -R "$T/keep" | head -5)"
  [ -z "$(ls -d "$T/keep"/reshard-* 2>/dev/null)" ] || fail "ckpt check --impl $impl left its directory in --scratch"
  rm -rf "$T/keep"
done

# --- out of memory is exit 3 everywhere: never a failed check, never shrunk, never saved ---
# expect_oom KB CMD...: CMD under a virtual-memory limit must exit 3 (a sanitizer's runtime cannot
# start under one: then nothing is checked)
expect_oom() {
  local kb=$1; shift
  ( ulimit -v "$kb" 2>/dev/null; timeout 30 "$@" >"$T/out" 2>"$T/err"; echo $? >"$T/rc" )
  grep -q Sanitizer "$T/err" && return 1
  [ "$(cat "$T/rc")" = 3 ] || fail "out of memory: exit $(cat "$T/rc") (want 3): $* :: $(head -c 300 "$T/err")"
}
rm -rf "$T/reg"
# seed 7 reaches out of memory at its 8th case (0.4 s; seed 1 took 12 s in a release build, over a minute in the coverage build)
if expect_oom 400000 "$R" check --seed 7 --cases 300 --max-numel 67108864 --max-dim 65536 --max-work 268435456 --regress-dir "$T/reg" --quiet; then
  [ -e "$T/reg" ] && fail "a campaign saved an out-of-memory case as a regression: $(ls "$T/reg")"
  grep -q "no verdict" "$T/err" || fail "campaign out of memory: $(head -c 300 "$T/err")"
  printf '{"seed":1,"model":{"params":[{"name":"w","shape":[1073741824],"dtype":"F32"}]},"src":{"meshes":[{"shape":[2],"ranks":[0,1]}],"params":{"w":{"mesh":0,"placements":["S(0)"]}}},"dst":{"meshes":[{"shape":[2],"ranks":[0,1]}],"params":{"w":{"mesh":0,"placements":["R"]}}}}\n' >"$T/big_p2p.json"
  expect_oom 1000000 "$R" p2p run "$T/big_p2p.json" --impl ref
  expect_oom 1000000 "$R" p2p run "$T/big_p2p.json" --impl opt
  printf '{"name":"big","mesh":{"shape":[2]},"tp_dim":0,"batch":4000,"seq":4000,"seed":7,"vmax":1,"block":{"kind":"tp","vocab":11,"hidden":4,"ffn":4,"bias":false}}\n' >"$T/big_tp.json"
  expect_oom 1000000 "$R" tp run "$T/big_tp.json"
  mk bigr.json '[1]' '[3000000000]' '' ',"seed":7,"property":"greedy_oracle","message":"x","impl":"ref"'
  sed -i 's/"S(0)"/"R"/' "$T/bigr.json"
  expect_oom 1500000 "$R" replay "$T/bigr.json"
  expect_oom 400000 "$R" bench ckpt --bytes 4G --ranks 1 --reps 1 --dir "$T/bc"
  expect_oom 400000 "$R" bench local --max-mib 2048 --reps 1 --csv "$T"   # was a use-after-free in opt
fi

# --- per-rank planning stays linear in the whole: 65,536 source ranks, one 4-element parameter ---
{
  printf '{"seed":1,"model":{"params":[{"name":"w","shape":[4],"dtype":"F32"}]},"src":{"meshes":[{"shape":[65536],"ranks":['
  seq -s, 0 65535 | tr -d '\n'
  printf ']}],"params":{"w":{"mesh":0,"placements":["S(0)"]}}},"dst":{"meshes":[{"shape":[2],"ranks":[0,1]}],"params":{"w":{"mesh":0,"placements":["S(0)"]}}}}\n'
} >"$T/wide.json"
expect_rc 0 timeout 30 "$R" p2p run "$T/wide.json"   # minutes before: every rank re-planned the whole

if [ "$fails" -ne 0 ]; then
  echo "$fails check(s) failed" >&2
  exit 1
fi
echo ok
