"""ckpt.py - reshard's checkpoint format in Python (numpy and xxhash only, no torch).

Reader: every rule the C readers apply (core/ckpt/metadata.c, safetensors.c, validate.c, io.c,
ref/ckpt/reader.c): files opened without following links and refused unless regular (never waiting
on a FIFO), a step directory that is a link refused, `latest` a step number and a newline,
metadata.json's digest line, no NUL in any string, no duplicate JSON member, exact integers only,
known format, version and dtypes, plain data file names ([A-Za-z0-9._-], not starting with '.',
never a path), block sizes and digest counts, every chunk inside its tensor and its file with the
byte count its box needs, the chunks of every tensor tiling its global shape exactly (no overlap,
no gap; flat fragments tiling their box), no two entries sharing bytes of a file, every data
file's size, every byte read checked against its block's xxh3-64, every safetensors header (at
most 100 MB, contiguous offsets ending at the file's end, distinct names) and each chunk's header
entry equal to metadata.json's (name, dtype, shape, byte range).

Writer: `CheckpointWriter` writes the same format with the same commit protocol (data files
fsynced, metadata.json.tmp renamed, the step directory fsynced, then `latest`).
Every refusal is a CheckpointError whose message names the file and, where there is one, the key.
"""
import json
import os
import re
import stat
import math

import numpy as np
import xxhash

FORMAT = "reshard-ckpt"
VERSION = 1
MAX_DIMS = 8
MAX_HEADER = 100 << 20
I64_MAX = (1 << 63) - 1
DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
              "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
DIGEST_PREFIX = b'{"digest":"xxh3:'
DIGEST_LINE = len(DIGEST_PREFIX) + 16 + 3
READ_CACHE = 256 << 20
_HEX16 = re.compile(r"[0-9a-f]{16}\Z")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")


class CheckpointError(ValueError):
    """A damaged, hostile or malformed checkpoint (the message names the file and key)."""


class FileKindError(CheckpointError):
    """A checkpoint file that is a symbolic link or not a regular file (the C CLI's exit 2)."""


