"""dcp_import.py - PyTorch DCP's default format (FileSystemWriter: `.metadata` + `*.distcp`) into a
reshard checkpoint. Needs torch (each tensor in a .distcp file is a torch.save archive).

What is checked before a byte is written:
- `.metadata` is unpickled by a restricted unpickler that admits only the classes DCP's metadata is
  made of (Metadata, TensorStorageMetadata, ChunkStorageMetadata, ... torch.Size, dtypes) and
  refuses any other global, so a hostile `.metadata` cannot run code (torch's own reader calls
  pickle.load on it); every field then has the type DCP writes;
- every file of the directory is `.metadata` or a data file the metadata names (anything else is
  stale or unexplained and refused, naming it; Megatron-Core's `metadata.json` and `common.pt`
  beside a torch_dist save are its non-tensor state, left out with --skip-non-tensors); every file opened under reshard's read rule (no
  links, regular files only);
- the chunks of every tensor tile its global shape (no gap, no overlap), every chunk has exactly one
  storage entry and every storage entry belongs to a chunk; data file names are plain names; every
  byte range lies inside its file and no two share bytes; no storage transforms (compression);
- each item read back with torch.load(weights_only=True) must be a tensor of the chunk's dtype and
  shape. Its bytes are written unchanged (NaN payloads, -0, subnormals kept).
Not detectable: DCP writes no checksums, so a changed byte inside a tensor's payload, or two
same-shaped chunks whose byte ranges were exchanged in `.metadata`, import as they read.
"""
import io
import json
import os
import pickle
import stat
import sys

import torch
from torch.distributed.checkpoint import metadata as dmd
from torch.distributed.checkpoint.filesystem import _StorageInfo

from . import ckpt
from .storage import dtype_name, tensor_bytes

_ALLOWED = {
    ("torch.distributed.checkpoint.metadata", n) for n in (
        "Metadata", "MetadataIndex", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
        "TensorProperties", "StorageMeta", "_MEM_FORMAT_ENCODING")
} | {("torch.distributed.checkpoint.filesystem", "_StorageInfo"), ("torch", "Size"), ("torch._utils", "_get_layout"), ("torch.serialization", "_get_layout"),
      ("pathlib", "PosixPath"), ("pathlib._local", "PosixPath"), ("collections", "OrderedDict")}


# Megatron-Core's torch_dist save (dist_checkpointing 0.16.1, state_dict_saver.py) attaches every rank's
# SavePlan to the Metadata it writes (`metadata.all_local_plans`, read back only by its own check that
# cached metadata may be reused). The importer has no use for them: the planner's classes are read as
# inert placeholders (no constructor or method of theirs runs), the attribute is dropped, and a
# placeholder anywhere else fails the type checks of load_metadata.
_PLAN_CLASSES = {("torch.distributed.checkpoint.planner", n) for n in (
    "SavePlan", "WriteItem", "WriteItemType", "TensorWriteData", "BytesIOWriteData")}


