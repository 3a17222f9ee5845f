"""reader_train.py - rank 0 of a Llama (tests/python/hf_rank.py's, built
from its config) trained through zshard.torch with weight readers allowed
("readers": {"pins": 2}); after --pause steps it writes DIR/at and waits
for DIR/go (test_reader.py exports and pins meanwhile), then trains on to
--steps. Run by tests/python/test_reader.py.

  reader_train.py --job NAME --steps N --pause K --dir DIR
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_rank import batch, build, groups  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--pause", type=int, required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    import zshard.torch as zt
    model, layers = build("llama")
    model.train()
    for layer in layers:
        zt.fully_shard(layer)
    zt.fully_shard(model, job=a.job, stage=3, readers=2)
    opt = zt.AdamW(groups(model), lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
    for step in range(a.steps):
        if step == a.pause:
            open(os.path.join(a.dir, "at"), "w").close()
            t0 = time.monotonic()
            while not os.path.exists(os.path.join(a.dir, "go")):
                if time.monotonic() - t0 > 300:
                    sys.exit("reader_train: no DIR/go within 300 s")
                time.sleep(0.02)
        ids = batch(0, step)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.zshard_close() if hasattr(model, "zshard_close") else None
    print("reader_train: %d steps" % a.steps)


if __name__ == "__main__":
    main()
