#!/usr/bin/env python3
"""gpt.py - a small GPT-style model in PyTorch, trained through zshard.

A byte-level transformer (token and position embeddings, pre-norm blocks of
causal self-attention and an MLP, a final norm, an output head tied to the
token embedding) learns a text every Debian machine has. Each block is a
zshard unit (fully_shard); the root keeps the embeddings, the tied head and
the last norm. AdamW runs on the shard servers with two parameter groups
(no weight decay on norms, biases and embeddings) and a warmup + cosine
learning-rate schedule from torch.optim.lr_scheduler.

One rank per process, torchrun's conventions (RANK, WORLD_SIZE, and
ZSHARD_COORDINATOR for the coordinator):

    RANK=0 WORLD_SIZE=2 ZSHARD_COORDINATOR=127.0.0.1:7000 examples/gpt.py --steps 100 &
    RANK=1 WORLD_SIZE=2 ZSHARD_COORDINATOR=127.0.0.1:7000 examples/gpt.py --steps 100

(`make gpt` starts a local cluster and both ranks.) A rank restarted after a
crash, or the whole job restored from a checkpoint (zshardctl checkpoint
restore), continues from the checkpoint's step with its data position and
RNG state from the checkpoint's blob. --dump writes the final parameters as
safetensors, which load into a plain GPT with load_state_dict.

Batches depend only on (seed, rank, step), so a resumed run is the run that
never stopped.
"""
import argparse
import math
import os
import sys

import torch
from torch import nn
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

TEXT = "/usr/share/common-licenses/GPL-3"


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=256, d=128, layers=4, heads=4, seq=128):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif n.endswith(".bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets=None):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def param_groups(model):
    """Weight decay on matrices only (not on norms, biases, embeddings)."""
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() == 2 and "wte" not in n and "wpe" not in n else no_decay).append(p)
    return decay, no_decay


def warmup_cosine(warmup, total, floor=0.1):
    def f(step):
        if step < warmup:
            return (step + 1) / warmup
        prog = min(1.0, (step - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * prog))
    return f


def load_text(path=TEXT):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()


def batch(data, seed, rank, step, b, seq):
    """The batch of (rank, step): the same wherever and whenever it runs."""
    g = torch.Generator().manual_seed((seed * 1000003 + rank) * 1000003 + step)
    ix = torch.randint(0, data.numel() - seq - 1, (b,), generator=g)
    x = torch.stack([data[i:i + seq] for i in ix.tolist()])
    y = torch.stack([data[i + 1:i + seq + 1] for i in ix.tolist()])
    return x, y


