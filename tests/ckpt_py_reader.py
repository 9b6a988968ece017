#!/usr/bin/env python3
"""ckpt_py_reader.py RESHARD SRC [--flips N] [--dcp] - the C readers' damage suites run through the
Python reader (tools/pytorch/reshard_dcp) too.

A checkpoint of fixtures/ckpt/megatron_tp2_dp2.json is saved by `reshard ckpt save` (256-byte digest
blocks, as tests/test_ckpt_faults.c), then:
- undamaged: reshard_dcp.ckpt.Reader reads every tensor bit-exactly equal to `reshard ckpt export`
  (and with --dcp, torch.distributed.checkpoint.load through ReshardStorageReader does too);
- flips: N single-byte flips (half of metadata.json, half of data files): the C reader (`reshard ckpt
  verify`) refuses each, and so must the Python reader's verify; with --dcp, dcp.load must refuse
  each flip in bytes it reads (object bytes it does not read), else return the pristine values;
- hostile: the hostile checkpoints of test_ckpt_faults.c and ckpt_readers.sh (path traversal,
  overlaps, gaps, overflows, bad headers, NULs, links, FIFOs, truncations, `latest`) plus the three
  inputs of issue 23 item 3 (a chunk removed and resealed, two chunks' byte ranges exchanged, a file
  named ../rank_2.safetensors): each must be refused by C verify and C load (so it is damage), and
  by the Python reader with a CheckpointError naming what the C message names.
Exit 0 pass, 1 fail, 77 when numpy/xxhash (or torch with --dcp) are missing.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import numpy  # noqa: F401
    import xxhash
except ImportError as e:
    print(f"skip: {e}", file=sys.stderr)
    sys.exit(77)

FAIL = []


def check(cond, msg):
    if not cond:
        FAIL.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def st_tensors(path):
    """name -> (dtype, shape, bytes) of a safetensors file (raw bytes, any dtype)."""
    with open(path, "rb") as f:
        b = f.read()
    n = int.from_bytes(b[:8], "little")
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: (v["dtype"], tuple(v["shape"]), b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reshard")
    ap.add_argument("src")
    ap.add_argument("--flips", type=int, default=300)
    ap.add_argument("--dcp", action="store_true", help="also through torch.distributed.checkpoint.load")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.src, "tools", "pytorch"))
    from reshard_dcp import ckpt
    torch = dcp = RSR = None
    if a.dcp:
        try:
            import torch
            import torch.distributed.checkpoint as dcp
            from reshard_dcp import ReshardStorageReader as RSR
        except ImportError as e:
            print(f"skip: --dcp needs torch ({e})", file=sys.stderr)
            sys.exit(77)
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="rs-pyreader-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    root = os.path.join(tmp, "ck")
    spec = os.path.join(a.src, "fixtures", "ckpt", "megatron_tp2_dp2.json")
    subprocess.run([a.reshard, "ckpt", "save", spec, "--root", root, "--step", "1", "--block", "256"], check=True,
                   stdout=subprocess.DEVNULL)
    step = os.path.join(root, "step_1")
    export = os.path.join(tmp, "export.safetensors")
    subprocess.run([a.reshard, "ckpt", "export", root, export], check=True, stdout=subprocess.DEVNULL)
    want = st_tensors(export)
    names = sorted(os.listdir(step))
    pristine = {n: open(os.path.join(step, n), "rb").read() for n in names}

    def restore():
        for n in os.listdir(step):
            p = os.path.join(step, n)
            if os.path.islink(p) or not os.path.isfile(p):
                os.unlink(p)
        for n, b in pristine.items():
            with open(os.path.join(step, n), "wb") as f:
                f.write(b)
        with open(os.path.join(root, "latest"), "w") as f:
            f.write("1\n")

    def c_refuses(verb):
        args = [a.reshard, "ckpt", "verify", root] if verb == "verify" else \
            [a.reshard, "ckpt", "load", spec, "--root", root, "--strict", "raise_all"]
        r = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60)
        return r.returncode != 0, r.stderr.strip()

    def py_read():
        """every tensor and object through the Python reader (its verify first)"""
        with ckpt.Reader(root) as r:
            r.verify()
            got = {k: r.read_tensor(k) for k in r.tensors}
            got.update({k: r.read_object(k) for k in r.objects})
            return got

    def dcp_read():
        with ckpt.Reader(root) as r:  # shapes and dtypes only (pristine metadata is restored per case)
            pass
        sd = {k: torch.full(t.shape, 7, dtype=DT[t.dtype]) for k, t in shapes.items()}
        dcp.load(sd, storage_reader=RSR(root), no_dist=True)
        return {k: v.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() for k, v in sd.items()}

    # ---- undamaged
    got = py_read()
    with ckpt.Reader(root) as r:
        shapes = dict(r.tensors)
        obj_ranges = [(fi, off, ln) for fi, off, ln in r.objects.values()]
    check(set(got) == set(want), f"keys: Python reader {sorted(got)}, export {sorted(want)}")
    for k, b in got.items():
        check(want.get(k, (None, None, None))[2] == b, f"undamaged: {k} differs from reshard ckpt export")
    print(f"undamaged: {len(shapes)} tensors and {len(got) - len(shapes)} objects read by the Python reader "
          "equal reshard ckpt export bit for bit")
    if a.dcp:
        from reshard_dcp.storage import DTYPES as DT
        got = dcp_read()
        for k, b in got.items():
            check(want[k][2] == b, f"undamaged (dcp.load): {k} differs from reshard ckpt export")
        print(f"undamaged: {len(got)} tensors loaded by dcp.load through ReshardStorageReader equal the export")

    # ---- flips
    import random
    rnd = random.Random(0x666c6970)
    det_c = det_py = det_dcp = dcp_unread = 0
    datafiles = [n for n in names if n.endswith(".safetensors")]
    for k in range(a.flips):
        fn = "metadata.json" if k % 2 else rnd.choice(datafiles)
        b = bytearray(pristine[fn])
        at = rnd.randrange(len(b))
        b[at] ^= rnd.randrange(1, 256)
        with open(os.path.join(step, fn), "wb") as f:
            f.write(b)
        c, _ = c_refuses("verify")
        det_c += c
        try:
            py_read()
            py = False
        except ckpt.CheckpointError as e:
            py = True
            check(fn in str(e) or "metadata" in str(e), f"flip {fn}@{at}: message names neither file: {e}")
        det_py += py
        if c and not py:
            check(False, f"flip {fn} byte {at}: C verify refuses, the Python reader accepts")
        if a.dcp:
            try:
                got = dcp_read()
                in_obj = any(fi == fn and off <= at < off + ln for fi, off, ln in obj_ranges)
                dcp_unread += 1
                check(in_obj and all(want[kk][2] == v for kk, v in got.items()),
                      f"flip {fn} byte {at}: dcp.load accepted a flip in bytes it reads")
            except BaseException as e:  # dcp wraps the reader's exception (CheckpointException is a BaseException)
                det_dcp += 1
                check("CheckpointError" in repr(e) or "CheckpointError" in str(e) or isinstance(e, ckpt.CheckpointError),
                      f"flip {fn}@{at}: dcp.load failed otherwise: {e!r}"[:300])
        with open(os.path.join(step, fn), "wb") as f:
            f.write(pristine[fn])
    print(f"flips: {a.flips} single-byte flips: refused by C verify {det_c}, by the Python reader {det_py}"
          + (f", by dcp.load {det_dcp} (+{dcp_unread} in object bytes dcp.load does not read, values intact)"
             if a.dcp else ""))
    check(det_py == a.flips and det_c == a.flips, "every flip refused")

    # ---- hostile checkpoints
    md0 = pristine["metadata.json"].decode()

    def reseal(text):
        rest = text[text.index("\n") + 1:].encode()
        line = f'{{"digest":"xxh3:{xxhash.xxh3_64_intdigest(rest):016x}",\n'.encode()
        with open(os.path.join(step, "metadata.json"), "wb") as f:
            f.write(line + rest)

    def edit(frm, to, count=-1):
        n = md0.count(frm)
        check(n > 0, f"hostile edit: '{frm}' not in metadata.json")
        reseal(md0.replace(frm, to, count))
        return n

    def edit_json(fn):
        body = json.loads(md0)
        fn(body)
        body.pop("digest")
        reseal('{"digest":"",\n' + json.dumps(body, indent=1)[1:])

    def edit_data(name, b):
        with open(os.path.join(step, name), "wb") as f:
            f.write(b)

        def fix(body):
            for f in body["files"]:
                if f["name"] == name:
                    bs = f["block"]
                    f["size"] = len(b)
                    f["xxh3"] = [f"{xxhash.xxh3_64_intdigest(b[o:o + bs]):016x}" for o in range(0, len(b), bs)]
        edit_json(fix)

    cases = []

    def case(what, want_text):
        """verify and load of the C readers must refuse (it is damage), and the Python reader too"""
        cv, cmsg = c_refuses("verify")
        cl, _ = c_refuses("load")
        check(cv and cl, f"hostile {what}: the C readers do not refuse it (verify {cv}, load {cl}): not a damage case")
        ok = True
        try:
            py_read()
            ok = False
            check(False, f"hostile {what}: the Python reader accepted it")
        except ckpt.CheckpointError as e:
            if os.environ.get("RS_VERBOSE"):
                print(f"  {what}: {e}")
            if want_text not in str(e):
                ok = False
                check(False, f"hostile {what}: Python message '{e}' does not name '{want_text}' (C: {cmsg})")
        if a.dcp:
            try:
                dcp_read()
                ok = False
                check(False, f"hostile {what}: dcp.load through ReshardStorageReader accepted it")
            except BaseException as e:
                if want_text not in str(e) and want_text not in repr(e):
                    ok = False
                    check(False, f"hostile {what}: dcp.load's error does not name '{want_text}': {str(e)[:300]}")
        cases.append((what, ok))
        restore()

    outside = os.path.join(root, "rank_1.safetensors")
    with open(outside, "wb") as f:  # a valid copy just outside the step directory
        f.write(pristine["rank_1.safetensors"])
    with open(os.path.join(root, "rank_2.safetensors"), "wb") as f:
        f.write(pristine["rank_2.safetensors"])
    edit('"rank_1.safetensors"', '"../rank_1.safetensors"')
    case("path traversal", "not a plain file name")
    edit('"rank_2.safetensors"', '"../rank_2.safetensors"')
    case("issue 23: a data file named ../rank_2.safetensors", "../rank_2.safetensors")
    edit('"rank_1.safetensors"', f'"{root}/rank_1.safetensors"')
    case("absolute file name", "not a plain file name")
    edit('"rank_1.safetensors"', '"rank_1.safetensors/"')
    case("file name with a slash", "not a plain file name")
    edit('"offsets":\t[8, 0]', '"offsets":\t[4, 0]', 1)
    case("overlapping chunks", "overlap")
    edit('"shape":\t[48]', '"shape":\t[49]', 1)
    case("missing chunk (gap)", "gap")
    edit('"offset":\t12496', '"offset":\t99912496', 1)
    case("offset past the end of the file", "rank_0.safetensors")
    edit('"length":\t192', '"length":\t9223372036854775807', 1)
    case("length past the end of the file", "decoder.final_layernorm.weight")
    edit('"shape":\t[48]', '"shape":\t[4611686018427387904]', 1)
    case("byte count overflow (1-d)", "decoder.final_layernorm.weight")
    edit('"shape":\t[16, 8]', '"shape":\t[4294967296, 4294967296]', 1)
    case("element count overflow (2-d)", "overflow")
    edit('"size":\t1518', '"size":\t9223372036854775807', 1)
    case("file size overflow", "metadata")
    edit('"version":\t1', '"version":\t2', 1)
    case("wrong format version", "version")
    edit('"format":\t"reshard-ckpt"', '"format":\t"other-ckpt"', 1)
    case("wrong format", "format")
    edit('"tensors":\t{', '"tensors":\t{"decoder.final_layernorm.weight":{"dtype":"I64","shape":[],"chunks":[]},', 1)
    case("duplicate tensor key", "twice")
    edit('"files":\t[{', '"files":\t[{"name":"rank_3.safetensors","size":1,"block":64,"xxh3":["0000000000000000"]},{', 1)
    case("duplicate file", "twice")
    edit('"step":\t1,', '"step":\t1, "step": 2,', 1)
    case("duplicate member", "step")
    edit('"rank_1.safetensors"', '"rank_1.safetensors\\u0000x"')
    case("file name with a NUL", "NUL")
    edit('"decoder.final_layernorm.weight"', '"decoder.final_layernorm.weight\\u0000"', 1)
    case("tensor key with a NUL", "NUL")
    edit('"length":\t192', '"length":\t192.0', 1)
    case("a length that is not an integer", "integer")

    # the three silent cases of issue 23 item 3, each resealed
    def drop_chunk(body):
        t = body["tensors"]["decoder.layers.0.mlp.linear_fc1.weight"]
        t["chunks"].pop(1)
    edit_json(drop_chunk)
    case("issue 23: metadata.json resealed without one chunk", "gap")

    def swap_ranges(body):
        for key, t in body["tensors"].items():
            cs = t["chunks"]
            for i in range(len(cs)):
                for j in range(i + 1, len(cs)):
                    if cs[i]["file"] == cs[j]["file"] and cs[i]["length"] == cs[j]["length"] > 0:
                        cs[i]["offset"], cs[j]["offset"] = cs[j]["offset"], cs[i]["offset"]
                        return
        raise AssertionError("no two chunks of one length in one file")
    edit_json(swap_ranges)
    case("issue 23: two chunks' byte ranges exchanged", "disagrees with metadata.json")

    # files: FIFOs, truncation, missing, links
    for n, want_t in (("rank_0.safetensors", "a FIFO"), ("metadata.json", "a FIFO")):
        os.unlink(os.path.join(step, n))
        os.mkfifo(os.path.join(step, n))
        case(f"{n} is a FIFO", want_t)
    edit_data_raw = pristine["rank_0.safetensors"][:-100]
    with open(os.path.join(step, "rank_0.safetensors"), "wb") as f:
        f.write(edit_data_raw)
    case("truncated data file", "truncated")
    with open(os.path.join(step, "metadata.json"), "wb") as f:
        f.write(pristine["metadata.json"][:len(pristine["metadata.json"]) // 2])
    case("truncated metadata.json", "metadata.json")
    os.unlink(os.path.join(step, "rank_2.safetensors"))
    case("missing data file", "rank_2.safetensors")
    b = bytearray(pristine["rank_3.safetensors"])
    b[:8] = (200000000).to_bytes(8, "little")
    edit_data("rank_3.safetensors", bytes(b))
    case("safetensors header over 100 MB", "100 MB")
    b[:8] = b"\xff" * 8
    edit_data("rank_3.safetensors", bytes(b))
    case("safetensors header length 2^64-1", "safetensors")
    b = bytearray(pristine["rank_3.safetensors"])
    i = b.index(b'"data_offsets":[0,', 8)
    b[i + 16] = ord("1")
    edit_data("rank_3.safetensors", bytes(b))
    case("safetensors non-contiguous offsets", "safetensors")
    b = bytearray(pristine["rank_3.safetensors"])
    i = b.index(b'"dtype":"U8"', 8)
    b[i + 9:i + 11] = b"I8"
    edit_data("rank_3.safetensors", bytes(b))
    case("safetensors entry disagrees with metadata", "rank_3.safetensors")
    for n in ("rank_1.safetensors", "metadata.json"):
        p = os.path.join(step, n)
        cp = os.path.join(tmp, "copy-" + n)
        shutil.copy(p, cp)
        os.unlink(p)
        os.symlink(cp, p)
        case(f"{n} is a symbolic link to an identical copy outside", "symbolic link")
    elsewhere = root + "-elsewhere"
    os.rename(step, elsewhere)
    os.symlink(elsewhere, step)
    case("step directory is a symbolic link", "symbolic link")
    os.unlink(step)
    os.rename(elsewhere, step)
    restore()
    with open(os.path.join(root, "latest"), "w") as f:
        f.write("../../etc\n")
    case("latest names a path", "latest")
    with open(os.path.join(root, "latest"), "w") as f:
        f.write("99\n")
    case("latest names a missing step", "step_99")
    nok = sum(ok for _, ok in cases)
    print(f"hostile: {len(cases)} hostile checkpoints, each refused by C verify and load; the Python reader"
          f"{' and dcp.load' if a.dcp else ''} refused {nok} naming the defect")
    # undamaged again after all the restores
    got = py_read()
    check(all(want[k][2] == v for k, v in got.items()), "restored checkpoint reads back")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"ckpt_py_reader: {'PASS' if not FAIL else 'FAIL'} ({len(FAIL)} failures, {time.time() - t0:.1f} s)")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
