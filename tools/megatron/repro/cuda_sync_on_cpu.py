#!/usr/bin/env python3
"""cuda_sync_on_cpu.py - Megatron-Core 0.16.1: `dist_checkpointing.save` with its default torch_dist
strategy fails on a machine without a CUDA driver, although every tensor is on the CPU and the
process group is gloo.

    python tools/megatron/repro/cuda_sync_on_cpu.py      # any python with torch (CPU) + megatron-core

Two unconditional CUDA calls on the save path:
  1. strategies/filesystem_async.py FileSystemWriterAsync.preload_tensors: torch.cuda.synchronize()
     (non_blocking=True is hard-coded by get_save_function_and_args);
  2. strategies/state_dict_saver.py save_state_dict_async_finalize: the failure flag is a tensor on
     torch.cuda.current_device().
Each raises "RuntimeError: Found no NVIDIA driver on your system". Step 1 is shown first; with
--past-sync the script no-ops torch.cuda.synchronize to show step 2. Known upstream: NVIDIA/Megatron-LM
pull request #6270 (open: "avoid unconditional CUDA synchronization for all-CPU DCP preload and use
the active process group's collective device for DCP finalization").
Exit 0: the defect reproduced (save raised the CUDA error); 1: the save worked (fixed).
"""
import os
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():  # the save starts a spawn Manager, which imports this module again
    if torch.cuda.is_available():
        print("this machine has CUDA: the defect needs a machine without a CUDA driver")
        sys.exit(2)
    dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(prefix="mcore-store-"), rank=0, world_size=1)
    if "--past-sync" in sys.argv:
        torch.cuda.synchronize = lambda device=None: None
    from megatron.core import dist_checkpointing  # noqa: E402
    from megatron.core.dist_checkpointing import ShardedTensor  # noqa: E402

    sd = {"w": ShardedTensor.from_rank_offsets("w", torch.arange(6, dtype=torch.float32).reshape(2, 3))}
    d = tempfile.mkdtemp(prefix="mcore-cpu-save-")
    try:
        dist_checkpointing.save(sd, d)
    except RuntimeError as e:
        print("reproduced: dist_checkpointing.save on CPU raised: %s" % str(e).splitlines()[0])
        import traceback
        print("".join(traceback.format_exc().splitlines(True)[-8:-1]))
        sys.exit(0)
    finally:
        dist.destroy_process_group()
    print("not reproduced: the save worked (%s)" % sorted(os.listdir(d)))
    sys.exit(1)


if __name__ == "__main__":
    main()
