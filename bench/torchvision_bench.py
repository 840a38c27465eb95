#!/usr/bin/python3
"""The standard PyTorch image-prep pipeline, the peer of bench_prep.

    /usr/bin/python3 bench/torchvision_bench.py --data DIR [--images 2560]
        [--rounds 3] [--workers 0,2] [--batch 64]

torchvision.datasets.ImageFolder + Compose([RandomResizedCrop(224),
RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet mean/std)]) in a
DataLoader(batch_size=64, shuffle=True, num_workers=N). torch runs one
intra-op thread in the main process and in each worker, so num_workers 0
uses one core and num_workers 2 two.

First every file is read once (the page cache is warm, as bench_prep's
in-memory runs are). Each timed run starts an epoch, takes a few batches
untimed (worker start-up and their first prefetch), then times --images
images. Workers persist across rounds.

Prints a line per round, a table, and per setting
    RESULT tv_nw<N> <cores> <median img/s> <min> <max> <per-core>
"""
import argparse
import os
import statistics
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def one_thread(_worker_id=None):
    torch.set_num_threads(1)


def timed_run(loader, images, skip_batches):
    it = iter(loader)
    for _ in range(skip_batches):
        next(it)
    seen = 0
    t0 = time.perf_counter()
    c0 = time.process_time()
    while seen < images:
        try:
            x, _y = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        seen += x.shape[0]
    c1 = time.process_time()
    t1 = time.perf_counter()
    del it
    return seen / (t1 - t0), (c1 - c0) / (t1 - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--images", type=int, default=2560)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", default="0,2")
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    one_thread()

    tf = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    ds = datasets.ImageFolder(args.data, transform=tf)
    total = 0
    t0 = time.perf_counter()
    for path, _label in ds.samples:  # warm the page cache
        with open(path, "rb") as f:
            total += len(f.read())
    print(f"torchvision_bench: torch {torch.__version__}, {len(ds)} files, "
          f"{total / 1e6:.1f} MB read in {time.perf_counter() - t0:.1f} s; "
          f"batch {args.batch}, {args.images} images per timed run, {args.rounds} rounds")

    workers = [int(w) for w in args.workers.split(",")]
    loaders = {}
    for nw in workers:
        kw = dict(batch_size=args.batch, shuffle=True, num_workers=nw)
        if nw > 0:
            kw.update(worker_init_fn=one_thread, persistent_workers=True, prefetch_factor=2)
        loaders[nw] = DataLoader(ds, **kw)
    rates = {nw: [] for nw in workers}
    cpu = {nw: [] for nw in workers}
    for r in range(args.rounds):
        line = f"  round {r + 1}:"
        for nw in workers:
            rate, cf = timed_run(loaders[nw], args.images, skip_batches=2 + 2 * nw)
            rates[nw].append(rate)
            cpu[nw].append(cf)
            line += f"  nw={nw} {rate:.1f} img/s"
        print(line, flush=True)
    print(f"\n{'case':<8} {'cores':>7} {'median/s':>10} {'min/s':>10} {'max/s':>10} "
          f"{'per-core/s':>12} {'main-cpu':>8}")
    results = []
    for nw in workers:
        cores = max(1, nw)
        med = statistics.median(rates[nw])
        print(f"{'nw=' + str(nw):<8} {cores:>7} {med:>10.1f} {min(rates[nw]):>10.1f} "
              f"{max(rates[nw]):>10.1f} {med / cores:>12.1f} "
              f"{statistics.mean(cpu[nw]):>8.2f}")
        results.append(f"RESULT tv_nw{nw} {cores} {med:.1f} {min(rates[nw]):.1f} "
                       f"{max(rates[nw]):.1f} {med / cores:.1f}")
    print()
    print("\n".join(results))


if __name__ == "__main__":
    main()
