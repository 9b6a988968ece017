#!/usr/bin/env python3
"""ckpt.py - live Megatron-Core dist_checkpointing as a `reshard conform` ckpt backend (the process
protocol of docs/conformance.md: JSON lines on stdin/stdout, version 1).

    PY=/path/to/python-with-torch-and-megatron-core
    reshard conform --suite ckpt --fixtures none --timeout 120 \
        --backend exec:"$PY tools/megatron/ckpt.py"

ckpt_save: every (key, rank) shard of the state spec becomes, on that rank's gloo process, a
Megatron `ShardedTensor` (global shape, the box's global offset, `axis_fragmentations` when the box
is on a regular grid and None otherwise, replica id 0 for the first rank in mesh order holding that
box and 1, 2, ... for its replicas); a tensor of 2 or more rows whose key hashes to 1 in 3 is
instead a `ShardedTensorFactory` that stores rows [0, H) and [H, G) under KEY_w and KEY_v and
concatenates them back on load. Every rank also holds one `ShardedObject` (the state's keys,
dtypes and shapes, replicated) and a common entry (the same description, in common.pt). The world
of N ranks runs `dist_checkpointing.save` (default torch_dist strategy) on N gloo processes.
ckpt_load: the other layout's state dict on M processes, `dist_checkpointing.load` (default strict
mode: the modes that list the checkpoint's keys fail on torch 2.15, tools/megatron/repro/); the object and the common entry must come back equal to the load's own description;
every rank's bytes are answered for the harness to compare with the oracle.

The processes (tools/megatron/mcore_ckpt_pool.py) are forked from this one once it has imported
torch and Megatron, and reused: a case of another world size rebuilds the default process group,
not the processes. Whether a key's boxes get `axis_fragmentations` is decided over all ranks: only
when every box has the same shape on one regular grid (Megatron's validation wants equal local
shapes for such a key); else every box of the key is irregular (None). A timeout or a dead process tears
the pool down (the case fails); the next case starts a fresh one.

What Megatron cannot express is answered "unsupported" with the reason (see DECLINES below) and
counted as skipped by the harness. Options:
  --bug rename_key|wrong_slice|factory_merge|drop_shard   plant a bug (mcore_ckpt_ops.py says what each does)
  --no-factory      plain ShardedTensors only (no ShardedTensorFactory)
  --timeout SEC     per-operation timeout inside the pool (default 240; a loaded machine is slow)
  --log FILE        one JSON line per declined or failed case ({"op", "kind", "message"})
Stdout carries only protocol lines.
"""
import argparse
import base64
import json
import math
import os
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "pytorch"))

_out = sys.stdout  # the protocol stream (main() moves it off fd 1)

import mcore_ckpt_pool  # noqa: E402
import rs_model  # noqa: E402  (boxes: SPEC 4, torch.chunk splits in shard order)

ESIZE = {k: v[1] for k, v in rs_model.DTYPES.items()}


class Unsupported(Exception):
    pass


def send(obj):
    _out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    _out.flush()


def layouts(state):
    """[(key, dtype, shape, mesh shape, (placements, order), ranks)] of a state spec (docs/ckpt.md)."""
    out = []
    for t in state["tensors"]:
        for k in ("factory", "flatten", "prepend"):
            if t.get(k):  # the conform suite strips them; a hand-made request may not
                raise Unsupported("%s: the spec's %s is not expressed by this backend" % (t["key"], k))
        mesh = t.get("mesh") or [int(state.get("world", 1))]
        mshape = mesh["shape"] if isinstance(mesh, dict) else list(mesh)
        ranks = (mesh.get("ranks") if isinstance(mesh, dict) else None) or t.get("ranks") or \
            list(range(math.prod(mshape)))
        pl = t.get("placements") or ["R"] * len(mshape)
        if isinstance(pl, str):
            pl = [x.strip() for x in pl.split(",")]
        pl = ["S(%s)" % p[1:] if p[:1] == "S" and not p.startswith("S(") else p for p in pl]
        if any(p.startswith("P") for p in pl):
            raise Unsupported("%s: a Partial layout has no ShardedTensor form" % t["key"])
        order = t.get("order") or []
        if isinstance(order, str):
            order = [{"tensor_dim": int(e.split(":")[0]), "mesh_dims": [int(m) for m in e.split(":")[1].split(",")]}
                     for e in order.split(";") if e.strip()]
        out.append((t["key"], t["dtype"], [int(x) for x in t["shape"]], mshape, (pl, order), ranks))
    return out


