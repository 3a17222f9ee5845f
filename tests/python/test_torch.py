#!/usr/bin/env python3
"""test_torch.py - PyTorch modules through zshard (python/zshard/torch.py),
with examples/gpt.py, against a real cluster.

Two ranks (processes, torchrun's environment) train the small GPT of
examples/gpt.py through fully_shard at stage 3 (and 1 and 2), AdamW with
two parameter groups and a warmup + cosine LambdaLR. The parameters after N
steps must equal, bit for bit, one process that applies zshard's documented
semantics to the same data: each rank's gradient computed by torch, their
sum by the reduction's definition (tests/ref/bsum_ref.py, numpy) and mean
in float32, then AdamW in zshard's operation order
(tests/ref/optim_ref.py, numpy) with each group's lr and weight decay of
that step. torch.optim.AdamW on the same mean gradients must agree within a
tolerance (see test_against_torch_adamw). A run stopped and restored from a
checkpoint, and a rank killed with SIGKILL and restarted as torchrun would,
end bitwise equal to the run that never stopped; the export loads into a
plain nn.Module with load_state_dict.

    ZSHARD_BIN=build/bin build/torch-venv/bin/python tests/python/test_torch.py
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, HERE)
import gpt  # noqa: E402
import bsum_ref  # noqa: E402
import optim_ref  # noqa: E402
from cluster import Cluster, die_with_us  # noqa: E402
from zshard.torch import fully_shard  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

BIN = os.environ.get("ZSHARD_BIN", os.path.join(ROOT, "build", "bin"))
STEPS = 6
MODEL = ["--d", "32", "--layers", "2", "--heads", "2", "--seq", "16", "--batch", "4",
         "--lr", "1e-2", "--weight-decay", "0.1", "--warmup", "2", "--print-every", "0"]


def read(path):
    with open(path) as f:
        return f.read()


def args(extra=()):
    return argparse.Namespace(
        d=32, layers=2, heads=2, seq=16, batch=4, lr=1e-2, weight_decay=0.1, warmup=2,
        seed=1234, **dict(extra))


def clip_coef(acc, units, shards, max_norm):
    """zshard's clipping coefficient: each shard's sum of squares in double
    in element order (cumsum: sequential, as the servers sum), the shards'
    sums added in placement order, then min(1, max / (norm + 1e-6)) rounded
    to float32 (torch's clip_grad_norm_)."""
    flat = {u: torch.cat([acc[n].reshape(-1) for n in names]).numpy().astype(np.float64)
            for u, names in units.items()}
    total = 0.0
    for unit, off, length in shards:
        seg = flat[unit][off:off + length]
        total += float(np.cumsum(seg * seg)[-1]) if length else 0.0
    c = max_norm / (total ** 0.5 + 1e-6)
    return np.float32(c) if c < 1.0 else np.float32(1.0)


def reference(steps, world=2, total=STEPS, torch_adamw=False, accum=1, clip=None):
    """One process: the world's gradients (each the sum of its accum
    micro-batches' as autograd accumulates them), the reduction's mean,
    clipping (clip: (max_norm, units, shards) of the job's placement), and
    zshard's AdamW (or torch.optim.AdamW) with each group's values."""
    torch.set_num_threads(1)
    a = args()
    model = gpt.build(a)
    decay, no_decay = gpt.param_groups(model)
    wd = {id(p): a.weight_decay for p in decay}
    wd.update({id(p): 0.0 for p in no_decay})
    lam = gpt.warmup_cosine(a.warmup, total)
    data = gpt.load_text()
    params = list(model.named_parameters())
    state = {n: (np.zeros(p.numel(), np.float32), np.zeros(p.numel(), np.float32))
             for n, p in params}
    topt = None
    if torch_adamw:
        topt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                                  {"params": no_decay, "weight_decay": 0.0}], lr=a.lr,
                                 betas=(0.9, 0.95), eps=1e-8)
        sched = torch.optim.lr_scheduler.LambdaLR(topt, lam)
    for t in range(steps):
        grads = []
        for r in range(world):
            model.zero_grad(set_to_none=True)
            for k in range(accum):
                x, y = gpt.batch(data, a.seed + k, r, t, a.batch, a.seq)
                (model(x, y) / accum).backward()
            grads.append({n: p.grad.detach().clone() for n, p in params})
        lr = a.lr * lam(t)
        mean = {}
        for n, p in params:
            # the servers' reduction, from its definition (tests/ref)
            acc = torch.from_numpy(bsum_ref.bsum_rows(
                np.stack([grads[r][n].numpy() for r in range(world)])))
            mean[n] = acc / np.float32(world) if world > 1 else acc
        if clip:
            coef = clip_coef(mean, clip[1], clip[2], clip[0])
            if coef != 1.0:
                mean = {n: g * torch.tensor(coef) for n, g in mean.items()}
        with torch.no_grad():
            for n, p in params:
                acc = mean[n]
                if topt is not None:
                    p.grad = acc
                    continue
                m, v = state[n]
                pn, m, v = optim_ref.step("adamw", p.detach().numpy().reshape(-1).copy(), m,
                                          v, acc.numpy().reshape(-1), t + 1, lr, 0.9, 0.95,
                                          1e-8, wd[id(p)], 0.0)
                state[n] = (m, v)
                p.copy_(torch.from_numpy(pn).view(p.shape))
        if topt is not None:
            topt.step()
            sched.step()
    return {n: p.detach().clone() for n, p in model.named_parameters(remove_duplicate=False)}


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.lin2 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, h):
        return h + self.lin2(torch.tanh(self.lin1(h)))


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.out = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)
        self.blocks = torch.nn.ModuleList([_Block(), _Block()])

    def forward(self, x):
        h = self.emb(x)
        for b in self.blocks:
            h = b(h)
        return self.out(h).pow(2).mean()


