"""curated.py - the hand-made fixture cases (fixtures/curated/*.json), recorded with real PyTorch.

Each case gets "expected": per-rank coord, local_shape, global_offset and xxh3 digest, the plan
trace ref must produce and its collective counts, all taken from PyTorch where PyTorch is right.
Cases where PyTorch is wrong or deviates from SPEC carry "known_bug" / "pytorch_deviates" and the
C test holds ref to the oracle there instead.

"source" names where a case comes from: PyTorch's own test suite (test_redistribute.py,
test_utils.py: facts only - shapes, placements, expected counts and traces) or our own edge cases.
"""
import json
import os
import zlib

import rs_model

CASES = []


def pl(text):
    return [t.strip() for t in text.split(",")] if isinstance(text, str) else list(text)


def order_json(order):
    if not order:
        return None
    return [{"tensor_dim": d, "mesh_dims": list(m)} for d, m in sorted(order.items())]


def case(name, mesh, shape, dtype, src, dst, src_order=None, dst_order=None, ranks=None,
         planner="auto", cost="seed", values=None, source="reshard edge case", expect_comms=None,
         expect_trace=None, flatten_bug=False, note=None, enumeration="seed"):
    o = {"name": name,
         "mesh": {"shape": list(mesh)},
         "tensor": {"shape": list(shape), "dtype": dtype},
         "src": {"placements": pl(src)},
         "dst": {"placements": pl(dst)},
         "seed": zlib.crc32(name.encode()),
         "planner": planner, "cost": cost}
    if enumeration != "seed":
        o["enumeration"] = enumeration
    if ranks is not None:
        o["mesh"]["ranks"] = list(ranks)
    if src_order:
        o["src"]["shard_order"] = order_json(src_order)
    if dst_order:
        o["dst"]["shard_order"] = order_json(dst_order)
    if values:
        o["values"] = values
    meta = {"source": source}
    if expect_comms is not None:
        meta["pytorch_test_comms"] = expect_comms
    if expect_trace is not None:
        meta["pytorch_test_trace"] = expect_trace
    meta["flatten_bug"] = flatten_bug
    meta["note"] = note
    CASES.append((o, meta))


TR = "PyTorch test/distributed/tensor/test_redistribute.py"
TU = "PyTorch test/distributed/tensor/test_utils.py"

# ---- zero-size shards: 1-D mesh of 4, a 2x8 tensor (two ranks hold nothing)
for s, d in [("S0", "R"), ("R", "S0"), ("S0", "S1"), ("S1", "S0"), ("P(sum)", "S0")]:
    case("zero_size_shards_1d4_2x8_%s_to_%s" % (s.replace("(", "").replace(")", ""), d), [4], [2, 8], "F32",
         s, d, source=TR + " (zero-size shards)")

# ---- uneven sharding on a 2x2 mesh (distribute, then full_tensor)
for shape in ([10, 5], [9, 5], [3, 5], [1, 3]):
    for src in ("S0,S0", "S0,S1"):
        case("uneven_2x2_%dx%d_%s_to_RR" % (shape[0], shape[1], src.replace(",", "")), [2, 2], shape,
             "F32", src, "R,R", source=TR + " test_redistribute_uneven_sharding")
    case("uneven_2x2_%dx%d_R_to_S0S0" % tuple(shape), [2, 2], shape, "F32", "R,R", "S0,S0",
         source=TR + " test_redistribute_uneven_sharding")

# ---- shard dim change, 1-D mesh of 4: one all-to-all each
for shape in ([8, 8], [8, 5], [5, 8], [5, 5], [8, 8, 8]):
    for s, d in (("S0", "S1"), ("S1", "S0")):
        if shape == [8, 8] and s == "S1":
            continue
        case("shard_dim_change_1d4_%s_%s_to_%s" % ("x".join(map(str, shape)), s, d), [4], shape, "F32",
             s, d, source=TR + " test_redistribute_shard_dim_change", expect_comms=1)

