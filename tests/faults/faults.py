#!/usr/bin/env python3
"""faults.py - zshard's fault matrix: random single-process kills, recovered
without hands, checked bitwise.

Each trial runs a real cluster on loopback (a coordinator, --servers shard
servers, --ranks trainers of examples/charlm with automatic checkpoints every
--every steps) under a supervisor that restarts whatever dies, as systemd or
Kubernetes would (daemons always; a trainer when it exits non-zero). One
process, drawn from the seed, is killed with SIGKILL once rank 0 has reached a
step also drawn from it; or (kind "stop") the whole cluster is stopped cleanly
(zshardctl job stop, then SIGTERM to every daemon) and started again, which
must not roll the job back; or (kind "pause") a server is stopped (SIGSTOP)
for 6 s, or (kind "tpause") a trainer (its lease lapses meanwhile: it comes
back to find its rank lost and the job rolled back); or (kind "trainer2") a
trainer killed and, once the coordinator has taken it for gone, another
(or its own replacement) after a drawn delay; or (kind "partition", as root) the last server, in a network
namespace of its own, is cut off for 6 s by taking its veth down. The
trainers must then fail with a bounded error and the job finish by itself. Nobody touches the cluster after that: the job must
finish by itself, and its final parameters and optimizer state (zshardctl
export --optimizer) must be bitwise those of the fault-free run.

    tests/faults/faults.py [--trials N] [--seed S] [--steps N] [--every K]
                           [--servers S] [--ranks R] [--batch B]
                           [--kinds trainer,trainer2,trainers,server,coordinator,stop,pause,partition,tpause]
                           [--stage 1|2|3] [--accum K]
                           [--trial KIND:STEP]...   fixed trials instead of drawn ones
                                                    (KIND may name a victim as the table
                                                    does: reseed-0-1-1016:18)
                           [--etcd] [--replicas K] [--clip] [--exit-on-resume]
                           [--lag-ms L]   (kind skew: skew-SERVER-DELAYMS as a victim)

With --etcd the catalog lives in a real 3-member etcd cluster and three
coordinators share it (one leads); every client gets the list of the three,
and the job clips gradients, so that every step's global-norm exchange goes
through the leader.
Its kinds: "leader" (kill -9 of the coordinator that leads), "lpause" (the
leader stopped for 6 s, past its 2 s etcd lease: another takes over, and
the old one, continued, must find itself fenced out and step down), "etcd"
(kill -9 of the member that leads etcd's raft), "standby" (kill -9 of a
coordinator that does not lead). These must cost no step: no rollback, no checkpoint committed
before the fault lost, the result bitwise that of the fault-free run; the
table adds the takeover time (from the fault until another coordinator
answers as leader).

With --replicas K (2 or 3) every shard of the job has K copies on distinct
servers: a lost server (kinds "server", "pause", "partition") must then cost
no step either: its shards' replicas take over, no rollback, bitwise. Kind
"server2" kills two servers at once: with K = 2 some shard has no copy left,
and the job must fall back to its checkpoint (and still end bitwise).
A killed trainer ("trainer", "trainer2", and "trainers": every rank at
once, all lost in one step) must not roll the job back: its replacement
redoes its step (the coordinator says "redoes step S"), bitwise.
Kind "tdie" (a victim tdie-R-U) is a trainer killed at an exact point:
rank R kills itself in the drawn step 300 ms after posting unit U's last
push (charlm --die-after-push), its other units' pushes not sent; its
replacement then pushes again what the servers have (with accumulation,
micro-batches of a unit whose last push is in).
Kind "skew" (with --lag-ms L: the last rank sleeps L ms each step before
its pushes, so the others end each step up to L ms before it) kills a
server a drawn 0-L ms after rank 0 ended the drawn step: at a random point
between the ranks' step ends, where leaves and rollbacks once arrived in
an order that left the trainers waiting out their step timeout (any wait
that runs out during a recovery fails the trial).
Kind "reseed" kills a server, then a second one a drawn 0-1.5 s after the
coordinator placed the first one's new copies, while they are seeded:
whatever it finds, the job either goes on with copies that hold every
step or falls back to its checkpoint, and ends bitwise either way.
With --clip (implied by --etcd) the job clips gradients: every step waits
for the norms of all shards, so a failover must bring the promoted copies'
norms in for the step the lost server left.

Prints one line per trial and a table: victim, kill step, the step the job
rolled back to, the recovery time (from the kill until rank 0 is three
steps past the one it had finished when the kill came), the trial's time against
the fault-free run's, and the verdict. Exits
non-zero if any trial did not end bitwise equal. Leaves nothing running and
nothing on disk (its directory is removed unless ZSHARD_FAULTS_KEEP is set).
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import etcd as etcd_cluster

ROOT = os.environ.get("ZSHARD_ROOT", os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
BIN = os.environ.get("ZSHARD_BIN", os.path.join(ROOT, "build", "bin"))
TRIAL_LIMIT_S = int(os.environ.get("ZSHARD_FAULTS_TRIAL_S", "300"))  # one trial, fault and recovery included


def now():
    return time.monotonic()


class Proc:
    """One supervised process: restarted when it dies (daemons) or exits
    non-zero (trainers), until the cluster stops."""

    def __init__(self, cl, name, argv_fn, log, daemon):
        self.cl, self.name, self.argv_fn, self.log, self.daemon = cl, name, argv_fn, log, daemon
        self.p = None
        self.done = False  # a trainer that exited 0
        self.starts = 0
        self.lock = threading.Lock()
        self.t = threading.Thread(target=self.run, daemon=True)

    def spawn(self):
        with self.lock:
            if self.cl.stopping:
                return None
            out = open(self.log, "ab")
            self.p = subprocess.Popen(self.argv_fn(), stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
            out.close()
            self.starts += 1
            return self.p

    def run(self):
        while not self.cl.stopping:
            p = self.spawn()
            if not p:
                return
            rc = p.wait()
            if self.cl.stopping:
                return
            if not self.daemon and rc == 0:
                self.done = True
                return
            self.cl.note("%s exited (rc %d): restarting it" % (self.name, rc))
            time.sleep(0.3)

    def kill(self, sig=signal.SIGKILL):
        with self.lock:
            if self.p and self.p.poll() is None:
                self.p.send_signal(sig)
                return True
        return False

    def stop(self):
        with self.lock:
            if self.p and self.p.poll() is None:
                self.p.terminate()
        if self.p:
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


PAUSE_S = 6  # a stopped server or a partition: longer than the servers' lease (2 s)


def netns_reason():
    """Why a partition cannot be made here (None: it can)."""
    if os.geteuid() != 0:
        return "not root (a network namespace needs it)"
    if not shutil.which("ip"):
        return "no ip (iproute2)"
    return None


class Cluster:
    def __init__(self, d, a, netns=False):
        self.d, self.a = d, a
        self.stopping = False
        self.events = []
        self.coord_addr = None
        self.procs = []
        self.job = "faults"
        self.stage = getattr(a, "stage", 3)
        self.ns = None
        self.etcd = None  # with --etcd: the members' argv (etcd.Members)
        self.coord_addrs = []
        self.host = "127.0.0.1"
        self.die = None  # (rank, unit, step): that rank's first process dies there
        if netns:
            self.make_netns()

    def make_netns(self):
        """The last server runs in a network namespace of its own, joined
        by a veth pair (10.0.8.1 <-> 10.0.8.2) that a partition takes down."""
        tag = "%d%d" % (os.getpid() % 10000, random.randrange(1000))
        self.ns, self.va, self.vb = "zsf" + tag, "zfa" + tag, "zfb" + tag
        self.host = "10.0.8.1"
        for cmd in (["ip", "netns", "add", self.ns],
                    ["ip", "link", "add", self.va, "type", "veth", "peer", "name", self.vb],
                    ["ip", "link", "set", self.vb, "netns", self.ns],
                    ["ip", "addr", "add", "10.0.8.1/24", "dev", self.va],
                    ["ip", "link", "set", self.va, "up"],
                    ["ip", "netns", "exec", self.ns, "ip", "addr", "add", "10.0.8.2/24", "dev",
                     self.vb],
                    ["ip", "netns", "exec", self.ns, "ip", "link", "set", self.vb, "up"],
                    ["ip", "netns", "exec", self.ns, "ip", "link", "set", "lo", "up"]):
            subprocess.run(cmd, check=True, capture_output=True)

    def drop_netns(self):
        if not self.ns:
            return
        r = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True, text=True)
        for pid in r.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        subprocess.run(["ip", "link", "del", self.va], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        self.ns = None

    def partition(self, seconds):
        subprocess.run(["ip", "link", "set", self.va, "down"], check=True)
        time.sleep(seconds)
        subprocess.run(["ip", "link", "set", self.va, "up"], check=True)

    def note(self, msg):
        self.events.append((now(), msg))

    def ha_coordinator_argv(self, k):
        return [os.path.join(BIN, "zshard-coordinator"), "--listen", self.coord_addrs[k],
                "--etcd", self.etcd.endpoints(), "--etcd-prefix", "/faults",
                "--etcd-lease-s", "2", "--lease-ms", "2000", "--trainer-lease-ms", "3000",
                "--trainer-gone-ms", "1500"]

    def start_ha(self):
        """Three etcd members and three coordinators on them; the list of
        the coordinators is what every client gets."""
        self.etcd = etcd_cluster.Members(self.d, 3, "faults-%d" % os.getpid())
        for i in range(3):
            p = Proc(self, "etcd-%d" % i, lambda i=i: self.etcd.argv(i),
                     os.path.join(self.d, "etcd-%d.log" % i), True)
            self.procs.append(p)
            p.t.start()
        self.etcd.healthy()
        self.coord_addrs = ["127.0.0.1:%d" % p for p in etcd_cluster.free_ports(3)]
        self.coord_addr = ",".join(self.coord_addrs)
        for k in range(3):
            p = Proc(self, "coordinator-%d" % k, lambda k=k: self.ha_coordinator_argv(k),
                     os.path.join(self.d, "coordinator-%d.log" % k), True)
            self.procs.append(p)
            p.t.start()
        t0 = now()
        while self.leader() is None:
            if now() - t0 > 30:
                raise RuntimeError("no coordinator took the lead within 30 s")
            time.sleep(0.1)

    def leader(self):
        """The index of the coordinator that leads now (None: none answers;
        each is asked alone, so that a stopped one costs only its bound)."""
        for k, addr in enumerate(self.coord_addrs):
            r = subprocess.run([os.path.join(BIN, "zshardctl"), "--coordinator", addr,
                                "--timeout-ms", "500", "status"],
                               capture_output=True, text=True, timeout=30)
            if r.returncode == 0 and r.stdout.startswith("coordinator %s " % addr):
                return k
        return None

    def committed(self):
        """The ids of the job's committed checkpoints."""
        j = json.loads(self.ctl("checkpoint", "list", self.job, "--json"))
        return {c["id"] for c in j["checkpoints"] if c["state"] == "committed"}

    def coordinator_argv(self):
        listen = self.coord_addr or self.host + ":0"
        return [os.path.join(BIN, "zshard-coordinator"), "--listen", listen,
                "--data-dir", os.path.join(self.d, "coord"),
                "--port-file", os.path.join(self.d, "coord.addr"),
                "--lease-ms", "2000", "--trainer-lease-ms", "3000",
                # lease_only (bench/recovery.py's "before" row): a killed
                # trainer is seen by its lease alone, and rolls back
                "--trainer-gone-ms", "3600000" if getattr(self.a, "lease_only", False) else "1500"]

    def server_argv(self, i):
        argv = [os.path.join(BIN, "zshard-server"), "--coordinator", self.coord_addr,
                "--data-dir", os.path.join(self.d, "server-%d" % i), "--capacity", "256M",
                "--step-timeout-ms", "20000", "--coordinator-timeout-ms", "60000",
                "--rdma", "off", "--listen", self.host + ":0"]
        if self.ns and i == self.a.servers - 1:  # the one beyond the veth
            argv[-1] = "10.0.8.2:0"
            argv = ["ip", "netns", "exec", self.ns] + argv
        return argv

    def trainer_argv(self, r):
        argv = [os.path.join(BIN, "charlm"), "--coordinator", self.coord_addr, "--job", self.job,
                "--rank", str(r), "--steps", str(self.a.steps), "--batch", str(self.a.batch),
                "--print-every", "1", "--transport", getattr(self.a, "transport", "tcp")]
        if getattr(self.a, "accum", 1) > 1:
            argv += ["--micro-batches", str(self.a.accum)]
        if getattr(self.a, "exit_on_resume", False):
            argv += ["--exit-on-resume"]
        if getattr(self.a, "lag_ms", 0) and r == self.a.ranks - 1:
            argv += ["--lag-ms", str(self.a.lag_ms)]
        if self.die and self.die[0] == r:  # its replacement, begun later, does not die
            argv += ["--die-after-push", "%d:%d" % (self.die[2], self.die[1])]
        return argv

    def ctl(self, *args, check=True):
        r = subprocess.run([os.path.join(BIN, "zshardctl"), "--coordinator", self.coord_addr,
                            "--timeout-ms", "20000"] + list(args),
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode:
            raise RuntimeError("zshardctl %s: %s" % (" ".join(args), r.stderr.strip()))
        return r.stdout

    def start(self):
        if self.a.etcd:
            self.start_ha()
        else:
            self.start_one()
        self.start_rest()

    def start_one(self):
        co = Proc(self, "coordinator", self.coordinator_argv,
                  os.path.join(self.d, "coordinator.log"), True)
        self.procs.append(co)
        co.t.start()
        path = os.path.join(self.d, "coord.addr")
        t0 = now()
        while not (os.path.exists(path) and open(path).read().strip()):
            if now() - t0 > 20:
                raise RuntimeError("the coordinator did not start (see coordinator.log)")
            time.sleep(0.05)
        self.coord_addr = open(path).read().strip()

    def start_rest(self):
        for i in range(self.a.servers):
            p = Proc(self, "server-%d" % i, lambda i=i: self.server_argv(i),
                     os.path.join(self.d, "server-%d.log" % i), True)
            self.procs.append(p)
            p.t.start()
        t0 = now()
        while True:
            up = self.ctl("servers", check=False).count(" up")
            if up >= self.a.servers:
                break
            if now() - t0 > 30:
                raise RuntimeError("servers did not come up")
            time.sleep(0.1)
        spec = subprocess.run([os.path.join(BIN, "charlm"), "--print-spec", "--job", self.job,
                               "--world", str(self.a.ranks), "--stage", str(self.stage)],
                              capture_output=True, text=True, check=True).stdout
        st = '"stage": %d,' % self.stage
        if st not in spec:
            raise RuntimeError("charlm's spec changed: cannot set the stage")
        spec = spec.replace(st, '%s "checkpoint_every": %d,' % (st, self.a.every))
        if getattr(self.a, "replicas", 1) > 1:
            spec = spec.replace(st, '%s "replicas": %d,' % (st, self.a.replicas))
        if getattr(self.a, "data_tls", False):  # the tcp data plane encrypted
            spec = spec.replace(st, '%s "data_tls": true,' % st)
        if self.a.etcd or getattr(self.a, "clip", False):  # every step exchanges norms (with etcd: through the leader)
            spec = spec.replace('"kind": "adamw",', '"kind": "adamw", "clip_norm": 1.0,')
            if "clip_norm" not in spec:
                raise RuntimeError("charlm's spec changed: cannot turn clipping on")
        sp = os.path.join(self.d, "job.json")
        open(sp, "w").write(spec)
        self.ctl("job", "create", sp)
        for r in range(self.a.ranks):
            p = Proc(self, "rank-%d" % r, lambda r=r: self.trainer_argv(r),
                     os.path.join(self.d, "rank-%d.log" % r), False)
            self.procs.append(p)
            p.t.start()

    def restoring(self):
        j = json.loads(self.ctl("job", "show", self.job, "--json"))
        return bool(j.get("restoring", j.get("job", {}).get("restoring")))

    def bounce(self):
        """A clean stop of the whole cluster and a start on the same
        directories: every rank leaves before one step (zshardctl job
        stop), the daemons get SIGTERM (the servers keep the job's live
        state), then everything starts again, trainers included."""
        r = subprocess.run([os.path.join(BIN, "zshardctl"), "--coordinator", self.coord_addr,
                            "--timeout-ms", "20000", "job", "stop", self.job],
                           capture_output=True, text=True, timeout=60)
        if r.returncode and self.trainers_done():
            raise RuntimeError("the job finished before it could be stopped (a loaded "
                               "machine: give it more --steps)")
        if r.returncode:
            raise RuntimeError("zshardctl job stop %s: %s" % (self.job, r.stderr.strip()))
        old = self.procs
        self.stopping = True
        for p in reversed(old):
            p.stop()
        for p in old:
            p.t.join(15)
        self.stopping = False
        self.procs = []
        names = [(p.name, p.argv_fn, p.log, p.daemon) for p in old]
        for name, fn, log, daemon in names:
            p = Proc(self, name, fn, log, daemon)
            self.procs.append(p)
            p.t.start()
            if name == "coordinator":
                time.sleep(0.3)

    def proc(self, name):
        return next(p for p in self.procs if p.name == name)

    def coordinator_log(self):
        return "".join(open(os.path.join(self.d, f), errors="replace").read()
                       for f in os.listdir(self.d) if f.startswith("coordinator"))

    def rank0_step(self):
        try:
            txt = open(os.path.join(self.d, "rank-0.log")).read()
        except OSError:
            return -1
        m = re.findall(r"rank 0 step +(\d+)", txt)
        return int(m[-1]) if m else -1

    def trainers_done(self):
        return all(p.done for p in self.procs if p.name.startswith("rank-"))

    def stop(self):
        self.stopping = True
        for p in reversed(self.procs):
            p.stop()
        for p in self.procs:
            p.t.join(15)
        self.drop_netns()


def committed_now(cl):
    """The committed checkpoints, or None when the cluster cannot say now."""
    try:
        return cl.committed()
    except Exception:  # a takeover just done: asked again at the end
        return None


def kill_twice(cl, first, seen, second, dms, at, during):
    """Kills process first at step at; once the coordinator's log matches
    seen (a regular expression: during is under way), kills second dms ms
    later. The time of the first kill, or None when first was not running."""
    if not cl.proc(first).kill():
        return None
    t0 = now()
    cl.note("killed %s at step %d" % (first, at))
    while not re.search(seen, cl.coordinator_log()):
        if now() - t0 > 60:
            raise RuntimeError("%s was not under way within 60 s of killing %s" % (during, first))
        time.sleep(0.02)
    time.sleep(dms / 1000.0)
    cl.proc(second).kill()
    cl.note("killed %s %d ms into %s" % (second, dms, during))
    return t0


def run_trial(a, victim, kill_step, tag):
    """Returns a dict: the outcome of one trial (victim None: fault-free)."""
    d = tempfile.mkdtemp(prefix="zshard-faults-")
    cl = Cluster(d, a, netns=victim == "partition")
    if victim and victim.startswith("tdie-"):
        _, dr, du = victim.split("-")
        cl.die = (int(dr), int(du), kill_step)
    res = {"victim": victim or "-", "kill_step": kill_step, "rollback": "-", "recovery": None,
           "seconds": None, "digest": None, "ok": False, "why": "", "takeover": None}
    old_leader, before, took_over, next_poll, at_takeover = None, set(), None, 0.0, None
    t0 = now()
    try:
        cl.start()
        killed_at = None
        while not cl.trainers_done():
            if now() - t0 > TRIAL_LIMIT_S:
                raise RuntimeError("the job did not finish within %d s" % TRIAL_LIMIT_S)
            if victim and victim.startswith("tdie-") and killed_at is None:
                # it kills itself: seen as its first process's end
                if cl.proc("rank-%d" % cl.die[0]).starts > 1:
                    killed_at = now()
                    cl.note("rank %d died after its push of unit %d in step %d"
                            % cl.die)
            elif victim and killed_at is None and cl.rank0_step() >= kill_step:
                at = cl.rank0_step()
                if victim in ("leader", "lpause", "standby"):
                    before = cl.committed()
                    old_leader = cl.leader()
                    if old_leader is None:
                        raise RuntimeError("no coordinator leads before the fault")
                    k = old_leader if victim != "standby" else (old_leader + 1) % 3
                    p = cl.proc("coordinator-%d" % k)
                    # a takeover: another leads, or this one started again
                    # (its supervisor restarts it at once, as a standby)
                    took_over = lambda k=k, p=p, n=p.starts: (
                        cl.leader() not in (None, k) or
                        (p.starts > n and cl.leader() == k))
                    res["victim"] = "%s (coordinator-%d)" % (victim, k)
                    killed_at = now()
                    res["kill_step"] = kill_step = at
                    if victim == "lpause":
                        p.kill(signal.SIGSTOP)
                        cl.note("stopped the leader, coordinator-%d, at step %d" % (k, at))
                        t1 = now()
                        while now() - t1 < PAUSE_S:
                            if res["takeover"] is None and cl.leader() not in (None, k):
                                res["takeover"] = now() - killed_at
                            time.sleep(0.05)
                        p.kill(signal.SIGCONT)
                    else:
                        p.kill()
                        cl.note("killed coordinator-%d at step %d" % (k, at))
                    if victim == "standby":
                        old_leader = None  # no takeover to wait for
                elif victim.startswith("etcd-"):
                    before = cl.committed()
                    lead = cl.etcd.raft_leader()  # etcd's own leader, when known
                    if lead is not None:
                        victim = res["victim"] = "etcd-%d" % lead
                        res["victim"] += " (raft leader)"
                    if cl.proc(victim).kill():
                        killed_at = now()
                        res["kill_step"] = kill_step = at
                        cl.note("killed %s at step %d" % (victim, at))
                elif victim == "cluster":
                    killed_at = now()
                    res["kill_step"] = kill_step = at
                    cl.bounce()
                elif victim == "partition":
                    killed_at = now()
                    res["kill_step"] = kill_step = at
                    cl.partition(PAUSE_S)
                elif victim.startswith("pause-") or victim.startswith("tpause-"):
                    p = cl.proc(("server-" if victim[0] == "p" else "rank-") +
                                victim.split("-")[1])
                    if p.kill(signal.SIGSTOP):
                        killed_at = now()
                        res["kill_step"] = kill_step = at
                        time.sleep(PAUSE_S)
                        p.kill(signal.SIGCONT)
                elif victim.startswith("reseed-") or victim.startswith("trainer2-"):
                    # a second loss inside the first one's recovery: x
                    # killed; once the coordinator says it is under way
                    # (reseed: new copies placed, the restarted server x
                    # registered; trainer2: rank x taken for gone, the
                    # rollback begun), y (reseed: another server; trainer2:
                    # the other rank, or x's replacement) after the drawn
                    # delay
                    _, x, y, dms = victim.split("-")
                    if victim[0] == "r":
                        pfx, seen, during = "server-", "copies rebuilt", "the re-seed"
                    else:
                        pfx, seen = "rank-", r"rank %s (is gone|missed its lease)" % x
                        during = "the rollback"
                    first = kill_twice(cl, pfx + x, seen, pfx + y, int(dms), at, during)
                    if first is not None:
                        killed_at = first
                        res["kill_step"] = kill_step = at
                elif victim.startswith("skew-"):
                    # rank 0 has ended step at; the last rank, lagging, is
                    # still in it: server x killed the drawn delay later
                    _, x, dms = victim.split("-")
                    time.sleep(int(dms) / 1000.0)
                    if cl.proc("server-" + x).kill():
                        killed_at = now()
                        res["kill_step"] = kill_step = at
                        cl.note("killed server-%s %d ms after rank 0 ended step %d"
                                % (x, int(dms), at))
                elif victim == "ranks":  # every trainer at once: lost in one step
                    if all([cl.proc("rank-%d" % r).kill() for r in range(a.ranks)]):
                        killed_at = now()
                        res["kill_step"] = kill_step = at
                        cl.note("killed every rank at step %d" % at)
                elif victim.startswith("servers-"):  # two at once
                    pair = victim.split("-")[1:]
                    if all([cl.proc("server-" + k).kill() for k in pair]):
                        killed_at = now()
                        res["kill_step"] = kill_step = at
                        cl.note("killed servers %s at step %d" % (" and ".join(pair), at))
                elif cl.proc(victim).kill():
                    killed_at = now()
                    res["kill_step"] = kill_step = at
                    cl.note("killed %s at step %d" % (victim, kill_step))
            elif (killed_at is not None and old_leader is not None and res["takeover"] is None
                  and now() >= next_poll):
                next_poll = now() + 0.1  # asking who leads costs CPU the job needs
                if took_over():
                    res["takeover"] = now() - killed_at
                    at_takeover = committed_now(cl)
            elif killed_at is not None and res["recovery"] is None:
                # recovered: rank 0 three steps past the one it had
                # finished when the kill came (a rank may run up to two
                # steps ahead of a lost one: its step ends when its own
                # pushes land, and the lost one may have pushed the next)
                if cl.rank0_step() >= kill_step + 3:
                    res["recovery"] = now() - killed_at
            time.sleep(0.02)
        res["seconds"] = now() - t0
        t1 = now()  # a rollback still under way finishes before the export
        while cl.restoring():
            if now() - t1 > 60:
                raise RuntimeError("the job's rollback did not finish within 60 s")
            time.sleep(0.1)
        if victim and killed_at is None:
            raise RuntimeError("the job finished before step %d: nothing was killed" % kill_step)
        out = os.path.join(d, "final.safetensors")
        cl.ctl("export", cl.job, "--out", out, "--optimizer")
        res["digest"] = hashlib.sha256(open(out, "rb").read()).hexdigest()
        if killed_at is not None:
            # the rollback, and the first step finished after the kill
            logs = "".join(open(os.path.join(d, "rank-%d.log" % r)).read()
                           for r in range(a.ranks))
            m = re.findall(r"resumes at step (\d+)", logs)
            res["rollback"] = m[-1] if m else "none"
            coord_log = "".join(open(os.path.join(d, f), errors="replace").read()
                                for f in os.listdir(d) if f.startswith("coordinator"))
            if victim == "cluster":
                if "rolling back" in coord_log or "starts again from step 0" in coord_log:
                    raise RuntimeError("the clean stop rolled the job back")
                res["rollback"] += " (kept)"
            lease_only = getattr(a, "lease_only", False)
            if lease_only and "rolling back" not in coord_log:
                raise RuntimeError("a trainer seen by its lease alone did not roll the job back")
            if (victim.startswith("rank-") or victim.startswith("trainer2-") or
                    victim.startswith("tdie-")) and not lease_only and \
                    res["rollback"] != "none" and "is gone (its data connections" not in coord_log:
                # a killed trainer's connections end at once: its servers
                # say so, and it is gone in 1.5 s, before its 3 s lease
                raise RuntimeError("the killed trainer was not seen by its servers' report "
                                   "of its connections (only by its lease)")
            if not lease_only and (victim.startswith("rank-") or victim.startswith("trainer2-") or
                                   victim.startswith("tdie-") or victim == "ranks"):
                # a killed trainer costs its own step: its replacement
                # redoes it, the job does not roll back
                redo = re.findall(r"its replacement redoes step (\d+)", coord_log)
                if "rolling back" in coord_log or "starts again from step 0" in coord_log:
                    raise RuntimeError("a killed trainer rolled the job back (to step %s): its "
                                       "replacement should have redone its step" % res["rollback"])
                if res["rollback"] != "none" and not redo:
                    raise RuntimeError("a rank resumed at step %s, and no replacement redid a step"
                                       % res["rollback"])
                if redo:
                    res["rollback"] = "none (redo %s)" % ",".join(redo)
            if getattr(a, "replicas", 1) > 1 and (victim.startswith("server-") or
                                                  victim.startswith("pause-") or
                                                  victim == "partition"):
                # one server lost: its replicas take over, no step is lost
                if res["rollback"] != "none" or "rolling back" in coord_log or \
                        "starts again from step 0" in coord_log:
                    raise RuntimeError("the job rolled back (to step %s) though it keeps %d copies"
                                       % (res["rollback"], a.replicas))
                if "replicas take over" not in coord_log:
                    raise RuntimeError("no failover was recorded by the coordinator")
                res["rollback"] = "none (failover)"
            if getattr(a, "replicas", 1) == 2 and victim.startswith("servers-") and \
                    "rolling back" not in coord_log and "starts again from step 0" not in coord_log:
                raise RuntimeError("two servers of three lost with two copies, and no rollback: "
                                   "a shard with no copy left cannot have gone on")
            if cl.etcd and old_leader is not None and res["takeover"] is None:
                t1 = now()  # the job ended first: the takeover is still timed
                while res["takeover"] is None and now() - t1 < 30:
                    if took_over():
                        res["takeover"] = now() - killed_at
                        at_takeover = committed_now(cl)
                    time.sleep(0.05)
            if cl.etcd and victim in ("leader", "lpause", "standby") or victim.startswith("etcd-"):
                # a coordinator's or an etcd member's loss costs no step
                logs = "".join(open(os.path.join(d, f), errors="replace").read()
                               for f in os.listdir(d) if f.startswith("coordinator-"))
                if res["rollback"] != "none" or "rolling back" in logs:
                    raise RuntimeError("the job rolled back (to step %s): a step was lost"
                                       % res["rollback"])
                # kept unless retired: the job keeps its newest few, and a
                # leader killed right after retiring one has no line for it
                # in its log (the retirement is in the catalog). One missing
                # with as many newer ones in the catalog the new leader
                # took over (not at the end: by then any would have) was
                # retired before the kill
                with open(os.path.join(d, "job.json")) as f:
                    keep = json.load(f).get("keep_checkpoints") or 3  # model.c's default
                retired = {int(x) for x in re.findall(r"checkpoint (\d+) retired", logs)}
                ref = at_takeover if at_takeover is not None else set()
                lost = {c for c in before - cl.committed() - retired
                        if sum(1 for x in ref if x > c) < keep}
                if lost:
                    raise RuntimeError("committed checkpoints %s were lost" % sorted(lost))
                if old_leader is not None and res["takeover"] is None:
                    raise RuntimeError("no other coordinator took the lead")
                if victim == "lpause" and "lost the lead" not in logs:
                    raise RuntimeError("the stopped leader, continued, did not step down")
        # recovered without a wait that ran out: a step timeout after a
        # fault means two processes disagreed about the step the job is at
        logs = "".join(open(os.path.join(d, f), errors="replace").read()
                       for f in os.listdir(d) if f.endswith(".log"))
        if victim and re.search(r"waited \d+ ms for ", logs):
            raise RuntimeError("a wait ran out its step timeout during the recovery: %s" %
                               re.search(r"[^\n]*waited \d+ ms for[^\n]*", logs).group(0))
        res["ok"] = True
    except KeyboardInterrupt:
        STOPPING["cleaning"] = True
        cl.stop()
        shutil.rmtree(d, ignore_errors=True)
        raise
    except Exception as e:  # the trial failed: say why, keep going
        res["why"] = str(e)
        res["seconds"] = now() - t0
    finally:
        STOPPING["cleaning"] = True  # a signal now waits until this is done
        cl.stop()
        # (an interrupt removed the directory above: nothing to keep)
        if os.path.isdir(d) and (res["why"] or os.environ.get("ZSHARD_FAULTS_KEEP")):
            keep = os.environ.get("ZSHARD_FAULTS_KEEP")
            if keep:
                dst = os.path.join(keep, "trial-%s" % tag)
                # the final export stays (compared with the fault-free
                # run's, it says which tensors and elements differ)
                shutil.copytree(d, dst, dirs_exist_ok=True,
                                ignore=lambda _, names: [
                                    n for n in names if n == "data.mdb" or
                                    (n.endswith(".safetensors") and n != "final.safetensors")])
                res["logs"] = dst
            else:
                # what the supervisor did, then what each process said
                for at, msg in cl.events:
                    sys.stderr.write("+%.1f s: %s\n" % (at - t0, msg))
                for f in sorted(os.listdir(d)):
                    if f.endswith(".log"):
                        txt = open(os.path.join(d, f), errors="replace").read()
                        # a restarted process's log goes on after the one
                        # that failed: its errors and warnings first (a
                        # trainer's last words: "charlm rank R: why"), then
                        # the tail
                        bad = [ln for ln in txt.splitlines()
                               if re.search(r"ERROR|WARN|error|failed|waited \d+ ms|^charlm rank", ln)]
                        if bad:
                            sys.stderr.write("--- %s (errors and warnings)\n%s\n" %
                                             (f, "\n".join(bad[:40])))
                        sys.stderr.write("--- %s (tail)\n%s\n" % (f, txt[-1500:]))
        shutil.rmtree(d, ignore_errors=True)
        STOPPING["cleaning"] = False
        if STOPPING["pending"]:  # a signal came during the cleanup: end now
            raise KeyboardInterrupt
    return res


# a signal during a trial's cleanup must not cut it short (its processes
# and directory would stay behind): it is noted and acted on after
STOPPING = {"cleaning": False, "pending": False}


def on_signal(sig, frame):
    # the trial's finally stops its cluster; then the run ends
    if STOPPING["cleaning"] or STOPPING["pending"]:
        STOPPING["pending"] = True
        return
    STOPPING["pending"] = True
    raise KeyboardInterrupt


def main():
    signal.signal(signal.SIGTERM, on_signal)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32, help="charlm's batch (its step time)")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--kinds", default=None,
                    help="default: trainer,trainer2,trainers,server,coordinator,stop,pause,partition,tpause; "
                    "with --replicas: server,pause,partition,trainer,trainers; "
                    "with --etcd: leader,lpause,standby,etcd,server,trainer")
    ap.add_argument("--etcd", action="store_true",
                    help="three coordinators on a 3-member etcd cluster")
    ap.add_argument("--replicas", type=int, default=1,
                    help="copies of each shard (2, 3: a lost server costs no step)")
    ap.add_argument("--data-tls", action="store_true",
                    help="the job's tcp data plane encrypted (data_tls): trainers' connections "
                         "and the primaries' forwards")
    ap.add_argument("--clip", action="store_true",
                    help="the job clips gradients (global-norm exchange at every step)")
    ap.add_argument("--stage", type=int, default=3, choices=(1, 2, 3),
                    help="the job's ZeRO stage")
    ap.add_argument("--accum", type=int, default=1,
                    help="micro-batches per step: all but the last pushed partial (gradient "
                         "accumulation)")
    ap.add_argument("--exit-on-resume", action="store_true",
                    help="a trainer that is told to resume exits (and is started again) "
                         "instead of resuming in its process, as a script whose exception ends "
                         "it: its leave, of a timeline that ended, must not say where the job is")
    ap.add_argument("--lag-ms", type=int, default=0,
                    help="the last rank sleeps so long each step before its pushes: the other "
                         "ranks end each step that much earlier (kind skew kills a server "
                         "inside that window)")
    ap.add_argument("--transport", default="tcp", choices=("tcp", "shm", "auto"),
                    help="the trainers' (shm: one-sided pushes, PUSH_BEGIN then PUSH, whose "
                         "redo flag a replacement's pushes must carry too)")
    ap.add_argument("--trial", action="append", default=[],
                    help="KIND:STEP, e.g. server:17 (fixed trials; --trials is ignored)")
    a = ap.parse_args()
    for b in ("zshard-coordinator", "zshard-server", "zshardctl", "charlm"):
        if not os.access(os.path.join(BIN, b), os.X_OK):
            sys.exit("faults: %s/%s is missing: run make first" % (BIN, b))
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    rng = random.Random(seed)
    if a.etcd and etcd_cluster.reason():
        print("faults --etcd: skipped: %s" % etcd_cluster.reason())
        return 77
    kinds = (a.kinds or ("leader,lpause,standby,etcd,server,trainer" if a.etcd else
                         "server,pause,partition,trainer,trainers" if a.replicas > 1 else
                         "trainer,trainer2,trainers,server,coordinator,stop,pause,partition,tpause")
             ).split(",")
    if a.replicas > 1 and a.servers < a.replicas:
        sys.exit("faults: --replicas %d needs --servers %d or more" % (a.replicas, a.replicas))
    used = kinds + [t.split(":")[0] for t in a.trial]
    if "server2" in used and a.servers < 3:
        sys.exit("faults: kind server2 needs --servers 3 or more")
    if any(k.startswith("skew") for k in used) and a.lag_ms < 1:
        sys.exit("faults: kind skew needs --lag-ms (a window between the ranks' step ends)")
    if "reseed" in used and (a.servers < 3 or a.replicas < 2):
        sys.exit("faults: kind reseed needs --servers 3 or more and --replicas 2 or 3")
    ha_kinds = {"leader", "lpause", "standby", "etcd"}
    for k in set(kinds + [t.split(":")[0] for t in a.trial]):
        if a.etcd and k in ("coordinator", "stop"):
            sys.exit("faults: kind %s does not go with --etcd (leader, lpause, standby do)" % k)
        if not a.etcd and k in ha_kinds:
            sys.exit("faults: kind %s needs --etcd" % k)
    plan = []
    for t in a.trial:
        kind, step = t.split(":")
        plan.append((kind, int(step)))
    # a second kill comes up to 1.5 s (some 40 steps) after the first: the
    # job must not have finished by then
    late = lambda k: 60 if k == "reseed" else 2
    if not plan:
        plan = [(k, rng.randrange(1, a.steps - late(k)))
                for k in [rng.choice(kinds) for _ in range(a.trials)]]
    print("faults: seed %d, %d trials; %d servers, %d ranks, %d steps of batch %d, checkpoint every %d%s%s%s"
          % (seed, len(plan), a.servers, a.ranks, a.steps, a.batch, a.every,
             "; 3 coordinators on a 3-member etcd cluster" if a.etcd else "",
             "; %d copies of each shard" % a.replicas if a.replicas > 1 else "",
             "; gradients clipped" if a.clip and not a.etcd else "") +
          ("; %d micro-batches a step" % a.accum if a.accum > 1 else "") +
          ("; the data plane encrypted (data_tls)" if a.data_tls else ""), flush=True)
    base = run_trial(a, None, 0, "baseline")
    if not base["ok"]:
        print("faults: the fault-free run failed: %s" % base["why"])
        return 1
    print("faults: fault-free run: %.1f s, export sha256 %s" % (base["seconds"],
                                                               base["digest"][:16]), flush=True)
    rows, bad, skipped = [], 0, 0
    for i, (kind, step) in enumerate(plan):
        if kind.startswith("reseed-") or kind.startswith("skew-") or \
                kind.startswith("trainer2-") or kind.startswith("tdie-"):  # a whole victim
            kind, victim = kind.split("-")[0], kind
        else:
            victim = None
        n = {"trainer": a.ranks, "trainer2": a.ranks, "tdie": a.ranks, "trainers": 1, "server": a.servers, "server2": a.servers, "reseed": a.servers,
             "skew": a.servers,
             "coordinator": 1,
             "stop": 1,
             "pause": a.servers, "partition": 1, "tpause": a.ranks, "leader": 1, "lpause": 1,
             "standby": 1, "etcd": 3}[kind]
        idx = rng.randrange(n)
        victim = victim or {"trainer": "rank-%d" % idx, "server": "server-%d" % idx,
                  "tdie": "tdie-%d-%d" % (idx, rng.randrange(4)),
                  "trainer2": "trainer2-%d-%d-%d" % (idx, rng.choice([idx, (idx + 1) % a.ranks]),
                                                     rng.randrange(1500)),
                  "server2": "servers-%d-%d" % (idx, (idx + 1) % a.servers), "trainers": "ranks",
                  "reseed": "reseed-%d-%d-%d" % (idx, (idx + 1 + rng.randrange(a.servers - 1))
                                                 % a.servers, rng.randrange(1500)),
                  "skew": "skew-%d-%d" % (idx, rng.randrange(a.lag_ms + 1)),
                  "coordinator": "coordinator", "stop": "cluster", "pause": "pause-%d" % idx,
                  "partition": "partition", "tpause": "tpause-%d" % idx, "leader": "leader",
                  "lpause": "lpause", "standby": "standby", "etcd": "etcd-%d" % idx}[kind]
        if kind == "partition" and netns_reason():
            print("trial %2d: partition: skipped: %s" % (i, netns_reason()), flush=True)
            skipped += 1
            continue
        r = run_trial(a, victim, step, str(i))
        equal = r["ok"] and r["digest"] == base["digest"]
        if r["ok"] and not equal:
            r["why"] = "finished, but not bitwise equal to the fault-free run"
        bad += not equal
        r["equal"] = equal
        rows.append(r)
        print("trial %2d: kill %-11s at step %3d: %s (%.1f s)%s%s" %
              (i, r["victim"], r["kill_step"], "bitwise equal" if equal else "FAILED", r["seconds"],
               ": " + r["why"] if r["why"] else "",
               " (logs in %s)" % r["logs"] if r.get("logs") else ""), flush=True)
    print("\n| # | victim | killed at step | rolled back to | takeover | recovered after | "
          "trial s | vs fault-free | result |")
    print("|---|---|---|---|---|---|---|---|---|")
    sec = lambda v: "%.1f s" % v if v is not None else "-"
    for i, r in enumerate(rows):
        print("| %d | %s | %d | %s | %s | %s | %.1f | %+.1f s | %s |" %
              (i, r["victim"], r["kill_step"], r["rollback"], sec(r["takeover"]),
               sec(r["recovery"]),
               r["seconds"], r["seconds"] - base["seconds"],
               "bitwise equal" if r["equal"] else "FAILED"))
    print("\nfaults: %d of %d trials bitwise equal to the fault-free run (seed %d)%s"
          % (len(rows) - bad, len(rows), seed,
             ", %d skipped (the reason is above)" % skipped if skipped else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
