#!/usr/bin/env python3
"""writer_error_hangs.py - Megatron-Core 0.16.1: when a forked writer process of the default
torch_dist save raises before it reports (here: psutil missing, which `pip install --no-deps
megatron-core` leaves out), `dist_checkpointing.save` never returns: the parent waits in
count_queue.join() (strategies/filesystem_async.py write_preloaded_data_multiproc) for a task the
dead writer never marks done. The error is printed by the child, and the save hangs instead of
raising.

    python tools/megatron/repro/writer_error_hangs.py [TIMEOUT_S]   # default 60

The script hides psutil (sys.modules['psutil'] = None before megatron is imported) so it
reproduces whether or not psutil is installed, and no-ops the CUDA calls of cuda_sync_on_cpu.py
so that a CPU machine gets as far as the writers. Exit 0: reproduced (the save still had not
returned after TIMEOUT_S; the child is killed); 1: the save returned or raised.
"""
import multiprocessing as mp
import os
import sys
import tempfile


def child(d):
    os.setsid()  # its own process group: the parent kills it and the save's forked writers together
    import warnings
    warnings.filterwarnings("ignore")
    sys.modules["psutil"] = None
    import torch
    import torch.distributed as dist
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda.current_device = lambda: "cpu"
    dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(prefix="mcore-store-"), rank=0,
                            world_size=1)
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing import ShardedTensor
    sd = {"w": ShardedTensor.from_rank_offsets("w", torch.arange(6, dtype=torch.float32).reshape(2, 3))}
    try:
        dist_checkpointing.save(sd, d)
        print("save returned")
    except Exception as e:
        print("save raised: %s" % e)


if __name__ == "__main__":
    timeout = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    d = tempfile.mkdtemp(prefix="mcore-writer-hang-")
    p = mp.get_context("spawn").Process(target=child, args=(d,))
    p.start()
    p.join(timeout)
    if p.is_alive():
        os.killpg(p.pid, 9)  # the child and the writers it forked
        p.join()
        print("reproduced: dist_checkpointing.save still running after %.0f s (a writer died before "
              "reporting; the parent waits for it for ever)" % timeout)
        sys.exit(0)
    print("not reproduced: the save finished (exit status %s)" % p.exitcode)
    sys.exit(1)
