"""storage.py - torch.distributed.checkpoint (DCP) storage layers over reshard checkpoints.

ReshardStorageReader: `dcp.load(state_dict, storage_reader=ReshardStorageReader(path))` fills
tensors or DTensors of any layout from a reshard checkpoint (a root with `latest` or a step
directory). metadata.json becomes DCP Metadata (one ChunkStorageMetadata per stored box; a
distributed optimizer's flat fragments of one box are reassembled into that box). Every rule of the
C readers is applied (reshard_dcp.ckpt.Reader): a damaged or hostile checkpoint raises
CheckpointError naming the file and the key, never returns other bytes or leaves a region unfilled.
Objects (raw bytes) are not offered to DCP, which expects torch.save'd bytes.

ReshardStorageWriter: `dcp.save(state_dict, storage_writer=ReshardStorageWriter(root, step))`
writes ROOT/step_N/rank_<i>.safetensors (one per rank with data; each chunk DCP's planner assigns
it: replicas are saved once) and commits metadata.json and `latest` from the coordinator. Only
tensors are saved: a non-tensor entry is refused (naming it) before anything is written.
"""
import dataclasses
import os

import torch
from torch.distributed.checkpoint.metadata import (
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    TensorProperties,
    TensorStorageMetadata,
)
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner, SavePlan, SavePlanner, WriteItemType
from torch.distributed.checkpoint.storage import StorageReader, StorageWriter, WriteResult
from torch.futures import Future

from . import ckpt

DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool, "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}
NAMES = {v: k for k, v in DTYPES.items()}


def dtype_name(dt, key):
    if dt not in NAMES:
        raise ckpt.CheckpointError(f"key '{key}': dtype {dt} has no reshard equivalent ({', '.join(DTYPES)})")
    return NAMES[dt]


def tensor_bytes(t):
    """A tensor's raw bytes in C order (any dtype, NaN payloads kept), as a numpy uint8 array."""
    t = t.detach().to("cpu").contiguous().reshape(-1)
    return t.view(torch.uint8).numpy()


@dataclasses.dataclass
class _Box:
    key: str
    off: tuple
    sizes: tuple
    dtype: torch.dtype


class ReshardStorageReader(StorageReader):
    def __init__(self, path):
        super().__init__()
        self.path = str(path)
        self.reader = None
        self.storage = {}

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = str(checkpoint_id)
        if self.reader is not None:
            self.reader.close()
        self.reader = None

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        p = str(checkpoint_id)
        return os.path.exists(os.path.join(p, "metadata.json")) or os.path.exists(os.path.join(p, "latest"))

    def read_metadata(self, *args, **kwargs):
        if self.reader is None:
            self.reader = ckpt.Reader(self.path)
        r = self.reader
        sdm, storage = {}, {}
        for key, t in r.tensors.items():
            dt = DTYPES[t.dtype]
            metas = []
            for off, sizes in sorted(r.boxes(key)):
                metas.append(ChunkStorageMetadata(offsets=torch.Size(off), sizes=torch.Size(sizes)))
                storage[MetadataIndex(key, off)] = _Box(key, off, sizes, dt)
            sdm[key] = TensorStorageMetadata(properties=TensorProperties(dtype=dt), size=torch.Size(t.shape),
                                             chunks=metas)
        return Metadata(state_dict_metadata=sdm, storage_data=storage)

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        self.storage = metadata.storage_data
        if self.reader is None:  # a rank that did not read the metadata itself
            self.reader = ckpt.Reader(self.path)

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner):
        cache = {}
        for item in plan.items:
            if item.type != LoadItemType.TENSOR:
                raise ckpt.CheckpointError(f"{item.dest_index.fqn}: reshard's objects are raw bytes, not torch.save'd")
            idx = MetadataIndex(item.storage_index.fqn, tuple(item.storage_index.offset))
            box = self.storage[idx]
            if idx not in cache:
                b = bytearray(self.reader.read_box(box.key, (box.off, box.sizes)))
                n = ckpt.numel(box.sizes)
                cache = {idx: torch.frombuffer(b, dtype=box.dtype).reshape(box.sizes) if n else
                         torch.empty(box.sizes, dtype=box.dtype)}
            t = cache[idx]
            for d, (o, l) in enumerate(zip(item.storage_offsets, item.lengths)):
                t = t.narrow(d, o, l)
            target = planner.resolve_tensor(item).detach()
            if target.size() != t.size():
                raise ckpt.CheckpointError(f"{idx.fqn}: request of {list(target.size())} for a stored region of "
                                           f"{list(t.size())}")
            target.copy_(t)
            planner.commit_tensor(item, target)
        fut = Future()
        fut.set_result(None)
        return fut


