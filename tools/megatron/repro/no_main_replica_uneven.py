#!/usr/bin/env python3
"""no_main_replica_uneven.py - Megatron-Core 0.16.1 (torch_dist): a ShardedTensor key none of whose
shards is a main replica (every replica_id != 0) is refused by the save when its sharding is a
regular grid ("Invalid access pattern"), but saved without an error when it is uneven
(axis_fragmentations None): `validate_sharding_integrity` defers uneven keys to DCP
("In case of uneven sharding we defer the validation to DCP"), and DCP is only handed the main
replicas, so it never learns that the key exists. The checkpoint silently lacks the key; the load
then fails with a KeyError. (Found with tools/megatron/ckpt.py's first drop_shard variant, which left
out every main box of a key.) One process holds both shards.
Exit 0: reproduced (the even key refused, the uneven one saved and missing); 1: not reproduced.

    python tools/megatron/repro/no_main_replica_uneven.py
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
    from megatron.core.dist_checkpointing.core import CheckpointingException

    def st(key, data, gshape, off, frag, replica):
        return ShardedTensor(key, data, data.dtype, tuple(data.shape), (gshape,), (off,), frag, replica_id=replica)

    # even: [4] as two [2] boxes on a regular grid, neither a main replica
    g = torch.arange(4, dtype=torch.float32)
    d = tempfile.mkdtemp(prefix="mcore-no-main-even-")
    try:
        dist_checkpointing.save({"a": st("even", g[0:2].clone(), 4, 0, (2,), 1),
                                 "b": st("even", g[2:4].clone(), 4, 2, (2,), 1)}, d)
        even_refused = False
        print("even key: saved without an error")
    except CheckpointingException as e:
        even_refused = True
        print("even key: refused: %s" % str(e)[:160])
    # uneven: [3] as [2] + [1] (axis_fragmentations None), neither a main replica
    g = torch.arange(3, dtype=torch.float32)
    d = tempfile.mkdtemp(prefix="mcore-no-main-uneven-")
    dist_checkpointing.save({"a": st("uneven", g[0:2].clone(), 3, 0, None, 1),
                             "b": st("uneven", g[2:3].clone(), 3, 2, None, 1)}, d)
    print("uneven key: saved without an error")
    try:
        got = dist_checkpointing.load({"u": st("uneven", torch.zeros(3), 3, 0, None, 0)}, d)
        missing = False
        print("uneven key: loaded %s" % got["u"].tolist())
    except BaseException as e:  # DCP's CheckpointException derives from BaseException
        missing = True
        print("uneven key: the load failed: %s: %s" % (type(e).__name__, str(e)[:300]))
    dist.destroy_process_group()
    ok = even_refused and missing
    print("reproduced" if ok else "not reproduced")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
