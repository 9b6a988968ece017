"""reshard_dcp - reshard checkpoints and PyTorch DCP (torch.distributed.checkpoint), both ways.

- `reshard_dcp.ckpt` (numpy and xxhash only): a checked reader and a writer of reshard's
  checkpoint format, with every rule of the C readers.
- `ReshardStorageReader` / `ReshardStorageWriter` (need torch): DCP storage layers over it.
- `python -m reshard_dcp import-dcp SRC --root OUT --step N` (needs torch): PyTorch DCP's default
  format (FileSystemWriter: .metadata + .distcp files) into a reshard checkpoint.
- `python -m reshard_dcp verify DIR`: reads every byte of a reshard checkpoint through the checks.
"""
from .ckpt import CheckpointError, FileKindError, Reader  # noqa: F401

__version__ = "0.1.0"
__all__ = ["CheckpointError", "FileKindError", "Reader", "ReshardStorageReader", "ReshardStorageWriter", "import_dcp"]


def __getattr__(name):  # torch is imported only when a torch-side name is used
    if name in ("ReshardStorageReader", "ReshardStorageWriter", "DTYPES"):
        from . import storage
        return getattr(storage, name)
    if name == "import_dcp":
        from .dcp_import import import_dcp
        return import_dcp
    raise AttributeError(name)
