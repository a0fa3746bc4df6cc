#!/usr/bin/env python3
"""torch_parity.py — write PyTorch reference files for ctrain's parity tests.

  torch_parity.py resnet DEPTH BATCH SIZE OUTDIR

writes OUTDIR/weights.safetensors (the torchvision model's state_dict before
the step: ctrain must load it as is) and OUTDIR/ref.safetensors with
  input   f32 [B, S, S, 3] (NHWC, what ctrain consumes; same values as the
          NCHW tensor PyTorch used), target i32 [B], loss f32 [1],
  grad.<name>  every parameter gradient (PyTorch layouts),
  after.<name> every buffer after the step (BN running stats),
computed in strict f32 (TF32 off) with the model in train mode, and
  grad64.<name>  the same gradients computed in float64 on the CPU: the
          exact answer to compare both f32 implementations against (deep
          networks with batch norm amplify f32 rounding, so PyTorch's own f32
          gradients differ from float64 by a measurable amount).
"""
import os
import sys

import torch
import torch.nn.functional as F
import torchvision
from safetensors.torch import save_file


def resnet(depth, batch, size, outdir):
    torch.manual_seed(0)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    model = getattr(torchvision.models, f"resnet{depth}")(num_classes=1000).cuda().train()
    weights = {k: v.detach().clone().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(weights, os.path.join(outdir, "weights.safetensors"))
    x = torch.randn(batch, 3, size, size, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    ref = {
        "input": x.permute(0, 2, 3, 1).contiguous().cpu(),
        "target": y.int().cpu(),
        "loss": loss.detach().reshape(1).cpu(),
    }
    for n, p in model.named_parameters():
        ref["grad." + n] = p.grad.detach().contiguous().cpu()
    for n, b in model.named_buffers():
        ref["after." + n] = b.detach().contiguous().cpu()
    # the float64 answer, from the same weights and input
    m64 = getattr(torchvision.models, f"resnet{depth}")(num_classes=1000).double().train()
    m64.load_state_dict({k: v.double() if v.is_floating_point() else v for k, v in weights.items()})
    loss64 = F.cross_entropy(m64(x.double().cpu()), y.cpu())
    loss64.backward()
    worst = 0.0
    for (n, p), (_, p64) in zip(model.named_parameters(), m64.named_parameters()):
        ref["grad64." + n] = p64.grad.float().contiguous()
        d = (p.grad.double().cpu() - p64.grad).abs().max() / p64.grad.abs().max()
        worst = max(worst, float(d))
    ref["loss64"] = loss64.detach().float().reshape(1)
    print(f"pytorch f32 vs float64: loss {loss.item():.7f} vs {loss64.item():.7f}, "
          f"worst gradient relative error {worst:.3g}")
    save_file(ref, os.path.join(outdir, "ref.safetensors"))
    print(f"resnet{depth} batch {batch} size {size}: loss {loss.item():.6f}, "
          f"{len(weights)} state tensors -> {outdir}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "resnet" and len(sys.argv) == 6:
        os.makedirs(sys.argv[5], exist_ok=True)
        resnet(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
