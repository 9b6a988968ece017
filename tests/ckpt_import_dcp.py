"""ckpt_import_dcp.py - the import cases of tests/ckpt_import.sh written by real PyTorch DCP.

Usage: ckpt_import_dcp.py OUT

torch.distributed.checkpoint.save with HuggingFaceStorageWriter, on 3 gloo ranks (forked) and in
one process, writes under OUT:
  good/            save_distributed=True: w (F32 [6, 4], a DTensor Shard(0) over 3 ranks), b (I32 [5],
                   a plain tensor: DCP keeps one copy)
  stale_shards/    the same path saved twice: base 1000 with no fqn_to_index_mapping
                   (...-00001-of-00001), then base 0 with {w: 1, b: 2} (...-of-00002)
  stale_index/     one process, save_distributed=False: base 1000 (model-00001-of-00001), then base 0
                   with {w: 1, b: 2} (model-0000N-of-00002 and model.safetensors.index.json)
  other/           w as Shard(0) over 2 ranks (chunks [3, 4]): its first file becomes a stray shard
  shapes.json      {key: global shape} from the state dict; new.bin: w's and b's bytes at base 0
"""
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint import HuggingFaceStorageWriter
from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh


def values(base):
    return (torch.arange(24, dtype=torch.float32).reshape(6, 4) + base, torch.arange(5, dtype=torch.int32) + base)


def ranks(rank, world, init, out):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    for path, base, mapping in (("good", 0, None), ("stale_shards", 1000, None), ("stale_shards", 0, {"w": 1, "b": 2})):
        if world != 3:
            continue
        w, b = values(base)
        sd = {"w": distribute_tensor(w, mesh, [Shard(0)]), "b": b}
        dcp.save(sd, storage_writer=HuggingFaceStorageWriter(f"{out}/{path}", fqn_to_index_mapping=mapping,
                                                              save_distributed=True))
    if world == 2:
        w, b = values(0)
        dcp.save({"w": distribute_tensor(w, mesh, [Shard(0)])},
                 storage_writer=HuggingFaceStorageWriter(f"{out}/other", save_distributed=True))
    dist.barrier()
    dist.destroy_process_group()


def main(out):
    os.makedirs(out, exist_ok=True)
    for world in (3, 2):
        fd, name = tempfile.mkstemp()
        os.close(fd)
        os.unlink(name)
        mp.start_processes(ranks, args=(world, f"file://{name}", out), nprocs=world, start_method="fork")
    for base, mapping in ((1000, None), (0, {"w": 1, "b": 2})):
        w, b = values(base)
        dcp.save({"w": w, "b": b}, storage_writer=HuggingFaceStorageWriter(f"{out}/stale_index",
                                                                           fqn_to_index_mapping=mapping), no_dist=True)
    w, b = values(0)
    with open(f"{out}/shapes.json", "w") as f:
        json.dump({"w": list(w.shape), "b": list(b.shape)}, f)
    with open(f"{out}/new.bin", "wb") as f:
        f.write(w.numpy().tobytes() + b.numpy().tobytes())
    print("ckpt_import_dcp: torch", torch.__version__, {d: sorted(os.listdir(f"{out}/{d}"))
                                                         for d in ("good", "stale_shards", "stale_index", "other")})


if __name__ == "__main__":
    import warnings
    warnings.filterwarnings("ignore")
    main(sys.argv[1])
