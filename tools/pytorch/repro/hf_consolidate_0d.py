"""hf_consolidate_0d.py - PyTorch defect: HuggingFaceStorageWriter's consolidation
(enable_consolidation=True, torch/distributed/checkpoint/_consolidate_hf_safetensors.py) writes a
0-d tensor's value as 0.

Saves {"scalar": tensor(3.5), "v": [1., 2.]} with save_distributed=True and consolidation, in one
process, then reads the consolidated model-00001-of-00001.safetensors with safetensors and prints
what it holds. Expected: scalar = 3.5. torch 2.15.0 prints scalar = 0.0 (v is right).
Run: python hf_consolidate_0d.py
"""
import tempfile
import warnings

import torch
import torch.distributed.checkpoint as dcp
from safetensors.torch import load_file
from torch.distributed.checkpoint import HuggingFaceStorageWriter

warnings.filterwarnings("ignore")
d = tempfile.mkdtemp()
sd = {"scalar": torch.tensor(3.5), "v": torch.tensor([1.0, 2.0])}
dcp.save(sd, storage_writer=HuggingFaceStorageWriter(d, save_distributed=True, enable_consolidation=True), no_dist=True)
got = load_file(f"{d}/model-00001-of-00001.safetensors")
print("torch", torch.__version__)
print("saved: scalar =", sd["scalar"].item(), " v =", sd["v"].tolist())
print("consolidated: scalar =", got["scalar"].item(), "shape", list(got["scalar"].shape), " v =", got["v"].tolist())
print("DEFECT: the 0-d value is lost" if got["scalar"].item() != 3.5 else "ok: the 0-d value survives")
