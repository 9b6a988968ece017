"""hf_consolidate_int.py - PyTorch defect: HuggingFaceStorageWriter's consolidation
(enable_consolidation=True) fails on an integer tensor: _parse_input_metadata computes the element
size with torch.finfo(dtype).bits, and torch.finfo refuses integer dtypes (TypeError).

Saves {"step": int64 tensor [3]} with save_distributed=True and consolidation, in one process.
Expected: a consolidated model-00001-of-00001.safetensors. torch 2.15.0 raises TypeError.
Run: python hf_consolidate_int.py
"""
import tempfile
import warnings

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import HuggingFaceStorageWriter

warnings.filterwarnings("ignore")
d = tempfile.mkdtemp()
print("torch", torch.__version__)
try:
    dcp.save({"step": torch.tensor([1, 2, 3], dtype=torch.int64)},
             storage_writer=HuggingFaceStorageWriter(d, save_distributed=True, enable_consolidation=True), no_dist=True)
    print("ok: an integer tensor consolidates")
except BaseException as e:  # noqa: BLE001 (DCP's CheckpointException is a BaseException)
    print("DEFECT: the save raised", type(e).__name__)
    print([ln for ln in str(e).splitlines() if "Error" in ln][-1].strip())
