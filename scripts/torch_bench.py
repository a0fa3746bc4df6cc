#!/usr/bin/env python3
"""torch_bench.py — PyTorch's side of ctrain's benchmark: training throughput
of the same configs, written in the same JSON-lines schema as `ctrain bench`.

  torch_bench.py --models resnet50,bert-large --precision fp32,tf32,fp16,bf16 \
                 --batch 256 --seq 128 --steps 25 --warmup 10 [--compile] [--json FILE]
                 [--mlm-head masked|all]

ResNet: torchvision model, channels_last (NHWC) unless --nchw, SGD momentum
0.9, synthetic data generated once on the GPU. BERT: transformers
BertForMaskedLM (SDPA attention), fused AdamW, 15% of tokens labelled,
synthetic ids. --mlm-head masked (default) runs the prediction head on the
labelled rows only (gathered, as Google's and NVIDIA's BERT and ctrain do:
the same loss and gradients); --mlm-head all is transformers' stock forward,
the head on every token. fp16 uses autocast + GradScaler, bf16 autocast, tf32 sets the
TF32 switches, fp32 clears them. Each step is timed with CUDA events; the
figure is the median over the timed steps (min and max kept too).
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

BERT_SIZES = {  # layers, hidden, heads, intermediate
    "bert-tiny": (2, 128, 2, 512), "bert-mini": (4, 256, 4, 1024),
    "bert-small": (4, 512, 8, 2048), "bert-medium": (8, 512, 8, 2048),
    "bert-base": (12, 768, 12, 3072), "bert-large": (24, 1024, 16, 4096),
}


def set_precision(p):
    tf32 = p == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(p)


def make_resnet(name, batch, size, nchw):
    import torchvision
    model = getattr(torchvision.models, name)(num_classes=1000).cuda().train()
    fmt = torch.contiguous_format if nchw else torch.channels_last
    model = model.to(memory_format=fmt)
    x = torch.randn(batch, 3, size, size, device="cuda").to(memory_format=fmt)
    y = torch.randint(0, 1000, (batch,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    return model, opt, lambda m: F.cross_entropy(m(x), y)


class MaskedRowsMLM(torch.nn.Module):
    """BertForMaskedLM with its prediction head on the labelled rows only."""

    def __init__(self, mlm, labels):
        super().__init__()
        self.mlm = mlm
        flat = labels.reshape(-1)
        self.register_buffer("rows", (flat != -100).nonzero().squeeze(1))
        self.register_buffer("targets", flat[self.rows])

    def forward(self, input_ids, attention_mask):
        h = self.mlm.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        h = h.reshape(-1, h.shape[-1]).index_select(0, self.rows)
        return F.cross_entropy(self.mlm.cls(h), self.targets)


def make_bert(name, batch, seq, head):
    from transformers import BertConfig, BertForMaskedLM
    L, D, H, I = BERT_SIZES[name]
    cfg = BertConfig(hidden_size=D, num_hidden_layers=L, num_attention_heads=H,
                     intermediate_size=I, vocab_size=30522, max_position_embeddings=512,
                     attn_implementation="sdpa")
    model = BertForMaskedLM(cfg).cuda().train()
    ids = torch.randint(1000, 30522, (batch, seq), device="cuda")
    labels = torch.full((batch, seq), -100, device="cuda", dtype=torch.long)
    pick = torch.rand(batch, seq, device="cuda") < 0.15
    labels[pick] = ids[pick]
    mask = torch.ones(batch, seq, device="cuda", dtype=torch.long)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    if head == "masked":
        return MaskedRowsMLM(model, labels), opt, lambda m: m(ids, mask)
    return model, opt, lambda m: m(input_ids=ids, attention_mask=mask, labels=labels).loss


def run(model_name, precision, batch, seq, size, steps, warmup, compile_, nchw, head):
    dtype = set_precision(precision)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    if model_name.startswith("resnet"):
        model, opt, loss_fn = make_resnet(model_name, batch, size, nchw)
    else:
        model, opt, loss_fn = make_bert(model_name, batch, seq, head)
    fwd = torch.compile(model) if compile_ else model
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")

    def step():
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(fwd)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        loss = step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1000.0)
    med = statistics.median(times)
    return {
        "engine": "pytorch", "mode": "compile" if compile_ else "eager",
        "torch": torch.__version__, "device": torch.cuda.get_device_name(),
        "model": model_name, "precision": precision, "batch": batch,
        "seq": seq if model_name.startswith("bert") else None,
        "mlm_head": head if model_name.startswith("bert") else None,
        "image_size": size if model_name.startswith("resnet") else None,
        "layout": ("nchw" if nchw else "nhwc") if model_name.startswith("resnet") else None,
        "steps": steps, "warmup": warmup,
        "samples_per_s": batch / med, "samples_per_s_min": batch / max(times),
        "samples_per_s_max": batch / min(times), "ms_per_step": med * 1000.0,
        "peak_mem_bytes": torch.cuda.max_memory_allocated(),
        "final_loss": float(loss.item()),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--batch", default="256")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--nchw", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--mlm-head", choices=["masked", "all"], default="masked",
                    help="BERT: prediction head on the labelled rows (as ctrain) or on all")
    a = ap.parse_args()
    out = open(a.json, "a") if a.json else None
    for m in a.models.split(","):
        for p in a.precision.split(","):
            for b in a.batch.split(","):
                try:
                    r = run(m, p, int(b), a.seq, a.size, a.steps, a.warmup, a.compile, a.nchw,
                            a.mlm_head)
                except torch.cuda.OutOfMemoryError:
                    r = {"engine": "pytorch", "model": m, "precision": p, "batch": int(b),
                         "error": "out of memory"}
                line = json.dumps(r)
                print(line, flush=True)
                if out:
                    out.write(line + "\n")
                    out.flush()
    if out:
        out.close()


if __name__ == "__main__":
    main()
