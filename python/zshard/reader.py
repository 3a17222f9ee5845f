"""A weight reader: libzshard's zs_reader (include/zshard_reader.h) in Python.

An inference or rollout worker reads a job's parameters of one step from
its shard servers while training goes on, with no trainer involved:

    with zshard.Reader("job") as r:
        step = r.pin()                 # the latest finished step
        r.load_into(model)             # a torch module, in place, by name
        # or, for vLLM's and SGLang's load_weights:
        llm_model.load_weights(r.weights())

A pinned version is consistent (never two steps mixed) and every range the
servers send is checked against the CRC32C they took of it;
Reader.checksums keeps each tensor's (CRC32C of its bytes in its unit's
dtype). The job's spec must let readers pin ("readers": {"pins": N}).
"""
import os
from ctypes import byref, c_char_p, c_int, c_uint, c_ulonglong, c_void_p
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

import numpy as np

from zshard import _lib
from zshard._lib import lib
from zshard.errors import NotFound, error_for

LATEST = (1 << 64) - 1  # ZS_READER_LATEST
_NAMES = {1: "f32", 2: "bf16", 3: "f16"}
_CODES = {"f32": 1, "fp32": 1, "float32": 1, "bf16": 2, "bfloat16": 2, "f16": 3, "fp16": 3,
          "float16": 3}
_NP = {1: np.float32, 2: np.uint16, 3: np.float16}  # numpy has no bfloat16


class TensorInfo(NamedTuple):
    name: str
    dtype: str   # the unit's: f32, bf16, f16
    shape: Tuple[int, ...]
    numel: int


def _code(dtype) -> int:
    """A dtype as zshard_reader.h numbers it: 1, 2, 3, a name, a torch dtype."""
    if dtype is None or isinstance(dtype, int):
        return dtype
    if isinstance(dtype, str):
        if dtype not in _CODES:
            raise error_for(1, "dtype '%s' is none of f32, bf16, f16" % dtype)
        return _CODES[dtype]
    name = str(dtype).replace("torch.", "")
    if name not in _CODES:
        raise error_for(1, "dtype %s is none of float32, bfloat16, float16" % dtype)
    return _CODES[name]


