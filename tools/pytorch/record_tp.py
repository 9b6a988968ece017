#!/usr/bin/env python3
"""record_tp.py - records what PyTorch's torch.distributed.tensor.parallel does with reshard's TP
cases (SPEC 12): parallelize_module with ColwiseParallel / RowwiseParallel / SequenceParallel /
PrepareModuleInput / PrepareModuleOutput on the same module chains, run on CPU with every rank in
one process (fake process group + LocalTensorMode, as rs_torch.py does for redistribute).

  # cases from `reshard tp gen --one-d` (parallelize_module takes the 1-d TP mesh), JSON lines out
  python3 tools/pytorch/record_tp.py --reshard build/reshard --seed 11 --cases 600 \
      --out fixtures/tp/pytorch_tp_seed11.jsonl.gz

Each output line is the case JSON plus a "pytorch" object: torch version, and either "error" (what
PyTorch raised) or, per module, the parameter placements ("plain" for a parameter no style
distributed) and every rank's local parameter shapes; the output's kind (DTensor or local), its
placement, every rank's local shape and xxh3-64 digest of its F32 bytes; and the collectives
CommDebugMode counted during the forward. tests/test_tp_fixtures.c compares reshard with them.

The values are core/tp/values.c's (small integers, biases multiples of the TP size), ported below.
"""
import argparse
import gzip
import json
import logging
import os
import subprocess
import sys
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
import xxhash
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed._local_tensor import LocalTensor, LocalTensorMode
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                               PrepareModuleOutput, RowwiseParallel,
                                               SequenceParallel, parallelize_module)
from torch.testing._internal.distributed.fake_pg import FakeStore

warnings.filterwarnings("ignore")
logging.getLogger("torch.distributed").setLevel(logging.ERROR)

M64 = (1 << 64) - 1


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def hash3(a, b, c):
    return mix64(a ^ mix64(b ^ mix64(c)))


def draw(seed, tensor, idx, lo, hi):
    return lo + hash3(seed, tensor, idx) % (hi - lo + 1)


T_INPUT, T_PARAM, T_PIECE = 0, 2, 1 << 20


def values(seed, tensor, n, lo, hi, unit=1):
    return [float(unit * draw(seed, tensor, i, lo, hi)) for i in range(n)]


