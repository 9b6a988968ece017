#!/usr/bin/env python3
"""record_order.py - records `order`-value cases (SPEC 8) from real PyTorch DTensor, so that the
bit-for-bit reduction order of SPEC 5 has an outside truth: PyTorch's LocalTensorMode folds a
reduction left over the group's ranks in rank order (torch/distributed/_local_tensor/_c10d.py,
`_local_reduce`: functools.reduce(op, tensors), avg as that sum divided once by the group size), and
Partial(sum)'s partition divides by the group size (placement_types.Partial._partition_value).

  python3 tools/pytorch/record_order.py --out fixtures/pytorch_order/

Cases: single-dim reductions (P -> R, P -> S), partitions (R -> P) and a few two-event
redistributions, on mesh dims of size 3..8 (two ranks add commutatively, so they cannot tell an
order), float dtypes (BF16, F16, F32, F64) for every op and integer min/max (full-range values).
The held test is tests/test_pytorch_order.c (ref, opt and the oracle against PyTorch's digests).
"""
import argparse
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rs_model  # noqa: E402
import record  # noqa: E402


def case_obj(name, mesh, shape, dtype, src, dst, seed):
    return {"name": name, "mesh": {"shape": mesh}, "tensor": {"shape": shape, "dtype": dtype},
            "src": {"placements": src}, "dst": {"placements": dst}, "seed": seed,
            "values": "order", "planner": "auto", "cost": "seed"}


def cases():
    out = []
    seed = 1000
    floats = ["F32", "BF16", "F16", "F64"]
    # 1-D meshes: P(op) -> R, P(op) -> S(0), R -> P(op)
    for n in (3, 4, 5, 8):
        for dt in floats:
            for op in ("sum", "avg", "min", "max"):
                for src, dst in (([f"P({op})"], ["R"]), ([f"P({op})"], ["S(0)"]), (["R"], [f"P({op})"])):
                    if src == ["R"] and op in ("min", "max", "avg") and dt != "F32":
                        continue  # the value is kept: one dtype is enough
                    seed += 1
                    name = "order_%d_%s_%s_to_%s" % (n, dt, src[0], dst[0])
                    out.append(case_obj(name, [n], [7, 3], dt, src, dst, seed))
        for dt, op in (("I32", "max"), ("U8", "max"), ("I8", "min"), ("I16", "min")):
            seed += 1
            out.append(case_obj("order_%d_%s_P(%s)_to_R" % (n, dt, op), [n], [11], dt, [f"P({op})"], ["R"], seed))
    # 2-D meshes: one dim changes (the other R or S(1)), then two events in PyTorch's greedy order
    for mesh in ([2, 3], [3, 4]):
        for dt in ("F32", "BF16", "F16"):
            for op in ("sum", "avg"):
                for src, dst in (([f"P({op})", "S(1)"], ["R", "S(1)"]),
                                 (["S(1)", f"P({op})"], ["S(1)", "S(0)"]),
                                 ([f"P({op})", f"P({op})"], ["R", "R"]),
                                 ([f"P({op})", "R"], ["R", f"P({op})"]),
                                 ([f"P({op})", f"P({op})"], ["S(0)", "R"])):
                    if "avg" == op and src == [f"P({op})", "R"]:
                        continue  # R -> P(avg) keeps the value; the sum case is the interesting one
                    seed += 1
                    name = "order_%dx%d_%s_%s_to_%s" % (mesh[0], mesh[1], dt, ",".join(src), ",".join(dst))
                    out.append(case_obj(name, mesh, [6, 5], dt, src, dst, seed))
    return out


ZERO_TIES = ("torch.maximum/minimum on CPU return the second operand when +0 and -0 meet in their "
              "vectorized loop (std::max/min, the first, in the scalar tail); SPEC 5's left fold keeps "
              "the accumulator unless the next value is strictly greater/smaller")


def zero_tie_matters(case):
    """True when a min/max fold of this 1-D case meets +0 against -0 and the two tie rules give
    different bits (the line is then PyTorch's answer, not SPEC's)."""
    import numpy as np
    ops = [p.op for p in case.src.p if p.kind == "P"]
    if len(case.mesh_shape) != 1 or not ops or ops[0] not in ("min", "max") or case.dtype not in ("F32", "F64", "F16", "BF16"):
        return False
    raw = [np.asarray(a).reshape(-1) for a in rs_model.make_source(case)]
    fdt = {"F64": np.float64, "F32": np.float32, "F16": np.float16}.get(case.dtype)
    if fdt is None:  # BF16: widen the bits to F32 (exact)
        vals = [(a.astype(np.uint32) << np.uint32(16)).view(np.float32) for a in raw]
    else:
        vals = [a.view(fdt) for a in raw]
    better = np.greater if ops[0] == "max" else np.less
    first, second = vals[0].copy(), vals[0].copy()
    for v in vals[1:]:
        first = np.where(better(v, first), v, first)                     # SPEC: strictly better
        second = np.where(better(second, v), second, v)                  # ties: the second operand
    return not np.array_equal(first.view(np.uint8), second.view(np.uint8))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import rs_torch
    os.makedirs(args.out, exist_ok=True)
    runner = rs_torch.Runner()
    objs = cases()
    lines = []
    for obj in sorted(objs, key=lambda o: rs_model.Case(o).nranks):
        case = rs_model.Case(obj)
        line = record.record_line(runner, case, rs_torch)
        if zero_tie_matters(case):
            line["pytorch_deviates"] = ZERO_TIES
        lines.append(line)
    path = os.path.join(args.out, "pytorch_order_000.jsonl.gz")
    with gzip.open(path, "wt", compresslevel=9) as f:
        for line in lines:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
    bad = sum(1 for ln in lines if "error" in ln["pytorch"] or ln.get("pytorch_deviates"))
    print("wrote %d lines to %s (%d with a PyTorch error or deviation)" % (len(lines), path, bad), file=sys.stderr)


if __name__ == "__main__":
    main()