class Reader:
    """A job opened read-only (its reader token: it may read and pin, never
    push). One thread at a time per Reader."""

    def __init__(self, job: str, coordinator: Optional[str] = None, timeout_ms: int = 30000,
                 relay: Optional[str] = None, fanout: int = 2):
        """Opens job (coordinator None: $ZSHARD_COORDINATOR, the launch
        configuration's, the local cluster's); relay: HOST:PORT to relay
        at (see relay())."""
        coordinator = coordinator or os.environ.get("ZSHARD_COORDINATOR")
        h = c_void_p()
        err = _lib.errbuf()
        rc = lib.zs_reader_open(coordinator.encode() if coordinator else None, job.encode(),
                                int(timeout_ms), byref(h), err, _lib.ERRLEN)
        if rc:
            raise error_for(rc, err.value.decode(errors="replace"))
        self._h = h
        self.job = job
        self.step: Optional[int] = None
        self.checksums: Dict[str, int] = {}
        self.tensors: List[TensorInfo] = [self._info(i) for i in
                                          range(lib.zs_reader_tensors(h))]
        self._by_name = {t.name: t for t in self.tensors}
        if relay:
            self.relay(relay, fanout)

    def _info(self, i: int) -> TensorInfo:
        name, dt, ndim, numel = c_char_p(), c_int(), c_uint(), c_ulonglong()
        shape = (c_ulonglong * 8)()
        self._check(lib.zs_reader_tensor(self._h, i, byref(name), byref(dt), byref(ndim), shape,
                                         8, byref(numel)))
        return TensorInfo(name.value.decode(), _NAMES.get(dt.value, str(dt.value)),
                          tuple(shape[d] for d in range(ndim.value)), numel.value)

    def _check(self, rc: int) -> None:
        if rc:
            msg = lib.zs_reader_error(self._h)
            raise error_for(rc, msg.decode(errors="replace") if msg else "")

    def _live(self):
        if not self._h:
            raise error_for(10, "the reader is closed")
        return self._h

    def close(self) -> None:
        """Releases the pinned version and the connections."""
        if self._h:
            lib.zs_reader_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def relay(self, listen: str = "0.0.0.0:0", fanout: int = 2) -> str:
        """Relays what this reader reads to other readers of its version
        (the job's relay tree: each reader with up to fanout children, the
        first reading from the servers); listen: HOST:PORT (port 0: a free
        one). Keeps a host copy of the version it read. Its address."""
        self._check(lib.zs_reader_relay(self._live(), listen.encode(), int(fanout)))
        return lib.zs_reader_relay_addr(self._h).decode()

    def stats(self) -> Dict[str, int]:
        """Its id and parent (0: the servers) in the relay tree, and bytes
        read from the servers (and of those, taken from their arenas: shm
        on their host, rdma), from its parent (and of those, over rdma),
        and sent to its children."""
        s = _lib.ReaderStats()
        lib.zs_reader_stats(self._live(), byref(s))
        return {f: getattr(s, f) for f, _ in s._fields_}

    def latest(self) -> int:
        """The latest step every shard of the job has finished."""
        s = c_ulonglong()
        self._check(lib.zs_reader_latest(self._live(), byref(s)))
        return s.value

    def wait(self, after: int, timeout_ms: int = -1) -> int:
        """Waits for a finished step after `after` (zshard.TimedOut past
        timeout_ms; -1: the Reader's); the latest."""
        s = c_ulonglong()
        self._check(lib.zs_reader_wait(self._live(), int(after), int(timeout_ms), byref(s)))
        return s.value

    def pin(self, step: Optional[int] = None, checkpoint: Optional[int] = None) -> int:
        """Pins step (None: the latest finished) on every server, or the
        committed checkpoint of that id (read from its servers' records;
        kept from retirement while pinned), releasing the version pinned
        before; the step."""
        s = c_ulonglong()
        if checkpoint is not None:
            if step is not None:
                raise ValueError("pin a step or a checkpoint, not both")
            self._check(lib.zs_reader_pin_checkpoint(self._live(), int(checkpoint), byref(s)))
        else:
            self._check(lib.zs_reader_pin(self._live(), LATEST if step is None else int(step),
                                          byref(s)))
        self.step = s.value
        return s.value

    def checkpoints(self) -> List[Tuple[int, int]]:
        """The job's committed checkpoints, oldest first: (id, step) pairs."""
        n = c_uint()
        self._check(lib.zs_reader_checkpoints(self._live(), None, None, 0, byref(n)))
        while True:
            cap = n.value
            ids, steps = (c_ulonglong * max(cap, 1))(), (c_ulonglong * max(cap, 1))()
            self._check(lib.zs_reader_checkpoints(self._h, ids, steps, cap, byref(n)))
            if n.value <= cap:  # none committed between the two calls
                return [(ids[i], steps[i]) for i in range(n.value)]

    def wait_checkpoint(self, after: int = 0, timeout_ms: int = -1) -> Tuple[int, int]:
        """Waits for a checkpoint committed with an id above `after`
        (zshard.TimedOut past timeout_ms; -1: the Reader's): the newest
        one's (id, step)."""
        i, s = c_ulonglong(), c_ulonglong()
        self._check(lib.zs_reader_wait_checkpoint(self._live(), int(after), int(timeout_ms),
                                                  byref(i), byref(s)))
        return i.value, s.value

    def release(self) -> None:
        """Releases the pinned version."""
        self._check(lib.zs_reader_release(self._live()))
        self.step = None

    def info(self, name: str) -> TensorInfo:
        """The tensor a name stands for (its listed name, UNIT.NAME, or a
        tied parameter's other name): name, unit dtype, shape.
        zshard.NotFound when the job has none."""
        i = c_uint()
        if lib.zs_reader_find(self._live(), name.encode(), byref(i)):
            raise error_for(2, "job '%s' has no tensor '%s'" % (self.job, name))
        return self.tensors[i.value]

    def read_into(self, name: str, ptr: int, nbytes: int, dtype) -> int:
        """Reads tensor name of the pinned version into memory at ptr
        (nbytes of room) as dtype (1/2/3, 'bf16', torch.bfloat16, ...);
        its CRC32C, also kept in checksums[name]."""
        crc = c_uint()
        self._check(lib.zs_reader_read(self._live(), name.encode(), _code(dtype),
                                       c_void_p(ptr), int(nbytes), byref(crc)))
        self.checksums[name] = crc.value
        return crc.value

    def read(self, name: str, dtype=None) -> np.ndarray:
        """Tensor name of the pinned version as a numpy array of its shape,
        in dtype (None: its unit's; bf16 comes as uint16 bit patterns)."""
        t = self.info(name)
        code = _code(dtype) or _CODES[t.dtype]
        out = np.empty(t.shape, dtype=_NP[code])
        self.read_into(t.name, out.ctypes.data, out.nbytes, code)
        return out

    def tensor(self, name: str, dtype=None):
        """Tensor name of the pinned version as a CPU torch tensor (dtype
        None: its unit's)."""
        import torch
        t = self.info(name)
        code = _code(dtype) or _CODES[t.dtype]
        td = {1: torch.float32, 2: torch.bfloat16, 3: torch.float16}[code]
        out = torch.empty(t.shape, dtype=td)
        self.read_into(name, out.data_ptr(), out.numel() * out.element_size(), code)
        return out

    def weights(self, dtype=None) -> Iterator[Tuple[str, "object"]]:
        """(name, torch tensor) for every tensor of the pinned version, the
        shape vLLM's and SGLang's load_weights take."""
        for t in self.tensors:
            yield t.name, self.tensor(t.name, dtype)

    def load_into(self, module, strict: bool = True) -> Dict[str, object]:
        """Copies the pinned version into module's parameters in place, by
        state_dict name (each read in the parameter's dtype, straight into
        it where it is a contiguous CPU tensor; a tied parameter once).
        strict: every parameter of the module and every tensor of the job
        must meet (zshard.NotFound names those that do not, before anything
        is copied). Returns the step, the names loaded, the module's
        parameters the job has not and the job's tensors the module has no
        place for (strict=False)."""
        import torch
        params = list(module.named_parameters(remove_duplicate=False))
        placed, missing, mine = [], [], set()
        for n, p in params:
            try:
                t = self.info(n)
            except NotFound:
                missing.append(n)
                continue
            if tuple(p.shape) != t.shape:
                raise error_for(1, "parameter '%s' is %s in the module, %s in job '%s'" %
                                (n, tuple(p.shape), t.shape, self.job))
            placed.append((n, p, t))
            mine.add(t.name)
        unexpected = [t.name for t in self.tensors if t.name not in mine]
        if strict and (missing or unexpected):
            raise error_for(2, "the module and job '%s' differ: module parameters not in "
                            "the job: %s; job tensors not in the module: %s" %
                            (self.job, missing[:8] or "none", unexpected[:8] or "none"))
        done = set()
        with torch.no_grad():
            for n, p, t in placed:
                if t.name in done:  # tied: one tensor under several names
                    continue
                done.add(t.name)
                if p.device.type == "cpu" and p.is_contiguous():
                    self.read_into(t.name, p.data_ptr(), p.numel() * p.element_size(), p.dtype)
                else:
                    p.copy_(self.tensor(t.name, p.dtype))
        return {"step": self.step, "loaded": [n for n, _, _ in placed], "missing": missing,
                "unexpected": unexpected}