def split(length, n, i):
    """SPEC 4 (torch.chunk): (offset, size) of piece i of length over n."""
    if length % n == 0:
        return i * (length // n), length // n
    c = -(-length // n)
    start = c * i
    if start >= length:
        return length, 0
    return start, min(length, start + c) - start


def placement(text):
    if text == "R":
        return Replicate()
    if text.startswith("P"):
        return Partial("sum")
    return Shard(int(text.strip("S()")))


class Norm(nn.Module):
    """The norm of SPEC 12: the affine part of RMSNorm / LayerNorm, y = x * weight."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim))

    def forward(self, x):
        return x * self.weight


class Chain(nn.Module):
    def __init__(self, mods):
        super().__init__()
        self.paths = []
        for m in mods:
            parent = self
            parts = m["path"].split(".")
            for p in parts[:-1]:
                if not hasattr(parent, p):
                    parent.add_module(p, nn.Module())
                parent = getattr(parent, p)
            if m["module"] == "linear":
                mod = nn.Linear(m["in"], m["out"], bias=m.get("bias", False))
            elif m["module"] == "embedding":
                mod = nn.Embedding(m["vocab"], m["dim"])
            else:
                mod = Norm(m["dim"])
            parent.add_module(parts[-1], mod)
            self.paths.append(m["path"])

    def forward(self, x):
        for p in self.paths:
            x = self.get_submodule(p)(x)
        return x


def style(m):
    s = m.get("style", "none")
    pl = lambda k, d: placement(m.get(k, d))  # noqa: E731
    ulo = m.get("use_local_output")
    if s == "colwise":
        return ColwiseParallel(input_layouts=pl("input_layouts", "R"), output_layouts=pl("output_layouts", "S(-1)"),
                               use_local_output=True if ulo is None else ulo)
    if s == "rowwise":
        return RowwiseParallel(input_layouts=pl("input_layouts", "S(-1)"), output_layouts=pl("output_layouts", "R"),
                               use_local_output=True if ulo is None else ulo)
    if s == "sequence":
        return SequenceParallel(sequence_dim=m.get("sequence_dim", 1), use_local_output=bool(ulo))
    if s == "prepare_input":
        return PrepareModuleInput(input_layouts=(pl("input_layouts", "R"),),
                                  desired_input_layouts=(pl("desired_input_layouts", "R"),),
                                  use_local_output=bool(ulo))
    if s == "prepare_output":
        return PrepareModuleOutput(output_layouts=(pl("output_layouts", "R"),),
                                   desired_output_layouts=(pl("desired_output_layouts", "R"),),
                                   use_local_output=True if ulo is None else ulo)
    return None


def fmt(p):
    if isinstance(p, Shard):
        return "S(%d)" % p.dim
    if isinstance(p, Replicate):
        return "R"
    if p.is_partial():
        return "P(%s)" % getattr(p, "reduce_op", "sum")
    return str(p)


def digest(t):
    # + 0.0 turns a -0.0 into +0.0: PyTorch's matmul starts its sum at the first product, so an
    # all-zero row times negative weights gives -0.0 where reshard's accumulator (from +0.0) gives
    # +0.0; reshard's outputs hold no -0.0 (docs/tp.md), so this compares values, not zero signs.
    t = t.detach().contiguous().to(torch.float32) + 0.0
    return "%016x" % xxhash.xxh3_64_intdigest(t.reshape(-1).numpy().tobytes())


def ints(shape):
    """A shape as plain ints. Under LocalTensorMode a size that differs between ranks is a SymInt
    (LocalIntNode) and int() raises: DTensor.from_local gave the ranks different global shapes."""
    return [int(d) for d in shape]


def wait(t):
    return t.wait() if isinstance(t, AsyncCollectiveTensor) else t


def per_rank(t, n):
    t = wait(t)
    if isinstance(t, LocalTensor):
        return [wait(t._local_tensors[r]) for r in range(n)]
    return [t] * n


COMM = {"all_reduce": "all_reduce", "all_gather_into_tensor": "all_gather",
        "reduce_scatter_tensor": "reduce_scatter", "all_to_all_single": "all_to_all",
        # DTensor's S(i) -> S(j) goes through its own op (one all_to_all on the mesh dim)
        "shard_dim_alltoall": "all_to_all"}


def make_input(case, n):
    m0 = case["plan"][0]
    B, S, seed, vmax = case["batch"], case["seq"], case["seed"], case.get("vmax", 2)
    if m0["module"] == "embedding":
        g = torch.tensor([draw(seed, T_INPUT, i, 0, m0["vocab"] - 1) for i in range(B * S)],
                         dtype=torch.int64).reshape(B, S)
    else:
        H = m0.get("in", m0.get("dim"))
        g = torch.tensor(values(seed, T_INPUT, B * S * H, -vmax, vmax)).reshape(B, S, H)
    lay = case.get("input_layout", "R")
    out = {}
    for r in range(n):
        if lay == "R":
            out[r] = g.clone()
        elif lay.startswith("P"):
            flat = g.reshape(-1)
            if r < n - 1:
                piece = [float(draw(seed, T_PIECE + r, i, -vmax, vmax)) for i in range(flat.numel())]
            else:
                piece = []
                for i in range(flat.numel()):
                    rest = torch.tensor(float(flat[i]), dtype=torch.float32)
                    for j in range(n - 1):
                        rest = rest - torch.tensor(float(draw(seed, T_PIECE + j, i, -vmax, vmax)))
                    piece.append(float(rest))
            out[r] = torch.tensor(piece, dtype=torch.float32).reshape(g.shape)
        else:
            d = int(lay.strip("S()"))
            d = d + g.dim() if d < 0 else d
            off, size = split(g.shape[d], n, r)
            out[r] = g.narrow(d, off, size).clone()
    return out


def set_params(model, case, n):
    seed, vmax = case["seed"], case.get("vmax", 2)
    with torch.no_grad():
        for i, m in enumerate(case["plan"]):
            mod = model.get_submodule(m["path"])
            w = mod.weight
            lo = 1 if m["module"] == "norm" else -vmax
            w.copy_(torch.tensor(values(seed, T_PARAM + 2 * i, w.numel(), lo, vmax)).reshape(w.shape))
            if m["module"] == "linear" and m.get("bias"):
                b = mod.bias
                b.copy_(torch.tensor(values(seed, T_PARAM + 2 * i + 1, b.numel(), -vmax, vmax, unit=n)))


def record(case):
    n = case["mesh"]["shape"][0]
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=0, world_size=n, store=FakeStore())
    mesh = DeviceMesh("cpu", torch.arange(n))
    rec = {"version": torch.__version__, "mechanism": "fake-pg+LocalTensorMode"}
    try:
        with LocalTensorMode(n):
            model = Chain(case["plan"])
            set_params(model, case, n)
            plan = {m["path"]: style(m) for m in case["plan"] if style(m) is not None}
            model = parallelize_module(model, mesh, plan)
            params = []
            for m in case["plan"]:
                mod = model.get_submodule(m["path"])
                ent = {"path": m["path"]}
                for key in ("weight", "bias"):
                    p = getattr(mod, key, None)
                    if p is None:
                        continue
                    if isinstance(p, DTensor):
                        ent[key] = fmt(p.placements[0])
                        ent[key + "_local_shapes"] = [ints(t.shape) for t in per_rank(p.to_local(), n)]
                    else:
                        ent[key] = "plain"
                params.append(ent)
            x = LocalTensor(make_input(case, n))
            with torch.no_grad(), CommDebugMode() as cm:
                y = model(x)
            y = wait(y)
            comm = {}
            for op, k in cm.get_comm_counts().items():
                name = COMM.get(str(op).split(".")[-1], str(op))
                comm[name] = comm.get(name, 0) + k
            if isinstance(y, DTensor):
                out = {"dtensor": True, "placement": fmt(y.placements[0]), "shape": ints(y.shape)}
                locs = per_rank(y.to_local(), n)
            else:
                out = {"dtensor": False}
                locs = per_rank(y, n)
            out["local_shapes"] = [ints(t.shape) for t in locs]
            out["digests"] = [digest(t) for t in locs]
            rec.update({"params": params, "output": out, "comm": comm})
    except Exception as e:  # recorded: what PyTorch refuses or cannot simulate
        msg = str(e).strip().splitlines()
        rec["error"] = "%s: %s" % (type(e).__name__, msg[0][:300] if msg else "")
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reshard", default="build/reshard")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--cases", type=int, default=600)
    ap.add_argument("--max-ranks", type=int, default=8)
    ap.add_argument("--in", dest="inp", help="cases as JSON lines instead of `reshard tp gen`")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.inp:
        lines = open(a.inp).read().splitlines()
    else:
        lines = subprocess.run([a.reshard, "tp", "gen", "--one-d", "--seed", str(a.seed), "--cases",
                                str(a.cases), "--max-ranks", str(a.max_ranks)],
                               check=True, capture_output=True, text=True).stdout.splitlines()
    opener = gzip.open if a.out.endswith(".gz") else open
    ok = err = 0
    with opener(a.out, "wt") as f:
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            case = json.loads(line)
            case["pytorch"] = record(case)
            if "error" in case["pytorch"]:
                err += 1
            else:
                ok += 1
            f.write(json.dumps(case, separators=(",", ":")) + "\n")
            if (i + 1) % 100 == 0:
                print("%d cases: %d recorded, %d raised" % (i + 1, ok, err), file=sys.stderr)
    print("recorded %d cases (%d raised in PyTorch) -> %s" % (ok + err, err, a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
