"""mcore_ckpt_ops.py - what one rank runs inside a pool worker (mcore_ckpt_pool.py): a sharded state
dict of Megatron-Core ShardedTensors (some behind a ShardedTensorFactory), one ShardedObject and
common entries, saved with `dist_checkpointing.save` or loaded with `dist_checkpointing.load`
(default `torch_dist` strategies, the default gloo process group of the pool).

An item is a dict: key, dtype (reshard's name), gshape (global shape), start, size (the rank's box),
replica (its replica id: 0 = main), factory (None, or the row H at which the "split" factory cuts
the global tensor along dim 0 into KEY_w = rows [0, H) and KEY_v = rows [H, G)), data (bytes, save
only). Planted bugs (`bug`), each for the check that the harness catches it: rename_key (the save
writes one tensor under KEY_renamed: the load cannot find KEY), wrong_slice (the save writes a box's
bytes in another order -- rows reversed, or elements when it has one row -- under the right key,
shape and offset: plausible data that only the oracle comparison tells from the right one),
factory_merge (the load's merge puts V before W: right shape, wrong rows), drop_shard (the save
leaves out one main-replica box of a key that has several, so the key is not covered).
"""
import warnings

import torch

DT = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "I64": torch.int64,
    "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
}

OBJ_KEY = "conform.state_description"


def _preload():
    import warnings as w
    w.filterwarnings("ignore")
    import megatron.core.dist_checkpointing  # noqa: F401  (heavy: at worker start, not in a case)


def cpu_workaround():
    """Megatron-Core 0.16.1's torch_dist save calls torch.cuda.synchronize() unconditionally
    (FileSystemWriterAsync.preload_tensors, non_blocking=True), which raises on a machine with no
    CUDA driver (tools/megatron/repro/cuda_sync_on_cpu.py; upstream NVIDIA/Megatron-LM#6270, open).
    The save's finalization (state_dict_saver.save_state_dict_async_finalize) then builds its
    failure flag on torch.cuda.current_device(), which raises the same way. With no CUDA there is
    nothing to synchronize and the flag belongs on the CPU (gloo): synchronize is a no-op and
    current_device answers "cpu" -- only when CUDA is unavailable."""
    if not torch.cuda.is_available() and not getattr(torch.cuda.synchronize, "_reshard_noop", False):
        def synchronize(device=None):
            return None

        def current_device():
            return "cpu"
        synchronize._reshard_noop = True
        torch.cuda.synchronize = synchronize
        torch.cuda.current_device = current_device


def _mc():
    warnings.filterwarnings("ignore")
    cpu_workaround()
    from megatron.core import dist_checkpointing as dc
    from megatron.core.dist_checkpointing import mapping, validation
    return dc, mapping, validation


def tensor_of(raw, dtype, shape):
    n = 1
    for s in shape:
        n *= s
    if n == 0:
        return torch.empty(shape, dtype=DT[dtype])
    if dtype == "BOOL":
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).reshape(shape).to(torch.bool)
    return torch.frombuffer(bytearray(raw), dtype=DT[dtype]).reshape(shape).clone()