class ReshardStorageWriter(StorageWriter):
    def __init__(self, root, step, block=1 << 20):
        super().__init__()
        self.root, self.step, self.block = str(root), int(step), int(block)
        if self.block < 64 or self.block > 1 << 30 or self.block & (self.block - 1):
            raise ValueError(f"block {block}: a power of two from 64 B to 1 GiB")

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.root = str(checkpoint_id)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return True

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        self.is_coordinator = is_coordinator
        d = ckpt.step_path(self.root, self.step)
        if os.path.lexists(os.path.join(d, "metadata.json")):
            raise ckpt.CheckpointError(f"{d} already holds a checkpoint: saving over it could tear it "
                                       "(remove it or save another step)")

    def prepare_local_plan(self, plan: SavePlan):
        bad = [it.index.fqn for it in plan.items if it.type == WriteItemType.BYTE_IO]
        if bad:
            raise ckpt.CheckpointError(f"non-tensor entries {bad[:8]}{' ...' if len(bad) > 8 else ''}: a reshard "
                                       "checkpoint holds tensors only (keep them apart, or save them with torch.save)")
        for it in plan.items:
            dtype_name(it.tensor_data.properties.dtype, it.index.fqn)
            if not ckpt.key_ok(it.index.fqn):
                raise ckpt.CheckpointError(f"key {it.index.fqn!r}: not 1..1023 printable ASCII characters other "
                                           "than '\"' and '\\'")
        return plan

    def prepare_global_plans(self, plans):
        return self.prepare_global_plan(plans)

    def prepare_global_plan(self, plans):
        return [dataclasses.replace(p, storage_data=f"rank_{i}.safetensors") for i, p in enumerate(plans)]

    def write_data(self, plan: SavePlan, planner: SavePlanner):
        fut = Future()
        if not plan.items:
            fut.set_result([])
            return fut
        d = ckpt.step_path(self.root, self.step)
        os.makedirs(d, exist_ok=True)
        ckpt.dir_ok(d)
        entries, info = [], []
        for it in plan.items:
            t = planner.resolve_data(it)
            chunk = it.tensor_data.chunk
            off, sizes = tuple(int(x) for x in chunk.offsets), tuple(int(x) for x in chunk.sizes)
            if tuple(t.shape) != sizes:
                raise ckpt.CheckpointError(f"key '{it.index.fqn}': data of shape {list(t.shape)} for a chunk of {list(sizes)}")
            dn = dtype_name(it.tensor_data.properties.dtype, it.index.fqn)
            name = ckpt.chunk_name(it.index.fqn, off)
            entries.append((name, dn, sizes, tensor_bytes(t)))
            info.append((it, name, off, sizes))
        fmeta, locs = ckpt.write_data_file(d, plan.storage_data, entries, self.block)
        res = []
        for k, (it, name, off, sizes) in enumerate(info):
            o, n = locs[name]
            res.append(WriteResult(index=it.index, size_in_bytes=n,
                                   storage_data={"file": fmeta["name"], "offset": o, "length": n, "offsets": list(off),
                                                 "sizes": list(sizes), "fileinfo": fmeta if k == 0 else None}))
        fut.set_result(res)
        return fut

    def finish(self, metadata: Metadata, results):
        files, tensors = [], {}
        for key, m in metadata.state_dict_metadata.items():
            if not isinstance(m, TensorStorageMetadata):
                raise ckpt.CheckpointError(f"non-tensor entry '{key}': a reshard checkpoint holds tensors only")
            tensors[key] = {"dtype": dtype_name(m.properties.dtype, key), "shape": [int(x) for x in m.size],
                            "chunks": []}
        for rank_results in results:
            for r in rank_results:
                s = r.storage_data
                if s["fileinfo"] is not None:
                    files.append(s["fileinfo"])
                tensors[r.index.fqn]["chunks"].append({"offsets": s["offsets"], "sizes": s["sizes"], "file": s["file"],
                                                       "offset": s["offset"], "length": s["length"]})
        ckpt.commit(self.root, self.step, sorted(files, key=lambda f: f["name"]), tensors)