# ---- shard dim change, 2x2 mesh
pairs_2d = [("S0,S1", "S0,S0", 1), ("S0,S1", "S1,S0", 2), ("S0,S0", "S1,S1", 2)]
for shape in ([8, 8], [5, 5], [8, 5]):
    for s, d, k in pairs_2d:
        case("shard_dim_change_2x2_%s_%s_to_%s" % ("x".join(map(str, shape)), s.replace(",", ""),
                                                    d.replace(",", "")), [2, 2], shape, "F32", s, d,
             source=TR + " test_redistribute_shard_dim_change", expect_comms=k)
for s, d, k in pairs_2d + [("S0,S2", "S1,S0", 2), ("S1,S1", "S1,S2", 1)]:
    case("shard_dim_change_2x2_8x8x8_%s_to_%s" % (s.replace(",", ""), d.replace(",", "")), [2, 2],
         [8, 8, 8], "F32", s, d, source=TR + " test_redistribute_shard_dim_change", expect_comms=k)

# ---- shard dim change, 2x2x2 mesh, (8,8,8)
for s, d, k in [("S0,S0,S0", "S1,S1,S1", 3), ("S0,S1,S0", "S1,S0,S0", 3), ("S0,S1,S2", "S2,S1,S0", 2),
                ("S1,S0,S0", "R,S0,S0", 1), ("S1,R,S0", "R,S0,S0", 2), ("S0,S0,S1", "S0,S1,S2", 2)]:
    case("shard_dim_change_2x2x2_%s_to_%s" % (s.replace(",", ""), d.replace(",", "")), [2, 2, 2],
         [8, 8, 8], "F32", s, d, source=TR + " test_redistribute_shard_dim_multi_dim_mesh",
         expect_comms=k)

# ---- compute_local_shape_and_global_offset: mesh 4x2, S0,S0
for shape in ([18, 2], [13, 2]):
    case("local_shape_offset_4x2_%dx%d_S0S0" % tuple(shape), [4, 2], shape, "F32", "R,R", "S0,S0",
         source=TU + " compute_local_shape_and_global_offset")
    case("local_shape_offset_4x2_%dx%d_S0S0_to_RR" % tuple(shape), [4, 2], shape, "F32", "S0,S0", "R,R",
         source=TU + " compute_local_shape_and_global_offset")

# ---- one-chunk mesh (4,1): nothing moves on the size-1 dim
for s in ("S1", "R"):
    for d in ("S0", "S1", "R"):
        case("one_chunk_mesh_4x1_S0%s_to_S0%s" % (s, d), [4, 1], [16, 8], "F32", "S0," + s, "S0," + d,
             source=TR + " test_one_chunk_mesh", expect_comms=0)
case("one_chunk_mesh_4x1_S0P_to_S0R", [4, 1], [16, 8], "F32", "S0,P(sum)", "S0,R",
     source=TR + " test_one_chunk_mesh", expect_comms=0)

# ---- ordered (non-default shard order) redistribute on 2x2x2, (8,8,8): PyTorch's expected traces
# (its graph planner, pytorch cost model)
case("ordered_2x2x2_S0[012]_to_RS0[01]", [2, 2, 2], [8, 8, 8], "F32", "S0,S0,S0", "R,S0,S0",
     src_order={0: [0, 1, 2]}, dst_order={0: [1, 2]}, cost="pytorch", planner="graph",
     source=TR + " test_ordered_redistribute",
     expect_trace="S(0)[0]S(0)[1]S(0)[2]->S(0)[0]S(0)[1]R->S(0)RR->RRR->RS(0)R->RS(0)[0]S(0)[1]")
case("ordered_2x2x2_S0[102]_to_RS0[01]", [2, 2, 2], [8, 8, 8], "F32", "S0,S0,S0", "R,S0,S0",
     src_order={0: [1, 0, 2]}, dst_order={0: [1, 2]}, cost="pytorch",
     source=TR + " test_ordered_redistribute",
     expect_trace="S(0)[1]S(0)[0]S(0)[2]->S(0)[1]S(0)[0]R->RS(0)R->RS(0)[0]S(0)[1]")
