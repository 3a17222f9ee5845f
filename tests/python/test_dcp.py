#!/usr/bin/env python3
"""test_dcp.py - checkpoints that travel between zshard and PyTorch FSDP2
through torch.distributed.checkpoint (python/zshard/dcp.py), against a real
cluster and FSDP2 itself (one rank, gloo, in this process):

- a zshard job trained 3 steps, exported (python -m zshard.dcp export),
  loads into an FSDP2 model and its torch.optim.AdamW with dcp.load and
  set_state_dict: the parameters and both moments equal the servers' bit
  for bit, the step is 3; one more step on both sides ends within 1e-5
  (relative) of each other: the optimizer state travelled (a fresh one
  would differ by about lr);
- an FSDP2 model's DCP checkpoint loads into a zshard job's module before
  its start (zshard.torch.load_dcp): the job's parameters are FSDP2's;
  with optimizer=, FSDP2's AdamW state too (the servers' moments equal
  FSDP2's bit for bit, the step is 4), and one more step on both ends
  within 1e-5 (relative), while a job that loaded the parameters alone
  ends far off (a fresh optimizer's step); python -m zshard.dcp import
  puts the same state into a job created by its spec with steps_taken 4,
  and refuses a job created without it.

    ZSHARD_BIN=build/bin build/torch-venv/bin/python tests/python/test_dcp.py
"""
import os
import subprocess
import sys
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_torch import BIN, _Net, net_data  # noqa: E402
from cluster import Cluster  # noqa: E402
import zshard  # noqa: E402
from zshard.torch import AdamW, fully_shard  # noqa: E402

HP = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


