"""cluster.py - a real zshard cluster for the Python tests: a coordinator and
shard servers on loopback (free ports), in a temporary directory that
close() removes with every process stopped; the daemons die with the test
process however it ends."""
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time


def die_with_us():
    """In a daemon before exec: SIGKILL when this test process ends, however
    it ends (a crash included), so that nothing is left running."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Cluster:
    """A coordinator and servers shard servers (capacity each; server_args
    their other flags; coord_args the coordinator's, after its own) in a
    temporary directory, removed by close() with every process stopped."""

    def __init__(self, bindir, servers=2, capacity="64M", server_args=(), coord_args=()):
        self.bin = bindir
        self.d = tempfile.mkdtemp(prefix="zshard-py-")
        self.procs = []
        self.named = {}
        self.server_argv = {}
        pf = os.path.join(self.d, "coord.addr")
        self.spawn("coordinator", [os.path.join(bindir, "zshard-coordinator"), "--listen",
                                   "127.0.0.1:0", "--data-dir", os.path.join(self.d, "coord"),
                                   "--port-file", pf, "--lease-ms", "1500",
                                   "--trainer-lease-ms", "3000"] + list(coord_args))
        self.addr = self.wait_file(pf)
        for i in range(servers):
            spf = os.path.join(self.d, "server-%d.addr" % i)
            self.server_argv[i] = [os.path.join(bindir, "zshard-server"), "--coordinator",
                                   self.addr, "--data-dir", os.path.join(self.d, "server-%d" % i),
                                   "--capacity", capacity, "--port-file", spf,
                                   "--rdma", "off"] + list(server_args)
            self.spawn("server-%d" % i, self.server_argv[i])
            self.wait_file(spf)

    def spawn(self, name, argv):
        """A daemon, its output in NAME.log (appended to: a restart's too)."""
        with open(os.path.join(self.d, name + ".log"), "ab") as log:
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, preexec_fn=die_with_us)
        self.procs.append(p)
        self.named[name] = p

    def kill_server(self, i):
        """Server i killed with SIGKILL (its memory lost, its disk kept)."""
        p = self.named["server-%d" % i]
        p.kill()
        p.wait()

    def start_server(self, i):
        """Server i started again on its data directory (after kill_server)."""
        self.spawn("server-%d" % i, self.server_argv[i])

    def wait_file(self, path, seconds=15):
        t0 = time.monotonic()
        while True:
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    return text
            if time.monotonic() - t0 > seconds:
                raise RuntimeError("%s did not appear" % path)
            time.sleep(0.05)

    def ctl(self, *args):
        r = subprocess.run([os.path.join(self.bin, "zshardctl"), "--coordinator", self.addr] +
                           list(args), capture_output=True, text=True, timeout=120)
        if r.returncode:
            raise RuntimeError("zshardctl %s: %s" % (" ".join(args), r.stderr))
        return r.stdout

    def close(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.d, ignore_errors=True)
