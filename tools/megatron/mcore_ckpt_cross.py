#!/usr/bin/env python3
"""mcore_ckpt_cross.py - the cross reads a user tries between Megatron-Core dist_checkpointing
(torch_dist) and reshard checkpoints, each compared with the oracle bit for bit.

    PY=/path/to/python-with-torch-and-megatron-core
    $PY tools/megatron/mcore_ckpt_cross.py --reshard build/reshard [--work DIR]

For each of a few layouts (SAVE spec on N ranks, LOAD spec on M ranks in another layout):
  A. Megatron -> reshard: `reshard ckpt save SAVE` + `reshard ckpt export` give the oracle's whole
     tensors; N gloo processes save their boxes with dist_checkpointing.save (torch_dist); the
     directory as Megatron wrote it (.metadata, *.distcp, metadata.json, common.pt) is imported with
     `python -m reshard_dcp import-dcp --skip-non-tensors` (tools/pytorch/reshard_dcp: refused
     without the flag, naming it) and `reshard ckpt load LOAD` compares every rank with the
     oracle. Damage (first layout): a copy's .metadata cut to half its length -> the import must
     refuse it; and without --skip-non-tensors the import must refuse, naming the flag.
  B. reshard -> Megatron: M gloo processes run dist_checkpointing.load of the reshard checkpoint into
     LOAD's boxes with Megatron's torch_dist load strategy reading through reshard_dcp's
     ReshardStorageReader (Megatron's own metadata.json/common.pt in a view directory, since Megatron
     reads those first); every box compared with the export (the oracle's tensors). Damage: one
     byte of a data file flipped -> the load must fail (the reader checks the digests).
--plant wrong_values makes both directions carry valid checkpoints of wrong values (the Megatron
save writes each box's rows reversed; the reshard checkpoint Megatron reads holds another seed's
values for one tensor): only the comparisons with the oracle can tell, and each must FAIL.
--layouts N runs the first N layouts. Worker tracebacks go to stderr; the verdicts to stdout.
Exit 0 when every read matched and every damage was refused; 1 otherwise.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(TOP, "tools", "pytorch"))

import mcore_ckpt_pool  # noqa: E402
from ckpt import boxes, layouts  # noqa: E402

LAYOUTS = [
    # (name, save spec, load spec)
    ("tp2dp2-to-tp4", {"world": 4, "tensors": [
        {"key": "embedding.word_embeddings.weight", "dtype": "BF16", "shape": [12, 8], "seed": 1, "mesh": [2, 2],
         "placements": "S0,R"},
        {"key": "decoder.layers.0.mlp.linear_fc1.weight", "dtype": "F32", "shape": [6, 9], "seed": 2, "mesh": [2, 2],
         "placements": "S1,S0"}]},
     {"world": 4, "tensors": [
         {"key": "embedding.word_embeddings.weight", "dtype": "BF16", "shape": [12, 8], "seed": 1, "mesh": [4],
          "placements": "S1"},
         {"key": "decoder.layers.0.mlp.linear_fc1.weight", "dtype": "F32", "shape": [6, 9], "seed": 2, "mesh": [4],
          "placements": "S0"}]}),
    ("uneven-3-to-2", {"world": 3, "tensors": [
        {"key": "w", "dtype": "F16", "shape": [7, 5], "seed": 3, "mesh": [3], "placements": "S0"},
        {"key": "b", "dtype": "I64", "shape": [5], "seed": 4, "mesh": [3], "placements": "R"}]},
     {"world": 2, "tensors": [
         {"key": "w", "dtype": "F16", "shape": [7, 5], "seed": 3, "mesh": [2], "placements": "S1"},
         {"key": "b", "dtype": "I64", "shape": [5], "seed": 4, "mesh": [2], "placements": "S0"}]}),
    ("f8-1-to-3", {"world": 1, "tensors": [
        {"key": "q", "dtype": "F8_E4M3", "shape": [9, 4], "seed": 5, "mesh": [1], "placements": "R"}]},
     {"world": 3, "tensors": [
         {"key": "q", "dtype": "F8_E4M3", "shape": [9, 4], "seed": 5, "mesh": [3], "placements": "S0"}]}),
]


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def flip(path, at=None):
    with open(path, "r+b") as f:
        data = f.read()
        i = len(data) // 2 if at is None else at
        f.seek(i)
        f.write(bytes([data[i] ^ 0x01]))


def items_of(spec, whole):
    """Per world rank: (key, dtype, gshape, start, size, replica, raw bytes of the box or None)."""
    import numpy as np
    per = [[] for _ in range(int(spec["world"]))]
    for key, dtype, shape, mshape, pl, ranks in layouts(spec):
        for rank, start, size, rep in boxes(dtype, shape, mshape, pl, ranks):
            raw = None
            if whole is not None:
                g = whole[key]
                idx = tuple(slice(s, s + z) for s, z in zip(start, size))
                raw = np.ascontiguousarray(g[idx]).tobytes()
            per[rank].append({"key": key, "dtype": dtype, "gshape": shape, "start": start, "size": size,
                              "replica": rep, "factory": None, "reg": [False], "data": raw})
    return per


def export_arrays(path):
    """The export's tensors as raw-bit numpy arrays (safetensors.numpy cannot hold BF16/F8: bits)."""
    import numpy as np
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for k, v in hdr.items():
            if k == "__metadata__":
                continue
            a, b = v["data_offsets"]
            f.seek(base + a)
            raw = f.read(b - a)
            es = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                  "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}[v["dtype"]]
            dt = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[es]
            out[k] = np.frombuffer(raw, dtype=dt).reshape(v["shape"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reshard", required=True)
    ap.add_argument("--work")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--layouts", type=int, default=len(LAYOUTS), help="run the first N layouts (default all)")
    ap.add_argument("--plant", choices=["wrong_values"],
                    help="plant wrong-but-valid data in both directions (the Megatron save writes each box's rows "
                         "reversed; the reshard checkpoint read by Megatron holds another seed's values for one "
                         "tensor): every '== oracle' read must then FAIL (exit 1)")
    args = ap.parse_args()
    rs = os.path.realpath(args.reshard)
    import importlib.metadata as md
    print("cross reads: megatron-core %s, torch %s%s" % (md.version("megatron-core"), md.version("torch"),
                                                         ", planted: " + args.plant if args.plant else ""), flush=True)
    work = args.work or tempfile.mkdtemp(prefix="mcore-cross-")
    os.makedirs(work, exist_ok=True)
    pool = mcore_ckpt_pool.Pool(timeout=args.timeout, group_timeout=int(args.timeout))
    env = dict(os.environ, PYTHONPATH=os.path.join(TOP, "tools", "pytorch"))
    bad = 0

    def report(ok, what):
        nonlocal bad
        print("%s %s" % ("ok  " if ok else "FAIL", what), flush=True)
        bad += 0 if ok else 1

    def import_dcp(d, src, root, *extra):
        return sh([sys.executable, "-m", "reshard_dcp", "import-dcp", src, "--root", root, "--step", "1"] + list(extra),
                  cwd=d, env=env)

    def errors(ans):  # the ranks' errors, the one that raised first (not one the pool stopped waiting for)
        errs = [str(a[1]) for a in ans if a[0] != "ok"]
        return sorted(errs, key=lambda e: e.startswith("not waited for"))

    def last(text):
        return (text.strip().splitlines() or [""])[-1][:300]

    try:
        for name, save, load in LAYOUTS[:args.layouts]:
            d = os.path.join(work, name)
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            for fn, spec in (("save.json", save), ("load.json", load)):
                with open(os.path.join(d, fn), "w") as f:
                    json.dump(spec, f)
            r = sh([rs, "ckpt", "save", "save.json", "--root", "rs", "--step", "1"], cwd=d)
            if r.returncode:
                report(False, "%s: reshard ckpt save: %s" % (name, r.stderr.strip()[-300:]))
                continue
            r = sh([rs, "ckpt", "export", "rs", "whole.safetensors"], cwd=d)
            if r.returncode:
                report(False, "%s: reshard ckpt export: %s" % (name, r.stderr.strip()[-300:]))
                continue
            whole = export_arrays(os.path.join(d, "whole.safetensors"))
            desc = "cross"
            # A. Megatron saves (the oracle's values in SAVE's boxes); reshard imports the directory as
            # Megatron wrote it and loads LOAD
            mdir = os.path.join(d, "megatron")
            os.makedirs(mdir)
            per = items_of(save, whole)
            bug = "wrong_slice" if args.plant else None
            ans = pool.call(int(save["world"]), "mcore_ckpt_ops", "save", [(p, mdir, desc, bug) for p in per])
            if errors(ans):
                report(False, "%s: Megatron save: %s" % (name, errors(ans)[0]))
                continue
            first = name == LAYOUTS[0][0]  # the import's own refusals: checked once (each starts a python)
            if first:
                r = import_dcp(d, mdir, "imp_strict")
                report(r.returncode != 0 and "--skip-non-tensors" in r.stderr,
                       "%s: import-dcp of the Megatron directory without --skip-non-tensors refused, naming the "
                       "flag (exit %d: %s)" % (name, r.returncode, last(r.stderr)))
            r = import_dcp(d, mdir, "imp", "--skip-non-tensors")
            if r.returncode:
                report(False, "%s: Megatron -> reshard: import-dcp: %s" % (name, last(r.stderr)))
            else:
                r = sh([rs, "ckpt", "load", "load.json", "--root", "imp"], cwd=d)
                report(r.returncode == 0, "%s: Megatron dist_checkpointing.save (%d ranks) -> reshard_dcp import-dcp -> "
                       "reshard ckpt load (%d ranks) == oracle%s" % (
                           name, save["world"], load["world"], "" if r.returncode == 0 else ": " + last(r.stderr)))
            if first:
                # cut short (as by a save that died while writing it): always malformed; a flipped byte
                # may land in a string (the save's uuid) and leave a valid pickle
                mbad = os.path.join(d, "megatron-damaged")
                shutil.copytree(mdir, mbad)
                mp_ = os.path.join(mbad, ".metadata")
                os.truncate(mp_, os.path.getsize(mp_) // 2)
                r = import_dcp(d, mbad, "imp_bad", "--skip-non-tensors")
                report(r.returncode != 0, "%s: damage: the Megatron .metadata cut to half its length refused by the "
                       "import (exit %d: %s)" % (name, r.returncode, last(r.stderr)))
            # B. reshard's checkpoint read by Megatron's load through ReshardStorageReader
            root = os.path.join(d, "rs")
            if args.plant:  # a valid reshard checkpoint (digests right) whose first tensor has other values
                wrong = json.loads(json.dumps(save))
                wrong["tensors"][0]["seed"] += 7919
                with open(os.path.join(d, "wrong.json"), "w") as f:
                    json.dump(wrong, f)
                root = os.path.join(d, "rs_wrong")
                r = sh([rs, "ckpt", "save", "wrong.json", "--root", "rs_wrong", "--step", "1"], cwd=d)
                if r.returncode:
                    report(False, "%s: reshard ckpt save (planted): %s" % (name, last(r.stderr)))
                    continue
            lper = items_of(load, None)
            ans = pool.call(int(load["world"]), "mcore_ckpt_cross_ops", "load_reshard", [(p, root) for p in lper])
            errs = errors(ans)
            if errs:
                report(False, "%s: reshard -> Megatron load: %s" % (name, errs[0]))
            else:
                import numpy as np
                diff = []
                for r_, (items, got) in enumerate(zip(lper, [a[1] for a in ans])):
                    for it, raw in zip(items, got):
                        g = whole[it["key"]]
                        idx = tuple(slice(s, s + z) for s, z in zip(it["start"], it["size"]))
                        if np.ascontiguousarray(g[idx]).tobytes() != raw:
                            diff.append("%s rank %d" % (it["key"], r_))
                report(not diff, "%s: reshard ckpt save (%d ranks) -> Megatron dist_checkpointing.load via "
                       "ReshardStorageReader (%d ranks) == oracle%s" % (
                           name, save["world"], load["world"], "" if not diff else ": differs at " + ", ".join(diff[:4])))
            step = os.path.join(root, "step_1")
            data = sorted(f for f in os.listdir(step) if f.endswith(".safetensors"))
            flip(os.path.join(step, data[0]), at=os.path.getsize(os.path.join(step, data[0])) - 1)
            ans = pool.call(int(load["world"]), "mcore_ckpt_cross_ops", "load_reshard", [(p, root) for p in lper])
            errs = errors(ans)
            report(bool(errs), "%s: damage: a flipped data byte in the reshard checkpoint refused by Megatron's load "
                   "through ReshardStorageReader%s" % (name, ": " + errs[0][:200] if errs else ""))
    except mcore_ckpt_pool.PoolError as e:
        report(False, "gloo processes: %s" % e)
    finally:
        pool.close()
    print("cross reads: %s" % ("all passed" if not bad else "%d failed" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
