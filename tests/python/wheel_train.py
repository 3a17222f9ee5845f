"""wheel_train.py - the README's PyTorch quick start as torchrun runs it from
an installed wheel (tests/python/wheel.sh copies it into a folder of its
own): no address, no paths, no environment of zshard's; the local cluster
zshard-local started is found by itself. Two ranks at ZeRO-3 train a small
model with AdamW (torch's signature), rank 0 then checks the parameters
against single-process torch on the global batch and writes the model's
state_dict to the file given."""
import os
import sys

import torch
import zshard
import zshard.torch as zt

STEPS = 12


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU()),
                               torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU()),
                               torch.nn.Linear(32, 1))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(8, 16, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def main(out):
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    model = build()
    for block in model[:2]:
        zt.fully_shard(block)
    zt.fully_shard(model, job="quickstart")
    opt = zt.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01, fused=True)
    for step in range(STEPS):
        x, y = batch(rank, step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    sd = model.state_dict()
    if rank == 0:  # single-process torch on the global batch
        ref = build()
        ropt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.01)
        for step in range(STEPS):
            xs, ys = zip(*(batch(r, step) for r in range(world)))
            torch.nn.functional.mse_loss(ref(torch.cat(xs)), torch.cat(ys)).backward()
            ropt.step()
            ropt.zero_grad()
        worst = 0.0
        for n, p in ref.state_dict().items():
            worst = max(worst, ((sd[n] - p).abs().max() / p.abs().max()).item())
        print("wheel_train: zshard %s from %s, %d ranks, %d steps: largest difference from "
              "single-process torch %.2e (relative)" % (zshard.__version__,
                                                       os.path.dirname(zshard.__file__),
                                                       world, STEPS, worst), flush=True)
        if worst > 4e-4:
            print("wheel_train: FAILED: the parameters differ from torch's", flush=True)
            return 1
        torch.save(sd, out)
    model.zshard_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
