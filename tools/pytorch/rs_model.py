"""rs_model.py - the parts of the contract the recorder needs, in Python: the case JSON, torch.chunk
boxes (SPEC 4) and the deterministic test values (SPEC 8, the same formulas as core/values.c,
bit for bit), so that PyTorch is fed exactly the source tensors ref builds with rs_make_source.

Only numpy is needed here; torch is imported by rs_torch.py.
"""
import itertools
import json
import re

import numpy as np

M64 = (1 << 64) - 1

DTYPES = {
    # name: (numpy dtype of the raw bits, element size, reducible)
    "F64": (np.uint64, 8, True),
    "F32": (np.uint32, 4, True),
    "F16": (np.uint16, 2, True),
    "BF16": (np.uint16, 2, True),
    "F8_E4M3": (np.uint8, 1, False),
    "F8_E5M2": (np.uint8, 1, False),
    "I64": (np.uint64, 8, True),
    "I32": (np.uint32, 4, True),
    "I16": (np.uint16, 2, True),
    "I8": (np.uint8, 1, True),
    "U8": (np.uint8, 1, True),
    "BOOL": (np.uint8, 1, False),
}

OPS = ("sum", "avg", "min", "max")


# ---------------------------------------------------------------- placements and cases

class Placement:
    """kind: 'R', 'S' or 'P'; dim for S (normalized), op for P."""

    __slots__ = ("kind", "dim", "op")

    def __init__(self, kind, dim=0, op="sum"):
        self.kind, self.dim, self.op = kind, dim, op

    def __eq__(self, o):
        return (self.kind, self.dim if self.kind == "S" else 0, self.op if self.kind == "P" else "") == (
            o.kind, o.dim if o.kind == "S" else 0, o.op if o.kind == "P" else "")

    def __str__(self):
        if self.kind == "S":
            return "S(%d)" % self.dim
        if self.kind == "P":
            return "P(%s)" % self.op
        return "R"

    __repr__ = __str__


_PL_RE = re.compile(r"^(R|S\(?(-?\d+)\)?|P(?:\((sum|avg|min|max)\))?)$")


def parse_placement(text, ndim):
    m = _PL_RE.match(text.strip())
    if not m:
        raise ValueError("bad placement %r" % text)
    if text.startswith("R"):
        return Placement("R")
    if text.startswith("S"):
        d = int(m.group(2))
        if d < 0:
            d += ndim
        return Placement("S", dim=d)
    return Placement("P", op=m.group(3) or "sum")


class Sharding:
    def __init__(self, placements, order):
        self.p = placements          # list of Placement, one per mesh dim
        self.order = order           # dict tensor_dim -> list of mesh dims (only sharded dims)

    @staticmethod
    def from_json(obj, tensor_ndim):
        pl = [parse_placement(t, tensor_ndim) for t in obj["placements"]]
        order = {}
        for m, p in enumerate(pl):
            if p.kind == "S":
                order.setdefault(p.dim, []).append(m)
        so = obj.get("shard_order")
        if so:
            order = {}
            for e in so:
                d = e["tensor_dim"]
                if d < 0:
                    d += tensor_ndim
                if e["mesh_dims"]:
                    order[d] = list(e["mesh_dims"])
        return Sharding(pl, order)

    def to_json(self):
        return {"placements": [str(p) for p in self.p],
                "shard_order": [{"tensor_dim": d, "mesh_dims": list(self.order[d])}
                                for d in sorted(self.order) if self.order[d]]}

    def is_default_order(self):
        return all(list(v) == sorted(v) for v in self.order.values())

    def has_partial(self):
        return any(p.kind == "P" for p in self.p)

    def text(self):
        """PyTorch's format_shard_order_str."""
        out = ""
        for m, p in enumerate(self.p):
            out += str(p)
            if p.kind == "S" and len(self.order.get(p.dim, [])) > 1:
                out += "[%d]" % self.order[p.dim].index(m)
        return out


