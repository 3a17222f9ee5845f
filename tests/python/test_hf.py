#!/usr/bin/env python3
"""test_hf.py - Hugging Face models as users train them, through zshard.torch
on a real cluster: GPT2LMHeadModel and LlamaForCausalLM (grouped-query
attention, untied head) built from transformers configs with random init
(no hub access), each decoder layer fully_shard'ed, 2 ranks, AdamW in two
groups and a LambdaLR, with gradient checkpointing (hf_rank.py). Stages 1,
2 and 3 end bitwise equal to each other, and within 4e-4 (parameters,
relative to each tensor's largest value) and 1e-6 (the loss of each step)
of single-process torch.optim.AdamW on the global batch; a run without
checkpointing ends bitwise equal to one with. zshard.torch.save_pretrained
writes a directory (config.json, sharded safetensors and their index) that
transformers' from_pretrained loads into the trained parameters, giving
the same logits as a plain model holding them.

    ZSHARD_BIN=build/bin build/torch-venv/bin/python tests/python/test_hf.py
"""
import json
import os
import re
import subprocess
import sys
import unittest

import torch
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, die_with_us  # noqa: E402
from test_torch import BIN  # noqa: E402

try:
    import transformers  # noqa: F401
    HAVE_HF = True
except ImportError as e:
    HAVE_HF, WHY = False, str(e)

STEPS = 4


