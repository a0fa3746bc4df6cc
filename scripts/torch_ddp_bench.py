#!/usr/bin/env python3
"""torch_ddp_bench.py — PyTorch DistributedDataParallel's side of
`ctrain bench --gpus N`: the same models, batches and precision, on 1 GPU
and then data parallel on N GPUs of this machine, and the scaling
efficiency (per-GPU samples/s on N GPUs over 1 GPU's), measured in the same
call, so that ctrain's scaling has a reference on the same card and link.

  torch_ddp_bench.py [--gpus N] [--models L] [--precision P] [--seq T]
                     [--batch-resnet B] [--batch-bert B] [--bucket-mb MB]
                     [--steps N] [--warmup N] [--time-limit S] [--json FILE]
  torch_ddp_bench.py --dry-run [options]      the configs, no torch needed

Defaults as `ctrain bench --gpus 2`: ResNet50 batch 256 (224x224) and
BERT-large batch 32 seq 128, bf16, 2 GPUs; the batch is per GPU.

How (the models, data and optimizers of scripts/torch_bench.py, imported
from it: torchvision ResNet channels_last + SGD, transformers
BertForMaskedLM with SDPA attention and the MLM head on the labelled rows +
AdamW, fused optimizers, autocast):
  - Each run is fresh processes started with torch.multiprocessing (spawn):
    one for the 1-GPU run, N for the DDP run (NCCL, a TCP rendezvous on
    127.0.0.1). DDP as users run it: bucket_cap_mb (25 by default, DDP's),
    gradient_as_bucket_view=True, broadcast_buffers=False (per-GPU batch
    norm statistics, as ctrain's default; nothing else in these models
    needs broadcasting). Eager, no CUDA graphs (DDP's own default).
  - Every rank runs `warmup` untimed steps, then the same fixed number of
    timed steps (no time-based stop, so no rank waits in an all-reduce for
    a rank that stopped), each between two CUDA events; the figure is the
    median step, samples/s = batch / median, per GPU; efficiency = the
    slowest rank's per-GPU samples/s / the 1-GPU samples/s.
  - The environment is passed through unchanged (NCCL_* settings apply).
First run: 2026-11-30 on a 2xH200 (results/h200-2026-11-30/torch-ddp/; docs/results.md).
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_bench as tb  # noqa: E402  (models, data, TF32 switches)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, world, c, port, queue):
    """One rank (world 1: the plain 1-GPU run): build, warm up, time."""
    import torch
    import torch.distributed as dist
    try:
        dev = torch.device("cuda", rank)
        torch.cuda.set_device(dev)
        if world > 1:
            dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                    world_size=world)
        tb.set_tf32(torch, c["precision"] == "tf32")
        torch.backends.cudnn.benchmark = True
        torch.manual_seed(42)
        build = tb.build_resnet if tb.resnet_depth(c["model"]) else tb.build_bert
        mod, inputs, opt, _ = build(torch, c, dev)
        fwd = mod
        if world > 1:
            fwd = torch.nn.parallel.DistributedDataParallel(
                mod, device_ids=[rank], bucket_cap_mb=c["bucket_mb"],
                gradient_as_bucket_view=True, broadcast_buffers=False)
        step = tb.make_train_step(torch, fwd, inputs, opt, c["precision"])
        for _ in range(c["warmup"]):
            step()
        torch.cuda.synchronize()
        n = c["steps"]
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        ev[0].record()
        for i in range(n):
            step()
            ev[i + 1].record()
        ev[n].synchronize()
        t = sorted(ev[i].elapsed_time(ev[i + 1]) * 1e-3 for i in range(n))
        med = statistics.median(t)
        queue.put({"rank": rank, "samples_per_s": c["batch"] / med, "ms_per_step": med * 1e3,
                   "samples_per_s_min": c["batch"] / t[-1],
                   "samples_per_s_max": c["batch"] / t[0],
                   "peak_mem_bytes": float(torch.cuda.max_memory_allocated(dev))})
        if world > 1:
            dist.barrier()
            dist.destroy_process_group()
    except Exception as e:  # the parent reports it; the other ranks are stopped there
        queue.put({"rank": rank, "error": f"{type(e).__name__}: {e}"})
        raise


def run(c, world, limit_s):
    """The ranks' results (rank order), or an error string."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    procs = mp.start_processes(worker, args=(world, c, free_port(), queue), nprocs=world,
                               join=False, start_method="spawn")
    deadline = time.monotonic() + limit_s

    def reported():
        res = []
        while not queue.empty():
            res.append(queue.get())
        return res, [r["error"] for r in res if "error" in r]

    try:
        while not procs.join(timeout=1.0):
            if time.monotonic() > deadline:
                for p in procs.processes:
                    if p.is_alive():
                        p.terminate()
                return f"timed out after {limit_s:.0f} s"
    except Exception as e:  # a rank failed: start_processes raises with its traceback
        _, errs = reported()
        return errs[0] if errs else f"{type(e).__name__}: {str(e).splitlines()[0]}"
    res, errs = reported()
    if errs:
        return errs[0]
    if len(res) != world:
        return f"{len(res)} of {world} ranks reported"
    return sorted(res, key=lambda r: r["rank"])


