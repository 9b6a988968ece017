#!/usr/bin/env python3
"""dp_fallback_not_local.py - Megatron-Core's planner sends a replicated parameter over the network to
a rank that already holds it (traffic above the lower bound; the plan stays correct).

megatron/core/resharding/planner.py, _finalize_dp_transfers: for a parameter that is not
tensor-parallel, a destination rank copies locally only when the source and destination DP groups
are the same list; otherwise it receives from src_dp_ranks[my_global_rank % len(src_dp_ranks)],
even when my_global_rank is itself in src_dp_ranks and holds the whole parameter. Collocated refits
where the DP grouping changes (dp 2 -> tp 2 on the same ranks, or a rank list shifted by one)
therefore move every norm, router and row-parallel bias between ranks where a local copy would do.
Under `reshard fuzz-planner --kind p2p` (docs/conformance.md, "Live Megatron-Core") this is why
Megatron's plans send bytes where SPEC 10's lower bound is 0.

Run:  python dp_fallback_not_local.py   (no process group needed: the planner's own helper on metadata)
Prints the chosen source and exits 1 ("INEFFICIENT") when it is another rank than the receiver.
"""
import sys

import torch
from megatron.core import package_info
from megatron.core.resharding.planner import _finalize_dp_transfers
from megatron.core.resharding.utils import ParameterMetadata

# A norm weight held whole by ranks 1 and 2 in the source (dp 2 on ranks [1, 2]) and by ranks 1 and 2
# in the destination (tp 2 on ranks [1, 2]: each rank its own DP group).
src = ParameterMetadata(name="final_norm.weight", shape=(8,), dtype=torch.float32, element_size=4,
                        owner_rank=1, data_parallel_group_ranks=[1, 2], resolved_name="final_norm.weight")
dst = ParameterMetadata(name="final_norm.weight", shape=(8,), dtype=torch.float32, element_size=4,
                        owner_rank=1, data_parallel_group_ranks=[1], resolved_name="final_norm.weight")
ops = _finalize_dp_transfers("final_norm.weight", src, dst, my_global_rank=1)
print("megatron-core", package_info.__version__, ": rank 1 (holds the tensor in src) receives it from", ops[0][0])
if ops[0][0] != 1:
    print("INEFFICIENT: a transfer from rank %d where a local copy on rank 1 suffices" % ops[0][0])
    sys.exit(1)
print("local copy: not reproduced")