case("ordered_2x2x2_S0[102]_to_S0S0R", [2, 2, 2], [8, 8, 8], "F32", "S0,S0,S0", "S0,S0,R",
     src_order={0: [1, 0, 2]}, dst_order={0: [0, 1]}, cost="pytorch",
     source=TR + " test_ordered_redistribute",
     expect_trace="S(0)[1]S(0)[0]S(0)[2]->S(0)[1]S(0)[0]R->RS(0)R->RRR->S(0)RR->S(0)[0]S(0)[1]R")
case("ordered_2x2x2_S0S0R_to_RS1S0", [2, 2, 2], [8, 8, 8], "F32", "S0,S0,R", "R,S1,S0",
     src_order={0: [0, 1]}, dst_order={0: [2], 1: [1]}, cost="pytorch", planner="graph",
     source=TR + " test_ordered_redistribute",
     expect_trace="S(0)[0]S(0)[1]R->S(0)RR->S(0)S(1)R->RS(1)R->RS(1)S(0)")
case("min_cost_2x2x2_S0S0S0_to_S1S1S1_graph", [2, 2, 2], [8, 8, 8], "F32", "S0,S0,S0", "S1,S1,S1",
     planner="graph", cost="pytorch", source=TR + " test_force_min_cost_redistribution_plan",
     expect_trace="S(0)[0]S(0)[1]S(0)[2]->S(0)[0]S(0)[1]R->S(0)RR->RRR->S(1)RR->S(1)[0]S(1)[1]R->S(1)[0]S(1)[1]S(1)[2]")
case("min_cost_2x2x2_S0S0S0_to_S1S1S1_greedy", [2, 2, 2], [8, 8, 8], "F32", "S0,S0,S0", "S1,S1,S1",
     planner="greedy", source=TR + " test_force_min_cost_redistribution_plan",
     expect_trace="S(0)[0]S(0)[1]S(0)[2]->S(0)[0]S(0)[1]R->S(0)RR->S(1)RR->S(1)[0]S(1)[1]R->S(1)[0]S(1)[1]S(1)[2]")
case("shard_order_same_as_strided_4x2_8x4", [4, 2], [8, 4], "F32", "R,R", "S0,S0", dst_order={0: [1, 0]},
     source=TR + " test_shard_order_same_data_as_strided_shard")
# SPEC 7's example of the two cost models choosing different paths
for cost in ("seed", "pytorch"):
    case("spec7_2x2x2_S0[102]_to_RS0[01]_%s" % cost, [2, 2, 2], [8, 8, 8], "F32", "S0,S0,S0", "R,S0,S0",
         src_order={0: [1, 0, 2]}, dst_order={0: [1, 2]}, cost=cost, source="SPEC 7 example")

# ---- our edge cases: 0-d tensors
case("scalar_1d4_R_to_R", [4], [], "F32", "R", "R")
case("scalar_1d4_P_to_R_f32", [4], [], "F32", "P(sum)", "R")
case("scalar_1d4_R_to_P_f64", [4], [], "F64", "R", "P(sum)")
case("scalar_2x2_PavgR_to_RR_bf16", [2, 2], [], "BF16", "P(avg),R", "R,R")
case("scalar_2x2_PmaxPmax_to_RR_i32", [2, 2], [], "I32", "P(max),P(max)", "R,R")
# zero-size dims
case("zero_dim_0x5_S0_to_R", [4], [0, 5], "F32", "S0", "R")
case("zero_dim_4x0_S1S0_to_RS1", [2, 2], [4, 0], "F32", "S1,S0", "R,S1")
case("zero_dim_0x3_P_to_S0", [2, 2], [0, 3], "F32", "P(sum),R", "S0,R")
# meshes with size-1 dims
case("size1_mesh_1x4_S0S1_to_RS0", [1, 4], [6, 5], "F32", "S0,S1", "R,S0")
case("size1_mesh_2x1x2_S0PS1_to_RRR", [2, 1, 2], [5, 3], "F32", "S0,P(sum),S1", "R,R,R")
case("size1_mesh_2x1x2_S0S0S0_order", [2, 1, 2], [7, 3], "F32", "S0,S0,S0", "R,R,S0",
     src_order={0: [2, 1, 0]})
