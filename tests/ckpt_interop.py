"""ckpt_interop.py - the checkpoint format read by the `safetensors` Python package.

Usage: ckpt_interop.py STEP_DIR EXPORT.safetensors

Every data file opens with safetensors.safe_open (numpy): each entry has the dtype and shape that
metadata.json gives its chunk and the bytes at its place in the file. The global tensors are then
rebuilt in numpy from the chunks alone (boxes, flattened fragments) and must equal, byte for byte,
what safetensors.numpy.load_file reads from the export; objects are U8 arrays, common entries sit
in the export's __metadata__.
"""
import json
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
      "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def main(step, export):
    with open(f"{step}/metadata.json", "rb") as f:
        md = json.loads(f.read())
    files = {fi["name"] for fi in md["files"]}
    opened = {name: safe_open(f"{step}/{name}", framework="np") for name in files}
    raw = {name: open(f"{step}/{name}", "rb").read() for name in files}
    checked = 0
    rebuilt = {}
    for key, t in md["tensors"].items():
        dt = NP[t["dtype"]]
        g = np.zeros(int(np.prod(t["shape"], dtype=np.int64)), dtype=dt).reshape(t["shape"])
        for c in t["chunks"]:
            off, sz = c["offsets"], c["sizes"]
            name = key + "@" + ".".join(str(o) for o in off) + (f"#{c['flat'][0]}" if "flat" in c else "")
            arr = opened[c["file"]].get_tensor(name)
            assert arr.dtype == dt, (name, arr.dtype, dt)
            want_shape = [c["flat"][1] - c["flat"][0]] if "flat" in c else sz
            assert list(arr.shape) == list(want_shape), (name, arr.shape, want_shape)
            assert arr.tobytes() == raw[c["file"]][c["offset"]:c["offset"] + c["length"]], name
            sl = tuple(slice(o, o + s) for o, s in zip(off, sz))
            if "flat" in c:
                box = g[sl].copy().reshape(-1)
                box[c["flat"][0]:c["flat"][1]] = arr
                g[sl] = box.reshape(sz)
            else:
                g[sl] = arr
            checked += 1
        rebuilt[key] = g
    for ukey, o in md["objects"].items():
        arr = opened[o["file"]].get_tensor(ukey)
        assert arr.dtype == np.uint8 and arr.shape == (o["length"],), ukey
        rebuilt[ukey] = arr
        checked += 1
    ex = load_file(export)
    assert set(ex) == set(rebuilt), (sorted(set(ex) ^ set(rebuilt)))
    for k, v in rebuilt.items():
        assert ex[k].dtype == v.dtype and ex[k].shape == v.shape, (k, ex[k].dtype, ex[k].shape, v.dtype, v.shape)
        assert ex[k].tobytes() == v.tobytes(), k
    with safe_open(export, framework="np") as f:
        meta = f.metadata()
    for k, v in md["common"].items():
        assert meta.get("common." + k) == v, (k, meta.get("common." + k), v)
    print(f"interop: {len(files)} data files opened with safe_open, {checked} entries with the right dtype, "
          f"shape and bytes; {len(ex)} export tensors from load_file equal the tensors rebuilt from the chunks")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
