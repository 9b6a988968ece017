#!/usr/bin/env python3
"""conform_child.py - a same-mesh redistribute backend written from scratch in plain Python (no
numpy), speaking reshard's process protocol (docs/conformance.md) on stdin/stdout:

    reshard conform --backend exec:'python3 tests/conform_child.py [MODE]' --suite redistribute

It does copy-only cases (Shard and Replicate: it assembles the global tensor from the source
boxes and cuts the destination boxes out of it) and answers "unsupported" for Partial ones, which
the harness reports as skipped. MODE plants one fault, to show the harness catches it:
  --bug array_split   uneven splits as numpy.array_split makes them (the first len % n chunks one
                      longer) instead of torch.chunk's (SPEC 4): a realistic porting bug
  --crash             aborts (SIGABRT)                    } on a mesh of 3 or more ranks and
  --hang              stops answering                     } a tensor of an odd number of
  --garbage           writes a traceback instead of JSON  } elements (the harness shrinks
  --wrong-id          answers with another request's id   } its failure to such a case)
  --stray             answers, then a second answer line  }
  --stray-late        answers, 0.3 s later a stray line   }
  --half              writes half a line, then hangs      }
  CONFORM_CHILD_PIDS=FILE (environment): each start appends its pid to FILE (to check reaping)
  CONFORM_CHILD_ENV=FILE (environment): each start appends "OMP=v MKL=v OPENBLAS=v", the
                      *_NUM_THREADS variables it was given ("-": unset)
  CONFORM_CHILD_MAX_INSTANCES=K (environment): its hello says "max_instances": K (at most K of it
                      may run at once: `conform --jobs N` then starts min(N, K) children)
  --version N         says hello with protocol version N
"""
import base64
import json
import os
import re
import signal
import sys
import time

SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8,
        "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
MODE = sys.argv[1] if len(sys.argv) > 1 else ""
ARG = sys.argv[2] if len(sys.argv) > 2 else ""


