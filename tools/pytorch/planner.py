#!/usr/bin/env python3
"""planner.py - PyTorch's own redistribute planners behind reshard's planner protocol (role
"planner", op "plan"; docs/conformance.md, "Planner fuzzing"), so that `reshard fuzz-planner` can
check and score them:

    reshard fuzz-planner --enumeration pytorch \
        --planner exec:'/path/to/python tools/pytorch/planner.py --mode auto'

--mode auto    what redistribute uses: _gen_transform_infos_non_cached with PyTorch's own choice
               (the greedy planner for default shard orders, the graph planner otherwise)
--mode greedy  the greedy planner (declines non-default shard orders: PyTorch would not use it there)
--mode graph   the graph planner (DTensorRedistributePlanner, PyTorch's byte-aware costs); declines
               state spaces beyond 729 states, the bound reshard's generator keeps its own to

Every answer carries "t_ns": the planner call's time in ns, PyTorch's planner caches cleared before
it (as the recorder times t_greedy_ns/t_graph_ns); with --timing-calls K the least of K such calls,
and "t_first_ns" the first of them (one call: the single-call figure).
`reshard bench pytorch` reads it.

Each case's mesh is built on a fake process group of the mesh's size (rs_torch.Runner, as the
recorder does); the plan's transform infos are answered as steps {"mesh_dim","from","to"}. A
planner exception that says there is no path is answered as a decline ("unsupported"); any other
exception as a failure with its first line. Plans are taken before _optimize_transform_infos (which
merges steps over flattened meshes, something a per-mesh-dim step plan cannot express).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rs_model  # noqa: E402
import rs_torch  # noqa: E402  (imports torch)
from rs_torch import torch  # noqa: E402


def placement_text(p):
    if p.is_shard():
        return "S(%d)" % p.dim
    if p.is_partial():
        return "P(%s)" % p.reduce_op
    return "R"


def plan_case(runner, obj, mode, calls=1):
    case = rs_model.Case(obj)
    default = case.src.is_default_order() and case.dst.is_default_order()
    if mode == "greedy" and not default:
        return None, "greedy: non-default shard order (PyTorch plans those with the graph planner)"
    graph = {"auto": None, "greedy": False, "graph": True}[mode]
    if (graph or not default) and (case.ndim + 2) ** len(case.mesh_shape) > 729:
        return None, "graph: state space beyond 729 states"
    runner.ensure_world(case.nranks)
    mesh = runner.mesh(case.mesh_shape)
    src = runner.spec(mesh, case, case.src)
    dst = runner.spec(mesh, case, case.dst)
    infos, t_ns = runner.plan(src, dst, graph)
    t_first = t_ns  # the first call on this case: the single-call figure
    for _ in range(calls - 1):  # best of `calls`, each cold (runner.plan clears the planner caches)
        t_ns = min(t_ns, runner.plan(src, dst, graph)[1])
    steps = []
    for ti in infos:
        a, b = ti.src_dst_placements
        steps.append({"mesh_dim": int(ti.mesh_dim), "from": placement_text(a), "to": placement_text(b)})
    return (steps, t_ns, t_first), None


def answer(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("auto", "greedy", "graph"), default="auto")
    ap.add_argument("--timing-calls", type=int, default=1,
                    help="plan each case this many times (caches cleared before each); t_ns is the least")
    args = ap.parse_args()
    runner = rs_torch.Runner()
    name = "pytorch-%s-%s" % (torch.__version__, args.mode)
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        if op == "hello":
            answer({"ok": True, "version": 1, "name": name, "capabilities": ["plan"]})
        elif op == "bye":
            return
        elif op == "plan":
            rid = req["id"]
            try:
                plan, why = plan_case(runner, req["case"], args.mode, max(1, args.timing_calls))
                if plan is None:
                    answer({"id": rid, "ok": False, "unsupported": True, "message": why})
                else:
                    answer({"id": rid, "ok": True, "steps": plan[0], "t_ns": plan[1], "t_first_ns": plan[2]})
            except Exception as e:  # the planner's own failure: one line
                text = (str(e).splitlines() or [type(e).__name__])[0][:300]
                nopath = "No path found" in str(e) or "no path" in str(e).lower()
                answer({"id": rid, "ok": False, "unsupported": nopath,
                        "message": "%s: %s" % (type(e).__name__, text)})
        else:
            answer({"id": req.get("id"), "ok": False, "unsupported": True, "message": "op %s" % op})


if __name__ == "__main__":
    main()
