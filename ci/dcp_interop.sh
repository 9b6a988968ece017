#!/usr/bin/env bash
# dcp_interop.sh RESHARD - the PyTorch side as a package and DCP's default format, in CI:
#   1. `pip install tools/pytorch` (the reshard-dcp package) into a fresh venv (no system site
#      packages; torch, numpy, xxhash, pip and setuptools come from the pinned torch venv of
#      ci/torch_env.sh through a .pth file, installed with --no-index: no network needed), then a
#      dcp.save through ReshardStorageWriter and a dcp.load through ReshardStorageReader on 2 gloo
#      ranks, run from outside the checkout so that only the installed package can be imported;
#   2. tests/dcp_default_import.py: dcp.save's default format from 1-4 gloo ranks imported with
#      `python -m reshard_dcp import-dcp`, bit-exact, and its damage cases;
#   3. tests/ckpt_py_reader.py --dcp: the C readers' flip and hostile suites through the Python
#      reader and through dcp.load with ReshardStorageReader.
# Exit 77 (with a message) when ci/torch_env.sh cannot provide torch; RS_DCP_FLIPS (default 200)
# sets the flips of step 3; RS_DCP_STAGES (default 123) the steps to run; RS_DCP_QUICK=1 saves two
# of the five DCP layouts in step 2 (2 ranks 1-d, 2x2 mesh) when time is short.
set -uo pipefail
reshard=${1:?usage: ci/dcp_interop.sh RESHARD}
reshard=$(cd "$(dirname "$reshard")" && pwd)/$(basename "$reshard")
top=$(cd "$(dirname "$0")/.." && pwd)
rc=0
py=$(bash "$top/ci/torch_env.sh" | tail -n 1) || rc=$?
if [ "$rc" = 77 ]; then echo "dcp_interop: SKIPPED (torch could not be installed; see above)"; exit 77; fi
[ "$rc" = 0 ] && [ -x "$py" ] || { echo "dcp_interop: ci/torch_env.sh failed (exit $rc)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rs-dcp-interop.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
t0=$SECONDS

stages=${RS_DCP_STAGES:-123}
if [[ $stages == *1* ]]; then
echo "== 1. pip install tools/pytorch into a fresh venv"
base=$("$py" -c 'import sys; print(sys.base_prefix)')/bin/python3
[ -x "$base" ] || base=python3
# --without-pip: no bundled pip or setuptools (an old setuptools lacks bdist_wheel); the pip and
# setuptools that build and install come from the peer venv, the install goes to this venv
"$base" -m venv --without-pip "$tmp/venv" || { echo "dcp_interop: python -m venv failed" >&2; exit 1; }
vpy="$tmp/venv/bin/python"
peer=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
vsite=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$peer" > "$vsite/torch_env_peer.pth"   # torch, numpy, xxhash, setuptools of the pinned venv
cp -r "$top/tools/pytorch" "$tmp/pkgsrc"       # a clean copy: the checkout gets no build/ or egg-info
if ! "$vpy" -m pip install -q --no-index --no-build-isolation "$tmp/pkgsrc" > "$tmp/pip.log" 2>&1 &&
   ! "$vpy" -m pip install -q "$tmp/pkgsrc" >> "$tmp/pip.log" 2>&1; then   # else: PyPI's setuptools
  tail -n 20 "$tmp/pip.log"; echo "FAIL: pip install tools/pytorch"; fail=1
else
  (cd "$tmp" && RS_ROOT="$tmp/ck" "$vpy" - <<'PY') || { echo "FAIL: the installed package"; fail=1; }
import importlib.metadata as md, os, sys
import reshard_dcp
where = os.path.realpath(reshard_dcp.__file__)
assert where.startswith(os.path.realpath(sys.prefix)), f"reshard_dcp imported from {where}, not the venv"
req = md.requires("reshard-dcp")
assert any(r.startswith("numpy") for r in req) and any(r.startswith("xxhash") for r in req), req
import torch, torch.multiprocessing as mp
from reshard_dcp import ReshardStorageReader, ReshardStorageWriter, Reader

def worker(rank, root, port):
    import torch.distributed as dist, torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Shard, Replicate
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    g = torch.Generator().manual_seed(5)
    full = {"w": torch.randn(5, 3, generator=g), "b": torch.randn(7, generator=g).to(torch.bfloat16)}
    sd = {"w": distribute_tensor(full["w"], mesh, [Shard(0)]), "b": distribute_tensor(full["b"], mesh, [Replicate()])}
    dcp.save(sd, storage_writer=ReshardStorageWriter(root, 4))
    ld = {"w": distribute_tensor(torch.zeros(5, 3), mesh, [Shard(1)]),
          "b": distribute_tensor(torch.zeros(7, dtype=torch.bfloat16), mesh, [Shard(0)])}
    dcp.load(ld, storage_reader=ReshardStorageReader(root))
    for k in full:
        assert torch.equal(ld[k].full_tensor().view(torch.uint8), full[k].view(torch.uint8)), k
    dist.destroy_process_group()

root = os.environ["RS_ROOT"]
mp.start_processes(worker, args=(root, 29300 + os.getpid() % 500), nprocs=2, start_method="fork", join=True)
with Reader(root) as r:
    r.verify()
    print(f"installed reshard-dcp {md.version('reshard-dcp')} ({where}): 2 gloo ranks saved through "
          f"ReshardStorageWriter and loaded other layouts through ReshardStorageReader bit-exactly; "
          f"{len(r.tensors)} tensors, {len(r.files)} data files")
PY
  # what the Python writer wrote, read by the C reader
  "$reshard" ckpt verify "$tmp/ck" || { echo "FAIL: reshard ckpt verify of ReshardStorageWriter's checkpoint"; fail=1; }
fi
echo "   ($((SECONDS - t0)) s)"
fi

if [[ $stages == *2* ]]; then
echo "== 2. DCP default format -> reshard (tests/dcp_default_import.py)"
t1=$SECONDS
"$py" "$top/tests/dcp_default_import.py" "$reshard" "$top" ${RS_DCP_QUICK:+--quick} || fail=1
echo "   ($((SECONDS - t1)) s)"
fi

if [[ $stages == *3* ]]; then
echo "== 3. the C readers' damage suites through the Python reader (tests/ckpt_py_reader.py --dcp)"
t1=$SECONDS
"$py" "$top/tests/ckpt_py_reader.py" "$reshard" "$top" --dcp --flips "${RS_DCP_FLIPS:-200}" || fail=1
echo "   ($((SECONDS - t1)) s)"
fi

echo "dcp_interop: $([ $fail = 0 ] && echo PASS || echo FAIL) ($((SECONDS - t0)) s)"
exit $fail