class TestHF(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not HAVE_HF:
            raise unittest.SkipTest("transformers is not installed (%s); tools/torch-venv.sh "
                                    "installs it" % WHY)
        cls.c = Cluster(BIN)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def run_rank(self, args, rank=0, world=2, reference=False, env_more=None):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   ZSHARD_COORDINATOR=self.c.addr, OMP_NUM_THREADS="1", **(env_more or {}))
        env.pop("LD_LIBRARY_PATH", None)
        env["PYTHONPATH"] = os.path.join(HERE, "..", "..", "python") + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        argv = [sys.executable, os.path.join(HERE, "hf_rank.py")] + args
        if reference:
            argv += ["--reference", "--world", str(world)]
        log = open(os.path.join(self.c.d, "hf-%d-%d.log" % (os.getpid(), id(argv))), "w+")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                             stdin=subprocess.DEVNULL, preexec_fn=die_with_us)
        return p, log

    def finish(self, runs):
        """Each process's output, once it ended well (15 minutes at most)."""
        out = []
        for p, log in runs:
            try:
                rc = p.wait(900)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "timeout"
            log.seek(0)
            text = log.read()
            log.close()
            if rc != 0:
                self.fail("%s: rc %s\n%s" % (" ".join(p.args[1:]), rc, text[-3000:]))
            out.append(text)
        return out

    def wait(self, runs):
        """Each process's losses by run."""
        return [{m.group(1): [float(x) for x in m.group(2).split()]
                 for m in re.finditer(r"run (\w+): losses ([-0-9.e ]+)", text)}
                for text in self.finish(runs)]

    def train(self, model, runs, pretrained):
        """Both ranks through every run (a job each): rank 0's parameters
        and each step's loss (the mean of the ranks', as the global
        batch's), by run."""
        out = os.path.join(self.c.d, model)
        args = ["--model", model, "--job", model, "--runs", ",".join(runs), "--steps",
                str(STEPS), "--out", out]
        procs = [self.run_rank(args + (["--pretrained", pretrained] if r == 0 and pretrained
                                       else []), rank=r) for r in range(2)]
        l0, l1 = self.wait(procs)
        return {run: (load_file("%s-%s.safetensors" % (out, run)),
                      [(a + b) / 2 for a, b in zip(l0[run], l1[run])]) for run in runs}

    def check_model(self, model, runs):
        import transformers as tf
        # single-process torch on the global batch, beside the ranks
        rout = os.path.join(self.c.d, model + "-ref")
        refp = self.run_rank(["--model", model, "--steps", str(STEPS), "--out", rout],
                             reference=True)
        pre = os.path.join(self.c.d, model + "-pretrained")
        ends = self.train(model, runs, pre)
        ref_losses = self.wait([refp])[0]["3"]  # waited for before its file is read
        ref = load_file(rout + "-3.safetensors")
        got, losses = ends["3"]
        for run in runs[1:]:
            for n, t in got.items():
                self.assertTrue(torch.equal(t, ends[run][0][n]),
                                "%s: run %s's %s differs from stage 3's" % (model, run, n))
            self.assertEqual(losses, ends[run][1], run)
        # AdamW's rounding (torch's lerp) amplified through tiny gradients:
        # 4e-4 of each tensor's largest value, and 1e-5 (lr/300) for a
        # tensor still near its zero init (a bias)
        worst = 0.0
        for n, r in ref.items():
            d = (got[n] - r).abs().max().item()
            worst = max(worst, d / r.abs().max().item())
            self.assertLess(d, 4e-4 * r.abs().max().item() + 1e-5,
                            "%s: %s differs from torch's by %.2e" % (model, n, d))
        dl = max(abs(a - b) for a, b in zip(losses, ref_losses))
        self.assertLess(dl, 1e-6, "%s: losses %s, torch's %s" % (model, losses, ref_losses))
        # the Hugging Face directory: from_pretrained holds the trained values
        files = sorted(os.listdir(pre))
        self.assertIn("config.json", files)
        self.assertIn("model.safetensors.index.json", files)
        self.assertGreater(sum(f.endswith(".safetensors") for f in files), 2)
        hf = tf.AutoModelForCausalLM.from_pretrained(pre)
        for n, t in hf.state_dict().items():
            if n in got:
                self.assertTrue(torch.equal(t.float(), got[n]), "%s: %s" % (model, n))
        plain = type(hf)(hf.config)
        plain.load_state_dict(got, strict=False)
        ids = torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(3))
        hf.eval()
        plain.eval()
        with torch.no_grad():
            self.assertTrue(torch.equal(hf(ids).logits, plain(ids).logits))
        print("test_hf: %s: runs %s bitwise equal; from torch: parameters %.1e (relative), "
              "loss %.1e; from_pretrained: %d files, same logits"
              % (model, " ".join(runs), worst, dl, len(files)), flush=True)

    def test_llama_mixed_dtypes(self):
        """bf16 weights and fp32 norms in one model (each norm's unit gets a
        companion of its dtype), under CPU autocast, stages 3 and 1: bitwise
        equal to each other; the servers keep fp32 masters of which each
        bf16 parameter is exactly the rounding; and close to fp32 masters
        updated by torch.optim.AdamW on the ranks' mean gradient."""
        runs = ["3m", "1m"]
        rout = os.path.join(self.c.d, "mixed-ref")
        refp = self.run_rank(["--model", "llama", "--steps", str(STEPS), "--out", rout,
                              "--runs", "3m"], reference=True)
        ends = self.train("llama", runs, None)
        ref_losses = self.wait([refp])[0]["3m"]
        ref = load_file(rout + "-3m.safetensors")
        got, losses = ends["3m"]
        for n, t in got.items():
            self.assertTrue(torch.equal(t, ends["1m"][0][n]), "stage 1's %s differs" % n)
        shown = self.c.ctl("job", "show", "llama-3m")
        # the norms' units of their own dtype, beside each layer's bf16 one
        self.assertIn("model.layers.0[f32]", self.c.ctl("placement", "llama-3m"))
        worst = {"bf16": 0.0, "f32": 0.0}
        import hf_rank
        m, _ = hf_rank.build("llama")
        hf_rank.mixed(m)
        dtypes = {n: p.dtype for n, p in m.state_dict().items()}
        # the servers' fp32 masters (zshardctl export): finer than bf16, and
        # each bf16 parameter exactly its master rounded
        out = os.path.join(self.c.d, "mixed-masters.safetensors")
        self.c.ctl("export", "llama-3m", "--out", out, "--bare-names")
        masters = load_file(out)
        finer = 0
        for n, t in masters.items():
            self.assertEqual(t.dtype, torch.float32, n)
            if dtypes[n] == torch.bfloat16:
                self.assertTrue(torch.equal(t.to(torch.bfloat16).float(), got[n]),
                                "%s is not its master rounded to bf16" % n)
                finer += int((t != t.to(torch.bfloat16).float()).sum())
            else:
                self.assertTrue(torch.equal(t, got[n]), n)
        self.assertGreater(finer, 0, "the masters hold nothing finer than bf16")
        # against fp32 masters updated by torch: bf16 compute makes every
        # flipped rounding a (slightly) other gradient, which Adam amplifies
        # where gradients are tiny: 1e-2 of each bf16 tensor's scale (2.5
        # bf16 roundings), 4e-4 (+1e-5) of each fp32 one's
        for n, r in ref.items():
            d = (got[n] - r).abs().max().item()
            scale = r.abs().max().item()
            k = "bf16" if dtypes[n] == torch.bfloat16 else "f32"
            worst[k] = max(worst[k], d / scale)
            self.assertLess(d, 1e-2 * scale if k == "bf16" else 4e-4 * scale + 1e-5,
                            "%s (%s) differs from the reference by %.2e" % (n, k, d))
        dl = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
        self.assertLess(dl, 1e-3, "losses %s, the reference's %s" % (losses, ref_losses))
        self.assertIn("compute bf16", shown)
        print("test_hf: llama, bf16 weights and fp32 norms: stages 3 and 1 bitwise equal; "
              "fp32 masters (%d values finer than bf16), each bf16 tensor their rounding; "
              "from torch's AdamW on fp32 masters: bf16 tensors %.1e, fp32 %.1e (of each "
              "tensor's scale), loss %.1e" % (finer, worst["bf16"], worst["f32"], dl),
              flush=True)

    def test_trainer(self):
        """Hugging Face Trainer over a zshard GPT-2 (one rank, in this
        process): the optimizer and scheduler passed in, its gradient
        clipping (through Accelerate) reports the servers' norm of each
        step (it reported 0 before: Accelerate reads .grad), and its
        checkpoint's model.safetensors holds the trained parameters."""
        import hf_rank
        import transformers as tf
        import zshard.torch as zt
        out = os.path.join(self.c.d, "trainer")
        model, layers = hf_rank.build("gpt2")
        before = {n: t.detach().clone() for n, t in model.state_dict().items()}
        for layer in layers:
            zt.fully_shard(layer)
        zt.fully_shard(model, job="trainer", coordinator=self.c.addr, rank=0, world_size=1)
        opt = zt.AdamW(hf_rank.groups(model), lr=3e-3, max_grad_norm=1.0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, hf_rank.lam)

        class Data(torch.utils.data.Dataset):
            def __len__(self):
                return 16

            def __getitem__(self, i):
                ids = hf_rank.batch(0, i)[0]
                return {"input_ids": ids, "labels": ids}

        args = tf.TrainingArguments(output_dir=out, per_device_train_batch_size=2, max_steps=4,
                                    max_grad_norm=1.0, save_steps=4, logging_steps=1,
                                    report_to=[], use_cpu=True, seed=0, disable_tqdm=True,
                                    dataloader_num_workers=0)
        env = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")
               if k in os.environ}
        try:
            tf.Trainer(model=model, args=args, train_dataset=Data(),
                       optimizers=(opt, sched)).train()
        finally:
            os.environ.update(env)
        with open(os.path.join(out, "checkpoint-4", "trainer_state.json")) as f:
            logged = [h["grad_norm"] for h in json.load(f)["log_history"] if "grad_norm" in h]
        servers = [model._zshard.grad_norm(s) for s in range(4)]
        self.assertEqual(len(logged), 4)
        for a, b in zip(logged, servers):
            self.assertAlmostEqual(a, b, places=5)
        self.assertTrue(all(n > 1.0 for n in servers))  # so every step was clipped
        saved = load_file(os.path.join(out, "checkpoint-4", "model.safetensors"))
        sd = model.state_dict()
        for n, t in saved.items():
            self.assertTrue(torch.equal(t, sd[n]), n)
            self.assertFalse(torch.equal(t, before[n]) and t.dim() == 2, "%s untrained" % n)
        model.zshard_close()
        print("test_hf: Trainer: 4 steps, grad_norm logged as the servers computed it (%s), "
              "checkpoint-4 holds the trained parameters" %
              ", ".join("%.3f" % x for x in servers), flush=True)

    def test_trainer_two_ranks(self):
        """Hugging Face Trainer at 2 ranks, as torchrun starts it (RANK,
        WORLD_SIZE, MASTER_ADDR: Accelerate runs a gloo process group):
        the model is not wrapped in DistributedDataParallel (it would
        broadcast into and all-reduce what the servers hold), each rank
        reads its own batches, and against the same Trainer script in one
        process on the global batch (torch.optim.AdamW) the parameters end
        within 4e-4, the losses and gradient norms Trainer logged (the
        ranks' mean; the servers' norm) within 1e-5."""
        import socket
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            port = sk.getsockname()[1]
        rout = os.path.join(self.c.d, "tr2-ref")
        refp = self.run_rank(["--model", "gpt2", "--trainer", "--steps", str(STEPS), "--out",
                              rout], reference=True)
        out = os.path.join(self.c.d, "tr2")
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "LOCAL_WORLD_SIZE": "2"}
        procs = [self.run_rank(["--model", "gpt2", "--job", "tr2", "--trainer", "--world", "2",
                                "--steps", str(STEPS), "--out", out], rank=r, env_more=env)
                 for r in range(2)]
        ranks = self.finish(procs)
        ref_text = self.finish([refp])[0]
        ref = load_file(rout + "-trainer.safetensors")
        got = load_file(out + "-trainer.safetensors")
        for r, text in enumerate(ranks):
            m = re.search(r"read samples ([0-9 ]+); the model Trainer trained: (\w+)", text)
            self.assertIsNotNone(m, text[-2000:])
            self.assertEqual(m.group(2), "itself", "Trainer trained a wrapped model")
            seen = [int(x) for x in m.group(1).split()]
            want = [4 * s + 2 * r + k for s in range(STEPS) for k in range(2)]
            self.assertEqual(seen[:len(want)], want, "rank %d's samples" % r)
        worst = 0.0
        for n, t in ref.items():
            d = (got[n] - t).abs().max().item()
            worst = max(worst, d / t.abs().max().item())
            self.assertLess(d, 4e-4 * t.abs().max().item() + 1e-5,
                            "%s differs from torch's by %.2e" % (n, d))
        def logged(text, what):
            return [float(x) for x in re.search(r"rank 0 run trainer: %s ([-0-9.e ]+)" % what,
                                                text).group(1).split()]
        dl = dn = 0.0
        for what in ("losses", "grad norms"):
            a, b = logged(ranks[0], what), logged(ref_text, what)
            self.assertEqual(len(a), STEPS)
            d = max(abs(x - y) / abs(y) for x, y in zip(a, b))
            self.assertLess(d, 1e-5, "Trainer logged %s %s; in one process %s" % (what, a, b))
            dl, dn = (d, dn) if what == "losses" else (dl, d)
        print("test_hf: Trainer at 2 ranks (gloo beside it, no DDP): each rank its own "
              "batches; from the same Trainer in one process: parameters %.1e (relative), "
              "logged loss %.1e, grad norm (the servers') %.1e" % (worst, dl, dn), flush=True)

    def test_gpt2(self):
        """Stages 3, 2, 1 with gradient checkpointing, and 3 without."""
        self.check_model("gpt2", ["3", "2", "1", "3n"])

    def test_llama(self):
        self.check_model("llama", ["3", "2", "1"])


if __name__ == "__main__":
    r = unittest.main(exit=False, verbosity=2).result
    bad = len(r.failures) + len(r.errors)
    if r.skipped:
        print("check: hf: skipped: %s" % r.skipped[0][1])
    elif bad:
        print("check: hf: %d of %d tests failed" % (bad, r.testsRun))
    else:
        print("check: hf: %d tests passed" % r.testsRun)
    sys.exit(1 if bad else 0)
