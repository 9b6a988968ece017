#!/usr/bin/env python3
"""dcp_default_import.py RESHARD SRC [--quick] - PyTorch DCP's default format (dcp.save(sd, path):
FileSystemWriter, .distcp files and a pickled .metadata) saved by real gloo processes, imported with
`python -m reshard_dcp import-dcp`, and checked bit for bit.

Layouts (one gloo process per rank, torch.multiprocessing fork): 1 rank; 2 ranks (S0, S1, R,
uneven); 3 ranks (uneven, empty shards); 4 ranks on a 2x2 mesh (S0S1, S0R, RS1, S1S0, nested S0S0
uneven) and on a 1-d mesh of 4 (empty shards). 12 dtypes (F64 F32 F16 BF16 F8_E4M3 F8_E5M2 I64 I32
I16 I8 U8 BOOL) of raw random bits with NaN payloads, -0, +-inf and subnormals planted first.
Each import must pass `reshard ckpt verify`, its `reshard ckpt export` must equal the global tensors
the ranks distributed (raw bytes), and the Python reader must read the same. Each import is then
resharded to 3 ranks by `reshard ckpt reshard` (ref and opt) and read back by PyTorch (dcp.load
through ReshardStorageReader), bit for bit.
Damage (each refused with a message naming the file): truncated .distcp, missing .distcp, an item's
bytes overwritten, a stale extra .distcp, a .distcp that is a symbolic link, .metadata edited (a
chunk removed, a path with '..', a length past the end of the file, a global that is not DCP's),
non-tensor entries without --skip-non-tensors; and `reshard ckpt import` on a DCP directory names
the command to run instead.
Exit 0 pass, 1 fail, 77 without torch.
"""
import argparse
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

try:
    import numpy as np
    import torch
    import torch.distributed.checkpoint as dcp
except ImportError as e:
    print(f"skip: needs torch and numpy ({e})", file=sys.stderr)
    sys.exit(77)

DT = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
      "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "I64": torch.int64, "I32": torch.int32,
      "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
# NaN with payloads (quiet and signalling, both signs), -0, +inf, -inf, smallest subnormal, largest negative subnormal
SPECIAL = {"F64": [0x7ff8000000000123, 0xfff0000000000001, 0x8000000000000000, 0x7ff0000000000000,
                   0xfff0000000000000, 1, 0x800fffffffffffff],
           "F32": [0x7fc00123, 0xff800001, 0x80000000, 0x7f800000, 0xff800000, 1, 0x807fffff],
           "F16": [0x7e01, 0xfc01, 0x8000, 0x7c00, 0xfc00, 1, 0x83ff],
           "BF16": [0x7fc1, 0xff81, 0x8000, 0x7f80, 0xff80, 1, 0x807f],
           "F8_E4M3": [0x7f, 0xff, 0x80, 1, 0x87], "F8_E5M2": [0x7e, 0xfd, 0x80, 0x7c, 0xfc, 1, 0x83]}
SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4, "I16": 2,
        "I8": 1, "U8": 1, "BOOL": 1}

# (name, world, mesh, [(key, dtype, shape, placements)], non-tensor entries)
CONFIGS = [
    ("w1", 1, (1,), [("a.weight", "F32", (5, 3), "S0"), ("a.bias", "BF16", (7,), "R"), ("scalar", "F64", (), "R"),
                     ("e8", "F8_E5M2", (4, 4), "S1")], False),
    ("w2", 2, (2,), [("w.f16", "F16", (5, 6), "S0"), ("w.bf16", "BF16", (3, 7), "S1"), ("w.i64", "I64", (9,), "S0"),
                     ("w.i8", "I8", (4, 3), "R"), ("w.bool", "BOOL", (5, 2), "S0"), ("w.e4m3", "F8_E4M3", (3, 5), "S1"),
                     ("w.empty", "F32", (1, 4), "S0"), ("zero", "I32", (0, 3), "S0")], True),
    ("w3", 3, (3,), [("u.f32", "F32", (7, 5), "S0"), ("u.i16", "I16", (2, 3), "S0"), ("u.u8", "U8", (4, 8), "S1"),
                     ("u.f64", "F64", (5,), "S0"), ("u.i32", "I32", (3, 3), "R")], False),
    ("m2x2", 4, (2, 2), [("m.s0s1", "F32", (5, 7), "S0,S1"), ("m.s0r", "BF16", (6, 3), "S0,R"),
                         ("m.rs1", "F16", (4, 5), "R,S1"), ("m.s1s0", "I64", (3, 5), "S1,S0"),
                         ("m.s0s0", "F64", (7, 2), "S0,S0"), ("m.e5m2", "F8_E5M2", (3, 3), "S0,S1")], False),
    ("w4", 4, (4,), [("v.f32", "F32", (3, 2), "S0"), ("v.bool", "BOOL", (6,), "S0"), ("v.i8", "I8", (2, 9), "S1")], False),
]