def bytes_of(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    if t.numel() == 0:
        return b""
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def _regular(gshape, start, size, reg=True):
    """axis_fragmentations when every box of the key sits on a regular grid (`reg`, decided by the
    parent over all ranks: Megatron's validation wants one kind per key) and so does this one, else
    None (Megatron's irregular path: CheckpointableShardedTensor, torch >= 2.6)."""
    if not reg:
        return None
    frag = []
    for g, s, z in zip(gshape, start, size):
        if z == 0 or g % z or s % z:
            return None
        frag.append(g // z)
    return tuple(frag)


def _sh_ten(mapping, key, data, gshape, start, replica, reg):
    size = tuple(data.shape)
    return mapping.ShardedTensor(key, data, data.dtype, size, tuple(gshape), tuple(start),
                                 _regular(gshape, start, size, reg), replica_id=replica)


def _split_factory(mapping, it, data, bug):
    """A ShardedTensorFactory: the box's rows in [0, H) go to KEY_w (global rows [0, H)), the rest to
    KEY_v (global rows [H, G) shifted to 0); merge concatenates them back (a fused [W; V] tensor
    stored as two, as Megatron's GLU factory does, cut on the global tensor so any layout reads
    it)."""
    key, gshape, start, size, h = it["key"], it["gshape"], it["start"], it["size"], it["factory"]
    s0, z0 = start[0], size[0]
    nw = max(0, min(s0 + z0, h) - s0)

    def build(k, t, replica_id, flattened_range):
        out = []
        if nw > 0:
            out.append(_sh_ten(mapping, k + "_w", t.narrow(0, 0, nw), [h] + list(gshape[1:]), start, replica_id,
                                   it["reg"][0]))
        if z0 - nw > 0:
            vs = [s0 + nw - h] + list(start[1:])
            out.append(_sh_ten(mapping, k + "_v", t.narrow(0, nw, z0 - nw), [gshape[0] - h] + list(gshape[1:]),
                               vs, replica_id, it["reg"][1]))
        return out

    def merge(parts):
        if bug == "factory_merge" and len(parts) == 2:
            parts = [parts[1], parts[0]]
        return torch.cat(parts, 0) if len(parts) > 1 else parts[0]

    return mapping.ShardedTensorFactory(key, data, build, merge, replica_id=it["replica"])


def _entry(mapping, it, data, bug):
    if it["factory"] is not None:
        return _split_factory(mapping, it, data, bug)
    return _sh_ten(mapping, it["key"], data, it["gshape"], it["start"], it["replica"], it["reg"][0])


def _skip_empty(it):
    """An empty box has nothing to save or load: no entry (the other ranks tile the key). Saved, an
    empty chunk whose offset equals a non-empty chunk's (torch.chunk's empty shards start where the
    last full one does) shadows it in DCP's (key, offset) index and the checkpoint cannot be loaded
    ("mismatch sizes torch.Size([1]) vs torch.Size([0])"): docs/conformance.md, dist_checkpointing,
    finding 5."""
    return 0 in it["size"]


def wrong_slice(raw, size):
    """The box's bytes reordered (rows reversed; a box of one row: its elements reversed), done on the
    bytes so every dtype takes it (torch has no flip for float8); unchanged when the box has fewer
    than two elements."""
    n = 1
    for s in size:
        n *= s
    if n < 2:
        return raw
    rows = size[0] if size and size[0] >= 2 else n
    step = len(raw) // rows
    return b"".join(raw[r * step:(r + 1) * step] for r in reversed(range(rows)))


def save(rank, world, items, ckdir, desc, bug):
    dc, mapping, _ = _mc()
    sd = {}
    renamed = False
    for i, it in enumerate(items):
        if _skip_empty(it):
            continue
        if bug == "drop_shard" and it.get("drop"):
            continue  # the parent marked one main box of a key that has several
        raw = it["data"]
        if bug == "wrong_slice":
            raw = wrong_slice(raw, it["size"])
        data = tensor_of(raw, it["dtype"], it["size"])
        key = it["key"]
        if bug == "rename_key" and not renamed:
            key, renamed = key + "_renamed", True
        it = dict(it, key=key)
        sd["t%d" % i] = _entry(mapping, it, data, bug)
    sd["obj"] = mapping.ShardedObject(OBJ_KEY, desc, (1,), (0,), replica_id=rank)
    sd["common"] = {"format": "reshard-conform megatron", "description": desc}
    dc.save(sd, ckdir)
    return True


def load(rank, world, items, ckdir, desc, bug):
    dc, mapping, validation = _mc()
    sd, out = {}, {}
    for i, it in enumerate(items):
        if _skip_empty(it):
            out[i] = b""
            continue
        data = torch.empty(it["size"], dtype=DT[it["dtype"]])
        if data.numel():
            data.fill_(0)
        sd["t%d" % i] = _entry(mapping, it, data, bug)
    sd["obj"] = mapping.ShardedObject(OBJ_KEY, None, (1,), (0,), replica_id=rank)
    # strict RAISE_ALL (and every mode that lists the checkpoint's keys) fails on torch 2.15 in 0.16.1
    # (tools/megatron/repro/tensor_properties_strides.py): the default mode, which does not
    got = dc.load(sd, ckdir)
    if got.get("obj") != desc:
        raise RuntimeError("ShardedObject %s loaded %r, the load's state is %r" % (OBJ_KEY, got.get("obj"), desc))
    common = got.get("common")
    if not isinstance(common, dict) or common.get("description") != desc:
        raise RuntimeError("common entry 'common' loaded %r, expected the description %r" % (common, desc))
    for i, it in enumerate(items):
        if i in out:
            continue
        t = got["t%d" % i]
        if tuple(t.shape) != tuple(it["size"]) or t.dtype != DT[it["dtype"]]:
            raise RuntimeError("%s: loaded %s %s, expected %s %s" % (it["key"], t.dtype, tuple(t.shape),
                                                                      DT[it["dtype"]], tuple(it["size"])))
        out[i] = bytes_of(t)
    return [out[i] for i in range(len(items))]


_preload()
