#!/usr/bin/env python3
"""test_habits.py - what a PyTorch user does in the first hour holds, against
a real cluster (python/zshard/torch):

- gradient clipping however it was imported (torch.nn.utils.clip_grad_norm_
  bound before zshard.torch was, through torch.nn.utils.clip_grad, and
  get_total_norm + clip_grads_with_norm_) returns the true global norm
  (a plain torch model's on the same data) and clips (the parameters
  follow the clipped plain model); .grad after backward is never a silent
  None: it refuses, naming what to call; a job that does not clip says how
  to make it, and getattr(opt, "last_grad_norm", None) is None;
- running a script again never continues the old job silently: refused by
  default (naming the step and the choices), continued with resume=True,
  started anew with resume="fresh" (bit for bit the first run's result),
  and a process killed mid-step is replaced by the next start, which
  rejoins by itself;
- fully_shard takes what FSDP2 takes: a root (or container) with no
  parameters of its own;
- messages name the cause and the remedy: a spec's ranges, the prefix said
  once, an import's two shapes and its tensor by the model's name, an
  export of a model without buffers says nothing of them, the CLI's help
  points at no source file.

    ZSHARD_BIN=build/bin build/torch-venv/bin/python tests/python/test_habits.py
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from test_torch import BIN, _Net, net_data  # noqa: E402
from cluster import Cluster  # noqa: E402
import zshard  # noqa: E402
from zshard.torch import AdamW, SGD, fully_shard  # noqa: E402

# a script as a user writes it (its own interpreter: the import order is
# its own); NET is test_torch's _Net, inlined
NET = '''
import torch
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.lin2 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
    def forward(self, h):
        return h + self.lin2(torch.tanh(self.lin1(h)))
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.out = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
    def forward(self, x):
        h = self.emb(x)
        for b in self.blocks:
            h = b(h)
        return self.out(h).pow(2).mean()
def data(t):
    return torch.randn(6, 4, generator=torch.Generator().manual_seed(100 + t))
'''

CLIP = NET + '''
import copy, sys
from torch.nn.utils import clip_grad_norm_ as early          # bound before zshard.torch
from torch.nn.utils import get_total_norm, clip_grads_with_norm_
import torch.nn.utils.clip_grad as cg
import zshard, zshard.torch as zt
torch.manual_seed(5)
m = Net()
plain = copy.deepcopy(m)
for b in m.blocks:
    zt.fully_shard(b)
zt.fully_shard(m, job="clipjob", coordinator=sys.argv[1], rank=0, world_size=1)
opt = zt.AdamW(m.parameters(), lr=1e-2, max_grad_norm=0.05)
popt = torch.optim.AdamW(plain.parameters(), lr=1e-2)
for t in range(3):
    m(data(t)).backward()
    plain(data(t)).backward()
    want = float(early(plain.parameters(), 0.05))   # torch's own, on the plain model
    p0 = next(m.parameters())
    # (at stage 3 the parameter itself is empty between its uses)
    assert p0.grad is not None and p0.grad.shape == p0.shape, "no .grad after backward"
    got = [float(early(m.parameters(), 0.05)),
           float(torch.nn.utils.clip_grad_norm_(m.parameters(), 0.05)),
           float(cg.clip_grad_norm_(m.parameters(), 0.05)),
           float(get_total_norm([p.grad for p in m.parameters() if p.grad is not None]))]
    clip_grads_with_norm_(m.parameters(), 0.05, torch.tensor(got[3]))
    assert len(set(got)) == 1, "the ways differ: %s" % got
    assert abs(got[0] - want) <= 1e-5 * want and want > 0.05, (got, want)
    for bad, why in [(lambda: p0.grad.sum(), "on zshard's servers"),
                     (lambda: early(m.parameters(), 1.0), "max_grad_norm=0.05"),
                     (lambda: early(list(m.parameters())[:2], 0.05), "pass model.parameters"),
                     (lambda: torch.nn.utils.clip_grad_value_(m.parameters(), 1.0),
                      "on zshard's servers"),
                     (lambda: get_total_norm([p0.grad, torch.ones(2)]), "other tensors")]:
        try:
            bad()
        except zshard.ZshardError as e:
            assert why in str(e), "%r does not say %r" % (str(e), why)
        else:
            raise AssertionError("not refused: the one that should say %r" % why)
    opt.step()
    popt.step()
    assert opt.last_grad_norm == got[0] or abs(opt.last_grad_norm - got[0]) < 1e-6 * got[0]
    opt.zero_grad()
    popt.zero_grad()
    assert p0.grad is None
sd = m.state_dict()
worst = max(float(((sd[n] - p).abs().max() / p.abs().max())) for n, p in plain.state_dict().items())
assert worst < 5e-4, "the clipped step differs from torch's by %g" % worst
print("clip: norms %s; each way equal to torch's on the plain model; parameters within %.1e"
      % (want, worst))
m.zshard_close()
'''

RUN = NET + '''
import os, sys, time
import zshard.torch as zt
resume = {"auto": "auto", "true": True, "false": False, "fresh": "fresh"}[sys.argv[2]]
torch.manual_seed(5)
m = Net()
for b in m.blocks:
    zt.fully_shard(b)
zt.fully_shard(m, job="again", coordinator=sys.argv[1], rank=0, world_size=1, resume=resume)
opt = zt.AdamW(m.parameters(), lr=1e-2)
start = m.zshard_start()
first = 0 if start is None else start[0]
for t in range(first, int(os.environ.get("END", first + 3))):
    if t == int(os.environ.get("STALL_AT", "-1")):
        print("stalled in step %d" % t, flush=True)
        m.emb.register_forward_hook(lambda *a: time.sleep(3600))
    m(data(t)).backward()
    opt.step()
    opt.zero_grad()
sd = m.state_dict()
print("ended at step %d: %s" % (m.zshard_step, float(sum(p.double().sum() for p in sd.values()))))
m.zshard_close()
'''


class TestHabits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # a lost trainer is taken for gone (its connections ended) well
        # before its lease lapses: its replacement redoes its step
        cls.c = Cluster(BIN, coord_args=("--trainer-lease-ms", "10000",
                                         "--trainer-gone-ms", "1500"))
        cls.env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        cls.env.pop("LD_LIBRARY_PATH", None)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def script(self, name, text):
        path = os.path.join(self.c.d, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def run_script(self, path, *argv, env=None, timeout=180):
        return subprocess.run([sys.executable, path, self.c.addr] + list(argv),
                              env=dict(self.env, **(env or {})), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout)

    def test_clipping_however_imported(self):
        """clip_grad_norm_ bound before zshard.torch, the module's own
        names, get_total_norm + clip_grads_with_norm_: the true global norm
        (torch's on a plain copy given the same data), and the parameters
        follow torch's clipped AdamW; .grad refuses to be read as values;
        what cannot be done is refused, naming it. (Bound before, torch's
        function returned 0.0 and clipped nothing.)"""
        r = self.run_script(self.script("clip.py", CLIP))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        print("test_habits: %s" % r.stdout.strip().splitlines()[-1], flush=True)

    def test_no_norm_without_clipping(self):
        """A job made without max_grad_norm computes no norm: torch's
        clip_grad_norm_ says how to turn it on (for a torch optimizer
        handed over, too), and last_grad_norm is absent as an attribute."""
        from zshard.torch import from_optimizer
        for k, make in enumerate([lambda ps: AdamW(ps, lr=1e-2),
                                  lambda ps: from_optimizer(torch.optim.AdamW(ps, lr=1e-2))]):
            torch.manual_seed(5)
            m = _Net()
            for b in m.blocks:
                fully_shard(b)
            fully_shard(m, job="noclip%d" % k, coordinator=self.c.addr, rank=0, world_size=1)
            opt = make(m.parameters())
            self.assertIsNone(getattr(opt, "last_grad_norm", None))
            m(net_data(0)).backward()
            with self.assertRaisesRegex(zshard.FailedPrecondition,
                                        r"max_grad_norm=1.*from_optimizer\(opt, max_grad_norm=1\)"):
                torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            self.assertIsNone(getattr(opt, "last_grad_norm", None))
            with self.assertRaises(zshard.FailedPrecondition):
                opt.last_grad_norm
            m.zshard_close()

    def test_run_again(self):
        """The same script run again: refused by default, naming the step
        and the choices, changing nothing; resume=True continues at step 3;
        resume="fresh" starts anew, ending bit for bit where the first run
        did; a process killed mid-step (of a run continuing a stopped job)
        is replaced by the next start (default resume), which rejoins by
        itself, redoes the step (over shm: its pushes said so only on tcp
        before) and ends bit for bit where the run that was not killed
        did."""
        path = self.script("again.py", RUN)
        first = self.run_script(path, "auto")
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertIn("ended at step 3", first.stdout)
        for choice in ("auto", "false"):
            r = self.run_script(path, choice)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertRegex(r.stderr, r"job 'again' has state: it trained to step 3 in an "
                             r"earlier run.*resume=True\) continues it from step 3.*'fresh'")
        r = self.run_script(path, "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("job 'again' continues at step 3", r.stderr)
        self.assertIn("ended at step 6", r.stdout)
        whole = r.stdout.split("ended at")[1]
        r = self.run_script(path, "fresh")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("resume='fresh' deletes it", r.stderr)
        self.assertEqual(r.stdout.split("ended at")[1], first.stdout.split("ended at")[1],
                         "a fresh start should end where the first run did")
        # continued from 3 and killed in the middle of its step 4 (its
        # forward stalls there)
        p = subprocess.Popen([sys.executable, path, self.c.addr, "true"],
                             env=dict(self.env, STALL_AT="4", END="6"), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        try:
            line = p.stdout.readline()
            self.assertIn("stalled in step 4", line)
            os.kill(p.pid, signal.SIGKILL)
        finally:
            p.wait()
            p.stdout.close()
        r = self.run_script(path, "auto", env={"END": "6"})
        self.assertEqual(r.returncode, 0, r.stderr)
        # step 4 (the coordinator had heard it begin), or 3 (the kill came
        # first: its pushes were all in, and are not counted again)
        self.assertRegex(r.stderr, "rank 0 of job 'again' replaces its lost process: it computes "
                         "step [34] again")
        self.assertEqual(r.stdout.split("ended at")[1], whole,
                         "the replaced run should end bit for bit where the whole one did")

    def test_root_without_parameters(self):
        """FSDP2 takes a root whose parameters all belong to units, and a
        container of units with none of its own: so does fully_shard. Each
        trains as the plain model does (SGD, one rank)."""
        for k, make in enumerate([
                lambda: torch.nn.Sequential(torch.nn.Linear(4, 4)),
                lambda: torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(4, 8),
                                                                torch.nn.Tanh(),
                                                                torch.nn.Linear(8, 4)),
                                            torch.nn.Linear(4, 1))]):
            torch.manual_seed(3)
            m = make()
            plain = make()
            plain.load_state_dict(m.state_dict())
            units = [m[0]] if k == 0 else [m[0][0], m[0][2], m[0]]
            for u in units:
                fully_shard(u)
            fully_shard(m, job="bare%d" % k, coordinator=self.c.addr, rank=0, world_size=1)
            opt = SGD(m.parameters(), lr=0.1)
            popt = torch.optim.SGD(plain.parameters(), lr=0.1)
            for t in range(3):
                for net, o in ((m, opt), (plain, popt)):
                    net(net_data(t)).pow(2).mean().backward()
                    o.step()
                    o.zero_grad()
            got = m.state_dict()
            for n, v in plain.state_dict().items():
                self.assertTrue(torch.allclose(got[n], v, rtol=1e-6, atol=1e-7), n)
            if k == 0:  # no unit of the root's
                self.assertNotIn("root", self.c.ctl("placement", "bare%d" % k))
            m.zshard_close()

    def test_messages(self):
        """Each names the cause and the remedy: a spec's stage out of its
        range says the range taken ([1, 3], not [0, 3]) and "job spec" once;
        an import of the wrong shape says both shapes, of a missing tensor
        its name in the model; an export of a model without buffers says
        nothing of buffers; zshardctl's help points at no source file."""
        spec = {"name": "badstage", "stage": 0, "world_size": 1,
                "optimizer": {"kind": "sgd", "lr": 0.1},
                "units": [{"name": "u", "tensors": [{"name": "w", "shape": [4]}]}]}
        with self.assertRaises(zshard.InvalidArgument) as e:
            zshard.create_job(spec, coordinator=self.c.addr)
        self.assertIn("'stage' must be an integer in [1, 3]", str(e.exception))
        self.assertEqual(str(e.exception).count("job spec"), 1, str(e.exception))

        torch.manual_seed(5)
        m = _Net()
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m, job="msgs", coordinator=self.c.addr, rank=0, world_size=1)
        opt = AdamW(m.parameters(), lr=1e-2)
        m(net_data(0)).backward()
        opt.step()
        opt.zero_grad()
        out = os.path.join(self.c.d, "msgs.safetensors")
        r = subprocess.run([os.path.join(BIN, "zshardctl"), "--coordinator", self.c.addr,
                            "export", "msgs", "--out", out, "--bare-names"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("buffers", r.stderr)  # it has none: nothing to say
        spec = m._zshard.spec()
        m.zshard_close()
        from safetensors.torch import load_file, save_file
        good = load_file(out)
        for job, edit, want in [
                ("msgs-shape", lambda t: t.update({"emb.weight": t["emb.weight"].t().contiguous()}),
                 "tensor 'emb.weight' in %s has shape [4, 8]; the job's is [8, 4]"),
                ("msgs-gone", lambda t: t.pop("emb.weight"),
                 "%s has no tensor 'emb.weight' (the job's layout needs it")]:
            t = dict(good)
            edit(t)
            path = os.path.join(self.c.d, job + ".safetensors")
            save_file(t, path)
            spec["name"] = job
            zshard.create_job(spec, coordinator=self.c.addr)
            r = subprocess.run([os.path.join(BIN, "zshardctl"), "--coordinator", self.c.addr,
                                "import", job, path], capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn(want % path, r.stderr)
            self.assertNotIn("root.", r.stderr)
        r = subprocess.run([os.path.join(BIN, "zshardctl"), "job", "--help"],
                           capture_output=True, text=True)
        self.assertIn("man zshardctl", r.stdout + r.stderr)
        self.assertNotRegex(r.stdout + r.stderr, r"\w+/\w+\.h\b")


if __name__ == "__main__":
    r = unittest.main(exit=False, verbosity=2).result
    bad = len(r.failures) + len(r.errors)
    print("check: habits: %s" % ("%d of %d tests failed" % (bad, r.testsRun) if bad
                                  else "%d tests passed" % r.testsRun))
    sys.exit(1 if bad else 0)
