#!/usr/bin/env python3
"""p2p_predict.py MODEL LAYOUT_JSON RUN_JSON DUMP_DIR - an outside reader of `reshard p2p run --json /
--dump`: predicts every destination file from the documented definition of the source values
(docs/p2p.md, "Source values") and each rank's destination box (`p2p layout --config dst --json`),
MXFP8 ones (bytes and scales) through its own quantizer written from the documented rule; checks
the JSON's shapes against the boxes and that its byte counts add up (every byte sent is received).
Exit 0 when all agree."""
import json, math, os, struct, sys

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

def mxfp8_source(seed, name, idx):
    """The BF16 bits of an MXFP8 parameter's source element, as docs/p2p.md defines them."""
    key = 0x7032700000000000 ^ fnv1a(name)
    h = hash3(seed, key, idx)
    b, r = h & 0xFFFF, (h >> 20) & 0xFFFFFFFF
    bh = hash3(seed, key ^ 0x6d78667038, idx // 32)
    cls, sign, man = bh % 16, b & 0x8000, b & 0x7F
    if cls == 12:
        b = sign | (1 + r % 8) << 7 | man
    elif cls == 13:
        b = sign | man
    elif cls == 14:
        b = sign | (240 + r % 15) << 7 | man
    elif cls == 15:
        b = sign | (1 + (bh >> 8) % 240 + r % 14) << 7 | (0x60 if (r >> 8) % 3 == 0 else 0)
    elif (h >> 16) % 8:
        b = (b & 0x807F) | (111 + (h >> 20) % 33) << 7
    if b & 0x7F80 == 0x7F80:
        b &= ~0x4000
    return b

E4M3 = [(1 + (c & 7) / 8) * 2.0 ** ((c >> 3) - 7) if c >> 3 else (c & 7) * 2.0 ** -9 for c in range(0x7F)]

def mxfp8_block(bits):
    """Scale byte and E4M3 codes of 32 BF16 patterns: e is the least integer with 448 * 2^e >= amax
    (0 for amax 0), clamped to [-127, 127]; each x / 2^e goes to the nearest code, ties to the even
    code, saturating at 448 (0x7E); the sign is kept (-0 too)."""
    vals = [struct.unpack("<f", struct.pack("<I", x << 16))[0] for x in bits]
    amax = max(abs(v) for v in vals)
    e = 0
    if amax:
        e = -127
        while e < 127 and 448.0 * 2.0 ** e < amax:
            e += 1
    codes = []
    for x, v in zip(bits, vals):
        y = min(abs(v) / 2.0 ** e, 448.0)
        best = min(range(0x7F), key=lambda c: (abs(E4M3[c] - y), c & 1))
        codes.append(best | (0x80 if x & 0x8000 else 0))
    return e + 127, bytes(codes)

def predict_mxfp8(seed, name, shape, off, size):
    last, data, scales = size[-1], bytearray(), bytearray()
    rows = 1
    for s in size[:-1]:
        rows *= s
    for row in range(rows):
        rest, idx = row, []
        for s in reversed(size[:-1]):
            idx.append(rest % s)
            rest //= s
        idx.reverse()
        g = 0
        for d in range(len(shape) - 1):
            g = g * shape[d] + off[d] + idx[d]
        for b0 in range(0, last, 32):
            start = g * shape[-1] + off[-1] + b0
            sc, q = mxfp8_block([mxfp8_source(seed, name, start + i) for i in range(32)])
            scales.append(sc)
            data += q
    return bytes(data), bytes(scales)

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
            shape, off, size = spec["shape"], p["offsets"], p["sizes"]
            base = os.path.join(dump, f"rank{r['rank']}", p["name"])
            if spec.get("transform") == "mxfp8":
                n = 1
                for s in size:
                    n *= s
                if n:
                    data, scales = predict_mxfp8(seed, p["name"], shape, off, size)
                    if open(base + ".bin", "rb").read() != data or open(base + ".scale", "rb").read() != scales:
                        print(f"rank {r['rank']} {p['name']}: dumped MXFP8 bytes or scales differ from the prediction")
                        bad += 1
                    checked += 1
                continue
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
