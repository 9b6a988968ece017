"""ckpt_import_gen.py - hand-built import directories for tests/ckpt_import.sh (Python standard
library only, so the core cases run in ctest without torch or numpy).

Usage: ckpt_import_gen.py OUT

Each file is what torch 2.15's HuggingFaceStorageWriter writes (safetensors: 8-byte header length,
JSON header with __metadata__ = {DCP_SHARDING_INFO, DCP_VERSION, format}, data): the names, the
header fields and the index (model.safetensors.index.json with metadata.total_size and weight_map)
follow torch/distributed/checkpoint/_hf_utils.py, filesystem.py and hf_storage.py. Values are F32
[6, 4] "w" (element i = i + base) and I32 [5] "b". Writes one directory per case under OUT and
OUT/expect_new.bin (w's and b's bytes of the newer save, for the stale case)."""
import json
import os
import struct
import sys


def f32(vals):
    return b"".join(struct.pack("<f", float(v)) for v in vals)


def i32(vals):
    return b"".join(struct.pack("<i", int(v)) for v in vals)


def st_file(path, tensors, offsets=None):
    """tensors: {name: (dtype, shape, bytes)}; offsets: {name: [..]} -> DCP_SHARDING_INFO."""
    hdr, data = {}, b""
    meta = {"DCP_VERSION": "1.0", "format": "pt"}
    if offsets is not None:
        meta["DCP_SHARDING_INFO"] = json.dumps({k: {"saved_offsets": v} for k, v in offsets.items()})
    hdr["__metadata__"] = meta
    for name, (dt, shape, b) in tensors.items():
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def rows(base, r0, r1):
    return f32(range(base + r0 * 4, base + r1 * 4))


def sharded(d, name_fmt, base, ranks=(0, 1, 2), total=1, rowsplit=((0, 2), (2, 4), (4, 6))):
    """w [6, 4] sharded on rows over 3 ranks (shard-0000r), b [5] whole on rank 0 (DCP dedups replicas)"""
    os.makedirs(d, exist_ok=True)
    for r in ranks:
        r0, r1 = rowsplit[r]
        t = {"w": ("F32", [r1 - r0, 4], rows(base, r0, r1))}
        off = {"w": [r0, 0]}
        if r == 0:
            t["b"] = ("I32", [5], i32(range(base, base + 5)))
            off["b"] = [0]
        st_file(f"{d}/" + name_fmt.format(shard=f"{r + 1:05d}", total=f"{total:05d}"), t, off)


def whole(d, base, mapping=None):
    """a save without save_distributed: whole tensors, model-NNNNN-of-MMMMM, and the index"""
    os.makedirs(d, exist_ok=True)
    t = {"w": ("F32", [6, 4], rows(base, 0, 6)), "b": ("I32", [5], i32(range(base, base + 5)))}
    mapping = mapping or {"w": 1, "b": 1}
    m = max(mapping.values())
    files = {}
    for k, i in mapping.items():
        files.setdefault(f"model-{i:05d}-of-{m:05d}.safetensors", {})[k] = t[k]
    for name, ts in files.items():
        st_file(f"{d}/{name}", ts, {k: [0] * len(v[1]) for k, v in ts.items()})
    return t, {k: f"model-{i:05d}-of-{m:05d}.safetensors" for k, i in mapping.items()}


def index(d, wm, total):
    with open(f"{d}/model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)


def main(out):
    SH = "shard-{shard}-model-00001-of-{total}.safetensors"
    # good: 3 ranks' shards of one save
    sharded(f"{out}/good", SH, 0)
    # (a) stale, with an index: an older single-file save, then a newer 2-file save (another
    # mapping) into the same directory; the index is the newer save's
    whole(f"{out}/stale_index", 1000)
    t, wm = whole(f"{out}/stale_index", 0, {"w": 1, "b": 2})
    index(f"{out}/stale_index", wm, 24 * 4 + 5 * 4)
    with open(f"{out}/expect_new.bin", "wb") as f:
        f.write(t["w"][2] + t["b"][2])
    # (a') stale, distributed (no index): ...-00001-of-00001 next to ...-of-00002
    sharded(f"{out}/stale_shards", SH, 1000)
    d = f"{out}/stale_shards"
    for r, (r0, r1) in enumerate(((0, 2), (2, 4), (4, 6))):
        st_file(f"{d}/shard-{r + 1:05d}-model-00001-of-00002.safetensors", {"w": ("F32", [r1 - r0, 4], rows(0, r0, r1))},
                {"w": [r0, 0]})
        if r == 0:
            st_file(f"{d}/shard-00001-model-00002-of-00002.safetensors", {"b": ("I32", [5], i32(range(5)))}, {"b": [0]})
    # (b) a stray shard-00099 with the same key and offsets as rank 0's chunk, another shape
    sharded(f"{out}/stray", SH, 0)
    st_file(f"{out}/stray/shard-00099-model-00001-of-00001.safetensors", {"w": ("F32", [3, 4], rows(0, 0, 3))},
            {"w": [0, 0]})
    # (c) the last rank's shard missing
    sharded(f"{out}/missing", SH, 0, ranks=(0, 1))
    with open(f"{out}/shapes.json", "w") as f:
        json.dump({"w": [6, 4], "b": [5]}, f)
    # (d) replicas: rank 3 holds the same chunk as rank 0, with equal bytes / one other byte
    for name, base in (("replica_equal", 0), ("replica_differs", 7)):
        sharded(f"{out}/{name}", SH, 0)
        st_file(f"{out}/{name}/shard-00004-model-00001-of-00001.safetensors",
                {"w": ("F32", [2, 4], rows(0, 0, 2)[:-4] + f32([base + 7]))}, {"w": [0, 0]})
    # index damage: a key the index maps elsewhere, a file the index names that is missing, a
    # wrong total_size
    whole(f"{out}/index_total", 0)
    index(f"{out}/index_total", {"w": "model-00001-of-00001.safetensors", "b": "model-00001-of-00001.safetensors"}, 7)
    whole(f"{out}/index_missing", 0, {"w": 1, "b": 2})
    os.remove(f"{out}/index_missing/model-00002-of-00002.safetensors")
    index(f"{out}/index_missing", {"w": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}, 116)
    whole(f"{out}/index_wrong", 0, {"w": 1, "b": 2})
    index(f"{out}/index_wrong", {"w": "model-00002-of-00002.safetensors", "b": "model-00001-of-00002.safetensors"}, 116)
    # no index: a whole-tensor save missing its second file; a name no writer gives
    whole(f"{out}/whole_missing", 0, {"w": 1, "b": 2})
    os.remove(f"{out}/whole_missing/model-00002-of-00002.safetensors")
    sharded(f"{out}/odd_name", SH, 0)
    st_file(f"{out}/odd_name/extra.safetensors", {"x": ("F32", [1], f32([1]))}, {"x": [0]})
    # a lone file of any name, whole tensors without DCP metadata (what safetensors.save_file writes)
    os.makedirs(f"{out}/lone", exist_ok=True)
    st_file(f"{out}/lone/model.safetensors", {"w": ("F32", [6, 4], rows(0, 0, 6))})


if __name__ == "__main__":
    main(sys.argv[1])
