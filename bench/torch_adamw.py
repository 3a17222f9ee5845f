#!/usr/bin/env python3
"""torch_adamw.py - the peer for the optimizer kernel: torch.optim.AdamW
(Debian's python3-torch) stepping N fp32 parameters on CPU, as one tensor
(the way a shard server holds them), foreach and single-tensor
implementations, on 1 and 2 threads. Medians of REPS steps after two
warm-ups, min-max. Run it with GLIBC_TUNABLES=glibc.malloc.hugetlb=1: torch
allocates its temporaries per call, and fresh pages cost ~0.33 GB/s to
touch on these VMs.

    torch_adamw.py N REPS   (markdown rows on stdout)
"""
import sys
import time

import torch


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 32 << 20
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.manual_seed(0)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for foreach in (True, False):
            p = torch.nn.Parameter(torch.rand(n, dtype=torch.float32))
            p.grad = torch.rand(n, dtype=torch.float32) - 0.5
            opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                    weight_decay=0.01, foreach=foreach)
            rates = []
            for r in range(reps + 2):
                t0 = time.perf_counter()
                opt.step()
                dt = time.perf_counter() - t0
                if r >= 2:
                    rates.append(n / dt / 1e9)
            rates.sort()
            print("| torch %s AdamW (%s) | %d | %.3f | %.3f-%.3f |" % (
                torch.__version__, "foreach" if foreach else "single-tensor", threads,
                rates[len(rates) // 2], rates[0], rates[-1]))
            sys.stdout.flush()
            del opt, p


if __name__ == "__main__":
    main()
