#!/usr/bin/env python3
"""make_image_folder.py — write an ImageFolder of photo-like JPEGs for
measuring real-data training (ctrain train/bench --data DIR) without a
download.

    python3 scripts/make_image_folder.py OUT --train 6400 --val 640 --classes 100

OUT/train/cNNN/*.jpg and OUT/val/cNNN/*.jpg. Each image is a pure function of
(--seed, split, index): sizes drawn around ImageNet's (width 300..500,
height 250..500, the median near 460 x 375), content a smooth random field
tinted by the class plus mid-frequency texture and sensor-like noise, so a
JPEG at quality 90 is about 60-100 KB, as ImageNet's photos are. --mix adds
the variety a real folder has: every 50th image progressive, every 40th
grayscale, every 97th 4:4:4 chroma, one CMYK JPEG and one PNG per split.

Needs Pillow and NumPy. Uses every CPU (--jobs).
"""
import argparse
import os
import sys
from multiprocessing import Pool


def image(seed, split, index, classes):
    import numpy as np
    rng = np.random.default_rng([seed, 0 if split == "train" else 1, index])
    cls = index % classes
    w = int(rng.integers(300, 501))
    h = int(rng.integers(250, 501))
    # smooth field: a small random image upsampled (bilinear through PIL)
    from PIL import Image
    small = rng.random((6, 8, 3)) * 255.0
    tint = np.random.default_rng([seed, 7, cls]).random(3) * 120.0 - 60.0
    small = np.clip(small * 0.7 + 40 + tint, 0, 255).astype(np.uint8)
    base = np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), dtype=np.float32)
    # mid-frequency texture: a coarser noise upsampled, then fine noise
    mid = rng.normal(0, 22, (h // 8 + 1, w // 8 + 1, 1)).astype(np.float32)
    mid = np.kron(mid, np.ones((8, 8, 1), np.float32))[:h, :w]
    fine = rng.normal(0, 7, (h, w, 3)).astype(np.float32)
    # a few hard edges (objects)
    img = base + mid + fine
    for _ in range(int(rng.integers(2, 6))):
        y0, x0 = int(rng.integers(0, h)), int(rng.integers(0, w))
        y1, x1 = min(h, y0 + int(rng.integers(20, h // 2 + 21))), min(w, x0 + int(rng.integers(20, w // 2 + 21)))
        img[y0:y1, x0:x1] += rng.normal(0, 50, 3).astype(np.float32)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)), cls


def write(job):
    seed, split, index, classes, out, mix = job
    im, cls = image(seed, split, index, classes)
    d = os.path.join(out, split, f"c{cls:03d}")
    path = os.path.join(d, f"{split}_{index:06d}")
    kw = {"quality": 90}
    if mix and index == 3:
        im.save(path + ".png")
        return
    if mix and index == 5:
        im.convert("CMYK").save(path + ".jpg", quality=90)
        return
    if mix and index % 40 == 1:
        im = im.convert("L")
    if mix and index % 50 == 2:
        kw["progressive"] = True
    if mix and index % 97 == 4:
        kw["subsampling"] = 0
    im.save(path + ".jpg", **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=6400)
    ap.add_argument("--val", type=int, default=640)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mix", action="store_true", help="progressive, gray, 4:4:4, CMYK and PNG files too")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    a = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import PIL  # noqa: F401
    except ImportError as e:
        sys.exit(f"make_image_folder: {e}: install Pillow and NumPy (apt-get install python3-pil python3-numpy)")
    for split, n in (("train", a.train), ("val", a.val)):
        for c in range(min(a.classes, n)):
            os.makedirs(os.path.join(a.out, split, f"c{c:03d}"), exist_ok=True)
    jobs = [(a.seed, s, i, a.classes, a.out, a.mix) for s, n in (("train", a.train), ("val", a.val))
            for i in range(n)]
    with Pool(a.jobs) as p:
        for k, _ in enumerate(p.imap_unordered(write, jobs, chunksize=64)):
            if (k + 1) % 2000 == 0:
                print(f"{k + 1} of {len(jobs)} images", flush=True)
    print(f"wrote {a.train} train and {a.val} val images in {a.classes} classes under {a.out}")


if __name__ == "__main__":
    main()
