"""rs_torch.py - runs one reshard case through real PyTorch DTensor on CPU, every rank in one process.

Mechanism (see README.md): a "fake" process group of world size N (the mesh's rank count) gives
DeviceMesh objects and the planners; torch.distributed._local_tensor.LocalTensorMode simulates
the N ranks in one process and implements the collectives (all_gather, all_reduce,
reduce_scatter, all_to_all) on per-rank LocalTensors, so redistribute_local_tensor runs PyTorch's
own code path end to end. LocalTensorMode derives each process group's sibling groups from a
regular layout of world ranks, which only holds for a mesh laid out in rank order, so the torch
mesh is always arange(N); a case's permuted or sparse rank list is applied afterwards (rank at
mesh position p = ranks[p]): DTensor's result for a rank depends only on its mesh coordinate.
"""
import itertools
import logging
import math
import time
import warnings

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed._local_tensor import LocalTensor, LocalTensorMode
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry, TensorMeta
from torch.distributed.tensor._redistribute import (
    DTensorRedistributePlanner,
    _gen_transform_infos,
    _gen_transform_infos_non_cached,
    _optimize_transform_infos,
    clear_redistribute_planner_cache,
    get_redistribute_planner,
    redistribute_local_tensor,
)
from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset
from torch.distributed.tensor.placement_types import _StridedShard
from torch.testing._internal.distributed.fake_pg import FakeStore

import rs_model

warnings.filterwarnings("ignore")
logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)
logging.getLogger("torch.distributed").setLevel(logging.ERROR)

TORCH_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "I64": torch.int64,
    "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
}

# The reference planner's constant weights (SPEC 7 "seed" cost model), by transition kind.
SEED_COST = {"all_to_all": 1, "all_gather": 2, "all_reduce": 4, "reduce_scatter": 2,
             "chunk": 0, "partition": 0, "shard_to_partial": 0}


def step_kind(cur, tgt):
    """The collective one placement change performs, as redistribute_local_tensor runs it."""
    if cur == tgt:
        return None
    if tgt.is_replicate():
        return "all_reduce" if cur.is_partial() else "all_gather"
    if tgt.is_shard():
        if cur.is_partial():
            return "reduce_scatter"
        if cur.is_replicate():
            return "chunk"
        return "all_to_all" if cur.dim != tgt.dim else None
    if tgt.is_partial():
        if cur.is_replicate():
            return "partition"
        if cur.is_shard():
            return "shard_to_partial"
    return None


def torch_placement(p):
    if p.kind == "S":
        return Shard(p.dim)
    if p.kind == "P":
        return Partial(p.op)
    return Replicate()


def shard_order(sh):
    return tuple(ShardOrderEntry(tensor_dim=d, mesh_dims=tuple(sh.order[d]))
                 for d in sorted(sh.order) if sh.order[d])


def digest(t):
    import xxhash  # here, not at the top: the planner protocol (planner.py) needs no digests

    n = t.numel()
    if n == 0:
        return "%016x" % xxhash.xxh3_64_intdigest(b"")
    flat = torch.empty(n, dtype=t.dtype)
    flat.copy_(t.detach().reshape(-1))  # row-major bytes, whatever t's strides
    b = flat.view(torch.uint8).numpy().tobytes()
    return "%016x" % xxhash.xxh3_64_intdigest(b)


def to_torch(raw, dtype):
    # np.ascontiguousarray would turn a 0-d array into shape (1,)
    t = torch.from_numpy(np.array(raw, copy=True, order="C"))
    if dtype == "BOOL":
        return t.to(torch.bool)
    if dtype in ("I8",):
        return t.view(torch.int8)
    if dtype == "U8":
        return t
    return t.view(TORCH_DTYPES[dtype])


