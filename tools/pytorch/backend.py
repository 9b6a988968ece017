#!/usr/bin/env python3
"""backend.py - live PyTorch as a `reshard conform` backend (the process protocol of
docs/conformance.md: JSON lines on stdin/stdout, version 1).

    reshard conform --backend exec:'python3 tools/pytorch/backend.py' --suite redistribute,tp,ckpt

Every rank runs in this one process, as in rs_torch.py: a "fake" process group of the mesh's size
gives the DeviceMesh, and torch.distributed._local_tensor.LocalTensorMode runs the collectives on
per-rank LocalTensors, so PyTorch's own code paths run end to end on CPU:

  redistribute  the case's source locals -> redistribute_local_tensor (DTensor's planner and
                collectives; the case's planner field picks greedy or graph as rs_torch.py does)
  tp            the case's module chain, parallelize_module with the styles it names (1-d TP meshes:
                parallelize_module takes the TP mesh), forward on the global input
  ckpt          torch.distributed.checkpoint (DCP) save of the state's DTensors and load into the
                other layout, no process group (every rank's shard saved as one process would:
                its local shard under its global offset)

A case PyTorch refuses (an exception inside torch) is answered ok:false with its message: a
failure of that case, which is what a conformance run should show. Options:
  --refusals-skip  answer such cases, and results in another dtype (PyTorch's true division of
                   integers), "unsupported" instead (skipped), so that a campaign's failures are
                   only wrong bytes or shapes and its shrunk failure is one of those
  --log FILE       append one JSON line per refused case ({"op", "message"}) to FILE, to count
                   PyTorch's refusals by kind
Stdout carries only protocol lines; torch's warnings go to stderr.
"""
import base64
import json
import math
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

_out = sys.stdout
sys.stdout = sys.stderr  # anything torch prints goes to stderr, never into the protocol

import numpy as np  # noqa: E402
import torch  # noqa: E402

import rs_model  # noqa: E402

try:
    import xxhash  # noqa: F401  (rs_torch's digests; the backend sends bytes, never digests)
except ImportError:
    import types
    sys.modules["xxhash"] = types.ModuleType("xxhash")
import rs_torch  # noqa: E402

RAW = {k: v[0] for k, v in rs_model.DTYPES.items()}


def send(obj):
    _out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    _out.flush()


def decode(t, dtype):
    """A protocol tensor -> torch tensor of the case's dtype (bit for bit)."""
    shape = [int(x) for x in t["shape"]]
    raw = np.frombuffer(base64.b64decode(t["data"]), dtype=RAW[dtype]).reshape(shape)
    return rs_torch.to_torch(raw, dtype)


def encode(t, rank, **extra):
    t = t.detach().contiguous()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    flat = torch.empty(t.numel(), dtype=t.dtype)
    flat.copy_(t.reshape(-1))
    data = flat.view(torch.uint8).numpy().tobytes() if t.numel() else b""
    d = {"rank": rank, "shape": [int(x) for x in t.shape], "data": base64.b64encode(data).decode()}
    d.update(extra)
    return d


RUNNER = rs_torch.Runner()


# ---------------------------------------------------------------- redistribute

def op_redistribute(req):
    case = rs_model.Case(req["case"])
    n = case.nranks
    RUNNER.ensure_world(n)
    mesh = RUNNER.mesh(case.mesh_shape)
    src_spec = RUNNER.spec(mesh, case, case.src)
    dst_spec = RUNNER.spec(mesh, case, case.dst)
    locs = [decode(t, case.dtype) for t in req["locals"]]
    if len(locs) != n:
        return {"ok": False, "message": "%d locals for %d mesh ranks" % (len(locs), n)}
    graph = {"auto": None, "greedy": False, "graph": True}[case.planner]
    out = RUNNER.redistribute(n, locs, src_spec, dst_spec, graph)
    want = rs_torch.TORCH_DTYPES[case.dtype]
    changed = sorted({str(t.dtype) for t in out if t.dtype != want})
    if changed:
        # PyTorch's true division of integers (R -> P(sum) partition, P(avg)): its answer is not in
        # the case's dtype, so it cannot be the contract's bytes; said as such, not sent as garbage
        raise Deviates("PyTorch changed the dtype: %s -> %s" % (case.dtype, ", ".join(changed)))
    return {"ok": True, "locals": [encode(out[p], case.ranks[p]) for p in range(n)]}