def boxes(dtype, shape, mshape, placements, ranks):
    """[(world rank, start, size, replica id)] in mesh order; replica 0 = first rank holding the box."""
    pl, order = placements
    sh = {"placements": pl, "shard_order": order}
    case = rs_model.Case({"mesh": {"shape": mshape, "ranks": ranks}, "tensor": {"shape": shape, "dtype": dtype},
                          "src": sh, "dst": sh})
    seen, res = {}, []
    for pos, coord in enumerate(case.coords()):
        start, size = rs_model.box(case, case.src, coord)
        k = (tuple(start), tuple(size))
        rep = seen.get(k, 0)
        seen[k] = rep + 1
        res.append((ranks[pos], list(start), list(size), rep))
    return res


def factory_row(key, shape, args):
    """H for the split factory, or None (plain ShardedTensor)."""
    if args.no_factory or len(shape) < 1 or shape[0] < 2 or 0 in shape:
        return None
    if zlib.crc32(key.encode()) % 3 != 0:
        return None
    return shape[0] // 2


def _on_grid(gshape, pieces):
    """Whether the pieces (start, size) lie on one regular grid: every piece of the same size, which
    divides the global shape, at a multiple of it. Megatron's validation of a key with
    axis_fragmentations wants equal local shapes on every rank: pieces that each divide the shape
    but differ in size (torch.chunk's [2, 1, 1] of 4 rows) are irregular."""
    if len({tuple(z) for _, z in pieces}) > 1:
        return False
    for start, size in pieces:
        for g, s, z in zip(gshape, start, size):
            if z == 0 or g % z or s % z:
                return False
    return True


def regular_kind(shape, bx, h):
    """Whether each stored key's boxes all sit on a regular grid (Megatron's validation wants one
    kind, axis_fragmentations or None, per key): [plain] or [KEY_w, KEY_v] for the split factory."""
    if h is None:
        return [_on_grid(shape, bx)]
    w, v = [], []
    for s, z in bx:
        if 0 in z:
            continue
        nw = max(0, min(s[0] + z[0], h) - s[0])
        if nw:
            w.append((s, [nw] + z[1:]))
        if z[0] - nw:
            v.append(([s[0] + nw - h] + s[1:], [z[0] - nw] + z[1:]))
    return [_on_grid([h] + shape[1:], w), _on_grid([shape[0] - h] + shape[1:], v)]


def description(lay):
    return sorted([k, dt, list(sh)] for k, dt, sh, _, _, _ in lay)


def plan(req, args):
    """Per world rank: the items it saves or loads; plus the world size."""
    state = req["state"]
    world = int(state.get("world", 1))
    lay = layouts(state)
    per = [[] for _ in range(world)]
    for key, dtype, shape, mshape, pl, ranks in lay:
        if dtype not in ESIZE:
            raise Unsupported("%s: dtype %s has no torch dtype here" % (key, dtype))
        if any(r >= world for r in ranks):
            raise Unsupported("%s: a mesh rank outside the world" % key)
        h = factory_row(key, shape, args)
        bx = boxes(dtype, shape, mshape, pl, ranks)
        reg = regular_kind(shape, [(s, z) for _, s, z, _ in bx], h)
        for rank, start, size, rep in bx:
            per[rank].append({"key": key, "dtype": dtype, "gshape": shape, "start": start, "size": size,
                              "replica": rep, "factory": h, "reg": reg})
    if args.bug == "drop_shard":  # the first key with two or more main boxes loses its first one
        for key, *_ in lay:
            mains = [it for r in range(world) for it in per[r]
                     if it["key"] == key and it["replica"] == 0 and 0 not in it["size"]]
            if len(mains) >= 2:
                mains[0]["drop"] = True
                break
    return world, per, description(lay)


