#!/usr/bin/env python3
"""rerecord.py - records named lines of a recorded corpus again with real PyTorch, in place, after
a change of SPEC 8's values (rs_model.py must already match core/values.c).

  python3 tools/pytorch/rerecord.py fixtures/pytorch gen-7-257 gen-7-623 ...
  python3 tools/pytorch/rerecord.py --values order fixtures/pytorch gen-7-493 ...

--values switches the named cases to another value mode first (e.g. exact cases whose dtype cannot
hold exact values, which SPEC 8 now refuses instead of filling with zeros). A case's "-flattened"
line is recorded again too, or dropped when the flattened run no longer differs.
"""
import argparse
import glob
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rs_model  # noqa: E402
import record  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--values", default=None, help="switch the named cases to this value mode")
    args = ap.parse_args()
    import rs_torch
    runner = rs_torch.Runner()
    want = set(args.names)
    done = set()
    for path in sorted(glob.glob(os.path.join(args.dir, "*.jsonl.gz"))):
        with gzip.open(path, "rt") as f:
            lines = [json.loads(ln) for ln in f if ln.strip()]
        out, changed = [], False
        for obj in lines:
            name = obj.get("name", "")
            base = name[: -len("-flattened")] if name.endswith("-flattened") else name
            if base not in want:
                out.append(obj)
                continue
            changed = True
            case_obj = {k: v for k, v in obj.items() if k not in ("pytorch", "notes", "known_bug", "pytorch_deviates")}
            case_obj["name"] = base
            if args.values:
                case_obj["values"] = args.values
            case = rs_model.Case(case_obj)
            line = record.record_line(runner, case, rs_torch)
            if name.endswith("-flattened"):
                fl = rs_torch.flatten_variant(runner, case, line["pytorch"]) if "error" not in line["pytorch"] else None
                if fl is None:
                    print("%s: flattened run no longer differs: line dropped" % name, file=sys.stderr)
                    continue
                fline = case.case_json()
                fline["name"] = name
                fline["pytorch"] = fl
                fline["known_bug"] = record.FLATTEN_BUG
                out.append(fline)
            else:
                out.append(line)
            done.add(base)
            print("%s: recorded again%s" % (name, " (pytorch_deviates)" if line.get("pytorch_deviates") else ""),
                  file=sys.stderr)
        if changed:
            with gzip.open(path, "wt", compresslevel=9) as f:
                for obj in out:
                    f.write(json.dumps(obj, separators=(",", ":"), sort_keys=False) + "\n")
    missing = want - done
    if missing:
        sys.exit("not found: " + " ".join(sorted(missing)))


if __name__ == "__main__":
    main()
