#!/usr/bin/env python3
"""gloo_check_tp.py - re-runs recorded TP cases with real processes (one per rank, gloo backend) to
tell what PyTorch does from an artefact of record_tp.py's simulation (fake process group +
LocalTensorMode). Slow (spawns one process per rank per case); used on samples.

  python3 tools/pytorch/gloo_check_tp.py fixtures/tp/pytorch_tp_seed11.jsonl.gz --sample 20 --min-tp 2

For each case it prints whether every rank's parameter placements and local shapes, output kind,
placement, local shape and xxh3, and the collectives CommDebugMode counted on rank 0 are the
recorded ones (cases the simulation recorded as refused are skipped). gloo has no all_to_all: an
S(i) -> S(j) step is an all_gather there (DTensor's CPU fallback), and is compared as one.
"""
import argparse
import gzip
import json
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def worker(rank, n, case, store, out_dir):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import parallelize_module

    import record_tp as R

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=n, init_method="file://" + store)
    res = {"rank": rank}
    try:
        mesh = DeviceMesh("cpu", torch.arange(n))
        model = R.Chain(case["plan"])
        R.set_params(model, case, n)
        dtype = R.DTYPES[case.get("dtype", "F32")]
        model = model.to(dtype)
        plan = {m["path"]: R.style(m) for m in case["plan"] if R.style(m) is not None}
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
                    ent[key] = R.fmt(p.placements[0])
                    ent[key + "_local_shape"] = R.ints(p.to_local().shape)
                else:
                    ent[key] = "plain"
            params.append(ent)
        x = R.make_input(case, n)[rank]
        if case["plan"][0]["module"] != "embedding":
            x = x.to(dtype)
        with torch.no_grad(), CommDebugMode() as cm:
            y = R.wait(model(x))
        comm = {}
        for op, k in cm.get_comm_counts().items():
            name = R.COMM.get(str(op).split(".")[-1], str(op))
            comm[name] = comm.get(name, 0) + k
        if isinstance(y, DTensor):
            out = {"dtensor": True, "placement": R.fmt(y.placements[0]), "shape": R.ints(y.shape)}
            loc = R.wait(y.to_local())
        else:
            out = {"dtensor": False}
            loc = y
        out["local_shape"] = R.ints(loc.shape)
        out["digest"] = R.digest(loc)
        res.update({"params": params, "output": out, "comm": comm})
    except Exception as e:  # noqa: BLE001
        res["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
    with open(os.path.join(out_dir, "r%d.json" % rank), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()


def run(case):
    import torch.multiprocessing as mp
    n = case["mesh"]["shape"][0]
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")
        mp.start_processes(worker, args=(n, case, store, d), nprocs=n, join=True, start_method="spawn")
        return [json.load(open(os.path.join(d, "r%d.json" % r))) for r in range(n)]


def compare(case, ranks):
    rec = case["pytorch"]
    probs = []
    for r, res in enumerate(ranks):
        if "error" in res:
            probs.append("rank %d raised %s" % (r, res["error"]))
            continue
        for pm, gm in zip(rec["params"], res["params"]):
            for key in ("weight", "bias"):
                if key not in pm:
                    continue
                if pm[key] != gm[key]:
                    probs.append("rank %d %s.%s %s, recorded %s" % (r, pm["path"], key, gm[key], pm[key]))
                elif pm[key] != "plain" and pm[key + "_local_shapes"][r] != gm[key + "_local_shape"]:
                    probs.append("rank %d %s.%s local shape" % (r, pm["path"], key))
        o, g = rec["output"], res["output"]
        if o["dtensor"] != g["dtensor"] or (o["dtensor"] and (o["placement"], o["shape"]) != (g["placement"], g["shape"])):
            probs.append("rank %d output kind/placement/shape" % r)
        if o["local_shapes"][r] != g["local_shape"] or o["digests"][r] != g["digest"]:
            probs.append("rank %d local output %s %s, recorded %s %s" % (r, g["local_shape"], g["digest"],
                                                                        o["local_shapes"][r], o["digests"][r]))
    # gloo has no all_to_all: on a CPU mesh outside LocalTensorMode, DTensor's shard_dim_alltoall
    # (S(i) -> S(j)) falls back to all_gather + chunk (torch/distributed/tensor/_collective_utils.py);
    # NCCL and LocalTensorMode issue the all_to_all that the record holds
    want = dict(rec["comm"])
    if "all_to_all" in want:
        want["all_gather"] = want.get("all_gather", 0) + want.pop("all_to_all")
    if ranks and "comm" in ranks[0] and ranks[0]["comm"] != want:
        probs.append("collectives %s, recorded %s" % (ranks[0]["comm"], rec["comm"]))
    return probs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fixture")
    ap.add_argument("--sample", type=int, default=10)
    ap.add_argument("--min-tp", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--name", help="only the case of this name")
    a = ap.parse_args()
    opener = gzip.open if a.fixture.endswith(".gz") else open
    cases = [json.loads(l) for l in opener(a.fixture, "rt") if l.strip()]
    # 1-d meshes, outputs compared by digest (a real norm's values are compared to rounding by
    # the C test; here they would differ only where the kernels' reduction order does)
    ran = [c for c in cases if "error" not in c["pytorch"] and len(c["mesh"]["shape"]) == 1
           and c["mesh"]["shape"][0] >= a.min_tp and "values" not in c["pytorch"]["output"]
           and (a.name is None or c["name"] == a.name)]
    random.Random(a.seed).shuffle(ran)
    same = 0
    for c in ran[:a.sample]:
        probs = compare(c, run(c))
        same += not probs
        print("%-20s TP %d: %s" % (c["name"], c["mesh"]["shape"][0], "same as recorded" if not probs else "; ".join(probs[:4])))
    print("gloo: %d of %d cases as recorded under LocalTensorMode" % (same, min(a.sample, len(ran))))


if __name__ == "__main__":
    main()