class Runner:
    def __init__(self):
        self.world = None
        self.meshes = {}

    def ensure_world(self, n):
        if self.world == n:
            return
        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group("fake", rank=0, world_size=n, store=FakeStore())
        self.world = n
        self.meshes = {}

    def mesh(self, shape, flatten=False):
        key = (tuple(shape), flatten)
        if key not in self.meshes:
            n = math.prod(shape)
            names = tuple("d%d" % i for i in range(len(shape)))
            m = DeviceMesh("cpu", torch.arange(n).reshape(shape), mesh_dim_names=names)
            if flatten:
                # Every sub-set of 2+ mesh dims gets a flattened mesh, so that PyTorch's
                # flattened-collective optimization (_optimize_transform_infos) can apply.
                for k in range(2, len(shape) + 1):
                    for dims in itertools.combinations(range(len(shape)), k):
                        sub = m[tuple(names[d] for d in dims)] if len(dims) < len(shape) else m
                        try:
                            sub._flatten("_".join(names[d] for d in dims))
                        except Exception:
                            pass
            self.meshes[key] = m
        return self.meshes[key]

    # ------------------------------------------------------------ specs
    def spec(self, mesh, case, sh, dtype=None):
        t = TORCH_DTYPES[case.dtype] if dtype is None else dtype
        stride = [1] * case.ndim
        for d in range(case.ndim - 2, -1, -1):
            stride[d] = stride[d + 1] * case.shape[d + 1]
        meta = TensorMeta(torch.Size(case.shape), tuple(stride), t)
        return DTensorSpec(mesh, tuple(torch_placement(p) for p in sh.p), tensor_meta=meta,
                           shard_order=shard_order(sh))

    # ------------------------------------------------------------ planning
    def plan(self, src_spec, dst_spec, graph):
        clear_redistribute_planner_cache()
        _gen_transform_infos.cache_clear()
        t0 = time.perf_counter_ns()
        infos = _gen_transform_infos_non_cached(src_spec, dst_spec, graph)
        t1 = time.perf_counter_ns()
        return infos, t1 - t0

    def plan_seed_enum(self, mesh, src_spec, dst_spec, seed_cost=True):
        """The reference graph planner, run by PyTorch's own DTensorRedistributePlanner with its
        transition enumeration cut back to the reference (case 6 makes Partial(sum) only, always; no
        explicit Shard -> Partial(sum) edge) and, with seed_cost, its cost callback replaced by the
        reference constant weights. These are the like-for-like traces for ref's graph planner with
        the `seed` and `pytorch` cost models (SPEC 7: the models differ in cost only)."""
        clear_redistribute_planner_cache()
        planner = get_redistribute_planner(mesh, src_spec.tensor_meta)

        def seed_weights(a, b):
            for cur, tgt in zip(a.placements, b.placements):
                if cur != tgt:
                    return float(SEED_COST[step_kind(cur, tgt)])
            return 0.0

        class SumOnly(set):
            def add(self, _op):
                set.add(self, "sum")

        if seed_cost:
            planner.cost_function = seed_weights
        planner.partial_reduce_ops_in_target = SumOnly({"sum"})
        planner._get_shard_to_partial_target_states = lambda cur, dst: {}
        try:
            return planner.generate_graph_based_transform_infos(src_spec, dst_spec, src_spec.shape)
        finally:
            clear_redistribute_planner_cache()

    @staticmethod
    def trace(mesh, infos, spec):
        """stringify_transform_infos; PyTorch's own bookkeeping can reject a plan its greedy
        planner made (a Shard -> Replicate step on a mesh dim that is not the last in the shard
        order): then "ERR <its message>"."""
        try:
            return DTensorRedistributePlanner.stringify_transform_infos(
                mesh, infos, spec.placements, spec.shard_order)
        except ValueError as e:
            return lenient_trace(mesh, infos, spec) or ("ERR " + str(e).split(". transform_info")[0])

    @staticmethod
    def steps(infos):
        """The plan as mesh_dim:from->to steps (readable even when the trace is not)."""
        out = []
        for ti in infos:
            a, b = ti.src_dst_placements
            out.append("%d:%s->%s" % (ti.mesh_dim, a, b))
        return out

    @staticmethod
    def collectives(mesh, infos):
        counts = {}
        for ti in infos:
            cur, tgt = ti.src_dst_placements
            n = ti.mesh.size(ti.mesh_dim) if hasattr(ti, "mesh") and ti.mesh is not None else mesh.size(ti.mesh_dim)
            k = step_kind(cur, tgt)
            if k is None or n == 1:
                continue
            counts[k] = counts.get(k, 0) + 1
        return counts

    # ------------------------------------------------------------ data
    def redistribute(self, n, locals_by_pos, src_spec, dst_spec, graph):
        with LocalTensorMode(n):
            lt = LocalTensor({r: locals_by_pos[r] for r in range(n)})
            out = redistribute_local_tensor(lt, src_spec, dst_spec, use_graph_based_transform=graph)
            if isinstance(out, LocalTensor):
                return [out._local_tensors[r].clone() for r in range(n)]
            return [out.clone() for _ in range(n)]

    def observed_offsets(self, case, mesh, sh, n, pos_list, graph):
        """Where PyTorch actually puts data for layout sh (no Partial): redistribute an index
        tensor from Replicate and read each rank's first element. Returns {pos: (shape, offset)}
        for ranks whose local is non-empty; empty ranks are probed per dim on a tensor whose
        other dims never run empty."""
        probe_sh = rs_model.Sharding([p if p.kind != "P" else rs_model.Placement("R") for p in sh.p],
                                     sh.order)
        res = {}

        def run(shape):
            c2 = _ShapeView(case, shape)
            g = torch.arange(max(1, math.prod(shape)), dtype=torch.int64)[: math.prod(shape)].reshape(shape)
            rep = rs_model.Sharding([rs_model.Placement("R")] * len(case.mesh_shape), {})
            s0 = self.spec(mesh, c2, rep, torch.int64)
            s1 = self.spec(mesh, c2, probe_sh, torch.int64)
            return self.redistribute(n, [g.clone() for _ in range(n)], s0, s1, graph)

        def unravel(flat, shape):
            out = []
            for d in reversed(range(len(shape))):
                out.append(flat % shape[d] if shape[d] else 0)
                flat //= max(1, shape[d])
            return out[::-1]

        full = run(list(case.shape))
        empty = []
        for p in pos_list:
            t = full[p]
            if t.numel():
                res[p] = (list(t.shape), unravel(int(t.reshape(-1)[0]), case.shape))
            else:
                empty.append(p)
        if empty:
            P = math.prod(case.mesh_shape)
            offs = {p: [0] * case.ndim for p in empty}
            for d in range(case.ndim):
                if not sh.order.get(d):
                    continue
                shape = [case.shape[d] if e == d else (P if sh.order.get(e) else 1) for e in range(case.ndim)]
                part = run(shape)
                for p in empty:
                    t = part[p]
                    if t.shape[d] == 0:
                        offs[p][d] = case.shape[d]
                    else:
                        offs[p][d] = unravel(int(t.reshape(-1)[0]), shape)[d]
            for p in empty:
                res[p] = (list(full[p].shape), offs[p])
        return res


