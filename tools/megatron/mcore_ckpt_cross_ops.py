"""mcore_ckpt_cross_ops.py - inside a pool worker (mcore_ckpt_pool.py): Megatron-Core's
dist_checkpointing.load of a reshard checkpoint. Megatron's load reads its own metadata.json (the
backend names) and common.pt from the checkpoint directory first, and its torch_dist strategy then
reads the tensors through a DCP StorageReader; here that reader is reshard_dcp's
ReshardStorageReader over the reshard checkpoint (every digest and rule of reshard's readers
checked). So the directory given to Megatron is a small view: Megatron's metadata.json and an empty
common.pt, the tensors coming from the reshard root. Used by mcore_ckpt_cross.py."""
import json
import os
import shutil
import sys
import tempfile

import torch

import mcore_ckpt_ops as ops

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pytorch"))


def load_reshard(rank, world, items, root):
    dc, mapping, _ = ops._mc()
    from megatron.core.dist_checkpointing.strategies import torch as mtorch
    from reshard_dcp.storage import ReshardStorageReader

    view = tempfile.mkdtemp(prefix="mcore-view-")
    with open(os.path.join(view, "metadata.json"), "w") as f:
        json.dump({"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                   "common_backend": "torch", "common_backend_version": 1}, f)
    torch.save({}, os.path.join(view, "common.pt"))
    orig = mtorch._get_filesystem_reader
    mtorch._get_filesystem_reader = lambda d, cache_metadata=False: ReshardStorageReader(root)
    try:
        sd = {}
        for i, it in enumerate(items):
            data = torch.zeros(it["size"], dtype=ops.DT[it["dtype"]])
            sd["t%d" % i] = ops._sh_ten(mapping, it["key"], data, it["gshape"], it["start"], it["replica"], False)
        got = dc.load(sd, view)
    finally:
        mtorch._get_filesystem_reader = orig
        shutil.rmtree(view, ignore_errors=True)
    return [ops.bytes_of(got["t%d" % i]) for i in range(len(items))]
