#!/usr/bin/env python3
"""sequential_mlp_experts.py - Megatron-Core's resharding planner matches SequentialMLP's expert
weights by their local index, so with expert parallelism it moves another expert's weights (or
fails to find one).

megatron/core/resharding/utils.py maps a local expert to its global index only for names with a
part `weight<k>` / `bias<k>` (TEGroupedMLP's per-expert tensors, _detect_expert_index_from_param_name).
SequentialMLP, the MoE layer used when moe_grouped_gemm is False (the default), names its experts
`...experts.local_experts.<k>.linear_fc1.weight`: the index is local, is not rewritten, and every EP
rank's local expert 0 gets the same resolved_name. build_centralized_reshard_plan then takes any of
them as the source.

Here: 2 experts, EP 2 on ranks 0 and 1 (rank 0 holds global expert 0, rank 1 global expert 1), moved
to EP 2 on ranks 2 and 3. Rank 3's local expert 0 is global expert 1 and must come from rank 1.
Four gloo processes on this machine; the planner only (no transfer is executed).

Run:  python sequential_mlp_experts.py     (needs torch and megatron-core)
Prints each destination rank's source for both namings; exit 1 ("DEFECT") when the SequentialMLP
naming takes rank 3's expert from rank 0.
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from megatron.core import package_info
from megatron.core.process_groups_config import ProcessGroupCollection
from megatron.core.resharding import build_centralized_reshard_plan

NAMES = {"TEGroupedMLP": "decoder.layers.0.mlp.experts.linear_fc1.weight0",
         "SequentialMLP": "decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight"}


def module(name, pgc):
    root = torch.nn.Module()
    mod = root
    parts = name.split(".")
    for p in parts[:-1]:
        if not hasattr(mod, p):
            mod.add_module(p, torch.nn.Module())
        mod = getattr(mod, p)
    if name:
        w = torch.nn.Parameter(torch.zeros(4, 4), requires_grad=False)
        w.tensor_model_parallel, w.partition_dim, w.partition_stride = True, 0, 1
        w.allreduce = False  # an expert weight under expert parallelism
        mod.register_parameter(parts[-1], w)
    root.pg_collection = pgc
    return root


def run(rank, store, q):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=4)
    g = {k: dist.new_group(list(k)) for k in [(0, 1), (2, 3), (0,), (1,), (2,), (3,)]}
    for kind, name in NAMES.items():
        def pgc(ranks):
            c = ProcessGroupCollection()
            c.ep, c.dp, c.pp = g[ranks], g[ranks], g[(rank,)]
            c.tp = c.expt_tp = g[(rank,)]
            return c
        src = module(name if rank < 2 else "", pgc((0, 1)) if rank < 2 else pgc((rank,)))
        dst = module(name if rank >= 2 else "", pgc((2, 3)) if rank >= 2 else pgc((rank,)))
        plan = build_centralized_reshard_plan(src, dst, num_experts=2)
        for op in plan.recv_ops:
            q.put((kind, rank, op.peer_rank))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    store = os.path.join(tempfile.mkdtemp(), "store")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    mp.spawn(run, args=(store, q), nprocs=4, join=True)
    got = {}
    while not q.empty():
        kind, rank, peer = q.get()
        got[(kind, rank)] = peer
    print("megatron-core", package_info.__version__)
    for kind in NAMES:
        print("%-14s rank 2 (global expert 0) from rank %s, rank 3 (global expert 1) from rank %s (want 0, 1)" %
              (kind, got.get((kind, 2)), got.get((kind, 3))))
    if got.get(("SequentialMLP", 3)) != 1:
        print("DEFECT: SequentialMLP's expert 1 is taken from rank %s, which holds expert 0" % got.get(("SequentialMLP", 3)))
        sys.exit(1)
    print("not reproduced")
