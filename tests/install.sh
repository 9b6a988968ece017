#!/usr/bin/env bash
# install.sh BUILD SRC - the installed package as an outside project sees it: `cmake --install BUILD`
# into a temporary prefix, then, from a directory outside the tree,
#  (a) tests/install/consumer.c built with find_package(reshard) and with pkg-config (reshard.pc),
#      both run (ref and opt == oracle);
#  (b) tests/install/plugin.c, a backend plug-in against the installed reshard/backend.h, built with
#      find_package and held to `reshard conform` by the installed CLI (its redistribute campaign).
set -u
B=${1:?usage: install.sh BUILD SRC} S=${2:?usage: install.sh BUILD SRC}
. "$S/tests/cli_lib.sh"
P="$T/prefix"
cmake --install "$B" --prefix "$P" >"$T/install.log" 2>&1 || { fail "cmake --install: $(tail -5 "$T/install.log")"; exit 1; }
pc=$(find "$P" -name reshard.pc | head -1)
for f in bin/reshard include/reshard/reshard.h include/reshard/opt.h; do
  [ -f "$P/$f" ] || fail "not installed: $f"
done
[ -n "$(find "$P" -name libreshard.a)" ] || fail "not installed: libreshard.a"
[ -n "$(find "$P" -name reshardConfig.cmake)" ] || fail "not installed: reshardConfig.cmake"
[ -n "$pc" ] || fail "not installed: reshard.pc"
[ "$fails" = 0 ] || exit 1

# (a) the consumer, both ways
mkdir -p "$T/proj"
cp "$S/tests/install/CMakeLists.txt" "$S/tests/install/consumer.c" "$T/proj/"
# docs/library.md's example program, verbatim (the first ```c block after its install-test marker),
# and the output the page says it prints (the next ``` block)
awk '/<!-- install-test: layout_example.c -->/{m=1;next} m==1&&/^```c$/{m=2;next} m==2&&/^```$/{exit} m==2' \
  "$S/docs/library.md" >"$T/proj/layout_example.c"
awk '/<!-- install-test: layout_example.c -->/{m=1;next} m==1&&/^```c$/{m=2;next} m==2&&/^```$/{m=3;next}
     m==3&&/^```$/{m=4;next} m==4&&/^```$/{exit} m==4' "$S/docs/library.md" >"$T/layout_example.want"
[ -s "$T/proj/layout_example.c" ] && [ -s "$T/layout_example.want" ] ||
  fail "docs/library.md: no install-test example (or no output block after it)"
plugin=0
if [ -f "$P/include/reshard/backend.h" ]; then
  cp "$S/tests/install/plugin.c" "$T/proj/"
  plugin=1
fi
cd "$T"
if cmake -S proj -B proj/build -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release >"$T/cfg.log" 2>&1 &&
   cmake --build proj/build -j2 >"$T/bld.log" 2>&1; then
  expect_rc 0 proj/build/consumer
  expect_out "consumer: ok"
  proj/build/layout_example >"$T/le.out" 2>&1 || fail "docs/library.md example (find_package): $(cat "$T/le.out")"
  cmp -s "$T/le.out" "$T/layout_example.want" || fail "docs/library.md example prints other lines than the page: $(cat "$T/le.out")"
else
  fail "find_package(reshard) project:"; tail -n 15 "$T/cfg.log" "$T/bld.log" >&2
fi
# the full set: a static archive, so its transports (Libs.private) come with --static
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --static --cflags --libs reshard) ||
  fail "pkg-config --static --cflags --libs reshard"
# shellcheck disable=SC2086
if cc -std=c11 -o pc_consumer proj/consumer.c $flags >"$T/cc.log" 2>&1; then
  expect_rc 0 ./pc_consumer
  expect_out "consumer: ok"
  # the core only (reshard-core.pc): the layout example needs no transport and no CUDA
  cflags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs reshard-core) ||
    fail "pkg-config --cflags --libs reshard-core"
  case " $cflags " in *cuda*|*nccl*|*mpi*) fail "reshard-core.pc names a transport: $cflags" ;; esac
  # shellcheck disable=SC2086
  if cc -std=c11 -o pc_layout_example proj/layout_example.c $cflags >"$T/cc.log" 2>&1; then
    ./pc_layout_example >"$T/le.out" 2>&1 && cmp -s "$T/le.out" "$T/layout_example.want" ||
      fail "docs/library.md example (pkg-config): $(cat "$T/le.out")"
  else
    fail "docs/library.md example with pkg-config flags: $(tail -10 "$T/cc.log")"
  fi
else
  fail "cc with pkg-config flags ($flags): $(tail -10 "$T/cc.log")"
fi

# (a') the core alone: a project that asks find_package(reshard COMPONENTS core) builds the layout
#      example, and neither it nor the pkg-config build needs CUDA's runtime, NCCL or MPI at run
#      time (their NEEDED entries); the full consumer may
mkdir -p "$T/coreproj"
cp "$T/proj/layout_example.c" "$T/coreproj/"
cat >"$T/coreproj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(reshard_core_consumer C)
find_package(reshard 0.1 REQUIRED COMPONENTS core)
if(TARGET reshard::reshard)
  message(FATAL_ERROR "COMPONENTS core defined reshard::reshard (and looked for its transports)")
