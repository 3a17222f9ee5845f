"""foreign_check.py - run by foreign.sh inside a bare Debian 12: with nothing
but python3 and the wheel, a local cluster from the installed commands
(started by foreign.sh), a job, two ranks of SGD in threads, and the
parameters after 3 steps against numpy's, bit for bit."""
import threading
import numpy as np
import zshard

N, STEPS, LR = 1000, 3, 0.5
spec = {"name": "foreign", "stage": 3, "world_size": 2, "compute_dtype": "f32",
        "optimizer": {"kind": "sgd", "lr": LR, "momentum": 0.0, "weight_decay": 0.0},
        "units": [{"name": "u0", "tensors": [{"name": "w", "shape": [N]}]}]}
zshard.create_job(spec)
p0 = (np.arange(N, dtype=np.float32) % 13) * np.float32(0.125)


def grad(rank, step):
    return ((np.arange(N) * (rank + 1) + step) % 7).astype(np.float32) * np.float32(0.25)


ts = [zshard.Trainer.join("foreign", rank=r) for r in range(2)]
ts[0].init_unit(0, p0)
errors = []


def run(t):
    try:
        for step in range(STEPS):
            t.step_begin(step)
            t.unit_params(0)
            t.unit_forward_done(0)
            t.unit_params(0, backward=True)
            t.unit_grad(0)[:] = grad(t.rank, step)
            t.unit_push(0)
            t.step_end()
    except Exception as e:
        errors.append(e)


th = [threading.Thread(target=run, args=(t,)) for t in ts]
[x.start() for x in th]
[x.join() for x in th]
assert not errors, errors
out = np.empty(N, dtype=np.float32)
assert ts[0].gather(0, STEPS, out).wait(20000)
want = p0.copy()
for s in range(STEPS):
    want = want - np.float32(LR) * ((grad(0, s) + grad(1, s)) / np.float32(2))
assert np.array_equal(out, want), np.abs(out - want).max()
print("foreign: zshard %s from %s: 2 ranks, %d steps, parameters equal numpy's"
      % (zshard.__version__, zshard.__file__, STEPS))
for t in ts:
    t.close()