def full_tensor(key, dtype, shape):
    """deterministic raw bits of the global tensor (specials first for float dtypes)"""
    n = int(np.prod(shape)) if shape else 1
    es = SIZE[dtype]
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    raw = rng.integers(0, 256, n * es, dtype=np.uint8)
    if dtype == "BOOL":
        raw &= 1
    for i, v in enumerate(SPECIAL.get(dtype, [])[:n]):
        raw[i * es:(i + 1) * es] = np.frombuffer(int(v).to_bytes(es, "little"), dtype=np.uint8)
    t = torch.frombuffer(bytearray(raw.tobytes()), dtype=torch.uint8) if n else torch.empty(0, dtype=torch.uint8)
    return t.view(DT[dtype]).reshape(shape)


def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _placements(p):
    from torch.distributed.tensor import Replicate, Shard
    return [Replicate() if x == "R" else Shard(int(x[1:])) for x in p.split(",")]


def _worker(rank, world, mesh_shape, tensors, extra, path, port):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", mesh_shape)
    sd = {}
    for key, dtype, shape, pl in tensors:
        # every rank holds the same global tensor: no scatter (gloo has no float8), each takes its shard
        sd[key] = distribute_tensor(full_tensor(key, dtype, shape), mesh, _placements(pl), src_data_rank=None)
    if extra:
        sd["step"] = 7
        sd["note"] = "not a tensor"
    dcp.save(sd, checkpoint_id=path)
    dist.destroy_process_group()


def st_tensors(path):
    import json
    with open(path, "rb") as f:
        b = f.read()
    n = int.from_bytes(b[:8], "little")
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}


FAIL = []


