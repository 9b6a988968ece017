#!/usr/bin/env python3
"""bench_dcp.py - PyTorch DCP (torch.distributed.checkpoint) saving and loading the tensors of
`reshard bench ckpt` with the same rank counts, on a gloo world of CPU processes, so that
reshard's figures can be given as a ratio to DCP measured on the same disk.

The state dict is the one bench/bench_ckpt.c builds: 16 F32 matrices [rows, 4096] sharded along
dim 0 (DTensor Shard(0) on a 1-d CPU DeviceMesh) and 8 replicated [4096] norms (Replicate). Save
uses FileSystemWriter(sync_files=True, thread_count=--threads) and is timed from a barrier to a
barrier; before the load every file of the checkpoint is fdatasync'ed and evicted from the page
cache with posix_fadvise(DONTNEED) (what bench_ckpt.c does for reshard's files), and the load into
zeroed DTensors of the same layout is timed the same way and checked with torch.equal.

Durability: sync_files=True fsyncs every data file and the .metadata temp file before renaming it,
but not the directory, so DCP's commit (the rename) can be lost to a power failure; reshard's
save also fsyncs the directory. Each run reports both: save_s (DCP as shipped) and save_durable_s
(plus one directory fsync, timed inside the same barriers).

  reshard bench ckpt --dcp '/work/torch-venv/bin/python tools/pytorch/bench_dcp.py' ...
runs this script with --once (one DCP run of one rank count, its JSON on stdout) after each of its
own repetitions, so every reshard/DCP ratio comes from runs made back to back.

  /work/torch-venv/bin/python tools/pytorch/bench_dcp.py --bytes 2G --ranks 1,2,4 --dir DIR \\
      [--threads 4] [--reps 5] [--reshard BIN | --reshard-json reshard.json] [--json dcp.json]

With --reshard BIN, `BIN bench ckpt --reps 1` runs right before each DCP run (same bytes, same
directory, interleaved in one run): the ratio reshard/DCP of save and load throughput is printed
per pair, then the median of the pairs per rank count. With --reshard-json (written by `reshard
bench ckpt --json`) the ratios use those runs instead.
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


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def spread(v):
    """median [min, max], as reshard bench ckpt prints a ratio"""
    return f"{median(v):.2f}x [{min(v):.2f}, {max(v):.2f}]"


def drop_cache(path):
    for d, _, files in os.walk(path):
        for f in files:
            fd = os.open(os.path.join(d, f), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def worker(rank, world, args, port, out):
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
    g = torch.Generator().manual_seed(1234 + rank)

    def make(fill):
        sd = {}
        for i in range(nw):
            # torch.chunk semantics: ceil(rows / world) rows per rank, the last ones may get fewer
            per = -(-rows // world)
            lo, hi = min(rows, rank * per), min(rows, (rank + 1) * per)
            t = torch.rand((hi - lo, 4096), generator=g) if fill else torch.zeros((hi - lo, 4096))
            sd[f"decoder.layers.{i}.mlp.linear_fc1.weight"] = DTensor.from_local(
                t, mesh, [Shard(0)], run_check=False, shape=torch.Size((rows, 4096)),
                stride=(4096, 1))
        for i in range(8):
            t = torch.full((4096,), float(i)) if fill else torch.zeros(4096)
            sd[f"decoder.layers.{i}.input_layernorm.weight"] = DTensor.from_local(
                t, mesh, [Replicate()], run_check=False)
        return sd

    sd = make(True)
    path = os.path.join(args.dir, f"dcp_{world}")
    if rank == 0:
        shutil.rmtree(path, ignore_errors=True)
    dist.barrier()
    t0 = time.perf_counter()
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(path, sync_files=True, thread_count=args.threads))
    dist.barrier()
    ts = time.perf_counter() - t0
    # sync_files=True fsyncs every data file and .metadata.tmp before its rename, but never the
    # directory: the rename (the commit) may not survive a power loss. The durable figure adds
    # that one directory fsync, which reshard's commit does.
    if rank == 0:
        dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    dist.barrier()
    tsd = time.perf_counter() - t0
    if rank == 0:
        drop_cache(path)
    dist.barrier()
    dst = make(False)
    dist.barrier()
    t0 = time.perf_counter()
    dcp.load(dst, storage_reader=dcp.FileSystemReader(path))
    dist.barrier()
    tl = time.perf_counter() - t0
    ok = all(torch.equal(sd[k].to_local(), dst[k].to_local()) for k in sd)
    okt = torch.tensor([1 if ok else 0])
    dist.all_reduce(okt, op=dist.ReduceOp.MIN)
    if rank == 0:
        total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
        payload = nw * rows * 4096 * 4 + 8 * 4096 * 4
        with open(out, "w") as f:
            json.dump({"ranks": world, "bytes": payload, "files_bytes": total, "save_s": ts, "save_durable_s": tsd, "load_s": tl,
                       "equal": bool(okt.item())}, f)
        shutil.rmtree(path, ignore_errors=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", default="2G")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--threads", type=int, default=max(2, min(8, os.cpu_count() or 2)),
                    help="I/O threads of both (reshard --threads, DCP thread_count); default: cores in [2, 8]")
    ap.add_argument("--reshard-json")
    ap.add_argument("--reshard", help="reshard binary: run `bench ckpt` for each rank count, interleaved")
    ap.add_argument("--reps", type=int, default=5, help="pairs (reshard, DCP) per rank count; medians printed")
    ap.add_argument("--json")
    ap.add_argument("--once", action="store_true",
                    help="one DCP run of the one rank count in --ranks; its JSON on stdout (what "
                         "`reshard bench ckpt --dcp` runs between its own, interleaved)")
    args = ap.parse_args()
    args.bytes = parse_bytes(args.bytes)
    os.makedirs(args.dir, exist_ok=True)
    import torch
    import torch.multiprocessing as mp

    if args.once:
        world = int(args.ranks)
        out = os.path.join(args.dir, f"dcp_{world}.json")
        port = 20000 + (os.getpid() * 7) % 20000
        mp.start_processes(worker, args=(world, args, port, out), nprocs=world, start_method="fork", join=True)
        with open(out) as f:
            r = json.load(f)
        os.remove(out)
        print(json.dumps(r), flush=True)
        return 0 if r["equal"] else 1

    reshard = {}
    if args.reshard_json:
        with open(args.reshard_json) as f:
            for r in json.load(f)["runs"]:
                reshard.setdefault(r["ranks"], []).append(r)
    print(f"PyTorch {torch.__version__} DCP, FileSystemWriter(thread_count={args.threads}, sync_files=True), gloo, "
          f"{args.bytes / (1 << 30):.2f} GiB, page cache dropped per file before the load, median of {args.reps}")
    cmp = bool(reshard or args.reshard)
    print(f"{'ranks':>5} {'rep':>4} {'save MB/s':>10} {'load MB/s':>10} {'equal':>6}"
          + (f" {'reshard/DCP save':>17} {'reshard/DCP load':>17}" if cmp else ""))
    runs = []
    port = 29500 + os.getpid() % 1000
    for world in (int(x) for x in args.ranks.split(",")):
        ratios = []
        for rep in range(args.reps):
            rs = None
            if args.reshard:
                # reshard's run right before DCP's, same bytes and directory: one pair per rep
                import subprocess
                rj = os.path.join(args.dir, f"reshard_{world}.json")
                p = subprocess.run([args.reshard, "bench", "ckpt", "--bytes", str(args.bytes), "--ranks", str(world),
                                    "--reps", "1", "--dir", os.path.join(args.dir, "rs"), "--threads",
                                    str(args.threads), "--json", rj], capture_output=True, text=True, check=True)
                print("  reshard: " + p.stdout.strip().splitlines()[-1], flush=True)
                with open(rj) as f:
                    rs = json.load(f)["runs"][0]
                os.remove(rj)
            elif world in reshard:
                rs = reshard[world][rep % len(reshard[world])]
            out = os.path.join(args.dir, f"dcp_{world}.json")
            port += 1
            mp.start_processes(worker, args=(world, args, port, out), nprocs=world, start_method="fork", join=True)
            with open(out) as f:
                r = json.load(f)
            os.remove(out)
            r["rep"] = rep
            if rs:
                r["reshard_save_s"], r["reshard_load_s"] = rs["save_s"], rs["load_s"]
            runs.append(r)
            mb = r["bytes"] / 1e6
            line = f"{world:5d} {rep:4d} {mb / r['save_s']:10.0f} {mb / r['load_s']:10.0f} {str(r['equal']):>6}"
            if rs:
                ratios.append((r["save_s"] / rs["save_s"], r["load_s"] / rs["load_s"]))
                line += f" {ratios[-1][0]:16.2f}x {ratios[-1][1]:16.2f}x"
            print(line, flush=True)
        if ratios:
            print(f"{world:5d} {'med':>4} reshard/DCP save {spread([x for x, _ in ratios])}, "
                  f"load {spread([y for _, y in ratios])}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs}, f)
    return 0 if all(r["equal"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