class _Inert:
    """A stand-in for a planner class in `all_local_plans`: holds whatever it is given, runs nothing."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, path):
        super().__init__(f)
        self.path = path

    def find_class(self, module, name):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if (module, name) in _PLAN_CLASSES:
            return _Inert
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise ckpt.CheckpointError(f"{self.path}: refers to {module}.{name}, which DCP metadata never holds "
                                   "(refused: unpickling it could run code)")


def load_metadata(path):
    """DCP's .metadata, unpickled with the restricted unpickler and its fields' types checked."""
    with ckpt.open_read(path) as f:
        b = f.read()
    try:
        md = _Unpickler(io.BytesIO(b), path).load()
    except ckpt.CheckpointError:
        raise
    except Exception as e:  # any malformed pickle
        raise ckpt.CheckpointError(f"{path}: not a DCP metadata file ({type(e).__name__}: {e})") from None
    if not isinstance(md, dmd.Metadata) or not isinstance(md.state_dict_metadata, dict) or \
            not isinstance(md.storage_data, dict):
        raise ckpt.CheckpointError(f"{path}: not a DCP Metadata with state_dict_metadata and storage_data")
    md.__dict__.pop("all_local_plans", None)  # Megatron-Core's save plans (above): not used
    if isinstance(getattr(md, "planner_data", None), _Inert) or isinstance(getattr(md, "storage_meta", None), _Inert):
        raise ckpt.CheckpointError(f"{path}: a save plan where DCP metadata holds none")
    for key, m in md.state_dict_metadata.items():
        if not isinstance(key, str):
            raise ckpt.CheckpointError(f"{path}: a key that is not a string ({key!r})")
        if isinstance(m, dmd.BytesStorageMetadata):
            continue
        ok = isinstance(m, dmd.TensorStorageMetadata) and isinstance(m.size, torch.Size) and \
            isinstance(m.properties, dmd.TensorProperties) and isinstance(m.properties.dtype, torch.dtype) and \
            isinstance(m.chunks, list) and all(isinstance(c, dmd.ChunkStorageMetadata) and
                                               isinstance(c.offsets, torch.Size) and isinstance(c.sizes, torch.Size)
                                               for c in m.chunks)
        if not ok:
            raise ckpt.CheckpointError(f"{path}: key '{key}': malformed tensor metadata")
    for idx, s in md.storage_data.items():
        if not isinstance(idx, dmd.MetadataIndex) or not isinstance(idx.fqn, str) or \
                not isinstance(idx.offset, (torch.Size, type(None))) or not isinstance(s, _StorageInfo):
            raise ckpt.CheckpointError(f"{path}: malformed storage entry {idx!r}")
        if not isinstance(s.relative_path, str) or type(s.offset) is not int or type(s.length) is not int or \
                s.offset < 0 or s.length < 0:
            raise ckpt.CheckpointError(f"{path}: storage entry of '{idx.fqn}' at {list(idx.offset or [])}: malformed "
                                       f"(file {s.relative_path!r}, offset {s.offset!r}, length {s.length!r})")
        if getattr(s, "transform_descriptors", None):
            raise ckpt.CheckpointError(f"{path}: storage entry of '{idx.fqn}' uses transforms "
                                       f"{list(s.transform_descriptors)} (not supported: import a checkpoint saved "
                                       "without extensions)")
    return md


def _megatron_files(src):
    """The files Megatron-Core's dist_checkpointing writes beside a torch_dist save's DCP files
    (`metadata.json`, which names the backend, and `common.pt`, its non-sharded state pickled by
    torch.save): admitted, never read, when metadata.json says torch_dist; they are non-tensor state
    (imported only with --skip-non-tensors, and then left out)."""
    p = os.path.join(src, "metadata.json")
    if not os.path.isfile(p) or os.path.islink(p):
        return set()
    try:
        with ckpt.open_read(p) as f:
            m = json.loads(f.read(1 << 16).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, ckpt.CheckpointError):
        return set()
    if not isinstance(m, dict) or m.get("sharded_backend") != "torch_dist":
        return set()
    return {n for n in ("metadata.json", "common.pt") if n == "metadata.json" or os.path.isfile(os.path.join(src, n))}


def plan(src):
    """Checks a DCP directory and returns (metadata, tensors, skipped keys, per-file item lists)."""
    src = str(src)
    ckpt.dir_ok(src)
    mpath = os.path.join(src, ".metadata")
    if not os.path.lexists(mpath):
        raise ckpt.CheckpointError(f"{src}: no .metadata (not a PyTorch DCP checkpoint, or an unfinished save)")
    md = load_metadata(mpath)
    tensors, skipped = {}, []
    for key, m in md.state_dict_metadata.items():
        if isinstance(m, dmd.BytesStorageMetadata):
            skipped.append(key)
            continue
        if not ckpt.key_ok(key):
            raise ckpt.CheckpointError(f"{mpath}: key {key!r} is not 1..1023 printable ASCII characters other than '\"' "
                                       "and '\\' (reshard's key rule)")
        dn = dtype_name(m.properties.dtype, key)
        shape = tuple(int(x) for x in m.size)
        if len(shape) > ckpt.MAX_DIMS:
            raise ckpt.CheckpointError(f"{mpath}: key '{key}': {len(shape)} dims (at most {ckpt.MAX_DIMS})")
        chunks = []
        for i, c in enumerate(m.chunks):
            off, size = tuple(int(x) for x in c.offsets), tuple(int(x) for x in c.sizes)
            if len(off) != len(shape) or len(size) != len(shape) or any(
                    o < 0 or s < 0 or o + s > g for o, s, g in zip(off, size, shape)):
                raise ckpt.CheckpointError(f"{mpath}: key '{key}' chunk {i} at {list(off)} of {list(size)}: outside "
                                           f"the global shape {list(shape)}")
            chunks.append((off, size))
        try:
            ckpt.check_tiling(key, shape, [(o, s, None, i) for i, (o, s) in enumerate(chunks)])
        except ckpt.CheckpointError as e:
            raise ckpt.CheckpointError(f"{mpath}: {e}") from None
        tensors[key] = (dn, m.properties.dtype, shape, chunks)
    # storage entries: exactly one per chunk
    store = {}
    for idx, s in md.storage_data.items():
        k = (idx.fqn, tuple(int(x) for x in (idx.offset or ())))
        if k in store:
            raise ckpt.CheckpointError(f"{mpath}: two storage entries for '{k[0]}' at {list(k[1])}")
        store[k] = s
    per_file = {}
    for key, (dn, dt, shape, chunks) in tensors.items():
        for off, size in chunks:
            s = store.pop((key, off), None)
            if s is None:
                raise ckpt.CheckpointError(f"{mpath}: key '{key}' chunk at {list(off)}: no storage entry (its data "
                                           "is in no file)")
            per_file.setdefault(s.relative_path, []).append((key, off, size, s.offset, s.length))
    for key in skipped:
        for k in [k for k in store if k[0] == key]:
            s = store.pop(k)
            per_file.setdefault(s.relative_path, [])
    if store:
        (key, off), s = next(iter(store.items()))
        raise ckpt.CheckpointError(f"{mpath}: storage entry for '{key}' at {list(off)} in {s.relative_path} belongs to "
                                   "no chunk of the metadata")
    for name in per_file:
        if not ckpt.file_name_ok(name):
            raise ckpt.CheckpointError(f"{mpath}: data file '{name}' is not a plain file name (no paths)")
    megatron = _megatron_files(src)
    skipped.extend("%s (Megatron-Core's)" % n for n in sorted(megatron))
    for name in sorted(os.listdir(src)):
        if name != ".metadata" and name not in per_file and name not in megatron:
            raise ckpt.CheckpointError(f"{os.path.join(src, name)}: not named by {mpath} (a stale or unexplained file; "
                                       "refused: remove it or import a directory holding one save)")
    return md, tensors, skipped, per_file


def import_dcp(src, root, step, block=1 << 20, skip_non_tensors=False, log=sys.stdout):
    src = str(src)
    md, tensors, skipped, per_file = plan(src)
    if skipped and not skip_non_tensors:
        raise ckpt.CheckpointError(f"{src}/.metadata: non-tensor entries {skipped[:8]}{' ...' if len(skipped) > 8 else ''} "
                                   "(pickled objects a reshard checkpoint cannot hold): pass --skip-non-tensors to "
                                   "import the tensors without them")
    opened = {}
    for name, items in sorted(per_file.items()):
        f = ckpt.open_read(os.path.join(src, name))
        size = os.fstat(f.fileno()).st_size
        end = 0
        for key, off, size_, o, n in sorted(items, key=lambda x: x[3]):
            if o + n > size:
                f.close()
                for g in opened.values():
                    g.close()
                raise ckpt.CheckpointError(f"{os.path.join(src, name)}: key '{key}' chunk at {list(off)}: bytes "
                                           f"[{o}, +{n}) past the end of the file ({size} bytes: truncated?)")
            if o < end:
                f.close()
                for g in opened.values():
                    g.close()
                raise ckpt.CheckpointError(f"{os.path.join(src, name)}: key '{key}' chunk at {list(off)}: bytes at "
                                           f"{o} shared with another entry")
            end = o + n
        opened[name] = f
    d = ckpt.begin_step(root, step)
    files, out_t, nchunks = [], {}, 0
    for key, (dn, dt, shape, chunks) in tensors.items():
        out_t[key] = {"dtype": dn, "shape": list(shape), "chunks": []}
    try:
        for i, (name, items) in enumerate(sorted(per_file.items())):
            f = opened[name]
            entries, where = [], []
            for key, off, size, o, n in sorted(items, key=lambda x: x[3]):
                path = os.path.join(src, name)
                b = os.pread(f.fileno(), n, o)
                if len(b) != n:
                    raise ckpt.CheckpointError(f"{path}: key '{key}' chunk at {list(off)}: short read (truncated?)")
                try:
                    t = torch.load(io.BytesIO(b), map_location="cpu", weights_only=True)
                except Exception as e:
                    raise ckpt.CheckpointError(f"{path}: key '{key}' chunk at {list(off)} (bytes [{o}, +{n})): not a "
                                               f"saved tensor ({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None
                want_dt = tensors[key][1]
                if not isinstance(t, torch.Tensor) or t.dtype != want_dt or tuple(t.shape) != size:
                    got = f"{t.dtype} {list(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
                    raise ckpt.CheckpointError(f"{path}: key '{key}' chunk at {list(off)}: holds {got}, the metadata "
                                               f"says {want_dt} {list(size)}")
                entries.append((ckpt.chunk_name(key, off), tensors[key][0], size, tensor_bytes(t)))
                where.append((key, off))
            if not entries:
                continue
            fname = f"rank_{i}.safetensors"
            fmeta, locs = ckpt.write_data_file(d, fname, entries, block)
            files.append(fmeta)
            for (en, _, size, _), (key, off) in zip(entries, where):
                o, n = locs[en]
                out_t[key]["chunks"].append({"offsets": list(off), "sizes": list(size), "file": fname, "offset": o, "length": n})
                nchunks += 1
    finally:
        for f in opened.values():
            f.close()
    ckpt.commit(root, step, files, out_t)
    print(f"imported {src} (PyTorch DCP: {len(per_file)} data files, {len(tensors)} tensors, {nchunks} chunks"
          f"{f', {len(skipped)} non-tensor entries skipped' if skipped else ''}) as {d}; latest = {step}", file=log)
    return d