def frozen_net():
    """A small net with a wholly frozen unit (blocks.0), a frozen weight
    beside a trained bias (blocks.1.lin1) and a frozen root bias."""
    torch.manual_seed(11)
    n = _Net()
    n.blocks[0].requires_grad_(False)
    n.blocks[1].lin1.weight.requires_grad_(False)
    n.emb.bias.requires_grad_(False)
    return n


def net_data(t):
    return torch.randn(6, 4, generator=torch.Generator().manual_seed(100 + t))


class TestTorch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(BIN)
        cls.procs = []

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        cls.c.close()

    def spawn(self, rank, job, extra, log):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                   ZSHARD_COORDINATOR=self.c.addr, OMP_NUM_THREADS="1")
        env.pop("LD_LIBRARY_PATH", None)
        with open(log, "w") as out:
            p = subprocess.Popen([sys.executable, os.path.join(ROOT, "examples", "gpt.py"),
                                  "--job", job] + MODEL + list(extra), stdout=out,
                                 stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL,
                                 preexec_fn=die_with_us)
        self.procs.append(p)
        return p

    def run_ranks(self, job, extra=(), timeout=300):
        """Both ranks to their end; rank 0 dumps the final parameters."""
        dump = os.path.join(self.c.d, job + ".safetensors")
        logs = [os.path.join(self.c.d, "%s-%d.log" % (job, r)) for r in range(2)]
        ps = [self.spawn(r, job, list(extra) + (["--dump", dump] if r == 0 else []), logs[r])
              for r in range(2)]
        for p, log in zip(ps, logs):
            try:
                rc = p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "timeout"
            if rc != 0:
                self.fail("%s: %s" % (log, read(log)[-3000:]))
        return dump, [read(x) for x in logs]

    def wait_ok(self, p, log, what):
        """Waits (within 240 s) for p to exit 0, else fails with its log."""
        try:
            rc = p.wait(240)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        if rc != 0:
            self.fail("%s: %s: %s" % (what, log, read(log)[-3000:]))

    def assert_bitwise(self, got, ref, what):
        for n, r in ref.items():
            g = got[n]
            if not torch.equal(g, r):
                d = (g - r).abs().max().item()
                self.fail("%s: %s differs from the reference (max |diff| %g)" % (what, n, d))

    def test_stage3_bitwise_and_export(self):
        dump, _ = self.run_ranks("g3", ["--steps", str(STEPS), "--stage", "3"])
        ref = reference(STEPS)
        got = load_file(dump)
        self.assert_bitwise(got, ref, "stage 3")
        # the job the wrapper built: units, tensors by state_dict name, groups
        shown = self.c.ctl("job", "show", "g3")
        # lr: the warmup's first value
        self.assertIn("optimizer group 1: lr 0.005, weight_decay 0, betas 0.9 0.95", shown)
        self.assertIn("3 units", shown)
        # the dump, and zshardctl's own export, load into a plain module
        plain = gpt.build(args())
        plain.load_state_dict(got)
        out = os.path.join(self.c.d, "g3-ctl.safetensors")
        self.c.ctl("export", "g3", "--out", out, "--bare-names")
        exported = load_file(out)  # the tied head under both its names
        self.assertTrue(torch.equal(exported["head.weight"], exported["wte.weight"]))
        plain2 = gpt.build(args())
        plain2.load_state_dict(exported, strict=True)
        self.assert_bitwise(dict(plain2.named_parameters(remove_duplicate=False)), ref,
                            "zshardctl export")

    def test_staged_bitwise(self):
        """Parameters as tensors of their own, copied from libzshard's
        buffers and their gradients copied back (what CUDA parameters get),
        on the CPU: the same bits."""
        dump, _ = self.run_ranks("gst", ["--steps", "4", "--staged"])
        self.assert_bitwise(load_file(dump), reference(4, total=4), "staged")

    def test_device_mode_emulated_bitwise(self):
        """libzshard's device mode under torch (what CUDA parameters get:
        buffers in device memory, gathers and gradients staged on the
        library's copy stream), on its emulated device: the same bits."""
        dump, _ = self.run_ranks("gdv", ["--steps", "4", "--device", "emulated",
                                         "--stage", "3", "--prefetch", "2"])
        self.assert_bitwise(load_file(dump), reference(4, total=4), "device mode")

    def test_collective_emulated_bitwise(self):
        """A collective job (the ranks reduce among themselves, each pushing
        its slice's sum) from PyTorch, on the emulated device and
        communicator: two processes, the same bits."""
        dump, _ = self.run_ranks("gcl", ["--steps", "4", "--device", "emulated",
                                         "--collective", "--stage", "3"])
        self.assert_bitwise(load_file(dump), reference(4, total=4), "collective")

    def test_stages_and_policies_bitwise(self):
        """Stages 1 and 2 over shm; stage 3 keeping units until their
        backward with two units of prefetch, over tcp: the same bits."""
        ref = reference(4, total=4)
        for job, extra in (("g1", ["--stage", "1", "--transport", "shm"]),
                           ("g2", ["--stage", "2", "--transport", "shm"]),
                           ("g3k", ["--keep-until-backward", "--prefetch", "2",
                                    "--transport", "tcp"])):
            dump, _ = self.run_ranks(job, ["--steps", "4"] + extra)
            self.assert_bitwise(load_file(dump), ref, job)

    def test_accumulation_and_clipping_bitwise(self):
        """Two micro-batches per step (set_requires_gradient_sync(False) on
        the first: the gradient stays in libzshard's buffer and the second
        backward adds to it) and global-norm clipping (max_grad_norm, the
        norm summed in the placement's shard order as the servers do)."""
        dump, _ = self.run_ranks("gac", ["--steps", "4", "--accum", "2", "--clip", "0.05"])
        pl = json.loads(self.c.ctl("placement", "gac", "--json"))
        shards = [(s["unit"], s["offset"], s["length"]) for s in pl["shards"]]
        m = gpt.build(args())
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m, job="layout-only", coordinator="127.0.0.1:1", world_size=2)
        units = {u.index: [n for n, _ in u.params] for u in m._zshard.units}
        ref = reference(4, total=4, accum=2, clip=(0.05, units, shards))
        self.assert_bitwise(load_file(dump), ref, "accumulation and clipping")
        unclipped = reference(4, total=4, accum=2)
        self.assertFalse(all(torch.equal(ref[n], unclipped[n]) for n in ref),
                         "clipping at 0.05 changed nothing: the test would not see it")

    def test_in_process_sgd_eval_and_refusals(self):
        """One rank in this process: what is refused with a clear error and
        changes nothing; SGD with momentum and a param group of its own; an
        evaluation forward under no_grad between steps sees the parameters
        a plain module loaded with zshard_state_dict has."""
        import zshard
        from zshard.torch import SGD
        a = args()
        m = gpt.build(a)
        # no coordinator anywhere (nor a local cluster): the start says where it looked
        env = os.environ.pop("ZSHARD_COORDINATOR", None)
        local = os.environ.get("ZSHARD_LOCAL_DIR")
        os.environ["ZSHARD_LOCAL_DIR"] = os.path.join(self.c.d, "no-local-cluster")
        try:
            m0 = fully_shard(gpt.build(a), job="nope", world_size=1)
            SGD(m0.parameters(), lr=0.1)
            with self.assertRaisesRegex(zshard.InvalidArgument, "no coordinator: .*zshard-local "
                                        "start; none runs in .*no-local-cluster"):
                m0.zshard_start()
        finally:
            if env is not None:
                os.environ["ZSHARD_COORDINATOR"] = env
            if local is None:
                os.environ.pop("ZSHARD_LOCAL_DIR")
            else:
                os.environ["ZSHARD_LOCAL_DIR"] = local
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m, job="g1p", coordinator=self.c.addr, rank=0, world_size=1)
        x, y = gpt.batch(gpt.load_text(), 5, 0, 0, 4, 16)
        # (a torch.optim optimizer would update nothing: from_optimizer named)
        with self.assertRaisesRegex(zshard.FailedPrecondition,
                                    "no zshard optimizer.*zshard.torch.from_optimizer"):
            m(x, y)
        with self.assertRaisesRegex(zshard.InvalidArgument, "does not train: blocks.0"):
            SGD([p for n, p in m.named_parameters() if not n.startswith("blocks.0")], lr=0.1)
        decay, no_decay = gpt.param_groups(m)
        opt = SGD([{"params": decay}, {"params": no_decay, "momentum": 0.5}], lr=0.05,
                  momentum=0.9, weight_decay=1e-3)
        self.assertIsNone(m.zshard_start())
        losses = []
        for step in range(3):
            loss = m(x, y)
            if step == 1:  # a forward under no_grad inside the step sees the same
                with torch.no_grad():
                    self.assertEqual(m(x, y).item(), loss.item())
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        self.assertEqual(m.zshard_step, 3)
        self.assertLess(losses[-1], losses[0])
        with torch.no_grad():
            got = m(x)
        plain = gpt.build(a)
        plain.load_state_dict(m.zshard_state_dict())
        with torch.no_grad():
            want = plain(x)
        self.assertTrue(torch.equal(got, want), "an eval forward differs from the state dict's")
        m.zshard_close()

    def test_state_dict_and_layout_refusals(self):
        """model.state_dict() holds the trained values at every stage (at
        stage 3 it held empty tensors, at stages 1 and 2 the values before
        the last update): the parameters of the last completed step, as
        zshard_state_dict gives them, every persistent buffer and no other;
        load_state_dict after the start is refused, saying what to do; a
        rank whose model differs from the job's in a tensor's shape but not
        in its unit's element count is refused at its start, naming it."""
        import zshard
        from zshard.torch import AdamW
        a = args()
        x, y = gpt.batch(gpt.load_text(), 7, 0, 0, 4, 16)
        for stage in (3, 1):
            m = gpt.build(a)
            m.register_buffer("seen", torch.tensor([3.0]))
            m.register_buffer("scratch", torch.zeros(2), persistent=False)
            for b in m.blocks:
                fully_shard(b)
            fully_shard(m, job="gsd%d" % stage, coordinator=self.c.addr, rank=0, world_size=1,
                        stage=stage)
            opt = AdamW(m.parameters(), lr=1e-2)
            before = {n: p.detach().clone() for n, p in m.named_parameters()}
            for _ in range(3):
                m(x, y).backward()
                opt.step()
            sd = m.state_dict()
            want = m.zshard_state_dict()
            self.assertEqual(sorted(sd), sorted(n for n in want if n != "scratch"))
            self.assertNotIn("scratch", sd)
            for n, v in sd.items():
                self.assertTrue(torch.equal(v, want[n]), "stage %d: %s" % (stage, n))
            moved = [n for n in before if not torch.equal(before[n], sd[n])]
            self.assertTrue(moved, "stage %d: nothing trained" % stage)
            plain = gpt.build(a)
            plain.register_buffer("seen", torch.tensor([0.0]))
            plain.load_state_dict(sd, strict=True)
            self.assertEqual(plain.seen.item(), 3.0)
            with self.assertRaisesRegex(zshard.FailedPrecondition, "changes nothing on its servers"):
                m.load_state_dict(sd)
            m.zshard_close()

        class Net(torch.nn.Module):
            def __init__(self, a, b):
                super().__init__()
                self.w = torch.nn.Parameter(torch.ones(a, b))

        nets = [Net(4, 6), Net(6, 4)]  # 24 elements each
        for r, n in enumerate(nets):
            fully_shard(n, job="gshape", coordinator=self.c.addr, rank=r, world_size=2)
            AdamW(n.parameters(), lr=1e-2)
        self.assertIsNone(nets[0].zshard_start())
        with self.assertRaisesRegex(zshard.InvalidArgument,
                                    r"holds w of shape \[4, 6\]; this model's is \[6, 4\]"):
            nets[1].zshard_start()
        for n in nets:
            n.zshard_close()

    def test_frozen_parameters(self):
        """Frozen parameters (requires_grad=False: a wholly frozen unit, a
        frozen weight beside a trained bias, a root bias) are held and
        gathered but never changed: before, they were put in group 0 and
        decayed by its weight decay every step. The trained ones end
        bitwise equal to zshard's AdamW (tests/ref) applied to torch's
        gradients of a plain copy with the same parameters frozen; the
        frozen ones bitwise equal to their initial values; no .grad on
        them. requires_grad changed after the start is refused, and so is
        a rank whose model freezes other parameters than the job's."""
        import zshard
        from zshard.torch import AdamW
        build, data = frozen_net, net_data
        m, plain = build(), build()
        frozen = {n for n, p in plain.named_parameters() if not p.requires_grad}
        initial = {n: p.detach().clone() for n, p in plain.named_parameters()}
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m, job="gfz", coordinator=self.c.addr, rank=0, world_size=1)
        opt = AdamW(m.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
        state = {n: (np.zeros(p.numel(), np.float32), np.zeros(p.numel(), np.float32))
                 for n, p in plain.named_parameters()}
        for t in range(5):
            m(data(t)).backward()
            self.assertTrue(all(p.grad is None for n, p in m.named_parameters() if n in frozen))
            opt.step()
            opt.zero_grad()
            plain.zero_grad(set_to_none=True)
            plain(data(t)).backward()
            with torch.no_grad():
                for n, p in plain.named_parameters():
                    if n in frozen:
                        continue
                    s0, s1 = state[n]
                    pn, s0, s1 = optim_ref.step("adamw", p.numpy().reshape(-1).copy(), s0, s1,
                                                p.grad.numpy().reshape(-1), t + 1, 1e-2, 0.9,
                                                0.95, 1e-8, 0.1, 0.0)
                    state[n] = (s0, s1)
                    p.copy_(torch.from_numpy(pn).view(p.shape))
        self.assertRegex(self.c.ctl("job", "show", "gfz"),
                         r"frozen: 6 tensors, 216 elements .*; [1-9][0-9]* frozen shards: no "
                         r"gradient, no optimizer state")
        # no gradient of a frozen parameter went anywhere: the pushes are
        # the initial upload (every element, f32) and 5 steps of the
        # trained ones; each frozen shard took a one-element step mark
        total = sum(p.numel() for p in plain.parameters())
        trained = sum(p.numel() for n, p in plain.named_parameters() if n not in frozen)
        self.assertEqual(m.zshard_trainer.counters()["bytes_pushed"],
                         4 * total + 5 * 4 * trained)
        sd = m.state_dict()
        for n, p in plain.named_parameters():
            if n in frozen:
                self.assertTrue(torch.equal(sd[n], initial[n]), "frozen %s changed" % n)
            else:
                self.assertFalse(torch.equal(sd[n], initial[n]), "%s did not train" % n)
                self.assertTrue(torch.equal(sd[n], p.detach()),
                                "%s differs from the reference by %g" %
                                (n, (sd[n] - p.detach()).abs().max().item()))
        m.blocks[1].lin1.weight.requires_grad_(True)
        with self.assertRaisesRegex(zshard.FailedPrecondition,
                                    r"requires_grad changed .*blocks\.1\.lin1\.weight"):
            m(data(5))
        m.zshard_close()

        # stage 2 keeps a replica, refreshed in place each step: after the
        # first step's whole gather, the trained elements alone (frozen
        # ones never change); the same bits as at stage 3
        m2 = build()
        for b in m2.blocks:
            fully_shard(b)
        fully_shard(m2, job="gfz-s2", coordinator=self.c.addr, rank=0, world_size=1, stage=2)
        opt2 = AdamW(m2.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
        for t in range(5):
            m2(data(t)).backward()
            opt2.step()
            opt2.zero_grad()
        self.assertEqual(m2.zshard_trainer.counters()["bytes_gathered"],
                         4 * total + 4 * 4 * trained)
        sd2 = m2.state_dict()
        for n in sd:
            self.assertTrue(torch.equal(sd2[n], sd[n]), "stage 2: %s differs" % n)
        m2.zshard_close()

        nets = [build(), build()]
        nets[1].emb.bias.requires_grad_(True)  # this rank trains what the job holds frozen
        for r, n in enumerate(nets):
            for b in n.blocks:
                fully_shard(b)
            fully_shard(n, job="gfz2", coordinator=self.c.addr, rank=r, world_size=2)
            AdamW(n.parameters(), lr=1e-2)
        self.assertIsNone(nets[0].zshard_start())
        with self.assertRaisesRegex(zshard.InvalidArgument,
                                    r"holds emb\.bias frozen; this model trains it"):
            nets[1].zshard_start()
        for n in nets:
            n.zshard_close()

    def test_clip_grad_norm(self):
        """torch.nn.utils.clip_grad_norm_ over a zshard model (it returned
        0.0 and did nothing: no .grad between backward and step): the
        step's global norm as the servers computed it to clip, equal (to
        rounding: another summation order) to torch's over a plain copy's
        gradients, frozen parameters left out; optimizer.last_grad_norm the
        same after the step, and the model's own clip_grad_norm_. Refused,
        saying why: another max_norm than the servers clip at, another
        norm_type, outside a step, a job that does not clip, a mix with
        other parameters. Parameters of no zshard module: torch's own."""
        import zshard
        from zshard.torch import AdamW
        m, plain = frozen_net(), frozen_net()
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m, job="gclip", coordinator=self.c.addr, rank=0, world_size=1)
        opt = AdamW(m.parameters(), lr=1e-3, max_grad_norm=0.05)
        with self.assertRaisesRegex(zshard.FailedPrecondition, "between loss.backward"):
            torch.nn.utils.clip_grad_norm_(m.parameters(), 0.05)
        for t in range(3):
            # the same parameters in a plain module: torch's norm of its gradients
            with torch.no_grad():
                for p, q in zip(plain.parameters(), m.state_dict().values()):
                    p.copy_(q)
            plain.zero_grad(set_to_none=True)
            plain(net_data(t)).backward()
            want = torch.nn.utils.clip_grad_norm_(plain.parameters(), float("inf")).item()
            m(net_data(t)).backward()
            with self.assertRaisesRegex(zshard.FailedPrecondition,
                                        r"clip step %d at max_grad_norm=0.05" % t):
                torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            with self.assertRaisesRegex(zshard.InvalidArgument, "L2 norm"):
                torch.nn.utils.clip_grad_norm_(m.parameters(), 0.05, norm_type=1)
            with self.assertRaisesRegex(zshard.InvalidArgument, "and others"):
                torch.nn.utils.clip_grad_norm_(list(m.parameters()) + [torch.nn.Parameter(
                    torch.ones(2))], 0.05)
            got = torch.nn.utils.clip_grad_norm_(m.parameters(), 0.05)
            self.assertEqual(m.clip_grad_norm_(0.05).item(), got.item())
            self.assertGreater(want, 0.05)  # so the servers clipped
            self.assertAlmostEqual(got.item() / want, 1.0, places=5)
            opt.step()
            self.assertEqual(float(np.float32(opt.last_grad_norm)), got.item())
        m.zshard_close()
        plain2 = torch.nn.Linear(3, 3)
        plain2(torch.ones(1, 3)).sum().backward()
        n = torch.nn.utils.clip_grad_norm_(plain2.parameters(), 1e-3)  # torch's own
        self.assertLessEqual(torch.cat([p.grad.reshape(-1) for p in plain2.parameters()]).norm()
                             .item(), 1e-3 * 1.0001)
        self.assertGreater(n.item(), 1e-3)

        m2 = frozen_net()
        fully_shard(m2, job="gnoclip", coordinator=self.c.addr, rank=0, world_size=1)
        opt2 = AdamW(m2.parameters(), lr=1e-3)
        m2(net_data(0)).backward()
        with self.assertRaisesRegex(zshard.FailedPrecondition, "max_grad_norm=1"):
            torch.nn.utils.clip_grad_norm_(m2.parameters(), 1.0)
        opt2.step()
        with self.assertRaisesRegex(zshard.FailedPrecondition, "max_grad_norm"):
            opt2.last_grad_norm
        m2.zshard_close()

    def test_in_process_bf16(self):
        """A bfloat16 model: the job computes in bf16 (fp32 masters on the
        servers), parameters are bf16 views of libzshard's buffers, it
        trains, and an evaluation forward equals the plain bf16 module
        loaded with zshard_state_dict."""
        a = args()
        m = gpt.build(a).to(torch.bfloat16)
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m, job="gbf", coordinator=self.c.addr, rank=0, world_size=1)
        from zshard.torch import AdamW
        opt = AdamW(m.parameters(), lr=1e-2, betas=(0.9, 0.95))
        x, y = gpt.batch(gpt.load_text(), 6, 0, 0, 4, 16)
        losses = []
        for _ in range(4):
            loss = m(x, y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        self.assertIn("compute bf16", self.c.ctl("job", "show", "gbf"))
        self.assertLess(losses[-1], losses[0])
        self.assertEqual(m.wte.weight.dtype, torch.bfloat16)
        with torch.no_grad():
            got = m(x)
        plain = gpt.build(a).to(torch.bfloat16)
        plain.load_state_dict(m.zshard_state_dict())
        with torch.no_grad():
            self.assertTrue(torch.equal(got, plain(x)))
        m.zshard_close()

    def test_against_torch_adamw(self):
        """torch.optim.AdamW on the same mean gradients. torch updates the
        first moment with lerp (m + (g - m)(1 - b1), one rounding fewer
        and in another order than zshard's m b1 + g (1 - b1), PyTorch 1.13's
        order), so one step from the same state differs by a few float32
        ulps of the parameters: within 4e-8 here (|p| up to about 0.1).
        From the second step on the gradients themselves come from slightly
        different parameters, and Adam's normalization m / sqrt(v) turns
        relative differences of tiny, cancelling gradients (embedding rows
        of rare bytes) into differences of the update's size: measured
        3e-4 of each tensor's largest value after 6 steps, bounded at 1e-3."""
        one = reference(1), reference(1, torch_adamw=True)
        worst = max((one[0][n] - one[1][n]).abs().max().item() for n in one[0])
        self.assertLess(worst, 4e-8, "one step: zshard's AdamW and torch's differ by %g" % worst)
        ours, theirs = reference(STEPS), reference(STEPS, torch_adamw=True)
        rel = max(((ours[n] - theirs[n]).abs().max() / ours[n].abs().max()).item()
                  for n in ours)
        self.assertLess(rel, 1e-3, "%d steps: relative difference %g" % (STEPS, rel))

    def test_restore_continues_bitwise(self):
        """Stopped after step 3, the job restored to its checkpoint of step
        2 (whose blob holds the scheduler), both ranks started again: the
        end equals the run that never stopped."""
        _, logs = self.run_ranks("gr", ["--steps", str(STEPS), "--checkpoint-every", "2",
                                        "--stop-after", "4"])
        self.assertIn("stops after step 3", logs[0])
        ck = self.c.ctl("checkpoint", "list", "gr")
        ids = [ln.split()[0] for ln in ck.splitlines()[1:]
               if ln.split() and ln.split()[1] == "2" and "committed" in ln]
        self.assertTrue(ids, ck)
        self.c.ctl("checkpoint", "restore", "gr", ids[0], "--wait", "60000")
        dump, logs = self.run_ranks("gr", ["--steps", str(STEPS), "--checkpoint-every", "2"])
        self.assertIn("resumes at step 2", logs[0])
        self.assert_bitwise(load_file(dump), reference(STEPS), "restored")

    def test_killed_rank_rejoins(self):
        """SIGKILL of a random rank at a random point (after a random step,
        a random part of a step later); a new process for that rank as
        torchrun would start it: the job rolls back to its last checkpoint,
        the other rank resumes there by itself, and the end is bitwise the
        same. Two trials; ZSHARD_TORCH_SEED repeats a failure's."""
        seed = int(os.environ.get("ZSHARD_TORCH_SEED", str(time.time_ns() % 100000)))
        rng = random.Random(seed)
        steps = 30
        ref = reference(steps, total=steps)
        for trial in range(2):
            victim, at, delay = rng.randrange(2), rng.randrange(3, 25), rng.uniform(0, 0.05)
            what = "seed %d trial %d: rank %d killed %.0f ms after step %d" % (
                seed, trial, victim, delay * 1e3, at)
            job = "gk%d" % trial
            extra = ["--steps", str(steps), "--total", str(steps), "--checkpoint-every", "5",
                     "--print-every", "1"]
            dump = os.path.join(self.c.d, job + ".safetensors")
            logs = [os.path.join(self.c.d, "%s-%d.log" % (job, r)) for r in range(2)]
            ps = [self.spawn(r, job, extra + (["--dump", dump] if r == 0 else []), logs[r])
                  for r in range(2)]
            deadline = time.monotonic() + 120
            while "step %4d" % at not in read(logs[victim]):
                self.assertIsNone(ps[victim].poll(), "%s: %s" % (what, read(logs[victim])))
                self.assertLess(time.monotonic(), deadline, what + ": step never reached")
                time.sleep(0.01)
            time.sleep(delay)
            ps[victim].send_signal(signal.SIGKILL)
            ps[victim].wait()
            again = logs[victim] + ".2"
            ps[victim] = self.spawn(victim, job, extra + (["--dump", dump] if victim == 0
                                                          else []), again)
            for p, log in ((ps[1 - victim], logs[1 - victim]), (ps[victim], again)):
                self.wait_ok(p, log, what)
            # the new process resumes; so does the other rank when that is
            # before the end. (Steps take milliseconds: the victim may have
            # pushed its last step before the kill, and then the job is
            # whole at the end and the other rank finishes without a
            # rollback.)
            m = re.search(r"resumes at step (\d+)", read(again))
            self.assertIsNotNone(m, what + ": " + read(again)[-2000:])
            if int(m.group(1)) < steps:
                self.assertIn("resumes at step", read(logs[1 - victim]), what)
            self.assert_bitwise(load_file(dump), ref, what)

    def test_server_lost_every_rank_resumes(self):
        """A server of an unreplicated job killed mid-run (SIGKILL: its
        memory lost) and started again a second later: the coordinator
        rolls the job back to its last checkpoint, and every rank, whatever
        it was waiting on then (a gather, a push, the boundary, a
        checkpoint's arming), gets zshard.Resume in its own process,
        resumes there and finishes, bitwise the run without the kill. (A
        rank died with zshard.errors.Unavailable before: "connection ...
        lost", or "checkpoint N: cannot reach ...".)"""
        steps = 30
        ref = reference(steps, total=steps)
        c = Cluster(BIN)
        try:
            env = dict(os.environ, WORLD_SIZE="2", ZSHARD_COORDINATOR=c.addr,
                       OMP_NUM_THREADS="1")
            env.pop("LD_LIBRARY_PATH", None)
            dump = os.path.join(c.d, "gs.safetensors")
            logs = [os.path.join(c.d, "gs-%d.log" % r) for r in range(2)]
            ps = []
            for r in range(2):
                with open(logs[r], "w") as out:
                    ps.append(subprocess.Popen(
                        [sys.executable, os.path.join(ROOT, "examples", "gpt.py"), "--job", "gs"]
                        + MODEL + ["--steps", str(steps), "--total", str(steps),
                                   "--checkpoint-every", "5", "--print-every", "1"]
                        + (["--dump", dump] if r == 0 else []),
                        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                        env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), preexec_fn=die_with_us))
            self.procs.extend(ps)
            deadline = time.monotonic() + 120
            while "step   12" not in read(logs[0]):
                self.assertIsNone(ps[0].poll(), read(logs[0])[-2000:])
                self.assertLess(time.monotonic(), deadline, "step 12 never reached")
                time.sleep(0.01)
            c.kill_server(1)
            time.sleep(1)
            c.start_server(1)
            for p, log in zip(ps, logs):
                self.wait_ok(p, log, "a rank did not survive the server's loss")
                self.assertRegex(read(log), r"resumes at step (5|10)\b", log)
            self.assertIn("rolling back", read(os.path.join(c.d, "coordinator.log")))
            self.assert_bitwise(load_file(dump), ref, "a server lost at step 12")
        finally:
            c.close()

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("test_torch: stopped by SIGTERM"))
    torch.set_num_threads(1)
    r = unittest.main(exit=False, verbosity=2).result
    n = r.testsRun - len(r.skipped)
    bad = len(r.failures) + len(r.errors)
    print("check: torch: %d tests passed" % (n - bad) if not bad else
          "check: torch: %d of %d tests failed" % (bad, n))
    sys.exit(1 if bad else 0)