# ---------------------------------------------------------------- files
def open_read(path):
    """The shared read rule (rs__ckpt_open_read): no link followed, a FIFO never waited on, only
    regular files. Returns a binary file object."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        try:
            st = os.lstat(path)
        except OSError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise FileKindError(f"{path}: a symbolic link (refused: a checkpoint file must be a regular file, "
                                "a link could lead outside the checkpoint)") from None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise FileKindError(f"{path}: {_kind(st.st_mode)} (refused: a checkpoint file must be a regular file)") from None
        raise CheckpointError(f"{path}: cannot open ({e.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise FileKindError(f"{path}: {_kind(st.st_mode)} (refused: a checkpoint file must be a regular file)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _kind(mode):
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def dir_ok(d):
    if os.path.islink(d):
        raise FileKindError(f"{d}: the step directory is a symbolic link (refused: it could lead outside the root)")


def read_latest(root):
    path = os.path.join(root, "latest")
    try:
        f = open_read(path)
    except FileKindError:
        raise
    except CheckpointError:
        raise CheckpointError(f"{root}: no latest checkpoint") from None
    with f:
        b = f.read(64)
    if not re.fullmatch(rb"[0-9]{1,19}\n", b):
        raise CheckpointError(f"{path}: malformed (expected a step number and a newline)")
    return int(b)


def step_dir(path):
    """A step directory (holding metadata.json) or a root (its `latest` is used)."""
    path = str(path)
    if os.path.lexists(os.path.join(path, "metadata.json")):
        dir_ok(path)
        return path
    d = os.path.join(path, f"step_{read_latest(path)}")
    dir_ok(d)
    if not os.path.lexists(os.path.join(d, "metadata.json")):
        raise CheckpointError(f"{d}: no metadata.json (an incomplete or missing checkpoint)")
    return d


# ---------------------------------------------------------------- strict JSON
class _Float(str):
    pass


def _pairs(what):
    def hook(pairs):
        d = {}
        for k, v in pairs:
            if k in d:
                raise CheckpointError(f"{what}: member '{k}' twice")
            d[k] = v
        return d
    return hook


def _no_const(s):
    raise CheckpointError(f"not JSON: {s}")


def strict_json(text, what):
    if isinstance(text, bytes):
        if b"\x00" in text:
            raise CheckpointError(f"{what}: a NUL byte at byte {text.index(bytes(1))}")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CheckpointError(f"{what}: not UTF-8 ({e})") from None
    try:
        v = json.loads(text, object_pairs_hook=_pairs(what), parse_float=_Float, parse_constant=_no_const)
    except CheckpointError:
        raise
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{what}: not valid JSON ({e})") from None
    _no_nul(v, what)
    return v


def _no_nul(v, what):
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            for k, y in x.items():
                if "\x00" in k:
                    raise CheckpointError(f"{what}: a string holds \\u0000 (a NUL): names never hold NUL ({k!r})")
                stack.append(y)
        elif isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, str) and "\x00" in x:
            raise CheckpointError(f"{what}: a string holds \\u0000 (a NUL): names never hold NUL ({x!r})")


def _int(v, field, lo=0, hi=I64_MAX):
    if type(v) is not int:
        raise CheckpointError(f"{field}: expected an integer")
    if v < lo or v > hi:
        raise CheckpointError(f"{field}: {v} out of range [{lo}, {hi}]")
    return v


def _ints(v, field, maxn):
    if not isinstance(v, list):
        raise CheckpointError(f"{field}: expected an array of integers")
    if len(v) > maxn:
        raise CheckpointError(f"{field}: more than {maxn} entries")
    return [_int(x, f"{field}[{i}]") for i, x in enumerate(v)]


def _member(o, parent, key, typ):
    if not isinstance(o, dict):
        raise CheckpointError(f"{parent}: expected an object")
    if key not in o:
        return None
    v = o[key]
    ok = isinstance(v, typ) and not (typ is str and isinstance(v, _Float))
    if typ is int:
        ok = type(v) is int or isinstance(v, _Float)
    if not ok:
        raise CheckpointError(f"{parent}.{key}: wrong type")
    return v


def key_ok(k):
    return isinstance(k, str) and 0 < len(k) < 1024 and all(0x20 <= ord(c) <= 0x7e and c not in '"\\' for c in k)


def file_name_ok(n):
    return isinstance(n, str) and not n.startswith(".") and _NAME.match(n) is not None


def numel(sizes):
    n = 1
    for s in sizes:
        n *= s
    return n


def region_text(off, size):
    return "[" + ", ".join(f"{o}:{o + s}" for o, s in zip(off, size)) + "]"


def chunk_name(key, off, flat_start=None):
    n = key + "@" + ".".join(str(o) for o in off)
    return n if flat_start is None else f"{n}#{flat_start}"


# ---------------------------------------------------------------- metadata
class Chunk:
    __slots__ = ("off", "size", "flat", "file", "offset", "length", "index")

    def __init__(self, off, size, flat, file, offset, length, index):
        self.off, self.size, self.flat, self.file = tuple(off), tuple(size), flat, file
        self.offset, self.length, self.index = offset, length, index


class Tensor:
    __slots__ = ("key", "dtype", "shape", "chunks")

    def __init__(self, key, dtype, shape):
        self.key, self.dtype, self.shape, self.chunks = key, dtype, tuple(shape), []


def check_tiling(key, shape, pieces, what="chunk"):
    """pieces: (off, size, flat or None, who). Raises naming the key, the pieces and the region."""
    total = numel(shape)
    if total > I64_MAX:
        raise CheckpointError(f"key '{key}': global shape element count overflows int64")
    p = []
    for off, size, flat, who in pieces:
        n = numel(size)
        if n == 0 or (flat is not None and flat[0] == flat[1]):
            continue
        p.append((tuple(off), tuple(size), flat, who))
    p.sort(key=lambda x: (tuple(v for pair in zip(x[0], x[1]) for v in pair), x[2][0] if x[2] else 0))
    boxes = []
    i = 0
    while i < len(p):
        j = i
        while j < len(p) and p[j][0] == p[i][0] and p[j][1] == p[i][1]:
            j += 1
        ne = numel(p[i][1])
        reg = region_text(p[i][0], p[i][1])
        at = 0
        for k in range(i, j):
            s, e = p[k][2] if p[k][2] else (0, ne)
            if s < at:
                raise CheckpointError(f"key '{key}': {what}s {p[k - 1][3]} and {p[k][3]} overlap in region {reg} "
                                      f"flat [{s}:{min(at, e)})")
            if s > at:
                raise CheckpointError(f"key '{key}': gap: region {reg} flat [{at}:{s}) not covered by any {what}")
            at = e
        if at != ne:
            raise CheckpointError(f"key '{key}': gap: region {reg} flat [{at}:{ne}) not covered by any {what}")
        boxes.append(p[i])
        i = j
    boxes.sort(key=lambda b: b[0])
    covered = 0
    for a, x in enumerate(boxes):
        covered += numel(x[1])
        for y in boxes[a + 1:]:
            if shape and y[0][0] >= x[0][0] + x[1][0]:
                break
            lo = [max(xo, yo) for xo, yo in zip(x[0], y[0])]
            hi = [min(xo + xs, yo + ys) for xo, xs, yo, ys in zip(x[0], x[1], y[0], y[1])]
            if all(h > l for l, h in zip(lo, hi)):
                raise CheckpointError(f"key '{key}': {what}s {x[3]} and {y[3]} overlap in region "
                                      f"{region_text(lo, [h - l for l, h in zip(lo, hi)])}")
    if covered != total:
        gap = _find_gap(shape, boxes)
        if gap:
            raise CheckpointError(f"key '{key}': gap: region {region_text(*gap)} not covered by any {what}")
        raise CheckpointError(f"key '{key}': gap: {total - covered} of {total} elements not covered by any {what}")


def _find_gap(shape, boxes):
    cuts = []
    for d in range(len(shape)):
        c = {0, shape[d]}
        for off, size, _, _ in boxes:
            c.add(off[d])
            c.add(off[d] + size[d])
        cuts.append(sorted(c))
    import itertools
    budget = 100000
    for idx in itertools.product(*[range(len(c) - 1) for c in cuts]):
        budget -= 1
        if budget < 0:
            return None
        pt = [cuts[d][i] for d, i in enumerate(idx)]
        if not any(all(o <= x < o + s for x, o, s in zip(pt, b[0], b[1])) for b in boxes):
            return pt, [cuts[d][i + 1] - cuts[d][i] for d, i in enumerate(idx)]
    return None


def parse_metadata(b, path="metadata.json"):
    """metadata.json's bytes -> dict with files, tensors (Tensor by key), objects, common, step."""
    if len(b) < DIGEST_LINE or not b.startswith(DIGEST_PREFIX):
        raise CheckpointError(f"{path}: no digest line (not a {FORMAT} metadata file)")
    hx = b[len(DIGEST_PREFIX):len(DIGEST_PREFIX) + 16].decode("latin-1")
    if not _HEX16.match(hx) or b[DIGEST_LINE - 3:DIGEST_LINE] != b'",\n':
        raise CheckpointError(f"{path}: malformed digest line")
    if xxhash.xxh3_64_intdigest(b[DIGEST_LINE:]) != int(hx, 16):
        raise CheckpointError(f"{path}: digest mismatch (the file is corrupt)")
    root = strict_json(b, path)
    if not isinstance(root, dict):
        raise CheckpointError(f"{path}: not an object")
    w = f"{path}: metadata"
    fm = _member(root, w, "format", str)
    if fm != FORMAT:
        raise CheckpointError(f"{path}: metadata.format: expected '{FORMAT}'")
    v = _member(root, w, "version", int)
    if v is None or type(v) is not int:
        raise CheckpointError(f"{path}: metadata.version: missing or not an integer")
    if v != VERSION:
        raise CheckpointError(f"{path}: metadata.version: {v}, this reader knows version {VERSION}")
    sp = _member(root, w, "step", int)
    if sp is None:
        raise CheckpointError(f"{path}: metadata.step: missing")
    step = _int(sp, f"{path}: metadata.step")
    fs = _member(root, w, "files", list)
    ts = _member(root, w, "tensors", dict)
    os_ = _member(root, w, "objects", dict)
    cm = _member(root, w, "common", dict)
    if fs is None or ts is None or os_ is None or cm is None:
        raise CheckpointError(f"{path}: metadata: needs files, tensors, objects, common")
    files = {}
    for i, f in enumerate(fs):
        fld = f"{path}: metadata files[{i}]"
        nm, sz, bl, dg = (_member(f, fld, "name", str), _member(f, fld, "size", int), _member(f, fld, "block", int),
                          _member(f, fld, "xxh3", list))
        if nm is None or sz is None or bl is None or dg is None:
            raise CheckpointError(f"{fld}: needs name, size, block, xxh3")
        if not file_name_ok(nm):
            raise CheckpointError(f"{fld}.name: '{nm}' is not a plain file name (no paths)")
        if nm in files:
            raise CheckpointError(f"{path}: metadata: file '{nm}' listed twice")
        size = _int(sz, f"{fld}.size")
        block = _int(bl, f"{fld}.block", 64, 1 << 30)
        if block & (block - 1):
            raise CheckpointError(f"{fld}.block: {block} is not a power of two")
        nb = -(-size // block)
        if len(dg) != nb:
            raise CheckpointError(f"{fld}: {len(dg)} digests for {nb} blocks")
        digests = []
        for k, d in enumerate(dg):
            if not isinstance(d, str) or isinstance(d, _Float) or not _HEX16.match(d):
                raise CheckpointError(f"{fld}.xxh3[{k}]: expected 16 lowercase hex digits")
            digests.append(int(d, 16))
        files[nm] = {"name": nm, "size": size, "block": block, "xxh3": digests}

    def ref(o, what):
        fi, of, ln = _member(o, what, "file", str), _member(o, what, "offset", int), _member(o, what, "length", int)
        if fi is None or of is None or ln is None:
            raise CheckpointError(f"{what}: needs file, offset, length")
        if fi not in files:
            raise CheckpointError(f"{what}: file '{fi}' is not listed in files")
        off, length = _int(of, f"{what}.offset"), _int(ln, f"{what}.length")
        if off + length > files[fi]["size"] or off + length > I64_MAX:
            raise CheckpointError(f"{what}: bytes [{off}, +{length}) past the end of '{fi}' ({files[fi]['size']} bytes)")
        return fi, off, length

    tensors = {}
    for key, t in ts.items():
        if not key_ok(key):
            raise CheckpointError(f"{path}: metadata: a tensor key is empty or not printable")
        what = f"{path}: metadata tensors['{key}']"
        dt, sh, cs = _member(t, what, "dtype", str), _member(t, what, "shape", list), _member(t, what, "chunks", list)
        if dt is None or sh is None or cs is None:
            raise CheckpointError(f"{what}: needs dtype, shape, chunks")
        if dt not in DTYPE_SIZE:
            raise CheckpointError(f"{what}.dtype: unknown dtype")
        shape = _ints(sh, what, MAX_DIMS)
        if numel(shape) * DTYPE_SIZE[dt] > I64_MAX:
            raise CheckpointError(f"{what}.shape: byte count overflows int64")
        T = Tensor(key, dt, shape)
        for k, co in enumerate(cs):
            cw = f"{what}.chunks[{k}]"
            of, sz, fl = _member(co, cw, "offsets", list), _member(co, cw, "sizes", list), _member(co, cw, "flat", list)
            if of is None or sz is None:
                raise CheckpointError(f"{cw}: needs offsets and sizes")
            off, size = _ints(of, cw, MAX_DIMS), _ints(sz, cw, MAX_DIMS)
            if len(off) != len(shape) or len(size) != len(shape):
                raise CheckpointError(f"{cw}: offsets/sizes of {len(off)}/{len(size)} dims for a {len(shape)}-d tensor")
            for d in range(len(shape)):
                if off[d] + size[d] > shape[d]:
                    raise CheckpointError(f"{cw}: chunk outside the global shape on dim {d}")
            n = numel(size)
            if n > I64_MAX:
                raise CheckpointError(f"{cw}: chunk element count overflows int64")
            flat = None
            if fl is not None:
                fr = _ints(fl, cw, 2)
                if len(fr) != 2 or fr[1] < fr[0] or fr[1] > n:
                    raise CheckpointError(f"{cw}: flat range must be [start, stop] inside the chunk")
                flat = (fr[0], fr[1])
                n = fr[1] - fr[0]
            if n * DTYPE_SIZE[dt] > I64_MAX:
                raise CheckpointError(f"{cw}: chunk byte count overflows int64")
            fi, boff, length = ref(co, cw)
            if length != n * DTYPE_SIZE[dt]:
                raise CheckpointError(f"{cw}: length {length}, the chunk needs {n * DTYPE_SIZE[dt]} bytes")
            T.chunks.append(Chunk(off, size, flat, fi, boff, length, k))
        try:
            check_tiling(key, shape, [(c.off, c.size, c.flat, c.index) for c in T.chunks])
        except CheckpointError as e:
            raise CheckpointError(f"{path}: metadata: {e}") from None
        tensors[key] = T
    objects = {}
    for uk, o in os_.items():
        if not key_ok(uk):
            raise CheckpointError(f"{path}: metadata: an object key is empty or not printable")
        objects[uk] = ref(o, f"{path}: metadata objects['{uk}']")
    common = {}
    for k, v in cm.items():
        if not isinstance(v, str) or isinstance(v, _Float):
            raise CheckpointError(f"{path}: metadata common['{k}']: expected a string")
        common[k] = v
    # chunk byte ranges in one file never overlap (a hostile file could alias two chunks)
    ranges = {}
    for T in tensors.values():
        for c in T.chunks:
            ranges.setdefault(c.file, []).append((c.offset, c.length))
    for fi, off, length in objects.values():
        ranges.setdefault(fi, []).append((off, length))
    for fi, r in ranges.items():
        end = 0
        for off, length in sorted(r):
            if length == 0:
                continue
            if off < end:
                raise CheckpointError(f"{path}: metadata: two entries share bytes of '{fi}' at offset {off}")
            end = off + length
    return {"step": step, "files": files, "tensors": tensors, "objects": objects, "common": common}


# ---------------------------------------------------------------- reading
def parse_st_header(text, file_size, fname):
    if len(text) > MAX_HEADER:
        raise CheckpointError(f"file {fname}: safetensors: header of {len(text)} bytes (over 100 MB)")
    h = strict_json(text, f"file {fname}: safetensors header")
    if not isinstance(h, dict):
        raise CheckpointError(f"file {fname}: safetensors: the header is not a JSON object")
    entries = {}
    for name, e in h.items():
        if name == "__metadata__":
            if not isinstance(e, dict) or any(not isinstance(v, str) or isinstance(v, _Float) for v in e.values()):
                raise CheckpointError(f"file {fname}: safetensors: __metadata__ values must be strings")
            continue
        w = f"file {fname}: safetensors: tensor '{name}'"
        if not isinstance(e, dict):
            raise CheckpointError(f"{w} is not an object")
        dt, sh, of = _member(e, w, "dtype", str), _member(e, w, "shape", list), _member(e, w, "data_offsets", list)
        if dt is None or sh is None or of is None:
            raise CheckpointError(f"{w} lacks dtype, shape or data_offsets")
        if dt not in DTYPE_SIZE:
            raise CheckpointError(f"{w}: unknown dtype")
        shape = _ints(sh, w + " shape", MAX_DIMS)
        off = _ints(of, w + " data_offsets", 2)
        if len(off) != 2:
            raise CheckpointError(f"{w}: data_offsets must be 2 integers")
        nb = numel(shape) * DTYPE_SIZE[dt]
        if nb > I64_MAX:
            raise CheckpointError(f"{w}: byte count overflows int64")
        if off[1] < off[0] or off[1] - off[0] != nb:
            raise CheckpointError(f"{w}: data_offsets [{off[0]}, {off[1]}) hold {off[1] - off[0]} bytes, shape needs {nb}")
        entries[name] = (dt, tuple(shape), off[0], off[1])
    at = 0
    for name, (_, _, b, e) in sorted(entries.items(), key=lambda x: (x[1][2], x[1][3])):
        if b != at:
            raise CheckpointError(f"file {fname}: safetensors: tensor '{name}': data_offsets start at {b}, "
                                  f"expected {at} (not contiguous)")
        at = e
    if at != file_size - 8 - len(text):
        raise CheckpointError(f"file {fname}: safetensors: data section of {file_size - 8 - len(text)} bytes, "
                              f"tensors cover {at}")
    return entries


class Reader:
    """A checked reader of one step directory (a root with `latest`, or a step directory)."""

    def __init__(self, path):
        self.dir = step_dir(path)
        mpath = os.path.join(self.dir, "metadata.json")
        try:
            f = open_read(mpath)
        except FileKindError:
            raise
        except CheckpointError:
            raise CheckpointError(f"{self.dir}: no metadata.json (an incomplete or missing checkpoint)") from None
        with f:
            b = f.read()
        md = parse_metadata(b, mpath)
        self.step, self.files, self.tensors = md["step"], md["files"], md["tensors"]
        self.objects, self.common = md["objects"], md["common"]
        self._fh, self._hdr, self._cache, self._cache_bytes = {}, {}, {}, 0
        self.bytes_read = 0

    def close(self):
        for f in self._fh.values():
            f.close()
        self._fh, self._cache, self._cache_bytes = {}, {}, 0

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def _open(self, name, key):
        if name in self._fh:
            return self._fh[name]
        f = open_read(os.path.join(self.dir, name))
        size = os.fstat(f.fileno()).st_size
        if size != self.files[name]["size"]:
            f.close()
            raise CheckpointError(f"file {name} (key '{key}'): size {size}, metadata says {self.files[name]['size']} "
                                  "(truncated or replaced)")
        self._fh[name] = f
        return f

    def read(self, name, off, length, key):
        """bytes [off, off+length) of data file `name`, every block checked against its digest."""
        if length == 0:
            return b""
        fm = self.files[name]
        fh = self._open(name, key)
        bs = fm["block"]
        out = bytearray(length)
        for b in range(off // bs, (off + length - 1) // bs + 1):
            blk = self._cache.get((name, b))
            if blk is None:
                bo = b * bs
                bl = min(bs, fm["size"] - bo)
                blk = os.pread(fh.fileno(), bl, bo)
                self.bytes_read += len(blk)
                if len(blk) != bl:
                    raise CheckpointError(f"file {name} (key '{key}'): short read of block {b}")
                if xxhash.xxh3_64_intdigest(blk) != fm["xxh3"][b]:
                    raise CheckpointError(f"file {name} block {b} (key '{key}'): xxh3 digest mismatch (corrupt data)")
                if self._cache_bytes + bl > READ_CACHE:
                    self._cache, self._cache_bytes = {}, 0
                self._cache[(name, b)] = blk
                self._cache_bytes += bl
            bo = b * bs
            lo, hi = max(off, bo), min(off + length, bo + len(blk))
            out[lo - off:hi - off] = blk[lo - bo:hi - bo]
        return bytes(out)

    def header(self, name):
        if name in self._hdr:
            return self._hdr[name]
        fm = self.files[name]
        if fm["size"] < 8:
            raise CheckpointError(f"file {name}: {fm['size']} bytes, too short for a safetensors header")
        hl = int.from_bytes(self.read(name, 0, 8, "(safetensors header)"), "little")
        if hl > MAX_HEADER or hl > fm["size"] - 8:
            raise CheckpointError(f"file {name}: safetensors header of {hl} bytes (over 100 MB or past the end)")
        text = self.read(name, 8, hl, "(safetensors header)")
        entries = parse_st_header(text, fm["size"], name)
        used = sum(c.file == name for T in self.tensors.values() for c in T.chunks) + \
            sum(o[0] == name for o in self.objects.values())
        if used != len(entries):
            raise CheckpointError(f"file {name}: {len(entries)} tensors in its safetensors header, metadata.json lists {used}")
        self._hdr[name] = (8 + hl, entries)
        # every entry metadata.json puts in this file agrees with the header, whichever is requested
        for key, T in self.tensors.items():
            for c in T.chunks:
                if c.file == name:
                    self._check_entry(name, chunk_name(key, c.off, c.flat[0] if c.flat else None), T.dtype,
                                      (c.flat[1] - c.flat[0],) if c.flat else c.size, c.offset, c.length)
        for uk, (fi, off, length) in self.objects.items():
            if fi == name:
                self._check_entry(fi, uk, "U8", (length,), off, length)
        return self._hdr[name]

    def _check_entry(self, fname, ename, dtype, shape, off, length):
        base, entries = self._hdr[fname] if fname in self._hdr else self.header(fname)
        e = entries.get(ename)
        if e is None:
            raise CheckpointError(f"file {fname}: no tensor '{ename}' in its safetensors header")
        if e[0] != dtype or e[1] != tuple(shape) or base + e[2] != off or e[3] - e[2] != length:
            raise CheckpointError(f"file {fname}: tensor '{ename}' in the safetensors header disagrees with metadata.json")

    def read_chunk(self, key, c):
        """One chunk's bytes (a flat fragment: its 1-d run), checked against header and digests."""
        T = self.tensors[key]
        name = chunk_name(key, c.off, c.flat[0] if c.flat else None)
        self._check_entry(c.file, name, T.dtype, (c.flat[1] - c.flat[0],) if c.flat else c.size, c.offset, c.length)
        return self.read(c.file, c.offset, c.length, key)

    def read_box(self, key, box):
        """The bytes of one stored box (off, size) of `key`, its flat fragments reassembled."""
        T = self.tensors[key]
        es = DTYPE_SIZE[T.dtype]
        off, size = box
        buf = bytearray(numel(size) * es)
        for c in T.chunks:
            if c.off == tuple(off) and c.size == tuple(size):
                s = c.flat[0] if c.flat else 0
                buf[s * es:s * es + c.length] = self.read_chunk(key, c)
        return bytes(buf)

    def boxes(self, key):
        seen = []
        for c in self.tensors[key].chunks:
            if (c.off, c.size) not in seen:
                seen.append((c.off, c.size))
        return seen

    def read_tensor(self, key):
        """The whole tensor as a C-order byte string (raw bits: NaN payloads kept)."""
        T = self.tensors[key]
        es = DTYPE_SIZE[T.dtype]
        full = np.zeros(numel(T.shape) * es, dtype=np.uint8)
        g = full.reshape(tuple(T.shape) + (es,))
        for off, size in self.boxes(key):
            b = np.frombuffer(self.read_box(key, (off, size)), dtype=np.uint8).reshape(tuple(size) + (es,))
            g[tuple(slice(o, o + s) for o, s in zip(off, size))] = b
        return full.tobytes()

    def read_object(self, ukey):
        fi, off, length = self.objects[ukey]
        self._check_entry(fi, ukey, "U8", (length,), off, length)
        return self.read(fi, off, length, ukey)

    def verify(self):
        """Reads every byte of every file, every header and every entry (as `reshard ckpt verify`)."""
        for name, fm in self.files.items():
            for o in range(0, fm["size"], fm["block"]):
                self.read(name, o, min(fm["block"], fm["size"] - o), "(whole file)")
            self.header(name)
        for key, T in self.tensors.items():
            for c in T.chunks:
                self.read_chunk(key, c)
        for uk in self.objects:
            self.read_object(uk)


# ---------------------------------------------------------------- writing
def _fsync_dir(d):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durable(path, parts):
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        for p in parts:
            mv = memoryview(p).cast("B")
            while len(mv):
                n = os.write(fd, mv)
                mv = mv[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def write_data_file(stepdir, name, entries, block=1 << 20):
    """entries: [(entry name, dtype, shape, bytes-like)] -> the file's metadata (name, size, block,
    xxh3) and each entry's (absolute byte offset, length). Written, fsynced and renamed into place."""
    if not file_name_ok(name):
        raise CheckpointError(f"'{name}' is not a plain file name")
    hdr, at = {"__metadata__": {"format": "pt"}}, 0
    for en, dt, shape, data in entries:
        n = memoryview(data).nbytes
        if n != numel(shape) * DTYPE_SIZE[dt]:
            raise CheckpointError(f"entry '{en}': {n} bytes for shape {list(shape)} of {dt}")
        hdr[en] = {"dtype": dt, "shape": list(shape), "data_offsets": [at, at + n]}
        at += n
    text = json.dumps(hdr, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    head = len(text).to_bytes(8, "little") + text
    size = len(head) + at
    parts = [head] + [data for _, _, _, data in entries]
    # digests per block over the concatenation, without building the whole file in memory
    digests, cur, h = [], 0, xxhash.xxh3_64()
    for p in parts:
        mv = memoryview(p).cast("B")
        while len(mv):
            take = min(block - cur, len(mv))
            h.update(mv[:take])
            cur += take
            mv = mv[take:]
            if cur == block:
                digests.append(h.intdigest())
                h, cur = xxhash.xxh3_64(), 0
    if cur:
        digests.append(h.intdigest())
    _write_durable(os.path.join(stepdir, name), parts)
    locs, o = {}, len(head)
    for en, _, _, data in entries:
        n = memoryview(data).nbytes
        locs[en] = (o, n)
        o += n
    return {"name": name, "size": size, "block": block, "xxh3": [f"{d:016x}" for d in digests]}, locs


def step_path(root, step):
    return os.path.join(str(root), f"step_{int(step)}")


def begin_step(root, step):
    """Creates ROOT/step_N (refusing one that already holds a checkpoint) and returns its path."""
    d = step_path(root, step)
    if os.path.lexists(os.path.join(d, "metadata.json")):
        raise CheckpointError(f"{d} already holds a checkpoint: saving over it could tear it (remove it or save another step)")
    os.makedirs(d, exist_ok=True)
    dir_ok(d)
    return d


def commit(root, step, files, tensors, objects=None, common=None):
    """Writes metadata.json (digest line first) and then `latest`, each fsynced and renamed.
    files: [file metadata]; tensors: {key: {"dtype", "shape", "chunks": [{"offsets", "sizes",
    ["flat"], "file", "offset", "length"}]}}. The chunk lists are checked (tiling) first."""
    d = step_path(root, step)
    for key, t in tensors.items():
        if not key_ok(key):
            raise CheckpointError(f"key {key!r}: not 1..1023 printable ASCII characters other than '\"' and '\\'")
        check_tiling(key, t["shape"], [(c["offsets"], c["sizes"], tuple(c["flat"]) if "flat" in c else None, i)
                                       for i, c in enumerate(t["chunks"])])
    body = {"format": FORMAT, "version": VERSION, "step": int(step), "files": files, "tensors": tensors,
            "objects": objects or {}, "common": common or {}}
    text = json.dumps(body, indent=1).encode()
    rest = text[1:]
    line = DIGEST_PREFIX + f"{xxhash.xxh3_64_intdigest(rest):016x}".encode() + b'",\n'
    _fsync_dir(d)
    _write_durable(os.path.join(d, "metadata.json"), [line + rest])
    _fsync_dir(d)
    _write_durable(os.path.join(str(root), "latest"), [f"{int(step)}\n".encode()])
    _fsync_dir(str(root))
    # the committed checkpoint must read back under every rule
    parse_metadata(line + rest, os.path.join(d, "metadata.json"))
