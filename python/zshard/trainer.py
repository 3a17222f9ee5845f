"""A trainer of a zshard job: libzshard's handle (include/zshard.h) in Python.

Buffers are numpy arrays. Parameters and gradients of the step driver are
numpy views of libzshard's own buffers (no copy), valid as zshard.h says:
until the unit's parameters are released (stage 3: after its forward and
its backward) or its gradient's push completes. bf16 units are viewed as
uint16 (numpy has no bfloat16); f16 as float16; f32 as float32.

One Trainer is used by one thread at a time; several may live in one
process (each joins as its own rank). Calls release the GIL while they
wait, so ranks in threads run in parallel.
"""
import ctypes
import json
import os
from typing import Any, Dict, List, Optional, Tuple, Union
from ctypes import byref, c_double, c_uint, c_ulonglong, c_void_p

import numpy as np

from zshard import _lib
from zshard._lib import Counters, HParams, Policy, StepStats, lib
from zshard.errors import error_for

F32, BF16, F16 = 1, 2, 3
_NP = {F32: np.float32, BF16: np.uint16, F16: np.float16}


def strerror(code: int) -> str:
    """The short name of a status code, e.g. "not found"."""
    return lib.zs_strerror(code).decode()


def create_job(spec: Union[Dict[str, Any], str], coordinator: Optional[str] = None,
               timeout_ms: int = 10000) -> None:
    """Creates a job from its spec: a dict (or its JSON text) in the format
    of zshardctl job create (name, stage, world_size, compute_dtype,
    optimizer, units with their tensors). zshard.AlreadyExists if a job of
    that name exists (join it: the join checks its layout)."""
    coordinator = coordinator or os.environ.get("ZSHARD_COORDINATOR")
    text = spec if isinstance(spec, str) else json.dumps(spec)
    err = _lib.errbuf()
    # None: libzshard's fallback, the local cluster (zshard-local start)
    rc = lib.zs_create_job(coordinator.encode() if coordinator else None, text.encode(),
                           timeout_ms, err, _lib.ERRLEN)
    if rc:
        raise error_for(rc, err.value.decode(errors="replace"))


def delete_job(job: str, keep_checkpoints: bool = False, coordinator: Optional[str] = None,
               timeout_ms: int = 10000) -> None:
    """Deletes job (zshardctl job delete): its state and, unless
    keep_checkpoints, its checkpoints; a job created again under the name
    is a new one. zshard.NotFound if there is none."""
    coordinator = coordinator or os.environ.get("ZSHARD_COORDINATOR")
    err = _lib.errbuf()
    rc = lib.zs_delete_job(coordinator.encode() if coordinator else None, job.encode(),
                           int(bool(keep_checkpoints)), timeout_ms, err, _lib.ERRLEN)
    if rc:
        raise error_for(rc, err.value.decode(errors="replace"))


def resize_job(job: str, world: int, coordinator: Optional[str] = None,
               timeout_ms: int = 10000) -> int:
    """Changes job's world size to world ranks (zshardctl job resize) from
    a step boundary the coordinator names, which this returns: ranks at or
    above world leave there (their step says zshard.Canceled), new ranks
    join and begin there (Trainer.resume returns the step), each step's
    mean is over its own ranks. zshard.InvalidArgument for a collective
    job or a world out of 1..65536."""
    coordinator = coordinator or os.environ.get("ZSHARD_COORDINATOR")
    err = _lib.errbuf()
    at = c_ulonglong(0)
    rc = lib.zs_resize_job(coordinator.encode() if coordinator else None, job.encode(),
                           int(world), timeout_ms, byref(at), err, _lib.ERRLEN)
    if rc:
        raise error_for(rc, err.value.decode(errors="replace"))
    return at.value


class Op:
    """A gather or push in flight. It owns its buffer until it completes."""

    def __init__(self, trainer, handle, buf):
        self._t, self._h, self._buf = trainer, handle, buf

    def _live(self):
        if not self._t._h:  # closing the trainer dropped the op
            self._h = None
            raise error_for(11, "the trainer was closed before the op completed")
        return self._h

    def test(self) -> bool:
        """True once complete (raising its error if it failed)."""
        if self._h is None:
            return True
        rc = lib.zs_op_test(self._live())
        if rc == 12:  # ZS_EAGAIN: in progress
            return False
        self._h = None
        self._t._check(rc)
        return True

    def wait(self, timeout_ms: int = -1) -> bool:
        """Waits up to timeout_ms (-1: no bound); True once complete, False
        if the bound passed first (still alive); raises its error."""
        if self._h is None:
            return True
        rc = lib.zs_op_wait(self._live(), timeout_ms)
        if rc == 12 and timeout_ms >= 0:
            return False
        self._h = None
        self._t._check(rc)
        return True