# permuted and sparse rank lists
GLOO_RANKS = ("same digests from gloo processes on DeviceMesh(ranks, preserve_rank_order=True) "
              "(tools/pytorch/gloo_check.py --real-ranks); DeviceMesh's default sorts sub-group "
              "ranks and a permuted mesh then stops following its coordinates (pytorch/pytorch "
              "PR #193224)")
case("permuted_ranks_2x2_S0S1_to_S1S0", [2, 2], [5, 7], "F32", "S0,S1", "S1,S0", ranks=[3, 1, 2, 0],
     note=GLOO_RANKS)
case("permuted_ranks_4_S0_to_S1", [4], [6, 6], "I16", "S0", "S1", ranks=[2, 0, 3, 1])
case("sparse_ranks_2x2_P_to_S0", [2, 2], [6, 3], "F32", "P(sum),S1", "S0,R", ranks=[7, 2, 9, 4],
     note=GLOO_RANKS)
case("sparse_ranks_2x3_S0S1_to_RR", [2, 3], [5, 7], "BF16", "S0,S1", "R,R", ranks=[10, 11, 5, 6, 0, 3])
# Partial sources: every op, several dtypes
for op, dt in [("sum", "F32"), ("sum", "BF16"), ("sum", "I32"), ("avg", "F32"), ("avg", "F16"),
               ("min", "F32"), ("min", "I8"), ("max", "U8"), ("max", "BF16"), ("sum", "F64"),
               ("avg", "F64"), ("sum", "I64")]:
    case("partial_%s_%s_2x2_P%sS1_to_S0R" % (op, dt.lower(), op), [2, 2], [7, 5], dt,
         "P(%s),S1" % op, "S0,R")
for op in ("sum", "avg", "min", "max"):
    case("partial_%s_2x2x2_PSP_to_RRS0" % op, [2, 2, 2], [9, 4], "F32",
         "P(%s),S0,P(%s)" % (op, op), "R,R,S0")
case("partial_sum_avg_mix_2x2_to_RR", [2, 2], [4, 6], "F32", "P(sum),P(avg)", "R,R")
case("partial_keep_2x2_PS0_to_PS1", [2, 2], [6, 6], "F32", "P(sum),S0", "P(sum),S1")
case("replicate_to_partial_sum_2x2_f32", [2, 2], [4, 4], "F32", "R,S0", "P(sum),S0")
case("replicate_to_partial_max_1d4_i32", [4], [5], "I32", "R", "P(max)")
case("replicate_to_partial_sum_1d4_i32", [4], [6], "I32", "R", "P(sum)")
# non-default shard orders
case("order_2x2_S0[10]_to_RS0", [2, 2], [10, 3], "F32", "S0,S0", "R,S0", src_order={0: [1, 0]})
case("order_2x2_RS0_to_S0[10]", [2, 2], [10, 3], "F32", "R,S0", "S0,S0", dst_order={0: [1, 0]})
case("order_3x2_S0[10]_to_S1S1", [3, 2], [7, 5], "F32", "S0,S0", "S1,S1", src_order={0: [1, 0]})
case("order_2x2x2_S1[201]_to_S0[012]", [2, 2, 2], [5, 9], "F32", "S1,S1,S1", "S0,S0,S0",
     src_order={1: [2, 0, 1]}, dst_order={0: [0, 1, 2]})
case("order_2x3x2_S0[21]S1_to_RRS0", [2, 3, 2], [13, 4], "F32", "S1,S0,S0", "R,R,S0",
     src_order={0: [2, 1], 1: [0]})