class TestDCP(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch.distributed as dist
        cls.c = Cluster(BIN)
        store = dist.FileStore(os.path.join(cls.c.d, "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)

    @classmethod
    def tearDownClass(cls):
        import torch.distributed as dist
        dist.destroy_process_group()
        cls.c.close()

    def fsdp2(self):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard as fsdp_shard
        torch.manual_seed(5)
        m = _Net()
        mesh = init_device_mesh("cpu", (1,))
        for b in m.blocks:
            fsdp_shard(b, mesh=mesh)
        fsdp_shard(m, mesh=mesh)
        return m, torch.optim.AdamW(m.parameters(), **HP)

    def test_zshard_to_fsdp2_and_back(self):
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
        from safetensors import safe_open
        from safetensors.torch import load_file
        from zshard.torch import load_dcp

        torch.manual_seed(5)
        m = _Net()
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m, job="dcpout", coordinator=self.c.addr, rank=0, world_size=1)
        opt = AdamW(m.parameters(), **HP)
        for t in range(3):
            m(net_data(t)).backward()
            opt.step()
            opt.zero_grad()
        mine = m.state_dict()
        out = os.path.join(self.c.d, "dcp-out")
        env = dict(os.environ, ZSHARD_BIN=BIN, PYTHONPATH=os.path.join(HERE, "..", "..",
                                                                       "python"))
        r = subprocess.run([sys.executable, "-m", "zshard.dcp", "export", "dcpout", out,
                            "--coordinator", self.c.addr], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("at step 3", r.stdout)
        moments = os.path.join(self.c.d, "moments.safetensors")
        self.c.ctl("export", "dcpout", "--out", moments, "--optimizer", "--bare-names")
        moments = load_file(moments)

        f, fopt = self.fsdp2()
        msd, osd = get_state_dict(f, fopt)
        # the usual call: every key get_state_dict gives, param_groups' too
        dcp.load({"model": msd, "optim": osd}, checkpoint_id=out)
        set_state_dict(f, fopt, model_state_dict=msd, optim_state_dict=osd)
        full = {n: p.full_tensor() for n, p in f.state_dict().items()}
        for n, t in mine.items():
            self.assertTrue(torch.equal(full[n], t), "parameter %s" % n)
        names = {id(p): n for n, p in f.named_parameters()}
        for p, st in fopt.state.items():
            n = names[id(p)]
            self.assertEqual(float(st["step"]), 3.0, n)
            for k in ("exp_avg", "exp_avg_sq"):
                self.assertTrue(torch.equal(st[k].full_tensor(), moments["%s.%s" % (n, k)]),
                                "%s of %s" % (k, n))
        # one more step each: the same moments, so the same update (within
        # AdamW's rounding: torch's lerp)
        m(net_data(3)).backward()
        opt.step()
        opt.zero_grad()
        f(net_data(3)).backward()
        fopt.step()
        fopt.zero_grad()
        after = m.state_dict()
        worst = 0.0
        for n, p in f.state_dict().items():
            t = p.full_tensor()
            rel = ((t - after[n]).abs().max() / after[n].abs().max()).item()
            worst = max(worst, rel)
            self.assertLess(rel, 1e-5, n)
        m.zshard_close()

        # FSDP2's checkpoint (4 steps: 3 of zshard's, 1 of its own) into
        # new zshard jobs: the parameters alone (its optimizer starts anew),
        # and with the optimizer's state (load_dcp(..., optimizer=))
        inp = os.path.join(self.c.d, "dcp-in")
        msd, osd = get_state_dict(f, fopt)
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=inp)
        want = {n: p.full_tensor() for n, p in f.state_dict().items()}
        zs = {}
        for job, with_opt in (("dcpin", False), ("dcpin2", True)):
            torch.manual_seed(99)  # another init: what loads must replace it
            z = _Net()
            for b in z.blocks:
                fully_shard(b)
            fully_shard(z, job=job, coordinator=self.c.addr, rank=0, world_size=1)
            zopt = AdamW(z.parameters(), **HP)
            load_dcp(z, inp, optimizer=zopt if with_opt else None)
            z.zshard_start()
            got = z.state_dict()
            for n, t in want.items():
                self.assertTrue(torch.equal(got[n], t), "imported %s" % n)
            zs[job] = (z, zopt)
        # the state the servers hold is FSDP2's, bit for bit, at its step
        moments = os.path.join(self.c.d, "moments-in.safetensors")
        self.c.ctl("export", "dcpin2", "--out", moments, "--optimizer", "--bare-names")
        with safe_open(moments, "pt") as fm:
            self.assertEqual(fm.metadata()["optimizer_steps"], "4")
        moments = load_file(moments)
        for p, st in fopt.state.items():
            n = names[id(p)]
            self.assertEqual(float(st["step"]), 4.0, n)
            for k in ("exp_avg", "exp_avg_sq"):
                self.assertTrue(torch.equal(st[k].full_tensor(), moments["%s.%s" % (n, k)]),
                                "imported %s of %s" % (k, n))
        # the same through the command line into a job created by its spec,
        # and refused for a job created without the state's step
        spec = zs["dcpin2"][0]._zshard.spec()
        for job, taken in (("dcpcli", 4), ("dcpcli0", 0)):
            spec["name"] = job
            spec["optimizer"]["steps_taken"] = taken
            zshard.create_job(spec, coordinator=self.c.addr)
            r = subprocess.run([sys.executable, "-m", "zshard.dcp", "import", job, inp,
                                "--coordinator", self.c.addr], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if taken:
                self.assertEqual(r.returncode, 0, r.stdout)
                self.assertIn("optimizer state of step 4", r.stdout)
            else:
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertIn("steps_taken", r.stdout)
        cli = os.path.join(self.c.d, "moments-cli.safetensors")
        self.c.ctl("export", "dcpcli", "--out", cli, "--optimizer", "--bare-names")
        cli = load_file(cli)
        for k, t in moments.items():
            self.assertTrue(torch.equal(cli[k], t), "imported by the command line: %s" % k)
        # one more step everywhere: with the state, FSDP2's update (within
        # AdamW's rounding); without it, a fresh optimizer's (far off)
        f(net_data(4)).backward()
        fopt.step()
        fopt.zero_grad()
        ref = {n: p.full_tensor() for n, p in f.state_dict().items()}
        rel = {}
        for job, (z, zopt) in zs.items():
            z(net_data(4)).backward()
            zopt.step()
            zopt.zero_grad()
            got = z.state_dict()
            rel[job] = max(((got[n] - t).abs().max() / t.abs().max()).item()
                           for n, t in ref.items())
            z.zshard_close()
        self.assertLess(rel["dcpin2"], 1e-5, "with FSDP2's optimizer state")
        self.assertGreater(rel["dcpin"], 100 * max(rel["dcpin2"], 1e-7),
                           "a fresh optimizer's step should be far from FSDP2's: the test "
                           "cannot tell")
        print("test_dcp: zshard -> FSDP2: parameters and moments bitwise, step 3, the next "
              "step within %.1e; FSDP2 -> zshard: parameters and moments bitwise, step 4, "
              "the next step within %.1e (a fresh optimizer's: %.1e)"
              % (worst, rel["dcpin2"], rel["dcpin"]), flush=True)

    def test_param_groups_through_the_usual_calls(self):
        """A job of two optimizer groups (decay on the weights, none on the
        rest), exported, loads with FSDP2's usual calls (get_state_dict,
        dcp.load of {"model", "optim"}, set_state_dict) into a
        torch.optim.AdamW of two groups made with other values: each group
        ends with the job's values and its own parameters (it failed with
        "Missing key in checkpoint state_dict: optim.param_groups.0.lr")."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        def groups(m):
            w = [p for n, p in m.named_parameters() if n.endswith("weight")]
            rest = [p for n, p in m.named_parameters() if not n.endswith("weight")]
            return [{"params": w, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]

        torch.manual_seed(5)
        m = _Net()
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m, job="dcpgroups", coordinator=self.c.addr, rank=0, world_size=1)
        opt = AdamW(groups(m), lr=2e-3, betas=(0.8, 0.9), eps=1e-7)
        for t in range(2):
            m(net_data(t)).backward()
            opt.step()
            opt.zero_grad()
        m.zshard_close()
        out = os.path.join(self.c.d, "dcp-groups")
        env = dict(os.environ, ZSHARD_BIN=BIN, PYTHONPATH=os.path.join(HERE, "..", "..",
                                                                       "python"))
        r = subprocess.run([sys.executable, "-m", "zshard.dcp", "export", "dcpgroups", out,
                            "--coordinator", self.c.addr], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        self.assertEqual(r.returncode, 0, r.stdout)
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard as fsdp_shard
        torch.manual_seed(6)
        f = _Net()
        mesh = init_device_mesh("cpu", (1,))
        for b in f.blocks:
            fsdp_shard(b, mesh=mesh)
        fsdp_shard(f, mesh=mesh)
        fopt = torch.optim.AdamW(groups(f), lr=1.0, betas=(0.5, 0.5), eps=1e-3)
        f(net_data(0)).backward()  # a state of its own, which the load replaces
        fopt.step()
        msd, osd = get_state_dict(f, fopt)
        dcp.load({"model": msd, "optim": osd}, checkpoint_id=out)
        set_state_dict(f, fopt, model_state_dict=msd, optim_state_dict=osd)
        names = {id(p): n for n, p in f.named_parameters()}
        for g, wd in zip(fopt.param_groups, (0.1, 0.0)):
            self.assertEqual((g["lr"], tuple(g["betas"]), g["eps"], g["weight_decay"]),
                             (2e-3, (0.8, 0.9), 1e-7, wd))
            self.assertEqual({names[id(p)].endswith("weight") for p in g["params"]},
                             {wd == 0.1})
        for p, st in fopt.state.items():
            self.assertEqual(float(st["step"]), 2.0, names[id(p)])
        print("test_dcp: param_groups of a 2-group job through get_state_dict, dcp.load and "
              "set_state_dict: the job's values in each", flush=True)


if __name__ == "__main__":
    r = unittest.main(exit=False, verbosity=2).result
    bad = len(r.failures) + len(r.errors)
    print("check: dcp: %s" % ("%d of %d tests failed" % (bad, r.testsRun) if bad
                               else "%d tests passed" % r.testsRun))
    sys.exit(1 if bad else 0)