POOL = None


def run(world, fn, args_per_rank):
    ans = POOL.call(world, "mcore_ckpt_ops", fn, args_per_rank)
    errs = [(r, a) for r, a in enumerate(ans) if a[0] != "ok"]
    if errs:  # the rank that raised, not one the pool stopped waiting for after it
        r, a = ([e for e in errs if not str(e[1][1]).startswith("not waited for")] or errs)[0]
        raise RuntimeError("rank %d: %s" % (r, a[1]))
    return [a[1] for a in ans]


def op_ckpt_save(req, args):
    world, per, desc = plan(req, args)
    data = {}
    for t in req["tensors"]:
        data[(t["key"], int(t["rank"]))] = base64.b64decode(t["data"])
    for r in range(world):
        for it in per[r]:
            raw = data.get((it["key"], r))
            if raw is None:
                raise RuntimeError("no shard of %s for rank %d in the request" % (it["key"], r))
            need = math.prod(it["size"]) * ESIZE[it["dtype"]]
            if len(raw) != need:
                raise RuntimeError("%s rank %d: %d bytes, the box needs %d" % (it["key"], r, len(raw), need))
            it["data"] = raw
    run(world, "save", [(per[r], req["dir"], desc, args.bug) for r in range(world)])
    return {"ok": True}


def op_ckpt_load(req, args):
    world, per, desc = plan(req, args)
    got = run(world, "load", [(per[r], req["dir"], desc, args.bug) for r in range(world)])
    out = []
    for r in range(world):
        for it, raw in zip(per[r], got[r]):
            out.append({"key": it["key"], "rank": r, "shape": it["size"], "data": base64.b64encode(raw).decode()})
    return {"ok": True, "tensors": out}


OPS = {"ckpt_save": op_ckpt_save, "ckpt_load": op_ckpt_load}


def main():
    global POOL, _out
    # the protocol goes to a copy of fd 1; fd 1 itself then points at stderr, so that nothing torch,
    # Megatron or a forked worker prints (from Python or C) can reach the protocol stream
    _out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    ap = argparse.ArgumentParser()
    ap.add_argument("--bug", choices=["rename_key", "wrong_slice", "factory_merge", "drop_shard"])
    ap.add_argument("--no-factory", action="store_true")
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--log")
    args = ap.parse_args()
    import importlib.metadata as md
    versions = "megatron-core %s, torch %s" % (md.version("megatron-core"), md.version("torch"))
    POOL = mcore_ckpt_pool.Pool(timeout=args.timeout, group_timeout=int(args.timeout))
    try:
        for line in sys.stdin:
            try:
                req = json.loads(line)
            except ValueError:
                continue
            op = req.get("op")
            if op == "hello":
                send({"ok": True, "version": 1,
                      "name": "megatron-core dist_checkpointing (%s, gloo)%s" % (
                          versions, " bug=" + args.bug if args.bug else ""),
                      "capabilities": ["ckpt"], "ckpt_format": "own"})
                continue
            if op == "bye":
                break
            ans = {"id": req.get("id")}
            fn = OPS.get(op)
            kind = None
            if fn is None:
                ans.update({"ok": False, "unsupported": True, "message": "op %r not implemented" % op})
            else:
                try:
                    ans.update(fn(req, args))
                except Unsupported as e:
                    kind = "declined"
                    ans.update({"ok": False, "unsupported": True, "message": str(e)})
                except mcore_ckpt_pool.PoolError as e:
                    kind = "pool"
                    ans.update({"ok": False, "message": "gloo processes: %s" % e})
                except Exception as e:
                    kind = "failed"
                    ans.update({"ok": False, "message": (str(e).strip().splitlines() or [""])[0][:600]})
            if kind and args.log:
                with open(args.log, "a") as f:
                    f.write(json.dumps({"op": op, "kind": kind, "message": ans["message"]}) + "\n")
            ans["id"] = req.get("id")
            send(ans)
    finally:
        POOL.close()


if __name__ == "__main__":
    main()