case("order_uneven_strided_3x2_7_R_to_S0[10]", [3, 2], [7], "F32", "R,R", "S0,S0", dst_order={0: [1, 0]})
case("order_uneven_strided_2x2x2_5_R_to_S0[120]", [2, 2, 2], [5], "F32", "R,R,R", "S0,S0,S0",
     dst_order={0: [1, 2, 0]})
# copy-only dtypes keep every bit
case("copy_f8e4m3_2x2_S1S0_to_S0S1", [2, 2], [6, 4], "F8_E4M3", "S1,S0", "S0,S1")
case("copy_f8e5m2_1d4_S0_to_R", [4], [9, 3], "F8_E5M2", "S0", "R")
case("copy_bool_2x2_S0S1_to_RS0", [2, 2], [5, 5], "BOOL", "S0,S1", "R,S0")
case("copy_f64_nan_bits_3_S0_to_S1", [3], [7, 8], "F64", "S0", "S1")
case("copy_4d_2x2x2_S3S2S0_to_S0S1S3", [2, 2, 2], [3, 4, 5, 6], "F16", "S3,S2,S0", "S0,S1,S3")
# a 16-rank mesh
case("mesh_4x4_S0S1_to_S1S0_uneven", [4, 4], [13, 9], "F32", "S0,S1", "S1,S0")
case("mesh_2x2x4_PS0S1_to_S1RS0", [2, 2, 4], [11, 10], "F32", "P(sum),S0,S1", "S1,R,S0")

# ---- PyTorch bug: flattened all-gather over uneven nested shards (pytorch/pytorch PR #194457)
case("flatten_bug_2x2_5x3_S0S0_to_RR", [2, 2], [5, 3], "F32", "S0,S0", "R,R", flatten_bug=True,
     source="pytorch/pytorch PR #194457 (flattened all_gather, uneven nested shards)")
case("flatten_bug_2x2x2_9x2_S0S0S0_to_RRR", [2, 2, 2], [9, 2], "F32", "S0,S0,S0", "R,R,R", flatten_bug=True,
     source="pytorch/pytorch PR #194457 (flattened all_gather, uneven nested shards)")

# ---- the pytorch enumeration (--enumeration pytorch): paths only current PyTorch's planner has
PE = "current PyTorch's planner (pytorch enumeration)"
case("enum_pytorch_2x1x4_S0RR_to_S0PavgS0[20]", [2, 1, 4], [3], "F32", "S0,R,R", "S0,P(avg),S0",
     dst_order={0: [2, 0]}, cost="pytorch", enumeration="pytorch", source=PE,
     note="no path in the seed enumeration: P(avg) is made from Replicate only by current PyTorch")
case("enum_pytorch_2x2_RS0_to_PmaxS1_graph", [2, 2], [6, 4], "F32", "R,S0", "P(max),S1", planner="graph",
     cost="pytorch", enumeration="pytorch", source=PE)
case("enum_pytorch_zero_fill_3x2x2_RS0R_to_PsumS1S1", [3, 2, 2], [14, 37], "I16", "R,S0,R", "P(sum),S1,S1",
     src_order={0: [1]}, dst_order={1: [2, 1]}, cost="pytorch", enumeration="pytorch", source=PE,
     note="PyTorch's graph planner reaches Partial(sum) from Shard by zero-fill")
case("enum_pytorch_zero_fill_3x2x2_S0RS0_to_S1PsumS1", [3, 2, 2], [2, 10], "F32", "S0,R,S0", "S1,P(sum),S1",
     src_order={0: [2, 0]}, dst_order={1: [0, 2]}, cost="pytorch", enumeration="pytorch", source=PE,
     note="PyTorch's graph planner reaches Partial(sum) from Shard by zero-fill")
case("enum_pytorch_greedy_zero_fill_1d2_S0_to_Psum", [2], [4], "F32", "S0", "P(sum)", cost="pytorch",
     enumeration="pytorch", source=PE, note="current PyTorch's greedy planner zero-fills Shard -> Partial(sum) too")