def build(args):
    torch.manual_seed(args.seed)
    return GPT(d=args.d, layers=args.layers, heads=args.heads, seq=args.seq)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--job", default="gpt")
    ap.add_argument("--coordinator", default=None)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--total", type=int, default=0, help="the schedule's length (--steps)")
    ap.add_argument("--warmup", type=int, default=-1, help="warmup steps (a tenth)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=0.0, help="global-norm clipping (0: off)")
    ap.add_argument("--accum", type=int, default=1,
                    help="micro-batches per step (gradient accumulation)")
    ap.add_argument("--stage", type=int, default=3)
    ap.add_argument("--transport", default="auto")
    ap.add_argument("--prefetch", type=int, default=1)
    ap.add_argument("--keep-until-backward", action="store_true")
    ap.add_argument("--staged", action="store_true",
                    help="parameters copied from libzshard's buffers (as on a GPU)")
    ap.add_argument("--device", default="cpu",
                    help="cpu, cuda (cuda:LOCAL_RANK: libzshard's device mode), or emulated "
                    "(CPU parameters in libzshard's emulated device: its device mode, no GPU)")
    ap.add_argument("--checkpoint-every", type=int, default=0)
    ap.add_argument("--collective", action="store_true",
                    help="the trainers reduce among themselves (NCCL; device mode)")
    ap.add_argument("--stop-after", type=int, default=0,
                    help="leave after this many steps of this run (a test's stop)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--print-every", type=int, default=20)
    ap.add_argument("--dump", default=None, help="write the final parameters (safetensors)")
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)

    import zshard
    from zshard.torch import AdamW, fully_shard, load_rng_blob, rng_blob

    torch.set_num_threads(a.threads)
    rank = int(os.environ.get("RANK", "0"))
    total = a.total or a.steps
    warmup = a.warmup if a.warmup >= 0 else max(1, total // 10)
    data = load_text(a.text)
    model = build(a)
    dev = torch.device("cpu")
    if a.device not in ("cpu", "cuda", "emulated"):
        ap.error("--device: cpu, cuda or emulated")
    if a.device == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        model = model.to(dev)
    decay, no_decay = param_groups(model)
    for blk in model.blocks:
        fully_shard(blk, reshard_after_forward=not a.keep_until_backward)
    fully_shard(model, job=a.job, coordinator=a.coordinator, stage=a.stage,
                transport=a.transport, prefetch=a.prefetch, staged=a.staged,
                device="emulated" if a.device == "emulated" else None,
                collective=a.collective)
    opt = AdamW([{"params": decay, "weight_decay": a.weight_decay},
                 {"params": no_decay, "weight_decay": 0.0}],
                lr=a.lr, betas=(0.9, 0.95), eps=1e-8, max_grad_norm=a.clip or None)
    lam = warmup_cosine(warmup, total)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)

    def state_blob():
        """This rank's part of a checkpoint: the optimizer's param_groups
        (the lr the schedule set) and the scheduler's position; the data
        needs none, batches are a function of the step."""
        return rng_blob({"opt": opt.state_dict(), "sched": sched.state_dict()})

    def restart(state):
        """Where the job's state comes from: nothing (step 0), a checkpoint
        (its blob), or a clean stop (no blob: the schedule is a function of
        the step)."""
        step, blob = (0, b"") if state is None else state
        if blob:
            d = load_rng_blob(blob)
            opt.load_state_dict(d["opt"])
            sched.load_state_dict(d["sched"])
        else:  # the schedule's value at step, as LambdaLR computes it
            for g, base in zip(opt.param_groups, sched.base_lrs):
                g["lr"] = base * lam(step)
            sched.last_epoch = step
            sched._last_lr = [g["lr"] for g in opt.param_groups]
        if state is not None:
            print("rank %d resumes at step %d" % (rank, step), flush=True)
        return step

    step = restart(model.zshard_start())
    done = 0
    while True:
        try:
            if step == a.steps:  # the end is durable before any rank leaves
                model.zshard_checkpoint(state_blob())
                break
            if a.stop_after and done == a.stop_after:
                print("rank %d stops after step %d" % (rank, step - 1), flush=True)
                model.zshard_close()
                return 0
            if a.checkpoint_every and step and step % a.checkpoint_every == 0:
                model.zshard_checkpoint(state_blob())
            for k in range(a.accum):  # the last micro-batch's backward pushes
                x, y = (z.to(dev) for z in batch(data, a.seed + k, rank, step, a.batch,
                                                 a.seq))
                model.set_requires_gradient_sync(k == a.accum - 1)
                loss = model(x, y) / a.accum
                loss.backward()
            opt.step()
        except zshard.Resume:  # a rank was lost: the job rolled back
            step = restart(model.zshard_resume())
            continue
        except zshard.Canceled as e:  # zshardctl job stop
            print("rank %d: %s" % (rank, e), flush=True)
            model.zshard_close()
            return 0
        sched.step()
        opt.zero_grad()
        if a.print_every and (step % a.print_every == 0 or step + 1 == a.steps):
            print("rank %d step %4d loss %.4f lr %.2e" % (rank, step, loss.item(),
                                                          sched.get_last_lr()[0]), flush=True)
        step += 1
        done += 1
    if a.dump and rank == 0:
        from safetensors.torch import save_file
        save_file(model.zshard_state_dict(), a.dump)
    last = model.zshard_trainer.last_step()
    if last:
        print("rank %d: %d steps; last step %.3f s (waiting for parameters %.3f s), peak RSS "
              "%.0f MB" % (rank, a.steps, last["seconds"], last["gather_wait_seconds"],
                           last["rss_peak_bytes"] / 1e6), flush=True)
    model.zshard_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
