#!/usr/bin/env python3
"""torch_parity.py — write PyTorch reference files for ctrain's parity tests.

  torch_parity.py resnet DEPTH BATCH SIZE OUTDIR
  torch_parity.py bert SIZE BATCH SEQ OUTDIR      (SIZE: tiny, small, base, large)

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


def bert(size, batch, seq, outdir):
    """BertForMaskedLM with dropout off (ctrain and PyTorch draw different
    masks), the second half of each batch padded for its last quarter, 15%
    of the real tokens labelled. Writes weights.safetensors (the state_dict,
    tied decoder included) and ref.safetensors (input_ids, token_type_ids,
    attention_mask f32 1/0, labels [B*T], loss, grad.<name>)."""
    from transformers import BertConfig, BertForMaskedLM
    sizes = {"tiny": (2, 128, 2, 512), "small": (4, 512, 8, 2048),
             "base": (12, 768, 12, 3072), "large": (24, 1024, 16, 4096)}
    L, D, H, I = sizes[size]
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    cfg = BertConfig(hidden_size=D, num_hidden_layers=L, num_attention_heads=H,
                     intermediate_size=I, vocab_size=30522, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, attn_implementation="eager")
    model = BertForMaskedLM(cfg).cuda().train()
    weights = {k: v.detach().clone().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(weights, os.path.join(outdir, "weights.safetensors"))
    ids = torch.randint(1000, 30522, (batch, seq), device="cuda")
    tt = torch.randint(0, 2, (batch, seq), device="cuda")
    mask = torch.ones(batch, seq, device="cuda", dtype=torch.long)
    mask[batch // 2:, seq - seq // 4:] = 0
    labels = torch.full((batch, seq), -100, device="cuda", dtype=torch.long)
    pick = (torch.rand(batch, seq, device="cuda") < 0.15) & (mask == 1)
    labels[pick] = ids[pick]
    out = model(input_ids=ids, token_type_ids=tt, attention_mask=mask, labels=labels)
    out.loss.backward()
    ref = {"input_ids": ids.int().cpu(), "token_type_ids": tt.int().cpu(),
           "attention_mask": mask.float().cpu(), "labels": labels.reshape(-1).int().cpu(),
           "loss": out.loss.detach().reshape(1).cpu()}
    for n, p in model.named_parameters():
        ref["grad." + n] = p.grad.detach().contiguous().cpu()
    save_file(ref, os.path.join(outdir, "ref.safetensors"))
    print(f"bert-{size} batch {batch} seq {seq}: loss {out.loss.item():.6f} -> {outdir}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "resnet" and len(sys.argv) == 6:
        os.makedirs(sys.argv[5], exist_ok=True)
        resnet(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif sys.argv[1] == "bert" and len(sys.argv) == 6:
        os.makedirs(sys.argv[5], exist_ok=True)
        bert(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
