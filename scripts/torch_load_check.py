#!/usr/bin/env python3
"""torch_load_check.py — prove a ctrain checkpoint loads in PyTorch:

  torch_load_check.py resnet50 FILE

loads FILE with safetensors.torch.load_file and hands it to
torchvision.models.resnet50().load_state_dict (strict: every name, shape
and dtype must match), then prints what it loaded. Where the safetensors
package is absent (Debian's python3-torch has none), the file is read by
the format's definition instead: an 8-byte little-endian header length, a
JSON header of {name: {dtype, shape, data_offsets}}, then the raw bytes.
"""
import json
import struct
import sys

import torch
import torchvision

try:
    from safetensors.torch import load_file
    READER = "safetensors"
except ImportError:
    READER = "the format's definition (no safetensors package)"
    _DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
               "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}

    def load_file(path):
        with open(path, "rb") as f:
            blob = f.read()
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
        base, out = 8 + n, {}
        for name, t in header.items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            raw = bytearray(blob[base + a:base + b])
            flat = torch.frombuffer(raw, dtype=_DTYPES[t["dtype"]]) if raw else \
                torch.empty(0, dtype=_DTYPES[t["dtype"]])
            out[name] = flat.reshape(t["shape"]).clone()
        return out

if len(sys.argv) != 3:
    sys.exit(__doc__)
sd = load_file(sys.argv[2])
model = getattr(torchvision.models, sys.argv[1])(num_classes=sd["fc.bias"].shape[0])
model.load_state_dict(sd, strict=True)
nbt = int(sd["bn1.num_batches_tracked"])
print(f"torchvision {torchvision.__version__} {sys.argv[1]}.load_state_dict(strict=True) accepted "
      f"{len(sd)} tensors from {sys.argv[2]} (bn1.num_batches_tracked = {nbt}; read with {READER})")
