#!/usr/bin/env bash
# p2p_cli.sh RESHARD TOP - the P2P input layer as ci/mutation.sh runs it (a tests/*.sh runner gets
# the binary and the source tree): tests/p2p_fixtures.sh with the example copy-service plug-in built
# next to the binary (one validation for every verb, p2p layout == reshard layout, partial
# shard_order, run --json/--dump).
set -u
bin=${1:?usage: p2p_cli.sh path/to/reshard TOP}
top=${2:?usage: p2p_cli.sh path/to/reshard TOP}
plugin="$(cd "$(dirname "$bin")" && pwd)/tests/libp2p_copy_plugin.so"
exec bash "$top/tests/p2p_fixtures.sh" "$bin" "$top/fixtures/p2p" "$plugin"
