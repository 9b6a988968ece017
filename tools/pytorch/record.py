#!/usr/bin/env python3
"""record.py - records reshard fixtures from real PyTorch DTensor (CPU, all ranks in one process).

  # the random corpus (cases from `reshard gen`), written as fixtures/pytorch/*.jsonl.gz
  python3 tools/pytorch/record.py --reshard build/reshard --cases 3000 --seed 7 --out fixtures/pytorch/

  # cases from a JSON-lines file instead of `reshard gen`
  python3 tools/pytorch/record.py --in cases.jsonl --out fixtures/pytorch/

  # the hand-made cases (tools/pytorch/curated.py) -> fixtures/curated/*.json
  python3 tools/pytorch/record.py --curated --out fixtures/curated/

See tools/pytorch/README.md for what is recorded and how.
"""
import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rs_model  # noqa: E402


def gen_cases(reshard, seed, count, max_ranks, max_mesh_dims):
    cmd = [reshard, "gen", "--seed", str(seed), "--cases", str(count), "--max-ranks", str(max_ranks),
           "--max-mesh-dims", str(max_mesh_dims)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [rs_model.Case(json.loads(line)) for line in out.splitlines() if line.strip()]


def selfcheck(reshard, cases, n, tmpdir):
    """The Python port of SPEC 8 (rs_model.make_source) must give the bytes core/values.c gives:
    run n cases with dst = src through `reshard run` (ref leaves the source locals as they are)
    and compare every rank's digest. Returns the number of mismatching cases."""
    import xxhash
    bad = 0
    picked = [c for c in cases if c.src.has_partial()][: n // 2]
    picked += [c for c in cases if not c.src.has_partial()][: n - len(picked)]
    for c in picked:
        obj = c.case_json()
        obj["dst"] = obj["src"]
        path = os.path.join(tmpdir, "selfcheck.json")
        with open(path, "w") as f:
            json.dump(obj, f)
        out = subprocess.run([reshard, "run", path], capture_output=True, text=True).stdout
        got = [ln.split()[-1] for ln in out.splitlines()
               if re.match(r"^\s+\d+\s+\[", ln)]
        same = rs_model.Case(obj)  # dst takes part in the exact-value range: use the case run
        want = ["%016x" % xxhash.xxh3_64_intdigest(a.tobytes()) for a in rs_model.make_source(same)]
        if got != want:
            bad += 1
            print("selfcheck: %s: reshard %s, rs_model %s" % (c.name, got[:2], want[:2]), file=sys.stderr)
    return bad


def record_line(runner, case, rs_torch, flatten=False):
    try:
        rec, notes = rs_torch.run_case(runner, case, flatten=flatten)
    except Exception as e:  # keep going; the line says what PyTorch did
        import traceback
        rec = {"version": rs_torch.torch.__version__,
               "error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")}
        notes = ["recorder: " + traceback.format_exc().splitlines()[-1][:300]]
    line = case.case_json()
    line["pytorch"] = rec
    if notes:
        line["notes"] = notes
    bug = known_bug(case, rec, flatten)
    if bug:
        line["known_bug"] = bug
    dev = deviations(case, rec)
    if dev:
        line["pytorch_deviates"] = dev
    return line


def deviations(case, rec):
    """Where PyTorch's answer is not SPEC's (the C test then holds ref to the oracle)."""
    out = []
    if "error" in rec:
        out.append("PyTorch raised " + rec["error"])
    dts = sorted({r["dtype"] for r in rec.get("ranks", []) if "dtype" in r})
    if dts:
        out.append("PyTorch's result has dtype %s, not %s (integer Partial partition/avg use true "
                   "division)" % ("/".join(dts), case.dtype))
    # under the pytorch enumeration the zero-fill is the case's own semantics, not a deviation
    if case.enumeration == "seed" and any(re.match(r"\d+:S\(\d+\)->P\(", st) for st in rec.get("steps", [])):
        out.append("PyTorch's graph planner makes Partial(sum) from Shard by zero-fill (SPEC "
                   "partitions Replicate by 1/n): other per-rank pieces of the same logical tensor")
    return "; ".join(out) if out else None


# Known PyTorch issues, by the signature of the case in which they show (see README.md).
FLATTEN_BUG = "https://github.com/pytorch/pytorch/pull/194457"
STRIDED_NOTE = "strided-shard layout API"


def known_bug(case, rec, flatten):
    tags = []
    if flatten and rec.get("flattened_differs"):
        tags.append(FLATTEN_BUG)
    return " ".join(tags) if tags else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reshard", help="path of the reshard CLI (for `reshard gen`)")
    ap.add_argument("--in", dest="inp", help="JSON-lines file of cases (instead of reshard gen)")
    ap.add_argument("--cases", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-ranks", type=int, default=16)
    ap.add_argument("--max-mesh-dims", type=int, default=3)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--name", default=None, help="output file stem (default pytorch_seed<S>)")
    ap.add_argument("--curated", action="store_true", help="record tools/pytorch/curated.py")
    ap.add_argument("--flatten-check", action="store_true", default=True,
                    help="also run each multi-dim case on a mesh with flattened sub-meshes and "
                         "keep it as an extra line when PyTorch's answer changes (default on)")
    ap.add_argument("--no-flatten-check", dest="flatten_check", action="store_false")
    ap.add_argument("--shard-size", type=int, default=1000, help="cases per output file")
    args = ap.parse_args()

    import rs_torch  # torch is only needed from here on

    os.makedirs(args.out, exist_ok=True)
    runner = rs_torch.Runner()
    if args.curated:
        import curated
        curated.record_all(runner, rs_torch, args.out)
        return

    if args.inp:
        cases = rs_model.load_cases(args.inp)
    elif args.reshard:
        cases = gen_cases(args.reshard, args.seed, args.cases, args.max_ranks, args.max_mesh_dims)
    else:
        ap.error("give --reshard or --in (or --curated)")
    if args.reshard:
        bad = selfcheck(args.reshard, cases, 60, args.out)
        if os.path.exists(os.path.join(args.out, "selfcheck.json")):
            os.remove(os.path.join(args.out, "selfcheck.json"))
        if bad:
            sys.exit("rs_model.py no longer matches core/values.c (%d cases): update the port" % bad)
        print("selfcheck: rs_model.make_source matches `reshard` on 60 cases", file=sys.stderr)
    stem = args.name or ("pytorch_seed%d" % args.seed)
    # group by rank count: one fake process group per world size
    order = sorted(range(len(cases)), key=lambda i: cases[i].nranks)
    lines = [None] * len(cases)
    extra = []
    t0 = time.time()
    stats = {"ok": 0, "error": 0, "notes": 0, "flatten_bugs": 0}
    for k, i in enumerate(order):
        c = cases[i]
        line = record_line(runner, c, rs_torch)
        lines[i] = line
        if "error" in line["pytorch"]:
            stats["error"] += 1
        else:
            stats["ok"] += 1
        if line.get("notes"):
            stats["notes"] += 1
        if args.flatten_check and len(c.mesh_shape) > 1 and "error" not in line["pytorch"]:
            fl = rs_torch.flatten_variant(runner, c, line["pytorch"])
            if fl is not None:
                fline = c.case_json()
                fline["name"] = (c.name or "case%d" % i) + "-flattened"
                fline["pytorch"] = fl
                fline["known_bug"] = FLATTEN_BUG
                extra.append(fline)
                stats["flatten_bugs"] += 1
        if (k + 1) % 100 == 0 or k + 1 == len(cases):
            el = time.time() - t0
            print("[%d/%d] %.1fs (%.1f ms/case) ok=%d error=%d notes=%d flatten_bugs=%d" % (
                k + 1, len(cases), el, 1000 * el / (k + 1), stats["ok"], stats["error"],
                stats["notes"], stats["flatten_bugs"]), file=sys.stderr, flush=True)
    lines.extend(extra)
    nfiles = 0
    for s in range(0, len(lines), args.shard_size):
        path = os.path.join(args.out, "%s_%03d.jsonl.gz" % (stem, s // args.shard_size))
        with gzip.open(path, "wt", compresslevel=9) as f:
            for line in lines[s:s + args.shard_size]:
                f.write(json.dumps(line, separators=(",", ":"), sort_keys=False) + "\n")
        nfiles += 1
    print("wrote %d lines in %d files to %s" % (len(lines), nfiles, args.out), file=sys.stderr)


if __name__ == "__main__":
    main()
