#!/usr/bin/env python3
"""p2p.py - Megatron-Core's own resharding (megatron.core.resharding) behind reshard's process
protocol (docs/conformance.md, "Live Megatron-Core"):

    reshard fuzz-planner --kind p2p --planner exec:'PY tools/megatron/p2p.py --role planner'
    reshard conform --suite p2p --backend exec:'PY tools/megatron/p2p.py --role backend'

Every model the harness sends is translated into Megatron's terms and handed to Megatron's code on
a world of real gloo processes (one per rank, forked by this child, reused across cases, torn down
on exit): per rank a source and a destination nn.Module whose parameters carry Megatron's
tensor-parallel attributes (tensor_model_parallel, partition_dim, partition_stride; allreduce=False
on expert weights when ep > 1, as Megatron's linear layers set it), per-expert tensors named
weight<k> as TEGroupedMLP names them (--experts sequential: local_experts.<k>. as SequentialMLP
does), pipeline layers named
by their local index with the layer module's global layer_number, and a ProcessGroupCollection of
real gloo groups (tp, dp, pp, ep, expt_tp) on both configs. Then, on every rank:

  planner role  build_centralized_reshard_plan(src_module, dst_module, num_experts); the send and
                receive TransferOps are converted to reshard's transfers (global boxes; a send and
                its receive must name the same box, else the case fails)
  backend role  p2p_plan as above; p2p_execute runs execute_reshard_plan with Megatron's
                GlooCopyService on Megatron's own plan ("plan": null) or on the plan given
                (reshard's opt and ref plans, converted to TransferOps), and answers the
                destination parameters' bytes

What Megatron cannot express is answered "unsupported" with the reason (counted as skipped, never
passed; --log FILE appends one JSON line per decline): MXFP8 transforms, a parameter sharded over
two or more mesh dims, an uneven split (Megatron divides evenly), a TP/EP group whose mesh order is
not ascending (torch.distributed orders a group's ranks, so Megatron's TP rank is the ascending
position), a rank in two TP or DP groups of one config, a parameter tensor-parallel in one config
only or on other dims, experts that do not divide by EP.

--bug drop_transfer | wrong_slice plants a bug in this wrapper, for the CI check that the harness
catches it: Megatron's plan loses its last transfer / one transfer's box moves by one element (on
both sides where both have room, else on the sending side). The planner answers the changed plan;
the backend answers Megatron's plan to p2p_plan and executes the changed one. Stdout carries only protocol lines; everything else goes to stderr.
"""
import argparse
import base64
import collections
import json
import os
import re
import signal
import socket
import sys
import tempfile
import time
import traceback

_out = sys.stdout
sys.stdout = sys.stderr  # nothing Megatron or torch prints reaches the protocol

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import multiprocessing as mp  # noqa: E402
from multiprocessing.connection import wait as mp_wait  # noqa: E402

import megatron.core  # noqa: E402
from megatron.core import package_info  # noqa: E402
from megatron.core.resharding import (  # noqa: E402
    ReshardPlan, TransferOp, build_centralized_reshard_plan, execute_reshard_plan)
from megatron.core.resharding.copy_services.gloo_copy_service import GlooCopyService  # noqa: E402

MCORE = package_info.__version__
DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "I8": torch.int8,
          "I16": torch.int16, "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8, "BOOL": torch.bool}
LAYER = re.compile(r"^layers\.(\d+)\.(.*)$")
EXPERTS = "grouped"


class Decline(Exception):
    """A model Megatron cannot express: a category (counted) and the detail."""

    def __init__(self, cat, detail):
        Exception.__init__(self, "%s: %s" % (cat, detail))
        self.cat = cat


def send(obj):
    _out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    _out.flush()


# ------------------------------------------------------------------ translation (main process)

