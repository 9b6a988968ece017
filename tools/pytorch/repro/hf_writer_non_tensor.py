"""hf_writer_non_tensor.py - PyTorch defect: HuggingFaceStorageWriter with a non-tensor entry in
the state dict (an int, as a training loop's "step" often is) writes a file that is not a valid
safetensors file: DCP's BYTE_IO items are written raw (torch.save bytes) at the start of the
stream, before the safetensors bytes, so the file no longer begins with its header length.

Saves {"w": tensor [2, 2], "step": 7} in one process, then opens the file with safetensors.
Expected: the save refuses the entry, or writes a readable file. torch 2.15.0 saves without a word
and safe_open fails (and so does `reshard ckpt import`, naming the file).
Run: python hf_writer_non_tensor.py
"""
import os
import struct
import tempfile
import warnings

import torch
import torch.distributed.checkpoint as dcp
from safetensors import safe_open
from torch.distributed.checkpoint import HuggingFaceStorageWriter

warnings.filterwarnings("ignore")
d = tempfile.mkdtemp()
print("torch", torch.__version__)
try:
    dcp.save({"w": torch.ones(2, 2), "step": 7}, storage_writer=HuggingFaceStorageWriter(d), no_dist=True)
    print("save returned normally; files:", sorted(os.listdir(d)))
except Exception as e:  # noqa: BLE001
    print("save raised", type(e).__name__, str(e)[:200])
for f in sorted(os.listdir(d)):
    if not f.endswith(".safetensors"):
        continue
    b = open(f"{d}/{f}", "rb").read()
    print(f, len(b), "bytes; first 8 bytes as the header length:", struct.unpack("<Q", b[:8])[0])
    try:
        with safe_open(f"{d}/{f}", framework="pt") as h:
            print("safe_open reads keys", list(h.keys()))
    except Exception as e:  # noqa: BLE001
        print("DEFECT: safe_open fails:", type(e).__name__, str(e)[:200])