# ---------------------------------------------------------------- tp

def op_tp(req):
    import record_tp as rt
    from torch.distributed._local_tensor import LocalTensor, LocalTensorMode
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import parallelize_module

    case = req["case"]
    shape = case["mesh"]["shape"]
    if len(shape) != 1:
        return {"ok": False, "unsupported": True,
                "message": "parallelize_module takes the 1-d TP mesh; this case has a %d-d mesh" % len(shape)}
    n = shape[0]
    ranks = case["mesh"].get("ranks") or list(range(n))
    inputs = {t.get("name"): t for t in req["inputs"]}
    RUNNER.ensure_world(n)
    mesh = DeviceMesh("cpu", torch.arange(n))
    with LocalTensorMode(n):
        model = rt.Chain(case["plan"])
        with torch.no_grad():
            for m in case["plan"]:
                mod = model.get_submodule(m["path"])
                for key in ("weight", "bias"):
                    p = getattr(mod, key, None)
                    t = inputs.get("%s.%s" % (m["path"], key))
                    if p is not None and t is not None:
                        p.copy_(decode(t, "F32").reshape(p.shape))
        plan = {m["path"]: rt.style(m) for m in case["plan"] if rt.style(m) is not None}
        model = parallelize_module(model, mesh, plan)
        x = inputs["input"]
        g = decode(x, "I64" if case["plan"][0]["module"] == "embedding" else "F32")
        lay = case.get("input_layout", "R")
        per = {}
        for r in range(n):
            if lay == "R":
                per[r] = g.clone()
            elif lay.startswith("P"):
                # Partial(sum) pieces: rank 0 holds the tensor, the others zeros (the sum is exact)
                per[r] = g.clone() if r == 0 else torch.zeros_like(g)
            else:
                d = int(lay.strip("S()"))
                d = d + g.dim() if d < 0 else d
                off, size = rt.split(g.shape[d], n, r)
                per[r] = g.narrow(d, off, size).clone()
        with torch.no_grad():
            y = rt.wait(model(LocalTensor(per)))
        locs = rt.per_rank(y.to_local() if isinstance(y, DTensor) else y, n)
        return {"ok": True, "locals": [encode(locs[p].to(torch.float32) + 0.0, ranks[p]) for p in range(n)]}


# ---------------------------------------------------------------- ckpt

def _state_layouts(state):
    """key -> (dtype, global shape, mesh shape, placements, ranks) from a state spec (docs/ckpt.md);
    raises Unsupported for what DCP has no counterpart of here (Megatron's factories: glu, flatten,
    prepend; Partial layouts; non-tensor objects)."""
    if state.get("objects"):
        raise Unsupported("non-tensor objects (Megatron ShardedObject) have no DCP counterpart here")
    out = {}
    for t in state["tensors"]:
        for k in ("factory", "flatten", "prepend"):
            if t.get(k):
                raise Unsupported("%s: Megatron's %s has no DCP counterpart" % (t["key"], k))
        mesh = t.get("mesh") or [int(state.get("world", 1))]
        mshape = mesh["shape"] if isinstance(mesh, dict) else list(mesh)
        ranks = (mesh.get("ranks") if isinstance(mesh, dict) else None) or t.get("ranks") or \
            list(range(math.prod(mshape)))
        pl = t.get("placements") or ["R"] * len(mshape)
        if isinstance(pl, str):
            pl = [x.strip() for x in pl.split(",")]
        pl = ["S(%s)" % p[1:] if p[:1] == "S" and not p.startswith("S(") else p for p in pl]
        if any(p.startswith("P") for p in pl):
            raise Unsupported("%s: Partial layouts are not checkpointed by DCP" % t["key"])
        order = t.get("order") or []
        if isinstance(order, str):  # "0:1,0;2:3": tensor dim, then the mesh dims that split it in order
            order = [{"tensor_dim": int(e.split(":")[0]), "mesh_dims": [int(m) for m in e.split(":")[1].split(",")]}
                     for e in order.split(";") if e.strip()]
        out[t["key"]] = (t["dtype"], [int(x) for x in t["shape"]], mshape, (pl, order), ranks)
    return out


class Unsupported(Exception):
    pass


class Deviates(Exception):
    """PyTorch answered, but in a form the contract does not allow (another dtype): a failure of the
    case, or with --refusals-skip a skip, like a refusal."""