def chunk(length, n, i):
    """(offset, size) of chunk i of n of a dim of `length`: torch.chunk (SPEC 4)."""
    if MODE == "--bug" and ARG == "array_split":
        small, extra = divmod(length, n)
        size = small + (1 if i < extra else 0)
        return i * small + min(i, extra), size
    if length % n == 0:
        return i * (length // n), length // n
    c = -(-length // n)
    off = c * i
    if off >= length:
        return length, 0
    return off, min(off + c, length) - off


def parse_layout(lay, ndim, mesh_ndim):
    """Per tensor dim, the mesh dims that split it, in order; None when a Partial is present."""
    orders = [[] for _ in range(ndim)]
    pls = lay["placements"]
    for m, p in enumerate(pls):
        if p.startswith("P"):
            return None
        s = re.match(r"S\(?(-?\d+)\)?$", p)
        if s:
            orders[int(s.group(1)) % ndim].append(m)
    given = lay.get("shard_order")
    if given:
        for e in given:
            orders[e["tensor_dim"] % ndim] = list(e["mesh_dims"])
    return orders


def box(shape, sizes, orders, coord):
    start, size = [], []
    for d, length in enumerate(shape):
        lo = 0
        for m in orders[d]:
            off, length = chunk(length, sizes[m], coord[m])
            lo += off
        start.append(lo)
        size.append(length)
    return start, size


def coords(sizes):
    out = [[]]
    for s in sizes:
        out = [c + [i] for c in out for i in range(s)]
    return out


def rows(start, size):
    """Index tuples of the leading dims of a box (row-major)."""
    out = [[]]
    for d in range(len(size) - 1):
        out = [r + [start[d] + i] for r in out for i in range(size[d])]
    return out


def redistribute(case, locals_):
    mesh, tensor = case["mesh"], case["tensor"]
    sizes, ranks = mesh["shape"], mesh.get("ranks") or list(range(len(coords(mesh["shape"]))))
    shape, es = tensor["shape"], SIZE[tensor["dtype"]]
    ndim = len(shape)
    src = parse_layout(case["src"], ndim, len(sizes))
    dst = parse_layout(case["dst"], ndim, len(sizes))
    if src is None or dst is None:
        return None
    strides = [1] * ndim
    for d in range(ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    numel = 1
    for s in shape:
        numel *= s
    glob = bytearray(numel * es)
    cs = coords(sizes)

    def walk(start, size, fn):
        if ndim == 0:
            fn(0, 0, 1)
            return
        last = size[-1]
        if last == 0 or any(s == 0 for s in size):
            return
        for k, r in enumerate(rows(start, size)):
            g = sum(i * strides[d] for d, i in enumerate(r)) + start[-1]
            fn(g, k * last, last)

    for pos, c in enumerate(cs):
        data = base64.b64decode(locals_[pos]["data"])
        start, size = box(shape, sizes, src, c)

        def put(g, l, n):
            glob[g * es:(g + n) * es] = data[l * es:(l + n) * es]
        walk(start, size, put)
    out = []
    for pos, c in enumerate(cs):
        start, size = box(shape, sizes, dst, c)
        n = 1
        for s in size:
            n *= s
        buf = bytearray(n * es)

        def get(g, l, k):
            buf[l * es:(l + k) * es] = glob[g * es:(g + k) * es]
        walk(start, size, get)
        out.append({"rank": ranks[pos], "shape": size, "data": base64.b64encode(bytes(buf)).decode()})
    return out


def main():
    if os.environ.get("CONFORM_CHILD_PIDS"):
        with open(os.environ["CONFORM_CHILD_PIDS"], "a") as f:
            f.write("%d\n" % os.getpid())
    if os.environ.get("CONFORM_CHILD_ENV"):
        with open(os.environ["CONFORM_CHILD_ENV"], "a") as f:
            f.write(" ".join("%s=%s" % (k, os.environ.get(k + "_NUM_THREADS", "-"))
                             for k in ("OMP", "MKL", "OPENBLAS")) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        if op == "bye":
            return
        if op == "hello":
            version = int(ARG) if MODE == "--version" else 1
            hello = {"ok": True, "version": version, "name": "python-copy-only", "capabilities": ["redistribute"]}
            if os.environ.get("CONFORM_CHILD_MAX_INSTANCES"):
                hello["max_instances"] = int(os.environ["CONFORM_CHILD_MAX_INSTANCES"])
            print(json.dumps(hello), flush=True)
            continue
        rid = req.get("id")
        if op != "redistribute":
            print(json.dumps({"id": rid, "ok": False, "unsupported": True, "message": "only redistribute"}), flush=True)
            continue
        case = req["case"]
        numel = 1
        for s in case["tensor"]["shape"]:
            numel *= s
        big = len(case["mesh"].get("ranks") or []) >= 3 and numel % 2 == 1
        if big and MODE == "--crash":
            sys.stderr.write("conform_child: about to abort on a %d-rank mesh\n" % len(case["mesh"]["ranks"]))
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGABRT)
        if big and MODE == "--hang":
            time.sleep(3600)
        if big and MODE == "--half":
            sys.stdout.write('{"id": %d, "ok": true, "loc' % rid)
            sys.stdout.flush()
            time.sleep(3600)
        if big and MODE == "--garbage":
            print("Traceback (most recent call last):\n  ValueError: something broke", flush=True)
            continue
        out = redistribute(case, req["locals"])
        if out is None:
            print(json.dumps({"id": rid, "ok": False, "unsupported": True,
                              "message": "Partial placements are not implemented"}), flush=True)
            continue
        if big and MODE == "--wrong-id":
            rid += 1
        answer = json.dumps({"id": rid, "ok": True, "locals": out})
        if big and MODE == "--stray":
            # one write: the stray line is in the pipe with the answer
            sys.stdout.write(answer + "\n" + json.dumps({"id": rid, "ok": True, "note": "stray"}) + "\n")
            sys.stdout.flush()
            continue
        print(answer, flush=True)
        if big and MODE == "--stray-late":
            time.sleep(0.3)
            print(json.dumps({"id": rid, "ok": True, "note": "late stray"}), flush=True)


if __name__ == "__main__":
    main()