def check(c, msg):
    if not c:
        FAIL.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reshard")
    ap.add_argument("src")
    ap.add_argument("--quick", action="store_true", help="two layouts only")
    a = ap.parse_args()
    here = os.path.join(a.src, "tools", "pytorch")
    sys.path.insert(0, here)
    from reshard_dcp import ckpt
    from reshard_dcp.dcp_import import import_dcp
    import torch.multiprocessing as mp
    env = dict(os.environ, PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="rs-dcpimp-")
    port = 29500 + os.getpid() % 2000
    configs = [c for c in CONFIGS if not a.quick or c[0] in ("w2", "m2x2")]
    saved = {}
    for i, (name, world, mesh, tensors, extra) in enumerate(configs):
        path = os.path.join(tmp, "dcp-" + name)
        mp.start_processes(_worker, args=(world, mesh, tensors, extra, path, port + 7 * i), nprocs=world,
                           start_method="fork", join=True)
        saved[name] = (path, tensors, extra)
    print(f"saved {len(configs)} DCP checkpoints with dcp.save on 1-4 gloo ranks ({time.time() - t0:.1f} s)")
    nt = nchk = 0
    for name, (path, tensors, extra) in saved.items():
        out = os.path.join(tmp, "rs-" + name)
        if name == "w2":  # the command line, as a user runs it
            r = subprocess.run([sys.executable, "-m", "reshard_dcp", "import-dcp", path, "--root", out, "--step", "3"],
                               env=env, capture_output=True, text=True)
            check(r.returncode == 1 and "--skip-non-tensors" in r.stderr and "'step'" in r.stderr,
                  f"{name}: non-tensor entries without --skip-non-tensors: rc {r.returncode} {r.stderr.strip()}")
            r = subprocess.run([sys.executable, "-m", "reshard_dcp", "import-dcp", path, "--root", out, "--step", "3",
                                "--skip-non-tensors"], env=env, capture_output=True, text=True)
            check(r.returncode == 0 and "2 non-tensor entries skipped" in r.stdout,
                  f"{name}: import-dcp rc {r.returncode}: {r.stdout} {r.stderr}")
            r = subprocess.run([a.reshard, "ckpt", "import", path, "--root", os.path.join(tmp, "c-imp"), "--step", "1"],
                               capture_output=True, text=True)
            check(r.returncode == 2 and "python -m reshard_dcp import-dcp " + path in r.stderr,
                  "reshard ckpt import on a DCP directory must refuse it (exit 2) naming the import-dcp command")
            print(f"reshard ckpt import on a DCP directory: exit {r.returncode}: {r.stderr.strip()[:300]}")
        else:
            import_dcp(path, out, 3, block=4096 if name == "w3" else 1 << 20, skip_non_tensors=extra,
                       log=open(os.devnull, "w"))
        r = subprocess.run([a.reshard, "ckpt", "verify", out], capture_output=True, text=True)
        check(r.returncode == 0, f"{name}: reshard ckpt verify: {r.stdout} {r.stderr}")
        ex = os.path.join(tmp, f"{name}.safetensors")
        r = subprocess.run([a.reshard, "ckpt", "export", out, ex], capture_output=True, text=True)
        check(r.returncode == 0, f"{name}: reshard ckpt export: {r.stderr}")
        got = st_tensors(ex) if r.returncode == 0 else {}
        with ckpt.Reader(out) as rd:
            nchk += sum(len(t.chunks) for t in rd.tensors.values())
            for key, dtype, shape, pl in tensors:
                want = raw(full_tensor(key, dtype, shape))
                check(got.get(key) == want, f"{name}: {key} ({dtype} {pl}): the export differs from what the ranks saved")
                check(rd.read_tensor(key) == want, f"{name}: {key}: the Python reader differs from what the ranks saved")
                check(rd.tensors[key].dtype == dtype and rd.tensors[key].shape == tuple(shape), f"{name}: {key} meta")
                nt += 1
            check(set(rd.tensors) == {t[0] for t in tensors}, f"{name}: keys {sorted(rd.tensors)}")
    print(f"imported {len(saved)} DCP checkpoints: {nt} tensors in {nchk} chunks, every one bit-exact against the "
          f"global tensors the ranks saved (reshard ckpt verify + export, and the Python reader)")

    # ---- resharded and read back by PyTorch: each import laid out again on 3 ranks (every tensor S0
    # on a 1-d mesh of 3, a 0-d one replicated) by `reshard ckpt reshard`, ref and opt, then loaded by
    # dcp.load through ReshardStorageReader into plain tensors and compared with what the ranks saved
    from reshard_dcp import ReshardStorageReader
    import json
    nres = 0
    for name, (path, tensors, extra) in saved.items():
        lay = os.path.join(tmp, f"{name}-w3.json")
        with open(lay, "w") as f:
            json.dump({"world": 3, "tensors": [{"key": k, "mesh": [3], "placements": "S0" if len(shape) else "R"}
                                               for k, dt, shape, pl in tensors]}, f)
        for impl in ("ref", "opt"):
            dst = os.path.join(tmp, f"rs-{name}-w3-{impl}")
            r = subprocess.run([a.reshard, "ckpt", "reshard", os.path.join(tmp, "rs-" + name), "--layout", lay,
                                "--root", dst, "--step", "4", "--impl", impl], capture_output=True, text=True)
            check(r.returncode == 0, f"{name}: ckpt reshard --impl {impl} to 3 ranks: rc {r.returncode} {r.stderr}")
            if r.returncode:
                continue
            sd = {k: torch.zeros(shape, dtype=DT[dt]) for k, dt, shape, pl in tensors}
            dcp.load(sd, storage_reader=ReshardStorageReader(dst), no_dist=True)
            for k, dt, shape, pl in tensors:
                check(raw(sd[k]) == raw(full_tensor(k, dt, shape)),
                      f"{name}: {k} ({dt}): resharded to 3 ranks ({impl}) and read by dcp.load, differs")
            nres += 1
    print(f"resharded {nres} imported checkpoints to 3 ranks (ckpt reshard, ref and opt) and read each back with "
          f"dcp.load + ReshardStorageReader: bit-exact")

    # ---- damage (on w2's save: 2 ranks, 2 data files)
    src = saved["w2"][0] if "w2" in saved else saved[configs[0][0]][0]
    with open(os.path.join(src, ".metadata"), "rb") as f:
        md_bytes = f.read()
    ncase = nref = 0

    def damaged(what, want, mutate):
        nonlocal ncase, nref
        ncase += 1
        d = os.path.join(tmp, f"bad{ncase}")
        shutil.copytree(src, d)
        mutate(d)
        out = os.path.join(tmp, f"bad{ncase}-out")
        try:
            import_dcp(d, out, 1, skip_non_tensors=True, log=open(os.devnull, "w"))
            check(False, f"damage '{what}': imported")
        except ckpt.CheckpointError as e:
            check(want in str(e), f"damage '{what}': message '{e}' does not name '{want}'")
            nref += want in str(e)
            print(f"  refused {what}: {str(e)[:160]}")
        check(not os.path.exists(os.path.join(out, "latest")), f"damage '{what}': something was committed")

    def files(d):
        return sorted(n for n in os.listdir(d) if n.endswith(".distcp"))

    def truncate(d):
        p = os.path.join(d, files(d)[-1])
        os.truncate(p, os.path.getsize(p) - 100)
    damaged("truncated .distcp", files(src)[-1], truncate)
    damaged("missing .distcp", files(src)[0], lambda d: os.unlink(os.path.join(d, files(d)[0])))

    def overwrite(d):
        p = os.path.join(d, files(d)[0])
        with open(p, "r+b") as f:
            f.write(b"\0" * 64)
    damaged("an item's bytes overwritten", files(src)[0], overwrite)
    damaged("a stale extra .distcp", "__9_0.distcp",
            lambda d: shutil.copy(os.path.join(d, files(d)[0]), os.path.join(d, "__9_0.distcp")))

    def link(d):  # an identical copy outside the directory, linked in
        p = os.path.join(d, files(d)[0])
        q = os.path.join(tmp, f"moved{ncase}.distcp")
        shutil.move(p, q)
        os.symlink(q, p)
    damaged("a .distcp that is a symbolic link", "symbolic link", link)

    def edit_md(fn):
        def m(d):
            md = pickle.loads(md_bytes)
            fn(md)
            with open(os.path.join(d, ".metadata"), "wb") as f:
                pickle.dump(md, f)
        return m

    def drop_chunk(md):
        md.state_dict_metadata["w.f16"].chunks.pop()
    damaged(".metadata: a chunk removed", "w.f16", edit_md(drop_chunk))

    def dotdot(md):
        for s in md.storage_data.values():
            s.relative_path = "../" + s.relative_path
    damaged(".metadata: a data file named ../__0_0.distcp", "not a plain file name", edit_md(dotdot))

    def long_len(md):
        s = next(iter(md.storage_data.values()))
        s.length += 10 ** 6
    damaged(".metadata: a length past the end of the file", "past the end", edit_md(long_len))

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + os.path.join(tmp, "PWNED"),))

    def evil(md):
        md.planner_data = Evil()
    damaged(".metadata: a global that is not DCP's (os.system)", "system", edit_md(evil))
    check(not os.path.exists(os.path.join(tmp, "PWNED")), "the hostile .metadata ran code")
    damaged(".metadata: truncated", ".metadata",
            lambda d: open(os.path.join(d, ".metadata"), "wb").write(md_bytes[:len(md_bytes) // 2]))
    print(f"damage: {ncase} damaged DCP checkpoints, {nref} refused naming the file or key")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"dcp_default_import: {'PASS' if not FAIL else 'FAIL'} ({len(FAIL)} failures, {time.time() - t0:.1f} s)")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
