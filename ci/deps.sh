#!/usr/bin/env bash
# deps.sh - install whatever the build and tests need and is missing (Debian packages).
set -euo pipefail
need=()
# clang + libclang-rt-14-dev: the clang build of ci/builds.sh and libFuzzer for ci/fuzz.sh (Debian 12)
for pkg in build-essential cmake pkg-config libcjson-dev libxxhash-dev libopenmpi-dev openmpi-bin lcov zlib1g-dev \
           clang libclang-rt-14-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
# ckpt: the safetensors interop test makes a venv (numpy + safetensors from PyPI) under the build
# dir; its fuzz targets need clang (libFuzzer)
for pkg in python3-venv clang; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