def configs(a):
    out = []
    for m in a.models:
        bert = not tb.resnet_depth(m)
        out.append({"model": m, "precision": a.precision, "layout": "nhwc", "image_size": 224,
                    "batch": a.batch_bert if bert else a.batch_resnet, "seq": a.seq if bert else 0,
                    "mlm_head": "masked", "bucket_mb": a.bucket_mb, "warmup": a.warmup,
                    "steps": a.steps})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--models", type=lambda s: s.split(","), default=["resnet50", "bert-large"])
    ap.add_argument("--precision", choices=["fp32", "tf32", "fp16", "bf16"], default="bf16")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch-resnet", type=int, default=256)
    ap.add_argument("--batch-bert", type=int, default=32)
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb (default 25)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds per run before it is stopped")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    for m in a.models:
        if not tb.resnet_depth(m) and m not in tb.BERT_SIZES:
            sys.exit(f"torch_ddp_bench: unknown model {m} (known: {tb.KNOWN_MODELS})")
    if a.gpus < 2:
        sys.exit("torch_ddp_bench: --gpus must be 2 or more")
    cfgs = configs(a)
    if a.dry_run:
        for c in cfgs:
            print(json.dumps(c))
        return 0
    import torch
    have = torch.cuda.device_count()
    if have < a.gpus:
        sys.exit(f"torch_ddp_bench: --gpus {a.gpus}, this machine shows {have} GPU(s)")
    v = torch.cuda.nccl.version()
    nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    print(f"torch_ddp_bench: PyTorch {torch.__version__}, NCCL {nccl}, "
          f"{torch.cuda.get_device_name(0)} x {a.gpus}; DDP bucket_cap_mb {a.bucket_mb:g}, eager")
    print("model       prec batch  seq  1 GPU smp/s  per GPU smp/s  total smp/s  efficiency")
    rows = []
    for c in cfgs:
        one = run(c, 1, a.time_limit)
        many = run(c, a.gpus, a.time_limit) if not isinstance(one, str) else "skipped (1 GPU failed)"
        row = {"config": c, "gpus": a.gpus}
        if isinstance(one, str) or isinstance(many, str):
            row["error"] = one if isinstance(one, str) else many
            print(f"{c['model']:<11} {c['precision']:<4} {c['batch']:5d} {c['seq'] or '-':>4}  error: {row['error']}")
        else:
            per = min(r["samples_per_s"] for r in many)
            row.update(one_gpu=one[0], ranks=many, per_gpu_samples_per_s=per,
                       total_samples_per_s=sum(r["samples_per_s"] for r in many),
                       efficiency=per / one[0]["samples_per_s"])
            print(f"{c['model']:<11} {c['precision']:<4} {c['batch']:5d} {c['seq'] or '-':>4}  "
                  f"{one[0]['samples_per_s']:11.1f}  {per:13.1f}  {row['total_samples_per_s']:11.1f}  "
                  f"{100 * row['efficiency']:9.1f}%")
        rows.append(row)
        sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tool": "torch_ddp_bench", "torch": torch.__version__, "rows": rows}, f, indent=1)
        print(f"wrote {a.json}")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