class Case:
    def __init__(self, obj):
        self.obj = obj
        self.name = obj.get("name", "")
        self.mesh_shape = [int(x) for x in obj["mesh"]["shape"]]
        self.nranks = int(np.prod(self.mesh_shape)) if self.mesh_shape else 1
        ranks = obj["mesh"].get("ranks")
        self.ranks = list(ranks) if ranks is not None else list(range(self.nranks))
        self.shape = [int(x) for x in obj["tensor"]["shape"]]
        self.dtype = obj["tensor"]["dtype"]
        self.ndim = len(self.shape)
        self.src = Sharding.from_json(obj["src"], self.ndim)
        self.dst = Sharding.from_json(obj["dst"], self.ndim)
        seed = obj.get("seed", 0)
        self.seed = int(seed, 0) if isinstance(seed, str) else int(seed or 0)
        v = obj.get("values")
        if v is None:
            v = "exact" if (self.src.has_partial() or self.dst.has_partial()) else "bits"
        self.values = v
        self.planner = obj.get("planner") or "auto"
        self.cost = obj.get("cost") or "seed"

    def coords(self):
        return [list(c) for c in itertools.product(*[range(m) for m in self.mesh_shape])]

    def case_json(self):
        """The case part only (what rs_case_to_json writes), for fixture lines."""
        o = {}
        if self.name:
            o["name"] = self.name
        o["mesh"] = {"shape": self.mesh_shape, "ranks": self.ranks}
        o["tensor"] = {"shape": self.shape, "dtype": self.dtype}
        o["src"] = self.src.to_json()
        o["dst"] = self.dst.to_json()
        o["seed"] = self.seed if self.seed <= (1 << 53) else str(self.seed)
        o["values"] = self.values
        o["planner"] = self.planner
        o["cost"] = self.cost
        return o


