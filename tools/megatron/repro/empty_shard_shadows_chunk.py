#!/usr/bin/env python3
"""empty_shard_shadows_chunk.py - Megatron-Core 0.16.1 (torch_dist, PyTorch DCP underneath): a
ShardedTensor key with an empty shard whose global offset equals a full shard's saves without an
error, and then no load can read it:
    AssertionError: req MetadataIndex(fqn='w', offset=torch.Size([1]), index=...) mismatch sizes
    torch.Size([1]) vs torch.Size([0])
DCP indexes a tensor's chunks by (key, offset); the empty chunk at offset [1] shadows the full one.
torch.chunk's layouts make such shards (a [2] tensor split 2 ways and each half 2 ways again:
[0:1], [1:1], [1:2], [2:2]). One process holds all four shards here (the live campaign had them on
four ranks). Exit 0: reproduced (the load failed); 1: the load returned the saved values.

    python tools/megatron/repro/empty_shard_shadows_chunk.py
"""
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():  # the save starts a spawn Manager, which imports this module again
    dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(prefix="mcore-store-"), rank=0,
                            world_size=1)
    if not torch.cuda.is_available():  # the CPU save needs these (cuda_sync_on_cpu.py): not this defect
        torch.cuda.synchronize = lambda device=None: None
        torch.cuda.current_device = lambda: "cpu"
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing import ShardedTensor

    def st(data, off):
        return ShardedTensor("w", data, data.dtype, tuple(data.shape), (2,), (off,), None)

    g = torch.tensor([1.5, 2.5], dtype=torch.float64)
    d = tempfile.mkdtemp(prefix="mcore-empty-shard-")
    dist_checkpointing.save({"a": st(g[0:1].clone(), 0), "b": st(g[1:1].clone(), 1),
                             "c": st(g[1:2].clone(), 1), "d": st(g[2:2].clone(), 2)}, d)
    print("saved without an error")
    try:
        got = dist_checkpointing.load({"w": st(torch.zeros(2, dtype=torch.float64), 0)}, d)
    except BaseException as e:  # DCP's CheckpointException derives from BaseException
        print("reproduced: the load failed: %s: %s" % (type(e).__name__, str(e)[:400]))
        rc = 0
    else:
        print("not reproduced: loaded %s" % got["w"].tolist())
        rc = 1 if torch.equal(got["w"], g) else 0
    dist.destroy_process_group()
    sys.exit(rc)


if __name__ == "__main__":
    main()
