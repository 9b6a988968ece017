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
            elif m["module"] == "layernorm":
                mod = nn.LayerNorm(m["dim"], bias=m.get("bias", True))
            elif m["module"] == "rmsnorm":
                mod = nn.RMSNorm(m["dim"])
            else:
                mod = Norm(m["dim"])
            parent.add_module(parts[-1], mod)
            self.paths.append(m["path"])

    def forward(self, x):
        for p in self.paths:
            x = self.get_submodule(p)(x)
        return x


def style(m):
    """The style with only the arguments the case gives: an omitted one takes PyTorch's default
    (PrepareModuleInput(): None, it does nothing; PrepareModuleOutput has none and raises)."""
    s = m.get("style", "none")
    kw = {}
    for key in ("input_layouts", "desired_input_layouts", "output_layouts", "desired_output_layouts"):
        if key in m:
            kw[key] = placement(m[key])
            if s in ("prepare_input", "prepare_output"):
                kw[key] = (kw[key],)
    if "use_local_output" in m:
        kw["use_local_output"] = m["use_local_output"]
    if "sequence_dim" in m:
        kw["sequence_dim"] = m["sequence_dim"]
    ctor = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel, "sequence": SequenceParallel,
            "prepare_input": PrepareModuleInput, "prepare_output": PrepareModuleOutput}.get(s)
    if ctor is None:
        return None
    if s != "sequence":
        kw.pop("sequence_dim", None)
    if s in ("colwise", "rowwise"):
        kw.pop("desired_input_layouts", None)
        kw.pop("desired_output_layouts", None)
    if s == "sequence":
        kw = {k: v for k, v in kw.items() if k in ("sequence_dim", "use_local_output")}
    if s == "prepare_input":
        kw.pop("output_layouts", None)
        kw.pop("desired_output_layouts", None)
    if s == "prepare_output":
        kw.pop("input_layouts", None)
        kw.pop("desired_input_layouts", None)
    return ctor(**kw)


def fmt(p):
    if isinstance(p, Shard):
        return "S(%d)" % p.dim
    if isinstance(p, Replicate):
        return "R"
    if p.is_partial():
        return "P(%s)" % getattr(p, "reduce_op", "sum")
    return str(p)


DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def digest(t):
    # + 0.0 turns a -0.0 into +0.0: PyTorch's matmul starts its sum at the first product, so an
    # all-zero row times negative weights gives -0.0 where reshard's accumulator (from +0.0) gives
    # +0.0; reshard's outputs hold no -0.0 (docs/tp.md), so this compares values, not zero signs.
    # The bytes are the output's own dtype (BF16 / F16: two bytes per element, little-endian).
    t = t.detach().contiguous() + 0.0
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)
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


def mesh_coord(shape, r):
    return [r // shape[1], r % shape[1]] if len(shape) == 2 else [r]


def mesh_of(case):
    """(mesh shape, TP mesh dim, TP size, number of ranks)."""
    shape = case["mesh"]["shape"]
    tpd = case.get("tp_dim", 0)
    world = 1
    for s_ in shape:
        world *= s_
    return shape, tpd, shape[tpd], world


def make_input(case, n):
    """Every rank's local input: DP's piece of the batch (2-d meshes), then the TP layout of it
    (Partial pieces are drawn over the global flat index, as core/tp/values.c does)."""
    shape, tpd, ntp, world = mesh_of(case)
    one_d = dict(case)
    whole = make_input_1d(one_d, ntp)  # by TP coordinate: the TP layout of the global tensor
    if len(shape) == 1:
        return whole
    dp_split = case.get("dp_layout", "S0") in ("S0", "S(0)")
    out = {}
    for r in range(world):
        co = mesh_coord(shape, r)
        k, j = co[tpd], co[1 - tpd]
        out[r] = whole[k]
        if dp_split:
            lay = case.get("input_layout", "R")
            off, size = split(case["batch"], shape[1 - tpd], j)
            if lay.startswith("S") and int(lay.strip("S()")) == 0:  # DP's piece, split again by TP
                g = make_input_1d(dict(case, input_layout="R"), ntp)[0].narrow(0, off, size)
                o2, s2 = split(size, ntp, k)
                out[r] = g.narrow(0, o2, s2).clone()
            else:
                out[r] = out[r].narrow(0, off, size).clone()
    return out


def make_input_1d(case, n):
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
            lo = 1 if m["module"] in ("norm", "layernorm", "rmsnorm") else -vmax
            w.copy_(torch.tensor(values(seed, T_PARAM + 2 * i, w.numel(), lo, vmax)).reshape(w.shape))
            if m["module"] in ("linear", "layernorm") and m.get("bias", m["module"] == "layernorm"):
                b = mod.bias
                unit = n if m["module"] == "linear" else 1
                b.copy_(torch.tensor(values(seed, T_PARAM + 2 * i + 1, b.numel(), -vmax, vmax, unit=unit)))


def record(case):
    shape, tpd, ntp, n = mesh_of(case)
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=0, world_size=n, store=FakeStore())
    if len(shape) == 1:
        mesh = DeviceMesh("cpu", torch.arange(n))
    else:  # parallelize_module on the TP submesh of a 2-d DP x TP mesh, as users write it
        names = ("tp", "dp") if tpd == 0 else ("dp", "tp")
        mesh = DeviceMesh("cpu", torch.arange(n).reshape(shape), mesh_dim_names=names)["tp"]
    rec = {"version": torch.__version__, "mechanism": "fake-pg+LocalTensorMode"}
    try:
        with LocalTensorMode(n):
            model = Chain(case["plan"])
            set_params(model, case, ntp)
            dtype = DTYPES[case.get("dtype", "F32")]
            model = model.to(dtype)
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
            inp = make_input(case, n)
            if case["plan"][0]["module"] != "embedding":
                inp = {r: t.to(dtype) for r, t in inp.items()}
            x = LocalTensor(inp)
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
            if case["plan"][-1]["module"] in ("layernorm", "rmsnorm"):
                # not bit for bit (PyTorch's vectorized reduction order): the values, to compare to rounding
                # (7 significant digits: the test's tolerance is 1e-5 relative)
                out["values"] = [[float("%.7g" % v) for v in t.detach().float().reshape(-1).tolist()] for t in locs]
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
    ok = err = skipped = 0
    with opener(a.out, "wt") as f:
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            case = json.loads(line)
            shape = case["mesh"]["shape"]
            if len(shape) == 2 and case.get("dp_layout", "S(0)") in ("S0", "S(0)") and \
                    case["batch"] % shape[1 - case.get("tp_dim", 0)]:
                # LocalTensorMode cannot hold DP groups of different batch sizes (their DTensors'
                # global shapes differ): not recorded
                skipped += 1
                continue
            case["pytorch"] = record(case)
            if "error" in case["pytorch"]:
                err += 1
            else:
                ok += 1
            f.write(json.dumps(case, separators=(",", ":")) + "\n")
            if (i + 1) % 100 == 0:
                print("%d cases: %d recorded, %d raised" % (i + 1, ok, err), file=sys.stderr)
    print("recorded %d cases (%d raised in PyTorch; %d with an uneven DP batch not recorded) -> %s"
          % (ok + err, err, skipped, a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
