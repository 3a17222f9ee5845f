#!/usr/bin/python3
"""test_zshard.py - the Python package (python/zshard) against a real cluster.

Starts a coordinator and two shard servers on loopback (free ports, a
temporary directory removed at the end, every process stopped), then:
two ranks in threads train through the step driver and end bitwise equal to
a numpy reference of zshard's semantics (the ranks' gradients summed by
the reduction's definition, tests/ref/bsum_ref.py, their mean in fp32, then
AdamW as tests/ref/optim_ref.py computes it); errors arrive as the
exceptions of their status; a checkpoint carries a blob back through
resume(); an evicted rank gets zshard.Resume and resume() takes it back to
the checkpoint.

    ZSHARD_BIN=build/bin PYTHONPATH=python tests/python/test_zshard.py
"""
import json
import os
import signal
import sys
import threading
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
sys.path.insert(0, HERE)
import bsum_ref  # noqa: E402
import optim_ref  # noqa: E402
import zshard  # noqa: E402
from cluster import Cluster  # noqa: E402

BIN = os.environ.get("ZSHARD_BIN", os.path.join(ROOT, "build", "bin"))
f32 = np.float32
SIZES = [1000, 1, 4099]
# hyperparameters exact in float32, so that no rounding differs anywhere
OPT = {"kind": "adamw", "lr": 0.0078125, "beta1": 0.875, "beta2": 0.9921875,
       "eps": 2.0 ** -20, "weight_decay": 0.0625}


def spec(name, world, stage=3):
    return {"name": name, "stage": stage, "world_size": world, "compute_dtype": "f32",
            "optimizer": OPT,
            "units": [{"name": "u%d" % u, "tensors": [{"name": "w", "shape": [n]}]}
                      for u, n in enumerate(SIZES)]}


def init(u):
    return (np.arange(SIZES[u], dtype=f32) % f32(17)) * f32(0.03125) - f32(0.25)


def grad(p, u, rank, t):
    i = np.arange(p.size)
    return (p * (f32(0.3) + f32(0.1) * f32(rank)) +
            ((i * 7 + u * 3 + t) % 11).astype(f32) * f32(0.01) - f32(0.05) * f32(rank))


def reference(world, steps):
    """world: the world size, or a function of the step (a resized job)."""
    out = []
    for u in range(len(SIZES)):
        p = init(u)
        s0 = np.zeros_like(p)
        s1 = np.zeros_like(p)
        for t in range(steps):
            w = world(t) if callable(world) else world
            # the servers' reduction, from its definition (tests/ref)
            acc = bsum_ref.bsum_rows(np.stack([grad(p, u, r, t) for r in range(w)]))
            if w > 1:
                acc = acc / f32(w)
            p, s0, s1 = optim_ref.step("adamw", p, s0, s1, acc, t + 1, OPT["lr"],
                                       OPT["beta1"], OPT["beta2"], OPT["eps"],
                                       OPT["weight_decay"], 0.0)
        out.append(p)
    return out


def train(t, first, last, errors):
    """The step driver over steps [first, last) of rank t.rank."""
    try:
        for step in range(first, last):
            t.step_begin(step)
            for u in range(t.units):
                t.unit_params(u)
                t.unit_forward_done(u)
            for u in reversed(range(t.units)):
                p = t.unit_params(u, backward=True)
                g = t.unit_grad(u)
                g[:] = grad(p, u, t.rank, step)
                t.unit_push(u)
            t.step_end()
    except Exception as e:  # reported by the test's thread
        errors.append(e)


def train_ranks(ts, first, last):
    errors = []
    th = [threading.Thread(target=train, args=(t, first, last, errors)) for t in ts]
    for x in th:
        x.start()
    for x in th:
        x.join()
    if errors:
        raise errors[0]