case("enum_pytorch_greedy_zero_fill_2x2_S0S1_to_PsumS1", [2, 2], [4, 4], "F32", "S0,S1", "P(sum),S1",
     cost="pytorch", enumeration="pytorch", source=PE)
case("enum_pytorch_1d4_S0_to_S0_greedy", [4], [9], "F32", "S0", "S0", cost="pytorch", enumeration="pytorch",
     source=PE, note="current PyTorch's greedy planner emits no step for an equal 1-d layout")


def _trace_for_ref(case, rec):
    """The trace ref's plan must equal: PyTorch's greedy trace for default orders (ref's AUTO
    runs the greedy planner there), its graph trace with the case's cost model otherwise."""
    graph = case.planner == "graph" or (case.planner == "auto" and not (
        case.src.is_default_order() and case.dst.is_default_order()))
    if case.enumeration == "pytorch":  # PyTorch's planners as they are
        return rec.get("trace_graph") if graph else rec.get("trace_greedy")
    if not graph:
        return rec.get("trace_greedy")
    return rec.get("trace_graph_pytorch_cost") if case.cost == "pytorch" else rec.get("trace_graph_seed")


def record_all(runner, rs_torch, outdir):
    import record
    n = 0
    summary = []
    for obj, meta in CASES:
        c = rs_model.Case(obj)
        line = record.record_line(runner, c, rs_torch)
        rec = line["pytorch"]
        out = dict(obj)
        out["source"] = meta["source"]
        exp = {"ranks": [], "trace": None, "collectives": None}
        deviates = [line["pytorch_deviates"]] if line.get("pytorch_deviates") else []
        for r in rec.get("ranks", []):
            e = {k: r[k] for k in ("rank", "coord", "local_shape", "global_offset")}
            e["xxh3"] = r["xxh3"]
            exp["ranks"].append(e)
        trace = _trace_for_ref(c, rec)
        exp["trace"] = trace
        if trace == rec.get("trace"):
            exp["collectives"] = rec.get("collectives")
        plan_notes = [meta["note"]] if meta.get("note") else []
        if meta.get("pytorch_test_trace") and meta["pytorch_test_trace"] != rec.get("trace"):
            plan_notes.append("PyTorch's own test expects trace %s" % meta["pytorch_test_trace"])
        if meta.get("pytorch_test_comms") is not None:
            exp["pytorch_test_comms"] = meta["pytorch_test_comms"]
            got = sum(v for k, v in (rec.get("collectives") or {}).items() if k not in ("chunk", "partition"))
            if got != meta["pytorch_test_comms"]:
                plan_notes.append("collectives %d, PyTorch's own test expects %d" % (got, meta["pytorch_test_comms"]))
        if meta["flatten_bug"]:
            fl = rs_torch.flatten_variant(runner, c, rec)
            if fl is not None:
                out["pytorch_flattened"] = fl
                out["known_bug"] = record.FLATTEN_BUG
        if line.get("notes") or plan_notes:
            out["notes"] = line.get("notes", []) + plan_notes
        deviates = sorted(set(deviates))
        if deviates:
            out["pytorch_deviates"] = "; ".join(deviates)
            for e in exp["ranks"]:
                e.pop("xxh3", None)
        out["expected"] = exp
        out["pytorch"] = rec
        path = os.path.join(outdir, obj["name"].replace("[", "").replace("]", "") + ".json")
        with open(path, "w") as f:
            json.dump(out, f, indent=1, sort_keys=False)
            f.write("\n")
        n += 1
        summary.append((obj["name"], out.get("known_bug"), out.get("pytorch_deviates"), out.get("notes")))
    for name, bug, dev, notes in summary:
        if bug or dev or notes:
            print("%s: known_bug=%s deviates=%s notes=%s" % (name, bug, dev, notes))
    print("wrote %d curated cases to %s" % (n, outdir))
