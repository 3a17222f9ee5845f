#!/usr/bin/env python3
"""test_quant.py - zshard's FP8 E4M3 encoder (math/quant.h, through the
helper build/tests/quant_codes) against torch's float8_e4m3fn, an
independent one: every float16 value, every tie between two E4M3 values
and its neighbours, saturation past +-448 (torch's cast clamped first:
zshard's encoder saturates), and two million random fp32 values across
the format's range must give the same byte.

    ZSHARD_BIN=build/bin build/torch-venv/bin/python tests/python/test_quant.py
"""
import os
import subprocess
import sys

import torch


def codes_zshard(x, tool):
    out = subprocess.run([tool], input=x.numpy().tobytes(), capture_output=True, check=True)
    return torch.frombuffer(bytearray(out.stdout), dtype=torch.uint8)


def codes_torch(x):
    return x.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)


def main():
    tool = os.path.join(os.environ.get("ZSHARD_BIN", "build/bin"), "..", "tests", "quant_codes")
    if not os.path.exists(tool):
        print("check: quant FAILED: no %s (make all builds it)" % tool)
        return 1
    half = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(torch.float16).float()
    e4m3 = torch.arange(0, 0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    mids = (e4m3[:-1] + e4m3[1:]) / 2  # exact in fp32
    up = torch.nextafter(mids, torch.full_like(mids, float("inf")))
    down = torch.nextafter(mids, torch.zeros_like(mids))
    g = torch.Generator().manual_seed(5)
    mant = torch.rand(2_000_000, generator=g) + 1.0
    expo = torch.randint(-16, 10, (2_000_000,), generator=g).float()
    sign = torch.randint(0, 2, (2_000_000,), generator=g).float() * 2 - 1
    rand = sign * mant * torch.pow(2.0, expo)
    edge = torch.tensor([0.0, -0.0, 448.0, 449.0, 464.0, 465.0, 1e30, float("inf"), -float("inf"),
                         2.0 ** -10, 2.0 ** -11, 2.0 ** -149])
    x = torch.cat([half, e4m3, -e4m3, mids, -mids, up, -up, down, -down, rand, edge])
    x = x[~torch.isnan(x)].contiguous()
    a, b = codes_zshard(x, tool), codes_torch(x)
    bad = (a != b).nonzero().flatten()
    if len(bad):
        for i in bad[:10].tolist():
            print("  %r: zshard 0x%02x, torch 0x%02x" % (x[i].item(), a[i].item(), b[i].item()))
        print("check: quant FAILED: %d of %d values coded otherwise than torch's float8_e4m3fn"
              % (len(bad), len(x)))
        return 1
    print("check: quant: %d values coded as torch's float8_e4m3fn codes them" % len(x))
    return 0


if __name__ == "__main__":
    sys.exit(main())
