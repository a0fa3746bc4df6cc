#!/usr/bin/env python3
"""hf_load_check.py — prove a `ctrain export --hf DIR` folder opens in
Hugging Face transformers:

  hf_load_check.py DIR

builds the architecture config.json names (BertForMaskedLM,
BertForSequenceClassification or BertModel) with from_pretrained(DIR,
output_loading_info=True) and fails unless no weight was missing or unused
(the masked-LM decoder, tied to the word embeddings, is the one expected
absence), then tokenizes a line with BertTokenizer.from_pretrained(DIR) when
DIR has a vocab.txt and runs the model on it, printing the output's shape and
whether it is finite. Run it where transformers is installed (the GPU
machine); exits 1 with the reason otherwise.
"""
import json
import math
import os
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    try:
        import torch
        import transformers
    except ImportError as e:
        sys.exit(f"hf_load_check.py: {e}: run it where torch and transformers are installed")
    with open(os.path.join(d, "config.json")) as f:
        arch = json.load(f)["architectures"][0]
    cls = getattr(transformers, arch)
    model, info = cls.from_pretrained(d, output_loading_info=True)
    tied = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    missing = [k for k in info["missing_keys"] if k not in tied]
    unexpected = list(info["unexpected_keys"])
    if missing or unexpected or info.get("mismatched_keys"):
        sys.exit(f"hf_load_check.py: {arch} from {d}: missing {missing}, unused {unexpected}, "
                 f"mismatched {info.get('mismatched_keys')}")
    print(f"transformers {transformers.__version__}: {arch}.from_pretrained({d}) took every weight")
    if os.path.exists(os.path.join(d, "vocab.txt")):
        tok = transformers.BertTokenizer.from_pretrained(d)
        batch = tok(["a fortune cookie says what it says"], return_tensors="pt")
        model.eval()
        with torch.no_grad():
            out = model(**batch)
        t = out.logits if hasattr(out, "logits") else out.last_hidden_state
        ok = bool(torch.isfinite(t).all())
        print(f"forward on {batch['input_ids'].shape[1]} tokens: output {tuple(t.shape)}, "
              f"{'finite' if ok else 'NOT finite'}")
        if not ok or math.isnan(float(t.float().mean())):
            sys.exit(1)


if __name__ == "__main__":
    main()