def lenient_trace(mesh, infos, spec):
    """The trace of a plan whose Shard -> X step on a mesh dim of size 1 does not take the last
    entry of the shard order (PyTorch's greedy planner makes such plans when every sharding mesh
    dim has size 1, and its own stringify_transform_infos then raises). A size-1 mesh dim splits
    nothing, so SPEC's bookkeeping (rs_mesh_apply_step) takes it from wherever it sits; any other
    out-of-order step is still refused (returns None)."""
    pl = list(spec.placements)
    order = {e.tensor_dim: list(e.mesh_dims) for e in spec.shard_order}

    def text():
        sh = rs_model.Sharding([_from_torch(p) for p in pl], {d: v for d, v in order.items() if v})
        return sh.text()

    parts = [text()]
    for ti in infos:
        m = ti.mesh_dim
        a, b = ti.src_dst_placements
        if a.is_shard():
            lst = order.get(a.dim, [])
            if lst and lst[-1] == m:
                lst.pop()
            elif m in lst and mesh.size(m) == 1:
                lst.remove(m)
            else:
                return None
        if b.is_shard():
            order.setdefault(b.dim, []).append(m)
        pl[m] = b
        parts.append(text())
    return "->".join(parts)


def _from_torch(p):
    if p.is_shard():
        return rs_model.Placement("S", dim=p.dim)
    if p.is_partial():
        return rs_model.Placement("P", op=p.reduce_op)
    return rs_model.Placement("R")


class _ShapeView:
    """A case with another tensor shape (for layout probes)."""

    def __init__(self, case, shape):
        self.shape = list(shape)
        self.ndim = len(shape)
        self.dtype = case.dtype
        self.mesh_shape = case.mesh_shape


def strided_placements(case, sh):
    """PyTorch's encoding of a shard order as _StridedShard placements
    (DTensorSpec._convert_shard_order_to_StridedShard's rule)."""
    pl = [torch_placement(p) for p in sh.p]
    for d, mds in sh.order.items():
        for idx, m in enumerate(mds):
            sf = math.prod(case.mesh_shape[i] for i in mds[:idx] if i > m)
            pl[m] = Shard(d) if sf == 1 else _StridedShard(d, split_factor=sf)
    return pl