class Trainer:
    """One rank of a job. Use Trainer.join(); close() (or a with block)
    leaves the job."""

    def __init__(self, handle):
        self._h = handle
        self._live = {}

    # ------------------------------------------------------------- life
    @classmethod
    def join(cls, job: str, rank: Optional[int] = None, coordinator: Optional[str] = None,
             transport: Optional[str] = None, timeout_ms: int = 10000,
             world_size: Optional[int] = None) -> "Trainer":
        """Joins job as rank (default $RANK, else 0) through the coordinator
        (default $ZSHARD_COORDINATOR, else the launch configuration's,
        $ZSHARD_CONFIG, else the local cluster's: zshard-local start), over transport (default: the configuration's, else
        auto). Waits, within timeout_ms, for servers still loading the job
        and for a rank a lost process still holds. world_size, when given,
        must be the job's (else $WORLD_SIZE, when set, must be)."""
        if rank is None:
            rank = int(os.environ.get("RANK", "0"))
        coordinator = coordinator or os.environ.get("ZSHARD_COORDINATOR")
        h = c_void_p()
        err = _lib.errbuf()
        rc = lib.zs_trainer_join(coordinator.encode() if coordinator else None, job.encode(), rank,
                                 transport.encode() if transport else None,
                                 timeout_ms, byref(h), err, _lib.ERRLEN)
        if rc:
            raise error_for(rc, err.value.decode(errors="replace"))
        t = cls(h)
        want = world_size if world_size is not None else os.environ.get("WORLD_SIZE")
        have = t.world_size
        if want is not None and int(want) != have:
            t.close()
            raise error_for(1, "%s is %s but job '%s' has world size %d" %
                            ("world_size" if world_size is not None else "WORLD_SIZE", want,
                             job, have))
        return t

    def close(self) -> None:
        """Leaves the job (between steps: cleanly; in the middle of a step:
        the job rolls back) and frees the handle. Idempotent."""
        if self._h:
            lib.zs_trainer_close(self._h)
            self._h = None
            self._live.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _handle(self):
        if not self._h:
            raise error_for(10, "the trainer is closed")
        return self._h

    def _check(self, rc):
        if rc:
            msg = lib.zs_trainer_error(self._h).decode(errors="replace") if self._h else ""
            raise error_for(rc, msg)

    # ------------------------------------------------------------- the job
    @property
    def rank(self) -> int:
        return lib.zs_trainer_rank(self._handle())

    @property
    def world_size(self) -> int:
        return lib.zs_trainer_world_size(self._handle())

    @property
    def stage(self) -> int:
        return lib.zs_trainer_stage(self._handle())

    def refresh(self) -> None:
        self._check(lib.zs_trainer_refresh(self._handle()))

    @property
    def units(self) -> int:
        return lib.zs_trainer_units(self._handle())

    def unit_name(self, u: int) -> str:
        return lib.zs_unit_name(self._handle(), self._unit(u)).decode()

    def unit_numel(self, u: int) -> int:
        return lib.zs_unit_numel(self._handle(), self._unit(u))

    def unit_tensors(self, u: int) -> List[Tuple[str, int, Tuple[int, ...], bool]]:
        """Unit u's tensors as the job lays them out: (name, offset in the
        unit's elements, shape, frozen), in order."""
        out = []
        h, u = self._handle(), self._unit(u)
        for i in range(lib.zs_unit_tensors(h, u)):
            name, off, nd = ctypes.c_char_p(), c_ulonglong(), c_uint()
            shape = (c_ulonglong * 8)()
            self._check(lib.zs_unit_tensor(h, u, i, byref(name), byref(off), byref(nd), shape, 8))
            out.append((name.value.decode(), off.value, tuple(shape[d] for d in range(nd.value)),
                        lib.zs_unit_tensor_frozen(h, u, i) == 1))
        return out

    def unit_dtype(self, u: int) -> np.dtype:
        """numpy dtype of unit u (uint16 for bf16)."""
        dt = lib.zs_unit_dtype(self._handle(), self._unit(u))
        return np.dtype(_NP[dt])

    def _unit(self, u):
        if not 0 <= u < self.units:
            raise error_for(1, "unit %d is out of range (%d units)" % (u, self.units))
        return u

    def _buffer(self, u, arr, dtype, writable):
        if arr is None:
            raise error_for(1, "unit %d: no buffer" % u)
        want = self.unit_numel(u)
        if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.size != want or \
                not arr.flags.c_contiguous or (writable and not arr.flags.writeable):
            raise error_for(1, "unit %d wants a contiguous%s numpy array of %d %s" %
                            (u, " writable" if writable else "", want, np.dtype(dtype).name))
        return arr

    # ----------------------------------------------------------- raw ops
    def init_unit(self, u: int, params: np.ndarray) -> None:
        """Uploads unit u's initial float32 parameters (before step 0)."""
        params = self._buffer(u, params, np.float32, False)
        self._check(lib.zs_init_unit(self._handle(), u, params.ctypes.data))

    def init_unit_state(self, u: int, array: int, state: np.ndarray) -> None:
        """Uploads unit u's optimizer array (1 or 2: exp_avg and exp_avg_sq,
        momentum_buffer, sum) imported with its parameters, after
        init_unit and before step 0; the job's spec says the step it was
        taken at (its optimizer's "steps_taken")."""
        state = self._buffer(u, state, np.float32, False)
        self._check(lib.zs_init_unit_state(self._handle(), u, array, state.ctypes.data))

    def _start(self, fn, u, step, arr):
        op = c_void_p()
        self._check(fn(self._handle(), u, step, arr.ctypes.data, byref(op)))
        return Op(self, op, arr)

    def gather(self, u: int, step: int, out: Optional[np.ndarray] = None) -> "Op":
        """Starts a gather of unit u at step into out (a new array if None)."""
        if out is None:
            out = np.empty(self.unit_numel(u), dtype=self.unit_dtype(u))
        return self._start(lib.zs_gather, u, step,
                           self._buffer(u, out, self.unit_dtype(u), True))

    def push(self, u: int, step: int, grad: np.ndarray, partial: bool = False) -> "Op":
        """Starts a push of unit u's gradient for step (partial: one
        micro-batch of several, summed on the server)."""
        fn = lib.zs_push_partial if partial else lib.zs_push
        return self._start(fn, u, step, self._buffer(u, grad, self.unit_dtype(u), False))

    # ------------------------------------------------- hyperparameters
    @property
    def groups(self) -> int:
        """The job's optimizer groups (at least 1)."""
        return lib.zs_trainer_groups(self._handle())

    def hparams(self, group: int) -> Dict[str, float]:
        """Group's values in force for the next step (the last set, else the
        spec's): a dict of lr, weight_decay, beta1, beta2, eps, momentum and
        clip_norm (the job's; 0: no clipping)."""
        h, clip = HParams(), ctypes.c_double()
        rc = lib.zs_trainer_hparams(self._handle(), group, byref(h), byref(clip))
        if rc:
            raise error_for(rc, "group %d is out of range (%d groups)" % (group, self.groups))
        d = {k: getattr(h, k) for k, _ in HParams._fields_}
        d["clip_norm"] = clip.value
        return d

    def set_hparams(self, step: int, groups: List[Dict[str, float]],
                    clip_norm: float = 0.0) -> None:
        """Sets every group's values (a list of dicts with lr, weight_decay,
        beta1, beta2, eps, momentum; missing keys are 0) and the clipping
        norm for the updates of step on; before this rank's first push of
        step. Every rank that sets them must set the same."""
        arr = (HParams * max(len(groups), 1))()
        for i, g in enumerate(groups):
            arr[i] = HParams(*(float(g.get(k, 0.0)) for k, _ in HParams._fields_))
        self._check(lib.zs_set_hparams(self._handle(), step, arr, len(groups), float(clip_norm)))

    # --------------------------------------------------------- step driver
    def set_policy(self, prefetch: int = 1, max_live_bytes: int = 0,
                   reshard_after_forward: bool = True,
                   push_depth: int = 0, op_timeout_ms: int = 0) -> None:
        """The step driver's policy (struct zs_policy): units gathered
        ahead, the live-bytes bound, stage 3's resharding, pushes in
        flight, the longest wait for one gather or push."""
        p = Policy(prefetch, max_live_bytes, int(reshard_after_forward), push_depth,
                   op_timeout_ms)
        self._check(lib.zs_trainer_set_policy(self._handle(), byref(p)))

    def set_device(self, device: int, stream: Optional[int] = None) -> None:
        """The step driver's buffers in device memory (zs_trainer_set_device):
        device a CUDA ordinal, DEVICE_HOST (-1) or DEVICE_EMULATED (-2);
        stream the compute stream's handle (torch's
        torch.cuda.current_stream().cuda_stream; None: the default stream,
        or the calling thread on the emulated device). unit_params_ptr and
        unit_grad_ptr then give device addresses."""
        self._check(lib.zs_trainer_set_device(self._handle(), device, stream))

    def _view(self, u, ptr):
        n = self.unit_numel(u)
        dt = self.unit_dtype(u)
        raw = (ctypes.c_char * (n * dt.itemsize)).from_address(ptr)
        return np.frombuffer(raw, dtype=dt, count=n)

    def step_begin(self, step: int) -> None:
        self._check(lib.zs_step_begin(self._handle(), step))

    def unit_params(self, u: int, backward: bool = False) -> np.ndarray:
        """Unit u's parameters of the current step: a read-only numpy view."""
        v = self._view(u, self.unit_params_ptr(u, backward))
        v.flags.writeable = False
        return v

    def unit_params_ptr(self, u: int, backward: bool = False) -> int:
        """The address of unit u's parameters of the current step (what
        unit_params views), for bindings that wrap it themselves."""
        p = c_void_p()
        self._check(lib.zs_unit_params(self._handle(), u, int(backward), byref(p)))
        return p.value

    def unit_grad_ptr(self, u: int) -> int:
        """The address of unit u's zeroed gradient buffer (unit_grad's)."""
        p = c_void_p()
        self._check(lib.zs_unit_grad(self._handle(), u, byref(p)))
        return p.value

    def unit_forward_done(self, u: int) -> None:
        self._check(lib.zs_unit_forward_done(self._handle(), u))

    def unit_grad(self, u: int) -> np.ndarray:
        """A zeroed numpy view to write unit u's gradient into."""
        return self._view(u, self.unit_grad_ptr(u))

    def unit_push(self, u: int) -> None:
        self._check(lib.zs_unit_push(self._handle(), u))

    def step_end(self) -> None:
        self._check(lib.zs_step_end(self._handle()))

    # --------------------------------------------------------- checkpoints
    def checkpoint(self, step: int, blob: bytes = b"") -> int:
        """Asks for the checkpoint of step (at a step boundary) with this
        rank's blob; returns its id."""
        ident = c_ulonglong()
        buf = ctypes.create_string_buffer(bytes(blob), len(blob)) if blob else None
        self._check(lib.zs_checkpoint(self._handle(), step, buf, len(blob), byref(ident)))
        return ident.value

    def grad_norm(self, step: int, timeout_ms: int = 60000) -> float:
        """The global gradient norm of step (before clipping), as the
        servers computed it to clip: waits until every server reported it.
        FailedPrecondition if the job does not clip."""
        out = c_double()
        self._check(lib.zs_step_grad_norm(self._handle(), step, timeout_ms, byref(out)))
        return out.value

    def checkpoint_wait(self, ident: int, timeout_ms: int = -1) -> bool:
        """True once committed, False if timeout_ms passed first."""
        rc = lib.zs_checkpoint_wait(self._handle(), ident, timeout_ms)
        if rc == 12:
            return False
        self._check(rc)
        return True

    def set_step_state(self, step: int, state: bytes) -> None:
        """This rank's state as of the start of step (RNG, data position:
        at most 1 MiB), before step_begin(step): if the rank is lost in that
        step, the process that takes it next gets (step, state) from
        resume() and computes the step again; the job does not roll back."""
        b = bytes(state)
        buf = ctypes.create_string_buffer(b, len(b)) if b else None
        self._check(lib.zs_set_step_state(self._handle(), step, buf, len(b)))

    def resume(self, cap: int = 1 << 20) -> Optional[Tuple[int, bytes]]:
        """Where this rank starts: None for a new job (step 0; rank 0
        uploads), else (step, blob): a checkpoint's step and this rank's blob
        of it, or the step a lost process of this rank was in and its state
        then (set_step_state), to compute again. Call at start and after
        zshard.Resume."""
        step, n = c_ulonglong(), c_uint()
        buf = ctypes.create_string_buffer(cap)
        rc = lib.zs_trainer_resume(self._handle(), byref(step), buf, cap, byref(n))
        if rc == 2:  # ZS_ENOTFOUND: nothing to come from
            return None
        self._check(rc)
        return step.value, buf.raw[:min(n.value, cap)]

    # why resume() started where it did (include/zshard.h, enum zs_resumed)
    RESUMED = {0: "none", 1: "stopped", 2: "checkpoint", 3: "redo", 4: "resize"}

    def resumed_from(self) -> Tuple[str, int]:
        """Why the last resume() started where it did: ("none", 0): no
        state (step 0); ("stopped", 0): every rank had left the job cleanly
        there (an earlier run ended); ("checkpoint", id): a restore or an
        automatic rollback; ("redo", 0): this process replaces a rank lost
        mid-step; ("resize", 0): a rank new with a resize."""
        ck = c_ulonglong()
        why = lib.zs_trainer_resumed_from(self._handle(), byref(ck))
        return self.RESUMED.get(why, "none"), ck.value

    # ---------------------------------------------------------- accounting
    def counters(self) -> Dict[str, Any]:
        c = Counters()
        lib.zs_trainer_counters(self._handle(), byref(c))
        return {k: getattr(c, k) for k, _ in Counters._fields_}

    def last_step(self) -> Optional[Dict[str, Any]]:
        """The last step's report (a dict), or None before one ended."""
        s = StepStats()
        if lib.zs_last_step(self._handle(), byref(s)):
            return None
        return {k: getattr(s, k) for k, _ in StepStats._fields_}
