"""etcd.py - a real etcd cluster on loopback for the tests of coordinators
that share their catalog in etcd (faults.py --etcd, tests/integration/ha.sh).

    python3 tests/faults/etcd.py DIR N      starts N members under DIR, prints
                                            their client endpoints, starts again
                                            any that dies, and runs until
                                            SIGTERM (then stops them)

Debian's etcd-server (etcd 3.4) is the binary. Members listen on free
loopback ports; a member's data dir survives its death, so that a member
killed and started again (same command) rejoins with its data.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request


def reason():
    """Why no etcd cluster can be started here (None: it can)."""
    if not shutil.which("etcd"):
        return "no etcd (Debian's etcd-server; make check installs it as root)"
    return None


def free_ports(n):
    """n distinct free loopback ports (bound and released: a small race,
    which a test that fails to bind then reports)."""
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class Members:
    """The argv of each member of an n-member cluster under d."""

    def __init__(self, d, n, tag="zshard"):
        ports = free_ports(2 * n)
        self.client = ["127.0.0.1:%d" % p for p in ports[:n]]
        self.peer = ["127.0.0.1:%d" % p for p in ports[n:]]
        self.d, self.n, self.tag = d, n, tag
        self.initial = ",".join("e%d=http://%s" % (i, self.peer[i]) for i in range(n))

    def endpoints(self):
        return ",".join(self.client)

    def argv(self, i):
        return ["etcd", "--name", "e%d" % i, "--data-dir", os.path.join(self.d, "etcd-%d" % i),
                "--listen-client-urls", "http://" + self.client[i],
                "--advertise-client-urls", "http://" + self.client[i],
                "--listen-peer-urls", "http://" + self.peer[i],
                "--initial-advertise-peer-urls", "http://" + self.peer[i],
                "--initial-cluster", self.initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", self.tag, "--logger", "zap", "--log-level", "warn"]

    def healthy(self, timeout=30):
        """Waits until a member says it is healthy (it has a leader: a
        quorum is up); raises with the reason otherwise."""
        t0 = time.monotonic()
        last = ""
        while time.monotonic() - t0 < timeout:
            for ep in self.client:
                try:
                    with urllib.request.urlopen("http://%s/health" % ep, timeout=2) as r:
                        body = r.read().decode()
                    if '"true"' in body:
                        return
                    last = body.strip()[-300:]
                except OSError as e:
                    last = "%s: %s" % (ep, e)
            time.sleep(0.2)
        raise RuntimeError("the etcd cluster did not become healthy in %d s: %s" % (timeout, last))


    def raft_leader(self):
        """The index of the member that leads etcd's raft now (None: none
        says so), from each member's status (the v3 JSON gateway)."""
        for i, ep in enumerate(self.client):
            try:
                req = urllib.request.Request("http://%s/v3/maintenance/status" % ep,
                                             data=b"{}", method="POST")
                with urllib.request.urlopen(req, timeout=2) as r:
                    st = json.loads(r.read().decode())
                if st.get("leader") and st.get("header", {}).get("member_id") == st["leader"]:
                    return i
            except (OSError, ValueError):
                continue
        return None


def main():
    d, n = sys.argv[1], int(sys.argv[2])
    m = Members(d, n, "zshard-%d" % os.getpid())
    procs = [None] * n
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    signal.signal(signal.SIGINT, lambda *a: stop.append(1))

    def spawn(i):
        log = open(os.path.join(d, "etcd-%d.log" % i), "ab")
        procs[i] = subprocess.Popen(m.argv(i), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        log.close()

    for i in range(n):
        spawn(i)
    try:
        m.healthy()
        print(m.endpoints(), flush=True)
        # a supervisor, as systemd would be: a member that dies starts again
        while not stop:
            time.sleep(0.3)
            for i in range(n):
                if procs[i].poll() is not None and not stop:
                    spawn(i)
    finally:
        for p in procs:
            if p and p.poll() is None:
                p.terminate()
        for p in procs:
            if not p:
                continue
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
