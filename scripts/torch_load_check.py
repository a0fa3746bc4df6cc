#!/usr/bin/env python3
"""torch_load_check.py — prove a ctrain checkpoint loads in PyTorch:

  torch_load_check.py resnet50 FILE

loads FILE with safetensors.torch.load_file and hands it to
torchvision.models.resnet50().load_state_dict (strict: every name, shape
and dtype must match), then prints what it loaded.
"""
import sys

import torchvision
from safetensors.torch import load_file

if len(sys.argv) != 3:
    sys.exit(__doc__)
sd = load_file(sys.argv[2])
model = getattr(torchvision.models, sys.argv[1])(num_classes=sd["fc.bias"].shape[0])
model.load_state_dict(sd, strict=True)
nbt = int(sd["bn1.num_batches_tracked"])
print(f"torchvision {sys.argv[1]}.load_state_dict(strict=True) accepted {len(sd)} tensors "
      f"from {sys.argv[2]} (bn1.num_batches_tracked = {nbt})")
