"""python -m reshard_dcp {import-dcp,verify} ... (exit 0 ok, 1 a damaged or refused input, 2 usage or a
checkpoint file that is a link or not a regular file)."""
import argparse
import sys

from . import ckpt


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m reshard_dcp", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    im = sub.add_parser("import-dcp", help="PyTorch DCP default format (.metadata + .distcp) -> reshard checkpoint")
    im.add_argument("src")
    im.add_argument("--root", required=True)
    im.add_argument("--step", required=True, type=int)
    im.add_argument("--block", type=int, default=1 << 20, help="digest block (power of two, 64 B .. 1 GiB)")
    im.add_argument("--skip-non-tensors", action="store_true",
                    help="import the tensors and leave out non-tensor entries (listed on stdout)")
    ve = sub.add_parser("verify", help="read every byte of a reshard checkpoint (root or step directory) through the checks")
    ve.add_argument("dir")
    a = ap.parse_args(argv)
    if a.cmd == "import-dcp" and (a.step < 0 or a.block < 64 or a.block > 1 << 30 or a.block & (a.block - 1)):
        ap.error("--step must be >= 0 and --block a power of two from 64 to 2^30")
    try:
        if a.cmd == "import-dcp":
            from .dcp_import import import_dcp
            import_dcp(a.src, a.root, a.step, a.block, a.skip_non_tensors)
        else:
            with ckpt.Reader(a.dir) as r:
                r.verify()
                n = sum(len(t.chunks) for t in r.tensors.values())
                print(f"ok: {r.dir} step {r.step}: {len(r.tensors)} tensors, {n} chunks, {len(r.objects)} objects, "
                      f"{len(r.files)} files, every digest matches")
    except ckpt.FileKindError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ckpt.CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
