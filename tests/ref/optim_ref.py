#!/usr/bin/python3
"""Independent reference for zshard's optimizer kernels and fp16 conversion.

Evaluates the update formulas documented for torch.optim.SGD,
torch.optim.AdamW, torch.optim.Adam (weight decay as L2 added to the
gradient) and torch.optim.Adagrad (PyTorch 1.13, single-tensor path; the
trainer folds Adagrad's lr_decay into the lr it sends) with numpy float32
arithmetic, the step-dependent scalars computed in Python floats (double) and
rounded to float32 once, as PyTorch does for float tensors.

  optim_ref.py optim KIND LR B1 B2 EPS WD MOM STEPS N IN OUT
      IN: N float32 params, then STEPS x N float32 grads
      KIND: sgd, adamw, adam, adagrad
      OUT: N params, N state0 (m, momentum buffer or Adagrad's sum), N state1 (v)
  optim_ref.py f16 IN OUT
      IN: float32 values; OUT: their IEEE binary16 bits (uint16)
"""
import sys
import numpy as np

f32 = np.float32


def step(kind, p, s0, s1, g, t, lr, b1, b2, eps, wd, mom):
    """One update of step t (1-based) of float32 arrays; returns p, s0, s1."""
    if kind == "sgd":
        d = g + f32(wd) * p                      # d_p.add(param, alpha=wd)
        if mom != 0.0:
            s0 = d.copy() if t == 1 else s0 * f32(mom) + d  # buf.mul_(m).add_(d_p)
            d = s0
        p = p + f32(-lr) * d                     # param.add_(d_p, alpha=-lr)
    elif kind == "adagrad":
        if wd != 0.0:
            g = g + f32(wd) * p                  # grad.add(param, alpha=wd)
        s0 = s0 + g * g                          # state_sum.addcmul_(g, g, value=1)
        std = np.sqrt(s0) + f32(eps)             # state_sum.sqrt().add_(eps)
        p = p + f32(-lr) * g / std               # param.addcdiv_(g, std, value=-clr)
    elif kind == "adam":
        if wd != 0.0:
            g = g + f32(wd) * p                  # grad.add(param, alpha=wd)
        s0 = s0 * f32(b1) + f32(1.0 - b1) * g
        s1 = s1 * f32(b2) + f32(1.0 - b2) * g * g
        bc1 = 1.0 - b1 ** t
        bc2 = 1.0 - b2 ** t
        denom = np.sqrt(s1) / f32(bc2 ** 0.5) + f32(eps)
        p = p + f32(-(lr / bc1)) * s0 / denom
    else:
        p = p * f32(1.0 - lr * wd)               # param.mul_(1 - lr * wd)
        s0 = s0 * f32(b1) + f32(1.0 - b1) * g    # exp_avg.mul_(b1).add_(g, alpha=1-b1)
        s1 = s1 * f32(b2) + f32(1.0 - b2) * g * g  # addcmul_(g, g, value=1-b2)
        bc1 = 1.0 - b1 ** t
        bc2 = 1.0 - b2 ** t
        denom = np.sqrt(s1) / f32(bc2 ** 0.5) + f32(eps)
        p = p + f32(-(lr / bc1)) * s0 / denom    # addcdiv_(m, denom, value=-lr/bc1)
    return p, s0, s1


def optim(kind, lr, b1, b2, eps, wd, mom, steps, n, src, dst):
    data = np.fromfile(src, dtype=np.float32)
    p = data[:n].copy()
    grads = data[n:].reshape(steps, n)
    s0 = np.zeros(n, dtype=np.float32)
    s1 = np.zeros(n, dtype=np.float32)
    for t in range(1, steps + 1):
        p, s0, s1 = step(kind, p, s0, s1, grads[t - 1], t, lr, b1, b2, eps, wd, mom)
    np.concatenate([p, s0, s1]).astype(np.float32).tofile(dst)


def main():
    if sys.argv[1] == "optim":
        a = sys.argv[2:]
        optim(a[0], float(a[1]), float(a[2]), float(a[3]), float(a[4]), float(a[5]),
              float(a[6]), int(a[7]), int(a[8]), a[9], a[10])
    elif sys.argv[1] == "f16":
        x = np.fromfile(sys.argv[2], dtype=np.float32)
        with np.errstate(over="ignore"):  # overflow to inf is what we test
            x.astype(np.float16).view(np.uint16).tofile(sys.argv[3])
    else:
        sys.exit("unknown mode " + sys.argv[1])


if __name__ == "__main__":
    main()
