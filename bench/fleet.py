#!/usr/bin/env python3
"""fleet.py - the simulator's time model (sim/fleet.c) checked against the
real harness at small scale, then run at a fleet's scale.

  1. measures what the model takes as its one measured input here: a
     shard server's start, from its spawn until the coordinator lists it
     up (the fault matrix's flags; median of --starts runs)
  2. measures, with bench/recovery.py, what a trainer kill, a server kill
     (one copy: the rollback) and a server kill with replicas cost the
     fault matrix's cluster: the time from the kill until rank 0 is three
     steps past the step it had finished (median of --trials)
  3. prints the model's time for each beside the measured one, and their
     ratio (the goal: within 1.5x each)
  4. prints the model's goodput at scale (zshard-sim --fleet): 1,024
     servers and 8,192 ranks for 10,000 steps at Llama 3's failure rate,
     and at ten times it

    bench/fleet.py [--trials N] [--starts N] [--runs N]   (make bench runs it)

A benchmark, not a test: it prints, and fails only when a run fails.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("ZSHARD_BIN", os.path.join(ROOT, "build", "bin"))


def server_start(starts):
    """Seconds from a server's spawn until the coordinator lists it up."""
    d = tempfile.mkdtemp(prefix="zshard-fleet-")
    procs = []
    try:
        co = subprocess.Popen([os.path.join(BIN, "zshard-coordinator"), "--listen", "127.0.0.1:0",
                               "--data-dir", os.path.join(d, "coord"),
                               "--port-file", os.path.join(d, "coord.addr"),
                               "--lease-ms", "2000"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(co)
        path = os.path.join(d, "coord.addr")
        t0 = time.monotonic()
        while not (os.path.exists(path) and open(path).read().strip()):
            if time.monotonic() - t0 > 20:
                sys.exit("fleet: the coordinator did not start")
            time.sleep(0.02)
        addr = open(path).read().strip()
        took = []
        for i in range(starts):
            t0 = time.monotonic()
            sv = subprocess.Popen([os.path.join(BIN, "zshard-server"), "--coordinator", addr,
                                   "--data-dir", os.path.join(d, "server-%d" % i),
                                   "--capacity", "256M", "--rdma", "off",
                                   "--listen", "127.0.0.1:0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(sv)
            while True:
                r = subprocess.run([os.path.join(BIN, "zshardctl"), "--coordinator", addr,
                                    "servers"], capture_output=True, text=True, timeout=30)
                if r.stdout.count(" up") >= i + 1:
                    break
                if time.monotonic() - t0 > 20:
                    sys.exit("fleet: server %d did not register within 20 s" % i)
            took.append(time.monotonic() - t0)
        return statistics.median(took)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(d, ignore_errors=True)


def measured(trials):
    """bench/recovery.py's medians: kind -> seconds to three steps past."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "recovery.py"),
                        "--only", "trainer,server,replicated", "--trials", str(trials)],
                       capture_output=True, text=True, env=dict(os.environ, ZSHARD_BIN=BIN))
    if r.returncode:
        sys.exit("fleet: bench/recovery.py failed:\n%s%s" % (r.stdout, r.stderr))
    out = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0] in ("trainer", "server", "replicated"):
            m = re.match(r"([0-9.]+) s", cells[4])
            if m:
                out[cells[0]] = float(m.group(1))
    return out, r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--runs", type=int, default=200)
    a = ap.parse_args()
    sim = os.path.join(BIN, "zshard-sim")
    start = server_start(a.starts)
    print("fleet: a shard server's start, spawn to listed up: %.3f s (median of %d)" %
          (start, a.starts))
    r = subprocess.run([sim, "--fleet", "--check-start-s", "%.4f" % start],
                       capture_output=True, text=True, check=True)
    model = {}
    for line in r.stdout.splitlines():
        m = re.match(r"fleet-check: (\w+) ([0-9.]+) s", line)
        if m:
            model[m.group(1)] = float(m.group(2))
    real, table = measured(a.trials)
    print(table)
    print("| lost | measured: kill to 3 steps past (median) | the time model | model / measured |")
    print("|---|---|---|---|")
    for k in ("trainer", "server", "replicated"):
        if k in real and k in model:
            print("| %s | %.2f s | %.2f s | %.2f |" % (k, real[k], model[k], model[k] / real[k]))
        else:
            print("| %s | %s | %s | - |" % (k, "%.2f s" % real[k] if k in real else "-",
                                            "%.2f s" % model[k] if k in model else "-"))
    print()
    for x in ("1", "10"):
        r = subprocess.run([sim, "--fleet", "--runs", str(a.runs), "--rate-x", x],
                           capture_output=True, text=True, check=True)
        print(r.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
