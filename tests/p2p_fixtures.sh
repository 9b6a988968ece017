#!/usr/bin/env bash
# p2p_fixtures.sh RESHARD FIXTURE_DIR PLUGIN - the hand-made cross-config models pass with ref, opt and
# the example copy-service plug-in; plan/layout JSON keep their stable keys; bad models exit 2 with a
# message naming the field; every saved shrunk failure (regressions/) passes again.
set -u
bin=$1; dir=$2; plugin=$3
fail=0
err() { echo "FAIL: $*"; fail=1; [ "${RS_TEST_FAIL_FAST:-0}" != 1 ] || exit 1; }
for f in "$dir"/*.json "$dir"/regressions/*.json; do
  [ -f "$f" ] || continue
  "$bin" p2p run "$f" --impl ref --quiet || err "ref $f"
  "$bin" p2p run "$f" --impl opt --quiet || err "opt $f"
  case "$f" in */regressions/*) continue ;; esac
  "$bin" p2p run "$f" --impl opt --copy-service "$plugin" --quiet || err "plug-in $f"
done
f="$dir/dense_tp4pp2dp2_to_tp8pp1dp2.json"
out=$("$bin" p2p plan "$f" --json) || err "plan --json"
for k in '"transfers":\[' '"task_id":' '"param":"' '"src_rank":' '"dst_rank":' '"offsets":\[' '"sizes":\[' \
         '"bytes_sent":523648' '"lb":523648' '"max_sender_bytes":'; do
  grep -q "$k" <<<"$out" || err "plan --json lacks $k"
done
"$bin" p2p plan "$f" --planner ref --json | grep -q '"bytes_sent":575040' || err "ref plan bytes"
"$bin" p2p layout "$f" --config dst --json | grep -q '"name":"layers.0.attn.qkv.weight","placements":"RS(0)","offsets":\[24,0\],"sizes":\[24,64\]' \
  || err "layout --json"
# one box function: p2p layout reports what reshard layout reports (an empty nested shard's global
# offset is the dim's extent, 6 here, not the inner split's 3)
f="$dir/empty_nested_shard.json"
a=$("$bin" p2p layout "$f" --config src --json | grep -o '"offsets":\[[0-9,]*\]' | tr -d '\n')
b=$("$bin" layout --mesh 2x4 --shape 6 --placements 'S(0),S(0)' --json | grep -o '"global_offset":\[[0-9,]*\]' \
    | sed 's/global_offset/offsets/' | tr -d '\n')
[ -n "$a" ] && [ "$a" = "$b" ] || err "p2p layout offsets '$a' != reshard layout '$b'"
grep -q '"offsets":\[6\]' <<<"$a" || err "p2p layout: the empty shard's offset is not the extent 6"
# a partial shard_order (tensor dim 0 only; dim 1 keeps its default) means what --order means
f="$dir/partial_shard_order.json"
a=$("$bin" p2p layout "$f" --config src --json | grep -o '"offsets":\[[0-9,]*\],"sizes":\[[0-9,]*\]' | tr -d '\n')
b=$("$bin" layout --mesh 2x2x2 --shape 7x6 --placements 'S(0),S(0),S(1)' --order '0:1,0' --json \
    | grep -o '"local_shape":\[[0-9,]*\],"global_offset":\[[0-9,]*\]' \
    | sed 's/"local_shape":\(\[[0-9,]*\]\),"global_offset":\(\[[0-9,]*\]\)/"offsets":\2,"sizes":\1/' | tr -d '\n')
[ -n "$a" ] && [ "$a" = "$b" ] || err "partial shard_order: p2p layout '$a' != reshard layout --order '$b'"
# run --json / --dump: an outside reader predicts every dumped tensor from the documented source
# values and the layout, the transport's byte counts add up to the plan's traffic, and ref and opt
# report the same digests (MXFP8 bytes and scales included)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
top=$(cd "$(dirname "$0")/.." && pwd)
for f in "$dir/explicit_uneven_overlap_idle.json" "$dir/mxfp8_explicit_predict.json"; do
  rm -rf "$tmp/dump"
  "$bin" p2p layout "$f" --config dst --json >"$tmp/layout.json" || err "layout for --json"
  "$bin" p2p run "$f" --json --dump "$tmp/dump" >"$tmp/run.json" || err "run --json --dump"
  sent=$(python3 "$top/tests/p2p_predict.py" "$f" "$tmp/layout.json" "$tmp/run.json" "$tmp/dump" | sed -n 's/^sent //p')
  [ -n "$sent" ] || err "$f: p2p_predict.py: $(python3 "$top/tests/p2p_predict.py" "$f" "$tmp/layout.json" "$tmp/run.json" "$tmp/dump" 2>&1 | head -3)"
  "$bin" p2p plan "$f" --json | grep -q "\"bytes_sent\":$sent," || err "$f: --json bytes at the transport ($sent) != the plan's bytes_sent"
done
for f in "$dir/mxfp8_tp2pp2_to_tp4.json" "$dir/moe_collocated_ep_change.json"; do
  a=$("$bin" p2p run "$f" --json | grep -o '"name":"[^"]*","dtype":"[^"]*","shape":\[[0-9,]*\],"xxh3":"[0-9a-f]*"\(,"scale_xxh3":"[0-9a-f]*"\)\?')
  b=$("$bin" p2p run "$f" --json --impl ref | grep -o '"name":"[^"]*","dtype":"[^"]*","shape":\[[0-9,]*\],"xxh3":"[0-9a-f]*"\(,"scale_xxh3":"[0-9a-f]*"\)\?')
  [ -n "$a" ] && [ "$a" = "$b" ] || err "$f: run --json digests differ between opt and ref"
done
"$bin" p2p run "$dir/mxfp8_tp2pp2_to_tp4.json" --json | grep -q '"scale_xxh3":"' || err "--json lacks MXFP8 scale digests"
"$bin" p2p run "$dir/mxfp8_tp2pp2_to_tp4.json" --dump "$tmp/mx" >/dev/null && [ -s "$tmp/mx/rank2/layers.0.attn.qkv.weight.scale" ] \
  || err "--dump lacks MXFP8 scales"
ln -s "$tmp/nowhere" "$tmp/link" 2>/dev/null
"$bin" p2p run "$dir/mxfp8_tp2pp2_to_tp4.json" --dump "$tmp/link" >/dev/null 2>&1; [ $? -eq 2 ] || err "--dump into a symbolic link: exit 2"
"$bin" p2p run "$dir/mxfp8_tp2pp2_to_tp4.json" --json --transport mpi >/dev/null 2>&1; [ $? -eq 2 ] || err "--json under mpi: exit 2"
for f in "$dir"/bad/*.json; do
  want=$(sed -n 's/.*"expect_error": *"\([^"]*\)".*/\1/p' "$f" | head -1)
  # one validation for every verb: plan and layout refuse what run refuses, with the same message
  for verb in run plan "layout --config src" "layout --config dst"; do
    msg=$("$bin" p2p $verb "$f" 2>&1); rc=$?
    [ $rc -eq 2 ] || err "$f: p2p $verb: exit $rc, expected 2"
    grep -qF -- "$want" <<<"$msg" || err "$f: p2p $verb: message '$msg' lacks '$want'"
  done
done
"$bin" p2p run "$dir/dense_tp4pp2dp2_to_tp8pp1dp2.json" --copy-service /nonexistent/lib.so >/dev/null 2>&1
[ $? -eq 2 ] || err "a missing plug-in is bad input (exit 2)"
"$bin" p2p check --cases 200 --seed 3 --quiet >/dev/null || err "check"
[ $fail -eq 0 ] && echo "p2p fixtures: ok"
exit $fail