def _boxes(dtype, shape, mshape, placements, ranks):
    """Each rank's (rank, start, size) for a layout (SPEC 4; placements, shard order)."""
    pl, order = placements
    sh = {"placements": pl, "shard_order": order}
    case = rs_model.Case({"mesh": {"shape": mshape, "ranks": ranks}, "tensor": {"shape": shape, "dtype": dtype},
                          "src": sh, "dst": sh})
    res = []
    for pos, coord in enumerate(case.coords()):
        start, size = rs_model.box(case, case.src, coord)
        res.append((ranks[pos], list(start), list(size)))
    return res


def op_ckpt_save(req):
    import torch.distributed.checkpoint as dcp

    lay = _state_layouts(req["state"])
    sd = {}
    for t in req["tensors"]:
        key, rank = t["key"], t["rank"]
        dtype, shape, mshape, pl, ranks = lay[key]
        box = {r: (s, z) for r, s, z in _boxes(dtype, shape, mshape, pl, ranks)}[rank]
        local = decode(t, dtype)
        sd.setdefault(key, []).append((box[0], local))
    # DCP without a process group: one "process" whose state holds every shard of every tensor as
    # an object it writes; the global tensor per key is assembled from the disjoint boxes first,
    # since DCP needs one tensor (or one DTensor per process) per key.
    full = {}
    for key, parts in sd.items():
        dtype, shape, _, _, _ = lay[key]
        g = torch.zeros(shape, dtype=rs_torch.TORCH_DTYPES[dtype])
        for start, local in parts:
            if local.numel():
                idx = tuple(slice(s, s + z) for s, z in zip(start, local.shape))
                g[idx] = local
        full[key] = g
    dcp.save(full, checkpoint_id=req["dir"], no_dist=True)
    return {"ok": True}


def op_ckpt_load(req):
    import torch.distributed.checkpoint as dcp

    lay = _state_layouts(req["state"])
    full = {k: torch.empty(v[1], dtype=rs_torch.TORCH_DTYPES[v[0]]) for k, v in lay.items()}
    dcp.load(full, checkpoint_id=req["dir"], no_dist=True)
    out = []
    for key, (dtype, shape, mshape, pl, ranks) in lay.items():
        for rank, start, size in _boxes(dtype, shape, mshape, pl, ranks):
            idx = tuple(slice(s, s + z) for s, z in zip(start, size))
            out.append(encode(full[key][idx], rank, key=key))
    return {"ok": True, "tensors": out}


OPS = {"redistribute": op_redistribute, "tp": op_tp, "ckpt_save": op_ckpt_save, "ckpt_load": op_ckpt_load}


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--refusals-skip", action="store_true")
    ap.add_argument("--log")
    args = ap.parse_args()
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        op = req.get("op")
        if op == "hello":
            send({"ok": True, "version": 1, "name": "pytorch %s (DTensor, LocalTensorMode)" % torch.__version__,
                  "capabilities": ["redistribute", "tp", "ckpt"], "ckpt_format": "own"})
            continue
        if op == "bye":
            break
        ans = {"id": req.get("id")}
        fn = OPS.get(op)
        if fn is None:
            ans.update({"ok": False, "unsupported": True, "message": "op %r not implemented" % op})
        else:
            try:
                ans.update(fn(req))
            except Unsupported as e:
                ans.update({"ok": False, "unsupported": True, "message": str(e)})
            except Exception as e:  # PyTorch refused or failed this case: a failure of the case
                first = (str(e).strip().splitlines() or [""])[0][:300]
                if isinstance(e, Deviates):
                    msg = first
                else:
                    traceback.print_exc(file=sys.stderr)
                    msg = "%s: %s" % (type(e).__name__, first)
                ans.update({"ok": False, "message": msg})
                if args.refusals_skip:
                    ans.update({"unsupported": True, "message": "not held (--refusals-skip): " + msg})
                if args.log:
                    with open(args.log, "a") as f:
                        f.write(json.dumps({"op": op, "message": msg}) + "\n")
        ans.setdefault("id", req.get("id"))
        send(ans)
    # bye (or the end of stdin): leave without the interpreter's teardown of torch, which takes
    # about 1 s on CPU; a --jobs worker waits for its child to end before the campaign ends
    _out.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
