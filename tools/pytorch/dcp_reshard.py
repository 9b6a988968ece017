#!/usr/bin/env python3
"""dcp_reshard.py - the old import path of the reshard <-> PyTorch DCP code, kept for scripts and
tests that put tools/pytorch on sys.path: the code is the installable package reshard_dcp
(tools/pytorch/reshard_dcp, `pip install tools/pytorch`), re-exported here. Also the fixture
recorder:

`record` writes the fixtures of fixtures/ckpt-dcp/ that ctest holds without torch:
  python tools/pytorch/dcp_reshard.py record --reshard build/reshard --out fixtures/ckpt-dcp
  - reader.json: a reshard checkpoint of saved_spec (4 ranks, TP x DP, replicas, flattened optimizer
    fragments) loaded by DCP through ReshardStorageReader into DTensors on 3 gloo ranks (load_spec:
    other placements); per rank and key the xxh3-64 of the local tensor's bytes. The ctest computes
    the oracle's bytes for load_spec and requires equal digests.
  - hf/: the files HuggingFaceStorageWriter(save_distributed=True) wrote from 3 gloo ranks holding
    the values of saved_spec as DTensors, and hf_load_spec.json: the ctest imports them with
    `reshard ckpt import` and loads them with `reshard ckpt load` (== oracle).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

if __package__ in (None, "") and os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import xxhash  # noqa: E402

from reshard_dcp.ckpt import CheckpointError, Reader, step_dir  # noqa: E402,F401
from reshard_dcp.storage import DTYPES, ReshardStorageReader, ReshardStorageWriter  # noqa: E402,F401


def read_reshard_metadata(stepdir):
    """metadata.json of a step directory as a dict, after every rule of the C readers passed."""
    Reader(stepdir).close()
    with open(os.path.join(step_dir(stepdir), "metadata.json"), "rb") as f:
        return json.loads(f.read())


# ---------------------------------------------------------------- recording the fixtures
SAVED_SPEC = {
    "world": 4,
    "tensors": [
        {"key": "embedding.word_embeddings.weight", "dtype": "BF16", "shape": [12, 8], "seed": 11,
         "mesh": [2, 2], "placements": "S0,R"},
        {"key": "decoder.layers.0.self_attention.linear_qkv.weight", "dtype": "F32", "shape": [6, 9], "seed": 12,
         "mesh": [2, 2], "placements": "S1,S0"},
        {"key": "decoder.layers.0.mlp.linear_fc2.bias", "dtype": "F16", "shape": [6], "seed": 13,
         "mesh": [4], "placements": "R"},
        {"key": "optimizer.state.exp_avg.decoder.layers.0.mlp.linear_fc1.weight", "dtype": "F32", "shape": [6, 5],
         "seed": 14, "mesh": [2, 2], "placements": "S0,R", "flatten": 1},
    ],
    "common": {"iteration": "7"},
}
# DTensor layouts on 3 ranks: (placements, reshard placements); shapes divide or follow torch.chunk
LOAD3 = {
    "embedding.word_embeddings.weight": "S1",
    "decoder.layers.0.self_attention.linear_qkv.weight": "S0",
    "decoder.layers.0.mlp.linear_fc2.bias": "R",
    "optimizer.state.exp_avg.decoder.layers.0.mlp.linear_fc1.weight": "S1",
}


def load_spec(world, layouts):
    ts = []
    for t in SAVED_SPEC["tensors"]:
        ts.append({k: t[k] for k in ("key", "dtype", "shape", "seed")} | {"mesh": [world], "placements": layouts[t["key"]]})
    return {"world": world, "tensors": ts}


def _placements(p):
    from torch.distributed.tensor import Replicate, Shard
    return [Replicate()] if p == "R" else [Shard(int(p[1:]))]


def _reader_worker(rank, world, ckpt, port, out):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    sd = {}
    for t in SAVED_SPEC["tensors"]:
        full = torch.zeros(t["shape"], dtype=DTYPES[t["dtype"]])
        sd[t["key"]] = distribute_tensor(full, mesh, _placements(LOAD3[t["key"]]))
    dcp.load(sd, storage_reader=ReshardStorageReader(ckpt))
    res = {k: {"shape": list(v.to_local().shape),
               "xxh3": f"{xxhash.xxh3_64_intdigest(v.to_local().contiguous().view(torch.uint8).numpy().tobytes()):016x}"}
           for k, v in sd.items()}
    with open(f"{out}.{rank}", "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()


def _hf_worker(rank, world, export, path, port):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from safetensors.torch import load_file
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    full = load_file(export)
    sd = {k: distribute_tensor(full[k], mesh, _placements(LOAD3[k])) for k in LOAD3}
    dcp.save(sd, storage_writer=dcp.HuggingFaceStorageWriter(path, save_distributed=True))
    dist.destroy_process_group()


def record(args):
    import torch.multiprocessing as mp
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="reshard-dcp-")
    try:
        spec = os.path.join(tmp, "saved.json")
        with open(spec, "w") as f:
            json.dump(SAVED_SPEC, f)
        ckpt = os.path.join(tmp, "ckpt")
        subprocess.run([args.reshard, "ckpt", "save", spec, "--root", ckpt, "--step", "3"], check=True)
        port = 29400 + os.getpid() % 500
        mp.start_processes(_reader_worker, args=(3, ckpt, port, os.path.join(tmp, "r")), nprocs=3,
                           start_method="fork", join=True)
        ranks = []
        for r in range(3):
            with open(os.path.join(tmp, f"r.{r}")) as f:
                ranks.append({"rank": r, "tensors": json.load(f)})
        fix = {"what": "a reshard checkpoint (ref save of saved_spec) loaded by torch.distributed.checkpoint.load "
                       "through tools/pytorch/dcp_reshard.py's ReshardStorageReader into DTensors on 3 gloo ranks "
                       "laid out as load_spec; xxh3-64 of each rank's local tensor bytes",
               "torch": torch.__version__, "saved_spec": SAVED_SPEC, "load_spec": load_spec(3, LOAD3), "ranks": ranks}
        with open(os.path.join(args.out, "reader.json"), "w") as f:
            json.dump(fix, f, indent=1)
        # PyTorch's safetensors DCP writer, from the same values
        export = os.path.join(tmp, "export.safetensors")
        subprocess.run([args.reshard, "ckpt", "export", ckpt, export], check=True, stdout=subprocess.DEVNULL)
        hf = os.path.join(tmp, "hf")
        mp.start_processes(_hf_worker, args=(3, export, hf, port + 1), nprocs=3, start_method="fork", join=True)
        dst = os.path.join(args.out, "hf")
        shutil.rmtree(dst, ignore_errors=True)
        os.makedirs(dst)
        for name in sorted(os.listdir(hf)):
            if name.endswith(".safetensors") or name.endswith(".json"):
                shutil.copy(os.path.join(hf, name), dst)
        # reshard loads it on 2 ranks, other placements again
        spec2 = load_spec(2, {"embedding.word_embeddings.weight": "S0",
                              "decoder.layers.0.self_attention.linear_qkv.weight": "S1",
                              "decoder.layers.0.mlp.linear_fc2.bias": "S0",
                              "optimizer.state.exp_avg.decoder.layers.0.mlp.linear_fc1.weight": "R"})
        with open(os.path.join(args.out, "hf_load_spec.json"), "w") as f:
            json.dump(spec2, f, indent=1)
        print(f"recorded {args.out}/reader.json and {args.out}/hf/ ({', '.join(sorted(os.listdir(dst)))})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--reshard", default="build/reshard")
    r.add_argument("--out", default="fixtures/ckpt-dcp")
    args = ap.parse_args()
    record(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
