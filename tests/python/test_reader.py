#!/usr/bin/env python3
"""test_reader.py - weight readers (zshard.Reader) on a real cluster while a
Llama trains through zshard.torch (reader_train.py, another process):

- paused after K steps, `zshardctl export` writes step K; a reader pins it,
  the trainer goes on, and the reader, reading while training runs, gets
  exactly the export's bits (f32), and its bf16 reads are those bits
  rounded as torch rounds them;
- the trainer done, the latest version is the last step's: load_into puts
  it into a Llama built from the config (by state_dict names), which then
  gives the logits of a Llama loaded from the export of that step; the
  weights() iterator yields every parameter's name and shape, as vLLM's
  load_weights takes them;
- refusals: a job whose spec allows no pins, an unknown name, a dtype that
  is none of f32/bf16/f16, a read with nothing pinned.

    ZSHARD_BIN=build/bin build/torch-venv/bin/python tests/python/test_reader.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import torch
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster import Cluster, die_with_us  # noqa: E402
from test_torch import BIN  # noqa: E402

import zshard  # noqa: E402

try:
    import transformers  # noqa: F401
    HAVE_HF = True
except ImportError as e:
    HAVE_HF, WHY = False, str(e)

STEPS, PAUSE = 8, 3


def wait_for(cond, what, seconds=120):
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > seconds:
            raise AssertionError("waited %d s for %s" % (seconds, what))
        time.sleep(0.02)


def in_thread(fn, errs):
    """fn run in a thread of its own, started; what it raises goes into
    errs, for the test to report."""
    import threading

    def run():
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - reported by the caller
            errs.append("trainer: %s" % e)
    th = threading.Thread(target=run)
    th.start()
    return th


class TestReader(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not HAVE_HF:
            raise unittest.SkipTest("transformers is not installed (%s); tools/torch-venv.sh "
                                    "installs it" % WHY)
        cls.c = Cluster(BIN)
        cls.d = tempfile.mkdtemp(prefix="zshard-reader-")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        for f in os.listdir(cls.d):
            os.unlink(os.path.join(cls.d, f))
        os.rmdir(cls.d)

    def log(self):
        with open(os.path.join(self.d, "trainer.log")) as f:
            return f.read()

    def export(self, job, name):
        path = os.path.join(self.d, name)
        self.c.ctl("export", job, "--out", path, "--bare-names")
        return load_file(path)

    def test_read_while_training(self):
        env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0",
                   ZSHARD_COORDINATOR=self.c.addr, OMP_NUM_THREADS="1")
        env.pop("LD_LIBRARY_PATH", None)
        env["PYTHONPATH"] = os.path.join(HERE, "..", "..", "python") + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        log = open(os.path.join(self.d, "trainer.log"), "w")
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "reader_train.py"), "--job",
                              "llama-r", "--steps", str(STEPS), "--pause", str(PAUSE), "--dir",
                              self.d], env=env, stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=die_with_us)
        try:
            self.check_reads(p)
        finally:
            if p.poll() is None:
                p.kill()
            p.wait()
            log.close()

    def check_reads(self, p):
        wait_for(lambda: os.path.exists(os.path.join(self.d, "at")) or p.poll() is not None,
                 "the trainer's pause")
        self.assertIsNone(p.poll(), self.log())
        r = zshard.Reader("llama-r", coordinator=self.c.addr)
        # the last push of step K - 1 acknowledged is not yet every update
        self.assertEqual(r.wait(PAUSE - 1), PAUSE)
        at_k = self.export("llama-r", "k.safetensors")
        self.assertEqual(r.pin(), PAUSE)
        open(os.path.join(self.d, "go"), "w").close()
        # read once training is two steps on (no shard holds step K any
        # more, nor the step before its version): the pinned step's bits
        wait_for(lambda: r.latest() >= PAUSE + 2 or p.poll() is not None, "two more steps")
        read_k, n_moved = {}, 0
        for name, t in r.weights(torch.float32):
            read_k[name] = t
            n_moved += p.poll() is None
        self.assertEqual(sorted(read_k), sorted(at_k))
        for name, t in at_k.items():
            self.assertTrue(torch.equal(read_k[name], t), name)
            self.assertEqual(read_k[name].shape, t.shape)
        half = r.tensor("model.layers.0.mlp.up_proj.weight", torch.bfloat16)
        self.assertTrue(torch.equal(half, at_k["model.layers.0.mlp.up_proj.weight"].to(
            torch.bfloat16)))
        self.assertEqual(set(r.checksums), set(at_k))
        print("test_reader: step %d read whole %d steps later, %d of %d tensors while the "
              "trainer still ran" % (PAUSE, r.latest() - PAUSE, n_moved, len(read_k)))

        self.assertEqual(p.wait(300), 0, self.log())
        self.assertEqual(r.wait(STEPS - 1), STEPS)
        self.assertEqual(r.pin(), STEPS)
        at_n = self.export("llama-r", "n.safetensors")
        sys.path.insert(0, HERE)
        from hf_rank import VOCAB, build
        mine, _ = build("llama")
        got = r.load_into(mine)
        self.assertEqual(got["step"], STEPS)
        self.assertEqual(got["missing"], [])
        self.assertEqual(got["unexpected"], [])
        theirs, _ = build("llama")
        theirs.load_state_dict(at_n, strict=False)
        for name, t in mine.named_parameters():
            self.assertTrue(torch.equal(t, at_n[name]), name)
        ids = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(5))
        with torch.no_grad():
            self.assertTrue(torch.equal(mine(input_ids=ids).logits, theirs(input_ids=ids).logits))
        names = [n for n, _ in r.weights()]
        self.assertEqual(sorted(names), sorted(n for n, _ in mine.named_parameters()))

        # refusals
        with self.assertRaises(zshard.NotFound):
            r.read("model.no_such.weight")
        with self.assertRaises(zshard.InvalidArgument):
            r.read("lm_head.weight", "int8")
        r.release()
        with self.assertRaises(zshard.FailedPrecondition):
            r.read("lm_head.weight")
        r.close()

    def test_failover(self):
        """A replicated job: a reader pins the latest, the server holding
        primaries is killed, and the reader, reading on, gets the same
        bits from the promoted copies (every copy holds the pin)."""
        import numpy as np
        c = Cluster(BIN, servers=2)
        try:
            zshard.create_job({"name": "repl", "stage": 3, "world_size": 1,
                               "compute_dtype": "f32", "replicas": 2,
                               "readers": {"pins": 2, "idle_ms": 120000},
                               "optimizer": {"kind": "sgd", "lr": 0.1},
                               "units": [{"name": "a", "tensors": [{"name": "w",
                                                                     "shape": [4096]}]},
                                         {"name": "b", "tensors": [{"name": "v",
                                                                     "shape": [3, 1000]}]}]},
                              coordinator=c.addr)
            t = zshard.Trainer.join("repl", rank=0, coordinator=c.addr)
            rng = np.random.default_rng(3)
            want = {}
            for u in range(t.units):
                w = rng.standard_normal(t.unit_numel(u)).astype(np.float32)
                t.init_unit(u, w)
                for _ in range(3):  # SGD's p + (-lr) * g, g = p / 2, in fp32
                    w = w + np.float32(-0.1) * (w * np.float32(0.5))
                want[u] = w
            for step in range(3):
                for u in reversed(range(t.units)):
                    p = t.gather(u, step)
                    p.wait()
                    t.push(u, step, (p._buf * 0.5).astype(np.float32)).wait()
            with zshard.Reader("repl", coordinator=c.addr, timeout_ms=30000) as r:
                self.assertEqual(r.wait(2), 3)
                self.assertEqual(r.pin(), 3)
                before = {n.name: r.read(n.name) for n in r.tensors}
                t.close()
                self.assertTrue(np.array_equal(before["w"], want[0]))
                self.assertTrue(np.array_equal(before["v"].reshape(-1), want[1]))
                # the first server (primaries of half the shards) killed
                c.procs[1].kill()
                c.procs[1].wait()
                after = {n.name: r.read(n.name) for n in r.tensors}
                for n, v in before.items():
                    self.assertTrue(np.array_equal(v, after[n]), n)
        finally:
            c.close()

    def relay_job(self, c, name, n=24, numel=65536, tls=False):
        """A job of n tensors of numel f32 elements trained 2 steps (numpy
        ranks: p - 0.1 * p / 2); its values after them."""
        import numpy as np
        zshard.create_job({"name": name, "stage": 3, "world_size": 1, "compute_dtype": "f32",
                           "readers": {"pins": 2}, "data_tls": tls,
                           "optimizer": {"kind": "sgd", "lr": 0.1},
                           "units": [{"name": "u%d" % k, "tensors": [{"name": "t%d" % k,
                                                                       "shape": [numel]}]}
                                     for k in range(n)]}, coordinator=c.addr)
        t = zshard.Trainer.join(name, rank=0, coordinator=c.addr)
        rng = np.random.default_rng(9)
        want = {}
        for u in range(t.units):
            w = rng.standard_normal(numel).astype(np.float32)
            t.init_unit(u, w)
            for _ in range(2):
                w = w + np.float32(-0.1) * (w * np.float32(0.5))
            want["t%d" % u] = w
        for step in range(2):
            for u in reversed(range(t.units)):
                p = t.gather(u, step)
                p.wait()
                t.push(u, step, (p._buf * 0.5).astype(np.float32)).wait()
        t.close()
        return want

    def test_servers_arenas(self):
        """A reader on the servers' host takes their pinned copies from
        their arenas over shm: the step's bits, every byte one-sided (the
        servers send none). With no room for the copies in the arenas
        (--reader-budget 0) the servers refuse such reads (ZS_ENOSPC) and
        the reader reads over tcp instead: the same bits. A reader of
        another user on their host (read_weights as nobody), whom their
        shm refuses, reads over tcp: the same CRC32Cs."""
        import numpy as np
        crcs = {}

        def read_all(c):
            with zshard.Reader("arena", coordinator=c.addr) as r:
                r.pin(2)
                for n, v in want.items():
                    self.assertTrue(np.array_equal(r.read(n), v), n)
                crcs.update(r.checksums)
                return r.stats()
        want = self.relay_job(self.c, "arena", n=6)
        model = sum(v.nbytes for v in want.values())
        s = read_all(self.c)
        self.assertEqual(s["bytes_from_servers"], model, s)
        self.assertEqual(s["bytes_from_servers_one_sided"], model, s)
        if os.geteuid() == 0 and shutil.which("setpriv"):
            out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                  os.path.join(BIN, "read_weights"), "--coordinator",
                                  self.c.addr, "--job", "arena", "--step", "2"],
                                 capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            got = {ln.split()[0]: ln.split()[-1] for ln in out.stdout.splitlines()
                   if "crc32c" in ln}
            self.assertEqual(got, {n: "%08x" % v for n, v in crcs.items()})
        else:
            print("test_reader: a reader of another user not tried: not root, or no setpriv")
        c = Cluster(BIN, servers=2, server_args=["--reader-budget", "0"])
        try:
            self.relay_job(c, "arena", n=6)
            s = read_all(c)
        finally:
            c.close()
        self.assertEqual(s["bytes_from_servers"], model, s)
        self.assertEqual(s["bytes_from_servers_one_sided"], 0, s)

    def test_relay_tree(self):
        """Five readers of one version in a relay tree (fanout 2): the
        first reads from the servers, the others from their parents; each
        gets the step's bits, the servers send the model once; zshardctl
        readers shows the tree."""
        import threading
        import numpy as np
        want = self.relay_job(self.c, "tree")
        model = sum(v.nbytes for v in want.values())
        rs = [zshard.Reader("tree", coordinator=self.c.addr) for _ in range(5)]
        for r in rs:
            r.relay("127.0.0.1:0", 2)
            self.assertEqual(r.pin(), 2)
        got, errs = [{} for _ in rs], []

        def read(k):
            try:
                for t in rs[k].tensors:
                    got[k][t.name] = rs[k].read(t.name)
            except Exception as e:  # noqa: BLE001 - reported below
                errs.append("reader %d: %s" % (k, e))
        th = [threading.Thread(target=read, args=(k,)) for k in range(len(rs))]
        for x in th:
            x.start()
        for x in th:
            x.join(120)
        self.assertEqual(errs, [])
        for k in range(len(rs)):
            for n, v in want.items():
                self.assertTrue(np.array_equal(got[k][n], v), "reader %d %s" % (k, n))
        st = [r.stats() for r in rs]
        self.assertEqual(st[0]["parent"], 0)
        self.assertEqual(st[0]["bytes_from_servers"], model)
        for k in range(1, len(rs)):
            self.assertEqual(st[k]["parent"], st[(k - 1) // 2]["id"], st)
            self.assertEqual(st[k]["bytes_from_servers"], 0, st[k])
            self.assertEqual(st[k]["bytes_from_relay"], model, st[k])
        self.assertEqual(sum(s["bytes_served"] for s in st), model * (len(rs) - 1))
        listing = json.loads(self.c.ctl("readers", "tree", "--json"))["readers"]
        self.assertEqual(sorted((x["id"], x["parent"]) for x in listing),
                         sorted((s["id"], s["parent"]) for s in st))
        print("test_reader: 5 readers, the servers sent %d bytes (the model once)" %
              sum(s["bytes_from_servers"] for s in st))
        for r in rs:
            r.close()

    def test_relay_tls(self):
        """A data_tls job: the relay's wire is encrypted too (TLS 1.3 keyed
        by the reader token); the second reader gets the bits from the
        first."""
        import numpy as np
        want = self.relay_job(self.c, "rtls", n=6, tls=True)
        a = zshard.Reader("rtls", coordinator=self.c.addr, relay="127.0.0.1:0")
        b = zshard.Reader("rtls", coordinator=self.c.addr, relay="127.0.0.1:0")
        a.pin(2)
        b.pin(2)
        for t in a.tensors:
            self.assertTrue(np.array_equal(a.read(t.name), want[t.name]))
        for t in b.tensors:
            self.assertTrue(np.array_equal(b.read(t.name), want[t.name]))
        s = b.stats()
        self.assertEqual(s["parent"], a.stats()["id"])
        self.assertEqual(s["bytes_from_relay"], sum(v.nbytes for v in want.values()), s)
        a.close()
        b.close()

    def test_relay_late_parent(self):
        """A parent that pinned long before it reads: its child's request
        waits for it (the stall is counted from the request, not from the
        pin) and gets the tensor from it, not from the servers."""
        import threading
        import numpy as np
        want = self.relay_job(self.c, "late", n=4)
        a = zshard.Reader("late", coordinator=self.c.addr, relay="127.0.0.1:0", fanout=1)
        b = zshard.Reader("late", coordinator=self.c.addr, relay="127.0.0.1:0", fanout=1)
        a.pin(2)
        b.pin(2)
        time.sleep(3.5)  # a pin older than the relay's stall bound (3 s)
        got, th = {}, threading.Thread(target=lambda: got.update(
            {t.name: b.read(t.name) for t in b.tensors}))
        th.start()
        for t in a.tensors:
            time.sleep(0.2)  # a slow parent: b's requests wait for it
            a.read(t.name)
        th.join(60)
        for n, v in want.items():
            self.assertTrue(np.array_equal(got[n], v), n)
        s = b.stats()
        self.assertEqual(s["bytes_from_servers"], 0, s)
        a.close()
        b.close()

    def test_relay_parent_killed(self):
        """A chain (fanout 1): the first reader here, two in processes of
        their own that read slowly, the last here reading from the third;
        mid-relay its parent is killed and, while it is routed around, the
        parent it would move to as well (a double fault): the last reader
        ends on the first and reads the step's bits whole."""
        import numpy as np
        want = self.relay_job(self.c, "chain", n=16)
        root = zshard.Reader("chain", coordinator=self.c.addr)
        root.relay("127.0.0.1:0", 1)
        root.pin(2)
        for t in root.tensors:
            root.read(t.name)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(HERE, "..", "..", "python") + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        mids = []
        try:
            for k in range(2):  # registered in turn: root <- mid 0 <- mid 1
                out = os.path.join(self.d, "mid%d.addr" % k)
                mids.append(subprocess.Popen([sys.executable, os.path.join(HERE, "reader_relay.py"),
                                              self.c.addr, "chain", "2", "1", "0.15", out],
                                             env=env, preexec_fn=die_with_us))
                wait_for(lambda: os.path.exists(out) or mids[-1].poll() is not None,
                         "middle reader %d" % k)
                self.assertIsNone(mids[-1].poll(), "middle reader %d ended" % k)
            with open(os.path.join(self.d, "mid1.addr")) as f:
                mid_id = int(f.read().split()[1])
            leaf = zshard.Reader("chain", coordinator=self.c.addr)
            leaf.relay("127.0.0.1:0", 1)
            leaf.pin(2)
            self.assertEqual(leaf.stats()["parent"], mid_id)
            got = {}
            for k, t in enumerate(leaf.tensors):
                if k == 4:  # its parent, then the one it would move to
                    for m in reversed(mids):
                        m.kill()
                        m.wait()
                got[t.name] = leaf.read(t.name)
            s = leaf.stats()
            for n, v in want.items():
                self.assertTrue(np.array_equal(got[n], v), n)
            self.assertEqual(s["parent"], root.stats()["id"], s)
            self.assertEqual(s["bytes_from_servers"], 0, s)  # routed past both at once
            print("test_reader: two of a chain killed mid-relay, the second while the first "
                  "was routed around; the last reader moved to the first (%d bytes relayed, "
                  "%d from the servers)" % (s["bytes_from_relay"], s["bytes_from_servers"]))
            leaf.close()
        finally:
            for m in mids:
                if m.poll() is None:
                    m.kill()
                m.wait()
            root.close()

    def test_versions_through_failover(self):
        """A replicated job trained by a numpy trainer (each step p -= 0.1 *
        p / 2, so every step's bits are known) while a reader pins the
        latest version and reads it whole, over and over; a server drawn at
        random is killed at a random point of training
        (ZSHARD_READER_SEED repeats a draw). Every version read is exactly
        its step's, before and after the failover."""
        import random
        import numpy as np
        seed = int(os.environ.get("ZSHARD_READER_SEED", str(time.time_ns() % 100000)))
        draw = random.Random(seed)
        victim, kill_at, delay = draw.randrange(1, 3), draw.randrange(3, 30), draw.uniform(0, 0.02)
        what = "seed %d: server %d killed %.0f ms after step %d" % (seed, victim, delay * 1e3,
                                                                    kill_at)
        c = Cluster(BIN, servers=2)
        try:
            n, steps = 4, 40
            zshard.create_job({"name": "fo", "stage": 3, "world_size": 1, "compute_dtype": "f32",
                               "replicas": 2, "readers": {"pins": 2},
                               "optimizer": {"kind": "sgd", "lr": 0.1},
                               "units": [{"name": "u%d" % k, "tensors": [{"name": "t%d" % k,
                                                                           "shape": [4096]}]}
                                         for k in range(n)]}, coordinator=c.addr)
            t = zshard.Trainer.join("fo", rank=0, coordinator=c.addr)
            rng = np.random.default_rng(5)
            table = [[rng.standard_normal(4096).astype(np.float32) for _ in range(n)]]
            for _ in range(steps):
                table.append([w + np.float32(-0.1) * (w * np.float32(0.5)) for w in table[-1]])
            for u in range(n):
                t.init_unit(u, table[0][u])
            at, errs, killed = [0], [], threading.Event()

            def train():
                for step in range(steps):
                    if step == kill_at + 2:  # never past the kill before it is done
                        killed.wait(120)
                    for u in reversed(range(n)):
                        p = t.gather(u, step)
                        p.wait()
                        t.push(u, step, (p._buf * 0.5).astype(np.float32)).wait()
                    at[0] = step + 1
            th = in_thread(train, errs)
            seen, killed_at = [], None
            deadline = time.monotonic() + 300
            with zshard.Reader("fo", coordinator=c.addr, timeout_ms=60000) as r:
                # until the trainer ended and its last step was read (or it
                # failed: errs says why), within a generous bound
                while (th.is_alive() or (not errs and (not seen or seen[-1] < steps))) \
                        and time.monotonic() < deadline:
                    if killed_at is None and at[0] >= kill_at:
                        time.sleep(delay)
                        c.procs[victim].kill()
                        c.procs[victim].wait()
                        killed_at = at[0]
                        killed.set()
                    try:
                        v = r.pin()
                    except zshard.TryAgain:  # the next update took the step
                        time.sleep(0.005)
                        continue
                    for k in range(n):
                        got = r.read("t%d" % k)
                        if not np.array_equal(got, table[v][k]):
                            errs.append("version %d tensor %d is not step %d's" % (v, k, v))
                    seen.append(v)
                    if errs:
                        break
            th.join(120)
            self.assertEqual(errs, [], what)
            self.assertEqual(seen[-1], steps, "the last step was not read within 300 s (%s)" % what)
            self.assertIsNotNone(killed_at, what)
            after = [v for v in seen if v > killed_at]
            self.assertTrue(after, (what, seen))
            print("test_reader: %d versions read whole and exact, %d after the kill (%s)" %
                  (len(set(seen)), len(set(after)), what))
            t.close()
        finally:
            c.close()

    def test_versions_through_rollback(self):
        """A numpy trainer trains (each step p -= 0.1 * p * 0.5) while a
        reader pins the latest version and reads it whole, over and over;
        its rank is evicted at a step drawn at random after 8
        (ZSHARD_READER_SEED repeats a draw): the job rolls back to its
        checkpoint of step 8 and trains on with another gradient (p *
        0.25), so that steps after 8 have other bits on the new timeline.
        Every version read is one timeline's step whole, never a mix."""
        import random
        import threading
        import numpy as np
        n, steps, ck_at = 4, 24, 8
        seed = int(os.environ.get("ZSHARD_READER_SEED", str(time.time_ns() % 100000)))
        evict_at = random.Random(seed).randrange(ck_at + 1, steps - 2)
        what = "seed %d: evicted at step %d" % (seed, evict_at)
        zshard.create_job({"name": "rb", "stage": 3, "world_size": 1, "compute_dtype": "f32",
                           "readers": {"pins": 2}, "optimizer": {"kind": "sgd", "lr": 0.1},
                           "units": [{"name": "u%d" % k, "tensors": [{"name": "t%d" % k,
                                                                       "shape": [4096]}]}
                                     for k in range(n)]}, coordinator=self.c.addr)
        t = zshard.Trainer.join("rb", rank=0, coordinator=self.c.addr)
        rng = np.random.default_rng(11)
        first = [rng.standard_normal(4096).astype(np.float32) for _ in range(n)]

        def timeline(g, frm):
            tab = {frm[0]: frm[1]}
            for s in range(frm[0], steps):
                tab[s + 1] = [w + np.float32(-0.1) * (w * np.float32(g)) for w in tab[s]]
            return tab
        old = timeline(0.5, (0, first))
        new = timeline(0.25, (ck_at, old[ck_at]))
        for u in range(n):
            t.init_unit(u, first[u])
        at, errs, rolled, go = [0], [], [], threading.Event()

        def train():
            g, step = np.float32(0.5), 0
            while step < steps:
                try:
                    if step == ck_at and not rolled:
                        self.assertTrue(t.checkpoint_wait(t.checkpoint(ck_at), 60000))
                    if step == evict_at and not rolled:  # until the rank is evicted
                        self.assertTrue(go.wait(60))
                    for u in reversed(range(n)):
                        p = t.gather(u, step)
                        p.wait()
                        t.push(u, step, (p._buf * g).astype(np.float32)).wait()
                    step += 1
                    at[0] = step
                except zshard.Resume:
                    step, _ = t.resume()
                    g = np.float32(0.25)
                    rolled.append(step)
        th = in_thread(train, errs)
        seen, evicted = [], False
        deadline = time.monotonic() + 300
        with zshard.Reader("rb", coordinator=self.c.addr, timeout_ms=60000) as r:
            while (th.is_alive() or (not errs and (not seen or seen[-1][0] < steps))) \
                    and time.monotonic() < deadline and not errs:
                if not evicted and at[0] >= evict_at:
                    self.c.ctl("trainers", "evict", "rb", "0")
                    evicted = True
                    wait_for(lambda: json.loads(self.c.ctl("job", "show", "rb", "--json"))[
                        "timeline"] and not json.loads(self.c.ctl("job", "show", "rb",
                                                                  "--json"))["restoring"],
                             "the rollback the eviction starts")
                    go.set()
                try:
                    v = r.pin()
                    got = [r.read("t%d" % k) for k in range(n)]
                except (zshard.TryAgain, zshard.NotFound):  # moved on; dropped by the restore
                    time.sleep(0.005)
                    continue
                which = [name for name, tab in (("old", old), ("new", new))
                         if v in tab and all(np.array_equal(got[k], tab[v][k]) for k in range(n))]
                if not which:
                    errs.append("version %d is neither timeline's step %d whole" % (v, v))
                seen.append((v, which))
        th.join(120)
        self.assertEqual(errs, [], what)
        self.assertEqual(rolled, [ck_at], what)
        self.assertEqual(seen[-1][0], steps, "the last step was not read within 300 s (%s)" % what)
        after = [v for v, w in seen if w == ["new"]]
        self.assertTrue(after, (what, seen))
        print("test_reader: %d versions read whole and of one timeline, %d of the new one after "
              "a rollback to step %d (%s)" % (len(seen), len(set(after)), ck_at, what))
        t.close()

    def test_checkpoint_versions(self):
        """Committed checkpoints as versions (bf16 units, keep_checkpoints
        1, two servers): a checkpoint's reads are the bits and CRC32Cs a
        live pin of its step gave; a pinned checkpoint outlives its
        retirement until let go; two readers of it relay; refusals."""
        import numpy as np
        n, numel = 3, 5000
        zshard.create_job({"name": "ck", "stage": 3, "world_size": 1, "compute_dtype": "bf16",
                           "keep_checkpoints": 1, "readers": {"pins": 2},
                           "optimizer": {"kind": "sgd", "lr": 0.1},
                           "units": [{"name": "u%d" % k, "tensors": [
                               {"name": "a%d" % k, "shape": [numel - 1000]},
                               {"name": "b%d" % k, "shape": [10, 100]}]} for k in range(n)]},
                          coordinator=self.c.addr)
        t = zshard.Trainer.join("ck", rank=0, coordinator=self.c.addr)
        rng = np.random.default_rng(9)
        for u in range(n):
            t.init_unit(u, rng.standard_normal(numel).astype(np.float32))
        one = np.full(numel, 0x3f80, dtype=np.uint16)  # bf16 1.0

        def step(s):
            for u in reversed(range(n)):
                t.gather(u, s).wait()
                t.push(u, s, one).wait()

        def read_all(r):
            return {name: (r.read(name, "bf16").copy(), r.checksums[name])
                    for name in (ti.name for ti in r.tensors)}

        step(0)
        live = zshard.Reader("ck", coordinator=self.c.addr)
        self.assertEqual(live.pin(1), 1)
        at1 = read_all(live)
        live.close()
        id1 = t.checkpoint(1)
        self.assertTrue(t.checkpoint_wait(id1, 60000))

        rb = zshard.Reader("ck", coordinator=self.c.addr)
        self.assertEqual(rb.checkpoints(), [(id1, 1)])
        self.assertEqual(rb.wait_checkpoint(0), (id1, 1))
        rb.relay("127.0.0.1:0")
        self.assertEqual(rb.pin(checkpoint=id1), 1)
        got = read_all(rb)
        self.assertEqual(sorted(got), sorted(at1))
        for name, (bits, crc) in at1.items():
            self.assertTrue(np.array_equal(got[name][0], bits), name)
            self.assertEqual(got[name][1], crc, name)

        # a newer checkpoint commits: keep_checkpoints 1 would retire id1,
        # which a reader pins
        step(1)
        id2 = t.checkpoint(2)
        self.assertTrue(t.checkpoint_wait(id2, 60000))
        self.assertEqual(rb.checkpoints(), [(id1, 1), (id2, 2)])
        # a second reader of id1 reads it from the first
        rc = zshard.Reader("ck", coordinator=self.c.addr)
        rc.relay("127.0.0.1:0")
        self.assertEqual(rc.pin(checkpoint=id1), 1)
        self.assertEqual({k: v[1] for k, v in read_all(rc).items()},
                         {k: v[1] for k, v in at1.items()})
        st = rc.stats()
        self.assertEqual((st["parent"], st["bytes_from_servers"]), (rb.stats()["id"], 0), st)
        self.assertEqual(st["bytes_from_relay"], n * numel * 2, st)
        listing = json.loads(self.c.ctl("readers", "ck", "--json"))["readers"]
        self.assertEqual(sorted((x["checkpoint"], x["step"]) for x in listing),
                         [(id1, None), (id1, None)], listing)

        # both let go of id1: it is retired, and cannot be pinned again
        self.assertEqual(rb.pin(checkpoint=id2), 2)
        rc.release()
        wait_for(lambda: rb.checkpoints() == [(id2, 2)], "checkpoint %d's retirement" % id1)
        with self.assertRaises(zshard.NotFound):
            rc.pin(checkpoint=id1)
        with self.assertRaises(zshard.NotFound):
            rc.pin(checkpoint=id2 + 100)
        for bad in ({"checkpoint": 0}, {"step": 1 << 63}):
            with self.assertRaises(zshard.InvalidArgument):
                rc.pin(**bad)
        # a live pin after a checkpoint's, and back: the same bits
        self.assertEqual(rb.pin(), 2)
        at2 = read_all(rb)
        self.assertEqual(rb.pin(checkpoint=id2), 2)
        got = read_all(rb)
        for name, (bits, crc) in at2.items():
            self.assertTrue(np.array_equal(got[name][0], bits), name)
            self.assertEqual(got[name][1], crc, name)
        self.assertNotEqual(at2["a0"][1], at1["a0"][1])
        rc.close()

        # a rollback's step of the same number is another version: a
        # relaying reader of step 2 before a restore is no parent of one
        # of step 2 after it
        ra = zshard.Reader("ck", coordinator=self.c.addr)
        ra.relay("127.0.0.1:0")
        self.assertEqual(ra.pin(), 2)
        read_all(ra)
        t.close()
        self.c.ctl("checkpoint", "restore", "ck", str(id2), "--wait", "60000")
        rn = zshard.Reader("ck", coordinator=self.c.addr)
        rn.relay("127.0.0.1:0")

        def pinned():
            try:
                return rn.pin() == 2
            except zshard.TryAgain:
                return False
        wait_for(pinned, "step 2 after the restore")
        got = read_all(rn)
        self.assertEqual({k: v[1] for k, v in got.items()}, {k: v[1] for k, v in at2.items()})
        st = rn.stats()
        self.assertEqual((st["parent"], st["bytes_from_relay"]), (0, 0), st)
        print("test_reader: checkpoint %d read whole, bits and CRC32Cs of its step's live pin, "
              "kept past its retirement while pinned, relayed to a second reader; a restore's "
              "step 2 another tree than step 2 before it" % id1)
        for r in (ra, rb, rn):
            r.close()

    def test_job_without_pins(self):
        zshard.create_job({"name": "nopins", "stage": 3, "world_size": 1,
                           "compute_dtype": "f32", "optimizer": {"kind": "sgd", "lr": 0.1},
                           "units": [{"name": "u", "tensors": [{"name": "w",
                                                                 "shape": [64]}]}]},
                          coordinator=self.c.addr)
        t = zshard.Trainer.join("nopins", rank=0, coordinator=self.c.addr)
        import numpy as np
        t.init_unit(0, np.zeros(64, dtype=np.float32))
        with zshard.Reader("nopins", coordinator=self.c.addr) as r:
            self.assertEqual(r.latest(), 0)
            with self.assertRaises(zshard.PermissionDenied) as e:
                r.pin()
            self.assertIn("readers.pins is 0", str(e.exception))
        t.close()


if __name__ == "__main__":
    r = unittest.main(exit=False, verbosity=2).result
    bad = len(r.failures) + len(r.errors)
    if r.skipped:
        print("check: reader: skipped: %s" % r.skipped[0][1])
    elif bad:
        print("check: reader: %d of %d tests failed" % (bad, r.testsRun))
    else:
        print("check: reader: %d tests passed" % r.testsRun)
    sys.exit(1 if bad else 0)