def split_even(n, k, i):
    return (n // k) * i, n // k


def mesh_coords(shape):
    out = [[]]
    for s in shape:
        out = [c + [x] for c in out for x in range(s)]
    return out


def line(mesh, coord, md):
    """World ranks of mesh positions that differ from coord only on mesh dim md, in mesh order."""
    shape, ranks = mesh["shape"], mesh["ranks"]
    res = []
    for x in range(shape[md]):
        c = list(coord)
        c[md] = x
        pos = 0
        for d, s in enumerate(shape):
            pos = pos * s + c[d]
        res.append(ranks[pos])
    return tuple(res)


def others(mesh, coord, md):
    """World ranks of mesh positions with the same coordinate as coord on mesh dim md (all others vary)."""
    shape, ranks = mesh["shape"], mesh["ranks"]
    return tuple(sorted(ranks[p] for p, c in enumerate(mesh_coords(shape)) if md is None or c[md] == coord[md]))


def parse_pl(t):
    if t == "R":
        return None
    m = re.match(r"^S\((-?\d+)\)$", t)
    if not m:
        raise Decline("partial", "placement %s (Megatron stores values)" % t)
    return int(m.group(1))


def translate(model):
    """Megatron's view of a P2P model (explicit form, as the harness sends it):
    {"world", "num_experts", "cfg": [per config: {rank: {"groups": {...}, "params": [...]}}]}."""
    params = model["model"]["params"]
    pidx = {p["name"]: i for i, p in enumerate(params)}
    for p in params:
        if p.get("transform", "none") != "none":
            raise Decline("mxfp8", "Megatron-Core %s's resharding has no MXFP8 transform" % MCORE)
        if p["dtype"] not in DTYPES:
            raise Decline("dtype", "%s has no torch dtype" % p["dtype"])
    world = 0
    kinds = {}  # param -> per config (kind, tensor dim)
    out_cfg = []
    num_experts = None
    for ci, cname in enumerate(("src", "dst")):
        cfg = model[cname]
        meshes = cfg["meshes"]
        for me in meshes:
            world = max([world] + [r + 1 for r in me["ranks"]])
        cand = collections.defaultdict(lambda: collections.defaultdict(set))  # rank -> what -> {groups}
        holds = collections.defaultdict(list)  # rank -> [(param, mesh, coord, kind, tdim, tp md)]
        for name, lay in cfg["params"].items():
            p = params[pidx[name]]
            shape = p["shape"]
            me = meshes[lay["mesh"]]
            pl = [parse_pl(t) for t in lay["placements"]]
            pl = [None if d is None else (d + len(shape) if d < 0 else d) for d in pl]
            shards = [(md, d) for md, d in enumerate(pl) if d is not None]
            expert = ".experts." in name and len(me["shape"]) == 3 and pl[0] is None and pl[1] == 0 and \
                (pl[2] is None or pl[2] >= 1) and len(shape) == 3
            if expert:
                E, ep = shape[0], me["shape"][1]
                if E % ep:
                    raise Decline("uneven experts", "%d experts do not divide by ep %d (Megatron: num_experts // ep per rank)" % (E, ep))
                if num_experts not in (None, E):
                    raise Decline("expert counts", "two expert counts (%d, %d); Megatron takes one num_experts" % (num_experts, E))
                num_experts = E
                kind, tdim, tpmd = "expert", pl[2], (2 if pl[2] is not None else None)
            elif not shards:
                kind, tdim, tpmd = "repl", None, None
            elif len(shards) == 1:
                kind, (tpmd, tdim) = "tp", shards[0]
            else:
                raise Decline("multi-dim sharding", "%s sharded over %d mesh dims (Megatron splits a parameter over one TP dim)" % (name, len(shards)))
            if tdim is not None and shape[tdim] % me["shape"][tpmd]:
                raise Decline("uneven split", "%s dim %d of size %d over %d ranks (Megatron divides evenly)" %
                              (name, tdim, shape[tdim], me["shape"][tpmd]))
            kinds.setdefault(name, [None, None])[ci] = (kind if kind != "expert" else "expert", tdim)
            for coord in mesh_coords(me["shape"]):
                pos = 0
                for d, s in enumerate(me["shape"]):
                    pos = pos * s + coord[d]
                r = me["ranks"][pos]
                holds[r].append((name, me, coord, kind, tdim, tpmd))
                if kind == "tp":
                    cand[r]["tp"].add(line(me, coord, tpmd))
                    cand[r]["dp"].add(others(me, coord, tpmd))
                elif kind == "expert":
                    cand[r]["ep"].add(line(me, coord, 1))
                    if tpmd is not None:
                        cand[r]["expt_tp"].add(line(me, coord, 2))
                        cand[r]["dp"].add(others(me, coord, 2))
                    else:
                        cand[r]["dp"].add(others(me, coord, None))
        ranks = {}
        for r, hl in holds.items():
            g = {}
            for what in ("tp", "ep", "expt_tp"):
                c = cand[r][what]
                if len(c) > 1:
                    raise Decline("two %s groups" % what, "%s rank %d is in %d %s groups (Megatron: one per rank)" % (cname, r, len(c), what))
                if c:
                    grp = next(iter(c))
                    if list(grp) != sorted(grp):
                        raise Decline("%s order" % what, "%s group %s not ascending in mesh order (torch orders a group's ranks, so Megatron's %s rank is the ascending position)" % (what, list(grp), what))
                    g[what] = grp
            # replicated parameters: the DP group is the replicas along every mesh dim but the TP one
            for name, me, coord, kind, tdim, tpmd in hl:
                if kind != "repl":
                    continue
                md = None
                if "tp" in g:
                    for d in range(len(me["shape"])):
                        if line(me, coord, d) == g["tp"]:
                            md = d
                cand[r]["dp"].add(others(me, coord, md))
            if len(cand[r]["dp"]) > 1:
                raise Decline("two dp groups", "%s rank %d is in %d DP groups (Megatron: one per rank)" % (cname, r, len(cand[r]["dp"])))
            g["dp"] = next(iter(cand[r]["dp"]))
            ranks[r] = {"groups": g, "hl": hl}
        # pipeline groups: the same position in every stage's dense mesh, when the config's
        # non-expert meshes are stages (one shape, disjoint ranks, as a template makes them);
        # else each rank alone (Megatron's planner reads the PP group only into the metadata)
        used = {cfg["params"][n]["mesh"] for n in cfg["params"]}
        expert_m = {cfg["params"][n]["mesh"] for n in cfg["params"] if ".experts." in n}
        dense = [meshes[i] for i in sorted(used - expert_m)]
        flat = [r for me in dense for r in me["ranks"]]
        stages = len(dense) > 0 and len({tuple(me["shape"]) for me in dense}) == 1 and len(flat) == len(set(flat))
        for r, info in ranks.items():
            info["groups"]["pp"] = (r,)
        if stages:
            for q in range(len(dense[0]["ranks"])):
                grp = tuple(me["ranks"][q] for me in dense)
                for r in grp:
                    if r in ranks:
                        ranks[r]["groups"]["pp"] = grp
        out_cfg.append(ranks)
    for name, k in kinds.items():
        a, b = k
        if a and b and (a[0] == "repl") != (b[0] == "repl"):
            raise Decline("tp in one config", "%s tensor-parallel in one config only (Megatron marks a parameter in both models)" % name)
        if a and b and a[0] != "repl" and a[1] != b[1]:
            raise Decline("partition dims differ", "%s split on dim %s in src, dim %s in dst (Megatron: one partition_dim)" % (name, a[1], b[1]))
        if a and b and (a[0] == "expert") != (b[0] == "expert"):
            raise Decline("expert in one config", name)
    # per rank: Megatron parameters (local name, local shape, attributes) and where they sit globally
    for ci, ranks in enumerate(out_cfg):
        cname = ("src", "dst")[ci]
        for r, info in ranks.items():
            layers = [int(LAYER.match(h[0]).group(1)) for h in info["hl"] if LAYER.match(h[0])]
            first = min(layers) if layers else 0
            mps = []
            for name, me, coord, kind, tdim, tpmd in info["hl"]:
                p = params[pidx[name]]
                shape = list(p["shape"])
                off = [0] * len(shape)
                loc = list(shape)
                if tdim is not None:
                    off[tdim], loc[tdim] = split_even(shape[tdim], me["shape"][tpmd], coord[tpmd])
                mname, layer = name, None
                m = LAYER.match(name)
                if m:
                    layer = int(m.group(1))
                    mname = "layers.%d.%s" % (layer - first, m.group(2))
                base = {"p": pidx[name], "dtype": p["dtype"], "tp": kind != "repl" and tdim is not None,
                        "layer": None if layer is None else (layer - first, layer)}
                if kind == "expert":
                    E, ep = shape[0], me["shape"][1]
                    per = E // ep
                    for k in range(per):
                        e = coord[1] * per + k
                        if EXPERTS == "sequential":  # SequentialMLP: experts.local_experts.<k>.fc1.weight
                            head, _, tail = mname.partition(".experts.")
                            ename = "%s.experts.local_experts.%d.%s" % (head, k, tail)
                        else:  # TEGroupedMLP: experts.fc1.weight<k>
                            ename = "%s%d" % (mname, k)
                        mps.append(dict(base, name=ename, k=k, shape=loc[1:], pdim=(tdim - 1 if tdim else 0),
                                        ep=ep > 1, off=[e] + off[1:], expert=True))
                else:
                    mps.append(dict(base, name=mname, shape=loc, pdim=(tdim or 0), ep=False, off=off, expert=False))
            info["params"] = mps
            del info["hl"]
    return {"world": world, "num_experts": num_experts, "cfg": out_cfg}


# ------------------------------------------------------------------ the gloo world (workers)

def _pdeathsig():
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the child
    except Exception:
        pass


class Holder(torch.nn.Module):
    pass


def build_module(spec, pgc, data=None, fill=False):
    root = Holder()
    for mp_ in spec:
        parts = mp_["name"].split(".")
        mod = root
        for i, part in enumerate(parts[:-1]):
            if not hasattr(mod, part) or not isinstance(getattr(mod, part), torch.nn.Module):
                mod.add_module(part, Holder())
            mod = getattr(mod, part)
            if mp_["layer"] is not None and i == 1 and parts[0] == "layers":
                mod.layer_number = mp_["layer"][1] + 1  # Megatron: global, 1-indexed
        dt = DTYPES[mp_["dtype"]]
        if data is not None and mp_["name"] in data:
            raw = bytearray(data[mp_["name"]])
            t = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
            t = t.view(dt).reshape(mp_["shape"]).clone()
        else:
            t = torch.empty(mp_["shape"], dtype=dt)
            if fill and t.numel():
                t.reshape(-1).view(torch.uint8).fill_(0xA5)  # a sentinel: an element never written shows
        prm = torch.nn.Parameter(t, requires_grad=False)
        if mp_["tp"]:
            prm.tensor_model_parallel = True
            prm.partition_dim = mp_["pdim"]
            prm.partition_stride = 1
        if mp_["ep"]:
            prm.allreduce = False
        mod.register_parameter(parts[-1], prm)
    root.pg_collection = pgc
    return root


def worker(rank, world, port, conn, timeout_s):
    _pdeathsig()
    sys.stdout = sys.stderr
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    import datetime
    from megatron.core.process_groups_config import ProcessGroupCollection
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    # GlooCopyService.__init__ makes a torch.cuda.Stream, which raises without a CUDA driver
    # (finding 1, tools/megatron/repro/gloo_copy_service_cpu.py): made with the stream absent, so
    # run() skips its wait_stream; everything else is Megatron's.
    real = torch.cuda.Stream
    torch.cuda.Stream = lambda *a, **k: None
    try:
        service = GlooCopyService()
    finally:
        torch.cuda.Stream = real
    groups = {}
    conn.send(("ready", rank))
    plans = {}
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            break
        if msg is None:
            break
        try:
            for g in msg["new_groups"]:
                groups[g] = dist.new_group(list(g), backend="gloo")

            def pgc_of(side):
                pgc = ProcessGroupCollection()
                gr = side["groups"] if side else {"dp": (rank,), "pp": (rank,), "tp": (rank,)}
                for k in ("tp", "dp", "pp", "ep", "expt_tp"):
                    setattr(pgc, k, groups[tuple(sorted(gr[k]))] if k in gr else None)
                if pgc.tp is None:
                    pgc.tp = groups[(rank,)]
                return pgc
            s, d = msg["src"], msg["dst"]
            sp, dpg = pgc_of(s), pgc_of(d)
            src_mod = build_module(s["params"] if s else [], sp, msg.get("data"))
            dst_mod = build_module(d["params"] if d else [], dpg, None, fill=True)
            key = msg["key"]
            if msg["op"] == "plan" or (msg["op"] == "exec" and msg["plan"] is None and key not in plans):
                plan = build_centralized_reshard_plan(src_mod, dst_mod, num_experts=msg["num_experts"])
                plans = {key: plan}
            if msg["op"] == "plan":
                conn.send(("ok", [ops(plan.send_ops), ops(plan.recv_ops)]))
                continue
            plan = plans[key] if msg["plan"] is None else ReshardPlan(
                [TransferOp(*o) for o in msg["plan"][0]], [TransferOp(*o) for o in msg["plan"][1]])
            if msg["plan"] is None and msg.get("mutate"):
                plan = ReshardPlan(*[[TransferOp(*o) for o in x] for x in msg["mutate"]])
            execute_reshard_plan(plan, src_mod, dst_mod, service)
            res = {}
            for n, prm in dst_mod.named_parameters():
                t = prm.data.contiguous()
                res[n] = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            conn.send(("ok", res))
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            conn.send(("err", "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:300])))
    try:
        dist.destroy_process_group()
    except Exception:
        pass


def ops(lst):
    return [(o.param_name, o.peer_rank, o.is_send, o.my_slice, o.peer_slice, o.task_id) for o in lst]


class World:
    """W forked worker processes forming one gloo world; groups made on demand, cached by ranks."""

    def __init__(self, size, timeout_s):
        self.size, self.timeout_s = size, timeout_s
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        ctx = mp.get_context("fork")
        self.conns, self.procs = [], []
        for r in range(size):
            a, b = ctx.Pipe()
            p = ctx.Process(target=worker, args=(r, size, port, b, timeout_s), daemon=True)
            p.start()
            b.close()
            self.conns.append(a)
            self.procs.append(p)
        self.groups = set()
        res = self.gather(None, max(60, timeout_s * 2))
        if any(x[0] != "ready" for x in res):
            self.close()
            raise RuntimeError("gloo world of %d did not start" % size)

    def gather(self, msgs, timeout):
        if msgs is not None:
            for c, m in zip(self.conns, msgs):
                c.send(m)
        res = [None] * self.size
        left = set(range(self.size))
        end = time.monotonic() + timeout
        while left:
            t = end - time.monotonic()
            ready = mp_wait([self.conns[i] for i in left], timeout=max(0, t)) if t > 0 else []
            if not ready:
                raise TimeoutError("gloo world: ranks %s did not answer in %.0f s" % (sorted(left)[:8], timeout))
            for c in ready:
                i = self.conns.index(c)
                try:
                    res[i] = c.recv()
                except EOFError:
                    raise RuntimeError("gloo world: rank %d died" % i)
                left.discard(i)
                if res[i][0] == "err":  # one rank failed: the collective is broken, do not wait for the rest
                    raise RuntimeError("rank %d: %s" % (i, res[i][1]))
        return res

    def close(self):
        for c in self.conns:
            try:
                c.send(None)
            except Exception:
                pass
        end = time.monotonic() + 3
        for p in self.procs:
            p.join(max(0, end - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.kill()
                p.join(2)
        self.procs, self.conns = [], []


# ------------------------------------------------------------------ driver (main process)

class Driver:
    def __init__(self, args):
        self.args = args
        self.world = None
        self.key = 0
        self.last_model = None
        self.declines = collections.Counter()

    def close(self):
        if self.world:
            self.world.close()
            self.world = None

    def ensure(self, n):
        if self.world and (self.world.size < n or len(self.world.groups) > 400):
            self.close()
        if not self.world:
            self.world = World(max(n, self.args.min_world), self.args.case_timeout)

    def run(self, tr, op, extra):
        W = tr["world"]
        self.ensure(W)
        w = self.world
        need = []
        for r in range(w.size):
            need.append((r,))
            for cfg in tr["cfg"]:
                if r in cfg:
                    need += list(cfg[r]["groups"].values())
        new = []
        for g in need:
            g = tuple(sorted(g))
            if g not in w.groups:
                w.groups.add(g)
                new.append(g)
        msgs = []
        for r in range(w.size):
            m = {"op": op, "key": self.key, "new_groups": new, "num_experts": tr["num_experts"],
                 "src": tr["cfg"][0].get(r), "dst": tr["cfg"][1].get(r)}
            m.update(extra(r) if extra else {})
            msgs.append(m)
        try:
            return [x[1] for x in w.gather(msgs, self.args.case_timeout)]
        except Exception:
            self.close()  # a broken collective leaves the world unusable: a fresh one next case
            raise

    def model_key(self, model):
        text = json.dumps(model, sort_keys=True)
        if text != self.last_model:
            self.last_model = text
            self.key += 1
            self.plan_cache = None

    # Megatron's plan (per rank: sends, recvs) -> reshard transfers
    def megatron_plan(self, model, tr):
        self.model_key(model)
        if getattr(self, "plan_cache", None) is not None:
            return self.plan_cache
        per = self.run(tr, "plan", None)
        ops_ = plant(self.args.bug, per, tr)
        self.plan_cache = (per, ops_)
        return self.plan_cache

    def p2p_plan(self, model):
        tr = translate(model)
        per, planted = self.megatron_plan(model, tr)
        # a planted bug is in the plan the planner answers, and in what the backend executes (its
        # p2p_plan answers Megatron's plan as it is, so the oracle is what catches the executor)
        return to_transfers(planted if self.args.role == "planner" else per, tr, model)

    def p2p_execute(self, model, plan, src):
        tr = translate(model)
        params = model["model"]["params"]
        self.model_key(model)
        # source locals -> each rank's Megatron tensors
        data = collections.defaultdict(dict)
        byname = {(t["param"], t["rank"]): base64.b64decode(t["data"]) for t in src}
        for r, info in tr["cfg"][0].items():
            for mp_ in info["params"]:
                name = params[mp_["p"]]["name"]
                raw = byname.get((name, r))
                if raw is None:
                    raise RuntimeError("no source local for %s on rank %d" % (name, r))
                if mp_["expert"]:
                    es = elsize(mp_["dtype"])
                    per_e = es
                    for x in mp_["shape"]:
                        per_e *= x
                    k = mp_["k"]
                    raw = raw[k * per_e:(k + 1) * per_e]
                data[r][mp_["name"]] = raw
        mutate = None
        if plan is None:
            per, planted = self.megatron_plan(model, tr)
            if planted is not per:
                mutate = planted
            given = None
        else:
            given = from_transfers(plan["transfers"], tr, model)

        def extra(r):
            x = {"data": data.get(r, {}), "plan": None if given is None else given[r] if r < len(given) else ([], [])}
            if mutate is not None:
                x["mutate"] = mutate[r] if r < len(mutate) else ([], [])
            return x
        res = self.run(tr, "exec", extra)
        out = []
        for r, info in tr["cfg"][1].items():
            by_p = collections.defaultdict(list)
            for mp_ in info["params"]:
                by_p[mp_["p"]].append(mp_)
            for p, lst in by_p.items():
                raw = b"".join(res[r][mp_["name"]] for mp_ in lst)
                shape = list(lst[0]["shape"])
                if lst[0]["expert"]:
                    shape = [len(lst)] + shape
                out.append({"param": params[p]["name"], "rank": r, "shape": shape,
                            "data": base64.b64encode(raw).decode()})
        return out


def elsize(dt):
    return torch.empty(0, dtype=DTYPES[dt]).element_size()


def find_local(tr, ci, r, mname):
    for mp_ in tr["cfg"][ci][r]["params"]:
        if mp_["name"] == mname:
            return mp_
    raise RuntimeError("rank %d has no %s parameter %s" % (r, ("src", "dst")[ci], mname))


def sl_box(sl, shape):
    start, size = [], []
    for d, n in enumerate(shape):
        s = sl[d] if d < len(sl) else slice(None)
        a, b, st = s.indices(n)
        if st != 1:
            raise RuntimeError("slice with step %d" % st)
        start.append(a)
        size.append(max(0, b - a))
    return start, size


def glob_box(mp_, sl):
    start, size = sl_box(sl, mp_["shape"])
    if mp_["expert"]:
        return [mp_["off"][0]] + [o + s for o, s in zip(mp_["off"][1:], start)], [1] + size
    return [o + s for o, s in zip(mp_["off"], start)], size


def to_transfers(per, tr, model):
    """Megatron's per-rank TransferOps -> reshard transfers; every receive must have its send, on the
    same global box."""
    params = model["model"]["params"]
    sends = {}
    for r, (so, _) in enumerate(per):
        for (pn, peer, is_send, my, peer_sl, tid) in so:
            sends[tid] = (r, pn, peer, my)
    out = []
    for r, (_, ro) in enumerate(per):
        for (pn, peer, is_send, my, peer_sl, tid) in ro:
            d = find_local(tr, 1, r, pn)
            start, size = glob_box(d, my)
            s = sends.pop(tid, None)
            if s is None or s[0] != peer or s[2] != r:
                raise RuntimeError("Megatron's plan: receive task %s on rank %d has no matching send on rank %d" % (tid, r, peer))
            sm = find_local(tr, 0, peer, s[1])
            s_start, s_size = glob_box(sm, s[3])
            if (s_start, s_size) != (start, size) or sm["p"] != d["p"]:
                raise RuntimeError("Megatron's plan: task %s sends %s %s+%s from rank %d, receives %s %s+%s on rank %d" %
                                   (tid, s[1], s_start, s_size, peer, pn, start, size, r))
            out.append({"task_id": tid, "param": params[d["p"]]["name"], "src_rank": peer, "dst_rank": r,
                        "offsets": start, "sizes": size})
    if sends:
        tid = next(iter(sends))
        raise RuntimeError("Megatron's plan: send task %s from rank %d has no receive" % (tid, sends[tid][0]))
    return out


def from_transfers(transfers, tr, model):
    """reshard transfers -> per-rank Megatron TransferOps (sends, recvs) with fresh task ids, each
    rank's ops in task order so gloo pairs them in the order both sides post them."""
    pidx = {p["name"]: i for i, p in enumerate(model["model"]["params"])}
    W = tr["world"]
    per = [([], []) for _ in range(W)]
    tid = 0

    def pieces(ci, r, p, start, size):
        for mp_ in tr["cfg"][ci][r]["params"]:
            if mp_["p"] != p:
                continue
            if mp_["expert"]:
                e = mp_["off"][0]
                if not (start[0] <= e < start[0] + size[0]):
                    continue
                yield e, mp_, tuple(slice(a - o, a - o + z) for a, o, z in zip(start[1:], mp_["off"][1:], size[1:]))
            else:
                yield None, mp_, tuple(slice(a - o, a - o + z) for a, o, z in zip(start, mp_["off"], size))

    for t in sorted(transfers, key=lambda t: (t["src_rank"], t["dst_rank"], t["task_id"])):
        p, s, d = pidx[t["param"]], t["src_rank"], t["dst_rank"]
        if not all(t["sizes"]) and t["sizes"]:
            continue  # nothing to move
        sp = {e: (m, sl) for e, m, sl in pieces(0, s, p, t["offsets"], t["sizes"])}
        dpc = {e: (m, sl) for e, m, sl in pieces(1, d, p, t["offsets"], t["sizes"])}
        for e in sorted(dpc, key=lambda x: -1 if x is None else x):
            if e not in sp:
                raise RuntimeError("transfer %s: rank %d holds no source of it" % (t["task_id"], s))
            (sm, ssl), (dm, dsl) = sp[e], dpc[e]
            per[s][0].append((sm["name"], d, True, ssl, dsl, tid))
            per[d][1].append((dm["name"], s, False, dsl, ssl, tid))
            tid += 1
    return per


def plant(bug, per, tr):
    """The planted bugs (--bug): a copy of Megatron's per-rank ops, changed."""
    if not bug:
        return per
    per = [(list(s), list(r)) for s, r in per]
    recvs = sorted((o[5], r, i) for r, (_, ro) in enumerate(per) for i, o in enumerate(ro))
    sends = {o[5]: (r, i) for r, (so, _) in enumerate(per) for i, o in enumerate(so)}
    if bug == "drop_transfer" and recvs:
        tid, r, i = recvs[-1]
        del per[r][1][i]
        sr, si = sends[tid]
        del per[sr][0][si]
    elif bug == "wrong_slice":
        # one transfer's box moved by one element along a dim, on both sides where both have room
        # (exact cover breaks), else on the sending side only (the bytes read are the wrong ones)
        def shift(sl, a, z, k, by):
            sl = list(sl) + [slice(None)] * (len(a) - len(sl))
            sl[k] = slice(a[k] + by, a[k] + by + z[k])
            return tuple(sl)
        for both in (True, False):
            for tid, r, i in recvs:
                sr, si = sends[tid]
                ro, so = per[r][1][i], per[sr][0][si]
                dm, sm = find_local(tr, 1, r, ro[0]), find_local(tr, 0, sr, so[0])
                da, dz = sl_box(ro[3], dm["shape"])
                sa, sz = sl_box(so[3], sm["shape"])
                for k in range(len(dz)):
                    if not dz[k]:
                        continue
                    for by in (1, -1):
                        ok_s = 0 <= sa[k] + by and sa[k] + sz[k] + by <= sm["shape"][k]
                        ok_d = 0 <= da[k] + by and da[k] + dz[k] + by <= dm["shape"][k]
                        if ok_s and (ok_d or not both):
                            if both:
                                per[r][1][i] = ro[:3] + (shift(ro[3], da, dz, k, by),) + ro[4:]
                            per[sr][0][si] = so[:3] + (shift(so[3], sa, sz, k, by),) + so[4:]
                            return per
    return per


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--role", choices=("planner", "backend"), default="backend")
    ap.add_argument("--bug", choices=("drop_transfer", "wrong_slice"))
    ap.add_argument("--log", help="append one JSON line per declined case (its reason) to this file")
    ap.add_argument("--case-timeout", type=float, default=25.0,
                    help="seconds the gloo world has for one case (a hung world is killed and restarted)")
    ap.add_argument("--min-world", type=int, default=4)
    ap.add_argument("--experts", choices=("grouped", "sequential"), default="grouped",
                    help="name expert weights as TEGroupedMLP does (experts.fc1.weight<k>, the default) "
                         "or as SequentialMLP does (experts.local_experts.<k>.fc1.weight)")
    args = ap.parse_args()
    global EXPERTS
    EXPERTS = args.experts
    drv = Driver(args)

    def bye(*_):
        drv.close()
        sys.exit(0)
    signal.signal(signal.SIGTERM, bye)
    name = "megatron-core %s resharding (gloo, torch %s)%s" % (MCORE, torch.__version__,
                                                               " bug=" + args.bug if args.bug else "")
    try:
        for line_ in sys.stdin:
            try:
                req = json.loads(line_)
            except ValueError:
                continue
            op = req.get("op")
            if op == "hello":
                caps = ["p2p_plan"] if args.role == "planner" else ["p2p_plan", "p2p_execute", "p2p_any_plan"]
                send({"ok": True, "version": 1, "name": name, "capabilities": caps, "megatron_core": MCORE})
                continue
            if op == "bye":
                break
            ans = {"id": req.get("id")}
            try:
                if op == "p2p_plan":
                    ans.update({"ok": True, "transfers": drv.p2p_plan(req["model"])})
                elif op == "p2p_execute":
                    ans.update({"ok": True, "dst": drv.p2p_execute(req["model"], req.get("plan"), req.get("src") or [])})
                else:
                    ans.update({"ok": False, "unsupported": True, "message": "op %r not implemented" % op})
            except Decline as e:
                reason = str(e)
                drv.declines[e.cat] += 1
                ans.update({"ok": False, "unsupported": True, "message": "megatron-core %s: %s" % (MCORE, reason)})
                if args.log:
                    with open(args.log, "a") as f:
                        f.write(json.dumps({"op": op, "reason": e.cat, "message": reason}) + "\n")
            except Exception as e:
                traceback.print_exc(file=sys.stderr)
                ans.update({"ok": False, "message": "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:300])})
            send(ans)
    finally:
        if drv.declines:
            print("megatron p2p: declined by reason: %s" % dict(drv.declines), file=sys.stderr)
        drv.close()


if __name__ == "__main__":
    main()