def api_shape_offset(case, sh, coord):
    """compute_local_shape_and_global_offset's answer (its plain-data form, the same code the
    mesh-taking API calls) for a layout; a non-default shard order is passed as PyTorch encodes
    it, with _StridedShard."""
    pl = strided_placements(case, sh) if not sh.is_default_order() else [torch_placement(p) for p in sh.p]
    shape, off = _compute_local_shape_and_global_offset(case.shape, case.mesh_shape, list(coord), pl)
    return [int(x) for x in shape], [int(x) for x in off]


def run_case(runner, case, flatten=False, timing_reps=3, seedcost=True):
    """Record one case. Returns the "pytorch" object of a fixture line plus a list of notes
    (disagreements inside PyTorch or with SPEC) and the known_bug tag when PyTorch is wrong."""
    n = case.nranks
    runner.ensure_world(n)
    mesh = runner.mesh(case.mesh_shape, flatten)
    src_spec = runner.spec(mesh, case, case.src)
    dst_spec = runner.spec(mesh, case, case.dst)
    coords = case.coords()
    notes = []
    rec = {"version": torch.__version__, "mechanism": "fake-pg+LocalTensorMode", "device": "cpu",
           "num_devices_per_host": 1}
    if flatten:
        rec["flattened_meshes"] = True

    default_order = case.src.is_default_order() and case.dst.is_default_order()
    # ---- plans and their timings (planner caches cleared before each)
    tg = None
    if default_order:
        best = None
        for _ in range(timing_reps):
            infos_g, t = runner.plan(src_spec, dst_spec, False)
            best = t if best is None else min(best, t)
        rec["trace_greedy"] = runner.trace(mesh, infos_g, src_spec)
        rec["steps_greedy"] = runner.steps(infos_g)
        rec["t_greedy_ns"] = best
        tg = infos_g
    else:
        rec["trace_greedy"] = None  # PyTorch always uses the graph planner for non-default orders
        rec["t_greedy_ns"] = None
    best = None
    try:
        for _ in range(timing_reps):
            infos_h, t = runner.plan(src_spec, dst_spec, True)
            best = t if best is None else min(best, t)
        rec["trace_graph"] = runner.trace(mesh, infos_h, src_spec)
        rec["steps_graph"] = runner.steps(infos_h)
        rec["t_graph_ns"] = best
    except Exception as e:  # no path
        infos_h = None
        rec["trace_graph"] = None
        rec["t_graph_ns"] = None
        notes.append("graph planner: %s" % str(e).splitlines()[0][:200])
    if seedcost:
        for key, sc in (("trace_graph_seed", True), ("trace_graph_pytorch_cost", False)):
            try:
                rec[key] = runner.trace(mesh, runner.plan_seed_enum(mesh, src_spec, dst_spec, sc), src_spec)
            except AssertionError as e:
                # the reference only makes Partial(sum) from Replicate: no path to P(avg/min/max)
                rec[key] = "ERR no path" if "No path found" in str(e) else "ERR " + str(e)[:200]

    # ---- which plan redistribute_local_tensor runs (case.planner honoured; PyTorch forces the
    # graph planner for non-default shard orders)
    graph_flag = {"auto": None, "greedy": False, "graph": True}[case.planner]
    used_graph = (not default_order) or graph_flag is True
    infos = infos_h if used_graph else tg
    rec["planner_used"] = "graph" if used_graph else "greedy"
    if infos is not None:
        opt = _optimize_transform_infos(list(infos), mesh, src_spec.placements, dst_spec.placements)
        rec["trace"] = runner.trace(mesh, opt, src_spec)
        rec["steps"] = runner.steps(opt)
        rec["collectives"] = runner.collectives(mesh, opt)

    # ---- data: SPEC 8 source locals in, PyTorch's redistribute, digests out
    src_raw = rs_model.make_source(case)
    src_t = [to_torch(a, case.dtype) for a in src_raw]
    ranks = []
    try:
        out = runner.redistribute(n, src_t, src_spec, dst_spec, graph_flag)
        for pos, coord in enumerate(coords):
            t = out[pos]
            entry = {"rank": case.ranks[pos], "coord": coord, "local_shape": list(t.shape)}
            if t.dtype != TORCH_DTYPES[case.dtype]:
                entry["dtype"] = str(t.dtype).replace("torch.", "")
            entry["xxh3"] = digest(t)
            ranks.append(entry)
    except Exception as e:
        # LocalTensorMode's simulated collectives fail on some uneven layouts where real ones
        # work: re-run this case with one gloo process per rank (slow, rare).
        why = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
        import gloo_check
        got = gloo_check.run_gloo(case.case_json(), flatten)
        if any("error" in g for g in got):
            rec["error"] = next(g["error"] for g in got if "error" in g)
            notes.append("LocalTensorMode raised %s; gloo processes raised too" % why)
            return rec, notes
        rec["mechanism"] = "gloo processes"
        notes.append("LocalTensorMode raised %s; recorded with gloo processes" % why)
        for pos, coord in enumerate(coords):
            g = got[pos]
            entry = {"rank": case.ranks[pos], "coord": coord, "local_shape": g["local_shape"]}
            if "dtype" in g:
                entry["dtype"] = g["dtype"].replace("torch.", "")
            entry["xxh3"] = g["xxh3"]
            ranks.append(entry)

    # ---- layouts: PyTorch's API answer, checked against where the data really went
    for pos, coord in enumerate(coords):
        shp, off = api_shape_offset(case, case.dst, coord)
        ranks[pos]["global_offset"] = off
        if shp != ranks[pos]["local_shape"]:
            ranks[pos]["api_local_shape"] = shp
    if not case.dst.is_default_order():
        obs = runner.observed_offsets(case, mesh, case.dst, n, range(n), None)
        for pos in range(n):
            oshape, ooff = obs[pos]
            api_off = ranks[pos]["global_offset"]
            if ooff != api_off or ranks[pos].get("api_local_shape"):
                ranks[pos]["api_global_offset"] = api_off
                ranks[pos]["global_offset"] = ooff
        if any("api_global_offset" in r or "api_local_shape" in r for r in ranks):
            notes.append("strided-shard layout API disagrees with the data PyTorch redistributes "
                         "(non-default shard order, uneven split)")
    rec["ranks"] = ranks
    return rec, notes


