#!/usr/bin/env python3
"""gloo_check.py - re-run one case with real processes and the gloo backend (one process per
rank), to tell a PyTorch DTensor bug from an artefact of LocalTensorMode's simulated collectives.
Slow (it spawns one process per rank); used sparingly, on single cases.

  python3 tools/pytorch/gloo_check.py CASE.json          # a case, or a fixture line
  python3 tools/pytorch/gloo_check.py fixtures/pytorch/pytorch_seed7_001.jsonl.gz gen-7-1369
  python3 tools/pytorch/gloo_check.py --flatten CASE.json     # on a mesh with flattened sub-meshes
  python3 tools/pytorch/gloo_check.py --real-ranks CASE.json  # the case's own (permuted, sparse)
                             # rank list instead of arange(N), DeviceMesh(preserve_rank_order=True)
  python3 tools/pytorch/gloo_check.py --real-ranks-default CASE.json  # the same with DeviceMesh's
                             # default (sorted sub-groups: a permuted mesh loses its order)

Prints every rank's local shape and xxh3 (or the exception each rank raised) next to what the
recorded line holds, when the input is a fixture line.
"""
import gzip
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rs_model  # noqa: E402


PRESERVE = True


def worker(rank, n, obj, store_path, out_dir, flatten=False, real_ranks=False, preserve=True):
    global PRESERVE
    PRESERVE = preserve
    import torch
    import torch.distributed as dist
    import rs_torch
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor._redistribute import redistribute_local_tensor

    case = rs_model.Case(obj)
    dist.init_process_group("gloo", rank=rank, world_size=n, init_method="file://" + store_path)
    res = {"rank": rank}
    try:
        r = rs_torch.Runner()
        pos = rank
        if real_ranks:
            # the case's own rank list: world rank ranks[p] sits at mesh position p
            # preserve_rank_order: without it DeviceMesh builds its sub-groups with sorted ranks
            # (new_group's sort_ranks) and a permuted mesh stops following its coordinates
            mesh = DeviceMesh("cpu", torch.tensor(case.ranks).reshape(case.mesh_shape),
                              preserve_rank_order=PRESERVE)
            pos = case.ranks.index(rank) if rank in case.ranks else None
        elif flatten:
            r.world = n  # the gloo group is already up
            mesh = r.mesh(case.mesh_shape, True)
        else:
            mesh = DeviceMesh("cpu", torch.arange(n).reshape(case.mesh_shape))
        src_spec = r.spec(mesh, case, case.src)
        dst_spec = r.spec(mesh, case, case.dst)
        if pos is None:  # not in the mesh: holds nothing, takes part in nothing
            res["outside"] = True
            raise StopIteration
        local = rs_torch.to_torch(rs_model.make_source(case)[pos], case.dtype)
        graph = {"auto": None, "greedy": False, "graph": True}[case.planner]
        out = redistribute_local_tensor(local, src_spec, dst_spec, use_graph_based_transform=graph)
        res["local_shape"] = list(out.shape)
        res["xxh3"] = rs_torch.digest(out)
        if out.dtype != rs_torch.TORCH_DTYPES[case.dtype]:
            res["dtype"] = str(out.dtype)
    except StopIteration:
        pass
    except Exception as e:  # report, do not hang the others forever
        res["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump(res, f)
    try:
        dist.destroy_process_group()
    except Exception:
        pass


def load(argv):
    path = argv[1]
    if len(argv) > 2:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            for line in f:
                o = json.loads(line)
                if o.get("name") == argv[2]:
                    return o
        sys.exit("no case named %s in %s" % (argv[2], path))
    with open(path) as f:
        return json.load(f)


def run_gloo(obj, flatten=False, real_ranks=False, preserve=True):
    """Every mesh position's result dict (local_shape, xxh3[, dtype] or error)."""
    import torch.multiprocessing as mp
    case = rs_model.Case(obj)
    n = case.nranks
    world = max(case.ranks) + 1 if real_ranks else n
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        mp.spawn(worker, args=(world, obj, store, tmp, flatten, real_ranks, preserve), nprocs=world, join=True)
        got = [json.load(open(os.path.join(tmp, "%d.json" % r))) for r in range(world)]
    if real_ranks:
        got = [dict(got[case.ranks[p]], rank=p) for p in range(n)]
    return got


def main():
    flatten = "--flatten" in sys.argv
    real_ranks = "--real-ranks" in sys.argv or "--real-ranks-default" in sys.argv
    preserve = "--real-ranks-default" not in sys.argv
    argv = [a for a in sys.argv if a not in ("--flatten", "--real-ranks", "--real-ranks-default")]
    if len(argv) < 2:
        sys.exit(__doc__)
    obj = load(argv)
    case = rs_model.Case(obj)
    n = case.nranks
    got = run_gloo(obj, flatten, real_ranks, preserve)
    rec = (obj.get("pytorch") or obj.get("expected") or {}).get("ranks") or [{}] * n
    print("%s: mesh %s, %s %s, %s -> %s" % (case.name, case.mesh_shape, case.dtype, case.shape,
                                           case.src.text(), case.dst.text()))
    for g, r in zip(got, rec):
        print("  pos %2d  gloo %-40s recorded %s" % (
            g["rank"], g.get("error") or "%s %s%s" % (g.get("local_shape"), g.get("xxh3"),
                                                     " " + g["dtype"] if "dtype" in g else ""),
            "%s %s" % (r.get("local_shape"), r.get("xxh3")) if r else "-"))


if __name__ == "__main__":
    main()
