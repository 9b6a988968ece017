#!/usr/bin/env python3
"""gloo_copy_service_cpu.py - Megatron-Core's GlooCopyService cannot be made on a machine without a
CUDA driver, although it is the CPU/gloo copy service.

megatron/core/resharding/copy_services/gloo_copy_service.py, GlooCopyService.__init__:
    self._copy_stream = torch.cuda.Stream()
raises on a CPU-only machine (a CUDA build of torch without a driver: AcceleratorError / RuntimeError
"CUDA driver version is insufficient" or "Found no NVIDIA driver"; a CPU build of torch: "Tried to
instantiate dummy base class Stream"), and run() ends with torch.cuda.current_stream().wait_stream
(...) whenever the stream exists. Every transfer of the service is a CPU tensor over gloo; the
stream is never used for a copy.

Run:  python gloo_copy_service_cpu.py      (one process, world of 1 over gloo; needs megatron-core and torch)
Exit 1 and "DEFECT" when the constructor raises; 0 when it works (a fixed release, or a GPU machine).
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from megatron.core import package_info
from megatron.core.resharding.copy_services.gloo_copy_service import GlooCopyService

store = os.path.join(tempfile.mkdtemp(), "store")
dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
print("megatron-core", package_info.__version__, "torch", torch.__version__,
      "cuda available:", torch.cuda.is_available())
try:
    GlooCopyService()
except Exception as e:  # noqa: BLE001
    print("DEFECT: GlooCopyService() raised %s: %s" % (type(e).__name__, str(e).splitlines()[0]))
    dist.destroy_process_group()
    sys.exit(1)
print("GlooCopyService() made: not reproduced")
dist.destroy_process_group()
