#!/usr/bin/env python3
"""test_torch_loop.py - what a PyTorch user's loop leans on around
zshard.torch's training (python/zshard/torch), against a real cluster:
torch's optimizer signatures and a torch optimizer handed over, how ranks
meet (rank 0 late, an explicit world size), and a model's persistent
buffers through checkpoints, resumes and exports. The training itself, bit
for bit, is test_torch.py's.

    ZSHARD_BIN=build/bin build/torch-venv/bin/python tests/python/test_torch_loop.py
"""
import os
import signal
import sys
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_torch import BIN, _Net, net_data  # noqa: E402
from cluster import Cluster  # noqa: E402
from zshard.torch import fully_shard  # noqa: E402


class TestTorchLoop(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(BIN)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def test_torch_optimizer_signatures(self):
        """zshard.torch.AdamW and SGD take torch's signatures: performance
        flags (foreach, fused, capturable) accepted and ignored, semantics
        the servers do not implement (amsgrad, maximize, nesterov,
        dampening; in a param group too) refused by name before anything
        is attached. from_optimizer takes over a torch.optim.AdamW made the
        usual way (two groups) and trains bitwise equal to the same zshard
        AdamW made directly; an Adam without decay is AdamW's update; a
        stepped optimizer, an Adam with L2 decay and an Adagrad are
        refused, saying why."""
        import zshard
        from zshard.torch import Adam, AdamW, SGD, from_optimizer

        def net(job):
            torch.manual_seed(5)
            m = _Net()
            for b in m.blocks:
                fully_shard(b)
            fully_shard(m, job=job, coordinator=self.c.addr, rank=0, world_size=1)
            decay = [p for n, p in m.named_parameters() if n.endswith("weight")]
            rest = [p for n, p in m.named_parameters() if not n.endswith("weight")]
            return m, [{"params": decay}, {"params": rest, "weight_decay": 0.0}]

        ends, hps = [], []
        for k in range(3):
            m, groups = net("gopt%d" % k)
            if k == 0:
                opt = AdamW(groups, lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1, foreach=True,
                            fused=False, capturable=False)
            elif k == 1:
                opt = from_optimizer(torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.95),
                                                       weight_decay=0.1))
            else:  # Adam, no decay anywhere: AdamW's update without decay
                groups[0]["weight_decay"] = 0.0
                opt = from_optimizer(torch.optim.Adam(groups, lr=1e-2, betas=(0.9, 0.95)))
            self.assertIsInstance(opt, Adam if k == 2 else AdamW)
            hps.append(opt.zshard_hparams())
            for t in range(3):
                m(net_data(t)).backward()
                opt.step()
                opt.zero_grad()
            ends.append(m.state_dict())
            m.zshard_close()
        self.assertEqual(hps[0], hps[1])
        self.assertEqual([g["weight_decay"] for g in hps[2]], [0.0, 0.0])
        for n, v in ends[0].items():
            self.assertTrue(torch.equal(v, ends[1][n]), "%s differs when handed over" % n)
        self.assertTrue(any(not torch.equal(v, ends[2][n]) for n, v in ends[0].items()))

        m, groups = net("gopt3")
        ps = list(m.parameters())
        for make, why in [(lambda: AdamW(ps, amsgrad=True), r"AdamW: amsgrad=True is not"),
                          (lambda: AdamW(ps, maximize=True), r"maximize=True"),
                          (lambda: SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
                           r"SGD: nesterov=True"),
                          (lambda: SGD(ps, lr=0.1, momentum=0.9, dampening=0.1),
                           r"dampening=0.1"),
                          (lambda: AdamW([{"params": ps, "amsgrad": True}]),
                           r"AdamW param group: amsgrad=True"),
                          (lambda: from_optimizer(torch.optim.Adagrad(
                              ps, initial_accumulator_value=0.1)),
                           r"initial_accumulator_value=0.1 is not"),
                          (lambda: Adam(ps, amsgrad=True), r"Adam: amsgrad=True"),
                          (lambda: Adam([{"params": ps[:1]}, {"params": ps[1:],
                                         "decoupled_weight_decay": True}]),
                           r"decoupled_weight_decay differs"),
                          (lambda: from_optimizer(torch.optim.RMSprop(ps)),
                           r"RMSprop is not on zshard's servers")]:
            with self.assertRaisesRegex(zshard.InvalidArgument, why):
                make()
        stepped = torch.optim.SGD(ps, lr=0.1)
        stepped.state[ps[0]]["momentum_buffer"] = torch.zeros_like(ps[0])
        with self.assertRaisesRegex(zshard.FailedPrecondition, "SGD has taken steps"):
            from_optimizer(stepped)
        opt = from_optimizer(torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=True))
        self.assertIsInstance(opt, SGD)
        m(net_data(0)).backward()
        opt.step()
        m.zshard_close()

    def test_adam_and_adagrad(self):
        """torch.optim.Adam (weight decay as L2 on the gradient) and
        Adagrad (lr_decay, L2) on the servers, handed over as torch
        optimizers in two groups and made directly: 5 steps end within
        1e-5 (relative to each tensor's largest value) of torch's own on
        the same gradients, and bitwise equal to each other; Adam with
        decoupled_weight_decay is AdamW's update (the job's optimizer is
        AdamW). The job shows its kind."""
        from zshard.torch import Adagrad, Adam, AdamW, from_optimizer

        def groups(m):
            decay = [p for n, p in m.named_parameters() if n.endswith("weight")]
            rest = [p for n, p in m.named_parameters() if not n.endswith("weight")]
            return [{"params": decay}, {"params": rest, "weight_decay": 0.0}]

        def torch_run(make):
            torch.manual_seed(5)
            m = _Net()
            opt = make(groups(m))
            for t in range(5):
                m(net_data(t)).backward()
                opt.step()
                opt.zero_grad()
            return m.state_dict()

        def zs_run(job, make):
            torch.manual_seed(5)
            m = _Net()
            for b in m.blocks:
                fully_shard(b)
            fully_shard(m, job=job, coordinator=self.c.addr, rank=0, world_size=1)
            opt = make(groups(m))
            for t in range(5):
                m(net_data(t)).backward()
                opt.step()
                opt.zero_grad()
            sd = m.state_dict()
            m.zshard_close()
            return opt, sd

        cases = [("adam", lambda g: torch.optim.Adam(g, lr=1e-2, betas=(0.9, 0.95),
                                                     weight_decay=0.05),
                  lambda g: Adam(g, lr=1e-2, betas=(0.9, 0.95), weight_decay=0.05, fused=True)),
                 ("adagrad", lambda g: torch.optim.Adagrad(g, lr=5e-2, lr_decay=0.1,
                                                           weight_decay=0.01),
                  lambda g: Adagrad(g, lr=5e-2, lr_decay=0.1, weight_decay=0.01,
                                    foreach=True))]
        worst = {}
        for kind, make_torch, make_zs in cases:
            ref = torch_run(make_torch)
            opt, got = zs_run("o" + kind, lambda g: from_optimizer(make_torch(g)))
            self.assertEqual(opt._KIND, kind)
            _, direct = zs_run("d" + kind, make_zs)
            for n, p in ref.items():
                self.assertTrue(torch.equal(got[n], direct[n]), "%s: %s" % (kind, n))
                rel = ((got[n] - p).abs().max() / p.abs().max()).item()
                worst[kind] = max(worst.get(kind, 0.0), rel)
                self.assertLess(rel, 1e-5, "%s: %s differs from torch by %.2e" % (kind, n, rel))
            out = self.c.ctl("job", "show", "o" + kind)
            self.assertIn("optimizer %s" % kind, out)
        print("test_adam_and_adagrad: largest difference from torch (relative): %s" %
              ", ".join("%s %.1e" % kv for kv in sorted(worst.items())), flush=True)
        # Adam with its decay decoupled: AdamW's update, bitwise
        _, a = zs_run("adw0", lambda g: AdamW(g, lr=1e-2, weight_decay=0.1))
        opt, b = zs_run("adw1", lambda g: Adam(g, lr=1e-2, weight_decay=0.1,
                                               decoupled_weight_decay=True))
        self.assertEqual(opt._KIND, "adamw")
        for n in a:
            self.assertTrue(torch.equal(a[n], b[n]), n)

    def test_compiled_units(self):
        """torch.compile of each unit (module.compile(), inductor, as FSDP2
        users do): the gathered parameters go in as the compiled graph's
        inputs every step, nothing recompiles per step, and 4 steps end
        within 1e-6 (relative) of the same units run eagerly (inductor fuses
        the arithmetic: not bitwise)."""
        from zshard.torch import AdamW

        def run(job, compiled):
            torch.manual_seed(5)
            m = _Net()
            for b in m.blocks:
                fully_shard(b)
                if compiled:
                    b.compile()
            fully_shard(m, job=job, coordinator=self.c.addr, rank=0, world_size=1)
            opt = AdamW(m.parameters(), lr=1e-2)
            from torch._dynamo.utils import counters
            for t in range(4):
                if t == 2:  # compiled by the first steps, not again after
                    graphs = counters["stats"]["unique_graphs"]
                m(net_data(t)).backward()
                opt.step()
                opt.zero_grad()
            self.assertEqual(counters["stats"]["unique_graphs"], graphs, "recompiled")
            self.assertEqual(graphs > 0, compiled)
            sd = m.state_dict()
            m.zshard_close()
            return sd

        eager, compiled = run("eager", False), run("compiled", True)
        worst = 0.0
        for n, e in eager.items():
            rel = ((compiled[n] - e).abs().max() / e.abs().max()).item()
            worst = max(worst, rel)
            self.assertLess(rel, 1e-6, n)
        print("test_compiled_units: compiled units within %.1e of eager" % worst, flush=True)

    def test_root_used_after_its_units(self):
        """A root whose own parameters all come after its units (a head
        over fully_shard'ed blocks, as a user's first Sequential has it):
        the root's gradient is the backward pass's first, pushed before the
        units' are gathered, and the window must not ask for the root's
        parameters of a step its push already ended (it did: "unit 'root'
        is at step 1: step 0 is gone"). Stages 1-3 with prefetch 1 and 2
        end bitwise equal, and within 4e-4 of torch.optim.AdamW."""
        from zshard.torch import AdamW

        def build():
            torch.manual_seed(3)
            return torch.nn.Sequential(
                torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU()),
                torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()),
                torch.nn.Linear(16, 1))

        def data(step):
            g = torch.Generator().manual_seed(step)
            x = torch.randn(6, 8, generator=g)
            return x, x.sum(dim=1, keepdim=True).cos()

        ends = []
        for k, (stage, prefetch) in enumerate([(3, 1), (3, 2), (2, 1), (1, 1)]):
            m = build()
            for b in m[:2]:
                fully_shard(b)
            fully_shard(m, job="headlast%d" % k, coordinator=self.c.addr, rank=0,
                        world_size=1, stage=stage, prefetch=prefetch)
            opt = AdamW(m.parameters(), lr=1e-2, weight_decay=0.01)
            for step in range(4):
                x, y = data(step)
                torch.nn.functional.mse_loss(m(x), y).backward()
                opt.step()
                opt.zero_grad()
            ends.append(m.state_dict())
            m.zshard_close()
        for k, e in enumerate(ends[1:], 1):
            for n in ends[0]:
                self.assertTrue(torch.equal(ends[0][n], e[n]), "%s differs in run %d" % (n, k))
        ref = build()
        ropt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.01)
        for step in range(4):
            x, y = data(step)
            torch.nn.functional.mse_loss(ref(x), y).backward()
            ropt.step()
            ropt.zero_grad()
        for n, p in ref.state_dict().items():
            rel = ((ends[0][n] - p).abs().max() / p.abs().max()).item()
            self.assertLess(rel, 4e-4, n)

    def test_join_waits_and_explicit_world_size(self):
        """An explicit world_size beats a leftover WORLD_SIZE (the join
        checked the environment's and refused); a rank other than 0 waits
        for rank 0 to create the job as long as join_timeout_s says (900 s
        by default, torchrun's rendezvous; it gave up after a fixed 10 s):
        rank 1 started 11 s before rank 0 joins, and one whose job never
        comes fails naming the bound."""
        import threading
        import zshard
        from zshard.torch import AdamW

        def net(job, rank, world, **kw):
            torch.manual_seed(5)
            m = _Net()
            fully_shard(m, job=job, coordinator=self.c.addr, rank=rank, world_size=world, **kw)
            AdamW(m.parameters(), lr=1e-2)
            return m

        old = os.environ.get("WORLD_SIZE")
        os.environ["WORLD_SIZE"] = "7"
        try:
            m = net("gws", 0, 1)
            self.assertIsNone(m.zshard_start())
            m.zshard_close()
        finally:
            if old is None:
                del os.environ["WORLD_SIZE"]
            else:
                os.environ["WORLD_SIZE"] = old
        m = net("gnobody", 1, 2, join_timeout_s=0.5)
        with self.assertRaisesRegex(zshard.NotFound, r"within 0\.5 s \(join_timeout_s\)"):
            m.zshard_start()
        late = [net("glate", 1, 2), None]
        th = threading.Thread(target=lambda: late.__setitem__(1, late[0].zshard_start() or "ok"))
        th.start()
        th.join(11.0)
        self.assertTrue(th.is_alive(), "rank 1 did not wait for rank 0: %r" % (late[1],))
        first = net("glate", 0, 2)
        self.assertIsNone(first.zshard_start())
        th.join(60.0)
        self.assertEqual(late[1], "ok")
        first.zshard_close()
        late[0].zshard_close()

    def test_resize_calls_on_world(self):
        """zshard.resize_job mid-run (2 ranks to 1): each rank's on_world is
        called as the step before the change ends (by optimizer.step(),
        before the caller draws the step's batch) with its rank, the new
        world size and that step, and zshard_world says the same; rank 1,
        outside the new world, gets zshard.Canceled from its next forward
        and leaves; rank 0 trains on alone."""
        import threading
        import time
        import zshard
        from zshard.torch import AdamW

        calls, out, gate = {0: [], 1: []}, {}, threading.Event()

        def run(rank):
            try:
                torch.manual_seed(5)
                m = _Net()
                fully_shard(m, job="tresize", coordinator=self.c.addr, rank=rank, world_size=2,
                            on_world=lambda r, w, s: calls[rank].append((r, w, s, m.zshard_world)))
                opt = AdamW(m.parameters(), lr=1e-2)
                m.zshard_start()
                for step in range(8):
                    if step == 2:
                        gate.wait(60)
                    try:
                        loss = m(net_data(2 * step + rank))
                    except zshard.Canceled:
                        out[rank] = ("left", step)
                        m.zshard_close()
                        return
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
                out[rank] = ("done", m.zshard_world)
                m.zshard_close()
            except Exception as e:  # the test's thread reports it
                out[rank] = ("error", repr(e))

        th = [threading.Thread(target=run, args=(r,)) for r in range(2)]
        for x in th:
            x.start()
        at = None
        for _ in range(600):  # until the job exists and a step report is in
            try:
                at = zshard.resize_job("tresize", 1, coordinator=self.c.addr)
                break
            except (zshard.NotFound, zshard.FailedPrecondition):
                time.sleep(0.05)
        gate.set()
        for x in th:
            x.join(120)
        self.assertIsNotNone(at, "the resize was never taken: %r" % (out,))
        self.assertEqual(out.get(1), ("left", at), out)
        self.assertEqual(out.get(0), ("done", (0, 1)), out)
        self.assertEqual(calls[0], [(0, 1, at, (0, 1))])
        self.assertEqual(calls[1], [(1, 1, at, (1, 1))])

    def test_buffers_checkpointed_and_exported(self):
        """A model's persistent buffers (a BatchNorm's running statistics,
        its int64 batch count) live in the trainers: zshard_checkpoint
        records each rank's with its blob, zshardctl export --bare-names
        writes rank 0's of the exported step (the file loads with
        strict=True: before, they were missing), an export of a step no
        checkpoint holds says so and leaves them out, and a restore puts
        them back into a new process's model (before, it kept its own
        initial ones) and gives back the caller's blob as it was."""
        import zshard
        from safetensors.torch import load_file
        from zshard.torch import AdamW
        from zshard.torch.blob import persistent_buffers

        class BNNet(_Net):
            def __init__(self):
                super().__init__()
                self.bn = torch.nn.BatchNorm1d(8)

            def forward(self, x):
                h = self.bn(self.emb(x))
                for b in self.blocks:
                    h = b(h)
                return self.out(h).pow(2).mean()

        def net():
            torch.manual_seed(5)
            m = BNNet()
            for b in m.blocks:
                fully_shard(b)
            # (resume=True: m3 below continues the run every rank left)
            fully_shard(m, job="gbn", coordinator=self.c.addr, rank=0, world_size=1,
                        resume=True)
            return m, AdamW(m.parameters(), lr=1e-2)

        m, opt = net()
        for t in range(3):
            m(net_data(t)).backward()
            opt.step()
            opt.zero_grad()
        ident = m.zshard_checkpoint(b"user-blob")
        at3 = {k: v.clone() for k, v in persistent_buffers(m).items()}
        self.assertEqual(sorted(at3), ["bn.num_batches_tracked", "bn.running_mean",
                                       "bn.running_var"])
        self.assertEqual(at3["bn.num_batches_tracked"].item(), 3)
        sd = m.state_dict()
        out = os.path.join(self.c.d, "gbn.safetensors")
        said = self.c.ctl("export", "gbn", "--out", out, "--bare-names")
        self.assertIn("(buffers: 3 from checkpoint %d)" % ident, said)
        plain = BNNet()
        plain.load_state_dict(load_file(out), strict=True)
        for k, v in plain.state_dict().items():
            self.assertTrue(torch.equal(v, sd[k]), "%s differs from the model's" % k)
        m(net_data(3)).backward()  # step 3: buffers of step 4 that no checkpoint holds
        opt.step()
        opt.zero_grad()
        said = self.c.ctl("export", "gbn", "--out", out, "--bare-names")
        self.assertIn("(buffers: none)", said)
        self.assertNotIn("bn.running_mean", load_file(out))
        m.zshard_close()
        # every rank left cleanly at step 4: the servers' state, no buffers
        m3, _ = net()
        with self.assertWarnsRegex(UserWarning, "holds no record of the model's 3 persistent"):
            self.assertEqual(m3.zshard_start(), (4, b""))
        m3.zshard_close()

        self.c.ctl("checkpoint", "restore", "gbn", str(ident))
        m2, _ = net()
        self.assertFalse(torch.equal(persistent_buffers(m2)["bn.running_mean"],
                                     at3["bn.running_mean"]))
        self.assertEqual(m2.zshard_start(), (3, b"user-blob"))
        for k, v in persistent_buffers(m2).items():
            self.assertTrue(torch.equal(v, at3[k]), "%s was not restored" % k)
        m2.zshard_close()

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("test_torch_loop: stopped by SIGTERM"))
    torch.set_num_threads(1)
    r = unittest.main(exit=False, verbosity=2).result
    n = r.testsRun - len(r.skipped)
    bad = len(r.failures) + len(r.errors)
    print("check: torch loop: %d tests passed" % (n - bad) if not bad else
          "check: torch loop: %d of %d tests failed" % (bad, n))
    sys.exit(1 if bad else 0)
