"""zshard's AdamW kernel (gpu/optim.cu, through build/lib/libzsgpu.so)
against torch.optim.AdamW(fused=True) on the same GPU, the same tensors,
interleaved runs: medians, and GB/s at 28 bytes per parameter.

    python bench/gpu_adamw.py LIBZSGPU N REPS     (a markdown row, or why not)
"""
import ctypes
import math
import statistics
import sys
import time

try:
    import torch
except ImportError:
    print("(no torch: no GPU AdamW comparison)")
    sys.exit(0)


class K(ctypes.Structure):
    """struct zs_adamw_k (math/elem.h)"""
    _fields_ = [(n, ctypes.c_float) for n in
                ("decay", "b1", "b2", "one_b1", "one_b2", "step", "bc2_sqrt", "eps")]


def consts(lr, b1, b2, eps, wd, t):
    """zs_adamw_consts (math/optim.c): doubles, then floats."""
    bc1, bc2 = 1.0 - b1 ** t, 1.0 - b2 ** t
    return K(1.0 - lr * wd, b1, b2, 1.0 - b1, 1.0 - b2, -(lr / bc1), math.sqrt(bc2), eps)


def main():
    lib_path, n, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if not torch.cuda.is_available():
        print("(torch has no CUDA device here: no GPU AdamW comparison)")
        return
    lib = ctypes.CDLL(lib_path)
    f = lib.zs_gpu_adamw
    f.restype = ctypes.c_int
    f.argtypes = [K] + [ctypes.c_void_p] * 4 + [ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    dev = torch.device("cuda", 0)
    p = torch.zeros(n, device=dev)
    g = torch.randn(n, device=dev)
    m, v = torch.zeros(n, device=dev), torch.zeros(n, device=dev)
    p.grad = g
    opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                            fused=True)
    why = ctypes.create_string_buffer(256)
    tz, tt = [], []
    for r in range(reps + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        rc = f(consts(1e-3, 0.9, 0.999, 1e-8, 0.01, r + 1), p.data_ptr(), m.data_ptr(),
               v.data_ptr(), g.data_ptr(), n, why, 256)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        opt.step()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        if rc:
            print("(zshard's kernel failed: %s)" % why.value.decode())
            return
        if r:
            tz.append(t1 - t0)
            tt.append(t2 - t1)
    z, t = statistics.median(tz), statistics.median(tt)
    gb = 28.0 * n / 1e9
    print("| AdamW, %d M fp32 parameters, %s | torch.optim.AdamW(fused=True) | %.0f GB/s | "
          "zshard's kernel | %.0f GB/s | %.2f |" % (n >> 20, torch.cuda.get_device_name(0),
                                                   gb / t, gb / z, t / z))


if __name__ == "__main__":
    main()
