#!/usr/bin/env python3
"""readers.py - the parts of bench/readers.sh that run in its network
namespaces: a job's setup, a weight reader (zshard.Reader, relaying or
not), the plain alternative's rank 0 (the whole model gathered, then sent
to each reader over tcp, as verl's rank-0 broadcast) and its receivers,
and a reader pulling every version while trainers train.

  readers.py setup COORD JOB TENSORS NUMEL
  readers.py reader COORD JOB STEP FANOUT LISTEN READY GO OUT   (FANOUT 0: no relay)
  readers.py send0 COORD JOB STEP READY GO OUT HOST:PORT...
  readers.py recv HOST PORT BYTES READY OUT
  readers.py follow COORD JOB STOP OUT READY
"""
import ctypes
import json
import os
import socket
import sys
import threading
import time


def wait_file(path, seconds=300):
    t0 = time.monotonic()
    while not os.path.exists(path):
        if time.monotonic() - t0 > seconds:
            sys.exit("readers.py: %s did not appear within %d s" % (path, seconds))
        time.sleep(0.0005)


def put(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.rename(path + ".tmp", path)


def setup(coord, job, tensors, numel):
    import numpy as np
    import zshard
    zshard.create_job({"name": job, "stage": 3, "world_size": 1, "compute_dtype": "f32",
                       "readers": {"pins": 4},
                       "optimizer": {"kind": "sgd", "lr": 0.1},
                       "units": [{"name": "u%d" % k, "tensors": [{"name": "t%d" % k,
                                                                   "shape": [numel]}]}
                                 for k in range(tensors)]}, coordinator=coord)
    t = zshard.Trainer.join(job, rank=0, coordinator=coord, timeout_ms=60000)
    rng = np.random.default_rng(1)
    for u in range(t.units):
        t.init_unit(u, rng.standard_normal(numel).astype(np.float32))
    for u in reversed(range(t.units)):
        p = t.gather(u, 0)
        p.wait()
        t.push(u, 0, (p._buf * 0.5).astype(np.float32)).wait()
    t.close()


def buffers(r):
    return [(t.name, ctypes.create_string_buffer(t.numel * 4)) for t in r.tensors]


def reader(coord, job, step, fanout, listen, ready, go, out):
    import zshard
    r = zshard.Reader(job, coordinator=coord, timeout_ms=120000)
    if fanout:
        r.relay(listen, fanout)
    r.pin(step)
    bufs = buffers(r)
    put(ready, {"id": r.stats()["id"]})
    wait_file(go)
    for name, b in bufs:
        r.read_into(name, ctypes.addressof(b), len(b), 1)
    t1 = time.time()
    put(out, {"t1": t1, "stats": r.stats(), "bytes": sum(len(b) for _, b in bufs)})
    # a parent serves until every reader is done; then each leaves the
    # registry (the next delivery's tree has none of these)
    wait_file(go + ".quit")
    r.close()


def send0(coord, job, step, ready, go, out, peers):
    import zshard
    r = zshard.Reader(job, coordinator=coord, timeout_ms=120000)
    r.pin(step)
    bufs = buffers(r)
    put(ready, {})
    wait_file(go)
    for name, b in bufs:  # rank 0 gathers the whole model ...
        r.read_into(name, ctypes.addressof(b), len(b), 1)
    model = b"".join(bytes(b) for _, b in bufs)
    gathered = time.time()

    def send(peer):  # ... and sends it to each reader
        host, port = peer.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as c:
            c.sendall(model)
            c.shutdown(socket.SHUT_WR)
            c.recv(1)
    th = [threading.Thread(target=send, args=(p,)) for p in peers]
    for x in th:
        x.start()
    for x in th:
        x.join()
    put(out, {"gathered": gathered, "t1": time.time(), "bytes": len(model)})
    r.close()


def recv(host, port, nbytes, ready, out):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(1)
    put(ready, {})
    c, _ = s.accept()
    buf = bytearray(1 << 20)
    n = 0
    while n < nbytes:
        k = c.recv_into(buf)
        if not k:
            break
        n += k
    t1 = time.time()
    c.sendall(b"k")
    c.close()
    put(out, {"t1": t1, "bytes": n})


def follow(coord, job, stop, out, ready):
    """Pulls every version the trainers finish until STOP appears: pin the
    latest, read it whole, wait for the next."""
    import zshard
    r = zshard.Reader(job, coordinator=coord, timeout_ms=120000)
    put(ready, {})
    bufs = None
    versions, last = [], -1
    while not os.path.exists(stop):
        try:
            s = r.latest() if last < 0 else r.wait(last, 500)
        except zshard.TimedOut:
            continue
        try:
            r.pin(s)
        except zshard.TryAgain:  # no parameters yet, or moved on: again
            time.sleep(0.01)
            continue
        if bufs is None:
            bufs = buffers(r)
        for name, b in bufs:
            r.read_into(name, ctypes.addressof(b), len(b), 1)
        versions.append(s)
        last = s
    put(out, {"versions": versions, "stats": r.stats()})
    r.close()


def main():
    a = sys.argv[1:]
    if a[0] == "setup":
        setup(a[1], a[2], int(a[3]), int(a[4]))
    elif a[0] == "reader":
        reader(a[1], a[2], int(a[3]), int(a[4]), a[5], a[6], a[7], a[8])
    elif a[0] == "send0":
        send0(a[1], a[2], int(a[3]), a[4], a[5], a[6], a[7:])
    elif a[0] == "recv":
        recv(a[1], int(a[2]), int(a[3]), a[4], a[5])
    elif a[0] == "follow":
        follow(a[1], a[2], a[3], a[4], a[5])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