class TestZshard(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(BIN)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def join(self, job, rank):
        return zshard.Trainer.join(job, rank=rank, coordinator=self.c.addr, transport="tcp")

    def _gather(self, t, u, step):
        out = np.empty(SIZES[u], dtype=f32)
        self.assertTrue(t.gather(u, step, out).wait(20000))
        return out

    def test_two_ranks_bitwise(self):
        zshard.create_job(spec("bits", 2), coordinator=self.c.addr)
        ts = [self.join("bits", r) for r in range(2)]
        try:
            self.assertEqual((ts[1].rank, ts[1].world_size, ts[1].units), (1, 2, 3))
            self.assertEqual(ts[0].unit_name(2), "u2")
            self.assertEqual(ts[0].unit_dtype(0), np.float32)
            self.assertIsNone(ts[0].resume())  # a new job: rank 0 uploads
            for u in range(3):
                ts[0].init_unit(u, init(u))
            train_ranks(ts, 0, 4)
            got = [self._gather(ts[0], u, 4) for u in range(3)]
            for u, want in enumerate(reference(2, 4)):
                self.assertTrue(np.array_equal(got[u].view(np.uint32), want.view(np.uint32)),
                                "unit %d differs from the reference" % u)
            stats = ts[0].last_step()
            self.assertEqual(stats["step"], 3)
            self.assertEqual(stats["stage"], 3)
            self.assertGreater(ts[0].counters()["bytes_pushed"], 0)
        finally:
            for t in ts:
                t.close()

    def test_create_job(self):
        zshard.create_job(spec("made", 2), coordinator=self.c.addr)
        shown = json.loads(self.c.ctl("job", "show", "made", "--json"))
        self.assertEqual((shown["world_size"], shown["units"]), (2, 3))
        with self.assertRaises(zshard.AlreadyExists):
            zshard.create_job(spec("made", 2), coordinator=self.c.addr)
        bad = spec("bad", 2)
        bad["optimizer"] = dict(OPT, kind="lion")
        with self.assertRaises(zshard.InvalidArgument) as e:
            zshard.create_job(bad, coordinator=self.c.addr)
        self.assertIn("lion", str(e.exception))
        bad = spec("bad", 2)
        bad["wrold_size"] = 2  # a typo is refused, not ignored
        with self.assertRaises(zshard.InvalidArgument) as e:
            zshard.create_job(bad, coordinator=self.c.addr)
        self.assertIn("wrold_size", str(e.exception))
        with self.assertRaises(zshard.InvalidArgument):
            zshard.create_job("{not json", coordinator=self.c.addr)
        with self.assertRaises(zshard.NotFound):  # nothing was created
            self.join("bad", 0)

    def test_create_job_finds_the_joins_coordinator(self):
        """Given no coordinator, a job is created where a join would look:
        $ZSHARD_CONFIG's before a local cluster's (it went to the local one,
        and rank 0 then waited for a job the configured coordinator never
        had). A local cluster that seems to run (its pid file) at a dead
        address, the configuration naming the real one: the job is there."""
        d = os.path.join(self.c.d, "confonly")
        os.makedirs(os.path.join(d, "local", "run"))
        with open(os.path.join(d, "local", "run", "coordinator.pid"), "w") as f:
            f.write("1\n")
        with open(os.path.join(d, "local", "coordinator.listen"), "w") as f:
            f.write("127.0.0.1:1\n")
        with open(os.path.join(d, "zshard.conf"), "w") as f:
            f.write("coordinator = %s\n" % self.c.addr)
        keep = {k: os.environ.get(k) for k in ("ZSHARD_COORDINATOR", "ZSHARD_CONFIG",
                                               "ZSHARD_LOCAL_DIR")}
        try:
            os.environ.pop("ZSHARD_COORDINATOR", None)
            os.environ["ZSHARD_CONFIG"] = os.path.join(d, "zshard.conf")
            os.environ["ZSHARD_LOCAL_DIR"] = os.path.join(d, "local")
            zshard.create_job(spec("viaconf", 1), timeout_ms=5000)
        finally:
            for k, v in keep.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        shown = json.loads(self.c.ctl("job", "show", "viaconf", "--json"))
        self.assertEqual(shown["world_size"], 1)

    def test_errors_are_exceptions(self):
        with self.assertRaises(zshard.NotFound) as e:
            self.join("no-such-job", 0)
        self.assertEqual(e.exception.code, 2)
        self.assertIn("no-such-job", str(e.exception))
        with self.assertRaises(zshard.InvalidArgument):
            zshard.Trainer.join("x", 0, coordinator=self.c.addr, transport="carrier-pigeon")
        zshard.create_job(spec("errs", 1), coordinator=self.c.addr)
        with self.join("errs", 0) as t:
            with self.assertRaises(zshard.InvalidArgument):
                t.init_unit(0, np.zeros(3, dtype=f32))  # the wrong size
            with self.assertRaises(zshard.InvalidArgument):
                t.gather(7, 0)  # no such unit
            with self.assertRaises(zshard.FailedPrecondition):
                t.step_end()  # no step begun
        os.environ["WORLD_SIZE"] = "4"
        try:
            with self.assertRaises(zshard.InvalidArgument):
                self.join("errs", 0)
        finally:
            del os.environ["WORLD_SIZE"]

    def test_resize(self):
        """zshard.resize_job: 2 ranks to 1 at the step the coordinator names;
        each rank knows the next step's world as the step before ends, rank 1
        leaves there (zshard.Canceled), rank 0 trains on alone, bitwise the
        reference whose world changes at that step."""
        zshard.create_job(spec("rsz", 2), coordinator=self.c.addr)
        ts = [self.join("rsz", r) for r in range(2)]
        gate, seen, errors = threading.Event(), {}, []

        def loop(t):
            try:
                for step in range(10):
                    if step == 3:
                        gate.wait(60)
                    try:
                        t.step_begin(step)
                    except zshard.Canceled as e:
                        seen[t.rank] = ("left", step, str(e))
                        return
                    for u in range(t.units):
                        t.unit_params(u)
                        t.unit_forward_done(u)
                    for u in reversed(range(t.units)):
                        p = t.unit_params(u, backward=True)
                        t.unit_grad(u)[:] = grad(p, u, t.rank, step)
                        t.unit_push(u)
                    t.step_end()
                    seen.setdefault((t.rank, "worlds"), []).append((step + 1, t.world_size))
            except Exception as e:  # reported by the test's thread
                errors.append(e)

        try:
            for u in range(3):
                ts[0].init_unit(u, init(u))
            th = [threading.Thread(target=loop, args=(t,)) for t in ts]
            for x in th:
                x.start()
            for _ in range(200):  # until a rank's step report is in
                try:
                    at = zshard.resize_job("rsz", 1, coordinator=self.c.addr)
                    break
                except zshard.FailedPrecondition:
                    time.sleep(0.05)
            # another before that step has run (the ranks are held): refused
            with self.assertRaisesRegex(zshard.FailedPrecondition,
                                        "resizing to 1 ranks at step %d already" % at):
                zshard.resize_job("rsz", 2, coordinator=self.c.addr)
            self.assertEqual(zshard.resize_job("rsz", 1, coordinator=self.c.addr), at)
            gate.set()
            for x in th:
                x.join()
            if errors:
                raise errors[0]
            self.assertGreaterEqual(at, 4)
            self.assertEqual(seen[1][:2], ("left", at))
            self.assertIn("not in job 'rsz' from step %d" % at, seen[1][2])
            # the next step's world, known as the step before ended
            for r in range(2):
                self.assertIn((at, 1), seen[(r, "worlds")])
                self.assertIn((at - 1, 2), seen[(r, "worlds")])
            want = reference(lambda t: 2 if t < at else 1, 10)
            for u in range(3):
                np.testing.assert_array_equal(self._gather(ts[0], u, 10), want[u])
            j = json.loads(self.c.ctl("job", "show", "rsz", "--json"))
            self.assertEqual(j["world_size"], 1)
            with self.assertRaises(zshard.InvalidArgument):
                zshard.resize_job("rsz", 0, coordinator=self.c.addr)
        finally:
            for t in ts:
                t.close()

    def test_checkpoint_evict_and_resume(self):
        zshard.create_job(spec("ck", 1), coordinator=self.c.addr)
        t = self.join("ck", 0)
        try:
            for u in range(3):
                t.init_unit(u, init(u))
            train_ranks([t], 0, 2)
            ident = t.checkpoint(2, b"loader at 2")
            self.assertTrue(t.checkpoint_wait(ident, 20000))
            train_ranks([t], 2, 3)
            self.c.ctl("trainers", "evict", "ck", "0")
            for _ in range(300):  # the rollback the eviction starts, carried out
                j = json.loads(self.c.ctl("job", "show", "ck", "--json"))
                if j["timeline"] and not j["restoring"]:
                    break
                time.sleep(0.05)
            self.assertIn("evicted", j["rollback_reason"])
            with self.assertRaises(zshard.Resume):  # this trainer's timeline ended
                t.gather(0, 3).wait(20000)
            self.assertEqual(t.resume(), (2, b"loader at 2"))
            train_ranks([t], 2, 4)
            got = [self._gather(t, u, 4) for u in range(3)]
            for u, want in enumerate(reference(1, 4)):
                self.assertTrue(np.array_equal(got[u].view(np.uint32), want.view(np.uint32)))
        finally:
            t.close()


if __name__ == "__main__":
    # a timeout's SIGTERM ends the run through tearDownClass (the temporary
    # directory goes too)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("test_zshard: stopped by SIGTERM"))
    unittest.main(verbosity=2)
