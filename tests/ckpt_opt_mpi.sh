#!/usr/bin/env bash
# ckpt_opt_mpi.sh MPIEXEC RESHARD SRC - opt's save and load through the CLI with one process per
# rank (each holding only its own state dict): TP2 x DP2 saved on 4 processes, loaded as TP4 on 4
# processes read-once, then by ref in one process, and verified.
set -euo pipefail
M=$1
R=$2
fx=$3/fixtures/ckpt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$M" --oversubscribe --allow-run-as-root -np 4 "$R" ckpt save "$fx/megatron_tp2_dp2.json" --root "$tmp/c" --step 3 \
  --impl opt --transport mpi
"$M" --oversubscribe --allow-run-as-root -np 4 "$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/c" --impl opt \
  --transport mpi --read-once
"$M" --oversubscribe --allow-run-as-root -np 4 "$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/c" --impl opt \
  --transport mpi
"$R" ckpt load "$fx/megatron_tp4.json" --root "$tmp/c"
"$R" ckpt verify "$tmp/c"
