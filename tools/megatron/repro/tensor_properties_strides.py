#!/usr/bin/env python3
"""tensor_properties_strides.py - Megatron-Core 0.16.1 with torch 2.15: reading a torch_dist
checkpoint's tensor metadata fails, so `dist_checkpointing.load_tensors_metadata`,
`load_sharded_metadata`, and `dist_checkpointing.load` with any strict mode that checks the
checkpoint's keys (raise_all, raise_unexpected, log_all, return_all, ...) raise
    TypeError: empty() got an unexpected keyword argument 'strides'

    python tools/megatron/repro/tensor_properties_strides.py

strategies/torch.py TorchDistLoadShardedStrategy.load_tensors_metadata builds each tensor as
`torch.empty(tp.size, **tp.properties.__dict__, device='meta')`; torch 2.15's DCP TensorProperties
has a `strides` field (torch/distributed/checkpoint/metadata.py), which torch.empty does not take.
No checkpoint with the default strict mode (assume_ok_unexpected) is affected. Exit 0: reproduced;
1: the metadata loaded (fixed).
"""
import os
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.checkpoint.metadata import TensorProperties  # noqa: E402


def main():  # the save starts a spawn Manager, which imports this module again
    print("torch %s, TensorProperties fields: %s" % (torch.__version__, sorted(TensorProperties.__dataclass_fields__)))
    dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(prefix="mcore-store-"), rank=0, world_size=1)
    if not torch.cuda.is_available():  # the CPU save needs these (cuda_sync_on_cpu.py): not this defect
        torch.cuda.synchronize = lambda device=None: None
        torch.cuda.current_device = lambda: "cpu"
    from megatron.core import dist_checkpointing  # noqa: E402
    from megatron.core.dist_checkpointing import ShardedTensor  # noqa: E402
    from megatron.core.dist_checkpointing.validation import StrictHandling  # noqa: E402

    d = tempfile.mkdtemp(prefix="mcore-strides-")
    w = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    dist_checkpointing.save({"w": ShardedTensor.from_rank_offsets("w", w)}, d)
    try:
        dist_checkpointing.load({"w": ShardedTensor.from_rank_offsets("w", torch.empty(2, 3))}, d,
                                strict=StrictHandling.RAISE_ALL)
    except TypeError as e:
        print("reproduced: dist_checkpointing.load(strict=RAISE_ALL) raised TypeError: %s" % e)
        rc = 0
    else:
        print("not reproduced: the load worked")
        rc = 1
    dist.destroy_process_group()
    os._exit(rc)  # skip the exit handlers of the save's Manager process


if __name__ == "__main__":
    main()