def load_cases(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(Case(json.loads(line)))
    return out


# ---------------------------------------------------------------- boxes (SPEC 4)

def split(length, n, i):
    if length % n == 0:
        return length // n, i * (length // n)
    c = (length + n - 1) // n
    start = c * i
    if start >= length:
        return 0, length
    return min(length, start + c) - start, start


def box(case, sh, coord):
    """(start, size) of a rank's box, nested torch.chunk splits in shard order."""
    start, size = [], []
    for d in range(case.ndim):
        st, sz = 0, case.shape[d]
        for m in sh.order.get(d, []):
            sz, off = split(sz, case.mesh_shape[m], coord[m])
            st += off
        start.append(st)
        size.append(sz)
    return start, size


def shape_offset(case, sh, coord):
    """rs_local_shape_offset: empty sharded dims report offset = global size."""
    start, size = box(case, sh, coord)
    off = list(start)
    for d in range(case.ndim):
        if size[d] == 0 and sh.order.get(d):
            off[d] = case.shape[d]
    return size, off


# ---------------------------------------------------------------- values (SPEC 8, core/values.c)

def _u(x):
    return np.asarray(x, dtype=np.uint64)


def mix64(x):
    x = _u(x)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def hash3(a, b, c):
    return mix64(_u(a) ^ mix64(_u(b) ^ mix64(_u(c))))


STREAM_BITS, STREAM_EXACT, STREAM_PIECE, STREAM_ORDER = 1, 2, 3, 4


def exact_mode(case):
    return case.values == "exact" and DTYPES[case.dtype][2]


def order_mode(case):
    return case.values == "order" and DTYPES[case.dtype][2]


def exact_range(case):
    unit = case.nranks
    navg, levels = 1, 0
    for m in range(len(case.mesh_shape)):
        p, q = case.src.p[m], case.dst.p[m]
        if p.kind == "P":
            levels += 1
        # an avg dim on either side is summed n-fold somewhere
        if (p.kind == "P" and p.op == "avg") or (q.kind == "P" and q.op == "avg"):
            navg *= case.mesh_shape[m]
    # partitioned values k * G / n must stay exact too: the bound is on unit * |U| itself
    budget = {
        "F64": (1 << 40) // unit, "F32": (1 << 24) // unit, "F16": (1 << 11) // unit,
        "BF16": (1 << 8) // unit, "I64": (1 << 40) // unit, "I32": (2**31 - 1) // unit,
        "I16": 32767 // unit, "I8": 127 // unit, "U8": 255 // unit,
    }.get(case.dtype, 0)
    # C integer division truncates toward zero
    num = budget - 2 * levels
    umax = -((-num) // navg) if num < 0 else num // navg
    umax = min(umax, 1000)
    if umax < 1:
        # rs_case_check_values refuses the case: never filled with zeros
        raise ValueError("values: %s cannot hold exact values on %d ranks" % (case.dtype, case.nranks))
    lo = 0 if case.dtype == "U8" else -umax
    return unit, lo, umax


def exact_units(case, lo, hi, idx):
    h = hash3(case.seed, STREAM_EXACT, idx)
    span = np.uint64(hi - lo + 1)
    u = lo + (h % span).astype(np.int64)
    # element 0 is never zero, so no source of a non-empty tensor is all zeros
    return np.where((u == 0) & (_u(idx) == 0), hi, u)


# ---- order values (SPEC 8 `order`, core/values.c order_value)

def _ceil_log2(n):
    k = 0
    while (1 << k) < n:
        k += 1
    return k


def _minmax_only(case):
    for sh in (case.src, case.dst):
        for p in sh.p:
            if p.kind == "P" and p.op in ("sum", "avg"):
                return False
    return case.src.has_partial() or case.dst.has_partial()


def order_int_bound(case):
    mx = {"I64": 1 << 40, "I32": 2**31 - 1, "I16": 32767, "I8": 127, "U8": 255}[case.dtype]
    return mx if _minmax_only(case) else mx // case.nranks


def _order_value(case, h, idx):
    U = np.uint64
    h = _u(h)
    idx = _u(idx)
    with np.errstate(over="ignore"):
        h2 = mix64(h ^ U(0xD1B54A32D192ED03))
    zero = ((h2 & U(31)) == U(0)) & (idx != U(0))
    neg = (h2 >> U(5)) & U(1)
    dt = case.dtype
    if dt in ("F64", "F32", "BF16", "F16"):
        if dt == "F64":
            e = ((h2 >> U(8)) % U(25)).astype(np.int64) - 12 + 1023
            b = np.where(zero, neg << U(63), (neg << U(63)) | (e.astype(U) << U(52)) | (h & U(0xFFFFFFFFFFFFF)))
            return b.astype(np.uint64)
        if dt == "F32":
            e = ((h2 >> U(8)) % U(25)).astype(np.int64) - 12 + 127
            b = np.where(zero, neg << U(31), (neg << U(31)) | (e.astype(U) << U(23)) | (h & U(0x7FFFFF)))
            return b.astype(np.uint32)
        if dt == "BF16":
            e = ((h2 >> U(8)) % U(17)).astype(np.int64) - 8 + 127
            b = np.where(zero, neg << U(15), (neg << U(15)) | (e.astype(U) << U(7)) | (h & U(0x7F)))
            return b.astype(np.uint16)
        ehi = 13 - _ceil_log2(case.nranks)
        elo = ehi - 8
        e = elo + ((h2 >> U(8)) % U(ehi - elo + 1)).astype(np.int64) + 15
        b = np.where(zero, neg << U(15), (neg << U(15)) | (e.astype(U) << U(10)) | (h & U(0x3FF)))
        return b.astype(np.uint16)
    bound = order_int_bound(case)
    lo = 0 if dt == "U8" else (-bound - 1 if _minmax_only(case) else -bound)
    v = lo + (h % U(bound - lo + 1)).astype(np.int64)
    v = np.where((v == 0) & (idx == U(0)), bound, v)
    return _store_units(dt, v)


def _order_piece(case, coord, idx):
    key = hash3(case.seed, STREAM_ORDER, idx)
    if coord is not None:
        for m, p in enumerate(case.src.p):
            if p.kind == "P":
                key = hash3(key, m, coord[m])
    return _order_value(case, key, idx)


def _piece_of(v, op, n, coord, key, is_unsigned):
    """Vectorized piece_of: v int64 array (units), key uint64 array."""
    if op in ("min", "max"):
        keep = (mix64(key) % np.uint64(n)).astype(np.int64)
        with np.errstate(over="ignore"):
            k = (mix64(key ^ (np.uint64(coord + 1) * np.uint64(0x9E37))) % np.uint64(3)).astype(np.int64)
        if op == "min":
            other = v + k
        else:
            if is_unsigned:
                k = np.minimum(k, v)
            other = v - k
        return np.where(keep == coord, v, other)
    total = v * n if op == "avg" else v.copy()
    sign = np.where(total < 0, -1, 1).astype(np.int64)
    rem = np.abs(total)
    for j in range(n):
        if j == n - 1:
            part = rem
        else:
            cap = (2 * rem) // (n - j) + 1
            with np.errstate(over="ignore"):
                h = mix64(key + np.uint64(j) * np.uint64(0x632BE59BD9B4E019))
            part = (h % cap.astype(np.uint64)).astype(np.int64)
            part = np.minimum(part, rem)
        if j == coord:
            return sign * part
        rem = rem - part
    return np.zeros_like(v)


def _store_units(dtype, v):
    """int64 array of exact values -> raw bits array of the dtype."""
    if dtype == "F64":
        return v.astype(np.float64).view(np.uint64)
    if dtype == "F32":
        return v.astype(np.float32).view(np.uint32)
    if dtype == "F16":
        # exact integers within the f16 range: the conversion is exact
        return v.astype(np.float32).astype(np.float16).view(np.uint16)
    if dtype == "BF16":
        f = v.astype(np.float32).view(np.uint32).astype(np.uint64)
        # SPEC 1 rounding (exact here anyway): (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return ((f + np.uint64(0x7FFF) + ((f >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)).astype(np.uint16)
    if dtype in ("I64",):
        return v.astype(np.int64).view(np.uint64)
    if dtype == "I32":
        return v.astype(np.int32).view(np.uint32)
    if dtype == "I16":
        return v.astype(np.int16).view(np.uint16)
    if dtype == "I8":
        return v.astype(np.int8).view(np.uint8)
    if dtype == "U8":
        return v.astype(np.uint8)
    raise ValueError(dtype)


def _bits(case, idx):
    h = hash3(case.seed, STREAM_BITS, idx)
    raw, _, _ = DTYPES[case.dtype]
    if case.dtype == "BOOL":
        h = h & np.uint64(1)
    return h.astype(raw)  # keeps the low bytes, as memcpy on little-endian does


def value_global(case, idx):
    idx = _u(idx)
    if order_mode(case):
        return _order_piece(case, None, idx)
    if not exact_mode(case):
        return _bits(case, idx)
    unit, lo, hi = exact_range(case)
    return _store_units(case.dtype, exact_units(case, lo, hi, idx) * unit)


def value_piece(case, coord, idx):
    idx = _u(idx)
    if order_mode(case):
        return _order_piece(case, coord if case.src.has_partial() else None, idx)
    if not exact_mode(case) or not case.src.has_partial():
        return value_global(case, idx)
    unit, lo, hi = exact_range(case)
    v = exact_units(case, lo, hi, idx)
    key = hash3(case.seed, STREAM_PIECE, idx)
    for m, p in enumerate(case.src.p):
        if p.kind != "P":
            continue
        v = _piece_of(v, p.op, case.mesh_shape[m], coord[m], key, case.dtype == "U8")
        key = hash3(key, m, coord[m])
    return _store_units(case.dtype, v * unit)


def flat_indices(case, start, size):
    """Row-major global flat indices of a box, as a uint64 array of the box's shape."""
    if case.ndim == 0:
        return np.zeros((), dtype=np.uint64)
    strides = [1] * case.ndim
    for d in range(case.ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * case.shape[d + 1]
    idx = np.zeros(size, dtype=np.uint64)
    for d in range(case.ndim):
        ax = (np.arange(size[d], dtype=np.uint64) + np.uint64(start[d])) * np.uint64(strides[d])
        shp = [1] * case.ndim
        shp[d] = size[d]
        idx = idx + ax.reshape(shp)
    return idx


def make_source(case):
    """Raw-bits numpy arrays of every mesh position's source local (rs_make_source)."""
    out = []
    for coord in case.coords():
        start, size = box(case, case.src, coord)
        idx = flat_indices(case, start, size)
        out.append(np.asarray(value_piece(case, coord, idx)).reshape(size))
    return out


def make_global(case):
    start = [0] * case.ndim
    idx = flat_indices(case, start, list(case.shape))
    return np.asarray(value_global(case, idx)).reshape(case.shape)
