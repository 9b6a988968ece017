"""mcore_ckpt_pool.py - a pool of gloo processes that run Megatron-Core's dist_checkpointing.

One worker process per rank, reused across cases. By default the workers are forked from the
parent after it has imported torch and megatron once (importing them is about 6 s of CPU a
process, so a pool of 8 spawned workers spent most of a short CI run importing); the parent holds
no process group, store or thread of its own when it forks. `start="spawn"` (or RS_MCORE_START=spawn)
starts fresh interpreters instead, each importing on its own. Worker 0 hosts a TCPStore on a free port; every worker connects to it once.
A world of N ranks is the first N workers joined into a fresh default process group
(`init_process_group("gloo", store=PrefixStore("g<gen>", store))`, world N); a request for another
N destroys the group on every worker and makes the new one. Megatron's save and load use the
default group, so the group must be exactly the saving (or loading) world.

Every wait has a timeout. A worker that does not answer in time, dies, or raises a protocol error
makes the pool kill every worker (terminate, then kill) and start afresh on the next request.
Workers die with the parent (PR_SET_PDEATHSIG) and sit in its process group, so the harness's kill
of the child's process group takes them too: no orphans.

Used by tools/megatron/ckpt.py (the conform backend) and tools/megatron/mcore_ckpt_cross.py.
"""
import multiprocessing as mp
import multiprocessing.connection  # noqa: F401
import os
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def _pdeathsig():
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _worker(conn, rank, port_conn, port, group_timeout, preload=()):
    """A worker's loop: commands ("group", gen, n), ("call", module, fn, args), ("exit",)."""
    _pdeathsig()
    sys.stdout = sys.stderr
    try:  # fd 1 is the parent's protocol pipe: nothing a worker (or Megatron's writers) prints may reach it
        os.dup2(2, 1)
    except OSError:
        pass
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import datetime
    import importlib
    import warnings
    warnings.filterwarnings("ignore")
    import logging
    logging.disable(logging.WARNING)
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    sys.path.insert(0, HERE)
    if rank == 0:
        store = dist.TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=group_timeout),
                              wait_for_workers=False)
        port_conn.send(store.port)
        port_conn.close()
    else:
        store = dist.TCPStore("127.0.0.1", port, None, False, timeout=datetime.timedelta(seconds=group_timeout))
    for m in preload:  # imported before "ready" (start timeout), not inside a case's operation timeout
        importlib.import_module(m)
    conn.send(("ready", rank))
    size = 0
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            break
        if msg[0] == "exit":
            break
        try:
            if msg[0] == "group":
                gen, n = msg[1], msg[2]
                if size:
                    dist.destroy_process_group()
                    size = 0
                if rank < n:
                    dist.init_process_group("gloo", store=dist.PrefixStore("g%d" % gen, store), rank=rank,
                                            world_size=n, timeout=datetime.timedelta(seconds=group_timeout))
                    size = n
                conn.send(("ok", None))
            elif msg[0] == "call":
                mod = importlib.import_module(msg[1])
                conn.send(("ok", getattr(mod, msg[2])(rank, size, *msg[3])))
        except BaseException as e:  # the case's failure, answered; the worker lives on
            tb = traceback.format_exc()
            sys.stderr.write("[rank %d] %s" % (rank, tb))
            msg = "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:300])
            failures = getattr(e, "failures", None)  # DCP's CheckpointException: {rank: exception}
            if isinstance(failures, dict) and failures:
                r0, f0 = sorted(failures.items(), key=lambda kv: str(kv[0]))[0]
                msg += " (rank %s: %s: %s)" % (r0, type(f0).__name__, (str(f0).strip().splitlines() or [""])[0][:300])
            conn.send(("error", msg, tb))


