#!/usr/bin/env python3
"""dcp_reshard.py - reshard checkpoints and PyTorch DCP (torch.distributed.checkpoint) both ways.

ReshardStorageReader is a DCP StorageReader over a reshard checkpoint (a root with `latest` or a
step directory): `torch.distributed.checkpoint.load(state_dict, storage_reader=
ReshardStorageReader(dir))` fills DTensors of any layout from it. metadata.json becomes DCP
Metadata (one ChunkStorageMetadata per stored box; a distributed optimizer's flat fragments of one
box are reassembled into that box), every byte read is checked against the file's xxh3-64 block
digests and metadata.json against its own digest line. ShardedObjects (raw bytes) are not offered
to DCP, which expects torch.save'd bytes for BytesStorageMetadata.

The other direction needs no code here: torch 2.15 ships a safetensors-based DCP writer,
torch.distributed.checkpoint.HuggingFaceStorageWriter (hf_storage.py); with save_distributed=True
every rank writes shard-<r>-model-00001-of-00001.safetensors whose __metadata__ carries
DCP_SHARDING_INFO (each tensor's saved_offsets). `reshard ckpt import DIR --root OUT --step N`
turns such a directory into a reshard checkpoint that `reshard ckpt load` checks against the oracle.

`record` writes the fixtures of fixtures/ckpt-dcp/ that ctest holds without torch:
  /work/venv/bin/python tools/pytorch/dcp_reshard.py record --reshard build/reshard --out fixtures/ckpt-dcp
  - reader.json: a reshard checkpoint of saved_spec (4 ranks, TP x DP, replicas, flattened optimizer
    fragments) loaded by DCP through ReshardStorageReader into DTensors on 3 gloo ranks (load_spec:
    other placements); per rank and key the xxh3-64 of the local tensor's bytes. The ctest computes
    the oracle's bytes for load_spec and requires equal digests.
  - hf/: the files HuggingFaceStorageWriter(save_distributed=True) wrote from 3 gloo ranks holding
    the values of saved_spec as DTensors, and hf_load_spec.json: the ctest imports them with
    `reshard ckpt import` and loads them with `reshard ckpt load` (== oracle).
"""
import argparse
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import xxhash
from torch.distributed.checkpoint.metadata import (
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    TensorProperties,
    TensorStorageMetadata,
)
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner
from torch.distributed.checkpoint.storage import StorageReader
from torch.futures import Future

DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool, "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}
DIGEST_PREFIX = b'{"digest":"xxh3:'
DIGEST_LINE = len(DIGEST_PREFIX) + 16 + 3


def step_dir(path):
    if os.path.exists(os.path.join(path, "metadata.json")):
        return path
    with open(os.path.join(path, "latest")) as f:
        return os.path.join(path, f"step_{int(f.read().strip())}")


def read_reshard_metadata(stepdir):
    with open(os.path.join(stepdir, "metadata.json"), "rb") as f:
        b = f.read()
    if not b.startswith(DIGEST_PREFIX) or b[DIGEST_LINE - 3:DIGEST_LINE] != b'",\n':
        raise ValueError(f"{stepdir}/metadata.json: no digest line (not a reshard checkpoint)")
    if xxhash.xxh3_64_intdigest(b[DIGEST_LINE:]) != int(b[len(DIGEST_PREFIX):len(DIGEST_PREFIX) + 16], 16):
        raise ValueError(f"{stepdir}/metadata.json: digest mismatch (the file is corrupt)")
    return json.loads(b)


@dataclasses.dataclass
class _Box:
    file_of: dict
    sizes: tuple
    dtype: torch.dtype
    fragments: list  # (file, byte offset, length, flat start)


class ReshardStorageReader(StorageReader):
    def __init__(self, path):
        super().__init__()
        self.path = path
        self.md = None
        self.boxes = {}

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = str(checkpoint_id)
        self.md = None
        self.boxes = {}

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        p = str(checkpoint_id)
        return os.path.exists(os.path.join(p, "metadata.json")) or os.path.exists(os.path.join(p, "latest"))

    def read_metadata(self, *args, **kwargs):
        self.dir = step_dir(self.path)
        self.md = read_reshard_metadata(self.dir)
        self.files = {f["name"]: f for f in self.md["files"]}
        sdm, storage = {}, {}
        for key, t in self.md["tensors"].items():
            dt = DTYPES[t["dtype"]]
            chunks = {}
            for c in t["chunks"]:
                box = (tuple(c["offsets"]), tuple(c["sizes"]))
                fs = c["flat"][0] if "flat" in c else 0
                chunks.setdefault(box, []).append((c["file"], c["offset"], c["length"], fs))
            metas = []
            for (off, sizes), frags in sorted(chunks.items()):
                metas.append(ChunkStorageMetadata(offsets=torch.Size(off), sizes=torch.Size(sizes)))
                storage[MetadataIndex(key, off)] = _Box(self.files, sizes, dt, frags)
            sdm[key] = TensorStorageMetadata(properties=TensorProperties(dtype=dt),
                                             size=torch.Size(t["shape"]), chunks=metas)
        return Metadata(state_dict_metadata=sdm, storage_data=storage)

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        self.storage = metadata.storage_data

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def _read(self, name, off, length):
        f = self.files[name]
        bs = f["block"]
        s, e = off // bs * bs, min(f["size"], -(-(off + length) // bs) * bs)
        with open(os.path.join(self.dir, name), "rb") as fh:
            if os.fstat(fh.fileno()).st_size != f["size"]:
                raise ValueError(f"file {name}: size differs from metadata.json (truncated or replaced)")
            fh.seek(s)
            b = fh.read(e - s)
        for o in range(s, e, bs):
            blk = b[o - s:min(o - s + bs, e - s)]
            if xxhash.xxh3_64_intdigest(blk) != int(f["xxh3"][o // bs], 16):
                raise ValueError(f"file {name} block {o // bs}: xxh3 digest mismatch (corrupt data)")
        return b[off - s:off - s + length]

    def read_data(self, plan: LoadPlan, planner: LoadPlanner):
        cache = {}
        for item in plan.items:
            if item.type != LoadItemType.TENSOR:
                raise ValueError(f"{item.dest_index.fqn}: reshard's objects are raw bytes, not torch.save'd")
            idx = MetadataIndex(item.storage_index.fqn, tuple(item.storage_index.offset))
            box = self.storage[idx]
            if idx not in cache:
                es = torch.empty((), dtype=box.dtype).element_size()
                numel = int(np.prod(box.sizes)) if box.sizes else 1
                buf = bytearray(numel * es)
                for name, off, length, fs in box.fragments:
                    buf[fs * es:fs * es + length] = self._read(name, off, length)
                cache = {idx: torch.frombuffer(buf, dtype=box.dtype).reshape(box.sizes) if numel else
                         torch.empty(box.sizes, dtype=box.dtype)}
            t = cache[idx]
            for d, (o, l) in enumerate(zip(item.storage_offsets, item.lengths)):
                t = t.narrow(d, o, l)
            target = planner.resolve_tensor(item).detach()
            target.copy_(t)
            planner.commit_tensor(item, target)
        fut = Future()
        fut.set_result(None)
        return fut


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
