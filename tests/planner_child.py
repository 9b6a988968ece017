#!/usr/bin/env python3
"""planner_child.py - an example planner in Python behind the process protocol (role "planner",
docs/conformance.md "Planner fuzzing"): `reshard fuzz-planner --planner exec:'python3 planner_child.py'`.

Its planner is the plainest legal one: undo every shard (innermost split first), all-reduce every
Partial the destination does not keep, then split and partition toward the destination in its shard
order. It never beats reshard's planners and must never be wrong. With --bug it drops the last step
of every plan of two or more steps (the planted bug fuzz_planner.sh expects to be caught and shrunk).
With --reshard PATH it also answers "p2p_plan", by running `PATH p2p plan MODEL --planner ref --json`
on the model it is sent (the protocol's P2P side end to end); with --bug too, it sends the first
transfer twice. Standard library only.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

BUG = "--bug" in sys.argv[1:]
RESHARD = sys.argv[sys.argv.index("--reshard") + 1] if "--reshard" in sys.argv[1:] else None
PL = re.compile(r"^(R|S\((-?\d+)\)|P\((sum|avg|min|max)\))$")


def parse(text, ndim):
    m = PL.match(text)
    if not m:
        raise ValueError("placement %r" % text)
    if m.group(2) is not None:
        d = int(m.group(2))
        return ("S", d + ndim if d < 0 else d)
    if m.group(3):
        return ("P", m.group(3))
    return ("R", None)


def text(p):
    return "S(%d)" % p[1] if p[0] == "S" else "P(%s)" % p[1] if p[0] == "P" else "R"


def layout(obj, ndim):
    pl = [parse(t, ndim) for t in obj["placements"]]
    order = {}
    for m, p in enumerate(pl):  # default: ascending mesh dims
        if p[0] == "S":
            order.setdefault(p[1], []).append(m)
    for e in obj.get("shard_order") or []:
        d = e["tensor_dim"] + (ndim if e["tensor_dim"] < 0 else 0)
        order[d] = list(e["mesh_dims"])
    return pl, order


class NoPath(Exception):
    pass


def plan(case):
    ndim = len(case["tensor"]["shape"])
    cur, order = layout(case["src"], ndim)
    dst, dorder = layout(case["dst"], ndim)
    steps = []

    def step(m, to):
        steps.append({"mesh_dim": m, "from": text(cur[m]), "to": text(to)})
        cur[m] = to

    # 1. undo shards, always the innermost split of a tensor dim (the only legal S -> R)
    for d in sorted(order):
        while order[d]:
            step(order[d].pop(), ("R", None))
    # 2. all-reduce the Partials the destination does not keep as they are
    for m, p in enumerate(cur):
        if p[0] == "P" and dst[m] != p:
            step(m, ("R", None))
    # 3. split toward the destination in its shard order, then partition
    for d in sorted(dorder):
        for m in dorder[d]:
            step(m, ("S", d))
    for m, p in enumerate(dst):
        if p[0] == "P" and cur[m] != p:
            if p[1] != "sum" and case.get("enumeration", "seed") == "seed":
                raise NoPath("no path to %s on mesh dim %d (only P(sum) is made from R)" % (text(p), m))
            step(m, p)
    if BUG and len(steps) >= 2:
        steps.pop()
    return steps


def p2p_plan(model):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(model, f)
    try:
        out = subprocess.run([RESHARD, "p2p", "plan", f.name, "--planner", "ref", "--json"],
                             capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "p2p plan failed")
    transfers = json.loads(out.stdout)["transfers"]
    if BUG and transfers:
        transfers.append(dict(transfers[0], task_id=transfers[0]["task_id"] + 1000000))
    return transfers


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        if op == "hello":
            answer({"ok": True, "version": 1, "name": "python-plain" + ("-bug" if BUG else ""),
                    "capabilities": ["plan", "p2p_plan"] if RESHARD else ["plan"]})
        elif op == "bye":
            return
        elif op == "plan":
            try:
                answer({"id": req["id"], "ok": True, "steps": plan(req["case"])})
            except NoPath as e:
                answer({"id": req["id"], "ok": False, "unsupported": True, "message": str(e)})
        elif op == "p2p_plan" and RESHARD:
            try:
                answer({"id": req["id"], "ok": True, "transfers": p2p_plan(req["model"])})
            except Exception as e:
                answer({"id": req["id"], "ok": False, "message": str(e)[:300]})
        else:
            answer({"id": req.get("id"), "ok": False, "unsupported": True, "message": "op %s" % op})


if __name__ == "__main__":
    main()