def _descendants(roots):
    """Every live process below the given pids (from /proc: pid -> parent pid)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], list(roots)
    while todo:
        p = todo.pop()
        for c, pp in parent.items():
            if pp == p:
                out.append(c)
                todo.append(c)
    return out


class PoolError(Exception):
    """The pool broke (timeout, dead worker): it has been torn down."""


class Pool:
    def __init__(self, timeout=90.0, group_timeout=60, start_timeout=300.0, preload=("mcore_ckpt_ops",), start=None):
        start = start or os.environ.get("RS_MCORE_START") or "fork"
        if start not in ("fork", "spawn"):
            raise ValueError("start method %r: fork or spawn" % start)
        self.start = start
        self.ctx = mp.get_context(start)
        self.imported = False
        self.timeout = timeout
        self.start_timeout = start_timeout  # importing torch and megatron on a loaded machine
        self.preload = tuple(preload)
        self.group_timeout = group_timeout
        self.procs, self.conns = [], []
        self.port = None
        self.gen = 0
        self.size = 0  # the current default group's world size

    def _start(self, rank):
        a, b = self.ctx.Pipe()
        pa = pb = None
        if rank == 0:
            pa, pb = self.ctx.Pipe(duplex=False)
        # not daemonic: Megatron's torch_dist writer starts processes of its own (a Manager queue,
        # forked writers); they are reaped in close() with the workers
        p = self.ctx.Process(target=_worker, args=(b, rank, pb, self.port, self.group_timeout, self.preload),
                             daemon=False)
        p.start()
        b.close()
        if rank == 0:
            pb.close()
            if not pa.poll(self.start_timeout):
                raise PoolError("worker 0 did not start its store within %.0f s" % self.start_timeout)
            self.port = pa.recv()
        self.procs.append(p)
        self.conns.append(a)

    def _recv(self, i, deadline):
        c = self.conns[i]
        left = deadline - time.monotonic()
        if left <= 0 or not c.poll(left):
            raise PoolError("rank %d did not answer within %.0f s" % (i, self.timeout))
        try:
            return c.recv()
        except (EOFError, OSError):
            raise PoolError("rank %d died (exit status %s)" % (i, self.procs[i].exitcode))

    def grow(self, n):
        """Start workers up to n, all at once once worker 0 has its store up (each imports torch and
        megatron: slow on a loaded machine), then wait for every one's "ready"."""
        try:
            if self.start == "fork" and not self.imported:
                # once, in the parent: the forked workers inherit the modules
                import importlib
                import warnings
                if HERE not in sys.path:
                    sys.path.insert(0, HERE)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    for m in self.preload:
                        importlib.import_module(m)
                self.imported = True
            first = len(self.procs)
            while len(self.procs) < n:
                self._start(len(self.procs))
            deadline = time.monotonic() + self.start_timeout
            for r in range(first, n):
                ans = self._recv(r, deadline)
                if ans[0] != "ready":
                    raise PoolError("worker %d: %r" % (r, ans))
        except PoolError:
            self.close()
            raise

    def group(self, n):
        """Make the default process group of the first n workers."""
        if self.size == n and len(self.procs) >= n:
            return
        self.grow(n)
        self.gen += 1
        self._all([("group", self.gen, n)] * len(self.procs), range(len(self.procs)))
        self.size = n

    def _all(self, msgs, ranks):
        """Send each rank its message and gather the answers. Megatron raises on one rank (its
        validation runs on rank 0 alone) while the others wait in a collective for ever: the first
        error answer tears the pool down at once (the others are killed, not waited for)."""
        ranks = list(ranks)
        try:
            for r, m in zip(ranks, msgs):
                self.conns[r].send(m)
            deadline = time.monotonic() + self.timeout
            got = {}
            while len(got) < len(ranks):
                left = deadline - time.monotonic()
                ready = mp.connection.wait([self.conns[r] for r in ranks if r not in got], max(0.0, left))
                if not ready:
                    late = [r for r in ranks if r not in got]
                    raise PoolError("rank(s) %s did not answer within %.0f s" % (late, self.timeout))
                for c in ready:
                    r = self.conns.index(c)
                    try:
                        got[r] = c.recv()
                    except (EOFError, OSError):
                        raise PoolError("rank %d died (exit status %s)" % (r, self.procs[r].exitcode))
                    if got[r][0] == "error":
                        if len(got) < len(ranks):
                            self.close()
                        self.size = 0  # the group may hold unmatched messages: make a fresh one
                        return [got.get(x, ("error", "not waited for (rank %d failed first)" % r, ""))
                                for x in ranks]
            return [got[r] for r in ranks]
        except PoolError:
            self.close()
            raise
        except (BrokenPipeError, OSError) as e:
            self.close()
            raise PoolError("a worker's pipe broke: %s" % e)

    def call(self, n, module, fn, per_rank_args):
        """module.fn(rank, n, *per_rank_args[rank]) on ranks 0..n-1 of a world of n; a list of answers
        ("ok", value) or ("error", message, traceback)."""
        self.group(n)
        return self._all([("call", module, fn, tuple(a)) for a in per_rank_args], range(n))

    def close(self):
        doomed = _descendants([p.pid for p in self.procs if p.pid])
        for c in self.conns:
            try:
                c.send(("exit",))
            except Exception:
                pass
        t = time.monotonic() + 2
        for p in self.procs:
            p.join(max(0.0, t - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join(1)
            if p.is_alive():
                p.kill()
                p.join(1)
        for pid in doomed:  # what the workers started (Megatron's Manager, writers) and outlived them
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for c in self.conns:
            try:
                c.close()
            except Exception:
                pass
        self.procs, self.conns = [], []
        self.port = None
        self.size = 0
