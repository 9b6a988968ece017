#!/usr/bin/env python3
"""p2p_predict.py MODEL LAYOUT_JSON RUN_JSON DUMP_DIR - an outside reader of `reshard p2p run --json /
--dump`: predicts every non-MXFP8 destination file from the documented definition of the source
values (docs/p2p.md, "Test values") and each rank's destination box (`p2p layout --config dst
--json`), checks the JSON's shapes against the boxes and its byte counts add up (every byte sent is
received). Exit 0 when all agree."""
import json, os, sys

M64 = (1 << 64) - 1
SIZE = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
        "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}

def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)

def hash3(a, b, c):
    return mix64(a ^ mix64(b ^ mix64(c)))

def fnv1a(s):
    h = 0xcbf29ce484222325
    for ch in s.encode():
        h = ((h ^ ch) * 0x100000001b3) & M64
    return h

def value(seed, name, dtype, idx):
    h = hash3(seed, 0x7032700000000000 ^ fnv1a(name), idx)
    if dtype == "BOOL":
        h &= 1
    return h.to_bytes(8, "little")[:SIZE[dtype]]

def main():
    model, layout, run, dump = (json.load(open(sys.argv[1])), json.load(open(sys.argv[2])),
                                json.load(open(sys.argv[3])), sys.argv[4])
    seed = model.get("seed", 0)
    params = {p["name"]: p for p in model["model"]["params"]}
    bad, checked, sent, recv = 0, 0, 0, 0
    got = {(r["rank"], p["name"]): p for r in run["ranks"] for p in r["params"]}
    for (r, name), p in got.items():
        sent += p.get("bytes_sent", 0)
        recv += p.get("bytes_received", 0)
    for r in layout["ranks"]:
        for p in r["params"]:
            spec = params[p["name"]]
            j = got.get((r["rank"], p["name"]))
            if j is None or j.get("shape") != p["sizes"]:
                print(f"rank {r['rank']} {p['name']}: --json shape {j and j.get('shape')}, layout {p['sizes']}")
                bad += 1
            if spec.get("transform") == "mxfp8":
                continue
            shape, off, size = spec["shape"], p["offsets"], p["sizes"]
            want = bytearray()
            n = 1
            for s in size:
                n *= s
            for k in range(n):
                rest, g, idx = k, 0, []
                for s in reversed(size):
                    idx.append(rest % s)
                    rest //= s
                idx.reverse()
                for d in range(len(shape)):
                    g = g * shape[d] + off[d] + idx[d]
                want += value(seed, p["name"], spec["dtype"], g)
            data = open(os.path.join(dump, f"rank{r['rank']}", p["name"] + ".bin"), "rb").read()
            if data != bytes(want):
                print(f"rank {r['rank']} {p['name']}: dumped bytes differ from the predicted source values")
                bad += 1
            checked += 1
    if sent != recv:
        print(f"bytes sent {sent} != bytes received {recv}")
        bad += 1
    print(f"predicted {checked} dumped tensors, {sent} bytes sent and received at the transport")
    print("sent", sent)
    return 1 if bad else 0

sys.exit(main())
