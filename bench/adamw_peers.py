#!/usr/bin/env python3
"""adamw_peers.py - zshard's AdamW kernel against today's peers on the CPU,
in one process, interleaved: each repetition times every contender once,
on N fp32 parameters held as one tensor (the way a shard server holds
them), on THREADS threads:

  - the STREAM-style fp32 triad (its bound: triad GB/s / 28 B per parameter)
  - AdamW's own traffic at memory speed (read p, g, m, v; write p, m, v;
    adds only): the most any AdamW can do here
  - zshard's kernel (math/optim.c, through build/lib/libzsbench.so)
  - torch.optim.AdamW (torch 2.x from PyPI) fused and foreach
  - DeepSpeed's DeepSpeedCPUAdam (AdamW mode)

OMP_NUM_THREADS is set to THREADS before torch loads (DeepSpeed's kernel
takes it, not torch's setting). Prints markdown: the medians of REPS
repetitions (after two warm-ups) with min-max, then the ratios.

    GLIBC_TUNABLES=glibc.malloc.hugetlb=1 adamw_peers.py LIBZSBENCH N REPS THREADS
"""
import ctypes
import os
import sys
import time

THREADS = int(sys.argv[4]) if len(sys.argv) > 4 else 1
os.environ["OMP_NUM_THREADS"] = str(THREADS)
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import numpy as np  # noqa: E402
import torch  # noqa: E402


def arrays(n):
    """p, m, v, g as float32 numpy arrays, every page touched."""
    rng = np.random.default_rng(0)
    g = (rng.random(n, dtype=np.float32) - np.float32(0.5))
    return rng.random(n, dtype=np.float32), np.zeros(n, np.float32), \
        np.zeros(n, np.float32), g


def contenders(lib, n):
    """(name, bytes-per-parameter factor or None, a function timing one run
    and returning G params/s)."""
    ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    f = ctypes.c_double
    lib.zsb_adamw.restype = lib.zsb_triad.restype = lib.zsb_traffic.restype = f
    p, m, v, g = arrays(n)
    step = [0]

    def triad():
        return lib.zsb_triad(ptr(m), ptr(p), ptr(g), ctypes.c_size_t(n), THREADS) / 28.0

    def traffic():
        r = lib.zsb_traffic(ptr(p), ptr(m), ptr(v), ptr(g), ctypes.c_size_t(n), THREADS)
        m.fill(0)
        v.fill(0)
        return r / 28.0

    def zshard():
        step[0] += 1
        return lib.zsb_adamw(ptr(p), ptr(m), ptr(v), ptr(g), ctypes.c_size_t(n), THREADS,
                             ctypes.c_ulonglong(step[0]))

    out = [("fp32 triad bound (triad GB/s / 28 B)", triad),
           ("AdamW traffic at memory speed (GB/s / 28 B)", traffic),
           ("zshard AdamW", zshard)]
    ver = torch.__version__.split("+")[0]
    for name, kw in (("fused", {"fused": True}), ("foreach", {"foreach": True})):
        t = torch.nn.Parameter(torch.rand(n))
        t.grad = torch.rand(n) - 0.5
        opt = torch.optim.AdamW([t], lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.01, **kw)
        out.append(("torch %s AdamW (%s)" % (ver, name), timer(opt.step, n)))
    try:
        import deepspeed
        from deepspeed.ops.adam import DeepSpeedCPUAdam
        t = torch.nn.Parameter(torch.rand(n))
        t.grad = torch.rand(n) - 0.5
        opt = DeepSpeedCPUAdam([t], lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                               weight_decay=0.01, adamw_mode=True)
        out.append(("DeepSpeedCPUAdam %s" % deepspeed.__version__, timer(opt.step, n)))
    except Exception as e:  # not installed, or its op does not build here
        print("(DeepSpeedCPUAdam left out: %s)\n" % str(e).splitlines()[0][:160])
    return out


def timer(fn, n):
    def run():
        t0 = time.perf_counter()
        fn()
        return n / (time.perf_counter() - t0) / 1e9
    return run


def main():
    lib = ctypes.CDLL(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 64 << 20
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    cs = contenders(lib, n)
    got = {name: [] for name, _ in cs}
    for r in range(reps + 2):
        for name, run in cs:
            x = run()
            if r >= 2:
                got[name].append(x)
    med = {}
    print("| who | threads | G params/s (median of %d) | spread (min-max) |" % reps)
    print("|---|---|---|---|")
    for name, _ in cs:
        v = sorted(got[name])
        med[name] = v[len(v) // 2]
        print("| %s | %d | %.3f | %.3f-%.3f |" % (name, THREADS, med[name], v[0], v[-1]))
    peers = [k for k in med if k.startswith("torch") or k.startswith("DeepSpeed")]
    best = max(peers, key=lambda k: med[k])
    z = got["zshard AdamW"]

    def paired(other):
        """The median over repetitions of zshard's rate over other's in the
        same repetition: the machine's drift (shared memory bandwidth)
        cancels out of each pair."""
        r = sorted(a / b for a, b in zip(z, got[other]))
        return r[len(r) // 2]
    print()
    print("| threads | zshard G params/s | best peer | its G params/s | zshard / best peer "
          "| zshard / triad bound | zshard / traffic bound |")
    print("|---|---|---|---|---|---|---|")
    print("| %d | %.3f | %s | %.3f | %.2f | %.2f | %.2f |" % (
        THREADS, med["zshard AdamW"], best, med[best], paired(best),
        paired("fp32 triad bound (triad GB/s / 28 B)"),
        paired("AdamW traffic at memory speed (GB/s / 28 B)")))
    print()
    print("(%d parameters; ratios: medians of the per-repetition ratios, each repetition "
          "timing every contender once in turn)" % n)


if __name__ == "__main__":
    main()
