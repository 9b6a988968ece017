#!/usr/bin/env python3
"""bench_dcp_reshard.py - PyTorch DCP doing the resharding `reshard bench ckpt --reshard` measures:
the benchmark's state dict (16 F32 matrices [rows, 4096] and 8 [4096] norms, see
bench/bench_ckpt.c) saved by DCP on --ranks processes with the matrices Shard(0) (untimed setup),
then, on --to processes, loaded into DTensors with the matrices Shard(1) and saved again to a new
directory (FileSystemWriter(sync_files=True), plus the directory fsync reshard's commit does):
load + save is timed from a barrier to a barrier, with the source's files dropped from the page
cache first. Every loaded element is checked against the value the source was made with.

  PYTHON tools/pytorch/bench_dcp_reshard.py --once --bytes 512M --ranks 4 --to 2 --threads 2 --dir DIR

prints one JSON line {"from", "to", "bytes", "load_s", "save_s", "total_s", "equal"}; `reshard bench
ckpt --reshard --dcp-reshard 'PYTHON tools/pytorch/bench_dcp_reshard.py'` runs it between its own
repetitions so the ratios come from runs made back to back.
"""
import argparse
import json
import os
import shutil
import sys
import time


def parse_bytes(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * m[s[-1].upper()]) if s[-1].upper() in m else int(s)


def drop_cache(path):
    for d, _, files in os.walk(path):
        for f in files:
            fd = os.open(os.path.join(d, f), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def worker(rank, world, args, port, phase, out):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (world,))
    nw = 16
    rows = max(4, args.bytes // nw // (4096 * 4) // 4 * 4)

    def value(i, r0, r1, c0, c1):
        # a pure function of (matrix, row, column): what any layout must hold
        r = torch.arange(r0, r1, dtype=torch.int64).unsqueeze(1)
        c = torch.arange(c0, c1, dtype=torch.int64).unsqueeze(0)
        return ((r * 4096 + c) * (2 * i + 1) % 65521).to(torch.float32)

    def span(n, parts, k):
        per = -(-n // parts)
        return min(n, k * per), min(n, (k + 1) * per)

    def make(dim, fill):
        sd = {}
        for i in range(nw):
            lo, hi = span(rows if dim == 0 else 4096, world, rank)
            r0, r1, c0, c1 = (lo, hi, 0, 4096) if dim == 0 else (0, rows, lo, hi)
            t = value(i, r0, r1, c0, c1) if fill else torch.zeros((r1 - r0, c1 - c0))
            sd[f"decoder.layers.{i}.mlp.linear_fc1.weight"] = DTensor.from_local(
                t, mesh, [Shard(dim)], run_check=False, shape=torch.Size((rows, 4096)), stride=(4096, 1))
        for i in range(8):
            t = torch.full((4096,), float(i)) if fill else torch.zeros(4096)
            sd[f"decoder.layers.{i}.input_layernorm.weight"] = DTensor.from_local(t, mesh, [Replicate()], run_check=False)
        return sd, (lambda i: value(i, *((span(rows, world, rank) + (0, 4096)) if dim == 0
                                          else ((0, rows) + span(4096, world, rank)))))

    src = os.path.join(args.dir, "dcp_src")
    dst = os.path.join(args.dir, "dcp_dst")
    if phase == "save":
        sd, _ = make(0, True)
        dcp.save(sd, storage_writer=dcp.FileSystemWriter(src, sync_files=True, thread_count=args.threads))
        dist.barrier()
        if rank == 0:
            drop_cache(src)
        dist.destroy_process_group()
        return
    sd, expect = make(1, False)
    if rank == 0:
        shutil.rmtree(dst, ignore_errors=True)
    dist.barrier()
    t0 = time.perf_counter()
    dcp.load(sd, storage_reader=dcp.FileSystemReader(src))
    dist.barrier()
    tl = time.perf_counter() - t0
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(dst, sync_files=True, thread_count=args.threads))
    dist.barrier()
    if rank == 0:
        dfd = os.open(dst, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    dist.barrier()
    tt = time.perf_counter() - t0
    ok = all(torch.equal(sd[f"decoder.layers.{i}.mlp.linear_fc1.weight"].to_local(), expect(i)) for i in range(nw))
    ok = ok and all(torch.equal(sd[f"decoder.layers.{i}.input_layernorm.weight"].to_local(), torch.full((4096,), float(i)))
                    for i in range(8))
    okt = torch.tensor([1 if ok else 0])
    dist.all_reduce(okt, op=dist.ReduceOp.MIN)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"from": args.ranks, "to": world, "bytes": nw * rows * 4096 * 4 + 8 * 4096 * 4, "load_s": tl,
                       "save_s": tt - tl, "total_s": tt, "equal": bool(okt.item())}, f)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.rmtree(src, ignore_errors=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", default="512M")
    ap.add_argument("--ranks", type=int, default=4, help="processes that save the source (Shard(0))")
    ap.add_argument("--to", type=int, default=2, help="processes that load it as Shard(1) and save it again")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--once", action="store_true", help="one run, its JSON on stdout (the only mode)")
    args = ap.parse_args()
    args.bytes = parse_bytes(args.bytes)
    os.makedirs(args.dir, exist_ok=True)
    import torch.multiprocessing as mp

    out = os.path.join(args.dir, "dcp_reshard.json")
    port = 21000 + (os.getpid() * 7) % 20000
    mp.start_processes(worker, args=(args.ranks, args, port, "save", out), nprocs=args.ranks, start_method="fork",
                       join=True)
    mp.start_processes(worker, args=(args.to, args, port + 1, "reshard", out), nprocs=args.to, start_method="fork",
                       join=True)
    with open(out) as f:
        r = json.load(f)
    os.remove(out)
    print(json.dumps(r), flush=True)
    return 0 if r["equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