endif()
add_executable(layout_example layout_example.c)
target_link_libraries(layout_example PRIVATE reshard::core)
CM
if cmake -S coreproj -B coreproj/build -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release >"$T/ccfg.log" 2>&1 &&
   cmake --build coreproj/build >"$T/cbld.log" 2>&1; then
  grep -qE "MPI|CUDA|NCCL|nccl" "$T/ccfg.log" && fail "find_package(reshard COMPONENTS core) looked for a transport: $(grep -E 'MPI|CUDA|NCCL|nccl' "$T/ccfg.log" | head -3)"
  coreproj/build/layout_example >"$T/le.out" 2>&1 && cmp -s "$T/le.out" "$T/layout_example.want" ||
    fail "core-only layout example: $(cat "$T/le.out")"
  for b in coreproj/build/layout_example pc_layout_example; do
    [ -f "$b" ] || continue
    needed=$(readelf -d "$b" | grep NEEDED)
    if grep -qiE "cudart|nccl|mpi" <<<"$needed"; then fail "$b (core only) needs a transport: $needed"; fi
  done
else
  fail "find_package(reshard COMPONENTS core) project:"; tail -n 15 "$T/ccfg.log" "$T/cbld.log" >&2
fi
[ -f "$P/lib/libreshard_core.a" ] || [ -n "$(find "$P" -name libreshard_core.a)" ] || fail "not installed: libreshard_core.a"
echo "install: full consumer NEEDED: $(readelf -d proj/build/consumer 2>/dev/null | grep NEEDED | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' ')"

# (b) the plug-in under the installed CLI
if [ "$plugin" = 0 ]; then
  echo "note: this build installs no reshard/backend.h: the plug-in part is not run"
elif ! "$P/bin/reshard" conform --help >/dev/null 2>&1; then
  echo "note: the installed reshard has no conform verb: the plug-in was built, not run"
  [ -f proj/build/libplugin.so ] || fail "plug-in not built: $(tail -10 "$T/bld.log")"
  nm -D --defined-only proj/build/libplugin.so | grep -q ' rs_backend_entry$' ||
    fail "the plug-in does not export rs_backend_entry"
else
  expect_rc 0 "$P/bin/reshard" conform --backend "$T/proj/build/libplugin.so" --suite redistribute --cases 300 \
    --seed 7 --failures "$T/reg" --fixtures none
  expect_out "redistribute"
  tail -n 4 "$T/out"
fi

# (c) the corpora travel with the package: the prefix copied elsewhere (a relocated install that
#     has no way back to this build or its source tree: an installed reshard never reads the source
#     tree) runs the same fixture items by default as with --fixtures pointing at the source tree;
#     with its corpora removed, conform refuses to run (exit 2 naming --fixtures) instead of
#     silently checking 1 item, unless --fixtures none
if [ "$plugin" = 1 ] && "$P/bin/reshard" conform --help >/dev/null 2>&1; then
  [ -d "$P/share/reshard/fixtures/curated" ] || fail "not installed: share/reshard/fixtures/curated"
  M="$T/moved"
  cp -a "$P" "$M"
  items() { sed -n 's/.* of \([0-9]*\) items failed.*/\1/p' "$T/out" | tail -1; }
  run_c() { "$M/bin/reshard" conform --backend "$T/proj/build/libplugin.so" --cases 5 --seed 7 --quiet \
              --max-skip-share 1 --failures "$T/reg" "$@" >"$T/out" 2>"$T/err" </dev/null; }
  run_c --fixtures "$S/fixtures"; want=$(items)
  (cd / && run_c); got=$(items)
  [ -n "$want" ] && [ "$want" -gt 100 ] || fail "conform --fixtures SRC ran ${want:-no} items: $(tail -3 "$T/out" "$T/err")"
  [ "$got" = "$want" ] || fail "the relocated installed conform ran ${got:-no} fixture items by default, the source tree's $want"
  rm -rf "$M/share/reshard/fixtures"
  (cd / && run_c); rc=$?
  [ "$rc" = 2 ] || fail "conform without its corpora: exit $rc (want 2): $(tail -3 "$T/out")"
  grep -q -- "--fixtures" "$T/err" || fail "conform without its corpora does not name --fixtures: $(head -c 300 "$T/err")"
  mkdir -p "$T/empty"
  run_c --fixtures "$T/empty"; rc=$?
  [ "$rc" = 2 ] || fail "conform --fixtures EMPTY-DIR: exit $rc (want 2)"
  run_c --fixtures none --suite redistribute; rc=$?
  [ "$rc" != 2 ] || fail "conform --fixtures none without corpora: exit 2: $(head -c 300 "$T/err")"
  # a replay runs one saved case: no corpora needed
  (cd / && "$M/bin/reshard" conform --backend "$T/proj/build/libplugin.so" \
     --replay "$S/fixtures/curated/copy_4d_2x2x2_S3S2S0_to_S0S1S3.json" >"$T/out" 2>"$T/err" </dev/null); rc=$?
  [ "$rc" != 2 ] || fail "conform --replay without corpora: exit 2: $(head -c 300 "$T/err")"
  echo "install: $got fixture items run by the relocated installed conform"
fi
[ "$fails" = 0 ] || exit 1
echo "install: the package installed, found by find_package and pkg-config, consumer ran both ways${plugin:+, plug-in built}"
