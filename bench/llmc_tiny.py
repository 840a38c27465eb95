#!/usr/bin/env python3
"""llmc_tiny.py DIR: the files llm.c's train_gpt2.c opens, made small, so
its own training loop runs here in seconds with no download:

  DIR/gpt2_124M.bin      a GPT-2 checkpoint in llm.c's format (version 3)
                         with random weights: maxT 64, V 512, 2 layers,
                         4 heads, 64 channels (the name is train_gpt2.c's)
  DIR/gpt2_tokenizer.bin llm.c's tokenizer format (version 2), 512 tokens
  DIR/dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin
                         llm.c token shards (magic 20240520, version 1,
                         uint16 tokens): a learnable stream (a few repeated
                         phrases with noise), 200,000 and 20,000 tokens

The formats are llm.c's (train_gpt2.c gpt2_build_from_checkpoint,
llmc/tokenizer.h, llmc/dataloader.h); the numbers are seeded, so every run
writes the same bytes.
"""
import os
import random
import struct
import sys
from array import array

MAXT, V, L, NH, C = 64, 512, 2, 4, 64
VP = V  # already a multiple of 128


def checkpoint(path, rng):
    header = array("i", [0] * 256)
    header[0:8] = array("i", [20240326, 3, MAXT, V, L, NH, C, VP])
    sizes = [VP * C, MAXT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
             L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C]
    ones = {2, 8, 14}  # ln1w, ln2w, lnfw
    zeros = {3, 5, 7, 9, 11, 13, 15}  # every bias and layernorm bias
    with open(path, "wb") as f:
        header.tofile(f)
        for i, n in enumerate(sizes):
            if i in ones:
                a = array("f", [1.0] * n)
            elif i in zeros:
                a = array("f", [0.0] * n)
            else:
                a = array("f", (rng.gauss(0.0, 0.02) for _ in range(n)))
            a.tofile(f)


def tokenizer(path):
    header = array("I", [0] * 256)
    header[0:4] = array("I", [20240328, 2, V, V - 1])  # eot: the last token
    with open(path, "wb") as f:
        header.tofile(f)
        for t in range(V):
            word = ("t%d " % t).encode()
            f.write(struct.pack("B", len(word)))
            f.write(word)


def shard(path, n, rng):
    phrases = [[rng.randrange(V - 1) for _ in range(rng.randrange(5, 20))] for _ in range(40)]
    toks = array("H")
    while len(toks) < n:
        p = rng.choice(phrases)
        toks.extend(t if rng.random() > 0.05 else rng.randrange(V - 1) for t in p)
        toks.append(V - 1)
    del toks[n:]
    header = array("i", [0] * 256)
    header[0:3] = array("i", [20240520, 1, n])
    with open(path, "wb") as f:
        header.tofile(f)
        toks.tofile(f)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: llmc_tiny.py DIR")
    d = sys.argv[1]
    rng = random.Random(1337)
    data = os.path.join(d, "dev", "data", "tinyshakespeare")
    os.makedirs(data, exist_ok=True)
    checkpoint(os.path.join(d, "gpt2_124M.bin"), rng)
    tokenizer(os.path.join(d, "gpt2_tokenizer.bin"))
    shard(os.path.join(data, "tiny_shakespeare_train.bin"), 200000, rng)
    shard(os.path.join(data, "tiny_shakespeare_val.bin"), 20000, rng)


if __name__ == "__main__":
    main()