def flatten_variant(runner, case, plain):
    """Run the case again on a mesh that has flattened sub-meshes, where PyTorch merges
    same-kind collectives on several mesh dims into one (_optimize_transform_infos). Returns the
    recorded object when that changes any rank's result (a PyTorch bug: the logical tensor is the
    same), else None."""
    n = case.nranks
    runner.ensure_world(n)
    mesh = runner.mesh(case.mesh_shape, True)
    src_spec = runner.spec(mesh, case, case.src)
    dst_spec = runner.spec(mesh, case, case.dst)
    default_order = case.src.is_default_order() and case.dst.is_default_order()
    graph_flag = {"auto": None, "greedy": False, "graph": True}[case.planner]
    used_graph = (not default_order) or graph_flag is True
    infos, _ = runner.plan(src_spec, dst_spec, used_graph)
    opt = _optimize_transform_infos(list(infos), mesh, src_spec.placements, dst_spec.placements)
    if len(opt) == len(infos):
        return None
    src_t = [to_torch(a, case.dtype) for a in rs_model.make_source(case)]
    rec = {"version": torch.__version__, "mechanism": "fake-pg+LocalTensorMode", "device": "cpu",
           "flattened_meshes": True,
           "trace": runner.trace(mesh, opt, src_spec),
           "collectives": runner.collectives(mesh, opt)}
    try:
        out = runner.redistribute(n, src_t, src_spec, dst_spec, graph_flag)
    except Exception:
        # LocalTensorMode cannot simulate this flattened collective (checked with gloo_check.py
        # --flatten: real processes do not raise there); nothing to record
        return None
    ranks = []
    differs = False
    for pos, coord in enumerate(case.coords()):
        t = out[pos]
        e = {"rank": case.ranks[pos], "coord": coord, "local_shape": list(t.shape), "xxh3": digest(t),
             "global_offset": plain["ranks"][pos]["global_offset"]}
        if e["xxh3"] != plain["ranks"][pos]["xxh3"] or e["local_shape"] != plain["ranks"][pos]["local_shape"]:
            differs = True
        ranks.append(e)
    rec["ranks"] = ranks
    return rec if differs else None
